// The reference RNIC's completion unit (spec/rnic.md §4): the table of completion queues, the
// per-QP completion lists (send and receive records, context.hpp), binding a fetched receive to
// the message that consumes it, flushing a QP's lists when it enters ERR, and writing completions
// from the heads of the lists to the CQ rings in the consumer's memory.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <unordered_map>
#include <utility>
#include <vector>

#include <pushwire/rnic/context.hpp>
#include <pushwire/rnic/cq.hpp>
#include <pushwire/rnic/memory.hpp>

namespace pushwire::rnic {

/// An armed CQ's notification without std::function: fn(ctx, cq), called once.
struct cq_notify {
  void (*fn)(void* ctx, std::uint32_t cq) = nullptr;
  void* ctx = nullptr;
};

/// Whether every entry of a receive descriptor may be written by the device for a QP of `pd`
/// now (an absent page of an on-demand key is served when the data is placed).
inline bool receive_usable(const memory_table& mem, std::uint32_t pd, const recv_wqe& w) {
  if (w.num_sge > max_sge) return false;
  for (const sge& s : entries(w))
    if (const errc e = mem.check(s.lkey, s.addr, s.length, {pd, access::local_write}); e != errc{} && e != errc::page_fault)
      return false;
  return true;
}

/// What completion_unit::write() stopped at.
enum class written : std::uint8_t {
  all,                ///< every finished record at the lists' heads is written
  cq_full,            ///< a CQ is full; it overflowed before (reported then)
  cq_overflowed,      ///< a CQ overflowed now: cq_error is raised; the QP must go to ERR
  send_queue_failed,  ///< a send that failed locally was retired: the send queue must fail now
};

class completion_unit {
 public:
  completion_unit(std::uint32_t max_cqs, device_counters& stats) : max_(max_cqs), stats_(stats) {}

