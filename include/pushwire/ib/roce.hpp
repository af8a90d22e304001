// RoCEv2 frames (spec/roce.md): the three shapes of a RoCE packet and the verbs over them.
//   roce_view    inspect(): a validated frame whose headers decode on access; it records where
//                every part sits and the ICRC it computed (the fast receive path, the dissector).
//   roce_packet  decode() / decode_into(): every header decoded into values; also what build()
//                writes, so build(decode(f)) is f byte for byte (the tools, tests, generators).
//   flow::packet flow/frame.hpp: the transport's view, without addresses (the machines).
//
// ICRC = CRC-32 over  8 bytes of 0xFF || IP header' || UDP header' || BTH' || the rest up to the
// ICRC, where ' marks masked copies (all-ones): IPv4 TOS, TTL, header checksum; IPv6 traffic
// class, flow label, hop limit; UDP checksum; BTH byte 4 (FECN, BECN, resv6a). It is written least
// significant byte first. Only the masked headers are copied (to the stack); they and the payload
// are hashed as one fold chain.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>
#include <cstdint>
#include <optional>
#include <span>
#include <tuple>
#include <variant>

#include <pushwire/ib/encap.hpp>
#include <pushwire/ib/gid.hpp>
#include <pushwire/ib/headers.hpp>
#include <pushwire/ib/opcode.hpp>
#include <pushwire/wire/crc.hpp>
#include <pushwire/wire/endian.hpp>
#include <pushwire/wire/options.hpp>

namespace pushwire::ib {

using wire::errc;
using wire::result;

using wire::codec_options;
using wire::crc_check;
using wire::crc_status;

namespace detail {
template <class Tuple>
struct optionals;
template <class... H>
struct optionals<std::tuple<H...>> {
  using type = std::tuple<std::optional<H>...>;
};
}  // namespace detail

/// The extended headers present in a packet, one optional per ext (in ext order).
struct ext_headers {
  detail::optionals<ext_types>::type all{};

