// Buffer-pool credits and flush (the split-model driver's protocol, IV.B.1 and IV.B.2), both sides, as transition tables
// over the life of one pool. The pool owner (the target) lends elements by advertising them
// (BufferRecvPool) and returning them (BufferRecvPoolUpdate); the pool user (the initiator)
// writes into an element it holds, indicates it (idata, or BufferRDMAIndicate after the write
// completes), and the element is the owner's again until it is returned.
//
// Flush ordering, decided here (spec/flow.md §1) because writes and control messages travel on
// different channels: the user sends FlushReply, or its own FlushRequest, only after every
// write it issued into the pool has completed (write_done) and its indications were sent; the
// owner deregisters on the reply (or on the user's request) and from then on any indication for
// the pool is errc::write_after_flush.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <type_traits>
#include <variant>

#include <pushwire/flow/core.hpp>
#include <pushwire/msg/buffer.hpp>
#include <pushwire/msg/data.hpp>
#include <pushwire/msg/idata.hpp>

namespace pushwire::flow {

/// The life of one pool, on either side.
enum class pool_state : std::uint8_t {
  unused,    ///< no pool in this slot
  active,    ///< advertised; the user may write into elements it holds
  draining,  ///< user only: no new writes; waiting for its writes to complete before it replies or requests
  flushing,  ///< a FlushRequest was sent; waiting for the reply
  flushed,   ///< deregistered (owner) or forgotten (user); nothing is written any more
};
inline constexpr std::array<wire::named_value, 5> pool_state_names{{
    {pool_state::unused, "unused"},
    {pool_state::active, "active"},
    {pool_state::draining, "draining"},
    {pool_state::flushing, "flushing"},
    {pool_state::flushed, "flushed"},
}};
constexpr std::span<const wire::named_value> wire_enum_names(pool_state) { return pool_state_names; }

/// The owner's events.
enum class owner_event : std::uint8_t { advertise, get, indicate, release, flush, flush_reply, peer_flush };
inline constexpr std::array<wire::named_value, 7> owner_event_names{{
    {owner_event::advertise, "advertise"},
    {owner_event::get, "BufferRecvPoolGet"},
    {owner_event::indicate, "indication"},
    {owner_event::release, "release"},
    {owner_event::flush, "flush"},
    {owner_event::flush_reply, "BufferPoolFlushReply"},
    {owner_event::peer_flush, "BufferPoolFlushRequest"},
}};
constexpr std::span<const wire::named_value> wire_enum_names(owner_event) { return owner_event_names; }
/// The user's events.
enum class user_event : std::uint8_t { advertised, transfer, write_done, update, flush, flush_reply, peer_flush };
inline constexpr std::array<wire::named_value, 7> user_event_names{{
    {user_event::advertised, "BufferRecvPool"},
    {user_event::transfer, "transfer"},
    {user_event::write_done, "write_done"},
    {user_event::update, "BufferRecvPoolUpdate"},
    {user_event::flush, "flush"},
    {user_event::flush_reply, "BufferPoolFlushReply"},
    {user_event::peer_flush, "BufferPoolFlushRequest"},
}};
constexpr std::span<const wire::named_value> wire_enum_names(user_event) { return user_event_names; }

// ---- actions (both sides) ----------------------------------------------------------------
namespace pool_action {
/// Send BufferRecvPool advertising one pool.
struct send_recv_pool { std::uint64_t txn; msg::pool_descriptor pool; friend constexpr bool operator==(const send_recv_pool&, const send_recv_pool&) = default; };
/// Send BufferRecvPoolGet.
struct send_get { std::uint64_t txn; std::uint32_t element_size, element_count; bool implicit = false; friend constexpr bool operator==(const send_get&, const send_get&) = default; };
/// Send BufferRecvPoolUpdate with one entry.
struct send_update { std::uint64_t txn; msg::pool_update_entry entry; friend constexpr bool operator==(const send_update&, const send_update&) = default; };
/// Send BufferPoolFlushRequest for one pool.
struct send_flush_request { std::uint64_t txn; std::uint32_t pool_ref; friend constexpr bool operator==(const send_flush_request&, const send_flush_request&) = default; };
/// Send BufferPoolFlushReply echoing the request's transaction context.
struct send_flush_reply { std::uint64_t txn; friend constexpr bool operator==(const send_flush_reply&, const send_flush_reply&) = default; };
/// Send BufferRDMAIndicate with one entry (after the write it describes completed).
struct send_indicate { std::uint64_t txn; msg::indication entry; friend constexpr bool operator==(const send_indicate&, const send_indicate&) = default; };
/// Post an RDMA write of `bytes` to `address` under `rkey`; with_imm: RDMA WRITE with immediate
/// `imm` (the idata). The caller reports its completion with write_done(pool_ref, element).
struct rdma_write {
  std::uint32_t pool_ref, element;
  std::uint64_t address;
  std::uint32_t rkey, bytes;
  bool with_imm;
  std::uint32_t imm;
  friend constexpr bool operator==(const rdma_write&, const rdma_write&) = default;
};
/// Owner: the application now holds this element and its data.
struct deliver { msg::indication what; friend constexpr bool operator==(const deliver&, const deliver&) = default; };
/// Owner: the pool's memory may be deregistered and freed.
struct deregister { std::uint32_t pool_ref; friend constexpr bool operator==(const deregister&, const deregister&) = default; };
/// Owner: a BufferRecvPoolGet was declined (no reply is sent, as the split-model document allows).
struct declined { std::uint32_t element_size, element_count; friend constexpr bool operator==(const declined&, const declined&) = default; };
/// A peer message or a request broke the protocol; nothing was changed by it.
struct fault { errc code; std::uint32_t pool_ref, element; friend constexpr bool operator==(const fault&, const fault&) = default; };
}  // namespace pool_action

using pool_action_t = std::variant<pool_action::send_recv_pool, pool_action::send_get, pool_action::send_update,
                                   pool_action::send_flush_request, pool_action::send_flush_reply, pool_action::send_indicate,
                                   pool_action::rdma_write, pool_action::deliver, pool_action::deregister,
                                   pool_action::declined, pool_action::fault>;
using pool_sink = sink<pool_action_t>;

/// What a step of a pool machine reads (which fields depend on the event).
struct pool_input {
  std::size_t slot = 0;
  msg::pool_descriptor desc{};  ///< advertise, get (granted), advertised
  std::uint32_t element = 0;    ///< indicate, release (first), write_done, update (first)
  std::uint32_t count = 0;      ///< release, update: elements
  std::uint32_t bytes = 0;      ///< indicate, transfer
  std::uint64_t txn = 0;        ///< flush_reply, peer_flush
};

/// Owner: the caller's allocator for BufferRecvPoolGet. Given the request (size, count and
/// whether implicit registration is asked), returns the new pool or nullopt to decline. Its
/// pool_ref is kept unless a pool in use has it (then the owner assigns the lowest one not in
/// use); its `implicit` says how the pool was registered, whatever was asked. Must not call
/// back into the machine.
struct pool_allocator {
  void* ctx = nullptr;
  std::optional<msg::pool_descriptor> (*grant)(void* ctx, const msg::buffer_recv_pool_get& request) = nullptr;
};

/// Where each element is, on the owner's books.
enum class owner_element : std::uint8_t {
  home,      ///< with the owner (not lent: before advertising, after a flush)
  lent,      ///< the user may write it
  consumed,  ///< indicated; held by the owner's application until released
};/// Where each element is, on the user's books.
enum class user_element : std::uint8_t {
  not_held,  ///< the owner has it (written and indicated, or never lent)
  free,      ///< the user may write it
  writing,   ///< a write was issued and has not completed
  returned,  ///< writing, and the owner already returned it (its idata landed, the
             ///< application released it, the update overtook the write's completion)
};
namespace detail {
template <std::size_t MaxElements>
struct owner_slot {
  pool_state state = pool_state::unused;
  msg::pool_descriptor desc{};
  std::array<owner_element, MaxElements> el{};
  std::uint64_t flush_txn = 0;
};
template <std::size_t MaxElements>
struct user_slot {
  pool_state state = pool_state::unused;
  msg::pool_descriptor desc{};
  std::array<user_element, MaxElements> el{};
  std::array<std::uint32_t, MaxElements> bytes{};  ///< of the write in flight
  std::uint32_t in_flight = 0;
  bool reply_pending = false;  ///< draining to answer the owner's request (else to send our own)
  std::uint64_t reply_txn = 0;
  std::uint64_t flush_txn = 0;
};
/// What both sides keep per pool slot and how they look it up (Slot has state, desc, el).
template <class Slot, std::size_t MaxPools>
class pool_book {
 public:
  constexpr std::optional<std::size_t> find(std::uint32_t pool_ref) const {
    for (std::size_t i = 0; i < MaxPools; ++i)
      if (slots_[i].state != pool_state::unused && slots_[i].desc.pool_ref == pool_ref) return i;
    return std::nullopt;
  }
  constexpr const Slot& at(std::size_t i) const { return slots_[i]; }
  constexpr pool_state state_of(std::uint32_t pool_ref) const {
    const auto i = find(pool_ref);
    return i ? slots_[*i].state : pool_state::unused;
  }
  /// Elements of a pool in state e (on this side's books).
  template <class Element>
  constexpr std::uint32_t count(std::uint32_t pool_ref, Element e) const {
    const auto i = find(pool_ref);
    if (!i) return 0;
    std::uint32_t n = 0;
    for (std::uint32_t k = 0; k < slots_[*i].desc.element_count; ++k) n += slots_[*i].el[k] == e;
    return n;
  }

