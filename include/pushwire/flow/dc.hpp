// Dynamically Connected transport: a DC initiator (DCI) serves requests for many
// targets one target at a time over one reliable stream, and a DC target (DCT) accepts a
// connect that carries its access key and number. Both wrap the RC machines (rc.hpp): the
// DCI's connect and disconnect are work requests of the requester (opcode 0x55, SE clear /
// set, DCETH + DCCETH, AckReq), so they are retransmitted and acknowledged like data.
//
// Per target: connect, then the data queued for it, then (once that data has completed) a
// disconnect, then the next target's connect. Requests for other targets wait, in order.
// A DCT NAKs (and places nothing for) a wrong access key (remote access error) or a connect for
// another DCT number (invalid request). Data from a DCI with no connection (its connect was
// lost or overtaken, or it is a stale duplicate) is dropped and counted without a NAK: a NAK
// would fail the DCI, while its retransmission timeout resends the connect.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include <pushwire/flow/rc.hpp>

namespace pushwire::flow {

/// A DC target as the DCI addresses it.
struct dc_address {
  std::uint32_t dct = 0;      ///< DCT number (BTH destination QP, DCCETH dct), 24 bits
  std::uint64_t access_key = 0;
  friend constexpr bool operator==(const dc_address&, const dc_address&) = default;
};

enum class dci_state : std::uint8_t { idle, connected, disconnecting, error };
inline constexpr std::array<wire::named_value, 4> dci_state_names{{
    {dci_state::idle, "idle"},
    {dci_state::connected, "connected"},
    {dci_state::disconnecting, "disconnecting"},
    {dci_state::error, "error"},
}};
constexpr std::span<const wire::named_value> wire_enum_names(dci_state) { return dci_state_names; }
enum class dci_event : std::uint8_t { post, data_done, disconnected, failed };
inline constexpr std::array<wire::named_value, 4> dci_event_names{{
    {dci_event::post, "post"},
    {dci_event::data_done, "data completed"},
    {dci_event::disconnected, "disconnect completed"},
    {dci_event::failed, "requester error"},
}};
constexpr std::span<const wire::named_value> wire_enum_names(dci_event) { return dci_event_names; }

struct dci_input {
  work_request wr{};
  dc_address to{};
  time_ns now = 0;
};

/// Work request ids at or above this are the DCI's own connects and disconnects.
inline constexpr std::uint64_t dc_internal_id = 0xFFFF'0000'0000'0000ull;

/// The DC initiator: a send queue of SQ and Pending requests waiting for their target.
template <std::size_t SQ, std::size_t Pending>
class dc_initiator {
 public:
  using row = transition<dc_initiator, dci_state, dci_event, dci_input, qp_sink>;

  struct config {
    std::uint32_t dci = 0;  ///< this initiator's number (DCCETH, RDETH), 24 bits
    requester_config req{.svc = service::dc};
  };

  /// The least sink room post() needs (else actions_full, nothing applied): the requester's,
  /// and the flushed completion of a request refused in the error state.
  static constexpr std::size_t min_room = requester<SQ>::min_room + 1;

  constexpr explicit dc_initiator(config c = {}) : cfg_(c), rq_(with_dc(c.req)) {}

  /// Queue a request for `to`. Errors: actions_full, queue_full, invalid_argument, qp_in_error.
  constexpr step_result post(work_request wr, dc_address to, time_ns now, qp_sink& out) {
    if (out.room() < min_room) return {-1, errc::actions_full};
    if (wr.op == wr_op::dc_connect || wr.op == wr_op::dc_disconnect || wr.id >= dc_internal_id) return {-1, errc::invalid_argument};
    wr.dest_qp = to.dct;
    wr.dc_key = to.access_key;
    wr.dci = cfg_.dci;
    return run(dci_event::post, {.wr = wr, .to = to, .now = now}, out);
  }
  constexpr step_result on_packet(const packet& p, time_ns now, qp_sink& out) {
    const step_result r = rq_.on_packet(p, now, out);
    settle(now, out);
    return r;
  }
  constexpr step_result on_timer(timer_kind k, time_ns now, qp_sink& out) {
    const step_result r = rq_.on_timer(k, now, out);
    settle(now, out);
    return r;
  }
  /// Sends and settles what a full sink held back (see requester::pump).
  constexpr void pump(time_ns now, qp_sink& out) {
    rq_.pump(now, out);
    settle(now, out);
  }
  constexpr bool wants_to_send() const { return rq_.wants_to_send() || settle_pending(); }
  /// Holds new packets back (requester::hold): a class scheduler releases them one at a time.
  constexpr void hold(bool on) { rq_.hold(on); }

