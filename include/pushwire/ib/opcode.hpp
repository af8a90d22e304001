// The opcode table, in the style of Linux rxe's rxe_opcode.c: one entry per BTH opcode the
// library knows (87: RC, UC, RD, UD, DC, CNP, and pushwire's manufacturer-specific
// READ_AS_WRITE 0xC0), each with its name, transport, operation, class flags, extended-header chain (offsets computed from the header descriptions in headers.hpp),
// payload rule and position in a message. Outside this file nothing names an opcode by number or
// classifies one by its name: code asks the entry (`info(op).is(op_class::send)`) or names it
// (`ib::opcode::rc_rdma_write_only_with_immediate`).
//
// Opcodes 0x40-0x5F are read as Dynamically Connected by default (as Wireshark 4.0 does), or as
// IBTA Reliable Datagram on request (rd_class). A DC packet is the RD packet of the same
// operation with an 8-byte DCETH (the DC access key) after the BTH: requests BTH DCETH RDETH DETH
// ..., responses BTH DCETH RDETH ...; 0x55 is DC connect (SE clear) or disconnect (SE set):
// BTH DCETH DCCETH. The typed opcode of an RD entry is 0x100 | its code, so the two readings of
// 0x40-0x5F are distinct values; code(op) is always the BTH byte.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <tuple>

#include <pushwire/ib/headers.hpp>
#include <pushwire/wire/options.hpp>

