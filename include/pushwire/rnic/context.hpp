// What the reference RNIC keeps per queue pair and per shared receive queue (spec/rnic.md §1):
// the QP context (its attributes, its transport machines, its ring positions, its per-QP
// completion lists) and the records of those lists. Device state only: nothing here belongs to
// one packet.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include <pushwire/flow/dc.hpp>
#include <pushwire/flow/rc.hpp>
#include <pushwire/flow/session.hpp>
#include <pushwire/rnic/config.hpp>
#include <pushwire/rnic/qp.hpp>
#include <pushwire/rnic/queue.hpp>

namespace pushwire::rnic {

/// Send-queue entries one QP's transport machine holds (the ring may hold more: the device
/// fetches as the machine has room).
inline constexpr std::size_t machine_sq = 64;
/// DC: requests an initiator holds while it serves another target.
inline constexpr std::size_t machine_pending = 64;
/// Session table entries per device, and messages a session QP holds that arrived early.
inline constexpr std::size_t max_sessions = 64, session_window = 64;

using requester_t = flow::requester<machine_sq>;
using responder_t = flow::responder<max_rd_atomic>;
using dci_t = flow::dc_initiator<machine_sq, machine_pending>;
using dct_t = flow::dc_target<max_rd_atomic>;
using session_table_t = flow::session_table<max_sessions>;

/// A work request's record in its QP's send completion list.
struct send_record {
  std::uint64_t seq = 0;  ///< the requester's work request id
  std::uint64_t wr_id = 0;
  send_wqe wqe{};
  wc_opcode op = wc_opcode::send;
  bool signaled = true, done = false;
  bool fatal = false;  ///< a local error: the send queue fails once this completes (in order)
  /// The device's own WRITE carrying out a peer's READ_AS_WRITE of this PSN: no ring slot, no CQE.
  std::optional<std::uint32_t> write_back_psn{};
  wc_status status = wc_status::success;
  std::uint32_t vendor_err = 0;
};
/// A fetched receive's record in its QP's receive completion list.
struct recv_record {
  recv_wqe wqe{};
  std::uint32_t msn = 0;  ///< the message it is bound to (bound)
  bool bound = false, done = false;
  wc_status status = wc_status::success;
  wc_opcode op = wc_opcode::recv;
  std::uint32_t byte_len = 0, imm = 0, src_qp = 0;
  bool with_imm = false, grh = false;
};

/// A shared receive queue: its ring and the descriptors fetched from it, not yet taken.
struct srq_context {
  std::uint32_t pd = 0;
  rq_memory* mem = nullptr;
  std::uint32_t limit = 0;    ///< armed limit (0: not armed)
  std::uint32_t fetched = 0;  ///< descriptors fetched from the ring
  std::deque<recv_wqe> ready{};
  /// Descriptors it holds: fetched and not taken, and posted and not fetched.
  std::uint32_t outstanding() const {
    return static_cast<std::uint32_t>(ready.size()) + (mem->doorbell().producer.load(std::memory_order_acquire) - fetched);
  }
};

/// A session QP's sides (spec/rnic.md §12): its group's picker, its resequencer, and the frames
/// it holds (a handle is an index; empty = free).
struct session_qp {
  flow::session_group<max_sessions> out;
  flow::session_receiver<max_sessions, session_window> in;
  std::vector<frame_bytes> held;
};

class dma;

/// One queue pair's context.
struct qp_context {
  std::uint32_t qpn = 0;
  qp_init_attr init{};
  srq_context* srq = nullptr;  ///< init.srq's, when it has one
  qp_state state = qp_state::reset;
  qp_attr attr{};
  std::optional<requester_t> req{};
  std::optional<responder_t> resp{};
  std::optional<dci_t> dci{};
  std::optional<dct_t> dct{};
  std::uint32_t sq_fetched = 0, rq_fetched = 0;  ///< ring descriptors fetched
  std::uint32_t sq_retired = 0;                  ///< ring slots given back
  std::uint32_t sq_queued = 0;                   ///< the context cache: descriptors waiting as jobs
  std::uint64_t next_seq = 1;                    ///< the next send record's requester id
  std::deque<send_record> sends{};
  std::deque<recv_record> recvs{};               ///< own RQ: fetched, in order; SRQ: bound ones
  bool drained_told = false;   ///< SQD: sq_drained was raised
  bool closed = false;         ///< destroyed, lingering (device_config::linger)
  bool halted = false;         ///< a fetched descriptor failed locally: fetch no more until it completes
  time_ns linger = 0, last_heard = 0;
  std::optional<wc_status> connect_error{};  ///< DCI: why its last connect failed
  std::uint32_t dc_ah = 0;     ///< DCI: the AH of the target it is connected to
  dma* memory = nullptr;       ///< the DMA engine its responder's memory port reaches (dma.hpp)
  std::unique_ptr<session_qp> sessions{};  ///< set_qp_sessions
  /// DCQCN (device_config::congestion): the reaction point, from the first CNP; when its
  /// requester may send next while paced; when it last sent a CNP.
  std::optional<flow::dcqcn_rp> rp{};
  time_ns tx_next = 0;
  std::optional<time_ns> last_cnp{};
  /// Traffic classes (spec/qos.md §4): it waits in its port's class scheduler.
  bool tx_waiting = false;
  /// Automatic path migration: retransmission timeouts in a row with no progress, and the
  /// oldest unacknowledged PSN at the last one.
  std::uint32_t quiet_timeouts = 0, una_at_timeout = 0;
  /// An alternate path was loaded (modify_qp with alt_path): its packets carry MigReq by
  /// path_mig_state from then on (spec/qos.md §9).
  bool apm = false;

  bool is(qp_type t) const { return init.type == t; }
  /// UC and UD fail their send queue alone (SQE); RC and DC the whole QP (ERR).
  bool send_errors_alone() const { return is(qp_type::uc) || is(qp_type::ud); }
  /// The port its packets leave from: RC and UC, the RTR address's; others, the QP's own.
  std::uint8_t port() const { return is(qp_type::rc) || is(qp_type::uc) ? attr.av.port : attr.port; }
  /// The send-side transport machine (RC, UC, UD: the requester; DCI: its requester).
  const requester_t* sender() const { return req ? &*req : dci ? &dci->transport() : nullptr; }
  /// Its receive descriptors' extra room at the head: UD receives start with the GRH space.
  std::uint32_t grh_room() const { return is(qp_type::ud) ? static_cast<std::uint32_t>(ib::grh_size) : 0; }
  /// Its send record of requester id seq, or nullptr.
  send_record* send_of(std::uint64_t seq) {
    if (sends.empty() || seq < sends.front().seq) return nullptr;
    const std::uint64_t i = seq - sends.front().seq;
    return i < sends.size() ? &sends[i] : nullptr;
  }
  const send_record* send_of(std::uint64_t seq) const { return const_cast<qp_context*>(this)->send_of(seq); }
};

}  // namespace pushwire::rnic