  constexpr dci_state state() const { return st_; }
  constexpr const dc_address& target() const { return cur_; }
  constexpr const requester<SQ>& transport() const { return rq_; }
  constexpr std::size_t pending() const { return pending_.size(); }
  constexpr bool quiescent() const { return st_ == dci_state::idle && pending_.empty(); }
  template <class H>
  constexpr void digest(H& h) const {
    h(static_cast<std::uint64_t>(st_));
    rq_.digest(h);
    h(pending_.size());
    for (const waiting& w : pending_) h(w.wr.id);
    h(cur_.dct);
    h(disconnect_posted_);
    h(next_internal_);
  }

  static constexpr bool g_same_target_free(const dc_initiator& m, const dci_input& in) {
    return m.pending_.empty() && in.to == m.cur_ && !m.disconnect_posted_;
  }
  static constexpr bool g_pending_room(const dc_initiator& m, const dci_input&) { return !m.pending_.full(); }
  /// Send-queue slots a new target needs at once: its connect and the first request.
  static constexpr std::size_t connect_slots = 2;
  static constexpr bool g_two_slots(const dc_initiator& m, const dci_input&) { return m.rq_.queue_room() >= connect_slots; }
  static constexpr bool g_has_pending(const dc_initiator& m, const dci_input&) { return !m.pending_.empty(); }

  static constexpr errc a_connect_and_send(dc_initiator& m, const dci_input& in, qp_sink&) {
    m.cur_ = in.to;
    m.disconnect_posted_ = false;
    const step_result c = m.rq_.enqueue(m.control(wr_op::dc_connect, in.now));
    if (!c.ok()) return c.error;
    return m.rq_.enqueue(in.wr).error;
  }
  static constexpr errc a_send(dc_initiator& m, const dci_input& in, qp_sink&) { return m.rq_.enqueue(in.wr).error; }
  static constexpr errc a_wait(dc_initiator& m, const dci_input& in, qp_sink&) {
    m.pending_.push_back({in.wr, in.to});
    return {};
  }
  static constexpr errc a_refuse(dc_initiator&, const dci_input&, qp_sink&) { return errc::queue_full; }
  static constexpr errc a_disconnect(dc_initiator& m, const dci_input& in, qp_sink&) {
    m.disconnect_posted_ = true;
    return m.rq_.enqueue(m.control(wr_op::dc_disconnect, in.now)).error;
  }
  static constexpr errc a_next_target(dc_initiator& m, const dci_input& in, qp_sink& out) {
    const waiting first = m.pending_.front();
    m.pending_.pop_front();
    dci_input next = in;
    next.wr = first.wr;
    next.to = first.to;
    const errc e = a_connect_and_send(m, next, out);
    while (e == errc{} && !m.pending_.empty() && m.pending_.front().to == m.cur_) {  // the run for this target
      if (!m.rq_.enqueue(m.pending_.front().wr).ok()) break;
      m.pending_.pop_front();
    }
    return e;
  }
  static constexpr errc a_flush_pending(dc_initiator& m, const dci_input&, qp_sink& out) {
    for (const waiting& w : m.pending_) out.push(qp_action::complete{w.wr.id, w.wr.op, wc_status::flushed, 0});
    m.pending_.clear();
    return {};
  }
  static constexpr errc a_flush_post(dc_initiator&, const dci_input& in, qp_sink& out) {
    out.push(qp_action::complete{in.wr.id, in.wr.op, wc_status::flushed, 0});
    return errc::qp_in_error;
  }

  /// The transition table (detail::dci_rows).
  static constexpr std::span<const row> table();

