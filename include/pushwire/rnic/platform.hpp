// The platform around the HCA (seed 000, "optimizing network data flows within constrained
// systems"): sockets, the socket the HCA sits on, and PCIe cards whose device memory RDMA
// reads and writes. Data between a card and the HCA moves either direct, PCIe peer to peer
// (P2P), or proxied through a host bounce buffer and a copy. This header is the cost model of
// both paths, in virtual time, and the selector that picks one per transfer (spec/rnic.md §15).
// Also the platform's text form (apply_platform). Pure functions of their arguments: no clock,
// no I/O.
#pragma once

#include <array>
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <pushwire/rnic/core.hpp>

namespace pushwire::rnic {

/// Where a transfer's device memory is, as the HCA sees it.
enum class datapath : std::uint8_t {
  host = 0,     ///< host memory: the HCA's ordinary DMA, no card involved
  p2p = 1,      ///< PCIe peer to peer between the card and the HCA
  proxied = 2,  ///< through a host bounce buffer on the card's socket and a copy
};
inline constexpr std::array<wire::named_value, 3> datapath_names{{
    {datapath::host, "host"}, {datapath::p2p, "p2p"}, {datapath::proxied, "proxied"}}};
constexpr std::span<const wire::named_value> wire_enum_names(datapath) { return datapath_names; }

/// Which way the data moves: inbound from the wire into memory (the HCA writes it), outbound
/// from memory to the wire (the HCA reads it).
enum class data_direction : std::uint8_t { inbound = 0, outbound = 1 };
inline constexpr std::array<wire::named_value, 2> data_direction_names{{
    {data_direction::inbound, "inbound"}, {data_direction::outbound, "outbound"}}};
constexpr std::span<const wire::named_value> wire_enum_names(data_direction) { return data_direction_names; }

/// A PCIe card with device memory (a GPU, an FPGA, an NVMe controller's memory buffer).
struct card {
  /// The socket whose root complex it hangs off, 0..platform_model::sockets - 1.
  std::uint8_t socket = 0;
};

/// Costs of the model. Latencies in ns; rates in bytes per ns (numerically GB/s). The
/// defaults are a two-socket Xeon with a PCIe 3.0 x16 HCA (spec/rnic.md §15).
struct platform_costs {
  /// One PCIe transaction between the HCA and a root complex: a posted write is visible, or a
  /// read request's first completion returns, after this (a read pays it twice).
  double pcie_latency = 500;
  /// PCIe x16 payload rate, for the HCA's DMA to host memory and a card's DMA to host memory.
  double pcie_rate = 12;
  /// Rate of P2P writes into a card on the HCA's socket (posted: as fast as host memory).
  double p2p_write_rate = 12;
  /// Rate of P2P reads from a card on the HCA's socket: root complexes forward peer reads
  /// slowly, which is why large outbound transfers go proxied.
  double p2p_read_rate = 3;
  /// One crossing of the socket link (UPI/QPI), and its rate for host-memory traffic.
  double socket_latency = 150;
  double socket_rate = 20;
  /// Rate of P2P across the socket link (either way); 0: the platform does not route peer
  /// traffic between sockets (the default, as on two-socket Xeons), so it costs infinity. The
  /// selector never chooses it.
  double cross_p2p_rate = 0;
  /// The proxy's cost per transfer: being told, and setting up the copy.
  double proxy_latency = 2000;
  /// The bounce-buffer copy's rate, card memory to host memory or back (memcpy or the card's
  /// DMA). platform_model::calibrate sets it from a measurement.
  double copy_rate = 8;
};

inline constexpr std::size_t max_sockets = 8;
inline constexpr std::size_t max_cards = 16;

/// The platform: its sockets, the HCA's socket, its cards, the costs, and the outbound
/// threshold of a card on the HCA's socket.
struct platform_model {
  std::uint8_t sockets = 2;      ///< 1..max_sockets
  std::uint8_t hca_socket = 0;   ///< 0..sockets - 1
  std::array<card, max_cards> cards{};
  std::uint8_t card_count = 0;   ///< cards[0..card_count - 1] exist
  platform_costs costs{};
  /// Outbound transfers from a card on the HCA's socket of at least this many bytes go
  /// proxied, smaller ones P2P. 0: the crossover of the cost model (crossover()).
  std::uint64_t outbound_threshold = 0;

