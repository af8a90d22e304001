// TCP's header (RFC 9293 §3.1), for the LAN segments the split-model driver's I/O unit joins
// (flow/tcp_agg.hpp), and the pseudo-header sum of TCP's and UDP's checksums. Options follow the
// fixed 20 bytes when the data offset is above 5. Member names are Wireshark's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include <pushwire/ib/encap.hpp>

namespace pushwire::ib {

inline constexpr std::uint8_t ip_proto_tcp = 6;

struct tcp_header {
  static constexpr std::string_view wireshark = "tcp";
  PUSHWIRE_STRUCT(tcp_header,
      (std::uint16_t, srcport),
      (std::uint16_t, dstport),
      /// sequence number of the first payload byte (of the SYN, when SYN is set)
      (std::uint32_t, seq),
      /// the next sequence number the sender expects (when ACK is set)
      (std::uint32_t, ack),
      /// header length in 32-bit words, 5..15 (Wireshark's tcp.hdr_len counts bytes)
      (wire::bits<12, 7, 4>, hdr_len),
      (wire::bits<12, 3, 0>, reserved),
      /// CWR ECE URG ACK PSH RST SYN FIN, bit 7 to bit 0 (tcp_flag)
      (std::uint8_t, flags),
      /// the receive window, in bytes before the window scale option's shift
      (std::uint16_t, window_size_value),
      (std::uint16_t, checksum),
      (std::uint16_t, urgent_pointer));
};
static_assert(wire::fixed_size<tcp_header> == 20);

/// tcp_header::flags bits.
namespace tcp_flag {
inline constexpr std::uint8_t fin = 0x01, syn = 0x02, rst = 0x04, psh = 0x08, ack = 0x10, urg = 0x20, ece = 0x40, cwr = 0x80;
}

/// The unfolded Internet-checksum sum of a transport's pseudo-header (RFC 9293 §3.1 for IPv4,
/// RFC 8200 §8.1 for IPv6): the IP header `ip`'s source and destination addresses, the protocol
/// and the transport's length in bytes (header and payload). `ip` holds at least the fixed
/// header (20 or 40 bytes).
constexpr std::uint32_t pseudo_sum(std::span<const std::byte> ip, bool v6, std::uint8_t proto, std::uint32_t length) {
  const std::size_t at = v6 ? 8 : 12, n = v6 ? 32 : 8;
  return inet_sum(ip.subspan(at, n)) + proto + (length >> 16) + (length & 0xFFFF);
}

}  // namespace pushwire::ib
