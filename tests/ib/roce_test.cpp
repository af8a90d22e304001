// RoCEv2 frames: the public ICRC vectors (scapy roce.uts, a ConnectX-4 Lx capture), a build/parse
// round trip for every opcode at every pad boundary, every error code, every truncation, and
// single-byte corruption.
#include <random>
#include <set>
#include <vector>

#include <pushwire/ib/print.hpp>
#include <pushwire/ib/roce.hpp>

#include "../support/test_support.hpp"
#include "public_frames.hpp"

using namespace pushwire;
using namespace pushwire::ib;
using wire::errc;

namespace {

using namespace pushwire::test::public_frames;

constexpr bool icrc_bytes(std::span<const std::byte> f, std::uint32_t be) {
  const auto tail = f.last(4);
  return static_cast<std::uint32_t>(tail[0]) << 24 == (be & 0xFF000000) &&
         static_cast<std::uint32_t>(tail[1]) << 16 == (be & 0xFF0000) &&
         static_cast<std::uint32_t>(tail[2]) << 8 == (be & 0xFF00) && static_cast<std::uint32_t>(tail[3]) == (be & 0xFF);
}
}  // namespace

// The public ICRCs, at compile time: built frames, and the parse of a real capture.
static_assert(icrc_bytes(v4_frame, 0x78f353f3));
static_assert(icrc_bytes(v6_frame, 0x3e5b743b));
static_assert(v4_frame[24] == std::byte{0xb4} && v4_frame[25] == std::byte{0xd5});  // scapy's IPv4 checksum
static_assert(decode(cx4_cnp)->icrc_state == crc_status::good);
static_assert(decode(v4_frame)->icrc_state == crc_status::good && decode(v6_frame)->icrc_state == crc_status::good);

// The addresses as GIDs, read where the frame holds them (scapy's frames).
constexpr ib::gid view_gid(std::span<const std::byte> f, bool destination) {
  roce_view v;
  if (inspect(f, v).code != wire::errc{}) return {};
  return destination ? v.destination_gid() : v.source_gid();
}
constexpr ib::gid v6_src{0x20, 0x22, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10, 0x23};
constexpr ib::gid v6_dst{0x20, 0x23, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10, 0x24};
constexpr ib::gid v4_both{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 168, 0, 7};
static_assert(view_gid(v4_frame, false) == v4_both && view_gid(v4_frame, true) == v4_both);
static_assert(view_gid(v6_frame, false) == v6_src && view_gid(v6_frame, true) == v6_dst);

TEST_CASE("roce: a view's addresses as GIDs", "[ib][roce]") {
  const auto v4 = test::copy(v4_frame), v6 = test::copy(v6_frame);
  CHECK(view_gid(v4, false) == v4_both);
  CHECK(view_gid(v4, true) == v4_both);
  CHECK(view_gid(v6, false) == v6_src);
  CHECK(view_gid(v6, true) == v6_dst);
  auto other = v4;  // destination 192.168.0.9: the two are read from their own places
  other[14 + 19] = std::byte{9};
  roce_view v;
  REQUIRE(inspect(other, v, {.crc = crc_check::skip}).code == errc{});
  CHECK(v.source_gid() == v4_both);
  CHECK(v.destination_gid() == gid_v4(192, 168, 0, 9));
}

TEST_CASE("roce: the public ICRC vectors at run time", "[ib][roce]") {
  std::vector<std::byte> out(128);
  auto n = build(scapy_v4(), out);
  REQUIRE(n.value() == 78);
  out.resize(78);
  CHECK(out == test::copy(v4_frame));
  CHECK(wire::to_hex(std::span(out).last(4)) == "78f353f3");
  out.resize(128);
  n = build(scapy_v6(), out);
  REQUIRE(n.value() == 98);
  CHECK(wire::to_hex(std::span(out).subspan(94, 4)) == "3e5b743b");
  CHECK(wire::to_hex(std::span(out).subspan(14 + 40 + 6, 2)) == "e7c5");  // scapy's UDP checksum
  const auto cnp = test::copy(cx4_cnp);
  auto p = decode(cnp, {.crc = crc_check::require});
  REQUIRE(p.has_value());
  CHECK(p->icrc_state == crc_status::good);
  CHECK(p->op->tp == transport::cnp);
  CHECK(p->bth.becn);
  CHECK(p->bth.destqp == 0x118u);
  CHECK(p->udp.srcport == 0);
}

