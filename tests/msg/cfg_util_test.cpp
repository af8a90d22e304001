// CfgUtil: typed request and reply data for every standard request code.
#include <pushwire/msg/msg.hpp>

#include "vectors.hpp"

using namespace pushwire;
using namespace pushwire::msg;
using cfg::request_code;
using wire::errc;

namespace {

template <request_code C>
void request_round_trip(const cfg::request_t<C>& d) {
  std::array<std::byte, 128> buf{};
  auto n = cfg::encode_request<C>(77, d, buf);
  REQUIRE(n.has_value());
  CHECK(*n == 20 + wire::fixed_size<cfg::request_t<C>>);
  auto m = msg::decode<cfg_util_request>(std::span(buf).first(*n));
  REQUIRE(m.has_value());
  CHECK(m->request_code == C);
  CHECK(m->header.transaction_context == 77);
  auto back = cfg::request_data<C>(*m);
  REQUIRE(back.has_value());
  CHECK(*back == d);
}

template <request_code C>
void reply_round_trip(const cfg::reply_t<C>& d) {
  std::array<std::byte, 128> buf{};
  auto n = cfg::encode_reply<C>(78, cfg::status::success, d, buf);
  REQUIRE(n.has_value());
  CHECK(*n == 20 + wire::fixed_size<cfg::reply_t<C>>);
  auto m = msg::decode<cfg_util_reply>(std::span(buf).first(*n));
  REQUIRE(m.has_value());
  CHECK(m->status == cfg::status::success);
  auto back = cfg::reply_data<C>(*m);
  REQUIRE(back.has_value());
  CHECK(*back == d);
}

}  // namespace

// The vectors' typed data, at compile time.
static_assert(cfg::request_data<request_code::set_mac_address>(vec::cfg_request.value)->mac ==
              std::array<std::uint8_t, 6>{2, 0, 0, 0, 0, 1});
static_assert(cfg::reply_data<request_code::get_link_state>(vec::cfg_reply.value)->speed_mbps == 100000);
static_assert(cfg::reply_data<request_code::get_statistics>(vec::cfg_reply.value).code() == errc::invalid_field);

TEST_CASE("cfg: typed data of every request code round-trips", "[msg][cfg]") {
  request_round_trip<request_code::get_mac_address>({});
  reply_round_trip<request_code::get_mac_address>({.mac = {0x02, 0x11, 0x22, 0x33, 0x44, 0x55}});
  request_round_trip<request_code::set_mac_address>({.mac = {0x02, 0, 0, 0, 0, 1}});
  reply_round_trip<request_code::set_mac_address>({});
  request_round_trip<request_code::get_statistics>({});
  reply_round_trip<request_code::get_statistics>({1, 2, 3, 4, 5, 6, 7, 8, 9, 0xFFFFFFFFFFFFFFFF});
  request_round_trip<request_code::set_mtu>({.mtu = 9000});
  reply_round_trip<request_code::set_mtu>({.mtu = 1500});
  request_round_trip<request_code::get_link_state>({});
  reply_round_trip<request_code::get_link_state>({.up = 1, .speed_mbps = 400000});
  request_round_trip<request_code::set_promiscuous>({.enable = 1});
  reply_round_trip<request_code::set_promiscuous>({});
  request_round_trip<request_code::initialize_nic>({.flags = 7, .mtu = 9000, .mac = {0x02, 0xaa, 0, 0, 0, 1}});
  reply_round_trip<request_code::initialize_nic>({.mac = {0x02, 0xaa, 0, 0, 0, 1}, .mtu = 1500, .up = 1, .speed_mbps = 10, .promiscuous = 1});
}

// InitializeNic's data, written out: flags, MTU, MAC, reserved (16 bytes); the reply's MAC,
// reserved, MTU, up, speed, promiscuous (24 bytes).
constexpr auto init_bytes = test::hex<"00000003 00002328 02aabbccddee 0000">();
constexpr auto state_bytes = test::hex<"02aabbccddee 0000 000005dc 00000001 000061a8 00000000">();
static_assert(wire::decode<cfg::nic_init>(init_bytes)->flags == 3);
static_assert(wire::decode<cfg::nic_init>(init_bytes)->mtu == 9000);
static_assert(wire::decode<cfg::nic_init>(init_bytes)->mac == std::array<std::uint8_t, 6>{2, 0xaa, 0xbb, 0xcc, 0xdd, 0xee});
static_assert(wire::decode<cfg::nic_state>(state_bytes)->speed_mbps == 25000);
static_assert(wire::fixed_size<cfg::statistics> == 80 && cfg::max_data == 80);

