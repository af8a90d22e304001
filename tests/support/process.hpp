// Runs a command line as a user would (through the shell), capturing its exit status, stdout
// and stderr. For tests of the command-line tools. And runs a test body in a network namespace of
// its own (a forked child).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <optional>

#include <catch2/catch.hpp>

#include "skip.hpp"

namespace pushwire::test {

struct run_result {
  int status;
  std::string out, err;
};

/// `command` with stdin from stdin_text; status is the exit code (-1 when killed by a signal).
inline run_result run_command(const std::string& command, const std::string& stdin_text = {}) {
  char in_path[] = "/tmp/pushwire-test-in-XXXXXX";
  char err_path[] = "/tmp/pushwire-test-err-XXXXXX";
  const int in_fd = mkstemp(in_path), err_fd = mkstemp(err_path);
  REQUIRE(in_fd >= 0);
  REQUIRE(err_fd >= 0);
  std::ofstream(in_path) << stdin_text;
  const std::string cmd = command + " <" + in_path + " 2>" + err_path;
  run_result r{};
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p);
  char buf[4096];
  std::size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  std::stringstream es;
  es << std::ifstream(err_path).rdbuf();
  r.err = es.str();
  close(in_fd);
  close(err_fd);
  std::remove(in_path);
  std::remove(err_path);
  return r;
}

inline std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> v;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) v.push_back(l);
  return v;
}

/// Writes bytes to path.
template <class Bytes>
void write_file(const std::string& path, const Bytes& b) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

/// Runs body in a forked child that has unshared a network namespace of its own and returns its
/// exit code: 0 passed; anything else is the step that failed. 100 (no namespace allowed) or 101
/// (body's own "not here") skip with `why` (test::skip: ctest reports the test skipped) and
/// return nullopt.
inline std::optional<int> in_new_netns(const std::function<int()>& body, const char* why) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    if (::unshare(CLONE_NEWNET) != 0) ::_exit(100);
    ::_exit(body());
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  const int rc = WEXITSTATUS(status);
  if (rc == 100 || rc == 101) {
    skip(why);
    return std::nullopt;
  }
  return rc;
}

}  // namespace pushwire::test