 protected:
  /// Applies `one` to every element of `range` in order; the first error is the result.
  template <class Range, class F>
  static constexpr step_result each(const Range& range, F&& one) {
    step_result first{};
    for (const auto& x : range) {
      const step_result r = one(x);
      if (first.ok()) first = r;
    }
    return first;
  }
  /// Runs one(slot index) for every slot flushing under `txn` (a FlushReply answers them);
  /// event_not_allowed when there is none.
  template <class F>
  constexpr step_result each_flushing(std::uint64_t txn, F&& one) {
    step_result r{-1, errc::event_not_allowed};
    for (std::size_t i = 0; i < MaxPools; ++i)
      if (slots_[i].state == pool_state::flushing && slots_[i].flush_txn == txn) r = one(i);
    return r;
  }
  /// Runs one(slot index) for every pool a FlushRequest names; an unknown one is a fault.
  template <class Refs, class F>
  constexpr step_result each_named(const Refs& refs, pool_sink& out, F&& one) {
    step_result r{};
    for (std::uint32_t ref : refs) {
      const auto s = find(ref);
      if (!s) {
        out.push(pool_action::fault{errc::unknown_pool, ref, 0});
        r = {-1, errc::unknown_pool};
        continue;
      }
      const step_result k = one(*s);
      if (r.ok()) r = k;
    }
    return r;
  }
  std::array<Slot, MaxPools> slots_{};
};

}  // namespace detail

// ---- the owner (target) --------------------------------------------------------------------

/// Pool owner. MaxPools slots of up to MaxElements elements each; no allocation.
template <std::size_t MaxPools, std::size_t MaxElements>
class pool_owner : public detail::pool_book<detail::owner_slot<MaxElements>, MaxPools> {
  using book = detail::pool_book<detail::owner_slot<MaxElements>, MaxPools>;
  using book::slots_;

 public:
  using element = owner_element;
  using slot = detail::owner_slot<MaxElements>;
  using book::count;
  using book::find;

  using row = transition<pool_owner, pool_state, owner_event, pool_input, pool_sink>;

  /// The least sink room an event needs: one action (a message to send, a delivery, a fault).
  /// Events that act per entry or per pool need one per entry (BufferRecvPoolUpdate: its
  /// entries; flushing every pool: P), as each one's documentation says. Below it an event
  /// returns actions_full and changes nothing.
  static constexpr std::size_t min_room = 1;

  struct counters {
    std::uint64_t delivered = 0, returned = 0, flushed = 0, declined = 0, faults = 0;
  };

  constexpr explicit pool_owner(pool_allocator alloc = {}, std::uint64_t first_txn = 1) : alloc_(alloc), txn_(first_txn) {}

