// A host's IPv4 addresses, for an address that moves between hosts with a function
// (spec/migration.md §4): where an address is configured (interface, prefix length, the
// interface's MAC), adding and removing it (rtnetlink RTM_NEWADDR / RTM_DELADDR, CAP_NET_ADMIN),
// and announcing it with a gratuitous ARP (AF_PACKET, CAP_NET_RAW) so that neighbours and bridges
// learn where it is now. Real I/O, in the caller's network namespace: nothing sans-IO includes it.
#pragma once

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <linux/if_packet.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <fstream>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>

#include <pushwire/net/shm.hpp>
#include <pushwire/wire/codec.hpp>
#include <pushwire/wire/ethernet.hpp>

namespace pushwire::net {

/// An IPv4 address configured on an interface of this network namespace.
struct local_address {
  std::string interface;
  unsigned ifindex = 0;
  wire::ip_address<4> ip{};
  unsigned prefix = 32;          ///< the prefix length it was configured with, 0..32
  wire::mac_address mac{};       ///< the interface's hardware address (zero for one without)
};

/// Whether this process may add, remove and announce addresses: CAP_NET_ADMIN and CAP_NET_RAW
/// are in its effective set (/proc/self/status, CapEff).
inline bool may_change_addresses() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("CapEff:", 0) == 0) {
      const unsigned long long eff = std::stoull(line.substr(7), nullptr, 16);
      constexpr unsigned long long need = (1ull << 12) | (1ull << 13);  // CAP_NET_ADMIN, CAP_NET_RAW
      return (eff & need) == need;
    }
  return false;
}

/// Where `ip` is configured here, if it is.
inline std::optional<local_address> find_local(const wire::ip_address<4>& ip) {
  ifaddrs* all = nullptr;
  if (::getifaddrs(&all) != 0) return std::nullopt;
  std::optional<local_address> found;
  for (ifaddrs* a = all; a; a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET) continue;
    const auto* in = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
    if (std::memcmp(&in->sin_addr, ip.data(), 4) != 0) continue;
    local_address l;
    l.interface = a->ifa_name;
    l.ifindex = ::if_nametoindex(a->ifa_name);
    l.ip = ip;
    l.prefix = 0;
    if (a->ifa_netmask) {
      std::uint32_t m;
      std::memcpy(&m, &reinterpret_cast<const sockaddr_in*>(a->ifa_netmask)->sin_addr, 4);
      l.prefix = static_cast<unsigned>(__builtin_popcount(m));
    }
    found = l;
    break;
  }
  if (found)
    for (ifaddrs* a = all; a; a = a->ifa_next)
      if (a->ifa_addr && a->ifa_addr->sa_family == AF_PACKET && found->interface == a->ifa_name) {
        const auto* ll = reinterpret_cast<const sockaddr_ll*>(a->ifa_addr);
        if (ll->sll_halen == 6) std::memcpy(found->mac.data(), ll->sll_addr, 6);
      }
  ::freeifaddrs(all);
  return found;
}

namespace detail {
/// One RTM_NEWADDR or RTM_DELADDR request, and the kernel's answer: 0 or an errno.
inline int change_address(std::uint16_t type, std::uint16_t flags, unsigned ifindex, const wire::ip_address<4>& ip, unsigned prefix) {
  unique_fd s(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE));
  if (!s) return errno;
  struct {
    nlmsghdr h;
    ifaddrmsg m;
    alignas(NLMSG_ALIGNTO) std::array<std::uint8_t, 2 * RTA_SPACE(4)> attrs;
  } req{};
  req.h.nlmsg_len = NLMSG_LENGTH(sizeof(ifaddrmsg)) + 2 * RTA_SPACE(4);
  req.h.nlmsg_type = type;
  req.h.nlmsg_flags = static_cast<std::uint16_t>(NLM_F_REQUEST | NLM_F_ACK | flags);
  req.h.nlmsg_seq = 1;
  req.m.ifa_family = AF_INET;
  req.m.ifa_prefixlen = static_cast<std::uint8_t>(prefix);
  req.m.ifa_scope = RT_SCOPE_UNIVERSE;
  req.m.ifa_index = ifindex;
  std::uint8_t* p = req.attrs.data();
  for (std::uint16_t t : {std::uint16_t{IFA_LOCAL}, std::uint16_t{IFA_ADDRESS}}) {
    rtattr a{};
    a.rta_len = RTA_LENGTH(4);
    a.rta_type = t;
    std::memcpy(p, &a, sizeof a);
    std::memcpy(p + RTA_LENGTH(0), ip.data(), 4);
    p += RTA_SPACE(4);
  }
  sockaddr_nl to{};
  to.nl_family = AF_NETLINK;
  if (::sendto(s.get(), &req, req.h.nlmsg_len, 0, reinterpret_cast<const sockaddr*>(&to), sizeof to) < 0) return errno;
  alignas(nlmsghdr) std::array<std::uint8_t, 4096> buf{};
  const ssize_t n = ::recv(s.get(), buf.data(), buf.size(), 0);
  if (n < static_cast<ssize_t>(NLMSG_LENGTH(sizeof(nlmsgerr)))) return EIO;
  nlmsghdr h;
  std::memcpy(&h, buf.data(), sizeof h);
  if (h.nlmsg_type != NLMSG_ERROR) return EIO;
  nlmsgerr e;
  std::memcpy(&e, buf.data() + NLMSG_LENGTH(0), sizeof e);
  return -e.error;
}
}  // namespace detail

/// Adds ip/prefix to interface ifindex. 0, or an errno: EEXIST (there already), EPERM (no
/// CAP_NET_ADMIN), ENODEV.
inline int add_address(unsigned ifindex, const wire::ip_address<4>& ip, unsigned prefix) {
  return detail::change_address(RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL, ifindex, ip, prefix);
}
/// Removes ip/prefix from interface ifindex. 0, or an errno: EADDRNOTAVAIL (not there), EPERM.
inline int remove_address(unsigned ifindex, const wire::ip_address<4>& ip, unsigned prefix) {
  return detail::change_address(RTM_DELADDR, 0, ifindex, ip, prefix);
}

/// Broadcasts gratuitous ARPs. Its packet socket is opened once and kept: closing one waits
/// for the kernel's network RCU grace period (synchronize_net, about 10 ms), which must not
/// fall inside a migration's downtime. Protocol 0: the socket receives nothing.
class announcer {
 public:
  announcer() : s_(::socket(AF_PACKET, SOCK_DGRAM | SOCK_CLOEXEC, 0)), error_(s_ ? 0 : errno) {}
  /// 0, or the errno of opening the socket (EPERM without CAP_NET_RAW).
  int error() const { return error_; }
  /// Broadcasts a gratuitous ARP for ip from mac on interface ifindex. 0, or an errno.
  int announce(unsigned ifindex, const wire::mac_address& mac, const wire::ip_address<4>& ip) const {
    if (!s_) return error_;
    sockaddr_ll to{};
    to.sll_family = AF_PACKET;
    to.sll_protocol = htons(wire::ethertype_arp);
    to.sll_ifindex = static_cast<int>(ifindex);
    to.sll_halen = 6;
    std::memcpy(to.sll_addr, wire::broadcast_mac.data(), 6);
    const auto bytes = wire::to_bytes(wire::gratuitous_arp(mac, ip));
    if (::sendto(s_.get(), bytes.data(), bytes.size(), 0, reinterpret_cast<const sockaddr*>(&to), sizeof to) < 0) return errno;
    return 0;
  }

 private:
  unique_fd s_;
  int error_;
};

}  // namespace pushwire::net
