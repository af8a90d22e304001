// Human-readable text and JSON for described structs, derived from their PUSHWIRE_STRUCT.
//
// Text: one "name: value" line per field, nested structs flattened, arrays of structs as
// "name[i]:" blocks, byte strings as a hex dump. 64-bit integers print in hex, others in decimal,
// enumerations as "Name (0x…)". JSON: one object; integers (flags 0/1, enumerations by value) as
// JSON integers, octets as "aa:bb:…" (IP addresses as 10.0.0.1, fd00::1), byte strings as a hex
// string, arrays as arrays. Header keys: wire/keys.hpp.
#pragma once

#include <cstdint>
#include <cstdio>
#include <ostream>
#include <span>
#include <string>
#include <type_traits>

#include <pushwire/wire/codec.hpp>
#include <pushwire/wire/hex.hpp>
#include <pushwire/wire/json.hpp>
#include <pushwire/wire/keys.hpp>

namespace pushwire::wire {

/// The value passed for a count row while visiting fields.
struct count_value {
  std::uint64_t n;
};

/// Calls f(name, value) for member I of v: nested structs recursively, a counted<> as its count
/// (a count_value) and then its view, anything else as the member itself.
template <std::size_t I, described T, class F>
void visit_member(const T& v, F&& f) {
  using M = member_type<T, I>;
  const M& m = member<I>(v);
  if constexpr (field_codec<M>::kind == field_kind::record) {
    for_each_member_index<M>([&](auto j) { visit_member<j.value>(m, f); });
  } else if constexpr (requires { M::count_name; }) {
    f(M::count_name, count_value{m.size()});
    f(member_name<T, I>, static_cast<const typename M::view_type&>(m));
  } else if constexpr (requires { typename M::view_type; }) {
    f(member_name<T, I>, static_cast<const typename M::view_type&>(m));
  } else {
    f(member_name<T, I>, m);
  }
}

/// visit_member for every member of v, in wire order.
template <described T, class F>
void visit_fields(const T& v, F&& f) {
  for_each_member_index<T>([&](auto i) { visit_member<i.value>(v, f); });
}

namespace detail {

inline std::string hex_number(std::uint64_t v, int digits) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%0*llx", digits, static_cast<unsigned long long>(v));
  return buf;
}

template <class E>
std::string enum_text(E e) {
  const auto raw = static_cast<std::uint64_t>(static_cast<std::underlying_type_t<E>>(e));
  const std::string num = hex_number(raw, static_cast<int>(2 * sizeof(E)));
  const std::string_view name = enum_name(e);
  return name.empty() ? num : std::string{name} + " (" + num + ")";
}

template <class M>
std::string scalar_text(const M& m) {
  if constexpr (std::is_enum_v<M>) {
    return enum_text(m);
  } else if constexpr (std::is_same_v<M, bool>) {
    return m ? "1" : "0";
  } else if constexpr (std::is_unsigned_v<M>) {
    return sizeof(M) == 8 ? hex_number(m, 16) : std::to_string(m);
  } else if constexpr (std::is_same_v<M, count_value>) {
    return std::to_string(m.n);
  } else if constexpr (requires { typename M::field_type; M::value; }) {  // constant<>
    return scalar_text(static_cast<typename M::field_type>(M::value));
  } else if constexpr (requires { typename M::field_type; }) {  // reserved<>
    return "0";
  } else if constexpr (requires { m.value; }) {  // uint_n<>, bits<>
    return scalar_text(m.value);
  } else if constexpr (is_ip_address<M>) {
    return address_text(m);
  } else {  // std::array<std::uint8_t, N>
    std::string s;
    for (std::size_t i = 0; i < m.size(); ++i) {
      if (i) s += ':';
      s += hex_number(m[i], 2).substr(2);
    }
    return s;
  }
}

template <class M>
void scalar_json(json_writer& w, const M& m) {
  if constexpr (std::is_enum_v<M>) {
    w.uint(static_cast<std::uint64_t>(static_cast<std::underlying_type_t<M>>(m)));
  } else if constexpr (std::is_same_v<M, bool>) {
    w.uint(m ? 1 : 0);
  } else if constexpr (std::is_unsigned_v<M>) {
    w.uint(m);
  } else if constexpr (std::is_same_v<M, count_value>) {
    w.uint(m.n);
  } else if constexpr (requires { typename M::field_type; M::value; }) {
    scalar_json(w, static_cast<typename M::field_type>(M::value));
  } else if constexpr (requires { typename M::field_type; }) {
    w.uint(0);
  } else if constexpr (requires { m.value; }) {
    scalar_json(w, m.value);
  } else {
    w.string(scalar_text(m));
  }
}

template <class V>
concept byte_view = std::is_same_v<V, std::span<const std::byte>>;
template <class V>
concept element_view = requires(const V& v) { typename V::value_type; v.wire_backed(); };

template <class T>
void print_fields(std::string& out, const T& v, int indent);

template <class T>
void json_object(json_writer& w, const T& v);

struct text_visitor {
  std::string& out;
  int indent;
  template <class V>
  void operator()(std::string_view name, const V& v) const {
    out.append(static_cast<std::size_t>(indent), ' ');
    out += name;
    if constexpr (byte_view<V>) {
      out += ": " + std::to_string(v.size()) + (v.size() == 1 ? " byte\n" : " bytes\n");
      out += hexdump(v, indent + 2);
    } else if constexpr (element_view<V>) {
      using E = typename V::value_type;
      if constexpr (described<E>) {
        out += ": " + std::to_string(v.size()) + (v.size() == 1 ? " entry\n" : " entries\n");
        for (std::size_t i = 0; i < v.size(); ++i) {
          out.append(static_cast<std::size_t>(indent + 2), ' ');
          out += '[' + std::to_string(i) + "]\n";
          print_fields(out, v[i], indent + 4);
        }
      } else {
        out += ": [";
        for (std::size_t i = 0; i < v.size(); ++i) {
          if (i) out += ", ";
          out += scalar_text(v[i]);
        }
        out += "]\n";
      }
    } else {
      out += ": " + scalar_text(v) + "\n";
    }
  }
};

struct json_visitor {
  json_writer& w;
  template <class V>
  void operator()(std::string_view name, const V& v) const {
    w.key(name);
    if constexpr (byte_view<V>) {
      w.string(to_hex(v));
    } else if constexpr (element_view<V>) {
      w.begin_array();
      for (std::size_t i = 0; i < v.size(); ++i) {
        if constexpr (described<typename V::value_type>)
          json_object(w, v[i]);
        else
          scalar_json(w, v[i]);
      }
      w.end_array();
    } else {
      scalar_json(w, v);
    }
  }
};

template <class T>
void print_fields(std::string& out, const T& v, int indent) {
  visit_fields(v, text_visitor{out, indent});
}

template <class T>
void json_object(json_writer& w, const T& v) {
  w.begin_object();
  visit_fields(v, json_visitor{w});
  w.end_object();
}

}  // namespace detail

