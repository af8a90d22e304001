// The responder's checks, in rxe's order (PSN, opcode sequence, opcode valid, resources, length,
// R_Key): each bad request gets its NAK (or drop) and an error completion at the requester, and
// not one byte of the responder's memory changes. Then faults: over many seeds every message is
// delivered exactly once, in order per QP, byte for byte.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "harness.hpp"

using namespace pushwire;
using namespace pushwire::test::rnic;

namespace {

struct attack {
  std::string name;
  wr_opcode op;
  std::uint64_t addr;
  std::uint32_t rkey;
  std::uint32_t length;
};

}  // namespace

TEST_CASE("security: bad keys, ranges, PDs and rights are NAKed, fail the request, and write nothing", "[rnic][security]") {
  for (const framing f : {framing::roce, framing::cell}) {
    // Prepare b's keys: a re-registered region (stale variant), a deregistered one, one of
    // another PD, one without remote rights.
    auto scenario = [&](auto&& make) {
      pair p(f);
      const auto [qa, qb] = p.connect(qp_type::rc);
      side& b = p.b;
      std::vector<std::byte> region(4096, std::byte{0x5A}), other(4096, std::byte{0x6B});
      const attack a = make(p, region, other);
      INFO(a.name << " over " << wire::enum_name(f));
      const auto snapshot_b = b.buf;
      const auto snapshot_r = region, snapshot_o = other;
      const auto msg = pattern_bytes(a.length ? a.length : 8, 3);
      std::copy(msg.begin(), msg.end(), p.a.buf.begin());
      const sge s = p.a.at(0, a.length ? a.length : 8);
      REQUIRE(p.a.dev->post_send(qa, {.wr_id = 1, .opcode = a.op, .sg_list = std::span(&s, 1), .remote_addr = a.addr, .rkey = a.rkey}) == errc{});
      // A second request behind it is flushed.
      REQUIRE(p.a.dev->post_send(qa, {.wr_id = 2, .opcode = wr_opcode::rdma_write, .sg_list = std::span(&s, 1),
                                      .remote_addr = b.addr(0), .rkey = b.mr.rkey}) == errc{});
      p.settle();
      const auto c = p.a.poll_send();
      REQUIRE(c.size() == 2);
      CHECK(c[0].status == wc_status::remote_access_error);
      CHECK(c[1].status == wc_status::flushed);
      CHECK(*p.a.dev->query_qp(qa) == qp_state::err);
      CHECK(*p.b.dev->query_qp(qb) == qp_state::err);  // the responder's QP fails too (RC)
      CHECK(p.b.dev->take_events().size() >= 1);
      CHECK(b.buf == snapshot_b);
      CHECK(region == snapshot_r);
      CHECK(other == snapshot_o);
    };
    scenario([](pair& p, std::vector<std::byte>&, std::vector<std::byte>&) {
      return attack{"bad R_Key (no such key)", wr_opcode::rdma_write, p.b.addr(0), make_key(4000, 0), 64};
    });
    scenario([](pair& p, std::vector<std::byte>& region, std::vector<std::byte>&) {
      const auto m = *p.b.dev->reg_mr(p.b.pd, region.data(), region.size(), all_access);
      (void)*p.b.dev->rereg_mr(m.rkey, region.data(), region.size(), all_access);
      return attack{"wrong key variant (re-registered)", wr_opcode::rdma_write, m.addr, m.rkey, 64};
    });
    scenario([](pair& p, std::vector<std::byte>& region, std::vector<std::byte>&) {
      const auto m = *p.b.dev->reg_mr(p.b.pd, region.data(), region.size(), all_access);
      REQUIRE(p.b.dev->dereg_mr(m.rkey) == errc{});
      return attack{"deregistered key", wr_opcode::rdma_write, m.addr, m.rkey, 64};
    });
    scenario([](pair& p, std::vector<std::byte>& region, std::vector<std::byte>&) {
      const auto m = *p.b.dev->reg_mr(p.b.pd, region.data(), region.size(), all_access);
      return attack{"VA past the end", wr_opcode::rdma_write, m.addr + 4096 - 32, m.rkey, 64};
    });
    scenario([](pair& p, std::vector<std::byte>& region, std::vector<std::byte>&) {
      const auto m = *p.b.dev->reg_mr(p.b.pd, region.data(), region.size(), all_access);
      return attack{"VA before the start", wr_opcode::rdma_read, m.addr - 8, m.rkey, 64};
    });
    scenario([](pair& p, std::vector<std::byte>& region, std::vector<std::byte>&) {
      const auto m = *p.b.dev->reg_mr_iova(p.b.pd, region.data(), region.size(), ~std::uint64_t{0} - 4095, all_access);
      return attack{"va + len wrapping", wr_opcode::rdma_write, ~std::uint64_t{0} - 15, m.rkey, 64};
    });
    scenario([](pair& p, std::vector<std::byte>&, std::vector<std::byte>& other) {
      const std::uint32_t pd2 = *p.b.dev->alloc_pd();
      const auto m = *p.b.dev->reg_mr(pd2, other.data(), other.size(), all_access);
      return attack{"key of another PD", wr_opcode::rdma_write, m.addr, m.rkey, 64};
    });
    scenario([](pair& p, std::vector<std::byte>& region, std::vector<std::byte>&) {
      const auto m = *p.b.dev->reg_mr(p.b.pd, region.data(), region.size(), access::local_write | access::remote_read);
      return attack{"no remote write right", wr_opcode::rdma_write, m.addr, m.rkey, 64};
    });
    scenario([](pair& p, std::vector<std::byte>& region, std::vector<std::byte>&) {
      const auto m = *p.b.dev->reg_mr(p.b.pd, region.data(), region.size(), access::local_write | access::remote_write);
      return attack{"no remote read right", wr_opcode::rdma_read, m.addr, m.rkey, 64};
    });
    scenario([](pair& p, std::vector<std::byte>& region, std::vector<std::byte>&) {
      const auto m = *p.b.dev->reg_mr(p.b.pd, region.data(), region.size(), access::local_write | access::remote_write);
      return attack{"no remote atomic right", wr_opcode::atomic_fetch_and_add, m.addr, m.rkey, 8};
    });
    scenario([](pair& p, std::vector<std::byte>& region, std::vector<std::byte>&) {
      // Two packets: the first would fit, the second runs past the key. The first packet's
      // check covers the whole DMA length, so neither is placed.
      const auto m = *p.b.dev->reg_mr(p.b.pd, region.data(), region.size(), all_access);
      return attack{"a WRITE whose second packet runs past the key", wr_opcode::rdma_write, m.addr + 4096 - 1500, m.rkey, 2000};
    });
  }
}

