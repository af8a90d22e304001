// The reference RNIC's vocabulary (spec/rnic.md): its error codes, access rights, memory keys,
// work completion statuses and opcodes, and a value-or-error result. Values that libibverbs also
// defines (access flags, completion status and opcode) have verbs' numbers, so a provider maps
// them one to one.
#pragma once

#include <array>
#include <charconv>
#include <cstdint>
#include <span>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>
#include <memory>

#include <pushwire/flow/rc.hpp>
#include <pushwire/wire/errc.hpp>
#include <pushwire/wire/names.hpp>

namespace pushwire::rnic {

/// A number (decimal; a floating-point one for a floating T) that is all of s: the text forms
/// of settings (classes.hpp, platform.hpp).
template <class T>
bool parse_number(std::string_view s, T& v) {
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return !s.empty() && ec == std::errc{} && p == s.data() + s.size();
}

/// Why a verb or a memory access was refused. 0 is never an error.
enum class errc : std::uint8_t {
  invalid_argument = 1,
  no_resources,
  not_found,
  busy,
  invalid_state,
  missing_attribute,
  invalid_attribute,
  queue_full,
  no_such_key,
  wrong_variant,
  deregistered,
  wrong_pd,
  no_access_right,
  out_of_range,
  wraps,
  too_deep,
  cycle,
  misaligned,
  page_fault,
};

/// A code's name and meaning (wire::errc_info, the one shape of every error table).
using wire::errc_info;

/// Indexed by errc value - 1 (spec/rnic.md lists it).
inline constexpr std::array<errc_info, 19> errc_table{{
    {"invalid_argument", "A value outside its documented range (a ring size that is not a power of two, an unknown flag, a length of 0 where one is needed)."},
    {"no_resources", "A table or ring is at the capacity the device was created with; nothing was added."},
    {"not_found", "No object of that handle or number exists on this device."},
    {"busy", "The object is still used by another (a PD with memory regions or queue pairs, a CQ with queue pairs, a key another key points into)."},
    {"invalid_state", "modify_qp: the QP's type has no transition from its current state to the one asked for."},
    {"missing_attribute", "modify_qp: an attribute the transition requires is not in the mask."},
    {"invalid_attribute", "modify_qp: an attribute the transition does not allow is in the mask, or its value is out of range."},
    {"queue_full", "A post found its work queue ring full."},
    {"no_such_key", "A memory key whose index names no registration (never registered, or beyond the table)."},
    {"wrong_variant", "A memory key whose index is registered under another 8-bit variant (a stale key of a re-registered region)."},
    {"deregistered", "A memory key whose registration was removed."},
    {"wrong_pd", "A memory key of another protection domain than the queue pair's (or, inside an indirect or pattern key, than the outer key's)."},
    {"no_access_right", "A memory key without the access right the operation needs (local write, remote write, remote read, remote atomic)."},
    {"out_of_range", "An access that starts before a key's first byte or ends after its last."},
    {"wraps", "An access whose address plus length passes 2^64."},
    {"too_deep", "Indirect or pattern keys nested deeper than max_key_depth."},
    {"cycle", "An indirect or pattern key that would reach itself."},
    {"misaligned", "An atomic whose address is not a multiple of 8."},
    {"page_fault", "An on-demand key's page is not resident: the access waits for the fault to be served (not an error of the request)."},
}};

constexpr std::span<const wire::named_value> wire_enum_names(errc) { return wire::detail::error_names<errc_table>; }
constexpr std::string_view name(errc e) { return wire::error_name(e); }
constexpr const char* error_domain(errc) { return "pushwire.rnic"; }
inline std::error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), wire::error_category_of<errc>()}; }

/// A T or an errc (never both). T must be default-constructible.
template <class T>
class [[nodiscard]] result {
 public:
  constexpr result(T v) : v_(std::move(v)) {}  // NOLINT: implicit by design
  constexpr result(errc e) : e_(e) {}          // NOLINT
  constexpr bool has_value() const { return e_ == errc{}; }
  constexpr explicit operator bool() const { return has_value(); }
  constexpr errc code() const { return e_; }
  constexpr const T& value() const& {
    if (!has_value()) std::terminate();
    return v_;
  }
  constexpr T& value() & {
    if (!has_value()) std::terminate();
    return v_;
  }
  constexpr const T& operator*() const& { return value(); }
  constexpr T& operator*() & { return value(); }
  constexpr const T* operator->() const { return &value(); }
  constexpr T* operator->() { return &value(); }

 private:
  T v_{};
  errc e_{};
};

/// Access rights of a memory registration (ibv_access_flags' values). Local read is always granted.
enum class access : std::uint32_t {
  none = 0,
  local_write = 1,
  remote_write = 2,
  remote_read = 4,
  remote_atomic = 8,
};
constexpr access operator|(access a, access b) { return access(std::uint32_t(a) | std::uint32_t(b)); }
constexpr access operator&(access a, access b) { return access(std::uint32_t(a) & std::uint32_t(b)); }
/// Every right of `want` is in `have`.
constexpr bool allows(access have, access want) { return (have & want) == want; }
/// `a` includes a right that stores into memory (local or remote write, or an atomic).
constexpr bool writes(access a) {
  return (a & (access::local_write | access::remote_write | access::remote_atomic)) != access::none;
}
inline constexpr std::array<wire::named_value, 4> access_names{{
    {access::local_write, "local_write"}, {access::remote_write, "remote_write"},
    {access::remote_read, "remote_read"}, {access::remote_atomic, "remote_atomic"},
}};
constexpr std::span<const wire::named_value> wire_enum_names(access) { return access_names; }
inline constexpr access all_access = access::local_write | access::remote_write | access::remote_read | access::remote_atomic;

