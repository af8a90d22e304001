// Completion queues of the reference RNIC (spec/rnic.md §4): polled completions without
// interrupts. A CQ is a ring of entries in the consumer's memory, each with a completion
// indicator: the owner bit of op_own, which the device writes as the phase of the pass it is on
// (1 on the first pass around the ring, 0 on the second, ...), last and with release order. The
// consumer reads the entry at its index, owns it when the bit equals its own pass's phase, reads
// it after an acquire, and publishes its index in the CQ's doorbell record, from which the
// device learns the room left. No interrupt, lock or system call is involved; poll() is a
// helper over exactly that. (mlx5's CQE works so; its owner bit starts the other way round.)
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>
#include <span>
#include <vector>

#include <pushwire/rnic/core.hpp>

namespace pushwire::rnic {

/// One completion entry, 32 bytes, as the device writes it.
struct cqe {
  std::uint64_t wr_id = 0;
  std::uint32_t byte_len = 0;  ///< receives: bytes placed; READ: bytes read; others: the message's
  std::uint32_t imm = 0;       ///< immediate data (with_imm set), host order
  std::uint32_t qp_num = 0;    ///< the local QP the work request belongs to
  std::uint32_t src_qp = 0;    ///< UD receives: the sender's QP
  std::uint8_t status = 0;     ///< wc_status
  std::uint8_t opcode = 0;     ///< wc_opcode
  std::uint8_t flags = 0;      ///< cqe_with_imm, cqe_grh
  std::uint8_t op_own = 0;     ///< bit 0: the owner bit (the completion indicator)
  std::uint32_t vendor_err = 0;  ///< the responder's NAK code or the device's errc that caused an error status
};
static_assert(sizeof(cqe) == 32);
inline constexpr std::uint8_t cqe_with_imm = 1;
/// UD receives: the buffer's first 40 bytes hold the packet's network header (IBV_WC_GRH).
inline constexpr std::uint8_t cqe_grh = 2;
inline constexpr std::uint8_t cqe_owner = 1;

/// A polled completion, as poll() returns it.
struct work_completion {
  std::uint64_t wr_id = 0;
  wc_status status = wc_status::success;
  wc_opcode opcode = wc_opcode::send;
  std::uint32_t byte_len = 0, imm = 0, qp_num = 0, src_qp = 0, vendor_err = 0;
  bool with_imm = false;
  bool grh = false;  ///< UD receives: the GRH space was written (cqe_grh)
  friend constexpr bool operator==(const work_completion&, const work_completion&) = default;
};

/// The consumer's doorbell record of a CQ: its consumer index (entries consumed, all passes).
struct cq_doorbell {
  std::atomic<std::uint32_t> consumer{0};
};

/// A CQ's memory: its ring (a power of two of entries, zeroed) and doorbell record. The
/// consumer owns it; the device writes into it.
class cq_memory {
 public:
  /// depth: entries, a power of two from 2 to 2^22.
  explicit cq_memory(std::uint32_t depth) : own_(valid_depth(depth) ? depth : 0), ring_(own_) {}
  /// Over the caller's memory (a verbs parent domain's allocator): `ring` must outlive this and
  /// hold a valid depth of entries (else ring() is empty); they are zeroed here.
  explicit cq_memory(std::span<cqe> ring) : ring_(valid_depth(static_cast<std::uint32_t>(ring.size())) ? ring : std::span<cqe>{}) {
    for (cqe& e : ring_) ::new (static_cast<void*>(&e)) cqe();
  }
  cq_memory(const cq_memory&) = delete;
  cq_memory& operator=(const cq_memory&) = delete;
  static constexpr bool valid_depth(std::uint32_t d) { return d >= 2 && d <= (1u << 22) && (d & (d - 1)) == 0; }
  std::span<cqe> ring() { return ring_; }
  cq_doorbell& doorbell() { return db_; }

  /// Takes up to out.size() completions from the head of the ring; returns how many.
  std::size_t poll(std::span<work_completion> out) {
    const auto n = static_cast<std::uint32_t>(ring_.size());
    std::uint32_t ci = db_.consumer.load(std::memory_order_relaxed);
    std::size_t got = 0;
    while (got < out.size()) {
      cqe& e = ring_[ci & (n - 1)];
      const std::uint8_t own = std::atomic_ref<std::uint8_t>(e.op_own).load(std::memory_order_acquire);
      if ((own & cqe_owner) != phase(ci, n)) break;
      out[got++] = {e.wr_id, static_cast<wc_status>(e.status), static_cast<wc_opcode>(e.opcode), e.byte_len, e.imm,
                    e.qp_num, e.src_qp, e.vendor_err, (e.flags & cqe_with_imm) != 0, (e.flags & cqe_grh) != 0};
      ++ci;
    }
    db_.consumer.store(ci, std::memory_order_release);
    return got;
  }
  /// Removes the completions of QP qpn that are written and not yet consumed, keeping the
  /// order of the others (a QP moved to RESET leaves none behind: mlx5's provider cleans its
  /// CQs so). The device must not write this CQ meanwhile, nor another thread poll it.
  /// Returns how many were removed.
  std::size_t remove_qp(std::uint32_t qpn) {
    const auto n = static_cast<std::uint32_t>(ring_.size());
    const std::uint32_t ci = db_.consumer.load(std::memory_order_relaxed);
    std::uint32_t p = ci;  // the first entry not written yet
    while (p - ci < n && (ring_[p & (n - 1)].op_own & cqe_owner) == phase(p, n)) ++p;
    std::uint32_t removed = 0;
    for (std::uint32_t i = p; i != ci;) {  // from the newest back, moving the kept ones up
      --i;
      const cqe e = ring_[i & (n - 1)];
      if (e.qp_num == qpn) {
        ++removed;
      } else if (removed) {
        cqe& d = ring_[(i + removed) & (n - 1)];
        d = e;
        d.op_own = static_cast<std::uint8_t>((e.op_own & ~cqe_owner) | phase(i + removed, n));
      }
    }
    db_.consumer.store(ci + removed, std::memory_order_release);
    return removed;
  }
  /// The owner bit an entry written at producer index p carries (the phase of p's pass).
  static constexpr std::uint8_t phase(std::uint32_t p, std::uint32_t n) { return ((p / n) & 1u) == 0 ? 1 : 0; }

 private:
  std::vector<cqe> own_;
  std::span<cqe> ring_;
  cq_doorbell db_;
};

}  // namespace pushwire::rnic
