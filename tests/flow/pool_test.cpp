// Buffer-pool credits and flush: one transition at a time from a known state (table-driven),
// then scenarios across both sides with messages encoded and decoded on the way.
#include <catch2/catch.hpp>

#include <functional>
#include <string>
#include <vector>

#include "harness.hpp"

using namespace pwtest;

namespace {

using owner = pool_owner<2, 8>;
using user = pool_user<2, 8>;
using A = pool_action_t;

constexpr msg::pool_descriptor pool7{.pool_ref = 7, .element_count = 4, .element_size = 256, .memory_handle = 0x1234,
                                     .address = 0x10000, .pool_context = 0};

owner owner_with_pool() {
  owner o;
  (void)collect<A>([&](pool_sink& s) { return o.advertise(pool7, s); });
  return o;
}
user user_with_pool(pool_user_config c = {}) {
  user u(c);
  (void)collect<A>([&](pool_sink& s) { return u.on_pool(pool7, s); });
  return u;
}
msg::buffer_pool_flush_reply reply(std::uint64_t txn) { return {.header = {.transaction_context = txn}}; }

/// What kind of action each is (for compact expectations).
std::string kinds(const std::vector<A>& v) {
  static constexpr const char* names[] = {"recv_pool", "get", "update", "flush_request", "flush_reply", "indicate",
                                          "write", "deliver", "deregister", "declined", "fault"};
  std::string s;
  for (const A& a : v) s += std::string(s.empty() ? "" : " ") + names[a.index()];
  return s;
}

template <class M>
struct one_step {
  std::string name;
  std::function<M()> given;
  std::function<step_result(M&, pool_sink&)> when;
  pool_state then;
  std::string actions;
  errc error{};
};

}  // namespace

TEST_CASE("pool owner: each transition from a known state") {
  const std::vector<one_step<owner>> cases{
      {"advertise", [] { return owner{}; }, [](owner& o, pool_sink& s) { return o.advertise(pool7, s); }, pool_state::active, "recv_pool"},
      {"indication of a lent element", owner_with_pool,
       [](owner& o, pool_sink& s) { return o.on_indication({7, 2, 100}, s); }, pool_state::active, "deliver"},
      {"indication larger than the element", owner_with_pool,
       [](owner& o, pool_sink& s) { return o.on_indication({7, 2, 257}, s); }, pool_state::active, "fault", errc::too_large},
      {"indication of an element not lent", owner_with_pool,
       [](owner& o, pool_sink& s) { return o.on_indication({7, 9, 1}, s); }, pool_state::active, "fault", errc::element_not_on_loan},
      {"second indication of the same element",
       [] {
         owner o = owner_with_pool();
         (void)collect<A>([&](pool_sink& s) { return o.on_indication({7, 1, 10}, s); });
         return o;
       },
       [](owner& o, pool_sink& s) { return o.on_indication({7, 1, 10}, s); }, pool_state::active, "fault", errc::element_not_on_loan},
      {"release returns with an update",
       [] {
         owner o = owner_with_pool();
         (void)collect<A>([&](pool_sink& s) { return o.on_indication({7, 1, 10}, s); });
         return o;
       },
       [](owner& o, pool_sink& s) { return o.release(7, 1, 1, s); }, pool_state::active, "update"},
      {"release of an element the application does not hold", owner_with_pool,
       [](owner& o, pool_sink& s) { return o.release(7, 0, 1, s); }, pool_state::active, "", errc::element_not_held},
      {"flush", owner_with_pool, [](owner& o, pool_sink& s) { return o.flush(7, s); }, pool_state::flushing, "flush_request"},
      {"flush reply deregisters",
       [] {
         owner o = owner_with_pool();
         (void)collect<A>([&](pool_sink& s) { return o.flush(7, s); });
         return o;
       },
       [](owner& o, pool_sink& s) { return o.on_flush_reply(reply(2), s); }, pool_state::flushed, "deregister"},
      {"flush reply with another txn is not ours",
       [] {
         owner o = owner_with_pool();
         (void)collect<A>([&](pool_sink& s) { return o.flush(7, s); });
         return o;
       },
       [](owner& o, pool_sink& s) { return o.on_flush_reply(reply(99), s); }, pool_state::flushing, "", errc::event_not_allowed},
      {"indication after the flush completed",
       [] {
         owner o = owner_with_pool();
         (void)collect<A>([&](pool_sink& s) { return o.flush(7, s); });
         (void)collect<A>([&](pool_sink& s) { return o.on_flush_reply(reply(2), s); });
         return o;
       },
       [](owner& o, pool_sink& s) { return o.on_indication({7, 0, 1}, s); }, pool_state::flushed, "fault", errc::write_after_flush},
      {"user's flush request: reply and deregister", owner_with_pool,
       [](owner& o, pool_sink& s) {
         const std::uint32_t refs[] = {7};
         return o.on_flush_request({.header = {.transaction_context = 55}, .pool_refs = std::span<const std::uint32_t>(refs)}, s);
       },
       pool_state::flushed, "deregister flush_reply"},
      {"advertise twice", owner_with_pool, [](owner& o, pool_sink& s) { return o.advertise(pool7, s); }, pool_state::active, "", errc::pool_exists},
      {"Get without an allocator is declined", [] { return owner{}; },
       [](owner& o, pool_sink& s) { return o.on_get({.element_size = 64, .element_count = 4}, s); }, pool_state::unused, "declined"},
  };
  for (const auto& c : cases) {
    INFO(c.name);
    owner o = c.given();
    step_result r;
    const auto acts = collect<A>([&](pool_sink& s) { return c.when(o, s); }, &r);
    CHECK(o.state_of(7) == c.then);
    CHECK(kinds(acts) == c.actions);
    CHECK(r.error == c.error);
  }
}

