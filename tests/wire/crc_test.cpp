// CRC-32 and CRC-32C: the check values at compile time and run time; every path this CPU has
// against the byte-at-a-time reference (every length 0..1200 and every alignment 0..63, random
// lengths up to 70 000 at every alignment, continuing from a register), the fused copy (the
// destination compared, nothing written around it), concat and combine; which paths exist
// (against /proc/cpuinfo on x86-64, AT_HWCAP on aarch64); the paths every run must find
// (portable, those the compiler's target requires, those PUSHWIRE_CRC_EXPECT names);
// PUSHWIRE_CRC_PATH's syntax and its errors, and what a process runs under it (crc_selected.cpp).
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <pushwire/wire/crc.hpp>

#include "../support/test_support.hpp"

using namespace pushwire;
namespace crc = wire::crc;
using crc::path;

// The standard check values ("123456789"), both forms.
static_assert(crc::reference::crc32("123456789") == 0xCBF43926);
static_assert(crc::reference::crc32c("123456789") == 0xE3069283);
static_assert(crc::crc32(test::hex<"313233343536373839">()) == 0xCBF43926);
static_assert(crc::crc32c(test::hex<"313233343536373839">()) == 0xE3069283);
// zlib conventions: continuing, and combining.
static_assert(crc::reference::crc32("6789", crc::reference::crc32("12345")) == 0xCBF43926);
static_assert(crc::crc32_combine(crc::reference::crc32("12345"), crc::reference::crc32("6789"), 4) == 0xCBF43926);
static_assert(crc::crc32c_combine(crc::reference::crc32c("1"), crc::reference::crc32c("23456789"), 8) == 0xE3069283);
static_assert(crc::reference::crc32("") == 0 && crc::crc32_combine(0x12345678, 0, 0) == 0x12345678);
static_assert(crc::implements(path::sse42, crc::crc32c_poly) && !crc::implements(path::sse42, crc::crc32_poly));
static_assert(crc::implements(path::pmull, crc::crc32_poly) && crc::implements(path::vpclmul_avx2, crc::crc32c_poly));

namespace {

std::vector<std::byte> random_bytes(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::byte> v(n);
  for (auto& b : v) b = static_cast<std::byte>(rng());
  return v;
}

// Every path this CPU runs; each a test section would repeat, so the list is built once.
std::vector<path> runnable() {
  std::vector<path> v;
  for (const auto& n : crc::path_names)
    if (crc::available(static_cast<path>(n.value))) v.push_back(static_cast<path>(n.value));
  return v;
}

struct poly {
  std::uint32_t value;
  const char* name;
  std::uint32_t (*ref)(std::span<const std::byte>, std::uint32_t);
  std::uint32_t (*with)(path, std::span<const std::byte>, std::uint32_t);
  std::uint32_t (*copy_with)(path, std::span<std::byte>, std::span<const std::byte>, std::uint32_t);
  std::uint32_t (*concat_with)(path, std::span<const std::byte>, std::span<const std::byte>, std::uint32_t);
};
const poly polys[] = {
    {crc::crc32_poly, "crc32", [](std::span<const std::byte> d, std::uint32_t c) { return crc::reference::crc32(d, c); },
     crc::crc32_with, crc::crc32_copy_with, crc::crc32_concat_with},
    {crc::crc32c_poly, "crc32c", [](std::span<const std::byte> d, std::uint32_t c) { return crc::reference::crc32c(d, c); },
     crc::crc32c_with, crc::crc32c_copy_with, crc::crc32c_concat_with},
};

constexpr std::size_t max_random = 70000, max_align = 64;

// The reference CRC of buf[a, a + n) for every n: one byte-at-a-time pass per alignment.
std::vector<std::uint32_t> prefix_crcs(const poly& P, std::span<const std::byte> from, std::uint32_t start) {
  std::vector<std::uint32_t> v(from.size() + 1);
  v[0] = start;
  for (std::size_t i = 0; i < from.size(); ++i) v[i + 1] = P.ref(from.subspan(i, 1), v[i]);
  return v;
}

}  // namespace

