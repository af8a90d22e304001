// Drives a flow world (tests/flow/worlds.hpp) from fuzz input: each step picks one of the
// enabled events; the world's invariants are checked after every event. When the input is
// used up, the world settles (the first enabled event each step: posts, timers, deliveries)
// and must then be complete: nothing lost, nothing stuck.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "provider.hpp"

namespace pushwire::fuzz {

template <class World>
void drive(World& w, provider& in, int max_steps = 4000) {
  auto checked = [&] {
    const std::string bad = w.check();
    if (!bad.empty()) {
      std::fprintf(stderr, "%s\nevents: %s\n", bad.c_str(), w.trace.c_str());
      fail("world invariant");
    }
  };
  for (int i = 0; i < max_steps && !in.empty(); ++i) {
    const auto evs = w.events();
    if (evs.empty()) break;
    w.apply(evs[in.in(0, static_cast<std::uint32_t>(evs.size() - 1))]);
    checked();
  }
  for (int i = 0; i < 20000; ++i) {
    const auto evs = w.events();
    if (evs.empty()) break;
    w.apply(evs.front());
    checked();
  }
  if (!w.events().empty() || !w.done()) {
    std::fprintf(stderr, "not complete after settling\nevents: %s\n", w.trace.c_str());
    fail("world completes");
  }
}

/// The flow targets' entry: one input in four drives `hostile` (peers built field by field
/// from the input), the others drive the world make(in) returns.
template <class MakeWorld>
int world_or_hostile(const std::uint8_t* data, std::size_t size, void (*hostile)(provider&), MakeWorld&& make) {
  provider in(data, size);
  if (in.pick(4) == 0) {
    hostile(in);
    return 0;
  }
  auto w = make(in);
  drive(w, in);
  return 0;
}

}  // namespace pushwire::fuzz
