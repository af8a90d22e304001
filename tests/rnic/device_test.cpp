// The reference RNIC end to end over the loopback fabric: every operation on every transport in
// both framings (where the framing carries it), polled completions, per-QP completion order on
// a shared CQ, CQ overflow, the QP state rules, on-demand paging with the page-fault ACK.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <pushwire/ib/roce.hpp>
#include <pushwire/wire/pcap.hpp>

#include "harness.hpp"

using namespace pushwire;
using namespace pushwire::test::rnic;

namespace {

std::string status_text(const work_completion& c) { return std::string{wire::enum_name(c.status)}; }

bool equal_bytes(const side& s, std::size_t off, const std::vector<std::byte>& want) {
  return std::equal(want.begin(), want.end(), s.buf.begin() + static_cast<std::ptrdiff_t>(off));
}

/// "Another NIC" at 198.18.0.9 (QP 0x99), on a raw port of side b (198.18.0.2).
const address_vector another_nic{.port = 0, .dmac = {0x02, 0, 0, 0, 0, 9}, .dgid = gid_v4(198, 18, 0, 9)};
/// A packet it sends to b's QP qb, its headers but the opcode's own to fill.
ib::roce_packet from_another_nic(const side& b, std::uint32_t qb, ib::opcode op, std::uint32_t psn) {
  ib::roce_packet f{};
  f.eth.src = another_nic.dmac;
  f.eth.dst = b.dev->config().ports[0].mac;
  f.ip4.src = {198, 18, 0, 9};
  f.ip4.dst = {198, 18, 0, 2};
  f.bth.opcode = ib::code(op);
  f.bth.destqp = qb;
  f.bth.psn = psn;
  return f;
}
std::vector<std::byte> built_frame(const ib::roce_packet& f) {
  std::vector<std::byte> out(*ib::frame_size(f));
  REQUIRE(ib::build(f, out).has_value());
  return out;
}

/// a and b differ nowhere outside [from, to).
bool same_outside(const std::vector<std::byte>& a, const std::vector<std::byte>& b, std::size_t from, std::size_t to) {
  return a.size() == b.size() && std::equal(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(from), b.begin()) &&
         std::equal(a.begin() + static_cast<std::ptrdiff_t>(to), a.end(), b.begin() + static_cast<std::ptrdiff_t>(to));
}

}  // namespace

TEST_CASE("RC in both framings: SEND, SEND_WITH_IMM, WRITE, WRITE_WITH_IMM, READ, atomics", "[rnic][rc]") {
  for (const framing f : {framing::roce, framing::cell}) {
    INFO("framing " << wire::enum_name(f));
    pair p(f);
    const auto [qa, qb] = p.connect(qp_type::rc);
    side& a = p.a;
    side& b = p.b;
    const auto msg = pattern_bytes(5000, 1);
    std::copy(msg.begin(), msg.end(), a.buf.begin());
    // SEND 5000 bytes into a 6000-byte receive; SEND_WITH_IMM 10 bytes.
    const sge r1 = b.at(0x10000, 6000), r2 = b.at(0x20000, 64);
    REQUIRE(b.dev->post_recv(qb, {.wr_id = 71, .sg_list = std::span(&r1, 1)}) == errc{});
    REQUIRE(b.dev->post_recv(qb, {.wr_id = 72, .sg_list = std::span(&r2, 1)}) == errc{});
    const sge s1 = a.at(0, 5000), s2 = a.at(100, 10);
    REQUIRE(a.dev->post_send(qa, {.wr_id = 1, .opcode = wr_opcode::send, .sg_list = std::span(&s1, 1)}) == errc{});
    REQUIRE(a.dev->post_send(qa, {.wr_id = 2, .opcode = wr_opcode::send_with_imm, .sg_list = std::span(&s2, 1), .imm = 0x07050100}) == errc{});
    // WRITE 3000 bytes; WRITE_WITH_IMM 256 bytes (consumes a receive).
    const sge r3 = b.at(0x30000, 16);
    REQUIRE(b.dev->post_recv(qb, {.wr_id = 73, .sg_list = std::span(&r3, 1)}) == errc{});
    const sge s3 = a.at(0, 3000), s4 = a.at(1000, 256);
    REQUIRE(a.dev->post_send(qa, {.wr_id = 3, .opcode = wr_opcode::rdma_write, .sg_list = std::span(&s3, 1), .remote_addr = b.addr(0x40000), .rkey = b.mr.rkey}) == errc{});
    REQUIRE(a.dev->post_send(qa, {.wr_id = 4, .opcode = wr_opcode::rdma_write_with_imm, .sg_list = std::span(&s4, 1), .imm = 9, .remote_addr = b.addr(0x50000), .rkey = b.mr.rkey}) == errc{});
    {
      // READ 2500 bytes back; COMPARE_SWAP and FETCH_ADD on b's word at 0x60000.
      const auto remote = pattern_bytes(2500, 9);
      std::copy(remote.begin(), remote.end(), b.buf.begin() + 0x70000);
      std::uint64_t word = 40;
      std::memcpy(b.buf.data() + 0x60000, &word, 8);
      const sge s5 = a.at(0x80000, 2500), s6 = a.at(0x90000, 8), s7 = a.at(0x90008, 8);
      REQUIRE(a.dev->post_send(qa, {.wr_id = 5, .opcode = wr_opcode::rdma_read, .sg_list = std::span(&s5, 1), .remote_addr = b.addr(0x70000), .rkey = b.mr.rkey}) == errc{});
      REQUIRE(a.dev->post_send(qa, {.wr_id = 6, .opcode = wr_opcode::atomic_cmp_and_swp, .sg_list = std::span(&s6, 1), .remote_addr = b.addr(0x60000), .rkey = b.mr.rkey, .compare_add = 40, .swap = 77}) == errc{});
      REQUIRE(a.dev->post_send(qa, {.wr_id = 7, .opcode = wr_opcode::atomic_fetch_and_add, .sg_list = std::span(&s7, 1), .remote_addr = b.addr(0x60000), .rkey = b.mr.rkey, .compare_add = 3}) == errc{});
    }
    p.settle();
    const auto sc = a.poll_send();
    const std::size_t n_send = 7;
    REQUIRE(sc.size() == n_send);
    for (std::size_t i = 0; i < n_send; ++i) {
      INFO("completion " << i << " " << status_text(sc[i]));
      CHECK(sc[i].wr_id == i + 1);
      CHECK(sc[i].status == wc_status::success);
      CHECK(sc[i].qp_num == qa);
    }
    CHECK(sc[0].opcode == wc_opcode::send);
    CHECK(sc[2].opcode == wc_opcode::rdma_write);
    const auto rc = b.poll_recv();
    REQUIRE(rc.size() == 3);
    CHECK(rc[0].wr_id == 71);
    CHECK(rc[0].byte_len == 5000);
    CHECK(rc[0].opcode == wc_opcode::recv);
    CHECK(!rc[0].with_imm);
    CHECK(rc[1].wr_id == 72);
    CHECK(rc[1].byte_len == 10);
    CHECK(rc[1].with_imm);
    CHECK(rc[1].imm == 0x07050100);
    CHECK(rc[2].wr_id == 73);
    CHECK(rc[2].opcode == wc_opcode::recv_rdma_with_imm);
    CHECK(rc[2].imm == 9);
    CHECK(rc[2].byte_len == 256);
    CHECK(equal_bytes(b, 0x10000, msg));
    CHECK(equal_bytes(b, 0x20000, std::vector<std::byte>(msg.begin() + 100, msg.begin() + 110)));
    CHECK(equal_bytes(b, 0x40000, std::vector<std::byte>(msg.begin(), msg.begin() + 3000)));
    CHECK(equal_bytes(b, 0x50000, std::vector<std::byte>(msg.begin() + 1000, msg.begin() + 1256)));
    CHECK(b.buf[0x40000 + 3000] == std::byte{0});  // not one byte past the write
    {
      CHECK(sc[4].opcode == wc_opcode::rdma_read);
      CHECK(sc[4].byte_len == 2500);
      CHECK(equal_bytes(a, 0x80000, pattern_bytes(2500, 9)));
      std::uint64_t orig1 = 0, orig2 = 0, now = 0;
      std::memcpy(&orig1, a.buf.data() + 0x90000, 8);
      std::memcpy(&orig2, a.buf.data() + 0x90008, 8);
      std::memcpy(&now, b.buf.data() + 0x60000, 8);
      CHECK(orig1 == 40);  // compare matched: swapped to 77
      CHECK(orig2 == 77);
      CHECK(now == 80);
    }
  }
}

