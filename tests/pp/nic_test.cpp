// pp::nic_agent (spec/split-model.md, CfgUtil): every request code against a fake LAN NIC, the
// receive filter, InitializeNic's all-or-nothing rule. Request data is written out byte by byte
// here (the seed's layouts, big-endian), not by the codec under test.
#include <catch2/catch.hpp>

#include <array>
#include <vector>

#include <pushwire/pp/nic.hpp>


using namespace pushwire;
using msg::cfg::request_code;
using msg::cfg::status;

namespace {

struct fake_hw {
  pp::nic_link l{.up = true, .speed_mbps = 25000};
  int mtu_error = 0;
  std::vector<std::uint32_t> mtus;  ///< set_mtu calls
  msg::cfg::statistics raw{};
  std::uint32_t now_mtu = 0;  ///< 0: the hardware cannot say
  pp::nic_link link() const { return l; }
  std::uint32_t mtu() const { return now_mtu; }
  int set_mtu(std::uint32_t m) {
    mtus.push_back(m);
    if (!mtu_error && now_mtu) now_mtu = m;
    return mtu_error;
  }
  msg::cfg::statistics counters() const { return raw; }
};

constexpr wire::mac_address factory{0x02, 0x50, 0x57, 0, 0, 1};

std::vector<std::byte> bytes(std::initializer_list<unsigned> v) {
  std::vector<std::byte> b;
  for (unsigned x : v) b.push_back(static_cast<std::byte>(x));
  return b;
}
std::vector<std::byte> frame_to(const wire::mac_address& dst) {
  std::vector<std::byte> f(60);
  for (std::size_t i = 0; i < 6; ++i) f[i] = std::byte{dst[i]};
  return f;
}
template <class D>
D reply_as(const pp::cfg_answer& a) {
  const auto d = wire::decode<D>(a.data);
  REQUIRE(d.has_value());
  return *d;
}

}  // namespace

TEST_CASE("nic: MAC address get and set, and the receive filter follows it", "[pp][nic]") {
  fake_hw hw;
  pp::nic_agent nic(factory, 1500);
  auto a = nic.answer(request_code::get_mac_address, {}, hw);
  CHECK(a.status == status::success);
  CHECK(a.data == bytes({0x02, 0x50, 0x57, 0, 0, 1}));
  CHECK(nic.accepts(frame_to(factory)));
  const wire::mac_address other{0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee};
  CHECK_FALSE(nic.accepts(frame_to(other)));
  CHECK(nic.filtered() == 1);

  a = nic.answer(request_code::set_mac_address, bytes({0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee}), hw);
  CHECK(a.status == status::success);
  CHECK(a.data.empty());
  CHECK(nic.mac() == other);
  CHECK(nic.accepts(frame_to(other)));
  CHECK_FALSE(nic.accepts(frame_to(factory)));  // the old MAC is another's now
  CHECK(nic.filtered() == 2);
  CHECK(nic.accepts(frame_to({0xff, 0xff, 0xff, 0xff, 0xff, 0xff})));  // broadcast
  CHECK(nic.accepts(frame_to({0x01, 0x00, 0x5e, 0, 0, 1})));          // multicast
  CHECK_FALSE(nic.accepts(bytes({0x02, 0xaa, 0xbb})));                 // shorter than a MAC
  CHECK(nic.filtered() == 3);

  // multicast, zero, short and long MACs are refused and change nothing
  for (const auto& bad : {bytes({0x03, 0, 0, 0, 0, 1}), bytes({0, 0, 0, 0, 0, 0}), bytes({0x02, 0, 0, 0, 1}), bytes({0x02, 0, 0, 0, 0, 1, 0})}) {
    CHECK(nic.answer(request_code::set_mac_address, bad, hw).status == status::invalid_argument);
    CHECK(nic.mac() == other);
  }
}

TEST_CASE("nic: promiscuous mode passes every unicast frame", "[pp][nic]") {
  fake_hw hw;
  pp::nic_agent nic(factory, 1500);
  const wire::mac_address other{0x02, 0, 0, 0, 0, 0x77};
  CHECK_FALSE(nic.accepts(frame_to(other)));
  CHECK(nic.answer(request_code::set_promiscuous, bytes({0, 0, 0, 1}), hw).status == status::success);
  CHECK(nic.promiscuous());
  CHECK(nic.accepts(frame_to(other)));
  CHECK(nic.answer(request_code::set_promiscuous, bytes({0, 0, 0, 2}), hw).status == status::invalid_argument);
  CHECK(nic.promiscuous());
  CHECK(nic.answer(request_code::set_promiscuous, bytes({0, 0, 0}), hw).status == status::invalid_argument);
  CHECK(nic.answer(request_code::set_promiscuous, bytes({0, 0, 0, 0}), hw).status == status::success);
  CHECK_FALSE(nic.accepts(frame_to(other)));
  CHECK(nic.filtered() == 2);
}

