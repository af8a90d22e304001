// Cells of the channel-based network (split-model driver, III and IV.A, Fig. 8): the MAC header, the
// optional VA/MH, ACK and idata fields, the cell CRC and the packet CRC, each described once.
// Cells travel in Ethernet II frames with EtherType 0x88B5 (IEEE local experimental); the
// Ethernet destination and source MACs are the split-model document's destination and source MAC. Layout,
// rules and error order: spec/cells.md.
//
//   Ethernet dst(6) src(6) [802.1Q tag(4)] type 0x88B5(2)
//   header(18)  [VA/MH(12)]  [ACK info(8)]  [idata(4)]  data(length)  [packet CRC(4)]  cell CRC(4)
//
// The cell CRC is CRC-32C over every frame byte before it, from the destination MAC. The packet
// CRC (last cell only) is CRC-32C across all the packet's cells: the concatenation, in cell
// sequence order, of each cell's bytes before its CRC fields (a cell's "packet part"). Both are
// stored big-endian. Frames shorter than 60 bytes are padded with zeros after the cell CRC.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include <pushwire/wire/codec.hpp>
#include <pushwire/wire/crc.hpp>
#include <pushwire/wire/ethernet.hpp>
#include <pushwire/wire/options.hpp>

namespace pushwire::cell {

namespace wire = ::pushwire::wire;
using wire::errc;
using wire::mac_address;
using wire::result;

/// IEEE 802 local experimental EtherType 1.
inline constexpr std::uint16_t ethertype = 0x88B5;
/// The only header version this library speaks; any other is errc::unsupported_version.
inline constexpr std::uint8_t format_version = 1;
/// The cell payload size of the channel-based network's example ("more than 256 bytes" is
/// segmented), the default of every cell parameter here.
inline constexpr std::size_t default_cell_payload = wire::default_cell_payload;
/// Largest cell payload the 16-bit length field can carry.
inline constexpr std::size_t max_cell_payload = 0xFFFF;
/// Most cells in one packet (16-bit cell count).
inline constexpr std::size_t max_cells = 0xFFFF;

enum class cell_type : std::uint8_t {
  send = 0,              ///< Send/Receive data (IV.A.1)
  rdma_write = 1,        ///< RDMA write; VA/MH in the first cell (Fig. 8, message 805 / 825)
  ack = 2,               ///< acknowledges every packet up to and including the header's PSN
  nak = 3,               ///< negative acknowledgement of the header's PSN, with a code
  page_fault_delay = 4,  ///< page-fault flow control: placement of the header's PSN waits on a page fault
  /// An InfiniBand transport packet as the data: BTH, extended headers, payload, pad (no ICRC;
  /// the cell and packet CRCs cover it). What the native types cannot say: multi-packet
  /// messages, READ, atomics, UC, UD, DC (spec/cells.md §2).
  transport = 5,
};
inline constexpr std::array<wire::named_value, 6> cell_type_names{{
    {cell_type::send, "Send"},
    {cell_type::rdma_write, "RDMAWrite"},
    {cell_type::ack, "ACK"},
    {cell_type::nak, "NAK"},
    {cell_type::page_fault_delay, "PageFaultDelay"},
    {cell_type::transport, "Transport"},
}};
constexpr std::span<const wire::named_value> wire_enum_names(cell_type) { return cell_type_names; }
constexpr bool is_known(cell_type t) { return !wire::enum_name(t).empty(); }
/// ACK, NAK and page-fault delay cells: single-cell packets with ACK info and no data.
constexpr bool is_control(cell_type t) {
  return t == cell_type::ack || t == cell_type::nak || t == cell_type::page_fault_delay;
}

/// NAK codes; the values are IBTA's AETH NAK codes (ib::nak_code) 0-3.
enum class nak_code : std::uint8_t {
  psn_sequence_error = 0,
  invalid_request = 1,
  remote_access_error = 2,
  remote_operational_error = 3,
};
inline constexpr std::array<wire::named_value, 4> nak_code_names{{
    {nak_code::psn_sequence_error, "PSNSequenceError"},
    {nak_code::invalid_request, "InvalidRequest"},
    {nak_code::remote_access_error, "RemoteAccessError"},
    {nak_code::remote_operational_error, "RemoteOperationalError"},
}};
constexpr std::span<const wire::named_value> wire_enum_names(nak_code) { return nak_code_names; }

/// The cell's MAC header after the EtherType (the split-model document's fields, plus type, flags and count).
struct header {
  static constexpr std::string_view wireshark = "pushwire.cell";
  PUSHWIRE_STRUCT(header,
      /// header version, 1
      (wire::constant<wire::bits<0, 7, 4>, format_version, errc::unsupported_version>, version),
      (wire::bits<0, 3, 0, cell_type>, type),
      /// first cell of its packet (cell sequence number 0)
      (wire::flag<1, 7>, first),
      /// last cell of its packet; it carries the packet CRC
      (wire::flag<1, 6>, last),
      /// a 4-byte idata follows the extension fields (last cell of a Send or RDMA write only)
      (wire::flag<1, 5>, has_idata),
      /// the destination must acknowledge the packet
      (wire::flag<1, 4>, ack_req),
      /// VA/MH follows the header (first cell of an RDMA write only)
      (wire::flag<1, 3>, has_vamh),
      /// a Transport packet a responder sends (READ response, ACK, atomic ACK): with the source
      /// WQP and PSN it names the packet, so that a QP's requests and its responses, whose PSNs
      /// belong to different streams, never join (spec/cells.md §5)
      (wire::flag<1, 2>, response),
      (wire::reserved<wire::bits<1, 1, 0>>, resv_flags),
      /// destination work queue pair number, 24 bits
      (wire::u24, dst_wqp),
      /// source work queue pair number, 24 bits
      (wire::u24, src_wqp),
      (wire::reserved<std::uint8_t>, resv8),
      /// packet sequence number, 24 bits, serial arithmetic (as IBTA PSNs)
      (wire::u24, psn),
      /// cell sequence number within the packet, 0 .. cell_count - 1
      (std::uint16_t, csn),
      /// cells in the packet, >= 1
      (std::uint16_t, cell_count),
      /// data bytes in this cell (the split-model document's cell payload length)
      (std::uint16_t, length));
};

/// Fig. 8's VA/MH: where an RDMA write places its data.
struct vamh {
  static constexpr std::string_view wireshark = "pushwire.cell";
  PUSHWIRE_STRUCT(vamh,
      /// destination virtual address of the packet's first data byte
      (std::uint64_t, va),
      /// memory handle authorising the write
      (std::uint32_t, mh));
};

/// What an ACK, NAK or page-fault delay cell says about the header's PSN.
struct ack_info {
  static constexpr std::string_view wireshark = "pushwire.cell";
  PUSHWIRE_STRUCT(ack_info,
      /// NAK: nak_code; ACK and page-fault delay: 0
      (std::uint8_t, code),
      (wire::reserved<wire::u24>, resv),
      /// page-fault delay: expected delay in microseconds; ACK and NAK: 0
      (std::uint32_t, delay_us));
};

inline constexpr std::size_t header_size = wire::fixed_size<header>;
inline constexpr std::size_t vamh_size = wire::fixed_size<vamh>;
inline constexpr std::size_t ack_info_size = wire::fixed_size<ack_info>;
inline constexpr std::size_t idata_size = 4;
inline constexpr std::size_t crc_size = 4;
static_assert(header_size == 18 && vamh_size == 12 && ack_info_size == 8);

/// Where a cell's parts sit, from its header (offsets from the start of the frame).
struct cell_layout {
  std::size_t header = 0;      ///< 14, or 18 after an 802.1Q tag
  std::size_t vamh = 0;        ///< 0 when absent
  std::size_t ack = 0;         ///< 0 when absent
  std::size_t idata = 0;       ///< 0 when absent
  std::size_t data = 0;
  std::size_t packet_crc = 0;  ///< 0 when absent
  std::size_t cell_crc = 0;
  /// Bytes up to the end of the cell CRC (the frame may add padding up to 60).
  constexpr std::size_t end() const { return cell_crc + crc_size; }
  /// Bytes of the cell the packet CRC covers: all before its packet CRC (or cell CRC).
  constexpr std::size_t packet_part() const { return packet_crc ? packet_crc : cell_crc; }
};

constexpr cell_layout layout_of(std::size_t header_offset, const header& h) {
  cell_layout l{};
  l.header = header_offset;
  std::size_t at = header_offset + header_size;
  if (h.has_vamh) l.vamh = at, at += vamh_size;
  if (is_control(h.type)) l.ack = at, at += ack_info_size;
  if (h.has_idata) l.idata = at, at += idata_size;
  l.data = at;
  at += h.length;
  if (h.last) l.packet_crc = at, at += crc_size;
  l.cell_crc = at;
  return l;
}

/// Frame bytes of a cell whose layout is l, with the Ethernet padding.
constexpr std::size_t padded_size(const cell_layout& l) {
  return l.end() < wire::eth_min_frame ? wire::eth_min_frame : l.end();
}

/// The cell-level rules of spec/cells.md §3 that a header must obey (offsets relative to the
/// header): type known, count and sequence consistent, the flags allowed for the type, the length
/// within max_payload.
constexpr wire::error check_header(const header& h, std::size_t max_payload) {
  using wire::field_error;
  if (!is_known(h.type)) return field_error<header>(errc::invalid_field, "type");
  if (h.cell_count == 0) return field_error<header>(errc::zero_count, "cell_count");
  if (h.csn >= h.cell_count) return field_error<header>(errc::invalid_field, "csn");
  if (h.first != (h.csn == 0)) return field_error<header>(errc::invalid_field, "first");
  if (h.last != (h.csn + 1 == h.cell_count)) return field_error<header>(errc::invalid_field, "last");
  if (h.length > max_payload) return field_error<header>(errc::too_large, "length");
  if (h.has_idata && (!h.last || is_control(h.type))) return field_error<header>(errc::invalid_field, "has_idata");
  if (h.response && h.type != cell_type::transport) return field_error<header>(errc::invalid_field, "response");
  if (h.type == cell_type::rdma_write) {
    if (h.first && !h.has_vamh) return field_error<header>(errc::vamh_missing, "has_vamh");
    if (!h.first && h.has_vamh) return field_error<header>(errc::vamh_unexpected, "has_vamh");
  } else if (h.has_vamh) {
    return field_error<header>(errc::vamh_unexpected, "has_vamh");
  }
  if (is_control(h.type)) {
    if (h.cell_count != 1) return field_error<header>(errc::invalid_field, "cell_count");
    if (h.length != 0) return field_error<header>(errc::invalid_field, "length");
  }
  return {};
}

/// The rules for the ACK info of a control cell of type t (offsets relative to the info).
constexpr wire::error check_ack(cell_type t, const ack_info& a) {
  using wire::field_error;
  if (t == cell_type::nak ? a.code > static_cast<std::uint8_t>(nak_code::remote_operational_error) : a.code != 0)
    return field_error<ack_info>(errc::invalid_field, "code");
  if (t != cell_type::page_fault_delay && a.delay_us != 0) return field_error<ack_info>(errc::invalid_field, "delay_us");
  return {};
}

/// How a cell is decoded: the one options type of every codec, of which cells read
/// max_cell_payload (the largest data length accepted: the receiver's cell payload size; more is
/// errc::too_large) and crc (the cell CRC: skip, report, or require: a bad one is
/// errc::cell_crc_mismatch).
using wire::codec_options;

/// One decoded cell. Spans view the frame, which must outlive the view.
struct cell_view {
  std::span<const std::byte> frame{};
  cell_layout at{};
  bool has_vlan = false;
  cell::header hdr{};
  std::optional<cell::vamh> rdma{};
  std::optional<ack_info> ack{};
  std::optional<std::uint32_t> idata{};
  std::span<const std::byte> data{};
  std::optional<std::uint32_t> packet_crc{};
  std::uint32_t crc = 0;  ///< the cell CRC as written
  /// The cell CRC computed over the frame when it was checked (crc_state good or bad), else 0.
  std::uint32_t crc_computed = 0;
  wire::crc_status crc_state = wire::crc_status::unchecked;
  /// When the CRC was checked: CRC-32C of the cell's packet part (at.packet_part() bytes), which
  /// extends a packet CRC without another pass (extend_packet_crc).
  std::uint32_t packet_part_crc = 0;

