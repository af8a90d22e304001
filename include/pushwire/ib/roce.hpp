// RoCEv2 frames: parse a whole Ethernet frame into a view of every header, the payload, the pad
// and the ICRC; build one into a caller's buffer; compute and check the ICRC (spec/roce.md).
//
// ICRC = CRC-32 over  8 bytes of 0xFF || IP header' || UDP header' || BTH' || the rest up to the
// ICRC, where ' marks masked copies (all-ones): IPv4 TOS, TTL, header checksum; IPv6 traffic
// class, flow label, hop limit; UDP checksum; BTH byte 4 (FECN, BECN, resv6a). It is written least
// significant byte first. Only the headers are copied (into 100 bytes on the stack); the payload
// is hashed in place.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
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

/// What to do with the ICRC when parsing.
enum class icrc_check : std::uint8_t {
  skip,     ///< do not compute it (status unchecked)
  report,   ///< compute it and report good/bad in the packet (default)
  require,  ///< compute it; a bad ICRC is errc::icrc_mismatch
};
enum class icrc_status : std::uint8_t { unchecked, good, bad };

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

/// A parsed frame. Spans point into the frame that was parsed.
struct roce_packet {
  eth_header eth{};
  std::optional<vlan_tag> vlan{};
  std::variant<ipv4_header, ipv6_header> ip{};
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

  constexpr bool is_ipv6() const { return std::holds_alternative<ipv6_header>(ip); }
  /// DC connect / disconnect: opcode 0x55 with SE clear / set.
  constexpr bool dc_connect() const { return op && op->tp == transport::dc && op->code == op::dc_connect && !bth.se; }
  constexpr bool dc_disconnect() const { return op && op->tp == transport::dc && op->code == op::dc_connect && bth.se; }
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

// Decodes extended header E at the front of `in` into its optional in `h`.
template <ext E>
constexpr wire::error decode_ext(std::span<const std::byte> in, ext_headers& h) {
  return wire::decode_prefix_into(in, h.get<E>().emplace());
}
using ext_decoder = wire::error (*)(std::span<const std::byte>, ext_headers&);
inline constexpr auto ext_decoders = []<std::size_t... I>(std::index_sequence<I...>) {
  return std::array<ext_decoder, ext_count>{&decode_ext<static_cast<ext>(I)>...};
}(std::make_index_sequence<ext_count>{});

}  // namespace detail

/// The ICRC of a RoCEv2 packet. `ip` runs from the first byte of the IP header to the first byte
/// of the ICRC; ip_header_len is the IP header's length including IPv4 options.
constexpr std::uint32_t compute_icrc(std::span<const std::byte> ip, bool ipv6, std::size_t ip_header_len) {
  constexpr std::byte ff{0xFF};
  std::array<std::byte, 8 + detail::max_ip_header + 8 + 12> h{};
  const std::size_t n = 8 + ip_header_len + 8 + 12;
  for (std::size_t i = 0; i < 8; ++i) h[i] = ff;
  wire::detail::copy_bytes(h.data() + 8, ip.data(), std::min(ip_header_len + 20, h.size() - 8));
  std::byte* iph = h.data() + 8;
  if (ipv6) {
    iph[0] |= std::byte{0x0F};  // version kept, traffic class + flow label masked
    iph[1] = iph[2] = iph[3] = ff;
    iph[7] = ff;  // hop limit
  } else {
    iph[1] = ff;  // TOS
    iph[8] = ff;  // TTL
    iph[10] = iph[11] = ff;  // header checksum
  }
  std::byte* udp = iph + ip_header_len;
  udp[6] = udp[7] = ff;  // UDP checksum
  udp[8 + 4] = ff;       // BTH byte 4: FECN, BECN, resv6a
  const std::uint32_t c = wire::crc::crc32(std::span<const std::byte>(h.data(), n));
  return wire::crc::crc32(ip.subspan(ip_header_len + 20), c);
}

