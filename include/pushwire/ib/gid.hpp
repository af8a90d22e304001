// RoCEv2 GIDs and the GRH space of a UD receive. A RoCEv2 GID is the port's IP address as 16
// bytes: an IPv6 address, or an IPv4 address mapped as ::ffff:a.b.c.d (RFC 4291 2.5.5.2; IBTA
// RoCEv2 annex A17.4.5.1). A UD receive buffer starts with 40 bytes of GRH space (verbs'
// convention), which a RoCEv2 device fills with the packet's network header as rxe and mlx5 do:
// an IPv6 packet's 40-byte header, or 20 zero bytes and an IPv4 packet's 20-byte header (its
// options left out). write_grh and read_grh are that layout, written by a device and read by
// the verbs provider (ibv_init_ah_from_wc).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace pushwire::ib {

/// A RoCEv2 GID: 16 bytes, network order.
using gid = std::array<std::uint8_t, 16>;

/// The IPv4-mapped GID of a.b.c.d.
constexpr gid gid_v4(std::uint8_t a, std::uint8_t b, std::uint8_t c, std::uint8_t d) {
  return {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, a, b, c, d};
}
/// The IPv4-mapped GID of an IPv4 address (4 bytes, network order).
constexpr gid gid_v4(const std::array<std::uint8_t, 4>& ip) { return gid_v4(ip[0], ip[1], ip[2], ip[3]); }
/// Whether g is IPv4-mapped.
constexpr bool is_v4(const gid& g) {
  for (std::size_t i = 0; i < 10; ++i)
    if (g[i] != 0) return false;
  return g[10] == 0xFF && g[11] == 0xFF;
}
/// The IPv4 address of an IPv4-mapped GID (its last 4 bytes).
constexpr std::array<std::uint8_t, 4> v4_of(const gid& g) { return {g[12], g[13], g[14], g[15]}; }

/// The node (and port) GUID of a RoCE device with MAC `mac`: its modified EUI-64 (the U/L bit
/// flipped, FF:FE in the middle), as rxe and mlx5 derive it.
constexpr std::uint64_t node_guid_of(const std::array<std::uint8_t, 6>& m) {
  return std::uint64_t{static_cast<std::uint8_t>(m[0] ^ 2u)} << 56 | std::uint64_t{m[1]} << 48 | std::uint64_t{m[2]} << 40 |
         0xFFFEull << 24 | std::uint64_t{m[3]} << 16 | std::uint64_t{m[4]} << 8 | m[5];
}
static_assert(node_guid_of({0x02, 0x00, 198, 18, 0, 1}) == 0x0000'C6FF'FE12'0001ull);

/// Bytes of a UD receive's GRH space.
inline constexpr std::size_t grh_size = 40;
/// Bytes of an IPv4 header without options, and where it starts in the GRH space.
inline constexpr std::size_t grh_ipv4_size = 20, grh_ipv4_at = grh_size - grh_ipv4_size;

/// What a UD receive's GRH space says of the packet.
struct grh_info {
  bool v6 = false;           ///< IPv6; else IPv4
  gid sgid{}, dgid{};        ///< the sender's address and the one the packet was sent to (IPv4: mapped)
  std::uint8_t traffic_class = 0;  ///< IPv6 traffic class; IPv4 DSCP and ECN (the TOS byte)
  std::uint8_t hop_limit = 0;      ///< IPv6 hop limit; IPv4 TTL
  std::uint32_t flow_label = 0;    ///< IPv6 only, 20 bits
  friend constexpr bool operator==(const grh_info&, const grh_info&) = default;
};

/// Fills `out` from a packet's network header: `ip` starts at its IPv6 header (40 bytes are
/// taken) or its IPv4 header (20 are taken; the options after them are not). `ip` must hold them.
constexpr void write_grh(std::span<std::byte, grh_size> out, std::span<const std::byte> ip, bool v6) {
  for (std::byte& b : out) b = std::byte{0};
  const std::size_t n = v6 ? grh_size : grh_ipv4_size, at = v6 ? 0 : grh_ipv4_at;
  for (std::size_t i = 0; i < n && i < ip.size(); ++i) out[at + i] = ip[i];
}

/// The packet a GRH space describes, or nullopt when it holds neither an IPv6 header (version
/// 6 at byte 0) nor 20 zero bytes and an IPv4 header (version 4 at byte 20).
constexpr std::optional<grh_info> read_grh(std::span<const std::byte, grh_size> in) {
  const auto u8 = [&](std::size_t i) { return std::to_integer<std::uint8_t>(in[i]); };
  grh_info g{};
  if ((u8(0) >> 4) == 6) {
    g.v6 = true;
    g.traffic_class = static_cast<std::uint8_t>((u8(0) << 4) | (u8(1) >> 4));
    g.flow_label = (std::uint32_t{u8(1)} & 0x0F) << 16 | std::uint32_t{u8(2)} << 8 | u8(3);
    g.hop_limit = u8(7);
    for (std::size_t i = 0; i < 16; ++i) g.sgid[i] = u8(8 + i), g.dgid[i] = u8(24 + i);
    return g;
  }
  for (std::size_t i = 0; i < grh_ipv4_at; ++i)
    if (u8(i) != 0) return std::nullopt;
  constexpr std::size_t ip = grh_ipv4_at;
  if ((u8(ip) >> 4) != 4) return std::nullopt;
  g.traffic_class = u8(ip + 1);
  g.hop_limit = u8(ip + 8);
  g.sgid = gid_v4(u8(ip + 12), u8(ip + 13), u8(ip + 14), u8(ip + 15));
  g.dgid = gid_v4(u8(ip + 16), u8(ip + 17), u8(ip + 18), u8(ip + 19));
  return g;
}

}  // namespace pushwire::ib
