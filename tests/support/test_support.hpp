// Shared test helpers: compile-time hex literals, Catch2 printing of described structs, runtime
// copies (so "runtime" checks really go through the runtime code paths).
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <pushwire/msg/print.hpp>
#include <pushwire/wire/fields.hpp>
#include <pushwire/wire/hex.hpp>
#include <pushwire/wire/print.hpp>

namespace pushwire::test {

using wire::hex_value;

template <wire::fixed_string S>
constexpr std::size_t hex_size() {
  std::size_t n = 0;
  for (char c : S.view()) n += hex_value(c) >= 0;
  return n / 2;
}

/// The bytes spelled by S in hex; spaces and other non-hex characters are ignored.
template <wire::fixed_string S>
consteval std::array<std::byte, hex_size<S>()> hex() {
  static_assert(hex_size<S>() * 2 == [] {
    std::size_t n = 0;
    for (char c : S.view()) n += hex_value(c) >= 0;
    return n;
  }(), "odd number of hex digits");
  std::array<std::byte, hex_size<S>()> out{};
  std::size_t i = 0;
  int hi = -1;
  for (char c : S.view()) {
    const int v = hex_value(c);
    if (v < 0) continue;
    if (hi < 0) {
      hi = v;
    } else {
      out[i++] = static_cast<std::byte>(hi << 4 | v);
      hi = -1;
    }
  }
  return out;
}

/// A heap copy, so decoding it cannot be constant-folded.
template <class Range>
std::vector<std::byte> copy(const Range& r) {
  return std::vector<std::byte>(std::begin(r), std::end(r));
}

}  // namespace pushwire::test

namespace Catch {
template <class T>
struct StringMaker<T, std::enable_if_t<pushwire::wire::described<T>>> {
  static std::string convert(const T& v) {
    if constexpr (pushwire::msg::message_type<T>)
      return pushwire::msg::to_json(v);
    else
      return pushwire::wire::to_json(v);
  }
};
template <>
struct StringMaker<pushwire::wire::errc> {
  static std::string convert(pushwire::wire::errc e) { return std::string{pushwire::wire::to_string(e)}; }
};
}  // namespace Catch
