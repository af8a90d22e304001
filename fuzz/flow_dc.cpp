// Flow: Dynamically Connected transport.
//  - World mode: a DC initiator and two DC targets over a lossy link, each input byte choosing
//    among the enabled events. Data meant for one target is never placed at the other;
//    complete after settling.
//  - Hostile mode: a DC target fed packets built from the input (any opcode, access key, DCT
//    and DCI numbers, PSN, SE). It places data only while connected, and only from the DCI it
//    is connected to with its own key.
#include <array>
#include <cstdint>

#include "drive.hpp"
#include "worlds.hpp"

using namespace pushwire;

namespace {

// Every DC entry of the opcode table.
constexpr auto dc_opcodes = [] {
  std::array<ib::opcode, [] {
    std::size_t n = 0;
    for (const auto& o : ib::opcodes) n += o.tp == ib::transport::dc;
    return n;
  }()> out{};
  std::size_t n = 0;
  for (const auto& o : ib::opcodes)
    if (o.tp == ib::transport::dc) out[n++] = o.id;
  return out;
}();

void hostile(fuzz::provider& in) {
  constexpr std::uint64_t key = 0xA;
  flow::dc_target<4> t({.dct = 0x100, .access_key = key, .resp = {.mtu = 256}});
  t.post_receive(in.pick(4));
  std::array<flow::qp_action_t, 64> buf{};
  for (int i = 0; i < 512 && !in.empty(); ++i) {
    flow::qp_sink out{std::span<flow::qp_action_t>(buf)};
    flow::packet p{};
    // Mostly DC opcodes (the target's rules), else any table entry or raw value (its refusals).
    const std::uint8_t k = in.pick(static_cast<std::uint8_t>(dc_opcodes.size() + 2));
    p.opcode = in.flag()                   ? ib::opcode::dc_connect
               : k < dc_opcodes.size()     ? dc_opcodes[k]
               : k == dc_opcodes.size()    ? ib::opcodes[in.pick(static_cast<std::uint8_t>(ib::opcodes.size()))].id
                                           : static_cast<ib::opcode>(in.take<std::uint16_t>());
    p.se = in.flag();
    p.dc_key = in.pick(8) == 0 ? in.take<std::uint64_t>() : key;
    p.dct = in.pick(8) == 0 ? in.take<std::uint32_t>() & 0xFFFFFF : 0x100;
    p.dci = p.eecnxt = in.pick(3);  // the DCI: DCCETH on a connect, RDETH on data
    p.psn = in.take<std::uint8_t>();
    p.ack_req = in.flag();
    p.length = in.flag() ? 256 : in.pick(255);
    p.dmalen = in.take<std::uint16_t>();
    p.rkey = 1;
    const bool was_connected = t.state() == flow::dct_state::connected;
    const std::uint32_t dci = t.connected_dci();
    t.on_packet(p, out);
    for (const auto& a : out)
      if (std::holds_alternative<flow::qp_action::place>(a)) {
        PUSHWIRE_FUZZ_CHECK(was_connected && p.dc_initiator() == dci && p.dc_key == key);
        PUSHWIRE_FUZZ_CHECK(p.opcode != ib::opcode::dc_connect);
      }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return fuzz::world_or_hostile(data, size, hostile, [](fuzz::provider&) { return pwtest::dc_world{}; });
}
