// DCQCN, RoCEv2's congestion control (spec/qos.md §3), sans-IO: the reaction point's rate
// machine (one per sending QP), the notification point's CNP pacing, and the congestion point's
// RED-like ECN marking. Time is an argument; the machine's timers and its rate come back as
// actions.
//
// Sources: Zhu et al., "Congestion Control for Large-Scale RDMA Deployments" (SIGCOMM 2015):
// the algorithm (rate decrease by α/2 on a CNP, α's moving average with gain g, the rate
// increase timer and byte counter, fast recovery for F steps, then additive and hyper increase);
// mlx5's congestion parameters (rp_*, np_*: drivers/infiniband/hw/mlx5/cong.c, and NVIDIA's
// defaults) for the decrease period, the clamping rule and the defaults below; HPCC's ns-3
// simulator (alibaba-edu/High-Precision-Congestion-Control, rdma-hw.cc, "Mellanox DCQCN") for
// the order of operations and a constant hyper-increase step.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <variant>

#include <pushwire/flow/core.hpp>

namespace pushwire::flow {

/// The reaction point's parameters. Rates in bits per second, times in ns.
struct dcqcn_config {
  std::uint64_t line_rate = 25'000'000'000;  ///< the rate before any CNP, and the most it returns to
  std::uint64_t min_rate = 1'000'000;        ///< rp_min_rate: a decrease stops here (1 Mb/s)
  std::uint64_t ai_rate = 5'000'000;         ///< rp_ai_rate, Rai: additive increase of the target (5 Mb/s)
  std::uint64_t hai_rate = 50'000'000;       ///< rp_hai_rate, Rhai: hyper increase of the target (50 Mb/s)
  /// α's gain g = 1 / 2^g_shift (the paper's 1/256: 8), 1..16.
  unsigned g_shift = 8;
  /// α after the first CNP, in 1/1024 (rp_initial_alpha_value 1023; the paper starts at 1).
  std::uint32_t initial_alpha = 1023;
  time_ns alpha_period = 55'000;      ///< the paper's τ′: α's update period (55 µs)
  time_ns increase_period = 300'000;  ///< rp_time_reset: the rate increase timer (300 µs)
  /// The byte counter B: an increase step per B bytes sent (the paper's 10 MB); 0: timer only.
  std::uint64_t byte_counter = 10'000'000;
  std::uint32_t fast_recovery = 5;  ///< F: steps of fast recovery before additive increase (the paper's 5)
  /// rp_rate_reduce_monitor_period: decreases at most once per period (4 µs); a CNP inside one
  /// decreases at its end.
  time_ns decrease_period = 4'000;
  /// rp_clamp_tgt_rate: the target takes the current rate at every decrease (the paper). Off
  /// (mlx5's default, with clamp_tgt_rate_ati): only at a decrease after an increase step.
  bool clamp_target = false;
};

/// One row of the parameter table of spec/qos.md (generated): a dcqcn_config member, the mlx5
/// parameter or paper symbol it stands for, its unit, and its value in `c`.
struct dcqcn_parameter {
  std::string_view name, source, unit;
  std::uint64_t value;
};
constexpr std::array<dcqcn_parameter, 12> dcqcn_parameters(const dcqcn_config& c) {
  return {{
      {"line_rate", "the port's rate", "bit/s", c.line_rate},
      {"min_rate", "rp_min_rate", "bit/s", c.min_rate},
      {"ai_rate", "rp_ai_rate, Rai", "bit/s", c.ai_rate},
      {"hai_rate", "rp_hai_rate, Rhai", "bit/s", c.hai_rate},
      {"g_shift", "g = 2^-g_shift (rp_dce_tcp_g)", "", c.g_shift},
      {"initial_alpha", "rp_initial_alpha_value", "1/1024", c.initial_alpha},
      {"alpha_period", "τ′ (rp_dce_tcp_rtt)", "ns", c.alpha_period},
      {"increase_period", "rp_time_reset, T", "ns", c.increase_period},
      {"byte_counter", "B (0: timer only)", "bytes", c.byte_counter},
      {"fast_recovery", "F (rp_threshold)", "steps", c.fast_recovery},
      {"decrease_period", "rp_rate_reduce_monitor_period", "ns", c.decrease_period},
      {"clamp_target", "rp_clamp_tgt_rate", "0 / 1", c.clamp_target ? 1u : 0u},
  }};
}

/// The reaction point's state: at line rate (no congestion seen, or recovered), or recovering
/// by the paper's three stages.
enum class rp_state : std::uint8_t { line_rate, fast_recovery, additive, hyper };
inline constexpr std::array<wire::named_value, 4> rp_state_names{{
    {rp_state::line_rate, "line_rate"},
    {rp_state::fast_recovery, "fast_recovery"},
    {rp_state::additive, "additive"},
    {rp_state::hyper, "hyper"},
}};
constexpr std::span<const wire::named_value> wire_enum_names(rp_state) { return rp_state_names; }

enum class rp_event : std::uint8_t { cnp, decrease_timer, alpha_timer, increase };
inline constexpr std::array<wire::named_value, 4> rp_event_names{{
    {rp_event::cnp, "CNP"},
    {rp_event::decrease_timer, "decrease timer"},
    {rp_event::alpha_timer, "alpha timer"},
    {rp_event::increase, "increase step (timer or byte counter)"},
}};
constexpr std::span<const wire::named_value> wire_enum_names(rp_event) { return rp_event_names; }

enum class rp_timer : std::uint8_t { decrease, alpha, increase };
inline constexpr std::array<wire::named_value, 3> rp_timer_names{{
    {rp_timer::decrease, "decrease"}, {rp_timer::alpha, "alpha"}, {rp_timer::increase, "increase"}}};
constexpr std::span<const wire::named_value> wire_enum_names(rp_timer) { return rp_timer_names; }

namespace rp_action {
/// The QP's sending rate is now `bps` bits per second.
struct set_rate {
  std::uint64_t bps = 0;
  friend constexpr bool operator==(const set_rate&, const set_rate&) = default;
};
struct set_timer {
  rp_timer kind{};
  time_ns at = 0;
  friend constexpr bool operator==(const set_timer&, const set_timer&) = default;
};
struct cancel_timer {
  rp_timer kind{};
  friend constexpr bool operator==(const cancel_timer&, const cancel_timer&) = default;
};
}  // namespace rp_action
using rp_action_t = std::variant<rp_action::set_rate, rp_action::set_timer, rp_action::cancel_timer>;
using rp_sink = sink<rp_action_t>;

struct rp_input {
  time_ns now = 0;
  bool by_bytes = false;  ///< rp_event::increase: the byte counter's step (else the timer's)
};

/// DCQCN's reaction point for one flow (a QP). α is fixed point, 2^20 = 1.
class dcqcn_rp {
 public:
  using row = transition<dcqcn_rp, rp_state, rp_event, rp_input, rp_sink>;
  static constexpr std::uint32_t alpha_one = 1u << 20;
  /// Sink room every call needs: the rate and three timers.
  static constexpr std::size_t min_room = 4;

