// pushwire-rnic: the reference RNIC from the command line (spec/rnic.md §10).
//
//   pushwire-rnic soak --messages N [--seed S] [--loss P] [--dup P] [--reorder P] [--corrupt P]
//                      [--framing roce|cell] [--pcap F] [--json] [--mtu B] [--window N]
//                      [--xdp IF_A@NETNS_A,IF_B@NETNS_B]
//   pushwire-rnic pingpong --local IP --peer IP [--server] [--size N] [--iterations N] [--xdp IF] [--json]
//                      (two processes over UDP: tools/pingpong.hpp)
//
// Two devices on a loopback fabric whose link drops, duplicates, reorders and corrupts frames
// with the given probabilities (fractions, each direction), in virtual time; or, with --xdp, two
// AF_XDP ports on real interfaces (one in each namespace, a veth pair), in real time, the faults
// applied where each port sends (net/fault_queue.hpp). N messages are mixed over four RC
// queue pairs and a DC initiator serving two DC targets: SEND and WRITE, with and without
// immediate, READ, COMPARE_SWAP and FETCH_ADD, and on RC the read served as a write; 0 B to
// 64 KiB. Each is checked where it lands: the bytes, the guard bytes around them, the receive
// completion, an atomic's original value.
// Prints one JSON object (--json) or lines: messages, completed, bytes, lost, duplicated,
// misplaced_bytes, retransmits, page_faults, virtual_time_us, wall_s. Exit status 0 only when
// every message completed and lost = duplicated = misplaced_bytes = 0; 1 otherwise; 2 on bad
// usage; 3 when --xdp's ports cannot be opened (no privilege, no namespace, no libxdp). On a
// terminal, progress goes to stderr. --mtu is the path MTU (RoCE default 4096, at most what the
// AF_XDP ports carry; cells 512, in 256-byte cells) and --window the packets a requester keeps
// unacknowledged (RoCE 16, cells 8): go-back-N over a lossy link resends a window per loss, and
// a cell packet is lost with any of its cells. virtual_time_us is real time over --xdp.
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <pushwire/net/clock.hpp>
#include <pushwire/net/loop.hpp>
#include <pushwire/rnic/connect.hpp>
#include <pushwire/rnic/fabric.hpp>
#include <pushwire/wire/json.hpp>
#ifdef PUSHWIRE_HAVE_XDP
#include <pushwire/net/netns.hpp>
#include <pushwire/net/xdp.hpp>
#endif

#include "pingpong.hpp"

using namespace pushwire;
using namespace pushwire::rnic;

