// net::udp_port (spec/net.md): two reference RNICs in one process, each port on its own UDP
// socket on loopback (127.0.79.x, port 4791), driven in real time. An RC WRITE with immediate
// and SENDs cross; the frames the kernel carries verify (ICRC over DF, identification 0);
// pp endpoints move packets both ways under injected loss, duplication, reordering and
// corruption; garbage on the port changes nothing.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include <pushwire/ib/roce.hpp>
#include <pushwire/net/loop.hpp>
#include <pushwire/net/udp.hpp>
#include <pushwire/pp/endpoint.hpp>
#include <pushwire/rnic/connect.hpp>

using namespace pushwire;

namespace {

rnic::port_config port_at(std::uint8_t host) {
  rnic::port_config p;
  p.mac = {0x02, 0, 0, 0, 0x79, host};
  p.gid = rnic::gid_v4(127, 0, 79, host);
  p.udp_sport = ib::roce_port;  // the socket's own port
  return p;
}

/// One device, its UDP socket, and the loop between them (busy-polled here).
struct node {
  rnic::device dev;
  net::udp_port udp;
  net::device_loop loop{dev};
  node(std::uint8_t host, const rnic::direction_faults& f = {}, std::uint64_t seed = 1, bool gso = false, bool gro = true,
       std::uint32_t backlog = 1024)
      : dev({.ports = {port_at(host)}, .retry_forever = true}),
        udp({.address = {127, 0, 79, host}, .backlog = backlog, .faults = f, .seed = seed, .gso = gso, .gro = gro}) {
    loop.attach(0, udp);
  }
  void step() { (void)loop.turn(net::monotonic_ns()); }
};

/// Steps both nodes (and `also`) until done() or `seconds` of real time pass.
bool run(node& a, node& b, const std::function<bool()>& done, double seconds = 20, const std::function<void()>& also = {}) {
  const auto end = net::monotonic_ns() + static_cast<rnic::time_ns>(seconds * 1e9);
  while (net::monotonic_ns() < end) {
    a.step();
    b.step();
    if (also) also();
    if (done()) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("udp: an RC WRITE with immediate and SENDs between two RNICs over loopback sockets", "[net]") {
  node a(1), b(2);
  REQUIRE(a.udp.ok());
  REQUIRE(b.udp.ok());
  rnic::cq_memory acq(64), bcq(64);
  rnic::sq_memory asq(64), bsq(64);
  rnic::rq_memory arq(64), brq(64);
  const auto apd = *a.dev.alloc_pd(), bpd = *b.dev.alloc_pd();
  std::vector<std::byte> src(10000), dst(10000), rbuf(256);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::byte>(i * 13);
  const auto smr = *a.dev.reg_mr(apd, src.data(), src.size(), rnic::access::local_write);
  const auto dmr = *b.dev.reg_mr(bpd, dst.data(), dst.size(), rnic::access::local_write | rnic::access::remote_write);
  const auto rmr = *b.dev.reg_mr(bpd, rbuf.data(), rbuf.size(), rnic::access::local_write);
  const auto ac = *a.dev.create_cq(acq), bc = *b.dev.create_cq(bcq);
  const auto qa = *a.dev.create_qp({.pd = apd, .send_cq = ac, .recv_cq = ac, .sq = &asq, .rq = &arq});
  const auto qb = *b.dev.create_qp({.pd = bpd, .send_cq = bc, .recv_cq = bc, .sq = &bsq, .rq = &brq});
  REQUIRE(rnic::bring_up(a.dev, qa, {.peer_qpn = qb, .av = rnic::address_of(b.dev), .mtu = 1024}) == rnic::errc{});
  REQUIRE(rnic::bring_up(b.dev, qb, {.peer_qpn = qa, .av = rnic::address_of(a.dev), .mtu = 1024}) == rnic::errc{});
  const rnic::sge none{}, r{rmr.addr, 256, rmr.lkey}, s{smr.addr, 10000, smr.lkey}, small{smr.addr, 100, smr.lkey};
  REQUIRE(b.dev.post_recv(qb, {.wr_id = 1, .sg_list = {&none, 1}}) == rnic::errc{});
  REQUIRE(b.dev.post_recv(qb, {.wr_id = 2, .sg_list = {&r, 1}}) == rnic::errc{});
  REQUIRE(a.dev.post_send(qa, {.wr_id = 10, .opcode = rnic::wr_opcode::rdma_write_with_imm, .sg_list = {&s, 1}, .imm = 0x07050100,
                               .remote_addr = dmr.addr, .rkey = dmr.rkey}) == rnic::errc{});
  REQUIRE(a.dev.post_send(qa, {.wr_id = 11, .opcode = rnic::wr_opcode::send, .sg_list = {&small, 1}}) == rnic::errc{});
  std::vector<rnic::work_completion> got_a, got_b;
  rnic::work_completion wc[8];
  REQUIRE(run(a, b, [&] {
    for (std::size_t i = 0, n = acq.poll(wc); i < n; ++i) got_a.push_back(wc[i]);
    for (std::size_t i = 0, n = bcq.poll(wc); i < n; ++i) got_b.push_back(wc[i]);
    return got_a.size() == 2 && got_b.size() == 2;
  }));
  CHECK(got_a[0].status == rnic::wc_status::success);
  CHECK(got_a[1].status == rnic::wc_status::success);
  CHECK(got_b[0].with_imm);
  CHECK(got_b[0].imm == 0x07050100);
  CHECK(got_b[0].byte_len == 10000);
  CHECK(got_b[1].byte_len == 100);
  CHECK(dst == src);
  CHECK(std::equal(rbuf.begin(), rbuf.begin() + 100, src.begin()));
  CHECK(a.dev.counters().dropped_bad_frame == 0);  // every ICRC verified as the kernel carried it
  CHECK(b.dev.counters().dropped_bad_frame == 0);
  CHECK(a.udp.stats().sent >= 10);  // 10 packets of 1024 bytes, and the SEND
}

TEST_CASE("udp: a device's frame and its datagram rebuilt by wrap() have the same ICRC-covered bytes", "[net]") {
  // What the kernel does to a datagram (DF, identification 0) is what wrap() rebuilds: a frame
  // the device built verifies after the round trip through a datagram.
  ib::roce_packet p{};
  p.eth.src = {2, 0, 0, 0, 0, 1};
  p.eth.dst = {2, 0, 0, 0, 0, 2};
  p.ip4.src = {198, 18, 0, 1};
  p.ip4.dst = {198, 18, 0, 2};
  p.ip4.flags_df = true;
  p.udp.srcport = 0xC123;
  p.bth.opcode = static_cast<std::uint8_t>(ib::opcode::rc_send_only);
  p.bth.destqp = 0x12;
  const std::vector<std::byte> payload(77, std::byte{0x5A});
  p.payload = payload;
  std::vector<std::byte> f(*ib::frame_size(p));
  REQUIRE(ib::build(p, f).has_value());
  std::vector<std::byte> g(f.size());
  std::copy(f.begin() + net::udp_port::headers, f.end(), g.begin() + net::udp_port::headers);
  net::udp_port::wrap(g, {2, 0, 0, 0, 0, 2}, {198, 18, 0, 1}, 0xC123, {198, 18, 0, 2}, ib::roce_port);
  ib::roce_view v;
  REQUIRE(ib::inspect(g, v, {.crc = wire::crc_check::require}).code == wire::errc{});
  // ... and a flipped identification would not verify
  g[wire::eth_header_size + 4] ^= std::byte{1};
  CHECK(ib::inspect(g, v, {.crc = wire::crc_check::require}).code == wire::errc::icrc_mismatch);
}

TEST_CASE("udp: pp endpoints over sockets with injected faults move every packet once, in order", "[net][pp]") {
  const rnic::direction_faults f{.loss = 0.03, .duplicate = 0.02, .reorder = 0.02, .corrupt = 0.01, .max_reorder = 200'000};
  node a(3, f, 7), b(4, f, 8);
  REQUIRE(a.udp.ok());
  REQUIRE(b.udp.ok());
  std::vector<std::vector<std::byte>> to_b, to_a;
  pp::endpoint host(a.dev, {}, {.packet = [&](auto p) { to_a.emplace_back(p.begin(), p.end()); }});
  pp::endpoint iou(b.dev, {.first_pool_ref = 0x81}, {.packet = [&](auto p) { to_b.emplace_back(p.begin(), p.end()); }});
  REQUIRE(host.connect(iou.local()) == pp::errc{});
  REQUIRE(iou.connect(host.local()) == pp::errc{});
  const auto poll = [&] { host.poll(), iou.poll(); };
  REQUIRE(run(a, b, [&] { return host.writable(2048) && iou.writable(2048); }, 20, poll));
  std::mt19937 rng(3);
  std::vector<std::vector<std::byte>> sent_ab, sent_ba;
  for (int i = 0; i < 300; ++i) {
    std::vector<std::byte> p(1 + rng() % 2048);
    for (auto& x : p) x = static_cast<std::byte>(rng());
    pp::endpoint& from = i % 2 ? iou : host;
    pp::errc e{};
    REQUIRE(run(a, b, [&] { return (e = from.send_packet(p)) != pp::errc::would_block; }, 20, poll));
    REQUIRE(e == pp::errc{});
    (i % 2 ? sent_ba : sent_ab).push_back(std::move(p));
  }
  REQUIRE(run(a, b, [&] { return to_b.size() == sent_ab.size() && to_a.size() == sent_ba.size(); }, 30, poll));
  CHECK(to_b == sent_ab);
  CHECK(to_a == sent_ba);
  CHECK(a.udp.stats().lost > 0);  // the faults were there
  CHECK(b.udp.stats().corrupted > 0);
}

TEST_CASE("udp: garbage on the port (random bytes, truncated and corrupted RoCE) changes nothing", "[net]") {
  node a(5), b(6);
  REQUIRE(a.udp.ok());
  const int s = ::socket(AF_INET, SOCK_DGRAM, 0);
  REQUIRE(s >= 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(ib::roce_port);
  to.sin_addr.s_addr = htonl(0x7F004F05);  // 127.0.79.5
  std::mt19937 rng(11);
  for (int i = 0; i < 2000; ++i) {
    std::vector<std::uint8_t> d(rng() % 600);
    for (auto& x : d) x = static_cast<std::uint8_t>(rng());
    if (i % 3 == 0 && d.size() > 12) d[0] = 0x04, d[4] = 0, d[5] = 0, d[6] = 0, d[7] = 0x12;  // a BTH to QP 0x12: bad ICRC
    (void)::sendto(s, d.data(), d.size(), 0, reinterpret_cast<const sockaddr*>(&to), sizeof to);
    if (i % 64 == 0) a.step();
  }
  ::close(s);
  const auto end = net::monotonic_ns() + 200'000'000;
  while (net::monotonic_ns() < end && a.udp.stats().received < 2000) a.step();
  CHECK(a.udp.stats().received > 0);
  CHECK(a.dev.counters().frames_in == a.udp.stats().received);
  CHECK(a.dev.counters().dropped_bad_frame + a.dev.counters().dropped_not_mine == a.dev.counters().frames_in);
  CHECK(a.udp.stats().sent == 0);  // nothing answered
}

TEST_CASE("udp: GSO out and GRO in carry a 1 MiB WRITE intact, each alone and together, with and without loss", "[net]") {
  // (GSO's segments carry IPv4 identifications 1, 2, ... on the wire; the receiving udp_port
  // rebuilds identification 0, as its sender's device computed the ICRC over: spec/net.md.)
  const bool gso = GENERATE(false, true), gro = GENERATE(false, true);
  const double loss = GENERATE(0.0, 0.02);
  INFO("gso " << gso << " gro " << gro << " loss " << loss);
  node a(11, {.loss = loss}, 7, gso, gro), b(12, {.loss = loss}, 8, gso, gro);
  REQUIRE(a.udp.ok());
  REQUIRE(b.udp.ok());
  CHECK(a.udp.gso() == gso);  // this kernel has both (Linux >= 5.0)
  CHECK(b.udp.gro() == gro);
  rnic::cq_memory acq(64), bcq(64);
  rnic::sq_memory asq(64), bsq(64);
  rnic::rq_memory arq(64), brq(64);
  const auto apd = *a.dev.alloc_pd(), bpd = *b.dev.alloc_pd();
  std::vector<std::byte> src(1 << 20), dst(1 << 20);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::byte>((i * 13) ^ (i >> 11));
  const auto smr = *a.dev.reg_mr(apd, src.data(), src.size(), rnic::access::local_write);
  const auto dmr = *b.dev.reg_mr(bpd, dst.data(), dst.size(), rnic::access::local_write | rnic::access::remote_write);
  const auto ac = *a.dev.create_cq(acq), bc = *b.dev.create_cq(bcq);
  const auto qa = *a.dev.create_qp({.pd = apd, .send_cq = ac, .recv_cq = ac, .sq = &asq, .rq = &arq});
  const auto qb = *b.dev.create_qp({.pd = bpd, .send_cq = bc, .recv_cq = bc, .sq = &bsq, .rq = &brq});
  REQUIRE(rnic::bring_up(a.dev, qa, {.peer_qpn = qb, .av = rnic::address_of(b.dev), .mtu = 4096}) == rnic::errc{});
  REQUIRE(rnic::bring_up(b.dev, qb, {.peer_qpn = qa, .av = rnic::address_of(a.dev), .mtu = 4096}) == rnic::errc{});
  const rnic::sge s{smr.addr, 1 << 20, smr.lkey};
  REQUIRE(a.dev.post_send(qa, {.wr_id = 1, .opcode = rnic::wr_opcode::rdma_write, .sg_list = {&s, 1}, .remote_addr = dmr.addr, .rkey = dmr.rkey}) ==
          rnic::errc{});
  rnic::work_completion wc[4];
  std::size_t done = 0;
  rnic::wc_status st{};
  REQUIRE(run(a, b, [&] {
    for (std::size_t i = 0, n = acq.poll(wc); i < n; ++i) ++done, st = wc[i].status;
    return done == 1;
  }));
  CHECK(st == rnic::wc_status::success);
  CHECK(dst == src);
  CHECK(b.dev.counters().dropped_bad_frame == 0);  // every ICRC verified
  CHECK(a.udp.stats().sent >= 256);                // 256 packets of 4096 bytes at least
  if (gso) CHECK(a.udp.stats().gso_messages > 0);
  else CHECK(a.udp.stats().gso_messages == 0);
  CHECK(b.udp.stats().truncated == 0);
  if (gso && gro) CHECK(b.udp.stats().gro_messages > 0);  // the GSO messages arrive whole
  if (!gro) CHECK(b.udp.stats().gro_messages == 0);
}

TEST_CASE("udp: sessions are distinct source ports: a session QP's messages leave on four ports, each accepted by its tuple", "[net][sessions]") {
  node a(13), b(14);
  REQUIRE(a.udp.ok());
  REQUIRE(b.udp.ok());
  rnic::cq_memory acq(64), bcq(64);
  rnic::sq_memory asq(64), bsq(64);
  rnic::rq_memory arq(64), brq(64);
  const auto apd = *a.dev.alloc_pd(), bpd = *b.dev.alloc_pd();
  std::vector<std::byte> src(12 * 64), dst(12 * 256);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::byte>(i * 7 + 1);
  const auto smr = *a.dev.reg_mr(apd, src.data(), src.size(), rnic::access::local_write);
  const auto dmr = *b.dev.reg_mr(bpd, dst.data(), dst.size(), rnic::access::local_write);
  const auto ac = *a.dev.create_cq(acq), bc = *b.dev.create_cq(bcq);
  const auto ua = *a.dev.create_qp({.type = rnic::qp_type::ud, .pd = apd, .send_cq = ac, .recv_cq = ac, .sq = &asq, .rq = &arq});
  const auto ub = *b.dev.create_qp({.type = rnic::qp_type::ud, .pd = bpd, .send_cq = bc, .recv_cq = bc, .sq = &bsq, .rq = &brq});
  REQUIRE(rnic::bring_up(a.dev, ua, {.type = rnic::qp_type::ud}) == rnic::errc{});
  REQUIRE(rnic::bring_up(b.dev, ub, {.type = rnic::qp_type::ud}) == rnic::errc{});
  const auto ah = *a.dev.create_ah(apd, rnic::address_of(b.dev));
  for (std::uint16_t i = 0; i < 4; ++i) {
    const flow::five_tuple t{.src = a.dev.config().ports[0].gid, .dst = b.dev.config().ports[0].gid, .sport = static_cast<std::uint16_t>(47920 + i)};
    REQUIRE(a.dev.bind_session(i + 1u, t, 7, ua) == rnic::errc{});
    REQUIRE(b.dev.bind_session(i + 1u, t, 9, ub) == rnic::errc{});
  }
  REQUIRE(a.dev.set_qp_sessions(ua, 7) == rnic::errc{});
  REQUIRE(b.dev.set_qp_sessions(ub, 9) == rnic::errc{});
  for (std::uint32_t k = 0; k < 12; ++k) {
    const rnic::sge r{dmr.addr + k * 256, 256, dmr.lkey};
    REQUIRE(b.dev.post_recv(ub, {.wr_id = k, .sg_list = {&r, 1}}) == rnic::errc{});
  }
  // (no b.step() here: the device reads the receives posted so far when a message arrives)
  for (std::uint32_t k = 0; k < 12; ++k) {
    const rnic::sge s{smr.addr + k * 64, 64, smr.lkey};
    REQUIRE(a.dev.post_send(ua, {.wr_id = k, .opcode = rnic::wr_opcode::send, .sg_list = {&s, 1}, .ah = ah, .remote_qpn = ub,
                                 .remote_qkey = 0x11111111}) == rnic::errc{});
  }
  std::vector<rnic::work_completion> got;
  rnic::work_completion wc[16];
  if (!run(a, b, [&] {
    (void)acq.poll(wc);
    for (std::size_t i = 0, n = bcq.poll(wc); i < n; ++i) got.push_back(wc[i]);
    return got.size() == 12;
  }, 5)) {
    FAIL("got " << got.size() << "; a sent " << a.udp.stats().sent << " not_sendable " << a.udp.stats().not_sendable << " ports "
                << a.udp.stats().source_ports << "; b received " << b.udp.stats().received << " unknown_tuple "
                << b.dev.counters().session_unknown_tuple << " bad " << b.dev.counters().dropped_bad_frame << " by_qp "
                << b.dev.counters().dropped_by_qp << " not_mine " << b.dev.counters().dropped_not_mine << " foreign "
                << b.dev.counters().session_foreign << " dup " << b.dev.counters().session_duplicate << " window "
                << b.dev.counters().session_window_full << " no_qp " << b.dev.counters().dropped_no_qp << " completions "
                << b.dev.counters().completions << " a completions " << a.dev.counters().completions);
  }
  for (std::uint32_t k = 0; k < 12; ++k) {
    INFO("message " << k);
    CHECK(got[k].status == rnic::wc_status::success);
    CHECK(got[k].wr_id == k);  // in order
    CHECK(std::equal(src.begin() + k * 64, src.begin() + (k + 1) * 64, dst.begin() + k * 256 + rnic::device::grh_size));
  }
  CHECK(a.udp.stats().source_ports == 4);  // one socket per session's source port
  CHECK(a.udp.stats().not_sendable == 0);
  CHECK(b.dev.counters().session_unknown_tuple == 0);  // every datagram came from a bound tuple
}

namespace {

/// An RC QP on each of two nodes, connected to each other, and a region on each: `src` on a
/// (local write), `dst` on b (remote write), of `bytes` bytes.
struct rc_pair {
  rnic::cq_memory acq{16}, bcq{16};
  rnic::sq_memory asq{16}, bsq{16};
  rnic::rq_memory arq{16}, brq{16};
  std::vector<std::byte> src, dst;
  rnic::memory_region smr{}, dmr{};
  std::uint32_t qa = 0, qb = 0;
  rc_pair(node& a, node& b, std::size_t bytes) : src(bytes, std::byte{7}), dst(bytes) {
    const auto apd = *a.dev.alloc_pd(), bpd = *b.dev.alloc_pd();
    smr = *a.dev.reg_mr(apd, src.data(), src.size(), rnic::access::local_write);
    dmr = *b.dev.reg_mr(bpd, dst.data(), dst.size(), rnic::access::local_write | rnic::access::remote_write);
    const auto ac = *a.dev.create_cq(acq), bc = *b.dev.create_cq(bcq);
    qa = *a.dev.create_qp({.pd = apd, .send_cq = ac, .recv_cq = ac, .sq = &asq, .rq = &arq});
    qb = *b.dev.create_qp({.pd = bpd, .send_cq = bc, .recv_cq = bc, .sq = &bsq, .rq = &brq});
    REQUIRE(rnic::bring_up(a.dev, qa, {.peer_qpn = qb, .av = rnic::address_of(b.dev), .mtu = 1024, .timeout = 14}) == rnic::errc{});
    REQUIRE(rnic::bring_up(b.dev, qb, {.peer_qpn = qa, .av = rnic::address_of(a.dev), .mtu = 1024}) == rnic::errc{});
  }
  /// Posts one RDMA WRITE of all of src to dst on a.
  rnic::errc write(node& a) {
    const rnic::sge s{smr.addr, static_cast<std::uint32_t>(src.size()), smr.lkey};
    return a.dev.post_send(qa, {.wr_id = 1, .opcode = rnic::wr_opcode::rdma_write, .sg_list = {&s, 1}, .remote_addr = dmr.addr,
                                .rkey = dmr.rkey});
  }
};

}  // namespace

TEST_CASE("loop: it sleeps until a frame, a watched descriptor or a deadline, never on a tick", "[net][loop]") {
  node a(7), b(8);
  REQUIRE(a.udp.ok());
  REQUIRE(b.udp.ok());
  // Idle, nothing scheduled: the limit is all the loop would sleep.
  CHECK(a.loop.timeout(net::monotonic_ns(), 5'000'000'000) == 5'000'000'000u);
  rc_pair q(a, b, 4000);
  REQUIRE(q.write(a) == rnic::errc{});
  // Posted: the device has work now, so the loop does not sleep.
  CHECK(a.loop.timeout(net::monotonic_ns(), 5'000'000'000) == 0u);
  (void)a.loop.turn(net::monotonic_ns());
  // Sent, not yet acknowledged: it sleeps until the local ACK timeout at most (code 14: 67 ms).
  const auto t = a.loop.timeout(net::monotonic_ns(), 5'000'000'000);
  CHECK(t > 0u);
  CHECK(t <= *ib::local_ack_timeout_ns(14));
  // B's frames wake it: b's wait returns at once with its socket readable, and its turn takes them.
  const auto t0 = net::monotonic_ns();
  CHECK(b.loop.wait(1'000'000'000) >= 1);
  CHECK(net::monotonic_ns() - t0 < 500'000'000);
  (void)b.loop.turn(net::monotonic_ns());
  CHECK(a.loop.wait(1'000'000'000) >= 1);  // the ACK
  (void)a.loop.turn(net::monotonic_ns());
  rnic::work_completion wc[2];
  REQUIRE(q.acq.poll(wc) == 1);
  CHECK(wc[0].status == rnic::wc_status::success);
  CHECK(q.dst == q.src);
  // Idle again: a wait of 30 ms sleeps the whole time (no tick wakes it), then times out.
  REQUIRE(a.loop.timeout(net::monotonic_ns(), 30'000'000) == 30'000'000u);
  const auto t1 = net::monotonic_ns();
  CHECK(a.loop.wait(30'000'000) == 0);
  CHECK(net::monotonic_ns() - t1 >= 30'000'000u);
  CHECK(a.loop.stats().wakeups == 1);
  // A watched descriptor wakes it and runs its handler at the next turn; a program deadline
  // bounds the sleep.
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  int handled = 0;
  a.loop.watch(fds[0], [&](rnic::time_ns) {
    char c;
    handled += static_cast<int>(::read(fds[0], &c, 1));
  });
  const auto soon = net::monotonic_ns() + 20'000'000;
  a.loop.deadline([&] { return std::optional<rnic::time_ns>{soon}; });
  CHECK(a.loop.timeout(net::monotonic_ns(), 5'000'000'000) <= 20'000'000u);
  REQUIRE(::write(fds[1], "x", 1) == 1);
  CHECK(a.loop.wait(1'000'000'000) == 1);
  CHECK(handled == 0);
  (void)a.loop.turn(net::monotonic_ns());
  CHECK(handled == 1);
  ::close(fds[0]);
  ::close(fds[1]);
}

TEST_CASE("loop: a linger policy spins, then caps each sleep at its tick while traffic is recent, and not at rest", "[net][loop]") {
  node a(9), b(10);
  REQUIRE(a.udp.ok());
  REQUIRE(b.udp.ok());
  a.loop.linger({.window = 100'000'000, .tick = 1'000'000, .spin = 50'000});
  rc_pair q(a, b, 64);
  // Nothing has moved yet: the limit is all it would sleep.
  const auto t0 = net::monotonic_ns();
  CHECK(a.loop.timeout(t0, 30'000'000) == 30'000'000u);
  REQUIRE(q.write(a) == rnic::errc{});
  CHECK(a.loop.turn(t0) == 1u);  // the WRITE leaves
  REQUIRE(b.loop.wait(1'000'000'000) >= 1);
  (void)b.loop.turn(net::monotonic_ns());
  REQUIRE(a.loop.wait(1'000'000'000) >= 1);
  const auto t1 = net::monotonic_ns();
  CHECK(a.loop.turn(t1) == 1u);  // the ACK comes in
  rnic::work_completion wc[1];
  REQUIRE(q.acq.poll(wc) == 1);
  // Acknowledged, nothing scheduled: for 50 µs no sleep at all (busy polling); then within the
  // window each sleep is one tick; after it, the limit.
  CHECK(a.loop.timeout(t1 + 1'000, 30'000'000) == 0u);
  CHECK(a.loop.timeout(t1 + 49'999, 30'000'000) == 0u);
  CHECK(a.loop.timeout(t1 + 50'000, 30'000'000) == 1'000'000u);
  CHECK(a.loop.timeout(t1 + 99'000'000, 30'000'000) == 1'000'000u);
  CHECK(a.loop.timeout(t1 + 100'000'000, 30'000'000) == 30'000'000u);
  // A turn that moves nothing does not extend it.
  CHECK(a.loop.turn(t1 + 50'000'000) == 0u);
  CHECK(a.loop.timeout(t1 + 100'000'000, 30'000'000) == 30'000'000u);
}

TEST_CASE("udp: DSCP and ECN leave with each datagram and come back into the rebuilt frame, as a plain socket sees them", "[net][qos]") {
  // Oracles: a plain UDP socket with IP_RECVTOS reads the TOS the kernel put in the IP header;
  // a plain socket with IP_TOS set sends one.
  net::udp_port port({.address = {127, 0, 79, 61}});
  REQUIRE(port.ok());
  const int plain = ::socket(AF_INET, SOCK_DGRAM, 0);
  REQUIRE(plain >= 0);
  sockaddr_in at{};
  at.sin_family = AF_INET;
  at.sin_port = htons(47910);
  at.sin_addr.s_addr = htonl(0x7F004F3E);  // 127.0.79.62
  REQUIRE(::bind(plain, reinterpret_cast<const sockaddr*>(&at), sizeof at) == 0);
  const int one = 1;
  REQUIRE(::setsockopt(plain, IPPROTO_IP, IP_RECVTOS, &one, sizeof one) == 0);
  // a frame from the port to the plain socket: DSCP 26 (AF31), ECT(0)
  ib::roce_packet p{};
  p.ip4.src = {127, 0, 79, 61};
  p.ip4.dst = {127, 0, 79, 62};
  p.ip4.dsfield_dscp = 26;
  p.ip4.dsfield_ecn = 2;
  p.ip4.flags_df = true;
  p.udp.srcport = ib::roce_port;
  p.udp.dstport = 47910;
  p.bth.opcode = static_cast<std::uint8_t>(ib::opcode::rc_send_only);
  const std::vector<std::byte> payload(40, std::byte{0x11});
  p.payload = payload;
  std::vector<std::byte> f(*ib::frame_size(p));
  REQUIRE(ib::build(p, f).has_value());
  port.send(f, 0);
  REQUIRE(port.flush(0) == 1);
  std::array<std::byte, 2048> buf{};
  std::array<char, 64> ctl{};
  iovec iov{buf.data(), buf.size()};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = ctl.data();
  m.msg_controllen = ctl.size();
  const ssize_t n = ::recvmsg(plain, &m, 0);
  REQUIRE(n == static_cast<ssize_t>(f.size() - net::udp_port::headers));
  int tos = -1;
  for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
    if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) tos = *reinterpret_cast<const unsigned char*>(CMSG_DATA(c));
  CHECK(tos == (26 << 2 | 2));
  // the other way: the plain socket sends with TOS DSCP 46 (EF), CE; the port's frame has them
  const int ce_tos = 46 << 2 | 3;
  REQUIRE(::setsockopt(plain, IPPROTO_IP, IP_TOS, &ce_tos, sizeof ce_tos) == 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(ib::roce_port);
  to.sin_addr.s_addr = htonl(0x7F004F3D);  // 127.0.79.61
  // its datagram: a frame from 127.0.79.62:47910 (DF, identification 0, as the port rebuilds it)
  ib::roce_packet r = p;
  r.ip4.src = {127, 0, 79, 62};
  r.ip4.dst = {127, 0, 79, 61};
  r.ip4.dsfield_dscp = 0, r.ip4.dsfield_ecn = 0;  // (masked by the ICRC)
  r.udp.srcport = 47910;
  r.udp.dstport = ib::roce_port;
  std::vector<std::byte> rf(*ib::frame_size(r));
  REQUIRE(ib::build(r, rf).has_value());
  const std::size_t dn = rf.size() - net::udp_port::headers;
  REQUIRE(::sendto(plain, rf.data() + net::udp_port::headers, dn, 0, reinterpret_cast<const sockaddr*>(&to), sizeof to) == static_cast<ssize_t>(dn));
  std::vector<std::byte> got;
  for (int tries = 0; tries < 1000 && got.empty(); ++tries)
    (void)port.receive({2, 0, 0, 0, 0, 61}, [&](std::span<std::byte> fr) { got.assign(fr.begin(), fr.end()); });
  ::close(plain);
  REQUIRE(!got.empty());
  ib::roce_view v;
  REQUIRE(ib::inspect(got, v, {.crc = wire::crc_check::require}).code == wire::errc{});  // the ICRC masks the TOS
  CHECK(v.ipv4().dsfield_dscp == 46);
  CHECK(v.ipv4().dsfield_ecn == 3);
  CHECK(ib::ecn_of(got) == ib::ecn::ce);
  CHECK(v.ip_checksum_ok());
}

TEST_CASE("udp: the port takes frames while fewer than its backlog wait, the rest stay in the device's queue, and all arrive", "[net]") {
  // Every frame a sends is held back 1..100 us (a delay fault), so none leaves at once: the port
  // takes 4 (backlog) and the device keeps the other 6 of the WRITE's 10 packets until they go.
  node a(1, {.delay = 1.0}, 5, false, true, 4), b(2);
  REQUIRE(a.udp.ok());
  REQUIRE(b.udp.ok());
  rnic::cq_memory acq(16), bcq(16);
  rnic::sq_memory asq(16), bsq(16);
  rnic::rq_memory arq(16), brq(16);
  const auto apd = *a.dev.alloc_pd(), bpd = *b.dev.alloc_pd();
  std::vector<std::byte> src(10000), dst(10000);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::byte>(i * 7 + 1);
  const auto smr = *a.dev.reg_mr(apd, src.data(), src.size(), rnic::access::local_write);
  const auto dmr = *b.dev.reg_mr(bpd, dst.data(), dst.size(), rnic::access::local_write | rnic::access::remote_write);
  const auto ac = *a.dev.create_cq(acq), bc = *b.dev.create_cq(bcq);
  const auto qa = *a.dev.create_qp({.pd = apd, .send_cq = ac, .recv_cq = ac, .sq = &asq, .rq = &arq});
  const auto qb = *b.dev.create_qp({.pd = bpd, .send_cq = bc, .recv_cq = bc, .sq = &bsq, .rq = &brq});
  REQUIRE(rnic::bring_up(a.dev, qa, {.peer_qpn = qb, .av = rnic::address_of(b.dev), .mtu = 1024}) == rnic::errc{});
  REQUIRE(rnic::bring_up(b.dev, qb, {.peer_qpn = qa, .av = rnic::address_of(a.dev), .mtu = 1024}) == rnic::errc{});
  const rnic::sge s{smr.addr, 10000, smr.lkey};
  REQUIRE(a.dev.post_send(qa, {.wr_id = 1, .opcode = rnic::wr_opcode::rdma_write, .sg_list = {&s, 1}, .remote_addr = dmr.addr, .rkey = dmr.rkey}) ==
          rnic::errc{});
  const rnic::time_ns t0 = net::monotonic_ns();
  a.dev.progress(t0);
  REQUIRE(a.dev.pending_frames(0) == 10);
  CHECK(a.udp.send_from(a.dev, 0, t0) == 0);  // all held back
  CHECK(a.udp.waiting() == 4);
  CHECK(a.udp.full());
  CHECK(a.dev.pending_frames(0) == 6);
  CHECK(a.udp.send_from(a.dev, 0, t0) == 0);  // full: nothing more taken
  CHECK(a.dev.pending_frames(0) == 6);
  rnic::work_completion wc[4];
  std::size_t done = 0;
  REQUIRE(run(a, b, [&] { return (done += acq.poll(wc)) == 1; }));
  CHECK(wc[0].status == rnic::wc_status::success);
  CHECK(dst == src);
  CHECK(a.udp.stats().held >= 10);
  CHECK(a.dev.counters().dropped_tx_full == 0);
}
