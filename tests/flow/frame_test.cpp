// Frames drive the machines (flow/frame.hpp): RoCEv2 frames and cell packets to flow::packet and
// back. Expected values are written out by hand from the mapping in spec/cells.md §11 and the
// header layouts, not computed by the adapters.
#include <array>
#include <optional>
#include <vector>

#include <pushwire/cell/reassembler.hpp>
#include <pushwire/cell/segmenter.hpp>
#include <pushwire/flow/frame.hpp>
#include <pushwire/ib/roce.hpp>

#include "../support/test_support.hpp"
#include "packet_print.hpp"

using namespace pushwire;
using flow::packet;
using ib::opcode;

namespace {

// Every extended header filled with a distinct value, for any opcode.
packet full_packet(opcode op, std::span<const std::byte> payload) {
  packet p{.opcode = op, .psn = 0xABCDEF, .ack_req = true, .se = true, .dest_qp = 0x123456, .p_key = 0x8001,
           .fecn = true, .becn = false};
  const ib::opcode_info& o = ib::info(op);
  if (o.payload) p.payload = payload, p.length = static_cast<std::uint32_t>(payload.size());
  for (ib::ext e : o.headers()) {
    switch (e) {
      case ib::ext::rdeth: p.eecnxt = 0x0DC1; break;
      case ib::ext::deth: p.q_key = 0x80010000, p.src_qp = 0x654321; break;
      case ib::ext::dceth: p.dc_key = 0x0123456789ABCDEF; break;
      case ib::ext::feth: p.feth = {.sel = 1, .plt = 2}; break;
      case ib::ext::reth: p.va = 0x7F0000001000, p.rkey = 0xCAFE, p.dmalen = 4096; break;
      case ib::ext::atomiceth: p.va = 0x2000, p.rkey = 0x55, p.swap = 10, p.compare = 11; break;
      case ib::ext::aeth: p.aeth = {.syndrome = 0x1F, .msn = 0x42}; break;
      case ib::ext::atomicacketh: p.orig = 0xDEAD; break;
      case ib::ext::immdt: p.imm = 0x07050100; break;
      case ib::ext::ieth: p.ieth = 0x0A0B0C0D; break;
      case ib::ext::dcceth: p.dct = 0xABC, p.dci = 0xDEF; break;
      case ib::ext::cnp_pad: break;
      case ib::ext::sinketh: p.sink_va = 0x5000, p.sink_rkey = 0x77; break;
    }
  }
  return p;
}

}  // namespace

TEST_CASE("frame adapters: every opcode, packet -> RoCEv2 frame -> packet (view and decoded)", "[flow][frame]") {
  const auto five = test::hex<"0102030405">();
  const auto eight = test::hex<"0102030405060708">();  // ATOMIC_WRITE's fixed size
  for (const ib::opcode_info& o : ib::opcodes) {
    INFO(o.name);
    const packet p = full_packet(o.id, o.fixed_payload ? std::span<const std::byte>(eight) : std::span<const std::byte>(five));
    const ib::roce_packet r = flow::to_roce(p);
    std::vector<std::byte> frame(*ib::frame_size(r));
    REQUIRE(ib::build(r, frame).has_value());
    const wire::codec_options opt{.crc = wire::crc_check::require, .rd = r.rd};
    const auto back = ib::decode(frame, opt);
    REQUIRE(back.has_value());
    CHECK(flow::from_roce(*back) == p);
    ib::roce_view v;
    REQUIRE(ib::inspect(frame, v, opt).code == wire::errc{});
    CHECK(flow::from_roce(v) == p);
    CHECK(v.payload.data() == flow::from_roce(v).payload.data());  // a view into the frame, not a copy
  }
}

