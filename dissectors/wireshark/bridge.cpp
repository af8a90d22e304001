// The C interface of bridge.h over the pushwire library (built into the plugin).
#include "bridge.h"

#include <algorithm>
#include <array>
#include <string>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <new>
#include <span>
#include <string_view>
#include <type_traits>

#include <pushwire/cell/format.hpp>
#include <pushwire/flow/conform.hpp>
#include <pushwire/flow/observer.hpp>
#include <pushwire/ib/aeth.hpp>
#include <pushwire/ib/print.hpp>
#include <pushwire/ib/roce.hpp>
#include <pushwire/msg/idata.hpp>
#include <pushwire/msg/msg.hpp>

namespace {

using namespace pushwire;

std::span<const std::byte> bytes(const std::uint8_t* p, std::size_t n) {
  return {reinterpret_cast<const std::byte*>(p), n};
}

void set_err(pw_err* out, const wire::error& e) {
  if (!out) return;
  out->code = static_cast<int>(e.code);
  out->name = e.code == wire::errc{} ? "" : wire::to_string(e.code).data();
  out->offset = e.offset;
  const std::size_t n = std::min(e.field.size(), sizeof out->field - 1);
  if (n) std::memcpy(out->field, e.field.data(), n);  // an empty field's data() may be null
  out->field[n] = '\0';
}

int crc_state(wire::crc_status s) {
  return s == wire::crc_status::good ? PW_CRC_GOOD : s == wire::crc_status::bad ? PW_CRC_BAD : PW_CRC_UNCHECKED;
}

// Appends to a fixed buffer, truncating.
struct line {
  char* out;
  std::size_t cap, n = 0;
  void add(std::string_view s) {
    if (cap == 0) return;
    const std::size_t k = std::min(s.size(), cap - 1 - std::min(n, cap - 1));
    if (k) std::memcpy(out + n, s.data(), k);
    n += k;
    out[n] = '\0';
  }
  void num(std::uint64_t v, bool hex) {
    char b[24];
    std::snprintf(b, sizeof b, hex ? "0x%" PRIx64 : "%" PRIu64, v);
    add(b);
  }
};

template <class M>
void summarize(const M& m, line& l) {
  l.add(msg::name(msg::code_of<M>));
  l.add(" txn=");
  l.num(m.header.transaction_context, true);
  wire::for_each_member_index<M>([&](auto i) {
    if constexpr (i.value > 0) {
      using V = std::remove_cvref_t<decltype(wire::member<i.value>(m))>;
      const auto& v = wire::member<i.value>(m);
      if constexpr (requires { typename V::field_type; }) {
        return;  // reserved and constant fields say nothing
      } else if constexpr (requires { requires std::is_same_v<typename V::value_type, bool>; }) {
        if (v.value) {  // a flag: its name when set, nothing when clear
          l.add(" ");
          l.add(wire::member_name<M, i.value>);
        }
      } else {
        l.add(" ");
        l.add(wire::member_name<M, i.value>);
        l.add("=");
        if constexpr (requires { v.size(); }) {
          l.num(v.size(), false);
        } else if constexpr (std::is_enum_v<V>) {
          const std::string_view n = wire::enum_name(v);
          if (n.empty())
            l.num(static_cast<std::uint64_t>(v), true);
          else
            l.add(n);
        } else {
          l.num(static_cast<std::uint64_t>(v), sizeof(V) == 8);
        }
      }
    }
  });
}

}  // namespace

struct pw_observer {
  pushwire::flow::observer o{pushwire::flow::observer_limits{}};
  std::array<pw_pool_state, pushwire::flow::pp_tracker::max_touched> pools{};
};
struct pw_conform {
  std::uint32_t mtu = 0;
  bool complete = false;
  /// Out of memory while judging: its state is not trusted, so it says nothing until the next
  /// reset or configure.
  bool failed = false;
  pushwire::flow::conformance c{pushwire::flow::conform_options{.mtu = mtu, .complete = complete}};
};

namespace {
std::size_t copy_violations(std::span<const pushwire::flow::violation> vs, pw_violation* out, std::size_t max) {
  for (std::size_t i = 0; i < vs.size() && i < max; ++i) {
    const auto& v = vs[i];
    pw_violation& o = out[i];
    o.frame = static_cast<std::uint32_t>(v.frame);
    o.rule = static_cast<int>(v.id);
    o.name = pushwire::flow::info(v.id).name.data();  // the table's names are NUL-terminated literals
    line l{o.text, sizeof o.text};
    l.add(v.conversation);
    l.add(": expected ");
    l.add(v.expected);
    l.add("; seen ");
    l.add(v.seen);
  }
  return vs.size();
}
}  // namespace