  /// Advertise a pool (the application registered its memory). Errors: invalid_argument
  /// (element_count or element_size 0), table_full (no slot, or more than MaxElements
  /// elements), pool_exists.
  constexpr step_result advertise(const msg::pool_descriptor& d, pool_sink& out);
  /// A BufferRecvPoolGet from the user: the allocator grants (BufferRecvPool) or declines.
  constexpr step_result on_get(const msg::buffer_recv_pool_get& g, pool_sink& out);
  /// One transfer indication (idata or a BufferRDMAIndicate entry). Errors: unknown_pool,
  /// element_not_on_loan, too_large (bytes above element_size, or 0), write_after_flush.
  constexpr step_result on_indication(const msg::indication& i, pool_sink& out);
  constexpr step_result on_idata(std::uint32_t imm, pool_sink& out) { return on_indication(msg::to_indication(msg::from_imm(imm)), out); }
  /// Every entry of a BufferRDMAIndicate, in order (errors are reported per entry as faults;
  /// the first is returned).
  constexpr step_result on_indicate(const msg::buffer_rdma_indicate& m, pool_sink& out);
  /// The application is done with elements [first, first + count): they are returned to the
  /// user (BufferRecvPoolUpdate) while the pool is active, and kept home otherwise.
  constexpr step_result release(std::uint32_t pool_ref, std::uint32_t first, std::uint32_t count, pool_sink& out);
  /// Start a flush of one pool (BufferPoolFlushRequest).
  constexpr step_result flush(std::uint32_t pool_ref, pool_sink& out);
  constexpr step_result on_flush_reply(const msg::buffer_pool_flush_reply& m, pool_sink& out);
  /// The user's BufferPoolFlushRequest: reply once and deregister every pool it names.
  constexpr step_result on_flush_request(const msg::buffer_pool_flush_request& m, pool_sink& out);

  constexpr const counters& stats() const { return stats_; }
  /// The transaction context the owner's next message takes (an observer replaying a capture
  /// gives the one it saw, so that the FlushReply answering it matches).
  constexpr void next_txn(std::uint64_t txn) { txn_ = txn; }
  template <class H>
  constexpr void digest(H& h) const {
    for (const slot& s : slots_) {
      h(static_cast<std::uint64_t>(s.state));
      h(s.desc.pool_ref);
      h(s.desc.element_count);
      h(s.flush_txn);
      for (element e : s.el) h(static_cast<std::uint64_t>(e));
    }
    h(txn_);
  }

  // Guards and actions (the table below names them).
  static constexpr bool g_lent(const pool_owner& m, const pool_input& in) {
    const slot& s = m.slots_[in.slot];
    return in.element < s.desc.element_count && s.el[in.element] == element::lent;
  }
  static constexpr bool g_bytes_ok(const pool_owner& m, const pool_input& in) {
    return in.bytes >= 1 && in.bytes <= m.slots_[in.slot].desc.element_size;
  }
  static constexpr bool g_lent_ok(const pool_owner& m, const pool_input& in) { return g_lent(m, in) && g_bytes_ok(m, in); }
  static constexpr bool g_lent_big(const pool_owner& m, const pool_input& in) { return g_lent(m, in) && !g_bytes_ok(m, in); }
  static constexpr bool g_held(const pool_owner& m, const pool_input& in) {
    const slot& s = m.slots_[in.slot];
    if (in.count == 0 || in.element >= s.desc.element_count || in.count > s.desc.element_count - in.element) return false;
    for (std::uint32_t k = in.element; k < in.element + in.count; ++k)
      if (s.el[k] != element::consumed) return false;
    return true;
  }
  static constexpr bool g_granted(const pool_owner&, const pool_input& in) { return in.desc.element_count != 0; }
  static constexpr bool g_txn(const pool_owner& m, const pool_input& in) { return m.slots_[in.slot].flush_txn == in.txn; }

  static constexpr errc a_advertise(pool_owner& m, const pool_input& in, pool_sink& out) {
    slot& s = m.slots_[in.slot];
    s.desc = in.desc;
    s.el.fill(element::home);
    for (std::uint32_t k = 0; k < in.desc.element_count; ++k) s.el[k] = element::lent;
    out.push(pool_action::send_recv_pool{m.txn_++, in.desc});
    return {};
  }
  static constexpr errc a_decline(pool_owner& m, const pool_input& in, pool_sink& out) {
    ++m.stats_.declined;
    out.push(pool_action::declined{in.desc.element_size, in.count});
    return {};
  }
  static constexpr errc a_deliver(pool_owner& m, const pool_input& in, pool_sink& out) {
    m.slots_[in.slot].el[in.element] = element::consumed;
    ++m.stats_.delivered;
    out.push(pool_action::deliver{{m.slots_[in.slot].desc.pool_ref, in.element, in.bytes}});
    return {};
  }
  template <errc E>
  static constexpr errc a_fault(pool_owner& m, const pool_input& in, pool_sink& out) {
    ++m.stats_.faults;
    out.push(pool_action::fault{E, m.slots_[in.slot].desc.pool_ref, in.element});
    return E;
  }
  static constexpr errc a_return(pool_owner& m, const pool_input& in, pool_sink& out) {
    slot& s = m.slots_[in.slot];
    for (std::uint32_t k = in.element; k < in.element + in.count; ++k) s.el[k] = element::lent;
    m.stats_.returned += in.count;
    out.push(pool_action::send_update{m.txn_++, {s.desc.pool_ref, in.element, in.count}});
    return {};
  }
  static constexpr errc a_keep(pool_owner& m, const pool_input& in, pool_sink&) {
    for (std::uint32_t k = in.element; k < in.element + in.count; ++k) m.slots_[in.slot].el[k] = element::home;
    return {};
  }
  static constexpr errc a_request_flush(pool_owner& m, const pool_input& in, pool_sink& out) {
    slot& s = m.slots_[in.slot];
    s.flush_txn = m.txn_++;
    out.push(pool_action::send_flush_request{s.flush_txn, s.desc.pool_ref});
    return {};
  }
  static constexpr errc a_deregister(pool_owner& m, const pool_input& in, pool_sink& out) {
    slot& s = m.slots_[in.slot];
    for (std::uint32_t k = 0; k < s.desc.element_count; ++k)
      if (s.el[k] == element::lent) {
        s.el[k] = element::home;
        ++m.stats_.flushed;
      }
    out.push(pool_action::deregister{s.desc.pool_ref});
    return {};
  }

