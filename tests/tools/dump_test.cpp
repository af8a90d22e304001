// pushwire-dump as a user runs it: text and JSON output, exit status 2 and one error line on
// malformed input.
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <span>
#include <string>
#include <vector>

#include <pushwire/wire/pcap.hpp>

#include "../support/pcapng.hpp"
#include "tools.hpp"

#include "../msg/vectors.hpp"


using namespace pushwire;
namespace pcap = wire::pcap;

namespace {
test::run_result run(const std::string& args, const std::string& stdin_text = {}) {
  return test::run_dump(args, stdin_text);
}
}  // namespace

TEST_CASE("pushwire-dump --json prints the library's JSON for every vector", "[tools][dump]") {
  vec::for_each_case([](const auto& c) {
    DYNAMIC_SECTION(c.name) {
      auto r = run("--json --hex " + wire::to_hex(c.bytes));
      CHECK(r.status == 0);
      CHECK(r.err.empty());
      CHECK(r.out == msg::to_json(c.value) + "\n");
      auto t = run("--hex " + wire::to_hex(c.bytes));
      CHECK(t.status == 0);
      CHECK(t.out == msg::to_text(c.value));
    }
  });
}

TEST_CASE("pushwire-dump: exact output for the seed's BufferPoolFlushReply", "[tools][dump]") {
  auto r = run("--json --hex '0105 0001 00000000 deadbeef'");
  CHECK(r.status == 0);
  CHECK(r.out == R"({"pushwire.function":"BufferPoolFlushReply","pushwire.version":1,"pushwire.txn":3735928559})" "\n");
}

TEST_CASE("pushwire-dump: malformed frames exit 2 with one line naming the errc", "[tools][dump]") {
  struct bad {
    std::string hex;
    std::string err;
  };
  const bad cases[] = {
      {"0101000100000000000000000000000300000001", "pushwire-dump: error: truncated at byte 20 (pools)\n"},
      {"01010001000000000000000000000002" "00000001000000010000000100000000" "00000000000000000000000000000000",
       "pushwire-dump: error: count_mismatch at byte 12 (pool_count)\n"},
      {"010500010000000000000000ff", "pushwire-dump: error: trailing_bytes at byte 12\n"},
      {"0105000200000000000000000", "pushwire-dump: error: input is not hex\n"},
      {"0999000100000000000000000000", "pushwire-dump: error: unknown_function at byte 0 (function)\n"},
      {"0105", "pushwire-dump: error: truncated at byte 2\n"},
      {"01050002000000000000000000", "pushwire-dump: error: unsupported_version at byte 2 (version)\n"},
  };
  for (const auto& b : cases) {
    INFO(b.hex);
    auto r = run("--json --hex " + b.hex);
    CHECK(r.status == 2);
    CHECK(r.out.empty());
    CHECK(r.err == b.err);
  }
  auto big = run("--max-frame 16 --hex " + wire::to_hex(vec::recv_pool.bytes));
  CHECK(big.status == 2);
  CHECK(big.err == "pushwire-dump: error: too_large at byte 16\n");
}

TEST_CASE("pushwire-dump: stdin, usage errors", "[tools][dump]") {
  auto r = run("--json --hex -", wire::to_hex(vec::send_data.bytes) + "\n");
  CHECK(r.status == 0);
  CHECK(r.out == msg::to_json(vec::send_data.value) + "\n");
  CHECK(run("").status == 1);
  CHECK(run("--bogus").status == 1);
  CHECK(run("--max-frame x --hex 00").status == 1);
  CHECK(run("--help").status == 0);
}

using test::lines_of;

TEST_CASE("pushwire-dump FILE.pcap: the generated RoCE exchange, one JSON object per frame", "[tools][dump][pcap]") {
  const std::string pcap = PUSHWIRE_WORKDIR "/dump-gen.pcap";
  std::system("mkdir -p '" PUSHWIRE_WORKDIR "'");
  REQUIRE(std::system(("'" PUSHWIRE_GEN "' --framing roce --bad-icrc --out '" + pcap + "'").c_str()) == 0);
  auto r = run("--json '" + pcap + "'");
  REQUIRE(r.status == 0);
  CHECK(r.err.empty());
  const auto l = lines_of(r.out);
  REQUIRE(l.size() == 17);
  for (std::size_t i = 0; i < l.size(); ++i) CHECK(l[i].starts_with("{\"frame\":" + std::to_string(i + 1) + ","));
  CHECK(l[0].find(R"("infiniband.bth.opcode":4)") != std::string::npos);
  CHECK(l[0].find(R"("pushwire.function":"BufferRecvPool","pushwire.version":1,"pushwire.txn":1,"pool_count":2)") != std::string::npos);
  CHECK(l[2].find(R"("infiniband.immdt":117768448)") != std::string::npos);  // 0x07050100
  CHECK(l[2].find(R"("pushwire.idata":[7,5,256])") != std::string::npos);
  CHECK(l[5].find(R"("infiniband.aeth.syndrome":48)") != std::string::npos);  // page-fault ACK: RNR NAK, 2.56 ms
  CHECK(l[8].find(R"("pushwire.function":"BufferRDMAIndicate")") != std::string::npos);
  CHECK(l[13].find(R"("pushwire.opcode":"DC_DISCONNECT")") != std::string::npos);
  CHECK(l[14].find(R"("pushwire.opcode":"CNP")") != std::string::npos);
  CHECK(l[15].find(R"("pushwire.function":"SendData")") != std::string::npos);
  for (std::size_t i = 0; i + 1 < l.size(); ++i) CHECK(l[i].find(R"("pushwire.icrc":"good")") != std::string::npos);
  CHECK(l[16].find(R"("pushwire.icrc":"bad")") != std::string::npos);
  auto t = run("'" + pcap + "'");
  CHECK(t.status == 0);
  CHECK(t.out.find("frame 3: Ethernet") != std::string::npos);
  CHECK(t.out.find("idata: pool 7, element 5, 256 bytes") != std::string::npos);
}

