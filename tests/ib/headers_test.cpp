// Each IB header against bytes spelled by hand, at compile time and at run time; the opcode
// table's invariants; AETH syndromes and the RNR timer table; PSN arithmetic.
#include <algorithm>
#include <set>
#include <string>

#include <pushwire/ib/aeth.hpp>
#include <pushwire/ib/gid.hpp>
#include <pushwire/ib/headers.hpp>
#include <pushwire/ib/opcode.hpp>
#include <pushwire/ib/psn.hpp>

#include "../support/test_support.hpp"

using namespace pushwire;
using namespace pushwire::ib;

namespace {
// scapy roce.uts "UC SEND ONLY": opcode 0x24, MigReq, PadCnt 2, P_Key 0xFFFF, QP 211, PSN 13571856.
constexpr auto bth_bytes = test::hex<"24 60 ffff 00 0000d3 00 cf1710">();
constexpr bth bth_value{.opcode = 0x24, .m = true, .padcnt = 2, .p_key = 0xFFFF, .destqp = 211, .psn = 13571856};
constexpr auto bth_flags_bytes = test::hex<"0b 80 8001 c0 123456 80 000001">();  // SE, FECN+BECN, AckReq
constexpr bth bth_flags{.opcode = 0x0B, .se = true, .p_key = 0x8001, .fecn = true, .becn = true, .destqp = 0x123456, .a = true, .psn = 1};
constexpr auto reth_bytes = test::hex<"00007f0000010500 00001234 00000100">();
constexpr reth reth_value{.va = 0x00007f0000010500, .r_key = 0x1234, .dmalen = 256};
constexpr auto deth_bytes = test::hex<"80010000 00 000011">();
constexpr deth deth_value{.q_key = 0x80010000, .srcqp = 0x11};
constexpr auto aeth_bytes = test::hex<"30 000001">();  // RNR NAK, timer 16 (2.56 ms), MSN 1
constexpr auto atomic_bytes = test::hex<"0000000000001000 00000077 0000000000000001 0000000000000002">();
constexpr atomiceth atomic_value{.va = 0x1000, .r_key = 0x77, .swapdt = 1, .cmpdt = 2};
constexpr auto dcceth_bytes = test::hex<"00 000100 00 000042 0000000000000000">();
constexpr dcceth dcceth_value{.dct = 0x100, .dci = 0x42};
constexpr auto feth_bytes = test::hex<"00000025">();  // selectivity 2, placement 5
constexpr feth feth_value{.sel = 2, .plt = 5};

template <class T, std::size_t N>
constexpr bool exact(const T& v, const std::array<std::byte, N>& b) {
  return wire::to_bytes(v) == b && wire::decode<T>(b).has_value() && *wire::decode<T>(b) == v;
}
}  // namespace

static_assert(exact(bth_value, bth_bytes) && exact(bth_flags, bth_flags_bytes));
static_assert(exact(reth_value, reth_bytes) && exact(deth_value, deth_bytes) && exact(atomic_value, atomic_bytes));
static_assert(exact(page_fault_ack(1, 2000), aeth_bytes));
static_assert(exact(dcceth_value, dcceth_bytes) && exact(feth_value, feth_bytes));

TEST_CASE("ib headers: hand-spelled bytes at run time", "[ib][headers]") {
  auto check = [](const auto& v, const auto& bytes) {
    using T = std::remove_cvref_t<decltype(v)>;
    const auto b = test::copy(bytes);
    auto d = wire::decode<T>(b);
    REQUIRE(d.has_value());
    CHECK(*d == v);
    std::vector<std::byte> out(b.size());
    REQUIRE(wire::encode(v, out).value() == b.size());
    CHECK(out == b);
  };
  check(bth_value, bth_bytes);
  check(bth_flags, bth_flags_bytes);
  check(reth_value, reth_bytes);
  check(deth_value, deth_bytes);
  check(atomic_value, atomic_bytes);
  check(page_fault_ack(1, 2000), aeth_bytes);
  check(dcceth_value, dcceth_bytes);
  check(feth_value, feth_bytes);
  // DCCETH reserved bytes and the CNP's 16 bytes must be zero.
  auto bad = test::copy(dcceth_bytes);
  bad[8] = std::byte{1};
  CHECK(wire::decode<dcceth>(bad).error() == wire::error{wire::errc::reserved_nonzero, 8, "resv2"});
  std::vector<std::byte> cnp(16);
  cnp[15] = std::byte{1};
  CHECK(wire::decode<cnp_pad>(cnp).code() == wire::errc::reserved_nonzero);
}

