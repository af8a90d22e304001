// x86-64 CRC kernels (wire/crc.hpp dispatches to them): PCLMULQDQ folding on 128-bit lanes,
// VPCLMULQDQ folding on 256-bit (AVX2) and 512-bit (AVX-512) lanes, and CRC-32C with the SSE4.2
// crc32 instruction in three interleaved streams. Each has a fused-copy form (Out = copy_to).
//
// Folding (Intel, "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ"): a 16-byte lane
// R = Rlo·x^64 + Rhi (Rlo = its first 8 bytes, bit-reflected) moved D bits further is
// Rlo·x^(D+64) + Rhi·x^D; PCLMULQDQ of reflected operands contributes one extra factor x, so the
// constants are bitrev64(x^(D+63) mod P) and bitrev64(x^(D-1) mod P) (crc_common.hpp). The last
// 16-byte lane is reduced with two crc32 instructions (CRC-32C) or three PCLMULQDQs and a
// slice-by-4 lookup (CRC-32); a tail of 1..15 bytes is merged by the overlapping-load shuffle.
#pragma once

#include <utility>

#include <pushwire/wire/detail/crc_common.hpp>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define PUSHWIRE_CRC_X86 1
#include <cpuid.h>
#include <immintrin.h>
#else
#define PUSHWIRE_CRC_X86 0
#endif

#if PUSHWIRE_CRC_X86
namespace pushwire::wire::crc::detail {

struct cpu {
  bool sse42 = false;     // crc32 instruction, with PCLMULQDQ to join streams
  bool pclmul = false;    // PCLMULQDQ, SSSE3, SSE4.1, SSE4.2
  bool avx2vpclmul = false;  // VPCLMULQDQ on YMM, AVX2, OS saves YMM
  bool avx512vpclmul = false;  // VPCLMULQDQ on ZMM, AVX-512 F/BW/VL, OS saves ZMM
};

inline cpu detect() {
  cpu c;
  unsigned a, b, cx, d;
  if (!__get_cpuid(1, &a, &b, &cx, &d)) return c;
  const bool ssse3 = cx & (1u << 9), sse41 = cx & (1u << 19), sse42 = cx & (1u << 20), osxsave = cx & (1u << 27);
  c.pclmul = (cx & (1u << 1)) && ssse3 && sse41 && sse42;
  c.sse42 = c.pclmul;
  if (!osxsave) return c;
  unsigned xlo, xhi;
  __asm__("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
  const bool ymm_state = (xlo & 0x06) == 0x06;  // XMM, YMM
  const bool zmm_state = (xlo & 0xE6) == 0xE6;  // XMM, YMM, opmask, ZMM_Hi256, Hi16_ZMM
  if (!__get_cpuid_count(7, 0, &a, &b, &cx, &d)) return c;
  const bool avx2 = b & (1u << 5), vpclmul = cx & (1u << 10);
  const bool avx512f = b & (1u << 16), avx512bw = b & (1u << 30), avx512vl = b & (1u << 31);
  c.avx2vpclmul = c.pclmul && ymm_state && avx2 && vpclmul;
  c.avx512vpclmul = c.avx2vpclmul && zmm_state && avx512f && avx512bw && avx512vl;
  return c;
}

inline const cpu& features() {
  static const cpu c = detect();
  return c;
}

// Helpers are always inlined, so each entry point compiles them with its own target (a subset
// of the entry's). Entry points are real functions.
#define PUSHWIRE_TARGETS_PCLMUL "pclmul,sse4.2"
#define PUSHWIRE_TARGETS_AVX2 "pclmul,sse4.2,avx2,vpclmulqdq"
#define PUSHWIRE_TARGETS_AVX512 "pclmul,sse4.2,avx2,avx512f,avx512vl,avx512bw,vpclmulqdq"
#define PUSHWIRE_TARGET_PCLMUL __attribute__((target(PUSHWIRE_TARGETS_PCLMUL), always_inline))
#define PUSHWIRE_TARGET_AVX2 __attribute__((target(PUSHWIRE_TARGETS_AVX2), always_inline))
#define PUSHWIRE_TARGET_AVX512 __attribute__((target(PUSHWIRE_TARGETS_AVX512), always_inline))
#define PUSHWIRE_ENTRY_PCLMUL __attribute__((target(PUSHWIRE_TARGETS_PCLMUL), noinline))
#define PUSHWIRE_ENTRY_AVX2 __attribute__((target(PUSHWIRE_TARGETS_AVX2), noinline))
#define PUSHWIRE_ENTRY_AVX512 __attribute__((target(PUSHWIRE_TARGETS_AVX512), noinline))

PUSHWIRE_TARGET_PCLMUL inline __m128i kreg(fold_k k) {
  return _mm_set_epi64x(static_cast<long long>(k.hi), static_cast<long long>(k.lo));
}

// r moved forward by the distance k was built for.
PUSHWIRE_TARGET_PCLMUL inline __m128i fold(__m128i r, __m128i k) {
  return _mm_xor_si128(_mm_clmulepi64_si128(r, k, 0x00), _mm_clmulepi64_si128(r, k, 0x11));
}

PUSHWIRE_TARGET_PCLMUL inline __m128i load128(const std::byte* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}
PUSHWIRE_TARGET_PCLMUL inline void put128(no_copy, const std::byte*, __m128i) {}
PUSHWIRE_TARGET_PCLMUL inline void put128(copy_to out, const std::byte* p, __m128i v) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(const_cast<std::byte*>(p) + out.delta), v);
}

