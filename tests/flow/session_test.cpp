// Sessions over UDP 5-tuples: the privileged table, the application's read-only group and its
// policies, and the resequencing receiver.
#include <catch2/catch.hpp>

#include <algorithm>
#include <deque>
#include <numeric>
#include <set>
#include <map>
#include <type_traits>

#include "harness.hpp"

using namespace pwtest;

namespace {

five_tuple tuple(std::uint16_t sport, std::uint8_t host = 1) {
  five_tuple t;
  t.src = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 10, 0, 0, host};
  t.dst = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 10, 0, 0, 2};
  t.sport = sport;
  return t;
}

session_table<8> table_with_groups() {
  session_table<8> t;
  for (std::uint32_t s = 0; s < 3; ++s) REQUIRE(t.bind(s, tuple(static_cast<std::uint16_t>(0xC000 + s)), 1, 0x11) == errc{});
  REQUIRE(t.bind(10, tuple(0xD000), 2, 0x22) == errc{});
  return t;
}

template <class G>
concept can_bind = requires(G g) { g.table().bind(0u, five_tuple{}, 0u, 0u); };
template <class T>
concept owner_can_bind = requires(T t) { t.bind(0u, five_tuple{}, 0u, 0u); };
template <class G>
concept can_unbind = requires(G g) { g.table().unbind(0u); };

}  // namespace

TEST_CASE("session table: only the owner binds, the application's group cannot write it") {
  session_table<8> t = table_with_groups();
  CHECK(t.bind(0, tuple(0xE000), 1, 0x11) == errc::duplicate);   // session already bound
  CHECK(t.bind(20, tuple(0xC000), 1, 0x11) == errc::duplicate);  // tuple already bound
  // the group hands out only a const table: bind / unbind do not compile through it
  static_assert(std::is_same_v<decltype(std::declval<session_group<8>&>().table()), const session_table<8>&>);
  static_assert(!can_bind<session_group<8>>);
  static_assert(!can_unbind<session_group<8>>);
  static_assert(owner_can_bind<session_table<8>>);  // the check can fail: the owner's type can
  session_table<2> small;
  CHECK(small.bind(1, tuple(1), 1, 1) == errc{});
  CHECK(small.bind(2, tuple(2), 1, 1) == errc{});
  CHECK(small.bind(3, tuple(3), 1, 1) == errc::table_full);
  CHECK(small.unbind(1) == errc{});
  CHECK(small.unbind(1) == errc::unknown_tuple);
}

TEST_CASE("session group: round robin, flow hash and least outstanding pick within the group") {
  const session_table<8> t = table_with_groups();
  session_group<8> rr(t, 1, pick_policy::round_robin);
  std::vector<std::uint32_t> picks;
  for (int i = 0; i < 6; ++i) picks.push_back(rr.pick()->session);
  CHECK(picks == std::vector<std::uint32_t>{0, 1, 2, 0, 1, 2});
  CHECK(rr.sequence() == 5);

  session_group<8> fh(t, 1, pick_policy::flow_hash);
  std::map<std::uint64_t, std::uint32_t> first;
  std::set<std::uint32_t> used;
  for (std::uint64_t flow = 0; flow < 64; ++flow) {
    const auto s = fh.pick(flow)->session;
    first.emplace(flow, s);
    CHECK(first[flow] == s);
    CHECK(fh.pick(flow)->session == s);  // stable
    used.insert(s);
    CHECK(s <= 2);  // never outside the group
  }
  CHECK(used.size() == 3);  // and spread across it

  session_group<8> lo(t, 1, pick_policy::least_outstanding);
  CHECK(lo.pick()->session == 0);
  CHECK(lo.pick()->session == 1);
  CHECK(lo.pick()->session == 2);
  lo.completed(1);
  CHECK(lo.pick()->session == 1);
  CHECK(lo.outstanding_of(1) == 1);
  CHECK(lo.outstanding_of(0) == 1);

  session_group<8> empty(t, 9, pick_policy::round_robin);
  CHECK_FALSE(empty.pick().has_value());
}

