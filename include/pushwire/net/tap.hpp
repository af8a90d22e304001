// A TAP interface (IFF_TAP | IFF_NO_PI): the host IP stack's end of the split-model driver, or
// the I/O unit's LAN NIC (spec/net.md §4). Whole Ethernet frames, non-blocking; the MAC, MTU,
// link state and carrier are set here (the host module takes them from the I/O unit over
// CfgUtil). Real I/O: nothing sans-IO includes it.
#pragma once

#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <net/if_arp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

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

  /// The interface's MAC (the interface should be down to change it on some kernels).
  int set_mac(const wire::mac_address& m) {
    ifreq r = req();
    r.ifr_hwaddr.sa_family = ARPHRD_ETHER;
    std::memcpy(r.ifr_hwaddr.sa_data, m.data(), 6);
    return ::ioctl(ctl_, SIOCSIFHWADDR, &r) == 0 ? 0 : errno;
  }
  wire::mac_address mac() const {
    ifreq r = req();
    wire::mac_address m{};
    if (::ioctl(ctl_, SIOCGIFHWADDR, &r) == 0) std::memcpy(m.data(), r.ifr_hwaddr.sa_data, 6);
    return m;
  }
  int set_mtu(std::uint32_t mtu) {
    ifreq r = req();
    r.ifr_mtu = static_cast<int>(mtu);
    return ::ioctl(ctl_, SIOCSIFMTU, &r) == 0 ? 0 : errno;
  }
  /// Administratively up or down.
  int set_up(bool up) {
    ifreq r = req();
    if (::ioctl(ctl_, SIOCGIFFLAGS, &r) != 0) return errno;
    r.ifr_flags = static_cast<short>(up ? (r.ifr_flags | IFF_UP) : (r.ifr_flags & ~IFF_UP));
    return ::ioctl(ctl_, SIOCSIFFLAGS, &r) == 0 ? 0 : errno;
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
  int fd_ = -1, ctl_ = -1, err_ = 0;
  bool offloads_ = false;
  std::string name_;
  tap_counters stats_{};
};

}  // namespace pushwire::net
