// Test helpers for flow/: collecting actions, and a discrete-event link between a requester
// and a responder (latency, serialisation at a line rate, scripted loss, page faults).
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <queue>
#include <span>
#include <set>
#include <utility>
#include <variant>
#include <vector>

#include <pushwire/flow/flow.hpp>
#include <pushwire/msg/message.hpp>

#include "packet_print.hpp"

namespace pwtest {

using namespace pushwire::flow;
namespace ib = pushwire::ib;
namespace msg = pushwire::msg;

/// Runs fn(sink) over fresh storage and returns the actions as a vector.
template <class A, std::size_t N = 512, class F>
std::vector<A> collect(F&& fn, step_result* r = nullptr) {
  auto storage = std::make_unique<std::array<A, N>>();
  sink<A> out{std::span<A>(*storage)};
  const step_result res = fn(out);
  if (r) *r = res;
  return {out.begin(), out.end()};
}

template <class T, class V>
std::vector<T> only(const std::vector<V>& v) {
  std::vector<T> out;
  for (const auto& a : v)
    if (auto p = std::get_if<T>(&a)) out.push_back(*p);
  return out;
}

/// A requester and a responder joined by a full-duplex link. Time in ns.
struct rc_sim {
  struct options {
    requester_config req{};
    responder_config resp{};
    time_ns latency = 2'000;        ///< one way
    double gbps = 100.0;            ///< line rate
    std::uint32_t overhead = 58;    ///< Ethernet + IP + UDP + BTH + ICRC bytes per packet
    std::uint32_t receives = 64;    ///< posted at the responder at start
  };
  struct fault {
    std::uint64_t va_lo = 0, va_hi = 0;  ///< the faulting range
    time_ns duration = 0;                ///< from the first touch
    std::optional<time_ns> ends{};       ///< set at the first touch
    bool active = false;
  };

  explicit rc_sim(options o) : opt(o), rq(o.req), rs(o.resp, memory_port{this, &check_memory, nullptr}) { rs.post_receive(o.receives); }

  options opt;
  requester<256> rq;
  responder<16> rs;
  time_ns now = 0;
  fault pf{};
  /// Return true to lose a packet (to_responder: direction).
  std::function<bool(const packet&, bool to_responder)> lose = [](const packet&, bool) { return false; };

  std::vector<qp_action::complete> completions;
  std::vector<time_ns> completed_at;
  std::vector<qp_action::place> placed;
  std::vector<qp_action::receive> received;
  std::vector<packet> sent_req, sent_resp;
  std::uint64_t lost = 0;

  struct event {
    time_ns at;
    std::uint64_t seq;
    int kind;  // 0: to responder, 1: to requester, 2: requester timer
    packet pkt;
    timer_kind timer;
    bool operator>(const event& o) const { return at != o.at ? at > o.at : seq > o.seq; }
  };
  std::priority_queue<event, std::vector<event>, std::greater<event>> q;
  std::uint64_t seq = 0;
  time_ns link_free[2] = {0, 0};

  static access_result check_memory(void* ctx, std::uint32_t, std::uint64_t va, std::uint32_t len, access_kind, bool) {
    auto* s = static_cast<rc_sim*>(ctx);
    fault& f = s->pf;
    if (!f.active || va + len <= f.va_lo || va >= f.va_hi) return {};
    if (!f.ends) f.ends = s->now + f.duration;
    if (s->now >= *f.ends) return {};
    return {access_result::page_fault, static_cast<std::uint32_t>((*f.ends - s->now + 999) / 1000)};
  }

  void take(const std::vector<qp_action_t>& acts, bool from_requester) {
    for (const auto& a : acts) {
      if (auto t = std::get_if<qp_action::transmit>(&a)) {
        const int dir = from_requester ? 0 : 1;
        (from_requester ? sent_req : sent_resp).push_back(t->pkt);
        const auto bytes = t->pkt.length + opt.overhead;
        const auto tx = static_cast<time_ns>(bytes * 8 / opt.gbps);
        const time_ns start = std::max(now, link_free[dir]);
        link_free[dir] = start + tx;
        if (lose(t->pkt, from_requester)) {
          ++lost;
          continue;
        }
        q.push({link_free[dir] + opt.latency, seq++, dir, t->pkt, {}});
      } else if (auto c = std::get_if<qp_action::complete>(&a)) {
        completions.push_back(*c);
        completed_at.push_back(now);
      } else if (auto st = std::get_if<qp_action::set_timer>(&a)) {
        q.push({st->at, seq++, 2, {}, st->kind});
      } else if (auto p = std::get_if<qp_action::place>(&a)) {
        placed.push_back(*p);
      } else if (auto r = std::get_if<qp_action::receive>(&a)) {
        received.push_back(*r);
      }
    }
  }
  void post(const work_request& wr) {
    take(collect<qp_action_t>([&](qp_sink& o) { return rq.post(wr, now, o); }), true);
  }
  /// Runs until nothing is pending or `limit` ns.
  void run(time_ns limit = 10'000'000'000) {
    while (!q.empty() && q.top().at <= limit) {
      const event e = q.top();
      q.pop();
      now = std::max(now, e.at);
      if (e.kind == 0) {
        take(collect<qp_action_t>([&](qp_sink& o) { return rs.on_packet(e.pkt, o); }), false);
      } else if (e.kind == 1) {
        take(collect<qp_action_t>([&](qp_sink& o) { return rq.on_packet(e.pkt, now, o); }), true);
      } else {
        take(collect<qp_action_t>([&](qp_sink& o) { return rq.on_timer(e.timer, now, o); }), true);
      }
      while (rq.wants_to_send())
        take(collect<qp_action_t>([&](qp_sink& o) {
               rq.pump(now, o);
               return step_result{};
             }),
             true);
      while (rs.wants_to_send())
        take(collect<qp_action_t>([&](qp_sink& o) {
               rs.pump(o);
               return step_result{};
             }),
             false);
    }
  }
  std::uint64_t retransmitted() const { return rq.stats().retransmitted; }
};

}  // namespace pwtest
