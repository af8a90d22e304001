// Frames others published: scapy's roce.uts vectors (UC SEND ONLY over IPv4 and IPv6, built
// here from the fields it gives) and a CNP captured on a ConnectX-4 Lx. Oracles for the codec
// (roce_test.cpp) and clean inputs for the conformance checker (flow/conform_test.cpp).
#pragma once

#include <pushwire/ib/roce.hpp>

#include "../support/test_support.hpp"

namespace pushwire::test::public_frames {

using namespace pushwire::ib;

// scapy roce.uts: "UC SEND ONLY" over IPv4 and over IPv6.
inline constexpr auto scapy_payload = test::hex<"4630818be28935d90e9a955054 01be885e50">();
constexpr roce_packet scapy_base() {
  roce_packet p;
  p.eth.dst = p.eth.src = {0x24, 0x8a, 0x07, 0xa8, 0xfa, 0x22};
  p.udp.srcport = 49152;
  p.bth = {.opcode = code(opcode::uc_send_only), .m = true, .p_key = 0xffff, .destqp = 211, .psn = 13571856};
  p.payload = scapy_payload;
  return p;
}
constexpr roce_packet scapy_v4() {
  roce_packet p = scapy_base();
  p.ip4.src = p.ip4.dst = {192, 168, 0, 7};
  p.ip4.dsfield_ecn = 1;
  p.ip4.id = 1144;
  return p;
}
constexpr roce_packet scapy_v6() {
  roce_packet p = scapy_base();
  p.v6 = true;
  p.ip6.src = {0x20, 0x22, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10, 0x23};
  p.ip6.dst = {0x20, 0x23, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10, 0x24};
  p.ip6.tclass = 226;
  p.ip6.flow = 0x1face;
  p.ip6.hlim = 255;
  return p;
}
template <std::size_t N>
constexpr std::array<std::byte, N> built(const roce_packet& s) {
  std::array<std::byte, N> out{};
  (void)build(s, out).value();
  return out;
}
inline constexpr auto v4_frame = built<78>(scapy_v4());
inline constexpr auto v6_frame = built<98>(scapy_v6());
// roce.uts "RoCE CNP captured on ConnectX-4 Lx".
inline constexpr auto cx4_cnp = test::hex<"e41d2dab2bc2 7cfe90643b32 0800 45c2003c718c400040119161 0a001101 0a001201"
                                   "000012b700280000 8100ffff40000118 00000000 00000000000000000000000000000000 82fd002a">();


}  // namespace pushwire::test::public_frames
