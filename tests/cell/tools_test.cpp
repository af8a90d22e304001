// pushwire-gen --framing cell and pushwire-dump on cell captures, as a user runs them; and
// corrupted captures, which must never crash the dump.
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include <pushwire/cell/cell.hpp>
#include <pushwire/cell/testing.hpp>
#include <pushwire/wire/pcap.hpp>

#include "../support/process.hpp"
#include "../support/test_support.hpp"

#if !defined(PUSHWIRE_DUMP) || !defined(PUSHWIRE_GEN) || !defined(PUSHWIRE_WORKDIR)
#error "PUSHWIRE_DUMP, PUSHWIRE_GEN and PUSHWIRE_WORKDIR must be defined"
#endif

using namespace pushwire;
using test::lines_of;

namespace {

test::run_result dump(const std::string& args) { return test::run_command("'" PUSHWIRE_DUMP "' " + args); }

std::string gen_cells() {
  const std::string pcap = PUSHWIRE_WORKDIR "/cells.pcap";
  std::system("mkdir -p '" PUSHWIRE_WORKDIR "'");
  REQUIRE(std::system(("'" PUSHWIRE_GEN "' --framing cell --out '" + pcap + "'").c_str()) == 0);
  return pcap;
}

bool has(const std::string& line, const std::string& what) { return line.find(what) != std::string::npos; }

}  // namespace

TEST_CASE("pushwire-gen --framing cell writes the scripted exchange, pushwire-dump --json decodes it", "[cells][tools]") {
  const std::string pcap = gen_cells();
  auto r = dump("--json '" + pcap + "'");
  REQUIRE(r.status == 0);
  CHECK(r.err.empty());
  const auto l = lines_of(r.out);
  // Send, ACK, 3-cell write, ACK, 3-cell write, page-fault delay, 3-cell write again, ACK.
  REQUIRE(l.size() == 14);
  for (std::size_t i = 0; i < l.size(); ++i) {
    INFO(l[i]);
    CHECK(l[i].starts_with("{\"frame\":" + std::to_string(i + 1) + ","));
    CHECK(has(l[i], R"("pushwire.cell.crc":"good")"));
    CHECK(!has(l[i], "\"error\""));
    CHECK(!has(l[i], "pushwire.cell.reassembly"));
  }
  // The Send carries the pool advertisement, whole in one cell.
  CHECK(has(l[0], R"("pushwire.cell.type_name":"Send")"));
  CHECK(has(l[0], R"("pushwire.cell.ack_req":1)"));
  CHECK(has(l[0], R"("pushwire.cell.packet_crc":"good","pushwire.function":"BufferRecvPool")"));
  CHECK(has(l[0], R"("pool_count":2)"));
  CHECK(has(l[1], R"("pushwire.cell.type_name":"ACK")"));
  CHECK(has(l[1], R"("pushwire.cell.psn":100)"));
  // The write: VA/MH in the first cell only, idata and the packet CRC in the last.
  CHECK(has(l[2], R"("pushwire.cell.csn":0,"pushwire.cell.cell_count":3,"pushwire.cell.length":256,"pushwire.cell.va":139637976798208,"pushwire.cell.mh":4660)"));
  CHECK(!has(l[2], "packet_crc"));
  CHECK(!has(l[3], "pushwire.cell.va"));
  CHECK(has(l[4], R"("pushwire.cell.length":88)"));
  CHECK(has(l[4], R"("pushwire.cell.idata":117768792)"));  // 0x07050258
  CHECK(has(l[4], R"("pushwire.cell.packet_crc":"good","pushwire.idata":[7,5,600])"));
  // The page-fault delay ACK names the PSN and the delay.
  CHECK(has(l[9], R"("pushwire.cell.type_name":"PageFaultDelay")"));
  CHECK(has(l[9], R"("pushwire.cell.psn":501)"));
  CHECK(has(l[9], R"("pushwire.cell.delay_us":2000)"));
  // The write sent again after the delay reassembles as a new delivery.
  CHECK(has(l[12], R"("pushwire.cell.packet_crc":"good","pushwire.idata":[7,6,600])"));

  auto t = dump("'" + pcap + "'");
  CHECK(t.status == 0);
  CHECK(has(t.out, "frame 3: cell RDMAWrite 02:00:00:00:00:02 > 02:00:00:00:00:01"));
  CHECK(has(t.out, "psn 500 cell 0/3 [FAR] 256 bytes"));
  CHECK(has(t.out, "delay 2000 us"));
  CHECK(has(t.out, "idata: pool 7, element 5, 600 bytes"));
}

