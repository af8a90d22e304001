// Keys and text values of described headers: what pushwire-dump --json prints and pushwire-gen
// frame reads (spec/roce.md §12), derived from the PUSHWIRE_STRUCT descriptions.
//
//   key    "<H::wireshark>.<member>", H::wireshark being the header's Wireshark prefix; a member
//          named `value` is the prefix alone (Wireshark's infiniband.immdt); H::wireshark_keys
//          respells members Wireshark writes with dots (ip.dsfield.dscp). Nested structs are
//          flattened under the outer prefix.
//   value  integers, flags, enumerations: decimal or 0x hex, at most the field's width (an
//          enumeration also by a value name); octets: hex, optionally separated by ':' or '-'
//          (a MAC as 02:00:00:00:00:01); ip_address<4>: dotted decimal (10.0.0.1);
//          ip_address<16>: RFC 4291 text (fd00::1, printed as RFC 5952); a reserved or constant
//          field: only its required value.
#pragma once

#include <array>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>

#include <pushwire/wire/codec.hpp>
#include <pushwire/wire/hex.hpp>

namespace pushwire::wire {

/// What is wrong with one key=value.
enum class key_errc : std::uint8_t {
  unknown_key = 1,  ///< no field has this key
  malformed,        ///< the value is not in the field's form
  too_wide,         ///< the value does not fit in the field's bits
  invalid,          ///< a value the field cannot take (a reserved field not 0, a conflict)
};

/// The outcome of one key=value: no code when it was taken.
struct key_error {
  key_errc code{};
  std::string message;  ///< one line: the key, the value, and what the field takes
  explicit operator bool() const { return code != key_errc{}; }
};

namespace detail {

template <class H>
constexpr std::string_view key_member_name(std::string_view member) {
  if constexpr (requires { H::wireshark_keys; })
    for (const key_name& k : H::wireshark_keys)
      if (k.member == member) return k.key;
  return member;
}

// key == field_key<H>(member), without building the string.
template <class H>
constexpr bool key_is(std::string_view key, std::string_view member) {
  const std::string_view p = H::wireshark;
  if (member == "value") return key == p;
  return key.size() > p.size() + 1 && key.starts_with(p) && key[p.size()] == '.' &&
         key.substr(p.size() + 1) == key_member_name<H>(member);
}

template <class M>
inline constexpr bool is_ip_address = false;
template <std::size_t N>
inline constexpr bool is_ip_address<ip_address<N>> = true;
template <class M>
inline constexpr bool is_octets = false;
template <std::size_t N>
inline constexpr bool is_octets<std::array<std::uint8_t, N>> = true;

// Calls f(name, member&) for every leaf member of v, nested structs flattened.
template <described T, class F>
constexpr void for_each_leaf(T& v, F& f) {
  for_each_member_index<T>([&](auto i) {
    auto& m = member<i.value>(v);
    using M = std::remove_cvref_t<decltype(m)>;
    if constexpr (field_codec<M>::kind == field_kind::record)
      for_each_leaf(m, f);
    else
      f(member_name<T, i.value>, m);
  });
}

// Decimal or 0x hex; nullopt when malformed, `overflow` set when beyond 64 bits.
inline std::optional<std::uint64_t> parse_uint(std::string_view s, bool& overflow) {
  overflow = false;
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    s.remove_prefix(2);
    base = 16;
  }
  if (s.empty() || s[0] == '+' || s[0] == '-') return std::nullopt;
  std::uint64_t v = 0;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v, base);
  if (r.ptr != s.data() + s.size()) return std::nullopt;
  if (r.ec == std::errc::result_out_of_range) overflow = true;
  if (r.ec != std::errc{}) return std::nullopt;
  return v;
}

inline std::string key_value(std::string_view key, std::string_view text) {
  return std::string{key} + "=" + std::string{text} + ": ";
}

template <class M>
struct value_of {
  using type = M;
};
template <unsigned B>
struct value_of<uint_n<B>> {
  using type = typename uint_n<B>::value_type;
};
template <std::size_t Byte, unsigned Msb, unsigned Lsb, class V>
struct value_of<bits<Byte, Msb, Lsb, V>> {
  using type = V;
};

}  // namespace detail

/// An IPv4 address as dotted decimal.
inline std::string address_text(const ipv4_address& a) {
  return std::to_string(a[0]) + "." + std::to_string(a[1]) + "." + std::to_string(a[2]) + "." + std::to_string(a[3]);
}

