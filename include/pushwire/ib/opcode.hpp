// The opcode table: for every valid BTH opcode, its name, transport, extended-header chain,
// whether it carries a payload, and its position in a message. Built at compile time from one
// list of operations and the transports that use them; header offsets are computed from the
// header descriptions (headers.hpp). Opcodes 0x40-0x5F are read as Dynamically Connected by
// default (as Wireshark 4.0 does), or as IBTA Reliable Datagram on request.
//
// A DC packet is the RD packet of the same opcode with an 8-byte DCETH (the DC access key)
// inserted after the BTH: requests BTH DCETH RDETH DETH ..., responses BTH DCETH RDETH ....
// Wireshark 4.0 reads exactly that shape (a 20-byte BTH, then the RD chain); 0x55 is DC connect
// (SE clear) or disconnect (SE set): BTH DCETH DCCETH.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <tuple>

#include <pushwire/ib/headers.hpp>

namespace pushwire::ib {

/// Extended transport headers, in the order they may follow the BTH.
enum class ext : std::uint8_t { rdeth, deth, dceth, feth, reth, atomiceth, aeth, atomicacketh, immdt, ieth, dcceth, cnp_pad };

/// The described type of each ext, in ext order (sizes and offsets derive from these).
using ext_types = std::tuple<rdeth, deth, dceth, feth, reth, atomiceth, aeth, atomicacketh, immdt, ieth, dcceth, cnp_pad>;
inline constexpr std::size_t ext_count = std::tuple_size_v<ext_types>;
template <ext E>
using ext_type = std::tuple_element_t<static_cast<std::size_t>(E), ext_types>;

inline constexpr auto ext_sizes = []<std::size_t... I>(std::index_sequence<I...>) {
  return std::array<std::uint8_t, ext_count>{static_cast<std::uint8_t>(wire::fixed_size<std::tuple_element_t<I, ext_types>>)...};
}(std::make_index_sequence<ext_count>{});

inline constexpr std::array<std::string_view, ext_count> ext_names{
    "RDETH", "DETH", "DCETH", "FETH", "RETH", "AtomicETH", "AETH", "AtomicAckETH", "ImmDt", "IETH", "DCCETH", "CNP"};

constexpr std::size_t size_of(ext e) { return ext_sizes[static_cast<std::size_t>(e)]; }
constexpr std::string_view name(ext e) { return ext_names[static_cast<std::size_t>(e)]; }

enum class transport : std::uint8_t { rc, uc, rd, ud, dc, cnp };
inline constexpr std::array<std::string_view, 6> transport_names{"RC", "UC", "RD", "UD", "DC", "CNP"};
constexpr std::string_view name(transport t) { return transport_names[static_cast<std::size_t>(t)]; }

/// Where a packet sits in its message. Single-packet operations (reads, acks, atomics) are only.
enum class position : std::uint8_t { only, first, middle, last };
inline constexpr std::array<std::string_view, 4> position_names{"only", "first", "middle", "last"};
constexpr std::string_view name(position p) { return position_names[static_cast<std::size_t>(p)]; }

inline constexpr std::size_t max_chain = 5;
inline constexpr std::size_t bth_size = wire::fixed_size<bth>;

struct opcode_info {
  std::uint8_t code = 0;
  std::string_view op_name;  ///< the operation, e.g. "SEND_FIRST"
  transport tp = transport::rc;
  position pos = position::only;
  bool payload = false;            ///< carries a payload (possibly empty)
  std::uint8_t fixed_payload = 0;  ///< payload must be exactly this many bytes (ATOMIC_WRITE: 8); 0 = any
  bool request = true;             ///< a requester's packet (false: responses and acks)
  std::uint8_t chain_len = 0;
  std::array<ext, max_chain> chain{};
  std::array<std::uint8_t, max_chain> offset{};  ///< of chain[i] from the start of the BTH
  std::uint8_t header_len = bth_size;            ///< BTH + chain
  bool validating_headers = false;               ///< the chain has a header with reserved bytes to check

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
  std::uint8_t op;
  std::string_view name;
  position pos;
  bool payload;
  std::uint8_t fixed_payload;
  bool request;
  std::uint8_t n;
  std::array<ext, 2> chain;
};

using enum position;
// IBTA operations (opcode bits 4..0) and the headers they carry after any transport prefix.
inline constexpr op_def ops[] = {
    {0x00, "SEND_FIRST", first, true, 0, true, 0, {}},
    {0x01, "SEND_MIDDLE", middle, true, 0, true, 0, {}},
    {0x02, "SEND_LAST", last, true, 0, true, 0, {}},
    {0x03, "SEND_LAST_WITH_IMMEDIATE", last, true, 0, true, 1, {ext::immdt}},
    {0x04, "SEND_ONLY", only, true, 0, true, 0, {}},
    {0x05, "SEND_ONLY_WITH_IMMEDIATE", only, true, 0, true, 1, {ext::immdt}},
    {0x06, "RDMA_WRITE_FIRST", first, true, 0, true, 1, {ext::reth}},
    {0x07, "RDMA_WRITE_MIDDLE", middle, true, 0, true, 0, {}},
    {0x08, "RDMA_WRITE_LAST", last, true, 0, true, 0, {}},
    {0x09, "RDMA_WRITE_LAST_WITH_IMMEDIATE", last, true, 0, true, 1, {ext::immdt}},
    {0x0A, "RDMA_WRITE_ONLY", only, true, 0, true, 1, {ext::reth}},
    {0x0B, "RDMA_WRITE_ONLY_WITH_IMMEDIATE", only, true, 0, true, 2, {ext::reth, ext::immdt}},
    {0x0C, "RDMA_READ_REQUEST", only, false, 0, true, 1, {ext::reth}},
    {0x0D, "RDMA_READ_RESPONSE_FIRST", first, true, 0, false, 1, {ext::aeth}},
    {0x0E, "RDMA_READ_RESPONSE_MIDDLE", middle, true, 0, false, 0, {}},
    {0x0F, "RDMA_READ_RESPONSE_LAST", last, true, 0, false, 1, {ext::aeth}},
    {0x10, "RDMA_READ_RESPONSE_ONLY", only, true, 0, false, 1, {ext::aeth}},
    {0x11, "ACKNOWLEDGE", only, false, 0, false, 1, {ext::aeth}},
    {0x12, "ATOMIC_ACKNOWLEDGE", only, false, 0, false, 2, {ext::aeth, ext::atomicacketh}},
    {0x13, "COMPARE_SWAP", only, false, 0, true, 1, {ext::atomiceth}},
    {0x14, "FETCH_ADD", only, false, 0, true, 1, {ext::atomiceth}},
    {0x15, "RESYNC", only, false, 0, true, 0, {}},
    {0x16, "SEND_LAST_WITH_INVALIDATE", last, true, 0, true, 1, {ext::ieth}},
    {0x17, "SEND_ONLY_WITH_INVALIDATE", only, true, 0, true, 1, {ext::ieth}},
    {0x1C, "FLUSH", only, false, 0, true, 2, {ext::feth, ext::reth}},
    {0x1D, "ATOMIC_WRITE", only, true, 8, true, 1, {ext::reth}},
};

constexpr bool uses(transport t, const op_def& o) {
  switch (t) {
    case transport::rc: return o.op != 0x15;
    case transport::uc: return o.op <= 0x0B;
    case transport::rd: return o.op <= 0x15 || o.op == 0x1C;
    case transport::ud: return o.op == 0x04 || o.op == 0x05;
    case transport::dc: return o.op <= 0x14 || o.op == 0x1C;  // RD's operations; 0x55 is connect
    case transport::cnp: return false;
  }
  return false;
}

constexpr opcode_info make(std::uint8_t code, std::string_view op_name, transport t, position pos, bool payload,
                           std::uint8_t fixed, bool request, std::span<const ext> chain) {
  opcode_info i{code, op_name, t, pos, payload, fixed, request};
  std::uint8_t off = bth_size;
  for (ext e : chain) {
    i.chain[i.chain_len] = e;
    i.offset[i.chain_len++] = off;
    off = static_cast<std::uint8_t>(off + size_of(e));
    i.validating_headers = i.validating_headers || e == ext::dcceth || e == ext::cnp_pad;
  }
  i.header_len = off;
  return i;
}

constexpr std::size_t table_size = [] {
  std::size_t n = 2;  // DC connect, CNP
  for (transport t : {transport::rc, transport::uc, transport::rd, transport::ud, transport::dc})
    for (const op_def& o : ops) n += uses(t, o);
  return n;
}();

constexpr std::array<opcode_info, table_size> make_table() {
  std::array<opcode_info, table_size> out{};
  std::size_t n = 0;
  constexpr std::uint8_t base[] = {0x00, 0x20, 0x40, 0x60, 0x40};
  const transport ts[] = {transport::rc, transport::uc, transport::rd, transport::ud, transport::dc};
  for (std::size_t k = 0; k < 5; ++k) {
    const transport t = ts[k];
    for (const op_def& o : ops) {
      if (!uses(t, o)) continue;
      std::array<ext, max_chain> chain{};
      std::size_t len = 0;
      if (t == transport::dc) chain[len++] = ext::dceth;
      if (t == transport::rd || t == transport::dc) {
        chain[len++] = ext::rdeth;
        if (o.request) chain[len++] = ext::deth;
      }
      if (t == transport::ud) chain[len++] = ext::deth;
      for (std::size_t j = 0; j < o.n; ++j) chain[len++] = o.chain[j];
      out[n++] = make(static_cast<std::uint8_t>(base[k] | o.op), o.name, t, o.pos, o.payload, o.fixed_payload,
                      o.request, std::span<const ext>(chain.data(), len));
    }
  }
  constexpr ext connect[] = {ext::dceth, ext::dcceth};
  out[n++] = make(0x55, "CONNECT", transport::dc, position::only, false, 0, true, connect);
  constexpr ext cnp[] = {ext::cnp_pad};
  out[n++] = make(0x81, "CNP", transport::cnp, position::only, false, 0, true, cnp);
  return out;
}

}  // namespace detail

