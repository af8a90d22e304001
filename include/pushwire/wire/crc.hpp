// CRC-32 (IEEE 802.3, reflected 0xEDB88320: Ethernet FCS, zlib, the RoCEv2 ICRC) and CRC-32C
// (Castagnoli, reflected 0x82F63B78), zlib conventions: crc32(data, crc) continues from a
// previous result, starting at 0, so a CRC over scattered pieces needs no copy:
//   crc32(b, crc32(a)) == crc32(a || b);  crc32_combine(crc32(a), crc32(b), b.size()) too.
//
// crc32 / crc32c are constexpr (table-driven in constant evaluation) and at run time dispatch once
// to the fastest path the CPU has: VPCLMULQDQ+AVX-512 folding (512-bit lanes), PCLMULQDQ folding
// (128-bit lanes), SSE4.2 crc32 (CRC-32C only), or portable slice-by-16. crc32_with / crc32c_with
// run one named path (tests and benchmarks). reference::crc32 / crc32c are the byte-at-a-time
// constexpr definitions the others are tested against.
//
// Folding (Intel, "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ"): a 16-byte lane
// R = Rlo·x^64 + Rhi (Rlo = its first 8 bytes, bit-reflected) moved D bits further is
// Rlo·x^(D+64) + Rhi·x^D; PCLMULQDQ of reflected operands contributes one extra factor x, so the
// constants are bitrev64(x^(D+63) mod P) and bitrev64(x^(D-1) mod P), computed below at compile
// time from the polynomial. The last 16-byte lane is reduced with the slice-by-16 tables (or
// SSE4.2 crc32 for CRC-32C); a tail of 1..15 bytes is merged by the overlapping-load shuffle.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>
#include <type_traits>

#include <pushwire/wire/names.hpp>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define PUSHWIRE_CRC_X86 1
#include <cpuid.h>
#include <immintrin.h>
#else
#define PUSHWIRE_CRC_X86 0
#endif

namespace pushwire::wire {

/// What a decoder does with a checksum it can verify (the RoCEv2 ICRC, a cell's CRCs).
enum class crc_check : std::uint8_t {
  skip,     ///< do not compute it (status unchecked)
  report,   ///< compute it and report good / bad (the default)
  require,  ///< compute it; a bad one is an error
};
/// The outcome, printed as "unchecked", "good", "bad".
enum class crc_status : std::uint8_t { unchecked, good, bad };
inline constexpr std::array<named_value, 3> crc_status_names{{
    {crc_status::unchecked, "unchecked"}, {crc_status::good, "good"}, {crc_status::bad, "bad"}}};
constexpr std::span<const named_value> wire_enum_names(crc_status) { return crc_status_names; }
constexpr std::string_view to_string(crc_status s) { return enum_name(s); }
inline constexpr std::array<named_value, 3> crc_check_names{{
    {crc_check::skip, "skip"}, {crc_check::report, "report"}, {crc_check::require, "require"}}};
constexpr std::span<const named_value> wire_enum_names(crc_check) { return crc_check_names; }

}  // namespace pushwire::wire

namespace pushwire::wire::crc {

/// Reflected generator polynomials.
inline constexpr std::uint32_t crc32_poly = 0xEDB88320;   // x^32 + ... IEEE 802.3
inline constexpr std::uint32_t crc32c_poly = 0x82F63B78;  // Castagnoli

/// The implementations, for crc32_with / crc32c_with and for reporting.
enum class path : std::uint8_t {
  portable,  ///< slice-by-16 tables, any CPU
  sse42,     ///< SSE4.2 crc32 instruction, three interleaved streams (CRC-32C only)
  pclmul,    ///< PCLMULQDQ folding, 4 x 128-bit lanes
  vpclmul,   ///< VPCLMULQDQ + AVX-512 folding, 4 x 512-bit lanes
};

inline constexpr std::array<named_value, 4> path_names{{
    {path::portable, "portable"}, {path::sse42, "sse42"}, {path::pclmul, "pclmul"}, {path::vpclmul, "vpclmul"}}};
constexpr std::span<const named_value> wire_enum_names(path) { return path_names; }
constexpr std::string_view to_string(path p) { return enum_name(p); }

namespace detail {

// Slice-by-16 tables: t[j][b] is the register after byte b followed by j zero bytes.
template <std::uint32_t Poly>
constexpr std::array<std::array<std::uint32_t, 256>, 16> make_tables() {
  std::array<std::array<std::uint32_t, 256>, 16> t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ Poly : c >> 1;
    t[0][i] = c;
  }
  for (std::size_t j = 1; j < 16; ++j)
    for (std::size_t i = 0; i < 256; ++i) t[j][i] = (t[j - 1][i] >> 8) ^ t[0][t[j - 1][i] & 0xFF];
  return t;
}
template <std::uint32_t Poly>
inline constexpr auto tables = make_tables<Poly>();

template <class T>
concept byte_like = sizeof(T) == 1 && (std::is_integral_v<T> || std::is_same_v<T, std::byte>);

// The register (not inverted) after `n` bytes.
template <std::uint32_t Poly, class B>
constexpr std::uint32_t update_bytewise(std::uint32_t reg, const B* p, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i)
    reg = tables<Poly>[0][(reg ^ static_cast<std::uint8_t>(p[i])) & 0xFF] ^ (reg >> 8);
  return reg;
}

