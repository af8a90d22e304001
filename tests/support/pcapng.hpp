// pcapng files for tests, seeds and oracles: hand-spelled vectors (one section with two
// interfaces, each block annotated; little- and big-endian) and a small block writer. Written
// from the pcapng draft, byte by byte, independently of wire/pcap.hpp's reader. tshark 4.0 reads
// both vectors as: frame 1 interface 0, 1700000000.123456789, 5 bytes; frame 2 interface 1,
// 1700000000.500000000, 4 of 60 bytes; frame 3 interface 0, no time, 3 bytes.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "test_support.hpp"

namespace pushwire::test::pcapng {

/// One section (length given: 200 bytes), interface 0 Ethernet with if_tsresol 10^-9, interface 1
/// raw IP (linktype 101) with if_tsresol 2^-10, and records EPB(0), ISB, EPB(1), SPB, custom block.
inline constexpr auto little = hex<
    "0a0d0d0a 1c000000 4d3c2b1a 0100 0000 c800000000000000 1c000000"  // SHB: magic, 1.0, section length 200
    "01000000 20000000 0100 0000 00000400 0900 0100 09000000 0000 0000 20000000"  // IDB 0: linktype 1, snaplen 262144, if_tsresol 9
    "01000000 20000000 6500 0000 00000000 0900 0100 8a000000 0000 0000 20000000"  // IDB 1: linktype 101, snaplen 0, if_tsresol 0x8A
    "06000000 28000000 00000000 fe9c9717 15cd853d 05000000 05000000 0102030405 000000 28000000"  // EPB if 0: ts 1700000000123456789
    "05000000 18000000 00000000 00000000 00000000 18000000"  // ISB (skipped)
    "06000000 24000000 01000000 95010000 0002c44f 04000000 3c000000 45000014 24000000"  // EPB if 1: ts (1700000000 << 10) + 512, 4 of 60
    "03000000 14000000 03000000 aabbcc 00 14000000"  // SPB: original length 3
    "ad0b0000 10000000 d97e0000 10000000">();  // custom block 0x00000BAD (skipped)

/// The same file written big-endian.
inline constexpr auto big = hex<
    "0a0d0d0a 0000001c 1a2b3c4d 0001 0000 00000000000000c8 0000001c"
    "00000001 00000020 0001 0000 00040000 0009 0001 09000000 0000 0000 00000020"
    "00000001 00000020 0065 0000 00000000 0009 0001 8a000000 0000 0000 00000020"
    "00000006 00000028 00000000 17979cfe 3d85cd15 00000005 00000005 0102030405 000000 00000028"
    "00000005 00000018 00000000 00000000 00000000 00000018"
    "00000006 00000024 00000001 00000195 4fc40200 00000004 0000003c 45000014 00000024"
    "00000003 00000014 00000003 aabbcc 00 00000014"
    "00000bad 00000010 00007ed9 00000010">();

/// Where each block of `little` / `big` starts (the last entry is the file's size).
inline constexpr std::array<std::size_t, 9> block_offsets{0, 28, 60, 92, 132, 156, 192, 212, 228};

/// Writes pcapng blocks in one byte order (shifted by hand, not through wire/endian.hpp).
class writer {
 public:
  explicit writer(bool big_endian = false) : big_(big_endian) {}

  /// A Section Header Block; its length is -1 unless end_section() fills it in.
  writer& shb() {
    shb_at_ = out.size();
    block(0x0A0D0D0A, [&] {
      u32(0x1A2B3C4D);
      u16(1);
      u16(0);
      u64(~std::uint64_t{0});
    });
    return *this;
  }
  /// Writes the current section's real length into its SHB.
  writer& end_section() {
    put_at(shb_at_ + 16, out.size() - shb_at_ - 28, 8);
    return *this;
  }
  writer& idb(std::uint16_t linktype, std::uint32_t snaplen, std::optional<std::uint8_t> tsresol = {},
              std::optional<std::int64_t> tsoffset = {}) {
    block(1, [&] {
      u16(linktype);
      u16(0);
      u32(snaplen);
      if (tsresol) {
        u16(9);
        u16(1);
        out.push_back(std::byte{*tsresol});
        pad();
      }
      if (tsoffset) {
        u16(14);
        u16(8);
        u64(static_cast<std::uint64_t>(*tsoffset));
      }
      if (tsresol || tsoffset) u32(0);  // opt_endofopt
    });
    return *this;
  }
  /// An Enhanced Packet Block; `orig` 0 means data.size().
  writer& epb(std::uint32_t iface, std::uint64_t ts, std::span<const std::byte> data, std::uint32_t orig = 0) {
    block(6, [&] {
      u32(iface);
      u32(static_cast<std::uint32_t>(ts >> 32));
      u32(static_cast<std::uint32_t>(ts));
      u32(static_cast<std::uint32_t>(data.size()));
      u32(orig ? orig : static_cast<std::uint32_t>(data.size()));
      out.insert(out.end(), data.begin(), data.end());
      pad();
    });
    return *this;
  }
  /// A Simple Packet Block holding `data` (the captured part of a packet of `orig` bytes).
  writer& spb(std::uint32_t orig, std::span<const std::byte> data) {
    block(3, [&] {
      u32(orig);
      out.insert(out.end(), data.begin(), data.end());
      pad();
    });
    return *this;
  }
  /// Any block, with `body` (padded to 4).
  writer& other(std::uint32_t type, std::span<const std::byte> body = {}) {
    block(type, [&] {
      out.insert(out.end(), body.begin(), body.end());
      pad();
    });
    return *this;
  }

  std::vector<std::byte> out;

 private:
  template <class Body>
  void block(std::uint32_t type, Body body) {
    const std::size_t at = out.size();
    u32(type);
    u32(0);
    body();
    const std::size_t total = out.size() - at + 4;
    u32(static_cast<std::uint32_t>(total));
    put_at(at + 4, total, 4);
  }
  void pad() {
    while (out.size() % 4) out.push_back(std::byte{0});
  }
  void put_at(std::size_t at, std::uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out[at + static_cast<std::size_t>(i)] = static_cast<std::byte>(v >> (8 * (big_ ? n - 1 - i : i)));
  }
  void put(std::uint64_t v, int n) {
    out.resize(out.size() + static_cast<std::size_t>(n));
    put_at(out.size() - static_cast<std::size_t>(n), v, n);
  }
  void u16(std::uint16_t v) { put(v, 2); }
  void u32(std::uint32_t v) { put(v, 4); }
  void u64(std::uint64_t v) { put(v, 8); }
  bool big_;
  std::size_t shb_at_ = 0;
};

}  // namespace pushwire::test::pcapng
