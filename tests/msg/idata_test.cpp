// idata: the seed's (7, 5, 256) example and every boundary, at compile time and at run time.
#include <random>

#include <pushwire/msg/idata.hpp>

#include "../support/test_support.hpp"

using namespace pushwire;
using msg::idata;
using msg::indication;
using wire::errc;

namespace {
constexpr bool carried_by_idata(const indication& i) {
  return std::holds_alternative<idata>(msg::choose_carrier(i));
}
}  // namespace

// The seed's example: pool 7, element 5, 256 bytes.
static_assert(msg::to_imm(*msg::make_idata({7, 5, 256})) == 0x07050100);
static_assert(msg::from_imm(0x07050100) == idata{.pool_ref = 7, .element_index = 5, .byte_count = 256});
static_assert(msg::from_imm(0x07050100).bytes() == 256);
// 65536 bytes travel as 0; 0 reads back as 65536.
static_assert(msg::to_imm(*msg::make_idata({1, 2, 65536})) == 0x01020000);
static_assert(msg::from_imm(0x01020000).bytes() == 65536);
// Boundaries.
static_assert(carried_by_idata({255, 255, 65536}) && !carried_by_idata({256, 0, 1}) &&
              !carried_by_idata({0, 256, 1}) && !carried_by_idata({0, 0, 65537}) &&
              !carried_by_idata({0, 0, 0}) && carried_by_idata({0, 0, 1}));
static_assert(msg::make_idata({256, 0, 1}).code() == errc::too_large);
static_assert(msg::make_idata({0, 0, 0}).code() == errc::invalid_field);

TEST_CASE("idata: the seed's example", "[msg][idata]") {
  volatile std::uint32_t pool = 7, elem = 5, bytes = 256;  // runtime values
  auto d = msg::make_idata({pool, elem, bytes});
  REQUIRE(d.has_value());
  CHECK(msg::to_imm(*d) == 0x07050100u);
  CHECK(msg::to_indication(msg::from_imm(0x07050100u)) == indication{7, 5, 256});
  CHECK(wire::to_json(*d) == R"({"pool_ref":7,"element_index":5,"byte_count":256})");
}

TEST_CASE("idata: boundaries", "[msg][idata]") {
  struct row {
    indication in;
    bool fits;
    errc why;
    std::uint32_t imm;
  };
  const row rows[] = {
      {{255, 0, 1}, true, {}, 0xFF000001},
      {{256, 0, 1}, false, errc::too_large, 0},
      {{0, 255, 1}, true, {}, 0x00FF0001},
      {{0, 256, 1}, false, errc::too_large, 0},
      {{0, 0, 65535}, true, {}, 0x0000FFFF},
      {{0, 0, 65536}, true, {}, 0x00000000},
      {{0, 0, 65537}, false, errc::too_large, 0},
      {{0, 0, 1}, true, {}, 0x00000001},
      {{0, 0, 0}, false, errc::invalid_field, 0},
      {{0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF}, false, errc::too_large, 0},
  };
  for (const row& r : rows) {
    INFO(wire::to_json(r.in));
    CHECK(msg::fits_idata(r.in) == r.fits);
    auto d = msg::make_idata(r.in);
    CHECK(d.has_value() == r.fits);
    auto carrier = msg::choose_carrier(r.in);
    if (r.fits) {
      REQUIRE(std::holds_alternative<idata>(carrier));
      CHECK(msg::to_imm(std::get<idata>(carrier)) == r.imm);
      CHECK(msg::to_indication(msg::from_imm(r.imm)) == r.in);
    } else {
      CHECK(d.code() == r.why);
      REQUIRE(std::holds_alternative<indication>(carrier));
      CHECK(std::get<indication>(carrier) == r.in);  // goes in a BufferRDMAIndicate as is
    }
  }
}

TEST_CASE("idata: every immediate decodes and re-encodes (sampled)", "[msg][idata]") {
  std::mt19937 rng(20261122);
  for (int i = 0; i < 100000; ++i) {
    const std::uint32_t imm = static_cast<std::uint32_t>(rng());
    const idata d = msg::from_imm(imm);
    REQUIRE(msg::to_imm(d) == imm);
    const indication in = msg::to_indication(d);
    REQUIRE(msg::fits_idata(in));
    REQUIRE(msg::to_imm(*msg::make_idata(in)) == imm);
  }
}
