// Queue-pair transport machines (IBTA vol. 1 ch. 9; Linux rxe's req/resp/comp split read for
// reference): the requester (send queue and completer) and the responder, for RC, UC, UD and the
// reliable part of DC. Sans-IO: packets in and out are flow::packet values, time is an
// argument, timers are deadlines the caller fires with on_timer().
//
// Decisions (spec/flow.md §2):
// - PSNs are assigned when a work request is posted; a message takes ceil(length / mtu)
//   PSNs (at least 1); a READ request takes as many as its responses.
// - AckReq is set on the last packet one pump() sends before its send queue is empty or waits
//   for credits (one cumulative ACK answers a burst of messages), on a message's last packet
//   when a pump stops for room or a hold, on READ and atomic requests,
//   DC connects and disconnects, every `ackreq_every`-th packet, and the packet that fills the
//   window. The responder ACKs only AckReq packets (coalescing the rest) and every READ /
//   atomic.
// - Go-back-N: a PSN-sequence-error NAK, a timeout or the end of an RNR / page-fault wait
//   rewinds to the PSN named (an atomic is re-issued whole; a READ asks again for the rest,
//   from its first unacknowledged response, as rxe does).
// - Responses whose PSN is outside the outstanding range are stale and ignored (no state
//   change): duplicates, and NAKs for packets already acknowledged.
// - On RoCE a page-fault ACK is an RNR NAK (ib::page_fault_ack); a page_fault_aware requester
//   reads an RNR NAK that answers a packet needing no receive (ib::needs_receive) as one,
//   pauses without counting and resumes from that PSN; one answering a SEND's FIRST or ONLY or
//   a WRITE with immediate's LAST or ONLY is a genuine RNR.
// - AETH credits: the responder announces its posted receives (ib::credit_code); the
//   requester starts no new SEND while the last ACK announced none and packets are
//   outstanding (it may always probe with one when nothing is).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <variant>

#include <pushwire/flow/core.hpp>
#include <pushwire/flow/packet.hpp>
#include <pushwire/ib/psn.hpp>

namespace pushwire::flow {

/// Work request operations. dc_connect / dc_disconnect are DC only (opcode 0x55); read_as_write
/// is RC only (pushwire's opcode 0xC0: the responder writes the data into the sink).
enum class wr_op : std::uint8_t { send, send_imm, write, write_imm, read, compare_swap, fetch_add, dc_connect, dc_disconnect, read_as_write };
inline constexpr std::array<wire::named_value, 10> wr_op_names{{
    {wr_op::send, "SEND"},
    {wr_op::send_imm, "SEND_WITH_IMM"},
    {wr_op::write, "RDMA_WRITE"},
    {wr_op::write_imm, "RDMA_WRITE_WITH_IMM"},
    {wr_op::read, "RDMA_READ"},
    {wr_op::compare_swap, "COMPARE_SWAP"},
    {wr_op::fetch_add, "FETCH_ADD"},
    {wr_op::dc_connect, "DC_CONNECT"},
    {wr_op::dc_disconnect, "DC_DISCONNECT"},
    {wr_op::read_as_write, "READ_AS_WRITE"},
}};
constexpr std::span<const wire::named_value> wire_enum_names(wr_op) { return wr_op_names; }

struct work_request {
  std::uint64_t id = 0;
  wr_op op = wr_op::send;
  std::uint32_t length = 0;  ///< bytes (atomics: 8; DC connect / disconnect: 0)
  std::uint64_t remote_va = 0;
  std::uint32_t rkey = 0;
  std::uint32_t imm = 0;
  std::uint64_t swap = 0, compare = 0;  ///< FETCH_ADD adds `swap`
  std::uint32_t dest_qp = 0;  ///< UD: destination QP; DC: DCT number; else the QP's
  std::uint64_t dc_key = 0;   ///< DC: DCETH access key
  std::uint32_t dci = 0;      ///< DC: this initiator's number (DCCETH)
  std::uint32_t q_key = 0;    ///< UD: DETH Q_Key
  std::uint64_t sink_va = 0;  ///< READ_AS_WRITE: where the responder writes the data (SinkETH)
  std::uint32_t sink_rkey = 0;
  friend constexpr bool operator==(const work_request&, const work_request&) = default;
};

/// Work completion status (IBTA 11.6.2 names, shortened).
enum class wc_status : std::uint8_t {
  success,
  retry_exceeded,      ///< retry_cnt timeouts without progress
  rnr_retry_exceeded,  ///< rnr_retry genuine RNR NAKs without progress
  remote_invalid_request,
  remote_access_error,
  remote_operational_error,
  flushed,  ///< the QP went to the error state before this request completed
};
inline constexpr std::array<wire::named_value, 7> wc_status_names{{
    {wc_status::success, "success"},
    {wc_status::retry_exceeded, "retry_exceeded"},
    {wc_status::rnr_retry_exceeded, "rnr_retry_exceeded"},
    {wc_status::remote_invalid_request, "remote_invalid_request"},
    {wc_status::remote_access_error, "remote_access_error"},
    {wc_status::remote_operational_error, "remote_operational_error"},
    {wc_status::flushed, "flushed"},
}};
constexpr std::span<const wire::named_value> wire_enum_names(wc_status) { return wc_status_names; }

enum class timer_kind : std::uint8_t {
  retransmit,  ///< local ACK timeout
  wait,        ///< RNR timer or page-fault delay
};

/// Why an in-sequence request is invalid (resp_event::invalid), in the order the responder
/// checks (IBTA 9.7.5.1.2-9.7.5.1.4; rxe's check_op_seq, check_op_valid, check_length).
enum class invalid_reason : std::uint8_t {
  none,
  operation,       ///< an operation this responder does not execute on its transport
  sequence,        ///< FIRST / ONLY inside a message, or MIDDLE / LAST outside one (or of another kind)
  mtu,             ///< a payload above the path MTU, or a FIRST / MIDDLE payload not exactly the MTU
  read_length,     ///< a READ's DMA length above 2^31 or taking half the PSN space
  dma_length,      ///< a WRITE's payloads exceed its DMA length, or its last ends short of it
  receive_length,  ///< a SEND longer than its receive buffer
};
inline constexpr std::array<wire::named_value, 7> invalid_reason_names{{
    {invalid_reason::none, "none"},
    {invalid_reason::operation, "operation"},
    {invalid_reason::sequence, "sequence"},
    {invalid_reason::mtu, "mtu"},
    {invalid_reason::read_length, "read_length"},
    {invalid_reason::dma_length, "dma_length"},
    {invalid_reason::receive_length, "receive_length"},
}};
constexpr std::span<const wire::named_value> wire_enum_names(invalid_reason) { return invalid_reason_names; }

namespace qp_action {
struct transmit { packet pkt; friend constexpr bool operator==(const transmit&, const transmit&) = default; };
/// A send-queue completion (requester).
struct complete {
  std::uint64_t wr_id;
  wr_op op;
  wc_status status;
  std::uint64_t orig;  ///< atomics: the remote value before
  friend constexpr bool operator==(const complete&, const complete&) = default;
};
/// Arm (replace) a timer: fire on_timer(kind, t) at or after `at`.
struct set_timer { timer_kind kind; time_ns at; friend constexpr bool operator==(const set_timer&, const set_timer&) = default; };
struct cancel_timer { timer_kind kind; friend constexpr bool operator==(const cancel_timer&, const cancel_timer&) = default; };
/// Responder: place a request packet's payload. to_receive: into the receive buffer of
/// message `msn` at `offset`; else at (rkey, va).
struct place {
  bool to_receive;
  std::uint32_t msn;
  std::uint64_t va;
  std::uint32_t rkey, offset, length, psn;
  std::uint64_t wr_id;  ///< the requester's id, for tests that follow data (not on the wire)
  friend constexpr bool operator==(const place&, const place&) = default;
};
/// Responder: a receive completion (SEND, or WRITE with immediate), once per message.
struct receive {
  std::uint32_t msn, bytes;
  bool with_imm;
  std::uint32_t imm;
  std::uint64_t wr_id;
  friend constexpr bool operator==(const receive&, const receive&) = default;
};
/// Responder: a packet was dropped (why: errc).
struct dropped { std::uint32_t psn; errc why; friend constexpr bool operator==(const dropped&, const dropped&) = default; };
/// Responder (RC, DC): request `psn` was refused with a NAK that ends the responder (it is in
/// error now; nothing of the request was placed): remote access error, invalid request (`why`
/// says which check failed; receive_length: a SEND longer than its receive buffer), or remote
/// operational error (a SEND whose receive buffer cannot be written). The caller moves the QP
/// to ERR; a SEND's receive completes with the local error.
struct request_error {
  std::uint32_t psn;
  ib::nak_code nak;
  invalid_reason why;
  friend constexpr bool operator==(const request_error&, const request_error&) = default;
};
/// Responder: carry out a READ_AS_WRITE: an RDMA WRITE of dmalen bytes at (rkey, va) back into
/// (sink_rkey, sink_va), sent from this QP's own send queue; then call write_back_done(psn, ok).
/// Its ACK (and every response after it) waits until then.
struct write_back {
  std::uint32_t psn;
  std::uint64_t va;
  std::uint32_t rkey, dmalen;
  std::uint64_t sink_va;
  std::uint32_t sink_rkey;
  friend constexpr bool operator==(const write_back&, const write_back&) = default;
};
/// Requester: an accepted READ response's payload (its packet's) goes to bytes
/// [offset, offset + length) of work request wr_id's local buffer.
struct read_data {
  std::uint64_t wr_id;
  std::uint32_t offset, length, psn;
  friend constexpr bool operator==(const read_data&, const read_data&) = default;
};
}  // namespace qp_action

using qp_action_t = std::variant<qp_action::transmit, qp_action::complete, qp_action::set_timer, qp_action::cancel_timer,
                                 qp_action::place, qp_action::receive, qp_action::dropped, qp_action::read_data,
                                 qp_action::write_back, qp_action::request_error>;
using qp_sink = sink<qp_action_t>;

/// Packets for message `wr` at path MTU `mtu` (READ: its responses).
constexpr std::uint32_t packets_for(const work_request& wr, std::uint32_t mtu) {
  switch (wr.op) {
    case wr_op::compare_swap:
    case wr_op::fetch_add:
    case wr_op::dc_connect:
    case wr_op::dc_disconnect:
    case wr_op::read_as_write: return 1;
    default: return wr.length == 0 ? 1 : static_cast<std::uint32_t>((std::uint64_t{wr.length} + mtu - 1) / mtu);
  }
}

/// The operation of packet `i` of `n` of `wr`.
constexpr ib::operation request_operation(const work_request& wr, std::uint32_t i, std::uint32_t n) {
  using enum ib::operation;
  switch (wr.op) {
    case wr_op::send: return ib::operation_at(i, n, send_only, send_first, send_middle, send_last);
    case wr_op::send_imm:
      return ib::operation_at(i, n, send_only_with_immediate, send_first, send_middle, send_last_with_immediate);
    case wr_op::write: return ib::operation_at(i, n, rdma_write_only, rdma_write_first, rdma_write_middle, rdma_write_last);
    case wr_op::write_imm:
      return ib::operation_at(i, n, rdma_write_only_with_immediate, rdma_write_first, rdma_write_middle,
                              rdma_write_last_with_immediate);
    case wr_op::read: return rdma_read_request;
    case wr_op::compare_swap: return compare_swap;
    case wr_op::fetch_add: return fetch_add;
    case wr_op::dc_connect:
    case wr_op::dc_disconnect: return connect;
    case wr_op::read_as_write: return ib::operation::read_as_write;
  }
  return send_only;
}

/// The opcode of packet `i` of `n` of `wr` on `svc`.
constexpr ib::opcode request_opcode(service svc, const work_request& wr, std::uint32_t i, std::uint32_t n) {
  return opcode_on(svc, request_operation(wr, i, n));
}

/// Whether `op` is allowed on `svc` (UD: SEND only; UC: no READ or atomics).
constexpr bool supports(service svc, wr_op op) {
  switch (svc) {
    case service::ud: return op == wr_op::send || op == wr_op::send_imm;
    case service::uc: return op <= wr_op::write_imm;
    case service::rc: return op <= wr_op::fetch_add || op == wr_op::read_as_write;
    case service::dc: return op != wr_op::read_as_write;
  }
  return false;
}

// ==== requester ==============================================================================

/// The rnr_retry value that means "retry forever" (IBTA 9.7.5.2.8). retry_cnt has no such
/// value in the IBTA: 7 is seven retries (rxe's reading of 7 as infinite is a deviation).
inline constexpr std::uint8_t infinite_retries = 7;

struct requester_config {
  service svc = service::rc;
  std::uint32_t mtu = 4096;      ///< path MTU: payload bytes per packet, 256..4096
  std::uint32_t dest_qp = 0;     ///< the connected responder (RC, UC)
  std::uint32_t start_psn = 0;   ///< 24 bits
  std::uint32_t window = 128;    ///< most packets unacknowledged at once, 1..2^23
  time_ns timeout = 1'048'576;   ///< local ACK timeout, ns (IBTA code 8: 4.096 us * 2^8)
  std::uint8_t retry_cnt = 7;  ///< timeouts allowed without progress, 0..7
  /// Never give up on timeouts (not IBTA: for explorations and fuzzing, where an adversary may
  /// lose any number of packets in a row and the question is what happens next).
  bool retry_forever = false;
  std::uint8_t rnr_retry = infinite_retries;  ///< genuine RNR NAKs allowed without progress, 0..7 (7: infinite)
  std::uint32_t ackreq_every = 16;  ///< AckReq on every n-th packet too (0: none by count)
  bool page_fault_aware = true;  ///< read RNR NAKs answering WRITE/READ/atomic as page-fault ACKs
  bool honor_credits = true;     ///< AETH credits limit new SENDs
};

enum class req_state : std::uint8_t { idle, active, rnr_wait, paused, error };
inline constexpr std::array<wire::named_value, 5> req_state_names{{
    {req_state::idle, "idle"},
    {req_state::active, "active"},
    {req_state::rnr_wait, "rnr_wait"},
    {req_state::paused, "paused"},
    {req_state::error, "error"},
}};
constexpr std::span<const wire::named_value> wire_enum_names(req_state) { return req_state_names; }
enum class req_event : std::uint8_t { post, ack, nak_seq, nak_fatal, rnr_nak, page_fault, timeout, wait_over, resolved, moved };
inline constexpr std::array<wire::named_value, 10> req_event_names{{
    {req_event::post, "post"},
    {req_event::ack, "ACK/response"},
    {req_event::nak_seq, "NAK PSN sequence error"},
    {req_event::nak_fatal, "NAK other"},
    {req_event::rnr_nak, "RNR NAK"},
    {req_event::page_fault, "page-fault ACK"},
    {req_event::timeout, "retransmit timeout"},
    {req_event::wait_over, "wait timer"},
    {req_event::resolved, "fault resolved"},
    {req_event::moved, "moved to another device"},
}};
constexpr std::span<const wire::named_value> wire_enum_names(req_event) { return req_event_names; }

struct req_input {
  work_request wr{};
  packet pkt{};
  time_ns now = 0;
};

/// The requester of one queue pair, with a send queue of SQ work requests.
template <std::size_t SQ>
class requester {
 public:
  using row = transition<requester, req_state, req_event, req_input, qp_sink>;

