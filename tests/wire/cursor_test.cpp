#include <pushwire/wire/cursor.hpp>

#include "../support/test_support.hpp"

using namespace pushwire;

static_assert([] {
  constexpr auto b = test::hex<"01 0203 040506 0708090a">();
  wire::reader r{b};
  return r.u8() == 1 && r.u16() == 0x0203 && r.u24() == 0x040506 && r.u32() == 0x0708090a &&
         r.ok() && r.remaining() == 0;
}());

TEST_CASE("reader: reads in order and fails sticky on the first overrun", "[wire][cursor]") {
  const auto b = test::copy(test::hex<"01 0203 0405060708090a0b">());
  wire::reader r{b};
  CHECK(r.u8() == 1);
  CHECK(r.u16() == 0x0203);
  CHECK(r.position() == 3);
  CHECK(r.bytes(2).size() == 2);
  CHECK(r.u64() == 0);  // 6 left: overrun
  CHECK_FALSE(r.ok());
  CHECK(r.status() == wire::errc::truncated);
  CHECK(r.u8() == 0);  // sticky
  CHECK(r.position() == 5);
}

TEST_CASE("writer: writes in order and fails sticky with no_space", "[wire][cursor]") {
  std::vector<std::byte> out(7);
  wire::writer w{out};
  w.u16(0x0102);
  w.u24(0x030405);
  std::byte* later = w.reserve(1);
  REQUIRE(later);
  *later = std::byte{0x06};
  CHECK(w.ok());
  w.u32(1);  // 1 byte left
  CHECK(w.status() == wire::errc::no_space);
  w.u8(9);
  CHECK(w.position() == 6);
  CHECK(test::copy(w.written()) == test::copy(test::hex<"0102 030405 06">()));
  wire::writer z{out};
  z.zeros(3);
  z.bytes(test::copy(test::hex<"aabb">()));
  CHECK(test::copy(z.written()) == test::copy(test::hex<"000000aabb">()));
}
