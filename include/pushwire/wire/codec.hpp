// Encode, decode, size and equality of described structs, derived from their PUSHWIRE_STRUCT.
//
//   result<T>           decode<T>(bytes)         exactly one T; longer input is trailing_bytes
//   result<T>           decode_prefix<T>(bytes)  a fixed-size T at the front; the rest is ignored
//   result<std::size_t> encode(v, out)           bytes written
//   read<T, "name">(p), write<T, "name">(p, v)   one member in place
//   std::size_t         wire_size(v)             what encode writes
//   bool                equal(a, b)              field by field (views compare their elements)
//
// Decoders never allocate and never throw; on error the result holds no value. Encoders validate
// what decoders check (a value that encodes also decodes to an equal value); on error the
// contents of `out` are unspecified.
//
// A described struct may add semantic checks as `static constexpr wire::error wire_check(const T&)`,
// returning `wire::field_error<T>(code, "member")` or `{}`; decode runs it after the layout checks,
// encode before writing.
#pragma once

#include <algorithm>
#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <ranges>
#include <span>
#include <string_view>
#include <type_traits>

#include <pushwire/wire/array_view.hpp>
#include <pushwire/wire/detail/copy.hpp>
#include <pushwire/wire/endian.hpp>
#include <pushwire/wire/errc.hpp>
#include <pushwire/wire/fields.hpp>
#include <pushwire/wire/names.hpp>
#include <pushwire/wire/result.hpp>
#include <pushwire/wire/struct.hpp>