 private:
  constexpr step_result run(std::size_t slot_index, owner_event e, const pool_input& in, pool_sink& out);
  pool_allocator alloc_;
  std::uint64_t txn_;
  counters stats_{};
};

namespace detail {
template <std::size_t P, std::size_t E>
struct owner_table {
  using M = pool_owner<P, E>;
  using S = pool_state;
  using V = owner_event;
  static constexpr auto rows = std::to_array<typename M::row>({
      {S::unused, V::advertise, "", nullptr, S::active, "send BufferRecvPool", &M::a_advertise},
      {S::unused, V::get, "allocator grants", &M::g_granted, S::active, "send BufferRecvPool", &M::a_advertise},
      {S::unused, V::get, "else", nullptr, S::unused, "decline", &M::a_decline},
      {S::active, V::indicate, "element lent, bytes fit", &M::g_lent_ok, S::active, "deliver to application", &M::a_deliver},
      {S::active, V::indicate, "element lent", &M::g_lent_big, S::active, "fault too_large", &M::template a_fault<errc::too_large>},
      {S::active, V::indicate, "else", nullptr, S::active, "fault element_not_on_loan", &M::template a_fault<errc::element_not_on_loan>},
      {S::flushing, V::indicate, "element lent, bytes fit", &M::g_lent_ok, S::flushing, "deliver to application", &M::a_deliver},
      {S::flushing, V::indicate, "element lent", &M::g_lent_big, S::flushing, "fault too_large", &M::template a_fault<errc::too_large>},
      {S::flushing, V::indicate, "else", nullptr, S::flushing, "fault element_not_on_loan", &M::template a_fault<errc::element_not_on_loan>},
      {S::flushed, V::indicate, "", nullptr, S::flushed, "fault write_after_flush", &M::template a_fault<errc::write_after_flush>},
      {S::active, V::release, "held by application", &M::g_held, S::active, "send BufferRecvPoolUpdate", &M::a_return},
      {S::flushing, V::release, "held by application", &M::g_held, S::flushing, "keep home", &M::a_keep},
      {S::flushed, V::release, "held by application", &M::g_held, S::flushed, "keep home", &M::a_keep},
      {S::active, V::flush, "", nullptr, S::flushing, "send BufferPoolFlushRequest", &M::a_request_flush},
      {S::flushing, V::flush_reply, "txn matches", &M::g_txn, S::flushed, "deregister", &M::a_deregister},
      {S::active, V::peer_flush, "", nullptr, S::flushed, "deregister (reply once per request)", &M::a_deregister},
      {S::flushing, V::peer_flush, "", nullptr, S::flushed, "deregister (reply once per request)", &M::a_deregister},
      {S::flushed, V::peer_flush, "", nullptr, S::flushed, "(reply once per request)", nullptr},
      {S::flushed, V::flush_reply, "", nullptr, S::flushed, "(crossed flushes: ignore)", nullptr},
  });
};
}  // namespace detail

template <std::size_t P, std::size_t E>
constexpr step_result pool_owner<P, E>::run(std::size_t i, owner_event e, const pool_input& in0, pool_sink& out) {
  pool_input in = in0;
  in.slot = i;
  return step<row>(detail::owner_table<P, E>::rows, slots_[i].state, *this, e, in, out);
}

template <std::size_t P, std::size_t E>
constexpr step_result pool_owner<P, E>::advertise(const msg::pool_descriptor& d, pool_sink& out) {
  if (out.room() < min_room) return {-1, errc::actions_full};
  if (d.element_count == 0 || d.element_size == 0) return {-1, errc::invalid_argument};
  if (d.element_count > E) return {-1, errc::table_full};
  std::optional<std::size_t> free;
  if (const auto i = find(d.pool_ref)) {
    if (slots_[*i].state != pool_state::flushed) return {-1, errc::pool_exists};
    free = *i;  // the reference again after its flush: the same slot, so that find() sees the new pool
  }
  for (std::size_t i = 0; i < P && !free; ++i)
    if (slots_[i].state == pool_state::unused) free = i;
  for (std::size_t i = 0; i < P && !free; ++i)  // a flushed slot is reused
    if (slots_[i].state == pool_state::flushed) free = i;
  if (!free) return {-1, errc::table_full};
  slots_[*free] = slot{};
  return run(*free, owner_event::advertise, {.desc = d}, out);
}

template <std::size_t P, std::size_t E>
constexpr step_result pool_owner<P, E>::on_get(const msg::buffer_recv_pool_get& g, pool_sink& out) {
  if (out.room() < min_room) return {-1, errc::actions_full};
  std::optional<std::size_t> free;
  for (std::size_t i = 0; i < P && !free; ++i)
    if (slots_[i].state == pool_state::unused || slots_[i].state == pool_state::flushed) free = i;
  pool_input in{.desc = {.element_size = g.element_size}, .count = g.element_count};
  if (free && alloc_.grant && g.element_count != 0 && g.element_size != 0 && g.element_count <= E) {
    if (auto d = alloc_.grant(alloc_.ctx, g); d && d->element_count && d->element_size &&
                                                                            d->element_count <= E) {
      // The allocator's pool_ref unless it is in use; then the lowest one not in use.
      const auto in_use = [&](std::uint32_t r) { return find(r) && slots_[*find(r)].state != pool_state::flushed; };
      std::uint32_t ref = d->pool_ref;
      if (in_use(ref))
        for (ref = 0; in_use(ref);) ++ref;
      in.desc = *d;
      in.desc.pool_ref = ref;
      if (const auto old = find(ref)) free = old;
    }
  }
  if (!free) {  // no slot at all: declined without a row (there is no pool to step)
    ++stats_.declined;
    out.push(pool_action::declined{g.element_size, g.element_count});
    return {-1, errc::table_full};
  }
  slots_[*free] = slot{};
  return run(*free, owner_event::get, in, out);
}

template <std::size_t P, std::size_t E>
constexpr step_result pool_owner<P, E>::on_indication(const msg::indication& i, pool_sink& out) {
  if (out.room() < min_room) return {-1, errc::actions_full};
  const auto s = find(i.pool_ref);
  if (!s) {
    ++stats_.faults;
    out.push(pool_action::fault{errc::unknown_pool, i.pool_ref, i.element_index});
    return {-1, errc::unknown_pool};
  }
  return run(*s, owner_event::indicate, {.element = i.element_index, .bytes = i.byte_count}, out);
}

template <std::size_t P, std::size_t E>
constexpr step_result pool_owner<P, E>::on_indicate(const msg::buffer_rdma_indicate& m, pool_sink& out) {
  if (out.room() < m.entries.size()) return {-1, errc::actions_full};
  return this->each(m.entries, [&](const msg::indication& i) { return on_indication(i, out); });
}

template <std::size_t P, std::size_t E>
constexpr step_result pool_owner<P, E>::release(std::uint32_t ref, std::uint32_t first, std::uint32_t n, pool_sink& out) {
  if (out.room() < min_room) return {-1, errc::actions_full};
  const auto s = find(ref);
  if (!s) return {-1, errc::unknown_pool};
  const step_result r = run(*s, owner_event::release, {.element = first, .count = n}, out);
  return r.row < 0 ? step_result{-1, errc::element_not_held} : r;
}

template <std::size_t P, std::size_t E>
constexpr step_result pool_owner<P, E>::flush(std::uint32_t ref, pool_sink& out) {
  if (out.room() < min_room) return {-1, errc::actions_full};
  const auto s = find(ref);
  if (!s) return {-1, errc::unknown_pool};
  return run(*s, owner_event::flush, {}, out);
}

template <std::size_t P, std::size_t E>
constexpr step_result pool_owner<P, E>::on_flush_reply(const msg::buffer_pool_flush_reply& m, pool_sink& out) {
  if (out.room() < P) return {-1, errc::actions_full};
  const std::uint64_t txn = m.header.transaction_context;
  return this->each_flushing(txn, [&](std::size_t i) { return run(i, owner_event::flush_reply, {.txn = txn}, out); });
}

template <std::size_t P, std::size_t E>
constexpr step_result pool_owner<P, E>::on_flush_request(const msg::buffer_pool_flush_request& m, pool_sink& out) {
  if (out.room() < m.pool_refs.size() + 1) return {-1, errc::actions_full};
  const std::uint64_t txn = m.header.transaction_context;
  const step_result r = this->each_named(m.pool_refs, out, [&](std::size_t i) { return run(i, owner_event::peer_flush, {.txn = txn}, out); });
  out.push(pool_action::send_flush_reply{txn});
  return r;
}

// ---- the user (initiator) -------------------------------------------------------------------

/// How the user asks for more memory: when the free elements of a size fall below low_water
/// after a transfer, it sends BufferRecvPoolGet for get_count elements of that size (one Get
/// outstanding at a time; a new BufferRecvPool clears it).
struct pool_user_config {
  std::uint32_t low_water = 1;
  std::uint32_t get_count = 16;
  /// Force BufferRDMAIndicate even when the indication fits idata.
  bool never_idata = false;
  /// Gets ask for pools registered implicitly (BufferRecvPoolGet's `implicit`).
  bool implicit = false;
};

/// Pool user. MaxPools pools of up to MaxElements elements; no allocation.
template <std::size_t MaxPools, std::size_t MaxElements>
class pool_user : public detail::pool_book<detail::user_slot<MaxElements>, MaxPools> {
  using book = detail::pool_book<detail::user_slot<MaxElements>, MaxPools>;
  using book::slots_;

