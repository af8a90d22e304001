// The error codes a header documents for its functions: every doc comment (`///` lines) that
// says "Errors: code (when), code, code (when)." names the codes the function after it may
// return, each with when it does (codes before a parenthesis share it). pushwire-spec renders
// them as spec/rnic.md's table of the device's verbs; a test checks that each one happens.
#pragma once

#include <cctype>
#include <fstream>
#include <sstream>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pushwire::specgen {

struct verb_error {
  std::string verb, code, when;
  friend bool operator==(const verb_error&, const verb_error&) = default;
};

/// The documented errors of `header`'s functions, in order (a function documented twice, as
/// overloads with the same clause, once). `codes` are the names an error may have; any other
/// name in a clause is a mistake: the result is empty and `bad` names it.
inline std::vector<verb_error> verb_errors(std::string_view header, std::span<const std::string_view> codes, std::string& bad) {
  std::vector<verb_error> out;
  std::string comment;
  std::size_t pos = 0;
  auto is_code = [&](std::string_view w) {
    for (std::string_view c : codes)
      if (c == w) return true;
    return false;
  };
  while (pos < header.size()) {
    std::size_t end = header.find('\n', pos);
    if (end == std::string_view::npos) end = header.size();
    std::string_view line = header.substr(pos, end - pos);
    pos = end + 1;
    const std::size_t first = line.find_first_not_of(" \t");
    if (first == std::string_view::npos) {
      comment.clear();
      continue;
    }
    line.remove_prefix(first);
    if (line.starts_with("///")) {
      line.remove_prefix(line.size() > 3 && line[3] == ' ' ? 4 : 3);
      if (line.starts_with("<")) continue;  // a member's trailing comment
      comment += std::string{line} + " ";
      continue;
    }
    if (comment.empty() || line.starts_with("template")) {
      if (!line.starts_with("template")) comment.clear();
      continue;
    }
    const std::string text = std::exchange(comment, {});
    const std::size_t at = text.find("Errors:");
    const std::size_t paren = line.find('(');
    if (at == std::string::npos || paren == std::string_view::npos) continue;
    std::size_t b = paren;
    while (b > 0 && (std::isalnum(static_cast<unsigned char>(line[b - 1])) || line[b - 1] == '_')) --b;
    const std::string verb{line.substr(b, paren - b)};
    std::vector<verb_error> mine;
    std::size_t pending = 0;  // codes of `mine` still waiting for their parenthesis
    for (std::size_t i = at + 7; i < text.size();) {
      const char c = text[i];
      if (c == ' ' || c == ',') {
        ++i;
      } else if (c == '.') {
        break;
      } else if (c == '(') {
        int depth = 0;
        std::size_t j = i;
        for (; j < text.size(); ++j) {
          depth += text[j] == '(' ? 1 : text[j] == ')' ? -1 : 0;
          if (depth == 0) break;
        }
        const std::string when = text.substr(i + 1, j - i - 1);
        for (std::size_t k = mine.size() - pending; k < mine.size(); ++k) mine[k].when = when;
        pending = 0;
        i = j + 1;
      } else if (std::islower(static_cast<unsigned char>(c))) {
        std::size_t j = i;
        while (j < text.size() && (std::islower(static_cast<unsigned char>(text[j])) || text[j] == '_')) ++j;
        const std::string word = text.substr(i, j - i);
        if (!is_code(word)) {
          bad = verb + ": " + word;
          return {};
        }
        mine.push_back({verb, word, ""});
        ++pending;
        i = j;
      } else {
        bad = verb + ": '" + std::string(1, c) + "'";
        return {};
      }
    }
    if (mine.empty()) {
      bad = verb + ": no code after Errors:";
      return {};
    }
    bool seen = false;
    for (const verb_error& e : out) seen = seen || (e.verb == verb && e.code == mine.front().code);
    if (!seen) out.insert(out.end(), mine.begin(), mine.end());
  }
  return out;
}

/// The headers whose functions are rnic::device's verbs: the device and the data path it inherits.
inline constexpr std::string_view device_headers[] = {"/pushwire/rnic/device.hpp", "/pushwire/rnic/engine.hpp"};

/// The documented errors of rnic::device's verbs, read from the headers under `include_dir`
/// (verb_errors() of each of device_headers, in order). Empty, with `bad` saying why, when a
/// header cannot be read or documents a code not in `codes`.
inline std::vector<verb_error> device_verb_errors(const std::string& include_dir, std::span<const std::string_view> codes, std::string& bad) {
  std::vector<verb_error> all;
  for (std::string_view h : device_headers) {
    std::ifstream in(include_dir + std::string{h}, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    const auto rows = in ? verb_errors(text.str(), codes, bad) : std::vector<verb_error>{};
    if (rows.empty()) {
      if (bad.empty()) bad = std::string{h} + ": no documented errors (or unreadable)";
      return {};
    }
    all.insert(all.end(), rows.begin(), rows.end());
  }
  return all;
}

}  // namespace pushwire::specgen
