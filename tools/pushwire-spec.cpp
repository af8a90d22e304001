// pushwire-spec: regenerates (--update) or verifies (--check) the generated regions of spec/*.md
// from the C++ descriptions. Prose between regions is left alone.
//
//   pushwire-spec --check spec/push-push.md     exit 1 and a diff hint when the file is stale
//   pushwire-spec --update spec/push-push.md    rewrite the regions in place
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <pushwire/cell/cell.hpp>
#include <pushwire/flow/flow.hpp>
#include <pushwire/ib/aeth.hpp>
#include <pushwire/ib/encap.hpp>
#include <pushwire/ib/keys.hpp>
#include <pushwire/ib/lan.hpp>
#include <pushwire/ib/opcode.hpp>
#include <pushwire/msg/msg.hpp>
#include <pushwire/pp/cm.hpp>
#include <pushwire/pp/endpoint.hpp>
#include <pushwire/pp/lan.hpp>
#include <pushwire/rnic/attach.hpp>
#include <pushwire/rnic/eswitch.hpp>
#include <pushwire/rnic/function.hpp>
#include <pushwire/rnic/migrate.hpp>
#include <pushwire/rnic/qp.hpp>
#include <pushwire/wire/crc.hpp>
#include <pushwire/wire/pcap.hpp>

#include "specgen.hpp"
#include "verb_errors.hpp"
#include "model.hpp"

namespace {

using namespace pushwire;
using specgen::field_info;
using wire::field_kind;

template <class T>
bool has_checks() {
  bool any = wire::detail::has_wire_check<T>;
  wire::for_each_member_index<T>([&](auto i) {
    using M = wire::member_type<T, i.value>;
    if constexpr (requires { typename M::element_type; }) {
      using E = typename M::element_type;
      if constexpr (wire::described<E>) any = any || wire::detail::has_wire_check<E>;
    }
  });
  return any;
}

template <class T>
std::string tail_label() {
  for (const field_info& f : wire::fields<T>) {
    if (!f.variable()) continue;
    std::string n{f.name};
    std::string what = f.kind == field_kind::bytes ? "bytes" : std::to_string(f.size) + "-byte entries";
    return f.link.empty() ? n + ": " + what + " to the end of the frame"
                          : n + ": " + std::string{f.link} + " x " + what;
  }
  return {};
}

std::string render_rows(std::span<const field_info> rows, std::size_t fixed, const std::string& tail) {
  std::string s = "```text\n" +
                  specgen::diagram(rows, fixed, tail.empty() ? std::nullopt : std::optional{tail}) +
                  "```\n\n" + specgen::field_table(rows);
  for (const field_info& f : rows) {
    if (f.kind != field_kind::array || f.element.empty()) continue;
    s += "\nEach entry of `" + std::string{f.name} + "` (" + std::to_string(f.size) + " bytes):\n\n";
    s += "```text\n" + specgen::diagram(f.element, f.size) + "```\n\n" + specgen::field_table(f.element);
  }
  return s;
}

template <class T>
std::string render_struct() {
  return render_rows(wire::fields<T>, wire::fixed_size<T>, tail_label<T>());
}

// The header of no particular message: `function` is any code of the function table.
std::string render_header() {
  using H = msg::header<msg::function::send_data>;
  std::vector<field_info> rows(wire::fields<H>.begin(), wire::fields<H>.end());
  rows[0].kind = field_kind::enumeration;
  rows[0].names = {};
  return render_rows(rows, wire::fixed_size<H>, {});
}

template <msg::message_type M>
std::string render_message() {
  std::string s = "Function code " + specgen::hex(static_cast<unsigned>(msg::code_of<M>), 4) +
                  ", fixed part " + std::to_string(wire::fixed_size<M>) + " bytes" +
                  (wire::fixed_size_struct<M> ? " (the whole message)" : ", then " + tail_label<M>()) +
                  ".\n\n";
  s += render_struct<M>();
  std::string errs = "too_large, truncated, unknown_function, wrong_function (typed decode only), unsupported_version";
  bool counted = false;
  for (const field_info& f : wire::fields<M>) {
    if (f.kind == field_kind::count) {
      counted = true;
      if (f.value) errs += ", zero_count (`" + std::string{f.name} + "` = 0)";
    }
    if (f.kind == field_kind::array && f.link.empty())
      errs += ", trailing_bytes (a partial entry)" + std::string{f.value ? ", zero_count (no entries)" : ""};
    if (f.kind == field_kind::array && !f.link.empty())
      errs += ", count_mismatch (whole entries, but not `" + std::string{f.link} + "` of them)";
    if (f.kind == field_kind::reserved) errs += ", reserved_nonzero (`" + std::string{f.name} + "`)";
  }
  if (counted) errs += ", truncated / trailing_bytes (the frame ends inside an entry or byte string)";
  if (wire::fixed_size_struct<M>) errs += ", trailing_bytes";
  if (has_checks<M>()) errs += ", invalid_field (see the checks above)";
  s += "\nErrors (derived from the layout): " + errs + ".\n";
  return s;
}

// "`up` u32, `speed_mbps` u32 (8 bytes)" or "none (0 bytes)".
template <class T>
std::string summary() {
  std::string s;
  for (const field_info& f : wire::fields<T>)
    s += (s.empty() ? "`" : ", `") + std::string{f.name} + "` " + specgen::type_name(f);
  return (s.empty() ? std::string{"none"} : s) + " (" + std::to_string(wire::fixed_size<T>) + " bytes)";
}

// One row per standard request code: its request and reply data (cfg::data_types).
std::string render_cfg_data() {
  std::string s = "| Request | Code | Request data | Reply data |\n|---|---:|---|---|\n";
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    ((s += [] {
       constexpr auto code = static_cast<msg::cfg::request_code>(msg::cfg::request_code_names[I].value);
       return "| " + std::string{msg::cfg::request_code_names[I].name} + " | " +
              specgen::hex(msg::cfg::request_code_names[I].value, 4) + " | " +
              summary<msg::cfg::request_t<code>>() + " | " + summary<msg::cfg::reply_t<code>>() + " |\n";
     }()),
     ...);
  }(std::make_index_sequence<msg::cfg::request_code_names.size()>{});
  return s;
}

