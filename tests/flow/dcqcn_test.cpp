// DCQCN (flow/dcqcn.hpp): the reaction point's rate machine step by step against the paper's
// formulas worked by hand (spec/qos.md §3), its timers and pacing rules, the notification
// point's CNP pacing and the congestion point's marking curve.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "harness.hpp"

using namespace pwtest;

namespace {
constexpr std::uint64_t line = 25'000'000'000;
// α after the first CNP: 1023/1024 (rp_initial_alpha_value), in 2^-20: 1047552.
// Rc = 25 Gb/s × (1 − α/2), the cut rounded down: 25e9 − floor(25e9 × 1047552 / 2^21).
constexpr std::uint64_t after_first = 12'512'207'032;
// Fast recovery: Rc = (Rt + Rc) / 2 rounded up, Rt = 25 Gb/s.
constexpr std::uint64_t fast[4] = {18'756'103'516, 21'878'051'758, 23'439'025'879, 24'219'512'940};
// A second decrease 10 µs later with the same α: 12512207032 − floor(12512207032 × 1047552 / 2^21).
constexpr std::uint64_t after_second = 6'262'212'993;

constexpr dcqcn_rp started(dcqcn_config c = {}) {
  dcqcn_rp m(c);
  std::array<rp_action_t, 8> st{};
  rp_sink out{std::span<rp_action_t>(st)};
  m.on_cnp(0, out);
  return m;
}
static_assert(started().rate() == after_first);
static_assert(started().target() == line);
static_assert(started().state() == rp_state::fast_recovery);
static_assert(started().alpha() == 1023u << 10);

std::vector<rp_action_t> fire(dcqcn_rp& m, rp_timer k, time_ns at, step_result* r = nullptr) {
  return collect<rp_action_t>([&](rp_sink& o) { return m.on_timer(k, at, o); }, r);
}
std::uint64_t rate_of(const std::vector<rp_action_t>& a) {
  const auto r = only<rp_action::set_rate>(a);
  REQUIRE(r.size() == 1);
  return r[0].bps;
}
}  // namespace

