// The reference software RNIC (spec/rnic.md): verbs-shaped objects (ports, protection domains,
// memory regions and keys, completion queues, queue pairs, shared receive queues, address
// handles) over the flow/ machines, which own every transport rule (PSNs, ACKs, retries, RNR,
// page-fault pauses, DC connects). The device adds what a NIC adds around them: descriptor
// rings and doorbells, memory translation and protection (memory.hpp), completion queues with
// per-QP completion lists, page-fault service for on-demand keys, and the two framings on its
// ports (RoCEv2 through ib/, cells through cell/, both via flow/frame.hpp).
//
// Sans-IO like the machines: the device never reads a clock or a socket. receive() takes a frame
// that arrived on a port at a given time; take_frame() hands out what a port transmits;
// progress(now) fetches posted descriptors, fires due timers, serves due page faults, sends what
// the machines allow and writes completions; next_deadline() says when progress() next has
// timed work. One thread drives a device.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <variant>
#include <vector>

#include <pushwire/cell/reassembler.hpp>
#include <pushwire/cell/segmenter.hpp>
#include <pushwire/flow/dc.hpp>
#include <pushwire/flow/frame.hpp>
#include <pushwire/flow/rc.hpp>
#include <pushwire/flow/session.hpp>
#include <pushwire/ib/entropy.hpp>
#include <pushwire/ib/roce.hpp>
#include <pushwire/rnic/cq.hpp>
#include <pushwire/rnic/memory.hpp>
#include <pushwire/rnic/qp.hpp>
#include <pushwire/rnic/queue.hpp>

namespace pushwire::rnic {

enum class framing : std::uint8_t { roce, cell };
inline constexpr std::array<wire::named_value, 2> framing_names{{{framing::roce, "roce"}, {framing::cell, "cell"}}};
constexpr std::span<const wire::named_value> wire_enum_names(framing) { return framing_names; }

/// One port: its MAC, its GID (an IP address; IPv4 as ::ffff:a.b.c.d), its MTU and framing.
struct port_config {
  wire::mac_address mac{};
  std::array<std::uint8_t, 16> gid{};
  /// RoCE: GIDs 1.. of the port's table: more addresses the port answers to and sends from
  /// (address_vector::sgid_index), e.g. an IPv6 one beside an IPv4-mapped `gid`.
  std::vector<std::array<std::uint8_t, 16>> extra_gids{};
  /// The largest path MTU (payload bytes per packet), 256..4096; in both framings the limit of
  /// a UD message (UD has no path MTU attribute).
  std::uint32_t mtu = 4096;
  framing frame = framing::roce;
  /// Cells: data bytes per cell (1..65535).
  std::uint32_t cell_payload = 256;
  /// RoCE: the UDP source port of every frame (the ICRC covers it). 0 derives it per QP pair
  /// from the flow label (ib/entropy.hpp); a UDP socket transport sets its bound port
  /// (net/udp.hpp), since the kernel sends from that. Sessions set their own.
  std::uint16_t udp_sport = 0;
};

/// Limits and behaviour of one device (spec/rnic.md §2).
struct device_config {
  std::vector<port_config> ports = std::vector<port_config>(1);  // (not {port_config{}}: g++-12 -O3 warns falsely on the initializer list)
  std::uint32_t max_keys = 1u << 16;
  std::uint32_t max_qps = 1024;
  std::uint32_t max_cqs = 1024;
  std::uint32_t max_pds = 1024;
  /// Virtual time to serve a page fault of an on-demand key (make its pages resident), ns.
  time_ns page_fault_latency = 100'000;
  /// What a responder does on an absent page: page-fault ACK (the default) or silent drop.
  flow::fault_policy on_fault = flow::fault_policy::page_fault_ack;
  /// Frames a port holds for the fabric; beyond it the device sends no new requests or
  /// responses, and beyond twice it drops what it would still send (ACKs answering packets),
  /// counted: a NIC's transmit buffer is finite.
  std::size_t tx_queue = 4096;
  /// Not IBTA: a QP never fails on retransmission timeouts (retry_cnt is ignored). For soaks and
  /// fault tests, which ask whether data arrives intact under faults, not whether a QP gives up.
  bool retry_forever = false;
  /// Packets a requester keeps unacknowledged (rxe's 128). Go-back-N resends them all after a
  /// loss, so a lossy fabric favours fewer.
  std::uint32_t window = 128;
  /// Cells: the largest transport packet a port reassembles (the largest path MTU plus headers).
  std::uint32_t cell_max_packet = 4096 + 64;
  /// Cells: nanoseconds a packet may stay incomplete at a receiving port.
  time_ns cell_reassembly_timeout = 1'000'000;
  /// TCP's TIME_WAIT for RC (spec/rnic.md §6): a QP destroyed in RTS or SQD keeps answering
  /// duplicate requests (re-sending the ACK, READ response or atomic result a lost response
  /// leaves its peer waiting for) until twice its own local ACK timeout, at most `linger` ns,
  /// passes with no packet for it; so a peer whose last ACK was lost still completes. It takes
  /// no new request, sends no request, writes no completion, and holds no CQ, PD or SRQ. Not
  /// for a QP whose peer is on this device. 0: destroyed at once.
  time_ns linger = 0;
  /// ACK coalescing: a plain ACK (not a NAK, nor a READ or atomic response) alone in its port's
  /// transmit queue waits there until a request leaves the port, another response joins it, or
  /// `ack_delay` ns pass. In a request-response exchange the ACK then leaves with the answer
  /// (behind it: take_frame), one datagram burst each way instead of two; a stream's ACKs,
  /// several, are not held. 0: at once.
  time_ns ack_delay = 0;
};

/// An asynchronous event (ibv_event_type's meaning): the device reports what no completion can.
enum class event_type : std::uint8_t { cq_error, qp_fatal, qp_request_error, qp_access_error, sq_drained, srq_limit };
inline constexpr std::array<wire::named_value, 6> event_type_names{{
    {event_type::cq_error, "cq_error"}, {event_type::qp_fatal, "qp_fatal"},
    {event_type::qp_request_error, "qp_request_error"}, {event_type::qp_access_error, "qp_access_error"},
    {event_type::sq_drained, "sq_drained"}, {event_type::srq_limit, "srq_limit"},
}};
constexpr std::span<const wire::named_value> wire_enum_names(event_type) { return event_type_names; }
struct async_event {
  event_type type;
  std::uint32_t object;  ///< the CQ or QP number
};

/// A registered region as reg_mr returns it.
struct memory_region {
  std::uint32_t lkey = 0, rkey = 0;  ///< the same key
  std::uint64_t addr = 0, length = 0;
};

/// What create_qp needs.
struct qp_init_attr {
  qp_type type = qp_type::rc;
  std::uint32_t pd = 0;
  std::uint32_t send_cq = 0, recv_cq = 0;
  sq_memory* sq = nullptr;   ///< the send queue ring (not for DCT)
  rq_memory* rq = nullptr;   ///< the receive queue ring, unless srq is given (not for DCI)
  std::optional<std::uint32_t> srq{};
  bool sq_sig_all = false;   ///< every send completes on the CQ, signaled or not
  std::uint64_t dct_access_key = 0;  ///< DCT: the key a DCI's packets must carry
};

/// A send work request, as post_send writes it into a descriptor.
struct send_wr {
  std::uint64_t wr_id = 0;
  wr_opcode opcode = wr_opcode::send;
  std::uint8_t flags = send_signaled;
  std::span<const sge> sg_list{};
  std::span<const std::byte> inline_data{};  ///< with send_inline: up to max_inline bytes
  std::uint32_t imm = 0;
  std::uint64_t remote_addr = 0;
  std::uint32_t rkey = 0;
  std::uint64_t compare_add = 0, swap = 0;
  std::uint32_t ah = 0, remote_qpn = 0, remote_qkey = 0;  ///< UD (DC: ah, remote_qpn = DCT number)
  std::uint64_t dc_key = 0;                                ///< DC: the target's access key
};
/// A receive work request.
struct recv_wr {
  std::uint64_t wr_id = 0;
  std::span<const sge> sg_list{};
};

/// Per-device counters (spec/rnic.md §9).
struct device_counters {
  std::uint64_t frames_out = 0, frames_in = 0, bytes_out = 0, bytes_in = 0;
  std::uint64_t dropped_bad_frame = 0;   ///< not RoCEv2 / not a cell, or a bad ICRC / cell CRC
  std::uint64_t dropped_not_mine = 0;    ///< another MAC or GID, another partition
  std::uint64_t dropped_no_qp = 0;       ///< no QP of that number, or not in a state to take it
  std::uint64_t dropped_by_qp = 0;       ///< dropped by a QP's rules (duplicates, sequence, keys)
  std::uint64_t dropped_tx_full = 0;     ///< packets not sent: the port's transmit queue was full
  std::uint64_t page_faults = 0;         ///< faults raised on on-demand keys
  std::uint64_t faults_served = 0;
  std::uint64_t pauses = 0;              ///< requesters paused by a page-fault ACK
  std::uint64_t retransmits = 0;         ///< packets sent again by requesters
  /// Retransmission timeouts the pauses spared: for each pause, how many local ACK timeouts its
  /// delay spans (a sender without page-fault ACKs would have resent its window each time).
  std::uint64_t retransmits_avoided = 0;
  std::uint64_t cq_overflows = 0;
  std::uint64_t completions = 0;
  /// Session QPs (spec/rnic.md §12): messages dropped by the receiver's session rules.
  std::uint64_t session_unknown_tuple = 0;  ///< from a 5-tuple the session table does not hold
  std::uint64_t session_foreign = 0;        ///< from a session of another group or QP
  std::uint64_t session_duplicate = 0;      ///< a sequence number already delivered or held
  std::uint64_t session_window_full = 0;    ///< beyond the resequencing window
  std::uint64_t session_not_sent = 0;       ///< a session QP's message with no session to go on
};

namespace detail {

/// A work request's record in its QP's completion list (the completion unit's per-QP list).
struct send_record {
  std::uint64_t seq = 0;  ///< the requester's work request id
  std::uint64_t wr_id = 0;
  send_wqe wqe{};
  wc_opcode op = wc_opcode::send;
  bool signaled = true, done = false;
  bool fatal = false;  ///< a local error: the send queue fails once this completes (in order)
  /// The device's own WRITE serving a peer's READ_AS_WRITE of this PSN: no ring slot, no CQE.
  std::optional<std::uint32_t> serves{};
  wc_status status = wc_status::success;
  std::uint32_t vendor_err = 0;
};
struct recv_record {
  recv_wqe wqe{};
  std::uint32_t msn = 0;
  bool bound = false, done = false;
  wc_status status = wc_status::success;
  wc_opcode op = wc_opcode::recv;
  std::uint32_t byte_len = 0, imm = 0, src_qp = 0;
  bool with_imm = false, grh = false;
};

}  // namespace detail

class device {
 public:
  /// Send-queue entries one QP's transport machine holds (the ring may hold more: the device
  /// fetches as the machine has room).
  static constexpr std::size_t machine_sq = 64;
  /// DC: requests an initiator holds while it serves another target.
  static constexpr std::size_t machine_pending = 64;
  /// Bytes of the UD receive buffer's head reserved for the GRH (verbs' convention).
  static constexpr std::uint32_t grh_size = 40;
  /// RoCE payloads from this size up may be placed while their ICRC is computed (cut_through;
  /// below it, verifying first and copying after costs no more).
  static constexpr std::size_t cut_through_min = 256;
  /// Requests that go before coalesced ACKs when they leave together (take_frame).
  static constexpr std::size_t short_burst = 16;

  explicit device(device_config cfg = {}) : cfg_(std::move(cfg)), mem_(cfg_.max_keys) {
    for (const port_config& p : cfg_.ports) {
      port_state s;
      s.cfg = p;
      if (p.frame == framing::cell)
        s.reasm = std::make_unique<cell::reassembler>(cell::reassembly_limits{
            .max_packets = 64, .max_packet_bytes = cfg_.cell_max_packet, .max_bytes = 64 * std::size_t{cfg_.cell_max_packet},
            .max_age_ns = cfg_.cell_reassembly_timeout, .max_cell_payload = p.cell_payload, .history = 64});
      ports_.push_back(std::move(s));
    }
  }
  device(const device&) = delete;
  device& operator=(const device&) = delete;

  const device_config& config() const { return cfg_; }
  std::size_t port_count() const { return ports_.size(); }
  const device_counters& counters() const { return stats_; }
  memory_table& memory() { return mem_; }

