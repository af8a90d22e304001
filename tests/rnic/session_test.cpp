// Sessions over UDP 5-tuples on the reference RNIC (spec/rnic.md §12): a UD QP's messages spread
// over its group's source ports and are resequenced at the receiver; frames are carried between
// the two devices by raw ports, so the test picks their order, duplicates them and forges them.
#include <algorithm>
#include <random>
#include <set>

#include <catch2/catch.hpp>

#include <pushwire/ib/roce.hpp>

#include "harness.hpp"

using namespace pushwire::test::rnic;
namespace flow = pushwire::flow;
namespace ib = pushwire::ib;

namespace {

constexpr std::uint16_t first_port = 0xC001;
constexpr int n_sessions = 4;
constexpr std::size_t msg_len = 64, slot = 256;

flow::five_tuple tuple(const device& from, const device& to, std::uint16_t sport) {
  return {.src = from.config().ports[0].gid, .dst = to.config().ports[0].gid, .sport = sport};
}

// Two devices joined through raw ports, a UD session QP on each, bound to n_sessions tuples.
struct session_pair {
  loopback_fabric fab{1};
  side a{1, framing::roce}, b{2, framing::roce};
  std::size_t ra = 0, rb = 0;
  std::uint32_t ua = 0, ub = 0, ah = 0;
  session_pair() {
    ra = *fab.raw_port(*a.dev, 0);
    rb = *fab.raw_port(*b.dev, 0);
    ua = a.qp(qp_type::ud);
    ub = b.qp(qp_type::ud);
    REQUIRE(bring_up(*a.dev, ua, qp_type::ud, 0, {}) == errc{});
    REQUIRE(bring_up(*b.dev, ub, qp_type::ud, 0, {}) == errc{});
    ah = *a.dev->create_ah(a.pd, av_to(*b.dev));
    for (int i = 0; i < n_sessions; ++i) {
      const auto sport = static_cast<std::uint16_t>(first_port + i);
      REQUIRE(a.dev->bind_session(static_cast<std::uint32_t>(i + 1), tuple(*a.dev, *b.dev, sport), 7, ua) == errc{});
      REQUIRE(b.dev->bind_session(static_cast<std::uint32_t>(i + 1), tuple(*a.dev, *b.dev, sport), 9, ub) == errc{});
    }
    REQUIRE(a.dev->set_qp_sessions(ua, 7) == errc{});
    REQUIRE(b.dev->set_qp_sessions(ub, 9) == errc{});
  }
  // n messages from a (message k: msg_len bytes of pattern k), n receives posted at b (slot k);
  // returns the frames a sent, in the order it sent them.
  std::vector<frame_bytes> send(int n) {
    for (int k = 0; k < n; ++k) {
      const sge r = b.at(static_cast<std::size_t>(k) * slot, slot);
      REQUIRE(b.dev->post_recv(ub, {.wr_id = static_cast<std::uint64_t>(k), .sg_list = std::span(&r, 1)}) == errc{});
      const auto bytes = pattern_bytes(msg_len, static_cast<std::uint8_t>(k));
      std::copy(bytes.begin(), bytes.end(), a.buf.begin() + 0x80000 + static_cast<std::ptrdiff_t>(k * msg_len));
      const sge s = a.at(0x80000 + static_cast<std::size_t>(k) * msg_len, msg_len);
      REQUIRE(a.dev->post_send(ua, {.wr_id = static_cast<std::uint64_t>(k), .opcode = wr_opcode::send, .sg_list = std::span(&s, 1),
                                    .ah = ah, .remote_qpn = ub, .remote_qkey = 0x11111111}) == errc{});
    }
    fab.run_until(fab.now() + 1'000'000);
    std::vector<frame_bytes> out;
    while (auto f = fab.take(ra)) out.push_back(std::move(*f));
    return out;
  }
  void deliver(std::span<const std::byte> f) {
    fab.inject(rb, f);
    fab.run_until(fab.now() + 100'000);
  }
};

// The frame with another UDP source port (and its ICRC recomputed: the ports are covered).
frame_bytes with_sport(std::span<const std::byte> f, std::uint16_t sport) {
  auto r = ib::decode(f);
  REQUIRE(r);
  ib::roce_packet p = *r;
  p.udp.srcport = sport;
  p.given.icrc = false;  // recomputed
  frame_bytes out(*ib::frame_size(p));
  REQUIRE(ib::build(p, out));
  return out;
}

}  // namespace

TEST_CASE("sessions: a UD QP's messages go out round-robin on its group's source ports, each with its sequence number",
          "[rnic][sessions]") {
  session_pair s;
  const auto frames = s.send(12);
  REQUIRE(frames.size() == 12);
  for (std::size_t k = 0; k < frames.size(); ++k) {
    ib::roce_view v;
    REQUIRE(ib::inspect(frames[k], v).code == pushwire::wire::errc{});
    CHECK(v.udp().srcport == first_port + k % n_sessions);
    const auto p = flow::from_roce(v);
    CHECK(p.opcode == ib::opcode::ud_send_only_with_immediate);
    CHECK(p.imm == k);
  }
  CHECK(s.a.poll_send().size() == 12);
}

TEST_CASE("sessions: over 50 seeds of reordering and duplication the receiver delivers every message once, in order",
          "[rnic][sessions]") {
  for (std::uint32_t seed = 1; seed <= 50; ++seed) {
    INFO("seed " << seed);
    session_pair s;
    constexpr int n = 40;
    auto frames = s.send(n);
    REQUIRE(frames.size() == n);
    std::mt19937 rng(seed);
    // A permutation with bounded displacement (the window is 64), and every fifth frame twice.
    std::vector<std::size_t> order(n);
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<std::size_t> sends;
    for (std::size_t i : order) {
      sends.push_back(i);
      if (i % 5 == 0) sends.push_back(i);
    }
    for (std::size_t i : sends) s.deliver(frames[i]);
    const auto c = s.b.poll_recv();
    REQUIRE(c.size() == n);
    for (int k = 0; k < n; ++k) {
      CHECK(c[static_cast<std::size_t>(k)].wr_id == static_cast<std::uint64_t>(k));
      CHECK(c[static_cast<std::size_t>(k)].status == wc_status::success);
      CHECK(c[static_cast<std::size_t>(k)].imm == static_cast<std::uint32_t>(k));
      const auto want = pattern_bytes(msg_len, static_cast<std::uint8_t>(k));
      // UD: the receive buffer's first 40 bytes are the GRH.
      const auto at = s.b.buf.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(k) * slot + device::grh_size);
      CHECK(std::equal(want.begin(), want.end(), at));
    }
    CHECK(s.b.dev->counters().session_duplicate == (n + 4) / 5);
  }
}

