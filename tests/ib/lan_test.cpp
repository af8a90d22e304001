// LID-in-MAC, the emulated ARP table, flow labels and source ports.
#include <set>

#include <pushwire/ib/entropy.hpp>
#include <pushwire/ib/lan.hpp>

#include "../support/test_support.hpp"

using namespace pushwire;
using namespace pushwire::ib;
using wire::errc;

static_assert(*mac_from_lid(0x0001, 0x000011) == mac_address{0xA2, 0x00, 0x01, 0x00, 0x00, 0x11});
static_assert(*lid_from_mac({0xA2, 0xBF, 0xFF, 0xFF, 0xFF, 0xFF}) == lid_qpn{0xBFFF, 0xFFFFFF});
static_assert(lid_from_mac({0x02, 0x00, 0x01, 0x00, 0x00, 0x11}).code() == errc::invalid_field);
static_assert(flow_label(0x11, 0x22) == flow_label(0x22, 0x11));
static_assert(udp_sport(0x242) == 0xC242 && udp_sport(0xFFFFF) == (0xC000 | (0x3FFF ^ 0x3F)));

TEST_CASE("LID-in-MAC: both ways, and the MACs it refuses", "[ib][lan]") {
  for (std::uint16_t lid : {std::uint16_t{1}, std::uint16_t{0x1234}, std::uint16_t{0xBFFF}})
    for (std::uint32_t qpn : {0u, 1u, 0x123456u, 0xFFFFFFu}) {
      auto m = mac_from_lid(lid, qpn);
      REQUIRE(m.has_value());
      CHECK(((*m)[0] & 0x01) == 0);  // unicast
      CHECK(((*m)[0] & 0x02) == 2);  // locally administered
      CHECK(lid_from_mac(*m).value() == lid_qpn{lid, qpn});
    }
  CHECK(mac_from_lid(0, 1).error().field == "lid");        // reserved LID
  CHECK(mac_from_lid(0xC000, 1).error().field == "lid");   // multicast
  CHECK(mac_from_lid(0xFFFF, 1).error().field == "lid");   // permissive
  CHECK(mac_from_lid(1, 0x1000000).error().field == "qpn");
  CHECK(lid_from_mac({0xA3, 0, 1, 0, 0, 1}).error().field == "prefix");   // multicast bit
  CHECK(lid_from_mac({0xA0, 0, 1, 0, 0, 1}).error().field == "prefix");   // universally administered
  CHECK(lid_from_mac({0xA2, 0, 0, 0, 0, 1}).error().field == "lid");      // LID 0
  CHECK(lid_from_mac({0xA2, 0xC0, 0, 0, 0, 1}).error().field == "lid");   // multicast LID
}

TEST_CASE("emulated ARP: IPv4 -> MAC -> (LID, QPN), bounded", "[ib][lan]") {
  emulated_arp<2> arp;
  CHECK(arp.learn({10, 0, 0, 1}, 5, 0x11).code == errc{});
  CHECK(arp.learn({10, 0, 0, 2}, 6, 0x22).code == errc{});
  CHECK(arp.learn({10, 0, 0, 3}, 7, 0x33).code == errc::too_large);
  CHECK(arp.learn({10, 0, 0, 1}, 8, 0x44).code == errc{});  // replace
  CHECK(arp.resolve({10, 0, 0, 1}) == lid_qpn{8, 0x44});
  CHECK(arp.mac_of({10, 0, 0, 2}) == mac_from_lid(6, 0x22).value());
  CHECK_FALSE(arp.resolve({10, 0, 0, 9}).has_value());
  CHECK(arp.learn({10, 0, 0, 4}, 0, 1).code == errc::invalid_field);
  CHECK(arp.forget({10, 0, 0, 1}));
  CHECK(arp.size() == 1);
  CHECK(arp.learn({10, 0, 0, 3}, 7, 0x33).code == errc{});
}

TEST_CASE("entropy: flow labels, source ports, per-session assignment", "[ib][entropy]") {
  std::set<std::uint16_t> ports;
  for (std::uint32_t q = 1; q < 2000; ++q) {
    const std::uint32_t fl = flow_label(q, 0x1234);
    CHECK(fl <= flow_label_mask);
    CHECK(fl == flow_label(0x1234, q));
    const std::uint16_t p = udp_sport(fl);
    CHECK(p >= sport_min);
    ports.insert(p);
  }
  CHECK(ports.size() > 1000);  // spreads (the kernel fold maps 1999 QPNs to 1463 ports)
  sport_allocator a;
  std::set<std::uint16_t> given;
  for (int i = 0; i < 100; ++i) {
    auto p = a.assign(0x42);  // the same flow label every time: still distinct ports
    REQUIRE(p.has_value());
    CHECK(given.insert(*p).second);
  }
  CHECK(*given.begin() == udp_sport(0x42));
  CHECK(a.release(udp_sport(0x42)));
  CHECK_FALSE(a.release(udp_sport(0x42)));
  CHECK(a.assign(0x42).value() == udp_sport(0x42));
  sport_allocator full;
  for (std::uint32_t i = 0; i < sport_count; ++i) REQUIRE(full.assign(i).has_value());
  CHECK(full.assign(0).code() == errc::too_large);
}