TEST_CASE("crc: check values at run time, on every path", "[wire][crc]") {
  const auto digits = test::copy(test::hex<"313233343536373839">());  // "123456789"
  CHECK(crc::crc32(digits) == 0xCBF43926u);
  CHECK(crc::crc32c(digits) == 0xE3069283u);
  for (path p : runnable()) {
    INFO(crc::to_string(p));
    if (crc::implements(p, crc::crc32_poly)) CHECK(crc::crc32_with(p, digits) == 0xCBF43926u);
    CHECK(crc::crc32c_with(p, digits) == 0xE3069283u);
  }
  CHECK(crc::available(path::portable));
}

#if PUSHWIRE_CRC_X86 && defined(__linux__)
TEST_CASE("crc: the x86-64 paths available are those /proc/cpuinfo's flags allow", "[wire][crc]") {
  std::ifstream in("/proc/cpuinfo");
  std::set<std::string> flags;
  for (std::string line; std::getline(in, line);)
    if (line.rfind("flags", 0) == 0) {
      std::istringstream words(line.substr(line.find(':') + 1));
      for (std::string w; words >> w;) flags.insert(w);
      break;
    }
  REQUIRE(flags.count("sse2"));
  const auto has = [&](std::initializer_list<const char*> names) {
    return std::all_of(names.begin(), names.end(), [&](const char* f) { return flags.count(f) > 0; });
  };
  const bool pclmul = has({"pclmulqdq", "ssse3", "sse4_1", "sse4_2"});
  CHECK(crc::available(path::pclmul) == pclmul);
  CHECK(crc::available(path::sse42) == pclmul);
  CHECK(crc::available(path::vpclmul_avx2) == (pclmul && has({"avx2", "vpclmulqdq"})));
  CHECK(crc::available(path::vpclmul_avx512) == (pclmul && has({"avx2", "vpclmulqdq", "avx512f", "avx512bw", "avx512vl"})));
  CHECK_FALSE(crc::available(path::pmull));
  CHECK_FALSE(crc::available(path::armv8_crc));
}
#endif

#if PUSHWIRE_CRC_ARM && defined(__linux__)
#include <asm/hwcap.h>
TEST_CASE("crc: the aarch64 paths available are those AT_HWCAP's named bits allow", "[wire][crc]") {
  const unsigned long hw = getauxval(AT_HWCAP);
  CHECK(crc::available(path::armv8_crc) == ((hw & HWCAP_CRC32) != 0));
  CHECK(crc::available(path::pmull) == ((hw & HWCAP_CRC32) && (hw & HWCAP_PMULL)));
  CHECK_FALSE(crc::available(path::sse42));
  CHECK_FALSE(crc::available(path::vpclmul_avx512));
}
#endif

namespace {
// The paths this run must find: portable on every machine; those the compiler's target already
// requires of the CPU (a build for -march=icelake-server or with +crc runs only where they exist);
// and PUSHWIRE_CRC_EXPECT="NAME ...", paths the machine running the tests is known to have
// (tests/aarch64/Makefile sets it for qemu; a CI machine with a particular CPU may name its own),
// so that none of them is skipped unnoticed.
std::vector<std::string> expected_paths() {
  std::vector<std::string> v{"portable"};
#if PUSHWIRE_CRC_X86 && defined(__PCLMUL__) && defined(__SSSE3__) && defined(__SSE4_1__) && defined(__SSE4_2__)
  v.insert(v.end(), {"sse42", "pclmul"});
#if defined(__AVX2__) && defined(__VPCLMULQDQ__)
  v.push_back("vpclmul_avx2");
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
  v.push_back("vpclmul_avx512");
#endif
#endif
#endif
#if PUSHWIRE_CRC_ARM && defined(__ARM_FEATURE_CRC32)
  v.push_back("armv8_crc");
#if defined(__ARM_FEATURE_CRYPTO) || defined(__ARM_FEATURE_AES)
  v.push_back("pmull");
#endif
#endif
  std::istringstream names(std::getenv("PUSHWIRE_CRC_EXPECT") ? std::getenv("PUSHWIRE_CRC_EXPECT") : "");
  for (std::string name; names >> name;) v.push_back(name);
  return v;
}
}  // namespace

