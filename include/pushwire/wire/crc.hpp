// CRC-32 (IEEE 802.3, reflected 0xEDB88320: Ethernet FCS, zlib, the RoCEv2 ICRC) and CRC-32C
// (Castagnoli, reflected 0x82F63B78), zlib conventions: crc32(data, crc) continues from a
// previous result, starting at 0, so a CRC over scattered pieces needs no copy:
//   crc32(b, crc32(a)) == crc32(a || b);  crc32_combine(crc32(a), crc32(b), b.size()) too.
//
// crc32 / crc32c are constexpr (table-driven in constant evaluation). At run time they run the
// path selected() once per process: the fastest this CPU has (automatic()), by input size for
// CRC-32C, or the one PUSHWIRE_CRC_PATH names (spec/crc.md). The kernels are in detail/crc_x86.hpp
// and detail/crc_arm.hpp; every one has a fused copy (crc32_copy / crc32c_copy).
// crc32_with / crc32c_with run one named path (tests and benchmarks). reference::crc32 / crc32c
// are the byte-at-a-time constexpr definitions the others are tested against.
#pragma once

#include <algorithm>
#include <array>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <pushwire/wire/detail/crc_arm.hpp>
#include <pushwire/wire/detail/crc_common.hpp>
#include <pushwire/wire/detail/crc_x86.hpp>
#include <pushwire/wire/names.hpp>

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

/// True when this CPU (and OS) can run path p.
inline bool available(path p) {
#if PUSHWIRE_CRC_X86
  const auto& f = detail::features();
  switch (p) {
    case path::portable: return true;
    case path::sse42: return f.sse42;
    case path::pclmul: return f.pclmul;
    case path::vpclmul_avx2: return f.avx2vpclmul;
    case path::vpclmul_avx512: return f.avx512vpclmul;
    default: return false;
  }
#elif PUSHWIRE_CRC_ARM
  const auto& f = detail::features();
  switch (p) {
    case path::portable: return true;
    case path::armv8_crc: return f.crc;
    case path::pmull: return f.pmull;
    default: return false;
  }
#else
  return p == path::portable;
#endif
}

namespace detail {

// The register after n bytes on path `which` (available, implementing Poly), copying them to
// out's destination when Out is copy_to, with CRC-32C's crc32 streams `beside` folding. Folding
// paths take n >= 16; shorter runs portable.
template <std::uint32_t Poly, class Out>
inline std::uint32_t run(path which, std::uint32_t reg, const std::byte* p, std::size_t n, Out out,
                         [[maybe_unused]] streams beside = {}) {
  switch (which) {
#if PUSHWIRE_CRC_X86
    case path::sse42:
      if constexpr (Poly == crc32c_poly) return run_sse42(reg, p, n, out);
      break;
    case path::pclmul:
      if (n >= 16) return run_pclmul<Poly>(reg, p, n, out);
      break;
    case path::vpclmul_avx2:
      if (n >= 16) return run_avx2<Poly>(reg, p, n, out, beside);
      break;
    case path::vpclmul_avx512:
      if (n >= 16) return run_avx512<Poly>(reg, p, n, out, beside);
      break;
#endif
#if PUSHWIRE_CRC_ARM
    case path::armv8_crc: return run_armv8_crc<Poly>(reg, p, n, out);
    case path::pmull: return run_pmull<Poly>(reg, p, n, out);
#endif
    default: break;
  }
  if constexpr (std::is_same_v<Out, no_copy>)
    return update_portable<Poly>(reg, p, n);
  else
    return portable_copy<Poly>(reg, p, n, out);
}

// Register after head || tail. The folding paths fold them as one chain when the head is a
// multiple of 16 bytes (no second reduction); the others simply continue.
template <std::uint32_t Poly>
inline std::uint32_t concat(path which, std::uint32_t reg, std::span<const std::byte> h, std::span<const std::byte> t) {
#if PUSHWIRE_CRC_X86
  if (!h.empty() && h.size() % 16 == 0) {
    if (which == path::vpclmul_avx512) return concat_avx512<Poly>(reg, h.data(), h.size(), t.data(), t.size());
    if (which == path::vpclmul_avx2) return concat_avx2<Poly>(reg, h.data(), h.size(), t.data(), t.size());
    if (which == path::pclmul) return concat_pclmul<Poly>(reg, h.data(), h.size(), t.data(), t.size());
  }
#endif
  return run<Poly>(which, run<Poly>(which, reg, h.data(), h.size(), no_copy{}), t.data(), t.size(), no_copy{});
}

}  // namespace detail

