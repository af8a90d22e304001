// libpushwire-verbs.so: libibverbs' ABI over pushwire's reference RNIC (spec/verbs.md).
//
// Loaded before libibverbs.so.1 (LD_PRELOAD, or `pushwire-verbs run`), it defines the verbs that
// touch a device under libibverbs' own symbol versions (libpushwire-verbs.map), so a program and
// the libraries it loads (pyverbs, librdmacm, perftest) reach these instead. The objects it hands
// out are libibverbs' structures; the context is a verbs_context whose ops (the inline
// ibv_post_send, ibv_poll_cq, ibv_create_qp_ex, ...) point here.
//
// Each opened device is one rnic::device behind a UDP socket per port (net::udp_port), shared by every
// context of the process that opens it, driven under one lock both by the verbs (a post sends at
// once; a poll that finds nothing runs the device) and by a progress thread that sleeps in poll()
// on the sockets until a datagram or a timer is due. This file only translates: the rules of
// queue pairs, keys and transport are rnic/'s and flow/'s.
#include <infiniband/verbs.h>

#include <arpa/inet.h>
#include <endian.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include <pushwire/net/cardmem.hpp>
#include <pushwire/net/loop.hpp>
#include <pushwire/net/pages.hpp>
#include <pushwire/net/shm.hpp>
#include <pushwire/net/udp.hpp>
#ifdef PUSHWIRE_HAVE_XDP
#include <pushwire/net/xdp.hpp>
#endif
#include <pushwire/rnic/attach.hpp>
#include <pushwire/rnic/device.hpp>
#include <pushwire/version.hpp>

#include "config.hpp"
#include "pushwire-dv.h"

#define PW_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

namespace rnic = pushwire::rnic;
namespace net = pushwire::net;
namespace cfg = pushwire::verbs;

// ---- the casts between rnic's enums and libibverbs' rely on equal values ----------------------
template <class R, class V>
constexpr bool same(R r, V v) { return static_cast<long long>(r) == static_cast<long long>(v); }
// ibv_wc_status (fill_wc, cqx start_poll)
static_assert(same(rnic::wc_status::success, IBV_WC_SUCCESS) && same(rnic::wc_status::local_length_error, IBV_WC_LOC_LEN_ERR) &&
              same(rnic::wc_status::local_qp_operation_error, IBV_WC_LOC_QP_OP_ERR) &&
              same(rnic::wc_status::local_protection_error, IBV_WC_LOC_PROT_ERR) && same(rnic::wc_status::flushed, IBV_WC_WR_FLUSH_ERR) &&
              same(rnic::wc_status::bad_response, IBV_WC_BAD_RESP_ERR) && same(rnic::wc_status::local_access_error, IBV_WC_LOC_ACCESS_ERR) &&
              same(rnic::wc_status::remote_invalid_request, IBV_WC_REM_INV_REQ_ERR) &&
              same(rnic::wc_status::remote_access_error, IBV_WC_REM_ACCESS_ERR) &&
              same(rnic::wc_status::remote_operational_error, IBV_WC_REM_OP_ERR) &&
              same(rnic::wc_status::retry_exceeded, IBV_WC_RETRY_EXC_ERR) && same(rnic::wc_status::rnr_retry_exceeded, IBV_WC_RNR_RETRY_EXC_ERR) &&
              same(rnic::wc_status::fatal, IBV_WC_FATAL_ERR));
// ibv_wc_opcode (wc_opcode_of)
static_assert(same(rnic::wc_opcode::send, IBV_WC_SEND) && same(rnic::wc_opcode::rdma_write, IBV_WC_RDMA_WRITE) &&
              same(rnic::wc_opcode::rdma_read, IBV_WC_RDMA_READ) && same(rnic::wc_opcode::compare_swap, IBV_WC_COMP_SWAP) &&
              same(rnic::wc_opcode::fetch_add, IBV_WC_FETCH_ADD) && same(rnic::wc_opcode::recv, IBV_WC_RECV) &&
              same(rnic::wc_opcode::recv_rdma_with_imm, IBV_WC_RECV_RDMA_WITH_IMM));
// ibv_qp_state (modify_qp, query_qp)
static_assert(same(rnic::qp_state::reset, IBV_QPS_RESET) && same(rnic::qp_state::init, IBV_QPS_INIT) && same(rnic::qp_state::rtr, IBV_QPS_RTR) &&
              same(rnic::qp_state::rts, IBV_QPS_RTS) && same(rnic::qp_state::sqd, IBV_QPS_SQD) && same(rnic::qp_state::sqe, IBV_QPS_SQE) &&
              same(rnic::qp_state::err, IBV_QPS_ERR));
// ibv_access_flags (rights_of, modify_qp's access flags)
static_assert(same(rnic::access::local_write, IBV_ACCESS_LOCAL_WRITE) && same(rnic::access::remote_write, IBV_ACCESS_REMOTE_WRITE) &&
              same(rnic::access::remote_read, IBV_ACCESS_REMOTE_READ) && same(rnic::access::remote_atomic, IBV_ACCESS_REMOTE_ATOMIC));
// ibv_qp_attr_mask (modify_qp passes the mask through)
static_assert(same(rnic::qp_attr_mask::state, IBV_QP_STATE) && same(rnic::qp_attr_mask::cur_state, IBV_QP_CUR_STATE) &&
              same(rnic::qp_attr_mask::en_sqd_async_notify, IBV_QP_EN_SQD_ASYNC_NOTIFY) &&
              same(rnic::qp_attr_mask::access_flags, IBV_QP_ACCESS_FLAGS) && same(rnic::qp_attr_mask::pkey_index, IBV_QP_PKEY_INDEX) &&
              same(rnic::qp_attr_mask::port, IBV_QP_PORT) && same(rnic::qp_attr_mask::qkey, IBV_QP_QKEY) && same(rnic::qp_attr_mask::av, IBV_QP_AV) &&
              same(rnic::qp_attr_mask::path_mtu, IBV_QP_PATH_MTU) && same(rnic::qp_attr_mask::timeout, IBV_QP_TIMEOUT) &&
              same(rnic::qp_attr_mask::retry_cnt, IBV_QP_RETRY_CNT) && same(rnic::qp_attr_mask::rnr_retry, IBV_QP_RNR_RETRY) &&
              same(rnic::qp_attr_mask::rq_psn, IBV_QP_RQ_PSN) && same(rnic::qp_attr_mask::max_qp_rd_atomic, IBV_QP_MAX_QP_RD_ATOMIC) &&
              same(rnic::qp_attr_mask::alt_path, IBV_QP_ALT_PATH) && same(rnic::qp_attr_mask::min_rnr_timer, IBV_QP_MIN_RNR_TIMER) &&
              same(rnic::qp_attr_mask::sq_psn, IBV_QP_SQ_PSN) && same(rnic::qp_attr_mask::max_dest_rd_atomic, IBV_QP_MAX_DEST_RD_ATOMIC) &&
              same(rnic::qp_attr_mask::path_mig_state, IBV_QP_PATH_MIG_STATE) && same(rnic::qp_attr_mask::cap, IBV_QP_CAP) &&
              same(rnic::qp_attr_mask::dest_qpn, IBV_QP_DEST_QPN));
// ibv_mig_state
static_assert(same(rnic::mig_state::migrated, IBV_MIG_MIGRATED) && same(rnic::mig_state::rearm, IBV_MIG_REARM) &&
              same(rnic::mig_state::armed, IBV_MIG_ARMED));
// ibv_send_flags (the descriptor's flags are verbs' own bits)
static_assert(same(rnic::send_fence, IBV_SEND_FENCE) && same(rnic::send_signaled, IBV_SEND_SIGNALED) &&
              same(rnic::send_solicited, IBV_SEND_SOLICITED) && same(rnic::send_inline, IBV_SEND_INLINE));
// ibv_wr_opcode (the verbs' opcodes map to wr_opcode case by case; the values agree as well)
static_assert(same(rnic::wr_opcode::rdma_write, IBV_WR_RDMA_WRITE) && same(rnic::wr_opcode::rdma_write_with_imm, IBV_WR_RDMA_WRITE_WITH_IMM) &&
              same(rnic::wr_opcode::send, IBV_WR_SEND) && same(rnic::wr_opcode::send_with_imm, IBV_WR_SEND_WITH_IMM) &&
              same(rnic::wr_opcode::rdma_read, IBV_WR_RDMA_READ) && same(rnic::wr_opcode::atomic_cmp_and_swp, IBV_WR_ATOMIC_CMP_AND_SWP) &&
              same(rnic::wr_opcode::atomic_fetch_and_add, IBV_WR_ATOMIC_FETCH_AND_ADD));
// ibv_qp_type
static_assert(same(rnic::qp_type::rc, IBV_QPT_RC) && same(rnic::qp_type::uc, IBV_QPT_UC) && same(rnic::qp_type::ud, IBV_QPT_UD));

// ---- limits the device reports (spec/verbs.md §3) -------------------------------------------
constexpr std::uint32_t max_qp_wr = 16384;      // send / receive queue depth (rings up to 2^16)
constexpr std::uint32_t max_cqe = 1u << 20;     // entries of one CQ
constexpr std::uint32_t max_inline_data = 256;  // inline bytes of one send (rxe's 256)
constexpr std::uint32_t max_srq_wr = 16384;
constexpr std::uint32_t max_ah = 65536;
constexpr std::uint32_t max_msg_sz = 1u << 31;
/// A destroyed RC QP answers its peer's retransmissions for up to this long (device_config::
/// linger), and closing the device waits for that: a program's last ACK may have been lost.
constexpr rnic::time_ns linger_max = 1'000'000'000;
/// ACK coalescing (device_config::ack_delay): an ACK waits this long for the answer it can
/// leave with.
constexpr rnic::time_ns ack_delay = 50'000;
/// The progress thread leaves the device to the program for this long after the program last
/// polled an empty CQ (and so ran the device itself): a busy-polling program is not
/// interrupted. A program waiting otherwise (on memory a peer writes, in a TCP read) is served
/// by the thread.
constexpr rnic::time_ns app_grace = 200'000;
/// The longest the progress thread sleeps with nothing due: nothing wakes it sooner but a
/// datagram, its wake-up eventfd, or a deadline.
constexpr rnic::time_ns idle_limit = 10'000'000'000;

