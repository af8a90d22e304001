// pp::endpoint (spec/pp.md): a host and an I/O unit on two reference RNICs over the loopback
// fabric. Packets both ways arrive once, in order, byte-exact, by every carrier (SendData,
// WRITE with idata, WRITE + BufferRDMAIndicate); credits come back; CfgUtil is answered; a
// Get is granted; close() flushes both ways and loses nothing whose write completed; a lossy,
// duplicating, reordering link changes none of it.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <tuple>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <pushwire/pp/endpoint.hpp>
#include <pushwire/rnic/fabric.hpp>
#include <pushwire/wire/pcap.hpp>
#include <pushwire/ib/roce.hpp>

using namespace pushwire;

namespace {

rnic::port_config port_n(std::uint8_t n) {
  rnic::port_config p;
  p.mac = {0x02, 0, 0, 0, 0, n};
  p.gid = rnic::gid_v4(198, 18, 0, n);
  return p;
}

/// A packet's bytes: its number in the first 4, then a pattern of it.
std::vector<std::byte> packet_of(std::uint32_t id, std::size_t n) {
  std::vector<std::byte> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>((i * 31 + id * 7) & 0xFF);
  for (std::size_t i = 0; i < 4 && i < n; ++i) v[i] = static_cast<std::byte>(id >> (8 * i));
  return v;
}

struct world {
  rnic::loopback_fabric fab;
  rnic::device hdev, idev;
  std::vector<std::vector<std::byte>> to_iou, to_host;  // received
  std::vector<pp::state> host_states, iou_states;
  std::function<pp::cfg_answer(msg::cfg::request_code, std::span<const std::byte>)> iou_cfg;
  std::function<void(std::uint64_t, msg::cfg::request_code, msg::cfg::status, std::span<const std::byte>)> host_cfg_reply;
  std::unique_ptr<pp::endpoint> host, iou;

  explicit world(pp::config hc = {}, pp::config ic = {}, const rnic::link_config& link = {}, std::uint64_t seed = 1, bool forever = true)
      : fab(seed), hdev({.ports = {port_n(1)}, .retry_forever = forever}), idev({.ports = {port_n(2)}, .retry_forever = forever}) {
    REQUIRE(fab.link(hdev, 0, idev, 0, link) == rnic::errc{});
    if (ic.first_pool_ref == 1) ic.first_pool_ref = 0x81;
    host = std::make_unique<pp::endpoint>(
        hdev, hc,
        pp::handlers{.packet = [this](auto b) { to_host.emplace_back(b.begin(), b.end()); },
                     .cfg_reply = [this](std::uint64_t t, msg::cfg::request_code c, msg::cfg::status st,
                                         std::span<const std::byte> d) { if (host_cfg_reply) host_cfg_reply(t, c, st, d); },
                     .state_changed = [this](pp::state s) { host_states.push_back(s); }});
    iou = std::make_unique<pp::endpoint>(
        idev, ic,
        pp::handlers{.packet = [this](auto b) { to_iou.emplace_back(b.begin(), b.end()); },
                     .cfg_request = [this](msg::cfg::request_code c, std::span<const std::byte> d) { return iou_cfg ? iou_cfg(c, d) : pp::cfg_answer{}; },
                     .state_changed = [this](pp::state s) { iou_states.push_back(s); }});
    REQUIRE(host->ok());
    REQUIRE(iou->ok());
    REQUIRE(host->connect(iou->local()) == pp::errc{});
    REQUIRE(iou->connect(host->local()) == pp::errc{});
  }
  /// Runs the fabric, polling both ends, until done() or `limit` ns of virtual time pass.
  template <class F>
  bool run(F&& done, rnic::time_ns limit = 2'000'000'000) {
    return fab.run([&] {
      if (host) host->poll();
      if (iou) iou->poll();
      return done();
    }, fab.now() + limit);
  }
  void settle(rnic::time_ns t = 50'000'000) {
    run([] { return false; }, t);
  }
  /// Sends `n` packets of sizes from `size(i)` from `from`, waiting for credit when blocked.
  template <class Size>
  void stream(pp::endpoint& from, std::uint32_t n, Size&& size, std::uint32_t first_id = 0) {
    for (std::uint32_t i = 0; i < n; ++i) {
      const auto p = packet_of(first_id + i, size(i));
      pp::errc e{};
      REQUIRE(run([&] { return (e = from.send_packet(p)) != pp::errc::would_block; }));
      REQUIRE(e == pp::errc{});
    }
  }
};

/// Every packet 0..n-1 arrived exactly once, in order, byte-exact.
void check_in_order(const std::vector<std::vector<std::byte>>& got, std::uint32_t n, const auto& size, std::uint32_t first_id = 0) {
  REQUIRE(got.size() == n);
  for (std::uint32_t i = 0; i < n; ++i) {
    INFO("packet " << i);
    CHECK(got[i] == packet_of(first_id + i, size(i)));
  }
}

}  // namespace