TEST_CASE("nic: SetMtu asks with 0, sets through the hardware, and always answers the MTU in effect", "[pp][nic]") {
  fake_hw hw;
  pp::nic_agent nic(factory, 1500);
  auto a = nic.answer(request_code::set_mtu, bytes({0, 0, 0, 0}), hw);
  CHECK(a.status == status::success);
  CHECK(a.data == bytes({0, 0, 0x05, 0xdc}));
  CHECK(hw.mtus.empty());
  a = nic.answer(request_code::set_mtu, bytes({0, 0, 0x23, 0x28}), hw);  // 9000
  CHECK(a.status == status::success);
  CHECK(hw.mtus == std::vector<std::uint32_t>{9000});
  CHECK(reply_as<msg::cfg::mtu_setting>(a).mtu == 9000);
  hw.mtu_error = 22;
  a = nic.answer(request_code::set_mtu, bytes({0, 0, 0x10, 0}), hw);
  CHECK(a.status == status::device_error);
  CHECK(reply_as<msg::cfg::mtu_setting>(a).mtu == 9000);
  for (unsigned m : {575u, 65472u}) {
    a = nic.answer(request_code::set_mtu, bytes({0, 0, m >> 8, m & 0xff}), hw);
    CHECK(a.status == status::invalid_argument);
    CHECK(reply_as<msg::cfg::mtu_setting>(a).mtu == 9000);
  }
  CHECK(nic.answer(request_code::set_mtu, bytes({0, 0, 0x10}), hw).status == status::invalid_argument);
  CHECK(hw.mtus.size() == 2);
}

TEST_CASE("nic: the MTU in effect is the hardware's, even when another set it", "[pp][nic]") {
  fake_hw hw;
  hw.now_mtu = 1500;
  pp::nic_agent nic(factory, 1500);
  hw.now_mtu = 4000;  // `ip link set lan0 mtu 4000` on the LAN's side
  auto a = nic.answer(request_code::set_mtu, bytes({0, 0, 0, 0}), hw);
  CHECK(reply_as<msg::cfg::mtu_setting>(a).mtu == 4000);
  a = nic.answer(request_code::set_mtu, bytes({0, 0, 0x0f, 0xa0}), hw);  // 4000 again: nothing to do
  CHECK(a.status == status::success);
  CHECK(hw.mtus.empty());
  a = nic.answer(request_code::set_mtu, bytes({0, 0, 0x05, 0xdc}), hw);  // back to 1500
  CHECK(hw.mtus == std::vector<std::uint32_t>{1500});
  CHECK(reply_as<msg::cfg::mtu_setting>(a).mtu == 1500);
  CHECK(nic.mtu() == 1500);
}

TEST_CASE("nic: GetLinkState is the hardware's link, speed 0 while down", "[pp][nic]") {
  fake_hw hw;
  pp::nic_agent nic(factory, 1500);
  auto a = nic.answer(request_code::get_link_state, {}, hw);
  CHECK(a.status == status::success);
  CHECK(a.data == bytes({0, 0, 0, 1, 0, 0, 0x61, 0xa8}));  // up, 25000 Mb/s
  hw.l = {.up = false, .speed_mbps = 25000};
  a = nic.answer(request_code::get_link_state, {}, hw);
  CHECK(a.data == bytes({0, 0, 0, 0, 0, 0, 0, 0}));
  CHECK(nic.answer(request_code::get_link_state, bytes({0}), hw).status == status::invalid_argument);
}