// The register after the 16 bytes of r (the last lane), starting from register 0, i.e.
// R·x^32 mod P. CRC-32C: two crc32 instructions. CRC-32: split R into 32-bit groups d0..d3
// (d0 = highest degree); R·x^32 = d0·x^128 + d1·x^96 + d2·x^64 + d3·x^32. Three parallel
// PCLMULQDQs of d0, d1, d2 (moved to the low end of a lane) by x^127, x^95, x^63 mod P (the
// extra x again) give degree <= 63, d3·x^32 is already there: T = U·x^32 + V, and U·x^32 mod P
// is four slice-by-4 lookups.
template <std::uint32_t Poly>
PUSHWIRE_TARGET_PCLMUL inline std::uint32_t reduce(__m128i r) {
  if constexpr (Poly == crc32c_poly) {
    const auto lo = static_cast<std::uint64_t>(_mm_cvtsi128_si64(r));
    const auto hi = static_cast<std::uint64_t>(_mm_extract_epi64(r, 1));
    return static_cast<std::uint32_t>(_mm_crc32_u64(_mm_crc32_u64(0, lo), hi));
  } else {
    using F = folding<Poly>;
    const __m128i zero = _mm_setzero_si128();
    const __m128i d01 = _mm_unpacklo_epi32(zero, r);  // lanes: d0 << 32, d1 << 32
    const __m128i d2 = _mm_unpackhi_epi32(zero, r);   // lane 0: d2 << 32
    const __m128i k01 = _mm_set_epi64x(static_cast<long long>(F::r95), static_cast<long long>(F::r127));
    const __m128i k2 = _mm_cvtsi64_si128(static_cast<long long>(F::r63));
    // T's high lane (T's low lane is never read, so d3's shift may drag d1, d2 into it).
    const __m128i t = _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(d01, k01, 0x00), _mm_clmulepi64_si128(d01, k01, 0x11)),
                                    _mm_xor_si128(_mm_clmulepi64_si128(d2, k2, 0x00), _mm_srli_si128(r, 4)));
    const auto t64 = static_cast<std::uint64_t>(_mm_extract_epi64(t, 1));
    const auto& tb = tables<Poly>;
    const auto u = static_cast<std::uint32_t>(t64);
    return tb[3][u & 0xFF] ^ tb[2][(u >> 8) & 0xFF] ^ tb[1][(u >> 16) & 0xFF] ^ tb[0][u >> 24] ^
           static_cast<std::uint32_t>(t64 >> 32);
  }
}

// Lanes from p onward, given the lane r that covers the bytes before p; n >= 0 bytes remain.
// `last` is where the message's final 16 bytes are (the n < 16 case reads them, so the bytes
// just before p must belong to the message too; p + n - 16 when they are in the same buffer).
template <std::uint32_t Poly, class Out = no_copy>
PUSHWIRE_TARGET_PCLMUL inline std::uint32_t finish(__m128i r, const std::byte* p, std::size_t n,
                                                   const std::byte* last = nullptr, Out out = {}) {
  using F = folding<Poly>;
  const __m128i k128 = kreg(F::k128);
  while (n >= 16) {
    const __m128i v = load128(p);
    put128(out, p, v);
    r = _mm_xor_si128(fold(r, k128), v);
    p += 16;
    n -= 16;
  }
  if (n) {  // 1..15 bytes: r's first n bytes move a lane forward, the rest joins the tail
    put_bytes(out, p, n);
    const auto* sh = reinterpret_cast<const std::byte*>(shuffle);
    const __m128i up = load128(sh + n);        // shift left by 16 - n bytes
    const __m128i down = load128(sh + 16 + n); // shift right by n bytes
    const __m128i tail16 = load128(last ? last : p + n - 16);  // overlapping: ends at the last byte
    const __m128i head = _mm_shuffle_epi8(r, up);
    const __m128i rest = _mm_blendv_epi8(tail16, _mm_shuffle_epi8(r, down), up);
    r = _mm_xor_si128(fold(head, k128), rest);
  }
  return reduce<Poly>(r);
}

// Register after n >= 16 bytes; `init` is XORed into the first 16-byte lane (the register, or
// what a preceding part of the message folds to); 8 x 128-bit lanes from 256 bytes, then 4.
template <std::uint32_t Poly, class Out = no_copy>
PUSHWIRE_TARGET_PCLMUL inline std::uint32_t pclmul_lanes(__m128i init, const std::byte* p, std::size_t n, Out out = {}) {
  using F = folding<Poly>;
  const auto ld = [&](const std::byte* q) PUSHWIRE_TARGET_PCLMUL {
    const __m128i v = load128(q);
    put128(out, q, v);
    return v;
  };
  if (n < 64) {
    const __m128i r = _mm_xor_si128(ld(p), init);
    return finish<Poly>(r, p + 16, n - 16, nullptr, out);
  }
  __m128i x0 = _mm_xor_si128(ld(p), init), x1 = ld(p + 16), x2 = ld(p + 32), x3 = ld(p + 48);
  p += 64;
  n -= 64;
  const __m128i k512 = kreg(F::k512);
  if (n >= 192) {  // eight chains: four alone are latency-bound
    __m128i x4 = ld(p), x5 = ld(p + 16), x6 = ld(p + 32), x7 = ld(p + 48);
    p += 64;
    n -= 64;
    const __m128i k1024 = kreg(F::k1024);
    while (n >= 128) {
      x0 = _mm_xor_si128(fold(x0, k1024), ld(p));
      x1 = _mm_xor_si128(fold(x1, k1024), ld(p + 16));
      x2 = _mm_xor_si128(fold(x2, k1024), ld(p + 32));
      x3 = _mm_xor_si128(fold(x3, k1024), ld(p + 48));
      x4 = _mm_xor_si128(fold(x4, k1024), ld(p + 64));
      x5 = _mm_xor_si128(fold(x5, k1024), ld(p + 80));
      x6 = _mm_xor_si128(fold(x6, k1024), ld(p + 96));
      x7 = _mm_xor_si128(fold(x7, k1024), ld(p + 112));
      p += 128;
      n -= 128;
    }
    x0 = _mm_xor_si128(fold(x0, k512), x4);
    x1 = _mm_xor_si128(fold(x1, k512), x5);
    x2 = _mm_xor_si128(fold(x2, k512), x6);
    x3 = _mm_xor_si128(fold(x3, k512), x7);
  }
  while (n >= 64) {
    x0 = _mm_xor_si128(fold(x0, k512), ld(p));
    x1 = _mm_xor_si128(fold(x1, k512), ld(p + 16));
    x2 = _mm_xor_si128(fold(x2, k512), ld(p + 32));
    x3 = _mm_xor_si128(fold(x3, k512), ld(p + 48));
    p += 64;
    n -= 64;
  }
  const __m128i r = _mm_xor_si128(_mm_xor_si128(fold(x0, kreg(F::k384)), fold(x1, kreg(F::k256))),
                                  _mm_xor_si128(fold(x2, kreg(F::k128)), x3));
  return finish<Poly>(r, p, n, nullptr, out);
}

