// The one I/O loop that drives a reference RNIC over real transports (spec/net.md §3): the verbs
// provider, the split-model modules and the pingpong tool all use it. A turn moves frames between
// the device's ports and their transports (net::udp_port, net::packet_port), lets the device
// progress, and runs the program's own work between the two halves. Between turns the loop sleeps
// in ppoll() on the transports' and the program's descriptors until one is readable or the
// earliest deadline comes: the device's next_deadline(), a transport's held-back frame, or a
// deadline of the program's. It never wakes on a fixed tick; a program that busy-polls calls
// turn() without wait(). Real I/O: nothing sans-IO includes it.
#pragma once

#include <poll.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include <pushwire/net/clock.hpp>
#include <pushwire/rnic/device.hpp>

namespace pushwire::net {

/// How wait() sleeps while traffic is recent: for `spin` ns after a turn that moved frames not at
/// all (busy polling, as SO_BUSY_POLL does for a socket: the next turn comes at once), then for
/// `window` ns at most `tick` ns at a time. A thread of a virtual machine that sleeps for
/// milliseconds wakes measurably later than one that sleeps less (spec/net.md §3). 0: off.
struct linger_policy {
  rnic::time_ns window = 0;        ///< ns after the last frame moved, 0: off
  rnic::time_ns tick = 1'000'000;  ///< the longest sleep while it lasts, ns (> 0)
  rnic::time_ns spin = 0;          ///< ns after the last frame moved with no sleep, 0: off
};

/// The busy-polling time programs take unless told (spec/net.md §3): 50 µs on a machine with
/// more than 2 cores, none on one with 2 or fewer (a spinning thread there takes the core the
/// kernel and the peer need).
inline rnic::time_ns default_busy_poll() {
  const long cores = ::sysconf(_SC_NPROCESSORS_ONLN);
  return cores > 2 ? 50'000 : 0;
}

struct loop_counters {
  std::uint64_t turns = 0;    ///< turn() calls
  std::uint64_t waits = 0;    ///< sleeps in ppoll() with a timeout above 0 (wait() or block())
  std::uint64_t wakeups = 0;  ///< sleeps that ended with a descriptor ready
  std::uint64_t frames_in = 0, frames_out = 0;
};

class device_loop {
 public:
  explicit device_loop(rnic::device& d) : dev_(d) {}
  device_loop(const device_loop&) = delete;
  device_loop& operator=(const device_loop&) = delete;

  rnic::device& device() { return dev_; }
  loop_counters stats() const {
    loop_counters s = stats_;
    s.waits = waits_, s.wakeups = wakeups_;
    return s;
  }

  /// Attaches transport `t` (receive_into, send_from, fds() or fd(), next_due()) to device port
  /// `port`. `t` must outlive the loop.
  template <class Transport>
  void attach(std::size_t port, Transport& t) {
    link l;
    l.port = port;
    l.receive = [&t, port](rnic::device& d, rnic::time_ns now) { return t.receive_into(d, port, now); };
    l.send = [&t, port](rnic::device& d, rnic::time_ns now) { return t.send_from(d, port, now); };
    l.fds = [&t] {
      if constexpr (requires { t.fds(); }) return t.fds();
      else return std::vector<int>{t.fd()};
    };
    l.due = [&t]() -> std::optional<rnic::time_ns> {
      if constexpr (requires { t.next_due(); }) return t.next_due();
      else {
        (void)t;
        return std::nullopt;
      }
    };
    // A transport that must be told before the loop sleeps (shared-memory rings: arm() says
    // whether it may, disarm(readable) after): it is read after every wait.
    if constexpr (requires { t.arm(); t.disarm(true); }) {
      l.arm = [&t] { return t.arm(); };
      l.disarm = [&t](bool readable) { t.disarm(readable); };
    }
    links_.push_back(std::move(l));
  }
  /// Waits on descriptor `fd` too: after a wait() that found it readable, `on_ready(now)` runs at
  /// the start of the next turn. `interested()` (when given) says whether to wait on it now.
  void watch(int fd, std::function<void(rnic::time_ns)> on_ready, std::function<bool()> interested = {}) {
    watches_.push_back({fd, std::move(on_ready), std::move(interested), false});
  }
  /// Sets how wait() sleeps while traffic is recent (default: off).
  void linger(linger_policy p) { linger_ = p; }
  /// A deadline of the program's (a protocol timer): wait() wakes by then; nullopt: none now.
  void deadline(std::function<std::optional<rnic::time_ns>()> next) { deadlines_.push_back(std::move(next)); }

  /// One turn at `now`: what the program posted since the last turn leaves; frames waiting on
  /// the transports go to the device (all of them after a busy turn; after a wait(), those of the
  /// transports found readable); the device progresses; `work(now)` runs (poll completions, read
  /// a TAP, post); the device progresses again and what that made leaves. Returns the frames moved.
  template <class Work>
  std::size_t turn(rnic::time_ns now, Work&& work) {
    std::size_t moved = half_turn(now);
    work(now);
    dev_.progress(now);
    moved += send_all(now);
    if (moved) last_moved_ = now;
    return moved;
  }
  /// A turn with no work of the program's: posted frames leave, received ones go in, the device
  /// progresses and what it made leaves.
  std::size_t turn(rnic::time_ns now) {
    const std::size_t moved = half_turn(now) + send_all(now);
    if (moved) last_moved_ = now;
    return moved;
  }

