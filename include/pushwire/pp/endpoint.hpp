// The push-push messaging layer (split-model driver, IV): one end of a host <-> I/O unit
// connection over an rnic::device. Two RC queue pairs, as the split-model document's Fig. 7:
// - channel 0, control: Send/Receive of buffer-management and CfgUtil messages;
// - channel 1, data: RDMA writes into the pools the peer advertised, the transfer indication in
//   the immediate data; small packets as SendData on the same QP, so that they keep their order.
// Each end is both a pool owner (the peer writes into its pools: flow::pool_owner) and a pool
// user (it writes into the peer's: flow::pool_user); those machines are the only credit scheme.
// Sans-IO: the device is driven by its caller (the loopback fabric, or net/); poll() takes the
// completions and runs the machines. Decisions and thresholds: spec/pp.md.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include <pushwire/flow/pool.hpp>
#include <pushwire/msg/message.hpp>
#include <pushwire/rnic/connect.hpp>

namespace pushwire::pp {

/// Why a call was refused. 0 is never an error.
enum class errc : std::uint8_t {
  not_connected = 1,
  would_block,
  too_large,
  invalid_argument,
  device_error,
};
inline constexpr std::array<wire::errc_info, 5> errc_table{{
    {"not_connected", "The endpoint is not connected (before connect(), after close() or a failure)."},
    {"would_block", "No credit now: no free element of the peer's pools fits, or every send slot is in flight. Nothing was sent; poll() and try again."},
    {"too_large", "Larger than the largest element the peer advertised (or than a message can carry)."},
    {"invalid_argument", "A value outside its documented range (an empty packet, a configuration limit)."},
    {"device_error", "The RNIC refused a registration or a post (its rnic::errc is in last_device_error())."},
}};
constexpr std::span<const wire::named_value> wire_enum_names(errc) { return wire::detail::error_names<errc_table>; }
constexpr std::string_view name(errc e) { return wire::error_name(e); }

/// The life of an endpoint.
enum class state : std::uint8_t {
  idle,       ///< made; connect() not called
  connected,  ///< pools advertised; packets flow both ways
  closing,    ///< close(): flushing both ways
  closed,     ///< every pool flushed both ways (or the peer closed); nothing more is sent
  failed,     ///< a completion reported an error: a queue pair went to the error state
};
inline constexpr std::array<wire::named_value, 5> state_names{{
    {state::idle, "idle"}, {state::connected, "connected"}, {state::closing, "closing"},
    {state::closed, "closed"}, {state::failed, "failed"},
}};
constexpr std::span<const wire::named_value> wire_enum_names(state) { return state_names; }

/// Pools per side and elements per pool the machines hold (idata names elements 0..255).
inline constexpr std::size_t max_pools = 8;
inline constexpr std::size_t max_elements = 256;
/// Largest control message (msg::codec_options' default max_frame): one receive buffer.
inline constexpr std::uint32_t max_message = 4096;

struct config {
  /// Receive pools advertised at connect(): `pools` pools of `elements` elements of
  /// `element_size` bytes. 1..max_pools, 1..max_elements, 1..65536 (an element holds one packet).
  std::uint32_t pools = 1, elements = 64, element_size = 2048;
  /// Pools this side may grant on a BufferRecvPoolGet, beyond the first ones (their memory is
  /// allocated and registered then); 0 declines every Get.
  std::uint32_t grantable_pools = 0;
  /// The first pool_ref this side advertises. The two ends use disjoint references (spec/pp.md
  /// §3) so that a BufferPoolFlushRequest is never ambiguous: host 0x01.., I/O unit 0x81...
  std::uint32_t first_pool_ref = 1;
  /// Packets of at most this many bytes go as SendData on the data channel (no element used).
  /// 0..max_message - 16.
  std::uint32_t send_max = 256;
  /// Packets in flight from this side (writes and SendData posted, not completed): 1..1024.
  std::uint32_t send_slots = 64;
  /// Control messages in flight from this side; more wait in order (up to backlog). 1..1024.
  std::uint32_t control_slots = 32;
  std::uint32_t backlog = 1024;
  /// Path MTU of both queue pairs, bytes (256..4096).
  std::uint32_t mtu = 4096;
  /// Both channels' transport: rnic::qp_type::rc (acknowledged, the default) or ::uc, the
  /// document's "unacknowledged connected channels" (Fig. 6): nothing is acknowledged or sent
  /// again, so a lost packet loses its message (spec/pp.md §1). Both ends must agree.
  rnic::qp_type transport = rnic::qp_type::rc;
  /// Pool user: below this many free elements of a size it asks for more (BufferRecvPoolGet
  /// for get_count elements, 1..max_elements: what an owner grants at most); 0 never asks.
  std::uint32_t low_water = 0, get_count = 64;
  /// Pool owner: the pools advertised at connect() are registered implicitly (on demand: no
  /// page resident until written; BufferRecvPool's `implicit`), as are pools granted to a Get
  /// that asks for it. The first write into a cold element pauses the writer on a page-fault
  /// ACK (spec/push-push.md §5.1). Needs rc transport: with uc every pool is registered
  /// explicitly and setup() refuses implicit_pools.
  bool implicit_pools = false;
  /// Pool user: BufferRecvPoolGet asks for implicit registration.
  bool get_implicit = false;
};

/// What the peer needs to connect to this end.
struct address {
  std::uint32_t control_qpn = 0, data_qpn = 0;
  rnic::address_vector av{};
  /// The largest packet this end takes as SendData (its data receive buffers hold that much):
  /// the peer sends SendData only up to the smaller of this and its own send_max.
  std::uint32_t send_max = 0;
};

/// Counters since construction.
struct counters {
  std::uint64_t packets_out = 0, bytes_out = 0, packets_in = 0, bytes_in = 0;
  std::uint64_t as_send = 0, as_write_imm = 0, as_write_indicate = 0;  ///< packets out by carrier
  std::uint64_t would_block = 0;     ///< send_packet refused for want of credit
  std::uint64_t messages_out = 0, messages_in = 0;  ///< control and data-channel messages
  std::uint64_t bad_messages = 0;    ///< received messages that did not decode (dropped)
  std::uint64_t pool_faults = 0;     ///< pool machine faults (the peer broke the protocol)
  std::uint64_t gets_declined = 0;
  std::uint64_t gets_sent = 0;       ///< BufferRecvPoolGet sent (this side's free elements fell below low_water)
  std::uint64_t pools_granted = 0;   ///< pools this side made for the peer's BufferRecvPoolGet
  std::uint64_t updates_coalesced = 0;  ///< update entries merged into another's range
};

/// A CfgUtil request as the I/O unit's handler sees it, and its answer.
struct cfg_answer {
  msg::cfg::status status = msg::cfg::status::unsupported_request;
  std::vector<std::byte> data{};
};

/// The upper layer's callbacks. Each is called from poll() only; none may call poll() again.
struct handlers {
  /// A received packet (valid during the call).
  std::function<void(std::span<const std::byte>)> packet{};
  /// A CfgUtilRequest; the answer is sent as its CfgUtilReply (none set: unsupported_request).
  std::function<cfg_answer(msg::cfg::request_code, std::span<const std::byte>)> cfg_request{};
  /// A CfgUtilReply: the request's transaction, its code, status and data.
  std::function<void(std::uint64_t, msg::cfg::request_code, msg::cfg::status, std::span<const std::byte>)> cfg_reply{};
  /// The endpoint's state changed.
  std::function<void(state)> state_changed{};
};

class endpoint {
 public:
  /// An endpoint on `dev`'s `port` (the device must outlive it). Creates its PD, CQs, QPs and
  /// memory; check ok() (a device at its limits refuses).
  endpoint(rnic::device& dev, const config& cfg, handlers h = {}, std::size_t port = 0)
      : dev_(dev), cfg_(cfg), h_(std::move(h)), port_(port),
        owner_(flow::pool_allocator{this, &endpoint::grant}, owner_txn),
        user_(flow::pool_user_config{.low_water = cfg.low_water, .get_count = cfg.get_count, .implicit = cfg.get_implicit}, user_txn) {
    setup_ = setup();
  }
  endpoint(const endpoint&) = delete;
  endpoint& operator=(const endpoint&) = delete;
  ~endpoint() {
    for (auto& p : pools_)
      if (p.mr.lkey) (void)dev_.dereg_mr(p.mr.lkey);
    if (arena_mr_.lkey) (void)dev_.dereg_mr(arena_mr_.lkey);
    for (std::uint32_t q : {ctrl_qp_, data_qp_})
      if (q) (void)dev_.destroy_qp(q);
    for (std::uint32_t c : {send_cq_, recv_cq_})
      if (c) (void)dev_.destroy_cq(c);
    if (pd_) (void)dev_.dealloc_pd(*pd_);
  }

