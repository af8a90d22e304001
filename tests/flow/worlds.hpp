// The worlds the exploration tests (explore_test.cpp) and the fuzz targets (fuzz/flow_*.cpp)
// drive: the real flow machines plus what is in flight between them, with the enabled events
// listed (events()), applied (apply()), and the invariants checked in every state (check(),
// done()). Bounds: spec/flow.md §6.
#pragma once

#include <cstdlib>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "harness.hpp"

namespace pwtest {

/// A bound from the environment (for longer local runs), else the default.
inline std::size_t env(const char* name, std::size_t fallback) {
  const char* v = std::getenv(name);
  return v ? static_cast<std::size_t>(std::atoi(v)) : fallback;
}

// ==== 1. pool credits + flush =============================================================

/// Owner and user of one pool (3 elements of 100 bytes; the owner's allocator grants one more
/// pool of 2). Control channels are reliable and in order (RC Sends), the data channel too;
/// writes complete back to the user after the owner has them. Bounds: 4 transfers, each
/// side may flush each pool once, the application releases whenever it holds an element.
struct pool_world {
  using O = pool_owner<2, 3>;
  using U = pool_user<2, 3>;
  O o{pool_allocator{nullptr, [](void*, const msg::buffer_recv_pool_get& g) -> std::optional<msg::pool_descriptor> {
                       return msg::pool_descriptor{.pool_ref = 0, .element_count = 2, .element_size = g.element_size, .memory_handle = 2,
                                                   .address = 0x8000, .pool_context = 0};
                     }}};
  U u;
  std::deque<pool_action_t> to_user, to_owner, data;  // control o->u, control u->o, RDMA writes
  std::deque<pool_action::rdma_write> completions;   // write completions back to the user
  int transfers_left = 4;
  std::set<std::pair<std::uint32_t, std::uint32_t>> owner_flushed, user_flushed;
  std::string fault, trace;

  explicit pool_world(bool never_idata) : u(pool_user_config{.low_water = 1, .get_count = 2, .never_idata = never_idata}) {
    std::array<pool_action_t, 16> buf{};
    pool_sink s{std::span<pool_action_t>(buf)};
    o.advertise({.pool_ref = 5, .element_count = 3, .element_size = 100, .memory_handle = 1, .address = 0x1000, .pool_context = 0}, s);
    route_owner(s);
  }

  void route_owner(const pool_sink& s) {
    for (const auto& a : s) {
      if (auto f = std::get_if<pool_action::fault>(&a)) fault = "owner fault " + std::string(name(f->code));
      if (std::holds_alternative<pool_action::send_recv_pool>(a) || std::holds_alternative<pool_action::send_update>(a) ||
          std::holds_alternative<pool_action::send_flush_request>(a) || std::holds_alternative<pool_action::send_flush_reply>(a))
        to_user.push_back(a);
    }
  }
  void route_user(const pool_sink& s) {
    for (const auto& a : s) {
      if (auto f = std::get_if<pool_action::fault>(&a)) fault = "user fault " + std::string(name(f->code));
      if (std::holds_alternative<pool_action::rdma_write>(a)) data.push_back(a);
      else if (!std::holds_alternative<pool_action::deliver>(a) && !std::holds_alternative<pool_action::deregister>(a)) to_owner.push_back(a);
    }
  }
  template <class F>
  void with_sink(F&& f) {
    std::array<pool_action_t, 32> buf{};
    pool_sink s{std::span<pool_action_t>(buf)};
    f(s);
  }

