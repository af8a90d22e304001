// pushwire-apm: automatic path migration through the verbs provider (spec/qos.md §9). One RC QP
// whose path is port 1's GID 0 to the peer's, and whose alternate, armed, is port 2's GID 0 to the
// peer's port 2 when the device has two ports, else port 1's GID 1 (IPv6) to the peer's.
//
//   pushwire-apm [-p TCP_PORT] [-n MESSAGES] [-r PER_SECOND] [-T TIMEOUT]            (server: receives)
//   pushwire-apm [-p TCP_PORT] [-n MESSAGES] [-r PER_SECOND] [-T TIMEOUT] SERVER_IP  (client: sends)
//
// The two exchange their QP numbers and GIDs over TCP first (the only use of TCP). The client
// sends MESSAGES numbered 1 KiB SENDs at PER_SECOND (16 in flight at most); the server checks
// that each arrives once and in order. Meanwhile the test takes the IPv4 path away. Each side
// then expects IBV_EVENT_PATH_MIG for its QP (within 5 s of the last message), the QP in RTS
// with path_mig_state IBV_MIG_MIGRATED and its path the alternate. Success prints a line
// starting "ok:"; anything else exits 1 with what.
#include <arpa/inet.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "exchange.hpp"

using pushwire::test::die;

using pushwire::test::full_io;

namespace {


struct wire_info {
  std::uint32_t qpn, psn;
  std::uint8_t gid0[16], alt[16];  ///< port 1's GID 0, and the alternate path's GID
};

int tcp(const char* server, int port) {
  std::string why;
  const int s = pushwire::test::exchange_socket(server, port, why);
  if (s < 0) die("%s", why.c_str());
  return s;
}

void modify(ibv_qp* qp, ibv_qp_attr& a, int mask, const char* what) {
  if (int e = ibv_modify_qp(qp, &a, mask)) die("modify_qp (%s): %s", what, std::strerror(e));
}

ibv_ah_attr path(const std::uint8_t* dgid, std::uint8_t port, std::uint8_t sgid_index) {
  ibv_ah_attr h{};
  h.is_global = 1;
  h.port_num = port;
  h.grh.hop_limit = 64;
  h.grh.sgid_index = sgid_index;
  std::memcpy(h.grh.dgid.raw, dgid, 16);
  return h;
}

}  // namespace

