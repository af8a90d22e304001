// Test hooks for the flow/ machines: not part of the API (a machine's state normally changes
// only through its table). Tests, fuzzers and explorers use them to start a machine in a state
// that no short sequence of events reaches.
#pragma once

#include <type_traits>
#include <utility>

#include <pushwire/flow/core.hpp>

namespace pushwire::flow::testing {

/// The one friend of every machine that has a settable state (requester, responder,
/// dc_initiator, dc_target).
struct access {
  template <class M, class S>
  static constexpr void set_state(M& m, S s) {
    m.st_ = s;
  }
};

/// Puts `m` in state `s` without running a transition (no action, no counter, no timer).
template <class M>
  requires requires(const M& m) { m.state(); }
constexpr void set_state(M& m, std::remove_cvref_t<decltype(std::declval<const M&>().state())> s) {
  access::set_state(m, s);
}

}  // namespace pushwire::flow::testing