TEST_CASE("security: a DC target refuses another access key, nothing placed", "[rnic][security][dc]") {
  pair p;
  const std::uint32_t dci = p.a.qp(qp_type::dci), dct = p.b.qp(qp_type::dct, 256, 0xC0FFEE);
  REQUIRE(bring_up(*p.a.dev, dci, qp_type::dci, 0, {}) == errc{});
  REQUIRE(bring_up(*p.b.dev, dct, qp_type::dct, 0, {}) == errc{});
  const std::uint32_t ah = *p.a.dev->create_ah(p.a.pd, av_to(*p.b.dev));
  const auto snapshot = p.b.buf;
  const sge s = p.a.at(0, 64);
  REQUIRE(p.a.dev->post_send(dci, {.wr_id = 1, .opcode = wr_opcode::rdma_write, .sg_list = std::span(&s, 1), .remote_addr = p.b.addr(0),
                                   .rkey = p.b.mr.rkey, .ah = ah, .remote_qpn = dct, .dc_key = 0xBAD}) == errc{});
  p.settle();
  const auto c = p.a.poll_send();
  REQUIRE(c.size() == 1);
  CHECK(c[0].status == wc_status::remote_access_error);
  CHECK(p.b.buf == snapshot);
}

TEST_CASE("security: UD with the wrong Q_Key is dropped, no receive consumed, nothing placed", "[rnic][security][ud]") {
  pair p;
  const std::uint32_t ua = p.a.qp(qp_type::ud), ub = p.b.qp(qp_type::ud);
  REQUIRE(bring_up(*p.a.dev, ua, qp_type::ud, 0, {}) == errc{});
  REQUIRE(bring_up(*p.b.dev, ub, qp_type::ud, 0, {}) == errc{});
  const std::uint32_t ah = *p.a.dev->create_ah(p.a.pd, av_to(*p.b.dev));
  const sge r = p.b.at(0x1000, 1024);
  REQUIRE(p.b.dev->post_recv(ub, {.wr_id = 9, .sg_list = std::span(&r, 1)}) == errc{});
  const auto snapshot = p.b.buf;
  const sge s = p.a.at(0, 100);
  const auto dropped = p.b.dev->counters().dropped_by_qp;
  REQUIRE(p.a.dev->post_send(ua, {.wr_id = 1, .opcode = wr_opcode::send, .sg_list = std::span(&s, 1), .ah = ah, .remote_qpn = ub,
                                  .remote_qkey = 0x22222222}) == errc{});
  p.settle();
  CHECK(p.a.poll_send().size() == 1);  // UD completes when sent
  CHECK(p.b.poll_recv().empty());
  CHECK(p.b.dev->counters().dropped_by_qp == dropped + 1);
  CHECK(p.b.buf == snapshot);
  // The right Q_Key is taken.
  REQUIRE(p.a.dev->post_send(ua, {.wr_id = 2, .opcode = wr_opcode::send, .sg_list = std::span(&s, 1), .ah = ah, .remote_qpn = ub,
                                  .remote_qkey = 0x11111111}) == errc{});
  p.settle();
  CHECK(p.b.poll_recv().size() == 1);
}