extern "C" {

int pw_msg_check(const std::uint8_t* p, std::size_t n, pw_err* err) {
  const wire::error e = msg::dispatch(bytes(p, n), [](const auto&) {});
  set_err(err, e);
  return static_cast<int>(e.code);
}

std::size_t pw_msg_summary(const std::uint8_t* p, std::size_t n, char* out, std::size_t cap) {
  line l{out, cap};
  if (cap) out[0] = '\0';
  (void)msg::dispatch(bytes(p, n), [&](const auto& m) { summarize(m, l); });
  return l.n;
}

std::size_t pw_msg_pools(const std::uint8_t* p, std::size_t n, pw_pool_desc* out, std::size_t max) {
  const auto m = msg::decode<msg::buffer_recv_pool>(bytes(p, n));
  if (!m) return 0;
  for (std::size_t i = 0; i < m->pools.size() && i < max; ++i) {
    const msg::pool_descriptor& d = m->pools[i];
    out[i] = {d.pool_ref, d.element_count, d.element_size, d.memory_handle, d.address};
  }
  return m->pools.size();
}

int pw_msg_cfg_data(const std::uint8_t* p, std::size_t n, std::uint16_t* code, int* reply, std::size_t* offset,
                    std::size_t* size) {
  // Only CfgUtil frames are decoded (again): the heuristic calls this for every message.
  const auto f = msg::peek_function(bytes(p, n));
  if (f != msg::function::cfg_util_request && f != msg::function::cfg_util_reply) return 0;
  int found = 0;
  (void)msg::dispatch(bytes(p, n), [&]<class M>(const M& m) {
    if constexpr (std::is_same_v<M, msg::cfg_util_request> || std::is_same_v<M, msg::cfg_util_reply>) {
      found = 1;
      *code = static_cast<std::uint16_t>(m.request_code);
      *reply = std::is_same_v<M, msg::cfg_util_reply>;
      *offset = wire::fixed_size<M>;
      *size = m.data.size();
    }
  });
  return found;
}

int pw_opcode_send_position(std::uint8_t opcode) {
  const ib::opcode_info* op = ib::find_opcode(opcode);
  if (!op || !op->is(ib::op_class::send)) return -1;
  return static_cast<int>(op->pos);
}

std::size_t pw_msg_max_frame(void) { return wire::default_max_frame; }

const char* pw_function_name(std::uint16_t f) {
  const std::string_view n = msg::name(static_cast<msg::function>(f));
  return n.empty() ? "" : n.data();
}

void pw_idata(std::uint32_t imm, std::uint32_t* pool, std::uint32_t* element, std::uint32_t* nbytes) {
  const msg::idata d = msg::from_imm(imm);
  *pool = d.pool_ref;
  *element = d.element_index;
  *nbytes = d.bytes();
}

int pw_roce_inspect(const std::uint8_t* frame, std::size_t n, pw_roce* r) {
  *r = pw_roce{};
  ib::roce_view v;
  const wire::error e = ib::inspect(bytes(frame, n), v);
  set_err(&r->err, e);
  if (e.code != wire::errc{}) return r->err.code;
  r->icrc_state = crc_state(v.icrc_state);
  r->icrc = v.icrc;
  r->icrc_computed = v.icrc_computed;
  r->icrc_offset = v.icrc_offset;
  r->bth_offset = v.bth_offset;
  auto at = [&](ib::ext x) -> std::size_t {
    const int o = v.op->offset_of(x);
    return o < 0 ? 0 : v.bth_offset + static_cast<std::size_t>(o);
  };
  r->dceth_offset = at(ib::ext::dceth);
  r->dcceth_offset = at(ib::ext::dcceth);
  r->reth_offset = at(ib::ext::reth);
  r->immdt_offset = at(ib::ext::immdt);
  r->aeth_offset = at(ib::ext::aeth);
  r->sinketh_offset = at(ib::ext::sinketh);
  r->payload_offset = static_cast<std::size_t>(v.payload.data() - v.frame.data());
  r->payload_len = v.payload.size();
  const ib::bth b = v.bth();
  r->opcode = b.opcode;
  r->position = static_cast<std::uint8_t>(v.op->pos);
  r->se = b.se;
  r->dc = v.op->tp == ib::transport::dc;
  r->dc_connect = v.dc_connect();
  r->dc_disconnect = v.dc_disconnect();
  r->write = v.op->is(ib::op_class::write);
  r->send = v.op->is(ib::op_class::send);
  r->request = v.op->request;
  r->destqp = b.destqp;
  r->psn = b.psn;
  if (auto i = v.get<ib::ext::immdt>()) r->imm = i->value;
  if (auto x = v.get<ib::ext::reth>()) r->reth_va = x->va, r->reth_rkey = x->r_key, r->reth_len = x->dmalen;
  if (auto a = v.get<ib::ext::aeth>()) {
    r->syndrome = a->syndrome;
    r->msn = a->msn;
    if (auto d = ib::page_fault_delay_us(*a)) r->rnr_nak = 1, r->rnr_delay_us = *d;
  }
  r->cnp = v.op->is(ib::op_class::cnp);
  r->fecn = b.fecn, r->becn = b.becn;
  r->ecn = static_cast<std::uint8_t>(ib::traffic_class_at(v.frame.data() + v.ip_offset, v.v6) & 3);
  r->tos_offset = v.ip_offset + (v.v6 ? 0 : 1);
  r->dscp = static_cast<std::uint8_t>(ib::traffic_class_at(v.frame.data() + v.ip_offset, v.v6) >> 2);
  r->v6 = v.v6;
  if (v.v6) {
    const auto h = v.ipv6();
    std::memcpy(r->src_ip, h.src.data(), 16);
    std::memcpy(r->dst_ip, h.dst.data(), 16);
  } else {
    const auto h = v.ipv4();
    std::memcpy(r->src_ip, h.src.data(), 4);
    std::memcpy(r->dst_ip, h.dst.data(), 4);
  }
  return 0;
}

const char* pw_opcode_name(std::uint8_t opcode, int se) {
  const ib::opcode_info* op = ib::find_opcode(opcode);
  return op ? ib::packet_name(*op, se != 0).data() : "";
}

int pw_cell_decode(const std::uint8_t* frame, std::size_t n, pw_cell* c) {
  *c = pw_cell{};
  cell::cell_view v;
  const wire::error e = cell::inspect(bytes(frame, n), v);
  set_err(&c->err, e);
  if (e.code != wire::errc{}) return c->err.code;
  c->header = v.at.header;
  c->vamh = v.at.vamh;
  c->ack = v.at.ack;
  c->idata = v.at.idata;
  c->data = v.at.data;
  c->packet_crc_at = v.at.packet_crc;
  c->cell_crc_at = v.at.cell_crc;
  c->end = v.at.end();
  c->type = static_cast<std::uint8_t>(v.hdr.type.value);
  c->first = v.hdr.first;
  c->last = v.hdr.last;
  c->ack_req = v.hdr.ack_req;
  c->dst_wqp = v.hdr.dst_wqp;
  c->src_wqp = v.hdr.src_wqp;
  c->psn = v.hdr.psn;
  c->csn = v.hdr.csn;
  c->cell_count = v.hdr.cell_count;
  c->length = v.hdr.length;
  c->delay_us = v.ack ? v.ack->delay_us : 0;
  if (v.rdma) c->va = v.rdma->va, c->mh = v.rdma->mh;
  c->idata_value = v.idata.value_or(0);
  c->packet_crc = v.packet_crc.value_or(0);
  c->crc = v.crc;
  c->crc_computed = v.crc_state == wire::crc_status::unchecked ? v.crc : v.crc_computed;
  c->crc_state = crc_state(v.crc_state);
  const std::string_view tn = wire::enum_name(v.hdr.type.value);
  c->type_name = tn.empty() ? "" : tn.data();
  return 0;
}

int pw_cell_is_page_fault(std::uint8_t t) { return t == static_cast<std::uint8_t>(cell::cell_type::page_fault_delay); }
int pw_cell_is_send(std::uint8_t t) { return t == static_cast<std::uint8_t>(cell::cell_type::send); }

pw_observer* pw_observer_new(void) {
  try {
    return new pw_observer{};
  } catch (...) {
    return nullptr;
  }
}
void pw_observer_reset(pw_observer* o) {
  try {
    o->o.reset();
  } catch (...) {  // out of memory: the observer is left empty as far as it got
  }
}

pw_conform* pw_conform_new(std::uint32_t mtu) {
  try {
    return new pw_conform{mtu};
  } catch (...) {
    return nullptr;
  }
}
int pw_conform_configure(pw_conform* c, std::uint32_t mtu, int complete) {
  // Every path below may allocate; an exception must not unwind into C (out of memory).
  try {
    c->c = flow::conformance(flow::conform_options{.mtu = mtu, .complete = complete != 0});
    c->mtu = mtu;
    c->complete = complete != 0;
    c->failed = false;
    return 0;
  } catch (...) {
    c->failed = true;
    return -1;
  }
}
void pw_conform_reset(pw_conform* c) { (void)pw_conform_configure(c, c->mtu, c->complete); }
void pw_conform_free(pw_conform* c) { delete c; }
std::size_t pw_conform_feed(pw_conform* c, std::uint32_t frame, std::uint64_t time_ns, const std::uint8_t* p, std::size_t n,
                            std::size_t wire_len, pw_violation* out, std::size_t max) {
  if (c->failed) return 0;
  try {
    return copy_violations(c->c.check(frame, time_ns, bytes(p, n), wire_len), out, max);
  } catch (...) {
    c->failed = true;
    return 0;
  }
}
std::size_t pw_conform_finish(pw_conform* c, pw_violation* out, std::size_t max) {
  if (c->failed) return 0;
  try {
    const auto vs = c->c.finish();
    return copy_violations(vs, out, max);
  } catch (...) {
    c->failed = true;
    return 0;
  }
}
void pw_observer_free(pw_observer* o) { delete o; }

}  // extern "C"