/// What one polynomial runs at run time: `small` below `small_below` bytes, `large` from there,
/// CRC-32C with crc32 streams `beside` large's folding.
struct choice {
  path large = path::portable;
  path small = path::portable;
  std::size_t small_below = 0;
  streams beside{};
  constexpr path at(std::size_t n) const { return n < small_below ? small : large; }
  constexpr bool operator==(const choice&) const = default;
};
/// A choice as the tools print it: "[SMALL below N bytes, then ]LARGE[ at every size][ streams=W@B]"
/// (streams in PUSHWIRE_CRC_PATH's syntax, when LARGE runs crc32 streams beside folding).
inline std::string describe(const choice& c) {
  std::string s;
  if (c.small_below) s.append(to_string(c.small)).append(" below ").append(std::to_string(c.small_below)).append(" bytes, then ");
  s.append(to_string(c.large));
  if (!c.small_below) s.append(" at every size");
  if (c.beside.words) s.append(" streams=").append(std::to_string(c.beside.words)).append("@").append(std::to_string(c.beside.from));
  return s;
}
/// What crc32 and crc32c run in this process.
struct selection {
  choice crc32, crc32c;
  constexpr bool operator==(const selection&) const = default;
};

/// The input size below which sse42 computes CRC-32C faster than folding path `fold`, as
/// measured on one CPU (spec/crc.md §2; `pushwire-bench --crc-crossover` measures it again).
/// 0: never; SIZE_MAX: at every size.
constexpr std::size_t sse42_below(path fold) {
  switch (fold) {
    case path::vpclmul_avx512: return 256;
    case path::vpclmul_avx2: return 1536;
    case path::pclmul: return SIZE_MAX;  // sse42 is faster at every size
    default: return 0;
  }
}

/// The fastest paths this CPU has: the widest folding for CRC-32; for CRC-32C the same, with
/// sse42 below its crossover (or throughout, where no folding path is faster).
inline selection automatic() {
  constexpr path by_speed[] = {path::vpclmul_avx512, path::vpclmul_avx2, path::pmull, path::pclmul, path::armv8_crc};
  selection s;
  for (path p : by_speed)
    if (available(p)) {
      s.crc32.large = s.crc32.small = s.crc32c.large = s.crc32c.small = p;
      break;
    }
  if (available(path::sse42)) {
    s.crc32c.small = path::sse42;
    s.crc32c.small_below = s.crc32c.large == path::portable ? SIZE_MAX : sse42_below(s.crc32c.large);
    if (s.crc32c.small_below == SIZE_MAX) s.crc32c.large = path::sse42;
  }
  s.crc32c.beside = default_streams(s.crc32c.large);
  return s;
}

/// Why a PUSHWIRE_CRC_PATH value was refused.
enum class select_errc : std::uint8_t {
  syntax = 1,       ///< not NAME, or a comma-separated list of crc32=NAME / crc32c=NAME
  unknown_path,     ///< a name no path has
  unavailable,      ///< a path this CPU (or this build) cannot run
  wrong_polynomial, ///< crc32=NAME with a path that does not compute that polynomial (sse42)
  bad_streams,      ///< streams= neither off nor WORDS@BYTES with allowed values
  no_streams,       ///< streams=WORDS@BYTES while CRC-32C's path folds no crc32 streams beside
};
inline constexpr std::array<named_value, 6> select_errc_names{{{select_errc::syntax, "syntax"},
                                                               {select_errc::unknown_path, "unknown_path"},
                                                               {select_errc::unavailable, "unavailable"},
                                                               {select_errc::wrong_polynomial, "wrong_polynomial"},
                                                               {select_errc::bad_streams, "bad_streams"},
                                                               {select_errc::no_streams, "no_streams"}}};
