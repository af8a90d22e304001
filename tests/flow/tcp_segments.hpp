// TCP segments built byte by byte for the aggregator's tests and fuzz target: Ethernet, IPv4 or
// IPv6, TCP with or without a timestamp option, and a payload that is a function of its sequence
// number; checksums by this file's own RFC 1071 sum, written apart from the code under test.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <pushwire/ib/tcp.hpp>

namespace pushwire::test::tcp {

using bytes = std::vector<std::byte>;

namespace tf = ib::tcp_flag;

/// RFC 1071, written apart from the code under test: 16-bit big-endian words summed in 64 bits.
inline std::uint16_t csum(const std::vector<std::uint8_t>& b) {
  std::uint64_t s = 0;
  for (std::size_t i = 0; i < b.size(); i += 2) s += (std::uint64_t{b[i]} << 8) | (i + 1 < b.size() ? b[i + 1] : 0);
  while (s >> 16) s = (s & 0xFFFF) + (s >> 16);
  return static_cast<std::uint16_t>(~s);
}
inline void put16(std::vector<std::uint8_t>& b, std::size_t at, unsigned v) { b[at] = static_cast<std::uint8_t>(v >> 8), b[at + 1] = static_cast<std::uint8_t>(v); }
inline void put32(std::vector<std::uint8_t>& b, std::size_t at, std::uint32_t v) { put16(b, at, v >> 16), put16(b, at + 2, v & 0xFFFF); }
inline unsigned get16(const bytes& b, std::size_t at) { return std::to_integer<unsigned>(b[at]) << 8 | std::to_integer<unsigned>(b[at + 1]); }
inline std::uint32_t get32(const bytes& b, std::size_t at) { return get16(b, at) << 16 | get16(b, at + 2); }

/// The payload byte at sequence number `seq`.
inline std::uint8_t data_at(std::uint32_t seq) { return static_cast<std::uint8_t>(seq * 7 + (seq >> 9)); }

struct seg {
  std::uint32_t seq = 1000;
  std::size_t len = 1448;
  std::uint8_t flags = tf::ack;
  std::uint16_t id = 1;
  bool df = true;
  std::uint8_t ttl = 64, tos = 0;
  std::uint32_t tsval = 77;  ///< the timestamp option's value (options: NOP NOP TS, 12 bytes)
  bool options = true;
  bool v6 = false;
  std::uint16_t sport = 40000, dport = 5201, window = 512;
  std::uint32_t ack = 5000;
};

/// An Ethernet frame of s, checksums right.
inline bytes frame(const seg& s) {
  const std::size_t ip = 14, iph = s.v6 ? 40 : 20, thl = s.options ? 32 : 20, l4 = ip + iph;
  std::vector<std::uint8_t> b(l4 + thl + s.len);
  for (int i = 0; i < 6; ++i) b[static_cast<std::size_t>(i)] = i == 0 ? 2 : 1, b[static_cast<std::size_t>(6 + i)] = i == 0 ? 2 : 2;
  put16(b, 12, s.v6 ? 0x86DD : 0x0800);
  std::vector<std::uint8_t> pseudo;
  if (s.v6) {
    b[ip] = 0x60 | (s.tos >> 4), b[ip + 1] = static_cast<std::uint8_t>(s.tos << 4);
    put16(b, ip + 4, static_cast<unsigned>(thl + s.len));
    b[ip + 6] = 6, b[ip + 7] = s.ttl;
    b[ip + 8] = 0xFD, b[ip + 23] = 1;  // fd00::1
    b[ip + 24] = 0xFD, b[ip + 39] = 2;  // fd00::2
    pseudo.assign(b.begin() + ip + 8, b.begin() + ip + 40);
  } else {
    b[ip] = 0x45, b[ip + 1] = s.tos;
    put16(b, ip + 2, static_cast<unsigned>(20 + thl + s.len));
    put16(b, ip + 4, s.id);
    b[ip + 6] = s.df ? 0x40 : 0;
    b[ip + 8] = s.ttl, b[ip + 9] = 6;
    b[ip + 12] = 198, b[ip + 13] = 18, b[ip + 14] = 0, b[ip + 15] = 1;
    b[ip + 16] = 198, b[ip + 17] = 18, b[ip + 18] = 0, b[ip + 19] = 2;
    put16(b, ip + 10, csum(std::vector<std::uint8_t>(b.begin() + ip, b.begin() + ip + 20)));
    pseudo.assign(b.begin() + ip + 12, b.begin() + ip + 20);
  }
  put16(b, l4, s.sport), put16(b, l4 + 2, s.dport);
  put32(b, l4 + 4, s.seq), put32(b, l4 + 8, s.ack);
  b[l4 + 12] = static_cast<std::uint8_t>(thl / 4 << 4), b[l4 + 13] = s.flags;
  put16(b, l4 + 14, s.window);
  if (s.options) {
    b[l4 + 20] = 1, b[l4 + 21] = 1, b[l4 + 22] = 8, b[l4 + 23] = 10;
    put32(b, l4 + 24, s.tsval), put32(b, l4 + 28, 99);
  }
  for (std::size_t i = 0; i < s.len; ++i) b[l4 + thl + i] = data_at(s.seq + static_cast<std::uint32_t>(i));
  const std::size_t tl = thl + s.len;
  const auto t = [&](int shift) { return static_cast<std::uint8_t>(tl >> shift); };
  if (s.v6) pseudo.insert(pseudo.end(), {t(24), t(16), t(8), t(0), 0, 0, 0, 6});  // RFC 8200 §8.1
  else pseudo.insert(pseudo.end(), {0, 6, t(8), t(0)});                         // RFC 9293 §3.1
  std::vector<std::uint8_t> sum = pseudo;
  sum.insert(sum.end(), b.begin() + static_cast<std::ptrdiff_t>(l4), b.end());
  put16(b, l4 + 16, csum(sum));
  bytes out(b.size());
  for (std::size_t i = 0; i < b.size(); ++i) out[i] = std::byte{b[i]};
  return out;
}

/// Whether an aggregate's IPv4 header checksum and TCP checksum are right (this file's sum).
inline bool checksums_good(const bytes& f, bool v6) {
  std::vector<std::uint8_t> b(f.size());
  for (std::size_t i = 0; i < f.size(); ++i) b[i] = std::to_integer<std::uint8_t>(f[i]);
  const std::size_t ip = 14, l4 = ip + (v6 ? 40 : 20);
  if (!v6 && csum(std::vector<std::uint8_t>(b.begin() + ip, b.begin() + ip + 20)) != 0) return false;
  std::vector<std::uint8_t> s;
  if (v6) s.assign(b.begin() + ip + 8, b.begin() + ip + 40);
  else s.assign(b.begin() + ip + 12, b.begin() + ip + 20);
  const std::size_t tl = b.size() - l4;
  if (v6) s.insert(s.end(), {static_cast<std::uint8_t>(tl >> 24), static_cast<std::uint8_t>(tl >> 16), static_cast<std::uint8_t>(tl >> 8), static_cast<std::uint8_t>(tl), 0, 0, 0, 6});
  else s.insert(s.end(), {0, 6, static_cast<std::uint8_t>(tl >> 8), static_cast<std::uint8_t>(tl)});
  s.insert(s.end(), b.begin() + static_cast<std::ptrdiff_t>(l4), b.end());
  return csum(s) == 0;
}

}  // namespace pushwire::test::tcp