  // ---- protection domains ---------------------------------------------------------------
  result<std::uint32_t> alloc_pd() {
    if (pds_.size() >= cfg_.max_pds) return errc::no_resources;
    const std::uint32_t pd = next_pd_++;
    pds_.push_back(pd);
    return pd;
  }
  errc dealloc_pd(std::uint32_t pd) {
    const auto it = std::find(pds_.begin(), pds_.end(), pd);
    if (it == pds_.end()) return errc::not_found;
    if (mem_.keys_of(pd) != 0) return errc::busy;
    for (const auto& [n, q] : qps_)
      if (!q->closed && q->init.pd == pd) return errc::busy;
    pds_.erase(it);
    return {};
  }

  // ---- memory ---------------------------------------------------------------------------
  result<memory_region> reg_mr(std::uint32_t pd, void* addr, std::uint64_t length, access rights) {
    return reg_mr_iova(pd, addr, length, reinterpret_cast<std::uintptr_t>(addr), rights);
  }
  result<memory_region> reg_mr_iova(std::uint32_t pd, void* addr, std::uint64_t length, std::uint64_t iova, access rights) {
    if (!has_pd(pd)) return errc::not_found;
    const auto k = mem_.reg_direct(pd, addr, length, rights, iova);
    if (!k) return k.code();
    return memory_region{*k, *k, iova, length};
  }
  /// Implicit on-demand registration of [addr, addr + length): no page resident until touched.
  result<memory_region> reg_mr_on_demand(std::uint32_t pd, void* addr, std::uint64_t length, access rights) {
    if (!has_pd(pd)) return errc::not_found;
    const auto k = mem_.reg_on_demand(pd, addr, length, rights);
    if (!k) return k.code();
    return memory_region{*k, *k, reinterpret_cast<std::uintptr_t>(addr), length};
  }
  result<memory_region> reg_indirect(std::uint32_t pd, std::span<const klm_entry> entries, access rights) {
    if (!has_pd(pd)) return errc::not_found;
    const auto k = mem_.reg_indirect(pd, entries, rights);
    if (!k) return k.code();
    return memory_region{*k, *k, 0, mem_.info(*k)->length};
  }
  result<memory_region> reg_pattern(std::uint32_t pd, std::uint32_t repeat, std::span<const pattern_entry> entries, access rights) {
    if (!has_pd(pd)) return errc::not_found;
    const auto k = mem_.reg_pattern(pd, repeat, entries, rights);
    if (!k) return k.code();
    return memory_region{*k, *k, 0, mem_.info(*k)->length};
  }
  errc dereg_mr(std::uint32_t key) { return mem_.dereg(key); }
  /// Makes the pages of local ranges of on-demand keys resident now (ibv_advise_mr's prefetch),
  /// after checking each range as a local access of `need` in `pd` would be. fault: false only
  /// checks (the pages that are resident stay so; PREFETCH_NO_FAULT). Errors: the first
  /// range's check error; nothing is made resident then.
  errc prefetch(std::uint32_t pd, std::span<const sge> ranges, access need, bool fault = true) {
    for (const sge& s : ranges)
      if (const errc e = mem_.check(s.lkey, s.addr, s.length, {pd, need}); e != errc{} && e != errc::page_fault) return e;
    if (!fault) return {};
    for (const sge& s : ranges) {
      fault_info fi{};
      while (mem_.check(s.lkey, s.addr, s.length, {pd, need}, &fi) == errc::page_fault) {
        mem_.make_resident(fi.key, fi.va, fi.length);
        ++stats_.page_faults;
        ++stats_.faults_served;
      }
    }
    return {};
  }
  result<memory_region> rereg_mr(std::uint32_t key, void* addr, std::uint64_t length, access rights,
                                 const rereg_options& o = {}) {
    if (o.pd && !has_pd(*o.pd)) return errc::not_found;
    const auto k = mem_.rereg(key, addr, length, rights, o);
    if (!k) return k.code();
    return memory_region{*k, *k, o.iova.value_or(reinterpret_cast<std::uintptr_t>(addr)), length};
  }

  // ---- completion queues ----------------------------------------------------------------
  /// A CQ over the consumer's memory (which must outlive the CQ).
  result<std::uint32_t> create_cq(cq_memory& m) {
    if (cqs_.size() >= cfg_.max_cqs) return errc::no_resources;
    if (m.ring().empty()) return errc::invalid_argument;
    const std::uint32_t n = next_cq_++;
    cqs_.emplace(n, cq_state{.mem = &m});
    return n;
  }
  errc destroy_cq(std::uint32_t cq) {
    if (!cqs_.count(cq)) return errc::not_found;
    for (const auto& [n, q] : qps_)
      if (q->init.send_cq == cq || q->init.recv_cq == cq) return errc::busy;
    cqs_.erase(cq);
    return {};
  }
  /// Moves a CQ to new memory (ibv_resize_cq): the completions written and not consumed yet go
  /// to the start of `m`'s ring in their order, and the device writes there from then on (the
  /// old memory is the caller's again). The consumer must not poll meanwhile. Errors:
  /// not_found, invalid_argument (m's ring empty, or smaller than the completions waiting).
  errc resize_cq(std::uint32_t cq, cq_memory& m) {
    const auto it = cqs_.find(cq);
    if (it == cqs_.end()) return errc::not_found;
    cq_state& c = it->second;
    if (m.ring().empty()) return errc::invalid_argument;
    const std::span<cqe> from = c.mem->ring(), to = m.ring();
    const std::uint32_t ci = c.mem->doorbell().consumer.load(std::memory_order_acquire);
    const std::uint32_t waiting = c.producer - ci;
    if (waiting > to.size()) return errc::invalid_argument;
    const auto n_from = static_cast<std::uint32_t>(from.size()), n_to = static_cast<std::uint32_t>(to.size());
    for (std::uint32_t i = 0; i < waiting; ++i) {
      cqe e = from[(ci + i) & (n_from - 1)];
      e.op_own = static_cast<std::uint8_t>((e.op_own & ~cqe_owner) | cq_memory::phase(i, n_to));
      to[i] = e;
    }
    m.doorbell().consumer.store(0, std::memory_order_release);
    c.producer = waiting;
    c.mem = &m;
    return {};
  }
  /// Calls `notify` once, after the next completion written to cq (armed notification).
  errc arm_cq(std::uint32_t cq, std::function<void(std::uint32_t)> notify) {
    const auto it = cqs_.find(cq);
    if (it == cqs_.end()) return errc::not_found;
    it->second.armed = std::move(notify);
    return {};
  }

  // ---- address handles and shared receive queues -----------------------------------------
  result<std::uint32_t> create_ah(std::uint32_t pd, const address_vector& av) {
    if (!has_pd(pd)) return errc::not_found;
    if (av.port >= ports_.size() || !has_gid(av.port, av.sgid_index)) return errc::invalid_argument;
    if (!free_ahs_.empty()) {
      const std::uint32_t n = free_ahs_.back();
      free_ahs_.pop_back();
      ahs_[n] = av, ah_live_[n] = true;
      return n;
    }
    ahs_.push_back(av);
    ah_live_.push_back(true);
    return static_cast<std::uint32_t>(ahs_.size() - 1);
  }
  /// Frees an address handle; its number may be given to the next create_ah. Errors: not_found.
  /// (Work requests already posted with it keep the address it had.)
  errc destroy_ah(std::uint32_t ah) {
    if (ah >= ahs_.size() || !ah_live_[ah]) return errc::not_found;
    ah_live_[ah] = false;
    free_ahs_.push_back(ah);
    return {};
  }
  result<std::uint32_t> create_srq(std::uint32_t pd, rq_memory& m) {
    if (!has_pd(pd)) return errc::not_found;
    if (m.depth() == 0) return errc::invalid_argument;
    for (std::size_t i = 0; i < srqs_.size(); ++i)
      if (!srqs_[i]) {
        srqs_[i] = std::make_unique<srq_state>(srq_state{.pd = pd, .mem = &m});
        return static_cast<std::uint32_t>(i);
      }
    srqs_.push_back(std::make_unique<srq_state>(srq_state{.pd = pd, .mem = &m}));
    return static_cast<std::uint32_t>(srqs_.size() - 1);
  }
  /// Removes a shared receive queue. Errors: not_found, busy (a QP takes its receives from it).
  errc destroy_srq(std::uint32_t srq) {
    if (!has_srq(srq)) return errc::not_found;
    for (const auto& [n, q] : qps_)
      if (q->init.srq == srq) return errc::busy;
    srqs_[srq].reset();
    std::erase(srq_doorbells_, srq);
    return {};
  }
  /// Arms an SRQ's limit (ibv_modify_srq's srq_limit): once fewer than `limit` receive
  /// descriptors are left in it, the device raises srq_limit once and disarms it. 0 disarms.
  /// Errors: not_found.
  errc arm_srq_limit(std::uint32_t srq, std::uint32_t limit) {
    if (!has_srq(srq)) return errc::not_found;
    srqs_[srq]->limit = limit;
    check_srq_limits();
    return {};
  }
  /// The armed limit of an SRQ (0: none).
  result<std::uint32_t> srq_limit(std::uint32_t srq) const {
    if (!has_srq(srq)) return errc::not_found;
    return srqs_[srq]->limit;
  }
  /// Receive descriptors an SRQ holds (fetched and not yet taken, plus those posted and not yet
  /// fetched): what an SRQ limit compares with.
  result<std::uint32_t> srq_outstanding(std::uint32_t srq) const {
    if (!has_srq(srq)) return errc::not_found;
    const srq_state& s = *srqs_[srq];
    return static_cast<std::uint32_t>(s.ready.size()) + (s.mem->doorbell().producer.load(std::memory_order_acquire) - s.fetched);
  }

  // ---- sessions over UDP 5-tuples (spec/rnic.md §12) -------------------------------------
  /// Session table entries per device, and messages a session QP holds that arrived early.
  static constexpr std::size_t max_sessions = 64, session_window = 64;
  using session_table_t = flow::session_table<max_sessions>;

  /// The privileged session table's owner call (the kernel side's): binds UDP 5-tuple t to
  /// session `id` of `group`, for QP `qpn`. A sending device binds the tuples its session QPs
  /// send on (their source ports); a receiving device, the tuples it accepts. Errors: busy (the
  /// session or the tuple is bound), no_resources (the table is full), invalid_argument (not
  /// UDP, or destination port other than 4791).
  errc bind_session(std::uint32_t id, const flow::five_tuple& t, std::uint32_t group, std::uint32_t qpn) {
    if (t.proto != 17 || t.dport != ib::roce_port) return errc::invalid_argument;
    const flow::errc e = sessions_->bind(id, t, group, qpn);
    return e == flow::errc{} ? errc{} : e == flow::errc::table_full ? errc::no_resources : errc::busy;
  }
  errc unbind_session(std::uint32_t id) { return sessions_->unbind(id) == flow::errc{} ? errc{} : errc::not_found; }
  const session_table_t& sessions() const { return *sessions_; }

  /// Makes UD QP qpn a session QP of `group`. Its SENDs go out on the group's sessions, one
  /// picked per message by `policy` (its UDP source port is the session's), as SEND with
  /// immediate carrying the QP's message sequence number; what arrives for it is resequenced
  /// by flow::session_receiver before it takes a receive, and packets from tuples outside the
  /// group are dropped. Errors: not_found, invalid_argument (not UD).
  errc set_qp_sessions(std::uint32_t qpn, std::uint32_t group, flow::pick_policy policy = flow::pick_policy::round_robin) {
    qp_state_t* q = find_qp(qpn);
    if (!q) return errc::not_found;
    if (q->init.type != qp_type::ud) return errc::invalid_argument;
    if (!q->sessions) ++session_qps_;
    q->sessions = std::make_unique<session_qp>(session_qp{{*sessions_, group, policy}, {*sessions_, qpn, group}, {}});
    return {};
  }

