// RoCEv2 frames (spec/roce.md): inspect() validates a whole Ethernet frame into a view of every
// header, the payload, the pad and the ICRC (headers decode on access); parse() / parse_into()
// also decode every field into a roce_packet; build() writes one into a caller's buffer.
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
#include <pushwire/ib/headers.hpp>
#include <pushwire/ib/opcode.hpp>
#include <pushwire/wire/crc.hpp>

namespace pushwire::ib {

using wire::errc;
using wire::result;

/// What to do with the ICRC when parsing, and what came of it.
using icrc_check = wire::crc_check;
using icrc_status = wire::crc_status;

struct parse_options {
  std::uint16_t udp_port = roce_port;  ///< UDP destination port that marks RoCEv2
  rd_class rd = rd_class::dc;          ///< how to read opcodes 0x40-0x5F
  icrc_check icrc = icrc_check::report;
};

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
};

namespace detail {

inline constexpr std::size_t max_ip_header = 60;
inline constexpr std::size_t icrc_size = 4;

constexpr std::uint32_t load_le32(const std::byte* p) {
  return static_cast<std::uint32_t>(p[0]) | static_cast<std::uint32_t>(p[1]) << 8 |
         static_cast<std::uint32_t>(p[2]) << 16 | static_cast<std::uint32_t>(p[3]) << 24;
}
constexpr void store_le32(std::byte* p, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::byte>(v >> (8 * i));
}

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

/// A validated RoCEv2 frame whose headers decode on access: inspect() reads only the fields it
/// must check (a dozen), computes the ICRC, and records where everything is. Spans and the
/// accessors read the frame, which must outlive the view.
struct roce_view {
  std::span<const std::byte> frame{};
  bool has_vlan = false, v6 = false;
  std::size_t ip_offset = 0, ip_header_len = 0, udp_offset = 0, bth_offset = 0;
  const opcode_info* op = nullptr;
  std::span<const std::byte> payload{};  ///< without the pad
  std::span<const std::byte> pad{};
  std::uint32_t icrc = 0;  ///< as written (its bytes are little-endian on the wire)
  icrc_status icrc_state = icrc_status::unchecked;

