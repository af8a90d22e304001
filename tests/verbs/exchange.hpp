// The TCP rendezvous of the libibverbs test programs (pushwire-datacheck, pushwire-apm): each
// side sends its QP's details and reads the other's before any RDMA; and their way to fail.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace pushwire::test {

/// The program's name in its failure messages (set first thing in main).
inline const char* program_name = "pushwire-test";
/// Prints "NAME: FAIL: ..." on stderr and exits with 1.
[[noreturn]] inline void die(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
inline void die(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::fprintf(stderr, "%s: FAIL: ", program_name);
  std::vfprintf(stderr, fmt, ap);
  std::fprintf(stderr, "\n");
  va_end(ap);
  std::exit(1);
}

/// Writes (out) or reads exactly n bytes; false when the connection ends first.
inline bool full_io(int fd, void* p, std::size_t n, bool out) {
  auto* b = static_cast<std::uint8_t*>(p);
  while (n) {
    const ssize_t k = out ? ::write(fd, b, n) : ::read(fd, b, n);
    if (k <= 0) return false;
    b += k, n -= static_cast<std::size_t>(k);
  }
  return true;
}

/// The server (server null) listens on TCP `port` and accepts one connection; a client connects
/// to server:port, trying for 10 s. The connected socket, or -1 with `why` set.
inline int exchange_socket(const char* server, int port, std::string& why) {
  const int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  if (!server) {
    const int one = 1;
    ::setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) || ::listen(s, 1)) {
      why = "listen on " + std::to_string(port) + ": " + std::strerror(errno);
      ::close(s);
      return -1;
    }
    const int c = ::accept(s, nullptr, nullptr);
    if (c < 0) why = std::string("accept: ") + std::strerror(errno);
    ::close(s);
    return c;
  }
  if (::inet_pton(AF_INET, server, &a.sin_addr) != 1) {
    why = std::string(server) + ": not an IPv4 address";
    ::close(s);
    return -1;
  }
  for (int tries = 0; ::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a); ++tries) {
    if (tries == 100) {
      why = "connect to " + std::string(server) + ":" + std::to_string(port) + ": " + std::strerror(errno);
      ::close(s);
      return -1;
    }
    ::usleep(100'000);
  }
  return s;
}

}  // namespace pushwire::test
