// RoCEv2: the full frame parse with the ICRC verified, on arbitrary Ethernet frames. What
// parses lies inside the frame, and the view and the full decode agree.
#include <cstdint>
#include <span>

#include <pushwire/ib/roce.hpp>

#include "provider.hpp"

using namespace pushwire;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> frame(reinterpret_cast<const std::byte*>(data), size);
  for (const auto rd : {ib::rd_class::dc, ib::rd_class::ibta_rd}) {
    ib::roce_view v{};
    const wire::error e = ib::inspect(frame, v, {.rd = rd, .icrc = ib::icrc_check::report});
    if (e.code != wire::errc{}) continue;
    PUSHWIRE_FUZZ_CHECK(v.payload.data() >= frame.data() && v.payload.data() + v.payload.size() <= frame.data() + size);
    PUSHWIRE_FUZZ_CHECK(v.icrc_state != ib::icrc_status::unchecked);
    ib::roce_packet p{};
    ib::decode(v, p);
    PUSHWIRE_FUZZ_CHECK(p.payload.size() == v.payload.size());
    const auto strict = ib::parse(frame, {.rd = rd, .icrc = ib::icrc_check::require});
    PUSHWIRE_FUZZ_CHECK(strict.has_value() == (v.icrc_state == ib::icrc_status::good));
  }
  return 0;
}
