// rnic::platform_model (spec/rnic.md §15): the P2P / proxied cost model and the selector.
// The expected costs and the crossover are worked by hand from the default costs below, not
// computed by the model.
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <vector>

#include <pushwire/rnic/platform.hpp>

using namespace pushwire;
using rnic::data_direction;
using rnic::datapath;

namespace {

/// Two sockets, the HCA on socket 0; card 0 on socket 0 (local), card 1 on socket 1 (remote).
rnic::platform_model two_sockets() {
  rnic::platform_model p;
  p.cards[0] = {.socket = 0};
  p.cards[1] = {.socket = 1};
  p.card_count = 2;
  return p;
}

// Defaults: local outbound P2P = 2 * 500 + b / 3; proxied = 2000 + 2 * 500 + b / 12 + b / 8.
// Equal at b = 2000 / (1/3 - 5/24) = 16000 bytes.
static_assert([] {
  rnic::platform_model p;
  p.cards[0] = {.socket = 0};
  p.card_count = 1;
  return p.valid() && p.crossover() == 16000;
}());

/// Sizes of a sweep: 1 byte to 16 MiB, every power of two and the sizes either side of it.
std::vector<std::uint64_t> sweep_sizes() {
  std::vector<std::uint64_t> v;
  for (std::uint64_t b = 1; b <= (std::uint64_t{1} << 24); b *= 2)
    for (std::uint64_t s : {b - 1, b, b + 1})
      if (s) v.push_back(s);
  for (std::uint64_t s : {15999, 16000, 16001}) v.push_back(s);
  return v;
}

/// Sweep: how many (card, direction, size) the selector gives a path slower than another.
int slower_choices(const rnic::platform_model& p) {
  int bad = 0;
  for (std::uint8_t c = 0; c < p.card_count; ++c)
    for (auto dir : {data_direction::inbound, data_direction::outbound})
      for (std::uint64_t b : sweep_sizes()) {
        const datapath chosen = p.select(c, dir, b);
        const double t = p.cost(chosen, dir, c, b);
        for (auto other : {datapath::p2p, datapath::proxied})
          if (p.cost(other, dir, c, b) < t) ++bad;
      }
  return bad;
}

}  // namespace

TEST_CASE("platform: the selector follows the seed's policy", "[rnic][platform]") {
  const auto p = two_sockets();
  REQUIRE(p.valid());
  CHECK(p.crossover() == 16000);
  CHECK(p.threshold() == 16000);
  // host memory: the ordinary DMA
  CHECK(p.select(std::nullopt, data_direction::inbound, 100) == datapath::host);
  // inbound: direct into the HCA's socket, proxied into the other, at every size
  for (std::uint64_t b : {1u, 4096u, 1u << 20}) {
    CHECK(p.select(0, data_direction::inbound, b) == datapath::p2p);
    CHECK(p.select(1, data_direction::inbound, b) == datapath::proxied);
    CHECK(p.select(1, data_direction::outbound, b) == datapath::proxied);
  }
  // outbound from the local card: P2P below the threshold, proxied at and above it
  CHECK(p.select(0, data_direction::outbound, 15999) == datapath::p2p);
  CHECK(p.select(0, data_direction::outbound, 16000) == datapath::proxied);
  // a configured threshold wins over the crossover
  auto q = p;
  q.outbound_threshold = 4096;
  CHECK(q.select(0, data_direction::outbound, 4095) == datapath::p2p);
  CHECK(q.select(0, data_direction::outbound, 4096) == datapath::proxied);
}

TEST_CASE("platform: modelled costs, worked by hand", "[rnic][platform]") {
  const auto p = two_sockets();
  // 12000 bytes
  CHECK(p.cost(datapath::host, data_direction::inbound, 0, 12000) == Approx(500 + 1000));
  CHECK(p.cost(datapath::p2p, data_direction::inbound, 0, 12000) == Approx(500 + 1000));
  CHECK(p.cost(datapath::p2p, data_direction::outbound, 0, 12000) == Approx(1000 + 4000));
  CHECK(p.cost(datapath::proxied, data_direction::outbound, 0, 12000) == Approx(2000 + 1000 + 1000 + 1500));
  // the remote card: the bounce buffer's DMA crosses the socket link (150 ns each way)
  CHECK(p.cost(datapath::proxied, data_direction::inbound, 1, 12000) == Approx(2000 + 650 + 1000 + 1500));
  CHECK(p.cost(datapath::proxied, data_direction::outbound, 1, 12000) == Approx(2000 + 1300 + 1000 + 1500));
  // P2P across sockets is not routed by default
  CHECK(p.cost(datapath::p2p, data_direction::inbound, 1, 1) == std::numeric_limits<double>::infinity());
  auto q = p;
  q.costs.cross_p2p_rate = 1;
  CHECK(q.cost(datapath::p2p, data_direction::inbound, 1, 12000) == Approx(650 + 12000));
  // a value that is no datapath is never the cheaper one
  CHECK(p.cost(static_cast<datapath>(7), data_direction::inbound, 0, 1) == std::numeric_limits<double>::infinity());
}

TEST_CASE("platform: a size sweep finds the selected path fastest, and an inverted threshold slower", "[rnic][platform]") {
  auto p = two_sockets();
  CHECK(slower_choices(p) == 0);
  // other costs move the crossover, and the selector with it
  p.costs.p2p_read_rate = 1.5;
  p.costs.proxy_latency = 5000;
  CHECK(p.crossover() != 16000);
  CHECK(slower_choices(p) == 0);
  p.calibrate(1 << 30, 1 << 27);  // a copy at 8 bytes per ns
  CHECK(p.costs.copy_rate == 8);
  CHECK(slower_choices(p) == 0);
  // thresholds away from the crossover choose slower paths: the sweep notices
  for (std::uint64_t t : {std::uint64_t{1}, p.crossover() / 4, p.crossover() * 4, ~std::uint64_t{0}}) {
    auto inv = p;
    inv.outbound_threshold = t;
    INFO("threshold " << t);
    CHECK(slower_choices(inv) > 0);
  }
}

TEST_CASE("platform: invalid models and calibrations are refused", "[rnic][platform]") {
  auto p = two_sockets();
  REQUIRE(p.valid());
  auto q = p;
  q.hca_socket = 2;
  CHECK_FALSE(q.valid());
  q = p;
  q.sockets = 0;
  CHECK_FALSE(q.valid());
  q = p;
  q.sockets = rnic::max_sockets + 1;
  CHECK_FALSE(q.valid());
  q = p;
  q.cards[1].socket = 2;
  CHECK_FALSE(q.valid());
  q = p;
  q.card_count = rnic::max_cards + 1;
  CHECK_FALSE(q.valid());
  q = p;
  q.costs.copy_rate = 0;
  CHECK_FALSE(q.valid());
  q = p;
  q.costs.p2p_read_rate = std::numeric_limits<double>::infinity();
  CHECK_FALSE(q.valid());
  q = p;
  q.costs.pcie_latency = -1;
  CHECK_FALSE(q.valid());
  q = p;
  q.costs.cross_p2p_rate = std::numeric_limits<double>::quiet_NaN();
  CHECK_FALSE(q.valid());
  CHECK_FALSE(q.calibrate(0, 10));
  CHECK_FALSE(q.calibrate(10, 0));
  // a card index past the cards is never local: proxied, not out of bounds
  CHECK(p.select(std::uint8_t{200}, data_direction::inbound, 10) == datapath::proxied);
}