  // ---- queue pairs ----------------------------------------------------------------------
  result<std::uint32_t> create_qp(const qp_init_attr& a) {
    if (qps_.size() - lingering_ >= cfg_.max_qps) return errc::no_resources;
    if (!has_pd(a.pd)) return errc::not_found;
    const bool sends = a.type != qp_type::dct, receives = a.type != qp_type::dci;
    if (sends && (!a.sq || a.sq->depth() == 0 || !cqs_.count(a.send_cq))) return errc::invalid_argument;
    if (receives) {
      if (!cqs_.count(a.recv_cq)) return errc::invalid_argument;
      if (a.srq ? !has_srq(*a.srq) || srqs_[*a.srq]->pd != a.pd : (!a.rq || a.rq->depth() == 0)) return errc::invalid_argument;
    }
    const std::uint32_t qpn = next_qpn_;
    next_qpn_ = (next_qpn_ + 1) & 0xFFFFFF;
    if (next_qpn_ < 0x10) next_qpn_ = 0x10;
    auto q = std::make_unique<qp_state_t>();
    q->qpn = qpn;
    q->init = a;
    qps_.emplace(qpn, std::move(q));
    return qpn;
  }
  errc destroy_qp(std::uint32_t qpn) {
    qp_state_t* q = find_qp(qpn);
    if (!q) return errc::not_found;
    if (q->sessions) --session_qps_;
    if (const time_ns l = linger_of(*q)) {
      q->closed = true;
      q->linger = l;
      q->last_heard = now_;
      q->req.reset();
      q->init.sq = nullptr, q->init.rq = nullptr, q->init.srq.reset();
      q->init.send_cq = q->init.recv_cq = no_cq;
      q->sends.clear(), q->recvs.clear();
      ++lingering_;
      return {};
    }
    qps_.erase(qpn);
    return {};
  }
  /// Destroyed RC QPs still answering duplicates (device_config::linger).
  std::size_t lingering() const { return lingering_; }
  /// Changes a QP's state and attributes (ibv_modify_qp): errors in qp.hpp's check_modify.
  errc modify_qp(std::uint32_t qpn, const qp_attr& a, qp_attr_mask mask) {
    qp_state_t* q = find_qp(qpn);
    if (!q) return errc::not_found;
    const std::uint8_t port = any(mask & qp_attr_mask::port) ? a.port : q->attr.port;
    const std::uint32_t port_mtu = port < ports_.size() ? port_path_mtu(port) : 0;
    if (const errc e = check_modify(q->init.type, q->state, a, mask, ports_.size(), port_mtu); e != errc{}) return e;
    if (any(mask & qp_attr_mask::av) && !has_gid(a.av.port, a.av.sgid_index)) return errc::invalid_attribute;
    apply_attrs(*q, a, mask);
    const qp_state to = any(mask & qp_attr_mask::state) ? a.state : q->state;
    enter(*q, to);
    return {};
  }
  result<qp_state> query_qp(std::uint32_t qpn) const {
    const qp_state_t* q = find_qp(qpn);
    if (!q) return errc::not_found;
    return q->state;
  }
  /// A QP's attributes as the last modify_qp calls set them, with `state` its current state
  /// (ibv_query_qp).
  result<qp_attr> query_qp_attr(std::uint32_t qpn) const {
    const qp_state_t* q = find_qp(qpn);
    if (!q) return errc::not_found;
    qp_attr a = q->attr;
    a.state = a.cur_state = q->state;
    return a;
  }

  /// Writes a send descriptor into the QP's ring and rings the doorbell. Errors: not_found,
  /// invalid_state (RESET, INIT, RTR; DCT), invalid_argument (too many SGEs, inline data over
  /// max_inline), queue_full.
  errc post_send(std::uint32_t qpn, const send_wr& wr) {
    qp_state_t* q = find_qp(qpn);
    if (!q) return errc::not_found;
    if (q->init.type == qp_type::dct || q->state == qp_state::reset || q->state == qp_state::init || q->state == qp_state::rtr)
      return errc::invalid_state;
    send_wqe w;
    w.wr_id = wr.wr_id;
    w.opcode = static_cast<std::uint8_t>(wr.opcode);
    w.flags = wr.flags;
    w.imm = wr.imm;
    w.remote_addr = wr.remote_addr;
    w.rkey = wr.rkey;
    w.compare_add = wr.compare_add;
    w.swap = wr.swap;
    w.ah = wr.ah;
    w.remote_qpn = wr.remote_qpn;
    w.remote_qkey = wr.remote_qkey;
    w.dc_key = wr.dc_key;
    if (wr.flags & send_inline) {
      if (wr.inline_data.size() > max_inline) return errc::invalid_argument;
      w.inline_len = static_cast<std::uint8_t>(wr.inline_data.size());
      std::memcpy(w.inline_data.data(), wr.inline_data.data(), wr.inline_data.size());
    } else {
      if (wr.sg_list.size() > max_sge) return errc::invalid_argument;
      w.num_sge = static_cast<std::uint8_t>(wr.sg_list.size());
      std::copy(wr.sg_list.begin(), wr.sg_list.end(), w.sg.begin());
    }
    if (!q->init.sq->put(w)) return errc::queue_full;
    doorbell(qpn);
    return {};
  }
  /// Writes a receive descriptor into the QP's ring (or the SRQ's) and rings the doorbell.
  errc post_recv(std::uint32_t qpn, const recv_wr& wr) {
    qp_state_t* q = find_qp(qpn);
    if (!q) return errc::not_found;
    if (q->init.type == qp_type::dci || q->state == qp_state::reset) return errc::invalid_state;
    if (q->init.srq) return errc::invalid_argument;
    if (wr.sg_list.size() > max_sge) return errc::invalid_argument;
    if (!q->init.rq->put(descriptor(wr))) return errc::queue_full;
    doorbell(qpn);
    return {};
  }
  errc post_srq_recv(std::uint32_t srq, const recv_wr& wr) {
    if (!has_srq(srq)) return errc::not_found;
    if (wr.sg_list.size() > max_sge) return errc::invalid_argument;
    if (!srqs_[srq]->mem->put(descriptor(wr))) return errc::queue_full;
    srq_doorbells_.push_back(srq);
    return {};
  }
  /// The receive descriptor of wr (its list has at most max_sge entries).
  static recv_wqe descriptor(const recv_wr& wr) {
    recv_wqe w;
    w.wr_id = wr.wr_id;
    w.num_sge = static_cast<std::uint8_t>(wr.sg_list.size());
    std::copy(wr.sg_list.begin(), wr.sg_list.end(), w.sg.begin());
    return w;
  }
  /// The doorbell register: QP qpn has new descriptors in its rings (post_send and post_recv
  /// ring it; a caller that writes descriptors itself rings it after publishing them).
  void doorbell(std::uint32_t qpn) { doorbells_.push_back(qpn); }

  /// Asynchronous events since the last call.
  std::vector<async_event> take_events() { return std::exchange(events_, {}); }

  // ---- the data path ----------------------------------------------------------------------
  /// Does what is due at `now` (see the top of this header).
  void progress(time_ns now) {
    now_ = std::max(now_, now);
    serve_faults();
    fetch();
    for (auto& [n, q] : qps_) {
      if (q->closed) {
        pump(*q);  // its responder's answers to duplicates
        continue;
      }
      fire_timers(*q);
      pump(*q);
      flush_completions(*q);
    }
    if (lingering_)
      lingering_ -= std::erase_if(qps_, [&](const auto& e) { return e.second->closed && now_ >= e.second->last_heard + e.second->linger; });
    for (port_state& p : ports_)
      if (p.reasm) p.reasm->expire(now_);
    check_srq_limits();
  }
  /// The earliest time progress() has timed work (a timer, a page fault served), or nullopt.
  std::optional<time_ns> next_deadline() const {
    std::optional<time_ns> t;
    auto take = [&](std::optional<time_ns> d) {
      if (d && (!t || *d < *t)) t = d;
    };
    for (const auto& f : faults_) take(f.ready_at);
    for (const port_state& p : ports_)
      if (acks_held(p)) take(p.responses_since + cfg_.ack_delay);
    for (const auto& [n, q] : qps_) {
      if (q->closed) take(q->last_heard + q->linger);
      if (q->req) take(q->req->deadline(flow::timer_kind::retransmit)), take(q->req->deadline(flow::timer_kind::wait));
      if (q->dci) {
        take(q->dci->transport().deadline(flow::timer_kind::retransmit));
        take(q->dci->transport().deadline(flow::timer_kind::wait));
      }
    }
    return t;
  }
  /// Whether progress() has work now (doorbells rung, packets or completions to send).
  bool busy() const {
    if (!doorbells_.empty() || !srq_doorbells_.empty()) return true;
    for (const auto& [n, q] : qps_)
      if (wants_work(*q)) return true;
    return false;
  }
  /// The next frame port `port` transmits (moved out), or nullopt.
  /// Responses (ACKs, NAKs, READ responses) go before requests, so a port busy with requests
  /// does not delay the acknowledgements its peers wait for.
  /// Coalesced ACKs (device_config::ack_delay) leave behind the short burst of requests that
  /// releases them: a peer that learns of its completion from one then finds the requests
  /// already there.
  std::optional<frame_bytes> take_frame(std::size_t port) {
    port_state& p = ports_[port];
    if (acks_held(p)) return std::nullopt;
    const bool behind = !p.urgent && cfg_.ack_delay && !p.tx.empty() && p.tx.size() <= short_burst;
    auto& q = !p.responses.empty() && !behind ? p.responses : p.tx;
    if (q.empty()) return std::nullopt;
    if (&q == &p.tx && !p.responses.empty()) p.released = true;
    frame_bytes f = std::move(q.front());
    q.pop_front();
    return f;
  }
  /// Frames port `port` holds for the fabric.
  std::size_t pending_frames(std::size_t port) const { return ports_[port].tx.size() + ports_[port].responses.size(); }
  /// Returns a frame buffer to the device's pool (after the fabric delivered it).
  void recycle(frame_bytes&& b) {
    if (pool_.size() < 256) pool_.push_back(std::move(b));
  }
  /// A frame arrived on port `port` at `now`: it is validated and handed to its QP now.
  void receive(std::size_t port, std::span<const std::byte> frame, time_ns now) {
    now_ = std::max(now_, now);
    ++stats_.frames_in;
    stats_.bytes_in += frame.size();
    if (port >= ports_.size()) return;
    fetch_receives_rung();  // a NIC reads the receives posted so far when a message arrives
    port_state& ps = ports_[port];
    if (ps.cfg.frame == framing::roce) receive_roce(ps, frame);
    else receive_cell(ps, frame);
  }

  /// A QP's state, for tests and tools.
  struct qp_view {
    qp_state state;
    std::uint64_t retransmits, page_faults, timeouts;
  };
  result<qp_view> view(std::uint32_t qpn) const {
    const auto it = qps_.find(qpn);
    if (it == qps_.end()) return errc::not_found;
    const qp_state_t& q = *it->second;
    qp_view v{q.state, 0, 0, 0};
    if (q.req) v.retransmits = q.req->stats().retransmitted, v.page_faults = q.req->stats().page_faults, v.timeouts = q.req->stats().timeouts;
    if (q.dci) {
      const auto& s = q.dci->transport().stats();
      v.retransmits = s.retransmitted, v.page_faults = s.page_faults, v.timeouts = s.timeouts;
    }
    return v;
  }

 private:
  using requester_t = flow::requester<machine_sq>;
  using responder_t = flow::responder<max_rd_atomic>;
  using dci_t = flow::dc_initiator<machine_sq, machine_pending>;
  using dct_t = flow::dc_target<max_rd_atomic>;
  static constexpr std::size_t sink_size = 64;
  using actions_t = flow::action_list<flow::qp_action_t, sink_size>;
  /// An action list for one machine call, reused (constructing one zeroes its whole storage):
  /// nested calls (an action that leads to another machine call) take the next one.
  class scratch {
   public:
    explicit scratch(device& d) : d_(d) {
      if (d.lists_.size() == d.depth_) d.lists_.push_back(std::make_unique<actions_t>());
      list_ = d.lists_[d.depth_++].get();
      list_->out.clear();
    }
    ~scratch() { --d_.depth_; }
    scratch(const scratch&) = delete;
    scratch& operator=(const scratch&) = delete;
    flow::qp_sink& out() { return list_->out; }

   private:
    device& d_;
    actions_t* list_;
  };

  struct port_state {
    port_config cfg{};
    std::deque<frame_bytes> tx{};         ///< requests (the QPs' sends, the device's own WRITEs)
    std::deque<frame_bytes> responses{};  ///< ACKs, NAKs, READ and atomic responses: sent first
    time_ns responses_since = 0;          ///< when `responses` last became non-empty
    bool urgent = false;                  ///< `responses` holds more than plain ACKs
    bool released = false;                ///< a request left since: the held ACKs go too
    std::unique_ptr<cell::reassembler> reasm{};
  };
  struct cq_state {
    cq_memory* mem = nullptr;
    std::uint32_t producer = 0;
    bool error = false;
    std::function<void(std::uint32_t)> armed{};
  };
  struct srq_state {
    std::uint32_t pd = 0;
    rq_memory* mem = nullptr;
    std::uint32_t limit = 0;  ///< armed limit (0: not armed)
    std::uint32_t fetched = 0;  ///< descriptors fetched from the ring
    std::deque<recv_wqe> ready{};
  };
  struct pending_fault {
    std::uint32_t key = 0;
    std::uint64_t va = 0, length = 0;
    time_ns ready_at = 0;
  };

