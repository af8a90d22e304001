// The device features a verbs provider needs (spec/rnic.md §13): lingering RC QPs, ACK
// coalescing, the remote operational error of an unusable receive buffer, re-registration that
// keeps keys, prefetch, address handle and SRQ destruction, SRQ limits, and cleaning a QP's
// completions from a CQ. Two devices driven by hand, frame by frame, so each test chooses what
// is delivered, dropped and when.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "harness.hpp"

using namespace pushwire;
using namespace pushwire::test::rnic;

namespace {

/// Frames `from` sends now (after progress), in order.
std::vector<frame_bytes> take_all(device& from, time_ns now) {
  from.progress(now);
  std::vector<frame_bytes> out;
  while (auto f = from.take_frame(0)) out.push_back(std::move(*f));
  return out;
}
void deliver(const std::vector<frame_bytes>& frames, device& to, time_ns now) {
  for (const auto& f : frames) to.receive(0, f, now);
  to.progress(now);
}
flow::packet packet_of(const frame_bytes& f) {
  ib::roce_view v;
  REQUIRE(ib::inspect(f, v).code == wire::errc{});
  return flow::from_roce(v);
}
ib::opcode opcode_of(const frame_bytes& f) { return packet_of(f).opcode; }
ib::syndrome syndrome_of_frame(const frame_bytes& f) { return ib::syndrome_of(packet_of(f).aeth); }

struct hand_pair {
  side a, b;
  std::uint32_t qa = 0, qb = 0;
  explicit hand_pair(device_config cfg = {}) : a(1, framing::roce, 1 << 16, 64, cfg), b(2, framing::roce, 1 << 16, 64, cfg) {
    qa = a.qp(qp_type::rc);
    qb = b.qp(qp_type::rc);
    REQUIRE(bring_up(*a.dev, qa, qp_type::rc, qb, av_to(*b.dev)) == errc{});
    REQUIRE(bring_up(*b.dev, qb, qp_type::rc, qa, av_to(*a.dev)) == errc{});
  }
  void send_a_to_b(std::uint64_t id, std::uint32_t len = 100) {
    const sge s = a.at(0, len);
    REQUIRE(a.dev->post_send(qa, {.wr_id = id, .opcode = wr_opcode::send, .sg_list = std::span(&s, 1)}) == errc{});
  }
  void recv_on_b(std::uint64_t id, std::uint32_t len = 4096) {
    const sge s = b.at(0, len);
    REQUIRE(b.dev->post_recv(qb, {.wr_id = id, .sg_list = std::span(&s, 1)}) == errc{});
  }
};

}  // namespace

TEST_CASE("a destroyed RC QP lingers: it re-ACKs a duplicate whose ACK was lost, takes nothing new, then goes", "[rnic][linger]") {
  device_config cfg;
  cfg.linger = 50'000'000;  // 50 ms at most; twice the QP's ACK timeout (code 8: 1.05 ms) here
  hand_pair p(cfg);
  time_ns t = 1'000'000;
  p.recv_on_b(1);
  p.send_a_to_b(7);
  deliver(take_all(*p.a.dev, t), *p.b.dev, t);
  const auto acks = take_all(*p.b.dev, t);  // b's ACK: lost
  REQUIRE(acks.size() == 1);
  REQUIRE(p.b.poll_recv().size() == 1);
  REQUIRE(p.b.dev->destroy_qp(p.qb) == errc{});
  CHECK(p.b.dev->lingering() == 1);
  CHECK(p.b.dev->query_qp(p.qb).code() == errc::not_found);      // gone for its owner
  CHECK(p.b.dev->destroy_qp(p.qb) == errc::not_found);
  CHECK(p.b.dev->destroy_cq(p.b.rcq) == errc{});                  // it holds no CQ
  // a's retransmission (after its ACK timeout) is a duplicate: b answers it
  t += 5'000'000;
  const auto resent = take_all(*p.a.dev, t);
  REQUIRE(!resent.empty());
  deliver(resent, *p.b.dev, t);
  const auto again = take_all(*p.b.dev, t);
  REQUIRE(again.size() == 1);
  CHECK(opcode_of(again[0]) == ib::opcode::rc_acknowledge);
  deliver(again, *p.a.dev, t);
  const auto done = p.a.poll_send();
  REQUIRE(done.size() == 1);
  CHECK(done[0].wr_id == 7);
  CHECK(done[0].status == wc_status::success);
  // a new request is not taken
  const std::uint64_t no_qp = p.b.dev->counters().dropped_no_qp;
  p.send_a_to_b(8);
  deliver(take_all(*p.a.dev, t), *p.b.dev, t);
  CHECK(take_all(*p.b.dev, t).empty());
  CHECK(p.b.dev->counters().dropped_no_qp == no_qp + 1);
  // twice the ACK timeout after the last packet it heard, it is gone
  CHECK(p.b.dev->next_deadline());
  t += 2 * (time_ns{4096} << 8) + 1;
  p.b.dev->progress(t);
  CHECK(p.b.dev->lingering() == 0);
}

