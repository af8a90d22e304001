// Member types a PUSHWIRE_STRUCT may use, and where each one sits on the wire.
//
// Sequential members take the next whole bytes after the previous member, big-endian:
//   std::uint8_t/16/32/64_t       8/16/32/64-bit unsigned
//   uint_n<24>, uint_n<48>        24- or 48-bit unsigned (u24, u48)
//   an enum with such an underlying type (names via wire_enum_names, below)
//   std::array<std::uint8_t, N>   N opaque octets (e.g. a MAC)
//   ip_address<4>, ip_address<16> an IPv4 / IPv6 address: octets shown as 10.0.0.1 / fd00::1
//   another described struct      its fields, inline
//   reserved<F>, constant<F, V>   F's slot, with a fixed value
// Located members name their bits: bits<Byte, Msb, Lsb> is bits Msb..Lsb of the big-endian
// container that starts at byte Byte of the enclosing struct and is Msb/8+1 bytes long (bit 0 is
// the least significant bit of the container's last byte). flag<Byte, Bit> is a 1-bit bits.
// A sequential member after located ones starts after the last byte any earlier member touches.
// Every bit of the fixed part belongs to exactly one member; the codec rejects overlaps and gaps
// at compile time.
// Variable members come last, at most one: counted<Count, Elem, "count_name", Min> is a Count
// prefix followed by that many Elems; rest<Elem, Min> is Elems up to the end of the input.
#pragma once

#include <algorithm>
#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <ranges>
#include <span>
#include <string_view>
#include <type_traits>

#include <pushwire/wire/array_view.hpp>
#include <pushwire/wire/errc.hpp>
#include <pushwire/wire/names.hpp>

namespace pushwire::wire {

/// Smallest standard unsigned type holding `bits` bits (bool for 1 when asked).
template <unsigned Bits>
using uint_for = std::conditional_t<
    (Bits <= 8), std::uint8_t,
    std::conditional_t<(Bits <= 16), std::uint16_t,
                       std::conditional_t<(Bits <= 32), std::uint32_t, std::uint64_t>>>;

/// A sequential unsigned field of Bits bits (a multiple of 8, at most 64).
template <unsigned Bits>
struct uint_n {
  static_assert(Bits % 8 == 0 && Bits >= 8 && Bits <= 64);
  using value_type = uint_for<Bits>;
  value_type value{};
  constexpr uint_n() = default;
  constexpr uint_n(value_type v) : value(v) {}  // NOLINT: implicit by design
  constexpr operator value_type() const { return value; }  // NOLINT: compares as value_type
};
using u24 = uint_n<24>;
using u48 = uint_n<48>;

/// An IPv4 (N = 4) or IPv6 (N = 16) address: N octets in network order, like
/// std::array<std::uint8_t, N> (which it is), but printed and read in its usual text form.
template <std::size_t N>
struct ip_address : std::array<std::uint8_t, N> {
  static_assert(N == 4 || N == 16, "ip_address<N>: IPv4 (4) or IPv6 (16)");
};
using ipv4_address = ip_address<4>;
using ipv6_address = ip_address<16>;

/// Bits Msb..Lsb of the big-endian container at byte Byte (see the top of this header).
/// V is the value type: an unsigned integer (default: the smallest that fits), bool, or an enum.
template <std::size_t Byte, unsigned Msb, unsigned Lsb, class V = uint_for<Msb - Lsb + 1>>
struct bits {
  static_assert(Msb >= Lsb && Msb < 64, "bits<Byte, Msb, Lsb>: need 63 >= Msb >= Lsb");
  using value_type = V;
  static constexpr std::size_t byte = Byte;
  static constexpr unsigned msb = Msb, lsb = Lsb, width = Msb - Lsb + 1;
  V value{};
  constexpr bits() = default;
  constexpr bits(V v) : value(v) {}  // NOLINT: implicit by design
  constexpr operator V() const { return value; }  // NOLINT: compares as V
};

/// One bit: bit Bit (7 = most significant) of byte Byte.
template <std::size_t Byte, unsigned Bit>
using flag = bits<Byte, Bit, Bit, bool>;

/// F's slot, which must hold zero: decode fails with errc::reserved_nonzero otherwise, encode
/// writes zero. Holds no value.
template <class F>
struct reserved {
  using field_type = F;
  friend constexpr bool operator==(reserved, reserved) = default;
};

/// F's slot, which must hold Value: decode fails with OnMismatch otherwise, encode writes Value.
template <class F, auto Value, errc OnMismatch = errc::invalid_field>
struct constant {
  using field_type = F;
  static constexpr auto value = Value;
  static constexpr errc on_mismatch = OnMismatch;
  constexpr operator decltype(Value)() const { return Value; }  // NOLINT
  friend constexpr bool operator==(constant, constant) = default;
};

/// A string usable as a template argument (names the count of a counted<>).
template <std::size_t N>
struct fixed_string {
  char chars[N]{};
  constexpr fixed_string(const char (&s)[N]) { std::copy_n(s, N, chars); }  // NOLINT
  constexpr std::string_view view() const { return {chars, N - 1}; }
};

/// A contiguous range of Elem that a view may safely refer to: an lvalue, or a borrowed range
/// such as a span (a temporary vector would dangle, so it is rejected).
template <class R, class Elem>
concept viewable_range_of =
    std::ranges::contiguous_range<R> && std::ranges::sized_range<R> &&
    std::is_same_v<std::remove_cv_t<std::ranges::range_value_t<R>>, Elem> &&
    (std::is_lvalue_reference_v<R> || std::ranges::borrowed_range<R>);

namespace detail {
template <class Elem>
using view_for = std::conditional_t<std::is_same_v<Elem, std::byte>, std::span<const std::byte>,
                                    array_view<Elem>>;

// What counted<> and rest<> share: they are their view, built from a view or a range.
template <class Elem>
struct view_member : view_for<Elem> {
  using view_type = view_for<Elem>;
  using element_type = Elem;
  constexpr view_member() = default;
  constexpr view_member(view_type v) : view_type(v) {}  // NOLINT: implicit by design
  template <class R>
    requires(viewable_range_of<R, Elem> && !std::is_same_v<std::remove_cvref_t<R>, view_type>)
  constexpr view_member(R&& r)  // NOLINT: implicit by design
      : view_type(std::span<const Elem>(std::ranges::data(r), std::ranges::size(r))) {}
};
}  // namespace detail

/// A Count-typed element count followed by that many Elems (std::byte: a byte string).
/// CountName names the count in tables, prints and JSON; fewer than MinCount is errc::zero_count.
/// Behaves as the view: std::span<const std::byte> for bytes, array_view<Elem> otherwise.
template <class Count, class Elem, fixed_string CountName, std::size_t MinCount = 0>
struct counted : detail::view_member<Elem> {
  static_assert(std::is_unsigned_v<Count>, "the count of counted<> is an unsigned integer");
  using detail::view_member<Elem>::view_member;
  using count_type = Count;
  static constexpr std::string_view count_name = CountName.view();
  static constexpr std::size_t min_count = MinCount;
};

/// Elems filling the rest of the input; fewer than MinCount is errc::zero_count.
template <class Elem, std::size_t MinCount = 0>
struct rest : detail::view_member<Elem> {
  using detail::view_member<Elem>::view_member;
  static constexpr std::size_t min_count = MinCount;
};

/// A member's key where its header's key namespace (Wireshark's) spells it otherwise than the
/// C++ name, e.g. {"dsfield_dscp", "dsfield.dscp"}; a header lists them in `wireshark_keys`.
struct key_name {
  std::string_view member, key;
};

}  // namespace pushwire::wire