namespace {

int usage() {
  std::cerr << "usage: pushwire-rnic soak --messages N [--seed S] [--loss P] [--dup P] [--reorder P] [--corrupt P]\n"
               "                          [--framing roce|cell] [--pcap FILE] [--json] [--mtu B] [--window N]\n"
               "                          [--xdp IF_A@NETNS_A,IF_B@NETNS_B]\n"
               "       pushwire-rnic pingpong --local IP --peer IP [--server] [--size N] [--iterations N] [--xdp IF] [--json]\n";
  return 2;
}

struct options {
  std::uint64_t messages = 10000, seed = 1;
  double loss = 0, dup = 0, reorder = 0, corrupt = 0;
  rnic::framing framing = rnic::framing::roce;
  std::string pcap;
  bool json = false;
  std::uint32_t mtu = 0, window = 0;  ///< 0: the framing's default
  /// --xdp: device A's and device B's interfaces and their namespaces ("": this one).
  std::array<std::string, 2> xdp_if, xdp_ns;
};

constexpr std::uint32_t max_size = 64 * 1024;
constexpr std::size_t slot_bytes = max_size + 64;  ///< a message's region and its guard
constexpr std::size_t window = 16;                 ///< messages outstanding per queue pair
constexpr std::byte sentinel{0xEE};
/// Bytes after a message that each completion checks are still the sentinel (all of memory is
/// checked once more at the end).
constexpr std::size_t guard = 4096;

std::byte content(std::uint64_t id, std::size_t i) {
  return static_cast<std::byte>((id * 0x9E3779B97F4A7C15ull >> 56) ^ (i * 31) ^ (i >> 8));
}

/// One device with its PD, CQs and one memory region for everything.
struct node {
  std::unique_ptr<device> dev;
  std::uint32_t pd = 0, cq = 0;
  std::unique_ptr<cq_memory> cq_mem;
  std::vector<std::byte> mem;
  memory_region mr{};
  std::vector<std::unique_ptr<sq_memory>> sqs;
  std::vector<std::unique_ptr<rq_memory>> rqs;
  node(std::uint8_t n, framing f, std::size_t bytes, std::uint32_t window, const wire::mac_address& mac, std::size_t tx_queue) {
    device_config c;
    port_config p;
    p.mac = mac;
    p.gid = gid_v4(198, 18, 0, n);
    p.framing = f;
    c.ports = {p};
    c.window = window;
    c.tx_queue = tx_queue;
    c.retry_forever = true;  // the soak asks whether data arrives intact, not whether a QP gives up (spec/rnic.md §10)
    dev = std::make_unique<device>(c);
    pd = *dev->alloc_pd();
    cq_mem = std::make_unique<cq_memory>(1u << 14);
    cq = *dev->create_cq(*cq_mem);
    mem.assign(bytes, sentinel);
    mr = *dev->reg_mr(pd, mem.data(), mem.size(), all_access);
  }
  std::uint32_t qp(qp_type t, std::uint64_t key = 0) {
    sqs.push_back(std::make_unique<sq_memory>(64));
    rqs.push_back(std::make_unique<rq_memory>(64));
    return *dev->create_qp({.type = t, .pd = pd, .send_cq = cq, .recv_cq = cq, .sq = sqs.back().get(), .rq = rqs.back().get(),
                            .dct_access_key = key});
  }
  std::uint64_t addr(std::size_t off) const { return reinterpret_cast<std::uintptr_t>(mem.data() + off); }
};

errc bring_up(device& d, std::uint32_t qpn, qp_type t, std::uint32_t peer, const address_vector& av, std::uint32_t mtu, std::uint8_t timeout) {
  return pushwire::rnic::bring_up(d, qpn, {.type = t, .peer_qpn = peer, .av = av, .mtu = mtu, .timeout = timeout});
}

struct totals {
  std::uint64_t messages = 0, completed = 0, bytes = 0, lost = 0, duplicated = 0, misplaced = 0;
  std::uint64_t retransmits = 0, page_faults = 0, virtual_us = 0;
  double wall = 0;
};

/// A message in flight.
struct flight {
  std::uint64_t id = 0;
  wr_opcode op{};
  std::uint32_t len = 0;
  std::size_t slot = 0;         ///< its region (A's source / sink, B's target) index
  std::uint64_t expect_orig = 0;
  bool send_done = false, recv_needed = false, recv_done = false;
};

unsigned long long ull(std::uint64_t v) { return v; }

/// The medium asked for cannot be had here (exit status 3).
struct unavailable : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Where the two devices' frames travel.
class medium {
 public:
  virtual ~medium() = default;
  /// Device A's and B's port MACs.
  virtual wire::mac_address mac(int side) const { return {2, 0, 0, 0, 0, static_cast<std::uint8_t>(side + 1)}; }
  /// The largest path MTU the medium carries.
  virtual std::uint32_t path_mtu() const { return 4096; }
  /// The QPs' local ACK timeout (4.096 µs × 2^timeout): 6, 262 µs, in virtual time, where a lossy
  /// link recovers quickly and nothing else takes time.
  virtual std::uint8_t timeout() const { return 6; }
  /// Each device's transmit queue (device_config::tx_queue): frames it holds for the medium.
  virtual std::size_t tx_queue() const { return device_config{}.tx_queue; }
  virtual void attach(device& a, device& b, const options& o) = 0;
  /// Time since the start, ns.
  virtual time_ns now() const = 0;
  /// Moves frames and runs the devices' timers, `limit` at the latest; false when nothing was left.
  virtual bool step(time_ns limit) = 0;
  /// Runs for `span` ns more.
  virtual void settle(time_ns span) = 0;
  /// Lines for stderr at the end: what the medium counted.
  virtual void report() const {}
};

/// The loopback fabric, in virtual time: a 2 µs link with the faults in both directions.
class fabric_medium final : public medium {
 public:
  explicit fabric_medium(std::uint64_t seed) : fab_(seed) {}
  void attach(device& a, device& b, const options& o) override {
    link_config l;
    l.latency = 2000;
    l.a_to_b = l.b_to_a = {.loss = o.loss, .duplicate = o.dup, .reorder = o.reorder, .corrupt = o.corrupt};
    (void)fab_.link(a, 0, b, 0, l);
    if (!o.pcap.empty() && fab_.tap(o.pcap) != errc{}) throw std::runtime_error("cannot write " + o.pcap);
  }
  time_ns now() const override { return fab_.now(); }
  bool step(time_ns limit) override { return fab_.step(limit); }
  void settle(time_ns span) override { fab_.run_until(fab_.now() + span); }

