#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

#include <iostream>

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
