// The in-process loopback fabric (spec/rnic.md §8): links between the ports of any number of
// devices, in virtual time only (it never reads a clock). Each link has a rate, a latency and a
// frame size limit; each direction has seeded faults: loss, duplication, reordering (a frame
// held back by up to a bound, so later ones pass it), bit corruption and extra delay. A port
// transmits at its link's rate: the fabric takes a device's next frame when the wire is free,
// so a device that outruns its link fills its own transmit queue and stops sending requests. A pcap tap
// records every frame delivered, as delivered. A raw port stands in for a device on the far end
// of a link: the caller reads what the device sends there and injects any bytes into it, to
// drive the reference with frames from another NIC. A switch joins many device ports: it
// forwards by destination MAC into per-port egress queues that share one buffer (a frame that
// finds it full is dropped: tail drop), and marks ECN-capable frames CE by the depth of their
// egress queue as they leave it (flow::ecn_marking, spec/qos.md §2), as a DCQCN congestion point.
#pragma once

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <optional>
#include <queue>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <pushwire/flow/dcqcn.hpp>
#include <pushwire/ib/encap.hpp>
#include <pushwire/rnic/device.hpp>
#include <pushwire/rnic/faults.hpp>
#include <pushwire/wire/pcap.hpp>

namespace pushwire::rnic {

struct link_config {
  double rate = 12.5e9;     ///< bytes per second (100 Gb/s); 0: no serialization delay
  time_ns latency = 500;    ///< propagation delay, ns
  std::size_t mtu = 9216;   ///< largest frame, bytes; larger ones are dropped (counted)
  /// Bytes a sender's queue holds waiting for the wire (per direction); a frame that finds it
  /// full is dropped (tail drop, counted). Needs rate > 0. Bounds the fabric's delay, as a
  /// switch buffer does, so a sender that outruns the link loses frames instead of time.
  std::size_t queue_bytes = 1u << 20;
  direction_faults a_to_b{}, b_to_a{};
};

struct fabric_counters {
  std::uint64_t sent = 0, delivered = 0, lost = 0, duplicated = 0, reordered = 0, corrupted = 0, delayed = 0;
  std::uint64_t too_big = 0, unlinked = 0, queue_drops = 0;
  std::uint64_t link_down = 0;  ///< frames sent onto a link that is down (set_link_up)
};

/// A switch of the loopback fabric. Its egress rate per port is the rate of the link on it.
struct switch_config {
  std::size_t ports = 8;
  /// Bytes all egress queues hold together; a frame that would exceed it is dropped.
  std::size_t buffer_bytes = 200'000;
  /// Marks ECT frames CE by the bytes queued behind them at their egress port as they leave it
  /// (at dequeue, as HPCC's ns-3 switch: the mark carries the queue's state without its delay);
  /// none: no marking.
  std::optional<flow::ecn_marking> marking{};
};
struct switch_counters {
  std::uint64_t forwarded = 0;    ///< frames queued for an egress port (a flooded frame counts per port)
  std::uint64_t tail_drops = 0;   ///< frames dropped: the shared buffer was full
  std::uint64_t marked = 0;       ///< ECT frames marked CE
  std::uint64_t unknown = 0;      ///< frames to a MAC no port has (flooded)
  std::uint64_t max_buffered = 0; ///< the most bytes the egress queues held together
};

class loopback_fabric {
 public:
  explicit loopback_fabric(std::uint64_t seed = 1) : seed_(seed) {}
  loopback_fabric(const loopback_fabric&) = delete;
  loopback_fabric& operator=(const loopback_fabric&) = delete;

