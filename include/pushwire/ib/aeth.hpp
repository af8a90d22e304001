// The AETH syndrome as a typed view (IBTA 9.7.5.1), the RNR NAK timer table, the local ACK
// timeout, and the page-fault ACK (page-fault explicit flow control) on RoCE: an RNR NAK whose
// timer code carries the expected fault delay.
#pragma once

#include <array>
#include <cstdint>
#include <optional>

#include <pushwire/ib/headers.hpp>

namespace pushwire::ib {

/// Syndrome bits 6..5 (bit 7 is reserved).
enum class aeth_kind : std::uint8_t { ack = 0, rnr_nak = 1, reserved = 2, nak = 3 };

/// NAK codes (syndrome bits 4..0 when kind is nak).
enum class nak_code : std::uint8_t {
  psn_sequence_error = 0,
  invalid_request = 1,
  remote_access_error = 2,
  remote_operational_error = 3,
  invalid_rd_request = 4,
};

/// RNR NAK timer: code -> microseconds (code 0 is the longest, 655.36 ms).
inline constexpr std::array<std::uint32_t, 32> rnr_timer_us{
    655360, 10,    20,    30,    40,    60,    80,     120,    160,    240,    320,
    480,    640,   960,   1280,  1920,  2560,  3840,   5120,   7680,   10240,  15360,
    20480,  30720, 40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520};

/// Microseconds of RNR timer code (low 5 bits used).
constexpr std::uint32_t rnr_to_us(std::uint8_t code) { return rnr_timer_us[code & 0x1F]; }

/// The code of the shortest delay >= us (so a sender waits at least that long); 655.36 ms
/// (code 0) for anything longer than 491.52 ms.
constexpr std::uint8_t rnr_from_us(std::uint32_t us) {
  std::uint8_t best = 0;
  for (std::uint8_t c = 1; c < 32; ++c)
    if (rnr_timer_us[c] >= us && rnr_timer_us[c] < rnr_timer_us[best]) best = c;
  return best;
}

/// The local ACK timeout of QP attribute code `code` (IBTA 11.2.4.2: 4.096 us * 2^code),
/// nanoseconds; code 0 means no timeout (nullopt). Codes 1..31 (the low 5 bits are used).
constexpr std::optional<std::uint64_t> local_ack_timeout_ns(std::uint8_t code) {
  code &= 0x1F;
  if (code == 0) return std::nullopt;
  return std::uint64_t{4096} << code;
}

/// AETH credit count encoding (IBTA table 46): code -> receive WQEs available; code 31 means
/// "no credit information" (unlimited).
inline constexpr std::array<std::uint16_t, 31> credit_counts{0,   1,   2,   3,    4,    6,    8,    12,   16,    24,    32,
                                                             48,  64,  96,  128,  192,  256,  384,  512,  768,   1024,  1536,
                                                             2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768};
/// Receive WQEs a credit code announces (nullopt for 31, unlimited).
constexpr std::optional<std::uint32_t> credit_count(std::uint8_t code) {
  return (code & 0x1F) == 31 ? std::nullopt : std::optional<std::uint32_t>{credit_counts[code & 0x1F]};
}
/// The largest code whose count is <= n (a responder never announces more than it has).
constexpr std::uint8_t credit_code(std::uint32_t n) {
  std::uint8_t c = 0;
  while (c + 1 < 31 && credit_counts[c + 1] <= n) ++c;
  return c;
}
static_assert(credit_code(0) == 0 && credit_code(5) == 4 && credit_code(6) == 5 && credit_code(1u << 20) == 30 &&
              *credit_count(credit_code(100)) == 96 && !credit_count(31));

/// A syndrome byte, read and built by meaning.
struct syndrome {
  std::uint8_t raw = 0;

  /// ACK with this many credits; 0x1F means unlimited.
  static constexpr std::uint8_t unlimited_credits = 0x1F;

  static constexpr syndrome ack(std::uint8_t credits) { return {static_cast<std::uint8_t>(credits & 0x1F)}; }
  static constexpr syndrome rnr_nak(std::uint8_t timer_code) {
    return {static_cast<std::uint8_t>(0x20 | (timer_code & 0x1F))};
  }
  static constexpr syndrome nak(nak_code c) { return {static_cast<std::uint8_t>(0x60 | static_cast<std::uint8_t>(c))}; }

  constexpr aeth_kind kind() const { return static_cast<aeth_kind>((raw >> 5) & 3); }
  constexpr std::uint8_t value() const { return raw & 0x1F; }
  /// ACK: credit count (0x1F unlimited).
  constexpr std::optional<std::uint8_t> credits() const {
    return kind() == aeth_kind::ack ? std::optional{value()} : std::nullopt;
  }
  /// RNR NAK: timer code.
  constexpr std::optional<std::uint8_t> rnr_timer() const {
    return kind() == aeth_kind::rnr_nak ? std::optional{value()} : std::nullopt;
  }
  /// NAK: code (values above 4 are reserved and returned as is).
  constexpr std::optional<nak_code> nak_reason() const {
    return kind() == aeth_kind::nak ? std::optional{static_cast<nak_code>(value())} : std::nullopt;
  }
  friend constexpr bool operator==(syndrome, syndrome) = default;
};

constexpr syndrome syndrome_of(const aeth& a) { return {a.syndrome}; }

/// The page-fault ACK on RoCE: an AETH with an RNR NAK whose timer code is the
/// shortest delay >= the expected fault resolution time. On the wire it is an RNR NAK; the
/// requester that knows the convention pauses instead of counting a retry.
constexpr aeth page_fault_ack(std::uint32_t msn, std::uint32_t delay_us) {
  return {.syndrome = syndrome::rnr_nak(rnr_from_us(delay_us)).raw, .msn = msn & 0xFFFFFF};
}

/// The delay a page-fault ACK announces, in microseconds (nullopt unless an RNR NAK).
constexpr std::optional<std::uint32_t> page_fault_delay_us(const aeth& a) {
  const auto t = syndrome_of(a).rnr_timer();
  return t ? std::optional{rnr_to_us(*t)} : std::nullopt;
}

}  // namespace pushwire::ib
