// pp::lan (spec/pp.md §8): three members on three reference RNICs, joined by a test switch
// that forwards each RoCEv2 frame to the device its destination IPv4 address names. Hellos make
// members; the MAC embeds (LID, UD QPN); unicast reaches only the member its MAC names,
// broadcast and multicast every member once; every refusal is its own error; a spoofed source,
// a stranger's QP, a restart and a silent member are each handled as documented.
#include <catch2/catch.hpp>

#include <array>
#include <memory>
#include <vector>

#include <pushwire/pp/lan.hpp>
#include <pushwire/rnic/fabric.hpp>

using namespace pushwire;

namespace {

std::vector<std::byte> enc(const pp::lan_hello& h) {
  std::vector<std::byte> v(pp::lan_hello_size);
  REQUIRE(wire::encode(h, v).has_value());
  return v;
}

/// An Ethernet frame: dst, src, EtherType 0x0800, then `n` bytes of a pattern of `id`.
std::vector<std::byte> frame(const wire::mac_address& dst, const wire::mac_address& src, std::uint8_t id, std::size_t n = 100) {
  std::vector<std::byte> f(14 + n);
  for (std::size_t i = 0; i < 6; ++i) f[i] = std::byte{dst[i]}, f[6 + i] = std::byte{src[i]};
  f[12] = std::byte{0x08};
  for (std::size_t i = 0; i < n; ++i) f[14 + i] = static_cast<std::byte>(i * 7 + id);
  return f;
}

constexpr wire::mac_address broadcast{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};

struct lan3 {
  rnic::loopback_fabric fab;
  std::array<std::unique_ptr<rnic::device>, 3> dev;
  std::array<std::size_t, 3> raw{};
  std::array<std::unique_ptr<pp::lan>, 3> m;
  std::array<std::vector<std::vector<std::byte>>, 3> got;
  rnic::time_ns now = 0;

  static std::array<std::uint8_t, 16> gid(std::size_t i) { return rnic::gid_v4(198, 18, 0, static_cast<std::uint8_t>(i + 1)); }

  explicit lan3(std::uint32_t mtu = 2048) {
    for (std::size_t i = 0; i < 3; ++i) {
      rnic::port_config p;
      p.mac = {0x02, 0, 0, 0, 0, static_cast<std::uint8_t>(i + 1)};
      p.gid = gid(i);
      p.mtu = mtu;
      dev[i] = std::make_unique<rnic::device>(rnic::device_config{.ports = {p}});
      raw[i] = *fab.raw_port(*dev[i], 0);
      make(i, 100 + i);
    }
  }
  void make(std::size_t i, std::uint64_t incarnation) {
    m[i].reset();
    m[i] = std::make_unique<pp::lan>(*dev[i], pp::lan_config{.lid = static_cast<std::uint16_t>(0x10 + i), .incarnation = incarnation},
                                     [this, i](std::span<const std::byte> f) { got[i].emplace_back(f.begin(), f.end()); });
    REQUIRE(m[i]->ok());
  }
  /// Every member's hello reaches every other (as the CM socket would carry it).
  void hellos(rnic::time_ns now, std::initializer_list<std::size_t> from = {0, 1, 2}) {
    for (std::size_t i : from)
      for (std::size_t j = 0; j < 3; ++j)
        if (i != j && m[j]) m[j]->on_hello(enc(m[i]->hello()), gid(i), now);
  }
  /// Runs the fabric and the switch for `ns`, polling every member.
  void settle(rnic::time_ns ns = 2'000'000) {
    const rnic::time_ns end = now + ns;
    while (now < end) {
      fab.run_until(now += 10'000);  // (the fabric's clock stops where nothing is left to do)
      for (std::size_t i = 0; i < 3; ++i)
        while (auto f = fab.take(raw[i])) {
          const std::size_t to = std::to_integer<std::size_t>((*f)[33]) - 1;  // IPv4 destination's last byte
          if (to >= 3) continue;
          for (std::size_t k = 0; k < 6; ++k) (*f)[k] = std::byte{dev[to]->config().ports[0].mac[k]};
          fab.inject(raw[to], *f);
        }
      for (auto& x : m)
        if (x) x->poll();
    }
  }
};

}  // namespace

