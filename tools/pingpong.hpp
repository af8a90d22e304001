// pushwire-rnic pingpong: two processes, each one reference RNIC on a UDP socket (net/udp.hpp),
// one RC queue pair each, found through the CM's hellos (pp/cm.hpp, UDP 18515). The client
// SENDs `size` bytes, the server answers with the same, ITERATIONS times after 10 untimed
// rounds; figures as libfabric's fi_pingpong reports them, so the two compare line for line:
// total = 2 x size x iterations, usec/xfer = time / (2 x iterations), MB/sec = total / time
// (10^6 bytes). Both sides busy-poll, as fi_pingpong does.
//
// With --xdp IF, RoCE moves over an AF_XDP socket on interface IF (net/xdp.hpp; path MTU 2048 at most),
// the CM's hellos still through the kernel; where AF_XDP is not available (no privilege, no
// libxdp) one line on stderr says so and the UDP socket is used.
//
//   pushwire-rnic pingpong --local IP --peer IP [--server] [--size N] [--iterations N] [--xdp IF] [--json]
#pragma once

#include <chrono>
#include <cstdio>
#include <string_view>
#include <vector>

#include <pushwire/wire/json.hpp>

#include <pushwire/net/loop.hpp>
#ifdef PUSHWIRE_HAVE_XDP
#include <pushwire/net/xdp.hpp>
#endif

#include "split_module.hpp"

