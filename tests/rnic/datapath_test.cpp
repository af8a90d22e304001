// Card memory through the device (spec/rnic.md §15): two devices on two-socket platforms, each
// with a card on the HCA's socket (local) and one on the other (remote). Every local/remote
// combination of source and destination moves data byte-exact through the same post_send /
// post_recv; the per-path counters follow the selector; the modelled time of each transfer is
// the platform's cost, and a sweep through the device finds the selected path cheapest.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "harness.hpp"

using namespace pushwire;
using namespace pushwire::test::rnic;

namespace {

constexpr std::uint8_t local_card = 0, remote_card = 1;

platform_model two_socket_platform() {
  platform_model p;
  p.cards[local_card] = {.socket = 0};
  p.cards[remote_card] = {.socket = 1};
  p.card_count = 2;
  return p;
}

/// A side's two cards: 1 MiB of device memory each, registered.
struct cards {
  std::vector<std::byte> mem[2];
  memory_region mr[2];
  cards(side& s) {
    for (std::uint8_t c : {local_card, remote_card}) {
      mem[c].assign(1 << 20, std::byte{0});
      const auto va = reinterpret_cast<std::uintptr_t>(mem[c].data());
      mr[c] = *s.dev->reg_mr_card(s.pd, c, mem[c].data(), mem[c].size(), va, all_access);
    }
  }
  sge at(std::uint8_t c, std::size_t off, std::uint32_t len) {
    return {reinterpret_cast<std::uintptr_t>(mem[c].data() + off), len, mr[c].lkey};
  }
};

struct card_world {
  pair p;
  cards ca, cb;
  std::uint32_t qa, qb;
  explicit card_world(platform_model plat = two_socket_platform(), framing f = framing::roce)
      : p(f, 1, {}, [&] {
          device_config c;
          c.platform = plat;
          return c;
        }()),
        ca(p.a),
        cb(p.b) {
    std::tie(qa, qb) = p.connect(qp_type::rc, 4096);
  }
  /// Posts one send on a, runs until it completes; its status.
  wc_status send(const send_wr& wr) {
    REQUIRE(p.a.dev->post_send(qa, wr) == errc{});
    std::vector<work_completion> c;
    REQUIRE(p.fab.run([&] { return !(c = p.a.poll_send()).empty(); }, p.fab.now() + 2'000'000'000));
    return c[0].status;
  }
  const path_counters& at(const device& d, datapath path, data_direction dir) {
    return d.counters().paths[static_cast<std::size_t>(path)][static_cast<std::size_t>(dir)];
  }
};

constexpr auto in = data_direction::inbound, out = data_direction::outbound;

/// The seed's policy for two_socket_platform(), by hand (the crossover of the default costs is
/// 16000 bytes: spec/rnic.md §15): into the local card P2P, into the remote one proxied; out of
/// the remote card proxied, out of the local one P2P below 16000 bytes, proxied at or above.
datapath policy(std::uint8_t card, data_direction dir, std::uint64_t n) {
  if (card == remote_card) return datapath::proxied;
  if (dir == in) return datapath::p2p;
  return n < 16000 ? datapath::p2p : datapath::proxied;
}

}  // namespace

TEST_CASE("card memory: every local/remote combination of WRITE, SEND and READ moves the bytes exactly", "[rnic][platform]") {
  const std::uint32_t sizes[] = {4096, 256 * 1024};  // below and above the 16000-byte threshold
  for (std::uint8_t src : {local_card, remote_card})
    for (std::uint8_t dst : {local_card, remote_card})
      for (std::uint32_t n : sizes) {
        DYNAMIC_SECTION("from the " << (src == local_card ? "local" : "remote") << " card to the "
                                    << (dst == local_card ? "local" : "remote") << " card, " << n << " bytes") {
          card_world w;
          const auto data = pattern_bytes(n, static_cast<std::uint8_t>(src * 2 + dst + n % 251));
          std::copy(data.begin(), data.end(), w.ca.mem[src].begin() + 100);
          const platform_model plat = two_socket_platform();
          REQUIRE(plat.crossover() == 16000);
          const datapath out_path = policy(src, out, n), in_path = policy(dst, in, n);
          // WRITE: a's card out, b's card in
          const sge s = w.ca.at(src, 100, n);
          REQUIRE(w.send({.wr_id = 1, .opcode = wr_opcode::rdma_write, .sg_list = std::span(&s, 1),
                          .remote_addr = w.cb.at(dst, 300, n).addr, .rkey = w.cb.mr[dst].rkey}) == wc_status::success);
          CHECK(std::equal(data.begin(), data.end(), w.cb.mem[dst].begin() + 300));
          CHECK(w.at(*w.p.a.dev, out_path, out).transfers == 1);
          CHECK(w.at(*w.p.a.dev, out_path, out).bytes == n);
          CHECK(w.at(*w.p.a.dev, out_path, out).modelled_ns == Approx(plat.cost(out_path, out, src, n)));
          CHECK(w.at(*w.p.b.dev, in_path, in).transfers == 1);
          CHECK(w.at(*w.p.b.dev, in_path, in).bytes == n);
          CHECK(w.at(*w.p.b.dev, in_path, in).modelled_ns == Approx(plat.cost(in_path, in, dst, n)));
          // nothing went by the other paths
          std::uint64_t total = 0;
          for (const side* d : {&w.p.a, &w.p.b})
            for (auto path : {datapath::host, datapath::p2p, datapath::proxied})
              for (auto dir : {in, out}) total += w.at(*d->dev, path, dir).bytes;
          CHECK(total == 2u * n);
          // SEND into a receive in b's card
          const sge r = w.cb.at(dst, 0, n);
          REQUIRE(w.p.b.dev->post_recv(w.qb, {.wr_id = 7, .sg_list = std::span(&r, 1)}) == errc{});
          std::fill(w.cb.mem[dst].begin(), w.cb.mem[dst].end(), std::byte{0});
          REQUIRE(w.send({.wr_id = 2, .opcode = wr_opcode::send, .sg_list = std::span(&s, 1)}) == wc_status::success);
          CHECK(std::equal(data.begin(), data.end(), w.cb.mem[dst].begin()));
          CHECK(w.at(*w.p.b.dev, in_path, in).transfers == 2);
          // READ from b's card (outbound there) into a's card (inbound here)
          std::fill(w.ca.mem[src].begin(), w.ca.mem[src].end(), std::byte{0});
          const sge rd = w.ca.at(src, 0, n);
          REQUIRE(w.send({.wr_id = 3, .opcode = wr_opcode::rdma_read, .sg_list = std::span(&rd, 1),
                          .remote_addr = w.cb.at(dst, 0, n).addr, .rkey = w.cb.mr[dst].rkey}) == wc_status::success);
          CHECK(std::equal(data.begin(), data.end(), w.ca.mem[src].begin()));
          const datapath read_out = policy(dst, out, n), read_in = policy(src, in, n);
          CHECK(w.at(*w.p.b.dev, read_out, out).transfers == 1);
          CHECK(w.at(*w.p.b.dev, read_out, out).bytes == n);
          CHECK(w.at(*w.p.a.dev, read_in, in).transfers == 1);
          CHECK(w.at(*w.p.a.dev, read_in, in).bytes == n);
        }
      }
}

TEST_CASE("card memory: the device's modelled time is least with the selected threshold", "[rnic][platform]") {
  // One WRITE per size from a's local card, under the crossover and under thresholds that
  // force one path; the crossover's total modelled time is the least at every size.
  const platform_model plat = two_socket_platform();
  auto modelled = [](std::uint64_t threshold, std::uint32_t n) {
    platform_model p = two_socket_platform();
    p.outbound_threshold = threshold;
    card_world w(p);
    const sge s = w.ca.at(local_card, 0, n);
    REQUIRE(w.send({.wr_id = 1, .opcode = wr_opcode::rdma_write, .sg_list = std::span(&s, 1),
                    .remote_addr = w.p.b.addr(0), .rkey = w.p.b.mr.rkey}) == wc_status::success);
    double t = 0;
    for (auto path : {datapath::p2p, datapath::proxied}) t += w.at(*w.p.a.dev, path, out).modelled_ns;
    return t;
  };
  int worse_inverted = 0;
  for (std::uint32_t n : {64u, 1024u, 8192u, 15999u, 16384u, 32768u, 262144u, 1048576u - 4096u}) {
    INFO(n << " bytes");
    const double chosen = modelled(0, n), all_p2p = modelled(~std::uint64_t{0}, n), all_proxied = modelled(1, n);
    CHECK(chosen <= all_p2p);
    CHECK(chosen <= all_proxied);
    CHECK(chosen == Approx(std::min(plat.cost(datapath::p2p, out, local_card, n), plat.cost(datapath::proxied, out, local_card, n))));
    // the inverted policy: proxied below the crossover, P2P above
    const double inverted = n < plat.crossover() ? all_proxied : all_p2p;
    worse_inverted += inverted > chosen;
  }
  CHECK(worse_inverted == 8);
}

TEST_CASE("card memory: registration refuses a card the platform does not have", "[rnic][platform]") {
  side s(1, framing::roce);  // no platform: no cards
  std::vector<std::byte> m(4096);
  CHECK(s.dev->reg_mr_card(s.pd, 0, m.data(), m.size(), 0x1000, all_access).code() == errc::invalid_argument);
  device_config c;
  c.platform = two_socket_platform();
  side t(1, framing::roce, 1 << 16, 64, c);
  CHECK(t.dev->reg_mr_card(t.pd, 2, m.data(), m.size(), 0x1000, all_access).code() == errc::invalid_argument);
  CHECK(t.dev->reg_mr_card(t.pd + 100, 0, m.data(), m.size(), 0x1000, all_access).code() == errc::not_found);
  const auto mr = t.dev->reg_mr_card(t.pd, 1, m.data(), m.size(), 0x1000, all_access);
  REQUIRE(mr);
  CHECK(t.dev->memory().info(mr->lkey)->card == 1);
  CHECK(t.dev->rereg_mr(mr->lkey, m.data(), m.size(), all_access).code() == errc::invalid_argument);  // (a card's key stays)
  // host memory stays host memory
  CHECK(t.dev->memory().info(t.mr.lkey)->card == no_card);
  c.platform.hca_socket = 5;  // not valid
  side u(1, framing::roce, 1 << 16, 64, c);
  CHECK(u.dev->reg_mr_card(u.pd, 0, m.data(), m.size(), 0x1000, all_access).code() == errc::invalid_argument);
}

TEST_CASE("card memory: a message gathered from two proxied pieces arrives intact over cells and over RoCE, and a UD receive into a card counts its transfer", "[rnic][platform]") {
  for (framing f : {framing::roce, framing::cell}) {
    INFO((f == framing::cell ? "cells" : "roce"));
    card_world w(two_socket_platform(), f);
    // Two entries in the remote card (proxied: each piece passes through the one bounce
    // buffer), one packet: the first piece must not be overwritten by the second.
    constexpr std::uint32_t half = 700;
    const auto data = pattern_bytes(2 * half, 29);
    std::copy(data.begin(), data.begin() + half, w.ca.mem[remote_card].begin() + 5000);
    std::copy(data.begin() + half, data.end(), w.ca.mem[remote_card].begin() + 90000);
    const sge two[2] = {w.ca.at(remote_card, 5000, half), w.ca.at(remote_card, 90000, half)};
    const sge r = w.cb.at(local_card, 0, 2 * half);
    REQUIRE(w.p.b.dev->post_recv(w.qb, {.wr_id = 7, .sg_list = std::span(&r, 1)}) == errc{});
    REQUIRE(w.send({.wr_id = 1, .opcode = wr_opcode::send, .sg_list = std::span(two, 2)}) == wc_status::success);
    CHECK(std::equal(data.begin(), data.end(), w.cb.mem[local_card].begin()));
    CHECK(w.at(*w.p.a.dev, datapath::proxied, out).transfers == 2);  // one per entry
    CHECK(w.at(*w.p.a.dev, datapath::proxied, out).bytes == 2 * half);
    CHECK(w.at(*w.p.b.dev, datapath::p2p, in).transfers == 1);
  }
  for (framing f : {framing::roce, framing::cell}) {
    INFO((f == framing::cell ? "UD over cells" : "UD over roce"));
    pair p(f, 1, {}, [] {
      device_config c;
      c.platform = two_socket_platform();
      return c;
    }());
    cards cb(p.b);
    const std::uint32_t ua = p.a.qp(qp_type::ud), ub = p.b.qp(qp_type::ud);
    REQUIRE(bring_up(*p.a.dev, ua, qp_type::ud, 0, {}) == errc{});
    REQUIRE(bring_up(*p.b.dev, ub, qp_type::ud, 0, {}) == errc{});
    const std::uint32_t ah = *p.a.dev->create_ah(p.a.pd, av_to(*p.b.dev));
    const auto data = pattern_bytes(300, 3);
    std::copy(data.begin(), data.end(), p.a.buf.begin());
    const sge r = cb.at(remote_card, 0, 1024);  // the GRH space, then the payload
    REQUIRE(p.b.dev->post_recv(ub, {.wr_id = 9, .sg_list = std::span(&r, 1)}) == errc{});
    const sge s = p.a.at(0, 300);
    REQUIRE(p.a.dev->post_send(ua, {.wr_id = 1, .opcode = wr_opcode::send, .sg_list = std::span(&s, 1), .ah = ah, .remote_qpn = ub,
                                    .remote_qkey = 0x11111111}) == errc{});
    p.settle();
    const auto c = p.b.poll_recv();
    REQUIRE(c.size() == 1);
    REQUIRE(c[0].status == wc_status::success);
    CHECK(std::equal(data.begin(), data.end(), cb.mem[remote_card].begin() + 40));
    const path_counters& got = p.b.dev->counters().paths[static_cast<std::size_t>(datapath::proxied)][static_cast<std::size_t>(in)];
    CHECK(got.transfers == 1);
    CHECK(got.bytes == (f == framing::cell ? 300u : 340u));  // (over RoCE the GRH is written too)
  }
}