  constexpr explicit dcqcn_rp(dcqcn_config c = {}) : cfg_(c), rate_(c.line_rate), target_(c.line_rate) {}

  /// A CNP for this flow arrived.
  constexpr step_result on_cnp(time_ns now, rp_sink& out) { return run(rp_event::cnp, {.now = now}, out); }
  /// A timer the caller armed fired; a stale one (no longer armed, or early) is ignored.
  constexpr step_result on_timer(rp_timer k, time_ns now, rp_sink& out) {
    if (out.room() < min_room) return {-1, errc::actions_full};
    std::optional<time_ns>& d = timer(k);
    if (!d || now < *d) return {-1, errc{}};
    d.reset();
    return run(k == rp_timer::decrease ? rp_event::decrease_timer : k == rp_timer::alpha ? rp_event::alpha_timer : rp_event::increase,
               {.now = now}, out);
  }
  /// The flow sent `bytes` more: each byte_counter bytes since the last decrease make an
  /// increase step (at most one per call; the rest counts on).
  constexpr step_result on_sent(std::uint64_t bytes, time_ns now, rp_sink& out) {
    if (out.room() < min_room) return {-1, errc::actions_full};
    if (st_ == rp_state::line_rate || cfg_.byte_counter == 0) return {-1, errc{}};
    bytes_ += bytes;
    if (bytes_ < cfg_.byte_counter) return {-1, errc{}};
    bytes_ -= cfg_.byte_counter;
    return run(rp_event::increase, {.now = now, .by_bytes = true}, out);
  }

  constexpr rp_state state() const { return st_; }
  constexpr std::uint64_t rate() const { return rate_; }
  constexpr std::uint64_t target() const { return target_; }
  /// α in 2^-20 units.
  constexpr std::uint32_t alpha() const { return alpha_; }
  constexpr std::uint32_t timer_steps() const { return t_; }
  constexpr std::uint32_t byte_steps() const { return bc_; }
  constexpr std::optional<time_ns> deadline(rp_timer k) const {
    return k == rp_timer::decrease ? decrease_at_ : k == rp_timer::alpha ? alpha_at_ : increase_at_;
  }
  constexpr const dcqcn_config& config() const { return cfg_; }