/// Parses one Ethernet frame as RoCEv2. Errors (each at the offending byte and header):
/// truncated (any layer), not_roce, bad_ihl, length_mismatch, unsupported_version (BTH TVer),
/// reserved_opcode, chain_overrun, pad_overrun, reserved_nonzero (DCCETH, CNP), trailing_bytes
/// (a payload on an opcode without one), icrc_mismatch (icrc_check::require only).
/// parse_into fills a caller's packet (reusable: no zeroing, no copy); on error `p` is unspecified.
constexpr wire::error parse_into(std::span<const std::byte> frame, roce_packet& p, const parse_options& opt = {}) {
  using wire::error;
  std::size_t at = 0;
  p.vlan.reset();
  std::apply([](auto&... h) { (h.reset(), ...); }, p.ext.all);
  p.ip_options = {};
  p.ip_checksum_ok = true;
  p.icrc_state = icrc_status::unchecked;
  auto need = [&](std::size_t n, std::string_view what) -> error {
    if (frame.size() - at < n) return {errc::truncated, frame.size(), what};
    return {};
  };
  // Ethernet, optional 802.1Q.
  if (auto e = need(14, "eth"); e.code != errc{}) return e;
  (void)wire::decode_prefix_into(frame, p.eth);
  at = 14;
  std::uint16_t type = p.eth.type;
  if (type == ethertype_vlan) {
    if (auto e = need(4, "vlan"); e.code != errc{}) return e;
    (void)wire::decode_prefix_into(frame.subspan(at), p.vlan.emplace());
    type = p.vlan->etype;
    at += 4;
  }
  if (type != ethertype_ipv4 && type != ethertype_ipv6) return error{errc::not_roce, at - 2, "eth.type"};
  // IP.
  p.ip_offset = at;
  std::size_t ip_hlen = 0, ip_payload = 0;
  if (type == ethertype_ipv4) {
    if (auto e = need(20, "ip"); e.code != errc{}) return e;
    auto& v4 = p.ip.emplace<ipv4_header>();
    (void)wire::decode_prefix_into(frame.subspan(at), v4);
    if (v4.version != 4 || v4.hdr_len < 5) return error{errc::bad_ihl, at, "ip.hdr_len"};
    ip_hlen = 4u * v4.hdr_len;
    if (auto e = need(ip_hlen, "ip"); e.code != errc{}) return e;
    if (v4.len < ip_hlen) return error{errc::length_mismatch, at + 2, "ip.len"};
    if (frame.size() - at < v4.len) return error{errc::truncated, frame.size(), "ip.len"};
    if (v4.flags_mf || v4.frag_offset != 0) return error{errc::not_roce, at + 6, "ip.frag_offset"};
    if (v4.proto != ip_proto_udp) return error{errc::not_roce, at + 9, "ip.proto"};
    p.ip_options = frame.subspan(at + 20, ip_hlen - 20);
    p.ip_checksum_ok = inet_fold(inet_sum(frame.subspan(at, ip_hlen))) == 0;
    ip_payload = v4.len - ip_hlen;
  } else {
    if (auto e = need(40, "ipv6"); e.code != errc{}) return e;
    auto& v6 = p.ip.emplace<ipv6_header>();
    (void)wire::decode_prefix_into(frame.subspan(at), v6);
    if (v6.version != 6) return error{errc::bad_ihl, at, "ipv6.version"};
    ip_hlen = 40;
    if (frame.size() - at - 40 < v6.plen) return error{errc::truncated, frame.size(), "ipv6.plen"};
    if (v6.nxt != ip_proto_udp) return error{errc::not_roce, at + 6, "ipv6.nxt"};
    ip_payload = v6.plen;
  }
  at += ip_hlen;
  // UDP: its length must be the IP payload's.
  p.udp_offset = at;
  if (ip_payload < 8) return error{errc::truncated, at + ip_payload, "udp"};
  (void)wire::decode_prefix_into(frame.subspan(at), p.udp);
  if (p.udp.dstport != opt.udp_port) return error{errc::not_roce, at + 2, "udp.dstport"};
  if (p.udp.length != ip_payload) return error{errc::length_mismatch, at + 4, "udp.length"};
  const std::span<const std::byte> ibp = frame.subspan(at + 8, ip_payload - 8);
  p.bth_offset = at + 8;
  // BTH and its chain; the ICRC is the last 4 bytes of the UDP payload.
  if (ibp.size() < bth_size + detail::icrc_size) return error{errc::truncated, p.bth_offset + ibp.size(), "bth"};
  (void)wire::decode_prefix_into(ibp, p.bth);
  if (p.bth.tver != 0) return error{errc::unsupported_version, p.bth_offset + 1, "bth.tver"};
  p.op = find_opcode(p.bth.opcode, opt.rd);
  if (!p.op) return error{errc::reserved_opcode, p.bth_offset, "bth.opcode"};
  if (ibp.size() < p.op->header_len + detail::icrc_size)
    return error{errc::chain_overrun, p.bth_offset + ibp.size(), name(p.op->chain[p.op->chain_len ? p.op->chain_len - 1 : 0])};
  for (std::size_t i = 0; i < p.op->chain_len; ++i) {
    const std::size_t off = p.op->offset[i];
    if (auto e = detail::ext_decoders[static_cast<std::size_t>(p.op->chain[i])](ibp.subspan(off), p.ext); e.code != errc{}) {
      e.offset += p.bth_offset + off;
      return e;
    }
  }
  // Payload and pad.
  const std::size_t body = ibp.size() - p.op->header_len - detail::icrc_size;
  const std::size_t padcnt = p.bth.padcnt;
  if (padcnt > body) return error{errc::pad_overrun, p.bth_offset + 1, "bth.padcnt"};
  if (!p.op->payload && body != 0) return error{errc::trailing_bytes, p.bth_offset + p.op->header_len, "payload"};
  if (p.op->fixed_payload && body - padcnt != p.op->fixed_payload)
    return error{errc::length_mismatch, p.bth_offset + p.op->header_len, "payload"};
  p.payload = ibp.subspan(p.op->header_len, body - padcnt);
  p.pad = ibp.subspan(p.op->header_len + body - padcnt, padcnt);
  p.icrc = detail::load_le32(ibp.data() + ibp.size() - detail::icrc_size);
  if (opt.icrc != icrc_check::skip) {
    const auto ip_bytes = frame.subspan(p.ip_offset, ip_hlen + ip_payload - detail::icrc_size);
    const bool good = compute_icrc(ip_bytes, p.is_ipv6(), ip_hlen) == p.icrc;
    p.icrc_state = good ? icrc_status::good : icrc_status::bad;
    if (!good && opt.icrc == icrc_check::require)
      return error{errc::icrc_mismatch, p.bth_offset + ibp.size() - detail::icrc_size, "icrc"};
  }
  return {};
}

/// Parses one Ethernet frame as RoCEv2 (see parse_into).
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
  const opcode_info* op = find_opcode(s.bth.opcode, s.rd);
  if (!op) return wire::error{errc::reserved_opcode, 0, "bth.opcode"};
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
