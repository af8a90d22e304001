// The describe-once codec on structs that use every member kind: sequential and located fields,
// 24-bit fields, flags, enumerations, octets, reserved and constant fields, counted and trailing
// arrays, nested structs.
#include <pushwire/wire/wire.hpp>

#include "../support/test_support.hpp"

using namespace pushwire;
using wire::errc;

namespace sample {

enum class kind : std::uint8_t { alpha = 1, beta = 2 };
inline constexpr wire::named_value kind_names[] = {{1, "alpha"}, {2, "beta"}};
constexpr std::span<const wire::named_value> wire_enum_names(kind) { return kind_names; }

// A BTH-like header: a byte, four located fields in byte 1, a 16-bit field, a reserved byte,
// a 24-bit field, a flag and 7 bits in byte 8, a located 24-bit field (a 3-byte container at
// byte 9), a 12-bit and a 4-bit field sharing a 2-byte container, and a constant.
struct head {
  PUSHWIRE_STRUCT(head,
      (std::uint8_t, opcode),
      (wire::flag<1, 7>, se),
      (wire::flag<1, 6>, m),
      (wire::bits<1, 5, 4>, padcnt),
      (wire::bits<1, 3, 0, kind>, tver),
      (std::uint16_t, p_key),
      (wire::reserved<std::uint8_t>, resv),
      (wire::u24, destqp),
      (wire::flag<8, 7>, ack),
      (wire::bits<8, 6, 0>, resv7),
      (wire::bits<9, 23, 0>, psn),
      (wire::bits<12, 15, 4>, twelve),
      (wire::bits<13, 3, 0>, four),
      (wire::constant<std::uint16_t, 0xCAFE>, magic));
};
static_assert(wire::fixed_size<head> == 16);

struct elem {
  PUSHWIRE_STRUCT(elem, (std::uint16_t, a), (std::array<std::uint8_t, 3>, mac3));
  static constexpr wire::error wire_check(const elem& e) {
    return e.a == 0xFFFF ? wire::field_error<elem>(errc::invalid_field, "a") : wire::error{};
  }
};

struct with_array {
  PUSHWIRE_STRUCT(with_array,
      (head, h),
      (wire::counted<std::uint16_t, elem, "n", 1>, elems));
};

struct with_rest {
  PUSHWIRE_STRUCT(with_rest, (std::uint8_t, tag), (wire::rest<wire::u24>, items));
};

struct with_bytes {
  PUSHWIRE_STRUCT(with_bytes, (wire::counted<std::uint8_t, std::byte, "len">, payload));
};

inline constexpr head h0{.opcode = 0x0A, .se = true, .m = false, .padcnt = 3, .tver = kind::beta,
                         .p_key = 0xFFFF, .destqp = 0x123456, .ack = true, .resv7 = 0, .psn = 0xABCDEF,
                         .twelve = 0xABC, .four = 0xD};
inline constexpr auto h0_bytes = test::hex<"0a b2 ffff 00 123456 80 abcdef abcd cafe">();
inline constexpr std::array<elem, 2> es{{{1, {1, 2, 3}}, {2, {4, 5, 6}}}};
inline constexpr with_array wa{.h = h0, .elems = es};
inline constexpr auto wa_bytes =
    test::hex<"0a b2 ffff 00 123456 80 abcdef abcd cafe 0002 0001 010203 0002 040506">();

}  // namespace sample

using namespace sample;

// Compile time: exact bytes both ways.
static_assert(wire::to_bytes(h0) == h0_bytes);
static_assert(*wire::decode<head>(h0_bytes) == h0);
static_assert([] {
  std::array<std::byte, 28> out{};
  auto n = wire::encode(wa, out);
  return n && *n == 28 && out == wa_bytes;
}());
static_assert(*wire::decode<with_array>(wa_bytes) == wa);
static_assert(wire::layout<with_array>::offsets[1] == 16 && wire::fixed_size<with_array> == 18);
static_assert(wire::wire_size(wa) == 28);

// encode() never reads its output: bit fields merge into containers it zeroed first. In a
// constant expression, reading a byte of an uninitialised array is an error, so this compiles
// only if no byte is read before it is written.
constexpr bool encodes_into_uninitialised() {
  std::array<std::byte, 16> b;  // (uninitialised on purpose)
  const head h{.opcode = 4, .se = true, .padcnt = 2, .tver = kind::beta, .destqp = 0x123456, .ack = true, .psn = 0xABCDEF, .twelve = 0xFED, .four = 3};
  if (wire::encode(h, b).value() != 16) return false;
  return b[1] == std::byte{0x80 | 0x20 | 0x02} && b[8] == std::byte{0x80} && b[12] == std::byte{0xFE} && b[13] == std::byte{0xD3};
}
static_assert(encodes_into_uninitialised());