TEST_CASE("crc: the paths this run expects are available and selectable", "[wire][crc]") {
  const auto expected = expected_paths();
  REQUIRE_FALSE(expected.empty());
  const auto runs = runnable();
  for (const std::string& name : expected) {
    INFO(name);
    const auto r = crc::select(name);
    CHECK(r.error == crc::select_errc{});
    CHECK(std::find_if(runs.begin(), runs.end(), [&](path p) { return crc::to_string(p) == name; }) != runs.end());
  }
}

TEST_CASE("crc: automatic() runs the widest folding path, sse42 below its crossover", "[wire][crc]") {
  const crc::selection s = crc::automatic();
  for (const crc::choice& c : {s.crc32, s.crc32c}) {
    CHECK(crc::available(c.large));
    CHECK(crc::available(c.small));
  }
  CHECK(crc::implements(s.crc32.large, crc::crc32_poly));
  CHECK(s.crc32.small_below == 0);
  if (crc::available(path::vpclmul_avx512)) CHECK(s.crc32.large == path::vpclmul_avx512);
  else if (crc::available(path::vpclmul_avx2)) CHECK(s.crc32.large == path::vpclmul_avx2);
  else if (crc::available(path::pmull)) CHECK(s.crc32.large == path::pmull);
  if (crc::available(path::sse42)) {
    CHECK(s.crc32c.small == path::sse42);
    CHECK(s.crc32c.small_below == crc::sse42_below(s.crc32c.large));
  }
  CHECK(s.crc32.beside == crc::streams{});
  CHECK(s.crc32c.beside == crc::default_streams(s.crc32c.large));
  if (crc::available(path::vpclmul_avx512)) CHECK(s.crc32c.beside == crc::streams{4, 4096});
  UNSCOPED_INFO("crc32 " << crc::to_string(s.crc32.large) << ", crc32c " << crc::to_string(s.crc32c.small) << " below "
                         << s.crc32c.small_below << " bytes, then " << crc::to_string(s.crc32c.large));
}

TEST_CASE("crc: every path equals the reference at every length 0..1200 and alignment 0..63", "[wire][crc]") {
  constexpr std::size_t max_len = 1200;
  const auto buf = random_bytes(max_len + max_align, 1);
  for (const poly& P : polys)
    for (std::size_t a = 0; a < max_align; ++a) {
      const auto ref = prefix_crcs(P, std::span(buf).subspan(a, max_len), 0);
      for (path p : runnable()) {
        if (!crc::implements(p, P.value)) continue;
        for (std::size_t n = 0; n <= max_len; ++n)
          if (P.with(p, std::span(buf).subspan(a, n), 0) != ref[n])
            FAIL(P.name << " " << crc::to_string(p) << " len " << n << " align " << a);
      }
    }
}

TEST_CASE("crc: every path equals the reference at random lengths to 70000, every alignment, from any register",
          "[wire][crc]") {
  const auto buf = random_bytes(max_random + max_align, 2);
  std::mt19937 rng(3);
  for (const poly& P : polys)
    for (std::size_t a = 0; a < max_align; ++a) {
      const std::uint32_t start = static_cast<std::uint32_t>(rng());
      const auto ref = prefix_crcs(P, std::span(buf).subspan(a, max_random), start);
      for (int i = 0; i < 12; ++i) {
        const std::size_t n = i < 4 ? rng() % 2048 : rng() % (max_random + 1);
        for (path p : runnable())
          if (crc::implements(p, P.value) && P.with(p, std::span(buf).subspan(a, n), start) != ref[n])
            FAIL(P.name << " " << crc::to_string(p) << " len " << n << " align " << a);
      }
      if (P.with(path::portable, std::span(buf).subspan(a, max_random), start) != ref[max_random]) FAIL("portable");
    }
}