  /// Connects port pa of a and port pb of b (each port has at most one link). Errors:
  /// invalid_argument (no such port), busy (a port already linked).
  /// Takes the link on port `port` of d down (its frames are lost both ways) or up again. The
  /// devices are not told: a caller that models a carrier loss tells them
  /// (qp_engine::set_port_up). Errors: invalid_argument (no link there).
  errc set_link_up(const device& d, std::size_t port, bool up) {
    for (link_state& l : links_)
      for (const end& e : l.ends)
        if (e.dev == &d && e.port == port) {
          l.down = !up;
          return {};
        }
    return errc::invalid_argument;
  }
  errc link(device& a, std::size_t pa, device& b, std::size_t pb, const link_config& c = {}) {
    if (pa >= a.port_count() || pb >= b.port_count()) return errc::invalid_argument;
    if (find_end(&a, pa) || find_end(&b, pb)) return errc::busy;
    const std::size_t l = links_.size();
    links_.push_back({c, {end{&a, pa, -1}, end{&b, pb, -1}}, {0, 0}, {rng(l, 0), rng(l, 1)}});
    add_device(&a);
    add_device(&b);
    return {};
  }
  /// A switch; returns its number (for link_switch, switch_stats, queued).
  std::size_t add_switch(const switch_config& c) {
    std::seed_seq q{static_cast<std::uint32_t>(seed_), static_cast<std::uint32_t>(seed_ >> 32), 0x5717C4u,
                    static_cast<std::uint32_t>(switches_.size())};
    switches_.push_back({c, {}, {}, std::mt19937_64(q)});
    return switches_.size() - 1;
  }
  /// Connects port pa of a to port sp of switch sw; the switch forwards frames for a's MAC on
  /// that port there. Errors: invalid_argument (no such port or switch), busy (a port already
  /// linked).
  errc link_switch(device& a, std::size_t pa, std::size_t sw, std::size_t sp, const link_config& c = {}) {
    if (pa >= a.port_count() || sw >= switches_.size() || sp >= switches_[sw].cfg.ports) return errc::invalid_argument;
    if (find_end(&a, pa) || switch_link(sw, sp)) return errc::busy;
    links_.push_back({c, {end{&a, pa, -1}, end{nullptr, sp, -1, static_cast<int>(sw)}}, {0, 0}, {rng(links_.size(), 0), rng(links_.size(), 1)}});
    switches_[sw].macs.push_back({a.config().ports[pa].mac, sp});
    add_device(&a);
    return {};
  }
  const switch_counters& switch_stats(std::size_t sw) const { return switches_.at(sw).stats; }
  /// Bytes waiting in switch sw's egress queue of port sp now.
  std::size_t queued(std::size_t sw, std::size_t sp) const {
    const auto l = switch_link(sw, sp);
    return l ? egress_bytes(*l) : 0;
  }
  /// Connects port p of d to a raw endpoint; returns its number (for inject / take).
  result<std::size_t> raw_port(device& d, std::size_t p, const link_config& c = {}) {
    if (p >= d.port_count()) return errc::invalid_argument;
    if (find_end(&d, p)) return errc::busy;
    const std::size_t l = links_.size();
    const int raw = static_cast<int>(raws_.size());
    raws_.emplace_back();
    links_.push_back({c, {end{&d, p, -1}, end{nullptr, 0, raw}}, {0, 0}, {rng(l, 0), rng(l, 1)}});
    add_device(&d);
    return static_cast<std::size_t>(raw);
  }
  /// Sends `frame` from raw endpoint `raw` towards its device (it crosses the link).
  void inject(std::size_t raw, std::span<const std::byte> frame) {
    for (std::size_t l = 0; l < links_.size(); ++l)
      if (links_[l].ends[1].raw == static_cast<int>(raw)) send(l, 1, frame_bytes(frame.begin(), frame.end()));
  }
  /// The next frame the device sent to raw endpoint `raw`, or nullopt.
  std::optional<frame_bytes> take(std::size_t raw) {
    auto& q = raws_.at(raw);
    if (q.empty()) return std::nullopt;
    frame_bytes f = std::move(q.front());
    q.erase(q.begin());
    return f;
  }
  /// Records every delivered frame in a classic pcap (nanosecond timestamps of virtual time).
  /// Errors: invalid_argument (the file cannot be written).
  errc tap(const std::string& path) {
    tap_.open(path, std::ios::binary | std::ios::trunc);
    if (!tap_) return errc::invalid_argument;
    const auto h = wire::pcap::file_header(wire::pcap::resolution::nano);
    tap_.write(reinterpret_cast<const char*>(h.data()), static_cast<std::streamsize>(h.size()));
    return {};
  }

  time_ns now() const { return now_; }
  const fabric_counters& counters() const { return stats_; }

