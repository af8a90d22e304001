// flow::observer: the facts a capture's history gives each frame. Frames are built with the
// library's codecs; every expected value is written out by hand from the pools, addresses and
// PSNs below (spec/cells.md §8 for the reassembly outcomes), never read back from the observer.
#include <vector>

#include <pushwire/cell/segmenter.hpp>
#include <pushwire/cell/testing.hpp>
#include <pushwire/flow/observer.hpp>
#include <pushwire/ib/roce.hpp>
#include <pushwire/msg/msg.hpp>

#include "../support/test_support.hpp"

using namespace pushwire;
using bytes = std::vector<std::byte>;
using flow::packet_crc_status;
using ib::ext;
using wire::errc;

namespace {

constexpr ib::mac_address mac_a{0x02, 0, 0, 0, 0, 0x0a}, mac_b{0x02, 0, 0, 0, 0, 0x0b};
constexpr ib::ipv4_address ip_a{192, 168, 1, 10}, ip_b{192, 168, 1, 11};

template <msg::message_type M>
bytes enc(const M& m) {
  bytes b(msg::encoded_size(m));
  REQUIRE(msg::encode(m, b));
  return b;
}

ib::roce_packet rc(bool a_to_b, ib::opcode op, std::uint32_t psn, std::uint32_t qp = 0x300) {
  ib::roce_packet s;
  s.eth.src = a_to_b ? mac_a : mac_b;
  s.eth.dst = a_to_b ? mac_b : mac_a;
  s.ip4.src = a_to_b ? ip_a : ip_b;
  s.ip4.dst = a_to_b ? ip_b : ip_a;
  s.bth = {.opcode = ib::code(op), .p_key = 0xFFFF, .destqp = qp, .a = true, .psn = psn};
  return s;
}

bytes frame_of(const ib::roce_packet& s) {
  bytes f(*ib::frame_size(s));
  REQUIRE(ib::build(s, f));
  return f;
}

// Pools 3 (8 x 4096 at 0x10000000) and 4 (2 x 65536 at 0x20000000), memory handle 0xABCD.
bytes advert(std::uint32_t first_ref = 3) {
  const std::array<msg::pool_descriptor, 2> pools{{{.pool_ref = first_ref, .element_count = 8, .element_size = 4096,
                                                    .memory_handle = 0xABCD, .address = 0x10000000},
                                                   {.pool_ref = first_ref + 1, .element_count = 2, .element_size = 65536,
                                                    .memory_handle = 0xABCD, .address = 0x20000000}}};
  return enc(msg::buffer_recv_pool{.header = {.transaction_context = 1}, .pools = pools});
}

// A cell packet from A to B (or back) as its frames, 100 data bytes per cell.
std::vector<bytes> cells(cell::packet_spec p, std::span<const std::byte> payload) {
  auto seg = cell::segmenter::make(p, payload, 100);
  REQUIRE(seg);
  std::vector<bytes> out;
  while (!seg->done()) {
    bytes f(seg->next_size());
    REQUIRE(seg->next(f));
    out.push_back(std::move(f));
  }
  return out;
}
cell::packet_spec cell_pkt(bool a_to_b, std::uint32_t psn, cell::cell_type t) {
  cell::packet_spec p{.dst = a_to_b ? mac_b : mac_a, .src = a_to_b ? mac_a : mac_b};
  p.src_wqp = a_to_b ? 0x10 : 0x20;
  p.dst_wqp = a_to_b ? 0x20 : 0x10;
  p.psn = psn;
  p.type = t;
  return p;
}

bytes data(std::size_t n) {
  bytes d(n);
  for (std::size_t i = 0; i < n; ++i) d[i] = static_cast<std::byte>(i * 7);
  return d;
}

}  // namespace

