// Congestion control through the device and the loopback fabric's switch (spec/qos.md §2, §3):
// an 8-to-1 incast of RC WRITE flows at 25 Gb/s into a 200 KB switch buffer, with DCQCN and
// without, in virtual time. The flows start together at line rate: their first burst fills the
// buffer in 9 µs, before any CNP can come back, so drops are judged over the last window, as
// goodput and fairness are (spec/qos.md §3).
#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <fstream>
#include <iterator>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <unordered_map>
#include <vector>

#include <pushwire/flow/conform.hpp>
#include <pushwire/flow/observer.hpp>
#include <pushwire/wire/pcap.hpp>

#include <pushwire/rnic/qpc.hpp>

#include "../ib/public_frames.hpp"
#include "harness.hpp"
#define PW_INCAST_REQUIRE REQUIRE
#include "incast.hpp"

using namespace pushwire;
using namespace pushwire::test::rnic;

TEST_CASE("qos: an 8-to-1 incast at 25 Gb/s into a 200 KB buffer: DCQCN avoids tail drops, keeps the link busy and shares it", "[rnic][qos]") {
  const time_ns duration = 200'000'000, window = 50'000'000;
  const incast_result with = incast(true, duration, window);
  INFO("with DCQCN: drops " << with.sw.tail_drops << " (last window " << with.window_drops << "), marked " << with.sw.marked << ", CNPs " << with.receiver.cnps_sent << ", goodput "
                            << with.goodput << ", Jain " << with.jain << ", max buffered " << with.sw.max_buffered);
  CHECK(with.window_drops == 0);
  CHECK(with.sw.marked > 0);
  CHECK(with.receiver.cnps_sent > 0);
  CHECK(with.cnps_received == with.receiver.cnps_sent);
  CHECK(with.goodput >= 0.90);
  CHECK(with.jain >= 0.95);
  const incast_result without = incast(false, duration / 4, window / 4);
  INFO("without: drops " << without.sw.tail_drops << " (last window " << without.window_drops << "), goodput " << without.goodput);
  CHECK(without.window_drops > 0);
  CHECK(without.sw.marked == 0);
  CHECK(without.receiver.cnps_sent == 0);
}

