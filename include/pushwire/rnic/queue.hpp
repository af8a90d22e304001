// Work queues of the reference RNIC (spec/rnic.md §5): rings of descriptors in the caller's
// memory, with doorbell records. Posting writes a descriptor at the producer index, publishes the
// new index in the doorbell record (release), then rings the device's doorbell, naming the queue;
// the device fetches descriptors from its consumer index up to the published one in its next
// progress(). A ring slot is the poster's again once the device has retired it (its completion
// is written, or it was unsignaled and everything before it completed): the device publishes that
// count in the same record.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <span>
#include <vector>

#include <pushwire/rnic/core.hpp>

namespace pushwire::rnic {

/// Most scatter/gather entries of one descriptor.
inline constexpr std::size_t max_sge = 4;
/// Most bytes of inline data of one send descriptor (they replace its scatter/gather list).
inline constexpr std::size_t max_inline = 64;

/// One scatter/gather entry: `length` bytes at `addr` of local key `lkey`.
struct sge {
  std::uint64_t addr = 0;
  std::uint32_t length = 0;
  std::uint32_t lkey = 0;
};
static_assert(sizeof(sge) == 16);

/// Send operations (ibv_wr_opcode's values).
enum class wr_opcode : std::uint8_t {
  rdma_write = 0,
  rdma_write_with_imm = 1,
  send = 2,
  send_with_imm = 3,
  rdma_read = 4,
  atomic_cmp_and_swp = 5,
  atomic_fetch_and_add = 6,
  /// pushwire's: a READ the responder serves as an RDMA WRITE into the one local entry, which
  /// must allow remote write (spec/rnic.md §7). RC only; not a verbs opcode.
  read_as_write = 0x80,
};
inline constexpr std::array<wire::named_value, 8> wr_opcode_names{{
    {wr_opcode::rdma_write, "RDMA_WRITE"}, {wr_opcode::rdma_write_with_imm, "RDMA_WRITE_WITH_IMM"},
    {wr_opcode::send, "SEND"}, {wr_opcode::send_with_imm, "SEND_WITH_IMM"}, {wr_opcode::rdma_read, "RDMA_READ"},
    {wr_opcode::atomic_cmp_and_swp, "ATOMIC_CMP_AND_SWP"}, {wr_opcode::atomic_fetch_and_add, "ATOMIC_FETCH_AND_ADD"},
    {wr_opcode::read_as_write, "READ_AS_WRITE"},
}};
constexpr std::span<const wire::named_value> wire_enum_names(wr_opcode) { return wr_opcode_names; }

/// The transport machines' operation of a send opcode.
constexpr flow::wr_op flow_op(wr_opcode o) {
  switch (o) {
    case wr_opcode::rdma_write: return flow::wr_op::write;
    case wr_opcode::rdma_write_with_imm: return flow::wr_op::write_imm;
    case wr_opcode::send: return flow::wr_op::send;
    case wr_opcode::send_with_imm: return flow::wr_op::send_imm;
    case wr_opcode::rdma_read: return flow::wr_op::read;
    case wr_opcode::atomic_cmp_and_swp: return flow::wr_op::compare_swap;
    case wr_opcode::atomic_fetch_and_add: return flow::wr_op::fetch_add;
    case wr_opcode::read_as_write: return flow::wr_op::read_as_write;
  }
  return flow::wr_op::send;
}

/// Whether o is one of the opcodes above.
constexpr bool is_known(wr_opcode o) { return !wire::enum_name(o).empty(); }

/// Send flags (ibv_send_flags' values).
inline constexpr std::uint8_t send_fence = 1, send_signaled = 2, send_solicited = 4, send_inline = 8;

/// One send descriptor, 128 bytes.
struct send_wqe {
  std::uint64_t wr_id = 0;
  std::uint8_t opcode = 0;    ///< wr_opcode
  std::uint8_t flags = 0;     ///< send_signaled, send_solicited, send_inline, send_fence
  std::uint8_t num_sge = 0;   ///< 0 .. max_sge (inline: 0)
  std::uint8_t inline_len = 0;  ///< send_inline: bytes of inline_data, 0 .. max_inline
  std::uint32_t imm = 0;      ///< immediate data, host order
  std::uint64_t remote_addr = 0;
  std::uint32_t rkey = 0;
  std::uint32_t remote_qpn = 0;   ///< UD: destination QP; DC: the target's DCT number
  std::uint32_t remote_qkey = 0;  ///< UD: Q_Key
  std::uint32_t ah = 0;           ///< UD, DC: address handle (the destination port's address)
  std::uint64_t compare_add = 0;  ///< COMPARE_SWAP: compare; FETCH_ADD: the addend
  std::uint64_t swap = 0;         ///< COMPARE_SWAP: swap
  std::uint64_t dc_key = 0;       ///< DC: the target's access key
  union {
    std::array<sge, max_sge> sg;
    std::array<std::byte, max_inline> inline_data;
  };
  send_wqe() : sg{} {}
};
static_assert(sizeof(send_wqe) == 128);

/// One receive descriptor.
struct recv_wqe {
  std::uint64_t wr_id = 0;
  std::uint8_t num_sge = 0;
  std::array<std::uint8_t, 7> reserved{};
  std::array<sge, max_sge> sg{};
};
static_assert(sizeof(recv_wqe) == 80);

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

/// The send descriptor of wr. Errors: invalid_argument (more than max_sge entries, or inline
/// data over max_inline).
inline result<send_wqe> descriptor(const send_wr& wr) {
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
    if (!wr.inline_data.empty()) std::memcpy(w.inline_data.data(), wr.inline_data.data(), wr.inline_data.size());
  } else {
    if (wr.sg_list.size() > max_sge) return errc::invalid_argument;
    w.num_sge = static_cast<std::uint8_t>(wr.sg_list.size());
    std::copy(wr.sg_list.begin(), wr.sg_list.end(), w.sg.begin());
  }
  return w;
}
/// The receive descriptor of wr. Errors: invalid_argument (more than max_sge entries).
inline result<recv_wqe> descriptor(const recv_wr& wr) {
  if (wr.sg_list.size() > max_sge) return errc::invalid_argument;
  recv_wqe w;
  w.wr_id = wr.wr_id;
  w.num_sge = static_cast<std::uint8_t>(wr.sg_list.size());
  std::copy(wr.sg_list.begin(), wr.sg_list.end(), w.sg.begin());
  return w;
}
/// The scatter/gather entries of a descriptor (at most max_sge, whatever num_sge says).
template <class Wqe>
constexpr std::span<const sge> entries(const Wqe& w) {
  return {w.sg.data(), std::min<std::size_t>(w.num_sge, max_sge)};
}
/// Bytes a receive descriptor's entries hold.
constexpr std::uint64_t capacity(const recv_wqe& w) {
  std::uint64_t n = 0;
  for (const sge& s : entries(w)) n += s.length;
  return n;
}
/// Bytes a send descriptor sends (inline data, or its entries'; at most 2^32 - 1).
constexpr std::uint32_t send_length(const send_wqe& w) {
  if (w.flags & send_inline) return w.inline_len;
  std::uint64_t n = 0;
  for (const sge& s : entries(w)) n += s.length;
  return static_cast<std::uint32_t>(std::min<std::uint64_t>(n, 0xFFFFFFFFu));
}

