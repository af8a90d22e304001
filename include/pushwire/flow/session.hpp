// Session-based RDMA over UDP 5-tuples. A connection spreads its messages over a
// group of sessions, each a distinct UDP 5-tuple (different source ports give different ECMP
// paths). Only the owner of the session table (the kernel side) binds 5-tuples to sessions;
// applications get a session_group, a read-only view of their group that picks a session per
// message by policy.
//
// Receiving, decided here (spec/flow.md §5): reordering across sessions is repaired by
// resequencing, not by NAK. Every message carries its connection's message sequence number
// (the 32-bit immediate of a SEND_WITH_IMM); the receiver delivers in sequence order, holds
// up to Window messages that arrive early, and drops and counts duplicates, messages beyond
// the window, packets from unknown 5-tuples and packets from sessions outside the
// connection's group.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <variant>

#include <pushwire/flow/core.hpp>
#include <pushwire/ib/encap.hpp>

namespace pushwire::flow {

/// A UDP 5-tuple (addresses as 16 bytes: IPv6, or IPv4-mapped ::ffff:a.b.c.d).
struct five_tuple {
  std::array<std::uint8_t, 16> src{}, dst{};
  std::uint16_t sport = 0, dport = ib::roce_port;
  std::uint8_t proto = 17;
  friend constexpr bool operator==(const five_tuple&, const five_tuple&) = default;
};

/// FNV-1a over the tuple (the flow-hash policy and table lookups use it).
constexpr std::uint64_t hash(const five_tuple& t) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&](std::uint8_t b) { h = (h ^ b) * 0x100000001b3ull; };
  for (auto b : t.src) mix(b);
  for (auto b : t.dst) mix(b);
  mix(static_cast<std::uint8_t>(t.sport >> 8));
  mix(static_cast<std::uint8_t>(t.sport));
  mix(static_cast<std::uint8_t>(t.dport >> 8));
  mix(static_cast<std::uint8_t>(t.dport));
  mix(t.proto);
  return h;
}

struct session_entry {
  std::uint32_t session = 0;
  five_tuple tuple{};
  std::uint32_t group = 0;       ///< the sessions of one connection share a group
  std::uint32_t connection = 0;  ///< the connection (QP) the group carries
};

template <std::size_t N>
class session_group;

/// The privileged session table: N entries. Only its owner binds and unbinds; everything
/// else reads it through a const reference or a session_group.
template <std::size_t N>
class session_table {
 public:
  /// Bind `session` to `tuple` in `group` for `connection`. Errors: duplicate (the session or
  /// the tuple is already bound), table_full.
  constexpr errc bind(std::uint32_t session, const five_tuple& tuple, std::uint32_t group, std::uint32_t connection) {
    for (std::size_t i = 0; i < n_; ++i)
      if (e_[i].session == session || e_[i].tuple == tuple) return errc::duplicate;
    if (n_ == N) return errc::table_full;
    e_[n_++] = {session, tuple, group, connection};
    return {};
  }
  constexpr errc unbind(std::uint32_t session) {
    for (std::size_t i = 0; i < n_; ++i)
      if (e_[i].session == session) {
        for (std::size_t k = i + 1; k < n_; ++k) e_[k - 1] = e_[k];
        --n_;
        return {};
      }
    return errc::unknown_tuple;
  }
  constexpr std::optional<session_entry> lookup(const five_tuple& t) const {
    for (std::size_t i = 0; i < n_; ++i)
      if (e_[i].tuple == t) return e_[i];
    return std::nullopt;
  }
  constexpr std::optional<session_entry> session(std::uint32_t id) const {
    for (std::size_t i = 0; i < n_; ++i)
      if (e_[i].session == id) return e_[i];
    return std::nullopt;
  }
  constexpr std::size_t size() const { return n_; }
  constexpr const session_entry& operator[](std::size_t i) const { return e_[i]; }

 private:
  std::array<session_entry, N> e_{};
  std::size_t n_ = 0;
};

