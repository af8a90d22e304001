// Loads and stores of 1..8-byte unsigned values: big-endian (network order), little-endian, or
// in a byte order chosen at run time (capture files, wire/pcap.hpp).
// In constant evaluation they shift bytes; at run time they use Boost.Endian (not constexpr).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <boost/endian/conversion.hpp>

namespace pushwire::wire {

namespace detail {
// The integer type Boost.Endian handles with one byte swap for N bytes (others go byte-wise).
template <std::size_t N>
using endian_word = std::conditional_t<
    N == 1, std::uint8_t,
    std::conditional_t<N == 2, std::uint16_t, std::conditional_t<N <= 4, std::uint32_t, std::uint64_t>>>;
}  // namespace detail

/// Reads N bytes at p as a big-endian unsigned number. 1 <= N <= 8.
template <std::size_t N>
constexpr std::uint64_t load_be(const std::byte* p) noexcept {
  static_assert(N >= 1 && N <= 8);
  if (!std::is_constant_evaluated()) {
    return boost::endian::endian_load<detail::endian_word<N>, N, boost::endian::order::big>(
        reinterpret_cast<const unsigned char*>(p));
  }
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < N; ++i) v = (v << 8) | static_cast<std::uint8_t>(p[i]);
  return v;
}

/// Writes the low 8*N bits of v at p, most significant byte first. 1 <= N <= 8.
template <std::size_t N>
constexpr void store_be(std::byte* p, std::uint64_t v) noexcept {
  static_assert(N >= 1 && N <= 8);
  if (!std::is_constant_evaluated()) {
    boost::endian::endian_store<detail::endian_word<N>, N, boost::endian::order::big>(
        reinterpret_cast<unsigned char*>(p), static_cast<detail::endian_word<N>>(v));
    return;
  }
  for (std::size_t i = 0; i < N; ++i) p[N - 1 - i] = static_cast<std::byte>((v >> (8 * i)) & 0xFF);
}

/// Reads N bytes at p as a little-endian unsigned number. 1 <= N <= 8.
template <std::size_t N>
constexpr std::uint64_t load_le(const std::byte* p) noexcept {
  static_assert(N >= 1 && N <= 8);
  if (!std::is_constant_evaluated()) {
    return boost::endian::endian_load<detail::endian_word<N>, N, boost::endian::order::little>(
        reinterpret_cast<const unsigned char*>(p));
  }
  std::uint64_t v = 0;
  for (std::size_t i = N; i-- > 0;) v = (v << 8) | static_cast<std::uint8_t>(p[i]);
  return v;
}

/// Writes the low 8*N bits of v at p, least significant byte first. 1 <= N <= 8.
template <std::size_t N>
constexpr void store_le(std::byte* p, std::uint64_t v) noexcept {
  static_assert(N >= 1 && N <= 8);
  if (!std::is_constant_evaluated()) {
    boost::endian::endian_store<detail::endian_word<N>, N, boost::endian::order::little>(
        reinterpret_cast<unsigned char*>(p), static_cast<detail::endian_word<N>>(v));
    return;
  }
  for (std::size_t i = 0; i < N; ++i) p[i] = static_cast<std::byte>((v >> (8 * i)) & 0xFF);
}

/// Reads N bytes at p in byte order `order` (std::endian::big or std::endian::little).
template <std::size_t N>
constexpr std::uint64_t load(const std::byte* p, std::endian order) noexcept {
  return order == std::endian::big ? load_be<N>(p) : load_le<N>(p);
}

constexpr std::uint16_t load_be16(const std::byte* p) noexcept {
  return static_cast<std::uint16_t>(load_be<2>(p));
}
constexpr std::uint32_t load_be24(const std::byte* p) noexcept {
  return static_cast<std::uint32_t>(load_be<3>(p));
}
constexpr std::uint32_t load_be32(const std::byte* p) noexcept {
  return static_cast<std::uint32_t>(load_be<4>(p));
}
constexpr std::uint64_t load_be64(const std::byte* p) noexcept { return load_be<8>(p); }
constexpr void store_be16(std::byte* p, std::uint16_t v) noexcept { store_be<2>(p, v); }
constexpr void store_be24(std::byte* p, std::uint32_t v) noexcept { store_be<3>(p, v); }
constexpr void store_be32(std::byte* p, std::uint32_t v) noexcept { store_be<4>(p, v); }
constexpr void store_be64(std::byte* p, std::uint64_t v) noexcept { store_be<8>(p, v); }
constexpr std::uint16_t load_le16(const std::byte* p) noexcept {
  return static_cast<std::uint16_t>(load_le<2>(p));
}
constexpr std::uint32_t load_le32(const std::byte* p) noexcept {
  return static_cast<std::uint32_t>(load_le<4>(p));
}
constexpr std::uint64_t load_le64(const std::byte* p) noexcept { return load_le<8>(p); }
constexpr void store_le16(std::byte* p, std::uint16_t v) noexcept { store_le<2>(p, v); }
constexpr void store_le32(std::byte* p, std::uint32_t v) noexcept { store_le<4>(p, v); }
constexpr void store_le64(std::byte* p, std::uint64_t v) noexcept { store_le<8>(p, v); }

}  // namespace pushwire::wire