inline std::uint64_t load64le(const std::byte* p) {
  std::uint64_t v;
  std::memcpy(&v, p, 8);
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap64(v);
  return v;
}

// Register after the 16 bytes b (as two little-endian words), starting from register 0.
template <std::uint32_t Poly>
inline std::uint32_t slice16(std::uint64_t lo, std::uint64_t hi) {
  const auto& t = tables<Poly>;
  std::uint32_t r = 0;
  for (int k = 0; k < 8; ++k) r ^= t[15 - k][(lo >> (8 * k)) & 0xFF] ^ t[7 - k][(hi >> (8 * k)) & 0xFF];
  return r;
}

template <std::uint32_t Poly>
[[gnu::noinline]] inline std::uint32_t update_portable(std::uint32_t reg, const std::byte* p, std::size_t n) {
  while (n >= 16) {
    reg = slice16<Poly>(load64le(p) ^ reg, load64le(p + 8));
    p += 16;
    n -= 16;
  }
  return update_bytewise<Poly>(reg, p, n);
}

// GF(2) arithmetic on reflected 32-bit polynomials (bit 31 = x^0), for combine.
constexpr std::uint32_t multmodp(std::uint32_t a, std::uint32_t b, std::uint32_t poly) {
  std::uint32_t m = 1u << 31, p = 0;
  for (;;) {
    if (a & m) {
      p ^= b;
      if ((a & (m - 1)) == 0) break;
    }
    m >>= 1;
    b = (b & 1) ? (b >> 1) ^ poly : b >> 1;
  }
  return p;
}

// x^(8 * 2^k) mod P, reflected, for k = 0..63.
template <std::uint32_t Poly>
inline constexpr auto x8pow2 = [] {
  std::array<std::uint32_t, 64> t{};
  t[0] = 1u << 23;  // x^8
  for (std::size_t k = 1; k < t.size(); ++k) t[k] = multmodp(t[k - 1], t[k - 1], Poly);
  return t;
}();

// x^(8n) mod P, reflected: one multiplication per set bit of n.
template <std::uint32_t Poly>
constexpr std::uint32_t x8nmodp(std::uint64_t n) {
  std::uint32_t result = 1u << 31;  // x^0
  for (unsigned k = 0; n; ++k, n >>= 1)
    if (n & 1) result = multmodp(x8pow2<Poly>[k], result, Poly);
  return result;
}

// x^-1 mod P, reflected: x * (P - 1) / x = P - 1 = 1 (mod P), and (P - 1) / x is x^31 plus the
// low terms of P moved down by one (bit 31 holds x^0, so "down" is a left shift).
template <std::uint32_t Poly>
inline constexpr std::uint32_t x_inverse = ((Poly & 0x7FFFFFFFu) << 1) | 1u;
static_assert(multmodp(x_inverse<crc32c_poly>, 1u << 30, crc32c_poly) == 1u << 31);
static_assert(multmodp(x_inverse<crc32_poly>, 1u << 30, crc32_poly) == 1u << 31);

// x^n mod P in normal bit order (bit d = coefficient of x^d).
constexpr std::uint64_t xpow_normal(unsigned n, std::uint32_t reflected_poly) {
  std::uint32_t normal = 0;
  for (int i = 0; i < 32; ++i)
    if (reflected_poly >> i & 1) normal |= 1u << (31 - i);
  std::uint64_t r = 1;
  for (unsigned i = 0; i < n; ++i) {
    r <<= 1;
    if (r >> 32) r ^= (std::uint64_t{1} << 32) | normal;
  }
  return r;
}

