// Tests that cannot run on this machine (no privilege, no device, no tool) say so with
// test::skip(why). At the end of a run in which nothing failed, the test program prints
// "SKIPPED: why" for each (tests/catch_main.cpp), which ctest's SKIP_REGULAR_EXPRESSION reports
// as skipped (pushwire_test(... SKIPPABLE ...) in tests/CMakeLists.txt). A run with a failure
// prints no such line: a skip never hides a failure.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

namespace pushwire::test {

/// The reasons given to skip() in this run, each once, in the order first given.
inline std::vector<std::string>& skipped() {
  static std::vector<std::string> reasons;
  return reasons;
}

/// Records that the running test could not do its work here, and why.
inline void skip(const std::string& why) {
  auto& r = skipped();
  if (std::find(r.begin(), r.end(), why) == r.end()) r.push_back(why);
}

}  // namespace pushwire::test
