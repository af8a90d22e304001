// Captures for the conformance checker (spec/conformance.md), built with the library: a clean RC
// conversation; for every rule a capture that breaks only that rule, at a known frame; captures
// that break a rule only if they are complete (--complete); and the two ways a capture of real
// NICs differs from the wire (a host's transmitted and received frames skewed, one direction
// mostly missing), made from a clean capture. The flow tests judge them through
// flow::conformance; the tool tests through pushwire-conform.
#pragma once

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <functional>
#include <iterator>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <pushwire/cell/segmenter.hpp>
#include <pushwire/flow/conform.hpp>
#include <pushwire/flow/frame.hpp>
#include <pushwire/ib/roce.hpp>
#include <pushwire/msg/msg.hpp>
#include <pushwire/wire/pcap.hpp>

namespace pushwire::test::conform {

using flow::packet;
using ib::opcode;

/// Two hosts: A (198.18.0.1, QP 0x11) and B (198.18.0.2, QP 0x12).
inline constexpr std::uint32_t qp_a = 0x11, qp_b = 0x12;
inline constexpr std::uint32_t mtu = 1024;
inline constexpr std::uint32_t rkey_b = 0x1234, rkey_a = 0x4321;
inline constexpr std::uint64_t va_b = 0x10000, va_a = 0x20000;

/// The encoding of push-push message m.
template <class M>
std::vector<std::byte> encoded(const M& m) {
  std::vector<std::byte> b(msg::encoded_size(m));
  (void)msg::encode(m, b);
  return b;
}

inline std::vector<std::byte> bytes(std::size_t n, std::uint8_t seed) {
  std::vector<std::byte> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>((i * 7 + seed) & 0xFF);
  return v;
}

/// A capture being written: frames with their times (1 us apart unless told).
struct capture {
  std::vector<std::vector<std::byte>> frames;
  std::vector<std::uint64_t> times;
  std::uint64_t t = 1'700'000'000'000'000'000ull;
  std::vector<std::vector<std::byte>> payloads;  // kept alive for packets that view them

  std::size_t add(std::vector<std::byte> f, std::uint64_t dt = 1000) {
    t += dt;
    frames.push_back(std::move(f));
    times.push_back(t);
    return frames.size();  // its frame number (1-based)
  }
  /// A RoCEv2 frame of p from A to B (a_to_b) or back.
  /// (alt: on the alternate path, A and B's second ports: 198.18.1.0/24, MACs 02:00:00:00:01:xx)
  static std::vector<std::byte> roce_frame(const packet& p, bool a_to_b, bool alt = false) {
    ib::roce_packet base{};
    const auto net = static_cast<std::uint8_t>(alt ? 1 : 0);
    base.eth.src = {2, 0, 0, 0, net, static_cast<std::uint8_t>(a_to_b ? 1 : 2)};
    base.eth.dst = {2, 0, 0, 0, net, static_cast<std::uint8_t>(a_to_b ? 2 : 1)};
    base.ip4.src = {198, 18, net, static_cast<std::uint8_t>(a_to_b ? 1 : 2)};
    base.ip4.dst = {198, 18, net, static_cast<std::uint8_t>(a_to_b ? 2 : 1)};
    base.udp.srcport = 0xC000 | (a_to_b ? 0x111 : 0x222);
    const ib::roce_packet r = flow::to_roce(p, base);
    std::vector<std::byte> f(*ib::frame_size(r));
    (void)ib::build(r, f);
    return f;
  }
  std::size_t roce(const packet& p, bool a_to_b = true, std::uint64_t dt = 1000) { return add(roce_frame(p, a_to_b), dt); }
  /// The cells of p (its native cell form where it has one) from A to B or back.
  std::vector<std::vector<std::byte>> cell_frames(const packet& p, bool a_to_b, std::size_t cell_payload = 256) {
    cell::packet_spec base{};
    base.src = {2, 0, 0, 0, 0, static_cast<std::uint8_t>(a_to_b ? 1 : 2)};
    base.dst = {2, 0, 0, 0, 0, static_cast<std::uint8_t>(a_to_b ? 2 : 1)};
    const auto form = *flow::to_cell_form(p, base);
    std::vector<std::span<const std::byte>> pieces;
    if (form.head_len) pieces.push_back(form.header_bytes());
    if (!p.payload.empty()) pieces.push_back(p.payload);
    payloads.emplace_back(form.header_bytes().begin(), form.header_bytes().end());  // (the form is local)
    if (form.head_len) pieces[0] = payloads.back();
    auto seg = *cell::segmenter::make(form.spec, std::span<const std::span<const std::byte>>(pieces), cell_payload);
    std::vector<std::vector<std::byte>> out;
    while (!seg.done()) {
      std::vector<std::byte> f(seg.next_size());
      f.resize(*seg.next(f));
      out.push_back(std::move(f));
    }
    return out;
  }
  void cells(const packet& p, bool a_to_b = true) {
    for (auto& f : cell_frames(p, a_to_b)) add(std::move(f));
  }
  /// The payload bytes a packet views (kept with the capture).
  std::span<const std::byte> keep(std::vector<std::byte> b) {
    payloads.push_back(std::move(b));
    return payloads.back();
  }
  /// The capture in pcap or pcapng file `path` (nullopt: unreadable).
  static std::optional<capture> read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    const std::vector<char> raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto rd = wire::pcap::reader::open(std::as_bytes(std::span<const char>(raw)));
    if (!rd) return std::nullopt;
    capture c;
    for (auto rec = rd->next(); rec && *rec; rec = rd->next()) {
      c.frames.emplace_back((*rec)->data.begin(), (*rec)->data.end());
      c.times.push_back((*rec)->ts_ns);
    }
    return c;
  }
  std::vector<std::byte> pcap() const {
    std::vector<std::byte> out;
    wire::pcap::writer w{out, wire::pcap::resolution::nano};
    for (std::size_t i = 0; i < frames.size(); ++i) w.add(times[i], frames[i]);
    return out;
  }
};