  // events: 0 transfer; 1 deliver to user; 2 deliver to owner; 3 deliver data; 4 complete a write;
  // 10+p owner flushes slot p; 20+p user flushes slot p; 30+p*8+k owner releases element k of slot p
  std::vector<int> events() const {
    std::vector<int> e;
    if (transfers_left > 0 && u.free_elements(100) > 0) e.push_back(0);
    if (!to_user.empty()) e.push_back(1);
    if (!to_owner.empty()) e.push_back(2);
    if (!data.empty()) e.push_back(3);
    if (!completions.empty()) e.push_back(4);
    for (int p = 0; p < 2; ++p) {
      const auto& os = o.at(static_cast<std::size_t>(p));
      if (os.state == pool_state::active && !owner_flushed.count({os.desc.pool_ref, 0})) e.push_back(10 + p);
      const auto& us = u.at(static_cast<std::size_t>(p));
      if (us.state == pool_state::active && !user_flushed.count({us.desc.pool_ref, 0})) e.push_back(20 + p);
      for (std::uint32_t k = 0; k < os.desc.element_count; ++k)
        if (os.state != pool_state::unused && os.el[k] == O::element::consumed) {
          e.push_back(30 + p * 8 + static_cast<int>(k));
          break;  // the lowest held element stands for all (releases commute)
        }
    }
    return e;
  }
  void apply(int ev) {
    trace += std::to_string(ev) + " ";
    if (ev == 0) {
      --transfers_left;
      with_sink([&](pool_sink& s) {
        u.transfer(100, s);
        route_user(s);
      });
    } else if (ev == 1) {
      const pool_action_t a = to_user.front();
      to_user.pop_front();
      with_sink([&](pool_sink& s) {
        if (auto m = std::get_if<pool_action::send_recv_pool>(&a)) u.on_pool(m->pool, s);
        if (auto m = std::get_if<pool_action::send_update>(&a)) u.on_update_entry(m->entry, s);
        if (auto m = std::get_if<pool_action::send_flush_request>(&a)) {
          const std::uint32_t refs[] = {m->pool_ref};
          u.on_flush_request({.header = {.transaction_context = m->txn}, .pool_refs = std::span<const std::uint32_t>(refs)}, s);
        }
        if (auto m = std::get_if<pool_action::send_flush_reply>(&a)) u.on_flush_reply({.header = {.transaction_context = m->txn}}, s);
        route_user(s);
      });
    } else if (ev == 2) {
      const pool_action_t a = to_owner.front();
      to_owner.pop_front();
      with_sink([&](pool_sink& s) {
        if (auto m = std::get_if<pool_action::send_get>(&a)) o.on_get({.element_size = m->element_size, .element_count = m->element_count}, s);
        if (auto m = std::get_if<pool_action::send_indicate>(&a)) o.on_indication(m->entry, s);
        if (auto m = std::get_if<pool_action::send_flush_request>(&a)) {
          const std::uint32_t refs[] = {m->pool_ref};
          o.on_flush_request({.header = {.transaction_context = m->txn}, .pool_refs = std::span<const std::uint32_t>(refs)}, s);
        }
        if (auto m = std::get_if<pool_action::send_flush_reply>(&a)) o.on_flush_reply({.header = {.transaction_context = m->txn}}, s);
        route_owner(s);
      });
    } else if (ev == 3) {
      const auto w = std::get<pool_action::rdma_write>(data.front());
      data.pop_front();
      // the write lands: it must be into an element the owner lent, of a pool not flushed
      const auto slot = o.find(w.pool_ref);
      if (!slot || o.at(*slot).state == pool_state::flushed) fault = "write into a flushed or unknown pool";
      else if (o.at(*slot).el[w.element] != O::element::lent) fault = "write into an element that was not lent";
      if (w.with_imm)
        with_sink([&](pool_sink& s) {
          o.on_idata(w.imm, s);
          route_owner(s);
        });
      completions.push_back(w);
    } else if (ev == 4) {
      const auto w = completions.front();
      completions.pop_front();
      with_sink([&](pool_sink& s) {
        u.write_done(w.pool_ref, w.element, s);
        route_user(s);
      });
    } else if (ev >= 10 && ev < 20) {
      const auto& os = o.at(static_cast<std::size_t>(ev - 10));
      owner_flushed.insert({os.desc.pool_ref, 0});
      with_sink([&](pool_sink& s) {
        o.flush(os.desc.pool_ref, s);
        route_owner(s);
      });
    } else if (ev >= 20 && ev < 30) {
      const auto& us = u.at(static_cast<std::size_t>(ev - 20));
      user_flushed.insert({us.desc.pool_ref, 0});
      with_sink([&](pool_sink& s) {
        u.flush(us.desc.pool_ref, s);
        route_user(s);
      });
    } else {
      const int p = (ev - 30) / 8, k = (ev - 30) % 8;
      with_sink([&](pool_sink& s) {
        o.release(o.at(static_cast<std::size_t>(p)).desc.pool_ref, static_cast<std::uint32_t>(k), 1, s);
        route_owner(s);
      });
    }
  }
  std::uint64_t fingerprint() const {
    hasher h;
    o.digest(h);
    u.digest(h);
    auto msgs = [&](const std::deque<pool_action_t>& q) {
      h(q.size());
      for (const auto& a : q) {
        h(a.index());
        std::visit([&](const auto& m) {
          if constexpr (requires { m.txn; }) h(m.txn);
          if constexpr (requires { m.element; }) h(m.element);
          if constexpr (requires { m.entry.first_element; }) h(m.entry.first_element);
          if constexpr (requires { m.entry.element_index; }) h(m.entry.element_index);
        }, a);
      }
    };
    msgs(to_user);
    msgs(to_owner);
    msgs(data);
    h(completions.size());
    for (const auto& w : completions) h(w.element * 1000u + w.pool_ref);
    h(static_cast<std::uint64_t>(transfers_left));
    h(owner_flushed.size() * 16 + user_flushed.size());
    return h.h;
  }
  std::string check() const {
    if (!fault.empty()) return fault;
    for (std::size_t p = 0; p < 2; ++p) {
      const auto& os = o.at(p);
      if (os.state == pool_state::unused) continue;
      const auto ui = u.find(os.desc.pool_ref);
      for (std::uint32_t k = 0; k < os.desc.element_count; ++k) {
        const auto ue = ui ? u.at(*ui).el[k] : U::element::not_held;
        // a free element on the user's books is lent on the owner's (a write landing in an
        // element that is not lent is caught where it lands, in apply())
        if (ue == U::element::free && os.el[k] != O::element::lent)
          return "user has element " + std::to_string(k) + " of pool " + std::to_string(os.desc.pool_ref) + " free, owner has not lent it";
      }
    }
    return {};
  }
  std::string describe() const { return {}; }
  bool done() const {
    if (!to_user.empty() || !to_owner.empty() || !data.empty() || !completions.empty()) return false;
    for (std::size_t p = 0; p < 2; ++p) {
      const auto& os = o.at(p);
      if (os.state == pool_state::unused) continue;
      // every element ends returned (lent again: free at the user) or flushed (home)
      const auto ui = u.find(os.desc.pool_ref);
      for (std::uint32_t k = 0; k < os.desc.element_count; ++k) {
        if (os.el[k] == O::element::consumed) return false;
        const bool returned = os.state == pool_state::active && os.el[k] == O::element::lent && ui && u.at(*ui).el[k] == U::element::free;
        const bool flushed = os.state == pool_state::flushed && os.el[k] == O::element::home;
        if (!returned && !flushed) return false;
      }
      if (os.state == pool_state::flushing) return false;
      if (ui && (u.at(*ui).state == pool_state::draining || u.at(*ui).state == pool_state::flushing)) return false;
    }
    return true;
  }
};

/// A link in both directions that delivers, loses, duplicates and reorders packets, within
/// budgets: `losses` and `dups` in all, a packet may overtake at most reorder - 1 others, and
/// at most `capacity` packets wait per direction (tail drop beyond: a full switch buffer).
/// Events 100+i deliver forward packet i, 200+i backward; 300+/400+ lose, 500+/600+ duplicate.
struct lossy_link {
  std::vector<packet> fwd, back;
  int losses = 1, dups = 1;
  std::size_t reorder = 2, capacity = 64;