  // ---- guards ----------------------------------------------------------------------------
  static constexpr bool g_may_decrease(const dcqcn_rp& m, const rp_input& in) {
    return !m.last_decrease_ || in.now >= *m.last_decrease_ + m.cfg_.decrease_period;
  }
  static constexpr bool g_recovered(const dcqcn_rp& m, const rp_input& in) {
    const auto [t, bc] = m.steps_after(in);
    const std::uint64_t target = m.target_after(t, bc);
    return target >= m.cfg_.line_rate && halfway(m.rate_, target) >= m.cfg_.line_rate;
  }
  static constexpr bool g_fast(const dcqcn_rp& m, const rp_input& in) {
    const auto [t, bc] = m.steps_after(in);
    return std::max(t, bc) < m.cfg_.fast_recovery;
  }
  static constexpr bool g_additive(const dcqcn_rp& m, const rp_input& in) {
    const auto [t, bc] = m.steps_after(in);
    return std::min(t, bc) < m.cfg_.fast_recovery;
  }

  // ---- actions ---------------------------------------------------------------------------
  static constexpr errc a_first(dcqcn_rp& m, const rp_input& in, rp_sink& out) {
    m.alpha_ = static_cast<std::uint32_t>((std::uint64_t{std::min<std::uint32_t>(m.cfg_.initial_alpha, 1024)} << 20) / 1024);
    m.cnp_seen_ = false;
    m.increased_ = true;  // the first decrease sets the target
    m.arm(rp_timer::alpha, in.now + m.cfg_.alpha_period, out);
    m.decrease(in.now, out);
    return {};
  }
  static constexpr errc a_decrease(dcqcn_rp& m, const rp_input& in, rp_sink& out) {
    m.cnp_seen_ = true;
    m.decrease(in.now, out);
    return {};
  }
  static constexpr errc a_decrease_pending(dcqcn_rp& m, const rp_input& in, rp_sink& out) {
    m.cnp_seen_ = true;
    if (!m.decrease_at_) m.arm(rp_timer::decrease, *m.last_decrease_ + m.cfg_.decrease_period, out);
    (void)in;
    return {};
  }
  static constexpr errc a_decrease_late(dcqcn_rp& m, const rp_input& in, rp_sink& out) {
    m.decrease(in.now, out);
    return {};
  }
  static constexpr errc a_alpha(dcqcn_rp& m, const rp_input& in, rp_sink& out) {
    const std::uint32_t g = alpha_one >> m.cfg_.g_shift;
    m.alpha_ = m.alpha_ - (m.alpha_ >> m.cfg_.g_shift) + (m.cnp_seen_ ? g : 0);
    m.cnp_seen_ = false;
    m.arm(rp_timer::alpha, in.now + m.cfg_.alpha_period, out);
    return {};
  }
  static constexpr errc a_increase(dcqcn_rp& m, const rp_input& in, rp_sink& out) {
    const auto [t, bc] = m.steps_after(in);
    m.t_ = t, m.bc_ = bc;
    m.target_ = m.target_after(t, bc);
    m.rate_ = halfway(m.rate_, m.target_);
    m.increased_ = true;
    if (!in.by_bytes) m.arm(rp_timer::increase, in.now + m.cfg_.increase_period, out);
    out.push(rp_action::set_rate{m.rate_});
    return {};
  }
  static constexpr errc a_recovered(dcqcn_rp& m, const rp_input&, rp_sink& out) {
    m.rate_ = m.target_ = m.cfg_.line_rate;
    m.t_ = m.bc_ = 0;
    m.bytes_ = 0;
    m.cnp_seen_ = m.increased_ = false;
    for (const rp_timer k : {rp_timer::decrease, rp_timer::alpha, rp_timer::increase})
      if (m.timer(k)) m.timer(k).reset(), out.push(rp_action::cancel_timer{k});
    out.push(rp_action::set_rate{m.rate_});
    return {};
  }

  /// The transition table (detail::dcqcn_rp_rows).
  static constexpr std::span<const row> table();