  struct wqe {
    work_request wr{};
    std::uint32_t first_psn = 0, npkts = 0;
    bool done = false;
    wc_status status = wc_status::success;
    std::uint64_t orig = 0;
  };
  struct counters {
    std::uint64_t sent = 0, retransmitted = 0, timeouts = 0, rnr_naks = 0, page_faults = 0, seq_naks = 0, stale = 0;
  };

  /// Actions one event may push besides its paced completions and packets: the timer changes
  /// (cancel the retransmit timer, cancel the wait timer, arm one).
  static constexpr std::size_t timer_room = 3;
  /// The least sink room post(), on_packet(), on_timer() and resolved() need; below it they
  /// return actions_full and change nothing: the timers, a READ response's data, and one
  /// completion or packet. Completions and packets beyond the room are held until pump()
  /// (wants_to_send()).
  static constexpr std::size_t min_room = timer_room + 2;

  constexpr explicit requester(requester_config c = {}) : cfg_(c), next_psn_(c.start_psn & ib::psn_mask), nxt_(next_psn_), una_(next_psn_), max_sent_(next_psn_),
                                                          retry_left_(c.retry_cnt), rnr_left_(c.rnr_retry) {}

  /// Queue a work request and send what the window allows. Errors: queue_full,
  /// invalid_argument (an operation the service lacks; UD longer than the MTU: too_large),
  /// qp_in_error (completed as flushed).
  constexpr step_result post(const work_request& wr, time_ns now, qp_sink& out);
  /// Queue a work request without sending (the next pump() sends it): for layers that post
  /// several requests at once and pump when they are done. Errors: as post(), and
  /// qp_in_error without a completion (the caller reports it).
  constexpr step_result enqueue(const work_request& wr) {
    if (!supports(cfg_.svc, wr.op)) return {-1, errc::invalid_argument};
    if (cfg_.svc == service::ud && wr.length > cfg_.mtu) return {-1, errc::too_large};
    if (st_ == req_state::error) return {-1, errc::qp_in_error};
    qp_sink none{std::span<qp_action_t>()};
    return step<row>(table(), st_, *this, req_event::post, {.wr = wr}, none);
  }
  constexpr std::size_t queue_room() const { return q_.capacity() - q_.size(); }
  /// A response packet from the responder (ACK, NAK, RNR NAK, READ response, atomic ACK).
  constexpr step_result on_packet(const packet& p, time_ns now, qp_sink& out);
  /// A timer the caller armed fired. Stale (no longer armed, or early) is ignored.
  constexpr step_result on_timer(timer_kind k, time_ns now, qp_sink& out);
  /// The responder announced the page fault resolved (cell framing; or the caller's policy).
  constexpr step_result resolved(time_ns now, qp_sink& out);
  /// The QP now runs on another device (spec/migration.md §5): what it sent before the move,
  /// and the acknowledgements of it, may be lost. An active requester sends again from the
  /// oldest unacknowledged PSN at once, without counting a retry; in any other state or
  /// service (UC, UD, DC) nothing changes (event_not_allowed).
  constexpr step_result moved(time_ns now, qp_sink& out);
  /// Send more (after a call that ran out of sink room).
  constexpr void pump(time_ns now, qp_sink& out);
  /// The peer's WRITE packets arrived on this QP: while the oldest unacknowledged request is a
  /// READ_AS_WRITE being served by them, they are its progress, as READ responses are a READ's:
  /// the retransmission timer restarts (the request's ACK comes when the write is done).
  constexpr void peer_progress(time_ns now, qp_sink& out) {
    if (!rto_ || q_.empty() || q_.front().done || q_.front().wr.op != wr_op::read_as_write || q_.front().first_psn != una_) return;
    if (out.room() == 0) return;
    rto_ = now + cfg_.timeout;
    out.push(qp_action::set_timer{timer_kind::retransmit, *rto_});
  }

  constexpr req_state state() const { return st_; }
  /// An outside rate limiter (DCQCN's pacing, spec/qos.md §3) holds new packets back: while
  /// held, no call sends a packet (completions still go; posts queue, NAKs and timeouts rewind
  /// as usual). The caller releases it for each packet its rate allows.
  constexpr void hold(bool on) { held_ = on; }
  constexpr bool held() const { return held_; }
  /// pump() has work: packets the window allows (held or not), or completions held back by a
  /// full sink.
  constexpr bool wants_to_send() const {
    if (!q_.empty() && q_.front().done) return true;
    return (st_ == req_state::active || st_ == req_state::idle) && cur_ < q_.size() && window_open() && !credit_blocks(q_[cur_]);
  }
  constexpr std::optional<time_ns> deadline(timer_kind k) const { return k == timer_kind::retransmit ? rto_ : wait_; }
  constexpr std::size_t queued() const { return q_.size(); }
  constexpr const counters& stats() const { return stats_; }
  constexpr std::uint32_t una() const { return una_; }
  constexpr std::uint32_t next_psn() const { return next_psn_; }
  constexpr const requester_config& config() const { return cfg_; }
  constexpr const wqe& at(std::size_t i) const { return q_[i]; }
  /// Which queued work request (at(i)) the next packet sent belongs to (nullopt: none waits).
  constexpr std::optional<std::size_t> sending() const { return cur_ < q_.size() ? std::optional<std::size_t>{cur_} : std::nullopt; }
  /// Everything posted has completed.
  constexpr bool quiescent() const { return q_.empty(); }
  template <class H>
  constexpr void digest(H& h) const {
    h(static_cast<std::uint64_t>(st_));
    h(q_.size());
    for (const wqe& w : q_) {
      h(w.wr.id);
      h(w.first_psn);
      h(w.done);
    }
    h(cur_);
    h(cur_pkt_);
    h(next_psn_);
    h(nxt_);
    h(una_);
    h(max_sent_);
    h(wait_psn_);
    h(nak_from_.value_or(~0u));
    h(retry_left_);
    h(rnr_left_);
    h(credits_);
    h(rto_.has_value());
    h(wait_.has_value());
    h(held_);
  }