namespace {
// A packet for any opcode, with every header its chain names.
roce_packet spec_for(const opcode_info& o, std::size_t payload_len, std::vector<std::byte>& payload, bool v6, bool vlan) {
  roce_packet s;
  s.eth.src = {2, 0, 0, 0, 0, 1};
  s.eth.dst = {2, 0, 0, 0, 0, 2};
  s.v6 = v6;
  if (v6) {
    s.ip6.src = {0xfd, 1};
    s.ip6.dst = {0xfd, 2};
    s.ip6.tclass = 0x68;
    s.ip6.flow = 0xABCDE;
    s.ip6.hlim = 7;
  } else {
    s.ip4.src = {10, 0, 0, 1};
    s.ip4.dst = {10, 0, 0, 2};
    s.ip4.dsfield_dscp = 26;
    s.ip4.dsfield_ecn = 2;
    s.ip4.ttl = 9;
    s.ip4.id = 77;
  }
  if (vlan) s.vlan = vlan_tag{.priority = 5, .dei = true, .id = 4094};
  s.udp.srcport = 0xC123;
  s.rd = o.tp == transport::rd ? rd_class::ibta_rd : rd_class::dc;
  s.bth = {.opcode = o.code, .se = true, .m = true, .p_key = 0x8001, .becn = true, .destqp = 0xABCDEF, .a = true, .psn = 0xFFFFFE};
  for (ext e : o.headers()) {
    switch (e) {
      case ext::rdeth: s.ext.set<ext::rdeth>({.eecnxt = 0x123456}); break;
      case ext::deth: s.ext.set<ext::deth>({.q_key = 0x80010000, .srcqp = 0x654321}); break;
      case ext::dceth: s.ext.set<ext::dceth>({.access_key = 0x0123456789ABCDEF}); break;
      case ext::feth: s.ext.set<ext::feth>({.sel = 1, .plt = 2}); break;
      case ext::reth: s.ext.set<ext::reth>({.va = 0xFEDCBA9876543210, .r_key = 0xCAFEBABE, .dmalen = 0x10000}); break;
      case ext::atomiceth: s.ext.set<ext::atomiceth>({.va = 8, .r_key = 9, .swapdt = 10, .cmpdt = 11}); break;
      case ext::aeth: s.ext.set<ext::aeth>({.syndrome = 0x62, .msn = 0x00FFFF}); break;
      case ext::atomicacketh: s.ext.set<ext::atomicacketh>({.origremdt = 0xDEAD}); break;
      case ext::immdt: s.ext.set<ext::immdt>({.value = 0x07050100}); break;
      case ext::ieth: s.ext.set<ext::ieth>({.value = 0x1234}); break;
      case ext::dcceth: s.ext.set<ext::dcceth>({.dct = 1, .dci = 2}); break;
      case ext::cnp_pad: s.ext.set<ext::cnp_pad>({}); break;
      case ext::sinketh: s.ext.set<ext::sinketh>({.va = 0x7F0000002000, .r_key = 0x2B8}); break;
    }
  }
  payload.resize(o.payload ? (o.fixed_payload ? o.fixed_payload : payload_len) : 0);
  for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<std::byte>(0xA0 + i);
  s.payload = payload;
  return s;
}
}  // namespace

