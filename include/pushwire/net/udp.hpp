// RoCEv2 over a UDP socket: a real transport for one port of an rnic::device (spec/net.md).
// Frames the device transmits lose their Ethernet, IPv4 and UDP headers and go out as
// datagrams (sendmmsg) to the destination address and UDP port their headers name; datagrams
// received (recvmmsg) get those headers back and go to the device, which checks the ICRC.
// - The ICRC covers the IPv4 identification and flags. Linux sends a datagram of an unconnected
//   socket with path-MTU discovery on (IP_PMTUDISC_DO) with DF set and identification 0, and the
//   device builds its frames so; a received datagram is given the same. A peer whose IP headers
//   differ there (rxe chooses identifications) fails the ICRC: use AF_PACKET for it.
// - IPv4, and IPv6 beside it (udp_config::address6).
// - DSCP and ECN (spec/qos.md §1): each datagram leaves with its frame's IPv4 TOS or IPv6
//   traffic class (an IP_TOS / IPV6_TCLASS control message, when not 0), and a received one's
//   (IP_RECVTOS, IPV6_RECVTCLASS) goes into the frame rebuilt for the device, so a CE mark a
//   switch made on the way reaches it.
// - Sessions are distinct source ports: a frame whose UDP source port is not the socket's own
//   (a session QP's, spec/rnic.md §12, or one derived per QP pair) leaves from a socket bound to
//   that port, opened on first use (up to max_source_ports); what arrives there is taken too.
// - Seeded faults on the send path (rnic::direction_faults, rnic::decide), since tc netem is not
//   available everywhere; held-back frames leave when their time comes (flush()).
// - UDP GRO where the kernel allows it: several received datagrams handed over as one
//   (UDP_GRO), split here again. UDP GSO on request (udp_config::gso): consecutive datagrams of
//   one size to one destination leave as one message (UDP_SEGMENT). Off by default: the kernel
//   numbers the segments' IPv4 identifications 0, 1, 2, ..., and the ICRC covers them, so only
//   a pushwire peer (which rebuilds the headers as above) takes segments after the first.
// This is real I/O (sockets, the clock): nothing sans-IO includes it.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <list>
#include <optional>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include <pushwire/ib/encap.hpp>
#include <pushwire/rnic/device.hpp>
#include <pushwire/net/clock.hpp>
#include <pushwire/net/fault_queue.hpp>
#include <pushwire/rnic/faults.hpp>

namespace pushwire::net {

struct udp_config {
  /// Local address the socket binds (the port's GID, as 4 bytes), and its UDP port.
  std::array<std::uint8_t, 4> address{127, 0, 0, 1};
  /// A second address, IPv6 (an IPv6 GID of the port): a second socket binds it (same UDP
  /// port); frames to IPv6 destinations leave from it and what arrives there is taken too.
  /// IPv6 frames leave from the bound port only (no session source ports).
  std::optional<std::array<std::uint8_t, 16>> address6{};
  std::uint16_t port = ib::roce_port;
  /// Datagrams per sendmmsg / recvmmsg call: 1..1024.
  std::uint32_t batch = 64;
  /// Frames the port's own queue holds (held back by a fault, refused by a full socket buffer)
  /// before send_from() stops taking the device's: the rest stay in the device's transmit queue,
  /// whose limit holds its requesters back (spec/net.md §1). 1..65536.
  std::uint32_t backlog = 1024;
  /// Faults applied to what this side sends, and their seed.
  rnic::direction_faults faults{};
  std::uint64_t seed = 1;
  /// UDP generic segmentation offload on sends (pushwire peers only: see the top) and receive
  /// offload on receives, each used when the kernel takes the socket option (udp_port::gso() /
  /// gro() tell).
  bool gso = false, gro = true;
  /// Bytes asked of the kernel for each socket's receive and send buffers, at most 1 GiB
  /// (SO_RCVBUFFORCE where the process may, as root: the kernel doubles it for its bookkeeping;
  /// otherwise SO_RCVBUF, capped by net.core.rmem_max). What arrives while the buffer is full is lost:
  /// a device process serving many functions wants more than one program does.
  std::size_t socket_buffer = 4u << 20;
};

/// Sizes fd's receive and send buffers to `bytes` (the forced options first, then the
/// capped ones; best effort).
inline void size_socket_buffers(int fd, std::size_t bytes) {
  const int b = static_cast<int>(std::min<std::size_t>(bytes, 1u << 30));
  if (::setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &b, sizeof b) != 0) (void)::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &b, sizeof b);
  if (::setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &b, sizeof b) != 0) (void)::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &b, sizeof b);
}

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

