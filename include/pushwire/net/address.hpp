// A host's IPv4 addresses, for an address that moves between hosts with a function
// (spec/migration.md §4): where an address is configured (interface, prefix length, the
// interface's MAC), adding and removing it (rtnetlink RTM_NEWADDR / RTM_DELADDR, CAP_NET_ADMIN),
// and announcing it with a gratuitous ARP (AF_PACKET, CAP_NET_RAW) so that neighbours and bridges
// learn where it is now; the kernel's neighbour table (a neighbour's MAC, and asking for one)
// and its routes (the gateway to a destination).
// Real I/O, in the caller's network namespace: nothing sans-IO includes it.
#pragma once

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <linux/if_packet.h>
#include <linux/neighbour.h>
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
#include <span>
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

/// Whether `ip` (4 bytes IPv4, 16 bytes IPv6) is configured on the interface named `interface`
/// in this network namespace (getifaddrs).
inline bool configured_on(const std::string& interface, std::span<const std::uint8_t> ip) {
  ifaddrs* all = nullptr;
  if ((ip.size() != 4 && ip.size() != 16) || ::getifaddrs(&all) != 0) return false;
  bool found = false;
  for (ifaddrs* a = all; a && !found; a = a->ifa_next) {
    if (!a->ifa_addr || interface != a->ifa_name) continue;
    if (ip.size() == 4 && a->ifa_addr->sa_family == AF_INET)
      found = std::memcmp(&reinterpret_cast<const sockaddr_in*>(a->ifa_addr)->sin_addr, ip.data(), 4) == 0;
    else if (ip.size() == 16 && a->ifa_addr->sa_family == AF_INET6)
      found = std::memcmp(&reinterpret_cast<const sockaddr_in6*>(a->ifa_addr)->sin6_addr, ip.data(), 16) == 0;
  }
  ::freeifaddrs(all);
  return found;
}

