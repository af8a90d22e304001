// pushwire-rnicd: one software RNIC shared by many programs (spec/rnicd.md).
//
//   pushwire-rnicd --port NAME:IPV4[:MTU][@IPV6][/xdp=IF] [--xdp IF] [--port ...] [--functions N] [--control PATH]
//                  [--slots N] [--poll-us N] [--rate BPS] [--egress "SETTING VALUE..."] [--faults SPEC]
//   pushwire-rnicd ctl PATH show [--json] | vf add N [SETTING VALUE...] | vf del N |
//                           vf set N SETTING VALUE... | port set SETTING VALUE... | migrate N --to OTHER_PATH
//
// A device process: it owns each port's UDP socket (port 4791 of the port's addresses), or its
// AF_XDP socket on an interface (--xdp IF after the --port, or /xdp=IF: spec/net.md §6), and is
// the port's embedded switch (rnic/eswitch.hpp). Programs attach to a function of a port through
// its control socket (default /run/pushwire/NAME.sock) and get a shared region whose rings carry
// their frames (rnic/function.hpp); their engines run in the programs (spec/rnicd.md §1). It runs
// in the foreground, logs on stderr, and stops cleanly on SIGTERM or SIGINT: every attached
// program is told (its QPs fail, IBV_EVENT_DEVICE_FATAL) and the control sockets are removed.
//
// The loop polls its rings while there is work and for --poll-us after (default 100) when the host
// has a core to spare, then sleeps in ppoll() on the sockets, the doorbells, the control sockets
// and a signalfd.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>
#include <deque>
#include <filesystem>
#include <list>
#include <thread>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <pushwire/net/address.hpp>
#include <pushwire/net/clock.hpp>
#include <pushwire/net/shm.hpp>
#include <pushwire/net/udp.hpp>
#ifdef PUSHWIRE_HAVE_XDP
#include <pushwire/net/xdp.hpp>
#endif
#include <pushwire/rnic/attach.hpp>
#include <pushwire/rnic/eswitch.hpp>
#include <pushwire/rnic/migrate.hpp>

#include "config.hpp"

namespace {

namespace rnic = pushwire::rnic;
namespace net = pushwire::net;
namespace wire = pushwire::wire;
namespace fn = pushwire::rnic::fn;
namespace ctl = pushwire::rnic::ctl;
using net::unique_fd;

void log(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void log(const char* fmt, ...) {
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  std::fprintf(stderr, "pushwire-rnicd: %s\n", line);
}

std::string_view name_of(rnic::fn_errc e) { return wire::enum_name(e); }

/// One connection to a control socket: a program (attached once it asked) or a `ctl`.
struct connection {
  unique_fd sock;
  std::uint32_t attachment = 0;  ///< 0: not attached
  std::uint32_t pid = 0;
  uid_t uid = 0;
  net::shared_region region;
  unique_fd doorbell, wake;
  fn::ring_consumer tx;
  fn::ring_producer rx;
  /// The rx ring as last looked at: its consumer index, since when frames wait unconsumed, and
  /// whether the sleeping consumer was signalled for them.
  std::uint32_t rx_seen = 0;
  rnic::time_ns rx_waiting_since = 0;
  bool rx_signalled = false;
  rnic::time_ns rate_until = 0;  ///< its function's rate limit holds its next frame until then
  bool closing = false;
  /// Its function is moving away: its rings are neither read nor filled (spec/migration.md).
  bool paused = false;
  /// A device process offering a function on this connection (the destination's side).
  struct arriving {
    rnic::function_image image;
    std::uint8_t prefix = 32;
    std::uint16_t expected = 0;  ///< attachments announced
    struct fds {
      unique_fd sock, region, doorbell, wake;
    };
    std::vector<fds> descriptors;
    pushwire::rnic::migration::dst_state state = pushwire::rnic::migration::dst_state::idle;
  };
  std::unique_ptr<arriving> offer;
  /// Frames steered to it while its rx ring was full, oldest first (at most backlog_bytes).
  std::deque<std::vector<std::byte>> backlog;
  std::size_t backlog_size = 0;
};
/// The most bytes of frames an attachment's backlog holds (a UDP socket's receive buffer).
constexpr std::size_t backlog_bytes = 4u << 20;
/// Each port socket's receive and send buffers (spec/rnicd.md §5): the frames of every function
/// wait there while the device process is not scheduled, and a UD frame lost there is lost.
constexpr std::size_t socket_buffer_bytes = 32u << 20;

/// An address of the port beside its own, a function's: it moves with the function
/// (spec/migration.md §4). Its socket binds it.
struct function_address {
  pushwire::ib::gid gid{};
  net::local_address where;
  std::unique_ptr<net::udp_port> udp;
};

struct port_device {
  std::string name, control;
  unique_fd listen;
  std::unique_ptr<net::udp_port> udp;
#ifdef PUSHWIRE_HAVE_XDP
  /// The port over AF_XDP: every frame leaves and arrives here (the sockets then carry none).
  std::unique_ptr<net::xdp_port> xdp;
#endif
  std::vector<function_address> extra;
  std::unique_ptr<rnic::eswitch> sw;
  wire::mac_address mac{};
  std::list<connection> conns;
  std::unordered_map<std::uint32_t, connection*> by_attachment;
  /// Shaped egress (spec/qos.md §5): nothing leaves before egress_until; per class, the
  /// attachment served last (round robin within a class); the marking's draws.
  rnic::time_ns egress_until = 0;
  std::array<std::uint32_t, pushwire::flow::traffic_classes> served{};
  std::mt19937_64 rng{0x9E3779B97F4A7C15u};
};

struct options {
  std::vector<pushwire::verbs::device_spec> ports;
  std::uint32_t vfs = 0, slots = fn::default_slots;
  std::string control;
  /// --poll-us: the loop polls this long after its last work, and only while a core is spare (its
  /// own guard, so unlike net::default_busy_poll() it is on by default on 2 cores too).
  rnic::time_ns poll_ns = 100'000;
  std::uint64_t rate = 0;
  /// The ports' egress settings (`port set`'s words: SETTING VALUE ...).
  std::vector<std::string> egress;
  /// Faults on what every port sends (PUSHWIRE_VERBS_FAULTS' syntax: loss=0.02,seed=7);
  /// each socket draws from seed + its index.
  pushwire::verbs::fault_spec faults{};
};

int usage(const char* why = nullptr) {
  if (why) std::fprintf(stderr, "pushwire-rnicd: %s\n", why);
  std::fprintf(stderr,
               "usage: pushwire-rnicd --port NAME:IPV4[:MTU][@IPV6][/xdp=IF] [--xdp IF] [--port ...] [--functions N] [--control PATH]\n"
               "                      [--slots N] [--poll-us N] [--rate BPS] [--egress \"SETTING VALUE...\"]\n"
               "                      [--faults loss=P,duplicate=P,reorder=P,corrupt=P,delay=P,seed=N]\n"
               "       pushwire-rnicd ctl PATH show [--json] | vf add N [SETTING VALUE...] | vf del N | vf set N SETTING VALUE... |\n"
               "                               port set SETTING VALUE... | migrate N --to OTHER_PATH\n"
               "settings: mac, gid, max_qps, max_mrs, max_cqs, max_bytes, rate, trust, pkey (spec/rnicd.md)\n"
               "port settings: rate, classes, trust, tsa, tcbw, prio_tc, ratelimit, dscp2prio, mark, ecn (spec/qos.md)\n");
  return 64;
}

// ---- the control protocol ---------------------------------------------------------------
template <class M>
bool send_encoded(int sock, const M& m, std::span<const int> fds = {}) {
  std::vector<std::byte> buf(ctl::max_message);
  const auto n = wire::encode(m, buf);
  return n && net::send_message(sock, std::span<const std::byte>(buf.data(), *n), fds);
}
bool reply_text(int sock, ctl::msg_type type, std::uint16_t tag, std::optional<rnic::fn_errc> status, std::string_view text) {
  if (text.size() > ctl::max_message - 64) text = text.substr(0, ctl::max_message - 64);
  ctl::text_message m{};
  m.header = {type, fn::version, static_cast<std::uint16_t>(status ? static_cast<std::uint16_t>(*status) : 0), tag};
  m.text = std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(text.data()), text.size());
  return send_encoded(sock, m);
}

bool parse_count(const char* s, std::uint64_t& v);

class daemon_state {
 public:
  explicit daemon_state(options o) : opt_(std::move(o)) {}

