// Every push-push message: its vector checked at compile time and again at run time; seeded
// random round trips; every truncation; every single-byte corruption.
#include "vectors.hpp"

#include <algorithm>
#include <random>
#include <vector>

#include <pushwire/msg/msg.hpp>

using namespace pushwire;
using vec::decodes_exactly;
using vec::encodes_exactly;

// Compile time: encode == bytes, decode == value, for every message type.
static_assert(encodes_exactly(vec::recv_pool) && decodes_exactly(vec::recv_pool));
static_assert(encodes_exactly(vec::pool_get) && decodes_exactly(vec::pool_get));
static_assert(encodes_exactly(vec::pool_get_implicit) && decodes_exactly(vec::pool_get_implicit));
static_assert(encodes_exactly(vec::pool_update) && decodes_exactly(vec::pool_update));
static_assert(encodes_exactly(vec::flush_request) && decodes_exactly(vec::flush_request));
static_assert(encodes_exactly(vec::flush_reply) && decodes_exactly(vec::flush_reply));
static_assert(encodes_exactly(vec::send_data) && decodes_exactly(vec::send_data));
static_assert(encodes_exactly(vec::rdma_indicate) && decodes_exactly(vec::rdma_indicate));
static_assert(encodes_exactly(vec::cfg_request) && decodes_exactly(vec::cfg_request));
static_assert(encodes_exactly(vec::cfg_reply) && decodes_exactly(vec::cfg_reply));

TEST_CASE("vectors: encode and decode at run time", "[msg][vectors]") {
  vec::for_each_case([](const auto& c) {
    using M = typename std::remove_cvref_t<decltype(c)>::message;
    DYNAMIC_SECTION(c.name) {
      // Runtime copies: the Boost.Endian paths, not the constexpr shifts.
      const std::vector<std::byte> bytes = test::copy(c.bytes);
      auto r = msg::decode<M>(bytes);
      REQUIRE(r.has_value());
      CHECK(*r == c.value);
      std::vector<std::byte> out(msg::encoded_size(c.value));
      REQUIRE(out.size() == bytes.size());
      auto n = msg::encode(c.value, out);
      REQUIRE(n.has_value());
      CHECK(*n == bytes.size());
      CHECK(out == bytes);
      // decode() of any message picks the same type.
      auto any = msg::decode(bytes);
      REQUIRE(any.has_value());
      REQUIRE(std::holds_alternative<M>(*any));
      CHECK(std::get<M>(*any) == c.value);
      CHECK(msg::function_of(*any) == msg::code_of<M>);
    }
  });
}

TEST_CASE("vectors: every truncation is rejected", "[msg][vectors][truncation]") {
  vec::for_each_case([](const auto& c) {
    using M = typename std::remove_cvref_t<decltype(c)>::message;
    DYNAMIC_SECTION(c.name) {
      const std::vector<std::byte> bytes = test::copy(c.bytes);
      for (std::size_t k = 0; k < bytes.size(); ++k) {
        INFO("truncated to " << k << " bytes");
        const std::span<const std::byte> cut(bytes.data(), k);
        auto r = msg::decode<M>(cut);
        auto any = msg::decode(cut);
        if constexpr (std::is_same_v<M, msg::buffer_pool_flush_request>) {
          // No count field (seed figure): a cut on an entry boundary is a shorter valid request.
          if (k >= 16 && (k - 12) % 4 == 0) {
            REQUIRE(r.has_value());
            CHECK(r->pool_refs.size() == (k - 12) / 4);
            for (std::size_t i = 0; i < r->pool_refs.size(); ++i)
              CHECK(r->pool_refs[i] == c.value.pool_refs[i]);
            continue;
          }
        }
        REQUIRE_FALSE(r.has_value());
        REQUIRE_FALSE(any.has_value());
        CHECK(r.code() == any.code());
        if (k < msg::header_size || k < wire::fixed_size<M>) CHECK(r.code() == wire::errc::truncated);
        using E = wire::errc;
        CHECK((r.code() == E::truncated || r.code() == E::count_mismatch ||
               r.code() == E::trailing_bytes || r.code() == E::zero_count));
      }
    }
  });
}

TEST_CASE("vectors: every single-byte corruption decodes cleanly or fails", "[msg][vectors][corruption]") {
  std::size_t accepted = 0, rejected = 0;
  vec::for_each_case([&](const auto& c) {
    DYNAMIC_SECTION(c.name) {
      std::vector<std::byte> bytes = test::copy(c.bytes);
      for (std::size_t pos = 0; pos < bytes.size(); ++pos) {
        const std::byte orig = bytes[pos];
        for (unsigned v = 0; v < 256; ++v) {
          if (static_cast<std::byte>(v) == orig) continue;
          bytes[pos] = static_cast<std::byte>(v);
          auto r = msg::decode(bytes);
          if (!r) {
            ++rejected;
            REQUIRE(r.code() != wire::errc{});
            continue;
          }
          ++accepted;
          // Anything accepted is canonical: it re-encodes to the very same bytes.
          std::vector<std::byte> again(bytes.size() + 4);
          auto n = msg::encode(*r, again);
          REQUIRE(n.has_value());
          again.resize(*n);
          INFO("byte " << pos << " = " << v);
          REQUIRE(again == bytes);
        }
        bytes[pos] = orig;
      }
    }
  });
  CHECK(accepted > 0);
  CHECK(rejected > 0);
}

