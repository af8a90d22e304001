// ctest "ib: build(decode(f)) is f": every frame the parser accepts, from every file under the
// given paths (pcap captures record by record, other files as one raw frame each: the fuzz
// corpora), is decoded into an ib::roce_packet and built again; the bytes must be the frame's,
// under both readings of opcodes 0x40-0x5F. Files that are not frames are skipped and counted.
// Exit status: 0 pass, 1 a mismatch (printed with the file and record), 2 fewer than MIN frames.
//
// usage: rebuild_check MIN PATH...
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <pushwire/ib/roce.hpp>
#include <pushwire/wire/hex.hpp>
#include <pushwire/wire/pcap.hpp>

using namespace pushwire;
namespace fs = std::filesystem;

namespace {

std::size_t checked = 0, skipped = 0, failed = 0;

void check(std::span<const std::byte> f, const std::string& where) {
  bool any = false;
  for (const auto rd : {ib::rd_class::dc, ib::rd_class::ibta_rd}) {
    const auto p = ib::decode(f, {.rd = rd});
    if (!p) continue;
    any = true;
    std::vector<std::byte> out(f.size() + 64);
    const auto n = ib::build(*p, out);
    if (!n || *n != f.size() || !std::equal(f.begin(), f.end(), out.begin())) {
      ++failed;
      std::printf("MISMATCH %s (%s): %s\n  frame %s\n  built %s\n", where.c_str(), rd == ib::rd_class::dc ? "dc" : "rd",
                  n ? "different bytes" : std::string{wire::to_string(n.code())}.c_str(), wire::to_hex(f).c_str(),
                  n ? wire::to_hex(std::span(out).first(*n)).c_str() : "-");
    }
  }
  any ? ++checked : ++skipped;
}

void file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  const std::vector<char> raw{std::istreambuf_iterator<char>(in), {}};
  const auto bytes = std::as_bytes(std::span(raw));
  if (auto r = wire::pcap::reader::open(bytes)) {
    for (int k = 1;; ++k) {
      const auto rec = r->next();
      if (!rec || !*rec) break;
      check((*rec)->data, path.string() + " record " + std::to_string(k));
    }
    return;
  }
  check(bytes, path.string());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: rebuild_check MIN PATH...\n");
    return 64;
  }
  const std::size_t min = std::strtoul(argv[1], nullptr, 10);
  for (int a = 2; a < argc; ++a) {
    const fs::path p = argv[a];
    if (fs::is_directory(p)) {
      for (const auto& e : fs::recursive_directory_iterator(p))
        if (e.is_regular_file()) file(e.path());
    } else if (fs::is_regular_file(p)) {
      file(p);
    } else {
      std::printf("missing: %s\n", p.c_str());
    }
  }
  std::printf("%zu frames decoded and rebuilt, %zu mismatches, %zu inputs not RoCEv2\n", checked, failed, skipped);
  if (failed) return 1;
  return checked < min ? 2 : 0;
}
