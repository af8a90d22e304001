// A port's transmit scheduler by traffic class (spec/qos.md §4). It holds descriptors, not
// payload: per class, the numbers of the QPs that have requests to send, served round robin
// within their class; flow::ets_scheduler chooses the class. The QP engine builds a chosen QP's
// next packet (gathering its payload) only when the port's wire takes a frame.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>

#include <pushwire/flow/ets.hpp>
#include <pushwire/rnic/core.hpp>

namespace pushwire::rnic {

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