  /// Whether construction succeeded (else setup_error() says why).
  bool ok() const { return setup_ == errc{}; }
  errc setup_error() const { return setup_; }
  rnic::errc last_device_error() const { return dev_error_; }
  state current() const { return state_; }
  const counters& stats() const { return stats_; }
  const config& configuration() const { return cfg_; }
  address local() const { return {ctrl_qp_, data_qp_, rnic::address_of(dev_, port_), cfg_.send_max}; }

  /// Connects both queue pairs to the peer's and advertises this side's pools.
  errc connect(const address& peer) {
    if (!ok()) return setup_;
    if (state_ != state::idle) return errc::invalid_argument;
    send_max_ = std::min(cfg_.send_max, peer.send_max);
    for (auto [q, p] : {std::pair{ctrl_qp_, peer.control_qpn}, std::pair{data_qp_, peer.data_qpn}})
      if (rnic::errc e = rnic::bring_up(dev_, q, {.type = cfg_.transport, .peer_qpn = p, .av = peer.av, .mtu = cfg_.mtu}); e != rnic::errc{})
        return device(e);
    for (std::uint32_t i = 0; i < cfg_.control_slots * 2; ++i)
      if (errc e = post_control_recv(i); e != errc{}) return e;
    for (std::uint32_t i = 0; i < data_recvs(); ++i)
      if (errc e = post_data_recv(i); e != errc{}) return e;
    enter(state::connected);
    for (std::uint32_t i = 0; i < cfg_.pools; ++i) {
      pool& p = pools_[i];
      actions a;
      (void)owner_.advertise(p.desc, a.out);
      run(a.out);
    }
    return {};
  }

