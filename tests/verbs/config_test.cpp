// The provider's device and fault configuration (verbs/config.hpp, spec/verbs.md §2).
#include <catch2/catch.hpp>

#include "config.hpp"
#include <pushwire/net/cardmem.hpp>

using namespace pushwire::verbs;

namespace {
/// Each device list is refused whole, its error naming the reason.
template <std::size_t N>
void refused(const std::pair<const char*, const char*> (&bad)[N]) {
  for (const auto& [text, why] : bad) {
    INFO(text);
    const auto r = parse_devices(text);
    CHECK_FALSE(r);
    CHECK_THAT(r.error, Catch::Contains(why));
  }
}
}  // namespace

TEST_CASE("device lists: names, addresses, auto, MTUs, separators and comments") {
  const auto p = parse_devices("pw0:198.18.0.1, pw1:auto:1024\n# a comment\n  x.y-z_9:127.0.0.2:4096@fd00::2 # trailing\npw3:auto@::1");
  REQUIRE(p);
  REQUIRE(p.value.size() == 4);
  CHECK(p.value[0] == device_spec{"pw0", std::array<std::uint8_t, 4>{198, 18, 0, 1}, 4096, std::nullopt, {}, 0, {}, {}});
  CHECK(p.value[1] == device_spec{"pw1", std::nullopt, 1024, std::nullopt, {}, 0, {}, {}});
  CHECK(p.value[2] == device_spec{"x.y-z_9", std::array<std::uint8_t, 4>{127, 0, 0, 2}, 4096,
                                  std::array<std::uint8_t, 16>{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2}, {}, 0, {}, {}});
  CHECK(p.value[3].address6 == std::array<std::uint8_t, 16>{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1});
}

TEST_CASE("device lists: more ports, +ADDRESS[@IPV6] each") {
  const auto p = parse_devices("pw0:198.18.0.1+198.18.1.1 pw1:auto:1024@fd00::1+198.18.1.2@fd01::2+10.0.0.3+10.0.0.4");
  REQUIRE(p);
  REQUIRE(p.value.size() == 2);
  CHECK(p.value[0].address == std::array<std::uint8_t, 4>{198, 18, 0, 1});
  CHECK(p.value[0].more_ports == std::vector<port_spec>{{{198, 18, 1, 1}, std::nullopt, {}}});
  CHECK(p.value[1].mtu == 1024);
  CHECK(p.value[1].address6 == std::array<std::uint8_t, 16>{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1});
  REQUIRE(p.value[1].more_ports.size() == 3);
  CHECK(p.value[1].more_ports[0] == port_spec{{198, 18, 1, 2}, std::array<std::uint8_t, 16>{0xfd, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2}, {}});
  CHECK(p.value[1].more_ports[2] == port_spec{{10, 0, 0, 4}, std::nullopt, {}});
  const std::pair<const char*, const char*> bad[] = {
      {"pw0:1.2.3.4+1.2.3.5+1.2.3.6+1.2.3.7+1.2.3.8", "a device has 1..4 ports"},
      {"pw0:1.2.3.4+", "a device has 1..4 ports"},
      {"pw0:1.2.3.4++1.2.3.5", "a device has 1..4 ports"},
      {"pw0:1.2.3.4+auto", "a further port's address is IPv4 (not 'auto')"},
      {"pw0:1.2.3.4+1.2.3.5:1024", "a further port's address is IPv4"},
      {"pw0:1.2.3.4+1.2.3.5@1.2.3.6", "not an IPv6 address"},
      {"pw0:1.2.3.4+1.2.3.5@", "not an IPv6 address"},
      {"pw0:1.2.3.4@zz+1.2.3.5", "not an IPv6 address"},
      {"+pw0:1.2.3.4", "a device has 1..4 ports"},
      {"pw0:1.2.3.4+1.2.3.4", "an address of two ports"},
      {"pw0:1.2.3.4+1.2.3.5+1.2.3.5", "an address of two ports"},
      {"pw0:1.2.3.4@fd00::1+1.2.3.5@fd00::1", "an address of two ports"},
      {"pw0:1.2.3.4+1.2.3.5@fd00::1+1.2.3.6@fd00::1", "an address of two ports"},
  };
  refused(bad);
}