  template <ext E>
  constexpr std::optional<ext_type<E>>& get() {
    return std::get<static_cast<std::size_t>(E)>(all);
  }
  template <ext E>
  constexpr const std::optional<ext_type<E>>& get() const {
    return std::get<static_cast<std::size_t>(E)>(all);
  }
  template <ext E>
  constexpr ext_headers& set(const ext_type<E>& h) {
    get<E>() = h;
    return *this;
  }
  /// No header present.
  constexpr void clear() {
    std::apply([](auto&... h) { (h.reset(), ...); }, all);
  }
};

namespace detail {

inline constexpr std::size_t max_ip_header = 60;
inline constexpr std::size_t icrc_size = 4;

template <class H>
constexpr H header_at(std::span<const std::byte> frame, std::size_t off) {
  H h{};
  (void)wire::decode_prefix_into(frame.subspan(off), h);  // inspect() checked the size
  return h;
}


inline constexpr std::size_t icrc_head_max = 8 + max_ip_header + 8 + 12 + 15;

// The bytes the ICRC sets to one, for a pseudo-header of 8 x 0xFF, an IP header of ip_len bytes,
// UDP and BTH: one table per IP header form (IPv4 with IHL 5..15, IPv6).
constexpr std::array<std::byte, icrc_head_max> icrc_mask(bool ipv6, std::size_t ip_len) {
  constexpr std::byte ff{0xFF};
  std::array<std::byte, icrc_head_max> m{};
  for (std::size_t i = 0; i < 8; ++i) m[i] = ff;
  std::byte* iph = m.data() + 8;
  if (ipv6) {
    iph[0] = std::byte{0x0F};  // traffic class (low nibble of byte 0) and flow label
    iph[1] = iph[2] = iph[3] = ff;
    iph[7] = ff;  // hop limit
  } else {
    iph[1] = ff;             // TOS
    iph[8] = ff;             // TTL
    iph[10] = iph[11] = ff;  // header checksum
  }
  std::byte* udp = iph + ip_len;
  udp[6] = udp[7] = ff;  // UDP checksum
  udp[8 + 4] = ff;       // BTH byte 4: FECN, BECN, resv6a
  return m;
}
inline constexpr auto icrc_masks = [] {
  std::array<std::array<std::byte, icrc_head_max>, 12> t{};
  for (std::size_t ihl = 5; ihl <= 15; ++ihl) t[ihl - 5] = icrc_mask(false, 4 * ihl);
  t[11] = icrc_mask(true, 40);
  return t;
}();

}  // namespace detail

/// The ICRC of a RoCEv2 packet. `ip` runs from the first byte of the IP header to the first byte
/// of the ICRC; ip_header_len is the IP header's length including IPv4 options. The masked
/// headers (and up to 15 following bytes, so that they fill whole 16-byte lanes) are built on the
/// stack with whole-vector stores (a byte store followed by a wide load would stall); the rest is
/// hashed in place in the same fold chain (crc32_concat).
constexpr std::uint32_t compute_icrc(std::span<const std::byte> ip, bool ipv6, std::size_t ip_header_len) {
  const std::size_t masked = 8 + ip_header_len + 20;
  const std::size_t borrow = std::min((16 - masked % 16) % 16, ip.size() - ip_header_len - 20);
  const std::size_t n = masked + borrow;
  const auto& mask = detail::icrc_masks[ipv6 ? 11 : ip_header_len / 4 - 5];
  alignas(16) std::array<std::byte, detail::icrc_head_max> h;
  if (!std::is_constant_evaluated() && n % 16 == 0) {
    // Lane by lane in registers, one 16-byte store each. Lane j holds pseudo-header bytes
    // [j, j+16), i.e. ip[j-8, j+8); the first lane's low half is all mask.
    using v16 = unsigned char __attribute__((vector_size(16)));
    for (std::size_t j = 0; j < n; j += 16) {
      v16 src{}, m;
      if (j == 0) std::memcpy(reinterpret_cast<unsigned char*>(&src) + 8, ip.data(), 8);
      else std::memcpy(&src, ip.data() + j - 8, 16);
      std::memcpy(&m, mask.data() + j, 16);
      src |= m;
      std::memcpy(h.data() + j, &src, 16);
    }
  } else {
    for (std::size_t i = 0; i < 8; ++i) h[i] = mask[i];
    for (std::size_t i = 8; i < n; ++i) h[i] = ip[i - 8] | mask[i];
  }
  const std::span<const std::byte> head(h.data(), n), rest = ip.subspan(n - 8);
  if (std::is_constant_evaluated()) return wire::crc::crc32(rest, wire::crc::crc32(head));
  return wire::crc::crc32_concat(head, rest);
}

/// The ICRC's running CRC (zlib convention) over a packet's headers alone: `headers` runs from
/// the first byte of the IP header to the first byte of the payload. Continue it over the
/// payload and pad (wire::crc::crc32, or crc32_copy while gathering the payload into the frame)
/// and the result is the ICRC: crc32(payload || pad, icrc_headers(...)) == compute_icrc(...).
/// (compute_icrc over the headers alone: its result continues as any zlib-convention CRC does.)
/// `headers` holds at least the IP, UDP and BTH headers.
constexpr std::uint32_t icrc_headers(std::span<const std::byte> headers, bool ipv6, std::size_t ip_header_len) {
  return compute_icrc(headers, ipv6, ip_header_len);
}

/// The ICRC as Wireshark's "Invariant CRC" line shows it, and as pushwire prints and reads it
/// (infiniband.invariant.crc): its four wire bytes read big-endian. The CRC value is written least
/// significant byte first, so this is the value byte-swapped (the bytes 08 c6 15 4a show as
/// 0x08c6154a). The same function turns the shown number back into the CRC value.
constexpr std::uint32_t icrc_shown(std::uint32_t crc) {
  return (crc >> 24) | ((crc >> 8) & 0xFF00u) | ((crc << 8) & 0xFF0000u) | (crc << 24);
}

namespace detail {
/// What parse_chain() found: the opcode's entry, the payload and the pad.
struct chain {
  const opcode_info* op = nullptr;
  std::span<const std::byte> payload{}, pad{};
};
/// The BTH, its extended headers, payload and pad of `ibp`, whose last `tail` bytes are not the
/// packet's (RoCEv2: the 4-byte ICRC; a cell's transport packet: none). Errors at `base` +
/// their offset in ibp: truncated (bth), unsupported_version, reserved_opcode, chain_overrun,
/// reserved_nonzero (DCCETH, CNP), pad_overrun, trailing_bytes, length_mismatch.
constexpr wire::error parse_chain(std::span<const std::byte> ibp, std::size_t tail, std::size_t base, rd_class rd, chain& c) {
  using wire::error;
  using wire::read;
  if (ibp.size() < bth_size + tail) return error{errc::truncated, base + ibp.size(), "bth"};
  const std::byte* b = ibp.data();
  if (read<ib::bth, "tver">(b) != 0) return error{errc::unsupported_version, base + 1, "bth.tver"};
  const int oi = opcode_index(read<ib::bth, "opcode">(b), rd);
  if (oi < 0) return error{errc::reserved_opcode, base, "bth.opcode"};
  c.op = &opcodes[static_cast<std::size_t>(oi)];
  if (ibp.size() < c.op->header_len + tail)
    return error{errc::chain_overrun, base + ibp.size(), name(c.op->chain[c.op->chain_len ? c.op->chain_len - 1 : 0])};
  // Only two extended headers have fields that can be invalid (reserved bytes).
  if (c.op->validating_headers) {
    auto check = [&]<class H>(ext e, H h) -> error {
      const int off = c.op->offset_of(e);
      if (off < 0) return {};
      error r = wire::decode_prefix_into(ibp.subspan(static_cast<std::size_t>(off)), h);
      if (r.code != errc{}) r.offset += base + static_cast<std::size_t>(off);
      return r;
    };
    if (auto e = check(ext::dcceth, dcceth{}); e.code != errc{}) return e;
    if (auto e = check(ext::cnp_pad, cnp_pad{}); e.code != errc{}) return e;
  }
  // Payload and pad.
  const std::size_t body = ibp.size() - c.op->header_len - tail;
  const std::size_t padcnt = read<ib::bth, "padcnt">(b);
  if (padcnt > body) return error{errc::pad_overrun, base + 1, "bth.padcnt"};
  if (!c.op->payload && body != 0) return error{errc::trailing_bytes, base + c.op->header_len, "payload"};
  if (c.op->fixed_payload && body - padcnt != c.op->fixed_payload)
    return error{errc::length_mismatch, base + c.op->header_len, "payload"};
  c.payload = ibp.subspan(c.op->header_len, body - padcnt);
  c.pad = ibp.subspan(c.op->header_len + body - padcnt, padcnt);
  return {};
}
}  // namespace detail

/// An InfiniBand transport packet on its own (BTH, extended headers, payload, pad; no ICRC), as
/// a cell of type Transport carries it. Headers decode on access; spans view the bytes.
struct transport_view {
  std::span<const std::byte> bytes{};
  const opcode_info* op = nullptr;
  std::span<const std::byte> payload{}, pad{};
  constexpr ib::bth bth() const { return wire::decode_prefix<ib::bth>(bytes).value(); }
  template <ext E>
  constexpr std::optional<ext_type<E>> get() const {
    const int off = op->offset_of(E);
    if (off < 0) return std::nullopt;
    return wire::decode_prefix<ext_type<E>>(bytes.subspan(static_cast<std::size_t>(off))).value();
  }
};
/// Validates `bytes` as one transport packet (the chain rules of inspect(), offsets from 0).
constexpr wire::error inspect_transport(std::span<const std::byte> bytes, transport_view& t, const codec_options& opt = {}) {
  detail::chain c{};
  if (auto e = detail::parse_chain(bytes, 0, 0, opt.rd, c); e.code != errc{}) return e;
  t = {bytes, c.op, c.payload, c.pad};
  return {};
}

/// A validated RoCEv2 frame whose headers decode on access: inspect() reads only the fields it
/// must check (a dozen), computes the ICRC, and records where everything is. Spans and the
/// accessors read the frame, which must outlive the view.
struct roce_view {
  std::span<const std::byte> frame{};
  bool has_vlan = false, v6 = false;
  std::size_t ip_offset = 0, ip_header_len = 0, udp_offset = 0, bth_offset = 0;
  std::size_t icrc_offset = 0;  ///< the ICRC's first byte
  std::size_t ip_end = 0;       ///< one past the IP packet; the frame's bytes after it are its trailer
  const opcode_info* op = nullptr;
  std::span<const std::byte> payload{};  ///< without the pad
  std::span<const std::byte> pad{};
  std::uint32_t icrc = 0;           ///< the CRC value as written (icrc_shown() for display)
  std::uint32_t icrc_computed = 0;  ///< the CRC value the frame should carry (0 when not checked)
  crc_status icrc_state = crc_status::unchecked;

