// flow::pp_tracker: which host pairs speak push-push, which immediates are idata, and the pools'
// books and counts (spec/wireshark.md §3 "Claiming", "Pool books", §5). Expected values are
// written by hand from the rules, not computed by the tracker.
#include <array>
#include <vector>

#include <catch2/catch.hpp>

#include <pushwire/flow/pp_track.hpp>
#include <pushwire/msg/msg.hpp>

using namespace pushwire;
using flow::host;

namespace {

const host o = host::of(std::array<std::uint8_t, 4>{10, 0, 0, 1}, 4);  // the owner (advertises)
const host u = host::of(std::array<std::uint8_t, 4>{10, 0, 0, 2}, 4);  // the user
const host x = host::of(std::array<std::uint8_t, 4>{10, 0, 0, 3}, 4);  // someone else

template <class M>
std::vector<std::byte> enc(const M& m) {
  std::vector<std::byte> b(msg::encoded_size(m));
  REQUIRE(msg::encode(m, b));
  return b;
}
std::uint32_t imm(std::uint32_t pool, std::uint32_t el, std::uint32_t bytes) {
  return msg::to_imm(*msg::make_idata({pool, el, bytes}));
}
std::vector<std::byte> advertise(std::uint32_t ref, std::uint32_t n) {
  const std::array<msg::pool_descriptor, 1> d{{{.pool_ref = ref, .element_count = n, .element_size = 1024,
                                                 .memory_handle = 0x77, .address = 0x10000, .pool_context = 0}}};
  return enc(msg::buffer_recv_pool{.header = {.transaction_context = 1}, .pools = d});
}

}  // namespace

TEST_CASE("pp_tracker: idata is claimed only after a push-push message, for a pool the target advertised to the writer",
          "[flow][pp]") {
  flow::pp_tracker t;
  CHECK_FALSE(t.claimed(o, u));
  CHECK_FALSE(t.claims_idata(o, u, imm(0, 1, 100)));  // nothing decoded yet
  // Not push-push: a version-2 header; a payload of someone else's.
  auto v2 = advertise(0, 4);
  v2[3] = std::byte{2};
  CHECK_FALSE(t.message(o, u, v2));
  const std::array<std::byte, 40> other{};
  CHECK_FALSE(t.message(o, u, other));
  CHECK_FALSE(t.claimed(o, u));
  // CfgUtil claims the pair, in both directions, but names no pool.
  std::array<std::byte, 64> cfg{};
  const auto n = msg::cfg::encode_request<msg::cfg::request_code::get_link_state>(5, {}, cfg);
  REQUIRE(n);
  CHECK(t.message(u, o, std::span(cfg).first(*n)));
  CHECK(t.claimed(o, u));
  CHECK(t.claimed(u, o));
  CHECK_FALSE(t.claims_idata(o, u, imm(0, 1, 100)));
  // o advertises pool 0 to u.
  CHECK(t.message(o, u, advertise(0, 4)));
  CHECK(t.claims_idata(o, u, imm(0, 1, 100)));
  CHECK_FALSE(t.claims_idata(o, u, imm(7, 1, 100)));  // a pool never advertised
  CHECK_FALSE(t.claims_idata(u, o, imm(0, 1, 100)));  // u advertised nothing to o
  CHECK_FALSE(t.claims_idata(o, x, imm(0, 1, 100)));  // another host
  CHECK_FALSE(t.claims_idata(x, u, imm(0, 1, 100)));
}

