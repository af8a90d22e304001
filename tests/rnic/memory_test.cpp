// rnic/memory.hpp: every access checked for key, PD, rights and bounds at every level; indirect
// and pattern keys map bytes as hand-computed here; on-demand keys fault until resident.
#include <catch2/catch.hpp>

#include <cstdint>
#include <numeric>
#include <vector>

#include <pushwire/rnic/memory.hpp>

using namespace pushwire;
using namespace pushwire::rnic;

namespace {

std::vector<std::byte> iota_bytes(std::size_t n, std::uint8_t from = 0) {
  std::vector<std::byte> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>(from + i);
  return v;
}
std::vector<std::uint8_t> read_all(const memory_table& m, std::uint32_t key, std::uint64_t va, std::size_t n) {
  std::vector<std::byte> out(n);
  m.read(key, va, out);
  std::vector<std::uint8_t> r(n);
  for (std::size_t i = 0; i < n; ++i) r[i] = std::to_integer<std::uint8_t>(out[i]);
  return r;
}
constexpr access_need rw{1, access::remote_write | access::remote_read};

}  // namespace

TEST_CASE("keys: index << 8 | variant, a reused index gets the next variant", "[rnic][memory]") {
  static_assert(make_key(0x12345, 0x67) == 0x1234567);
  static_assert(key_index(0x1234567) == 0x12345 && key_variant(0x1234567) == 0x67);
  memory_table m;
  auto buf = iota_bytes(64);
  const std::uint32_t k1 = *m.reg_direct(1, buf.data(), 64, all_access, 0x1000);
  CHECK(key_index(k1) == 1);
  CHECK(key_variant(k1) == 0);
  REQUIRE(m.dereg(k1) == errc{});
  const std::uint32_t k2 = *m.reg_direct(1, buf.data(), 64, all_access, 0x1000);
  CHECK(key_index(k2) == 1);
  CHECK(key_variant(k2) == 1);
  CHECK(m.check(k1, 0x1000, 8, rw) == errc::wrong_variant);
  CHECK(m.check(k2, 0x1000, 8, rw) == errc{});
  REQUIRE(m.dereg(k2) == errc{});
  CHECK(m.check(k2, 0x1000, 8, rw) == errc::deregistered);
  CHECK(m.check(make_key(7, 0), 0x1000, 8, rw) == errc::no_such_key);
  CHECK(m.check(make_key(0, 0), 0, 8, rw) == errc::no_such_key);
  CHECK(m.dereg(k2) == errc::not_found);
}

TEST_CASE("direct keys: bounds, wrap, PD and rights", "[rnic][memory]") {
  memory_table m;
  auto buf = iota_bytes(256);
  const std::uint32_t k = *m.reg_direct(1, buf.data(), 256, access::remote_read | access::local_write, 0x1000);
  CHECK(m.check(k, 0x1000, 256, {1, access::remote_read}) == errc{});
  CHECK(m.check(k, 0x10FF, 1, {1, access::remote_read}) == errc{});
  CHECK(m.check(k, 0x0FFF, 2, {1, access::remote_read}) == errc::out_of_range);
  CHECK(m.check(k, 0x10FF, 2, {1, access::remote_read}) == errc::out_of_range);
  CHECK(m.check(k, 0x1100, 1, {1, access::remote_read}) == errc::out_of_range);
  CHECK(m.check(k, ~std::uint64_t{0} - 3, 8, {1, access::remote_read}) == errc::wraps);
  CHECK(m.check(k, 0x1000, 8, {2, access::remote_read}) == errc::wrong_pd);
  CHECK(m.check(k, 0x1000, 8, {1, access::remote_write}) == errc::no_access_right);
  CHECK(m.check(k, 0x1000, 8, {1, access::remote_atomic}) == errc::no_access_right);
  CHECK(m.check(k, 0x1000, 0, {2, access::remote_atomic}) == errc{});  // zero length: no key needed (IBTA)
  CHECK(read_all(m, k, 0x1010, 3) == std::vector<std::uint8_t>{0x10, 0x11, 0x12});
  // Registration limits.
  CHECK(m.reg_direct(1, nullptr, 8, all_access, 0).code() == errc::invalid_argument);
  CHECK(m.reg_direct(1, buf.data(), 16, all_access, ~std::uint64_t{0} - 8).code() == errc::invalid_argument);
  memory_table small(2);
  CHECK(small.reg_direct(1, buf.data(), 8, all_access, 0).has_value());
  CHECK(small.reg_direct(1, buf.data(), 8, all_access, 0).has_value());
  CHECK(small.reg_direct(1, buf.data(), 8, all_access, 0).code() == errc::no_resources);
}