/// An IPv6 address as RFC 5952 text: lowercase hex groups without leading zeros, the longest run
/// of two or more zero groups (the first of equals) as "::".
inline std::string address_text(const ipv6_address& a) {
  std::array<unsigned, 8> g{};
  for (std::size_t i = 0; i < 8; ++i) g[i] = static_cast<unsigned>(a[2 * i]) << 8 | a[2 * i + 1];
  std::size_t best = 8, best_len = 1;
  for (std::size_t i = 0; i < 8;) {
    std::size_t j = i;
    while (j < 8 && g[j] == 0) ++j;
    if (j - i > best_len) best = i, best_len = j - i;
    i = j == i ? i + 1 : j;
  }
  std::string s;
  char buf[8];
  for (std::size_t i = 0; i < 8; ++i) {
    if (i == best) {
      s += "::";
      i += best_len - 1;
      continue;
    }
    if (!s.empty() && s.back() != ':') s += ':';
    std::snprintf(buf, sizeof buf, "%x", g[i]);
    s += buf;
  }
  return s;
}

/// Dotted decimal: four numbers 0..255.
inline std::optional<ipv4_address> parse_ipv4(std::string_view s) {
  ipv4_address a{};
  for (std::size_t i = 0; i < 4; ++i) {
    const std::size_t dot = i < 3 ? s.find('.') : s.size();
    if (dot == std::string_view::npos) return std::nullopt;
    const std::string_view part = s.substr(0, dot);
    unsigned v = 0;
    const auto r = std::from_chars(part.data(), part.data() + part.size(), v, 10);
    if (part.empty() || part.size() > 3 || r.ptr != part.data() + part.size() || v > 255) return std::nullopt;
    a[i] = static_cast<std::uint8_t>(v);
    s.remove_prefix(i < 3 ? dot + 1 : dot);
  }
  return a;
}

/// RFC 4291 text: eight groups of 1-4 hex digits separated by ':', one "::" standing for a run
/// of zero groups, optionally ending in dotted decimal for the last 32 bits.
inline std::optional<ipv6_address> parse_ipv6(std::string_view s) {
  std::array<std::uint16_t, 8> head{}, tail{};
  std::size_t nh = 0, nt = 0;
  // Groups of one side of "::"; `last` allows a dotted IPv4 tail.
  auto groups = [](std::string_view part, std::array<std::uint16_t, 8>& g, std::size_t& n, bool last) {
    while (!part.empty()) {
      const std::size_t colon = part.find(':');
      const std::string_view tok = part.substr(0, colon);
      if (colon == std::string_view::npos && last && tok.find('.') != std::string_view::npos) {
        const auto v4 = parse_ipv4(tok);
        if (!v4 || n > 6) return false;
        g[n++] = static_cast<std::uint16_t>((*v4)[0] << 8 | (*v4)[1]);
        g[n++] = static_cast<std::uint16_t>((*v4)[2] << 8 | (*v4)[3]);
        return true;
      }
      unsigned v = 0;
      const auto r = std::from_chars(tok.data(), tok.data() + tok.size(), v, 16);
      if (tok.empty() || tok.size() > 4 || r.ptr != tok.data() + tok.size() || n == 8) return false;
      g[n++] = static_cast<std::uint16_t>(v);
      if (colon == std::string_view::npos) return true;
      part.remove_prefix(colon + 1);
      if (part.empty()) return false;  // a trailing ':'
    }
    return true;
  };
  const std::size_t gap = s.find("::");
  if (gap == std::string_view::npos) {
    if (s.empty() || !groups(s, head, nh, true) || nh != 8) return std::nullopt;
  } else {
    const std::string_view left = s.substr(0, gap), right = s.substr(gap + 2);
    if (right.find("::") != std::string_view::npos || right.starts_with(":")) return std::nullopt;
    if (!groups(left, head, nh, false) || !groups(right, tail, nt, true) || nh + nt > 7) return std::nullopt;
  }
  ipv6_address a{};
  auto put = [&](std::size_t group, std::uint16_t v) {
    a[2 * group] = static_cast<std::uint8_t>(v >> 8);
    a[2 * group + 1] = static_cast<std::uint8_t>(v);
  };
  for (std::size_t i = 0; i < nh; ++i) put(i, head[i]);
  for (std::size_t i = 0; i < nt; ++i) put(8 - nt + i, tail[i]);
  return a;
}