 private:
  /// (a + b) / 2, rounded up: repeated halving reaches b.
  static constexpr std::uint64_t halfway(std::uint64_t a, std::uint64_t b) { return a / 2 + b / 2 + ((a % 2) + (b % 2) + 1) / 2; }
  constexpr std::pair<std::uint32_t, std::uint32_t> steps_after(const rp_input& in) const {
    return in.by_bytes ? std::pair{t_, bc_ + 1} : std::pair{t_ + 1, bc_};
  }
  /// The target after the increase step that makes the counts (t, bc): fast recovery keeps it;
  /// additive increase adds Rai; hyper increase adds Rhai (HPCC's constant step); at most the
  /// line rate.
  constexpr std::uint64_t target_after(std::uint32_t t, std::uint32_t bc) const {
    const std::uint32_t f = cfg_.fast_recovery;
    if (std::max(t, bc) < f) return target_;
    const std::uint64_t step = std::min(t, bc) < f ? cfg_.ai_rate : cfg_.hai_rate;
    return std::min(cfg_.line_rate, target_ + step);
  }
  constexpr std::optional<time_ns>& timer(rp_timer k) { return k == rp_timer::decrease ? decrease_at_ : k == rp_timer::alpha ? alpha_at_ : increase_at_; }
  constexpr void arm(rp_timer k, time_ns at, rp_sink& out) {
    timer(k) = at;
    out.push(rp_action::set_timer{k, at});
  }
  /// The rate decrease: Rt = Rc (when clamping, or after an increase), Rc = Rc (1 - α/2),
  /// at least min_rate; the increase counts start again.
  constexpr void decrease(time_ns now, rp_sink& out) {
    if (cfg_.clamp_target || increased_) target_ = rate_;
    const auto cut = static_cast<std::uint64_t>((static_cast<unsigned __int128>(rate_) * alpha_) >> 21);
    rate_ = std::max(cfg_.min_rate, rate_ - std::min(rate_, cut));
    t_ = bc_ = 0;
    bytes_ = 0;
    increased_ = false;
    last_decrease_ = now;
    if (decrease_at_) decrease_at_.reset(), out.push(rp_action::cancel_timer{rp_timer::decrease});
    arm(rp_timer::increase, now + cfg_.increase_period, out);
    out.push(rp_action::set_rate{rate_});
  }
  constexpr step_result run(rp_event e, const rp_input& in, rp_sink& out) {
    if (out.room() < min_room) return {-1, errc::actions_full};
    return step<row>(table(), st_, *this, e, in, out);
  }