  /// Sends one packet to the peer: SendData when it is at most send_max bytes, else an RDMA
  /// write into a free element of the peer's smallest fitting pool, indicated by idata (or by
  /// BufferRDMAIndicate once the write completes). Errors: not_connected, invalid_argument
  /// (empty), too_large, would_block (no element or send slot free now: nothing was sent).
  errc send_packet(std::span<const std::byte> packet) {
    if (state_ != state::connected) return errc::not_connected;
    if (packet.empty()) return errc::invalid_argument;
    const auto slot = free_send_slot();
    if (!slot) return block();
    if (packet.size() <= send_max_) {
      const msg::send_data m{.header = {.transaction_context = next_txn()}, .data = packet};
      const auto buf = send_buf(*slot);
      const auto n = msg::encode(m, buf);
      if (!n) return errc::too_large;
      if (errc e = post(data_qp_, wr_kind::data_send, *slot, rnic::wr_opcode::send, buf.first(*n)); e != errc{}) return e;
      sends_[*slot] = {true, 0, 0};
      ++stats_.as_send;
    } else {
      if (packet.size() > max_element_bytes_) return errc::too_large;
      actions a;
      const flow::step_result r = user_.transfer(static_cast<std::uint32_t>(packet.size()), a.out);
      if (!r.ok()) {
        run(a.out);  // a BufferRecvPoolGet may have been asked for
        return r.error == flow::errc::too_large ? errc::too_large : block();
      }
      // The transfer's write goes from this slot; the rest (a Get) is sent as usual.
      for (const auto& act : a.out) {
        if (const auto* w = std::get_if<flow::pool_action::rdma_write>(&act)) {
          const auto buf = send_buf(*slot).first(packet.size());
          std::memcpy(buf.data(), packet.data(), packet.size());
          const rnic::sge s{addr(buf.data()), w->bytes, arena_mr_.lkey};
          const rnic::send_wr wr{.wr_id = wr_id(wr_kind::data_write, *slot),
                                 .opcode = w->with_imm ? rnic::wr_opcode::rdma_write_with_imm : rnic::wr_opcode::rdma_write,
                                 .sg_list = {&s, 1}, .imm = w->imm, .remote_addr = w->address, .rkey = w->rkey};
          if (rnic::errc e = dev_.post_send(data_qp_, wr); e != rnic::errc{}) {
            enter(state::failed);  // the pool user's books hold a write that never went
            return device(e);
          }
          sends_[*slot] = {true, w->pool_ref, w->element};
          ++(w->with_imm ? stats_.as_write_imm : stats_.as_write_indicate);
        }
      }
      run(a.out, /*skip_writes=*/true);
    }
    ++stats_.packets_out;
    stats_.bytes_out += packet.size();
    return {};
  }

  /// Whether send_packet(n bytes) would find credit now.
  bool writable(std::size_t n) const {
    if (state_ != state::connected || !free_send_slot()) return false;
    return n <= send_max_ || user_.free_elements(static_cast<std::uint32_t>(n)) > 0;
  }

  /// Sends a CfgUtilRequest (code, data up to max_message - 20 bytes); its transaction
  /// context, which the reply echoes (handlers::cfg_reply), is written to *txn.
  errc cfg_request(msg::cfg::request_code code, std::span<const std::byte> data = {}, std::uint64_t* txn = nullptr) {
    if (state_ != state::connected) return errc::not_connected;
    const std::uint64_t t = next_txn();
    const msg::cfg_util_request m{.header = {.transaction_context = t}, .request_code = code, .data = data};
    if (errc e = send_message(m); e != errc{}) return e;
    if (txn) *txn = t;
    return {};
  }

  /// Starts the teardown: a BufferPoolFlushRequest for each of this side's pools, and for each
  /// of the peer's once this side's writes into it have completed. closed when all are flushed.
  errc close() {
    if (state_ != state::connected) return errc::not_connected;
    enter(state::closing);
    actions a;
    for (std::uint32_t ref : own_refs()) (void)owner_.flush(ref, a.out), run(a.out), a.out.clear();
    for (std::uint32_t ref : peer_refs()) (void)user_.flush(ref, a.out), run(a.out), a.out.clear();
    check_closed();
    return {};
  }

