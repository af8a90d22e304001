// Flow: the session receiver fed arbitrary messages (known, unknown and foreign 5-tuples,
// other connections, sequence numbers around the expected one). Deliveries are in sequence
// order and never repeat; every message is delivered, held or dropped with a reason.
#include <cstdint>
#include <set>
#include <variant>

#include <pushwire/flow/session.hpp>

#include "provider.hpp"

using namespace pushwire;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::provider in(data, size);
  flow::session_table<8> t;
  auto tuple = [](std::uint16_t sport) {
    flow::five_tuple x{};
    x.sport = sport;
    return x;
  };
  for (std::uint32_t s = 0; s < 3; ++s) t.bind(s, tuple(static_cast<std::uint16_t>(s)), 1, 0x11);
  t.bind(9, tuple(9), 2, 0x22);
  flow::session_receiver<8, 8> rx(t, 0x11, 1);
  std::array<flow::session_action_t, 16> buf{};
  std::uint32_t next = 0;
  std::uint64_t delivered = 0, dropped = 0, taken = 0;
  std::set<std::uint64_t> held_handles;
  for (std::uint64_t h = 0; !in.empty() && h < 4096; ++h) {
    const flow::session_message m{tuple(static_cast<std::uint16_t>(in.pick(11))), in.flag() ? 0x11u : 0x22u,
                                  rx.expected() + in.pick(12) - 2u, h};
    flow::session_sink out{std::span<flow::session_action_t>(buf)};
    const auto r = rx.on_message(m, out);
    PUSHWIRE_FUZZ_CHECK(r.row >= 0);
    ++taken;
    bool this_one = false;
    for (const auto& a : out) {
      if (const auto* d = std::get_if<flow::session_action::deliver>(&a)) {
        PUSHWIRE_FUZZ_CHECK(d->seq == next);  // in order, each once
        ++next;
        ++delivered;
        this_one = this_one || d->handle == h;
        held_handles.erase(d->handle);
      } else {
        PUSHWIRE_FUZZ_CHECK(std::get<flow::session_action::drop>(a).handle == h);
        this_one = true;
        ++dropped;
      }
    }
    if (!this_one) held_handles.insert(h);  // held for later
    PUSHWIRE_FUZZ_CHECK(held_handles.size() == rx.held());
  }
  PUSHWIRE_FUZZ_CHECK(delivered + dropped + rx.held() == taken);
  return 0;
}