TEST_CASE("frame adapters: the headers to_roce fills, byte by byte", "[flow][frame]") {
  // FLUSH: BTH, then FETH with the packet's selectivity and placement type.
  const auto none = std::span<const std::byte>{};
  packet f = full_packet(opcode::rc_flush, none);
  const auto r = flow::to_roce(f);
  REQUIRE(r.ext.get<ib::ext::feth>().has_value());
  CHECK(r.ext.get<ib::ext::feth>()->sel == 1u);
  CHECK(r.ext.get<ib::ext::feth>()->plt == 2u);
  CHECK(r.bth.p_key == 0x8001);
  CHECK(r.bth.opcode == ib::code(opcode::rc_flush));
  // CNP: the 16 reserved bytes are present and zero; P_Key defaults to 0xFFFF.
  packet c{.opcode = opcode::cnp, .dest_qp = 0x118, .becn = true};
  CHECK(c.p_key == 0xFFFF);
  const auto cr = flow::to_roce(c);
  std::vector<std::byte> frame(*ib::frame_size(cr));
  REQUIRE(ib::build(cr, frame).has_value());
  // 14 Ethernet + 20 IPv4 + 8 UDP + 12 BTH + 16 reserved + 4 ICRC.
  REQUIRE(frame.size() == 74);
  CHECK(std::to_integer<std::uint8_t>(frame[42]) == ib::code(opcode::cnp));
  CHECK(frame[44] == std::byte{0xFF});
  CHECK(frame[45] == std::byte{0xFF});
  for (std::size_t i = 54; i < 70; ++i) CHECK(frame[i] == std::byte{0});
}

namespace {
std::vector<std::byte> segment_and_reassemble(const cell::packet_spec& s, std::span<const std::byte> payload,
                                              cell::reassembler& r, std::optional<cell::delivered_packet>& out) {
  auto seg = cell::segmenter::make(s, payload, 4);  // 4-byte cells: several per packet
  REQUIRE(seg.has_value());
  std::vector<std::byte> buf;
  while (!seg->done()) {
    buf.assign(seg->next_size(), std::byte{});
    REQUIRE(seg->next(buf).has_value());
    const auto res = r.push(buf, 0);
    INFO(wire::to_string(res.error.code) << " at " << res.error.field);
    REQUIRE(res.status != cell::push_status::rejected);
    if (res.packet) out = *res.packet;
  }
  return buf;
}
}  // namespace

