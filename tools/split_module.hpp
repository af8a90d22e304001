// The split-model driver's two modules (seed 003, IV; spec/split-model.md): pushwire-host gives
// the host's IP stack a TAP interface; pushwire-iou owns the LAN NIC (a TAP whose far side is
// the LAN). Both are the same loop over one reference RNIC port on a UDP socket (net/udp.hpp),
// the push-push endpoint (pp/endpoint.hpp) and its connection manager (pp/cm.hpp):
//   TAP frame -> pp::endpoint::send_packet -> RDMA write / SendData -> peer -> its TAP.
// The I/O unit's LAN NIC is a pp::nic_agent over its TAP (the receive filter included); the host
// initializes it over CfgUtil, mirrors its MAC, MTU, carrier and speed on its interface, and
// passes on what `ip link set` changes there (MAC, MTU, promiscuity). One I/O unit may serve
// several hosts: each has its own connection, endpoint and pools, and its own function of the
// LAN NIC (MAC, filter, statistics); LAN frames are steered to them by destination MAC.
#pragma once

#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <deque>
#include <list>
#include <functional>

#include <pushwire/flow/tcp_agg.hpp>

#include <pushwire/net/address.hpp>
#include <pushwire/net/fault_queue.hpp>
#include <pushwire/net/loop.hpp>
#include <pushwire/net/packet.hpp>
#include <pushwire/net/tap.hpp>
#include <pushwire/net/udp.hpp>
#ifdef PUSHWIRE_HAVE_XDP
#include <pushwire/net/xdp.hpp>
#endif
#include <pushwire/pp/cm.hpp>
#include <pushwire/pp/endpoint.hpp>
#include <pushwire/pp/lan.hpp>
#include <pushwire/pp/nic.hpp>

namespace pushwire::tools {

inline volatile sig_atomic_t stop_requested = 0;

struct module_options {
  pp::role role = pp::role::host;
  std::array<std::uint8_t, 4> local{};
  /// --peer: the other module's fabric address; the I/O unit takes one per host it serves
  /// (1..max_hosts), the host one.
  std::vector<std::array<std::uint8_t, 4>> peers{};
  std::string tap = "pw0";
  /// I/O unit: its LAN NIC's factory MAC (the host's interface gets it); with several hosts the
  /// k-th (from 0, in --peer order) gets its last octet plus k.
  wire::mac_address mac{0x02, 0x50, 0x57, 0, 0, 1};
  std::uint32_t mtu = 1500;
  bool mtu_given = false;  ///< host: ask the I/O unit for this MTU (else take the LAN's)
  /// The fabric link's MTU: the path MTU is the largest IBTA MTU whose packets fit in it.
  std::uint32_t fabric_mtu = 1500;
  /// Faults injected into what this module sends on the fabric (spec/net.md §2).
  rnic::direction_faults faults{};
  std::uint64_t seed = 1;
  bool verbose = false;
  /// UDP offloads of the fabric socket (spec/net.md §1): GSO on request (pushwire peers only), GRO unless refused.
  bool gso = false, gro = true;
  /// --framing cell --interface IF: the fabric is cells on IF instead of RoCEv2 over UDP (the
  /// CM's hellos still go over UDP on IF's address): over AF_XDP where it opens on IF and takes
  /// the fabric MTU (1.4x AF_PACKET's throughput through the driver: spec/net.md §6), else over
  /// AF_PACKET; --af-packet: AF_PACKET always (frames over AF_XDP bypass captures on IF).
  bool cells = false;
  std::string interface{};
  bool af_packet = false;
  /// --xdp IF: the fabric (RoCEv2, or cells) moves over AF_XDP on IF (spec/net.md §6); where
  /// AF_XDP cannot be had, one line on stderr and the socket above.
  std::string xdp{};
  /// --busy-poll US: after a turn that moved frames, turns without sleeping for this long
  /// (net::linger_policy::spin); unset: net::default_busy_poll() (off on 2 cores or fewer).
  std::optional<rnic::time_ns> busy_poll{};
  /// --pool-ref N: the first reference of this module's pools (0: 0x01 on the host, 0x81 on the
  /// I/O unit). Above 255 idata cannot name them: every write into them is indicated with
  /// BufferRDMAIndicate (the seed's "buffer pool > 256").
  std::uint32_t pool_ref = 0;
  /// --uc: both channels are UC queue pairs, the document's unacknowledged connected channels
  /// (Fig. 6): no ACK and no retransmission (spec/split-model.md, UC channels). Both modules.
  bool uc = false;
  /// I/O unit: TCP segments from the LAN are joined (flow::tcp_aggregator) and cross as one GSO
  /// packet (spec/split-model.md, TCP aggregation); on unless --no-tcp-aggregation.
  bool tcp_aggregation = true;
  /// --tcp-aggregation-timeout US: how long an aggregation stays open after its first segment.
  /// 1 ms: a LAN segment crosses this driver about every 100 us at its rate, and the TCP
  /// timestamp option, which must not change within an aggregate, ticks every 1 ms on Linux.
  rnic::time_ns aggregation_timeout = 1'000'000;
  /// I/O unit, --lan-loss P / --lan-reorder P: faults in what the LAN delivers, after the
  /// receive filter and before the aggregator (a lossy, reordering LAN for it and for TCP).
  rnic::direction_faults lan_faults{};
  /// --lan-emulation (host only): the other members' fabric addresses, and this member's LID.
  bool lan = false;
  std::vector<std::array<std::uint8_t, 4>> members{};
  std::uint16_t lid = 0;
};

/// The most hosts one I/O unit serves (spec/split-model.md, Sharing).
inline constexpr std::size_t max_hosts = 16;

inline bool parse_ip(const char* s, std::array<std::uint8_t, 4>& out) {
  in_addr a{};
  if (::inet_pton(AF_INET, s, &a) != 1) return false;
  std::memcpy(out.data(), &a, 4);
  return true;
}

/// A whole decimal or 0x number in [lo, hi], or nullopt (trailing characters included).
inline std::optional<unsigned long long> parse_number(const char* v, unsigned long long lo, unsigned long long hi) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long n = std::strtoull(v, &end, 0);
  if (!end || end == v || *end || errno || n < lo || n > hi) return std::nullopt;
  return n;
}
/// A whole fraction in [0, 1], or nullopt.
inline std::optional<double> parse_fraction(const char* v) {
  char* end = nullptr;
  const double p = std::strtod(v, &end);
  if (!end || end == v || *end || !(p >= 0 && p <= 1)) return std::nullopt;
  return p;
}

/// The options both kinds of module share (--tap, --mtu, --fabric-mtu, faults, --seed, -v):
/// 1 taken with no value, 2 taken with its value, 0 not one of them, -1 a bad value.
inline int parse_shared(std::string_view a, const char* v, module_options& o) {
  if (a == "-v") return o.verbose = true, 1;
  if (a == "--gso") return o.gso = true, 1;
  if (a == "--no-gro") return o.gro = false, 1;
  if (a == "--uc") return o.uc = true, 1;
  if (a == "--af-packet") return o.af_packet = true, 1;
  if (!v) return 0;
  if (a == "--tap") return std::strlen(v) < 16 ? (o.tap = v, 2) : -1;
  if (a == "--busy-poll") {
    const auto us = parse_number(v, 0, 1'000'000);
    if (!us) return -1;
    return o.busy_poll = static_cast<rnic::time_ns>(*us) * 1000, 2;
  }
  if (a == "--mtu") {
    o.mtu = static_cast<std::uint32_t>(std::strtoul(v, nullptr, 10));
    o.mtu_given = true;
    return o.mtu < pp::nic_mtu_min || o.mtu > pp::nic_mtu_max ? -1 : 2;
  }
  if (a == "--fabric-mtu") {
    o.fabric_mtu = static_cast<std::uint32_t>(std::strtoul(v, nullptr, 10));
    return o.fabric_mtu < 576 || o.fabric_mtu > 65535 ? -1 : 2;
  }
  if (a == "--loss" || a == "--dup" || a == "--reorder" || a == "--corrupt") {
    const auto p = parse_fraction(v);
    if (!p) return -1;
    (a == "--loss" ? o.faults.loss : a == "--dup" ? o.faults.duplicate : a == "--reorder" ? o.faults.reorder : o.faults.corrupt) = *p;
    return 2;
  }
  if (a == "--seed") return o.seed = std::strtoull(v, nullptr, 10), 2;
  if (a == "--pool-ref") {
    const auto r = parse_number(v, 1, 0xFFFFFFFFull - pp::max_pools);
    if (!r) return -1;
    return o.pool_ref = static_cast<std::uint32_t>(*r), 2;
  }
  if (a == "--framing") return std::string_view(v) == "cell" ? (o.cells = true, 2) : std::string_view(v) == "roce" ? (o.cells = false, 2) : -1;
  if (a == "--interface") return std::strlen(v) < 16 ? (o.interface = v, 2) : -1;
  if (a == "--xdp") return std::strlen(v) > 0 && std::strlen(v) < 16 ? (o.xdp = v, 2) : -1;
  return 0;
}