  /// Lets every device act at the current time, then moves to the next event (a frame's
  /// arrival or a device's deadline) no later than `limit` and handles it. False when there is
  /// none by then (the time stays).
  bool step(time_ns limit) {
    settle();
    std::optional<time_ns> t;
    if (!events_.empty()) t = events_.top().at;
    for (dev_state& d : devs_) {
      if (d.touched) d.deadline = d.dev->next_deadline(), d.touched = false;
      if (d.deadline && (!t || *d.deadline < *t)) t = std::max(*d.deadline, now_);
      for (std::size_t p = 0; p < d.dev->port_count(); ++p)  // a port waiting for its wire
        if (d.dev->pending_frames(p)) {
          const time_ns w = wire_free(d.dev, p);
          if (!t || w < *t) t = w;
        }
    }
    if (!t || *t > limit) return false;
    now_ = *t;
    while (!events_.empty() && events_.top().at <= now_) {
      event e = std::move(const_cast<event&>(events_.top()));  // the heap orders by at / seq, which stay
      events_.pop();
      deliver(e);
    }
    return true;
  }
  /// Steps until `done()` holds or no event is left before `limit`; returns done(). done() is
  /// asked after the devices have acted at the current time, so fab.now() is then the time at
  /// which it came true.
  template <class Pred>
  bool run(Pred done, time_ns limit) {
    for (;;) {
      settle();
      if (done()) return true;
      if (!step(limit)) {
        settle();
        return done();
      }
    }
  }
  /// Steps until nothing is left to do before `limit`.
  void run_until(time_ns limit) {
    while (step(limit)) {
    }
    settle();
  }
  /// run_until(t), then the clock stands at t (what is injected next leaves then).
  void advance_to(time_ns t) {
    run_until(t);
    now_ = std::max(now_, t);
  }

 private:
  struct end {
    device* dev = nullptr;
    std::size_t port = 0;
    int raw = -1;  ///< a raw endpoint's number instead of a device
    int sw = -1;   ///< a switch's number instead (port: its port)
  };
  struct switch_state {
    switch_config cfg;
    std::vector<std::pair<wire::mac_address, std::size_t>> macs;  ///< where each linked device port is
    switch_counters stats;
    std::mt19937_64 rng;
  };
  /// The link on port sp of switch sw.
  std::optional<std::size_t> switch_link(std::size_t sw, std::size_t sp) const {
    for (std::size_t l = 0; l < links_.size(); ++l)
      if (links_[l].ends[1].sw == static_cast<int>(sw) && links_[l].ends[1].port == sp) return l;
    return std::nullopt;
  }
  /// Bytes the switch end of link l has queued for the wire now (its egress queue).
  std::size_t egress_bytes(std::size_t l) const {
    const link_state& k = links_[l];
    if (k.cfg.rate <= 0 || k.busy_until[1] <= now_) return 0;
    return static_cast<std::size_t>(static_cast<double>(k.busy_until[1] - now_) * k.cfg.rate / 1e9);
  }
  /// A frame arrived at port `in` of switch sw: queued at the port of its destination MAC
  /// (every other port for a group or unknown address), or dropped when the shared buffer is
  /// full; marked on the way.
  void forward(std::size_t sw, std::size_t in, frame_bytes&& f, device* from) {
    switch_state& s = switches_[sw];
    const wire::mac_address dst = detail_mac(f);
    std::vector<std::size_t> out;
    for (const auto& [mac, port] : s.macs)
      if (mac == dst && port != in) out.push_back(port);
    if (out.empty()) {
      if (!(dst[0] & 1)) ++s.stats.unknown;
      for (const auto& [mac, port] : s.macs)
        if (port != in && std::find(out.begin(), out.end(), port) == out.end()) out.push_back(port);
    }
    std::size_t held = 0;
    for (std::size_t p = 0; p < s.cfg.ports; ++p)
      if (const auto l = switch_link(sw, p)) held += egress_bytes(*l);
    for (std::size_t i = 0; i < out.size(); ++i) {
      const auto l = switch_link(sw, out[i]);
      if (!l) continue;
      if (held + f.size() > s.cfg.buffer_bytes) {
        ++s.stats.tail_drops;
        continue;
      }
      frame_bytes copy = i + 1 < out.size() ? f : std::move(f);
      held += copy.size();
      ++s.stats.forwarded;
      s.stats.max_buffered = std::max<std::uint64_t>(s.stats.max_buffered, held);
      send(*l, 1, std::move(copy), from);
    }
  }
  static wire::mac_address detail_mac(const frame_bytes& f) {
    wire::mac_address m{};
    for (std::size_t i = 0; i < 6 && i < f.size(); ++i) m[i] = std::to_integer<std::uint8_t>(f[i]);
    return m;
  }
  struct link_state {
    link_config cfg;
    std::array<end, 2> ends;
    std::array<time_ns, 2> busy_until;  ///< per direction: when the sender's serializer is free
    std::array<std::mt19937_64, 2> rng;
    bool down = false;
  };
  struct event {
    time_ns at;
    std::uint64_t seq;
    std::size_t link;
    int to;  ///< the end it arrives at
    frame_bytes frame;
    device* from = nullptr;  ///< the sender, whose buffer pool gets the frame back
    friend bool operator<(const event& a, const event& b) { return a.at != b.at ? a.at > b.at : a.seq > b.seq; }
  };