namespace pushwire::wire {

/// Where a member sits in its struct's fixed part.
struct placement {
  bool located = false;       ///< true: bits<>/flag<> at a fixed byte; false: the next whole bytes
  std::size_t byte = 0;       ///< located: first byte of the container
  std::size_t size = 0;       ///< bytes the member occupies in the fixed part (a located container)
  unsigned msb = 0, lsb = 0;  ///< located: bit range within the container (0 = its last bit)
};

/// What a member is, for tables, printing and the dissector.
enum class field_kind : std::uint8_t {
  uint,         ///< unsigned integer
  flag,         ///< one bit, as bool
  enumeration,  ///< unsigned integer with value names
  octets,       ///< fixed number of opaque bytes
  reserved,     ///< must be zero
  constant,     ///< must equal a fixed value
  count,        ///< element count of the array that follows
  array,        ///< counted or trailing array of elements
  bytes,        ///< counted or trailing byte string
  record,       ///< a nested described struct (tables flatten it)
};
/// As the spec tables print them.
inline constexpr std::array<named_value, 10> field_kind_names{{
    {field_kind::uint, "uint"}, {field_kind::flag, "flag"}, {field_kind::enumeration, "enum"},
    {field_kind::octets, "octets"}, {field_kind::reserved, "reserved"}, {field_kind::constant, "constant"},
    {field_kind::count, "count"}, {field_kind::array, "array"}, {field_kind::bytes, "bytes"},
    {field_kind::record, "record"},
}};
constexpr std::span<const named_value> wire_enum_names(field_kind) { return field_kind_names; }

/// Codec of one member type M; specialised below for every type fields.hpp lists.
template <class M>
struct field_codec {
  static_assert(sizeof(M) == 0, "not a wire member type: see pushwire/wire/fields.hpp");
};

template <class M>
concept variable_member = field_codec<M>::variable;

namespace detail {

template <class M>
constexpr bool is_zero(const M& v) {
  return v == M{};
}

// The sequential scalar types share this shape: N bytes, big-endian, value -> raw and back.
template <std::size_t N, unsigned Bits, field_kind Kind>
struct scalar_codec_base {
  static constexpr bool variable = false;
  static constexpr placement place{false, 0, N, 0, 0};
  static constexpr unsigned value_bits = Bits;
  static constexpr field_kind kind = Kind;
  static constexpr std::size_t size = N;
};

}  // namespace detail

template <class M>
  requires(std::unsigned_integral<M> && !std::same_as<M, bool>)
struct field_codec<M> : detail::scalar_codec_base<sizeof(M), 8 * sizeof(M), field_kind::uint> {
  static constexpr bool validates = false;
  static constexpr error get(const std::byte* at, M& out) {
    out = static_cast<M>(load_be<sizeof(M)>(at));
    return {};
  }
  static constexpr error put(std::byte* at, const M& v) {
    store_be<sizeof(M)>(at, v);
    return {};
  }
};

template <unsigned B>
struct field_codec<uint_n<B>> : detail::scalar_codec_base<B / 8, B, field_kind::uint> {
  static constexpr bool validates = false;
  static constexpr error get(const std::byte* at, uint_n<B>& out) {
    out.value = static_cast<typename uint_n<B>::value_type>(load_be<B / 8>(at));
    return {};
  }
  static constexpr error put(std::byte* at, const uint_n<B>& v) {
    if constexpr (B < 64)
      if (static_cast<std::uint64_t>(v.value) >> B) return {errc::invalid_field};
    store_be<B / 8>(at, v.value);
    return {};
  }
};

template <class E>
  requires std::is_enum_v<E>
struct field_codec<E>
    : detail::scalar_codec_base<sizeof(E), 8 * sizeof(E), field_kind::enumeration> {
  using U = std::underlying_type_t<E>;
  static_assert(std::is_unsigned_v<U>, "wire enums have an unsigned underlying type");
  static constexpr bool validates = false;
  static constexpr error get(const std::byte* at, E& out) {
    out = static_cast<E>(load_be<sizeof(E)>(at));
    return {};
  }
  static constexpr error put(std::byte* at, const E& v) {
    store_be<sizeof(E)>(at, static_cast<U>(v));
    return {};
  }
};

template <std::size_t N>
struct field_codec<std::array<std::uint8_t, N>>
    : detail::scalar_codec_base<N, 8 * N, field_kind::octets> {
  static constexpr bool validates = false;
  static constexpr error get(const std::byte* at, std::array<std::uint8_t, N>& out) {
    if (!std::is_constant_evaluated()) {
      std::memcpy(out.data(), at, N);  // a byte loop: the compiler must assume out aliases at
      return {};
    }
    for (std::size_t i = 0; i < N; ++i) out[i] = static_cast<std::uint8_t>(at[i]);
    return {};
  }
  static constexpr error put(std::byte* at, const std::array<std::uint8_t, N>& v) {
    if (!std::is_constant_evaluated()) {
      std::memcpy(at, v.data(), N);
      return {};
    }
    for (std::size_t i = 0; i < N; ++i) at[i] = static_cast<std::byte>(v[i]);
    return {};
  }
};

template <std::size_t N>
struct field_codec<ip_address<N>> : field_codec<std::array<std::uint8_t, N>> {};

template <std::size_t Byte, unsigned Msb, unsigned Lsb, class V>
struct field_codec<bits<Byte, Msb, Lsb, V>> {
  using F = bits<Byte, Msb, Lsb, V>;
  static constexpr std::size_t container = Msb / 8 + 1;
  static constexpr unsigned width = Msb - Lsb + 1;
  static constexpr std::uint64_t mask = width == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << width) - 1;
  static constexpr bool variable = false;
  static constexpr bool validates = false;
  static constexpr placement place{true, Byte, container, Msb, Lsb};
  static constexpr unsigned value_bits = width;
  static constexpr field_kind kind = std::is_same_v<V, bool> ? field_kind::flag
                                     : std::is_enum_v<V>     ? field_kind::enumeration
                                                             : field_kind::uint;
  static constexpr std::uint64_t raw(V v) {
    if constexpr (std::is_enum_v<V>)
      return static_cast<std::uint64_t>(static_cast<std::underlying_type_t<V>>(v));
    else
      return static_cast<std::uint64_t>(v);
  }
  static constexpr error get(const std::byte* at, F& out) {
    const std::uint64_t r = (load_be<container>(at) >> Lsb) & mask;
    if constexpr (std::is_same_v<V, bool>)
      out.value = r != 0;
    else
      out.value = static_cast<V>(r);
    return {};
  }
  static constexpr error put(std::byte* at, const F& v) {
    const std::uint64_t r = raw(v.value);
    if (r & ~mask) return {errc::invalid_field};
    const std::uint64_t c = load_be<container>(at);
    store_be<container>(at, (c & ~(mask << Lsb)) | (r << Lsb));
    return {};
  }
};

