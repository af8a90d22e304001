// A TAP interface (IFF_TAP | IFF_NO_PI): the host IP stack's end of the split-model driver, or
// the I/O unit's LAN NIC (spec/net.md §4). Whole Ethernet frames, non-blocking; the MAC, MTU,
// link state, speed and carrier are read and set here (the host module takes them from the I/O
// unit over CfgUtil). The interface may be moved to another network namespace after it is
// opened: its settings are then reached in that namespace (TUNGETDEVNETNS). link_watch reports
// an interface's changes (rtnetlink). Real I/O: nothing sans-IO includes it.
#pragma once

#include <fcntl.h>
#include <linux/ethtool.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sockios.h>
#include <net/if_arp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

#include <pushwire/net/netns.hpp>
#include <pushwire/wire/endian.hpp>
#include <pushwire/wire/ethernet.hpp>

namespace pushwire::net {

struct tap_counters {
  std::uint64_t frames_in = 0, bytes_in = 0, frames_out = 0, bytes_out = 0, write_errors = 0;
};

/// With offloads (spec/net.md §4), every frame read or written starts with this 10-byte
/// virtio-net header (struct virtio_net_hdr, little-endian: TUNSETVNETLE): GSO type and size,
/// and where a checksum left to the receiver starts. A TCP segment of up to 64 KiB then
/// crosses as one frame.
inline constexpr std::size_t vnet_hdr_size = 10;

/// The virtio-net header's fields (struct virtio_net_hdr of linux/virtio_net.h; little-endian).
struct vnet_header {
  static constexpr std::uint8_t needs_csum = 1, data_valid = 2;  ///< flags
  static constexpr std::uint8_t gso_none = 0, gso_tcpv4 = 1, gso_udp = 3, gso_tcpv6 = 4, gso_ecn = 0x80;  ///< gso_type
  std::uint8_t flags = 0, gso_type = gso_none;
  std::uint16_t hdr_len = 0;      ///< bytes of the headers before the payload (Ethernet, IP, TCP)
  std::uint16_t gso_size = 0;     ///< payload bytes of each segment the packet stands for
  std::uint16_t csum_start = 0;   ///< needs_csum: where the sum starts, bytes from the frame's start
  std::uint16_t csum_offset = 0;  ///< needs_csum: where the checksum goes, bytes from csum_start

  static vnet_header read(std::span<const std::byte, vnet_hdr_size> b) {
    return {std::to_integer<std::uint8_t>(b[0]), std::to_integer<std::uint8_t>(b[1]), wire::load_le16(&b[2]),
            wire::load_le16(&b[4]), wire::load_le16(&b[6]), wire::load_le16(&b[8])};
  }
  void write(std::span<std::byte, vnet_hdr_size> b) const {
    b[0] = std::byte{flags}, b[1] = std::byte{gso_type};
    wire::store_le16(&b[2], hdr_len), wire::store_le16(&b[4], gso_size);
    wire::store_le16(&b[6], csum_start), wire::store_le16(&b[8], csum_offset);
  }
};

class tap {
 public:
  /// Opens (creating if needed) the TAP interface `name` (at most 15 characters). On failure
  /// ok() is false and error() is errno (ENOENT: no /dev/net/tun; EPERM: not allowed).
  /// offloads: IFF_VNET_HDR, and the stack may hand over unchecksummed TCP/UDP and TSO
  /// segments (TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6); frames carry the virtio-net header.
  explicit tap(const std::string& name, bool offloads = false) : offloads_(offloads) {
    fd_ = ::open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (fd_ < 0) {
      err_ = errno;
      return;
    }
    ifreq r{};
    r.ifr_flags = static_cast<short>(IFF_TAP | IFF_NO_PI | (offloads ? IFF_VNET_HDR : 0));
    std::strncpy(r.ifr_name, name.c_str(), IFNAMSIZ - 1);
    int le = 1, hdr = static_cast<int>(vnet_hdr_size);
    if (::ioctl(fd_, TUNSETIFF, &r) != 0 ||
        (offloads && (::ioctl(fd_, TUNSETVNETLE, &le) != 0 || ::ioctl(fd_, TUNSETVNETHDRSZ, &hdr) != 0 ||
                      ::ioctl(fd_, TUNSETOFFLOAD, TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6) != 0))) {
      err_ = errno;
      ::close(fd_);
      fd_ = -1;
      return;
    }
    name_ = r.ifr_name;
    ctl_ = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  }
  tap(const tap&) = delete;
  tap& operator=(const tap&) = delete;
  ~tap() {
    if (fd_ >= 0) ::close(fd_);
    if (ctl_ >= 0) ::close(ctl_);
  }

