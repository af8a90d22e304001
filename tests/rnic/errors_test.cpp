// Every error code a verb of rnic::device documents ("Errors:" in device.hpp and engine.hpp,
// the source of spec/rnic.md §9's table) is one it returns: each (verb, code) has a case here
// that makes the verb return exactly that code, and every case is documented.
#include <catch2/catch.hpp>

#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "../../tools/verb_errors.hpp"
#include "harness.hpp"

using namespace pushwire;
using namespace pushwire::test::rnic;

namespace {

/// A device with one PD, one CQ, 64 KiB registered, an RC QP in RESET and a UD QP in RTS.
struct fixture {
  std::unique_ptr<device> dev;
  std::uint32_t pd = 0, cq = 0, qp = 0, ud = 0;
  cq_memory cqm{16}, small{2}, empty_cq{3};  // (3 entries: no ring)
  std::vector<std::byte> buf = std::vector<std::byte>(1 << 16);
  memory_region mr{};
  sq_memory sq{2}, sq2{2};
  rq_memory rq{2}, rq2{2};
  explicit fixture(device_config c = {}) {
    c.ports = {port_n(1)};
    dev = std::make_unique<device>(c);
    pd = *dev->alloc_pd();
    cq = *dev->create_cq(cqm);
    mr = *dev->reg_mr(pd, buf.data(), buf.size(), all_access);
    qp = *dev->create_qp({.type = qp_type::rc, .pd = pd, .send_cq = cq, .recv_cq = cq, .sq = &sq, .rq = &rq});
    ud = *dev->create_qp({.type = qp_type::ud, .pd = pd, .send_cq = cq, .recv_cq = cq, .sq = &sq2, .rq = &rq2});
    (void)pushwire::rnic::bring_up(*dev, ud, {.type = qp_type::ud});
  }
  std::uint64_t addr(std::size_t off = 0) { return reinterpret_cast<std::uintptr_t>(buf.data() + off); }
  errc key_of_other_pd(std::uint32_t& key) {
    const auto pd2 = dev->alloc_pd();
    if (!pd2) return pd2.code();
    const auto m = dev->reg_mr(*pd2, buf.data(), 64, all_access);
    key = m ? m->lkey : 0;
    return m.code();
  }
};

template <class T>
errc code_of(const result<T>& r) {
  return r.code();
}

/// A key no registration has.
constexpr std::uint32_t nokey = make_key(900, 0);

using probe = std::function<errc()>;
using key = std::pair<std::string, std::string>;

std::map<key, probe> cases() {
  std::map<key, probe> c;
  auto add = [&](std::string verb, std::string code, probe p) { c.emplace(key{std::move(verb), std::move(code)}, std::move(p)); };

  add("alloc_pd", "no_resources", [] {
    fixture f({.max_pds = 1});
    return code_of(f.dev->alloc_pd());
  });
  add("dealloc_pd", "not_found", [] { return fixture{}.dev->dealloc_pd(99); });
  add("dealloc_pd", "busy", [] {
    fixture f;
    return f.dev->dealloc_pd(f.pd);
  });
  for (const char* v : {"reg_mr", "reg_mr_iova", "reg_mr_on_demand"}) {
    const std::string verb = v;
    auto reg = [verb](fixture& f, std::uint32_t pd, void* a, std::uint64_t n, std::uint64_t iova) -> errc {
      if (verb == "reg_mr") return code_of(f.dev->reg_mr(pd, a, n, all_access));
      if (verb == "reg_mr_iova") return code_of(f.dev->reg_mr_iova(pd, a, n, iova, all_access));
      return code_of(f.dev->reg_mr_on_demand(pd, a, n, all_access));
    };
    add(verb, "not_found", [reg] {
      fixture f;
      return reg(f, 99, f.buf.data(), 64, 0);
    });
    add(verb, "invalid_argument", [reg, verb] {
      fixture f;
      if (verb == "reg_mr_iova") return reg(f, f.pd, f.buf.data(), 64, ~std::uint64_t{0} - 8);  // past 2^64
      return reg(f, f.pd, nullptr, 64, 0);
    });
    add(verb, "no_resources", [reg] {
      fixture f({.max_keys = 1});
      return reg(f, f.pd, f.buf.data(), 64, 0);
    });
  }
  // Card memory: a platform with one card (card 0); card 1 is no card of it.
  auto with_card = [](device_config c = {}) {
    c.platform.cards[0] = {.socket = 0};
    c.platform.card_count = 1;
    return c;
  };
  add("reg_mr_card", "not_found", [with_card] {
    fixture f(with_card());
    return code_of(f.dev->reg_mr_card(99, 0, f.buf.data(), 64, 0, all_access));
  });
  add("reg_mr_card", "invalid_argument", [with_card] {
    fixture f(with_card());
    const errc no_card = code_of(f.dev->reg_mr_card(f.pd, 1, f.buf.data(), 64, 0, all_access));
    const errc null_addr = code_of(f.dev->reg_mr_card(f.pd, 0, nullptr, 64, 0, all_access));
    fixture g;  // (no platform: no card at all)
    const errc no_platform = code_of(g.dev->reg_mr_card(g.pd, 0, g.buf.data(), 64, 0, all_access));
    return no_card == null_addr && null_addr == no_platform ? no_card : errc{};
  });
  add("reg_mr_card", "no_resources", [with_card] {
    fixture f(with_card({.max_keys = 1}));
    return code_of(f.dev->reg_mr_card(f.pd, 0, f.buf.data(), 64, 0, all_access));
  });
  // Implicit keys: a device with host pages (a model that knows no page), and one without.
  struct no_pages final : host_pages {
    errc probe(std::uint64_t, std::uint64_t, bool) const override { return errc::out_of_range; }
    bool fault_in(std::uint64_t, std::uint64_t, bool) override { return false; }
  };
  add("reg_mr_implicit", "not_found", [] {
    fixture f;
    no_pages pages;
    f.dev->memory().set_host_pages(&pages);
    return code_of(f.dev->reg_mr_implicit(99, all_access));
  });
  add("reg_mr_implicit", "invalid_argument", [] {
    fixture f;
    return code_of(f.dev->reg_mr_implicit(f.pd, all_access));
  });
  add("reg_mr_implicit", "no_resources", [] {
    fixture f({.max_keys = 1});
    no_pages pages;
    f.dev->memory().set_host_pages(&pages);
    return code_of(f.dev->reg_mr_implicit(f.pd, all_access));
  });
  // Indirect and pattern keys: their own arguments, and the keys of their entries.
  using maker = std::function<errc(fixture&, std::uint32_t pd, std::uint32_t entry_key, std::uint64_t len)>;
  const maker indirect = [](fixture& f, std::uint32_t pd, std::uint32_t k, std::uint64_t len) {
    const klm_entry e{.key = k, .addr = f.addr(), .length = len};
    return code_of(f.dev->reg_indirect(pd, std::span(&e, 1), all_access));
  };
  const maker pattern = [](fixture& f, std::uint32_t pd, std::uint32_t k, std::uint64_t len) {
    const pattern_entry e{.key = k, .addr = f.addr(), .byte_count = static_cast<std::uint32_t>(len), .stride = 64};
    return code_of(f.dev->reg_pattern(pd, 2, std::span(&e, 1), all_access));
  };
  for (const auto& [verb, make] : {std::pair{std::string{"reg_indirect"}, indirect}, std::pair{std::string{"reg_pattern"}, pattern}}) {
    const maker m = make;
    add(verb, "not_found", [m] {
      fixture f;
      return m(f, 99, f.mr.lkey, 64);
    });
    add(verb, "invalid_argument", [m] {
      fixture f;
      return m(f, f.pd, f.mr.lkey, 0);  // an entry of 0 bytes
    });
    add(verb, "no_such_key", [m] {
      fixture f;
      return m(f, f.pd, nokey, 64);
    });
    add(verb, "deregistered", [m] {
      fixture f;
      const auto k = *f.dev->reg_mr(f.pd, f.buf.data(), 64, all_access);
      (void)f.dev->dereg_mr(k.lkey);
      return m(f, f.pd, k.lkey, 64);
    });
    add(verb, "wrong_variant", [m] {
      fixture f;
      const auto k = *f.dev->reg_mr(f.pd, f.buf.data(), 64, all_access);
      (void)f.dev->rereg_mr(k.lkey, f.buf.data(), 64, all_access);
      return m(f, f.pd, k.lkey, 64);
    });
    add(verb, "wrong_pd", [m] {
      fixture f;
      std::uint32_t k = 0;
      (void)f.key_of_other_pd(k);
      return m(f, f.pd, k, 64);
    });
    add(verb, "too_deep", [m] {
      fixture f;
      std::uint32_t k = f.mr.lkey;
      for (int level = 0; level < static_cast<int>(max_key_depth); ++level) {
        const klm_entry e{.key = k, .addr = level == 0 ? f.addr() : 0, .length = 64};
        k = f.dev->reg_indirect(f.pd, std::span(&e, 1), all_access)->lkey;
      }
      return m(f, f.pd, k, 64);
    });
    add(verb, "no_resources", [m] {
      fixture f({.max_keys = 1});
      return m(f, f.pd, f.mr.lkey, 64);
    });
  }
  add("dereg_mr", "not_found", [] { return fixture{}.dev->dereg_mr(nokey); });
  // prefetch checks each range as a local access.
  auto prefetch = [](std::function<sge(fixture&)> range, rnic::access need = rnic::access::local_write) {
    return [range, need] {
      fixture f;
      const sge s = range(f);
      return f.dev->prefetch(f.pd, std::span(&s, 1), need);
    };
  };
  add("prefetch", "no_such_key", prefetch([](fixture& f) { return sge{f.addr(), 64, nokey}; }));
  add("prefetch", "deregistered", prefetch([](fixture& f) {
        const auto k = *f.dev->reg_mr(f.pd, f.buf.data(), 64, all_access);
        (void)f.dev->dereg_mr(k.lkey);
        return sge{f.addr(), 64, k.lkey};
      }));
  add("prefetch", "wrong_variant", prefetch([](fixture& f) {
        const auto k = *f.dev->reg_mr(f.pd, f.buf.data(), 64, all_access);
        (void)f.dev->rereg_mr(k.lkey, f.buf.data(), 64, all_access);
        return sge{f.addr(), 64, k.lkey};
      }));
  add("prefetch", "wrong_pd", prefetch([](fixture& f) {
        std::uint32_t k = 0;
        (void)f.key_of_other_pd(k);
        return sge{f.addr(), 64, k};
      }));
  add("prefetch", "no_access_right", prefetch([](fixture& f) {
        const auto k = *f.dev->reg_mr(f.pd, f.buf.data(), 64, rnic::access::none);
        return sge{f.addr(), 64, k.lkey};
      }));
  add("prefetch", "wraps", prefetch([](fixture& f) { return sge{~std::uint64_t{0} - 8, 64, f.mr.lkey}; }));
  add("prefetch", "out_of_range", prefetch([](fixture& f) { return sge{f.addr(f.buf.size() - 8), 64, f.mr.lkey}; }));
  add("rereg_mr", "not_found", [] {
    fixture f;
    return code_of(f.dev->rereg_mr(nokey, f.buf.data(), 64, all_access));
  });
  add("rereg_mr", "invalid_argument", [] {
    fixture f;
    return code_of(f.dev->rereg_mr(f.mr.lkey, nullptr, 64, all_access));
  });
  add("create_cq", "no_resources", [] {
    fixture f({.max_cqs = 1});
    return code_of(f.dev->create_cq(f.small));
  });
  add("create_cq", "invalid_argument", [] {
    fixture f;
    return code_of(f.dev->create_cq(f.empty_cq));
  });
  add("destroy_cq", "not_found", [] { return fixture{}.dev->destroy_cq(99); });
  add("destroy_cq", "busy", [] {
    fixture f;
    return f.dev->destroy_cq(f.cq);
  });
  add("resize_cq", "not_found", [] {
    fixture f;
    return f.dev->resize_cq(99, f.small);
  });
  add("resize_cq", "invalid_argument", [] {
    fixture f;
    return f.dev->resize_cq(f.cq, f.empty_cq);
  });
  add("arm_cq", "not_found", [] { return fixture{}.dev->arm_cq(99, cq_notify{}); });
  add("create_ah", "not_found", [] { return code_of(fixture{}.dev->create_ah(99, {})); });
  add("create_ah", "invalid_argument", [] {
    fixture f;
    return code_of(f.dev->create_ah(f.pd, {.port = 3}));
  });
  add("destroy_ah", "not_found", [] { return fixture{}.dev->destroy_ah(5); });
  add("create_srq", "not_found", [] {
    fixture f;
    return code_of(f.dev->create_srq(99, f.rq2));
  });
  add("create_srq", "invalid_argument", [] {
    fixture f;
    rq_memory none(3);  // not a power of two: no ring
    return code_of(f.dev->create_srq(f.pd, none));
  });
  add("destroy_srq", "not_found", [] { return fixture{}.dev->destroy_srq(0); });
  add("destroy_srq", "busy", [] {
    fixture f;
    rq_memory ring(4);
    sq_memory s(4);
    const auto srq = *f.dev->create_srq(f.pd, ring);
    (void)f.dev->create_qp({.type = qp_type::rc, .pd = f.pd, .send_cq = f.cq, .recv_cq = f.cq, .sq = &s, .srq = srq});
    return f.dev->destroy_srq(srq);
  });
  add("arm_srq_limit", "not_found", [] { return fixture{}.dev->arm_srq_limit(0, 1); });
  add("srq_limit", "not_found", [] { return code_of(fixture{}.dev->srq_limit(0)); });
  add("srq_outstanding", "not_found", [] { return code_of(fixture{}.dev->srq_outstanding(0)); });
  const flow::five_tuple tuple{.src = gid_v4(198, 18, 0, 1), .dst = gid_v4(198, 18, 0, 2), .sport = 50000};
  add("bind_session", "busy", [tuple] {
    fixture f;
    (void)f.dev->bind_session(1, tuple, 1, f.ud);
    return f.dev->bind_session(1, {.src = tuple.src, .dst = tuple.dst, .sport = 50001}, 1, f.ud);
  });
  add("bind_session", "no_resources", [tuple] {
    fixture f;
    for (std::uint32_t i = 0; i < device::max_sessions; ++i)
      (void)f.dev->bind_session(i, {.src = tuple.src, .dst = tuple.dst, .sport = static_cast<std::uint16_t>(50000 + i)}, 1, f.ud);
    return f.dev->bind_session(999, {.src = tuple.src, .dst = tuple.dst, .sport = 60000}, 1, f.ud);
  });
  add("bind_session", "invalid_argument", [tuple] {
    fixture f;
    flow::five_tuple t = tuple;
    t.dport = 4790;
    return f.dev->bind_session(1, t, 1, f.ud);
  });
  add("unbind_session", "not_found", [] { return fixture{}.dev->unbind_session(7); });
  add("set_qp_sessions", "not_found", [] { return fixture{}.dev->set_qp_sessions(0x999, 1); });
  add("set_qp_sessions", "invalid_argument", [] {
    fixture f;
    return f.dev->set_qp_sessions(f.qp, 1);  // RC
  });
  add("create_qp", "no_resources", [] {
    fixture f({.max_qps = 2});
    return code_of(f.dev->create_qp({.type = qp_type::rc, .pd = f.pd, .send_cq = f.cq, .recv_cq = f.cq, .sq = &f.sq, .rq = &f.rq}));
  });
  add("create_qp", "not_found", [] {
    fixture f;
    return code_of(f.dev->create_qp({.type = qp_type::rc, .pd = 99, .send_cq = f.cq, .recv_cq = f.cq, .sq = &f.sq, .rq = &f.rq}));
  });
  add("create_qp", "invalid_argument", [] {
    fixture f;
    return code_of(f.dev->create_qp({.type = qp_type::rc, .pd = f.pd, .send_cq = 99, .recv_cq = f.cq, .sq = &f.sq, .rq = &f.rq}));
  });
  add("destroy_qp", "not_found", [] { return fixture{}.dev->destroy_qp(0x999); });
  add("modify_qp", "not_found", [] { return fixture{}.dev->modify_qp(0x999, {.state = qp_state::init}, qp_attr_mask::state); });
  add("modify_qp", "invalid_state", [] {
    fixture f;
    return f.dev->modify_qp(f.qp, {.state = qp_state::rts}, qp_attr_mask::state);  // RESET -> RTS
  });
  add("modify_qp", "missing_attribute", [] {
    fixture f;
    return f.dev->modify_qp(f.qp, {.state = qp_state::init}, qp_attr_mask::state);  // no port, P_Key index, access flags
  });
  add("modify_qp", "invalid_attribute", [] {
    fixture f;
    using M = qp_attr_mask;
    return f.dev->modify_qp(f.qp, {.state = qp_state::init, .port = 7}, M::state | M::port | M::pkey_index | M::access_flags);
  });
  add("query_qp", "not_found", [] { return code_of(fixture{}.dev->query_qp(0x999)); });
  add("query_qp_attr", "not_found", [] { return code_of(fixture{}.dev->query_qp_attr(0x999)); });
  const sge five[5]{};
  add("post_send", "not_found", [] { return fixture{}.dev->post_send(0x999, {}); });
  add("post_send", "invalid_state", [] {
    fixture f;
    return f.dev->post_send(f.qp, {});  // RESET
  });
  add("post_send", "invalid_argument", [five] {
    fixture f;
    return f.dev->post_send(f.ud, {.sg_list = std::span(five)});
  });
  add("post_send", "queue_full", [] {
    fixture f;
    (void)f.dev->post_send(f.ud, {});
    (void)f.dev->post_send(f.ud, {});
    return f.dev->post_send(f.ud, {});
  });
  add("post_recv", "not_found", [] { return fixture{}.dev->post_recv(0x999, {}); });
  add("post_recv", "invalid_state", [] {
    fixture f;
    return f.dev->post_recv(f.qp, {});  // RESET
  });
  add("post_recv", "invalid_argument", [five] {
    fixture f;
    return f.dev->post_recv(f.ud, {.sg_list = std::span(five)});
  });
  add("post_recv", "queue_full", [] {
    fixture f;
    (void)f.dev->post_recv(f.ud, {});
    (void)f.dev->post_recv(f.ud, {});
    return f.dev->post_recv(f.ud, {});
  });
  add("post_srq_recv", "not_found", [] { return fixture{}.dev->post_srq_recv(0, {}); });
  add("post_srq_recv", "invalid_argument", [five] {
    fixture f;
    rq_memory ring(2);
    const auto srq = *f.dev->create_srq(f.pd, ring);
    return f.dev->post_srq_recv(srq, {.sg_list = std::span(five)});
  });
  add("post_srq_recv", "queue_full", [] {
    fixture f;
    rq_memory ring(2);
    const auto srq = *f.dev->create_srq(f.pd, ring);
    (void)f.dev->post_srq_recv(srq, {});
    (void)f.dev->post_srq_recv(srq, {});
    return f.dev->post_srq_recv(srq, {});
  });
  // The data path's (engine.hpp).
  add("take_frame", "invalid_argument", [] {
    fixture f;
    std::array<std::byte, 8> tiny{};
    const auto ah = *f.dev->create_ah(f.pd, {.dgid = gid_v4(198, 18, 0, 2)});
    (void)f.dev->post_send(f.ud, {.ah = ah, .remote_qpn = 0x20});
    f.dev->progress(1);
    if (f.dev->next_frame_size(0) == 0) return errc{};
    return code_of(f.dev->take_frame(0, std::span(tiny)));
  });
  add("view", "not_found", [] { return code_of(fixture{}.dev->view(0x999)); });
  return c;
}

std::vector<specgen::verb_error> documented() {
  std::vector<std::string_view> codes;
  for (const auto& e : errc_table) codes.push_back(e.name);
  std::string bad;
  auto all = specgen::device_verb_errors(PUSHWIRE_INCLUDE_DIR, codes, bad);
  INFO(bad);
  REQUIRE(!all.empty());
  return all;
}

}  // namespace