// ---------------------------------------------------------------------------------------------
// Seeded random round trips: >= 1000 per message type.

namespace {

struct gen {
  std::mt19937_64 rng;
  std::vector<msg::pool_descriptor> pools;
  std::vector<msg::pool_update_entry> updates;
  std::vector<msg::indication> inds;
  std::vector<std::uint32_t> refs;
  std::vector<std::byte> data;

  std::uint64_t u64() { return rng(); }
  std::uint32_t u32() { return static_cast<std::uint32_t>(rng()); }
  std::uint16_t u16() { return static_cast<std::uint16_t>(rng()); }
  // Mostly small counts, sometimes the largest that fits the default 4096-byte frame.
  std::size_t count(std::size_t max) {
    const auto r = rng() % 8;
    if (r == 0) return max;
    if (r < 4) return 1;
    return 1 + rng() % max;
  }

  template <class M>
  M make() {
    const std::uint64_t txn = u64();
    if constexpr (std::is_same_v<M, msg::buffer_recv_pool>) {
      pools.resize(count((4096 - 16) / 32));
      for (auto& p : pools)
        p = {u32(), (u32() & 0x7FFFFFFF) | 1, u32() | 1, u32(), u64(), u64(), (u32() & 1) != 0};
      return {.header = {.transaction_context = txn}, .pools = pools};
    } else if constexpr (std::is_same_v<M, msg::buffer_recv_pool_get>) {
      return {.header = {.transaction_context = txn}, .element_size = u32(), .element_count = u32() & 0x7FFFFFFF, .implicit = (u32() & 1) != 0};
    } else if constexpr (std::is_same_v<M, msg::buffer_recv_pool_update>) {
      updates.resize(count((4096 - 16) / 12));
      for (auto& e : updates) e = {u32(), u32(), u32()};
      return {.header = {.transaction_context = txn}, .entries = updates};
    } else if constexpr (std::is_same_v<M, msg::buffer_pool_flush_request>) {
      refs.resize(count((4096 - 12) / 4));
      for (auto& r : refs) r = u32();
      return {.header = {.transaction_context = txn}, .pool_refs = refs};
    } else if constexpr (std::is_same_v<M, msg::buffer_pool_flush_reply>) {
      return {.header = {.transaction_context = txn}};
    } else if constexpr (std::is_same_v<M, msg::send_data>) {
      data.resize(count(4096 - 16) - (rng() % 2));  // includes 0-byte SendData
      for (auto& b : data) b = static_cast<std::byte>(rng());
      return {.header = {.transaction_context = txn}, .data = data};
    } else if constexpr (std::is_same_v<M, msg::buffer_rdma_indicate>) {
      inds.resize(count((4096 - 16) / 12));
      for (auto& e : inds) e = {u32(), u32(), u32()};
      return {.header = {.transaction_context = txn}, .entries = inds};
    } else {
      data.resize(rng() % 200);
      for (auto& b : data) b = static_cast<std::byte>(rng());
      if constexpr (std::is_same_v<M, msg::cfg_util_request>)
        return {.header = {.transaction_context = txn},
                .request_code = static_cast<msg::cfg::request_code>(u16()),
                .data = data};
      else
        return {.header = {.transaction_context = txn},
                .request_code = static_cast<msg::cfg::request_code>(u16()),
                .status = static_cast<msg::cfg::status>(u16()),
                .data = data};
    }
  }
};

}  // namespace

TEST_CASE("random round trips, seeded, 1000+ per message type", "[msg][roundtrip]") {
  constexpr std::uint64_t seed = 0x70757368'77697265;  // "pushwire"
  constexpr int cases = 1200;
  gen g{std::mt19937_64{seed}, {}, {}, {}, {}, {}};
  std::vector<std::byte> buf(4096), again(4096);
  msg::for_each_message_type([&]<class M>(std::type_identity<M>) {
    DYNAMIC_SECTION(msg::name(msg::code_of<M>) << " seed " << seed) {
      int done = 0;
      for (int i = 0; i < cases; ++i) {
        const M m = g.make<M>();
        auto n = msg::encode(m, buf);
        REQUIRE(n.has_value());
        REQUIRE(*n == msg::encoded_size(m));
        REQUIRE(*n <= 4096);
        const std::span<const std::byte> frame(buf.data(), *n);
        auto r = msg::decode<M>(frame);
        REQUIRE(r.has_value());
        REQUIRE(*r == m);
        auto n2 = msg::encode(*r, again);  // a decoded (wire-backed) value re-encodes identically
        REQUIRE(n2.has_value());
        REQUIRE(std::equal(frame.begin(), frame.end(), again.begin(), again.begin() + *n2));
        ++done;
      }
      CHECK(done == cases);
    }
  });
}