/// A work queue's doorbell record: the poster's producer index and the device's retired count
/// (both free-running, all passes).
struct wq_doorbell {
  std::atomic<std::uint32_t> producer{0};
  std::atomic<std::uint32_t> retired{0};
};

/// A work queue's memory: its ring (a power of two of descriptors) and doorbell record.
template <class Wqe>
class wq_memory {
 public:
  /// depth: descriptors, a power of two from 1 to 2^16.
  explicit wq_memory(std::uint32_t depth) : own_(valid_depth(depth) ? depth : 0), ring_(own_) {}
  /// Over the caller's memory (a verbs parent domain's allocator): `ring` must outlive this and
  /// hold a valid depth of descriptors (else depth() is 0); they are initialised here.
  explicit wq_memory(std::span<Wqe> ring) : ring_(valid_depth(static_cast<std::uint32_t>(ring.size())) ? ring : std::span<Wqe>{}) {
    for (Wqe& w : ring_) ::new (static_cast<void*>(&w)) Wqe();
  }
  wq_memory(const wq_memory&) = delete;
  wq_memory& operator=(const wq_memory&) = delete;
  static constexpr bool valid_depth(std::uint32_t d) { return d >= 1 && d <= (1u << 16) && (d & (d - 1)) == 0; }
  std::span<Wqe> ring() { return ring_; }
  wq_doorbell& doorbell() { return db_; }
  std::uint32_t depth() const { return static_cast<std::uint32_t>(ring_.size()); }
  /// Writes w at the producer index and publishes it; false when the ring is full.
  bool put(const Wqe& w) {
    const std::uint32_t p = db_.producer.load(std::memory_order_relaxed);
    if (p - db_.retired.load(std::memory_order_acquire) >= ring_.size()) return false;
    ring_[p & (ring_.size() - 1)] = w;
    db_.producer.store(p + 1, std::memory_order_release);
    return true;
  }
  /// Descriptors posted and not yet retired.
  std::uint32_t outstanding() const {
    return db_.producer.load(std::memory_order_acquire) - db_.retired.load(std::memory_order_acquire);
  }

 private:
  std::vector<Wqe> own_;
  std::span<Wqe> ring_;
  wq_doorbell db_;
};
using sq_memory = wq_memory<send_wqe>;
using rq_memory = wq_memory<recv_wqe>;

}  // namespace pushwire::rnic
