// Each errc is reached at least once, with the offset and field the spec's decode order gives.
#include <set>
#include <vector>

#include <pushwire/msg/msg.hpp>

#include "vectors.hpp"

using namespace pushwire;
using wire::errc;

namespace {

struct bad_frame {
  const char* what;
  std::vector<std::byte> bytes;
  errc code;
  std::size_t offset;
  std::string_view field;
};

std::vector<std::byte> h(std::string_view hex) { return *wire::parse_hex(hex); }

}  // namespace

TEST_CASE("every error code is reached, with offset and field", "[msg][errors]") {
  std::vector<std::byte> huge = h("0201 0001 0000000000000000 00000ff1");
  huge.resize(4097);  // data_length 4081: frame 4097 > max_frame
  const std::vector<bad_frame> frames{
      {"shorter than the header", h("0105 0001 00000000 000000"), errc::truncated, 11, ""},
      {"empty", {}, errc::truncated, 0, ""},
      {"fixed part cut", h("0102 0001 0000000000000001 00000800 0000"), errc::truncated, 18, ""},
      {"reply with a byte more", h("0105 0001 00000000deadbeef 00"), errc::trailing_bytes, 12, ""},
      {"send data longer than data_length", h("0201 0001 0000000000000002 00000001 6869"),
       errc::trailing_bytes, 17, "data"},
      {"send data shorter than data_length", h("0201 0001 0000000000000002 00000003 6869"),
       errc::truncated, 18, "data"},
      {"flush request with a partial ref", h("0104 0001 0000000000000001 00000007 0000"),
       errc::trailing_bytes, 16, "pool_refs"},
      {"unknown function", h("0999 0001 0000000000000000"), errc::unknown_function, 0, "function"},
      {"function 0", h("0000 0001 0000000000000000"), errc::unknown_function, 0, "function"},
      {"version 2", h("0105 0002 0000000000000000"), errc::unsupported_version, 2, "version"},
      {"version 0", h("0105 0000 0000000000000000"), errc::unsupported_version, 2, "version"},
      {"pool_count 0", h("0101 0001 0000000000000000 00000000"), errc::zero_count, 12, "pool_count"},
      {"entry_count 0", h("0202 0001 0000000000000000 00000000"), errc::zero_count, 12, "entry_count"},
      {"flush request without refs", h("0104 0001 0000000000000000"), errc::zero_count, 12, "pool_refs"},
      {"pool_count 2, one pool",
       h("0101 0001 0000000000000000 00000002 00000001 00000001 00000001 00000000 0000000000000000 0000000000000000"),
       errc::count_mismatch, 12, "pool_count"},
      {"entry_count 1, two entries",
       h("0103 0001 0000000000000000 00000001 00000001 00000000 00000001 00000002 00000000 00000001"),
       errc::count_mismatch, 12, "entry_count"},
      {"pool cut inside", h("0101 0001 0000000000000000 00000001 00000001 00000001"), errc::truncated, 24, "pools"},
      {"frame over max_frame", huge, errc::too_large, 4096, ""},
      {"cfg reserved = 1", h("0301 0001 0000000000000004 0001 0001 00000000"), errc::reserved_nonzero, 14, "reserved"},
      {"pool element_count 0",
       h("0101 0001 0000000000000000 00000001 00000001 00000000 00000001 00000000 0000000000000000 0000000000000000"),
       errc::invalid_field, 20, "element_count"},
      {"second pool element_size 0",
       h("0101 0001 0000000000000000 00000002"
         "00000001 00000001 00000001 00000000 0000000000000000 0000000000000000"
         "00000002 00000001 00000000 00000000 0000000000000000 0000000000000000"),
       errc::invalid_field, 56, "element_size"},
  };
  std::set<errc> reached;
  for (const auto& f : frames) {
    INFO(f.what);
    auto r = msg::decode(f.bytes);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.code() == f.code);
    CHECK(r.error().offset == f.offset);
    CHECK(r.error().field == f.field);
    reached.insert(r.code());
  }

  SECTION("wrong_function: a typed decoder given another message") {
    auto r = msg::decode<msg::send_data>(vec::flush_reply.bytes);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.code() == errc::wrong_function);
    reached.insert(r.code());
    // An unknown code is still unknown_function for a typed decoder.
    const auto unknown = h("0999 0001 0000000000000000");
    CHECK(msg::decode<msg::send_data>(unknown).code() == errc::unknown_function);
  }
  SECTION("no_space: an encoder given a short buffer") {
    std::array<std::byte, 79> out{};
    auto n = msg::encode(vec::recv_pool.value, out);
    REQUIRE_FALSE(n.has_value());
    CHECK(n.code() == errc::no_space);
    reached.insert(n.code());
  }
  SECTION("encoders refuse what decoders refuse") {
    std::array<std::byte, 4200> out{};
    std::vector<std::byte> big(4081);
    CHECK(msg::encode(msg::send_data{.data = big}, out).code() == errc::too_large);
    CHECK(msg::encode(msg::send_data{.data = big}, out, {.max_frame = 5000}).has_value());
    std::vector<std::byte> fits(4080);
    CHECK(msg::encode(msg::send_data{.data = fits}, out).value() == 4096);
    CHECK(msg::encode(msg::buffer_recv_pool{}, out).code() == errc::zero_count);
    CHECK(msg::encode(msg::buffer_pool_flush_request{}, out).code() == errc::zero_count);
    const std::array<msg::pool_descriptor, 1> bad{{{.pool_ref = 1, .element_count = 0, .element_size = 1}}};
    auto e = msg::encode(msg::buffer_recv_pool{.pools = bad}, out);
    CHECK(e.code() == errc::invalid_field);
    CHECK(e.error().field == "element_count");
    CHECK(e.error().offset == 20);
    // The count is 31 bits: bit 31 of its word is the implicit flag (spec/push-push.md §5.1).
    const std::array<msg::pool_descriptor, 1> wide{{{.pool_ref = 1, .element_count = 0x80000000u, .element_size = 1}}};
    e = msg::encode(msg::buffer_recv_pool{.pools = wide}, out);
    CHECK(e.code() == errc::invalid_field);
    CHECK(e.error().field == "element_count");
    CHECK(msg::encode(msg::buffer_recv_pool_get{.element_size = 1, .element_count = 0x80000000u}, out).code() == errc::invalid_field);
    CHECK(msg::encode(msg::buffer_recv_pool_get{.element_size = 1, .element_count = 0x7FFFFFFFu, .implicit = true}, out).value() == 20);
    CHECK(out[16] == std::byte{0xFF});
    // A larger max_frame admits larger frames on decode too.
    std::vector<std::byte> frame(4097);
    REQUIRE(msg::encode(msg::send_data{.data = big}, frame, {.max_frame = 4097}).has_value());
    CHECK(msg::decode(frame).code() == errc::too_large);
    CHECK(msg::decode(frame, {.max_frame = 4097}).has_value());
  }
  SECTION("all codes") {
    // The sections above each add one code; this one needs the frame table's.
    for (errc e : {errc::truncated, errc::trailing_bytes, errc::unknown_function,
                   errc::unsupported_version, errc::zero_count, errc::count_mismatch,
                   errc::too_large, errc::reserved_nonzero, errc::invalid_field})
      CHECK(reached.count(e) == 1);
  }
}

TEST_CASE("errc as std::error_code", "[msg][errors]") {
  CHECK(wire::make_error_code(errc::count_mismatch).message() == "count_mismatch");
  CHECK(std::error_code(errc::too_large).category().name() == std::string("pushwire"));
}