TEST_CASE("errors: every verb returns each code its comment documents, and documents each code it returns", "[rnic][errors]") {
  const auto doc = documented();
  const auto have = cases();
  std::set<key> listed;
  for (const auto& e : doc) {
    listed.insert({e.verb, e.code});
    INFO(e.verb << " documents " << e.code << " (" << e.when << ")");
    const auto it = have.find({e.verb, e.code});
    REQUIRE(it != have.end());
    CHECK(wire::enum_name(it->second()) == e.code);
  }
  for (const auto& [k, p] : have) {
    INFO(k.first << " returns " << k.second << " in a case here but does not document it");
    CHECK(listed.count(k) == 1);
  }
}

TEST_CASE("errors: the parser of Errors: clauses reads codes, shared parentheses and overloads, and refuses other words", "[rnic][errors]") {
  const std::string_view codes[] = {"not_found", "busy", "invalid_argument"};
  std::string bad;
  const auto rows = specgen::verb_errors(R"(
  /// Does a thing. Errors: not_found (no such thing), busy, invalid_argument (in use or (deeply) bad).
  errc thing(int x) {
  /// Twice. Errors: not_found (none).
  result<int> twice(int);
  /// Twice. Errors: not_found (none).
  result<int> twice(long);
  /// No errors here.
  void quiet();
)", codes, bad);
  REQUIRE(bad.empty());
  REQUIRE(rows.size() == 4);
  CHECK(rows[0] == specgen::verb_error{"thing", "not_found", "no such thing"});
  CHECK(rows[1] == specgen::verb_error{"thing", "busy", "in use or (deeply) bad"});
  CHECK(rows[2] == specgen::verb_error{"thing", "invalid_argument", "in use or (deeply) bad"});
  CHECK(rows[3] == specgen::verb_error{"twice", "not_found", "none"});
  CHECK(specgen::verb_errors("/// Errors: not_found, mistyped (x).\nerrc f();\n", codes, bad).empty());
  CHECK(bad == "f: mistyped");
}
