// pushwire-rnicd: one software RNIC shared by many programs (spec/rnicd.md).
//
//   pushwire-rnicd --port NAME:IPV4[:MTU][@IPV6] [--port ...] [--functions N] [--control PATH]
//                  [--slots N] [--poll-us N] [--rate BPS]
//   pushwire-rnicd ctl PATH show [--json] | vf add N [SETTING VALUE...] | vf del N |
//                           vf set N SETTING VALUE...
//
// A device process: it owns each port's UDP socket (port 4791 of the port's addresses) and is
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
#include <deque>
#include <filesystem>
#include <list>
#include <thread>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <pushwire/net/clock.hpp>
#include <pushwire/net/shm.hpp>
#include <pushwire/net/udp.hpp>
#include <pushwire/rnic/attach.hpp>
#include <pushwire/rnic/eswitch.hpp>

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
  /// Frames steered to it while its rx ring was full, oldest first (at most backlog_bytes).
  std::deque<std::vector<std::byte>> backlog;
  std::size_t backlog_size = 0;
};
/// The most bytes of frames an attachment's backlog holds (a UDP socket's receive buffer).
constexpr std::size_t backlog_bytes = 4u << 20;

struct port_device {
  std::string name, control;
  unique_fd listen;
  std::unique_ptr<net::udp_port> udp;
  std::unique_ptr<rnic::eswitch> sw;
  wire::mac_address mac{};
  std::list<connection> conns;
  std::unordered_map<std::uint32_t, connection*> by_attachment;
};

struct options {
  std::vector<pushwire::verbs::device_spec> ports;
  std::uint32_t vfs = 0, slots = fn::default_slots;
  std::string control;
  rnic::time_ns poll_ns = 100'000;
  std::uint64_t rate = 0;
};

int usage(const char* why = nullptr) {
  if (why) std::fprintf(stderr, "pushwire-rnicd: %s\n", why);
  std::fprintf(stderr,
               "usage: pushwire-rnicd --port NAME:IPV4[:MTU][@IPV6] [--port ...] [--functions N] [--control PATH]\n"
               "                      [--slots N] [--poll-us N] [--rate BPS]\n"
               "       pushwire-rnicd ctl PATH show [--json] | vf add N [SETTING VALUE...] | vf del N | vf set N SETTING VALUE...\n"
               "settings: mac, gid, max_qps, max_mrs, max_cqs, max_bytes, rate, trust, pkey (spec/rnicd.md)\n");
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
      p->udp = std::make_unique<net::udp_port>(uc);
      if (!p->udp->ok()) {
        log("%s: cannot bind %u.%u.%u.%u:4791: %s", spec.name.c_str(), uc.address[0], uc.address[1], uc.address[2], uc.address[3],
            std::strerror(p->udp->error()));
        return false;
      }
      rnic::eswitch_config ec;
      p->mac = rnic::function_mac(0, *spec.address);
      ec.mac = p->mac;
      ec.gids.push_back(pushwire::ib::gid_v4(*spec.address));
      if (spec.address6) ec.gids.push_back(*spec.address6);
      ec.mtu = static_cast<std::uint16_t>(spec.mtu);
      ec.vfs = opt_.vfs;
      ec.slots = opt_.slots;
      ec.limits.rate_bps = opt_.rate;
      p->sw = std::make_unique<rnic::eswitch>(ec);
      if (!listen_on(*p)) return false;
      log("%s: %u.%u.%u.%u mtu %u, %u VFs, %u slots per ring, control %s", p->name.c_str(), uc.address[0], uc.address[1], uc.address[2],
          uc.address[3], spec.mtu, std::min(opt_.vfs, rnic::max_vfs), opt_.slots, p->control.c_str());
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

  // ---- the data path ----------------------------------------------------------------------
  std::size_t turn(rnic::time_ns now) {
    std::size_t moved = 0;
    for (auto& pp : ports_) {
      port_device& p = *pp;
      for (connection& c : p.conns)
        if (c.attachment && !c.closing) moved += transmit(p, c, now) + drain_backlog(p, c);
      p.udp->flush(now);
      moved += p.udp->receive(p.mac, [&](std::span<std::byte> f) { deliver(p, f); });
      for (connection& c : p.conns)
        if (c.attachment && !c.closing) wake_if_waiting(p, c, now);
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
    for (; n < std::min<std::uint32_t>(*avail, 64); ++n) {
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
      else p.udp->send(copy, now);
    }
    return n;
  }
  void deliver(port_device& p, std::span<std::byte> f) {
    const auto to = p.sw->steer(f);
    const std::uint32_t* id = std::get_if<std::uint32_t>(&to);
    if (!id) return;
    connection* c = p.by_attachment.at(*id);
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
      for (connection& c : p->conns) {
        if (c.attachment && c.rate_until > now) t = std::min(t, c.rate_until - now);
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
      for (connection& c : p.conns) {
        if (c.closing) continue;
        add(c.sock.get(), &c, &p, 3);
        if (c.attachment && t > 0) {
          if (c.rate_until <= net::monotonic_ns() && !c.tx.arm_sleep()) armed_all = false;
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
      const ssize_t n = net::receive_message(c.sock.get(), msg_, nullptr, MSG_DONTWAIT);
      if (n < 0 && n != -2 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      if (n == 0 || n == -1) {
        c.closing = true;
        return;
      }
      if (n == -2) {
        (void)reply_text(c.sock.get(), ctl::msg_type::output, 0, rnic::fn_errc::bad_message, "message too long");
        continue;
      }
      handle(p, c, std::span<const std::byte>(msg_.data(), static_cast<std::size_t>(n)));
    }
  }
  void handle(port_device& p, connection& c, std::span<const std::byte> m) {
    const auto h = ctl::peek_header(m);
    if (!h) {
      const auto raw = wire::decode_prefix<ctl::ctl_header>(m);
      (void)reply_text(c.sock.get(), ctl::msg_type::output, raw ? raw->tag : 0,
                       raw ? rnic::fn_errc::unsupported_version : rnic::fn_errc::bad_message, "not a control message of version 1");
      return;
    }
    switch (h->type) {
      case ctl::msg_type::attach: return attach(p, c, m, h->tag);
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

  void shutdown() {
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
      if (!p) return usage("--port NAME:IPV4[:MTU][@IPV6]");
      ports += std::string(p) + " ";
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
  for (const auto& p : parsed.value)
    if (!p.address) return usage("--port: an IPv4 address, not auto");
  if (parsed.value.size() > 1 && !o.control.empty()) return usage("--control names one port's socket: with two ports each has /run/pushwire/NAME.sock");
  o.ports = parsed.value;
  daemon_state d(std::move(o));
  if (!d.start()) return 1;
  return d.run();
}
