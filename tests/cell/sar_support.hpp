// Helpers of the segmentation and reassembly tests (sar_test.cpp, batch_test.cpp).
#pragma once

#include <algorithm>
#include <cstddef>
#include <random>
#include <span>
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

/// Random cuts of p into pieces (some empty; with lead_empty, sometimes the first too).
inline std::vector<std::span<const std::byte>> random_pieces(std::span<const std::byte> p, std::mt19937& rng,
                                                             bool lead_empty = false) {
  std::vector<std::span<const std::byte>> out;
  if (lead_empty && rng() % 4 == 0) out.push_back({});
  std::size_t at = 0;
  while (at < p.size()) {
    const std::size_t k = std::min<std::size_t>(p.size() - at, rng() % 3 == 0 ? 0 : rng() % 700 + 1);
    out.push_back(p.subspan(at, k));
    at += k;
  }
  if (rng() % 2) out.push_back({});
  return out;
}

}  // namespace pushwire::test::cells