  constexpr eth_header eth() const { return detail::header_at<eth_header>(frame, 0); }
  constexpr std::optional<vlan_tag> vlan() const {
    return has_vlan ? std::optional{detail::header_at<vlan_tag>(frame, wire::eth_header_size)} : std::nullopt;
  }
  /// Precondition: !v6.
  constexpr ipv4_header ipv4() const { return detail::header_at<ipv4_header>(frame, ip_offset); }
  /// Precondition: v6.
  constexpr ipv6_header ipv6() const { return detail::header_at<ipv6_header>(frame, ip_offset); }
  /// IPv4 options (IHL > 5); empty for IPv6.
  constexpr std::span<const std::byte> ip_options() const {
    return v6 ? std::span<const std::byte>{} : frame.subspan(ip_offset + 20, ip_header_len - 20);
  }
  /// The IPv4 header checksum verifies (always true for IPv6, which has none).
  constexpr bool ip_checksum_ok() const {
    return v6 || inet_fold(inet_sum(frame.subspan(ip_offset, ip_header_len))) == 0;
  }
  /// The IP source address as a GID (an IPv4 one IPv4-mapped).
  constexpr gid source_gid() const { return address_at(v6 ? 8 : 12); }
  /// The IP destination address as a GID (an IPv4 one IPv4-mapped).
  constexpr gid destination_gid() const { return address_at(v6 ? 24 : 16); }
  constexpr udp_header udp() const { return detail::header_at<udp_header>(frame, udp_offset); }
  constexpr ib::bth bth() const { return detail::header_at<ib::bth>(frame, bth_offset); }
  /// Extended header E, if the opcode's chain has it.
  template <ext E>
  constexpr std::optional<ext_type<E>> get() const {
    const int off = op->offset_of(E);
    if (off < 0) return std::nullopt;
    return detail::header_at<ext_type<E>>(frame, bth_offset + static_cast<std::size_t>(off));
  }
  /// Bytes after the IP packet (Ethernet padding to 60 bytes, or anything a capture kept).
  constexpr std::span<const std::byte> trailer() const { return frame.subspan(ip_end); }
  constexpr bool se() const { return wire::read<ib::bth, "se">(frame.data() + bth_offset); }
  /// DC connect / disconnect: opcode 0x55 with SE clear / set.
  constexpr bool dc_connect() const { return op->id == opcode::dc_connect && !se(); }
  constexpr bool dc_disconnect() const { return op->id == opcode::dc_connect && se(); }
 private:
  constexpr gid address_at(std::size_t at) const {
    const auto u8 = [&](std::size_t k) { return std::to_integer<std::uint8_t>(frame[ip_offset + at + k]); };
    if (!v6) return gid_v4(u8(0), u8(1), u8(2), u8(3));
    gid g{};
    for (std::size_t k = 0; k < g.size(); ++k) g[k] = u8(k);
    return g;
  }
};

/// Computes the ICRC of an inspected frame (one inspected with crc_check::skip, say) into
/// v.icrc_computed and v.icrc_state; true when it is the one the frame carries.
constexpr bool verify_icrc(roce_view& v) {
  v.icrc_computed = compute_icrc(v.frame.subspan(v.ip_offset, v.icrc_offset - v.ip_offset), v.v6, v.ip_header_len);
  v.icrc_state = v.icrc_computed == v.icrc ? crc_status::good : crc_status::bad;
  return v.icrc_state == crc_status::good;
}

/// Validates one Ethernet frame as RoCEv2 into `v` (reads opt.udp_port, opt.rd, opt.crc).
/// Errors, each at the offending byte and header: truncated (any layer), not_roce, bad_ihl,
/// length_mismatch, unsupported_version (BTH TVer), reserved_opcode, chain_overrun, pad_overrun,
/// reserved_nonzero (DCCETH, CNP), trailing_bytes (a payload on an opcode without one),
/// icrc_mismatch (crc_check::require only). Bytes after the IP packet are its trailer, not an
/// error. On error `v` is unspecified. (Order and offsets: spec/roce.md §11.)
constexpr wire::error inspect(std::span<const std::byte> frame, roce_view& v, const codec_options& opt = {}) {
  using wire::error;
  using wire::read;
  const std::byte* f = frame.data();
  v.frame = frame;
  v.icrc_state = crc_status::unchecked;
  v.icrc_computed = 0;
  // Ethernet, optional 802.1Q.
  const auto l2 = wire::locate_payload(frame);
  if (!l2) return l2.error();
  v.has_vlan = l2->has_vlan;
  std::size_t at = l2->offset;
  const std::uint16_t type = l2->type;
  if (type != ethertype_ipv4 && type != ethertype_ipv6) return error{errc::not_roce, at - 2, "eth.type"};
  // IP.
  v.v6 = type == ethertype_ipv6;
  v.ip_offset = at;
  const std::byte* ip = f + at;
  std::size_t ip_payload = 0;
  if (!v.v6) {
    if (frame.size() - at < 20) return error{errc::truncated, frame.size(), "ip"};
    const unsigned ihl = read<ipv4_header, "hdr_len">(ip);
    if (read<ipv4_header, "version">(ip) != 4 || ihl < 5) return error{errc::bad_ihl, at, "ip.hdr_len"};
    v.ip_header_len = 4u * ihl;
    if (frame.size() - at < v.ip_header_len) return error{errc::truncated, frame.size(), "ip"};
    const std::size_t len = read<ipv4_header, "len">(ip);
    if (len < v.ip_header_len) return error{errc::length_mismatch, at + 2, "ip.len"};
    if (frame.size() - at < len) return error{errc::truncated, frame.size(), "ip.len"};
    if (read<ipv4_header, "flags_mf">(ip) || read<ipv4_header, "frag_offset">(ip) != 0)
      return error{errc::not_roce, at + 6, "ip.frag_offset"};
    if (read<ipv4_header, "proto">(ip) != ip_proto_udp) return error{errc::not_roce, at + 9, "ip.proto"};
    ip_payload = len - v.ip_header_len;
  } else {
    if (frame.size() - at < 40) return error{errc::truncated, frame.size(), "ipv6"};
    if (read<ipv6_header, "version">(ip) != 6) return error{errc::bad_ihl, at, "ipv6.version"};
    v.ip_header_len = 40;
    ip_payload = read<ipv6_header, "plen">(ip);
    if (frame.size() - at - 40 < ip_payload) return error{errc::truncated, frame.size(), "ipv6.plen"};
    if (read<ipv6_header, "nxt">(ip) != ip_proto_udp) return error{errc::not_roce, at + 6, "ipv6.nxt"};
  }
  v.ip_end = at + v.ip_header_len + ip_payload;
  at += v.ip_header_len;
  // UDP: its length must be the IP payload's.
  v.udp_offset = at;
  if (ip_payload < 8) return error{errc::truncated, at + ip_payload, "udp"};
  if (read<udp_header, "dstport">(f + at) != opt.udp_port) return error{errc::not_roce, at + 2, "udp.dstport"};
  if (read<udp_header, "length">(f + at) != ip_payload) return error{errc::length_mismatch, at + 4, "udp.length"};
  const std::span<const std::byte> ibp = frame.subspan(at + 8, ip_payload - 8);
  v.bth_offset = at + 8;
  // BTH and its chain; the ICRC is the last 4 bytes of the UDP payload.
  detail::chain c{};
  if (auto e = detail::parse_chain(ibp, detail::icrc_size, v.bth_offset, opt.rd, c); e.code != errc{}) return e;
  v.op = c.op;
  v.payload = c.payload;
  v.pad = c.pad;
  v.icrc_offset = v.bth_offset + ibp.size() - detail::icrc_size;
  v.icrc = wire::load_le32(f + v.icrc_offset);
  if (opt.crc != crc_check::skip && !verify_icrc(v) && opt.crc == crc_check::require)
    return error{errc::icrc_mismatch, v.icrc_offset, "icrc"};
  return {};
}

/// Writes the BTH and the extended headers op names (from h, which must have exactly those) into
/// the front of out: op.header_len bytes. What build() writes after UDP, and a cell of type
/// Transport before its payload. Errors: no_space, a value wider than its field.
constexpr wire::error encode_headers(const ib::bth& b, const ext_headers& h, const opcode_info& op, std::span<std::byte> out) {
  if (out.size() < op.header_len) return {errc::no_space, out.size(), {}};
  if (auto n = wire::encode(b, out); !n) return n.error();
  wire::error e{};
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    ([&] {
      constexpr ext E = static_cast<ext>(I);
      const int off = op.offset_of(E);
      if (off < 0 || e.code != errc{} || !h.get<E>()) return;
      if (auto n = wire::encode(*h.get<E>(), out.subspan(static_cast<std::size_t>(off))); !n) e = n.error();
    }(), ...);
  }(std::make_index_sequence<ext_count>{});
  return e;
}