TEST_CASE("a SEND longer than the receive buffer: NAK invalid request, local length error there, nothing past the buffer", "[rnic][security]") {
  for (const framing f : {framing::roce, framing::cell}) {
    pair p(f);
    const auto [qa, qb] = p.connect(qp_type::rc);
    const sge r = p.b.at(0x1000, 1000);
    REQUIRE(p.b.dev->post_recv(qb, {.wr_id = 9, .sg_list = std::span(&r, 1)}) == errc{});
    const auto snapshot = p.b.buf;
    const sge s = p.a.at(0, 3000);
    REQUIRE(p.a.dev->post_send(qa, {.wr_id = 1, .opcode = wr_opcode::send, .sg_list = std::span(&s, 1)}) == errc{});
    p.settle();
    const auto c = p.a.poll_send();
    REQUIRE(c.size() == 1);
    CHECK(c[0].status == wc_status::remote_invalid_request);
    const auto rc = p.b.poll_recv();
    REQUIRE(rc.size() == 1);
    CHECK(rc[0].status == wc_status::local_length_error);
    // Bytes past the 1000-byte buffer are untouched (the first 1024-byte packet did not fit).
    CHECK(std::equal(snapshot.begin() + 0x1000 + 1000, snapshot.end(), p.b.buf.begin() + 0x1000 + 1000));
    // The responder's QP went to ERR with the event verbs reports an invalid request by.
    CHECK(*p.b.dev->query_qp(qb) == qp_state::err);
    const auto ev = p.b.dev->take_events();
    REQUIRE(ev.size() == 1);
    CHECK(ev[0].type == event_type::qp_request_error);
    CHECK(ev[0].object == qb);
  }
}