// The opcode table, for one reading of 0x40-0x5F.
std::string render_opcodes(ib::rd_class rd) {
  std::string s =
      "| Opcode | Name | Class | Headers after the BTH | Payload | Position | Header bytes |\n"
      "|---:|---|---|---|---|---|---:|\n";
  using ib::op_class;
  const op_class shown_elsewhere = op_class::first | op_class::middle | op_class::last | op_class::only | op_class::payload;
  for (int c = 0; c < 256; ++c) {
    const ib::opcode_info* o = ib::find_opcode(static_cast<std::uint8_t>(c), rd);
    if (!o) continue;
    std::string chain, cls;
    // Appends one piece at a time: g++-12 -O3 warns falsely (-Wrestrict) on "literal" + string.
    for (ib::ext e : o->headers()) {
      if (!chain.empty()) chain += ", ";
      chain += ib::name(e);
    }
    for (const wire::named_value& f : wire_enum_names(op_class{}))
      if (const auto flag = static_cast<op_class>(f.value); o->is(flag) && (flag & shown_elsewhere) == op_class::none) {
        if (!cls.empty()) cls += ' ';
        cls += f.name;
      }
    s += "| " + specgen::hex(o->code, 2) + " | " + std::string{o->name} + " | " + cls + " | " + (chain.empty() ? "—" : chain) +
         " | " + (o->payload ? (o->fixed_payload ? std::to_string(o->fixed_payload) + " bytes" : std::string{"yes"}) : std::string{"no"}) +
         " | " + std::string{ib::name(o->pos)} + " | " + std::to_string(o->header_len) + " |\n";
  }
  return s;
}

// spec/roce.md §13: the pcapng block types the capture reader knows, and its limits.
std::string render_capture() {
  namespace pcap = wire::pcap;
  std::string s = "| Block type | Name | Read as |\n|---|---|---|\n";
  for (const std::uint32_t t : {pcap::ng::block_shb, pcap::ng::block_idb, pcap::ng::block_opb, pcap::ng::block_spb,
                                pcap::ng::block_nrb, pcap::ng::block_isb, pcap::ng::block_epb, 0x00000007u, 0x00000008u,
                                0x00000009u, 0x0000000Au, 0x00000BADu, 0x40000BADu}) {
    char hex[16];
    std::snprintf(hex, sizeof hex, "0x%08X", t);
    const bool packet = t == pcap::ng::block_epb || t == pcap::ng::block_opb || t == pcap::ng::block_spb;
    s += std::string{"| `"} + hex + "` | " + std::string{pcap::ng::block_type_name(t)} + " | " +
         (t == pcap::ng::block_shb   ? "a new section (byte order, version, length)"
          : t == pcap::ng::block_idb ? "the section's next interface (link type, snaplen, `if_tsresol`, `if_tsoffset`)"
          : packet                   ? "a record"
                                     : "skipped, counted") +
         " |\n";
  }
  s += "| any other | unknown | skipped, counted |\n\n| Limit | Value |\n|---|---:|\n";
  s += "| captured bytes per record (`max_record`) | " + std::to_string(pcap::max_record) + " |\n";
  s += "| bytes per block (`ng::max_block`) | " + std::to_string(pcap::ng::max_block) + " |\n";
  s += "| interfaces per section (`ng::max_interfaces`) | " + std::to_string(pcap::ng::max_interfaces) + " |\n";
  s += "| skipped block types listed one by one (`ng::max_skipped_types`) | " + std::to_string(pcap::ng::max_skipped_types) + " |\n";
  return s;
}

std::string render_rnr() {
  std::string s = "| Code | Delay |\n|---:|---:|\n";
  for (std::uint8_t c = 0; c < 32; ++c) {
    const std::uint32_t us = ib::rnr_to_us(c);
    char b[32];
    std::snprintf(b, sizeof b, "%u.%02u ms", us / 1000, (us % 1000) / 10);
    s += "| " + std::to_string(c) + " | " + b + " |\n";
  }
  return s;
}

// JSON keys pushwire-dump prints for a header (wire::field_key: "<prefix>.<field>", the prefix
// for `value`, Wireshark's spelling where the header gives one).
template <class H>
std::string json_keys() {
  std::string s;
  for (const field_info& f : wire::fields<H>) {  // piecewise: see render_opcodes
    s += s.empty() ? "`" : ", `";
    s += wire::field_key<H>(f.name);
    s += '`';
  }
  return s;
}

// Appends "`k`" to a comma-separated list (piecewise: see render_opcodes).
void append_key(std::string& list, std::string_view k) {
  list += list.empty() ? "`" : ", `";
  list += k;
  list += '`';
}