  /// Takes every completion and runs the machines: packets are delivered, credits returned,
  /// control messages answered. Returns the completions taken.
  std::size_t poll() {
    std::size_t n = 0;
    std::array<rnic::work_completion, 32> wc;
    for (;;) {
      const std::size_t k = recv_cq_mem_.poll(wc);
      for (std::size_t i = 0; i < k; ++i) on_recv(wc[i]);
      const std::size_t j = send_cq_mem_.poll(wc);
      for (std::size_t i = 0; i < j; ++i) on_send(wc[i]);
      n += k + j;
      if (k + j == 0) break;
    }
    flush_updates();
    pump_backlog();
    return n;
  }

  /// The pool machines (read-only: counters, books).
  const auto& owner() const { return owner_; }
  const auto& user() const { return user_; }

 private:
  using owner_t = flow::pool_owner<max_pools, max_elements>;
  using user_t = flow::pool_user<max_pools, max_elements>;
  struct actions {
    std::array<flow::pool_action_t, max_elements + 16> storage{};
    flow::pool_sink out{std::span<flow::pool_action_t>(storage)};
  };
  struct pool {
    std::vector<std::byte> mem;
    rnic::memory_region mr{};
    msg::pool_descriptor desc{};
  };
  struct send_slot {
    bool busy = false;
    std::uint32_t pool_ref = 0, element = 0;  ///< a write's
  };
  enum class wr_kind : std::uint8_t { control_send, control_recv, data_send, data_write, data_recv };
  static std::uint64_t wr_id(wr_kind k, std::uint32_t i) { return std::uint64_t{static_cast<std::uint8_t>(k)} << 32 | i; }
  static wr_kind kind_of(std::uint64_t id) { return static_cast<wr_kind>(id >> 32); }
  static std::uint32_t index_of(std::uint64_t id) { return static_cast<std::uint32_t>(id); }
  // Transaction contexts: the owner's, the user's and the endpoint's own (SendData, CfgUtil)
  // never meet, so a FlushReply answers one machine only.
  static constexpr std::uint64_t owner_txn = std::uint64_t{1} << 40, user_txn = std::uint64_t{2} << 40;
  static std::uint64_t addr(const std::byte* p) { return reinterpret_cast<std::uintptr_t>(p); }

  // ---- setup ---------------------------------------------------------------------------------
  // A write with immediate consumes a data receive: one per element of every pool the peer may
  // hold, granted ones included (at most max_elements each), and two per send slot for SendData.
  std::uint32_t data_recvs() const {
    return cfg_.send_slots * 2 + cfg_.pools * cfg_.elements + cfg_.grantable_pools * static_cast<std::uint32_t>(max_elements);
  }
  std::size_t data_recv_size() const { return msg::header_size + 4 + cfg_.send_max; }
  errc setup() {
    if (cfg_.pools < 1 || cfg_.pools > max_pools || cfg_.pools + cfg_.grantable_pools > max_pools || cfg_.elements < 1 ||
        cfg_.elements > max_elements || cfg_.element_size < 1 || cfg_.element_size > 65536 || cfg_.send_max > max_message - 16 ||
        cfg_.send_slots < 1 || cfg_.send_slots > 1024 || cfg_.control_slots < 1 || cfg_.control_slots > 1024 ||
        (cfg_.transport != rnic::qp_type::rc && cfg_.transport != rnic::qp_type::uc) ||
        (cfg_.implicit_pools && cfg_.transport != rnic::qp_type::rc) ||
        (cfg_.low_water != 0 && (cfg_.get_count < 1 || cfg_.get_count > max_elements)))
      return errc::invalid_argument;
    auto pd = dev_.alloc_pd();
    if (!pd) return device(pd.code());
    pd_ = *pd;
    auto sc = dev_.create_cq(send_cq_mem_);
    if (!sc) return device(sc.code());
    send_cq_ = *sc;
    auto rc = dev_.create_cq(recv_cq_mem_);
    if (!rc) return device(rc.code());
    recv_cq_ = *rc;
    // One arena: control receives (2 per slot), control sends, data receives, send slots.
    send_slot_size_ = std::max<std::size_t>(cfg_.element_size, max_message);
    ctrl_recv_off_ = 0;
    ctrl_send_off_ = ctrl_recv_off_ + std::size_t{cfg_.control_slots} * 2 * max_message;
    data_recv_off_ = ctrl_send_off_ + std::size_t{cfg_.control_slots} * max_message;
    send_off_ = data_recv_off_ + std::size_t{data_recvs()} * data_recv_size();
    arena_.assign(send_off_ + std::size_t{cfg_.send_slots} * send_slot_size_, std::byte{0});
    auto mr = dev_.reg_mr(*pd_, arena_.data(), arena_.size(), rnic::access::local_write);
    if (!mr) return device(mr.code());
    arena_mr_ = *mr;
    sends_.assign(cfg_.send_slots, {});
    ctrl_busy_.assign(cfg_.control_slots, false);
    for (auto [q, sq, rq] : {std::tuple{&ctrl_qp_, &ctrl_sq_, &ctrl_rq_}, std::tuple{&data_qp_, &data_sq_, &data_rq_}}) {
      auto n = dev_.create_qp({.type = cfg_.transport, .pd = *pd_, .send_cq = send_cq_, .recv_cq = recv_cq_, .sq = sq->get(), .rq = rq->get()});
      if (!n) return device(n.code());
      *q = *n;
    }
    for (std::uint32_t i = 0; i < cfg_.pools; ++i)
      if (!make_pool(cfg_.first_pool_ref + i, cfg_.elements, cfg_.element_size, cfg_.implicit_pools)) return errc::device_error;
    return {};
  }
  // A pool's memory, registered for the peer's writes (on demand when `implicit`); nullptr
  // when the device refuses.
  pool* make_pool(std::uint32_t ref, std::uint32_t count, std::uint32_t size, bool implicit) {
    pool& p = pools_[pool_count_];
    p.mem.assign(std::size_t{count} * size, std::byte{0});
    constexpr rnic::access rights = rnic::access::local_write | rnic::access::remote_write;
    auto mr = implicit ? dev_.reg_mr_on_demand(*pd_, p.mem.data(), p.mem.size(), rights)
                       : dev_.reg_mr(*pd_, p.mem.data(), p.mem.size(), rights);
    if (!mr) {
      dev_error_ = mr.code();
      p.mem = {};
      return nullptr;
    }
    p.mr = *mr;
    p.desc = {.pool_ref = ref, .element_count = count, .element_size = size, .memory_handle = mr->rkey, .address = mr->addr,
              .pool_context = 0, .implicit = implicit};
    ++pool_count_;
    return &p;
  }
  // The owner's allocator (BufferRecvPoolGet): a new pool while grantable ones remain.
  static std::optional<msg::pool_descriptor> grant(void* ctx, const msg::buffer_recv_pool_get& g) {
    auto& self = *static_cast<endpoint*>(ctx);
    const std::uint32_t size = g.element_size, count = g.element_count;
    if (self.pool_count_ >= self.cfg_.pools + self.cfg_.grantable_pools || size < 1 || size > 65536 || count < 1 || count > max_elements)
      return std::nullopt;
    std::uint32_t ref = self.cfg_.first_pool_ref;  // the lowest reference not in use
    while (self.pool_of(ref)) ++ref;
    const pool* p = self.make_pool(ref, count, size, g.implicit && self.cfg_.transport == rnic::qp_type::rc);
    if (!p) return std::nullopt;
    ++self.stats_.pools_granted;
    return p->desc;
  }
  pool* pool_of(std::uint32_t ref) {
    for (std::size_t i = 0; i < pool_count_; ++i)
      if (pools_[i].desc.pool_ref == ref && pools_[i].mr.lkey) return &pools_[i];
    return nullptr;
  }

