// Requester and responder: single transitions from a known state, then scenarios over a link.
#include <catch2/catch.hpp>

#include <array>
#include <span>
#include <tuple>
#include <vector>

#include <pushwire/flow/testing.hpp>

#include "harness.hpp"

using namespace pwtest;

namespace {

constexpr std::uint32_t mtu = 1024;

requester_config rc_cfg() { return {.mtu = mtu, .dest_qp = 0x11, .start_psn = 0xFFFFFE, .window = 64, .timeout = 100'000}; }

packet ack_for(std::uint32_t psn, std::uint8_t syndrome = ib::syndrome::ack(31).raw) {
  packet a{};
  a.opcode = ib::opcode::rc_acknowledge;
  a.psn = psn & ib::psn_mask;
  a.aeth = {.syndrome = syndrome, .msn = 0};
  return a;
}

template <class R>
std::vector<packet> sent(const std::vector<qp_action_t>& acts) {
  std::vector<packet> out;
  for (const auto& t : only<qp_action::transmit>(acts)) out.push_back(t.pkt);
  return out;
}

}  // namespace

// set_state is a test hook (flow/testing.hpp), not a member of the machines' API.
template <class M, class S>
concept has_set_state_member = requires(M& m, S s) { m.set_state(s); };
static_assert(!has_set_state_member<requester<4>, req_state>);
static_assert(!has_set_state_member<responder<>, resp_state>);
static_assert(!has_set_state_member<dc_initiator<4, 2>, dci_state>);
static_assert(!has_set_state_member<dc_target<4>, dct_state>);

TEST_CASE("testing::set_state puts a machine in a state without a transition") {
  requester<4> rq(rc_cfg());
  testing::set_state(rq, req_state::error);
  CHECK(rq.state() == req_state::error);
  CHECK(rq.enqueue({.id = 1, .op = wr_op::send, .length = 8}).error == errc::qp_in_error);
  CHECK(rq.stats().sent == 0);
  responder<> rs;
  testing::set_state(rs, resp_state::faulted);
  CHECK(rs.state() == resp_state::faulted);
  dc_initiator<4, 2> dci;
  testing::set_state(dci, dci_state::disconnecting);
  CHECK(dci.state() == dci_state::disconnecting);
  dc_target<4> dct;
  testing::set_state(dct, dct_state::connected);
  CHECK(dct.state() == dct_state::connected);
}

TEST_CASE("requester: segmentation follows FIRST/MIDDLE/LAST/ONLY, AckReq on last and periodically") {
  requester<8> rq(rc_cfg());
  const auto acts = collect<qp_action_t>([&](qp_sink& o) { return rq.post({.id = 1, .op = wr_op::write_imm, .length = 3 * mtu + 1, .remote_va = 0x1000, .rkey = 9, .imm = 0x07050100}, 0, o); });
  const auto p = sent<void>(acts);
  REQUIRE(p.size() == 4);
  CHECK(p[0].opcode == ib::opcode::rc_rdma_write_first);
  CHECK(p[1].opcode == ib::opcode::rc_rdma_write_middle);
  CHECK(p[2].opcode == ib::opcode::rc_rdma_write_middle);
  CHECK(p[3].opcode == ib::opcode::rc_rdma_write_last_with_immediate);
  CHECK(p[0].psn == 0xFFFFFE);
  CHECK(p[1].psn == 0xFFFFFF);
  CHECK(p[2].psn == 0);  // 24-bit wrap
  CHECK(p[3].psn == 1);
  CHECK(p[0].va == 0x1000);
  CHECK(p[0].dmalen == 3 * mtu + 1);
  CHECK(p[3].length == 1);
  CHECK(p[3].imm == 0x07050100);
  CHECK(p[3].ack_req);
  CHECK_FALSE(p[0].ack_req);
  // every 16th PSN asks for an ACK even mid-message
  requester<8> rq2({.mtu = 256, .window = 64, .ackreq_every = 16});
  const auto p2 = sent<void>(collect<qp_action_t>([&](qp_sink& o) { return rq2.post({.id = 1, .op = wr_op::send, .length = 40 * 256}, 0, o); }));
  REQUIRE(p2.size() == 40);
  CHECK(p2[15].ack_req);
  CHECK(p2[31].ack_req);
  CHECK_FALSE(p2[16].ack_req);
  CHECK(p2[39].ack_req);
  CHECK(p2[0].opcode == ib::opcode::rc_send_first);
  CHECK(p2[1].opcode == ib::opcode::rc_send_middle);
  CHECK(p2[39].opcode == ib::opcode::rc_send_last);
  // only, with immediate and zero length
  requester<8> rq3({.mtu = 256});
  CHECK(sent<void>(collect<qp_action_t>([&](qp_sink& o) { return rq3.post({.id = 1, .op = wr_op::send_imm, .length = 0, .imm = 5}, 0, o); }))[0].opcode == ib::opcode::rc_send_only_with_immediate);
}

TEST_CASE("requester: the packet that fills the window asks for an ACK (window below ackreq_every)") {
  requester<8> rq({.mtu = 256, .dest_qp = 0x11, .start_psn = 0, .window = 4, .ackreq_every = 16});
  const auto p = sent<void>(collect<qp_action_t>([&](qp_sink& o) { return rq.post({.id = 1, .op = wr_op::write, .length = 10 * 256, .rkey = 1}, 0, o); }));
  REQUIRE(p.size() == 4);  // the window
  CHECK(!p[0].ack_req);
  CHECK(!p[2].ack_req);
  CHECK(p[3].ack_req);  // else no ACK would come before the timeout
}

TEST_CASE("requester: a burst of messages pumped together asks for one ACK, on its last packet") {
  requester<8> rq({.mtu = 256, .dest_qp = 0x11, .start_psn = 0, .window = 64, .ackreq_every = 16});
  for (std::uint64_t i = 1; i <= 5; ++i) REQUIRE(rq.enqueue({.id = i, .op = wr_op::send, .length = 100}).ok());
  auto p = sent<void>(collect<qp_action_t>([&](qp_sink& o) { rq.pump(0, o); return step_result{}; }));
  REQUIRE(p.size() == 5);
  for (std::size_t i = 0; i < 4; ++i) CHECK_FALSE(p[i].ack_req);
  CHECK(p[4].ack_req);  // the queue is empty after it
  // one posted alone is its own burst
  p = sent<void>(collect<qp_action_t>([&](qp_sink& o) { return rq.post({.id = 6, .op = wr_op::write, .length = 300, .rkey = 1}, 0, o); }));
  REQUIRE(p.size() == 2);
  CHECK_FALSE(p[0].ack_req);
  CHECK(p[1].ack_req);
  // READ and atomics ask whatever follows them
  for (std::uint64_t i = 7; i <= 8; ++i) REQUIRE(rq.enqueue({.id = i, .op = i == 7 ? wr_op::read : wr_op::send, .length = 8}).ok());
  p = sent<void>(collect<qp_action_t>([&](qp_sink& o) { rq.pump(0, o); return step_result{}; }));
  REQUIRE(p.size() == 2);
  CHECK(p[0].ack_req);
  CHECK(p[1].ack_req);
}

TEST_CASE("requester: the last packet before the credits run out asks for the ACK that brings more") {
  requester_config c{.mtu = 256, .dest_qp = 0x11, .start_psn = 0, .window = 64, .ackreq_every = 16};
  c.honor_credits = true;
  requester<8> rq(c);
  REQUIRE(sent<void>(collect<qp_action_t>([&](qp_sink& o) { return rq.post({.id = 1, .op = wr_op::send, .length = 8}, 0, o); })).size() == 1);
  // the ACK announces no receive posted: no new SEND starts while packets are outstanding
  (void)collect<qp_action_t>([&](qp_sink& o) { return rq.on_packet(ack_for(0, ib::syndrome::ack(0).raw), 1, o); });
  REQUIRE(rq.enqueue({.id = 2, .op = wr_op::write, .length = 8, .rkey = 1}).ok());
  REQUIRE(rq.enqueue({.id = 3, .op = wr_op::send, .length = 8}).ok());
  REQUIRE(rq.enqueue({.id = 4, .op = wr_op::send, .length = 8}).ok());
  const auto p = sent<void>(collect<qp_action_t>([&](qp_sink& o) { rq.pump(2, o); return step_result{}; }));
  // the WRITE goes; the SEND behind it waits for credits while the WRITE is outstanding
  REQUIRE(p.size() == 1);
  CHECK(p[0].opcode == ib::opcode::rc_rdma_write_only);
  CHECK(p[0].ack_req);
}

TEST_CASE("requester: a pump with room for one packet asks for an ACK at each message's end") {
  // (a paced or classed QP: the RNIC pumps it with room for one packet and the timer's actions)
  requester_config c{.mtu = 256, .dest_qp = 0x11, .start_psn = 0, .window = 64, .ackreq_every = 16};
  requester<8> rq(c);
  REQUIRE(rq.enqueue({.id = 1, .op = wr_op::write, .length = 512, .rkey = 1}).ok());
  REQUIRE(rq.enqueue({.id = 2, .op = wr_op::write, .length = 8, .rkey = 1}).ok());
  REQUIRE(rq.enqueue({.id = 3, .op = wr_op::send, .length = 8}).ok());
  const auto pumps = [](requester<8>& r, int n, time_ns now) {  // n pumps, each with room for one packet
    std::vector<packet> out;
    for (int i = 0; i < n; ++i) {
      std::array<qp_action_t, requester<8>::timer_room + 1> st{};
      qp_sink one{std::span<qp_action_t>(st)};
      r.pump(now, one);
      for (const auto& a : one)
        if (const auto* t = std::get_if<qp_action::transmit>(&a)) out.push_back(t->pkt);
    }
    return out;
  };
  const auto p = pumps(rq, 4, 0);
  REQUIRE(p.size() == 4);
  CHECK_FALSE(p[0].ack_req);  // the first of two: the message goes on
  CHECK(p[1].ack_req);
  CHECK(p[2].ack_req);
  CHECK(p[3].ack_req);
  // with no credits, the SEND behind a WRITE waits: the WRITE asks even mid-burst
  c.honor_credits = true;
  requester<8> rq2(c);
  REQUIRE(sent<void>(collect<qp_action_t>([&](qp_sink& o) { return rq2.post({.id = 1, .op = wr_op::send, .length = 8}, 0, o); })).size() == 1);
  (void)collect<qp_action_t>([&](qp_sink& o) { return rq2.on_packet(ack_for(0, ib::syndrome::ack(0).raw), 1, o); });
  REQUIRE(rq2.enqueue({.id = 2, .op = wr_op::write, .length = 512, .rkey = 1}).ok());
  REQUIRE(rq2.enqueue({.id = 3, .op = wr_op::send, .length = 8}).ok());
  const auto q = pumps(rq2, 3, 2);
  REQUIRE(q.size() == 2);  // the WRITE's two packets; the SEND waits
  CHECK_FALSE(q[0].ack_req);
  CHECK(q[1].ack_req);
}

TEST_CASE("requester: every packet builds a valid RoCEv2 frame that parses back") {
  requester<8> rq({.mtu = 256, .window = 64});
  std::vector<packet> all;
  for (auto wr : {work_request{.id = 1, .op = wr_op::send, .length = 600},
                  work_request{.id = 2, .op = wr_op::write_imm, .length = 300, .remote_va = 64, .rkey = 3, .imm = 7},
                  work_request{.id = 3, .op = wr_op::read, .length = 700, .remote_va = 64, .rkey = 3},
                  work_request{.id = 4, .op = wr_op::compare_swap, .length = 8, .remote_va = 64, .rkey = 3, .swap = 1, .compare = 2}}) {
    for (auto& p : sent<void>(collect<qp_action_t>([&](qp_sink& o) { return rq.post(wr, 0, o); }))) all.push_back(p);
  }
  REQUIRE(all.size() == 3 + 2 + 1 + 1);
  for (const packet& p : all) {
    std::vector<std::byte> payload(p.length, std::byte{0x5A});
    packet q = p;
    q.payload = payload;
    const auto spec = to_roce(q);
    std::vector<std::byte> frame(*ib::frame_size(spec));
    REQUIRE(ib::build(spec, frame).has_value());
    const auto back = ib::decode(frame, {.crc = ib::crc_check::require});
    REQUIRE(back.has_value());
    CHECK(back->bth.opcode == ib::code(p.opcode));
    CHECK(back->bth.psn == p.psn);
    CHECK(back->bth.a == p.ack_req);
    CHECK(back->bth.p_key == 0xFFFF);
    CHECK(back->payload.size() == p.length);
    // Back to a packet: every field the wire carries survives (wr_id and offset are the
    // requester's bookkeeping, not on the wire).
    q.wr_id = 0;
    q.offset = 0;
    CHECK(from_roce(*back) == q);
    ib::roce_view v;
    REQUIRE(ib::inspect(frame, v).code == pushwire::wire::errc{});
    CHECK(from_roce(v) == q);
  }
}

TEST_CASE("requester: an ACK completes what it covers, in order, and cancels the timer when all is acknowledged") {
  requester<8> rq(rc_cfg());
  (void)collect<qp_action_t>([&](qp_sink& o) { return rq.post({.id = 1, .op = wr_op::send, .length = 10}, 0, o); });
  (void)collect<qp_action_t>([&](qp_sink& o) { return rq.post({.id = 2, .op = wr_op::send, .length = 10}, 0, o); });
  REQUIRE(rq.state() == req_state::active);
  REQUIRE(rq.deadline(timer_kind::retransmit));
  // ACK of the first: completes 1, re-arms
  auto a = collect<qp_action_t>([&](qp_sink& o) { return rq.on_packet(ack_for(0xFFFFFE), 50, o); });
  auto c = only<qp_action::complete>(a);
  REQUIRE(c.size() == 1);
  CHECK(c[0].wr_id == 1);
  CHECK(c[0].status == wc_status::success);
  CHECK(only<qp_action::set_timer>(a).size() == 1);
  CHECK(rq.state() == req_state::active);
  // ACK of the last: idle, timer cancelled
  a = collect<qp_action_t>([&](qp_sink& o) { return rq.on_packet(ack_for(0xFFFFFF), 60, o); });
  CHECK(only<qp_action::complete>(a).size() == 1);
  CHECK(only<qp_action::cancel_timer>(a).size() == 1);
  CHECK(rq.state() == req_state::idle);
  CHECK_FALSE(rq.deadline(timer_kind::retransmit));
  // a duplicate ACK is stale: nothing happens
  step_result r;
  a = collect<qp_action_t>([&](qp_sink& o) { return rq.on_packet(ack_for(0xFFFFFF), 70, o); }, &r);
  CHECK(a.empty());
  CHECK(r.row == -1);
  CHECK(rq.stats().stale == 1);
}

TEST_CASE("requester: a coalesced ACK completes several requests at once") {
  requester<8> rq(rc_cfg());
  for (std::uint64_t id = 1; id <= 3; ++id)
    (void)collect<qp_action_t>([&](qp_sink& o) { return rq.post({.id = id, .op = wr_op::write, .length = 2 * mtu, .remote_va = 0, .rkey = 1}, 0, o); });
  const auto c = only<qp_action::complete>(collect<qp_action_t>([&](qp_sink& o) { return rq.on_packet(ack_for(ib::psn_add(0xFFFFFE, 5)), 1, o); }));
  REQUIRE(c.size() == 3);
  CHECK(c[0].wr_id == 1);
  CHECK(c[2].wr_id == 3);
}

TEST_CASE("requester: NAK PSN sequence error goes back to the named PSN without counting") {
  requester<8> rq(rc_cfg());
  (void)collect<qp_action_t>([&](qp_sink& o) { return rq.post({.id = 1, .op = wr_op::send, .length = 4 * mtu}, 0, o); });
  const auto a = collect<qp_action_t>([&](qp_sink& o) {
    return rq.on_packet(ack_for(0xFFFFFF, ib::syndrome::nak(ib::nak_code::psn_sequence_error).raw), 5, o);
  });
  const auto p = sent<void>(a);
  REQUIRE(p.size() == 3);  // PSNs 0xFFFFFF, 0, 1 again
  CHECK(p[0].psn == 0xFFFFFF);
  CHECK(p[0].opcode == ib::opcode::rc_send_middle);
  CHECK(rq.stats().retransmitted == 3);
  CHECK(rq.state() == req_state::active);
}

TEST_CASE("requester: other NAK codes complete with the error and flush the rest") {
  for (const auto& cs : {std::pair{ib::nak_code::invalid_request, wc_status::remote_invalid_request},
                         std::pair{ib::nak_code::remote_access_error, wc_status::remote_access_error},
                         std::pair{ib::nak_code::remote_operational_error, wc_status::remote_operational_error}}) {
    const ib::nak_code code = cs.first;
    const wc_status status = cs.second;
    requester<8> rq(rc_cfg());
    (void)collect<qp_action_t>([&](qp_sink& o) { return rq.post({.id = 1, .op = wr_op::send, .length = 10}, 0, o); });
    (void)collect<qp_action_t>([&](qp_sink& o) { return rq.post({.id = 2, .op = wr_op::send, .length = 10}, 0, o); });
    const auto c = only<qp_action::complete>(collect<qp_action_t>([&](qp_sink& o) { return rq.on_packet(ack_for(0xFFFFFE, ib::syndrome::nak(code).raw), 5, o); }));
    REQUIRE(c.size() == 2);
    CHECK(c[0].status == status);
    CHECK(c[1].status == wc_status::flushed);
    CHECK(rq.state() == req_state::error);
    step_result r;
    const auto f = only<qp_action::complete>(collect<qp_action_t>([&](qp_sink& o) { return rq.post({.id = 3}, 6, o); }, &r));
    CHECK(r.error == errc::qp_in_error);
    REQUIRE(f.size() == 1);
    CHECK(f[0].status == wc_status::flushed);
  }
}

TEST_CASE("requester: timeouts retransmit from the oldest unacknowledged PSN and count against retry_cnt") {
  auto cfg = rc_cfg();
  cfg.retry_cnt = 2;
  requester<8> rq(cfg);
  (void)collect<qp_action_t>([&](qp_sink& o) { return rq.post({.id = 1, .op = wr_op::send, .length = 2 * mtu}, 0, o); });
  for (int i = 1; i <= 2; ++i) {
    const time_ns t = *rq.deadline(timer_kind::retransmit);
    // early firing is ignored
    CHECK(collect<qp_action_t>([&](qp_sink& o) { return rq.on_timer(timer_kind::retransmit, t - 1, o); }).empty());
    const auto p = sent<void>(collect<qp_action_t>([&](qp_sink& o) { return rq.on_timer(timer_kind::retransmit, t, o); }));
    REQUIRE(p.size() == 2);
    CHECK(p[0].psn == 0xFFFFFE);
  }
  const time_ns t = *rq.deadline(timer_kind::retransmit);
  const auto c = only<qp_action::complete>(collect<qp_action_t>([&](qp_sink& o) { return rq.on_timer(timer_kind::retransmit, t, o); }));
  REQUIRE(c.size() == 1);
  CHECK(c[0].status == wc_status::retry_exceeded);
  CHECK(rq.state() == req_state::error);
}

TEST_CASE("requester: retry_cnt 7 is seven retries (IBTA), retry_forever never gives up, progress restores the count") {
  auto cfg = rc_cfg();
  cfg.retry_cnt = 7;
  requester<8> r7(cfg);
  (void)collect<qp_action_t>([&](qp_sink& o) { return r7.post({.id = 1, .op = wr_op::send, .length = 10}, 0, o); });
  std::vector<qp_action_t> last;
  for (int i = 0; i < 8; ++i) {
    REQUIRE(r7.state() == req_state::active);
    const time_ns t = *r7.deadline(timer_kind::retransmit);
    last = collect<qp_action_t>([&](qp_sink& o) { return r7.on_timer(timer_kind::retransmit, t, o); });
  }
  CHECK(r7.state() == req_state::error);  // the 8th timeout: seven retries were sent
  CHECK(r7.stats().timeouts == 7);
  REQUIRE(only<qp_action::complete>(last).size() == 1);
  CHECK(only<qp_action::complete>(last)[0].status == wc_status::retry_exceeded);
  cfg.retry_forever = true;
  requester<8> rq(cfg);
  (void)collect<qp_action_t>([&](qp_sink& o) { return rq.post({.id = 1, .op = wr_op::send, .length = 10}, 0, o); });
  for (int i = 0; i < 50; ++i) {
    const time_ns t = *rq.deadline(timer_kind::retransmit);
    (void)collect<qp_action_t>([&](qp_sink& o) { return rq.on_timer(timer_kind::retransmit, t, o); });
  }
  CHECK(rq.state() == req_state::active);
  CHECK(rq.stats().timeouts == 50);
  // retry_cnt 1: one timeout, then progress resets it, then one more is allowed
  cfg.retry_forever = false;
  cfg.retry_cnt = 1;
  requester<8> r1(cfg);
  (void)collect<qp_action_t>([&](qp_sink& o) { return r1.post({.id = 1, .op = wr_op::send, .length = 10}, 0, o); });
  (void)collect<qp_action_t>([&](qp_sink& o) { return r1.post({.id = 2, .op = wr_op::send, .length = 10}, 0, o); });
  (void)collect<qp_action_t>([&](qp_sink& o) { return r1.on_timer(timer_kind::retransmit, *r1.deadline(timer_kind::retransmit), o); });
  (void)collect<qp_action_t>([&](qp_sink& o) { return r1.on_packet(ack_for(0xFFFFFE), 200'000, o); });
  (void)collect<qp_action_t>([&](qp_sink& o) { return r1.on_timer(timer_kind::retransmit, *r1.deadline(timer_kind::retransmit), o); });
  CHECK(r1.state() == req_state::active);
}

TEST_CASE("requester: an RNR NAK on a SEND waits the table's timer, counted against rnr_retry") {
  auto cfg = rc_cfg();
  cfg.rnr_retry = 1;
  requester<8> rq(cfg);
  (void)collect<qp_action_t>([&](qp_sink& o) { return rq.post({.id = 1, .op = wr_op::send, .length = 10}, 0, o); });
  auto a = collect<qp_action_t>([&](qp_sink& o) { return rq.on_packet(ack_for(0xFFFFFE, ib::syndrome::rnr_nak(14).raw), 1000, o); });
  CHECK(rq.state() == req_state::rnr_wait);
  const auto st = only<qp_action::set_timer>(a);
  REQUIRE(st.size() == 1);
  CHECK(st[0].kind == timer_kind::wait);
  CHECK(st[0].at == 1000 + 1'280'000);  // code 14: 1.28 ms
  // the retransmit timer is off while waiting: firing it does nothing
  CHECK(sent<void>(collect<qp_action_t>([&](qp_sink& o) { return rq.on_timer(timer_kind::retransmit, 10'000'000, o); })).empty());
  a = collect<qp_action_t>([&](qp_sink& o) { return rq.on_timer(timer_kind::wait, st[0].at, o); });
  CHECK(sent<void>(a).size() == 1);
  CHECK(rq.state() == req_state::active);
  // the second RNR exceeds rnr_retry 1
  const auto c = only<qp_action::complete>(collect<qp_action_t>([&](qp_sink& o) { return rq.on_packet(ack_for(0xFFFFFE, ib::syndrome::rnr_nak(1).raw), st[0].at + 5, o); }));
  REQUIRE(c.size() == 1);
  CHECK(c[0].status == wc_status::rnr_retry_exceeded);
}

TEST_CASE("requester: a page-fault ACK pauses without counting, timeouts during the pause retransmit nothing") {
  auto cfg = rc_cfg();
  cfg.retry_cnt = 0;  // any counted timeout would fail the QP
  cfg.rnr_retry = 0;
  requester<8> rq(cfg);
  (void)collect<qp_action_t>([&](qp_sink& o) { return rq.post({.id = 1, .op = wr_op::write, .length = 4 * mtu, .remote_va = 0, .rkey = 1}, 0, o); });
  const auto pf = ib::page_fault_ack(0, 2000);
  auto a = collect<qp_action_t>([&](qp_sink& o) { return rq.on_packet(ack_for(0, pf.syndrome), 10, o); });
  CHECK(rq.state() == req_state::paused);
  CHECK(rq.stats().page_faults == 1);
  CHECK(only<qp_action::complete>(a).size() == 0);
  for (int i = 0; i < 3; ++i)
    CHECK(sent<void>(collect<qp_action_t>([&](qp_sink& o) { return rq.on_timer(timer_kind::retransmit, 1'000'000'000, o); })).empty());
  CHECK(rq.state() == req_state::paused);
  // a resolution resumes from the faulted PSN (0), not from the start (0xFFFFFE was acked by the NAK)
  a = collect<qp_action_t>([&](qp_sink& o) { return rq.resolved(20, o); });
  const auto p = sent<void>(a);
  REQUIRE(p.size() == 2);
  CHECK(p[0].psn == 0);
  CHECK(rq.state() == req_state::active);
  CHECK(rq.una() == 0);
}

TEST_CASE("requester: without page-fault awareness the same NAK is a counted RNR") {
  auto cfg = rc_cfg();
  cfg.page_fault_aware = false;
  cfg.rnr_retry = 0;
  requester<8> rq(cfg);
  (void)collect<qp_action_t>([&](qp_sink& o) { return rq.post({.id = 1, .op = wr_op::write, .length = 10, .remote_va = 0, .rkey = 1}, 0, o); });
  const auto c = only<qp_action::complete>(collect<qp_action_t>([&](qp_sink& o) { return rq.on_packet(ack_for(0xFFFFFE, ib::page_fault_ack(0, 100).syndrome), 1, o); }));
  REQUIRE(c.size() == 1);
  CHECK(c[0].status == wc_status::rnr_retry_exceeded);
}

TEST_CASE("requester: READ responses are placed into their own request, size-checked, even when earlier requests complete first") {
  requester<8> rq({.mtu = mtu, .dest_qp = 0x11, .start_psn = 0});
  (void)collect<qp_action_t>([&](qp_sink& o) { return rq.post({.id = 1, .op = wr_op::send, .length = 8}, 0, o); });
  (void)collect<qp_action_t>([&](qp_sink& o) { return rq.post({.id = 2, .op = wr_op::read, .length = 1500, .remote_va = 64, .rkey = 3}, 0, o); });
  (void)collect<qp_action_t>([&](qp_sink& o) { return rq.post({.id = 3, .op = wr_op::fetch_add, .length = 8, .remote_va = 64, .rkey = 3}, 0, o); });
  // The READ's first response implies the SEND's ACK: the SEND completes (leaves the queue)
  // before the response is placed, and the placement still names the READ.
  packet r{.opcode = ib::opcode::rc_rdma_read_response_first, .psn = 1, .length = mtu};
  auto a = collect<qp_action_t>([&](qp_sink& o) { return rq.on_packet(r, 0, o); });
  auto placed = only<qp_action::read_data>(a);
  REQUIRE(placed.size() == 1);
  CHECK(placed[0] == qp_action::read_data{2, 0, mtu, 1});
  CHECK(only<qp_action::complete>(a).size() == 1);  // the SEND
  // A last response of the wrong size is not placed (and completes nothing).
  r = {.opcode = ib::opcode::rc_rdma_read_response_last, .psn = 2, .length = 400};
  a = collect<qp_action_t>([&](qp_sink& o) { return rq.on_packet(r, 0, o); });
  CHECK(only<qp_action::read_data>(a).empty());
  CHECK(only<qp_action::complete>(a).empty());
  r.length = 1500 - mtu;
  a = collect<qp_action_t>([&](qp_sink& o) { return rq.on_packet(r, 0, o); });
  placed = only<qp_action::read_data>(a);
  REQUIRE(placed.size() == 1);
  CHECK(placed[0] == qp_action::read_data{2, mtu, 1500 - mtu, 2});
  REQUIRE(only<qp_action::complete>(a).size() == 1);
  CHECK(only<qp_action::complete>(a)[0].wr_id == 2);
}

TEST_CASE("read as write: one 0xC0 request, served by a write, its ACK and those behind it wait for write_back_done()") {
  requester<8> rq({.mtu = mtu, .dest_qp = 0x11, .start_psn = 0});
  auto a = collect<qp_action_t>([&](qp_sink& o) {
    return rq.post({.id = 7, .op = wr_op::read_as_write, .length = 3000, .remote_va = 0x1000, .rkey = 0x33, .sink_va = 0x9000, .sink_rkey = 0x44}, 0, o);
  });
  auto p = sent<void>(a);
  REQUIRE(p.size() == 1);  // one packet whatever the length: the data comes back as a write
  CHECK(p[0].opcode == ib::opcode::rc_read_as_write);
  CHECK(ib::code(p[0].opcode) == 0xC0);
  CHECK((p[0].va == 0x1000 && p[0].rkey == 0x33 && p[0].dmalen == 3000 && p[0].sink_va == 0x9000 && p[0].sink_rkey == 0x44));
  CHECK(p[0].length == 0);
  CHECK(p[0].ack_req);
  CHECK(!supports(service::uc, wr_op::read_as_write));
  CHECK(!supports(service::dc, wr_op::read_as_write));
  // Responder: the request asks to be served; a SEND behind it is placed, but no ACK goes out
  // until the write back is done.
  responder<4> rs({.mtu = mtu, .peer_qp = 9});
  rs.post_receive(1);
  a = collect<qp_action_t>([&](qp_sink& o) { return rs.on_packet(p[0], o); });
  const auto serves = only<qp_action::write_back>(a);
  REQUIRE(serves.size() == 1);
  CHECK(serves[0] == qp_action::write_back{0, 0x1000, 0x33, 3000, 0x9000, 0x44});
  CHECK(sent<void>(a).empty());
  a = collect<qp_action_t>([&](qp_sink& o) { return rs.on_packet({.opcode = ib::opcode::rc_send_only, .psn = 1, .ack_req = true, .length = 8}, o); });
  CHECK(only<qp_action::place>(a).size() == 1);
  CHECK(sent<void>(a).empty());
  // The request again (the requester timed out): nothing more is served or sent.
  a = collect<qp_action_t>([&](qp_sink& o) { return rs.on_packet(p[0], o); });
  CHECK(only<qp_action::write_back>(a).empty());
  CHECK(sent<void>(a).empty());
  CHECK(!rs.wants_to_send());
  rs.write_back_done(0, true);
  REQUIRE(rs.wants_to_send());
  a = collect<qp_action_t>([&](qp_sink& o) { rs.pump(o); return step_result{}; });
  const auto acks = sent<void>(a);
  REQUIRE(acks.size() >= 2);
  CHECK(acks[0].psn == 0);  // the request's ACK first, then what waited behind it
  CHECK(ib::syndrome{acks[0].aeth.syndrome}.kind() == ib::aeth_kind::ack);
  CHECK(acks.back().psn == 1);
  // The ACK completes the requester's work request.
  a = collect<qp_action_t>([&](qp_sink& o) { return rq.on_packet(acks[0], 0, o); });
  REQUIRE(only<qp_action::complete>(a).size() == 1);
  CHECK(only<qp_action::complete>(a)[0].wr_id == 7);
  CHECK(only<qp_action::complete>(a)[0].status == wc_status::success);
  // A write that failed: the ACK becomes a NAK remote access error, and the responder fails.
  responder<4> r2({.mtu = mtu, .peer_qp = 9});
  (void)collect<qp_action_t>([&](qp_sink& o) { return r2.on_packet(p[0], o); });
  r2.write_back_done(0, false);
  a = collect<qp_action_t>([&](qp_sink& o) { r2.pump(o); return step_result{}; });
  REQUIRE(sent<void>(a).size() == 1);
  CHECK(ib::syndrome{sent<void>(a)[0].aeth.syndrome}.nak_reason() == ib::nak_code::remote_access_error);
  CHECK(r2.state() == resp_state::error);
  // Once served, a repeat of it (its ACK lost) is re-acknowledged at its own PSN.
  responder<4> r4({.mtu = mtu, .peer_qp = 9});
  (void)collect<qp_action_t>([&](qp_sink& o) { return r4.on_packet(p[0], o); });
  r4.write_back_done(0, true);
  (void)collect<qp_action_t>([&](qp_sink& o) { r4.pump(o); return step_result{}; });
  a = collect<qp_action_t>([&](qp_sink& o) { return r4.on_packet(p[0], o); });
  REQUIRE(sent<void>(a).size() == 1);
  CHECK(sent<void>(a)[0].psn == 0);
  CHECK(ib::syndrome{sent<void>(a)[0].aeth.syndrome}.kind() == ib::aeth_kind::ack);
  // Not on UC.
  responder<4> r3({.svc = service::uc, .mtu = mtu});
  packet uc = p[0];
  a = collect<qp_action_t>([&](qp_sink& o) { return r3.on_packet(uc, o); });
  CHECK(only<qp_action::write_back>(a).empty());
}

TEST_CASE("requester: the send queue is bounded and refuses with queue_full, UD and UC rules") {
  requester<2> rq(rc_cfg());
  step_result r;
  (void)collect<qp_action_t>([&](qp_sink& o) { return rq.post({.id = 1, .length = 1}, 0, o); });
  (void)collect<qp_action_t>([&](qp_sink& o) { return rq.post({.id = 2, .length = 1}, 0, o); });
  CHECK(collect<qp_action_t>([&](qp_sink& o) { return rq.post({.id = 3, .length = 1}, 0, o); }, &r).empty());
  CHECK(r.error == errc::queue_full);
  // a full sink refuses the event whole
  std::array<qp_action_t, 2> tiny{};
  qp_sink small{std::span<qp_action_t>(tiny)};
  CHECK(rq.post({.id = 4}, 0, small).error == errc::actions_full);
  CHECK(small.empty());

  requester<4> ud({.svc = service::ud, .mtu = 256});
  CHECK(collect<qp_action_t>([&](qp_sink& o) { return ud.post({.id = 1, .op = wr_op::write, .length = 1}, 0, o); }, &r).empty());
  CHECK(r.error == errc::invalid_argument);
  (void)collect<qp_action_t>([&](qp_sink& o) { return ud.post({.id = 1, .op = wr_op::send, .length = 257}, 0, o); }, &r);
  CHECK(r.error == errc::too_large);
  auto a = collect<qp_action_t>([&](qp_sink& o) { return ud.post({.id = 1, .op = wr_op::send, .length = 100, .dest_qp = 77, .q_key = 0x11}, 0, o); });
  const auto p = sent<void>(a);
  REQUIRE(p.size() == 1);
  CHECK(p[0].opcode == ib::opcode::ud_send_only);
  CHECK(p[0].dest_qp == 77);
  CHECK_FALSE(p[0].ack_req);
  REQUIRE(only<qp_action::complete>(a).size() == 1);  // completes on transmission

  requester<4> uc({.svc = service::uc, .mtu = 256});
  CHECK(collect<qp_action_t>([&](qp_sink& o) { return uc.post({.id = 1, .op = wr_op::read, .length = 1}, 0, o); }, &r).empty());
  CHECK(r.error == errc::invalid_argument);
  a = collect<qp_action_t>([&](qp_sink& o) { return uc.post({.id = 1, .op = wr_op::write, .length = 600, .rkey = 1}, 0, o); });
  CHECK(sent<void>(a).size() == 3);
  CHECK(sent<void>(a)[0].opcode == ib::opcode::uc_rdma_write_first);
  CHECK(only<qp_action::complete>(a).size() == 1);
  CHECK_FALSE(uc.deadline(timer_kind::retransmit));
}

TEST_CASE("responder: in-sequence requests place, deliver once and ACK with credits") {
  responder<4> rs({.mtu = mtu, .start_psn = 5, .peer_qp = 0x22});
  rs.post_receive(3);
  packet p{.opcode = ib::opcode::rc_send_only, .psn = 5, .ack_req = true, .length = 100};
  auto a = collect<qp_action_t>([&](qp_sink& o) { return rs.on_packet(p, o); });
  REQUIRE(only<qp_action::place>(a).size() == 1);
  const auto rcv = only<qp_action::receive>(a);
  REQUIRE(rcv.size() == 1);
  CHECK(rcv[0].bytes == 100);
  const auto ack = sent<void>(a);
  REQUIRE(ack.size() == 1);
  CHECK(ack[0].opcode == ib::opcode::rc_acknowledge);
  CHECK(ack[0].dest_qp == 0x22);
  CHECK(ack[0].psn == 5);
  CHECK(ib::syndrome{ack[0].aeth.syndrome}.credits() == ib::credit_code(2));
  CHECK(ack[0].aeth.msn == 1);
  CHECK(rs.expected_psn() == 6);
}

TEST_CASE("responder: a duplicate SEND is re-acknowledged, never delivered twice") {
  responder<4> rs({.mtu = mtu});
  rs.post_receive(3);
  packet p{.opcode = ib::opcode::rc_send_only, .psn = 0, .ack_req = true, .length = 8};
  (void)collect<qp_action_t>([&](qp_sink& o) { return rs.on_packet(p, o); });
  const auto a = collect<qp_action_t>([&](qp_sink& o) { return rs.on_packet(p, o); });
  CHECK(only<qp_action::receive>(a).empty());
  CHECK(only<qp_action::place>(a).empty());
  REQUIRE(sent<void>(a).size() == 1);
  CHECK(sent<void>(a)[0].psn == 0);
  CHECK(rs.stats().duplicates == 1);
  CHECK(rs.receives() == 2);
}

TEST_CASE("responder: a duplicate SEND after a READ is re-acknowledged at the last SEND, never at the READ's PSNs") {
  responder<4> rs({.mtu = mtu});
  rs.post_receive(3);
  const packet send{.opcode = ib::opcode::rc_send_only, .psn = 0, .ack_req = true, .length = 8};
  packet read{.opcode = ib::opcode::rc_rdma_read_request, .psn = 1, .ack_req = true};
  read.va = 0x1000, read.rkey = 1, read.dmalen = 2 * mtu;  // PSNs 1 and 2
  (void)collect<qp_action_t>([&](qp_sink& o) { return rs.on_packet(send, o); });
  (void)collect<qp_action_t>([&](qp_sink& o) { return rs.on_packet(read, o); });
  CHECK(rs.expected_psn() == 3);
  const auto a = collect<qp_action_t>([&](qp_sink& o) { return rs.on_packet(send, o); });
  const auto acks = sent<void>(a);
  REQUIRE(!acks.empty());
  // the re-ACK comes after the READ's responses (PSN order) and names the SEND (0), not 2
  CHECK(acks.back().opcode == ib::opcode::rc_acknowledge);
  CHECK(acks.back().psn == 0);
}

TEST_CASE("requester: an RNR NAK on a WRITE with immediate's last packet is a genuine RNR, on its first a page-fault ACK") {
  for (const bool last : {true, false}) {
    auto cfg = rc_cfg();
    cfg.start_psn = 0;
    requester<8> rq(cfg);
    (void)collect<qp_action_t>([&](qp_sink& o) { return rq.post({.id = 1, .op = wr_op::write_imm, .length = 2 * mtu, .remote_va = 0, .rkey = 1, .imm = 7}, 0, o); });
    (void)collect<qp_action_t>([&](qp_sink& o) { return rq.on_packet(ack_for(last ? 1 : 0, ib::syndrome::rnr_nak(14).raw), 10, o); });
    CHECK(rq.state() == (last ? req_state::rnr_wait : req_state::paused));
    CHECK(rq.stats().page_faults == (last ? 0u : 1u));
  }
}

TEST_CASE("responder: a duplicate READ is replayed with the same PSNs, a duplicate atomic returns the saved value") {
  std::uint64_t cell = 40;
  memory_port mem{&cell, nullptr, [](void* c, std::uint32_t, std::uint64_t, bool, std::uint64_t add, std::uint64_t) {
                    auto* v = static_cast<std::uint64_t*>(c);
                    const auto old = *v;
                    *v += add;
                    return old;
                  }};
  responder<4> rs({.mtu = 256}, mem);
  packet rd{.opcode = ib::opcode::rc_rdma_read_request, .psn = 0, .ack_req = true, .va = 0, .rkey = 1, .dmalen = 600};
  const auto first = sent<void>(collect<qp_action_t>([&](qp_sink& o) { return rs.on_packet(rd, o); }));
  REQUIRE(first.size() == 3);
  CHECK(first[0].opcode == ib::opcode::rc_rdma_read_response_first);
  CHECK(first[1].opcode == ib::opcode::rc_rdma_read_response_middle);
  CHECK(first[2].opcode == ib::opcode::rc_rdma_read_response_last);
  CHECK(first[2].length == 88);
  CHECK(rs.expected_psn() == 3);
  packet fa{.opcode = ib::opcode::rc_fetch_add, .psn = 3, .ack_req = true, .va = 8, .rkey = 1, .swap = 2};
  const auto ack1 = sent<void>(collect<qp_action_t>([&](qp_sink& o) { return rs.on_packet(fa, o); }));
  REQUIRE(ack1.size() == 1);
  CHECK(ack1[0].opcode == ib::opcode::rc_atomic_acknowledge);
  CHECK(ack1[0].orig == 40);
  CHECK(cell == 42);
  // duplicates
  const auto replay = sent<void>(collect<qp_action_t>([&](qp_sink& o) { return rs.on_packet(rd, o); }));
  REQUIRE(replay.size() == first.size());
  for (std::size_t i = 0; i < replay.size(); ++i) {
    CHECK(replay[i].psn == first[i].psn);
    CHECK(replay[i].opcode == first[i].opcode);
    CHECK(replay[i].length == first[i].length);
  }
  const auto ack2 = sent<void>(collect<qp_action_t>([&](qp_sink& o) { return rs.on_packet(fa, o); }));
  REQUIRE(ack2.size() == 1);
  CHECK(ack2[0].orig == 40);
  CHECK(cell == 42);  // not executed twice
}

TEST_CASE("responder: a gap gets one NAK sequence error, then silence until the expected PSN") {
  responder<4> rs({.mtu = mtu});
  rs.post_receive(8);
  packet p{.opcode = ib::opcode::rc_send_only, .psn = 2, .ack_req = true, .length = 8};
  auto a = collect<qp_action_t>([&](qp_sink& o) { return rs.on_packet(p, o); });
  REQUIRE(sent<void>(a).size() == 1);
  CHECK(ib::syndrome{sent<void>(a)[0].aeth.syndrome}.nak_reason() == ib::nak_code::psn_sequence_error);
  CHECK(sent<void>(a)[0].psn == 0);
  CHECK(rs.state() == resp_state::nak_sent);
  p.psn = 3;
  CHECK(sent<void>(collect<qp_action_t>([&](qp_sink& o) { return rs.on_packet(p, o); })).empty());
  p.psn = 0;
  a = collect<qp_action_t>([&](qp_sink& o) { return rs.on_packet(p, o); });
  CHECK(only<qp_action::receive>(a).size() == 1);
  CHECK(rs.state() == resp_state::ready);
}

TEST_CASE("responder: no posted receive gives an RNR NAK, bad access NAKs and enters error, bad opcode order is invalid") {
  responder<4> rs({.mtu = mtu, .min_rnr_timer_us = 1000});
  packet p{.opcode = ib::opcode::rc_send_only, .psn = 0, .ack_req = true, .length = 8};
  auto a = collect<qp_action_t>([&](qp_sink& o) { return rs.on_packet(p, o); });
  CHECK(ib::syndrome{sent<void>(a)[0].aeth.syndrome}.kind() == ib::aeth_kind::rnr_nak);
  CHECK(ib::page_fault_delay_us(sent<void>(a)[0].aeth) == 1280u);  // 1 ms rounds up to the table's 1.28 ms
  CHECK(rs.expected_psn() == 0);

  memory_port deny{nullptr, [](void*, std::uint32_t, std::uint64_t, std::uint32_t, access_kind, bool) { return access_result{access_result::access_error}; }, nullptr};
  responder<4> r2({.mtu = mtu}, deny);
  a = collect<qp_action_t>([&](qp_sink& o) { return r2.on_packet({.opcode = ib::opcode::rc_rdma_write_only, .psn = 0, .length = 8, .rkey = 1, .dmalen = 8}, o); });
  CHECK(ib::syndrome{sent<void>(a)[0].aeth.syndrome}.nak_reason() == ib::nak_code::remote_access_error);
  CHECK(only<qp_action::place>(a).empty());
  CHECK(r2.state() == resp_state::error);
  // The failure is an action, after the NAK: the caller moves the QP to ERR from it.
  REQUIRE(only<qp_action::request_error>(a).size() == 1);
  CHECK(only<qp_action::request_error>(a)[0] == qp_action::request_error{0, ib::nak_code::remote_access_error, invalid_reason::none});
  CHECK(std::holds_alternative<qp_action::request_error>(a.back()));
  step_result r;
  (void)collect<qp_action_t>([&](qp_sink& o) { return r2.on_packet({.opcode = ib::opcode::rc_rdma_write_only, .psn = 1, .length = 8}, o); }, &r);
  CHECK(r.row >= 0);
  CHECK(r2.state() == resp_state::error);

  responder<4> r3({.mtu = mtu});
  a = collect<qp_action_t>([&](qp_sink& o) { return r3.on_packet({.opcode = ib::opcode::rc_rdma_write_middle, .psn = 0, .length = mtu}, o); });  // MIDDLE first
  CHECK(ib::syndrome{sent<void>(a)[0].aeth.syndrome}.nak_reason() == ib::nak_code::invalid_request);
  CHECK(only<qp_action::request_error>(a) ==
        std::vector<qp_action::request_error>{{0, ib::nak_code::invalid_request, invalid_reason::sequence}});
}

TEST_CASE("responder: a SEND its receive cannot take is a request_error action saying why") {
  // The memory port's verdict on the receive buffer, set per case.
  static receive_fit verdict = receive_fit::fits;
  const memory_port port{nullptr, nullptr, nullptr, [](void*, std::uint32_t, std::uint32_t) { return verdict; }};
  const packet send{.opcode = ib::opcode::rc_send_only, .psn = 0, .ack_req = true, .length = 8};
  for (const auto& [fit, nak, why] : {std::tuple{receive_fit::too_long, ib::nak_code::invalid_request, invalid_reason::receive_length},
                                      std::tuple{receive_fit::unusable, ib::nak_code::remote_operational_error, invalid_reason::none}}) {
    verdict = fit;
    responder<4> rs({.mtu = mtu}, port);
    rs.post_receive(1);
    const auto a = collect<qp_action_t>([&](qp_sink& o) { return rs.on_packet(send, o); });
    CHECK(ib::syndrome{sent<void>(a)[0].aeth.syndrome}.nak_reason() == nak);
    CHECK(only<qp_action::request_error>(a) == std::vector<qp_action::request_error>{{0, nak, why}});
    CHECK(only<qp_action::place>(a).empty());
    CHECK(only<qp_action::receive>(a).empty());
    CHECK(rs.state() == resp_state::error);
  }
  // One that fits: executed, no error action.
  verdict = receive_fit::fits;
  responder<4> ok({.mtu = mtu}, port);
  ok.post_receive(1);
  const auto a = collect<qp_action_t>([&](qp_sink& o) { return ok.on_packet(send, o); });
  CHECK(only<qp_action::request_error>(a).empty());
  CHECK(only<qp_action::receive>(a).size() == 1);
  // UC has no fatal NAKs: a SEND too long for its receive is dropped without the action.
  verdict = receive_fit::too_long;
  responder<4> uc({.svc = service::uc, .mtu = mtu}, port);
  uc.post_receive(1);
  const auto u = collect<qp_action_t>([&](qp_sink& o) {
    return uc.on_packet({.opcode = ib::opcode::uc_send_only, .psn = 0, .length = 8}, o);
  });
  CHECK(only<qp_action::request_error>(u).empty());
  CHECK(sent<void>(u).empty());
}

TEST_CASE("responder: UC resynchronises on the next FIRST or ONLY after a gap") {
  responder<4> rs({.svc = service::uc, .mtu = 256});
  rs.post_receive(4);
  (void)collect<qp_action_t>([&](qp_sink& o) { return rs.on_packet({.opcode = ib::opcode::uc_send_first, .psn = 0, .length = 256}, o); });
  // PSN 1 lost; 2 is a MIDDLE: dropped, no NAK
  auto a = collect<qp_action_t>([&](qp_sink& o) { return rs.on_packet({.opcode = ib::opcode::uc_send_last, .psn = 2, .length = 10}, o); });
  CHECK(sent<void>(a).empty());
  CHECK(only<qp_action::receive>(a).empty());
  a = collect<qp_action_t>([&](qp_sink& o) { return rs.on_packet({.opcode = ib::opcode::uc_send_only, .psn = 3, .length = 10}, o); });
  CHECK(only<qp_action::receive>(a).size() == 1);
  CHECK(rs.expected_psn() == 4);
}

TEST_CASE("scenario: requester and responder over a lossy link complete everything exactly once") {
  for (std::uint32_t seed = 1; seed <= 300; ++seed) {
    rc_sim sim({.req = {.mtu = 512, .window = 16, .timeout = 50'000, .ackreq_every = 4}, .resp = {.mtu = 512}});
    std::uint32_t x = seed * 2654435761u;
    sim.lose = [&](const packet&, bool) {
      x = x * 1664525u + 1013904223u;
      return (x >> 24) < 8 + seed % 60;  // 3 % to 26 % each way
    };
    sim.post({.id = 1, .op = wr_op::write, .length = 5000, .remote_va = 0, .rkey = 1});
    sim.post({.id = 2, .op = wr_op::send_imm, .length = 1200, .imm = 9});
    sim.post({.id = 3, .op = wr_op::read, .length = 3000, .remote_va = 0, .rkey = 1});
    sim.post({.id = 4, .op = wr_op::fetch_add, .length = 8, .remote_va = 0, .rkey = 1, .swap = 1});
    sim.post({.id = 5, .op = wr_op::send, .length = 0});
    sim.run();
    INFO("seed " << seed);
    REQUIRE(sim.completions.size() == 5);
    for (std::size_t i = 0; i < 5; ++i) {
      CHECK(sim.completions[i].wr_id == i + 1);
      CHECK(sim.completions[i].status == wc_status::success);
    }
    CHECK(sim.received.size() == 2);  // the SEND_WITH_IMM and the SEND, once each
    std::set<std::pair<std::uint64_t, std::uint32_t>> places;
    for (const auto& p : sim.placed) CHECK(places.insert({p.wr_id, p.offset}).second);  // placed once
    CHECK(places.size() == 10 + 3 + 1);
    CHECK(sim.rq.quiescent());
  }
}

TEST_CASE("responder: a READ over 2^31 bytes is an invalid request, not 2^24 responses") {
  responder<4> rs({.mtu = 256});
  const auto a = collect<qp_action_t>([&](qp_sink& o) {
    return rs.on_packet({.opcode = ib::opcode::rc_rdma_read_request, .psn = 0, .ack_req = true, .va = 0, .rkey = 1, .dmalen = 0x8000'0001u}, o);
  });
  const auto p = sent<void>(a);
  REQUIRE(p.size() == 1);
  CHECK(ib::syndrome{p[0].aeth.syndrome}.nak_reason() == ib::nak_code::invalid_request);
  CHECK(rs.state() == resp_state::error);
}

TEST_CASE("responder: a 2 GiB READ runs through a sink of min_room actions, paced by pump()") {
  constexpr std::uint32_t mtu4k = 4096;
  responder<4> rs({.mtu = mtu4k, .peer_qp = 9});
  std::array<qp_action_t, responder<4>::min_room> storage;
  qp_sink out{std::span<qp_action_t>(storage)};
  const packet rd{.opcode = ib::opcode::rc_rdma_read_request, .psn = 0, .ack_req = true, .va = 0x1000, .rkey = 1, .dmalen = 0x8000'0000u};
  REQUIRE(rs.on_packet(rd, out).ok());
  CHECK(out.room() == 0);  // the first responses filled the sink; the rest wait for pump()
  // an ACK for a SEND behind the READ must wait for all of its responses (PSN order)
  rs.post_receive(1);
  std::uint64_t bytes = 0, packets = 0;
  std::uint32_t next_psn = 0;
  bool send_acked = false;
  auto drain = [&] {
    for (const auto& a : out) {
      const auto* t = std::get_if<qp_action::transmit>(&a);
      if (!t) continue;
      const packet& p = t->pkt;
      if (p.info().is(ib::op_class::ack)) {
        CHECK(packets == std::uint64_t{1} << 19);  // after the last response
        send_acked = true;
        continue;
      }
      REQUIRE(p.psn == next_psn);
      next_psn = ib::psn_add(next_psn, 1);
      const ib::position want = packets == 0 ? ib::position::first : packets + 1 == (1u << 19) ? ib::position::last : ib::position::middle;
      REQUIRE(p.info().pos == want);
      REQUIRE(p.length == mtu4k);
      REQUIRE(p.dest_qp == 9);
      bytes += p.length;
      ++packets;
    }
    out.clear();
  };
  drain();
  REQUIRE(rs.on_packet({.opcode = ib::opcode::rc_send_only, .psn = 1u << 19, .ack_req = true, .length = 8}, out).ok());
  drain();
  while (rs.wants_to_send()) {
    rs.pump(out);
    REQUIRE(out.size() <= responder<4>::min_room);
    drain();
  }
  CHECK(bytes == 0x8000'0000u);
  CHECK(packets == 524288);
  CHECK(send_acked);
  CHECK(rs.state() == resp_state::ready);
}

TEST_CASE("requester: moved resends from the oldest unacknowledged PSN at once, not counted, and re-arms its timer") {
  auto cfg = rc_cfg();
  cfg.retry_cnt = 1;
  requester<8> rq(cfg);
  step_result r;
  CHECK(collect<qp_action_t>([&](qp_sink& o) { return rq.moved(0, o); }, &r).empty());  // idle: nothing to resend
  CHECK(r.error == errc::event_not_allowed);
  (void)collect<qp_action_t>([&](qp_sink& o) { return rq.post({.id = 1, .op = wr_op::write, .length = 3 * mtu, .remote_va = 0, .rkey = 1}, 0, o); });
  (void)collect<qp_action_t>([&](qp_sink& o) { return rq.on_packet(ack_for(0xFFFFFE), 10, o); });  // the first packet acknowledged
  const auto a = collect<qp_action_t>([&](qp_sink& o) { return rq.moved(20, o); }, &r);
  CHECK(r.ok());
  const auto p = sent<void>(a);
  REQUIRE(p.size() == 2);
  CHECK(p[0].psn == 0xFFFFFF);
  CHECK(p[0].opcode == ib::opcode::rc_rdma_write_middle);
  CHECK(p[1].psn == 0);
  const auto timers = only<qp_action::set_timer>(a);
  REQUIRE(timers.size() == 1);
  CHECK(timers[0].at == 20 + cfg.timeout);
  CHECK(rq.stats().timeouts == 0);
  CHECK(rq.stats().retransmitted == 2);
  // Not counted against retry_cnt 1: the first timeout still retransmits, the second fails.
  const auto t1 = sent<void>(collect<qp_action_t>([&](qp_sink& o) { return rq.on_timer(timer_kind::retransmit, 20 + cfg.timeout, o); }));
  CHECK(t1.size() == 2);
  CHECK(rq.state() == req_state::active);
}

TEST_CASE("requester: moved does nothing for UC and UD") {
  for (const auto svc : {service::uc, service::ud}) {
    auto cfg = rc_cfg();
    cfg.svc = svc;
    requester<8> rq(cfg);
    (void)collect<qp_action_t>([&](qp_sink& o) { return rq.post({.id = 1, .op = wr_op::send, .length = 8, .dest_qp = 3}, 0, o); });
    step_result r;
    CHECK(sent<void>(collect<qp_action_t>([&](qp_sink& o) { return rq.moved(5, o); }, &r)).empty());
    CHECK(r.error == errc::event_not_allowed);
  }
}

TEST_CASE("requester: a PSN sequence error NAK naming the PSN after the highest sent acknowledges everything") {
  requester<8> rq(rc_cfg());
  (void)collect<qp_action_t>([&](qp_sink& o) { return rq.post({.id = 1, .op = wr_op::send, .length = 2 * mtu}, 0, o); });
  (void)collect<qp_action_t>([&](qp_sink& o) { return rq.post({.id = 2, .op = wr_op::send, .length = 8}, 0, o); });
  const auto a = collect<qp_action_t>([&](qp_sink& o) { return rq.on_packet(ack_for(1, ib::syndrome::nak(ib::nak_code::psn_sequence_error).raw), 5, o); });
  CHECK(sent<void>(a).empty());
  const auto c = only<qp_action::complete>(a);
  REQUIRE(c.size() == 2);
  CHECK(c[1].status == wc_status::success);
  CHECK(rq.quiescent());
  CHECK(only<qp_action::cancel_timer>(a).size() == 1);
  // Beyond it, or with nothing outstanding: stale.
  CHECK(collect<qp_action_t>([&](qp_sink& o) { return rq.on_packet(ack_for(1, ib::syndrome::nak(ib::nak_code::psn_sequence_error).raw), 6, o); }).empty());
  CHECK(rq.stats().stale == 1);
}

TEST_CASE("requester: a PSN sequence error NAK past an unanswered READ re-issues the READ") {
  requester<8> rq({.mtu = mtu, .dest_qp = 0x11, .start_psn = 0});
  (void)collect<qp_action_t>([&](qp_sink& o) { return rq.post({.id = 1, .op = wr_op::read, .length = 2 * mtu, .remote_va = 64, .rkey = 3}, 0, o); });
  (void)collect<qp_action_t>([&](qp_sink& o) { return rq.post({.id = 2, .op = wr_op::send, .length = 8}, 0, o); });
  // The responder executed the READ (PSNs 0-1) and the SEND (2), expects 3: the responses and the ACK were lost.
  const auto a = collect<qp_action_t>([&](qp_sink& o) { return rq.on_packet(ack_for(3, ib::syndrome::nak(ib::nak_code::psn_sequence_error).raw), 5, o); });
  const auto p = sent<void>(a);
  REQUIRE(p.size() == 2);
  CHECK(p[0].opcode == ib::opcode::rc_rdma_read_request);
  CHECK(p[0].psn == 0);
  CHECK(p[1].psn == 2);
  CHECK(only<qp_action::complete>(a).empty());
  // The same NAK again (a duplicate on the wire): nothing is resent, the READ not re-issued again.
  const auto d = collect<qp_action_t>([&](qp_sink& o) { return rq.on_packet(ack_for(3, ib::syndrome::nak(ib::nak_code::psn_sequence_error).raw), 6, o); });
  CHECK(sent<void>(d).empty());
  CHECK(rq.stats().stale == 1);
}

TEST_CASE("responder: moved NAKs at the expected PSN (RC only) and then waits for it") {
  responder<4> rs({.mtu = mtu, .peer_qp = 0x22});
  rs.post_receive(8);
  packet p{.opcode = ib::opcode::rc_send_only, .psn = 0, .ack_req = true, .length = 8};
  (void)collect<qp_action_t>([&](qp_sink& o) { return rs.on_packet(p, o); });
  step_result r;
  const auto n = sent<void>(collect<qp_action_t>([&](qp_sink& o) { return rs.moved(o); }, &r));
  CHECK(r.ok());
  REQUIRE(n.size() == 1);
  CHECK(n[0].opcode == ib::opcode::rc_acknowledge);
  CHECK(n[0].psn == 1);
  CHECK(n[0].dest_qp == 0x22);
  CHECK(ib::syndrome{n[0].aeth.syndrome}.nak_reason() == ib::nak_code::psn_sequence_error);
  CHECK(n[0].aeth.msn == 1);
  CHECK(rs.state() == resp_state::ready);  // it saw no gap
  p.psn = 2;  // ahead: a gap, NAKed once
  CHECK(sent<void>(collect<qp_action_t>([&](qp_sink& o) { return rs.on_packet(p, o); })).size() == 1);
  CHECK(rs.state() == resp_state::nak_sent);
  CHECK(sent<void>(collect<qp_action_t>([&](qp_sink& o) { return rs.on_packet(p, o); })).empty());
  CHECK(sent<void>(collect<qp_action_t>([&](qp_sink& o) { return rs.moved(o); })).size() == 1);  // moved again: again
  CHECK(rs.state() == resp_state::nak_sent);
  p.psn = 1;
  CHECK(only<qp_action::receive>(collect<qp_action_t>([&](qp_sink& o) { return rs.on_packet(p, o); })).size() == 1);
  CHECK(rs.state() == resp_state::ready);
  for (const auto svc : {service::uc, service::ud}) {
    responder<4> other({.svc = svc, .mtu = mtu});
    CHECK(collect<qp_action_t>([&](qp_sink& o) { return other.moved(o); }, &r).empty());
    CHECK(r.error == errc::event_not_allowed);
  }
  responder<4> faulted({.mtu = mtu});
  testing::set_state(faulted, resp_state::faulted);  // the peer waits for the fault's delay
  CHECK(collect<qp_action_t>([&](qp_sink& o) { return faulted.moved(o); }, &r).empty());
  CHECK(r.error == errc::event_not_allowed);
}

TEST_CASE("scenario: a move that loses everything for 1 ms recovers without a retransmission timeout, exactly once") {
  // Either end moves (or both): everything sent during the move is lost both ways; then the
  // moved machine is told. The timer (10 ms) never fires: recovery is the move's resend / NAK.
  for (std::uint32_t seed = 1; seed <= 300; ++seed) {
    INFO("seed " << seed);
    const int who = static_cast<int>(seed % 3);  // 0: the requester's end moved, 1: the responder's, 2: both
    rc_sim sim({.req = {.mtu = 512, .window = 16, .timeout = 10'000'000, .retry_cnt = 1, .ackreq_every = 4}, .resp = {.mtu = 512}});
    std::uint32_t x = seed * 2654435761u;
    const time_ns from = 1'000 + (x >> 16) % 30'000, to = from + 1'000'000;
    sim.lose = [&](const packet&, bool) { return sim.now >= from && sim.now < to; };
    sim.post({.id = 1, .op = wr_op::write, .length = 5000, .remote_va = 0, .rkey = 1});
    sim.post({.id = 2, .op = wr_op::send_imm, .length = 1200, .imm = 9});
    sim.post({.id = 3, .op = wr_op::read, .length = 3000, .remote_va = 0, .rkey = 1});
    sim.post({.id = 4, .op = wr_op::fetch_add, .length = 8, .remote_va = 0, .rkey = 1, .swap = 1});
    sim.post({.id = 5, .op = wr_op::write_imm, .length = 2000, .remote_va = 0, .rkey = 1, .imm = 7});
    sim.run(from);
    sim.post({.id = 6, .op = wr_op::send, .length = 700});  // posted during the move
    sim.run(to);
    sim.now = to;
    if (who != 1) sim.take(collect<qp_action_t>([&](qp_sink& o) { return sim.rq.moved(to, o); }), true);
    if (who != 0) sim.take(collect<qp_action_t>([&](qp_sink& o) { return sim.rs.moved(o); }), false);
    sim.run(to + 1'000'000);
    REQUIRE(sim.completions.size() == 6);
    for (std::size_t i = 0; i < 6; ++i) {
      CHECK(sim.completions[i].wr_id == i + 1);
      CHECK(sim.completions[i].status == wc_status::success);
    }
    CHECK(sim.completed_at.back() < to + 200'000);
    CHECK(sim.rq.stats().timeouts == 0);
    CHECK(sim.received.size() == 3);  // SEND_WITH_IMM, WRITE_WITH_IMM, SEND: once each
    std::set<std::pair<std::uint64_t, std::uint32_t>> places;
    for (const auto& p : sim.placed) CHECK(places.insert({p.wr_id, p.offset}).second);
    CHECK(sim.rq.quiescent());
  }
}