 private:
  friend struct testing::access;  // flow/testing.hpp
  struct waiting {
    work_request wr;
    dc_address to;
  };
  static constexpr requester_config with_dc(requester_config r) {
    r.svc = service::dc;
    return r;
  }
  constexpr work_request control(wr_op op, time_ns) {
    return {.id = dc_internal_id + next_internal_++, .op = op, .dest_qp = cur_.dct, .dc_key = cur_.access_key, .dci = cfg_.dci};
  }
  constexpr step_result run(dci_event e, const dci_input& in, qp_sink& out) {
    const step_result r = step<row>(table(), st_, *this, e, in, out);
    settle(in.now, out);
    return r;
  }

  /// The requester's state implies a DCI step (settle() has work).
  constexpr bool settle_pending() const {
    return (rq_.state() == req_state::error && st_ != dci_state::error) ||
           ((st_ == dci_state::connected || st_ == dci_state::disconnecting) && rq_.quiescent());
  }
  /// Steps the table on what the requester's state now implies, then sends what the sink has
  /// room for (requests are queued without sink room; pump() sends the rest later).
  constexpr void settle(time_ns now, qp_sink& out) {
    for (int guard = 0; guard < 4; ++guard) {
      rq_.pump(now, out);
      const dci_input in{.now = now};
      if (rq_.state() == req_state::error && st_ != dci_state::error) {
        if (out.room() < pending_.size() + 1) return;  // its completions must fit; pump() retries
        step<row>(table(), st_, *this, dci_event::failed, in, out);
      } else if (st_ == dci_state::connected && rq_.quiescent()) {
        step<row>(table(), st_, *this, dci_event::data_done, in, out);
      } else if (st_ == dci_state::disconnecting && rq_.quiescent()) {
        step<row>(table(), st_, *this, dci_event::disconnected, in, out);
      } else {
        return;
      }
    }
    rq_.pump(now, out);
  }

  config cfg_;
  requester<SQ> rq_;
  static_ring<waiting, Pending> pending_{};
  dc_address cur_{};
  bool disconnect_posted_ = false;
  std::uint64_t next_internal_ = 0;
  dci_state st_ = dci_state::idle;
};

namespace detail {
template <std::size_t SQ, std::size_t Pending>
struct dci_rows {
  using M = dc_initiator<SQ, Pending>;
  static constexpr auto rows = std::to_array<typename M::row>({
      {dci_state::idle, dci_event::post, "two send-queue slots", &M::g_two_slots, dci_state::connected, "post connect (0x55, SE clear) and the request", &M::a_connect_and_send},
      {dci_state::idle, dci_event::post, "else", nullptr, dci_state::idle, "refuse queue_full", &M::a_refuse},
      {dci_state::connected, dci_event::post, "same target, none waiting, no disconnect yet", &M::g_same_target_free, dci_state::connected, "post the request", &M::a_send},
      {dci_state::connected, dci_event::post, "waiting list has room", &M::g_pending_room, dci_state::connected, "wait in order", &M::a_wait},
      {dci_state::disconnecting, dci_event::post, "waiting list has room", &M::g_pending_room, dci_state::disconnecting, "wait in order", &M::a_wait},
      {dci_state::connected, dci_event::post, "else", nullptr, dci_state::connected, "refuse queue_full", &M::a_refuse},
      {dci_state::disconnecting, dci_event::post, "else", nullptr, dci_state::disconnecting, "refuse queue_full", &M::a_refuse},
      {dci_state::connected, dci_event::data_done, "", nullptr, dci_state::disconnecting, "post disconnect (0x55, SE set)", &M::a_disconnect},
      {dci_state::disconnecting, dci_event::disconnected, "requests waiting", &M::g_has_pending, dci_state::connected, "connect the next target; post its run", &M::a_next_target},
      {dci_state::disconnecting, dci_event::disconnected, "else", nullptr, dci_state::idle, "", nullptr},
      {dci_state::connected, dci_event::failed, "", nullptr, dci_state::error, "flush waiting requests", &M::a_flush_pending},
      {dci_state::disconnecting, dci_event::failed, "", nullptr, dci_state::error, "flush waiting requests", &M::a_flush_pending},
      {dci_state::error, dci_event::post, "", nullptr, dci_state::error, "complete flushed", &M::a_flush_post},
  });
};
}  // namespace detail

template <std::size_t SQ, std::size_t Pending>
constexpr std::span<const typename dc_initiator<SQ, Pending>::row> dc_initiator<SQ, Pending>::table() {
  return detail::dci_rows<SQ, Pending>::rows;
}

template <std::size_t SQ, std::size_t P>
inline constexpr machine_info<typename dc_initiator<SQ, P>::row> dci_info{
    "dc_initiator", "idle", dc_initiator<SQ, P>::table()};

// ---- target -----------------------------------------------------------------------------------

enum class dct_state : std::uint8_t { listening, connected };
inline constexpr std::array<wire::named_value, 2> dct_state_names{{
    {dct_state::listening, "listening"},
    {dct_state::connected, "connected"},
}};
constexpr std::span<const wire::named_value> wire_enum_names(dct_state) { return dct_state_names; }
enum class dct_event : std::uint8_t { connect, connect_duplicate, stale_connect, disconnect, data, bad_key, wrong_dct, stranger };
inline constexpr std::array<wire::named_value, 8> dct_event_names{{
    {dct_event::connect, "connect (key and DCT match)"},
    {dct_event::connect_duplicate, "connect (duplicate of the current one)"},
    {dct_event::stale_connect, "connect older than its DCI's last disconnect"},
    {dct_event::disconnect, "disconnect (key matches)"},
    {dct_event::data, "data from the connected DCI"},
    {dct_event::bad_key, "any packet with a wrong access key"},
    {dct_event::wrong_dct, "connect for another DCT number"},
    {dct_event::stranger, "data with no connection from its DCI"},
}};
constexpr std::span<const wire::named_value> wire_enum_names(dct_event) { return dct_event_names; }

struct dct_input {
  packet pkt{};
};

/// The DC target number `dct` with access key `key`, serving one DCI at a time.
template <std::size_t RD = 16>
class dc_target {
 public:
  using row = transition<dc_target, dct_state, dct_event, dct_input, qp_sink>;
  struct config {
    std::uint32_t dct = 0;
    std::uint64_t access_key = 0;
    responder_config resp{.svc = service::dc};
  };
  struct counters {
    std::uint64_t connects = 0, disconnects = 0, bad_key = 0, wrong_dct = 0, strangers = 0;
  };