  // ---- guards --------------------------------------------------------------------------
  static constexpr bool g_room(const requester& m, const req_input&) { return !m.q_.full(); }
  static constexpr bool g_all_done(const requester& m, const req_input& in) { return m.acks_all(in.pkt); }
  static constexpr bool g_rnr_left(const requester& m, const req_input&) { return m.cfg_.rnr_retry == infinite_retries || m.rnr_left_ > 0; }
  static constexpr bool g_retry_left(const requester& m, const req_input&) { return m.cfg_.retry_forever || m.retry_left_ > 0; }
  static constexpr bool g_rc(const requester& m, const req_input&) { return m.cfg_.svc == service::rc; }

  // ---- actions -------------------------------------------------------------------------
  static constexpr errc a_queue(requester& m, const req_input& in, qp_sink&) {
    const std::uint32_t n = packets_for(in.wr, m.cfg_.mtu);
    m.q_.push_back({in.wr, m.next_psn_, n});
    m.next_psn_ = ib::psn_add(m.next_psn_, n);
    return {};
  }
  static constexpr errc a_refuse_full(requester&, const req_input&, qp_sink&) { return errc::queue_full; }
  static constexpr errc a_flush_one(requester&, const req_input& in, qp_sink& out) {
    out.push(qp_action::complete{in.wr.id, in.wr.op, wc_status::flushed, 0});
    return errc::qp_in_error;
  }
  static constexpr errc a_advance(requester& m, const req_input& in, qp_sink& out) {
    m.advance(in.pkt, in.now, out);
    return {};
  }
  static constexpr errc a_go_back(requester& m, const req_input& in, qp_sink& out) {
    ++m.stats_.seq_naks;
    // One go-back per gap: the same NAK again (a duplicate on the wire) acknowledges nothing new
    // and resends nothing more, not even a READ or atomic the first one re-issued; a
    // retransmission lost again is the timeout's to recover (the responder NAKs a gap once).
    if (m.nak_from_ && *m.nak_from_ == in.pkt.psn) {
      ++m.stats_.stale;
      return {};
    }
    m.advance_before(in.pkt.psn, in.now, out);
    m.nak_from_ = in.pkt.psn;
    // from una_ when that stayed before the NAK's PSN: a READ or atomic there lost its response
    m.rewind(ib::psn_before(m.una_, in.pkt.psn) ? m.una_ : in.pkt.psn);
    return {};
  }
  static constexpr errc a_fail(requester& m, const req_input& in, qp_sink& out) {
    m.advance_before(in.pkt.psn, in.now, out);
    const auto code = ib::syndrome_of(in.pkt.aeth).nak_reason();
    m.fail(code == ib::nak_code::remote_access_error       ? wc_status::remote_access_error
           : code == ib::nak_code::remote_operational_error ? wc_status::remote_operational_error
                                                            : wc_status::remote_invalid_request,
           out);
    return {};
  }
  static constexpr errc a_rnr_wait(requester& m, const req_input& in, qp_sink& out) {
    ++m.stats_.rnr_naks;
    if (m.cfg_.rnr_retry != infinite_retries) --m.rnr_left_;
    m.begin_wait(in, out);
    return {};
  }
  static constexpr errc a_pause(requester& m, const req_input& in, qp_sink& out) {
    ++m.stats_.page_faults;
    m.begin_wait(in, out);
    return {};
  }
  static constexpr errc a_rnr_exceeded(requester& m, const req_input& in, qp_sink& out) {
    m.advance_before(in.pkt.psn, in.now, out);
    m.fail(wc_status::rnr_retry_exceeded, out);
    return {};
  }
  static constexpr errc a_retransmit(requester& m, const req_input& in, qp_sink& out) {
    ++m.stats_.timeouts;
    if (!m.cfg_.retry_forever) --m.retry_left_;
    m.rto_.reset();
    m.rewind(m.una_);
    (void)in;
    (void)out;
    return {};
  }
  static constexpr errc a_moved(requester& m, const req_input&, qp_sink& out) {
    if (m.rto_) out.push(qp_action::cancel_timer{timer_kind::retransmit});
    m.rto_.reset();  // armed again by what is resent
    m.nak_from_.reset();
    m.rewind(m.una_);
    return {};
  }
  static constexpr errc a_retry_exceeded(requester& m, const req_input&, qp_sink& out) {
    m.rto_.reset();
    m.fail(wc_status::retry_exceeded, out);
    return {};
  }
  static constexpr errc a_ignore_timeout(requester& m, const req_input&, qp_sink&) {
    m.rto_.reset();  // no retransmission and no count while waiting; re-armed on resume
    return {};
  }
  static constexpr errc a_resume(requester& m, const req_input&, qp_sink& out) {
    if (m.wait_) out.push(qp_action::cancel_timer{timer_kind::wait});
    m.wait_.reset();
    m.rewind(m.wait_psn_);
    return {};
  }

 private:
  friend struct testing::access;  // flow/testing.hpp
  constexpr bool window_open() const {
    const std::int32_t d = ib::psn_diff(nxt_, una_);  // negative while re-issuing a READ
    return d < 0 || static_cast<std::uint32_t>(d) < cfg_.window;
  }
  constexpr bool reliable() const { return cfg_.svc == service::rc || cfg_.svc == service::dc; }
  /// Index of the WQE holding `psn` (q_.size() when none).
  constexpr std::size_t wqe_of(std::uint32_t psn) const {
    for (std::size_t i = 0; i < q_.size(); ++i) {
      const std::int32_t d = ib::psn_diff(psn, q_[i].first_psn);
      if (d >= 0 && static_cast<std::uint32_t>(d) < q_[i].npkts) return i;
    }
    return q_.size();
  }
  constexpr bool outstanding(std::uint32_t psn) const {
    return !ib::psn_before(psn, una_) && ib::psn_before(psn, max_sent_);
  }
  constexpr bool acks_all(const packet& p) const {
    return ib::psn_add(p.psn, 1) == next_psn_ && max_sent_ == next_psn_;
  }
  static constexpr bool is_read_like(wr_op op) {
    return op == wr_op::read || op == wr_op::compare_swap || op == wr_op::fetch_add;
  }
  constexpr void rewind(std::uint32_t psn) {
    if (ib::psn_before(psn, una_)) psn = una_;  // what is acknowledged is never resent
    std::size_t i = wqe_of(psn);
    if (i == q_.size()) {  // nothing left at or after psn
      cur_ = q_.size();
      nxt_ = next_psn_;
      cur_pkt_ = 0;
      return;
    }
    cur_ = i;
    // An atomic is re-issued whole; a READ from its first unacknowledged response (the rest of
    // it, as rxe does), anything else from the packet named.
    const wr_op op = q_[i].wr.op;
    cur_pkt_ = op == wr_op::compare_swap || op == wr_op::fetch_add ? 0 : static_cast<std::uint32_t>(ib::psn_diff(psn, q_[i].first_psn));
    nxt_ = ib::psn_add(q_[i].first_psn, cur_pkt_);
  }
  constexpr void begin_wait(const req_input& in, qp_sink& out) {
    advance_before(in.pkt.psn, in.now, out);
    wait_psn_ = in.pkt.psn;
    const auto us = in.pkt.fault_delay_us ? in.pkt.fault_delay_us : ib::page_fault_delay_us(in.pkt.aeth).value_or(0);
    wait_ = in.now + time_ns{us} * 1000;
    if (rto_) out.push(qp_action::cancel_timer{timer_kind::retransmit});
    rto_.reset();
    out.push(qp_action::set_timer{timer_kind::wait, *wait_});
  }
  /// Everything before `psn` is acknowledged (a NAK implies it); completes what that finishes.
  constexpr void advance_before(std::uint32_t psn, time_ns now, qp_sink& out) {
    if (ib::psn_after(psn, una_)) progress(psn, now, out);
  }
  /// An ACK or response for p.psn: everything through it is acknowledged, except that a READ
  /// or atomic completes only with its own responses (an ACK past one re-issues it).
  constexpr void advance(const packet& p, time_ns now, qp_sink& out) {
    const std::size_t i = wqe_of(p.psn);
    if (i == q_.size()) return;
    // advance_before() and progress() complete and remove WQEs before this one, so it is named
    // by value (and found again by PSN), never held by reference across them.
    const work_request wr = q_[i].wr;
    const std::uint32_t first = q_[i].first_psn, npkts = q_[i].npkts;
    const bool read_resp = p.info().is(ib::op_class::read_response);
    const bool atomic_ack = p.info().is(ib::op_class::ack | ib::op_class::atomic);
    if (is_read_like(wr.op)) {
      if (wr.op == wr_op::read && read_resp) {
        if (p.psn == first) advance_before(first, now, out);  // implies all before it
        if (p.psn != una_) {  // a response is missing: re-issue the READ
          advance_before(first, now, out);
          rewind(first);
          return;
        }
        // Its payload must be the size its place in the READ implies; else it is not placed.
        const std::uint32_t offset = static_cast<std::uint32_t>(ib::psn_diff(p.psn, first)) * cfg_.mtu;
        const std::uint32_t expect = wr.length - offset < cfg_.mtu ? wr.length - offset : cfg_.mtu;
        if (p.length != expect) {
          ++stats_.stale;
          return;
        }
        out.push(qp_action::read_data{wr.id, offset, p.length, p.psn});
        if (ib::psn_add(p.psn, 1) == ib::psn_add(first, npkts)) q_[wqe_of(p.psn)].done = true;
        progress(ib::psn_add(p.psn, 1), now, out);
        return;
      }
      if (wr.op != wr_op::read && atomic_ack) {
        q_[i].done = true;
        q_[i].orig = p.orig;
        progress(ib::psn_add(p.psn, 1), now, out);
        return;
      }
      // a plain ACK cannot complete a READ or atomic: acknowledge up to it, then re-issue it
      advance_before(first, now, out);
      rewind(first);
      return;
    }
    progress(ib::psn_add(p.psn, 1), now, out);
  }
  /// una_ moves to `to`; WQEs wholly before it are done; completions go out in order.
  constexpr void progress(std::uint32_t to, time_ns now, qp_sink& out) {
    // An ACK or NAK past an unfinished READ / atomic acknowledges only up to it: the
    // responder executed it but its response was lost, so it is re-issued (and replayed).
    // (WQEs are in PSN order: only those starting before `to` can be covered.)
    for (const wqe& w : q_) {
      if (!ib::psn_before(w.first_psn, to)) break;
      if (is_read_like(w.wr.op) && !w.done) {
        if (!ib::psn_before(to, ib::psn_add(w.first_psn, w.npkts))) {
          rewind(w.first_psn);
          to = ib::psn_before(w.first_psn, una_) ? una_ : w.first_psn;
        }
        break;
      }
    }
    if (!ib::psn_after(to, una_)) return;
    una_ = to;
    if (nak_from_ && ib::psn_before(*nak_from_, una_)) nak_from_.reset();
    if (ib::psn_before(nxt_, una_)) rewind(una_);
    retry_left_ = cfg_.retry_cnt;
    rnr_left_ = cfg_.rnr_retry;
    for (wqe& w : q_) {
      if (!ib::psn_before(ib::psn_add(w.first_psn, w.npkts - 1), una_)) break;
      if (!is_read_like(w.wr.op)) w.done = true;
    }
    complete_done(out);
    if (ib::psn_before(una_, max_sent_)) {
      rto_ = now + cfg_.timeout;
      out.push(qp_action::set_timer{timer_kind::retransmit, *rto_});
    } else if (rto_) {
      rto_.reset();
      out.push(qp_action::cancel_timer{timer_kind::retransmit});
    }
  }
  constexpr void complete_done(qp_sink& out) {
    while (!q_.empty() && q_.front().done && out.room() > timer_room) {
      out.push(qp_action::complete{q_.front().wr.id, q_.front().wr.op, q_.front().status, q_.front().orig});
      const std::uint32_t end = ib::psn_add(q_.front().first_psn, q_.front().npkts);
      if (reliable() && ib::psn_before(una_, end)) una_ = end;  // completed: acknowledged through its end
      q_.pop_front();
      if (cur_ > 0) --cur_;
      // never resend below what is acknowledged (and never wait on a PSN behind it: with nxt_
      // behind una_, a SEND held for credits would wait for an ACK nothing is outstanding for)
      if (reliable() && ib::psn_before(nxt_, una_)) rewind(una_);
    }
  }
  constexpr void fail(wc_status s, qp_sink& out) {
    if (rto_) out.push(qp_action::cancel_timer{timer_kind::retransmit});
    if (wait_) out.push(qp_action::cancel_timer{timer_kind::wait});
    rto_.reset();
    wait_.reset();
    for (std::size_t i = 0; i < q_.size(); ++i) {
      q_[i].done = true;
      q_[i].status = i == 0 ? s : wc_status::flushed;
    }
    cur_ = q_.size();
    complete_done(out);
  }
  constexpr packet make_packet(const wqe& w, std::uint32_t i) const {
    const work_request& wr = w.wr;
    packet p{};
    p.opcode = request_opcode(cfg_.svc, wr, i, w.npkts);
    p.psn = ib::psn_add(w.first_psn, i);
    p.dest_qp = (cfg_.svc == service::ud || cfg_.svc == service::dc) ? wr.dest_qp : cfg_.dest_qp;
    p.wr_id = wr.id;
    const bool last = i + 1 == w.npkts;
    const bool read_like = is_read_like(wr.op);
    p.ack_req = reliable() && (read_like || wr.op == wr_op::dc_connect || wr.op == wr_op::dc_disconnect ||
                               (cfg_.ackreq_every && (p.psn % cfg_.ackreq_every) == cfg_.ackreq_every - 1));
    p.se = wr.op == wr_op::dc_disconnect;
    if (!read_like && wr.op != wr_op::dc_connect && wr.op != wr_op::dc_disconnect && wr.op != wr_op::read_as_write) {
      p.offset = i * cfg_.mtu;
      p.length = wr.length - p.offset < cfg_.mtu ? wr.length - p.offset : cfg_.mtu;
    }
    if (wr.op == wr_op::read_as_write) {  // one request: the source at the responder, the sink here
      p.va = wr.remote_va;
      p.rkey = wr.rkey;
      p.dmalen = wr.length;
      p.sink_va = wr.sink_va;
      p.sink_rkey = wr.sink_rkey;
    } else if (wr.op == wr_op::read) {  // packet i of a READ asks for the rest from response i
      p.va = wr.remote_va + std::uint64_t{i} * cfg_.mtu;
      p.rkey = wr.rkey;
      p.dmalen = wr.length - i * cfg_.mtu;
    } else if ((wr.op == wr_op::write || wr.op == wr_op::write_imm) && i == 0) {
      p.va = wr.remote_va;
      p.rkey = wr.rkey;
      p.dmalen = wr.length;
    }
    if (wr.op == wr_op::compare_swap || wr.op == wr_op::fetch_add) {
      p.va = wr.remote_va;
      p.rkey = wr.rkey;
      p.swap = wr.swap;
      p.compare = wr.compare;
    }
    if ((wr.op == wr_op::send_imm || wr.op == wr_op::write_imm) && last) p.imm = wr.imm;
    // The transport headers' fields, on the packets whose headers carry them.
    const ib::opcode_info& oi = p.info();
    if (oi.has(ib::ext::dceth)) p.dc_key = wr.dc_key;
    if (oi.has(ib::ext::dcceth)) p.dct = wr.dest_qp;
    if (oi.has(ib::ext::rdeth)) p.eecnxt = wr.dci;
    if (oi.has(ib::ext::dcceth)) p.dci = wr.dci;
    if (oi.has(ib::ext::deth)) p.q_key = wr.q_key;
    return p;
  }
  constexpr bool credit_blocks(const wqe& w) const {
    return cfg_.honor_credits && (w.wr.op == wr_op::send || w.wr.op == wr_op::send_imm) && cur_pkt_ == 0 &&
           credits_ == 0 && una_ != nxt_;
  }
  constexpr step_result run(req_event e, const req_input& in, qp_sink& out) {
    const step_result r = step<row>(table(), st_, *this, e, in, out);
    if (st_ == req_state::active || st_ == req_state::idle) pump(in.now, out);
    if (st_ == req_state::active && q_.empty()) st_ = req_state::idle;
    return r;
  }

