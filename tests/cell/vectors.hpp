// Hand-spelled cell frames (spec/cells.md §7). The bytes were written from the spec's layout; the
// CRC-32C values come from an independent bitwise CRC-32C (tests/cell/make_vectors.py).
#pragma once

#include <array>
#include <cstddef>
#include <span>

#include <pushwire/cell/cell.hpp>

#include "../support/test_support.hpp"

namespace pushwire::test::cells {

using namespace pushwire::cell;

inline constexpr mac_address host{0x02, 0, 0, 0, 0, 0x01}, iou{0x02, 0, 0, 0, 0, 0x02};

// A Send of "ping", one cell, ACK requested: 44 bytes padded to 60.
inline constexpr auto send_bytes = hex<
    "02 00 00 00 00 02 02 00 00 00 00 01 88 b5 10 d0"
    "00 00 22 00 00 11 00 00 00 64 00 00 00 01 00 04"
    "70 69 6e 67 0d c8 4c 77 2e 69 c5 b8 00 00 00 00"
    "00 00 00 00 00 00 00 00 00 00 00 00">();
inline constexpr std::array<std::byte, 4> ping{std::byte{'p'}, std::byte{'i'}, std::byte{'n'}, std::byte{'g'}};

// An RDMA write of bytes 0..19 in cells of 8, with the seed's idata (pool 7, element 5, 256
// bytes) in the last cell.
inline constexpr auto write_first_bytes = hex<
    "02 00 00 00 00 02 02 00 00 00 00 01 88 b5 11 88"
    "00 00 22 00 00 11 00 00 01 f4 00 00 00 03 00 08"
    "00 00 7f 00 00 01 05 00 00 00 12 34 00 01 02 03"
    "04 05 06 07 44 a1 d1 e2 00 00 00 00">();
inline constexpr auto write_middle_bytes = hex<
    "02 00 00 00 00 02 02 00 00 00 00 01 88 b5 11 00"
    "00 00 22 00 00 11 00 00 01 f4 00 01 00 03 00 08"
    "08 09 0a 0b 0c 0d 0e 0f f4 0d 49 65 00 00 00 00"
    "00 00 00 00 00 00 00 00 00 00 00 00">();
inline constexpr auto write_last_bytes = hex<
    "02 00 00 00 00 02 02 00 00 00 00 01 88 b5 11 60"
    "00 00 22 00 00 11 00 00 01 f4 00 02 00 03 00 04"
    "07 05 01 00 10 11 12 13 48 ef d7 55 ce c5 c8 b7"
    "00 00 00 00 00 00 00 00 00 00 00 00">();
inline constexpr auto write_payload = [] {
  std::array<std::byte, 20> a{};
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<std::byte>(i);
  return a;
}();
inline constexpr std::size_t write_cell_payload = 8;

// ACK, NAK (remote access error) and page-fault delay (2000 us) of PSN 0x1F4 / 0x1F5.
inline constexpr auto ack_bytes = hex<
    "02 00 00 00 00 02 02 00 00 00 00 01 88 b5 12 c0"
    "00 00 11 00 00 22 00 00 01 f4 00 00 00 01 00 00"
    "00 00 00 00 00 00 00 00 2e 07 e3 2d 3f 18 27 bd"
    "00 00 00 00 00 00 00 00 00 00 00 00">();
inline constexpr auto nak_bytes = hex<
    "02 00 00 00 00 02 02 00 00 00 00 01 88 b5 13 c0"
    "00 00 11 00 00 22 00 00 01 f4 00 00 00 01 00 00"
    "02 00 00 00 00 00 00 00 91 d1 9d 6c de 26 dd c4"
    "00 00 00 00 00 00 00 00 00 00 00 00">();
inline constexpr auto pfd_bytes = hex<
    "02 00 00 00 00 02 02 00 00 00 00 01 88 b5 14 c0"
    "00 00 11 00 00 22 00 00 01 f5 00 00 00 01 00 00"
    "00 00 00 00 00 00 07 d0 0d d0 2e e0 ee 7a d0 d2"
    "00 00 00 00 00 00 00 00 00 00 00 00">();

constexpr packet_spec send_spec() {
  return {.dst = iou, .src = host, .dst_wqp = 0x22, .src_wqp = 0x11, .psn = 0x64, .type = cell_type::send, .ack_req = true};
}
constexpr packet_spec write_spec() {
  return {.dst = iou, .src = host, .dst_wqp = 0x22, .src_wqp = 0x11, .psn = 0x1F4, .type = cell_type::rdma_write,
          .rdma = vamh{.va = 0x00007f0000010500, .mh = 0x1234}, .idata = 0x07050100};
}
constexpr packet_spec control_spec(cell_type t, std::uint32_t psn, ack_info a) {
  return {.dst = iou, .src = host, .dst_wqp = 0x11, .src_wqp = 0x22, .psn = psn, .type = t, .ack = a};
}
constexpr packet_spec ack_spec() { return control_spec(cell_type::ack, 0x1F4, {}); }
constexpr packet_spec nak_spec() {
  return control_spec(cell_type::nak, 0x1F4, {.code = static_cast<std::uint8_t>(nak_code::remote_access_error)});
}
constexpr packet_spec pfd_spec() { return control_spec(cell_type::page_fault_delay, 0x1F5, {.delay_us = 2000}); }

/// The frames a segmenter makes of (p, payload), concatenated, when each is N bytes.
template <std::size_t Cells, std::size_t N = 60>
constexpr std::array<std::array<std::byte, N>, Cells> segment(const packet_spec& p, std::span<const std::byte> payload,
                                                              std::size_t cell_payload) {
  std::array<std::array<std::byte, N>, Cells> out{};
  auto s = segmenter::make(p, payload, cell_payload).value();
  for (auto& f : out) (void)s.next(f).value();
  return out;
}

template <std::size_t N>
constexpr bool same(const std::array<std::byte, N>& a, const std::array<std::byte, N>& b) {
  for (std::size_t i = 0; i < N; ++i)
    if (a[i] != b[i]) return false;
  return true;
}

}  // namespace pushwire::test::cells