  constexpr eth_header eth() const { return detail::header_at<eth_header>(frame, 0); }
  constexpr std::optional<vlan_tag> vlan() const {
    return has_vlan ? std::optional{detail::header_at<vlan_tag>(frame, 14)} : std::nullopt;
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
  constexpr udp_header udp() const { return detail::header_at<udp_header>(frame, udp_offset); }
  constexpr ib::bth bth() const { return detail::header_at<ib::bth>(frame, bth_offset); }
  /// Extended header E, if the opcode's chain has it.
  template <ext E>
  constexpr std::optional<ext_type<E>> get() const {
    const int off = op->offset_of(E);
    if (off < 0) return std::nullopt;
    return detail::header_at<ext_type<E>>(frame, bth_offset + static_cast<std::size_t>(off));
  }
  constexpr bool se() const { return wire::read<ib::bth, "se">(frame.data() + bth_offset); }
  /// DC connect / disconnect: opcode 0x55 with SE clear / set.
  constexpr bool dc_connect() const { return op->tp == transport::dc && op->code == op::dc_connect && !se(); }
  constexpr bool dc_disconnect() const { return op->tp == transport::dc && op->code == op::dc_connect && se(); }
};

/// Validates one Ethernet frame as RoCEv2 into `v`. Errors, each at the offending byte and
/// header: truncated (any layer), not_roce, bad_ihl, length_mismatch, unsupported_version (BTH
/// TVer), reserved_opcode, chain_overrun, pad_overrun, reserved_nonzero (DCCETH, CNP),
/// trailing_bytes (a payload on an opcode without one), icrc_mismatch (icrc_check::require
/// only). On error `v` is unspecified. (Order and offsets: spec/roce.md §10.)
constexpr wire::error inspect(std::span<const std::byte> frame, roce_view& v, const parse_options& opt = {}) {
  using wire::error;
  using wire::read;
  const std::byte* f = frame.data();
  v.frame = frame;
  v.icrc_state = icrc_status::unchecked;
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
  at += v.ip_header_len;
  // UDP: its length must be the IP payload's.
  v.udp_offset = at;
  if (ip_payload < 8) return error{errc::truncated, at + ip_payload, "udp"};
  if (read<udp_header, "dstport">(f + at) != opt.udp_port) return error{errc::not_roce, at + 2, "udp.dstport"};
  if (read<udp_header, "length">(f + at) != ip_payload) return error{errc::length_mismatch, at + 4, "udp.length"};
  const std::span<const std::byte> ibp = frame.subspan(at + 8, ip_payload - 8);
  v.bth_offset = at + 8;
  // BTH and its chain; the ICRC is the last 4 bytes of the UDP payload.
  if (ibp.size() < bth_size + detail::icrc_size) return error{errc::truncated, v.bth_offset + ibp.size(), "bth"};
  const std::byte* b = ibp.data();
  if (read<ib::bth, "tver">(b) != 0) return error{errc::unsupported_version, v.bth_offset + 1, "bth.tver"};
  const int oi = opcode_index(read<ib::bth, "opcode">(b), opt.rd);
  if (oi < 0) return error{errc::reserved_opcode, v.bth_offset, "bth.opcode"};
  v.op = &opcodes[static_cast<std::size_t>(oi)];
  if (ibp.size() < v.op->header_len + detail::icrc_size)
    return error{errc::chain_overrun, v.bth_offset + ibp.size(), name(v.op->chain[v.op->chain_len ? v.op->chain_len - 1 : 0])};
  // Only two extended headers have fields that can be invalid (reserved bytes).
  if (v.op->validating_headers) {
    auto check = [&]<class H>(ext e, H h) -> error {
      const int off = v.op->offset_of(e);
      if (off < 0) return {};
      error r = wire::decode_prefix_into(ibp.subspan(static_cast<std::size_t>(off)), h);
      if (r.code != errc{}) r.offset += v.bth_offset + static_cast<std::size_t>(off);
      return r;
    };
    if (auto e = check(ext::dcceth, dcceth{}); e.code != errc{}) return e;
    if (auto e = check(ext::cnp_pad, cnp_pad{}); e.code != errc{}) return e;
  }
  // Payload and pad.
  const std::size_t body = ibp.size() - v.op->header_len - detail::icrc_size;
  const std::size_t padcnt = read<ib::bth, "padcnt">(b);
  if (padcnt > body) return error{errc::pad_overrun, v.bth_offset + 1, "bth.padcnt"};
  if (!v.op->payload && body != 0) return error{errc::trailing_bytes, v.bth_offset + v.op->header_len, "payload"};
  if (v.op->fixed_payload && body - padcnt != v.op->fixed_payload)
    return error{errc::length_mismatch, v.bth_offset + v.op->header_len, "payload"};
  v.payload = ibp.subspan(v.op->header_len, body - padcnt);
  v.pad = ibp.subspan(v.op->header_len + body - padcnt, padcnt);
  v.icrc = detail::load_le32(b + ibp.size() - detail::icrc_size);
  if (opt.icrc != icrc_check::skip) {
    const auto covered = frame.subspan(v.ip_offset, v.ip_header_len + ip_payload - detail::icrc_size);
    const bool good = compute_icrc(covered, v.v6, v.ip_header_len) == v.icrc;
    v.icrc_state = good ? icrc_status::good : icrc_status::bad;
    if (!good && opt.icrc == icrc_check::require)
      return error{errc::icrc_mismatch, v.bth_offset + ibp.size() - detail::icrc_size, "icrc"};
  }
  return {};
}

/// A parsed frame with every header decoded. Spans point into the frame that was parsed.
struct roce_packet {
  eth_header eth{};
  std::optional<vlan_tag> vlan{};
  bool v6 = false;
  ipv4_header ip4{};  ///< when !v6
  ipv6_header ip6{};  ///< when v6
  std::span<const std::byte> ip_options{};  ///< IPv4 options (IHL > 5)
  bool ip_checksum_ok = true;               ///< IPv4 header checksum (IPv6 has none)
  udp_header udp{};
  ib::bth bth{};
  const opcode_info* op = nullptr;
  ext_headers ext{};
  std::span<const std::byte> payload{};  ///< without the pad
  std::span<const std::byte> pad{};
  std::uint32_t icrc = 0;  ///< as written (its bytes are little-endian on the wire)
  icrc_status icrc_state = icrc_status::unchecked;
  std::size_t ip_offset = 0, udp_offset = 0, bth_offset = 0;