template <class F>
struct field_codec<reserved<F>> {
  using inner = field_codec<F>;
  static constexpr bool variable = false;
  static constexpr bool validates = true;
  static constexpr placement place = inner::place;
  static constexpr unsigned value_bits = inner::value_bits;
  static constexpr field_kind kind = field_kind::reserved;
  static constexpr error get(const std::byte* at, reserved<F>&) {
    F v{};
    (void)inner::get(at, v);
    if (!detail::is_zero(v)) return {errc::reserved_nonzero};
    return {};
  }
  static constexpr error put(std::byte* at, const reserved<F>&) { return inner::put(at, F{}); }
};

template <class F, auto Value, errc E>
struct field_codec<constant<F, Value, E>> {
  using inner = field_codec<F>;
  static constexpr bool variable = false;
  static constexpr bool validates = true;
  static constexpr placement place = inner::place;
  static constexpr unsigned value_bits = inner::value_bits;
  static constexpr field_kind kind = field_kind::constant;
  static constexpr error get(const std::byte* at, constant<F, Value, E>&) {
    F v{};
    (void)inner::get(at, v);
    if (!(v == static_cast<F>(Value))) return {E};
    return {};
  }
  static constexpr error put(std::byte* at, const constant<F, Value, E>&) {
    return inner::put(at, static_cast<F>(Value));
  }
};

// ---------------------------------------------------------------------------------------------
// Layout of a described struct: member offsets, fixed size, overlap/gap checks.

template <described T>
struct layout {
  static constexpr std::size_t count = member_count<T>;
  template <std::size_t I>
  using codec = field_codec<member_type<T, I>>;

  static constexpr auto places = []<std::size_t... I>(std::index_sequence<I...>) {
    return std::array<placement, count>{codec<I>::place...};
  }(std::make_index_sequence<count>{});
  static constexpr auto variable_flags = []<std::size_t... I>(std::index_sequence<I...>) {
    return std::array<bool, count>{codec<I>::variable...};
  }(std::make_index_sequence<count>{});

  /// Byte offset of each member (located: its container) from the start of T.
  static constexpr std::array<std::size_t, count> offsets = [] {
    std::array<std::size_t, count> off{};
    std::size_t end = 0;
    for (std::size_t i = 0; i < count; ++i) {
      const placement& p = places[i];
      off[i] = p.located ? p.byte : end;
      end = std::max(end, off[i] + p.size);
    }
    return off;
  }();

  /// Bytes before the variable part (all of T when it has none).
  static constexpr std::size_t fixed_size = [] {
    std::size_t end = 0;
    for (std::size_t i = 0; i < count; ++i) end = std::max(end, offsets[i] + places[i].size);
    return end;
  }();

  /// True when T's last member is counted<> or rest<>.
  static constexpr bool variable = count > 0 && variable_flags[count - 1];

  static constexpr bool only_last_variable = [] {
    for (std::size_t i = 0; i + 1 < count; ++i)
      if (variable_flags[i]) return false;
    return true;
  }();

  // 0: every bit of the fixed part has exactly one member; 1: two members share a bit; 2: gap.
  static constexpr int coverage = [] {
    std::array<unsigned char, fixed_size * 8 + 1> used{};
    for (std::size_t i = 0; i < count; ++i) {
      const placement& p = places[i];
      const std::size_t first = offsets[i] * 8;
      for (std::size_t b = 0; b < p.size * 8; ++b) {
        if (p.located) {
          // container bit k (0 = last bit) sits at absolute bit first + size*8 - 1 - k
          const std::size_t k = p.size * 8 - 1 - b;
          if (k < p.lsb || k > p.msb) continue;
        }
        if (used[first + b]++) return 1;
      }
    }
    for (std::size_t b = 0; b < fixed_size * 8; ++b)
      if (!used[b]) return 2;
    return 0;
  }();

  static_assert(only_last_variable, "PUSHWIRE_STRUCT: only the last member may be variable");
  static_assert(coverage != 1, "PUSHWIRE_STRUCT: two members share a bit");
  static_assert(coverage != 2, "PUSHWIRE_STRUCT: a bit of the fixed part belongs to no member");
  static_assert([] {
    for (const placement& p : places)
      if (p.located && p.msb >= p.size * 8) return false;
    return true;
  }(), "PUSHWIRE_STRUCT: a bits<> field does not fit its container");
};

