// Every push-push message type, and decoding any frame by its function code (printing: print.hpp).
#pragma once

#include <cstddef>
#include <span>
#include <tuple>
#include <type_traits>
#include <variant>

#include <pushwire/msg/buffer.hpp>
#include <pushwire/msg/cfg_util.hpp>
#include <pushwire/msg/data.hpp>
#include <pushwire/msg/header.hpp>

namespace pushwire::msg {

/// The message types, in function-code order. Everything that enumerates messages uses this list.
using message_types =
    std::tuple<buffer_recv_pool, buffer_recv_pool_get, buffer_recv_pool_update,
               buffer_pool_flush_request, buffer_pool_flush_reply, send_data,
               buffer_rdma_indicate, cfg_util_request, cfg_util_reply>;

template <class Tuple>
struct variant_of;
template <class... M>
struct variant_of<std::tuple<M...>> {
  using type = std::variant<M...>;
};

/// Any push-push message.
using message = variant_of<message_types>::type;

/// Calls f(std::type_identity<M>{}) for every message type M, in order.
template <class F>
constexpr void for_each_message_type(F&& f) {
  [&]<class... M>(std::type_identity<std::tuple<M...>>) {
    (f(std::type_identity<M>{}), ...);
  }(std::type_identity<message_types>{});
}

static_assert(std::tuple_size_v<message_types> == function_names.size(),
              "every function code has exactly one message type");

/// Decodes the message M whose function code the frame carries and calls f(const M&). Returns
/// the decode error (code 0 when f was called). Checks: check_header, then M's body.
template <class F>
constexpr wire::error dispatch(std::span<const std::byte> frame, F&& f, const codec_options& lim = {}) {
  if (auto e = check_header(frame, lim); e.code != errc{}) return e;
  const function code = *peek_function(frame);
  wire::error err{};
  for_each_message_type([&]<class M>(std::type_identity<M>) {
    if (code_of<M> != code) return;
    auto r = wire::decode<M>(frame);
    if (r)
      f(*r);
    else
      err = r.error();
  });
  return err;
}

/// Decodes any frame into a caller's message variant, which views the frame. A message is its
/// own view, so inspect() is the same: both validate the whole frame. On error `m` is unchanged.
constexpr wire::error decode_into(std::span<const std::byte> frame, message& m, const codec_options& lim = {}) {
  return dispatch(frame, [&](const auto& x) { m = x; }, lim);
}
constexpr wire::error inspect(std::span<const std::byte> frame, message& m, const codec_options& lim = {}) {
  return decode_into(frame, m, lim);
}

/// Decodes any frame into the message variant (decode<M>() expects one type).
constexpr result<message> decode(std::span<const std::byte> frame, const codec_options& lim = {}) {
  message out{};
  if (auto e = decode_into(frame, out, lim); e.code != errc{}) return e;
  return out;
}

/// The variant may view its frame: decoding from a temporary buffer is a compile error.
template <class R>
  requires wire::expiring_buffer<R>
constexpr result<message> decode(R&&, const codec_options& = {}) = delete;

/// Encodes whichever message v holds.
constexpr result<std::size_t> encode(const message& v, std::span<std::byte> out,
                                     const codec_options& lim = {}) {
  return std::visit([&](const auto& m) { return msg::encode(m, out, lim); }, v);
}

constexpr function function_of(const message& v) {
  return std::visit([](const auto& m) { return code_of<std::remove_cvref_t<decltype(m)>>; }, v);
}

}  // namespace pushwire::msg