TEST_CASE("crc: the fused copy on every path copies exactly the source and returns its CRC", "[wire][crc]") {
  const auto src_buf = random_bytes(max_random + max_align, 5);
  std::vector<std::byte> dst(max_random + 3 * max_align);
  std::mt19937 rng(6);
  for (const poly& P : polys)
    for (path p : runnable()) {
      if (!crc::implements(p, P.value)) continue;
      for (int i = 0; i < 600; ++i) {
        const std::size_t n = i < 300 ? static_cast<std::size_t>(i) : i < 500 ? rng() % 4096 : rng() % (max_random + 1);
        const std::size_t sa = rng() % max_align, da = max_align + rng() % max_align;
        std::fill(dst.begin(), dst.end(), std::byte{0xEE});
        const std::span<const std::byte> src(src_buf.data() + sa, n);
        const std::uint32_t start = static_cast<std::uint32_t>(rng());
        const std::uint32_t got = P.copy_with(p, std::span(dst).subspan(da, n), src, start);
        INFO(P.name << " " << crc::to_string(p) << " n " << n << " src align " << sa << " dst align " << da);
        if (got != P.ref(src, start)) FAIL("CRC");
        if (!std::equal(src.begin(), src.end(), dst.begin() + static_cast<std::ptrdiff_t>(da))) FAIL("copy");
        const auto untouched = [](auto first, auto last) {
          return std::all_of(first, last, [](std::byte b) { return b == std::byte{0xEE}; });
        };
        if (!untouched(dst.begin(), dst.begin() + static_cast<std::ptrdiff_t>(da)) ||
            !untouched(dst.begin() + static_cast<std::ptrdiff_t>(da + n), dst.end()))
          FAIL("a byte outside the destination was written");
      }
    }
  std::vector<std::byte> big_dst(1 << 20);
  const auto big = random_bytes(1 << 20, 12);
  CHECK(crc::crc32c_copy(big_dst, big) == crc::reference::crc32c(std::span<const std::byte>(big)));
  CHECK(big_dst == big);
  CHECK(crc::crc32_copy(big_dst, std::span<const std::byte>(big).first(1000), 7) ==
        crc::reference::crc32(std::span<const std::byte>(big).first(1000), 7));
  static_assert([] {
    std::array<std::byte, 9> d{};
    const std::array<std::byte, 9> s{std::byte{'1'}, std::byte{'2'}, std::byte{'3'}, std::byte{'4'}, std::byte{'5'},
                                     std::byte{'6'}, std::byte{'7'}, std::byte{'8'}, std::byte{'9'}};
    return crc::crc32c_copy(d, s) == 0xE3069283 && d == s;
  }());
}

TEST_CASE("crc: scattered pieces, and combine of the CRCs every path computes", "[wire][crc]") {
  const auto buf = random_bytes(10000, 3);
  std::mt19937 rng(4);
  for (int i = 0; i < 2000; ++i) {
    const std::size_t n = rng() % buf.size();
    const std::size_t cut = n ? rng() % (n + 1) : 0;
    const std::span<const std::byte> all(buf.data(), n), a = all.first(cut), b = all.subspan(cut);
    const std::uint32_t whole = crc::reference::crc32(all), whole_c = crc::reference::crc32c(all);
    REQUIRE(crc::crc32(b, crc::crc32(a)) == whole);
    REQUIRE(crc::crc32c(b, crc::crc32c(a)) == whole_c);
    for (path p : runnable()) {
      INFO(crc::to_string(p) << " n " << n << " cut " << cut);
      if (crc::implements(p, crc::crc32_poly))
        REQUIRE(crc::crc32_combine(crc::crc32_with(p, a), crc::crc32_with(p, b), b.size()) == whole);
      REQUIRE(crc::crc32c_combine(crc::crc32c_with(p, a), crc::crc32c_with(p, b), b.size()) == whole_c);
    }
  }
}

