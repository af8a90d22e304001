// Push-push messaging protocol v1 (split-model driver, IV.B; spec/push-push.md): function codes, the
// 12-byte header every message starts with, frame limits, and the typed encode/decode.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include <pushwire/wire/codec.hpp>
#include <pushwire/wire/options.hpp>

namespace pushwire::msg {

namespace wire = ::pushwire::wire;
using wire::errc;
using wire::result;

/// The only protocol version this library speaks; any other is errc::unsupported_version.
inline constexpr std::uint16_t protocol_version = 1;

/// Function codes (header bytes 0-1). Names as in the split-model document: BufferRecvPool, ...
enum class function : std::uint16_t {
  buffer_recv_pool = 0x0101,
  buffer_recv_pool_get = 0x0102,
  buffer_recv_pool_update = 0x0103,
  buffer_pool_flush_request = 0x0104,
  buffer_pool_flush_reply = 0x0105,
  send_data = 0x0201,
  buffer_rdma_indicate = 0x0202,
  cfg_util_request = 0x0301,
  cfg_util_reply = 0x0302,
};

inline constexpr std::array<wire::named_value, 9> function_names{{
    {function::buffer_recv_pool, "BufferRecvPool"},
    {function::buffer_recv_pool_get, "BufferRecvPoolGet"},
    {function::buffer_recv_pool_update, "BufferRecvPoolUpdate"},
    {function::buffer_pool_flush_request, "BufferPoolFlushRequest"},
    {function::buffer_pool_flush_reply, "BufferPoolFlushReply"},
    {function::send_data, "SendData"},
    {function::buffer_rdma_indicate, "BufferRDMAIndicate"},
    {function::cfg_util_request, "CfgUtilRequest"},
    {function::cfg_util_reply, "CfgUtilReply"},
}};
constexpr std::span<const wire::named_value> wire_enum_names(function) { return function_names; }

/// The split-model document's name of f ("BufferRecvPool"), or "" for an unknown code.
constexpr std::string_view name(function f) { return wire::enum_name(f); }
constexpr bool is_known(function f) { return !name(f).empty(); }

/// The header of every message (the split-model document's BufferPoolFlush figure): function, version,
/// transaction context. F fixes the function: a typed decoder rejects any other.
template <function F>
struct header {
  static constexpr msg::function code = F;
  PUSHWIRE_STRUCT(header,
      /// Which message follows.
      (wire::constant<msg::function, F, errc::wrong_function>, function),
      /// Protocol version number: 1.
      (wire::constant<std::uint16_t, protocol_version, errc::unsupported_version>, version),
      /// Transaction-specific value; a reply echoes its request's.
      (std::uint64_t, transaction_context));
};

/// Bytes in the header.
inline constexpr std::size_t header_size = wire::fixed_size<header<function::send_data>>;

/// A push-push message type: a described struct whose first member is its header.
template <class M>
concept message_type = wire::described<M> && (wire::member_count<M> > 0) &&
                       requires { wire::member_type<M, 0>::code; };

/// The function code of message type M.
template <message_type M>
inline constexpr function code_of = wire::member_type<M, 0>::code;

/// What a msg/ decoder accepts and an encoder produces: the one options type of every codec, of
/// which msg/ reads max_frame (the largest frame in bytes, default 4096; a message is the payload of
/// one Send; larger is errc::too_large).
using wire::codec_options;

/// The function code of a frame, if it holds at least two bytes.
constexpr std::optional<function> peek_function(std::span<const std::byte> frame) {
  if (frame.size() < 2) return std::nullopt;
  return static_cast<function>(wire::load_be16(frame.data()));
}

/// Checks shared by every decoder, in this order: too_large, truncated (shorter than the header),
/// unknown_function, wrong_function (when `expected` is given), unsupported_version.
constexpr wire::error check_header(std::span<const std::byte> frame, const codec_options& lim,
                                   std::optional<function> expected = std::nullopt) {
  if (frame.size() > lim.max_frame) return {errc::too_large, lim.max_frame, {}};
  if (frame.size() < header_size) return {errc::truncated, frame.size(), {}};
  const function f = *peek_function(frame);
  if (!is_known(f)) return {errc::unknown_function, 0, "function"};
  if (expected && f != *expected) return {errc::wrong_function, 0, "function"};
  if (wire::load_be16(frame.data() + 2) != protocol_version)
    return {errc::unsupported_version, 2, "version"};
  return {};
}

/// Decodes a frame that must hold message M. Errors: check_header's, then the body's
/// (truncated, trailing_bytes, zero_count, count_mismatch, reserved_nonzero, invalid_field).
template <message_type M>
constexpr result<M> decode(std::span<const std::byte> frame, const codec_options& lim = {}) {
  if (auto e = check_header(frame, lim, code_of<M>); e.code != errc{}) return e;
  return wire::decode<M>(frame);
}

/// decode<M>() into a caller's value (its arrays and byte strings view the frame). On error `m`
/// is unspecified.
template <message_type M>
constexpr wire::error decode_into(std::span<const std::byte> frame, M& m, const codec_options& lim = {}) {
  if (auto e = check_header(frame, lim, code_of<M>); e.code != errc{}) return e;
  return wire::decode_into(frame, m);
}

/// Decoding a message that views its frame from a temporary buffer would dangle: compile error.
template <message_type M, class R>
  requires(!wire::fixed_size_struct<M> && wire::expiring_buffer<R>)
constexpr result<M> decode(R&&, const codec_options& = {}) = delete;

/// Bytes encode(m, ...) writes.
template <message_type M>
constexpr std::size_t encoded_size(const M& m) {
  return wire::wire_size(m);
}

/// Encodes m into the front of `out`. errc::too_large when the frame would exceed
/// lim.max_frame, errc::no_space when `out` is too small, else what the body's checks say.
template <message_type M>
constexpr result<std::size_t> encode(const M& m, std::span<std::byte> out, const codec_options& lim = {}) {
  if (encoded_size(m) > lim.max_frame) return wire::error{errc::too_large, lim.max_frame, {}};
  return wire::encode(m, out);
}

}  // namespace pushwire::msg