TEST_CASE("a request out of its message's opcode sequence: NAK invalid request, qp_request_error, the QP in ERR", "[rnic][security]") {
  pair p;
  const auto [qa, qb] = p.connect(qp_type::rc);
  (void)qa;
  // A WRITE MIDDLE where no WRITE began, with the PSN B expects.
  const flow::packet middle{.opcode = ib::opcode::rc_rdma_write_middle, .psn = 0, .dest_qp = qb, .length = 1024};
  const std::vector<std::byte> payload(1024, std::byte{0x77});
  ib::roce_packet r = flow::to_roce(middle, {});
  r.eth.src = p.a.dev->config().ports[0].mac;
  r.eth.dst = p.b.dev->config().ports[0].mac;
  const auto s4 = ib::v4_of(p.a.dev->config().ports[0].gid), d4 = ib::v4_of(p.b.dev->config().ports[0].gid);
  std::copy(s4.begin(), s4.end(), r.ip4.src.begin());
  std::copy(d4.begin(), d4.end(), r.ip4.dst.begin());
  r.payload = payload;
  std::vector<std::byte> frame(2048);
  const auto n = ib::build(r, frame);
  REQUIRE(n.has_value());
  const auto before = p.b.buf;
  p.b.dev->receive(0, std::span(frame).first(*n), 1);
  p.b.dev->progress(2);
  CHECK(*p.b.dev->query_qp(qb) == qp_state::err);
  const auto ev = p.b.dev->take_events();
  REQUIRE(ev.size() == 1);
  CHECK(ev[0].type == event_type::qp_request_error);
  CHECK(p.b.buf == before);
  // Its NAK went out: invalid request.
  const auto nak = p.b.dev->take_frame(0);
  REQUIRE(nak.has_value());
  ib::roce_view v;
  REQUIRE(ib::inspect(*nak, v).code == wire::errc{});
  CHECK(ib::syndrome_of(flow::from_roce(v).aeth).nak_reason() == ib::nak_code::invalid_request);
}