/// Bytes before T's variable part (all of T for a fixed-size T).
template <described T>
inline constexpr std::size_t fixed_size = layout<T>::fixed_size;

/// True when T has no counted<>/rest<> member, so its size is fixed_size<T>.
template <described T>
inline constexpr bool fixed_size_struct = !layout<T>::variable;

/// Byte offset of member `name` of T (npos-like size_t(-1) when T has none).
template <described T>
constexpr std::size_t offset_of(std::string_view name) {
  std::size_t r = static_cast<std::size_t>(-1);
  for_each_member_index<T>([&](auto i) {
    if (member_name<T, i.value> == name) r = layout<T>::offsets[i.value];
  });
  return r;
}

/// Index of member `name` of T (member_count<T> when T has none).
template <described T>
constexpr std::size_t index_of(std::string_view name) {
  std::size_t r = member_count<T>;
  for_each_member_index<T>([&](auto i) {
    if (member_name<T, i.value> == name) r = i.value;
  });
  return r;
}

/// The error a wire_check returns for member `name` of T.
template <described T>
constexpr error field_error(errc code, std::string_view name) {
  const std::size_t off = offset_of<T>(name);
  return {code, off == static_cast<std::size_t>(-1) ? 0 : off, name};
}

namespace detail {

template <class T>
concept has_wire_check = requires(const T& v) {
  { T::wire_check(v) } -> std::same_as<error>;
};

constexpr error at(error e, std::size_t base, std::string_view name) {
  e.offset += base;
  if (e.field.empty()) e.field = name;
  return e;
}

// Calls op(codec, byte offset, member) for each fixed member of v in wire order, stopping at the
// first error, which it returns located at the member (offset, and name unless it has one).
template <described T, class S, class Op>
constexpr error for_fixed_members(S& v, Op op) {
  error e{};
  for_each_member_index<T>([&](auto i) {
    constexpr std::size_t I = i.value;
    using C = typename layout<T>::template codec<I>;
    if constexpr (!C::variable) {
      if (e.code != errc{}) return;
      constexpr std::size_t off = layout<T>::offsets[I];
      if (error r = op(C{}, off, member<I>(v)); r.code != errc{}) e = at(r, off, member_name<T, I>);
    }
  });
  return e;
}

template <described T>
constexpr error decode_fixed_members(const std::byte* base, T& v) {
  return for_fixed_members<T>(v, [&](auto c, std::size_t off, auto& m) { return c.get(base + off, m); });
}

template <described T>
constexpr error encode_fixed_members(std::byte* base, const T& v) {
  // A located member merges its bits into its container, which is zeroed first: the output
  // never depends on what the buffer held, and no byte of it is read before it is written (an
  // uninitialised buffer is fine; tests/wire/codec_test.cpp checks it in a constant expression).
  for (std::size_t i = 0; i < layout<T>::count; ++i)
    if (layout<T>::places[i].located)
      for (std::size_t k = 0; k < layout<T>::places[i].size; ++k) base[layout<T>::offsets[i] + k] = std::byte{0};
  return for_fixed_members<T>(v, [&](auto c, std::size_t off, const auto& m) { return c.put(base + off, m); });
}

template <described T>
constexpr error check(const T& v) {
  if constexpr (has_wire_check<T>)
    return T::wire_check(v);
  else
    return {};
}

template <described T>
constexpr bool struct_validates() {
  if (has_wire_check<T>) return true;
  bool any = false;
  for_each_member_index<T>([&](auto i) {
    any = any || layout<T>::template codec<i.value>::validates;
  });
  return any;
}

}  // namespace detail

