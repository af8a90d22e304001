// net::tap (spec/net.md §4), in a network namespace of its own (a child process unshares one):
// the MAC and MTU set here are the interface's, and a frame written in is taken by the stack,
// which answers it: an ARP request for the interface's address gets a reply from the MAC set.
// Moved to another namespace, a TAP is still set and read (its settings follow it), and
// link_watch reports its changes and no other interface's.
// Skips, visibly, where namespaces or /dev/net/tun are not allowed.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <pushwire/net/netns.hpp>
#include <pushwire/net/tap.hpp>
#include <pushwire/net/udp.hpp>

#include "../support/process.hpp"

using namespace pushwire;

namespace {

int set_ipv4(const char* ifname, std::uint32_t addr, std::uint32_t mask) {
  const int s = ::socket(AF_INET, SOCK_DGRAM, 0);
  ifreq r{};
  std::strncpy(r.ifr_name, ifname, IFNAMSIZ - 1);
  auto* a = reinterpret_cast<sockaddr_in*>(&r.ifr_addr);
  a->sin_family = AF_INET;
  a->sin_addr.s_addr = htonl(addr);
  int rc = ::ioctl(s, SIOCSIFADDR, &r);
  a->sin_addr.s_addr = htonl(mask);
  if (rc == 0) rc = ::ioctl(s, SIOCSIFNETMASK, &r);
  ::close(s);
  return rc;
}

// The child's body: 0 on success, else the step that failed (10+: setup, 20+: checks).
// offloads: every frame carries the 10-byte virtio-net header (all zero: no GSO, no checksum
// left to do) in both directions.
int in_namespace(bool offloads) {
  net::tap t("pwtap0", offloads);
  const std::size_t h = offloads ? net::vnet_hdr_size : 0;
  if (!t.ok()) return t.error() == ENOENT || t.error() == EPERM || t.error() == EACCES ? 101 : 11;
  const wire::mac_address mine{0x02, 0, 0, 0, 0x18, 0x01}, peer{0x02, 0, 0, 0, 0x18, 0x02};
  if (t.set_mac(mine) != 0) return 12;
  if (t.set_mtu(1400) != 0) return 13;
  if (set_ipv4("pwtap0", 0xC6120001, 0xFFFFFF00) != 0) return 14;  // 198.18.0.1/24
  if (t.set_up(true) != 0) return 15;
  if (t.mac() != mine) return 21;
  // An ARP request from 198.18.0.2 (peer) for 198.18.0.1.
  std::array<std::uint8_t, 42 + net::vnet_hdr_size> with_hdr{};
  const std::span<std::uint8_t> arp = std::span(with_hdr).subspan(h, 42);
  std::memset(arp.data(), 0xFF, 6);
  std::memcpy(arp.data() + 6, peer.data(), 6);
  arp[12] = 0x08, arp[13] = 0x06;                                  // ARP
  arp[14] = 0, arp[15] = 1, arp[16] = 0x08, arp[17] = 0, arp[18] = 6, arp[19] = 4, arp[20] = 0, arp[21] = 1;  // request
  std::memcpy(arp.data() + 22, peer.data(), 6);
  const std::uint8_t spa[4] = {198, 18, 0, 2}, tpa[4] = {198, 18, 0, 1};
  std::memcpy(arp.data() + 28, spa, 4);
  std::memcpy(arp.data() + 38, tpa, 4);
  if (!t.write(std::as_bytes(std::span(with_hdr).first(42 + h)))) return 22;
  std::array<std::byte, 2048> buf;
  const auto end = net::monotonic_ns() + 2'000'000'000;
  while (net::monotonic_ns() < end) {
    const std::size_t n = t.read(buf);
    if (n < 42 + h) {
      ::usleep(1000);
      continue;
    }
    const auto* f = reinterpret_cast<const std::uint8_t*>(buf.data()) + h;
    if (offloads && (buf[0] != std::byte{0} || buf[1] != std::byte{0})) return 28;  // an ARP reply needs neither checksum nor GSO
    if (f[12] != 0x08 || f[13] != 0x06 || f[21] != 2) continue;  // not an ARP reply (IPv6 ND, ...)
    if (std::memcmp(f, peer.data(), 6) != 0) return 23;           // to the asker
    if (std::memcmp(f + 22, mine.data(), 6) != 0) return 24;      // from the MAC set here
    if (std::memcmp(f + 28, tpa, 4) != 0) return 25;
    return t.stats().frames_out == 1 && t.stats().frames_in >= 1 ? 0 : 26;
  }
  return 27;  // no reply
}

}  // namespace

TEST_CASE("tap: in its own namespace, the MAC set is the interface's and an ARP request written in is answered", "[net]") {
  const bool offloads = GENERATE(false, true);
  INFO("offloads " << offloads);
  const std::optional<int> failed_step = test::in_new_netns([&] { return in_namespace(offloads); }, "no network namespace or /dev/net/tun here (needs root)");
  if (failed_step) CHECK(*failed_step == 0);
}