TEST_CASE("a QP does not linger without device_config::linger, nor when its peer is on its own device", "[rnic][linger]") {
  hand_pair p;
  REQUIRE(p.b.dev->destroy_qp(p.qb) == errc{});
  CHECK(p.b.dev->lingering() == 0);
  device_config cfg;
  cfg.linger = 1'000'000'000;
  side s(1, framing::roce, 1 << 16, 64, cfg);
  const std::uint32_t q1 = s.qp(qp_type::rc), q2 = s.qp(qp_type::rc);
  REQUIRE(bring_up(*s.dev, q1, qp_type::rc, q2, av_to(*s.dev)) == errc{});
  REQUIRE(bring_up(*s.dev, q2, qp_type::rc, q1, av_to(*s.dev)) == errc{});
  REQUIRE(s.dev->destroy_qp(q1) == errc{});
  CHECK(s.dev->lingering() == 0);
  // one not yet in RTS does not linger either
  device_config c2;
  c2.linger = 1'000'000'000;
  side u(3, framing::roce, 1 << 16, 64, c2);
  REQUIRE(u.dev->destroy_qp(u.qp(qp_type::rc)) == errc{});
  CHECK(u.dev->lingering() == 0);
}

TEST_CASE("ACK coalescing: a lone ACK waits ack_delay, or leaves behind the request that releases it", "[rnic][ack_delay]") {
  device_config cfg;
  cfg.ack_delay = 50'000;
  hand_pair p(cfg);
  time_ns t = 1'000'000;
  p.recv_on_b(1);
  p.send_a_to_b(7);
  deliver(take_all(*p.a.dev, t), *p.b.dev, t);
  CHECK(take_all(*p.b.dev, t).empty());  // held
  CHECK(p.b.dev->pending_frames(0) == 1);
  REQUIRE(p.b.dev->next_deadline());
  CHECK(*p.b.dev->next_deadline() == t + 50'000);
  CHECK(take_all(*p.b.dev, t + 49'999).empty());
  const auto late = take_all(*p.b.dev, t + 50'000);
  REQUIRE(late.size() == 1);
  CHECK(opcode_of(late[0]) == ib::opcode::rc_acknowledge);

  // released by a request of b's, and sent behind it
  t += 100'000;
  p.recv_on_b(2);
  p.send_a_to_b(8);
  deliver(take_all(*p.a.dev, t), *p.b.dev, t);
  const sge s = p.b.at(0, 10);
  const sge r = p.a.at(0, 4096);
  REQUIRE(p.a.dev->post_recv(p.qa, {.wr_id = 3, .sg_list = std::span(&r, 1)}) == errc{});
  REQUIRE(p.b.dev->post_send(p.qb, {.wr_id = 9, .opcode = wr_opcode::send, .sg_list = std::span(&s, 1)}) == errc{});
  const auto both = take_all(*p.b.dev, t);
  REQUIRE(both.size() == 2);
  CHECK(opcode_of(both[0]) == ib::opcode::rc_send_only);
  CHECK(opcode_of(both[1]) == ib::opcode::rc_acknowledge);

  // two ACKs (a stream) are not held
  t += 100'000;
  p.recv_on_b(4);
  p.recv_on_b(5);
  p.send_a_to_b(10);
  deliver(take_all(*p.a.dev, t), *p.b.dev, t);
  CHECK(take_all(*p.b.dev, t).empty());
  deliver(take_all(*p.a.dev, t), *p.b.dev, t);  // (nothing new from a: its window holds one)
  p.send_a_to_b(11);
  deliver(take_all(*p.a.dev, t), *p.b.dev, t);
  CHECK(take_all(*p.b.dev, t).size() >= 1);
}

TEST_CASE("requests to one RC QP received in one burst leave one ACK: a plain ACK replaces its QP's older one still queued", "[rnic][ack]") {
  device_config cfg;
  cfg.window = 64;  // 40 SENDs leave in one pump, asking for an ACK at PSN 15, 31 and the last
  hand_pair p(cfg);
  const time_ns t = 1'000'000;
  for (int i = 0; i < 40; ++i) p.recv_on_b(100 + static_cast<std::uint64_t>(i), 128);
  for (int i = 0; i < 40; ++i) p.send_a_to_b(static_cast<std::uint64_t>(i));
  const auto req = take_all(*p.a.dev, t);
  REQUIRE(req.size() == 40);
  std::uint64_t asked = 0;
  for (const auto& f : req) asked += packet_of(f).ack_req;
  REQUIRE(asked >= 2);
  deliver(req, *p.b.dev, t);
  const auto acks = take_all(*p.b.dev, t);
  REQUIRE(acks.size() == 1);
  CHECK(opcode_of(acks[0]) == ib::opcode::rc_acknowledge);
  CHECK(syndrome_of_frame(acks[0]).kind() == ib::aeth_kind::ack);
  CHECK(packet_of(acks[0]).psn == packet_of(req.back()).psn);  // the newest
  CHECK(p.b.dev->acks_superseded(0) == asked - 1);
  CHECK(p.b.poll_recv().size() == 40);
  deliver(acks, *p.a.dev, t);
  CHECK(p.a.poll_send().size() == 40);
  // Two QPs' ACKs do not replace each other.
  hand_pair q(cfg);
  const std::uint32_t qa2 = q.a.qp(qp_type::rc), qb2 = q.b.qp(qp_type::rc);
  REQUIRE(bring_up(*q.a.dev, qa2, qp_type::rc, qb2, av_to(*q.b.dev)) == errc{});
  REQUIRE(bring_up(*q.b.dev, qb2, qp_type::rc, qa2, av_to(*q.a.dev)) == errc{});
  q.recv_on_b(1);
  const sge r2 = q.b.at(0, 4096);
  REQUIRE(q.b.dev->post_recv(qb2, {.wr_id = 2, .sg_list = std::span(&r2, 1)}) == errc{});
  q.send_a_to_b(3);
  const sge s2 = q.a.at(0, 100);
  REQUIRE(q.a.dev->post_send(qa2, {.wr_id = 4, .opcode = wr_opcode::send, .sg_list = std::span(&s2, 1)}) == errc{});
  deliver(take_all(*q.a.dev, t), *q.b.dev, t);
  const auto two = take_all(*q.b.dev, t);
  REQUIRE(two.size() == 2);
  CHECK(packet_of(two[0]).dest_qp != packet_of(two[1]).dest_qp);
  CHECK(q.b.dev->acks_superseded(0) == 0);
}

TEST_CASE("a NAK is never held by ACK coalescing", "[rnic][ack_delay]") {
  device_config cfg;
  cfg.ack_delay = 50'000;
  hand_pair p(cfg);
  const time_ns t = 1'000'000;
  p.send_a_to_b(7);  // no receive posted: RNR NAK
  deliver(take_all(*p.a.dev, t), *p.b.dev, t);
  const auto nak = take_all(*p.b.dev, t);
  REQUIRE(nak.size() == 1);
  CHECK(syndrome_of_frame(nak[0]).kind() == ib::aeth_kind::rnr_nak);
}

TEST_CASE("a SEND whose receive buffer's key no longer allows it: remote operational error there, local protection error here", "[rnic][qp]") {
  hand_pair p;
  const time_ns t = 1'000'000;
  std::vector<std::byte> other(4096);
  const auto mr = *p.b.dev->reg_mr(p.b.pd, other.data(), other.size(), access::local_write);
  const sge s{reinterpret_cast<std::uintptr_t>(other.data()), 4096, mr.lkey};
  REQUIRE(p.b.dev->post_recv(p.qb, {.wr_id = 1, .sg_list = std::span(&s, 1)}) == errc{});
  p.b.dev->progress(t);  // fetched while its key is good
  REQUIRE(p.b.dev->dereg_mr(mr.lkey) == errc{});
  p.send_a_to_b(7);
  deliver(take_all(*p.a.dev, t), *p.b.dev, t);
  const auto nak = take_all(*p.b.dev, t);
  REQUIRE(nak.size() == 1);
  REQUIRE(syndrome_of_frame(nak[0]).nak_reason());
  CHECK(*syndrome_of_frame(nak[0]).nak_reason() == ib::nak_code::remote_operational_error);
  deliver(nak, *p.a.dev, t);
  const auto sc = p.a.poll_send();
  REQUIRE(!sc.empty());
  CHECK(sc[0].status == wc_status::remote_operational_error);
  const auto rc = p.b.poll_recv();
  REQUIRE(rc.size() == 1);
  CHECK(rc[0].wr_id == 1);
  CHECK(rc[0].status == wc_status::local_protection_error);
  CHECK(*p.b.dev->query_qp(p.qb) == qp_state::err);
  bool access_event = false;
  for (const auto& e : p.b.dev->take_events()) access_event |= e.type == event_type::qp_access_error && e.object == p.qb;
  CHECK(access_event);
}

TEST_CASE("re-registration keeps the key when asked, changes the PD and keeps the iova", "[rnic][memory]") {
  side s(1, framing::roce, 1 << 16);
  std::vector<std::byte> mem(8192);
  const auto mr = *s.dev->reg_mr_iova(s.pd, mem.data(), 4096, 0x10000, access::local_write);
  const std::uint32_t pd2 = *s.dev->alloc_pd();
  rereg_options o;
  o.new_key = false;
  o.iova = 0x10000;
  o.pd = pd2;
  const auto r = s.dev->rereg_mr(mr.lkey, mem.data(), 8192, access::local_write | access::remote_write, o);
  REQUIRE(r);
  CHECK(r->lkey == mr.lkey);
  CHECK(r->addr == 0x10000);
  const auto info = *s.dev->memory().info(mr.lkey);
  CHECK(info.pd == pd2);
  CHECK(info.length == 8192);
  CHECK(info.iova == 0x10000);
  CHECK(s.dev->memory().check(mr.lkey, 0x10000 + 8000, 100, {pd2, access::remote_write}) == errc{});
  CHECK(s.dev->memory().check(mr.lkey, 0x10000, 100, {s.pd, access::local_write}) == errc::wrong_pd);
  CHECK(s.dev->dealloc_pd(pd2) == errc::busy);
  o.pd = 999;
  CHECK(s.dev->rereg_mr(mr.lkey, mem.data(), 8192, access::local_write, o).code() == errc::not_found);
  // the default: a new variant, the old key stale
  const auto r2 = s.dev->rereg_mr(mr.lkey, mem.data(), 4096, access::local_write);
  REQUIRE(r2);
  CHECK(r2->lkey != mr.lkey);
  CHECK(s.dev->memory().check(mr.lkey, reinterpret_cast<std::uintptr_t>(mem.data()), 1, {pd2, access::local_write}) == errc::wrong_variant);
}

TEST_CASE("prefetch makes an on-demand key's pages resident, after checking the ranges", "[rnic][memory]") {
  side s(1, framing::roce, 1 << 16);
  std::vector<std::byte> mem(4 * 4096);
  const auto mr = *s.dev->reg_mr_on_demand(s.pd, mem.data(), mem.size(), access::local_write);
  const auto va = reinterpret_cast<std::uintptr_t>(mem.data());
  CHECK(s.dev->memory().check(mr.lkey, va, mem.size(), {s.pd, access::local_write}) == errc::page_fault);
  const sge bad{va, 10, mr.lkey + 1};
  CHECK(s.dev->prefetch(s.pd, std::span(&bad, 1), access::none) != errc{});
  const sge one{va + 4096, 4096, mr.lkey};
  CHECK(s.dev->prefetch(s.pd, std::span(&one, 1), access::local_write, false) == errc{});  // no fault
  CHECK(s.dev->memory().check(mr.lkey, va + 4096, 4096, {s.pd, access::local_write}) == errc::page_fault);
  CHECK(s.dev->prefetch(s.pd, std::span(&one, 1), access::local_write) == errc{});
  CHECK(s.dev->memory().check(mr.lkey, va + 4096, 4096, {s.pd, access::local_write}) == errc{});
  CHECK(s.dev->memory().check(mr.lkey, va, 4096, {s.pd, access::local_write}) == errc::page_fault);
  const sge other_pd{va, 10, mr.lkey};
  CHECK(s.dev->prefetch(s.pd + 100, std::span(&other_pd, 1), access::none) == errc::wrong_pd);
}

TEST_CASE("prefetch through an indirect key serves every on-demand key under it", "[rnic][memory]") {
  side s(1, framing::roce, 1 << 16);
  std::vector<std::byte> a(2 * 4096), b(2 * 4096), c(4096);
  const auto ka = *s.dev->reg_mr_on_demand(s.pd, a.data(), a.size(), access::local_write);
  const auto kb = *s.dev->reg_mr_on_demand(s.pd, b.data(), b.size(), access::local_write);
  const auto kc = *s.dev->reg_mr(s.pd, c.data(), c.size(), access::local_write);
  const auto va = [](auto& v) { return static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(v.data())); };
  const klm_entry e[] = {{ka.lkey, va(a), a.size()}, {kc.lkey, va(c), c.size()}, {kb.lkey, va(b), b.size()}};
  const auto ind = *s.dev->reg_indirect(s.pd, e, access::local_write);
  CHECK(s.dev->memory().check(ind.lkey, 0, ind.length, {s.pd, access::local_write}) == errc::page_fault);
  const sge all{0, static_cast<std::uint32_t>(ind.length), ind.lkey};
  CHECK(s.dev->prefetch(s.pd, std::span(&all, 1), access::local_write) == errc{});
  CHECK(s.dev->memory().check(ind.lkey, 0, ind.length, {s.pd, access::local_write}) == errc{});
  CHECK(s.dev->memory().check(ka.lkey, va(a), a.size(), {s.pd, access::local_write}) == errc{});
  CHECK(s.dev->memory().check(kb.lkey, va(b), b.size(), {s.pd, access::local_write}) == errc{});
}

TEST_CASE("address handles are destroyed and their numbers reused", "[rnic][ah]") {
  side s(1, framing::roce, 1 << 16);
  const std::uint32_t a = *s.dev->create_ah(s.pd, av_to(*s.dev));
  const std::uint32_t b = *s.dev->create_ah(s.pd, av_to(*s.dev));
  CHECK(a != b);
  CHECK(s.dev->destroy_ah(a) == errc{});
  CHECK(s.dev->destroy_ah(a) == errc::not_found);
  CHECK(s.dev->destroy_ah(77) == errc::not_found);
  CHECK(*s.dev->create_ah(s.pd, av_to(*s.dev)) == a);
}

TEST_CASE("an SRQ is destroyed only when no QP takes from it, and its limit raises one event", "[rnic][srq]") {
  hand_pair p;
  rq_memory srq_mem(16);
  const std::uint32_t srq = *p.b.dev->create_srq(p.b.pd, srq_mem);
  auto rq = std::make_unique<rq_memory>(4);
  auto sq = std::make_unique<sq_memory>(4);
  const std::uint32_t q = *p.b.dev->create_qp({.type = qp_type::rc, .pd = p.b.pd, .send_cq = p.b.scq, .recv_cq = p.b.rcq,
                                               .sq = sq.get(), .rq = rq.get(), .srq = srq});
  CHECK(p.b.dev->destroy_srq(srq) == errc::busy);
  for (std::uint64_t i = 0; i < 3; ++i) {
    const sge s = p.b.at(0, 64);
    REQUIRE(p.b.dev->post_srq_recv(srq, {.wr_id = i, .sg_list = std::span(&s, 1)}) == errc{});
  }
  CHECK(*p.b.dev->srq_outstanding(srq) == 3);
  CHECK(p.b.dev->arm_srq_limit(srq, 3) == errc{});
  CHECK(p.b.dev->take_events().empty());  // 3 is not fewer than 3
  CHECK(*p.b.dev->srq_limit(srq) == 3);
  REQUIRE(p.b.dev->arm_srq_limit(srq, 4) == errc{});  // fewer than 4: at once
  const auto ev = p.b.dev->take_events();
  REQUIRE(ev.size() == 1);
  CHECK(ev[0].type == event_type::srq_limit);
  CHECK(ev[0].object == srq);
  CHECK(*p.b.dev->srq_limit(srq) == 0);  // disarmed
  p.b.dev->progress(1);
  CHECK(p.b.dev->take_events().empty());
  REQUIRE(p.b.dev->destroy_qp(q) == errc{});
  CHECK(p.b.dev->destroy_srq(srq) == errc{});
  CHECK(p.b.dev->destroy_srq(srq) == errc::not_found);
  CHECK(p.b.dev->arm_srq_limit(srq, 1) == errc::not_found);
  const sge s = p.b.at(0, 64);
  CHECK(p.b.dev->post_srq_recv(srq, {.wr_id = 9, .sg_list = std::span(&s, 1)}) == errc::not_found);
  // its number is reused
  rq_memory again(4);
  CHECK(*p.b.dev->create_srq(p.b.pd, again) == srq);
}

TEST_CASE("remove_qp takes one QP's unconsumed completions out of a CQ, the others keep their order", "[rnic][cq]") {
  for (const std::uint32_t consumed_before : {0u, 3u, 6u}) {  // (so the entries straddle the ring's wrap)
    INFO(consumed_before);
    cq_memory m(8);
    std::uint32_t prod = 0;
    auto write = [&](std::uint32_t qpn, std::uint64_t id) {
      cqe& e = m.ring()[prod & 7];
      e = {};
      e.wr_id = id;
      e.qp_num = qpn;
      e.op_own = cq_memory::phase(prod, 8);
      ++prod;
    };
    std::vector<work_completion> out(8);
    for (std::uint32_t i = 0; i < consumed_before; ++i) write(9, 100 + i);
    CHECK(m.poll(out) == consumed_before);
    write(1, 1), write(2, 2), write(1, 3), write(2, 4), write(2, 5), write(1, 6);
    CHECK(m.remove_qp(1) == 3);
    CHECK(m.remove_qp(1) == 0);
    const std::size_t n = m.poll(out);
    REQUIRE(n == 3);
    CHECK(out[0].wr_id == 2);
    CHECK(out[1].wr_id == 4);
    CHECK(out[2].wr_id == 5);
    CHECK(m.poll(out) == 0);
    write(1, 7);  // the ring goes on where the producer is
    REQUIRE(m.poll(out) == 1);
    CHECK(out[0].wr_id == 7);
  }
}

TEST_CASE("a port with an IPv6 GID beside its IPv4-mapped one: the source GID index picks the family", "[rnic][gid]") {
  const std::array<std::uint8_t, 16> v6a{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  const std::array<std::uint8_t, 16> v6b{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
  device_config ca, cb;
  ca.ports = {port_n(1)}, cb.ports = {port_n(2)};
  ca.ports[0].extra_gids = {v6a}, cb.ports[0].extra_gids = {v6b};
  side a(1, framing::roce, 1 << 16, 64, ca), b(2, framing::roce, 1 << 16, 64, cb);
  a.dev = std::make_unique<device>(ca), b.dev = std::make_unique<device>(cb);  // (side's constructor sets its own ports)
  a.pd = *a.dev->alloc_pd(), b.pd = *b.dev->alloc_pd();
  a.scq = *a.dev->create_cq(*a.scq_mem), a.rcq = *a.dev->create_cq(*a.rcq_mem);
  b.scq = *b.dev->create_cq(*b.scq_mem), b.rcq = *b.dev->create_cq(*b.rcq_mem);
  a.mr = *a.dev->reg_mr(a.pd, a.buf.data(), a.buf.size(), all_access);
  b.mr = *b.dev->reg_mr(b.pd, b.buf.data(), b.buf.size(), all_access);
  address_vector to_b = av_to(*b.dev), to_a = av_to(*a.dev);
  to_b.dgid = v6b, to_b.sgid_index = 1;
  to_a.dgid = v6a, to_a.sgid_index = 1;
  const std::uint32_t qa = a.qp(qp_type::rc), qb = b.qp(qp_type::rc);
  REQUIRE(bring_up(*a.dev, qa, qp_type::rc, qb, to_b) == errc{});
  REQUIRE(bring_up(*b.dev, qb, qp_type::rc, qa, to_a) == errc{});
  address_vector bad = to_b;
  bad.sgid_index = 2;
  CHECK(a.dev->create_ah(a.pd, bad).code() == errc::invalid_argument);
  CHECK(a.dev->create_ah(a.pd, to_b));
  qp_attr at{};
  at.av = bad;
  CHECK(a.dev->modify_qp(qa, at, qp_attr_mask::av) == errc::invalid_attribute);
  const time_ns t = 1'000'000;
  const sge r = b.at(0, 4096), s = a.at(0, 100);
  REQUIRE(b.dev->post_recv(qb, {.wr_id = 1, .sg_list = std::span(&r, 1)}) == errc{});
  REQUIRE(a.dev->post_send(qa, {.wr_id = 2, .opcode = wr_opcode::send, .sg_list = std::span(&s, 1)}) == errc{});
  const auto f = take_all(*a.dev, t);
  REQUIRE(f.size() == 1);
  ib::roce_view v;
  REQUIRE(ib::inspect(f[0], v).code == wire::errc{});
  REQUIRE(v.v6);
  CHECK(v.ipv6().src == v6a);
  CHECK(v.ipv6().dst == v6b);
  deliver(f, *b.dev, t);  // b answers to its IPv6 GID
  const auto ack = take_all(*b.dev, t);
  REQUIRE(ack.size() == 1);
  deliver(ack, *a.dev, t);
  const auto done = a.poll_send();
  REQUIRE(done.size() == 1);
  CHECK(done[0].status == wc_status::success);
  CHECK(b.poll_recv().size() == 1);
}

TEST_CASE("resize_cq moves the waiting completions, in order, to the new ring, and the device writes there", "[rnic][cq]") {
  hand_pair p;
  const time_ns t = 1'000'000;
  for (std::uint64_t i = 0; i < 5; ++i) p.recv_on_b(i);
  for (std::uint64_t i = 0; i < 5; ++i) p.send_a_to_b(10 + i);
  deliver(take_all(*p.a.dev, t), *p.b.dev, t);
  deliver(take_all(*p.b.dev, t), *p.a.dev, t);
  std::vector<work_completion> out(2);
  REQUIRE(p.a.scq_mem->poll(out) == 2);  // two consumed, three waiting
  cq_memory small(2), bigger(8);
  CHECK(p.a.dev->resize_cq(p.a.scq, small) == errc::invalid_argument);  // three do not fit in two
  CHECK(p.a.dev->resize_cq(999, bigger) == errc::not_found);
  REQUIRE(p.a.dev->resize_cq(p.a.scq, bigger) == errc{});
  std::vector<work_completion> got(8);
  REQUIRE(bigger.poll(got) == 3);
  CHECK(got[0].wr_id == 12);
  CHECK(got[1].wr_id == 13);
  CHECK(got[2].wr_id == 14);
  p.recv_on_b(5);
  p.send_a_to_b(15);  // written to the new ring
  deliver(take_all(*p.a.dev, t), *p.b.dev, t);
  deliver(take_all(*p.b.dev, t), *p.a.dev, t);
  REQUIRE(bigger.poll(got) == 1);
  CHECK(got[0].wr_id == 15);
  CHECK(bigger.poll(got) == 0);
}