/// The CM's datagram socket, bound to (local, pp::cm_port); -1 and errno on failure.
inline int open_cm_socket(const std::array<std::uint8_t, 4>& local) {
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(pp::cm_port);
  std::memcpy(&a.sin_addr, local.data(), 4);
  if (fd < 0 || ::bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
    const int e = errno;
    if (fd >= 0) ::close(fd);
    errno = e;
    return -1;
  }
  return fd;
}
inline void send_cm(int fd, const std::array<std::uint8_t, 4>& to_ip, std::span<const std::byte> b) {
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(pp::cm_port);
  std::memcpy(&to.sin_addr, to_ip.data(), 4);
  (void)::sendto(fd, b.data(), b.size(), MSG_DONTWAIT, reinterpret_cast<const sockaddr*>(&to), sizeof to);
}

/// How both modules' loops sleep while traffic is recent: at most 1 ms at a time for 100 ms after
/// a frame moved (ping p50 through the driver here: 0.33-0.36 ms without, 0.23-0.27 ms with;
/// bench/results.md).
inline constexpr net::linger_policy linger{.window = 100'000'000, .tick = 1'000'000};
/// linger with the module's busy polling (--busy-poll, or the machine's default).
inline net::linger_policy linger_of(const module_options& o) {
  net::linger_policy l = linger;
  l.spin = o.busy_poll ? *o.busy_poll : net::default_busy_poll();
  return l;
}

/// A device with one RoCE port at fabric address `local`, sending from UDP 4791 (net/udp.hpp).
inline rnic::device_config fabric_device(const std::array<std::uint8_t, 4>& local, std::uint8_t mac_low, std::uint32_t port_mtu = 4096) {
  rnic::port_config p;
  p.mac = {0x02, 0x50, 0x57, 0x00, 0x00, mac_low};
  p.gid = rnic::gid_v4(local[0], local[1], local[2], local[3]);
  p.udp_sport = ib::roce_port;
  p.mtu = port_mtu;
  rnic::device_config c;
  c.ports = {p};
  c.retry_forever = true;  // liveness is the CM's (spec/pp.md §7)
  return c;
}

using net::path_mtu_for;

inline int module_usage(const char* prog, const char* why) {
  if (why) std::fprintf(stderr, "%s: %s\n", prog, why);
  std::fprintf(stderr,
               "usage: %s --local IP --peer IP [--tap NAME] [--mtu N] [--fabric-mtu N]%s\n"
               "       [--loss P] [--dup P] [--reorder P] [--corrupt P] [--seed S] [--gso] [--no-gro]\n"
               "       [--framing roce|cell --interface IF [--af-packet]] [--xdp IF] [--busy-poll US] [--pool-ref N] [--uc] [-v]\n"
               "  --local IP   this module's fabric address (RoCEv2 on UDP 4791, CM on UDP %u)\n"
               "  --peer IP    the other module's fabric address; an I/O unit takes one per host it serves (at most %zu),\n"
               "               the k-th host's LAN MAC is --mac with k added to its last octet\n"
               "  --tap NAME   the TAP interface to create or attach (default %s)\n"
               "  --mtu N      the interface MTU (default 1500)\n"
               "  --fabric-mtu N  the fabric link's MTU (default 1500): the RoCE path MTU is the largest that fits\n"
               "  --loss P ...    faults injected into what this module sends (fractions: 0.05 = 5%%), seeded\n"
               "  --gso        UDP GSO on the fabric socket (pushwire peers only: segments carry IP ids 1, 2, ...)\n"
               "  --no-gro     no UDP GRO on the fabric socket\n"
               "  --framing cell --interface IF  the fabric is cells on IF (the hellos stay on UDP): over AF_XDP where\n"
               "               it opens on IF and takes --fabric-mtu, else AF_PACKET\n"
               "  --af-packet  cells over AF_PACKET always (captures on IF then see them; AF_XDP's bypass them)\n"
               "  --xdp IF     the fabric (RoCEv2 or cells) over AF_XDP on IF, which has --local (the UDP socket or\n"
               "               AF_PACKET when AF_XDP cannot be had; spec/net.md)\n"
               "  --busy-poll US  after traffic, poll without sleeping for US microseconds (default 50 on more than\n"
               "               2 cores, 0 on fewer)\n"
               "  --pool-ref N the first reference of this module's pools (default 0x01 host, 0x81 I/O unit; the two\n"
               "               must not overlap); above 255 every write into them is indicated by BufferRDMAIndicate\n"
               "  --uc         unacknowledged (UC) channels: no ACK, no retransmission; both modules must say it\n"
               "spec/split-model.md\n",
               prog, std::strstr(prog, "iou") ? " [--mac MAC] [--no-tcp-aggregation | --tcp-aggregation-timeout US] [--lan-loss P] [--lan-reorder P]" : "", pp::cm_port, max_hosts,
               std::strstr(prog, "iou") ? "lan0" : "pw0");
  return 2;
}

inline std::optional<module_options> parse_module(int argc, char** argv, pp::role role) {
  module_options o;
  o.role = role;
  if (role == pp::role::iou) o.tap = "lan0";
  bool have_local = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (const int k = parse_shared(a, v, o); k != 0) {
      if (k < 0) return std::nullopt;
      i += k - 1;
    } else if (a == "--local" && v && parse_ip(v, o.local)) {
      have_local = true, ++i;
    } else if (a == "--peer" && v && parse_ip(v, o.peers.emplace_back())) {
      ++i;
    } else if ((a == "--tcp-aggregation" || a == "--no-tcp-aggregation") && role == pp::role::iou) {
      o.tcp_aggregation = a == "--tcp-aggregation";
    } else if (a == "--tcp-aggregation-timeout" && v && role == pp::role::iou) {
      const auto us = parse_number(v, 1, 1'000'000);
      if (!us) return std::nullopt;
      o.aggregation_timeout = *us * 1000, ++i;
    } else if ((a == "--lan-loss" || a == "--lan-reorder") && v && role == pp::role::iou) {
      const auto p = parse_fraction(v);
      if (!p) return std::nullopt;
      (a == "--lan-loss" ? o.lan_faults.loss : o.lan_faults.reorder) = *p;
      o.lan_faults.max_reorder = 200'000;  // held back up to 200 us: later frames pass it
      ++i;
    } else if (a == "--mac" && v && role == pp::role::iou) {  // a unicast, nonzero MAC
      unsigned m[6];
      char extra = 0;
      if (std::sscanf(v, "%x:%x:%x:%x:%x:%x%c", &m[0], &m[1], &m[2], &m[3], &m[4], &m[5], &extra) != 6) return std::nullopt;
      for (int k = 0; k < 6; ++k) {
        if (m[k] > 0xFF) return std::nullopt;
        o.mac[static_cast<std::size_t>(k)] = static_cast<std::uint8_t>(m[k]);
      }
      if (!pp::nic_mac_ok(o.mac)) return std::nullopt;
      ++i;
    } else {
      return std::nullopt;
    }
  }
  if (!have_local || o.peers.empty() || (o.cells && o.interface.empty() && o.xdp.empty())) return std::nullopt;
  if (o.af_packet && (!o.cells || o.interface.empty() || !o.xdp.empty())) return std::nullopt;  // --af-packet: cells on --interface only
  if (o.peers.size() > (role == pp::role::iou ? max_hosts : 1)) return std::nullopt;
  for (std::size_t k = 0; k < o.peers.size(); ++k)
    if (std::find(o.peers.begin(), o.peers.begin() + static_cast<std::ptrdiff_t>(k), o.peers[k]) != o.peers.begin() + static_cast<std::ptrdiff_t>(k))
      return std::nullopt;  // a host twice
  if (o.mac[5] + o.peers.size() - 1 > 0xFF) return std::nullopt;  // the hosts' MACs would wrap
  return o;
}