namespace pushwire::tools {

inline int pingpong_usage() {
  std::fprintf(stderr,
               "usage: pushwire-rnic pingpong --local IP --peer IP [--server] [--size N] [--iterations N] [--xdp IF] [--json]\n"
               "  RC SEND ping-pong over RoCEv2/UDP 4791 between two processes (CM on UDP %u); size 1..1048576 (64),\n"
               "  iterations (1000); --xdp IF: RoCE over AF_XDP on interface IF (the UDP socket when unavailable).\n"
               "  Prints: bytes iterations total time_s MB_per_s usec_per_xfer (fi_pingpong's definitions)\n",
               pp::cm_port);
  return 2;
}

inline int pingpong_main(int argc, char** argv) {
  std::array<std::uint8_t, 4> local{}, peer{};
  bool have_local = false, have_peer = false, server = false, json = false;
  std::uint32_t size = 64, iterations = 1000;
  std::string xdp_if;
  for (int i = 2; i < argc; ++i) {
    const std::string_view a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (a == "--server") server = true;
    else if (a == "--json") json = true;
    else if (a == "--local" && v && parse_ip(v, local)) have_local = true, ++i;
    else if (a == "--peer" && v && parse_ip(v, peer)) have_peer = true, ++i;
    else if (a == "--size" && v) size = static_cast<std::uint32_t>(std::strtoul(v, nullptr, 0)), ++i;
    else if (a == "--iterations" && v) iterations = static_cast<std::uint32_t>(std::strtoul(v, nullptr, 0)), ++i;
    else if (a == "--xdp" && v) xdp_if = v, ++i;
    else return pingpong_usage();
  }
  if (!have_local || !have_peer || size < 1 || size > (1u << 20) || iterations < 1) return pingpong_usage();

  rnic::device_config dc = fabric_device(local, server ? 2 : 1);
  std::uint32_t mtu = 4096;
#ifdef PUSHWIRE_HAVE_XDP
  std::optional<net::xdp_port> xdp;
  if (!xdp_if.empty()) {
    xdp.emplace(net::xdp_config{.interface = xdp_if});
    if (xdp->ok()) {
      dc.ports[0].mac = xdp->mac();
      mtu = xdp->path_mtu();  // at most 2048 (spec/net.md §6)
      std::fprintf(stderr, "pushwire-rnic pingpong: AF_XDP on %s (%s XDP, %s mode)\n", xdp_if.c_str(), xdp->native() ? "native" : "generic",
                   xdp->zero_copy() ? "zero-copy" : "copy");
    } else {
      std::fprintf(stderr, "pushwire-rnic pingpong: AF_XDP on %s unavailable (%s: %s); using the UDP socket\n", xdp_if.c_str(), xdp->why().c_str(),
                   std::strerror(xdp->error()));
      xdp.reset();
    }
  }
  const bool on_xdp = xdp.has_value();
#else
  if (!xdp_if.empty()) std::fprintf(stderr, "pushwire-rnic pingpong: AF_XDP unavailable (built without libxdp); using the UDP socket\n");
  const bool on_xdp = false;
#endif
  rnic::device dev(dc);
  std::optional<net::udp_port> udp;
  if (!on_xdp) udp.emplace(net::udp_config{.address = local});
  const int cm = open_cm_socket(local);
  if ((udp && !udp->ok()) || cm < 0) {
    std::fprintf(stderr, "pushwire-rnic pingpong: sockets on %u.%u.%u.%u: %s\n", local[0], local[1], local[2], local[3],
                 std::strerror(udp && !udp->ok() ? udp->error() : errno));
    return 1;
  }
  const auto pd = *dev.alloc_pd();
  rnic::cq_memory scq(64), rcq(64);
  auto sq = std::make_unique<rnic::sq_memory>(64);
  auto rq = std::make_unique<rnic::rq_memory>(64);
  const auto send_cq = *dev.create_cq(scq), recv_cq = *dev.create_cq(rcq);
  const auto qpn = *dev.create_qp({.type = rnic::qp_type::rc, .pd = pd, .send_cq = send_cq, .recv_cq = recv_cq, .sq = sq.get(), .rq = rq.get()});
  std::vector<std::byte> out(size), in(size);
  for (std::size_t i = 0; i < size; ++i) out[i] = static_cast<std::byte>(i * 7 + (server ? 1 : 0));
  const auto mr = *dev.reg_mr(pd, out.data(), out.size(), rnic::access::local_write);
  const auto mr_in = *dev.reg_mr(pd, in.data(), in.size(), rnic::access::local_write);
  const rnic::sge s_out{reinterpret_cast<std::uintptr_t>(out.data()), size, mr.lkey};
  const rnic::sge s_in{reinterpret_cast<std::uintptr_t>(in.data()), size, mr_in.lkey};
  auto posted = [](const char* what, rnic::errc e) {
    if (e != rnic::errc{}) std::fprintf(stderr, "pushwire-rnic pingpong: %s: %s\n", what, std::string(wire::enum_name(e)).c_str());
    return e == rnic::errc{};
  };
  auto post_recv = [&] { return posted("post_recv", dev.post_recv(qpn, {.wr_id = 1, .sg_list = {&s_in, 1}})); };
  auto post_send = [&] { return posted("post_send", dev.post_send(qpn, {.wr_id = 2, .opcode = rnic::wr_opcode::send, .sg_list = {&s_out, 1}})); };

  pp::connector conn({.role = server ? pp::role::iou : pp::role::host,
                      .incarnation = std::random_device{}() | (std::uint64_t{std::random_device{}()} << 32) | 1});
  conn.set_local(qpn, qpn, 0);
  bool connected = false;
  auto apply = [&](const pp::cm_actions& a) {
    if (a.connect && !connected) {
      rnic::address_vector av{};
      av.dgid = rnic::gid_v4(peer[0], peer[1], peer[2], peer[3]);
      connected = rnic::bring_up(dev, qpn, {.peer_qpn = a.connect->control_qpn, .av = av, .mtu = mtu}) == rnic::errc{} && post_recv();
    }
    if (a.send) {
      std::array<std::byte, pp::hello_size> b;
      (void)wire::encode(*a.send, b);
      send_cm(cm, peer, b);
    }
  };
  std::array<rnic::work_completion, 8> wc;
  // The CM: its datagrams and its timer (a hello every 100 ms).
  auto cm_read = [&](rnic::time_ns now) {
    std::array<std::byte, 128> b;
    for (ssize_t n; (n = ::recv(cm, b.data(), b.size(), MSG_DONTWAIT)) > 0;) apply(conn.on_datagram(std::span(b).first(static_cast<std::size_t>(n)), now));
  };
  rnic::time_ns next_cm = 0;
  // The device's I/O loop (net/loop.hpp), busy-polled once connected. A turn's work polls the
  // CQs and posts what the completions call for, so an answer leaves with the ACK of the
  // request it answers, in one sendmmsg.
  net::device_loop loop(dev);
  if (udp) loop.attach(0, *udp);
#ifdef PUSHWIRE_HAVE_XDP
  if (xdp) loop.attach(0, *xdp);
#endif
  const auto give_up = net::monotonic_ns() + 30'000'000'000;  // 30 s for the whole run
  // Completions so far; a round waits for counts, so none is lost between rounds.
  std::uint64_t sends = 0, recvs = 0, round_no = 0;
  bool failed = false;
  auto count = [&](rnic::cq_memory& q, std::uint64_t& n) {
    for (std::size_t k = q.poll(wc), i = 0; i < k; ++i) {
      if (wc[i].status == rnic::wc_status::success) {
        ++n;
      } else {
        std::fprintf(stderr, "pushwire-rnic pingpong: completion %s (vendor %u)\n", std::string(wire::enum_name(wc[i].status)).c_str(), wc[i].vendor_err);
        failed = true;
      }
    }
  };
  // Turns until `want_sends` sends and `want_recvs` receives have completed, then `then()` runs
  // inside that turn's work (its posts leave at the turn's end).
  auto wait_then = [&](std::uint64_t want_sends, std::uint64_t want_recvs, auto&& then) -> bool {
    bool done = false, ok = true;
    while (!done && !failed) {
      const rnic::time_ns now = net::monotonic_ns();
      if (now > give_up) return std::fprintf(stderr, "pushwire-rnic pingpong: timed out\n"), false;
      // The CM's socket once a millisecond: a syscall less per turn is latency saved.
      if (now >= next_cm) {
        cm_read(now);
        apply(conn.tick(now));
        next_cm = now + 1'000'000;
      }
      (void)loop.turn(now, [&](rnic::time_ns) {
        count(scq, sends);
        count(rcq, recvs);
        if (!failed && sends >= want_sends && recvs >= want_recvs) done = true, ok = then();
      });
    }
    return ok && !failed;
  };
  auto nothing = [] { return true; };
  // A round: the client sends and waits for the answer (and its own send's ACK); the server
  // waits for the ping and answers (its send completes during the next round).
  auto round = [&]() -> bool {
    ++round_no;
    if (server) return wait_then(0, round_no, [&] { return post_recv() && post_send(); });
    return post_send() && wait_then(round_no, round_no, post_recv);
  };
  // Until connected, the loop sleeps between turns: on the sockets and the CM's, until the CM's
  // next hello.
  loop.watch(cm, cm_read);
  loop.deadline([&] { return conn.next_deadline(); });
  while (!connected) {
    const rnic::time_ns now = net::monotonic_ns();
    if (now > give_up) return std::fprintf(stderr, "pushwire-rnic pingpong: no peer\n"), 1;
    (void)loop.turn(now, [&](rnic::time_ns t) { apply(conn.tick(t)); });
    (void)loop.wait(loop.timeout(net::monotonic_ns(), give_up - now));
  }
  // The client lets the server's connect land (a datagram's time; RC would retransmit anyway).
  if (!server) {
    const auto until = net::monotonic_ns() + 20'000'000;
    while (net::monotonic_ns() < until) (void)loop.turn(net::monotonic_ns());
  }
  for (int w = 0; w < 10; ++w)
    if (!round()) return std::fprintf(stderr, "pushwire-rnic pingpong: warm-up failed\n"), 1;
  const auto t0 = std::chrono::steady_clock::now();
  for (std::uint32_t i = 0; i < iterations; ++i)
    if (!round()) return std::fprintf(stderr, "pushwire-rnic pingpong: round %u failed\n", i), 1;
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // The last answer must be the peer's bytes.
  for (std::size_t i = 0; i < size; ++i)
    if (in[i] != static_cast<std::byte>(i * 7 + (server ? 0 : 1))) return std::fprintf(stderr, "pushwire-rnic pingpong: data differ\n"), 1;
  // Every send acknowledged; then a moment for the last ACK to leave.
  if (!wait_then(round_no, round_no, nothing)) return 1;
  const auto until = net::monotonic_ns() + 50'000'000;
  while (net::monotonic_ns() < until) (void)loop.turn(net::monotonic_ns());
  const double total = 2.0 * size * iterations;
  const double mbps = total / secs / 1e6, usec = secs * 1e6 / (2.0 * iterations);
  if (json) {
    std::printf("{\"bytes\":%u,\"iterations\":%u,\"total\":%.0f,\"time_s\":%.6f,\"MB_per_s\":%.2f,\"usec_per_xfer\":%.2f}\n", size, iterations,
                total, secs, mbps, usec);
  } else {
    std::printf("bytes %u iterations %u total %.0f time_s %.4f MB_per_s %.2f usec_per_xfer %.2f\n", size, iterations, total, secs, mbps, usec);
  }
  ::close(cm);
  return 0;
}

}  // namespace pushwire::tools
