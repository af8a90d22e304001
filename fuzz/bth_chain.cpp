// RoCEv2: the BTH header-chain parse on its own. The input is the UDP payload (BTH, extended
// headers, payload, pad, ICRC); the target wraps it in a fixed Ethernet / IPv4 / UDP header
// with consistent lengths, so every input reaches the chain parser.
#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include <pushwire/ib/roce.hpp>

#include "provider.hpp"

using namespace pushwire;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > 9000) return 0;
  std::vector<std::byte> frame(14 + 20 + 8 + size);
  const auto put16 = [&](std::size_t at, std::size_t v) {
    frame[at] = static_cast<std::byte>(v >> 8);
    frame[at + 1] = static_cast<std::byte>(v);
  };
  put16(12, 0x0800);                         // EtherType IPv4
  frame[14] = std::byte{0x45};               // version 4, IHL 5
  put16(16, 20 + 8 + size);                  // total length
  frame[22] = std::byte{64};                 // TTL
  frame[23] = std::byte{17};                 // UDP
  put16(34, 0xC000);                         // source port
  put16(36, ib::roce_port);                  // destination port 4791
  put16(38, 8 + size);                       // UDP length
  for (std::size_t i = 0; i < size; ++i) frame[42 + i] = static_cast<std::byte>(data[i]);
  for (const auto rd : {ib::rd_class::dc, ib::rd_class::ibta_rd}) {
    ib::roce_view v{};
    const wire::error e = ib::inspect(frame, v, {.crc = ib::crc_check::skip, .rd = rd});
    if (e.code != wire::errc{}) {
      PUSHWIRE_FUZZ_CHECK(e.offset <= frame.size());
      continue;
    }
    PUSHWIRE_FUZZ_CHECK(v.bth_offset == 42);
    PUSHWIRE_FUZZ_CHECK(v.op != nullptr);
    PUSHWIRE_FUZZ_CHECK(v.op->header_len + v.payload.size() + v.pad.size() + 4 == size);
    ib::roce_packet p{};
    ib::decode(v, p);
    for (std::size_t k = 0; k < v.op->chain_len; ++k) PUSHWIRE_FUZZ_CHECK(v.op->offset[k] + ib::size_of(v.op->chain[k]) <= size);
  }
  return 0;
}