template <std::uint32_t Poly, class Out>
PUSHWIRE_ENTRY_PCLMUL inline std::uint32_t run_pclmul(std::uint32_t reg, const std::byte* p, std::size_t n, Out out) {
  return pclmul_lanes<Poly>(_mm_cvtsi32_si128(static_cast<int>(reg)), p, n, out);
}

// The head (a multiple of 16 bytes, from register reg) folded to one lane just before `tail`.
template <std::uint32_t Poly>
PUSHWIRE_TARGET_PCLMUL inline __m128i head_lane(std::uint32_t reg, const std::byte* h, std::size_t n) {
  const __m128i k128 = kreg(folding<Poly>::k128);
  __m128i r = _mm_xor_si128(load128(h), _mm_cvtsi32_si128(static_cast<int>(reg)));
  for (std::size_t i = 16; i < n; i += 16) r = _mm_xor_si128(fold(r, k128), load128(h + i));
  return r;
}

// A tail of fewer than 16 bytes after the head lane r: the message's last 16 bytes span the
// head's end and the tail, so they are gathered on the stack (never read before the tail).
template <std::uint32_t Poly>
PUSHWIRE_TARGET_PCLMUL inline std::uint32_t finish_short_tail(__m128i r, const std::byte* h, std::size_t hn,
                                                              const std::byte* t, std::size_t tn) {
  alignas(16) std::byte last[16];
  std::memcpy(last, h + hn - (16 - tn), 16 - tn);
  if (tn) std::memcpy(last + 16 - tn, t, tn);
  return finish<Poly>(r, t, tn, last);
}

// Register after head || tail as one fold chain (head: a multiple of 16 bytes, >= 16).
template <std::uint32_t Poly>
PUSHWIRE_ENTRY_PCLMUL inline std::uint32_t concat_pclmul(std::uint32_t reg, const std::byte* h, std::size_t hn,
                                                         const std::byte* t, std::size_t tn) {
  const __m128i r = head_lane<Poly>(reg, h, hn);
  if (tn < 16) return finish_short_tail<Poly>(r, h, hn, t, tn);
  return pclmul_lanes<Poly>(fold(r, kreg(folding<Poly>::k128)), t, tn);
}

// These helpers only ever inline into entry points of their own target, so g++'s note that a
// 256- or 512-bit vector return changes the ABI without AVX does not apply.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

// ---- 256-bit lanes (AVX2 + VPCLMULQDQ) ----

PUSHWIRE_TARGET_AVX2 inline __m256i kreg256(fold_k k) {
  const auto lo = static_cast<long long>(k.lo), hi = static_cast<long long>(k.hi);
  return _mm256_set_epi64x(hi, lo, hi, lo);
}
PUSHWIRE_TARGET_AVX2 inline __m256i load256(const std::byte* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}
PUSHWIRE_TARGET_AVX2 inline void put256(no_copy, const std::byte*, __m256i) {}
PUSHWIRE_TARGET_AVX2 inline void put256(copy_to out, const std::byte* p, __m256i v) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(const_cast<std::byte*>(p) + out.delta), v);
}
// Both 128-bit halves of r moved forward by k's distance, plus next.
PUSHWIRE_TARGET_AVX2 inline __m256i fold256(__m256i r, __m256i k, __m256i next) {
  return _mm256_xor_si256(_mm256_xor_si256(_mm256_clmulepi64_epi128(r, k, 0x00), _mm256_clmulepi64_epi128(r, k, 0x11)),
                          next);
}

// Four lanes covering the 128 bytes before p, then the rest of the input: four lanes while 128
// bytes remain, one while 32 do, then the 128-bit finish.
template <std::uint32_t Poly, class Out>
PUSHWIRE_TARGET_AVX2 inline std::uint32_t avx2_four(__m256i y0, __m256i y1, __m256i y2, __m256i y3, const std::byte* p,
                                                    std::size_t n, Out out) {
  using F = folding<Poly>;
  const auto ld = [&](const std::byte* q) PUSHWIRE_TARGET_AVX2 {
    const __m256i v = load256(q);
    put256(out, q, v);
    return v;
  };
  const __m256i k1024 = kreg256(F::k1024);
  while (n >= 128) {
    y0 = fold256(y0, k1024, ld(p));
    y1 = fold256(y1, k1024, ld(p + 32));
    y2 = fold256(y2, k1024, ld(p + 64));
    y3 = fold256(y3, k1024, ld(p + 96));
    p += 128;
    n -= 128;
  }
  // Four consecutive lanes -> one: y0 moves 768 bits, y1 512, y2 256; y3 stays.
  const __m256i k256 = kreg256(F::k256);
  __m256i y = _mm256_xor_si256(fold256(y0, kreg256(F::k768), fold256(y1, kreg256(F::k512), y3)),
                               fold256(y2, k256, _mm256_setzero_si256()));
  while (n >= 32) {
    y = fold256(y, k256, ld(p));
    p += 32;
    n -= 32;
  }
  const __m128i r = _mm_xor_si128(fold(_mm256_castsi256_si128(y), kreg(F::k128)), _mm256_extracti128_si256(y, 1));
  return finish<Poly>(r, p, n, nullptr, out);
}

