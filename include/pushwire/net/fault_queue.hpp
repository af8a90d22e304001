// The send path's seeded faults for real transports (spec/net.md §2): a frame queued for the
// wire is lost, corrupted in one bit, held back, or duplicated as rnic::decide says and
// rnic::apply applies, with the same draws as the loopback fabric. Shared by net::udp_port and
// net::packet_port.
#pragma once

#include <list>
#include <optional>
#include <random>
#include <span>
#include <utility>

#include <pushwire/rnic/faults.hpp>

namespace pushwire::net {

/// Queues `p` (with `at` and `bytes`) on `out` under `f`'s faults, counting them in `c` (with
/// lost, corrupted, held and duplicated). A held frame's `at` moves later; a duplicate follows.
template <class Pending, class Counters>
void queue_with_faults(std::list<Pending>& out, Pending p, const rnic::direction_faults& f, std::mt19937_64& rng, Counters& c) {
  const rnic::fault_outcome o = rnic::apply(rnic::decide(f, p.bytes.size(), rng), std::span<std::byte>(p.bytes.data(), p.bytes.size()), p.at, c);
  if (o.lost) return;
  p.at = o.at;
  if (o.copy_at) {
    Pending d = p;
    d.at = *o.copy_at;
    out.push_back(std::move(d));
  }
  out.push_back(std::move(p));
}

/// When the earliest frame of `out` is due, or nullopt.
template <class Pending>
std::optional<rnic::time_ns> next_due(const std::list<Pending>& out) {
  std::optional<rnic::time_ns> t;
  for (const Pending& o : out) t = t ? std::min(*t, o.at) : o.at;
  return t;
}

}  // namespace pushwire::net
