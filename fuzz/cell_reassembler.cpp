// Cells: the stateful reassembler, fed a sequence of cells cut from the input (each a length
// and that many bytes, at a time that only moves forward), with expiry in between. Bounds hold
// and every delivered packet fits them.
#include <cstdint>
#include <span>

#include <pushwire/cell/reassembler.hpp>

#include "provider.hpp"

using namespace pushwire;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::provider in(data, size);
  const cell::reassembly_limits lim{.max_packets = 4, .max_packet_bytes = 4096, .max_bytes = 8192, .max_age_ns = 10'000};
  cell::reassembler r(lim);
  std::uint64_t now = 0;
  std::size_t pushed = 0;
  while (!in.empty() && pushed < 256) {
    now += in.take<std::uint8_t>() * 100u;
    if (in.pick(8) == 0) {
      r.expire(now);
      continue;
    }
    const auto frame = in.bytes(600);
    const auto res = r.push(frame, now);
    ++pushed;
    if (res.packet) {
      PUSHWIRE_FUZZ_CHECK(res.packet->payload.size() <= lim.max_packet_bytes);
      PUSHWIRE_FUZZ_CHECK(res.packet->cells >= 1);
    }
    if (res.status == cell::push_status::rejected) PUSHWIRE_FUZZ_CHECK(res.error.code != wire::errc{});
  }
  const auto& s = r.stats();
  PUSHWIRE_FUZZ_CHECK(s.cells <= pushed);
  PUSHWIRE_FUZZ_CHECK(s.delivered <= s.cells);
  return 0;
}