  // ---- buffers and posts ---------------------------------------------------------------------
  std::span<std::byte> send_buf(std::uint32_t i) { return std::span(arena_).subspan(send_off_ + i * send_slot_size_, send_slot_size_); }
  std::span<std::byte> ctrl_send_buf(std::uint32_t i) { return std::span(arena_).subspan(ctrl_send_off_ + std::size_t{i} * max_message, max_message); }
  std::span<std::byte> ctrl_recv_buf(std::uint32_t i) { return std::span(arena_).subspan(ctrl_recv_off_ + std::size_t{i} * max_message, max_message); }
  std::span<std::byte> data_recv_buf(std::uint32_t i) { return std::span(arena_).subspan(data_recv_off_ + i * data_recv_size(), data_recv_size()); }
  std::optional<std::uint32_t> free_send_slot() const {
    for (std::uint32_t i = 0; i < sends_.size(); ++i) {
      const std::uint32_t k = (send_hint_ + i) % static_cast<std::uint32_t>(sends_.size());
      if (!sends_[k].busy) return k;
    }
    return std::nullopt;
  }
  errc post(std::uint32_t qp, wr_kind k, std::uint32_t i, rnic::wr_opcode op, std::span<const std::byte> bytes) {
    const rnic::sge s{addr(bytes.data()), static_cast<std::uint32_t>(bytes.size()), arena_mr_.lkey};
    if (rnic::errc e = dev_.post_send(qp, {.wr_id = wr_id(k, i), .opcode = op, .sg_list = {&s, 1}}); e != rnic::errc{}) return device(e);
    if (k == wr_kind::data_send) send_hint_ = (i + 1) % static_cast<std::uint32_t>(sends_.size());
    return {};
  }
  errc post_control_recv(std::uint32_t i) {
    const auto b = ctrl_recv_buf(i);
    const rnic::sge s{addr(b.data()), static_cast<std::uint32_t>(b.size()), arena_mr_.lkey};
    rnic::errc e = dev_.post_recv(ctrl_qp_, {.wr_id = wr_id(wr_kind::control_recv, i), .sg_list = {&s, 1}});
    return e == rnic::errc{} ? errc{} : device(e);
  }
  errc post_data_recv(std::uint32_t i) {
    const auto b = data_recv_buf(i);
    const rnic::sge s{addr(b.data()), static_cast<std::uint32_t>(b.size()), arena_mr_.lkey};
    rnic::errc e = dev_.post_recv(data_qp_, {.wr_id = wr_id(wr_kind::data_recv, i), .sg_list = {&s, 1}});
    return e == rnic::errc{} ? errc{} : device(e);
  }
  errc device(rnic::errc e) {
    dev_error_ = e;
    return errc::device_error;
  }
  errc block() {
    ++stats_.would_block;
    return errc::would_block;
  }
  std::uint64_t next_txn() { return txn_++; }