  /// The least sink room on_packet() needs: the responder's (a refused packet pushes an ACK or
  /// NAK and a drop, fewer).
  static constexpr std::size_t min_room = responder<RD>::min_room;
  static_assert(min_room >= 2);

  constexpr explicit dc_target(config c = {}, memory_port mem = {}) : cfg_(c), rs_(with_dc(c.resp), mem) {}

  /// A DC request packet addressed to this DCT. Errors: the responder's refusals
  /// (actions_full, queue_full: nothing applied), and those of the table's rows.
  constexpr step_result on_packet(const packet& p, qp_sink& out) {
    if (const errc r = rs_.refusal(out); r != errc{}) return {-1, r};
    const auto e = judge(p);
    if (!e) return {-1, errc::event_not_allowed};
    return step<row>(table(), st_, *this, *e, {p}, out);
  }
  /// The event DC request p is for this target now (nullopt: not a DC request). Changes
  /// nothing; an observer replaying a capture asks it.
  constexpr std::optional<dct_event> judge(const packet& p) const {
    if (!p.known()) return std::nullopt;
    const ib::opcode_info* oi = &p.info();
    if (oi->tp != ib::transport::dc || !oi->request) return std::nullopt;
    const bool control = oi->is(ib::op_class::connect);
    if (p.dc_key != cfg_.access_key) return dct_event::bad_key;
    if (control && p.dct != cfg_.dct) return dct_event::wrong_dct;
    if (control && !p.se)
      return st_ == dct_state::connected && p.dc_initiator() == dci_ && ib::psn_before(p.psn, rs_.expected_psn()) ? dct_event::connect_duplicate
             : closed_before(p.dc_initiator(), p.psn)                                                             ? dct_event::stale_connect
                                                                                                       : dct_event::connect;
    if (control) return dct_event::disconnect;
    if (st_ != dct_state::connected || p.dc_initiator() != dci_) return dct_event::stranger;
    return dct_event::data;
  }
  /// A packet from `dci` with this PSN is older than the end of its last closed stream (a
  /// stale retransmission).
  constexpr bool closed_before(std::uint32_t dci, std::uint32_t psn) const {
    for (std::size_t i = 0; i < closed_n_; ++i)
      if (closed_[i].dci == dci) return ib::psn_before(psn, closed_[i].end_psn);
    return false;
  }
  /// For an observer (see responder::force): the connected stream's responder executes p.
  constexpr void force(const packet& p, qp_sink& out) { rs_.force(p, out); }
  /// The path MTU (see responder::set_mtu).
  constexpr void set_mtu(std::uint32_t mtu) { rs_.set_mtu(mtu); }
  constexpr void post_receive(std::uint32_t n) { rs_.post_receive(n); }
  /// Receives available are n (a shared receive queue's count; see responder::set_receives).
  constexpr void set_receives(std::uint32_t n) { rs_.set_receives(n); }
  /// Sends queued READ / atomic responses and the ACKs behind them (see responder::pump).
  constexpr void pump(qp_sink& out) { rs_.pump(out); }
  constexpr bool wants_to_send() const { return rs_.wants_to_send(); }