namespace {
// pw_observer_feed's work (it may allocate: pw_observer_feed catches).
void observer_feed(pw_observer* o, std::uint32_t frame, std::uint64_t time_ns, const std::uint8_t* p, std::size_t n, pw_note* out) {
  const flow::frame_note f = o->o.observe(frame, time_ns, bytes(p, n));
  if (f.write) {
    out->has_write = 1;
    out->pool_ref = f.write->pool.ref;
    out->pool_frame = static_cast<std::uint32_t>(f.write->pool.frame);
    out->element_size = f.write->pool.element_size;
    out->element = static_cast<std::uint32_t>(f.write->element());
    out->offset = static_cast<std::uint32_t>(f.write->offset());
    out->start_element = static_cast<std::uint32_t>(f.write->start_element());
  }
  out->idata = f.idata;
  for (std::size_t i = 0; i < f.pools.size() && i < o->pools.size(); ++i) {
    const flow::pool_view& v = f.pools[i];
    pw_pool_state& p = o->pools[i];
    p = pw_pool_state{};
    line owner{p.owner, sizeof p.owner}, user{p.user, sizeof p.user};
    owner.add(v.owner.text());
    user.add(v.user.text());
    p.ref = v.ref;
    p.elements = v.elements;
    p.element_size = v.element_size;
    p.state = static_cast<std::uint32_t>(v.state);
    p.free = v.free;
    p.credits = v.credits;
    p.lowest_free = v.lowest_free;
    p.advertised_frame = static_cast<std::uint32_t>(v.advertised_frame);
    p.writes = v.writes;
    p.bytes = v.bytes;
    p.returns = v.returns;
    p.flushes = v.flushes;
    out->n_pools = i + 1;
  }
  if (out->n_pools) out->pools = o->pools.data();
  out->outside = f.outside;
  out->idata_mismatch = f.idata_mismatch;
  out->write_frame = static_cast<std::uint32_t>(f.write_frame);
  if (f.migrated_from) {
    out->migrated_frame = static_cast<std::uint32_t>(f.migrated_from->frame);
    line from{out->migrated_from, sizeof out->migrated_from};
    from.add(f.migrated_from->src.text());
    from.add(" > ");
    from.add(f.migrated_from->dst.text());
  }
  if (!f.message.empty()) {
    out->message = reinterpret_cast<const std::uint8_t*>(f.message.data());
    out->message_len = f.message.size();
    out->message_first_frame = static_cast<std::uint32_t>(f.message_first_frame);
  }
  switch (f.packet_crc) {
    case flow::packet_crc_status::none: out->packet_crc = PW_PACKET_CRC_NONE; break;
    case flow::packet_crc_status::good: out->packet_crc = PW_PACKET_CRC_GOOD; break;
    case flow::packet_crc_status::bad: out->packet_crc = PW_PACKET_CRC_BAD; break;
    case flow::packet_crc_status::unverified: out->packet_crc = PW_PACKET_CRC_UNVERIFIED; break;
  }
  pw_err e{};
  set_err(&e, f.reassembly);
  out->reassembly_code = e.code;
  out->reassembly_name = e.name;
  if (f.kind == flow::frame_kind::cell && f.cell_type == cell::cell_type::send && !f.payload.empty()) {
    out->send_data = reinterpret_cast<const std::uint8_t*>(f.payload.data());
    out->send_data_len = f.payload.size();
  }
  if (f.limit != flow::errc{}) {
    out->limit = 1;
    const std::size_t k = std::min(f.limit_field.size(), sizeof out->limit_field - 1);
    if (k) std::memcpy(out->limit_field, f.limit_field.data(), k);
    out->limit_field[k] = '\0';
  }
}
}  // namespace

extern "C" {

void pw_observer_feed(pw_observer* o, std::uint32_t frame, std::uint64_t time_ns, const std::uint8_t* p, std::size_t n,
                      pw_note* out) {
  *out = pw_note{};
  try {
    observer_feed(o, frame, time_ns, p, n, out);
  } catch (...) {  // out of memory: nothing known of this frame (C frames cannot unwind)
    *out = pw_note{};
  }
}

}  // extern "C"