// ---- packets ---------------------------------------------------------------------------------

inline packet req(opcode op, std::uint32_t psn, std::span<const std::byte> payload = {}, std::uint32_t dqp = qp_b) {
  packet p{};
  p.opcode = op;
  p.psn = psn;
  p.dest_qp = dqp;
  p.payload = payload;
  p.length = static_cast<std::uint32_t>(payload.size());
  p.ack_req = ib::info(op).ends();
  return p;
}
inline packet write_first(std::uint32_t psn, std::span<const std::byte> payload, std::uint32_t dmalen, std::uint64_t va = va_b,
                          std::uint32_t rkey = rkey_b) {
  packet p = req(opcode::rc_rdma_write_first, psn, payload);
  p.va = va, p.rkey = rkey, p.dmalen = dmalen;
  return p;
}
inline packet write_only(std::uint32_t psn, std::span<const std::byte> payload, std::uint64_t va = va_b, std::uint32_t rkey = rkey_b,
                         std::optional<std::uint32_t> imm = {}, std::uint32_t dqp = qp_b) {
  packet p = req(imm ? opcode::rc_rdma_write_only_with_immediate : opcode::rc_rdma_write_only, psn, payload, dqp);
  p.va = va, p.rkey = rkey, p.dmalen = static_cast<std::uint32_t>(payload.size());
  p.imm = imm.value_or(0);
  return p;
}
inline packet read_req(std::uint32_t psn, std::uint32_t dmalen, std::uint64_t va = va_b) {
  packet p = req(opcode::rc_rdma_read_request, psn);
  p.va = va, p.rkey = rkey_b, p.dmalen = dmalen;
  return p;
}
inline packet fetch_add(std::uint32_t psn, std::uint64_t va = va_b) {
  packet p = req(opcode::rc_fetch_add, psn);
  p.va = va, p.rkey = rkey_b, p.swap = 1;
  return p;
}
/// A response from B to A's QP.
inline packet resp(opcode op, std::uint32_t psn, ib::syndrome s, std::uint32_t msn, std::span<const std::byte> payload = {},
                   std::uint32_t dqp = qp_a) {
  packet p{};
  p.opcode = op;
  p.psn = psn;
  p.dest_qp = dqp;
  p.aeth = {.syndrome = s.raw, .msn = msn};
  p.payload = payload;
  p.length = static_cast<std::uint32_t>(payload.size());
  return p;
}
inline packet ack(std::uint32_t psn, std::uint32_t msn, std::uint32_t dqp = qp_a) {
  return resp(opcode::rc_acknowledge, psn, ib::syndrome::ack(31), msn, {}, dqp);
}
inline packet nak(std::uint32_t psn, ib::nak_code c, std::uint32_t msn) { return resp(opcode::rc_acknowledge, psn, ib::syndrome::nak(c), msn); }

// ---- the clean conversation -------------------------------------------------------------------