/// The fields build() computes from the others, unless marked here as given: then it writes
/// them as they are, even when wrong (to build bad frames on purpose). decode() marks all of
/// them, so build(decode(f)) is f byte for byte.
struct as_given {
  bool eth_type = false;      ///< eth.type (else 0x8100 with a tag, else from the IP version)
  bool vlan_etype = false;    ///< vlan->etype (else from the IP version)
  bool ip_version = false;    ///< ip4.version / ip6.version (else 4 / 6)
  bool ip_hdr_len = false;    ///< ip4.hdr_len (else 5 + options / 4)
  bool ip_len = false;        ///< ip4.len / ip6.plen (else from the sizes)
  bool ip_proto = false;      ///< ip4.proto / ip6.nxt (else 17, UDP)
  bool ip_checksum = false;   ///< ip4.checksum (else computed)
  bool udp_length = false;    ///< udp.length (else from the sizes)
  bool udp_checksum = false;  ///< udp.checksum (else 0 over IPv4, computed over IPv6)
  bool tver = false;          ///< bth.tver (else 0)
  bool padcnt = false;        ///< bth.padcnt (else the number of pad bytes written)
  bool pad = false;           ///< the pad is exactly `pad` (else (-payload size) mod 4 zero bytes)
  bool icrc = false;          ///< icrc (else computed)
  static constexpr as_given all() { return {true, true, true, true, true, true, true, true, true, true, true, true, true}; }
  friend constexpr bool operator==(const as_given&, const as_given&) = default;
};

