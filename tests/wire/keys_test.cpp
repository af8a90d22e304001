// Keys and text values of described headers (wire/keys.hpp): addresses as text, numbers, widths,
// names, renamed members, and the errors.
#include <pushwire/wire/ethernet.hpp>
#include <pushwire/wire/keys.hpp>
#include <pushwire/wire/print.hpp>

#include "../support/test_support.hpp"

using namespace pushwire;
using wire::key_errc;

namespace {

enum class colour : std::uint8_t { red = 1, green = 2 };
constexpr wire::named_value colour_names[] = {{colour::red, "Red"}, {colour::green, "Green"}};
constexpr std::span<const wire::named_value> wire_enum_names(colour) { return colour_names; }

struct inner {
  PUSHWIRE_STRUCT(inner, (std::uint16_t, lo), (std::uint16_t, hi));
};

struct sample {
  static constexpr std::string_view wireshark = "t";
  static constexpr wire::key_name wireshark_keys[] = {{"flags_x", "flags.x"}};
  PUSHWIRE_STRUCT(sample,
      (wire::constant<wire::bits<0, 7, 4>, 3>, version),
      (wire::bits<0, 3, 2, colour>, hue),
      (wire::flag<0, 1>, flags_x),
      (wire::reserved<wire::flag<0, 0>>, resv),
      (wire::u24, n24),
      (std::uint64_t, big),
      (wire::mac_address, mac),
      (wire::ipv4_address, v4),
      (wire::ipv6_address, v6),
      (inner, pair));
};

struct valued {
  static constexpr std::string_view wireshark = "v.imm";
  PUSHWIRE_STRUCT(valued, (std::uint32_t, value));
};

}  // namespace

TEST_CASE("keys: IPv4 and IPv6 text", "[wire][keys]") {
  CHECK(wire::address_text(wire::ipv4_address{10, 0, 0, 1}) == "10.0.0.1");
  CHECK(*wire::parse_ipv4("192.168.0.255") == wire::ipv4_address{192, 168, 0, 255});
  for (const char* bad : {"", "10.0.0", "10.0.0.256", "10.0.0.1.2", "a.b.c.d", "1..2.3", "10.0.0.1 ", "-1.0.0.0", "1000.0.0.1"}) {
    INFO(bad);
    CHECK_FALSE(wire::parse_ipv4(bad).has_value());
  }
  // RFC 5952 section 4: no leading zeros, the longest run of zero groups (the first of equals,
  // never a single group) as "::", lowercase.
  struct v6case {
    const char* in;
    const char* out;
  };
  for (const v6case c : {v6case{"2001:0DB8:0000:0000:0000:0000:0002:0001", "2001:db8::2:1"},
                         {"2001:db8:0:0:1:0:0:1", "2001:db8::1:0:0:1"},
                         {"2001:db8:0:1:1:1:1:1", "2001:db8:0:1:1:1:1:1"},
                         {"2001:0:0:1:0:0:0:1", "2001:0:0:1::1"},
                         {"::", "::"},
                         {"::1", "::1"},
                         {"fe80::", "fe80::"},
                         {"fd00::1", "fd00::1"},
                         {"::ffff:10.0.0.1", "::ffff:a00:1"},
                         {"1:2:3:4:5:6:7::", "1:2:3:4:5:6:7:0"}}) {
    INFO(c.in);
    const auto a = wire::parse_ipv6(c.in);
    REQUIRE(a.has_value());
    CHECK(wire::address_text(*a) == c.out);
    CHECK(wire::parse_ipv6(c.out) == a);
  }
  CHECK(*wire::parse_ipv6("fd00::2") == wire::ipv6_address{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2});
  for (const char* bad : {"", ":", ":::", "1::2::3", "12345::", "1:2:3:4:5:6:7:8:9", "1:2:3:4:5:6:7", "1:", ":1", "::1:",
                          ":::1", "g::", "1.2.3.4", "1::2:3:4:5:6:7:8", "::10.0.0.256", "1:2:3:4:5:6:7:1.2.3.4"}) {
    INFO(bad);
    CHECK_FALSE(wire::parse_ipv6(bad).has_value());
  }
}