  using recv_record_t = detail::recv_record;
  /// A session QP's sides: its group's picker, its resequencer, and the frames it holds (a
  /// handle is an index; empty = free).
  struct session_qp {
    flow::session_group<max_sessions> out;
    flow::session_receiver<max_sessions, session_window> in;
    std::vector<frame_bytes> held;
  };
  struct qp_state_t {
    std::uint32_t qpn = 0;
    qp_init_attr init{};
    qp_state state = qp_state::reset;
    qp_attr attr{};
    std::optional<requester_t> req{};
    std::optional<responder_t> resp{};
    std::optional<dci_t> dci{};
    std::optional<dct_t> dct{};
    std::uint32_t sq_fetched = 0, rq_fetched = 0;  ///< ring descriptors fetched
    std::uint32_t sq_retired = 0;                  ///< ring slots given back
    std::uint64_t next_seq = 1;                    ///< the next send record's requester id
    std::deque<detail::send_record> sends{};
    std::deque<recv_record_t> recvs{};             ///< own RQ: fetched, in order; SRQ: bound ones
    ib::roce_packet base{};                        ///< RoCE: the addresses of RC / UC packets
    bool base_ready = false;
    std::uint64_t uc_ud_errors = 0;
    bool length_failed = false;  ///< the last receive_fits() refused (a local length error)
    bool buffer_failed = false;  ///< ... found the receive's buffer unusable (a local protection error)
    bool drained_told = false;   ///< SQD: sq_drained was raised
    bool closed = false;         ///< destroyed, lingering (device_config::linger)
    time_ns linger = 0, last_heard = 0;
    std::optional<wc_status> connect_error{};  ///< DCI: why its last connect failed
    bool halted = false;  ///< a fetched descriptor failed locally: fetch no more until it completes
    std::uint32_t dc_ah = 0;  ///< DCI: the AH of the target it is connected to
    device* dev = nullptr;
    std::unique_ptr<session_qp> sessions{};  ///< set_qp_sessions
  };

  // -- lookups -----------------------------------------------------------------------------
  bool has_pd(std::uint32_t pd) const { return std::find(pds_.begin(), pds_.end(), pd) != pds_.end(); }
  bool has_srq(std::uint32_t srq) const { return srq < srqs_.size() && srqs_[srq] != nullptr; }
  bool has_gid(std::uint8_t port, std::uint8_t index) const { return port < ports_.size() && index <= ports_[port].cfg.extra_gids.size(); }
  static bool is_own_gid(const port_state& ps, const std::array<std::uint8_t, 16>& g) {
    return g == ps.cfg.gid || std::find(ps.cfg.extra_gids.begin(), ps.cfg.extra_gids.end(), g) != ps.cfg.extra_gids.end();
  }
  void check_srq_limits() {
    for (std::size_t i = 0; i < srqs_.size(); ++i)
      if (srqs_[i] && srqs_[i]->limit != 0 && *srq_outstanding(static_cast<std::uint32_t>(i)) < srqs_[i]->limit) {
        srqs_[i]->limit = 0;
        events_.push_back({event_type::srq_limit, static_cast<std::uint32_t>(i)});
      }
  }
  /// How long a QP being destroyed lingers (device_config::linger), 0: not at all.
  time_ns linger_of(const qp_state_t& q) const {
    if (cfg_.linger == 0 || q.init.type != qp_type::rc || !q.resp || (q.state != qp_state::rts && q.state != qp_state::sqd)) return 0;
    if (q.attr.av.port < ports_.size() && is_own_gid(ports_[q.attr.av.port], q.attr.av.dgid)) return 0;  // its peer is here
    const time_ns ack_timeout = q.attr.timeout ? time_ns{4096} << q.attr.timeout : cfg_.linger;
    return std::min(cfg_.linger, 2 * ack_timeout);
  }
  /// The QP of that number; a lingering one only when `closed_too`.
  qp_state_t* find_qp(std::uint32_t qpn, bool closed_too = false) {
    const auto it = qps_.find(qpn);
    return it == qps_.end() || (it->second->closed && !closed_too) ? nullptr : it->second.get();
  }
  const qp_state_t* find_qp(std::uint32_t qpn) const {
    const auto it = qps_.find(qpn);
    return it == qps_.end() || it->second->closed ? nullptr : it->second.get();
  }
  std::uint32_t port_path_mtu(std::size_t port) const { return ports_[port].cfg.mtu; }
  /// The MTU a QP's machines work with: the path MTU, in both framings (a cell packet is one
  /// transport packet, segmented into cells). UD has no path MTU attribute: its messages are
  /// bounded by its port's MTU (IBTA 9.7.1: a UD message is one packet; mlx5 and rxe likewise).
  std::uint32_t machine_mtu(const qp_state_t& q) const {
    return q.init.type == qp_type::ud && q.attr.port < ports_.size() ? port_path_mtu(q.attr.port) : q.attr.path_mtu;
  }
  bool cell_port(const qp_state_t& q) const {
    const std::uint8_t port = q.init.type == qp_type::dct || q.init.type == qp_type::dci || q.init.type == qp_type::ud ? q.attr.port : q.attr.av.port;
    return port < ports_.size() && ports_[port].cfg.frame == framing::cell;
  }

  // -- modify_qp ----------------------------------------------------------------------------
  static void apply_attrs(qp_state_t& q, const qp_attr& a, qp_attr_mask mask) {
    using M = qp_attr_mask;
    qp_attr& t = q.attr;
    if (any(mask & M::access_flags)) t.access_flags = a.access_flags;
    if (any(mask & M::pkey_index)) t.pkey_index = a.pkey_index;
    if (any(mask & M::port)) t.port = a.port;
    if (any(mask & M::qkey)) t.qkey = a.qkey;
    if (any(mask & M::av)) t.av = a.av, q.base_ready = false;
    if (any(mask & M::path_mtu)) t.path_mtu = a.path_mtu;
    if (any(mask & M::timeout)) t.timeout = a.timeout;
    if (any(mask & M::retry_cnt)) t.retry_cnt = a.retry_cnt;
    if (any(mask & M::rnr_retry)) t.rnr_retry = a.rnr_retry;
    if (any(mask & M::rq_psn)) t.rq_psn = a.rq_psn;
    if (any(mask & M::sq_psn)) t.sq_psn = a.sq_psn;
    if (any(mask & M::max_qp_rd_atomic)) t.max_rd_atomic = a.max_rd_atomic;
    if (any(mask & M::max_dest_rd_atomic)) t.max_dest_rd_atomic = a.max_dest_rd_atomic;
    if (any(mask & M::min_rnr_timer)) t.min_rnr_timer = a.min_rnr_timer;
    if (any(mask & M::dest_qpn)) t.dest_qp_num = a.dest_qp_num;
  }
  static flow::service service_of(qp_type t) {
    switch (t) {
      case qp_type::rc: return flow::service::rc;
      case qp_type::uc: return flow::service::uc;
      case qp_type::ud: return flow::service::ud;
      default: return flow::service::dc;
    }
  }
  /// IBTA local ACK timeout code to ns (0: none).
  static time_ns ack_timeout_ns(std::uint8_t code) {
    if (code == 0) return ~time_ns{0} / 4;
    return time_ns{4096} << code;
  }
  flow::memory_port memory_port_of(qp_state_t& q) {
    q.dev = this;
    return {.ctx = &q, .check = &device::port_check, .atomic = &device::port_atomic, .receive_fits = &device::port_fits};
  }
  void enter(qp_state_t& q, qp_state to) {
    const qp_state from = q.state;
    q.state = to;
    const flow::service svc = service_of(q.init.type);
    const bool cells = cell_port(q);
    if (to == qp_state::reset) {
      q.req.reset(), q.resp.reset(), q.dci.reset(), q.dct.reset();
      q.sends.clear(), q.recvs.clear();
      q.halted = false;
      return;
    }
    if (to == qp_state::err) {
      to_error(q);
      return;
    }
    if (to == qp_state::rtr && from == qp_state::init) {
      const std::uint32_t mtu = machine_mtu(q);
      const flow::responder_config rc{.svc = svc, .mtu = mtu, .start_psn = q.attr.rq_psn, .on_fault = cfg_.on_fault,
                                      .qp = q.qpn, .peer_qp = q.attr.dest_qp_num,
                                      .min_rnr_timer_us = ib::rnr_to_us(q.attr.min_rnr_timer),
                                      .exact_fault_delay = cells, .check_q_key = svc == flow::service::ud, .q_key = q.attr.qkey};
      if (q.init.type == qp_type::dct) {
        q.dct.emplace(typename dct_t::config{.dct = q.qpn, .access_key = q.init.dct_access_key, .resp = rc}, memory_port_of(q));
        q.dct->post_receive(receives_ready(q));
      } else if (q.init.type != qp_type::dci) {
        q.resp.emplace(rc, memory_port_of(q));
        q.resp->post_receive(receives_ready(q));
      }
    }
    if (to == qp_state::sqd) q.drained_told = false;
    if (to == qp_state::rts && (from == qp_state::rtr || from == qp_state::sqe)) {
      const flow::requester_config rc{.svc = svc, .mtu = machine_mtu(q), .dest_qp = q.attr.dest_qp_num,
                                      .start_psn = q.attr.sq_psn, .window = cfg_.window, .timeout = ack_timeout_ns(q.attr.timeout),
                                      .retry_cnt = q.attr.retry_cnt, .retry_forever = cfg_.retry_forever,
                                      .rnr_retry = q.attr.rnr_retry};
      if (q.init.type == qp_type::dci) q.dci.emplace(typename dci_t::config{.dci = q.qpn, .req = rc});
      else q.req.emplace(rc);
    }
  }
  /// Moves a QP to ERR: every outstanding work request completes flushed, in order.
  void to_error(qp_state_t& q) {
    q.state = qp_state::err;
    // The machines stop; the completion unit flushes what they held, in order.
    q.req.reset(), q.resp.reset(), q.dci.reset(), q.dct.reset();
    for (auto& r : q.sends)
      if (!r.done) r.done = true, r.status = wc_status::flushed;
    for (auto& r : q.recvs)
      if (!r.done) r.done = true, r.status = wc_status::flushed;
    fetch_receives(q);  // the rest of the ring flushes too
    fetch_sends(q);
    for (auto& r : q.recvs)
      if (!r.done) r.done = true, r.status = wc_status::flushed;
    flush_completions(q);
  }

  // -- doorbells and fetch ---------------------------------------------------------------------
  /// The receive side of fetch(): receives posted since the last fetch (their QPs' doorbells
  /// stay rung for the send side, which progress() fetches).
  void fetch_receives_rung() {
    for (std::uint32_t s : std::exchange(srq_doorbells_, {})) fetch_srq(*srqs_[s]);
    for (std::uint32_t n : doorbells_)
      if (qp_state_t* q = find_qp(n)) {
        const std::uint32_t added = fetch_receives(*q);
        if (added && q->resp) q->resp->post_receive(added);
        if (added && q->dct) q->dct->post_receive(added);
      }
  }
  void fetch() {
    for (std::uint32_t s : std::exchange(srq_doorbells_, {})) fetch_srq(*srqs_[s]);
    std::vector<std::uint32_t> rung = std::exchange(doorbells_, {});
    std::sort(rung.begin(), rung.end());
    rung.erase(std::unique(rung.begin(), rung.end()), rung.end());
    for (std::uint32_t n : rung)
      if (qp_state_t* q = find_qp(n)) {
        const std::uint32_t added = fetch_receives(*q);
        if (added && q->resp) q->resp->post_receive(added);
        if (added && q->dct) q->dct->post_receive(added);
        fetch_sends(*q);
      }
    // QPs whose machines had no room at their doorbell fetch as room frees
    for (auto& [n, q] : qps_)
      if (q->init.sq && q->sq_fetched != q->init.sq->doorbell().producer.load(std::memory_order_acquire)) fetch_sends(*q);
  }
  void fetch_srq(srq_state& s) {
    const std::uint32_t p = s.mem->doorbell().producer.load(std::memory_order_acquire);
    while (s.fetched != p) {
      s.ready.push_back(s.mem->ring()[s.fetched & (s.mem->depth() - 1)]);
      ++s.fetched;
    }
  }
  /// Fetches posted receive descriptors into the QP's list; returns how many are usable.
  std::uint32_t fetch_receives(qp_state_t& q) {
    if (!q.init.rq || q.init.srq) return 0;
    const std::uint32_t p = q.init.rq->doorbell().producer.load(std::memory_order_acquire);
    std::uint32_t n = 0;
    while (q.rq_fetched != p) {
      recv_record_t r;
      r.wqe = q.init.rq->ring()[q.rq_fetched & (q.init.rq->depth() - 1)];
      ++q.rq_fetched;
      if (!receive_sges_ok(q, r.wqe)) r.done = true, r.status = wc_status::local_protection_error;
      else ++n;
      q.recvs.push_back(r);
    }
    return n;
  }
  /// Receives the machines may count on now (fetched, not yet consumed).
  std::uint32_t receives_ready(const qp_state_t& q) const {
    if (q.init.srq) return static_cast<std::uint32_t>(srqs_[*q.init.srq]->ready.size());
    std::uint32_t n = 0;
    for (const auto& r : q.recvs) n += !r.bound && !r.done;
    return n;
  }
  bool receive_sges_ok(const qp_state_t& q, const recv_wqe& w) const {
    if (w.num_sge > max_sge) return false;
    for (std::size_t i = 0; i < w.num_sge; ++i)
      // (an absent page of an on-demand key is served when the data is placed: local_visit)
      if (const errc e = mem_.check(w.sg[i].lkey, w.sg[i].addr, w.sg[i].length, {q.init.pd, access::local_write});
          e != errc{} && e != errc::page_fault)
        return false;
    return true;
  }
  static std::uint32_t sge_bytes(const recv_wqe& w) {
    std::uint32_t n = 0;
    for (std::size_t i = 0; i < w.num_sge && i < max_sge; ++i) n += w.sg[i].length;
    return n;
  }