/// A RoCEv2 frame with every header as values: what decode() fills and build() writes. Spans
/// point into the frame decoded (or into the caller's bytes for build()). The defaults build a
/// valid frame: IPv4 with DF and TTL 64, UDP source port 0xC000 to 4791, P_Key 0xFFFF (the
/// default partition); fill the addresses, the BTH, the extended headers the opcode names, and
/// the payload.
struct roce_packet {
  eth_header eth{};
  std::optional<vlan_tag> vlan{};  ///< its etype is computed unless given.vlan_etype
  bool v6 = false;
  ipv4_header ip4{.version = 4, .hdr_len = 5, .flags_df = true, .ttl = 64, .proto = ip_proto_udp};  ///< when !v6
  ipv6_header ip6{.version = 6, .nxt = ip_proto_udp, .hlim = 64};                                   ///< when v6
  std::span<const std::byte> ip_options{};  ///< IPv4 options: a multiple of 4 bytes, at most 40
  udp_header udp{.srcport = 0xC000, .dstport = roce_port};
  ib::bth bth{.p_key = 0xFFFF};
  ext_headers ext{};  ///< exactly the headers the opcode's chain names
  std::span<const std::byte> payload{};  ///< without the pad
  std::span<const std::byte> pad{};
  std::span<const std::byte> trailer{};  ///< bytes after the IP packet (Ethernet padding)
  std::uint32_t icrc = 0;                ///< the CRC value (icrc_shown() for display)
  as_given given{};
  rd_class rd = rd_class::dc;  ///< how build() reads bth.opcode (decode() copies its option)
  // What decode() found; build() does not read these.
  const opcode_info* op = nullptr;
  crc_status icrc_state = crc_status::unchecked;
  bool ip_checksum_ok = true;  ///< IPv4 header checksum (IPv6 has none)
  std::size_t ip_offset = 0, udp_offset = 0, bth_offset = 0;

  constexpr bool is_ipv6() const { return v6; }
  /// DC connect / disconnect: opcode 0x55 with SE clear / set.
  constexpr bool dc_connect() const { return op && op->id == opcode::dc_connect && !bth.se; }
  constexpr bool dc_disconnect() const { return op && op->id == opcode::dc_connect && bth.se; }
};