// Eight lanes (covering the 256 bytes before p) merged to four, then avx2_four.
template <std::uint32_t Poly, class Out>
PUSHWIRE_TARGET_AVX2 inline std::uint32_t avx2_eight(__m256i y0, __m256i y1, __m256i y2, __m256i y3, __m256i y4,
                                                     __m256i y5, __m256i y6, __m256i y7, const std::byte* p,
                                                     std::size_t n, Out out) {
  const __m256i k1024 = kreg256(folding<Poly>::k1024);
  return avx2_four<Poly>(fold256(y0, k1024, y4), fold256(y1, k1024, y5), fold256(y2, k1024, y6),
                         fold256(y3, k1024, y7), p, n, out);
}

// Register after n >= 16 bytes: 8 x 256-bit lanes (256 bytes per step) from 512 bytes, then 4
// lanes, then one, then the 128-bit finish.
template <std::uint32_t Poly, class Out = no_copy>
PUSHWIRE_TARGET_AVX2 inline std::uint32_t avx2_lanes(__m128i init, const std::byte* p, std::size_t n, Out out = {}) {
  using F = folding<Poly>;
  if (n < 128) return pclmul_lanes<Poly>(init, p, n, out);
  const auto ld = [&](const std::byte* q) PUSHWIRE_TARGET_AVX2 {
    const __m256i v = load256(q);
    put256(out, q, v);
    return v;
  };
  __m256i y0 = _mm256_xor_si256(ld(p), _mm256_set_m128i(_mm_setzero_si128(), init));
  __m256i y1 = ld(p + 32), y2 = ld(p + 64), y3 = ld(p + 96);
  p += 128;
  n -= 128;
  if (n < 384) return avx2_four<Poly>(y0, y1, y2, y3, p, n, out);
  __m256i y4 = ld(p), y5 = ld(p + 32), y6 = ld(p + 64), y7 = ld(p + 96);
  p += 128;
  n -= 128;
  const __m256i k2048 = kreg256(F::k2048);
  while (n >= 256) {
    y0 = fold256(y0, k2048, ld(p));
    y1 = fold256(y1, k2048, ld(p + 32));
    y2 = fold256(y2, k2048, ld(p + 64));
    y3 = fold256(y3, k2048, ld(p + 96));
    y4 = fold256(y4, k2048, ld(p + 128));
    y5 = fold256(y5, k2048, ld(p + 160));
    y6 = fold256(y6, k2048, ld(p + 192));
    y7 = fold256(y7, k2048, ld(p + 224));
    p += 256;
    n -= 256;
  }
  return avx2_eight<Poly>(y0, y1, y2, y3, y4, y5, y6, y7, p, n, out);
}

template <std::uint32_t Poly>
PUSHWIRE_ENTRY_AVX2 inline std::uint32_t concat_avx2(std::uint32_t reg, const std::byte* h, std::size_t hn,
                                                     const std::byte* t, std::size_t tn) {
  const __m128i r = head_lane<Poly>(reg, h, hn);
  if (tn < 16) return finish_short_tail<Poly>(r, h, hn, t, tn);
  return avx2_lanes<Poly>(fold(r, kreg(folding<Poly>::k128)), t, tn);
}

// ---- 512-bit lanes (AVX-512 + VPCLMULQDQ) ----

PUSHWIRE_TARGET_AVX512 inline __m512i kreg512(fold_k k) {
  const auto lo = static_cast<long long>(k.lo), hi = static_cast<long long>(k.hi);
  return _mm512_set_epi64(hi, lo, hi, lo, hi, lo, hi, lo);
}

PUSHWIRE_TARGET_AVX512 inline __m512i load512(const std::byte* p) { return _mm512_loadu_si512(p); }
PUSHWIRE_TARGET_AVX512 inline void put512(no_copy, const std::byte*, __m512i) {}
PUSHWIRE_TARGET_AVX512 inline void put512(copy_to out, const std::byte* p, __m512i v) {
  _mm512_storeu_si512(const_cast<std::byte*>(p) + out.delta, v);
}

PUSHWIRE_TARGET_AVX512 inline __m512i fold512(__m512i r, __m512i k, __m512i next) {
  return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(r, k, 0x00),
                                   _mm512_clmulepi64_epi128(r, k, 0x11), next, 0x96);
}

// Four consecutive 128-bit lanes L0..L3 of z -> one: L0 moves 384 bits, L1 256, L2 128; L3 stays.
template <std::uint32_t Poly>
PUSHWIRE_TARGET_AVX512 inline __m128i lanes_to_one(__m512i z) {
  using F = folding<Poly>;
  const __m512i kl = _mm512_set_epi64(0, 0, static_cast<long long>(F::k128.hi), static_cast<long long>(F::k128.lo),
                                      static_cast<long long>(F::k256.hi), static_cast<long long>(F::k256.lo),
                                      static_cast<long long>(F::k384.hi), static_cast<long long>(F::k384.lo));
  const __m512i moved = _mm512_xor_si512(_mm512_clmulepi64_epi128(z, kl, 0x00), _mm512_clmulepi64_epi128(z, kl, 0x11));
  // (maskz extracts: g++-12 flags the plain ones' undefined operand as maybe-uninitialized)
  const __m256i m256 = _mm256_xor_si256(_mm512_maskz_extracti64x4_epi64(0xF, moved, 0), _mm512_maskz_extracti64x4_epi64(0xF, moved, 1));
  const __m128i r = _mm_xor_si128(_mm256_castsi256_si128(m256), _mm256_extracti128_si256(m256, 1));
  return _mm_xor_si128(r, _mm512_maskz_extracti32x4_epi32(0xF, z, 3));
}