TEST_CASE("crc: the run-time crc32c_combine equals shift-and-add multiplication", "[wire][crc]") {
  std::mt19937_64 rng(9);
  auto check = [&](std::uint32_t a, std::uint32_t b, std::uint64_t n) {
    const std::uint32_t want = crc::reference::crc32c_combine(a, b, n);
    if (crc::crc32c_combine(a, b, n) != want) FAIL("a " << a << " b " << b << " n " << n);
  };
  for (std::uint64_t n = 0; n <= 600; ++n) check(static_cast<std::uint32_t>(rng()), static_cast<std::uint32_t>(rng()), n);
  for (int k = 0; k < 64; ++k) check(static_cast<std::uint32_t>(rng()), static_cast<std::uint32_t>(rng()), std::uint64_t{1} << k);
  for (int i = 0; i < 5000; ++i) check(static_cast<std::uint32_t>(rng()), static_cast<std::uint32_t>(rng()), rng() >> (rng() % 64));
  check(0, 0, 12345);
  check(0xFFFFFFFF, 0, 1);
}

TEST_CASE("crc: concat equals the CRC of the concatenation, on every path", "[wire][crc]") {
  const auto buf = random_bytes(8192, 5);
  for (const poly& P : polys)
    for (path p : runnable()) {
      if (!crc::implements(p, P.value)) continue;
      for (std::size_t hn = 0; hn <= 112; ++hn)
        for (std::size_t tn : {0, 1, 15, 16, 17, 63, 64, 127, 128, 255, 256, 511, 512, 1000, 4096, 4100}) {
          const std::span<const std::byte> h(buf.data(), hn), t(buf.data() + 200, tn);
          std::vector<std::byte> cat(h.begin(), h.end());
          cat.insert(cat.end(), t.begin(), t.end());
          if (P.concat_with(p, h, t, 0x1234) != P.ref(cat, 0x1234))
            FAIL(P.name << " " << crc::to_string(p) << " head " << hn << " tail " << tn);
        }
    }
  CHECK(crc::crc32_concat(buf, std::span(buf).first(3)) == crc::crc32(std::span(buf).first(3), crc::crc32(buf)));
  CHECK(crc::crc32c_concat(buf, std::span(buf).first(3)) == crc::crc32c(std::span(buf).first(3), crc::crc32c(buf)));
}