/// A module's fabric: RoCEv2 on a UDP socket (net/udp.hpp), cells on an interface over AF_XDP
/// (net/xdp.hpp) or AF_PACKET (net/packet.hpp), or RoCEv2 over AF_XDP (--xdp IF).
class fabric_link {
  // f(the transport in use); defined before the members that use it (deduced return types).
  template <class Self, class F>
  static decltype(auto) visit(Self& self, F&& f) {
#ifdef PUSHWIRE_HAVE_XDP
    if (self.xdp_) return f(*self.xdp_);
#endif
    if (self.udp_) return f(*self.udp_);
    return f(*self.pkt_);
  }
  template <class F>
  decltype(auto) with(F&& f) const {
    return visit(*this, std::forward<F>(f));
  }
  template <class F>
  decltype(auto) with(F&& f) {
    return visit(*this, std::forward<F>(f));
  }
 public:
  explicit fabric_link(const module_options& o) : cells_(o.cells) {
    const char* who = o.role == pp::role::iou ? "pushwire-iou" : "pushwire-host";
    // Cells on an interface go over AF_XDP unless --af-packet, and only where it takes the
    // fabric MTU (a smaller cell would cost more than AF_XDP saves); --xdp IF asks for it.
    const bool automatic = o.cells && o.xdp.empty() && !o.af_packet && !o.interface.empty();
#ifdef PUSHWIRE_HAVE_XDP
    if (!o.xdp.empty() || automatic) {
      const std::string& ifname = o.xdp.empty() ? o.interface : o.xdp;
      xdp_.emplace(net::xdp_config{.interface = ifname, .faults = o.faults, .seed = o.seed});
      if (xdp_->ok() && (!automatic || xdp_->usable_mtu() >= o.fabric_mtu)) {
        if (automatic)
          std::fprintf(stderr, "%s: cells over AF_XDP on %s (%s XDP, %s mode; --af-packet for AF_PACKET)\n", who, ifname.c_str(),
                       xdp_->native() ? "native" : "generic", xdp_->zero_copy() ? "zero-copy" : "copy");
        return;
      }
      if (xdp_->ok())
        std::fprintf(stderr, "%s: AF_XDP on %s takes an MTU of %u, below --fabric-mtu %u; using AF_PACKET\n", who, ifname.c_str(),
                     xdp_->usable_mtu(), o.fabric_mtu);
      else
        std::fprintf(stderr, "%s: AF_XDP on %s unavailable (%s: %s); using %s\n", who, ifname.c_str(), xdp_->why().c_str(),
                     std::strerror(xdp_->error()), o.cells ? "AF_PACKET" : "the UDP socket");
      xdp_.reset();
    }
#else
    if (!o.xdp.empty() || automatic)
      std::fprintf(stderr, "%s: AF_XDP unavailable (built without libxdp); using %s\n", who, o.cells ? "AF_PACKET" : "the UDP socket");
#endif
    if (o.cells) pkt_.emplace(net::packet_config{.interface = o.interface.empty() ? o.xdp : o.interface, .faults = o.faults, .seed = o.seed});
    else udp_.emplace(net::udp_config{.address = o.local, .faults = o.faults, .seed = o.seed, .gso = o.gso, .gro = o.gro});
  }
  bool ok() const { return with([](const auto& t) { return t.ok(); }); }
  int error() const { return with([](const auto& t) { return t.error(); }); }
  const char* what() const { return on_xdp() ? "AF_XDP" : udp_ ? "UDP 4791" : "AF_PACKET"; }
  int fd() const { return with([](const auto& t) { return t.fd(); }); }
  bool cells() const { return cells_; }
  bool on_xdp() const {
#ifdef PUSHWIRE_HAVE_XDP
    return xdp_.has_value();
#else
    return false;
#endif
  }
  /// The fabric MTU the link carries: --fabric-mtu, and over AF_XDP at most what the interface
  /// and the UMEM take.
  std::uint32_t fabric_mtu(const module_options& o) const {
#ifdef PUSHWIRE_HAVE_XDP
    if (xdp_) return std::min(o.fabric_mtu, xdp_->usable_mtu());
#endif
    return o.fabric_mtu;
  }
  /// The device the link serves: one port at `local`, RoCE from UDP 4791 (or AF_XDP), or cells
  /// from the interface's MAC, each cell as large as the fabric MTU allows (at most 8192 bytes).
  rnic::device_config device(const module_options& o, std::uint8_t mac_low) const {
    rnic::device_config c = fabric_device(o.local, mac_low);
#ifdef PUSHWIRE_HAVE_XDP
    if (xdp_) c.ports[0].mac = xdp_->mac();
#endif
    if (cells_) {
      c.ports[0].framing = rnic::framing::cell;
      if (pkt_) c.ports[0].mac = pkt_->mac();
      // Ethernet 14 + cell header 18 + VA/MH 12 + ACK 8 + idata 4 + CRCs 8 = 64 around a cell's data.
      c.ports[0].cell_payload = std::min<std::uint32_t>(8192, fabric_mtu(o) - 64);
    }
    return c;
  }
  /// Attaches the link to the loop as the device's port 0.
  void attach(net::device_loop& loop) {
    with([&](auto& t) { loop.attach(0, t); });
  }
  std::uint64_t sent() const { return with([](const auto& t) { return std::uint64_t{t.stats().sent}; }); }
  std::uint64_t received() const { return with([](const auto& t) { return std::uint64_t{t.stats().received}; }); }
  std::uint64_t lost() const { return with([](const auto& t) { return std::uint64_t{t.stats().lost}; }); }

 private:
  bool cells_ = false;
  std::optional<net::udp_port> udp_;
  std::optional<net::packet_port> pkt_;
#ifdef PUSHWIRE_HAVE_XDP
  std::optional<net::xdp_port> xdp_;
#endif
};

/// One module's life: returns the exit status (0 after SIGINT / SIGTERM and a clean flush).
/// The host serves one peer; the I/O unit serves each host of its --peer list through a session
/// of its own (spec/split-model.md, Sharing): a connector, an endpoint with its pools, a function
/// of the LAN NIC (MAC, MTU, filter, statistics), an aggregator, and a queue to the host.
class module {
 public:
  explicit module(const module_options& o)
      : o_(o), link_(o), dev_(link_.device(o, static_cast<std::uint8_t>(o.role))), tap_(o.tap, /*offloads=*/true) {
    const bool iou = o.role == pp::role::iou;
    for (std::size_t k = 0; k < o.peers.size(); ++k) {
      auto s = std::make_unique<session>(session{.peer = o.peers[k],
                                                 .cm = pp::connector({.role = o.role, .incarnation = std::random_device{}() | (std::uint64_t{std::random_device{}()} << 32) | 1})});
      s->name = iou ? "pushwire-iou" : "pushwire-host";
      if (o.peers.size() > 1) s->name += " (host " + ip_text(o.peers[k]) + ")";
      s->mtu = o.mtu;
      s->lan_rng.seed(o.seed ^ 0x4C414E ^ k);
      s->emit = [this, p = s.get()](const flow::tcp_aggregate& a) { lan_out(*p, a); };
      sessions_.push_back(std::move(s));
    }
  }