TEST_CASE("UC and UD over both framings", "[rnic][uc][ud]") {
  for (const framing f : {framing::roce, framing::cell}) {
    INFO("framing " << wire::enum_name(f));
    pair p(f);
    {
      const auto [qa, qb] = p.connect(qp_type::uc);
      const auto msg = pattern_bytes(3000, 3);
      std::copy(msg.begin(), msg.end(), p.a.buf.begin());
      const sge r = p.b.at(0x1000, 4000);
      REQUIRE(p.b.dev->post_recv(qb, {.wr_id = 5, .sg_list = std::span(&r, 1)}) == errc{});
      const sge s = p.a.at(0, 3000);
      REQUIRE(p.a.dev->post_send(qa, {.wr_id = 1, .opcode = wr_opcode::send, .sg_list = std::span(&s, 1)}) == errc{});
      REQUIRE(p.a.dev->post_send(qa, {.wr_id = 2, .opcode = wr_opcode::rdma_write, .sg_list = std::span(&s, 1), .remote_addr = p.b.addr(0x9000), .rkey = p.b.mr.rkey}) == errc{});
      // UC has no READ: refused locally with an error completion, the send queue to SQE.
      p.settle();
      const auto sc = p.a.poll_send();
      REQUIRE(sc.size() == 2);
      CHECK(sc[0].status == wc_status::success);
      CHECK(sc[1].status == wc_status::success);
      const auto rc = p.b.poll_recv();
      REQUIRE(rc.size() == 1);
      CHECK(rc[0].byte_len == 3000);
      CHECK(equal_bytes(p.b, 0x1000, msg));
      CHECK(equal_bytes(p.b, 0x9000, msg));
      REQUIRE(p.a.dev->post_send(qa, {.wr_id = 3, .opcode = wr_opcode::rdma_read, .sg_list = std::span(&s, 1), .remote_addr = p.b.addr(0), .rkey = p.b.mr.rkey}) == errc{});
      p.settle();
      const auto bad = p.a.poll_send();
      REQUIRE(bad.size() == 1);
      CHECK(bad[0].status == wc_status::local_qp_operation_error);
      CHECK(*p.a.dev->query_qp(qa) == qp_state::sqe);
    }
    {
      const std::uint32_t ua = p.a.qp(qp_type::ud), ub = p.b.qp(qp_type::ud);
      REQUIRE(bring_up(*p.a.dev, ua, qp_type::ud, 0, {}) == errc{});
      REQUIRE(bring_up(*p.b.dev, ub, qp_type::ud, 0, {}) == errc{});
      const std::uint32_t ah = *p.a.dev->create_ah(p.a.pd, av_to(*p.b.dev));
      const auto msg = pattern_bytes(600, 4);
      std::copy(msg.begin(), msg.end(), p.a.buf.begin() + 0x2000);
      const sge r = p.b.at(0x3000, 1024);
      REQUIRE(p.b.dev->post_recv(ub, {.wr_id = 9, .sg_list = std::span(&r, 1)}) == errc{});
      const sge s = p.a.at(0x2000, 600);
      REQUIRE(p.a.dev->post_send(ua, {.wr_id = 8, .opcode = wr_opcode::send_with_imm, .sg_list = std::span(&s, 1), .imm = 5, .ah = ah, .remote_qpn = ub, .remote_qkey = 0x11111111}) == errc{});
      p.settle();
      const auto sc = p.a.poll_send();
      REQUIRE(sc.size() == 1);
      CHECK(sc[0].status == wc_status::success);
      const auto rc = p.b.poll_recv();
      REQUIRE(rc.size() == 1);
      CHECK(rc[0].byte_len == 600 + device::grh_size);  // verbs: a UD receive starts with 40 bytes of GRH
      CHECK(rc[0].src_qp == ua);
      CHECK(rc[0].imm == 5);
      CHECK(equal_bytes(p.b, 0x3000 + device::grh_size, msg));
      // The GRH space holds the IPv4 header as verbs gives it (20 zero bytes, then the header):
      // version/IHL 0x45, protocol UDP, a's address as source and b's as destination.
      CHECK(rc[0].grh == (f == framing::roce));
      if (f == framing::roce) {
        const auto gh = std::span(p.b.buf).subspan(0x3000, device::grh_size);
        CHECK(std::all_of(gh.begin(), gh.begin() + 20, [](std::byte x) { return x == std::byte{0}; }));
        CHECK(gh[20] == std::byte{0x45});
        CHECK(gh[29] == std::byte{17});
        const auto ga = p.a.dev->config().ports[0].gid, gb = p.b.dev->config().ports[0].gid;
        for (std::size_t k = 0; k < 4; ++k) {
          CHECK(std::to_integer<std::uint8_t>(gh[32 + k]) == ga[12 + k]);
          CHECK(std::to_integer<std::uint8_t>(gh[36 + k]) == gb[12 + k]);
        }
      }
      // UD has no path MTU attribute: a message is bounded by the port's MTU (4096 here), not
      // by qp_attr's default 1024.
      const auto big = pattern_bytes(3000, 6);
      std::copy(big.begin(), big.end(), p.a.buf.begin() + 0x4000);
      const sge r2 = p.b.at(0x6000, 4096 + device::grh_size);
      REQUIRE(p.b.dev->post_recv(ub, {.wr_id = 10, .sg_list = std::span(&r2, 1)}) == errc{});
      const sge s2 = p.a.at(0x4000, 3000);
      REQUIRE(p.a.dev->post_send(ua, {.wr_id = 11, .opcode = wr_opcode::send, .sg_list = std::span(&s2, 1), .ah = ah, .remote_qpn = ub, .remote_qkey = 0x11111111}) == errc{});
      p.settle();
      const auto sc2 = p.a.poll_send();
      REQUIRE(sc2.size() == 1);
      CHECK(sc2[0].status == wc_status::success);
      const auto rc2 = p.b.poll_recv();
      REQUIRE(rc2.size() == 1);
      CHECK(rc2[0].byte_len == 3000 + device::grh_size);
      CHECK(equal_bytes(p.b, 0x6000 + device::grh_size, big));
      // ... and one byte more than the port's MTU is the sender's length error.
      const sge s3 = p.a.at(0x4000, 4097);
      REQUIRE(p.a.dev->post_send(ua, {.wr_id = 12, .opcode = wr_opcode::send, .sg_list = std::span(&s3, 1), .ah = ah, .remote_qpn = ub, .remote_qkey = 0x11111111}) == errc{});
      p.settle();
      const auto sc3 = p.a.poll_send();
      REQUIRE(sc3.size() == 1);
      CHECK(sc3[0].status != wc_status::success);
      CHECK(p.b.poll_recv().empty());
    }
  }
}

TEST_CASE("completions of QPs sharing a CQ come out in each QP's order", "[rnic][cq]") {
  pair p;
  std::vector<std::uint32_t> qas;
  for (int i = 0; i < 4; ++i) qas.push_back(p.connect(qp_type::rc, 256).first);
  // Interleave: each QP posts 20 WRITEs of different sizes, round robin.
  for (int k = 0; k < 20; ++k)
    for (std::size_t i = 0; i < qas.size(); ++i) {
      const sge s = p.a.at(0, static_cast<std::uint32_t>(100 + 300 * ((k + i) % 5)));
      REQUIRE(p.a.dev->post_send(qas[i], {.wr_id = i * 1000 + static_cast<std::uint64_t>(k), .opcode = wr_opcode::rdma_write,
                                         .sg_list = std::span(&s, 1), .remote_addr = p.b.addr(0x1000 * (i + 1)), .rkey = p.b.mr.rkey}) == errc{});
    }
  p.settle();
  const auto sc = p.a.poll_send();
  REQUIRE(sc.size() == 80);
  std::map<std::uint32_t, std::uint64_t> next;
  bool interleaved = false;
  for (std::size_t j = 0; j < sc.size(); ++j) {
    const auto& c = sc[j];
    CHECK(c.status == wc_status::success);
    const std::uint64_t qp_index = c.wr_id / 1000;
    REQUIRE(qp_index < qas.size());
    CHECK(c.qp_num == qas[qp_index]);
    CHECK(c.wr_id % 1000 == next[c.qp_num]);  // in this QP's order
    ++next[c.qp_num];
    if (j > 0 && sc[j - 1].qp_num != c.qp_num) interleaved = true;
  }
  CHECK(interleaved);  // the QPs' completions did interleave on the CQ
}

