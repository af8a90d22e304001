// Test hooks for cells: not part of the API (a frame the library builds is always sealed).
#pragma once

#include <cstddef>
#include <span>

#include <pushwire/cell/format.hpp>

namespace pushwire::cell::testing {

/// Recomputes the cell CRC of a frame in place, whatever its fields say (for tests and fuzzers that
/// edit a cell and want it to reach the checks after the CRC). Errors: truncated, not_cell,
/// length_mismatch, when the frame has no place for the CRC.
constexpr wire::error reseal(std::span<std::byte> frame) {
  const auto l2 = wire::locate_payload(frame);
  if (!l2) return l2.error();
  if (l2->type != ethertype) return {errc::not_cell, l2->offset - 2, "eth.type"};
  if (frame.size() - l2->offset < header_size) return {errc::truncated, frame.size(), "header"};
  const std::byte* p = frame.data() + l2->offset;
  header h{};
  h.type = wire::read<header, "type">(p);
  h.has_vamh = wire::read<header, "has_vamh">(p);
  h.has_idata = wire::read<header, "has_idata">(p);
  h.last = wire::read<header, "last">(p);
  h.length = wire::read<header, "length">(p);
  const cell_layout l = layout_of(l2->offset, h);
  if (frame.size() < l.end()) return {errc::length_mismatch, l2->offset + wire::offset_of<header>("length"), "length"};
  seal(frame.first(l.end()), l);
  return {};
}

}  // namespace pushwire::cell::testing
