// Moving a function between device processes, sans-IO (rnic/migrate.hpp, eswitch.hpp's images):
// the handover of a function's image, its refusals, and the two sides' machines checked over
// every interleaving of their messages and deaths.
#include <catch2/catch.hpp>

#include <deque>
#include <set>
#include <tuple>
#include <vector>

#include <pushwire/rnic/eswitch.hpp>
#include <pushwire/rnic/migrate.hpp>

using namespace pushwire;
using rnic::fn_errc;
using rnic::function_image;
namespace mg = rnic::migration;

namespace {
constexpr ib::gid host_a = ib::gid_v4(198, 18, 0, 1), host_b = ib::gid_v4(198, 18, 0, 2), guest = ib::gid_v4(198, 18, 0, 11);

rnic::eswitch make_switch(std::vector<ib::gid> gids, std::uint32_t vfs) {
  rnic::eswitch_config c;
  c.mac = {2, 0, 0xc6, 0x12, 0, gids[0][15]};
  c.gids = std::move(gids);
  c.vfs = vfs;
  return rnic::eswitch(c);
}
}  // namespace

// The machines' paths, at compile time.
static_assert(mg::step(mg::src_state::serving, mg::event::migrate)->to == mg::src_state::quiesced);
static_assert(mg::step(mg::src_state::offered, mg::event::refused)->act == mg::action::resume);
static_assert(mg::step(mg::src_state::committing, mg::event::committed)->act == mg::action::release);
static_assert(mg::step(mg::dst_state::held, mg::event::commit)->act == mg::action::serve);
static_assert(!mg::step(mg::src_state::moved, mg::event::peer_lost));   // gone: nothing to roll back
static_assert(!mg::step(mg::dst_state::serving, mg::event::peer_lost));  // serving: the source may go

TEST_CASE("migration: a function's image moves to another switch, with its attachments' QPN blocks", "[rnic][migration]") {
  auto a = make_switch({host_a, guest}, 4), b = make_switch({host_b, guest}, 4);
  std::string out;
  REQUIRE(!a.command({"vf", "set", "3", "gid", "198.18.0.11", "max_qps", "8", "rate", "300M"}, out));
  auto p1 = a.attach(3, 100), p2 = a.attach(3, 101);
  const std::uint32_t id1 = std::get<1>(p1)->id, id2 = std::get<1>(p2)->id;
  REQUIRE(!a.reserve(id1, rnic::ctl::resource::qp, 3));
  REQUIRE(!a.reserve(id2, rnic::ctl::resource::qp, 2));
  REQUIRE(!a.reserve(id2, rnic::ctl::resource::bytes, 4096));

  const auto im = a.image_of(3);
  REQUIRE(im);
  CHECK(im->function == 3);
  CHECK(im->settings.gids == std::vector<ib::gid>{guest});
  CHECK(im->settings.limits.rate_bps == 300'000'000u);
  REQUIRE(im->attachments.size() == 2);
  CHECK(im->attachments[0] == function_image::held{id1, 100, 3, 0, 0, 0});
  CHECK(im->attachments[1] == function_image::held{id2, 101, 2, 0, 0, 4096});
  CHECK(!a.image_of(0));  // the PF stays with its port
  CHECK(!a.image_of(9));

  REQUIRE(!b.adopt(*im, 3));
  const auto* f = b.function(3);
  REQUIRE(f);
  CHECK(f->settings.mac == a.function(3)->settings.mac);  // the MAC moves with it
  CHECK(f->qps == 5);
  CHECK(f->bytes == 4096);
  REQUIRE(b.find(id1));
  CHECK(b.find(id1)->qpn_first() == a.find(id1)->qpn_first());
  CHECK(b.find(id2)->pid == 101);
  // Its limits hold on the new switch, counted with what it brought.
  CHECK(b.reserve(id1, rnic::ctl::resource::qp, 4) == fn_errc::limit_reached);
  CHECK(!b.reserve(id1, rnic::ctl::resource::qp, 3));

  a.release(3);
  CHECK(!a.function(3));
  CHECK(!a.find(id1));
  CHECK(!a.find(id2));
  CHECK(a.command({"vf", "set", "3", "trust", "on"}, out) == fn_errc::no_such_function);
  // And back: the blocks are free again on the first switch.
  const auto back = b.image_of(3);
  REQUIRE(back);
  REQUIRE(!a.adopt(*back, 3));
  CHECK(a.find(id1)->qps == 6);
  b.release(3);
  CHECK(b.attachments().empty());
}

