// hex, result, errc and its std::error_code category.
#include <pushwire/wire/errc.hpp>
#include <pushwire/wire/hex.hpp>
#include <pushwire/wire/result.hpp>

#include "../support/test_support.hpp"

using namespace pushwire;
using wire::errc;

static_assert(wire::to_string(errc::count_mismatch) == "count_mismatch");
static_assert(wire::to_string(errc{}) == "ok");
static_assert(wire::to_string(static_cast<errc>(200)) == "unknown");
static_assert(wire::result<int>{5}.value() == 5 && !wire::result<int>{errc::truncated}.has_value());

TEST_CASE("hex: parse and print", "[wire][hex]") {
  CHECK(wire::to_hex(test::copy(test::hex<"00ff10">())) == "00ff10");
  CHECK(*wire::parse_hex("0x01:02 03-0A_bc\n") == test::copy(test::hex<"0102030abc">()));
  CHECK_FALSE(wire::parse_hex("012").has_value());
  CHECK_FALSE(wire::parse_hex("zz").has_value());
  CHECK(wire::parse_hex("")->empty());
  CHECK(wire::hexdump(test::copy(test::hex<"41 42 00">()), 2) ==
        "  0000  41 42 00                                         |AB.|\n");
}

TEST_CASE("result: value or error, never both", "[wire][result]") {
  wire::result<int> ok{42};
  CHECK(ok.has_value());
  CHECK(*ok == 42);
  CHECK(ok.code() == errc{});
  wire::result<int> bad{wire::error{errc::zero_count, 12, "pool_count"}};
  CHECK_FALSE(bad);
  CHECK(bad.value_or(7) == 7);
  CHECK(bad.error().offset == 12);
  CHECK(bad.error().field == "pool_count");
}

TEST_CASE("errc: names, table and std::error_code", "[wire][errc]") {
  for (errc e : wire::all_errc) {
    const auto& info = wire::errc_table[static_cast<std::size_t>(e) - 1];
    CHECK(wire::to_string(e) == info.name);
    CHECK_FALSE(info.meaning.empty());
    const std::error_code ec = e;
    CHECK(ec.message() == info.name);
    CHECK(static_cast<bool>(ec));
  }
}
