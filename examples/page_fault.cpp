// A requester and a responder, directly connected: the responder meets a page that is not
// resident and answers with a page-fault ACK; the requester pauses for the announced delay
// and resumes. Prints what happened; exits 1 if the write did not complete.
#include <array>
#include <cstdio>
#include <deque>
#include <span>
#include <string>
#include <variant>

#include <pushwire/flow/rc.hpp>

using namespace pushwire;

int main() {
  const std::uint64_t va = 0x10000;
  const std::uint32_t rkey = 7;
  flow::time_ns now = 0;
  bool resident = false;  // the responder's page faults in 2 ms after the first touch
  flow::memory_port mem{&resident, [](void* ctx, std::uint32_t, std::uint64_t, std::uint32_t, flow::access_kind, bool) {
                          return *static_cast<bool*>(ctx) ? flow::access_result{}
                                                          : flow::access_result{flow::access_result::page_fault, 2000};
                        }, nullptr};
  flow::responder<> rs({.mtu = 4096}, mem);
  // [readme]
  flow::requester<64> rq({.mtu = 4096, .timeout = 1'048'576});
  std::array<flow::qp_action_t, 256> storage;
  flow::qp_sink out{std::span(storage)};
  rq.post({.id = 1, .op = flow::wr_op::write, .length = 1 << 20, .remote_va = va, .rkey = rkey}, now, out);
  // out holds transmit{packet} actions and set_timer{retransmit, deadline}. A page-fault ACK
  // (an RNR NAK answering the write) pauses the QP: no retransmission, no retry counted,
  // until the announced delay has passed and on_timer(wait, t) resumes it.
  // [/readme]
  std::deque<flow::packet> to_resp, to_req;
  std::optional<flow::time_ns> wait;
  auto take = [&](flow::qp_sink& o, bool from_req) {
    for (const auto& a : o) {
      if (auto t = std::get_if<flow::qp_action::transmit>(&a)) (from_req ? to_resp : to_req).push_back(t->pkt);
      if (auto t = std::get_if<flow::qp_action::set_timer>(&a); t && t->kind == flow::timer_kind::wait) wait = t->at;
      if (auto c = std::get_if<flow::qp_action::complete>(&a))
        std::printf("%8.3f ms  write %llu completed: %s\n", now / 1e6, static_cast<unsigned long long>(c->wr_id),
                    std::string{wire::enum_name(c->status)}.c_str());
    }
    o.clear();
  };
  take(out, true);
  while (!rq.quiescent()) {
    if (to_resp.empty() && to_req.empty() && wait) {  // the link is idle: time passes to the wait
      now = *wait;
      wait.reset();
      resident = true;
      std::printf("%8.3f ms  pause over, resuming at PSN %u\n", now / 1e6, rq.una());
      rq.on_timer(flow::timer_kind::wait, now, out);
      take(out, true);
      continue;
    }
    if (to_resp.empty() && to_req.empty()) break;
    now += 1000;
    while (!to_resp.empty()) {
      rs.on_packet(to_resp.front(), out);
      to_resp.pop_front();
      take(out, false);
    }
    while (!to_req.empty()) {
      const auto p = to_req.front();
      to_req.pop_front();
      if (ib::syndrome{p.aeth.syndrome}.kind() == ib::aeth_kind::rnr_nak)
        std::printf("%8.3f ms  page-fault ACK for PSN %u: pause %u us\n", now / 1e6, p.psn, *ib::page_fault_delay_us(p.aeth));
      rq.on_packet(p, now, out);
      take(out, true);
    }
  }
  std::printf("sent %llu packets, %llu retransmitted, %llu timeouts\n", static_cast<unsigned long long>(rq.stats().sent),
              static_cast<unsigned long long>(rq.stats().retransmitted), static_cast<unsigned long long>(rq.stats().timeouts));
  return rq.quiescent() && rq.state() == flow::req_state::idle ? 0 : 1;
}