  constexpr wire::eth_header eth() const { return wire::decode_prefix<wire::eth_header>(frame).value(); }
  constexpr mac_address src() const { return wire::read<wire::eth_header, "src">(frame.data()); }
  constexpr mac_address dst() const { return wire::read<wire::eth_header, "dst">(frame.data()); }
  constexpr std::optional<wire::vlan_tag> vlan() const {
    if (!has_vlan) return std::nullopt;
    return wire::decode_prefix<wire::vlan_tag>(frame.subspan(wire::eth_header_size)).value();
  }
};

/// The packet CRC after one more cell, from the CRC so far and the cell's packet part CRC and
/// size (CRC linearity: one multiplication, no second pass).
constexpr std::uint32_t extend_packet_crc(std::uint32_t packet_crc, std::uint32_t part_crc, std::size_t part_size) {
  return wire::crc::crc32c_combine(packet_crc, part_crc, part_size);
}

namespace detail {
// The CRC-32C of a cell's packet part, and its cell CRC (one pass; a last cell adds 4 bytes).
struct cell_crcs {
  std::uint32_t part = 0, cell = 0;
};
constexpr cell_crcs crcs_of(std::span<const std::byte> frame, const cell_layout& l) {
  cell_crcs c{};
  c.part = wire::crc::crc32c(frame.first(l.packet_part()));
  c.cell = l.packet_crc ? wire::crc::crc32c(frame.subspan(l.packet_crc, crc_size), c.part) : c.part;
  return c;
}
}  // namespace detail

/// Validates one Ethernet frame as a cell into v, a view over it with every field decoded (a
/// cell_view is both the view and the value, so decode_into() is the same). Errors, in this
/// order, each at its byte and field: truncated (Ethernet, tag, header), not_cell,
/// unsupported_version, reserved_nonzero, invalid_field (type), length_mismatch (the frame's size
/// is not what the header implies), cell_crc_mismatch (crc_check::require), then check_header's
/// and check_ack's. On error v is unspecified.
constexpr wire::error inspect(std::span<const std::byte> frame, cell_view& v, const codec_options& opt = {}) {
  using wire::error;
  const auto l2 = wire::locate_payload(frame);
  if (!l2) return l2.error();
  if (l2->type != ethertype) return error{errc::not_cell, l2->offset - 2, "eth.type"};
  const std::size_t h0 = l2->offset;
  v.frame = frame;
  v.has_vlan = l2->has_vlan;
  v.crc_state = wire::crc_status::unchecked;
  v.crc_computed = 0;
  if (frame.size() - h0 < header_size) return error{errc::truncated, frame.size(), "header"};
  if (auto e = wire::decode_prefix_into(frame.subspan(h0), v.hdr); e.code != errc{}) return wire::detail::at(e, h0, {});
  if (!is_known(v.hdr.type)) return error{errc::invalid_field, h0, "type"};
  v.at = layout_of(h0, v.hdr);
  const std::size_t end = v.at.end();
  if (frame.size() != end && !(end < wire::eth_min_frame && frame.size() == wire::eth_min_frame))
    return error{errc::length_mismatch, h0 + wire::offset_of<header>("length"), "length"};
  v.crc = wire::load_be32(frame.data() + v.at.cell_crc);
  if (opt.crc != wire::crc_check::skip) {
    const auto c = detail::crcs_of(frame, v.at);
    v.packet_part_crc = c.part;
    v.crc_computed = c.cell;
    const bool good = c.cell == v.crc;
    v.crc_state = good ? wire::crc_status::good : wire::crc_status::bad;
    if (!good && opt.crc == wire::crc_check::require) return error{errc::cell_crc_mismatch, v.at.cell_crc, "crc"};
  }
  if (auto e = check_header(v.hdr, opt.max_cell_payload); e.code != errc{}) return wire::detail::at(e, h0, {});
  v.rdma.reset();
  v.ack.reset();
  v.idata.reset();
  v.packet_crc.reset();
  if (v.at.vamh) v.rdma = wire::decode_prefix<cell::vamh>(frame.subspan(v.at.vamh)).value();
  if (v.at.ack) {
    ack_info a{};
    if (auto e = wire::decode_prefix_into(frame.subspan(v.at.ack), a); e.code != errc{})
      return wire::detail::at(e, v.at.ack, {});
    if (auto e = check_ack(v.hdr.type, a); e.code != errc{}) return wire::detail::at(e, v.at.ack, {});
    v.ack = a;
  }
  if (v.at.idata) v.idata = wire::load_be32(frame.data() + v.at.idata);
  v.data = frame.subspan(v.at.data, v.hdr.length);
  if (v.at.packet_crc) v.packet_crc = wire::load_be32(frame.data() + v.at.packet_crc);
  return {};
}

constexpr wire::error decode_into(std::span<const std::byte> frame, cell_view& v, const codec_options& opt = {}) {
  return inspect(frame, v, opt);
}

/// inspect(), returning the view.
constexpr result<cell_view> decode(std::span<const std::byte> frame, const codec_options& opt = {}) {
  cell_view v{};
  if (auto e = inspect(frame, v, opt); e.code != errc{}) return e;
  return v;
}

/// One cell to encode. encode() derives has_vamh, has_idata and length from the optionals and
/// the data; the other header fields are the caller's.
struct cell_spec {
  mac_address dst{}, src{};
  std::optional<wire::vlan_tag> vlan{};
  cell::header hdr{};
  std::optional<cell::vamh> rdma{};
  std::optional<ack_info> ack{};  ///< required exactly for control types
  std::optional<std::uint32_t> idata{};
  std::span<const std::byte> data{};
  /// Last cell: the packet CRC over the earlier cells (0 for a one-cell packet), which encode
  /// extends with this cell's packet part.
  std::uint32_t prior_packet_crc = 0;
};

namespace detail {
constexpr header effective_header(const cell_spec& s) {
  header h = s.hdr;
  h.has_vamh = s.rdma.has_value();
  h.has_idata = s.idata.has_value();
  h.length = static_cast<std::uint16_t>(s.data.size());
  return h;
}
}  // namespace detail

/// Frame bytes encode(s) writes (at least 60: Ethernet padding).
constexpr std::size_t frame_size(const cell_spec& s) {
  return padded_size(layout_of(s.vlan ? wire::eth_header_size + wire::vlan_tag_size : wire::eth_header_size,
                               detail::effective_header(s)));
}

/// Writes the Ethernet header (and tag) for a cell from src to dst; returns the header offset.
constexpr std::size_t write_l2(std::span<std::byte> out, const mac_address& dst, const mac_address& src,
                               const std::optional<wire::vlan_tag>& vlan) {
  (void)wire::encode(wire::eth_header{.dst = dst, .src = src, .type = vlan ? wire::ethertype_vlan : ethertype}, out);
  if (!vlan) return wire::eth_header_size;
  auto t = *vlan;
  t.etype = ethertype;
  (void)wire::encode(t, out.subspan(wire::eth_header_size));
  return wire::eth_header_size + wire::vlan_tag_size;
}

/// Computes and stores the cell CRC of a frame whose layout is l, and zeroes its padding.
constexpr void seal(std::span<std::byte> frame, const cell_layout& l) {
  wire::store_be32(frame.data() + l.cell_crc, wire::crc::crc32c(frame.first(l.cell_crc)));
  for (std::size_t i = l.end(); i < frame.size(); ++i) frame[i] = std::byte{0};
}

/// Encodes one cell into the front of out; returns the frame size. Errors: no_space, too_large
/// (more than max_cell_payload data bytes), the header rules (check_header with no payload
/// limit, check_ack), invalid_field when ack is given where it must not be or missing where it
/// must be, and a value wider than its field.
constexpr result<std::size_t> encode(const cell_spec& s, std::span<std::byte> out) {
  using wire::error;
  if (s.data.size() > max_cell_payload) return error{errc::too_large, 0, "length"};
  const header h = detail::effective_header(s);
  if (auto e = check_header(h, max_cell_payload); e.code != errc{}) return e;
  if (s.ack.has_value() != is_control(h.type)) return error{errc::invalid_field, 0, "ack"};
  if (s.ack)
    if (auto e = check_ack(h.type, *s.ack); e.code != errc{}) return e;
  const std::size_t n = frame_size(s);
  if (out.size() < n) return error{errc::no_space, out.size(), {}};
  const auto frame = out.first(n);
  const cell_layout l = layout_of(write_l2(frame, s.dst, s.src, s.vlan), h);
  if (auto e = wire::encode(h, frame.subspan(l.header)); !e) return e.error();
  if (s.rdma)
    if (auto e = wire::encode(*s.rdma, frame.subspan(l.vamh)); !e) return e.error();
  if (s.ack) (void)wire::encode(*s.ack, frame.subspan(l.ack));
  if (s.idata) wire::store_be32(frame.data() + l.idata, *s.idata);
  for (std::size_t i = 0; i < s.data.size(); ++i) frame[l.data + i] = s.data[i];
  if (h.last)
    wire::store_be32(frame.data() + l.packet_crc,
                     extend_packet_crc(s.prior_packet_crc, wire::crc::crc32c(frame.first(l.packet_part())), l.packet_part()));
  seal(frame, l);
  return n;
}

}  // namespace pushwire::cell