TEST_CASE("pool user: each transition from a known state") {
  const std::vector<one_step<user>> cases{
      {"BufferRecvPool", [] { return user{}; }, [](user& u, pool_sink& s) { return u.on_pool(pool7, s); }, pool_state::active, ""},
      {"transfer that fits idata", [] { return user_with_pool(); }, [](user& u, pool_sink& s) { return u.transfer(256, s); }, pool_state::active, "write"},
      {"transfer larger than any element", [] { return user_with_pool(); }, [](user& u, pool_sink& s) { return u.transfer(257, s); }, pool_state::active, "", errc::too_large},
      {"write done with idata: nothing more to send",
       [] {
         user u = user_with_pool();
         (void)collect<A>([&](pool_sink& s) { return u.transfer(10, s); });
         return u;
       },
       [](user& u, pool_sink& s) { return u.write_done(7, 0, s); }, pool_state::active, ""},
      {"write done without idata: BufferRDMAIndicate",
       [] {
         user u = user_with_pool({.never_idata = true});
         (void)collect<A>([&](pool_sink& s) { return u.transfer(10, s); });
         return u;
       },
       [](user& u, pool_sink& s) { return u.write_done(7, 0, s); }, pool_state::active, "indicate"},
      {"update of a written element",
       [] {
         user u = user_with_pool();
         (void)collect<A>([&](pool_sink& s) { return u.transfer(10, s); });
         (void)collect<A>([&](pool_sink& s) { return u.write_done(7, 0, s); });
         return u;
       },
       [](user& u, pool_sink& s) { return u.on_update_entry({7, 0, 1}, s); }, pool_state::active, ""},
      {"update of a free element", [] { return user_with_pool(); },
       [](user& u, pool_sink& s) { return u.on_update_entry({7, 0, 1}, s); }, pool_state::active, "fault", errc::element_not_held},
      {"own flush with nothing in flight", [] { return user_with_pool(); }, [](user& u, pool_sink& s) { return u.flush(7, s); }, pool_state::flushing, "flush_request"},
      {"own flush with a write in flight waits",
       [] {
         user u = user_with_pool();
         (void)collect<A>([&](pool_sink& s) { return u.transfer(10, s); });
         return u;
       },
       [](user& u, pool_sink& s) { return u.flush(7, s); }, pool_state::draining, ""},
      {"last write completes: the flush request goes out",
       [] {
         user u = user_with_pool({.never_idata = true});
         (void)collect<A>([&](pool_sink& s) { return u.transfer(10, s); });
         (void)collect<A>([&](pool_sink& s) { return u.flush(7, s); });
         return u;
       },
       [](user& u, pool_sink& s) { return u.write_done(7, 0, s); }, pool_state::flushing, "indicate flush_request"},
      {"owner's flush request with nothing in flight", [] { return user_with_pool(); },
       [](user& u, pool_sink& s) {
         const std::uint32_t refs[] = {7};
         return u.on_flush_request({.header = {.transaction_context = 9}, .pool_refs = std::span<const std::uint32_t>(refs)}, s);
       },
       pool_state::flushed, "flush_reply"},
      {"owner's flush request with a write in flight: reply after it completes",
       [] {
         user u = user_with_pool();
         (void)collect<A>([&](pool_sink& s) { return u.transfer(10, s); });
         return u;
       },
       [](user& u, pool_sink& s) {
         const std::uint32_t refs[] = {7};
         return u.on_flush_request({.header = {.transaction_context = 9}, .pool_refs = std::span<const std::uint32_t>(refs)}, s);
       },
       pool_state::draining, ""},
      {"no transfer into a draining pool",
       [] {
         user u = user_with_pool();
         (void)collect<A>([&](pool_sink& s) { return u.transfer(10, s); });
         (void)collect<A>([&](pool_sink& s) { return u.flush(7, s); });
         return u;
       },
       [](user& u, pool_sink& s) { return u.transfer(10, s); }, pool_state::draining, "", errc::write_after_flush},
      {"flush reply forgets the pool",
       [] {
         user u = user_with_pool();
         (void)collect<A>([&](pool_sink& s) { return u.flush(7, s); });
         return u;
       },
       [](user& u, pool_sink& s) { return u.on_flush_reply(reply(1), s); }, pool_state::flushed, ""},
  };
  for (const auto& c : cases) {
    INFO(c.name);
    user u = c.given();
    step_result r;
    const auto acts = collect<A>([&](pool_sink& s) { return c.when(u, s); }, &r);
    CHECK(u.state_of(7) == c.then);
    CHECK(kinds(acts) == c.actions);
    CHECK(r.error == c.error);
  }
}