namespace detail {
template <ext E>
constexpr void decode_ext(const roce_view& v, ext_headers& h) {
  h.get<E>() = v.get<E>();
}
using ext_decoder = void (*)(const roce_view&, ext_headers&);
inline constexpr auto ext_decoders = []<std::size_t... I>(std::index_sequence<I...>) {
  return std::array<ext_decoder, ext_count>{&decode_ext<static_cast<ext>(I)>...};
}(std::make_index_sequence<ext_count>{});
}  // namespace detail

/// Decodes every header of a validated view into `p` (a reusable packet: no zeroing).
constexpr void decode(const roce_view& v, roce_packet& p, rd_class rd = rd_class::dc) {
  p.eth = v.eth();
  p.vlan = v.vlan();
  p.v6 = v.v6;
  if (v.v6) p.ip6 = v.ipv6();
  else p.ip4 = v.ipv4();
  p.ip_options = v.ip_options();
  p.ip_checksum_ok = v.ip_checksum_ok();
  p.udp = v.udp();
  p.bth = v.bth();
  p.op = v.op;
  p.ext.clear();
  for (ext e : v.op->headers()) detail::ext_decoders[static_cast<std::size_t>(e)](v, p.ext);
  p.payload = v.payload;
  p.pad = v.pad;
  p.trailer = v.trailer();
  p.icrc = v.icrc;
  p.icrc_state = v.icrc_state;
  p.given = as_given::all();
  p.rd = rd;
  p.ip_offset = v.ip_offset;
  p.udp_offset = v.udp_offset;
  p.bth_offset = v.bth_offset;
}

/// inspect(), then every header decoded into a caller's (reusable) packet.
constexpr wire::error decode_into(std::span<const std::byte> frame, roce_packet& p, const codec_options& opt = {}) {
  roce_view v;
  if (auto e = inspect(frame, v, opt); e.code != errc{}) return e;
  decode(v, p, opt.rd);
  return {};
}

/// Decodes one Ethernet frame as RoCEv2 (see inspect for the errors).
constexpr result<roce_packet> decode(std::span<const std::byte> frame, const codec_options& opt = {}) {
  roce_packet p{};
  if (auto e = decode_into(frame, p, opt); e.code != errc{}) return e;
  return p;
}

namespace detail {
/// The pad after a payload of n bytes: (-n) mod 4 zero bytes.
constexpr std::size_t pad_for(std::size_t n) { return (4 - n % 4) % 4; }
constexpr std::size_t pad_of(const roce_packet& p) { return p.given.pad ? p.pad.size() : pad_for(p.payload.size()); }
constexpr std::size_t ip_header_of(const roce_packet& p) { return p.v6 ? 40 : 20 + p.ip_options.size(); }
}  // namespace detail

/// Bytes build(p, ...) writes, or the error it would return for the opcode.
constexpr result<std::size_t> frame_size(const roce_packet& p) {
  const int oi = opcode_index(p.bth.opcode, p.rd);
  if (oi < 0) return wire::error{errc::reserved_opcode, 0, "bth.opcode"};
  const opcode_info& op = opcodes[static_cast<std::size_t>(oi)];
  return wire::eth_header_size + (p.vlan ? wire::vlan_tag_size : 0) + detail::ip_header_of(p) + 8 + op.header_len +
         p.payload.size() + detail::pad_of(p) + detail::icrc_size + p.trailer.size();
}

/// Where build(p, ...) puts the payload: the bytes of every header before it (0 for a reserved
/// opcode). A sender may write the payload there first and point p.payload at it: build() then
/// leaves it in place (a gather straight into the frame, no second copy).
constexpr std::size_t payload_offset(const roce_packet& p) {
  const int oi = opcode_index(p.bth.opcode, p.rd);
  if (oi < 0) return 0;
  return wire::eth_header_size + (p.vlan ? wire::vlan_tag_size : 0) + detail::ip_header_of(p) + 8 +
         opcodes[static_cast<std::size_t>(oi)].header_len;
}

namespace detail {
/// invalid_field (the header's name) when h does not hold exactly the extended headers op names.
constexpr wire::error check_chain(const opcode_info& op, const ext_headers& h) {
  wire::error e{};
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    ([&] {
      constexpr ext E = static_cast<ext>(I);
      if (e.code == errc{} && op.has(E) != h.get<E>().has_value()) e = {errc::invalid_field, 0, name(E)};
    }(), ...);
  }(std::make_index_sequence<ext_count>{});
  return e;
}
}  // namespace detail