TEST_CASE("migration: a switch refuses an image it cannot take, and nothing changes", "[rnic][migration]") {
  auto a = make_switch({host_a, guest}, 4);
  std::string out;
  REQUIRE(!a.command({"vf", "set", "3", "gid", "198.18.0.11"}, out));
  const std::uint32_t id = std::get<1>(a.attach(3, 100))->id;
  const function_image im = *a.image_of(3);

  SECTION("a QPN block taken") {
    auto b = make_switch({host_b, guest}, 4);
    for (std::uint32_t k = 0; k < id; ++k) (void)b.attach(1, 200);  // takes blocks 1..id
    REQUIRE(b.find(id));
    const auto before = b.attachments().size();
    CHECK(b.adopt(im, 3) == fn_errc::qpn_block_taken);
    CHECK(b.attachments().size() == before);
    CHECK(b.function(3)->settings.gids == std::vector<ib::gid>{host_b, guest});  // unchanged
  }
  SECTION("an address the port does not have") {
    auto b = make_switch({host_b}, 4);
    CHECK(b.adopt(im, 3) == fn_errc::address_not_here);
    CHECK(b.attachments().empty());
  }
  SECTION("a function with programs attached") {
    auto b = make_switch({host_b, guest}, 4);
    (void)b.attach(3, 300);
    CHECK(b.adopt(im, 3) == fn_errc::function_busy);
  }
  SECTION("a malformed image") {
    auto b = make_switch({host_b, guest}, 4);
    function_image bad = im;
    CHECK(b.adopt(im, 0) == fn_errc::bad_message);  // not as the PF
    CHECK(b.adopt(im, rnic::max_vfs + 1) == fn_errc::bad_message);
    bad.attachments.push_back(bad.attachments[0]);
    CHECK(b.adopt(bad, 3) == fn_errc::bad_message);  // a block twice
    bad = im, bad.attachments[0].id = 0;
    CHECK(b.adopt(bad, 3) == fn_errc::bad_message);
    bad = im, bad.attachments[0].id = rnic::qpn_blocks;
    CHECK(b.adopt(bad, 3) == fn_errc::bad_message);
    bad = im, bad.attachments[0].qps = bad.settings.limits.max_qps + 1u;
    CHECK(b.adopt(bad, 3) == fn_errc::bad_message);
    bad = im, bad.attachments.push_back({id + 1, 1, 0, 0, 0, ~std::uint64_t{0}});
    bad.attachments[0].bytes = 1;  // the sum wraps
    CHECK(b.adopt(bad, 3) == fn_errc::bad_message);
    bad = im, bad.settings.gids.clear();
    CHECK(b.adopt(bad, 3) == fn_errc::bad_message);
    CHECK(b.attachments().empty());
    CHECK(b.function(3)->settings.gids == std::vector<ib::gid>{host_b, guest});
  }
}