enum class pick_policy : std::uint8_t { round_robin, flow_hash, least_outstanding };
inline constexpr std::array<wire::named_value, 3> pick_policy_names{{
    {pick_policy::round_robin, "round_robin"},
    {pick_policy::flow_hash, "flow_hash"},
    {pick_policy::least_outstanding, "least_outstanding"},
}};
constexpr std::span<const wire::named_value> wire_enum_names(pick_policy) { return pick_policy_names; }

/// The application's side: a read-only view of one group of a table, and the sender's choice
/// of session per message. It holds no way to change the table.
template <std::size_t N>
class session_group {
 public:
  constexpr session_group(const session_table<N>& t, std::uint32_t group, pick_policy p) : t_(&t), group_(group), policy_(p) {}

  /// The session for the next message (flow_key: the flow-hash policy's key, e.g. the hash of
  /// the application's flow). nullopt when the group has no session. The choice counts as
  /// outstanding until completed(session).
  constexpr std::optional<session_entry> pick(std::uint64_t flow_key = 0) {
    std::array<std::size_t, N> idx{};
    std::size_t m = 0;
    for (std::size_t i = 0; i < t_->size(); ++i)
      if ((*t_)[i].group == group_) idx[m++] = i;
    if (m == 0) return std::nullopt;
    std::size_t k = 0;
    switch (policy_) {
      case pick_policy::round_robin: k = rr_++ % m; break;
      case pick_policy::flow_hash: k = static_cast<std::size_t>((flow_key * 0x9E3779B97F4A7C15ull) >> 32) % m; break;
      case pick_policy::least_outstanding:
        for (std::size_t i = 1; i < m; ++i)
          if (outstanding_of((*t_)[idx[i]].session) < outstanding_of((*t_)[idx[k]].session)) k = i;
        break;
    }
    const session_entry e = (*t_)[idx[k]];
    bump(e.session, +1);
    seq_of_next_ = next_seq_++;
    return e;
  }
  /// The message sequence number the last pick() assigned (it rides in the immediate data).
  constexpr std::uint32_t sequence() const { return seq_of_next_; }
  /// A message sent on `session` completed.
  constexpr void completed(std::uint32_t session) { bump(session, -1); }
  constexpr std::uint32_t outstanding_of(std::uint32_t session) const {
    for (const auto& o : out_)
      if (o.used && o.session == session) return o.n;
    return 0;
  }
  constexpr const session_table<N>& table() const { return *t_; }

 private:
  constexpr void bump(std::uint32_t session, int d) {
    for (auto& o : out_)
      if (o.used && o.session == session) {
        o.n = static_cast<std::uint32_t>(static_cast<int>(o.n) + d);
        return;
      }
    for (auto& o : out_)
      if (!o.used) {
        o = {true, session, d > 0 ? 1u : 0u};
        return;
      }
  }
  struct count {
    bool used = false;
    std::uint32_t session = 0, n = 0;
  };
  const session_table<N>* t_;
  std::uint32_t group_;
  pick_policy policy_;
  std::size_t rr_ = 0;
  std::uint32_t next_seq_ = 0, seq_of_next_ = 0;
  std::array<count, N> out_{};
};

// ---- receiving --------------------------------------------------------------------------------

enum class reseq_state : std::uint8_t { in_order, holding };
inline constexpr std::array<wire::named_value, 2> reseq_state_names{{
    {reseq_state::in_order, "in_order"},
    {reseq_state::holding, "holding"},
}};
constexpr std::span<const wire::named_value> wire_enum_names(reseq_state) { return reseq_state_names; }
enum class reseq_event : std::uint8_t { next, early, too_early, duplicate, unknown_tuple, foreign_group };
inline constexpr std::array<wire::named_value, 6> reseq_event_names{{
    {reseq_event::next, "message with the expected sequence"},
    {reseq_event::early, "message ahead, inside the window"},
    {reseq_event::too_early, "message beyond the window"},
    {reseq_event::duplicate, "message already delivered or held"},
    {reseq_event::unknown_tuple, "packet from an unknown 5-tuple"},
    {reseq_event::foreign_group, "packet from a session outside the group"},
}};
constexpr std::span<const wire::named_value> wire_enum_names(reseq_event) { return reseq_event_names; }