TEST_CASE("keys: each member's key, value forms and errors", "[wire][keys]") {
  CHECK(wire::field_key<sample>("n24") == "t.n24");
  CHECK(wire::field_key<sample>("flags_x") == "t.flags.x");
  CHECK(wire::field_key<valued>("value") == "v.imm");
  sample s{};
  std::string_view member;
  auto ok = [&](std::string_view k, std::string_view v) {
    INFO(k << "=" << v);
    const auto e = wire::set_by_key(s, k, v, &member);
    CHECK(e.message.empty());
    CHECK_FALSE(e);
  };
  ok("t.n24", "0xFFFFFF");
  CHECK(s.n24 == 0xFFFFFF);
  CHECK(member == "n24");
  ok("t.big", "18446744073709551615");
  CHECK(s.big == ~std::uint64_t{0});
  ok("t.hue", "Green");
  CHECK(s.hue == colour::green);
  ok("t.hue", "1");
  CHECK(s.hue == colour::red);
  ok("t.flags.x", "1");
  CHECK(s.flags_x);
  ok("t.version", "3");
  ok("t.resv", "0");
  ok("t.mac", "02-00-00-00-00-0a");
  CHECK(s.mac == wire::mac_address{2, 0, 0, 0, 0, 10});
  ok("t.v4", "10.1.2.3");
  CHECK(s.v4 == wire::ipv4_address{10, 1, 2, 3});
  ok("t.v6", "fd00::7");
  CHECK(s.v6[15] == 7);
  ok("t.lo", "513");  // a nested struct's members, flattened
  CHECK(s.pair.lo == 513);
  const sample before = s;

  struct bad {
    const char* key;
    const char* value;
    key_errc code;
    const char* message;
  };
  for (const bad& b : {
           bad{"t.nope", "1", key_errc::unknown_key, "unknown key t.nope"},
           bad{"t.flags_x", "1", key_errc::unknown_key, "unknown key t.flags_x"},
           bad{"t", "1", key_errc::unknown_key, "unknown key t"},
           bad{"t.n24", "0x1000000", key_errc::too_wide, "t.n24=0x1000000: wider than the field's 24 bits (at most 16777215)"},
           bad{"t.flags.x", "2", key_errc::too_wide, "t.flags.x=2: wider than the field's 1 bit (at most 1)"},
           bad{"t.big", "18446744073709551616", key_errc::too_wide,
               "t.big=18446744073709551616: wider than the field's 64 bits (at most 18446744073709551615)"},
           bad{"t.n24", "x1", key_errc::malformed, "t.n24=x1: not a number (decimal or 0x hex)"},
           bad{"t.n24", "-1", key_errc::malformed, "t.n24=-1: not a number (decimal or 0x hex)"},
           bad{"t.n24", "0x", key_errc::malformed, "t.n24=0x: not a number (decimal or 0x hex)"},
           bad{"t.n24", "", key_errc::malformed, "t.n24=: not a number (decimal or 0x hex)"},
           bad{"t.n24", "1 ", key_errc::malformed, "t.n24=1 : not a number (decimal or 0x hex)"},
           bad{"t.hue", "Blue", key_errc::malformed, "t.hue=Blue: not a number (decimal or 0x hex), nor a value name"},
           bad{"t.hue", "4", key_errc::too_wide, "t.hue=4: wider than the field's 2 bits (at most 3)"},
           bad{"t.version", "2", key_errc::invalid, "t.version=2: a constant field, always 3"},
           bad{"t.resv", "1", key_errc::invalid, "t.resv=1: a reserved field, always 0"},
           bad{"t.mac", "02:00:00", key_errc::malformed, "t.mac=02:00:00: not 6 octets in hex (as 02:00:00:00:00:01)"},
           bad{"t.v4", "10.0.0.999", key_errc::malformed, "t.v4=10.0.0.999: not an IPv4 address (as 10.0.0.1)"},
           bad{"t.v6", "fd00:::1", key_errc::malformed, "t.v6=fd00:::1: not an IPv6 address (as fd00::1)"},
       }) {
    INFO(b.key << "=" << b.value);
    const auto e = wire::set_by_key(s, b.key, b.value);
    CHECK(e.code == b.code);
    CHECK(e.message == b.message);
    CHECK(s == before);  // unchanged
  }
  valued v{};
  CHECK_FALSE(wire::set_by_key(v, "v.imm", "0x07050100"));
  CHECK(v == valued{0x07050100});
  CHECK(wire::set_by_key(v, "v.imm.value", "1").code == key_errc::unknown_key);
}

TEST_CASE("keys: write_json_header's keys and values read back", "[wire][keys]") {
  sample s{};
  s.hue = colour::green;
  s.flags_x = true;
  s.n24 = 0xABCDEF;
  s.big = 0x0123456789ABCDEF;
  s.mac = {2, 0, 0, 0, 0, 1};
  s.v4 = {10, 0, 0, 1};
  s.v6 = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  s.pair = {.lo = 1, .hi = 2};
  std::string j;
  wire::json_writer w{j};
  w.begin_object();
  wire::write_json_header(w, s);
  w.end_object();
  CHECK(j == R"({"t.version":3,"t.hue":2,"t.flags.x":1,"t.resv":0,"t.n24":11259375,"t.big":81985529216486895,)"
             R"("t.mac":"02:00:00:00:00:01","t.v4":"10.0.0.1","t.v6":"fd00::1","t.lo":1,"t.hi":2})");
  // Each "key":value pair, set into a zero sample, gives s again.
  sample back{};
  std::string_view rest = std::string_view{j}.substr(1, j.size() - 2);
  while (!rest.empty()) {
    const std::size_t colon = rest.find(':'), comma = rest.find(",\"");
    const std::string_view k = rest.substr(1, colon - 2);
    std::string_view v = rest.substr(colon + 1, (comma == std::string_view::npos ? rest.size() : comma) - colon - 1);
    if (v.starts_with('"')) v = v.substr(1, v.size() - 2);
    INFO(k << "=" << v);
    CHECK_FALSE(wire::set_by_key(back, k, v));
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
  }
  CHECK(back == s);
}
