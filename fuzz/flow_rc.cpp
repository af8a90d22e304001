// Flow: the queue-pair machines.
//  - World mode: a requester and a responder over a lossy link (deliveries, losses, a
//    duplicate, reordering, timers, a page fault), each input byte choosing among the enabled
//    events. No data placed or delivered twice, completions in order and successful; complete
//    after settling.
//  - Hostile mode: packets built field by field from the input (any opcode, PSN near or far,
//    any AETH syndrome, lengths and READ sizes up to 2^32) thrown at a requester with work
//    outstanding and at a responder. Nothing may crash; completions stay in order.
#include <array>
#include <cstdint>
#include <memory>

#include "drive.hpp"
#include "worlds.hpp"

using namespace pushwire;

namespace {

void hostile(fuzz::provider& in) {
  flow::requester<8> rq({.mtu = 256, .window = 16, .timeout = 1000, .retry_cnt = 3, .rnr_retry = 3});
  flow::responder<4> rs({.mtu = 256});
  rs.post_receive(in.pick(4));
  auto buf = std::make_unique<std::array<flow::qp_action_t, 4096>>();
  std::uint64_t last_completed = 0;
  flow::time_ns now = 0;
  auto check = [&](const flow::qp_sink& out) {
    for (const auto& a : out)
      if (const auto* c = std::get_if<flow::qp_action::complete>(&a)) {
        PUSHWIRE_FUZZ_CHECK(c->wr_id == last_completed + 1);
        last_completed = c->wr_id;
      }
  };
  std::uint64_t next_id = 1;
  for (int i = 0; i < 512 && !in.empty(); ++i) {
    flow::qp_sink out{std::span<flow::qp_action_t>(*buf)};
    now += in.pick(200);
    switch (in.pick(4)) {
      case 0: {
        const auto op = static_cast<flow::wr_op>(in.pick(7));
        const auto r = rq.post({.id = next_id, .op = op, .length = in.take<std::uint16_t>(), .remote_va = 8u * in.pick(16), .rkey = 1}, now, out);
        if (r.ok() || r.error == flow::errc::qp_in_error) ++next_id;
        break;
      }
      case 1: {
        flow::packet p{};
        p.opcode = static_cast<ib::opcode>(in.take<std::uint8_t>());
        p.psn = in.flag() ? ib::psn_add(rq.una(), in.pick(8) - 2) : in.take<std::uint32_t>() & ib::psn_mask;
        p.aeth = {.syndrome = in.take<std::uint8_t>(), .msn = in.take<std::uint16_t>()};
        p.orig = in.take<std::uint64_t>();
        rq.on_packet(p, now, out);
        break;
      }
      case 2: {
        flow::packet p{};
        p.opcode = static_cast<ib::opcode>(in.take<std::uint8_t>());
        p.psn = in.flag() ? ib::psn_add(rs.expected_psn(), in.pick(8) - 2) : in.take<std::uint32_t>() & ib::psn_mask;
        p.ack_req = in.flag();
        p.length = in.flag() ? 256 : in.take<std::uint16_t>();
        p.dmalen = in.flag() ? in.take<std::uint16_t>() : in.take<std::uint32_t>();
        p.va = in.take<std::uint32_t>();
        p.rkey = in.take<std::uint8_t>();
        rs.on_packet(p, out);
        break;
      }
      default:
        for (const auto k : {flow::timer_kind::retransmit, flow::timer_kind::wait})
          if (const auto d = rq.deadline(k)) rq.on_timer(k, *d, out);
    }
    check(out);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return fuzz::world_or_hostile(data, size, hostile, [](fuzz::provider& in) {
    const int losses = in.pick(3);
    return pwtest::rc_world(losses, in.pick(4));
  });
}