namespace {

/// Two RC QPs over a link that loses, duplicates, reorders and corrupts 5 % each way, seeds 1..200, in
/// framing f.
void faults_over_seeds(framing f) {
  for (std::uint64_t seed = 1; seed <= 200; ++seed) {
    INFO("framing " << wire::enum_name(f) << " seed " << seed);
    link_config link;
    link.latency = 2000;
    for (auto* d : {&link.a_to_b, &link.b_to_a}) *d = {.loss = 0.05, .duplicate = 0.05, .reorder = 0.05, .corrupt = 0.05};
    device_config cfg;
    cfg.retry_forever = true;  // the question is whether data arrives intact, not whether a QP gives up
    pair p(f, seed, link, cfg);
    std::vector<std::uint32_t> qas, qbs;
    for (int i = 0; i < 2; ++i) {
      const auto [qa, qb] = p.connect(qp_type::rc, 1024);
      qas.push_back(qa);
      qbs.push_back(qb);
    }
    // Per QP: 3 SENDs (receives posted), 3 WRITEs, 1 WRITE_WITH_IMM, and on RoCE a READ and a
    // FETCH_ADD. Sizes vary with the seed.
    std::mt19937 rng(static_cast<std::uint32_t>(seed));
    struct expect {
      std::size_t off;
      std::vector<std::byte> bytes;
    };
    std::vector<expect> at_b, at_a;
    std::vector<std::vector<std::uint64_t>> order(2);
    for (std::size_t i = 0; i < 2; ++i) {
      const std::size_t base = 0x20000 * (i + 1);
      for (int k = 0; k < 9; ++k) {
        const auto len = static_cast<std::uint32_t>(rng() % 5000);
        const std::size_t src = base + 0x2000 * static_cast<std::size_t>(k);
        const auto bytes = pattern_bytes(len, static_cast<std::uint8_t>(seed + i * 16 + static_cast<std::size_t>(k)));
        std::copy(bytes.begin(), bytes.end(), p.a.buf.begin() + static_cast<std::ptrdiff_t>(src));
        const sge s = p.a.at(src, len);
        const std::uint64_t id = i * 100 + static_cast<std::uint64_t>(k);
        send_wr wr{.wr_id = id, .sg_list = std::span(&s, 1)};
        if (k < 3) {
          const sge r = p.b.at(src, 5000);
          REQUIRE(p.b.dev->post_recv(qbs[i], {.wr_id = id, .sg_list = std::span(&r, 1)}) == errc{});
          wr.opcode = wr_opcode::send;
          at_b.push_back({src, bytes});
        } else if (k < 7) {
          if (k == 6) {
            const sge r = p.b.at(0, 0);
            REQUIRE(p.b.dev->post_recv(qbs[i], {.wr_id = id, .sg_list = std::span(&r, 1)}) == errc{});
          }
          wr.opcode = k == 6 ? wr_opcode::rdma_write_with_imm : wr_opcode::rdma_write;
          wr.imm = static_cast<std::uint32_t>(id);
          wr.remote_addr = p.b.addr(src);
          wr.rkey = p.b.mr.rkey;
          at_b.push_back({src, bytes});
        } else if (k == 7) {
          // READ b's bytes at src + 0x1000 (written there first, locally) into a's src + 0x1000.
          std::copy(bytes.begin(), bytes.end(), p.b.buf.begin() + static_cast<std::ptrdiff_t>(src + 0x1000));
          const sge d = p.a.at(src + 0x1000, len);
          wr = {.wr_id = id, .opcode = wr_opcode::rdma_read, .sg_list = std::span(&d, 1), .remote_addr = p.b.addr(src + 0x1000), .rkey = p.b.mr.rkey};
          at_a.push_back({src + 0x1000, bytes});
          REQUIRE(p.a.dev->post_send(qas[i], wr) == errc{});
          order[i].push_back(id);
          continue;
        } else {
          const sge d = p.a.at(src + 0x1800, 8);
          wr = {.wr_id = id, .opcode = wr_opcode::atomic_fetch_and_add, .sg_list = std::span(&d, 1), .remote_addr = p.b.addr(0x100 + 8 * i),
                .rkey = p.b.mr.rkey, .compare_add = 1};
          REQUIRE(p.a.dev->post_send(qas[i], wr) == errc{});
          order[i].push_back(id);
          continue;
        }
        REQUIRE(p.a.dev->post_send(qas[i], wr) == errc{});
        order[i].push_back(id);
      }
    }
    std::vector<work_completion> sends, recvs;
    const bool done = p.fab.run([&] {
      auto s = p.a.poll_send();
      sends.insert(sends.end(), s.begin(), s.end());
      auto r = p.b.poll_recv();
      recvs.insert(recvs.end(), r.begin(), r.end());
      return sends.size() >= order[0].size() + order[1].size() && recvs.size() >= 8;
    }, p.fab.now() + 5'000'000'000ull);
    REQUIRE(done);
    p.settle(1'000'000);
    CHECK(p.a.poll_send().empty());  // exactly once
    CHECK(p.b.poll_recv().empty());
    std::vector<std::vector<std::uint64_t>> got(2);
    for (const auto& c : sends) {
      CHECK(c.status == wc_status::success);
      got[c.wr_id / 100].push_back(c.wr_id);
    }
    CHECK(got == order);
    for (const auto& c : recvs) CHECK(c.status == wc_status::success);
    for (const auto& e : at_b) CHECK(std::equal(e.bytes.begin(), e.bytes.end(), p.b.buf.begin() + static_cast<std::ptrdiff_t>(e.off)));
    for (const auto& e : at_a) {
      const auto m = std::mismatch(e.bytes.begin(), e.bytes.end(), p.a.buf.begin() + static_cast<std::ptrdiff_t>(e.off));
      INFO("READ of " << e.bytes.size() << " bytes at a+" << e.off << " differs from byte " << (m.first - e.bytes.begin()) << ": a has "
           << int(p.a.buf[e.off]) << " want " << int(e.bytes[0]) << ", b has " << int(p.b.buf[e.off]));
      CHECK(m.first == e.bytes.end());
    }
    {
      std::uint64_t c0 = 0, c1 = 0;
      std::memcpy(&c0, p.b.buf.data() + 0x100, 8);
      std::memcpy(&c1, p.b.buf.data() + 0x108, 8);
      CHECK(c0 == 1);  // each FETCH_ADD executed exactly once, even when its request came twice
      CHECK(c1 == 1);
    }
  }
}

}  // namespace

TEST_CASE("faults: over 200 seeds every message arrives exactly once, in order per QP, byte for byte (RoCE)", "[rnic][faults]") {
  faults_over_seeds(framing::roce);
}

TEST_CASE("faults: over 200 seeds every message arrives exactly once, in order per QP, byte for byte (cells)", "[rnic][faults]") {
  faults_over_seeds(framing::cell);
}

namespace {

/// A device of one port, a PD, CQs and 4 KiB of memory, with QPs made on request.
struct node {
  std::unique_ptr<device> dev;
  std::uint32_t pd = 0, cq = 0;
  cq_memory cqm{64};
  std::vector<std::byte> buf = std::vector<std::byte>(4096, std::byte{0x5A});
  memory_region mr{};
  std::vector<std::unique_ptr<sq_memory>> sqs;
  std::vector<std::unique_ptr<rq_memory>> rqs;
  explicit node(const port_config& p) {
    device_config c;
    c.ports = {p};
    dev = std::make_unique<device>(c);
    pd = *dev->alloc_pd();
    cq = *dev->create_cq(cqm);
    mr = *dev->reg_mr(pd, buf.data(), buf.size(), all_access);
  }
  std::uint32_t qp(qp_type t) {
    sqs.push_back(std::make_unique<sq_memory>(16));
    rqs.push_back(std::make_unique<rq_memory>(16));
    return *dev->create_qp({.type = t, .pd = pd, .send_cq = cq, .recv_cq = cq, .sq = sqs.back().get(), .rq = rqs.back().get()});
  }
  /// The frames its port sent, after progress.
  std::vector<frame_bytes> frames() {
    dev->progress(1);
    std::vector<frame_bytes> out;
    while (auto f = dev->take_frame(0)) out.push_back(std::move(*f));
    return out;
  }
};

port_config port_of(std::uint8_t n, framing f, bool v6) {
  port_config p = port_n(n, f);
  if (v6) p.gid = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, n};
  return p;
}

}  // namespace

