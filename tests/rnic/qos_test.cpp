// Congestion control through the device and the loopback fabric's switch (spec/qos.md §2, §3):
// an 8-to-1 incast of RC WRITE flows at 25 Gb/s into a 200 KB switch buffer, with DCQCN and
// without, in virtual time. The flows start together at line rate: their first burst fills the
// buffer in 9 µs, before any CNP can come back, so drops are judged over the last window, as
// goodput and fairness are (spec/qos.md §3).
#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <memory>
#include <numeric>
#include <optional>
#include <unordered_map>
#include <vector>

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
  class_pair(std::optional<flow::qos_map> model, double rate) {
    port_config pa = port_n(1), pb = port_n(2);
    pa.classes = pb.classes = model;
    a = std::make_unique<side>(pa, std::size_t{4} << 20, 4096, device_config{});
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

}  // namespace

TEST_CASE("qos: two saturating RC flows in ETS classes weighted 75/25 share a 25 Gb/s link 75/25 over 1 s", "[rnic][qos][ets]") {
  class_pair p(ets_model(), link_bytes_per_s);
  const std::uint32_t q1 = p.connect(8).first, q2 = p.connect(16).first;
  const std::array<std::uint32_t, 2> qs{q1, q2};
  std::array<std::uint64_t, 2> done{};
  std::uint64_t id = 1;
  std::unordered_map<std::uint32_t, std::size_t> flow_of{{q1, 0}, {q2, 1}};
  auto post = [&](std::size_t f) {
    const sge g = p.a->at(f * 1024 * 1024, write_bytes);
    REQUIRE(p.a->dev->post_send(qs[f], {.wr_id = id++, .opcode = wr_opcode::rdma_write, .sg_list = std::span(&g, 1),
                                        .remote_addr = p.b->addr(f * 1024 * 1024), .rkey = p.b->mr.rkey}) == errc{});
  };
  for (std::size_t f = 0; f < 2; ++f)
    for (std::uint32_t k = 0; k < outstanding; ++k) post(f);
  const time_ns duration = 1'000'000'000, slice = 20'000;
  std::uint64_t most_waiting = 0;
  for (time_ns t = slice; t <= duration; t += slice) {
    p.fab.run_until(t);
    for (const auto& c : p.a->poll_send()) {
      REQUIRE(c.status == wc_status::success);
      const std::size_t f = flow_of.at(c.qp_num);
      done[f] += write_bytes;
      post(f);
    }
    most_waiting = std::max<std::uint64_t>(most_waiting, p.a->dev->class_waiting(0, 1) + p.a->dev->class_waiting(0, 2));
  }
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

/// A 64-byte SEND a → b, posted 5 µs after the last one arrived, 400 times, beside (or not) an
/// RC flow a → b that keeps two 1 MiB WRITEs posted; a's host bus at 128 Gb/s with `policy`,
/// the link without serialization (the bus is the bottleneck): each SEND's time from post to
/// b's receive completion.
std::vector<time_ns> mouse_beside_elephant(bus_policy policy, bool elephant) {
  device_config cfg;
  cfg.bus = {.rate = 128'000'000'000, .latency = 500, .policy = policy, .quantum = 4096};
  loopback_fabric fab(9);
  side a(port_n(1), std::size_t{4} << 20, 4096, cfg), b(port_n(2), std::size_t{4} << 20, 4096, device_config{});
  REQUIRE(fab.link(*a.dev, 0, *b.dev, 0, {.rate = 0, .latency = 500}) == errc{});
  auto connect = [&] {
    const std::uint32_t qa = a.qp(qp_type::rc), qb = b.qp(qp_type::rc);
    REQUIRE(bring_up(*a.dev, qa, qp_type::rc, qb, av_to(*b.dev), 4096) == errc{});
    REQUIRE(bring_up(*b.dev, qb, qp_type::rc, qa, av_to(*a.dev), 4096) == errc{});
    return std::pair{qa, qb};
  };
  const auto mouse = connect(), big = connect();
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
apm_result apm_run(bool tell, bool arm) {
  constexpr std::uint32_t messages = 3000, flight = 16, size = 1024;
  loopback_fabric fab(13);
  device_config cfg;
  side a(std::vector<port_config>{port_n(1), port_n(11)}, std::size_t{4} << 20, 8192, cfg);
  side b(std::vector<port_config>{port_n(2), port_n(12)}, std::size_t{4} << 20, 8192, cfg);
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
    const apm_result r = apm_run(tell, true);
    INFO("received " << r.got[0] << " and " << r.got[1] << "; migrations " << r.migrations[0] << " and " << r.migrations[1]);
    CHECK(r.delivered);
    for (std::size_t i = 0; i < 2; ++i) {
      CHECK(r.migrations[i] == 1);
      CHECK(r.events[i] == 1);  // IBV_EVENT_PATH_MIG
      CHECK(r.attr[i].path_mig_state == mig_state::migrated);
      CHECK(r.attr[i].av.port == 1);
      CHECK(r.attr[i].state == qp_state::rts);
    }
  }
  // not armed: the QPs have no way round, and fail
  const apm_result r = apm_run(true, false);
  CHECK(!r.delivered);
  CHECK(r.migrations[0] + r.migrations[1] == 0);
}