// A fixed-size described struct nested as a member or used as an array element.
template <described R>
struct field_codec<R> {
  static_assert(!layout<R>::variable, "a nested described struct must have a fixed size");
  static constexpr bool variable = false;
  static constexpr bool validates = detail::struct_validates<R>();
  static constexpr placement place{false, 0, layout<R>::fixed_size, 0, 0};
  static constexpr unsigned value_bits = 8 * layout<R>::fixed_size;
  static constexpr field_kind kind = field_kind::record;
  static constexpr error get(const std::byte* at, R& out) {
    if (auto e = detail::decode_fixed_members(at, out); e.code != errc{}) return e;
    return detail::check(out);
  }
  static constexpr error put(std::byte* at, const R& v) {
    if (auto e = detail::check(v); e.code != errc{}) return e;
    return detail::encode_fixed_members(at, v);
  }
};

namespace detail {

// Shared by counted<> and rest<>: element size, decoding the validated tail into a view,
// encoding a view.
template <class Elem>
struct tail_codec {
  static constexpr bool is_bytes = std::is_same_v<Elem, std::byte>;
  using view = view_for<Elem>;
  static constexpr std::size_t elem_size = [] {
    if constexpr (is_bytes)
      return std::size_t{1};
    else
      return field_codec<Elem>::place.size;
  }();

  static constexpr Elem decode_one(const std::byte* p) {
    Elem x{};
    (void)field_codec<Elem>::get(p, x);
    return x;
  }

  // n elements at whole[tail_off..]: validate each (when Elem can be invalid) and make a view.
  static constexpr error make_view(std::span<const std::byte> whole, std::size_t tail_off,
                                   std::size_t n, view& out) {
    const std::byte* p = whole.data() + tail_off;
    if constexpr (is_bytes) {
      out = view{p, n};
    } else {
      if constexpr (field_codec<Elem>::validates) {
        for (std::size_t i = 0; i < n; ++i) {
          Elem x{};
          if (auto e = field_codec<Elem>::get(p + i * elem_size, x); e.code != errc{})
            return at(e, tail_off + i * elem_size, {});
        }
      }
      out = view::from_wire(p, n, elem_size, &decode_one);
    }
    return {};
  }

  // dst is exactly the tail's bytes (wire_size guarantees it; the clamps prove it to compilers).
  static constexpr error put_elems(std::span<std::byte> dst, std::size_t base, const view& v) {
    if constexpr (is_bytes) {
      copy_bytes(dst.data(), v.data(), std::min(v.size(), dst.size()));
    } else if (v.wire_backed()) {
      copy_bytes(dst.data(), v.wire_bytes().data(), std::min(v.wire_bytes().size(), dst.size()));
    } else {
      for (std::size_t i = 0; i < v.size(); ++i)
        if (auto e = field_codec<Elem>::put(dst.data() + i * elem_size, v[i]); e.code != errc{})
          return at(e, base + i * elem_size, {});
    }
    return {};
  }
};

}  // namespace detail

template <class Count, class Elem, fixed_string Name, std::size_t Min>
struct field_codec<counted<Count, Elem, Name, Min>> {
  using M = counted<Count, Elem, Name, Min>;
  using tail = detail::tail_codec<Elem>;
  static constexpr bool variable = true;
  static constexpr bool validates = true;
  static constexpr placement place{false, 0, sizeof(Count), 0, 0};  // the count prefix
  static constexpr unsigned value_bits = 8 * sizeof(Count);
  static constexpr field_kind kind = tail::is_bytes ? field_kind::bytes : field_kind::array;

  static constexpr std::size_t tail_size(const M& v) { return v.size() * tail::elem_size; }

  // whole = the entire input; the count is at prefix_off, the elements start at tail_off.
  static constexpr error get_tail(std::span<const std::byte> whole, std::size_t prefix_off,
                                  std::size_t tail_off, M& out) {
    const std::uint64_t n = load_be<sizeof(Count)>(whole.data() + prefix_off);
    if (n < Min) return {errc::zero_count, prefix_off, Name.view()};
    const std::uint64_t have = whole.size() - tail_off;
    const std::uint64_t need = n * tail::elem_size;
    if (have != need) {
      // Whole elements but not `n` of them: the count is wrong. Otherwise the frame ends inside
      // an element (shorter than the count implies) or carries a partial extra one (longer).
      if (!tail::is_bytes && have % tail::elem_size == 0)
        return {errc::count_mismatch, prefix_off, Name.view()};
      return {have < need ? errc::truncated : errc::trailing_bytes,
              have < need ? whole.size() : tail_off + need, {}};
    }
    typename M::view_type v{};
    if (auto e = tail::make_view(whole, tail_off, static_cast<std::size_t>(n), v); e.code != errc{})
      return e;
    out = M{v};
    return {};
  }

