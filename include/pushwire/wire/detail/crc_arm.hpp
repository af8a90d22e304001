// aarch64 CRC kernels (wire/crc.hpp dispatches to them), picked at run time from getauxval's
// AT_HWCAP on Linux:
// - armv8_crc (HWCAP_CRC32): crc32x / crc32cx in three interleaved streams, joined by
//   multiplication modulo P (crc_common.hpp's stream_shift);
// - pmull (HWCAP_PMULL and HWCAP_CRC32): PMULL folding on 4 x 128-bit lanes with the constants
//   of the x86 folding (PMULL and PCLMULQDQ multiply alike), the last lane reduced by two crc32x
//   / crc32cx, the remaining bytes by the crc instructions.
// g++ compiles them with target attributes. clang 14's NEON and ACLE intrinsics need their
// features at compile time, so under clang these paths exist only when the build enables them
// (-march=armv8-a+crc+crypto). Tested for correctness under qemu-aarch64; speed not measured.
#pragma once

#include <pushwire/wire/detail/crc_common.hpp>

#if defined(__aarch64__) && defined(__GNUC__) && \
    (!defined(__clang__) || (defined(__ARM_FEATURE_CRC32) && defined(__ARM_FEATURE_AES)))
#define PUSHWIRE_CRC_ARM 1
#include <arm_acle.h>
#include <arm_neon.h>
#if defined(__linux__)
#include <sys/auxv.h>
#endif
#else
#define PUSHWIRE_CRC_ARM 0
#endif