TEST_CASE("security: an RC or UC QP takes packets from its peer only (source address, and on cells its MAC and QP)", "[rnic][security]") {
  for (const framing f : {framing::roce, framing::cell})
    for (const bool v6 : {false, true}) {
      if (f == framing::cell && v6) continue;  // cells have no IP addresses
      for (const qp_type t : {qp_type::rc, qp_type::uc}) {
        INFO(wire::enum_name(f) << (v6 ? " IPv6 " : " ") << wire::enum_name(t));
        // B's QP is connected to A (port 1); C (port 3) and a second device using A's own
        // address send it a WRITE with B's QPN, PSN and R_Key.
        node a(port_of(1, f, v6)), b(port_of(2, f, v6)), c(port_of(3, f, v6)), twin(port_of(1, f, v6));
        const std::uint32_t qa = a.qp(t), qb = b.qp(t);
        REQUIRE(pushwire::rnic::bring_up(*b.dev, qb, {.type = t, .peer_qpn = qa, .av = address_of(*a.dev)}) == errc{});
        auto write_from = [&](node& n, std::uint32_t len, std::uint8_t fill) {
          const std::uint32_t q = n.qp(t);
          REQUIRE(pushwire::rnic::bring_up(*n.dev, q, {.type = t, .peer_qpn = qb, .av = address_of(*b.dev)}) == errc{});
          std::fill(n.buf.begin(), n.buf.begin() + len, std::byte{fill});
          const sge s{reinterpret_cast<std::uintptr_t>(n.buf.data()), len, n.mr.lkey};
          REQUIRE(n.dev->post_send(q, {.wr_id = 1, .opcode = wr_opcode::rdma_write, .sg_list = std::span(&s, 1),
                                       .remote_addr = b.mr.addr + 128, .rkey = b.mr.rkey}) == errc{});
          std::size_t delivered = 0;
          for (const auto& fr : n.frames()) b.dev->receive(0, fr, 2), ++delivered;
          b.dev->progress(3);
          return delivered;
        };
        const auto before = b.buf;
        // Another address (RoCE) or another MAC (cells): dropped, counted, nothing written.
        REQUIRE(write_from(c, 64, 0xC3) > 0);
        CHECK(b.dev->counters().dropped_wrong_source > 0);
        CHECK(b.buf == before);
        // A WRITE of three packets: none of them placed.
        const auto dropped = b.dev->counters().dropped_wrong_source;
        REQUIRE(write_from(c, 3000, 0xC4) >= 3);
        CHECK(b.dev->counters().dropped_wrong_source >= dropped + 3);
        CHECK(b.buf == before);
        if (f == framing::cell) {
          // A's MAC from a QP that is not A's: dropped too (cells name the sending QP).
          node imposter(port_of(1, f, v6));
          (void)imposter.qp(t);  // so its next QP number is not qa's
          const auto d = b.dev->counters().dropped_wrong_source;
          REQUIRE(write_from(imposter, 64, 0xD5) > 0);
          CHECK(b.dev->counters().dropped_wrong_source > d);
          CHECK(b.buf == before);
        }
        // From the peer's address (and on cells its QP number): written.
        REQUIRE(write_from(twin, 64, 0xA1) > 0);
        CHECK(std::all_of(b.buf.begin() + 128, b.buf.begin() + 192, [](std::byte x) { return x == std::byte{0xA1}; }));
        CHECK(std::equal(b.buf.begin(), b.buf.begin() + 128, before.begin()));
        CHECK(std::equal(b.buf.begin() + 192, b.buf.end(), before.begin() + 192));
      }
    }
}