void warn(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void warn(const char* fmt, ...) {
  std::va_list ap;
  va_start(ap, fmt);
  std::fputs("pushwire-verbs: ", stderr);
  std::vfprintf(stderr, fmt, ap);
  std::fputc('\n', stderr);
  va_end(ap);
}

/// The errno of a device error (verbs return these as values or set errno).
int to_errno(rnic::errc e) {
  switch (e) {
    case rnic::errc::no_resources: return ENOMEM;
    case rnic::errc::queue_full: return ENOMEM;
    case rnic::errc::busy: return EBUSY;
    default: return e == rnic::errc{} ? 0 : EINVAL;
  }
}
template <class T>
T* fail(int e) {
  errno = e;
  return nullptr;
}

struct engine;
struct context_impl;

// ---- devices --------------------------------------------------------------------------------
/// What ibv_get_device_list hands out. libibverbs' verbs_device keeps its provider's ops right
/// after the ibv_device, where vendor libraries (libmlx5, libefa) look: null says "not ours".
struct pw_device {
  ibv_device dev;
  const void* verbs_ops;
  std::uint32_t index;
};
static_assert(std::is_standard_layout_v<pw_device>);

struct registry {
  std::vector<cfg::device_spec> specs;
  std::unique_ptr<pw_device[]> devices;
  cfg::fault_spec faults;
  cfg::qos_spec qos;
  rnic::platform_model platform;  ///< every device's (PUSHWIRE_VERBS_PLATFORM; no cards by default)
  /// The progress threads' busy polling after traffic, ns (PUSHWIRE_VERBS_BUSY_POLL, in µs;
  /// default net::default_busy_poll(): off on 2 cores or fewer).
  rnic::time_ns busy_poll = net::default_busy_poll();
  /// Where a device's counters go when its last context closes (PUSHWIRE_VERBS_STATS): empty,
  /// nowhere; "-", stderr; else a file appended to.
  std::string stats;
  std::mutex mu;
  std::vector<engine*> engines;  // by device index, while open
};

std::string read_file(const char* path, bool& ok) {
  std::ifstream f(path);
  ok = bool(f);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

registry& reg() {
  static registry* r = [] {
    auto* x = new registry;
    std::string text = "pw0:auto";
    const char* where = "the default";
    if (const char* file = std::getenv("PUSHWIRE_VERBS_FILE"); file && *file) {
      bool ok = false;
      text = read_file(file, ok);
      where = "PUSHWIRE_VERBS_FILE";
      if (!ok) {
        warn("PUSHWIRE_VERBS_FILE=%s: cannot be read: no devices", file);
        text.clear();
      }
    }
    if (const char* env = std::getenv("PUSHWIRE_VERBS"); env) text = env, where = "PUSHWIRE_VERBS";
    if (!text.empty()) {
      auto p = cfg::parse_devices(text);
      if (!p) warn("%s: %s: no devices", where, p.error.c_str());
      else x->specs = std::move(p.value);
    }
    if (const char* f = std::getenv("PUSHWIRE_VERBS_FAULTS"); f && *f) {
      auto p = cfg::parse_faults(f);
      if (!p) warn("PUSHWIRE_VERBS_FAULTS: %s: no faults", p.error.c_str());
      else x->faults = p.value;
    }
    if (const char* q = std::getenv("PUSHWIRE_VERBS_QOS"); q && *q) {
      auto p = cfg::parse_qos(q);
      if (!p) warn("PUSHWIRE_VERBS_QOS: %s: the defaults instead", p.error.c_str());
      else x->qos = p.value;
    }
    if (const char* b = std::getenv("PUSHWIRE_VERBS_BUSY_POLL"); b && *b) {
      std::uint32_t us = 0;
      if (!rnic::parse_number(b, us) || us > 1'000'000) warn("PUSHWIRE_VERBS_BUSY_POLL=%s: not 0..1000000 microseconds: the default", b);
      else x->busy_poll = static_cast<rnic::time_ns>(us) * 1000;
    }
    if (const char* q = std::getenv("PUSHWIRE_VERBS_PLATFORM"); q && *q) {
      auto p = cfg::parse_platform(q);
      if (!p) warn("PUSHWIRE_VERBS_PLATFORM: %s: no cards", p.error.c_str());
      else x->platform = p.value;
    }
    if (const char* st = std::getenv("PUSHWIRE_VERBS_STATS"); st && *st && std::strcmp(st, "0") != 0)
      x->stats = std::strcmp(st, "1") == 0 ? "-" : st;
    x->devices = std::make_unique<pw_device[]>(x->specs.size());
    x->engines.assign(x->specs.size(), nullptr);
    for (std::size_t i = 0; i < x->specs.size(); ++i) {
      pw_device& d = x->devices[i];
      d = {};
      d.dev.node_type = IBV_NODE_CA;
      d.dev.transport_type = IBV_TRANSPORT_IB;
      std::snprintf(d.dev.name, sizeof d.dev.name, "%s", x->specs[i].name.c_str());
      std::snprintf(d.dev.dev_name, sizeof d.dev.dev_name, "uverbs-pushwire%zu", i);
      // No sysfs: the paths name nothing, so libibverbs' own sysfs readers find nothing.
      std::snprintf(d.dev.dev_path, sizeof d.dev.dev_path, "/nonexistent/pushwire/%s", x->specs[i].name.c_str());
      std::snprintf(d.dev.ibdev_path, sizeof d.dev.ibdev_path, "/nonexistent/pushwire/%s", x->specs[i].name.c_str());
      d.verbs_ops = nullptr;
      d.index = static_cast<std::uint32_t>(i);
    }
    return x;
  }();
  return *r;
}

pw_device* device_of(ibv_device* d) {
  registry& r = reg();
  for (std::size_t i = 0; i < r.specs.size(); ++i)
    if (&r.devices[i].dev == d) return &r.devices[i];
  return nullptr;
}

// ---- objects ----------------------------------------------------------------------------------
struct channel_impl;
struct cq_impl;
struct qp_impl;
struct srq_impl;

struct pw_context {
  verbs_context v;
  context_impl* impl;
};
struct pw_cq {
  ibv_cq_ex ex;  // ibv_cq is its prefix (ibv_cq_ex_to_cq)
  cq_impl* impl;
};
struct pw_qp {
  ibv_qp_ex ex;  // ibv_qp is its first member
  qp_impl* impl;
};
struct pw_srq {
  ibv_srq srq;
  srq_impl* impl;
};
struct pw_channel {
  ibv_comp_channel ch;
  channel_impl* impl;
};
struct pw_ah {
  ibv_ah ah;
  std::uint32_t n;
};
struct pw_mr {
  ibv_mr mr;
  /// An implicit on-demand MR (NULL, SIZE_MAX): it reserves no bytes against the function's limit.
  bool implicit = false;
  /// A dma-buf MR (ibv_reg_dmabuf_mr): the provider's mapping of the buffer, unmapped at
  /// deregistration; nullptr for memory the program registered.
  void* map = nullptr;
  std::size_t map_len = 0;
};
/// A protection domain, or a parent domain (ibv_alloc_parent_domain): the device PD of its
/// protection domain, and the allocators the provider takes its queues' memory from.
struct pw_pd {
  ibv_pd pd;
  bool parent;
  void* (*alloc)(ibv_pd*, void*, std::size_t, std::size_t, std::uint64_t);
  void (*free)(ibv_pd*, void*, void*, std::uint64_t);
  void* pd_context;
};
struct pw_td {
  ibv_td td;
};
pw_pd* pd_of(ibv_pd* p) { return reinterpret_cast<pw_pd*>(p); }

/// resource_type of the buffers a parent domain's allocator is asked for (spec/verbs.md §3):
/// the driver part (bits 63..32) "PW", then what the buffer holds.
constexpr std::uint64_t resource_base = std::uint64_t{0x5057} << 32;
constexpr std::uint64_t resource_sq = resource_base + 1, resource_rq = resource_base + 2, resource_cq = resource_base + 3,
                        resource_srq = resource_base + 4;

/// Memory from a parent domain's allocator, given back when its owner goes.
struct pd_buffer {
  pw_pd* pd = nullptr;
  void* p = nullptr;
  std::uint64_t type = 0;
  pd_buffer() = default;
  pd_buffer(const pd_buffer&) = delete;
  pd_buffer& operator=(const pd_buffer&) = delete;
  ~pd_buffer() {
    if (pd && p && pd->free) pd->free(&pd->pd, pd->pd_context, p, type);
  }
};
/// `count` T's from pd's allocator when it has one (nullopt: the default, the provider's heap);
/// an empty span when the allocator failed.
template <class T>
std::optional<std::span<T>> pd_alloc(ibv_pd* pd, std::size_t count, std::uint64_t type, pd_buffer& keep) {
  pw_pd* p = pd ? pd_of(pd) : nullptr;
  if (!p || !p->parent || !p->alloc) return std::nullopt;
  void* mem = p->alloc(&p->pd, p->pd_context, count * sizeof(T), 64, type);
  if (mem == IBV_ALLOCATOR_USE_DEFAULT) return std::nullopt;
  if (!mem || reinterpret_cast<std::uintptr_t>(mem) % alignof(T) != 0) return std::span<T>{};
  keep.pd = p, keep.p = mem, keep.type = type;
  return std::span<T>(static_cast<T*>(mem), count);
}
static_assert(std::is_standard_layout_v<pw_context> && std::is_standard_layout_v<pw_cq> && std::is_standard_layout_v<pw_qp> &&
              std::is_standard_layout_v<pw_srq> && std::is_standard_layout_v<pw_channel>);

pw_context* ctx_of(ibv_context* c) {
  return reinterpret_cast<pw_context*>(reinterpret_cast<std::byte*>(c) - offsetof(verbs_context, context));
}
pw_cq* cq_of(ibv_cq* c) { return reinterpret_cast<pw_cq*>(c); }
pw_cq* cq_of(ibv_cq_ex* c) { return reinterpret_cast<pw_cq*>(c); }
pw_qp* qp_of(ibv_qp* q) { return reinterpret_cast<pw_qp*>(q); }
pw_qp* qp_of(ibv_qp_ex* q) { return reinterpret_cast<pw_qp*>(q); }

struct channel_impl {
  std::mutex mu;
  std::deque<ibv_cq*> fired;
};

struct cq_impl {
  pd_buffer ring_buf;  // (declared first: freed after the ring is gone)
  engine* eng = nullptr;
  std::uint32_t n = 0;
  std::unique_ptr<rnic::cq_memory> mem;
  std::mutex poll_mu;
  std::uint64_t wc_flags = 0;  // ibv_cq_ex: what the reads may ask for
  rnic::work_completion cur{};  // ibv_cq_ex: the completion being read
};

struct srq_impl {
  pd_buffer ring_buf;
  engine* eng = nullptr;
  std::uint32_t n = 0;
  std::unique_ptr<rnic::rq_memory> mem;
  std::uint32_t max_wr = 0, max_sge = 0;
};

/// A work request as ibv_post_send and the ibv_wr_* calls give it.
struct send_item {
  std::uint64_t wr_id = 0;
  int opcode = IBV_WR_SEND;
  unsigned flags = 0;
  std::uint32_t imm = 0;  // host order
  std::uint64_t remote_addr = 0, compare_add = 0, swap = 0;
  std::uint32_t rkey = 0;
  ibv_ah* ah = nullptr;
  std::uint32_t remote_qpn = 0, remote_qkey = 0;
  std::array<rnic::sge, rnic::max_sge> sg{};
  std::uint32_t num_sge = 0;
  std::vector<std::byte> inl;  // IBV_SEND_INLINE: the bytes, copied
};

struct qp_impl {
  pd_buffer sq_buf, rq_buf;
  engine* eng = nullptr;
  context_impl* ctx = nullptr;
  std::uint32_t qpn = 0;
  rnic::qp_type type = rnic::qp_type::rc;
  std::unique_ptr<rnic::sq_memory> sq;
  std::unique_ptr<rnic::rq_memory> rq;
  ibv_qp_cap cap{};
  bool sq_sig_all = false;
  std::uint64_t send_ops = 0;  // ibv_qp_ex: the ops it was created for
  // Inline sends larger than the descriptor's rnic::max_inline bytes are copied into this
  // per-slot buffer (registered locally), as a NIC copies them into its WQE.
  std::unique_ptr<std::byte[]> bounce;
  std::uint32_t bounce_key = 0, bounce_stride = 0;
  // ibv_wr_* between wr_start and wr_complete
  std::vector<send_item> batch;
  int batch_error = 0;
};

// ---- the engine: one device, its transport and its progress thread -------------------------
using wire_mac = pushwire::wire::mac_address;
/// A port's MAC: 02:00 and its IPv4 address (locally administered).
wire_mac mac_of(const std::array<std::uint8_t, 4>& ip) { return {0x02, 0x00, ip[0], ip[1], ip[2], ip[3]}; }

/// A function of a device process the engine is attached to (spec/rnicd.md §4): its control
/// socket, its region and eventfds, and its ring transport.
struct attachment {
  net::unique_fd sock, doorbell, wake;
  net::shared_region region;
  pushwire::rnic::fn::region_view view;
  std::unique_ptr<net::shm_port> port;
  std::mutex sock_mu;  ///< one request and its reply at a time (reserve)
  std::uint16_t tag = 0;
  std::uint32_t moves = 0;  ///< the region's moves counter when last seen
};

struct engine {
  std::mutex mu;
  /// A port of the device: its MAC, its GIDs (GID 0 the IPv4-mapped address, then an IPv6 one),
  /// and, for a device of the process's own, its UDP socket.
  struct port_state {
    wire_mac mac{};
    std::vector<std::array<std::uint8_t, 16>> gids;
    std::unique_ptr<net::udp_port> udp;
#ifdef PUSHWIRE_HAVE_XDP
    std::unique_ptr<net::xdp_port> xdp;  ///< a port over AF_XDP (/xdp=IF): instead of udp
#endif
    /// Frames its transport holds back (faults, a full ring, a neighbour being resolved).
    std::size_t waiting() const {
      std::size_t n = udp ? udp->waiting() : 0;
#ifdef PUSHWIRE_HAVE_XDP
      if (xdp) n += xdp->waiting();
#endif
      return n;
    }
  };
  std::vector<port_state> ports;        ///< at least one; a function of a device process has one
  std::unique_ptr<attachment> att;      ///< a function of a device process
  /// The process's pages as the kernel keeps them: implicit on-demand keys ask them (the device's
  /// calls hold mu).
  net::kernel_pages pages;
  std::unique_ptr<rnic::device> dev;
  /// The device's I/O loop over its transport (net/loop.hpp); the progress thread also waits on
  /// wake_fd through it.
  std::unique_ptr<net::device_loop> loop;
  std::uint32_t mtu = 4096;
  int wake_fd = -1;
  std::atomic<bool> stop{false};
  /// The device process is gone, stopping, or broke the rings: every QP fails once (fail_all),
  /// IBV_EVENT_DEVICE_FATAL goes to every context, and nothing more is sent or received.
  std::atomic<bool> dead{false};
  bool failed = false;
  /// When the program last polled an empty CQ, running the device itself; CLOCK_MONOTONIC ns.
  std::atomic<rnic::time_ns> app_active{0};
  /// Until when the progress thread sleeps (CLOCK_MONOTONIC ns): a program thread that runs the
  /// device and leaves it with an earlier deadline (a retransmission timer it armed) wakes it.
  std::atomic<rnic::time_ns> sleeps_until{0};
  /// The device's next deadline as the last step() saw it (CLOCK_MONOTONIC ns).
  std::atomic<rnic::time_ns> due_at{0};
  /// The progress thread runs the device at its next turn, whatever app_active says.
  bool take_over = false;
  std::thread th;
  int refs = 0;
  std::uint32_t index = 0;
  std::unordered_map<std::uint32_t, std::pair<ibv_qp*, context_impl*>> qps;
  std::unordered_map<std::uint32_t, std::pair<ibv_cq*, context_impl*>> cqs;
  std::unordered_map<std::uint32_t, std::pair<ibv_srq*, context_impl*>> srqs;
  std::vector<context_impl*> contexts;

  ~engine() {
    halt();
    if (wake_fd >= 0) ::close(wake_fd);
  }
  /// Stops the progress thread and waits for it: nothing runs the device after.
  void halt() {
    stop = true;
    wake();
    if (th.joinable()) th.join();
  }
  void wake() const {
    const std::uint64_t one = 1;
    if (wake_fd >= 0) (void)!::write(wake_fd, &one, sizeof one);
  }
  void drain_wake() const {
    std::uint64_t v;
    (void)!::read(wake_fd, &v, sizeof v);
  }
  /// Receives, runs the device, sends, and hands out events (the caller holds mu).
  void step();
  void run();
  void grace_wait(rnic::time_ns now);
  /// The device failed (the caller holds mu): every QP to ERR, DEVICE_FATAL to every context.
  void fail_all();
  std::uint64_t guid() const { return pushwire::ib::node_guid_of(ports[0].mac); }
  /// Whether `n` is a port number (1-based, as verbs count).
  bool has_port(std::uint32_t n) const { return n >= 1 && n <= ports.size(); }
  /// GID index i of port number `port`, nullopt beyond the table (or the ports).
  std::optional<std::array<std::uint8_t, 16>> gid_at(std::uint32_t port, std::uint32_t i) const {
    if (has_port(port) && i < ports[port - 1].gids.size()) return ports[port - 1].gids[i];
    return std::nullopt;
  }
  int gid_count(std::uint32_t port) const { return has_port(port) ? static_cast<int>(ports[port - 1].gids.size()) : 0; }
  /// The device process's socket is readable: end of stream (it died) or a notice (it stops, or
  /// refused the rings) makes the engine dead.
  void check_socket() {
    std::unique_lock g(att->sock_mu, std::try_to_lock);
    if (!g) return;  // a reserve is reading it
    std::array<std::byte, 64> m{};
    const ssize_t got = net::receive_message(att->sock.get(), m, nullptr, MSG_DONTWAIT);
    if (got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) dead = true;
    else if (got > 0)
      if (auto h = pushwire::rnic::ctl::peek_header(std::span<const std::byte>(m.data(), static_cast<std::size_t>(got)));
          h && h->type == pushwire::rnic::ctl::msg_type::notice)
        dead = true;
    if (dead) wake();
  }
  /// Counts `delta` of `kind` against the function's limits (attached engines; others: 0).
  /// ENOMEM past a limit, EIO when the device process is gone.
  int reserve(pushwire::rnic::ctl::resource kind, std::int64_t delta);
};
struct context_impl {
  engine* eng = nullptr;
  pw_device* dev = nullptr;
  std::mutex amu;
  std::deque<ibv_async_event> events;
  int async_fd = -1;
  int cmd_fd = -1;
};

void push_async(context_impl* c, const ibv_async_event& e) {
  {
    std::lock_guard g(c->amu);
    c->events.push_back(e);
  }
  const std::uint64_t one = 1;
  (void)!::write(c->async_fd, &one, sizeof one);
}

void engine::fail_all() {
  failed = true;
  rnic::qp_attr a;
  a.state = rnic::qp_state::err;
  for (const auto& [qpn, q] : qps) (void)dev->modify_qp(qpn, a, rnic::qp_attr_mask::state);
  ibv_async_event ev{};
  ev.event_type = IBV_EVENT_DEVICE_FATAL;
  for (context_impl* c : contexts) push_async(c, ev);
}

int engine::reserve(pushwire::rnic::ctl::resource kind, std::int64_t delta) {
  namespace ctl = pushwire::rnic::ctl;
  if (!att || delta == 0) return 0;
  if (dead) return EIO;
  std::lock_guard g(att->sock_mu);
  ctl::reserve_request m{};
  m.header = {ctl::msg_type::reserve, pushwire::rnic::fn::version, 0, ++att->tag};
  m.kind = kind;
  m.count = static_cast<std::uint64_t>(delta);
  std::array<std::byte, 64> out{}, in{};
  const auto n = pushwire::wire::encode(m, out);
  if (!n || !net::send_message(att->sock.get(), std::span<const std::byte>(out.data(), *n))) {
    dead = true;
    wake();
    return EIO;
  }
  for (;;) {
    const ssize_t k = net::receive_message(att->sock.get(), in);
    const auto h = k > 0 ? ctl::peek_header(std::span<const std::byte>(in.data(), static_cast<std::size_t>(k))) : std::nullopt;
    if (!h || h->type == ctl::msg_type::notice) {  // gone, or stopping
      dead = true;
      wake();
      return EIO;
    }
    if (h->type != ctl::msg_type::reserved || h->tag != att->tag) continue;
    if (h->status == 0) return 0;
    return static_cast<pushwire::rnic::fn_errc>(h->status) == pushwire::rnic::fn_errc::limit_reached ? ENOMEM : EIO;
  }
}

/// A reservation against an attached function's limits, given back unless kept.
struct held {
  engine& e;
  pushwire::rnic::ctl::resource kind;
  std::int64_t n = 0;
  bool kept = false;
  ~held() {
    if (!kept && n) (void)e.reserve(kind, -n);
  }
};
using res = pushwire::rnic::ctl::resource;

void engine::step() {
  const rnic::time_ns now = net::monotonic_ns();
  if (att && !failed &&
      (dead || att->port->broken() || att->view.state() != pushwire::rnic::fn::device_state::up)) {
    dead = true;
    fail_all();
  }
  // The function moved to another device (spec/migration.md §5): once what waits in the rx
  // ring is taken (the source's last frames), resend and NAK at once.
  bool moved = false;
  if (att && !failed)
    if (const std::uint32_t m = att->view.moves(); m != att->moves) att->moves = m, moved = true;
  for (int round = 0; round < 16; ++round)
    if (loop->turn(now) == 0 && !dev->busy()) break;
  if (moved) {
    dev->moved(now);
    for (int round = 0; round < 16; ++round)
      if (loop->turn(now) == 0 && !dev->busy()) break;
  }
  const rnic::time_ns due = now + loop->timeout(now, idle_limit);
  due_at.store(due, std::memory_order_relaxed);
  if (due < sleeps_until.load(std::memory_order_relaxed)) wake();
  for (const rnic::async_event& e : dev->take_events()) {
    ibv_async_event a{};
    switch (e.type) {
      case rnic::event_type::cq_error:
        if (auto it = cqs.find(e.object); it != cqs.end()) {
          a.element.cq = it->second.first, a.event_type = IBV_EVENT_CQ_ERR;
          push_async(it->second.second, a);
        }
        break;
      case rnic::event_type::qp_fatal:
      case rnic::event_type::qp_request_error:
      case rnic::event_type::qp_access_error:
      case rnic::event_type::sq_drained:
        if (auto it = qps.find(e.object); it != qps.end()) {
          a.element.qp = it->second.first;
          a.event_type = e.type == rnic::event_type::qp_fatal           ? IBV_EVENT_QP_FATAL
                         : e.type == rnic::event_type::qp_request_error ? IBV_EVENT_QP_REQ_ERR
                         : e.type == rnic::event_type::qp_access_error  ? IBV_EVENT_QP_ACCESS_ERR
                                                                        : IBV_EVENT_SQ_DRAINED;
          push_async(it->second.second, a);
        }
        break;
      case rnic::event_type::path_migrated:
        if (auto it = qps.find(e.object); it != qps.end()) {
          a.element.qp = it->second.first, a.event_type = IBV_EVENT_PATH_MIG;
          push_async(it->second.second, a);
        }
        break;
      case rnic::event_type::srq_limit:
        if (auto it = srqs.find(e.object); it != srqs.end()) {
          a.element.srq = it->second.first, a.event_type = IBV_EVENT_SRQ_LIMIT_REACHED;
          push_async(it->second.second, a);
        }
        break;
    }
  }
}

timespec timespec_of(rnic::time_ns ns) {
  return {static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
}

/// The progress thread of an attached engine while the program polls (spec/rnicd.md §3): it
/// sleeps until the device's next deadline (the program's polls meet the earlier ones) and asks
/// the device process to wake it only if a frame waits app_grace unconsumed in the rx ring, which
/// means the program stopped polling: then it takes over. No system call while the program polls.
void engine::grace_wait(rnic::time_ns now) {
  constexpr rnic::time_ns longest = 10'000'000;
  const rnic::time_ns due = due_at.load(std::memory_order_relaxed);
  const rnic::time_ns t = std::clamp<rnic::time_ns>(due > now ? due - now : 0, app_grace, longest);
  att->port->arm_after(static_cast<std::uint32_t>(app_grace / 1000));
  pollfd w[3] = {{wake_fd, POLLIN, 0}, {att->sock.get(), POLLIN, 0}, {att->port->fd(), POLLIN, 0}};
  const timespec ts = timespec_of(t);
  const int n = ::ppoll(w, 3, &ts, nullptr);
  att->port->disarm(n > 0 && (w[2].revents & POLLIN));
  if (n <= 0) {
    take_over = net::monotonic_ns() >= app_active.load(std::memory_order_relaxed) + app_grace;
    return;
  }
  if (w[0].revents) drain_wake();
  if (w[1].revents) check_socket();
  if (w[2].revents) take_over = true;  // a frame waited: the program is not polling
}

void engine::run() {
  (void)::prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);  // timeouts of microseconds, not the default 50
  const pollfd wake_only[2] = {{wake_fd, POLLIN, 0}, {att ? att->sock.get() : -1, POLLIN, 0}};
  while (!stop) {
    // While the program itself runs the device (it polls an empty CQ), stay out of its way.
    // The thread never waits for the lock: a program holding it is running the device.
    rnic::time_ns now = net::monotonic_ns();
    const rnic::time_ns active = app_active.load(std::memory_order_relaxed);
    const bool app_polls = now < active + app_grace && !take_over;
    if (att && !dead && app_polls) {
      grace_wait(now);
      continue;
    }
    take_over = false;
    if (app_polls || !mu.try_lock()) {
      // (and on the device process's socket: a program polling its CQ learns of its death)
      pollfd w[2] = {wake_only[0], wake_only[1]};
      if (dead) w[1].fd = -1;
      const timespec ts = timespec_of(now < active + app_grace ? active + app_grace - now : app_grace);
      if (::ppoll(w, 2, &ts, nullptr) > 0) {
        if (w[0].revents) drain_wake();
        if (w[1].revents) check_socket();
      }
      continue;
    }
    rnic::time_ns timeout;
    {
      std::lock_guard g(mu, std::adopt_lock);
      now = net::monotonic_ns();
      timeout = loop->timeout(now, idle_limit);
      sleeps_until.store(now + timeout, std::memory_order_relaxed);
      loop->prepare_wait();
    }
    (void)loop->block(timeout);  // the socket, wake_fd, or the earliest deadline
    sleeps_until.store(0, std::memory_order_relaxed);
    if (stop) break;
    if (!mu.try_lock()) continue;  // the program is running it
    loop->mark();
    step();
    mu.unlock();
  }
}

/// The device an engine runs: the engine's ports, with their MACs and GIDs, and its MTU.
rnic::device_config engine_config(const engine& e) {
  rnic::device_config dc;
  const cfg::qos_spec& q = reg().qos;
  dc.ports.resize(e.ports.size());
  for (std::size_t i = 0; i < e.ports.size(); ++i) {
    rnic::port_config& pc = dc.ports[i];
    pc.mac = e.ports[i].mac;
    pc.gid = e.ports[i].gids[0];
    pc.extra_gids.assign(e.ports[i].gids.begin() + 1, e.ports[i].gids.end());
    pc.mtu = e.mtu;
    pc.udp_sport = pushwire::ib::roce_port;
    pc.ecn = q.egress.ecn;
    pc.classes = q.egress.classes;
  }
  dc.congestion.notify = dc.congestion.react = q.dcqcn;
  dc.linger = linger_max;
  dc.ack_delay = ack_delay;
  dc.platform = reg().platform;
  return dc;
}
/// Starts an engine whose device and loop are made: its wake-up eventfd and progress thread.
engine* start_engine(registry& r, std::uint32_t index, std::unique_ptr<engine> e) {
  e->index = index;
  e->wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (e->wake_fd < 0) return nullptr;
  engine* self = e.get();
  e->loop->watch(e->wake_fd, [self](rnic::time_ns) { self->drain_wake(); });
  e->refs = 1;
  engine* raw = e.release();
  raw->th = std::thread([raw] { raw->run(); });
  r.engines[index] = raw;
  return raw;
}
/// Attaches to function s.function of the device process at s.attach (spec/rnicd.md §4): the
/// engine's device takes the function's MAC, GIDs, MTU and QPN block; its port is the region's
/// rings. nullptr with errno: ENODEV (no device process answers, or no such function), ENOSPC
/// (no attachment left), EPROTO (a malformed reply or region), EIO (refused otherwise).
engine* attach_engine(registry& r, std::uint32_t index, std::unique_ptr<engine> e) {
  namespace ctl = pushwire::rnic::ctl;
  namespace fn = pushwire::rnic::fn;
  const cfg::device_spec& s = r.specs[index];
  auto a = std::make_unique<attachment>();
  a->sock = net::connect_seqpacket(s.attach);
  if (!a->sock) {
    warn("%s: cannot reach the device process at %s: %s", s.name.c_str(), s.attach.c_str(), std::strerror(errno));
    errno = ENODEV;
    return nullptr;
  }
  ctl::attach_request req{};
  req.header = {ctl::msg_type::attach, fn::version, 0, 1};
  req.function = s.function;
  req.pid = static_cast<std::uint32_t>(::getpid());
  std::array<std::byte, 64> out{};
  std::vector<std::byte> in(ctl::max_message);
  std::vector<net::unique_fd> fds;
  const auto n = pushwire::wire::encode(req, out);
  const ssize_t k = n && net::send_message(a->sock.get(), std::span<const std::byte>(out.data(), *n))
                        ? net::receive_message(a->sock.get(), in, &fds)
                        : -1;
  const auto rep = k > 0 ? pushwire::wire::decode<ctl::attach_reply>(std::span<const std::byte>(in.data(), static_cast<std::size_t>(k)))
                         : pushwire::wire::result<ctl::attach_reply>(pushwire::wire::errc::truncated);
  if (!rep || rep->header.type != ctl::msg_type::attached) {
    warn("%s: the device process at %s did not answer the attach", s.name.c_str(), s.attach.c_str());
    errno = ENODEV;
    return nullptr;
  }
  if (rep->header.status) {
    const auto why = static_cast<pushwire::rnic::fn_errc>(rep->header.status);
    const std::string_view name = pushwire::wire::enum_name(why);
    warn("%s: %s refused the attach: %.*s", s.name.c_str(), s.attach.c_str(), static_cast<int>(name.size()), name.data());
    errno = why == pushwire::rnic::fn_errc::no_such_function ? ENODEV : why == pushwire::rnic::fn_errc::no_attachments_left ? ENOSPC : EIO;
    return nullptr;
  }
  if (fds.size() != 3 || !fn::valid_slots(rep->slots) || (rep->mtu != 256 && rep->mtu != 512 && rep->mtu != 1024 && rep->mtu != 2048 && rep->mtu != 4096) || rep->gids.empty() || rep->gids.size() > 4 || rep->qpn_count == 0 ||
      rep->qpn_first < 2 || rep->qpn_first + std::uint64_t{rep->qpn_count} > 0x1000000) {
    warn("%s: %s: a malformed attach reply", s.name.c_str(), s.attach.c_str());
    errno = EPROTO;
    return nullptr;
  }
  a->region = net::shared_region::open(std::move(fds[0]), fn::region_bytes(rep->slots));
  a->doorbell = std::move(fds[1]);
  a->wake = std::move(fds[2]);
  if (!a->region.ok() || fn::check_region(a->region.bytes(), a->view) || a->view.slots != rep->slots) {
    warn("%s: %s: the function's region does not check", s.name.c_str(), s.attach.c_str());
    errno = EPROTO;
    return nullptr;
  }
  a->port = std::make_unique<net::shm_port>(a->view, a->doorbell.get(), a->wake.get());
  a->moves = a->view.moves();
  e->mtu = rep->mtu;
  engine::port_state& ps = e->ports.emplace_back();
  ps.mac = rep->mac;
  for (const auto& g : rep->gids) ps.gids.push_back(g);
  rnic::device_config dc = engine_config(*e);
  dc.qpn_first = rep->qpn_first;
  dc.qpn_count = rep->qpn_count;
  dc.max_qps = std::min(dc.max_qps, rep->max_qps);
  dc.max_cqs = std::min(dc.max_cqs, rep->max_cqs);
  e->dev = std::make_unique<rnic::device>(dc);
  if (net::kernel_pages::supported()) e->dev->memory().set_host_pages(&e->pages);  // (Linux 5.14)
  e->loop = std::make_unique<net::device_loop>(*e->dev);
  e->loop->linger({.window = 0, .tick = 1'000'000, .spin = r.busy_poll});
  e->loop->attach(0, *a->port);
  engine* self = e.get();
  // The control socket: end of stream (the device process died) or a notice (it stops).
  e->loop->watch(
      a->sock.get(),
      [self](rnic::time_ns) { self->check_socket(); },
      [self] { return !self->dead.load(); });
  e->att = std::move(a);
  return start_engine(r, index, std::move(e));
}

/// Port `number` of device `name` over AF_XDP on interface `ifname` (spec/verbs.md §2): true when
/// it is (its MAC is the interface's, its GIDs uc's addresses, and the device's MTU at most what
/// the UMEM and the interface take); false when ifname is empty, or after one line on stderr
/// when AF_XDP cannot be had (the caller opens the UDP socket).
bool open_xdp(const std::string& name, std::size_t number, const std::string& ifname, engine::port_state& ps, const net::udp_config& uc,
              std::uint32_t& mtu) {
  if (ifname.empty()) return false;
#ifdef PUSHWIRE_HAVE_XDP
  net::xdp_config xc;
  xc.interface = ifname;
  xc.faults = uc.faults;
  xc.seed = uc.seed;
  auto x = std::make_unique<net::xdp_port>(xc);
  if (!x->ok()) {
    warn("%s: port %zu: AF_XDP on %s unavailable (%s: %s); using the UDP socket", name.c_str(), number, ifname.c_str(), x->why().c_str(),
         std::strerror(x->error()));
    return false;
  }
  ps.mac = x->mac();
  ps.gids.push_back(rnic::gid_v4(uc.address[0], uc.address[1], uc.address[2], uc.address[3]));
  if (uc.address6) ps.gids.push_back(*uc.address6);
  mtu = x->path_mtu(mtu);
  ps.xdp = std::move(x);
  return true;
#else
  warn("%s: port %zu: AF_XDP on %s unavailable (built without libxdp); using the UDP socket", name.c_str(), number, ifname.c_str());
  (void)ps, (void)uc, (void)mtu;
  return false;
#endif
}

/// Opens (or shares) the engine of device `index`; nullptr with errno on failure.
engine* open_engine(std::uint32_t index) {
  registry& r = reg();
  std::lock_guard g(r.mu);
  if (engine* e = r.engines[index]) {
    ++e->refs;
    return e;
  }
  const cfg::device_spec& s = r.specs[index];
  auto e = std::make_unique<engine>();
  if (!s.attach.empty()) return attach_engine(r, index, std::move(e));
  net::udp_config uc;
  uc.port = pushwire::ib::roce_port;
  uc.faults = r.faults.faults;
  uc.seed = r.faults.seed + index;
  uc.address6 = s.address6;
  engine::port_state& first = e->ports.emplace_back();
  e->mtu = s.mtu;
  if (s.address) {
    uc.address = *s.address;
    if (!open_xdp(s.name, 1, s.xdp, first, uc, e->mtu)) first.udp = std::make_unique<net::udp_port>(uc);
  } else {
    for (int host = 1; host < 255; ++host) {
      uc.address = {127, 0, 0, static_cast<std::uint8_t>(host)};
      first.udp = std::make_unique<net::udp_port>(uc);
      if (first.udp->ok() || first.udp->error() != EADDRINUSE) break;
    }
  }
  for (std::size_t i = 0; i <= s.more_ports.size(); ++i) {
    if (i > 0) {  // port i + 1
      uc.address = s.more_ports[i - 1].address;
      uc.address6 = s.more_ports[i - 1].address6;
      uc.seed += 1000;
      engine::port_state& more = e->ports.emplace_back();
      if (!open_xdp(s.name, i + 1, s.more_ports[i - 1].xdp, more, uc, e->mtu)) more.udp = std::make_unique<net::udp_port>(uc);
    }
    engine::port_state& ps = e->ports.back();
    if (ps.udp && !ps.udp->ok()) {
      const int err = ps.udp->error();
      warn("%s: port %zu: cannot bind %u.%u.%u.%u:%u%s: %s", s.name.c_str(), i + 1, uc.address[0], uc.address[1], uc.address[2], uc.address[3],
           pushwire::ib::roce_port, uc.address6 ? " and its IPv6 address" : "", std::strerror(err));
      errno = err == EADDRNOTAVAIL || err == EADDRINUSE ? ENODEV : err;
      return nullptr;
    }
    if (!ps.udp) continue;  // over AF_XDP: open_xdp set its MAC and GIDs
    ps.mac = mac_of(uc.address);
    ps.gids.push_back(rnic::gid_v4(uc.address[0], uc.address[1], uc.address[2], uc.address[3]));
    if (uc.address6) ps.gids.push_back(*uc.address6);
  }
  rnic::device_config dc = engine_config(*e);
  e->dev = std::make_unique<rnic::device>(dc);
  if (net::kernel_pages::supported()) e->dev->memory().set_host_pages(&e->pages);  // (Linux 5.14)
  e->loop = std::make_unique<net::device_loop>(*e->dev);
  e->loop->linger({.window = 0, .tick = 1'000'000, .spin = r.busy_poll});
  for (std::size_t i = 0; i < e->ports.size(); ++i) {
    if (e->ports[i].udp) e->loop->attach(i, *e->ports[i].udp);
#ifdef PUSHWIRE_HAVE_XDP
    if (e->ports[i].xdp) e->loop->attach(i, *e->ports[i].xdp);
#endif
  }
  return start_engine(r, index, std::move(e));
}
/// One line: "pushwire-verbs[PID]: NAME counters: name=value ..." with every counter not zero
/// (rnic::for_each_counter), to stderr ("-") or appended to the file `to`.
void print_stats(const std::string& to, const std::string& name, const rnic::device_counters& c) {
  std::string line = "pushwire-verbs[" + std::to_string(::getpid()) + "]: " + name + " counters:";
  std::size_t shown = 0;
  rnic::for_each_counter(c, [&](std::string_view k, std::uint64_t v) {
    if (!v) return;
    line.append(" ").append(k).append("=").append(std::to_string(v));
    ++shown;
  });
  if (!shown) line += " all zero";
  if (to == "-") {
    std::fprintf(stderr, "%s\n", line.c_str());
    return;
  }
  const int fd = ::open(to.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    warn("PUSHWIRE_VERBS_STATS=%s: cannot be opened (%s): %s", to.c_str(), std::strerror(errno), line.c_str());
    return;
  }
  line += '\n';
  (void)!::write(fd, line.data(), line.size());  // one write: lines of processes sharing the file do not interleave
  ::close(fd);
}

void close_engine(engine* e) {
  registry& r = reg();
  std::unique_lock g(r.mu);
  if (--e->refs > 0) return;
  // Destroyed RC QPs may still owe their peers an ACK (device_config::linger), and what the
  // device sent may still wait to leave (in its port, or held back in the socket's queue by an
  // injected fault): a UD send completes when its frame is queued, so a program may close the
  // device before the frame is out. The progress thread answers and sends, for at most
  // linger_max.
  const rnic::time_ns until = net::monotonic_ns() + linger_max;
  for (;;) {
    {
      std::lock_guard g2(e->mu);
      bool quiet = e->dev->lingering() == 0;
      for (std::size_t i = 0; i < e->ports.size(); ++i)
        quiet = quiet && e->dev->pending_frames(i) == 0 && e->ports[i].waiting() == 0;
      if (quiet || e->dead || net::monotonic_ns() > until) break;
    }
    e->wake();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  // The counters once nothing runs the device any more; printed with no lock held.
  e->halt();
  const rnic::device_counters counters = e->dev->counters();
  const std::string name = r.specs[e->index].name;
  r.engines[e->index] = nullptr;
  delete e;
  g.unlock();
  if (!r.stats.empty()) print_stats(r.stats, name, counters);
}

/// After a post: run the device at once, so the frames leave from the caller's thread.
void kick(engine& e) { e.step(); }

// ---- conversions ----------------------------------------------------------------------------
std::optional<std::uint32_t> mtu_bytes(ibv_mtu m) {
  if (m < IBV_MTU_256 || m > IBV_MTU_4096) return std::nullopt;
  return 256u << (m - IBV_MTU_256);
}
ibv_mtu mtu_enum(std::uint32_t bytes) {
  switch (bytes) {
    case 256: return IBV_MTU_256;
    case 512: return IBV_MTU_512;
    case 1024: return IBV_MTU_1024;
    case 2048: return IBV_MTU_2048;
    default: return IBV_MTU_4096;
  }
}
std::uint32_t pow2_at_least(std::uint32_t n) {
  std::uint32_t d = 1;
  while (d < n) d <<= 1;
  return d;
}
ibv_wc_opcode wc_opcode_of(rnic::wc_opcode o) { return static_cast<ibv_wc_opcode>(o); }

void fill_wc(ibv_wc& w, const rnic::work_completion& c) {
  std::memset(&w, 0, sizeof w);
  w.wr_id = c.wr_id;
  w.status = static_cast<ibv_wc_status>(c.status);
  w.opcode = wc_opcode_of(c.opcode);
  w.vendor_err = c.vendor_err;
  w.byte_len = c.byte_len;
  w.imm_data = htonl(c.imm);
  w.qp_num = c.qp_num;
  w.src_qp = c.src_qp;
  w.wc_flags = (c.with_imm ? IBV_WC_WITH_IMM : 0) | (c.grh ? IBV_WC_GRH : 0);
}

/// Polls up to n completions; when none are there, runs the device once (if no other thread
/// is running it) and looks again.
int poll_into(cq_impl& q, std::span<rnic::work_completion> out) {
  std::size_t got = q.mem->poll(out);
  if (got == 0 && q.eng->mu.try_lock()) {
    q.eng->app_active.store(net::monotonic_ns(), std::memory_order_relaxed);
    q.eng->step();
    q.eng->mu.unlock();
    got = q.mem->poll(out);
  }
  return static_cast<int>(got);
}

// ---- context ops ----------------------------------------------------------------------------
int op_poll_cq(ibv_cq* cq, int n, ibv_wc* wc) {
  if (n < 0) return -1;
  cq_impl& q = *cq_of(cq)->impl;
  std::lock_guard g(q.poll_mu);
  std::array<rnic::work_completion, 32> buf;
  int total = 0;
  while (total < n) {
    const auto want = static_cast<std::size_t>(std::min(n - total, static_cast<int>(buf.size())));
    const int got = total == 0 ? poll_into(q, std::span(buf.data(), want)) : static_cast<int>(q.mem->poll(std::span(buf.data(), want)));
    for (int i = 0; i < got; ++i) fill_wc(wc[total + i], buf[static_cast<std::size_t>(i)]);
    total += got;
    if (static_cast<std::size_t>(got) < want) break;
  }
  return total;
}

int op_req_notify_cq(ibv_cq* cq, int /*solicited_only: every completion notifies*/) {
  pw_cq* c = cq_of(cq);
  engine& e = *c->impl->eng;
  std::lock_guard g(e.mu);
  ibv_comp_channel* ch = cq->channel;
  const rnic::errc r = e.dev->arm_cq(c->impl->n, [ch, cq](std::uint32_t) {
    if (!ch) return;
    channel_impl* ci = reinterpret_cast<pw_channel*>(ch)->impl;
    {
      std::lock_guard g2(ci->mu);
      ci->fired.push_back(cq);
    }
    const std::uint64_t one = 1;
    (void)!::write(ch->fd, &one, sizeof one);
  });
  return to_errno(r);
}

int post_one(qp_impl& q, const send_item& it) {
  rnic::send_wr w;
  w.wr_id = it.wr_id;
  switch (it.opcode) {
    case IBV_WR_RDMA_WRITE: w.opcode = rnic::wr_opcode::rdma_write; break;
    case IBV_WR_RDMA_WRITE_WITH_IMM: w.opcode = rnic::wr_opcode::rdma_write_with_imm; break;
    case IBV_WR_SEND: w.opcode = rnic::wr_opcode::send; break;
    case IBV_WR_SEND_WITH_IMM: w.opcode = rnic::wr_opcode::send_with_imm; break;
    case IBV_WR_RDMA_READ: w.opcode = rnic::wr_opcode::rdma_read; break;
    case IBV_WR_ATOMIC_CMP_AND_SWP: w.opcode = rnic::wr_opcode::atomic_cmp_and_swp; break;
    case IBV_WR_ATOMIC_FETCH_AND_ADD: w.opcode = rnic::wr_opcode::atomic_fetch_and_add; break;
    default: return EINVAL;  // LOCAL_INV, BIND_MW, SEND_WITH_INV, TSO, FLUSH, ATOMIC_WRITE: not supported
  }
  if (it.flags & ~unsigned(IBV_SEND_FENCE | IBV_SEND_SIGNALED | IBV_SEND_SOLICITED | IBV_SEND_INLINE)) return EINVAL;
  w.flags = static_cast<std::uint8_t>(it.flags & (IBV_SEND_FENCE | IBV_SEND_SIGNALED | IBV_SEND_SOLICITED));
  w.imm = it.imm;
  w.remote_addr = it.remote_addr;
  w.rkey = it.rkey;
  w.compare_add = it.compare_add;
  w.swap = it.swap;
  if (q.type == rnic::qp_type::ud) {
    if (!it.ah) return EINVAL;
    w.ah = reinterpret_cast<pw_ah*>(it.ah)->n;
    w.remote_qpn = it.remote_qpn;
    w.remote_qkey = it.remote_qkey;
  }
  rnic::sge bounce_sge{};
  if (it.flags & IBV_SEND_INLINE) {
    if (it.inl.size() > q.cap.max_inline_data) return EINVAL;
    if (it.inl.size() <= rnic::max_inline) {
      w.flags |= rnic::send_inline;
      w.inline_data = it.inl;
    } else {
      const std::uint32_t slot = q.sq->doorbell().producer.load(std::memory_order_relaxed) & (q.sq->depth() - 1);
      std::byte* dst = q.bounce.get() + std::size_t{slot} * q.bounce_stride;
      std::memcpy(dst, it.inl.data(), it.inl.size());
      bounce_sge = {reinterpret_cast<std::uintptr_t>(dst), static_cast<std::uint32_t>(it.inl.size()), q.bounce_key};
      w.sg_list = std::span(&bounce_sge, 1);
    }
  } else {
    if (it.num_sge > q.cap.max_send_sge) return EINVAL;
    w.sg_list = std::span(it.sg.data(), it.num_sge);
  }
  return to_errno(q.eng->dev->post_send(q.qpn, w));
}

/// An ibv_send_wr as a send_item (inline data gathered); EINVAL for a malformed one.
int item_of(const qp_impl& q, const ibv_send_wr& wr, send_item& it) {
  it.wr_id = wr.wr_id;
  it.opcode = wr.opcode;
  it.flags = wr.send_flags;
  it.imm = ntohl(wr.imm_data);
  if (wr.num_sge < 0) return EINVAL;
  switch (wr.opcode) {
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM:
    case IBV_WR_RDMA_READ: it.remote_addr = wr.wr.rdma.remote_addr, it.rkey = wr.wr.rdma.rkey; break;
    case IBV_WR_ATOMIC_CMP_AND_SWP:
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
      it.remote_addr = wr.wr.atomic.remote_addr, it.rkey = wr.wr.atomic.rkey;
      it.compare_add = wr.wr.atomic.compare_add, it.swap = wr.wr.atomic.swap;
      break;
    default: break;
  }
  if (q.type == rnic::qp_type::ud) it.ah = wr.wr.ud.ah, it.remote_qpn = wr.wr.ud.remote_qpn, it.remote_qkey = wr.wr.ud.remote_qkey;
  if (wr.send_flags & IBV_SEND_INLINE) {
    std::size_t total = 0;
    for (int i = 0; i < wr.num_sge; ++i) total += wr.sg_list[i].length;
    if (total > q.cap.max_inline_data) return EINVAL;
    it.inl.resize(total);
    std::size_t at = 0;
    for (int i = 0; i < wr.num_sge; ++i) {
      if (wr.sg_list[i].length) std::memcpy(it.inl.data() + at, reinterpret_cast<const void*>(wr.sg_list[i].addr), wr.sg_list[i].length);
      at += wr.sg_list[i].length;
    }
  } else {
    if (static_cast<std::uint32_t>(wr.num_sge) > rnic::max_sge) return EINVAL;
    for (int i = 0; i < wr.num_sge; ++i) it.sg[static_cast<std::size_t>(i)] = {wr.sg_list[i].addr, wr.sg_list[i].length, wr.sg_list[i].lkey};
    it.num_sge = static_cast<std::uint32_t>(wr.num_sge);
  }
  return 0;
}

int op_post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
  qp_impl& q = *qp_of(qp)->impl;
  std::lock_guard g(q.eng->mu);
  int err = 0;
  send_item it;
  for (; wr; wr = wr->next) {
    it.inl.clear();
    if ((err = item_of(q, *wr, it)) == 0) err = post_one(q, it);
    if (err) {
      if (bad) *bad = wr;
      break;
    }
  }
  kick(*q.eng);
  return err;
}

int recv_sges(const ibv_recv_wr& wr, std::array<rnic::sge, rnic::max_sge>& sg, std::uint32_t max_sge) {
  if (wr.num_sge < 0 || static_cast<std::uint32_t>(wr.num_sge) > max_sge) return EINVAL;
  for (int i = 0; i < wr.num_sge; ++i) sg[static_cast<std::size_t>(i)] = {wr.sg_list[i].addr, wr.sg_list[i].length, wr.sg_list[i].lkey};
  return 0;
}

int op_post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  qp_impl& q = *qp_of(qp)->impl;
  std::lock_guard g(q.eng->mu);
  int err = 0;
  for (; wr; wr = wr->next) {
    std::array<rnic::sge, rnic::max_sge> sg{};
    err = qp->srq ? EINVAL : recv_sges(*wr, sg, q.cap.max_recv_sge);
    if (!err) err = to_errno(q.eng->dev->post_recv(q.qpn, {wr->wr_id, std::span(sg.data(), static_cast<std::size_t>(wr->num_sge))}));
    if (err) {
      if (bad) *bad = wr;
      break;
    }
  }
  kick(*q.eng);
  return err;
}

int op_post_srq_recv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  srq_impl& s = *reinterpret_cast<pw_srq*>(srq)->impl;
  std::lock_guard g(s.eng->mu);
  int err = 0;
  for (; wr; wr = wr->next) {
    std::array<rnic::sge, rnic::max_sge> sg{};
    err = recv_sges(*wr, sg, s.max_sge);
    if (!err) err = to_errno(s.eng->dev->post_srq_recv(s.n, {wr->wr_id, std::span(sg.data(), static_cast<std::size_t>(wr->num_sge))}));
    if (err) {
      if (bad) *bad = wr;
      break;
    }
  }
  kick(*s.eng);
  return err;
}