 private:
  loopback_fabric fab_;
};

#ifdef PUSHWIRE_HAVE_XDP

/// Two AF_XDP ports (net/xdp.hpp) in real time, each on an interface of its own namespace (opened
/// there by a thread of its own: net/netns.hpp), the faults applied where each port sends. Frames
/// leave with the devices' MACs, which are the interfaces' (no neighbour lookups).
class xdp_medium final : public medium {
 public:
  explicit xdp_medium(const options& o) : t0_(net::monotonic_ns()) {
    const rnic::direction_faults f{.loss = o.loss, .duplicate = o.dup, .reorder = o.reorder, .corrupt = o.corrupt};
    for (int i = 0; i < 2; ++i) {
      // Rings of 8192 and a batch of 1024 (4096 frames a turn): a READ answered again after a
      // loss comes back as a burst of up to 64 KiB in 256-byte cells.
      const net::xdp_config c{.interface = o.xdp_if[i], .frames = 16384, .ring = 8192, .batch = 1024, .resolve = false, .faults = f,
                              .seed = o.seed * 2 + static_cast<std::uint64_t>(i)};
      const auto open = [&] { ports_[i].emplace(c); };
      const std::string where = o.xdp_if[i] + (o.xdp_ns[i].empty() ? "" : " in namespace " + o.xdp_ns[i]);
      if (o.xdp_ns[i].empty()) open();
      else if (const int e = net::in_netns(o.xdp_ns[i], open); e != 0) throw unavailable("namespace " + o.xdp_ns[i] + ": " + std::strerror(e));
      if (!ports_[i]->ok()) throw unavailable("AF_XDP on " + where + " unavailable (" + ports_[i]->why() + ": " + std::strerror(ports_[i]->error()) + ")");
      std::fprintf(stderr, "pushwire-rnic: device %c on AF_XDP on %s (%s XDP, %s mode)\n", 'A' + i, where.c_str(),
                   ports_[i]->native() ? "native" : "generic", ports_[i]->zero_copy() ? "zero-copy" : "copy");
    }
  }
  wire::mac_address mac(int side) const override { return ports_[side]->mac(); }
  std::uint32_t path_mtu() const override { return std::min(ports_[0]->path_mtu(), ports_[1]->path_mtu()); }
  /// 10, 4.2 ms: the soak's one thread checks up to 64 KiB a completion between turns, so 262 µs
  /// would expire on a link that lost nothing; and what waits to be sent must leave within it.
  std::uint8_t timeout() const override { return 10; }
  /// 512 frames (a response queue of 1024): the devices build READ responses whole, and every
  /// duplicate READ is answered again; behind a deeper queue the answers come after the
  /// requester's timeout, which sends the READs again, and the soak stops progressing.
  std::size_t tx_queue() const override { return 512; }
  void attach(device& a, device& b, const options&) override {
    loops_[0].emplace(a);
    loops_[1].emplace(b);
    for (int i = 0; i < 2; ++i) loops_[i]->attach(0, *ports_[i]);
  }
  time_ns now() const override { return net::monotonic_ns() - t0_; }
  /// A turn of each device's loop, busy-polled (the soak's one thread serves both).
  bool step(time_ns) override {
    for (auto& l : loops_) (void)l->turn(now());
    return true;
  }
  void settle(time_ns span) override {
    for (const time_ns until = now() + span; now() < until;) (void)step(until);
  }
  void report() const override {
    for (int i = 0; i < 2; ++i) {
      const net::xdp_counters c = ports_[i]->stats();
      std::fprintf(stderr,
                   "pushwire-rnic: device %c's port: sent %llu received %llu; injected lost %llu corrupted %llu held %llu duplicated %llu; "
                   "kernel dropped %llu, RX ring full %llu, fill ring empty %llu, invalid %llu/%llu\n",
                   'A' + i, ull(c.sent), ull(c.received), ull(c.lost), ull(c.corrupted), ull(c.held), ull(c.duplicated), ull(c.rx_dropped),
                   ull(c.rx_ring_full), ull(c.fill_ring_empty), ull(c.rx_invalid), ull(c.tx_invalid));
    }
  }