constexpr std::uint64_t bitrev64(std::uint64_t v) {
  std::uint64_t r = 0;
  for (int i = 0; i < 64; ++i)
    if (v >> i & 1) r |= std::uint64_t{1} << (63 - i);
  return r;
}

// Constants moving a 16-byte lane D bits forward: {for its first 8 bytes, for its last 8}.
struct fold_k {
  std::uint64_t lo, hi;
};
constexpr fold_k fold_constants(unsigned d, std::uint32_t poly) {
  return {bitrev64(xpow_normal(d + 63, poly)), bitrev64(xpow_normal(d - 1, poly))};
}

template <std::uint32_t Poly>
struct folding {
  // Final reduction (see reduce()): bitrev64(x^e mod P) for e = 127, 95, 63.
  static constexpr std::uint64_t r127 = bitrev64(xpow_normal(127, Poly));
  static constexpr std::uint64_t r95 = bitrev64(xpow_normal(95, Poly));
  static constexpr std::uint64_t r63 = bitrev64(xpow_normal(63, Poly));
  static constexpr fold_k k128 = fold_constants(128, Poly);
  static constexpr fold_k k256 = fold_constants(256, Poly);
  static constexpr fold_k k384 = fold_constants(384, Poly);
  static constexpr fold_k k512 = fold_constants(512, Poly);
  static constexpr fold_k k1024 = fold_constants(1024, Poly);
  static constexpr fold_k k1536 = fold_constants(1536, Poly);
  static constexpr fold_k k2048 = fold_constants(2048, Poly);
  static constexpr fold_k k4096 = fold_constants(4096, Poly);
};

// pshufb masks for the tail: loading 16 bytes at shuffle + t gives "shift left by 16 - t bytes"
// (zeros below), at shuffle + 16 + t "shift right by t bytes" (zeros above).
alignas(64) inline constexpr std::uint8_t shuffle[48] = {
    0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
    0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80};

#if PUSHWIRE_CRC_X86

struct cpu {
  bool sse42 = false, pclmul = false, vpclmul = false;
};

