// Bounded, sticky-error reader and writer over byte spans, for hand-written parsers of
// variable headers (the described-struct codec in codec.hpp does not need them).
// A read or write past the end sets the error once (truncated / no_space), returns 0, and every
// later call is a no-op; check ok() after a sequence of calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include <pushwire/wire/detail/copy.hpp>
#include <pushwire/wire/endian.hpp>
#include <pushwire/wire/errc.hpp>

namespace pushwire::wire {

class reader {
 public:
  constexpr explicit reader(std::span<const std::byte> in) noexcept : in_(in) {}

  constexpr bool ok() const noexcept { return err_ == errc{}; }
  constexpr errc status() const noexcept { return err_; }
  constexpr std::size_t position() const noexcept { return pos_; }
  constexpr std::size_t remaining() const noexcept { return in_.size() - pos_; }

  /// Reads an N-byte big-endian unsigned value (1 <= N <= 8).
  template <std::size_t N>
  constexpr std::uint64_t be() noexcept {
    if (!take(N)) return 0;
    return load_be<N>(in_.data() + pos_ - N);
  }
  constexpr std::uint8_t u8() noexcept { return static_cast<std::uint8_t>(be<1>()); }
  constexpr std::uint16_t u16() noexcept { return static_cast<std::uint16_t>(be<2>()); }
  constexpr std::uint32_t u24() noexcept { return static_cast<std::uint32_t>(be<3>()); }
  constexpr std::uint32_t u32() noexcept { return static_cast<std::uint32_t>(be<4>()); }
  constexpr std::uint64_t u64() noexcept { return be<8>(); }

  /// The next n bytes as a view (empty on failure).
  constexpr std::span<const std::byte> bytes(std::size_t n) noexcept {
    if (!take(n)) return {};
    return in_.subspan(pos_ - n, n);
  }
  constexpr void skip(std::size_t n) noexcept { (void)take(n); }
  /// Everything not yet read.
  constexpr std::span<const std::byte> rest() noexcept { return bytes(remaining()); }

 private:
  constexpr bool take(std::size_t n) noexcept {
    if (!ok()) return false;
    if (n > remaining()) {
      err_ = errc::truncated;
      return false;
    }
    pos_ += n;
    return true;
  }

  std::span<const std::byte> in_;
  std::size_t pos_ = 0;
  errc err_{};
};

class writer {
 public:
  constexpr explicit writer(std::span<std::byte> out) noexcept : out_(out) {}

  constexpr bool ok() const noexcept { return err_ == errc{}; }
  constexpr errc status() const noexcept { return err_; }
  constexpr std::size_t position() const noexcept { return pos_; }
  constexpr std::size_t remaining() const noexcept { return out_.size() - pos_; }
  /// The bytes written so far.
  constexpr std::span<std::byte> written() const noexcept { return out_.first(pos_); }

  template <std::size_t N>
  constexpr void be(std::uint64_t v) noexcept {
    if (std::byte* p = take(N)) store_be<N>(p, v);
  }
  constexpr void u8(std::uint8_t v) noexcept { be<1>(v); }
  constexpr void u16(std::uint16_t v) noexcept { be<2>(v); }
  constexpr void u24(std::uint32_t v) noexcept { be<3>(v); }
  constexpr void u32(std::uint32_t v) noexcept { be<4>(v); }
  constexpr void u64(std::uint64_t v) noexcept { be<8>(v); }

  constexpr void bytes(std::span<const std::byte> b) noexcept {
    if (std::byte* p = take(b.size())) detail::copy_bytes(p, b.data(), b.size());
  }
  constexpr void zeros(std::size_t n) noexcept {
    if (std::byte* p = take(n))
      for (std::size_t i = 0; i < n; ++i) p[i] = std::byte{0};
  }
  /// Reserves n bytes to be filled later (e.g. a length or checksum); nullptr on failure.
  constexpr std::byte* reserve(std::size_t n) noexcept { return take(n); }

 private:
  constexpr std::byte* take(std::size_t n) noexcept {
    if (!ok()) return nullptr;
    if (n > remaining()) {
      err_ = errc::no_space;
      return nullptr;
    }
    pos_ += n;
    return out_.data() + pos_ - n;
  }

  std::span<std::byte> out_;
  std::size_t pos_ = 0;
  errc err_{};
};

}  // namespace pushwire::wire