namespace pushwire::ib {

/// Extended transport headers, in the order they may follow the BTH.
enum class ext : std::uint8_t { rdeth, deth, dceth, feth, reth, atomiceth, aeth, atomicacketh, immdt, ieth, dcceth, cnp_pad, sinketh };

/// The described type of each ext, in ext order (sizes and offsets derive from these).
using ext_types = std::tuple<rdeth, deth, dceth, feth, reth, atomiceth, aeth, atomicacketh, immdt, ieth, dcceth, cnp_pad, sinketh>;
inline constexpr std::size_t ext_count = std::tuple_size_v<ext_types>;
template <ext E>
using ext_type = std::tuple_element_t<static_cast<std::size_t>(E), ext_types>;

inline constexpr auto ext_sizes = []<std::size_t... I>(std::index_sequence<I...>) {
  return std::array<std::uint8_t, ext_count>{static_cast<std::uint8_t>(wire::fixed_size<std::tuple_element_t<I, ext_types>>)...};
}(std::make_index_sequence<ext_count>{});

inline constexpr std::array<wire::named_value, ext_count> ext_names{{
    {ext::rdeth, "RDETH"}, {ext::deth, "DETH"}, {ext::dceth, "DCETH"}, {ext::feth, "FETH"},
    {ext::reth, "RETH"}, {ext::atomiceth, "AtomicETH"}, {ext::aeth, "AETH"}, {ext::atomicacketh, "AtomicAckETH"},
    {ext::immdt, "ImmDt"}, {ext::ieth, "IETH"}, {ext::dcceth, "DCCETH"}, {ext::cnp_pad, "CNP"}, {ext::sinketh, "SinkETH"},
}};
constexpr std::span<const wire::named_value> wire_enum_names(ext) { return ext_names; }

constexpr std::size_t size_of(ext e) { return ext_sizes[static_cast<std::size_t>(e)]; }
constexpr std::string_view name(ext e) { return wire::enum_name(e); }

/// The transport an opcode belongs to (BTH opcode bits 7..5; CNP is 0x81).
enum class transport : std::uint8_t { rc, uc, rd, ud, dc, cnp };
inline constexpr std::array<wire::named_value, 6> transport_names{{
    {transport::rc, "RC"}, {transport::uc, "UC"}, {transport::rd, "RD"},
    {transport::ud, "UD"}, {transport::dc, "DC"}, {transport::cnp, "CNP"},
}};
constexpr std::span<const wire::named_value> wire_enum_names(transport) { return transport_names; }
constexpr std::string_view name(transport t) { return wire::enum_name(t); }

/// Where a packet sits in its message. Single-packet operations (reads, acks, atomics) are only.
enum class position : std::uint8_t { only, first, middle, last };
inline constexpr std::array<wire::named_value, 4> position_names{{
    {position::only, "only"}, {position::first, "first"}, {position::middle, "middle"}, {position::last, "last"},
}};
constexpr std::span<const wire::named_value> wire_enum_names(position) { return position_names; }
constexpr std::string_view name(position p) { return wire::enum_name(p); }

/// The IBTA operations (BTH opcode bits 4..0), plus DC connect and the RoCEv2 CNP. The value is
/// internal; code(opcode) gives a packet's byte.
enum class operation : std::uint8_t {
  send_first, send_middle, send_last, send_last_with_immediate, send_only, send_only_with_immediate,
  rdma_write_first, rdma_write_middle, rdma_write_last, rdma_write_last_with_immediate, rdma_write_only,
  rdma_write_only_with_immediate, rdma_read_request, rdma_read_response_first, rdma_read_response_middle,
  rdma_read_response_last, rdma_read_response_only, acknowledge, atomic_acknowledge, compare_swap, fetch_add,
  resync, send_last_with_invalidate, send_only_with_invalidate, flush, atomic_write, connect, cnp, read_as_write,
};

/// Class flags of an opcode (op_class values combine with |). An entry has exactly one of
/// request / response, exactly one position, and one or more kinds.
enum class op_class : std::uint32_t {
  none = 0,
  request = 1u << 0,        ///< sent by a requester
  response = 1u << 1,       ///< sent by a responder (ACKs, READ responses)
  send = 1u << 2,           ///< SEND (consumes a receive on first / only)
  write = 1u << 3,          ///< RDMA WRITE
  read_request = 1u << 4,   ///< RDMA READ request
  read_response = 1u << 5,  ///< RDMA READ response
  atomic = 1u << 6,         ///< COMPARE_SWAP, FETCH_ADD, and their ATOMIC_ACKNOWLEDGE
  ack = 1u << 7,            ///< ACKNOWLEDGE, ATOMIC_ACKNOWLEDGE
  immediate = 1u << 8,      ///< carries ImmDt (a receive completion with immediate data)
  invalidate = 1u << 9,     ///< carries IETH
  first = 1u << 10,
  middle = 1u << 11,
  last = 1u << 12,
  only = 1u << 13,
  ack_req = 1u << 14,       ///< may set AckReq: a request on a reliable transport (RC, RD, DC)
  flush = 1u << 15,         ///< FLUSH
  atomic_write = 1u << 16,  ///< ATOMIC_WRITE
  resync = 1u << 17,        ///< RD RESYNC
  connect = 1u << 18,       ///< DC connect / disconnect
  cnp = 1u << 19,           ///< RoCEv2 congestion notification
  payload = 1u << 20,       ///< carries a payload (possibly empty)
  read_as_write = 1u << 21, ///< a READ the responder serves as an RDMA WRITE (pushwire's 0xC0)
};
constexpr op_class operator|(op_class a, op_class b) {
  return static_cast<op_class>(static_cast<std::uint32_t>(a) | static_cast<std::uint32_t>(b));
}
constexpr op_class operator&(op_class a, op_class b) {
  return static_cast<op_class>(static_cast<std::uint32_t>(a) & static_cast<std::uint32_t>(b));
}
inline constexpr std::array<wire::named_value, 22> op_class_names{{
    {op_class::request, "request"}, {op_class::response, "response"}, {op_class::send, "send"},
    {op_class::write, "write"}, {op_class::read_request, "read_request"}, {op_class::read_response, "read_response"},
    {op_class::atomic, "atomic"}, {op_class::ack, "ack"}, {op_class::immediate, "immediate"},
    {op_class::invalidate, "invalidate"}, {op_class::first, "first"}, {op_class::middle, "middle"},
    {op_class::last, "last"}, {op_class::only, "only"}, {op_class::ack_req, "ack_req"}, {op_class::flush, "flush"},
    {op_class::atomic_write, "atomic_write"}, {op_class::resync, "resync"}, {op_class::connect, "connect"},
    {op_class::cnp, "cnp"}, {op_class::payload, "payload"}, {op_class::read_as_write, "read_as_write"},
}};
constexpr std::span<const wire::named_value> wire_enum_names(op_class) { return op_class_names; }

/// Every opcode, as X(name, value, operation): value is the BTH opcode, with 0x100 added for the
/// IBTA RD reading of 0x40-0x5F. The order is the table's.
#define PUSHWIRE_IB_OPCODES(X) \
  X(rc_send_first,                     0x000, send_first) \
  X(rc_send_middle,                    0x001, send_middle) \
  X(rc_send_last,                      0x002, send_last) \
  X(rc_send_last_with_immediate,       0x003, send_last_with_immediate) \
  X(rc_send_only,                      0x004, send_only) \
  X(rc_send_only_with_immediate,       0x005, send_only_with_immediate) \
  X(rc_rdma_write_first,               0x006, rdma_write_first) \
  X(rc_rdma_write_middle,              0x007, rdma_write_middle) \
  X(rc_rdma_write_last,                0x008, rdma_write_last) \
  X(rc_rdma_write_last_with_immediate, 0x009, rdma_write_last_with_immediate) \
  X(rc_rdma_write_only,                0x00A, rdma_write_only) \
  X(rc_rdma_write_only_with_immediate, 0x00B, rdma_write_only_with_immediate) \
  X(rc_rdma_read_request,              0x00C, rdma_read_request) \
  X(rc_rdma_read_response_first,       0x00D, rdma_read_response_first) \
  X(rc_rdma_read_response_middle,      0x00E, rdma_read_response_middle) \
  X(rc_rdma_read_response_last,        0x00F, rdma_read_response_last) \
  X(rc_rdma_read_response_only,        0x010, rdma_read_response_only) \
  X(rc_acknowledge,                    0x011, acknowledge) \
  X(rc_atomic_acknowledge,             0x012, atomic_acknowledge) \
  X(rc_compare_swap,                   0x013, compare_swap) \
  X(rc_fetch_add,                      0x014, fetch_add) \
  X(rc_send_last_with_invalidate,      0x016, send_last_with_invalidate) \
  X(rc_send_only_with_invalidate,      0x017, send_only_with_invalidate) \
  X(rc_flush,                          0x01C, flush) \
  X(rc_atomic_write,                   0x01D, atomic_write) \
  X(uc_send_first,                     0x020, send_first) \
  X(uc_send_middle,                    0x021, send_middle) \
  X(uc_send_last,                      0x022, send_last) \
  X(uc_send_last_with_immediate,       0x023, send_last_with_immediate) \
  X(uc_send_only,                      0x024, send_only) \
  X(uc_send_only_with_immediate,       0x025, send_only_with_immediate) \
  X(uc_rdma_write_first,               0x026, rdma_write_first) \
  X(uc_rdma_write_middle,              0x027, rdma_write_middle) \
  X(uc_rdma_write_last,                0x028, rdma_write_last) \
  X(uc_rdma_write_last_with_immediate, 0x029, rdma_write_last_with_immediate) \
  X(uc_rdma_write_only,                0x02A, rdma_write_only) \
  X(uc_rdma_write_only_with_immediate, 0x02B, rdma_write_only_with_immediate) \
  X(rd_send_first,                     0x140, send_first) \
  X(rd_send_middle,                    0x141, send_middle) \
  X(rd_send_last,                      0x142, send_last) \
  X(rd_send_last_with_immediate,       0x143, send_last_with_immediate) \
  X(rd_send_only,                      0x144, send_only) \
  X(rd_send_only_with_immediate,       0x145, send_only_with_immediate) \
  X(rd_rdma_write_first,               0x146, rdma_write_first) \
  X(rd_rdma_write_middle,              0x147, rdma_write_middle) \
  X(rd_rdma_write_last,                0x148, rdma_write_last) \
  X(rd_rdma_write_last_with_immediate, 0x149, rdma_write_last_with_immediate) \
  X(rd_rdma_write_only,                0x14A, rdma_write_only) \
  X(rd_rdma_write_only_with_immediate, 0x14B, rdma_write_only_with_immediate) \
  X(rd_rdma_read_request,              0x14C, rdma_read_request) \
  X(rd_rdma_read_response_first,       0x14D, rdma_read_response_first) \
  X(rd_rdma_read_response_middle,      0x14E, rdma_read_response_middle) \
  X(rd_rdma_read_response_last,        0x14F, rdma_read_response_last) \
  X(rd_rdma_read_response_only,        0x150, rdma_read_response_only) \
  X(rd_acknowledge,                    0x151, acknowledge) \
  X(rd_atomic_acknowledge,             0x152, atomic_acknowledge) \
  X(rd_compare_swap,                   0x153, compare_swap) \
  X(rd_fetch_add,                      0x154, fetch_add) \
  X(rd_resync,                         0x155, resync) \
  X(rd_flush,                          0x15C, flush) \
  X(ud_send_only,                      0x064, send_only) \
  X(ud_send_only_with_immediate,       0x065, send_only_with_immediate) \
  X(dc_send_first,                     0x040, send_first) \
  X(dc_send_middle,                    0x041, send_middle) \
  X(dc_send_last,                      0x042, send_last) \
  X(dc_send_last_with_immediate,       0x043, send_last_with_immediate) \
  X(dc_send_only,                      0x044, send_only) \
  X(dc_send_only_with_immediate,       0x045, send_only_with_immediate) \
  X(dc_rdma_write_first,               0x046, rdma_write_first) \
  X(dc_rdma_write_middle,              0x047, rdma_write_middle) \
  X(dc_rdma_write_last,                0x048, rdma_write_last) \
  X(dc_rdma_write_last_with_immediate, 0x049, rdma_write_last_with_immediate) \
  X(dc_rdma_write_only,                0x04A, rdma_write_only) \
  X(dc_rdma_write_only_with_immediate, 0x04B, rdma_write_only_with_immediate) \
  X(dc_rdma_read_request,              0x04C, rdma_read_request) \
  X(dc_rdma_read_response_first,       0x04D, rdma_read_response_first) \
  X(dc_rdma_read_response_middle,      0x04E, rdma_read_response_middle) \
  X(dc_rdma_read_response_last,        0x04F, rdma_read_response_last) \
  X(dc_rdma_read_response_only,        0x050, rdma_read_response_only) \
  X(dc_acknowledge,                    0x051, acknowledge) \
  X(dc_atomic_acknowledge,             0x052, atomic_acknowledge) \
  X(dc_compare_swap,                   0x053, compare_swap) \
  X(dc_fetch_add,                      0x054, fetch_add) \
  X(dc_flush,                          0x05C, flush) \
  X(dc_connect,                        0x055, connect) \
  X(cnp,                               0x081, cnp) \
  X(rc_read_as_write,                  0x0C0, read_as_write)

/// A BTH opcode, by name (rc_send_first ... cnp); code() is its byte.
enum class opcode : std::uint16_t {
#define PUSHWIRE_IB_OPCODE_ENUM_(n, v, o) n = v,
  PUSHWIRE_IB_OPCODES(PUSHWIRE_IB_OPCODE_ENUM_)
#undef PUSHWIRE_IB_OPCODE_ENUM_
};

/// The BTH byte of op.
constexpr std::uint8_t code(opcode op) { return static_cast<std::uint8_t>(static_cast<std::uint16_t>(op) & 0xFF); }

/// How to read opcodes 0x40-0x5F (dc, the default, or ibta_rd).
using wire::rd_class;

inline constexpr std::size_t max_chain = 5;
inline constexpr std::size_t bth_size = wire::fixed_size<bth>;

/// One entry of the table.
struct opcode_info {
  opcode id{};
  std::uint8_t code = 0;           ///< the BTH byte
  std::string_view name;           ///< "RC_SEND_FIRST", "DC_CONNECT", "CNP"
  std::string_view op_name;        ///< the operation, "SEND_FIRST"
  operation op{};
  transport tp = transport::rc;
  position pos = position::only;
  op_class cls = op_class::none;
  bool payload = false;            ///< carries a payload (possibly empty)
  std::uint8_t fixed_payload = 0;  ///< payload must be exactly this many bytes (ATOMIC_WRITE: 8); 0 = any
  bool request = true;             ///< a requester's packet (false: responses and acks)
  std::uint8_t chain_len = 0;
  std::array<ext, max_chain> chain{};
  std::array<std::uint8_t, max_chain> offset{};  ///< of chain[i] from the start of the BTH
  std::uint8_t header_len = bth_size;            ///< BTH + chain
  bool validating_headers = false;               ///< the chain has a header with reserved bytes to check