struct udp_counters {
  std::uint64_t sent = 0, received = 0, send_errors = 0, not_sendable = 0, truncated = 0;
  std::uint64_t lost = 0, corrupted = 0, duplicated = 0, held = 0;  ///< injected faults
  std::uint64_t gso_messages = 0;  ///< messages sent that carried several datagrams (UDP_SEGMENT)
  std::uint64_t gro_messages = 0;  ///< messages received that carried several (UDP_GRO)
  std::uint64_t source_ports = 0;  ///< sockets opened for other source ports (sessions)
};

class udp_port {
 public:
  /// Opens and binds the socket (non-blocking). On failure ok() is false and error() is errno.
  explicit udp_port(const udp_config& c) : cfg_(c), rng_(c.seed) {
    cfg_.batch = std::clamp<std::uint32_t>(cfg_.batch, 1, 1024);
    cfg_.backlog = std::clamp<std::uint32_t>(cfg_.backlog, 1, 65536);
    fd_ = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd_ < 0) {
      err_ = errno;
      return;
    }
    const int pmtu = IP_PMTUDISC_DO;  // DF set, identification 0 (see the top)
    (void)::setsockopt(fd_, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof pmtu);
    size_socket_buffers(fd_, cfg_.socket_buffer);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(cfg_.port);
    std::memcpy(&a.sin_addr, cfg_.address.data(), 4);
    if (::bind(fd_, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
      err_ = errno;
      ::close(fd_);
      fd_ = -1;
      return;
    }
    // GSO: probed by setting the socket's default segment size to 0 (none); GRO: turned on.
    const int zero = 0, one = 1;
    gso_ = cfg_.gso && ::setsockopt(fd_, SOL_UDP, UDP_SEGMENT, &zero, sizeof zero) == 0;
    gro_ = cfg_.gro && ::setsockopt(fd_, SOL_UDP, UDP_GRO, &one, sizeof one) == 0;
    (void)::setsockopt(fd_, IPPROTO_IP, IP_RECVTOS, &one, sizeof one);  // DSCP and ECN of what arrives
    if (cfg_.address6) {
      fd6_ = ::socket(AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      const int pmtu6 = IPV6_PMTUDISC_DO;
      sockaddr_in6 a6{};
      a6.sin6_family = AF_INET6;
      a6.sin6_port = htons(cfg_.port);
      std::memcpy(&a6.sin6_addr, cfg_.address6->data(), 16);
      if (fd6_ < 0 || ::setsockopt(fd6_, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) != 0 ||
          ::bind(fd6_, reinterpret_cast<const sockaddr*>(&a6), sizeof a6) != 0) {
        err_ = errno;
        if (fd6_ >= 0) ::close(fd6_);
        ::close(fd_);
        fd_ = fd6_ = -1;
        return;
      }
      (void)::setsockopt(fd6_, IPPROTO_IPV6, IPV6_MTU_DISCOVER, &pmtu6, sizeof pmtu6);
      size_socket_buffers(fd6_, cfg_.socket_buffer);
      if (gso_) (void)::setsockopt(fd6_, SOL_UDP, UDP_SEGMENT, &zero, sizeof zero);
      if (gro_) (void)::setsockopt(fd6_, SOL_UDP, UDP_GRO, &one, sizeof one);
      (void)::setsockopt(fd6_, IPPROTO_IPV6, IPV6_RECVTCLASS, &one, sizeof one);
    }
    rx_.resize(cfg_.batch);
    hdr_.resize(cfg_.batch), addr_.resize(cfg_.batch), addr_len_.resize(cfg_.batch), ctl_.resize(cfg_.batch), frames_.resize(cfg_.batch);
    iov_.resize(std::size_t{cfg_.batch} * (gso_ ? max_segments : 1));
    for (auto& b : rx_) b.resize(gro_ ? headers6 + max_gro : max_datagram + (headers6 - headers));
    scratch_.resize(max_datagram + (headers6 - headers));
  }
  udp_port(const udp_port&) = delete;
  udp_port& operator=(const udp_port&) = delete;
  ~udp_port() {
    if (fd_ >= 0) ::close(fd_);
    if (fd6_ >= 0) ::close(fd6_);
    for (const auto& x : extra_) ::close(x.fd);
  }

  bool ok() const { return fd_ >= 0; }
  int error() const { return err_; }
  int fd() const { return fd_; }
  const udp_counters& stats() const { return stats_; }
  /// Sends use UDP_SEGMENT; receives take UDP_GRO's coalesced datagrams.
  bool gso() const { return gso_; }
  bool gro() const { return gro_; }

  /// Sends the frames the device has for its port `port` (and held-back frames now due), taking
  /// them while fewer than `backlog` wait here (full()). Returns the datagrams handed to the
  /// kernel. A frame leaves from the socket bound to its UDP source port (the ICRC covers it):
  /// this one's, or another opened for it; a frame whose port cannot be bound is not sent
  /// (not_sendable).
  std::size_t send_from(rnic::device& d, std::size_t port, rnic::time_ns now) {
    const std::size_t sent = q_.empty() ? 0 : flush(now);
    take_frames(d, port, [&](std::span<const std::byte> f) { queue(f, now); }, [&] { return !full(); });
    return sent + flush(now);
  }
  /// `backlog` frames wait here (held back, or refused by a full socket): a caller stops giving
  /// more, and they wait in its own queue, where its limit holds the senders back.
  bool full() const { return q_.size() >= cfg_.backlog; }
  /// Every socket this port reads, for a caller's poll(): fd() first, then the source ports'.
  std::vector<int> fds() const {
    std::vector<int> v{fd_};
    if (fd6_ >= 0) v.push_back(fd6_);
    for (const auto& x : extra_) v.push_back(x.fd);
    return v;
  }

  /// Receives what is waiting (up to `rounds` batches) and gives each datagram to the device
  /// as a frame, at time now. Returns the datagrams taken.
  std::size_t receive_into(rnic::device& d, std::size_t port, rnic::time_ns now, int rounds = 4) {
    return receive(d.config().ports[port].mac, [&](std::span<std::byte> frame) { d.receive(port, frame, now); }, rounds);
  }
  /// Receives what is waiting (up to `rounds` batches) and gives each datagram, as a frame
  /// addressed to `mac`, to `sink(std::span<std::byte>)`, which may change its bytes. Returns
  /// the datagrams taken.
  template <class Sink>
  std::size_t receive(const wire::mac_address& mac, Sink&& sink, int rounds = 4) {
    std::size_t total = receive_on(fd_, cfg_.port, mac, sink, rounds);
    if (fd6_ >= 0) total += receive_on(fd6_, cfg_.port, mac, sink, rounds);
    for (const auto& x : extra_) total += receive_on(x.fd, x.port, mac, sink, 1);
    return total;
  }
  /// Queues one frame (Ethernet, IPv4 or IPv6, UDP) to leave as a datagram at the next flush(),
  /// with the configured faults; one that is not such a frame is counted (not_sendable).
  void send(std::span<const std::byte> frame, rnic::time_ns now) { queue(frame, now); }

  /// Sends the frames whose time has come (held-back ones under injected faults). With GSO,
  /// consecutive due frames of one size to one destination (the last may be shorter) go as one
  /// message of up to max_segments datagrams and max_gso_bytes. Returns the datagrams sent.
  std::size_t flush(rnic::time_ns now) {
    std::size_t sent = 0;
    while (!q_.empty()) {
      // One sendmmsg: due frames of one socket (the first due frame's), in order.
      std::size_t m = 0, v = 0;  // messages and iovecs gathered into hdr_ / iov_ / addr_
      picked_.clear();
      int fd = -1;
      auto it = q_.out.begin();
      auto next_due = [&] {
        while (it != q_.out.end() && (it->at > now || (fd >= 0 && it->fd != fd))) ++it;
      };
      while (m < cfg_.batch) {
        next_due();
        if (it == q_.out.end()) break;
        fd = it->fd;
        const std::size_t first = v, seg = it->bytes.size();
        const std::uint8_t tos = it->tos;
        std::size_t bytes = 0;
        addr_[m] = it->to;
        addr_len_[m] = it->tolen;
        do {
          iov_[v++] = {it->bytes.data(), it->bytes.size()};
          picked_.push_back(it);
          bytes += it->bytes.size();
          const bool short_one = it->bytes.size() < seg;
          ++it;
          if (!gso_ || short_one) break;
          next_due();
        } while (it != q_.out.end() && v - first < max_segments && it->bytes.size() <= seg && bytes + it->bytes.size() <= max_gso_bytes &&
                 it->tolen == addr_len_[m] && std::memcmp(&it->to, &addr_[m], it->tolen) == 0 && it->tos == tos);
        hdr_[m] = {};
        hdr_[m].msg_hdr.msg_iov = &iov_[first];
        hdr_[m].msg_hdr.msg_iovlen = v - first;
        hdr_[m].msg_hdr.msg_name = &addr_[m];
        hdr_[m].msg_hdr.msg_namelen = addr_len_[m];
        frames_[m] = v - first;
        if (v - first > 1 || tos) {
          auto& c = ctl_[m];
          c.fill(0);
          hdr_[m].msg_hdr.msg_control = c.data();
          hdr_[m].msg_hdr.msg_controllen = (v - first > 1 ? CMSG_SPACE(sizeof(std::uint16_t)) : 0) + (tos ? CMSG_SPACE(sizeof(int)) : 0);
          cmsghdr* cm = CMSG_FIRSTHDR(&hdr_[m].msg_hdr);
          if (v - first > 1) {  // UDP_SEGMENT: the size of each datagram but the last
            cm->cmsg_level = SOL_UDP;
            cm->cmsg_type = UDP_SEGMENT;
            cm->cmsg_len = CMSG_LEN(sizeof(std::uint16_t));
            const auto g = static_cast<std::uint16_t>(seg);
            std::memcpy(CMSG_DATA(cm), &g, sizeof g);
            cm = CMSG_NXTHDR(&hdr_[m].msg_hdr, cm);
          }
          if (tos) {  // the frame's DSCP and ECN (spec/qos.md §1), which the kernel writes
            const bool v6 = addr_[m].sa.sa_family == AF_INET6;
            cm->cmsg_level = v6 ? IPPROTO_IPV6 : IPPROTO_IP;
            cm->cmsg_type = v6 ? IPV6_TCLASS : IP_TOS;
            cm->cmsg_len = CMSG_LEN(sizeof(int));
            const int t = tos;
            std::memcpy(CMSG_DATA(cm), &t, sizeof t);
          }
        }
        ++m;
      }
      if (m == 0) break;
      const int n = ::sendmmsg(fd, hdr_.data(), static_cast<unsigned>(m), MSG_DONTWAIT);
      if (n <= 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
          ++stats_.send_errors;  // (unreachable peer, ...): the transport's retries cover it
          drop_picked(frames_[0]);
          continue;
        }
        break;  // the socket is full: the rest waits for the next call (a full socket of one
                // source port holds the others' frames too: they share the kernel's buffers)
      }
      std::size_t frames = 0;
      for (int k = 0; k < n; ++k) frames += frames_[static_cast<std::size_t>(k)];
      drop_picked(frames);
      sent += frames;
      stats_.sent += frames;
      if (frames > static_cast<std::size_t>(n)) stats_.gso_messages += static_cast<std::uint64_t>(n);
    }
    return sent;
  }
  /// Frames waiting (held back, or refused by a full socket).
  std::size_t waiting() const { return q_.size(); }
  /// When the next held-back frame is due (for a caller's poll timeout), if any.
  std::optional<rnic::time_ns> next_due() const { return net::next_due(q_); }

