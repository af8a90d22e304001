// Dispatch by function code, owning frames, the seed's flush layouts, printing and JSON.
#include <memory>
#include <set>

#include <pushwire/msg/msg.hpp>
#include <pushwire/wire/table.hpp>

#include "vectors.hpp"

using namespace pushwire;
using wire::errc;

// The seed's BufferPoolFlush figures, byte for byte: function(16) | version(16), the 64-bit
// transaction context, then the pool references (request) or nothing (reply).
static_assert(msg::header_size == 12);
static_assert(wire::fixed_size<msg::buffer_pool_flush_reply> == 12);
static_assert(wire::fields<msg::buffer_pool_flush_request>[3].offset == 12);

TEST_CASE("seed layouts: BufferPoolFlushRequest and BufferPoolFlushReply", "[msg][seed]") {
  const std::array<std::uint32_t, 1> one{0x01020304};
  std::array<std::byte, 64> out{};
  auto n = msg::encode(msg::buffer_pool_flush_request{.header = {.transaction_context = 0x1122334455667788},
                                                      .pool_refs = one},
                       out);
  REQUIRE(n.has_value());
  CHECK(test::copy(std::span(out).first(*n)) ==
        test::copy(test::hex<"0104 0001 1122334455667788 01020304">()));
  auto r = msg::encode(msg::buffer_pool_flush_reply{.header = {.transaction_context = 0x1122334455667788}}, out);
  REQUIRE(r.has_value());
  CHECK(test::copy(std::span(out).first(*r)) == test::copy(test::hex<"0105 0001 1122334455667788">()));
  // N = (frame length - 12) / 4 for every N that fits a frame.
  std::vector<std::uint32_t> refs;
  std::vector<std::byte> buf(4096);
  for (std::size_t k = 1; k <= (4096 - 12) / 4; ++k) {
    refs.push_back(static_cast<std::uint32_t>(k * 2654435761u));
    auto m = msg::encode(msg::buffer_pool_flush_request{.pool_refs = refs}, buf);
    REQUIRE(m.has_value());
    REQUIRE(*m == 12 + 4 * k);
    auto d = msg::decode<msg::buffer_pool_flush_request>(std::span(buf).first(*m));
    REQUIRE(d.has_value());
    REQUIRE(d->pool_refs.size() == k);
  }
}

TEST_CASE("dispatch calls the visitor with the typed message", "[msg][dispatch]") {
  std::set<msg::function> seen;
  vec::for_each_case([&](const auto& c) {
    using M = typename std::remove_cvref_t<decltype(c)>::message;
    int calls = 0;
    auto e = msg::dispatch(test::copy(c.bytes), [&](const auto& m) {
      using Got = std::remove_cvref_t<decltype(m)>;
      CHECK(std::is_same_v<Got, M>);
      if constexpr (std::is_same_v<Got, M>) CHECK(m == c.value);
      seen.insert(msg::code_of<Got>);
      ++calls;
    });
    CHECK(e.code == errc{});
    CHECK(calls == 1);
  });
  CHECK(seen.size() == msg::function_names.size());
  int calls = 0;
  auto e = msg::dispatch(test::copy(test::hex<"0106 0001 0000000000000000">()), [&](const auto&) { ++calls; });
  CHECK(e.code == errc::unknown_function);
  CHECK(calls == 0);
}

TEST_CASE("frame owns its bytes, decoded views do not", "[msg][frame]") {
  auto buf = std::make_unique<std::vector<std::byte>>(test::copy(vec::recv_pool.bytes));
  auto view = msg::decode<msg::buffer_recv_pool>(*buf);
  REQUIRE(view.has_value());
  CHECK(view->pools.wire_backed());
  auto f = msg::frame::copy(*buf);
  REQUIRE(f.has_value());
  buf.reset();  // the receive buffer is gone; the frame still holds the message
  const msg::message m = f->view();
  REQUIRE(std::holds_alternative<msg::buffer_recv_pool>(m));
  CHECK(std::get<msg::buffer_recv_pool>(m) == vec::recv_pool.value);

  auto made = msg::frame::make(vec::send_data.value);
  REQUIRE(made.has_value());
  CHECK(test::copy(made->bytes()) == test::copy(vec::send_data.bytes));
  CHECK(msg::frame::copy(test::copy(test::hex<"0105 0002 0000000000000000">())).code() ==
        errc::unsupported_version);
  CHECK(msg::frame::make(msg::buffer_recv_pool{}).code() == errc::zero_count);
}