TEST_CASE("a CQ is a ring polled by its owner bit, overflow raises cq_error, moves the QP to ERR and loses nothing", "[rnic][cq]") {
  pair p(framing::roce, 1, {}, {}, 4);  // CQs of 4 entries
  const auto [qa, qb] = p.connect(qp_type::rc);
  (void)qb;
  // Three passes around a 4-entry ring, polled as we go: the owner bit flips each pass.
  for (int round = 0; round < 3; ++round) {
    for (int k = 0; k < 3; ++k) {
      const sge s = p.a.at(0, 8);
      REQUIRE(p.a.dev->post_send(qa, {.wr_id = static_cast<std::uint64_t>(round * 10 + k), .opcode = wr_opcode::rdma_write,
                                      .sg_list = std::span(&s, 1), .remote_addr = p.b.addr(0), .rkey = p.b.mr.rkey}) == errc{});
    }
    p.settle();
    const auto c = p.a.poll_send();
    REQUIRE(c.size() == 3);
    for (int k = 0; k < 3; ++k) CHECK(c[static_cast<std::size_t>(k)].wr_id == static_cast<std::uint64_t>(round * 10 + k));
    CHECK(p.a.poll_send().empty());
  }
  // Now 6 without polling: 4 fit, then the CQ overflows.
  for (int k = 0; k < 6; ++k) {
    const sge s = p.a.at(0, 8);
    REQUIRE(p.a.dev->post_send(qa, {.wr_id = static_cast<std::uint64_t>(100 + k), .opcode = wr_opcode::rdma_write,
                                    .sg_list = std::span(&s, 1), .remote_addr = p.b.addr(0), .rkey = p.b.mr.rkey}) == errc{});
  }
  p.settle();
  const auto ev = p.a.dev->take_events();
  REQUIRE(ev.size() >= 2);
  CHECK(ev[0].type == event_type::cq_error);
  CHECK(ev[1].type == event_type::qp_fatal);
  CHECK(ev[1].object == qa);
  CHECK(*p.a.dev->query_qp(qa) == qp_state::err);
  // Every work request still completes, in order, once the consumer makes room.
  std::vector<work_completion> all;
  for (int i = 0; i < 10 && all.size() < 6; ++i) {
    auto c = p.a.poll_send();
    all.insert(all.end(), c.begin(), c.end());
    p.settle();
  }
  REQUIRE(all.size() == 6);
  for (int k = 0; k < 6; ++k) CHECK(all[static_cast<std::size_t>(k)].wr_id == static_cast<std::uint64_t>(100 + k));
  CHECK(p.a.dev->counters().cq_overflows == 1);
}

TEST_CASE("QP states: modify_qp's attribute rules, posting rules, ERR flushes", "[rnic][qp]") {
  side s(1, framing::roce);
  const std::uint32_t q = s.qp(qp_type::rc);
  using M = qp_attr_mask;
  qp_attr a{};
  // RESET -> RTS is no transition; INIT needs pkey_index, port and access flags.
  a.state = qp_state::rts;
  CHECK(s.dev->modify_qp(q, a, M::state) == errc::invalid_state);
  a.state = qp_state::init;
  CHECK(s.dev->modify_qp(q, a, M::state | M::port) == errc::missing_attribute);
  CHECK(s.dev->modify_qp(q, a, M::state | M::port | M::pkey_index | M::access_flags | M::qkey) == errc::invalid_attribute);
  a.port = 3;
  CHECK(s.dev->modify_qp(q, a, M::state | M::port | M::pkey_index | M::access_flags) == errc::invalid_attribute);
  a.port = 0;
  a.cur_state = qp_state::rtr;
  CHECK(s.dev->modify_qp(q, a, M::state | M::cur_state | M::port | M::pkey_index | M::access_flags) == errc::invalid_state);
  REQUIRE(s.dev->modify_qp(q, a, M::state | M::port | M::pkey_index | M::access_flags) == errc{});
  // Posting a send before RTS is refused; a receive in INIT is taken.
  const sge g = s.at(0, 8);
  CHECK(s.dev->post_send(q, {.wr_id = 1, .sg_list = std::span(&g, 1)}) == errc::invalid_state);
  CHECK(s.dev->post_recv(q, {.wr_id = 2, .sg_list = std::span(&g, 1)}) == errc{});
  // INIT -> RTR needs the path: a 9000-byte MTU is out of range.
  a.state = qp_state::rtr;
  a.path_mtu = 9000;
  const M rtr = M::state | M::av | M::path_mtu | M::dest_qpn | M::rq_psn | M::max_dest_rd_atomic | M::min_rnr_timer;
  CHECK(s.dev->modify_qp(q, a, rtr) == errc::invalid_attribute);
  a.path_mtu = 1024;
  CHECK(s.dev->modify_qp(q, a, rtr & ~M::dest_qpn) == errc::missing_attribute);
  REQUIRE(s.dev->modify_qp(q, a, rtr) == errc{});
  a.state = qp_state::rts;
  a.retry_cnt = 8;
  const M rts = M::state | M::timeout | M::retry_cnt | M::rnr_retry | M::sq_psn | M::max_qp_rd_atomic;
  CHECK(s.dev->modify_qp(q, a, rts) == errc::invalid_attribute);
  a.retry_cnt = 7;
  REQUIRE(s.dev->modify_qp(q, a, rts) == errc{});
  CHECK(*s.dev->query_qp(q) == qp_state::rts);
  // To ERR: the posted receive completes flushed; later posts complete flushed.
  a.state = qp_state::err;
  REQUIRE(s.dev->modify_qp(q, a, M::state) == errc{});
  CHECK(s.dev->post_send(q, {.wr_id = 3, .sg_list = std::span(&g, 1)}) == errc{});
  s.dev->progress(0);
  const auto rc = s.poll_recv();
  REQUIRE(rc.size() == 1);
  CHECK(rc[0].wr_id == 2);
  CHECK(rc[0].status == wc_status::flushed);
  const auto sc = s.poll_send();
  REQUIRE(sc.size() == 1);
  CHECK(sc[0].wr_id == 3);
  CHECK(sc[0].status == wc_status::flushed);
  // ERR -> RESET -> INIT again.
  a.state = qp_state::reset;
  REQUIRE(s.dev->modify_qp(q, a, M::state) == errc{});
  a.state = qp_state::init;
  CHECK(s.dev->modify_qp(q, a, M::state | M::port | M::pkey_index | M::access_flags) == errc{});
  // UD: INIT needs a Q_Key; SQE -> RTS exists for UD, not RC.
  CHECK(transition_rule(qp_type::ud, qp_state::reset, qp_state::init)->required == (M::pkey_index | M::port | M::qkey));
  CHECK(transition_rule(qp_type::ud, qp_state::sqe, qp_state::rts).has_value());
  CHECK(!transition_rule(qp_type::rc, qp_state::sqe, qp_state::rts).has_value());
  CHECK(!transition_rule(qp_type::dct, qp_state::rtr, qp_state::rts).has_value());
}