TEST_CASE("observer: an RDMA write lands in the pool and element its target advertised", "[flow][observer]") {
  flow::observer o;
  auto s = rc(false, ib::opcode::rc_send_only, 1, 0x200);  // B advertises
  const bytes m = advert();
  s.payload = m;
  CHECK(o.observe(1, 0, frame_of(s)).kind == flow::frame_kind::roce);

  // A writes 300 bytes at pool 3, element 2, offset 16, with idata naming pool 3 element 2.
  const bytes d = data(300);
  auto w = rc(true, ib::opcode::rc_rdma_write_only_with_immediate, 10);
  w.ext.set<ext::reth>({.va = 0x10000000 + 2 * 4096 + 16, .r_key = 0xABCD, .dmalen = 300});
  w.ext.set<ext::immdt>({.value = msg::to_imm(*msg::make_idata({3, 2, 300}))});
  w.payload = d;
  auto n = o.observe(2, 0, frame_of(w));
  REQUIRE(n.write);
  CHECK(n.write->pool == flow::observed_pool{3, 8, 4096, 0x10000000, 1});
  CHECK(n.write->element() == 2);
  CHECK(n.write->offset() == 16);
  CHECK(!n.idata_mismatch);
  CHECK(!n.outside);

  // The same with idata naming element 1: a mismatch.
  w.bth.psn = 11;
  w.ext.set<ext::immdt>({.value = msg::to_imm(*msg::make_idata({3, 1, 300}))});
  CHECK(o.observe(3, 0, frame_of(w)).idata_mismatch);

  // 300 bytes at offset 4000 of element 7 run past its end.
  auto over = rc(true, ib::opcode::rc_rdma_write_only, 12);
  over.ext.set<ext::reth>({.va = 0x10000000 + 7 * 4096 + 4000, .r_key = 0xABCD, .dmalen = 300});
  over.payload = d;
  n = o.observe(4, 0, frame_of(over));
  REQUIRE(n.write);
  CHECK(n.write->element() == 7);
  CHECK(n.outside);

  // FIRST, MIDDLE, LAST into pool 4 element 1: each packet continues 256 bytes further.
  const bytes part = data(256);
  auto f = rc(true, ib::opcode::rc_rdma_write_first, 13);
  f.ext.set<ext::reth>({.va = 0x20000000 + 65536, .r_key = 0xABCD, .dmalen = 640});
  f.payload = part;
  n = o.observe(5, 0, frame_of(f));
  REQUIRE(n.write);
  CHECK(n.write->pool.ref == 4);
  CHECK(n.write->offset() == 0);
  auto mid = rc(true, ib::opcode::rc_rdma_write_middle, 14);
  mid.payload = part;
  n = o.observe(6, 0, frame_of(mid));
  REQUIRE(n.write);
  CHECK(n.write->element() == 1);
  CHECK(n.write->offset() == 256);
  auto last = rc(true, ib::opcode::rc_rdma_write_last_with_immediate, 15);
  last.ext.set<ext::immdt>({.value = msg::to_imm(*msg::make_idata({4, 1, 640}))});
  last.payload = std::span(part).first(128);
  n = o.observe(7, 0, frame_of(last));
  REQUIRE(n.write);
  CHECK(n.write->offset() == 512);
  CHECK(n.write->start == 0x20010000);
  CHECK(!n.idata_mismatch);

  // Outside every pool, with idata naming pool 3 of this target: a mismatch, no place.
  auto stray = w;
  stray.bth.psn = 16;
  stray.ext.set<ext::reth>({.va = 0x90000000, .r_key = 0xABCD, .dmalen = 300});
  n = o.observe(8, 0, frame_of(stray));
  CHECK(!n.write);
  CHECK(n.idata_mismatch);

  // Another R_Key: no pool.
  auto other = over;
  other.ext.set<ext::reth>({.va = 0x10000000, .r_key = 0x1234, .dmalen = 4});
  CHECK(!o.observe(9, 0, frame_of(other)).write);
}