ibv_mw* op_alloc_mw(ibv_pd*, ibv_mw_type) { return fail<ibv_mw>(EOPNOTSUPP); }
int op_bind_mw(ibv_qp*, ibv_mw*, ibv_mw_bind*) { return EOPNOTSUPP; }
int op_dealloc_mw(ibv_mw*) { return EOPNOTSUPP; }

// ---- extended ops ----------------------------------------------------------------------------
void fill_port_attr(const engine& e, std::uint8_t port, ibv_port_attr& a) {
  std::memset(&a, 0, sizeof a);
  a.state = IBV_PORT_ACTIVE;
  a.max_mtu = IBV_MTU_4096;
  a.active_mtu = mtu_enum(e.mtu);
  a.gid_tbl_len = e.gid_count(port);
  a.port_cap_flags = IBV_PORT_CM_SUP | IBV_PORT_IP_BASED_GIDS;
  a.max_msg_sz = max_msg_sz;
  a.pkey_tbl_len = 1;
  a.max_vl_num = 1;
  a.active_width = 2;   // 4x
  a.active_speed = 32;  // EDR (25 Gb/s per lane): nominal, a UDP socket has no line rate
  a.phys_state = 5;     // LinkUp
  a.link_layer = IBV_LINK_LAYER_ETHERNET;
}

