// Flow: buffer-pool credits and flush, owner and user, driven by events chosen by the input
// (transfers, deliveries, write completions, releases, flushes by either side, Gets), with
// idata or BufferRDMAIndicate. Invariants after every event; complete after settling.
#include <cstdint>

#include "drive.hpp"
#include "worlds.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  pushwire::fuzz::provider in(data, size);
  pwtest::pool_world w(in.flag());
  pushwire::fuzz::drive(w, in);
  return 0;
}