 private:
  time_ns t0_;
  std::array<std::optional<net::xdp_port>, 2> ports_;
  std::array<std::optional<net::device_loop>, 2> loops_;
};
#endif

class soak {
 public:
  soak(const options& o, std::unique_ptr<medium> m)
      : o_(o), med_(std::move(m)), a_(1, o.framing, lanes * window * slot_bytes, window_of(o), med_->mac(0), med_->tx_queue()),
        b_(2, o.framing, lanes * window * slot_bytes + 4096, window_of(o), med_->mac(1), med_->tx_queue()), rng_(o.seed * 7919 + 13) {
    med_->attach(*a_.dev, *b_.dev, o);
    const std::uint32_t mtu = std::min(o.mtu ? o.mtu : o.framing == framing::cell ? 512 : 4096, med_->path_mtu());
    const address_vector to_b{.dmac = b_.dev->config().ports[0].mac, .dgid = b_.dev->config().ports[0].gid};
    const address_vector to_a{.dmac = a_.dev->config().ports[0].mac, .dgid = a_.dev->config().ports[0].gid};
    for (std::size_t i = 0; i < rc_lanes; ++i) {
      lane& ln = lanes_[i];
      ln.qa = a_.qp(qp_type::rc);
      ln.qb = b_.qp(qp_type::rc);
      (void)bring_up(*a_.dev, ln.qa, qp_type::rc, ln.qb, to_b, mtu, med_->timeout());
      (void)bring_up(*b_.dev, ln.qb, qp_type::rc, ln.qa, to_a, mtu, med_->timeout());
    }
    {
      const std::uint32_t dci = a_.qp(qp_type::dci);
      (void)bring_up(*a_.dev, dci, qp_type::dci, 0, {}, mtu, med_->timeout());
      ah_ = *a_.dev->create_ah(a_.pd, to_b);
      for (std::size_t i = rc_lanes; i < lanes; ++i) {
        lane& ln = lanes_[i];
        ln.qa = dci;
        ln.dc_key = 0xD0D0 + i;
        ln.qb = b_.qp(qp_type::dct, ln.dc_key);
        (void)bring_up(*b_.dev, ln.qb, qp_type::dct, 0, {}, mtu, med_->timeout());
      }
    }
    for (std::size_t i = 0; i < lanes; ++i) {
      for (std::size_t s = 0; s < window; ++s) lanes_[i].free.push_back(i * window + s);
      std::fill_n(b_.mem.begin() + static_cast<std::ptrdiff_t>(counter(i)), 8, std::byte{0});  // the lane's atomic counter
    }
  }

  static std::uint32_t window_of(const options& o) { return o.window ? o.window : o.framing == framing::cell ? 8 : 16; }

  totals run() {
    const auto wall0 = std::chrono::steady_clock::now();
    const bool tty = isatty(STDERR_FILENO) != 0;
    auto last_print = wall0;
    totals t;
    t.messages = o_.messages;
    std::uint64_t idle_steps = 0;
    const time_ns stall = 2'000'000'000;  // 2 s without a completion: give up
    time_ns last_progress = med_->now();
    while (done_ < o_.messages) {
      post_more();
      const std::uint64_t before = done_;
      if (!med_->step(med_->now() + stall)) ++idle_steps;
      poll();
      if (done_ != before) last_progress = med_->now();
      if (med_->now() - last_progress > stall || idle_steps > 1000) {
        stalled(idle_steps > 1000);
        break;
      }
      if (tty) {
        const auto now = std::chrono::steady_clock::now();
        if (now - last_print > std::chrono::milliseconds(500)) {
          last_print = now;
          std::fprintf(stderr, "\r%llu / %llu messages, %.1f MB, virtual %.3f s   ", static_cast<unsigned long long>(done_),
                       static_cast<unsigned long long>(o_.messages), static_cast<double>(bytes_) / 1e6,
                       static_cast<double>(med_->now()) / 1e9);
        }
      }
    }
    med_->settle(10'000'000);  // let duplicates arrive after the last completion
    poll();
    if (tty) std::fprintf(stderr, "\r%80s\r", "");
    for (const auto& line : failures_) std::fprintf(stderr, "pushwire-rnic: %s\n", line.c_str());
    med_->report();
    t.completed = completed_;
    t.bytes = bytes_;
    t.lost = o_.messages - completed_;
    t.duplicated = duplicated_;
    t.misplaced = misplaced_ + scan_guards();
    t.retransmits = a_.dev->counters().retransmits + b_.dev->counters().retransmits;
    t.page_faults = a_.dev->counters().page_faults + b_.dev->counters().page_faults;
    t.virtual_us = med_->now() / 1000;
    t.wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
    return t;
  }