int op_query_port(ibv_context* c, std::uint8_t port, ibv_port_attr* attr, std::size_t len) {
  const engine& e = *ctx_of(c)->impl->eng;
  if (!e.has_port(port) || !attr) return EINVAL;
  ibv_port_attr a;
  fill_port_attr(e, port, a);
  std::memcpy(attr, &a, std::min(len, sizeof a));
  return 0;
}

void fill_device_attr(const engine& e, ibv_device_attr& a) {
  std::memset(&a, 0, sizeof a);
  std::snprintf(a.fw_ver, sizeof a.fw_ver, "pushwire %s", PUSHWIRE_VERSION_STRING);
  a.node_guid = htobe64(e.guid());
  a.sys_image_guid = a.node_guid;
  a.max_mr_size = ~std::uint64_t{0};
  a.page_size_cap = 0xFFFFF000u;
  a.vendor_id = 0x5057;  // "PW": no IEEE OUI; nonzero, as verbs consumers expect
  a.vendor_part_id = 0;
  a.hw_ver = 0;
  const rnic::device_config& dc = e.dev->config();
  a.max_qp = static_cast<int>(dc.max_qps);
  a.max_qp_wr = max_qp_wr;
  a.device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_PORT_ACTIVE_EVENT | IBV_DEVICE_SYS_IMAGE_GUID;
  a.max_sge = rnic::max_sge;
  a.max_sge_rd = rnic::max_sge;
  a.max_cq = static_cast<int>(dc.max_cqs);
  a.max_cqe = max_cqe;
  a.max_mr = static_cast<int>(dc.max_keys - 1);
  a.max_pd = static_cast<int>(dc.max_pds);
  a.max_qp_rd_atom = rnic::max_rd_atomic;
  a.max_res_rd_atom = rnic::max_rd_atomic * a.max_qp;
  a.max_qp_init_rd_atom = rnic::max_rd_atomic;
  a.atomic_cap = IBV_ATOMIC_HCA;
  a.max_ah = max_ah;
  a.max_srq = static_cast<int>(dc.max_qps);
  a.max_srq_wr = max_srq_wr;
  a.max_srq_sge = rnic::max_sge;
  a.max_pkeys = 1;
  a.local_ca_ack_delay = 15;
  a.phys_port_cnt = static_cast<std::uint8_t>(e.ports.size());
}

int op_query_device_ex(ibv_context* c, const ibv_query_device_ex_input* in, ibv_device_attr_ex* attr, std::size_t size) {
  if (in && in->comp_mask) return EINVAL;
  if (!attr || size < sizeof(ibv_device_attr)) return EINVAL;
  ibv_device_attr_ex a;
  std::memset(&a, 0, sizeof a);
  const engine& e = *ctx_of(c)->impl->eng;
  fill_device_attr(e, a.orig_attr);
  const std::uint32_t odp_ops = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ |
                                IBV_ODP_SUPPORT_ATOMIC | IBV_ODP_SUPPORT_SRQ_RECV;
  a.odp_caps.general_caps = IBV_ODP_SUPPORT | (e.dev->memory().implicit_supported() ? IBV_ODP_SUPPORT_IMPLICIT : 0);
  a.odp_caps.per_transport_caps.rc_odp_caps = odp_ops;
  a.odp_caps.per_transport_caps.uc_odp_caps = odp_ops & ~std::uint32_t(IBV_ODP_SUPPORT_READ | IBV_ODP_SUPPORT_ATOMIC);
  a.odp_caps.per_transport_caps.ud_odp_caps = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV;
  a.device_cap_flags_ex = a.orig_attr.device_cap_flags;
  a.phys_port_cnt_ex = static_cast<std::uint32_t>(e.ports.size());
  std::memcpy(attr, &a, std::min(size, sizeof a));
  return 0;
}

// CQ ex reads
int cqx_start(ibv_cq_ex* cq, ibv_poll_cq_attr* attr) {
  if (attr && attr->comp_mask) return EINVAL;
  cq_impl& q = *cq_of(cq)->impl;
  q.poll_mu.lock();
  if (poll_into(q, std::span(&q.cur, 1)) == 0) {
    q.poll_mu.unlock();
    return ENOENT;
  }
  cq->status = static_cast<ibv_wc_status>(q.cur.status);
  cq->wr_id = q.cur.wr_id;
  return 0;
}
int cqx_next(ibv_cq_ex* cq) {
  cq_impl& q = *cq_of(cq)->impl;
  if (q.mem->poll(std::span(&q.cur, 1)) == 0) return ENOENT;
  cq->status = static_cast<ibv_wc_status>(q.cur.status);
  cq->wr_id = q.cur.wr_id;
  return 0;
}
void cqx_end(ibv_cq_ex* cq) { cq_of(cq)->impl->poll_mu.unlock(); }
const rnic::work_completion& cur(ibv_cq_ex* cq) { return cq_of(cq)->impl->cur; }
ibv_wc_opcode cqx_opcode(ibv_cq_ex* cq) { return wc_opcode_of(cur(cq).opcode); }
std::uint32_t cqx_vendor_err(ibv_cq_ex* cq) { return cur(cq).vendor_err; }
std::uint32_t cqx_byte_len(ibv_cq_ex* cq) { return cur(cq).byte_len; }
__be32 cqx_imm(ibv_cq_ex* cq) { return htonl(cur(cq).imm); }
std::uint32_t cqx_qp_num(ibv_cq_ex* cq) { return cur(cq).qp_num; }
std::uint32_t cqx_src_qp(ibv_cq_ex* cq) { return cur(cq).src_qp; }
unsigned cqx_wc_flags(ibv_cq_ex* cq) { return (cur(cq).with_imm ? IBV_WC_WITH_IMM : 0) | (cur(cq).grh ? IBV_WC_GRH : 0); }
std::uint32_t cqx_slid(ibv_cq_ex*) { return 0; }
std::uint8_t cqx_sl(ibv_cq_ex*) { return 0; }
std::uint8_t cqx_dlid_path_bits(ibv_cq_ex*) { return 0; }

