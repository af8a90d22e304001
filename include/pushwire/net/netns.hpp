// A step run inside another network namespace (spec/net.md §7): a thread of its own enters the
// namespace, runs the step and ends, so the caller's threads stay where they were. What the step
// opens (sockets, AF_XDP sockets, TAP and netlink descriptors) stays in the namespace it was made
// in, and keeps working from any thread. Needs CAP_SYS_ADMIN. Real I/O: nothing sans-IO includes it.
#pragma once

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <exception>
#include <string>
#include <system_error>
#include <thread>

namespace pushwire::net {

/// Runs `step()` on a thread that first enters the network namespace descriptor `ns_fd` refers
/// to. Returns 0 once `step` has run, else the errno (the thread could not be made, or setns()
/// refused) and `step` has not run. An exception `step` throws is thrown again here.
template <class Step>
int in_netns(int ns_fd, Step&& step) {
  int err = 0;
  std::exception_ptr thrown;
  try {
    std::thread([&] {
      if (::setns(ns_fd, CLONE_NEWNET) != 0) {
        err = errno;
        return;
      }
      try {
        step();
      } catch (...) {
        thrown = std::current_exception();
      }
    }).join();
  } catch (const std::system_error& e) {
    err = e.code().value() ? e.code().value() : EAGAIN;
  }
  if (thrown) std::rethrow_exception(thrown);
  return err;
}

/// The same for the namespace `name`: a name as `ip netns` keeps them (/run/netns/NAME), or a
/// path (one with a '/', such as /proc/PID/ns/net). ENOENT: no such namespace.
template <class Step>
int in_netns(const std::string& name, Step&& step) {
  const std::string path = name.find('/') == std::string::npos ? "/run/netns/" + name : name;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  const int err = in_netns(fd, static_cast<Step&&>(step));
  ::close(fd);
  return err;
}

}  // namespace pushwire::net