TEST_CASE("endpoint: packets of every size both ways arrive once, in order, byte-exact, credits come back", "[pp]") {
  world w;
  REQUIRE(w.run([&] { return w.host->writable(2048) && w.iou->writable(2048); }));  // the pools were advertised
  const auto size = [](std::uint32_t i) { return std::size_t{1} + (i * 397) % 2048; };
  w.stream(*w.host, 1000, size);  // 1000 packets through 64 elements: credits recycle
  w.stream(*w.iou, 1000, size, 5000);
  w.settle();
  check_in_order(w.to_iou, 1000, size);
  check_in_order(w.to_host, 1000, size, 5000);
  const auto& hs = w.host->stats();
  CHECK(hs.as_send > 0);
  CHECK(hs.as_write_imm > 0);
  CHECK(hs.as_send + hs.as_write_imm == 1000);
  CHECK(hs.as_write_indicate == 0);
  CHECK(hs.pool_faults == 0);
  CHECK(w.iou->stats().pool_faults == 0);
  CHECK(w.iou->stats().packets_in == 1000);
  // Every element is home or lent again: nothing is held.
  CHECK(w.iou->owner().count(0x81, flow::owner_element::lent) == 64);
  CHECK(w.host->user().free_elements(1) == 64);
}

TEST_CASE("endpoint: SendData only up to the smaller send_max of the two ends", "[pp]") {
  world w({.send_max = 1024}, {.send_max = 128});
  REQUIRE(w.run([&] { return w.host->writable(2048); }));
  const auto size = [](std::uint32_t i) { return std::size_t{100} + i; };  // 100..299
  w.stream(*w.host, 200, size);
  w.settle();
  check_in_order(w.to_iou, 200, size);
  CHECK(w.host->stats().as_send == 29);  // 100..128
  CHECK(w.host->stats().as_write_imm == 171);
}

TEST_CASE("endpoint: without credit send_packet is would_block and sends nothing, the peer's releases bring it back", "[pp]") {
  world w({}, {.elements = 4});
  REQUIRE(w.run([&] { return w.host->writable(2048); }));
  const auto p = packet_of(1, 1500);
  // The I/O unit does not poll: its elements stay consumed.
  for (int i = 0; i < 4; ++i) REQUIRE(w.host->send_packet(p) == pp::errc{});
  CHECK(w.host->send_packet(p) == pp::errc::would_block);
  CHECK(!w.host->writable(1500));
  CHECK(w.host->stats().would_block == 1);
  CHECK(w.host->stats().packets_out == 4);
  CHECK(w.host->send_packet(packet_of(2, 100)) == pp::errc{});  // SendData needs no element
  w.settle();
  CHECK(w.host->writable(1500));
  CHECK(w.to_iou.size() == 5);
  CHECK(w.host->send_packet(p) == pp::errc{});
  CHECK(w.host->send_packet(std::vector<std::byte>(4096)) == pp::errc::too_large);  // the largest element is 2048
  CHECK(w.host->send_packet({}) == pp::errc::invalid_argument);
}

TEST_CASE("endpoint: pool references above 255 are indicated by BufferRDMAIndicate after the write completes", "[pp]") {
  world w({}, {.first_pool_ref = 0x100});
  REQUIRE(w.run([&] { return w.host->writable(2048); }));
  const auto size = [](std::uint32_t i) { return std::size_t{300} + i * 5; };  // 300..1795
  w.stream(*w.host, 300, size);
  w.settle();
  check_in_order(w.to_iou, 300, size);  // (no SendData among them: order is kept)
  CHECK(w.host->stats().as_write_indicate == 300);
  CHECK(w.host->stats().as_write_imm == 0);
  CHECK(w.iou->stats().pool_faults == 0);
}