constexpr std::uint64_t cqx_supported = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM | IBV_WC_EX_WITH_SRC_QP |
                                        IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL | IBV_WC_EX_WITH_DLID_PATH_BITS;

ibv_cq_ex* create_cq(ibv_context* c, const ibv_cq_init_attr_ex& a) {
  if (a.cqe == 0 || a.cqe > max_cqe) return fail<ibv_cq_ex>(EINVAL);
  if (a.comp_vector >= static_cast<std::uint32_t>(c->num_comp_vectors)) return fail<ibv_cq_ex>(EINVAL);
  if (a.wc_flags & ~cqx_supported) return fail<ibv_cq_ex>(EOPNOTSUPP);
  if (a.comp_mask & ~std::uint32_t(IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD)) return fail<ibv_cq_ex>(EOPNOTSUPP);
  ibv_pd* const parent = a.comp_mask & IBV_CQ_INIT_ATTR_MASK_PD ? a.parent_domain : nullptr;
  if ((a.comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) && (!parent || !pd_of(parent)->parent || parent->context != c))
    return fail<ibv_cq_ex>(EINVAL);  // a parent domain of this context, not a plain PD
  if ((a.comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) && (a.flags & ~std::uint32_t(IBV_CREATE_CQ_ATTR_SINGLE_THREADED)))
    return fail<ibv_cq_ex>(EOPNOTSUPP);
  context_impl& ci = *ctx_of(c)->impl;
  engine& e = *ci.eng;
  if (const int err = e.reserve(res::cq, 1)) return fail<ibv_cq_ex>(err);
  held hold{e, res::cq, 1};
  auto impl = std::make_unique<cq_impl>();
  impl->eng = &e;
  const std::uint32_t depth = pow2_at_least(std::max<std::uint32_t>(a.cqe, 2));
  if (auto ext = pd_alloc<rnic::cqe>(parent, depth, resource_cq, impl->ring_buf)) {
    if (ext->empty()) return fail<ibv_cq_ex>(ENOMEM);
    impl->mem = std::make_unique<rnic::cq_memory>(*ext);
  } else {
    impl->mem = std::make_unique<rnic::cq_memory>(depth);
  }
  impl->wc_flags = a.wc_flags;
  auto* p = new (std::nothrow) pw_cq{};
  if (!p) return fail<ibv_cq_ex>(ENOMEM);
  {
    std::lock_guard g(e.mu);
    const auto n = e.dev->create_cq(*impl->mem);
    if (!n) {
      delete p;
      return fail<ibv_cq_ex>(to_errno(n.code()));
    }
    impl->n = *n;
    e.cqs[*n] = {reinterpret_cast<ibv_cq*>(&p->ex), &ci};
  }
  ibv_cq_ex& x = p->ex;
  x.context = c;
  x.channel = a.channel;
  x.cq_context = a.cq_context;
  x.handle = impl->n;
  x.cqe = static_cast<int>(impl->mem->ring().size());
  pthread_mutex_init(&x.mutex, nullptr);
  pthread_cond_init(&x.cond, nullptr);
  x.start_poll = cqx_start;
  x.next_poll = cqx_next;
  x.end_poll = cqx_end;
  x.read_opcode = cqx_opcode;
  x.read_vendor_err = cqx_vendor_err;
  x.read_byte_len = cqx_byte_len;
  x.read_imm_data = cqx_imm;
  x.read_qp_num = cqx_qp_num;
  x.read_src_qp = cqx_src_qp;
  x.read_wc_flags = cqx_wc_flags;
  x.read_slid = cqx_slid;
  x.read_sl = cqx_sl;
  x.read_dlid_path_bits = cqx_dlid_path_bits;
  if (a.channel) ++a.channel->refcnt;
  p->impl = impl.release();
  hold.kept = true;
  return &p->ex;
}

ibv_cq_ex* op_create_cq_ex(ibv_context* c, ibv_cq_init_attr_ex* a) {
  if (!a) return fail<ibv_cq_ex>(EINVAL);
  return create_cq(c, *a);
}

// QP ex: ibv_wr_*
send_item& cur_item(ibv_qp_ex* qx) { return qp_of(qx)->impl->batch.back(); }
void wr_begin(ibv_qp_ex* qx, int opcode) {
  qp_impl& q = *qp_of(qx)->impl;
  q.batch.emplace_back();
  send_item& it = q.batch.back();
  it.wr_id = qx->wr_id;
  it.flags = qx->wr_flags;
  it.opcode = opcode;
  if (!(q.send_ops & (1ull << opcode))) q.batch_error = q.batch_error ? q.batch_error : EINVAL;
}
void wr_start(ibv_qp_ex* qx) {
  qp_impl& q = *qp_of(qx)->impl;
  q.batch.clear();
  q.batch_error = 0;
}
int wr_complete(ibv_qp_ex* qx) {
  qp_impl& q = *qp_of(qx)->impl;
  int err = q.batch_error;
  if (!err) {
    std::lock_guard g(q.eng->mu);
    for (send_item& it : q.batch) {
      // A posting that fails part way leaves the earlier ones posted, as ibv_post_send does.
      if ((err = post_one(q, it)) != 0) break;
    }
    kick(*q.eng);
  }
  q.batch.clear();
  q.batch_error = 0;
  return err;
}
void wr_abort(ibv_qp_ex* qx) {
  qp_impl& q = *qp_of(qx)->impl;
  q.batch.clear();
  q.batch_error = 0;
}
void wr_send(ibv_qp_ex* qx) { wr_begin(qx, IBV_WR_SEND); }
void wr_send_imm(ibv_qp_ex* qx, __be32 imm) {
  wr_begin(qx, IBV_WR_SEND_WITH_IMM);
  cur_item(qx).imm = ntohl(imm);
}
void wr_rdma_write(ibv_qp_ex* qx, std::uint32_t rkey, std::uint64_t addr) {
  wr_begin(qx, IBV_WR_RDMA_WRITE);
  cur_item(qx).rkey = rkey, cur_item(qx).remote_addr = addr;
}
void wr_rdma_write_imm(ibv_qp_ex* qx, std::uint32_t rkey, std::uint64_t addr, __be32 imm) {
  wr_begin(qx, IBV_WR_RDMA_WRITE_WITH_IMM);
  cur_item(qx).rkey = rkey, cur_item(qx).remote_addr = addr, cur_item(qx).imm = ntohl(imm);
}
void wr_rdma_read(ibv_qp_ex* qx, std::uint32_t rkey, std::uint64_t addr) {
  wr_begin(qx, IBV_WR_RDMA_READ);
  cur_item(qx).rkey = rkey, cur_item(qx).remote_addr = addr;
}
void wr_cmp_swp(ibv_qp_ex* qx, std::uint32_t rkey, std::uint64_t addr, std::uint64_t compare, std::uint64_t swap) {
  wr_begin(qx, IBV_WR_ATOMIC_CMP_AND_SWP);
  send_item& it = cur_item(qx);
  it.rkey = rkey, it.remote_addr = addr, it.compare_add = compare, it.swap = swap;
}
void wr_fetch_add(ibv_qp_ex* qx, std::uint32_t rkey, std::uint64_t addr, std::uint64_t add) {
  wr_begin(qx, IBV_WR_ATOMIC_FETCH_AND_ADD);
  send_item& it = cur_item(qx);
  it.rkey = rkey, it.remote_addr = addr, it.compare_add = add;
}
bool has_item(ibv_qp_ex* qx) {
  qp_impl& q = *qp_of(qx)->impl;
  if (q.batch.empty()) {
    if (!q.batch_error) q.batch_error = EINVAL;
    return false;
  }
  return true;
}
void wr_set_sge(ibv_qp_ex* qx, std::uint32_t lkey, std::uint64_t addr, std::uint32_t length) {
  if (!has_item(qx)) return;
  send_item& it = cur_item(qx);
  it.sg[0] = {addr, length, lkey};
  it.num_sge = 1;
}
void wr_set_sge_list(ibv_qp_ex* qx, std::size_t n, const ibv_sge* list) {
  if (!has_item(qx)) return;
  qp_impl& q = *qp_of(qx)->impl;
  send_item& it = cur_item(qx);
  if (n > q.cap.max_send_sge) {
    if (!q.batch_error) q.batch_error = EINVAL;
    return;
  }
  for (std::size_t i = 0; i < n; ++i) it.sg[i] = {list[i].addr, list[i].length, list[i].lkey};
  it.num_sge = static_cast<std::uint32_t>(n);
}
void wr_set_inline_data(ibv_qp_ex* qx, void* addr, std::size_t length) {
  if (!has_item(qx)) return;
  send_item& it = cur_item(qx);
  it.flags |= IBV_SEND_INLINE;
  const auto* b = static_cast<const std::byte*>(addr);
  it.inl.assign(b, b + length);
}
void wr_set_inline_data_list(ibv_qp_ex* qx, std::size_t n, const ibv_data_buf* list) {
  if (!has_item(qx)) return;
  send_item& it = cur_item(qx);
  it.flags |= IBV_SEND_INLINE;
  it.inl.clear();
  for (std::size_t i = 0; i < n; ++i) {
    const auto* b = static_cast<const std::byte*>(list[i].addr);
    it.inl.insert(it.inl.end(), b, b + list[i].length);
  }
}
void wr_set_ud_addr(ibv_qp_ex* qx, ibv_ah* ah, std::uint32_t qpn, std::uint32_t qkey) {
  if (!has_item(qx)) return;
  send_item& it = cur_item(qx);
  it.ah = ah, it.remote_qpn = qpn, it.remote_qkey = qkey;
}
void wr_unsupported_u32(ibv_qp_ex* qx, std::uint32_t) {
  qp_impl& q = *qp_of(qx)->impl;
  if (!q.batch_error) q.batch_error = EOPNOTSUPP;
}

constexpr std::uint64_t send_ops_supported =
    IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
    IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;