/// One arriving message: its 5-tuple, the connection it names (BTH destination QP), its
/// sequence number and the caller's handle for its bytes.
struct session_message {
  five_tuple tuple{};
  std::uint32_t connection = 0;
  std::uint32_t seq = 0;
  std::uint64_t handle = 0;
};

namespace session_action {
/// Deliver this message to the application (in sequence order, exactly once).
struct deliver { std::uint32_t connection, seq; std::uint64_t handle; friend constexpr bool operator==(const deliver&, const deliver&) = default; };
/// Dropped and counted (the caller frees the handle).
struct drop { errc why; std::uint64_t handle; friend constexpr bool operator==(const drop&, const drop&) = default; };
}  // namespace session_action
using session_action_t = std::variant<session_action::deliver, session_action::drop>;
using session_sink = sink<session_action_t>;

/// The receiving side of one connection: the owner's table (read-only here) and a
/// resequencing window of Window messages.
template <std::size_t N, std::size_t Window>
class session_receiver {
 public:
  using row = transition<session_receiver, reseq_state, reseq_event, session_message, session_sink>;
  struct counters {
    std::uint64_t delivered = 0, unknown_tuple = 0, foreign_group = 0, duplicate = 0, window_full = 0;
  };

  /// The least sink room on_message() needs: the message and every held one it releases in
  /// order (at most Window), so Window + 1.
  static constexpr std::size_t min_room = Window + 1;

  constexpr session_receiver(const session_table<N>& t, std::uint32_t connection, std::uint32_t group)
      : t_(&t), conn_(connection), group_(group) {}

  constexpr step_result on_message(const session_message& m, session_sink& out) {
    if (out.room() < min_room) return {-1, errc::actions_full};
    return step<row>(table(), st_, *this, classify(m), m, out);
  }

  constexpr reseq_state state() const { return st_; }
  constexpr std::uint32_t expected() const { return next_; }
  constexpr std::size_t held() const {
    std::size_t n = 0;
    for (const auto& s : win_) n += s.used;
    return n;
  }
  constexpr const counters& stats() const { return stats_; }
  template <class H>
  constexpr void digest(H& h) const {
    h(static_cast<std::uint64_t>(st_));
    h(next_);
    for (const auto& s : win_) {
      h(s.used);
      h(s.seq);
    }
  }

  /// After delivering `in` and releasing what follows, is anything still held?
  static constexpr bool g_after_release(const session_receiver& m, const session_message& in) {
    std::uint32_t s = in.seq + 1;
    std::size_t released = 0;
    while (m.win_[s % Window].used && m.win_[s % Window].seq == s) ++s, ++released;
    return m.held() > released;
  }
  static constexpr errc a_deliver(session_receiver& m, const session_message& in, session_sink& out) {
    m.emit(in.seq, in.handle, out);
    for (;;) {  // release what was waiting behind it
      auto& s = m.win_[m.next_ % Window];
      if (!s.used || s.seq != m.next_) break;
      s.used = false;
      m.emit(s.seq, s.handle, out);
    }
    return {};
  }
  static constexpr errc a_hold(session_receiver& m, const session_message& in, session_sink&) {
    m.win_[in.seq % Window] = {true, in.seq, in.handle};
    return {};
  }
  template <errc E>
  static constexpr errc a_drop(session_receiver& m, const session_message& in, session_sink& out) {
    if constexpr (E == errc::unknown_tuple) ++m.stats_.unknown_tuple;
    if constexpr (E == errc::foreign_group) ++m.stats_.foreign_group;
    if constexpr (E == errc::duplicate) ++m.stats_.duplicate;
    if constexpr (E == errc::window_full) ++m.stats_.window_full;
    out.push(session_action::drop{E, in.handle});
    return E;
  }

  /// The transition table (detail::session_receiver_rows).
  static constexpr std::span<const row> table();

