// A program attached to a function of pushwire-rnicd (spec/rnicd.md §7, §9), for the tests in
// tests/verbs/rnicd.sh. Modes:
//   fatal                      (under the provider) moves data between two RC QPs of the device,
//                              prints "ready", and exits 0 once the device failed (killed or
//                              stopped): IBV_EVENT_DEVICE_FATAL seen and an error completion polled
//   alloc Q M C EXPECT HOLD    (under the provider) creates C CQs, Q QPs and M MRs; with EXPECT 1
//                              the next of each fails with ENOMEM, and one given back can be taken
//                              again; then holds them HOLD seconds
//   bytes LIMIT                (under the provider) an MR of LIMIT bytes registers, one byte more
//                              fails with ENOMEM, and after deregistering it registers again
//   frames PATH FN PEER        attaches to function FN itself and writes into its tx ring one good
//                              UD frame to PEER (IPv4) and one of each spoof: another MAC, another
//                              source address, another UDP source port, a P_Key it lacks, a source
//                              QPN of another attachment, and bytes that are not RoCEv2
//   ring PATH FN               publishes a tx producer index past the ring's end; exits 0 when the
//                              device answers with a notice ring_index_out_of_range
//   slot PATH FN               publishes a slot of length 0; exits 0 on the notice
//                              slot_length_out_of_range
//   rx PATH FN SECS            reads its rx ring for SECS seconds: every frame must be addressed to
//                              a QPN of its own block and an address of its function; prints the
//                              count
#include <infiniband/verbs.h>

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <pushwire/ib/roce.hpp>
#include <pushwire/net/clock.hpp>
#include <pushwire/net/shm.hpp>
#include <pushwire/rnic/attach.hpp>
#include <pushwire/rnic/eswitch.hpp>

#include "rc_connect.hpp"

namespace {

namespace rnic = pushwire::rnic;
namespace fn = pushwire::rnic::fn;
namespace ctl = pushwire::rnic::ctl;
namespace net = pushwire::net;
namespace ib = pushwire::ib;
namespace wire = pushwire::wire;

int fail(const char* why) {
  std::fprintf(stderr, "rnicd_client: FAIL: %s (errno %d %s)\n", why, errno, std::strerror(errno));
  return 1;
}

// ---- under the provider ----------------------------------------------------------------
ibv_context* open_first() {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list || n < 1) return nullptr;
  ibv_context* c = ibv_open_device(list[0]);
  ibv_free_device_list(list);
  return c;
}