  /// Fetches send descriptors into the QP's machine while it has room.
  void fetch_sends(qp_state_t& q) {
    if (q.closed) return;
    if (q.state != qp_state::rts && q.state != qp_state::err && q.state != qp_state::sqe) return;  // SQD: not now
    sq_memory& ring = *q.init.sq;
    const std::uint32_t p = ring.doorbell().producer.load(std::memory_order_acquire);
    while (q.sq_fetched != p) {
      if (q.state == qp_state::rts && (q.halted || !machine_room(q))) return;
      const send_wqe& w = ring.ring()[q.sq_fetched & (ring.depth() - 1)];
      ++q.sq_fetched;
      accept_send(q, w);
    }
  }
  bool machine_room(const qp_state_t& q) const {
    if (q.req) return q.req->queue_room() > 0;
    if (q.dci) return q.dci->transport().queue_room() > dci_t::connect_slots && q.dci->pending() < machine_pending;
    return false;
  }
  /// Validates a fetched descriptor, records it, and gives it to the machine.
  void accept_send(qp_state_t& q, const send_wqe& w) {
    detail::send_record r;
    r.seq = q.next_seq++;
    r.wr_id = w.wr_id;
    r.wqe = w;
    r.signaled = (w.flags & send_signaled) || q.init.sq_sig_all;
    const auto op = static_cast<wr_opcode>(w.opcode);
    const bool known_op = is_known(op);
    r.op = known_op ? wc_opcode_of(flow_op(op)) : wc_opcode::send;
    q.sends.push_back(r);
    detail::send_record& rec = q.sends.back();
    if (q.state == qp_state::err) {
      rec.done = true, rec.status = wc_status::flushed;
      return;
    }
    const errc local = check_send(q, w);
    if (local != errc{}) {
      // The device stops at this descriptor; once what was before it completes, it completes
      // with the error and the send queue fails (flush_completions).
      rec.done = true;
      rec.fatal = true;
      q.halted = true;
      rec.status = local == errc::invalid_argument ? wc_status::local_qp_operation_error
                   : local == errc::out_of_range    ? wc_status::local_length_error
                                                    : wc_status::local_protection_error;
      rec.vendor_err = static_cast<std::uint32_t>(local);
      return;
    }
    flow::work_request wr{.id = rec.seq, .op = flow_op(op), .length = send_length(w), .remote_va = w.remote_addr,
                          .rkey = w.rkey, .imm = w.imm, .swap = w.swap, .compare = w.compare_add,
                          .dest_qp = w.remote_qpn, .dc_key = w.dc_key, .q_key = w.remote_qkey};
    if (op == wr_opcode::atomic_fetch_and_add) wr.swap = w.compare_add;  // the machines carry the addend in swap
    if (op == wr_opcode::read_as_write) wr.sink_va = w.sg[0].addr, wr.sink_rkey = w.sg[0].lkey;
    if (op == wr_opcode::atomic_cmp_and_swp || op == wr_opcode::atomic_fetch_and_add) wr.length = 8;
    flow::step_result s{};
    const std::uint64_t seq = rec.seq;
    run_sender(q, {}, [&](flow::qp_sink& out) {
      if (q.dci) {
        s = q.dci->post(wr, {.dct = w.remote_qpn, .access_key = w.dc_key}, now_, out);
      } else {
        s = q.req->post(wr, now_, out);
      }
    });
    if (!s.ok() && s.error != flow::errc::qp_in_error) {
      if (detail::send_record* r2 = send_of(q, seq); r2 && !r2->done) {
        r2->done = true, r2->fatal = true, r2->status = wc_status::local_qp_operation_error;
        r2->vendor_err = static_cast<std::uint32_t>(s.error);
        q.halted = true;
      }
    }
  }
  static std::uint32_t send_length(const send_wqe& w) {
    if (w.flags & send_inline) return w.inline_len;
    std::uint64_t n = 0;
    for (std::size_t i = 0; i < w.num_sge && i < max_sge; ++i) n += w.sg[i].length;
    return static_cast<std::uint32_t>(std::min<std::uint64_t>(n, 0xFFFFFFFFu));
  }
  /// Local checks of a send descriptor: its opcode on this QP, its scatter/gather list.
  errc check_send(const qp_state_t& q, const send_wqe& w) const {
    const auto op = static_cast<wr_opcode>(w.opcode);
    if (!is_known(op)) return errc::invalid_argument;
    if (!flow::supports(service_of(q.init.type), flow_op(op))) return errc::invalid_argument;
    if ((w.flags & send_inline) && (w.inline_len > max_inline || op == wr_opcode::rdma_read ||
                                    op == wr_opcode::atomic_cmp_and_swp || op == wr_opcode::atomic_fetch_and_add))
      return errc::invalid_argument;
    if (!(w.flags & send_inline) && w.num_sge > max_sge) return errc::invalid_argument;
    if ((q.init.type == qp_type::ud || q.init.type == qp_type::dci) && w.ah >= ahs_.size()) return errc::invalid_argument;
    if (q.sessions && op != wr_opcode::send) return errc::invalid_argument;  // the immediate carries the sequence
    const bool atomic = op == wr_opcode::atomic_cmp_and_swp || op == wr_opcode::atomic_fetch_and_add;
    if (atomic && (send_length(w) != 8 || w.num_sge != 1)) return errc::invalid_argument;
    if (atomic && w.remote_addr % 8) return errc::misaligned;
    // READ_AS_WRITE: one local entry, the sink the peer writes into (remote write).
    if (op == wr_opcode::read_as_write && ((w.flags & send_inline) || w.num_sge != 1)) return errc::invalid_argument;
    if (op == wr_opcode::read_as_write)
      if (const errc e = mem_.check(w.sg[0].lkey, w.sg[0].addr, w.sg[0].length, {q.init.pd, access::remote_write | access::local_write});
          e != errc{} && e != errc::page_fault)
        return e;
    if (w.flags & send_inline) return {};
    // READ and atomics write their results locally: local write is needed
    const access need = op == wr_opcode::rdma_read || atomic ? access::local_write : access::none;
    for (std::size_t i = 0; i < w.num_sge; ++i)
      if (const errc e = mem_.check(w.sg[i].lkey, w.sg[i].addr, w.sg[i].length, {q.init.pd, need}); e != errc{} && e != errc::page_fault)
        return e;
    return {};
  }
  /// A send-queue error: RC and DC go to ERR; UC and UD to SQE (the receive side goes on).
  void send_error(qp_state_t& q) {
    if (q.init.type == qp_type::uc || q.init.type == qp_type::ud) {
      to_send_error(q);
      return;
    }
    to_error(q);
  }

  /// UC / UD: the send queue stops (SQE); what it held completes flushed; receives go on.
  void to_send_error(qp_state_t& q) {
    q.state = qp_state::sqe;
    if (q.req) q.attr.sq_psn = q.req->next_psn();
    q.req.reset();
    for (auto& r : q.sends)
      if (!r.done) r.done = true, r.status = wc_status::flushed;
  }

  // -- timers, pumping -------------------------------------------------------------------------
  /// The send-side transport machine of q (RC, UC, UD: the requester; DCI: its requester).
  static const requester_t* sender(const qp_state_t& q) { return q.req ? &*q.req : q.dci ? &q.dci->transport() : nullptr; }
  /// Runs f(sink) on q's send side, counts what it retransmitted and paused, then carries out
  /// its actions (payload: the packet it answered).
  template <class F>
  void run_sender(qp_state_t& q, std::span<const std::byte> payload, F&& f) {
    scratch a(*this);
    const requester_t* r = sender(q);
    const auto before = r ? r->stats() : typename requester_t::counters{};
    f(a.out());
    if (const requester_t* after = sender(q)) {
      stats_.retransmits += after->stats().retransmitted - before.retransmitted;
      if (after->stats().page_faults != before.page_faults) {
        stats_.pauses += after->stats().page_faults - before.page_faults;
        if (const auto until = after->deadline(flow::timer_kind::wait); until && *until > now_)
          stats_.retransmits_avoided += (*until - now_) / std::max<time_ns>(after->config().timeout, 1);
      }
    }
    handle(q, a.out(), payload);
  }
  void fire_timers(qp_state_t& q) {
    for (const auto k : {flow::timer_kind::retransmit, flow::timer_kind::wait}) {
      const requester_t* r = sender(q);
      if (!r) return;
      const auto d = r->deadline(k);
      if (!d || *d > now_) continue;
      run_sender(q, {}, [&](flow::qp_sink& out) {
        if (q.req) q.req->on_timer(k, now_, out);
        else q.dci->on_timer(k, now_, out);
      });
    }
  }
  bool wants_work(const qp_state_t& q) const {
    if (q.req && q.req->wants_to_send()) return true;
    if (q.resp && q.resp->wants_to_send()) return true;
    if (q.dci && q.dci->wants_to_send()) return true;
    if (q.dct && q.dct->wants_to_send()) return true;
    return (!q.sends.empty() && q.sends.front().done) || (!q.recvs.empty() && q.recvs.front().done);
  }
  bool tx_room(const qp_state_t& q) const {
    const std::size_t port = q.init.type == qp_type::dct || q.init.type == qp_type::dci || q.init.type == qp_type::ud ? q.attr.port : q.attr.av.port;
    return port < ports_.size() && ports_[port].tx.size() < cfg_.tx_queue;
  }
  void pump(qp_state_t& q) {
    for (int guard = 0; guard < 1024 && tx_room(q); ++guard) {
      if ((q.resp && q.resp->wants_to_send()) || (q.dct && q.dct->wants_to_send())) {
        scratch a(*this);
        if (q.resp) q.resp->pump(a.out());
        else q.dct->pump(a.out());
        handle(q, a.out(), {});
      } else if ((q.req && q.req->wants_to_send()) || (q.dci && q.dci->wants_to_send())) {
        run_sender(q, {}, [&](flow::qp_sink& out) {
          if (q.req) q.req->pump(now_, out);
          else q.dci->pump(now_, out);
        });
      } else {
        break;
      }
    }
    fetch_sends(q);
    if (q.state == qp_state::sqd && !q.drained_told && (!sender(q) || sender(q)->quiescent())) {
      q.drained_told = true;
      events_.push_back({event_type::sq_drained, q.qpn});
    }
  }