  requester_config cfg_;
  static_ring<wqe, SQ> q_{};
  std::size_t cur_ = 0;        ///< next WQE to send from
  std::uint32_t cur_pkt_ = 0;  ///< its next packet
  std::uint32_t next_psn_;     ///< PSN the next posted WQE gets
  std::uint32_t nxt_;          ///< PSN of the next packet to send
  std::uint32_t una_;          ///< oldest unacknowledged PSN
  std::uint32_t max_sent_;     ///< one past the highest PSN sent
  std::uint32_t wait_psn_ = 0;
  std::optional<std::uint32_t> nak_from_{};  ///< the PSN of the last NAK-sequence go-back, until acknowledged
  std::uint8_t retry_left_, rnr_left_;
  std::uint32_t credits_ = 1;  ///< from the last ACK's AETH (unlimited: large)
  std::optional<time_ns> rto_, wait_;
  bool held_ = false;
  req_state st_ = req_state::idle;
  counters stats_{};

 public:
  /// The transition table (detail::requester_rows).
  static constexpr std::span<const row> table();
};

namespace detail {
template <std::size_t SQ>
struct requester_rows {
  using M = requester<SQ>;
  static constexpr auto rows = std::to_array<typename M::row>({
      {req_state::idle, req_event::post, "queue has room", &M::g_room, req_state::active, "queue; send", &M::a_queue},
      {req_state::active, req_event::post, "queue has room", &M::g_room, req_state::active, "queue; send", &M::a_queue},
      {req_state::rnr_wait, req_event::post, "queue has room", &M::g_room, req_state::rnr_wait, "queue", &M::a_queue},
      {req_state::paused, req_event::post, "queue has room", &M::g_room, req_state::paused, "queue", &M::a_queue},
      {req_state::idle, req_event::post, "else", nullptr, req_state::idle, "refuse queue_full", &M::a_refuse_full},
      {req_state::active, req_event::post, "else", nullptr, req_state::active, "refuse queue_full", &M::a_refuse_full},
      {req_state::rnr_wait, req_event::post, "else", nullptr, req_state::rnr_wait, "refuse queue_full", &M::a_refuse_full},
      {req_state::paused, req_event::post, "else", nullptr, req_state::paused, "refuse queue_full", &M::a_refuse_full},
      {req_state::error, req_event::post, "", nullptr, req_state::error, "complete flushed", &M::a_flush_one},
      {req_state::active, req_event::ack, "acknowledges everything", &M::g_all_done, req_state::idle, "complete; cancel timer", &M::a_advance},
      {req_state::active, req_event::ack, "else", nullptr, req_state::active, "complete what it covers; re-arm timer", &M::a_advance},
      {req_state::rnr_wait, req_event::ack, "", nullptr, req_state::rnr_wait, "complete what it covers", &M::a_advance},
      {req_state::paused, req_event::ack, "", nullptr, req_state::paused, "complete what it covers", &M::a_advance},
      {req_state::active, req_event::nak_seq, "", nullptr, req_state::active, "go back to the NAK's PSN", &M::a_go_back},
      {req_state::active, req_event::nak_fatal, "", nullptr, req_state::error, "complete with the NAK's error; flush the rest", &M::a_fail},
      {req_state::active, req_event::rnr_nak, "rnr_retry left (7 = infinite)", &M::g_rnr_left, req_state::rnr_wait, "count; arm RNR timer", &M::a_rnr_wait},
      {req_state::active, req_event::rnr_nak, "else", nullptr, req_state::error, "complete rnr_retry_exceeded; flush the rest", &M::a_rnr_exceeded},
      {req_state::active, req_event::page_fault, "", nullptr, req_state::paused, "stop; arm the fault delay (not counted)", &M::a_pause},
      {req_state::paused, req_event::page_fault, "", nullptr, req_state::paused, "re-arm the fault delay", &M::a_pause},
      {req_state::active, req_event::timeout, "retry_cnt left (7 = infinite)", &M::g_retry_left, req_state::active, "count; go back to the oldest unacknowledged PSN", &M::a_retransmit},
      {req_state::active, req_event::timeout, "else", nullptr, req_state::error, "complete retry_exceeded; flush the rest", &M::a_retry_exceeded},
      {req_state::rnr_wait, req_event::timeout, "", nullptr, req_state::rnr_wait, "ignore (no retransmission, no count)", &M::a_ignore_timeout},
      {req_state::paused, req_event::timeout, "", nullptr, req_state::paused, "ignore (no retransmission, no count)", &M::a_ignore_timeout},
      {req_state::rnr_wait, req_event::wait_over, "", nullptr, req_state::active, "go back to the RNR NAK's PSN", &M::a_resume},
      {req_state::paused, req_event::wait_over, "", nullptr, req_state::active, "resume from the faulted PSN", &M::a_resume},
      {req_state::paused, req_event::resolved, "", nullptr, req_state::active, "resume from the faulted PSN", &M::a_resume},
      {req_state::active, req_event::moved, "RC", &M::g_rc, req_state::active, "go back to the oldest unacknowledged PSN (not counted); re-arm timer", &M::a_moved},
  });
};
}  // namespace detail

template <std::size_t SQ>
constexpr std::span<const typename requester<SQ>::row> requester<SQ>::table() {
  return detail::requester_rows<SQ>::rows;
}

template <std::size_t SQ>
constexpr void requester<SQ>::pump(time_ns now, qp_sink& out) {
  complete_done(out);
  if (st_ != req_state::active && st_ != req_state::idle) return;
  qp_action_t* last_sent = nullptr;  // this call's last packet
  while (!held_ && cur_ < q_.size() && window_open() && out.room() > timer_room) {
    wqe& w = q_[cur_];
    if (credit_blocks(w)) break;
    packet p = make_packet(w, cur_pkt_);
    // The packet that fills the window asks for an ACK too: else, with a window smaller than
    // ackreq_every, nothing in flight would and only the timeout could open it again.
    if (reliable() && static_cast<std::uint32_t>(ib::psn_diff(ib::psn_add(p.psn, 1), una_)) >= cfg_.window) p.ack_req = true;
    out.push(qp_action::transmit{p});
    last_sent = &out.back();
    ++stats_.sent;
    if (ib::psn_before(p.psn, max_sent_)) ++stats_.retransmitted;
    // a READ request is one packet that takes the PSNs of all its responses
    cur_pkt_ = w.wr.op == wr_op::read ? w.npkts - 1 : cur_pkt_;
    nxt_ = ib::psn_add(w.first_psn, cur_pkt_ + 1);
    if (ib::psn_after(nxt_, max_sent_)) max_sent_ = nxt_;
    if (++cur_pkt_ == w.npkts) {
      cur_pkt_ = 0;
      ++cur_;
      if (!reliable()) w.done = true;  // UC / UD complete once sent
    }
    if (reliable() && !rto_) {
      rto_ = now + cfg_.timeout;
      out.push(qp_action::set_timer{timer_kind::retransmit, *rto_});
    }
  }
  // The last packet asks for the ACK when nothing more leaves until an ACK or a new work request
  // (the queue is empty, or its next SEND waits for credits), and when it ends a message and the
  // pump stopped for room or a hold (the caller may not pump again soon: a paced or classed QP).
  if (last_sent && reliable()) {
    const bool stops = cur_ >= q_.size() || credit_blocks(q_[cur_]);
    if (stops || cur_pkt_ == 0) std::get<qp_action::transmit>(*last_sent).pkt.ack_req = true;
  }
  if (!reliable()) {
    una_ = nxt_;
    complete_done(out);
  }
  if (st_ == req_state::idle && !q_.empty()) st_ = req_state::active;
}

template <std::size_t SQ>
constexpr step_result requester<SQ>::post(const work_request& wr, time_ns now, qp_sink& out) {
  if (out.room() < min_room) return {-1, errc::actions_full};
  if (!supports(cfg_.svc, wr.op)) return {-1, errc::invalid_argument};
  if (cfg_.svc == service::ud && wr.length > cfg_.mtu) return {-1, errc::too_large};
  if ((wr.op == wr_op::compare_swap || wr.op == wr_op::fetch_add) && (wr.remote_va % ib::atomic_operand_size) != 0) return {-1, errc::invalid_argument};
  return run(req_event::post, {.wr = wr, .now = now}, out);
}

template <std::size_t SQ>
constexpr step_result requester<SQ>::on_packet(const packet& p, time_ns now, qp_sink& out) {
  if (out.room() < min_room) return {-1, errc::actions_full};
  if (!p.known()) return {-1, errc::event_not_allowed};
  const ib::opcode_info* oi = &p.info();
  if (oi->request || !reliable()) return {-1, errc::event_not_allowed};
  const ib::syndrome syn{p.aeth.syndrome};
  const bool has_aeth = oi->has(ib::ext::aeth);
  // A PSN sequence error NAK may name the PSN after the highest sent: the responder has all
  // of it (a NAK acknowledges what precedes its PSN), as a responder that moved says.
  const bool nak_after_all = has_aeth && syn.kind() == ib::aeth_kind::nak && syn.nak_reason() == ib::nak_code::psn_sequence_error &&
                             p.psn == max_sent_ && una_ != max_sent_;
  if (!outstanding(p.psn) && !nak_after_all) {  // stale: a duplicate, or for a packet already acknowledged
    ++stats_.stale;
    return {-1, errc{}};
  }
  if (has_aeth && syn.credits()) credits_ = *syn.credits() == 31 ? 0xFFFFFFFF : ib::credit_counts[*syn.credits()];
  req_event e = req_event::ack;
  if (has_aeth && syn.kind() == ib::aeth_kind::nak)
    e = syn.nak_reason() == ib::nak_code::psn_sequence_error ? req_event::nak_seq : req_event::nak_fatal;
  if (has_aeth && syn.kind() == ib::aeth_kind::rnr_nak) {
    // The packet it names needed no receive: no receive can have been missing (ib::needs_receive).
    const std::size_t i = wqe_of(p.psn);
    const bool fault_op =
        i < q_.size() &&
        !ib::needs_receive(ib::info(request_opcode(cfg_.svc, q_[i].wr, static_cast<std::uint32_t>(ib::psn_diff(p.psn, q_[i].first_psn)), q_[i].npkts)));
    e = cfg_.page_fault_aware && fault_op ? req_event::page_fault : req_event::rnr_nak;
  }
  return run(e, {.pkt = p, .now = now}, out);
}

template <std::size_t SQ>
constexpr step_result requester<SQ>::on_timer(timer_kind k, time_ns now, qp_sink& out) {
  if (out.room() < min_room) return {-1, errc::actions_full};
  const auto& d = k == timer_kind::retransmit ? rto_ : wait_;
  if (!d || now < *d) return {-1, errc{}};
  if (k == timer_kind::wait) return run(req_event::wait_over, {.now = now}, out);
  if (st_ == req_state::active && una_ == max_sent_) {  // nothing outstanding: disarm
    rto_.reset();
    return {-1, errc{}};
  }
  return run(req_event::timeout, {.now = now}, out);
}

template <std::size_t SQ>
constexpr step_result requester<SQ>::resolved(time_ns now, qp_sink& out) {
  if (out.room() < min_room) return {-1, errc::actions_full};
  return run(req_event::resolved, {.now = now}, out);
}

template <std::size_t SQ>
constexpr step_result requester<SQ>::moved(time_ns now, qp_sink& out) {
  if (out.room() < min_room) return {-1, errc::actions_full};
  return run(req_event::moved, {.now = now}, out);
}

template <std::size_t SQ>
inline constexpr machine_info<typename requester<SQ>::row> requester_info{
    "requester", "idle", requester<SQ>::table()};

// ==== responder ==============================================================================

/// What a request does to the memory it names.
enum class access_kind : std::uint8_t { read, write, atomic };
inline constexpr std::array<wire::named_value, 3> access_kind_names{{
    {access_kind::read, "read"}, {access_kind::write, "write"}, {access_kind::atomic, "atomic"}}};
constexpr std::span<const wire::named_value> wire_enum_names(access_kind) { return access_kind_names; }

/// Memory as the responder sees it: the caller's registrations and page residency.
struct access_result {
  enum kind_t : std::uint8_t { ok, access_error, page_fault } kind = ok;
  std::uint32_t delay_us = 0;  ///< page_fault: expected time until the page is resident
};
/// What a responder's memory says of a SEND packet's receive buffer (memory_port::receive_fits).
enum class receive_fit : std::uint8_t { fits, too_long, unusable };

struct memory_port {
  void* ctx = nullptr;
  /// May (rkey, va, len) be accessed so? nullptr: everything is allowed and resident. `probe`:
  /// the responder only asks (placement(), judge()); a page that is not resident is reported and
  /// no fault is raised for it.
  access_result (*check)(void* ctx, std::uint32_t rkey, std::uint64_t va, std::uint32_t len, access_kind kind, bool probe) = nullptr;
  /// Performs an atomic and returns the value before (nullptr: memory reads as 0).
  std::uint64_t (*atomic)(void* ctx, std::uint32_t rkey, std::uint64_t va, bool cmp_swap, std::uint64_t swap,
                          std::uint64_t compare) = nullptr;
  /// Does a SEND packet of len bytes fit at byte `offset` of its message's receive buffer (the
  /// buffer of the message in progress; at offset 0, the next receive's)? nullptr: always.
  /// A packet that does not fit is an invalid request (NAK; a local length error there); one
  /// whose receive buffer cannot be written (a key that no longer allows it) is a remote
  /// operational error (NAK; a local protection error there).
  receive_fit (*receive_fits)(void* ctx, std::uint32_t offset, std::uint32_t len) = nullptr;
};

/// What the responder does when a packet meets a page that is not resident (page-fault explicit flow control).
enum class fault_policy : std::uint8_t {
  page_fault_ack,  ///< send a page-fault ACK (RNR NAK with the delay) and wait for the retransmission
  silent_drop,     ///< drop the packet; the requester's timeout recovers (the comparison baseline)
};

struct responder_config {
  service svc = service::rc;
  std::uint32_t mtu = 4096;
  std::uint32_t start_psn = 0;
  fault_policy on_fault = fault_policy::page_fault_ack;
  std::uint32_t qp = 0;       ///< this QP's number (UD: checked against dest_qp)
  std::uint32_t peer_qp = 0;  ///< RC: the requester's QP, where responses go
  /// The RNR NAK timer a genuine RNR (no receive posted) announces, microseconds; rounded up
  /// to the IBTA table (the QP's min_rnr_timer).
  std::uint32_t min_rnr_timer_us = 10;
  /// Cell framing: page-fault ACKs carry the exact delay (packet::fault_delay_us); RoCE
  /// rounds it up to the RNR timer table.
  bool exact_fault_delay = false;
  /// UD: drop requests whose DETH Q_Key is not q_key (IBTA 10.2.4: the QP's Q_Key).
  bool check_q_key = false;
  std::uint32_t q_key = 0;
};

enum class resp_state : std::uint8_t { ready, nak_sent, faulted, error };
inline constexpr std::array<wire::named_value, 4> resp_state_names{{
    {resp_state::ready, "ready"},
    {resp_state::nak_sent, "nak_sent"},
    {resp_state::faulted, "faulted"},
    {resp_state::error, "error"},
}};
constexpr std::span<const wire::named_value> wire_enum_names(resp_state) { return resp_state_names; }
/// The responder classifies each request packet before the table sees it.
enum class resp_event : std::uint8_t { execute, no_receive, fault_ack, fault_drop, access_error, invalid, duplicate, ahead, operational_error, moved };
inline constexpr std::array<wire::named_value, 10> resp_event_names{{
    {resp_event::execute, "in-sequence request"},
    {resp_event::no_receive, "in-sequence SEND, no receive posted"},
    {resp_event::fault_ack, "in-sequence, page not resident (ACK policy)"},
    {resp_event::fault_drop, "in-sequence, page not resident (drop policy)"},
    {resp_event::access_error, "in-sequence, access violation"},
    {resp_event::invalid, "in-sequence, invalid opcode sequence"},
    {resp_event::duplicate, "duplicate (PSN before expected)"},
    {resp_event::ahead, "ahead (PSN after expected)"},
    {resp_event::operational_error, "in-sequence SEND, its receive buffer unusable"},
    {resp_event::moved, "moved to another device"},
}};
constexpr std::span<const wire::named_value> wire_enum_names(resp_event) { return resp_event_names; }

struct resp_input {
  packet pkt{};
  std::uint32_t delay_us = 0;
  invalid_reason why = invalid_reason::none;  ///< resp_event::invalid: the check that failed
};

/// The responder of one queue pair, remembering RD READ / atomic requests for replay.
template <std::size_t RD = 16>
class responder {
 public:
  using row = transition<responder, resp_state, resp_event, resp_input, qp_sink>;
  struct rd_resource {
    std::uint32_t first_psn = 0, npkts = 0;
    bool atomic = false;
    packet req{};
    std::uint64_t orig = 0;
  };
  struct counters {
    std::uint64_t executed = 0, duplicates = 0, seq_naks = 0, rnr_naks = 0, page_faults = 0, dropped = 0, messages = 0;
  };

