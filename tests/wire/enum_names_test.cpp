// Every name table of the library is tied to its enum at compile time: it lists exactly the
// enumerators, each once (wire/enum.hpp finds them from the compiler's spelling, not from the
// table). Error tables, and every table whose names are the identifiers, also spell each name as
// its enumerator. A table that drifts from its enum does not compile. That every table is here is
// checked too: tests/wire/enum_names_coverage.py finds each wire_enum_names() overload of
// include/pushwire and fails when this file has no check for its enum.
#include <catch2/catch.hpp>

#include <string>
#include <system_error>

#include <pushwire/cell/format.hpp>
#include <pushwire/flow/flow.hpp>
#include <pushwire/flow/tcp_agg.hpp>
#include <pushwire/ib/opcode.hpp>
#include <pushwire/msg/msg.hpp>
#include <pushwire/pp/cm.hpp>
#include <pushwire/pp/endpoint.hpp>
#include <pushwire/pp/lan.hpp>
#include <pushwire/rnic/core.hpp>
#include <pushwire/rnic/device.hpp>
#include <pushwire/rnic/memory.hpp>
#include <pushwire/rnic/platform.hpp>
#include <pushwire/rnic/migrate.hpp>
#include <pushwire/rnic/attach.hpp>
#include <pushwire/rnic/eswitch.hpp>
#include <pushwire/rnic/function.hpp>
#include <pushwire/rnic/qp.hpp>
#include <pushwire/rnic/queue.hpp>
#include <pushwire/wire/crc.hpp>
#include <pushwire/wire/enum.hpp>
#include <pushwire/wire/errc.hpp>

using namespace pushwire;

// Function codes reach 0x0302: scan that far.
template <>
inline constexpr std::size_t pushwire::wire::enum_scan_limit<msg::function> = 0x400;
// Opcodes are the BTH byte, plus 0x100 for the IBTA RD reading of 0x40-0x5F.
template <>
inline constexpr std::size_t pushwire::wire::enum_scan_limit<ib::opcode> = 0x200;

// The reflection itself, on an enum written here.
enum class sample : std::uint8_t { a = 1, b, z = 200 };
static_assert(wire::enumerator_count<sample> == 3);
static_assert(wire::enumerators<sample>[2].value == 200 && wire::enumerators<sample>[2].name == "z");
static_assert(wire::detail::enumerator_id<static_cast<sample>(4)>().empty());
inline constexpr wire::named_value sample_ok[] = {{sample::a, "A"}, {sample::b, "B"}, {sample::z, "Z"}};
inline constexpr wire::named_value sample_missing[] = {{sample::a, "A"}, {sample::b, "B"}};
inline constexpr wire::named_value sample_extra[] = {{sample::a, "A"}, {sample::b, "B"}, {sample::z, "Z"}, {4, "four"}};
inline constexpr wire::named_value sample_twice[] = {{sample::a, "A"}, {sample::a, "A2"}, {sample::z, "Z"}};
static_assert(wire::names_match<sample>(sample_ok));
static_assert(!wire::names_match<sample>(sample_missing));
static_assert(!wire::names_match<sample>(sample_extra));
static_assert(!wire::names_match<sample>(sample_twice));
static_assert(!wire::names_match<sample, true>(sample_ok));  // "A" is not the identifier "a"