  // Control messages go out in order: straight into a free slot, or into the backlog behind
  // the ones already waiting.
  template <class M>
  errc send_message(const M& m) {
    std::array<std::byte, max_message> b;
    return queue_frame(b, msg::encode(m, b));
  }
  /// A pool machine's message action, encoded as flow::encode_message says.
  errc send_action(const flow::pool_action_t& a) {
    std::array<std::byte, max_message> b;
    return queue_frame(b, flow::encode_message(a, b));
  }
  /// Queues b's first *n bytes. A message that does not fit max_message is too_large; one that
  /// does not encode for another reason (a field out of range) invalid_argument.
  errc queue_frame(std::span<const std::byte> b, const wire::result<std::size_t>& n) {
    if (!n) return n.code() == wire::errc::no_space || n.code() == wire::errc::too_large ? errc::too_large : errc::invalid_argument;
    if (backlog_.size() >= cfg_.backlog) return block();
    backlog_.emplace_back(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(*n));
    pump_backlog();
    return {};
  }
  void pump_backlog() {
    while (!backlog_.empty()) {
      std::uint32_t i = 0;
      while (i < ctrl_busy_.size() && ctrl_busy_[i]) ++i;
      if (i == ctrl_busy_.size()) return;
      const auto buf = ctrl_send_buf(i);
      std::memcpy(buf.data(), backlog_.front().data(), backlog_.front().size());
      if (post(ctrl_qp_, wr_kind::control_send, i, rnic::wr_opcode::send, buf.first(backlog_.front().size())) != errc{}) return;
      ctrl_busy_[i] = true;
      backlog_.pop_front();
      ++stats_.messages_out;
    }
  }

  // ---- the machines' actions -------------------------------------------------------------------
  void run(const flow::pool_sink& out, bool skip_writes = false) {
    for (const auto& a : out) {
      std::visit(
          [&](const auto& x) {
            using A = std::decay_t<decltype(x)>;
            namespace pa = flow::pool_action;
            if constexpr (std::is_same_v<A, pa::send_update>) {
              queue_update(x.txn, x.entry);  // (batched into one BufferRecvPoolUpdate)
            } else if constexpr (std::is_same_v<A, pa::send_recv_pool> || std::is_same_v<A, pa::send_get> ||
                                 std::is_same_v<A, pa::send_flush_request> || std::is_same_v<A, pa::send_flush_reply> ||
                                 std::is_same_v<A, pa::send_indicate>) {
              if constexpr (std::is_same_v<A, pa::send_get>) ++stats_.gets_sent;
              (void)send_action(a);
            } else if constexpr (std::is_same_v<A, pa::rdma_write>) {
              if (!skip_writes) ++stats_.pool_faults;  // only transfer() asks for writes
            } else if constexpr (std::is_same_v<A, pa::deliver>) {
              deliver(x.what);
            } else if constexpr (std::is_same_v<A, pa::deregister>) {
              if (pool* p = pool_of(x.pool_ref)) {
                (void)dev_.dereg_mr(p->mr.lkey);
                p->mr = {};
              }
            } else if constexpr (std::is_same_v<A, pa::declined>) {
              ++stats_.gets_declined;
            } else if constexpr (std::is_same_v<A, pa::fault>) {
              ++stats_.pool_faults;
            }
          },
          a);
    }
    check_closed();
  }
  // The application is given the element's bytes; once it returns, the element goes back.
  void deliver(const msg::indication& i) {
    pool* p = pool_of(i.pool_ref);
    if (!p || std::size_t{i.element_index} * p->desc.element_size + i.byte_count > p->mem.size()) {
      ++stats_.pool_faults;  // (the owner's books and this side's pools disagree: never expected)
      return;
    }
    const auto bytes = std::span<const std::byte>(p->mem).subspan(std::size_t{i.element_index} * p->desc.element_size, i.byte_count);
    ++stats_.packets_in;
    stats_.bytes_in += bytes.size();
    if (h_.packet) h_.packet(bytes);
    released_.push_back({i.pool_ref, i.element_index});
  }
  // Elements the application gave back in this poll, released in ranges: one
  // BufferRecvPoolUpdate carries them all.
  void flush_updates() {
    if (released_.empty()) return;
    std::sort(released_.begin(), released_.end());
    actions a;
    for (std::size_t i = 0; i < released_.size();) {
      std::size_t j = i + 1;
      while (j < released_.size() && released_[j].first == released_[i].first && released_[j].second == released_[j - 1].second + 1) ++j;
      (void)owner_.release(released_[i].first, released_[i].second, static_cast<std::uint32_t>(j - i), a.out);
      stats_.updates_coalesced += j - i - 1;
      i = j;
      if (a.out.room() < 2) run(a.out), a.out.clear();
    }
    released_.clear();
    run(a.out);
    if (!updates_.empty()) {
      (void)send_message(msg::buffer_recv_pool_update{.header = {.transaction_context = update_txn_}, .entries = updates_});
      updates_.clear();
    }
  }
  void queue_update(std::uint64_t txn, const msg::pool_update_entry& e) {
    if (updates_.empty()) update_txn_ = txn;
    updates_.push_back(e);
    if (updates_.size() == max_update_entries) {
      (void)send_message(msg::buffer_recv_pool_update{.header = {.transaction_context = update_txn_}, .entries = updates_});
      updates_.clear();
    }
  }
  static constexpr std::size_t max_update_entries = (max_message - msg::header_size - 4) / 12;