TEST_CASE("observer: a page-fault ACK names the frame of the write it answers", "[flow][observer]") {
  flow::observer o;
  const bytes d = data(64);
  auto w = rc(true, ib::opcode::rc_rdma_write_only, 15);
  w.ext.set<ext::reth>({.va = 0x1000, .r_key = 1, .dmalen = 64});
  w.payload = d;
  (void)o.observe(1, 0, frame_of(w));
  auto ack = rc(false, ib::opcode::rc_acknowledge, 15, 0x100);
  ack.ext.set<ext::aeth>(ib::page_fault_ack(2, 5000));
  CHECK(o.observe(2, 0, frame_of(ack)).write_frame == 1);
  // For another PSN, or an RNR NAK answering nothing seen: none.
  ack.bth.psn = 16;
  CHECK(o.observe(3, 0, frame_of(ack)).write_frame == 0);
  // A plain ACK is no page-fault ACK.
  ack.bth.psn = 15;
  ack.ext.set<ext::aeth>({.syndrome = ib::syndrome::ack(ib::syndrome::unlimited_credits).raw, .msn = 1});
  CHECK(o.observe(4, 0, frame_of(ack)).write_frame == 0);
}

TEST_CASE("observer: SEND_FIRST..LAST join into one message when in PSN order", "[flow][observer]") {
  flow::observer o;
  const bytes m = advert(7);  // 12 + 4 + 2 x 32 = 80 bytes
  REQUIRE(m.size() == 80);
  const std::span<const std::byte> ms(m);
  auto s1 = rc(false, ib::opcode::rc_send_first, 20, 0x200);
  s1.payload = ms.first(32);
  auto s2 = rc(false, ib::opcode::rc_send_middle, 21, 0x200);
  s2.payload = ms.subspan(32, 32);
  auto s3 = rc(false, ib::opcode::rc_send_last, 22, 0x200);
  s3.payload = ms.subspan(64);
  CHECK(o.observe(1, 0, frame_of(s1)).message.empty());
  CHECK(o.observe(2, 0, frame_of(s2)).message.empty());
  auto n = o.observe(3, 0, frame_of(s3));
  CHECK(n.message.size() == 80);
  CHECK(bytes(n.message.begin(), n.message.end()) == m);
  CHECK(n.message_first_frame == 1);
  // The joined message advertised pool 7: a write from A lands in it (frame 3 advertised it).
  auto w = rc(true, ib::opcode::rc_rdma_write_only, 40);
  w.ext.set<ext::reth>({.va = 0x10000000 + 4096, .r_key = 0xABCD, .dmalen = 0});
  auto nw = o.observe(4, 0, frame_of(w));
  REQUIRE(nw.write);
  CHECK(nw.write->pool.ref == 7);
  CHECK(nw.write->pool.frame == 3);
  CHECK(nw.write->element() == 1);
  // The middle packet lost: no message.
  s1.bth.psn = 30;
  s3.bth.psn = 32;
  CHECK(o.observe(5, 0, frame_of(s1)).message.empty());
  CHECK(o.observe(6, 0, frame_of(s3)).message.empty());
}