  bool start() {
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGTERM);
    sigaddset(&s, SIGINT);
    sigaddset(&s, SIGHUP);
    sigprocmask(SIG_BLOCK, &s, nullptr);
    signal(SIGPIPE, SIG_IGN);
    sigfd_.reset(::signalfd(-1, &s, SFD_NONBLOCK | SFD_CLOEXEC));
    for (const auto& spec : opt_.ports) {
      auto p = std::make_unique<port_device>();
      p->name = spec.name;
      p->control = opt_.ports.size() == 1 && !opt_.control.empty() ? opt_.control : "/run/pushwire/" + spec.name + ".sock";
      net::udp_config uc;
      uc.address = *spec.address;
      uc.address6 = spec.address6;
      uc.faults = opt_.faults.faults, uc.seed = opt_.faults.seed + sockets_++;
      uc.socket_buffer = socket_buffer_bytes;
      p->udp = std::make_unique<net::udp_port>(uc);
      if (!p->udp->ok()) {
        log("%s: cannot bind %u.%u.%u.%u:4791: %s", spec.name.c_str(), uc.address[0], uc.address[1], uc.address[2], uc.address[3],
            std::strerror(p->udp->error()));
        return false;
      }
      std::uint32_t mtu = spec.mtu;
      if (!spec.xdp.empty()) open_xdp(*p, spec.xdp, uc, mtu);
      rnic::eswitch_config ec;
      p->mac = rnic::function_mac(0, *spec.address);
      ec.mac = p->mac;
      ec.gids.push_back(pushwire::ib::gid_v4(*spec.address));
      if (spec.address6) ec.gids.push_back(*spec.address6);
      ec.mtu = static_cast<std::uint16_t>(mtu);
      ec.vfs = opt_.vfs;
      ec.slots = opt_.slots;
      ec.limits.rate_bps = opt_.rate;
      p->sw = std::make_unique<rnic::eswitch>(ec);
      if (!opt_.egress.empty()) {
        std::string why;
        if (p->sw->set_egress(std::vector<std::string_view>(opt_.egress.begin(), opt_.egress.end()), 0, why)) {
          log("--egress: %s", why.c_str());
          return false;
        }
      }
      if (!listen_on(*p)) return false;
      log("%s: %u.%u.%u.%u mtu %u, %u VFs, %u slots per ring, control %s", p->name.c_str(), uc.address[0], uc.address[1], uc.address[2],
          uc.address[3], mtu, std::min(opt_.vfs, rnic::max_vfs), opt_.slots, p->control.c_str());
      ports_.push_back(std::move(p));
    }
    return true;
  }

