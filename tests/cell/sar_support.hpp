// Helpers of the segmentation and reassembly tests (sar_test.cpp, batch_test.cpp).
#pragma once

#include <cstddef>
#include <random>
#include <vector>

#include <pushwire/cell/segmenter.hpp>

#include "../support/test_support.hpp"

namespace pushwire::test::cells {

using frame = std::vector<std::byte>;

/// n bytes from rng.
inline std::vector<std::byte> random_payload(std::size_t n, std::mt19937& rng) {
  std::vector<std::byte> p(n);
  for (auto& b : p) b = static_cast<std::byte>(rng());
  return p;
}

/// Every cell of s, written by next() one at a time, each exactly next_size() bytes.
inline std::vector<frame> segment_all(cell::segmenter s) {
  std::vector<frame> cells;
  while (!s.done()) {
    frame f(s.next_size());
    auto n = s.next(f);
    REQUIRE(n);
    REQUIRE(*n == f.size());
    cells.push_back(std::move(f));
  }
  return cells;
}

}  // namespace pushwire::test::cells
