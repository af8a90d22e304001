// pushwire-spec: regenerates (--update) or verifies (--check) the generated regions of spec/*.md
// from the C++ descriptions. Prose between regions is left alone.
//
//   pushwire-spec --check spec/push-push.md     exit 1 and a diff hint when the file is stale
//   pushwire-spec --update spec/push-push.md    rewrite the regions in place
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <pushwire/ib/aeth.hpp>
#include <pushwire/ib/encap.hpp>
#include <pushwire/ib/lan.hpp>
#include <pushwire/ib/opcode.hpp>
#include <pushwire/msg/msg.hpp>

#include "specgen.hpp"

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
  std::string s = "| Opcode | Name | Headers after the BTH | Payload | Position | Header bytes |\n|---:|---|---|---|---|---:|\n";
  for (int c = 0; c < 256; ++c) {
    const ib::opcode_info* o = ib::find_opcode(static_cast<std::uint8_t>(c), rd);
    if (!o) continue;
    std::string chain;
    for (ib::ext e : o->headers()) chain += (chain.empty() ? "" : ", ") + std::string{ib::name(e)};
    const std::string nm = o->tp == ib::transport::cnp ? "CNP" : std::string{ib::name(o->tp)} + "_" + std::string{o->op_name};
    s += "| " + specgen::hex(o->code, 2) + " | " + nm + " | " + (chain.empty() ? "—" : chain) + " | " +
         (o->payload ? (o->fixed_payload ? std::to_string(o->fixed_payload) + " bytes" : std::string{"yes"}) : std::string{"no"}) +
         " | " + std::string{ib::name(o->pos)} + " | " + std::to_string(o->header_len) + " |\n";
  }
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

// JSON keys pushwire-dump prints for a header: "<prefix>.<field>", or the prefix for `value`.
template <class H>
std::string json_keys() {
  std::string s;
  for (const field_info& f : wire::fields<H>)
    s += (s.empty() ? "`" : ", `") + std::string{H::wireshark} + (f.name == "value" ? "" : "." + std::string{f.name}) + "`";
  return s;
}

template <class H>
std::optional<std::string> render_ib_struct(std::string_view arg, std::string_view name) {
  if (arg != name) return std::nullopt;
  return render_struct<H>();
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
  } else if (kind == "struct") {
    if (arg == "idata") out = render_struct<msg::idata>();
    if (arg == "mac_address") out = render_struct<msg::cfg::mac_address>();
    if (arg == "statistics") out = render_struct<msg::cfg::statistics>();
    if (arg == "mtu_setting") out = render_struct<msg::cfg::mtu_setting>();
    if (arg == "link_state") out = render_struct<msg::cfg::link_state>();
    if (arg == "promiscuous") out = render_struct<msg::cfg::promiscuous>();
    if (arg == "header") out = render_header();
    for (auto r : {render_ib_struct<ib::bth>(arg, "bth"), render_ib_struct<ib::rdeth>(arg, "rdeth"),
                   render_ib_struct<ib::deth>(arg, "deth"), render_ib_struct<ib::reth>(arg, "reth"),
                   render_ib_struct<ib::atomiceth>(arg, "atomiceth"), render_ib_struct<ib::aeth>(arg, "aeth"),
                   render_ib_struct<ib::atomicacketh>(arg, "atomicacketh"), render_ib_struct<ib::immdt>(arg, "immdt"),
                   render_ib_struct<ib::ieth>(arg, "ieth"), render_ib_struct<ib::feth>(arg, "feth"),
                   render_ib_struct<ib::dceth>(arg, "dceth"), render_ib_struct<ib::dcceth>(arg, "dcceth"),
                   render_ib_struct<ib::cnp_pad>(arg, "cnp_pad"), render_ib_struct<ib::eth_header>(arg, "eth_header"),
                   render_ib_struct<ib::vlan_tag>(arg, "vlan_tag"), render_ib_struct<ib::ipv4_header>(arg, "ipv4_header"),
                   render_ib_struct<ib::ipv6_header>(arg, "ipv6_header"), render_ib_struct<ib::udp_header>(arg, "udp_header"),
                   render_ib_struct<ib::lid_mac>(arg, "lid_mac")})
      if (r) out = r;
  } else if (kind == "enum") {
    if (arg == "function") out = specgen::value_table(msg::function_names, 4);
    if (arg == "request_code") out = specgen::value_table(msg::cfg::request_code_names, 4);
    if (arg == "status") out = specgen::value_table(msg::cfg::status_names, 4);
  } else if (kind == "opcodes") {
    out = render_opcodes(arg == "rd" ? ib::rd_class::ibta_rd : ib::rd_class::dc);
  } else if (kind == "rnr_timers") {
    out = render_rnr();
  } else if (kind == "json_keys") {
    std::string s = "| Header | Keys |\n|---|---|\n";
    s += "| BTH | " + json_keys<ib::bth>() + " |\n| RDETH | " + json_keys<ib::rdeth>() + " |\n| DETH | " + json_keys<ib::deth>() +
         " |\n| DCETH | " + json_keys<ib::dceth>() + " |\n| FETH | " + json_keys<ib::feth>() + " |\n| RETH | " + json_keys<ib::reth>() +
         " |\n| AtomicETH | " + json_keys<ib::atomiceth>() + " |\n| AETH | " + json_keys<ib::aeth>() + " |\n| AtomicAckETH | " +
         json_keys<ib::atomicacketh>() + " |\n| ImmDt | " + json_keys<ib::immdt>() + " |\n| IETH | " + json_keys<ib::ieth>() +
         " |\n| DCCETH | " + json_keys<ib::dcceth>() + " |\n| CNP | " + json_keys<ib::cnp_pad>() + " |\n";
    out = s;
  } else if (kind == "cfg_data") {
    out = render_cfg_data();
  } else if (kind == "errors") {
    std::string s = "| Code | Name | Meaning |\n|---:|---|---|\n";
    for (wire::errc e : wire::all_errc) {
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