TEST_CASE("security: a foreign session's or an unknown 5-tuple's message is dropped, nothing placed, no receive consumed",
          "[rnic][security][sessions]") {
  session_pair s;
  // Another QP's session on b: group 10, a port of its own.
  const std::uint32_t other = s.b.qp(qp_type::ud);
  REQUIRE(s.b.dev->bind_session(50, tuple(*s.a.dev, *s.b.dev, 0xD000), 10, other) == errc{});
  const auto frames = s.send(1);
  REQUIRE(frames.size() == 1);
  const auto snapshot = s.b.buf;
  s.deliver(with_sport(frames[0], 0xD000));
  CHECK(s.b.dev->counters().dropped_bad_frame == 0);
  CHECK(s.b.dev->counters().session_foreign == 1);
  s.deliver(with_sport(frames[0], 0xEEEE));
  CHECK(s.b.dev->counters().session_unknown_tuple == 1);
  CHECK(s.b.poll_recv().empty());
  CHECK(s.b.buf == snapshot);
  // The frame as sent is taken.
  s.deliver(frames[0]);
  const auto c = s.b.poll_recv();
  REQUIRE(c.size() == 1);
  CHECK(c[0].status == wc_status::success);
}

TEST_CASE("sessions: a message beyond the window is dropped and counted, and the sender resends nothing (UD)", "[rnic][sessions]") {
  session_pair s;
  const int n = static_cast<int>(device::session_window) + 2;
  const auto frames = s.send(n);
  REQUIRE(frames.size() == static_cast<std::size_t>(n));
  s.deliver(frames.back());  // sequence window + 1, with 0 expected
  CHECK(s.b.dev->counters().session_window_full == 1);
  for (int k = 0; k + 1 < n; ++k) s.deliver(frames[static_cast<std::size_t>(k)]);
  CHECK(s.b.poll_recv().size() == static_cast<std::size_t>(n - 1));
}

TEST_CASE("sessions: the table's owner calls and their errors", "[rnic][sessions]") {
  session_pair s;
  device& d = *s.b.dev;
  CHECK(d.bind_session(1, tuple(*s.a.dev, d, 0xC100), 9, s.ub) == errc::busy);           // session id bound
  CHECK(d.bind_session(99, tuple(*s.a.dev, d, first_port), 9, s.ub) == errc::busy);       // tuple bound
  flow::five_tuple tcp = tuple(*s.a.dev, d, 0xC100);
  tcp.proto = 6;
  CHECK(d.bind_session(99, tcp, 9, s.ub) == errc::invalid_argument);
  CHECK(d.unbind_session(1234) == errc::not_found);
  CHECK(d.unbind_session(1) == errc{});
  CHECK(d.sessions().size() == n_sessions - 1);
  for (std::uint32_t i = 0; d.sessions().size() < device::max_sessions; ++i)
    REQUIRE(d.bind_session(1000 + i, tuple(*s.a.dev, d, static_cast<std::uint16_t>(0x1000 + i)), 11, s.ub) == errc{});
  CHECK(d.bind_session(5000, tuple(*s.a.dev, d, 0x7000), 11, s.ub) == errc::no_resources);
  const std::uint32_t rc = s.a.qp(qp_type::rc);
  CHECK(s.a.dev->set_qp_sessions(rc, 7) == errc::invalid_argument);
  CHECK(s.a.dev->set_qp_sessions(0xABCDE, 7) == errc::not_found);
  // A group with no session: the message is not sent, and counted.
  REQUIRE(s.a.dev->set_qp_sessions(s.ua, 8) == errc{});
  const auto frames = s.send(1);
  CHECK(frames.empty());
  CHECK(s.a.dev->counters().session_not_sent == 1);
  (void)s.a.poll_send();
  // A session QP sends SEND only (its immediate carries the sequence number): anything else
  // fails where the device fetches it, as a local operation error.
  const sge g = s.a.at(0, 8);
  REQUIRE(s.a.dev->post_send(s.ua, {.wr_id = 77, .opcode = wr_opcode::send_with_imm, .sg_list = std::span(&g, 1), .ah = s.ah,
                                    .remote_qpn = s.ub, .remote_qkey = 0x11111111}) == errc{});
  s.fab.run_until(s.fab.now() + 1'000'000);
  const auto c = s.a.poll_send();
  REQUIRE(c.size() == 1);
  CHECK(c[0].wr_id == 77);
  CHECK(c[0].status == wc_status::local_qp_operation_error);
}