TEST_CASE("pool user: element choice, the idata or BufferRDMAIndicate carrier, and the low-water Get") {
  user u({.low_water = 6, .get_count = 16});
  (void)collect<A>([&](pool_sink& s) { return u.on_pool(pool7, s); });
  (void)collect<A>([&](pool_sink& s) { return u.on_pool({.pool_ref = 300, .element_count = 2, .element_size = 64, .memory_handle = 5, .address = 0x900, .pool_context = 0}, s); });
  // 60 bytes go to the smaller elements of pool 300; pool_ref 300 does not fit idata
  auto a = collect<A>([&](pool_sink& s) { return u.transfer(60, s); });
  auto w = only<pool_action::rdma_write>(a);
  REQUIRE(w.size() == 1);
  CHECK(w[0].pool_ref == 300);
  CHECK(w[0].address == 0x900);
  CHECK_FALSE(w[0].with_imm);
  REQUIRE(only<pool_action::send_get>(a).size() == 1);  // 5 free elements of >= 64 bytes left: below 6
  CHECK(only<pool_action::send_get>(a)[0].element_size == 64);
  CHECK(only<pool_action::send_get>(a)[0].element_count == 16);
  CHECK(u.get_outstanding());
  a = collect<A>([&](pool_sink& s) { return u.write_done(300, 0, s); });
  REQUIRE(only<pool_action::send_indicate>(a).size() == 1);
  CHECK(only<pool_action::send_indicate>(a)[0].entry == msg::indication{300, 0, 60});
  // 100 bytes go to pool 7, element 0, by idata 0x07000064; no second Get while one is outstanding
  a = collect<A>([&](pool_sink& s) { return u.transfer(100, s); });
  w = only<pool_action::rdma_write>(a);
  REQUIRE(w.size() == 1);
  CHECK(w[0].with_imm);
  CHECK(w[0].imm == 0x07000064);
  CHECK(w[0].address == 0x10000);
  CHECK(w[0].rkey == 0x1234);
  CHECK(only<pool_action::send_get>(a).empty());
  // exhaust everything
  for (int i = 0; i < 4; ++i) (void)collect<A>([&](pool_sink& s) { return u.transfer(1, s); });
  step_result r;
  (void)collect<A>([&](pool_sink& s) { return u.transfer(1, s); }, &r);
  CHECK(r.error == errc::no_free_element);
  CHECK(u.free_elements(1) == 0);
}