  /// Bytes the Ethernet, IPv4 and UDP headers take in a frame.
  static constexpr std::size_t headers = wire::eth_header_size + 20 + 8;
  /// ... the Ethernet, IPv6 and UDP headers.
  static constexpr std::size_t headers6 = wire::eth_header_size + 40 + 8;
  /// Largest datagram taken (a 4096-byte MTU packet with its headers fits).
  static constexpr std::size_t max_datagram = 9216;
  /// GSO: datagrams per message (the kernel's UDP_MAX_SEGMENTS) and payload bytes per message.
  static constexpr std::size_t max_segments = 64, max_gso_bytes = 65000;
  /// GRO: the largest coalesced message the kernel hands over.
  static constexpr std::size_t max_gro = 65535;

  /// The frame of a datagram whose payload is already at frame[headers...]: Ethernet (to `mac`,
  /// from 00:00:00:00:00:00), IPv4 (TOS `tos`, DF, identification 0, TTL 64) and UDP (checksum 0).
  static void wrap(std::span<std::byte> frame, const wire::mac_address& mac, const std::array<std::uint8_t, 4>& src, std::uint16_t sport,
                   const std::array<std::uint8_t, 4>& dst, std::uint16_t dport, std::uint8_t tos = 0) {
    const std::size_t payload = frame.size() - headers;
    (void)wire::encode(wire::eth_header{.dst = mac, .src = {}, .type = ib::ethertype_ipv4}, frame);
    ib::ipv4_header ip{};
    ip.version = 4;
    ip.hdr_len = 5;
    ip.dsfield_dscp = static_cast<std::uint8_t>(tos >> 2);
    ip.dsfield_ecn = static_cast<std::uint8_t>(tos & 3);
    ip.len = static_cast<std::uint16_t>(20 + 8 + payload);
    ip.flags_df = true;
    ip.ttl = 64;
    ip.proto = ib::ip_proto_udp;
    std::copy(src.begin(), src.end(), ip.src.begin());
    std::copy(dst.begin(), dst.end(), ip.dst.begin());
    const auto iph = frame.subspan(wire::eth_header_size, 20);
    (void)wire::encode(ip, iph);
    wire::store_be16(iph.data() + 10, ib::inet_fold(ib::inet_sum(iph)));
    (void)wire::encode(ib::udp_header{.srcport = sport, .dstport = dport, .length = static_cast<std::uint16_t>(8 + payload), .checksum = 0},
                       frame.subspan(wire::eth_header_size + 20));
  }

