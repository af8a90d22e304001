// net::tap (spec/net.md §4), in a network namespace of its own (a child process unshares one):
// the MAC and MTU set here are the interface's, and a frame written in is taken by the stack,
// which answers it: an ARP request for the interface's address gets a reply from the MAC set.
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
#include <cstring>
#include <vector>

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