TEST_CASE("roce: build then parse every opcode, every pad boundary, IPv4/IPv6, with/without VLAN", "[ib][roce]") {
  std::vector<std::byte> payload, buf(2048);
  for (const opcode_info& o : opcodes) {
    for (std::size_t len : {0, 1, 2, 3, 4, 5, 8, 255, 1024}) {
      if (!o.payload && len) continue;
      for (bool v6 : {false, true})
        for (bool vlan : {false, true}) {
          const roce_packet s = spec_for(o, len, payload, v6, vlan);
          INFO(o.name << " payload " << payload.size() << (v6 ? " v6" : " v4") << (vlan ? " vlan" : ""));
          auto n = build(s, buf);
          REQUIRE(n.has_value());
          REQUIRE(*n == *frame_size(s));
          const std::span<const std::byte> f(buf.data(), *n);
          auto p = decode(f, {.crc = crc_check::require, .rd = s.rd});
          REQUIRE(p.has_value());
          CHECK(p->op == find_opcode(o.code, s.rd));
          CHECK(p->bth.opcode == o.code);
          CHECK(p->bth.padcnt == (4 - payload.size() % 4) % 4);
          CHECK(p->bth.destqp == 0xABCDEFu);
          CHECK(p->bth.psn == 0xFFFFFEu);
          std::vector<std::byte> again(*n);
          CHECK(build(*p, again).value() == *n);
          CHECK(std::ranges::equal(again, f));
          CHECK(p->bth.becn);
          CHECK(std::ranges::equal(p->payload, payload));
          CHECK(p->vlan.has_value() == vlan);
          CHECK(p->is_ipv6() == v6);
          CHECK(p->ip_checksum_ok);
          for (ext e : o.headers()) CHECK(p->op->has(e));
          [&]<std::size_t... I>(std::index_sequence<I...>) {
            const bool same[] = {(p->ext.get<static_cast<ext>(I)>() == s.ext.get<static_cast<ext>(I)>())...};
            for (std::size_t k = 0; k < ext_count; ++k) CHECK(same[k]);
          }(std::make_index_sequence<ext_count>{});
        }
    }
  }
}

TEST_CASE("roce: the ICRC continued from icrc_headers over payload and pad is the frame's ICRC", "[ib][roce]") {
  std::vector<std::byte> payload, buf(2048);
  for (const opcode_info& o : opcodes) {
    for (std::size_t len : {0, 1, 3, 4, 17, 1024}) {
      if (!o.payload && len) continue;
      for (bool v6 : {false, true})
        for (bool vlan : {false, true}) {
          const roce_packet s = spec_for(o, len, payload, v6, vlan);
          INFO(o.name << " payload " << payload.size() << (v6 ? " v6" : " v4") << (vlan ? " vlan" : ""));
          const auto n = build(s, buf);
          REQUIRE(n.has_value());
          const std::span<const std::byte> f(buf.data(), *n);
          roce_view v;
          REQUIRE(inspect(f, v, {.rd = s.rd}).code == errc{});
          const std::size_t pay = payload_offset(s), icrc_at = *n - detail::icrc_size;
          const std::uint32_t head = icrc_headers(f.subspan(v.ip_offset, pay - v.ip_offset), v6, v.ip_header_len);
          CHECK(wire::crc::crc32(f.subspan(pay, icrc_at - pay), head) == v.icrc);
          CHECK(v.icrc_state == crc_status::good);
        }
    }
  }
}

// A frame from a template (make_template, build_headers, then payload, pad and the ICRC from
// icrc_headers) against the frame itself: the decoded frame's headers with given cleared.
constexpr bool template_rebuilds(std::span<const std::byte> f) {
  auto p = decode(f, {.crc = crc_check::require});
  if (!p || !p->trailer.empty()) return false;
  roce_packet b = *p;
  b.given = {};
  const auto t = make_template(b);
  if (!t) return false;
  std::array<std::byte, 256> out{};
  const auto head = build_headers(*t, p->bth, p->ext, *p->op, p->payload.size(), out);
  if (!head || *head != payload_offset(*p)) return false;
  std::size_t at = *head;
  for (std::byte x : p->payload) out[at++] = x;
  while ((at - *head) % 4) out[at++] = std::byte{0};
  const std::uint32_t crc = wire::crc::crc32(std::span<const std::byte>(out.data() + *head, at - *head),
                                             icrc_headers(std::span<const std::byte>(out.data() + t->ip_offset, *head - t->ip_offset), false, t->ip_len));
  wire::store_le32(out.data() + at, crc);
  at += 4;
  if (at != f.size()) return false;
  for (std::size_t i = 0; i < at; ++i)
    if (out[i] != f[i]) return false;
  return true;
}
static_assert(template_rebuilds(v4_frame));  // scapy's
static_assert(template_rebuilds(cx4_cnp));   // a ConnectX-4 Lx's CNP