TEST_CASE("device lists: a port over AF_XDP, /xdp=IF after its addresses") {
  const auto p = parse_devices("pw0:198.18.7.1/xdp=px-a pw1:198.18.8.1:1024@fd00::1/xdp=eth0+198.18.9.1/xdp=eth1+198.18.9.2");
  REQUIRE(p);
  REQUIRE(p.value.size() == 2);
  CHECK(p.value[0].address == std::array<std::uint8_t, 4>{198, 18, 7, 1});
  CHECK(p.value[0].xdp == "px-a");
  CHECK(p.value[0].more_ports.empty());
  CHECK(p.value[1].mtu == 1024);
  CHECK(p.value[1].address6 == std::array<std::uint8_t, 16>{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1});
  CHECK(p.value[1].xdp == "eth0");
  REQUIRE(p.value[1].more_ports.size() == 2);
  CHECK(p.value[1].more_ports[0].address == std::array<std::uint8_t, 4>{198, 18, 9, 1});
  CHECK(p.value[1].more_ports[0].xdp == "eth1");
  CHECK(p.value[1].more_ports[1].xdp.empty());
  CHECK(parse_devices("pw0:198.18.7.1").value[0].xdp.empty());
  const std::pair<const char*, const char*> bad[] = {
      {"pw0:198.18.7.1/xdp=", "a port's option is /xdp=IF"},
      {"pw0:198.18.7.1/xdp=abcdefghijklmnop", "a port's option is /xdp=IF"},  // 16 characters
      {"pw0:198.18.7.1/tap=eth0", "a port's option is /xdp=IF"},
      {"pw0:198.18.7.1/xdp=a:b", "a port's option is /xdp=IF"},
      {"pw0:198.18.7.1+198.18.7.2/xdp=", "a port's option is /xdp=IF"},
      {"pw0:auto/xdp=eth0", "names its address (not 'auto')"},
  };
  refused(bad);
  CHECK(parse_devices("pw0:198.18.7.1/xdp=abcdefghijklmno"));  // 15 characters
}

TEST_CASE("device lists: functions of a device process, NAME@PATH[#pf|#vfN]") {
  const auto p = parse_devices("pw0@/run/pushwire/pw0.sock pw1@/tmp/a.sock#vf3, pw2@/tmp/b#pf # a comment\n# vf9 stays a comment\npw3@rel/x#vf127");
  REQUIRE(p);
  REQUIRE(p.value.size() == 4);
  CHECK(p.value[0] == device_spec{"pw0", std::nullopt, 4096, std::nullopt, "/run/pushwire/pw0.sock", 0, {}, {}});
  CHECK(p.value[1] == device_spec{"pw1", std::nullopt, 4096, std::nullopt, "/tmp/a.sock", 3, {}, {}});
  CHECK(p.value[2] == device_spec{"pw2", std::nullopt, 4096, std::nullopt, "/tmp/b", 0, {}, {}});
  CHECK(p.value[3] == device_spec{"pw3", std::nullopt, 4096, std::nullopt, "rel/x", 127, {}, {}});
  const std::pair<const char*, const char*> bad[] = {
      {"pw0@/x#vf0", "a function is pf or vf1..vf127"},
      {"pw0@/x#vf128", "a function is pf or vf1..vf127"},
      {"pw0@/x#vf", "a function is pf or vf1..vf127"},
      {"pw0@/x#3", "a function is pf or vf1..vf127"},
      {"pw0@/x#vf1x", "a function is pf or vf1..vf127"},
      {"pw0@", "a control socket's path is 1..107 bytes"},
      {"pw0@#vf1", "a control socket's path is 1..107 bytes"},
      {"p/w@/x", "a name is"},
      {"pw0@/a pw0@/b", "named twice"},
  };
  refused(bad);
  CHECK_FALSE(parse_devices("pw0@/" + std::string(107, 'x')));
  CHECK(parse_devices("pw0@/" + std::string(106, 'x')));
}

TEST_CASE("device lists: each malformed entry is refused whole, with its reason") {
  const std::pair<const char*, const char*> bad[] = {
      {"pw0", "expected NAME:ADDRESS[:MTU]"},
      {"pw0:1.2.3.4:1024:9", "expected NAME:ADDRESS[:MTU]"},
      {"pw0::1.2.3.4", "expected NAME:ADDRESS[:MTU]"},
      {":1.2.3.4", "expected NAME"},
      {"p w:1.2.3.4", "expected NAME"},
      {"p/w:1.2.3.4", "a name is"},
      {"pw0:1.2.3", "not an IPv4 address"},
      {"pw0:1.2.3.4.5", "not an IPv4 address"},
      {"pw0:256.0.0.1", "not an IPv4 address"},
      {"pw0:1.2.3.-4", "not an IPv4 address"},
      {"pw0:0001.2.3.4", "not an IPv4 address"},
      {"pw0:1..3.4", "not an IPv4 address"},
      {"pw0:1.2.3.4:2048", "the MTU is 1024 or 4096"},
      {"pw0:1.2.3.4@fd00::1::2", "not an IPv6 address"},
      {"pw0:1.2.3.4@1.2.3.4", "not an IPv6 address"},
      {"pw0:1.2.3.4@::ffff:1.2.3.4", "nor IPv4-mapped"},
      {"pw0:1.2.3.4@", "not an IPv6 address"},
      {"pw0:1.2.3.4 pw0:1.2.3.5", "named twice"},
      {"", "no device listed"},
      {"# only a comment", "no device listed"},
  };
  refused(bad);
  std::string many;
  for (int i = 0; i < 17; ++i) {  // (appended piecewise: g++-12 -O3 warns falsely on chained +)
    many += 'd';
    many += std::to_string(i);
    many += ":auto ";
  }
  CHECK_THAT(parse_devices(many).error, Catch::Contains("more than 16"));
  std::string name(63, 'a');
  name += ":auto";
  CHECK(parse_devices(name));
  std::string longer(64, 'a');
  longer += ":auto";
  CHECK_FALSE(parse_devices(longer));
}

