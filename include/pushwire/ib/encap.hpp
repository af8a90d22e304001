// The RoCEv2 encapsulation: Ethernet II (optionally 802.1Q tagged; wire/ethernet.hpp), IPv4 or
// IPv6, UDP. Each header is described once; member names are Wireshark's where it has them
// (`wireshark_keys` spells those Wireshark writes with dots). Values are the wire's: ip.hdr_len
// counts 32-bit words where Wireshark shows bytes.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include <pushwire/wire/codec.hpp>
#include <pushwire/wire/ethernet.hpp>
#include <pushwire/wire/options.hpp>

namespace pushwire::ib {

namespace wire = ::pushwire::wire;

using wire::eth_header;
using wire::ethertype_vlan;
using wire::mac_address;
using wire::vlan_tag;
using wire::ipv4_address;
using wire::ipv6_address;

inline constexpr std::uint16_t ethertype_ipv4 = 0x0800;
inline constexpr std::uint16_t ethertype_ipv6 = 0x86DD;
inline constexpr std::uint8_t ip_proto_udp = 17;
/// IANA's RoCEv2 UDP destination port.
inline constexpr std::uint16_t roce_port = wire::roce_udp_port;

/// IPv4 header without options (IHL > 5 adds 4 * (IHL - 5) option bytes after it). RFC 791.
struct ipv4_header {
  static constexpr std::string_view wireshark = "ip";
  static constexpr wire::key_name wireshark_keys[] = {{"dsfield_dscp", "dsfield.dscp"}, {"dsfield_ecn", "dsfield.ecn"},
                                                      {"flags_rb", "flags.rb"}, {"flags_df", "flags.df"},
                                                      {"flags_mf", "flags.mf"}};
  PUSHWIRE_STRUCT(ipv4_header,
      (wire::bits<0, 7, 4>, version),
      /// header length in 32-bit words, 5..15
      (wire::bits<0, 3, 0>, hdr_len),
      (wire::bits<1, 7, 2>, dsfield_dscp),
      (wire::bits<1, 1, 0>, dsfield_ecn),
      /// IP header + payload, bytes
      (std::uint16_t, len),
      (std::uint16_t, id),
      (wire::bits<6, 15, 15, bool>, flags_rb),
      (wire::bits<6, 14, 14, bool>, flags_df),
      (wire::bits<6, 13, 13, bool>, flags_mf),
      (wire::bits<6, 12, 0>, frag_offset),
      (std::uint8_t, ttl),
      (std::uint8_t, proto),
      (std::uint16_t, checksum),
      (ipv4_address, src),
      (ipv4_address, dst));
};

struct ipv6_header {
  static constexpr std::string_view wireshark = "ipv6";
  PUSHWIRE_STRUCT(ipv6_header,
      (wire::bits<0, 31, 28>, version),
      (wire::bits<0, 27, 20>, tclass),
      (wire::bits<1, 19, 0>, flow),
      /// bytes after this header
      (std::uint16_t, plen),
      (std::uint8_t, nxt),
      (std::uint8_t, hlim),
      (ipv6_address, src),
      (ipv6_address, dst));
};

struct udp_header {
  static constexpr std::string_view wireshark = "udp";
  PUSHWIRE_STRUCT(udp_header,
      (std::uint16_t, srcport),
      (std::uint16_t, dstport),
      /// UDP header + payload, bytes
      (std::uint16_t, length),
      (std::uint16_t, checksum));
};

static_assert(wire::fixed_size<ipv4_header> == 20 && wire::fixed_size<ipv6_header> == 40 &&
              wire::fixed_size<udp_header> == 8);

/// The Internet checksum (RFC 1071) of b, continuing from a partial one's unfolded sum.
constexpr std::uint32_t inet_sum(std::span<const std::byte> b, std::uint32_t sum = 0) {
  std::size_t i = 0;
  for (; i + 1 < b.size(); i += 2) sum += wire::load_be16(b.data() + i);
  if (i < b.size()) sum += static_cast<std::uint32_t>(static_cast<std::uint8_t>(b[i]) << 8);
  return sum;
}
constexpr std::uint16_t inet_fold(std::uint32_t sum) {
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  return static_cast<std::uint16_t>(~sum & 0xFFFF);
}

/// The ECN field's values (RFC 3168): the IP header's two low traffic class / TOS bits.
enum class ecn : std::uint8_t { not_ect = 0, ect1 = 1, ect0 = 2, ce = 3 };
inline constexpr std::array<wire::named_value, 4> ecn_names{{
    {ecn::not_ect, "Not-ECT"}, {ecn::ect1, "ECT(1)"}, {ecn::ect0, "ECT(0)"}, {ecn::ce, "CE"}}};
constexpr std::span<const wire::named_value> wire_enum_names(ecn) { return ecn_names; }

/// Where the IP header of an Ethernet frame starts (after one 802.1Q tag, if any), and whether
/// it is IPv6; nullopt when the frame carries neither IPv4 nor IPv6, or is too short for its
/// fixed header.
struct ip_at {
  std::size_t offset;
  bool v6;
};
constexpr std::optional<ip_at> find_ip(std::span<const std::byte> frame) {
  std::size_t at = wire::eth_header_size;
  if (frame.size() < at) return std::nullopt;
  std::uint16_t type = wire::load_be16(frame.data() + 12);
  if (type == ethertype_vlan) {
    if (frame.size() < at + 4) return std::nullopt;
    type = wire::load_be16(frame.data() + 16);
    at += 4;
  }
  if (type == ethertype_ipv4 && frame.size() >= at + 20 && (std::to_integer<unsigned>(frame[at]) >> 4) == 4) return ip_at{at, false};
  if (type == ethertype_ipv6 && frame.size() >= at + 40 && (std::to_integer<unsigned>(frame[at]) >> 4) == 6) return ip_at{at, true};
  return std::nullopt;
}
/// The traffic class byte (IPv4: type of service; IPv6: traffic class) of the IP header at
/// `ip`: DSCP in its six high bits, ECN in its two low ones.
constexpr std::uint8_t traffic_class_at(const std::byte* ip, bool v6) {
  const unsigned b0 = std::to_integer<unsigned>(ip[0]), b1 = std::to_integer<unsigned>(ip[1]);
  return static_cast<std::uint8_t>(v6 ? (b0 & 0x0F) << 4 | b1 >> 4 : b1);
}
/// That byte of an Ethernet frame's IP header (nullopt: no IP header).
constexpr std::optional<std::uint8_t> traffic_class_of(std::span<const std::byte> frame) {
  const auto ip = find_ip(frame);
  if (!ip) return std::nullopt;
  return traffic_class_at(frame.data() + ip->offset, ip->v6);
}
/// The ECN field of an Ethernet frame's IP header (nullopt: no IP header).
constexpr std::optional<ecn> ecn_of(std::span<const std::byte> frame) {
  const auto t = traffic_class_of(frame);
  if (!t) return std::nullopt;
  return static_cast<ecn>(*t & 3);
}
/// Marks an ECN-capable frame Congestion Experienced, as a congested switch does: the ECN
/// field becomes CE and an IPv4 header checksum is brought up to date (RFC 1624). The ICRC
/// masks both (spec/roce.md §8). Returns false, changing nothing, when the frame has no IP
/// header or is not ECT(0) / ECT(1); true when it is CE after the call.
constexpr bool mark_ce(std::span<std::byte> frame) {
  const auto ip = find_ip(frame);
  const auto e = ecn_of(frame);
  if (!ip || !e || *e == ecn::not_ect) return false;
  if (*e == ecn::ce) return true;
  std::byte& b = frame[ip->offset + 1];
  const std::uint16_t before = wire::load_be16(frame.data() + ip->offset);
  b |= std::byte{static_cast<std::uint8_t>(ip->v6 ? 0x30 : 0x03)};
  if (!ip->v6) {  // HC' = ~(~HC + ~m + m'), over the 16-bit word holding the TOS byte
    const std::uint16_t after = wire::load_be16(frame.data() + ip->offset);
    const std::uint32_t hc = wire::load_be16(frame.data() + ip->offset + 10);
    std::uint32_t sum = (~hc & 0xFFFF) + (~std::uint32_t{before} & 0xFFFF) + after;
    while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
    wire::store_be16(frame.data() + ip->offset + 10, static_cast<std::uint16_t>(~sum & 0xFFFF));
  }
  return true;
}

}  // namespace pushwire::ib