  bool quiet() const { return fwd.empty() && back.empty(); }
  void send(const packet& p, bool forward) {
    auto& v = forward ? fwd : back;
    if (v.size() < capacity) v.push_back(p);
  }
  void events(std::vector<int>& e) const {
    auto each = [&](const std::vector<packet>& v, int base) {
      for (std::size_t i = 0; i < v.size() && i < reorder; ++i) {
        bool first = true;  // identical packets in flight are one choice
        for (std::size_t k = 0; k < i; ++k) first = first && !(v[k] == v[i]);
        if (!first) continue;
        e.push_back(base + 100 + static_cast<int>(i));
        if (losses > 0) e.push_back(base + 300 + static_cast<int>(i));
        if (dups > 0) e.push_back(base + 500 + static_cast<int>(i));
      }
    };
    each(fwd, 0);
    each(back, 100);
  }
  /// Applies a link event; returns the packet to deliver and its direction (forward = true).
  std::optional<std::pair<bool, packet>> apply(int ev) {
    const int kind = ev / 100, i = ev % 100;
    const bool forward = kind % 2 == 1;
    auto& v = forward ? fwd : back;
    const packet p = v[static_cast<std::size_t>(i)];
    if (kind >= 5) {
      --dups;
      v.push_back(p);
      return std::nullopt;
    }
    v.erase(v.begin() + i);
    if (kind >= 3) {
      --losses;
      return std::nullopt;
    }
    return std::pair{forward, p};
  }
  void digest(hasher& h) const {
    for (const auto* v : {&fwd, &back}) {
      h(v->size());  // in order: only the first `reorder` may overtake each other
      for (const packet& p : *v)
        h((std::uint64_t{static_cast<std::uint16_t>(p.opcode)} << 48) ^ (std::uint64_t{p.dest_qp} << 32) ^ (std::uint64_t{p.psn} << 8) ^ p.aeth.syndrome ^
          (p.se ? 1ull << 62 : 0));
    }
    h(static_cast<std::uint64_t>(losses * 10 + dups));
  }
};

// ==== 2. RC over a lossy link ================================================================

/// A requester and a responder over a lossy_link. Script: an RDMA WRITE of 2 packets, a SEND,
/// a READ of 1 response (MTU 256); the WRITE is posted first, the other two are posted as events
/// (RC_POSTS=n posts the first n before exploring). The responder's first WRITE packet meets a page that is not resident until the
/// fault resolves (an event). Bounds: 1 loss, 1 duplication, a packet overtakes at most one
/// other, 3 packets per direction; a timer (retransmission, RNR / fault wait) fires once the
/// link is empty (timeouts exceed the round trip), and one may fire early. The requester retries
/// forever (retry_forever) and rnr_retry is 7 (infinite), so everything must complete, in order,
/// successfully, once.
struct rc_world {
  static inline const work_request script[] = {
      {.id = 1, .op = wr_op::write, .length = 400, .remote_va = 0, .rkey = 1},
      {.id = 2, .op = wr_op::send, .length = 100},
      {.id = 3, .op = wr_op::read, .length = 200, .remote_va = 0, .rkey = 1},
  };
  requester<4> rq{{.mtu = 256, .window = 8, .timeout = 1000, .retry_forever = true, .ackreq_every = 0}};
  responder<4> rs{{.mtu = 256}};
  lossy_link link;  ///< forward: to the responder
  std::size_t posted = 0;
  int early = 1;
  bool faulted = true;  ///< the responder's first WRITE meets a page that is not resident
  time_ns now = 0;
  std::vector<std::uint64_t> completed;
  std::map<std::pair<std::uint64_t, std::uint32_t>, int> placed;
  std::map<std::uint64_t, int> received;
  std::string fault, trace;

