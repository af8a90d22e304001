// The main of every test executable. It runs in the executable's own directory, so that the
// tools and scratch directories the build names relative to it (tests/CMakeLists.txt) are found
// from any working directory, and so that no absolute path of a clone is compiled into a test
// (ccache then finds the same objects in every clone).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <system_error>

#include "support/skip.hpp"

namespace {
// After a run in which nothing failed: one "SKIPPED: why" line per reason given to test::skip.
struct skip_report : Catch::TestEventListenerBase {
  using TestEventListenerBase::TestEventListenerBase;
  void testRunEnded(const Catch::TestRunStats& stats) override {
    if (stats.totals.assertions.failed != 0 || stats.totals.testCases.failed != 0) return;
    for (const auto& why : pushwire::test::skipped()) std::cout << "SKIPPED: " << why << '\n';
  }
};
}  // namespace
CATCH_REGISTER_LISTENER(skip_report)

int main(int argc, char* argv[]) {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec || ::chdir(exe.parent_path().c_str()) != 0) {
    std::cerr << "cannot enter the test executable's directory\n";
    return 2;
  }
  return Catch::Session().run(argc, argv);
}
