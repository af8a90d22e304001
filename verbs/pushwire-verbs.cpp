// pushwire-verbs: runs a program with libpushwire-verbs.so preloaded (spec/verbs.md §1).
//
//   pushwire-verbs run [--] CMD [ARGS...]   exec CMD with LD_PRELOAD naming the provider
//   pushwire-verbs library                  print the provider's path
//
// The provider is looked for beside this executable (a build tree), then in ../lib*/ (an
// installation), then at the install path this was built for.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#ifndef PUSHWIRE_VERBS_INSTALLED
#define PUSHWIRE_VERBS_INSTALLED ""
#endif

namespace fs = std::filesystem;

static std::string find_library() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  const char* name = "libpushwire-verbs.so";
  if (!ec) {
    const fs::path dir = self.parent_path();
    for (const fs::path& p : {dir / name, dir / ".." / "lib" / name, dir / ".." / "lib64" / name})
      if (fs::exists(p, ec)) return fs::canonical(p, ec).string();
  }
  const fs::path installed = fs::path(PUSHWIRE_VERBS_INSTALLED) / name;
  if (!std::string(PUSHWIRE_VERBS_INSTALLED).empty() && fs::exists(installed, ec)) return installed.string();
  return {};
}

static int usage(FILE* to) {
  std::fputs("usage: pushwire-verbs run [--] CMD [ARGS...]\n"
             "       pushwire-verbs library\n"
             "Runs CMD with libpushwire-verbs.so preloaded: its verbs programs see the devices PUSHWIRE_VERBS\n"
             "lists (default pw0:auto, a device on the first free 127.0.0.N). See spec/verbs.md.\n",
             to);
  return to == stdout ? 0 : 2;
}

int main(int argc, char** argv) {
  if (argc < 2) return usage(stderr);
  const std::string cmd = argv[1];
  if (cmd == "-h" || cmd == "--help") return usage(stdout);
  const std::string lib = find_library();
  if (lib.empty()) {
    std::fputs("pushwire-verbs: libpushwire-verbs.so not found beside this program or in ../lib\n", stderr);
    return 1;
  }
  if (cmd == "library") {
    std::printf("%s\n", lib.c_str());
    return 0;
  }
  if (cmd != "run") return usage(stderr);
  int first = 2;
  if (first < argc && std::strcmp(argv[first], "--") == 0) ++first;
  if (first >= argc) return usage(stderr);
  std::string preload = lib;
  if (const char* old = std::getenv("LD_PRELOAD"); old && *old) preload += std::string(":") + old;
  ::setenv("LD_PRELOAD", preload.c_str(), 1);
  ::execvp(argv[first], argv + first);
  std::fprintf(stderr, "pushwire-verbs: %s: %s\n", argv[first], std::strerror(errno));
  return 127;
}