TEST_CASE("fault lists: probabilities and a seed") {
  const auto p = parse_faults("loss=0.05,reorder=0.05 duplicate=0, corrupt=1,delay=0.5,seed=42");
  REQUIRE(p);
  CHECK(p.value.faults.loss == 0.05);
  CHECK(p.value.faults.reorder == 0.05);
  CHECK(p.value.faults.duplicate == 0);
  CHECK(p.value.faults.corrupt == 1);
  CHECK(p.value.faults.delay == 0.5);
  CHECK(p.value.seed == 42);
  for (const char* bad : {"loss", "loss=", "loss=1.5", "loss=-0.1", "loss=0.1x", "jitter=0.1", "seed=x", "seed=-1", "loss=nan"}) {
    INFO(bad);
    CHECK_FALSE(parse_faults(bad));
  }
}

TEST_CASE("qos settings: PUSHWIRE_VERBS_QOS takes the port set settings but a device process's, and dcqcn") {
  auto q = parse_qos("ecn ect0 dcqcn on tsa ets,ets,ets,ets,ets,ets,ets,strict tcbw 0,75,25,0,0,0,0,0 dscp2prio 46,7");
  REQUIRE(q);
  CHECK(q.value.dcqcn);
  CHECK(q.value.egress.ecn == pushwire::ib::ecn::ect0);
  REQUIRE(q.value.egress.classes);
  CHECK(q.value.egress.classes->class_of(0, 46 << 2) == 7);
  CHECK(q.value.egress.classes->tc[7].tsa == pushwire::flow::tsa::strict);
  CHECK(parse_qos("").value.egress.classes == std::nullopt);
  CHECK(parse_qos("ecn ect1").value.egress.ecn == pushwire::ib::ecn::ect1);
  CHECK(!parse_qos("ecn"));
  CHECK(!parse_qos("rate 1G"));
  CHECK(!parse_qos("mark 1,2,0.1"));
  CHECK(!parse_qos("dcqcn maybe"));
  CHECK(!parse_qos("tcbw 50,50,50,0,0,0,0,0"));
  CHECK(parse_qos("tcbw 50,50,50,0,0,0,0,0").error.find("sum to 100") != std::string::npos);
  CHECK(!parse_qos("trust vlan"));
}

TEST_CASE("platform settings: PUSHWIRE_VERBS_PLATFORM builds the platform a setting at a time, and refuses a card on no socket") {
  auto p = parse_platform("sockets=2 hca=1,card=1 card=0  threshold=65536 copy_rate=2.5 cross_p2p_rate=4");
  REQUIRE(p);
  CHECK(p.value.sockets == 2);
  CHECK(p.value.hca_socket == 1);
  REQUIRE(p.value.card_count == 2);
  CHECK(p.value.cards[0].socket == 1);
  CHECK(p.value.cards[1].socket == 0);
  CHECK(p.value.local(0));
  CHECK_FALSE(p.value.local(1));
  CHECK(p.value.outbound_threshold == 65536);
  CHECK(p.value.costs.copy_rate == 2.5);
  CHECK(p.value.costs.cross_p2p_rate == 4);
  CHECK(p.value.costs.pcie_rate == 12);  // the default stays
  CHECK(parse_platform("").value.card_count == 0);
  std::string seventeen;
  for (int i = 0; i < 17; ++i) seventeen += "card=0 ";
  CHECK(parse_platform(seventeen).error.find("16 cards") != std::string::npos);
  for (const char* bad : {"card", "card=", "card=x", "card=8", "card=-1", "sockets=0", "sockets=9", "hca=2", "card=2",
                          "sockets=1 card=1", "gpu=0", "threshold=-1", "threshold=1k", "copy_rate=0", "copy_rate=inf",
                          "pcie_latency=-5", "socket_rate=nan", "pcie_rate=1e400"}) {
    INFO(bad);
    CHECK_FALSE(parse_platform(bad));
  }
}

TEST_CASE("card buffers: a memfd or dma-buf named pushwire-cardN is card N's memory, any other name host memory") {
  CHECK(pushwire::net::card_of_link("/memfd:pushwire-card0 (deleted)") == 0);
  CHECK(pushwire::net::card_of_link("/memfd:pushwire-card15 (deleted)") == 15);
  CHECK(pushwire::net::card_of_link("/memfd:pushwire-card255") == 255);
  CHECK(pushwire::net::card_of_link("/dmabuf:pushwire-card3") == 3);
  for (const char* host : {"/memfd:pushwire-card (deleted)", "/memfd:pushwire-card256 (deleted)", "/memfd:pushwire-card01 (deleted)",
                           "/memfd:pushwire-card1x (deleted)", "/memfd:pushwire-card-1 (deleted)", "/memfd:card1 (deleted)",
                           "/dmabuf:", "/dmabuf:pushwire-card", "/tmp/pushwire-card1", "anon_inode:[eventfd]", ""}) {
    INFO(host);
    CHECK(pushwire::net::card_of_link(host) == -1);
  }
}