  constexpr explicit responder(responder_config c = {}, memory_port mem = {}) : cfg_(c), mem_(mem), epsn_(c.start_psn & ib::psn_mask) {}

  /// The least sink room on_packet() needs: a placement, a receive completion and an ACK. READ
  /// and atomic responses are queued and paced by pump() (a READ of any size runs through a sink
  /// of this room), so they need none of it.
  static constexpr std::size_t min_room = 3;
  /// Single ACKs / NAKs one responder holds behind unsent response streams (consecutive plain
  /// ACKs merge into one, so these are NAKs and ACKs between streams). A choice: a caller that
  /// pumps after each packet never holds more than one.
  static constexpr std::size_t held_acks = 4;
  /// Entries one responder holds until pump() sends them: RD response streams (READ / atomic,
  /// first runs and replays) and held_acks single ACKs. Beyond it on_packet() refuses queue_full.
  static constexpr std::size_t response_queue = RD + held_acks;

  /// A request packet addressed to this QP. Errors: actions_full (room below min_room),
  /// queue_full (a READ, atomic or ACK would exceed response_queue; pump() first),
  /// event_not_allowed (not a request, or a UD packet for another QP). Nothing is applied then.
  constexpr step_result on_packet(const packet& p, qp_sink& out);
  /// Sends queued responses while the sink has room.
  constexpr void pump(qp_sink& out);
  /// The QP now runs on another device (spec/migration.md §5): requests its peer sent during
  /// the move may be lost. An RC responder that is ready, or has NAKed, sends a PSN sequence
  /// error NAK naming the PSN it expects, so the peer resends from there without waiting for
  /// its timer; its state stays (it saw no gap: a gap it sees later is NAKed too). A peer that
  /// went back to that same PSN before the move takes the NAK for a duplicate and recovers by
  /// its timer (a peer with nothing outstanding drops it, as a NAK naming a PSN it has not
  /// sent; one whose requests all arrived takes it as their ACK). Errors: actions_full, queue_full (as on_packet), event_not_allowed (any other
  /// state or service: nothing is sent).
  constexpr step_result moved(qp_sink& out) {
    if (const errc e = refusal(out); e != errc{}) return {-1, e};
    return step<row>(table(), st_, *this, resp_event::moved, {}, out);
  }
  /// Where on_packet(p) would place p's payload if it came now: the placement of a SEND or
  /// WRITE packet this responder would execute (in sequence, its memory allowed), else nullopt.
  /// Changes nothing (the memory port's check is asked, as on_packet asks it). A caller may
  /// place the payload there while it verifies the frame, then hand the packet to on_packet,
  /// which emits this same placement.
  constexpr std::optional<qp_action::place> placement(const packet& p) const {
    if (!p.known() || !p.info().request || st_ == resp_state::error) return std::nullopt;
    if (cfg_.svc == service::ud && (p.dest_qp != cfg_.qp || (cfg_.check_q_key && p.q_key != cfg_.q_key))) return std::nullopt;
    if (!p.info().is(ib::op_class::send) && !p.info().is(ib::op_class::write)) return std::nullopt;
    std::uint32_t delay = 0;
    if (classify(p, delay, nullptr, true) != resp_event::execute) return std::nullopt;
    return place_of(p);
  }
  /// What on_packet(p) would make of request p now (resp_event::execute for a responder in
  /// error: it drops it), and for an invalid one, why. Changes nothing. An observer replaying
  /// a capture through a responder asks it before it hands the packet on.
  constexpr resp_event judge(const packet& p, invalid_reason* why = nullptr) const {
    if (why) *why = invalid_reason::none;
    std::uint32_t delay = 0;
    return st_ == resp_state::error ? resp_event::execute : classify(p, delay, why, true);
  }
  /// For an observer that follows a sender past a request judge() calls invalid: executes p as
  /// if it were valid (p must be in sequence), so the sender's message goes on.
  constexpr void force(const packet& p, qp_sink& out) { execute(p, out); }
  /// The path MTU, for an observer that learns it from the traffic.
  constexpr void set_mtu(std::uint32_t mtu) { cfg_.mtu = mtu; }
  constexpr std::uint32_t mtu() const { return cfg_.mtu; }
  /// Why on_packet() would refuse any packet now (actions_full, queue_full), or errc{}.
  constexpr errc refusal(const qp_sink& out) const {
    if (out.room() < min_room) return errc::actions_full;
    if (tx_.full()) return errc::queue_full;
    return {};
  }
  /// An ACK, NAK or RNR NAK answering req, with this QP's MSN: sent now, or queued behind the
  /// response streams before it (responses go out in PSN order). For a layer that answers on
  /// the responder's behalf (the DC target's connects); refusal() must be errc{}.
  constexpr void acknowledge(const packet& req, ib::syndrome s, qp_sink& out) { respond(req, s, out); }
  /// The write back of the READ_AS_WRITE of PSN psn completed (ok), or failed (its ACK becomes a
  /// NAK remote access error and the responder enters error). Then pump() sends it and what
  /// waited behind it. An unknown PSN changes nothing.
  constexpr void write_back_done(std::uint32_t psn, bool ok) {
    for (pending& t : tx_)
      if (!t.stream && !t.ready && t.single.psn == psn) {
        t.ready = true;
        // its ACK is what acknowledges it: a duplicate is re-acknowledged from here on
        if (ok && ib::psn_after(psn, acked_psn_)) acked_psn_ = psn;
        if (!ok) {
          t.single.aeth.syndrome = ib::syndrome::nak(ib::nak_code::remote_access_error).raw;
          st_ = resp_state::error;
        }
        return;
      }
  }
  /// Responses are queued and one can go (pump() has work).
  constexpr bool wants_to_send() const { return !tx_.empty() && tx_.front().ready; }
  /// The application posted n receive buffers.
  constexpr void post_receive(std::uint32_t n) { recv_ += n; }
  /// Receives available are n (a shared receive queue's count, set before each packet).
  constexpr void set_receives(std::uint32_t n) { recv_ = n; }
  /// Re-point the memory port (after copying a machine whose port's context moved with it).
  constexpr void set_memory(memory_port m) { mem_ = m; }