  /// Every flag of c is set.
  constexpr bool is(op_class c) const { return (cls & c) == c; }
  /// Some flag of c is set.
  constexpr bool any(op_class c) const { return (cls & c) != op_class::none; }
  /// First or only: the packet starts a message.
  constexpr bool starts() const { return pos == position::first || pos == position::only; }
  /// Last or only: the packet ends a message.
  constexpr bool ends() const { return pos == position::last || pos == position::only; }
  constexpr std::span<const ext> headers() const { return {chain.data(), chain_len}; }
  constexpr bool has(ext e) const {
    for (std::size_t i = 0; i < chain_len; ++i)
      if (chain[i] == e) return true;
    return false;
  }
  /// Offset of e from the start of the BTH, or -1.
  constexpr int offset_of(ext e) const {
    for (std::size_t i = 0; i < chain_len; ++i)
      if (chain[i] == e) return offset[i];
    return -1;
  }
};

namespace detail {

struct op_def {
  operation op;
  std::string_view name;
  position pos;
  bool payload;
  std::uint8_t fixed_payload;
  bool request;
  op_class kind;
  std::uint8_t n;
  std::array<ext, 2> chain;
};

using enum position;
using enum operation;
inline constexpr op_class snd = op_class::send, wr = op_class::write, imm = op_class::immediate;
// Each operation: its name, position, payload, direction, kind flags, and the headers it carries
// after any transport prefix (IBTA vol. 1 9.2-9.4; FLUSH and ATOMIC_WRITE: Linux rxe).
inline constexpr op_def ops[] = {
    {send_first, "SEND_FIRST", first, true, 0, true, snd, 0, {}},
    {send_middle, "SEND_MIDDLE", middle, true, 0, true, snd, 0, {}},
    {send_last, "SEND_LAST", last, true, 0, true, snd, 0, {}},
    {send_last_with_immediate, "SEND_LAST_WITH_IMMEDIATE", last, true, 0, true, snd | imm, 1, {ext::immdt}},
    {send_only, "SEND_ONLY", only, true, 0, true, snd, 0, {}},
    {send_only_with_immediate, "SEND_ONLY_WITH_IMMEDIATE", only, true, 0, true, snd | imm, 1, {ext::immdt}},
    {rdma_write_first, "RDMA_WRITE_FIRST", first, true, 0, true, wr, 1, {ext::reth}},
    {rdma_write_middle, "RDMA_WRITE_MIDDLE", middle, true, 0, true, wr, 0, {}},
    {rdma_write_last, "RDMA_WRITE_LAST", last, true, 0, true, wr, 0, {}},
    {rdma_write_last_with_immediate, "RDMA_WRITE_LAST_WITH_IMMEDIATE", last, true, 0, true, wr | imm, 1, {ext::immdt}},
    {rdma_write_only, "RDMA_WRITE_ONLY", only, true, 0, true, wr, 1, {ext::reth}},
    {rdma_write_only_with_immediate, "RDMA_WRITE_ONLY_WITH_IMMEDIATE", only, true, 0, true, wr | imm, 2, {ext::reth, ext::immdt}},
    {rdma_read_request, "RDMA_READ_REQUEST", only, false, 0, true, op_class::read_request, 1, {ext::reth}},
    {rdma_read_response_first, "RDMA_READ_RESPONSE_FIRST", first, true, 0, false, op_class::read_response, 1, {ext::aeth}},
    {rdma_read_response_middle, "RDMA_READ_RESPONSE_MIDDLE", middle, true, 0, false, op_class::read_response, 0, {}},
    {rdma_read_response_last, "RDMA_READ_RESPONSE_LAST", last, true, 0, false, op_class::read_response, 1, {ext::aeth}},
    {rdma_read_response_only, "RDMA_READ_RESPONSE_ONLY", only, true, 0, false, op_class::read_response, 1, {ext::aeth}},
    {acknowledge, "ACKNOWLEDGE", only, false, 0, false, op_class::ack, 1, {ext::aeth}},
    {atomic_acknowledge, "ATOMIC_ACKNOWLEDGE", only, false, 0, false, op_class::ack | op_class::atomic, 2, {ext::aeth, ext::atomicacketh}},
    {compare_swap, "COMPARE_SWAP", only, false, 0, true, op_class::atomic, 1, {ext::atomiceth}},
    {fetch_add, "FETCH_ADD", only, false, 0, true, op_class::atomic, 1, {ext::atomiceth}},
    {resync, "RESYNC", only, false, 0, true, op_class::resync, 0, {}},
    {send_last_with_invalidate, "SEND_LAST_WITH_INVALIDATE", last, true, 0, true, snd | op_class::invalidate, 1, {ext::ieth}},
    {send_only_with_invalidate, "SEND_ONLY_WITH_INVALIDATE", only, true, 0, true, snd | op_class::invalidate, 1, {ext::ieth}},
    {flush, "FLUSH", only, false, 0, true, op_class::flush, 2, {ext::feth, ext::reth}},
    {atomic_write, "ATOMIC_WRITE", only, true, 8, true, op_class::atomic_write, 1, {ext::reth}},
    {connect, "CONNECT", only, false, 0, true, op_class::connect, 1, {ext::dcceth}},
    {cnp, "CNP", only, false, 0, true, op_class::cnp, 1, {ext::cnp_pad}},
    // pushwire's manufacturer-specific opcode (IBTA reserves 0xC0-0xFF for them): a READ served as
    // an RDMA WRITE into the sink (spec/roce.md §4)
    {read_as_write, "READ_AS_WRITE", only, false, 0, true, op_class::read_as_write, 2, {ext::reth, ext::sinketh}},
};
static_assert(std::size(ops) == static_cast<std::size_t>(operation::read_as_write) + 1);

constexpr const op_def& def(operation o) { return ops[static_cast<std::size_t>(o)]; }
inline constexpr auto operation_names = []<std::size_t... I>(std::index_sequence<I...>) {
  return std::array<wire::named_value, sizeof...(I)>{wire::named_value{ops[I].op, ops[I].name}...};
}(std::make_index_sequence<std::size(ops)>{});

constexpr transport transport_of(std::uint16_t value) {
  if (value == 0x81) return transport::cnp;
  if (value == 0xC0) return transport::rc;  // pushwire's manufacturer-specific READ_AS_WRITE, on RC
  if (value & 0x100) return transport::rd;
  switch (value >> 5) {
    case 0: return transport::rc;
    case 1: return transport::uc;
    case 2: return transport::dc;
    default: return transport::ud;
  }
}

// The enumerators' names as written, and in upper case for display.
inline constexpr std::string_view enum_names[] = {
#define PUSHWIRE_IB_OPCODE_NAME_(n, v, o) #n,
    PUSHWIRE_IB_OPCODES(PUSHWIRE_IB_OPCODE_NAME_)
#undef PUSHWIRE_IB_OPCODE_NAME_
};
inline constexpr std::size_t table_size = std::size(enum_names);
inline constexpr std::size_t name_room = 40;
inline constexpr auto upper_chars = [] {
  std::array<std::array<char, name_room>, table_size> a{};
  for (std::size_t i = 0; i < table_size; ++i)
    for (std::size_t k = 0; k < enum_names[i].size(); ++k) {
      const char c = enum_names[i][k];
      a[i][k] = c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c;
    }
  return a;
}();

constexpr opcode_info make(opcode id, std::size_t index, operation o) {
  const auto value = static_cast<std::uint16_t>(id);
  const op_def& d = def(o);
  opcode_info i{};
  i.id = id;
  i.code = code(id);
  i.name = std::string_view(upper_chars[index].data(), enum_names[index].size());
  i.op_name = d.name;
  i.op = o;
  i.tp = transport_of(value);
  i.pos = d.pos;
  i.payload = d.payload;
  i.fixed_payload = d.fixed_payload;
  i.request = d.request;
  constexpr op_class pos_flag[] = {op_class::only, op_class::first, op_class::middle, op_class::last};
  i.cls = d.kind | (d.request ? op_class::request : op_class::response) | pos_flag[static_cast<std::size_t>(d.pos)];
  if (d.payload) i.cls = i.cls | op_class::payload;
  if (d.request && (i.tp == transport::rc || i.tp == transport::rd || i.tp == transport::dc)) i.cls = i.cls | op_class::ack_req;
  // The transport prefix (DC: DCETH, then RD's), then the operation's headers.
  std::array<ext, max_chain> chain{};
  std::size_t len = 0;
  if (i.tp == transport::dc) chain[len++] = ext::dceth;
  if ((i.tp == transport::rd || i.tp == transport::dc) && o != connect) {
    chain[len++] = ext::rdeth;
    if (d.request) chain[len++] = ext::deth;
  }
  if (i.tp == transport::ud) chain[len++] = ext::deth;
  for (std::size_t j = 0; j < d.n; ++j) chain[len++] = d.chain[j];
  std::uint8_t off = bth_size;
  for (std::size_t j = 0; j < len; ++j) {
    i.chain[i.chain_len] = chain[j];
    i.offset[i.chain_len++] = off;
    off = static_cast<std::uint8_t>(off + size_of(chain[j]));
    i.validating_headers = i.validating_headers || chain[j] == ext::dcceth || chain[j] == ext::cnp_pad;
  }
  i.header_len = off;
  return i;
}

constexpr std::array<opcode_info, table_size> make_table() {
  std::array<opcode_info, table_size> out{};
  std::size_t n = 0;
#define PUSHWIRE_IB_OPCODE_ROW_(name, v, o) out[n] = make(opcode::name, n, operation::o), ++n;
  PUSHWIRE_IB_OPCODES(PUSHWIRE_IB_OPCODE_ROW_)
#undef PUSHWIRE_IB_OPCODE_ROW_
  return out;
}

}  // namespace detail

/// "SEND_FIRST", ... (IBTA's operation names).
constexpr std::span<const wire::named_value> wire_enum_names(operation) { return detail::operation_names; }

/// Every opcode the library knows, in PUSHWIRE_IB_OPCODES order.
inline constexpr auto opcodes = detail::make_table();

namespace detail {
constexpr std::array<std::int16_t, 256> make_index(rd_class rd) {
  std::array<std::int16_t, 256> idx{};
  idx.fill(-1);
  for (std::size_t i = 0; i < opcodes.size(); ++i) {
    const auto& o = opcodes[i];
    if ((o.tp == transport::rd && rd == rd_class::dc) || (o.tp == transport::dc && rd == rd_class::ibta_rd)) continue;
    idx[o.code] = static_cast<std::int16_t>(i);
  }
  return idx;
}
inline constexpr auto index_dc = make_index(rd_class::dc);
inline constexpr auto index_rd = make_index(rd_class::ibta_rd);
constexpr std::size_t index_of(opcode op) {
  const auto v = static_cast<std::uint16_t>(op);
  return static_cast<std::size_t>((v & 0x100 ? index_rd : index_dc)[v & 0xFF]);
}
// Display names for wire_enum_names(opcode).
inline constexpr auto opcode_named = []<std::size_t... I>(std::index_sequence<I...>) {
  return std::array<wire::named_value, table_size>{wire::named_value{opcodes[I].id, opcodes[I].name}...};
}(std::make_index_sequence<table_size>{});
}  // namespace detail

/// Whether op is one of the enumerators (a value cast from elsewhere may not be).
constexpr bool is_known(opcode op) {
  const auto v = static_cast<std::uint16_t>(op);
  if (v > 0x1FF) return false;
  const int i = (v & 0x100 ? detail::index_rd : detail::index_dc)[v & 0xFF];
  return i >= 0 && opcodes[static_cast<std::size_t>(i)].id == op;
}

/// The entry of op (is_known(op) must hold).
constexpr const opcode_info& info(opcode op) { return opcodes[detail::index_of(op)]; }

/// The request packet takes a receive WQE at the responder (IBTA 9.7.5.1.3, C9-?? resources): a
/// SEND's FIRST or ONLY, an RDMA WRITE with immediate's LAST or ONLY. Only these can meet a
/// genuine RNR (no receive posted); an RNR NAK answering any other request is a page-fault ACK.
constexpr bool needs_receive(const opcode_info& o) {
  return o.request && ((o.is(op_class::send) && o.starts()) || (o.is(op_class::write) && o.is(op_class::immediate)));
}

/// The index of `code` in `opcodes`, or -1 when it is reserved, vendor-specific or unknown.
/// (Constant-evaluation friendly: no pointer compared with null, which g++ -fsanitize=undefined
/// refuses to fold.)
constexpr int opcode_index(std::uint8_t code, rd_class rd = rd_class::dc) {
  return (rd == rd_class::dc ? detail::index_dc : detail::index_rd)[code];
}

/// The entry for `code`, or nullptr when it is reserved, vendor-specific or otherwise unknown.
constexpr const opcode_info* find_opcode(std::uint8_t code, rd_class rd = rd_class::dc) {
  const int i = opcode_index(code, rd);
  return i < 0 ? nullptr : &opcodes[static_cast<std::size_t>(i)];
}

/// The typed opcode of a BTH byte, or nullopt when the table has none.
constexpr std::optional<opcode> to_opcode(std::uint8_t code, rd_class rd = rd_class::dc) {
  const int i = opcode_index(code, rd);
  if (i < 0) return std::nullopt;
  return opcodes[static_cast<std::size_t>(i)].id;
}

namespace detail {
inline constexpr std::size_t operation_count = std::size(ops);
inline constexpr auto by_operation = [] {
  std::array<std::array<std::int16_t, operation_count>, 6> t{};
  for (auto& row : t) row.fill(-1);
  for (std::size_t i = 0; i < opcodes.size(); ++i)
    t[static_cast<std::size_t>(opcodes[i].tp)][static_cast<std::size_t>(opcodes[i].op)] = static_cast<std::int16_t>(i);
  return t;
}();
}  // namespace detail

/// The opcode of operation o on transport t, or nullopt when t has no such opcode.
constexpr std::optional<opcode> opcode_of(transport t, operation o) {
  const int i = detail::by_operation[static_cast<std::size_t>(t)][static_cast<std::size_t>(o)];
  if (i < 0) return std::nullopt;
  return opcodes[static_cast<std::size_t>(i)].id;
}

/// The operation of packet `index` (0-based) of a message of `count` packets (count >= 1) whose
/// only / first / middle / last operations are given.
constexpr operation operation_at(std::uint32_t index, std::uint32_t count, operation only, operation first,
                                 operation middle, operation last) {
  return count == 1 ? only : index == 0 ? first : index + 1 == count ? last : middle;
}

constexpr std::span<const wire::named_value> wire_enum_names(opcode) { return detail::opcode_named; }
/// "RC_SEND_FIRST".
constexpr std::string_view name(opcode op) { return info(op).name; }
/// The name of a packet of opcode o: o.name, except DC_DISCONNECT for DC_CONNECT with the BTH's
/// SE bit set. (Null-terminated: every name is.)
constexpr std::string_view packet_name(const opcode_info& o, bool se) {
  return o.id == opcode::dc_connect && se ? std::string_view{"DC_DISCONNECT"} : o.name;
}

// Each enumerator is the table entry of its value, with the name its transport and operation
// give: the enum, the table and the names cannot drift apart.
static_assert([] {
  for (std::size_t i = 0; i < opcodes.size(); ++i) {
    const opcode_info& o = opcodes[i];
    if (detail::index_of(o.id) != i) return false;
    std::string_view n = detail::enum_names[i];
    const std::string_view t = o.tp == transport::rd ? "rd_" : o.tp == transport::uc ? "uc_" : o.tp == transport::ud ? "ud_"
                               : o.tp == transport::dc ? "dc_" : o.tp == transport::rc ? "rc_" : "";
    if (n.substr(0, t.size()) != t) return false;
    n.remove_prefix(t.size());
    const std::string_view op = o.op_name;
    if (n.size() != op.size()) return false;
    for (std::size_t k = 0; k < n.size(); ++k)
      if (n[k] != (op[k] >= 'A' && op[k] <= 'Z' ? static_cast<char>(op[k] - 'A' + 'a') : op[k])) return false;
  }
  return true;
}());
static_assert(opcodes.size() == 87);
static_assert(info(opcode::rc_rdma_write_only_with_immediate).header_len == 12 + 16 + 4);
static_assert(info(opcode::ud_send_only).header_len == 20);
static_assert(info(opcode::dc_connect).header_len == 12 + 8 + 16);
static_assert(info(opcode::dc_rdma_write_only).offset_of(ext::reth) == 12 + 8 + 4 + 8);  // DC: BTH DCETH RDETH DETH RETH
static_assert(info(opcode::rd_rdma_write_only).header_len == 12 + 4 + 8 + 16);
static_assert(code(opcode::rd_rdma_write_only) == code(opcode::dc_rdma_write_only));
static_assert(!find_opcode(0x18) && !find_opcode(0xE0) && !find_opcode(0x80) && !find_opcode(0xC1));
static_assert(info(opcode::rc_read_as_write).header_len == 12 + 16 + 12);

}  // namespace pushwire::ib
