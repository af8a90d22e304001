// Error codes shared by every pushwire codec, and their std::error_code category.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include <pushwire/wire/names.hpp>

namespace pushwire::wire {

/// Why a decode or an encode failed; the meaning of each code is in errc_table below.
/// The value 0 is never an error (std::error_code's "success").
enum class errc : std::uint8_t {
  truncated = 1,
  trailing_bytes,
  unknown_function,
  unsupported_version,
  zero_count,
  count_mismatch,
  too_large,
  reserved_nonzero,
  invalid_field,
  wrong_function,
  no_space,
  not_roce,
  bad_ihl,
  length_mismatch,
  chain_overrun,
  pad_overrun,
  reserved_opcode,
  icrc_mismatch,
  bad_pcap,
  not_cell,
  cell_crc_mismatch,
  packet_crc_mismatch,
  cell_missing,
  cell_duplicate,
  cell_out_of_order,
  vamh_missing,
  vamh_unexpected,
  reassembly_full,
  reassembly_timeout,
};

struct errc_info {
  std::string_view name;     ///< as pushwire-dump prints it
  std::string_view meaning;  ///< as spec/ documents it
};

/// Indexed by errc value - 1.
inline constexpr std::array<errc_info, 29> errc_table{{
    {"truncated", "The input ends before its fixed part, a counted array, or a sized byte string does."},
    {"trailing_bytes", "The input is longer than its counts and sizes imply, or ends inside an element that no count accounts for."},
    {"unknown_function", "A push-push function code that no message type has."},
    {"unsupported_version", "A version field other than the one this library speaks (push-push: 1)."},
    {"zero_count", "A count that must be at least 1 is 0, or an uncounted array that must be non-empty is empty."},
    {"count_mismatch", "A count disagrees with the whole number of elements the frame holds."},
    {"too_large", "A frame exceeds an explicit limit (codec_options::max_frame, default 4096; a cell's data above the receiver's cell payload size; a packet of more than 65535 cells), or a value exceeds the range of the field that must carry it (idata)."},
    {"reserved_nonzero", "A reserved field that must be zero is not."},
    {"invalid_field", "A field holds a value its definition forbids: a pool's element_count or element_size of 0, a value wider than its field on encode, CfgUtil data of the wrong size or range for its request code, a cell header whose type, flags and sequence disagree (spec/cells.md §3), or a later cell that disagrees with its packet's first."},
    {"wrong_function", "A known function code, but not the one a typed decoder was asked for."},
    {"no_space", "An encoder's output buffer is smaller than the encoded size."},
    {"not_roce", "A frame that is not RoCEv2: another EtherType, IP protocol, IP fragment or UDP destination port."},
    {"bad_ihl", "An IPv4 header length (IHL) below 5 words, or an IP version field that disagrees with the EtherType."},
    {"length_mismatch", "A length field disagrees with the frame: IPv4 total length or IPv6 payload length versus the UDP length, an ATOMIC_WRITE payload that is not 8 bytes, or a cell frame whose size is not what its length and flags imply."},
    {"chain_overrun", "The opcode's extended-header chain plus the ICRC is longer than the UDP payload."},
    {"pad_overrun", "The BTH PadCnt is larger than the payload it pads."},
    {"reserved_opcode", "A BTH opcode that is reserved, vendor-specific, or unknown to the opcode table."},
    {"icrc_mismatch", "The RoCEv2 invariant CRC does not match (only when the caller requires a good ICRC)."},
    {"bad_pcap", "A capture file that is not valid classic pcap or pcapng, or exceeds the reader's limits: the field names what (magic, version, incl_len; byte_order_magic, section_length, block_total_length, interface_count, option_length, if_tsresol, if_tsoffset, interface_id, captured_length, original_length, timestamp; spec/roce.md §13)."},
    {"not_cell", "An Ethernet frame whose EtherType (after at most one 802.1Q tag) is not 0x88B5, the cell EtherType."},
    {"cell_crc_mismatch", "A cell's CRC-32C does not match its bytes (the reassembler requires a good one)."},
    {"packet_crc_mismatch", "The packet CRC in a last cell does not match the packet's cells (each one's bytes before its CRC fields, in order)."},
    {"cell_missing", "A middle or last cell arrived with no packet in progress for it: its first cell was lost, or the packet was already dropped."},
    {"cell_duplicate", "A cell that was already received: a cell sequence number behind the next one expected, a second first cell, or a cell of a packet just delivered. The cell is ignored; its packet continues."},
    {"cell_out_of_order", "A cell sequence number ahead of the next one expected: an earlier cell is late or lost. The packet is dropped."},
    {"vamh_missing", "The first cell of an RDMA write carries no VA/MH."},
    {"vamh_unexpected", "VA/MH in a cell that must not carry one: a middle or last cell, or a cell of another type."},
    {"reassembly_full", "Taking the cell would exceed a reassembler bound: packets in flight, bytes held, or one packet's bytes (the field names which)."},
    {"reassembly_timeout", "A packet stayed incomplete longer than the reassembler's age bound and was dropped."},
}};

/// Every error code, in value order (for tests that must reach each one, and for documentation).
inline constexpr auto all_errc = [] {
  std::array<errc, errc_table.size()> a{};
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<errc>(i + 1);
  return a;
}();

namespace detail {
/// The named_value table of an error table indexed by value - 1.
template <auto& Table>
inline constexpr auto error_names = []<std::size_t... I>(std::index_sequence<I...>) {
  return std::array<named_value, sizeof...(I)>{named_value{I + 1, Table[I].name}...};
}(std::make_index_sequence<std::size(Table)>{});
}  // namespace detail

constexpr std::span<const named_value> wire_enum_names(errc) { return detail::error_names<errc_table>; }

/// The snake_case name of an error code (as pushwire-dump prints it), "ok" for 0, or "unknown".
template <named_enum E>
constexpr std::string_view error_name(E e) noexcept {
  if (e == E{}) return "ok";
  const std::string_view n = enum_name(e);
  return n.empty() ? std::string_view{"unknown"} : n;
}
constexpr std::string_view to_string(errc e) noexcept { return error_name(e); }

/// Where a decode failed: the code, the byte offset of the offending field in the input, and its
/// name ("" when no single field is to blame). Offsets are absolute within the buffer decoded.
struct error {
  errc code{};
  std::size_t offset = 0;
  std::string_view field{};
  friend constexpr bool operator==(const error&, const error&) = default;
};

/// The std::error_category of an error enum E (wire::errc, flow::errc): name() is
/// `error_domain(E{})`, found by ADL; message(v) is error_name(E(v)).
template <named_enum E>
class enum_error_category final : public std::error_category {
 public:
  const char* name() const noexcept override { return error_domain(E{}); }
  std::string message(int v) const override { return std::string{error_name(static_cast<E>(v))}; }
};
template <named_enum E>
const std::error_category& error_category_of() noexcept {
  static const enum_error_category<E> c;
  return c;
}

constexpr const char* error_domain(errc) { return "pushwire"; }
inline const std::error_category& error_category() noexcept { return error_category_of<errc>(); }
inline std::error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), error_category()}; }

}  // namespace pushwire::wire

template <>
struct std::is_error_code_enum<pushwire::wire::errc> : std::true_type {};