 private:
  static constexpr std::size_t rc_lanes = 4, lanes = 6;
  struct lane {
    std::uint32_t qa = 0, qb = 0;
    std::uint64_t dc_key = 0;
    std::deque<std::size_t> free;
    std::map<std::uint64_t, flight> live;  ///< by id
    std::uint64_t atomic_value = 0;        ///< the lane's counter word at B, as it must be
  };
  bool dc(std::size_t l) const { return l >= rc_lanes; }
  std::size_t region(std::size_t slot) const { return slot * slot_bytes; }
  std::size_t counter(std::size_t l) const { return lanes * window * slot_bytes + 8 * l; }

  std::uint32_t pick_size() {
    const auto e = static_cast<unsigned>(rng_() % 18);  // 0, then 1 .. 2^16 log-uniform
    if (e == 0) return 0;
    const std::uint32_t lo = 1u << (e - 1), hi = std::min<std::uint32_t>(1u << e, max_size);
    return lo + static_cast<std::uint32_t>(rng_() % (hi - lo + 1));
  }
  /// The mix: SEND and WRITE with and without immediate, READ, the two atomics, and on RC
  /// lanes the read served as a write.
  wr_opcode pick_op(std::size_t lane) {
    static constexpr wr_opcode all[] = {wr_opcode::send, wr_opcode::send_with_imm, wr_opcode::rdma_write,
                                        wr_opcode::rdma_write_with_imm, wr_opcode::rdma_read, wr_opcode::atomic_cmp_and_swp,
                                        wr_opcode::atomic_fetch_and_add, wr_opcode::read_as_write};
    return all[rng_() % (dc(lane) ? 7 : 8)];
  }
  static bool reads(wr_opcode op) { return op == wr_opcode::rdma_read || op == wr_opcode::read_as_write; }

  void post_more() {
    for (std::size_t l = 0; l < lanes && posted_ < o_.messages; ++l) {
      lane& ln = lanes_[l];
      while (!ln.free.empty() && posted_ < o_.messages) {
        flight f{.id = ++posted_, .op = pick_op(l), .slot = ln.free.front()};
        ln.free.pop_front();
        const bool atomic = f.op == wr_opcode::atomic_cmp_and_swp || f.op == wr_opcode::atomic_fetch_and_add;
        f.len = atomic ? 8 : pick_size();
        const std::size_t at = region(f.slot);
        // A's region holds the message (or receives the READ); B's region is back to the
        // sentinel (as far as the last message there reached), or holds what a READ fetches.
        reset(b_, f.slot, b_dirty_);
        if (reads(f.op)) reset(a_, f.slot, a_dirty_);
        for (std::size_t i = 0; i < f.len; ++i) {
          if (reads(f.op)) b_.mem[at + i] = content(f.id, i);
          else a_.mem[at + i] = content(f.id, i);
        }
        // What each side's region may hold now: the message's bytes at B (its target or a READ's
        // source), and at A a READ's sink or the bytes sent (sources are never reset: a READ
        // resets as far as they reached).
        b_dirty_[f.slot] = f.len;
        a_dirty_[f.slot] = reads(f.op) ? f.len : std::max(a_dirty_[f.slot], f.len);
        const sge s{a_.addr(at), f.len, a_.mr.lkey};
        send_wr wr{.wr_id = (f.id << 3) | l, .opcode = f.op, .sg_list = std::span(&s, 1), .imm = static_cast<std::uint32_t>(f.id)};
        wr.remote_addr = b_.addr(at);
        wr.rkey = b_.mr.rkey;
        if (atomic) {
          wr.remote_addr = b_.addr(counter(l));
          f.expect_orig = ln.atomic_value++;
          wr.compare_add = f.op == wr_opcode::atomic_cmp_and_swp ? f.expect_orig : 1;
          wr.swap = f.expect_orig + 1;
        }
        if (dc(l)) {
          wr.ah = ah_;
          wr.remote_qpn = ln.qb;
          wr.dc_key = ln.dc_key;
        }
        f.recv_needed = f.op == wr_opcode::send || f.op == wr_opcode::send_with_imm || f.op == wr_opcode::rdma_write_with_imm;
        if (f.recv_needed) {
          const sge r{b_.addr(at), f.op == wr_opcode::rdma_write_with_imm ? 0 : max_size, b_.mr.lkey};
          (void)b_.dev->post_recv(ln.qb, {.wr_id = wr.wr_id, .sg_list = std::span(&r, 1)});
        }
        if (a_.dev->post_send(ln.qa, wr) != errc{}) {
          ln.free.push_front(f.slot);
          --posted_;
          break;
        }
        ln.live.emplace(f.id, f);
      }
    }
  }