  /// wrap() for IPv6: Ethernet, IPv6 (traffic class `tclass`, flow label 0, hop limit 64: the ICRC
  /// masks all three) and UDP (checksum 0; RoCEv2's ICRC masks it too).
  static void wrap6(std::span<std::byte> frame, const wire::mac_address& mac, const std::array<std::uint8_t, 16>& src,
                    std::uint16_t sport, const std::array<std::uint8_t, 16>& dst, std::uint16_t dport, std::uint8_t tclass = 0) {
    const std::size_t payload = frame.size() - headers6;
    (void)wire::encode(wire::eth_header{.dst = mac, .src = {}, .type = ib::ethertype_ipv6}, frame);
    std::byte* ip = frame.data() + wire::eth_header_size;
    std::memset(ip, 0, 40);
    ip[0] = std::byte{static_cast<unsigned char>(0x60 | tclass >> 4)};
    ip[1] = std::byte{static_cast<unsigned char>((tclass & 0x0F) << 4)};
    wire::store_be16(ip + 4, static_cast<std::uint16_t>(8 + payload));
    ip[6] = std::byte{ib::ip_proto_udp};
    ip[7] = std::byte{64};
    std::memcpy(ip + 8, src.data(), 16);
    std::memcpy(ip + 24, dst.data(), 16);
    (void)wire::encode(ib::udp_header{.srcport = sport, .dstport = dport, .length = static_cast<std::uint16_t>(8 + payload), .checksum = 0},
                       frame.subspan(wire::eth_header_size + 40));
  }

