// Frames drive the machines: adapters between flow::packet (what the machines speak) and the
// two framings, RoCEv2 (ib::roce_view, ib::roce_packet) and cells (cell::delivered_packet,
// cell::packet_spec). A packet made from a frame carries its payload as a span into it; a frame
// made from a packet takes the packet's payload span and the caller's addresses.
//
// RoCEv2 keeps every transport field. Cells have native types for the split-model driver's own
// packets (spec/cells.md §11): one cell packet is one whole message (ONLY position) between two
// work queue pairs, an ACK, a NAK or a page-fault delay. The mapping, both ways:
//   cell Send [idata]         RC SEND_ONLY [_WITH_IMMEDIATE], ImmDt = idata
//   cell RDMAWrite [idata]    RC RDMA_WRITE_ONLY [_WITH_IMMEDIATE], RETH va / R_Key = VA / MH,
//                             DMA length = the payload's
//   cell ACK                  RC ACKNOWLEDGE, AETH ACK with unlimited credits, MSN 0
//   cell NAK code c           RC ACKNOWLEDGE, AETH NAK c (IBTA's codes 0-3)
//   cell PageFaultDelay d     RC ACKNOWLEDGE, the page-fault ACK of d microseconds
//                             (ib::page_fault_ack), fault_delay_us = d exactly
//   cell Transport            any packet: the data is its BTH, extended headers and payload
//                             (PadCnt 0); the header's WQP and PSN must be the BTH's, and its
//                             response flag set exactly for a response opcode
// src_qp is the cell's source WQP, dest_qp its destination WQP. to_cell() gives the native form
// (or an error), to_cell_form() the native form where there is one, else the Transport form.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include <pushwire/cell/reassembler.hpp>
#include <pushwire/cell/segmenter.hpp>
#include <pushwire/flow/packet.hpp>
#include <pushwire/ib/roce.hpp>