int run_fatal() {
  ibv_context* ctx = open_first();
  if (!ctx) return fail("open the device");
  ibv_pd* pd = ibv_alloc_pd(ctx);
  std::vector<char> buf(1 << 20);
  ibv_mr* mr = pd ? (ibv_reg_mr)(pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE) : nullptr;
  ibv_cq* cq = ibv_create_cq(ctx, 4096, nullptr, nullptr, 0);
  ibv_qp_init_attr ia{};
  ia.send_cq = ia.recv_cq = cq;
  ia.cap = {.max_send_wr = 256, .max_recv_wr = 256, .max_send_sge = 1, .max_recv_sge = 1, .max_inline_data = 0};
  ia.qp_type = IBV_QPT_RC;
  ibv_qp* a = mr && cq ? ibv_create_qp(pd, &ia) : nullptr;
  ibv_qp* b = a ? ibv_create_qp(pd, &ia) : nullptr;
  if (!b || !pushwire::test::connect_rc(a, b, ctx, 12)) return fail("set up two connected RC QPs");
  (void)::fcntl(ctx->async_fd, F_SETFL, ::fcntl(ctx->async_fd, F_GETFL) | O_NONBLOCK);
  auto post_recv = [&] {
    ibv_sge s{reinterpret_cast<std::uintptr_t>(buf.data() + 65536), 4096, mr->lkey};
    ibv_recv_wr w{};
    w.sg_list = &s;
    w.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    return ibv_post_recv(b, &w, &bad) == 0;
  };
  for (int i = 0; i < 128; ++i)
    if (!post_recv()) return fail("post a receive");
  int outstanding = 0;
  long done = 0;
  bool fatal = false, error_seen = false, ready = false;
  const auto start = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point fatal_at{};
  for (;;) {
    const auto now = std::chrono::steady_clock::now();
    if (now - start > std::chrono::seconds(30)) return fail("no device failure within 30 s");
    if (fatal && error_seen) break;
    if (fatal && now - fatal_at > std::chrono::seconds(5)) return fail("DEVICE_FATAL but no error completion within 5 s");
    while (!fatal && outstanding < 64) {
      ibv_sge s{reinterpret_cast<std::uintptr_t>(buf.data()), 4096, mr->lkey};
      ibv_send_wr w{};
      w.sg_list = &s;
      w.num_sge = 1;
      w.opcode = IBV_WR_SEND;
      w.send_flags = IBV_SEND_SIGNALED;
      ibv_send_wr* bad = nullptr;
      if (ibv_post_send(a, &w, &bad)) break;
      ++outstanding;
    }
    ibv_wc wc[32];
    const int n = ibv_poll_cq(cq, 32, wc);
    for (int i = 0; i < n; ++i) {
      if (wc[i].status != IBV_WC_SUCCESS) {
        if (!error_seen) std::printf("error completion: %s\n", ibv_wc_status_str(wc[i].status));
        error_seen = true;
        continue;
      }
      if (wc[i].opcode == IBV_WC_SEND) --outstanding, ++done;
      if (wc[i].opcode == IBV_WC_RECV && !post_recv()) error_seen = true;
    }
    if (!ready && done >= 200) {
      std::printf("ready\n");
      std::fflush(stdout);
      ready = true;
    }
    ibv_async_event ev;
    if (ibv_get_async_event(ctx, &ev) == 0) {
      std::printf("async event: %s\n", ibv_event_type_str(ev.event_type));
      if (ev.event_type == IBV_EVENT_DEVICE_FATAL && !fatal) fatal = true, fatal_at = now;
      ibv_ack_async_event(&ev);
    }
  }
  std::printf("PASS: %ld messages, then DEVICE_FATAL and an error completion\n", done);
  std::fflush(stdout);
  // The device is gone: tearing down must not hang either.
  ibv_destroy_qp(a);
  ibv_destroy_qp(b);
  ibv_destroy_cq(cq);
  ibv_dereg_mr(mr);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  return 0;
}

int run_alloc(int q, int m, int c, bool expect, int hold) {
  ibv_context* ctx = open_first();
  if (!ctx) return fail("open the device");
  ibv_pd* pd = ibv_alloc_pd(ctx);
  static char mem[4096];
  std::vector<ibv_cq*> cqs;
  std::vector<ibv_qp*> qps;
  std::vector<ibv_mr*> mrs;
  for (int i = 0; i < c; ++i) {
    cqs.push_back(ibv_create_cq(ctx, 16, nullptr, nullptr, 0));
    if (!cqs.back()) return fail("create a CQ within the limit");
  }
  ibv_qp_init_attr ia{};
  ia.send_cq = ia.recv_cq = cqs.empty() ? nullptr : cqs[0];
  ia.cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1, .max_inline_data = 0};
  ia.qp_type = IBV_QPT_RC;
  for (int i = 0; i < q; ++i) {
    qps.push_back(ibv_create_qp(pd, &ia));
    if (!qps.back()) return fail("create a QP within the limit");
  }
  for (int i = 0; i < m; ++i) {
    mrs.push_back((ibv_reg_mr)(pd, mem, sizeof mem, IBV_ACCESS_LOCAL_WRITE));
    if (!mrs.back()) return fail("register an MR within the limit");
  }
  if (expect) {
    errno = 0;
    if (ibv_create_cq(ctx, 16, nullptr, nullptr, 0) || errno != ENOMEM) return fail("a CQ past the limit must fail with ENOMEM");
    errno = 0;
    if (ibv_create_qp(pd, &ia) || errno != ENOMEM) return fail("a QP past the limit must fail with ENOMEM");
    errno = 0;
    if ((ibv_reg_mr)(pd, mem, sizeof mem, IBV_ACCESS_LOCAL_WRITE) || errno != ENOMEM) return fail("an MR past the limit must fail with ENOMEM");
    if (!qps.empty()) {
      if (ibv_destroy_qp(qps.back())) return fail("destroy a QP");
      qps.back() = ibv_create_qp(pd, &ia);
      if (!qps.back()) return fail("a QP given back must be taken again");
    }
    if (!mrs.empty()) {
      if (ibv_dereg_mr(mrs.back())) return fail("deregister an MR");
      mrs.back() = (ibv_reg_mr)(pd, mem, sizeof mem, IBV_ACCESS_LOCAL_WRITE);
      if (!mrs.back()) return fail("an MR given back must be taken again");
    }
  }
  std::printf("ready: %d CQs, %d QPs, %d MRs%s\n", c, q, m, expect ? ", and one more of each refused with ENOMEM" : "");
  std::fflush(stdout);
  std::this_thread::sleep_for(std::chrono::seconds(hold));
  for (ibv_qp* x : qps) ibv_destroy_qp(x);
  for (ibv_mr* x : mrs) ibv_dereg_mr(x);
  for (ibv_cq* x : cqs) ibv_destroy_cq(x);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  return 0;
}