TEST_CASE("array_view: native and wire-backed views compare and iterate alike", "[msg][view]") {
  const auto bytes = test::copy(vec::rdma_indicate.bytes);
  auto d = msg::decode<msg::buffer_rdma_indicate>(bytes);
  REQUIRE(d.has_value());
  const wire::array_view<msg::indication>& wire_view = d->entries;
  const wire::array_view<msg::indication> native{std::span(vec::indications)};
  CHECK(wire_view.wire_backed());
  CHECK_FALSE(native.wire_backed());
  CHECK(wire_view == native);
  std::vector<msg::indication> copied(wire_view.begin(), wire_view.end());
  REQUIRE(copied.size() == 1);
  CHECK(copied[0] == msg::indication{300, 5, 70000});
  CHECK(wire_view.end() - wire_view.begin() == 1);
  const std::array<msg::indication, 1> other{{{300, 5, 70001}}};
  CHECK_FALSE(wire_view == wire::array_view<msg::indication>{std::span(other)});
}

TEST_CASE("JSON: pushwire.* header keys, then snake_case body fields", "[msg][json]") {
  CHECK(msg::to_json(vec::recv_pool.value) ==
        R"({"pushwire.function":"BufferRecvPool","pushwire.version":1,"pushwire.txn":72623859790382856,)"
        R"("pool_count":2,"pools":[)"
        R"({"pool_ref":7,"element_count":64,"element_size":256,"memory_handle":287454020,"address":139637976731648,"pool_context":12302652060662169617,"implicit":0},)"
        R"({"pool_ref":8,"element_count":1,"element_size":4096,"memory_handle":1432778632,"address":4294967296,"pool_context":0,"implicit":1}]})");
  CHECK(msg::to_json(vec::flush_request.value) ==
        R"({"pushwire.function":"BufferPoolFlushRequest","pushwire.version":1,"pushwire.txn":3735928559,"pool_refs":[7,8,4294967295]})");
  CHECK(msg::to_json(vec::send_data.value) ==
        R"({"pushwire.function":"SendData","pushwire.version":1,"pushwire.txn":2,"data_length":5,"data":"68656c6c6f"})");
  CHECK(msg::to_json(vec::cfg_request.value) ==
        R"({"pushwire.function":"CfgUtilRequest","pushwire.version":1,"pushwire.txn":4,"request_code":2,"reserved":0,"data_size":6,"data":"020000000001"})");
  CHECK(msg::to_json(vec::flush_reply.value) ==
        R"({"pushwire.function":"BufferPoolFlushReply","pushwire.version":1,"pushwire.txn":3735928559})");
}

TEST_CASE("text: a title line and one line per field", "[msg][text]") {
  CHECK(msg::to_text(vec::send_data.value) ==
        "SendData (0x0201)\n"
        "  function: SendData (0x0201)\n"
        "  version: 1\n"
        "  transaction_context: 0x0000000000000002\n"
        "  data_length: 5\n"
        "  data: 5 bytes\n"
        "    0000  68 65 6c 6c 6f                                   |hello|\n");
  const std::string t = msg::to_text(vec::recv_pool.value);
  CHECK(t.find("  pools: 2 entries\n    [0]\n      pool_ref: 7\n") != std::string::npos);
  CHECK(msg::to_text(vec::cfg_reply.value).find("  status: success (0x0000)\n") != std::string::npos);
}