  // -- actions ---------------------------------------------------------------------------------
  /// Carries out the machines' actions; `payload` is the packet they answered (its bytes).
  void handle(qp_state_t& q, const flow::qp_sink& out, std::span<const std::byte> payload) {
    for (const auto& act : out) {
      if (const auto* t = std::get_if<flow::qp_action::transmit>(&act)) {
        transmit(q, t->pkt);
      } else if (const auto* c = std::get_if<flow::qp_action::complete>(&act)) {
        complete_send(q, *c);
      } else if (const auto* p = std::get_if<flow::qp_action::place>(&act)) {
        place(q, *p, payload);
      } else if (const auto* r = std::get_if<flow::qp_action::receive>(&act)) {
        complete_receive(q, *r);
      } else if (const auto* d = std::get_if<flow::qp_action::read_data>(&act)) {
        place_read(q, *d, payload);
      } else if (const auto* sv = std::get_if<flow::qp_action::serve>(&act)) {
        serve(q, *sv);
      }
    }
  }
  /// A peer's READ_AS_WRITE: the device's own RDMA WRITE of the data from this QP's send queue
  /// (after what is queued there); its completion tells the responder (complete_send).
  void serve(qp_state_t& q, const flow::qp_action::serve& sv) {
    detail::send_record r;
    r.seq = q.next_seq++;
    r.wqe.opcode = static_cast<std::uint8_t>(wr_opcode::rdma_write);
    r.wqe.num_sge = 1;
    r.wqe.sg[0] = {sv.va, sv.dmalen, sv.rkey};  // the responder checked (rkey, va, dmalen) for remote read
    r.wqe.remote_addr = sv.sink_va;
    r.wqe.rkey = sv.sink_rkey;
    r.op = wc_opcode::rdma_write;
    r.signaled = false;
    r.serves = sv.psn;
    q.sends.push_back(r);
    const flow::work_request wr{.id = r.seq, .op = flow::wr_op::write, .length = sv.dmalen, .remote_va = sv.sink_va, .rkey = sv.sink_rkey};
    flow::step_result s{};
    if (q.req && q.req->queue_room() > 0) run_sender(q, {}, [&](flow::qp_sink& out) { s = q.req->post(wr, now_, out); });
    else s = {-1, flow::errc::queue_full};
    if (!s.ok())  // no send queue to serve it from (a QP not in RTS, or a full machine): refused
      if (detail::send_record* rec = send_of(q, r.seq); rec && !rec->done) {
        rec->done = true;
        rec->status = wc_status::local_qp_operation_error;
        served(q, sv.psn, false);
      }
  }
  /// Tells the responder its READ_AS_WRITE of psn was served (or not) and sends what waited.
  void served(qp_state_t& q, std::uint32_t psn, bool ok) {
    if (!q.resp) return;
    q.resp->served(psn, ok);
    scratch a(*this);
    q.resp->pump(a.out());
    handle(q, a.out(), {});
  }
  detail::send_record* send_of(qp_state_t& q, std::uint64_t seq) {
    if (q.sends.empty() || seq < q.sends.front().seq) return nullptr;
    const std::uint64_t i = seq - q.sends.front().seq;
    return i < q.sends.size() ? &q.sends[i] : nullptr;
  }
  void complete_send(qp_state_t& q, const flow::qp_action::complete& c) {
    if (c.wr_id >= flow::dc_internal_id) {  // a DCI's own connect / disconnect
      if (c.status != flow::wc_status::success && c.status != flow::wc_status::flushed) q.connect_error = status_of(c.status);
      return;
    }
    detail::send_record* r = send_of(q, c.wr_id);
    if (!r || r->done) return;
    r->done = true;
    r->status = status_of(c.status);
    if (r->serves) {  // the device's own WRITE for a peer's READ_AS_WRITE
      served(q, *r->serves, r->status == wc_status::success);
      if (r->status != wc_status::success && r->status != wc_status::flushed) to_error(q);
      return;
    }
    // The request a failed connect was for reports the connect's error, not a flush.
    if (r->status == wc_status::flushed && q.connect_error) r->status = *std::exchange(q.connect_error, std::nullopt);
    if (r->status == wc_status::success && (c.op == flow::wr_op::compare_swap || c.op == flow::wr_op::fetch_add)) {
      std::byte v[8];
      wire::store_le64(v, c.orig);
      std::size_t done = 0;
      if (!gather(q, r->wqe, 0, 8, access::local_write, [&](std::byte* h, std::size_t n) {
            std::memcpy(h, v + done, n);
            done += n;
          }))
        r->status = wc_status::local_protection_error;
    }
    if (r->status != wc_status::success && r->status != wc_status::flushed) {
      if (q.init.type == qp_type::uc || q.init.type == qp_type::ud) to_send_error(q);
      else to_error(q);
    }
  }
  /// Visits a local access (an SGE's piece) if its key still allows it; a page fault on a local
  /// on-demand key is served at once (the device's own access). False when refused.
  template <class F>
  bool local_visit(const qp_state_t& q, const sge& s, std::uint64_t offset, std::uint32_t n, access need, F&& f) {
    fault_info fi{};
    errc e = mem_.check(s.lkey, s.addr + offset, n, {q.init.pd, need}, &fi);
    if (e == errc::page_fault) {
      ++stats_.page_faults;
      ++stats_.faults_served;
      mem_.make_resident(fi.key, fi.va, fi.length);
      e = mem_.check(s.lkey, s.addr + offset, n, {q.init.pd, need});
    }
    if (e != errc{}) return false;
    mem_.visit(s.lkey, s.addr + offset, n, f);
    return true;
  }
  /// Visits bytes [offset, offset + length) of a scatter/gather list (or inline data) as host
  /// segments. False when a key no longer allows it (nothing after that piece is visited).
  template <class F>
  bool gather(const qp_state_t& q, const send_wqe& w, std::uint32_t offset, std::uint32_t length, access need, F&& f) {
    if (w.flags & send_inline) {
      if (length) f(const_cast<std::byte*>(w.inline_data.data()) + offset, length);
      return true;
    }
    return walk(q, std::span<const sge>(w.sg.data(), std::min<std::size_t>(w.num_sge, max_sge)), offset, length, need, f);
  }
  template <class F>
  bool walk(const qp_state_t& q, std::span<const sge> list, std::uint32_t offset, std::uint32_t length, access need, F& f) {
    for (const sge& s : list) {
      if (length == 0) break;
      if (offset >= s.length) {
        offset -= s.length;
        continue;
      }
      const std::uint32_t n = std::min(length, s.length - offset);
      if (!local_visit(q, s, offset, n, need, f)) return false;
      offset = 0;
      length -= n;
    }
    return length == 0;
  }
  void place_read(qp_state_t& q, const flow::qp_action::read_data& d, std::span<const std::byte> payload) {
    detail::send_record* r = send_of(q, d.wr_id);
    if (!r || payload.size() < d.length) return;
    std::size_t done = 0;
    const bool ok = gather(q, r->wqe, d.offset, d.length, access::local_write, [&](std::byte* p, std::size_t n) {
      std::memcpy(p, payload.data() + done, n);
      done += n;
    });
    if (!ok) r->vendor_err = static_cast<std::uint32_t>(errc::no_access_right), r->status = wc_status::local_protection_error;
  }
  recv_record_t* bind_receive(qp_state_t& q, std::uint32_t msn) {
    for (auto& r : q.recvs)
      if (r.bound && !r.done && r.msn == msn) return &r;
    if (q.init.srq) {
      srq_state& s = *srqs_[*q.init.srq];
      if (s.ready.empty()) return nullptr;
      recv_record_t r;
      r.wqe = s.ready.front();
      s.ready.pop_front();
      ++s.mem->doorbell().retired;  // an SRQ slot frees when it is consumed
      if (!receive_sges_ok(q, r.wqe)) r.status = wc_status::local_protection_error;
      r.bound = true;
      r.msn = msn;
      q.recvs.push_back(r);
      return &q.recvs.back();
    }
    for (auto& r : q.recvs)
      if (!r.bound && !r.done) {
        r.bound = true;
        r.msn = msn;
        return &r;
      }
    return nullptr;
  }
  void place(qp_state_t& q, const flow::qp_action::place& p, std::span<const std::byte> payload) {
    if (payload.size() < p.length) return;
    const auto data = payload.first(p.length);
    if (!p.to_receive) {
      if (preplaced_ && *std::exchange(preplaced_, std::nullopt) == p) return;  // placed while its ICRC was computed
      mem_.write(p.rkey, p.va, data);
      return;
    }
    recv_record_t* r = bind_receive(q, p.msn);
    if (!r || r->status != wc_status::success) return;
    const std::uint32_t at = p.offset + (q.init.type == qp_type::ud ? grh_size : 0);
    std::size_t done = 0;
    auto copy = [&](std::byte* h, std::size_t k) {
      std::memcpy(h, data.data() + done, k);
      done += k;
    };
    if (!walk(q, std::span<const sge>(r->wqe.sg.data(), std::min<std::size_t>(r->wqe.num_sge, max_sge)), at, p.length,
              access::local_write, copy))
      r->status = wc_status::local_protection_error;
  }
  void complete_receive(qp_state_t& q, const flow::qp_action::receive& rc) {
    recv_record_t* r = bind_receive(q, rc.msn);
    if (!r) return;
    r->done = true;
    r->byte_len = rc.bytes + (q.init.type == qp_type::ud ? grh_size : 0);
    r->with_imm = rc.with_imm;
    r->imm = rc.imm;
    r->op = rc.with_imm && current_is_write_ ? wc_opcode::recv_rdma_with_imm : wc_opcode::recv;
    r->src_qp = current_src_qp_;
    // UD: the GRH space holds the packet's network header, as verbs hands it over (rxe, mlx5):
    // IPv6, its 40-byte header; IPv4, 20 zero bytes and its 20-byte header (options left out).
    if (q.init.type == qp_type::ud && current_grh_) {
      std::size_t done = 0;
      auto copy = [&](std::byte* h, std::size_t k) {
        std::memcpy(h, current_grh_->data() + done, k);
        done += k;
      };
      r->grh = r->status == wc_status::success &&
               walk(q, std::span<const sge>(r->wqe.sg.data(), std::min<std::size_t>(r->wqe.num_sge, max_sge)), 0, grh_size,
                    access::local_write, copy);
    }
  }

  // -- memory port (the responder's view of memory) -------------------------------------------
  static flow::access_result port_check(void* ctx, std::uint32_t rkey, std::uint64_t va, std::uint32_t len, flow::access_kind k) {
    auto& q = *static_cast<qp_state_t*>(ctx);
    device& d = *q.dev;
    const access need = k == flow::access_kind::read ? access::remote_read
                        : k == flow::access_kind::write ? access::remote_write
                                                        : access::remote_atomic;
    // The QP's own remote rights come first (IBTA: the QP's access flags), then the key's.
    if (!allows(q.attr.access_flags, need) && len != 0) return {flow::access_result::access_error, 0};
    fault_info f{};
    const errc e = d.mem_.check(rkey, va, len, {q.init.pd, need}, &f);
    if (e == errc::page_fault) return {flow::access_result::page_fault, d.probing_ ? 0 : d.raise_fault(f)};
    if (e != errc{}) return {flow::access_result::access_error, 0};
    if (k == flow::access_kind::atomic && (va % 8 != 0 || !d.mem_.word(rkey, va))) return {flow::access_result::access_error, 0};
    return {};
  }
  static std::uint64_t port_atomic(void* ctx, std::uint32_t rkey, std::uint64_t va, bool cmp_swap, std::uint64_t swap,
                                   std::uint64_t compare) {
    auto& q = *static_cast<qp_state_t*>(ctx);
    std::byte* p = q.dev->mem_.word(rkey, va);
    if (!p) return 0;
    const std::uint64_t orig = wire::load_le64(p);
    const std::uint64_t v = cmp_swap ? (orig == compare ? swap : orig) : orig + swap;
    wire::store_le64(p, v);
    return orig;
  }
  static flow::receive_fit port_fits(void* ctx, std::uint32_t offset, std::uint32_t len) {
    auto& q = *static_cast<qp_state_t*>(ctx);
    device& d = *q.dev;
    const std::uint32_t extra = q.init.type == qp_type::ud ? grh_size : 0;
    const recv_wqe* w = nullptr;
    if (offset != 0) {
      for (const auto& r : q.recvs)
        if (r.bound && !r.done) w = &r.wqe;
    } else if (q.init.srq) {
      const srq_state& s = *d.srqs_[*q.init.srq];
      if (!s.ready.empty()) w = &s.ready.front();
    } else {
      for (const auto& r : q.recvs)
        if (!r.bound && !r.done) {
          w = &r.wqe;
          break;
        }
    }
    const bool ok = w && std::uint64_t{offset} + len + extra <= sge_bytes(*w);
    q.length_failed = !ok;
    q.buffer_failed = false;
    if (!ok) return flow::receive_fit::too_long;
    if (offset == 0 && !d.receive_sges_ok(q, *w)) {  // a key that no longer allows the receive's buffer
      q.buffer_failed = true;
      return flow::receive_fit::unusable;
    }
    return flow::receive_fit::fits;
  }
  /// Schedules the pages of f to become resident; returns the delay announced, microseconds.
  std::uint32_t raise_fault(const fault_info& f) {
    for (const auto& p : faults_)
      if (p.key == f.key && p.va <= f.va && f.va + f.length <= p.va + p.length)
        return static_cast<std::uint32_t>((p.ready_at - now_ + 999) / 1000);
    ++stats_.page_faults;
    faults_.push_back({f.key, f.va, f.length, now_ + cfg_.page_fault_latency});
    return static_cast<std::uint32_t>((cfg_.page_fault_latency + 999) / 1000);
  }
  void serve_faults() {
    for (auto it = faults_.begin(); it != faults_.end();) {
      if (it->ready_at <= now_) {
        mem_.make_resident(it->key, it->va, it->length);
        ++stats_.faults_served;
        it = faults_.erase(it);
      } else {
        ++it;
      }
    }
  }

