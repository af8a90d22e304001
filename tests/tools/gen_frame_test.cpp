// pushwire-gen frame as a user runs it: hex and pcap output, given values kept even when wrong
// (pushwire-dump, and the frame's bytes, show them), and the errors (one line, exit status 2).
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include <pushwire/wire/hex.hpp>
#include <pushwire/wire/pcap.hpp>

#include "../support/pcapng.hpp"
#include "tools.hpp"


using namespace pushwire;

namespace {

test::run_result gen(const std::string& args) { return test::run_gen("frame " + args); }
test::run_result dump(const std::string& args) { return test::run_dump(args); }

// The brief's RC RDMA WRITE ONLY: 4 bytes to VA 0x1000, R_Key 0x2b8, QP 0x11, PSN 5.
const std::string write_keys =
    "eth.dst=02:00:00:00:00:02 ip.src=10.0.0.1 ip.dst=10.0.0.2 udp.srcport=49152 infiniband.bth.opcode=10 "
    "infiniband.bth.destqp=0x11 infiniband.bth.psn=5 infiniband.reth.va=0x1000 infiniband.reth.r_key=0x2b8 "
    "infiniband.reth.dmalen=4 --payload 01020304";

std::vector<std::byte> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::vector<char> raw{std::istreambuf_iterator<char>(in), {}};
  const auto b = std::as_bytes(std::span(raw));
  return {b.begin(), b.end()};
}

}  // namespace

TEST_CASE("pushwire-gen frame --hex: the frame, its fields where the layout puts them", "[tools][gen]") {
  auto r = gen(write_keys + " --hex");
  REQUIRE(r.status == 0);
  CHECK(r.err.empty());
  const std::string h = r.out;
  REQUIRE(h.size() == 2 * (14 + 20 + 8 + 12 + 16 + 4 + 4) + 1);
  CHECK(h.substr(0, 24) == "020000000002000000000000");  // dst, src (zero)
  CHECK(h.substr(24, 4) == "0800");
  CHECK(h.substr(28, 20) == "45000040000040004011");  // IHL 5, length 64, DF, TTL 64, UDP
  CHECK(h.substr(52, 16) == "0a0000010a000002");
  CHECK(h.substr(68, 16) == "c00012b7002c0000");  // UDP 49152 > 4791, length 44, checksum 0
  CHECK(h.substr(84, 24) == "0a00ffff0000001100000005");
  CHECK(h.substr(108, 32) == "0000000000001000000002b800000004");
  CHECK(h.substr(140, 8) == "01020304");
  // pushwire-dump reads the frame back: good IPv4 checksum and ICRC.
  const std::string pcap = PUSHWIRE_WORKDIR "/gen-frame-hex.pcap";
  std::system("mkdir -p '" PUSHWIRE_WORKDIR "'");
  std::remove(pcap.c_str());
  REQUIRE(gen(write_keys + " --out '" + pcap + "'").status == 0);
  auto d = dump("'" + pcap + "'");
  CHECK(d.out.find("RC_RDMA_WRITE_ONLY (0x0a)") != std::string::npos);
  CHECK(d.out.find("bad header checksum") == std::string::npos);
  CHECK(d.out.find("ICRC 0x" + h.substr(h.size() - 9, 8) + " good") != std::string::npos);  // as the wire bytes read
}

TEST_CASE("pushwire-gen frame: an explicit wrong value is kept", "[tools][gen]") {
  const std::string base = "pushwire.opcode=RC_SEND_ONLY pushwire.payload=00112233 --hex";
  const auto good = gen(base);
  REQUIRE(good.status == 0);
  const std::string g = good.out;
  // IPv4 header checksum (bytes 24-25).
  auto r = gen(base + " ip.checksum=0xbeef");
  REQUIRE(r.status == 0);
  CHECK(r.out.substr(48, 4) == "beef");
  CHECK(r.out.substr(0, 48) == g.substr(0, 48));
  CHECK(r.out.substr(52) == g.substr(52));  // the ICRC masks the checksum: unchanged
  // ICRC, as Wireshark shows it: its wire bytes in order.
  r = gen(base + " infiniband.invariant.crc=0x08c6154a");
  REQUIRE(r.status == 0);
  CHECK(r.out.substr(r.out.size() - 9) == "08c6154a\n");
  CHECK(r.out.substr(0, r.out.size() - 9) == g.substr(0, g.size() - 9));
  // UDP length (bytes 38-39).
  r = gen(base + " udp.length=99");
  REQUIRE(r.status == 0);
  CHECK(r.out.substr(76, 4) == "0063");
  // pushwire-dump sees what is wrong in each.
  const std::string pcap = PUSHWIRE_WORKDIR "/gen-frame-wrong.pcap";
  std::system("mkdir -p '" PUSHWIRE_WORKDIR "'");
  std::remove(pcap.c_str());
  for (const char* wrong : {"ip.checksum=0xbeef", "infiniband.invariant.crc=0x08c6154a", "udp.length=99"})
    REQUIRE(gen(base + " " + wrong + " --out '" + pcap + "'").status == 0);
  auto d = dump("--json '" + pcap + "'");
  REQUIRE(d.status == 0);
  const auto l = test::lines_of(d.out);
  REQUIRE(l.size() == 3);
  CHECK(l[0].find(R"("ip.checksum":48879)") != std::string::npos);
  CHECK(l[0].find(R"("pushwire.icrc":"good")") != std::string::npos);
  CHECK(l[1].find(R"("infiniband.invariant.crc":147199306,)") != std::string::npos);  // 0x08c6154a
  CHECK(l[1].find(R"("pushwire.icrc":"bad")") != std::string::npos);
  CHECK(l[2] == R"x({"frame":3,"error":"length_mismatch at byte 38 (udp.length)"})x");
  CHECK(dump("'" + pcap + "'").out.find("(bad header checksum)") != std::string::npos);
}

