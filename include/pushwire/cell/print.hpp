// JSON and text for decoded cells, derived from the descriptions. JSON keys are
// "pushwire.cell.<field>" for the header, VA/MH and ACK info fields (integers), plus
// "pushwire.cell.type_name", "pushwire.cell.idata" and "pushwire.cell.crc" (spec/cells.md §8).
#pragma once

#include <cstdio>
#include <string>

#include <pushwire/cell/format.hpp>
#include <pushwire/wire/json.hpp>
#include <pushwire/wire/print.hpp>

namespace pushwire::cell {

/// The cell's own fields into the open object: every header field, VA/MH and ACK info when
/// present, the type's name, the idata value, and the cell CRC status.
inline void write_json_fields(wire::json_writer& w, const cell_view& c) {
  wire::write_json_header(w, c.hdr);
  if (c.rdma) wire::write_json_header(w, *c.rdma);
  if (c.ack) wire::write_json_header(w, *c.ack);
  w.key("pushwire.cell.type_name");
  w.string(wire::enum_name(c.hdr.type.value));
  if (c.idata) {
    w.key("pushwire.cell.idata");
    w.uint(*c.idata);
  }
  w.key("pushwire.cell.crc");
  w.string(wire::to_string(c.crc_state));
}

/// Several lines: addresses and the header's summary, then VA/MH, ACK info, idata and CRCs.
inline std::string to_text(const cell_view& c) {
  char buf[200];
  const auto& h = c.hdr;
  auto mac = [](const mac_address& m) { return wire::detail::scalar_text(m); };
  std::string flags;
  for (auto [on, f] : {std::pair{bool{h.first}, "F"}, {bool{h.last}, "L"}, {bool{h.has_idata}, "I"},
                       {bool{h.ack_req}, "A"}, {bool{h.has_vamh}, "R"}})
    if (on) flags += f;
  std::string s = "cell " + std::string{wire::enum_name(h.type.value)} + " " + mac(c.src()) + " > " + mac(c.dst());
  if (auto v = c.vlan()) s += " vlan " + std::to_string(v->id.value);
  std::snprintf(buf, sizeof buf, "\n  wqp 0x%06x > 0x%06x psn %u cell %u/%u [%s] %u bytes\n", h.src_wqp.value,
                h.dst_wqp.value, h.psn.value, h.csn, h.cell_count, flags.c_str(), h.length);
  s += buf;
  if (c.rdma) {
    std::snprintf(buf, sizeof buf, "  va 0x%016llx mh 0x%08x\n", static_cast<unsigned long long>(c.rdma->va), c.rdma->mh);
    s += buf;
  }
  if (c.ack) {
    if (h.type == cell_type::nak) s += "  code " + std::to_string(c.ack->code) + " " + std::string{wire::enum_name(static_cast<nak_code>(c.ack->code))} + "\n";
    if (h.type == cell_type::page_fault_delay) s += "  delay " + std::to_string(c.ack->delay_us) + " us\n";
  }
  if (c.idata) {
    std::snprintf(buf, sizeof buf, "  idata 0x%08x\n", *c.idata);
    s += buf;
  }
  std::snprintf(buf, sizeof buf, "  cell CRC 0x%08x %s", c.crc, std::string{wire::to_string(c.crc_state)}.c_str());
  s += buf;
  if (c.packet_crc) {
    std::snprintf(buf, sizeof buf, ", packet CRC 0x%08x", *c.packet_crc);
    s += buf;
  }
  return s + "\n";
}

}  // namespace pushwire::cell