TEST_CASE("endpoint: CfgUtil requests are answered with their transaction context", "[pp]") {
  world w;
  std::vector<std::tuple<std::uint64_t, msg::cfg::request_code, msg::cfg::status, std::vector<std::byte>>> replies;
  w.iou_cfg = [](msg::cfg::request_code c, std::span<const std::byte>) {
    pp::cfg_answer a;
    if (c == msg::cfg::request_code::get_mac_address) {
      a.status = msg::cfg::status::success;
      a.data = {std::byte{2}, std::byte{0xAA}, std::byte{0}, std::byte{0}, std::byte{0}, std::byte{1}};
    }
    return a;
  };
  w.host_cfg_reply = [&](std::uint64_t t, msg::cfg::request_code c, msg::cfg::status s, std::span<const std::byte> d) {
    replies.emplace_back(t, c, s, std::vector<std::byte>(d.begin(), d.end()));
  };
  std::uint64_t t1 = 0, t2 = 0;
  REQUIRE(w.host->cfg_request(msg::cfg::request_code::get_mac_address, {}, &t1) == pp::errc{});
  REQUIRE(w.host->cfg_request(msg::cfg::request_code::get_statistics, {}, &t2) == pp::errc{});
  CHECK(t1 != t2);
  REQUIRE(w.run([&] { return replies.size() == 2; }));
  CHECK(std::get<0>(replies[0]) == t1);
  CHECK(std::get<2>(replies[0]) == msg::cfg::status::success);
  CHECK(std::get<3>(replies[0]).size() == 6);
  CHECK(std::get<0>(replies[1]) == t2);
  CHECK(std::get<2>(replies[1]) == msg::cfg::status::unsupported_request);
}

TEST_CASE("endpoint: below the low-water mark the user asks for a pool, and the owner grants one", "[pp]") {
  world w({.low_water = 2, .get_count = 8}, {.elements = 4, .grantable_pools = 1});
  REQUIRE(w.run([&] { return w.host->writable(2048); }));
  const auto size = [](std::uint32_t) { return std::size_t{1500}; };
  w.stream(*w.host, 100, size);
  w.settle();
  check_in_order(w.to_iou, 100, size);
  CHECK(w.iou->owner().find(0x82).has_value());  // granted with the next free reference
  CHECK(w.host->user().free_elements(1500) == 4 + 8);
}

TEST_CASE("endpoint: implicit pools: the first write into a cold element pauses on a page-fault ACK, later writes do not", "[pp]") {
  const auto size = [](std::uint32_t) { return std::size_t{4096}; };
  SECTION("the pools advertised at connect") {
    // 1024-byte MTU: each write is FIRST, MIDDLE, LAST with immediate, and the fault is taken
    // on FIRST, which needs no receive, so the host reads the RNR-coded ACK as a page fault
    world w({.mtu = 1024}, {.elements = 4, .element_size = 4096, .mtu = 1024, .implicit_pools = true});
    REQUIRE(w.run([&] { return w.host->writable(4096); }));
    const auto p = w.host->user().find(0x81);
    REQUIRE(p.has_value());
    CHECK(w.host->user().at(*p).desc.implicit);  // the flag crossed in BufferRecvPool
    // one packet per element: every element cold, each first write pauses the host
    w.stream(*w.host, 4, size);
    w.settle();
    const auto faults = w.idev.counters().page_faults, pauses = w.hdev.counters().pauses;
    CHECK(faults == 4);
    CHECK(pauses == 4);
    // the elements are warm now: a hundred more writes, no fault, no pause
    w.stream(*w.host, 100, size, 4);
    w.settle();
    check_in_order(w.to_iou, 104, size);
    CHECK(w.idev.counters().page_faults == faults);
    CHECK(w.hdev.counters().pauses == pauses);
  }
  SECTION("explicit pools never pause") {
    world w({}, {.elements = 4, .element_size = 4096});
    REQUIRE(w.run([&] { return w.host->writable(4096); }));
    CHECK_FALSE(w.host->user().at(*w.host->user().find(0x81)).desc.implicit);
    w.stream(*w.host, 20, size);
    w.settle();
    check_in_order(w.to_iou, 20, size);
    CHECK(w.idev.counters().page_faults == 0);
    CHECK(w.hdev.counters().pauses == 0);
  }
  SECTION("a Get asking for implicit registration is granted an implicit pool, whose cold elements pause") {
    world w({.mtu = 1024, .low_water = 2, .get_count = 8, .get_implicit = true},
            {.elements = 4, .element_size = 4096, .grantable_pools = 1, .mtu = 1024});
    REQUIRE(w.run([&] { return w.host->writable(4096); }));
    w.stream(*w.host, 100, size);
    w.settle();
    check_in_order(w.to_iou, 100, size);
    const auto g = w.host->user().find(0x82);
    REQUIRE(g.has_value());
    CHECK(w.host->user().at(*g).desc.implicit);
    CHECK_FALSE(w.host->user().at(*w.host->user().find(0x81)).desc.implicit);
    CHECK(w.idev.counters().page_faults == 8);  // the granted pool's eight elements, each once
    CHECK(w.hdev.counters().pauses == 8);
  }
  SECTION("one-packet writes: the fault answers a WRITE with immediate ONLY, which reads as a genuine RNR; nothing is lost") {
    world w({}, {.elements = 4, .element_size = 4096, .implicit_pools = true});
    REQUIRE(w.run([&] { return w.host->writable(4096); }));
    w.stream(*w.host, 40, size);
    w.settle();
    check_in_order(w.to_iou, 40, size);
    CHECK(w.idev.counters().page_faults == 4);
    CHECK(w.hdev.counters().pauses == 0);
    CHECK(w.hdev.view(w.host->local().data_qpn)->retransmits >= 4);  // each faulted write waited, and went again
  }
  SECTION("implicit pools need acknowledged channels") {
    rnic::device d({.ports = {port_n(1)}});
    pp::endpoint e(d, {.transport = rnic::qp_type::uc, .implicit_pools = true}, {});
    CHECK_FALSE(e.ok());
  }
}