TEST_CASE("pushwire-gen frame --out appends to a capture, creating it", "[tools][gen]") {
  const std::string pcap = PUSHWIRE_WORKDIR "/gen-frame-append.pcap";
  std::system("mkdir -p '" PUSHWIRE_WORKDIR "'");
  std::remove(pcap.c_str());
  const auto one = gen("infiniband.bth.psn=1 --hex --out '" + pcap + "'");
  REQUIRE(one.status == 0);
  const auto two = gen("infiniband.bth.psn=2 --out '" + pcap + "'");
  REQUIRE(two.status == 0);
  CHECK(two.out.empty());  // --out alone prints nothing
  const auto file = read_file(pcap);
  auto r = wire::pcap::reader::open(file);
  REQUIRE(r.has_value());
  CHECK(r->linktype() == wire::pcap::linktype_ethernet);
  auto a = r->next(), b = r->next(), c = r->next();
  REQUIRE((a && *a && b && *b && c && !*c));
  CHECK(wire::to_hex((*a)->data) + "\n" == one.out);
  CHECK(wire::to_hex((*b)->data).substr(2 * (14 + 20 + 8 + 9), 6) == "000002");
  CHECK((*b)->ts_ns > (*a)->ts_ns);
  // Not a pcap: refused, left alone.
  const std::string text = PUSHWIRE_WORKDIR "/gen-frame-not.pcap";
  std::ofstream(text) << "hello";
  const auto bad = gen("--out '" + text + "'");
  CHECK(bad.status == 2);
  CHECK(bad.err == "pushwire-gen: " + text + ": not a pcap or pcapng file (truncated)\n");
  CHECK(read_file(text).size() == 5);
}

TEST_CASE("pushwire-gen frame --out appends an Enhanced Packet Block to a pcapng file", "[tools][gen][pcapng]") {
  std::system("mkdir -p '" PUSHWIRE_WORKDIR "'");
  // The hand-spelled sections: interface 0 Ethernet (10^-9 s), interface 1 raw IP (2^-10 s).
  for (const bool big : {false, true}) {
    INFO((big ? "big-endian" : "little-endian"));
    const std::string path = PUSHWIRE_WORKDIR "/gen-frame-append.pcapng";
    const auto& v = big ? test::pcapng::big : test::pcapng::little;
    test::write_file(path, std::vector<char>(reinterpret_cast<const char*>(v.data()), reinterpret_cast<const char*>(v.data()) + v.size()));
    const auto one = gen("infiniband.bth.psn=7 --hex --out '" + path + "'");
    REQUIRE(one.status == 0);
    const auto file = read_file(path);
    REQUIRE(file.size() > v.size());
    // What was there is unchanged but the declared section length (200, at byte 16), which
    // grows by the block; one block follows, in the section's byte order.
    const std::size_t added = file.size() - v.size();
    CHECK(std::equal(v.begin(), v.begin() + 16, file.begin()));
    CHECK(std::equal(v.begin() + 24, v.end(), file.begin() + 24));
    std::uint64_t declared = 0;
    for (int i = 0; i < 8; ++i)
      declared |= std::uint64_t{std::to_integer<std::uint8_t>(file[16 + static_cast<std::size_t>(big ? 7 - i : i)])} << (8 * i);
    CHECK(declared == 200 + added);
    CHECK(added == 32 + 60);  // EPB: 28 bytes of header, the 58-byte frame padded to 60, 4 trailing
    const std::byte* epb = file.data() + v.size();
    const std::uint32_t type = big ? std::to_integer<std::uint32_t>(epb[3]) : std::to_integer<std::uint32_t>(epb[0]);
    CHECK(type == 6);
    auto r = wire::pcap::reader::open(file);
    REQUIRE(r.has_value());
    std::optional<wire::pcap::record> last;
    int n = 0;
    for (;;) {
      auto rec = r->next();
      REQUIRE(rec.has_value());
      if (!*rec) break;
      last = **rec;
      ++n;
    }
    CHECK(n == 4);
    REQUIRE(last.has_value());
    CHECK(last->interface_id == 0);
    CHECK(last->linktype == wire::pcap::linktype_ethernet);
    CHECK(wire::to_hex(last->data) + "\n" == one.out);
    CHECK(last->ts_ns > 1700000000123456789ull);  // after the file's last timestamp
    // The frame reads back through pushwire-dump (which reads pcapng).
    const auto d = dump("--json '" + path + "'");
    CHECK(d.status == 0);
    CHECK(d.out.find("\"infiniband.bth.psn\":7") != std::string::npos);
  }
  // A section with no Ethernet interface: refused, the file left alone.
  const std::string raw = PUSHWIRE_WORKDIR "/gen-frame-raw.pcapng";
  std::vector<char> f;
  test::pcapng::writer w;
  w.shb().idb(101, 0);
  test::write_file(raw, std::vector<char>(reinterpret_cast<const char*>(w.out.data()), reinterpret_cast<const char*>(w.out.data()) + w.out.size()));
  const auto bad = gen("--out '" + raw + "'");
  CHECK(bad.status == 2);
  CHECK(bad.err == "pushwire-gen: " + raw + ": its last section has no Ethernet interface\n");
  CHECK(read_file(raw).size() == w.out.size());
}