ibv_qp* create_qp(ibv_context* c, ibv_qp_init_attr_ex& a) {
  if (!(a.comp_mask & IBV_QP_INIT_ATTR_PD) || !a.pd) return fail<ibv_qp>(EINVAL);
  if (a.comp_mask & ~std::uint32_t(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS | IBV_QP_INIT_ATTR_CREATE_FLAGS))
    return fail<ibv_qp>(EOPNOTSUPP);
  if ((a.comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && a.create_flags) return fail<ibv_qp>(EOPNOTSUPP);
  rnic::qp_type t;
  switch (a.qp_type) {
    case IBV_QPT_RC: t = rnic::qp_type::rc; break;
    case IBV_QPT_UC: t = rnic::qp_type::uc; break;
    case IBV_QPT_UD: t = rnic::qp_type::ud; break;
    default: return fail<ibv_qp>(EOPNOTSUPP);  // RAW_PACKET, XRC, DRIVER
  }
  std::uint64_t ops = 0;
  if (a.comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) {
    if (a.send_ops_flags & ~send_ops_supported) return fail<ibv_qp>(EOPNOTSUPP);
    // as IBV_WR_* bit positions, which is what wr_begin checks
    const std::pair<std::uint64_t, int> map[] = {{IBV_QP_EX_WITH_RDMA_WRITE, IBV_WR_RDMA_WRITE},
                                                 {IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM, IBV_WR_RDMA_WRITE_WITH_IMM},
                                                 {IBV_QP_EX_WITH_SEND, IBV_WR_SEND},
                                                 {IBV_QP_EX_WITH_SEND_WITH_IMM, IBV_WR_SEND_WITH_IMM},
                                                 {IBV_QP_EX_WITH_RDMA_READ, IBV_WR_RDMA_READ},
                                                 {IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP, IBV_WR_ATOMIC_CMP_AND_SWP},
                                                 {IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD, IBV_WR_ATOMIC_FETCH_AND_ADD}};
    for (const auto& [flag, op] : map)
      if (a.send_ops_flags & flag) ops |= 1ull << op;
  }
  if (!a.send_cq || !a.recv_cq) return fail<ibv_qp>(EINVAL);
  ibv_qp_cap& cap = a.cap;
  if (cap.max_send_wr > max_qp_wr || cap.max_recv_wr > max_qp_wr || cap.max_send_sge > rnic::max_sge ||
      cap.max_recv_sge > rnic::max_sge || cap.max_inline_data > max_inline_data)
    return fail<ibv_qp>(EINVAL);
  context_impl& ci = *ctx_of(c)->impl;
  engine& e = *ci.eng;
  auto impl = std::make_unique<qp_impl>();
  impl->eng = &e;
  impl->ctx = &ci;
  impl->type = t;
  impl->send_ops = ops;
  impl->sq_sig_all = a.sq_sig_all != 0;
  const std::uint32_t sq_depth = pow2_at_least(std::max<std::uint32_t>(cap.max_send_wr, 1));
  const std::uint32_t rq_depth = pow2_at_least(std::max<std::uint32_t>(cap.max_recv_wr, 1));
  if (auto ext = pd_alloc<rnic::send_wqe>(a.pd, sq_depth, resource_sq, impl->sq_buf)) {
    if (ext->empty()) return fail<ibv_qp>(ENOMEM);
    impl->sq = std::make_unique<rnic::sq_memory>(*ext);
  } else {
    impl->sq = std::make_unique<rnic::sq_memory>(sq_depth);
  }
  if (!a.srq) {
    if (auto ext = pd_alloc<rnic::recv_wqe>(a.pd, rq_depth, resource_rq, impl->rq_buf)) {
      if (ext->empty()) return fail<ibv_qp>(ENOMEM);
      impl->rq = std::make_unique<rnic::rq_memory>(*ext);
    } else {
      impl->rq = std::make_unique<rnic::rq_memory>(rq_depth);
    }
  }
  impl->cap.max_send_wr = sq_depth;
  impl->cap.max_recv_wr = a.srq ? 0 : rq_depth;
  impl->cap.max_send_sge = rnic::max_sge;
  impl->cap.max_recv_sge = a.srq ? 0 : rnic::max_sge;
  impl->cap.max_inline_data = std::max<std::uint32_t>(cap.max_inline_data, rnic::max_inline);
  if (const int err = e.reserve(res::qp, 1)) return fail<ibv_qp>(err);
  held hold{e, res::qp, 1};
  auto* p = new (std::nothrow) pw_qp{};
  if (!p) return fail<ibv_qp>(ENOMEM);
  {
    std::lock_guard g(e.mu);
    const std::uint32_t pd = a.pd->handle;
    if (impl->cap.max_inline_data > rnic::max_inline) {
      impl->bounce_stride = (impl->cap.max_inline_data + 63) & ~63u;
      impl->bounce = std::make_unique<std::byte[]>(std::size_t{sq_depth} * impl->bounce_stride);
      const auto mr = e.dev->reg_mr(pd, impl->bounce.get(), std::uint64_t{sq_depth} * impl->bounce_stride, rnic::access::none);
      if (!mr) {
        delete p;
        return fail<ibv_qp>(to_errno(mr.code()));
      }
      impl->bounce_key = mr->lkey;
    }
    rnic::qp_init_attr ia;
    ia.type = t;
    ia.pd = pd;
    ia.send_cq = cq_of(a.send_cq)->impl->n;
    ia.recv_cq = cq_of(a.recv_cq)->impl->n;
    ia.sq = impl->sq.get();
    ia.rq = impl->rq.get();
    if (a.srq) ia.srq = reinterpret_cast<pw_srq*>(a.srq)->impl->n;
    ia.sq_sig_all = impl->sq_sig_all;
    const auto n = e.dev->create_qp(ia);
    if (!n) {
      if (impl->bounce_key) (void)e.dev->dereg_mr(impl->bounce_key);
      delete p;
      return fail<ibv_qp>(to_errno(n.code()));
    }
    impl->qpn = *n;
    e.qps[*n] = {&p->ex.qp_base, &ci};
  }
  cap = impl->cap;
  ibv_qp& q = p->ex.qp_base;
  q.context = c;
  q.qp_context = a.qp_context;
  q.pd = a.pd;
  q.send_cq = a.send_cq;
  q.recv_cq = a.recv_cq;
  q.srq = a.srq;
  q.handle = impl->qpn;
  q.qp_num = impl->qpn;
  q.state = IBV_QPS_RESET;
  q.qp_type = a.qp_type;
  pthread_mutex_init(&q.mutex, nullptr);
  pthread_cond_init(&q.cond, nullptr);
  ibv_qp_ex& x = p->ex;
  x.wr_start = wr_start;
  x.wr_complete = wr_complete;
  x.wr_abort = wr_abort;
  x.wr_send = wr_send;
  x.wr_send_imm = wr_send_imm;
  x.wr_rdma_write = wr_rdma_write;
  x.wr_rdma_write_imm = wr_rdma_write_imm;
  x.wr_rdma_read = wr_rdma_read;
  x.wr_atomic_cmp_swp = wr_cmp_swp;
  x.wr_atomic_fetch_add = wr_fetch_add;
  x.wr_set_sge = wr_set_sge;
  x.wr_set_sge_list = wr_set_sge_list;
  x.wr_set_inline_data = wr_set_inline_data;
  x.wr_set_inline_data_list = wr_set_inline_data_list;
  x.wr_set_ud_addr = wr_set_ud_addr;
  x.wr_local_inv = wr_unsupported_u32;
  x.wr_send_inv = wr_unsupported_u32;
  x.wr_set_xrc_srqn = wr_unsupported_u32;
  p->impl = impl.release();
  hold.kept = true;
  return &q;
}

ibv_qp* op_create_qp_ex(ibv_context* c, ibv_qp_init_attr_ex* a) {
  if (!a) return fail<ibv_qp>(EINVAL);
  return create_qp(c, *a);
}

ibv_srq* create_srq(ibv_pd* pd, ibv_srq_init_attr& a) {
  if (a.attr.max_wr == 0 || a.attr.max_wr > max_srq_wr || a.attr.max_sge > rnic::max_sge) return fail<ibv_srq>(EINVAL);
  context_impl& ci = *ctx_of(pd->context)->impl;
  engine& e = *ci.eng;
  auto impl = std::make_unique<srq_impl>();
  impl->eng = &e;
  const std::uint32_t depth = pow2_at_least(a.attr.max_wr);
  if (auto ext = pd_alloc<rnic::recv_wqe>(pd, depth, resource_srq, impl->ring_buf)) {
    if (ext->empty()) return fail<ibv_srq>(ENOMEM);
    impl->mem = std::make_unique<rnic::rq_memory>(*ext);
  } else {
    impl->mem = std::make_unique<rnic::rq_memory>(depth);
  }
  impl->max_wr = depth;
  impl->max_sge = rnic::max_sge;
  auto* p = new (std::nothrow) pw_srq{};
  if (!p) return fail<ibv_srq>(ENOMEM);
  {
    std::lock_guard g(e.mu);
    const auto n = e.dev->create_srq(pd->handle, *impl->mem);
    if (!n) {
      delete p;
      return fail<ibv_srq>(to_errno(n.code()));
    }
    impl->n = *n;
    if (a.attr.srq_limit) (void)e.dev->arm_srq_limit(*n, a.attr.srq_limit);
    e.srqs[*n] = {&p->srq, &ci};
  }
  a.attr.max_wr = impl->max_wr;
  a.attr.max_sge = impl->max_sge;
  p->srq.context = pd->context;
  p->srq.srq_context = a.srq_context;
  p->srq.pd = pd;
  p->srq.handle = impl->n;
  pthread_mutex_init(&p->srq.mutex, nullptr);
  pthread_cond_init(&p->srq.cond, nullptr);
  p->impl = impl.release();
  return &p->srq;
}

ibv_srq* op_create_srq_ex(ibv_context* c, ibv_srq_init_attr_ex* a) {
  if (!a || !(a->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !a->pd) return fail<ibv_srq>(EINVAL);
  if (a->comp_mask & ~std::uint32_t(IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_CQ)) return fail<ibv_srq>(EOPNOTSUPP);
  if ((a->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) && a->srq_type != IBV_SRQT_BASIC) return fail<ibv_srq>(EOPNOTSUPP);
  if (a->pd->context != c) return fail<ibv_srq>(EINVAL);
  ibv_srq_init_attr b{a->srq_context, a->attr};
  ibv_srq* s = create_srq(a->pd, b);
  if (s) a->attr = b.attr;
  return s;
}

int op_advise_mr(ibv_pd* pd, ibv_advise_mr_advice advice, std::uint32_t flags, ibv_sge* list, std::uint32_t n) {
  if (advice != IBV_ADVISE_MR_ADVICE_PREFETCH && advice != IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE &&
      advice != IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT)
    return EOPNOTSUPP;
  if ((flags & ~std::uint32_t(IBV_ADVISE_MR_FLAG_FLUSH)) || !list || n == 0 || n > rnic::max_sge * 64) return EINVAL;
  std::vector<rnic::sge> ranges(n);
  for (std::uint32_t i = 0; i < n; ++i) ranges[i] = {list[i].addr, list[i].length, list[i].lkey};
  engine& e = *ctx_of(pd->context)->impl->eng;
  std::lock_guard g(e.mu);
  // Prefetching is done before the call returns, so FLUSH (wait for it) always holds.
  const rnic::access need = advice == IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE ? rnic::access::local_write : rnic::access::none;
  return to_errno(e.dev->prefetch(pd->handle, ranges, need, advice != IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT));
}

ibv_td* op_alloc_td(ibv_context* c, ibv_td_init_attr* a) {
  if (!a || a->comp_mask) return fail<ibv_td>(EINVAL);
  auto* t = new (std::nothrow) pw_td{};
  if (!t) return fail<ibv_td>(ENOMEM);
  t->td.context = c;
  return &t->td;
}
int op_dealloc_td(ibv_td* td) {
  delete reinterpret_cast<pw_td*>(td);
  return 0;
}
/// A parent domain: its protection domain's device PD (every object created in it belongs to
/// that PD), a thread domain (accepted: the device has one lock anyway) and allocators.
ibv_pd* op_alloc_parent_domain(ibv_context* c, ibv_parent_domain_init_attr* a) {
  if (!a || !a->pd || a->pd->context != c || pd_of(a->pd)->parent) return fail<ibv_pd>(EINVAL);
  if (a->comp_mask & ~std::uint32_t(IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT))
    return fail<ibv_pd>(EOPNOTSUPP);
  if ((a->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS) && (!a->alloc || !a->free)) return fail<ibv_pd>(EINVAL);
  if (a->td && a->td->context != c) return fail<ibv_pd>(EINVAL);
  auto* p = new (std::nothrow) pw_pd{};
  if (!p) return fail<ibv_pd>(ENOMEM);
  p->pd.context = c;
  p->pd.handle = a->pd->handle;
  p->parent = true;
  if (a->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS) p->alloc = a->alloc, p->free = a->free;
  if (a->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT) p->pd_context = a->pd_context;
  return &p->pd;
}

void fill_context_ops(pw_context& p) {
  ibv_context_ops& o = p.v.context.ops;
  o.alloc_mw = op_alloc_mw;
  o.bind_mw = op_bind_mw;
  o.dealloc_mw = op_dealloc_mw;
  o.poll_cq = op_poll_cq;
  o.req_notify_cq = op_req_notify_cq;
  o.post_srq_recv = op_post_srq_recv;
  o.post_send = op_post_send;
  o.post_recv = op_post_recv;
  verbs_context& v = p.v;
  v.query_port = op_query_port;
  v.advise_mr = op_advise_mr;
  v.alloc_td = op_alloc_td;
  v.dealloc_td = op_dealloc_td;
  v.alloc_parent_domain = op_alloc_parent_domain;
  v.query_device_ex = op_query_device_ex;
  v.create_cq_ex = op_create_cq_ex;
  v.create_qp_ex = op_create_qp_ex;
  v.create_srq_ex = op_create_srq_ex;
  v.sz = sizeof(verbs_context);
}

context_impl* ci_of(ibv_context* c) { return ctx_of(c)->impl; }
engine& eng_of(ibv_context* c) { return *ci_of(c)->eng; }

rnic::address_vector av_of(const ibv_ah_attr& a, std::uint8_t default_port) {
  rnic::address_vector v;
  v.port = a.port_num ? static_cast<std::uint8_t>(a.port_num - 1) : default_port;
  v.sgid_index = a.grh.sgid_index;
  std::memcpy(v.dgid.data(), a.grh.dgid.raw, 16);
  v.dmac = mac_of({v.dgid[12], v.dgid[13], v.dgid[14], v.dgid[15]});
  v.hop_limit = a.grh.hop_limit;
  v.traffic_class = a.grh.traffic_class;
  v.flow_label = a.grh.flow_label & 0xFFFFF;
  v.sl = a.sl & 15;
  return v;
}
/// RoCE needs a GRH; its source GID index must name an entry of the table, of the
/// destination's family (IPv4-mapped GID 0 to IPv4-mapped GIDs, IPv6 GID 1 to IPv6 ones).
int check_ah_attr(const engine& e, const ibv_ah_attr& a, std::uint8_t default_port) {
  if (!a.is_global) return EINVAL;
  if (a.port_num && !e.has_port(a.port_num)) return EINVAL;
  const auto sgid = e.gid_at(a.port_num ? a.port_num : default_port + 1u, a.grh.sgid_index);
  if (!sgid) return EINVAL;
  std::array<std::uint8_t, 16> d{};
  std::memcpy(d.data(), a.grh.dgid.raw, 16);
  if (rnic::is_v4(d) != rnic::is_v4(*sgid)) return EINVAL;
  return 0;
}

}  // namespace

// ==== exported ===================================================================================
PW_EXPORT ibv_device** (ibv_get_device_list)(int* num) {
  registry& r = reg();
  auto** list = static_cast<ibv_device**>(std::calloc(r.specs.size() + 1, sizeof(ibv_device*)));
  if (!list) {
    errno = ENOMEM;
    return nullptr;
  }
  for (std::size_t i = 0; i < r.specs.size(); ++i) list[i] = &r.devices[i].dev;
  if (num) *num = static_cast<int>(r.specs.size());
  return list;
}
PW_EXPORT void ibv_free_device_list(ibv_device** list) { std::free(list); }
PW_EXPORT const char* ibv_get_device_name(ibv_device* d) { return d ? d->name : nullptr; }
PW_EXPORT int ibv_get_device_index(ibv_device* d) {
  const pw_device* p = device_of(d);
  return p ? static_cast<int>(p->index) : -1;
}
PW_EXPORT __be64 ibv_get_device_guid(ibv_device* d) {
  // The GUID follows the port's MAC, which follows its address: known once opened (auto).
  const pw_device* p = device_of(d);
  if (!p) return 0;
  registry& r = reg();
  std::lock_guard g(r.mu);
  if (engine* e = r.engines[p->index]) return htobe64(e->guid());
  if (const auto& a = r.specs[p->index].address) return htobe64(pushwire::ib::node_guid_of(mac_of(*a)));
  return 0;
}

PW_EXPORT ibv_context* ibv_open_device(ibv_device* d) {
  pw_device* pd = device_of(d);
  if (!pd) return fail<ibv_context>(ENODEV);
  engine* e = open_engine(pd->index);
  if (!e) return nullptr;
  auto* p = new (std::nothrow) pw_context{};
  auto* ci = new (std::nothrow) context_impl{};
  if (!p || !ci) {
    delete p;
    delete ci;
    close_engine(e);
    return fail<ibv_context>(ENOMEM);
  }
  ci->eng = e;
  ci->dev = pd;
  {
    std::lock_guard g(e->mu);
    e->contexts.push_back(ci);
  }
  ci->async_fd = ::eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
  ci->cmd_fd = ::eventfd(0, EFD_CLOEXEC);
  p->impl = ci;
  fill_context_ops(*p);
  ibv_context& c = p->v.context;
  c.device = d;
  c.cmd_fd = ci->cmd_fd;
  c.async_fd = ci->async_fd;
  c.num_comp_vectors = 1;
  pthread_mutex_init(&c.mutex, nullptr);
  c.abi_compat = __VERBS_ABI_IS_EXTENDED;
  return &c;
}

PW_EXPORT int ibv_close_device(ibv_context* c) {
  pw_context* p = ctx_of(c);
  context_impl* ci = p->impl;
  {
    std::lock_guard g(ci->eng->mu);
    std::erase(ci->eng->contexts, ci);
  }
  close_engine(ci->eng);
  ::close(ci->async_fd);
  ::close(ci->cmd_fd);
  pthread_mutex_destroy(&c->mutex);
  delete ci;
  delete p;
  return 0;
}

PW_EXPORT int ibv_query_device(ibv_context* c, ibv_device_attr* a) {
  if (!a) return EINVAL;
  fill_device_attr(eng_of(c), *a);
  return 0;
}

PW_EXPORT int (ibv_query_port)(ibv_context* c, std::uint8_t port, _compat_ibv_port_attr* a) {
  // The symbol's callers are binaries built before port_cap_flags2: fill the older layout only.
  return op_query_port(c, port, reinterpret_cast<ibv_port_attr*>(a), offsetof(ibv_port_attr, port_cap_flags2));
}

PW_EXPORT int _ibv_query_gid_ex(ibv_context* c, std::uint32_t port, std::uint32_t index, ibv_gid_entry* entry, std::uint32_t flags,
                                std::size_t size) {
  if (flags || !entry || size < sizeof(ibv_gid_entry)) return EINVAL;
  const engine& e = eng_of(c);
  if (!e.has_port(port)) return EINVAL;
  if (index >= static_cast<std::uint32_t>(e.gid_count(port))) return EINVAL;
  ibv_gid_entry g{};
  const auto gid = *e.gid_at(port, index);
  std::memcpy(g.gid.raw, gid.data(), 16);
  g.gid_index = index;
  g.port_num = port;
  g.gid_type = IBV_GID_TYPE_ROCE_V2;
  g.ndev_ifindex = 0;  // no net device: a UDP socket
  std::memcpy(entry, &g, sizeof g);
  return 0;
}
PW_EXPORT ssize_t _ibv_query_gid_table(ibv_context* c, ibv_gid_entry* entries, std::size_t max, std::uint32_t flags, std::size_t size) {
  if (flags || size < sizeof(ibv_gid_entry)) return -EINVAL;
  const engine& e = eng_of(c);
  std::size_t n = 0;
  for (std::uint32_t p = 1; p <= e.ports.size(); ++p) n += static_cast<std::size_t>(e.gid_count(p));
  if (max < n) return -EINVAL;
  std::size_t k = 0;
  for (std::uint32_t p = 1; p <= e.ports.size(); ++p)
    for (int i = 0; i < e.gid_count(p); ++i, ++k) {
      auto* slot = reinterpret_cast<ibv_gid_entry*>(reinterpret_cast<std::byte*>(entries) + k * size);
      if (const int r = _ibv_query_gid_ex(c, p, static_cast<std::uint32_t>(i), slot, 0, size)) return -r;
    }
  return static_cast<ssize_t>(n);
}
PW_EXPORT int ibv_query_gid(ibv_context* c, std::uint8_t port, int index, ibv_gid* gid) {
  if (!gid || index < 0) return -1;
  ibv_gid_entry g{};
  const int r = _ibv_query_gid_ex(c, port, static_cast<std::uint32_t>(index), &g, 0, sizeof g);
  if (r == ENODATA) {
    std::memset(gid, 0, sizeof *gid);
    return 0;
  }
  if (r) return -1;
  *gid = g.gid;
  return 0;
}
/// rdma-core's private GID type query: 0 = IB / RoCE v1, 1 = RoCE v2 (as sysfs spells them).
PW_EXPORT int ibv_query_gid_type(ibv_context* c, std::uint8_t port, unsigned index, int* type) {
  ibv_gid_entry g{};
  const int r = _ibv_query_gid_ex(c, port, index, &g, 0, sizeof g);
  if (r == ENODATA) {
    *type = 0;
    return 0;
  }
  if (r) {
    errno = r;
    return -1;
  }
  *type = 1;
  return 0;
}
PW_EXPORT int ibv_query_pkey(ibv_context* c, std::uint8_t port, int index, __be16* pkey) {
  if (!eng_of(c).has_port(port) || index != 0 || !pkey) return -1;
  *pkey = htons(0xFFFF);
  return 0;
}
PW_EXPORT int ibv_get_pkey_index(ibv_context* c, std::uint8_t port, __be16 pkey) {
  if (!eng_of(c).has_port(port)) return -EINVAL;
  return (ntohs(pkey) & 0x7FFF) == 0x7FFF ? 0 : -ENOENT;
}

// ---- PD, MR ----
PW_EXPORT ibv_pd* ibv_alloc_pd(ibv_context* c) {
  engine& e = eng_of(c);
  auto* p = new (std::nothrow) pw_pd{};
  if (!p) return fail<ibv_pd>(ENOMEM);
  std::lock_guard g(e.mu);
  const auto n = e.dev->alloc_pd();
  if (!n) {
    delete p;
    return fail<ibv_pd>(to_errno(n.code()));
  }
  p->pd.context = c;
  p->pd.handle = *n;
  return &p->pd;
}
PW_EXPORT int ibv_dealloc_pd(ibv_pd* pd) {
  pw_pd* p = pd_of(pd);
  if (!p->parent) {  // a parent domain holds no device PD of its own
    engine& e = eng_of(pd->context);
    std::lock_guard g(e.mu);
    if (const rnic::errc r = e.dev->dealloc_pd(pd->handle); r != rnic::errc{}) return to_errno(r);
  }
  delete p;
  return 0;
}

namespace {
constexpr unsigned access_known = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |
                                  IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED | IBV_ACCESS_ON_DEMAND | IBV_ACCESS_HUGETLB |
                                  IBV_ACCESS_RELAXED_ORDERING;
int check_access(unsigned access) {
  if (access & ~access_known & ~unsigned(IBV_ACCESS_OPTIONAL_RANGE)) return EINVAL;
  // Remote write and atomic need local write (IBTA 10.6.3.1).
  if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) && !(access & IBV_ACCESS_LOCAL_WRITE)) return EINVAL;
  if (access & IBV_ACCESS_MW_BIND) return EOPNOTSUPP;  // no memory windows
  return 0;
}
rnic::access rights_of(unsigned access) { return static_cast<rnic::access>(access & 0xF); }