/// A memory key: a 24-bit index into the device's key table and an 8-bit variant that changes
/// each time the index is reused, so a stale key never matches (as rxe and mlx5 build them).
constexpr std::uint32_t make_key(std::uint32_t index, std::uint8_t variant) { return index << 8 | variant; }
constexpr std::uint32_t key_index(std::uint32_t key) { return key >> 8; }
constexpr std::uint8_t key_variant(std::uint32_t key) { return static_cast<std::uint8_t>(key); }

/// Work completion status (ibv_wc_status' values).
enum class wc_status : std::uint8_t {
  success = 0,
  local_length_error = 1,
  local_qp_operation_error = 2,
  local_protection_error = 4,
  flushed = 5,
  bad_response = 7,
  local_access_error = 8,
  remote_invalid_request = 9,
  remote_access_error = 10,
  remote_operational_error = 11,
  retry_exceeded = 12,
  rnr_retry_exceeded = 13,
  fatal = 19,
};
inline constexpr std::array<wire::named_value, 13> wc_status_names{{
    {wc_status::success, "success"},
    {wc_status::local_length_error, "local_length_error"},
    {wc_status::local_qp_operation_error, "local_qp_operation_error"},
    {wc_status::local_protection_error, "local_protection_error"},
    {wc_status::flushed, "flushed"},
    {wc_status::bad_response, "bad_response"},
    {wc_status::local_access_error, "local_access_error"},
    {wc_status::remote_invalid_request, "remote_invalid_request"},
    {wc_status::remote_access_error, "remote_access_error"},
    {wc_status::remote_operational_error, "remote_operational_error"},
    {wc_status::retry_exceeded, "retry_exceeded"},
    {wc_status::rnr_retry_exceeded, "rnr_retry_exceeded"},
    {wc_status::fatal, "fatal"},
}};
constexpr std::span<const wire::named_value> wire_enum_names(wc_status) { return wc_status_names; }

/// The completion status of a transport machine's outcome.
constexpr wc_status status_of(flow::wc_status s) {
  switch (s) {
    case flow::wc_status::success: return wc_status::success;
    case flow::wc_status::retry_exceeded: return wc_status::retry_exceeded;
    case flow::wc_status::rnr_retry_exceeded: return wc_status::rnr_retry_exceeded;
    case flow::wc_status::remote_invalid_request: return wc_status::remote_invalid_request;
    case flow::wc_status::remote_access_error: return wc_status::remote_access_error;
    case flow::wc_status::remote_operational_error: return wc_status::remote_operational_error;
    case flow::wc_status::flushed: return wc_status::flushed;
  }
  return wc_status::fatal;
}

/// Work completion opcode (ibv_wc_opcode's values): send-queue operations, then receives (128+).
enum class wc_opcode : std::uint8_t {
  send = 0,
  rdma_write = 1,
  rdma_read = 2,
  compare_swap = 3,
  fetch_add = 4,
  recv = 128,
  recv_rdma_with_imm = 129,
};
inline constexpr std::array<wire::named_value, 7> wc_opcode_names{{
    {wc_opcode::send, "send"}, {wc_opcode::rdma_write, "rdma_write"}, {wc_opcode::rdma_read, "rdma_read"},
    {wc_opcode::compare_swap, "compare_swap"}, {wc_opcode::fetch_add, "fetch_add"}, {wc_opcode::recv, "recv"},
    {wc_opcode::recv_rdma_with_imm, "recv_rdma_with_imm"},
}};
constexpr std::span<const wire::named_value> wire_enum_names(wc_opcode) { return wc_opcode_names; }

/// The completion opcode of a send-queue operation.
constexpr wc_opcode wc_opcode_of(flow::wr_op op) {
  switch (op) {
    case flow::wr_op::send:
    case flow::wr_op::send_imm: return wc_opcode::send;
    case flow::wr_op::write:
    case flow::wr_op::write_imm: return wc_opcode::rdma_write;
    case flow::wr_op::read:
    case flow::wr_op::read_as_write: return wc_opcode::rdma_read;
    case flow::wr_op::compare_swap: return wc_opcode::compare_swap;
    case flow::wr_op::fetch_add: return wc_opcode::fetch_add;
    default: return wc_opcode::send;
  }
}

/// Nanoseconds of virtual time (the fabric's clock; the device never reads one).
using time_ns = flow::time_ns;

namespace detail {
/// std::allocator that leaves new elements default-initialised (bytes are not zeroed): frame
/// buffers are written whole before they are read.
template <class T>
struct uninit_allocator : std::allocator<T> {
  using value_type = T;
  uninit_allocator() = default;
  template <class U>
  uninit_allocator(const uninit_allocator<U>&) noexcept {}  // NOLINT
  template <class U>
  struct rebind {
    using other = uninit_allocator<U>;
  };
  template <class U>
  void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>) {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... A>
  void construct(U* p, A&&... a) {
    ::new (static_cast<void*>(p)) U(std::forward<A>(a)...);
  }
};
}  // namespace detail

/// The bytes of one Ethernet frame a port sends or receives.
using frame_bytes = std::vector<std::byte, detail::uninit_allocator<std::byte>>;

}  // namespace pushwire::rnic

template <>
struct std::is_error_code_enum<pushwire::rnic::errc> : std::true_type {};