TEST_CASE("re-registration keeps the index, changes the variant and the range", "[rnic][memory]") {
  memory_table m;
  auto a = iota_bytes(64), b = iota_bytes(128, 100);
  const std::uint32_t k = *m.reg_direct(1, a.data(), 64, access::remote_read, 0x5000);
  const std::uint32_t k2 = *m.rereg(k, b.data(), 128, access::remote_read);
  CHECK(key_index(k2) == key_index(k));
  CHECK(m.check(k, 0x5000, 1, {1, access::remote_read}) == errc::wrong_variant);
  const std::uint64_t va = reinterpret_cast<std::uintptr_t>(b.data());
  CHECK(read_all(m, k2, va + 1, 2) == std::vector<std::uint8_t>{101, 102});
}

TEST_CASE("indirect keys: entries concatenated, each checked at its own level", "[rnic][memory]") {
  memory_table m;
  auto x = iota_bytes(100, 0), y = iota_bytes(100, 100);
  const std::uint32_t kx = *m.reg_direct(1, x.data(), 100, all_access, 0);
  const std::uint32_t ky = *m.reg_direct(1, y.data(), 100, access::remote_read, 0);  // no remote write
  // bytes 0..9 = x[20..29], bytes 10..14 = y[50..54], bytes 15..34 = x[0..19]
  const klm_entry e[] = {{kx, 20, 10}, {ky, 50, 5}, {kx, 0, 20}};
  const std::uint32_t ki = *m.reg_indirect(1, e, all_access);
  CHECK(m.info(ki)->length == 35);
  CHECK(read_all(m, ki, 8, 4) == std::vector<std::uint8_t>{28, 29, 150, 151});
  CHECK(read_all(m, ki, 13, 4) == std::vector<std::uint8_t>{153, 154, 0, 1});
  CHECK(m.check(ki, 0, 35, {1, access::remote_read}) == errc{});
  // Writing through the indirect key into ky's range needs ky's remote write too.
  CHECK(m.check(ki, 0, 10, {1, access::remote_write}) == errc{});
  CHECK(m.check(ki, 9, 2, {1, access::remote_write}) == errc::no_access_right);
  CHECK(m.check(ki, 30, 6, {1, access::remote_read}) == errc::out_of_range);
  // A deregistered inner key fails the access through the outer one.
  REQUIRE(m.dereg(ky) == errc{});
  CHECK(m.check(ki, 0, 10, rw) == errc{});
  CHECK(m.check(ki, 10, 1, {1, access::remote_read}) == errc::deregistered);
  // Entries must exist, be of the same PD, and be 1 .. 2^31 bytes.
  CHECK(m.reg_indirect(1, std::vector<klm_entry>{{ky, 0, 1}}, all_access).code() == errc::deregistered);
  const std::uint32_t other_pd = *m.reg_direct(2, x.data(), 100, all_access, 0);
  CHECK(m.reg_indirect(1, std::vector<klm_entry>{{other_pd, 0, 1}}, all_access).code() == errc::wrong_pd);
  CHECK(m.reg_indirect(1, std::vector<klm_entry>{{kx, 0, 0}}, all_access).code() == errc::invalid_argument);
  CHECK(m.reg_indirect(1, std::vector<klm_entry>{{kx, 0, max_klm_bytes + 1}}, all_access).code() == errc::invalid_argument);
  CHECK(m.reg_indirect(1, {}, all_access).code() == errc::invalid_argument);
}

TEST_CASE("indirect keys nest to max_key_depth and never reach themselves", "[rnic][memory]") {
  memory_table m;
  auto x = iota_bytes(16);
  std::uint32_t k = *m.reg_direct(1, x.data(), 16, all_access, 0);
  std::vector<std::uint32_t> chain{k};
  for (std::size_t level = 1; level <= max_key_depth; ++level) {
    const auto r = m.reg_indirect(1, std::vector<klm_entry>{{chain.back(), 0, 16}}, all_access);
    REQUIRE(r.has_value());
    chain.push_back(*r);
  }
  CHECK(read_all(m, chain.back(), 3, 2) == std::vector<std::uint8_t>{3, 4});
  CHECK(m.reg_indirect(1, std::vector<klm_entry>{{chain.back(), 0, 16}}, all_access).code() == errc::too_deep);
  // Pointing a key at one that reaches it is a cycle.
  CHECK(m.modify_indirect(chain[1], std::vector<klm_entry>{{chain[3], 0, 16}}) == errc::cycle);
  CHECK(m.modify_indirect(chain[1], std::vector<klm_entry>{{chain[1], 0, 16}}) == errc::cycle);
  CHECK(m.modify_indirect(chain[0], std::vector<klm_entry>{{chain[1], 0, 16}}) == errc::not_found);  // direct
  CHECK(read_all(m, chain.back(), 0, 1) == std::vector<std::uint8_t>{0});  // unchanged
}

