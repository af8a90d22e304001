// pushwire-conform as a user runs it: every rule's capture reported as that rule at that frame
// (text and JSON), clean captures (pushwire-gen's, the reference RNIC's soak over a faulty
// fabric in both framings) exit 0, --only, --mtu, --udp-port, --complete (and captures of real
// NICs' kind, skewed or one-sided, clean without it), and exit status 2 on what it cannot read.
#include <string>
#include <vector>

#include "../flow/conform_cases.hpp"
#include "tools.hpp"

using namespace pushwire;
using namespace pushwire::test::conform;

namespace {

test::run_result conform(const std::string& args) { return test::run_conform(args); }

std::string write(const capture& c, const std::string& name) {
  const std::string path = PUSHWIRE_WORKDIR "/conform-" + name + ".pcap";
  test::write_file(path, c.pcap());
  return path;
}

std::string quoted(const std::string& path) { return "'" + path + "'"; }


}  // namespace

TEST_CASE("pushwire-conform: each rule's capture, one violation of that rule at that frame", "[tools][conform]") {
  int n = 0;
  for (const auto& c : rule_cases()) {
    DYNAMIC_SECTION(c.name) {
      const std::string path = write(c.cap, "rule-" + std::to_string(n));
      const std::string name{flow::info(c.id).name};
      auto j = conform("--json " + quoted(path));
      CHECK(j.status == 1);
      CHECK(j.err.empty());
      const auto l = test::lines_of(j.out);
      REQUIRE(l.size() == 2);
      CHECK(l[0].starts_with("{\"frame\":" + std::to_string(c.frame) + ",\"rule\":\"" + name + "\",\"conversation\":\""));
      CHECK(l[0].find("\"expected\":\"") != std::string::npos);
      CHECK(l[0].find("\"seen\":\"") != std::string::npos);
      CHECK(l[0].find("\"reference\":\"" + std::string{flow::info(c.id).reference} + "\"}") != std::string::npos);
      CHECK(l[1].starts_with("{\"summary\":{\"frames\":" + std::to_string(c.cap.frames.size()) + ","));
      CHECK(l[1].find("\"" + name + "\":1") != std::string::npos);
      CHECK(l[1].ends_with("\"total\":1}}"));
      auto t = conform(quoted(path));
      CHECK(t.status == 1);
      const auto tl = test::lines_of(t.out);
      REQUIRE(tl.size() == 2);
      CHECK(tl[0].starts_with("frame " + std::to_string(c.frame) + ": " + name + ": "));
      CHECK(tl[0].find(": expected ") != std::string::npos);
      CHECK(tl[0].find("; seen ") != std::string::npos);
      CHECK(tl[1].find(" 1 violation: " + name + " 1") != std::string::npos);
      // --only without it (its group's other rules, or another group): clean
      const std::string other = name.starts_with("frame.") ? "req" : "frame";
      auto o = conform("--only " + other + " " + quoted(path));
      CHECK(o.status == 0);
      auto g = conform("--only " + name.substr(0, name.find('.')) + " " + quoted(path));
      CHECK(g.status == 1);
      // complete: the same verdict
      auto k = conform("--complete " + quoted(path));
      CHECK(k.status == 1);
      CHECK(k.out.starts_with("frame " + std::to_string(c.frame) + ": " + name + ": "));
    }
    ++n;
  }
}

TEST_CASE("pushwire-conform: pushwire-gen's captures and the clean conversation exit 0", "[tools][conform]") {
  for (const std::string framing : {"roce", "cell"}) {
    const std::string path = PUSHWIRE_WORKDIR "/conform-gen-" + framing + ".pcap";
    REQUIRE(test::run_gen("--framing " + framing + " --out " + quoted(path)).status == 0);
    auto r = conform(quoted(path));
    INFO(r.out);
    CHECK(r.status == 0);
    CHECK(r.out.find(" 0 violations") != std::string::npos);
    auto k = conform("--complete " + quoted(path));  // written at the endpoints: complete
    INFO(k.out);
    CHECK(k.status == 0);
  }
  // --bad-icrc adds one frame.icrc
  const std::string bad = PUSHWIRE_WORKDIR "/conform-gen-bad.pcap";
  REQUIRE(test::run_gen("--framing roce --bad-icrc --out " + quoted(bad)).status == 0);
  auto b = conform(quoted(bad));
  CHECK(b.status == 1);
  CHECK(b.out.starts_with("frame 17: frame.icrc: "));
  const std::string base = write(base_conversation(), "base");
  CHECK(conform(quoted(base)).status == 0);
}

TEST_CASE("pushwire-conform: the reference RNIC's soak over a lossy, duplicating, reordering fabric exits 0", "[tools][conform][rnic]") {
  for (const std::string framing : {"roce", "cell"}) {
    for (const std::string seed : {"1", "2"}) {
      DYNAMIC_SECTION(framing << " seed " << seed) {
        const std::string path = PUSHWIRE_WORKDIR "/conform-soak-" + framing + seed + ".pcap";
        auto s = test::run_rnic("soak --messages 200 --seed " + seed + " --loss 0.05 --dup 0.05 --reorder 0.05 --framing " + framing +
                                " --pcap " + quoted(path) + " --json");
        REQUIRE(s.status == 0);
        CHECK(s.out.find("\"retransmits\":0,") == std::string::npos);  // the faults happened
        auto r = conform(quoted(path));
        INFO(r.out.substr(0, 2000));
        CHECK(r.status == 0);
      }
    }
  }
}