TEST_CASE("lan: the hello is 20 bytes, round-trips, and refuses each bad field and every truncation", "[pp][lan]") {
  const pp::lan_hello h{.lid = 0x0102, .qpn = 0x123456, .incarnation = 0x1122334455667788};
  const auto b = enc(h);
  REQUIRE(b.size() == 20);
  const std::array<std::uint8_t, 20> want{'P', 'W', 'L', 'N', 0, 1, 0x01, 0x02, 0, 0x12, 0x34, 0x56, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88};
  for (std::size_t i = 0; i < 20; ++i) CHECK(std::to_integer<std::uint8_t>(b[i]) == want[i]);
  const auto d = wire::decode<pp::lan_hello>(b);
  REQUIRE(d);
  CHECK(d->lid == 0x0102);
  CHECK(d->qpn == 0x123456);
  CHECK(d->incarnation == 0x1122334455667788);
  for (std::size_t n = 0; n < 20; ++n) CHECK(wire::decode<pp::lan_hello>(std::span(b).first(n)).error().code == wire::errc::truncated);
  auto bad = [&](std::size_t at, std::uint8_t v, wire::errc want_err) {
    auto c = b;
    c[at] = std::byte{v};
    const auto r = wire::decode<pp::lan_hello>(c);
    REQUIRE(!r);
    CHECK(r.error().code == want_err);
  };
  bad(0, 'X', wire::errc::invalid_field);           // magic
  bad(5, 2, wire::errc::unsupported_version);       // version
  {
    auto c = b;
    c[6] = std::byte{0}, c[7] = std::byte{0};  // LID 0: reserved
    CHECK(wire::decode<pp::lan_hello>(c).error().code == wire::errc::invalid_field);
    c[6] = std::byte{0xC0};  // LID 0xC000: multicast
    CHECK(wire::decode<pp::lan_hello>(c).error().code == wire::errc::invalid_field);
  }
  bad(8, 1, wire::errc::invalid_field);  // QPN wider than 24 bits
  {
    auto c = b;
    for (std::size_t i = 12; i < 20; ++i) c[i] = std::byte{0};  // incarnation 0
    CHECK(wire::decode<pp::lan_hello>(c).error().code == wire::errc::invalid_field);
  }
}

TEST_CASE("lan: three members, unicast to one, broadcast and multicast to every other once", "[pp][lan]") {
  lan3 w;
  for (std::size_t i = 0; i < 3; ++i) {
    const auto lq = ib::lid_from_mac(w.m[i]->mac());
    REQUIRE(lq);
    CHECK(lq->lid == 0x10 + i);
    CHECK(lq->qpn == w.m[i]->qpn());
    CHECK(w.m[i]->mac()[0] == 0xA2);
  }
  // Before any hello: nobody to send to.
  CHECK(w.m[0]->send_frame(frame(broadcast, w.m[0]->mac(), 1)) == pp::lan_errc::no_members);
  CHECK(w.m[0]->send_frame(frame(w.m[1]->mac(), w.m[0]->mac(), 1)) == pp::lan_errc::no_route);
  w.hellos(0);
  for (auto& x : w.m) CHECK(x->members().size() == 2);
  CHECK(w.m[0]->stats().joined == 2);

  const auto uni = frame(w.m[1]->mac(), w.m[0]->mac(), 2, 1000);
  REQUIRE(w.m[0]->send_frame(uni) == pp::lan_errc{});
  const auto bc = frame(broadcast, w.m[0]->mac(), 3, 60);
  REQUIRE(w.m[0]->send_frame(bc) == pp::lan_errc{});
  const auto mc = frame({0x01, 0x00, 0x5E, 0x00, 0x00, 0x01}, w.m[2]->mac(), 4, 64);
  REQUIRE(w.m[2]->send_frame(mc) == pp::lan_errc{});
  const auto full = frame(w.m[0]->mac(), w.m[2]->mac(), 5, 2048 - 14);  // exactly the port's MTU
  REQUIRE(w.m[2]->send_frame(full) == pp::lan_errc{});
  w.settle();
  CHECK(w.got[1] == std::vector<std::vector<std::byte>>{uni, bc, mc});
  CHECK(w.got[2] == std::vector<std::vector<std::byte>>{bc});
  CHECK(w.got[0] == std::vector<std::vector<std::byte>>{mc, full});
  CHECK(w.m[0]->stats().copies_out == 3);  // one unicast, a broadcast to two
  CHECK(w.m[0]->stats().broadcasts_out == 1);
  CHECK(w.m[0]->free_slots() == 256);      // every slot back
}

