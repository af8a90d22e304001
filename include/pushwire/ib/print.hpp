// JSON and text for parsed RoCEv2 frames, derived from the header descriptions. JSON keys are
// the frame's keys (ib/keys.hpp: "<header's Wireshark prefix>.<field>", a field named `value`
// the prefix alone as Wireshark's infiniband.immdt); frame_builder reads them back.
#pragma once

#include <cstdio>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

#include <pushwire/ib/keys.hpp>
#include <pushwire/ib/roce.hpp>
#include <pushwire/wire/json.hpp>
#include <pushwire/wire/print.hpp>

namespace pushwire::ib {

using wire::to_string;

/// The opcode's name, except that opcode 0x55 with SE set reads "DC_DISCONNECT".
inline std::string packet_name(const roce_packet& p) { return std::string{ib::packet_name(*p.op, p.bth.se)}; }

using wire::write_json_header;

/// Every part of p, enough to build it again: each header's fields (Ethernet, VLAN, IPv4 and
/// ip.options when IHL > 5, or IPv6, UDP, BTH, each extended header present), then
/// pushwire.payload and pushwire.pad (hex), infiniband.invariant.crc (icrc_shown), eth.trailer
/// (hex, when the frame has bytes after the IP packet), pushwire.opcode (its name) and
/// pushwire.icrc ("good", "bad" or "unchecked").
inline void write_json_fields(wire::json_writer& w, const roce_packet& p) {
  auto bytes = [&](std::string_view k, std::span<const std::byte> b) {
    w.key(k);
    w.string(wire::to_hex(b));
  };
  for_each_header(p, [&](const auto& h) {
    write_json_header(w, h);
    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(h)>, ipv4_header>)
      if (!p.ip_options.empty()) bytes(key::ip_options, p.ip_options);
  });
  bytes(key::payload, p.payload);
  bytes(key::pad, p.pad);
  w.key(key::icrc);
  w.uint(icrc_shown(p.icrc));
  if (!p.trailer.empty()) bytes(key::trailer, p.trailer);
  w.key(key::opcode);
  w.string(packet_name(p));
  w.key(key::icrc_status);
  w.string(to_string(p.icrc_state));
}

/// Several lines: the addresses, then each header's fields, the payload size and the ICRC.
inline std::string to_text(const roce_packet& p) {
  char buf[160];
  std::string s;
  auto mac = [](const mac_address& m) { return wire::detail::scalar_text(m); };
  auto title = [&](std::string_view t) { s += "  "; s += t; s += "\n"; };
  s += "Ethernet " + mac(p.eth.src) + " > " + mac(p.eth.dst) + (p.vlan ? " vlan " + std::to_string(p.vlan->id.value) : "") + "\n";
  if (!p.v6) {
    const auto& v4 = p.ip4;
    std::snprintf(buf, sizeof buf, "IPv4 %u.%u.%u.%u > %u.%u.%u.%u ttl %u%s\n", v4.src[0], v4.src[1], v4.src[2],
                  v4.src[3], v4.dst[0], v4.dst[1], v4.dst[2], v4.dst[3], v4.ttl,
                  p.ip_checksum_ok ? "" : " (bad header checksum)");
    s += buf;
  } else {
    const auto& v6 = p.ip6;
    std::snprintf(buf, sizeof buf, "IPv6 %s > %s tclass %u flow 0x%05x hlim %u\n", wire::detail::scalar_text(v6.src).c_str(),
                  wire::detail::scalar_text(v6.dst).c_str(), v6.tclass.value, v6.flow.value, v6.hlim);
    s += buf;
  }
  std::snprintf(buf, sizeof buf, "UDP %u > %u\n", p.udp.srcport, p.udp.dstport);
  s += buf;
  s += packet_name(p) + " (0x" + wire::detail::hex_number(p.op->code, 2).substr(2) + ")\n";
  title("BTH");
  s += wire::to_text(p.bth, 4);
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    ([&] {
      constexpr ext E = static_cast<ext>(I);
      if (const auto& h = p.ext.get<E>()) {
        title(name(E));
        s += wire::to_text(*h, 4);
      }
    }(), ...);
  }(std::make_index_sequence<ext_count>{});
  std::snprintf(buf, sizeof buf, "  payload %zu bytes, pad %zu, ICRC 0x%08x %s\n", p.payload.size(), p.pad.size(),
                icrc_shown(p.icrc), std::string{to_string(p.icrc_state)}.c_str());
  s += buf;
  return s;
}

}  // namespace pushwire::ib