TEST_CASE("crc: PUSHWIRE_CRC_PATH's syntax", "[wire][crc]") {
  const crc::selection base = crc::automatic();
  const auto ok = [&](std::string_view text) {
    const auto r = crc::select(text, base);
    INFO(text << ": " << wire::enum_name(r.error) << " " << r.culprit);
    REQUIRE(r.error == crc::select_errc{});
    return r.value;
  };
  CHECK(ok("") == base);
  CHECK(ok("auto") == base);
  const crc::choice portable{path::portable, path::portable, 0};
  CHECK(ok("portable") == crc::selection{portable, portable});
  CHECK(ok("crc32c=portable") == crc::selection{base.crc32, portable});
  CHECK(ok("crc32=portable") == crc::selection{portable, base.crc32c});
  CHECK(ok("crc32=portable,crc32c=auto") == crc::selection{portable, base.crc32c});
  for (path p : runnable()) {
    const auto s = ok(crc::to_string(p));
    const crc::choice forced{p, p, 0};
    const bool vp = p == path::vpclmul_avx2 || p == path::vpclmul_avx512;
    CHECK(s.crc32c == crc::choice{p, p, 0, vp ? crc::default_streams(p) : crc::streams{}});
    CHECK(s.crc32 == (crc::implements(p, crc::crc32_poly) ? forced : base.crc32));
    CHECK(ok(std::string(crc::to_string(p)) + ",streams=off").crc32c == forced);
    CHECK(ok("streams=off," + std::string(crc::to_string(p))).crc32c == forced);
    if (vp) {
      CHECK(ok(std::string(crc::to_string(p)) + ",streams=3@1024").crc32c == crc::choice{p, p, 0, {3, 1024}});
      CHECK(ok("streams=10@65536,crc32c=" + std::string(crc::to_string(p))).crc32c == crc::choice{p, p, 0, {10, 65536}});
    }
  }
  CHECK(ok("streams=off").crc32c == crc::choice{base.crc32c.large, base.crc32c.small, base.crc32c.small_below});
  CHECK(ok("streams=off").crc32 == base.crc32);
  const auto refused = [&](std::string_view text, crc::select_errc e, std::string_view culprit) {
    const auto r = crc::select(text, base);
    INFO(text);
    CHECK(r.error == e);
    CHECK(r.culprit == culprit);
    CHECK(r.value == base);
  };
  using E = crc::select_errc;
  refused("bogus", E::unknown_path, "bogus");
  refused("crc32c=Portable", E::unknown_path, "Portable");
  refused("crc32=", E::unknown_path, "");
  refused("crc64=portable", E::syntax, "crc64=portable");
  refused("portable,", E::syntax, "");
  refused(",portable", E::syntax, "");
  refused("portable,,crc32=portable", E::syntax, "");
  for (const auto& n : crc::path_names)
    if (!crc::available(static_cast<path>(n.value))) refused(n.name, E::unavailable, n.name);
  if (crc::available(path::sse42)) refused("crc32=sse42", E::wrong_polynomial, "crc32=sse42");
  else refused("crc32=sse42", E::unavailable, "sse42");
  for (const char* bad : {"streams=", "streams=on", "streams=4", "streams=4@", "streams=@4096", "streams=7@4096",
                          "streams=0@4096", "streams=4@1023", "streams=4@0x1000", "streams=+4@4096", "streams=4@4096 ",
                          "streams=4@99999999999999999999999", "streams=OFF"})
    refused(std::string("portable,") + bad, E::bad_streams, bad);
  refused("portable,streams=4@4096", E::no_streams, "streams=4@4096");
  refused("streams=4@4096,crc32c=portable", E::no_streams, "streams=4@4096");
  if (crc::available(path::sse42)) refused("streams=8@2048,sse42", E::no_streams, "streams=8@2048");
  if (crc::available(path::pclmul)) refused("pclmul,streams=5@1024", E::no_streams, "streams=5@1024");
}

TEST_CASE("crc: CRC-32C with every allowed crc32-stream setting beside folding equals the reference", "[wire][crc]") {
  const auto buf = random_bytes(max_random + max_align, 7);
  std::mt19937 rng(11);
  for (path p : {path::vpclmul_avx2, path::vpclmul_avx512}) {
    if (!crc::available(p)) {
      WARN("skipped: this CPU lacks " << crc::to_string(p));
      continue;
    }
    for (std::uint8_t w : crc::stream_words_allowed)
      for (std::size_t from : {crc::streams_from_min, std::size_t{4096}}) {
        const crc::streams st{w, from};
        const std::uint32_t start = static_cast<std::uint32_t>(rng());
        // The smallest lengths with streams, the boundaries of a round, and random ones.
        std::vector<std::size_t> lens{from - 1, from, from + 1, from + 15, from + 16, from + 17};
        const std::size_t round = (p == path::vpclmul_avx512 ? 512 : 256) + 24 * w;
        for (std::size_t k = 2; k < 6; ++k)
          for (std::size_t d : {round * k - 1, round * k, round * k + 1, round * k + 63}) lens.push_back(std::max(d, from));
        for (int i = 0; i < 8; ++i) lens.push_back(from + rng() % (max_random - from + 1));
        for (std::size_t n : lens) {
          const std::size_t a = rng() % max_align;
          const auto in = std::span(buf).subspan(a, n);
          if (crc::crc32c_with(p, st, in, start) != crc::reference::crc32c(in, start))
            FAIL(crc::to_string(p) << " streams " << int{w} << "@" << from << " len " << n << " align " << a);
        }
      }
  }
}

#ifdef PUSHWIRE_CRC_SELECTED
#include "../support/process.hpp"

