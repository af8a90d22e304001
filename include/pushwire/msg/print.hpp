// Push-push messages as JSON (pushwire-dump --json, the Wireshark field names) and as text.
#pragma once

#include <string>
#include <variant>

#include <pushwire/msg/message.hpp>
#include <pushwire/wire/json.hpp>
#include <pushwire/wire/print.hpp>

namespace pushwire::msg {

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