TEST_CASE("lan: each refusal is its own error and sends nothing", "[pp][lan]") {
  lan3 w(1024);
  w.hellos(0);
  auto& a = *w.m[0];
  CHECK(a.max_frame() == 1024);
  CHECK(a.send_frame(std::vector<std::byte>(13)) == pp::lan_errc::runt);
  CHECK(a.send_frame(frame(w.m[1]->mac(), a.mac(), 1, 1024 - 13)) == pp::lan_errc::too_large);
  CHECK(a.send_frame(frame({0x02, 0, 0, 0, 0, 9}, a.mac(), 1)) == pp::lan_errc::no_route);   // not the LID form
  CHECK(a.send_frame(frame(*ib::mac_from_lid(0x77, w.m[1]->qpn()), a.mac(), 1)) == pp::lan_errc::no_route);  // no such LID
  CHECK(a.send_frame(frame(*ib::mac_from_lid(0x11, w.m[1]->qpn() + 1), a.mac(), 1)) == pp::lan_errc::no_route);  // another QP
  CHECK(a.send_frame(frame(a.mac(), a.mac(), 1)) == pp::lan_errc::no_route);  // itself
  CHECK(a.stats().refused[static_cast<std::size_t>(pp::lan_errc::no_route)] == 4);
  CHECK(a.stats().copies_out == 0);
  w.settle();
  for (auto& g : w.got) CHECK(g.empty());
}

TEST_CASE("lan: a spoofed source MAC and a stranger's QP are dropped", "[pp][lan]") {
  lan3 w;
  w.hellos(0);
  // Member 2 sends to member 0 with member 1's MAC as its source.
  REQUIRE(w.m[2]->send_frame(frame(w.m[0]->mac(), w.m[1]->mac(), 1)) == pp::lan_errc{});
  // A UD QP on member 2's device that is not member 2's sends to member 0's QP with the right Q_Key.
  auto& d = *w.dev[2];
  const auto pd = *d.alloc_pd();
  rnic::cq_memory scq(16), rcq(16);
  rnic::sq_memory sq(16);
  rnic::rq_memory rq(16);
  const auto cq = *d.create_cq(scq), cq2 = *d.create_cq(rcq);
  const auto q = *d.create_qp({.type = rnic::qp_type::ud, .pd = pd, .send_cq = cq, .recv_cq = cq2, .sq = &sq, .rq = &rq});
  REQUIRE(rnic::bring_up(d, q, {.type = rnic::qp_type::ud, .qkey = pp::lan_qkey}) == rnic::errc{});
  auto f = frame(w.m[0]->mac(), w.m[2]->mac(), 2);
  const auto mr = *d.reg_mr(pd, f.data(), f.size(), rnic::access::local_write);
  const auto ah = *d.create_ah(pd, {.dgid = lan3::gid(0)});
  const rnic::sge s{reinterpret_cast<std::uintptr_t>(f.data()), static_cast<std::uint32_t>(f.size()), mr.lkey};
  REQUIRE(d.post_send(q, {.wr_id = 1, .opcode = rnic::wr_opcode::send, .sg_list = {&s, 1}, .ah = ah, .remote_qpn = w.m[0]->qpn(), .remote_qkey = pp::lan_qkey}) == rnic::errc{});
  w.settle();
  CHECK(w.got[0].empty());
  CHECK(w.m[0]->stats().refused[static_cast<std::size_t>(pp::lan_errc::spoofed_source)] == 1);
  CHECK(w.m[0]->stats().refused[static_cast<std::size_t>(pp::lan_errc::unknown_sender)] == 1);
  // ... while member 2's own frame with its own MAC gets through.
  REQUIRE(w.m[2]->send_frame(frame(w.m[0]->mac(), w.m[2]->mac(), 3)) == pp::lan_errc{});
  w.settle();
  CHECK(w.got[0].size() == 1);
  (void)d.destroy_qp(q);
}

