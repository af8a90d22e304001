// Traffic classes of a port (spec/qos.md §4), sans-IO: which class a packet belongs to, and which
// class sends next. Time is an argument; nothing here holds a packet or its payload: the
// scheduler is told which classes have work and answers with a class.
//
// Sources: IEEE 802.1Qaz (ETS: transmission selection by strict priority, the highest class
// first, and by bandwidth shares among the ETS classes); mlnx_qos and mlx5's dcbnl (the class
// model: trust pcp | dscp, a DSCP → priority table whose default is DSCP >> 3, priority →
// class, per class a TSA, a bandwidth percentage summing to 100 over the ETS classes, and a
// rate limit); Shreedhar and Varghese, "Efficient Fair Queuing using Deficit Round Robin"
// (SIGCOMM 1995).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <unordered_map>

#include <pushwire/flow/core.hpp>

namespace pushwire::flow {

/// Traffic classes per port (802.1Qaz's eight).
inline constexpr std::size_t traffic_classes = 8;

/// How a class is selected for transmission (802.1Qaz's TSA).
enum class tsa : std::uint8_t {
  strict,  ///< before every ETS class; among strict classes the highest number first
  ets,     ///< its share of what the strict classes leave, by `weight`
};
inline constexpr std::array<wire::named_value, 2> tsa_names{{{tsa::strict, "strict"}, {tsa::ets, "ets"}}};
constexpr std::span<const wire::named_value> wire_enum_names(tsa) { return tsa_names; }

/// Where a packet's priority comes from (mlnx_qos --trust).
enum class trust : std::uint8_t {
  pcp,   ///< the service level's three low bits (RoCE: the VLAN PCP the SL maps to)
  dscp,  ///< the DSCP (the traffic class's six high bits) through the DSCP → priority table
};
inline constexpr std::array<wire::named_value, 2> trust_names{{{trust::pcp, "pcp"}, {trust::dscp, "dscp"}}};
constexpr std::span<const wire::named_value> wire_enum_names(trust) { return trust_names; }

/// The time `bytes` take at `bits_per_s` (rounded up; 0 when the rate is 0: unlimited).
constexpr time_ns wire_time(std::uint64_t bytes, std::uint64_t bits_per_s) {
  if (bits_per_s == 0) return 0;
  return static_cast<time_ns>((static_cast<unsigned __int128>(bytes) * 8'000'000'000u + bits_per_s - 1) / bits_per_s);
}

/// One traffic class's transmission selection.
struct tc_config {
  flow::tsa tsa = flow::tsa::ets;
  /// ETS: the class's share of the bandwidth the strict classes leave, in percent (0..100; the
  /// ETS classes' weights sum to 100). A class of weight 0 sends only when no weighted ETS
  /// class has work. Strict: 0.
  std::uint8_t weight = 0;
  /// The most the class sends, in bits per second (mlnx_qos --ratelimit); 0: unlimited.
  std::uint64_t rate_limit = 0;
  /// The burst the rate limit allows beyond its rate, in bytes (at least one frame passes).
  std::uint32_t burst = 16 * 1024;
};

/// A port's class model: a packet's priority from its SL or DSCP, its class from its priority,
/// and each class's selection.
struct qos_map {
  flow::trust trust = flow::trust::dscp;
  /// DSCP → priority (0..7); the default is DSCP >> 3, as mlx5's.
  std::array<std::uint8_t, 64> dscp_prio = [] {
    std::array<std::uint8_t, 64> t{};
    for (std::size_t d = 0; d < t.size(); ++d) t[d] = static_cast<std::uint8_t>(d >> 3);
    return t;
  }();
  /// Priority → class (0..7); the default is the identity.
  std::array<std::uint8_t, 8> prio_tc{0, 1, 2, 3, 4, 5, 6, 7};
  /// Each class's selection; by default all ETS, with equal shares (13 % for 0..3, 12 % for 4..7).
  std::array<tc_config, traffic_classes> tc = [] {
    std::array<tc_config, traffic_classes> t{};
    for (std::size_t c = 0; c < t.size(); ++c) t[c].weight = c < 4 ? 13 : 12;
    return t;
  }();

  /// The priority of a packet with service level `sl` and IP traffic class `tclass`.
  constexpr std::uint8_t priority(std::uint8_t sl, std::uint8_t tclass) const {
    return trust == flow::trust::pcp ? static_cast<std::uint8_t>(sl & 7) : static_cast<std::uint8_t>(dscp_prio[tclass >> 2] & 7);
  }
  /// Its class.
  constexpr std::uint8_t class_of(std::uint8_t sl, std::uint8_t tclass) const { return static_cast<std::uint8_t>(prio_tc[priority(sl, tclass)] & 7); }

  /// invalid_argument: a priority or class out of 0..7, a strict class with a weight, or ETS
  /// weights that do not sum to 100 (when any class is ETS).
  constexpr errc check() const {
    for (const auto p : dscp_prio)
      if (p > 7) return errc::invalid_argument;
    for (const auto c : prio_tc)
      if (c > 7) return errc::invalid_argument;
    unsigned sum = 0;
    bool any_ets = false;
    for (const tc_config& c : tc) {
      if (c.tsa == flow::tsa::strict && c.weight) return errc::invalid_argument;
      if (c.tsa == flow::tsa::ets) any_ets = true, sum += c.weight;
    }
    return any_ets && sum != 100 ? errc::invalid_argument : errc{};
  }
};

/// Deficit round robin over queues named by Key. A queue with work joins the round at its end;
/// each time it reaches the front it gains its quantum and is served while its deficit is
/// positive (a packet may overdraw it: the debt is carried into its next turn); a queue found
/// without work leaves the round and forgets its deficit. Over a busy period each queue's share
/// of the bytes is its quantum's share, within one packet per queue.
template <class Key>
class drr {
 public:
  /// The queue that sends next: the round's front once it has credit. `has_work(k)` says whether
  /// queue k still has something; `quantum(k)` is its quantum in bytes (at least 1).
  template <class HasWork, class Quantum>
  std::optional<Key> pick(HasWork&& has_work, Quantum&& quantum) {
    while (!round_.empty()) {
      const Key k = round_.front();
      entry& e = st_[k];
      if (!has_work(k)) {
        round_.pop_front();
        e = {};
        continue;
      }
      if (!e.granted) e.deficit += static_cast<std::int64_t>(std::max<std::uint64_t>(quantum(k), 1)), e.granted = true;
      if (e.deficit > 0) return k;
      e.granted = false;
      round_.pop_front();
      round_.push_back(k);
    }
    return std::nullopt;
  }
  /// Queue k has work: it joins the round if it is not in it.
  void activate(Key k) {
    entry& e = st_[k];
    if (e.in_round) return;
    e.in_round = true;
    round_.push_back(k);
  }
  /// Queue k (the one pick() named) sent `bytes`.
  void charge(Key k, std::uint64_t bytes) { st_[k].deficit -= static_cast<std::int64_t>(bytes); }
  /// Queue k leaves the round (it was removed).
  void remove(Key k) {
    if (auto it = st_.find(k); it != st_.end()) {
      if (it->second.in_round) round_.erase(std::find(round_.begin(), round_.end(), k));
      st_.erase(it);
    }
  }
  std::size_t active() const { return round_.size(); }
  /// Queue k's deficit in bytes (0 when it is not in the round).
  std::int64_t deficit(Key k) const {
    const auto it = st_.find(k);
    return it == st_.end() ? 0 : it->second.deficit;
  }

 private:
  struct entry {
    std::int64_t deficit = 0;
    bool granted = false;
    bool in_round = false;
  };
  std::deque<Key> round_;
  std::unordered_map<Key, entry> st_;
};

/// A rate limit by the generic cell rate algorithm: a sender of `rate` bits per second that may
/// run `burst` bytes ahead of it. Equivalent to a token bucket of depth `burst`.
class rate_limiter {
 public:
  constexpr rate_limiter(std::uint64_t bits_per_s = 0, std::uint32_t burst = 0) : rate_(bits_per_s), tau_(wire_time(burst, bits_per_s)) {}
  /// When the next send may go (≤ now: now); nullopt when unlimited.
  constexpr std::optional<time_ns> eligible_at() const { return rate_ ? std::optional<time_ns>{tat_ > tau_ ? tat_ - tau_ : 0} : std::nullopt; }
  constexpr bool eligible(time_ns now) const { return !rate_ || tat_ <= now + tau_; }
  /// Whether the limit binds at `now`: what was sent runs ahead of the rate.
  constexpr bool limiting(time_ns now) const { return rate_ && tat_ > now; }
  /// `bytes` left at `now`.
  constexpr void sent(std::uint64_t bytes, time_ns now) {
    if (rate_) tat_ = std::max(tat_, now) + wire_time(bytes, rate_);
  }
  constexpr std::uint64_t rate() const { return rate_; }
  /// A limit of `per_s` packets per second (at most 10^9; 0: none), each passed as sent(1, now),
  /// that may run `burst` packets ahead of it: a packet takes 10^9 / per_s ns rounded up, and
  /// after an idle spell 1 + `burst` pass at once.
  static constexpr rate_limiter packets(std::uint64_t per_s, std::uint32_t burst) {
    rate_limiter r(std::min<std::uint64_t>(per_s, 1'000'000'000) * 8, 0);
    r.tau_ = burst * wire_time(1, r.rate_);
    return r;
  }

 private:
  std::uint64_t rate_;
  time_ns tau_;
  time_ns tat_ = 0;  ///< the theoretical arrival time of the next byte
};

/// A port's transmission selection among its eight classes (802.1Qaz): the strict classes
/// first, the highest number first; then the ETS classes of positive weight by DRR with quanta
/// in proportion to their weights; then those of weight 0 by DRR; a class beyond its rate
/// limit waits. It holds no packet: the caller says which classes have work.
class ets_scheduler {
 public:
  /// Bytes of quantum per percent of weight (a 25 % class gains 3200 bytes a turn).
  static constexpr std::uint64_t quantum_per_percent = 128;

  explicit ets_scheduler(const std::array<tc_config, traffic_classes>& c = qos_map{}.tc) : cfg_(c) {
    for (std::size_t i = 0; i < traffic_classes; ++i) limit_[i] = rate_limiter(c[i].rate_limit, c[i].burst);
  }
  /// The class that sends next at `now` among those whose bit is set in `work`, or nullopt.
  std::optional<std::uint8_t> pick(std::uint8_t work, time_ns now) {
    const auto ready = [&](std::uint8_t c) { return (work >> c & 1) && limit_[c].eligible(now); };
    for (int c = traffic_classes - 1; c >= 0; --c)
      if (cfg_[static_cast<std::size_t>(c)].tsa == tsa::strict && ready(static_cast<std::uint8_t>(c))) return static_cast<std::uint8_t>(c);
    for (int tier = 0; tier < 2; ++tier) {
      const auto in_tier = [&](std::uint8_t c) { return cfg_[c].tsa == tsa::ets && (cfg_[c].weight > 0) == (tier == 0); };
      for (std::uint8_t c = 0; c < traffic_classes; ++c)
        if (in_tier(c) && ready(c)) rounds_[static_cast<std::size_t>(tier)].activate(c);
      if (const auto c = rounds_[static_cast<std::size_t>(tier)].pick([&](std::uint8_t k) { return in_tier(k) && ready(k); },
                                                                      [&](std::uint8_t k) { return std::max<std::uint64_t>(cfg_[k].weight, 1) * quantum_per_percent; }))
        return c;
    }
    return std::nullopt;
  }
  /// Class c (the one pick() named) sent a frame of `bytes` at `now`.
  void sent(std::uint8_t c, std::uint64_t bytes, time_ns now) {
    if (c >= traffic_classes) return;
    limit_[c].sent(bytes, now);
    if (cfg_[c].tsa == tsa::ets) rounds_[cfg_[c].weight > 0 ? 0 : 1].charge(c, bytes);
  }
  /// When class c's rate limit lets it send again, if it holds it back at `now`.
  std::optional<time_ns> held_until(std::uint8_t c, time_ns now) const {
    if (c >= traffic_classes || limit_[c].eligible(now)) return std::nullopt;
    return limit_[c].eligible_at();
  }
  bool eligible(std::uint8_t c, time_ns now) const { return c < traffic_classes && limit_[c].eligible(now); }
  const std::array<tc_config, traffic_classes>& config() const { return cfg_; }

 private:
  std::array<tc_config, traffic_classes> cfg_;
  std::array<rate_limiter, traffic_classes> limit_{};
  std::array<drr<std::uint8_t>, 2> rounds_{};
};

}  // namespace pushwire::flow