TEST_CASE("roce: a frame from a template is build()'s frame: every opcode, pad, VLAN, IPv4 options", "[ib][roce][template]") {
  CHECK(template_rebuilds(v4_frame));
  CHECK(template_rebuilds(cx4_cnp));
  std::vector<std::byte> payload, want(2048), got(2048);
  std::mt19937 rng(35);
  const std::array<std::byte, 8> options{std::byte{0x94}, std::byte{4}, std::byte{0}, std::byte{0},
                                         std::byte{1}, std::byte{1}, std::byte{1}, std::byte{0}};
  std::size_t frames = 0;
  for (const opcode_info& o : opcodes) {
    for (std::size_t len : {0, 1, 2, 3, 4, 5, 8, 255, 1024}) {
      if (!o.payload && len) continue;
      if (o.fixed_payload && len != o.fixed_payload) continue;
      for (bool vlan : {false, true})
        for (std::size_t opt : {0, 4, 8}) {
          roce_packet s = spec_for(o, len, payload, false, vlan);
          s.ip_options = std::span<const std::byte>(options.data(), opt);
          s.ip4.id = static_cast<std::uint16_t>(rng());
          s.ip4.ttl = static_cast<std::uint8_t>(rng());
          s.udp.srcport = static_cast<std::uint16_t>(rng());
          INFO(o.name << " payload " << len << (vlan ? " vlan" : "") << " options " << opt);
          const auto n = build(s, want);
          REQUIRE(n.has_value());
          const auto t = make_template(s);
          REQUIRE(t.has_value());
          CHECK(t->size == 14 + (vlan ? 4 : 0) + 20 + opt + 8);
          std::fill(got.begin(), got.end(), std::byte{0xEE});
          const auto head = build_headers(*t, s.bth, s.ext, o, payload.size(), got);
          REQUIRE(head.has_value());
          REQUIRE(*head == payload_offset(s));
          std::size_t at = *head;
          std::copy(payload.begin(), payload.end(), got.begin() + static_cast<std::ptrdiff_t>(at));
          at += payload.size();
          while ((at - *head) % 4) got[at++] = std::byte{0};
          const std::uint32_t crc = wire::crc::crc32(std::span<const std::byte>(got.data() + *head, at - *head),
                                                     icrc_headers(std::span<const std::byte>(got.data() + t->ip_offset, *head - t->ip_offset), false, t->ip_len));
          wire::store_le32(got.data() + at, crc);
          at += 4;
          REQUIRE(at == *n);
          CHECK(std::equal(got.begin(), got.begin() + static_cast<std::ptrdiff_t>(at), want.begin()));
          CHECK(got[at] == std::byte{0xEE});  // nothing written past the frame
          ++frames;
        }
    }
  }
  CHECK(frames > 1000);
}

TEST_CASE("roce: a template's errors", "[ib][roce][template][errors]") {
  std::vector<std::byte> payload, out(2048);
  const opcode_info& send = *find_opcode(0x04, rd_class::dc);  // RC SEND_ONLY
  const opcode_info& ack = *find_opcode(0x11, rd_class::dc);   // RC ACKNOWLEDGE
  const opcode_info& aw = *find_opcode(0x1D, rd_class::dc);    // RC ATOMIC_WRITE
  roce_packet s = spec_for(send, 16, payload, false, false);
  CHECK(make_template(spec_for(send, 16, payload, true, false)).error().field == "v6");
  roce_packet g = s;
  g.given.ip_checksum = true;
  CHECK(make_template(g).error().field == "given");
  roce_packet bad = s;
  const std::array<std::byte, 3> odd{};
  bad.ip_options = odd;
  CHECK(make_template(bad).error().field == "ip.options");
  const frame_template t = make_template(s).value();
  // A payload where the opcode has none; ATOMIC_WRITE's must be 8 bytes.
  ext_headers aeth;
  aeth.set<ext::aeth>({});
  CHECK(build_headers(t, {.opcode = 0x11}, aeth, ack, 1, out).error().field == "payload");
  ext_headers reth;
  reth.set<ext::reth>({});
  CHECK(build_headers(t, {.opcode = 0x1D}, reth, aw, 7, out).error().code == errc::length_mismatch);
  // The chain: a missing header, an extra one.
  CHECK(build_headers(t, {.opcode = 0x11}, {}, ack, 0, out).error().field == "AETH");
  CHECK(build_headers(t, {.opcode = 0x04}, aeth, send, 0, out).error().field == "AETH");
  // Over 65535 bytes of IP; out too small for the whole frame (nothing written).
  CHECK(build_headers(t, {.opcode = 0x04}, {}, send, 65536 - 20 - 8 - 12 - 4, out).error().code == errc::too_large);
  std::vector<std::byte> small(42 + 12 + 16 + 4 - 1, std::byte{0xEE});
  CHECK(build_headers(t, {.opcode = 0x04}, {}, send, 16, small).error().code == errc::no_space);
  CHECK(std::ranges::all_of(small, [](std::byte x) { return x == std::byte{0xEE}; }));
  std::vector<std::byte> exact(42 + 12 + 16 + 4);
  CHECK(build_headers(t, {.opcode = 0x04}, {}, send, 16, exact).value() == 42 + 12);
  // op not b.opcode's entry.
  CHECK(build_headers(t, {.opcode = 0x11}, {}, send, 0, out).error().field == "bth.opcode");
  // A value wider than its field.
  CHECK(build_headers(t, {.opcode = 0x04, .destqp = 1u << 24}, {}, send, 0, out).error().field == "destqp");
}