TEST_CASE("qos: a CE-marked request gets one CNP per interval, laid out as a ConnectX-4 Lx's", "[rnic][qos][cnp]") {
  // b's RC QP, its peer a raw endpoint (a's address and QP 0x77) that sends it WRITEs marked CE.
  loopback_fabric fab(1);
  device_config cfg;
  cfg.congestion.notify = true;
  cfg.congestion.cnp_interval = 50'000;
  port_config pb = port_n(2);
  pb.ecn = ib::ecn::ect0;
  side b(pb, std::size_t{1} << 20, 64, cfg);
  const auto raw = *fab.raw_port(*b.dev, 0);
  const port_config pa = port_n(1);
  const std::uint32_t qb = b.qp(qp_type::rc);
  REQUIRE(bring_up(*b.dev, qb, {.type = qp_type::rc, .peer_qpn = 0x77, .av = {.port = 0, .dmac = pa.mac, .dgid = pa.gid}, .mtu = 1024}) == errc{});
  const auto data = pattern_bytes(64, 5);
  auto write = [&](std::uint32_t psn, bool ce) {
    flow::packet w{};
    w.opcode = ib::opcode::rc_rdma_write_only;
    w.dest_qp = qb;
    w.psn = psn;
    w.ack_req = true;
    w.va = b.addr(0);
    w.rkey = b.mr.rkey;
    w.dmalen = w.length = 64;
    w.payload = data;
    ib::roce_packet base{};
    base.eth.src = pa.mac;
    base.eth.dst = b.dev->config().ports[0].mac;
    const auto s4 = ib::v4_of(pa.gid), d4 = ib::v4_of(b.dev->config().ports[0].gid);
    std::copy(s4.begin(), s4.end(), base.ip4.src.begin());
    std::copy(d4.begin(), d4.end(), base.ip4.dst.begin());
    base.ip4.dsfield_ecn = ce ? 3 : 2;
    base.udp.srcport = 0xC001;
    const ib::roce_packet r = flow::to_roce(w, base);
    std::vector<std::byte> f(*ib::frame_size(r));
    REQUIRE(ib::build(r, f).has_value());
    fab.inject(raw, f);
  };
  auto cnps = [&] {
    std::vector<frame_bytes> out;
    fab.advance_to(fab.now() + 10'000);
    while (auto f = fab.take(raw))
      if (ib::roce_view v; ib::inspect(*f, v).code == wire::errc{} && v.op->is(ib::op_class::cnp)) out.push_back(*f);
    return out;
  };
  write(0, false);
  CHECK(cnps().empty());  // ECT(0), not CE: no CNP
  write(1, true);
  const auto c = cnps();
  REQUIRE(c.size() == 1);
  write(2, true);  // within the interval: none
  CHECK(cnps().empty());
  fab.advance_to(fab.now() + 50'000);
  write(3, true);
  CHECK(cnps().size() == 1);
  CHECK(b.dev->counters().ce_received == 3);
  CHECK(b.dev->counters().cnps_sent == 2);
  // The CNP against the ConnectX-4 Lx's (tests/ib/public_frames.hpp): IPv4 TOS 0xc2 (DSCP 48,
  // ECT(0)), BTH opcode 0x81, flags 0, P_Key 0xffff, BECN set, PSN 0, 16 zero bytes, a good ICRC;
  // only the addresses, the UDP source port, the IP ID and checksum, and the QP differ.
  using pushwire::test::public_frames::cx4_cnp;
  ib::roce_view ours, theirs;
  REQUIRE(ib::inspect(c[0], ours, {.crc = wire::crc_check::require}).code == wire::errc{});
  REQUIRE(ib::inspect(cx4_cnp, theirs, {.crc = wire::crc_check::require}).code == wire::errc{});
  CHECK(c[0].size() == cx4_cnp.size());
  CHECK(ours.ipv4().dsfield_dscp == theirs.ipv4().dsfield_dscp);
  CHECK(ours.ipv4().dsfield_ecn == theirs.ipv4().dsfield_ecn);
  CHECK(ours.udp().dstport == 4791);
  const auto bo = ours.bth(), bt = theirs.bth();
  CHECK(bo.opcode == bt.opcode);
  CHECK(bo.p_key == bt.p_key);
  CHECK(bo.becn == bt.becn);
  CHECK(bo.fecn == bt.fecn);
  CHECK(bo.psn == bt.psn);
  CHECK(bo.destqp == 0x77);
  CHECK(ours.ip_checksum_ok());
  CHECK(std::equal(c[0].begin() + static_cast<std::ptrdiff_t>(ours.bth_offset) + 12, c[0].end() - 4,
                   cx4_cnp.begin() + static_cast<std::ptrdiff_t>(theirs.bth_offset) + 12));  // the 16 reserved bytes
}

namespace {

/// A port model of two weighted ETS classes (1: 75 %, 2: 25 %; the rest ETS 0) and a strict
/// class 7. DSCP 8 is class 1, DSCP 16 class 2, DSCP 56 class 7, DSCP 0 class 0.
flow::qos_map ets_model() {
  flow::qos_map m;
  for (auto& c : m.tc) c = {};
  m.tc[1].weight = 75, m.tc[2].weight = 25;
  m.tc[7] = {.tsa = flow::tsa::strict};
  return m;
}
constexpr std::uint8_t tclass_of_dscp(std::uint8_t dscp) { return static_cast<std::uint8_t>(dscp << 2); }

/// Sender a and receiver b on one link of `rate` bytes per second and 500 ns, each with `model`
/// (none: no classes).
struct class_pair {
  loopback_fabric fab{3};
  std::unique_ptr<side> a, b;
  class_pair(std::optional<flow::qos_map> model, double rate, const device_config& cfg_a = {}) {
    port_config pa = port_n(1), pb = port_n(2);
    pa.classes = pb.classes = model;
    a = std::make_unique<side>(pa, std::size_t{4} << 20, 4096, cfg_a);
    b = std::make_unique<side>(pb, std::size_t{4} << 20, 4096, device_config{});
    link_config lc;
    lc.rate = rate;
    lc.latency = 500;
    REQUIRE(fab.link(*a->dev, 0, *b->dev, 0, lc) == errc{});
  }
  /// An RC QP pair a → b whose packets carry DSCP `dscp` both ways: a's QP.
  std::pair<std::uint32_t, std::uint32_t> connect(std::uint8_t dscp, std::uint32_t mtu = 4096) {
    const std::uint32_t qa = a->qp(qp_type::rc), qb = b->qp(qp_type::rc);
    address_vector to_b = av_to(*b->dev), to_a = av_to(*a->dev);
    to_b.traffic_class = to_a.traffic_class = tclass_of_dscp(dscp);
    REQUIRE(bring_up(*a->dev, qa, qp_type::rc, qb, to_b, mtu) == errc{});
    REQUIRE(bring_up(*b->dev, qb, qp_type::rc, qa, to_a, mtu) == errc{});
    return {qa, qb};
  }
};

/// Two RC flows a → b, at DSCP 8 (class 1) and DSCP 16 (class 2), each keeping `outstanding`
/// WRITEs of write_bytes posted for `duration`: the bytes each completed. `each()` runs after
/// every 20 µs of it.
template <class Each>
std::array<std::uint64_t, 2> two_flows(class_pair& p, time_ns duration, Each&& each) {
  const std::array<std::uint32_t, 2> qs{p.connect(8).first, p.connect(16).first};
  std::array<std::uint64_t, 2> done{};
  std::uint64_t id = 1;
  auto post = [&](std::size_t f) {
    const sge g = p.a->at(f * 1024 * 1024, write_bytes);
    REQUIRE(p.a->dev->post_send(qs[f], {.wr_id = id++, .opcode = wr_opcode::rdma_write, .sg_list = std::span(&g, 1),
                                        .remote_addr = p.b->addr(f * 1024 * 1024), .rkey = p.b->mr.rkey}) == errc{});
  };
  for (std::size_t f = 0; f < 2; ++f)
    for (std::uint32_t k = 0; k < outstanding; ++k) post(f);
  for (time_ns t = 20'000; t <= duration; t += 20'000) {
    p.fab.run_until(t);
    for (const auto& c : p.a->poll_send(64)) {
      REQUIRE(c.status == wc_status::success);
      const std::size_t f = c.qp_num == qs[0] ? 0 : 1;
      done[f] += write_bytes;
      post(f);
    }
    each();
  }
  return done;
}

}  // namespace

TEST_CASE("qos: two saturating RC flows in ETS classes weighted 75/25 share a 25 Gb/s link 75/25 over 1 s", "[rnic][qos][ets]") {
  class_pair p(ets_model(), link_bytes_per_s);
  std::uint64_t most_waiting = 0;
  const auto done = two_flows(p, 1'000'000'000, [&] {
    most_waiting = std::max<std::uint64_t>(most_waiting, p.a->dev->class_waiting(0, 1) + p.a->dev->class_waiting(0, 2));
  });
  const double total = static_cast<double>(done[0] + done[1]);
  INFO("class 1 " << done[0] << " bytes, class 2 " << done[1] << ", of the link " << total / link_bytes_per_s);
  CHECK(static_cast<double>(done[0]) / total == Approx(0.75).margin(0.03));
  CHECK(total / link_bytes_per_s >= 0.90);
  // The scheduler holds descriptors: while both QPs wait, the port holds at most one built frame
  // per class (its MTU's payload and headers).
  const auto& cs = p.a->dev->class_stats(0);
  CHECK(most_waiting >= 1);
  CHECK(cs[1].max_held <= 4096 + 80);
  CHECK(cs[2].max_held <= 4096 + 80);
  CHECK(cs[1].bytes > 2 * cs[2].bytes);
  CHECK(cs[0].bytes == 0);  // a sends nothing in class 0
}

TEST_CASE("qos: UD QPs' and DC initiators' work requests wait in the class of their address handles", "[rnic][qos][ets]") {
  // An RC flow at DSCP 16 (class 2, 25 %) and a UD QP or a DCI (its own address vector at DSCP
  // 0: class 0, of weight 0) whose requests go through an address handle at DSCP 8 (class 1,
  // 75 %), both saturating for 20 ms. Classed by the handle, the UD QP or DCI takes 75 %; classed
  // by its QP's own address it would wait behind class 2.
  for (const qp_type t : {qp_type::ud, qp_type::dci}) {
    INFO(wire::enum_name(t));
    class_pair p(ets_model(), link_bytes_per_s);
    const std::uint32_t rc = p.connect(16).first;
    const std::uint32_t ua = p.a->qp(t), ub = p.b->qp(t == qp_type::ud ? qp_type::ud : qp_type::dct, 256, 0xB0B);
    REQUIRE(bring_up(*p.a->dev, ua, t, 0, {}) == errc{});
    REQUIRE(bring_up(*p.b->dev, ub, t == qp_type::ud ? qp_type::ud : qp_type::dct, 0, {}) == errc{});
    address_vector to_b = av_to(*p.b->dev);
    to_b.traffic_class = tclass_of_dscp(8);
    const std::uint32_t ah = *p.a->dev->create_ah(p.a->pd, to_b);
    std::uint64_t id = 1;
    auto post_other = [&] {
      const sge g = p.a->at(2u << 20, 4096);
      send_wr wr{.wr_id = id++, .opcode = t == qp_type::ud ? wr_opcode::send : wr_opcode::rdma_write, .sg_list = std::span(&g, 1), .ah = ah,
                 .remote_qpn = ub, .remote_qkey = 0x11111111};
      wr.dc_key = 0xB0B;
      wr.remote_addr = p.b->addr(2u << 20);
      wr.rkey = p.b->mr.rkey;
      REQUIRE(p.a->dev->post_send(ua, wr) == errc{});
    };
    auto post_rc = [&] {
      const sge g = p.a->at(0, write_bytes);
      REQUIRE(p.a->dev->post_send(rc, {.wr_id = id++, .opcode = wr_opcode::rdma_write, .sg_list = std::span(&g, 1), .remote_addr = p.b->addr(0),
                                       .rkey = p.b->mr.rkey}) == errc{});
    };
    for (int k = 0; k < 64; ++k) post_other();
    for (std::uint32_t k = 0; k < outstanding; ++k) post_rc();
    for (time_ns tt = 20'000; tt <= 20'000'000; tt += 20'000) {
      p.fab.run_until(tt);
      for (const auto& c : p.a->poll_send(64)) {
        REQUIRE(c.status == wc_status::success);
        if (c.qp_num == ua) post_other();
        else post_rc();
      }
    }
    const auto& cs = p.a->dev->class_stats(0);
    const double share = static_cast<double>(cs[1].bytes) / static_cast<double>(cs[1].bytes + cs[2].bytes);
    INFO("class 1 (by the handle) " << cs[1].bytes << " bytes, class 2 (RC) " << cs[2].bytes << ", class 0 " << cs[0].bytes);
    CHECK(share == Approx(0.75).margin(0.03));
    CHECK(cs[0].bytes == 0);
  }
}

TEST_CASE("qos: with a host bus, the classes still share 75/25 and a port keeps only a few classed packets on the bus", "[rnic][qos][ets][bus]") {
  device_config cfg;
  cfg.bus = {.rate = 128'000'000'000, .latency = 500, .policy = bus_policy::per_flow, .quantum = 4096};
  class_pair p(ets_model(), link_bytes_per_s, cfg);
  std::size_t most_parked = 0;
  const auto done = two_flows(p, 50'000'000, [&] { most_parked = std::max(most_parked, p.a->dev->bus().waiting()); });
  const double total = static_cast<double>(done[0] + done[1]);
  const auto& cs = p.a->dev->class_stats(0);
  INFO("class 1 " << done[0] << " bytes, class 2 " << done[1] << ", of the link " << total / (link_bytes_per_s * 0.05) << "; held at most "
                  << cs[1].max_held << " and " << cs[2].max_held << "; gathers waiting at most " << most_parked);
  CHECK(static_cast<double>(done[0]) / total == Approx(0.75).margin(0.03));
  CHECK(total / (link_bytes_per_s * 0.05) >= 0.90);
  CHECK(most_parked <= 4);
  CHECK(cs[1].max_held <= 5 * (4096 + 80));  // the 4 on the bus and the one the wire takes
  CHECK(cs[2].max_held <= 5 * (4096 + 80));
}

TEST_CASE("qos: without classes the port holds built frames, with them only descriptors", "[rnic][qos][ets]") {
  // the same two flows for 5 ms: without a class model the QPs' windows are built into frames
  // (payload gathered) ahead of the wire; with one, at most a frame per class is
  for (const bool classes : {false, true}) {
    class_pair p(classes ? std::optional<flow::qos_map>(ets_model()) : std::nullopt, link_bytes_per_s);
    const std::uint32_t q1 = p.connect(8).first, q2 = p.connect(16).first;
    std::uint64_t id = 1;
    for (const std::uint32_t q : {q1, q2})
      for (std::uint32_t k = 0; k < outstanding; ++k) {
        const sge g = p.a->at(0, write_bytes);
        REQUIRE(p.a->dev->post_send(q, {.wr_id = id++, .opcode = wr_opcode::rdma_write, .sg_list = std::span(&g, 1),
                                        .remote_addr = p.b->addr(0), .rkey = p.b->mr.rkey}) == errc{});
      }
    p.fab.run_until(5'000'000);
    const auto& cs = p.a->dev->class_stats(0);
    INFO("classes " << classes << ": most held in class 1 " << cs[1].max_held << ", class 2 " << cs[2].max_held);
    CHECK(cs[1].held == 0);
    CHECK(cs[1].bytes >= std::uint64_t{outstanding} * write_bytes);  // both flows done
    CHECK(cs[2].bytes >= std::uint64_t{outstanding} * write_bytes);
    if (classes) CHECK(cs[1].max_held + cs[2].max_held <= 2 * (4096 + 80));
    else CHECK(cs[1].max_held > 64 * 4096);  // the window of 128 packets, built at once
  }
}

namespace {

/// A 64-byte SEND pingpong a → b → a on an RC QP of DSCP `ping_dscp`, beside `bulk` RC flows
/// a → b of DSCP 0 that each keep four 64 KiB WRITEs posted, over `duration` of virtual time:
/// the pingpong's round trip times.
std::vector<time_ns> pingpong_beside(std::size_t bulk, std::uint8_t ping_dscp, time_ns duration) {
  class_pair p(ets_model(), link_bytes_per_s);
  const auto ping = p.connect(ping_dscp);
  const std::uint32_t pa = ping.first, pb = ping.second;
  std::vector<std::uint32_t> flows;
  for (std::size_t i = 0; i < bulk; ++i) flows.push_back(p.connect(0).first);
  std::uint64_t id = 1;
  const std::size_t ping_at = 3 << 20;
  auto post_recv = [&](side& s, std::uint32_t q) {
    const sge g = s.at(ping_at + 4096, 64);
    REQUIRE(s.dev->post_recv(q, {.wr_id = id++, .sg_list = std::span(&g, 1)}) == errc{});
  };
  auto send = [&](side& s, std::uint32_t q) {
    const sge g = s.at(ping_at, 64);
    REQUIRE(s.dev->post_send(q, {.wr_id = id++, .opcode = wr_opcode::send, .sg_list = std::span(&g, 1)}) == errc{});
  };
  auto write = [&](std::size_t i) {
    const sge g = p.a->at(i * 256 * 1024, write_bytes);
    REQUIRE(p.a->dev->post_send(flows[i], {.wr_id = id++, .opcode = wr_opcode::rdma_write, .sg_list = std::span(&g, 1),
                                           .remote_addr = p.b->addr(i * 256 * 1024), .rkey = p.b->mr.rkey}) == errc{});
  };
  for (int k = 0; k < 4; ++k) post_recv(*p.a, pa), post_recv(*p.b, pb);
  for (std::size_t i = 0; i < bulk; ++i)
    for (std::uint32_t k = 0; k < outstanding; ++k) write(i);
  p.fab.run_until(1'000'000);  // the flows in full swing
  std::vector<time_ns> rtt;
  while (p.fab.now() < duration) {
    const time_ns start = p.fab.now();
    send(*p.a, pa);
    bool back = false;
    REQUIRE(p.fab.run(
        [&] {
          for (const auto& c : p.b->poll_recv(64)) {
            REQUIRE(c.status == wc_status::success);
            post_recv(*p.b, pb), send(*p.b, pb);
          }
          for (const auto& c : p.a->poll_recv(64)) {
            REQUIRE(c.status == wc_status::success);
            post_recv(*p.a, pa), back = true;
          }
          for (const auto& c : p.a->poll_send(64)) {
            REQUIRE(c.status == wc_status::success);
            if (c.qp_num != pa) write(static_cast<std::size_t>(std::find(flows.begin(), flows.end(), c.qp_num) - flows.begin()));
          }
          (void)p.b->poll_send(64);
          return back;
        },
        duration + 10'000'000));
    rtt.push_back(p.fab.now() - start);
  }
  return rtt;
}
time_ns p99(std::vector<time_ns> v) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, v.size() * 99 / 100)];
}

}  // namespace