  /// How long wait() may sleep at `now`: 0 when the device has work now, else until the earliest
  /// of the device's, the transports' and the program's deadlines, at most `limit` (and at most
  /// the linger tick while traffic is recent).
  rnic::time_ns timeout(rnic::time_ns now, rnic::time_ns limit) const {
    if (dev_.busy()) return 0;
    if (linger_.spin > 0 && now - last_moved_ < linger_.spin) return 0;
    if (linger_.window > 0 && now - last_moved_ < linger_.window) limit = std::min(limit, linger_.tick);
    std::optional<rnic::time_ns> due = dev_.next_deadline();
    auto take = [&](std::optional<rnic::time_ns> d) {
      if (d && (!due || *d < *due)) due = d;
    };
    for (const link& l : links_) take(l.due());
    for (const auto& d : deadlines_) take(d());
    if (!due) return limit;
    return *due <= now ? 0 : std::min(*due - now, limit);
  }
  /// Sleeps in ppoll() until a transport's or a watched descriptor is readable or `t` ns pass;
  /// marks what is readable for the next turn. Returns the descriptors ready (0: the time
  /// passed; -1: a signal came). The three steps apart, for a program whose device is shared
  /// under a lock: prepare_wait() and mark() with the lock held, block() without it.
  int wait(rnic::time_ns t) {
    prepare_wait();
    const int n = block(t);
    mark();
    return n;
  }
  /// Takes the descriptors to wait on (the transports' may change as they open sockets).
  void prepare_wait() {
    fds_.clear();
    must_not_sleep_ = false;
    for (link& l : links_) {
      if (l.arm && !l.arm()) must_not_sleep_ = true;
      l.first = fds_.size();
      for (int fd : l.fds()) fds_.push_back({fd, POLLIN, 0});
      l.count = fds_.size() - l.first;
    }
    for (watch_state& w : watches_) {
      w.slot = fds_.size();
      w.waiting = !w.interested || w.interested();
      if (w.waiting) fds_.push_back({w.fd, POLLIN, 0});
    }
  }
  /// Sleeps in ppoll() on what prepare_wait() took, at most `t` ns. Touches nothing a turn uses.
  int block(rnic::time_ns t) {
    if (must_not_sleep_) t = 0;
    if (t > 0) ++waits_;
    const timespec ts{static_cast<time_t>(t / 1'000'000'000), static_cast<long>(t % 1'000'000'000)};
    const int n = ::ppoll(fds_.data(), fds_.size(), &ts, nullptr);
    if (n > 0) ++wakeups_;
    return n;
  }
  /// Marks what block() found readable, for the next turn.
  void mark() {
    waited_ = true;
    for (link& l : links_) {
      l.ready = false;
      for (std::size_t i = l.first; i < l.first + l.count; ++i) l.ready = l.ready || (fds_[i].revents & POLLIN);
      if (l.disarm) {
        l.disarm(l.ready);
        l.ready = true;
      }
    }
    for (watch_state& w : watches_)
      if (w.waiting) w.ready = w.ready || (fds_[w.slot].revents & POLLIN);
  }
  /// Turns until stop() holds: wait(timeout(now, limit)), then turn(now, work).
  template <class Stop, class Work>
  void run(Stop&& stop, Work&& work, rnic::time_ns limit = 1'000'000'000) {
    while (!stop()) {
      (void)wait(timeout(monotonic_ns(), limit));
      if (stop()) break;
      turn(monotonic_ns(), work);
    }
  }

 private:
  /// Watchers, posted frames out, frames in, progress.
  std::size_t half_turn(rnic::time_ns now) {
    ++stats_.turns;
    for (watch_state& w : watches_)
      if (std::exchange(w.ready, false)) w.on_ready(now);
    dev_.progress(now);
    std::size_t moved = send_all(now);
    for (link& l : links_)
      if (!waited_ || l.ready) {
        const std::size_t n = l.receive(dev_, now);
        stats_.frames_in += n;
        moved += n;
      }
    waited_ = false;
    dev_.progress(now);
    return moved;
  }
  struct link {
    std::size_t port = 0;
    std::function<std::size_t(rnic::device&, rnic::time_ns)> receive, send;
    std::function<std::vector<int>()> fds;
    std::function<std::optional<rnic::time_ns>()> due;
    std::function<bool()> arm;
    std::function<void(bool)> disarm;
    bool ready = false;
    std::size_t first = 0, count = 0;  ///< its descriptors in fds_
  };
  struct watch_state {
    int fd;
    std::function<void(rnic::time_ns)> on_ready;
    std::function<bool()> interested;
    bool ready = false, waiting = false;
    std::size_t slot = 0;
  };
  std::size_t send_all(rnic::time_ns now) {
    std::size_t n = 0;
    for (link& l : links_) n += l.send(dev_, now);
    stats_.frames_out += n;
    return n;
  }

  rnic::device& dev_;
  std::vector<link> links_;
  std::vector<watch_state> watches_;
  std::vector<std::function<std::optional<rnic::time_ns>()>> deadlines_;
  std::vector<pollfd> fds_;
  bool waited_ = false;  ///< the last wait() marked which transports are readable
  bool must_not_sleep_ = false;  ///< a transport's arm() found work: block() does not sleep
  linger_policy linger_{};
  rnic::time_ns last_moved_ = 0;  ///< the last turn that moved frames
  std::uint64_t waits_ = 0, wakeups_ = 0;  ///< block()'s, kept apart from what a turn touches
  loop_counters stats_;
};

}  // namespace pushwire::net
