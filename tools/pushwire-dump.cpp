// pushwire-dump: decodes push-push messages, and RoCEv2 and cell captures; prints text or JSON.
//
//   pushwire-dump [--json] [--max-frame N] --hex HEX     one message given as hex ('-': stdin)
//   pushwire-dump [--json] [options] FILE.pcap           every frame of a capture, in order
//   pushwire-dump --tcp-aggregate OUT.pcap [--tcp-aggregation-timeout US] FILE.pcap
//                                                        the capture's frames through TCP
//                                                        aggregation (flow::tcp_aggregator)
//
// --tcp-aggregate: every Ethernet frame of the capture is pushed at its timestamp (aggregations
// open longer than the timeout, default 50 us, are handed out first; all at the end); what comes
// out is written to OUT.pcap (classic, nanosecond timestamps: the time it came out), and one
// summary line to stdout: frames in and out, segments joined into aggregates, by flush rule.
//
// With --json a capture gives one object per line: "frame" (1-based); for a RoCEv2 frame every
// field of every header under Wireshark's names (eth.*, vlan.*, ip.*, ipv6.*, udp.*,
// infiniband.*), its payload, pad, ICRC and trailer: the keys `pushwire-gen frame` builds it
// again from (spec/roce.md §12), then "pushwire.opcode", "pushwire.icrc"; a push-push message
// found in a single-packet SEND ("pushwire.function", ...); "pushwire.idata" for an RDMA WRITE
// with immediate that flow::observer claims as push-push idata (spec/wireshark.md §3); or "error"
// for a frame that is neither RoCEv2 nor a cell. A cell frame (EtherType
// 0x88B5) gives "pushwire.cell.*" keys and "pushwire.cell.crc"; a last cell also
// "pushwire.cell.packet_crc" (cells are reassembled across the capture to check it, by
// flow::observer as the Wireshark plugin does; spec/cells.md §8), and a completed Send holding a
// push-push message its fields.
// Exit status: 0 decoded (a capture's bad frames are reported per frame); 1 usage; 2 malformed
// input (one line on stderr naming the errc).
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <pushwire/cell/print.hpp>
#include <pushwire/flow/observer.hpp>
#include <pushwire/flow/tcp_agg.hpp>
#include <pushwire/ib/print.hpp>
#include <pushwire/msg/idata.hpp>
#include <pushwire/msg/msg.hpp>
#include <pushwire/version.hpp>
#include <pushwire/wire/hex.hpp>
#include <pushwire/wire/pcap.hpp>

