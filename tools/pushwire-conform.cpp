// pushwire-conform: checks a capture of RoCEv2 or cell traffic against the protocol's rules,
// statefully, with the reference machines (flow::conformance; spec/conformance.md).
//
//   pushwire-conform FILE [--json] [--udp-port N] [--mtu N] [--only RULES] [--ibta-rd] [--complete]
//                    [--cnp-interval NS]
//
// FILE is pcap or pcapng (Ethernet). One line per violation, in frame order:
//   frame 12: req.mtu: RC 198.18.0.1 QP ? > 198.18.0.2 QP 0x000012: expected ...; seen ... [reference]
// With --json one object per violation (frame, rule, conversation, expected, seen, reference),
// then a summary object (frames, conversations, violations per rule).
// RoCEv2 is UDP destination port 4791 (or --udp-port) whatever the source port. The path MTU is
// inferred per request stream from its largest FIRST or MIDDLE payload unless --mtu is given.
// --only takes rule ids and groups, comma-separated: frame.icrc,resp,pp.* (a group is the part
// before the dot). --complete says the capture is complete (taken at an endpoint, nothing lost or
// reordered before it): a skipped PSN, a response before its request, a lost READ response are
// then violations at once, where otherwise the capture's own losses and reorderings explain them.
// Exit status: 0 no violation, 1 violations, 2 unreadable input or a bad command line.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <pushwire/flow/conform.hpp>
#include <pushwire/version.hpp>
#include <pushwire/wire/json.hpp>
#include <pushwire/wire/pcap.hpp>