TEST_CASE("cfg: InitializeNic data decodes from its written-out bytes, and bad flags and values are refused", "[msg][cfg]") {
  const auto init = wire::decode<cfg::nic_init>(init_bytes);
  REQUIRE(init.has_value());
  CHECK(init->flags == (static_cast<std::uint32_t>(cfg::init_flag::reset_statistics) | static_cast<std::uint32_t>(cfg::init_flag::set_mac)));
  const auto st = wire::decode<cfg::nic_state>(state_bytes);
  REQUIRE(st.has_value());
  CHECK(st->mtu == 1500);
  CHECK(st->up == 1);
  CHECK(st->promiscuous == 0);
  std::array<std::byte, 16> out{};
  REQUIRE(wire::encode(*init, out).has_value());
  CHECK(out == init_bytes);
  // flags bit 3, a nonzero reserved, promiscuous 2
  const auto bad_flags = wire::decode<cfg::nic_init>(test::hex<"00000008 00000000 000000000000 0000">());
  CHECK(bad_flags.code() == errc::invalid_field);
  CHECK(bad_flags.error().field == "flags");
  CHECK(wire::decode<cfg::nic_init>(test::hex<"00000000 00000000 000000000000 0001">()).code() == errc::reserved_nonzero);
  CHECK(wire::decode<cfg::nic_state>(test::hex<"02aabbccddee 0000 000005dc 00000001 000061a8 00000002">()).error().field == "promiscuous");
  const cfg_util_request req{.request_code = request_code::initialize_nic, .data = std::span<const std::byte>(init_bytes).first(15)};
  CHECK(cfg::request_data<request_code::initialize_nic>(req).code() == errc::invalid_field);
}

TEST_CASE("cfg: the vectors' data through the typed accessors at run time", "[msg][cfg]") {
  const auto req_bytes = test::copy(vec::cfg_request.bytes);
  auto req = msg::decode<cfg_util_request>(req_bytes);
  REQUIRE(req.has_value());
  auto mac = cfg::request_data<request_code::set_mac_address>(*req);
  REQUIRE(mac.has_value());
  CHECK(mac->mac == std::array<std::uint8_t, 6>{2, 0, 0, 0, 0, 1});
  const auto rep_bytes = test::copy(vec::cfg_reply.bytes);
  auto rep = msg::decode<cfg_util_reply>(rep_bytes);
  REQUIRE(rep.has_value());
  auto ls = cfg::reply_data<request_code::get_link_state>(*rep);
  REQUIRE(ls.has_value());
  CHECK(ls->up == 1);
  CHECK(ls->speed_mbps == 100000);
}

TEST_CASE("cfg: wrong sizes, codes and values are invalid_field", "[msg][cfg][errors]") {
  const std::array<std::byte, 5> five{};
  const std::array<std::byte, 8> eight_bad = test::hex<"00000002 00000064">();  // up = 2
  const std::array<std::byte, 4> four_bad = test::hex<"00000002">();            // enable = 2
  const cfg_util_request short_mac{.request_code = request_code::set_mac_address, .data = five};
  auto r1 = cfg::request_data<request_code::set_mac_address>(short_mac);
  CHECK(r1.code() == errc::invalid_field);
  CHECK(r1.error().offset == 20 + 5);  // where the data ends short

  const cfg_util_request wrong_code{.request_code = request_code::set_mtu, .data = five};
  auto r2 = cfg::request_data<request_code::set_mac_address>(wrong_code);
  CHECK(r2.code() == errc::invalid_field);
  CHECK(r2.error().field == "request_code");
  CHECK(r2.error().offset == 12);

  const cfg_util_reply bad_up{.request_code = request_code::get_link_state, .data = eight_bad};
  auto r3 = cfg::reply_data<request_code::get_link_state>(bad_up);
  CHECK(r3.code() == errc::invalid_field);
  CHECK(r3.error().field == "up");
  CHECK(r3.error().offset == 20);

  const cfg_util_request bad_promisc{.request_code = request_code::set_promiscuous, .data = four_bad};
  CHECK(cfg::request_data<request_code::set_promiscuous>(bad_promisc).code() == errc::invalid_field);

  const cfg_util_request data_on_none{.request_code = request_code::get_statistics, .data = four_bad};
  CHECK(cfg::request_data<request_code::get_statistics>(data_on_none).code() == errc::invalid_field);

  std::array<std::byte, 64> out{};
  CHECK(cfg::encode_reply<request_code::get_link_state>(1, cfg::status::success, {.up = 2}, out).code() ==
        errc::invalid_field);
}

TEST_CASE("cfg: vendor codes and unknown statuses decode opaquely", "[msg][cfg]") {
  const auto bytes = test::copy(test::hex<"0302 0001 0000000000000009 8001 0007 00000003 aabbcc">());
  auto m = msg::decode<cfg_util_reply>(bytes);
  REQUIRE(m.has_value());
  CHECK(cfg::is_vendor(m->request_code));
  CHECK(static_cast<std::uint16_t>(m->status) == 7);
  CHECK(m->data.size() == 3);
  CHECK(msg::to_text(*m).find("request_code: 0x8001\n") != std::string::npos);
  CHECK(msg::to_text(*m).find("status: 0x0007\n") != std::string::npos);
}