  constexpr bool is_ipv6() const { return v6; }
  /// DC connect / disconnect: opcode 0x55 with SE clear / set.
  constexpr bool dc_connect() const { return op && op->tp == transport::dc && op->code == op::dc_connect && !bth.se; }
  constexpr bool dc_disconnect() const { return op && op->tp == transport::dc && op->code == op::dc_connect && bth.se; }
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
constexpr void decode(const roce_view& v, roce_packet& p) {
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
  std::apply([](auto&... h) { (h.reset(), ...); }, p.ext.all);
  for (ext e : v.op->headers()) detail::ext_decoders[static_cast<std::size_t>(e)](v, p.ext);
  p.payload = v.payload;
  p.pad = v.pad;
  p.icrc = v.icrc;
  p.icrc_state = v.icrc_state;
  p.ip_offset = v.ip_offset;
  p.udp_offset = v.udp_offset;
  p.bth_offset = v.bth_offset;
}

/// inspect(), then every header decoded into a caller's (reusable) packet.
constexpr wire::error parse_into(std::span<const std::byte> frame, roce_packet& p, const parse_options& opt = {}) {
  roce_view v;
  if (auto e = inspect(frame, v, opt); e.code != errc{}) return e;
  decode(v, p);
  return {};
}

/// Parses one Ethernet frame as RoCEv2 (see inspect for the errors).
constexpr result<roce_packet> parse(std::span<const std::byte> frame, const parse_options& opt = {}) {
  roce_packet p{};
  if (auto e = parse_into(frame, p, opt); e.code != errc{}) return e;
  return p;
}

/// The fields of an IPv4 header that a builder chooses; the rest it computes.
struct ipv4_spec {
  ipv4_address src{}, dst{};
  std::uint8_t dscp = 0, ecn = 0, ttl = 64;
  std::uint16_t id = 0;
  bool df = true;
};
struct ipv6_spec {
  ipv6_address src{}, dst{};
  std::uint8_t tclass = 0;
  std::uint32_t flow = 0;
  std::uint8_t hlim = 64;
};

/// What build() writes. padcnt and tver in `bth` are computed; `ext` must hold exactly the
/// headers the opcode's chain names.
struct frame_spec {
  mac_address dst{}, src{};
  std::optional<vlan_tag> vlan{};  ///< its etype is computed
  std::variant<ipv4_spec, ipv6_spec> ip{};
  std::uint16_t udp_sport = 0xC000;
  std::uint16_t udp_dport = roce_port;
  bool udp6_checksum = true;  ///< compute the UDP checksum over IPv6 (IPv4 always writes 0)
  ib::bth bth{};
  ext_headers ext{};
  std::span<const std::byte> payload{};
  rd_class rd = rd_class::dc;
};

/// Bytes build(s, ...) writes, or the error it would return for the opcode.
constexpr result<std::size_t> frame_size(const frame_spec& s) {
  const int oi = opcode_index(s.bth.opcode, s.rd);
  if (oi < 0) return wire::error{errc::reserved_opcode, 0, "bth.opcode"};
  const opcode_info* op = &opcodes[static_cast<std::size_t>(oi)];
  const std::size_t pad = (4 - s.payload.size() % 4) % 4;
  const std::size_t ip = std::holds_alternative<ipv4_spec>(s.ip) ? 20 : 40;
  return 14 + (s.vlan ? 4 : 0) + ip + 8 + op->header_len + s.payload.size() + pad + detail::icrc_size;
}

/// Builds a frame into `out`: headers, PadCnt and zero pad, IPv4 header checksum, UDP length and
/// checksum (0 for IPv4), and the ICRC. Errors: reserved_opcode; invalid_field for a missing or
/// extra extended header, a payload on an opcode without one, or a value wider than its field;
/// length_mismatch (ATOMIC_WRITE payload not 8 bytes); too_large (over 65535 bytes of IP);
/// no_space.
constexpr result<std::size_t> build(const frame_spec& s, std::span<std::byte> out) {
  using wire::error;
  auto total = frame_size(s);
  if (!total) return total;
  const opcode_info& op = *find_opcode(s.bth.opcode, s.rd);
  if (!op.payload && !s.payload.empty()) return error{errc::invalid_field, 0, "payload"};
  if (op.fixed_payload && s.payload.size() != op.fixed_payload) return error{errc::length_mismatch, 0, "payload"};
  error chain_err{};
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    ([&] {
      constexpr ext E = static_cast<ext>(I);
      if (chain_err.code == errc{} && op.has(E) != s.ext.get<E>().has_value())
        chain_err = {errc::invalid_field, 0, name(E)};
    }(), ...);
  }(std::make_index_sequence<ext_count>{});
  if (chain_err.code != errc{}) return chain_err;
  if (out.size() < *total) return error{errc::no_space, out.size(), {}};

