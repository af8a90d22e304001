// The shared machinery: static_vector, static_ring, sink, step() over a table, and machines evaluated at
// compile time (each constexpr result is checked by static_assert and again at run time).
#include <catch2/catch.hpp>

#include <algorithm>
#include <initializer_list>
#include <set>
#include <vector>

#include "harness.hpp"

using namespace pwtest;
namespace wire = pushwire::wire;

namespace {

constexpr pool_state owner_after_flush() {
  pool_owner<1, 4> o;
  std::array<pool_action_t, 4> buf{};
  pool_sink s{std::span<pool_action_t>(buf)};
  o.advertise({.pool_ref = 3, .element_count = 4, .element_size = 64, .memory_handle = 1, .address = 0, .pool_context = 0}, s);
  o.on_idata(0x03010040, s);  // pool 3, element 1, 64 bytes
  o.flush(3, s);
  return o.state_of(3);
}

constexpr std::uint32_t user_idata_for_second_transfer() {
  pool_user<1, 4> u;
  std::array<pool_action_t, 8> buf{};
  pool_sink s{std::span<pool_action_t>(buf)};
  u.on_pool({.pool_ref = 7, .element_count = 4, .element_size = 256, .memory_handle = 1, .address = 0, .pool_context = 0}, s);
  u.transfer(10, s);
  u.transfer(256, s);
  return std::get<pool_action::rdma_write>(s[1]).imm;
}

constexpr std::uint32_t requester_psn_after_ack() {
  requester<4> rq({.mtu = 256, .start_psn = 0xFFFFFF});
  std::array<qp_action_t, 16> buf{};
  qp_sink s{std::span<qp_action_t>(buf)};
  rq.post({.id = 1, .op = wr_op::send, .length = 512}, 0, s);
  packet ack{};
  ack.opcode = ib::opcode::rc_acknowledge;
  ack.psn = 0;
  ack.aeth = {.syndrome = ib::syndrome::ack(31).raw, .msn = 1};
  rq.on_packet(ack, 10, s);
  return rq.una() | (rq.quiescent() ? 0x1000000u : 0u);
}

constexpr std::uint32_t delivered_in_order() {
  session_table<2> t;
  five_tuple a{};
  a.sport = 1;
  t.bind(1, a, 1, 9);
  session_receiver<2, 4> rx(t, 9, 1);
  std::array<session_action_t, 8> buf{};
  session_sink s{std::span<session_action_t>(buf)};
  rx.on_message({a, 9, 1, 101}, s);
  rx.on_message({a, 9, 0, 100}, s);
  return rx.expected() * 1000 + static_cast<std::uint32_t>(s.size());
}

static_assert(owner_after_flush() == pool_state::flushing);
static_assert(user_idata_for_second_transfer() == 0x07010100);  // pool 7, element 1, 256 bytes
static_assert(requester_psn_after_ack() == 0x1000001);           // PSN wrapped to 1, all complete
static_assert(delivered_in_order() == 2002);

}  // namespace

TEST_CASE("constexpr machines: the static_assert'ed results hold at run time too") {
  CHECK(owner_after_flush() == pool_state::flushing);
  CHECK(user_idata_for_second_transfer() == 0x07010100);
  CHECK(requester_psn_after_ack() == 0x1000001);
  CHECK(delivered_in_order() == 2002);
}

TEST_CASE("static_vector and sink never allocate and never overflow") {
  static_vector<int, 3> v;
  CHECK(v.push_back(1));
  CHECK(v.push_back(2));
  CHECK(v.push_back(3));
  CHECK_FALSE(v.push_back(4));
  CHECK(v.size() == 3);
  CHECK(v.front() == 1);
  CHECK(v.back() == 3);
  std::array<int, 2> st{};
  sink<int> s{std::span<int>(st)};
  s.push(1);
  s.push(2);
  s.push(3);  // dropped by the sink, which is why machines check room() first
  CHECK(s.size() == 2);
  CHECK(s.room() == 0);
}