TEST_CASE("endpoint: setup refuses a Get for no element or for more than an owner grants", "[pp]") {
  rnic::device d({.ports = {port_n(1)}});
  for (std::uint32_t n : {0u, std::uint32_t{pp::max_elements} + 1, 0x8000'0000u}) {
    INFO(n);
    pp::endpoint e(d, {.low_water = 4, .get_count = n}, {});
    CHECK(e.setup_error() == pp::errc::invalid_argument);
  }
  pp::endpoint fine(d, {.low_water = 4, .get_count = pp::max_elements}, {});
  CHECK(fine.ok());
  pp::endpoint never(d, {.low_water = 0, .get_count = 0}, {});  // (never asks: the count is not used)
  CHECK(never.ok());
}

TEST_CASE("endpoint: close() flushes both ways, every packet whose send was accepted arrives, nothing is sent after", "[pp]") {
  world w;
  REQUIRE(w.run([&] { return w.host->writable(2048); }));
  const auto size = [](std::uint32_t i) { return std::size_t{257} + i % 1700; };
  for (std::uint32_t i = 0; i < 40; ++i) REQUIRE(w.host->send_packet(packet_of(i, size(i))) == pp::errc{});
  REQUIRE(w.host->close() == pp::errc{});
  CHECK(w.host->send_packet(packet_of(99, 300)) == pp::errc::not_connected);
  REQUIRE(w.run([&] { return w.host->current() == pp::state::closed && w.iou->current() == pp::state::closed; }));
  check_in_order(w.to_iou, 40, size);
  CHECK(w.host_states == std::vector<pp::state>{pp::state::connected, pp::state::closing, pp::state::closed});
  CHECK(w.iou_states == std::vector<pp::state>{pp::state::connected, pp::state::closing, pp::state::closed});
  CHECK(w.host->stats().pool_faults == 0);
  CHECK(w.iou->stats().pool_faults == 0);
  CHECK(w.iou->owner().state_of(0x81) == flow::pool_state::flushed);
  CHECK(w.host->owner().state_of(1) == flow::pool_state::flushed);
}

TEST_CASE("endpoint: over a lossy, duplicating, reordering, corrupting link every packet arrives once, in order", "[pp][faults]") {
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    DYNAMIC_SECTION("seed " << seed) {
      rnic::link_config link;
      link.a_to_b = link.b_to_a = {.loss = 0.03, .duplicate = 0.03, .reorder = 0.03, .corrupt = 0.01};
      world w({}, {}, link, seed);
      REQUIRE(w.run([&] { return w.host->writable(2048) && w.iou->writable(2048); }));
      std::mt19937 rng(static_cast<std::uint32_t>(seed));
      std::vector<std::size_t> sizes(200);
      for (auto& s : sizes) s = 1 + rng() % 2048;
      const auto size = [&](std::uint32_t i) { return sizes[i]; };
      w.stream(*w.host, 200, size);
      w.stream(*w.iou, 200, size);
      REQUIRE(w.run([&] { return w.to_iou.size() == 200 && w.to_host.size() == 200; }));
      w.settle(10'000'000);
      check_in_order(w.to_iou, 200, size);
      check_in_order(w.to_host, 200, size);
      CHECK(w.host->current() == pp::state::connected);
    }
  }
}