TEST_CASE("observer: cell duplicates, losses and reordering (spec/cells.md section 8)", "[flow][observer][cells]") {
  const bytes d = data(250);  // three cells: 100, 100, 50 bytes
  auto p = cell_pkt(true, 5, cell::cell_type::send);
  const auto c = cells(p, d);
  REQUIRE(c.size() == 3);
  using S = packet_crc_status;
  struct step {
    std::size_t cell;
    S crc;
    errc reassembly;
  };
  auto run = [&](std::vector<bytes> frames, std::vector<step> want) {
    flow::observer o;
    REQUIRE(frames.size() == want.size());
    for (std::size_t i = 0; i < frames.size(); ++i) {
      INFO("frame " << i + 1);
      const auto n = o.observe(i + 1, 1000 * i, frames[i]);
      CHECK(n.kind == flow::frame_kind::cell);
      CHECK(n.packet_crc == want[i].crc);
      CHECK(n.reassembly.code == want[i].reassembly);
      if (want[i].crc == S::good) CHECK(bytes(n.payload.begin(), n.payload.end()) == d);
    }
  };
  const errc ok{};
  SECTION("in order") { run({c[0], c[1], c[2]}, {{0, S::none, ok}, {1, S::none, ok}, {2, S::good, ok}}); }
  SECTION("a middle cell twice, same bytes: the copy is ignored, the packet completes") {
    run({c[0], c[1], c[1], c[2]},
        {{0, S::none, ok}, {1, S::none, ok}, {1, S::none, errc::cell_duplicate}, {2, S::good, ok}});
  }
  SECTION("the last cell twice: the copy is a duplicate of a delivered packet, unverified") {
    run({c[0], c[1], c[2], c[2]},
        {{0, S::none, ok}, {1, S::none, ok}, {2, S::good, ok}, {2, S::unverified, errc::cell_duplicate}});
  }
  SECTION("a middle cell twice, different bytes (resealed): the first copy counts") {
    bytes other = c[1];
    other[other.size() / 2] ^= std::byte{0x40};
    REQUIRE(cell::testing::reseal(other).code == errc{});
    run({c[0], c[1], other, c[2]},
        {{0, S::none, ok}, {1, S::none, ok}, {1, S::none, errc::cell_duplicate}, {2, S::good, ok}});
    // The changed copy first: it is taken, and the packet CRC catches it.
    run({c[0], other, c[1], c[2]},
        {{0, S::none, ok}, {1, S::none, ok}, {1, S::none, errc::cell_duplicate}, {2, S::bad, errc::packet_crc_mismatch}});
  }
  SECTION("a lost middle cell: the packet is dropped") {
    run({c[0], c[2]}, {{0, S::none, ok}, {2, S::unverified, errc::cell_out_of_order}});
  }
  SECTION("a lost first cell") { run({c[1], c[2]}, {{1, S::none, errc::cell_missing}, {2, S::unverified, errc::cell_missing}}); }
  SECTION("reordered cells: the packet is dropped at the early one") {
    run({c[0], c[2], c[1]}, {{0, S::none, ok}, {2, S::unverified, errc::cell_out_of_order}, {1, S::none, errc::cell_missing}});
  }
  SECTION("a bad cell CRC is not offered: the packet cannot complete") {
    bytes bad = c[1];
    bad[bad.size() / 2] ^= std::byte{0x40};
    run({c[0], bad, c[2]}, {{0, S::none, ok}, {1, S::none, ok}, {2, S::unverified, errc::cell_out_of_order}});
  }
}

