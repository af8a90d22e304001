// The plugin's C interface to the library (dissectors/wireshark/bridge.h), without Wireshark:
// built in every configuration, sanitizers included. This program's operator new fails on
// demand, to show that no exception leaves the bridge when memory runs out.
#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <pushwire/cell/format.hpp>
#include <pushwire/cell/segmenter.hpp>
#include <pushwire/ib/aeth.hpp>
#include <pushwire/ib/roce.hpp>
#include <pushwire/msg/cfg_util.hpp>
#include <pushwire/msg/msg.hpp>

#include "../../flow/conform_cases.hpp"
#include "bridge.h"

namespace {

/// While set, every allocation of this program fails (std::bad_alloc).
bool fail_allocations = false;

}  // namespace

// Every form of the plain operator new and delete is replaced, so that none of this program's
// allocations meets another's deallocation (AddressSanitizer checks the pairs). (g++ sees free()
// meet operator new's pointer where it inlines these: they are one pair here.)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void* operator new(std::size_t n) {
  if (fail_allocations) throw std::bad_alloc();
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return fail_allocations ? nullptr : std::malloc(n ? n : 1); }
void* operator new[](std::size_t n) { return ::operator new(n); }
void* operator new[](std::size_t n, const std::nothrow_t& t) noexcept { return ::operator new(n, t); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

namespace {

const std::uint8_t* u8(const std::vector<std::byte>& f) { return reinterpret_cast<const std::uint8_t*>(f.data()); }

/// Runs f with every allocation failing; whether an exception came out.
template <class F>
bool throws_out_of_memory(F&& f) {
  bool threw = false;
  fail_allocations = true;
  try {
    f();
  } catch (...) {
    threw = true;
  }
  fail_allocations = false;
  return threw;
}

using namespace pushwire;

template <class M>
std::vector<std::uint8_t> enc(const M& m) {
  std::vector<std::uint8_t> b(msg::encoded_size(m));
  REQUIRE(msg::encode(m, std::as_writable_bytes(std::span(b))));
  return b;
}

std::string summary(const std::vector<std::uint8_t>& b, std::size_t cap = 200) {
  std::vector<char> out(cap + 1, 'X');
  const std::size_t n = pw_msg_summary(b.data(), b.size(), out.data(), cap);
  if (cap == 0) {
    CHECK(out[0] == 'X');
    return {};
  }
  CHECK(std::strlen(out.data()) == n);
  return out.data();
}

}  // namespace

TEST_CASE("bridge: message check and summary") {
  const std::array<msg::pool_descriptor, 2> pools{{{.pool_ref = 1, .element_count = 2, .element_size = 3},
                                                   {.pool_ref = 4, .element_count = 5, .element_size = 6}}};
  const auto m = enc(msg::buffer_recv_pool{.header = {.transaction_context = 0x2a}, .pools = pools});
  pw_err e{};
  CHECK(pw_msg_check(m.data(), m.size(), &e) == 0);
  CHECK(e.code == 0);
  CHECK(summary(m) == "BufferRecvPool txn=0x2a pools=2");
  CHECK(summary(enc(msg::buffer_recv_pool_get{.header = {.transaction_context = 5}, .element_size = 2048,
                                              .element_count = 16})) ==
        "BufferRecvPoolGet txn=0x5 element_size=2048 element_count=16");
  CHECK(summary(enc(msg::buffer_recv_pool_get{.header = {.transaction_context = 5}, .element_size = 2048,
                                              .element_count = 16, .implicit = true})) ==
        "BufferRecvPoolGet txn=0x5 element_size=2048 element_count=16 implicit");
  std::array<std::byte, 64> buf{};
  const auto n = msg::cfg::encode_request<msg::cfg::request_code::get_statistics>(9, {}, buf);
  const std::vector<std::uint8_t> cfg(reinterpret_cast<const std::uint8_t*>(buf.data()),
                                      reinterpret_cast<const std::uint8_t*>(buf.data()) + *n);
  CHECK(summary(cfg) == "CfgUtilRequest txn=0x9 request_code=GetStatistics data=0");  // reserved: unsaid
  // Truncation keeps a terminated prefix; a zero capacity writes nothing.
  CHECK(summary(m, 10) == "BufferRec");
  CHECK(summary(m, 1).empty());
  summary(m, 0);
  // Errors name the library's code, byte and field.
  CHECK(pw_msg_check(m.data(), m.size() - 1, &e) == static_cast<int>(wire::errc::truncated));
  CHECK(std::string{e.name} == "truncated");
  auto v2 = m;
  v2[3] = 2;
  CHECK(pw_msg_check(v2.data(), v2.size(), &e) == static_cast<int>(wire::errc::unsupported_version));
  CHECK(e.offset == 2);
  CHECK(std::string{e.field} == "version");
  CHECK(summary(v2).empty());
  // The pools of a BufferRecvPool; CfgUtil data; nothing from other messages.
  std::array<pw_pool_desc, 4> d{};
  CHECK(pw_msg_pools(m.data(), m.size(), d.data(), 1) == 2);
  CHECK((d[0].ref == 1 && d[0].elements == 2 && d[0].element_size == 3 && d[1].ref == 0));
  CHECK(pw_msg_pools(m.data(), m.size(), d.data(), d.size()) == 2);
  CHECK((d[1].ref == 4 && d[1].elements == 5 && d[1].element_size == 6));
  CHECK(pw_msg_pools(cfg.data(), cfg.size(), d.data(), d.size()) == 0);
  std::uint16_t code = 0;
  int reply = -1;
  std::size_t at = 0, size = 9;
  CHECK(pw_msg_cfg_data(cfg.data(), cfg.size(), &code, &reply, &at, &size) == 1);
  CHECK((code == 3 && reply == 0 && at == 20 && size == 0));
  CHECK(pw_msg_cfg_data(m.data(), m.size(), &code, &reply, &at, &size) == 0);
  CHECK(pw_opcode_send_position(ib::code(ib::opcode::rc_send_only)) == PW_POS_ONLY);
  CHECK(pw_opcode_send_position(ib::code(ib::opcode::rc_send_only_with_immediate)) == PW_POS_ONLY);
  CHECK(pw_opcode_send_position(ib::code(ib::opcode::rc_send_only_with_invalidate)) == PW_POS_ONLY);
  CHECK(pw_opcode_send_position(ib::code(ib::opcode::ud_send_only)) == PW_POS_ONLY);
  CHECK(pw_opcode_send_position(ib::code(ib::opcode::dc_send_only)) == PW_POS_ONLY);
  CHECK(pw_opcode_send_position(ib::code(ib::opcode::rc_send_first)) == PW_POS_FIRST);
  CHECK(pw_opcode_send_position(ib::code(ib::opcode::uc_send_middle)) == PW_POS_MIDDLE);
  CHECK(pw_opcode_send_position(ib::code(ib::opcode::rc_send_last_with_immediate)) == PW_POS_LAST);
  CHECK(pw_opcode_send_position(ib::code(ib::opcode::rc_send_last_with_invalidate)) == PW_POS_LAST);
  CHECK(pw_opcode_send_position(ib::code(ib::opcode::rc_rdma_write_only)) == -1);
  CHECK(pw_opcode_send_position(0x18) == -1);  // a reserved BTH byte (no opcode names it)
  CHECK(pw_msg_max_frame() == 4096);
  CHECK(std::string{pw_function_name(0x0202)} == "BufferRDMAIndicate");
  CHECK(std::string{pw_function_name(0x0999)}.empty());
}

TEST_CASE("bridge: idata and opcode names") {
  std::uint32_t pool = 0, element = 0, bytes = 0;
  pw_idata(0x07050100, &pool, &element, &bytes);
  CHECK((pool == 7 && element == 5 && bytes == 256));
  pw_idata(0xFFFF0000, &pool, &element, &bytes);
  CHECK((pool == 255 && element == 255 && bytes == 65536));
  CHECK(std::string{pw_opcode_name(ib::code(ib::opcode::rc_send_only), 0)} == "RC_SEND_ONLY");
  CHECK(std::string{pw_opcode_name(ib::code(ib::opcode::dc_connect), 0)} == "DC_CONNECT");
  CHECK(std::string{pw_opcode_name(ib::code(ib::opcode::dc_connect), 1)} == "DC_DISCONNECT");
  CHECK(std::string{pw_opcode_name(0x18, 0)}.empty());
}

TEST_CASE("bridge: a RoCE frame's offsets, ICRC and page-fault delay") {
  ib::roce_packet s;
  s.ip4.src = {10, 0, 0, 1};
  s.ip4.dst = {10, 0, 0, 2};
  s.bth = {.opcode = ib::code(ib::opcode::dc_rdma_write_only), .destqp = 0xABC, .psn = 77};
  s.ext.set<ib::ext::dceth>({.access_key = 1}).set<ib::ext::rdeth>({}).set<ib::ext::deth>({.srcqp = 5});
  s.ext.set<ib::ext::reth>({.va = 0x1000, .r_key = 0x55, .dmalen = 3});
  const std::array<std::byte, 3> three{};
  s.payload = three;
  std::vector<std::uint8_t> f(*ib::frame_size(s));
  REQUIRE(ib::build(s, std::as_writable_bytes(std::span(f))));
  pw_roce r{};
  REQUIRE(pw_roce_inspect(f.data(), f.size(), &r) == 0);
  CHECK(r.icrc_state == PW_CRC_GOOD);
  CHECK(r.icrc_offset == f.size() - 4);
  CHECK(r.icrc_computed == r.icrc);
  CHECK(r.bth_offset == 14 + 20 + 8);
  CHECK(r.dceth_offset == r.bth_offset + 12);
  CHECK(r.reth_offset == r.bth_offset + 12 + 8 + 4 + 8);
  CHECK(r.dcceth_offset == 0);
  CHECK((r.write && r.dc && r.request && !r.send));
  CHECK((r.payload_len == 3 && r.payload_offset == r.reth_offset + 16));
  CHECK((r.reth_va == 0x1000 && r.reth_rkey == 0x55 && r.reth_len == 3 && r.psn == 77 && r.destqp == 0xABC));
  CHECK((r.src_ip[3] == 1 && r.dst_ip[3] == 2 && r.src_ip[4] == 0));
  f.back() ^= 1;
  REQUIRE(pw_roce_inspect(f.data(), f.size(), &r) == 0);
  CHECK(r.icrc_state == PW_CRC_BAD);
  CHECK(r.icrc_computed == (r.icrc ^ 0x01000000u));
  // A page-fault ACK: its RNR timer as microseconds.
  ib::roce_packet a;
  a.bth = {.opcode = ib::code(ib::opcode::rc_acknowledge), .psn = 77};
  a.ext.set<ib::ext::aeth>(ib::page_fault_ack(1, 2000));
  std::vector<std::uint8_t> g(*ib::frame_size(a));
  REQUIRE(ib::build(a, std::as_writable_bytes(std::span(g))));
  REQUIRE(pw_roce_inspect(g.data(), g.size(), &r) == 0);
  CHECK((r.rnr_nak && r.rnr_delay_us == 2560 && !r.request && r.aeth_offset == r.bth_offset + 12));
  // Not RoCE: the library's error.
  g[12] = 0x88;
  CHECK(pw_roce_inspect(g.data(), g.size(), &r) == static_cast<int>(wire::errc::not_roce));
  CHECK(std::string{r.err.field} == "eth.type");
}

TEST_CASE("bridge: a cell's parts, CRCs and packet CRC") {
  const std::array<std::byte, 5> data{std::byte{1}, std::byte{2}, std::byte{3}, std::byte{4}, std::byte{5}};
  cell::cell_spec s{.hdr = {.type = cell::cell_type::rdma_write, .first = true, .last = true, .psn = 9, .cell_count = 1},
                    .rdma = cell::vamh{.va = 0x4000, .mh = 0x77},
                    .idata = 0x07050005,
                    .data = data};
  std::vector<std::uint8_t> f(cell::frame_size(s));
  REQUIRE(cell::encode(s, std::as_writable_bytes(std::span(f))));
  pw_cell c{};
  REQUIRE(pw_cell_decode(f.data(), f.size(), &c) == 0);
  CHECK((c.header == 14 && c.vamh == 32 && c.idata == 44 && c.data == 48 && c.length == 5));
  CHECK((c.va == 0x4000 && c.mh == 0x77 && c.idata_value == 0x07050005 && c.psn == 9));
  CHECK((c.crc_state == PW_CRC_GOOD && c.crc_computed == c.crc));
  CHECK((!pw_cell_is_send(c.type) && !pw_cell_is_page_fault(c.type)));
  CHECK(std::string{c.type_name} == "RDMAWrite");
  f[c.data] ^= 0xFF;
  REQUIRE(pw_cell_decode(f.data(), f.size(), &c) == 0);
  CHECK(c.crc_state == PW_CRC_BAD);
  CHECK(c.crc_computed == wire::crc::crc32c(std::as_bytes(std::span(f)).first(c.cell_crc_at)));
  CHECK(pw_cell_decode(f.data(), 20, &c) == static_cast<int>(wire::errc::truncated));
}

TEST_CASE("bridge: the observer's notes in C (a cell packet, a duplicate, reset)") {
  std::vector<std::uint8_t> data(300);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::uint8_t>(i);
  cell::packet_spec p{.dst = {2, 0, 0, 0, 0, 0xb}, .src = {2, 0, 0, 0, 0, 0xa}, .dst_wqp = 0x20, .src_wqp = 0x10, .psn = 3};
  auto seg = cell::segmenter::make(p, std::as_bytes(std::span(data)));  // cells of 256 and 44 bytes
  REQUIRE(seg);
  std::vector<std::vector<std::uint8_t>> c;
  while (!seg->done()) {
    c.emplace_back(seg->next_size());
    REQUIRE(seg->next(std::as_writable_bytes(std::span(c.back()))));
  }
  REQUIRE(c.size() == 2);
  pw_observer* o = pw_observer_new();
  REQUIRE(o);
  pw_note n{};
  pw_observer_feed(o, 1, 1000, c[0].data(), c[0].size(), &n);
  CHECK((n.packet_crc == PW_PACKET_CRC_NONE && n.reassembly_code == 0 && std::string{n.reassembly_name}.empty()));
  pw_observer_feed(o, 2, 2000, c[1].data(), c[1].size(), &n);
  CHECK(n.packet_crc == PW_PACKET_CRC_GOOD);
  REQUIRE(n.send_data_len == 300);
  CHECK(std::vector<std::uint8_t>(n.send_data, n.send_data + 300) == data);
  pw_observer_feed(o, 3, 3000, c[1].data(), c[1].size(), &n);  // the last cell again
  CHECK(n.packet_crc == PW_PACKET_CRC_UNVERIFIED);
  CHECK(n.reassembly_code == 24);
  CHECK(std::string{n.reassembly_name} == "cell_duplicate");
  CHECK(n.send_data == nullptr);
  pw_observer_reset(o);  // a new capture: the last cell alone has no packet
  pw_observer_feed(o, 1, 0, c[1].data(), c[1].size(), &n);
  CHECK(std::string{n.reassembly_name} == "cell_missing");
  CHECK(n.limit == 0);
  pw_observer_free(o);
}

TEST_CASE("bridge: the conformance checker in C, as pushwire-conform judges") {
  using namespace pushwire::test::conform;
  // resp.ack_psn's capture: judged at the end, at frame 4.
  const auto cases = rule_cases();
  const auto& bad = *std::find_if(cases.begin(), cases.end(), [](const rule_case& c) { return c.id == flow::rule::resp_ack_psn; });
  pw_conform* k = pw_conform_new(0);
  REQUIRE(k);
  std::array<pw_violation, 4> v{};
  for (std::size_t i = 0; i < bad.cap.frames.size(); ++i) {
    const auto& f = bad.cap.frames[i];
    CHECK(pw_conform_feed(k, static_cast<std::uint32_t>(i + 1), bad.cap.times[i], u8(f), f.size(), f.size(), v.data(), v.size()) == 0);
  }
  REQUIRE(pw_conform_finish(k, v.data(), v.size()) == 1);
  CHECK(v[0].frame == bad.frame);
  CHECK(std::string{v[0].name} == "resp.ack_psn");
  CHECK(v[0].rule == static_cast<int>(flow::rule::resp_ack_psn));
  CHECK(std::string{v[0].text}.find("never sent") != std::string::npos);
  // Configured complete: a response before its request, at once; a reset keeps the configuration.
  const auto whole = complete_cases();
  const auto& early = *std::find_if(whole.begin(), whole.end(), [](const rule_case& c) { return c.id == flow::rule::resp_ack_psn; });
  for (const int complete : {0, 1}) {
    REQUIRE(pw_conform_configure(k, 0, complete) == 0);
    pw_conform_reset(k);
    std::size_t seen = 0;
    for (std::size_t i = 0; i < early.cap.frames.size(); ++i) {
      const auto& f = early.cap.frames[i];
      const std::size_t n = pw_conform_feed(k, static_cast<std::uint32_t>(i + 1), early.cap.times[i], u8(f), f.size(), f.size(), v.data(), v.size());
      if (n) CHECK(i + 1 == early.frame);
      seen += n;
    }
    seen += pw_conform_finish(k, v.data(), v.size());
    CHECK(seen == (complete ? 1u : 0u));
  }
  pw_conform_free(k);
}

TEST_CASE("bridge: no exception leaves the bridge when memory runs out") {
  using namespace pushwire::test::conform;
  const auto cases = rule_cases();
  const auto& bad = *std::find_if(cases.begin(), cases.end(), [](const rule_case& c) { return c.id == flow::rule::resp_ack_psn; });
  const auto& fs = bad.cap.frames;
  std::array<pw_violation, 4> v{};
  pw_conform* k = pw_conform_new(0);
  REQUIRE(k);
  // The first frame needs a new stream: out of memory, no verdict, and none until a reset.
  std::size_t n = 99;
  CHECK(!throws_out_of_memory([&] { n = pw_conform_feed(k, 1, bad.cap.times[0], u8(fs[0]), fs[0].size(), fs[0].size(), v.data(), v.size()); }));
  CHECK(n == 0);
  for (std::size_t i = 1; i < fs.size(); ++i)
    CHECK(pw_conform_feed(k, static_cast<std::uint32_t>(i + 1), bad.cap.times[i], u8(fs[i]), fs[i].size(), fs[i].size(), v.data(), v.size()) == 0);
  CHECK(pw_conform_finish(k, v.data(), v.size()) == 0);
  // After a reset it judges again; the end's verdicts need memory too.
  pw_conform_reset(k);
  for (std::size_t i = 0; i < fs.size(); ++i)
    (void)pw_conform_feed(k, static_cast<std::uint32_t>(i + 1), bad.cap.times[i], u8(fs[i]), fs[i].size(), fs[i].size(), v.data(), v.size());
  n = 99;
  CHECK(!throws_out_of_memory([&] { n = pw_conform_finish(k, v.data(), v.size()); }));
  CHECK(n == 0);
  pw_conform_reset(k);
  for (std::size_t i = 0; i < fs.size(); ++i)
    (void)pw_conform_feed(k, static_cast<std::uint32_t>(i + 1), bad.cap.times[i], u8(fs[i]), fs[i].size(), fs[i].size(), v.data(), v.size());
  CHECK(pw_conform_finish(k, v.data(), v.size()) == 1);
  pw_conform_free(k);
  // The observer: an empty note.
  pw_observer* o = pw_observer_new();
  REQUIRE(o);
  pw_note note{};
  note.idata = 7;
  CHECK(!throws_out_of_memory([&] { pw_observer_feed(o, 1, 0, u8(fs[0]), fs[0].size(), &note); }));
  CHECK(note.idata == 0);
  CHECK(!throws_out_of_memory([&] { pw_observer_reset(o); }));
  pw_observer_free(o);
}