  constexpr dct_state state() const { return st_; }
  constexpr std::uint32_t connected_dci() const { return dci_; }
  constexpr const responder<RD>& transport() const { return rs_; }
  constexpr const counters& stats() const { return stats_; }
  template <class H>
  constexpr void digest(H& h) const {
    h(static_cast<std::uint64_t>(st_));
    h(dci_);
    rs_.digest(h);
    for (std::size_t i = 0; i < closed_n_; ++i) h(std::uint64_t{closed_[i].dci} << 32 | closed_[i].end_psn);
  }

  static constexpr bool g_in_sequence(const dc_target& m, const dct_input& in) {
    return in.pkt.dc_initiator() == m.dci_ && in.pkt.psn == m.rs_.expected_psn();
  }
  static constexpr bool g_old(const dc_target& m, const dct_input& in) {
    return in.pkt.dc_initiator() != m.dci_ || ib::psn_before(in.pkt.psn, m.rs_.expected_psn());
  }
  static constexpr errc a_accept(dc_target& m, const dct_input& in, qp_sink& out) {
    ++m.stats_.connects;
    m.dci_ = in.pkt.dc_initiator();
    m.rs_.restart(ib::psn_add(in.pkt.psn, 1));
    m.ack(in.pkt, ib::syndrome::ack(ib::syndrome::unlimited_credits), out);
    return {};
  }
  static constexpr errc a_to_responder(dc_target& m, const dct_input& in, qp_sink& out) {
    return m.rs_.on_packet(in.pkt, out).error;
  }
  static constexpr errc a_close(dc_target& m, const dct_input& in, qp_sink& out) {
    ++m.stats_.disconnects;
    m.remember_close(in.pkt.dc_initiator(), ib::psn_add(in.pkt.psn, 1));
    m.rs_.restart(ib::psn_add(in.pkt.psn, 1));
    m.ack(in.pkt, ib::syndrome::ack(ib::syndrome::unlimited_credits), out);
    return {};
  }
  static constexpr errc a_ack(dc_target& m, const dct_input& in, qp_sink& out) {
    m.ack(in.pkt, ib::syndrome::ack(ib::syndrome::unlimited_credits), out);
    return {};
  }
  static constexpr errc a_bad_key(dc_target& m, const dct_input& in, qp_sink& out) {
    ++m.stats_.bad_key;
    m.ack(in.pkt, ib::syndrome::nak(ib::nak_code::remote_access_error), out);
    out.push(qp_action::dropped{in.pkt.psn, errc::wrong_access_key});
    return errc::wrong_access_key;
  }
  static constexpr errc a_wrong_dct(dc_target& m, const dct_input& in, qp_sink& out) {
    ++m.stats_.wrong_dct;
    m.ack(in.pkt, ib::syndrome::nak(ib::nak_code::invalid_request), out);
    out.push(qp_action::dropped{in.pkt.psn, errc::unknown_dct});
    return errc::unknown_dct;
  }
  static constexpr errc a_stranger(dc_target& m, const dct_input& in, qp_sink& out) {
    ++m.stats_.strangers;  // its connect was lost or overtaken, or it is stale: the DCI's timeout recovers
    out.push(qp_action::dropped{in.pkt.psn, errc::not_connected});
    return errc::not_connected;
  }