  // ---- the CQ table ---------------------------------------------------------------------------
  /// A CQ over the consumer's memory. Errors: no_resources (max_cqs CQs exist),
  /// invalid_argument (m's ring is empty).
  result<std::uint32_t> create(cq_memory& m) {
    if (cqs_.size() >= max_) return errc::no_resources;
    if (m.ring().empty()) return errc::invalid_argument;
    const std::uint32_t n = next_++;
    cqs_.emplace(n, cq_context{.mem = &m});
    return n;
  }
  bool exists(std::uint32_t cq) const { return cqs_.count(cq) != 0; }
  /// Removes a CQ (the caller checked that no QP uses it). Errors: not_found.
  errc destroy(std::uint32_t cq) { return cqs_.erase(cq) ? errc{} : errc::not_found; }
  /// Moves a CQ's ring to m (device::resize_cq). Errors: not_found, invalid_argument.
  errc resize(std::uint32_t cq, cq_memory& m) {
    const auto it = cqs_.find(cq);
    if (it == cqs_.end()) return errc::not_found;
    cq_context& c = it->second;
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
  /// Arms a CQ: `n` is called once, after the next completion written to it. Errors: not_found.
  errc arm(std::uint32_t cq, cq_notify n) {
    const auto it = cqs_.find(cq);
    if (it == cqs_.end()) return errc::not_found;
    it->second.notify = n;
    it->second.armed = nullptr;
    return {};
  }
  /// arm() with a std::function. Errors: not_found.
  errc arm(std::uint32_t cq, std::function<void(std::uint32_t)> f) {
    const auto it = cqs_.find(cq);
    if (it == cqs_.end()) return errc::not_found;
    it->second.notify = {};
    it->second.armed = std::move(f);
    return {};
  }

  // ---- the per-QP lists -----------------------------------------------------------------------
  /// Marks every unfinished record of q flushed (the QP entered ERR).
  static void flush(qp_context& q) {
    for (send_record& r : q.sends)
      if (!r.done) r.done = true, r.status = wc_status::flushed;
    for (recv_record& r : q.recvs)
      if (!r.done) r.done = true, r.status = wc_status::flushed;
  }
  /// Marks q's unfinished send records flushed (UC, UD: the send queue entered SQE).
  static void flush_sends(qp_context& q) {
    for (send_record& r : q.sends)
      if (!r.done) r.done = true, r.status = wc_status::flushed;
  }
  /// The receive bound to message `msn` of q, binding the next one (q's own, or its SRQ's) when
  /// none is; nullptr when there is none to bind. An SRQ descriptor taken frees its ring slot.
  static recv_record* bind(qp_context& q, std::uint32_t msn, const memory_table& mem) {
    for (recv_record& r : q.recvs)
      if (r.bound && !r.done && r.msn == msn) return &r;
    if (q.srq) {
      srq_context& s = *q.srq;
      if (s.ready.empty()) return nullptr;
      recv_record r;
      r.wqe = s.ready.front();
      s.ready.pop_front();
      ++s.mem->doorbell().retired;
      if (!receive_usable(mem, q.init.pd, r.wqe)) r.status = wc_status::local_protection_error;
      r.bound = true;
      r.msn = msn;
      q.recvs.push_back(r);
      return &q.recvs.back();
    }
    for (recv_record& r : q.recvs)
      if (!r.bound && !r.done) {
        r.bound = true;
        r.msn = msn;
        return &r;
      }
    return nullptr;
  }
  /// The receive a SEND's packet at message offset `offset` goes to if it came now: the bound
  /// one in progress, or (offset 0) the next to bind; nullptr when there is none.
  static const recv_wqe* receive_for(const qp_context& q, std::uint32_t offset) {
    if (offset != 0) {
      const recv_wqe* w = nullptr;
      for (const recv_record& r : q.recvs)
        if (r.bound && !r.done) w = &r.wqe;
      return w;
    }
    if (q.srq) return q.srq->ready.empty() ? nullptr : &q.srq->ready.front();
    for (const recv_record& r : q.recvs)
      if (!r.bound && !r.done) return &r.wqe;
    return nullptr;
  }
  /// Receives q's machines may count on now (fetched, not yet consumed).
  static std::uint32_t receives_ready(const qp_context& q) {
    if (q.srq) return static_cast<std::uint32_t>(q.srq->ready.size());
    std::uint32_t n = 0;
    for (const recv_record& r : q.recvs) n += !r.bound && !r.done;
    return n;
  }

  /// Writes the finished records at the heads of q's lists to their CQs, in q's order, and
  /// retires their ring slots. Raises cq_error in `events` when a CQ overflows; a record that
  /// does not fit stays in its list (nothing is lost).
  written write(qp_context& q, std::vector<async_event>& events) {
    while (!q.sends.empty() && q.sends.front().done) {
      const send_record& r = q.sends.front();
      if (r.write_back_psn) {  // the device's own: no entry, no ring slot
        q.sends.pop_front();
        continue;
      }
      if (r.signaled || r.status != wc_status::success) {
        cqe e{};
        e.wr_id = r.wr_id;
        e.status = static_cast<std::uint8_t>(r.status);
        e.opcode = static_cast<std::uint8_t>(r.op);
        e.byte_len = r.op == wc_opcode::rdma_read ? send_length(r.wqe) : 0;
        e.qp_num = q.qpn;
        e.vendor_err = r.vendor_err;
        if (const written w = put(q.init.send_cq, e, events); w != written::all) return w;
      }
      const bool fatal = r.fatal;
      q.sends.pop_front();
      ++q.sq_retired;
      q.init.sq->doorbell().retired.store(q.sq_retired, std::memory_order_release);
      if (fatal && q.state != qp_state::err && q.state != qp_state::sqe) return written::send_queue_failed;
    }
    while (!q.recvs.empty() && q.recvs.front().done) {
      const recv_record& r = q.recvs.front();
      cqe e{};
      e.wr_id = r.wqe.wr_id;
      e.status = static_cast<std::uint8_t>(r.status);
      e.opcode = static_cast<std::uint8_t>(r.op);
      e.byte_len = r.status == wc_status::success ? r.byte_len : 0;
      e.imm = r.imm;
      e.flags = static_cast<std::uint8_t>((r.with_imm ? cqe_with_imm : 0) | (r.grh ? cqe_grh : 0));
      e.qp_num = q.qpn;
      e.src_qp = r.src_qp;
      if (const written w = put(q.init.recv_cq, e, events); w != written::all) return w;
      q.recvs.pop_front();
      if (!q.srq) q.init.rq->doorbell().retired.fetch_add(1, std::memory_order_release);
    }
    return written::all;
  }

 private:
  struct cq_context {
    cq_memory* mem = nullptr;
    std::uint32_t producer = 0;
    bool error = false;  ///< overflowed, and no entry written since
    cq_notify notify{};
    std::function<void(std::uint32_t)> armed{};
  };
  /// Writes one entry (owner bit last, release order); cq_full / cq_overflowed when full.
  written put(std::uint32_t cqn, cqe e, std::vector<async_event>& events) {
    cq_context& c = cqs_.at(cqn);
    const auto n = static_cast<std::uint32_t>(c.mem->ring().size());
    if (c.producer - c.mem->doorbell().consumer.load(std::memory_order_acquire) >= n) {
      if (c.error) return written::cq_full;
      c.error = true;
      ++stats_.cq_overflows;
      events.push_back({event_type::cq_error, cqn});
      return written::cq_overflowed;
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
    if (c.notify.fn) {
      const cq_notify k = std::exchange(c.notify, {});
      k.fn(k.ctx, cqn);
    } else if (c.armed) {
      std::exchange(c.armed, {})(cqn);
    }
    return written::all;
  }

  std::uint32_t max_;
  device_counters& stats_;
  std::unordered_map<std::uint32_t, cq_context> cqs_;
  std::uint32_t next_ = 1;  ///< CQ numbers start at 1 (0 is none)
};

}  // namespace pushwire::rnic