  void poll() {
    work_completion wc[256];
    for (;;) {
      const std::size_t n = a_.cq_mem->poll(wc);
      for (std::size_t i = 0; i < n; ++i) on_send(wc[i]);
      const std::size_t m = b_.cq_mem->poll(wc);
      for (std::size_t i = 0; i < m; ++i) on_recv(wc[i]);
      if (n == 0 && m == 0) return;
    }
  }
  flight* find(std::uint64_t wr_id, lane*& ln) {
    ln = &lanes_[wr_id & 7];
    const auto it = ln->live.find(wr_id >> 3);
    return it == ln->live.end() ? nullptr : &it->second;
  }
  void on_send(const work_completion& c) {
    lane* ln = nullptr;
    flight* f = find(c.wr_id, ln);
    if (!f || f->send_done) {
      ++duplicated_;
      return;
    }
    f->send_done = true;
    if (c.status != wc_status::success) {
      if (failures_.empty() || failures_.size() < 5)
        failures_.push_back("message " + std::to_string(f->id) + " (" + std::string{wire::enum_name(f->op)} + ", lane " +
                            std::to_string(c.wr_id & 7) + ") completed " + std::string{wire::enum_name(c.status)});
      finish(*ln, *f, false);
      return;
    }
    const std::size_t at = region(f->slot);
    if (reads(f->op)) {
      for (std::size_t i = 0; i < f->len; ++i) misplaced_ += a_.mem[at + i] != content(f->id, i);
      misplaced_ += guard_bytes(a_, f->slot, f->len);
    } else if (f->op == wr_opcode::atomic_cmp_and_swp || f->op == wr_opcode::atomic_fetch_and_add) {
      std::uint64_t orig = 0;
      std::memcpy(&orig, a_.mem.data() + at, 8);
      misplaced_ += orig != f->expect_orig ? 8 : 0;
    }
    maybe_finish(*ln, *f);
  }
  void on_recv(const work_completion& c) {
    lane* ln = nullptr;
    flight* f = find(c.wr_id, ln);
    if (!f || f->recv_done || !f->recv_needed) {
      ++duplicated_;
      return;
    }
    f->recv_done = true;
    if (c.status != wc_status::success || c.byte_len != f->len || (c.with_imm && c.imm != static_cast<std::uint32_t>(f->id))) {
      ++misplaced_;
    }
    maybe_finish(*ln, *f);
  }
  void maybe_finish(lane& ln, flight& f) {
    if (!f.send_done || (f.recv_needed && !f.recv_done)) return;
    // What landed at B: the message, then untouched sentinel bytes.
    const std::size_t at = region(f.slot);
    if (!reads(f.op) && f.op != wr_opcode::atomic_cmp_and_swp && f.op != wr_opcode::atomic_fetch_and_add) {
      for (std::size_t i = 0; i < f.len; ++i) misplaced_ += b_.mem[at + i] != content(f.id, i);
      misplaced_ += guard_bytes(b_, f.slot, f.len);
    }
    finish(ln, f, true);
  }
  void finish(lane& ln, flight& f, bool ok) {
    if (ok) {
      ++completed_;
      bytes_ += f.len;
    }
    ++done_;
    ln.free.push_back(f.slot);
    ln.live.erase(f.id);
  }
  /// On stderr: the run stopped with messages in flight (`idle`: the medium had nothing left to
  /// do); each device's counters that are not zero, each lane's oldest message and its QPs' states. (The medium's own
  /// counters follow at the end.)
  void stalled(bool idle) const {
    for (const node* n : {&a_, &b_}) {
      std::string line;
      rnic::for_each_counter(n->dev->counters(), [&](std::string_view k, std::uint64_t v) {
        if (v) line.append(" ").append(k).append("=").append(std::to_string(v));
      });
      std::fprintf(stderr, "pushwire-rnic: device %c counters:%s\n", n == &a_ ? 'A' : 'B', line.empty() ? " all zero" : line.c_str());
    }
    std::fprintf(stderr, "pushwire-rnic: %s at %.3f s; %llu of %llu messages done\n", idle ? "nothing left to do" : "no completion for 2 s",
                 static_cast<double>(med_->now()) / 1e9, static_cast<unsigned long long>(done_), static_cast<unsigned long long>(o_.messages));
    for (std::size_t l = 0; l < lanes; ++l) {
      const lane& ln = lanes_[l];
      if (ln.live.empty()) continue;
      const flight& f = ln.live.begin()->second;
      const auto va = a_.dev->view(ln.qa), vb = b_.dev->view(ln.qb);
      if (!va || !vb) continue;
      std::fprintf(stderr,
                   "pushwire-rnic:   lane %zu: %zu in flight, oldest message %llu (%s, %u B, sent %d, received %d); "
                   "A QP 0x%x %s, requester %s una %u next %u queued %zu, retransmits %llu timeouts %llu; B QP 0x%x %s expects %u\n",
                   l, ln.live.size(), static_cast<unsigned long long>(f.id), std::string{wire::enum_name(f.op)}.c_str(), f.len, f.send_done,
                   f.recv_done, ln.qa, std::string{wire::enum_name(va->state)}.c_str(), std::string{wire::enum_name(va->sender_state)}.c_str(),
                   va->una, va->next_psn, va->queued, static_cast<unsigned long long>(va->retransmits),
                   static_cast<unsigned long long>(va->timeouts), ln.qb, std::string{wire::enum_name(vb->state)}.c_str(), vb->expected_psn);
    }
  }
  /// Restores slot's region of n to the sentinel as far as its last message reached.
  void reset(node& n, std::size_t slot, std::vector<std::uint32_t>& dirty) {
    const std::size_t at = region(slot);
    std::fill_n(n.mem.begin() + static_cast<std::ptrdiff_t>(at), std::min<std::size_t>(dirty[slot] + guard, slot_bytes), sentinel);
    dirty[slot] = 0;
  }
  /// Bytes after a message's len in its region that are not the sentinel (up to the guard).
  std::uint64_t guard_bytes(const node& n, std::size_t slot, std::size_t len) const {
    const std::size_t at = region(slot), end = std::min(len + guard, slot_bytes);
    std::uint64_t bad = 0;
    for (std::size_t i = len; i < end; ++i) bad += n.mem[at + i] != sentinel;
    return bad;
  }
  /// At the end: every byte of both memories that is neither a last message's nor the sentinel
  /// (the regions past each last message, the counters' neighbours).
  std::uint64_t scan_guards() const {
    std::uint64_t bad = 0;
    for (std::size_t s = 0; s < lanes * window; ++s) {
      const std::size_t at = region(s);
      for (std::size_t i = at + b_dirty_[s]; i < at + slot_bytes; ++i) bad += b_.mem[i] != sentinel;
    }
    for (std::size_t i = counter(lanes); i < b_.mem.size(); ++i) bad += b_.mem[i] != sentinel;
    return bad;
  }

