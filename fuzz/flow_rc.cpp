// Flow: RC requester and responder over a lossy link (deliveries, a loss, a duplicate,
// reordering, timers, a page fault), driven by events chosen by the input. No data placed or
// delivered twice, completions in order and successful; complete after settling.
#include <cstdint>

#include "drive.hpp"
#include "worlds.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  pushwire::fuzz::provider in(data, size);
  pwtest::rc_world w(static_cast<int>(in.pick(3)), in.pick(4));
  pushwire::fuzz::drive(w, in);
  return 0;
}
