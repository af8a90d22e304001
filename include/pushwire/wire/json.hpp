// A minimal streaming JSON writer (compact, one line), for derived JSON prints and the tools.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace pushwire::wire {

class json_writer {
 public:
  explicit json_writer(std::string& out) : out_(out) {}

  void begin_object() { open('{'); }
  void end_object() { close('}'); }
  void begin_array() { open('['); }
  void end_array() { close(']'); }

  /// Writes `"k":`; the next call writes its value.
  void key(std::string_view k) {
    comma();
    quoted(k);
    out_ += ':';
    need_comma_ = false;
  }
  void uint(std::uint64_t v) { scalar(std::to_string(v)); }
  void boolean(bool v) { scalar(v ? "true" : "false"); }
  void null() { scalar("null"); }
  /// A number with `decimals` digits after the point (printf %.*f: no exponent, no locale).
  void number(double v, int decimals) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
    scalar(buf);
  }
  void string(std::string_view s) {
    comma();
    quoted(s);
    need_comma_ = true;
  }

 private:
  void comma() {
    if (need_comma_) out_ += ',';
  }
  void open(char c) {
    comma();
    out_ += c;
    need_comma_ = false;
  }
  void close(char c) {
    out_ += c;
    need_comma_ = true;
  }
  void scalar(std::string_view s) {
    comma();
    out_ += s;
    need_comma_ = true;
  }
  void quoted(std::string_view s) {
    out_ += '"';
    for (char ch : s) {
      const auto c = static_cast<unsigned char>(ch);
      if (c == '"' || c == '\\') {
        out_ += '\\';
        out_ += ch;
      } else if (c < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        out_ += buf;
      } else {
        out_ += ch;
      }
    }
    out_ += '"';
  }

  std::string& out_;
  bool need_comma_ = false;
};

}  // namespace pushwire::wire