TEST_CASE("frame adapters: cell packets -> flow::packet, as spec/cells.md §11 maps them, and back", "[flow][frame]") {
  const auto data = test::hex<"00112233445566778899">();
  struct row {
    cell::packet_spec spec;
    bool payload;
    packet want;
  };
  const cell::packet_spec base{.dst = {2, 0, 0, 0, 0, 2}, .src = {2, 0, 0, 0, 0, 1}, .dst_wqp = 0x22, .src_wqp = 0x11,
                               .psn = 77, .ack_req = true};
  auto with = [&](cell::cell_type t, auto f) {
    cell::packet_spec s = base;
    s.type = t;
    f(s);
    return s;
  };
  const std::vector<row> rows{
      {with(cell::cell_type::send, [](auto&) {}), true,
       {.opcode = opcode::rc_send_only, .psn = 77, .ack_req = true, .dest_qp = 0x22, .length = 10, .src_qp = 0x11}},
      {with(cell::cell_type::send, [](auto& s) { s.idata = 0x07050100; }), true,
       {.opcode = opcode::rc_send_only_with_immediate, .psn = 77, .ack_req = true, .dest_qp = 0x22, .length = 10,
        .imm = 0x07050100, .src_qp = 0x11}},
      {with(cell::cell_type::rdma_write, [](auto& s) { s.rdma = cell::vamh{.va = 0x4000, .mh = 0x77}; }), true,
       {.opcode = opcode::rc_rdma_write_only, .psn = 77, .ack_req = true, .dest_qp = 0x22, .length = 10, .va = 0x4000,
        .rkey = 0x77, .dmalen = 10, .src_qp = 0x11}},
      {with(cell::cell_type::rdma_write, [](auto& s) { s.rdma = cell::vamh{.va = 0x4000, .mh = 0x77}, s.idata = 9; }), true,
       {.opcode = opcode::rc_rdma_write_only_with_immediate, .psn = 77, .ack_req = true, .dest_qp = 0x22, .length = 10,
        .va = 0x4000, .rkey = 0x77, .dmalen = 10, .imm = 9, .src_qp = 0x11}},
      {with(cell::cell_type::ack, [](auto& s) { s.ack = cell::ack_info{}; }), false,
       {.opcode = opcode::rc_acknowledge, .psn = 77, .ack_req = true, .dest_qp = 0x22, .aeth = {.syndrome = 0x1F, .msn = 0},
        .src_qp = 0x11}},
      {with(cell::cell_type::nak, [](auto& s) { s.ack = cell::ack_info{.code = 2}; }), false,
       {.opcode = opcode::rc_acknowledge, .psn = 77, .ack_req = true, .dest_qp = 0x22, .aeth = {.syndrome = 0x62, .msn = 0},
        .src_qp = 0x11}},
      // 5000 us: the page-fault ACK's RNR timer code is 18 (5.12 ms, the smallest >= 5 ms): 0x20 | 18.
      {with(cell::cell_type::page_fault_delay, [](auto& s) { s.ack = cell::ack_info{.delay_us = 5000}; }), false,
       {.opcode = opcode::rc_acknowledge, .psn = 77, .ack_req = true, .dest_qp = 0x22, .aeth = {.syndrome = 0x32, .msn = 0},
        .fault_delay_us = 5000, .src_qp = 0x11}},
  };
  for (const row& x : rows) {
    INFO(ib::name(x.want.opcode));
    cell::reassembler r{{.max_cell_payload = 4}};  // each row the same PSN: a fresh receiver
    std::optional<cell::delivered_packet> d;
    const auto pl = x.payload ? std::span<const std::byte>(data) : std::span<const std::byte>{};
    (void)segment_and_reassemble(x.spec, pl, r, d);
    REQUIRE(d.has_value());
    const auto from = flow::from_cell(*d);
    REQUIRE(from.has_value());
    packet got = *from;
    CHECK(std::ranges::equal(got.payload, pl));
    packet want = x.want;
    want.payload = pl;
    CHECK(got == want);
    // And back: the same cell packet spec.
    const auto s = flow::to_cell(got, cell::packet_spec{.dst = base.dst, .src = base.src});
    REQUIRE(s.has_value());
    CHECK(s->type == x.spec.type);
    CHECK((s->dst_wqp == x.spec.dst_wqp && s->src_wqp == x.spec.src_wqp && s->psn == x.spec.psn && s->ack_req));
    CHECK(s->rdma == x.spec.rdma);
    CHECK(s->idata == x.spec.idata);
    CHECK(s->ack == x.spec.ack);
  }
}

TEST_CASE("frame adapters: to_cell refuses what cells cannot carry", "[flow][frame]") {
  const auto none = std::span<const std::byte>{};
  for (opcode op : {opcode::rc_send_first, opcode::rc_rdma_write_middle, opcode::uc_send_only, opcode::rc_rdma_read_request,
                    opcode::rc_fetch_add, opcode::rc_flush, opcode::rc_send_only_with_invalidate, opcode::dc_send_only,
                    opcode::rc_rdma_read_response_only, opcode::cnp}) {
    INFO(ib::name(op));
    const auto r = flow::to_cell(full_packet(op, none));
    CHECK(r.error() == wire::error{wire::errc::invalid_field, 0, "opcode"});
  }
  packet nak{.opcode = opcode::rc_acknowledge, .aeth = {.syndrome = 0x64}};  // NAK 4: invalid RD request
  CHECK(flow::to_cell(nak).code() == wire::errc::invalid_field);
  packet unknown{.opcode = static_cast<opcode>(0x18)};
  CHECK(flow::to_cell(unknown).code() == wire::errc::invalid_field);
  // An RNR NAK without an exact delay: its timer's microseconds (code 13: 0.96 ms, IBTA table 45).
  packet rnr{.opcode = opcode::rc_acknowledge, .aeth = {.syndrome = 0x2D}};
  const auto c = flow::to_cell(rnr);
  REQUIRE(c.has_value());
  CHECK(c->type == cell::cell_type::page_fault_delay);
  CHECK(c->ack->delay_us == 960u);
}