TEST_CASE("qos: a pingpong in a strict class keeps its p99 within 2x idle beside four saturating flows, and not in their class", "[rnic][qos][strict]") {
  const time_ns duration = 20'000'000;
  const auto idle = pingpong_beside(0, 56, duration);
  const auto strict = pingpong_beside(4, 56, duration);
  const auto shared = pingpong_beside(4, 0, duration);
  INFO("p99: idle " << p99(idle) << " ns (" << idle.size() << " round trips), strict class " << p99(strict) << " ns (" << strict.size()
                    << "), the flows' class " << p99(shared) << " ns (" << shared.size() << ")");
  CHECK(idle.size() > 1000);
  CHECK(strict.size() > 1000);
  CHECK(p99(strict) <= 2 * p99(idle));
  CHECK(p99(shared) > 2 * p99(idle));
}

namespace {

struct cache_run {
  device_counters counters{};
  time_ns took = 0;  ///< virtual time until every WR completed
  bool in_order = true;
};

/// 512 RC QPs a → b in 16 groups of 32; each group's QPs post eight 64-byte WRITEs in turn
/// (QP 0, 1, ..., 31, 0, 1, ...), group after group: 4096 WRs in that doorbell order, with a
/// context cache of 16 and lookahead W; until all complete.
cache_run context_cache_run(std::size_t lookahead) {
  constexpr std::size_t qps = 512, group = 32, rounds = 8;
  device_config cfg;
  cfg.contexts = {.entries = 16, .lookahead = lookahead, .fetch = 1'000};
  loopback_fabric fab(5);
  side a(port_n(1), std::size_t{1} << 20, 8192, cfg), b(port_n(2), std::size_t{1} << 20, 8192, device_config{});
  REQUIRE(fab.link(*a.dev, 0, *b.dev, 0, {}) == errc{});
  std::vector<std::uint32_t> qa(qps);
  for (std::size_t i = 0; i < qps; ++i) {
    qa[i] = a.qp(qp_type::rc, 16);
    const std::uint32_t qb = b.qp(qp_type::rc, 16);
    REQUIRE(bring_up(*a.dev, qa[i], qp_type::rc, qb, av_to(*b.dev), 1024) == errc{});
    REQUIRE(bring_up(*b.dev, qb, qp_type::rc, qa[i], av_to(*a.dev), 1024) == errc{});
  }
  const time_ns start = fab.now();
  std::uint64_t id = 1;
  for (std::size_t g = 0; g < qps / group; ++g)
    for (std::size_t r = 0; r < rounds; ++r)
      for (std::size_t k = 0; k < group; ++k) {
        const std::size_t i = g * group + k;
        const sge s = a.at(i * 64, 64);
        REQUIRE(a.dev->post_send(qa[i], {.wr_id = id++ << 12 | i, .opcode = wr_opcode::rdma_write, .sg_list = std::span(&s, 1),
                                         .remote_addr = b.addr(i * 64), .rkey = b.mr.rkey}) == errc{});
      }
  cache_run out;
  std::vector<std::uint64_t> last(qps, 0);
  std::size_t done = 0;
  REQUIRE(fab.run(
      [&] {
        for (const auto& c : a.poll_send(64)) {
          REQUIRE(c.status == wc_status::success);
          const std::size_t i = c.wr_id & 0xFFF;
          if (c.wr_id <= last[i]) out.in_order = false;  // a QP's completions in its posting order
          last[i] = c.wr_id;
          ++done;
        }
        return done == qps * rounds;
      },
      1'000'000'000));
  out.took = fab.now() - start;
  out.counters = a.dev->counters();
  return out;
}

}  // namespace

TEST_CASE("qos: with a context cache of 16, lookahead W=64 serves 512 interleaved QPs with under 0.2 misses per WR and twice the throughput of W=1", "[rnic][qos][cache]") {
  const cache_run one = context_cache_run(1), ahead = context_cache_run(64);
  const double wrs = 512 * 8;
  INFO("W=1: misses " << one.counters.context_misses << " hits " << one.counters.context_hits << " out of order " << one.counters.out_of_order
                      << " in " << one.took << " ns; W=64: misses " << ahead.counters.context_misses << " hits " << ahead.counters.context_hits
                      << " out of order " << ahead.counters.out_of_order << " in " << ahead.took << " ns");
  CHECK(one.counters.context_misses + one.counters.context_hits == 4096);
  CHECK(ahead.counters.context_misses + ahead.counters.context_hits == 4096);
  CHECK(static_cast<double>(one.counters.context_misses) / wrs >= 0.9);
  CHECK(one.counters.out_of_order == 0);
  CHECK(static_cast<double>(ahead.counters.context_misses) / wrs <= 0.2);
  CHECK(ahead.counters.out_of_order > 0);
  CHECK(static_cast<double>(one.took) >= 2.0 * static_cast<double>(ahead.took));
  CHECK(one.in_order);
  CHECK(ahead.in_order);
}

namespace {

/// Where mouse_beside_elephant's host bus is.
enum class bus_at { sender, receiver, nowhere };

/// A 64-byte SEND a → b, posted 5 µs after the last one arrived, 400 times, beside (or not) an
/// RC flow a → b that keeps two 1 MiB WRITEs posted; a host bus at 128 Gb/s with `policy` on a
/// (its gathers) or on b (its placements), the link without serialization (the bus is the
/// bottleneck); the SEND's QP at DSCP `mouse_dscp`, the WRITEs' at DSCP 0 (trusted: class
/// DSCP >> 3): each SEND's time from post to b's receive completion.
std::vector<time_ns> mouse_beside_elephant(bus_policy policy, bool elephant, bus_at where = bus_at::sender, std::uint8_t mouse_dscp = 0) {
  device_config cfg;
  cfg.bus = {.rate = 128'000'000'000, .latency = 500, .policy = policy, .quantum = 4096};
  loopback_fabric fab(9);
  side a(port_n(1), std::size_t{4} << 20, 4096, where == bus_at::sender ? cfg : device_config{});
  side b(port_n(2), std::size_t{4} << 20, 4096, where == bus_at::receiver ? cfg : device_config{});
  REQUIRE(fab.link(*a.dev, 0, *b.dev, 0, {.rate = 0, .latency = 500}) == errc{});
  auto connect = [&](std::uint8_t dscp) {
    const std::uint32_t qa = a.qp(qp_type::rc), qb = b.qp(qp_type::rc);
    address_vector to = av_to(*b.dev);
    to.traffic_class = static_cast<std::uint8_t>(dscp << 2);
    REQUIRE(bring_up(*a.dev, qa, qp_type::rc, qb, to, 4096) == errc{});
    REQUIRE(bring_up(*b.dev, qb, qp_type::rc, qa, av_to(*a.dev), 4096) == errc{});
    return std::pair{qa, qb};
  };
  const auto mouse = connect(mouse_dscp), big = connect(0);
  std::uint64_t id = 1;
  auto write = [&] {
    const sge g = a.at(0, 1u << 20);
    REQUIRE(a.dev->post_send(big.first, {.wr_id = id++, .opcode = wr_opcode::rdma_write, .sg_list = std::span(&g, 1),
                                         .remote_addr = b.addr(0), .rkey = b.mr.rkey}) == errc{});
  };
  if (elephant) write(), write();
  fab.run_until(200'000);  // the elephant in full swing
  std::vector<time_ns> lat;
  for (int k = 0; k < 400; ++k) {
    const sge r = b.at(3u << 20, 64);
    REQUIRE(b.dev->post_recv(mouse.second, {.wr_id = id++, .sg_list = std::span(&r, 1)}) == errc{});
    const sge g = a.at(3u << 20, 64);
    const time_ns start = fab.now();
    REQUIRE(a.dev->post_send(mouse.first, {.wr_id = id++, .opcode = wr_opcode::send, .sg_list = std::span(&g, 1)}) == errc{});
    bool got = false;
    REQUIRE(fab.run(
        [&] {
          for (const auto& c : b.poll_recv(64)) {
            REQUIRE(c.status == wc_status::success);
            got = true;
          }
          for (const auto& c : a.poll_send(64)) {
            REQUIRE(c.status == wc_status::success);
            if (c.qp_num == big.first) write();
          }
          return got;
        },
        fab.now() + 100'000'000));
    lat.push_back(fab.now() - start);
    fab.advance_to(fab.now() + 5'000);
  }
  return lat;
}

}  // namespace

TEST_CASE("qos: per-flow bus queues keep a 64 B SEND's p99 within 2 quanta of a 1 MiB WRITE flow beside it, and FIFO does not", "[rnic][qos][bus]") {
  const time_ns quantum_time = flow::wire_time(4096, 128'000'000'000);  // 256 ns
  const time_ns idle = p99(mouse_beside_elephant(bus_policy::per_flow, false));
  const time_ns per_flow = p99(mouse_beside_elephant(bus_policy::per_flow, true));
  const time_ns fifo_idle = p99(mouse_beside_elephant(bus_policy::fifo, false));
  const time_ns fifo = p99(mouse_beside_elephant(bus_policy::fifo, true));
  INFO("p99: idle " << idle << " ns, beside the WRITEs with per-flow queues " << per_flow << " ns, with one FIFO " << fifo << " ns (idle " << fifo_idle
                    << "); a quantum's service " << quantum_time << " ns");
  CHECK(fifo_idle == idle);
  CHECK(per_flow - idle <= 2 * quantum_time);
  CHECK(fifo - idle > 10 * quantum_time);
}

TEST_CASE("qos: per-class bus queues keep a SEND in a class of its own within 2 quanta of the WRITEs, and in their class they do not", "[rnic][qos][bus]") {
  const time_ns quantum_time = flow::wire_time(4096, 128'000'000'000);
  for (const bus_at where : {bus_at::sender, bus_at::receiver}) {
    const time_ns idle = p99(mouse_beside_elephant(bus_policy::per_class, false, where, 24));
    const time_ns own = p99(mouse_beside_elephant(bus_policy::per_class, true, where, 24));
    const time_ns shared = p99(mouse_beside_elephant(bus_policy::per_class, true, where, 0));
    INFO((where == bus_at::sender ? "gathers" : "placements") << ": p99 idle " << idle << " ns; beside the WRITEs, the SEND at DSCP 24 (class 3) "
                                                                 << own << " ns, at DSCP 0 (their class) " << shared << " ns");
    CHECK(own - idle <= 2 * quantum_time);
    CHECK(shared - idle > 10 * quantum_time);
  }
}

TEST_CASE("qos: placements on the receiver's host bus: per-flow queues keep the SEND's p99 within 2 quanta of the WRITEs beside it, and FIFO does not", "[rnic][qos][bus]") {
  const time_ns quantum_time = flow::wire_time(4096, 128'000'000'000);
  const time_ns idle = p99(mouse_beside_elephant(bus_policy::per_flow, false, bus_at::receiver));
  const time_ns per_flow = p99(mouse_beside_elephant(bus_policy::per_flow, true, bus_at::receiver));
  const time_ns fifo = p99(mouse_beside_elephant(bus_policy::fifo, true, bus_at::receiver));
  const time_ns unbused = p99(mouse_beside_elephant(bus_policy::fifo, false, bus_at::nowhere));
  INFO("p99: idle " << idle << " ns (no bus: " << unbused << "), beside the WRITEs with per-flow queues " << per_flow << " ns, with one FIFO "
                    << fifo << " ns; a quantum's service " << quantum_time << " ns");
  CHECK(idle >= unbused + 500);  // placement takes time: the bus's latency, and the SEND's bytes
  CHECK(per_flow - idle <= 2 * quantum_time);
  CHECK(fifo - idle > 10 * quantum_time);
}

TEST_CASE("qos: two ports share one pipeline of 25 Gb/s fairly and never exceed it", "[rnic][qos][pipeline]") {
  // a has two ports, each on its own 25 Gb/s link (to b, to c); its pipeline carries 25 Gb/s
  device_config cfg;
  cfg.pipeline_rate = 25'000'000'000;
  loopback_fabric fab(11);
  side a(std::vector<port_config>{port_n(1), port_n(11)}, std::size_t{1} << 20, 1024, cfg);
  side b(port_n(2), std::size_t{1} << 20, 1024, device_config{}), c(port_n(3), std::size_t{1} << 20, 1024, device_config{});
  REQUIRE(fab.link(*a.dev, 0, *b.dev, 0, {.rate = link_bytes_per_s, .latency = 500}) == errc{});
  REQUIRE(fab.link(*a.dev, 1, *c.dev, 0, {.rate = link_bytes_per_s, .latency = 500}) == errc{});
  std::array<std::uint32_t, 2> qs{};
  std::array<side*, 2> peers{&b, &c};
  for (std::size_t i = 0; i < 2; ++i) {
    qs[i] = a.qp(qp_type::rc);
    const std::uint32_t qp = peers[i]->qp(qp_type::rc);
    address_vector to = av_to(*peers[i]->dev);
    to.port = static_cast<std::uint8_t>(i);
    address_vector back = av_to(*a.dev);
    back.dmac = a.dev->config().ports[i].mac, back.dgid = a.dev->config().ports[i].gid;
    REQUIRE(bring_up(*a.dev, qs[i], qp_type::rc, qp, to, 4096) == errc{});
    REQUIRE(bring_up(*peers[i]->dev, qp, qp_type::rc, qs[i], back, 4096) == errc{});
  }
  std::uint64_t id = 1;
  std::array<std::uint64_t, 2> done{};
  auto post = [&](std::size_t i) {
    const sge g = a.at(i * 256 * 1024, write_bytes);
    REQUIRE(a.dev->post_send(qs[i], {.wr_id = id++ << 1 | i, .opcode = wr_opcode::rdma_write, .sg_list = std::span(&g, 1),
                                     .remote_addr = peers[i]->addr(0), .rkey = peers[i]->mr.rkey}) == errc{});
  };
  for (std::size_t i = 0; i < 2; ++i)
    for (std::uint32_t k = 0; k < outstanding; ++k) post(i);
  const time_ns window = 1'000'000;
  std::uint64_t out_before = 0;
  double most = 0;
  std::array<std::uint64_t, 2> mark{};
  for (time_ns t = window; t <= 50'000'000; t += window) {
    for (time_ns u = t - window + 10'000; u <= t; u += 10'000) {  // completions reposted every 10 us
      fab.run_until(u);
      for (const auto& w : a.poll_send()) {
        REQUIRE(w.status == wc_status::success);
        done[w.wr_id & 1] += write_bytes;
        post(w.wr_id & 1);
      }
    }
    std::uint64_t out = 0;  // bytes of the frames the wires took
    for (std::size_t p = 0; p < 2; ++p)
      for (const auto& c : a.dev->class_stats(p)) out += c.bytes;
    most = std::max(most, static_cast<double>(out - out_before) * 8 / (static_cast<double>(window) / 1e9));  // bits/s
    out_before = out;
    if (t == 10'000'000) mark = done;
  }
  const std::vector<std::uint64_t> shares{done[0] - mark[0], done[1] - mark[1]};
  const double goodput = static_cast<double>(shares[0] + shares[1]) * 8 / 0.04;
  INFO("port 0 " << shares[0] << " bytes, port 1 " << shares[1] << " over 40 ms: " << goodput / 1e9 << " Gb/s of WRITEs; the most frames in 1 ms: "
                 << most / 1e9 << " Gb/s");
  CHECK(jain(shares) >= 0.95);
  CHECK(most <= 25e9 * 1.001 + 9216 * 8 / 1e-3);  // the budget, and one burst
  CHECK(goodput >= 0.9 * 25e9 * 4096 / 4170);  // the pipeline busy: each frame carries 4096 of its 4170 bytes
}

TEST_CASE("qos: the receive pipeline passes frames within its packet budget, the ports taking turns, and drops beyond rx_queue", "[rnic][qos][pipeline]") {
  // 1 M packets/s: one packet a microsecond, 8 of burst. Frames that are not RoCE pass the
  // pipeline and are then dropped as bad frames; port 0's are 100 bytes, port 1's 200.
  device_config cfg;
  cfg.pipeline_packets = 1'000'000;
  cfg.rx_queue = 4;
  cfg.ports = {port_n(1), port_n(11)};
  device d(cfg);
  const std::vector<std::byte> f0(100), f1(200);
  for (int i = 0; i < 12; ++i) d.receive(0, f0, 0);
  for (int i = 0; i < 12; ++i) d.receive(1, f1, 0);
  // at 0: 9 of port 0's pass at once (the 9th passes with 8 packets' time ahead: no more than
  // the burst), its other 3 wait; port 1's first 4 wait and its last 8 are dropped
  CHECK(d.counters().pipeline_rx_frames == 9);
  CHECK(d.counters().pipeline_rx_bytes == 900);
  CHECK(d.counters().dropped_rx_full == 8);
  CHECK(d.counters().dropped_bad_frame == 9);
  CHECK(d.rx_waiting() == 7);
  CHECK(!d.busy());
  CHECK(d.next_deadline() == std::optional<time_ns>{1000});  // 9 µs passed, 8 of burst
  // then one a microsecond, port 1 first (port 0 passed last), taking turns
  const std::array<std::uint64_t, 7> sizes{200, 100, 200, 100, 200, 100, 200};
  std::uint64_t bytes = 900;
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    d.progress(static_cast<time_ns>(k + 1) * 1000 - 1);
    CHECK(d.counters().pipeline_rx_frames == 9 + k);  // not before its time
    d.progress(static_cast<time_ns>(k + 1) * 1000);
    bytes += sizes[k];
    CHECK(d.counters().pipeline_rx_frames == 10 + k);
    CHECK(d.counters().pipeline_rx_bytes == bytes);
  }
  CHECK(d.rx_waiting() == 0);
  CHECK(d.counters().dropped_bad_frame == 16);
  CHECK(d.counters().frames_in == 24);
  CHECK(d.next_deadline() == std::nullopt);
}

TEST_CASE("qos: the transmit pipeline's packet budget spaces a port's frames", "[rnic][qos][pipeline]") {
  device_config cfg;
  cfg.pipeline_packets = 1'000'000;
  pair p(framing::roce, 1, {}, cfg);
  const auto [qa, qb] = p.connect(qp_type::rc);
  const sge g = p.a.at(0, 20 * 1024);  // 20 packets of the 1024-byte MTU
  REQUIRE(p.a.dev->post_send(qa, {.wr_id = 1, .opcode = wr_opcode::send, .sg_list = std::span(&g, 1)}) == errc{});
  device& a = *p.a.dev;
  a.progress(0);
  int taken = 0;
  while (a.take_frame(0)) ++taken;
  CHECK(taken == 9);  // 8 packets of burst
  CHECK(a.pending_frames(0) == 0);
  CHECK(a.next_deadline() == std::optional<time_ns>{1000});
  for (time_ns t = 1000; t <= 11'000; t += 1000) {
    a.progress(t - 1);
    CHECK(!a.take_frame(0));
    a.progress(t);
    taken += a.take_frame(0) ? 1 : 0;
  }
  CHECK(taken == 20);
}

TEST_CASE("qos: a UD QP's sends leave from its own port, whatever its address handle's", "[rnic][qos][pipeline]") {
  side a(std::vector<port_config>{port_n(1), port_n(11)}, std::size_t{1} << 16, 64, device_config{});
  const std::uint32_t ud = a.qp(qp_type::ud);
  REQUIRE(bring_up(*a.dev, ud, qp_type::ud, 0, {.port = 1}) == errc{});
  address_vector to = address_of(*a.dev, 0);  // a handle made on port 0
  to.dmac = {0x02, 0, 0, 0, 0, 9}, to.dgid = gid_v4(198, 18, 0, 9);
  const std::uint32_t ah = *a.dev->create_ah(a.pd, to);
  const sge g = a.at(0, 64);
  REQUIRE(a.dev->post_send(ud, {.wr_id = 1, .opcode = wr_opcode::send, .sg_list = std::span(&g, 1), .ah = ah, .remote_qpn = 0x20,
                                .remote_qkey = 0x11111111}) == errc{});
  a.dev->progress(0);
  CHECK(!a.dev->take_frame(0));
  const auto f = a.dev->take_frame(1);
  REQUIRE(f);
  ib::roce_view v;
  REQUIRE(ib::inspect(*f, v).code == wire::errc{});
  CHECK(wire::read<wire::eth_header, "src">(f->data()) == a.dev->config().ports[1].mac);
  CHECK(v.source_gid() == a.dev->config().ports[1].gid);
}

TEST_CASE("qos: with a host bus, frames not for the device never take it, and beyond rx_queue placements waiting are dropped", "[rnic][qos][bus]") {
  device_config cfg;
  cfg.bus = {.rate = 1'000'000'000, .latency = 500};  // 1 Gb/s: a 1 KiB placement takes 8 µs
  cfg.rx_queue = 4;
  pair p(framing::roce, 1, {}, cfg);
  const auto [qa, qb] = p.connect(qp_type::rc);
  for (int i = 0; i < 10; ++i) {
    const sge g = p.b.at(0, 1024);
    REQUIRE(p.b.dev->post_recv(qb, {.wr_id = 1, .sg_list = std::span(&g, 1)}) == errc{});
  }
  const sge g = p.a.at(0, 1024);
  REQUIRE(p.a.dev->post_send(qa, {.wr_id = 1, .opcode = wr_opcode::send, .sg_list = std::span(&g, 1)}) == errc{});
  std::optional<frame_bytes> f;
  for (time_ns t = 0; !f && t < 1'000'000; t += 1000) {
    p.a.dev->progress(t);
    f = p.a.dev->take_frame(0);
  }
  REQUIRE(f);
  device& b = *p.b.dev;
  const time_ns t0 = 2'000'000;
  std::vector<std::byte> other(f->begin(), f->end());
  other[0] = std::byte{0x0E};  // another MAC
  for (int i = 0; i < 3; ++i) b.receive(0, std::vector<std::byte>(20), t0), b.receive(0, other, t0);
  CHECK(b.counters().dropped_bad_frame == 3);
  CHECK(b.counters().dropped_not_mine == 3);
  CHECK(b.placement_bus().waiting() == 0);
  CHECK(b.placement_bus().served() == 0);
  CHECK(b.placement_bus().deadline() == std::nullopt);
  for (int i = 0; i < 10; ++i) b.receive(0, *f, t0);  // the same SEND ten times: 4 wait, 6 dropped
  CHECK(b.counters().dropped_rx_full == 6);
  b.progress(t0 + 1'000'000);
  CHECK(b.counters().dropped_rx_full == 6);
  CHECK(p.b.poll_recv().size() == 1);  // the first is received, the 3 copies placed are duplicates
}

namespace {

/// Two senders, each on its own 25 Gb/s link to one port of a receiver whose receive pipeline
/// carries 25 Gb/s; each sender's RC QP keeps four 64 KiB WRITEs posted for 50 ms.
struct rx_pipeline_result {
  std::vector<std::uint64_t> shares;  ///< WRITE bytes completed per sender over the last 40 ms
  double goodput = 0, most = 0;       ///< bits/s: the WRITEs over 40 ms; the pipeline's busiest 1 ms
  std::uint64_t dropped = 0;          ///< dropped_rx_full at the receiver
  bool intact = true;                 ///< every WRITE completed successfully and its bytes arrived
  std::array<std::uint64_t, 2> posted{}, completed{};  ///< WRITEs per sender, after a drain of 10 ms
};
rx_pipeline_result rx_pipeline_run(std::size_t rx_queue) {
  device_config cfg;
  cfg.pipeline_rate = 25'000'000'000;
  cfg.rx_queue = rx_queue;
  loopback_fabric fab(17);
  side a(std::vector<port_config>{port_n(1), port_n(11)}, std::size_t{1} << 20, 1024, cfg);
  side b(port_n(2), std::size_t{1} << 20, 1024, device_config{}), c(port_n(3), std::size_t{1} << 20, 1024, device_config{});
  REQUIRE(fab.link(*b.dev, 0, *a.dev, 0, {.rate = link_bytes_per_s, .latency = 500}) == errc{});
  REQUIRE(fab.link(*c.dev, 0, *a.dev, 1, {.rate = link_bytes_per_s, .latency = 500}) == errc{});
  std::array<side*, 2> senders{&b, &c};
  std::array<std::uint32_t, 2> qs{};
  for (std::size_t i = 0; i < 2; ++i) {
    const std::vector<std::byte> data = pattern_bytes(write_bytes, static_cast<std::uint8_t>(i + 1));
    std::copy(data.begin(), data.end(), senders[i]->buf.begin());
    qs[i] = senders[i]->qp(qp_type::rc);
    const std::uint32_t qa = a.qp(qp_type::rc);
    address_vector to = av_to(*a.dev);
    to.dmac = a.dev->config().ports[i].mac, to.dgid = a.dev->config().ports[i].gid;
    address_vector back = av_to(*senders[i]->dev);
    back.port = static_cast<std::uint8_t>(i);
    REQUIRE(bring_up(*senders[i]->dev, qs[i], qp_type::rc, qa, to, 4096) == errc{});
    REQUIRE(bring_up(*a.dev, qa, qp_type::rc, qs[i], back, 4096) == errc{});
  }
  rx_pipeline_result r;
  std::uint64_t id = 1;
  std::array<std::uint64_t, 2> done{}, mark{};
  auto post = [&](std::size_t i) {
    const sge g = senders[i]->at(0, write_bytes);
    REQUIRE(senders[i]->dev->post_send(qs[i], {.wr_id = id++, .opcode = wr_opcode::rdma_write, .sg_list = std::span(&g, 1),
                                               .remote_addr = a.addr(i * 256 * 1024), .rkey = a.mr.rkey}) == errc{});
    ++r.posted[i];
  };
  auto poll = [&](std::size_t i) {
    const auto wcs = senders[i]->poll_send();
    for (const auto& w : wcs) r.intact = r.intact && w.status == wc_status::success;
    r.completed[i] += wcs.size();
    done[i] += wcs.size() * write_bytes;
    return wcs.size();
  };
  for (std::size_t i = 0; i < 2; ++i)
    for (std::uint32_t k = 0; k < outstanding; ++k) post(i);
  const time_ns window = 1'000'000;
  std::uint64_t in_before = 0;
  for (time_ns t = window; t <= 50'000'000; t += window) {
    for (time_ns u = t - window + 10'000; u <= t; u += 10'000) {
      fab.run_until(u);
      for (std::size_t i = 0; i < 2; ++i)
        for (std::size_t k = poll(i); k > 0; --k) post(i);
    }
    const std::uint64_t in = a.dev->counters().pipeline_rx_bytes;
    r.most = std::max(r.most, static_cast<double>(in - in_before) * 8 / (static_cast<double>(window) / 1e9));
    in_before = in;
    if (t == 10'000'000) mark = done;
  }
  for (std::size_t i = 0; i < 2; ++i) r.shares.push_back(done[i] - mark[i]);
  r.goodput = static_cast<double>(r.shares[0] + r.shares[1]) * 8 / 0.04;
  fab.run_until(fab.now() + 10'000'000);  // what is in flight completes
  for (std::size_t i = 0; i < 2; ++i) {
    poll(i);
    r.intact = r.intact && std::equal(senders[i]->buf.begin(), senders[i]->buf.begin() + write_bytes, a.buf.begin() + static_cast<std::ptrdiff_t>(i * 256 * 1024));
  }
  r.dropped = a.dev->counters().dropped_rx_full;
  return r;
}

}  // namespace

TEST_CASE("qos: two ports receive through one pipeline of 25 Gb/s fairly and never beyond it, and a short queue drops, counted, and loses nothing", "[rnic][qos][pipeline]") {
  for (const std::size_t q : {std::size_t{1024}, std::size_t{16}}) {
    const rx_pipeline_result r = rx_pipeline_run(q);
    INFO("rx_queue " << q << ": " << r.shares[0] << " and " << r.shares[1] << " bytes over 40 ms, " << r.goodput / 1e9
                     << " Gb/s of WRITEs; the pipeline's busiest 1 ms " << r.most / 1e9 << " Gb/s; " << r.dropped << " frames dropped");
    CHECK(r.intact);
    CHECK(r.completed == r.posted);  // nothing lost: every WRITE posted completed
    CHECK(jain(r.shares) >= 0.95);
    CHECK(r.most <= 25e9 * 1.001 + pipeline::burst_bytes * 8 / 1e-3);
    if (q == 1024) {
      CHECK(r.dropped == 0);  // two windows of 128 packets never fill it
      CHECK(r.goodput >= 0.9 * 25e9 * 4096 / 4170);
    } else {
      CHECK(r.dropped > 0);
      CHECK(r.goodput >= 1e9);  // go-back-N recovers, slowly
    }
  }
}

namespace {

/// Two devices with two ports each, port 0 to port 0 and port 1 to port 1 (25 Gb/s, 500 ns); an
/// RC QP pair whose path is on port 0 and alternate on port 1, armed both ways (when `arm`).
/// Each side keeps 16 SENDs of 1 KiB in flight, numbered, until 3000 arrived each way; at 300 µs
/// port 0's link goes down (`tell`: both devices are told, as by a carrier loss; else the path
/// just stops answering).
struct apm_result {
  bool delivered = false;                 ///< every message arrived exactly once, in order
  std::array<std::uint32_t, 2> got{};     ///< messages received by a and by b
  std::array<std::uint64_t, 2> migrations{};
  std::array<std::size_t, 2> events{};    ///< path_migrated events for the QP
  std::array<qp_attr, 2> attr{};
};
/// (tap: a pcap of every frame delivered, when given)
apm_result apm_run(bool tell, bool arm, const std::string& tap = {}) {
  constexpr std::uint32_t messages = 3000, flight = 16, size = 1024;
  loopback_fabric fab(13);
  if (!tap.empty()) REQUIRE(fab.tap(tap) == errc{});
  device_config cfg, cfg_b;
  cfg_b.qpn_first = 0x40;  // (QP numbers differ, as between two hosts they mostly do: flow::path_watch)
  side a(std::vector<port_config>{port_n(1), port_n(11)}, std::size_t{4} << 20, 8192, cfg);
  side b(std::vector<port_config>{port_n(2), port_n(12)}, std::size_t{4} << 20, 8192, cfg_b);
  for (std::size_t p = 0; p < 2; ++p) REQUIRE(fab.link(*a.dev, p, *b.dev, p, {.rate = link_bytes_per_s, .latency = 500}) == errc{});
  std::array<side*, 2> s{&a, &b};
  std::array<std::uint32_t, 2> q{a.qp(qp_type::rc, 64), b.qp(qp_type::rc, 64)};
  for (std::size_t i = 0; i < 2; ++i) {
    const device& peer = *s[1 - i]->dev;
    address_vector path = address_of(peer, 0), alt = address_of(peer, 1);
    path.port = 0, alt.port = 1;
    REQUIRE(pushwire::rnic::bring_up(*s[i]->dev, q[i], {.type = qp_type::rc, .peer_qpn = q[1 - i], .av = path, .mtu = 1024, .timeout = 8, .retry_cnt = 7}) ==
            errc{});
    if (arm) {
      qp_attr m;
      m.alt_av = alt;
      m.alt_timeout = 8;
      m.path_mig_state = mig_state::rearm;
      REQUIRE(s[i]->dev->modify_qp(q[i], m, qp_attr_mask::alt_path | qp_attr_mask::path_mig_state) == errc{});
      REQUIRE(s[i]->dev->query_qp_attr(q[i])->path_mig_state == mig_state::armed);
    }
  }
  std::array<std::uint32_t, 2> sent{}, got{};
  bool in_order = true;
  std::uint64_t id = 1;
  auto send = [&](std::size_t i) {
    const std::size_t slot = sent[i] % 64;
    std::byte* at = s[i]->buf.data() + slot * size;
    std::memcpy(at, &sent[i], 4);
    const sge g = s[i]->at(slot * size, size);
    REQUIRE(s[i]->dev->post_send(q[i], {.wr_id = id++, .opcode = wr_opcode::send, .sg_list = std::span(&g, 1)}) == errc{});
    ++sent[i];
  };
  auto recv = [&](std::size_t i, std::uint64_t slot) {
    const sge g = s[i]->at((1u << 20) + slot * size, size);
    REQUIRE(s[i]->dev->post_recv(q[i], {.wr_id = slot, .sg_list = std::span(&g, 1)}) == errc{});
  };
  for (std::size_t i = 0; i < 2; ++i) {
    for (std::uint64_t k = 0; k < 64; ++k) recv(i, k);
    for (std::uint32_t k = 0; k < flight; ++k) send(i);
  }
  bool cut = false;
  const bool ok = fab.run(
      [&] {
        if (!cut && fab.now() >= 300'000) {
          cut = true;
          REQUIRE(fab.set_link_up(*a.dev, 0, false) == errc{});
          if (tell) a.dev->set_port_up(0, false), b.dev->set_port_up(0, false);
        }
        for (std::size_t i = 0; i < 2; ++i) {
          for (const auto& c : s[i]->poll_recv(64)) {
            if (c.status != wc_status::success) return true;  // (judged below)
            std::uint32_t n = 0;
            std::memcpy(&n, s[i]->buf.data() + (1u << 20) + c.wr_id * size, 4);
            if (n != got[i]) in_order = false;
            ++got[i];
            recv(i, c.wr_id);
          }
          for (const auto& c : s[i]->poll_send(64)) {
            if (c.status != wc_status::success) return true;
            if (sent[i] < messages) send(i);
          }
        }
        return got[0] >= messages && got[1] >= messages;
      },
      2'000'000'000);
  apm_result r;
  r.delivered = ok && in_order && got[0] == messages && got[1] == messages;
  r.got = got;
  for (std::size_t i = 0; i < 2; ++i) {
    r.migrations[i] = s[i]->dev->counters().path_migrations;
    for (const auto& e : s[i]->dev->take_events()) r.events[i] += e.type == event_type::path_migrated && e.object == q[i];
    r.attr[i] = *s[i]->dev->query_qp_attr(q[i]);
  }
  return r;
}

}  // namespace

TEST_CASE("qos: armed RC QPs move to their alternate path when port 0's link goes down, every message delivered once", "[rnic][qos][apm]") {
  for (const bool tell : {true, false}) {
    INFO((tell ? "the ports are told the link went down" : "the path just stops answering"));
    const std::string tap = std::string{PUSHWIRE_WORKDIR} + (tell ? "/apm-told.pcap" : "/apm-silent.pcap");
    const apm_result r = apm_run(tell, true, tap);
    INFO("received " << r.got[0] << " and " << r.got[1] << "; migrations " << r.migrations[0] << " and " << r.migrations[1]);
    CHECK(r.delivered);
    for (std::size_t i = 0; i < 2; ++i) {
      CHECK(r.migrations[i] == 1);
      CHECK(r.events[i] == 1);  // IBV_EVENT_PATH_MIG
      CHECK(r.attr[i].path_mig_state == mig_state::migrated);
      CHECK(r.attr[i].av.port == 1);
      CHECK(r.attr[i].state == qp_state::rts);
    }
    // The capture: MigReq clear on port 0's addresses (198.18.0.1, .2), set on port 1's (.11,
    // .12), read from the bytes (IPv4 without options: the BTH's second byte is frame byte 43);
    // the conformance checker finds no violation, and sees both QPs migrate.
    std::ifstream in(tap, std::ios::binary);
    const std::vector<char> raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto rd = wire::pcap::reader::open(std::as_bytes(std::span<const char>(raw)));
    REQUIRE(rd);
    flow::conformance judge;
    flow::observer obs;
    std::vector<flow::violation> vs;
    std::array<std::uint64_t, 2> frames{}, wrong{};
    std::size_t moves = 0;
    std::uint64_t n = 0;
    for (auto rec = rd->next(); rec && *rec; rec = rd->next()) {
      const auto f = (*rec)->data;
      ++n;
      for (const auto& v : judge.check(n, (*rec)->ts_ns, f)) vs.push_back(v);
      moves += obs.observe(n, (*rec)->ts_ns, f).migrated_from.has_value();
      REQUIRE(f.size() > 43);
      const bool alt = std::to_integer<unsigned>(f[29]) > 10;  // the source address's last byte
      const bool mig = (std::to_integer<unsigned>(f[43]) & 0x40) != 0;
      ++frames[alt];
      wrong[alt] += mig != alt;
    }
    for (const auto& v : judge.finish()) vs.push_back(v);
    INFO("frames on port 0's path " << frames[0] << ", on port 1's " << frames[1]);
    CHECK(frames[0] > 0);
    CHECK(frames[1] > 0);
    CHECK(wrong[0] == 0);
    CHECK(wrong[1] == 0);
    CHECK(moves == 2);
    for (const auto& v : vs) INFO("violation at frame " << v.frame << ": " << v.expected << " / " << v.seen);
    CHECK(vs.empty());
  }
  // not armed: the QPs have no way round, and fail
  const apm_result r = apm_run(true, false);
  CHECK(!r.delivered);
  CHECK(r.migrations[0] + r.migrations[1] == 0);
}

TEST_CASE("qos: the packed QP context holds every attribute a cache entry decodes, big-endian at fixed offsets", "[rnic][qos][cache]") {
  static_assert(qpc_size == 4 + 9 * 4 + 2 + 7 + 2 * 31 + 2 * 12);  // 135
  std::mt19937_64 rng(5);
  sq_memory sq(64);
  rq_memory rq(32);
  for (int round = 0; round < 200; ++round) {
    const auto r8 = [&] { return static_cast<std::uint8_t>(rng()); };
    const auto r24 = [&] { return static_cast<std::uint32_t>(rng() & 0xFFFFFF); };
    qp_init_attr init{.type = static_cast<qp_type>(2 + rng() % 3), .pd = static_cast<std::uint32_t>(rng()), .send_cq = 7, .recv_cq = 9,
                      .sq = &sq, .rq = round % 2 ? &rq : nullptr};
    qp_attr a;
    a.access_flags = static_cast<rnic::access>(rng() & 0xF);
    a.port = r8() & 1;
    a.qkey = static_cast<std::uint32_t>(rng());
    a.path_mtu = 256u << (rng() % 5);
    a.timeout = r8() & 31, a.retry_cnt = r8() & 7, a.rnr_retry = r8() & 7, a.min_rnr_timer = r8() & 31;
    a.rq_psn = r24(), a.sq_psn = r24(), a.dest_qp_num = r24();
    a.max_rd_atomic = r8() & 15, a.max_dest_rd_atomic = r8() & 15, a.alt_timeout = r8() & 31;
    a.path_mig_state = static_cast<mig_state>(rng() % 3);
    for (address_vector* v : {&a.av, &a.alt_av}) {
      v->port = r8() & 1, v->sgid_index = r8(), v->hop_limit = r8(), v->traffic_class = r8(), v->sl = r8() & 15;
      v->flow_label = static_cast<std::uint32_t>(rng() & 0xFFFFF);
      for (auto& b : v->dmac) b = r8();
      for (auto& b : v->dgid) b = r8();
    }
    const std::uint32_t qpn = r24();
    const packed_qpc p = pack_qpc(qpn, init, qp_state::rts, a);
    // the QP number at bytes 4..7, big-endian (an independent reading of the layout)
    CHECK(std::to_integer<std::uint32_t>(p[4]) == 0);
    CHECK((std::to_integer<std::uint32_t>(p[5]) << 16 | std::to_integer<std::uint32_t>(p[6]) << 8 | std::to_integer<std::uint32_t>(p[7])) == qpn);
    const auto c = unpack_qpc(p);
    REQUIRE(c);
    CHECK(c->qpn == qpn);
    CHECK(c->type == init.type);
    CHECK(c->state == qp_state::rts);
    CHECK(c->attr.av == a.av);
    CHECK(c->attr.alt_av == a.alt_av);
    CHECK(c->attr.access_flags == a.access_flags);
    CHECK(c->attr.qkey == a.qkey);
    CHECK(c->attr.path_mtu == a.path_mtu);
    CHECK(c->attr.timeout == a.timeout);
    CHECK(c->attr.retry_cnt == a.retry_cnt);
    CHECK(c->attr.rnr_retry == a.rnr_retry);
    CHECK(c->attr.min_rnr_timer == a.min_rnr_timer);
    CHECK(c->attr.rq_psn == a.rq_psn);
    CHECK(c->attr.sq_psn == a.sq_psn);
    CHECK(c->attr.dest_qp_num == a.dest_qp_num);
    CHECK(c->attr.max_rd_atomic == a.max_rd_atomic);
    CHECK(c->attr.max_dest_rd_atomic == a.max_dest_rd_atomic);
    CHECK(c->attr.alt_timeout == a.alt_timeout);
    CHECK(c->attr.path_mig_state == a.path_mig_state);
    CHECK(c->attr.port == a.port);
    CHECK(c->sq_ring == reinterpret_cast<std::uintptr_t>(&sq));
    CHECK(c->sq_depth == 64);
    CHECK(c->rq_ring == (round % 2 ? reinterpret_cast<std::uintptr_t>(&rq) : 0));
    CHECK(c->rq_depth == (round % 2 ? 32u : 0u));
  }
}
