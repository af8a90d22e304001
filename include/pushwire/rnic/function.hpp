// A function's shared-memory interface (spec/rnicd.md §3): what a device process and a program
// attached to one of its functions share, as a PCIe function's BAR and doorbells are shared by a
// NIC and its driver. One region per attachment holds a header and two rings of frames:
// - tx: the program's engine produces the frames it sends, the device process consumes them;
// - rx: the device process produces the frames steered to the attachment, the program consumes.
//
// Each ring is single-producer single-consumer. Its indices are free-running 32-bit counters;
// slot i is at index i mod slot_count. A side keeps its own index privately and only publishes it:
// it never trusts the value it reads back from the region. A consumer asleep sets `sleeping`
// before it blocks on its eventfd and checks the ring again; a producer that publishes and then
// finds `sleeping` set signals that eventfd. Neither side makes a system call while both are
// awake. Everything here validates what it reads from the region, since the other side may write
// anything into it: an index past the ring or a slot length past the slot is an error
// (fn_errc), and nothing is read through it.
//
// Sans-IO: the caller maps the memory (net/shm.hpp) and owns the eventfds.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string_view>

#include <pushwire/wire/errc.hpp>
#include <pushwire/wire/names.hpp>

namespace pushwire::rnic {

/// Why a device process refused a message, a ring or a frame (spec/rnicd.md §6). 0 is never an
/// error.
enum class fn_errc : std::uint8_t {
  bad_message = 1,
  unsupported_version,
  no_such_function,
  function_exists,
  function_busy,
  not_permitted,
  limit_reached,
  no_attachments_left,
  ring_index_out_of_range,
  slot_length_out_of_range,
  bad_setting,
  shutting_down,
  qpn_block_taken,
  address_not_here,
  migrating,
  migration_failed,
};
inline constexpr std::array<wire::errc_info, 16> fn_errc_table{{
    {"bad_message", "A control message that is too short or too long for its type, of an unknown type, or with a field out of its range."},
    {"unsupported_version", "A control message or region of another protocol version than 1."},
    {"no_such_function", "No function of that number exists on the device (a VF not added, or deleted)."},
    {"function_exists", "`vf add` of a number that exists already."},
    {"function_busy", "`vf del` of a function that programs are attached to."},
    {"not_permitted", "A `ctl` command from a peer whose user is neither root nor the device process's."},
    {"limit_reached", "A function's limit (QPs, MRs, CQs or registered bytes) would be exceeded; nothing was reserved."},
    {"no_attachments_left", "Every QPN block of the device is taken by an attachment."},
    {"ring_index_out_of_range", "A ring's published index is more than slot_count ahead of the other side's: the attachment is detached."},
    {"slot_length_out_of_range", "A slot's length is 0 or more than the slot holds: the attachment is detached."},
    {"bad_setting", "A `ctl` setting that does not parse (a MAC, an address, a number) or is out of its range."},
    {"shutting_down", "The device process is stopping: no attachment is taken."},
    {"qpn_block_taken", "A function cannot move here: a QPN block of one of its attachments is another attachment's on this device."},
    {"address_not_here", "A function cannot move here: one of its GIDs is not an address of this device's port."},
    {"migrating", "The function is moving to another device: a `vf` command or a second migration waits until it ends."},
    {"migration_failed", "The destination device could not be reached, or ended before it took the function: the function stays where it was."},
}};
constexpr std::span<const wire::named_value> wire_enum_names(fn_errc) { return wire::detail::error_names<fn_errc_table>; }

namespace fn {

/// "PWFN" as the region's first four bytes (little-endian u32).
inline constexpr std::uint32_t region_magic = 0x4E465750;
/// The region and control protocol version: 1.
inline constexpr std::uint32_t version = 1;
/// Bytes of one slot: a length (u32), a reserved u32, then the frame. A RoCEv2 frame of a
/// 4096-byte MTU with every header (Ethernet 14, IPv6 40, UDP 8, BTH 12, AtomicETH 28, ImmDt 4,
/// ICRC 4) is 4206 bytes.
inline constexpr std::uint32_t slot_stride = 4608;
inline constexpr std::uint32_t slot_header = 8;
inline constexpr std::uint32_t slot_capacity = slot_stride - slot_header;
/// Slots per ring: a power of two from 16 to 4096 (default 512).
inline constexpr std::uint32_t min_slots = 16, max_slots = 4096, default_slots = 512;
/// Bytes of a ring's control block before its slots: the producer index, the consumer index,
/// the consumer's sleeping flag and its wake-after delay, each on its own 64-byte line.
inline constexpr std::size_t ring_control = 256;
inline constexpr std::size_t producer_at = 0, consumer_at = 64, sleeping_at = 128, wake_after_at = 192;
/// Bytes of the region header before the first ring.
inline constexpr std::size_t header_bytes = 4096;

/// The device's state in the region header: up, or fatal (the device process is gone or
/// stopping; the program raises IBV_EVENT_DEVICE_FATAL).
enum class device_state : std::uint32_t { up = 1, fatal = 2 };

/// The region header's fields: (name, offset, bytes, meaning), in offset order (the table of
/// spec/rnicd.md §3 is generated from it). Little-endian, as the host writes them.
struct field_info {
  std::string_view name;
  std::size_t offset, size;
  std::string_view meaning;
};
inline constexpr std::array<field_info, 9> header_fields{{
    {"magic", 0, 4, "0x4E465750, \"PWFN\""},
    {"version", 4, 4, "1"},
    {"region_bytes", 8, 8, "bytes of the whole region: header_bytes + 2 × ring_bytes(slot_count)"},
    {"slot_count", 16, 4, "slots per ring: a power of two, 16..4096"},
    {"slot_stride", 20, 4, "bytes per slot: 4608"},
    {"tx_offset", 24, 8, "where the tx ring (program → device) starts: 4096"},
    {"rx_offset", 32, 8, "where the rx ring (device → program) starts"},
    {"state", 40, 4, "device_state: 1 up, 2 fatal (written by the device process only)"},
    {"moves", 44, 4, "times the function moved to another device, free-running (written by the device process that adopts it)"},
}};
inline constexpr std::array<field_info, 5> ring_fields{{
    {"producer", producer_at, 4, "slots produced, free-running (written by the producer only)"},
    {"consumer", consumer_at, 4, "slots consumed, free-running (written by the consumer only)"},
    {"sleeping", sleeping_at, 4, "1 while the consumer waits on its eventfd (written by the consumer only)"},
    {"wake_after", wake_after_at, 4, "µs a slot may wait before a sleeping consumer is signalled; 0: at once (written by the consumer only)"},
    {"slots", ring_control, 0, "slot_count slots of slot_stride bytes: length (u32, 1..4600), reserved (u32), frame"},
}};

constexpr bool valid_slots(std::uint32_t n) { return n >= min_slots && n <= max_slots && (n & (n - 1)) == 0; }
constexpr std::size_t ring_bytes(std::uint32_t slots) { return ring_control + std::size_t{slots} * slot_stride; }
constexpr std::size_t region_bytes(std::uint32_t slots) { return header_bytes + 2 * ring_bytes(slots); }

namespace detail {
inline std::atomic_ref<std::uint32_t> word(std::byte* p) {
  return std::atomic_ref<std::uint32_t>(*reinterpret_cast<std::uint32_t*>(p));
}
inline std::uint32_t load_u32(const std::byte* p) {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline std::uint64_t load_u64(const std::byte* p) {
  std::uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
}  // namespace detail

/// Writes a fresh region's header and zeroes its rings' control blocks (the device process, once
/// per attachment). `region` must be region_bytes(slots) long and 8-byte aligned.
inline void format_region(std::span<std::byte> region, std::uint32_t slots) {
  std::memset(region.data(), 0, header_bytes);
  auto put32 = [&](std::size_t at, std::uint32_t v) { std::memcpy(region.data() + at, &v, 4); };
  auto put64 = [&](std::size_t at, std::uint64_t v) { std::memcpy(region.data() + at, &v, 8); };
  put32(0, region_magic);
  put32(4, version);
  put64(8, region_bytes(slots));
  put32(16, slots);
  put32(20, slot_stride);
  put64(24, header_bytes);
  put64(32, header_bytes + ring_bytes(slots));
  put32(40, static_cast<std::uint32_t>(device_state::up));
  std::memset(region.data() + header_bytes, 0, ring_control);
  std::memset(region.data() + header_bytes + ring_bytes(slots), 0, ring_control);
}

/// A mapped region as a program sees it: the header checked against what it was told.
struct region_view {
  std::span<std::byte> bytes;
  std::uint32_t slots = 0;
  std::byte* tx = nullptr;  ///< the tx ring's control block
  std::byte* rx = nullptr;
  device_state state() const { return static_cast<device_state>(detail::word(bytes.data() + 40).load(std::memory_order_acquire)); }
  void set_state(device_state s) { detail::word(bytes.data() + 40).store(static_cast<std::uint32_t>(s), std::memory_order_release); }
  /// The moves counter: the program's engine compares it with what it saw last and, when it
  /// changed, resumes its QPs at once (qp_engine::moved).
  std::uint32_t moves() const { return detail::word(bytes.data() + 44).load(std::memory_order_acquire); }
  void count_move() { detail::word(bytes.data() + 44).fetch_add(1, std::memory_order_acq_rel); }
};
/// Checks a region's header: magic, version, sizes and offsets as region_bytes(slots) lays them
/// out, within `bytes`. Errors: unsupported_version (magic or version), bad_message (any size or
/// offset).
inline std::optional<fn_errc> check_region(std::span<std::byte> bytes, region_view& v) {
  if (bytes.size() < header_bytes) return fn_errc::bad_message;
  const std::byte* h = bytes.data();
  if (detail::load_u32(h) != region_magic || detail::load_u32(h + 4) != version) return fn_errc::unsupported_version;
  const std::uint32_t slots = detail::load_u32(h + 16);
  if (!valid_slots(slots) || detail::load_u32(h + 20) != slot_stride || detail::load_u64(h + 8) != region_bytes(slots) ||
      bytes.size() < region_bytes(slots) || detail::load_u64(h + 24) != header_bytes ||
      detail::load_u64(h + 32) != header_bytes + ring_bytes(slots))
    return fn_errc::bad_message;
  v = {bytes, slots, bytes.data() + header_bytes, bytes.data() + header_bytes + ring_bytes(slots)};
  return std::nullopt;
}

/// The producing side of a ring. Its index is its own; the consumer's is read and checked.
class ring_producer {
 public:
  ring_producer() = default;
  ring_producer(std::byte* ring, std::uint32_t slots) : ring_(ring), slots_(slots) {}
  /// Takes over a ring another producer left (a function that moved to this device): from the
  /// index it published.
  static ring_producer resume(std::byte* ring, std::uint32_t slots) {
    ring_producer p(ring, slots);
    p.head_ = detail::word(ring + producer_at).load(std::memory_order_acquire);
    return p;
  }
  /// Free slots, or ring_index_out_of_range when the consumer's published index is ahead of
  /// what was produced or more than slot_count behind it.
  std::optional<std::uint32_t> space(fn_errc& err) const {
    const std::uint32_t c = detail::word(ring_ + consumer_at).load(std::memory_order_acquire);
    const std::uint32_t used = head_ - c;
    if (used > slots_) {
      err = fn_errc::ring_index_out_of_range;
      return std::nullopt;
    }
    return slots_ - used;
  }
  /// The frame bytes of the next slot (slot_capacity long); fill, then publish(len).
  std::span<std::byte> next() const { return {slot(head_) + slot_header, slot_capacity}; }
  /// Makes the next slot's `len` bytes (1..slot_capacity) visible to the consumer.
  void publish(std::uint32_t len) {
    std::memcpy(slot(head_), &len, 4);
    ++head_;
    detail::word(ring_ + producer_at).store(head_, std::memory_order_release);
  }
  /// After publishing: true when the consumer sleeps and needs its eventfd signalled.
  bool consumer_sleeping() const {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    return detail::word(ring_ + sleeping_at).load(std::memory_order_relaxed) != 0;
  }
  /// How long (ns) a slot may wait before the sleeping consumer is signalled (0: at once).
  std::uint64_t consumer_wake_after() const {
    return std::uint64_t{detail::word(ring_ + wake_after_at).load(std::memory_order_relaxed)} * 1000;
  }
  std::uint32_t produced() const { return head_; }

 private:
  std::byte* slot(std::uint32_t i) const { return ring_ + ring_control + std::size_t{i & (slots_ - 1)} * slot_stride; }
  std::byte* ring_ = nullptr;
  std::uint32_t slots_ = 0, head_ = 0;
};

/// The consuming side of a ring.
class ring_consumer {
 public:
  ring_consumer() = default;
  ring_consumer(std::byte* ring, std::uint32_t slots) : ring_(ring), slots_(slots) {}
  /// Takes over a ring another consumer left: from the index it published.
  static ring_consumer resume(std::byte* ring, std::uint32_t slots) {
    ring_consumer c(ring, slots);
    c.tail_ = detail::word(ring + consumer_at).load(std::memory_order_acquire);
    return c;
  }
  /// Slots waiting, or ring_index_out_of_range when the producer's published index is more
  /// than slot_count ahead of (or behind) what was consumed.
  std::optional<std::uint32_t> available(fn_errc& err) const {
    const std::uint32_t p = detail::word(ring_ + producer_at).load(std::memory_order_acquire);
    const std::uint32_t n = p - tail_;
    if (n > slots_) {
      err = fn_errc::ring_index_out_of_range;
      return std::nullopt;
    }
    return n;
  }
  /// The frame in the next slot (available() > 0 first), or slot_length_out_of_range. The
  /// length is read once; the bytes stay the producer's to scribble on, so a consumer that
  /// checks them copies them first.
  std::optional<std::span<const std::byte>> peek(fn_errc& err) const {
    const std::byte* s = slot(tail_);
    const std::uint32_t len = detail::word(const_cast<std::byte*>(s)).load(std::memory_order_relaxed);
    if (len == 0 || len > slot_capacity) {
      err = fn_errc::slot_length_out_of_range;
      return std::nullopt;
    }
    return std::span<const std::byte>(s + slot_header, len);
  }
  /// Releases the slot peek() showed.
  void pop() {
    ++tail_;
    detail::word(ring_ + consumer_at).store(tail_, std::memory_order_release);
  }
  /// Before blocking on the eventfd: sets `sleeping`; returns false (and clears it) when a slot
  /// arrived meanwhile, so the caller must not block.
  bool arm_sleep() {
    detail::word(ring_ + sleeping_at).store(1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (detail::word(ring_ + producer_at).load(std::memory_order_relaxed) != tail_) {
      disarm_sleep();
      return false;
    }
    return true;
  }
  /// Sleeping while another thread consumes: the producer signals only when a slot waited
  /// `us` µs unconsumed (that thread stopped).
  void arm_sleep_after(std::uint32_t us) {
    detail::word(ring_ + wake_after_at).store(us, std::memory_order_relaxed);
    detail::word(ring_ + sleeping_at).store(1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }
  void disarm_sleep() {
    detail::word(ring_ + sleeping_at).store(0, std::memory_order_relaxed);
    detail::word(ring_ + wake_after_at).store(0, std::memory_order_relaxed);
  }
  std::uint32_t consumed() const { return tail_; }

 private:
  const std::byte* slot(std::uint32_t i) const { return ring_ + ring_control + std::size_t{i & (slots_ - 1)} * slot_stride; }
  std::byte* ring_ = nullptr;
  std::uint32_t slots_ = 0, tail_ = 0;
};

}  // namespace fn
}  // namespace pushwire::rnic