  std::mt19937_64 rng(std::size_t link, int dir) const {
    std::seed_seq s{static_cast<std::uint32_t>(seed_), static_cast<std::uint32_t>(seed_ >> 32),
                    static_cast<std::uint32_t>(link), static_cast<std::uint32_t>(dir)};
    return std::mt19937_64(s);
  }
  const end* find_end(const device* d, std::size_t port) const {
    for (const auto& l : links_)
      for (const auto& e : l.ends)
        if (e.dev == d && e.port == port) return &e;
    return nullptr;
  }
  struct dev_state {
    device* dev;
    bool touched = true;                ///< its deadline may have changed
    std::optional<time_ns> deadline{};  ///< cached next_deadline()
  };
  void add_device(device* d) {
    for (const dev_state& s : devs_)
      if (s.dev == d) return;
    devs_.push_back({d});
  }
  /// The link and direction a device port sends on, or nullopt.
  std::optional<std::pair<std::size_t, int>> out_of(const device* d, std::size_t port) const {
    for (std::size_t l = 0; l < links_.size(); ++l)
      for (int i = 0; i < 2; ++i)
        if (links_[l].ends[static_cast<std::size_t>(i)].dev == d && links_[l].ends[static_cast<std::size_t>(i)].port == port)
          return std::pair{l, i};
    return std::nullopt;
  }
  /// Every port of d with frames waits for its wire (its work can wait too).
  bool blocked(const device* d) const {
    for (std::size_t p = 0; p < d->port_count(); ++p)
      if (d->pending_frames(p) && wire_free(d, p) > now_) return true;
    return false;
  }
  /// When port p of d may put its next frame on the wire (now when the wire is free).
  time_ns wire_free(const device* d, std::size_t port) const {
    const auto o = out_of(d, port);
    if (!o) return now_;
    return std::max(now_, links_[o->first].busy_until[static_cast<std::size_t>(o->second)]);
  }
  /// Lets each device that has work at the current time (posts, a due deadline, frames from a
  /// receive) act, and routes what it sends, until all are idle.
  void settle() {
    for (int round = 0; round < 256; ++round) {
      bool more = false;
      for (dev_state& s : devs_) {
        device* d = s.dev;
        if (s.touched) s.deadline = d->next_deadline(), s.touched = false;
        if ((s.deadline && *s.deadline <= now_) || d->busy()) {
          d->progress(now_);
          s.touched = true;
        }
        for (std::size_t p = 0; p < d->port_count(); ++p)
          while (d->pending_frames(p) && wire_free(d, p) <= now_) {
            auto f = d->take_frame(p);  // (a class scheduler builds it now, and may find nothing)
            s.touched = true;
            if (!f) break;
            more = true;
            route(d, p, std::move(*f));
          }
        more = more || (d->busy() && !blocked(d));
      }
      if (!more) return;
    }
  }
  void route(device* d, std::size_t port, frame_bytes&& f) {
    for (std::size_t l = 0; l < links_.size(); ++l)
      for (int i = 0; i < 2; ++i)
        if (links_[l].ends[static_cast<std::size_t>(i)].dev == d && links_[l].ends[static_cast<std::size_t>(i)].port == port) {
          send(l, i, std::move(f));
          return;
        }
    ++stats_.unlinked;
    d->recycle(std::move(f));
  }
  /// A frame leaves end `from` of link l now: serialization, latency, then the faults. A
  /// switch end's queue is the switch's (forward checked it); `owner` is the device whose
  /// buffer pool the frame goes back to (the sender's, by default).
  void send(std::size_t l, int from, frame_bytes&& f, device* owner = nullptr) {
    link_state& k = links_[l];
    const auto dir = static_cast<std::size_t>(from);
    device* sender = owner ? owner : k.ends[dir].dev;
    const bool from_switch = k.ends[dir].sw >= 0;
    const direction_faults& fx = from == 0 ? k.cfg.a_to_b : k.cfg.b_to_a;
    auto& r = k.rng[dir];
    ++stats_.sent;
    if (k.down) {
      ++stats_.link_down;
      return;
    }
    if (f.size() > k.cfg.mtu) {
      ++stats_.too_big;
      return;
    }
    const time_ns start = std::max(now_, k.busy_until[dir]);
    if (!from_switch && k.cfg.rate > 0 &&
        static_cast<double>(start - now_) * k.cfg.rate / 1e9 + static_cast<double>(f.size()) > static_cast<double>(k.cfg.queue_bytes)) {
      ++stats_.queue_drops;
      return;
    }
    const time_ns wire_time = k.cfg.rate > 0 ? static_cast<time_ns>(static_cast<double>(f.size()) * 1e9 / k.cfg.rate) : 0;
    k.busy_until[dir] = start + wire_time;
    const time_ns at = k.busy_until[dir] + k.cfg.latency;
    const fault_outcome o = apply(decide(fx, f.size(), r), std::span<std::byte>(f.data(), f.size()), at, stats_);
    if (o.lost) return;
    if (o.copy_at) events_.push({*o.copy_at, seq_++, l, 1 - from, f, sender});
    events_.push({o.at, seq_++, l, 1 - from, std::move(f), sender});
  }
  void deliver(event& e) {
    const end& to = links_[e.link].ends[static_cast<std::size_t>(e.to)];
    if (to.sw >= 0) {
      forward(static_cast<std::size_t>(to.sw), to.port, std::move(e.frame), e.from);
      return;
    }
    if (const end& by = links_[e.link].ends[static_cast<std::size_t>(1 - e.to)]; by.sw >= 0) {
      // Marked as it left the switch, by the bytes queued behind it then (the queue now, one
      // propagation delay later: what the link has not yet sent).
      switch_state& s = switches_[static_cast<std::size_t>(by.sw)];
      if (s.cfg.marking && s.cfg.marking->mark(egress_bytes(e.link), std::uniform_real_distribution<double>(0, 1)(s.rng)) &&
          ib::mark_ce(std::span<std::byte>(e.frame.data(), e.frame.size())))
        ++s.stats.marked;
    }
    ++stats_.delivered;
    if (tap_) {
      const auto h = wire::pcap::record_header(e.at, e.frame.size(), wire::pcap::resolution::nano);
      tap_.write(reinterpret_cast<const char*>(h.data()), static_cast<std::streamsize>(h.size()));
      tap_.write(reinterpret_cast<const char*>(e.frame.data()), static_cast<std::streamsize>(e.frame.size()));
    }
    if (to.raw >= 0) {
      raws_[static_cast<std::size_t>(to.raw)].push_back(std::move(e.frame));
      return;
    }
    to.dev->receive(to.port, e.frame, e.at);
    (e.from ? e.from : to.dev)->recycle(std::move(e.frame));
    for (dev_state& s : devs_)
      if (s.dev == to.dev) s.touched = true;
  }

  std::uint64_t seed_;
  std::vector<link_state> links_;
  std::vector<dev_state> devs_;
  std::vector<std::vector<frame_bytes>> raws_;
  std::vector<switch_state> switches_;
  std::priority_queue<event> events_;
  std::uint64_t seq_ = 0;
  time_ns now_ = 0;
  fabric_counters stats_{};
  std::ofstream tap_;
};

}  // namespace pushwire::rnic