// The keys of a RoCEv2 frame (spec/roce.md §12): each header's, the frame's other parts, and the
// keys whose value build() computes unless given (ib::given_flag).
std::string render_frame_keys() {
  std::string s = "| Header | Keys |\n|---|---|\n";
  std::string computed;
  auto row = [&]<class H>(std::string_view title, std::type_identity<H>) {
    s += "| ";
    s += title;
    s += " | ";
    s += json_keys<H>();
    s += " |\n";
    for (const field_info& f : wire::fields<H>)
      if (ib::given_flag<H>(f.name)) append_key(computed, wire::field_key<H>(f.name));
  };
  row("Ethernet", std::type_identity<ib::eth_header>{});
  row("802.1Q", std::type_identity<ib::vlan_tag>{});
  row("IPv4", std::type_identity<ib::ipv4_header>{});
  row("IPv6", std::type_identity<ib::ipv6_header>{});
  row("UDP", std::type_identity<ib::udp_header>{});
  row("BTH", std::type_identity<ib::bth>{});
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (row(ib::name(static_cast<ib::ext>(I)), std::type_identity<ib::ext_type<static_cast<ib::ext>(I)>>{}), ...);
  }(std::make_index_sequence<ib::ext_count>{});
  s += "\n| Key | Value |\n|---|---|\n";
  for (const auto& [k, what] : {std::pair{ib::key::ip_options, "IPv4 options, hex (printed when IHL > 5)"},
                                {ib::key::payload, "the IB payload without the pad, hex"},
                                {ib::key::pad, "the pad, hex (0-3 bytes)"},
                                {ib::key::icrc, "the ICRC as Wireshark shows it: its 4 wire bytes read big-endian"},
                                {ib::key::trailer, "bytes after the IP packet, hex (printed when there are any)"},
                                {ib::key::opcode, "the packet's name (`DC_DISCONNECT`: 0x55 with SE set)"},
                                {ib::key::icrc_status, "printed only: `good`, `bad` or `unchecked`"}}) {
    s += "| `";
    s += k;
    s += "` | ";
    s += what;
    s += " |\n";
  }
  append_key(computed, ib::key::pad);
  append_key(computed, ib::key::icrc);
  s += "\nComputed by `pushwire-gen frame` unless given: ";
  s += computed;
  s += ".\n";
  return s;
}

template <class H>
std::optional<std::string> render_ib_struct(std::string_view arg, std::string_view name) {
  if (arg != name) return std::nullopt;
  return render_struct<H>();
}

// A table of errc_info rows, codes from 1.
template <class Table>
std::string error_table(const Table& t) {
  std::string s = "| Code | Name | Meaning |\n|---:|---|---|\n";
  for (std::size_t i = 0; i < t.size(); ++i)
    s += "| " + std::to_string(i + 1) + " | `" + std::string{t[i].name} + "` | " + std::string{t[i].meaning} + " |\n";
  return s;
}

// The parts of a cell frame, in order, with their sizes (format.hpp).
std::string render_cell_layout() {
  std::string s = "| Part | Bytes | Present |\n|---|---:|---|\n";
  auto row = [&](std::string_view part, std::string bytes, std::string_view when) {
    s += "| " + std::string{part} + " | " + bytes + " | " + std::string{when} + " |\n";
  };
  row("Ethernet destination MAC, source MAC", std::to_string(2 * sizeof(cell::mac_address)), "always");
  row("802.1Q tag", std::to_string(wire::vlan_tag_size), "optional (the decoder accepts one; the cell CRC covers it)");
  row("EtherType " + specgen::hex(cell::ethertype, 4), "2", "always");
  row("header (§3)", std::to_string(cell::header_size), "always");
  row("VA/MH (§4)", std::to_string(cell::vamh_size), "`has_vamh`: first cell of an RDMA write");
  row("ACK info (§4)", std::to_string(cell::ack_info_size), "type ACK, NAK or PageFaultDelay");
  row("idata", std::to_string(cell::idata_size), "`has_idata`: last cell of a Send or RDMA write, when given");
  row("data", "`length`", "always (0 .. the cell payload size)");
  row("packet CRC", std::to_string(cell::crc_size), "`last`");
  row("cell CRC", std::to_string(cell::crc_size), "always");
  row("Ethernet padding (zeros)", "to " + std::to_string(wire::eth_min_frame), "when the frame is shorter than " + std::to_string(wire::eth_min_frame) + " bytes");
  return s;
}

// The reassembler's bounds and their defaults.
std::string render_cell_limits() {
  const cell::reassembly_limits d{};
  std::string s = "| Bound | Default | Exceeded |\n|---|---:|---|\n";
  s += "| `max_packets` | " + std::to_string(d.max_packets) + " | `reassembly_full` (packets) |\n";
  s += "| `max_packet_bytes` | " + std::to_string(d.max_packet_bytes) + " | `reassembly_full` (packet_bytes); a caller's destination: `no_space` |\n";
  s += "| `max_bytes` | " + std::to_string(d.max_bytes) + " | `reassembly_full` (bytes) |\n";
  s += "| `max_age_ns` | " + std::to_string(d.max_age_ns) + " | `reassembly_timeout` |\n";
  s += "| `max_cell_payload` | " + std::to_string(d.max_cell_payload) + " | `too_large` |\n";
  s += "| `history` | " + std::to_string(d.history) + " | (older deliveries are forgotten) |\n";
  return s;
}

// Hex rows of the frames a segmenter makes of an example packet.
std::string render_cell_example(std::string_view which) {
  const cell::mac_address host{2, 0, 0, 0, 0, 1}, iou{2, 0, 0, 0, 0, 2};
  cell::packet_spec p{.dst = iou, .src = host, .dst_wqp = 0x22, .src_wqp = 0x11};
  std::vector<std::byte> payload;
  std::size_t cell_payload = cell::default_cell_payload;
  if (which == "send") {
    p.psn = 0x64;
    p.ack_req = true;
    for (char ch : std::string_view{"ping"}) payload.push_back(static_cast<std::byte>(ch));
  } else if (which == "write") {
    p.psn = 0x1F4;
    p.type = cell::cell_type::rdma_write;
    p.rdma = cell::vamh{.va = 0x00007f0000010500, .mh = 0x1234};
    p.idata = 0x07050100;
    for (int i = 0; i < 20; ++i) payload.push_back(static_cast<std::byte>(i));
    cell_payload = 8;
  } else if (which == "page_fault_delay") {
    p = {.dst = iou, .src = host, .dst_wqp = 0x11, .src_wqp = 0x22, .psn = 0x1F5, .type = cell::cell_type::page_fault_delay,
         .ack = cell::ack_info{.delay_us = 2000}};
  } else {
    return {};
  }
  auto seg = cell::segmenter::make(p, std::span<const std::byte>(payload), cell_payload).value();
  std::string s = "```text\n";
  while (!seg.done()) {
    std::vector<std::byte> f(seg.next_size());
    (void)seg.next(f);
    for (std::size_t i = 0; i < f.size(); i += 16) {
      for (std::size_t j = i; j < f.size() && j < i + 16; ++j) {  // piecewise: see render_opcodes
        if (j > i) s += ' ';
        s += specgen::hex(static_cast<unsigned>(f[j]), 2).substr(2);
      }
      s += "\n";
    }
    s += seg.done() ? "" : "\n";
  }
  return s + "```\n";
}