inline cpu detect() {
  cpu c;
  unsigned a, b, cx, d;
  if (!__get_cpuid(1, &a, &b, &cx, &d)) return c;
  const bool ssse3 = cx & (1u << 9), sse41 = cx & (1u << 19), osxsave = cx & (1u << 27);
  c.sse42 = cx & (1u << 20);
  c.pclmul = (cx & (1u << 1)) && ssse3 && sse41;
  if (!osxsave) return c;
  unsigned xlo, xhi;
  __asm__("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
  const bool zmm_state = (xlo & 0xE6) == 0xE6;  // XMM, YMM, opmask, ZMM_Hi256, Hi16_ZMM
  if (!__get_cpuid_count(7, 0, &a, &b, &cx, &d)) return c;
  const bool avx512f = b & (1u << 16), avx512bw = b & (1u << 30), avx512vl = b & (1u << 31);
  c.vpclmul = c.pclmul && zmm_state && avx512f && avx512bw && avx512vl && (cx & (1u << 10));
  return c;
}

inline const cpu& features() {
  static const cpu c = detect();
  return c;
}

// The helpers are always inlined, so the AVX-512 path compiles them with its own (VEX) target.
#define PUSHWIRE_TARGET_PCLMUL __attribute__((target("pclmul,sse4.2"), always_inline))
#define PUSHWIRE_TARGET_VPCLMUL \
  __attribute__((target("pclmul,sse4.2,avx2,avx512f,avx512vl,avx512bw,vpclmulqdq"), always_inline))
// The entry points are real functions, dispatched to by a tail call.
#define PUSHWIRE_TARGET_PCLMUL_ENTRY __attribute__((target("pclmul,sse4.2"), noinline))
#define PUSHWIRE_TARGET_VPCLMUL_ENTRY \
  __attribute__((target("pclmul,sse4.2,avx2,avx512f,avx512vl,avx512bw,vpclmulqdq"), noinline))

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

// Where the folding loops put the bytes they load: nowhere (a plain CRC), or at the same offset
// in a destination (crc32_copy / crc32c_copy: one pass copies and checksums).
struct no_copy {
  PUSHWIRE_TARGET_PCLMUL void put(const std::byte*, __m128i) const {}
  PUSHWIRE_TARGET_PCLMUL void tail(const std::byte*, std::size_t) const {}
};
struct copy_to {
  std::ptrdiff_t delta;  // destination - source
  PUSHWIRE_TARGET_PCLMUL void put(const std::byte* p, __m128i v) const {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(const_cast<std::byte*>(p) + delta), v);
  }
  PUSHWIRE_TARGET_PCLMUL void tail(const std::byte* p, std::size_t n) const {
    std::memcpy(const_cast<std::byte*>(p) + delta, p, n);
  }
};

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
    out.put(p, v);
    r = _mm_xor_si128(fold(r, k128), v);
    p += 16;
    n -= 16;
  }
  if (n) {  // 1..15 bytes: r's first n bytes move a lane forward, the rest joins the tail
    out.tail(p, n);
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
// what a preceding part of the message folds to); 4 x 128-bit lanes.
template <std::uint32_t Poly, class Out = no_copy>
PUSHWIRE_TARGET_PCLMUL inline std::uint32_t pclmul_lanes(__m128i init, const std::byte* p, std::size_t n, Out out = {}) {
  using F = folding<Poly>;
  const auto ld = [&](const std::byte* q) PUSHWIRE_TARGET_PCLMUL {
    const __m128i v = load128(q);
    out.put(q, v);
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

// These helpers only ever inline into update_vpclmul (same target), so g++'s note that a 512-bit
// vector return changes the ABI without AVX-512 does not apply.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
#endif
template <std::uint32_t Poly>
PUSHWIRE_TARGET_PCLMUL inline std::uint32_t pclmul_body(std::uint32_t reg, const std::byte* p, std::size_t n) {
  return pclmul_lanes<Poly>(_mm_cvtsi32_si128(static_cast<int>(reg)), p, n);
}

template <std::uint32_t Poly>
PUSHWIRE_TARGET_PCLMUL_ENTRY inline std::uint32_t update_pclmul(std::uint32_t reg, const std::byte* p,
                                                                std::size_t n) {
  return pclmul_body<Poly>(reg, p, n);
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
PUSHWIRE_TARGET_PCLMUL_ENTRY inline std::uint32_t concat_pclmul(std::uint32_t reg, const std::byte* h, std::size_t hn,
                                                                const std::byte* t, std::size_t tn) {
  const __m128i r = head_lane<Poly>(reg, h, hn);
  if (tn < 16) return finish_short_tail<Poly>(r, h, hn, t, tn);
  return pclmul_lanes<Poly>(fold(r, kreg(folding<Poly>::k128)), t, tn);
}

PUSHWIRE_TARGET_VPCLMUL inline __m512i kreg512(fold_k k) {
  const auto lo = static_cast<long long>(k.lo), hi = static_cast<long long>(k.hi);
  return _mm512_set_epi64(hi, lo, hi, lo, hi, lo, hi, lo);
}

PUSHWIRE_TARGET_VPCLMUL inline __m512i load512(const std::byte* p) { return _mm512_loadu_si512(p); }
PUSHWIRE_TARGET_VPCLMUL inline void put512(no_copy, const std::byte*, __m512i) {}
PUSHWIRE_TARGET_VPCLMUL inline void put512(copy_to out, const std::byte* p, __m512i v) {
  _mm512_storeu_si512(const_cast<std::byte*>(p) + out.delta, v);
}

PUSHWIRE_TARGET_VPCLMUL inline __m512i fold512(__m512i r, __m512i k, __m512i next) {
  return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(r, k, 0x00),
                                   _mm512_clmulepi64_epi128(r, k, 0x11), next, 0x96);
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

// Register after n >= 16 bytes: 8 x 512-bit lanes (512 bytes per step; four chains alone are
// latency-bound) from 1024 bytes, then 4 lanes, then one, then the 128-bit finish.
template <std::uint32_t Poly, class Out = no_copy>
PUSHWIRE_TARGET_VPCLMUL inline std::uint32_t vpclmul_lanes(__m128i init, const std::byte* p, std::size_t n, Out out = {}) {
  using F = folding<Poly>;
  if (n < 256) return pclmul_lanes<Poly>(init, p, n, out);
  const auto ld = [&](const std::byte* q) PUSHWIRE_TARGET_VPCLMUL {
    const __m512i v = load512(q);
    put512(out, q, v);
    return v;
  };
  __m512i z0 = _mm512_xor_si512(ld(p), _mm512_zextsi128_si512(init));
  __m512i z1 = ld(p + 64), z2 = ld(p + 128), z3 = ld(p + 192);
  p += 256;
  n -= 256;
  const __m512i k2048 = kreg512(F::k2048);
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
    z0 = fold512(z0, k2048, z4);
    z1 = fold512(z1, k2048, z5);
    z2 = fold512(z2, k2048, z6);
    z3 = fold512(z3, k2048, z7);
  }
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
  // Four consecutive lanes L0..L3 -> one: L0 moves 384 bits, L1 256, L2 128; L3 stays.
  const __m512i kl = _mm512_set_epi64(0, 0, static_cast<long long>(F::k128.hi), static_cast<long long>(F::k128.lo),
                                      static_cast<long long>(F::k256.hi), static_cast<long long>(F::k256.lo),
                                      static_cast<long long>(F::k384.hi), static_cast<long long>(F::k384.lo));
  const __m512i moved = _mm512_xor_si512(_mm512_clmulepi64_epi128(z, kl, 0x00), _mm512_clmulepi64_epi128(z, kl, 0x11));
  // (maskz extracts: g++-12 flags the plain ones' undefined operand as maybe-uninitialized)
  const __m256i m256 = _mm256_xor_si256(_mm512_maskz_extracti64x4_epi64(0xF, moved, 0), _mm512_maskz_extracti64x4_epi64(0xF, moved, 1));
  __m128i r = _mm_xor_si128(_mm256_castsi256_si128(m256), _mm256_extracti128_si256(m256, 1));
  r = _mm_xor_si128(r, _mm512_maskz_extracti32x4_epi32(0xF, z, 3));
  return finish<Poly>(r, p, n, nullptr, out);
}

template <std::uint32_t Poly>
PUSHWIRE_TARGET_VPCLMUL_ENTRY inline std::uint32_t update_vpclmul(std::uint32_t reg, const std::byte* p,
                                                                  std::size_t n) {
  return vpclmul_lanes<Poly>(_mm_cvtsi32_si128(static_cast<int>(reg)), p, n);
}

// The same while copying the n bytes at p to dst (dst must not overlap them).
template <std::uint32_t Poly>
PUSHWIRE_TARGET_VPCLMUL_ENTRY inline std::uint32_t copy_vpclmul(std::uint32_t reg, std::byte* dst, const std::byte* p,
                                                                std::size_t n) {
  return vpclmul_lanes<Poly>(_mm_cvtsi32_si128(static_cast<int>(reg)), p, n, copy_to{dst - p});
}
template <std::uint32_t Poly>
PUSHWIRE_TARGET_PCLMUL_ENTRY inline std::uint32_t copy_pclmul(std::uint32_t reg, std::byte* dst, const std::byte* p,
                                                              std::size_t n) {
  return pclmul_lanes<Poly>(_mm_cvtsi32_si128(static_cast<int>(reg)), p, n, copy_to{dst - p});
}

template <std::uint32_t Poly>
PUSHWIRE_TARGET_VPCLMUL_ENTRY inline std::uint32_t concat_vpclmul(std::uint32_t reg, const std::byte* h, std::size_t hn,
                                                                  const std::byte* t, std::size_t tn) {
  const __m128i r = head_lane<Poly>(reg, h, hn);
  if (tn < 16) return finish_short_tail<Poly>(r, h, hn, t, tn);
  return vpclmul_lanes<Poly>(fold(r, kreg(folding<Poly>::k128)), t, tn);
}

// CRC-32C with the crc32 instruction: three interleaved streams over blocks of 3 x 256 bytes,
// joined by moving a register across 256 bytes (four table lookups); shorter input runs one stream.
inline constexpr std::size_t sse42_block = 256;
inline constexpr auto sse42_shift = [] {
  std::array<std::array<std::uint32_t, 256>, 4> t{};
  const std::uint32_t x = x8nmodp<crc32c_poly>(sse42_block);
  for (std::uint32_t k = 0; k < 4; ++k)
    for (std::uint32_t b = 0; b < 256; ++b) t[k][b] = multmodp(x, b << (8 * k), crc32c_poly);
  return t;
}();
constexpr std::uint32_t shift_sse42_block(std::uint32_t c) {
  return sse42_shift[0][c & 0xFF] ^ sse42_shift[1][(c >> 8) & 0xFF] ^ sse42_shift[2][(c >> 16) & 0xFF] ^
         sse42_shift[3][c >> 24];
}

PUSHWIRE_TARGET_PCLMUL_ENTRY inline std::uint32_t update_sse42(std::uint32_t reg, const std::byte* p,
                                                         std::size_t n) {
  constexpr std::size_t block = sse42_block;
  std::uint64_t c0 = reg;
  while (n >= 3 * block) {
    std::uint64_t c1 = 0, c2 = 0;
    for (std::size_t i = 0; i < block; i += 8) {
      c0 = _mm_crc32_u64(c0, load64le(p + i));
      c1 = _mm_crc32_u64(c1, load64le(p + block + i));
      c2 = _mm_crc32_u64(c2, load64le(p + 2 * block + i));
    }
    // Registers (not inverted) combine linearly: move c0 and c1 over the blocks after them.
    c0 = shift_sse42_block(shift_sse42_block(static_cast<std::uint32_t>(c0)) ^ static_cast<std::uint32_t>(c1)) ^
         static_cast<std::uint32_t>(c2);
    p += 3 * block;
    n -= 3 * block;
  }
  while (n >= 8) {
    c0 = _mm_crc32_u64(c0, load64le(p));
    p += 8;
    n -= 8;
  }
  auto c = static_cast<std::uint32_t>(c0);
  while (n--) c = _mm_crc32_u8(c, static_cast<std::uint8_t>(*p++));
  return c;
}

// CRC-32C combine at run time. PCLMULQDQ of two reflected 32-bit polynomials a, b yields a·b·x
// as a 64-bit reflected value, and the crc32 instruction on it (register 0) multiplies by x^32
// more and reduces: mulx33(a, b) = a·b·x^33 mod P. Keeping the powers as x^(8n)·x^-33 makes
// that a plain product: mulx33(a, ~X) = a·X, and mulx33(~X, ~Y) = ~(X·Y).
inline constexpr auto x8pow2_mont = [] {
  std::uint32_t xm33 = 1u << 31;
  for (int i = 0; i < 33; ++i) xm33 = multmodp(xm33, x_inverse<crc32c_poly>, crc32c_poly);
  std::array<std::uint32_t, 64> t{};
  for (std::size_t k = 0; k < t.size(); ++k) t[k] = multmodp(x8pow2<crc32c_poly>[k], xm33, crc32c_poly);
  return t;
}();

PUSHWIRE_TARGET_PCLMUL inline std::uint32_t mulx33(std::uint32_t a, std::uint32_t b) {
  const __m128i p = _mm_clmulepi64_si128(_mm_cvtsi32_si128(static_cast<int>(a)), _mm_cvtsi32_si128(static_cast<int>(b)), 0);
  return static_cast<std::uint32_t>(_mm_crc32_u64(0, static_cast<std::uint64_t>(_mm_cvtsi128_si64(p))));
}

PUSHWIRE_TARGET_PCLMUL_ENTRY inline std::uint32_t combine_crc32c_pclmul(std::uint32_t a, std::uint32_t b, std::uint64_t n) {
  if (n == 0) return a ^ b;
  unsigned k = static_cast<unsigned>(std::countr_zero(n));
  std::uint32_t x = x8pow2_mont[k];
  n >>= k;  // (two shifts: k + 1 may be 64)
  for (n >>= 1, ++k; n; n >>= 1, ++k)
    if (n & 1) x = mulx33(x, x8pow2_mont[k]);
  return mulx33(a, x) ^ b;
}

#endif  // PUSHWIRE_CRC_X86

template <std::uint32_t Poly>
inline std::uint32_t update_path(path which, std::uint32_t reg, const std::byte* p, std::size_t n) {
#if PUSHWIRE_CRC_X86
  if (n >= 16) {
    if (which == path::vpclmul) return update_vpclmul<Poly>(reg, p, n);
    if (which == path::pclmul) return update_pclmul<Poly>(reg, p, n);
  }
  if constexpr (Poly == crc32c_poly)
    if (which == path::sse42) return update_sse42(reg, p, n);
#else
  (void)which;
#endif
  return update_portable<Poly>(reg, p, n);
}

template <std::uint32_t Poly>
inline std::uint32_t copy_path(path which, std::uint32_t reg, std::byte* dst, const std::byte* p, std::size_t n) {
#if PUSHWIRE_CRC_X86
  if (n >= 16) {
    if (which == path::vpclmul) return copy_vpclmul<Poly>(reg, dst, p, n);
    if (which == path::pclmul) return copy_pclmul<Poly>(reg, dst, p, n);
  }
#endif
  if (n) std::memcpy(dst, p, n);
  return update_path<Poly>(which, reg, dst, n);  // the copy is in cache now
}

template <std::uint32_t Poly>
inline std::uint32_t concat_path(path which, std::uint32_t reg, std::span<const std::byte> h, std::span<const std::byte> t) {
#if PUSHWIRE_CRC_X86
  if (!h.empty() && h.size() % 16 == 0) {
    if (which == path::vpclmul) return concat_vpclmul<Poly>(reg, h.data(), h.size(), t.data(), t.size());
    if (which == path::pclmul) return concat_pclmul<Poly>(reg, h.data(), h.size(), t.data(), t.size());
  }
#endif
  return update_path<Poly>(which, update_path<Poly>(which, reg, h.data(), h.size()), t.data(), t.size());
}

}  // namespace detail

/// True when this CPU (and OS) can run path p.
inline bool available(path p) {
#if PUSHWIRE_CRC_X86
  const auto& f = detail::features();
  switch (p) {
    case path::portable: return true;
    case path::sse42: return f.sse42;
    case path::pclmul: return f.pclmul;
    case path::vpclmul: return f.vpclmul;
  }
  return false;
#else
  return p == path::portable;
#endif
}

/// The path crc32 / crc32c use on this CPU.
inline path best_crc32() {
  return available(path::vpclmul) ? path::vpclmul : available(path::pclmul) ? path::pclmul : path::portable;
}
inline path best_crc32c() {
  return available(path::vpclmul) ? path::vpclmul
         : available(path::pclmul) ? path::pclmul
         : available(path::sse42)  ? path::sse42
                                   : path::portable;
}

namespace reference {
/// Byte-at-a-time definitions, usable in constant expressions: "123456789" -> 0xCBF43926.
template <detail::byte_like B>
constexpr std::uint32_t crc32(std::span<const B> data, std::uint32_t crc = 0) {
  return ~detail::update_bytewise<crc32_poly>(~crc, data.data(), data.size());
}
/// "123456789" -> 0xE3069283.
template <detail::byte_like B>
constexpr std::uint32_t crc32c(std::span<const B> data, std::uint32_t crc = 0) {
  return ~detail::update_bytewise<crc32c_poly>(~crc, data.data(), data.size());
}
constexpr std::uint32_t crc32(std::string_view s, std::uint32_t crc = 0) { return crc32(std::span(s), crc); }
constexpr std::uint32_t crc32c(std::string_view s, std::uint32_t crc = 0) { return crc32c(std::span(s), crc); }
}  // namespace reference

/// CRC-32 of data with a named implementation; p must be available() (else portable is used).
inline std::uint32_t crc32_with(path p, std::span<const std::byte> data, std::uint32_t crc = 0) {
  return ~detail::update_path<crc32_poly>(available(p) ? p : path::portable, ~crc, data.data(), data.size());
}
inline std::uint32_t crc32c_with(path p, std::span<const std::byte> data, std::uint32_t crc = 0) {
  return ~detail::update_path<crc32c_poly>(available(p) ? p : path::portable, ~crc, data.data(), data.size());
}

namespace detail {
inline std::uint32_t crc32_runtime(std::span<const std::byte> data, std::uint32_t crc) {
  static const path best = best_crc32();
  return ~update_path<crc32_poly>(best, ~crc, data.data(), data.size());
}
inline std::uint32_t crc32c_runtime(std::span<const std::byte> data, std::uint32_t crc) {
  static const path best = best_crc32c();
  return ~update_path<crc32c_poly>(best, ~crc, data.data(), data.size());
}
inline std::uint32_t crc32_copy_runtime(std::span<std::byte> dst, std::span<const std::byte> src, std::uint32_t crc) {
  static const path best = best_crc32();
  return ~copy_path<crc32_poly>(best, ~crc, dst.data(), src.data(), src.size());
}
inline std::uint32_t crc32c_copy_runtime(std::span<std::byte> dst, std::span<const std::byte> src, std::uint32_t crc) {
  static const path best = best_crc32c();
  return ~copy_path<crc32c_poly>(best, ~crc, dst.data(), src.data(), src.size());
}
}  // namespace detail

/// CRC-32 of head || tail without copying them together. When head is a multiple of 16 bytes
/// the two are one fold chain (no second reduction): a short header in a buffer plus a payload
/// in place costs about what one CRC over their total length does.
inline std::uint32_t crc32_concat(std::span<const std::byte> head, std::span<const std::byte> tail, std::uint32_t crc = 0) {
  static const path best = best_crc32();
  return ~detail::concat_path<crc32_poly>(best, ~crc, head, tail);
}
inline std::uint32_t crc32c_concat(std::span<const std::byte> head, std::span<const std::byte> tail, std::uint32_t crc = 0) {
  static const path best = best_crc32c();
  return ~detail::concat_path<crc32c_poly>(best, ~crc, head, tail);
}
/// crc32_concat with a named path (tests).
inline std::uint32_t crc32_concat_with(path p, std::span<const std::byte> head, std::span<const std::byte> tail,
                                       std::uint32_t crc = 0) {
  return ~detail::concat_path<crc32_poly>(available(p) ? p : path::portable, ~crc, head, tail);
}

/// Copies src to the front of dst (which must hold src.size() bytes and not overlap src) and
/// returns the CRC of src continuing from crc, in one pass: each block is loaded once, stored,
/// and folded. For moving a payload into a frame (or out of one) and checksumming it together.
constexpr std::uint32_t crc32_copy(std::span<std::byte> dst, std::span<const std::byte> src, std::uint32_t crc = 0) {
  if (std::is_constant_evaluated()) {
    for (std::size_t i = 0; i < src.size(); ++i) dst[i] = src[i];
    return reference::crc32(src, crc);
  }
  return detail::crc32_copy_runtime(dst, src, crc);
}
constexpr std::uint32_t crc32c_copy(std::span<std::byte> dst, std::span<const std::byte> src, std::uint32_t crc = 0) {
  if (std::is_constant_evaluated()) {
    for (std::size_t i = 0; i < src.size(); ++i) dst[i] = src[i];
    return reference::crc32c(src, crc);
  }
  return detail::crc32c_copy_runtime(dst, src, crc);
}
/// crc32c_copy with a named path (tests).
inline std::uint32_t crc32c_copy_with(path p, std::span<std::byte> dst, std::span<const std::byte> src, std::uint32_t crc = 0) {
  return ~detail::copy_path<crc32c_poly>(available(p) ? p : path::portable, ~crc, dst.data(), src.data(), src.size());
}

/// CRC-32 of data, continuing from crc (0 to start).
constexpr std::uint32_t crc32(std::span<const std::byte> data, std::uint32_t crc = 0) {
  if (std::is_constant_evaluated()) return reference::crc32(data, crc);
  return detail::crc32_runtime(data, crc);
}

/// CRC-32C of data, continuing from crc (0 to start).
constexpr std::uint32_t crc32c(std::span<const std::byte> data, std::uint32_t crc = 0) {
  if (std::is_constant_evaluated()) return reference::crc32c(data, crc);
  return detail::crc32c_runtime(data, crc);
}

/// CRC-32 of a||b from crc32(a), crc32(b) and b's length.
constexpr std::uint32_t crc32_combine(std::uint32_t crc_a, std::uint32_t crc_b, std::uint64_t len_b) {
  return detail::multmodp(detail::x8nmodp<crc32_poly>(len_b), crc_a, crc32_poly) ^ crc_b;
}

namespace reference {
/// crc32c_combine by shift-and-add multiplication (the definition the fast path is tested against).
constexpr std::uint32_t crc32c_combine(std::uint32_t crc_a, std::uint32_t crc_b, std::uint64_t len_b) {
  return detail::multmodp(detail::x8nmodp<crc32c_poly>(len_b), crc_a, crc32c_poly) ^ crc_b;
}
}  // namespace reference

namespace detail {
inline std::uint32_t crc32c_combine_runtime(std::uint32_t crc_a, std::uint32_t crc_b, std::uint64_t len_b) {
#if PUSHWIRE_CRC_X86
  static const bool fast = features().pclmul && features().sse42;
  if (fast) return combine_crc32c_pclmul(crc_a, crc_b, len_b);
#endif
  return reference::crc32c_combine(crc_a, crc_b, len_b);
}
}  // namespace detail

/// CRC-32C of a||b from crc32c(a), crc32c(b) and b's length. At run time with PCLMULQDQ and
/// SSE4.2 it costs one carry-less multiply and one crc32 instruction per set bit of len_b, plus
/// one (a few ns), so a CRC over many pieces can be assembled from the pieces' CRCs.
constexpr std::uint32_t crc32c_combine(std::uint32_t crc_a, std::uint32_t crc_b, std::uint64_t len_b) {
  if (std::is_constant_evaluated()) return reference::crc32c_combine(crc_a, crc_b, len_b);
  return detail::crc32c_combine_runtime(crc_a, crc_b, len_b);
}

}  // namespace pushwire::wire::crc