TEST_CASE("pool user: an implicit user's Get asks for implicit registration, and the allocator sees it") {
  user u({.low_water = 8, .get_count = 4, .implicit = true});
  (void)collect<A>([&](pool_sink& s) { return u.on_pool(pool7, s); });
  auto a = collect<A>([&](pool_sink& s) { return u.transfer(10, s); });
  const auto g = only<pool_action::send_get>(a);
  REQUIRE(g.size() == 1);
  CHECK(g[0].implicit);
  std::vector<std::byte> frame(64);
  const auto n = encode_message(g[0], frame);
  REQUIRE(n.has_value());
  CHECK(*n == 20);
  CHECK(frame[16] == std::byte{0x80});  // bit 31 of the element_count word
  CHECK(frame[19] == std::byte{4});
  const auto get = msg::decode<msg::buffer_recv_pool_get>(std::span<const std::byte>(frame.data(), *n));
  REQUIRE(get.has_value());
  CHECK(get->implicit);
  CHECK(get->element_count == 4u);
  bool asked = false;
  pool_allocator alloc{&asked, [](void* ctx, const msg::buffer_recv_pool_get& r) -> std::optional<msg::pool_descriptor> {
                         *static_cast<bool*>(ctx) = r.implicit;
                         return msg::pool_descriptor{.pool_ref = 3, .element_count = r.element_count.value, .element_size = r.element_size,
                                                     .memory_handle = 9, .address = 0x5000, .pool_context = 0, .implicit = r.implicit.value};
                       }};
  owner o(alloc);
  a = collect<A>([&](pool_sink& s) { return o.on_get(*get, s); });
  CHECK(asked);
  const auto rp = only<pool_action::send_recv_pool>(a);
  REQUIRE(rp.size() == 1);
  CHECK(rp[0].pool.implicit);
  // a user without the option asks for an explicit pool
  user plain({.low_water = 8, .get_count = 4});
  (void)collect<A>([&](pool_sink& s) { return plain.on_pool(pool7, s); });
  a = collect<A>([&](pool_sink& s) { return plain.transfer(10, s); });
  REQUIRE(only<pool_action::send_get>(a).size() == 1);
  CHECK_FALSE(only<pool_action::send_get>(a)[0].implicit);
}

TEST_CASE("pool owner: BufferRecvPoolGet through the allocator callback, granted or declined") {
  struct budget {
    int left = 1;
  } b;
  pool_allocator alloc{&b, [](void* ctx, const msg::buffer_recv_pool_get& g) -> std::optional<msg::pool_descriptor> {
                         auto* bb = static_cast<budget*>(ctx);
                         if (bb->left-- <= 0) return std::nullopt;
                         return msg::pool_descriptor{.pool_ref = 0, .element_count = g.element_count.value, .element_size = g.element_size,
                                                     .memory_handle = 9, .address = 0x5000, .pool_context = 0};
                       }};
  owner o(alloc);
  auto a = collect<A>([&](pool_sink& s) { return o.on_get({.element_size = 128, .element_count = 8}, s); });
  const auto rp = only<pool_action::send_recv_pool>(a);
  REQUIRE(rp.size() == 1);
  CHECK(rp[0].pool.pool_ref == 0);
  CHECK(rp[0].pool.element_count == 8);
  CHECK(o.count(0, owner::element::lent) == 8);
  a = collect<A>([&](pool_sink& s) { return o.on_get({.element_size = 128, .element_count = 8}, s); });
  CHECK(kinds(a) == "declined");
  CHECK(o.stats().declined == 1);
  // more elements than the machine's capacity: declined without asking
  a = collect<A>([&](pool_sink& s) { return o.on_get({.element_size = 128, .element_count = 9}, s); });
  CHECK(kinds(a) == "declined");
}

TEST_CASE("pool owner: a granted pool keeps the allocator's pool_ref unless one in use has it") {
  std::uint32_t next = 7;
  pool_allocator alloc{&next, [](void* ctx, const msg::buffer_recv_pool_get& g) -> std::optional<msg::pool_descriptor> {
                         return msg::pool_descriptor{.pool_ref = *static_cast<std::uint32_t*>(ctx), .element_count = g.element_count.value,
                                                     .element_size = g.element_size, .memory_handle = 9, .address = 0x5000, .pool_context = 0};
                       }};
  pool_owner<3, 8> o(alloc);
  auto a = collect<A>([&](pool_sink& s) { return o.advertise({.pool_ref = 0, .element_count = 2, .element_size = 64, .memory_handle = 1, .address = 0x1000, .pool_context = 0}, s); });
  a = collect<A>([&](pool_sink& s) { return o.on_get({.element_size = 128, .element_count = 4}, s); });
  auto rp = only<pool_action::send_recv_pool>(a);
  REQUIRE(rp.size() == 1);
  CHECK(rp[0].pool.pool_ref == 7);
  a = collect<A>([&](pool_sink& s) { return o.on_get({.element_size = 128, .element_count = 4}, s); });  // 7 again: in use
  rp = only<pool_action::send_recv_pool>(a);
  REQUIRE(rp.size() == 1);
  CHECK(rp[0].pool.pool_ref == 1);  // the lowest unused (0 is advertised)
}