TEST_CASE("codec: exact bytes at run time", "[wire][codec]") {
  const auto hb = test::copy(h0_bytes);
  auto d = wire::decode<head>(hb);
  REQUIRE(d.has_value());
  CHECK(*d == h0);
  CHECK(d->tver.value == kind::beta);
  CHECK(d->psn == 0xABCDEFu);
  std::vector<std::byte> out(16);
  REQUIRE(wire::encode(h0, out).value() == 16);
  CHECK(out == hb);
  const auto wb = test::copy(wa_bytes);
  auto w = wire::decode<with_array>(wb);
  REQUIRE(w.has_value());
  CHECK(*w == wa);
  CHECK(w->elems[1].mac3 == std::array<std::uint8_t, 3>{4, 5, 6});
}

TEST_CASE("codec: located fields leave their neighbours alone", "[wire][codec]") {
  // Set each located field alone over a buffer of ones: only its bits change.
  std::vector<std::byte> out(16, std::byte{0xFF});
  head h{};
  h.padcnt = 2;
  REQUIRE(wire::encode(h, out).has_value());
  CHECK(out[1] == std::byte{0x20});  // se=0 m=0 padcnt=2 tver=0
  CHECK(out[8] == std::byte{0x00});
  h = {};
  h.ack = true;
  h.psn = 1;
  h.four = 0xF;
  REQUIRE(wire::encode(h, out).has_value());
  CHECK(test::copy(std::span(out).subspan(8, 6)) == test::copy(test::hex<"80 000001 000f">()));
  h.four = 0;
  h.twelve = 0xFFF;
  REQUIRE(wire::encode(h, out).has_value());
  CHECK(test::copy(std::span(out).subspan(12, 2)) == test::copy(test::hex<"fff0">()));
}

TEST_CASE("codec: values wider than their field do not encode", "[wire][codec][errors]") {
  std::vector<std::byte> out(16);
  head h = h0;
  h.padcnt = 4;  // 2 bits
  auto e = wire::encode(h, out);
  CHECK(e.code() == errc::invalid_field);
  CHECK(e.error().field == "padcnt");
  CHECK(e.error().offset == 1);
  h = h0;
  h.destqp = 0x1000000;  // 24 bits
  CHECK(wire::encode(h, out).error() == wire::error{errc::invalid_field, 5, "destqp"});
  h = h0;
  h.psn = 0x1000000;
  CHECK(wire::encode(h, out).error() == wire::error{errc::invalid_field, 9, "psn"});
  h = h0;
  h.twelve = 0x1000;
  CHECK(wire::encode(h, out).error() == wire::error{errc::invalid_field, 12, "twelve"});
  h = h0;
  h.tver = static_cast<kind>(16);
  CHECK(wire::encode(h, out).code() == errc::invalid_field);
}

TEST_CASE("codec: reserved, constant, counts and checks on decode", "[wire][codec][errors]") {
  auto b = test::copy(wa_bytes);
  SECTION("reserved") {
    b[4] = std::byte{1};
    CHECK(wire::decode<with_array>(b).error() == wire::error{errc::reserved_nonzero, 4, "resv"});
  }
  SECTION("constant") {
    b[15] = std::byte{0};
    CHECK(wire::decode<with_array>(b).error() == wire::error{errc::invalid_field, 14, "magic"});
  }
  SECTION("zero count") {
    b[17] = std::byte{0};
    CHECK(wire::decode<with_array>(b).error() == wire::error{errc::zero_count, 16, "n"});
  }
  SECTION("count says 3, frame holds 2") {
    b[17] = std::byte{3};
    CHECK(wire::decode<with_array>(b).error() == wire::error{errc::count_mismatch, 16, "n"});
  }
  SECTION("frame ends inside an entry") {
    b.pop_back();
    CHECK(wire::decode<with_array>(b).error() == wire::error{errc::truncated, 27, "elems"});
  }
  SECTION("frame holds a partial extra entry") {
    b.push_back(std::byte{0});
    CHECK(wire::decode<with_array>(b).error() == wire::error{errc::trailing_bytes, 28, "elems"});
  }
  SECTION("an entry's own check") {
    b[23] = b[24] = std::byte{0xFF};  // second elem.a = 0xFFFF
    CHECK(wire::decode<with_array>(b).error() == wire::error{errc::invalid_field, 23, "a"});
  }
  SECTION("fixed-size struct with trailing bytes") {
    auto hb = test::copy(h0_bytes);
    hb.push_back(std::byte{0});
    CHECK(wire::decode<head>(hb).error() == wire::error{errc::trailing_bytes, 16, ""});
    auto p = wire::decode_prefix<head>(hb);  // a prefix decode ignores what follows
    REQUIRE(p.has_value());
    CHECK(*p == h0);
    CHECK(wire::decode_prefix<head>(std::span(hb).first(15)).code() == errc::truncated);
  }
}