// A ring of 3 after 10 pushes, each full ring popped: it holds 8 and 9, oldest first.
constexpr int ring_after_wraps() {
  static_ring<int, 3> r;
  int sum = 0;
  for (int i = 0; i < 10; ++i) {
    (void)r.push_back(i);
    if (r.full()) r.pop_front();
  }
  const auto& cr = r;
  for (const int x : cr) sum = sum * 100 + x;  // oldest first: 8, 9
  return sum * 10 + static_cast<int>(r.size());
}
static_assert(ring_after_wraps() == 8092);

TEST_CASE("static_ring: a FIFO that never allocates, in order across wraps") {
  CHECK(ring_after_wraps() == 8092);
  // Random pushes and pops against a plain vector erased at its front (the oracle).
  static_ring<int, 4> r;
  std::vector<int> oracle;
  std::uint32_t x = 12345;
  for (int step = 0; step < 5000; ++step) {
    x = x * 1103515245u + 12345u;
    const unsigned what = (x >> 16) % 3;
    if (what < 2) {
      const bool took = r.push_back(step);
      CHECK(took == (oracle.size() < 4));
      if (took) oracle.push_back(step);
    } else if (!oracle.empty()) {
      CHECK(r.front() == oracle.front());
      r.pop_front();
      oracle.erase(oracle.begin());
    }
    REQUIRE(r.size() == oracle.size());
    CHECK(r.full() == (oracle.size() == 4));
    CHECK(r.empty() == oracle.empty());
    for (std::size_t i = 0; i < oracle.size(); ++i) CHECK(r[i] == oracle[i]);
    CHECK(std::vector<int>(r.begin(), r.end()) == oracle);
    const auto& cr = r;
    CHECK(std::vector<int>(cr.begin(), cr.end()) == oracle);
    if (!oracle.empty()) {
      auto it = cr.begin();
      CHECK(*it++ == oracle.front());
      CHECK(it == std::next(cr.begin()));
      CHECK(cr.begin().operator->() == &cr.front());
    }
    if (!oracle.empty()) CHECK(r.back() == oracle.back());
  }
  // Equal by contents, wherever each ring starts.
  static_ring<int, 4> a, b;
  (void)a.push_back(7), (void)a.push_back(1), a.pop_front(), (void)a.push_back(2);
  (void)b.push_back(1), (void)b.push_back(2);
  CHECK(a == b);
  (void)b.push_back(3);
  CHECK_FALSE(a == b);
  for (int& v : a) v += 1;
  CHECK(a[0] == 2);
  CHECK(a[1] == 3);
  a.clear();
  CHECK(a.empty());
}

TEST_CASE("step: first matching row whose guard holds, no row means event_not_allowed and no change") {
  struct ctx {
    int n = 0;
  };
  enum class st { a, b };
  enum class ev { go, stop };
  using row = transition<ctx, st, ev, int, sink<int>>;
  static constexpr auto table = std::to_array<row>({
      {st::a, ev::go, "n > 0", +[](const ctx& c, const int&) { return c.n > 0; }, st::b, "count",
       +[](ctx& c, const int& in, sink<int>& o) {
         c.n += in;
         o.push(c.n);
         return errc{};
       }},
      {st::a, ev::go, "else", nullptr, st::a, "refuse", +[](ctx&, const int&, sink<int>&) { return errc::queue_full; }},
  });
  ctx c;
  st s = st::a;
  std::array<int, 4> buf{};
  sink<int> out{std::span<int>(buf)};
  auto r = step<row>(table, s, c, ev::go, 1, out);
  CHECK(r.row == 1);
  CHECK(r.error == errc::queue_full);
  CHECK(s == st::a);
  c.n = 1;
  r = step<row>(table, s, c, ev::go, 5, out);
  CHECK(r.row == 0);
  CHECK(r.ok());
  CHECK(s == st::b);
  CHECK(out[0] == 6);
  r = step<row>(table, s, c, ev::stop, 0, out);
  CHECK(r.row == -1);
  CHECK(r.error == errc::event_not_allowed);
  CHECK(s == st::b);
  CHECK(enabled<row>(table, st::a, c, ev::go, 0));
  CHECK_FALSE(enabled<row>(table, st::b, c, ev::go, 0));
}

