// The split-model driver's cells on a real interface: an AF_PACKET socket bound to one
// interface and the cell EtherType (0x88B5, spec/cells.md) carries whole Ethernet frames between
// it and one port of an rnic::device in cell framing (spec/net.md §5). Batches with
// sendmmsg / recvmmsg; the frames this host sends itself (PACKET_OUTGOING) are not taken back;
// the same seeded faults as net::udp_port on the send path. Real I/O: nothing sans-IO includes it.
#pragma once

#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <list>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <pushwire/cell/format.hpp>
#include <pushwire/rnic/device.hpp>
#include <pushwire/net/fault_queue.hpp>

namespace pushwire::net {

struct packet_config {
  /// The interface (at most 15 characters).
  std::string interface = "eth0";
  /// Frames per sendmmsg / recvmmsg call: 1..1024.
  std::uint32_t batch = 64;
  /// Frames the port's own queue holds (held back by a fault, refused by a full socket buffer)
  /// before send_from() stops taking the device's (spec/net.md §5): 1..65536.
  std::uint32_t backlog = 1024;
  /// Faults applied to what this side sends, and their seed.
  rnic::direction_faults faults{};
  std::uint64_t seed = 1;
};

struct packet_counters {
  std::uint64_t sent = 0, received = 0, send_errors = 0, truncated = 0, own = 0;
  std::uint64_t lost = 0, corrupted = 0, duplicated = 0, held = 0;  ///< injected faults
};

class packet_port {
 public:
  /// Largest frame taken (a 9000-byte MTU frame with its Ethernet header and a tag fits).
  static constexpr std::size_t max_frame = 9216;

  /// Opens the socket on the interface (needs CAP_NET_RAW). On failure ok() is false and
  /// error() is errno (ENODEV: no such interface; EPERM: not allowed).
  explicit packet_port(const packet_config& c) : cfg_(c), rng_(c.seed) {
    cfg_.batch = std::clamp<std::uint32_t>(cfg_.batch, 1, 1024);
    cfg_.backlog = std::clamp<std::uint32_t>(cfg_.backlog, 1, 65536);
    ifindex_ = static_cast<int>(::if_nametoindex(cfg_.interface.c_str()));
    if (ifindex_ == 0 || cfg_.interface.size() >= IFNAMSIZ) {
      err_ = ENODEV;
      return;
    }
    fd_ = ::socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, htons(cell::ethertype));
    if (fd_ < 0) {
      err_ = errno;
      return;
    }
    sockaddr_ll a{};
    a.sll_family = AF_PACKET;
    a.sll_protocol = htons(cell::ethertype);
    a.sll_ifindex = ifindex_;
    const int big = 4 << 20;
    (void)::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    (void)::setsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    if (::bind(fd_, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
      err_ = errno;
      ::close(fd_);
      fd_ = -1;
      return;
    }
    ifreq r{};
    std::strncpy(r.ifr_name, cfg_.interface.c_str(), IFNAMSIZ - 1);
    if (::ioctl(fd_, SIOCGIFHWADDR, &r) == 0) std::memcpy(mac_.data(), r.ifr_hwaddr.sa_data, 6);
    rx_.assign(cfg_.batch, std::vector<std::byte>(max_frame));
    hdr_.resize(cfg_.batch), iov_.resize(cfg_.batch), from_.resize(cfg_.batch);
  }
  packet_port(const packet_port&) = delete;
  packet_port& operator=(const packet_port&) = delete;
  ~packet_port() {
    if (fd_ >= 0) ::close(fd_);
  }

  bool ok() const { return fd_ >= 0; }
  int error() const { return err_; }
  int fd() const { return fd_; }
  /// The interface's MAC: the device port's MAC should be it (cells are addressed by MAC).
  const wire::mac_address& mac() const { return mac_; }
  const packet_counters& stats() const { return stats_; }

  /// Sends the frames the device has for port `port` (and held-back frames now due), taking
  /// them while fewer than `backlog` wait here (full()); returns the frames handed to the kernel.
  std::size_t send_from(rnic::device& d, std::size_t port, rnic::time_ns now) {
    const std::size_t sent = q_.empty() ? 0 : flush(now);
    take_frames(d, port, [&](std::span<const std::byte> f) { queue(f, now); }, [&] { return !full(); });
    return sent + flush(now);
  }
  /// `backlog` frames wait here (held back, or refused by a full socket).
  bool full() const { return q_.size() >= cfg_.backlog; }

