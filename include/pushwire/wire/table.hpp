// The field table of a described struct: one row per wire field, in wire order, derived from its
// PUSHWIRE_STRUCT. Nested structs are flattened into their parent's rows; a counted<> gives two
// rows (its count, then its elements); an array of structs points at the element's own table.
// The spec generator, the Wireshark field generator and the printers read only this.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include <pushwire/wire/codec.hpp>

namespace pushwire::wire {

struct field_info {
  std::string_view name;
  field_kind kind = field_kind::uint;
  std::size_t offset = 0;  ///< first byte from the start of the struct; arrays: element 0's first byte
  std::size_t size = 0;    ///< bytes: the field (bit fields: their container); arrays: one element
  unsigned bits = 0;       ///< width of the value (arrays: of one element)
  unsigned shift = 0;      ///< bit fields: the value's lowest bit within the container
  bool located = false;    ///< a bits<>/flag<> member
  std::uint64_t value = 0; ///< constant: the required value; count and array: the minimum count
  std::string_view link;   ///< count: its array's name; array: its count's name ("" = to the end)
  field_kind element_kind = field_kind::uint;  ///< arrays: what one element is
  std::span<const field_info> element;         ///< arrays of structs: the element's table
  std::span<const named_value> names;          ///< value names (enumerations)

  /// Bits of the container the value occupies (located fields), else all ones for `bits`.
  constexpr std::uint64_t mask() const {
    const std::uint64_t m = bits >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << bits) - 1;
    return m << shift;
  }
  /// True for counted<>/rest<> rows (their length depends on the frame).
  constexpr bool variable() const {
    return kind == field_kind::array || kind == field_kind::bytes;
  }
};

namespace detail {

template <class M>
struct value_names_of {
  static constexpr std::span<const named_value> get() { return {}; }
};
template <class E>
  requires std::is_enum_v<E>
struct value_names_of<E> {
  static constexpr std::span<const named_value> get() { return enum_names<E>(); }
};
template <std::size_t B, unsigned Hi, unsigned Lo, class V>
struct value_names_of<bits<B, Hi, Lo, V>> : value_names_of<V> {};
template <class F, auto V, errc E>
struct value_names_of<constant<F, V, E>> : value_names_of<F> {};
template <class F>
struct value_names_of<reserved<F>> : value_names_of<F> {};

template <class M>
constexpr std::uint64_t constant_value() {
  if constexpr (requires { M::value; typename M::field_type; }) {
    using V = std::remove_cvref_t<decltype(M::value)>;
    if constexpr (std::is_enum_v<V>)
      return static_cast<std::uint64_t>(static_cast<std::underlying_type_t<V>>(M::value));
    else
      return static_cast<std::uint64_t>(M::value);
  } else {
    return 0;
  }
}

template <described T>
constexpr std::size_t row_count();

template <class M>
constexpr std::size_t rows_of_member() {
  using C = field_codec<M>;
  if constexpr (C::kind == field_kind::record)
    return row_count<M>();
  else if constexpr (requires { M::count_name; })
    return 2;
  else
    return 1;
}

template <described T>
constexpr std::size_t row_count() {
  std::size_t n = 0;
  for_each_member_index<T>([&](auto i) { n += rows_of_member<member_type<T, i.value>>(); });
  return n;
}

template <described T>
constexpr std::array<field_info, row_count<T>()> make_table();

}  // namespace detail

/// The field table of T.
template <described T>
inline constexpr auto fields = detail::make_table<T>();

namespace detail {

template <class Elem>
constexpr std::span<const field_info> element_table() {
  if constexpr (described<Elem>)
    return fields<Elem>;
  else
    return {};
}

template <described T>
constexpr std::array<field_info, row_count<T>()> make_table() {
  std::array<field_info, row_count<T>()> rows{};
  std::size_t n = 0;
  for_each_member_index<T>([&](auto i) {
    constexpr std::size_t I = i.value;
    using M = member_type<T, I>;
    using C = field_codec<M>;
    constexpr std::size_t off = layout<T>::offsets[I];
    if constexpr (C::kind == field_kind::record) {
      for (field_info r : fields<M>) {
        r.offset += off;
        rows[n++] = r;
      }
    } else if constexpr (C::variable) {
      using Elem = typename M::element_type;
      constexpr bool counted_member = requires { M::count_name; };
      if constexpr (counted_member) {
        field_info c{};
        c.name = M::count_name;
        c.kind = field_kind::count;
        c.offset = off;
        c.size = C::place.size;
        c.bits = C::value_bits;
        c.value = M::min_count;
        c.link = member_name<T, I>;
        rows[n++] = c;
      }
      field_info a{};
      a.name = member_name<T, I>;
      a.kind = C::kind;
      a.offset = layout<T>::fixed_size;
      a.size = detail::tail_codec<Elem>::elem_size;
      a.bits = static_cast<unsigned>(8 * a.size);
      a.value = M::min_count;
      if constexpr (counted_member) a.link = M::count_name;
      if constexpr (!std::is_same_v<Elem, std::byte>) {
        a.element_kind = field_codec<Elem>::kind;
        a.element = element_table<Elem>();
        a.names = value_names_of<Elem>::get();
      }
      rows[n++] = a;
    } else {
      field_info f{};
      f.name = member_name<T, I>;
      f.kind = C::kind;
      f.offset = off;
      f.size = C::place.size;
      f.bits = C::value_bits;
      f.located = C::place.located;
      f.shift = C::place.located ? C::place.lsb : 0;
      f.value = constant_value<M>();
      f.names = value_names_of<M>::get();
      rows[n++] = f;
    }
  });
  return rows;
}

}  // namespace detail

/// The row named `name` in T's table, or nullptr.
template <described T>
constexpr const field_info* find_field(std::string_view name) {
  for (const field_info& f : fields<T>)
    if (f.name == name) return &f;
  return nullptr;
}

/// The name of a field_kind, as the spec tables print it.
constexpr std::string_view to_string(field_kind k) { return enum_name(k); }

}  // namespace pushwire::wire