 public:
  using element = user_element;
  using slot = detail::user_slot<MaxElements>;
  using book::count;
  using book::find;

  using row = transition<pool_user, pool_state, user_event, pool_input, pool_sink>;

  /// The least sink room an event needs: one action (a message to send, a fault). Events that
  /// act per entry or per pool need one per entry, as each one's documentation says.
  static constexpr std::size_t min_room = 1;
  /// transfer() (the RDMA write, or a BufferRecvPoolGet and what follows it) and write_done()
  /// (a BufferRDMAIndicate and the flush reply or request it releases): at most two actions.
  static constexpr std::size_t transfer_room = 2;



  constexpr explicit pool_user(pool_user_config cfg = {}, std::uint64_t first_txn = 1) : cfg_(cfg), txn_(first_txn) {}

  /// A BufferRecvPool: every pool it advertises. Errors: table_full, pool_exists,
  /// invalid_argument (per pool, as faults).
  constexpr step_result on_recv_pool(const msg::buffer_recv_pool& m, pool_sink& out);
  constexpr step_result on_pool(const msg::pool_descriptor& d, pool_sink& out);
  /// Move `bytes` to the owner: picks the active pool with the smallest element that fits and
  /// its lowest free element, writes, indicates; maybe asks for more memory. Errors:
  /// no_free_element, write_after_flush (only pools being flushed would fit), too_large,
  /// invalid_argument (0 bytes).
  constexpr step_result transfer(std::uint32_t bytes, pool_sink& out);
  /// The write into (pool_ref, element) completed: send its BufferRDMAIndicate if it had no
  /// idata, and finish a drain.
  constexpr step_result write_done(std::uint32_t pool_ref, std::uint32_t element, pool_sink& out);
  constexpr step_result on_update(const msg::buffer_recv_pool_update& m, pool_sink& out);
  constexpr step_result on_update_entry(const msg::pool_update_entry& e, pool_sink& out);
  /// Start a flush of one pool (sent once its writes have completed).
  constexpr step_result flush(std::uint32_t pool_ref, pool_sink& out);
  constexpr step_result on_flush_reply(const msg::buffer_pool_flush_reply& m, pool_sink& out);
  /// The owner's BufferPoolFlushRequest: stop, and reply once every pool it names has drained.
  constexpr step_result on_flush_request(const msg::buffer_pool_flush_request& m, pool_sink& out);