TEST_CASE("pp_tracker: a pool's books and counts through writes, indications, returns and a flush", "[flow][pp]") {
  flow::pp_tracker t;
  t.begin_frame(1);
  REQUIRE(t.message(o, u, advertise(3, 4)));
  REQUIRE(t.touched().size() == 1);
  auto v = t.view(o, u, 3);
  REQUIRE(v);
  CHECK(v->elements == 4);
  CHECK(v->element_size == 1024);
  CHECK(v->state == flow::pool_state::active);
  CHECK(v->free == 4);
  CHECK(v->credits == 0);
  CHECK(v->lowest_free == 4);
  CHECK(v->advertised_frame == 1);
  // Two writes with idata into elements 0 and 1: 2 consumed.
  for (std::uint32_t el : {0u, 1u}) {
    t.begin_frame(2 + el);
    t.write(o, u, 3, 700, true);
    REQUIRE(t.indicate(o, u, msg::to_indication(msg::from_imm(imm(3, el, 700)))));
    CHECK(t.touched().size() == 1);
  }
  v = t.view(o, u, 3);
  CHECK(v->free == 2);
  CHECK(v->credits == 2);
  CHECK(v->writes == 2);
  CHECK(v->bytes == 1400);
  CHECK(v->lowest_free == 2);
  // An indication of an element already consumed is refused and changes nothing.
  const auto again = t.indicate(o, u, msg::to_indication(msg::from_imm(imm(3, 0, 700))));
  REQUIRE(again);
  CHECK_FALSE(again->ok());
  CHECK(t.view(o, u, 3)->credits == 2);
  // The owner returns element 0.
  const std::array<msg::pool_update_entry, 1> upd{{{3, 0, 1}}};
  t.begin_frame(5);
  REQUIRE(t.message(o, u, enc(msg::buffer_recv_pool_update{.header = {.transaction_context = 2}, .entries = upd})));
  v = t.view(o, u, 3);
  CHECK(v->free == 3);
  CHECK(v->credits == 1);
  CHECK(v->returns == 1);
  CHECK(v->lowest_free == 2);
  // The owner flushes pool 3: flushing, then the user's reply: flushed. One flush counted.
  const std::array<std::uint32_t, 1> refs{3};
  t.begin_frame(6);
  REQUIRE(t.message(o, u, enc(msg::buffer_pool_flush_request{.header = {.transaction_context = 9}, .pool_refs = refs})));
  CHECK(t.touched().size() == 1);
  CHECK(t.view(o, u, 3)->state == flow::pool_state::flushing);
  t.begin_frame(7);
  REQUIRE(t.message(u, o, enc(msg::buffer_pool_flush_reply{.header = {.transaction_context = 9}})));
  CHECK(t.touched().size() == 1);
  v = t.view(o, u, 3);
  CHECK(v->state == flow::pool_state::flushed);
  CHECK(v->flushes == 1);
  CHECK(v->lowest_free == 2);  // kept from while it was active
  // Still on the books: an idata naming it is push-push (and refused: written after the flush).
  CHECK(t.claims_idata(o, u, imm(3, 2, 10)));
  // every_pool lists it once.
  int rows = 0;
  t.each_pool([&](const flow::pool_view& p) {
    ++rows;
    CHECK(p.ref == 3);
    CHECK(p.owner == o);
    CHECK(p.user == u);
  });
  CHECK(rows == 1);
}

TEST_CASE("pp_tracker: a pool advertised again after its flush is active again, under the same row", "[flow][pp]") {
  flow::pp_tracker t;
  REQUIRE(t.message(o, u, advertise(0, 2)));  // slot 0
  REQUIRE(t.message(o, u, advertise(1, 2)));  // slot 1
  const std::array<std::uint32_t, 1> refs{0};
  REQUIRE(t.message(u, o, enc(msg::buffer_pool_flush_request{.header = {.transaction_context = 4}, .pool_refs = refs})));
  REQUIRE(t.view(o, u, 0)->state == flow::pool_state::flushed);
  REQUIRE(t.message(o, u, advertise(0, 3)));
  const auto v = t.view(o, u, 0);
  CHECK(v->state == flow::pool_state::active);
  CHECK(v->elements == 3);
  CHECK(v->free == 3);
  CHECK(v->flushes == 1);
  CHECK(t.view(o, u, 1)->state == flow::pool_state::active);
}

TEST_CASE("pp_tracker: a user's FlushRequest flushes the owner's pool at once", "[flow][pp]") {
  flow::pp_tracker t;
  REQUIRE(t.message(o, u, advertise(5, 2)));
  const std::array<std::uint32_t, 1> refs{5};
  t.begin_frame(2);
  REQUIRE(t.message(u, o, enc(msg::buffer_pool_flush_request{.header = {.transaction_context = 4}, .pool_refs = refs})));
  const auto v = t.view(o, u, 5);
  CHECK(v->state == flow::pool_state::flushed);
  CHECK(v->flushes == 1);
  CHECK(t.touched().size() == 1);
}

TEST_CASE("pp_tracker: bounds refuse new pairs, and reset forgets everything", "[flow][pp]") {
  flow::pp_tracker t({.max_pairs = 1, .max_claimed = 1, .max_pool_rows = 1});
  REQUIRE(t.message(o, u, advertise(0, 2)));
  CHECK(t.refused().empty());
  t.begin_frame(2);
  CHECK(t.message(x, u, advertise(1, 2)));  // decoded, but no room for x's books or claim
  CHECK(t.refused() == "max_pairs");
  CHECK_FALSE(t.claimed(x, u));
  CHECK(t.books(x, u) == nullptr);
  t.begin_frame(3);
  CHECK(t.refused().empty());
  CHECK(t.message(o, u, advertise(9, 2)));  // o's books take pool 9, but no row counts it
  CHECK(t.refused() == "max_pool_rows");
  CHECK_FALSE(t.view(o, u, 9));
  CHECK(t.claims_idata(o, u, imm(9, 0, 1)));
  CHECK(t.locate(o, u, 0x77, 0x10000 + 1024)->element == 1);
  t.reset();
  CHECK_FALSE(t.claimed(o, u));
  CHECK_FALSE(t.view(o, u, 0));
}

