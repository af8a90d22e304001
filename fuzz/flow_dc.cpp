// Flow: a DC initiator and two DC targets over a lossy link, driven by events chosen by the
// input. Data meant for one target is never placed at the other; complete after settling.
#include <cstdint>

#include "drive.hpp"
#include "worlds.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  pushwire::fuzz::provider in(data, size);
  pwtest::dc_world w;
  pushwire::fuzz::drive(w, in);
  return 0;
}