  static constexpr error put_tail(std::span<std::byte> whole, std::size_t prefix_off,
                                  std::size_t tail_off, const M& v) {
    if (v.size() < Min) return {errc::zero_count, prefix_off, Name.view()};
    if (v.size() > std::numeric_limits<Count>::max()) return {errc::too_large, prefix_off, Name.view()};
    store_be<sizeof(Count)>(whole.data() + prefix_off, v.size());
    return tail::put_elems(whole.subspan(tail_off), tail_off, v);
  }
};

template <class Elem, std::size_t Min>
struct field_codec<rest<Elem, Min>> {
  using M = rest<Elem, Min>;
  using tail = detail::tail_codec<Elem>;
  static constexpr bool variable = true;
  static constexpr bool validates = true;
  static constexpr placement place{false, 0, 0, 0, 0};
  static constexpr unsigned value_bits = 0;
  static constexpr field_kind kind = tail::is_bytes ? field_kind::bytes : field_kind::array;

  static constexpr std::size_t tail_size(const M& v) { return v.size() * tail::elem_size; }

  static constexpr error get_tail(std::span<const std::byte> whole, std::size_t,
                                  std::size_t tail_off, M& out) {
    const std::size_t have = whole.size() - tail_off;
    const std::size_t n = have / tail::elem_size;
    if (have % tail::elem_size != 0)
      return {errc::trailing_bytes, tail_off + n * tail::elem_size, {}};
    if (n < Min) return {errc::zero_count, tail_off, {}};
    typename M::view_type v{};
    if (auto e = tail::make_view(whole, tail_off, n, v); e.code != errc{}) return e;
    out = M{v};
    return {};
  }

  static constexpr error put_tail(std::span<std::byte> whole, std::size_t, std::size_t tail_off,
                                  const M& v) {
    if (v.size() < Min) return {errc::zero_count, tail_off, {}};
    return tail::put_elems(whole.subspan(tail_off), tail_off, v);
  }
};

// ---------------------------------------------------------------------------------------------

/// Bytes encode(v, ...) writes.
template <described T>
constexpr std::size_t wire_size(const T& v) {
  if constexpr (layout<T>::variable) {
    constexpr std::size_t I = layout<T>::count - 1;
    return layout<T>::fixed_size + layout<T>::template codec<I>::tail_size(member<I>(v));
  } else {
    (void)v;
    return layout<T>::fixed_size;
  }
}

/// Decodes exactly one T from `in` into `v` (members not in T's description are untouched):
/// errc::truncated when `in` is shorter than T's fixed part or than its counts/sizes imply,
/// errc::trailing_bytes when longer; see errc for the rest. On error `v` is unspecified.
template <described T>
constexpr error decode_into(std::span<const std::byte> in, T& v) {
  using L = layout<T>;
  if (in.size() < L::fixed_size) return error{errc::truncated, in.size(), {}};
  if (auto e = detail::decode_fixed_members(in.data(), v); e.code != errc{}) return e;
  if constexpr (L::variable) {
    constexpr std::size_t I = L::count - 1;
    if (auto e = L::template codec<I>::get_tail(in, L::offsets[I], L::fixed_size, member<I>(v)); e.code != errc{})
      return detail::at(e, 0, member_name<T, I>);
  } else if (in.size() > L::fixed_size) {
    return error{errc::trailing_bytes, L::fixed_size, {}};
  }
  return detail::check(v);
}

/// Decodes a fixed-size T from the front of `in` into `v`, ignoring what follows.
template <described T>
  requires fixed_size_struct<T>
constexpr error decode_prefix_into(std::span<const std::byte> in, T& v) {
  if (in.size() < fixed_size<T>) return error{errc::truncated, in.size(), {}};
  return wire::decode_into(in.first(fixed_size<T>), v);
}

/// Decodes exactly one T from `in` (see decode_into). The result holds no value on error.
template <described T>
constexpr result<T> decode(std::span<const std::byte> in) {
  T v{};
  if (auto e = wire::decode_into(in, v); e.code != errc{}) return e;
  return v;
}