  // -- completions ------------------------------------------------------------------------------
  /// Writes the completions at the head of the QP's lists to their CQs, in the QP's order.
  void flush_completions(qp_state_t& q) {
    while (!q.sends.empty() && q.sends.front().done) {
      const detail::send_record& r = q.sends.front();
      if (r.serves) {  // the device's own: no entry, no ring slot
        q.sends.pop_front();
        continue;
      }
      const bool write = r.signaled || r.status != wc_status::success;
      if (write) {
        cqe e{};
        e.wr_id = r.wr_id;
        e.status = static_cast<std::uint8_t>(r.status);
        e.opcode = static_cast<std::uint8_t>(r.op);
        e.byte_len = r.op == wc_opcode::rdma_read ? send_length(r.wqe) : 0;
        e.qp_num = q.qpn;
        e.vendor_err = r.vendor_err;
        if (!write_cqe(q, q.init.send_cq, e)) return;
      }
      const bool fatal = r.fatal;
      q.sends.pop_front();
      ++q.sq_retired;
      q.init.sq->doorbell().retired.store(q.sq_retired, std::memory_order_release);
      if (fatal && q.state != qp_state::err && q.state != qp_state::sqe) {
        q.halted = false;
        send_error(q);
      }
    }
    while (!q.recvs.empty() && q.recvs.front().done) {
      const recv_record_t& r = q.recvs.front();
      cqe e{};
      e.wr_id = r.wqe.wr_id;
      e.status = static_cast<std::uint8_t>(r.status);
      e.opcode = static_cast<std::uint8_t>(r.op);
      e.byte_len = r.status == wc_status::success ? r.byte_len : 0;
      e.imm = r.imm;
      e.flags = static_cast<std::uint8_t>((r.with_imm ? cqe_with_imm : 0) | (r.grh ? cqe_grh : 0));
      e.qp_num = q.qpn;
      e.src_qp = r.src_qp;
      if (!write_cqe(q, q.init.recv_cq, e)) return;
      q.recvs.pop_front();
      if (!q.init.srq) q.init.rq->doorbell().retired.fetch_add(1, std::memory_order_release);
    }
  }
  /// Writes one entry; false when the CQ is full (the record stays in its list: nothing is lost;
  /// the first overflow raises cq_error and moves the QP to ERR).
  bool write_cqe(qp_state_t& q, std::uint32_t cqn, cqe e) {
    cq_state& c = cqs_.at(cqn);
    const auto n = static_cast<std::uint32_t>(c.mem->ring().size());
    if (c.producer - c.mem->doorbell().consumer.load(std::memory_order_acquire) >= n) {
      if (!c.error) {
        c.error = true;
        ++stats_.cq_overflows;
        events_.push_back({event_type::cq_error, cqn});
        if (q.state != qp_state::err) {
          events_.push_back({event_type::qp_fatal, q.qpn});
          to_error(q);
        }
      }
      return false;
    }
    c.error = false;
    e.op_own = cq_memory::phase(c.producer, n);
    cqe& slot = c.mem->ring()[c.producer & (n - 1)];
    const std::uint8_t own = e.op_own;
    e.op_own = static_cast<std::uint8_t>(own ^ 1);  // stays foreign until the last store
    slot = e;
    std::atomic_ref<std::uint8_t>(slot.op_own).store(own, std::memory_order_release);
    ++c.producer;
    ++stats_.completions;
    if (c.armed) std::exchange(c.armed, {})(cqn);
    return true;
  }

  // -- framing: transmit -------------------------------------------------------------------------
  frame_bytes buffer(std::size_t n) {
    frame_bytes b;
    if (!pool_.empty()) b = std::move(pool_.back()), pool_.pop_back();
    b.resize(n);
    return b;
  }
  std::uint8_t tx_port(const qp_state_t& q, const flow::packet& p) const {
    if (q.init.type == qp_type::rc || q.init.type == qp_type::uc) return q.attr.av.port;
    (void)p;
    return q.attr.port;
  }
  /// The address vector a packet of q goes to (UD / DCI requests: the work request's AH;
  /// responses: back to where the request came from).
  const address_vector* destination(qp_state_t& q, const flow::packet& p) {
    if (q.init.type == qp_type::rc || q.init.type == qp_type::uc) return &q.attr.av;
    if (p.info().request) {
      const detail::send_record* r = send_of(q, p.wr_id);
      if (r) {
        q.dc_ah = r->wqe.ah;
        return r->wqe.ah < ahs_.size() ? &ahs_[r->wqe.ah] : nullptr;  // (a destroyed handle keeps its address)
      }
      // A DCI's disconnect goes to the target it served; its connect, where the request queued
      // with it goes (the initiator queues a connect together with its target's first request).
      const requester_t* rq = sender(q);
      if (!rq) return nullptr;
      std::uint32_t ah = q.dc_ah;
      if (!p.se)
        for (std::size_t i = 0; i < rq->queued(); ++i)
          if (rq->at(i).wr.id == p.wr_id) {
            for (std::size_t j = i + 1; j < rq->queued(); ++j)
              if (const detail::send_record* d = send_of(q, rq->at(j).wr.id); d && rq->at(j).wr.id < flow::dc_internal_id) {
                ah = q.dc_ah = d->wqe.ah;
                break;
              }
            break;
          }
      return ah < ahs_.size() ? &ahs_[ah] : nullptr;
    }
    const auto it = reply_to_.find(reply_key(q.qpn, p.dest_qp));
    return it == reply_to_.end() ? nullptr : &it->second;
  }
  static std::uint64_t reply_key(std::uint32_t qpn, std::uint32_t peer) { return std::uint64_t{qpn} << 32 | peer; }
  void transmit(qp_state_t& q, flow::packet p) {
    if (q.state == qp_state::err) return;
    const address_vector* av = destination(q, p);
    if (!av || av->port >= ports_.size()) return;
    port_state& ps = ports_[av->port];
    // UD: the DETH names the sending QP; DC: the DCI (spec/roce.md §5)
    if ((q.init.type == qp_type::ud || q.init.type == qp_type::dci) && p.info().request) p.src_qp = q.qpn;
    // The payload: a request's from its work request; a READ response's from memory.
    const ib::opcode_info& op = p.info();
    std::uint32_t len = op.payload ? p.length : 0;
    const detail::send_record* rec = op.request ? send_of(q, p.wr_id) : nullptr;
    const bool from_memory = op.is(ib::op_class::read_response);
    if (from_memory && mem_.check(p.rkey, p.va, len, {q.init.pd, access::remote_read}) != errc{}) return;  // no longer readable
    if (op.request && op.payload && !rec) return;
    if ((op.request ? ps.tx : ps.responses).size() >= 2 * cfg_.tx_queue) {
      ++stats_.dropped_tx_full;
      return;
    }
    std::optional<std::uint16_t> sport;
    if (q.sessions && op.request) {  // a session QP's message: a session, and its sequence number
      const auto e = ps.cfg.frame == framing::roce ? q.sessions->out.pick() : std::nullopt;
      if (!e) {
        ++stats_.session_not_sent;
        return;
      }
      q.sessions->out.completed(e->session);  // UD: done when sent
      p.opcode = ib::opcode::ud_send_only_with_immediate;
      p.imm = q.sessions->out.sequence();
      sport = e->tuple.sport;
    }
    ++stats_.frames_out;
    if (ps.cfg.frame == framing::roce) transmit_roce(q, ps, *av, p, rec, from_memory, len, sport);
    else transmit_cells(q, ps, *av, p, rec, from_memory, len);
  }
  template <class F>
  bool payload_segments(qp_state_t& q, const flow::packet& p, const detail::send_record* rec, bool from_memory,
                        std::uint32_t len, F&& f) {
    if (len == 0) return true;
    if (from_memory) {
      mem_.visit(p.rkey, p.va, len, f);
      return true;
    }
    return gather(q, rec->wqe, p.offset, len, access::none, f);
  }
  void transmit_roce(qp_state_t& q, port_state& ps, const address_vector& av, flow::packet& p,
                     const detail::send_record* rec, bool from_memory, std::uint32_t len, std::optional<std::uint16_t> sport) {
    ib::roce_packet r = flow::to_roce(p, frame_base(q, ps, av, p));
    if (sport) r.udp.srcport = *sport;
    const std::size_t head = ib::payload_offset(r);
    frame_bytes f = buffer(head + len + 3 + ib::detail::icrc_size);  // pad at most 3
    r.payload = std::span<const std::byte>(f.data() + head, len);
    // IPv4: the headers first (the payload is gathered in place afterwards), then one pass that
    // copies the payload in and continues the ICRC over it. IPv6's UDP checksum covers the
    // payload, so there the payload goes in first and build() checksums the whole frame.
    const bool fused = !r.v6;
    if (fused) r.given.icrc = true;  // written below
    std::size_t n = 0;
    const auto built = [&] {
      const auto b = ib::build(r, f);
      if (b) n = *b;
      else recycle(std::move(f));
      return b.has_value();
    };
    if (fused && !built()) return;
    constexpr std::size_t ip_at = wire::eth_header_size, ip_len = 20;  // frame_base: no VLAN, no options
    std::uint32_t crc = fused ? ib::icrc_headers(std::span<const std::byte>(f.data() + ip_at, head - ip_at), false, ip_len) : 0;
    std::size_t at = head;
    if (!payload_segments(q, p, rec, from_memory, len, [&](std::byte* s, std::size_t k) {
          if (fused) crc = wire::crc::crc32_copy(std::span<std::byte>(f.data() + at, k), std::span<const std::byte>(s, k), crc);
          else std::memcpy(f.data() + at, s, k);
          at += k;
        })) {
      recycle(std::move(f));
      return;  // a local key was deregistered under a posted request: nothing is sent
    }
    if (fused) {
      const std::size_t pad = (4 - len % 4) % 4;
      crc = wire::crc::crc32(std::span<const std::byte>(f.data() + head + len, pad), crc);
      wire::store_le32(f.data() + head + len + pad, crc);
    } else if (!built()) {
      return;
    }
    f.resize(n);
    stats_.bytes_out += f.size();
    queue_frame(ps, p, std::move(f));
  }
  void queue_frame(port_state& ps, const flow::packet& p, frame_bytes&& f) {
    if (p.info().request) {
      ps.tx.push_back(std::move(f));
      return;
    }
    if (ps.responses.empty()) ps.responses_since = now_, ps.urgent = false, ps.released = false;
    const bool plain_ack = p.info().is(ib::op_class::ack) && !p.info().is(ib::op_class::atomic) && ib::syndrome_of(p.aeth).kind() == ib::aeth_kind::ack;
    if (!plain_ack) ps.urgent = true;
    ps.responses.push_back(std::move(f));
  }
  /// Whether the port's responses are plain ACKs still within device_config::ack_delay.
  bool acks_held(const port_state& p) const {
    return cfg_.ack_delay && p.tx.empty() && p.responses.size() == 1 && !p.urgent && !p.released &&
           now_ < p.responses_since + cfg_.ack_delay;
  }
  ib::roce_packet frame_base(qp_state_t& q, const port_state& ps, const address_vector& av, const flow::packet& p) {
    ib::roce_packet b{};
    b.eth.src = ps.cfg.mac;
    b.eth.dst = av.dmac;
    const auto& sgid = av.sgid_index == 0 || av.sgid_index > ps.cfg.extra_gids.size() ? ps.cfg.gid : ps.cfg.extra_gids[av.sgid_index - 1u];
    const bool v6 = !is_v4(av.dgid) || !is_v4(sgid);
    b.v6 = v6;
    if (v6) {
      std::copy(sgid.begin(), sgid.end(), b.ip6.src.begin());
      std::copy(av.dgid.begin(), av.dgid.end(), b.ip6.dst.begin());
      b.ip6.hlim = av.hop_limit;
      b.ip6.tclass = av.traffic_class;
    } else {
      std::copy(sgid.begin() + 12, sgid.end(), b.ip4.src.begin());
      std::copy(av.dgid.begin() + 12, av.dgid.end(), b.ip4.dst.begin());
      b.ip4.ttl = av.hop_limit;
      b.ip4.flags_df = true;  // as rxe, and as Linux sends a datagram of an unconnected socket (identification 0): net/udp.hpp
    }
    const std::uint32_t fl = av.flow_label ? av.flow_label : ib::flow_label(q.qpn, p.dest_qp);
    b.udp.srcport = ps.cfg.udp_sport ? ps.cfg.udp_sport : ib::udp_sport(fl);
    if (v6) b.ip6.flow = fl;
    return b;
  }
  void transmit_cells(qp_state_t& q, port_state& ps, const address_vector& av, flow::packet& p,
                      const detail::send_record* rec, bool from_memory, std::uint32_t len) {
    p.src_qp = q.qpn;
    std::vector<std::span<const std::byte>> pieces;
    if (!payload_segments(q, p, rec, from_memory, len, [&](std::byte* s, std::size_t n) { pieces.emplace_back(s, n); })) return;
    cell::packet_spec base{};
    base.dst = av.dmac;
    base.src = ps.cfg.mac;
    const auto form = flow::to_cell_form(p, base);
    if (!form) return;
    if (form->head_len) pieces.insert(pieces.begin(), form->header_bytes());
    auto seg = cell::segmenter::make(form->spec, std::span<const std::span<const std::byte>>(pieces), ps.cfg.cell_payload);
    if (!seg) return;
    while (!seg->done()) {
      frame_bytes f = buffer(seg->next_size());
      const auto n = seg->next(f);
      if (!n) return;
      f.resize(*n);
      stats_.bytes_out += f.size();
      queue_frame(ps, p, std::move(f));
    }
  }