TEST_CASE("opcode table: every entry is consistent", "[ib][opcode]") {
  std::set<std::pair<int, int>> seen;  // (code, dc?)
  std::size_t per[6] = {};
  for (const opcode_info& o : opcodes) {
    INFO(static_cast<int>(o.code) << " " << o.name);
    CHECK(seen.insert({o.code, o.tp == transport::dc}).second);  // no duplicate
    ++per[static_cast<int>(o.tp)];
    // Transport bits agree with the transport (DC shares RD's); 110 is manufacturer-specific.
    const int cls = o.code >> 5;
    if (o.tp == transport::rc) CHECK((cls == 0 || (cls == 6 && o.is(op_class::read_as_write))));
    if (o.tp == transport::uc) CHECK(cls == 1);
    if (o.tp == transport::rd || o.tp == transport::dc) CHECK(cls == 2);
    if (o.tp == transport::ud) CHECK(cls == 3);
    // Offsets are the running sum of header sizes from the 12-byte BTH.
    std::size_t off = 12;
    for (std::size_t i = 0; i < o.chain_len; ++i) {
      CHECK(o.offset[i] == off);
      off += size_of(o.chain[i]);
    }
    CHECK(o.header_len == off);
    // Structural rules from the notes: READ_RESPONSE first/last/only carry an AETH, middle not.
    if (o.is(op_class::read_response)) CHECK(o.has(ext::aeth) == (o.pos != position::middle));
    if (o.tp == transport::dc) CHECK((o.chain_len > 0 && o.chain[0] == ext::dceth));
    if (o.tp == transport::rd) CHECK(o.chain[0] == ext::rdeth);
    if (o.tp == transport::ud) CHECK(o.chain[0] == ext::deth);
  }
  CHECK(per[0] == 26);  // RC: all but RESYNC, and pushwire's READ_AS_WRITE
  CHECK(per[1] == 12);  // UC: sends and writes
  CHECK(per[2] == 23);  // RD: 0x40-0x55 and FLUSH
  CHECK(per[3] == 2);   // UD: SEND_ONLY, SEND_ONLY_IMM
  CHECK(per[4] == 23);  // DC: RD's operations but RESYNC, and CONNECT
  CHECK(per[5] == 1);   // CNP
  // Everything else is reserved: 256 codes, DC reading.
  int known = 0;
  for (int c = 0; c < 256; ++c) known += find_opcode(static_cast<std::uint8_t>(c)) != nullptr;
  CHECK(known == 26 + 12 + 23 + 2 + 1);
  // The chains the notes spell out.
  CHECK(info(opcode::rc_rdma_write_only_with_immediate).headers().size() == 2);  // RETH ImmDt
  CHECK(info(opcode::rc_rdma_write_only_with_immediate).offset_of(ext::immdt) == 28);
  CHECK(info(opcode::rc_atomic_acknowledge).header_len == 12 + 4 + 8);  // AETH AtomicAckETH
  CHECK(info(opcode::rc_flush).offset_of(ext::reth) == 16);             // FETH RETH
  CHECK(info(opcode::rc_atomic_write).fixed_payload == 8);
  CHECK(info(opcode::dc_connect).header_len == 36);                     // BTH DCETH DCCETH
  CHECK(info(opcode::dc_acknowledge).headers().size() == 3);            // DCETH RDETH AETH
  // The bytes, hand-spelled from IBTA vol. 1 table 38 (and rxe for FLUSH / ATOMIC_WRITE).
  CHECK(find_opcode(0x0B)->id == opcode::rc_rdma_write_only_with_immediate);
  CHECK(find_opcode(0x12)->id == opcode::rc_atomic_acknowledge);
  CHECK(find_opcode(0x1C)->id == opcode::rc_flush);
  CHECK(find_opcode(0x1D)->id == opcode::rc_atomic_write);
  CHECK(find_opcode(0x2B)->id == opcode::uc_rdma_write_only_with_immediate);
  CHECK(find_opcode(0x55)->id == opcode::dc_connect);
  CHECK(find_opcode(0x55, rd_class::ibta_rd)->id == opcode::rd_resync);
  CHECK(find_opcode(0x51)->id == opcode::dc_acknowledge);
  CHECK(find_opcode(0x65)->id == opcode::ud_send_only_with_immediate);
  CHECK(find_opcode(0x81)->id == opcode::cnp);
  CHECK(find_opcode(0xC0)->id == opcode::rc_read_as_write);  // pushwire's, in the manufacturer-specific range
  CHECK(info(opcode::rc_read_as_write).offset_of(ext::sinketh) == 12 + 16);
  CHECK(code(opcode::rd_send_first) == 0x40);
}