TEST_CASE("lan: a silent member leaves, a restarted one takes its new QP, a LID conflict is refused", "[pp][lan]") {
  lan3 w;
  w.hellos(0);
  const wire::mac_address old1 = w.m[1]->mac();
  // Member 1 restarts: a new incarnation and a new QP.
  w.make(1, 999);
  CHECK(w.m[1]->mac() != old1);
  w.hellos(100'000'000, {0, 1});  // (the new member 1 must hear member 0 too)
  CHECK(w.m[0]->stats().restarted == 1);
  CHECK(w.m[0]->send_frame(frame(old1, w.m[0]->mac(), 1)) == pp::lan_errc::no_route);  // a stale ARP entry
  REQUIRE(w.m[0]->send_frame(frame(w.m[1]->mac(), w.m[0]->mac(), 2)) == pp::lan_errc{});
  w.settle();
  REQUIRE(w.got[1].size() == 1);
  // Another address claiming member 1's LID is refused; so is this member's own LID.
  pp::lan_hello h = w.m[1]->hello();
  CHECK(w.m[0]->on_hello(enc(h), rnic::gid_v4(198, 18, 0, 9), 0) == pp::lan::heard::refused);
  h.lid = 0x10;
  CHECK(w.m[0]->on_hello(enc(h), rnic::gid_v4(198, 18, 0, 9), 0) == pp::lan::heard::refused);
  CHECK(w.m[0]->stats().lid_conflicts == 2);
  CHECK(w.m[0]->on_hello(std::vector<std::byte>(7), rnic::gid_v4(198, 18, 0, 9), 0) == pp::lan::heard::refused);
  CHECK(w.m[0]->stats().bad_hellos == 1);
  // Member 2 falls silent: gone after dead_after (600 ms), member 1 stays.
  w.hellos(650'000'000, {1});
  CHECK(w.m[0]->tick(650'000'000) == 1);
  REQUIRE(w.m[0]->members().size() == 1);
  CHECK(w.m[0]->members()[0].lid == 0x11);
  CHECK(w.m[0]->send_frame(frame(w.m[2]->mac(), w.m[0]->mac(), 3)) == pp::lan_errc::no_route);
}

TEST_CASE("lan: a broadcast needs a slot per copy in the send queue, and is all or nothing", "[pp][lan]") {
  lan3 w;
  w.hellos(0);
  auto& a = *w.m[0];
  // Fill the send queue without polling: 256 slots, each frame one copy (unicast).
  std::size_t sent = 0;
  while (a.send_frame(frame(w.m[1]->mac(), a.mac(), 1)) == pp::lan_errc{}) ++sent;
  CHECK(sent == 256);
  CHECK(a.send_frame(frame(broadcast, a.mac(), 1)) == pp::lan_errc::would_block);
  CHECK(a.stats().broadcasts_out == 0);
  w.settle(20'000'000);
  CHECK(a.free_slots() == 256);
  CHECK(w.got[1].size() == 256);
  REQUIRE(a.send_frame(frame(broadcast, a.mac(), 1)) == pp::lan_errc{});
}