constexpr std::span<const named_value> wire_enum_names(select_errc) { return select_errc_names; }
/// What each select_errc means (spec/crc.md §3), indexed by value - 1.
inline constexpr std::array<std::string_view, 6> select_errc_meanings{{
    "Not NAME, and not a comma-separated list of crc32=NAME, crc32c=NAME and streams=... (an empty item, another key).",
    "A name that no path has (names are lower case).",
    "A path this CPU, this operating system or this build cannot run.",
    "crc32=NAME with a path that computes CRC-32C only (sse42).",
    "streams= that is not off or WORDS@BYTES, with WORDS one of 3, 4, 5, 6, 8, 10 and BYTES a decimal number from 1024.",
    "streams=WORDS@BYTES while CRC-32C's path from the largest sizes is neither vpclmul_avx2 nor vpclmul_avx512.",
}};

struct select_result {
  selection value;
  select_errc error{};        ///< 0 when value is valid
  std::string_view culprit;   ///< the part of the text that was refused
};

/// streams=off (folding alone) or streams=WORDS@BYTES; nullopt when neither.
inline std::optional<streams> parse_streams(std::string_view v) {
  if (v == "off") return streams{};
  const auto at = v.find('@');
  if (at == std::string_view::npos) return std::nullopt;
  unsigned words = 0;
  std::size_t from = 0;
  const auto w = std::from_chars(v.data(), v.data() + at, words);
  const auto f = std::from_chars(v.data() + at + 1, v.data() + v.size(), from);
  if (w.ec != std::errc{} || w.ptr != v.data() + at || f.ec != std::errc{} || f.ptr != v.data() + v.size() ||
      from < streams_from_min ||
      std::find(stream_words_allowed.begin(), stream_words_allowed.end(), words) == stream_words_allowed.end())
    return std::nullopt;
  return streams{static_cast<std::uint8_t>(words), from};
}

/// A selection from PUSHWIRE_CRC_PATH's syntax, starting from `base`: "" keeps base; NAME runs
/// NAME, at every size, for each polynomial it computes (the other keeps base); crc32=NAME and
/// crc32c=NAME, comma-separated, name each polynomial's. "auto" names base's choice. A path
/// named for CRC-32C runs its default_streams; streams=off or streams=WORDS@BYTES, anywhere in
/// the list, sets them.
inline select_result select(std::string_view text, selection base = automatic()) {
  select_result r{base, {}, {}};
  std::optional<streams> beside;
  std::string_view streams_item;
  const auto refuse = [&](select_errc e, std::string_view what) {
    r = {base, e, what};
    return r;
  };
  const auto lookup = [](std::string_view name, path& out) {
    for (const auto& n : path_names)
      if (n.name == name) {
        out = static_cast<path>(n.value);
        return true;
      }
    return false;
  };
  for (bool more = !text.empty(); more;) {
    const auto comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    more = comma != std::string_view::npos;
    text = more ? text.substr(comma + 1) : std::string_view{};
    if (item.empty()) return refuse(select_errc::syntax, item);
    const auto eq = item.find('=');
    const std::string_view key = eq == std::string_view::npos ? std::string_view{} : item.substr(0, eq);
    const std::string_view name = eq == std::string_view::npos ? item : item.substr(eq + 1);
    const bool both = eq == std::string_view::npos;
    if (key == "streams") {
      beside = parse_streams(name);
      if (!beside) return refuse(select_errc::bad_streams, item);
      streams_item = item;
      continue;
    }
    if (!both && key != "crc32" && key != "crc32c") return refuse(select_errc::syntax, item);
    if (name == "auto") {
      if (both || key == "crc32") r.value.crc32 = base.crc32;
      if (both || key == "crc32c") r.value.crc32c = base.crc32c;
      continue;
    }
    path p{};
    if (!lookup(name, p)) return refuse(select_errc::unknown_path, name);
    if (!available(p)) return refuse(select_errc::unavailable, name);
    const bool c32 = both ? implements(p, crc32_poly) : key == "crc32";
    const bool c32c = both ? implements(p, crc32c_poly) : key == "crc32c";
    if ((c32 && !implements(p, crc32_poly)) || (c32c && !implements(p, crc32c_poly)))
      return refuse(select_errc::wrong_polynomial, item);
    if (c32) r.value.crc32 = {p, p, 0};
    if (c32c) r.value.crc32c = {p, p, 0, default_streams(p)};
  }
  if (beside) {
    const path p = r.value.crc32c.large;
    if (beside->words && p != path::vpclmul_avx2 && p != path::vpclmul_avx512)
      return refuse(select_errc::no_streams, streams_item);
    r.value.crc32c.beside = *beside;
  }
  return r;
}

