// Every push-push message type, decoding any frame by its function code, and printing.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <variant>

#include <pushwire/msg/buffer.hpp>
#include <pushwire/msg/cfg_util.hpp>
#include <pushwire/msg/data.hpp>
#include <pushwire/msg/header.hpp>
#include <pushwire/wire/json.hpp>
#include <pushwire/wire/print.hpp>

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

/// Writes m's keys into the open JSON object: "pushwire.function" (its name),
/// "pushwire.version", "pushwire.txn", then the body fields under their snake_case names.
template <message_type M>
void write_json_fields(wire::json_writer& w, const M& m) {
  w.key("pushwire.function");
  w.string(name(code_of<M>));
  w.key("pushwire.version");
  w.uint(protocol_version);
  w.key("pushwire.txn");
  w.uint(m.header.transaction_context);
  wire::for_each_member_index<M>([&](auto i) {
    if constexpr (i.value > 0) wire::write_json_member<i.value>(w, m);
  });
}

/// m as one JSON object (see write_json_fields).
template <message_type M>
std::string to_json(const M& m) {
  std::string s;
  wire::json_writer w{s};
  w.begin_object();
  write_json_fields(w, m);
  w.end_object();
  return s;
}

inline std::string to_json(const message& v) {
  return std::visit([](const auto& m) { return msg::to_json(m); }, v);
}

/// m as text: a title line ("BufferRecvPool (0x0101)") and one indented line per field.
template <message_type M>
std::string to_text(const M& m) {
  return wire::detail::enum_text(code_of<M>) + "\n" + wire::to_text(m, 2);
}

inline std::string to_text(const message& v) {
  return std::visit([](const auto& m) { return msg::to_text(m); }, v);
}

}  // namespace pushwire::msg