TEST_CASE("session receiver: resequences across sessions and delivers each message once") {
  const session_table<8> t = table_with_groups();
  session_receiver<8, 4> rx(t, 0x11, 1);
  auto msg_on = [&](std::uint32_t session, std::uint32_t seq) {
    return session_message{t.session(session)->tuple, 0x11, seq, 1000 + seq};
  };
  std::vector<std::uint32_t> delivered;
  auto feed = [&](session_message m) {
    step_result r;
    for (const auto& d : only<session_action::deliver>(collect<session_action_t>([&](session_sink& s) { return rx.on_message(m, s); }, &r)))
      delivered.push_back(d.seq);
    return r;
  };
  CHECK(feed(msg_on(1, 1)).ok());  // early
  CHECK(rx.state() == reseq_state::holding);
  CHECK(feed(msg_on(2, 2)).ok());
  CHECK(delivered.empty());
  CHECK(feed(msg_on(1, 1)).error == errc::duplicate);  // already held
  CHECK(feed(msg_on(0, 0)).ok());                      // fills the gap
  CHECK(delivered == std::vector<std::uint32_t>{0, 1, 2});
  CHECK(rx.state() == reseq_state::in_order);
  CHECK(feed(msg_on(0, 2)).error == errc::duplicate);  // already delivered
  CHECK(feed(msg_on(2, 3 + 4)).error == errc::window_full);
  CHECK(feed(msg_on(2, 4)).ok());
  CHECK(rx.state() == reseq_state::holding);
  CHECK(feed(msg_on(1, 3)).ok());
  CHECK(delivered == std::vector<std::uint32_t>{0, 1, 2, 3, 4});
  CHECK(rx.stats().duplicate == 2);
  CHECK(rx.stats().window_full == 1);
}

TEST_CASE("session receiver: drops and counts unknown 5-tuples and sessions outside the group") {
  const session_table<8> t = table_with_groups();
  session_receiver<8, 4> rx(t, 0x11, 1);
  step_result r;
  auto acts = collect<session_action_t>([&](session_sink& s) { return rx.on_message({tuple(0xBEEF), 0x11, 0, 1}, s); }, &r);
  CHECK(r.error == errc::unknown_tuple);
  REQUIRE(only<session_action::drop>(acts).size() == 1);
  CHECK(only<session_action::drop>(acts)[0].handle == 1);
  acts = collect<session_action_t>([&](session_sink& s) { return rx.on_message({tuple(0xD000), 0x11, 0, 2}, s); }, &r);
  CHECK(r.error == errc::foreign_group);  // session 10 is in group 2
  acts = collect<session_action_t>([&](session_sink& s) { return rx.on_message({tuple(0xC000), 0x22, 0, 3}, s); }, &r);
  CHECK(r.error == errc::foreign_group);  // claims another connection
  CHECK(rx.stats().unknown_tuple == 1);
  CHECK(rx.stats().foreign_group == 2);
  CHECK(rx.expected() == 0);
}

TEST_CASE("session scenario: random spreading and reordering never misplace or duplicate data") {
  const session_table<8> t = table_with_groups();
  for (auto policy : {pick_policy::round_robin, pick_policy::flow_hash, pick_policy::least_outstanding}) {
    session_group<8> g(t, 1, policy);
    session_receiver<8, 64> rx(t, 0x11, 1);
    std::vector<session_message> in_flight;
    std::uint32_t x = 12345;
    for (std::uint32_t i = 0; i < 48; ++i) {
      const auto e = *g.pick(i % 5);
      in_flight.push_back({e.tuple, 0x11, g.sequence(), i});
      g.completed(e.session);
    }
    // per-session order is kept, sessions interleave at random
    std::map<std::uint32_t, std::deque<session_message>> per_session;
    for (const auto& m : in_flight) per_session[t.lookup(m.tuple)->session].push_back(m);
    std::vector<session_message> arrival;
    while (arrival.size() < in_flight.size()) {
      x = x * 1103515245u + 12345u;
      auto& q = per_session[(x >> 16) % 3];
      if (q.empty()) continue;
      arrival.push_back(q.front());
      q.pop_front();
    }
    std::vector<std::uint64_t> got;
    for (const auto& m : arrival)
      for (const auto& d : only<session_action::deliver>(collect<session_action_t>([&](session_sink& s) { return rx.on_message(m, s); })))
        got.push_back(d.handle);
    std::vector<std::uint64_t> want(48);
    std::iota(want.begin(), want.end(), 0);
    CHECK(got == want);
  }
}