// A machine's transition table as a Mermaid state diagram (GitHub renders it) and as a table.
template <class Info>
std::string render_machine(const Info& m, bool diagram) {
  auto clean = [](std::string_view v) {
    std::string s{v};
    std::replace(s.begin(), s.end(), ';', ',');  // Mermaid ends a statement at ';'
    std::replace(s.begin(), s.end(), ':', ' ');
    return s;
  };
  std::string out;
  if (diagram) {
    out = "```mermaid\nstateDiagram-v2\n  [*] --> " + std::string{m.initial} + "\n";
    for (const auto& r : m.table) {
      std::string label = clean(m.event_name(r.on));
      if (!r.guard_name.empty()) label += " [" + clean(r.guard_name) + "]";
      if (!r.action_name.empty()) label += " / " + clean(r.action_name);
      out += "  " + std::string{m.state_name(r.from)} + " --> " + std::string{m.state_name(r.to)} + " : " + label + "\n";
    }
    return out + "```\n";
  }
  out = "| # | From | Event | Guard | To | Action |\n|---:|---|---|---|---|---|\n";
  int i = 0;
  for (const auto& r : m.table)
    out += "| " + std::to_string(i++) + " | `" + std::string{m.state_name(r.from)} + "` | " + std::string{m.event_name(r.on)} + " | " +
           std::string{r.guard_name} + " | `" + std::string{m.state_name(r.to)} + "` | " + std::string{r.action_name} + " |\n";
  return out;
}

std::optional<std::string> render_flow(std::string_view arg) {
  const bool diagram = arg.starts_with("diagram ");
  const std::string_view what = arg.substr(arg.find(' ') + 1);
  if (what == "pool_owner") return render_machine(flow::pool_owner_info<1, 1>, diagram);
  if (what == "pool_user") return render_machine(flow::pool_user_info<1, 1>, diagram);
  if (what == "requester") return render_machine(flow::requester_info<1>, diagram);
  if (what == "responder") return render_machine(flow::responder_info<1>, diagram);
  if (what == "dc_initiator") return render_machine(flow::dci_info<1, 1>, diagram);
  if (what == "dc_target") return render_machine(flow::dct_info<1>, diagram);
  if (what == "session_receiver") return render_machine(flow::session_receiver_info<1, 1>, diagram);
  if (what == "dcqcn_rp") return render_machine(flow::dcqcn_rp_info, diagram);
  return std::nullopt;
}

// spec/wireshark.md: the plugin's fields and expert infos, from the model its generator uses.
std::optional<std::string> render_wireshark(std::string_view what) {
  const ws::model m = ws::build();
  if (what == "fields") {
    std::string s = "| Field | Type | Mask | Name | Meaning |\n|---|---|---:|---|---|\n";
    for (const ws::field& f : m.fields) {
      std::string vals;
      for (const auto& v : m.vals)
        if (v.ident == f.vals) vals = " (named values)";
      if (f.vals == "checksum") vals = " (checksum status)";
      s += "| `" + f.abbrev + "` | " + std::string{ws::type_text(f.type)} + vals + " | " +
           (f.mask ? specgen::hex(f.mask, 2) : std::string{}) + " | " + f.name + " | " + f.blurb + " |\n";
    }
    return s;
  }
  if (what == "experts") {
    std::string s = "| Expert info | Group | Severity | Summary |\n|---|---|---|---|\n";
    for (const ws::expert& e : m.experts)
      s += "| `" + e.abbrev + "` | " + e.group.substr(3) + " | " + e.severity.substr(3) + " | " + e.summary + " |\n";
    return s;
  }
  return std::nullopt;
}

// spec/rnicd.md: the shared region of a function and its rings (rnic/function.hpp).
std::string render_fn_fields(std::span<const rnic::fn::field_info> rows, std::string_view base) {
  std::string s = "| Offset | Bytes | Field | Meaning |\n|---:|---:|---|---|\n";
  for (const auto& f : rows)
    s += "| " + std::string{base} + std::to_string(f.offset) + " | " +
         (f.size ? std::to_string(f.size) : std::string{"slot_count × " + std::to_string(rnic::fn::slot_stride)}) + " | `" +
         std::string{f.name} + "` | " + std::string{f.meaning} + " |\n";
  return s;
}
std::string render_fn_region() {
  namespace fn = rnic::fn;
  std::string s = render_fn_fields(fn::header_fields, "");
  s += "\nThe header is " + std::to_string(fn::header_bytes) + " bytes; the tx ring starts there and the rx ring right after it. A ring is " +
       std::to_string(fn::ring_control) + " bytes of control block, then slot_count slots of " + std::to_string(fn::slot_stride) +
       " bytes: a region of " + std::to_string(fn::header_bytes) + " + 2 × (" + std::to_string(fn::ring_control) + " + slot_count × " +
       std::to_string(fn::slot_stride) + ") bytes.\n\n";
  s += "| slot_count | Region bytes |\n|---:|---:|\n";
  for (std::uint32_t n : {fn::min_slots, fn::default_slots, fn::max_slots})
    s += "| " + std::to_string(n) + (n == fn::default_slots ? " (default)" : "") + " | " + std::to_string(fn::region_bytes(n)) + " |\n";
  return s;
}
std::string render_fn_ring() {
  namespace fn = rnic::fn;
  std::string s = render_fn_fields(fn::ring_fields, "ring + ");
  s += "\nA slot: `length` (u32 at 0, 1.." + std::to_string(fn::slot_capacity) + "), a reserved u32 at 4, the frame from byte " +
       std::to_string(fn::slot_header) + ". Slot i of a ring is at ring + " + std::to_string(fn::ring_control) + " + (i mod slot_count) × " +
       std::to_string(fn::slot_stride) + ".\n";
  return s;
}
// The numbers of the embedded switch (rnic/eswitch.hpp, rnic/attach.hpp).
/// A migration side's machine (rnic/migrate.hpp): its transitions as a table, then as a
/// Mermaid state diagram.
template <class Table>
std::string render_migration_machine(const Table& table) {
  std::string t = "| From | Event | To | Action |\n|---|---|---|---|\n", d = "```mermaid\nstateDiagram-v2\n";
  for (const auto& x : table) {
    const std::string from{wire::enum_name(x.from)}, to{wire::enum_name(x.to)}, on{wire::enum_name(x.on)}, act{wire::enum_name(x.act)};
    t += "| `" + from + "` | " + on + " | `" + to + "` | " + act + " |\n";
    d += "  " + from + " --> " + to + ": " + on + (x.act == rnic::migration::action::none ? "" : " / " + act) + "\n";
  }
  return t + "\n" + d + "```\n";
}

