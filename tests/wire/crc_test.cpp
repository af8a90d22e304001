// CRC-32 and CRC-32C: the check values at compile time and run time, every dispatch path against
// the byte-at-a-time reference at every length 0..4096 and every alignment 0..63, large inputs,
// incremental updates and combine.
#include <random>
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

namespace {

constexpr path all_paths[] = {path::portable, path::sse42, path::pclmul, path::vpclmul};

std::vector<std::byte> random_bytes(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::byte> v(n);
  for (auto& b : v) b = static_cast<std::byte>(rng());
  return v;
}

}  // namespace

TEST_CASE("crc: check values at run time, on every path", "[wire][crc]") {
  const auto digits = test::copy(test::hex<"313233343536373839">());  // "123456789"
  CHECK(crc::crc32(digits) == 0xCBF43926u);
  CHECK(crc::crc32c(digits) == 0xE3069283u);
  for (path p : all_paths) {
    INFO(crc::to_string(p) << (crc::available(p) ? "" : " (not on this CPU: portable runs)"));
    if (p != path::sse42) CHECK(crc::crc32_with(p, digits) == 0xCBF43926u);
    CHECK(crc::crc32c_with(p, digits) == 0xE3069283u);
  }
  UNSCOPED_INFO("dispatch on this CPU: crc32 " << crc::to_string(crc::best_crc32()) << ", crc32c "
                                               << crc::to_string(crc::best_crc32c()));
  CHECK(crc::available(path::portable));
}

TEST_CASE("crc: every path equals the reference at every length 0..4096 and alignment 0..63", "[wire][crc]") {
  constexpr std::size_t max_len = 4096, max_align = 64;
  const auto buf = random_bytes(max_len + max_align, 1);
  for (path p : all_paths) {
    if (!crc::available(p)) {
      WARN("path " << crc::to_string(p) << " not available on this CPU; skipped");
      continue;
    }
    for (std::size_t a = 0; a < max_align; ++a) {
      // The reference, one byte further each step (the same as reference::crc32 of the prefix).
      std::uint32_t ref32 = 0, ref32c = 0;
      for (std::size_t n = 0; n <= max_len; ++n) {
        const std::span<const std::byte> s(buf.data() + a, n);
        if (p != path::sse42 && crc::crc32_with(p, s, 0) != ref32) FAIL("crc32 " << crc::to_string(p) << " len " << n << " align " << a);
        if (crc::crc32c_with(p, s, 0) != ref32c) FAIL("crc32c " << crc::to_string(p) << " len " << n << " align " << a);
        if (n < max_len) {
          ref32 = crc::reference::crc32(std::span<const std::byte>(buf.data() + a + n, 1), ref32);
          ref32c = crc::reference::crc32c(std::span<const std::byte>(buf.data() + a + n, 1), ref32c);
        }
      }
    }
  }
}

TEST_CASE("crc: large inputs and a nonzero start", "[wire][crc]") {
  for (std::size_t n : {std::size_t{65536}, std::size_t{65536 + 13}, std::size_t{1 << 20}, std::size_t{(1 << 20) + 1001}}) {
    const auto buf = random_bytes(n, static_cast<std::uint32_t>(n));
    const std::uint32_t r32 = crc::reference::crc32(std::span<const std::byte>(buf), 0xDEADBEEF);
    const std::uint32_t r32c = crc::reference::crc32c(std::span<const std::byte>(buf), 0xDEADBEEF);
    for (path p : all_paths) {
      if (!crc::available(p)) continue;
      INFO(crc::to_string(p) << " n=" << n);
      if (p != path::sse42) CHECK(crc::crc32_with(p, buf, 0xDEADBEEF) == r32);
      CHECK(crc::crc32c_with(p, buf, 0xDEADBEEF) == r32c);
    }
    CHECK(crc::crc32(buf, 0xDEADBEEF) == r32);
    CHECK(crc::crc32c(buf, 0xDEADBEEF) == r32c);
  }
}