TEST_CASE("pushwire-dump reports bad cell and packet CRCs, and cells it cannot parse", "[cells][tools]") {
  const std::vector<std::byte> payload(300, std::byte{0x42});
  cell::packet_spec p{.dst = {2, 0, 0, 0, 0, 2}, .src = {2, 0, 0, 0, 0, 1}, .dst_wqp = 1, .src_wqp = 2, .psn = 9};
  auto seg = cell::segmenter::make(p, std::span<const std::byte>(payload)).value();
  std::vector<std::vector<std::byte>> cells;
  while (!seg.done()) {
    cells.emplace_back(seg.next_size());
    (void)seg.next(cells.back());
  }
  REQUIRE(cells.size() == 2);
  std::vector<std::byte> file;
  wire::pcap::writer w{file};
  auto flipped = cells[1];
  flipped[40] ^= std::byte{1};  // data: the cell CRC catches it
  auto not_cell = cells[0];
  not_cell[14] = std::byte{0x20};  // version 2
  w.add(1, cells[0]);
  w.add(2, flipped);
  w.add(3, cells[1]);
  w.add(4, cells[0]);  // the same packet again: a duplicate
  p.psn = 10;
  auto seg2 = cell::segmenter::make(p, std::span<const std::byte>(payload)).value();
  std::vector<std::byte> c0(seg2.next_size()), c1(seg2.next_size());
  (void)seg2.next(c0);
  c1.resize(seg2.next_size());
  (void)seg2.next(c1);
  const auto v1 = cell::decode(std::span<const std::byte>(c1)).value();
  c1[v1.at.packet_crc] ^= std::byte{1};  // the packet CRC is wrong, the cell resealed
  REQUIRE(cell::testing::reseal(c1).code == wire::errc{});
  w.add(5, c0);
  w.add(6, c1);
  w.add(7, not_cell);
  const std::string path = PUSHWIRE_WORKDIR "/cells-bad.pcap";
  std::system("mkdir -p '" PUSHWIRE_WORKDIR "'");
  test::write_file(path, file);
  auto r = dump("--json '" + path + "'");
  REQUIRE(r.status == 0);
  const auto l = lines_of(r.out);
  REQUIRE(l.size() == 7);
  CHECK(has(l[0], R"("pushwire.cell.crc":"good")"));
  CHECK(has(l[1], R"("pushwire.cell.crc":"bad","pushwire.cell.packet_crc":"unverified")"));
  CHECK(has(l[2], R"("pushwire.cell.crc":"good","pushwire.cell.packet_crc":"good")"));
  CHECK(has(l[3], R"("pushwire.cell.reassembly":"cell_duplicate")"));
  CHECK(has(l[5], R"("pushwire.cell.crc":"good","pushwire.cell.packet_crc":"bad","pushwire.cell.reassembly":"packet_crc_mismatch")"));
  CHECK(l[6] == R"x({"frame":7,"error":"unsupported_version at byte 14 (version)"})x");
}

TEST_CASE("corrupted cell captures never crash pushwire-dump", "[cells][tools][robustness]") {
  const std::string pcap = gen_cells();
  std::ifstream in(pcap, std::ios::binary);
  const std::vector<char> original((std::istreambuf_iterator<char>(in)), {});
  REQUIRE(original.size() > 24);
  std::mt19937 rng(7);
  const std::string path = PUSHWIRE_WORKDIR "/cells-corrupt.pcap";
  int with_errors = 0;
  for (int i = 0; i < 60; ++i) {
    std::vector<char> f = original;
    const int flips = 1 + static_cast<int>(rng() % 8);
    for (int k = 0; k < flips; ++k) f[24 + rng() % (f.size() - 24)] ^= static_cast<char>(1u << (rng() % 8));
    if (i % 5 == 4) f.resize(24 + rng() % (f.size() - 24));  // and cut
    test::write_file(path, f);
    auto r = dump((i % 2 ? "--json '" : "'") + path + "'");
    INFO("run " << i << " stderr " << r.err);
    REQUIRE((r.status == 0 || r.status == 2));  // decoded, or a malformed pcap reported
    if (r.status == 2) CHECK(!r.err.empty());
    with_errors += has(r.out, "error") || has(r.out, "bad") || r.status == 2;
  }
  CHECK(with_errors > 30);
}
