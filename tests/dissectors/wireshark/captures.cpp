// pushwire-ws-captures: the Wireshark plugin's test data.
//
//   pushwire-ws-captures write DIR          roce.pcap and cells.pcap: every message type, idata,
//                                           pools and writes, page faults, DC, good and bad CRCs;
//                                           cells-agree.pcap (duplicated, changed, lost and
//                                           reordered cells) and cells-agree.want, its outcomes
//   pushwire-ws-captures expect FILE.pcap   FILE.expected: what the plugin must show
//   pushwire-ws-captures corrupt IN N DIR SEED   N randomly corrupted copies of IN
//   pushwire-ws-captures experts            the plugin's expert infos, one per line
//
// FILE.expected has one line per value: frame, TAB, field, TAB, value (decimal; bytes and MACs
// as lowercase hex), in the order tshark -T fields prints repeated values; and "frame TAB
// expert TAB name" for each expert info. The values come from the library: ib::inspect,
// msg::dispatch, cell::decode, msg::from_imm, and flow::observer for what depends on earlier
// frames (pools, writes, joined messages, cell reassembly), the component the plugin calls too;
// the observer's own values are checked by hand in tests/flow/observer_test.cpp.
#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <pushwire/cell/segmenter.hpp>
#include <pushwire/cell/testing.hpp>
#include <pushwire/flow/observer.hpp>
#include <pushwire/ib/aeth.hpp>
#include <pushwire/ib/roce.hpp>
#include <pushwire/msg/idata.hpp>
#include <pushwire/msg/msg.hpp>
#include <pushwire/wire/hex.hpp>

#include "../../flow/conform_cases.hpp"
#include <pushwire/wire/pcap.hpp>

#include "model.hpp"