/// The frames of the clean RC conversation, numbered in the comments; `edit` may change a
/// packet before it is written (by its index in this list) and `after` add frames after one.
struct base_options {
  std::function<void(std::size_t, packet&)> edit{};
  std::function<void(std::size_t, capture&)> after{};
};
inline capture base_conversation(const base_options& o = {}) {
  capture c;
  const auto d1 = c.keep(bytes(mtu, 1)), d2 = c.keep(bytes(mtu, 2)), d3 = c.keep(bytes(452, 3));
  const auto s1 = c.keep(bytes(100, 4)), s2 = c.keep(bytes(60, 5));
  const auto r1 = c.keep(bytes(mtu, 6)), r2 = c.keep(bytes(mtu, 7));
  std::vector<std::pair<packet, bool>> ps{
      {write_first(100, d1, 2500), true},                                                          // 1
      {req(opcode::rc_rdma_write_middle, 101, d2), true},                                          // 2
      {req(opcode::rc_rdma_write_last, 102, d3), true},                                            // 3
      {ack(102, 1), false},                                                                        // 4
      {req(opcode::rc_send_only, 103, s1), true},                                                  // 5
      {ack(103, 2), false},                                                                        // 6
      {read_req(104, 2 * mtu), true},                                                              // 7
      {resp(opcode::rc_rdma_read_response_first, 104, ib::syndrome::ack(31), 3, r1), false},       // 8
      {resp(opcode::rc_rdma_read_response_last, 105, ib::syndrome::ack(31), 3, r2), false},        // 9
      {fetch_add(106), true},                                                                      // 10
      {resp(opcode::rc_atomic_acknowledge, 106, ib::syndrome::ack(31), 4), false},                 // 11
      {req(opcode::rc_send_only, 107, s2), true},                                                  // 12
      {ack(107, 5), false},                                                                        // 13
  };
  for (std::size_t i = 0; i < ps.size(); ++i) {
    if (o.edit) o.edit(i + 1, ps[i].first);
    c.roce(ps[i].first, ps[i].second);
    if (o.after) o.after(i + 1, c);
  }
  return c;
}

// ---- a capture per rule ------------------------------------------------------------------------

struct rule_case {
  std::string name;
  flow::rule id;
  std::size_t frame;  ///< where the checker must report it
  capture cap;
};

/// Push-push on A and B: A advertises pool 0 (4 elements of 256 bytes at va_a, R_Key rkey_a) to B
/// over its control QP (A QP 0x21 > B QP 0x22); B writes into it over its data QP (B QP 0x32 >
/// A QP 0x31). Returns the capture after the advertisement and its ACK.
inline capture pp_start() {
  capture c;
  msg::buffer_recv_pool m{};
  m.header.transaction_context = 1;
  const std::array<msg::pool_descriptor, 1> pools{{{.pool_ref = 0, .element_count = 4, .element_size = 256, .memory_handle = rkey_a,
                                                     .address = va_a, .pool_context = 0}}};
  m.pools = pools;
  const auto body = c.keep(encoded(m));
  c.roce(req(opcode::rc_send_only, 500, body, 0x22), true);
  c.roce(ack(500, 1, 0x21), false);
  return c;
}
/// B's RDMA WRITE with immediate into element `el` of A's pool 0 (idata: pool, element, bytes).
inline void pp_write(capture& c, std::uint32_t psn, std::uint32_t el, std::uint32_t bytes_, std::uint32_t idata_pool = 0,
                     std::optional<std::uint32_t> idata_el = {}) {
  const auto data = c.keep(bytes(bytes_, static_cast<std::uint8_t>(psn)));
  const auto idata = msg::make_idata({idata_pool, idata_el.value_or(el), bytes_});
  c.roce(write_only(psn, data, va_a + std::uint64_t{el} * 256, rkey_a, msg::to_imm(*idata), 0x31), false);
  c.roce(ack(psn, psn - 699, 0x32), true);
}

/// Gives an edited cell the cell CRC of its new bytes (as cell::inspect computes it).
inline void reseal(std::vector<std::byte>& f) {
  cell::cell_view v;
  (void)cell::inspect(f, v, {.crc = wire::crc_check::report});
  wire::store_be32(f.data() + v.at.cell_crc, v.crc_computed);
}

/// The PSN B acknowledges in resp.ack_psn's capture: A never sends it.
inline constexpr std::uint32_t bogus_ack_psn = 200;

