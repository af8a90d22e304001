// A port's transmit scheduler by traffic class (spec/qos.md §4). It holds descriptors, not
// payload: per class, the numbers of the QPs that have requests to send, served round robin
// within their class; flow::ets_scheduler chooses the class. The QP engine builds a chosen QP's
// next packet (gathering its payload) only when the port's wire takes a frame.
//
// Also the text form of a port's egress settings, as mlnx_qos spells them, which the device
// process's `ctl port set` and the verbs provider's PUSHWIRE_VERBS_QOS both take.
#pragma once

#include <array>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include <pushwire/flow/dcqcn.hpp>
#include <pushwire/flow/ets.hpp>
#include <pushwire/ib/encap.hpp>
#include <pushwire/rnic/core.hpp>

namespace pushwire::rnic {

/// A rate: bits per second, with an optional K, M or G (powers of 1000).
inline bool parse_rate(std::string_view s, std::uint64_t& v) {
  std::uint64_t mul = 1;
  if (!s.empty() && (s.back() == 'K' || s.back() == 'k')) mul = 1000, s.remove_suffix(1);
  else if (!s.empty() && (s.back() == 'M' || s.back() == 'm')) mul = 1000'000, s.remove_suffix(1);
  else if (!s.empty() && (s.back() == 'G' || s.back() == 'g')) mul = 1000'000'000, s.remove_suffix(1);
  if (!parse_number(s, v) || v > UINT64_MAX / mul) return false;
  v *= mul;
  return true;
}

/// A port's egress settings (spec/qos.md §5): its rate, its class model, its ECN marking, and
/// the ECN of what it sends.
struct egress_config {
  std::uint64_t rate_bps = 0;  ///< 0: as fast as the wire takes frames
  std::optional<flow::qos_map> classes{};
  std::optional<flow::ecn_marking> marking{};
  ib::ecn ecn = ib::ecn::not_ect;
};

/// Applies one setting to e; an empty string, or why it is refused (e is then unchanged):
///   rate R                  the port's rate, bits per second (K, M, G); 0: unlimited
///   classes on|off          the class model (any of the next keys turns it on)
///   trust pcp|dscp
///   tsa T,T,...             8 of strict | ets, class 0 first
///   tcbw W,W,...            8 ETS weights in percent (summing to 100 over the ETS classes)
///   prio_tc C,C,...         8 classes, priority 0 first
///   ratelimit R,R,...       8 rates (K, M, G; 0: none)
///   dscp2prio D,P           DSCP D (0..63) has priority P (0..7)
///   mark KMIN,KMAX,PMAX|off ECN marking of ECT frames by the bytes queued (RED-like)
///   ecn off|ect0|ect1       the ECN field of what the port sends
/// Whole models are checked by check_egress().
inline std::string apply_egress(egress_config& e, std::string_view key, std::string_view value) {
  const auto list = [&](auto&& one) -> bool {  // 8 comma-separated values
    std::size_t i = 0;
    for (std::size_t at = 0; at <= value.size(); ++i) {
      const std::size_t z = std::min(value.find(',', at), value.size());
      if (i >= flow::traffic_classes || !one(i, value.substr(at, z - at))) return false;
      at = z + 1;
    }
    return i == flow::traffic_classes;
  };
  egress_config n = e;
  flow::qos_map& m = n.classes ? *n.classes : n.classes.emplace();
  bool ok = true;
  if (key == "rate") {
    ok = parse_rate(value, n.rate_bps);
    n.classes = e.classes;
  } else if (key == "classes") {
    ok = value == "on" || value == "off";
    if (value == "off") n.classes.reset();
  } else if (key == "trust") {
    ok = value == "pcp" || value == "dscp";
    m.trust = value == "pcp" ? flow::trust::pcp : flow::trust::dscp;
  } else if (key == "tsa") {
    ok = list([&](std::size_t i, std::string_view v) {
      m.tc[i].tsa = v == "strict" ? flow::tsa::strict : flow::tsa::ets;
      if (v == "strict") m.tc[i].weight = 0;
      return v == "strict" || v == "ets";
    });
  } else if (key == "tcbw") {
    ok = list([&](std::size_t i, std::string_view v) { return parse_number(v, m.tc[i].weight) && m.tc[i].weight <= 100; });
  } else if (key == "prio_tc") {
    ok = list([&](std::size_t i, std::string_view v) { return parse_number(v, m.prio_tc[i]) && m.prio_tc[i] < 8; });
  } else if (key == "ratelimit") {
    ok = list([&](std::size_t i, std::string_view v) { return parse_rate(v, m.tc[i].rate_limit); });
  } else if (key == "dscp2prio") {
    const std::size_t c = value.find(',');
    unsigned d = 0, p = 0;
    ok = c != std::string_view::npos && parse_number(value.substr(0, c), d) && parse_number(value.substr(c + 1), p) && d < 64 && p < 8;
    if (ok) m.dscp_prio[d] = static_cast<std::uint8_t>(p);
  } else if (key == "mark") {
    n.classes = e.classes;
    if (value == "off") {
      n.marking.reset();
    } else {
      flow::ecn_marking k;
      const std::size_t a = value.find(','), b = a == std::string_view::npos ? a : value.find(',', a + 1);
      double pmax = 0;
      if (b != std::string_view::npos) {
        const std::string_view ps = value.substr(b + 1);
        const auto [pe, ec] = std::from_chars(ps.data(), ps.data() + ps.size(), pmax);
        ok = ec == std::errc{} && pe == ps.data() + ps.size();
      }
      ok = ok && b != std::string_view::npos && parse_number(value.substr(0, a), k.kmin) && parse_number(value.substr(a + 1, b - a - 1), k.kmax) &&
           k.kmin < k.kmax && pmax >= 0 && pmax <= 1;
      k.pmax = pmax;
      if (ok) n.marking = k;
    }
  } else if (key == "ecn") {
    n.classes = e.classes;
    ok = value == "off" || value == "ect0" || value == "ect1";
    n.ecn = value == "ect0" ? ib::ecn::ect0 : value == "ect1" ? ib::ecn::ect1 : ib::ecn::not_ect;
  } else {
    return "settings: rate, classes, trust, tsa, tcbw, prio_tc, ratelimit, dscp2prio, mark, ecn";
  }
  if (!ok) {
    if (key == "rate") return "rate: bits per second (K, M, G: powers of 1000), 0 unlimited";
    if (key == "tsa") return "tsa: 8 of strict | ets, comma-separated";
    if (key == "tcbw") return "tcbw: 8 weights 0..100, comma-separated";
    if (key == "prio_tc") return "prio_tc: 8 classes 0..7, comma-separated";
    if (key == "ratelimit") return "ratelimit: 8 rates in bits per second (K, M, G), comma-separated";
    if (key == "dscp2prio") return "dscp2prio: DSCP,PRIORITY (0..63, 0..7)";
    if (key == "mark") return "mark: KMIN,KMAX,PMAX (bytes, bytes, 0..1; KMIN < KMAX) or off";
    return std::string(key) + ": not one of its values";
  }
  e = std::move(n);
  return {};
}
/// Why e's class model is refused (qos_map::check), or an empty string.
inline std::string check_egress(const egress_config& e) {
  if (e.classes && e.classes->check() != flow::errc{})
    return "classes: a strict class has no weight, and the ETS classes' weights (tcbw) sum to 100";
  return {};
}

class class_scheduler {
 public:
  explicit class_scheduler(const flow::qos_map& m) : ets_(m.tc) {}