namespace {

// The child's body for a TAP moved to another namespace: 0, or the step that failed.
int moved_away() {
  net::tap t("pwtap1");
  if (!t.ok()) return t.error() == ENOENT || t.error() == EPERM || t.error() == EACCES ? 101 : 11;
  net::tap other("pwtap2");
  if (!other.ok()) return 12;
  // link_watch: a change to pwtap1 is reported, one to pwtap2 is not.
  net::link_watch w(t.index());
  if (!w.ok() || t.index() == 0) return 13;
  if (other.set_mtu(1280) != 0) return 14;
  ::usleep(50'000);
  if (w.changed()) return 21;
  if (t.set_mtu(1280) != 0) return 15;
  ::usleep(50'000);
  if (!w.changed()) return 22;
  if (w.changed()) return 23;  // taken once
  // A namespace held by a sleeping process, which says over a pipe when it is in it; pwtap1
  // moves there (ip link set ... netns PID) and is no longer found here.
  int ready[2];
  if (::pipe(ready) != 0) return 17;
  const pid_t holder = ::fork();
  if (holder < 0) return 18;
  if (holder == 0) {
    const char ok = ::unshare(CLONE_NEWNET) == 0 ? 1 : 0;
    (void)!::write(ready[1], &ok, 1);
    if (ok) ::pause();
    ::_exit(0);
  }
  ::close(ready[1]);
  char ok = 0;
  const bool in_ns = ::read(ready[0], &ok, 1) == 1 && ok == 1;
  ::close(ready[0]);
  const std::string pid = std::to_string(holder);
  int step = 0;
  if (!in_ns) step = 19;
  if (!step && std::system(("ip link set pwtap1 netns " + pid).c_str()) != 0) step = 16;
  if (!step && ::if_nametoindex("pwtap1") != 0) step = 20;  // gone from here: control must follow it
  // Still controlled from here: MTU, up, speed, MAC, as the other namespace sees them.
  const wire::mac_address m{0x02, 0, 0, 0, 0x18, 0x09};
  if (!step && t.set_mtu(1300) != 0) step = 24;
  if (!step && t.set_up(true) != 0) step = 25;
  if (!step && t.set_speed(25000) != 0) step = 26;
  if (!step && t.set_mac(m) != 0) step = 27;
  if (!step && (t.mtu() != 1300 || t.speed() != 25000 || t.mac() != m || !(t.flags() & IFF_UP))) step = 28;
  if (!step && std::system(("nsenter -t " + pid + " -n ip -o link show pwtap1 | grep 'mtu 1300' | grep -q '02:00:00:00:18:09'").c_str()) != 0)
    step = 29;  // as `ip` sees it there
  if (!step && other.mtu() != 1280) step = 30;  // pwtap2 is still read here
  ::kill(holder, SIGKILL);
  ::waitpid(holder, nullptr, 0);
  return step;
}

}  // namespace

TEST_CASE("tap: moved to another namespace, it is still set and read there, and link_watch reports only its own changes", "[net]") {
  const std::optional<int> failed_step = test::in_new_netns(moved_away, "no network namespace or /dev/net/tun here (needs root)");
  if (failed_step) CHECK(*failed_step == 0);
}

namespace {

// The child's body for net::in_netns: 0, or the step that failed. The child is in a namespace of
// its own with a veth interface; the step runs in its parent's namespace (/proc/PPID/ns/net),
// where the interface is not, on a thread of its own, and a socket it opens stays there.
int enter_parent_netns() {
  if (std::system("ip link add pwns0 type veth peer name pwns1 2>/dev/null") != 0) return 101;
  if (::if_nametoindex("pwns0") == 0) return 11;
  const auto caller = std::this_thread::get_id();
  bool ran = false, other_thread = false;
  unsigned there = 1;
  int s = -1;
  if (net::in_netns("/proc/" + std::to_string(::getppid()) + "/ns/net", [&] {
        ran = true;
        other_thread = std::this_thread::get_id() != caller;
        there = ::if_nametoindex("pwns0");
        s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
      }) != 0)
    return 12;
  if (!ran || !other_thread) return 13;
  if (there != 0) return 14;                     // the step saw the parent's namespace
  if (::if_nametoindex("pwns0") == 0) return 15;  // the caller stayed here
  // The socket is the parent namespace's: SIOCGIFINDEX for pwns0 fails through it, and succeeds through one made here.
  ifreq r{};
  std::strncpy(r.ifr_name, "pwns0", IFNAMSIZ - 1);
  if (s < 0 || ::ioctl(s, SIOCGIFINDEX, &r) == 0) return 16;
  ::close(s);
  const int here = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (here < 0 || ::ioctl(here, SIOCGIFINDEX, &r) != 0) return 17;
  ::close(here);
  // No such namespace: ENOENT, and the step does not run.
  ran = false;
  if (net::in_netns(std::string{"pushwire-no-such-namespace"}, [&] { ran = true; }) != ENOENT || ran) return 18;
  return 0;
}

}  // namespace

TEST_CASE("netns: in_netns runs a step on a thread in another namespace, the caller stays, a missing namespace is ENOENT", "[net]") {
  const std::optional<int> failed_step = test::in_new_netns(enter_parent_netns, "no network namespace here (needs root)");
  if (failed_step) CHECK(*failed_step == 0);
}