/// A number as a key's value reads it (decimal or 0x hex) into `out`: malformed, or too_wide
/// beyond `bits` bits. `key` and `text` name it in the message.
inline key_error parse_key_number(std::string_view key, std::string_view text, unsigned bits, std::uint64_t& out) {
  bool overflow = false;
  const auto n = detail::parse_uint(text, overflow);
  const std::uint64_t max = bits >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << bits) - 1;
  if (!n && !overflow) return {key_errc::malformed, detail::key_value(key, text) + "not a number (decimal or 0x hex)"};
  if (overflow || *n > max)
    return {key_errc::too_wide, detail::key_value(key, text) + "wider than the field's " + std::to_string(bits) +
                                    (bits == 1 ? " bit" : " bits") + " (at most " + std::to_string(max) + ")"};
  out = *n;
  return {};
}

/// Reads `text` into member m (type M) of the field keyed `key` (see the top of this header).
template <class M>
key_error parse_key_value(std::string_view key, std::string_view text, M& m) {
  using C = field_codec<M>;
  if constexpr (detail::is_ip_address<M>) {
    constexpr bool v4 = sizeof(M) == 4;
    std::optional<M> a;
    if constexpr (v4)
      a = parse_ipv4(text);
    else
      a = parse_ipv6(text);
    if (a) {
      m = *a;
      return {};
    }
    return {key_errc::malformed,
            detail::key_value(key, text) + (v4 ? "not an IPv4 address (as 10.0.0.1)" : "not an IPv6 address (as fd00::1)")};
  } else if constexpr (detail::is_octets<M>) {
    const auto b = parse_hex(text);
    if (!b || b->size() != m.size())
      return {key_errc::malformed, detail::key_value(key, text) + "not " + std::to_string(m.size()) + " octets in hex (as " +
                                       (m.size() == 6 ? "02:00:00:00:00:01" : "00:01:02:...") + ")"};
    for (std::size_t i = 0; i < m.size(); ++i) m[i] = static_cast<std::uint8_t>((*b)[i]);
    return {};
  } else if constexpr (C::kind == field_kind::reserved || C::kind == field_kind::constant) {
    std::uint64_t n = 0;
    if (auto e = parse_key_number(key, text, C::value_bits, n)) return e;
    std::uint64_t want = 0;
    if constexpr (C::kind == field_kind::constant) {
      using V = std::remove_cvref_t<decltype(M::value)>;
      if constexpr (std::is_enum_v<V>)
        want = static_cast<std::uint64_t>(static_cast<std::underlying_type_t<V>>(M::value));
      else
        want = static_cast<std::uint64_t>(M::value);
    }
    if (n != want)
      return {key_errc::invalid, detail::key_value(key, text) + (C::kind == field_kind::reserved
                                                                     ? std::string{"a reserved field, always 0"}
                                                                     : "a constant field, always " + std::to_string(want))};
    return {};
  } else {
    using V = typename detail::value_of<M>::type;
    std::uint64_t n = 0;
    key_error e = parse_key_number(key, text, C::value_bits, n);
    if constexpr (std::is_enum_v<V>) {
      if (e.code == key_errc::malformed) {
        for (const named_value& v : enum_names<V>())
          if (v.name == text) {
            n = v.value;
            e = {};
          }
        if (e) e.message += ", nor a value name";
      }
    }
    if (e) return e;
    if constexpr (std::is_same_v<V, bool>)
      m = M(n != 0);
    else
      m = M(static_cast<V>(n));
    return {};
  }
}

/// The key of member `member` of H.
template <described H>
std::string field_key(std::string_view member) {
  if (member == "value") return std::string{H::wireshark};
  return std::string{H::wireshark} + "." + std::string{detail::key_member_name<H>(member)};
}

/// Sets the field of h keyed `key` from its text value. key_errc::unknown_key when no field of H
/// has that key (h unchanged); on any other error h is unchanged too. `member`, when given,
/// receives the name of the member set.
template <described H>
key_error set_by_key(H& h, std::string_view key, std::string_view text, std::string_view* member = nullptr) {
  key_error e{key_errc::unknown_key, "unknown key " + std::string{key}};
  H copy = h;
  auto f = [&](std::string_view name, auto& m) {
    if (e.code != key_errc::unknown_key || !detail::key_is<H>(key, name)) return;
    e = parse_key_value(key, text, m);
    if (!e && member) *member = name;
  };
  detail::for_each_leaf(copy, f);
  if (!e) h = copy;
  return e;
}

}  // namespace pushwire::wire