/// card: a card's memory (ibv_reg_dmabuf_mr), or -1 for host memory.
ibv_mr* reg_mr(ibv_pd* pd, void* addr, std::size_t length, std::uint64_t iova, unsigned access, int card = -1) {
  if (int r = check_access(access)) return fail<ibv_mr>(r);
  if (length == 0) return fail<ibv_mr>(EINVAL);
  // Implicit ODP (as mlx5): NULL and SIZE_MAX with IBV_ACCESS_ON_DEMAND, at iova 0, a key over the
  // whole address space whose pages are the kernel's (spec/verbs.md §3).
  const bool implicit = (access & IBV_ACCESS_ON_DEMAND) && addr == nullptr && length == SIZE_MAX;
  if (implicit && iova != 0) return fail<ibv_mr>(EINVAL);
  const std::int64_t bytes = implicit ? 0 : static_cast<std::int64_t>(length);
  engine& e = eng_of(pd->context);
  if (const int err = e.reserve(res::mr, 1)) return fail<ibv_mr>(err);
  held hold{e, res::mr, 1};
  if (const int err = bytes ? e.reserve(res::bytes, bytes) : 0) return fail<ibv_mr>(err);
  held hold_bytes{e, res::bytes, bytes};
  auto* m = new (std::nothrow) pw_mr{};
  if (!m) return fail<ibv_mr>(ENOMEM);
  m->implicit = implicit;
  std::unique_lock g(e.mu);
  rnic::result<rnic::memory_region> r = rnic::errc::invalid_argument;
  if (implicit) {
    r = e.dev->reg_mr_implicit(pd->handle, rights_of(access));
  } else if (access & IBV_ACCESS_ON_DEMAND) {
    if (iova != reinterpret_cast<std::uintptr_t>(addr)) {
      delete m;
      return fail<ibv_mr>(EOPNOTSUPP);
    }
    r = e.dev->reg_mr_on_demand(pd->handle, addr, length, rights_of(access));
  } else if (card >= 0) {
    r = e.dev->reg_mr_card(pd->handle, static_cast<std::uint8_t>(card), addr, length, iova, rights_of(access));
  } else {
    r = e.dev->reg_mr_iova(pd->handle, addr, length, iova, rights_of(access));
  }
  if (!r) {
    delete m;
    return fail<ibv_mr>(to_errno(r.code()));
  }
  m->mr.context = pd->context;
  m->mr.pd = pd;
  m->mr.addr = addr;
  m->mr.length = length;
  m->mr.handle = r->lkey;
  m->mr.lkey = r->lkey;
  m->mr.rkey = r->rkey;
  g.unlock();  // (the reservations are kept; held's destructors would talk to the device process)
  hold.kept = hold_bytes.kept = true;
  return &m->mr;
}
}  // namespace

PW_EXPORT ibv_mr* (ibv_reg_mr)(ibv_pd* pd, void* addr, std::size_t length, int access) {
  return reg_mr(pd, addr, length, reinterpret_cast<std::uintptr_t>(addr), static_cast<unsigned>(access));
}
PW_EXPORT ibv_mr* (ibv_reg_mr_iova)(ibv_pd* pd, void* addr, std::size_t length, std::uint64_t iova, int access) {
  return reg_mr(pd, addr, length, iova, static_cast<unsigned>(access));
}
PW_EXPORT ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr, std::size_t length, std::uint64_t iova, unsigned access) {
  return reg_mr(pd, addr, length, iova, access);
}
/// Bytes [offset, offset + length) of a dma-buf (a udmabuf over a memfd, or any exporter that
/// maps; spec/verbs.md §3), or of a memfd itself, as a card's memory would be registered: the
/// provider maps the buffer (MAP_SHARED) and the device reaches it at `iova`, which has the
/// page offset of `offset` (ibv_reg_mr(3)). A buffer named `pushwire-cardN` is card N's memory
/// (net::card_of_fd), moved P2P or proxied as the platform selects. Errors: EINVAL (access
/// beyond local and remote write, remote read, atomic and relaxed ordering; remote write or
/// atomic without local write; a length of 0; iova's page offset not offset's; the range past
/// the buffer's end; fd neither a dma-buf nor a regular file; a card the platform does not
/// have), EBADF (fd), and mmap's errno when the buffer does not map.
PW_EXPORT ibv_mr* ibv_reg_dmabuf_mr(ibv_pd* pd, std::uint64_t offset, std::size_t length, std::uint64_t iova, int fd, int access) {
  constexpr unsigned dmabuf_access =
      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_RELAXED_ORDERING;
  const auto acc = static_cast<unsigned>(access);
  if (acc & ~dmabuf_access) return fail<ibv_mr>(EINVAL);
  const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  if (length == 0 || iova % page != offset % page) return fail<ibv_mr>(EINVAL);
  struct stat st{};
  if (::fstat(fd, &st) != 0) return fail<ibv_mr>(EBADF);
  std::uint64_t size = 0;
  if (S_ISREG(st.st_mode)) {
    size = static_cast<std::uint64_t>(st.st_size);
  } else {  // a dma-buf tells its size through lseek (its position is not used)
    const off_t end = ::lseek(fd, 0, SEEK_END);
    if (end < 0) return fail<ibv_mr>(EINVAL);
    size = static_cast<std::uint64_t>(end);
  }
  if (offset > size || length > size - offset) return fail<ibv_mr>(EINVAL);
  const int card = net::card_of_fd(fd);
  const std::uint64_t first = offset - offset % page;
  const std::size_t map_len = static_cast<std::size_t>((offset + length - first + page - 1) / page * page);
  const int prot = PROT_READ | (rnic::writes(rights_of(static_cast<unsigned>(acc))) ? PROT_WRITE : 0);
  void* map = ::mmap(nullptr, map_len, prot, MAP_SHARED, fd, static_cast<off_t>(first));
  if (map == MAP_FAILED) return fail<ibv_mr>(errno);
  ibv_mr* mr = reg_mr(pd, static_cast<std::byte*>(map) + (offset - first), length, iova, acc, card);
  if (!mr) {
    const int e = errno;
    ::munmap(map, map_len);
    return fail<ibv_mr>(e);
  }
  auto* m = reinterpret_cast<pw_mr*>(mr);
  m->map = map, m->map_len = map_len;
  mr->addr = reinterpret_cast<void*>(static_cast<std::uintptr_t>(offset));  // as libibverbs reports a dma-buf MR
  return mr;
}
PW_EXPORT int pwdv_card_buffer(unsigned card, std::size_t bytes) { return net::card_buffer(card, bytes); }
PW_EXPORT int pwdv_query_datapaths(ibv_context* ctx, pwdv_path_counters counters[3][2]) {
  if (!ctx || !counters) return EINVAL;
  engine& e = eng_of(ctx);
  std::lock_guard g(e.mu);
  const auto& paths = e.dev->counters().paths;
  for (std::size_t p = 0; p < 3; ++p)
    for (std::size_t d = 0; d < 2; ++d) counters[p][d] = {paths[p][d].transfers, paths[p][d].bytes, paths[p][d].modelled_ns};
  return 0;
}
PW_EXPORT int ibv_dereg_mr(ibv_mr* mr) {
  engine& e = eng_of(mr->context);
  {
    std::lock_guard g(e.mu);
    if (const rnic::errc r = e.dev->dereg_mr(mr->lkey); r != rnic::errc{}) return to_errno(r);
  }
  auto* m = reinterpret_cast<pw_mr*>(mr);
  (void)e.reserve(res::mr, -1);
  if (!m->implicit) (void)e.reserve(res::bytes, -static_cast<std::int64_t>(mr->length));
  if (m->map) ::munmap(m->map, m->map_len);
  delete m;
  return 0;
}
PW_EXPORT int ibv_rereg_mr(ibv_mr* mr, int flags, ibv_pd* pd, void* addr, std::size_t length, int access) {
  if (flags & ~(IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_PD | IBV_REREG_MR_CHANGE_ACCESS)) return IBV_REREG_MR_ERR_INPUT;
  if (!flags) return IBV_REREG_MR_ERR_INPUT;
  if ((flags & IBV_REREG_MR_CHANGE_ACCESS) && check_access(static_cast<unsigned>(access))) return IBV_REREG_MR_ERR_INPUT;
  if (flags & IBV_REREG_MR_CHANGE_TRANSLATION && length == 0) return IBV_REREG_MR_ERR_INPUT;
  // a dma-buf MR (as libibverbs refuses), or an implicit one (as mlx5 refuses)
  if (reinterpret_cast<pw_mr*>(mr)->map || reinterpret_cast<pw_mr*>(mr)->implicit) return IBV_REREG_MR_ERR_INPUT;
  engine& e = eng_of(mr->context);
  const std::int64_t grow = flags & IBV_REREG_MR_CHANGE_TRANSLATION ? static_cast<std::int64_t>(length) - static_cast<std::int64_t>(mr->length) : 0;
  if (grow > 0 && e.reserve(res::bytes, grow)) return IBV_REREG_MR_ERR_INPUT;
  held more{e, res::bytes, grow > 0 ? grow : 0};
  std::unique_lock g(e.mu);
  const auto info = e.dev->memory().info(mr->lkey);
  if (!info) return IBV_REREG_MR_ERR_INPUT;
  void* const new_addr = flags & IBV_REREG_MR_CHANGE_TRANSLATION ? addr : mr->addr;
  const std::size_t new_len = flags & IBV_REREG_MR_CHANGE_TRANSLATION ? length : mr->length;
  const rnic::access new_rights = flags & IBV_REREG_MR_CHANGE_ACCESS ? rights_of(static_cast<unsigned>(access)) : info->rights;
  ibv_pd* const new_pd = flags & IBV_REREG_MR_CHANGE_PD ? pd : mr->pd;
  if (!new_pd) return IBV_REREG_MR_ERR_INPUT;
  // The keys stay (as rxe and mlx5 keep them); a new translation starts at its address.
  rnic::rereg_options o;
  o.new_key = false;
  if (!(flags & IBV_REREG_MR_CHANGE_TRANSLATION)) o.iova = info->iova;
  if (flags & IBV_REREG_MR_CHANGE_PD) o.pd = new_pd->handle;
  const auto r = e.dev->rereg_mr(mr->lkey, new_addr, new_len, new_rights, o);
  if (!r) return IBV_REREG_MR_ERR_INPUT;
  mr->pd = new_pd;
  mr->addr = new_addr;
  mr->length = new_len;
  mr->lkey = mr->rkey = r->lkey;
  mr->handle = r->lkey;
  g.unlock();
  more.kept = true;
  if (grow < 0) (void)e.reserve(res::bytes, grow);
  return 0;
}

// ---- completion channels and CQs ----
PW_EXPORT ibv_comp_channel* ibv_create_comp_channel(ibv_context* c) {
  auto* p = new (std::nothrow) pw_channel{};
  if (!p) return fail<ibv_comp_channel>(ENOMEM);
  p->impl = new (std::nothrow) channel_impl;
  p->ch.fd = ::eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
  if (!p->impl || p->ch.fd < 0) {
    const int err = p->impl ? errno : ENOMEM;
    if (p->ch.fd >= 0) ::close(p->ch.fd);
    delete p->impl;
    delete p;
    return fail<ibv_comp_channel>(err);
  }
  p->ch.context = c;
  p->ch.refcnt = 0;
  return &p->ch;
}
PW_EXPORT int ibv_destroy_comp_channel(ibv_comp_channel* ch) {
  if (ch->refcnt) return EBUSY;
  auto* p = reinterpret_cast<pw_channel*>(ch);
  ::close(ch->fd);
  delete p->impl;
  delete p;
  return 0;
}
PW_EXPORT int ibv_get_cq_event(ibv_comp_channel* ch, ibv_cq** cq, void** cq_context) {
  std::uint64_t v;
  if (::read(ch->fd, &v, sizeof v) != sizeof v) return -1;
  channel_impl* ci = reinterpret_cast<pw_channel*>(ch)->impl;
  std::lock_guard g(ci->mu);
  if (ci->fired.empty()) {
    errno = EAGAIN;
    return -1;
  }
  *cq = ci->fired.front();
  ci->fired.pop_front();
  *cq_context = (*cq)->cq_context;
  return 0;
}
PW_EXPORT void ibv_ack_cq_events(ibv_cq* cq, unsigned n) {
  pthread_mutex_lock(&cq->mutex);
  cq->comp_events_completed += n;
  pthread_cond_signal(&cq->cond);
  pthread_mutex_unlock(&cq->mutex);
}
PW_EXPORT ibv_cq* ibv_create_cq(ibv_context* c, int cqe, void* cq_context, ibv_comp_channel* ch, int comp_vector) {
  if (cqe <= 0 || comp_vector < 0) return fail<ibv_cq>(EINVAL);
  ibv_cq_init_attr_ex a{};
  a.cqe = static_cast<std::uint32_t>(cqe);
  a.cq_context = cq_context;
  a.channel = ch;
  a.comp_vector = static_cast<std::uint32_t>(comp_vector);
  ibv_cq_ex* x = create_cq(c, a);
  return x ? ibv_cq_ex_to_cq(x) : nullptr;
}
PW_EXPORT int ibv_resize_cq(ibv_cq* cq, int cqe) {
  if (!cq || cqe <= 0 || static_cast<std::uint32_t>(cqe) > max_cqe) return EINVAL;
  cq_impl& q = *cq_of(cq)->impl;
  const std::uint32_t depth = pow2_at_least(std::max<std::uint32_t>(static_cast<std::uint32_t>(cqe), 2));
  auto buf = std::make_unique<pd_buffer>();
  std::unique_ptr<rnic::cq_memory> mem;
  if (q.ring_buf.pd) {  // a parent domain's CQ: its allocator again
    auto ext = pd_alloc<rnic::cqe>(&q.ring_buf.pd->pd, depth, resource_cq, *buf);
    if (ext && ext->empty()) return ENOMEM;
    mem = ext ? std::make_unique<rnic::cq_memory>(*ext) : std::make_unique<rnic::cq_memory>(depth);
  } else {
    mem = std::make_unique<rnic::cq_memory>(depth);
  }
  std::lock_guard g(q.eng->mu);
  std::lock_guard g2(q.poll_mu);
  if (const rnic::errc r = q.eng->dev->resize_cq(q.n, *mem); r != rnic::errc{}) return to_errno(r);
  std::swap(q.mem, mem);  // the old ring goes (after the device stopped writing it)
  mem.reset();
  // the new ring's buffer stays, the old one (if from a parent domain) is given back with buf
  std::swap(q.ring_buf.p, buf->p), std::swap(q.ring_buf.pd, buf->pd), std::swap(q.ring_buf.type, buf->type);
  cq->cqe = static_cast<int>(depth);
  return 0;
}
PW_EXPORT int ibv_destroy_cq(ibv_cq* cq) {
  pw_cq* p = cq_of(cq);
  engine& e = *p->impl->eng;
  {
    std::lock_guard g(e.mu);
    if (const rnic::errc r = e.dev->destroy_cq(p->impl->n); r != rnic::errc{}) return to_errno(r);
    e.cqs.erase(p->impl->n);
  }
  (void)e.reserve(res::cq, -1);
  if (cq->channel) {
    // events of this CQ still queued on the channel are dropped with it
    channel_impl* ci = reinterpret_cast<pw_channel*>(cq->channel)->impl;
    std::lock_guard g(ci->mu);
    std::erase(ci->fired, cq);
    --cq->channel->refcnt;
  }
  delete p->impl;
  delete p;
  return 0;
}

// ---- async events ----
PW_EXPORT int ibv_get_async_event(ibv_context* c, ibv_async_event* ev) {
  context_impl* ci = ci_of(c);
  std::uint64_t v;
  if (::read(ci->async_fd, &v, sizeof v) != sizeof v) return -1;
  std::lock_guard g(ci->amu);
  if (ci->events.empty()) {
    errno = EAGAIN;
    return -1;
  }
  *ev = ci->events.front();
  ci->events.pop_front();
  return 0;
}
PW_EXPORT void ibv_ack_async_event(ibv_async_event*) {}