TEST_CASE("endpoint: a peer that vanishes fails the endpoint (retries exceeded), and nothing more is sent", "[pp]") {
  world w({}, {}, {}, 1, /*forever=*/false);
  REQUIRE(w.run([&] { return w.host->writable(2048); }));
  w.iou.reset();  // its QPs are destroyed: nothing answers
  REQUIRE(w.host->send_packet(packet_of(1, 1500)) == pp::errc{});
  REQUIRE(w.run([&] { return w.host->current() == pp::state::failed; }));
  CHECK(w.host_states.back() == pp::state::failed);
  CHECK(w.host->send_packet(packet_of(2, 1500)) == pp::errc::not_connected);
}

namespace {

/// The transports of the frames a fabric tap wrote: how many of each, and how many were responses.
struct tapped {
  std::size_t frames = 0, uc = 0, responses = 0;
};
tapped read_tap(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::vector<char> text{std::istreambuf_iterator<char>(in), {}};
  auto r = wire::pcap::reader::open(std::as_bytes(std::span(text.data(), text.size())));
  REQUIRE(r.has_value());
  tapped t;
  while (true) {
    auto rec = r->next();
    REQUIRE(rec.has_value());
    if (!*rec) break;
    const auto p = ib::decode((*rec)->data);
    REQUIRE(p.has_value());
    ++t.frames;
    t.uc += p->op->tp == ib::transport::uc;
    t.responses += !p->op->request;
  }
  return t;
}

}  // namespace

TEST_CASE("endpoint: over UC channels (Fig. 6's unacknowledged channels) packets cross in order, and no ACK crosses", "[pp][uc]") {
  const std::string tap = (std::filesystem::temp_directory_path() / ("pw_uc_" + std::to_string(::getpid()) + ".pcap")).string();
  {
    world w({.transport = rnic::qp_type::uc}, {.transport = rnic::qp_type::uc});
    REQUIRE(w.fab.tap(tap) == rnic::errc{});
    REQUIRE(w.run([&] { return w.host->writable(2048) && w.iou->writable(2048); }));
    const auto size = [](std::uint32_t i) { return std::size_t{1} + (i * 397) % 2048; };
    w.stream(*w.host, 500, size);
    w.stream(*w.iou, 500, size, 5000);
    w.settle();
    check_in_order(w.to_iou, 500, size);
    check_in_order(w.to_host, 500, size, 5000);
    CHECK(w.host->stats().as_write_imm > 0);
    CHECK(w.host->stats().pool_faults == 0);
    CHECK(w.host->user().free_elements(1) == 64);  // every element came back: nothing was lost
  }
  const tapped t = read_tap(tap);
  std::filesystem::remove(tap);
  CHECK(t.frames > 1000);
  CHECK(t.uc == t.frames);     // every frame a UC opcode
  CHECK(t.responses == 0);     // no ACK, no NAK
}

TEST_CASE("endpoint: over UC channels a lossy link loses packets, and never duplicates or reorders them", "[pp][uc][faults]") {
  rnic::link_config link;
  link.a_to_b = link.b_to_a = {.loss = 0.03};
  world w({.transport = rnic::qp_type::uc}, {.transport = rnic::qp_type::uc}, link, 3);
  REQUIRE(w.run([&] { return w.host->writable(2048) && w.iou->writable(2048); }, 200'000'000));
  const auto size = [](std::uint32_t i) { return std::size_t{1} + (i * 397) % 2048; };
  std::uint32_t sent = 0;
  for (std::uint32_t i = 0; i < 300; ++i) {  // as many as credit lets through: lost writes keep theirs
    pp::errc e{};
    w.run([&] { return (e = w.host->send_packet(packet_of(i, size(i)))) != pp::errc::would_block; }, 5'000'000);
    if (e != pp::errc{}) break;
    ++sent;
  }
  w.settle();
  REQUIRE(sent > 0);
  CHECK(w.to_iou.size() < sent);  // some were lost, and nothing sent them again
  // What arrived is a subsequence of what was sent: each once, in order.
  std::uint32_t next = 0;
  for (const auto& p : w.to_iou) {
    while (next < sent && packet_of(next, size(next)) != p) ++next;
    REQUIRE(next < sent);
    ++next;
  }
  CHECK(w.host->current() == pp::state::connected);
}
