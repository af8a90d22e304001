// Byte copies usable in constant expressions that are plain memcpy at run time.
#pragma once

#include <cstddef>
#include <cstring>
#include <type_traits>

namespace pushwire::wire::detail {

constexpr void copy_bytes(std::byte* dst, const std::byte* src, std::size_t n) noexcept {
  if (!std::is_constant_evaluated()) {
    if (n) std::memcpy(dst, src, n);
    return;
  }
  for (std::size_t i = 0; i < n; ++i) dst[i] = src[i];
}

}  // namespace pushwire::wire::detail
