// The hellos of the push-push CM and of LAN emulation (spec/pp.md §7, §8): any datagram at any
// time, from any of eight addresses, to a pp::connector and to a pp::lan on a reference RNIC,
// with ticks, frames to send and polls between. Whatever arrives: a connect names a peer of the
// other role with a nonzero incarnation that names this end's; the LAN's members are at most
// max_members, at distinct addresses with distinct unicast LIDs other than its own, and a frame
// is sent whole or refused with a documented error.
#include <cstdint>
#include <set>
#include <span>

#include <pushwire/pp/cm.hpp>
#include <pushwire/pp/lan.hpp>

#include "provider.hpp"

using namespace pushwire;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::provider in(data, size);
  const pp::role role = in.flag() ? pp::role::host : pp::role::iou;
  pp::connector cm({.role = role, .incarnation = 0x1111});
  cm.set_local(0x10, 0x11, 256);
  rnic::port_config port;
  port.gid = rnic::gid_v4(198, 18, 0, 1);
  port.mtu = 1024;
  rnic::device dev({.ports = {port}});
  pp::lan lan(dev, {.lid = 1, .incarnation = 7, .receives = 4, .send_slots = 4, .max_members = 4}, nullptr);
  PUSHWIRE_FUZZ_CHECK(lan.ok());
  rnic::time_ns now = 1'000'000'000;
  for (int step = 0; step < 256 && !in.empty(); ++step) {
    now += std::uint64_t{in.take<std::uint16_t>()} * 1000;
    switch (in.pick(6)) {
      case 0: {
        const auto a = cm.on_datagram(in.bytes(64), now);
        if (a.connect) {
          PUSHWIRE_FUZZ_CHECK(a.connect->role != static_cast<std::uint8_t>(role));
          PUSHWIRE_FUZZ_CHECK(a.connect->incarnation != 0);
          PUSHWIRE_FUZZ_CHECK(a.connect->peer_incarnation == 0x1111);
        }
        break;
      }
      case 1: (void)cm.tick(now); break;
      case 2: {
        const auto b = in.bytes(32);
        const auto from = rnic::gid_v4(198, 18, 0, static_cast<std::uint8_t>(1 + in.pick(8)));
        (void)lan.on_hello(b, from, now);
        break;
      }
      case 3: (void)lan.tick(now); break;
      case 4: {
        const pp::lan_errc e = lan.send_frame(in.bytes(1100));
        PUSHWIRE_FUZZ_CHECK(e == pp::lan_errc{} || static_cast<std::size_t>(e) <= pp::lan_errc_table.size());
        break;
      }
      default: dev.progress(now), (void)lan.poll(); break;
    }
    std::set<std::uint16_t> lids;
    std::set<std::array<std::uint8_t, 16>> gids;
    PUSHWIRE_FUZZ_CHECK(lan.members().size() <= 4);
    for (const pp::lan_member& m : lan.members()) {
      PUSHWIRE_FUZZ_CHECK(m.lid >= ib::lid_unicast_first && m.lid <= ib::lid_unicast_last && m.lid != 1);
      PUSHWIRE_FUZZ_CHECK(m.qpn <= 0xFFFFFF);
      PUSHWIRE_FUZZ_CHECK(lids.insert(m.lid).second);
      PUSHWIRE_FUZZ_CHECK(gids.insert(m.gid).second);
    }
  }
  return 0;
}