  /// The transition table (detail::dct_rows).
  static constexpr std::span<const row> table();

 private:
  friend struct testing::access;  // flow/testing.hpp
  static constexpr responder_config with_dc(responder_config r) {
    r.svc = service::dc;
    return r;
  }
  constexpr void ack(const packet& req, ib::syndrome s, qp_sink& out) { rs_.acknowledge(req, s, out); }

  constexpr void remember_close(std::uint32_t dci, std::uint32_t end_psn) {
    for (std::size_t i = 0; i < closed_n_; ++i)
      if (closed_[i].dci == dci) {
        closed_[i].end_psn = end_psn;
        return;
      }
    if (closed_n_ < closed_.size()) closed_[closed_n_++] = {dci, end_psn};
    else closed_[end_psn % closed_.size()] = {dci, end_psn};  // full: forget one
  }
  struct closed_stream {
    std::uint32_t dci = 0, end_psn = 0;
  };

  config cfg_;
  responder<RD> rs_;
  std::array<closed_stream, 8> closed_{};  ///< the last streams closed, by DCI
  std::size_t closed_n_ = 0;
  std::uint32_t dci_ = 0;
  dct_state st_ = dct_state::listening;
  counters stats_{};
};

namespace detail {
template <std::size_t RD>
struct dct_rows {
  using M = dc_target<RD>;
  static constexpr auto rows = std::to_array<typename M::row>({
      {dct_state::listening, dct_event::connect, "", nullptr, dct_state::connected, "bind the DCI; expect PSN + 1; ACK", &M::a_accept},
      {dct_state::connected, dct_event::connect, "", nullptr, dct_state::connected, "rebind to the new stream; ACK", &M::a_accept},
      {dct_state::connected, dct_event::connect_duplicate, "", nullptr, dct_state::connected, "re-ACK (responder duplicate)", &M::a_to_responder},
      {dct_state::listening, dct_event::stale_connect, "", nullptr, dct_state::listening, "drop and count (a retransmission from a closed stream)", &M::a_stranger},
      {dct_state::connected, dct_event::stale_connect, "", nullptr, dct_state::connected, "drop and count (a retransmission from a closed stream)", &M::a_stranger},
      {dct_state::connected, dct_event::disconnect, "bound DCI, expected PSN", &M::g_in_sequence, dct_state::listening, "ACK; unbind", &M::a_close},
      {dct_state::connected, dct_event::disconnect, "older stream or PSN", &M::g_old, dct_state::connected, "re-ACK (stale; keeps the connection)", &M::a_ack},
      {dct_state::connected, dct_event::disconnect, "else (ahead of lost data)", nullptr, dct_state::connected, "drop and count", &M::a_stranger},
      {dct_state::listening, dct_event::disconnect, "", nullptr, dct_state::listening, "ACK (retransmitted disconnect)", &M::a_ack},
      {dct_state::connected, dct_event::data, "", nullptr, dct_state::connected, "responder: place / ACK / NAK", &M::a_to_responder},
      {dct_state::listening, dct_event::bad_key, "", nullptr, dct_state::listening, "NAK remote access error; place nothing", &M::a_bad_key},
      {dct_state::connected, dct_event::bad_key, "", nullptr, dct_state::connected, "NAK remote access error; place nothing", &M::a_bad_key},
      {dct_state::listening, dct_event::wrong_dct, "", nullptr, dct_state::listening, "NAK invalid request; place nothing", &M::a_wrong_dct},
      {dct_state::connected, dct_event::wrong_dct, "", nullptr, dct_state::connected, "NAK invalid request; place nothing", &M::a_wrong_dct},
      {dct_state::listening, dct_event::stranger, "", nullptr, dct_state::listening, "drop and count; place nothing", &M::a_stranger},
      {dct_state::connected, dct_event::stranger, "", nullptr, dct_state::connected, "drop and count; place nothing", &M::a_stranger},
  });
};
}  // namespace detail

template <std::size_t RD>
constexpr std::span<const typename dc_target<RD>::row> dc_target<RD>::table() {
  return detail::dct_rows<RD>::rows;
}

template <std::size_t RD>
inline constexpr machine_info<typename dc_target<RD>::row> dct_info{
    "dc_target", "listening", dc_target<RD>::table()};

}  // namespace pushwire::flow