/// Text lines for the fields of v, each indented by `indent` spaces.
template <described T>
std::string to_text(const T& v, int indent = 0) {
  std::string s;
  detail::print_fields(s, v, indent);
  return s;
}

/// Text lines for member I of v only (for printers that treat some members specially).
template <std::size_t I, described T>
std::string member_text(const T& v, int indent = 0) {
  std::string s;
  visit_member<I>(v, detail::text_visitor{s, indent});
  return s;
}

/// Writes v as one JSON object.
template <described T>
void write_json(json_writer& w, const T& v) {
  detail::json_object(w, v);
}

/// Writes member I of v as keys of the object `w` has open.
template <std::size_t I, described T>
void write_json_member(json_writer& w, const T& v) {
  visit_member<I>(v, detail::json_visitor{w});
}

/// v as a one-line JSON object.
template <described T>
std::string to_json(const T& v) {
  std::string s;
  json_writer w{s};
  write_json(w, v);
  return s;
}

/// Streams to_text(v).
template <described T>
std::ostream& print(std::ostream& os, const T& v) {
  return os << to_text(v);
}

/// Writes h's fields into the open object under their keys (field_key, wire/keys.hpp: e.g.
/// "infiniband.bth.psn", "infiniband.immdt"). Values as in to_json; set_by_key reads them back.
template <described H>
void write_json_header(json_writer& w, const H& h) {
  visit_fields(h, [&](std::string_view field, const auto& v) {
    w.key(field_key<H>(field));
    detail::scalar_json(w, v);
  });
}

}  // namespace pushwire::wire