TEST_CASE("on-demand memory: the page-fault ACK pauses the requester without retransmission, the silent drop resends", "[rnic][odp]") {
  for (const framing f : {framing::roce, framing::cell}) {
  INFO("framing " << wire::enum_name(f));
  time_ns with_ack = 0, with_drop = 0;
  std::uint64_t sent_ack = 0, sent_drop = 0;
  for (const auto policy : {flow::fault_policy::page_fault_ack, flow::fault_policy::silent_drop}) {
    device_config cfg;
    cfg.on_fault = policy;
    cfg.page_fault_latency = 3'000'000;  // 3 ms to bring a page in
    pair p(f, 1, {}, cfg);
    const auto [qa, qb] = p.connect(qp_type::rc);
    (void)qb;
    // b registers a region implicitly: no page resident.
    std::vector<std::byte> target(64 * 1024);
    const memory_region odp = *p.b.dev->reg_mr_on_demand(p.b.pd, target.data(), target.size(), all_access);
    const auto msg = pattern_bytes(16 * 1024, 5);
    std::copy(msg.begin(), msg.end(), p.a.buf.begin());
    const sge s = p.a.at(0, 16 * 1024);
    const time_ns start = p.fab.now();
    REQUIRE(p.a.dev->post_send(qa, {.wr_id = 1, .opcode = wr_opcode::rdma_write, .sg_list = std::span(&s, 1),
                                    .remote_addr = odp.addr + 4096, .rkey = odp.rkey}) == errc{});
    time_ns done_at = 0;
    REQUIRE(p.fab.run([&] {
      if (done_at) return true;
      const auto c = p.a.poll_send();
      if (!c.empty()) {
        CHECK(c[0].status == wc_status::success);
        done_at = p.fab.now();
      }
      return done_at != 0;
    }, start + 1'000'000'000));
    CHECK(std::equal(msg.begin(), msg.end(), target.begin() + 4096));
    const auto& st = p.b.dev->counters();
    CHECK(st.page_faults >= 1);
    CHECK(st.faults_served >= 1);
    const auto v = *p.a.dev->view(qa);
    if (policy == flow::fault_policy::page_fault_ack) {
      with_ack = done_at - start;
      CHECK(v.page_faults >= 1);
      CHECK(p.a.dev->counters().pauses >= 1);
      CHECK(v.timeouts == 0);  // paused, not timed out
      // Each pause of at least 3 ms spans two local ACK timeouts of 1.05 ms (code 8: 4.096 us * 2^8).
      CHECK(p.a.dev->counters().retransmits_avoided >= 2 * p.a.dev->counters().pauses);
      sent_ack = p.a.dev->counters().frames_out;
    } else {
      with_drop = done_at - start;
      sent_drop = p.a.dev->counters().frames_out;
      CHECK(v.page_faults == 0);
      CHECK(v.timeouts >= 1);  // recovered by its retransmission timeout
    }
  }
  INFO("page-fault ACK " << with_ack << " ns, " << sent_ack << " frames; silent drop " << with_drop << " ns, " << sent_drop << " frames");
  CHECK(sent_ack < sent_drop);  // the pause resends nothing the fault did not refuse
  if (f == framing::cell) {
    CHECK(with_ack < with_drop);  // the exact delay: resumed as the page comes in
  } else {
    // RoCE rounds the delay up to the RNR timer table (3 ms: 3.84 ms, IBTA table 45), so a
    // timeout shorter than the fault may catch the page first, at the cost of its resends.
    CHECK(with_ack < 3'840'000 + 100'000);
  }
  }
}

TEST_CASE("the pcap tap: every frame, every ICRC good, readable by the library's reader", "[rnic][tap]") {
  const std::string path = PUSHWIRE_WORKDIR "/rnic-tap.pcap";
  std::system("mkdir -p '" PUSHWIRE_WORKDIR "'");
  {
    pair p;
    REQUIRE(p.fab.tap(path) == errc{});
    const auto [qa, qb] = p.connect(qp_type::rc);
    (void)qb;
    const sge s = p.a.at(0, 3000);
    REQUIRE(p.a.dev->post_send(qa, {.wr_id = 1, .opcode = wr_opcode::rdma_write, .sg_list = std::span(&s, 1),
                                    .remote_addr = p.b.addr(0), .rkey = p.b.mr.rkey}) == errc{});
    p.settle();
    REQUIRE(p.a.poll_send().size() == 1);
  }
  std::ifstream in(path, std::ios::binary);
  const std::vector<char> raw{std::istreambuf_iterator<char>(in), {}};
  const auto file = std::as_bytes(std::span(raw));
  auto r = wire::pcap::reader::open(file);
  REQUIRE(r.has_value());
  int frames = 0;
  for (;;) {
    auto rec = r->next();
    REQUIRE(rec.has_value());
    if (!*rec) break;
    ++frames;
    ib::roce_view v;
    CHECK(ib::inspect((*rec)->data, v, {.crc = wire::crc_check::require}).code == wire::errc{});
  }
  CHECK(frames == 3 + 1);  // three 1024-byte packets and their ACK
}

TEST_CASE("DC: one initiator serves two targets in turn, connecting and disconnecting", "[rnic][dc]") {
  for (const framing f : {framing::roce, framing::cell}) {
  INFO("framing " << wire::enum_name(f));
  loopback_fabric fab(3);
  side a(1, f), b(2, f), c(3, f);
  device_config cfg;
  cfg.ports = {port_n(1, f), port_n(4, f)};
  // a has two ports: one to b, one to c.
  a.dev = std::make_unique<device>(cfg);
  a.pd = *a.dev->alloc_pd();
  a.scq = *a.dev->create_cq(*a.scq_mem);
  a.rcq = *a.dev->create_cq(*a.rcq_mem);
  a.mr = *a.dev->reg_mr(a.pd, a.buf.data(), a.buf.size(), all_access);
  REQUIRE(fab.link(*a.dev, 0, *b.dev, 0) == errc{});
  REQUIRE(fab.link(*a.dev, 1, *c.dev, 0) == errc{});
  const std::uint32_t dci = a.qp(qp_type::dci);
  const std::uint32_t tb = b.qp(qp_type::dct, 256, 0xB0B), tc = c.qp(qp_type::dct, 256, 0xC0C);
  REQUIRE(bring_up(*a.dev, dci, qp_type::dci, 0, {}) == errc{});
  REQUIRE(bring_up(*b.dev, tb, qp_type::dct, 0, {}) == errc{});
  REQUIRE(bring_up(*c.dev, tc, qp_type::dct, 0, {}) == errc{});
  // The DCI's port is its QP port (0); the AH to c names port 1.
  const std::uint32_t to_b = *a.dev->create_ah(a.pd, av_to(*b.dev));
  address_vector vc = av_to(*c.dev);
  vc.port = 1;
  const std::uint32_t to_c = *a.dev->create_ah(a.pd, vc);
  const auto msg = pattern_bytes(3000, 7);
  std::copy(msg.begin(), msg.end(), a.buf.begin());
  const sge s = a.at(0, 3000);
  const sge r = c.at(0x1000, 4096);
  REQUIRE(c.dev->post_recv(tc, {.wr_id = 50, .sg_list = std::span(&r, 1)}) == errc{});
  for (int k = 0; k < 6; ++k) {
    const bool to_b_side = k % 2 == 0;
    send_wr wr{.wr_id = static_cast<std::uint64_t>(k), .opcode = wr_opcode::rdma_write, .sg_list = std::span(&s, 1)};
    wr.ah = to_b_side ? to_b : to_c;
    wr.remote_qpn = to_b_side ? tb : tc;
    wr.dc_key = to_b_side ? 0xB0B : 0xC0C;
    wr.remote_addr = to_b_side ? b.addr(0x10000 * static_cast<std::size_t>(k + 1)) : c.addr(0x10000 * static_cast<std::size_t>(k + 1));
    wr.rkey = to_b_side ? b.mr.rkey : c.mr.rkey;
    if (k == 5) wr.opcode = wr_opcode::send;
    REQUIRE(a.dev->post_send(dci, wr) == errc{});
  }
  fab.run_until(fab.now() + 1'000'000'000);
  const auto sc = a.poll_send();
  REQUIRE(sc.size() == 6);
  for (int k = 0; k < 6; ++k) {
    CHECK(sc[static_cast<std::size_t>(k)].wr_id == static_cast<std::uint64_t>(k));
    CHECK(sc[static_cast<std::size_t>(k)].status == wc_status::success);
  }
  for (int k = 0; k < 5; ++k) {
    side& t = k % 2 == 0 ? b : c;
    CHECK(equal_bytes(t, 0x10000 * static_cast<std::size_t>(k + 1), msg));
  }
  const auto rc = c.poll_recv();
  REQUIRE(rc.size() == 1);
  CHECK(rc[0].byte_len == 3000);
  CHECK(equal_bytes(c, 0x1000, msg));
  }
}

TEST_CASE("DC behind a small transmit queue: the initiator waits for the port it sends from, and every request completes", "[rnic][dc]") {
  // a's DC initiator is on port 0; its requests to c leave from port 1 (their address handle's),
  // behind a 1 Gb/s link and a transmit queue of 8 frames. RoCE: the initiator waits for port 1's
  // room, so nothing it sends is dropped. Cells (18 frames a 4 KiB packet, more than the queue
  // takes): every call still has the initiator's least room, and everything completes.
  for (const framing f : {framing::roce, framing::cell}) {
    INFO("framing " << wire::enum_name(f));
    loopback_fabric fab(5);
    side b(2, f), c(3, f);
    device_config cfg;
    cfg.tx_queue = 8;
    side a(std::vector<port_config>{port_n(1, f), port_n(4, f)}, 1 << 20, 1024, cfg);
    REQUIRE(fab.link(*a.dev, 0, *b.dev, 0) == errc{});
    REQUIRE(fab.link(*a.dev, 1, *c.dev, 0, {.rate = 125e6}) == errc{});
    const std::uint32_t dci = a.qp(qp_type::dci);
    const std::uint32_t tb = b.qp(qp_type::dct, 256, 0xB0B), tc = c.qp(qp_type::dct, 256, 0xC0C);
    REQUIRE(pushwire::rnic::bring_up(*a.dev, dci, {.type = qp_type::dci, .mtu = 4096}) == errc{});
    REQUIRE(pushwire::rnic::bring_up(*b.dev, tb, {.type = qp_type::dct, .mtu = 4096}) == errc{});
    REQUIRE(pushwire::rnic::bring_up(*c.dev, tc, {.type = qp_type::dct, .mtu = 4096}) == errc{});
    const std::uint32_t to_b = *a.dev->create_ah(a.pd, av_to(*b.dev));
    address_vector vc = av_to(*c.dev);
    vc.port = 1;
    const std::uint32_t to_c = *a.dev->create_ah(a.pd, vc);
    const auto msg = pattern_bytes(65536, 9);
    std::copy(msg.begin(), msg.end(), a.buf.begin());
    const sge s = a.at(0, 65536);
    constexpr int writes = 8;
    for (int k = 0; k < writes; ++k) {
      const bool to_c_side = k < writes - 2;  // six to c, then two to b
      side& t = to_c_side ? c : b;
      send_wr wr{.wr_id = static_cast<std::uint64_t>(k), .opcode = wr_opcode::rdma_write, .sg_list = std::span(&s, 1)};
      wr.ah = to_c_side ? to_c : to_b;
      wr.remote_qpn = to_c_side ? tc : tb;
      wr.dc_key = to_c_side ? 0xC0C : 0xB0B;
      wr.remote_addr = t.addr(0x10000 * static_cast<std::size_t>(k % 6 + 1));
      wr.rkey = t.mr.rkey;
      REQUIRE(a.dev->post_send(dci, wr) == errc{});
    }
    const auto sc = run_until_sent(fab, a, writes, 2'000'000'000);
    REQUIRE(sc.size() == writes);
    for (int k = 0; k < writes; ++k) {
      CHECK(sc[static_cast<std::size_t>(k)].wr_id == static_cast<std::uint64_t>(k));
      CHECK(sc[static_cast<std::size_t>(k)].status == wc_status::success);
      CHECK(equal_bytes(k < writes - 2 ? c : b, 0x10000 * static_cast<std::size_t>(k % 6 + 1), msg));
    }
    if (f == framing::roce) CHECK(a.dev->counters().dropped_tx_full == 0);
  }
}

TEST_CASE("a DC initiator that fails behind a small transmit queue completes every request it held", "[rnic][dc]") {
  // 40 WRITEs alternate between b's DCT and a DCT number nobody has, behind a transmit queue of
  // 8 frames. The connect to the missing target is never answered: after its retries the
  // initiator fails, and every request, waiting or sent, completes: the first to the missing
  // target with retry_exceeded, the rest flushed (the QP goes to ERR with the rest still waiting
  // in the initiator, more than a sink of the queue's room holds).
  loopback_fabric fab(7);
  side b(2, framing::roce);
  device_config cfg;
  cfg.tx_queue = 8;
  side a(port_n(1), 1 << 20, 1024, cfg);
  REQUIRE(fab.link(*a.dev, 0, *b.dev, 0) == errc{});
  const std::uint32_t dci = a.qp(qp_type::dci);
  const std::uint32_t tb = b.qp(qp_type::dct, 256, 0xB0B);
  REQUIRE(pushwire::rnic::bring_up(*a.dev, dci, {.type = qp_type::dci, .timeout = 4, .retry_cnt = 1}) == errc{});
  REQUIRE(pushwire::rnic::bring_up(*b.dev, tb, {.type = qp_type::dct}) == errc{});
  const std::uint32_t to_b = *a.dev->create_ah(a.pd, av_to(*b.dev));
  const sge s = a.at(0, 2048);
  constexpr int writes = 40;
  for (int k = 0; k < writes; ++k) {
    send_wr wr{.wr_id = static_cast<std::uint64_t>(k), .opcode = wr_opcode::rdma_write, .sg_list = std::span(&s, 1)};
    wr.ah = to_b;
    wr.remote_qpn = k % 2 ? tb + 100 : tb;  // (tb + 100: no such DCT)
    wr.dc_key = 0xB0B;
    wr.remote_addr = b.addr(0x1000);
    wr.rkey = b.mr.rkey;
    REQUIRE(a.dev->post_send(dci, wr) == errc{});
  }
  const auto sc = run_until_sent(fab, a, writes);
  REQUIRE(sc.size() == writes);
  CHECK(sc[0].status == wc_status::success);
  CHECK(sc[1].status == wc_status::retry_exceeded);
  for (std::size_t k = 2; k < writes; ++k) CHECK(sc[k].status == wc_status::flushed);
}

TEST_CASE("a shared receive queue feeds several QPs", "[rnic][srq]") {
  pair p;
  rq_memory srq_mem(64);
  const std::uint32_t srq = *p.b.dev->create_srq(p.b.pd, srq_mem);
  std::vector<std::uint32_t> qas, qbs;
  for (int i = 0; i < 3; ++i) {
    const std::uint32_t qa = p.a.qp(qp_type::rc);
    p.b.sqs.push_back(std::make_unique<sq_memory>(64));
    const std::uint32_t qb = *p.b.dev->create_qp({.type = qp_type::rc, .pd = p.b.pd, .send_cq = p.b.scq, .recv_cq = p.b.rcq,
                                                  .sq = p.b.sqs.back().get(), .srq = srq});
    REQUIRE(bring_up(*p.a.dev, qa, qp_type::rc, qb, av_to(*p.b.dev)) == errc{});
    REQUIRE(bring_up(*p.b.dev, qb, qp_type::rc, qa, av_to(*p.a.dev)) == errc{});
    qas.push_back(qa);
    qbs.push_back(qb);
  }
  for (int k = 0; k < 6; ++k) {
    const sge r = p.b.at(0x1000 * static_cast<std::size_t>(k + 1), 2048);
    REQUIRE(p.b.dev->post_srq_recv(srq, {.wr_id = static_cast<std::uint64_t>(100 + k), .sg_list = std::span(&r, 1)}) == errc{});
  }
  const auto msg = pattern_bytes(1500, 2);
  std::copy(msg.begin(), msg.end(), p.a.buf.begin());
  const sge s = p.a.at(0, 1500);
  for (int k = 0; k < 6; ++k) REQUIRE(p.a.dev->post_send(qas[static_cast<std::size_t>(k % 3)], {.wr_id = static_cast<std::uint64_t>(k), .opcode = wr_opcode::send, .sg_list = std::span(&s, 1)}) == errc{});
  p.settle();
  CHECK(p.a.poll_send().size() == 6);
  const auto rc = p.b.poll_recv();
  REQUIRE(rc.size() == 6);
  std::vector<std::uint64_t> ids;
  for (const auto& c : rc) {
    CHECK(c.status == wc_status::success);
    CHECK(c.byte_len == 1500);
    ids.push_back(c.wr_id);
    CHECK(equal_bytes(p.b, 0x1000 * static_cast<std::size_t>(c.wr_id - 100 + 1), msg));
  }
  std::sort(ids.begin(), ids.end());
  CHECK(ids == std::vector<std::uint64_t>{100, 101, 102, 103, 104, 105});
}

TEST_CASE("a raw port: the reference answers frames injected from outside, and shows what it sends", "[rnic][raw]") {
  loopback_fabric fab;
  side b(2, framing::roce);
  const std::size_t raw = *fab.raw_port(*b.dev, 0);
  const std::uint32_t qb = b.qp(qp_type::rc);
  const address_vector& peer = another_nic;
  REQUIRE(bring_up(*b.dev, qb, qp_type::rc, 0x99, peer) == errc{});
  // An RDMA WRITE ONLY of 4 bytes, built with the codec as another NIC would send it.
  const std::array<std::byte, 4> payload{std::byte{1}, std::byte{2}, std::byte{3}, std::byte{4}};
  ib::roce_packet f = from_another_nic(b, qb, ib::opcode::rc_rdma_write_only, 0);
  f.bth.a = true;
  f.ext.set<ib::ext::reth>({.va = b.addr(0x100), .r_key = b.mr.rkey, .dmalen = 4});
  f.payload = payload;
  auto frame = built_frame(f);
  fab.inject(raw, frame);
  fab.run_until(fab.now() + 1'000'000);
  CHECK(std::equal(payload.begin(), payload.end(), b.buf.begin() + 0x100));
  // The ACK comes back out of the raw port, to the peer's MAC and QP.
  const auto out = fab.take(raw);
  REQUIRE(out.has_value());
  const auto ack = ib::decode(*out);
  REQUIRE(ack.has_value());
  CHECK(ack->op->id == ib::opcode::rc_acknowledge);
  CHECK(ack->bth.destqp == 0x99);
  CHECK(ack->bth.psn == 0);
  CHECK(ack->eth.dst == peer.dmac);
  CHECK(ack->icrc_state == wire::crc_status::good);
  // A corrupted copy is dropped (bad ICRC) and counted; nothing more is written.
  frame[frame.size() - 10] ^= std::byte{0x40};
  const auto bad = b.dev->counters().dropped_bad_frame;
  fab.inject(raw, frame);
  fab.run_until(fab.now() + 1'000'000);
  CHECK(b.dev->counters().dropped_bad_frame == bad + 1);
  CHECK(!fab.take(raw).has_value());
}

TEST_CASE("cut-through: a WRITE's later packets are placed while their ICRC is computed, a bad one is dropped and its resend places it", "[rnic][raw][cut]") {
  loopback_fabric fab;
  side b(2, framing::roce);
  const std::size_t raw = *fab.raw_port(*b.dev, 0);
  const std::uint32_t qb = b.qp(qp_type::rc);
  REQUIRE(bring_up(*b.dev, qb, qp_type::rc, 0x99, another_nic, 1024) == errc{});
  // A 3 KiB WRITE at 0x1000 from "another NIC": FIRST, MIDDLE, LAST of 1 KiB each.
  constexpr std::size_t at = 0x1000, part = 1024;
  const auto data = pattern_bytes(3 * part, 5);
  auto frame = [&](ib::opcode op, std::uint32_t psn, std::size_t i) {
    ib::roce_packet f = from_another_nic(b, qb, op, psn);
    f.bth.a = op == ib::opcode::rc_rdma_write_last;
    if (op == ib::opcode::rc_rdma_write_first) f.ext.set<ib::ext::reth>({.va = b.addr(at), .r_key = b.mr.rkey, .dmalen = 3 * part});
    f.payload = std::span<const std::byte>(data).subspan(i * part, part);
    return built_frame(f);
  };
  auto send = [&](const std::vector<std::byte>& f) {
    fab.inject(raw, f);
    fab.run_until(fab.now() + 1'000'000);
  };
  const auto first = frame(ib::opcode::rc_rdma_write_first, 0, 0), middle = frame(ib::opcode::rc_rdma_write_middle, 1, 1),
             last = frame(ib::opcode::rc_rdma_write_last, 2, 2);
  const std::size_t payload_at = first.size() - 4 - part;  // no pad: 1 KiB
  REQUIRE(middle.size() - 4 - part == payload_at - 16);    // MIDDLE has no RETH

  // A FIRST whose RETH is corrupted is verified before anything is placed: nothing is written.
  auto bad_first = first;
  bad_first[payload_at - 16 + 2] ^= std::byte{0x01};  // a VA bit
  const auto before = b.buf;
  const auto bad0 = b.dev->counters().dropped_bad_frame;
  send(bad_first);
  CHECK(b.dev->counters().dropped_bad_frame == bad0 + 1);
  CHECK(b.buf == before);
  send(first);
  CHECK(equal_bytes(b, at, std::vector<std::byte>(data.begin(), data.begin() + part)));

  // A MIDDLE with a corrupted payload byte: placed in the same pass as its ICRC, which fails; it
  // is dropped (no ACK, the responder still expects PSN 1), and every byte written lies in its
  // own part of the message. Nothing else changed.
  auto bad_middle = middle;
  bad_middle[middle.size() - 4 - 100] ^= std::byte{0x10};
  const auto after_first = b.buf;
  send(bad_middle);
  CHECK(b.dev->counters().dropped_bad_frame == bad0 + 2);
  CHECK(!fab.take(raw).has_value());
  CHECK(same_outside(b.buf, after_first, at + part, at + 2 * part));
  CHECK(std::equal(bad_middle.end() - 4 - part, bad_middle.end() - 4, b.buf.begin() + at + part));  // (cut through)
  // A MIDDLE whose PSN is corrupted never reaches the cut-through: verified first, nothing written.
  auto bad_psn = middle;
  bad_psn[payload_at - 16 - 1] ^= std::byte{0x02};
  const auto after_bad = b.buf;
  send(bad_psn);
  CHECK(b.dev->counters().dropped_bad_frame == bad0 + 3);
  CHECK(b.buf == after_bad);

  // The resend of PSN 1 and the LAST: the whole message, byte for byte, and one ACK for PSN 2.
  send(middle);
  send(last);
  CHECK(equal_bytes(b, at, data));
  CHECK(b.dev->counters().dropped_by_qp == 0);
  const auto ack = fab.take(raw);
  REQUIRE(ack.has_value());
  const auto a = ib::decode(*ack);
  REQUIRE(a.has_value());
  CHECK(a->op->id == ib::opcode::rc_acknowledge);
  CHECK(a->bth.psn == 2);
  CHECK(same_outside(b.buf, before, at, at + 3 * part));
}

TEST_CASE("IPv6 GIDs, inline data, indirect and pattern keys over the wire", "[rnic][ipv6][keys]") {
  loopback_fabric fab;
  device_config ca, cb;
  ca.ports = {port_n(1)};
  cb.ports = {port_n(2)};
  ca.ports[0].gid = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  cb.ports[0].gid = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
  side a(1, framing::roce, 1 << 20, 64, ca), b(2, framing::roce, 1 << 20, 64, cb);
  REQUIRE(fab.link(*a.dev, 0, *b.dev, 0) == errc{});
  REQUIRE(fab.tap(PUSHWIRE_WORKDIR "/rnic-ipv6.pcap") == errc{});
  const std::uint32_t qa = a.qp(qp_type::rc), qb = b.qp(qp_type::rc);
  REQUIRE(bring_up(*a.dev, qa, qp_type::rc, qb, av_to(*b.dev)) == errc{});
  REQUIRE(bring_up(*b.dev, qb, qp_type::rc, qa, av_to(*a.dev)) == errc{});
  // Inline SEND of 40 bytes.
  const auto small = pattern_bytes(40, 8);
  const sge r = b.at(0x100, 64);
  REQUIRE(b.dev->post_recv(qb, {.wr_id = 1, .sg_list = std::span(&r, 1)}) == errc{});
  REQUIRE(a.dev->post_send(qa, {.wr_id = 1, .opcode = wr_opcode::send, .flags = send_signaled | send_inline, .inline_data = small}) == errc{});
  CHECK(a.dev->post_send(qa, {.wr_id = 9, .opcode = wr_opcode::send, .flags = send_inline, .inline_data = pattern_bytes(max_inline + 1, 0)}) == errc::invalid_argument);
  // A WRITE through an indirect key at b: bytes 0..99 -> b[0x2000..], 100..199 -> b[0x3000..].
  const klm_entry e[] = {{b.mr.rkey, b.addr(0x2000), 100}, {b.mr.rkey, b.addr(0x3000), 100}};
  const memory_region ind = *b.dev->reg_indirect(b.pd, e, all_access);
  const auto msg = pattern_bytes(200, 6);
  std::copy(msg.begin(), msg.end(), a.buf.begin());
  const sge s = a.at(0, 200);
  REQUIRE(a.dev->post_send(qa, {.wr_id = 2, .opcode = wr_opcode::rdma_write, .sg_list = std::span(&s, 1), .remote_addr = 0, .rkey = ind.rkey}) == errc{});
  // A READ through a pattern key at b: 3 repetitions of 16 bytes every 64 bytes from b[0x4000].
  const auto src = pattern_bytes(256, 11);
  std::copy(src.begin(), src.end(), b.buf.begin() + 0x4000);
  const pattern_entry pe[] = {{b.mr.rkey, b.addr(0x4000), 16, 64}};
  const memory_region pat = *b.dev->reg_pattern(b.pd, 3, pe, all_access);
  const sge d = a.at(0x8000, 48);
  REQUIRE(a.dev->post_send(qa, {.wr_id = 3, .opcode = wr_opcode::rdma_read, .sg_list = std::span(&d, 1), .remote_addr = 0, .rkey = pat.rkey}) == errc{});
  fab.run_until(fab.now() + 1'000'000'000);
  const auto sc = a.poll_send();
  REQUIRE(sc.size() == 3);
  for (const auto& c : sc) CHECK(c.status == wc_status::success);
  CHECK(equal_bytes(b, 0x100, small));
  CHECK(equal_bytes(b, 0x2000, std::vector<std::byte>(msg.begin(), msg.begin() + 100)));
  CHECK(equal_bytes(b, 0x3000, std::vector<std::byte>(msg.begin() + 100, msg.end())));
  for (std::size_t rep = 0; rep < 3; ++rep)
    CHECK(std::equal(src.begin() + static_cast<std::ptrdiff_t>(64 * rep), src.begin() + static_cast<std::ptrdiff_t>(64 * rep + 16),
                     a.buf.begin() + static_cast<std::ptrdiff_t>(0x8000 + 16 * rep)));
}

TEST_CASE("armed notification: a callback once, after the next completion", "[rnic][cq]") {
  pair p;
  const auto [qa, qb] = p.connect(qp_type::rc);
  (void)qb;
  int calls = 0;
  std::uint32_t cq_seen = 0;
  REQUIRE(p.a.dev->arm_cq(p.a.scq, [&](std::uint32_t cq) { ++calls, cq_seen = cq; }) == errc{});
  CHECK(p.a.dev->arm_cq(999, [](std::uint32_t) {}) == errc::not_found);
  const sge s = p.a.at(0, 8);
  for (int k = 0; k < 3; ++k)
    REQUIRE(p.a.dev->post_send(qa, {.wr_id = static_cast<std::uint64_t>(k), .opcode = wr_opcode::rdma_write, .sg_list = std::span(&s, 1),
                                    .remote_addr = p.b.addr(0), .rkey = p.b.mr.rkey}) == errc{});
  p.settle();
  CHECK(calls == 1);  // one-shot: re-armed by the consumer
  CHECK(cq_seen == p.a.scq);
  CHECK(p.a.poll_send().size() == 3);
}

TEST_CASE("embedding: frames written into the caller's memory, read from it, notification by function pointer", "[rnic][embed]") {
  for (const framing f : {framing::roce, framing::cell}) {
    INFO(wire::enum_name(f));
    // Two sides, no fabric: the caller moves every frame through its own buffer.
    side a(1, f), b(2, f);
    const std::uint32_t qa = a.qp(qp_type::rc), qb = b.qp(qp_type::rc);
    REQUIRE(bring_up(*a.dev, qa, qp_type::rc, qb, av_to(*b.dev)) == errc{});
    REQUIRE(bring_up(*b.dev, qb, qp_type::rc, qa, av_to(*a.dev)) == errc{});
    struct seen {
      int calls = 0;
      std::uint32_t cq = 0;
    } notified;
    REQUIRE(a.dev->arm_cq(a.scq, cq_notify{[](void* ctx, std::uint32_t cq) {
                                             auto& s = *static_cast<seen*>(ctx);
                                             ++s.calls, s.cq = cq;
                                           },
                                           &notified}) == errc{});
    const auto msg = pattern_bytes(3000, 9);
    std::copy(msg.begin(), msg.end(), a.buf.begin());
    const sge s = a.at(0, 3000);
    REQUIRE(a.dev->post_send(qa, {.wr_id = 5, .opcode = wr_opcode::rdma_write, .sg_list = std::span(&s, 1), .remote_addr = b.addr(64),
                                  .rkey = b.mr.rkey}) == errc{});
    std::array<std::byte, 9216> frame{};
    std::size_t moved = 0;
    auto shuttle = [&](side& from, side& to, time_ns t) {
      from.dev->progress(t);
      while (const std::size_t want = from.dev->next_frame_size(0)) {
        // Too small a buffer: refused, and the frame stays queued.
        CHECK(from.dev->take_frame(0, std::span(frame).first(want - 1)).code() == errc::invalid_argument);
        CHECK(from.dev->next_frame_size(0) == want);
        const auto n = from.dev->take_frame(0, std::span(frame));
        REQUIRE(n.has_value());
        CHECK(*n == want);
        to.dev->receive(0, std::span(frame).first(*n), t);
        ++moved;
      }
      CHECK(*from.dev->take_frame(0, std::span(frame)) == 0u);
    };
    for (time_ns t = 1; t < 10 && notified.calls == 0; ++t) {
      shuttle(a, b, t);
      shuttle(b, a, t);
    }
    CHECK(moved >= 4);  // three WRITE packets (or cells) and an ACK
    CHECK(notified.calls == 1);
    CHECK(notified.cq == a.scq);
    const auto c = a.poll_send();
    REQUIRE(c.size() == 1);
    CHECK(c[0].status == wc_status::success);
    CHECK(std::equal(msg.begin(), msg.end(), b.buf.begin() + 64));
  }
}

TEST_CASE("a read serviced as a write: one 0xC0 request, the data comes back as the responder's RDMA WRITE", "[rnic][read_as_write]") {
  for (const framing f : {framing::roce, framing::cell}) {
    INFO("framing " << wire::enum_name(f));
    pair p(f);
    const std::string path = std::string{PUSHWIRE_WORKDIR "/rnic-raw-"} + std::string{wire::enum_name(f)} + ".pcap";
    std::system("mkdir -p '" PUSHWIRE_WORKDIR "'");
    REQUIRE(p.fab.tap(path) == errc{});
    const auto [qa, qb] = p.connect(qp_type::rc);
    (void)qb;
    const auto src = pattern_bytes(3000, 21);
    std::copy(src.begin(), src.end(), p.b.buf.begin() + 0x7000);
    // A WRITE before and a SEND after: completions stay in order around the served read.
    const sge w = p.a.at(0, 100), sink = p.a.at(0x5000, 3000), r = p.b.at(0x100, 128);
    REQUIRE(p.b.dev->post_recv(qb, {.wr_id = 30, .sg_list = std::span(&r, 1)}) == errc{});
    REQUIRE(p.a.dev->post_send(qa, {.wr_id = 1, .opcode = wr_opcode::rdma_write, .sg_list = std::span(&w, 1), .remote_addr = p.b.addr(0x9000), .rkey = p.b.mr.rkey}) == errc{});
    REQUIRE(p.a.dev->post_send(qa, {.wr_id = 2, .opcode = wr_opcode::read_as_write, .sg_list = std::span(&sink, 1), .remote_addr = p.b.addr(0x7000), .rkey = p.b.mr.rkey}) == errc{});
    REQUIRE(p.a.dev->post_send(qa, {.wr_id = 3, .opcode = wr_opcode::send, .sg_list = std::span(&w, 1)}) == errc{});
    p.settle();
    const auto sc = p.a.poll_send();
    REQUIRE(sc.size() == 3);
    for (std::size_t i = 0; i < 3; ++i) {
      CHECK(sc[i].wr_id == i + 1);
      CHECK(sc[i].status == wc_status::success);
    }
    CHECK(sc[1].opcode == wc_opcode::rdma_read);
    CHECK(sc[1].byte_len == 3000);
    CHECK(equal_bytes(p.a, 0x5000, src));
    CHECK(p.b.poll_send().empty());  // the responder's own WRITE completes nothing on its CQ
    CHECK(p.b.poll_recv().size() == 1);
  }
  // A sink without remote write is refused before anything is sent; a bad source key is NAKed.
  pair p;
  const auto [qa, qb] = p.connect(qp_type::rc);
  (void)qb;
  std::vector<std::byte> local(4096);
  const memory_region ro = *p.a.dev->reg_mr(p.a.pd, local.data(), local.size(), access::local_write);
  const sge bad_sink{ro.addr, 64, ro.lkey}, sink = p.a.at(0x5000, 64);
  REQUIRE(p.a.dev->post_send(qa, {.wr_id = 1, .opcode = wr_opcode::read_as_write, .sg_list = std::span(&bad_sink, 1), .remote_addr = p.b.addr(0), .rkey = p.b.mr.rkey}) == errc{});
  p.settle();
  auto c = p.a.poll_send();
  REQUIRE(c.size() == 1);
  CHECK(c[0].status == wc_status::local_protection_error);
  const auto [qa2, qb2] = p.connect(qp_type::rc);
  (void)qb2;
  const auto snapshot = p.a.buf;
  REQUIRE(p.a.dev->post_send(qa2, {.wr_id = 2, .opcode = wr_opcode::read_as_write, .sg_list = std::span(&sink, 1), .remote_addr = p.b.addr(0), .rkey = make_key(999, 0)}) == errc{});
  p.settle();
  c = p.a.poll_send();
  REQUIRE(c.size() == 1);
  CHECK(c[0].status == wc_status::remote_access_error);
  CHECK(p.a.buf == snapshot);
}

TEST_CASE("a device told it moved resends and NAKs at once: what the move lost is recovered without a timeout", "[rnic][rc][migration]") {
  // a's function "moves": every frame in flight both ways is lost, then a is told (qp_engine::
  // moved). Its requester resends its WRITE; its responder NAKs b's SEND, which b resends. The
  // timeout is 67 ms (code 14); everything completes within 1 ms of the move.
  side a(1, framing::roce), b(2, framing::roce);
  const std::uint32_t qa = a.qp(qp_type::rc), qb = b.qp(qp_type::rc);
  REQUIRE(pushwire::rnic::bring_up(*a.dev, qa, {.type = qp_type::rc, .peer_qpn = qb, .av = av_to(*b.dev), .mtu = 1024, .timeout = 14}) == errc{});
  REQUIRE(pushwire::rnic::bring_up(*b.dev, qb, {.type = qp_type::rc, .peer_qpn = qa, .av = av_to(*a.dev), .mtu = 1024, .timeout = 14}) == errc{});
  const auto data = pattern_bytes(8000, 3);
  std::copy(data.begin(), data.end(), a.buf.begin());
  std::copy(data.begin(), data.begin() + 3000, b.buf.begin());
  const sge w = a.at(0, 8000), s = b.at(0, 3000), r = a.at(0x20000, 4096);
  REQUIRE(a.dev->post_recv(qa, {.wr_id = 9, .sg_list = std::span(&r, 1)}) == errc{});
  REQUIRE(a.dev->post_send(qa, {.wr_id = 1, .opcode = wr_opcode::rdma_write, .sg_list = std::span(&w, 1), .remote_addr = b.addr(0x40000), .rkey = b.mr.rkey}) == errc{});
  REQUIRE(b.dev->post_send(qb, {.wr_id = 2, .opcode = wr_opcode::send, .sg_list = std::span(&s, 1)}) == errc{});
  time_ns t = 1000;
  a.dev->progress(t);
  b.dev->progress(t);
  std::size_t lost = 0;
  for (device* d : {a.dev.get(), b.dev.get()})
    while (d->take_frame(0)) ++lost;
  CHECK(lost == 8 + 3);  // the WRITE's 8 packets, the SEND's 3
  t = 1'000'000;
  CHECK(a.dev->moved(t) == 2);  // a's requester and responder acted
  std::vector<work_completion> sa, sb, ra;
  for (int round = 0; round < 200 && (sa.empty() || sb.empty() || ra.empty()); ++round) {
    t += 5'000;
    a.dev->progress(t);
    b.dev->progress(t);
    for (auto [from, to] : {std::pair{&a, &b}, std::pair{&b, &a}})
      while (auto f = from->dev->take_frame(0)) to->dev->receive(0, *f, t);
    for (auto& x : a.poll_send()) sa.push_back(x);
    for (auto& x : b.poll_send()) sb.push_back(x);
    for (auto& x : a.poll_recv()) ra.push_back(x);
  }
  REQUIRE(sa.size() == 1);
  REQUIRE(sb.size() == 1);
  REQUIRE(ra.size() == 1);
  CHECK(sa[0].status == wc_status::success);
  CHECK(sb[0].status == wc_status::success);
  CHECK(ra[0].byte_len == 3000);
  CHECK(t < 2'000'000);
  CHECK(std::equal(data.begin(), data.end(), b.buf.begin() + 0x40000));
  CHECK(std::equal(data.begin(), data.begin() + 3000, a.buf.begin() + 0x20000));
  CHECK(a.dev->view(qa)->timeouts == 0);
  CHECK(b.dev->view(qb)->timeouts == 0);
  // Moved again with nothing outstanding: the idle requester has nothing to resend; the responder
  // NAKs at its expected PSN, which b, with nothing outstanding, drops as stale.
  CHECK(a.dev->moved(t) == 1);
  a.dev->progress(t);
  while (auto f = a.dev->take_frame(0)) b.dev->receive(0, *f, t);
  b.dev->progress(t);
  CHECK(b.poll_send().empty());
  CHECK(b.dev->view(qb)->state == qp_state::rts);
}

TEST_CASE("a requester waits for its port's room: after a move, 8 QPs' resends lose nothing in the device", "[rnic][rc][migration]") {
  // a's port holds 8 frames (tx_queue) and its wire takes 2 a microsecond. 8 RC QPs WRITE 4 x 16
  // KiB each (512 packets). Halfway, a is told it moved: every requester resends its window at
  // once, and its ACKs open more windows. Each waits for room in the port, so the device drops
  // nothing it counted as sent (dropped_tx_full) and no timer (67 ms) ever fires.
  device_config cfg;
  cfg.tx_queue = 8;
  side a(port_n(1), 1 << 20, 1024, cfg), b(2, framing::roce);
  constexpr int qps = 8, writes = 4;
  constexpr std::uint32_t len = 16384;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> q;
  for (int i = 0; i < qps; ++i) {
    const std::uint32_t qa = a.qp(qp_type::rc), qb = b.qp(qp_type::rc);
    REQUIRE(pushwire::rnic::bring_up(*a.dev, qa, {.type = qp_type::rc, .peer_qpn = qb, .av = av_to(*b.dev), .mtu = 1024, .timeout = 14}) == errc{});
    REQUIRE(pushwire::rnic::bring_up(*b.dev, qb, {.type = qp_type::rc, .peer_qpn = qa, .av = av_to(*a.dev), .mtu = 1024, .timeout = 14}) == errc{});
    q.emplace_back(qa, qb);
  }
  const auto data = pattern_bytes(a.buf.size(), 11);
  std::copy(data.begin(), data.end(), a.buf.begin());
  for (int i = 0; i < qps; ++i)
    for (int w = 0; w < writes; ++w) {
      const std::size_t off = (std::size_t(i) * writes + w) * len;
      const sge s = a.at(off, len);
      REQUIRE(a.dev->post_send(q[i].first, {.wr_id = std::uint64_t(off), .opcode = wr_opcode::rdma_write, .sg_list = std::span(&s, 1),
                                            .remote_addr = b.addr(off), .rkey = b.mr.rkey}) == errc{});
    }
  std::vector<work_completion> done;
  std::size_t frames = 0, moves = 0;
  time_ns t = 1000;
  for (int round = 0; round < 300'000 && done.size() < qps * writes; ++round) {
    t += 1000;
    a.dev->progress(t);
    b.dev->progress(t);
    for (int k = 0; k < 2; ++k)
      if (auto f = a.dev->take_frame(0)) b.dev->receive(0, *f, t), ++frames;
    while (auto f = b.dev->take_frame(0)) a.dev->receive(0, *f, t);
    if (frames >= 256 && !moves) moves = a.dev->moved(t);
    for (auto& x : a.poll_send()) done.push_back(x);
  }
  CHECK(moves > 0);  // the requesters with packets outstanding resend, the responders NAK
  INFO("t " << t << " dropped " << a.dev->counters().dropped_tx_full << " retransmits " << a.dev->counters().retransmits);
  REQUIRE(done.size() == qps * writes);
  for (const auto& c : done) CHECK(c.status == wc_status::success);
  CHECK(a.dev->counters().dropped_tx_full == 0);
  CHECK(a.dev->counters().retransmits > 0);  // the move's resends
  for (const auto& [qa, qb] : q) CHECK(a.dev->view(qa)->timeouts == 0);
  CHECK(t < 10'000'000);
  CHECK(std::equal(data.begin(), data.begin() + qps * writes * len, b.buf.begin()));
}