namespace {

using namespace pushwire;

constexpr int exit_clean = 0, exit_violations = 1, exit_unreadable = 2;

int usage(const char* why) {
  if (why) std::cerr << "pushwire-conform: " << why << "\n";
  std::cerr << "usage: pushwire-conform FILE [--json] [--udp-port N] [--mtu N] [--only RULES] [--ibta-rd] [--complete]\n"
               "                        [--cnp-interval NS]\n"
               "  FILE          a pcap or pcapng capture (Ethernet) of RoCEv2 or cell traffic\n"
               "  --json        one JSON object per violation, then a summary object\n"
               "  --udp-port N  RoCEv2 UDP destination port (default 4791)\n"
               "  --mtu N       the path MTU (256, 512, 1024, 2048, 4096); default: inferred per request stream\n"
               "  --only RULES  judge only these rules: ids or groups, comma-separated (req.mtu,resp,pp)\n"
               "  --ibta-rd     read opcodes 0x40-0x5F as IBTA RD, not DC\n"
               "  --complete    the capture is complete (taken at an endpoint, nothing lost or reordered before it):\n"
               "                a skipped PSN, a response before its request, a lost response are violations;\n"
               "                without it they are taken for the capture's own losses and reorderings\n"
               "  --cnp-interval NS  cnp.pacing: the least time between two CNPs to one QP (default 4000; 0: not judged)\n"
               "rules: spec/conformance.md; exit status: 0 clean, 1 violations, 2 unreadable input or bad arguments\n";
  return exit_unreadable;
}

std::optional<unsigned long> number(const char* s) {
  char* end = nullptr;
  const unsigned long v = std::strtoul(s, &end, 10);
  if (!end || *end != '\0' || end == s) return std::nullopt;
  return v;
}

/// The rule mask of "req.mtu,resp,pp.*": ids, or groups (the id's part before the dot).
std::optional<std::uint32_t> rule_mask(std::string_view list) {
  std::uint32_t m = 0;
  while (!list.empty()) {
    const std::size_t comma = list.find(',');
    std::string_view item = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
    if (item.ends_with(".*")) item.remove_suffix(2);
    bool any = false;
    for (const flow::rule_info& r : flow::rule_table)
      if (r.name == item || (r.name.starts_with(item) && r.name.size() > item.size() && r.name[item.size()] == '.')) {
        m |= 1u << static_cast<unsigned>(r.id);
        any = true;
      }
    if (!any) return std::nullopt;
  }
  return m;
}

void print(const flow::violation& v, bool json) {
  const flow::rule_info& r = flow::info(v.id);
  if (!json) {
    std::cout << "frame " << v.frame << ": " << r.name << ": " << v.conversation << ": expected " << v.expected << "; seen " << v.seen
              << " [" << r.reference << "]\n";
    return;
  }
  std::string s;
  wire::json_writer w{s};
  w.begin_object();
  w.key("frame");
  w.uint(v.frame);
  w.key("rule");
  w.string(r.name);
  w.key("conversation");
  w.string(v.conversation);
  w.key("expected");
  w.string(v.expected);
  w.key("seen");
  w.string(v.seen);
  w.key("reference");
  w.string(r.reference);
  w.end_object();
  std::cout << s << "\n";
}

void print_summary(const flow::conform_summary& sum, bool json) {
  std::uint64_t total = 0;
  for (const auto n : sum.violations) total += n;
  if (!json) {
    std::cout << sum.frames << " frames (" << sum.roce << " RoCEv2, " << sum.cells << " cells, " << sum.other << " other), "
              << sum.conversations << " conversations, " << total << (total == 1 ? " violation" : " violations");
    bool first = true;
    for (const flow::rule_info& r : flow::rule_table)
      if (const auto n = sum.violations[static_cast<std::size_t>(r.id)]) {
        std::cout << (first ? ": " : ", ") << r.name << " " << n;
        first = false;
      }
    std::cout << "\n";
    return;
  }
  std::string s;
  wire::json_writer w{s};
  w.begin_object();
  w.key("summary");
  w.begin_object();
  w.key("frames");
  w.uint(sum.frames);
  w.key("conversations");
  w.uint(sum.conversations);
  w.key("violations");
  w.begin_object();
  for (const flow::rule_info& r : flow::rule_table) {
    w.key(r.name);
    w.uint(sum.violations[static_cast<std::size_t>(r.id)]);
  }
  w.end_object();
  w.key("total");
  w.uint(total);
  w.end_object();
  w.end_object();
  std::cout << s << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  bool json = false;
  std::optional<std::string> file;
  flow::conform_options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--json") {
      json = true;
    } else if (a == "--ibta-rd") {
      opt.codec.rd = ib::rd_class::ibta_rd;
    } else if (a == "--complete") {
      opt.complete = true;
    } else if (a == "--udp-port" && i + 1 < argc) {
      const auto v = number(argv[++i]);
      if (!v || *v == 0 || *v > 65535) return usage("--udp-port needs 1..65535");
      opt.codec.udp_port = static_cast<std::uint16_t>(*v);
    } else if (a == "--cnp-interval" && i + 1 < argc) {
      const auto v = number(argv[++i]);
      if (!v || *v > 1'000'000'000) return usage("--cnp-interval needs 0..1000000000 (ns)");
      opt.cnp_interval = *v;
    } else if (a == "--mtu" && i + 1 < argc) {
      const auto v = number(argv[++i]);
      if (!v || !flow::is_ib_mtu(*v)) return usage("--mtu needs 256, 512, 1024, 2048 or 4096");
      opt.mtu = static_cast<std::uint32_t>(*v);
    } else if (a == "--only" && i + 1 < argc) {
      const auto m = rule_mask(argv[++i]);
      if (!m) return usage("--only: a rule or group that does not exist (see spec/conformance.md)");
      opt.rules = *m;
    } else if (a == "--version") {
      std::cout << "pushwire-conform " PUSHWIRE_VERSION_STRING "\n";
      return exit_clean;
    } else if (a == "--help" || a == "-h") {
      usage(nullptr);
      return exit_clean;
    } else if (!a.starts_with("-") && !file) {
      file = std::string{a};
    } else {
      return usage(("unknown argument: " + std::string{a}).c_str());
    }
  }
  if (!file) return usage("no capture file");
  std::ifstream in(*file, std::ios::binary);
  if (!in) {
    std::cerr << "pushwire-conform: error: cannot read " << *file << "\n";
    return exit_unreadable;
  }
  const std::vector<char> raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto bytes = std::as_bytes(std::span<const char>(raw));
  auto unreadable = [](const wire::error& e) {
    std::cerr << "pushwire-conform: error: " << wire::to_string(e.code) << " at byte " << e.offset
              << (e.field.empty() ? std::string{} : " (" + std::string{e.field} + ")") << "\n";
    return exit_unreadable;
  };
  // Every record, read once (an unreadable file says so before anything is judged).
  struct frame {
    std::span<const std::byte> data;
    std::uint64_t ts;
    std::uint32_t orig;
    bool ethernet;
  };
  std::vector<frame> frames;
  {
    auto r = wire::pcap::reader::open(bytes);
    if (!r) return unreadable(r.error());
    for (;;) {
      auto rec = r->next();
      if (!rec) return unreadable(rec.error());
      if (!*rec) break;
      frames.push_back({(*rec)->data, (*rec)->ts_ns, (*rec)->orig_len, (*rec)->linktype == wire::pcap::linktype_ethernet});
    }
  }
  flow::conformance c(opt);
  if (!opt.mtu)
    for (const frame& f : frames)
      if (f.ethernet) c.learn(f.data);
  std::vector<flow::violation> found;
  std::uint64_t n = 0;
  for (const frame& f : frames) {
    ++n;
    if (!f.ethernet) continue;  // another link type: nobody's RoCEv2 or cells
    for (const flow::violation& v : c.check(n, f.ts, f.data, f.orig)) found.push_back(v);
  }
  for (flow::violation& v : c.finish()) found.push_back(std::move(v));
  std::stable_sort(found.begin(), found.end(), [](const flow::violation& a, const flow::violation& b) { return a.frame < b.frame; });
  for (const flow::violation& v : found) print(v, json);
  flow::conform_summary sum = c.summary();
  sum.frames = n;
  print_summary(sum, json);
  return found.empty() ? exit_clean : exit_violations;
}