TEST_CASE("roce: every error code of the frame layer, with its location", "[ib][roce][errors]") {
  const auto good = test::copy(v4_frame);
  auto mutate = [&](std::size_t at, std::uint8_t v) {
    auto f = good;
    f[at] = std::byte{v};
    return f;
  };
  struct row {
    const char* what;
    std::vector<std::byte> frame;
    errc code;
    std::string_view field;
    codec_options opt = {};
  };
  std::vector<std::byte> short_udp = good;
  short_udp.resize(14 + 20 + 8 + 12 + 3);
  const std::vector<row> rows{
      {"not IP", mutate(12, 0x08 ^ 0x01), errc::not_roce, "eth.type"},
      {"not UDP", mutate(23, 6), errc::not_roce, "ip.proto"},
      {"another port", mutate(37, 0xB8), errc::not_roce, "udp.dstport"},
      {"port option", good, errc::not_roce, "udp.dstport", {.udp_port = 4792}},
      {"fragment", mutate(20, 0x20), errc::not_roce, "ip.frag_offset"},
      {"IHL 4", mutate(14, 0x44), errc::bad_ihl, "ip.hdr_len"},
      {"IP version 6 in an IPv4 frame", mutate(14, 0x65), errc::bad_ihl, "ip.hdr_len"},
      {"UDP length", mutate(39, 43), errc::length_mismatch, "udp.length"},
      {"IP total length beyond the frame", mutate(17, 65), errc::truncated, "ip.len"},
      {"IP total length below its header", mutate(17, 19), errc::length_mismatch, "ip.len"},
      {"BTH TVer 1", mutate(43, 0x61), errc::unsupported_version, "bth.tver"},
      {"reserved opcode", mutate(42, 0x18), errc::reserved_opcode, "bth.opcode"},
      {"vendor opcode", mutate(42, 0xE0), errc::reserved_opcode, "bth.opcode"},
      {"COMPARE_SWAP: BTH + AtomicETH + ICRC = 44 > the 36 bytes of UDP payload", mutate(42, code(opcode::rc_compare_swap)),
       errc::chain_overrun, "AtomicETH"},
      {"ICRC required", mutate(60, 0), errc::icrc_mismatch, "icrc", {.crc = crc_check::require}},
      {"ACK with a payload", mutate(42, code(opcode::rc_acknowledge)), errc::trailing_bytes, "payload"},
      {"short of a BTH and ICRC", short_udp, errc::truncated, "eth"},
  };
  std::set<errc> reached;
  for (const row& r : rows) {
    INFO(r.what);
    auto p = decode(r.frame, r.opt);
    REQUIRE_FALSE(p.has_value());
    CHECK(p.code() == r.code);
    if (r.code != errc::truncated || r.field != "eth") CHECK(p.error().field == r.field);
    reached.insert(p.code());
  }
  // PadCnt larger than the payload: an RC_SEND_ONLY with 1 byte of payload and PadCnt 3... built
  // with a 0-byte payload, then PadCnt forced to 3.
  std::vector<std::byte> empty, buf(256);
  auto s = spec_for(*&info(opcode::rc_send_only), 0, empty, false, false);
  const std::size_t n = build(s, buf).value();
  buf.resize(n);
  buf[43] = (buf[43] & std::byte{0xCF}) | std::byte{0x30};
  auto p = decode(buf);
  CHECK(p.code() == errc::pad_overrun);
  reached.insert(p.code());
  // A CNP whose reserved bytes are not zero.
  auto cnp = test::copy(cx4_cnp);
  cnp[60] = std::byte{1};
  CHECK(decode(cnp).code() == errc::reserved_nonzero);
  reached.insert(errc::reserved_nonzero);
  // ATOMIC_WRITE must carry exactly 8 bytes.
  std::vector<std::byte> seven(7);
  auto aw = spec_for(*&info(opcode::rc_atomic_write), 8, empty, false, false);
  aw.payload = seven;
  CHECK(build(aw, buf).code() == errc::length_mismatch);
  // Build refuses what parse would.
  auto missing = spec_for(*&info(opcode::rc_rdma_write_only), 4, empty, false, false);
  missing.ext.get<ext::reth>().reset();
  CHECK(build(missing, buf).error() == wire::error{errc::invalid_field, 0, "RETH"});
  auto extra = missing;
  extra.bth.opcode = code(opcode::rc_send_only);
  extra.ext.set<ext::immdt>({});
  CHECK(build(extra, buf).error().field == "ImmDt");
  std::array<std::byte, 10> tiny{};
  CHECK(build(scapy_v4(), tiny).code() == errc::no_space);
  for (errc e : {errc::not_roce, errc::bad_ihl, errc::length_mismatch, errc::chain_overrun, errc::pad_overrun,
                 errc::reserved_opcode, errc::icrc_mismatch, errc::truncated, errc::unsupported_version, errc::trailing_bytes})
    CHECK(reached.count(e) == 1);
}

