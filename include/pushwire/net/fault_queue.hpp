// The send path's seeded faults for real transports (spec/net.md §2): a frame queued for the
// wire is lost, corrupted in one bit, held back, or duplicated as rnic::decide says, with the
// same draws as the loopback fabric. Shared by net::udp_port and net::packet_port.
#pragma once

#include <list>
#include <random>
#include <utility>

#include <pushwire/rnic/faults.hpp>

namespace pushwire::net {

/// Queues `p` (with `at` and `bytes`) on `out` under `f`'s faults, counting them in `c` (with
/// lost, corrupted, held and duplicated). A held frame's `at` moves later; a duplicate follows.
template <class Pending, class Counters>
void queue_with_faults(std::list<Pending>& out, Pending p, const rnic::direction_faults& f, std::mt19937_64& rng, Counters& c) {
  const rnic::fault_verdict v = rnic::decide(f, p.bytes.size(), rng);
  if (v.lost) {
    ++c.lost;
    return;
  }
  if (v.flip_bit) {
    ++c.corrupted;
    p.bytes[*v.flip_bit / 8] ^= static_cast<std::byte>(1u << (*v.flip_bit % 8));
  }
  p.at += v.extra;
  c.held += v.extra > 0;
  if (v.duplicate_extra) {
    ++c.duplicated;
    Pending d = p;
    d.at += *v.duplicate_extra;
    out.push_back(std::move(d));
  }
  out.push_back(std::move(p));
}

}  // namespace pushwire::net