  dcqcn_config cfg_;
  rp_state st_ = rp_state::line_rate;
  std::uint64_t rate_, target_;
  std::uint32_t alpha_ = alpha_one;
  std::uint32_t t_ = 0, bc_ = 0;  ///< increase steps since the last decrease: by the timer, by the byte counter
  std::uint64_t bytes_ = 0;       ///< bytes sent towards the next byte-counter step
  bool cnp_seen_ = false;         ///< a CNP since α's last update
  bool increased_ = false;        ///< an increase step since the last decrease
  std::optional<time_ns> last_decrease_{}, decrease_at_{}, alpha_at_{}, increase_at_{};
};

namespace detail {
struct dcqcn_rp_rows {
  using M = dcqcn_rp;
  using S = rp_state;
  using E = rp_event;
  static constexpr auto rows = std::to_array<M::row>({
      {S::line_rate, E::cnp, "", nullptr, S::fast_recovery, "α = initial; Rt = Rc; Rc = Rc (1 − α/2); arm α and increase timers", &M::a_first},
      {S::fast_recovery, E::cnp, "a decrease period since the last", &M::g_may_decrease, S::fast_recovery, "Rt = Rc (clamp); Rc = Rc (1 − α/2); steps 0", &M::a_decrease},
      {S::additive, E::cnp, "a decrease period since the last", &M::g_may_decrease, S::fast_recovery, "Rt = Rc (clamp); Rc = Rc (1 − α/2); steps 0", &M::a_decrease},
      {S::hyper, E::cnp, "a decrease period since the last", &M::g_may_decrease, S::fast_recovery, "Rt = Rc (clamp); Rc = Rc (1 − α/2); steps 0", &M::a_decrease},
      {S::fast_recovery, E::cnp, "else", nullptr, S::fast_recovery, "decrease at the period's end", &M::a_decrease_pending},
      {S::additive, E::cnp, "else", nullptr, S::additive, "decrease at the period's end", &M::a_decrease_pending},
      {S::hyper, E::cnp, "else", nullptr, S::hyper, "decrease at the period's end", &M::a_decrease_pending},
      {S::fast_recovery, E::decrease_timer, "", nullptr, S::fast_recovery, "Rt = Rc (clamp); Rc = Rc (1 − α/2); steps 0", &M::a_decrease_late},
      {S::additive, E::decrease_timer, "", nullptr, S::fast_recovery, "Rt = Rc (clamp); Rc = Rc (1 − α/2); steps 0", &M::a_decrease_late},
      {S::hyper, E::decrease_timer, "", nullptr, S::fast_recovery, "Rt = Rc (clamp); Rc = Rc (1 − α/2); steps 0", &M::a_decrease_late},
      {S::fast_recovery, E::alpha_timer, "", nullptr, S::fast_recovery, "α = (1 − g) α + g · (a CNP since)", &M::a_alpha},
      {S::additive, E::alpha_timer, "", nullptr, S::additive, "α = (1 − g) α + g · (a CNP since)", &M::a_alpha},
      {S::hyper, E::alpha_timer, "", nullptr, S::hyper, "α = (1 − g) α + g · (a CNP since)", &M::a_alpha},
      {S::fast_recovery, E::increase, "Rt and Rc reach the line rate", &M::g_recovered, S::line_rate, "Rc = Rt = line rate; cancel timers", &M::a_recovered},
      {S::additive, E::increase, "Rt and Rc reach the line rate", &M::g_recovered, S::line_rate, "Rc = Rt = line rate; cancel timers", &M::a_recovered},
      {S::hyper, E::increase, "Rt and Rc reach the line rate", &M::g_recovered, S::line_rate, "Rc = Rt = line rate; cancel timers", &M::a_recovered},
      {S::fast_recovery, E::increase, "max(T, BC) < F", &M::g_fast, S::fast_recovery, "Rc = (Rt + Rc) / 2", &M::a_increase},
      {S::additive, E::increase, "max(T, BC) < F", &M::g_fast, S::fast_recovery, "Rc = (Rt + Rc) / 2", &M::a_increase},
      {S::hyper, E::increase, "max(T, BC) < F", &M::g_fast, S::fast_recovery, "Rc = (Rt + Rc) / 2", &M::a_increase},
      {S::fast_recovery, E::increase, "min(T, BC) < F", &M::g_additive, S::additive, "Rt += Rai; Rc = (Rt + Rc) / 2", &M::a_increase},
      {S::additive, E::increase, "min(T, BC) < F", &M::g_additive, S::additive, "Rt += Rai; Rc = (Rt + Rc) / 2", &M::a_increase},
      {S::hyper, E::increase, "min(T, BC) < F", &M::g_additive, S::additive, "Rt += Rai; Rc = (Rt + Rc) / 2", &M::a_increase},
      {S::fast_recovery, E::increase, "else", nullptr, S::hyper, "Rt += Rhai; Rc = (Rt + Rc) / 2", &M::a_increase},
      {S::additive, E::increase, "else", nullptr, S::hyper, "Rt += Rhai; Rc = (Rt + Rc) / 2", &M::a_increase},
      {S::hyper, E::increase, "else", nullptr, S::hyper, "Rt += Rhai; Rc = (Rt + Rc) / 2", &M::a_increase},
  });
};
}  // namespace detail

constexpr std::span<const dcqcn_rp::row> dcqcn_rp::table() { return detail::dcqcn_rp_rows::rows; }

inline constexpr machine_info<dcqcn_rp::row> dcqcn_rp_info{"dcqcn_rp", "line_rate", dcqcn_rp::table()};

/// The notification point's pacing: a CE-marked packet for a QP whose last CNP went at
/// `last` makes a new CNP at `now` when none went yet or `interval` ns passed
/// (np_min_time_between_cnps). Updates `last` when it does.
constexpr bool cnp_due(std::optional<time_ns>& last, time_ns now, time_ns interval) {
  if (last && now < *last + interval) return false;
  last = now;
  return true;
}

/// The congestion point: RED-like marking of ECN-capable packets by the bytes queued
/// before them (DCQCN's Kmin / Kmax / Pmax). Below kmin never, from kmax always, between
/// with probability pmax · (q − kmin) / (kmax − kmin).
struct ecn_marking {
  std::uint64_t kmin = 5'000;    ///< bytes (the paper's 5 KB)
  std::uint64_t kmax = 200'000;  ///< bytes (the paper's 200 KB)
  double pmax = 0.01;            ///< 0..1 (the paper's 1%)
  /// The chance that a packet finding q bytes queued is marked.
  constexpr double probability(std::uint64_t q) const {
    if (q >= kmax) return 1.0;
    if (q <= kmin) return 0.0;
    return pmax * static_cast<double>(q - kmin) / static_cast<double>(kmax - kmin);
  }
  /// Whether it is marked, for a uniform draw u in [0, 1) the caller made.
  constexpr bool mark(std::uint64_t q, double u) const { return u < probability(q); }
};

}  // namespace pushwire::flow
