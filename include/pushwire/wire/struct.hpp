// PUSHWIRE_STRUCT: the one description of a wire struct.
//
//   struct pool_descriptor {
//     PUSHWIRE_STRUCT(pool_descriptor,
//       (std::uint32_t, pool_ref),
//       (wire::bits<4, 7, 4>, flags), ...);
//   };
//
// declares each member as `type name{}` (so designated initialisers may omit members without
// g++ -Wmissing-field-initializers) and registers the members with Boost.Hana as a Struct, in
// order. Wire size, encode/decode, equality, printing, JSON and the field table all derive from
// that registration. A member is `(type..., name)`: the type may contain commas.
// The macro also defines a hidden-friend operator== that compares field by field.
#pragma once

#include <array>
#include <cstddef>
#include <string_view>
#include <type_traits>
#include <utility>

#include <boost/hana/at.hpp>
#include <boost/hana/accessors.hpp>
#include <boost/hana/length.hpp>
#include <boost/hana/pair.hpp>
#include <boost/hana/string.hpp>
#include <boost/hana/tuple.hpp>
#include <boost/hana/concept/struct.hpp>

#include <pushwire/wire/detail/pp.hpp>

namespace pushwire::wire {

namespace detail {
template <class MemPtr, MemPtr P>
struct member_ptr {
  template <class S>
  constexpr decltype(auto) operator()(S&& s) const {
    return static_cast<S&&>(s).*P;
  }
};
}  // namespace detail

/// A type described with PUSHWIRE_STRUCT (or any Boost.Hana Struct).
template <class T>
concept described = boost::hana::Struct<std::remove_cvref_t<T>>::value;

/// Number of members of a described type.
template <described T>
inline constexpr std::size_t member_count =
    decltype(boost::hana::length(boost::hana::accessors<T>()))::value;

/// Type of member I of T.
template <described T, std::size_t I>
using member_type = std::remove_cvref_t<decltype(boost::hana::second(
    boost::hana::at_c<I>(boost::hana::accessors<T>()))(std::declval<T&>()))>;

namespace detail {
// The name's characters, copied into pushwire's own constant: a string_view into Hana's
// string storage can end up in a discarded COMDAT section under g++-12 (a link error).
template <described T, std::size_t I>
inline constexpr auto member_name_chars = [] {
  using name_t = decltype(boost::hana::first(boost::hana::at_c<I>(boost::hana::accessors<T>())));
  constexpr std::size_t n = decltype(boost::hana::length(std::declval<name_t>()))::value;
  const char* src = boost::hana::to<const char*>(name_t{});
  std::array<char, n + 1> a{};
  for (std::size_t i = 0; i < n; ++i) a[i] = src[i];
  return a;
}();
}  // namespace detail

/// Name of member I of T, as written in its description.
template <described T, std::size_t I>
inline constexpr std::string_view member_name{detail::member_name_chars<T, I>.data(),
                                              detail::member_name_chars<T, I>.size() - 1};

/// Member I of v (const or mutable as v is).
template <std::size_t I, class S>
constexpr decltype(auto) member(S&& v) {
  using T = std::remove_cvref_t<S>;
  return boost::hana::second(boost::hana::at_c<I>(boost::hana::accessors<T>()))(
      static_cast<S&&>(v));
}

/// Calls f(std::integral_constant<std::size_t, I>{}) for I = 0 .. member_count<T>-1, in order.
template <described T, class F>
constexpr void for_each_member_index(F&& f) {
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (f(std::integral_constant<std::size_t, I>{}), ...);
  }(std::make_index_sequence<member_count<T>>{});
}

template <described T>
constexpr bool equal(const T& a, const T& b);  // defined in codec.hpp

}  // namespace pushwire::wire

#define PUSHWIRE_STRUCT_MEMBER_(TYPE, m) PUSHWIRE_PP_DROP_BACK m PUSHWIRE_PP_BACK m{};
#define PUSHWIRE_STRUCT_ACCESSOR_(TYPE, m)                                     \
  ::boost::hana::make_pair(                                                    \
      BOOST_HANA_STRING(PUSHWIRE_PP_STRINGIZE(PUSHWIRE_PP_BACK m)),            \
      ::pushwire::wire::detail::member_ptr<decltype(&TYPE::PUSHWIRE_PP_BACK m), \
                                           &TYPE::PUSHWIRE_PP_BACK m>{})

/// Declares and registers the members of TYPE; see the top of this header.
#define PUSHWIRE_STRUCT(TYPE, ...)                                                        \
  PUSHWIRE_PP_FOR_EACH(PUSHWIRE_STRUCT_MEMBER_, TYPE, __VA_ARGS__)                        \
  struct hana_accessors_impl {                                                            \
    static constexpr auto apply() {                                                       \
      return ::boost::hana::make_tuple(                                                   \
          PUSHWIRE_PP_FOR_EACH_COMMA(PUSHWIRE_STRUCT_ACCESSOR_, TYPE, __VA_ARGS__));      \
    }                                                                                     \
  };                                                                                      \
  friend constexpr bool operator==(const TYPE& a, const TYPE& b) {                        \
    return ::pushwire::wire::equal(a, b);                                                 \
  }                                                                                       \
  static_assert(true, "")

/// A described struct with no members (e.g. a request that carries no data).
#define PUSHWIRE_EMPTY_STRUCT(TYPE)                                                       \
  struct hana_accessors_impl {                                                            \
    static constexpr auto apply() { return ::boost::hana::make_tuple(); }                 \
  };                                                                                      \
  friend constexpr bool operator==(const TYPE&, const TYPE&) { return true; }             \
  static_assert(true, "")