  /// posts: how many of the script are posted before exploring (the rest are events).
  rc_world(int losses, std::size_t posts) {
    link.losses = losses;
    link.reorder = env("RC_REORDER", 2);
    link.capacity = env("RC_CAPACITY", 3);
    rs.post_receive(4);
    bind();
    while (posted < posts) apply(0);
    trace.clear();
  }
  void bind() {
    rs.set_memory(memory_port{this, [](void* c, std::uint32_t, std::uint64_t, std::uint32_t, access_kind kind, bool) {
                                auto* w = static_cast<rc_world*>(c);
                                return w->faulted && kind != access_kind::read ? access_result{access_result::page_fault, 5} : access_result{};
                              },
                              nullptr});
  }
  void take(const std::vector<qp_action_t>& acts, bool from_req) {
    for (const auto& a : acts) {
      if (auto t = std::get_if<qp_action::transmit>(&a)) link.send(t->pkt, from_req);
      if (auto c = std::get_if<qp_action::complete>(&a)) {
        completed.push_back(c->wr_id);
        if (c->status != wc_status::success) fault = "completion with status " + std::string(pushwire::wire::enum_name(c->status));
      }
      if (auto p = std::get_if<qp_action::place>(&a))
        if (++placed[{p->wr_id, p->offset}] > 1) fault = "data placed twice";
      if (auto r = std::get_if<qp_action::receive>(&a))
        if (++received[r->wr_id] > 1) fault = "message delivered twice";
    }
  }
  // events: 0 post; 1 retransmit timer; 2 wait timer; 4 resolve the fault; link events
  std::vector<int> events() const {
    std::vector<int> e;
    if (posted < std::size(script)) e.push_back(0);
    // a timer fires once the link is empty (timeouts exceed the round trip), or early once
    if (rq.deadline(timer_kind::retransmit) && (link.quiet() || early > 0)) e.push_back(1);
    if (rq.deadline(timer_kind::wait) && (link.quiet() || early > 0)) e.push_back(2);
    if (faulted) e.push_back(4);
    link.events(e);
    return e;
  }
  void apply(int ev) {
    bind();
    trace += std::to_string(ev) + " ";
    ++now;
    if (ev == 0) {
      take(collect<qp_action_t, 64>([&](qp_sink& o) { return rq.post(script[posted++], now, o); }), true);
    } else if (ev == 1 || ev == 2) {
      const timer_kind k = ev == 1 ? timer_kind::retransmit : timer_kind::wait;
      if (!link.quiet()) --early;
      now = std::max(now, *rq.deadline(k));
      take(collect<qp_action_t, 64>([&](qp_sink& o) { return rq.on_timer(k, now, o); }), true);
    } else if (ev == 4) {
      faulted = false;
    } else if (const auto d = link.apply(ev)) {
      if (d->first)
        take(collect<qp_action_t, 64>([&](qp_sink& o) { return rs.on_packet(d->second, o); }), false);
      else
        take(collect<qp_action_t, 64>([&](qp_sink& o) { return rq.on_packet(d->second, now, o); }), true);
    }
    while (rq.wants_to_send())
      take(collect<qp_action_t, 64>([&](qp_sink& o) {
             rq.pump(now, o);
             return step_result{};
           }),
           true);
    while (rs.wants_to_send())
      take(collect<qp_action_t, 64>([&](qp_sink& o) {
             rs.pump(o);
             return step_result{};
           }),
           false);
  }
  std::uint64_t fingerprint() const {
    hasher h;
    rq.digest(h);
    rs.digest(h);
    link.digest(h);
    h(posted);
    h(static_cast<std::uint64_t>(early));
    h(faulted);
    h(completed.size());
    return h.h;
  }
  std::string describe() const {
    return "requester state " + std::string(pushwire::wire::enum_name(rq.state())) + " una " + std::to_string(rq.una()) +
           " next " + std::to_string(rq.next_psn()) + " queued " + std::to_string(rq.queued()) + " wants " +
           std::to_string(rq.wants_to_send()) + "; responder " + std::string(pushwire::wire::enum_name(rs.state())) +
           " epsn " + std::to_string(rs.expected_psn()) + "; completed " + std::to_string(completed.size());
  }
  std::string check() const {
    if (!fault.empty()) return fault;
    for (std::size_t i = 0; i < completed.size(); ++i)
      if (completed[i] != i + 1) return "completions out of order";
    return {};
  }
  bool done() const {
    // nothing enabled: everything posted has completed, once, and the data is all there
    return posted == std::size(script) && rq.quiescent() && completed.size() == 3 && received.size() == 1 &&
           placed.size() == 3 && !faulted;
  }
};

// ==== 3. DC with two targets ===================================================================

/// One DCI and two DCTs (A: 0x100, B: 0x200, different keys). Script: a WRITE for A, a SEND for
/// B, a WRITE for A (1 packet each). Bounds: 1 loss, 1 duplication, any reordering, timers
/// whenever armed. Property: data meant for one target is never placed at the other; each
/// request completes once, in order.
struct dc_world {
  static constexpr dc_address A{.dct = 0x100, .access_key = 0xA};
  static constexpr dc_address B{.dct = 0x200, .access_key = 0xB};
  static inline const std::pair<work_request, dc_address> script[] = {
      {{.id = 1, .op = wr_op::write, .length = 64, .remote_va = 0, .rkey = 1}, A},
      {{.id = 2, .op = wr_op::send, .length = 64}, B},
      {{.id = 3, .op = wr_op::write, .length = 64, .remote_va = 0, .rkey = 1}, A},
  };
  dc_initiator<8, 4> dci{{.dci = 7, .req = {.mtu = 256, .window = 8, .timeout = 1000, .retry_forever = true, .ackreq_every = 0}}};
  dc_target<4> ta{{.dct = A.dct, .access_key = A.access_key, .resp = {.mtu = 256}}};
  dc_target<4> tb{{.dct = B.dct, .access_key = B.access_key, .resp = {.mtu = 256}}};
  lossy_link link;  ///< forward: to the targets (by destination QP)
  std::size_t posted = 0;
  int early = 1;
  time_ns now = 0;
  std::vector<std::uint64_t> completed;
  std::map<std::uint64_t, int> placed;
  std::string fault, trace;

