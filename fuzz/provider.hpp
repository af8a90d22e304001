// A bounded reader of fuzzer input for the stateful targets: integers, choices and byte runs
// are taken from the front; once the input is exhausted everything reads as zero, so every
// input is a valid event stream (the ngtcp2 style of driving a machine from fuzz bytes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace pushwire::fuzz {

class provider {
 public:
  provider(const std::uint8_t* data, std::size_t size) : p_(data), n_(size) {}
  bool empty() const { return n_ == 0; }
  std::size_t remaining() const { return n_; }
  template <class T>
  T take() {
    T v{};
    for (std::size_t i = 0; i < sizeof(T); ++i) v = static_cast<T>((v << 8) | byte());
    return v;
  }
  /// A value in [lo, hi].
  std::uint32_t in(std::uint32_t lo, std::uint32_t hi) {
    const std::uint32_t span = hi - lo + 1;
    return lo + (span == 0 ? take<std::uint32_t>() : take<std::uint32_t>() % span);
  }
  /// A small choice in [0, n).
  std::uint8_t pick(std::uint8_t n) { return static_cast<std::uint8_t>(byte() % n); }
  bool flag() { return (byte() & 1) != 0; }
  /// Up to `max` bytes (a length byte, then the bytes).
  std::span<const std::byte> bytes(std::size_t max) {
    std::size_t len = take<std::uint16_t>() % (max + 1);
    if (len > n_) len = n_;
    const auto s = std::span<const std::byte>(reinterpret_cast<const std::byte*>(p_), len);
    p_ += len;
    n_ -= len;
    return s;
  }
  std::span<const std::byte> rest() {
    const auto s = std::span<const std::byte>(reinterpret_cast<const std::byte*>(p_), n_);
    p_ += n_;
    n_ = 0;
    return s;
  }

 private:
  std::uint8_t byte() {
    if (n_ == 0) return 0;
    --n_;
    return *p_++;
  }
  const std::uint8_t* p_;
  std::size_t n_;
};

/// Aborts with a message: a broken invariant is a crash the fuzzer reports.
[[noreturn]] void fail(const char* what);

}  // namespace pushwire::fuzz

#define PUSHWIRE_FUZZ_CHECK(cond)                                    \
  do {                                                               \
    if (!(cond)) ::pushwire::fuzz::fail(#cond " (" __FILE__ ")");    \
  } while (0)
