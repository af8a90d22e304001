// Classic pcap files: a reader over a buffer (either byte order, microsecond or nanosecond
// timestamps; never reads past the buffer) and a dependency-free writer (little-endian).
// Format: a 24-byte file header (magic, version 2.4, zone, sigfigs, snaplen, link type), then
// records of a 16-byte header (seconds, fraction, captured length, original length) and data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include <pushwire/wire/errc.hpp>
#include <pushwire/wire/result.hpp>

namespace pushwire::wire::pcap {

inline constexpr std::uint32_t magic_micro = 0xA1B2C3D4;
inline constexpr std::uint32_t magic_nano = 0xA1B23C4D;
inline constexpr std::uint32_t linktype_ethernet = 1;
inline constexpr std::size_t file_header_size = 24, record_header_size = 16;
/// Largest record the reader accepts, whatever the file's snaplen says.
inline constexpr std::uint32_t max_record = 262144;

enum class resolution : std::uint8_t { micro, nano };

struct record {
  std::uint64_t ts_ns = 0;        ///< timestamp, nanoseconds since the epoch
  std::uint32_t orig_len = 0;     ///< length on the wire (>= data.size())
  std::span<const std::byte> data{};
};

namespace detail {
constexpr std::uint32_t load32(const std::byte* p, bool swap) {
  std::uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = v << 8 | static_cast<std::uint8_t>(p[i]);  // little-endian
  if (swap) v = (v >> 24) | ((v >> 8) & 0xFF00) | ((v << 8) & 0xFF0000) | (v << 24);
  return v;
}
constexpr std::uint16_t load16(const std::byte* p, bool swap) {
  const auto v = static_cast<std::uint16_t>(static_cast<std::uint8_t>(p[0]) | static_cast<std::uint8_t>(p[1]) << 8);
  return swap ? static_cast<std::uint16_t>(v >> 8 | v << 8) : v;
}
}  // namespace detail

/// Reads records from a whole file held in memory.
class reader {
 public:
  /// Checks the file header: errc::bad_pcap (with the offending field) or truncated.
  static constexpr result<reader> open(std::span<const std::byte> file) {
    if (file.size() < file_header_size) return error{errc::truncated, file.size(), "pcap header"};
    reader r;
    r.file_ = file;
    const std::uint32_t m = detail::load32(file.data(), false);
    const std::uint32_t ms = detail::load32(file.data(), true);
    if (m == magic_micro || m == magic_nano) {
      r.swap_ = false;
    } else if (ms == magic_micro || ms == magic_nano) {
      r.swap_ = true;
    } else {
      return error{errc::bad_pcap, 0, "magic"};
    }
    r.res_ = (r.swap_ ? ms : m) == magic_nano ? resolution::nano : resolution::micro;
    if (detail::load16(file.data() + 4, r.swap_) != 2) return error{errc::bad_pcap, 4, "version"};
    r.snaplen_ = detail::load32(file.data() + 16, r.swap_);
    r.linktype_ = detail::load32(file.data() + 20, r.swap_);
    r.pos_ = file_header_size;
    return r;
  }

  /// The next record, nullopt at the end of the file. bad_pcap for a record longer than
  /// max_record or than its original length; truncated for one cut by the end of the file.
  constexpr result<std::optional<record>> next() {
    if (pos_ == file_.size()) return std::optional<record>{};
    if (file_.size() - pos_ < record_header_size) return error{errc::truncated, file_.size(), "pcap record"};
    const std::byte* h = file_.data() + pos_;
    const std::uint32_t sec = detail::load32(h, swap_), frac = detail::load32(h + 4, swap_);
    const std::uint32_t incl = detail::load32(h + 8, swap_), orig = detail::load32(h + 12, swap_);
    if (incl > max_record || incl > orig) return error{errc::bad_pcap, pos_ + 8, "incl_len"};
    if (file_.size() - pos_ - record_header_size < incl) return error{errc::truncated, file_.size(), "pcap record"};
    record r;
    r.ts_ns = std::uint64_t{sec} * 1000000000u + (res_ == resolution::nano ? frac : std::uint64_t{frac} * 1000u);
    r.orig_len = orig;
    r.data = file_.subspan(pos_ + record_header_size, incl);
    pos_ += record_header_size + incl;
    return std::optional<record>{r};
  }

  constexpr std::uint32_t linktype() const { return linktype_; }
  constexpr std::uint32_t snaplen() const { return snaplen_; }
  constexpr resolution timestamps() const { return res_; }
  constexpr bool byte_swapped() const { return swap_; }

 private:
  std::span<const std::byte> file_{};
  std::size_t pos_ = 0;
  bool swap_ = false;
  resolution res_ = resolution::micro;
  std::uint32_t snaplen_ = 0, linktype_ = 0;
};

/// Appends a classic pcap file to a byte vector.
class writer {
 public:
  explicit writer(std::vector<std::byte>& out, resolution res = resolution::micro,
                  std::uint32_t linktype = linktype_ethernet, std::uint32_t snaplen = max_record)
      : out_(out), res_(res) {
    put32(res == resolution::nano ? magic_nano : magic_micro);
    put16(2);
    put16(4);
    put32(0);  // thiszone
    put32(0);  // sigfigs
    put32(snaplen);
    put32(linktype);
  }

  /// Appends one frame captured at ts_ns (nanoseconds since the epoch).
  void add(std::uint64_t ts_ns, std::span<const std::byte> frame) {
    put32(static_cast<std::uint32_t>(ts_ns / 1000000000u));
    const std::uint64_t frac = ts_ns % 1000000000u;
    put32(static_cast<std::uint32_t>(res_ == resolution::nano ? frac : frac / 1000u));
    put32(static_cast<std::uint32_t>(frame.size()));
    put32(static_cast<std::uint32_t>(frame.size()));
    out_.insert(out_.end(), frame.begin(), frame.end());
  }

 private:
  void put16(std::uint16_t v) {
    out_.push_back(static_cast<std::byte>(v));
    out_.push_back(static_cast<std::byte>(v >> 8));
  }
  void put32(std::uint32_t v) {
    for (int i = 0; i < 4; ++i) out_.push_back(static_cast<std::byte>(v >> (8 * i)));
  }
  std::vector<std::byte>& out_;
  resolution res_;
};

}  // namespace pushwire::wire::pcap
