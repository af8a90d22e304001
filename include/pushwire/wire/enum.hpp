// Compile-time reflection of enumerators, to tie every name table to its enum.
//
// Every named enum in pushwire publishes its names one way: an ADL-found
// `wire_enum_names(E)` returning a span of named_value (wire/fields.hpp), read by
// wire::enum_name(). This header checks, at compile time, that such a table lists exactly the
// enumerators of E, each once: `static_assert(wire::names_match<E>())`. The enumerators are
// found from the compiler's own spelling of a template argument (__PRETTY_FUNCTION__ prints
// `E::name` for an enumerator and `(E)5` for a value without one), so the check does not trust
// the table it checks. GCC >= 9 and Clang >= 9 spell them this way.
//
// Scanned values: 0 .. enum_scan_limit<E> - 1 (default 256; flags enums scan each single bit
// with flag_names_match). The checks cost compile time, so the library's headers do not include
// this one: tests/wire/enum_names_test.cpp asserts every table of the library.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <type_traits>
#include <utility>

#include <pushwire/wire/fields.hpp>

namespace pushwire::wire {

namespace detail {
template <auto V>
constexpr std::string_view enumerator_probe() {
  return __PRETTY_FUNCTION__;
}
/// The identifier of the enumerator whose value is V, or "" when V names none.
template <auto V>
constexpr std::string_view enumerator_id() {
  std::string_view s = enumerator_probe<V>();
  const auto at = s.find("V = ");
  if (at == std::string_view::npos) return {};
  s.remove_prefix(at + 4);
  s = s.substr(0, s.find_first_of(";]"));
  if (s.empty() || s.front() == '(' || s.front() == '-' || (s.front() >= '0' && s.front() <= '9')) return {};
  if (const auto c = s.rfind("::"); c != std::string_view::npos) s.remove_prefix(c + 2);
  return s;
}
/// enumerator_id<V>() as a constant of its own: each value is one constant evaluation, so a scan
/// of many values stays within the compiler's per-evaluation step limit (clang: 1,048,576).
template <auto V>
inline constexpr std::string_view enumerator_id_v = enumerator_id<V>();
template <class E, std::size_t... I>
constexpr std::array<std::string_view, sizeof...(I)> scan_values(std::index_sequence<I...>) {
  return {enumerator_id_v<static_cast<E>(I)>...};
}
template <class E, std::size_t... I>
constexpr std::array<std::string_view, sizeof...(I)> scan_bits(std::index_sequence<I...>) {
  using U = std::underlying_type_t<E>;
  return {enumerator_id_v<static_cast<E>(static_cast<U>(U{1} << I))>...};
}
}  // namespace detail

/// Values 0 .. enum_scan_limit<E> - 1 are scanned for enumerators.
template <class E>
inline constexpr std::size_t enum_scan_limit = 256;

/// The identifier of each value below the scan limit ("" where none).
template <class E>
inline constexpr auto enumerator_ids = detail::scan_values<E>(std::make_index_sequence<enum_scan_limit<E>>{});

/// How many enumerators E has below the scan limit.
template <class E>
inline constexpr std::size_t enumerator_count = [] {
  std::size_t n = 0;
  for (std::string_view s : enumerator_ids<E>) n += !s.empty();
  return n;
}();

/// E's enumerators in value order, named by their identifiers.
template <class E>
inline constexpr auto enumerators = [] {
  std::array<std::size_t, enumerator_count<E>> values{};
  std::size_t n = 0;
  for (std::size_t v = 0; v < enumerator_ids<E>.size(); ++v)
    if (!enumerator_ids<E>[v].empty()) values[n++] = v;
  return [&]<std::size_t... I>(std::index_sequence<I...>) {
    return std::array<named_value, sizeof...(I)>{named_value{values[I], enumerator_ids<E>[values[I]]}...};
  }(std::make_index_sequence<enumerator_count<E>>{});
}();

/// `names` lists exactly E's enumerators below the scan limit, each once; with SameText, each
/// name is also the enumerator's identifier.
template <class E, bool SameText = false>
constexpr bool names_match(std::span<const named_value> names) {
  if (names.size() != enumerator_count<E>) return false;
  for (std::size_t i = 0; i < names.size(); ++i) {
    const std::uint64_t v = names[i].value;
    if (v >= enumerator_ids<E>.size() || enumerator_ids<E>[v].empty() || names[i].name.empty()) return false;
    if (SameText && names[i].name != enumerator_ids<E>[v]) return false;
    for (std::size_t j = 0; j < i; ++j)
      if (names[j].value == v) return false;
  }
  return true;
}
/// names_match over E's published table (wire_enum_names).
template <class E, bool SameText = false>
constexpr bool names_match() {
  return names_match<E, SameText>(enum_names<E>());
}

/// For a flags enum: the table lists exactly the single-bit enumerators, each once.
template <class E>
constexpr bool flag_names_match() {
  constexpr std::size_t bits = sizeof(std::underlying_type_t<E>) * 8;
  constexpr auto ids = detail::scan_bits<E>(std::make_index_sequence<bits>{});
  const auto names = enum_names<E>();
  std::size_t count = 0;
  for (std::string_view s : ids) count += !s.empty();
  if (names.size() != count) return false;
  for (const named_value& n : names) {
    if (n.value == 0 || (n.value & (n.value - 1)) != 0) return false;
    std::size_t b = 0;
    while ((std::uint64_t{1} << b) != n.value) ++b;
    if (b >= bits || ids[b].empty() || ids[b] != n.name) return false;
  }
  return true;
}

}  // namespace pushwire::wire
