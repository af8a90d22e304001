// Flow entropy for RoCEv2: the UDP source port is the only field ECMP can hash per flow
// (Linux practice, include/rdma/ib_verbs.h), plus a per-session port assignment (session-based RDMA over UDP:
// sessions mapped to distinct UDP 5-tuples).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include <pushwire/wire/errc.hpp>
#include <pushwire/wire/result.hpp>

namespace pushwire::ib {

/// RoCEv2 source ports live in 0xC000-0xFFFF (14 bits of entropy).
inline constexpr std::uint16_t sport_min = 0xC000;
inline constexpr std::uint32_t sport_count = 0x4000;
inline constexpr std::uint32_t flow_label_mask = 0xFFFFF;

/// A symmetric 20-bit flow label from both QPNs (the same from either end).
constexpr std::uint32_t flow_label(std::uint32_t local_qpn, std::uint32_t remote_qpn) {
  std::uint64_t v = static_cast<std::uint64_t>(local_qpn) * remote_qpn;
  v ^= v >> 20;
  v ^= v >> 40;
  return static_cast<std::uint32_t>(v & flow_label_mask);
}

/// The 20-bit flow label folded into a RoCEv2 source port: low 14 bits XOR the high 6.
constexpr std::uint16_t udp_sport(std::uint32_t flow) {
  std::uint32_t lo = flow & 0x3FFF;
  lo ^= (flow & 0xFC000) >> 14;
  return static_cast<std::uint16_t>(lo | sport_min);
}

/// Gives each session of a group its own source port (so each is its own 5-tuple): the port its
/// flow label folds to, or the next free one. Fixed storage; no allocation.
class sport_allocator {
 public:
  /// A port for a session whose flow label is `flow`; too_large when every port is taken.
  constexpr wire::result<std::uint16_t> assign(std::uint32_t flow) {
    if (used_count_ == sport_count) return wire::error{wire::errc::too_large, 0, "sport"};
    std::uint32_t i = udp_sport(flow) - sport_min;
    while (test(i)) i = (i + 1) % sport_count;
    set(i, true);
    ++used_count_;
    return static_cast<std::uint16_t>(sport_min + i);
  }
  /// Returns a port; false if it was not assigned.
  constexpr bool release(std::uint16_t port) {
    if (port < sport_min || !test(port - sport_min)) return false;
    set(port - sport_min, false);
    --used_count_;
    return true;
  }
  constexpr bool in_use(std::uint16_t port) const { return port >= sport_min && test(port - sport_min); }
  constexpr std::uint32_t used() const { return used_count_; }

 private:
  constexpr bool test(std::uint32_t i) const { return bits_[i / 64] >> (i % 64) & 1; }
  constexpr void set(std::uint32_t i, bool v) {
    const std::uint64_t m = std::uint64_t{1} << (i % 64);
    bits_[i / 64] = v ? bits_[i / 64] | m : bits_[i / 64] & ~m;
  }
  std::array<std::uint64_t, sport_count / 64> bits_{};
  std::uint32_t used_count_ = 0;
};

}  // namespace pushwire::ib