 private:
  constexpr reseq_event classify(const session_message& m) const {
    const auto e = t_->lookup(m.tuple);
    if (!e) return reseq_event::unknown_tuple;
    if (e->group != group_ || m.connection != conn_ || e->connection != conn_) return reseq_event::foreign_group;
    const std::uint32_t ahead = m.seq - next_;  // modulo 2^32
    if (ahead == 0) return reseq_event::next;
    if (ahead > 0x80000000u) return reseq_event::duplicate;
    if (ahead >= Window) return reseq_event::too_early;
    const auto& s = win_[m.seq % Window];
    return s.used && s.seq == m.seq ? reseq_event::duplicate : reseq_event::early;
  }
  constexpr void emit(std::uint32_t seq, std::uint64_t handle, session_sink& out) {
    ++stats_.delivered;
    ++next_;
    out.push(session_action::deliver{conn_, seq, handle});
  }
  struct held_msg {
    bool used = false;
    std::uint32_t seq = 0;
    std::uint64_t handle = 0;
  };
  const session_table<N>* t_;
  std::uint32_t conn_, group_;
  std::uint32_t next_ = 0;
  std::array<held_msg, Window> win_{};
  reseq_state st_ = reseq_state::in_order;
  counters stats_{};
};

namespace detail {
template <std::size_t N, std::size_t Window>
struct session_receiver_rows {
  using M = session_receiver<N, Window>;
  static constexpr auto rows = std::to_array<typename M::row>({
      {reseq_state::in_order, reseq_event::next, "", nullptr, reseq_state::in_order, "deliver", &M::a_deliver},
      {reseq_state::in_order, reseq_event::early, "", nullptr, reseq_state::holding, "hold", &M::a_hold},
      {reseq_state::holding, reseq_event::early, "", nullptr, reseq_state::holding, "hold", &M::a_hold},
      {reseq_state::holding, reseq_event::next, "a gap remains after release", &M::g_after_release, reseq_state::holding, "deliver it and what follows", &M::a_deliver},
      {reseq_state::holding, reseq_event::next, "else", nullptr, reseq_state::in_order, "deliver it and what follows", &M::a_deliver},
      {reseq_state::in_order, reseq_event::too_early, "", nullptr, reseq_state::in_order, "drop, count window_full", &M::template a_drop<errc::window_full>},
      {reseq_state::holding, reseq_event::too_early, "", nullptr, reseq_state::holding, "drop, count window_full", &M::template a_drop<errc::window_full>},
      {reseq_state::in_order, reseq_event::duplicate, "", nullptr, reseq_state::in_order, "drop, count duplicate", &M::template a_drop<errc::duplicate>},
      {reseq_state::holding, reseq_event::duplicate, "", nullptr, reseq_state::holding, "drop, count duplicate", &M::template a_drop<errc::duplicate>},
      {reseq_state::in_order, reseq_event::unknown_tuple, "", nullptr, reseq_state::in_order, "drop, count unknown_tuple", &M::template a_drop<errc::unknown_tuple>},
      {reseq_state::holding, reseq_event::unknown_tuple, "", nullptr, reseq_state::holding, "drop, count unknown_tuple", &M::template a_drop<errc::unknown_tuple>},
      {reseq_state::in_order, reseq_event::foreign_group, "", nullptr, reseq_state::in_order, "drop, count foreign_group", &M::template a_drop<errc::foreign_group>},
      {reseq_state::holding, reseq_event::foreign_group, "", nullptr, reseq_state::holding, "drop, count foreign_group", &M::template a_drop<errc::foreign_group>},
  });
};
}  // namespace detail

template <std::size_t N, std::size_t Window>
constexpr std::span<const typename session_receiver<N, Window>::row> session_receiver<N, Window>::table() {
  return detail::session_receiver_rows<N, Window>::rows;
}

template <std::size_t N, std::size_t W>
inline constexpr machine_info<typename session_receiver<N, W>::row> session_receiver_info{
    "session_receiver", "in_order", session_receiver<N, W>::table()};

}  // namespace pushwire::flow