  /// The model is usable: sockets, HCA socket, cards' sockets in range, every cost finite and
  /// positive (latencies may be 0).
  constexpr bool valid() const {
    if (sockets < 1 || sockets > max_sockets || hca_socket >= sockets || card_count > max_cards) return false;
    for (std::size_t i = 0; i < card_count; ++i)
      if (cards[i].socket >= sockets) return false;
    const platform_costs& c = costs;
    constexpr double inf = std::numeric_limits<double>::infinity();  // (NaN fails every comparison)
    for (double l : {c.pcie_latency, c.socket_latency, c.proxy_latency})
      if (!(l >= 0 && l < inf)) return false;
    for (double r : {c.pcie_rate, c.p2p_write_rate, c.p2p_read_rate, c.socket_rate, c.copy_rate})
      if (!(r > 0 && r < inf)) return false;
    return c.cross_p2p_rate >= 0 && c.cross_p2p_rate < inf;
  }
  /// The card exists and is on the HCA's socket.
  constexpr bool local(std::uint8_t card_index) const { return card_index < card_count && cards[card_index].socket == hca_socket; }

  /// Modelled ns to move `bytes` between card `card_index` and the wire by `path` (host: as if
  /// the bytes were in host memory on the HCA's socket).
  constexpr double cost(datapath path, data_direction dir, std::uint8_t card_index, std::uint64_t bytes) const {
    return cost_at(path, dir, path == datapath::host || local(card_index), static_cast<double>(bytes));
  }
  /// The same for a card on the HCA's socket (near) or on another one.
  constexpr double cost_at(datapath path, data_direction dir, bool near, double b) const {
    const platform_costs& c = costs;
    const double hops = near ? 0 : c.socket_latency;
    const bool in = dir == data_direction::inbound;
    switch (path) {
      case datapath::host: return (in ? 1 : 2) * c.pcie_latency + b / c.pcie_rate;
      case datapath::p2p: {
        if (!near && c.cross_p2p_rate == 0) return std::numeric_limits<double>::infinity();
        if (in) return c.pcie_latency + hops + b / (near ? c.p2p_write_rate : c.cross_p2p_rate);
        return 2 * (c.pcie_latency + hops) + b / (near ? c.p2p_read_rate : c.cross_p2p_rate);
      }
      case datapath::proxied: {
        // The bounce buffer is host memory on the card's socket: the HCA's DMA to it crosses
        // the socket link when the card is remote; the copy stays on the card's socket.
        const double rate = near ? c.pcie_rate : std::min(c.pcie_rate, c.socket_rate);
        return c.proxy_latency + (in ? 1 : 2) * (c.pcie_latency + hops) + b / rate + b / c.copy_rate;
      }
    }
    return std::numeric_limits<double>::infinity();  // (not a datapath: never the cheaper)
  }

  /// The smallest size at which a local card's outbound transfer is modelled no slower proxied
  /// than P2P, found by bisection over the modelled costs; UINT64_MAX when P2P is never slower
  /// below 2^63 bytes.
  constexpr std::uint64_t crossover() const {
    const auto proxied_wins = [&](std::uint64_t b) {
      const double x = static_cast<double>(b);
      return cost_at(datapath::proxied, data_direction::outbound, true, x) <= cost_at(datapath::p2p, data_direction::outbound, true, x);
    };
    std::uint64_t lo = 0, hi = std::uint64_t{1} << 63;  // the costs are lines: once proxied wins, it keeps winning
    if (!proxied_wins(hi)) return ~std::uint64_t{0};
    while (lo < hi) {
      const std::uint64_t mid = lo + (hi - lo) / 2;
      if (proxied_wins(mid)) hi = mid;
      else lo = mid + 1;
    }
    return lo;
  }
  /// The threshold in force: outbound_threshold, or the crossover when that is 0.
  constexpr std::uint64_t threshold() const { return outbound_threshold ? outbound_threshold : crossover(); }

