// pushwire-pcap-records FILE: every record wire::pcap::reader reads from a pcap or pcapng file,
// one line each, for the tshark oracle (tests/wire/pcapng_tshark.py):
//   interface_id <TAB> linktype <TAB> ts_ns or "-" (no timestamp) <TAB> orig_len <TAB> hex bytes
// The reader's skipped-block warnings go to stderr. Exit status 2 with an error line on stderr
// for a malformed file.
#include <cstdio>
#include <fstream>
#include <iterator>
#include <span>
#include <string>
#include <vector>

#include <pushwire/wire/hex.hpp>
#include <pushwire/wire/pcap.hpp>

using namespace pushwire;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: pushwire-pcap-records FILE\n");
    return 64;
  }
  std::ifstream in(argv[1], std::ios::binary);
  const std::vector<char> raw{std::istreambuf_iterator<char>(in), {}};
  auto r = wire::pcap::reader::open(std::as_bytes(std::span(raw)));
  auto fail = [](const wire::error& e) {
    std::fprintf(stderr, "error: %s at byte %zu (%.*s)\n", std::string{wire::to_string(e.code)}.c_str(), e.offset,
                 static_cast<int>(e.field.size()), e.field.data());
    return 2;
  };
  if (!r) return fail(r.error());
  for (;;) {
    const auto x = r->next();
    if (!x) return fail(x.error());
    if (!*x) break;
    const auto& rec = **x;
    const std::string ts = rec.has_timestamp ? std::to_string(rec.ts_ns) : "-";
    std::printf("%u\t%u\t%s\t%u\t%s\n", rec.interface_id, rec.linktype, ts.c_str(), rec.orig_len, wire::to_hex(rec.data).c_str());
  }
  for (const auto& s : wire::pcap::skipped_text(*r)) std::fprintf(stderr, "warning: %s\n", s.c_str());
  return 0;
}