// ---- QPs ----
PW_EXPORT ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* a) {
  if (!pd || !a) return fail<ibv_qp>(EINVAL);
  ibv_qp_init_attr_ex x{};
  x.qp_context = a->qp_context;
  x.send_cq = a->send_cq;
  x.recv_cq = a->recv_cq;
  x.srq = a->srq;
  x.cap = a->cap;
  x.qp_type = a->qp_type;
  x.sq_sig_all = a->sq_sig_all;
  x.comp_mask = IBV_QP_INIT_ATTR_PD;
  x.pd = pd;
  ibv_qp* q = create_qp(pd->context, x);
  if (q) a->cap = x.cap;
  return q;
}
PW_EXPORT ibv_qp_ex* ibv_qp_to_qp_ex(ibv_qp* qp) { return &qp_of(qp)->ex; }

PW_EXPORT int ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int mask) {
  qp_impl& q = *qp_of(qp)->impl;
  constexpr int known = (1 << 21) - 1;  // IBV_QP_STATE .. IBV_QP_DEST_QPN
  if (mask & ~known) return EINVAL;     // RATE_LIMIT and beyond: not supported
  rnic::qp_attr a;
  a.state = static_cast<rnic::qp_state>(attr->qp_state);
  a.cur_state = static_cast<rnic::qp_state>(attr->cur_qp_state);
  if ((mask & IBV_QP_STATE) && attr->qp_state > IBV_QPS_ERR) return EINVAL;
  if ((mask & IBV_QP_CUR_STATE) && attr->cur_qp_state > IBV_QPS_ERR) return EINVAL;
  // Only the remote rights mean something for a QP; other bits (LOCAL_WRITE, ON_DEMAND, ... as
  // programs pass their MR's flags) are ignored, as rxe and mlx5 ignore them.
  a.access_flags = static_cast<rnic::access>(attr->qp_access_flags & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC));
  a.pkey_index = attr->pkey_index;
  if ((mask & IBV_QP_PORT) && !q.eng->has_port(attr->port_num)) return EINVAL;
  if (mask & IBV_QP_PORT) {
    a.port = static_cast<std::uint8_t>(attr->port_num - 1);
  } else {  // a path's default port (ah_attr.port_num 0) is the QP's
    std::lock_guard g(q.eng->mu);
    const auto cur = q.eng->dev->query_qp_attr(q.qpn);
    a.port = cur ? cur->port : 0;
  }
  a.qkey = attr->qkey;
  if (mask & IBV_QP_AV) {
    // a path's port is the QP's port given in the same call, when both are
    if ((mask & IBV_QP_PORT) && attr->ah_attr.port_num && attr->ah_attr.port_num != attr->port_num) return EINVAL;
    if (const int r = check_ah_attr(*q.eng, attr->ah_attr, a.port)) return r;
    a.av = av_of(attr->ah_attr, a.port);
  }
  if (mask & IBV_QP_PATH_MTU) {
    const auto m = mtu_bytes(attr->path_mtu);
    if (!m) return EINVAL;
    a.path_mtu = *m;
  }
  a.timeout = attr->timeout;
  a.retry_cnt = attr->retry_cnt;
  a.rnr_retry = attr->rnr_retry;
  a.rq_psn = attr->rq_psn;
  a.sq_psn = attr->sq_psn;
  a.max_rd_atomic = attr->max_rd_atomic;
  a.max_dest_rd_atomic = attr->max_dest_rd_atomic;
  a.min_rnr_timer = attr->min_rnr_timer;
  a.dest_qp_num = attr->dest_qp_num;
  if (mask & IBV_QP_ALT_PATH) {  // automatic path migration (spec/qos.md §9): another port, or another GID
    if (!q.eng->has_port(attr->alt_port_num)) return EINVAL;
    if (attr->alt_ah_attr.port_num && attr->alt_ah_attr.port_num != attr->alt_port_num) return EINVAL;
    const auto alt_port = static_cast<std::uint8_t>(attr->alt_port_num - 1);
    if (const int r = check_ah_attr(*q.eng, attr->alt_ah_attr, alt_port)) return r;
    a.alt_av = av_of(attr->alt_ah_attr, alt_port);
    a.alt_timeout = attr->alt_timeout;
  }
  if (mask & IBV_QP_PATH_MIG_STATE) {
    if (attr->path_mig_state > IBV_MIG_ARMED) return EINVAL;
    a.path_mig_state = static_cast<rnic::mig_state>(attr->path_mig_state);
  }
  std::lock_guard g(q.eng->mu);
  const rnic::errc r = q.eng->dev->modify_qp(q.qpn, a, static_cast<rnic::qp_attr_mask>(mask));
  if (r != rnic::errc{}) return to_errno(r);
  if (mask & IBV_QP_STATE) qp->state = attr->qp_state;
  if ((mask & IBV_QP_STATE) && attr->qp_state == IBV_QPS_RESET) {
    // A QP in RESET has no completions left in its CQs (mlx5's provider cleans them so).
    for (ibv_cq* c : {qp->send_cq, qp->recv_cq}) {
      cq_impl& ci = *cq_of(c)->impl;
      std::lock_guard g2(ci.poll_mu);
      ci.mem->remove_qp(q.qpn);
      if (c == qp->recv_cq && qp->send_cq == qp->recv_cq) break;
    }
  }
  kick(*q.eng);
  return 0;
}

PW_EXPORT int ibv_query_qp(ibv_qp* qp, ibv_qp_attr* attr, int /*mask: everything is filled*/, ibv_qp_init_attr* init) {
  qp_impl& q = *qp_of(qp)->impl;
  rnic::qp_attr a;
  {
    std::lock_guard g(q.eng->mu);
    const auto r = q.eng->dev->query_qp_attr(q.qpn);
    if (!r) return to_errno(r.code());
    a = *r;
  }
  std::memset(attr, 0, sizeof *attr);
  attr->qp_state = static_cast<ibv_qp_state>(a.state);
  attr->cur_qp_state = attr->qp_state;
  attr->path_mtu = mtu_enum(a.path_mtu);
  attr->path_mig_state = static_cast<ibv_mig_state>(a.path_mig_state);
  attr->alt_port_num = static_cast<std::uint8_t>(a.alt_av.port + 1);
  attr->alt_timeout = a.alt_timeout;
  attr->alt_ah_attr.is_global = 1;
  attr->alt_ah_attr.port_num = attr->alt_port_num;
  attr->alt_ah_attr.sl = a.alt_av.sl;
  attr->alt_ah_attr.grh.sgid_index = a.alt_av.sgid_index;
  std::memcpy(attr->alt_ah_attr.grh.dgid.raw, a.alt_av.dgid.data(), 16);
  attr->alt_ah_attr.grh.flow_label = a.alt_av.flow_label;
  attr->alt_ah_attr.grh.hop_limit = a.alt_av.hop_limit;
  attr->alt_ah_attr.grh.traffic_class = a.alt_av.traffic_class;
  attr->qkey = a.qkey;
  attr->rq_psn = a.rq_psn;
  attr->sq_psn = a.sq_psn;
  attr->dest_qp_num = a.dest_qp_num;
  attr->qp_access_flags = static_cast<unsigned>(a.access_flags);
  attr->cap = q.cap;
  attr->ah_attr.is_global = 1;
  attr->ah_attr.grh.sgid_index = a.av.sgid_index;
  std::memcpy(attr->ah_attr.grh.dgid.raw, a.av.dgid.data(), 16);
  attr->ah_attr.grh.flow_label = a.av.flow_label;
  attr->ah_attr.grh.hop_limit = a.av.hop_limit;
  attr->ah_attr.grh.traffic_class = a.av.traffic_class;
  attr->ah_attr.sl = a.av.sl;
  attr->ah_attr.port_num = static_cast<std::uint8_t>(a.av.port + 1);
  attr->pkey_index = a.pkey_index;
  attr->en_sqd_async_notify = 0;
  attr->sq_draining = 0;
  attr->max_rd_atomic = a.max_rd_atomic;
  attr->max_dest_rd_atomic = a.max_dest_rd_atomic;
  attr->min_rnr_timer = a.min_rnr_timer;
  // an RC or UC QP's port is its path's once it has one (from RTR on), IBV_QP_PORT's before
  const bool on_path = (q.type == rnic::qp_type::rc || q.type == rnic::qp_type::uc) && a.state >= rnic::qp_state::rtr;
  attr->port_num = static_cast<std::uint8_t>((on_path ? a.av.port : a.port) + 1);
  attr->timeout = a.timeout;
  attr->retry_cnt = a.retry_cnt;
  attr->rnr_retry = a.rnr_retry;
  if (init) {
    std::memset(init, 0, sizeof *init);
    init->qp_context = qp->qp_context;
    init->send_cq = qp->send_cq;
    init->recv_cq = qp->recv_cq;
    init->srq = qp->srq;
    init->cap = q.cap;
    init->qp_type = qp->qp_type;
    init->sq_sig_all = q.sq_sig_all;
  }
  qp->state = attr->qp_state;
  return 0;
}
PW_EXPORT int ibv_query_qp_data_in_order(ibv_qp*, ibv_wr_opcode, std::uint32_t) { return 0; }

PW_EXPORT int ibv_destroy_qp(ibv_qp* qp) {
  pw_qp* p = qp_of(qp);
  qp_impl& q = *p->impl;
  {
    std::lock_guard g(q.eng->mu);
    if (const rnic::errc r = q.eng->dev->destroy_qp(q.qpn); r != rnic::errc{}) return to_errno(r);
    if (q.bounce_key) (void)q.eng->dev->dereg_mr(q.bounce_key);
    q.eng->qps.erase(q.qpn);
  }
  (void)q.eng->reserve(res::qp, -1);
  delete p->impl;
  delete p;
  return 0;
}

// ---- SRQ ----
PW_EXPORT ibv_srq* ibv_create_srq(ibv_pd* pd, ibv_srq_init_attr* a) {
  if (!pd || !a) return fail<ibv_srq>(EINVAL);
  return create_srq(pd, *a);
}
PW_EXPORT int ibv_modify_srq(ibv_srq* srq, ibv_srq_attr* attr, int mask) {
  srq_impl& s = *reinterpret_cast<pw_srq*>(srq)->impl;
  if (mask & ~int(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT)) return EINVAL;
  if (mask & IBV_SRQ_MAX_WR) return EOPNOTSUPP;  // no resizing (IBV_DEVICE_SRQ_RESIZE is not reported)
  if (mask & IBV_SRQ_LIMIT) {
    if (attr->srq_limit > s.max_wr) return EINVAL;
    std::lock_guard g(s.eng->mu);
    return to_errno(s.eng->dev->arm_srq_limit(s.n, attr->srq_limit));
  }
  return 0;
}
PW_EXPORT int ibv_query_srq(ibv_srq* srq, ibv_srq_attr* attr) {
  srq_impl& s = *reinterpret_cast<pw_srq*>(srq)->impl;
  std::lock_guard g(s.eng->mu);
  const auto lim = s.eng->dev->srq_limit(s.n);
  if (!lim) return to_errno(lim.code());
  attr->max_wr = s.max_wr;
  attr->max_sge = s.max_sge;
  attr->srq_limit = *lim;
  return 0;
}
PW_EXPORT int ibv_destroy_srq(ibv_srq* srq) {
  auto* p = reinterpret_cast<pw_srq*>(srq);
  srq_impl& s = *p->impl;
  {
    std::lock_guard g(s.eng->mu);
    if (const rnic::errc r = s.eng->dev->destroy_srq(s.n); r != rnic::errc{}) return to_errno(r);
    s.eng->srqs.erase(s.n);
  }
  delete p->impl;
  delete p;
  return 0;
}

// ---- AH ----
PW_EXPORT ibv_ah* ibv_create_ah(ibv_pd* pd, ibv_ah_attr* attr) {
  if (!pd || !attr) return fail<ibv_ah>(EINVAL);
  engine& e = eng_of(pd->context);
  if (const int r = check_ah_attr(e, *attr, 0)) return fail<ibv_ah>(r);
  auto* p = new (std::nothrow) pw_ah{};
  if (!p) return fail<ibv_ah>(ENOMEM);
  std::lock_guard g(e.mu);
  const auto n = e.dev->create_ah(pd->handle, av_of(*attr, 0));
  if (!n) {
    delete p;
    return fail<ibv_ah>(to_errno(n.code()));
  }
  p->n = *n;
  p->ah.context = pd->context;
  p->ah.pd = pd;
  p->ah.handle = *n;
  return &p->ah;
}
PW_EXPORT int ibv_destroy_ah(ibv_ah* ah) {
  auto* p = reinterpret_cast<pw_ah*>(ah);
  engine& e = eng_of(ah->context);
  {
    std::lock_guard g(e.mu);
    if (const rnic::errc r = e.dev->destroy_ah(p->n); r != rnic::errc{}) return to_errno(r);
  }
  delete p;
  return 0;
}
PW_EXPORT int ibv_init_ah_from_wc(ibv_context* c, std::uint8_t port, ibv_wc* wc, ibv_grh* grh, ibv_ah_attr* ah) {
  if (!eng_of(c).has_port(port) || !wc || !ah) return -1;
  std::memset(ah, 0, sizeof *ah);
  ah->port_num = port;
  if (!(wc->wc_flags & IBV_WC_GRH) || !grh) {
    errno = EINVAL;  // RoCE: the sender is known from the GRH only
    return -1;
  }
  // The GRH space of a RoCEv2 UD receive (ib/gid.hpp). The reply goes from the GID the packet
  // came to, to the one it came from.
  const auto g = pushwire::ib::read_grh(std::span<const std::byte, pushwire::ib::grh_size>(reinterpret_cast<const std::byte*>(grh), pushwire::ib::grh_size));
  if (!g) {
    errno = EINVAL;
    return -1;
  }
  const engine& e = eng_of(c);
  int index = -1;
  for (int i = 0; i < e.gid_count(port) && index < 0; ++i)
    if (e.gid_at(port, static_cast<std::uint32_t>(i)) == g->dgid) index = i;
  if (index < 0) {
    errno = EINVAL;  // not sent to this device
    return -1;
  }
  ah->is_global = 1;
  ah->grh.hop_limit = 64;
  ah->grh.sgid_index = static_cast<std::uint8_t>(index);
  ah->grh.traffic_class = g->traffic_class;
  ah->grh.flow_label = g->flow_label;
  std::memcpy(ah->grh.dgid.raw, g->sgid.data(), 16);
  return 0;
}
PW_EXPORT ibv_ah* ibv_create_ah_from_wc(ibv_pd* pd, ibv_wc* wc, ibv_grh* grh, std::uint8_t port) {
  ibv_ah_attr a;
  if (ibv_init_ah_from_wc(pd->context, port, wc, grh, &a)) return nullptr;
  return ibv_create_ah(pd, &a);
}
PW_EXPORT int ibv_resolve_eth_l2_from_gid(ibv_context*, ibv_ah_attr* attr, std::uint8_t eth_mac[6], std::uint16_t* vid) {
  if (!attr || !attr->is_global) return EINVAL;  // (the MAC of an IPv6 GID too: its last 4 bytes)
  const std::uint8_t* g = attr->grh.dgid.raw;
  const std::uint8_t mac[6] = {0x02, 0x00, g[12], g[13], g[14], g[15]};
  std::memcpy(eth_mac, mac, 6);
  if (vid) *vid = 0xFFFF;  // no VLAN
  return 0;
}

// ---- multicast, import, ECE, fork: what this device does not do ----
PW_EXPORT int ibv_attach_mcast(ibv_qp*, const ibv_gid*, std::uint16_t) { return EOPNOTSUPP; }
PW_EXPORT int ibv_detach_mcast(ibv_qp*, const ibv_gid*, std::uint16_t) { return EOPNOTSUPP; }
PW_EXPORT ibv_context* ibv_import_device(int) { return fail<ibv_context>(EOPNOTSUPP); }
PW_EXPORT ibv_pd* ibv_import_pd(ibv_context*, std::uint32_t) { return fail<ibv_pd>(EOPNOTSUPP); }
PW_EXPORT void ibv_unimport_pd(ibv_pd*) {}
PW_EXPORT ibv_mr* ibv_import_mr(ibv_pd*, std::uint32_t) { return fail<ibv_mr>(EOPNOTSUPP); }
PW_EXPORT void ibv_unimport_mr(ibv_mr*) {}
PW_EXPORT ibv_dm* ibv_import_dm(ibv_context*, std::uint32_t) { return fail<ibv_dm>(EOPNOTSUPP); }
PW_EXPORT void ibv_unimport_dm(ibv_dm*) {}
PW_EXPORT int ibv_set_ece(ibv_qp*, ibv_ece*) { return EOPNOTSUPP; }
PW_EXPORT int ibv_query_ece(ibv_qp*, ibv_ece*) { return EOPNOTSUPP; }
// The device reads and writes the process's memory through its own mappings, in the process:
// fork() cannot take pages from under it, so fork needs nothing (IBV_FORK_UNNEEDED).
PW_EXPORT int ibv_fork_init() { return 0; }
PW_EXPORT ibv_fork_status ibv_is_fork_initialized() { return IBV_FORK_UNNEEDED; }
PW_EXPORT int ibv_dontfork_range(void*, std::size_t) { return 0; }
PW_EXPORT int ibv_dofork_range(void*, std::size_t) { return 0; }