TEST_CASE("pushwire-gen frame: errors name the key, exit 2, usage exits 1", "[tools][gen]") {
  struct bad {
    std::string args, err;
  };
  const bad cases[] = {
      {"infiniband.reth.dma_length=4",
       "unknown key infiniband.reth.dma_length; this header has infiniband.reth.va, infiniband.reth.r_key, "
       "infiniband.reth.dmalen"},
      {"bogus=1", "unknown key bogus (pushwire-gen frame --keys lists the keys)"},
      {"ip.ttl=0x1ff", "ip.ttl=0x1ff: wider than the field's 8 bits (at most 255)"},
      {"infiniband.bth.destqp=16777216", "infiniband.bth.destqp=16777216: wider than the field's 24 bits (at most 16777215)"},
      {"infiniband.bth.a=2", "infiniband.bth.a=2: wider than the field's 1 bit (at most 1)"},
      {"udp.srcport=http", "udp.srcport=http: not a number (decimal or 0x hex)"},
      {"ip.src=10.0.0.300", "ip.src=10.0.0.300: not an IPv4 address (as 10.0.0.1)"},
      {"ipv6.dst=fd00::1::2", "ipv6.dst=fd00::1::2: not an IPv6 address (as fd00::1)"},
      {"--payload 0g", "pushwire.payload=0g: not hex"},
      {"ip.ttl", "ip.ttl: not KEY=VALUE"},
      {"ip.ttl=1 ip.ttl=2", "ip.ttl: given twice"},
      {"pushwire.opcode=RC_ACKNOWLEDGE --payload 00", "pushwire.payload: RC_ACKNOWLEDGE (0x11) carries no payload"},
      {"pushwire.opcode=RC_SEND_ONLY infiniband.immdt=1", "infiniband.immdt: RC_SEND_ONLY (0x04) carries no ImmDt"},
      {"infiniband.bth.opcode=0x1f", "infiniband.bth.opcode=31: a reserved opcode"},
  };
  for (const bad& b : cases) {
    INFO(b.args);
    auto r = gen(b.args + " --hex");
    CHECK(r.status == 2);
    CHECK(r.out.empty());
    CHECK(r.err == "pushwire-gen: " + b.err + "\n");
  }
  // What only build() checks: the library's errc and field.
  auto atomic = gen("pushwire.opcode=RC_ATOMIC_WRITE --payload 00");
  CHECK(atomic.status == 2);
  CHECK(atomic.err == "pushwire-gen: cannot build the frame: length_mismatch (payload)\n");
  CHECK(gen("--bogus").status == 1);
  CHECK(gen("--help").status == 0);
  auto keys = gen("--keys");
  CHECK(keys.status == 0);
  for (const char* k : {"\neth.dst\n", "\nip.dsfield.dscp\n", "\ninfiniband.reth.dmalen\n", "\npushwire.payload\n"})
    CHECK(("\n" + keys.out).find(k) != std::string::npos);
}
