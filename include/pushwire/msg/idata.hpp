// idata: a transfer indication in the 32-bit immediate data of an RDMA write (split-model driver, IV.A.2
// and IV.B.2). Network order: bits 31..24 pool_ref, 23..16 element_index, 15..0 byte_count,
// where byte_count 0 means 65536. The split-model document's example (pool 7, element 5, 256 bytes) is 0x07050100.
#pragma once

#include <array>
#include <cstdint>
#include <variant>

#include <pushwire/msg/data.hpp>
#include <pushwire/wire/codec.hpp>

namespace pushwire::msg {

struct idata {
  PUSHWIRE_STRUCT(idata,
      /// Pool reference, 0..255.
      (std::uint8_t, pool_ref),
      /// Element index within the pool, 0..255.
      (std::uint8_t, element_index),
      /// Bytes placed, 1..65536, with 65536 carried as 0.
      (std::uint16_t, byte_count));

  /// Bytes placed, 1..65536.
  constexpr std::uint32_t bytes() const { return byte_count == 0 ? 65536u : byte_count; }
};

/// Largest pool_ref / element_index / byte count idata can carry.
inline constexpr std::uint32_t idata_max_pool_ref = 255;
inline constexpr std::uint32_t idata_max_element_index = 255;
inline constexpr std::uint32_t idata_max_bytes = 65536;

/// The 32-bit immediate value (host order; RoCE carries it big-endian in ImmDt).
constexpr std::uint32_t to_imm(const idata& d) {
  return wire::load_be32(wire::to_bytes(d).data());
}

/// Any 32-bit immediate is a valid idata.
constexpr idata from_imm(std::uint32_t imm) {
  std::array<std::byte, 4> b{};
  wire::store_be32(b.data(), imm);
  return *wire::decode<idata>(b);
}

constexpr indication to_indication(const idata& d) {
  return {.pool_ref = d.pool_ref, .element_index = d.element_index, .byte_count = d.bytes()};
}

/// True when `i` fits idata: pool_ref <= 255, element_index <= 255, 1 <= byte_count <= 65536.
constexpr bool fits_idata(const indication& i) {
  return i.pool_ref <= idata_max_pool_ref && i.element_index <= idata_max_element_index &&
         i.byte_count >= 1 && i.byte_count <= idata_max_bytes;
}

/// `i` as idata: errc::too_large when a field exceeds idata's range, errc::invalid_field for
/// byte_count 0 (idata has no encoding for it).
constexpr result<idata> make_idata(const indication& i) {
  if (i.byte_count == 0) return wire::error{errc::invalid_field, 0, "byte_count"};
  if (i.pool_ref > idata_max_pool_ref) return wire::error{errc::too_large, 0, "pool_ref"};
  if (i.element_index > idata_max_element_index)
    return wire::error{errc::too_large, 0, "element_index"};
  if (i.byte_count > idata_max_bytes) return wire::error{errc::too_large, 0, "byte_count"};
  return idata{.pool_ref = static_cast<std::uint8_t>(i.pool_ref),
               .element_index = static_cast<std::uint8_t>(i.element_index),
               .byte_count = static_cast<std::uint16_t>(i.byte_count & 0xFFFF)};
}

/// How to carry an indication: idata when it fits, else an entry for BufferRDMAIndicate.
using indication_carrier = std::variant<idata, indication>;

constexpr indication_carrier choose_carrier(const indication& i) {
  if (fits_idata(i)) return *make_idata(i);
  return i;
}

}  // namespace pushwire::msg