  int run() {
    const char* who = o_.role == pp::role::host ? "pushwire-host" : "pushwire-iou";
    const bool iou = o_.role == pp::role::iou;
    if (!link_.ok()) return fail(who, link_.what(), link_.error());
    if (!tap_.ok()) return fail(who, ("TAP " + o_.tap).c_str(), tap_.error());
    if ((cm_fd_ = open_cm_socket(o_.local)) < 0) return fail(who, "CM socket", errno);
    (void)tap_.set_mtu(o_.mtu);
    (void)tap_.set_carrier(iou);  // the host's: down until the I/O unit says the link is up
    (void)tap_.set_up(true);
    want_mtu_ = o_.mtu_given ? o_.mtu : 0;
    if (!iou)
      if (const unsigned ix = tap_.index(); ix == 0 || !watch_.emplace(ix).ok()) return fail(who, "rtnetlink", watch_ ? watch_->error() : ENODEV);
    for (std::size_t k = 0; k < sessions_.size(); ++k) {
      session& s = *sessions_[k];
      if (iou) {
        wire::mac_address m = o_.mac;  // host k's factory MAC: --mac's last octet plus k
        m[5] = static_cast<std::uint8_t>(m[5] + k);
        s.nic.emplace(m, o_.mtu);
        if (o_.tcp_aggregation) s.agg.emplace(flow::tcp_agg_config{.timeout = o_.aggregation_timeout});
      }
      make_endpoint(s);
    }
    std::printf("%s: fabric %u.%u.%u.%u, peer", who, o_.local[0], o_.local[1], o_.local[2], o_.local[3]);
    for (const auto& s : sessions_) std::printf(" %s", ip_text(s->peer).c_str());
    std::printf(", interface %s\n", tap_.name().c_str());
    std::fflush(stdout);
    std::vector<std::byte> frame(65536 + 64);
    rnic::time_ns closing_since = 0;
    bool tap_ready = true;
    // One loop over the fabric link, the CM's socket and the TAP (net/loop.hpp): it sleeps until
    // one of them is readable or a deadline comes (the device's, the CMs' hellos, a frame held
    // for credit, the host's statistics request, the close).
    net::device_loop loop(dev_);
    loop.linger(linger_of(o_));
    link_.attach(loop);
    loop.watch(cm_fd_, [&](rnic::time_ns now) { cm_read(now); });
    if (watch_) loop.watch(watch_->fd(), [&](rnic::time_ns) {
      if (watch_->changed()) interface_changed();
    });
    loop.watch(tap_.fd(), [&](rnic::time_ns) { tap_ready = true; }, [&] { return !backlogged(); });
    loop.deadline([&] { return earliest([](const session& s) { return s.cm.next_deadline(); }); });
    loop.deadline([&] { return earliest([](const session& s) { return s.agg ? s.agg->next_deadline() : std::nullopt; }); });
    loop.deadline([&] { return earliest([](const session& s) { return net::next_due(s.lan_held); }); });
    loop.deadline([&] { return earliest([](const session& s) -> std::optional<rnic::time_ns> {
      if (!s.out.empty()) return s.held_since + hold_for;
      return std::nullopt;
    }); });
    loop.deadline([&]() -> std::optional<rnic::time_ns> {
      if (!iou && host().ep->current() == pp::state::connected) return std::min(next_stats_, next_link_);
      return std::nullopt;
    });
    loop.deadline([&]() -> std::optional<rnic::time_ns> {
      return closing_since ? std::optional<rnic::time_ns>{closing_since + close_for} : std::nullopt;
    });
    auto work = [&](rnic::time_ns now) {
      now_ = now;
      const std::uint64_t written = tap_writes_;
      for (auto& s : sessions_) {
        apply(*s, s->cm.tick(now), now);
        s->ep->poll();
      }
      // The kernel often answers a frame written to the TAP before write() returns (a ping's
      // reply, a TCP ACK): read the TAP in the same turn, so the answer leaves with the ACK.
      tap_ready = tap_ready || tap_writes_ != written;
      // Frames from the stack (host) or the LAN (I/O unit) go to the peer while it is there; on
      // the I/O unit through each host's receive filter (steered by MAC), LAN faults and
      // aggregator. Without credit a host's frames wait in its queue and the TAP is not read (its
      // queue backs up into the stack's qdisc) until credit returns, for at most hold_for; then
      // they are dropped. What an aggregator holds goes when a flush rule ends it (PSH, a gap,
      // ...) or its timeout comes (--tcp-aggregation-timeout).
      for (auto& s : sessions_) {
        if (s->agg) s->agg->expire(now, s->emit);
        if (lan_faulty()) lan_release(*s, now);
      }
      // Each round reads one frame (unless the TAP is empty or a queue holds it back) and sends
      // what the queues hold (frames between hosts too) while credit lasts.
      int k = 0;
      for (; k < 64; ++k) {
        bool read = false;
        if (tap_ready && !backlogged()) {
          if (const std::size_t n = tap_.read(frame); n == 0) tap_ready = false;
          else from_tap(std::span<const std::byte>(frame).first(n), now), read = true;
        }
        for (auto& s : sessions_) drain(*s, now);
        if (!read && (!tap_ready || backlogged())) break;
      }
      tap_ready = tap_ready && k == 64;  // more may wait: read again next turn
      // The host asks for the LAN NIC's link state four times a second (a LAN going down takes
      // its carrier down within 250 ms and a round trip), and its statistics every second.
      if (!iou && host().ep->current() == pp::state::connected) {
        pp::endpoint& ep = *host().ep;
        if (now >= next_link_) (void)ep.cfg_request(msg::cfg::request_code::get_link_state), next_link_ = now + link_every;
        if (init_sent_ && now - init_sent_ > 1'000'000'000) initialize_nic();  // unanswered (lost over UC): again
        if (now >= next_stats_) (void)ep.cfg_request(msg::cfg::request_code::get_statistics), next_stats_ = now + 1'000'000'000;
      }
    };
    // Closed: every session that was connected at the signal has flushed both books (one that
    // was not has nothing to flush).
    auto all_closed = [&] {
      for (const auto& s : sessions_)
        if (s->closing && s->ep->current() != pp::state::closed) return false;
      return true;
    };
    while (true) {
      (void)loop.wait(loop.timeout(net::monotonic_ns(), 1'000'000'000));
      const rnic::time_ns now = net::monotonic_ns();
      loop.turn(now, work);
      if (stop_requested && !closing_since) {
        closing_since = now;
        for (auto& s : sessions_) s->closing = s->ep->close() == pp::errc{};
      }
      if (closing_since && (all_closed() || now - closing_since > close_for)) break;
    }
    // Let the last control messages leave.
    const rnic::time_ns until = net::monotonic_ns() + 50'000'000;
    for (rnic::time_ns now = net::monotonic_ns(); now < until; now = net::monotonic_ns()) {
      (void)loop.wait(loop.timeout(now, until - now));
      loop.turn(net::monotonic_ns(), [&](rnic::time_ns) {
        for (auto& s : sessions_) s->ep->poll();
      });
    }
    for (const auto& s : sessions_) exit_line(*s);
    ::close(cm_fd_);
    return all_closed() ? 0 : 1;
  }

 private:
  struct lan_pending {
    rnic::time_ns at = 0;
    std::vector<std::byte> bytes;
  };
  /// A frame's counts: frames and bytes (without the virtio-net header).
  struct frame_counts {
    std::uint64_t frames = 0, bytes = 0;
    void add(std::size_t packet) { ++frames, bytes += packet > net::vnet_hdr_size ? packet - net::vnet_hdr_size : 0; }
  };
  /// One peer: the host's I/O unit, or one of the I/O unit's hosts.
  struct session {
    std::array<std::uint8_t, 4> peer{};
    pp::connector cm;
    std::string name{};
    std::unique_ptr<pp::endpoint> ep{};
    std::optional<pp::nic_agent> nic{};           ///< I/O unit: this host's function of the LAN NIC
    std::optional<flow::tcp_aggregator> agg{};    ///< I/O unit, unless --no-tcp-aggregation
    std::uint32_t mtu = 1500;                     ///< I/O unit: the MTU this host's function has
    std::deque<std::vector<std::byte>> out{};     ///< packets for the peer (the first waiting for credit since held_since)
    rnic::time_ns held_since = 0;
    std::uint64_t dropped = 0;                    ///< packets for the peer dropped (no credit for hold_for, no connection, a full queue)
    bool closing = false;                         ///< connected at SIGTERM: its close (Flush) was started
    frame_counts rx{}, tx{};                      ///< I/O unit: frames the LAN gave this host, and it gave the LAN
    std::uint64_t tx_errors = 0;                  ///< I/O unit: frames of this host the TAP refused
    net::send_queue<lan_pending> lan_held{};            ///< with LAN faults: frames held back
    std::mt19937_64 lan_rng{};
    struct {
      std::uint64_t lost = 0, corrupted = 0, held = 0, duplicated = 0;
    } lan_faults{};
    std::span<const std::byte> in{};              ///< the packet lan_in() is pushing
    std::function<void(const flow::tcp_aggregate&)> emit{};
  };

  static int fail(const char* who, const char* what, int err) {
    std::fprintf(stderr, "%s: %s: %s\n", who, what, std::strerror(err));
    return 1;
  }
  static std::string ip_text(const std::array<std::uint8_t, 4>& ip) {
    char b[16];
    std::snprintf(b, sizeof b, "%u.%u.%u.%u", ip[0], ip[1], ip[2], ip[3]);
    return b;
  }
  session& host() { return *sessions_.front(); }
  template <class F>
  std::optional<rnic::time_ns> earliest(F&& f) const {
    std::optional<rnic::time_ns> t;
    for (const auto& s : sessions_)
      if (const auto d = f(*s); d && (!t || *d < *t)) t = d;
    return t;
  }
  /// The TAP is not read: the host's one packet waits for credit (its TAP's queue backs up into
  /// the stack), or on the I/O unit with several hosts, one host's queue is full (queue_cap).
  bool backlogged() const {
    const std::size_t limit = sessions_.size() == 1 ? 1 : queue_cap;
    for (const auto& s : sessions_)
      if (s->out.size() >= limit) return true;
    return false;
  }
  /// A frame the TAP gave (its virtio-net header first): the host's goes to its peer; on the
  /// I/O unit, to each host whose function's filter takes it (frames none takes: unclaimed_).
  void from_tap(std::span<const std::byte> packet, rnic::time_ns now) {
    if (o_.role == pp::role::host) return enqueue(host(), packet, now);
    bool claimed = false;
    for (auto& s : sessions_) claimed = to_host(*s, packet, now) || claimed;
    if (!claimed) ++unclaimed_;
  }
  /// A LAN frame (or another host's) offered to host s: its filter, then LAN faults, then its
  /// aggregator. False when the filter dropped it.
  bool to_host(session& s, std::span<const std::byte> packet, rnic::time_ns now) {
    const auto f = packet.size() > net::vnet_hdr_size ? packet.subspan(net::vnet_hdr_size) : std::span<const std::byte>{};
    if (!s.nic->accepts(f)) return false;
    s.rx.add(packet.size());
    if (lan_faulty()) lan_faults_in(s, packet, now);
    else enqueue(s, packet, now);
    return true;
  }
  void enqueue(session& s, std::span<const std::byte> packet, rnic::time_ns now) {
    if (s.out.size() >= queue_cap) {  // (frames from the other hosts, which the TAP's gate does not hold)
      ++s.dropped;
      return;
    }
    if (s.out.empty()) s.held_since = now;
    if (s.agg) lan_in(s, packet, now);
    else s.out.emplace_back(packet.begin(), packet.end());
  }
  /// Sends s's queue while credit lasts (what waits for credit stays, for at most hold_for).
  void drain(session& s, rnic::time_ns now) {
    while (!s.out.empty()) {
      if (s.ep->current() != pp::state::connected) {  // no carrier: dropped, as a NIC would
        s.dropped += s.out.size();
        s.out.clear();
        break;
      }
      const pp::errc e = s.ep->send_packet(s.out.front());
      if (e == pp::errc::would_block) {
        if (now - s.held_since < hold_for) return;
        s.dropped += s.out.size();  // no credit for hold_for: the host is not taking them
        s.out.clear();
        break;
      }
      if (e != pp::errc{}) ++s.dropped;
      s.out.pop_front();
      s.held_since = now;
    }
  }
  /// A packet host s sent (I/O unit): to the hosts whose filter takes its destination (a frame
  /// between two hosts stays in the NIC, as between a switch's functions), and to the LAN unless
  /// it was unicast to one of them.
  void from_host(session& s, std::span<const std::byte> p) {
    if (o_.role == pp::role::host) {
      (void)tap_.write(p), ++tap_writes_;
      return;
    }
    bool local = false;
    if (sessions_.size() > 1 && p.size() >= net::vnet_hdr_size + 6) {
      const auto dst = p.subspan(net::vnet_hdr_size, 6);
      const bool group = (std::to_integer<std::uint8_t>(dst[0]) & 1) != 0;
      for (auto& t : sessions_)
        if (t.get() != &s && t->ep->current() == pp::state::connected) {
          const bool its = std::equal(dst.begin(), dst.end(), reinterpret_cast<const std::byte*>(t->nic->mac().data()));
          if (group || its || t->nic->promiscuous()) (void)to_host(*t, p, now_);
          local = local || its;
        }
    }
    if (local) return;
    if (tap_.write(p) == 0) ++s.tx_errors;
    else s.tx.add(p.size());
    ++tap_writes_;
  }
  void make_endpoint(session& s) {
    pp::config c;
    c.first_pool_ref = o_.pool_ref ? o_.pool_ref : o_.role == pp::role::host ? 0x01 : 0x81;
    c.transport = o_.uc ? rnic::qp_type::uc : rnic::qp_type::rc;
    // IPv4 20 + UDP 8 + BTH 12 + RETH 16 + ImmDt 4 + ICRC 4 = 64 bytes around a packet's payload.
    c.mtu = path_mtu_for(link_.fabric_mtu(o_), 64);
    // A packet is a virtio-net header and a frame of up to 64 KiB (a TSO segment): one element.
    // Pools grow with the traffic: one pool of 64 elements (4 MiB) at first; when the sender's
    // free elements fall below 32 it asks for 64 more (BufferRecvPoolGet), granted up to 3
    // times (256 elements, 16 MiB, at most).
    c.element_size = 65536;
    c.elements = pool_elements;
    c.pools = 1;
    c.grantable_pools = 3;
    c.low_water = 32;
    c.get_count = pool_elements;
    c.send_slots = 256;
    pp::handlers h;
    h.packet = [this, p = &s](std::span<const std::byte> b) { from_host(*p, b); };
    if (o_.role == pp::role::iou) {
      h.cfg_request = [this, p = &s](msg::cfg::request_code code, std::span<const std::byte> req) {
        session& x = *p;
        lan_hw hw{*this, x};
        const wire::mac_address mac = x.nic->mac();
        const bool promisc = x.nic->promiscuous();
        pp::cfg_answer a = x.nic->answer(code, req, hw);
        if (x.nic->mac() != mac) log_mac(x, "LAN NIC MAC set to", x.nic->mac());
        if (x.nic->promiscuous() != promisc) log(x, x.nic->promiscuous() ? "LAN NIC promiscuous" : "LAN NIC not promiscuous");
        return a;
      };
    } else {
      h.cfg_reply = [this](std::uint64_t, msg::cfg::request_code code, msg::cfg::status st, std::span<const std::byte> d) { host_reply(code, st, d); };
    }
    s.ep = std::make_unique<pp::endpoint>(dev_, c, std::move(h));
    const pp::address l = s.ep->local();
    s.cm.set_local(l.control_qpn, l.data_qpn, l.send_max);
  }
  void apply(session& s, const pp::cm_actions& a, rnic::time_ns now) {
    if (a.reset) make_endpoint(s);
    if (a.carrier_down && o_.role == pp::role::host) (void)tap_.set_carrier(false);
    if (a.carrier_down) log(s, "peer lost: carrier down");
    if (a.connect) {
      rnic::address_vector av{};
      av.dgid = rnic::gid_v4(s.peer[0], s.peer[1], s.peer[2], s.peer[3]);
      if (link_.cells()) {  // cells are addressed by MAC: the peer's, as ARP found it for the hellos
        const std::string& ifname = o_.xdp.empty() ? o_.interface : o_.xdp;
        const auto mac = net::neighbour(::if_nametoindex(ifname.c_str()), std::span<const std::uint8_t>(s.peer.data(), s.peer.size()));
        av.dmac = mac ? mac->mac : wire::broadcast_mac;
        if (!mac) log(s, "no neighbour entry for the peer: cells go to the broadcast MAC");
      }
      if (s.ep->connect({.control_qpn = a.connect->control_qpn, .data_qpn = a.connect->data_qpn, .av = av, .send_max = a.connect->send_max}) ==
          pp::errc{}) {
        log(s, "connected");
        if (o_.role == pp::role::host) initialize_nic();
      }
    }
    if (a.carrier_up && o_.role == pp::role::host && s.ep->current() == pp::state::connected && !a.connect)
      (void)s.ep->cfg_request(msg::cfg::request_code::get_link_state), log(s, "peer back");
    if (a.send) {
      std::array<std::byte, pp::hello_size> b;
      (void)wire::encode(*a.send, b);
      send_cm(cm_fd_, s.peer, b);
    }
    (void)now;
  }
  /// The CMs' datagrams waiting on the socket, each to the session of the address it came from
  /// (others are counted: stray_hellos_).
  void cm_read(rnic::time_ns now) {
    std::array<std::byte, 256> b;
    for (int k = 0; k < 16; ++k) {
      sockaddr_in from{};
      socklen_t len = sizeof from;
      const ssize_t n = ::recvfrom(cm_fd_, b.data(), b.size(), MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&from), &len);
      if (n < 0) break;
      session* s = nullptr;
      for (auto& x : sessions_)
        if (len == sizeof from && std::memcmp(&from.sin_addr, x->peer.data(), 4) == 0) s = x.get();
      if (!s) {
        ++stray_hellos_;
        continue;
      }
      apply(*s, s->cm.on_datagram(std::span(b).first(static_cast<std::size_t>(n)), now), now);
    }
  }
  void log(const session& s, const char* what) {
    if (o_.verbose) std::printf("%s: %s\n", s.name.c_str(), what), std::fflush(stdout);
  }
  void log(const char* what) { log(host(), what); }
  void log_mac(const char* what, const wire::mac_address& m) { log_mac(host(), what, m); }
  void log_mac(const session& s, const char* what, const wire::mac_address& m) {
    char b[96];
    std::snprintf(b, sizeof b, "%s %02x:%02x:%02x:%02x:%02x:%02x", what, m[0], m[1], m[2], m[3], m[4], m[5]);
    log(s, b);
  }
  void exit_line(const session& s) {
    const pp::counters& es = s.ep->stats();
    std::printf("%s: %s; packets out %lu in %lu, dropped %lu; as SendData %lu, WRITE+idata %lu, WRITE+BufferRDMAIndicate %lu; "
                "pools asked for %lu, granted %lu; datagrams out %lu in %lu, injected losses %lu",
                s.name.c_str(), std::string(wire::enum_name(s.ep->current())).c_str(), static_cast<unsigned long>(es.packets_out),
                static_cast<unsigned long>(es.packets_in), static_cast<unsigned long>(s.dropped), static_cast<unsigned long>(es.as_send),
                static_cast<unsigned long>(es.as_write_imm), static_cast<unsigned long>(es.as_write_indicate),
                static_cast<unsigned long>(es.gets_sent), static_cast<unsigned long>(es.pools_granted), static_cast<unsigned long>(link_.sent()),
                static_cast<unsigned long>(link_.received()), static_cast<unsigned long>(link_.lost()));
    if (s.agg) {
      const auto& a = s.agg->stats();
      std::printf("; TCP aggregation: %lu frames from the LAN, %lu segments joined into %lu aggregates, %lu passed alone, %lu bad checksums",
                  static_cast<unsigned long>(a.frames), static_cast<unsigned long>(a.joined + a.aggregates), static_cast<unsigned long>(a.aggregates),
                  static_cast<unsigned long>(a.passed), static_cast<unsigned long>(a.bad_checksum));
      std::printf(" (ended by");
      for (std::size_t k = 0; k < flow::agg_flush_count; ++k)
        if (a.flushes[k])
          std::printf(" %.*s %lu", static_cast<int>(flow::agg_flush_names[k].name.size()), flow::agg_flush_names[k].name.data(),
                      static_cast<unsigned long>(a.flushes[k]));
      std::printf(")");
    }
    if (lan_faulty())
      std::printf("; LAN faults: %lu frames lost, %lu held back", static_cast<unsigned long>(s.lan_faults.lost),
                  static_cast<unsigned long>(s.lan_faults.held));
    if (s.nic) {
      const auto m = s.nic->mac();
      std::printf("; LAN NIC: MAC %02x:%02x:%02x:%02x:%02x:%02x, MTU %u, %spromiscuous, %lu frames filtered, rx %lu frames, tx %lu frames",
                  m[0], m[1], m[2], m[3], m[4], m[5], s.nic->mtu(), s.nic->promiscuous() ? "" : "not ", static_cast<unsigned long>(s.nic->filtered()),
                  static_cast<unsigned long>(s.rx.frames), static_cast<unsigned long>(s.tx.frames));
      if (sessions_.size() > 1)
        std::printf("; frames no host took %lu, hellos from no peer %lu", static_cast<unsigned long>(unclaimed_),
                    static_cast<unsigned long>(stray_hellos_));
    }
    if (o_.role == pp::role::host && lan_stats_)
      std::printf("; MTU %u; LAN NIC (from the I/O unit): rx %lu frames %lu bytes, tx %lu frames %lu bytes, tx_errors %lu, rx_dropped %lu, "
                  "%lu segments in %lu aggregates",
                  o_.mtu, static_cast<unsigned long>(lan_stats_->rx_frames), static_cast<unsigned long>(lan_stats_->rx_bytes),
                  static_cast<unsigned long>(lan_stats_->tx_frames), static_cast<unsigned long>(lan_stats_->tx_bytes),
                  static_cast<unsigned long>(lan_stats_->tx_errors), static_cast<unsigned long>(lan_stats_->rx_dropped),
                  static_cast<unsigned long>(lan_stats_->rx_aggregated_segments), static_cast<unsigned long>(lan_stats_->rx_aggregates));
    std::printf("\n");
  }
  /// Host s's function of the I/O unit's LAN NIC as its agent sees the hardware: the TAP's link,
  /// this host's MTU (the TAP's is the largest of the hosts'), and this host's counters.
  struct lan_hw {
    module& m;
    session& s;
    pp::nic_link link() {
      const unsigned f = m.tap_.flags();
      const bool up = (f & IFF_UP) && (f & IFF_RUNNING);
      return {.up = up, .speed_mbps = up ? m.tap_.speed() : 0};
    }
    std::uint32_t mtu() {
      if (m.sessions_.size() == 1)
        if (const std::uint32_t t = m.tap_.mtu()) s.mtu = t;  // (`ip link set` on lan0 shows)
      return s.mtu;
    }
    int set_mtu(std::uint32_t mtu) {
      std::uint32_t top = mtu;
      for (const auto& x : m.sessions_)
        if (x.get() != &s) top = std::max(top, x->mtu);
      if (const int e = m.tap_.mtu() == top ? 0 : m.tap_.set_mtu(top)) return e;
      s.mtu = mtu;
      return 0;
    }
    /// Another host's MAC, or its factory MAC (which InitializeNic may give back to it).
    bool mac_taken(const wire::mac_address& mac) const {
      for (const auto& x : m.sessions_)
        if (x.get() != &s && (x->nic->mac() == mac || x->nic->factory_mac() == mac)) return true;
      return false;
    }
    msg::cfg::statistics counters() const {
      // Bytes of the frames themselves, without their virtio-net header. A frame is what the
      // TAP passes (a GSO frame counts once): rx after this host's filter.
      const flow::tcp_agg_counters a = s.agg ? s.agg->stats() : flow::tcp_agg_counters{};
      return {.rx_frames = s.rx.frames, .tx_frames = s.tx.frames, .rx_bytes = s.rx.bytes, .tx_bytes = s.tx.bytes, .rx_errors = 0,
              .tx_errors = s.tx_errors, .rx_dropped = s.dropped, .tx_dropped = 0, .rx_aggregated_segments = a.joined + a.aggregates,
              .rx_aggregates = a.aggregates};
    }
  };

  // ---- host: the interface mirrors the LAN NIC ----
  /// After connecting: InitializeNic with what the interface asks for now: its MTU (--mtu or
  /// `ip link set mtu`, else the LAN's), promiscuity, and its MAC when a user set one.
  void initialize_nic() {
    init_sent_ = net::monotonic_ns();
    msg::cfg::nic_init r{.mtu = want_mtu_};
    if (user_mac_) r.flags |= static_cast<std::uint32_t>(msg::cfg::init_flag::set_mac), r.mac = tap_.mac();
    if (tap_.flags() & IFF_PROMISC) r.flags |= static_cast<std::uint32_t>(msg::cfg::init_flag::promiscuous);
    send(msg::cfg::request_code::initialize_nic, r);
  }
  void take_mac(const wire::mac_address& m) {
    nic_mac_ = m;
    if (tap_.mac() != m && tap_.set_mac(m) != 0) (void)tap_.set_up(false), (void)tap_.set_mac(m), (void)tap_.set_up(true);
  }
  void take_mtu(std::uint32_t mtu) {
    if (mtu < pp::nic_mtu_min || mtu > pp::nic_mtu_max) return;
    o_.mtu = mtu;
    if (tap_.mtu() != mtu) (void)tap_.set_mtu(mtu);
  }
  void take_link(bool up, std::uint32_t speed) {
    (void)tap_.set_carrier(up);
    if (up && speed && speed != speed_) speed_ = speed, (void)tap_.set_speed(speed);
  }
  /// `ip link set` on the interface: a new MAC, MTU or promiscuity goes to the LAN NIC (once the
  /// NIC's own state is known; until connected it waits for InitializeNic).
  void interface_changed() {
    const bool on = host().ep->current() == pp::state::connected && nic_mac_.has_value();
    if (const std::uint32_t mtu = tap_.mtu(); mtu && mtu != o_.mtu) {
      want_before_ = want_mtu_;
      o_.mtu = want_mtu_ = mtu;
      if (on) send(msg::cfg::request_code::set_mtu, msg::cfg::mtu_setting{.mtu = mtu}), log("interface MTU changed: SetMtu");
    }
    if (!nic_mac_) return;
    if (const wire::mac_address m = tap_.mac(); m != *nic_mac_) {
      user_mac_ = true;
      nic_mac_ = m;
      if (on) send(msg::cfg::request_code::set_mac_address, msg::cfg::mac_address{.mac = m}), log_mac("interface MAC changed: SetMacAddress", m);
    }
    if (const bool p = (tap_.flags() & IFF_PROMISC) != 0; p != nic_promisc_) {
      nic_promisc_ = p;
      if (on)
        send(msg::cfg::request_code::set_promiscuous, msg::cfg::promiscuous{.enable = p ? 1u : 0u}),
            log(p ? "interface promiscuous: SetPromiscuous 1" : "interface not promiscuous: SetPromiscuous 0");
    }
  }
  template <class D>
  void send(msg::cfg::request_code code, const D& d) {
    std::array<std::byte, wire::fixed_size<D>> b{};
    (void)wire::encode(d, b);
    (void)host().ep->cfg_request(code, b);
  }
  void host_reply(msg::cfg::request_code code, msg::cfg::status st, std::span<const std::byte> d) {
    using msg::cfg::request_code;
    const bool ok = st == msg::cfg::status::success;
    switch (code) {
      case request_code::initialize_nic:
        // The NIC's state comes with every status: the interface takes it.
        init_sent_ = 0;
        if (const auto s = wire::decode<msg::cfg::nic_state>(d)) {
          take_mac(s->mac);
          take_mtu(s->mtu);
          take_link(s->up == 1, s->speed_mbps);
          nic_promisc_ = s->promiscuous == 1;
        }
        // Refused (all or nothing): the interface took the NIC's state; ask again without the
        // MTU asked for, then without the user's MAC (at most two more requests).
        if (!ok && (want_mtu_ || user_mac_)) {
          if (want_mtu_) want_mtu_ = 0, log("the I/O unit refused InitializeNic: asking again without the MTU");
          else user_mac_ = false, log("the I/O unit refused InitializeNic: asking again with its own MAC");
          initialize_nic();
        } else if (!ok) {
          log("the I/O unit refused InitializeNic: the interface took the NIC's state");
        }
        break;
      case request_code::get_mac_address:
        if (const auto m = wire::decode<msg::cfg::mac_address>(d); ok && m) take_mac(m->mac);
        break;
      case request_code::set_mac_address:
        if (!ok) user_mac_ = false, log("the I/O unit refused the MAC: the interface takes the NIC's"),
                 (void)host().ep->cfg_request(request_code::get_mac_address);
        break;
      case request_code::set_mtu:
        // The reply carries the MTU in effect, whatever its status: the interface takes it.
        if (const auto m = wire::decode<msg::cfg::mtu_setting>(d)) take_mtu(m->mtu);
        if (!ok) want_mtu_ = want_before_;
        if (!ok) log("the I/O unit refused the MTU asked for");
        break;
      case request_code::set_promiscuous:
        if (!ok) log("the I/O unit refused SetPromiscuous");
        break;
      case request_code::get_link_state:
        if (const auto ls = wire::decode<msg::cfg::link_state>(d); ok && ls) take_link(ls->up == 1, ls->speed_mbps);
        break;
      case request_code::get_statistics:
        if (const auto v = wire::decode<msg::cfg::statistics>(d); ok && v) lan_stats_ = *v;
        break;
      default:
        break;
    }
  }


  // ---- I/O unit: a faulty LAN (--lan-loss, --lan-reorder) ----
  bool lan_faulty() const { return net::any_fault(o_.lan_faults); }
  /// A frame from the LAN is lost, held back or passed (rnic::decide's draws, seeded).
  void lan_faults_in(session& s, std::span<const std::byte> packet, rnic::time_ns now) {
    s.lan_held.push(packet).at = now;
    net::apply_faults(s.lan_held, o_.lan_faults, s.lan_rng, s.lan_faults);
    lan_release(s, now);
  }
  /// The LAN frames due by now, in the order they are held, go on as if just read.
  void lan_release(session& s, rnic::time_ns now) {
    for (auto it = s.lan_held.out.begin(); it != s.lan_held.out.end();) {
      if (it->at > now) {
        ++it;
        continue;
      }
      enqueue(s, it->bytes, now);
      s.lan_held.retire(it++);
    }
  }

  /// A frame for host s (its virtio-net header first) goes to its queue through its aggregator.
  /// A GSO frame is not judged: what the aggregator holds goes before it, to keep the order. A
  /// checksum verified (DATA_VALID) or left to the receiver (NEEDS_CSUM: the TAP's own stack
  /// sent it) is not verified again.
  void lan_in(session& s, std::span<const std::byte> packet, rnic::time_ns now) {
    if (packet.size() < net::vnet_hdr_size) {
      s.out.emplace_back(packet.begin(), packet.end());
      return;
    }
    const net::vnet_header h = net::vnet_header::read(packet.first<net::vnet_hdr_size>());
    if (h.gso_type != net::vnet_header::gso_none) {
      s.agg->flush_all(s.emit);
      s.out.emplace_back(packet.begin(), packet.end());
      return;
    }
    s.in = packet;
    s.agg->push(packet.subspan(net::vnet_hdr_size), now, s.emit, (h.flags & (net::vnet_header::data_valid | net::vnet_header::needs_csum)) != 0);
    s.in = {};
  }
  /// What the aggregator hands out, as a packet for the peer: a frame that came in and passed,
  /// with its own header; or a segment it held, alone or joined (then one GSO packet), whose TCP
  /// checksum is left to the receiver (NEEDS_CSUM, as a guest's TSO packet).
  void lan_out(session& s, const flow::tcp_aggregate& a) {
    std::vector<std::byte>& p = s.out.emplace_back(net::vnet_hdr_size + a.frame.size());
    std::copy(a.frame.begin(), a.frame.end(), p.begin() + net::vnet_hdr_size);
    net::vnet_header h;
    if (a.header_bytes) {
      h.flags = net::vnet_header::needs_csum;
      h.csum_start = a.l4_offset, h.csum_offset = 16;
      if (a.segments > 1) {
        h.gso_type = a.v6 ? net::vnet_header::gso_tcpv6 : net::vnet_header::gso_tcpv4;
        h.hdr_len = a.header_bytes, h.gso_size = a.mss;
      }
      std::byte* f = p.data() + net::vnet_hdr_size;
      const std::size_t ip = a.l4_offset - (a.v6 ? 40u : 20u), l4_len = a.frame.size() - a.l4_offset;
      std::uint32_t sum = ib::pseudo_sum(std::span<const std::byte>(f + ip, a.l4_offset - ip), a.v6, ib::ip_proto_tcp, static_cast<std::uint32_t>(l4_len));
      while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
      wire::store_be16(f + a.l4_offset + 16, static_cast<std::uint16_t>(sum));  // the pseudo-header's sum, not complemented
    } else if (s.in.size() > net::vnet_hdr_size && a.frame.data() == s.in.data() + net::vnet_hdr_size) {
      std::copy(s.in.begin(), s.in.begin() + net::vnet_hdr_size, p.begin());
      return;
    }
    h.write(std::span(p).first<net::vnet_hdr_size>());
  }

  module_options o_;
  fabric_link link_;
  rnic::device dev_;
  net::tap tap_;
  std::vector<std::unique_ptr<session>> sessions_;  ///< the host's one; the I/O unit's, one per --peer
  int cm_fd_ = -1;
  rnic::time_ns now_ = 0;                    ///< the loop's turn
  std::uint64_t unclaimed_ = 0;              ///< I/O unit: LAN frames no host's filter took
  std::uint64_t stray_hellos_ = 0;           ///< CM datagrams from an address that is no peer
  std::optional<net::link_watch> watch_;     ///< host: changes to the interface
  std::optional<wire::mac_address> nic_mac_; ///< host: the LAN NIC's MAC, or the one asked of it (known after InitializeNic)
  bool nic_promisc_ = false;                 ///< host: the promiscuity asked of the LAN NIC
  bool user_mac_ = false;                    ///< host: the interface's MAC was set by a user (kept across reconnections)
  std::uint32_t want_mtu_ = 0;               ///< host: the MTU the interface asks for, 0 for the LAN's
  std::uint32_t want_before_ = 0;            ///< host: want_mtu_ before the last SetMtu (taken back if refused)
  std::uint32_t speed_ = 0;                  ///< host: the speed the interface was given, Mb/s
  rnic::time_ns init_sent_ = 0;              ///< host: when an InitializeNic went unanswered so far (0: none)
  std::uint64_t tap_writes_ = 0;  ///< frames written to the TAP
  std::optional<msg::cfg::statistics> lan_stats_;  ///< host: the I/O unit's last GetStatistics answer
  rnic::time_ns next_stats_ = 0, next_link_ = 0;
  static constexpr rnic::time_ns link_every = 250'000'000;
  static constexpr rnic::time_ns hold_for = 10'000'000;  ///< 10 ms without credit: then the queue is dropped
  /// Packets one host's queue holds on an I/O unit with several hosts (beyond: dropped, counted).
  static constexpr std::size_t queue_cap = 256;
  static constexpr std::uint32_t pool_elements = 64;
  static constexpr rnic::time_ns close_for = 1'000'000'000;  ///< the close's Flush may take this long
};

// ---- LAN emulation (spec/split-model.md §LAN emulation) ------------------------------------

inline int lan_usage(const char* prog, const char* why) {
  if (why) std::fprintf(stderr, "%s: %s\n", prog, why);
  std::fprintf(stderr,
               "usage: %s --lan-emulation --local IP --peer IP [--peer IP ...] [--lid N] [--tap NAME] [--mtu N]\n"
               "       [--fabric-mtu N] [--loss P] [--dup P] [--reorder P] [--corrupt P] [--seed S] [-v]\n"
               "  --local IP   this member's fabric address (RoCEv2 on UDP 4791, hellos on UDP %u)\n"
               "  --peer IP    another member's fabric address (one per member)\n"
               "  --lid N      this member's LID, 1..0xBFFF (default: the low 16 bits of --local)\n"
               "  --mtu N      the interface MTU (default: 1500, at most the fabric path MTU - 14)\n"
               "spec/split-model.md\n",
               prog, pp::cm_port);
  return 2;
}

inline std::optional<module_options> parse_lan(int argc, char** argv) {
  module_options o;
  o.lan = true;
  o.mtu = 0;  // the default depends on the path MTU
  bool have_local = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    std::array<std::uint8_t, 4> ip{};
    if (a == "--lan-emulation") continue;
    if (const int k = parse_shared(a, v, o); k != 0) {
      if (k < 0) return std::nullopt;
      i += k - 1;
    } else if (a == "--local" && v && parse_ip(v, o.local)) {
      have_local = true, ++i;
    } else if (a == "--peer" && v && parse_ip(v, ip)) {
      o.members.push_back(ip), ++i;
    } else if (a == "--lid" && v) {
      const unsigned long l = std::strtoul(v, nullptr, 0);
      if (l < ib::lid_unicast_first || l > ib::lid_unicast_last) return std::nullopt;
      o.lid = static_cast<std::uint16_t>(l), ++i;
    } else {
      return std::nullopt;
    }
  }
  if (!have_local || o.members.empty() || o.cells || o.uc || o.pool_ref) return std::nullopt;  // (RoCEv2 UD only: no pools, no UC)
  if (o.lid == 0) {
    const unsigned l = unsigned{o.local[2]} << 8 | o.local[3];
    if (l < ib::lid_unicast_first || l > ib::lid_unicast_last) return std::nullopt;
    o.lid = static_cast<std::uint16_t>(l);
  }
  return o;
}

/// One member of an emulated LAN: a TAP whose MAC embeds (LID, UD QPN), frames as UD SENDs to
/// the members (pp/lan.hpp), hellos to every --peer on the CM port.
class lan_module {
 public:
  explicit lan_module(const module_options& o)
      // IPv4 20 + UDP 8 + BTH 12 + DETH 8 + ICRC 4 = 52 bytes around a UD payload.
      : o_(o), dev_(fabric_device(o.local, 0x10, path_mtu_for(o.fabric_mtu, 52))), udp_({.address = o.local, .faults = o.faults, .seed = o.seed, .gso = o.gso, .gro = o.gro}),
        tap_(o.tap),
        lan_(dev_, {.lid = o.lid, .incarnation = std::random_device{}() | (std::uint64_t{std::random_device{}()} << 32) | 1},
             [this](std::span<const std::byte> f) { (void)tap_.write(f), ++tap_writes_; }) {}