  /// Free elements of at least `size` bytes in active pools.
  constexpr std::uint32_t free_elements(std::uint32_t size) const {
    std::uint32_t n = 0;
    for (const slot& s : slots_)
      if (s.state == pool_state::active && s.desc.element_size >= size)
        for (std::uint32_t k = 0; k < s.desc.element_count; ++k) n += s.el[k] == element::free;
    return n;
  }
  constexpr bool get_outstanding() const { return get_outstanding_; }
  template <class H>
  constexpr void digest(H& h) const {
    for (const slot& s : slots_) {
      h(static_cast<std::uint64_t>(s.state));
      h(s.desc.pool_ref);
      h(s.desc.element_count);
      h(s.in_flight);
      h(s.reply_pending);
      h(s.reply_txn);
      h(s.flush_txn);
      for (std::size_t k = 0; k < MaxElements; ++k) {
        h(static_cast<std::uint64_t>(s.el[k]));
        h(s.bytes[k]);
      }
    }
    h(txn_);
    h(get_outstanding_);
  }

  static constexpr bool g_has_free(const pool_user& m, const pool_input& in) { return m.pick(m.slots_[in.slot], in.bytes).has_value(); }
  static constexpr bool g_writing(const pool_user& m, const pool_input& in) {
    const slot& s = m.slots_[in.slot];
    return in.element < s.desc.element_count && (s.el[in.element] == element::writing || s.el[in.element] == element::returned);
  }
  static constexpr bool g_last_peer(const pool_user& m, const pool_input& in) {
    return g_writing(m, in) && m.slots_[in.slot].in_flight == 1 && m.slots_[in.slot].reply_pending;
  }
  static constexpr bool g_last_own(const pool_user& m, const pool_input& in) {
    return g_writing(m, in) && m.slots_[in.slot].in_flight == 1 && !m.slots_[in.slot].reply_pending;
  }
  static constexpr bool g_not_held(const pool_user& m, const pool_input& in) {
    const slot& s = m.slots_[in.slot];
    if (in.count == 0 || in.element >= s.desc.element_count || in.count > s.desc.element_count - in.element) return false;
    for (std::uint32_t k = in.element; k < in.element + in.count; ++k)
      if (s.el[k] != element::not_held && s.el[k] != element::writing) return false;
    return true;
  }
  static constexpr bool g_idle(const pool_user& m, const pool_input& in) { return m.slots_[in.slot].in_flight == 0; }
  static constexpr bool g_txn(const pool_user& m, const pool_input& in) { return m.slots_[in.slot].flush_txn == in.txn; }

  static constexpr errc a_accept(pool_user& m, const pool_input& in, pool_sink&) {
    slot& s = m.slots_[in.slot];
    s = slot{};
    s.desc = in.desc;
    for (std::uint32_t k = 0; k < in.desc.element_count; ++k) s.el[k] = element::free;
    m.get_outstanding_ = false;
    return {};
  }
  static constexpr errc a_write(pool_user& m, const pool_input& in, pool_sink& out) {
    slot& s = m.slots_[in.slot];
    const std::uint32_t k = *m.pick(s, in.bytes);
    s.el[k] = element::writing;
    s.bytes[k] = in.bytes;
    ++s.in_flight;
    const msg::indication ind{s.desc.pool_ref, k, in.bytes};
    const bool imm = !m.cfg_.never_idata && msg::fits_idata(ind);
    out.push(pool_action::rdma_write{s.desc.pool_ref, k, s.desc.address + std::uint64_t{k} * s.desc.element_size,
                                     s.desc.memory_handle, in.bytes, imm, imm ? msg::to_imm(*msg::make_idata(ind)) : 0});
    return {};
  }
  static constexpr errc a_written(pool_user& m, const pool_input& in, pool_sink& out) {
    slot& s = m.slots_[in.slot];
    s.el[in.element] = s.el[in.element] == element::returned && s.state == pool_state::active ? element::free : element::not_held;
    --s.in_flight;
    const msg::indication ind{s.desc.pool_ref, in.element, s.bytes[in.element]};
    if (m.cfg_.never_idata || !msg::fits_idata(ind)) out.push(pool_action::send_indicate{m.txn_++, ind});
    return {};
  }
  static constexpr errc a_written_reply(pool_user& m, const pool_input& in, pool_sink& out) {
    a_written(m, in, out);
    slot& s = m.slots_[in.slot];
    s.reply_pending = false;
    a_forget(m, in, out);
    bool others = false;  // reply once, when the last pool named by that request has drained
    for (const slot& o : m.slots_) others = others || (o.reply_pending && o.reply_txn == s.reply_txn);
    if (!others) out.push(pool_action::send_flush_reply{s.reply_txn});
    return {};
  }
  static constexpr errc a_written_request(pool_user& m, const pool_input& in, pool_sink& out) {
    a_written(m, in, out);
    return a_request(m, in, out);
  }
  static constexpr errc a_request(pool_user& m, const pool_input& in, pool_sink& out) {
    slot& s = m.slots_[in.slot];
    give_up_free(s);
    s.flush_txn = m.txn_++;
    out.push(pool_action::send_flush_request{s.flush_txn, s.desc.pool_ref});
    return {};
  }
  static constexpr errc a_free(pool_user& m, const pool_input& in, pool_sink&) {
    for (std::uint32_t k = in.element; k < in.element + in.count; ++k) {
      element& e = m.slots_[in.slot].el[k];
      e = e == element::writing ? element::returned : element::free;
    }
    return {};
  }
  template <errc E>
  static constexpr errc a_fault(pool_user& m, const pool_input& in, pool_sink& out) {
    out.push(pool_action::fault{E, m.slots_[in.slot].desc.pool_ref, in.element});
    return E;
  }
  /// Leaving `active`: free elements are given up (only writes in flight still count).
  static constexpr void give_up_free(slot& s) {
    for (std::uint32_t k = 0; k < s.desc.element_count; ++k)
      if (s.el[k] == element::free) s.el[k] = element::not_held;
  }
  static constexpr errc a_stop_own(pool_user& m, const pool_input& in, pool_sink&) {
    m.slots_[in.slot].reply_pending = false;
    give_up_free(m.slots_[in.slot]);
    return {};
  }
  static constexpr errc a_stop_peer(pool_user& m, const pool_input& in, pool_sink&) {
    m.slots_[in.slot].reply_pending = true;
    m.slots_[in.slot].reply_txn = in.txn;
    give_up_free(m.slots_[in.slot]);
    return {};
  }
  static constexpr errc a_forget(pool_user& m, const pool_input& in, pool_sink&) {
    slot& s = m.slots_[in.slot];
    for (std::uint32_t k = 0; k < s.desc.element_count; ++k) s.el[k] = element::not_held;
    return {};
  }

