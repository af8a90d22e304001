// Traffic classes, sans-IO (spec/qos.md §4): the class model, DRR, the rate limiter and the ETS
// scheduler, against shares and times worked by hand.
#include <catch2/catch.hpp>

#include <map>

#include <pushwire/flow/ets.hpp>

using namespace pushwire;
using namespace pushwire::flow;

// 4096 bytes at 25 Gb/s: 32768 bits / 25e9 = 1310.72 ns, rounded up; 1500 bytes at 1 Gb/s: 12 µs.
static_assert(wire_time(4096, 25'000'000'000) == 1311);
static_assert(wire_time(1500, 1'000'000'000) == 12'000);
static_assert(wire_time(1500, 0) == 0);
// The default model: DSCP >> 3 is the priority, the priority is the class.
static_assert(qos_map{}.class_of(0, 0) == 0);
static_assert(qos_map{}.class_of(0, 26 << 2) == 3);  // AF31
static_assert(qos_map{}.class_of(0, 46 << 2) == 5);  // EF
static_assert(qos_map{}.class_of(0, 48 << 2 | 3) == 6);  // CS6, its ECN bits ignored
static_assert(qos_map{}.check() == errc{});

TEST_CASE("ets: the class model maps SL or DSCP to a class as mlnx_qos does", "[flow][ets]") {
  qos_map m;
  CHECK(m.class_of(5, 0) == 0);  // trusting DSCP, the SL does not count
  CHECK(m.class_of(0, 63 << 2) == 7);
  m.trust = trust::pcp;
  CHECK(m.class_of(5, 63 << 2) == 5);
  CHECK(m.class_of(13, 0) == 5);  // the SL's three low bits
  m.prio_tc[5] = 2;
  CHECK(m.class_of(5, 0) == 2);
  m.trust = trust::dscp;
  m.dscp_prio[46] = 7, m.prio_tc[7] = 4;
  CHECK(m.class_of(0, 46 << 2) == 4);
  CHECK(wire_time(4096, 25'000'000'000) == 1311);
  CHECK(qos_map{}.class_of(0, 26 << 2) == 3);
}

TEST_CASE("ets: a class model with bad tables or weights is refused", "[flow][ets]") {
  CHECK(qos_map{}.check() == errc{});
  qos_map m;
  m.tc[0].weight = 12;  // 99 in all
  CHECK(m.check() == errc::invalid_argument);
  m.tc[0].weight = 13;
  m.tc[7].tsa = tsa::strict;  // strict with a weight
  CHECK(m.check() == errc::invalid_argument);
  m.tc[7].weight = 0, m.tc[0].weight = 25;  // 13 * 3 + 25 + 12 * 3 = 100
  CHECK(m.check() == errc{});
  m.dscp_prio[3] = 8;
  CHECK(m.check() == errc::invalid_argument);
  m.dscp_prio[3] = 0, m.prio_tc[1] = 9;
  CHECK(m.check() == errc::invalid_argument);
  qos_map all_strict;
  for (auto& c : all_strict.tc) c = {.tsa = tsa::strict};
  CHECK(all_strict.check() == errc{});  // no ETS class: no sum to meet
}

TEST_CASE("ets: DRR shares bytes by quantum, within a packet, and forgets an idle queue's deficit", "[flow][ets]") {
  drr<int> d;
  const std::map<int, std::uint64_t> quantum{{1, 1500}, {2, 500}, {3, 3000}};
  std::map<int, std::uint64_t> bytes;
  for (const auto& [k, q] : quantum) d.activate(k);
  d.activate(1);  // once in the round
  CHECK(d.active() == 3);
  for (int i = 0; i < 9000; ++i) {
    const auto k = d.pick([](int) { return true; }, [&](int x) { return quantum.at(x); });
    REQUIRE(k);
    d.charge(*k, 1000);
    bytes[*k] += 1000;
  }
  // 1500 : 500 : 3000 is 3 : 1 : 6 of 9 MB, each within one 1000-byte packet per round end
  CHECK(bytes[1] == Approx(2'700'000).margin(2000));
  CHECK(bytes[2] == Approx(900'000).margin(2000));
  CHECK(bytes[3] == Approx(5'400'000).margin(2000));
  // queue 3 runs dry: it leaves the round with its deficit forgotten
  for (int i = 0; i < 10; ++i) {
    const auto k = d.pick([](int x) { return x != 3; }, [&](int x) { return quantum.at(x); });
    REQUIRE(k);
    CHECK(*k != 3);
    d.charge(*k, 1000);
  }
  CHECK(d.active() == 2);
  CHECK(d.deficit(3) == 0);
  CHECK(!d.pick([](int) { return false; }, [](int) { return 1; }));
  CHECK(d.active() == 0);
  d.activate(2);
  d.remove(2);
  CHECK(d.active() == 0);
}

TEST_CASE("ets: the rate limiter lets a burst through, then one packet per its time at the rate", "[flow][ets]") {
  rate_limiter r(1'000'000'000, 3000);  // 1 Gb/s, 3000 bytes of burst (24 µs)
  CHECK(r.eligible(0));
  r.sent(1500, 0), r.sent(1500, 0), r.sent(1500, 0);  // 36 µs of sending at once: 12 µs beyond the burst
  CHECK(!r.eligible(11'999));
  CHECK(r.eligible(12'000));
  CHECK(*r.eligible_at() == 12'000);
  rate_limiter none;
  none.sent(1'000'000, 0);
  CHECK(none.eligible(0));
  CHECK(!none.eligible_at());
}

namespace {
/// Packets a fresh packet limiter lets through at time 0.
constexpr int passing_at_once(std::uint64_t per_s, std::uint32_t burst) {
  rate_limiter r = rate_limiter::packets(per_s, burst);
  int n = 0;
  for (; n < 1000 && r.eligible(0); ++n) r.sent(1, 0);
  return n;
}
}  // namespace

TEST_CASE("ets: a packet limiter lets 1 + burst packets through at once, then one a period, the period rounded up", "[flow][ets]") {
  // 3 M packets/s: 1e9 / 3e6 = 333.3 ns, rounded up to 334; 8 of burst = 2672 ns
  static_assert(passing_at_once(3'000'000, 8) == 9);
  static_assert(passing_at_once(1'000'000, 8) == 9);
  static_assert(passing_at_once(7, 0) == 1);
  CHECK(passing_at_once(3'000'000, 8) == 9);
  rate_limiter r = rate_limiter::packets(3'000'000, 8);
  for (int i = 0; i < 9; ++i) r.sent(1, 0);
  CHECK(*r.eligible_at() == 9 * 334 - 8 * 334);
  CHECK(!r.eligible(333));
  CHECK(r.eligible(334));
  // beyond 10^9 per second: 10^9 (1 ns a packet), not a wrapped product
  rate_limiter fast = rate_limiter::packets(std::uint64_t{1} << 61, 0);
  CHECK(fast.rate() == 8'000'000'000);
  fast.sent(1, 0);
  CHECK(!fast.eligible(0));
  CHECK(fast.eligible(1));
  CHECK(!rate_limiter::packets(0, 8).eligible_at());
}

TEST_CASE("ets: strict classes go first, the highest first, and ETS shares what they leave by weight", "[flow][ets]") {
  qos_map m;
  for (auto& c : m.tc) c = {};
  m.tc[1].weight = 75, m.tc[2].weight = 25;  // the others ETS 0
  m.tc[6] = {.tsa = tsa::strict}, m.tc[7] = {.tsa = tsa::strict};
  REQUIRE(m.check() == errc{});
  ets_scheduler s(m.tc);
  CHECK(s.pick(0b1100'0110, 0) == 7);
  CHECK(s.pick(0b0100'0110, 0) == 6);
  CHECK(!s.pick(0, 0));
  std::array<std::uint64_t, 8> bytes{};
  for (int i = 0; i < 20000; ++i) {
    const auto c = s.pick(0b0000'0111, 0);
    REQUIRE(c);
    s.sent(*c, 4096 + 78, 0);
    bytes[*c] += 4096 + 78;
  }
  const double total = static_cast<double>(bytes[1] + bytes[2]);
  CHECK(bytes[0] == 0);  // weight 0: only when the weighted classes have nothing
  CHECK(static_cast<double>(bytes[1]) / total == Approx(0.75).margin(0.005));
  CHECK(s.pick(0b0000'0001, 0) == 0);
}

TEST_CASE("ets: a class beyond its rate limit waits and the others send", "[flow][ets]") {
  qos_map m;
  for (auto& c : m.tc) c = {};
  m.tc[0].weight = 100;
  m.tc[7] = {.tsa = tsa::strict, .rate_limit = 1'000'000'000, .burst = 0};
  ets_scheduler s(m.tc);
  CHECK(s.pick(0x81, 0) == 7);
  s.sent(7, 1500, 0);  // 12 µs at 1 Gb/s
  CHECK(s.pick(0x81, 5'000) == 0);
  CHECK(!s.pick(0x80, 5'000));
  CHECK(s.held_until(7, 5'000) == 12'000);
  CHECK(!s.held_until(0, 5'000));
  CHECK(s.pick(0x81, 12'000) == 7);
}