/// Builds p into `out`: its headers, and what p.given leaves to compute (lengths, checksums,
/// PadCnt and pad, the ICRC), then the trailer. Errors: reserved_opcode; invalid_field for a
/// missing or extra extended header, a payload on an opcode without one, IPv4 options that are
/// not a multiple of 4 bytes or over 40 (or any on IPv6), a pad over 3 bytes, or a value wider
/// than its field; length_mismatch (ATOMIC_WRITE payload not 8 bytes); too_large (over 65535
/// bytes of IP); no_space.
constexpr result<std::size_t> build(const roce_packet& p, std::span<std::byte> out) {
  using wire::error;
  auto total = frame_size(p);
  if (!total) return total;
  const opcode_info& op = *find_opcode(p.bth.opcode, p.rd);
  if (!op.payload && !p.payload.empty()) return error{errc::invalid_field, 0, "payload"};
  if (op.fixed_payload && p.payload.size() != op.fixed_payload) return error{errc::length_mismatch, 0, "payload"};
  if (p.ip_options.size() % 4 || p.ip_options.size() > 40 || (p.v6 && !p.ip_options.empty()))
    return error{errc::invalid_field, 0, "ip.options"};
  if (p.given.pad && p.pad.size() > 3) return error{errc::invalid_field, 0, "pad"};
  if (auto e = detail::check_chain(op, p.ext); e.code != errc{}) return e;
  if (out.size() < *total) return error{errc::no_space, out.size(), {}};

  const as_given& g = p.given;
  const std::size_t pad = detail::pad_of(p);
  const bool v6 = p.v6;
  const std::size_t ip_off = wire::eth_header_size + (p.vlan ? wire::vlan_tag_size : 0), ip_hlen = detail::ip_header_of(p);
  const std::size_t udp_len = 8 + op.header_len + p.payload.size() + pad + detail::icrc_size;
  if (ip_hlen + udp_len > 0xFFFF) return error{errc::too_large, 0, "payload"};
  const std::uint16_t ip_type = v6 ? ethertype_ipv6 : ethertype_ipv4;
  std::byte* const o = out.data();
  std::size_t at = 0;
  auto put = [&](const auto& h) -> error {
    auto n = wire::encode(h, out.subspan(at));
    if (!n) return n.error();
    at += *n;
    return {};
  };
  error e{};
  eth_header eh = p.eth;
  if (!g.eth_type) eh.type = p.vlan ? ethertype_vlan : ip_type;
  e = put(eh);
  if (e.code == errc{} && p.vlan) {
    vlan_tag t = *p.vlan;
    if (!g.vlan_etype) t.etype = ip_type;
    e = put(t);
  }
  if (e.code == errc{} && !v6) {
    ipv4_header h = p.ip4;
    if (!g.ip_version) h.version = 4;
    if (!g.ip_hdr_len) h.hdr_len = static_cast<std::uint8_t>(ip_hlen / 4);
    if (!g.ip_len) h.len = static_cast<std::uint16_t>(ip_hlen + udp_len);
    if (!g.ip_proto) h.proto = ip_proto_udp;
    if (!g.ip_checksum) h.checksum = 0;
    e = put(h);
    if (e.code == errc{}) {
      wire::detail::copy_bytes(o + at, p.ip_options.data(), p.ip_options.size());
      at += p.ip_options.size();
      if (!g.ip_checksum) wire::store_be16(o + ip_off + 10, inet_fold(inet_sum(out.subspan(ip_off, ip_hlen))));
    }
  } else if (e.code == errc{}) {
    ipv6_header h = p.ip6;
    if (!g.ip_version) h.version = 6;
    if (!g.ip_len) h.plen = static_cast<std::uint16_t>(udp_len);
    if (!g.ip_proto) h.nxt = ip_proto_udp;
    e = put(h);
  }
  const std::size_t udp_off = at;
  if (e.code == errc{}) {
    udp_header u = p.udp;
    if (!g.udp_length) u.length = static_cast<std::uint16_t>(udp_len);
    if (!g.udp_checksum) u.checksum = 0;  // IPv6: computed below, after the ICRC it covers
    e = put(u);
  }
  if (e.code == errc{}) {
    ib::bth b = p.bth;
    if (!g.padcnt) b.padcnt = static_cast<std::uint8_t>(pad);
    if (!g.tver) b.tver = 0;
    e = encode_headers(b, p.ext, op, out.subspan(at));
  }
  if (e.code != errc{}) return e;
  at = udp_off + 8 + op.header_len;
  if (p.payload.data() != o + at) wire::detail::copy_bytes(o + at, p.payload.data(), p.payload.size());  // else in place
  at += p.payload.size();
  if (g.pad) wire::detail::copy_bytes(o + at, p.pad.data(), pad);
  else
    for (std::size_t i = 0; i < pad; ++i) o[at + i] = std::byte{0};
  at += pad;
  const std::size_t icrc_at = at;
  wire::store_le32(o + icrc_at, g.icrc ? p.icrc : compute_icrc(out.subspan(ip_off, icrc_at - ip_off), v6, ip_hlen));
  at += detail::icrc_size;
  if (v6 && !g.udp_checksum) {
    // Pseudo-header: both addresses, the UDP length, next header 17; then the datagram.
    std::uint32_t sum = inet_sum(out.subspan(ip_off + 8, 32));
    sum += static_cast<std::uint32_t>(udp_len) + ip_proto_udp;
    sum = inet_sum(out.subspan(udp_off, udp_len), sum);
    const std::uint16_t c = inet_fold(sum);
    wire::store_be16(o + udp_off + 6, c == 0 ? 0xFFFF : c);
  }
  wire::detail::copy_bytes(o + at, p.trailer.data(), p.trailer.size());
  return *total;
}

