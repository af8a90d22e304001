// pushwire-datacheck: a long RC transfer between two programs that checks every byte and every
// atomic result (tests/verbs/migrate.sh runs it while one side's function moves).
//
//   pushwire-datacheck [-d DEVICE] [-g GID_INDEX] [-p TCP_PORT] [-t SECONDS]            (server)
//   pushwire-datacheck [-d DEVICE] [-g GID_INDEX] [-p TCP_PORT] [-t SECONDS] SERVER_IP  (client)
//
// Both sides run the same iterations in lock step over one RC QP. In iteration i each side posts
// to the other: an RDMA WRITE with immediate (1..65536 bytes into one of two slots, imm = i), a
// SEND (a 16-byte header and up to 4000 bytes), an RDMA READ of part of the other side's fixed
// pattern, a FETCH_AND_ADD and a COMPARE_AND_SWAP (one in five compares a wrong value) on a
// counter only it changes (one of two, by the iteration's parity). Every byte is a function of (side, iteration, kind, offset), so each
// side checks what it received, what it read, what the atomics returned, and its own counter
// against the value the SEND announces. It then waits for the other side's messages of the same
// iteration before it starts the next (a slot is written again two iterations later, after its
// reader has checked it). The client runs -t seconds (default 10) and then tells the server the
// last iteration. Any completion that is not a success, any byte that differs or that a WRITE or
// READ changed beyond its length, a QP that is not RTS at the end, or 20 s without progress:
// exit 1 with what and where. Success prints one line starting "ok:".
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "exchange.hpp"

using pushwire::test::die;

using pushwire::test::full_io;