  dc_world() {
    link.reorder = env("DC_REORDER", 3);
    tb.post_receive(4);
  }
  void take_dci(const std::vector<qp_action_t>& acts) {
    for (const auto& a : acts) {
      if (auto t = std::get_if<qp_action::transmit>(&a)) link.send(t->pkt, true);
      if (auto c = std::get_if<qp_action::complete>(&a)) {
        if (c->wr_id < dc_internal_id) completed.push_back(c->wr_id);
        if (c->status != wc_status::success) fault = "completion with status " + std::string(pushwire::wire::enum_name(c->status));
      }
    }
  }
  void take_dct(const dc_address& who, const std::vector<qp_action_t>& acts) {
    for (const auto& a : acts) {
      if (auto t = std::get_if<qp_action::transmit>(&a)) link.send(t->pkt, false);
      if (auto p = std::get_if<qp_action::place>(&a)) {
        const auto& meant = script[p->wr_id - 1].second;
        if (!(meant == who)) fault = "data for " + std::to_string(meant.dct) + " placed at " + std::to_string(who.dct);
        if (++placed[p->wr_id] > 1) fault = "data of request " + std::to_string(p->wr_id) + " placed twice (psn " + std::to_string(p->psn) + ")";
      }
    }
  }
  std::vector<int> events() const {
    std::vector<int> e;
    if (posted < std::size(script)) e.push_back(0);
    if (dci.transport().deadline(timer_kind::retransmit) && (link.quiet() || early > 0)) e.push_back(1);
    link.events(e);
    return e;
  }
  void apply(int ev) {
    trace += std::to_string(ev) + " ";
    ++now;
    if (ev == 0) {
      const work_request wr = script[posted].first;
      const dc_address to = script[posted++].second;
      take_dci(collect<qp_action_t, 64>([&](qp_sink& o) { return dci.post(wr, to, now, o); }));
    } else if (ev == 1) {
      if (!link.quiet()) --early;
      now = std::max(now, *dci.transport().deadline(timer_kind::retransmit));
      take_dci(collect<qp_action_t, 64>([&](qp_sink& o) { return dci.on_timer(timer_kind::retransmit, now, o); }));
    } else if (const auto d = link.apply(ev)) {
      const packet& p = d->second;
      if (d->first) {
        auto& t = p.dest_qp == A.dct ? ta : tb;
        take_dct(p.dest_qp == A.dct ? A : B, collect<qp_action_t, 64>([&](qp_sink& o) { return t.on_packet(p, o); }));
      } else {
        take_dci(collect<qp_action_t, 64>([&](qp_sink& o) { return dci.on_packet(p, now, o); }));
      }
    }
    for (auto* t : {&ta, &tb})
      while (t->wants_to_send())
        take_dct(t == &ta ? A : B, collect<qp_action_t, 64>([&](qp_sink& o) {
                   t->pump(o);
                   return step_result{};
                 }));
  }
  std::uint64_t fingerprint() const {
    hasher h;
    dci.digest(h);
    ta.digest(h);
    tb.digest(h);
    link.digest(h);
    h(posted);
    h(static_cast<std::uint64_t>(early));
    h(completed.size());
    return h.h;
  }
  std::string describe() const {
    return "dci " + std::string(pushwire::wire::enum_name(dci.state())) + " requester " +
           std::string(pushwire::wire::enum_name(dci.transport().state())) + " una " + std::to_string(dci.transport().una());
  }
  std::string check() const {
    if (!fault.empty()) return fault;
    for (std::size_t i = 0; i < completed.size(); ++i)
      if (completed[i] != i + 1) return "completions out of order";
    if (ta.state() == dct_state::connected && tb.state() == dct_state::connected && dci.transport().quiescent())
      return "both targets connected with nothing outstanding";
    return {};
  }
  bool done() const {
    return posted == std::size(script) && dci.quiescent() && completed.size() == 3 && placed.size() == 3;
  }
};


}  // namespace pwtest