TEST_CASE("frame adapters: every opcode in a Transport cell packet and back, the native types where they exist", "[flow][frame]") {
  const auto five = test::hex<"0102030405">();
  const auto eight = test::hex<"0102030405060708">();
  const cell::mac_address dst{2, 0, 0, 0, 0, 2}, src{2, 0, 0, 0, 0, 1};
  int native = 0, transport = 0;
  for (const ib::opcode_info& o : ib::opcodes) {
    INFO(o.name);
    packet p = full_packet(o.id, o.fixed_payload ? std::span<const std::byte>(eight) : std::span<const std::byte>(five));
    if (!o.has(ib::ext::deth)) p.src_qp = 0x22;  // the cell header's source WQP
    p.dest_qp &= 0xFFFFFF;
    const auto f = flow::to_cell_form(p, cell::packet_spec{.dst = dst, .src = src});
    REQUIRE(f.has_value());
    const bool is_native = flow::to_cell(p).has_value();
    CHECK(f->spec.type == (is_native ? flow::to_cell(p)->type : cell::cell_type::transport));
    (is_native ? native : transport) += 1;
    if (is_native) continue;  // the native rows are the table above
    // The data is the BTH and extended headers (header_len bytes, PadCnt 0), then the payload.
    CHECK(f->head_len == o.header_len);
    CHECK(std::to_integer<std::uint8_t>(f->head[0]) == o.code);
    CHECK((std::to_integer<std::uint8_t>(f->head[1]) & 0x30) == 0);  // PadCnt
    const std::array<std::span<const std::byte>, 2> pieces{f->header_bytes(), p.payload};
    cell::reassembler r{{.max_cell_payload = 16}};
    auto seg = cell::segmenter::make(f->spec, std::span<const std::span<const std::byte>>(pieces), 16);
    REQUIRE(seg.has_value());
    std::optional<packet> got;
    while (!seg->done()) {
      std::vector<std::byte> cell(seg->next_size());
      REQUIRE(seg->next(cell).has_value());
      const auto res = r.push(cell, 0);
      REQUIRE(res.status != cell::push_status::rejected);
      if (res.status == cell::push_status::delivered) {
        const auto back = flow::from_cell(*res.packet, {.rd = o.tp == ib::transport::rd ? ib::rd_class::ibta_rd : ib::rd_class::dc});
        REQUIRE(back.has_value());
        got = *back;
      }
    }
    REQUIRE(got.has_value());
    CHECK(*got == p);
  }
  CHECK(native == 5);  // RC SEND_ONLY [_WITH_IMMEDIATE], RDMA_WRITE_ONLY [_WITH_IMMEDIATE], ACKNOWLEDGE (an ACK)
  CHECK(transport == 87 - native);
  // A Transport packet whose BTH disagrees with the cell header is refused.
  packet p = full_packet(opcode::rc_rdma_read_request, {});
  p.dest_qp = 0x11;
  auto f = *flow::to_cell_form(p);
  f.spec.psn = 1;  // the BTH says 0xABCDEF
  cell::reassembler r{{}};
  auto seg = cell::segmenter::make(f.spec, f.header_bytes());
  std::vector<std::byte> cell(seg->next_size());
  REQUIRE(seg->next(cell).has_value());
  const auto res = r.push(cell, 0);
  REQUIRE(res.status == cell::push_status::delivered);
  CHECK(flow::from_cell(*res.packet).error() == wire::error{wire::errc::invalid_field, 0, "psn"});
}
