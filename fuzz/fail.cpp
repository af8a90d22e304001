// A broken invariant aborts, which both libFuzzer and the replay driver report as a crash.
#include <cstdio>
#include <cstdlib>

#include "provider.hpp"

[[noreturn]] void pushwire::fuzz::fail(const char* what) {
  std::fprintf(stderr, "invariant failed: %s\n", what);
  std::abort();
}