int main(int argc, char** argv) {
  pushwire::test::program_name = "pushwire-apm";
  int port = 19650, per_second = 2000, timeout = 12;
  std::uint32_t messages = 6000;
  const char* server = nullptr;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::atoi(argv[++i]) : 0; };
    if (a == "-p") port = next();
    else if (a == "-n") messages = static_cast<std::uint32_t>(next());
    else if (a == "-r") per_second = next();
    else if (a == "-T") timeout = next();
    else server = argv[i];
  }
  const bool client = server != nullptr;
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list || n < 1) die("no device");
  ibv_context* ctx = ibv_open_device(list[0]);
  if (!ctx) die("open %s", ibv_get_device_name(list[0]));
  ibv_pd* pd = ibv_alloc_pd(ctx);
  constexpr std::size_t size = 1024, slots = 64;
  std::vector<std::uint8_t> buf(size * slots * 2);
  const int access = IBV_ACCESS_LOCAL_WRITE;
  ibv_mr* mr = ibv_reg_mr(pd, buf.data(), buf.size(), access);
  ibv_cq* cq = ibv_create_cq(ctx, 256, nullptr, nullptr, 0);
  ibv_qp_init_attr qi{};
  qi.send_cq = qi.recv_cq = cq;
  qi.qp_type = IBV_QPT_RC;
  qi.cap = {.max_send_wr = 64, .max_recv_wr = 128, .max_send_sge = 1, .max_recv_sge = 1, .max_inline_data = 0};
  ibv_qp* qp = ibv_create_qp(pd, &qi);
  if (!pd || !mr || !cq || !qp) die("resources: %s", std::strerror(errno));
  wire_info me{}, peer{};
  me.qpn = qp->qp_num;
  me.psn = client ? 0x1000 : 0x2000;
  ibv_device_attr da{};
  if (ibv_query_device(ctx, &da)) die("query_device");
  const std::uint8_t alt_port = da.phys_port_cnt >= 2 ? 2 : 1, alt_index = alt_port == 2 ? 0 : 1;
  ibv_gid g{};
  if (ibv_query_gid(ctx, 1, 0, &g)) die("GID 0");
  std::memcpy(me.gid0, g.raw, 16);
  if (ibv_query_gid(ctx, alt_port, alt_index, &g))
    die("port %u GID %u: the device needs a second port (NAME:IPV4+IPV4) or an IPv6 address (NAME:IPV4@IPV6)", alt_port, alt_index);
  std::memcpy(me.alt, g.raw, 16);
  const int s = tcp(server, port);
  if (!full_io(s, &me, sizeof me, true) || !full_io(s, &peer, sizeof peer, false)) die("exchange");
  ::close(s);

  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  modify(qp, a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, "INIT");
  a = {};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = peer.qpn;
  a.rq_psn = peer.psn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 1;
  a.ah_attr = path(peer.gid0, 1, 0);
  modify(qp, a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER, "RTR");
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = static_cast<std::uint8_t>(timeout);
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.sq_psn = me.psn;
  a.max_rd_atomic = 1;
  modify(qp, a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC, "RTS");
  a = {};
  a.alt_ah_attr = path(peer.alt, alt_port, alt_index);
  a.alt_port_num = alt_port;
  a.alt_timeout = static_cast<std::uint8_t>(timeout);
  a.path_mig_state = IBV_MIG_REARM;
  modify(qp, a, IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE, "arm the alternate path");
  ibv_qp_init_attr ia{};
  if (ibv_query_qp(qp, &a, IBV_QP_PATH_MIG_STATE, &ia) || a.path_mig_state != IBV_MIG_ARMED) die("the alternate path is not armed");
  std::printf("armed: path GID 0, alternate GID 1\n");
  std::fflush(stdout);

  std::uint32_t done = 0, posted = 0, in_flight = 0;
  ibv_wc wc[32];
  auto post_recv = [&](std::uint64_t slot) {
    ibv_sge sg{reinterpret_cast<std::uintptr_t>(buf.data() + slot * size), size, mr->lkey};
    ibv_recv_wr w{.wr_id = slot, .next = nullptr, .sg_list = &sg, .num_sge = 1}, *bad = nullptr;
    if (ibv_post_recv(qp, &w, &bad)) die("post_recv");
  };
  if (!client)
    for (std::uint64_t k = 0; k < slots; ++k) post_recv(k);
  const auto start = std::chrono::steady_clock::now();
  auto last = start;
  while (done < messages) {
    if (client && in_flight < 16 && posted < messages &&
        std::chrono::steady_clock::now() >= start + std::chrono::microseconds(std::uint64_t{posted} * 1'000'000 / per_second)) {
      std::uint8_t* m = buf.data() + (slots + posted % slots) * size;
      std::memcpy(m, &posted, 4);
      ibv_sge sg{reinterpret_cast<std::uintptr_t>(m), size, mr->lkey};
      ibv_send_wr w{};
      w.wr_id = posted;
      w.sg_list = &sg;
      w.num_sge = 1;
      w.opcode = IBV_WR_SEND;
      w.send_flags = IBV_SEND_SIGNALED;
      ibv_send_wr* bad = nullptr;
      if (ibv_post_send(qp, &w, &bad)) die("post_send");
      ++posted, ++in_flight;
    }
    const int k = ibv_poll_cq(cq, 32, wc);
    if (k < 0) die("poll_cq");
    for (int i = 0; i < k; ++i) {
      if (wc[i].status != IBV_WC_SUCCESS) die("message %u: %s", done, ibv_wc_status_str(wc[i].status));
      if (client) {
        --in_flight, ++done;
      } else {
        std::uint32_t v = 0;
        std::memcpy(&v, buf.data() + wc[i].wr_id * size, 4);
        if (v != done) die("message %u arrived where %u was due", v, done);
        ++done;
        post_recv(wc[i].wr_id);
      }
      last = std::chrono::steady_clock::now();
    }
    if (std::chrono::steady_clock::now() - last > std::chrono::seconds(20)) die("no progress for 20 s at message %u", done);
    if (!k) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  // IBV_EVENT_PATH_MIG for this QP
  bool migrated = false;
  pollfd pf{ctx->async_fd, POLLIN, 0};
  const int fl = ::fcntl(ctx->async_fd, F_GETFL);
  ::fcntl(ctx->async_fd, F_SETFL, fl | O_NONBLOCK);
  for (int waited = 0; !migrated && waited < 50; ++waited) {
    if (::poll(&pf, 1, 100) <= 0) continue;
    ibv_async_event e;
    while (ibv_get_async_event(ctx, &e) == 0) {
      if (e.event_type == IBV_EVENT_PATH_MIG && e.element.qp == qp) migrated = true;
      else std::fprintf(stderr, "pushwire-apm: event %s\n", ibv_event_type_str(e.event_type));
      ibv_ack_async_event(&e);
    }
  }
  if (!migrated) die("no IBV_EVENT_PATH_MIG");
  if (ibv_query_qp(qp, &a, IBV_QP_STATE | IBV_QP_PATH_MIG_STATE | IBV_QP_AV, &ia)) die("query_qp");
  if (a.qp_state != IBV_QPS_RTS) die("the QP is not in RTS");
  if (a.path_mig_state != IBV_MIG_MIGRATED) die("path_mig_state %d, not MIGRATED", a.path_mig_state);
  if (std::memcmp(a.ah_attr.grh.dgid.raw, peer.alt, 16) != 0 || a.ah_attr.port_num != alt_port || a.port_num != alt_port ||
      a.ah_attr.grh.sgid_index != alt_index)
    die("the path (port %u, GID %u) is not the alternate", a.ah_attr.port_num, a.ah_attr.grh.sgid_index);
  std::printf("ok: %u messages %s once and in order; IBV_EVENT_PATH_MIG; the QP on its alternate path (port %u GID %u), MIGRATED\n", messages,
              client ? "sent" : "received", alt_port, alt_index);
  ibv_destroy_qp(qp);
  ibv_destroy_cq(cq);
  ibv_dereg_mr(mr);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  ibv_free_device_list(list);
  return 0;
}
