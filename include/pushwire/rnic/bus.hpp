// The host bus of the reference RNIC (spec/qos.md §8), in virtual time: each gather of a
// frame's payload, and each placement of an arriving frame's, is a job on it, with a rate and a
// latency. Jobs wait in one FIFO, or in a queue per flow (per QP, or per traffic class) served
// by deficit round robin (flow::drr), so one flow's burst does not hold back another's single
// packet. Sans-IO: time is an argument, finished jobs come back through a callback; the frames
// stay with the caller.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <unordered_map>

#include <pushwire/flow/ets.hpp>
#include <pushwire/rnic/core.hpp>
#include <pushwire/wire/fields.hpp>

namespace pushwire::rnic {

/// How the host bus orders its jobs.
enum class bus_policy : std::uint8_t {
  fifo,       ///< in the order they were submitted
  per_flow,   ///< a queue per flow (QP), served by DRR with bus_config::quantum
  per_class,  ///< a queue per traffic class (spec/qos.md §4), served by DRR with bus_config::quantum
};
inline constexpr std::array<wire::named_value, 3> bus_policy_names{
    {{bus_policy::fifo, "fifo"}, {bus_policy::per_flow, "per_flow"}, {bus_policy::per_class, "per_class"}}};
constexpr std::span<const wire::named_value> wire_enum_names(bus_policy) { return bus_policy_names; }

/// The host bus (device_config::bus).
struct bus_config {
  std::uint64_t rate = 0;        ///< bits per second; 0: no bus model (gathers and placements take no time)
  time_ns latency = 0;           ///< from a job's end to its frame being ready (for the wire, or for the QP), ns
  bus_policy policy = bus_policy::per_flow;
  std::uint32_t quantum = 4096;  ///< per_flow, per_class: DRR's quantum, bytes
};

class host_bus {
 public:
  explicit host_bus(bus_config c = {}) : cfg_(c) {}
  bool enabled() const { return cfg_.rate > 0; }
  const bus_config& config() const { return cfg_; }

  /// A job of `bytes` for flow `flow` in traffic class `tc`, submitted at `at`; `id` names it
  /// when it is done.
  void submit(std::uint32_t flow, std::uint8_t tc, std::uint64_t bytes, std::uint64_t id, time_ns at) {
    const std::uint32_t key = cfg_.policy == bus_policy::fifo ? 0 : cfg_.policy == bus_policy::per_class ? tc : flow;
    queues_[key].push_back({bytes, id, at});
    drr_.activate(key);
    ++waiting_;
  }
  /// Runs the bus up to `now`: each job that ends by then calls done(id, ready_at) (its end
  /// plus the latency). The bus chooses its next job when it frees, among those submitted by
  /// then.
  template <class Done>
  void advance(time_ns now, Done&& done) {
    for (;;) {
      if (busy_) {
        if (busy_->until > now) return;
        done(busy_->id, busy_->until + cfg_.latency);
        free_at_ = busy_->until;
        busy_.reset();
      }
      if (!waiting_) return;
      std::optional<time_ns> first;
      for (const auto& [k, q] : queues_)
        if (!q.empty() && (!first || q.front().at < *first)) first = q.front().at;
      const time_ns t = std::max(free_at_, *first);
      if (t > now) return;
      const auto k = drr_.pick([&](std::uint32_t f) { return submitted_by(f, t); }, [&](std::uint32_t) { return cfg_.quantum; });
      for (const auto& [f, q] : queues_)  // flows skipped as not yet submitted come back
        if (!q.empty()) drr_.activate(f);
      if (!k) return;
      std::deque<job>& q = queues_[*k];
      const job j = q.front();
      q.pop_front();
      if (q.empty()) queues_.erase(*k);
      --waiting_;
      drr_.charge(*k, j.bytes);
      busy_ = running{j.id, t + flow::wire_time(j.bytes, cfg_.rate)};
      wait_ns_ += t - j.at;
      ++served_;
    }
  }
  /// When the job on the bus ends (nullopt: none is on it).
  std::optional<time_ns> deadline() const { return busy_ ? std::optional<time_ns>{busy_->until} : std::nullopt; }
  /// Jobs waiting for the bus (the one on it not counted).
  std::size_t waiting() const { return waiting_; }
  std::uint64_t served() const { return served_; }
  /// The time jobs waited for the bus, summed, ns.
  std::uint64_t wait_ns() const { return wait_ns_; }

 private:
  struct job {
    std::uint64_t bytes, id;
    time_ns at;
  };
  struct running {
    std::uint64_t id;
    time_ns until;
  };
  bool submitted_by(std::uint32_t f, time_ns t) const {
    const auto it = queues_.find(f);
    return it != queues_.end() && !it->second.empty() && it->second.front().at <= t;
  }
  bus_config cfg_;
  std::unordered_map<std::uint32_t, std::deque<job>> queues_;
  flow::drr<std::uint32_t> drr_;
  std::optional<running> busy_;
  time_ns free_at_ = 0;
  std::size_t waiting_ = 0;
  std::uint64_t served_ = 0, wait_ns_ = 0;
};

}  // namespace pushwire::rnic
