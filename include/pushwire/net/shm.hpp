// Shared memory between a device process and the programs attached to its functions
// (spec/rnicd.md §3, §4): the region (a memfd, mapped by both), eventfds, the control socket
// (Unix SOCK_SEQPACKET, descriptors passed with SCM_RIGHTS), and shm_port, the transport that
// connects an attached program's rnic::device to its function's rings through net::device_loop.
// Real I/O: nothing sans-IO includes it.
#pragma once

#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <pushwire/rnic/device.hpp>
#include <pushwire/rnic/function.hpp>

namespace pushwire::net {

/// An owned file descriptor.
class unique_fd {
 public:
  unique_fd() = default;
  explicit unique_fd(int fd) : fd_(fd) {}
  unique_fd(unique_fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  unique_fd& operator=(unique_fd&& o) noexcept {
    if (this != &o) reset(std::exchange(o.fd_, -1));
    return *this;
  }
  ~unique_fd() { reset(); }
  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_ = -1;
};

/// Signals an eventfd (adds 1).
inline void signal_eventfd(int fd) {
  const std::uint64_t one = 1;
  (void)!::write(fd, &one, sizeof one);
}
/// Clears an eventfd (non-blocking).
inline void drain_eventfd(int fd) {
  std::uint64_t v;
  (void)!::read(fd, &v, sizeof v);
}

/// A mapping of a whole memfd, shared.
class shared_region {
 public:
  shared_region() = default;
  /// A new memfd of `bytes`, mapped (the device process). ok() false on failure, errno kept.
  static shared_region create(std::size_t bytes, const char* name) {
    shared_region r;
    r.fd_.reset(::memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING));
    if (!r.fd_ || ::ftruncate(r.fd_.get(), static_cast<off_t>(bytes)) != 0) return fail(r);
    // The program cannot grow or shrink it under the device process.
    (void)::fcntl(r.fd_.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
    return r.map(bytes) ? std::move(r) : fail(r);
  }
  /// Maps a received memfd of at least `bytes` (the program): its size is checked first.
  static shared_region open(unique_fd fd, std::size_t bytes) {
    shared_region r;
    r.fd_ = std::move(fd);
    struct stat st {};
    if (!r.fd_ || ::fstat(r.fd_.get(), &st) != 0 || static_cast<std::size_t>(st.st_size) < bytes) {
      r.err_ = EPROTO;
      r.fd_.reset();
      return r;
    }
    return r.map(bytes) ? std::move(r) : fail(r);
  }
  shared_region(shared_region&& o) noexcept
      : fd_(std::move(o.fd_)), mem_(std::exchange(o.mem_, nullptr)), size_(std::exchange(o.size_, 0)), err_(o.err_) {}
  shared_region& operator=(shared_region&& o) noexcept {
    if (this != &o) {
      unmap();
      fd_ = std::move(o.fd_), mem_ = std::exchange(o.mem_, nullptr), size_ = std::exchange(o.size_, 0), err_ = o.err_;
    }
    return *this;
  }
  ~shared_region() { unmap(); }
  bool ok() const { return mem_ != nullptr; }
  int error() const { return err_; }
  int fd() const { return fd_.get(); }
  std::span<std::byte> bytes() const { return {static_cast<std::byte*>(mem_), size_}; }