namespace {
// The line crc_selected prints for one polynomial's choice.
std::string selected_line(const char* poly_name, const crc::choice& c) {
  const std::string large{crc::to_string(c.large)};
  const std::string streams = c.beside.words ? " streams=" + std::to_string(c.beside.words) + "@" + std::to_string(c.beside.from) : "";
  if (c.small_below == 0) return std::string(poly_name) + " " + large + " at every size" + streams + "\n";
  return std::string(poly_name) + " " + std::string(crc::to_string(c.small)) + " below " + std::to_string(c.small_below) +
         " bytes, then " + large + streams + "\n";
}
}  // namespace

TEST_CASE("crc: PUSHWIRE_CRC_PATH forces a path, and a bad value stops the process with its reason", "[wire][crc]") {
  const std::string tool = PUSHWIRE_CRC_SELECTED;
  const auto auto_run = test::run_command(tool);
  REQUIRE(auto_run.status == 0);
  const crc::selection s = crc::automatic();
  CHECK(auto_run.out == selected_line("crc32", s.crc32) + selected_line("crc32c", s.crc32c) + "check values good\n");
  for (path p : runnable()) {
    const std::string name{crc::to_string(p)};
    const auto r = test::run_command("PUSHWIRE_CRC_PATH=" + name + " " + tool);
    INFO(name << ": " << r.out << r.err);
    CHECK(r.status == 0);
    const crc::choice forced{p, p, 0};
    CHECK(r.out == selected_line("crc32", crc::implements(p, crc::crc32_poly) ? forced : s.crc32) +
                       selected_line("crc32c", {p, p, 0, crc::default_streams(p)}) + "check values good\n");
  }
  for (path p : {path::vpclmul_avx2, path::vpclmul_avx512}) {
    if (!crc::available(p)) continue;
    const std::string name{crc::to_string(p)};
    for (const auto& [item, st] : {std::pair{"streams=off", crc::streams{}}, std::pair{"streams=5@2048", crc::streams{5, 2048}}}) {
      const auto r = test::run_command("PUSHWIRE_CRC_PATH=crc32c=" + name + "," + item + " " + tool);
      INFO(name << "," << item << ": " << r.out << r.err);
      CHECK(r.status == 0);
      CHECK(r.out == selected_line("crc32", s.crc32) + selected_line("crc32c", {p, p, 0, st}) + "check values good\n");
    }
  }
  for (const char* bad : {"bogus", "crc32=sse42", "pmull,vpclmul_avx512,armv8_crc,pclmul", "x=1", "streams=9@4096",
                          "portable,streams=4@4096"}) {
    const auto r = test::run_command(std::string("PUSHWIRE_CRC_PATH=") + bad + " " + tool);
    INFO(bad << ": " << r.out << r.err);
    CHECK(r.status != 0);
    CHECK(r.out.find("check values") == std::string::npos);  // no CRC ran
    CHECK(r.err.find(std::string("pushwire: PUSHWIRE_CRC_PATH=") + bad + ": ") != std::string::npos);
  }
}
#endif

TEST_CASE("crc: crc32c_shift combines as crc32c_combine does, at compile time and run time", "[wire][crc]") {
  static_assert(crc::crc32c_shift(8).combine(crc::reference::crc32c("1"), crc::reference::crc32c("23456789")) == 0xE3069283);
  static_assert(crc::crc32c_shift(0).combine(0x12345678, 0) == 0x12345678);
  std::mt19937_64 rng(10);
  for (std::uint64_t n = 0; n <= 2000; ++n) {
    const crc::crc32c_shift s(n);
    REQUIRE(s.length() == n);
    for (int i = 0; i < 3; ++i) {
      const auto a = static_cast<std::uint32_t>(rng()), b = static_cast<std::uint32_t>(rng());
      if (s.combine(a, b) != crc::reference::crc32c_combine(a, b, n)) FAIL("n " << n);
    }
  }
  for (int i = 0; i < 3000; ++i) {
    const std::uint64_t n = rng() >> (rng() % 64);
    const auto a = static_cast<std::uint32_t>(rng()), b = static_cast<std::uint32_t>(rng());
    if (crc::crc32c_shift(n).combine(a, b) != crc::reference::crc32c_combine(a, b, n)) FAIL("n " << n);
  }
}