TEST_CASE("pushwire-conform: --complete judges what only a complete capture shows, without it none", "[tools][conform]") {
  int n = 0;
  for (const auto& c : complete_cases()) {
    DYNAMIC_SECTION(c.name) {
      const std::string path = write(c.cap, "complete-" + std::to_string(n));
      const std::string name{flow::info(c.id).name};
      auto t = conform(quoted(path));
      INFO(t.out);
      CHECK(t.status == 0);
      auto k = conform("--complete " + quoted(path));
      INFO(k.out);
      CHECK(k.status == 1);
      const auto l = test::lines_of(k.out);
      REQUIRE(l.size() == 2);
      CHECK(l[0].starts_with("frame " + std::to_string(c.frame) + ": " + name + ": "));
      auto j = conform("--json --complete " + quoted(path));
      CHECK(j.out.starts_with("{\"frame\":" + std::to_string(c.frame) + ",\"rule\":\"" + name + "\""));
    }
    ++n;
  }
}

TEST_CASE("pushwire-conform: the RNIC's soak recorded as ibdump would (skewed, one-sided) exits 0, --complete says why", "[tools][conform][rnic]") {
  const std::string path = PUSHWIRE_WORKDIR "/conform-soak-clean.pcap";
  REQUIRE(test::run_rnic("soak --messages 100 --seed 3 --framing roce --pcap " + quoted(path)).status == 0);
  REQUIRE(conform("--complete " + quoted(path)).status == 0);
  const auto read = capture::read(path);
  REQUIRE(read);
  const capture& wire = *read;
  REQUIRE(wire.frames.size() > 100);
  const auto [a, b, rtt] = hosts_of(wire);
  REQUIRE(rtt > 0);
  const std::vector<std::pair<std::string, capture>> variants{
      {"skewed", skewed(wire, a, 10 * rtt)},
      {"one-sided-a", one_way(wire, a, 5)},
      {"one-sided-b", one_way(wire, b, 5)},
  };
  for (const auto& [name, cap] : variants) {
    DYNAMIC_SECTION(name) {
      const std::string p = write(cap, "soak-" + name);
      auto r = conform(quoted(p));
      INFO(r.out.substr(0, 2000));
      CHECK(r.status == 0);
      CHECK(conform("--complete " + quoted(p)).status == 1);
    }
  }
}

TEST_CASE("pushwire-conform: --mtu, --udp-port and the inferred MTU", "[tools][conform]") {
  const std::string base = write(base_conversation(), "base-mtu");
  // The conversation's MTU is 1024: told 512, its FIRST and MIDDLE of 1024 bytes are too long.
  auto small = conform("--json --mtu 512 " + quoted(base));
  CHECK(small.status == 1);
  CHECK(small.out.find("\"rule\":\"req.mtu\"") != std::string::npos);
  CHECK(conform("--mtu 1024 " + quoted(base)).status == 0);
  // Another RoCEv2 port: nothing here is RoCEv2.
  auto port = conform("--udp-port 4792 " + quoted(base));
  CHECK(port.status == 0);
  CHECK(port.out == "13 frames (0 RoCEv2, 0 cells, 13 other), 0 conversations, 0 violations\n");
}

TEST_CASE("pushwire-conform: what it cannot read exits 2 with one line", "[tools][conform]") {
  const std::string junk = PUSHWIRE_WORKDIR "/conform-junk.pcap";
  test::write_file(junk, std::string("this is not a capture file at all, nor pcapng"));
  auto j = conform(quoted(junk));
  CHECK(j.status == 2);
  CHECK(j.out.empty());
  CHECK(j.err.starts_with("pushwire-conform: error: bad_pcap"));
  CHECK(conform(quoted(PUSHWIRE_WORKDIR "/no-such-file.pcap")).status == 2);
  auto cut = base_conversation().pcap();
  cut.resize(cut.size() - 7);
  test::write_file(PUSHWIRE_WORKDIR "/conform-cut.pcap", cut);
  auto c = conform(quoted(PUSHWIRE_WORKDIR "/conform-cut.pcap"));
  CHECK(c.status == 2);
  CHECK(c.err.starts_with("pushwire-conform: error: truncated"));
  CHECK(conform("").status == 2);
  CHECK(conform("--only req.nothing x.pcap").status == 2);
  CHECK(conform("--mtu 1000 x.pcap").status == 2);
  CHECK(conform("--udp-port 0 x.pcap").status == 2);
  CHECK(conform("--bogus x.pcap").status == 2);
  auto h = conform("--help");
  CHECK(h.status == 0);
  CHECK(h.err.find("usage: pushwire-conform FILE") != std::string::npos);
  CHECK(h.err.find("--complete") != std::string::npos);
}

TEST_CASE("pushwire-rnic soak --xdp: malformed forms exit 2, a namespace or interface that is not there exits 3, named", "[tools][rnic]") {
  for (const char* bad : {"--xdp", "--xdp a", "--xdp a,", "--xdp ,b", "--xdp a@,b", "--xdp a,b@", "--xdp @n,b@m", "--xdp a,b,c"}) {
    INFO(bad);
    CHECK(test::run_rnic(std::string{"soak --messages 1 "} + bad).status == 2);
  }
  const auto ns = test::run_rnic("soak --messages 1 --xdp a@pushwire-no-such-ns,b@pushwire-no-such-ns");
  CHECK(ns.status == 3);
  CHECK(ns.err.find("pushwire-no-such-ns") != std::string::npos);
  const auto dev = test::run_rnic("soak --messages 1 --xdp pwnosuch0,pwnosuch1");
  CHECK(dev.status == 3);
  CHECK(dev.err.find("pwnosuch0") != std::string::npos);
  // --pcap is the loopback fabric's capture: refused before any port opens.
  const auto pcap = test::run_rnic("soak --messages 1 --pcap /dev/null --xdp pwnosuch0,pwnosuch1");
  CHECK(pcap.status == 2);
  CHECK(pcap.err.find("--pcap") != std::string::npos);
}