  const std::size_t pad = (4 - s.payload.size() % 4) % 4;
  const bool v6 = std::holds_alternative<ipv6_spec>(s.ip);
  const std::size_t ip_off = 14 + (s.vlan ? 4 : 0), ip_hlen = v6 ? 40 : 20;
  const std::size_t udp_len = 8 + op.header_len + s.payload.size() + pad + detail::icrc_size;
  if (ip_hlen + udp_len > 0xFFFF) return error{errc::too_large, 0, "payload"};
  std::byte* const o = out.data();
  std::size_t at = 0;
  auto put = [&](const auto& h) -> error {
    auto n = wire::encode(h, out.subspan(at));
    if (!n) return n.error();
    at += *n;
    return {};
  };
  error e{};
  e = put(eth_header{.dst = s.dst, .src = s.src, .type = s.vlan ? ethertype_vlan : v6 ? ethertype_ipv6 : ethertype_ipv4});
  if (e.code == errc{} && s.vlan) {
    vlan_tag t = *s.vlan;
    t.etype = v6 ? ethertype_ipv6 : ethertype_ipv4;
    e = put(t);
  }
  if (e.code == errc{}) {
    if (!v6) {  // (holds_alternative/get: g++ will not constant-evaluate get_if on a temporary)
      const auto& v4 = std::get<ipv4_spec>(s.ip);
      e = put(ipv4_header{.version = 4, .hdr_len = 5, .dsfield_dscp = v4.dscp, .dsfield_ecn = v4.ecn,
                          .len = static_cast<std::uint16_t>(20 + udp_len), .id = v4.id, .flags_df = v4.df,
                          .ttl = v4.ttl, .proto = ip_proto_udp, .src = v4.src, .dst = v4.dst});
      if (e.code == errc{}) wire::store_be16(o + ip_off + 10, inet_fold(inet_sum(out.subspan(ip_off, 20))));
    } else {
      const auto& x = std::get<ipv6_spec>(s.ip);
      e = put(ipv6_header{.version = 6, .tclass = x.tclass, .flow = x.flow, .plen = static_cast<std::uint16_t>(udp_len),
                          .nxt = ip_proto_udp, .hlim = x.hlim, .src = x.src, .dst = x.dst});
    }
  }
  const std::size_t udp_off = at;
  if (e.code == errc{})
    e = put(udp_header{.srcport = s.udp_sport, .dstport = s.udp_dport, .length = static_cast<std::uint16_t>(udp_len)});
  if (e.code == errc{}) {
    ib::bth b = s.bth;
    b.padcnt = static_cast<std::uint8_t>(pad);
    b.tver = 0;
    e = put(b);
  }
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    ([&] {
      constexpr ext E = static_cast<ext>(I);
      const int off = op.offset_of(E);
      if (off < 0 || e.code != errc{}) return;
      at = udp_off + 8 + static_cast<std::size_t>(off);
      e = put(*s.ext.get<E>());
    }(), ...);
  }(std::make_index_sequence<ext_count>{});
  if (e.code != errc{}) return e;
  at = udp_off + 8 + op.header_len;
  wire::detail::copy_bytes(o + at, s.payload.data(), s.payload.size());
  at += s.payload.size();
  for (std::size_t i = 0; i < pad; ++i) o[at++] = std::byte{0};
  if (v6 && s.udp6_checksum) {
    // The UDP checksum covers the ICRC, so the ICRC goes first (the ICRC masks the checksum).
    // Pseudo-header: both addresses, the UDP length, next header 17; then the datagram.
    const std::size_t icrc_at = at;
    const std::uint32_t icrc = compute_icrc(out.subspan(ip_off, icrc_at - ip_off), true, 40);
    detail::store_le32(o + icrc_at, icrc);
    std::uint32_t sum = inet_sum(out.subspan(ip_off + 8, 32));
    sum += static_cast<std::uint32_t>(udp_len) + ip_proto_udp;
    sum = inet_sum(out.subspan(udp_off, udp_len), sum);
    std::uint16_t c = inet_fold(sum);
    wire::store_be16(o + udp_off + 6, c == 0 ? 0xFFFF : c);
    return *total;
  }
  detail::store_le32(o + at, compute_icrc(out.subspan(ip_off, at - ip_off), v6, ip_hlen));
  return *total;
}

}  // namespace pushwire::ib