// Four lanes covering the 256 bytes before p, then the rest of the input: four lanes while 256
// bytes remain, one while 64 do, then the 128-bit finish.
template <std::uint32_t Poly, class Out>
PUSHWIRE_TARGET_AVX512 inline std::uint32_t avx512_four(__m512i z0, __m512i z1, __m512i z2, __m512i z3,
                                                        const std::byte* p, std::size_t n, Out out) {
  using F = folding<Poly>;
  const auto ld = [&](const std::byte* q) PUSHWIRE_TARGET_AVX512 {
    const __m512i v = load512(q);
    put512(out, q, v);
    return v;
  };
  const __m512i k2048 = kreg512(F::k2048);
  while (n >= 256) {
    z0 = fold512(z0, k2048, ld(p));
    z1 = fold512(z1, k2048, ld(p + 64));
    z2 = fold512(z2, k2048, ld(p + 128));
    z3 = fold512(z3, k2048, ld(p + 192));
    p += 256;
    n -= 256;
  }
  __m512i z = fold512(z0, kreg512(F::k1536), fold512(z1, kreg512(F::k1024), fold512(z2, kreg512(F::k512), z3)));
  const __m512i k512 = kreg512(F::k512);
  while (n >= 64) {
    z = fold512(z, k512, ld(p));
    p += 64;
    n -= 64;
  }
  return finish<Poly>(lanes_to_one<Poly>(z), p, n, nullptr, out);
}

// Eight lanes (covering the 512 bytes before p) merged to four, then avx512_four.
template <std::uint32_t Poly, class Out>
PUSHWIRE_TARGET_AVX512 inline std::uint32_t avx512_eight(__m512i z0, __m512i z1, __m512i z2, __m512i z3, __m512i z4,
                                                         __m512i z5, __m512i z6, __m512i z7, const std::byte* p,
                                                         std::size_t n, Out out) {
  const __m512i k2048 = kreg512(folding<Poly>::k2048);
  return avx512_four<Poly>(fold512(z0, k2048, z4), fold512(z1, k2048, z5), fold512(z2, k2048, z6),
                           fold512(z3, k2048, z7), p, n, out);
}