int run_bytes(std::size_t limit) {
  ibv_context* ctx = open_first();
  if (!ctx) return fail("open the device");
  ibv_pd* pd = ibv_alloc_pd(ctx);
  std::vector<char> mem(limit + 1);
  ibv_mr* a = (ibv_reg_mr)(pd, mem.data(), limit, IBV_ACCESS_LOCAL_WRITE);
  if (!a) return fail("an MR of the limit's bytes");
  errno = 0;
  if ((ibv_reg_mr)(pd, mem.data(), 1, IBV_ACCESS_LOCAL_WRITE) || errno != ENOMEM) return fail("one byte more must fail with ENOMEM");
  if (ibv_dereg_mr(a)) return fail("deregister");
  a = (ibv_reg_mr)(pd, mem.data(), limit, IBV_ACCESS_LOCAL_WRITE);
  if (!a) return fail("the bytes given back must be taken again");
  std::printf("PASS: %zu bytes registered, one more refused with ENOMEM, given back and taken again\n", limit);
  ibv_dereg_mr(a);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  return 0;
}

// ---- attached by hand ------------------------------------------------------------------
struct raw_attachment {
  net::unique_fd sock, doorbell, wake;
  net::shared_region region;
  fn::region_view view;
  ctl::attach_reply reply{};
  std::vector<std::array<std::uint8_t, 16>> gids;
};

bool attach(const char* path, int function, raw_attachment& a) {
  a.sock = net::connect_seqpacket(path);
  if (!a.sock) return false;
  ctl::attach_request req{};
  req.header = {ctl::msg_type::attach, fn::version, 0, 7};
  req.function = static_cast<std::uint16_t>(function);
  req.pid = static_cast<std::uint32_t>(::getpid());
  std::array<std::byte, 64> out{};
  static std::vector<std::byte> in(ctl::max_message);
  std::vector<net::unique_fd> fds;
  const auto n = wire::encode(req, out);
  if (!n || !net::send_message(a.sock.get(), std::span<const std::byte>(out.data(), *n))) return false;
  const ssize_t k = net::receive_message(a.sock.get(), in, &fds);
  if (k <= 0) return false;
  const auto r = wire::decode<ctl::attach_reply>(std::span<const std::byte>(in.data(), static_cast<std::size_t>(k)));
  if (!r || r->header.status || fds.size() != 3) return false;
  a.reply = *r;
  for (const auto& g : r->gids) a.gids.push_back(g);
  a.region = net::shared_region::open(std::move(fds[0]), fn::region_bytes(r->slots));
  a.doorbell = std::move(fds[1]);
  a.wake = std::move(fds[2]);
  return a.region.ok() && !fn::check_region(a.region.bytes(), a.view);
}