std::string render_rnicd_numbers() {
  const std::uint32_t block = 1u << rnic::qpn_block_bits;
  std::string s = "| Quantity | Value |\n|---|---:|\n";
  s += "| QPNs per attachment (a block: 2^" + std::to_string(rnic::qpn_block_bits) + ") | " + std::to_string(block) + " |\n";
  s += "| QPN blocks (24-bit QPNs) | " + std::to_string(rnic::qpn_blocks) + " |\n";
  s += "| attachments per port (block 0, QPNs 0.." + std::to_string(block - 1) + ", is never given) | " + std::to_string(rnic::qpn_blocks - 1) + " |\n";
  s += "| VFs per port | " + std::to_string(rnic::max_vfs) + " |\n";
  s += "| GIDs per function | 1..4 |\n";
  s += "| P_Keys per function | 1..16 |\n";
  s += "| largest control message, bytes | " + std::to_string(rnic::ctl::max_message) + " |\n";
  return s;
}
// A function's settings (`vf add`, `vf set`): their defaults (function_limits, function_settings) and ranges.
std::string render_rnicd_settings() {
  const rnic::function_limits l{};
  const rnic::function_settings st{};
  const std::string block = std::to_string(1u << rnic::qpn_block_bits);
  auto pkeys = [&] {
    std::string t;
    for (std::uint16_t p : st.pkeys) {  // appended: g++-12 -O3 warns falsely on chained string +
      if (!t.empty()) t += ',';
      t += specgen::hex(p, 4);
    }
    return t;
  };
  std::string s = "| Setting | Default | Value |\n|---|---|---|\n";
  s += "| `mac` | 02:N:a:b:c:d (N the function's number, a.b.c.d the port's IPv4 address) | six hex octets, `02:01:c6:12:00:01`; not a group address |\n";
  s += "| `gid` | the port's addresses | 1..4 of the port's addresses (`--port`), comma-separated, IPv4 or IPv6 text (`198.18.0.1`, `fd00::1`, `::ffff:198.18.0.1`) |\n";
  s += "| `max_qps` | " + std::to_string(l.max_qps) + " | 0.." + block + " |\n";
  s += "| `max_mrs` | " + std::to_string(l.max_mrs) + " | 0.." + block + " |\n";
  s += "| `max_cqs` | " + std::to_string(l.max_cqs) + " | 0.." + block + " |\n";
  s += "| `max_bytes` | " + std::to_string(l.max_reg_bytes) + " (1 TiB) | bytes registered, 0..2^64 − 1 |\n";
  s += "| `rate` | " + (l.rate_bps ? std::to_string(l.rate_bps) : std::string{"0 (unlimited)"}) +
       "; `--rate` sets every function's | bits per second, with an optional K, M or G (powers of 1000); 0: unlimited |\n";
  s += "| `trust` | " + std::string{st.trust ? "on" : "off"} + " | `on` (no spoof check) or `off` |\n";
  s += "| `pkey` | " + pkeys() + " | 1..16 P_Keys in hex (`0x` optional), comma-separated; the low 15 bits not 0 |\n";
  return s;
}
// Per-function transmit drops and per-port receive drops (rnic/eswitch.hpp), with what each means.
std::optional<std::string> render_rnicd_drops(std::string_view which) {
  static constexpr std::pair<std::string_view, std::string_view> tx[] = {
      {"not_roce", "not a RoCEv2 frame over IPv4 or IPv6 to UDP port 4791 (or it has an 802.1Q tag)"},
      {"spoofed_mac", "its source MAC is not the function's"},
      {"spoofed_ip", "its source address is not one of the function's GIDs"},
      {"spoofed_port", "its UDP source port is not 4791"},
      {"spoofed_pkey", "its BTH P_Key is not in the function's table"},
      {"spoofed_qpn", "its DETH source QPN (UD) is outside the attachment's QPN block"},
  };
  static constexpr std::pair<std::string_view, std::string_view> rx[] = {
      {"not_roce", "not a RoCEv2 frame"},
      {"no_attachment", "no attachment holds the destination QPN's block (block 0 included: QP0 and QP1 belong to no attachment)"},
      {"not_its_address", "the destination address is not one of the GIDs of the function of the attachment that holds the QPN"},
      {"ring_full", "the attachment's rx ring had no free slot (or the frame is longer than a slot)"},
  };
  auto table = [&](std::span<const wire::named_value> names, std::span<const std::pair<std::string_view, std::string_view>> meanings)
      -> std::optional<std::string> {
    std::string s = "| Counter | Meaning |\n|---|---|\n";
    for (const auto& n : names) {
      const auto m = std::find_if(meanings.begin(), meanings.end(), [&](const auto& p) { return p.first == n.name; });
      if (m == meanings.end()) {
        std::cerr << "pushwire-spec: rnicd_drops: no meaning for `" << n.name << "` (tools/pushwire-spec.cpp)\n";
        return std::nullopt;
      }
      s += "| `" + std::string{n.name} + "` | " + std::string{m->second} + " |\n";
    }
    return s;
  };
  if (which == "tx") return table(rnic::tx_drop_names, tx);
  if (which == "rx") return table(rnic::rx_drop_reason_names, rx);
  return std::nullopt;
}
std::optional<std::string> render_rnicd_message(std::string_view which) {
  namespace ctl = rnic::ctl;
  if (which == "ctl_header") return render_struct<ctl::ctl_header>();
  if (which == "attach_request") return render_struct<ctl::attach_request>();
  if (which == "attach_reply") return render_struct<ctl::attach_reply>();
  if (which == "reserve_request") return render_struct<ctl::reserve_request>();
  if (which == "text_message") return render_struct<ctl::text_message>();
  if (which == "notice_message") return render_struct<ctl::notice_message>();
  if (which == "types") return specgen::value_table(ctl::msg_type_names, 4);
  if (which == "resources") return specgen::value_table(ctl::resource_names, 2);
  return std::nullopt;
}

