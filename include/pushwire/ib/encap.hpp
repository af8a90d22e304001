// The RoCEv2 encapsulation: Ethernet II (optionally 802.1Q tagged; wire/ethernet.hpp), IPv4 or
// IPv6, UDP. Each header is described once; member names are Wireshark's where it has them
// (`wireshark_keys` spells those Wireshark writes with dots). Values are the wire's: ip.hdr_len
// counts 32-bit words where Wireshark shows bytes.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
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

}  // namespace pushwire::ib
