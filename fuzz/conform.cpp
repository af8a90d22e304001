// Conformance: flow::conformance fed a capture cut from the input (each frame: a time step, a
// choice of being cut by the snap length, and up to 2 KiB of bytes), with or without a path MTU.
// Whatever the frames, every verdict names a rule and a frame that was fed (an immediate one the
// frame just fed), and the summary counts every verdict.
#include <cstdint>
#include <span>
#include <vector>

#include <pushwire/flow/conform.hpp>

#include "provider.hpp"

using namespace pushwire;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::provider in(data, size);
  flow::conform_options opt;
  opt.mtu = in.pick(3) == 0 ? 1024 : 0;
  opt.limits.max_streams = 16;
  opt.limits.history = 64;
  opt.limits.reads = 8;
  opt.limits.max_deferred = 64;
  opt.limits.cell_packets = 4;
  opt.limits.cell_packet_bytes = 4096;
  flow::conformance c(opt);
  std::uint64_t now = 1'000'000'000, frames = 0, seen = 0;
  while (!in.empty() && frames < 512) {
    now += in.take<std::uint16_t>();
    const bool cut = in.pick(8) == 0;
    const auto f = in.bytes(2048);
    ++frames;
    if (opt.mtu == 0 && frames == 1) c.learn(f);
    for (const flow::violation& v : c.check(frames, now, f, cut ? f.size() + 64 : 0)) {
      PUSHWIRE_FUZZ_CHECK(v.frame == frames);
      PUSHWIRE_FUZZ_CHECK(static_cast<std::size_t>(v.id) < flow::rule_count);
      ++seen;
    }
  }
  for (const flow::violation& v : c.finish()) {
    PUSHWIRE_FUZZ_CHECK(v.frame >= 1 && v.frame <= frames);
    PUSHWIRE_FUZZ_CHECK(static_cast<std::size_t>(v.id) < flow::rule_count);
    ++seen;
  }
  const auto& s = c.summary();
  std::uint64_t counted = 0;
  for (const auto n : s.violations) counted += n;
  PUSHWIRE_FUZZ_CHECK(counted == seen + s.dropped_violations);
  PUSHWIRE_FUZZ_CHECK(s.frames == frames);
  PUSHWIRE_FUZZ_CHECK(s.roce + s.cells + s.other <= frames);
  return 0;
}