  int run() {
    (void)::prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);  // sleeps of microseconds (rate limits), not the default 50
    rnic::time_ns last_work = net::monotonic_ns(), last_control = 0;
    while (!stop_) {
      const rnic::time_ns now = net::monotonic_ns();
      const bool moved = turn(now) > 0;
      if (moved) last_work = now;
      // Turns follow each other while they move frames; after one that moved none, the loop
      // polls on only while the host has a core to spare.
      if (moved || (now - last_work < opt_.poll_ns && spare_core(now))) {
        // Polling: the control sockets and signals are looked at every millisecond.
        if (now - last_control > 1'000'000) {
          last_control = now;
          wait(0);
        }
        continue;
      }
      wait(sleep_limit(now));
      last_control = net::monotonic_ns();
    }
    shutdown();
    return 0;
  }

 private:
  /// Whether polling costs no one a core: fewer threads are runnable on the host than it has
  /// cores (the 4th field of /proc/loadavg, read every 2 ms while polling). On a host whose cores
  /// the programs' own polling threads fill, the device process sleeps between frames instead
  /// (a doorbell or a datagram wakes it).
  bool spare_core(rnic::time_ns now) {
    if (now - spare_checked_ < 2'000'000) return spare_;
    spare_checked_ = now;
    char b[128];
    const ssize_t n = loadavg_ ? ::pread(loadavg_.get(), b, sizeof b - 1, 0) : -1;
    if (n <= 0) return spare_ = true;
    b[n] = 0;
    unsigned running = 0, total = 0;
    double l1, l5, l15;
    if (std::sscanf(b, "%lf %lf %lf %u/%u", &l1, &l5, &l15, &running, &total) != 5) return spare_ = true;
    return spare_ = running <= cores_;  // (this thread is one of them)
  }

 private:
  bool listen_on(port_device& p) {
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(p.control).parent_path(), ec);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    if (p.control.size() >= sizeof a.sun_path) {
      log("%s: control path too long", p.control.c_str());
      return false;
    }
    std::memcpy(a.sun_path, p.control.c_str(), p.control.size() + 1);
    // A socket file left by a device process that died: nobody answers it.
    if (unique_fd probe = net::connect_seqpacket(p.control); probe) {
      log("%s: another device process serves it", p.control.c_str());
      return false;
    }
    ::unlink(p.control.c_str());
    p.listen.reset(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!p.listen || ::bind(p.listen.get(), reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0 || ::listen(p.listen.get(), 64) != 0) {
      log("%s: %s", p.control.c_str(), std::strerror(errno));
      return false;
    }
    ::chmod(p.control.c_str(), 0666);  // any program may attach, as any may open rxe's uverbs
    return true;
  }

  /// Port p over AF_XDP on ifname (its functions' MTU then at most what the UMEM and the
  /// interface take); its UDP socket stays bound but carries nothing. Where AF_XDP cannot be
  /// had, one line says so and the socket carries the port.
  void open_xdp(port_device& p, const std::string& ifname, const net::udp_config& uc, std::uint32_t& mtu) {
#ifdef PUSHWIRE_HAVE_XDP
    net::xdp_config xc;
    xc.interface = ifname;
    xc.faults = uc.faults, xc.seed = uc.seed;
    auto x = std::make_unique<net::xdp_port>(xc);
    if (!x->ok()) {
      log("%s: AF_XDP on %s unavailable (%s: %s); using the UDP socket", p.name.c_str(), ifname.c_str(), x->why().c_str(), std::strerror(x->error()));
      return;
    }
    mtu = x->path_mtu(mtu);
    log("%s: AF_XDP on %s (%s XDP, %s mode), MTU %u", p.name.c_str(), ifname.c_str(), x->native() ? "native" : "generic",
        x->zero_copy() ? "zero-copy" : "copy", mtu);
    p.xdp = std::move(x);
#else
    (void)uc, (void)mtu;
    log("%s: AF_XDP on %s unavailable (built without libxdp); using the UDP socket", p.name.c_str(), ifname.c_str());
#endif
  }
  /// Hands what is due to the kernel: the AF_XDP socket, or every UDP socket of the port.
  static void flush(port_device& p, rnic::time_ns now) {
#ifdef PUSHWIRE_HAVE_XDP
    if (p.xdp) {
      p.xdp->flush(now);
      return;
    }
#endif
    p.udp->flush(now);
    for (auto& x : p.extra) x.udp->flush(now);
  }
  /// Frames in from the port's transport, each to deliver(): over AF_XDP its socket's, and what
  /// the steering program passed to the kernel's UDP sockets (fragments, IPv6 with extension
  /// headers, RoCE on another receive queue, peers on this host over lo).
  std::size_t receive(port_device& p) {
    std::size_t moved = 0;
#ifdef PUSHWIRE_HAVE_XDP
    if (p.xdp) moved += p.xdp->receive([&](std::span<std::byte> f) { deliver(p, f); });
#endif
    moved += p.udp->receive(p.mac, [&](std::span<std::byte> f) { deliver(p, f); });
    for (auto& x : p.extra) moved += x.udp->receive(p.mac, [&](std::span<std::byte> f) { deliver(p, f); });
    return moved;
  }
  /// The port's transport holds all it takes (spec/net.md §1, §6): frames stay in the rings,
  /// whose limit holds the programs' requesters back, rather than wait longer in its queue.
  static bool transport_full(const port_device& p) {
#ifdef PUSHWIRE_HAVE_XDP
    if (p.xdp) return p.xdp->full();
#endif
    if (p.udp->full()) return true;
    for (const auto& x : p.extra)
      if (x.udp->full()) return true;
    return false;
  }
  /// A checked frame out: the AF_XDP socket, or the UDP socket of its source address.
  static void send_out(port_device& p, std::span<const std::byte> f, rnic::time_ns now) {
#ifdef PUSHWIRE_HAVE_XDP
    if (p.xdp) {
      p.xdp->send(f, now);
      return;
    }
#endif
    udp_for(p, f).send(f, now);
  }

  // ---- the data path ----------------------------------------------------------------------
  std::size_t turn(rnic::time_ns now) {
    std::size_t moved = 0;
    for (auto& pp : ports_) {
      port_device& p = *pp;
      if (p.sw->shapes()) moved += transmit_shaped(p, now);
      for (connection& c : p.conns)
        if (c.attachment && !c.closing && !c.paused) moved += (p.sw->shapes() ? 0 : transmit(p, c, now)) + drain_backlog(p, c);
      flush(p, now);
      moved += receive(p);
      for (connection& c : p.conns)
        if (c.attachment && !c.closing && !c.paused) wake_if_waiting(p, c, now);
      reap(p);
    }
    return moved;
  }
  /// Signals a sleeping consumer whose rx ring holds frames: at once, or once they waited its
  /// wake_after (its program polls the ring itself and only stopped if they wait that long).
  void wake_if_waiting(port_device& p, connection& c, rnic::time_ns now) {
    rnic::fn_errc e{};
    const auto space = c.rx.space(e);
    if (!space) {
      broken(p, c, e);
      return;
    }
    const std::uint32_t consumed = c.rx.produced() - (p.sw->config().slots - *space);
    if (*space == p.sw->config().slots) {  // empty
      c.rx_seen = consumed, c.rx_signalled = false;
      return;
    }
    if (consumed != c.rx_seen || c.rx_waiting_since == 0) c.rx_seen = consumed, c.rx_waiting_since = now, c.rx_signalled = false;
    if (c.rx_signalled || !c.rx.consumer_sleeping()) return;
    if (now - c.rx_waiting_since >= c.rx.consumer_wake_after()) {
      net::signal_eventfd(c.wake.get());
      c.rx_signalled = true;
    }
  }
  std::size_t transmit(port_device& p, connection& c, rnic::time_ns now) {
    if (c.rate_until > now) return 0;
    rnic::fn_errc e{};
    auto avail = c.tx.available(e);
    if (!avail) return broken(p, c, e);
    const std::uint16_t f = p.sw->find(c.attachment)->function;
    std::size_t n = 0;
    for (; n < std::min<std::uint32_t>(*avail, 64) && !transport_full(p); ++n) {
      auto frame = c.tx.peek(e);
      if (!frame) return broken(p, c, e);
      const std::size_t len = frame->size();
      if (!p.sw->admit(f, len, now)) {
        c.rate_until = now + p.sw->rate_wait(f, len);
        break;
      }
      std::memcpy(buf_.data(), frame->data(), len);  // checked and sent from the copy
      c.tx.pop();
      const std::span<std::byte> copy(buf_.data(), len);
      if (p.sw->check_tx(c.attachment, copy)) continue;
      // To an address of this port: the switch delivers it itself (as an SR-IOV switch does
      // between functions), with no trip through the kernel.
      if (p.sw->is_local(copy)) deliver(p, copy);
      else send_out(p, copy, now);
    }
    return n;
  }
  /// A shaped port (spec/qos.md §5): the rings' head frames compete by class (ETS) under the
  /// port's rate; a frame is copied out of its ring only when it leaves, and an ECT one is
  /// marked CE by the bytes still queued in the rings behind it.
  std::size_t transmit_shaped(port_device& p, rnic::time_ns now) {
    if (p.egress_until > now) return 0;
    std::size_t n = 0;
    struct head {
      connection* c;
      std::uint8_t tc;
    };
    std::vector<head> heads;
    for (int round = 0; round < 256 && !transport_full(p); ++round) {
      if (!p.sw->uplink_ready(now)) {
        // back when 16 KiB more may go, not one frame: a sleep overshoots by tens of
        // microseconds, which the bucket's 64 KiB absorbs
        p.egress_until = p.sw->uplink_at() + pushwire::flow::wire_time(16 * 1024, p.sw->config().egress.rate_bps);
        break;
      }
      heads.clear();
      std::uint8_t work = 0;
      std::uint64_t queued = 0;
      for (connection& c : p.conns) {
        if (!c.attachment || c.closing || c.paused || c.rate_until > now) continue;
        rnic::fn_errc e{};
        const auto avail = c.tx.available(e);
        if (!avail) {
          broken(p, c, e);
          continue;
        }
        if (*avail == 0) continue;
        const auto f = c.tx.peek(e);
        if (!f) {
          broken(p, c, e);
          continue;
        }
        const std::uint8_t tc = p.sw->class_of(*f);
        work = static_cast<std::uint8_t>(work | 1u << tc);
        queued += std::uint64_t{*avail} * f->size();  // (its head's size for each)
        heads.push_back({&c, tc});
      }
      const auto tc = p.sw->pick(work, now);
      if (!tc) {
        if (work) p.egress_until = p.sw->classes_held_until(work, now).value_or(now);
        break;
      }
      // round robin within the class: the first ring after the one served last
      head* h = nullptr;
      for (head& x : heads)
        if (x.tc == *tc && (!h || (x.c->attachment > p.served[*tc]) > (h->c->attachment > p.served[*tc]))) h = &x;
      connection& c = *h->c;
      p.served[*tc] = c.attachment;
      rnic::fn_errc e{};
      const auto frame = c.tx.peek(e);
      const std::size_t len = frame->size();
      const std::uint16_t f = p.sw->find(c.attachment)->function;
      if (!p.sw->admit(f, len, now)) {
        c.rate_until = now + p.sw->rate_wait(f, len);
        continue;
      }
      std::memcpy(buf_.data(), frame->data(), len);
      c.tx.pop();
      ++n;
      const std::span<std::byte> copy(buf_.data(), len);
      if (p.sw->check_tx(c.attachment, copy)) continue;
      const bool marked = p.sw->mark(queued - len, std::uniform_real_distribution<double>(0, 1)(p.rng)) && pushwire::ib::mark_ce(copy);
      p.sw->egress_sent(*tc, len, now, marked);
      if (p.sw->is_local(copy)) deliver(p, copy);
      else send_out(p, copy, now);
    }
    return n;
  }
  /// The socket a checked frame leaves from: the one bound to its source address.
  static net::udp_port& udp_for(port_device& p, std::span<const std::byte> f) {
    if (!p.extra.empty() && f.size() >= 34 && f[12] == std::byte{0x08} && f[13] == std::byte{0x00}) {
      std::array<std::uint8_t, 4> src;
      std::memcpy(src.data(), f.data() + 26, 4);
      const auto g = pushwire::ib::gid_v4(src);
      for (auto& x : p.extra)
        if (x.gid == g) return *x.udp;
    }
    return *p.udp;
  }
  void deliver(port_device& p, std::span<std::byte> f) {
    const auto to = p.sw->steer(f);
    const std::uint32_t* id = std::get_if<std::uint32_t>(&to);
    if (!id) return;
    connection* c = p.by_attachment.at(*id);
    if (c->paused) {  // moving away: the transport retransmits it to the new device
      p.sw->unsteer(*id, f.size());
      return;
    }
    rnic::fn_errc e{};
    auto space = c->rx.space(e);
    if (!space) {
      broken(p, *c, e);
      return;
    }
    if (f.size() > fn::slot_capacity || ((*space == 0 || !c->backlog.empty()) && c->backlog_size + f.size() > backlog_bytes)) {
      p.sw->unsteer(*id, f.size());
      return;
    }
    if (*space == 0 || !c->backlog.empty()) {  // behind the frames already waiting
      c->backlog.emplace_back(f.begin(), f.end());
      c->backlog_size += f.size();
      return;
    }
    put(*c, f, *space == p.sw->config().slots);
  }
  /// Copies a frame into c's rx ring, which has room; `empty`: it held none, so the frame is the
  /// first one waiting.
  static void put(connection& c, std::span<const std::byte> f, bool empty) {
    if (empty) c.rx_waiting_since = 0;
    std::memcpy(c.rx.next().data(), f.data(), f.size());
    c.rx.publish(static_cast<std::uint32_t>(f.size()));
  }
  /// Moves backlogged frames into the rx ring as far as it has room.
  std::size_t drain_backlog(port_device& p, connection& c) {
    if (c.backlog.empty()) return 0;
    rnic::fn_errc e{};
    auto space = c.rx.space(e);
    if (!space) return broken(p, c, e);
    std::size_t n = 0;
    for (; n < *space && !c.backlog.empty(); ++n) {
      const std::vector<std::byte>& f = c.backlog.front();
      put(c, f, n == 0 && *space == p.sw->config().slots);
      c.backlog_size -= f.size();
      c.backlog.pop_front();
    }
    return n;
  }
  std::size_t broken(port_device& p, connection& c, rnic::fn_errc e) {
    log("%s: attachment %u (pid %u) broke its ring: %.*s; detached", p.name.c_str(), c.attachment, c.pid,
        static_cast<int>(name_of(e).size()), name_of(e).data());
    notify(c, e);
    c.closing = true;
    return 0;
  }
  void notify(connection& c, rnic::fn_errc why) {
    if (c.region.ok()) fn::region_view{c.region.bytes()}.set_state(fn::device_state::fatal);
    ctl::notice_message m{};
    m.header = {ctl::msg_type::notice, fn::version, 0, 0};
    m.reason = static_cast<std::uint16_t>(why);
    (void)send_encoded(c.sock.get(), m);
  }
  /// Closes the connections that ended: their attachments' QPNs, keys and limits return.
  void reap(port_device& p) {
    for (auto it = p.conns.begin(); it != p.conns.end();) {
      if (!it->closing) {
        ++it;
        continue;
      }
      if (it->attachment) {
        log("%s: attachment %u (pid %u) detached", p.name.c_str(), it->attachment, it->pid);
        p.sw->detach(it->attachment);
        p.by_attachment.erase(it->attachment);
      }
      it = p.conns.erase(it);
    }
  }

  // ---- sleeping ---------------------------------------------------------------------------
  rnic::time_ns sleep_limit(rnic::time_ns now) {
    rnic::time_ns t = 1'000'000'000;
    for (auto& p : ports_) {
      if (auto d = p->udp->next_due()) t = std::min(t, *d > now ? *d - now : 0);
#ifdef PUSHWIRE_HAVE_XDP
      if (p->xdp)
        if (auto d = p->xdp->next_due()) t = std::min(t, *d > now ? *d - now : 0);
#endif
      for (auto& x : p->extra)
        if (auto d = x.udp->next_due()) t = std::min(t, *d > now ? *d - now : 0);
      for (connection& c : p->conns) {
        if (c.attachment && c.rate_until > now) t = std::min(t, c.rate_until - now);
        if (c.attachment && p->egress_until > now) t = std::min(t, p->egress_until - now);
        // frames waiting for a consumer that asked to be woken only after a while
        if (c.attachment && !c.rx_signalled && c.rx_waiting_since && c.rx.consumer_sleeping()) {
          const rnic::time_ns at = c.rx_waiting_since + c.rx.consumer_wake_after();
          t = std::min(t, at > now ? at - now : 0);
        }
      }
    }
    return t;
  }
  /// Sleeps up to t ns (0: only looks) on every descriptor, then serves the control sockets.
  void wait(rnic::time_ns t) {
    fds_.clear();
    owners_.clear();
    bool armed_all = true;
    auto add = [&](int fd, connection* c, port_device* p, int kind) {
      fds_.push_back({fd, POLLIN, 0});
      owners_.push_back({c, p, kind});
    };
    add(sigfd_.get(), nullptr, nullptr, 0);
    for (auto& pp : ports_) {
      port_device& p = *pp;
      add(p.listen.get(), nullptr, &p, 1);
      for (int fd : p.udp->fds()) add(fd, nullptr, &p, 2);
#ifdef PUSHWIRE_HAVE_XDP
      if (p.xdp) add(p.xdp->fd(), nullptr, &p, 2);
#endif
      for (auto& x : p.extra)
        for (int fd : x.udp->fds()) add(fd, nullptr, &p, 2);
      for (connection& c : p.conns) {
        if (c.closing) continue;
        add(c.sock.get(), &c, &p, 3);
        if (c.attachment && !c.paused && t > 0) {
          const rnic::time_ns now = net::monotonic_ns();
          if (c.rate_until <= now && p.egress_until <= now && !c.tx.arm_sleep()) armed_all = false;
          add(c.doorbell.get(), &c, &p, 4);
        }
      }
    }
    if (!armed_all) t = 0;
    const timespec ts{static_cast<time_t>(t / 1'000'000'000), static_cast<long>(t % 1'000'000'000)};
    const int n = ::ppoll(fds_.data(), fds_.size(), &ts, nullptr);
    for (auto& pp : ports_)
      for (connection& c : pp->conns)
        if (c.attachment) c.tx.disarm_sleep();
    if (n <= 0) return;
    for (std::size_t i = 0; i < fds_.size(); ++i) {
      if (!fds_[i].revents) continue;
      auto [c, p, kind] = owners_[i];
      switch (kind) {
        case 0: {
          signalfd_siginfo si;
          while (::read(sigfd_.get(), &si, sizeof si) == sizeof si) {
            log("signal %u: stopping", si.ssi_signo);
            stop_ = true;
          }
          break;
        }
        case 1: accept_on(*p); break;
        case 3: serve(*p, *c); break;
        case 4: net::drain_eventfd(c->doorbell.get()); break;
        default: break;
      }
    }
    for (auto& p : ports_) reap(*p);
  }
  void accept_on(port_device& p) {
    for (;;) {
      unique_fd s(::accept4(p.listen.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
      if (!s) return;
      connection c;
      ucred cred{};
      socklen_t len = sizeof cred;
      if (::getsockopt(s.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) c.uid = cred.uid, c.pid = static_cast<std::uint32_t>(cred.pid);
      else c.uid = static_cast<uid_t>(-1);
      c.sock = std::move(s);
      p.conns.push_back(std::move(c));
    }
  }
  /// Every message waiting on a connection; end of stream or an error closes it.
  void serve(port_device& p, connection& c) {
    for (;;) {
      std::vector<unique_fd> fds;  // (closed unless a migrate_attachment keeps them)
      const ssize_t n = net::receive_message(c.sock.get(), msg_, &fds, MSG_DONTWAIT);
      if (n < 0 && n != -2 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      if (n == 0 || n == -1) {
        c.closing = true;
        return;
      }
      if (n == -2) {
        (void)reply_text(c.sock.get(), ctl::msg_type::output, 0, rnic::fn_errc::bad_message, "message too long");
        continue;
      }
      handle(p, c, std::span<const std::byte>(msg_.data(), static_cast<std::size_t>(n)), fds);
      if (c.closing) return;
    }
  }
  void handle(port_device& p, connection& c, std::span<const std::byte> m, std::vector<unique_fd>& fds) {
    const auto h = ctl::peek_header(m);
    if (!h) {
      const auto raw = wire::decode_prefix<ctl::ctl_header>(m);
      (void)reply_text(c.sock.get(), ctl::msg_type::output, raw ? raw->tag : 0,
                       raw ? rnic::fn_errc::unsupported_version : rnic::fn_errc::bad_message, "not a control message of version 1");
      return;
    }
    switch (h->type) {
      case ctl::msg_type::attach: return attach(p, c, m, h->tag);
      case ctl::msg_type::migrate_offer: return arrive_offer(p, c, m, h->tag);
      case ctl::msg_type::migrate_attachment: return arrive_attachment(p, c, m, fds);
      case ctl::msg_type::migrate_commit: return arrive_commit(p, c, h->tag);
      case ctl::msg_type::reserve: {
        const auto r = wire::decode<ctl::reserve_request>(m);
        std::optional<rnic::fn_errc> st = rnic::fn_errc::bad_message;
        if (r && c.attachment) st = p.sw->reserve(c.attachment, r->kind, static_cast<std::int64_t>(r->count));
        (void)reply_text(c.sock.get(), ctl::msg_type::reserved, h->tag, st, {});
        return;
      }
      case ctl::msg_type::command: {
        const auto r = wire::decode<ctl::text_message>(m);
        std::string out;
        std::optional<rnic::fn_errc> st = rnic::fn_errc::bad_message;
        if (r) {
          std::string text;
          for (std::uint8_t b : r->text) text.push_back(static_cast<char>(b));
          std::vector<std::string_view> words;
          for (std::size_t at = 0; at < text.size();) {
            const std::size_t z = std::min(text.find('\0', at), text.size());
            words.push_back(std::string_view(text).substr(at, z - at));
            at = z + 1;
          }
          const bool reads_only = words.empty() || words[0] == "show";
          if (!reads_only && c.uid != 0 && c.uid != ::geteuid()) {
            st = rnic::fn_errc::not_permitted;
            out = "only root or the device process's user may change functions";
          } else if (words.size() == 4 && words[0] == "migrate" && words[2] == "--to") {
            st = migrate(p, words[1], std::string(words[3]), out);
          } else if (auto e = take_addresses(p, words, out)) {
            st = e;
          } else {
            st = p.sw->command(words, out);
            if (!st && !reads_only) log("%s: ctl (pid %u): %s", p.name.c_str(), c.pid, out.substr(0, out.find('\n')).c_str());
          }
        }
        (void)reply_text(c.sock.get(), ctl::msg_type::output, h->tag, st, out);
        return;
      }
      default:
        (void)reply_text(c.sock.get(), ctl::msg_type::output, h->tag, rnic::fn_errc::bad_message, "not a request");
    }
  }
  void attach(port_device& p, connection& c, std::span<const std::byte> m, std::uint16_t tag) {
    auto refuse = [&](rnic::fn_errc e) {
      ctl::attach_reply r{};
      r.header = {ctl::msg_type::attached, fn::version, static_cast<std::uint16_t>(e), tag};
      const wire::ip_address<16> none{};
      r.gids = std::span<const wire::ip_address<16>>(&none, 1);
      (void)send_encoded(c.sock.get(), r);
    };
    const auto req = wire::decode<ctl::attach_request>(m);
    if (!req || c.attachment) return refuse(rnic::fn_errc::bad_message);
    if (stop_) return refuse(rnic::fn_errc::shutting_down);
    auto got = p.sw->attach(req->function, req->pid);
    if (auto* e = std::get_if<rnic::fn_errc>(&got)) return refuse(*e);
    const rnic::eswitch::attachment& a = *std::get<const rnic::eswitch::attachment*>(got);
    const std::uint32_t slots = p.sw->config().slots;
    c.region = net::shared_region::create(fn::region_bytes(slots), "pushwire-function");
    c.doorbell.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    c.wake.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    if (!c.region.ok() || !c.doorbell || !c.wake) {
      log("%s: attach: %s", p.name.c_str(), std::strerror(errno));
      p.sw->detach(a.id);
      return refuse(rnic::fn_errc::no_attachments_left);
    }
    fn::format_region(c.region.bytes(), slots);
    fn::region_view v;
    (void)fn::check_region(c.region.bytes(), v);
    c.tx = fn::ring_consumer(v.tx, slots);
    c.rx = fn::ring_producer(v.rx, slots);
    std::vector<wire::ip_address<16>> gids;
    ctl::attach_reply r = p.sw->reply_for(a, gids);
    r.header.tag = tag;
    const int fds[3] = {c.region.fd(), c.doorbell.get(), c.wake.get()};
    if (!send_encoded(c.sock.get(), r, fds)) {
      p.sw->detach(a.id);
      c.closing = true;
      return;
    }
    c.attachment = a.id;
    p.by_attachment[a.id] = &c;
    log("%s: attachment %u: pid %u on %s%u, QPNs 0x%06x..", p.name.c_str(), a.id, c.pid, a.function ? "vf" : "pf", a.function,
        a.qpn_first());
  }

  // ---- a function's own addresses (spec/migration.md §4) ----------------------------------
  /// Before `vf add|set N ... gid A[,B...]`: an IPv4 address that is not the port's but is
  /// configured in this namespace becomes the port's too, with a socket of its own.
  std::optional<rnic::fn_errc> take_addresses(port_device& p, const std::vector<std::string_view>& w, std::string& out) {
    if (w.size() < 5 || w[0] != "vf" || (w[1] != "add" && w[1] != "set")) return std::nullopt;
    for (std::size_t i = 3; i + 1 < w.size(); i += 2) {
      if (w[i] != "gid") continue;
      const std::string_view v = w[i + 1];
      for (std::size_t at = 0; at <= v.size();) {
        const std::size_t comma = std::min(v.find(',', at), v.size());
        const auto g = rnic::eswitch::gid_of(v.substr(at, comma - at));
        at = comma + 1;
        const auto& have = p.sw->config().gids;
        if (!g || !pushwire::ib::is_v4(*g) || std::find(have.begin(), have.end(), *g) != have.end()) continue;
        if (auto e = take_address(p, *g)) {
          out = "gid: " + rnic::eswitch::text_of(*g) + ": " + *e;
          return rnic::fn_errc::bad_setting;
        }
      }
    }
    return std::nullopt;
  }
  /// The port takes address g, configured here: a socket binds it. The reason when it cannot.
  std::optional<std::string> take_address(port_device& p, const pushwire::ib::gid& g) {
    const auto v4 = pushwire::ib::v4_of(g);
    const auto where = net::find_local(wire::ip_address<4>{v4});
    if (!where) return std::string("not an address of this host (ip addr add it first)");
    net::udp_config uc;
    uc.address = v4;
    uc.faults = opt_.faults.faults, uc.seed = opt_.faults.seed + sockets_++;
    uc.socket_buffer = socket_buffer_bytes;
    auto u = std::make_unique<net::udp_port>(uc);
    if (!u->ok()) return std::string("cannot bind port 4791: ") + std::strerror(u->error());
    if (!p.sw->add_address(g)) return std::string("the port has 64 addresses");
    p.extra.push_back({g, *where, std::move(u)});
    log("%s: takes %s (%s/%u)", p.name.c_str(), rnic::eswitch::text_of(g).c_str(), where->interface.c_str(), where->prefix);
    return std::nullopt;
  }
  /// The port gives address g up: its socket closes and the address leaves this host.
  void give_up_address(port_device& p, const pushwire::ib::gid& g) {
    for (auto it = p.extra.begin(); it != p.extra.end(); ++it) {
      if (it->gid != g) continue;
      if (const int e = net::remove_address(it->where.ifindex, it->where.ip, it->where.prefix))
        log("%s: removing %s from %s: %s", p.name.c_str(), rnic::eswitch::text_of(g).c_str(), it->where.interface.c_str(), std::strerror(e));
      gone_lost_ += it->udp->stats().lost;
      p.extra.erase(it);
      break;
    }
    p.sw->remove_address(g);
  }
  /// Address g comes to this host: added to `ifindex` (the port's interface), taken, announced.
  std::optional<std::string> receive_address(port_device& p, const pushwire::ib::gid& g, unsigned ifindex, unsigned prefix) {
    const wire::ip_address<4> ip{pushwire::ib::v4_of(g)};
    if (const int e = net::add_address(ifindex, ip, prefix); e && e != EEXIST) return std::string("adding it: ") + std::strerror(e);
    if (auto e = take_address(p, g)) return e;
    const auto& where = p.extra.back().where;
    if (const int e = arp_.announce(where.ifindex, where.mac, ip))
      log("%s: announcing %s: %s", p.name.c_str(), rnic::eswitch::text_of(g).c_str(), std::strerror(e));
    return std::nullopt;
  }

  // ---- moving a function: the source (spec/migration.md §3) --------------------------------
  /// Waits up to ms for one message on sock: its length, 0 at the end of stream or on a
  /// timeout (`timed_out` tells which).
  ssize_t await(int sock, std::span<std::byte> buf, int ms, bool& timed_out) {
    pollfd w{sock, POLLIN, 0};
    timed_out = false;
    const int n = ::poll(&w, 1, ms);
    if (n == 0) {
      timed_out = true;
      return 0;
    }
    const ssize_t k = n > 0 ? net::receive_message(sock, buf, nullptr, MSG_DONTWAIT) : 0;
    return k > 0 ? k : 0;
  }
  std::optional<rnic::fn_errc> migrate(port_device& p, std::string_view which, const std::string& to, std::string& out) {
    namespace mg = rnic::migration;
    std::uint64_t n = 0;
    if (!parse_count(std::string(which).c_str(), n) || n == 0 || n > rnic::max_vfs) {
      out = "migrate N --to SOCKET: N a VF, 1..127";
      return rnic::fn_errc::bad_setting;
    }
    const auto f = static_cast<std::uint16_t>(n);
    const auto im = p.sw->image_of(f);
    if (!im) {
      out = "no VF " + std::to_string(n);
      return rnic::fn_errc::no_such_function;
    }
    std::vector<pushwire::ib::gid> moving;
    unsigned prefix = 32;
    for (const auto& g : im->settings.gids) {
      const auto x = std::find_if(p.extra.begin(), p.extra.end(), [&](const function_address& a) { return a.gid == g; });
      if (x == p.extra.end() || p.sw->address_in_use(g, f)) {
        out = "VF " + std::to_string(n) + " uses " + rnic::eswitch::text_of(g) +
              ", an address of the port or of another function: a function moves with addresses of its own";
        return rnic::fn_errc::bad_setting;
      }
      moving.push_back(g), prefix = x->where.prefix;
    }
    if (!net::may_change_addresses()) {
      out = "moving a function moves its address: the device process needs CAP_NET_ADMIN and CAP_NET_RAW";
      return rnic::fn_errc::not_permitted;
    }
    const rnic::time_ns t0 = net::monotonic_ns();
    mg::src_state st = mg::src_state::serving;
    auto go = [&](mg::event e) {
      if (auto t = mg::step(st, e)) st = t->to;
    };
    // Quiesce: its rings stop here; what was taken from them leaves now.
    std::vector<connection*> cs;
    for (connection& c : p.conns)
      if (c.attachment && !c.closing && p.sw->find(c.attachment) && p.sw->find(c.attachment)->function == f) c.paused = true, cs.push_back(&c);
    flush(p, t0);
    go(mg::event::migrate), go(mg::event::flushed);
    const rnic::time_ns tq = net::monotonic_ns();
    std::vector<net::local_address> left;  // the addresses given up, to take back on a roll-back
    auto roll_back = [&](rnic::fn_errc why, const std::string& text, mg::event e = mg::event::peer_lost) {
      go(e);
      for (std::size_t i = 0; i < left.size(); ++i)
        if (auto e = receive_address(p, moving[i], left[i].ifindex, left[i].prefix))
          log("%s: taking %s back: %s", p.name.c_str(), rnic::eswitch::text_of(moving[i]).c_str(), e->c_str());
      for (connection* c : cs) {
        c->paused = false;
        fn::region_view v;
        // Its address was away: what was sent to it then is lost; its engines resend and NAK.
        if (!left.empty() && !fn::check_region(c->region.bytes(), v)) v.count_move();
        net::signal_eventfd(c->wake.get());
      }
      out = "VF " + std::to_string(n) + " stays here: " + text;
      log("%s: migrating VF %u to %s: %s", p.name.c_str(), f, to.c_str(), out.c_str());
      return why;
    };
    unique_fd d = net::connect_seqpacket(to);
    if (!d) return roll_back(rnic::fn_errc::migration_failed, to + ": " + std::strerror(errno));
    // Offer: the image, then each attachment with its descriptors.
    ctl::migrate_offer o{};
    o.header = {ctl::msg_type::migrate_offer, fn::version, 0, 1};
    o.function = f, o.attachments = static_cast<std::uint16_t>(cs.size()), o.mac = im->settings.mac, o.prefix = static_cast<std::uint8_t>(prefix);
    o.trust = im->settings.trust, o.max_qps = im->settings.limits.max_qps, o.max_mrs = im->settings.limits.max_mrs;
    o.max_cqs = im->settings.limits.max_cqs, o.max_reg_bytes = im->settings.limits.max_reg_bytes, o.rate_bps = im->settings.limits.rate_bps;
    o.gid_count = static_cast<std::uint8_t>(im->settings.gids.size());
    wire::ip_address<16>* slots[4] = {&o.gid0, &o.gid1, &o.gid2, &o.gid3};
    for (std::size_t i = 0; i < im->settings.gids.size() && i < 4; ++i) *slots[i] = wire::ip_address<16>{im->settings.gids[i]};
    o.pkeys = std::span<const std::uint16_t>(im->settings.pkeys);
    bool sent = send_encoded(d.get(), o);
    for (connection* c : cs) {
      const rnic::eswitch::attachment* a = p.sw->find(c->attachment);
      ctl::migrate_attachment m{};
      m.header = {ctl::msg_type::migrate_attachment, fn::version, 0, 1};
      m.id = a->id, m.pid = a->pid, m.qps = a->qps, m.mrs = a->mrs, m.cqs = a->cqs, m.bytes = a->bytes;
      const int fds[4] = {c->sock.get(), c->region.fd(), c->doorbell.get(), c->wake.get()};
      sent = sent && send_encoded(d.get(), m, fds);
    }
    if (!sent) return roll_back(rnic::fn_errc::migration_failed, to + " ended before taking it");
    bool timed_out = false;
    std::vector<std::byte> in(256);
    ssize_t k = await(d.get(), in, 5000, timed_out);
    auto h = k > 0 ? ctl::peek_header(std::span<const std::byte>(in.data(), static_cast<std::size_t>(k))) : std::nullopt;
    if (!h || h->type != ctl::msg_type::migrate_ready) return roll_back(rnic::fn_errc::migration_failed, to + (timed_out ? " did not answer" : " ended before taking it"));
    if (h->status) {
      const auto e = static_cast<rnic::fn_errc>(h->status);
      return roll_back(e, to + " refused it: " + std::string(name_of(e)), mg::event::refused);
    }
    go(mg::event::ready);
    const rnic::time_ns t1 = net::monotonic_ns();
    // Readdress: the addresses leave this host; then commit.
    for (const auto& g : moving) {
      for (const auto& x : p.extra)
        if (x.gid == g) left.push_back(x.where);
      give_up_address(p, g);
    }
    ctl::ctl_header cm{ctl::msg_type::migrate_commit, fn::version, 0, 2};
    const rnic::time_ns tc = net::monotonic_ns();
    timespec wall{};
    ::clock_gettime(CLOCK_REALTIME, &wall);
    if (!send_encoded(d.get(), cm)) return roll_back(rnic::fn_errc::migration_failed, to + " ended before it committed");
    k = await(d.get(), in, 10000, timed_out);
    h = k > 0 ? ctl::peek_header(std::span<const std::byte>(in.data(), static_cast<std::size_t>(k))) : std::nullopt;
    if (!h || h->type != ctl::msg_type::migrate_committed || h->status) {
      if (!timed_out && k == 0) return roll_back(rnic::fn_errc::migration_failed, to + " ended before it committed");
      // No answer, or a refusal after commit: it may serve the function or not. Neither side
      // keeps it: its programs fail here.
      for (connection* c : cs) notify(*c, rnic::fn_errc::migration_failed), c->closing = true;
      out = "VF " + std::to_string(n) + ": " + to + " did not confirm it took it; its programs fail";
      log("%s: migrating VF %u: %s", p.name.c_str(), f, out.c_str());
      return rnic::fn_errc::migration_failed;
    }
    go(mg::event::committed);
    // Release: the function and its attachments are the destination's.
    p.sw->release(f);
    for (auto it = p.conns.begin(); it != p.conns.end();) {
      if (std::find(cs.begin(), cs.end(), &*it) == cs.end()) {
        ++it;
        continue;
      }
      p.by_attachment.erase(it->attachment);
      it = p.conns.erase(it);
    }
    const rnic::time_ns t2 = net::monotonic_ns();
    auto ms = [](rnic::time_ns a, rnic::time_ns b) { return static_cast<double>(b - a) / 1e6; };
    char b[256];
    std::snprintf(b, sizeof b,
                  " with %zu attachments: quiesced in %.3f ms, held there in %.3f ms, addresses given up in %.3f ms, "
                  "committed in %.3f ms; commit sent at %lld.%06ld (CLOCK_REALTIME)\n",
                  cs.size(), ms(t0, tq), ms(tq, t1), ms(t1, tc), ms(tc, t2), static_cast<long long>(wall.tv_sec), wall.tv_nsec / 1000);
    out = "VF " + std::to_string(f) + " moved to " + to + b;
    log("%s: %s", p.name.c_str(), out.substr(0, out.size() - 1).c_str());
    return std::nullopt;
  }

  // ---- moving a function: the destination ----------------------------------------------------
  void answer(connection& c, ctl::msg_type type, std::uint16_t tag, std::optional<rnic::fn_errc> e) {
    ctl::ctl_header h{type, fn::version, static_cast<std::uint16_t>(e ? static_cast<std::uint16_t>(*e) : 0), tag};
    (void)send_encoded(c.sock.get(), h);
  }
  void arrive_offer(port_device& p, connection& c, std::span<const std::byte> m, std::uint16_t tag) {
    // Only root or the device process's user hands a function over (as only they change one).
    if (c.uid != 0 && c.uid != ::geteuid()) return answer(c, ctl::msg_type::migrate_ready, tag, rnic::fn_errc::not_permitted);
    const auto o = wire::decode<ctl::migrate_offer>(m);
    if (!o || c.offer || c.attachment || o->gid_count == 0 || o->gid_count > 4 || o->pkeys.size() > 16 || o->attachments >= rnic::qpn_blocks)
      return answer(c, ctl::msg_type::migrate_ready, tag, rnic::fn_errc::bad_message);
    auto a = std::make_unique<connection::arriving>();
    rnic::function_image& im = a->image;
    im.function = o->function;
    im.settings.mac = o->mac, im.settings.trust = o->trust != 0;
    im.settings.limits = {o->max_qps, o->max_mrs, o->max_cqs, o->max_reg_bytes, o->rate_bps};
    const wire::ip_address<16>* gids[4] = {&o->gid0, &o->gid1, &o->gid2, &o->gid3};
    for (unsigned i = 0; i < o->gid_count; ++i) {
      pushwire::ib::gid g;
      std::copy(gids[i]->begin(), gids[i]->end(), g.begin());
      im.settings.gids.push_back(g);
    }
    im.settings.pkeys.assign(o->pkeys.begin(), o->pkeys.end());
    a->prefix = o->prefix;
    a->expected = o->attachments;
    a->state = rnic::migration::dst_state::idle;
    c.offer = std::move(a);
    if (c.offer->expected == 0) check_offer(p, c, tag);
  }
  void arrive_attachment(port_device& p, connection& c, std::span<const std::byte> m, std::vector<unique_fd>& fds) {
    const auto a = wire::decode<ctl::migrate_attachment>(m);
    if (!c.offer || c.offer->state != rnic::migration::dst_state::idle)
      return (void)reply_text(c.sock.get(), ctl::msg_type::output, a ? a->header.tag : 0, rnic::fn_errc::bad_message,
                              "an attachment with no function offered");
    if (!a || fds.size() != 4 || c.offer->descriptors.size() >= c.offer->expected) {
      c.offer.reset();
      return answer(c, ctl::msg_type::migrate_ready, 1, rnic::fn_errc::bad_message);
    }
    c.offer->image.attachments.push_back({a->id, a->pid, a->qps, a->mrs, a->cqs, a->bytes});
    c.offer->descriptors.push_back({std::move(fds[0]), std::move(fds[1]), std::move(fds[2]), std::move(fds[3])});
    if (c.offer->descriptors.size() == c.offer->expected) check_offer(p, c, a->header.tag);
  }
  void check_offer(port_device& p, connection& c, std::uint16_t tag) {
    namespace mg = rnic::migration;
    auto& o = *c.offer;
    std::vector<pushwire::ib::gid> arriving;
    const auto home = net::find_local(wire::ip_address<4>{pushwire::ib::v4_of(p.sw->config().gids[0])});
    for (const auto& g : o.image.settings.gids)
      if (home && pushwire::ib::is_v4(g)) arriving.push_back(g);
    std::optional<rnic::fn_errc> e = p.sw->check_adopt(o.image, o.image.function, arriving);
    if (!e && !arriving.empty() && !net::may_change_addresses()) e = rnic::fn_errc::not_permitted;
    // Its regions must be laid out as this device's (the same slots).
    for (auto& d : o.descriptors) {
      if (e) break;
      auto r = net::shared_region::open(unique_fd(::dup(d.region.get())), fn::region_bytes(p.sw->config().slots));
      fn::region_view v;
      if (!r.ok() || fn::check_region(r.bytes(), v) || v.slots != p.sw->config().slots) e = rnic::fn_errc::bad_message;
    }
    o.state = mg::step(o.state, mg::event::offer)->to;
    o.state = mg::step(o.state, e ? mg::event::check_bad : mg::event::check_ok)->to;
    answer(c, ctl::msg_type::migrate_ready, tag, e);
    log("%s: VF %u offered with %zu attachments: %s", p.name.c_str(), o.image.function, o.descriptors.size(),
        e ? std::string(name_of(*e)).c_str() : "held");
    if (e) c.offer.reset();
  }
  void arrive_commit(port_device& p, connection& c, std::uint16_t tag) {
    namespace mg = rnic::migration;
    if (!c.offer || c.offer->state != mg::dst_state::held) return answer(c, ctl::msg_type::migrate_committed, tag, rnic::fn_errc::bad_message);
    auto& o = *c.offer;
    const rnic::time_ns t0 = net::monotonic_ns();
    const auto home = net::find_local(wire::ip_address<4>{pushwire::ib::v4_of(p.sw->config().gids[0])});
    for (const auto& g : o.image.settings.gids) {
      const auto& have = p.sw->config().gids;
      if (std::find(have.begin(), have.end(), g) != have.end()) continue;
      if (auto e = receive_address(p, g, home ? home->ifindex : 0, o.prefix))
        log("%s: taking %s: %s", p.name.c_str(), rnic::eswitch::text_of(g).c_str(), e->c_str());
    }
    if (auto e = p.sw->adopt(o.image, o.image.function)) {
      log("%s: VF %u: %s after commit", p.name.c_str(), o.image.function, std::string(name_of(*e)).c_str());
      c.offer.reset();
      return answer(c, ctl::msg_type::migrate_committed, tag, e);
    }
    o.state = mg::step(o.state, mg::event::commit)->to;
    for (std::size_t i = 0; i < o.descriptors.size(); ++i) {
      auto& d = o.descriptors[i];
      const auto& held = o.image.attachments[i];
      connection n;
      ucred cred{};
      socklen_t len = sizeof cred;
      n.uid = ::getsockopt(d.sock.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 ? cred.uid : static_cast<uid_t>(-1);
      n.sock = std::move(d.sock);
      n.region = net::shared_region::open(std::move(d.region), fn::region_bytes(p.sw->config().slots));
      n.doorbell = std::move(d.doorbell), n.wake = std::move(d.wake);
      fn::region_view v;
      (void)fn::check_region(n.region.bytes(), v);
      n.tx = fn::ring_consumer::resume(v.tx, v.slots);
      n.rx = fn::ring_producer::resume(v.rx, v.slots);
      n.attachment = held.id, n.pid = held.pid;
      p.conns.push_back(std::move(n));
      p.by_attachment[held.id] = &p.conns.back();
      v.count_move();  // its engine resends and NAKs at once (spec/migration.md §5)
      net::signal_eventfd(p.conns.back().wake.get());  // a program asleep looks at its rings again
    }
    log("%s: VF %u arrived with %zu attachments, serving in %.3f ms", p.name.c_str(), o.image.function, o.descriptors.size(),
        static_cast<double>(net::monotonic_ns() - t0) / 1e6);
    answer(c, ctl::msg_type::migrate_committed, tag, std::nullopt);
    c.offer.reset();
  }

  void shutdown() {
    if (opt_.faults.faults.loss > 0) {  // what --faults did (the sockets of addresses gone too)
      std::uint64_t lost = gone_lost_;
      for (auto& p : ports_) {
        lost += p->udp->stats().lost;
        for (auto& x : p->extra) lost += x.udp->stats().lost;
#ifdef PUSHWIRE_HAVE_XDP
        if (p->xdp) lost += p->xdp->stats().lost;
#endif
      }
      log("faults injected: lost %llu frames", static_cast<unsigned long long>(lost));
    }
    for (auto& p : ports_) {
      for (connection& c : p->conns)
        if (c.attachment) notify(c, rnic::fn_errc::shutting_down);
      ::unlink(p->control.c_str());
      const auto& d = p->sw->rx_drops();
      log("%s: stopped (%zu programs were attached); frames from the wire dropped: not_roce %llu, no_attachment %llu, "
          "not_its_address %llu, ring_full %llu",
          p->name.c_str(), p->by_attachment.size(), static_cast<unsigned long long>(d[0]), static_cast<unsigned long long>(d[1]),
          static_cast<unsigned long long>(d[2]), static_cast<unsigned long long>(d[3]));
    }
    ports_.clear();
  }

  options opt_;
  unique_fd loadavg_{::open("/proc/loadavg", O_RDONLY | O_CLOEXEC)};
  net::announcer arp_;  ///< gratuitous ARPs for the addresses that arrive with functions
  std::uint64_t gone_lost_ = 0;  ///< frames --faults lost on the sockets of addresses given up
  std::uint64_t sockets_ = 0;  ///< UDP ports opened: each one's fault seed is faults.seed + its index
  unsigned cores_ = std::max(1u, std::thread::hardware_concurrency());
  rnic::time_ns spare_checked_ = 0;
  bool spare_ = true;
  std::vector<std::unique_ptr<port_device>> ports_;
  unique_fd sigfd_;
  bool stop_ = false;
  std::vector<pollfd> fds_;
  struct owner {
    connection* c;
    port_device* p;
    int kind;
  };
  std::vector<owner> owners_;
  std::array<std::byte, fn::slot_capacity> buf_{};
  std::vector<std::byte> msg_ = std::vector<std::byte>(ctl::max_message);
};

// ---- ctl ------------------------------------------------------------------------------------
int run_ctl(int argc, char** argv) {
  if (argc < 3) return usage("ctl PATH COMMAND...");
  unique_fd s = net::connect_seqpacket(argv[2]);
  if (!s) {
    std::fprintf(stderr, "pushwire-rnicd: ctl: %s: %s\n", argv[2], std::strerror(errno));
    return 1;
  }
  std::string text;
  for (int i = 3; i < argc; ++i) {
    if (i > 3) text.push_back('\0');
    text += argv[i];
  }
  if (argc == 3) text = "show";
  if (!reply_text(s.get(), ctl::msg_type::command, 1, std::nullopt, text)) {
    std::fprintf(stderr, "pushwire-rnicd: ctl: %s\n", std::strerror(errno));
    return 1;
  }
  std::vector<std::byte> buf(ctl::max_message);
  const ssize_t n = net::receive_message(s.get(), buf);
  const auto r = n > 0 ? wire::decode<ctl::text_message>(std::span<const std::byte>(buf.data(), static_cast<std::size_t>(n)))
                       : wire::result<ctl::text_message>(wire::errc::truncated);
  if (!r) {
    std::fprintf(stderr, "pushwire-rnicd: ctl: no answer from %s\n", argv[2]);
    return 1;
  }
  std::string out;
  for (std::uint8_t b : r->text) out.push_back(static_cast<char>(b));
  if (r->header.status) {
    const auto e = static_cast<rnic::fn_errc>(r->header.status);
    std::fprintf(stderr, "pushwire-rnicd: ctl: %.*s: %s\n", static_cast<int>(name_of(e).size()), name_of(e).data(), out.c_str());
    return 1;
  }
  std::fputs(out.c_str(), stdout);
  return 0;
}

bool parse_count(const char* s, std::uint64_t& v) {
  char* end = nullptr;
  errno = 0;
  v = std::strtoull(s, &end, 10);
  return errno == 0 && end && *end == 0 && end != s;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string_view(argv[1]) == "ctl") return run_ctl(argc, argv);
  options o;
  std::string ports;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    std::uint64_t v = 0;
    if (a == "--port") {
      const char* p = value();
      if (!p) return usage("--port NAME:IPV4[:MTU][@IPV6][/xdp=IF]");
      ports += std::string(p) + " ";
    } else if (a == "--xdp") {  // the port before it, over AF_XDP on interface IF
      const char* p = value();
      if (!p || ports.empty()) return usage("--xdp IF follows the --port it carries");
      ports.pop_back();
      ports += std::string("/xdp=") + p + " ";
    } else if (a == "--functions") {
      const char* p = value();
      if (!p || !parse_count(p, v) || v > rnic::max_vfs) return usage("--functions: 0..127 VFs");
      o.vfs = static_cast<std::uint32_t>(v);
    } else if (a == "--control") {
      const char* p = value();
      if (!p) return usage("--control PATH");
      o.control = p;
    } else if (a == "--slots") {
      const char* p = value();
      if (!p || !parse_count(p, v) || !fn::valid_slots(static_cast<std::uint32_t>(v)) || v > fn::max_slots)
        return usage("--slots: a power of two, 16..4096");
      o.slots = static_cast<std::uint32_t>(v);
    } else if (a == "--poll-us") {
      const char* p = value();
      if (!p || !parse_count(p, v) || v > 1'000'000) return usage("--poll-us: 0..1000000");
      o.poll_ns = static_cast<rnic::time_ns>(v * 1000);
    } else if (a == "--rate") {
      const char* p = value();
      if (!p || !parse_count(p, v)) return usage("--rate: bits per second of every function (0: unlimited)");
      o.rate = v;
    } else if (a == "--egress") {
      const char* p = value();
      if (!p) return usage("--egress \"SETTING VALUE ...\"");
      std::vector<std::string> w;
      for (std::string_view t = p; !t.empty();) {
        const std::size_t z = std::min(t.find(' '), t.size());
        if (z) w.emplace_back(t.substr(0, z));
        t.remove_prefix(std::min(z + 1, t.size()));
      }
      pushwire::rnic::egress_config e;
      for (std::size_t k = 0; k < w.size(); k += 2)
        if (std::string why = k + 1 < w.size() ? pushwire::rnic::apply_egress(e, w[k], w[k + 1]) : "SETTING VALUE pairs"; !why.empty())
          return usage(("--egress: " + why).c_str());
      if (std::string why = pushwire::rnic::check_egress(e); !why.empty()) return usage(("--egress: " + why).c_str());
      o.egress.insert(o.egress.end(), w.begin(), w.end());
    } else if (a == "--faults") {
      const char* p = value();
      if (!p) return usage("--faults SPEC");
      auto f = pushwire::verbs::parse_faults(p);
      if (!f) return usage(("--faults: " + f.error).c_str());
      o.faults = f.value;
    } else if (a == "-h" || a == "--help") {
      usage();
      return 0;
    } else {
      return usage(("unknown argument " + std::string(a)).c_str());
    }
  }
  const auto parsed = pushwire::verbs::parse_devices(ports);
  if (!parsed) return usage(("--port: " + parsed.error).c_str());
  if (parsed.value.size() > 2) return usage("one or two ports");
  for (const auto& p : parsed.value) {
    if (!p.address) return usage("--port: an IPv4 address, not auto");
    if (!p.more_ports.empty()) return usage("--port: one address each (+ADDRESS is the provider's; each --port is a port of its own)");
  }
  if (parsed.value.size() > 1 && !o.control.empty()) return usage("--control names one port's socket: with two ports each has /run/pushwire/NAME.sock");
  o.ports = parsed.value;
  daemon_state d(std::move(o));
  if (!d.start()) return 1;
  return d.run();
}