// Register after n >= 16 bytes: 8 x 512-bit lanes (512 bytes per step; four chains alone are
// latency-bound) from 1024 bytes, then 4 lanes, then one, then the 128-bit finish.
template <std::uint32_t Poly, class Out = no_copy>
PUSHWIRE_TARGET_AVX512 inline std::uint32_t avx512_lanes(__m128i init, const std::byte* p, std::size_t n, Out out = {}) {
  using F = folding<Poly>;
  if (n < 256) return pclmul_lanes<Poly>(init, p, n, out);
  const auto ld = [&](const std::byte* q) PUSHWIRE_TARGET_AVX512 {
    const __m512i v = load512(q);
    put512(out, q, v);
    return v;
  };
  __m512i z0 = _mm512_xor_si512(ld(p), _mm512_zextsi128_si512(init));
  __m512i z1 = ld(p + 64), z2 = ld(p + 128), z3 = ld(p + 192);
  p += 256;
  n -= 256;
  if (n >= 768) {
    __m512i z4 = ld(p), z5 = ld(p + 64), z6 = ld(p + 128), z7 = ld(p + 192);
    p += 256;
    n -= 256;
    const __m512i k4096 = kreg512(F::k4096);
    while (n >= 512) {
      z0 = fold512(z0, k4096, ld(p));
      z1 = fold512(z1, k4096, ld(p + 64));
      z2 = fold512(z2, k4096, ld(p + 128));
      z3 = fold512(z3, k4096, ld(p + 192));
      z4 = fold512(z4, k4096, ld(p + 256));
      z5 = fold512(z5, k4096, ld(p + 320));
      z6 = fold512(z6, k4096, ld(p + 384));
      z7 = fold512(z7, k4096, ld(p + 448));
      p += 512;
      n -= 512;
    }
    return avx512_eight<Poly>(z0, z1, z2, z3, z4, z5, z6, z7, p, n, out);
  }
  return avx512_four<Poly>(z0, z1, z2, z3, p, n, out);
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

template <std::uint32_t Poly>
PUSHWIRE_ENTRY_AVX512 inline std::uint32_t concat_avx512(std::uint32_t reg, const std::byte* h, std::size_t hn,
                                                         const std::byte* t, std::size_t tn) {
  const __m128i r = head_lane<Poly>(reg, h, hn);
  if (tn < 16) return finish_short_tail<Poly>(r, h, hn, t, tn);
  return avx512_lanes<Poly>(fold(r, kreg(folding<Poly>::k128)), t, tn);
}

// ---- CRC-32C with the crc32 instruction ----

// PCLMULQDQ of two reflected 32-bit polynomials a, b yields a·b·x as a 64-bit reflected value,
// and the crc32 instruction on it (register 0) multiplies by x^32 more and reduces:
// mulx33(a, b) = a·b·x^33 mod P. Constants kept as X·x^-33 make that a plain product: mulx33(a,
// X·x^-33) = a·X (stream_shift<Poly, true>, x8pow2_mont).
PUSHWIRE_TARGET_PCLMUL inline std::uint32_t mulx33(std::uint32_t a, std::uint32_t b) {
  const __m128i p = _mm_clmulepi64_si128(_mm_cvtsi32_si128(static_cast<int>(a)), _mm_cvtsi32_si128(static_cast<int>(b)), 0);
  return static_cast<std::uint32_t>(_mm_crc32_u64(0, static_cast<std::uint64_t>(_mm_cvtsi128_si64(p))));
}

// Three streams of up to stream_words_max words per round (a round of 3 x 2 KiB from 6 KiB
// on; below that, one round of three equal streams), joined with two mulx33; then one stream.
// Below sse42_streams_from bytes one stream costs fewer instructions than joining three.
// Three crc32 streams `stride` bytes apart, `words` 8-byte words each from q, continuing a, b, c.
template <class Out>
PUSHWIRE_TARGET_PCLMUL inline void crc32_x3(std::uint64_t& a, std::uint64_t& b, std::uint64_t& c, const std::byte* q,
                                            std::size_t stride, std::size_t words, Out out) {
  for (const std::byte* end = q + 8 * words; q != end; q += 8) {
    const std::uint64_t w0 = load64le(q), w1 = load64le(q + stride), w2 = load64le(q + 2 * stride);
    put64(out, q, w0);
    put64(out, q + stride, w1);
    put64(out, q + 2 * stride, w2);
    a = _mm_crc32_u64(a, w0);
    b = _mm_crc32_u64(b, w1);
    c = _mm_crc32_u64(c, w2);
  }
}

inline constexpr std::size_t sse42_streams_from = 96;

// One stream to the end.
template <class Out>
PUSHWIRE_TARGET_PCLMUL inline std::uint32_t sse42_tail(std::uint64_t c0, const std::byte* p, std::size_t n, Out out) {
  while (n >= 8) {
    const std::uint64_t w = load64le(p);
    put64(out, p, w);
    c0 = _mm_crc32_u64(c0, w);
    p += 8;
    n -= 8;
  }
  put_bytes(out, p, n);
  auto c = static_cast<std::uint32_t>(c0);
  while (n--) c = _mm_crc32_u8(c, static_cast<std::uint8_t>(*p++));
  return c;
}

template <class Out>
PUSHWIRE_ENTRY_PCLMUL inline std::uint32_t sse42_streams(std::uint32_t reg, const std::byte* p, std::size_t n, Out out) {
  std::uint64_t c0 = reg;
  while (n >= sse42_streams_from) {
    const std::size_t words = std::min(n / 24, stream_words_max), b = 8 * words;
    std::uint64_t c1 = 0, c2 = 0;
    crc32_x3(c0, c1, c2, p, b, words, out);
    const auto& k = stream_shift<crc32c_poly, true>;
    c0 = mulx33(static_cast<std::uint32_t>(c0), k[2 * words]) ^ mulx33(static_cast<std::uint32_t>(c1), k[words]) ^ c2;
    p += 3 * b;
    n -= 3 * b;
  }
  return sse42_tail(c0, p, n, out);
}

// Short input runs one stream here, with no registers to save; longer, sse42_streams.
template <class Out>
PUSHWIRE_ENTRY_PCLMUL inline std::uint32_t run_sse42(std::uint32_t reg, const std::byte* p, std::size_t n, Out out) {
  if (n >= sse42_streams_from) return sse42_streams(reg, p, n, out);
  return sse42_tail(reg, p, n, out);
}

// CRC-32C combine: x^(8n) as a product of x8pow2 powers in the mulx33 form.
inline constexpr auto x8pow2_mont = [] {
  std::array<std::uint32_t, 64> t{};
  for (std::size_t k = 0; k < t.size(); ++k) t[k] = multmodp(x8pow2<crc32c_poly>[k], x_minus33<crc32c_poly>, crc32c_poly);
  return t;
}();


// x^(8n)·x^-33 mod P (CRC-32C), n >= 1: the mulx33 form of moving a register n bytes forward,
// one mulx33 per further set bit of n.
PUSHWIRE_TARGET_PCLMUL inline std::uint32_t x8n_mont(std::uint64_t n) {
  unsigned k = static_cast<unsigned>(std::countr_zero(n));
  std::uint32_t x = x8pow2_mont[k];
  n >>= k;  // (two shifts: k + 1 may be 64)
  for (n >>= 1, ++k; n; n >>= 1, ++k)
    if (n & 1) x = mulx33(x, x8pow2_mont[k]);
  return x;
}

PUSHWIRE_ENTRY_PCLMUL inline std::uint32_t combine_crc32c_pclmul(std::uint32_t a, std::uint32_t b, std::uint64_t n) {
  if (n == 0) return a ^ b;
  return mulx33(a, x8n_mont(n)) ^ b;
}

// A prepared shift (crc::crc32c_shift): x^(8n)·x^-33 mod P for n >= 1, and a·X mod P from a
// and X·x^-33.
PUSHWIRE_ENTRY_PCLMUL inline std::uint32_t x8n_mont_pclmul(std::uint64_t n) { return x8n_mont(n); }
PUSHWIRE_ENTRY_PCLMUL inline std::uint32_t mul_mont_pclmul(std::uint32_t a, std::uint32_t k) { return mulx33(a, k); }

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

// CRC-32C with crc32 streams beside folding (crc::streams): folding (the vector unit) and the
// crc32 instruction (an integer unit) run side by side. The input's first part folds on 8 lanes
// while three crc32 streams run over its last part, Words words each per round of folding; the
// four registers are joined by mulx33. Takes n >= fold step + 3 * 8 * Words bytes.
struct hybrid_streams {
  const std::byte* q;  // stream 1; streams 2 and 3 at q + s, q + 2s
  std::size_t s;       // each stream's length
  std::uint64_t c1 = 0, c2 = 0, c3 = 0;
  template <std::size_t Words, class Out>
  PUSHWIRE_TARGET_PCLMUL void step(Out out) {
    crc32_x3(c1, c2, c3, q, s, Words, out);
    q += 8 * Words;
  }
  // The register after the folded part (ca) and the three streams.
  PUSHWIRE_TARGET_PCLMUL std::uint32_t join(std::uint32_t ca, std::uint32_t k1) const {
    const std::uint32_t k2 = mulx33(k1, k1), k3 = mulx33(k2, k1);
    return mulx33(ca, k3) ^ mulx33(static_cast<std::uint32_t>(c1), k2) ^ mulx33(static_cast<std::uint32_t>(c2), k1) ^
           static_cast<std::uint32_t>(c3);
  }
};

template <std::size_t Words, class Out>
PUSHWIRE_TARGET_AVX512 inline std::uint32_t avx512_hybrid(std::uint32_t reg, const std::byte* p, std::size_t n, Out out) {
  using F = folding<crc32c_poly>;
  constexpr std::size_t fold_step = 512, stream_step = 8 * Words;
  const std::size_t rounds = n / (fold_step + 3 * stream_step);  // >= 1
  const std::size_t s = rounds * stream_step, a = n - 3 * s;      // a >= fold_step * rounds
  hybrid_streams st{p + a, s};
  const std::uint32_t k1 = x8n_mont(s);
  const auto ld = [&](const std::byte* at) PUSHWIRE_TARGET_AVX512 {
    const __m512i v = load512(at);
    put512(out, at, v);
    return v;
  };
  __m512i z0 = _mm512_xor_si512(ld(p), _mm512_zextsi128_si512(_mm_cvtsi32_si128(static_cast<int>(reg))));
  __m512i z1 = ld(p + 64), z2 = ld(p + 128), z3 = ld(p + 192), z4 = ld(p + 256), z5 = ld(p + 320), z6 = ld(p + 384),
          z7 = ld(p + 448);
  p += fold_step;
  const __m512i k4096 = kreg512(F::k4096);
  for (std::size_t r = 0;; ++r) {
    st.step<Words>(out);
    if (r + 1 == rounds) break;
    z0 = fold512(z0, k4096, ld(p));
    z1 = fold512(z1, k4096, ld(p + 64));
    z2 = fold512(z2, k4096, ld(p + 128));
    z3 = fold512(z3, k4096, ld(p + 192));
    z4 = fold512(z4, k4096, ld(p + 256));
    z5 = fold512(z5, k4096, ld(p + 320));
    z6 = fold512(z6, k4096, ld(p + 384));
    z7 = fold512(z7, k4096, ld(p + 448));
    p += fold_step;
  }
  return st.join(avx512_eight<crc32c_poly>(z0, z1, z2, z3, z4, z5, z6, z7, p, a - fold_step * rounds, out), k1);
}

template <std::size_t Words, class Out>
PUSHWIRE_TARGET_AVX2 inline std::uint32_t avx2_hybrid(std::uint32_t reg, const std::byte* p, std::size_t n, Out out) {
  using F = folding<crc32c_poly>;
  constexpr std::size_t fold_step = 256, stream_step = 8 * Words;
  const std::size_t rounds = n / (fold_step + 3 * stream_step);  // >= 1
  const std::size_t s = rounds * stream_step, a = n - 3 * s;      // a >= fold_step * rounds
  hybrid_streams st{p + a, s};
  const std::uint32_t k1 = x8n_mont(s);
  const auto ld = [&](const std::byte* at) PUSHWIRE_TARGET_AVX2 {
    const __m256i v = load256(at);
    put256(out, at, v);
    return v;
  };
  __m256i y0 = _mm256_xor_si256(ld(p), _mm256_set_m128i(_mm_setzero_si128(), _mm_cvtsi32_si128(static_cast<int>(reg))));
  __m256i y1 = ld(p + 32), y2 = ld(p + 64), y3 = ld(p + 96), y4 = ld(p + 128), y5 = ld(p + 160), y6 = ld(p + 192),
          y7 = ld(p + 224);
  p += fold_step;
  const __m256i k2048 = kreg256(F::k2048);
  for (std::size_t r = 0;; ++r) {
    st.step<Words>(out);
    if (r + 1 == rounds) break;
    y0 = fold256(y0, k2048, ld(p));
    y1 = fold256(y1, k2048, ld(p + 32));
    y2 = fold256(y2, k2048, ld(p + 64));
    y3 = fold256(y3, k2048, ld(p + 96));
    y4 = fold256(y4, k2048, ld(p + 128));
    y5 = fold256(y5, k2048, ld(p + 160));
    y6 = fold256(y6, k2048, ld(p + 192));
    y7 = fold256(y7, k2048, ld(p + 224));
    p += fold_step;
  }
  return st.join(avx2_eight<crc32c_poly>(y0, y1, y2, y3, y4, y5, y6, y7, p, a - fold_step * rounds, out), k1);
}

// `beside`: CRC-32C's crc32 streams (a fused copy runs none: it would store 8 bytes at a time).
// The cases are stream_words_allowed.
static_assert(stream_words_allowed == std::array<std::uint8_t, 6>{3, 4, 5, 6, 8, 10});
template <std::uint32_t Poly, class Out>
PUSHWIRE_ENTRY_AVX2 inline std::uint32_t run_avx2(std::uint32_t reg, const std::byte* p, std::size_t n, Out out,
                                               streams beside) {
  if constexpr (Poly == crc32c_poly && std::is_same_v<Out, no_copy>)
    if (n >= beside.from && n >= streams_from_min) switch (beside.words) {
        case 3: return avx2_hybrid<3>(reg, p, n, out);
        case 4: return avx2_hybrid<4>(reg, p, n, out);
        case 5: return avx2_hybrid<5>(reg, p, n, out);
        case 6: return avx2_hybrid<6>(reg, p, n, out);
        case 8: return avx2_hybrid<8>(reg, p, n, out);
        case 10: return avx2_hybrid<10>(reg, p, n, out);
        default: break;  // 0: folding alone
      }
  return avx2_lanes<Poly>(_mm_cvtsi32_si128(static_cast<int>(reg)), p, n, out);
}

// `beside`: CRC-32C's crc32 streams (a fused copy runs none: it would store 8 bytes at a time).
template <std::uint32_t Poly, class Out>
PUSHWIRE_ENTRY_AVX512 inline std::uint32_t run_avx512(std::uint32_t reg, const std::byte* p, std::size_t n, Out out,
                                               streams beside) {
  if constexpr (Poly == crc32c_poly && std::is_same_v<Out, no_copy>)
    if (n >= beside.from && n >= streams_from_min) switch (beside.words) {
        case 3: return avx512_hybrid<3>(reg, p, n, out);
        case 4: return avx512_hybrid<4>(reg, p, n, out);
        case 5: return avx512_hybrid<5>(reg, p, n, out);
        case 6: return avx512_hybrid<6>(reg, p, n, out);
        case 8: return avx512_hybrid<8>(reg, p, n, out);
        case 10: return avx512_hybrid<10>(reg, p, n, out);
        default: break;  // 0: folding alone
      }
  return avx512_lanes<Poly>(_mm_cvtsi32_si128(static_cast<int>(reg)), p, n, out);
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

// ---- Batches (crc::crc32c_batch): several short CRC-32Cs at once ----
// One short CRC alone is a chain: its head's crc32 instructions, then folds each waiting for the
// one before, a reduction, and the call and dispatch around them (about 100 cycles for a 256-byte
// cell). K jobs in lockstep let those chains overlap.

// One job: the register continues over head (crc32 instructions, not copied), then mid (the
// same, copied to mid + delta when the batch copies), then `blocks` 64-byte blocks at body
// (folded on one 512-bit lane, copied likewise).
struct batch_lane {
  const std::byte* head;
  std::size_t hn;
  const std::byte* mid;
  std::size_t mn;
  const std::byte* body;
  std::ptrdiff_t delta;
  std::uint64_t reg;
};

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

// `words` 8-byte words at each p[j], continuing c[j]: the K chains in lockstep.
template <std::size_t... J>
PUSHWIRE_TARGET_PCLMUL inline void crc32_lockstep(const std::byte* const* p, std::uint64_t* c, std::size_t words,
                                                  std::index_sequence<J...>) {
  const std::byte* q[] = {p[J]...};
  std::uint64_t r[] = {c[J]...};
  for (std::size_t at = 0, end = 8 * words; at != end; at += 8) ((r[J] = _mm_crc32_u64(r[J], load64le(q[J] + at))), ...);
  ((c[J] = r[J]), ...);
}

// The register after a 512-bit lane z that covers a message's last 64 bytes: its four 128-bit
// lanes to one, then the 128-bit reduction.
PUSHWIRE_TARGET_AVX512 inline std::uint32_t reduce512_crc32c(__m512i z) { return reduce<crc32c_poly>(lanes_to_one<crc32c_poly>(z)); }

// K lanes of `blocks` >= 1 blocks each: the heads' crc32 chains in lockstep over the words all
// have, each head's rest and mid alone; then the bodies, one 512-bit lane each, folded in
// lockstep; then each reduced.
template <bool Copy, std::size_t... J>
PUSHWIRE_ENTRY_AVX512 inline void batch_avx512(batch_lane* l, std::size_t blocks, std::index_sequence<J...> js) {
  constexpr std::size_t K = sizeof...(J);
  const std::byte* p[K];
  std::uint64_t c[K];
  std::size_t words = SIZE_MAX;
  for (std::size_t j = 0; j < K; ++j) p[j] = l[j].head, c[j] = l[j].reg, words = std::min(words, l[j].hn / 8);
  crc32_lockstep(p, c, words, js);
  const auto start = [&](batch_lane& b, std::uint64_t reg) PUSHWIRE_TARGET_AVX512 {
    auto r = sse42_tail(reg, b.head + 8 * words, b.hn - 8 * words, no_copy{});
    const __m512i v = load512(b.body);
    if constexpr (Copy) {
      r = sse42_tail(r, b.mid, b.mn, copy_to{b.delta});
      put512(copy_to{b.delta}, b.body, v);
    } else {
      r = sse42_tail(r, b.mid, b.mn, no_copy{});
    }
    return _mm512_xor_si512(v, _mm512_zextsi128_si512(_mm_cvtsi32_si128(static_cast<int>(r))));
  };
  __m512i z[] = {start(l[J], c[J])...};
  const std::byte* q[] = {l[J].body...};
  [[maybe_unused]] const std::ptrdiff_t d[] = {l[J].delta...};
  const __m512i k512 = kreg512(folding<crc32c_poly>::k512);
  const auto step = [&](std::size_t j, std::size_t at) PUSHWIRE_TARGET_AVX512 {
    const __m512i v = load512(q[j] + at);
    if constexpr (Copy) put512(copy_to{d[j]}, q[j] + at, v);
    z[j] = fold512(z[j], k512, v);
  };
  for (std::size_t at = 64, end = 64 * blocks; at != end; at += 64) (step(J, at), ...);
  ((l[J].reg = reduce512_crc32c(z[J])), ...);
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace pushwire::wire::crc::detail
#endif  // PUSHWIRE_CRC_X86
