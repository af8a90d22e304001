// Seeded faults of one direction of a link (spec/rnic.md §8): what happens to one frame, drawn
// from the caller's random engine, and applied to it. Sans-IO: the loopback fabric applies a
// verdict in virtual time, net/ in real time; both take it, and apply it, from here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <random>
#include <span>

#include <pushwire/rnic/core.hpp>

namespace pushwire::rnic {

/// Faults of one direction of a link. Probabilities are fractions (0.05 = 5%), per frame.
struct direction_faults {
  double loss = 0, duplicate = 0, reorder = 0, corrupt = 0, delay = 0;
  /// A reordered frame is held back by 1 .. max_reorder ns (frames sent meanwhile pass it).
  time_ns max_reorder = 20'000;
  /// A delayed frame arrives 1 .. max_delay ns late.
  time_ns max_delay = 100'000;
};

/// What happens to one frame.
struct fault_verdict {
  bool lost = false;
  std::optional<std::size_t> flip_bit{};   ///< corrupted: this bit (bit 0 = the first byte's lowest)
  time_ns extra = 0;                       ///< held back (reordered, delayed) by this many ns
  bool reordered = false, delayed = false;
  std::optional<time_ns> duplicate_extra{};  ///< duplicated: the copy arrives this much after the frame's own time
};

/// The verdict for a frame of `size` bytes. The draws, in this order, are loss, corruption (and
/// its bit), reordering (and its hold), delay (and its length), duplication (and the copy's
/// lag); a fault that is off draws nothing, so runs with the same seed and faults repeat.
template <class Rng>
fault_verdict decide(const direction_faults& fx, std::size_t size, Rng& r) {
  fault_verdict v;
  std::uniform_real_distribution<double> u(0, 1);
  auto chance = [&](double p) { return p > 0 && u(r) < p; };
  if (chance(fx.loss)) {
    v.lost = true;
    return v;
  }
  if (chance(fx.corrupt) && size > 0) v.flip_bit = std::uniform_int_distribution<std::size_t>(0, size * 8 - 1)(r);
  if (chance(fx.reorder)) {
    v.reordered = true;
    v.extra += std::uniform_int_distribution<time_ns>(1, std::max<time_ns>(fx.max_reorder, 1))(r);
  }
  if (chance(fx.delay)) {
    v.delayed = true;
    v.extra += std::uniform_int_distribution<time_ns>(1, std::max<time_ns>(fx.max_delay, 1))(r);
  }
  if (chance(fx.duplicate)) v.duplicate_extra = std::uniform_int_distribution<time_ns>(0, std::max<time_ns>(fx.max_reorder, 1))(r);
  return v;
}

/// What a verdict leaves of a frame: whether it goes at all, when it arrives (or leaves), and
/// when its copy does, if it was duplicated.
struct fault_outcome {
  bool lost = false;
  time_ns at = 0;
  std::optional<time_ns> copy_at{};
};

/// Applies verdict v to a frame due at `at`: flips its bit (corruption), holds it back
/// (reordering, delay) and times its copy (duplication). Counts into c what it applies: lost,
/// corrupted and duplicated, and either held (a frame held back) or reordered and delayed,
/// whichever c has. The loopback fabric and net/'s send queues both apply verdicts here.
template <class Counters>
fault_outcome apply(const fault_verdict& v, std::span<std::byte> frame, time_ns at, Counters& c) {
  if (v.lost) {
    ++c.lost;
    return {.lost = true};
  }
  if (v.flip_bit && *v.flip_bit / 8 < frame.size()) {
    ++c.corrupted;
    frame[*v.flip_bit / 8] ^= static_cast<std::byte>(1u << (*v.flip_bit % 8));
  }
  if constexpr (requires { c.held; }) {
    c.held += v.extra > 0;
  } else {
    c.reordered += v.reordered;
    c.delayed += v.delayed;
  }
  fault_outcome o{.at = at + v.extra};
  if (v.duplicate_extra) {
    ++c.duplicated;
    o.copy_at = o.at + *v.duplicate_extra;
  }
  return o;
}

}  // namespace pushwire::rnic