  // ---- completions -----------------------------------------------------------------------------
  void on_send(const rnic::work_completion& wc) {
    if (wc.status != rnic::wc_status::success) return enter(state::failed);
    const std::uint32_t i = index_of(wc.wr_id);
    switch (kind_of(wc.wr_id)) {
      case wr_kind::control_send:
        if (i < ctrl_busy_.size()) ctrl_busy_[i] = false;
        break;
      case wr_kind::data_send:
        if (i < sends_.size()) sends_[i] = {};
        break;
      case wr_kind::data_write: {
        if (i >= sends_.size()) break;
        const send_slot s = sends_[i];
        sends_[i] = {};
        actions a;
        (void)user_.write_done(s.pool_ref, s.element, a.out);
        run(a.out);
        break;
      }
      default: break;
    }
  }
  void on_recv(const rnic::work_completion& wc) {
    // A QP in the error state flushes its receives: this sees it even with no send outstanding
    // (the device's asynchronous events are its owner's to take, not one endpoint's).
    if (wc.status != rnic::wc_status::success) return enter(state::failed);
    const std::uint32_t i = index_of(wc.wr_id);
    if (kind_of(wc.wr_id) == wr_kind::control_recv) {
      if (i >= cfg_.control_slots * 2) return;
      ++stats_.messages_in;
      on_message(ctrl_recv_buf(i).first(std::min<std::size_t>(wc.byte_len, max_message)));
      (void)post_control_recv(i);
    } else if (kind_of(wc.wr_id) == wr_kind::data_recv) {
      if (i >= data_recvs()) return;
      if (wc.with_imm) {
        actions a;
        (void)owner_.on_idata(wc.imm, a.out);
        run(a.out);
      } else {
        ++stats_.messages_in;
        on_message(data_recv_buf(i).first(std::min<std::size_t>(wc.byte_len, data_recv_size())));
      }
      (void)post_data_recv(i);
    }
  }
  void on_message(std::span<const std::byte> frame) {
    actions a;
    const wire::error e = msg::dispatch(frame, [&](const auto& m) {
      using M = std::decay_t<decltype(m)>;
      if constexpr (std::is_same_v<M, msg::buffer_recv_pool>) {
        (void)user_.on_recv_pool(m, a.out);
        max_element_bytes_ = 0;
        for (std::size_t k = 0; k < max_pools; ++k)
          if (user_.at(k).state == flow::pool_state::active) max_element_bytes_ = std::max(max_element_bytes_, user_.at(k).desc.element_size);
      } else if constexpr (std::is_same_v<M, msg::buffer_recv_pool_get>) {
        (void)owner_.on_get(m, a.out);
      } else if constexpr (std::is_same_v<M, msg::buffer_recv_pool_update>) {
        if (m.entries.size() + 1 <= a.out.room()) (void)user_.on_update(m, a.out);
        else ++stats_.pool_faults;
      } else if constexpr (std::is_same_v<M, msg::buffer_pool_flush_request>) {
        // The references name this side's pools (the peer is done with them) or the peer's (it
        // takes them back); the ends' references are disjoint (spec/pp.md §3).
        on_flush_request(m, a);
      } else if constexpr (std::is_same_v<M, msg::buffer_pool_flush_reply>) {
        (void)owner_.on_flush_reply(m, a.out);
        run(a.out), a.out.clear();
        (void)user_.on_flush_reply(m, a.out);
      } else if constexpr (std::is_same_v<M, msg::send_data>) {
        ++stats_.packets_in;
        stats_.bytes_in += m.data.size();
        if (h_.packet) h_.packet(m.data);
      } else if constexpr (std::is_same_v<M, msg::buffer_rdma_indicate>) {
        if (m.entries.size() + 1 <= a.out.room()) (void)owner_.on_indicate(m, a.out);
        else ++stats_.pool_faults;
      } else if constexpr (std::is_same_v<M, msg::cfg_util_request>) {
        cfg_answer ans = h_.cfg_request ? h_.cfg_request(m.request_code, m.data) : cfg_answer{};
        (void)send_message(msg::cfg_util_reply{.header = {.transaction_context = m.header.transaction_context},
                                               .request_code = m.request_code, .status = ans.status, .data = ans.data});
      } else if constexpr (std::is_same_v<M, msg::cfg_util_reply>) {
        if (h_.cfg_reply) h_.cfg_reply(m.header.transaction_context, m.request_code, m.status, m.data);
      }
    });
    if (e.code != wire::errc{}) ++stats_.bad_messages;
    run(a.out);
  }
  void on_flush_request(const msg::buffer_pool_flush_request& m, actions& a) {
    std::array<std::uint32_t, max_pools> mine{}, theirs{};
    std::size_t nm = 0, nt = 0;
    for (std::uint32_t ref : m.pool_refs) {
      if (owner_.find(ref) && nm < mine.size()) mine[nm++] = ref;
      if (user_.find(ref) && nt < theirs.size()) theirs[nt++] = ref;
      if (!owner_.find(ref) && !user_.find(ref)) ++stats_.pool_faults;
    }
    if (state_ == state::connected && (nm || nt)) enter(state::closing);  // the peer tears down
    const auto part = [&](std::span<const std::uint32_t> refs) {
      return msg::buffer_pool_flush_request{.header = m.header, .pool_refs = refs};
    };
    if (nm) (void)owner_.on_flush_request(part({mine.data(), nm}), a.out), run(a.out), a.out.clear();
    if (nt) (void)user_.on_flush_request(part({theirs.data(), nt}), a.out);
    if (state_ == state::closing) {  // and flushes what is left the other way
      run(a.out), a.out.clear();
      for (std::uint32_t ref : own_refs())
        if (owner_.state_of(ref) == flow::pool_state::active) (void)owner_.flush(ref, a.out), run(a.out), a.out.clear();
      for (std::uint32_t ref : peer_refs())
        if (user_.state_of(ref) == flow::pool_state::active) (void)user_.flush(ref, a.out), run(a.out), a.out.clear();
    }
  }