  bool ok() const { return fd_ >= 0; }
  int error() const { return err_; }
  int fd() const { return fd_; }
  const std::string& name() const { return name_; }
  /// Frames carry the virtio-net header (opened with offloads).
  bool offloads() const { return offloads_; }
  const tap_counters& stats() const { return stats_; }

  /// The next frame the stack sent into `buf` (its size), or 0 when none is waiting.
  std::size_t read(std::span<std::byte> buf) {
    const ssize_t n = ::read(fd_, buf.data(), buf.size());
    if (n <= 0) return 0;
    ++stats_.frames_in;
    stats_.bytes_in += static_cast<std::size_t>(n);
    return static_cast<std::size_t>(n);
  }
  /// Gives a frame to the stack; false when the kernel refused it (counted).
  bool write(std::span<const std::byte> frame) {
    if (::write(fd_, frame.data(), frame.size()) != static_cast<ssize_t>(frame.size())) {
      ++stats_.write_errors;
      return false;
    }
    ++stats_.frames_out;
    stats_.bytes_out += frame.size();
    return true;
  }

  /// The interface's MAC (a TAP takes a new one while up).
  int set_mac(const wire::mac_address& m) {
    ifreq r = req();
    r.ifr_hwaddr.sa_family = ARPHRD_ETHER;
    std::memcpy(r.ifr_hwaddr.sa_data, m.data(), 6);
    return control(SIOCSIFHWADDR, r);
  }
  wire::mac_address mac() {
    ifreq r = req();
    wire::mac_address m{};
    if (control(SIOCGIFHWADDR, r) == 0) std::memcpy(m.data(), r.ifr_hwaddr.sa_data, 6);
    return m;
  }
  int set_mtu(std::uint32_t mtu) {
    ifreq r = req();
    r.ifr_mtu = static_cast<int>(mtu);
    return control(SIOCSIFMTU, r);
  }
  /// The MTU in bytes, 0 when it cannot be read.
  std::uint32_t mtu() {
    ifreq r = req();
    return control(SIOCGIFMTU, r) == 0 && r.ifr_mtu > 0 ? static_cast<std::uint32_t>(r.ifr_mtu) : 0;
  }
  /// Administratively up or down.
  int set_up(bool up) {
    ifreq r = req();
    if (const int e = control(SIOCGIFFLAGS, r); e != 0) return e;
    r.ifr_flags = static_cast<short>(up ? (r.ifr_flags | IFF_UP) : (r.ifr_flags & ~IFF_UP));
    return control(SIOCSIFFLAGS, r);
  }
  /// The interface flags (IFF_UP, IFF_RUNNING, IFF_PROMISC, ...), 0 when they cannot be read.
  unsigned flags() {
    ifreq r = req();
    return control(SIOCGIFFLAGS, r) == 0 ? static_cast<unsigned short>(r.ifr_flags) : 0u;
  }
  /// The interface index in its namespace, 0 when it cannot be read.
  unsigned index() {
    ifreq r = req();
    return control(SIOCGIFINDEX, r) == 0 && r.ifr_ifindex > 0 ? static_cast<unsigned>(r.ifr_ifindex) : 0u;
  }
  /// The link speed in Mb/s as ethtool reports it (a TAP: what was set, 10000 at first on
  /// Linux 6.x), 0 when unknown.
  std::uint32_t speed() {
    ethtool_cmd c{};
    if (ethtool(ETHTOOL_GSET, c) != 0) return 0;
    const std::uint32_t v = ethtool_cmd_speed(&c);
    return v == static_cast<std::uint32_t>(SPEED_UNKNOWN) ? 0 : v;
  }
  /// Sets the speed ethtool reports (a TAP takes any value; CAP_NET_ADMIN).
  int set_speed(std::uint32_t mbps) {
    ethtool_cmd c{};
    if (const int e = ethtool(ETHTOOL_GSET, c); e != 0) return e;
    ethtool_cmd_speed_set(&c, mbps);
    return ethtool(ETHTOOL_SSET, c);
  }
  /// The carrier (link detected): down while the far end is away.
  int set_carrier(bool on) {
    int v = on ? 1 : 0;
    return ::ioctl(fd_, TUNSETCARRIER, &v) == 0 ? 0 : errno;
  }