TEST_CASE("pp_tracker: locate finds the pool and element an address lands in, as the owner's books hold it", "[flow][pp]") {
  flow::pp_tracker t;
  CHECK_FALSE(t.locate(o, u, 0x77, 0x10000));  // no books
  t.begin_frame(5);
  REQUIRE(t.message(o, u, advertise(0, 4)));  // 4 x 1024 at 0x10000, memory handle 0x77
  const auto h = t.locate(o, u, 0x77, 0x10000 + 2 * 1024 + 10);
  REQUIRE(h);
  CHECK(h->desc.pool_ref == 0);
  CHECK(h->element == 2);
  CHECK(h->state == flow::pool_state::active);
  CHECK(h->advertised_frame == 5);
  CHECK(t.locate(o, u, 0x77, 0x10000 + 3 * 1024 + 1023)->element == 3);
  CHECK_FALSE(t.locate(o, u, 0x77, 0x10000 + 4 * 1024));  // past the last element
  CHECK_FALSE(t.locate(o, u, 0x77, 0x10000 - 1));
  CHECK_FALSE(t.locate(o, u, 0x78, 0x10000));  // another memory handle
  CHECK_FALSE(t.locate(u, o, 0x77, 0x10000));  // u advertised nothing to o
  CHECK_FALSE(t.locate(o, x, 0x77, 0x10000));  // nor o to x
  // Flushed, the pool is still found (a write after the flush lands in it).
  t.begin_frame(6);
  const std::array<std::uint32_t, 1> refs{0};
  REQUIRE(t.message(u, o, enc(msg::buffer_pool_flush_request{.header = {.transaction_context = 9}, .pool_refs = refs})));
  CHECK(t.locate(o, u, 0x77, 0x10000)->state == flow::pool_state::flushed);
  // Advertised again at the same address under another reference: the latest is found.
  t.begin_frame(7);
  REQUIRE(t.message(o, u, advertise(1, 4)));
  CHECK(t.locate(o, u, 0x77, 0x10000)->desc.pool_ref == 1);
  CHECK(t.locate(o, u, 0x77, 0x10000)->advertised_frame == 7);
}

TEST_CASE("send_joiner: FIRST, MIDDLE..., LAST in PSN order make one message, a gap or a bound loses it", "[flow][pp]") {
  using ib::position;
  const std::vector<std::byte> d{std::byte{1}, std::byte{2}, std::byte{3}, std::byte{4}, std::byte{5}, std::byte{6}};
  const std::span<const std::byte> s(d);
  flow::send_joiner j(6);
  CHECK_FALSE(j.add(position::first, 10, s.first(2), 1));
  CHECK_FALSE(j.add(position::middle, 11, s.subspan(2, 2), 2));
  auto m = j.add(position::last, 12, s.subspan(4), 3);
  REQUIRE(m);
  CHECK(std::vector<std::byte>(m->begin(), m->end()) == d);
  CHECK(j.first_frame() == 1);
  // An ONLY is a message by itself, an empty one too.
  m = j.add(position::only, 13, {}, 4);
  REQUIRE(m);
  CHECK(m->empty());
  CHECK(j.first_frame() == 4);
  // A MIDDLE lost (PSN 21 missing): the LAST ends nothing; nor does a LAST with nothing before it.
  CHECK_FALSE(j.add(position::first, 20, s.first(2), 5));
  CHECK_FALSE(j.add(position::last, 22, s.subspan(4), 6));
  CHECK_FALSE(j.add(position::last, 23, s.subspan(4), 7));
  // Longer than its bound: lost.
  flow::send_joiner small(5);
  CHECK_FALSE(small.add(position::first, 0xFFFFFF, s.first(4), 8));
  CHECK_FALSE(small.add(position::last, 0, s.subspan(4), 9));  // (the PSN wraps: in order)
  flow::send_joiner wrap(6);
  CHECK_FALSE(wrap.add(position::first, 0xFFFFFF, s.first(4), 8));
  CHECK(wrap.add(position::last, 0, s.subspan(4), 9));
  // Reset forgets the message in progress.
  CHECK_FALSE(wrap.add(position::first, 1, s.first(2), 10));
  wrap.reset();
  CHECK_FALSE(wrap.add(position::last, 2, s.subspan(2), 11));
}
