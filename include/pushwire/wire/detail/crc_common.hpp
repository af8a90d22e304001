// CRC internals shared by every implementation (wire/crc.hpp is the interface): the path names,
// slice-by-16 tables, GF(2) arithmetic modulo the polynomial, folding constants, the constants
// that join interleaved streams, and where a fused copy puts the bytes it reads.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>
#include <type_traits>

#include <pushwire/wire/names.hpp>

namespace pushwire::wire::crc {

/// Reflected generator polynomials.
inline constexpr std::uint32_t crc32_poly = 0xEDB88320;   // x^32 + ... IEEE 802.3
inline constexpr std::uint32_t crc32c_poly = 0x82F63B78;  // Castagnoli

/// The implementations (spec/crc.md §1). A path runs only where available() says so; sse42
/// computes CRC-32C only (implements()).
enum class path : std::uint8_t {
  portable,        ///< slice-by-16 tables, any CPU
  sse42,           ///< x86-64 crc32 instruction, three interleaved streams joined by PCLMULQDQ (CRC-32C)
  pclmul,          ///< x86-64 PCLMULQDQ folding, 8 x 128-bit lanes
  vpclmul_avx2,    ///< x86-64 VPCLMULQDQ folding on 256-bit AVX2 lanes, 8 of them
  vpclmul_avx512,  ///< x86-64 VPCLMULQDQ folding on 512-bit AVX-512 lanes, 8 of them
  armv8_crc,       ///< aarch64 crc32x / crc32cx, three interleaved streams
  pmull,           ///< aarch64 PMULL folding, 4 x 128-bit lanes, reduced by crc32x / crc32cx
};

inline constexpr std::array<named_value, 7> path_names{{{path::portable, "portable"},
                                                        {path::sse42, "sse42"},
                                                        {path::pclmul, "pclmul"},
                                                        {path::vpclmul_avx2, "vpclmul_avx2"},
                                                        {path::vpclmul_avx512, "vpclmul_avx512"},
                                                        {path::armv8_crc, "armv8_crc"},
                                                        {path::pmull, "pmull"}}};
constexpr std::span<const named_value> wire_enum_names(path) { return path_names; }
constexpr std::string_view to_string(path p) { return enum_name(p); }

/// CRC-32C on vpclmul_avx2 and vpclmul_avx512 (not their fused copy), from `from` bytes: while
/// the input's first part folds on the vector unit, three crc32-instruction streams of `words`
/// 8-byte words per folding round (512 bytes folded on vpclmul_avx512, 256 on vpclmul_avx2) run
/// over its last part on an integer unit (spec/crc.md §2). words 0: folding alone. Otherwise
/// words is one of stream_words_allowed and from >= streams_from_min.
struct streams {
  std::uint8_t words = 0;
  std::size_t from = 0;
  constexpr bool operator==(const streams&) const = default;
};
inline constexpr std::array<std::uint8_t, 6> stream_words_allowed{3, 4, 5, 6, 8, 10};
inline constexpr std::size_t streams_from_min = 1024;

/// The streams a path runs beside folding when PUSHWIRE_CRC_PATH does not say (spec/crc.md §2).
constexpr streams default_streams(path p) {
  switch (p) {
    case path::vpclmul_avx512: return {4, 4096};
    case path::vpclmul_avx2: return {6, 1536};
    default: return {};
  }
}

/// What a path needs of the CPU, as spec/crc.md §1 lists it (available() checks it at run time).
constexpr std::string_view requirement(path p) {
  switch (p) {
    case path::portable: return "any CPU";
    case path::sse42: return "x86-64: SSE4.2 and PCLMULQDQ (CPUID.1:ECX bits 20, 1)";
    case path::pclmul: return "x86-64: PCLMULQDQ, SSSE3, SSE4.1, SSE4.2";
    case path::vpclmul_avx2: return "x86-64: the above, AVX2 and VPCLMULQDQ (CPUID.7.0:EBX bit 5, ECX bit 10), YMM state saved (XCR0)";
    case path::vpclmul_avx512: return "x86-64: the above, AVX-512 F, BW and VL, ZMM and opmask state saved (XCR0)";
    case path::armv8_crc: return "aarch64 Linux: HWCAP_CRC32";
    case path::pmull: return "aarch64 Linux: HWCAP_CRC32 and HWCAP_PMULL";
  }
  return {};
}

/// True when path p computes the CRC with reflected polynomial poly.
constexpr bool implements(path p, std::uint32_t poly) {
  return (poly == crc32_poly || poly == crc32c_poly) && (p != path::sse42 || poly == crc32c_poly);
}

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
// x^-33 mod P: a constant X kept as X·x^-33 is what mulx33 multiplies by (crc_x86.hpp).
template <std::uint32_t Poly>
inline constexpr std::uint32_t x_minus33 = [] {
  std::uint32_t x = 1u << 31;
  for (int i = 0; i < 33; ++i) x = multmodp(x, x_inverse<Poly>, Poly);
  return x;
}();

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
  static constexpr fold_k k768 = fold_constants(768, Poly);
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

// Interleaved streams: a round runs three streams of `words` 8-byte words each (at most
// stream_words_max) and joins them by moving the first register 2B bytes and the second B bytes
// forward (B = 8 * words): stream_shift<Poly, Mont>[w] = x^(64w) mod P, times x^-33 when Mont
// (the form mulx33 below multiplies by; see crc32c_combine).
inline constexpr std::size_t stream_words_max = 256;
template <std::uint32_t Poly, bool Mont>
inline constexpr auto stream_shift = [] {
  const std::uint32_t scale = Mont ? x_minus33<Poly> : 1u << 31;
  std::array<std::uint32_t, 2 * stream_words_max + 1> t{};
  for (std::size_t w = 0; w < t.size(); ++w) t[w] = multmodp(x8nmodp<Poly>(8 * w), scale, Poly);
  return t;
}();

// Where a kernel puts the bytes it loads: nowhere (a plain CRC), or at the same offset in a
// destination (crc32_copy / crc32c_copy: one pass copies and checksums). Each ISA adds put()
// overloads for its vector widths.
struct no_copy {};
struct copy_to {
  std::ptrdiff_t delta;  // destination - source
};
inline void put_bytes(no_copy, const std::byte*, std::size_t) {}
inline void put_bytes(copy_to out, const std::byte* p, std::size_t n) {
  if (n) std::memcpy(const_cast<std::byte*>(p) + out.delta, p, n);
}
inline void put64(no_copy, const std::byte*, std::uint64_t) {}
inline void put64(copy_to out, const std::byte* p, std::uint64_t w) {
  if constexpr (std::endian::native == std::endian::big) w = __builtin_bswap64(w);
  std::memcpy(const_cast<std::byte*>(p) + out.delta, &w, 8);
}

// Portable, with a copy: the same tables, storing each 16-byte block as it is read.
template <std::uint32_t Poly, class Out>
inline std::uint32_t portable_copy(std::uint32_t reg, const std::byte* p, std::size_t n, Out out) {
  while (n >= 16) {
    const std::uint64_t lo = load64le(p), hi = load64le(p + 8);
    put64(out, p, lo);
    put64(out, p + 8, hi);
    reg = slice16<Poly>(lo ^ reg, hi);
    p += 16;
    n -= 16;
  }
  put_bytes(out, p, n);
  return update_bytewise<Poly>(reg, p, n);
}

}  // namespace detail
}  // namespace pushwire::wire::crc