inline std::vector<rule_case> rule_cases() {
  using flow::rule;
  std::vector<rule_case> out;
  // frame.icrc: a copy of the SEND (frame 5) corrupted on the way, after it.
  out.push_back({"frame.icrc", rule::frame_icrc, 6, base_conversation({.after = [](std::size_t i, capture& c) {
                   if (i != 5) return;
                   auto f = c.frames.back();
                   f[f.size() - 30] ^= std::byte{0x01};
                   c.add(std::move(f));
                 }})});
  // frame.length: a copy of the SEND whose UDP length is one more than its IP payload.
  out.push_back({"frame.length", rule::frame_length, 6, base_conversation({.after = [](std::size_t i, capture& c) {
                   if (i != 5) return;
                   auto f = c.frames.back();
                   const std::size_t udp_len = 14 + 20 + 4;
                   f[udp_len + 1] = static_cast<std::byte>(static_cast<std::uint8_t>(f[udp_len + 1]) + 1);
                   c.add(std::move(f));
                 }})});
  // req.psn_sequence: A skips PSN 101; B asks for it (a PSN sequence error NAK); A goes back to
  // PSN 100 and on to 102 and 103, never sending 101.
  {
    capture c;
    const auto d = c.keep(bytes(64, 9));
    c.roce(write_only(100, d));
    c.roce(ack(100, 1), false);
    const std::size_t at = c.roce(req(opcode::rc_send_only, 102, d));
    c.roce(nak(101, ib::nak_code::psn_sequence_error, 1), false);
    c.roce(write_only(100, d));
    c.roce(req(opcode::rc_send_only, 102, d));
    c.roce(req(opcode::rc_send_only, 103, d));
    out.push_back({"req.psn_sequence", rule::req_psn_sequence, at, std::move(c)});
  }
  // req.opcode_sequence: a FIRST where the write's MIDDLE belongs (a message started inside one;
  // its own DMA length adds up with the LAST after it). (A SEND_LAST with no message before it
  // would do too, but makes stock tshark 4.0's two-pass reassembly fail a dissector assertion.)
  out.push_back({"req.opcode_sequence", rule::req_opcode_sequence, 2, base_conversation({.edit = [](std::size_t i, packet& p) {
                   if (i == 2) p.opcode = opcode::rc_rdma_write_first, p.va = va_b + 0x4000, p.rkey = rkey_b, p.dmalen = mtu + 452;
                 }})});
  // req.mtu: a MIDDLE of 1000 bytes (the MTU is 1024), the DMA length still adding up.
  out.push_back({"req.mtu", rule::req_mtu, 2, [] {
                   capture c = base_conversation({.edit = [](std::size_t i, packet& p) {
                     if (i == 1) p.dmalen = 2500 - 24;
                     if (i == 2) p.payload = p.payload.first(1000), p.length = 1000;
                   }});
                   return c;
                 }()});
  // req.dma_length: the RETH says 2600 bytes, the packets carry 2500.
  out.push_back({"req.dma_length", rule::req_dma_length, 3, base_conversation({.edit = [](std::size_t i, packet& p) {
                   if (i == 1) p.dmalen = 2600;
                 }})});
  // resp.ack_psn: B acknowledges PSN 200, which A never sends.
  out.push_back({"resp.ack_psn", rule::resp_ack_psn, 4, base_conversation({.edit = [](std::size_t i, packet& p) {
                   if (i == 4) p.psn = bogus_ack_psn;
                 }})});
  // resp.ack_psn: a plain ACK for a PSN of the READ, whose responses never come.
  {
    capture c;
    const auto d = c.keep(bytes(64, 9));
    c.roce(read_req(100, 2 * mtu));
    const std::size_t at = c.roce(ack(101, 1), false);
    c.roce(req(opcode::rc_send_only, 102, d));
    out.push_back({"resp.ack_psn (inside a READ never answered)", rule::resp_ack_psn, at, std::move(c)});
  }
  // resp.msn: the MSN goes back (2 after 1 becomes 0).
  out.push_back({"resp.msn", rule::resp_msn, 6, base_conversation({.edit = [](std::size_t i, packet& p) {
                   if (i == 6) p.aeth.msn = 0;
                 }})});
  // resp.msn: the MSN grows by more than the PSNs sent since (1 after PSN 102, then 9 at 103).
  out.push_back({"resp.msn (counts)", rule::resp_msn, 6, base_conversation({.edit = [](std::size_t i, packet& p) {
                   if (i == 6) p.aeth.msn = 9;
                 }})});
  // resp.credits: a READ response FIRST with an RNR NAK syndrome.
  out.push_back({"resp.credits", rule::resp_credits, 8, base_conversation({.edit = [](std::size_t i, packet& p) {
                   if (i == 8) p.aeth.syndrome = ib::syndrome::rnr_nak(3).raw;
                 }})});
  // resp.read: the READ's LAST response carries 1000 bytes (the DMA length says 1024).
  out.push_back({"resp.read", rule::resp_read, 9, base_conversation({.edit = [](std::size_t i, packet& p) {
                   if (i == 9) p.payload = p.payload.first(1000), p.length = 1000;
                 }})});
  // resp.atomic: an ATOMIC_ACKNOWLEDGE answers the SEND at PSN 103.
  out.push_back({"resp.atomic", rule::resp_atomic, 6, base_conversation({.edit = [](std::size_t i, packet& p) {
                   if (i == 6) p.opcode = opcode::rc_atomic_acknowledge;
                 }})});
  // resp.atomic: a misaligned FETCH_ADD executed (answered by ATOMIC_ACKNOWLEDGE).
  out.push_back({"resp.atomic (misaligned)", rule::resp_atomic, 11, base_conversation({.edit = [](std::size_t i, packet& p) {
                   if (i == 10) p.va = va_b + 4;
                 }})});
  // resp.nak_code: a NAK with the reserved code 5 for the last SEND.
  out.push_back({"resp.nak_code", rule::resp_nak_code, 13, base_conversation({.after = [](std::size_t i, capture& c) {
                   if (i == 12) c.roce(nak(107, static_cast<ib::nak_code>(5), 4), false);
                 }})});
  // resp.nak_code: a remote access error for a SEND (no R_Key).
  out.push_back({"resp.nak_code (access error for a SEND)", rule::resp_nak_code, 6, base_conversation({.edit = [](std::size_t i, packet& p) {
                   if (i == 6) p.aeth.syndrome = ib::syndrome::nak(ib::nak_code::remote_access_error).raw, p.aeth.msn = 1;
                 }})});
  // retx.restart: B NAKs PSN 104 (lost after the capture point); A goes on with new PSNs.
  {
    capture c;
    const auto d = c.keep(bytes(64, 9));
    for (std::uint32_t psn = 100; psn <= 103; ++psn) c.roce(req(opcode::rc_send_only, psn, d));
    c.roce(nak(102, ib::nak_code::psn_sequence_error, 2), false);
    const std::size_t at = c.roce(req(opcode::rc_send_only, 104, d));
    c.roce(req(opcode::rc_send_only, 105, d));
    out.push_back({"retx.restart", rule::retx_restart, at, std::move(c)});
  }
  // retx.rnr_wait: an RNR NAK of 655.36 ms (code 0) for the SEND; it is resent 1 ms later.
  {
    capture c;
    const auto d = c.keep(bytes(64, 9));
    c.roce(req(opcode::rc_send_only, 100, d));
    c.roce(resp(opcode::rc_acknowledge, 100, ib::syndrome::rnr_nak(0), 0), false);
    const std::size_t at = c.roce(req(opcode::rc_send_only, 100, d), true, 1'000'000);
    c.roce(ack(100, 1), false);
    out.push_back({"retx.rnr_wait", rule::retx_rnr_wait, at, std::move(c)});
  }
  // pagefault.no_retransmit: a page-fault ACK of 1.28 ms for a WRITE; A sends a new SEND 100 us later.
  {
    capture c;
    const auto d = c.keep(bytes(64, 9));
    c.roce(write_only(100, d));
    c.roce(resp(opcode::rc_acknowledge, 100, ib::syndrome{ib::page_fault_ack(0, 1280).syndrome}, 0), false);
    const std::size_t at = c.roce(req(opcode::rc_send_only, 101, d), true, 100'000);
    c.roce(write_only(100, d), true, 2'000'000);
    c.roce(req(opcode::rc_send_only, 101, d));
    c.roce(ack(101, 2), false);
    out.push_back({"pagefault.no_retransmit", rule::pagefault_no_retransmit, at, std::move(c)});
  }
  // DC: A's DCI 0x71 talks to B's DCT 0x72 with access key 0x5eed.
  const auto dc = [](opcode op, std::uint32_t psn, std::span<const std::byte> d, bool se = false) {
    packet p = req(op, psn, d, 0x72);
    p.dc_key = 0x5eed, p.dci = 0x71, p.eecnxt = 0x71, p.dct = 0x72, p.q_key = 0, p.src_qp = 0x71, p.se = se;
    p.ack_req = true;
    return p;
  };
  const auto dc_ack = [](std::uint32_t psn, std::uint32_t msn) {
    packet p = resp(opcode::dc_acknowledge, psn, ib::syndrome::ack(31), msn, {}, 0x71);
    p.dc_key = 0x5eed, p.eecnxt = 0x71;
    return p;
  };
  {
    capture c;
    const auto d = c.keep(bytes(64, 9));
    const std::size_t at = c.roce(dc(opcode::dc_send_only, 11, d));
    c.roce(dc_ack(11, 1), false);
    out.push_back({"dc.connect_first", rule::dc_connect_first, at, std::move(c)});
  }
  {
    capture c;
    const auto d = c.keep(bytes(64, 9));
    c.roce(dc(opcode::dc_connect, 10, {}));
    c.roce(dc_ack(10, 0), false);
    c.roce(dc(opcode::dc_send_only, 11, d));
    c.roce(dc_ack(11, 1), false);
    c.roce(dc(opcode::dc_connect, 12, {}, true));  // disconnect
    c.roce(dc_ack(12, 1), false);
    const std::size_t at = c.roce(dc(opcode::dc_send_only, 13, d));
    out.push_back({"dc.disconnect_last", rule::dc_disconnect_last, at, std::move(c)});
  }
  // pp.idata_bounds: a BufferRDMAIndicate from B names pool 9, which A never advertised. (An
  // idata naming it is no idata: spec/wireshark.md section 3.)
  {
    capture c = pp_start();
    pp_write(c, 700, 0, 200);
    msg::buffer_rdma_indicate m{};
    m.header.transaction_context = 2;
    const std::array<msg::indication, 1> entries{{{.pool_ref = 9, .element_index = 1, .byte_count = 200}}};
    m.entries = entries;
    const auto body = c.keep(encoded(m));
    const std::size_t at = c.roce(req(opcode::rc_send_only, 900, body, 0x21), false);
    c.roce(ack(900, 1, 0x22), true);
    out.push_back({"pp.idata_bounds", rule::pp_idata_bounds, at, std::move(c)});
  }
  // pp.idata_bounds: 300 bytes indicated in a 256-byte element.
  {
    capture c = pp_start();
    const std::size_t at = c.frames.size() + 1;
    const auto data = c.keep(bytes(200, 3));
    const auto idata = msg::make_idata({0, 0, 300});
    c.roce(write_only(700, data, va_a, rkey_a, msg::to_imm(*idata), 0x31), false);
    c.roce(ack(700, 1, 0x32), true);
    out.push_back({"pp.idata_bounds (too large)", rule::pp_idata_bounds, at, std::move(c)});
  }
  // pp.element_free: element 0 written twice, never returned in between.
  {
    capture c = pp_start();
    pp_write(c, 700, 0, 200);
    const std::size_t at = c.frames.size() + 1;
    pp_write(c, 701, 0, 200);
    out.push_back({"pp.element_free", rule::pp_element_free, at, std::move(c)});
  }
  // pp.write_after_flush: A flushes pool 0, B replies, then B writes into it.
  {
    capture c = pp_start();
    pp_write(c, 700, 0, 200);
    msg::buffer_pool_flush_request fr{};
    fr.header.transaction_context = 7;
    const std::array<std::uint32_t, 1> refs{0};
    fr.pool_refs = refs;
    c.roce(req(opcode::rc_send_only, 501, c.keep(encoded(fr)), 0x22), true);
    c.roce(ack(501, 2, 0x21), false);
    msg::buffer_pool_flush_reply rp{};
    rp.header.transaction_context = 7;
    c.roce(req(opcode::rc_send_only, 900, c.keep(encoded(rp)), 0x21), false);
    c.roce(ack(900, 1, 0x22), true);
    const std::size_t at = c.frames.size() + 1;
    pp_write(c, 701, 1, 200);
    out.push_back({"pp.write_after_flush", rule::pp_write_after_flush, at, std::move(c)});
  }
  // Cells: a SEND of 600 bytes (3 cells) and its ACK, between WQPs 0x11 and 0x12.
  const auto cell_send = [](capture& c, std::uint32_t psn) {
    packet p = req(opcode::rc_send_only, psn, c.keep(bytes(600, static_cast<std::uint8_t>(psn))));
    p.src_qp = qp_a;
    return c.cell_frames(p, true);
  };
  const auto cell_ack = [](capture& c, std::uint32_t psn) {
    packet a = ack(psn, 0);
    a.src_qp = qp_b;
    return c.cell_frames(a, false);
  };
  {
    capture c;
    auto cells = cell_send(c, 5);
    for (auto& f : cells) c.add(f);
    auto bad = cells[1];
    bad[40] ^= std::byte{0x04};
    const std::size_t at = c.add(bad);  // a corrupted duplicate of the second cell
    for (auto& f : cell_ack(c, 5)) c.add(std::move(f));
    out.push_back({"cell.crc", rule::cell_crc, at, std::move(c)});
  }
  {
    capture c;
    auto cells = cell_send(c, 5);
    // the last cell's packet CRC is wrong, and its cell CRC made good again over the change
    auto& last = cells.back();
    cell::cell_view v;
    (void)cell::inspect(last, v, {.crc = wire::crc_check::skip});
    last[v.at.packet_crc] ^= std::byte{0x80};
    reseal(last);
    std::size_t at = 0;
    for (auto& f : cells) at = c.add(f);
    out.push_back({"cell.packet_crc", rule::cell_packet_crc, at, std::move(c)});
  }
  {
    capture c;
    auto cells = cell_send(c, 5);
    c.add(cells[0]);
    // the second cell claims another cell count than its packet's first
    auto odd = cells[1];
    cell::cell_view v;
    (void)cell::inspect(odd, v, {.crc = wire::crc_check::skip});
    auto h = v.hdr;
    h.cell_count = 4;
    (void)wire::encode(h, std::span<std::byte>(odd).subspan(v.at.header));
    reseal(odd);
    const std::size_t at = c.add(odd);
    c.add(cells[2]);  // the rest of it; the packet is never sent again whole
    out.push_back({"cell.sequence", rule::cell_sequence, at, std::move(c)});
  }
  {
    // cnp.pacing: B's CNPs to A's QP: 10 us apart, then 2 us after (B's CNPs to another QP
    // between them do not count)
    auto cnp = [](std::uint32_t qp) {
      packet p{};
      p.opcode = ib::opcode::cnp;
      p.dest_qp = qp;
      p.p_key = 0xFFFF;
      p.becn = true;
      return p;
    };
    capture c = base_conversation();
    c.roce(cnp(qp_a), false, 1000);
    c.roce(cnp(qp_a), false, 10'000);
    c.roce(cnp(qp_a + 1), false, 1000);
    const std::size_t at = c.roce(cnp(qp_a), false, 1000);
    out.push_back({"cnp.pacing", rule::cnp_pacing, at, std::move(c)});
  }
  {
    // apm.psn_continuity: A's QP, armed (MigReq clear), migrates to the alternate path and
    // resumes at PSN 109 where the old path's next was 108; B asks for 108 there (a PSN sequence
    // error NAK), and it never comes
    capture c = base_conversation();
    const auto d = c.keep(bytes(64, 9));
    packet w = req(opcode::rc_send_only, 109, d);
    w.mig_req = true;
    const std::size_t at = c.add(capture::roce_frame(w, true, true));
    packet n = nak(108, ib::nak_code::psn_sequence_error, 5);
    n.mig_req = true;
    c.add(capture::roce_frame(n, false, true));
    out.push_back({"apm.psn_continuity", rule::apm_psn_continuity, at, std::move(c)});
  }
  return out;
}

// ---- what only a complete capture shows -------------------------------------------------------

/// Captures that break a rule only if the capture is complete (taken at an endpoint, nothing
/// lost or reordered before it): each is reported as its rule at its frame with
/// conform_options::complete (pushwire-conform --complete), and gives no violation without it.
inline std::vector<rule_case> complete_cases() {
  using flow::rule;
  std::vector<rule_case> out;
  // A skipped PSN (101) that no response mentions: the capture may have missed it, and B's
  // answers to it.
  {
    capture c;
    const auto d = c.keep(bytes(64, 9));
    c.roce(write_only(100, d));
    c.roce(ack(100, 1), false);
    const std::size_t at = c.roce(req(opcode::rc_send_only, 102, d));
    c.roce(req(opcode::rc_send_only, 103, d));
    out.push_back({"a PSN skipped", rule::req_psn_sequence, at, std::move(c)});
  }
  // B's ACK for a PSN of the READ before the READ's responses: a path that reorders B's frames.
  out.push_back({"an ACK inside a READ before its responses", rule::resp_ack_psn, 8, base_conversation({.after = [](std::size_t i, capture& c) {
                   if (i == 7) c.roce(ack(105, 3), false);
                 }})});
  // B's ACK for PSN 103 a frame before A's SEND 103: transmitted and received frames skewed.
  out.push_back({"a response before its request", rule::resp_ack_psn, 4, base_conversation({.edit = [](std::size_t i, packet& p) {
                   if (i == 4) p.psn = 103;
                 }})});
  // The READ's 3 responses without the MIDDLE.
  {
    capture c;
    const auto r1 = c.keep(bytes(mtu, 6)), r3 = c.keep(bytes(100, 8));
    c.roce(read_req(100, 2 * mtu + 100));
    c.roce(resp(opcode::rc_rdma_read_response_first, 100, ib::syndrome::ack(31), 1, r1), false);
    const std::size_t at = c.roce(resp(opcode::rc_rdma_read_response_last, 102, ib::syndrome::ack(31), 1, r3), false);
    out.push_back({"a READ response lost", rule::resp_read, at, std::move(c)});
  }
  // A DC SEND before its connect (the connect reordered after it).
  {
    capture c;
    const auto d = c.keep(bytes(64, 9));
    const auto dc = [](opcode op, std::uint32_t psn, std::span<const std::byte> b) {
      packet p = req(op, psn, b, 0x72);
      p.dc_key = 0x5eed, p.dci = 0x71, p.eecnxt = 0x71, p.dct = 0x72, p.q_key = 0, p.src_qp = 0x71, p.ack_req = true;
      return p;
    };
    const std::size_t at = c.roce(dc(opcode::dc_send_only, 11, d));
    c.roce(dc(opcode::dc_connect, 10, {}));
    out.push_back({"DC data before its connect", rule::dc_connect_first, at, std::move(c)});
  }
  // A cell packet that lost its second cell, sent again whole.
  {
    capture c;
    packet p = req(opcode::rc_send_only, 5, c.keep(bytes(600, 5)));
    p.src_qp = qp_a;
    const auto cells = c.cell_frames(p, true);
    c.add(cells[0]);
    const std::size_t at = c.add(cells[2]);
    for (const auto& f : cells) c.add(f);
    out.push_back({"a cell lost", rule::cell_sequence, at, std::move(c)});
  }
  return out;
}

// ---- captures of real NICs, as they differ from the wire ---------------------------------------

/// The Ethernet source of frame f (the host that sent it).
inline std::array<std::byte, 6> sender(const std::vector<std::byte>& f) {
  std::array<std::byte, 6> a{};
  if (f.size() >= 12) std::copy(f.begin() + 6, f.begin() + 12, a.begin());
  return a;
}

/// c as a capture tool on host `tx` (an Ethernet source) records it when its transmitted and
/// received frames reach it by different paths (ibdump on ConnectX): every frame `tx` sent is
/// stamped `skew_ns` later than the frames it received, and the capture is in stamp order. A
/// response can come before the request it answers.
inline capture skewed(const capture& c, const std::array<std::byte, 6>& tx, std::uint64_t skew_ns) {
  std::vector<std::size_t> order(c.frames.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  const auto stamp = [&](std::size_t i) { return sender(c.frames[i]) == tx ? c.times[i] + skew_ns : c.times[i]; };
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return stamp(a) < stamp(b); });
  capture out;
  for (const std::size_t i : order) {
    out.frames.push_back(c.frames[i]);
    out.times.push_back(stamp(i));
  }
  return out;
}

/// c with every frame host `kept` sent, and only one in `one_in` of the others' (the first of
/// each run of one_in kept): one direction captured, most of the other missing.
inline capture one_way(const capture& c, const std::array<std::byte, 6>& kept, std::size_t one_in) {
  capture out;
  std::size_t others = 0;
  for (std::size_t i = 0; i < c.frames.size(); ++i) {
    if (sender(c.frames[i]) != kept && others++ % one_in != 0) continue;
    out.frames.push_back(c.frames[i]);
    out.times.push_back(c.times[i]);
  }
  return out;
}

/// The two hosts of a capture between two hosts: `a` sends its first frame, `b` the other;
/// `rtt`, the time from that frame to b's first (its answer), ns.
struct two_hosts {
  std::array<std::byte, 6> a{}, b{};
  std::uint64_t rtt = 0;
};
inline two_hosts hosts_of(const capture& c) {
  two_hosts h;
  if (c.frames.empty()) return h;
  h.a = sender(c.frames.front());
  for (std::size_t i = 0; i < c.frames.size(); ++i)
    if (sender(c.frames[i]) != h.a) {
      if (!h.rtt) h.rtt = c.times[i] - c.times.front();
      h.b = sender(c.frames[i]);
    }
  return h;
}

/// Host A's and host B's Ethernet addresses in the captures above.
inline constexpr std::array<std::byte, 6> mac_a{std::byte{2}, {}, {}, {}, {}, std::byte{1}};
inline constexpr std::array<std::byte, 6> mac_b{std::byte{2}, {}, {}, {}, {}, std::byte{2}};

}  // namespace pushwire::test::conform