namespace pushwire::flow {

namespace detail {
// Reads the BTH and the extended headers of either RoCE shape into a packet.
template <class Headers>
constexpr packet from_headers(const ib::opcode_info& op, const ib::bth& b, const Headers& get,
                              std::span<const std::byte> payload) {
  packet p{};
  p.opcode = op.id;
  p.psn = b.psn;
  p.ack_req = b.a;
  p.se = b.se;
  p.mig_req = b.m;
  p.dest_qp = b.destqp;
  p.p_key = b.p_key;
  p.fecn = b.fecn;
  p.becn = b.becn;
  p.payload = payload;
  p.length = static_cast<std::uint32_t>(payload.size());
  using ib::ext;
  if (const auto h = get.template operator()<ext::rdeth>()) p.eecnxt = h->eecnxt;
  if (const auto h = get.template operator()<ext::deth>()) p.q_key = h->q_key, p.src_qp = h->srcqp;
  if (const auto h = get.template operator()<ext::dceth>()) p.dc_key = h->access_key;
  if (const auto h = get.template operator()<ext::feth>()) p.feth = *h;
  if (const auto h = get.template operator()<ext::reth>()) p.va = h->va, p.rkey = h->r_key, p.dmalen = h->dmalen;
  if (const auto h = get.template operator()<ext::atomiceth>())
    p.va = h->va, p.rkey = h->r_key, p.swap = h->swapdt, p.compare = h->cmpdt;
  if (const auto h = get.template operator()<ext::aeth>()) p.aeth = *h;
  if (const auto h = get.template operator()<ext::atomicacketh>()) p.orig = h->origremdt;
  if (const auto h = get.template operator()<ext::immdt>()) p.imm = h->value;
  if (const auto h = get.template operator()<ext::ieth>()) p.ieth = h->value;
  if (const auto h = get.template operator()<ext::dcceth>()) p.dct = h->dct, p.dci = h->dci;
  if (const auto h = get.template operator()<ext::sinketh>()) p.sink_va = h->va, p.sink_rkey = h->r_key;
  return p;
}
/// A cell packet's WQPs, PSN and AckReq from p, with no VA/MH, idata or ACK info yet.
constexpr void address_cell(const packet& p, cell::packet_spec& s) {
  s.dst_wqp = p.dest_qp;
  s.src_wqp = p.src_qp;
  s.psn = p.psn;
  s.ack_req = p.ack_req;
  s.response = false;
  s.rdma.reset();
  s.idata.reset();
  s.ack.reset();
}
}  // namespace detail

/// The packet of a validated RoCEv2 frame (the fast path: only the headers the opcode has are
/// read). The payload views the frame.
constexpr packet from_roce(const ib::roce_view& v) {
  const auto get = [&]<ib::ext E>() { return v.get<E>(); };
  return detail::from_headers(*v.op, v.bth(), get, v.payload);
}

/// The packet of a decoded RoCEv2 frame.
constexpr packet from_roce(const ib::roce_packet& f) {
  const auto get = [&]<ib::ext E>() { return f.ext.get<E>(); };
  return detail::from_headers(*ib::find_opcode(f.bth.opcode, f.rd), f.bth, get, f.payload);
}

/// The BTH of `p` (PadCnt and TVer left to the builder). (p.known() must hold.)
constexpr ib::bth bth_of(const packet& p) {
  return {.opcode = p.info().code, .se = p.se, .m = p.mig_req, .p_key = p.p_key, .fecn = p.fecn, .becn = p.becn, .destqp = p.dest_qp,
          .a = p.ack_req, .psn = p.psn};
}

/// Sets in `h` every extended header p's opcode names, filled from `p` (a CNP's 16 reserved bytes
/// are zero), and clears the others. (p.known() must hold.)
constexpr void ext_of(const packet& p, ib::ext_headers& h) {
  h.clear();
  for (ib::ext e : p.info().headers()) {
    switch (e) {
      case ib::ext::rdeth: h.set<ib::ext::rdeth>({.eecnxt = p.eecnxt}); break;
      case ib::ext::deth: h.set<ib::ext::deth>({.q_key = p.q_key, .srcqp = p.src_qp}); break;
      case ib::ext::dceth: h.set<ib::ext::dceth>({.access_key = p.dc_key}); break;
      case ib::ext::feth: h.set<ib::ext::feth>(p.feth); break;
      case ib::ext::reth: h.set<ib::ext::reth>({.va = p.va, .r_key = p.rkey, .dmalen = p.dmalen}); break;
      case ib::ext::atomiceth: h.set<ib::ext::atomiceth>({.va = p.va, .r_key = p.rkey, .swapdt = p.swap, .cmpdt = p.compare}); break;
      case ib::ext::aeth: h.set<ib::ext::aeth>(p.aeth); break;
      case ib::ext::atomicacketh: h.set<ib::ext::atomicacketh>({.origremdt = p.orig}); break;
      case ib::ext::immdt: h.set<ib::ext::immdt>({.value = p.imm}); break;
      case ib::ext::ieth: h.set<ib::ext::ieth>({.value = p.ieth}); break;
      case ib::ext::dcceth: h.set<ib::ext::dcceth>({.dct = p.dct, .dci = p.dci}); break;
      case ib::ext::cnp_pad: h.set<ib::ext::cnp_pad>({}); break;
      case ib::ext::sinketh: h.set<ib::ext::sinketh>({.va = p.sink_va, .r_key = p.sink_rkey}); break;
    }
  }
}

/// The RoCEv2 frame of `p`: `base` gives the addresses, VLAN, IP and UDP fields (its BTH,
/// extended headers and payload are replaced): bth_of(p), ext_of(p) and the payload p.payload.
/// ib::build() writes it. (p.known() must hold.)
constexpr ib::roce_packet to_roce(const packet& p, ib::roce_packet base = {}) {
  base.rd = p.info().tp == ib::transport::rd ? ib::rd_class::ibta_rd : ib::rd_class::dc;
  base.bth = bth_of(p);
  ext_of(p, base.ext);
  base.payload = p.payload;
  return base;
}

/// The packet of a reassembled cell packet (the mapping at the top of this header). The payload
/// views the reassembler's or the caller's storage, as d.payload does. Errors (Transport only):
/// the transport packet's (ib::inspect_transport, offsets within the data), and invalid_field
/// ("dst_wqp", "psn") when the cell header disagrees with the BTH.
constexpr wire::result<packet> from_cell(const cell::delivered_packet& d, const wire::codec_options& opt = {}) {
  using ib::opcode;
  if (d.type == cell::cell_type::transport) {
    ib::transport_view t{};
    if (auto e = ib::inspect_transport(d.payload, t, opt); e.code != wire::errc{}) return e;
    const ib::bth b = t.bth();
    if (b.destqp != d.dst_wqp) return wire::error{wire::errc::invalid_field, 0, "dst_wqp"};
    if (b.psn != d.key.psn) return wire::error{wire::errc::invalid_field, 0, "psn"};
    if (t.op->request == d.key.response) return wire::error{wire::errc::invalid_field, 0, "response"};
    const auto get = [&]<ib::ext E>() { return t.get<E>(); };
    packet p = detail::from_headers(*t.op, b, get, t.payload);
    p.src_qp = p.info().has(ib::ext::deth) ? p.src_qp : d.key.src_wqp;
    return p;
  }
  packet p{};
  p.psn = d.key.psn;
  p.dest_qp = d.dst_wqp;
  p.src_qp = d.key.src_wqp;
  p.ack_req = d.ack_req;
  p.payload = d.payload;
  p.length = static_cast<std::uint32_t>(d.payload.size());
  p.imm = d.idata.value_or(0);
  switch (d.type) {
    case cell::cell_type::send:
      p.opcode = d.idata ? opcode::rc_send_only_with_immediate : opcode::rc_send_only;
      break;
    case cell::cell_type::rdma_write:
      p.opcode = d.idata ? opcode::rc_rdma_write_only_with_immediate : opcode::rc_rdma_write_only;
      if (d.rdma) p.va = d.rdma->va, p.rkey = d.rdma->mh;
      p.dmalen = p.length;
      break;
    case cell::cell_type::ack:
      p.opcode = opcode::rc_acknowledge;
      p.aeth = {.syndrome = ib::syndrome::ack(ib::syndrome::unlimited_credits).raw, .msn = 0};
      break;
    case cell::cell_type::nak:
      p.opcode = opcode::rc_acknowledge;
      p.aeth = {.syndrome = ib::syndrome::nak(static_cast<ib::nak_code>(d.ack ? d.ack->code : 0)).raw, .msn = 0};
      break;
    case cell::cell_type::page_fault_delay:
      p.opcode = opcode::rc_acknowledge;
      p.fault_delay_us = d.ack ? d.ack->delay_us : 0;
      p.aeth = ib::page_fault_ack(0, p.fault_delay_us);
      break;
    case cell::cell_type::transport: break;  // handled above
  }
  return p;
}

/// The cell packet of `p` for cell::segmenter (with p.payload as its payload): `base` gives the
/// MACs and VLAN. Errors (invalid_field, "opcode"): a packet with no cell form (not ONLY, not on
/// RC, READ, atomics, FLUSH, invalidate, or an ACKNOWLEDGE whose AETH is none of ACK, NAK 0-3 or
/// an RNR NAK; an RNR NAK becomes a page-fault delay of p.fault_delay_us, or of its timer's
/// microseconds when that is 0).
constexpr wire::result<cell::packet_spec> to_cell(const packet& p, cell::packet_spec base = {}) {
  using ib::op_class;
  const wire::error none{wire::errc::invalid_field, 0, "opcode"};
  if (!p.known()) return none;
  const ib::opcode_info& op = p.info();
  if (op.tp != ib::transport::rc || op.pos != ib::position::only) return none;
  detail::address_cell(p, base);
  if (op.any(op_class::send | op_class::write) && !op.is(op_class::invalidate)) {
    base.type = op.is(op_class::send) ? cell::cell_type::send : cell::cell_type::rdma_write;
    if (op.is(op_class::write)) base.rdma = cell::vamh{.va = p.va, .mh = p.rkey};
    if (op.is(op_class::immediate)) base.idata = p.imm;
    return base;
  }
  if (op.op != ib::operation::acknowledge) return none;
  const ib::syndrome s{p.aeth.syndrome};
  switch (s.kind()) {
    case ib::aeth_kind::ack:
      base.type = cell::cell_type::ack;
      base.ack = cell::ack_info{};
      return base;
    case ib::aeth_kind::nak:
      if (s.value() > static_cast<std::uint8_t>(cell::nak_code::remote_operational_error)) return none;
      base.type = cell::cell_type::nak;
      base.ack = cell::ack_info{.code = s.value()};
      return base;
    case ib::aeth_kind::rnr_nak:
      base.type = cell::cell_type::page_fault_delay;
      base.ack = cell::ack_info{.delay_us = p.fault_delay_us ? p.fault_delay_us : ib::rnr_to_us(s.value())};
      return base;
    default: return none;
  }
}

/// A packet's cell form: the packet description, and the bytes its data starts with before the
/// packet's payload (the Transport form's BTH and extended headers; none for a native type).
struct cell_form {
  cell::packet_spec spec{};
  std::array<std::byte, 64> head{};
  std::size_t head_len = 0;
  constexpr std::span<const std::byte> header_bytes() const { return std::span<const std::byte>(head).first(head_len); }
};

/// The native cell form of p when it has one (to_cell), else its Transport form: any known
/// packet. Errors: invalid_field ("opcode") for an unknown opcode; ib::encode_headers' for a
/// field wider than its header's.
constexpr wire::result<cell_form> to_cell_form(const packet& p, cell::packet_spec base = {}) {
  cell_form f{};
  if (auto native = to_cell(p, base)) {
    f.spec = *native;
    return f;
  }
  if (!p.known()) return wire::error{wire::errc::invalid_field, 0, "opcode"};
  packet q = p;
  q.payload = {};
  const ib::roce_packet r = to_roce(q);  // the same headers RoCEv2 carries
  ib::bth b = r.bth;
  b.padcnt = 0;
  if (auto e = ib::encode_headers(b, r.ext, p.info(), f.head); e.code != wire::errc{}) return e;
  f.head_len = p.info().header_len;
  detail::address_cell(p, base);
  base.type = cell::cell_type::transport;
  base.response = !p.info().request;
  f.spec = base;
  return f;
}

}  // namespace pushwire::flow