TEST_CASE("crc: scattered pieces, and combine", "[wire][crc]") {
  const auto buf = random_bytes(10000, 3);
  std::mt19937 rng(4);
  for (int i = 0; i < 2000; ++i) {
    const std::size_t n = rng() % buf.size();
    const std::size_t cut = n ? rng() % (n + 1) : 0;
    const std::span<const std::byte> all(buf.data(), n), a = all.first(cut), b = all.subspan(cut);
    const std::uint32_t whole = crc::crc32(all), whole_c = crc::crc32c(all);
    REQUIRE(crc::crc32(b, crc::crc32(a)) == whole);
    REQUIRE(crc::crc32c(b, crc::crc32c(a)) == whole_c);
    REQUIRE(crc::crc32_combine(crc::crc32(a), crc::crc32(b), b.size()) == whole);
    REQUIRE(crc::crc32c_combine(crc::crc32c(a), crc::crc32c(b), b.size()) == whole_c);
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

TEST_CASE("crc: crc32_concat equals the CRC of the concatenation, on every path", "[wire][crc]") {
  const auto buf = random_bytes(8192, 5);
  for (path p : {path::portable, path::pclmul, path::vpclmul}) {
    if (!crc::available(p)) continue;
    for (std::size_t hn = 0; hn <= 112; ++hn)
      for (std::size_t tn : {std::size_t{0}, std::size_t{1}, std::size_t{15}, std::size_t{16}, std::size_t{17},
                             std::size_t{63}, std::size_t{64}, std::size_t{255}, std::size_t{256}, std::size_t{1000},
                             std::size_t{4096}, std::size_t{4100}}) {
        const std::span<const std::byte> h(buf.data(), hn), t(buf.data() + 200, tn);
        std::vector<std::byte> cat(h.begin(), h.end());
        cat.insert(cat.end(), t.begin(), t.end());
        const std::uint32_t want = crc::reference::crc32(std::span<const std::byte>(cat), 0x1234);
        if (crc::crc32_concat_with(p, h, t, 0x1234) != want) FAIL(crc::to_string(p) << " head " << hn << " tail " << tn);
      }
  }
  CHECK(crc::crc32_concat(buf, std::span(buf).first(3)) == crc::crc32(std::span(buf).first(3), crc::crc32(buf)));
}

TEST_CASE("crc: crc32c_copy copies and equals the CRC, on every path, every length and alignment", "[wire][crc]") {
  const auto buf = random_bytes(4096 + 128, 11);
  std::vector<std::byte> dst(4096 + 256);
  for (path p : {path::portable, path::sse42, path::pclmul, path::vpclmul}) {
    if (!crc::available(p)) continue;
    for (std::size_t n = 0; n <= 1100; n += (n < 300 ? 1 : 37))
      for (std::size_t a : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{33}}) {
        std::fill(dst.begin(), dst.end(), std::byte{0xEE});
        const std::span<const std::byte> src(buf.data() + a, n);
        const std::uint32_t got = crc::crc32c_copy_with(p, std::span(dst).subspan(3 + a, n), src, 0x5A5A5A5A);
        if (got != crc::reference::crc32c(src, 0x5A5A5A5A)) FAIL(crc::to_string(p) << " n " << n << " align " << a);
        if (!std::equal(src.begin(), src.end(), dst.begin() + 3 + static_cast<std::ptrdiff_t>(a))) FAIL("copy " << n);
        // Nothing written outside the destination.
        if (dst[2 + a] != std::byte{0xEE} || dst[3 + a + n] != std::byte{0xEE}) FAIL("overrun " << n);
      }
  }
  std::vector<std::byte> big_dst(1 << 20);
  const auto big = random_bytes(1 << 20, 12);
  CHECK(crc::crc32c_copy(big_dst, big) == crc::reference::crc32c(std::span<const std::byte>(big)));
  CHECK(big_dst == big);
  CHECK(crc::crc32_copy(big_dst, std::span<const std::byte>(big).first(1000), 7) == crc::reference::crc32(std::span<const std::byte>(big).first(1000), 7));
  static_assert([] {
    std::array<std::byte, 9> d{};
    const std::array<std::byte, 9> s{std::byte{'1'}, std::byte{'2'}, std::byte{'3'}, std::byte{'4'}, std::byte{'5'},
                                     std::byte{'6'}, std::byte{'7'}, std::byte{'8'}, std::byte{'9'}};
    return crc::crc32c_copy(d, s) == 0xE3069283 && d == s;
  }());
}
