// One processing pipeline shared by a device's ports (spec/qos.md §9), one for each direction:
// a byte rate and a packet budget, and the port arbiter between the ports that wait for it.
// Sans-IO: time is an argument; the frames stay with the ports.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>

#include <pushwire/flow/ets.hpp>
#include <pushwire/rnic/core.hpp>

namespace pushwire::rnic {

class pipeline {
 public:
  /// How far a pipeline may run ahead of its rate: a jumbo frame's bytes, and 8 packets.
  static constexpr std::uint32_t burst_bytes = 9216, burst_packets = 8;

  /// `bits_per_s`: its rate (0: none); `packets_per_s`: its packet budget (0: none; at most
  /// 10^9).
  pipeline(std::uint64_t bits_per_s, std::uint64_t packets_per_s)
      : bytes_(bits_per_s, burst_bytes), packets_(flow::rate_limiter::packets(packets_per_s, burst_packets)) {}
  bool enabled() const { return bytes_.rate() || packets_.rate(); }
  /// Whether a packet may pass at `now`.
  bool eligible(time_ns now) const { return bytes_.eligible(now) && packets_.eligible(now); }
  /// When the next packet may pass (nullopt: no limit).
  std::optional<time_ns> eligible_at() const {
    const auto a = bytes_.eligible_at(), b = packets_.eligible_at();
    if (!a) return b;
    return b ? std::max(*a, *b) : a;
  }
  /// Whether port `port` may pass a packet at `now`: the pipeline allows one, and while it
  /// binds (what passed runs ahead of its rate or budget) the port served last yields to any
  /// other for which `waiting(other)` holds, so the ports take turns.
  template <class Waiting>
  bool may(std::size_t port, std::size_t ports, time_ns now, Waiting&& waiting) const {
    if (!enabled()) return true;
    if (!eligible(now)) return false;
    if (port == last_ && (bytes_.limiting(now) || packets_.limiting(now)))
      for (std::size_t o = 0; o < ports; ++o)
        if (o != port && waiting(o)) return false;
    return true;
  }
  /// The port that passes next among `ports` for which `waiting` holds: the first after the one
  /// served last, round robin; nullopt when none waits.
  template <class Waiting>
  std::optional<std::size_t> next(std::size_t ports, Waiting&& waiting) const {
    for (std::size_t k = 1; k <= ports; ++k)
      if (const std::size_t o = (last_ + k) % ports; waiting(o)) return o;
    return std::nullopt;
  }
  /// A packet of `bytes` from port `port` passed at `now`.
  void passed(std::size_t port, std::uint64_t bytes, time_ns now) {
    bytes_.sent(bytes, now);
    packets_.sent(1, now);
    last_ = port;
  }

 private:
  flow::rate_limiter bytes_, packets_;
  std::size_t last_ = 0;                ///< the port served last
};

}  // namespace pushwire::rnic