 private:
  static shared_region fail(shared_region& r) {
    r.err_ = errno;
    r.fd_.reset();
    return std::move(r);
  }
  bool map(std::size_t bytes) {
    void* m = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd_.get(), 0);
    if (m == MAP_FAILED) return false;
    mem_ = m, size_ = bytes;
    return true;
  }
  void unmap() {
    if (mem_) ::munmap(mem_, size_);
    mem_ = nullptr;
  }
  unique_fd fd_;
  void* mem_ = nullptr;
  std::size_t size_ = 0;
  int err_ = 0;
};

/// Sends one message and up to 4 descriptors on a SOCK_SEQPACKET socket. False on failure.
inline bool send_message(int sock, std::span<const std::byte> m, std::span<const int> fds = {}) {
  iovec iov{const_cast<std::byte*>(m.data()), m.size()};
  msghdr h{};
  h.msg_iov = &iov;
  h.msg_iovlen = 1;
  alignas(cmsghdr) char ctl[CMSG_SPACE(4 * sizeof(int))] = {};
  if (!fds.empty() && fds.size() <= 4) {
    h.msg_control = ctl;
    h.msg_controllen = CMSG_SPACE(fds.size() * sizeof(int));
    cmsghdr* c = CMSG_FIRSTHDR(&h);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(fds.size() * sizeof(int));
    std::memcpy(CMSG_DATA(c), fds.data(), fds.size() * sizeof(int));
  }
  const ssize_t n = ::sendmsg(sock, &h, MSG_NOSIGNAL);
  return n == static_cast<ssize_t>(m.size());
}
/// Receives one message into `buf` (and any descriptors, closed beyond `max_fds`). Returns its
/// size, 0 at end of stream, -1 on error (errno; EAGAIN when non-blocking and nothing waits), or
/// -2 for a message longer than `buf` (its descriptors closed).
inline ssize_t receive_message(int sock, std::span<std::byte> buf, std::vector<unique_fd>* fds = nullptr, int flags = 0) {
  iovec iov{buf.data(), buf.size()};
  msghdr h{};
  h.msg_iov = &iov;
  h.msg_iovlen = 1;
  alignas(cmsghdr) char ctl[CMSG_SPACE(8 * sizeof(int))];
  h.msg_control = ctl;
  h.msg_controllen = sizeof ctl;
  const ssize_t n = ::recvmsg(sock, &h, flags | MSG_CMSG_CLOEXEC);
  if (n < 0) return -1;
  std::vector<unique_fd> got;
  for (cmsghdr* c = CMSG_FIRSTHDR(&h); c; c = CMSG_NXTHDR(&h, c))
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      const std::size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (std::size_t i = 0; i < k; ++i) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
        got.emplace_back(fd);
      }
    }
  if (h.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) return -2;
  if (fds) *fds = std::move(got);
  return n;
}
/// A connected SOCK_SEQPACKET socket to `path`; invalid (errno) on failure.
inline unique_fd connect_seqpacket(const std::string& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.size() >= sizeof a.sun_path) {
    errno = ENAMETOOLONG;
    return unique_fd{};
  }
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  unique_fd s(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (!s || ::connect(s.get(), reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) return unique_fd{};
  return s;
}

struct shm_port_counters {
  std::uint64_t sent = 0, received = 0, doorbells = 0, too_large = 0;
};

/// The transport of an attached program (net::device_loop's attach()): frames the device sends
/// go into the tx ring, frames in the rx ring go to the device. A doorbell is rung only when the
/// device process sleeps; the loop waits on the wake eventfd only after arm() (spec/rnicd.md §3).
/// A ring whose other side published an impossible index makes broken() true: the caller treats
/// the device as failed.
class shm_port {
 public:
  shm_port(const rnic::fn::region_view& v, int doorbell, int wake)
      : tx_(v.tx, v.slots), rx_(v.rx, v.slots), doorbell_(doorbell), wake_(wake) {}
  std::size_t send_from(rnic::device& d, std::size_t port, rnic::time_ns) {
    if (broken_) return 0;
    rnic::fn_errc e{};
    auto space = tx_.space(e);
    if (!space) return fail(e);
    std::size_t n = 0;
    while (*space > 0 && d.next_frame_size(port) > 0) {
      const auto got = d.take_frame(port, tx_.next());
      if (!got) {  // larger than a slot: the device's MTU is the function's, so never; dropped
        ++stats_.too_large;
        if (auto f = d.take_frame(port)) d.recycle(std::move(*f));
        continue;
      }
      tx_.publish(static_cast<std::uint32_t>(*got));
      --*space, ++n;
    }
    if (n) {
      stats_.sent += n;
      if (tx_.consumer_sleeping()) {
        ++stats_.doorbells;
        signal_eventfd(doorbell_);
      }
    }
    return n;
  }
  std::size_t receive_into(rnic::device& d, std::size_t port, rnic::time_ns now) {
    if (broken_) return 0;
    rnic::fn_errc e{};
    auto avail = rx_.available(e);
    if (!avail) return fail(e);
    std::size_t n = 0;
    for (; n < *avail; ++n) {
      auto f = rx_.peek(e);
      if (!f) return fail(e);
      d.receive(port, *f, now);
      rx_.pop();
    }
    stats_.received += n;
    return n;
  }
  int fd() const { return wake_; }
  /// Before the loop sleeps: false when frames wait (do not sleep).
  bool arm() { return broken_ || rx_.arm_sleep(); }
  /// After it woke.
  void disarm(bool readable) {
    rx_.disarm_sleep();
    if (readable) drain_eventfd(wake_);
  }
  /// Before a thread sleeps while another (the program, polling) consumes the rx ring: the
  /// device process signals the wake eventfd only if a frame waited `us` µs (fd() then readable).
  void arm_after(std::uint32_t us) {
    if (!broken_) rx_.arm_sleep_after(us);
  }
  bool broken() const { return broken_; }
  rnic::fn_errc why_broken() const { return why_; }
  const shm_port_counters& stats() const { return stats_; }

 private:
  std::size_t fail(rnic::fn_errc e) {
    broken_ = true, why_ = e;
    return 0;
  }
  rnic::fn::ring_producer tx_;
  rnic::fn::ring_consumer rx_;
  int doorbell_, wake_;
  bool broken_ = false;
  rnic::fn_errc why_{};
  shm_port_counters stats_;
};

}  // namespace pushwire::net
