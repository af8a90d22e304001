// pp::connector (spec/pp.md §7): two ends find each other's queue pairs, connect only once each
// knows the other heard it, notice silence within dead_after, and reconnect with new queue pairs
// after the other restarts; garbage changes nothing.
#include <catch2/catch.hpp>

#include <memory>
#include <random>
#include <vector>

#include <pushwire/pp/cm.hpp>

using namespace pushwire;

namespace {

std::vector<std::byte> enc(const pp::hello& h) {
  std::vector<std::byte> v(pp::hello_size);
  REQUIRE(wire::encode(h, v).has_value());
  return v;
}

/// One end: its connector and what it was told to do.
struct end {
  pp::connector cm;
  std::uint32_t qpn_base;
  std::vector<pp::hello> connects;
  int resets = 0, downs = 0, ups = 0;
  std::vector<std::vector<std::byte>> outbox;
  end(pp::role r, std::uint64_t inc, std::uint32_t base) : cm({.role = r, .incarnation = inc}), qpn_base(base) {
    cm.set_local(base, base + 1, 256);
  }
  void apply(const pp::cm_actions& a) {
    if (a.reset) ++resets, qpn_base += 0x10, cm.set_local(qpn_base, qpn_base + 1, 256);  // a new endpoint
    if (a.connect) connects.push_back(*a.connect);
    downs += a.carrier_down, ups += a.carrier_up;
    if (a.send) outbox.push_back(enc(*a.send));
  }
};

/// Runs both ends for `ms` milliseconds in 1 ms steps, datagrams arriving the next step;
/// `b_alive` false: b neither sends nor receives.
void run(end& a, end& b, rnic::time_ns& now, int ms, bool b_alive = true) {
  for (int i = 0; i < ms; ++i) {
    now += 1'000'000;
    auto to_b = std::move(a.outbox), to_a = std::move(b.outbox);
    a.outbox.clear(), b.outbox.clear();
    if (b_alive)
      for (auto& d : to_b) b.apply(b.cm.on_datagram(d, now));
    for (auto& d : to_a) a.apply(a.cm.on_datagram(d, now));
    a.apply(a.cm.tick(now));
    if (b_alive) b.apply(b.cm.tick(now));
  }
}

}  // namespace

TEST_CASE("cm: the hello is 36 bytes, round-trips, and refuses another magic or version", "[pp][cm]") {
  const pp::hello h{.role = 1, .incarnation = 0x1122334455667788, .peer_incarnation = 9, .control_qpn = 0x11, .data_qpn = 0x12, .send_max = 256};
  const auto b = enc(h);
  REQUIRE(b.size() == 36);
  CHECK(b[0] == std::byte{'P'});
  CHECK(b[3] == std::byte{'M'});
  const auto back = wire::decode<pp::hello>(b);
  REQUIRE(back.has_value());
  CHECK(back->incarnation == h.incarnation);
  CHECK(back->data_qpn == 0x12);
  auto bad = b;
  bad[0] = std::byte{'X'};
  CHECK(!wire::decode<pp::hello>(bad).has_value());
  bad = b;
  bad[5] = std::byte{2};
  CHECK(!wire::decode<pp::hello>(bad).has_value());
}

TEST_CASE("cm: both ends connect, each to the other's queue pairs, once each knows it was heard", "[pp][cm]") {
  end a(pp::role::host, 101, 0x100), b(pp::role::iou, 202, 0x200);
  rnic::time_ns now = 1'000'000'000;
  run(a, b, now, 2);  // each has heard the other's first hello, which named no peer
  CHECK(a.connects.empty());
  CHECK(b.connects.empty());
  run(a, b, now, 3);
  REQUIRE(a.connects.size() == 1);
  REQUIRE(b.connects.size() == 1);
  CHECK(a.connects[0].control_qpn == 0x200);
  CHECK(a.connects[0].data_qpn == 0x201);
  CHECK(b.connects[0].control_qpn == 0x100);
  CHECK(a.cm.state() == pp::cm_state::connected);
  CHECK(b.cm.state() == pp::cm_state::connected);
  CHECK(a.ups == 1);
  run(a, b, now, 2000);  // hellos keep it alive; nothing more happens
  CHECK(a.connects.size() == 1);
  CHECK(a.downs == 0);
}

TEST_CASE("cm: silence is noticed within dead_after, and the same incarnation's return resumes", "[pp][cm]") {
  end a(pp::role::host, 101, 0x100), b(pp::role::iou, 202, 0x200);
  rnic::time_ns now = 1'000'000'000;
  run(a, b, now, 10);
  REQUIRE(a.cm.state() == pp::cm_state::connected);
  run(a, b, now, 550, false);
  CHECK(a.downs == 0);
  run(a, b, now, 100, false);  // 650 ms of silence > 600 ms
  CHECK(a.downs == 1);
  CHECK(a.cm.state() == pp::cm_state::lost);
  run(a, b, now, 200);
  CHECK(a.cm.state() == pp::cm_state::connected);
  CHECK(a.ups == 2);
  CHECK(a.resets == 0);
  CHECK(a.connects.size() == 1);  // the same QPs: no reconnect
}

TEST_CASE("cm: after the peer restarts, the endpoint is reset and both connect to the new queue pairs", "[pp][cm]") {
  end a(pp::role::host, 101, 0x100);
  auto b = std::make_unique<end>(pp::role::iou, 202, 0x200);
  rnic::time_ns now = 1'000'000'000;
  run(a, *b, now, 10);
  REQUIRE(a.connects.size() == 1);
  run(a, *b, now, 300, false);            // killed
  b = std::make_unique<end>(pp::role::iou, 303, 0x300);  // restarted: new incarnation, new QPs
  run(a, *b, now, 300);
  CHECK(a.resets == 1);
  REQUIRE(a.connects.size() == 2);
  CHECK(a.connects[1].control_qpn == 0x300);
  REQUIRE(b->connects.size() == 1);
  CHECK(b->connects[0].control_qpn == 0x110);  // a's new endpoint
  CHECK(a.cm.state() == pp::cm_state::connected);
  CHECK(b->cm.state() == pp::cm_state::connected);
}

TEST_CASE("cm: garbage, our own role and incarnation 0 are counted and change nothing", "[pp][cm]") {
  end a(pp::role::host, 101, 0x100);
  std::mt19937 rng(5);
  rnic::time_ns now = 1;
  for (int i = 0; i < 1000; ++i) {
    std::vector<std::byte> d(rng() % 64);
    for (auto& x : d) x = static_cast<std::byte>(rng());
    const auto r = a.cm.on_datagram(d, now);
    CHECK(!r.connect);
    CHECK(!r.reset);
  }
  const auto self = enc(pp::hello{.role = 1, .incarnation = 5, .peer_incarnation = 101});
  const auto zero = enc(pp::hello{.role = 2, .incarnation = 0, .peer_incarnation = 101});
  const auto other = enc(pp::hello{.role = 7, .incarnation = 5, .peer_incarnation = 101});
  for (const auto* d : {&self, &zero, &other}) CHECK(!a.cm.on_datagram(*d, now).connect);
  CHECK(a.cm.bad_hellos() == 1003);
  CHECK(a.cm.state() == pp::cm_state::searching);
}