TEST_CASE("security: a packet to another GID of the QP's port, or the middle of a peer's WRITE from another address, places nothing", "[rnic][security]") {
  // B's port has a second GID; B's RC QP is connected to A from GID 0.
  port_config pb = port_of(2, framing::roce, false);
  pb.extra_gids = {gid_v4(198, 18, 9, 2)};
  node a(port_of(1, framing::roce, false)), b(pb), c(port_of(3, framing::roce, false)), twin(port_of(1, framing::roce, false));
  const std::uint32_t qa = a.qp(qp_type::rc), qb = b.qp(qp_type::rc);
  REQUIRE(pushwire::rnic::bring_up(*b.dev, qb, {.type = qp_type::rc, .peer_qpn = qa, .av = address_of(*a.dev)}) == errc{});
  // The frames of a 3000-byte WRITE to qb at PSN 0 from `n`, sent to B's GID `gid`.
  auto frames_of = [&](node& n, const ib::gid& gid, std::uint8_t fill) {
    const std::uint32_t q = n.qp(qp_type::rc);
    address_vector av = address_of(*b.dev);
    av.dgid = gid;
    REQUIRE(pushwire::rnic::bring_up(*n.dev, q, {.type = qp_type::rc, .peer_qpn = qb, .av = av}) == errc{});
    std::fill(n.buf.begin(), n.buf.begin() + 3000, std::byte{fill});
    const sge s{reinterpret_cast<std::uintptr_t>(n.buf.data()), 3000, n.mr.lkey};
    REQUIRE(n.dev->post_send(q, {.wr_id = 1, .opcode = wr_opcode::rdma_write, .sg_list = std::span(&s, 1), .remote_addr = b.mr.addr,
                                 .rkey = b.mr.rkey}) == errc{});
    return n.frames();
  };
  const auto before = b.buf;
  // From A's address, to B's second GID: B's, but not the one its QP speaks from.
  node twin2(port_of(1, framing::roce, false));
  const auto other = frames_of(twin2, pb.extra_gids[0], 0xB2);
  REQUIRE(other.size() == 3);
  for (const auto& fr : other) b.dev->receive(0, fr, 2);
  CHECK(b.dev->counters().dropped_wrong_source == 3);
  CHECK(b.buf == before);
  // The peer's FIRST packet, then C's MIDDLE with the next PSN (a payload the responder would
  // place while its ICRC is computed, if it came from the peer): nothing of C's is placed.
  const auto peer = frames_of(twin, pb.gid, 0xA1);
  const auto attacker = frames_of(c, pb.gid, 0xC3);
  REQUIRE(peer.size() == 3);
  REQUIRE(attacker.size() == 3);
  b.dev->receive(0, peer[0], 3);
  b.dev->receive(0, attacker[1], 4);
  CHECK(b.dev->counters().dropped_wrong_source == 4);
  CHECK(std::all_of(b.buf.begin(), b.buf.begin() + 1024, [](std::byte x) { return x == std::byte{0xA1}; }));
  CHECK(std::equal(b.buf.begin() + 1024, b.buf.end(), before.begin() + 1024));
  // The peer's own MIDDLE and LAST complete the message.
  b.dev->receive(0, peer[1], 5);
  b.dev->receive(0, peer[2], 6);
  CHECK(std::all_of(b.buf.begin(), b.buf.begin() + 3000, [](std::byte x) { return x == std::byte{0xA1}; }));
}