TEST_CASE("pool scenario: messages over the wire, credits conserved, every element returned or flushed") {
  owner o;
  user u({.low_water = 0});
  std::vector<std::byte> frame(4096);
  // owner -> user: BufferRecvPool, encoded and decoded
  auto a = collect<A>([&](pool_sink& s) { return o.advertise(pool7, s); });
  const auto rp = only<pool_action::send_recv_pool>(a).at(0);
  const msg::pool_descriptor pools[] = {rp.pool};
  const msg::buffer_recv_pool m{.header = {.transaction_context = rp.txn}, .pools = std::span<const msg::pool_descriptor>(pools)};
  const auto n = msg::encode(m, frame);
  REQUIRE(n.has_value());
  const auto back = msg::decode<msg::buffer_recv_pool>(std::span<const std::byte>(frame.data(), *n));
  REQUIRE(back.has_value());
  (void)collect<A>([&](pool_sink& s) { return u.on_recv_pool(*back, s); });
  // three transfers; idata carries each indication to the owner
  for (std::uint32_t k = 0; k < 3; ++k) {
    const auto w = only<pool_action::rdma_write>(collect<A>([&](pool_sink& s) { return u.transfer(50 + k, s); })).at(0);
    CHECK(w.element == k);
    const auto d = only<pool_action::deliver>(collect<A>([&](pool_sink& s) { return o.on_idata(w.imm, s); }));
    REQUIRE(d.size() == 1);
    CHECK(d[0].what == msg::indication{7, k, 50 + k});
    (void)collect<A>([&](pool_sink& s) { return u.write_done(7, k, s); });
  }
  CHECK(o.count(7, owner::element::consumed) == 3);
  CHECK(u.count(7, user::element::free) == 1);
  // the application releases two; the update travels as BufferRecvPoolUpdate
  const auto up = only<pool_action::send_update>(collect<A>([&](pool_sink& s) { return o.release(7, 0, 2, s); })).at(0);
  const msg::pool_update_entry entries[] = {up.entry};
  const msg::buffer_recv_pool_update um{.header = {.transaction_context = up.txn}, .entries = std::span<const msg::pool_update_entry>(entries)};
  REQUIRE(msg::encode(um, frame).has_value());
  (void)collect<A>([&](pool_sink& s) { return u.on_update(um, s); });
  CHECK(u.count(7, user::element::free) == 3);
  // conservation: lent + consumed + home == element_count on the owner; free on the user <= lent
  CHECK(o.count(7, owner::element::lent) + o.count(7, owner::element::consumed) + o.count(7, owner::element::home) == 4);
  CHECK(u.count(7, user::element::free) <= o.count(7, owner::element::lent));
  // the owner flushes; the user replies; the owner deregisters
  const auto fr = only<pool_action::send_flush_request>(collect<A>([&](pool_sink& s) { return o.flush(7, s); })).at(0);
  const std::uint32_t refs[] = {fr.pool_ref};
  const auto rep = only<pool_action::send_flush_reply>(collect<A>([&](pool_sink& s) {
                     return u.on_flush_request({.header = {.transaction_context = fr.txn}, .pool_refs = std::span<const std::uint32_t>(refs)}, s);
                   })).at(0);
  CHECK(rep.txn == fr.txn);
  const auto dr = collect<A>([&](pool_sink& s) { return o.on_flush_reply(reply(rep.txn), s); });
  CHECK(kinds(dr) == "deregister");
  CHECK(o.stats().flushed == 3);
  // the application's last element comes home; nothing is written after the flush
  (void)collect<A>([&](pool_sink& s) { return o.release(7, 2, 1, s); });
  CHECK(o.count(7, owner::element::home) == 4);
  step_result r;
  (void)collect<A>([&](pool_sink& s) { return u.transfer(1, s); }, &r);
  CHECK(r.error == errc::write_after_flush);  // the only pool that fits is flushed
}

TEST_CASE("pool actions encode as push-push messages that decode back to the same values") {
  std::vector<std::byte> frame(4096);
  const std::vector<pool_action_t> sends{
      pool_action::send_recv_pool{1, pool7},
      pool_action::send_get{2, 128, 16},
      pool_action::send_update{3, {7, 1, 2}},
      pool_action::send_flush_request{4, 7},
      pool_action::send_flush_reply{5},
      pool_action::send_indicate{6, {300, 2, 70000}},
  };
  for (const auto& a : sends) {
    const auto n = encode_message(a, frame);
    REQUIRE(n.has_value());
    const auto m = msg::decode(std::span<const std::byte>(frame.data(), *n));
    REQUIRE(m.has_value());
    std::visit([&](const auto& x) { CHECK(x.header.transaction_context == a.index() + 1); }, *m);
  }
  const auto up = msg::decode<msg::buffer_recv_pool_update>(std::span<const std::byte>(frame.data(), *encode_message(sends[2], frame)));
  REQUIRE(up.has_value());
  CHECK(up->entries[0] == msg::pool_update_entry{7, 1, 2});
  CHECK_FALSE(encode_message(pool_action::deregister{7}, frame).has_value());
}