  /// Receives what is waiting (up to `rounds` batches) and gives each frame to the device.
  std::size_t receive_into(rnic::device& d, std::size_t port, rnic::time_ns now, int rounds = 4) {
    std::size_t total = 0;
    for (int k = 0; k < rounds; ++k) {
      for (std::size_t i = 0; i < cfg_.batch; ++i) {
        iov_[i] = {rx_[i].data(), rx_[i].size()};
        hdr_[i] = {};
        hdr_[i].msg_hdr.msg_iov = &iov_[i];
        hdr_[i].msg_hdr.msg_iovlen = 1;
        hdr_[i].msg_hdr.msg_name = &from_[i];
        hdr_[i].msg_hdr.msg_namelen = sizeof from_[i];
      }
      const int n = ::recvmmsg(fd_, hdr_.data(), cfg_.batch, MSG_DONTWAIT | MSG_TRUNC, nullptr);
      if (n <= 0) break;
      for (int i = 0; i < n; ++i) {
        const auto& m = hdr_[static_cast<std::size_t>(i)];
        if (from_[static_cast<std::size_t>(i)].sll_pkttype == PACKET_OUTGOING) {
          ++stats_.own;
          continue;
        }
        if (m.msg_len > max_frame) {
          ++stats_.truncated;
          continue;
        }
        d.receive(port, std::span<const std::byte>(rx_[static_cast<std::size_t>(i)]).first(m.msg_len), now);
        ++stats_.received;
        ++total;
      }
      if (static_cast<std::uint32_t>(n) < cfg_.batch) break;
    }
    return total;
  }

  /// Frames waiting (held back, or refused by a full socket).
  std::size_t waiting() const { return q_.size(); }
  /// When the next held-back frame is due (for a caller's poll timeout), if any.
  std::optional<rnic::time_ns> next_due() const { return net::next_due(q_); }

  /// Sends the frames whose time has come; returns how many the kernel took.
  std::size_t flush(rnic::time_ns now) {
    std::size_t sent = 0;
    while (!q_.empty()) {
      picked_.clear();
      std::size_t m = 0;
      for (auto it = q_.out.begin(); it != q_.out.end() && m < cfg_.batch; ++it) {
        if (it->at > now) continue;
        iov_[m] = {it->bytes.data(), it->bytes.size()};
        hdr_[m] = {};
        hdr_[m].msg_hdr.msg_iov = &iov_[m];
        hdr_[m].msg_hdr.msg_iovlen = 1;
        from_[m] = {};
        from_[m].sll_family = AF_PACKET;
        from_[m].sll_ifindex = ifindex_;
        from_[m].sll_protocol = htons(cell::ethertype);
        from_[m].sll_halen = 6;
        std::memcpy(from_[m].sll_addr, it->bytes.data(), 6);
        hdr_[m].msg_hdr.msg_name = &from_[m];
        hdr_[m].msg_hdr.msg_namelen = sizeof from_[m];
        picked_.push_back(it);
        ++m;
      }
      if (m == 0) break;
      const int n = ::sendmmsg(fd_, hdr_.data(), static_cast<unsigned>(m), MSG_DONTWAIT);
      if (n <= 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != ENOBUFS && errno != EINTR) {
          ++stats_.send_errors;  // (interface down, a frame over its MTU, ...): retransmissions cover it
          q_.retire(picked_[0]);
          continue;
        }
        break;  // the queue is full: the rest waits for the next call
      }
      for (int k = 0; k < n; ++k) q_.retire(picked_[static_cast<std::size_t>(k)]);
      sent += static_cast<std::size_t>(n);
      stats_.sent += static_cast<std::uint64_t>(n);
    }
    return sent;
  }

 private:
  struct pending {
    rnic::time_ns at = 0;
    std::vector<std::byte> bytes;
  };
  void queue(std::span<const std::byte> f, rnic::time_ns now) {
    if (f.size() < wire::eth_header_size) return;
    q_.push(f).at = now;
    apply_faults(q_, cfg_.faults, rng_, stats_);
  }

  packet_config cfg_;
  int fd_ = -1, err_ = 0, ifindex_ = 0;
  wire::mac_address mac_{};
  std::mt19937_64 rng_;
  packet_counters stats_{};
  send_queue<pending> q_;
  std::vector<send_queue<pending>::iterator> picked_;
  std::vector<std::vector<std::byte>> rx_;
  std::vector<mmsghdr> hdr_;
  std::vector<iovec> iov_;
  std::vector<sockaddr_ll> from_;
};

}  // namespace pushwire::net
