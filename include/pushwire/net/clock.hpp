// The clock real transports give a device: nanoseconds on CLOCK_MONOTONIC (steady_clock). Real
// I/O: nothing sans-IO includes it.
#pragma once

#include <chrono>

#include <pushwire/rnic/core.hpp>

namespace pushwire::net {

/// Nanoseconds on CLOCK_MONOTONIC: the time a real transport gives device.progress().
inline rnic::time_ns monotonic_ns() {
  return static_cast<rnic::time_ns>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

}  // namespace pushwire::net
