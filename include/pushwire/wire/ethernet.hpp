// Ethernet II framing (IEEE 802.3, optional 802.1Q tag), shared by the RoCEv2 (ib/) and cell
// (cell/) encapsulations. Member names are Wireshark's.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include <pushwire/wire/codec.hpp>

namespace pushwire::wire {

using mac_address = std::array<std::uint8_t, 6>;
/// The broadcast address ff:ff:ff:ff:ff:ff.
inline constexpr mac_address broadcast_mac{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};

inline constexpr std::uint16_t ethertype_vlan = 0x8100;
/// Bytes in an Ethernet II header, and in one 802.1Q tag.
inline constexpr std::size_t eth_header_size = 14, vlan_tag_size = 4;
/// Smallest Ethernet frame without its FCS; shorter frames are padded with zeros to this size.
inline constexpr std::size_t eth_min_frame = 60;

struct eth_header {
  static constexpr std::string_view wireshark = "eth";
  PUSHWIRE_STRUCT(eth_header, (mac_address, dst), (mac_address, src), (std::uint16_t, type));
};

/// The 4 bytes after an Ethernet header whose type is 0x8100.
struct vlan_tag {
  static constexpr std::string_view wireshark = "vlan";
  PUSHWIRE_STRUCT(vlan_tag,
      /// priority code point, 0..7
      (wire::bits<0, 15, 13>, priority),
      /// drop eligible indicator
      (wire::bits<0, 12, 12, bool>, dei),
      /// VLAN identifier, 0..4095
      (wire::bits<0, 11, 0>, id),
      /// EtherType of what follows
      (std::uint16_t, etype));
};

static_assert(fixed_size<eth_header> == eth_header_size && fixed_size<vlan_tag> == vlan_tag_size);

/// Where an Ethernet frame's payload starts and which EtherType it carries, looking through at
/// most one 802.1Q tag. errc::truncated (field "eth" or "vlan") when the headers are cut short.
struct eth_payload {
  std::uint16_t type = 0;
  std::size_t offset = 0;  ///< 14, or 18 with a tag
  bool has_vlan = false;
};
constexpr result<eth_payload> locate_payload(std::span<const std::byte> frame) {
  if (frame.size() < eth_header_size) return error{errc::truncated, frame.size(), "eth"};
  eth_payload p{read<eth_header, "type">(frame.data()), eth_header_size, false};
  if (p.type == ethertype_vlan) {
    if (frame.size() < eth_header_size + vlan_tag_size) return error{errc::truncated, frame.size(), "vlan"};
    p = {read<vlan_tag, "etype">(frame.data() + eth_header_size), eth_header_size + vlan_tag_size, true};
  }
  return p;
}

/// EtherType of ARP (RFC 826).
inline constexpr std::uint16_t ethertype_arp = 0x0806;

/// An ARP packet for IPv4 over Ethernet (RFC 826): 28 bytes after the Ethernet header. Member
/// names are Wireshark's with `_` for `.` (arp.hw.type, arp.src.proto_ipv4, ...).
struct arp_packet {
  PUSHWIRE_STRUCT(arp_packet,
      /// hardware type: 1 (Ethernet)
      (std::uint16_t, hw_type),
      /// protocol type: 0x0800 (IPv4)
      (std::uint16_t, proto_type),
      /// hardware address length: 6
      (std::uint8_t, hw_size),
      /// protocol address length: 4
      (std::uint8_t, proto_size),
      /// 1 request, 2 reply
      (std::uint16_t, opcode),
      (mac_address, src_hw_mac),
      (ip_address<4>, src_proto_ipv4),
      (mac_address, dst_hw_mac),
      (ip_address<4>, dst_proto_ipv4));
};
static_assert(fixed_size<arp_packet> == 28);

/// A gratuitous ARP (RFC 5227 §3's announcement): a request from `mac` for its own address `ip`,
/// target hardware address zero, so that neighbours and switches learn where `ip` is now.
constexpr arp_packet gratuitous_arp(const mac_address& mac, const ip_address<4>& ip) {
  arp_packet a{};
  a.hw_type = 1, a.proto_type = 0x0800, a.hw_size = 6, a.proto_size = 4, a.opcode = 1;
  a.src_hw_mac = mac, a.src_proto_ipv4 = ip, a.dst_proto_ipv4 = ip;
  return a;
}

}  // namespace pushwire::wire