TEST_CASE("observer: cell writes, idata, page-fault delays and pools from a cell Send", "[flow][observer][cells]") {
  flow::observer o;
  // B advertises pools 3 and 4 in a one-cell Send (81 bytes would not fit: 80 fit in one cell).
  const bytes m = advert();
  auto adv = cells(cell_pkt(false, 1, cell::cell_type::send), m);
  REQUIRE(adv.size() == 1);
  auto n = o.observe(1, 0, adv[0]);
  CHECK(n.packet_crc == packet_crc_status::good);
  CHECK(n.payload.size() == 80);
  // A writes 150 bytes at pool 3, element 5, offset 8; its idata names element 4.
  auto w = cell_pkt(true, 9, cell::cell_type::rdma_write);
  w.rdma = cell::vamh{.va = 0x10000000 + 5 * 4096 + 8, .mh = 0xABCD};
  w.idata = msg::to_imm(*msg::make_idata({3, 4, 150}));
  const bytes d = data(150);
  auto wc = cells(w, d);
  REQUIRE(wc.size() == 2);
  n = o.observe(2, 0, wc[0]);
  REQUIRE(n.write);
  CHECK(n.write->pool == flow::observed_pool{3, 8, 4096, 0x10000000, 1});
  CHECK(n.write->element() == 5);
  CHECK(n.write->offset() == 8);
  n = o.observe(3, 0, wc[1]);
  CHECK(n.idata_mismatch);
  CHECK(n.packet_crc == packet_crc_status::good);
  // B refuses it with a page-fault delay: linked to frame 2; the write sent again is a new packet.
  auto pfd = cell_pkt(false, 9, cell::cell_type::page_fault_delay);
  pfd.ack = cell::ack_info{.delay_us = 1500};
  auto pc = cells(pfd, {});
  n = o.observe(4, 0, pc[0]);
  CHECK(n.write_frame == 2);
  CHECK(n.packet_crc == packet_crc_status::good);
  CHECK(o.observe(5, 0, wc[0]).reassembly.code == errc{});
  n = o.observe(6, 0, wc[1]);
  CHECK(n.packet_crc == packet_crc_status::good);
  CHECK(n.reassembly.code == errc{});
  // The delay now answers the write's latest first cell, frame 5.
  CHECK(o.observe(7, 0, pc[0]).write_frame == 5);
}

TEST_CASE("observer: bounds are named, and reset forgets", "[flow][observer]") {
  flow::observer o({.max_write_cursors = 2, .pp = {.max_pairs = 1}});
  auto s = rc(false, ib::opcode::rc_send_only, 1, 0x200);
  const bytes m = advert();
  s.payload = m;
  CHECK(o.observe(1, 0, frame_of(s)).limit == flow::errc{});  // B's books for A
  auto back = rc(true, ib::opcode::rc_send_only, 2, 0x201);   // A advertises to B: no room for its books
  back.payload = m;
  auto n = o.observe(2, 0, frame_of(back));
  CHECK(n.limit == flow::errc::table_full);
  CHECK(n.limit_field == "max_pairs");
  auto w = rc(true, ib::opcode::rc_rdma_write_only, 10, 0x300);
  w.ext.set<ext::reth>({.va = 0x10000000, .r_key = 0xABCD, .dmalen = 0});
  n = o.observe(3, 0, frame_of(w));
  CHECK(n.limit == flow::errc{});
  REQUIRE(n.write);
  CHECK(n.write->pool.ref == 3);
  auto wb = rc(false, ib::opcode::rc_rdma_write_only, 12, 0x400);  // into A's pool 3: not kept
  wb.ext.set<ext::reth>({.va = 0x10000000, .r_key = 0xABCD, .dmalen = 0});
  n = o.observe(4, 0, frame_of(wb));
  CHECK(n.limit == flow::errc{});
  CHECK(!n.write);
  auto w2 = rc(true, ib::opcode::rc_rdma_write_only, 11, 0x301);  // a third QP: no cursor left
  w2.ext.set<ext::reth>({.va = 0x10000000, .r_key = 0xABCD, .dmalen = 0});
  n = o.observe(5, 0, frame_of(w2));
  CHECK(n.limit == flow::errc::table_full);
  CHECK(n.limit_field == "write_cursors");
  CHECK(!n.write);
  o.reset();
  CHECK(!o.observe(6, 0, frame_of(w)).write);  // the pools are gone
  // Not a frame of either kind.
  const bytes junk(60);
  CHECK(o.observe(7, 0, junk).kind == flow::frame_kind::other);
}