/// The Ethernet (and VLAN), IPv4 and UDP headers of RoCEv2 frames that differ only in their
/// BTH, extended headers and payload: encoded once by make_template(), then copied into each
/// frame by build_headers(), which writes the lengths and the IPv4 checksum. A sender's frames
/// to one peer share them (spec/rnic.md §7). IPv4 only: an IPv6 frame's UDP checksum covers its
/// payload, so build() writes those.
struct frame_template {
  static constexpr std::size_t max_size = wire::eth_header_size + wire::vlan_tag_size + detail::max_ip_header + 8;
  std::array<std::byte, max_size> bytes{};  ///< the headers, total length, checksums and UDP length zero
  std::uint8_t size = 0;                    ///< bytes of headers: 42 without VLAN or IP options, at most max_size
  std::uint8_t ip_offset = 0;               ///< where the IPv4 header starts: 14, or 18 with a VLAN tag
  std::uint8_t ip_len = 0;                  ///< the IPv4 header's bytes, 20-60
  std::uint32_t ip_sum = 0;                 ///< inet_sum() of the IPv4 header as held (lengths and checksum zero)
};

/// The template of base's headers below the BTH (its BTH, extended headers, payload, pad and
/// trailer are not read). base.given must be empty: the template computes lengths and
/// checksums. Errors: invalid_field "v6" (IPv6), "given"; build()'s for the IPv4 options.
constexpr result<frame_template> make_template(const roce_packet& base) {
  if (base.v6) return wire::error{errc::invalid_field, 0, "v6"};
  if (base.given != as_given{}) return wire::error{errc::invalid_field, 0, "given"};
  roce_packet p = base;
  p.rd = rd_class::dc;
  p.bth = {.opcode = static_cast<std::uint8_t>(opcode::rc_send_only), .p_key = 0xFFFF};
  p.ext.clear();
  p.payload = p.pad = p.trailer = {};
  p.given.icrc = true;  // not needed: no CRC is computed
  std::array<std::byte, frame_template::max_size + 12 + detail::icrc_size> out{};
  const auto n = build(p, out);
  if (!n) return n.error();
  frame_template t;
  t.ip_offset = static_cast<std::uint8_t>(wire::eth_header_size + (p.vlan ? wire::vlan_tag_size : 0));
  t.ip_len = static_cast<std::uint8_t>(detail::ip_header_of(p));
  t.size = static_cast<std::uint8_t>(t.ip_offset + t.ip_len + 8);
  for (std::size_t i = 0; i < t.size; ++i) t.bytes[i] = out[i];
  const std::size_t ip = t.ip_offset, udp = t.ip_offset + t.ip_len;
  wire::store_be16(t.bytes.data() + ip + 2, 0);    // total length
  wire::store_be16(t.bytes.data() + ip + 10, 0);   // header checksum
  wire::store_be16(t.bytes.data() + udp + 4, 0);   // UDP length
  t.ip_sum = inet_sum(std::span<const std::byte>(t.bytes.data() + ip, t.ip_len));
  return t;
}

/// Writes t's headers, then b and h (PadCnt from payload_len, TVer 0), into the front of out, as
/// build() writes the frame of those headers with a payload of payload_len bytes: the same
/// bytes up to the payload. op is b.opcode's entry. Returns the payload's offset (t.size +
/// op.header_len); the caller writes the payload, its pad (detail::pad_for(payload_len) zero
/// bytes) and the ICRC (icrc_headers() over the bytes from t.ip_offset, continued over payload
/// and pad). Errors: invalid_field "bth.opcode" (op is another opcode's); as build()'s for the
/// chain, the payload's size and too_large; no_space when out cannot hold the whole frame.
constexpr result<std::size_t> build_headers(const frame_template& t, ib::bth b, const ext_headers& h, const opcode_info& op,
                                            std::size_t payload_len, std::span<std::byte> out) {
  using wire::error;
  if (b.opcode != op.code) return error{errc::invalid_field, 0, "bth.opcode"};
  if (!op.payload && payload_len) return error{errc::invalid_field, 0, "payload"};
  if (op.fixed_payload && payload_len != op.fixed_payload) return error{errc::length_mismatch, 0, "payload"};
  if (auto e = detail::check_chain(op, h); e.code != errc{}) return e;
  const std::size_t pad = detail::pad_for(payload_len);
  const std::size_t udp_len = 8 + op.header_len + payload_len + pad + detail::icrc_size;
  if (t.ip_len + udp_len > 0xFFFF) return error{errc::too_large, 0, "payload"};
  const std::size_t head = t.size + op.header_len;
  if (out.size() < head + payload_len + pad + detail::icrc_size) return error{errc::no_space, out.size(), {}};
  std::byte* const o = out.data();
  wire::detail::copy_bytes(o, t.bytes.data(), t.size);
  const std::size_t ip = t.ip_offset, udp = t.ip_offset + t.ip_len;
  const auto total = static_cast<std::uint16_t>(t.ip_len + udp_len);
  wire::store_be16(o + ip + 2, total);
  wire::store_be16(o + ip + 10, inet_fold(t.ip_sum + total));
  wire::store_be16(o + udp + 4, static_cast<std::uint16_t>(udp_len));
  b.padcnt = static_cast<std::uint8_t>(pad);
  b.tver = 0;
  if (auto e = encode_headers(b, h, op, out.subspan(t.size)); e.code != errc{}) return e;
  return head;
}

}  // namespace pushwire::ib