namespace detail {
/// One rtnetlink request `req` (nlmsg_len bytes, NLM_F_REQUEST set by the caller), and its
/// answer: the first message's type, copied into `answer` (at most its size). 0, or an errno
/// (the kernel's NLMSG_ERROR code, or the socket's).
inline int rtnl_exchange(const void* req, std::size_t len, std::span<std::uint8_t> answer, std::uint16_t& type) {
  unique_fd s(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE));
  if (!s) return errno;
  sockaddr_nl to{};
  to.nl_family = AF_NETLINK;
  if (::sendto(s.get(), req, len, 0, reinterpret_cast<const sockaddr*>(&to), sizeof to) < 0) return errno;
  const ssize_t n = ::recv(s.get(), answer.data(), answer.size(), 0);
  if (n < static_cast<ssize_t>(NLMSG_LENGTH(0))) return EIO;
  nlmsghdr h;
  std::memcpy(&h, answer.data(), sizeof h);
  type = h.nlmsg_type;
  if (h.nlmsg_type != NLMSG_ERROR) return 0;
  if (n < static_cast<ssize_t>(NLMSG_LENGTH(sizeof(nlmsgerr)))) return EIO;
  nlmsgerr e;
  std::memcpy(&e, answer.data() + NLMSG_LENGTH(0), sizeof e);
  return -e.error;
}
/// One RTM_NEWADDR or RTM_DELADDR request, and the kernel's answer: 0 or an errno.
inline int change_address(std::uint16_t type, std::uint16_t flags, unsigned ifindex, const wire::ip_address<4>& ip, unsigned prefix) {
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
  alignas(nlmsghdr) std::array<std::uint8_t, 1024> buf{};
  std::uint16_t answer = 0;
  const int e = rtnl_exchange(&req, req.h.nlmsg_len, buf, answer);
  return e != 0 ? e : answer == NLMSG_ERROR ? 0 : EIO;
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

/// A neighbour's hardware address as the kernel's neighbour table (ARP for IPv4, neighbour
/// discovery for IPv6) holds it on one interface.
struct neighbour_entry {
  wire::mac_address mac{};
  std::uint16_t state = 0;  ///< NUD_* (linux/neighbour.h)
};

namespace detail {
/// A neighbour request (RTM_GETNEIGH, RTM_NEWNEIGH) for `ip` (4 or 16 bytes) on ifindex.
struct neigh_request {
  nlmsghdr h;
  ndmsg m;
  alignas(NLMSG_ALIGNTO) std::array<std::uint8_t, RTA_SPACE(16)> attrs;
};
inline neigh_request neighbour_request(std::uint16_t type, std::uint16_t flags, unsigned ifindex, std::span<const std::uint8_t> ip) {
  neigh_request r{};
  r.h.nlmsg_len = static_cast<std::uint32_t>(NLMSG_LENGTH(sizeof(ndmsg)) + RTA_SPACE(ip.size()));
  r.h.nlmsg_type = type;
  r.h.nlmsg_flags = static_cast<std::uint16_t>(NLM_F_REQUEST | flags);
  r.h.nlmsg_seq = 1;
  r.m.ndm_family = ip.size() == 16 ? AF_INET6 : AF_INET;
  r.m.ndm_ifindex = static_cast<int>(ifindex);
  rtattr a{};
  a.rta_len = static_cast<unsigned short>(RTA_LENGTH(ip.size()));
  a.rta_type = NDA_DST;
  std::memcpy(r.attrs.data(), &a, sizeof a);
  std::memcpy(r.attrs.data() + RTA_LENGTH(0), ip.data(), ip.size());
  return r;
}
}  // namespace detail

/// The kernel's neighbour entry for `ip` (4 bytes IPv4, 16 bytes IPv6) on interface ifindex
/// (RTM_GETNEIGH, Linux 5.0), when it holds a hardware address the kernel would send to
/// (NUD_VALID: reachable, stale, delay, probe, permanent, noarp); nullopt otherwise.
inline std::optional<neighbour_entry> neighbour(unsigned ifindex, std::span<const std::uint8_t> ip) {
  if (ip.size() != 4 && ip.size() != 16) return std::nullopt;
  const auto req = detail::neighbour_request(RTM_GETNEIGH, 0, ifindex, ip);
  alignas(nlmsghdr) std::array<std::uint8_t, 1024> buf{};
  std::uint16_t type = 0;
  if (detail::rtnl_exchange(&req, req.h.nlmsg_len, buf, type) != 0 || type != RTM_NEWNEIGH) return std::nullopt;
  nlmsghdr h;
  std::memcpy(&h, buf.data(), sizeof h);
  if (h.nlmsg_len > buf.size() || h.nlmsg_len < NLMSG_LENGTH(sizeof(ndmsg))) return std::nullopt;
  ndmsg m;
  std::memcpy(&m, buf.data() + NLMSG_LENGTH(0), sizeof m);
  constexpr unsigned valid = NUD_PERMANENT | NUD_NOARP | NUD_REACHABLE | NUD_PROBE | NUD_STALE | NUD_DELAY;  // the kernel's NUD_VALID
  if (!(m.ndm_state & valid)) return std::nullopt;
  std::size_t at = NLMSG_LENGTH(sizeof(ndmsg));
  while (at + sizeof(rtattr) <= h.nlmsg_len) {
    rtattr a;
    std::memcpy(&a, buf.data() + at, sizeof a);
    if (a.rta_len < sizeof a || at + a.rta_len > h.nlmsg_len) break;
    if (a.rta_type == NDA_LLADDR && a.rta_len == RTA_LENGTH(6)) {
      neighbour_entry e;
      std::memcpy(e.mac.data(), buf.data() + at + RTA_LENGTH(0), 6);
      e.state = m.ndm_state;
      return e;
    }
    at += RTA_ALIGN(a.rta_len);
  }
  return std::nullopt;
}

/// Asks the kernel to resolve `ip` on interface ifindex as if a packet waited for it
/// (RTM_NEWNEIGH with NTF_USE: an ARP request or neighbour solicitation leaves unless the entry
/// is already valid). 0, or an errno (EPERM without CAP_NET_ADMIN).
inline int resolve_neighbour(unsigned ifindex, std::span<const std::uint8_t> ip) {
  if (ip.size() != 4 && ip.size() != 16) return EINVAL;
  auto req = detail::neighbour_request(RTM_NEWNEIGH, NLM_F_CREATE | NLM_F_ACK, ifindex, ip);
  req.m.ndm_flags = NTF_USE;
  req.m.ndm_state = NUD_NONE;
  alignas(nlmsghdr) std::array<std::uint8_t, 1024> buf{};
  std::uint16_t type = 0;
  return detail::rtnl_exchange(&req, req.h.nlmsg_len, buf, type);
}

/// The gateway the kernel's route to `ip` (4 bytes IPv4, 16 bytes IPv6) through interface
/// ifindex names (RTM_GETROUTE with RTA_DST and RTA_OIF, as `ip route get IP oif IF`), in the
/// same family; nullopt when the destination is on the interface's link, when no route leaves
/// through it, or the gateway is of another family (RTA_VIA).
inline std::optional<std::array<std::uint8_t, 16>> gateway(unsigned ifindex, std::span<const std::uint8_t> ip) {
  if (ip.size() != 4 && ip.size() != 16) return std::nullopt;
  struct {
    nlmsghdr h;
    rtmsg m;
    alignas(NLMSG_ALIGNTO) std::array<std::uint8_t, RTA_SPACE(16) + RTA_SPACE(4)> attrs;
  } req{};
  req.h.nlmsg_len = static_cast<std::uint32_t>(NLMSG_LENGTH(sizeof(rtmsg)) + RTA_SPACE(ip.size()) + RTA_SPACE(4));
  req.h.nlmsg_type = RTM_GETROUTE;
  req.h.nlmsg_flags = NLM_F_REQUEST;
  req.h.nlmsg_seq = 1;
  req.m.rtm_family = ip.size() == 16 ? AF_INET6 : AF_INET;
  req.m.rtm_dst_len = static_cast<unsigned char>(8 * ip.size());
  rtattr a{};
  a.rta_len = static_cast<unsigned short>(RTA_LENGTH(ip.size()));
  a.rta_type = RTA_DST;
  std::memcpy(req.attrs.data(), &a, sizeof a);
  std::memcpy(req.attrs.data() + RTA_LENGTH(0), ip.data(), ip.size());
  const std::size_t oif_at = RTA_SPACE(ip.size());
  a.rta_len = RTA_LENGTH(4);
  a.rta_type = RTA_OIF;
  const auto oif = static_cast<std::uint32_t>(ifindex);
  std::memcpy(req.attrs.data() + oif_at, &a, sizeof a);
  std::memcpy(req.attrs.data() + oif_at + RTA_LENGTH(0), &oif, 4);
  alignas(nlmsghdr) std::array<std::uint8_t, 4096> buf{};
  std::uint16_t type = 0;
  if (detail::rtnl_exchange(&req, req.h.nlmsg_len, buf, type) != 0 || type != RTM_NEWROUTE) return std::nullopt;
  nlmsghdr h;
  std::memcpy(&h, buf.data(), sizeof h);
  if (h.nlmsg_len > buf.size() || h.nlmsg_len < NLMSG_LENGTH(sizeof(rtmsg))) return std::nullopt;
  std::optional<std::array<std::uint8_t, 16>> gw;
  std::optional<std::uint32_t> out;
  for (std::size_t at = NLMSG_LENGTH(sizeof(rtmsg)); at + sizeof(rtattr) <= h.nlmsg_len;) {
    rtattr r;
    std::memcpy(&r, buf.data() + at, sizeof r);
    if (r.rta_len < sizeof r || at + r.rta_len > h.nlmsg_len) break;
    if (r.rta_type == RTA_GATEWAY && r.rta_len == RTA_LENGTH(ip.size())) {
      gw.emplace();
      std::memcpy(gw->data(), buf.data() + at + RTA_LENGTH(0), ip.size());
    } else if (r.rta_type == RTA_OIF && r.rta_len == RTA_LENGTH(4)) {
      std::uint32_t v;
      std::memcpy(&v, buf.data() + at + RTA_LENGTH(0), 4);
      out = v;
    }
    at += RTA_ALIGN(r.rta_len);
  }
  if (out && *out != ifindex) return std::nullopt;
  return gw;
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