namespace {
// The two sides and the sockets between them: messages in order, then the end of stream when a
// side dies.
enum class msg : std::uint8_t { offer, ready, refused, commit, committed, end };
struct world {
  mg::src_state s = mg::src_state::serving;
  mg::dst_state d = mg::dst_state::idle;
  bool s_dead = false, d_dead = false, dst_accepts = true;
  bool commit_sent = false;
  std::vector<msg> to_d, to_s;  // in flight
  auto key() const { return std::tuple(s, d, s_dead, d_dead, dst_accepts, commit_sent, to_d, to_s); }
  bool operator<(const world& o) const { return key() < o.key(); }
};
void src_event(world& w, mg::event e) {
  const auto t = mg::step(w.s, e);
  if (!t) return;
  w.s = t->to;
  switch (t->act) {
    case mg::action::stop_rings: src_event(w, mg::event::flushed); break;
    case mg::action::send_offer: w.to_d.push_back(msg::offer); break;
    case mg::action::send_commit: w.to_d.push_back(msg::commit), w.commit_sent = true; break;
    default: break;
  }
}
void dst_event(world& w, mg::event e) {
  const auto t = mg::step(w.d, e);
  if (!t) return;
  w.d = t->to;
  switch (t->act) {
    case mg::action::check: dst_event(w, w.dst_accepts ? mg::event::check_ok : mg::event::check_bad); break;
    case mg::action::hold: w.to_s.push_back(msg::ready); break;
    case mg::action::refuse: w.to_s.push_back(msg::refused); break;
    case mg::action::serve: w.to_s.push_back(msg::committed); break;
    default: break;
  }
}
mg::event event_of(msg m) {
  switch (m) {
    case msg::offer: return mg::event::offer;
    case msg::ready: return mg::event::ready;
    case msg::refused: return mg::event::refused;
    case msg::commit: return mg::event::commit;
    case msg::committed: return mg::event::committed;
    case msg::end: break;
  }
  return mg::event::peer_lost;
}
std::vector<world> successors(const world& w) {
  std::vector<world> out;
  if (!w.s_dead && !w.to_s.empty()) {
    world n = w;
    const msg m = n.to_s.front();
    n.to_s.erase(n.to_s.begin());
    src_event(n, event_of(m));
    out.push_back(n);
  }
  if (!w.d_dead && !w.to_d.empty()) {
    world n = w;
    const msg m = n.to_d.front();
    n.to_d.erase(n.to_d.begin());
    dst_event(n, event_of(m));
    out.push_back(n);
  }
  // A death: the other side reads what was sent before it, then the end of stream.
  if (!w.s_dead && !w.d_dead) {
    world n = w;
    n.s_dead = true, n.to_s.clear(), n.to_d.push_back(msg::end);
    out.push_back(n);
    n = w;
    n.d_dead = true, n.to_d.clear(), n.to_s.push_back(msg::end);
    out.push_back(n);
  }
  return out;
}
bool serves_src(const world& w) { return !w.s_dead && w.s != mg::src_state::moved; }
bool serves_dst(const world& w) { return !w.d_dead && w.d == mg::dst_state::serving; }
}  // namespace

TEST_CASE("migration: over every interleaving and death, the function is never on two devices", "[rnic][migration]") {
  for (bool accepts : {true, false}) {
    world start;
    start.dst_accepts = accepts;
    src_event(start, mg::event::migrate);
    REQUIRE(start.s == mg::src_state::offered);
    std::set<world> seen{start};
    std::deque<world> todo{start};
    std::size_t ends = 0;
    while (!todo.empty()) {
      const world w = todo.front();
      todo.pop_front();
      // Serving means its rings are served: never by both (a moved source served none; a
      // source waiting for an answer serves none either, but may still resume).
      const bool src_active = !w.s_dead && w.s == mg::src_state::serving;
      INFO("src " << wire::enum_name(w.s) << (w.s_dead ? " dead" : "") << ", dst " << wire::enum_name(w.d) << (w.d_dead ? " dead" : ""));
      REQUIRE(!(src_active && serves_dst(w)));
      // The destination serves only what the source committed: a source that died before
      // committing leaves the function on no device (its programs fail), never on a guess.
      if (serves_dst(w)) REQUIRE(w.commit_sent);
      const auto next = successors(w);
      if (w.to_s.empty() && w.to_d.empty()) {  // quiet: nothing in flight
        ++ends;
        // At the end: with both alive, exactly one serves it; the destination only if it accepted.
        if (!w.s_dead && !w.d_dead) {
          REQUIRE(serves_src(w) != serves_dst(w));
          CHECK(serves_dst(w) == accepts);
        }
        // The destination died: the source took it back unless the destination had taken over.
        if (!w.s_dead && w.d_dead) CHECK((w.s == mg::src_state::serving || w.s == mg::src_state::moved));
        // Nothing is left half-way on a live side.
        if (!w.s_dead) CHECK((w.s == mg::src_state::serving || w.s == mg::src_state::moved));
        if (!w.d_dead) CHECK(w.d != mg::dst_state::held);
      }
      for (const world& n : next)
        if (seen.insert(n).second) todo.push_back(n);
    }
    CHECK(ends > 3);
    CHECK(seen.size() > 10);
  }
}