std::optional<std::string> render(std::string_view key) {
  std::optional<std::string> out;
  const auto sp = key.find(' ');
  const std::string_view kind = key.substr(0, sp);
  const std::string_view arg = sp == std::string_view::npos ? std::string_view{} : key.substr(sp + 1);
  if (kind == "message") {
    msg::for_each_message_type([&]<class M>(std::type_identity<M>) {
      if (msg::name(msg::code_of<M>) == arg) out = render_message<M>();
    });
  } else if (kind == "cell") {
    if (arg == "header") out = render_struct<cell::header>();
    if (arg == "vamh") out = render_struct<cell::vamh>();
    if (arg == "ack_info") out = render_struct<cell::ack_info>();
    if (arg == "type") out = specgen::value_table(cell::cell_type_names, 1);
    if (arg == "nak_code") out = specgen::value_table(cell::nak_code_names, 1);
    if (arg == "layout") out = render_cell_layout();
    if (arg == "limits") out = render_cell_limits();
    if (arg == "json_keys")
      out = json_keys<cell::header>() + ", " + json_keys<cell::vamh>() + ", " + json_keys<cell::ack_info>() +
            ", `pushwire.cell.type_name`, `pushwire.cell.idata`, `pushwire.cell.crc`, `pushwire.cell.packet_crc`, "
            "`pushwire.cell.reassembly`\n";
    if (arg.starts_with("example ")) {
      auto e = render_cell_example(arg.substr(8));
      if (!e.empty()) out = e;
    }
  } else if (kind == "struct") {
    if (arg == "idata") out = render_struct<msg::idata>();
    if (arg == "mac_address") out = render_struct<msg::cfg::mac_address>();
    if (arg == "statistics") out = render_struct<msg::cfg::statistics>();
    if (arg == "mtu_setting") out = render_struct<msg::cfg::mtu_setting>();
    if (arg == "link_state") out = render_struct<msg::cfg::link_state>();
    if (arg == "promiscuous") out = render_struct<msg::cfg::promiscuous>();
    if (arg == "nic_init") out = render_struct<msg::cfg::nic_init>();
    if (arg == "nic_state") out = render_struct<msg::cfg::nic_state>();
    if (arg == "header") out = render_header();
    for (auto r : {render_ib_struct<ib::bth>(arg, "bth"), render_ib_struct<ib::rdeth>(arg, "rdeth"),
                   render_ib_struct<ib::deth>(arg, "deth"), render_ib_struct<ib::reth>(arg, "reth"),
                   render_ib_struct<ib::atomiceth>(arg, "atomiceth"), render_ib_struct<ib::aeth>(arg, "aeth"),
                   render_ib_struct<ib::atomicacketh>(arg, "atomicacketh"), render_ib_struct<ib::immdt>(arg, "immdt"),
                   render_ib_struct<ib::ieth>(arg, "ieth"), render_ib_struct<ib::feth>(arg, "feth"),
                   render_ib_struct<ib::dceth>(arg, "dceth"), render_ib_struct<ib::dcceth>(arg, "dcceth"),
                   render_ib_struct<ib::cnp_pad>(arg, "cnp_pad"), render_ib_struct<ib::sinketh>(arg, "sinketh"), render_ib_struct<ib::eth_header>(arg, "eth_header"),
                   render_ib_struct<ib::vlan_tag>(arg, "vlan_tag"), render_ib_struct<ib::ipv4_header>(arg, "ipv4_header"),
                   render_ib_struct<ib::ipv6_header>(arg, "ipv6_header"), render_ib_struct<ib::udp_header>(arg, "udp_header"),
                   render_ib_struct<ib::lid_mac>(arg, "lid_mac"), render_ib_struct<pp::hello>(arg, "pp_hello"),
                   render_ib_struct<pp::lan_hello>(arg, "lan_hello")})
      if (r) out = r;
  } else if (kind == "enum") {
    if (arg == "function") out = specgen::value_table(msg::function_names, 4);
    if (arg == "request_code") out = specgen::value_table(msg::cfg::request_code_names, 4);
    if (arg == "status") out = specgen::value_table(msg::cfg::status_names, 4);
  } else if (kind == "opcodes") {
    out = render_opcodes(arg == "rd" ? ib::rd_class::ibta_rd : ib::rd_class::dc);
  } else if (kind == "capture") {
    out = render_capture();
  } else if (kind == "rnr_timers") {
    out = render_rnr();
  } else if (kind == "json_keys") {
    out = render_frame_keys();
  } else if (kind == "wireshark") {
    out = render_wireshark(arg);
  } else if (kind == "cfg_data") {
    out = render_cfg_data();
  } else if (kind == "flow") {
    out = render_flow(arg);
  } else if (kind == "crc_paths") {
    namespace crc = wire::crc;
    std::string s = "| Path | Computes | Needs |\n|---|---|---|\n";
    for (const auto& n : crc::path_names) {
      const auto p = static_cast<crc::path>(n.value);
      const bool c32 = crc::implements(p, crc::crc32_poly);
      s += "| `" + std::string{n.name} + "` | " + (c32 ? "CRC-32, CRC-32C" : "CRC-32C") + " | " +
           std::string{crc::requirement(p)} + " |\n";
    }
    out = s;
  } else if (kind == "crc_crossover") {
    namespace crc = wire::crc;
    const auto bytes = [](std::size_t n) {
      return n == 0 ? std::string("never") : n == SIZE_MAX ? std::string("at every size") : "below " + std::to_string(n) + " bytes";
    };
    std::string s = "| CRC-32C's widest folding path | sse42 runs | folding and crc32 streams side by side |\n|---|---|---|\n";
    for (const auto& [fold, step] : {std::pair{crc::path::vpclmul_avx512, 512}, std::pair{crc::path::vpclmul_avx2, 256}}) {
      const crc::streams st = crc::default_streams(fold);
      s += "| `" + std::string{crc::to_string(fold)} + "` | " + bytes(crc::sse42_below(fold)) + " | from " + std::to_string(st.from) +
           " bytes, " + std::to_string(st.words) + " words per stream per " + std::to_string(step) + " bytes folded (`streams=" +
           std::to_string(st.words) + "@" + std::to_string(st.from) + "`) |\n";
    }
    s += "| `pclmul` | " + bytes(crc::sse42_below(crc::path::pclmul)) + " | no |\n";
    out = s;
  } else if (kind == "crc_select_errors") {
    namespace crc = wire::crc;
    std::string s = "| Error | Meaning |\n|---|---|\n";
    for (const auto& n : crc::select_errc_names)
      s += "| `" + std::string{n.name} + "` | " + std::string{crc::select_errc_meanings[n.value - 1]} + " |\n";
    out = s;
  } else if (kind == "conform_rules") {
    std::string s = "| Rule | What it checks | Decided by | Reference |\n|---|---|---|---|\n";
    for (const flow::rule_info& r : flow::rule_table)
      s += "| `" + std::string{r.name} + "` | " + std::string{r.checks} + " | " + std::string{r.judge} + " | " + std::string{r.reference} + " |\n";
    out = s;
  } else if (kind == "conform_limits") {
    const flow::conform_limits l{};
    out = "| Bound | Default | Beyond it |\n|---|---:|---|\n"
          "| `max_streams` | " + std::to_string(l.max_streams) + " | a new stream is not tracked (`dropped_conversations`) |\n"
          "| `history` | " + std::to_string(l.history) + " | PSNs older than this in a stream are forgotten |\n"
          "| `reads` | " + std::to_string(l.reads) + " | older READ and atomic requests are forgotten |\n"
          "| `max_pp_pairs` | " + std::to_string(l.max_pp_pairs) + " | a new push-push host pair is not judged |\n"
          "| `max_message` | " + std::to_string(l.max_message) + " | a longer SEND is not read as a push-push message |\n"
          "| `max_deferred` | " + std::to_string(l.max_deferred) + " | later verdicts are counted, not kept (`dropped_violations`) |\n"
          "| `cell_packets` × `cell_packet_bytes` | " + std::to_string(l.cell_packets) + " × " + std::to_string(l.cell_packet_bytes) +
          " | a cell packet beyond them is not judged (the oldest incomplete ones make room first) |\n";
  } else if (kind == "rnic_errors") {
    out = error_table(rnic::errc_table);
  } else if (kind == "rnic_verb_errors") {
    // The verbs of rnic::device (device.hpp and the data path it inherits, engine.hpp) and the
    // codes their comments document.
    std::vector<std::string_view> codes;
    for (const auto& e : rnic::errc_table) codes.push_back(e.name);
    std::string s = "| Verb | Error | When |\n|---|---|---|\n", bad, last;
    const auto rows = specgen::device_verb_errors(PUSHWIRE_INCLUDE_DIR, codes, bad);
    if (rows.empty()) {
      std::cerr << "pushwire-spec: rnic_verb_errors: " << bad << "\n";
      return std::nullopt;
    }
    for (const auto& r : rows) {
      s += "| " + (r.verb == last ? std::string{} : "`" + r.verb + "`") + " | `" + r.code + "` | " + r.when + " |\n";
      last = r.verb;
    }
    out = s;
  } else if (kind == "pp_errors") {
    out = error_table(pp::errc_table);
  } else if (kind == "lan_errors") {
    out = error_table(pp::lan_errc_table);
  } else if (kind == "rnic_transitions") {
    // Every (from, to) with a rule for some type: required and optional attributes per type.
    auto names = [](rnic::qp_attr_mask m) {
      std::string t;
      for (const auto& n : rnic::qp_attr_mask_names)
        if (rnic::any(m & static_cast<rnic::qp_attr_mask>(n.value))) t += (t.empty() ? "" : ", ") + std::string{n.name};
      return t.empty() ? std::string{"-"} : t;
    };
    std::string s = "| From | To | Type | Required | Optional |\n|---|---|---|---|---|\n";
    for (const auto from : {rnic::qp_state::reset, rnic::qp_state::init, rnic::qp_state::rtr, rnic::qp_state::rts,
                            rnic::qp_state::sqd, rnic::qp_state::sqe})
      for (const auto to : {rnic::qp_state::init, rnic::qp_state::rtr, rnic::qp_state::rts, rnic::qp_state::sqd})
        for (const auto t : {rnic::qp_type::rc, rnic::qp_type::uc, rnic::qp_type::ud, rnic::qp_type::dci, rnic::qp_type::dct})
          if (const auto r = rnic::transition_rule(t, from, to))
            s += "| " + std::string{wire::enum_name(from)} + " | " + std::string{wire::enum_name(to)} + " | " +
                 std::string{wire::enum_name(t)} + " | " + names(r->required) + " | " + names(r->optional) + " |\n";
    s += "| any | RESET, ERR | all | - | - |\n";
    out = s;
  } else if (kind == "rnicd_region") {
    out = render_fn_region();
  } else if (kind == "rnicd_ring") {
    out = render_fn_ring();
  } else if (kind == "rnicd_message") {
    out = render_rnicd_message(arg);
  } else if (kind == "rnicd_errors") {
    out = error_table(rnic::fn_errc_table);
  } else if (kind == "rnicd_drops") {
    out = render_rnicd_drops(arg);
  } else if (kind == "dcqcn_parameters") {
    std::string s = "| Parameter | Stands for | Default | Unit |\n|---|---|---:|---|\n";
    for (const auto& p : flow::dcqcn_parameters(flow::dcqcn_config{}))
      s += "| `" + std::string{p.name} + "` | " + std::string{p.source} + " | " + std::to_string(p.value) + " | " + std::string{p.unit} + " |\n";
    out = s;
  } else if (kind == "class_model") {
    // the default class model: each class, its priorities, its DSCPs, its selection
    const flow::qos_map m{};
    std::string s = "| Class | Priorities | DSCPs (trust dscp) | TSA | Weight (%) | Rate limit |\n|---:|---|---|---|---:|---|\n";
    for (std::uint8_t c = 0; c < flow::traffic_classes; ++c) {
      std::string prios, dscps;
      for (std::uint8_t p = 0; p < 8; ++p)
        if (m.prio_tc[p] == c) prios += (prios.empty() ? "" : ", ") + std::to_string(p);
      int first = -1;
      for (int d = 0; d <= 64; ++d) {
        const bool in = d < 64 && m.class_of(0, static_cast<std::uint8_t>(d << 2)) == c;
        if (in && first < 0) first = d;
        if (!in && first >= 0) dscps += (dscps.empty() ? "" : ", ") + std::to_string(first) + (d - 1 > first ? "–" + std::to_string(d - 1) : ""), first = -1;
      }
      const flow::tc_config& t = m.tc[c];
      s += "| " + std::to_string(c) + " | " + prios + " | " + dscps + " | " + std::string{wire::enum_name(t.tsa)} + " | " + std::to_string(t.weight) +
           " | " + (t.rate_limit ? std::to_string(t.rate_limit) + " bit/s" : "none") + " |\n";
    }
    out = s;
  } else if (kind == "rnicd_settings") {
    out = render_rnicd_settings();
  } else if (kind == "rnicd_numbers") {
    out = render_rnicd_numbers();
  } else if (kind == "migration" && arg == "source") {
    out = render_migration_machine(rnic::migration::source_transitions);
  } else if (kind == "migration" && arg == "destination") {
    out = render_migration_machine(rnic::migration::destination_transitions);
  } else if (kind == "flow_errors") {
    out = error_table(flow::errc_table);
  } else if (kind == "errors") {
    std::string s = "| Code | Name | Meaning |\n|---:|---|---|\n";
    // "errors cell": those a cell decoder or the reassembler returns.
    const std::vector<wire::errc> cells{wire::errc::truncated, wire::errc::unsupported_version, wire::errc::zero_count,
                                        wire::errc::too_large, wire::errc::reserved_nonzero, wire::errc::invalid_field,
                                        wire::errc::no_space, wire::errc::length_mismatch, wire::errc::not_cell,
                                        wire::errc::cell_crc_mismatch, wire::errc::packet_crc_mismatch, wire::errc::cell_missing,
                                        wire::errc::cell_duplicate, wire::errc::cell_out_of_order, wire::errc::vamh_missing,
                                        wire::errc::vamh_unexpected, wire::errc::reassembly_full, wire::errc::reassembly_timeout};
    for (wire::errc e : wire::all_errc) {
      if (arg == "cell" && std::find(cells.begin(), cells.end(), e) == cells.end()) continue;
      const auto& info = wire::errc_table[static_cast<std::size_t>(e) - 1];
      s += "| " + std::to_string(static_cast<int>(e)) + " | `" + std::string{info.name} + "` | " +
           std::string{info.meaning} + " |\n";
    }
    out = s;
  }
  return out;
}