  /// QP qpn has requests in class tc (0..7): it waits at the end of its class.
  void enqueue(std::uint32_t qpn, std::uint8_t tc) { waiting_[tc & 7].push_back(qpn); }
  /// The QP whose next packet goes at `now`, and its class; it leaves its class's queue (the
  /// caller enqueues it again while it has more). nullopt: no class with QPs may send now.
  std::optional<std::pair<std::uint8_t, std::uint32_t>> next(time_ns now) {
    const auto c = ets_.pick(work(), now);
    if (!c) return std::nullopt;
    const std::uint32_t qpn = waiting_[*c].front();
    waiting_[*c].pop_front();
    return std::pair{*c, qpn};
  }
  /// Class tc's packet of `bytes` (its frames) left for the wire at `now`.
  void sent(std::uint8_t tc, std::uint64_t bytes, time_ns now) { ets_.sent(tc, bytes, now); }
  /// Some class with waiting QPs may send at `now`.
  bool ready(time_ns now) const {
    for (std::uint8_t c = 0; c < flow::traffic_classes; ++c)
      if (!waiting_[c].empty() && ets_.eligible(c, now)) return true;
    return false;
  }
  /// The earliest time a class with waiting QPs that its rate limit holds back may send.
  std::optional<time_ns> deadline(time_ns now) const {
    std::optional<time_ns> t;
    for (std::uint8_t c = 0; c < flow::traffic_classes; ++c)
      if (const auto u = waiting_[c].empty() ? std::nullopt : ets_.held_until(c, now); u && (!t || *u < *t)) t = u;
    return t;
  }
  /// QPs waiting in class tc.
  std::size_t waiting(std::uint8_t tc) const { return waiting_[tc & 7].size(); }

 private:
  std::uint8_t work() const {
    std::uint8_t m = 0;
    for (std::uint8_t c = 0; c < flow::traffic_classes; ++c)
      if (!waiting_[c].empty()) m = static_cast<std::uint8_t>(m | 1u << c);
    return m;
  }
  flow::ets_scheduler ets_;
  std::array<std::deque<std::uint32_t>, flow::traffic_classes> waiting_{};
};

}  // namespace pushwire::rnic