  // -- framing: receive --------------------------------------------------------------------------
  void receive_roce(port_state& ps, std::span<const std::byte> frame) {
    ib::roce_view v;
    if (ib::inspect(frame, v, {.crc = wire::crc_check::skip}).code != wire::errc{}) {
      ++stats_.dropped_bad_frame;
      return;
    }
    const auto eth = v.eth();
    std::array<std::uint8_t, 16> src{}, dst{};
    if (v.v6) {
      const auto h = v.ipv6();
      std::copy(h.src.begin(), h.src.end(), src.begin());
      std::copy(h.dst.begin(), h.dst.end(), dst.begin());
    } else {
      const auto h = v.ipv4();
      src = gid_v4(h.src[0], h.src[1], h.src[2], h.src[3]);
      dst = gid_v4(h.dst[0], h.dst[1], h.dst[2], h.dst[3]);
    }
    const flow::packet p = flow::from_roce(v);
    // (the default partition is the only one)
    const bool mine = eth.dst == ps.cfg.mac && is_own_gid(ps, dst) && p.p_key == 0xFFFF;
    const cut c = mine ? cut_through(v, p) : cut::no;
    if (c == cut::bad_icrc || (c == cut::no && !ib::verify_icrc(v))) {
      ++stats_.dropped_bad_frame;
      return;
    }
    if (!mine) {
      ++stats_.dropped_not_mine;
      return;
    }
    address_vector from{.port = static_cast<std::uint8_t>(&ps - ports_.data()), .dmac = eth.src, .dgid = src};
    std::array<std::byte, grh_size> grh{};
    if (v.v6) std::memcpy(grh.data(), frame.data() + v.ip_offset, grh_size);
    else std::memcpy(grh.data() + 20, frame.data() + v.ip_offset, 20);
    current_grh_ = &grh;
    struct clear_grh {
      device& d;
      ~clear_grh() { d.current_grh_ = nullptr; }
    } clear{*this};
    if (qp_state_t* q = session_qps_ ? find_qp(p.dest_qp) : nullptr; q && q->sessions && p.info().request) {
      const auto udp = v.udp();
      receive_session(*q, {.src = src, .dst = dst, .sport = udp.srcport, .dport = udp.dstport}, p, frame, from);
      return;
    }
    dispatch(p, from);
    preplaced_.reset();
  }
  /// Cut-through placement (spec/rnic.md §7): the payload of a WRITE's MIDDLE or LAST packet
  /// that its responder would execute now goes to its place in the same pass that computes
  /// the ICRC. Its place is the message's, fixed by the verified packets before it, never by
  /// this packet's own (unverified) addressing; a bad ICRC drops the frame, as always, and the
  /// bytes written lie where this PSN's packet goes, which its resend overwrites before the
  /// message can complete. Anything else is verified first, then placed.
  enum class cut : std::uint8_t { no, placed, bad_icrc };
  cut cut_through(const ib::roce_view& v, const flow::packet& p) {
    if (v.payload.size() < cut_through_min || !p.known() || !p.info().is(ib::op_class::write) || p.info().starts()) return cut::no;
    qp_state_t* q = find_qp(p.dest_qp);
    if (!q || !q->resp || q->sessions) return cut::no;
    probing_ = true;  // a page absent is no fault raised yet: the frame is not verified
    const auto pl = q->resp->placement(p);
    probing_ = false;
    if (!pl || pl->to_receive || pl->length != v.payload.size()) return cut::no;
    const std::byte* ip = v.frame.data() + v.ip_offset;
    std::uint32_t crc = ib::icrc_headers(std::span<const std::byte>(ip, static_cast<std::size_t>(v.payload.data() - ip)), v.v6, v.ip_header_len);
    std::size_t done = 0;
    mem_.visit(pl->rkey, pl->va, pl->length, [&](std::byte* h, std::size_t k) {
      crc = wire::crc::crc32_copy(std::span<std::byte>(h, k), v.payload.subspan(done, k), crc);
      done += k;
    });
    if (wire::crc::crc32(v.pad, crc) != v.icrc) return cut::bad_icrc;
    preplaced_ = *pl;
    return cut::placed;
  }
  /// A message for a session QP: resequenced first; delivered ones go to the QP in order.
  void receive_session(qp_state_t& q, const flow::five_tuple& t, const flow::packet& p, std::span<const std::byte> frame,
                       const address_vector& from) {
    if (!p.info().is(ib::op_class::immediate)) {  // no sequence number: not a session message
      ++stats_.dropped_by_qp;
      return;
    }
    session_qp& sq = *q.sessions;
    std::size_t slot = 0;
    while (slot < sq.held.size() && !sq.held[slot].empty()) ++slot;
    if (slot == sq.held.size()) sq.held.emplace_back();
    sq.held[slot] = buffer(frame.size());
    std::memcpy(sq.held[slot].data(), frame.data(), frame.size());
    flow::action_list<flow::session_action_t, decltype(sq.in)::min_room> acts;
    (void)sq.in.on_message({t, p.dest_qp, p.imm, slot}, acts.out);
    const std::uint32_t qpn = q.qpn;
    for (const auto& a : acts.out) {
      if (const auto* d = std::get_if<flow::session_action::deliver>(&a)) {
        frame_bytes f = std::move(sq.held[d->handle]);
        sq.held[d->handle] = {};
        ib::roce_view v;
        if (ib::inspect(f, v).code == wire::errc{} && find_qp(qpn)) dispatch(flow::from_roce(v), from);
        recycle(std::move(f));
      } else {
        const auto& dr = std::get<flow::session_action::drop>(a);
        switch (dr.why) {
          case flow::errc::unknown_tuple: ++stats_.session_unknown_tuple; break;
          case flow::errc::foreign_group: ++stats_.session_foreign; break;
          case flow::errc::duplicate: ++stats_.session_duplicate; break;
          default: ++stats_.session_window_full; break;
        }
        recycle(std::move(sq.held[dr.handle]));
        sq.held[dr.handle] = {};
      }
    }
  }
  void receive_cell(port_state& ps, std::span<const std::byte> frame) {
    const auto r = ps.reasm->push(frame, now_);
    if (r.status == cell::push_status::rejected) {
      if (r.error.code == wire::errc::cell_crc_mismatch || r.error.code == wire::errc::not_cell ||
          r.error.code == wire::errc::packet_crc_mismatch)
        ++stats_.dropped_bad_frame;
      return;
    }
    if (r.status != cell::push_status::delivered) return;
    const cell::delivered_packet& d = *r.packet;
    const auto fp = flow::from_cell(d);
    if (!fp) {
      ++stats_.dropped_bad_frame;
      ps.reasm->forget(d.key);
      return;
    }
    const flow::packet& p = *fp;
    address_vector from{.port = static_cast<std::uint8_t>(&ps - ports_.data()), .dmac = wire::read<wire::eth_header, "src">(frame.data())};
    // The transport judges duplicates by PSN (and re-acknowledges them); the reassembler only
    // joins cells, so it forgets each packet it delivers and takes a resent one again.
    const cell::packet_key key = d.key;
    dispatch(p, from);
    ps.reasm->forget(key);
  }
  /// Hands a packet to the QP it names.
  void dispatch(const flow::packet& p, const address_vector& from) {
    if (!p.known()) {
      ++stats_.dropped_by_qp;
      return;
    }
    qp_state_t* q = find_qp(p.dest_qp, true);
    if (!q) {
      ++stats_.dropped_no_qp;
      return;
    }
    const bool request = p.info().request;
    if (q->closed) {  // lingering: duplicates only (device_config::linger)
      if (!request || !q->resp || !ib::psn_before(p.psn, q->resp->expected_psn())) {
        ++stats_.dropped_no_qp;
        return;
      }
      q->last_heard = now_;
    }
    scratch a(*this);
    current_src_qp_ = p.src_qp;
    current_is_write_ = p.info().is(ib::op_class::write);
    if (request) {
      if (q->state == qp_state::reset || q->state == qp_state::init || q->state == qp_state::err || (!q->resp && !q->dct)) {
        ++stats_.dropped_no_qp;
        return;
      }
      if (q->init.type == qp_type::dct) reply_to_[reply_key(q->qpn, p.dci)] = from;
      if (q->init.srq) {
        const std::uint32_t ready = receives_ready(*q);
        if (q->resp) q->resp->set_receives(ready);
        if (q->dct) q->dct->set_receives(ready);
      }
      flow::step_result s{};
      if (q->resp) {
        if (q->resp->refusal(a.out()) != flow::errc{}) {  // its response queue is full: dropped, resent later
          ++stats_.dropped_by_qp;
          return;
        }
        s = q->resp->on_packet(p, a.out());
      } else {
        s = q->dct->on_packet(p, a.out());
      }
      bool refused = !s.ok();
      for (const auto& act : a.out())
        if (std::holds_alternative<flow::qp_action::dropped>(act)) refused = true;
      if (refused) ++stats_.dropped_by_qp;
      handle(*q, a.out(), p.payload);
      // The peer's WRITE on this QP may be serving our READ_AS_WRITE: progress for its timer.
      if (q->req && p.info().is(ib::op_class::write)) {
        scratch k(*this);
        q->req->peer_progress(now_, k.out());
      }
      const bool failed = (q->resp && q->resp->state() == flow::resp_state::error) || (q->dct && q->dct->transport().state() == flow::resp_state::error);
      if (failed && q->state != qp_state::err && (q->init.type == qp_type::rc || q->init.type == qp_type::dct)) {
        // the responder NAKed a fatal error: the receive it consumed (if any) fails, the QP goes to ERR
        events_.push_back({q->length_failed ? event_type::qp_request_error : event_type::qp_access_error, q->qpn});
        if (q->length_failed || q->buffer_failed) {
          // the receive the SEND was for completes with the error (an SRQ's is taken from it)
          if (q->init.srq && std::none_of(q->recvs.begin(), q->recvs.end(), [](const recv_record_t& r) { return !r.done; }))
            (void)bind_receive(*q, 0);
          for (auto& r : q->recvs)
            if (!r.done) {
              r.done = true, r.status = q->length_failed ? wc_status::local_length_error : wc_status::local_protection_error;
              break;
            }
        }
        to_error(*q);
      }
    } else {
      if (q->state != qp_state::rts && q->state != qp_state::sqd && q->state != qp_state::sqe) {
        ++stats_.dropped_no_qp;
        return;
      }
      if (!sender(*q)) {
        ++stats_.dropped_no_qp;
        return;
      }
      run_sender(*q, p.payload, [&](flow::qp_sink& out) {
        if (q->req) q->req->on_packet(p, now_, out);
        else q->dci->on_packet(p, now_, out);
      });
    }
    pump(*q);
    flush_completions(*q);
  }

  device_config cfg_;
  std::vector<std::unique_ptr<actions_t>> lists_;
  std::size_t depth_ = 0;
  memory_table mem_;
  std::vector<port_state> ports_;
  std::vector<std::uint32_t> pds_;
  std::uint32_t next_pd_ = 1;
  std::unordered_map<std::uint32_t, cq_state> cqs_;
  std::uint32_t next_cq_ = 1;
  static constexpr std::uint32_t no_cq = 0;  ///< (CQ numbers start at 1)
  std::size_t lingering_ = 0;
  std::unordered_map<std::uint32_t, std::unique_ptr<qp_state_t>> qps_;
  std::uint32_t next_qpn_ = 0x10;
  std::vector<address_vector> ahs_;
  std::vector<bool> ah_live_;
  std::vector<std::uint32_t> free_ahs_;
  std::vector<std::unique_ptr<srq_state>> srqs_;
  std::unordered_map<std::uint64_t, address_vector> reply_to_;
  std::vector<std::uint32_t> doorbells_, srq_doorbells_;
  std::vector<pending_fault> faults_;
  std::vector<async_event> events_;
  std::vector<frame_bytes> pool_;
  time_ns now_ = 0;
  device_counters stats_{};
  std::unique_ptr<session_table_t> sessions_ = std::make_unique<session_table_t>();  // (stable for session_group)
  std::size_t session_qps_ = 0;  ///< QPs with sessions: receive_roce looks a packet's QP up first only then
  std::uint32_t current_src_qp_ = 0;
  bool current_is_write_ = false;
  const std::array<std::byte, grh_size>* current_grh_ = nullptr;  ///< the RoCE packet being dispatched's (cells: none)
  bool probing_ = false;  ///< cut_through asks a responder where a packet goes: raise no fault
  std::optional<flow::qp_action::place> preplaced_{};  ///< the placement cut_through made
};

}  // namespace pushwire::rnic