 private:
  template <class Sink>
  std::size_t receive_on(int fd, std::uint16_t local_port, const wire::mac_address& mac, Sink& sink, int rounds) {
    std::size_t total = 0;
    auto& h = hdr_;
    auto& iov = iov_;
    auto& from = addr_;
    for (int k = 0; k < rounds; ++k) {
      for (std::size_t i = 0; i < cfg_.batch; ++i) {
        iov[i] = {rx_[i].data() + headers6, rx_[i].size() - headers6};
        h[i] = {};
        h[i].msg_hdr.msg_iov = &iov[i];
        h[i].msg_hdr.msg_iovlen = 1;
        h[i].msg_hdr.msg_name = &from[i];
        h[i].msg_hdr.msg_namelen = sizeof from[i];
        h[i].msg_hdr.msg_control = ctl_[i].data(), h[i].msg_hdr.msg_controllen = ctl_[i].size();
      }
      const int n = ::recvmmsg(fd, h.data(), cfg_.batch, MSG_DONTWAIT, nullptr);
      if (n <= 0) break;
      for (int i = 0; i < n; ++i) {
        const auto& m = h[static_cast<std::size_t>(i)];
        if (m.msg_hdr.msg_flags & MSG_TRUNC) {
          ++stats_.truncated;
          continue;
        }
        const sock_addr& src = from[static_cast<std::size_t>(i)];
        const bool v6 = src.sa.sa_family == AF_INET6;
        const std::size_t hl = v6 ? headers6 : headers, lead = headers6 - hl;  // the frame starts at `lead`
        std::array<std::uint8_t, 4> sip{};
        std::array<std::uint8_t, 16> sip6{};
        if (v6) std::memcpy(sip6.data(), &src.v6.sin6_addr, 16);
        else std::memcpy(sip.data(), &src.v4.sin_addr, 4);
        const std::uint16_t sport = ntohs(v6 ? src.v6.sin6_port : src.v4.sin_port);
        // GRO: datagrams of `seg` bytes each (the last may be shorter), back to back. The IP
        // header's TOS / traffic class (IP_RECVTOS, IPV6_RECVTCLASS): its DSCP and ECN.
        std::size_t seg = m.msg_len;
        std::uint8_t tos = 0;
        for (cmsghdr* c = CMSG_FIRSTHDR(&m.msg_hdr); c; c = CMSG_NXTHDR(const_cast<msghdr*>(&m.msg_hdr), c)) {
          if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
            int g = 0;
            std::memcpy(&g, CMSG_DATA(c), sizeof g);
            if (g > 0) seg = static_cast<std::size_t>(g);
          } else if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS && c->cmsg_len >= CMSG_LEN(1)) {
            tos = *reinterpret_cast<const std::uint8_t*>(CMSG_DATA(c));  // one byte
          } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_TCLASS && c->cmsg_len >= CMSG_LEN(sizeof(int))) {
            int t = 0;
            std::memcpy(&t, CMSG_DATA(c), sizeof t);
            tos = static_cast<std::uint8_t>(t);
          }
        }
        auto wrap_any = [&](std::span<std::byte> frame) {
          if (v6) wrap6(frame, mac, sip6, sport, *cfg_.address6, local_port, tos);
          else wrap(frame, mac, sip, sport, cfg_.address, local_port, tos);
        };
        std::byte* const payload = rx_[static_cast<std::size_t>(i)].data() + headers6;
        stats_.gro_messages += m.msg_len > seg;
        for (std::size_t off = 0; off < m.msg_len; off += seg) {
          const std::size_t len = std::min<std::size_t>(seg, m.msg_len - off);
          std::span<std::byte> frame;
          if (off == 0) {
            frame = std::span<std::byte>(rx_[static_cast<std::size_t>(i)]).subspan(lead, hl + len);
          } else if (headers6 + len <= scratch_.size()) {
            std::memcpy(scratch_.data() + headers6, payload + off, len);
            frame = std::span<std::byte>(scratch_).subspan(lead, hl + len);
          } else {
            ++stats_.truncated;
            continue;
          }
          wrap_any(frame);
          sink(frame);
          ++stats_.received;
          ++total;
        }
        if (m.msg_len == 0) {  // an empty datagram: the device counts it as a bad frame
          auto frame = std::span<std::byte>(rx_[static_cast<std::size_t>(i)]).subspan(lead, hl);
          wrap_any(frame);
          sink(frame);
          ++stats_.received;
          ++total;
        }
      }
      if (static_cast<std::uint32_t>(n) < cfg_.batch) break;
    }
    return total;
  }

  union sock_addr {
    sockaddr sa;
    sockaddr_in v4;
    sockaddr_in6 v6;
  };
  struct pending {
    rnic::time_ns at = 0;
    int fd = -1;  ///< the socket of the frame's source port
    sock_addr to{};
    socklen_t tolen = sizeof(sockaddr_in);
    std::uint8_t tos = 0;  ///< the frame's IPv4 TOS / IPv6 traffic class: DSCP and ECN
    std::vector<std::byte> bytes;
  };
  struct source_port {
    std::uint16_t port = 0;
    int fd = -1;
  };
  /// Sockets for source ports other than cfg_.port (sessions; per-QP-pair entropy ports).
  static constexpr std::size_t max_source_ports = 64;
  // The socket bound to (address, sport): this one, an open one, or a new one; -1 when the port
  // cannot be bound or max_source_ports are open.
  int socket_for(std::uint16_t sport) {
    if (sport == cfg_.port) return fd_;
    for (const auto& x : extra_)
      if (x.port == sport) return x.fd;
    if (extra_.size() >= max_source_ports) return -1;
    const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    const int pmtu = IP_PMTUDISC_DO;
    (void)::setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof pmtu);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(sport);
    std::memcpy(&a.sin_addr, cfg_.address.data(), 4);
    if (::bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
      ::close(fd);
      return -1;
    }
    extra_.push_back({sport, fd});
    ++stats_.source_ports;
    return fd;
  }
  // A device frame to a datagram (IPv4 without options, or IPv6 without extension headers;
  // UDP): queued with its faults.
  void queue(std::span<const std::byte> f, rnic::time_ns now) {
    const auto l2 = wire::locate_payload(f);
    if (l2 && l2->type == ib::ethertype_ipv6) {
      queue6(f, l2->offset, now);
      return;
    }
    if (!l2 || l2->type != ib::ethertype_ipv4 || f.size() < l2->offset + 28) {
      ++stats_.not_sendable;
      return;
    }
    const std::byte* ip = f.data() + l2->offset;
    const std::size_t ihl = 4u * (std::to_integer<unsigned>(ip[0]) & 0x0F);
    const std::size_t len = wire::load_be16(ip + 2);
    if (ihl < 20 || len < ihl + 8 || f.size() < l2->offset + len) {
      ++stats_.not_sendable;
      return;
    }
    const int fd = socket_for(wire::load_be16(ip + ihl));
    if (fd < 0) {
      ++stats_.not_sendable;
      return;
    }
    pending& p = q_.push(std::span<const std::byte>(ip + ihl + 8, ip + len));
    p.fd = fd;
    p.to = {};
    p.to.v4.sin_family = AF_INET;
    std::memcpy(&p.to.v4.sin_addr, ip + 16, 4);
    p.to.v4.sin_port = htons(wire::load_be16(ip + ihl + 2));
    p.tolen = sizeof(sockaddr_in);
    p.tos = ib::traffic_class_at(ip, false);
    p.at = now;
    apply_faults(q_, cfg_.faults, rng_, stats_);
  }
  void queue6(std::span<const std::byte> f, std::size_t at, rnic::time_ns now) {
    const std::byte* ip = f.data() + at;
    if (fd6_ < 0 || f.size() < at + 48 || std::to_integer<unsigned>(ip[6]) != ib::ip_proto_udp) {
      ++stats_.not_sendable;
      return;
    }
    const std::size_t len = 40u + wire::load_be16(ip + 4);
    if (len < 48 || f.size() < at + len || wire::load_be16(ip + 40) != cfg_.port) {
      ++stats_.not_sendable;
      return;
    }
    pending& p = q_.push(std::span<const std::byte>(ip + 48, ip + len));
    p.fd = fd6_;
    p.tos = ib::traffic_class_at(ip, true);
    p.to = {};
    p.to.v6.sin6_family = AF_INET6;
    std::memcpy(&p.to.v6.sin6_addr, ip + 24, 16);
    p.to.v6.sin6_port = htons(wire::load_be16(ip + 42));
    p.tolen = sizeof(sockaddr_in6);
    p.at = now;
    apply_faults(q_, cfg_.faults, rng_, stats_);
  }
  // Removes the first n frames the last sendmmsg was given (those it took).
  void drop_picked(std::size_t n) {
    for (std::size_t k = 0; k < n && k < picked_.size(); ++k) q_.retire(picked_[k]);
    picked_.clear();
  }

  udp_config cfg_;
  int fd_ = -1, fd6_ = -1, err_ = 0;
  std::mt19937_64 rng_;
  udp_counters stats_{};
  send_queue<pending> q_;
  std::vector<send_queue<pending>::iterator> picked_;  // the frames of the sendmmsg being made
  std::vector<source_port> extra_;
  std::vector<std::vector<std::byte>> rx_;
  std::vector<mmsghdr> hdr_;  // one batch's headers, vectors and addresses (reused by every call)
  std::vector<iovec> iov_;
  std::vector<sock_addr> addr_;
  std::vector<socklen_t> addr_len_;
  std::vector<std::array<char, 2 * CMSG_SPACE(sizeof(int))>> ctl_;  // out: UDP_SEGMENT, IP_TOS / IPV6_TCLASS; in: UDP_GRO, the TOS
  std::vector<std::size_t> frames_;                            // datagrams in each message sent
  std::vector<std::byte> scratch_;                             // a GRO message's later datagrams
  bool gso_ = false, gro_ = false;
};

}  // namespace pushwire::net