  constexpr resp_state state() const { return st_; }
  constexpr std::uint32_t expected_psn() const { return epsn_; }
  constexpr std::uint32_t msn() const { return msn_; }
  constexpr std::uint32_t receives() const { return recv_; }
  constexpr const counters& stats() const { return stats_; }
  template <class H>
  constexpr void digest(H& h) const {
    h(static_cast<std::uint64_t>(st_));
    h(epsn_);
    h(acked_psn_);
    h(msn_);
    h(recv_);
    h(in_msg_);
    h(msg_bytes_);
    h(rd_.size());
    for (const rd_resource& r : rd_) h(r.first_psn);
    h(tx_.size());
    for (const pending& t : tx_) {
      h(t.r.first_psn);
      h(t.next);
    }
  }
  /// DC: a connect starts a new stream at psn (the target resets the responder).
  constexpr void restart(std::uint32_t psn) {
    epsn_ = psn & ib::psn_mask;
    acked_psn_ = ib::psn_add(epsn_, -1);
    st_ = resp_state::ready;
    in_msg_ = false;
    rd_.clear();
  }

  static constexpr errc a_execute(responder& m, const resp_input& in, qp_sink& out) {
    m.execute(in.pkt, out);
    return {};
  }
  static constexpr errc a_rnr(responder& m, const resp_input& in, qp_sink& out) {
    ++m.stats_.rnr_naks;
    m.respond(in.pkt, ib::syndrome::rnr_nak(ib::rnr_from_us(m.cfg_.min_rnr_timer_us)), out);
    return {};
  }
  static constexpr errc a_fault_ack(responder& m, const resp_input& in, qp_sink& out) {
    ++m.stats_.page_faults;
    const ib::aeth a = ib::page_fault_ack(m.msn_, in.delay_us);
    m.respond(in.pkt, ib::syndrome{a.syndrome}, out, m.cfg_.exact_fault_delay ? in.delay_us : 0);
    return {};
  }
  static constexpr errc a_drop(responder& m, const resp_input& in, qp_sink& out) {
    ++m.stats_.dropped;
    out.push(qp_action::dropped{in.pkt.psn, errc{}});
    return {};
  }
  static constexpr errc a_nak_access(responder& m, const resp_input& in, qp_sink& out) {
    m.refuse(in, ib::nak_code::remote_access_error, out);
    return {};
  }
  static constexpr errc a_nak_operational(responder& m, const resp_input& in, qp_sink& out) {
    m.refuse(in, ib::nak_code::remote_operational_error, out);
    return {};
  }
  static constexpr errc a_nak_invalid(responder& m, const resp_input& in, qp_sink& out) {
    m.refuse(in, ib::nak_code::invalid_request, out);
    return {};
  }
  static constexpr errc a_nak_seq(responder& m, const resp_input& in, qp_sink& out) {
    ++m.stats_.seq_naks;
    packet at = in.pkt;
    at.psn = m.epsn_;  // the NAK names the PSN expected
    m.respond(at, ib::syndrome::nak(ib::nak_code::psn_sequence_error), out);
    return {};
  }
  static constexpr errc a_nak_moved(responder& m, const resp_input&, qp_sink& out) {
    ++m.stats_.seq_naks;
    packet at{};
    at.psn = m.epsn_;
    m.respond(at, ib::syndrome::nak(ib::nak_code::psn_sequence_error), out);
    return {};
  }
  static constexpr errc a_duplicate(responder& m, const resp_input& in, qp_sink& out) {
    ++m.stats_.duplicates;
    m.duplicate(in.pkt, out);
    return {};
  }
  static constexpr errc a_uc_resync(responder& m, const resp_input& in, qp_sink& out) {
    ++m.stats_.dropped;  // UC: a gap abandons the message in progress; resync on a first/only
    m.in_msg_ = false;
    const ib::position pos = in.pkt.info().pos;
    if (pos == ib::position::first || pos == ib::position::only) {
      m.epsn_ = in.pkt.psn;
      m.execute(in.pkt, out);
    } else {
      out.push(qp_action::dropped{in.pkt.psn, errc::event_not_allowed});
    }
    return {};
  }