namespace detail {
[[noreturn]] inline void refuse_env(const select_result& r, const char* text) {
  std::fprintf(stderr, "pushwire: PUSHWIRE_CRC_PATH=%s: %s: %.*s (spec/crc.md)\n", text,
               enum_name(r.error).data(), static_cast<int>(r.culprit.size()), r.culprit.data());
  std::abort();
}
// Out of line and cold, so the CRC entry points that call selected() stay small.
[[gnu::noinline, gnu::cold]] inline selection from_env() {
  const char* text = std::getenv("PUSHWIRE_CRC_PATH");
  if (!text) return automatic();
  const select_result r = select(text);
  if (r.error != select_errc{}) refuse_env(r, text);
  return r.value;
}
}  // namespace detail

/// The paths crc32 / crc32c run in this process: select(PUSHWIRE_CRC_PATH) when it is set,
/// else automatic(). Read once, at the first CRC; a value select() refuses is never replaced
/// by another path: the process prints why on stderr and aborts. Tools call select() first to
/// report it and exit instead.
inline const selection& selected() {
  static const selection s = detail::from_env();
  return s;
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

/// CRC-32 / CRC-32C of data with a named path. Precondition: available(p) and implements(p, the
/// polynomial); otherwise the portable path runs (the functions are for tests and benchmarks).
inline std::uint32_t crc32_with(path p, std::span<const std::byte> data, std::uint32_t crc = 0) {
  const path q = available(p) && implements(p, crc32_poly) ? p : path::portable;
  return ~detail::run<crc32_poly>(q, ~crc, data.data(), data.size(), detail::no_copy{});
}
inline std::uint32_t crc32c_with(path p, streams beside, std::span<const std::byte> data, std::uint32_t crc = 0) {
  const path q = available(p) ? p : path::portable;
  return ~detail::run<crc32c_poly>(q, ~crc, data.data(), data.size(), detail::no_copy{}, beside);
}
/// CRC-32C with path p and its default_streams.
inline std::uint32_t crc32c_with(path p, std::span<const std::byte> data, std::uint32_t crc = 0) {
  return crc32c_with(p, default_streams(p), data, crc);
}
/// The fused copy (crc32_copy / crc32c_copy) with a named path; the same precondition.
inline std::uint32_t crc32_copy_with(path p, std::span<std::byte> dst, std::span<const std::byte> src, std::uint32_t crc = 0) {
  const path q = available(p) && implements(p, crc32_poly) ? p : path::portable;
  return ~detail::run<crc32_poly>(q, ~crc, src.data(), src.size(), detail::copy_to{dst.data() - src.data()});
}
inline std::uint32_t crc32c_copy_with(path p, std::span<std::byte> dst, std::span<const std::byte> src, std::uint32_t crc = 0) {
  const path q = available(p) ? p : path::portable;
  return ~detail::run<crc32c_poly>(q, ~crc, src.data(), src.size(), detail::copy_to{dst.data() - src.data()});
}
/// crc32_concat with a named path; the same precondition.
inline std::uint32_t crc32_concat_with(path p, std::span<const std::byte> head, std::span<const std::byte> tail,
                                       std::uint32_t crc = 0) {
  const path q = available(p) && implements(p, crc32_poly) ? p : path::portable;
  return ~detail::concat<crc32_poly>(q, ~crc, head, tail);
}
inline std::uint32_t crc32c_concat_with(path p, std::span<const std::byte> head, std::span<const std::byte> tail,
                                        std::uint32_t crc = 0) {
  const path q = available(p) ? p : path::portable;
  return ~detail::concat<crc32c_poly>(q, ~crc, head, tail);
}

namespace detail {
inline std::uint32_t crc32_runtime(std::span<const std::byte> d, std::uint32_t crc) {
  return ~run<crc32_poly>(selected().crc32.at(d.size()), ~crc, d.data(), d.size(), no_copy{});
}
inline std::uint32_t crc32c_runtime(std::span<const std::byte> d, std::uint32_t crc) {
  const choice& c = selected().crc32c;
  return ~run<crc32c_poly>(c.at(d.size()), ~crc, d.data(), d.size(), no_copy{}, c.beside);
}
inline std::uint32_t crc32_copy_runtime(std::span<std::byte> dst, std::span<const std::byte> src, std::uint32_t crc) {
  return ~run<crc32_poly>(selected().crc32.at(src.size()), ~crc, src.data(), src.size(), copy_to{dst.data() - src.data()});
}
inline std::uint32_t crc32c_copy_runtime(std::span<std::byte> dst, std::span<const std::byte> src, std::uint32_t crc) {
  return ~run<crc32c_poly>(selected().crc32c.at(src.size()), ~crc, src.data(), src.size(), copy_to{dst.data() - src.data()});
}
}  // namespace detail

/// CRC-32 of head || tail without copying them together. When head is a multiple of 16 bytes
/// the folding paths make the two one fold chain (no second reduction): a short header in a
/// buffer plus a payload in place costs about what one CRC over their total length does.
inline std::uint32_t crc32_concat(std::span<const std::byte> head, std::span<const std::byte> tail, std::uint32_t crc = 0) {
  return ~detail::concat<crc32_poly>(selected().crc32.at(head.size() + tail.size()), ~crc, head, tail);
}
inline std::uint32_t crc32c_concat(std::span<const std::byte> head, std::span<const std::byte> tail, std::uint32_t crc = 0) {
  return ~detail::concat<crc32c_poly>(selected().crc32c.at(head.size() + tail.size()), ~crc, head, tail);
}

/// Copies src to the front of dst (which must hold src.size() bytes and not overlap src) and
/// returns the CRC of src continuing from crc, in one pass: each block is loaded once, stored,
/// and checksummed. For moving a payload into a frame (or out of one) and checksumming it
/// together. Writes exactly dst[0, src.size()).
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
  if (features().pclmul) return combine_crc32c_pclmul(crc_a, crc_b, len_b);
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

/// Moving a CRC-32C forward by a fixed number of bytes, prepared once: combine(a, b) is
/// crc32c_combine(a, b, len) at the cost of one carry-less multiply (with PCLMULQDQ), where
/// crc32c_combine spends one per set bit of len. For CRCs assembled from equal pieces (cells).
class crc32c_shift {
 public:
  constexpr crc32c_shift() = default;
  constexpr explicit crc32c_shift(std::uint64_t len) : len_(len) {
#if PUSHWIRE_CRC_X86
    if (!std::is_constant_evaluated() && detail::features().pclmul) {
      fast_ = true;
      if (len) mont_ = detail::x8n_mont_pclmul(len);
      return;
    }
#endif
    x_ = detail::x8nmodp<crc32c_poly>(len);
  }
  constexpr std::uint64_t length() const { return len_; }
  /// CRC-32C of a||b from crc32c(a) and crc32c(b), b being length() bytes long.
  constexpr std::uint32_t combine(std::uint32_t crc_a, std::uint32_t crc_b) const {
#if PUSHWIRE_CRC_X86
    if (!std::is_constant_evaluated() && fast_) return (len_ ? detail::mul_mont_pclmul(crc_a, mont_) : crc_a) ^ crc_b;
#endif
    return detail::multmodp(x_, crc_a, crc32c_poly) ^ crc_b;
  }

 private:
  std::uint64_t len_ = 0;
  std::uint32_t x_ = 1u << 31;  // x^(8 len) mod P (without PCLMULQDQ)
  std::uint32_t mont_ = 0;      // the same times x^-33 (mulx33's form; with PCLMULQDQ)
  bool fast_ = false;
};

/// One CRC-32C of a batch: of head || src, continuing from crc (0 to start). When dst is not
/// null, src is copied to dst (src.size() bytes, overlapping neither) in the same pass.
struct crc32c_job {
  std::span<const std::byte> head{};
  std::span<const std::byte> src{};
  std::byte* dst = nullptr;
  std::uint32_t crc = 0;  ///< in: the CRC to continue; out: the result
};

/// Jobs up to this many bytes (head and src) run four at a time on vpclmul_avx512; longer ones
/// run alone, where one job already keeps the units busy (spec/crc.md §5).
inline constexpr std::size_t batch_job_max = 1024;

namespace detail {
inline void crc32c_job_alone(crc32c_job& j) {
  std::uint32_t c = crc32c_runtime(j.head, j.crc);
  j.crc = j.dst ? crc32c_copy_runtime({j.dst, j.src.size()}, j.src, c) : crc32c_runtime(j.src, c);
}
#if PUSHWIRE_CRC_X86
// A job as batch_avx512 takes it: head, mid, and the message's last 64-byte blocks (the
// source's, or a plain job's head's when it has no source). 0 blocks: the job runs alone.
inline std::size_t batch_split(const crc32c_job& j, batch_lane& l) {
  const std::size_t hn = j.head.size(), sn = j.src.size();
  if (hn + sn > batch_job_max) return 0;
  l.reg = ~j.crc;
  if (sn >= 64) {
    const std::size_t mn = sn % 64;
    l.head = j.head.data(), l.hn = hn, l.mid = j.src.data(), l.mn = mn, l.body = j.src.data() + mn;
    l.delta = j.dst ? j.dst - j.src.data() : 0;
    return sn / 64;
  }
  if (sn || j.dst || hn < 64) return 0;
  const std::size_t blocks = hn / 64, rest = hn - 64 * blocks;
  l.head = j.head.data(), l.hn = rest, l.mid = nullptr, l.mn = 0, l.body = j.head.data() + rest, l.delta = 0;
  return blocks;
}
template <std::size_t K>
inline void crc32c_batch_group(crc32c_job* const* g, batch_lane* l, std::size_t blocks, bool copy) {
  if (copy) batch_avx512<true>(l, blocks, std::make_index_sequence<K>{});
  else batch_avx512<false>(l, blocks, std::make_index_sequence<K>{});
  for (std::size_t k = 0; k < K; ++k) g[k]->crc = ~static_cast<std::uint32_t>(l[k].reg);
}
#endif
}  // namespace detail

/// Every job's CRC (and copy), as crc32c(head, crc) then crc32c_copy(dst, src, ·) or
/// crc32c(src, ·) job by job would give, in any order (no job may read another's dst). Where the selected CRC-32C path for long input is
/// vpclmul_avx512, jobs of at most batch_job_max bytes whose message ends in 64-byte blocks of
/// the source (or, with no source and no copy, of the head) run up to four at a time, consecutive
/// alike ones (as many blocks, all copying or none) together: their heads' crc32 chains in lockstep, then
/// their blocks folded in lockstep, one 512-bit lane each (several cells, spec/cells.md §7, §8).
/// Every other job, and every job on other paths, runs alone (spec/crc.md §5).
constexpr void crc32c_batch(std::span<crc32c_job> jobs) {
  if (std::is_constant_evaluated()) {
    for (auto& j : jobs) {
      const std::uint32_t c = reference::crc32c(j.head, j.crc);
      if (j.dst)
        for (std::size_t i = 0; i < j.src.size(); ++i) j.dst[i] = j.src[i];
      j.crc = reference::crc32c(j.src, c);
    }
    return;
  }
#if PUSHWIRE_CRC_X86
  if (selected().crc32c.large == path::vpclmul_avx512) {
    crc32c_job* g[4];
    detail::batch_lane l[4];
    std::size_t k = 0, blocks = 0;
    bool copy = false;
    const auto flush = [&] {
      switch (k) {
        case 4: detail::crc32c_batch_group<4>(g, l, blocks, copy); break;
        case 3: detail::crc32c_batch_group<3>(g, l, blocks, copy); break;
        case 2: detail::crc32c_batch_group<2>(g, l, blocks, copy); break;
        case 1: detail::crc32c_job_alone(*g[0]); break;
        default: break;
      }
      k = 0;
    };
    for (auto& j : jobs) {
      detail::batch_lane lane{};
      const std::size_t b = detail::batch_split(j, lane);
      if (b == 0) {
        detail::crc32c_job_alone(j);
        continue;
      }
      if (k && (b != blocks || (j.dst != nullptr) != copy)) flush();
      blocks = b, copy = j.dst != nullptr;
      g[k] = &j, l[k] = lane, ++k;
      if (k == 4) flush();
    }
    flush();
    return;
  }
#endif
  for (auto& j : jobs) detail::crc32c_job_alone(j);
}

}  // namespace pushwire::wire::crc
