// Flow: buffer-pool credits and flush.
//  - World mode: owner and user, each input byte choosing among the enabled events (transfers,
//    deliveries, write completions, releases, flushes by either side, Gets), with idata or
//    BufferRDMAIndicate. Invariants after every event; complete after settling.
//  - Hostile mode: both machines fed messages built from the input (any pool reference,
//    element, count, byte count, transaction, descriptor). Nothing may crash, and each side's
//    books keep every element in exactly one place.
#include <array>
#include <cstdint>

#include "drive.hpp"
#include "worlds.hpp"

using namespace pushwire;

namespace {

void hostile(fuzz::provider& in) {
  flow::pool_owner<2, 4> o;
  flow::pool_user<2, 4> u({.low_water = in.pick(4), .get_count = in.pick(8), .never_idata = in.flag()});
  std::array<flow::pool_action_t, 16> buf{};
  auto small = [&] { return in.pick(3) == 0 ? in.take<std::uint32_t>() : in.pick(6); };
  for (int i = 0; i < 512 && !in.empty(); ++i) {
    flow::pool_sink out{std::span<flow::pool_action_t>(buf)};
    const std::uint32_t ref = small(), el = small(), n = small(), bytes = in.take<std::uint16_t>();
    const std::uint64_t txn = in.pick(4);
    const std::uint32_t refs[] = {ref};
    const msg::pool_descriptor d{.pool_ref = ref, .element_count = n, .element_size = bytes, .memory_handle = 1, .address = 0, .pool_context = 0};
    switch (in.pick(12)) {
      case 0: o.advertise(d, out); break;
      case 1: o.on_get({.element_size = bytes, .element_count = n}, out); break;
      case 2: o.on_indication({ref, el, bytes}, out); break;
      case 3: o.release(ref, el, n, out); break;
      case 4: o.flush(ref, out); break;
      case 5: o.on_flush_reply({.header = {.transaction_context = txn}}, out); break;
      case 6: o.on_flush_request({.header = {.transaction_context = txn}, .pool_refs = std::span<const std::uint32_t>(refs)}, out); break;
      case 7: u.on_pool(d, out); break;
      case 8: u.transfer(bytes, out); break;
      case 9: u.write_done(ref, el, out); break;
      case 10: u.on_update_entry({ref, el, n}, out); break;
      default: u.on_flush_request({.header = {.transaction_context = txn}, .pool_refs = std::span<const std::uint32_t>(refs)}, out);
    }
    for (std::size_t s = 0; s < 2; ++s) {
      const auto& os = o.at(s);
      const auto& us = u.at(s);
      PUSHWIRE_FUZZ_CHECK(os.desc.element_count <= 4 && us.desc.element_count <= 4);
      std::uint32_t in_flight = 0;
      for (std::uint32_t k = 0; k < us.desc.element_count; ++k)
        in_flight += us.el[k] == flow::user_element::writing || us.el[k] == flow::user_element::returned;
      PUSHWIRE_FUZZ_CHECK(in_flight == us.in_flight || us.state == flow::pool_state::unused);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return fuzz::world_or_hostile(data, size, hostile, [](fuzz::provider& in) { return pwtest::pool_world(in.flag()); });
}
