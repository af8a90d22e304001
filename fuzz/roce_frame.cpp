// RoCEv2: the full frame parse with the ICRC verified, on arbitrary Ethernet frames. What
// parses lies inside the frame, the view and the full decode agree, and building the decoded
// packet gives the frame back byte for byte.
#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include <pushwire/ib/roce.hpp>

#include "provider.hpp"

using namespace pushwire;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> frame(reinterpret_cast<const std::byte*>(data), size);
  for (const auto rd : {ib::rd_class::dc, ib::rd_class::ibta_rd}) {
    ib::roce_view v{};
    const wire::error e = ib::inspect(frame, v, {.crc = ib::crc_check::report, .rd = rd});
    if (e.code != wire::errc{}) continue;
    PUSHWIRE_FUZZ_CHECK(v.payload.data() >= frame.data() && v.payload.data() + v.payload.size() <= frame.data() + size);
    PUSHWIRE_FUZZ_CHECK(v.icrc_state != ib::crc_status::unchecked);
    ib::roce_packet p{};
    ib::decode(v, p, rd);
    // build(decode(f)) is f, byte for byte.
    std::vector<std::byte> again(size + 1);
    const auto n = ib::build(p, again);
    PUSHWIRE_FUZZ_CHECK(n.has_value() && *n == size && std::equal(frame.begin(), frame.end(), again.begin()));
    PUSHWIRE_FUZZ_CHECK(p.payload.size() == v.payload.size());
    const auto strict = ib::decode(frame, {.crc = ib::crc_check::require, .rd = rd});
    PUSHWIRE_FUZZ_CHECK(strict.has_value() == (v.icrc_state == ib::crc_status::good));
  }
  return 0;
}