  // ---- state -----------------------------------------------------------------------------------
  std::vector<std::uint32_t> own_refs() const {
    std::vector<std::uint32_t> v;
    for (std::size_t k = 0; k < max_pools; ++k)
      if (owner_.at(k).state != flow::pool_state::unused) v.push_back(owner_.at(k).desc.pool_ref);
    return v;
  }
  std::vector<std::uint32_t> peer_refs() const {
    std::vector<std::uint32_t> v;
    for (std::size_t k = 0; k < max_pools; ++k)
      if (user_.at(k).state != flow::pool_state::unused) v.push_back(user_.at(k).desc.pool_ref);
    return v;
  }
  void check_closed() {
    if (state_ != state::closing) return;
    for (std::size_t k = 0; k < max_pools; ++k) {
      const auto so = owner_.at(k).state, su = user_.at(k).state;
      if ((so != flow::pool_state::unused && so != flow::pool_state::flushed) || (su != flow::pool_state::unused && su != flow::pool_state::flushed)) return;
    }
    enter(state::closed);
  }
  void enter(state s) {
    if (state_ == s || state_ == state::failed) return;
    state_ = s;
    if (h_.state_changed) h_.state_changed(s);
  }

  rnic::device& dev_;
  config cfg_;
  handlers h_;
  std::size_t port_;
  errc setup_{};
  rnic::errc dev_error_{};
  state state_ = state::idle;
  counters stats_{};
  owner_t owner_;
  user_t user_;
  std::uint64_t txn_ = 1;
  std::optional<std::uint32_t> pd_{};
  rnic::cq_memory send_cq_mem_{4096}, recv_cq_mem_{8192};  // every send slot; every receive posted
  std::uint32_t send_cq_ = 0, recv_cq_ = 0, ctrl_qp_ = 0, data_qp_ = 0;
  std::unique_ptr<rnic::sq_memory> ctrl_sq_ = std::make_unique<rnic::sq_memory>(1024), data_sq_ = std::make_unique<rnic::sq_memory>(1024);
  std::unique_ptr<rnic::rq_memory> ctrl_rq_ = std::make_unique<rnic::rq_memory>(2048), data_rq_ = std::make_unique<rnic::rq_memory>(4096);
  std::vector<std::byte> arena_;
  rnic::memory_region arena_mr_{};
  std::size_t send_slot_size_ = 0, ctrl_recv_off_ = 0, ctrl_send_off_ = 0, data_recv_off_ = 0, send_off_ = 0;
  std::vector<send_slot> sends_;
  std::uint32_t send_hint_ = 0;
  std::vector<bool> ctrl_busy_;
  std::deque<std::vector<std::byte>> backlog_;
  std::array<pool, max_pools> pools_{};
  std::size_t pool_count_ = 0;
  std::uint32_t send_max_ = 0;            // SendData up to this (the smaller of both ends')
  std::uint32_t max_element_bytes_ = 0;  // the largest element of the peer's active pools
  std::vector<std::pair<std::uint32_t, std::uint32_t>> released_;  // (pool_ref, element) this poll
  std::vector<msg::pool_update_entry> updates_;
  std::uint64_t update_txn_ = 0;
};

}  // namespace pushwire::pp