TEST_CASE("pattern keys: repetition r of entry e at address + r * stride", "[rnic][memory]") {
  memory_table m;
  auto x = iota_bytes(256);
  const std::uint32_t kx = *m.reg_direct(1, x.data(), 256, all_access, 0);
  // Two entries of 4 and 2 bytes, strides 16 and 32, three repetitions: 18 bytes.
  const pattern_entry e[] = {{kx, 0, 4, 16}, {kx, 100, 2, 32}};
  const std::uint32_t kp = *m.reg_pattern(1, 3, e, all_access);
  CHECK(m.info(kp)->length == 18);
  // By hand: r0: 0 1 2 3 | 100 101; r1: 16 17 18 19 | 132 133; r2: 32 33 34 35 | 164 165
  CHECK(read_all(m, kp, 0, 18) == std::vector<std::uint8_t>{0, 1, 2, 3, 100, 101, 16, 17, 18, 19, 132, 133, 32, 33, 34, 35, 164, 165});
  CHECK(read_all(m, kp, 5, 3) == std::vector<std::uint8_t>{101, 16, 17});
  CHECK(m.check(kp, 17, 2, rw) == errc::out_of_range);
  // A repetition that runs past its key's bytes is refused at that level.
  const pattern_entry far[] = {{kx, 200, 8, 40}};
  const std::uint32_t kf = *m.reg_pattern(1, 3, far, all_access);
  CHECK(m.check(kf, 0, 16, rw) == errc{});   // 200..207, 240..247
  CHECK(m.check(kf, 16, 1, rw) == errc::out_of_range);  // 280
  CHECK(m.reg_pattern(1, 0, e, all_access).code() == errc::invalid_argument);
  CHECK(m.reg_pattern(1, 1, std::vector<pattern_entry>{{kx, 0, 0, 1}}, all_access).code() == errc::invalid_argument);
  // Writes land in the pieces, nothing else changes.
  std::vector<std::byte> before = x;
  const auto src = iota_bytes(6, 200);
  m.write(kp, 2, src);
  CHECK(std::to_integer<int>(x[2]) == 200);
  CHECK(std::to_integer<int>(x[3]) == 201);
  CHECK(std::to_integer<int>(x[100]) == 202);
  CHECK(std::to_integer<int>(x[101]) == 203);
  CHECK(std::to_integer<int>(x[16]) == 204);
  CHECK(std::to_integer<int>(x[17]) == 205);
  for (std::size_t i : {std::size_t{0}, std::size_t{1}, std::size_t{4}, std::size_t{15}, std::size_t{18}, std::size_t{99}, std::size_t{102}})
    CHECK(x[i] == before[i]);
}

TEST_CASE("on-demand keys fault until their pages are resident", "[rnic][memory]") {
  memory_table m;
  std::vector<std::byte> big(5 * page_size);
  const std::uint32_t k = *m.reg_on_demand(1, big.data(), big.size(), all_access);
  const std::uint64_t base = reinterpret_cast<std::uintptr_t>(big.data());
  fault_info f{};
  CHECK(m.check(k, base + 10, 100, rw, &f) == errc::page_fault);
  CHECK(f.key == k);
  CHECK(f.va == base + 10);
  CHECK(f.length == 100);
  m.make_resident(k, base, page_size * 2);
  CHECK(m.check(k, base + 10, 100, rw) == errc{});
  // Residency is per host page (page_size-aligned): every page the range touched, no other.
  const std::uint64_t next_page = ((base + 2 * page_size - 1) / page_size + 1) * page_size;
  CHECK(m.check(k, next_page - 1, 1, rw) == errc{});
  CHECK(m.check(k, next_page, 1, rw) == errc::page_fault);
  CHECK(m.check(k, next_page - 1, 2, rw) == errc::page_fault);
  m.make_resident(k, base, big.size());
  CHECK(m.check(k, base, big.size(), rw) == errc{});
  m.evict(k, base + page_size, 1);
  CHECK(m.check(k, base, big.size(), rw) == errc::page_fault);
  // An indirect key over an on-demand key faults at the inner level.
  const std::uint32_t ki = *m.reg_indirect(1, std::vector<klm_entry>{{k, base + page_size, 8}}, all_access);
  CHECK(m.check(ki, 0, 8, rw, &f) == errc::page_fault);
  CHECK(f.key == k);
  CHECK(f.va == base + page_size);
}