/// Every opcode the library knows: RC, UC, RD, UD, DC, CNP.
inline constexpr auto opcodes = detail::make_table();

/// How to read opcodes 0x40-0x5F.
enum class rd_class : std::uint8_t {
  dc,       ///< Dynamically Connected (DCETH after the BTH); the default, as Wireshark 4.0
  ibta_rd,  ///< IBTA Reliable Datagram (RDETH, DETH)
};

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
}  // namespace detail

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

/// Well-known opcodes, by name (the table above is the authority; these are spot checks of it).
namespace op {
inline constexpr std::uint8_t rc_send_only = 0x04, rc_send_only_imm = 0x05, rc_write_only = 0x0A,
                              rc_write_only_imm = 0x0B, rc_read_request = 0x0C, rc_ack = 0x11,
                              uc_send_only = 0x24, ud_send_only = 0x64, dc_connect = 0x55, cnp = 0x81;
}

static_assert(find_opcode(op::rc_write_only_imm)->header_len == 12 + 16 + 4);
static_assert(find_opcode(op::ud_send_only)->header_len == 20);
static_assert(find_opcode(op::dc_connect)->header_len == 12 + 8 + 16);
static_assert(find_opcode(0x4A)->offset_of(ext::reth) == 12 + 8 + 4 + 8);  // DC: BTH DCETH RDETH DETH RETH
static_assert(find_opcode(0x4A, rd_class::ibta_rd)->header_len == 12 + 4 + 8 + 16);
static_assert(!find_opcode(0x18) && !find_opcode(0xE0) && !find_opcode(0x80));

}  // namespace pushwire::ib
