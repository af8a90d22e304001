// Exhaustive bounded exploration of the real flow machines (spec/flow.md §6): breadth-first over
// every order of the enabled events, states deduplicated by a fingerprint of the machines'
// digests plus what is in flight (times left out, so a timer may fire at any point the world
// allows). Every reached state is checked; each test prints how many states it visited.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <deque>
#include <unordered_set>

#include "worlds.hpp"

using namespace pwtest;

namespace {

struct explored {
  std::size_t states = 0, transitions = 0, terminal = 0;
  int depth = 0;
  double seconds = 0;
};

/// World: copyable; events() lists the enabled events (ints); apply(e); fingerprint();
/// check() returns "" or what is violated; done() says everything completed.
template <class World>
explored bfs(const World& init, int max_depth, const char* name) {
  const auto t0 = std::chrono::steady_clock::now();
  explored r;
  std::unordered_set<std::uint64_t> seen{init.fingerprint()};
  std::deque<std::pair<World, int>> q{{init, 0}};
  while (!q.empty()) {
    auto [w, d] = std::move(q.front());
    q.pop_front();
    ++r.states;
    r.depth = std::max(r.depth, d);
    const std::string bad = w.check();
    if (!bad.empty()) {
      FAIL_CHECK(name << ": invariant violated at depth " << d << ": " << bad << "\n" << w.trace);
      return r;
    }
    const std::vector<int> evs = w.events();
    if (evs.empty()) {
      ++r.terminal;
      if (!w.done()) {
        FAIL_CHECK(name << ": deadlock at depth " << d << ": nothing enabled and not complete\n" << w.trace << "\n" << w.describe());
        return r;
      }
    }
    if (d == max_depth) continue;
    for (int e : evs) {
      World n = w;
      n.apply(e);
      ++r.transitions;
      if (seen.insert(n.fingerprint()).second) q.emplace_back(std::move(n), d + 1);
    }
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("explore %s: %zu states, %zu transitions, %zu terminal, depth %d, %.2f s\n", name, r.states, r.transitions,
              r.terminal, r.depth, r.seconds);
  return r;
}

}  // namespace

TEST_CASE("pool credits and flush with idata: every order of transfers, deliveries, releases and flushes") {
  const auto r = bfs(pool_world(false), 1000, "pool (idata)");
  CHECK(r.states > 1000);
  CHECK(r.terminal > 0);
}

TEST_CASE("pool credits and flush with BufferRDMAIndicate: every order of transfers, deliveries, releases and flushes") {
  const auto r = bfs(pool_world(true), 1000, "pool (BufferRDMAIndicate)");
  CHECK(r.states > 1000);
  CHECK(r.terminal > 0);
}

TEST_CASE("RC over a lossy link: every order of deliveries, losses, duplicates, timeouts and a page fault") {
  const auto r = bfs(rc_world(1, env("RC_POSTS", 1)), static_cast<int>(env("RC_DEPTH", 1000)), "rc (1 loss, 1 duplicate, 1 page fault)");
  CHECK(r.terminal > 0);
}

TEST_CASE("DC with two targets: every order of deliveries, losses, duplicates and timeouts keeps data apart") {
  const auto r = bfs(dc_world(), static_cast<int>(env("DC_DEPTH", 1000)), "dc (2 targets, 1 loss, 1 duplicate)");
  CHECK(r.terminal > 0);
}
