// Renders wire::field_info tables as Markdown for spec/: RFC-style byte diagrams, field tables,
// value-name tables, and the "generated region" splicing that keeps prose hand-written.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <pushwire/wire/table.hpp>

namespace pushwire::specgen {

using wire::field_info;
using wire::field_kind;

inline std::string hex(std::uint64_t v, int digits) {
  char b[24];
  std::snprintf(b, sizeof b, "0x%0*llx", digits, static_cast<unsigned long long>(v));
  return b;
}

/// Bits [first, last] from the start of the struct (bit 0 = most significant bit of byte 0).
struct segment {
  std::size_t first, last;
  std::string label;
};

inline std::vector<segment> segments(std::span<const field_info> rows) {
  std::vector<segment> out;
  for (const field_info& f : rows) {
    if (f.variable()) continue;
    if (f.located) {
      const std::size_t msb = f.shift + f.bits - 1;
      out.push_back({f.offset * 8 + (f.size * 8 - 1 - msb), f.offset * 8 + (f.size * 8 - 1 - f.shift),
                     std::string{f.name}});
    } else {
      out.push_back({f.offset * 8, (f.offset + f.size) * 8 - 1, std::string{f.name}});
    }
  }
  std::sort(out.begin(), out.end(), [](const segment& a, const segment& b) { return a.first < b.first; });
  return out;
}

inline std::string center(std::string_view s, std::size_t width) {
  if (s.size() > width) s = s.substr(0, width);
  const std::size_t left = (width - s.size()) / 2;
  return std::string(left, ' ') + std::string{s} + std::string(width - s.size() - left, ' ');
}

/// An RFC 791-style diagram of the fixed part, 32 bits per line, plus one line naming the
/// variable tail (if `tail` is given).
inline std::string diagram(std::span<const field_info> rows, std::size_t fixed_bytes,
                           std::optional<std::string> tail = std::nullopt) {
  const auto segs = segments(rows);
  const std::size_t total = fixed_bytes * 8;
  const std::size_t nrows = (total + 31) / 32;
  auto seg_at = [&](std::size_t bit) -> const segment* {
    if (bit >= total) return nullptr;
    for (const segment& s : segs)
      if (bit >= s.first && bit <= s.last) return &s;
    return nullptr;
  };
  auto width_of = [&](std::size_t r) { return std::min<std::size_t>(32, total - 32 * r); };

  std::string out =
      " 0                   1                   2                   3\n"
      " 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1\n";
  auto separator = [&](std::optional<std::size_t> above, std::optional<std::size_t> below) {
    const std::size_t w = std::max(above ? width_of(*above) : 0, below ? width_of(*below) : 0);
    std::string line(2 * w + 1, ' ');
    auto cont = [&](std::size_t c) {
      if (!above || !below) return false;
      const segment* a = c < width_of(*above) ? seg_at(32 * *above + c) : nullptr;
      const segment* b = c < width_of(*below) ? seg_at(32 * *below + c) : nullptr;
      return a && a == b;
    };
    for (std::size_t c = 0; c < w; ++c) {
      line[2 * c + 1] = cont(c) ? ' ' : '-';
      line[2 * c] = (c > 0 && cont(c - 1) && cont(c)) ? ' ' : '+';
    }
    line[2 * w] = '+';
    return line + "\n";
  };
  for (std::size_t r = 0; r < nrows; ++r) {
    out += separator(r ? std::optional{r - 1} : std::nullopt, r);
    std::string line = "|";
    const std::size_t w = width_of(r);
    std::size_t c = 0;
    while (c < w) {
      const segment* s = seg_at(32 * r + c);
      std::size_t end = c;
      while (end + 1 < w && seg_at(32 * r + end + 1) == s) ++end;
      const std::size_t chars = 2 * (end - c + 1) - 1;
      std::string label;
      if (s) {
        const std::size_t mid = (s->first / 32 + s->last / 32) / 2;
        if (mid == r) label = s->label;
      }
      line += center(label, chars) + "|";
      c = end + 1;
    }
    out += line + "\n";
  }
  out += separator(nrows ? std::optional{nrows - 1} : std::nullopt, std::nullopt);
  if (tail) {
    out += "~" + center(*tail, 63) + "~\n";
    out += "+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+\n";
  }
  return out;
}

inline std::string type_name(const field_info& f) {
  const std::string w = std::to_string(f.bits);
  switch (f.kind) {
    case field_kind::uint: return f.located ? "uint" + w : "u" + w;
    case field_kind::flag: return "flag";
    case field_kind::enumeration: return "enum u" + w;
    case field_kind::octets: return "octets[" + std::to_string(f.size) + "]";
    case field_kind::reserved: return "reserved u" + w;
    case field_kind::constant: return "constant u" + w;
    case field_kind::count: return "count u" + w;
    case field_kind::bytes: return "bytes";
    case field_kind::array:
      return f.element.empty() ? "array of u" + w : "array of " + std::to_string(f.size) + "-byte entries";
    case field_kind::record: return "record";
  }
  return "?";
}

inline std::string rule(const field_info& f, std::span<const field_info> rows) {
  auto named = [&](std::uint64_t v) -> std::string {
    for (const auto& n : f.names)
      if (n.value == v) return " (" + std::string{n.name} + ")";
    return "";
  };
  switch (f.kind) {
    case field_kind::constant:
      return "= " + (f.names.empty() ? std::to_string(f.value) : hex(f.value, 4)) + named(f.value);
    case field_kind::reserved: return "= 0";
    case field_kind::count: {
      bool bytes = false;
      for (const field_info& r : rows) bytes = bytes || (r.name == f.link && r.kind == field_kind::bytes);
      return (f.value ? "≥ " + std::to_string(f.value) + "; " : std::string{}) + "number of `" +
             std::string{f.link} + (bytes ? "` bytes" : "` entries");
    }
    case field_kind::array:
    case field_kind::bytes:
      return f.link.empty() ? "fills the rest of the frame" + (f.value ? "; ≥ " + std::to_string(f.value) + " entries" : std::string{})
                            : "`" + std::string{f.link} + "` " + (f.kind == field_kind::bytes ? "bytes" : "entries");
    case field_kind::enumeration: {
      std::string s;
      for (const auto& n : f.names) s += (s.empty() ? "" : ", ") + std::to_string(n.value) + " " + std::string{n.name};
      return s;
    }
    default: return "";
  }
}

/// A Markdown table of rows (byte offset, width, mask, field, type, rule).
inline std::string field_table(std::span<const field_info> rows) {
  std::string s = "| Byte | Bits | Mask | Field | Type | Rule |\n|---:|---:|---:|---|---|---|\n";
  for (const field_info& f : rows) {
    std::string byte = std::to_string(f.offset);
    if (f.variable()) byte += f.size == 1 ? " + i" : " + " + std::to_string(f.size) + "·i";
    const std::string mask = f.located ? hex(f.mask(), static_cast<int>(2 * f.size)) : "";
    s += "| " + byte + " | " + std::to_string(f.bits) + " | " + mask + " | `" + std::string{f.name} +
         "` | " + type_name(f) + " | " + rule(f, rows) + " |\n";
  }
  return s;
}

/// A Markdown table of value names.
inline std::string value_table(std::span<const wire::named_value> names, int digits) {
  std::string s = "| Value | Name |\n|---:|---|\n";
  for (const auto& n : names) s += "| " + hex(n.value, digits) + " | " + std::string{n.name} + " |\n";
  return s;
}

/// Replaces the body of every `<!-- generated: KEY -->` ... `<!-- end generated -->` region of
/// `text` with render(KEY). Returns nullopt (and sets `bad_key`) when render has no KEY.
inline std::optional<std::string> splice(
    std::string_view text, const std::function<std::optional<std::string>(std::string_view)>& render,
    std::string& bad_key) {
  static constexpr std::string_view open = "<!-- generated: ", open_end = " -->",
                                    close = "<!-- end generated -->";
  std::string out;
  std::size_t pos = 0;
  while (true) {
    const std::size_t b = text.find(open, pos);
    if (b == std::string_view::npos) break;
    const std::size_t k = b + open.size();
    const std::size_t ke = text.find(open_end, k);
    const std::size_t e = text.find(close, k);
    if (ke == std::string_view::npos || e == std::string_view::npos || ke > e) {
      bad_key = "unterminated region at byte " + std::to_string(b);
      return std::nullopt;
    }
    const std::string_view key = text.substr(k, ke - k);
    auto body = render(key);
    if (!body) {
      bad_key = std::string{key};
      return std::nullopt;
    }
    out += text.substr(pos, ke + open_end.size() - pos);
    out += "\n" + *body;
    out += close;
    pos = e + close.size();
  }
  out += text.substr(pos);
  return out;
}

}  // namespace pushwire::specgen