TEST_CASE("crc: crc32c_batch equals the reference job by job, copies exactly, writes nothing else", "[wire][crc]") {
  if (crc::selected().crc32c.large != path::vpclmul_avx512)
    WARN("crc32c_batch groups jobs on vpclmul_avx512 only: this run checks the job-by-job path");
  const auto buf = random_bytes(4096 + max_align, 21);
  std::mt19937 rng(22);
  std::size_t jobs_total = 0, copies = 0, long_jobs = 0;
  for (int round = 0; round < 3000; ++round) {
    const std::size_t count = rng() % 24;
    // Mostly equal lengths (cells), sometimes anything up to past batch_job_max.
    const bool alike = rng() % 2;
    const std::size_t hn0 = rng() % 80, sn0 = rng() % 600;
    std::vector<crc::crc32c_job> jobs(count);
    std::vector<std::vector<std::byte>> dsts(count);
    std::vector<std::uint32_t> want(count);
    std::vector<std::size_t> at(count);
    for (std::size_t i = 0; i < count; ++i) {
      std::size_t hn = alike ? hn0 + rng() % 2 * 4 : rng() % 100;
      std::size_t sn = alike ? sn0 - (rng() % 4 == 0 ? std::min<std::size_t>(sn0, rng() % 40) : 0) : rng() % 1400;
      const std::size_t ha = rng() % max_align, sa = rng() % max_align;
      if (alike && hn0 % 5 == 0) hn = 64 * (1 + sn0 % 10) + hn0 % 40, sn = 0;  // a received cell: its whole packet part as head
      const auto head = std::span<const std::byte>(buf).subspan(ha, hn), src = std::span<const std::byte>(buf).subspan(1000 + sa, sn);
      const auto start = static_cast<std::uint32_t>(rng());
      jobs[i] = {head, src, nullptr, start};
      if (sn && rng() % 4) {
        at[i] = rng() % max_align;
        dsts[i].assign(sn + at[i] + max_align, std::byte{0xEE});
        jobs[i].dst = dsts[i].data() + at[i];
        ++copies;
      }
      want[i] = crc::reference::crc32c(src, crc::reference::crc32c(head, start));
      long_jobs += hn + sn > crc::batch_job_max;
    }
    crc::crc32c_batch(jobs);
    for (std::size_t i = 0; i < count; ++i) {
      INFO("round " << round << " job " << i << " head " << jobs[i].head.size() << " src " << jobs[i].src.size());
      if (jobs[i].crc != want[i]) FAIL("CRC");
      if (!jobs[i].dst) continue;
      const auto& d = dsts[i];
      const auto from = d.begin() + static_cast<std::ptrdiff_t>(at[i]);
      if (!std::equal(jobs[i].src.begin(), jobs[i].src.end(), from)) FAIL("copy");
      const auto untouched = [](auto first, auto last) {
        return std::all_of(first, last, [](std::byte b) { return b == std::byte{0xEE}; });
      };
      if (!untouched(d.begin(), from) || !untouched(from + static_cast<std::ptrdiff_t>(jobs[i].src.size()), d.end()))
        FAIL("a byte outside the destination was written");
    }
    jobs_total += count;
  }
  CHECK(jobs_total > 30000);
  CHECK(copies > 15000);
  CHECK(long_jobs > 1000);
  static_assert([] {
    std::array<std::byte, 9> d{};
    const std::array<std::byte, 9> s{std::byte{'1'}, std::byte{'2'}, std::byte{'3'}, std::byte{'4'}, std::byte{'5'},
                                     std::byte{'6'}, std::byte{'7'}, std::byte{'8'}, std::byte{'9'}};
    std::array<crc::crc32c_job, 2> j{{{std::span(s).first(3), std::span(s).subspan(3), d.data(), 0},
                                      {{}, std::span(s), nullptr, 0}}};
    crc::crc32c_batch(j);
    return j[0].crc == 0xE3069283 && j[1].crc == 0xE3069283 && d[0] == std::byte{'4'} && d[5] == std::byte{'9'} &&
           d[6] == std::byte{0};
  }());
}