  static constexpr bool g_reliable(const responder& m, const resp_input&) { return m.cfg_.svc != service::uc; }
  static constexpr bool g_rc(const responder& m, const resp_input&) { return m.cfg_.svc == service::rc; }

  /// The transition table (detail::responder_rows).
  static constexpr std::span<const row> table();

 private:
  friend struct testing::access;  // flow/testing.hpp
  struct pending {
    bool stream = false;  ///< READ / atomic responses of r; else one ACK / NAK
    rd_resource r{};
    std::uint32_t next = 0;  ///< the stream's next response
    std::uint8_t syndrome = 0;
    std::uint32_t msn = 0;
    packet single{};
    bool ready = true;  ///< false: a READ_AS_WRITE's ACK waiting for write_back_done()
  };
  constexpr bool reliable() const { return cfg_.svc == service::rc || cfg_.svc == service::dc; }
  /// The event request p is (probe: for placement() and judge(); raises no page fault).
  constexpr resp_event classify(const packet& p, std::uint32_t& delay, invalid_reason* why, bool probe) const;
  /// A NAK that ends the responder, and the request_error action saying so (RC, DC).
  constexpr void refuse(const resp_input& in, ib::nak_code code, qp_sink& out) {
    respond(in.pkt, ib::syndrome::nak(code), out);
    if (reliable()) out.push(qp_action::request_error{in.pkt.psn, code, in.why});
  }
  /// An ACK, NAK or RNR NAK for req: sent now, or queued behind response streams (PSN order).
  constexpr void respond(const packet& req, ib::syndrome s, qp_sink& out, std::uint32_t fault_delay_us = 0) {
    if (!reliable()) return;
    packet a{};
    a.opcode = opcode_on(cfg_.svc, ib::operation::acknowledge);
    a.psn = req.psn;
    a.dest_qp = cfg_.svc == service::dc ? req.dc_initiator() : cfg_.peer_qp;
    a.aeth = {.syndrome = s.raw, .msn = msn_};
    a.dc_key = req.dc_key;
    if (cfg_.svc == service::dc) a.eecnxt = req.dc_initiator();
    a.fault_delay_us = fault_delay_us;
    if (tx_.empty()) {
      out.push(qp_action::transmit{a});
      return;
    }
    // A plain ACK behind another plain ACK replaces it (the later one acknowledges more).
    pending& b = tx_.back();
    if (!b.stream && b.ready && s.kind() == ib::aeth_kind::ack && ib::syndrome{b.single.aeth.syndrome}.kind() == ib::aeth_kind::ack) {
      b.single = a;
      return;
    }
    tx_.push_back({.stream = false, .single = a});
  }
  /// READ responses for dmalen bytes (at least one).
  constexpr std::uint32_t read_packets(std::uint32_t dmalen) const {
    return dmalen == 0 ? 1 : static_cast<std::uint32_t>((std::uint64_t{dmalen} + cfg_.mtu - 1) / cfg_.mtu);
  }
  /// A READ within IBTA's 2^31-byte message whose responses take less than half the PSN space.
  constexpr bool read_ok(std::uint32_t dmalen) const { return dmalen <= 0x8000'0000u && read_packets(dmalen) < ib::psn_half; }
  constexpr ib::syndrome credit_ack() const { return ib::syndrome::ack(ib::credit_code(recv_)); }
  constexpr void execute(const packet& p, qp_sink& out);
  /// The placement of SEND / WRITE packet p, executed now (its message's, continued unless p
  /// starts one).
  constexpr qp_action::place place_of(const packet& p) const {
    const bool is_send = p.info().is(ib::op_class::send);
    if (p.info().starts()) return {is_send, msn_, is_send ? 0 : p.va, is_send ? 0 : p.rkey, 0, p.length, p.psn, p.wr_id};
    return {is_send, msn_, is_send ? 0 : msg_va_ + msg_bytes_, is_send ? 0 : msg_rkey_, msg_bytes_, p.length, p.psn, p.wr_id};
  }
  constexpr void duplicate(const packet& p, qp_sink& out);
  /// Queues r's responses (with the AETH it carries now) and sends what the sink allows.
  constexpr void queue_responses(const rd_resource& r, qp_sink& out) {
    tx_.push_back({.stream = true, .r = r, .syndrome = credit_ack().raw, .msn = msn_});
    pump(out);
  }
  constexpr packet response(const pending& t, std::uint32_t i) const;
  constexpr void remember(const rd_resource& r) {
    if (rd_.full()) rd_.pop_front();
    rd_.push_back(r);
  }

  responder_config cfg_;
  memory_port mem_;
  std::uint32_t epsn_;
  std::uint32_t acked_psn_ = ib::psn_add(epsn_, -1);  ///< the latest SEND / WRITE PSN executed
  std::uint32_t msn_ = 0;
  std::uint32_t recv_ = 0;
  bool in_msg_ = false;      ///< a multi-packet SEND or WRITE is in progress
  bool msg_is_send_ = false;
  std::uint64_t msg_va_ = 0;
  std::uint32_t msg_rkey_ = 0, msg_bytes_ = 0, msg_dmalen_ = 0;
  static_ring<rd_resource, RD> rd_{};
  static_ring<pending, response_queue> tx_{};
  resp_state st_ = resp_state::ready;
  counters stats_{};
};

namespace detail {
template <std::size_t RD>
struct responder_rows {
  using M = responder<RD>;
  static constexpr auto rows = std::to_array<typename M::row>({
      {resp_state::ready, resp_event::execute, "", nullptr, resp_state::ready, "place / deliver / respond; ACK if AckReq", &M::a_execute},
      {resp_state::nak_sent, resp_event::execute, "", nullptr, resp_state::ready, "place / deliver / respond; ACK if AckReq", &M::a_execute},
      {resp_state::faulted, resp_event::execute, "", nullptr, resp_state::ready, "place / deliver / respond; ACK if AckReq", &M::a_execute},
      {resp_state::ready, resp_event::no_receive, "", nullptr, resp_state::ready, "RNR NAK", &M::a_rnr},
      {resp_state::nak_sent, resp_event::no_receive, "", nullptr, resp_state::ready, "RNR NAK", &M::a_rnr},
      {resp_state::faulted, resp_event::no_receive, "", nullptr, resp_state::ready, "RNR NAK", &M::a_rnr},
      {resp_state::ready, resp_event::fault_ack, "", nullptr, resp_state::faulted, "page-fault ACK (RNR NAK, delay)", &M::a_fault_ack},
      {resp_state::nak_sent, resp_event::fault_ack, "", nullptr, resp_state::faulted, "page-fault ACK (RNR NAK, delay)", &M::a_fault_ack},
      {resp_state::faulted, resp_event::fault_ack, "", nullptr, resp_state::faulted, "page-fault ACK (RNR NAK, delay)", &M::a_fault_ack},
      {resp_state::ready, resp_event::fault_drop, "", nullptr, resp_state::ready, "drop silently", &M::a_drop},
      {resp_state::nak_sent, resp_event::fault_drop, "", nullptr, resp_state::nak_sent, "drop silently", &M::a_drop},
      {resp_state::ready, resp_event::access_error, "", nullptr, resp_state::error, "NAK remote access error", &M::a_nak_access},
      {resp_state::nak_sent, resp_event::access_error, "", nullptr, resp_state::error, "NAK remote access error", &M::a_nak_access},
      {resp_state::faulted, resp_event::access_error, "", nullptr, resp_state::error, "NAK remote access error", &M::a_nak_access},
      {resp_state::ready, resp_event::operational_error, "", nullptr, resp_state::error, "NAK remote operational error", &M::a_nak_operational},
      {resp_state::nak_sent, resp_event::operational_error, "", nullptr, resp_state::error, "NAK remote operational error", &M::a_nak_operational},
      {resp_state::faulted, resp_event::operational_error, "", nullptr, resp_state::error, "NAK remote operational error", &M::a_nak_operational},
      {resp_state::ready, resp_event::invalid, "", nullptr, resp_state::error, "NAK invalid request", &M::a_nak_invalid},
      {resp_state::nak_sent, resp_event::invalid, "", nullptr, resp_state::error, "NAK invalid request", &M::a_nak_invalid},
      {resp_state::faulted, resp_event::invalid, "", nullptr, resp_state::error, "NAK invalid request", &M::a_nak_invalid},
      {resp_state::ready, resp_event::duplicate, "", nullptr, resp_state::ready, "re-ACK; replay READ / atomic", &M::a_duplicate},
      {resp_state::nak_sent, resp_event::duplicate, "", nullptr, resp_state::nak_sent, "re-ACK; replay READ / atomic", &M::a_duplicate},
      {resp_state::faulted, resp_event::duplicate, "", nullptr, resp_state::faulted, "re-ACK; replay READ / atomic", &M::a_duplicate},
      {resp_state::ready, resp_event::ahead, "reliable", &M::g_reliable, resp_state::nak_sent, "NAK PSN sequence error", &M::a_nak_seq},
      {resp_state::ready, resp_event::ahead, "UC", nullptr, resp_state::ready, "abandon message; resync on first/only", &M::a_uc_resync},
      {resp_state::nak_sent, resp_event::ahead, "", nullptr, resp_state::nak_sent, "drop (NAK sent once)", &M::a_drop},
      {resp_state::faulted, resp_event::ahead, "", nullptr, resp_state::faulted, "drop (waiting for the faulted PSN)", &M::a_drop},
      {resp_state::error, resp_event::execute, "any request", nullptr, resp_state::error, "drop", &M::a_drop},
      {resp_state::ready, resp_event::moved, "RC", &M::g_rc, resp_state::ready, "NAK PSN sequence error at the expected PSN", &M::a_nak_moved},
      {resp_state::nak_sent, resp_event::moved, "RC", &M::g_rc, resp_state::nak_sent, "NAK PSN sequence error at the expected PSN", &M::a_nak_moved},
  });
};
}  // namespace detail

template <std::size_t RD>
constexpr std::span<const typename responder<RD>::row> responder<RD>::table() {
  return detail::responder_rows<RD>::rows;
}

template <std::size_t RD>
constexpr resp_event responder<RD>::classify(const packet& p, std::uint32_t& delay, invalid_reason* why, bool probe) const {
  const auto invalid = [&](invalid_reason r) {
    if (why) *why = r;
    return resp_event::invalid;
  };
  const std::int32_t d = ib::psn_diff(p.psn, epsn_);
  if (cfg_.svc != service::ud) {
    if (d < 0) return reliable() ? resp_event::duplicate : resp_event::ahead;
    if (d > 0) return resp_event::ahead;
  }
  using ib::op_class;
  const ib::opcode_info& o = p.info();
  const bool first_like = o.starts();
  const bool is_send = o.is(op_class::send), is_write = o.is(op_class::write), is_read = o.is(op_class::read_request);
  const bool is_atomic = o.is(op_class::atomic);
  const bool is_raw = o.is(op_class::read_as_write);  // a READ served as a WRITE: checked as a READ
  // Operations this responder does not execute (FLUSH, ATOMIC_WRITE, RESYNC, DC connect).
  if (!is_send && !is_write && !is_read && !is_atomic && !is_raw) return invalid(invalid_reason::operation);
  if (is_raw && cfg_.svc != service::rc) return invalid(invalid_reason::operation);  // RC only
  // opcode sequence (IBTA 9.7.3): middle/last continue a message of the same kind
  if (first_like && in_msg_) return invalid(invalid_reason::sequence);
  if (!first_like && (!in_msg_ || msg_is_send_ != is_send)) return invalid(invalid_reason::sequence);
  if (p.length > cfg_.mtu || (!o.ends() && p.length != cfg_.mtu)) return invalid(invalid_reason::mtu);
  if ((is_read || is_raw) && !read_ok(p.dmalen)) return invalid(invalid_reason::read_length);
  if (is_write) {  // the payloads of a WRITE add up to its DMA length, exactly
    const std::uint64_t so_far = (first_like ? 0 : std::uint64_t{msg_bytes_}) + p.length;
    const std::uint32_t dmalen = first_like ? p.dmalen : msg_dmalen_;
    if (so_far > dmalen || (o.ends() && so_far != dmalen)) return invalid(invalid_reason::dma_length);
  }
  if (ib::needs_receive(o) && recv_ == 0) return resp_event::no_receive;
  if (is_send && mem_.receive_fits) {
    const receive_fit f = mem_.receive_fits(mem_.ctx, first_like ? 0 : msg_bytes_, p.length);
    if (f == receive_fit::too_long) return invalid(invalid_reason::receive_length);
    if (f == receive_fit::unusable) return resp_event::operational_error;
  }
  if (is_write || is_read || is_atomic || is_raw) {
    const bool own_address = first_like || is_read || is_atomic || is_raw;  // else the message's, continued
    const std::uint64_t va = own_address ? p.va : msg_va_ + msg_bytes_;
    const std::uint32_t rkey = own_address ? p.rkey : msg_rkey_;
    // A WRITE's first packet checks its whole DMA length (as rxe does), so a WRITE that would
    // run out of its key places nothing; later packets check their own bytes again.
    const std::uint32_t len = is_read || is_raw ? p.dmalen : is_atomic ? ib::atomic_operand_size : is_write && first_like ? p.dmalen : p.length;
    if (mem_.check) {
      const access_result a =
          mem_.check(mem_.ctx, rkey, va, len, is_read || is_raw ? access_kind::read : is_atomic ? access_kind::atomic : access_kind::write, probe);
      if (a.kind == access_result::access_error) return resp_event::access_error;
      if (a.kind == access_result::page_fault) {
        delay = a.delay_us;
        return cfg_.on_fault == fault_policy::page_fault_ack && reliable() ? resp_event::fault_ack : resp_event::fault_drop;
      }
    }
  }
  return resp_event::execute;
}

template <std::size_t RD>
constexpr void responder<RD>::execute(const packet& p, qp_sink& out) {
  ++stats_.executed;
  using ib::op_class;
  const ib::opcode_info& o = p.info();
  const bool first_like = o.starts(), last_like = o.ends();
  const bool is_send = o.is(op_class::send);
  if (o.is(op_class::read_request)) {  // READ: responses take the PSNs after the request
    const rd_resource r{p.psn, read_packets(p.dmalen), false, p, 0};
    remember(r);
    epsn_ = ib::psn_add(epsn_, r.npkts);
    ++msn_;
    ++stats_.messages;
    queue_responses(r, out);
    return;
  }
  if (o.is(op_class::read_as_write)) {  // its ACK waits for the write back (write_back_done())
    epsn_ = ib::psn_add(epsn_, 1);
    ++msn_;
    ++stats_.messages;
    packet a{};
    a.opcode = opcode_on(cfg_.svc, ib::operation::acknowledge);
    a.psn = p.psn;
    a.dest_qp = cfg_.peer_qp;
    a.aeth = {.syndrome = credit_ack().raw, .msn = msn_};
    tx_.push_back({.stream = false, .single = a, .ready = false});
    out.push(qp_action::write_back{p.psn, p.va, p.rkey, p.dmalen, p.sink_va, p.sink_rkey});
    return;
  }
  if (o.is(op_class::atomic)) {
    const bool cmp_swap = o.op == ib::operation::compare_swap;
    const std::uint64_t orig = mem_.atomic ? mem_.atomic(mem_.ctx, p.rkey, p.va, cmp_swap, p.swap, p.compare) : 0;
    const rd_resource r{p.psn, 1, true, p, orig};
    remember(r);
    epsn_ = ib::psn_add(epsn_, 1);
    ++msn_;
    ++stats_.messages;
    queue_responses(r, out);
    return;
  }
  if (first_like) {
    in_msg_ = true;
    msg_is_send_ = is_send;
    msg_va_ = p.va;
    msg_rkey_ = p.rkey;
    msg_dmalen_ = p.dmalen;
    msg_bytes_ = 0;
    if (is_send) --recv_;
  }
  out.push(place_of(p));
  msg_bytes_ += p.length;
  epsn_ = ib::psn_add(epsn_, 1);
  if (last_like) {
    in_msg_ = false;
    const bool imm = o.is(op_class::immediate);
    if (!is_send && imm) --recv_;
    if (is_send || imm) out.push(qp_action::receive{msn_, msg_bytes_, imm, p.imm, p.wr_id});
    ++msn_;
    ++stats_.messages;
  }
  acked_psn_ = p.psn;
  if (p.ack_req) respond(p, credit_ack(), out);
}

template <std::size_t RD>
constexpr void responder<RD>::duplicate(const packet& p, qp_sink& out) {
  for (const rd_resource& r : rd_)
    if (!ib::psn_before(p.psn, r.first_psn) && ib::psn_before(p.psn, ib::psn_add(r.first_psn, r.npkts))) {
      // Replay: same PSNs, same data (atomics: the saved result). A READ may be asked again
      // from any of its responses: the request must then be exactly the rest of the original
      // (same R_Key, its VA and length from there), else it is dropped. Once while a replay of
      // the same part is still queued (a requester that times out again does not multiply it).
      rd_resource part = r;
      if (!r.atomic && p.info().is(ib::op_class::read_request)) {
        const auto i = static_cast<std::uint32_t>(ib::psn_diff(p.psn, r.first_psn));
        if (p.rkey != r.req.rkey || p.va != r.req.va + std::uint64_t{i} * cfg_.mtu || p.dmalen != r.req.dmalen - i * cfg_.mtu) {
          ++stats_.dropped;
          out.push(qp_action::dropped{p.psn, errc::duplicate});
          return;
        }
        part = {p.psn, r.npkts - i, false, p, 0};
      }
      for (const pending& t : tx_)
        if (t.stream && t.r.first_psn == part.first_psn) return;
      queue_responses(part, out);
      return;
    }
  // a SEND / WRITE already executed: acknowledge the latest SEND / WRITE PSN executed (a READ
  // or atomic is acknowledged by its responses only: an ACK naming one of its PSNs would tell
  // the requester it was skipped; rxe's resp.ack_psn)
  packet at = p;
  at.psn = acked_psn_;
  respond(at, credit_ack(), out);
}

template <std::size_t RD>
constexpr packet responder<RD>::response(const pending& t, std::uint32_t i) const {
  const rd_resource& r = t.r;
  packet a{};
  a.psn = ib::psn_add(r.first_psn, i);
  a.dest_qp = cfg_.svc == service::dc ? r.req.dc_initiator() : cfg_.peer_qp;
  if (cfg_.svc == service::dc) a.eecnxt = r.req.dc_initiator();
  a.wr_id = r.req.wr_id;
  a.dc_key = r.req.dc_key;
  if (r.atomic) {
    a.opcode = opcode_on(cfg_.svc, ib::operation::atomic_acknowledge);
    a.aeth = {.syndrome = t.syndrome, .msn = t.msn};
    a.orig = r.orig;
    return a;
  }
  using enum ib::operation;
  a.opcode = opcode_on(cfg_.svc, ib::operation_at(i, r.npkts, rdma_read_response_only, rdma_read_response_first,
                                                  rdma_read_response_middle, rdma_read_response_last));
  if (a.info().has(ib::ext::aeth)) a.aeth = {.syndrome = t.syndrome, .msn = t.msn};
  a.va = r.req.va + std::uint64_t{i} * cfg_.mtu;
  a.rkey = r.req.rkey;
  a.offset = i * cfg_.mtu;
  a.length = r.req.dmalen - a.offset < cfg_.mtu ? r.req.dmalen - a.offset : cfg_.mtu;
  a.read_length = r.req.dmalen;
  return a;
}

template <std::size_t RD>
constexpr void responder<RD>::pump(qp_sink& out) {
  while (!tx_.empty() && out.room() > 0) {
    pending& t = tx_.front();
    if (!t.ready) return;  // responses keep PSN order behind a write being served
    if (!t.stream) {
      out.push(qp_action::transmit{t.single});
      tx_.pop_front();
      continue;
    }
    out.push(qp_action::transmit{response(t, t.next)});
    if (++t.next == t.r.npkts) tx_.pop_front();
  }
}

template <std::size_t RD>
constexpr step_result responder<RD>::on_packet(const packet& p, qp_sink& out) {
  if (!p.known() || !p.info().request) return {-1, errc::event_not_allowed};
  if (const errc e = refusal(out); e != errc{}) return {-1, e};
  if (cfg_.svc == service::ud && p.dest_qp != cfg_.qp) return {-1, errc::event_not_allowed};
  if (cfg_.svc == service::ud && cfg_.check_q_key && p.q_key != cfg_.q_key) {
    ++stats_.dropped;
    out.push(qp_action::dropped{p.psn, errc::wrong_access_key});
    return {-1, errc::wrong_access_key};
  }
  resp_input in{.pkt = p};
  const resp_event e = st_ == resp_state::error ? resp_event::execute : classify(p, in.delay_us, &in.why, false);
  return step<row>(table(), st_, *this, e, in, out);
}

template <std::size_t RD>
inline constexpr machine_info<typename responder<RD>::row> responder_info{
    "responder", "ready", responder<RD>::table()};

}  // namespace pushwire::flow