TEST_CASE("roce: every truncation is an error, never a partial packet", "[ib][roce][truncation]") {
  for (const auto& frame : {test::copy(v4_frame), test::copy(v6_frame), test::copy(cx4_cnp)}) {
    for (std::size_t k = 0; k < frame.size(); ++k) {
      INFO("cut to " << k << " of " << frame.size());
      auto p = decode(std::span(frame).first(k));
      REQUIRE_FALSE(p.has_value());
      CHECK((p.code() == errc::truncated || p.code() == errc::chain_overrun));
    }
  }
}

TEST_CASE("roce: single-byte corruption is an error or a bad ICRC, never a crash", "[ib][roce][corruption]") {
  std::size_t bad_icrc = 0, errors = 0, masked = 0;
  for (const auto& frame : {test::copy(v4_frame), test::copy(v6_frame), test::copy(cx4_cnp)}) {
    auto f = frame;
    for (std::size_t i = 0; i < f.size(); ++i) {
      const std::byte orig = f[i];
      for (unsigned v = 0; v < 256; v += 7) {
        if (static_cast<std::byte>(v) == orig) continue;
        f[i] = static_cast<std::byte>(v);
        auto p = decode(f);
        if (!p) {
          ++errors;
        } else if (p->icrc_state == crc_status::bad) {
          ++bad_icrc;
        } else {
          ++masked;  // a field the ICRC does not cover: Ethernet, masked IP/UDP/BTH bytes, IP checksum
          const std::size_t ip = p->ip_offset;
          const bool covered_by_mask = i < ip || (p->is_ipv6() ? (i < ip + 4 || i == ip + 7) : (i == ip + 1 || i == ip + 8 || i == ip + 10 || i == ip + 11)) ||
                                       i == p->udp_offset + 6 || i == p->udp_offset + 7 || i == p->bth_offset + 4;
          CHECK(covered_by_mask);
        }
      }
      f[i] = orig;
    }
  }
  CHECK(bad_icrc > 0);
  CHECK(errors > 0);
  CHECK(masked > 0);
}