namespace {

using namespace pushwire;
using ib::ext;
using bytes = std::vector<std::byte>;

// ------------------------------------------------------------------ writing captures

constexpr ib::mac_address mac_a{0x02, 0, 0, 0, 0, 0x0a}, mac_b{0x02, 0, 0, 0, 0, 0x0b};
constexpr ib::ipv4_address ip_a{192, 168, 1, 10}, ip_b{192, 168, 1, 11};

struct capture {
  bytes file;
  wire::pcap::writer pcap{file};
  std::uint64_t t = 1'700'000'000'000'000'000ull;
  std::size_t frames = 0;
  void add(std::span<const std::byte> f) {
    pcap.add(t, f);
    t += 1'000'000;
    ++frames;
  }
  void add(const ib::roce_packet& s, bool bad_icrc = false) {
    bytes f(*ib::frame_size(s));
    if (!ib::build(s, f)) std::exit(3);
    if (bad_icrc) f.back() ^= std::byte{0x5a};
    add(f);
  }
};

void save(const std::string& path, const bytes& b) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

template <msg::message_type M>
bytes enc(const M& m) {
  bytes b(msg::encoded_size(m));
  if (!msg::encode(m, b)) std::exit(3);
  return b;
}

ib::roce_packet rc(bool a_to_b, ib::opcode op, std::uint32_t psn, std::uint32_t qp = 0) {
  ib::roce_packet s;
  s.eth.src = a_to_b ? mac_a : mac_b;
  s.eth.dst = a_to_b ? mac_b : mac_a;
  s.ip4.src = a_to_b ? ip_a : ip_b;
  s.ip4.dst = a_to_b ? ip_b : ip_a;
  s.bth = {.opcode = ib::code(op), .p_key = 0xFFFF, .destqp = qp ? qp : (a_to_b ? 0x100u : 0x200u), .a = true, .psn = psn};
  return s;
}

ib::roce_packet send(bool a_to_b, std::uint32_t psn, std::span<const std::byte> m) {
  auto s = rc(a_to_b, ib::opcode::rc_send_only, psn);
  s.payload = m;
  return s;
}

ib::roce_packet ack(bool a_to_b, std::uint32_t psn, ib::aeth a) {
  auto s = rc(a_to_b, ib::opcode::rc_acknowledge, psn);
  s.ext.set<ext::aeth>(a);
  return s;
}

void write_roce(const std::string& path) {
  capture c;
  // B (the target) advertises two pools; every other message type follows.
  const std::array<msg::pool_descriptor, 2> pools{{{.pool_ref = 3, .element_count = 8, .element_size = 4096,
                                                    .memory_handle = 0xABCD, .address = 0x10000000, .pool_context = 0x1122334455667788},
                                                   {.pool_ref = 4, .element_count = 2, .element_size = 65536,
                                                    .memory_handle = 0xABCD, .address = 0x20000000, .pool_context = 9, .implicit = true}}};
  const auto m1 = enc(msg::buffer_recv_pool{.header = {.transaction_context = 0x1001}, .pools = pools});
  c.add(send(false, 1, m1));  // 1
  const auto m2 = enc(msg::buffer_recv_pool_get{.header = {.transaction_context = 0x1002}, .element_size = 2048, .element_count = 32, .implicit = true});
  c.add(send(true, 1, m2));  // 2
  const std::array<msg::pool_update_entry, 2> upd{{{3, 0, 4}, {4, 1, 1}}};
  const auto m3 = enc(msg::buffer_recv_pool_update{.header = {.transaction_context = 0x1003}, .entries = upd});
  c.add(send(false, 2, m3));  // 3
  const std::array<std::uint32_t, 3> refs{3, 4, 0xFFFFFFFF};
  const auto m4 = enc(msg::buffer_pool_flush_request{.header = {.transaction_context = 0x1004}, .pool_refs = refs});
  c.add(send(true, 2, m4));  // 4
  const auto m5 = enc(msg::buffer_pool_flush_reply{.header = {.transaction_context = 0x1004}});
  c.add(send(false, 3, m5));  // 5
  const std::array<std::byte, 5> five{std::byte{1}, std::byte{2}, std::byte{3}, std::byte{0xfe}, std::byte{0xff}};
  const auto m6 = enc(msg::send_data{.header = {.transaction_context = 0x1006}, .data = five});
  c.add(send(true, 3, m6));  // 6 (5 bytes of data: 3 pad bytes)
  const std::array<msg::indication, 2> ind{{{3, 2, 100}, {300, 70000, 0}}};
  const auto m7 = enc(msg::buffer_rdma_indicate{.header = {.transaction_context = 0x1007}, .entries = ind});
  c.add(send(true, 4, m7));  // 7
  std::array<std::byte, 128> buf{};
  auto n8 = msg::cfg::encode_request<msg::cfg::request_code::get_statistics>(0x1008, {}, buf);
  c.add(send(true, 5, std::span(buf).first(*n8)));  // 8
  msg::cfg::statistics st{.rx_frames = 1, .tx_frames = 2, .rx_bytes = 3, .tx_bytes = 4, .rx_errors = 5,
                          .tx_errors = 6, .rx_dropped = 7, .tx_dropped = 8};
  std::array<std::byte, 128> buf2{};
  auto n9 = msg::cfg::encode_reply<msg::cfg::request_code::get_statistics>(0x1008, msg::cfg::status::success, st, buf2);
  c.add(send(false, 4, std::span(buf2).first(*n9)));  // 9
  std::array<std::byte, 128> buf3{};
  auto n10 = msg::cfg::encode_request<msg::cfg::request_code::set_mac_address>(
      0x100A, {.mac = {0xa2, 0, 1, 0, 0, 0x22}}, buf3);
  c.add(send(true, 6, std::span(buf3).first(*n10)));  // 10
  std::array<std::byte, 128> buf4{};
  auto n11 = msg::cfg::encode_reply<msg::cfg::request_code::get_link_state>(
      0x100B, msg::cfg::status::busy, {.up = 1, .speed_mbps = 100000}, buf4);
  c.add(send(false, 5, std::span(buf4).first(*n11)));  // 11

  // A writes into pool 3 element 2 with matching idata; then one whose idata names element 1.
  std::array<std::byte, 300> data{};
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::byte>(i);
  auto w = rc(true, ib::opcode::rc_rdma_write_only_with_immediate, 10, 0x300);
  w.ext.set<ext::reth>({.va = 0x10000000 + 2 * 4096 + 16, .r_key = 0xABCD, .dmalen = 300});
  w.ext.set<ext::immdt>({.value = msg::to_imm(*msg::make_idata({3, 2, 300}))});
  w.payload = data;
  c.add(w);  // 12
  c.add(ack(false, 10, {.syndrome = ib::syndrome::ack(ib::syndrome::unlimited_credits).raw, .msn = 1}));  // 13
  auto bad = w;
  bad.bth.psn = 11;
  bad.ext.set<ext::immdt>({.value = msg::to_imm(*msg::make_idata({3, 1, 300}))});
  c.add(bad);  // 14: idata mismatch
  // A three-packet write into pool 4 element 1 (FIRST, MIDDLE, LAST_WITH_IMMEDIATE).
  std::array<std::byte, 256> part{};
  auto f = rc(true, ib::opcode::rc_rdma_write_first, 12, 0x300);
  f.ext.set<ext::reth>({.va = 0x20000000 + 65536, .r_key = 0xABCD, .dmalen = 640});
  f.payload = part;
  c.add(f);  // 15
  auto mid = rc(true, ib::opcode::rc_rdma_write_middle, 13, 0x300);
  mid.payload = part;
  c.add(mid);  // 16
  auto last = rc(true, ib::opcode::rc_rdma_write_last_with_immediate, 14, 0x300);
  last.ext.set<ext::immdt>({.value = msg::to_imm(*msg::make_idata({4, 1, 640}))});
  last.payload = std::span(part).first(128);
  c.add(last);  // 17
  // A write that meets a page fault: the RNR NAK answering it is a page-fault ACK.
  auto pf = w;
  pf.bth.psn = 15;
  pf.ext.set<ext::reth>({.va = 0x10000000 + 5 * 4096, .r_key = 0xABCD, .dmalen = 300});
  pf.ext.set<ext::immdt>({.value = msg::to_imm(*msg::make_idata({3, 5, 300}))});
  c.add(pf);  // 18
  c.add(ack(false, 15, ib::page_fault_ack(2, 5000)));  // 19
  // An RNR NAK answering a SEND is not a page-fault ACK.
  c.add(ack(false, 6, {.syndrome = ib::syndrome::rnr_nak(14).raw, .msn = 3}));  // 20
  // A write outside every pool, whose idata names pool 3: mismatch.
  auto stray = w;
  stray.bth.psn = 16;
  stray.ext.set<ext::reth>({.va = 0x90000000, .r_key = 0xABCD, .dmalen = 300});
  c.add(stray);  // 21
  // DC: connect, a SEND carrying a message, an RDMA write, disconnect.
  auto dc = rc(true, ib::opcode::dc_connect, 1, 0x000ABC);
  dc.ext.set<ext::dceth>({.access_key = 0x0123456789ABCDEF}).set<ext::dcceth>({.dct = 0x000ABC, .dci = 0x000DEF});
  c.add(dc);  // 22
  auto ds = rc(true, ib::opcode::dc_send_only, 2, 0x000ABC);  // BTH DCETH RDETH DETH
  ds.ext.set<ext::dceth>({.access_key = 0x0123456789ABCDEF}).set<ext::rdeth>({.eecnxt = 0}).set<ext::deth>({.q_key = 0, .srcqp = 0xDEF});
  ds.payload = m2;
  c.add(ds);  // 23
  auto dw = rc(true, ib::opcode::dc_rdma_write_only, 3, 0x000ABC);
  dw.ext.set<ext::dceth>({.access_key = 0x0123456789ABCDEF})
      .set<ext::rdeth>({.eecnxt = 0})
      .set<ext::deth>({.q_key = 0, .srcqp = 0xDEF})
      .set<ext::reth>({.va = 0x4000, .r_key = 0x55, .dmalen = 4});
  dw.payload = std::span(data).first(4);
  c.add(dw);  // 24
  auto dd = dc;
  dd.bth.se = true;
  dd.bth.psn = 4;
  c.add(dd);  // 25
  // Bad ICRCs: on a message and on an ACK.
  c.add(send(true, 7, m2), true);  // 26
  c.add(ack(false, 7, {.syndrome = 0x1F, .msn = 9}), true);  // 27
  // IPv6 and a VLAN tag, and a UD SEND.
  auto v6 = send(true, 8, m6);
  v6.vlan = ib::vlan_tag{.priority = 5, .id = 7};
  v6.v6 = true;
  v6.ip6.src = {0xfd, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  v6.ip6.dst = {0xfd, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
  v6.ip6.tclass = 3;
  v6.ip6.flow = 0xabcde;
  c.add(v6);  // 28
  auto ud = rc(true, ib::opcode::ud_send_only, 9, 0x77);
  ud.ext.set<ext::deth>({.q_key = 0x80010000, .srcqp = 0x66});
  ud.payload = m5;
  c.add(ud);  // 29
  // A payload that is not a push-push message (version 2) stays plain data.
  auto m2v = m2;
  m2v[3] = std::byte{2};
  c.add(send(true, 10, m2v));  // 30
  // A write that runs past the end of its element.
  auto over = rc(true, ib::opcode::rc_rdma_write_only, 17, 0x300);
  over.ext.set<ext::reth>({.va = 0x10000000 + 7 * 4096 + 4000, .r_key = 0xABCD, .dmalen = 300});
  over.payload = data;
  c.add(over);  // 31
  // B advertises 40 pools in one message of 1296 bytes over three SEND packets (FIRST, MIDDLE,
  // LAST): reassembled; then A writes into pool 105 element 1.
  std::vector<msg::pool_descriptor> many;
  for (std::uint32_t i = 0; i < 40; ++i)
    many.push_back({.pool_ref = 100 + i, .element_count = 2, .element_size = 256, .memory_handle = 0x9999,
                    .address = 0x50000000 + 0x1000 * i});
  const auto big = enc(msg::buffer_recv_pool{.header = {.transaction_context = 0x3001}, .pools = many});
  const std::span<const std::byte> bs(big);
  auto s1 = rc(false, ib::opcode::rc_send_first, 20);
  s1.payload = bs.first(512);
  c.add(s1);  // 32
  auto s2 = rc(false, ib::opcode::rc_send_middle, 21);
  s2.payload = bs.subspan(512, 512);
  c.add(s2);  // 33
  auto s3 = rc(false, ib::opcode::rc_send_last, 22);
  s3.payload = bs.subspan(1024);
  c.add(s3);  // 34
  auto into = rc(true, ib::opcode::rc_rdma_write_only, 18, 0x300);
  into.ext.set<ext::reth>({.va = 0x50005000 + 256, .r_key = 0x9999, .dmalen = 16});
  into.payload = std::span(data).first(16);
  c.add(into);  // 35
  // The same message with its MIDDLE packet lost: not reassembled.
  s1.bth.psn = 30;
  c.add(s1);  // 36
  s3.bth.psn = 32;
  c.add(s3);  // 37
  // Congestion (spec/qos.md): a WRITE with DSCP 26 marked CE on the way, and the CNP it earns.
  auto ce = rc(true, ib::opcode::rc_rdma_write_only, 19, 0x300);
  ce.ext.set<ext::reth>({.va = 0x90000000, .r_key = 0x77, .dmalen = 16});
  ce.payload = std::span(data).first(16);
  ce.ip4.dsfield_dscp = 26;
  ce.ip4.dsfield_ecn = 3;
  c.add(ce);  // 38
  auto cnp = rc(false, ib::opcode::cnp, 0, 0x400);
  cnp.bth.p_key = 0xFFFF;
  cnp.bth.becn = true;
  cnp.ip4.dsfield_dscp = 48;
  cnp.ip4.dsfield_ecn = 2;
  cnp.ext.set<ext::cnp_pad>({});
  c.add(cnp);  // 39
  // Path migration (spec/qos.md §9): A's QP, armed (MigReq clear), sends to B's QP 0x500; then
  // the same QP on the alternate path (A and B's second addresses) with MigReq set.
  auto armed = rc(true, ib::opcode::rc_send_only, 50, 0x500);
  armed.payload = std::span(data).first(16);
  c.add(armed);  // 40
  auto moved = armed;
  moved.bth.psn = 51;
  moved.bth.m = true;
  moved.ip4.src = {192, 168, 2, 10};
  moved.ip4.dst = {192, 168, 2, 11};
  c.add(moved);  // 41
  save(path, c.file);
}

void add_cells(capture& c, const cell::packet_spec& p, std::span<const std::byte> payload,
               std::optional<std::size_t> drop = std::nullopt, std::optional<std::size_t> spoil = std::nullopt,
               bool reseal = false) {
  auto seg = cell::segmenter::make(p, payload);
  if (!seg) std::exit(3);
  for (std::size_t i = 0; !seg->done(); ++i) {
    bytes f(seg->next_size());
    (void)seg->next(f);
    if (spoil == i) {
      f[f.size() / 2] ^= std::byte{0x40};
      if (reseal) (void)cell::testing::reseal(f);
    }
    if (drop != i) c.add(f);
  }
}

void write_cells(const std::string& path) {
  capture c;
  auto pkt = [](bool a_to_b, std::uint32_t psn, cell::cell_type t) {
    cell::packet_spec p{.dst = a_to_b ? mac_b : mac_a, .src = a_to_b ? mac_a : mac_b};
    p.src_wqp = a_to_b ? 0x10 : 0x20;
    p.dst_wqp = a_to_b ? 0x20 : 0x10;
    p.psn = psn;
    p.type = t;
    return p;
  };
  // B advertises 9 pools: 304 bytes, two cells, reassembled and dissected.
  std::vector<msg::pool_descriptor> pools;
  for (std::uint32_t i = 0; i < 9; ++i)
    pools.push_back({.pool_ref = i, .element_count = 4, .element_size = 1024, .memory_handle = 0x77, .address = 0x100000 * (i + 1)});
  const auto advert = enc(msg::buffer_recv_pool{.header = {.transaction_context = 0x2001}, .pools = pools});
  add_cells(c, pkt(false, 1, cell::cell_type::send), advert);  // 1, 2
  auto a = pkt(true, 1, cell::cell_type::ack);
  a.ack = cell::ack_info{};
  add_cells(c, a, {});  // 3
  // A one-cell Send with a message.
  const auto get = enc(msg::buffer_recv_pool_get{.header = {.transaction_context = 0x2002}, .element_size = 1024, .element_count = 4});
  add_cells(c, pkt(true, 2, cell::cell_type::send), get);  // 4
  // A write into pool 2 element 3 with idata, two cells.
  std::vector<std::byte> data(400);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::byte>(i * 3);
  auto w = pkt(true, 3, cell::cell_type::rdma_write);
  w.rdma = cell::vamh{.va = 0x300000 + 3 * 1024, .mh = 0x77};
  w.idata = msg::to_imm(*msg::make_idata({2, 3, 400}));
  add_cells(c, w, data);  // 5, 6
  // The next write meets a page fault.
  w.psn = 4;
  w.idata = msg::to_imm(*msg::make_idata({2, 1, 400}));  // and its idata disagrees with its VA
  add_cells(c, w, data);  // 7, 8
  auto pfd = pkt(false, 4, cell::cell_type::page_fault_delay);
  pfd.ack = cell::ack_info{.delay_us = 1500};
  add_cells(c, pfd, {});  // 9
  auto nak = pkt(false, 5, cell::cell_type::nak);
  nak.ack = cell::ack_info{.code = static_cast<std::uint8_t>(cell::nak_code::remote_access_error)};
  add_cells(c, nak, {});  // 10
  // Spoiled: a bad cell CRC; a resealed middle cell (good cell CRC, bad packet CRC); a lost first cell.
  w.psn = 6;
  add_cells(c, w, data, std::nullopt, 0);  // 11 (bad cell CRC), 12 (packet CRC unverified)
  w.psn = 7;
  add_cells(c, w, data, std::nullopt, 0, true);  // 13, 14 (bad packet CRC)
  w.psn = 8;
  add_cells(c, w, data, 0);  // 15 (unverified)
  // Not a valid cell: its header says version 2 (the CRC is resealed, so only the version fails).
  bytes g(cell::frame_size(cell::cell_spec{.dst = mac_b, .src = mac_a, .hdr = {.first = true, .last = true, .cell_count = 1}}));
  (void)cell::encode(cell::cell_spec{.dst = mac_b, .src = mac_a, .hdr = {.first = true, .last = true, .cell_count = 1}}, g);
  g[14] = std::byte{0x20};
  (void)cell::testing::reseal(g);
  c.add(g);  // 16
  save(path, c.file);
}

// Cells in the orders a lossy or duplicating fabric gives (spec/cells.md §8), three-cell Sends
// of 600 bytes (cells of 256, 256 and 88 bytes), one PSN per case. `want` is the outcome per
// frame, written out by hand from the rules: the packet CRC status of a last cell (good, bad,
// unverified; "-" for other cells) and the reassembler's error for a cell it did not take ("-"
// when taken). The test runs pushwire-dump --json and the plugin on the capture and requires
// both to say exactly this.
void write_agree(const std::string& pcap, const std::string& want) {
  capture c;
  bytes d(600);
  for (std::size_t i = 0; i < d.size(); ++i) d[i] = static_cast<std::byte>(i * 5 + 1);
  auto packet = [&](std::uint32_t psn) {
    cell::packet_spec p{.dst = mac_b, .src = mac_a, .dst_wqp = 0x20, .src_wqp = 0x10, .psn = psn};
    auto seg = cell::segmenter::make(p, d);
    if (!seg) std::exit(3);
    std::vector<bytes> out;
    while (!seg->done()) {
      bytes f(seg->next_size());
      (void)seg->next(f);
      out.push_back(std::move(f));
    }
    if (out.size() != 3) std::exit(3);
    return out;
  };
  auto changed = [](bytes f) {  // other data bytes, the cell CRC made good again
    f[f.size() / 2] ^= std::byte{0x40};
    (void)cell::testing::reseal(f);
    return f;
  };
  auto p1 = packet(1);
  for (const auto* f : {&p1[0], &p1[1], &p1[1], &p1[2], &p1[2]}) c.add(*f);  // 1-5: a middle and the last cell twice
  auto p2 = packet(2);
  for (const auto& f : {p2[0], p2[1], changed(p2[1]), p2[2]}) c.add(f);  // 6-9: a changed copy after the cell
  auto p3 = packet(3);
  for (const auto& f : {p3[0], changed(p3[1]), p3[1], p3[2]}) c.add(f);  // 10-13: a changed copy before it
  auto p4 = packet(4);
  for (const auto& f : {p4[0], p4[2]}) c.add(f);  // 14-15: the middle cell lost
  auto p5 = packet(5);
  for (const auto& f : {p5[0], p5[2], p5[1]}) c.add(f);  // 16-18: the last two cells swapped
  auto p6 = packet(6);
  for (const auto& f : {p6[1], p6[2]}) c.add(f);  // 19-20: the first cell lost
  save(pcap, c.file);
  std::ofstream(want) << "1\t-\t-\n2\t-\t-\n3\t-\tcell_duplicate\n4\tgood\t-\n5\tunverified\tcell_duplicate\n"
                         "6\t-\t-\n7\t-\t-\n8\t-\tcell_duplicate\n9\tgood\t-\n"
                         "10\t-\t-\n11\t-\t-\n12\t-\tcell_duplicate\n13\tbad\tpacket_crc_mismatch\n"
                         "14\t-\t-\n15\tunverified\tcell_out_of_order\n"
                         "16\t-\t-\n17\tunverified\tcell_out_of_order\n18\t-\tcell_missing\n"
                         "19\t-\tcell_missing\n20\tunverified\tcell_missing\n";
}

// ------------------------------------------------------------------ expectations

struct expect {
  const ws::model& m;
  std::ostream& out;
  std::size_t frame = 0;

  void put(std::string_view field, const std::string& v) { out << frame << '\t' << field << '\t' << v << '\n'; }
  void put(std::string_view field, std::uint64_t v) { put(field, std::to_string(v)); }
  void expert(std::string_view name) { out << frame << "\texpert\t" << name << '\n'; }

  // A layout's values at [base, end): what the plugin's walker must show.
  void walk(std::span<const std::byte> f, std::size_t base, std::size_t end, const ws::layout& L) {
    std::uint64_t count = 0;
    for (const ws::row& r : L.rows) {
      const ws::field& fd = m.fields[r.field];
      std::size_t at = base + r.offset;
      auto scalar = [&](std::size_t off) {
        if (fd.type == ws::ft::bytes || fd.type == ws::ft::ether) return put(fd.abbrev, wire::to_hex(f.subspan(off, r.size)));
        std::uint64_t v = 0;
        for (std::size_t i = 0; i < r.size; ++i) v = v << 8 | static_cast<std::uint8_t>(f[off + i]);
        if (fd.mask) v = (v & fd.mask) >> std::countr_zero(fd.mask);
        count = v;
        put(fd.abbrev, v);
      };
      switch (r.kind) {
        case ws::row_kind::scalar:
        case ws::row_kind::count:
          scalar(at);
          break;
        case ws::row_kind::bytes: {
          const std::size_t len = r.counted ? count : end - at;
          if (len) put(fd.abbrev, wire::to_hex(f.subspan(at, len)));
          break;
        }
        case ws::row_kind::array: {
          const std::size_t n = r.counted ? count : (end - at) / r.size;
          for (std::size_t k = 0; k < n; ++k, at += r.size) {
            if (r.element >= 0)
              walk(f, at, at + r.size, m.layouts[static_cast<std::size_t>(r.element)]);
            else
              scalar(at);
          }
          break;
        }
      }
    }
  }
  const ws::layout& layout(std::string_view ident) {
    for (const auto& l : m.layouts)
      if (l.ident == ident) return l;
    std::cerr << "no layout " << ident << "\n";
    std::exit(3);
  }

  // A valid push-push message: its fields, its CfgUtil data.
  bool message(std::span<const std::byte> p) {
    if (msg::dispatch(p, [](const auto&) {}).code != wire::errc{}) return false;
    const auto code = static_cast<std::uint16_t>(*msg::peek_function(p));
    for (const auto& [c, L] : m.messages)
      if (c == code) walk(p, 0, p.size(), m.layouts[L]);
    if (code == 0x0301 || code == 0x0302) {
      const std::uint16_t rcode = wire::load_be16(p.data() + 12);
      const std::uint32_t size = wire::load_be32(p.data() + 16);
      for (const auto& e : m.cfg)
        if (e.code == rcode && e.reply == (code == 0x0302) && m.layouts[e.layout].fixed_size == size)
          walk(p, 20, 20 + size, m.layouts[e.layout]);
    }
    return true;
  }
  // The books of the pools the frame changed (flow::pp_tracker, through the observer).
  void pools(const flow::frame_note& n) {
    for (const flow::pool_view& p : n.pools) {
      put("pushwire.pool.books", p.ref);
      put("pushwire.pool.free", p.free);
      put("pushwire.pool.credits", p.credits);
      put("pushwire.pool.state", static_cast<std::uint64_t>(p.state));
      put("pushwire.pool.lowest_free", p.lowest_free);
    }
  }
  void idata(std::uint32_t imm) {
    const msg::idata d = msg::from_imm(imm);
    put("pushwire.idata.pool", d.pool_ref);
    put("pushwire.idata.element", d.element_index);
    put("pushwire.idata.bytes", d.bytes());
  }
};

void expect_roce(expect& x, const flow::frame_note& n, std::span<const std::byte> f) {
  ib::roce_view v;
  if (ib::inspect(f, v).code != wire::errc{}) return;
  const ib::bth b = v.bth();
  const ib::opcode_info& op = *v.op;
  // The heuristic's message (SEND_ONLY, _IMM, _INV), first in the frame; or one joined from
  // SEND_FIRST ... LAST, at its LAST.
  if (op.is(ib::op_class::send) && op.pos == ib::position::only) x.message(v.payload);
  if (!n.message.empty() && x.message(n.message)) x.put("pushwire.message.first_frame", n.message_first_frame);
  x.put("pushwire.opcode", b.opcode);
  {
    const std::byte* ip = f.data() + v.ip_offset;
    const unsigned tos = v.v6 ? ((std::to_integer<unsigned>(ip[0]) & 0x0F) << 4 | std::to_integer<unsigned>(ip[1]) >> 4) : std::to_integer<unsigned>(ip[1]);
    x.put("pushwire.dscp", tos >> 2);
    x.put("pushwire.ecn", tos & 3);
    if ((tos & 3) == 3) x.expert("pushwire.congestion");
  }
  if (op.is(ib::op_class::cnp)) {
    x.put("pushwire.cnp.qp", b.destqp);
    x.expert("pushwire.congestion");
  }
  if (auto d = v.get<ext::dceth>()) x.put("pushwire.dc.access_key", d->access_key);
  if (auto d = v.get<ext::dcceth>()) {
    x.put("pushwire.dc.resv0", 0);
    x.put("pushwire.dc.dct", d->dct);
    x.put("pushwire.dc.resv1", 0);
    x.put("pushwire.dc.dci", d->dci);
    x.put("pushwire.dc.resv2", 0);
    x.put("pushwire.dc.disconnect", v.dc_disconnect() ? 1 : 0);
    x.expert("pushwire.dc.connect");
  }
  if (op.is(ib::op_class::write) && v.get<ext::immdt>() && n.idata) x.idata(v.get<ext::immdt>()->value);
  if (n.write) {
    x.put("pushwire.write.pool", n.write->pool.ref);
    x.put("pushwire.write.element", n.write->element());
    x.put("pushwire.write.offset", n.write->offset());
    x.put("pushwire.write.pool_frame", n.write->pool.frame);
    if (n.outside) x.expert("pushwire.write.outside");
  }
  if (n.idata_mismatch) x.expert("pushwire.idata.mismatch");
  if (n.migrated_from) {
    x.put("pushwire.apm.from_frame", n.migrated_from->frame);
    x.put("pushwire.apm.from", n.migrated_from->src.text() + " > " + n.migrated_from->dst.text());
    x.expert("pushwire.apm");
  }
  if (n.write_frame) {
    x.put("pushwire.page_fault.delay_us", *ib::page_fault_delay_us(*v.get<ext::aeth>()));
    x.put("pushwire.page_fault.write_frame", n.write_frame);
    x.expert("pushwire.page_fault");
  }
  x.pools(n);
  // Its 4 bytes read big-endian, as stock Wireshark's infiniband.invariant.crc reads them.
  x.put("pushwire.icrc", wire::load_be32(f.data() + v.icrc_offset));
  x.put("pushwire.icrc.status", v.icrc_state == wire::crc_status::good ? 1 : 0);
  if (v.icrc_state == wire::crc_status::bad) x.expert("pushwire.icrc.bad");
}

void expect_cell(expect& x, const flow::frame_note& n, std::span<const std::byte> f) {
  cell::cell_view v;
  const auto e = cell::decode_into(f, v);
  if (e.code == wire::errc::not_cell) return;
  if (e.code != wire::errc{}) {
    if (f.size() >= 14 + cell::header_size) x.walk(f, 14, 14 + cell::header_size, x.layout("cell_header"));
    x.expert("pushwire.cell.invalid");
    return;
  }
  const std::size_t h0 = v.at.header;
  x.walk(f, h0, h0 + cell::header_size, x.layout("cell_header"));
  if (v.at.vamh) x.walk(f, v.at.vamh, v.at.vamh + 12, x.layout("cell_vamh"));
  if (v.at.ack) {
    x.walk(f, v.at.ack, v.at.ack + 8, x.layout("cell_ack"));
    if (v.hdr.type == cell::cell_type::page_fault_delay) {
      x.put("pushwire.page_fault.delay_us", v.ack->delay_us);
      if (n.write_frame) x.put("pushwire.page_fault.write_frame", n.write_frame);
      x.expert("pushwire.page_fault");
    }
  }
  if (v.idata) {
    x.put("pushwire.cell.idata", *v.idata);
    x.idata(*v.idata);
  }
  if (v.hdr.length) x.put("pushwire.cell.data", wire::to_hex(v.data));
  if (n.write) {
    x.put("pushwire.write.pool", n.write->pool.ref);
    x.put("pushwire.write.element", n.write->element());
    x.put("pushwire.write.offset", n.write->offset());
    x.put("pushwire.write.pool_frame", n.write->pool.frame);
  }
  if (n.idata_mismatch) x.expert("pushwire.idata.mismatch");
  // Wireshark's checksum status: 1 good, 0 bad, 2 unverified.
  const int status = n.packet_crc == flow::packet_crc_status::good ? 1 : n.packet_crc == flow::packet_crc_status::bad ? 0 : 2;
  if (v.packet_crc) {
    x.put("pushwire.cell.packet_crc", *v.packet_crc);
    x.put("pushwire.cell.packet_crc.status", static_cast<std::uint64_t>(status));
    if (status == 0) x.expert("pushwire.cell.packet_crc.bad");
  }
  if (n.reassembly.code != wire::errc{}) x.put("pushwire.cell.reassembly", std::string{wire::to_string(n.reassembly.code)});
  x.pools(n);
  x.put("pushwire.cell.crc", v.crc);
  x.put("pushwire.cell.crc.status", v.crc_state == wire::crc_status::good ? 1 : 0);
  if (v.crc_state == wire::crc_status::bad) x.expert("pushwire.cell.crc.bad");
  if (v.hdr.type == cell::cell_type::send && v.hdr.last && status == 1) {
    std::span<const std::byte> m = v.data;
    if (v.hdr.cell_count > 1) {
      m = n.payload;
      if (!m.empty()) x.put("pushwire.cell.reassembled", wire::to_hex(m));
    }
    if (!m.empty()) x.message(m);
  }
}

bytes slurp(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  std::vector<char> c((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  bytes b(c.size());
  std::transform(c.begin(), c.end(), b.begin(), [](char ch) { return static_cast<std::byte>(ch); });
  return b;
}

int write_expected(const std::string& pcap) {
  const bytes file = slurp(pcap);
  auto r = wire::pcap::reader::open(file);
  if (!r) return std::cerr << "cannot read " << pcap << "\n", 2;
  const ws::model m = ws::build();
  std::ofstream out(pcap.substr(0, pcap.rfind('.')) + ".expected");
  expect x{m, out};
  flow::observer obs;
  flow::conformance conform;  // as the plugin runs it: one pass, the MTU inferred as frames come
  for (;;) {
    auto rec = r->next();
    if (!rec || !*rec) break;
    ++x.frame;
    const auto f = (*rec)->data;
    for (const flow::violation& v : conform.check(x.frame, (*rec)->ts_ns, f, (*rec)->orig_len)) {
      x.put("pushwire.conform.rule", std::string{flow::info(v.id).name});
      x.expert("pushwire.conform." + std::string{flow::info(v.id).name});
    }
    const flow::frame_note n = obs.observe(x.frame, (*rec)->ts_ns, f);
    if (f.size() >= 14 && wire::load_be16(f.data() + 12) == cell::ethertype) expect_cell(x, n, f);
    else expect_roce(x, n, f);
    // roce.pcap's frame 41 is a migration from frame 40's path (write_roce): what the plugin
    // must show there, whatever the observer says
    if (pcap.ends_with("/roce.pcap") && x.frame == 41 && !(n.migrated_from && n.migrated_from->frame == 40))
      return std::cerr << "roce.pcap frame 41: the observer names no migration from frame 40\n", 3;
  }
  return 0;
}

// The pools statistics as the library counts them (flow::pp_tracker through the observer, over
// the whole capture): one line per pool, "owner|user|pool|elements|element size|writes|bytes|
// returns|flushes|lowest free|state" (by owner, user and reference; tshark lists them as they
// first appear).
int write_pools(const std::string& pcap) {
  const bytes file = slurp(pcap);
  auto r = wire::pcap::reader::open(file);
  if (!r) return std::cerr << "cannot read " << pcap << "\n", 2;
  flow::observer obs;
  for (std::uint64_t n = 1;; ++n) {
    auto rec = r->next();
    if (!rec || !*rec) break;
    (void)obs.observe(n, (*rec)->ts_ns, (*rec)->data);
  }
  obs.conversations().each_pool([](const flow::pool_view& p) {
    std::cout << p.owner.text() << "|" << p.user.text() << "|" << p.ref << "|" << p.elements << "|" << p.element_size << "|"
              << p.writes << "|" << p.bytes << "|" << p.returns << "|" << p.flushes << "|" << p.lowest_free << "|"
              << wire::enum_name(p.state) << "\n";
  });
  return 0;
}

// N copies of IN, each frame changed with probability 1/2: 1-4 random bytes flipped, or cut
// short, or lengthened with junk; half of the changed RoCE frames get their ICRC (and cells
// their CRC) made good again so that the damage reaches past the checksum.
int corrupt(const std::string& in, int n, const std::string& dir, unsigned seed) {
  const bytes file = slurp(in);
  std::mt19937 rng(seed);
  for (int k = 0; k < n; ++k) {
    auto r = wire::pcap::reader::open(file);
    if (!r) return 2;
    bytes outf;
    wire::pcap::writer wr{outf};
    std::uint64_t t = 1;
    for (;;) {
      auto rec = r->next();
      if (!rec || !*rec) break;
      bytes f((*rec)->data.begin(), (*rec)->data.end());
      if (rng() % 2 && !f.empty()) {
        switch (rng() % 4) {
          case 0:
          case 1:
            for (unsigned i = 0, c = 1 + rng() % 4; i < c; ++i) f[rng() % f.size()] ^= static_cast<std::byte>(1 + rng() % 255);
            break;
          case 2:
            f.resize(rng() % f.size());
            break;
          default:
            for (unsigned i = 0, c = 1 + rng() % 16; i < c; ++i) f.push_back(static_cast<std::byte>(rng()));
        }
        if (rng() % 2) {
          ib::roce_view v;
          if (ib::inspect(f, v).code == wire::errc{}) {
            for (int i = 0; i < 4; ++i) f[v.icrc_offset + static_cast<std::size_t>(i)] = static_cast<std::byte>(v.icrc_computed >> (8 * i));
          } else {
            (void)cell::testing::reseal(f);
          }
        }
      }
      wr.add(t++ * 1000, f);
    }
    const std::string path = dir + "/corrupt-" + std::to_string(seed) + "-" + std::to_string(k) + ".pcap";
    save(path, outf);
  }
  return 0;
}

// Push-push beside other RDMA traffic (spec/wireshark.md section 3, "Claiming"): P and Q speak
// push-push from frame 6 on (P owns pool 0); N1 and N2 run something else (NCCL-like RDMA WRITE
// with immediate, SENDs). DIR/foreign.want lists the frames the plugin may claim and how:
// "FRAME KIND..." with KIND message (a push-push message), idata, or write (an RDMA write landing
// in an advertised pool); every other frame is foreign.
void write_foreign(const std::string& dir) {
  capture c;
  std::ofstream want(dir + "/foreign.want");
  const ib::ipv4_address p{10, 9, 0, 1}, q{10, 9, 0, 2}, n1{10, 9, 0, 3}, n2{10, 9, 0, 4};
  auto pkt = [](ib::ipv4_address from, ib::ipv4_address to, ib::opcode op, std::uint32_t psn, std::uint32_t qp) {
    ib::roce_packet s;
    s.eth.src = {0x02, 0, 0, 0, 9, from[3]};
    s.eth.dst = {0x02, 0, 0, 0, 9, to[3]};
    s.ip4.src = from;
    s.ip4.dst = to;
    s.ip4.dsfield_dscp = 26;  // RoCE's traffic class and ECN, which the ICRC masks
    s.ip4.dsfield_ecn = 2;
    s.bth = {.opcode = ib::code(op), .p_key = 0xFFFF, .destqp = qp, .a = true, .psn = psn};
    return s;
  };
  std::array<std::byte, 256> data{};
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::byte>(i * 7);
  auto write_imm = [&](ib::ipv4_address from, ib::ipv4_address to, std::uint32_t psn, std::uint64_t va, std::uint32_t rkey,
                       std::uint32_t imm) {
    auto w = pkt(from, to, ib::opcode::rc_rdma_write_only_with_immediate, psn, 0x31);
    w.ext.set<ext::reth>({.va = va, .r_key = rkey, .dmalen = static_cast<std::uint32_t>(data.size())});
    w.ext.set<ext::immdt>({.value = imm});
    w.payload = data;
    return w;
  };
  auto send_only = [&](ib::ipv4_address from, ib::ipv4_address to, std::uint32_t psn, std::span<const std::byte> m) {
    auto s = pkt(from, to, ib::opcode::rc_send_only, psn, 0x21);
    s.payload = m;
    return s;
  };
  const std::uint32_t idata01 = msg::to_imm(*msg::make_idata({0, 1, 256}));
  const std::uint64_t va = 0x7f0000000000;
  // 1-2: NCCL-like: immediate 0, which reads as pool 0, element 0, 65536 bytes.
  c.add(write_imm(n1, n2, 100, 0x5000, 0x77, 0));
  auto a = pkt(n2, n1, ib::opcode::rc_acknowledge, 100, 0x41);
  a.ext.set<ext::aeth>({.syndrome = ib::syndrome::ack(ib::syndrome::unlimited_credits).raw, .msn = 1});
  c.add(a);
  // 3: Q writes to P with an idata-shaped immediate before any push-push message.
  c.add(write_imm(q, p, 200, va + 4096, 0x1234, idata01));
  // 4: a SEND whose payload is a BufferRecvPool of version 2: not push-push, claims nothing.
  const std::array<msg::pool_descriptor, 1> pool{{{.pool_ref = 0, .element_count = 4, .element_size = 4096,
                                                   .memory_handle = 0x1234, .address = va, .pool_context = 0}}};
  auto v2 = enc(msg::buffer_recv_pool{.header = {.transaction_context = 1}, .pools = pool});
  v2[3] = std::byte{2};
  c.add(send_only(p, q, 300, v2));
  // 5: and the same write again.
  c.add(write_imm(q, p, 201, va + 4096, 0x1234, idata01));
  // 6: a strict push-push message (CfgUtil GetLinkState) claims P and Q, but no pool is known.
  std::array<std::byte, 64> cfg{};
  const auto ncfg = msg::cfg::encode_request<msg::cfg::request_code::get_link_state>(7, {}, cfg);
  c.add(send_only(p, q, 301, std::span(cfg).first(*ncfg)));
  want << c.frames << " message\n";
  // 7: idata naming pool 0, not advertised yet.
  c.add(write_imm(q, p, 202, va + 4096, 0x1234, idata01));
  // 8: P advertises pool 0 to Q.
  const auto adv = enc(msg::buffer_recv_pool{.header = {.transaction_context = 2}, .pools = pool});
  c.add(send_only(p, q, 302, adv));
  want << c.frames << " message\n";
  // 9: Q's push-push write into pool 0, element 1: idata.
  c.add(write_imm(q, p, 203, va + 4096, 0x1234, idata01));
  want << c.frames << " idata write\n";
  // 10: Q writes into pool 0, element 2, with an immediate naming pool 7, which P never
  // advertised: a write into the pool, but no idata.
  c.add(write_imm(q, p, 204, va + 8192, 0x1234, msg::to_imm(*msg::make_idata({7, 2, 256}))));
  want << c.frames << " write\n";
  // 11: N1 to N2 with the same immediate as frame 9: other hosts.
  c.add(write_imm(n1, n2, 101, 0x5000, 0x77, idata01));
  // 12: P writes to Q naming pool 0: Q advertised nothing (pool 0 is P's).
  c.add(write_imm(p, q, 303, 0x9000, 0x55, idata01));
  // 13: N1's SEND of 64 bytes of its own.
  std::array<std::byte, 64> own{};
  for (std::size_t i = 0; i < own.size(); ++i) own[i] = static_cast<std::byte>(0x40 + i);
  c.add(send_only(n1, n2, 102, own));
  // 14: IPv6 with a VLAN tag, a traffic class and a flow label: WRITE with immediate, foreign.
  auto v6 = write_imm(n1, n2, 103, 0x5000, 0x77, idata01);
  v6.vlan = ib::vlan_tag{.priority = 3, .id = 100};
  v6.v6 = true;
  v6.ip6.src = {0xfd, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3};
  v6.ip6.dst = {0xfd, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4};
  v6.ip6.tclass = 0x6a;
  v6.ip6.flow = 0x5eed1;
  c.add(v6);
  // 15: N1 writes into P's pool 0 (its address and R_Key) with an immediate naming it: P
  // advertised the pool to Q, not to N1.
  c.add(write_imm(n1, p, 104, va + 3 * 4096, 0x1234, msg::to_imm(*msg::make_idata({0, 3, 256}))));
  save(dir + "/foreign.pcap", c.file);
}

}  // namespace

// Every conformance rule's capture (tests/flow/conform_cases.hpp) as DIR/conform-N.pcap, and
// those only a complete capture breaks as DIR/complete-N.pcap; DIR/conform.want:
// "NAME<TAB>frame<TAB>rule" per capture, with "<TAB>complete" for the second kind.
int write_conform(const std::string& dir) {
  std::ofstream want(dir + "/conform.want");
  const auto put = [&](const std::vector<test::conform::rule_case>& cases, const std::string& prefix, const std::string& tail) {
    int n = 0;
    for (const auto& c : cases) {
      const std::string name = prefix + std::to_string(n++) + ".pcap";
      const auto bytes = c.cap.pcap();
      std::ofstream(dir + "/" + name, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
      want << name << "\t" << c.frame << "\t" << flow::info(c.id).name << tail << "\n";
    }
  };
  put(test::conform::rule_cases(), "conform-", "");
  put(test::conform::complete_cases(), "complete-", "\tcomplete");
  return want ? 0 : 1;
}

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "conform" && argc == 3) return write_conform(argv[2]);
  if (mode == "write" && argc == 3) {
    write_roce(std::string{argv[2]} + "/roce.pcap");
    write_foreign(argv[2]);
    write_cells(std::string{argv[2]} + "/cells.pcap");
    write_agree(std::string{argv[2]} + "/cells-agree.pcap", std::string{argv[2]} + "/cells-agree.want");
    return 0;
  }
  if (mode == "expect" && argc == 3) return write_expected(argv[2]);
  if (mode == "pools" && argc == 3) return write_pools(argv[2]);
  if (mode == "experts") {
    for (const auto& e : ws::build().experts) std::cout << e.abbrev << "\n";
    return 0;
  }
  if (mode == "corrupt" && argc == 6) return corrupt(argv[2], std::stoi(argv[3]), argv[4], static_cast<unsigned>(std::stoul(argv[5])));
  std::cerr << "usage: pushwire-ws-captures write DIR | conform DIR | expect FILE.pcap | pools FILE.pcap | corrupt IN N DIR SEED\n";
  return 1;
}