  /// The selector (seed 000). Host memory: host. Inbound: P2P into a card on the HCA's socket,
  /// proxied into one on another socket. Outbound: from a card on another socket proxied; from
  /// one on the HCA's socket P2P below threshold(), proxied at or above it. Only the threshold
  /// follows the costs; the rest is the seed's policy whatever the costs say. A card index
  /// past card_count is taken as another socket's (proxied). Each call bisects for the
  /// crossover when outbound_threshold is 0: a caller on a hot path keeps threshold().
  constexpr datapath select(std::optional<std::uint8_t> card_index, data_direction dir, std::uint64_t bytes) const {
    if (!card_index) return datapath::host;
    if (!local(*card_index)) return datapath::proxied;
    if (dir == data_direction::inbound) return datapath::p2p;
    return bytes < threshold() ? datapath::p2p : datapath::proxied;
  }

  /// Sets costs.copy_rate from a measurement: `bytes` copied in `ns`. False (nothing changed)
  /// when either is 0.
  constexpr bool calibrate(std::uint64_t bytes, std::uint64_t ns) {
    if (bytes == 0 || ns == 0) return false;
    costs.copy_rate = static_cast<double>(bytes) / static_cast<double>(ns);
    return true;
  }
};

/// One setting of a platform's text form (the verbs provider's PUSHWIRE_VERBS_PLATFORM,
/// spec/verbs.md §3): `sockets` (1..max_sockets), `hca` (the HCA's socket), `card` (one more
/// card, on that socket; up to max_cards), `threshold` (outbound_threshold in bytes; 0: the
/// crossover), and each cost by its platform_costs name (`pcie_latency`, `pcie_rate`,
/// `p2p_write_rate`, `p2p_read_rate`, `socket_latency`, `socket_rate`, `cross_p2p_rate`,
/// `proxy_latency`, `copy_rate`: ns, or bytes per ns). Empty: applied; otherwise why not (p
/// unchanged). Sockets are checked against `sockets` by valid(), once every setting is in.
inline std::string apply_platform(platform_model& p, std::string_view key, std::string_view value) {
  const auto why = [&](const char* what) { return std::string(key) + "=" + std::string(value) + ": " + what; };
  platform_costs& c = p.costs;
  double* cost = key == "pcie_latency"     ? &c.pcie_latency
                 : key == "pcie_rate"      ? &c.pcie_rate
                 : key == "p2p_write_rate" ? &c.p2p_write_rate
                 : key == "p2p_read_rate"  ? &c.p2p_read_rate
                 : key == "socket_latency" ? &c.socket_latency
                 : key == "socket_rate"    ? &c.socket_rate
                 : key == "cross_p2p_rate" ? &c.cross_p2p_rate
                 : key == "proxy_latency"  ? &c.proxy_latency
                 : key == "copy_rate"      ? &c.copy_rate
                                           : nullptr;
  if (cost) {
    double v = 0;
    if (!parse_number(value, v) || !(v >= 0 && v < std::numeric_limits<double>::infinity())) return why("a finite number, 0 or more");
    *cost = v;
    return {};
  }
  if (key == "threshold") {
    std::uint64_t t = 0;
    if (!parse_number(value, t)) return why("a number of bytes");
    p.outbound_threshold = t;
    return {};
  }
  unsigned n = 0;
  if (key != "sockets" && key != "hca" && key != "card")
    return why("not one of sockets, hca, card, threshold, or a cost (pcie_latency, pcie_rate, p2p_write_rate, p2p_read_rate, "
               "socket_latency, socket_rate, cross_p2p_rate, proxy_latency, copy_rate)");
  if (!parse_number(value, n) || n >= max_sockets + (key == "sockets")) return why("a socket: 0 .. 7 (sockets: 1 .. 8)");
  if (key == "sockets") {
    if (n == 0) return why("a socket: 0 .. 7 (sockets: 1 .. 8)");
    p.sockets = static_cast<std::uint8_t>(n);
  } else if (key == "hca") {
    p.hca_socket = static_cast<std::uint8_t>(n);
  } else {
    if (p.card_count == max_cards) return why("16 cards at most");
    p.cards[p.card_count++] = {.socket = static_cast<std::uint8_t>(n)};
  }
  return {};
}

}  // namespace pushwire::rnic