/// A UD SEND of 64 bytes from the attachment to peer's QP 0x000123 (ICRC good).
std::vector<std::byte> ud_frame(const raw_attachment& a, const std::array<std::uint8_t, 4>& peer) {
  ib::roce_packet p{};
  p.eth.dst = {0x02, 0x00, peer[0], peer[1], peer[2], peer[3]};
  p.eth.src = a.reply.mac;
  const auto src = ib::v4_of(a.gids[0]);
  std::copy(src.begin(), src.end(), p.ip4.src.begin());
  std::copy(peer.begin(), peer.end(), p.ip4.dst.begin());
  p.udp.srcport = ib::roce_port;
  p.udp.dstport = ib::roce_port;
  p.bth.opcode = static_cast<std::uint8_t>(ib::opcode::ud_send_only);
  p.bth.p_key = 0xFFFF;
  p.bth.destqp = 0x000123;
  p.bth.psn = 1;
  p.ext.set<ib::ext::deth>(ib::deth{.q_key = 0x11111111, .reserved = 0, .srcqp = a.reply.qpn_first + 1});
  static const std::array<std::byte, 64> payload{};
  p.payload = payload;
  std::vector<std::byte> f(512);
  const auto n = ib::build(p, f);
  if (!n) return {};
  f.resize(*n);
  return f;
}