TEST_CASE("codec: trailing arrays and byte strings", "[wire][codec]") {
  const std::array<wire::u24, 3> items{1, 0xFFFFFF, 0x10203};
  const with_rest r{.tag = 9, .items = items};
  std::vector<std::byte> out(16);
  auto n = wire::encode(r, out);
  REQUIRE(n.value() == 10);
  out.resize(10);
  CHECK(out == test::copy(test::hex<"09 000001 ffffff 010203">()));
  auto d = wire::decode<with_rest>(out);
  REQUIRE(d.has_value());
  CHECK(*d == r);
  out.pop_back();
  CHECK(wire::decode<with_rest>(out).error() == wire::error{errc::trailing_bytes, 7, "items"});
  const auto tag_only = test::copy(test::hex<"09">());
  CHECK(wire::decode<with_rest>(tag_only)->items.empty());

  std::vector<std::byte> big(256);
  std::array<std::byte, 300> buf{};
  CHECK(wire::encode(with_bytes{.payload = big}, buf).error() == wire::error{errc::too_large, 0, "len"});
  big.resize(255);
  CHECK(wire::encode(with_bytes{.payload = big}, buf).value() == 256);
  CHECK(wire::decode<with_bytes>(std::span(buf).first(256))->payload.size() == 255);
}

TEST_CASE("equality compares every field, and views by content", "[wire][codec]") {
  head a = h0, b = h0;
  CHECK(a == b);
  b.se = false;
  CHECK_FALSE(a == b);
  const auto x = test::copy(test::hex<"0102">());
  const auto y = test::copy(test::hex<"0102">());
  CHECK(with_bytes{.payload = x} == with_bytes{.payload = y});  // different storage, same bytes
  CHECK_FALSE(with_bytes{.payload = x} == with_bytes{.payload = std::span(y).first(1)});
}

TEST_CASE("field table: offsets, widths, masks, kinds", "[wire][table]") {
  const auto& t = wire::fields<with_array>;
  REQUIRE(t.size() == 16);
  const auto* padcnt = wire::find_field<with_array>("padcnt");
  REQUIRE(padcnt);
  CHECK(padcnt->offset == 1);
  CHECK(padcnt->bits == 2);
  CHECK(padcnt->mask() == 0x30);
  CHECK(padcnt->located);
  const auto* psn = wire::find_field<with_array>("psn");
  CHECK(psn->offset == 9);
  CHECK(psn->size == 3);
  CHECK(psn->mask() == 0x00FFFFFF);
  const auto* ack = wire::find_field<with_array>("ack");
  CHECK(ack->kind == wire::field_kind::flag);
  CHECK(ack->mask() == 0x80);
  const auto* twelve = wire::find_field<with_array>("twelve");
  CHECK(twelve->offset == 12);
  CHECK(twelve->size == 2);
  CHECK(twelve->mask() == 0xFFF0);
  const auto* tver = wire::find_field<with_array>("tver");
  CHECK(tver->kind == wire::field_kind::enumeration);
  CHECK(tver->names.size() == 2);
  const auto* magic = wire::find_field<with_array>("magic");
  CHECK(magic->kind == wire::field_kind::constant);
  CHECK(magic->value == 0xCAFE);
  const auto* n = wire::find_field<with_array>("n");
  CHECK(n->kind == wire::field_kind::count);
  CHECK(n->link == "elems");
  CHECK(n->value == 1);
  const auto& arr = t.back();
  CHECK(arr.name == "elems");
  CHECK(arr.offset == 18);
  CHECK(arr.size == 5);
  REQUIRE(arr.element.size() == 2);
  CHECK(arr.element[1].name == "mac3");
  CHECK(arr.element[1].kind == wire::field_kind::octets);
  CHECK(arr.element[1].offset == 2);
}

TEST_CASE("printing: text and JSON derive from the description", "[wire][print]") {
  CHECK(wire::to_json(wa) ==
        R"({"opcode":10,"se":1,"m":0,"padcnt":3,"tver":2,"p_key":65535,"resv":0,"destqp":1193046,"ack":1,"resv7":0,"psn":11259375,"twelve":2748,"four":13,"magic":51966,"n":2,"elems":[{"a":1,"mac3":"01:02:03"},{"a":2,"mac3":"04:05:06"}]})");
  const std::string t = wire::to_text(wa);
  CHECK(t.find("tver: beta (0x02)\n") != std::string::npos);
  CHECK(t.find("elems: 2 entries\n  [0]\n    a: 1\n    mac3: 01:02:03\n") != std::string::npos);
  const std::array<wire::u24, 2> items{1, 2};
  CHECK(wire::to_text(with_rest{.tag = 1, .items = items}) == "tag: 1\nitems: [1, 2]\n");
}