  int run() {
    const char* who = "pushwire-host";
    const std::uint32_t max_mtu = lan_.max_frame() - wire::eth_header_size;
    if (o_.mtu == 0) o_.mtu = std::min<std::uint32_t>(1500, max_mtu);
    if (o_.mtu > max_mtu) {
      std::fprintf(stderr, "%s: --mtu %u: at most %u on this fabric (path MTU %u less the Ethernet header)\n", who, o_.mtu, max_mtu, lan_.max_frame());
      return 2;
    }
    if (!lan_.ok()) return std::fprintf(stderr, "%s: the RNIC refused the LAN's queue pair\n", who), 1;
    if (!udp_.ok()) return fail(who, "UDP 4791", udp_.error());
    if (!tap_.ok()) return fail(who, ("TAP " + o_.tap).c_str(), tap_.error());
    if ((cm_fd_ = open_cm_socket(o_.local)) < 0) return fail(who, "CM socket", errno);
    (void)tap_.set_mtu(o_.mtu);
    (void)tap_.set_mac(lan_.mac());
    (void)tap_.set_carrier(false);  // until a member is heard
    (void)tap_.set_up(true);
    const auto m = lan_.mac();
    std::printf("%s: LAN emulation: fabric %u.%u.%u.%u, LID 0x%04x, UD QP 0x%06x, interface %s MAC %02x:%02x:%02x:%02x:%02x:%02x, MTU %u, %zu peers\n",
                who, o_.local[0], o_.local[1], o_.local[2], o_.local[3], o_.lid, lan_.qpn(), tap_.name().c_str(), m[0], m[1], m[2], m[3],
                m[4], m[5], o_.mtu, o_.members.size());
    std::fflush(stdout);
    std::vector<std::byte> frame(65536);
    std::array<std::byte, pp::lan_hello_size> hello;
    (void)wire::encode(lan_.hello(), hello);
    rnic::time_ns next_hello = 0;
    bool carrier = false, tap_ready = true;
    net::device_loop loop(dev_);
    loop.linger(linger_of(o_));
    loop.attach(0, udp_);
    loop.watch(cm_fd_, [&](rnic::time_ns now) { hear(now); });
    loop.watch(tap_.fd(), [&](rnic::time_ns) { tap_ready = true; });
    loop.deadline([&] { return std::optional<rnic::time_ns>{next_hello}; });
    loop.deadline([&] { return lan_.next_deadline(); });
    auto work = [&](rnic::time_ns now) {
      if (now >= next_hello) {
        for (const auto& p : o_.members) send_cm(cm_fd_, p, hello);
        next_hello = now + lan_.config().hello_interval;
      }
      if (lan_.tick(now)) log("a member went silent");
      if (carrier != !lan_.members().empty()) {
        carrier = !carrier;
        (void)tap_.set_carrier(carrier);
        log(carrier ? "carrier up" : "carrier down: no member");
      }
      const std::uint64_t written = tap_writes_;
      lan_.poll();
      // A frame written to the TAP is often answered before write() returns: read it now.
      if (!tap_ready && tap_writes_ == written) return;
      int k = 0;
      for (; k < 64; ++k) {
        const std::size_t n = tap_.read(frame);
        if (n == 0) break;
        (void)lan_.send_frame(std::span(frame).first(n));  // refusals are counted by reason
      }
      tap_ready = k == 64;  // more may wait: read again next turn
    };
    while (!stop_requested) {
      (void)loop.wait(loop.timeout(net::monotonic_ns(), 1'000'000'000));
      loop.turn(net::monotonic_ns(), work);
    }
    const auto& st = lan_.stats();
    auto refused = [&](pp::lan_errc e) { return static_cast<unsigned long>(st.refused[static_cast<std::size_t>(e)]); };
    std::printf("%s: left the LAN; frames out %lu (broadcasts %lu, copies %lu) in %lu; members %zu, joined %lu, restarted %lu, left %lu; "
                "refused: no_route %lu, no_members %lu, would_block %lu, too_large %lu, spoofed %lu, unknown_sender %lu\n",
                who, static_cast<unsigned long>(st.frames_out), static_cast<unsigned long>(st.broadcasts_out), static_cast<unsigned long>(st.copies_out),
                static_cast<unsigned long>(st.frames_in), lan_.members().size(), static_cast<unsigned long>(st.joined),
                static_cast<unsigned long>(st.restarted), static_cast<unsigned long>(st.left), refused(pp::lan_errc::no_route),
                refused(pp::lan_errc::no_members), refused(pp::lan_errc::would_block), refused(pp::lan_errc::too_large),
                refused(pp::lan_errc::spoofed_source), refused(pp::lan_errc::unknown_sender));
    ::close(cm_fd_);
    return 0;
  }

 private:
  static int fail(const char* who, const char* what, int err) {
    std::fprintf(stderr, "%s: %s: %s\n", who, what, std::strerror(err));
    return 1;
  }
  void hear(rnic::time_ns now) {
    std::array<std::byte, 256> b;
    for (int k = 0; k < 64; ++k) {
      sockaddr_in from{};
      socklen_t len = sizeof from;
      const ssize_t n = ::recvfrom(cm_fd_, b.data(), b.size(), MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&from), &len);
      if (n < 0) break;
      std::array<std::uint8_t, 4> ip;
      std::memcpy(ip.data(), &from.sin_addr, 4);
      const auto h = lan_.on_hello(std::span(b).first(static_cast<std::size_t>(n)), rnic::gid_v4(ip[0], ip[1], ip[2], ip[3]), now);
      if (o_.verbose && (h == pp::lan::heard::joined || h == pp::lan::heard::restarted))
        std::printf("pushwire-host: member %u.%u.%u.%u %s\n", ip[0], ip[1], ip[2], ip[3], h == pp::lan::heard::joined ? "joined" : "restarted"),
            std::fflush(stdout);
    }
  }
  void log(const char* what) {
    if (o_.verbose) std::printf("pushwire-host: %s\n", what), std::fflush(stdout);
  }

  module_options o_;
  rnic::device dev_;
  net::udp_port udp_;
  net::tap tap_;
  pp::lan lan_;
  std::uint64_t tap_writes_ = 0;  ///< frames written to the TAP
  int cm_fd_ = -1;
};

inline int module_main(int argc, char** argv, pp::role role) {
  bool lan = false;
  for (int i = 1; i < argc; ++i) lan |= std::string_view(argv[i]) == "--lan-emulation";
  std::optional<module_options> o;
  if (lan && role == pp::role::host) {
    if (!(o = parse_lan(argc, argv))) return lan_usage(argv[0], "bad arguments");
  } else if (!(o = parse_module(argc, argv, role))) {
    return module_usage(argv[0], "bad arguments");
  }
  struct sigaction sa{};
  sa.sa_handler = [](int) { stop_requested = 1; };
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  if (o->lan) return lan_module(*o).run();
  module m(*o);
  return m.run();
}

}  // namespace pushwire::tools