TEST_CASE("opcode class flags, hand-spelled from IBTA vol. 1 table 38 and rxe_opcode.c", "[ib][opcode]") {
  // Per BTH byte of RC (and, by the low five bits, of every transport): the kind letters
  // S send, W write, Rq read request, Rs read response, A atomic, K ack, I immediate,
  // V invalidate, F flush, X atomic write; the position o/f/m/l; 'r' request or 'p' response;
  // '$' a payload.
  struct row {
    std::uint8_t code;
    const char* flags;
  };
  const row rc[] = {
      {0x00, "S f r $"}, {0x01, "S m r $"}, {0x02, "S l r $"}, {0x03, "S I l r $"}, {0x04, "S o r $"},
      {0x05, "S I o r $"}, {0x06, "W f r $"}, {0x07, "W m r $"}, {0x08, "W l r $"}, {0x09, "W I l r $"},
      {0x0A, "W o r $"}, {0x0B, "W I o r $"}, {0x0C, "Rq o r"}, {0x0D, "Rs f p $"}, {0x0E, "Rs m p $"},
      {0x0F, "Rs l p $"}, {0x10, "Rs o p $"}, {0x11, "K o p"}, {0x12, "K A o p"}, {0x13, "A o r"},
      {0x14, "A o r"}, {0x16, "S V l r $"}, {0x17, "S V o r $"}, {0x1C, "F o r"}, {0x1D, "X o r $"},
  };
  auto flags_of = [](const std::string& f) {
    op_class c = op_class::none;
    std::size_t i = 0;
    while (i < f.size()) {
      std::size_t j = f.find(' ', i);
      if (j == std::string::npos) j = f.size();
      const std::string t = f.substr(i, j - i);
      i = j + 1;
      if (t == "S") c = c | op_class::send;
      else if (t == "W") c = c | op_class::write;
      else if (t == "Rq") c = c | op_class::read_request;
      else if (t == "Rs") c = c | op_class::read_response;
      else if (t == "A") c = c | op_class::atomic;
      else if (t == "K") c = c | op_class::ack;
      else if (t == "I") c = c | op_class::immediate;
      else if (t == "V") c = c | op_class::invalidate;
      else if (t == "F") c = c | op_class::flush;
      else if (t == "X") c = c | op_class::atomic_write;
      else if (t == "o") c = c | op_class::only;
      else if (t == "f") c = c | op_class::first;
      else if (t == "m") c = c | op_class::middle;
      else if (t == "l") c = c | op_class::last;
      else if (t == "r") c = c | op_class::request;
      else if (t == "p") c = c | op_class::response;
      else if (t == "$") c = c | op_class::payload;
      else FAIL("unknown flag " << t);
    }
    return c;
  };
  for (const row& r : rc) {
    const op_class want = flags_of(r.flags);
    INFO("RC 0x" << std::hex << int{r.code});
    const opcode_info* o = find_opcode(r.code);
    REQUIRE(o != nullptr);
    // RC requests may ask for an ACK.
    const bool request = (want & op_class::request) != op_class::none;
    CHECK(o->cls == (request ? (want | op_class::ack_req) : want));
    // The same operation on UC, RD, DC and UD has the same flags; ack_req on reliable ones only.
    for (transport t : {transport::uc, transport::rd, transport::dc, transport::ud}) {
      const auto other = opcode_of(t, o->op);
      if (!other) continue;
      const bool reliable = t != transport::uc && t != transport::ud;
      CHECK(info(*other).cls == (request && reliable ? (want | op_class::ack_req) : want));
    }
  }
  CHECK(info(opcode::rd_resync).cls == (op_class::resync | op_class::only | op_class::request | op_class::ack_req));
  CHECK(info(opcode::dc_connect).cls == (op_class::connect | op_class::only | op_class::request | op_class::ack_req));
  CHECK(info(opcode::cnp).cls == (op_class::cnp | op_class::only | op_class::request));
}

TEST_CASE("AETH syndromes and the RNR timer table", "[ib][aeth]") {
  CHECK(syndrome::ack(syndrome::unlimited_credits).raw == 0x1F);
  CHECK(syndrome{0x1F}.credits() == 0x1F);
  CHECK(syndrome{0x3F}.rnr_timer() == 0x1F);
  CHECK(syndrome{0x62}.nak_reason() == nak_code::remote_access_error);
  CHECK(syndrome{0x60}.kind() == aeth_kind::nak);
  CHECK(syndrome{0x40}.kind() == aeth_kind::reserved);
  CHECK_FALSE(syndrome{0x20}.credits().has_value());
  for (nak_code c : {nak_code::psn_sequence_error, nak_code::invalid_request, nak_code::remote_access_error,
                     nak_code::remote_operational_error, nak_code::invalid_rd_request})
    CHECK(syndrome::nak(c).nak_reason() == c);
  // Code <-> microseconds, both ways, for every code.
  CHECK(rnr_to_us(0) == 655360);
  CHECK(rnr_to_us(1) == 10);
  CHECK(rnr_to_us(31) == 491520);
  for (std::uint8_t c = 0; c < 32; ++c) CHECK(rnr_from_us(rnr_to_us(c)) == c);
  CHECK(rnr_from_us(0) == 1);     // 10 us is the shortest
  CHECK(rnr_from_us(11) == 2);    // rounds up: 20 us
  CHECK(rnr_from_us(2000) == 16); // 2.56 ms
  CHECK(rnr_from_us(491521) == 0);
  // The page-fault ACK carries its delay.
  CHECK(page_fault_delay_us(page_fault_ack(7, 2000)) == 2560u);
  CHECK_FALSE(page_fault_delay_us(aeth{.syndrome = 0x1F}).has_value());
}

