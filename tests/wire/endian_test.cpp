#include <pushwire/wire/endian.hpp>

#include "../support/test_support.hpp"

using namespace pushwire;

namespace {
constexpr auto bytes = test::hex<"0102030405060708">();
}

static_assert(wire::load_be16(bytes.data()) == 0x0102);
static_assert(wire::load_be24(bytes.data()) == 0x010203);
static_assert(wire::load_be32(bytes.data()) == 0x01020304);
static_assert(wire::load_be64(bytes.data()) == 0x0102030405060708);
static_assert(wire::load_be<5>(bytes.data() + 3) == 0x0405060708);
static_assert([] {
  std::array<std::byte, 8> b{};
  wire::store_be64(b.data(), 0x0102030405060708);
  return b == bytes;
}());
static_assert([] {
  std::array<std::byte, 3> b{};
  wire::store_be24(b.data(), 0xFFABCDEF);  // only the low 24 bits
  return b == test::hex<"abcdef">();
}());

TEST_CASE("endian: runtime loads and stores agree with the constexpr ones", "[wire][endian]") {
  const auto b = test::copy(bytes);
  CHECK(wire::load_be16(b.data()) == 0x0102);
  CHECK(wire::load_be24(b.data()) == 0x010203);
  CHECK(wire::load_be32(b.data()) == 0x01020304u);
  CHECK(wire::load_be64(b.data()) == 0x0102030405060708u);
  CHECK(wire::load_be<5>(b.data() + 3) == 0x0405060708u);
  std::vector<std::byte> out(8);
  wire::store_be64(out.data(), 0x0102030405060708);
  CHECK(out == b);
  wire::store_be24(out.data(), 0xFFABCDEF);
  CHECK(test::copy(std::span(out).first(3)) == test::copy(test::hex<"abcdef">()));
  // Every width, unaligned, against a byte-by-byte reference.
  std::vector<std::byte> buf(16);
  for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<std::byte>(0x11 * i + 3);
  for (std::size_t off = 0; off < 8; ++off) {
    std::uint64_t ref = 0;
    for (std::size_t i = 0; i < 8; ++i) ref = ref << 8 | static_cast<std::uint8_t>(buf[off + i]);
    CHECK(wire::load_be<8>(buf.data() + off) == ref);
    CHECK(wire::load_be<3>(buf.data() + off) == ref >> 40);
  }
}

static_assert(wire::load_le16(bytes.data()) == 0x0201);
static_assert(wire::load_le32(bytes.data()) == 0x04030201);
static_assert(wire::load_le64(bytes.data()) == 0x0807060504030201);
static_assert(wire::load_le<3>(bytes.data() + 5) == 0x080706);
static_assert(wire::load<4>(bytes.data(), std::endian::big) == 0x01020304);
static_assert(wire::load<4>(bytes.data(), std::endian::little) == 0x04030201);
static_assert([] {
  std::array<std::byte, 8> b{};
  wire::store_le64(b.data(), 0x0807060504030201);
  return b == bytes;
}());

TEST_CASE("endian: little-endian and chosen-order loads and stores, constexpr and runtime agree", "[wire][endian]") {
  const auto b = test::copy(bytes);
  CHECK(wire::load_le16(b.data()) == 0x0201);
  CHECK(wire::load_le32(b.data()) == 0x04030201u);
  CHECK(wire::load_le64(b.data()) == 0x0807060504030201u);
  CHECK(wire::load<2>(b.data() + 1, std::endian::big) == 0x0203u);
  CHECK(wire::load<2>(b.data() + 1, std::endian::little) == 0x0302u);
  std::vector<std::byte> out(8);
  wire::store_le32(out.data() + 1, 0xAABBCCDD);
  CHECK(test::copy(std::span(out).subspan(1, 4)) == test::copy(test::hex<"ddccbbaa">()));
  wire::store_le16(out.data(), 0x1234);
  CHECK(test::copy(std::span(out).first(2)) == test::copy(test::hex<"3412">()));
  std::vector<std::byte> buf(16);
  for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<std::byte>(0x11 * i + 3);
  for (std::size_t off = 0; off < 8; ++off) {
    std::uint64_t ref = 0;
    for (std::size_t i = 8; i-- > 0;) ref = ref << 8 | static_cast<std::uint8_t>(buf[off + i]);
    CHECK(wire::load_le<8>(buf.data() + off) == ref);
    CHECK(wire::load_le<3>(buf.data() + off) == (ref & 0xFFFFFF));
    CHECK(wire::load<5>(buf.data() + off, std::endian::little) == (ref & 0xFFFFFFFFFFu));
  }
}
