// hex, result, errc and its std::error_code category.
#include <pushwire/wire/errc.hpp>
#include <pushwire/wire/ethernet.hpp>
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

// A gratuitous ARP, against scapy's bytes for
// ARP(op=1, hwsrc='02:03:c6:12:00:0b', psrc='198.18.0.11', hwdst='00:00:00:00:00:00', pdst='198.18.0.11').
namespace {
constexpr wire::mac_address garp_mac{0x02, 0x03, 0xc6, 0x12, 0x00, 0x0b};
constexpr wire::ip_address<4> garp_ip{{198, 18, 0, 11}};
constexpr auto garp_bytes = test::hex<"0001 0800 06 04 0001 0203c612000b c612000b 000000000000 c612000b">();
}  // namespace
static_assert(wire::to_bytes(wire::gratuitous_arp(garp_mac, garp_ip)) == garp_bytes);
static_assert(wire::decode<wire::arp_packet>(garp_bytes)->src_proto_ipv4 == garp_ip);

TEST_CASE("arp: a gratuitous ARP is scapy's and decodes back, and a short one does not", "[wire][arp]") {
  const auto a = wire::gratuitous_arp(garp_mac, garp_ip);
  CHECK(wire::to_bytes(a) == garp_bytes);
  const auto d = wire::decode<wire::arp_packet>(garp_bytes);
  REQUIRE(d.has_value());
  CHECK(*d == a);
  CHECK(d->opcode == 1);
  CHECK(d->dst_proto_ipv4 == garp_ip);
  for (std::size_t n = 0; n < garp_bytes.size(); ++n) CHECK(!wire::decode<wire::arp_packet>(std::span(garp_bytes).first(n)));
}