namespace {

// The states of `states` that no path of rows leads to from `initial` (any event, any guard:
// a guard may hold for some input).
template <class Row>
std::vector<typename Row::state_type> unreachable(std::span<const Row> table, typename Row::state_type initial,
                                                  std::span<const typename Row::state_type> states) {
  using S = typename Row::state_type;
  std::set<S> seen{initial};
  std::vector<S> todo{initial};
  while (!todo.empty()) {
    const S s = todo.back();
    todo.pop_back();
    for (const Row& r : table)
      if (r.from == s && seen.insert(r.to).second) todo.push_back(r.to);
  }
  std::vector<S> out;
  for (S s : states)
    if (!seen.count(s)) out.push_back(s);
  return out;
}

// Every state of a machine's table is reachable from its initial state (machine_info::initial,
// a state's name), except those in `never`.
template <class Row>
void check_reachable(const machine_info<Row>& m, std::initializer_list<typename Row::state_type> never = {}) {
  using S = typename Row::state_type;
  INFO(m.name << ", initial state " << m.initial);
  const auto names = wire::enum_names<S>();
  const auto initial = std::find_if(names.begin(), names.end(), [&](const wire::named_value& n) { return n.name == m.initial; });
  REQUIRE(initial != names.end());
  std::vector<S> states;
  for (const auto& n : names)
    if (std::find(never.begin(), never.end(), static_cast<S>(n.value)) == never.end()) states.push_back(static_cast<S>(n.value));
  for (S s : unreachable<Row>(m.table, static_cast<S>(initial->value), states)) FAIL_CHECK("unreachable: " << wire::enum_name(s));
  for (S s : never) CHECK(unreachable<Row>(m.table, static_cast<S>(initial->value), std::span(&s, 1)).size() == 1);
}

}  // namespace

TEST_CASE("tables: every state is reachable from the machine's initial state (names: enum_names_test's names_match)") {
  check_reachable(pool_owner_info<1, 1>, {pool_state::draining});  // the owner never drains
  check_reachable(pool_user_info<1, 1>);
  check_reachable(requester_info<1>);
  check_reachable(responder_info<1>);
  check_reachable(dci_info<1, 1>);
  check_reachable(dct_info<1>);
  check_reachable(session_receiver_info<1, 1>);
  for (std::size_t i = 1; i <= errc_table.size(); ++i) CHECK_FALSE(errc_table[i - 1].meaning.empty());
}

TEST_CASE("tables: states that lead only to each other are unreachable from the initial state") {
  // start -> a -> b, and an island: x <-> y. Every state is some row's target, yet x and y
  // cannot be reached from start.
  enum class st { start, a, b, x, y };
  enum class ev { go };
  struct ctx {};
  using row = transition<ctx, st, ev, int, sink<int>>;
  static constexpr auto table = std::to_array<row>({
      {st::start, ev::go, "", nullptr, st::a, "", nullptr},
      {st::a, ev::go, "", nullptr, st::b, "", nullptr},
      {st::x, ev::go, "", nullptr, st::y, "", nullptr},
      {st::y, ev::go, "", nullptr, st::x, "", nullptr},
      {st::b, ev::go, "", nullptr, st::start, "", nullptr},
  });
  constexpr st all[] = {st::start, st::a, st::b, st::x, st::y};
  CHECK(unreachable<row>(table, st::start, all) == std::vector<st>{st::x, st::y});
  CHECK(unreachable<row>(table, st::x, all) == std::vector<st>{st::start, st::a, st::b});
}