TEST_CASE("pushwire-dump FILE.pcap: a frame that is not RoCE gets an error key, a broken file exits 2", "[tools][dump][pcap]") {
  std::vector<std::byte> file;
  pcap::writer w{file};
  const auto arp = test::copy(test::hex<"ffffffffffff 020000000001 0806 0001080006040001">());
  w.add(1, arp);
  const std::string path = PUSHWIRE_WORKDIR "/dump-arp.pcap";
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(file.data()), static_cast<std::streamsize>(file.size()));
  auto r = run("--json '" + path + "'");
  CHECK(r.status == 0);
  CHECK(r.out == "{\"frame\":1,\"error\":\"not_roce at byte 12 (eth.type)\"}\n");
  file.erase(file.end() - 3, file.end());  // cut inside the record
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(file.data()), static_cast<std::streamsize>(file.size()));
  auto cut = run("--json '" + path + "'");
  CHECK(cut.status == 2);
  CHECK(cut.err.find("truncated") != std::string::npos);
  auto missing = run("'" PUSHWIRE_WORKDIR "/no-such.pcap'");
  CHECK(missing.status == 2);
}

TEST_CASE("pushwire-dump FILE.pcapng: the same frames as the pcap, per-interface link types, skipped blocks warned", "[tools][dump][pcap][pcapng]") {
  const std::string dir = PUSHWIRE_WORKDIR, pcap_path = dir + "/dump-ng-gen.pcap";
  std::system(("mkdir -p '" + dir + "'").c_str());
  REQUIRE(std::system(("'" PUSHWIRE_GEN "' --framing roce --out '" + pcap_path + "'").c_str()) == 0);
  auto want = run("--json '" + pcap_path + "'");
  REQUIRE(want.status == 0);
  const auto want_lines = lines_of(want.out);
  REQUIRE(want_lines.size() == 16);
  std::ifstream in(pcap_path, std::ios::binary);
  const std::vector<char> raw{std::istreambuf_iterator<char>(in), {}};
  const auto ip = test::copy(test::hex<"45000014 00000000 40110000 0a000001 0a000002">());
  for (const bool big : {false, true}) {
    INFO((big ? "big-endian" : "little-endian"));
    test::pcapng::writer w(big);
    w.shb().idb(1, 0, 9).other(5, std::vector<std::byte>(12)).idb(101, 0);  // interface 1: raw IP
    auto r = pcap::reader::open(std::as_bytes(std::span(raw)));
    REQUIRE(r.has_value());
    for (auto rec = r->next(); rec && *rec; rec = r->next()) w.epb(0, (*rec)->ts_ns, (*rec)->data);
    w.epb(1, 0, ip).other(5, std::vector<std::byte>(12)).end_section();
    const std::string path = dir + (big ? "/dump-be.pcapng" : "/dump-le.pcapng");
    test::write_file(path, w.out);
    auto got = run("--json '" + path + "'");
    CHECK(got.status == 0);
    CHECK(got.err == "pushwire-dump: warning: skipped 2 blocks of type 0x00000005 (interface statistics)\n");
    const auto l = lines_of(got.out);
    REQUIRE(l.size() == 17);
    for (std::size_t i = 0; i < 16; ++i) CHECK(l[i] == want_lines[i]);
    CHECK(l[16] == R"j({"frame":17,"error":"not_roce (pcap link type 101)"})j");
    auto text = run("'" + path + "'");
    CHECK(text.status == 0);
    CHECK(text.out.find("frame 17: error: not_roce (link type)") != std::string::npos);
    // An EPB naming an interface the section does not have; a file cut inside a block.
    auto bad = w.out;
    bad[28 + 32 + 24 + 20 + (big ? 11 : 8)] = std::byte{7};  // the first EPB's interface id
    test::write_file(path, bad);
    auto b = run("--json '" + path + "'");
    CHECK(b.status == 2);
    CHECK(b.out.empty());
    CHECK(b.err == "pushwire-dump: warning: skipped 1 block of type 0x00000005 (interface statistics)\n"
                   "pushwire-dump: error: bad_pcap at byte " + std::to_string(28 + 32 + 24 + 20 + 8) + " (interface_id)\n");
    bad = w.out;
    bad.resize(bad.size() - 30);
    test::write_file(path, bad);
    auto cut = run("--json '" + path + "'");
    CHECK(cut.status == 2);
    CHECK(lines_of(cut.out).size() == 16);
    CHECK(cut.err.find("pushwire-dump: error: truncated") != std::string::npos);
  }
}