 private:
  ifreq req() const {
    ifreq r{};
    std::strncpy(r.ifr_name, name_.c_str(), IFNAMSIZ - 1);
    return r;
  }
  int ethtool(std::uint32_t cmd, ethtool_cmd& c) {
    c.cmd = cmd;
    ifreq r = req();
    r.ifr_data = reinterpret_cast<char*>(&c);
    return control(SIOCETHTOOL, r);
  }
  /// An interface ioctl by name through the control socket: 0 or errno. ENODEV (the interface
  /// left this namespace) moves the socket to the interface's namespace, once per call.
  int control(unsigned long request, ifreq& r) {
    if (::ioctl(ctl_, request, &r) == 0) return 0;
    if (errno != ENODEV) return errno;
    if (!follow()) return ENODEV;
    std::strncpy(r.ifr_name, name_.c_str(), IFNAMSIZ - 1);
    return ::ioctl(ctl_, request, &r) == 0 ? 0 : errno;
  }
  /// A control socket in the namespace the interface is in now (made on a thread of its own,
  /// which alone enters that namespace), and the interface's name there; false when the kernel
  /// or the process refuses (no thread, no CAP_SYS_ADMIN, ...).
  bool follow() {
    const int ns = ::ioctl(fd_, TUNGETDEVNETNS);
    if (ns < 0) return false;
    int s = -1;
    (void)in_netns(ns, [&] { s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0); });
    ::close(ns);
    if (s < 0) return false;
    ifreq r{};
    if (::ioctl(fd_, TUNGETIFF, &r) == 0) name_ = r.ifr_name;
    if (ctl_ >= 0) ::close(ctl_);
    ctl_ = s;
    return true;
  }
  int fd_ = -1, ctl_ = -1, err_ = 0;
  bool offloads_ = false;
  std::string name_;
  tap_counters stats_{};
};

/// Changes to one interface of the caller's network namespace, as rtnetlink reports them
/// (RTM_NEWLINK / RTM_DELLINK on RTMGRP_LINK): its MAC, MTU, flags (promiscuity, up) and carrier.
/// Non-blocking; wait for fd() to be readable, then ask changed().
class link_watch {
 public:
  /// Watches interface `ifindex`. On failure ok() is false and error() is errno.
  explicit link_watch(unsigned ifindex) : index_(ifindex) {
    fd_ = ::socket(AF_NETLINK, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, NETLINK_ROUTE);
    sockaddr_nl a{};
    a.nl_family = AF_NETLINK;
    a.nl_groups = RTMGRP_LINK;
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
      err_ = errno;
      if (fd_ >= 0) ::close(fd_);
      fd_ = -1;
    }
  }
  link_watch(const link_watch&) = delete;
  link_watch& operator=(const link_watch&) = delete;
  ~link_watch() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool ok() const { return fd_ >= 0; }
  int error() const { return err_; }
  int fd() const { return fd_; }
  /// Takes every waiting report: true when one was about the interface, or reports were lost
  /// (ENOBUFS: the caller should read the interface again).
  bool changed() {
    bool hit = false;
    alignas(nlmsghdr) std::array<std::byte, 16384> buf;
    while (true) {
      const ssize_t n = ::recv(fd_, buf.data(), buf.size(), MSG_DONTWAIT);
      if (n < 0) return hit || errno == ENOBUFS;
      auto left = static_cast<std::size_t>(n);
      for (auto* h = reinterpret_cast<const nlmsghdr*>(buf.data()); left >= sizeof(nlmsghdr) && h->nlmsg_len >= sizeof(nlmsghdr) &&
                                                                     h->nlmsg_len <= left;) {
        if ((h->nlmsg_type == RTM_NEWLINK || h->nlmsg_type == RTM_DELLINK) && h->nlmsg_len >= NLMSG_LENGTH(sizeof(ifinfomsg))) {
          ifinfomsg i;
          std::memcpy(&i, NLMSG_DATA(h), sizeof i);
          hit |= static_cast<unsigned>(i.ifi_index) == index_;
        }
        const std::size_t step = NLMSG_ALIGN(h->nlmsg_len);
        if (step >= left) break;
        left -= step;
        h = reinterpret_cast<const nlmsghdr*>(reinterpret_cast<const std::byte*>(h) + step);
      }
    }
  }

 private:
  unsigned index_;
  int fd_ = -1, err_ = 0;
};

}  // namespace pushwire::net