TEST_CASE("nic: InitializeNic applies its whole state, or nothing", "[pp][nic]") {
  fake_hw hw;
  hw.raw = {10, 20, 30, 40, 1, 2, 3, 4, 5, 6};
  pp::nic_agent nic(factory, 1500);
  // flags 7 (reset_statistics, set_mac, promiscuous), MTU 9000, MAC 02:aa:bb:cc:dd:ee
  auto a = nic.answer(request_code::initialize_nic, bytes({0, 0, 0, 7, 0, 0, 0x23, 0x28, 0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0, 0}), hw);
  CHECK(a.status == status::success);
  // reply: MAC, reserved, MTU 9000, up, 25000 Mb/s, promiscuous
  CHECK(a.data == bytes({0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0, 0, 0, 0, 0x23, 0x28, 0, 0, 0, 1, 0, 0, 0x61, 0xa8, 0, 0, 0, 1}));
  CHECK(nic.promiscuous());
  CHECK(nic.mtu() == 9000);
  CHECK(nic.statistics(hw) == msg::cfg::statistics{});
  hw.raw.rx_frames += 5;
  CHECK(nic.statistics(hw).rx_frames == 5);
  auto st = nic.answer(request_code::get_statistics, {}, hw);
  CHECK(st.status == status::success);
  CHECK(st.data.size() == 80);
  CHECK(reply_as<msg::cfg::statistics>(st).rx_frames == 5);

  // Refused whole: unknown flag bits, a multicast MAC with set_mac, an MTU out of range, a short request.
  const auto before = nic.mac();
  for (const auto& bad : {bytes({0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}),
                          bytes({0, 0, 0, 2, 0, 0, 0, 0, 0x01, 0, 0x5e, 0, 0, 1, 0, 0}),
                          bytes({0, 0, 0, 0, 0, 0, 0x02, 0x3f, 0, 0, 0, 0, 0, 0, 0, 0}),
                          bytes({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}),  // reserved nonzero
                          bytes({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})}) {
    a = nic.answer(request_code::initialize_nic, bad, hw);
    CHECK(a.status == status::invalid_argument);
    CHECK(nic.mac() == before);
    CHECK(nic.promiscuous());
    CHECK(nic.mtu() == 9000);
    CHECK(reply_as<msg::cfg::nic_state>(a).mtu == 9000);  // the state is answered anyway
  }
  // The hardware refuses the MTU: device_error, and the MAC and promiscuity stay.
  hw.mtu_error = 1;
  a = nic.answer(request_code::initialize_nic, bytes({0, 0, 0, 0, 0, 0, 0x05, 0xdc, 0, 0, 0, 0, 0, 0, 0, 0}), hw);
  CHECK(a.status == status::device_error);
  CHECK(nic.mac() == before);
  CHECK(nic.promiscuous());
  // Without set_mac the factory MAC comes back; without promiscuous the filter is on again.
  hw.mtu_error = 0;
  hw.l.up = false;
  a = nic.answer(request_code::initialize_nic, bytes({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}), hw);
  CHECK(a.status == status::success);
  CHECK(nic.mac() == factory);
  CHECK_FALSE(nic.promiscuous());
  const auto s = reply_as<msg::cfg::nic_state>(a);
  CHECK(s.mac == factory);
  CHECK(s.up == 0);
  CHECK(s.speed_mbps == 0);
  CHECK(nic.statistics(hw).rx_frames == 5);  // not reset this time
}

TEST_CASE("nic: unknown and vendor codes are unsupported_request", "[pp][nic]") {
  fake_hw hw;
  pp::nic_agent nic(factory, 1500);
  CHECK(nic.answer(static_cast<request_code>(0x0008), {}, hw).status == status::unsupported_request);
  CHECK(nic.answer(static_cast<request_code>(0x8001), bytes({1, 2, 3}), hw).status == status::unsupported_request);
  CHECK(nic.answer(request_code::get_statistics, bytes({0}), hw).status == status::invalid_argument);
}

TEST_CASE("nic: a function of a shared NIC cannot take a MAC another function holds", "[pp][nic]") {
  struct shared_hw : fake_hw {
    wire::mac_address other{0x02, 0x50, 0x57, 0, 0, 2};
    bool mac_taken(const wire::mac_address& m) const { return m == other; }
  } hw;
  pp::nic_agent nic(factory, 1500);
  const auto other = bytes({0x02, 0x50, 0x57, 0, 0, 2});
  CHECK(nic.answer(request_code::set_mac_address, other, hw).status == status::invalid_argument);
  CHECK(nic.mac() == factory);
  // InitializeNic with set_mac and that MAC: refused whole (the promiscuous flag not applied)
  auto init = bytes({0, 0, 0, 6, 0, 0, 0, 0, 0x02, 0x50, 0x57, 0, 0, 2, 0, 0});
  const auto a = nic.answer(request_code::initialize_nic, init, hw);
  CHECK(a.status == status::invalid_argument);
  CHECK_FALSE(nic.promiscuous());
  CHECK(reply_as<msg::cfg::nic_state>(a).mac == factory);
  // its own MAC again, and a free one: taken
  CHECK(nic.answer(request_code::set_mac_address, bytes({0x02, 0x50, 0x57, 0, 0, 1}), hw).status == status::success);
  CHECK(nic.answer(request_code::set_mac_address, bytes({0x02, 0x50, 0x57, 0, 0, 3}), hw).status == status::success);
  CHECK(nic.mac() == wire::mac_address{0x02, 0x50, 0x57, 0, 0, 3});
  // once the other function leaves that MAC, it is free
  hw.other = {0x02, 0x50, 0x57, 0, 0, 9};
  CHECK(nic.answer(request_code::set_mac_address, other, hw).status == status::success);
}
