// Names of enum values: the one mechanism every pushwire enum uses. An enum publishes its names
// with an ADL-found `wire_enum_names(E)` returning a span of named_value; enum_name(v) reads it.
// wire/enum.hpp checks at compile time that a table lists exactly its enum's enumerators.
#pragma once

#include <concepts>
#include <cstdint>
#include <span>
#include <string_view>
#include <type_traits>

namespace pushwire::wire {

/// One value name of an enumeration, for printing, specs and dissector value strings.
struct named_value {
  std::uint64_t value;
  std::string_view name;
  constexpr named_value(std::uint64_t v, std::string_view n) : value(v), name(n) {}
  /// From an enumerator, so a code is written only in its enum.
  template <class E>
    requires std::is_enum_v<E>
  constexpr named_value(E e, std::string_view n)
      : value(static_cast<std::uint64_t>(static_cast<std::underlying_type_t<E>>(e))), name(n) {}
};

/// An enum whose value names are published by an ADL-found `wire_enum_names(E)` returning
/// something convertible to std::span<const named_value>.
template <class E>
concept named_enum = std::is_enum_v<E> && requires(E e) {
  { wire_enum_names(e) } -> std::convertible_to<std::span<const named_value>>;
};

/// The value names of E (empty when E publishes none).
template <class E>
constexpr std::span<const named_value> enum_names() {
  if constexpr (named_enum<E>)
    return wire_enum_names(E{});
  else
    return {};
}

/// The name of v, or "" when it has none.
template <class E>
constexpr std::string_view enum_name(E v) {
  for (const auto& n : enum_names<E>())
    if (n.value == static_cast<std::uint64_t>(v)) return n.name;
  return {};
}

}  // namespace pushwire::wire