  options o_;
  std::unique_ptr<medium> med_;
  node a_, b_;
  std::mt19937_64 rng_;
  std::array<lane, lanes> lanes_{};
  std::uint32_t ah_ = 0;
  std::vector<std::uint32_t> a_dirty_ = std::vector<std::uint32_t>(lanes * window), b_dirty_ = std::vector<std::uint32_t>(lanes * window);
  std::vector<std::string> failures_;  ///< the first few error completions, for stderr
  std::uint64_t posted_ = 0, done_ = 0, completed_ = 0, bytes_ = 0, duplicated_ = 0, misplaced_ = 0;
};

std::optional<double> fraction(std::string_view s) {
  try {
    std::size_t n = 0;
    const double v = std::stod(std::string{s}, &n);
    if (n != s.size() || v < 0 || v > 1) return std::nullopt;
    return v;
  } catch (...) {
    return std::nullopt;
  }
}
std::optional<std::uint64_t> count(std::string_view s) {
  if (s.empty() || s.size() > 19) return std::nullopt;
  std::uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::string_view{argv[1]} == "pingpong") return pushwire::tools::pingpong_main(argc, argv);
  if (argc < 2 || std::string_view{argv[1]} != "soak") return usage();
  options o;
  for (int i = 2; i < argc; ++i) {
    const std::string_view a = argv[i];
    auto value = [&]() -> std::optional<std::string_view> {
      if (i + 1 >= argc) return std::nullopt;
      return std::string_view{argv[++i]};
    };
    if (a == "--json") {
      o.json = true;
    } else if (a == "--messages" || a == "--seed") {
      const auto v = value();
      const auto n = v ? count(*v) : std::nullopt;
      if (!n) return usage();
      (a == "--messages" ? o.messages : o.seed) = *n;
    } else if (a == "--mtu") {
      const auto v = value();
      const auto n = v ? count(*v) : std::nullopt;
      if (!n || (*n != 256 && *n != 512 && *n != 1024 && *n != 2048 && *n != 4096)) {
        std::cerr << "pushwire-rnic: --mtu takes 256, 512, 1024, 2048 or 4096\n";
        return 2;
      }
      o.mtu = static_cast<std::uint32_t>(*n);
    } else if (a == "--window") {
      const auto v = value();
      const auto n = v ? count(*v) : std::nullopt;
      if (!n || *n == 0 || *n > 128) {
        std::cerr << "pushwire-rnic: --window takes 1 to 128\n";
        return 2;
      }
      o.window = static_cast<std::uint32_t>(*n);
    } else if (a == "--loss" || a == "--dup" || a == "--reorder" || a == "--corrupt") {
      const auto v = value();
      const auto p = v ? fraction(*v) : std::nullopt;
      if (!p) {
        std::cerr << "pushwire-rnic: " << a << " takes a fraction from 0 to 1 (0.05 = 5%)\n";
        return 2;
      }
      (a == "--loss" ? o.loss : a == "--dup" ? o.dup : a == "--reorder" ? o.reorder : o.corrupt) = *p;
    } else if (a == "--framing") {
      const auto v = value();
      if (v == "roce") o.framing = framing::roce;
      else if (v == "cell") o.framing = framing::cell;
      else return usage();
    } else if (a == "--xdp") {
      // IF_A@NETNS_A,IF_B@NETNS_B (either @NETNS may be left out: this namespace)
      const auto v = value();
      const std::string_view list = v ? *v : std::string_view{};
      const auto comma = list.find(',');
      if (comma == std::string_view::npos) return usage();
      const std::string_view ends[2] = {list.substr(0, comma), list.substr(comma + 1)};
      if (ends[1].find(',') != std::string_view::npos) return usage();
      for (int k = 0; k < 2; ++k) {
        const auto at = ends[k].find('@');
        o.xdp_if[k] = std::string{ends[k].substr(0, at)};
        if (at != std::string_view::npos) o.xdp_ns[k] = std::string{ends[k].substr(at + 1)};
        if (o.xdp_if[k].empty() || (at != std::string_view::npos && o.xdp_ns[k].empty())) return usage();
      }
    } else if (a == "--pcap") {
      const auto v = value();
      if (!v) return usage();
      o.pcap = std::string{*v};
    } else {
      return usage();
    }
  }
  if (!o.pcap.empty() && !o.xdp_if[0].empty()) {
    std::cerr << "pushwire-rnic: --pcap records the loopback fabric; over --xdp, capture the interfaces\n";
    return 2;
  }
  totals t;
  try {
    std::unique_ptr<medium> m;
    if (o.xdp_if[0].empty()) {
      m = std::make_unique<fabric_medium>(o.seed);
    } else {
#ifdef PUSHWIRE_HAVE_XDP
      m = std::make_unique<xdp_medium>(o);
#else
      throw unavailable("AF_XDP on " + o.xdp_if[0] + (o.xdp_ns[0].empty() ? "" : "@" + o.xdp_ns[0]) + " and " + o.xdp_if[1] +
                        (o.xdp_ns[1].empty() ? "" : "@" + o.xdp_ns[1]) + " unavailable (built without libxdp)");
#endif
    }
    soak s(o, std::move(m));
    t = s.run();
  } catch (const unavailable& e) {
    std::cerr << "pushwire-rnic: " << e.what() << "\n";
    return 3;
  } catch (const std::exception& e) {
    std::cerr << "pushwire-rnic: " << e.what() << "\n";
    return 2;
  }
  const bool ok = t.completed == t.messages && t.lost == 0 && t.duplicated == 0 && t.misplaced == 0;
  if (o.json) {
    std::string out;
    wire::json_writer w{out};
    w.begin_object();
    w.key("messages"), w.uint(t.messages);
    w.key("completed"), w.uint(t.completed);
    w.key("bytes"), w.uint(t.bytes);
    w.key("lost"), w.uint(t.lost);
    w.key("duplicated"), w.uint(t.duplicated);
    w.key("misplaced_bytes"), w.uint(t.misplaced);
    w.key("retransmits"), w.uint(t.retransmits);
    w.key("page_faults"), w.uint(t.page_faults);
    w.key("virtual_time_us"), w.uint(t.virtual_us);
    w.key("wall_s"), w.number(t.wall, 3);
    w.end_object();
    std::cout << out << "\n";
  } else {
    std::cout << "messages " << t.messages << "\ncompleted " << t.completed << "\nbytes " << t.bytes << "\nlost " << t.lost
              << "\nduplicated " << t.duplicated << "\nmisplaced_bytes " << t.misplaced << "\nretransmits " << t.retransmits
              << "\npage_faults " << t.page_faults << "\nvirtual_time_us " << t.virtual_us << "\nwall_s " << t.wall << "\n";
  }
  return ok ? 0 : 1;
}