int usage() {
  std::cerr << "usage: pushwire-spec (--check | --update) FILE.md...\n";
  return 64;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return usage();
  const std::string_view mode = argv[1];
  if (mode != "--check" && mode != "--update") return usage();
  int status = 0;
  for (int i = 2; i < argc; ++i) {
    std::ifstream in(argv[i], std::ios::binary);
    if (!in) {
      std::cerr << "pushwire-spec: cannot read " << argv[i] << "\n";
      return 2;
    }
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();
    std::string bad;
    auto fresh = specgen::splice(text, render, bad);
    if (!fresh) {
      std::cerr << "pushwire-spec: " << argv[i] << ": unknown or broken region: " << bad << "\n";
      return 2;
    }
    if (*fresh == text) continue;
    if (mode == "--update") {
      std::ofstream(argv[i], std::ios::binary) << *fresh;
      std::cout << "updated " << argv[i] << "\n";
    } else {
      std::size_t line = 1, k = 0;
      while (k < text.size() && k < fresh->size() && text[k] == (*fresh)[k]) line += text[k++] == '\n';
      std::cerr << "pushwire-spec: " << argv[i] << " is stale from line " << line
                << "; run `cmake --build build --target spec` (pushwire-spec --update)\n";
      status = 1;
    }
  }
  return status;
}