// Error codes: every enumerator has its row, spelled as the enumerator.
static_assert(wire::names_match<wire::errc, true>());
static_assert(wire::names_match<flow::errc, true>());
// wire/
static_assert(wire::names_match<wire::crc_status, true>());
static_assert(wire::names_match<wire::crc_check, true>());
static_assert(wire::names_match<wire::crc::path, true>());
static_assert(wire::names_match<wire::crc::select_errc, true>());
static_assert(wire::names_match<wire::field_kind>());
// msg/
static_assert(wire::names_match<msg::function>());
static_assert(wire::names_match<msg::cfg::request_code>());
static_assert(wire::names_match<msg::cfg::status, true>());
// ib/
static_assert(wire::names_match<ib::ext>());
static_assert(wire::names_match<ib::transport>());
static_assert(wire::names_match<ib::position, true>());
static_assert(wire::names_match<ib::operation>());
static_assert(wire::flag_names_match<ib::op_class>());
static_assert(wire::names_match<ib::opcode>());
// cell/
static_assert(wire::names_match<cell::cell_type>());
static_assert(wire::names_match<cell::nak_code>());
// flow/
static_assert(wire::names_match<flow::wr_op>());
static_assert(wire::names_match<flow::wc_status, true>());
static_assert(wire::names_match<flow::req_state, true>());
static_assert(wire::names_match<flow::req_event>());
static_assert(wire::names_match<flow::rp_state, true>());
static_assert(wire::names_match<flow::tsa, true>());
static_assert(wire::names_match<flow::trust, true>());
static_assert(wire::names_match<flow::rp_event>());
static_assert(wire::names_match<flow::rp_timer, true>());
static_assert(wire::names_match<ib::ecn>());
static_assert(wire::names_match<flow::resp_state, true>());
static_assert(wire::names_match<flow::resp_event>());
static_assert(wire::names_match<flow::dci_state, true>());
static_assert(wire::names_match<flow::dci_event>());
static_assert(wire::names_match<flow::dct_state, true>());
static_assert(wire::names_match<flow::dct_event>());
static_assert(wire::names_match<flow::pool_state, true>());
static_assert(wire::names_match<flow::owner_event>());
static_assert(wire::names_match<flow::user_event>());
static_assert(wire::names_match<flow::pick_policy, true>());
static_assert(wire::names_match<flow::reseq_state, true>());
static_assert(wire::names_match<flow::reseq_event>());
static_assert(wire::names_match<flow::packet_crc_status, true>());
static_assert(wire::names_match<flow::access_kind, true>());
static_assert(wire::names_match<flow::invalid_reason, true>());
static_assert(wire::names_match<flow::rule>());
// rnic/
static_assert(wire::names_match<rnic::errc, true>());
static_assert(wire::names_match<rnic::key_kind, true>());
static_assert(wire::names_match<rnic::datapath, true>());
static_assert(wire::names_match<rnic::data_direction, true>());
static_assert(wire::names_match<rnic::bus_policy, true>());
static_assert(wire::names_match<rnic::mig_state, true>());
static_assert(wire::flag_names_match<rnic::access>());
static_assert(wire::names_match<rnic::wc_status, true>());
static_assert(wire::names_match<rnic::wc_opcode, true>());
static_assert(wire::names_match<rnic::qp_type>());
static_assert(wire::names_match<rnic::qp_state>());
static_assert(wire::flag_names_match<rnic::qp_attr_mask>());
static_assert(wire::names_match<rnic::framing, true>());
static_assert(wire::names_match<rnic::event_type, true>());
static_assert(wire::names_match<rnic::wr_opcode>());
static_assert(wire::names_match<rnic::fn_errc, true>());
static_assert(wire::names_match<rnic::ctl::msg_type, true>());
static_assert(wire::names_match<rnic::ctl::resource, true>());
static_assert(wire::names_match<rnic::tx_drop, true>());
static_assert(wire::names_match<rnic::rx_drop_reason, true>());
static_assert(wire::names_match<rnic::migration::src_state, true>());
static_assert(wire::names_match<rnic::migration::dst_state, true>());
static_assert(wire::names_match<rnic::migration::event, true>());
static_assert(wire::names_match<rnic::migration::action, true>());
// pp/
static_assert(wire::names_match<pp::errc, true>());
static_assert(wire::names_match<pp::state, true>());
static_assert(wire::names_match<pp::cm_state, true>());
static_assert(wire::names_match<pp::lan_errc, true>());
static_assert(wire::names_match<flow::agg_flush, true>());

TEST_CASE("enum names: the error tables agree with the enums at run time too", "[wire][enum]") {
  // The enumerators, found by reflection, not from the tables.
  CHECK(wire::enumerators<wire::errc>.size() == wire::errc_table.size());
  for (const auto& e : wire::enumerators<wire::errc>) {
    const auto code = static_cast<wire::errc>(e.value);
    CHECK(wire::to_string(code) == e.name);
    CHECK(std::error_code(code).message() == std::string{e.name});
  }
  CHECK(wire::enumerators<flow::errc>.size() == flow::errc_table.size());
  for (const auto& e : wire::enumerators<flow::errc>) {
    const auto code = static_cast<flow::errc>(e.value);
    CHECK(flow::name(code) == e.name);
    const std::error_code ec = code;
    CHECK(ec.message() == std::string{e.name});
    CHECK(std::string{ec.category().name()} == "pushwire.flow");
  }
  CHECK(flow::name(flow::errc{}) == "ok");
  CHECK(flow::name(static_cast<flow::errc>(250)) == "unknown");
  CHECK(std::error_code(wire::errc::too_large) != std::error_code(flow::errc::too_large));  // two categories
  CHECK(wire::enum_name(flow::req_event::ack) == "ACK/response");
  CHECK(wire::enum_name(ib::operation::send_first) == "SEND_FIRST");
}