TEST_CASE("the local ACK timeout: 4.096 us * 2^code, code 0 none", "[ib][aeth]") {
  CHECK_FALSE(local_ack_timeout_ns(0).has_value());
  CHECK(local_ack_timeout_ns(1) == 8192u);
  CHECK(local_ack_timeout_ns(8) == 1'048'576u);  // about 1 ms
  CHECK(local_ack_timeout_ns(14) == 67'108'864u);
  CHECK(local_ack_timeout_ns(31) == 4096ull << 31);  // about 2.4 hours
  static_assert(local_ack_timeout_ns(8) == 1'048'576u);
}

TEST_CASE("GIDs: IPv4-mapped and IPv6, and the GRH space of a UD receive both ways", "[ib][gid]") {
  static_assert(gid_v4(198, 18, 0, 1) == gid{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 198, 18, 0, 1});
  static_assert(is_v4(gid_v4(10, 0, 0, 1)) && !is_v4(gid{0xfd}));
  static_assert(v4_of(gid_v4(std::array<std::uint8_t, 4>{1, 2, 3, 4})) == std::array<std::uint8_t, 4>{1, 2, 3, 4});
  CHECK(gid_v4(198, 18, 0, 1) == gid{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 198, 18, 0, 1});
  CHECK_FALSE(is_v4(gid{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xfe, 1, 2, 3, 4}));
  // IPv4: TOS 0xb8, TTL 63, 198.18.0.1 -> 198.18.0.2 (a header as a frame carries it; options
  // after it are left out).
  const auto v4 = test::hex<"45b8003c00004000" "3f11" "0000" "c6120001" "c6120002" "01010101">();
  std::array<std::byte, grh_size> space{};
  space.fill(std::byte{0xee});
  write_grh(space, v4, false);
  CHECK(std::all_of(space.begin(), space.begin() + 20, [](std::byte b) { return b == std::byte{0}; }));
  CHECK(std::equal(space.begin() + 20, space.end(), v4.begin()));
  const auto g4 = read_grh(space);
  REQUIRE(g4.has_value());
  CHECK(*g4 == grh_info{.v6 = false, .sgid = gid_v4(198, 18, 0, 1), .dgid = gid_v4(198, 18, 0, 2), .traffic_class = 0xb8, .hop_limit = 63});
  // IPv6: traffic class 0x2a, flow label 0x12345, hop limit 64, fd00::1 -> fd00::2.
  const auto v6 = test::hex<"62a12345" "00281140" "fd000000000000000000000000000001" "fd000000000000000000000000000002">();
  write_grh(space, v6, true);
  CHECK(std::equal(space.begin(), space.end(), v6.begin()));
  const auto g6 = read_grh(space);
  REQUIRE(g6.has_value());
  CHECK(g6->v6);
  CHECK(g6->traffic_class == 0x2a);
  CHECK(g6->flow_label == 0x12345);
  CHECK(g6->hop_limit == 64);
  CHECK(g6->sgid == gid{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1});
  CHECK(g6->dgid == gid{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2});
  // Neither shape: nothing.
  space.fill(std::byte{0});
  CHECK_FALSE(read_grh(space).has_value());
  space[3] = std::byte{1};
  space[20] = std::byte{0x45};
  CHECK_FALSE(read_grh(space).has_value());  // a nonzero byte before the IPv4 header
}

TEST_CASE("PSN serial arithmetic", "[ib][psn]") {
  CHECK(psn_add(0xFFFFFE, 3) == 1);
  CHECK(psn_add(1, -3) == 0xFFFFFE);
  CHECK(psn_diff(1, 0xFFFFFE) == 3);
  CHECK(psn_diff(0xFFFFFE, 1) == -3);
  CHECK(psn_before(0xFFFFF0, 0x10));
  CHECK(psn_after(0x10, 0xFFFFF0));
  CHECK_FALSE(psn_before(5, 5));
  CHECK(psn_before(0, psn_half - 1));
  CHECK_FALSE(psn_before(0, psn_half));
  for (std::uint32_t p : {0u, 1u, 0x7FFFFFu, 0x800000u, 0xFFFFFFu})
    for (std::int64_t n : {-5, -1, 0, 1, 5, 0x7FFFFF})
      CHECK(psn_diff(psn_add(p, n), p) == n);
}