 private:
  constexpr std::optional<std::uint32_t> pick(const slot& s, std::uint32_t bytes) const {
    if (s.state != pool_state::active || s.desc.element_size < bytes) return std::nullopt;
    for (std::uint32_t k = 0; k < s.desc.element_count; ++k)
      if (s.el[k] == element::free) return k;
    return std::nullopt;
  }
  constexpr step_result run(std::size_t slot_index, user_event e, const pool_input& in, pool_sink& out);
  pool_user_config cfg_;
  std::uint64_t txn_;
  bool get_outstanding_ = false;
};

namespace detail {
template <std::size_t P, std::size_t E>
struct user_table {
  using M = pool_user<P, E>;
  using S = pool_state;
  using V = user_event;
  static constexpr auto rows = std::to_array<typename M::row>({
      {S::unused, V::advertised, "", nullptr, S::active, "all elements free", &M::a_accept},
      {S::flushed, V::advertised, "", nullptr, S::active, "all elements free", &M::a_accept},
      {S::active, V::transfer, "a free element fits", &M::g_has_free, S::active, "RDMA write (idata when it fits)", &M::a_write},
      {S::active, V::write_done, "element writing", &M::g_writing, S::active, "BufferRDMAIndicate unless idata", &M::a_written},
      {S::draining, V::write_done, "last write; answering the owner", &M::g_last_peer, S::flushed, "indicate; FlushReply once per request", &M::a_written_reply},
      {S::draining, V::write_done, "last write; own flush", &M::g_last_own, S::flushing, "indicate; send BufferPoolFlushRequest", &M::a_written_request},
      {S::draining, V::write_done, "element writing", &M::g_writing, S::draining, "BufferRDMAIndicate unless idata", &M::a_written},
      {S::flushing, V::write_done, "element writing", &M::g_writing, S::flushing, "BufferRDMAIndicate unless idata", &M::a_written},
      {S::active, V::update, "elements not held (or still completing)", &M::g_not_held, S::active, "mark free (on completion)", &M::a_free},
      {S::draining, V::update, "", nullptr, S::draining, "ignore (the pool is being flushed)", nullptr},
      {S::flushing, V::update, "", nullptr, S::flushing, "ignore (the pool is being flushed)", nullptr},
      {S::active, V::update, "else", nullptr, S::active, "fault element_not_held", &M::template a_fault<errc::element_not_held>},
      {S::active, V::flush, "no write in flight", &M::g_idle, S::flushing, "send BufferPoolFlushRequest", &M::a_request},
      {S::active, V::flush, "else", nullptr, S::draining, "stop writing", &M::a_stop_own},
      {S::flushing, V::flush_reply, "txn matches", &M::g_txn, S::flushed, "forget the pool", &M::a_forget},
      {S::active, V::peer_flush, "no write in flight", &M::g_idle, S::flushed, "forget; FlushReply once per request", &M::a_forget},
      {S::active, V::peer_flush, "else", nullptr, S::draining, "stop writing; reply when drained", &M::a_stop_peer},
      {S::draining, V::peer_flush, "", nullptr, S::draining, "reply when drained", &M::a_stop_peer},
      {S::flushing, V::peer_flush, "", nullptr, S::flushed, "forget; FlushReply once per request (crossed flushes)", &M::a_forget},
      {S::flushed, V::peer_flush, "", nullptr, S::flushed, "FlushReply once per request", nullptr},
      {S::flushed, V::flush_reply, "", nullptr, S::flushed, "(crossed flushes: ignore)", nullptr},
  });
};
}  // namespace detail

template <std::size_t P, std::size_t E>
constexpr step_result pool_user<P, E>::run(std::size_t i, user_event e, const pool_input& in0, pool_sink& out) {
  pool_input in = in0;
  in.slot = i;
  return step<row>(detail::user_table<P, E>::rows, slots_[i].state, *this, e, in, out);
}

template <std::size_t P, std::size_t E>
constexpr step_result pool_user<P, E>::on_pool(const msg::pool_descriptor& d, pool_sink& out) {
  if (out.room() < min_room) return {-1, errc::actions_full};
  errc e{};
  if (d.element_count == 0 || d.element_size == 0) e = errc::invalid_argument;
  else if (d.element_count > E) e = errc::table_full;
  std::optional<std::size_t> at = find(d.pool_ref);
  if (e == errc{} && at && slots_[*at].state != pool_state::flushed) e = errc::pool_exists;
  for (std::size_t i = 0; i < P && !at; ++i)
    if (slots_[i].state == pool_state::unused) at = i;
  if (e == errc{} && !at) e = errc::table_full;
  if (e != errc{}) {
    out.push(pool_action::fault{e, d.pool_ref, 0});
    return {-1, e};
  }
  return run(*at, user_event::advertised, {.desc = d}, out);
}

template <std::size_t P, std::size_t E>
constexpr step_result pool_user<P, E>::on_recv_pool(const msg::buffer_recv_pool& m, pool_sink& out) {
  if (out.room() < m.pools.size()) return {-1, errc::actions_full};
  return this->each(m.pools, [&](const msg::pool_descriptor& d) { return on_pool(d, out); });
}

template <std::size_t P, std::size_t E>
constexpr step_result pool_user<P, E>::transfer(std::uint32_t bytes, pool_sink& out) {
  if (out.room() < transfer_room) return {-1, errc::actions_full};
  if (bytes == 0) return {-1, errc::invalid_argument};
  std::optional<std::size_t> best;
  bool fits_any = false, fits_flushed = false;
  for (std::size_t i = 0; i < P; ++i) {
    const slot& s = slots_[i];
    if (s.state == pool_state::unused || s.desc.element_size < bytes) continue;
    if (s.state != pool_state::active) {
      fits_flushed = true;
      continue;
    }
    fits_any = true;
    if (pick(s, bytes) && (!best || s.desc.element_size < slots_[*best].desc.element_size)) best = i;
  }
  if (!best) return {-1, fits_any ? errc::no_free_element : fits_flushed ? errc::write_after_flush : errc::too_large};
  const step_result r = run(*best, user_event::transfer, {.bytes = bytes}, out);
  const std::uint32_t size = slots_[*best].desc.element_size;
  if (r.ok() && !get_outstanding_ && free_elements(size) < cfg_.low_water && cfg_.get_count != 0) {
    get_outstanding_ = true;
    out.push(pool_action::send_get{txn_++, size, cfg_.get_count, cfg_.implicit});
  }
  return r;
}

template <std::size_t P, std::size_t E>
constexpr step_result pool_user<P, E>::write_done(std::uint32_t ref, std::uint32_t element, pool_sink& out) {
  if (out.room() < transfer_room) return {-1, errc::actions_full};
  const auto s = find(ref);
  if (!s) return {-1, errc::unknown_pool};
  return run(*s, user_event::write_done, {.element = element}, out);
}

template <std::size_t P, std::size_t E>
constexpr step_result pool_user<P, E>::on_update_entry(const msg::pool_update_entry& e, pool_sink& out) {
  if (out.room() < min_room) return {-1, errc::actions_full};
  const auto s = find(e.pool_ref);
  if (!s) {
    out.push(pool_action::fault{errc::unknown_pool, e.pool_ref, e.first_element});
    return {-1, errc::unknown_pool};
  }
  return run(*s, user_event::update, {.element = e.first_element, .count = e.element_count}, out);
}

template <std::size_t P, std::size_t E>
constexpr step_result pool_user<P, E>::on_update(const msg::buffer_recv_pool_update& m, pool_sink& out) {
  if (out.room() < m.entries.size()) return {-1, errc::actions_full};
  return this->each(m.entries, [&](const msg::pool_update_entry& e) { return on_update_entry(e, out); });
}

template <std::size_t P, std::size_t E>
constexpr step_result pool_user<P, E>::flush(std::uint32_t ref, pool_sink& out) {
  if (out.room() < min_room) return {-1, errc::actions_full};
  const auto s = find(ref);
  if (!s) return {-1, errc::unknown_pool};
  return run(*s, user_event::flush, {}, out);
}

template <std::size_t P, std::size_t E>
constexpr step_result pool_user<P, E>::on_flush_reply(const msg::buffer_pool_flush_reply& m, pool_sink& out) {
  const std::uint64_t txn = m.header.transaction_context;
  return this->each_flushing(txn, [&](std::size_t i) { return run(i, user_event::flush_reply, {.txn = txn}, out); });
}

template <std::size_t P, std::size_t E>
constexpr step_result pool_user<P, E>::on_flush_request(const msg::buffer_pool_flush_request& m, pool_sink& out) {
  if (out.room() < m.pool_refs.size() + 1) return {-1, errc::actions_full};
  const std::uint64_t txn = m.header.transaction_context;
  const step_result r = this->each_named(m.pool_refs, out, [&](std::size_t i) { return run(i, user_event::peer_flush, {.txn = txn}, out); });
  bool waiting = false;  // reply now unless some named pool is still draining for this request
  for (const slot& s : slots_) waiting = waiting || (s.state == pool_state::draining && s.reply_pending && s.reply_txn == txn);
  if (!waiting) out.push(pool_action::send_flush_reply{txn});
  return r;
}

/// Encodes a send_* action as its push-push message (msg/) into `out`; other actions are not
/// messages (errc::invalid_field). Returns the frame length.
constexpr wire::result<std::size_t> encode_message(const pool_action_t& a, std::span<std::byte> out) {
  return std::visit(
      [&](const auto& x) -> wire::result<std::size_t> {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, pool_action::send_recv_pool>) {
          const msg::pool_descriptor one[] = {x.pool};
          return msg::encode(msg::buffer_recv_pool{.header = {.transaction_context = x.txn}, .pools = std::span<const msg::pool_descriptor>(one)}, out);
        } else if constexpr (std::is_same_v<T, pool_action::send_get>) {
          return msg::encode(msg::buffer_recv_pool_get{.header = {.transaction_context = x.txn}, .element_size = x.element_size,
                                                       .element_count = x.element_count, .implicit = x.implicit},
                             out);
        } else if constexpr (std::is_same_v<T, pool_action::send_update>) {
          const msg::pool_update_entry one[] = {x.entry};
          return msg::encode(msg::buffer_recv_pool_update{.header = {.transaction_context = x.txn}, .entries = std::span<const msg::pool_update_entry>(one)}, out);
        } else if constexpr (std::is_same_v<T, pool_action::send_flush_request>) {
          const std::uint32_t one[] = {x.pool_ref};
          return msg::encode(msg::buffer_pool_flush_request{.header = {.transaction_context = x.txn}, .pool_refs = std::span<const std::uint32_t>(one)}, out);
        } else if constexpr (std::is_same_v<T, pool_action::send_flush_reply>) {
          return msg::encode(msg::buffer_pool_flush_reply{.header = {.transaction_context = x.txn}}, out);
        } else if constexpr (std::is_same_v<T, pool_action::send_indicate>) {
          const msg::indication one[] = {x.entry};
          return msg::encode(msg::buffer_rdma_indicate{.header = {.transaction_context = x.txn}, .entries = std::span<const msg::indication>(one)}, out);
        } else {
          return wire::error{wire::errc::invalid_field, 0, "action"};
        }
      },
      a);
}

/// The tables, for diagrams and table-driven tests.
template <std::size_t P, std::size_t E>
inline constexpr machine_info<typename pool_owner<P, E>::row> pool_owner_info{
    "pool_owner", "unused", detail::owner_table<P, E>::rows};
template <std::size_t P, std::size_t E>
inline constexpr machine_info<typename pool_user<P, E>::row> pool_user_info{
    "pool_user", "unused", detail::user_table<P, E>::rows};

}  // namespace pushwire::flow