int run_frames(const char* path, int function, const char* peer_text) {
  raw_attachment a;
  if (!attach(path, function, a)) return fail("attach");
  std::array<std::uint8_t, 4> peer{};
  unsigned x[4];
  if (std::sscanf(peer_text, "%u.%u.%u.%u", &x[0], &x[1], &x[2], &x[3]) != 4) return fail("PEER is an IPv4 address");
  for (int i = 0; i < 4; ++i) peer[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(x[i]);
  const auto good = ud_frame(a, peer);
  if (good.empty()) return fail("build a frame");
  std::vector<std::vector<std::byte>> frames{good};
  auto spoof = [&](auto change) {
    auto f = ud_frame(a, peer);
    auto p = *ib::decode(f, {.crc = wire::crc_check::skip});
    p.given = {};  // the checksums and the ICRC are computed again: only the changed field is wrong
    change(p);
    std::vector<std::byte> out(512);
    const auto n = ib::build(p, out);
    out.resize(n ? *n : 0);
    frames.push_back(out);
  };
  spoof([](ib::roce_packet& p) { p.eth.src[5] ^= 0x40; });                        // spoofed_mac
  spoof([](ib::roce_packet& p) { p.ip4.src[3] ^= 0x40; });                       // spoofed_ip
  spoof([](ib::roce_packet& p) { p.udp.srcport = 5000; });                        // spoofed_port
  spoof([](ib::roce_packet& p) { p.bth.p_key = 0x8001; });                        // spoofed_pkey
  spoof([&](ib::roce_packet& p) {                                                 // spoofed_qpn
    p.ext.set<ib::ext::deth>(ib::deth{.q_key = 0x11111111, .reserved = 0, .srcqp = (a.reply.qpn_first + 1) ^ (1u << rnic::qpn_block_bits)});
  });
  frames.push_back(std::vector<std::byte>(60, std::byte{0x5A}));                  // not_roce
  fn::ring_producer tx(a.view.tx, a.view.slots);
  for (const auto& f : frames) {
    if (f.empty() || f.size() > fn::slot_capacity) return fail("a crafted frame");
    std::memcpy(tx.next().data(), f.data(), f.size());
    tx.publish(static_cast<std::uint32_t>(f.size()));
  }
  net::signal_eventfd(a.doorbell.get());
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  std::printf("wrote %zu frames: 1 good, 5 spoofed, 1 not RoCEv2\n", frames.size());
  return 0;
}

int wait_notice(raw_attachment& a, rnic::fn_errc want) {
  std::array<std::byte, 256> m{};
  pollfd p{a.sock.get(), POLLIN, 0};
  if (::poll(&p, 1, 3000) != 1) return fail("no notice within 3 s");
  const ssize_t k = net::receive_message(a.sock.get(), m);
  if (k <= 0) return fail("the socket closed without a notice");
  const auto n = wire::decode<ctl::notice_message>(std::span<const std::byte>(m.data(), static_cast<std::size_t>(k)));
  if (!n || n->header.type != ctl::msg_type::notice) return fail("not a notice");
  const std::string_view got = wire::enum_name(static_cast<rnic::fn_errc>(n->reason));
  std::printf("notice: %.*s\n", static_cast<int>(got.size()), got.data());
  if (static_cast<rnic::fn_errc>(n->reason) != want) return fail("the wrong reason");
  if (a.view.state() != fn::device_state::fatal) return fail("the region's state is not fatal");
  return 0;
}

int run_ring(const char* path, int function, bool slot) {
  raw_attachment a;
  if (!attach(path, function, a)) return fail("attach");
  std::byte* ring = a.view.tx;
  std::uint32_t bogus = 0;
  if (slot) {
    std::memset(ring + fn::ring_control, 0, 8);  // slot 0: length 0
    bogus = 1;
  } else {
    bogus = a.view.slots + 5;
  }
  fn::detail::word(ring + fn::producer_at).store(bogus, std::memory_order_release);
  net::signal_eventfd(a.doorbell.get());
  return wait_notice(a, slot ? rnic::fn_errc::slot_length_out_of_range : rnic::fn_errc::ring_index_out_of_range);
}

int run_rx(const char* path, int function, int secs) {
  raw_attachment a;
  if (!attach(path, function, a)) return fail("attach");
  fn::ring_consumer rx(a.view.rx, a.view.slots);
  const std::uint32_t first = a.reply.qpn_first, last = first + a.reply.qpn_count;
  std::printf("ready: QPNs 0x%06x..0x%06x\n", first, last - 1);
  std::fflush(stdout);
  long frames = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(secs);
  while (std::chrono::steady_clock::now() < until) {
    rnic::fn_errc e{};
    const auto n = rx.available(e);
    if (!n) return fail("the rx ring's index");
    if (*n == 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      continue;
    }
    const auto f = rx.peek(e);
    if (!f) return fail("an rx slot's length");
    ib::roce_view v;
    if (ib::inspect(*f, v, {.crc = wire::crc_check::skip}).code != wire::errc{}) return fail("a frame that is not RoCEv2 reached the ring");
    const std::uint32_t qpn = wire::read<ib::bth, "destqp">(f->data() + v.bth_offset);
    const auto dst = wire::read<ib::ipv4_header, "dst">(f->data() + v.ip_offset);
    bool mine = false;
    for (const auto& g : a.gids) mine = mine || ib::gid_v4(dst) == g;
    if (qpn < first || qpn >= last || !mine) {
      std::fprintf(stderr, "rnicd_client: FAIL: a frame to QPN 0x%06x at %u.%u.%u.%u reached this ring\n", qpn, dst[0], dst[1], dst[2], dst[3]);
      return 1;
    }
    const auto mac = wire::read<wire::eth_header, "dst">(f->data());
    if (mac != a.reply.mac) return fail("a frame not rewritten to the function's MAC");
    rx.pop();
    ++frames;
  }
  std::printf("PASS: %ld frames, each to this attachment's QPNs and its function's address\n", frames);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string_view mode = argc > 1 ? argv[1] : "";
  if (mode == "fatal") return run_fatal();
  if (mode == "alloc" && argc == 7) return run_alloc(std::atoi(argv[2]), std::atoi(argv[3]), std::atoi(argv[4]), std::atoi(argv[5]) != 0, std::atoi(argv[6]));
  if (mode == "bytes" && argc == 3) return run_bytes(std::strtoull(argv[2], nullptr, 10));
  if (mode == "frames" && argc == 5) return run_frames(argv[2], std::atoi(argv[3]), argv[4]);
  if ((mode == "ring" || mode == "slot") && argc == 4) return run_ring(argv[2], std::atoi(argv[3]), mode == "slot");
  if (mode == "rx" && argc == 5) return run_rx(argv[2], std::atoi(argv[3]), std::atoi(argv[4]));
  std::fprintf(stderr, "usage: rnicd_client fatal | alloc Q M C EXPECT HOLD | bytes LIMIT | frames PATH FN PEER | ring PATH FN |\n"
                       "                    slot PATH FN | rx PATH FN SECS\n");
  return 64;
}