namespace {

constexpr std::uint32_t max_write = 65536, max_send = 4000, header = 16, ro_bytes = 65536, receives = 8;
constexpr std::uint32_t recv_size = header + max_send;
enum kind : std::uint64_t { k_write = 1, k_send = 2, k_ro = 3, k_add = 4, k_swap = 5, k_len = 6 };

std::uint64_t mix(std::uint64_t x) {  // splitmix64's finaliser
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
std::uint64_t draw(int side, std::uint64_t i, kind k) { return mix((std::uint64_t(side) << 60) ^ (i << 4) ^ k); }
/// Byte `at` of the stream (side, i, k).
void fill(std::uint8_t* p, std::uint32_t n, int side, std::uint64_t i, kind k, std::uint32_t from = 0) {
  const std::uint64_t base = draw(side, i, k);
  for (std::uint32_t j = 0; j < n; ++j) {
    const std::uint32_t at = from + j;
    p[j] = static_cast<std::uint8_t>(mix(base ^ (at / 8)) >> (8 * (at % 8)));
  }
}
constexpr std::uint8_t guard = 0xA5;  ///< what no one wrote: slots and the READ buffer between uses
/// The first offset in [from, to) of p not `guard`, or -1.
long overrun(const std::uint8_t* p, std::uint32_t from, std::uint32_t to) {
  for (std::uint32_t j = from; j < to; ++j)
    if (p[j] != guard) return j;
  return -1;
}
/// The first differing offset, or -1.
long differs(const std::uint8_t* p, std::uint32_t n, int side, std::uint64_t i, kind k, std::uint32_t from = 0) {
  std::vector<std::uint8_t> want(n);
  fill(want.data(), n, side, i, k, from);
  for (std::uint32_t j = 0; j < n; ++j)
    if (p[j] != want[j]) return j;
  return -1;
}
std::uint32_t write_len(int side, std::uint64_t i) { return 1 + static_cast<std::uint32_t>(draw(side, i, k_len) % max_write); }
std::uint32_t send_len(int side, std::uint64_t i) { return static_cast<std::uint32_t>((draw(side, i, k_len) >> 20) % (max_send + 1)); }


struct wire_info {  // exchanged over TCP, host order (both ends are this program on one host type)
  std::uint32_t qpn, psn, rkey, pad;
  std::uint64_t addr;
  std::uint8_t gid[16];
};

// The registered memory: what the peer writes, reads and changes, then this side's own buffers.
struct layout {
  static constexpr std::size_t slots = 0, ro = 2 * max_write, counter = ro + ro_bytes, recvs = counter + 64,
                               src = recvs + receives * recv_size, msg = src + max_write, dst = msg + recv_size, results = dst + ro_bytes,
                               total = results + 64;
};

int exchange_socket(const char* server, int port) {
  std::string why;
  const int s = pushwire::test::exchange_socket(server, port, why);
  if (s < 0) die("%s", why.c_str());
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  pushwire::test::program_name = "pushwire-datacheck";
  const char* dev_name = nullptr;
  int gid_index = 0, port = 18515;
  double seconds = 10;
  int opt;
  while ((opt = ::getopt(argc, argv, "d:g:p:t:")) != -1) {
    if (opt == 'd') dev_name = optarg;
    else if (opt == 'g') gid_index = std::atoi(optarg);
    else if (opt == 'p') port = std::atoi(optarg);
    else if (opt == 't') seconds = std::atof(optarg);
    else {
      std::fprintf(stderr, "usage: pushwire-datacheck [-d DEVICE] [-g GID_INDEX] [-p TCP_PORT] [-t SECONDS] [SERVER_IP]\n");
      return 64;
    }
  }
  const char* server = optind < argc ? argv[optind] : nullptr;
  const int me = server ? 1 : 0, peer = 1 - me;

  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  ibv_device* dev = nullptr;
  for (int i = 0; i < n; ++i)
    if (!dev_name || std::strcmp(ibv_get_device_name(list[i]), dev_name) == 0) dev = list[i];
  if (!dev) die("no device %s", dev_name ? dev_name : "at all");
  ibv_context* ctx = ibv_open_device(dev);
  if (!ctx) die("ibv_open_device: %s", std::strerror(errno));
  ibv_device_attr da{};
  ibv_port_attr pa{};
  ibv_gid gid{};
  if (ibv_query_device(ctx, &da) || ibv_query_port(ctx, 1, &pa) || ibv_query_gid(ctx, 1, gid_index, &gid)) die("query: %s", std::strerror(errno));
  ibv_pd* pd = ibv_alloc_pd(ctx);
  std::vector<std::uint8_t> mem_v(layout::total + 64);
  auto* mem = reinterpret_cast<std::uint8_t*>((reinterpret_cast<std::uintptr_t>(mem_v.data()) + 63) & ~std::uintptr_t{63});
  fill(mem + layout::ro, ro_bytes, me, 0, k_ro);
  std::memset(mem + layout::slots, guard, 2 * max_write);
  ibv_mr* mr = pd ? ibv_reg_mr(pd, mem, layout::total,
                               IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)
                  : nullptr;
  ibv_cq* cq = mr ? ibv_create_cq(ctx, 64, nullptr, nullptr, 0) : nullptr;
  if (!cq) die("pd / mr / cq: %s", std::strerror(errno));
  ibv_qp_init_attr qa{};
  qa.send_cq = qa.recv_cq = cq;
  qa.qp_type = IBV_QPT_RC;
  qa.cap = {.max_send_wr = 16, .max_recv_wr = receives, .max_send_sge = 1, .max_recv_sge = 1, .max_inline_data = 0};
  ibv_qp* qp = ibv_create_qp(pd, &qa);
  if (!qp) die("ibv_create_qp: %s", std::strerror(errno));
  const std::uint8_t rd = static_cast<std::uint8_t>(std::clamp(da.max_qp_rd_atom, 1, 4));

  auto post_recv = [&](std::uint32_t k) {
    ibv_sge sg{reinterpret_cast<std::uint64_t>(mem + layout::recvs + k * recv_size), recv_size, mr->lkey};
    ibv_recv_wr wr{}, *bad = nullptr;
    wr.wr_id = k, wr.sg_list = &sg, wr.num_sge = 1;
    if (ibv_post_recv(qp, &wr, &bad)) die("ibv_post_recv: %s", std::strerror(errno));
  };

  // Connect: INIT, exchange, RTR, RTS.
  ibv_qp_attr at{};
  at.qp_state = IBV_QPS_INIT, at.port_num = 1;
  at.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
  if (ibv_modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) die("INIT: %s", std::strerror(errno));
  for (std::uint32_t k = 0; k < receives; ++k) post_recv(k);
  const int sock = exchange_socket(server, port);
  wire_info mine{qp->qp_num, static_cast<std::uint32_t>(draw(me, 7, k_len) & 0xFFFFFF), mr->rkey, 0, reinterpret_cast<std::uint64_t>(mem), {}};
  std::memcpy(mine.gid, gid.raw, 16);
  wire_info theirs{};
  if (!full_io(sock, &mine, sizeof mine, true) || !full_io(sock, &theirs, sizeof theirs, false)) die("the address exchange failed");
  at = {};
  at.qp_state = IBV_QPS_RTR, at.path_mtu = pa.active_mtu, at.dest_qp_num = theirs.qpn, at.rq_psn = theirs.psn;
  at.max_dest_rd_atomic = rd, at.min_rnr_timer = 12;
  at.ah_attr.is_global = 1, at.ah_attr.port_num = 1, at.ah_attr.grh.hop_limit = 64, at.ah_attr.grh.sgid_index = static_cast<std::uint8_t>(gid_index);
  std::memcpy(at.ah_attr.grh.dgid.raw, theirs.gid, 16);
  if (ibv_modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
    die("RTR: %s", std::strerror(errno));
  at = {};
  at.qp_state = IBV_QPS_RTS, at.timeout = 14, at.retry_cnt = 7, at.rnr_retry = 7, at.sq_psn = mine.psn, at.max_rd_atomic = rd;
  if (ibv_modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
    die("RTS: %s", std::strerror(errno));
  char go = 1;  // both are RTS before anything is sent
  if (!full_io(sock, &go, 1, true) || !full_io(sock, &go, 1, false)) die("the start signal failed");

  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  // What the peer's two counters hold: changed only by this side, iteration i's atomics on
  // counter i % 2 (the peer may run one iteration ahead, on the other counter, while this side
  // checks its own counter i % 2 against the peer's word).
  std::uint64_t models[2] = {0, 0};
  std::deque<ibv_wc> early;
  std::uint64_t stop_at = ~0ull, bytes_written = 0, bytes_sent = 0, bytes_read = 0, atomics = 0;
  for (std::uint64_t i = 0;; ++i) {
    // Post: WRITE with immediate, READ, FETCH_AND_ADD, COMPARE_AND_SWAP, then the SEND that
    // announces the counter (it arrives after the atomics executed).
    const std::uint32_t wlen = write_len(me, i), slen = send_len(me, i);
    const std::uint32_t roff = static_cast<std::uint32_t>(draw(me, i, k_ro) % ro_bytes);
    const std::uint32_t rlen = 1 + static_cast<std::uint32_t>((draw(me, i, k_ro) >> 32) % (ro_bytes - roff));
    const std::uint64_t add = draw(me, i, k_add), swap = draw(me, i, k_swap);
    const bool cs_hits = i % 5 != 0;
    std::uint64_t& model = models[i % 2];
    const std::uint64_t fa_old = model, cs_compare = cs_hits ? model + add : model + add + 1;
    model = cs_hits ? swap : model + add;
    const std::uint64_t counter_at = theirs.addr + layout::counter + 8 * (i % 2);
    if (me == 1 && stop_at == ~0ull && std::chrono::duration<double>(clock::now() - start).count() >= seconds) stop_at = i + 2;
    fill(mem + layout::src, wlen, me, i, k_write);
    std::uint8_t* m = mem + layout::msg;
    fill(m + header, slen, me, i, k_send);
    auto* results = reinterpret_cast<std::uint64_t*>(mem + layout::results);
    results[0] = results[1] = 0xDEADBEEFDEADBEEFull;
    std::memset(mem + layout::dst, guard, ro_bytes);
    ibv_sge sg[5] = {
        {reinterpret_cast<std::uint64_t>(mem + layout::src), wlen, mr->lkey},
        {reinterpret_cast<std::uint64_t>(mem + layout::dst), rlen, mr->lkey},
        {reinterpret_cast<std::uint64_t>(&results[0]), 8, mr->lkey},
        {reinterpret_cast<std::uint64_t>(&results[1]), 8, mr->lkey},
        {reinterpret_cast<std::uint64_t>(m), header + slen, mr->lkey},
    };
    // The SEND's header: the iteration, the counter, and (client) the last iteration.
    const std::uint64_t announce[2] = {i | (stop_at == ~0ull ? 0 : stop_at << 32), model};
    std::memcpy(m, announce, 16);
    ibv_send_wr wr[5]{};
    for (int k = 0; k < 5; ++k) {
      wr[k].wr_id = static_cast<std::uint64_t>(k);
      wr[k].sg_list = &sg[k];
      wr[k].num_sge = 1;
      wr[k].send_flags = IBV_SEND_SIGNALED;
      wr[k].next = k < 4 ? &wr[k + 1] : nullptr;
    }
    wr[0].opcode = IBV_WR_RDMA_WRITE_WITH_IMM, wr[0].imm_data = htonl(static_cast<std::uint32_t>(i));
    wr[0].wr.rdma = {theirs.addr + layout::slots + (i % 2) * max_write, theirs.rkey};
    wr[1].opcode = IBV_WR_RDMA_READ, wr[1].wr.rdma = {theirs.addr + layout::ro + roff, theirs.rkey};
    wr[2].opcode = IBV_WR_ATOMIC_FETCH_AND_ADD, wr[2].wr.atomic = {counter_at, add, 0, theirs.rkey};
    wr[3].opcode = IBV_WR_ATOMIC_CMP_AND_SWP, wr[3].wr.atomic = {counter_at, cs_compare, swap, theirs.rkey};
    wr[4].opcode = IBV_WR_SEND;
    ibv_send_wr* bad = nullptr;
    if (ibv_post_send(qp, wr, &bad)) die("iteration %" PRIu64 ": ibv_post_send: %s", i, std::strerror(errno));

    // Wait: five send completions in order, and the peer's WRITE with immediate and SEND.
    // The peer may be an iteration ahead: its next messages wait in `early` for the next one.
    int sends = 0, recvs = 0;
    std::uint64_t peer_stop = ~0ull;
    auto last_progress = clock::now();
    while (sends < 5 || recvs < 2) {
      ibv_wc wc[8];
      int got = 0;
      while (recvs < 2 && !early.empty() && got < 8) wc[got++] = early.front(), early.pop_front();
      if (got == 0) got = ibv_poll_cq(cq, 8, wc);
      if (got < 0) die("ibv_poll_cq: %d", got);
      if (got == 0) {
        if (clock::now() - last_progress > std::chrono::seconds(20))
          die("iteration %" PRIu64 ": no progress for 20 s (%d of 5 sends, %d of 2 receives complete)", i, sends, recvs);
        continue;
      }
      last_progress = clock::now();
      for (int k = 0; k < got; ++k) {
        const ibv_wc& c = wc[k];
        if (c.status == IBV_WC_SUCCESS && (c.opcode & IBV_WC_RECV) && recvs == 2) {
          early.push_back(c);
          continue;
        }
        if (c.status != IBV_WC_SUCCESS)
          die("iteration %" PRIu64 ": completion of wr %" PRIu64 " (opcode %d): %s (vendor error %u)", i, c.wr_id, c.opcode,
              ibv_wc_status_str(c.status), c.vendor_err);
        if (!(c.opcode & IBV_WC_RECV)) {
          if (c.wr_id != static_cast<std::uint64_t>(sends)) die("iteration %" PRIu64 ": send completion %" PRIu64 " where %d was next", i, c.wr_id, sends);
          ++sends;
          continue;
        }
        const std::uint8_t* buf = mem + layout::recvs + c.wr_id * recv_size;
        if (recvs == 0) {  // the WRITE with immediate
          if (c.opcode != IBV_WC_RECV_RDMA_WITH_IMM || !(c.wc_flags & IBV_WC_WITH_IMM))
            die("iteration %" PRIu64 ": receive %d is opcode %d, not the WRITE with immediate", i, recvs, c.opcode);
          const std::uint32_t plen = write_len(peer, i);
          if (ntohl(c.imm_data) != static_cast<std::uint32_t>(i)) die("iteration %" PRIu64 ": immediate %u", i, ntohl(c.imm_data));
          if (c.byte_len != plen) die("iteration %" PRIu64 ": WRITE with immediate of %u bytes, not %u", i, c.byte_len, plen);
          std::uint8_t* slot = mem + layout::slots + (i % 2) * max_write;
          if (const long at = differs(slot, plen, peer, i, k_write); at >= 0) die("iteration %" PRIu64 ": written byte %ld of %u differs", i, at, plen);
          if (const long at = overrun(slot, plen, max_write); at >= 0) die("iteration %" PRIu64 ": a WRITE of %u bytes changed byte %ld", i, plen, at);
          std::memset(slot, guard, max_write);  // the peer writes it again two iterations on
          bytes_written += plen;
        } else {  // the SEND
          if (c.opcode != IBV_WC_RECV) die("iteration %" PRIu64 ": receive %d is opcode %d, not the SEND", i, recvs, c.opcode);
          const std::uint32_t plen = send_len(peer, i);
          std::uint64_t h[2];
          std::memcpy(h, buf, 16);
          if (c.byte_len != header + plen) die("iteration %" PRIu64 ": SEND of %u bytes, not %u", i, c.byte_len, header + plen);
          if ((h[0] & 0xFFFFFFFF) != (i & 0xFFFFFFFF)) die("iteration %" PRIu64 ": the SEND names iteration %" PRIu64, i, h[0] & 0xFFFFFFFF);
          if (const long at = differs(buf + header, plen, peer, i, k_send); at >= 0) die("iteration %" PRIu64 ": sent byte %ld of %u differs", i, at, plen);
          std::uint64_t counter;
          std::memcpy(&counter, mem + layout::counter + 8 * (i % 2), 8);
          if (counter != h[1]) die("iteration %" PRIu64 ": my counter holds %#" PRIx64 ", the peer's atomics make it %#" PRIx64, i, counter, h[1]);
          if (h[0] >> 32) peer_stop = h[0] >> 32;
          bytes_sent += plen;
        }
        post_recv(static_cast<std::uint32_t>(c.wr_id));
        ++recvs;
      }
    }
    if (const long at = differs(mem + layout::dst, rlen, peer, 0, k_ro, roff); at >= 0) die("iteration %" PRIu64 ": read byte %ld of %u (at %u) differs", i, at, rlen, roff);
    if (const long at = overrun(mem + layout::dst, rlen, ro_bytes); at >= 0) die("iteration %" PRIu64 ": a READ of %u bytes changed byte %ld", i, rlen, at);
    bytes_read += rlen;
    if (results[0] != fa_old) die("iteration %" PRIu64 ": FETCH_AND_ADD returned %#" PRIx64 ", not %#" PRIx64, i, results[0], fa_old);
    if (results[1] != fa_old + add) die("iteration %" PRIu64 ": COMPARE_AND_SWAP returned %#" PRIx64 ", not %#" PRIx64, i, results[1], fa_old + add);
    atomics += 2;
    if (me == 0 && peer_stop != ~0ull) stop_at = peer_stop;
    if (i == stop_at) {
      ibv_qp_attr q{};
      ibv_qp_init_attr qi{};
      if (ibv_query_qp(qp, &q, IBV_QP_STATE, &qi)) die("ibv_query_qp: %s", std::strerror(errno));
      if (q.qp_state != IBV_QPS_RTS) die("the QP ended in state %d, not RTS", q.qp_state);
      std::printf("ok: %" PRIu64 " iterations in %.1f s, every byte checked: %.1f MiB written with immediate, %.1f MiB sent, %.1f MiB read, %" PRIu64
                  " atomics; the QP is RTS\n",
                  i + 1, std::chrono::duration<double>(clock::now() - start).count(), bytes_written / 1048576.0, bytes_sent / 1048576.0,
                  bytes_read / 1048576.0, atomics);
      break;
    }
  }
  char done = 1;  // neither side destroys its QP while the other may still need its ACKs
  if (!full_io(sock, &done, 1, true) || !full_io(sock, &done, 1, false)) die("the end signal failed");
  ::close(sock);
  ibv_destroy_qp(qp);
  ibv_destroy_cq(cq);
  ibv_dereg_mr(mr);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  ibv_free_device_list(list);
  return 0;
}