namespace {

using namespace pushwire;

constexpr int exit_usage = 1;
constexpr int exit_malformed = 2;

int usage(const char* why) {
  if (why) std::cerr << "pushwire-dump: " << why << "\n";
  std::cerr << "usage: pushwire-dump [--json] [--max-frame N] --hex HEX|-\n"
               "       pushwire-dump [--json] [--max-frame N] [--udp-port P] [--ibta-rd] [--no-icrc] FILE.pcap\n"
               "       pushwire-dump --tcp-aggregate OUT.pcap [--tcp-aggregation-timeout US] FILE.pcap\n"
               "  --hex HEX       decode one push-push message given in hex ('-' reads stdin)\n"
               "  FILE.pcap       decode every frame of a pcap or pcapng capture (Ethernet)\n"
               "  --json          JSON: one object (per frame); a RoCEv2 frame's keys rebuild it\n"
               "                  with pushwire-gen frame (spec/roce.md section 12)\n"
               "  --max-frame N   largest push-push frame accepted, bytes (default 4096)\n"
               "  --udp-port P    RoCEv2 UDP destination port (default 4791)\n"
               "  --ibta-rd       read opcodes 0x40-0x5F as IBTA RD, not DC\n"
               "  --no-icrc       do not verify ICRCs\n"
               "  --tcp-aggregate OUT.pcap  run the capture's frames through TCP aggregation, write what comes out\n"
               "  --tcp-aggregation-timeout US  how long an aggregation stays open (default 50)\n"
               "exit status: 0 decoded, 1 usage, 2 malformed input\n";
  return exit_usage;
}

/// "count_mismatch at byte 12 (pool_count)"
std::string describe(const wire::error& e) {
  std::string s{wire::to_string(e.code)};
  s += " at byte " + std::to_string(e.offset);
  if (!e.field.empty()) s += " (" + std::string{e.field} + ")";
  return s;
}

bool is_write_with_imm(const ib::opcode_info& o) { return o.is(ib::op_class::write | ib::op_class::immediate); }
bool is_single_send(const ib::opcode_info& o) { return o.is(ib::op_class::send | ib::op_class::only); }

void write_idata(wire::json_writer& w, const msg::idata& d) {
  w.key("pushwire.idata");
  w.begin_array();
  w.uint(d.pool_ref);
  w.uint(d.element_index);
  w.uint(d.byte_count);
  w.end_array();
}
std::string idata_text(const msg::idata& d) {
  return "  idata: pool " + std::to_string(d.pool_ref) + ", element " + std::to_string(d.element_index) + ", " +
         std::to_string(d.bytes()) + " bytes\n";
}

// One frame's output: "frame N: ..." or {"frame":N,...}.
struct frame_out {
  std::string s;
  wire::json_writer w{s};
  bool json;
  frame_out(std::size_t n, bool j) : json(j) {
    if (!json) {
      s = "frame " + std::to_string(n) + ": ";
      return;
    }
    w.begin_object();
    w.key("frame");
    w.uint(n);
  }
  /// The whole output of a frame that does not decode.
  std::string error(const wire::error& e) {
    if (!json) return s + "error: " + describe(e) + "\n";
    w.key("error");
    w.string(describe(e));
    return end();
  }
  std::string end() {
    if (json) {
      w.end_object();
      s += "\n";
    }
    return s;
  }
};

// A cell, with what the capture's earlier frames say of it (`note`, from flow::observer): its
// packet CRC status and the reassembler's outcome, and a completed Send's push-push message.
std::string dump_cell(std::size_t n, std::span<const std::byte> frame, bool json, const wire::codec_options& opt,
                      const flow::frame_note& note) {
  frame_out o{n, json};
  auto& w = o.w;
  auto c = cell::decode(frame, {.crc = wire::crc_check::report, .max_cell_payload = cell::max_cell_payload});
  if (!c) return o.error(c.error());
  const std::string_view packet_crc = wire::enum_name(note.packet_crc);
  const bool rejected = note.reassembly.code != wire::errc{};
  std::optional<msg::message> m;
  if (note.cell_type == cell::cell_type::send && !note.payload.empty())
    if (auto r = msg::decode(note.payload, opt)) m = *r;
  std::optional<msg::idata> idata;
  if (c->idata && c->hdr.type == cell::cell_type::rdma_write) idata = msg::from_imm(*c->idata);
  if (json) {
    cell::write_json_fields(w, *c);
    if (c->hdr.last) {
      w.key("pushwire.cell.packet_crc");
      w.string(packet_crc);
    }
    if (rejected) {
      w.key("pushwire.cell.reassembly");
      w.string(wire::to_string(note.reassembly.code));
    }
    if (idata) write_idata(w, *idata);
    if (m) std::visit([&](const auto& x) { msg::write_json_fields(w, x); }, *m);
    return o.end();
  }
  std::string& out = o.s;
  out += cell::to_text(*c);
  if (c->hdr.last) out += "  packet CRC " + std::string{packet_crc} + "\n";
  if (rejected) out += "  reassembly: " + describe(note.reassembly) + "\n";
  if (idata) out += idata_text(*idata);
  if (m) out += "  push-push " + msg::to_text(*m);
  return out;
}

// One capture frame, as JSON (one line) or text.
std::string dump_frame(std::size_t n, std::span<const std::byte> frame, std::uint64_t t_ns, bool json,
                       const wire::codec_options& opt, flow::observer& obs) {
  const flow::frame_note note = obs.observe(n, t_ns, frame);
  if (auto l2 = wire::locate_payload(frame); l2 && l2->type == cell::ethertype) return dump_cell(n, frame, json, opt, note);
  frame_out o{n, json};
  auto& w = o.w;
  auto p = ib::decode(frame, opt);
  if (!p) return o.error(p.error());
  std::optional<msg::message> m;
  if (is_single_send(*p->op))
    if (auto r = msg::decode(p->payload, opt)) m = *r;
  std::optional<msg::idata> idata;
  if (is_write_with_imm(*p->op) && note.idata) idata = msg::from_imm(p->ext.get<ib::ext::immdt>()->value);
  if (json) {
    ib::write_json_fields(w, *p);
    if (m) std::visit([&](const auto& x) { msg::write_json_fields(w, x); }, *m);
    if (idata) write_idata(w, *idata);
    if (note.migrated_from) {  // path migration (spec/qos.md §9)
      w.key("pushwire.apm.from");
      w.string(note.migrated_from->src.text() + " > " + note.migrated_from->dst.text());
      w.key("pushwire.apm.from_frame");
      w.uint(note.migrated_from->frame);
    }
    return o.end();
  }
  std::string& out = o.s;
  out += ib::to_text(*p);
  if (m) out += "  push-push " + msg::to_text(*m);
  if (idata) out += idata_text(*idata);
  if (note.migrated_from)
    out += "  path migrated: from " + note.migrated_from->src.text() + " > " + note.migrated_from->dst.text() + " (frame " +
           std::to_string(note.migrated_from->frame) + ")\n";
  return out;
}

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// --tcp-aggregate: the capture's Ethernet frames through flow::tcp_aggregator, into `out_path`.
int aggregate_pcap(const std::string& path, const std::string& out_path, flow::time_ns timeout) {
  const auto text = read_file(path);
  if (!text) {
    std::cerr << "pushwire-dump: error: cannot read " << path << "\n";
    return exit_malformed;
  }
  auto r = wire::pcap::reader::open(std::as_bytes(std::span(text->data(), text->size())));
  if (!r) {
    std::cerr << "pushwire-dump: error: " << describe(r.error()) << "\n";
    return exit_malformed;
  }
  std::vector<std::byte> out_bytes;
  wire::pcap::writer w(out_bytes, wire::pcap::resolution::nano);
  flow::tcp_aggregator agg({.timeout = timeout});
  std::uint64_t t = 0, frames_out = 0;
  const auto emit = [&](const flow::tcp_aggregate& a) { w.add(t, a.frame), ++frames_out; };
  while (true) {
    auto rec = r->next();
    if (!rec) {
      std::cerr << "pushwire-dump: error: " << describe(rec.error()) << "\n";
      return exit_malformed;
    }
    if (!*rec) break;
    if ((*rec)->linktype != wire::pcap::linktype_ethernet) continue;
    t = std::max(t, (*rec)->ts_ns);
    agg.expire(t, emit);
    agg.push((*rec)->data, t, emit);
  }
  agg.flush_all(emit);
  std::ofstream o(out_path, std::ios::binary);
  o.write(reinterpret_cast<const char*>(out_bytes.data()), static_cast<std::streamsize>(out_bytes.size()));
  if (!o) {
    std::cerr << "pushwire-dump: error: cannot write " << out_path << "\n";
    return exit_malformed;
  }
  const auto& s = agg.stats();
  std::cout << "frames in " << s.frames << ", out " << frames_out << "; " << s.joined + s.aggregates << " segments joined into "
            << s.aggregates << " aggregates, " << s.passed << " passed alone, " << s.bad_checksum << " bad checksums; ended by";
  for (std::size_t k = 0; k < flow::agg_flush_count; ++k)
    if (s.flushes[k]) std::cout << " " << flow::agg_flush_names[k].name << " " << s.flushes[k];
  std::cout << "\n";
  return 0;
}

int dump_pcap(const std::string& path, bool json, const wire::codec_options& opt) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::cerr << "pushwire-dump: error: cannot read " << path << "\n";
    return exit_malformed;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  const std::span<const std::byte> file(reinterpret_cast<const std::byte*>(text.data()), text.size());
  auto r = wire::pcap::reader::open(file);
  if (!r) {
    std::cerr << "pushwire-dump: error: " << describe(r.error()) << "\n";
    return exit_malformed;
  }
  const auto warn_skipped = [&] {  // pcapng blocks that are not packets
    for (const auto& s : wire::pcap::skipped_text(*r)) std::cerr << "pushwire-dump: warning: " << s << "\n";
  };
  flow::observer obs({.codec = opt});
  for (std::size_t n = 1;; ++n) {
    auto rec = r->next();
    if (!rec) {
      std::cout.flush();
      warn_skipped();
      std::cerr << "pushwire-dump: error: " << describe(rec.error()) << "\n";
      return exit_malformed;
    }
    if (!*rec) break;
    if ((*rec)->linktype != wire::pcap::linktype_ethernet) {  // per record: pcapng interfaces differ
      std::cout << (json ? "{\"frame\":" + std::to_string(n) + ",\"error\":\"not_roce (pcap link type " +
                               std::to_string((*rec)->linktype) + ")\"}\n"
                         : "frame " + std::to_string(n) + ": error: not_roce (link type)\n");
      continue;
    }
    std::cout << dump_frame(n, (*rec)->data, (*rec)->ts_ns, json, opt, obs);
  }
  std::cout.flush();
  warn_skipped();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  bool json = false;
  std::optional<std::string> hex, file, aggregate_to;
  flow::time_ns aggregation_timeout = 50'000;
  wire::codec_options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--json") {
      json = true;
    } else if (a == "--ibta-rd") {
      opt.rd = ib::rd_class::ibta_rd;
    } else if (a == "--no-icrc") {
      opt.crc = wire::crc_check::skip;
    } else if (a == "--udp-port" && i + 1 < argc) {
      char* end = nullptr;
      const unsigned long v = std::strtoul(argv[++i], &end, 10);
      if (!end || *end != '\0' || v == 0 || v > 65535) return usage("--udp-port needs 1..65535");
      opt.udp_port = static_cast<std::uint16_t>(v);
    } else if (a == "--tcp-aggregate" && i + 1 < argc) {
      aggregate_to = argv[++i];
    } else if (a == "--tcp-aggregation-timeout" && i + 1 < argc) {
      char* end = nullptr;
      const unsigned long long v = std::strtoull(argv[++i], &end, 10);
      if (!end || *end != '\0' || v == 0 || v > 10'000'000) return usage("--tcp-aggregation-timeout needs 1..10000000 (us)");
      aggregation_timeout = v * 1000;
    } else if (a == "--hex" && i + 1 < argc) {
      hex = argv[++i];
    } else if (a == "--max-frame" && i + 1 < argc) {
      char* end = nullptr;
      const unsigned long long v = std::strtoull(argv[++i], &end, 10);
      if (!end || *end != '\0' || v == 0) return usage("--max-frame needs a positive number");
      opt.max_frame = static_cast<std::size_t>(v);
    } else if (a == "--version") {
      std::cout << "pushwire-dump " PUSHWIRE_VERSION_STRING "\n";
      return 0;
    } else if (a == "--help" || a == "-h") {
      usage(nullptr);
      return 0;
    } else if (!a.starts_with("-") && !file) {
      file = std::string{a};
    } else {
      return usage(("unknown argument: " + std::string{a}).c_str());
    }
  }
  if (file && hex) return usage("give either --hex or a capture file");
  if (aggregate_to) return file ? aggregate_pcap(*file, *aggregate_to, aggregation_timeout) : usage("--tcp-aggregate needs a capture file");
  if (file) return dump_pcap(*file, json, opt);
  if (!hex) return usage("nothing to decode: give --hex or a capture file");
  if (*hex == "-") hex = std::string(std::istreambuf_iterator<char>(std::cin), {});

  const auto bytes = wire::parse_hex(*hex);
  if (!bytes) {
    std::cerr << "pushwire-dump: error: input is not hex\n";
    return exit_malformed;
  }
  const auto m = msg::decode(*bytes, opt);
  if (!m) {
    std::cerr << "pushwire-dump: error: " << describe(m.error()) << "\n";
    return exit_malformed;
  }
  std::cout << (json ? msg::to_json(*m) + "\n" : msg::to_text(*m));
  return 0;
}