TEST_CASE("roce: JSON uses Wireshark's field names", "[ib][print]") {
  auto p = decode(v4_frame);
  REQUIRE(p.has_value());
  std::string s;
  wire::json_writer w{s};
  w.begin_object();
  write_json_fields(w, *p);
  w.end_object();
  // Every value read off scapy's bytes (roce.uts): IPv4 checksum 0xb4d5, ICRC bytes 78 f3 53 f3
  // shown as Wireshark shows them.
  CHECK(s == R"({"eth.dst":"24:8a:07:a8:fa:22","eth.src":"24:8a:07:a8:fa:22","eth.type":2048,)"
             R"("ip.version":4,"ip.hdr_len":5,"ip.dsfield.dscp":0,"ip.dsfield.ecn":1,"ip.len":64,"ip.id":1144,)"
             R"("ip.flags.rb":0,"ip.flags.df":1,"ip.flags.mf":0,"ip.frag_offset":0,"ip.ttl":64,"ip.proto":17,)"
             R"("ip.checksum":46293,"ip.src":"192.168.0.7","ip.dst":"192.168.0.7",)"
             R"("udp.srcport":49152,"udp.dstport":4791,"udp.length":44,"udp.checksum":0,)"
             R"("infiniband.bth.opcode":36,"infiniband.bth.se":0,"infiniband.bth.m":1,"infiniband.bth.padcnt":2,)"
             R"("infiniband.bth.tver":0,"infiniband.bth.p_key":65535,"infiniband.bth.fecn":0,"infiniband.bth.becn":0,)"
             R"("infiniband.bth.resv6a":0,"infiniband.bth.destqp":211,"infiniband.bth.a":0,"infiniband.bth.reserved7":0,)"
             R"("infiniband.bth.psn":13571856,"pushwire.payload":"4630818be28935d90e9a95505401be885e50",)"
             R"("pushwire.pad":"0000","infiniband.invariant.crc":2029212659,)"
             R"("pushwire.opcode":"UC_SEND_ONLY","pushwire.icrc":"good"})");
  CHECK(s.find(R"("infiniband.invariant.crc":)" + std::to_string(0x78f353f3u)) != std::string::npos);
  CHECK(to_text(*p).find("UC_SEND_ONLY (0x24)") != std::string::npos);
  CHECK(to_text(*p).find("ICRC 0x78f353f3 good") != std::string::npos);
}

TEST_CASE("roce: JSON of a ConnectX-4 CNP: IP fields, reserved bytes, ICRC as Wireshark shows it", "[ib][print]") {
  auto p = decode(cx4_cnp);
  REQUIRE(p.has_value());
  std::string s;
  wire::json_writer w{s};
  w.begin_object();
  write_json_fields(w, *p);
  w.end_object();
  // Read off the capture's bytes: TOS 0xc2, id 0x718c, checksum 0x9161, ICRC bytes 82 fd 00 2a.
  const std::string icrc = R"("infiniband.invariant.crc":)" + std::to_string(0x82fd002au) + ",";
  const std::vector<std::string> expected{
      R"("eth.dst":"e4:1d:2d:ab:2b:c2")", R"("ip.dsfield.dscp":48,"ip.dsfield.ecn":2)", R"("ip.id":29068)",
      R"("ip.checksum":37217,"ip.src":"10.0.17.1","ip.dst":"10.0.18.1")", R"("infiniband.bth.becn":1)",
      R"("infiniband.cnp.resv0":0,"infiniband.cnp.resv1":0)",
      R"("pushwire.payload":"","pushwire.pad":"",)" + icrc + R"("pushwire.opcode":"CNP")"};
  for (const std::string& kv : expected) {
    INFO(kv);
    CHECK(s.find(kv) != std::string::npos);
  }
  CHECK(s.find("eth.trailer") == std::string::npos);
  CHECK(to_text(*p).find("ICRC 0x82fd002a good") != std::string::npos);
}

TEST_CASE("roce: IPv4 with options (IHL > 5): parsed, and covered by the ICRC", "[ib][roce]") {
  // The scapy vector with four NOP option bytes (IHL 6), built by scapy 2.5 (scapy.contrib.roce
  // computes the ICRC): Ether()/IP(tos=1, id=1144, flags="DF", options=[IPOption_NOP()]*4)
  // /UDP(sport=49152, chksum=0)/BTH(opcode=0x24, migreq=1, pkey=0xffff, dqpn=211, psn=13571856,
  // padcount=2)/payload/pad. The same packet without options gives scapy's 78 f3 53 f3.
  auto f = test::copy(test::hex<"248a07a8fa22248a07a8fa220800 46010044047840004011b1cfc0a80007c0a80007 01010101"
                                 "c00012b7002c0000 2460ffff000000d300cf1710 4630818be28935d90e9a95505401be885e50 0000"
                                 "a3f0736a">());
  auto p = decode(f, {.crc = crc_check::require});
  REQUIRE(p.has_value());
  CHECK(p->ip4.hdr_len == 6);
  CHECK(p->ip_options.size() == 4);
  CHECK(p->ip_checksum_ok);
  CHECK(std::ranges::equal(p->payload, scapy_payload));
  CHECK(icrc_shown(p->icrc) == 0xa3f0736a);
  // Built again from its fields with everything computed: the same bytes, scapy's ICRC.
  roce_packet q = *p;
  q.given = {};
  std::vector<std::byte> again(f.size());
  REQUIRE(build(q, again).value() == f.size());
  CHECK(again == f);
  // An option byte is covered by the ICRC.
  f[35] = std::byte{0};
  CHECK(decode(f).value().icrc_state == crc_status::bad);
}