TEST_CASE("observer: a QP's requests that move to another address pair with MigReq set are a path migration", "[flow][observer][qos]") {
  const bytes d = data(16);
  auto on = [&](std::uint8_t net, std::uint32_t psn, bool mig, std::uint32_t qp = 0x300) {
    ib::roce_packet s = rc(true, ib::opcode::rc_send_only, psn, qp);
    s.ip4.src = {192, 168, net, 10};
    s.ip4.dst = {192, 168, net, 11};
    s.bth.m = mig;
    s.payload = d;
    return frame_of(s);
  };
  SECTION("armed on one pair, then MigReq on another: migrated from the first, its latest request's frame") {
    flow::observer o;
    CHECK(!o.observe(1, 0, on(1, 10, false)).migrated_from);
    CHECK(!o.observe(2, 0, on(1, 11, false)).migrated_from);
    const auto n = o.observe(3, 0, on(2, 12, true));
    REQUIRE(n.migrated_from);
    CHECK(n.migrated_from->src.text() == "192.168.1.10");
    CHECK(n.migrated_from->dst.text() == "192.168.1.11");
    CHECK(n.migrated_from->frame == 2);
    CHECK(!o.observe(4, 0, on(2, 13, true)).migrated_from);  // once
    // the ACK the other way is no request: not a move
    ib::roce_packet a = rc(false, ib::opcode::rc_acknowledge, 13, 0x400);
    a.ext.set<ext::aeth>({.syndrome = 0x1F, .msn = 1});
    a.bth.m = true;
    CHECK(!o.observe(5, 0, frame_of(a)).migrated_from);
  }
  SECTION("two pairs to one QP number (both directions of a connection): the one nearest in PSN moved") {
    flow::observer o;
    (void)o.observe(1, 0, on(1, 10, false));
    (void)o.observe(2, 0, on(2, 0x5000, false));
    const auto n = o.observe(3, 0, on(3, 12, true));
    REQUIRE(n.migrated_from);
    CHECK(n.migrated_from->src.text() == "192.168.1.10");
    const auto m = o.observe(4, 0, on(4, 0x4FF0, true));  // the other direction moves too
    REQUIRE(m.migrated_from);
    CHECK(m.migrated_from->src.text() == "192.168.2.10");
    CHECK(m.migrated_from->frame == 2);
  }
  SECTION("a migration back: rearmed on the new pair, the QP returns to the pair it left") {
    flow::observer o;
    (void)o.observe(1, 0, on(1, 10, false));
    REQUIRE(o.observe(2, 0, on(2, 11, true)).migrated_from);
    CHECK(!o.observe(3, 0, on(2, 12, false)).migrated_from);  // rearmed: MigReq clear again
    const auto n = o.observe(4, 0, on(1, 13, true));
    REQUIRE(n.migrated_from);
    CHECK(n.migrated_from->src.text() == "192.168.2.10");
    CHECK(n.migrated_from->frame == 3);
    CHECK(!o.observe(5, 0, on(1, 14, true)).migrated_from);  // once
  }
  SECTION("no move: MigReq clear on the new pair, a tie in PSN, too far in PSN, another QP, or no armed pair") {
    flow::observer o;
    (void)o.observe(1, 0, on(1, 10, false));
    CHECK(!o.observe(2, 0, on(2, 14, false)).migrated_from);  // MigReq clear: two pairs taken now
    CHECK(!o.observe(3, 0, on(3, 12, true)).migrated_from);   // 2 from each: a tie, not named
    CHECK(!o.observe(4, 0, on(4, 12, true, 0x301)).migrated_from);  // QP 0x301 had no armed pair
    flow::observer far;
    (void)far.observe(1, 0, on(1, 10, false));
    CHECK(!far.observe(2, 0, on(2, 10 + (1u << 16) + 1, true)).migrated_from);  // beyond psn_window
    flow::observer wrap;  // across the PSN wrap
    (void)wrap.observe(1, 0, on(1, 0xFFFFF0, false));
    CHECK(wrap.observe(2, 0, on(2, 0x10, true)).migrated_from);
    flow::observer edge;  // exactly psn_window away: still the same connection
    (void)edge.observe(1, 0, on(1, 10, false));
    CHECK(edge.observe(2, 0, on(2, 10 + (1u << 16), true)).migrated_from);
  }
}