/// An owning container about to be destroyed (a temporary vector or array).
template <class R>
concept expiring_buffer = std::ranges::contiguous_range<R> && !std::ranges::borrowed_range<R> &&
                          !std::is_lvalue_reference_v<R>;

/// A T with a counted<>/rest<> member views its input, so decoding it from a temporary buffer
/// would dangle: that is a compile error. Keep the buffer in a variable (or use msg::frame).
template <described T, class R>
  requires(layout<T>::variable && expiring_buffer<R>)
constexpr result<T> decode(R&&) = delete;

/// Decodes a fixed-size T from the front of `in`, ignoring what follows.
template <described T>
  requires fixed_size_struct<T>
constexpr result<T> decode_prefix(std::span<const std::byte> in) {
  T v{};
  if (auto e = wire::decode_prefix_into(in, v); e.code != errc{}) return e;
  return v;
}

/// Encodes v into the front of `out`; returns the number of bytes written (wire_size(v)).
template <described T>
constexpr result<std::size_t> encode(const T& v, std::span<std::byte> out) {
  using L = layout<T>;
  const std::size_t n = wire_size(v);
  if (out.size() < n) return error{errc::no_space, out.size(), {}};
  if (auto e = detail::check(v); e.code != errc{}) return e;
  if (auto e = detail::encode_fixed_members(out.data(), v); e.code != errc{}) return e;
  if constexpr (L::variable) {
    constexpr std::size_t I = L::count - 1;
    if (auto e = L::template codec<I>::put_tail(out.first(n), L::offsets[I], L::fixed_size,
                                                member<I>(v));
        e.code != errc{})
      return detail::at(e, 0, member_name<T, I>);
  }
  return n;
}

/// One member of a T whose encoding starts at `base` (at least fixed_size<T> readable bytes), read
/// from its place in T's description without decoding the rest: read<ipv4_header, "len">(p).
template <described T, fixed_string Name>
constexpr auto read(const std::byte* base) {
  constexpr std::size_t I = index_of<T>(Name.view());
  static_assert(I < member_count<T>, "read<T, Name>: T has no member of that name");
  using M = member_type<T, I>;
  static_assert(!field_codec<M>::variable, "read<T, Name>: a variable member has no fixed place");
  M m{};
  (void)field_codec<M>::get(base + layout<T>::offsets[I], m);
  return m;
}

/// Writes one member of a T encoded at `base` in its place, leaving the other members' bits as
/// they are: write<cell::header, "csn">(p, 3). errc::invalid_field when v is wider than the field.
template <described T, fixed_string Name, class V>
constexpr error write(std::byte* base, const V& v) {
  constexpr std::size_t I = index_of<T>(Name.view());
  static_assert(I < member_count<T>, "write<T, Name>: T has no member of that name");
  using M = member_type<T, I>;
  static_assert(!field_codec<M>::variable, "write<T, Name>: a variable member has no fixed place");
  return field_codec<M>::put(base + layout<T>::offsets[I], M(v));
}

/// A fixed-size T's encoding as an array (usable in constant expressions). Terminates if v
/// does not encode (e.g. a value wider than its field).
template <described T>
  requires fixed_size_struct<T>
constexpr std::array<std::byte, fixed_size<T>> to_bytes(const T& v) {
  std::array<std::byte, fixed_size<T>> out{};
  (void)encode(v, out).value();
  return out;
}

namespace detail {
template <class M>
constexpr bool member_equal(const M& a, const M& b) {
  if constexpr (requires { typename M::view_type; }) {
    using V = typename M::view_type;
    const V& x = a;
    const V& y = b;
    if constexpr (std::is_same_v<V, std::span<const std::byte>>)
      return std::ranges::equal(x, y);
    else
      return x == y;
  } else {
    return a == b;
  }
}
}  // namespace detail

template <described T>
constexpr bool equal(const T& a, const T& b) {
  bool eq = true;
  for_each_member_index<T>([&](auto i) {
    eq = eq && detail::member_equal(member<i.value>(a), member<i.value>(b));
  });
  return eq;
}

}  // namespace pushwire::wire