#if PUSHWIRE_CRC_ARM
namespace pushwire::wire::crc::detail {

struct cpu {
  bool crc = false;    // crc32{b,h,w,x} and crc32c{b,h,w,x}
  bool pmull = false;  // PMULL on 64-bit lanes, and crc
};

inline cpu detect() {
  cpu c;
#if defined(__linux__)
  const unsigned long hw = getauxval(AT_HWCAP);
  c.crc = hw & (1ul << 7);                      // HWCAP_CRC32
  c.pmull = c.crc && (hw & (1ul << 4));         // HWCAP_PMULL
#else
  c.crc = true;  // the clang build required both at compile time
  c.pmull = true;
#endif
  return c;
}

inline const cpu& features() {
  static const cpu c = detect();
  return c;
}

#if defined(__clang__)
#define PUSHWIRE_TARGET_ARMCRC __attribute__((always_inline))
#define PUSHWIRE_ENTRY_ARMCRC __attribute__((noinline))
#define PUSHWIRE_TARGET_PMULL __attribute__((always_inline))
#define PUSHWIRE_ENTRY_PMULL __attribute__((noinline))
#else
#define PUSHWIRE_TARGET_ARMCRC __attribute__((target("+crc"), always_inline))
#define PUSHWIRE_ENTRY_ARMCRC __attribute__((target("+crc"), noinline))
#define PUSHWIRE_TARGET_PMULL __attribute__((target("+crc+crypto"), always_inline))
#define PUSHWIRE_ENTRY_PMULL __attribute__((target("+crc+crypto"), noinline))
#endif

// The register after 8 (or 1) more bytes, no inversion: crc32x / crc32cx (crc32b / crc32cb).
template <std::uint32_t Poly>
PUSHWIRE_TARGET_ARMCRC inline std::uint32_t crc_word(std::uint32_t c, std::uint64_t w) {
  if constexpr (Poly == crc32c_poly) return __crc32cd(c, w);
  else return __crc32d(c, w);
}
template <std::uint32_t Poly>
PUSHWIRE_TARGET_ARMCRC inline std::uint32_t crc_byte(std::uint32_t c, std::byte b) {
  if constexpr (Poly == crc32c_poly) return __crc32cb(c, static_cast<std::uint8_t>(b));
  else return __crc32b(c, static_cast<std::uint8_t>(b));
}

// One stream to the end.
template <std::uint32_t Poly, class Out>
PUSHWIRE_TARGET_ARMCRC inline std::uint32_t crc_tail(std::uint32_t c, const std::byte* p, std::size_t n, Out out) {
  for (; n >= 8; p += 8, n -= 8) {
    const std::uint64_t w = load64le(p);
    put64(out, p, w);
    c = crc_word<Poly>(c, w);
  }
  put_bytes(out, p, n);
  for (; n; ++p, --n) c = crc_byte<Poly>(c, *p);
  return c;
}

// Three streams per round, as run_sse42 (crc_x86.hpp), joined by multmodp.
template <std::uint32_t Poly, class Out>
PUSHWIRE_ENTRY_ARMCRC inline std::uint32_t run_armv8_crc(std::uint32_t c0, const std::byte* p, std::size_t n, Out out) {
  while (n >= 24) {
    const std::size_t words = std::min(n / 24, stream_words_max), b = 8 * words;
    std::uint32_t c1 = 0, c2 = 0;
    for (const std::byte* q = p; q != p + b; q += 8) {
      const std::uint64_t w0 = load64le(q), w1 = load64le(q + b), w2 = load64le(q + 2 * b);
      put64(out, q, w0);
      put64(out, q + b, w1);
      put64(out, q + 2 * b, w2);
      c0 = crc_word<Poly>(c0, w0);
      c1 = crc_word<Poly>(c1, w1);
      c2 = crc_word<Poly>(c2, w2);
    }
    const auto& k = stream_shift<Poly, false>;
    c0 = multmodp(k[2 * words], c0, Poly) ^ multmodp(k[words], c1, Poly) ^ c2;
    p += 3 * b;
    n -= 3 * b;
  }
  return crc_tail<Poly>(c0, p, n, out);
}

PUSHWIRE_TARGET_PMULL inline uint64x2_t fold(uint64x2_t r, fold_k k) {
  const poly128_t lo = vmull_p64(vgetq_lane_u64(r, 0), k.lo);
  const poly128_t hi = vmull_p64(vgetq_lane_u64(r, 1), k.hi);
  return veorq_u64(vreinterpretq_u64_p128(lo), vreinterpretq_u64_p128(hi));
}
PUSHWIRE_TARGET_PMULL inline uint64x2_t load128(const std::byte* p) {
  return vreinterpretq_u64_u8(vld1q_u8(reinterpret_cast<const std::uint8_t*>(p)));
}
PUSHWIRE_TARGET_PMULL inline void put128(no_copy, const std::byte*, uint64x2_t) {}
PUSHWIRE_TARGET_PMULL inline void put128(copy_to out, const std::byte* p, uint64x2_t v) {
  vst1q_u8(reinterpret_cast<std::uint8_t*>(const_cast<std::byte*>(p) + out.delta), vreinterpretq_u8_u64(v));
}

// PMULL folding from 64 bytes; shorter input is the crc instructions' alone.
template <std::uint32_t Poly, class Out>
PUSHWIRE_ENTRY_PMULL inline std::uint32_t run_pmull(std::uint32_t reg, const std::byte* p, std::size_t n, Out out) {
  if (n < 64) return crc_tail<Poly>(reg, p, n, out);
  using F = folding<Poly>;
  const auto ld = [&](const std::byte* q) PUSHWIRE_TARGET_PMULL {
    const uint64x2_t v = load128(q);
    put128(out, q, v);
    return v;
  };
  uint64x2_t x0 = veorq_u64(ld(p), vcombine_u64(vcreate_u64(reg), vcreate_u64(0))), x1 = ld(p + 16),
             x2 = ld(p + 32), x3 = ld(p + 48);
  p += 64;
  n -= 64;
  while (n >= 64) {
    x0 = veorq_u64(fold(x0, F::k512), ld(p));
    x1 = veorq_u64(fold(x1, F::k512), ld(p + 16));
    x2 = veorq_u64(fold(x2, F::k512), ld(p + 32));
    x3 = veorq_u64(fold(x3, F::k512), ld(p + 48));
    p += 64;
    n -= 64;
  }
  const uint64x2_t r = veorq_u64(veorq_u64(fold(x0, F::k384), fold(x1, F::k256)), veorq_u64(fold(x2, F::k128), x3));
  // The lane's register from 0 is R·x^32 mod P: its two words through the crc instruction.
  const std::uint32_t c = crc_word<Poly>(crc_word<Poly>(0, vgetq_lane_u64(r, 0)), vgetq_lane_u64(r, 1));
  return crc_tail<Poly>(c, p, n, out);
}

}  // namespace pushwire::wire::crc::detail
#endif  // PUSHWIRE_CRC_ARM
