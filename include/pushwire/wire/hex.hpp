// Hex text <-> bytes, for printing and for tools that take frames on the command line.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace pushwire::wire {

/// Lowercase hex, two digits per byte, no separators.
inline std::string to_hex(std::span<const std::byte> b) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string s;
  s.reserve(2 * b.size());
  for (std::byte x : b) {
    s += digits[static_cast<unsigned>(x) >> 4];
    s += digits[static_cast<unsigned>(x) & 0xF];
  }
  return s;
}

/// The value of one hex digit (0-9, a-f, A-F), or -1 for any other character.
constexpr int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/// Parses hex digits, ignoring whitespace, ':', '-', '_' and one leading "0x". Returns nullopt
/// on any other character or an odd number of digits.
inline std::optional<std::vector<std::byte>> parse_hex(std::string_view s) {
  if (s.starts_with("0x") || s.starts_with("0X")) s.remove_prefix(2);
  std::vector<std::byte> out;
  int hi = -1;
  for (char c : s) {
    const int v = hex_value(c);
    if (v < 0) {
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ':' || c == '-' || c == '_') continue;
      return std::nullopt;
    }
    if (hi < 0) {
      hi = v;
    } else {
      out.push_back(static_cast<std::byte>(hi << 4 | v));
      hi = -1;
    }
  }
  if (hi >= 0) return std::nullopt;
  return out;
}

/// Classic 16-bytes-per-line dump: offset, hex, ASCII; each line starts with `indent` spaces.
inline std::string hexdump(std::span<const std::byte> b, int indent) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string s;
  for (std::size_t line = 0; line < b.size(); line += 16) {
    s.append(static_cast<std::size_t>(indent), ' ');
    for (int shift = 12; shift >= 0; shift -= 4) s += digits[(line >> shift) & 0xF];
    s += "  ";
    for (std::size_t i = line; i < line + 16; ++i) {
      if (i < b.size()) {
        s += digits[static_cast<unsigned>(b[i]) >> 4];
        s += digits[static_cast<unsigned>(b[i]) & 0xF];
        s += ' ';
      } else {
        s += "   ";
      }
    }
    s += " |";
    for (std::size_t i = line; i < line + 16 && i < b.size(); ++i) {
      const auto c = static_cast<unsigned char>(b[i]);
      s += (c >= 0x20 && c < 0x7F) ? static_cast<char>(c) : '.';
    }
    s += "|\n";
  }
  return s;
}

}  // namespace pushwire::wire