// ECN: a switch's CE mark on scapy's frames, against scapy's own (tos | 3, IPv4 checksum
// recomputed by scapy: b4d3; IPv6 traffic class 0xe2 -> 0xe3); the ICRC still holds.
namespace {
template <std::size_t N>
constexpr std::array<std::byte, N> marked(std::array<std::byte, N> f) {
  (void)mark_ce(f);
  return f;
}
constexpr auto scapy_v4_ce = pushwire::test::hex<
    "248a07a8fa22248a07a8fa22080045030040047840004011b4d3c0a80007c0a80007c00012b7002c00002460ffff000000d300cf17104630818be28935d90e9a9550"
    "5401be885e50000078f353f3">();
constexpr auto scapy_v6_ce = pushwire::test::hex<
    "248a07a8fa22248a07a8fa2286dd6e31face002c11ff2022000000000000000000000000102320230000000000000000000000001024c00012b7002ce7c52460ffff"
    "000000d300cf17104630818be28935d90e9a95505401be885e5000003e5b743b">();
}  // namespace
static_assert(ecn_of(v4_frame) == ecn::ect1 && ecn_of(v6_frame) == ecn::ect0);
static_assert(marked(v4_frame) == scapy_v4_ce);
static_assert(marked(v6_frame) == scapy_v6_ce);

TEST_CASE("ecn: mark_ce sets CE as scapy does, keeps the IPv4 checksum and the ICRC good, and leaves Not-ECT alone", "[ib][ecn]") {
  auto v4 = v4_frame;
  REQUIRE(mark_ce(v4));
  CHECK(v4 == scapy_v4_ce);
  CHECK(ecn_of(v4) == ecn::ce);
  CHECK(decode(v4)->icrc_state == crc_status::good);
  roce_view v;
  REQUIRE(inspect(v4, v).code == errc{});
  CHECK(v.ip_checksum_ok());
  auto v6 = v6_frame;
  REQUIRE(mark_ce(v6));
  CHECK(v6 == scapy_v6_ce);
  CHECK(decode(v6)->icrc_state == crc_status::good);
  CHECK(mark_ce(v6));  // CE stays CE
  CHECK(v6 == scapy_v6_ce);
  // Not-ECT: unchanged, refused.
  roce_packet p = scapy_v4();
  p.ip4.dsfield_ecn = 0;
  std::array<std::byte, 78> n{};
  REQUIRE(build(p, n).has_value());
  const auto before = n;
  CHECK_FALSE(mark_ce(n));
  CHECK(n == before);
  // Not IP, or cut short: nothing.
  std::array<std::byte, 20> shortf{};
  CHECK_FALSE(ecn_of(shortf).has_value());
  CHECK_FALSE(mark_ce(std::span(v4).first(30)));
  // Every checksum stays right whatever the TOS byte and the other header words.
  for (unsigned tos = 0; tos < 256; ++tos) {
    roce_packet q = scapy_v4();
    q.ip4.dsfield_dscp = tos >> 2;
    q.ip4.dsfield_ecn = tos & 3;
    q.ip4.id = static_cast<std::uint16_t>(tos * 2654435761u);
    std::array<std::byte, 78> f{};
    REQUIRE(build(q, f).has_value());
    INFO("tos " << tos);
    CHECK(mark_ce(f) == ((tos & 3) != 0));
    REQUIRE(inspect(f, v).code == errc{});
    CHECK(v.ip_checksum_ok());
    CHECK(decode(f)->icrc_state == crc_status::good);
  }
}
