// Packet sequence numbers: 24-bit, compared in serial-number arithmetic (RFC 1982 style): a is
// before b when (b - a) mod 2^24 is in 1 .. 2^23 - 1. Exactly 2^23 apart is ordered by neither.
#pragma once

#include <cstdint>

namespace pushwire::ib {

inline constexpr std::uint32_t psn_mask = 0xFFFFFF;
inline constexpr std::uint32_t psn_half = 0x800000;

/// p + n mod 2^24 (n may be negative).
constexpr std::uint32_t psn_add(std::uint32_t p, std::int64_t n) {
  return static_cast<std::uint32_t>((static_cast<std::int64_t>(p) + n) & psn_mask);
}

/// Signed distance from b to a: a - b as a value in [-2^23, 2^23).
constexpr std::int32_t psn_diff(std::uint32_t a, std::uint32_t b) {
  const std::uint32_t d = (a - b) & psn_mask;
  return d >= psn_half ? static_cast<std::int32_t>(d) - static_cast<std::int32_t>(psn_mask + 1)
                       : static_cast<std::int32_t>(d);
}

/// a is before b.
constexpr bool psn_before(std::uint32_t a, std::uint32_t b) {
  const std::uint32_t d = (b - a) & psn_mask;
  return d != 0 && d < psn_half;
}
constexpr bool psn_after(std::uint32_t a, std::uint32_t b) { return psn_before(b, a); }

static_assert(psn_add(0xFFFFFF, 1) == 0 && psn_add(0, -1) == 0xFFFFFF);
static_assert(psn_before(0xFFFFFF, 0) && psn_after(0, 0xFFFFFF) && psn_diff(0, 0xFFFFFF) == 1);
static_assert(!psn_before(0, psn_half) && !psn_before(psn_half, 0));

}  // namespace pushwire::ib