TEST_CASE("dcqcn: the first CNP halves the rate by α and arms the α and increase timers") {
  dcqcn_rp m;
  CHECK(m.rate() == line);
  CHECK(m.state() == rp_state::line_rate);
  const auto a = collect<rp_action_t>([&](rp_sink& o) { return m.on_cnp(1000, o); });
  CHECK(rate_of(a) == after_first);
  CHECK(m.rate() == after_first);
  CHECK(m.target() == line);
  const auto t = only<rp_action::set_timer>(a);
  REQUIRE(t.size() == 2);
  CHECK(t[0] == rp_action::set_timer{rp_timer::alpha, 1000 + 55'000});
  CHECK(t[1] == rp_action::set_timer{rp_timer::increase, 1000 + 300'000});
  CHECK(m.deadline(rp_timer::decrease) == std::nullopt);
}

TEST_CASE("dcqcn: at 25 Gb/s, four timer steps of fast recovery after the first CNP") {
  dcqcn_rp m;
  (void)collect<rp_action_t>([&](rp_sink& o) { return m.on_cnp(0, o); });
  for (int k = 0; k < 4; ++k) {
    CHECK(rate_of(fire(m, rp_timer::increase, 300'000 * static_cast<time_ns>(k + 1))) == fast[k]);
    CHECK(m.state() == rp_state::fast_recovery);
  }
}

TEST_CASE("dcqcn: fast recovery halves the gap to the target, then additive increase raises the target by Rai") {
  dcqcn_config c;
  c.line_rate = 40'000'000'000;  // the target has room to grow
  dcqcn_rp m(c);
  (void)collect<rp_action_t>([&](rp_sink& o) { return m.on_cnp(0, o); });
  // 40e9 × (1 − 1047552 / 2^21), the cut rounded down
  REQUIRE(m.rate() == 20'019'531'250);
  m = dcqcn_rp(c);
  (void)collect<rp_action_t>([&](rp_sink& o) { return m.on_cnp(0, o); });
  // A second CNP at 10 µs (after the 4 µs period): the target stays 40 Gb/s (no increase step
  // since the last decrease, clamp off), the rate is cut again.
  (void)collect<rp_action_t>([&](rp_sink& o) { return m.on_cnp(10'000, o); });
  const std::uint64_t r0 = m.rate(), t0 = m.target();
  CHECK(t0 == 40'000'000'000);
  time_ns at = 10'000 + 300'000;
  std::uint64_t r = r0;
  for (int k = 1; k <= 4; ++k) {  // T = 1..4 < F = 5: fast recovery
    r = (r + t0 + 1) / 2;
    CHECK(rate_of(fire(m, rp_timer::increase, at)) == r);
    CHECK(m.state() == rp_state::fast_recovery);
    CHECK(m.target() == t0);
    at += 300'000;
  }
  CHECK(m.timer_steps() == 4);
  // T = 5: additive increase; the target can rise no further than the line rate here
  r = (r + t0 + 1) / 2;
  CHECK(rate_of(fire(m, rp_timer::increase, at)) == r);
  CHECK(m.state() == rp_state::additive);
  CHECK(m.target() == 40'000'000'000);
}

TEST_CASE("dcqcn: additive and hyper increase follow min and max of the timer and byte-counter steps") {
  dcqcn_config c;
  c.byte_counter = 1'000'000;
  c.fast_recovery = 2;
  dcqcn_rp m(c);
  (void)collect<rp_action_t>([&](rp_sink& o) { return m.on_cnp(0, o); });
  (void)collect<rp_action_t>([&](rp_sink& o) { return m.on_cnp(10'000, o); });  // Rt = 25G, Rc = after_second
  REQUIRE(m.rate() == after_second);
  // Clamp: an increase step, then a decrease: the target takes the rate.
  (void)fire(m, rp_timer::increase, 310'000);  // T = 1: Rc = (25e9 + 6262212993) / 2 rounded up
  const std::uint64_t r1 = 15'631'106'497;
  REQUIRE(m.rate() == r1);
  (void)collect<rp_action_t>([&](rp_sink& o) { return m.on_cnp(320'000, o); });
  CHECK(m.target() == r1);
  CHECK(m.timer_steps() == 0);
  const std::uint64_t t = r1;
  // Bytes: 999999 make no step; one more byte is BC = 1.
  step_result res;
  CHECK(collect<rp_action_t>([&](rp_sink& o) { return m.on_sent(999'999, 321'000, o); }, &res).empty());
  CHECK(res.row == -1);
  CHECK(!collect<rp_action_t>([&](rp_sink& o) { return m.on_sent(1, 321'000, o); }).empty());
  CHECK(m.byte_steps() == 1);
  CHECK(m.target() == t);
  // BC = 2 = F, T = 0: additive: Rt += 5 Mb/s
  (void)collect<rp_action_t>([&](rp_sink& o) { return m.on_sent(1'000'000, 322'000, o); });
  CHECK(m.state() == rp_state::additive);
  CHECK(m.target() == t + 5'000'000);
  // T = 1, 2: min(T, BC) = 2 = F: hyper: Rt += 50 Mb/s (a constant step)
  (void)fire(m, rp_timer::increase, 320'000 + 300'000);
  CHECK(m.state() == rp_state::additive);
  CHECK(m.target() == t + 10'000'000);
  (void)fire(m, rp_timer::increase, 320'000 + 600'000);
  CHECK(m.state() == rp_state::hyper);
  CHECK(m.target() == t + 60'000'000);
  (void)fire(m, rp_timer::increase, 320'000 + 900'000);
  CHECK(m.target() == t + 110'000'000);
}

TEST_CASE("dcqcn: CNPs within a decrease period make one decrease at its end") {
  dcqcn_rp m;
  (void)collect<rp_action_t>([&](rp_sink& o) { return m.on_cnp(0, o); });
  const auto a = collect<rp_action_t>([&](rp_sink& o) { return m.on_cnp(1'000, o); });
  CHECK(only<rp_action::set_rate>(a).empty());
  REQUIRE(only<rp_action::set_timer>(a).size() == 1);
  CHECK(only<rp_action::set_timer>(a)[0] == rp_action::set_timer{rp_timer::decrease, 4'000});
  CHECK(collect<rp_action_t>([&](rp_sink& o) { return m.on_cnp(2'000, o); }).empty());  // already pending
  CHECK(fire(m, rp_timer::decrease, 3'999).empty());  // early: ignored
  CHECK(m.rate() == after_first);
  CHECK(rate_of(fire(m, rp_timer::decrease, 4'000)) == after_second);
  CHECK(m.deadline(rp_timer::increase) == 4'000 + 300'000);
}

TEST_CASE("dcqcn: α decays by (1 − g) per period and rises by g after a period with a CNP") {
  dcqcn_rp m;
  (void)collect<rp_action_t>([&](rp_sink& o) { return m.on_cnp(0, o); });
  std::uint32_t a = 1023u << 10;
  (void)fire(m, rp_timer::alpha, 55'000);
  a = a - (a >> 8);
  CHECK(m.alpha() == a);
  CHECK(m.alpha() == 1'043'460);
  (void)collect<rp_action_t>([&](rp_sink& o) { return m.on_cnp(60'000, o); });
  (void)fire(m, rp_timer::alpha, 110'000);
  a = a - (a >> 8) + (1u << 12);
  CHECK(m.alpha() == a);
  CHECK(m.alpha() == 1'043'480);
  // Without CNPs α falls geometrically: after 256 more periods, about 1/e of itself.
  for (int k = 2; k < 258; ++k) (void)fire(m, rp_timer::alpha, 55'000 * static_cast<time_ns>(k + 1));
  CHECK(std::abs(m.alpha() / 1043480.0 - std::pow(1 - 1.0 / 256, 256)) < 0.002);
}

TEST_CASE("dcqcn: the rate never falls below min_rate, and recovery returns to line rate with the timers cancelled") {
  dcqcn_config c;
  c.min_rate = 5'000'000'000;
  dcqcn_rp m(c);
  for (time_ns t = 0; t < 100'000; t += 5'000) (void)collect<rp_action_t>([&](rp_sink& o) { return m.on_cnp(t, o); });
  CHECK(m.rate() == 5'000'000'000);
  time_ns at = *m.deadline(rp_timer::increase);
  int steps = 0;
  std::vector<rp_action_t> last;
  while (m.state() != rp_state::line_rate && steps < 200) {
    last = fire(m, rp_timer::increase, at);
    at += 300'000;
    ++steps;
  }
  CHECK(m.state() == rp_state::line_rate);
  CHECK(m.rate() == line);
  CHECK(rate_of(last) == line);
  CHECK(only<rp_action::cancel_timer>(last).size() == 1);  // α's (the increase timer had fired)
  for (const rp_timer k : {rp_timer::decrease, rp_timer::alpha, rp_timer::increase}) CHECK(m.deadline(k) == std::nullopt);
  // At line rate, bytes and stale timers do nothing; a new CNP starts over with α = initial.
  CHECK(collect<rp_action_t>([&](rp_sink& o) { return m.on_sent(1u << 30, at, o); }).empty());
  CHECK(fire(m, rp_timer::alpha, at + 1'000'000).empty());
  CHECK(rate_of(collect<rp_action_t>([&](rp_sink& o) { return m.on_cnp(at, o); })) == after_first);
}

TEST_CASE("dcqcn: the paper's clamp sets the target at every decrease") {
  dcqcn_config c;
  c.clamp_target = true;
  dcqcn_rp m(c);
  (void)collect<rp_action_t>([&](rp_sink& o) { return m.on_cnp(0, o); });
  (void)collect<rp_action_t>([&](rp_sink& o) { return m.on_cnp(10'000, o); });
  CHECK(m.target() == after_first);
  CHECK(m.rate() == after_second);
}

TEST_CASE("dcqcn: a full sink refuses an event whole") {
  dcqcn_rp m;
  std::array<rp_action_t, 3> st{};
  rp_sink out{std::span<rp_action_t>(st)};
  CHECK(m.on_cnp(0, out).error == errc::actions_full);
  CHECK(m.state() == rp_state::line_rate);
  CHECK(out.empty());
}

TEST_CASE("notification point: one CNP per interval per QP") {
  std::optional<time_ns> last;
  CHECK(cnp_due(last, 100, 4'000));
  CHECK_FALSE(cnp_due(last, 4'099, 4'000));
  CHECK(cnp_due(last, 4'100, 4'000));
  CHECK(last == 4'100);
  std::optional<time_ns> every;
  CHECK(cnp_due(every, 5, 0));
  CHECK(cnp_due(every, 5, 0));
}

TEST_CASE("congestion point: no marks below Kmin, Pmax at Kmax's edge, always from Kmax") {
  constexpr ecn_marking r{.kmin = 5'000, .kmax = 200'000, .pmax = 0.01};
  static_assert(r.probability(5'000) == 0.0);
  static_assert(r.probability(200'000) == 1.0);
  CHECK(r.probability(0) == 0.0);
  CHECK(r.probability(102'500) == Approx(0.005));
  CHECK(r.probability(199'999) == Approx(0.01).epsilon(1e-4));
  CHECK_FALSE(r.mark(102'500, 0.005));
  CHECK(r.mark(102'500, 0.00499));
  CHECK(r.mark(300'000, 0.999));
}
