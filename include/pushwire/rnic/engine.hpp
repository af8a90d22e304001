// The reference RNIC's QP engine (spec/rnic.md §5-§7): between the doorbells, the ports and
// the completion unit, it runs each queue pair's transport machines (flow/rc.hpp, flow/dc.hpp)
// and carries out what they ask: it fetches posted descriptors into the machines, fires their
// timers, turns their transmit actions into frames on a port, their placements into DMA, and
// their completions into records; it hands each received packet to the QP it names, with the
// packet's rx_context as an argument. The rules of the transport are the machines'; the engine
// keeps none of its own.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <deque>
#include <list>
#include <map>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include <pushwire/rnic/classes.hpp>
#include <pushwire/rnic/completion.hpp>
#include <pushwire/rnic/config.hpp>
#include <pushwire/rnic/context.hpp>
#include <pushwire/rnic/dma.hpp>
#include <pushwire/rnic/memory.hpp>
#include <pushwire/rnic/pipeline.hpp>
#include <pushwire/rnic/port.hpp>
#include <pushwire/rnic/qpc.hpp>

namespace pushwire::rnic {

/// The data path of a device: device.hpp adds the verbs that make and change its objects.
class qp_engine {
 public:
  explicit qp_engine(device_config cfg)
      : cfg_(std::move(cfg)), mem_(cfg_.max_keys), dma_(mem_, stats_, now_, cfg_.page_fault_latency, cfg_.platform), cq_(cfg_.max_cqs, stats_) {
    ports_.reserve(cfg_.ports.size());
    for (std::size_t i = 0; i < cfg_.ports.size(); ++i) {
      ports_.emplace_back(cfg_.ports[i], cfg_, static_cast<std::uint8_t>(i));
      sched_.push_back(cfg_.ports[i].classes ? std::optional<class_scheduler>(*cfg_.ports[i].classes) : std::nullopt);
    }
  }
  qp_engine(const qp_engine&) = delete;
  qp_engine& operator=(const qp_engine&) = delete;

  const device_config& config() const { return cfg_; }
  std::size_t port_count() const { return ports_.size(); }
  const device_counters& counters() const { return stats_; }
  memory_table& memory() { return mem_; }

  /// The doorbell register: QP qpn has new descriptors in its rings (post_send and post_recv
  /// ring it; a caller that writes descriptors itself rings it after publishing them).
  void doorbell(std::uint32_t qpn) {
    doorbells_.push_back(qpn);
    if (!cfg_.contexts.entries) return;
    // the context cache: this doorbell's descriptors are those published by now
    const qp_context* q = find_qp(qpn);
    marks_.push_back(q && q->init.sq ? q->init.sq->doorbell().producer.load(std::memory_order_acquire) : 0);
  }
  /// Asynchronous events since the last call.
  std::vector<async_event> take_events() { return std::exchange(events_, {}); }

  /// Does what is due at `now`: serves due page faults, fetches posted descriptors, fires due
  /// timers, sends what the machines allow and writes completions.
  void progress(time_ns now) {
    now_ = std::max(now_, now);
    dma_.serve_faults();
    run_rx();
    if (bus_.enabled()) run_bus(), run_placements();
    fetch();
    if (cfg_.contexts.entries) serve_jobs();
    for (auto& [n, q] : qps_) {
      if (q->closed) {
        pump(*q);  // its responder's answers to duplicates
        continue;
      }
      fire_timers(*q);
      if (q->rp) fire_rate_timers(*q);
      pump(*q);
      write_completions(*q);
    }
    if (lingering_)
      lingering_ -= std::erase_if(qps_, [&](const auto& e) { return e.second->closed && now_ >= e.second->last_heard + e.second->linger; });
    for (port& p : ports_) p.expire(now_);
    check_srq_limits();
  }
  /// The earliest time progress() has timed work (a timer, a page fault served, held ACKs), or
  /// nullopt.
  std::optional<time_ns> next_deadline() const {
    std::optional<time_ns> t;
    auto take = [&](std::optional<time_ns> d) {
      if (d && (!t || *d < *t)) t = d;
    };
    take(dma_.next_deadline());
    for (const port& p : ports_) take(p.next_deadline(now_));
    for (const auto& [n, q] : qps_) {
      if (q->closed) take(q->last_heard + q->linger);
      if (const requester_t* r = q->sender()) take(r->deadline(flow::timer_kind::retransmit)), take(r->deadline(flow::timer_kind::wait));
      if (q->rp) {
        for (const auto k : {flow::rp_timer::decrease, flow::rp_timer::alpha, flow::rp_timer::increase}) take(q->rp->deadline(k));
        if (paced(*q) && q->req && q->req->wants_to_send()) take(q->tx_next);
      }
    }
    for (const auto& s : sched_)
      if (s) take(s->deadline(now_));
    if (loading_) take(loading_until_);
    if (!tx_pipe_.eligible(now_))
      for (const port& p : ports_)
        if (p.pending()) take(tx_pipe_.eligible_at());
    if (rx_waiting()) take(rx_pipe_.eligible_at());
    if (bus_.enabled()) {
      take(bus_.deadline());
      take(placements_.deadline());
      if (!landing_.empty()) take(landing_.begin()->first);
      if (!placed_.empty()) take(placed_.begin()->first);
    }
    return t;
  }
  /// Whether progress() has work now (doorbells rung, packets or completions to send).
  bool busy() const {
    if (!doorbells_.empty() || !srq_doorbells_.empty()) return true;
    if (!jobs_.empty() && now_ >= loading_until_ && jobs_due()) return true;
    if (rx_waiting() && rx_pipe_.eligible(now_)) return true;
    for (const auto& [n, q] : qps_)
      if (wants_work(*q)) return true;
    return false;
  }

  /// The next frame port `port` transmits (moved out), or nullopt. Responses (ACKs, NAKs, READ
  /// responses) go before requests, so a port busy with requests does not delay the
  /// acknowledgements its peers wait for. Coalesced ACKs (device_config::ack_delay) leave
  /// behind the short burst of requests that releases them: a peer that learns of its
  /// completion from one then finds the requests already there.
  std::optional<frame_bytes> take_frame(std::size_t port) {
    if (!may_send(port)) return std::nullopt;
    fill(port);
    if (port >= ports_.size() || !ports_[port].next(now_)) return std::nullopt;
    frame_bytes f = ports_[port].take(now_);
    through_pipeline(port, f.size());
    return f;
  }
  /// The same frame written into the caller's memory: its size, 0 when the port has none.
  /// Errors: invalid_argument (no such port, or `out` is smaller than next_frame_size(port):
  /// the frame stays queued).
  result<std::size_t> take_frame(std::size_t port, std::span<std::byte> out) {
    if (port >= ports_.size()) return errc::invalid_argument;
    if (!may_send(port)) return std::size_t{0};
    fill(port);
    const frame_bytes* f = ports_[port].next(now_);
    if (!f) return std::size_t{0};
    if (f->size() > out.size()) return errc::invalid_argument;
    frame_bytes b = ports_[port].take(now_);
    through_pipeline(port, b.size());
    std::copy(b.begin(), b.end(), out.begin());
    const std::size_t n = b.size();
    ports_[port].recycle(std::move(b));
    return n;
  }
  /// Bytes of the frame take_frame(port) would hand out now (0: none).
  std::size_t next_frame_size(std::size_t port) {
    if (!may_send(port)) return 0;
    fill(port);
    const frame_bytes* f = port < ports_.size() ? ports_[port].next(now_) : nullptr;
    return f ? f->size() : 0;
  }
  /// Frames port `port` holds for the wire (with traffic classes, and a class that may send
  /// now: one more, built when taken; take_frame may then find that QP has nothing after all).
  std::size_t pending_frames(std::size_t port) const {
    if (port >= ports_.size() || !may_send(port)) return 0;
    return ports_[port].pending() + (may_fill(port) && sched_[port]->ready(now_) ? 1 : 0);
  }
  /// The host bus (spec/qos.md §8): its gathers (host memory to the device), and its
  /// placements (the device to host memory; the other direction of a full-duplex bus).
  const host_bus& bus() const { return bus_; }
  const host_bus& placement_bus() const { return placements_; }
  /// Port `port`'s counters per traffic class (spec/qos.md §4).
  const std::array<class_counters, flow::traffic_classes>& class_stats(std::size_t port) const { return ports_.at(port).class_stats(); }
  /// Plain ACKs port `port` dropped because a newer one of the same RC QP was queued behind them
  /// before they left (spec/rnic.md §7).
  std::uint64_t acks_superseded(std::size_t port) const { return ports_.at(port).acks_superseded(); }
  /// QPs waiting in traffic class tc of port `port` (0 without a class model).
  std::size_t class_waiting(std::size_t port, std::uint8_t tc) const { return port < sched_.size() && sched_[port] ? sched_[port]->waiting(tc) : 0; }
  /// Returns a frame buffer to the device's pools (after the wire took it): the port's that
  /// holds fewest.
  void recycle(frame_bytes&& b) {
    if (ports_.empty()) return;
    std::min_element(ports_.begin(), ports_.end(), [](const port& a, const port& c) { return a.pooled() < c.pooled(); })->recycle(std::move(b));
  }
  /// A frame arrived on port `port` at `now`. It waits for its turn in the receive pipeline
  /// (with one; dropped beyond rx_queue frames waiting), and for its placement on the host bus
  /// (with one); then it is validated and handed to its QP.
  void receive(std::size_t port, std::span<const std::byte> frame, time_ns now) {
    now_ = std::max(now_, now);
    ++stats_.frames_in;
    stats_.bytes_in += frame.size();
    if (port >= ports_.size()) return;
    if (rx_pipe_.enabled()) {
      run_rx();  // frames that may pass by now go first, and make room
      if (!rx_running_ && rx_pipe_.may(port, ports_.size(), now_, [&](std::size_t o) { return ports_[o].rx_waiting() > 0; }) &&
          !ports_[port].rx_waiting()) {
        rx_running_ = true;  // (a frame its QP's answer brings back waits its turn)
        pass(port, frame);
        rx_running_ = false;
        return run_rx();
      }
      if (!ports_[port].hold(frame)) ++stats_.dropped_rx_full;
      return run_rx();
    }
    admit(port, frame);
  }
  /// Frames that arrived and wait for the receive pipeline, all ports together.
  std::size_t rx_waiting() const {
    std::size_t n = 0;
    for (const port& p : ports_) n += p.rx_waiting();
    return n;
  }
  /// A frame that arrived on port `port` (and was placed, with a host bus) goes to its QP.
  void deliver(std::size_t port, std::span<const std::byte> frame) {
    fetch_receives_rung();  // a NIC reads the receives posted so far when a message arrives
    const rx_drop d = ports_[port].receive(
        frame, now_, [&](const flow::packet& p, const rx_context& rx, auto&& copy) { return cut_through(p, rx, copy); },
        [&](const flow::packet& p, const rx_context& rx) { arrive(p, rx); });
    count(d);
  }

  /// The device's QPs now run on another device (spec/migration.md §5), at `now`: each RC QP's
  /// requester resends what is unacknowledged and its responder NAKs at the PSN it expects, so
  /// neither side waits for its retransmission timer. Returns how many machines acted.
  std::size_t moved(time_ns now) {
    now_ = std::max(now_, now);
    std::size_t n = 0;
    for (auto& e : qps_) {
      qp_context& q = *e.second;
      if (q.closed) continue;
      if (q.resp) {
        scratch a(*this);
        n += q.resp->moved(a.out()).row >= 0;
        handle(q, a.out(), nullptr, nullptr);
      }
      if (q.req) run_sender(q, [&](flow::qp_sink& out) { n += q.req->moved(now_, out).row >= 0; });
      pump(q);
    }
    return n;
  }

  /// A QP's state, for tests and tools.
  struct qp_view {
    qp_state state;
    std::uint64_t retransmits, page_faults, timeouts;
    /// The requester's state, its oldest unacknowledged and next new PSN, the requests it holds;
    /// the responder's expected PSN (0 where the QP has none).
    flow::req_state sender_state = flow::req_state::idle;
    std::uint32_t una = 0, next_psn = 0, expected_psn = 0;
    std::size_t queued = 0;
  };
  /// A QP's state and its requester's counters (a lingering QP's too). Errors: not_found (no
  /// such QP).
  result<qp_view> view(std::uint32_t qpn) const {
    const auto it = qps_.find(qpn);
    if (it == qps_.end()) return errc::not_found;
    const qp_context& q = *it->second;
    qp_view v{q.state, 0, 0, 0};
    if (const requester_t* r = q.sender()) {
      v.retransmits = r->stats().retransmitted, v.page_faults = r->stats().page_faults, v.timeouts = r->stats().timeouts;
      v.sender_state = r->state(), v.una = r->una(), v.next_psn = r->next_psn(), v.queued = r->queued();
    }
    if (q.resp) v.expected_psn = q.resp->expected_psn();
    return v;
  }

 protected:
  static constexpr std::size_t sink_size = 64;
  using actions_t = flow::action_list<flow::qp_action_t, sink_size>;
  /// An action list for one machine call, reused (constructing one zeroes its whole storage):
  /// nested calls (an action that leads to another machine call) take the next one.
  class scratch {
   public:
    explicit scratch(qp_engine& e) : e_(e) {
      if (e.lists_.size() == e.depth_) e.lists_.push_back(std::make_unique<actions_t>());
      list_ = e.lists_[e.depth_++].get();
      list_->out.clear();
    }
    ~scratch() { --e_.depth_; }
    scratch(const scratch&) = delete;
    scratch& operator=(const scratch&) = delete;
    flow::qp_sink& out() { return list_->out; }
    /// Its storage, for a smaller sink over part of it.
    std::span<flow::qp_action_t> storage() { return list_->storage; }

   private:
    qp_engine& e_;
    actions_t* list_;
  };
  /// Address handles: a number names an address vector; freed numbers are reused.
  struct ah_table {
    std::vector<address_vector> avs;
    std::vector<bool> live;
    std::vector<std::uint32_t> free;
  };

  // -- lookups -----------------------------------------------------------------------------------
  bool has_srq(std::uint32_t srq) const { return srq < srqs_.size() && srqs_[srq] != nullptr; }
  bool has_gid(std::uint8_t port, std::uint8_t index) const { return port < ports_.size() && ports_[port].config().gid_at(index); }
  /// The QP of that number; a lingering one only when `closed_too`.
  qp_context* find_qp(std::uint32_t qpn, bool closed_too = false) {
    const auto it = qps_.find(qpn);
    return it == qps_.end() || (it->second->closed && !closed_too) ? nullptr : it->second.get();
  }
  const qp_context* find_qp(std::uint32_t qpn) const {
    const auto it = qps_.find(qpn);
    return it == qps_.end() || it->second->closed ? nullptr : it->second.get();
  }
  std::uint32_t port_mtu(std::size_t port) const { return ports_[port].config().mtu; }
  /// The MTU a QP's machines work with: the path MTU, in both framings (a cell packet is one
  /// transport packet, segmented into cells). UD has no path MTU attribute: its messages are
  /// bounded by its port's MTU (IBTA 9.7.1: a UD message is one packet; mlx5 and rxe likewise).
  std::uint32_t machine_mtu(const qp_context& q) const {
    return q.is(qp_type::ud) && q.attr.port < ports_.size() ? port_mtu(q.attr.port) : q.attr.path_mtu;
  }
  bool cell_port(const qp_context& q) const { return q.port() < ports_.size() && ports_[q.port()].cells(); }
  void check_srq_limits() {
    for (std::size_t i = 0; i < srqs_.size(); ++i)
      if (srqs_[i] && srqs_[i]->limit != 0 && srqs_[i]->outstanding() < srqs_[i]->limit) {
        srqs_[i]->limit = 0;
        events_.push_back({event_type::srq_limit, static_cast<std::uint32_t>(i)});
      }
  }
  /// How long a QP being destroyed lingers (device_config::linger), 0: not at all.
  time_ns linger_of(const qp_context& q) const {
    if (cfg_.linger == 0 || !q.is(qp_type::rc) || !q.resp || (q.state != qp_state::rts && q.state != qp_state::sqd)) return 0;
    if (q.attr.av.port < ports_.size() && ports_[q.attr.av.port].config().has_gid(q.attr.av.dgid)) return 0;  // its peer is here
    return std::min(cfg_.linger, 2 * ib::local_ack_timeout_ns(q.attr.timeout).value_or(cfg_.linger));
  }

  // -- states ------------------------------------------------------------------------------------
  /// Enters state `to`: makes the machines a state needs (RTR: the responder or DC target; RTS:
  /// the requester or DC initiator), discards everything in RESET, flushes in ERR.
  void enter(qp_context& q, qp_state to) {
    const qp_state from = q.state;
    q.state = to;
    const flow::service svc = service_of(q.init.type);
    if (to == qp_state::reset) {
      q.req.reset(), q.resp.reset(), q.dci.reset(), q.dct.reset();
      q.sends.clear(), q.recvs.clear();
      q.halted = false;
      return;
    }
    if (to == qp_state::err) {
      to_error(q);
      return;
    }
    if (to == qp_state::rtr && from == qp_state::init) {
      const flow::responder_config rc{.svc = svc, .mtu = machine_mtu(q), .start_psn = q.attr.rq_psn, .on_fault = cfg_.on_fault,
                                      .qp = q.qpn, .peer_qp = q.attr.dest_qp_num,
                                      .min_rnr_timer_us = ib::rnr_to_us(q.attr.min_rnr_timer),
                                      .exact_fault_delay = cell_port(q), .check_q_key = svc == flow::service::ud, .q_key = q.attr.qkey};
      if (q.is(qp_type::dct)) {
        q.dct.emplace(typename dct_t::config{.dct = q.qpn, .access_key = q.init.dct_access_key, .resp = rc}, dma_.port_of(q));
        q.dct->post_receive(completion_unit::receives_ready(q));
      } else if (!q.is(qp_type::dci)) {
        q.resp.emplace(rc, dma_.port_of(q));
        q.resp->post_receive(completion_unit::receives_ready(q));
      }
    }
    if (to == qp_state::sqd) q.drained_told = false;
    if (to == qp_state::rts && (from == qp_state::rtr || from == qp_state::sqe)) {
      const flow::requester_config rc{.svc = svc, .mtu = machine_mtu(q), .dest_qp = q.attr.dest_qp_num,
                                      .start_psn = q.attr.sq_psn, .window = cfg_.window,
                                      .timeout = ib::local_ack_timeout_ns(q.attr.timeout).value_or(~time_ns{0} / 4),
                                      .retry_cnt = q.attr.retry_cnt, .retry_forever = cfg_.retry_forever, .rnr_retry = q.attr.rnr_retry};
      if (q.is(qp_type::dci)) q.dci.emplace(typename dci_t::config{.dci = q.qpn, .req = rc});
      else q.req.emplace(rc);
      pace(q);
    }
  }
  static flow::service service_of(qp_type t) {
    switch (t) {
      case qp_type::rc: return flow::service::rc;
      case qp_type::uc: return flow::service::uc;
      case qp_type::ud: return flow::service::ud;
      default: return flow::service::dc;
    }
  }
  /// Moves a QP to ERR: the machines stop, and every outstanding work request and posted
  /// receive completes flushed, in order (so does everything posted later).
  void to_error(qp_context& q) {
    q.state = qp_state::err;
    q.req.reset(), q.resp.reset(), q.dci.reset(), q.dct.reset();
    completion_unit::flush(q);
    fetch_receives(q);  // the rest of the rings flush too
    fetch_sends(q);
    completion_unit::flush(q);
    write_completions(q);
  }
  /// A send-queue error: RC and DC go to ERR; UC and UD to SQE (the receive side goes on).
  void send_error(qp_context& q) {
    if (!q.send_errors_alone()) return to_error(q);
    q.state = qp_state::sqe;
    if (q.req) q.attr.sq_psn = q.req->next_psn();
    q.req.reset();
    completion_unit::flush_sends(q);
  }
  /// Writes q's finished completions, failing its send queue or the QP where the unit says.
  void write_completions(qp_context& q) {
    for (;;) {
      const written w = cq_.write(q, events_);
      if (w == written::send_queue_failed) {
        q.halted = false;
        send_error(q);
        continue;
      }
      if (w == written::cq_overflowed && q.state != qp_state::err) {
        events_.push_back({event_type::qp_fatal, q.qpn});
        to_error(q);
      }
      return;
    }
  }

  // -- doorbells and fetch -------------------------------------------------------------------------
  /// The receive side of fetch(): receives posted since the last fetch (their QPs' doorbells
  /// stay rung for the send side, which progress() fetches).
  void fetch_receives_rung() {
    for (std::uint32_t s : std::exchange(srq_doorbells_, {})) fetch_srq(*srqs_[s]);
    for (std::uint32_t n : doorbells_)
      if (qp_context* q = find_qp(n)) post_fetched_receives(*q);
  }
  void fetch() {
    for (std::uint32_t s : std::exchange(srq_doorbells_, {})) fetch_srq(*srqs_[s]);
    if (cfg_.contexts.entries) return queue_jobs();
    std::vector<std::uint32_t> rung = std::exchange(doorbells_, {});
    std::sort(rung.begin(), rung.end());
    rung.erase(std::unique(rung.begin(), rung.end()), rung.end());
    for (std::uint32_t n : rung)
      if (qp_context* q = find_qp(n)) {
        post_fetched_receives(*q);
        fetch_sends(*q);
      }
    // QPs whose machines had no room at their doorbell fetch as room frees
    for (auto& [n, q] : qps_)
      if (q->init.sq && q->sq_fetched != q->init.sq->doorbell().producer.load(std::memory_order_acquire)) fetch_sends(*q);
  }
  // -- the context cache and WR lookahead (spec/qos.md §7) ----------------------------------------
  /// Each send descriptor rung since becomes a job, in doorbell order.
  void queue_jobs() {
    const std::vector<std::uint32_t> rung = std::exchange(doorbells_, {}), marks = std::exchange(marks_, {});
    for (std::size_t i = 0; i < rung.size(); ++i)
      if (qp_context* q = find_qp(rung[i])) {
        post_fetched_receives(*q);
        if (!q->init.sq) continue;
        // the descriptors published when it rang (a receive doorbell rings with none new)
        const std::uint32_t p = i < marks.size() ? marks[i] : q->init.sq->doorbell().producer.load(std::memory_order_acquire);
        for (; static_cast<std::int32_t>(p - (q->sq_fetched + q->sq_queued)) > 0; ++q->sq_queued) jobs_.push_back(rung[i]);
      }
    serve_jobs();
  }
  /// Whether one of the jobs serve_jobs() looks at can go now.
  bool jobs_due() const {
    for (std::size_t i = 0; i < jobs_.size() && i < std::max<std::size_t>(cfg_.contexts.lookahead, 1); ++i)
      if (const qp_context* q = find_qp(jobs_[i]); !q || job_ready(*q)) return true;
    return false;
  }
  /// Whether q can take its next descriptor now.
  bool job_ready(const qp_context& q) const {
    if (q.closed || (q.state != qp_state::rts && q.state != qp_state::err && q.state != qp_state::sqe)) return false;
    return q.state != qp_state::rts || (!q.halted && machine_room(q));
  }
  /// Serves jobs while the device is not loading a context: among the first `lookahead`, the
  /// first (each QP's oldest) whose context is held; else it loads the first one's.
  void serve_jobs() {
    const context_cache_config& c = cfg_.contexts;
    while (!jobs_.empty() && now_ >= loading_until_) {
      std::optional<std::uint32_t> loaded = std::exchange(loading_, std::nullopt);
      if (loaded) load_context(*loaded);  // a load finished: that context is held now
      std::size_t pick = jobs_.size();
      std::size_t first_ready = jobs_.size();
      seen_.clear();
      for (std::size_t i = 0; i < jobs_.size() && i < std::max<std::size_t>(c.lookahead, 1); ++i) {
        const std::uint32_t n = jobs_[i];
        if (std::find(seen_.begin(), seen_.end(), n) != seen_.end()) continue;  // not its QP's oldest
        seen_.push_back(n);
        const qp_context* q = find_qp(n);
        if (!q) {
          pick = i;  // its QP is gone: dropped
          break;
        }
        if (!job_ready(*q)) continue;
        if (first_ready == jobs_.size()) first_ready = i;
        if (cached_.count(n)) {
          pick = i;
          break;
        }
      }
      if (pick == jobs_.size()) {
        if (first_ready == jobs_.size()) return;  // none can go now
        loading_ = jobs_[first_ready];
        ++stats_.context_misses;
        loading_until_ = now_ + c.fetch;
        continue;
      }
      const std::uint32_t n = jobs_[pick];
      jobs_.erase(jobs_.begin() + static_cast<std::ptrdiff_t>(pick));
      qp_context* q = find_qp(n);
      if (!q) continue;
      if (pick) ++stats_.out_of_order;
      if (n != loaded) ++stats_.context_hits;  // (the job that loaded it counted a miss)
      loaded.reset();
      hold_context(n);
      --q->sq_queued;
      fetch_one_send(*q);
    }
  }
  /// QP n's context is the most recently used; the least recently used leaves beyond `entries`.
  void hold_context(std::uint32_t n) {
    if (auto it = cached_.find(n); it != cached_.end()) lru_.erase(it->second);
    lru_.push_front(n);
    cached_[n] = lru_.begin();
    while (lru_.size() > cfg_.contexts.entries) {
      cached_.erase(lru_.back());
      held_.erase(lru_.back());
      lru_.pop_back();
    }
  }
  /// A load of QP n's context finished: its packed form (the context table) is decoded into
  /// its cache entry, the real work of a miss.
  void load_context(std::uint32_t n) {
    if (const auto t = table_.find(n); t != table_.end())
      if (auto c = unpack_qpc(t->second)) held_[n] = *c;
    hold_context(n);
  }
  /// QP q's attributes changed (modify_qp, a path migration): the context table holds them
  /// packed, and a cached copy is dropped (the next job of q loads it again).
  void store_context(const qp_context& q) {
    if (!cfg_.contexts.entries) return;
    table_[q.qpn] = pack_qpc(q.qpn, q.init, q.state, q.attr);
    forget_context(q.qpn);
  }
  void forget_context(std::uint32_t n) {
    if (const auto it = cached_.find(n); it != cached_.end()) {
      lru_.erase(it->second);
      cached_.erase(it);
    }
    held_.erase(n);
  }
  /// The send ring of q's next descriptor: with a context cache, the one its cached context
  /// names (decoded from the table), else its own.
  sq_memory* send_ring(const qp_context& q) const {
    if (const auto it = held_.find(q.qpn); it != held_.end() && it->second.sq_ring)
      return reinterpret_cast<sq_memory*>(static_cast<std::uintptr_t>(it->second.sq_ring));
    return q.init.sq;
  }
  void fetch_one_send(qp_context& q) {
    sq_memory& ring = *send_ring(q);
    if (q.sq_fetched == ring.doorbell().producer.load(std::memory_order_acquire)) return;
    const send_wqe& w = ring.ring()[q.sq_fetched & (ring.depth() - 1)];
    ++q.sq_fetched;
    accept_send(q, w);
  }

  void post_fetched_receives(qp_context& q) {
    const std::uint32_t added = fetch_receives(q);
    if (added && q.resp) q.resp->post_receive(added);
    if (added && q.dct) q.dct->post_receive(added);
  }
  static void fetch_srq(srq_context& s) {
    const std::uint32_t p = s.mem->doorbell().producer.load(std::memory_order_acquire);
    for (; s.fetched != p; ++s.fetched) s.ready.push_back(s.mem->ring()[s.fetched & (s.mem->depth() - 1)]);
  }
  /// Fetches posted receive descriptors into the QP's list; returns how many are usable.
  std::uint32_t fetch_receives(qp_context& q) {
    if (!q.init.rq || q.srq) return 0;
    const std::uint32_t p = q.init.rq->doorbell().producer.load(std::memory_order_acquire);
    std::uint32_t n = 0;
    while (q.rq_fetched != p) {
      recv_record r;
      r.wqe = q.init.rq->ring()[q.rq_fetched & (q.init.rq->depth() - 1)];
      ++q.rq_fetched;
      if (!receive_usable(mem_, q.init.pd, r.wqe)) r.done = true, r.status = wc_status::local_protection_error;
      else ++n;
      q.recvs.push_back(r);
    }
    return n;
  }
  /// Fetches send descriptors into the QP's machine while it has room.
  void fetch_sends(qp_context& q) {
    if (q.closed) return;
    if (cfg_.contexts.entries && q.state == qp_state::rts) return;  // its descriptors are jobs (serve_jobs)
    if (q.state != qp_state::rts && q.state != qp_state::err && q.state != qp_state::sqe) return;  // SQD: not now
    sq_memory& ring = *q.init.sq;
    const std::uint32_t p = ring.doorbell().producer.load(std::memory_order_acquire);
    // The descriptors rung together reach the requester together, and one pump sends them: its
    // last packet asks for the ACK that answers them all (spec/flow.md §2).
    bool queued = false;
    while (q.sq_fetched != p) {
      if (q.state == qp_state::rts && (q.halted || !machine_room(q))) break;
      const send_wqe& w = ring.ring()[q.sq_fetched & (ring.depth() - 1)];
      ++q.sq_fetched;
      queued = accept_send(q, w, q.sq_fetched != p) || queued;
    }
    if (queued && q.req) sender_pump(q);
  }
  static bool machine_room(const qp_context& q) {
    if (q.req) return q.req->queue_room() > 0;
    if (q.dci) return q.dci->transport().queue_room() > dci_t::connect_slots && q.dci->pending() < machine_pending;
    return false;
  }
  /// Validates a fetched descriptor, records it, and gives it to the machine. With `more` (further
  /// descriptors follow at once), an RC / UC requester only queues it; true when it did, and the
  /// caller pumps.
  bool accept_send(qp_context& q, const send_wqe& w, bool more = false) {
    send_record r;
    r.seq = q.next_seq++;
    r.wr_id = w.wr_id;
    r.wqe = w;
    r.signaled = (w.flags & send_signaled) || q.init.sq_sig_all;
    const auto op = static_cast<wr_opcode>(w.opcode);
    r.op = is_known(op) ? wc_opcode_of(flow_op(op)) : wc_opcode::send;
    q.sends.push_back(r);
    send_record& rec = q.sends.back();
    if (q.state == qp_state::err || q.state == qp_state::sqe) {  // a failed send queue flushes what is posted
      rec.done = true, rec.status = wc_status::flushed;
      return false;
    }
    if (const errc local = check_send(q, w); local != errc{}) {
      // The device stops at this descriptor; once what was before it completes, it completes
      // with the error and the send queue fails (write_completions).
      fail_send(q, rec, local == errc::invalid_argument ? wc_status::local_qp_operation_error
                        : local == errc::out_of_range    ? wc_status::local_length_error
                                                         : wc_status::local_protection_error,
                static_cast<std::uint32_t>(local));
      return false;
    }
    flow::work_request wr{.id = rec.seq, .op = flow_op(op), .length = send_length(w), .remote_va = w.remote_addr,
                          .rkey = w.rkey, .imm = w.imm, .swap = w.swap, .compare = w.compare_add,
                          .dest_qp = w.remote_qpn, .dc_key = w.dc_key, .q_key = w.remote_qkey};
    if (op == wr_opcode::atomic_fetch_and_add) wr.swap = w.compare_add;  // the machines carry the addend in swap
    if (op == wr_opcode::read_as_write) wr.sink_va = w.sg[0].addr, wr.sink_rkey = w.sg[0].lkey;
    if (op == wr_opcode::atomic_cmp_and_swp || op == wr_opcode::atomic_fetch_and_add) wr.length = 8;
    flow::step_result s{};
    const std::uint64_t seq = rec.seq;
    if (more && q.req) {
      s = q.req->enqueue(wr);
      if (s.ok()) return true;
    }
    run_sender(q, [&](flow::qp_sink& out) {
      s = q.dci ? q.dci->post(wr, {.dct = w.remote_qpn, .access_key = w.dc_key}, now_, out) : q.req->post(wr, now_, out);
    });
    if (!s.ok() && s.error != flow::errc::qp_in_error)
      if (send_record* r2 = q.send_of(seq); r2 && !r2->done)
        fail_send(q, *r2, wc_status::local_qp_operation_error, static_cast<std::uint32_t>(s.error));
    return false;
  }
  static void fail_send(qp_context& q, send_record& r, wc_status st, std::uint32_t vendor) {
    r.done = true, r.fatal = true, r.status = st, r.vendor_err = vendor;
    q.halted = true;
  }
  /// Local checks of a send descriptor: its opcode on this QP, its scatter/gather list.
  errc check_send(const qp_context& q, const send_wqe& w) const {
    const auto op = static_cast<wr_opcode>(w.opcode);
    if (!is_known(op) || !flow::supports(service_of(q.init.type), flow_op(op))) return errc::invalid_argument;
    const bool atomic = op == wr_opcode::atomic_cmp_and_swp || op == wr_opcode::atomic_fetch_and_add;
    const bool inl = w.flags & send_inline;
    if (inl && (w.inline_len > max_inline || op == wr_opcode::rdma_read || atomic)) return errc::invalid_argument;
    if (!inl && w.num_sge > max_sge) return errc::invalid_argument;
    if ((q.is(qp_type::ud) || q.is(qp_type::dci)) && w.ah >= ahs_.avs.size()) return errc::invalid_argument;
    if (q.sessions && op != wr_opcode::send) return errc::invalid_argument;  // the immediate carries the sequence
    if (atomic && (send_length(w) != 8 || w.num_sge != 1)) return errc::invalid_argument;
    if (atomic && w.remote_addr % 8) return errc::misaligned;
    // READ_AS_WRITE: one local entry, the sink the peer writes into (remote write).
    if (op == wr_opcode::read_as_write && (inl || w.num_sge != 1)) return errc::invalid_argument;
    const auto usable = [&](const sge& s, access need) {
      const errc e = mem_.check(s.lkey, s.addr, s.length, {q.init.pd, need});
      return e == errc::page_fault ? errc{} : e;
    };
    if (op == wr_opcode::read_as_write) return usable(w.sg[0], access::remote_write | access::local_write);
    if (inl) return {};
    // READ and atomics write their results locally: local write is needed
    const access need = op == wr_opcode::rdma_read || atomic ? access::local_write : access::none;
    for (const sge& s : entries(w))
      if (const errc e = usable(s, need); e != errc{}) return e;
    return {};
  }

  // -- timers, pumping ----------------------------------------------------------------------------
  /// Runs f(sink) on q's send side, counts what it retransmitted and paused, then carries out
  /// its actions (`in`: the packet they answer).
  template <class F>
  void run_sender(qp_context& q, F&& f, const flow::packet* in = nullptr) {
    scratch a(*this);
    // No more packets than the port still takes (the rest wait for the next pump), never below
    // the machine's least room. (A failed DC initiator need not settle its waiting requests
    // here: its first error completion moves the QP to ERR, which flushes every record.)
    std::size_t n = sink_size;
    if (const std::size_t room = packet_room(q)) n = std::clamp(requester_t::timer_room + room, q.dci ? dci_t::min_room : requester_t::min_room, n);
    flow::qp_sink out{a.storage().first(n)};
    run_sender_into(q, out, f, in);
  }
  /// run_sender() with the caller's sink.
  template <class F>
  void run_sender_into(qp_context& q, flow::qp_sink& out, F&& f, const flow::packet* in = nullptr) {
    const requester_t* r = q.sender();
    const auto before = r ? r->stats() : typename requester_t::counters{};
    pace(q);
    f(out);
    if (const requester_t* after = q.sender()) {
      stats_.retransmits += after->stats().retransmitted - before.retransmitted;
      if (after->stats().page_faults != before.page_faults) {
        stats_.pauses += after->stats().page_faults - before.page_faults;
        if (const auto until = after->deadline(flow::timer_kind::wait); until && *until > now_)
          stats_.retransmits_avoided += (*until - now_) / std::max<time_ns>(after->config().timeout, 1);
      }
    }
    handle(q, out, in, nullptr);
  }
  void fire_timers(qp_context& q) {
    for (const auto k : {flow::timer_kind::retransmit, flow::timer_kind::wait}) {
      const requester_t* r = q.sender();
      if (!r) return;
      if (const auto d = r->deadline(k); !d || *d > now_) continue;
      if (k == flow::timer_kind::retransmit && q.attr.path_mig_state == mig_state::armed && q.req) {
        // the path stopped answering: after migrate_after_timeouts in a row, the alternate
        q.quiet_timeouts = q.req->una() == q.una_at_timeout ? q.quiet_timeouts + 1 : 1;
        q.una_at_timeout = q.req->una();
        if (q.quiet_timeouts >= cfg_.migrate_after_timeouts) {
          migrate_path(q);
          continue;
        }
      }
      run_sender(q, [&](flow::qp_sink& out) { q.req ? q.req->on_timer(k, now_, out) : q.dci->on_timer(k, now_, out); });
    }
  }

  // -- automatic path migration (spec/qos.md §9) -----------------------------------------------------
 public:
  /// Port `port`'s link went down (or came up): the armed RC and UC QPs whose path leaves from it
  /// move to their alternate paths on another port.
  void set_port_up(std::size_t port, bool up) {
    if (port >= ports_.size()) return;
    port_down_[port] = !up;
    if (up) return;
    for (auto& [n, q] : qps_)
      if (!q->closed && q->attr.path_mig_state == mig_state::armed && q->attr.av.port == port && q->attr.alt_av.port != port) migrate_path(*q);
  }
  bool port_up(std::size_t port) const { return port < ports_.size() && !port_down_[port]; }

 protected:
  /// After modify_qp gave q path_mig_state (it had `was`): REARM (or ARMED) arms the alternate
  /// path it holds; MIGRATED while armed moves it there now (software-initiated migration).
  void set_migration(qp_context& q, mig_state was) {
    if (!q.is(qp_type::rc) && !q.is(qp_type::uc)) {
      q.attr.path_mig_state = mig_state::migrated;
      return;
    }
    if (q.attr.path_mig_state == mig_state::rearm) q.attr.path_mig_state = mig_state::armed;
    if (q.attr.path_mig_state == mig_state::migrated && was == mig_state::armed) {
      q.attr.path_mig_state = mig_state::armed;
      migrate_path(q);
      return;
    }
    if (q.attr.path_mig_state == mig_state::armed) q.quiet_timeouts = 0, q.una_at_timeout = q.req ? q.req->una() : 0;
    if (q.attr.path_mig_state == mig_state::armed && q.attr.av.port < ports_.size() && port_down_[q.attr.av.port]) migrate_path(q);
  }
  /// An armed QP moves to its alternate path: the alternate becomes its path, it is MIGRATED,
  /// IBV_EVENT_PATH_MIG is raised, and its requester sends again from its oldest unacknowledged
  /// PSN on the new path (what the old one lost; the responder acknowledges duplicates again).
  void migrate_path(qp_context& q) {
    if (q.attr.path_mig_state != mig_state::armed) return;
    q.attr.av = q.attr.alt_av;
    q.attr.timeout = q.attr.alt_timeout;
    q.attr.path_mig_state = mig_state::migrated;
    store_context(q);
    q.quiet_timeouts = 0;
    events_.push_back({event_type::path_migrated, q.qpn});
    ++stats_.path_migrations;
    if (q.req) run_sender(q, [&](flow::qp_sink& out) { (void)q.req->moved(now_, out); });
  }
  /// DCQCN holds q's requests back (its rate machine is below line rate).
  static bool paced(const qp_context& q) { return q.rp && q.rp->state() != flow::rp_state::line_rate; }
  bool wants_work(const qp_context& q) const {
    // a classed QP's requests are work only until it waits in its class (take_frame sends them)
    const bool due = sender_wants(q) && (!paced(q) || q.tx_next <= now_) && !(classed(q) && q.tx_waiting);
    if (due || (q.resp && q.resp->wants_to_send())) return true;
    if (q.dct && q.dct->wants_to_send()) return true;
    return (!q.sends.empty() && q.sends.front().done) || (!q.recvs.empty() && q.recvs.front().done);
  }
  /// The port q's next request packet leaves from: a DC initiator's, its next request's address
  /// handle's (transmit() sends it there); any other QP's, q.port().
  std::size_t tx_port(const qp_context& q) const {
    if (q.is(qp_type::dci))
      if (const address_vector* a = next_ah(q)) return a->port;
    return q.port();
  }
  bool tx_room(const qp_context& q) const {
    const std::size_t p = tx_port(q);
    return p < ports_.size() && ports_[p].room() && parked_.size() < cfg_.tx_queue;  // (frames on the bus count)
  }
  /// Request packets one call of q's send-side machine may build: what its port still takes
  /// (port::request_room), 0 without room.
  std::size_t packet_room(const qp_context& q) const {
    const requester_t* r = q.sender();
    return r && tx_room(q) ? ports_[tx_port(q)].request_room(r->config().mtu) : 0;
  }
  /// Lets q's machines send while its port has room; then fetches and reports a drained SQD.
  void pump(qp_context& q) {
    for (int guard = 0; guard < 1024 && tx_room(q); ++guard) {
      if ((q.resp && q.resp->wants_to_send()) || (q.dct && q.dct->wants_to_send())) {
        scratch a(*this);
        q.resp ? q.resp->pump(a.out()) : q.dct->pump(a.out());
        handle(q, a.out(), nullptr, nullptr);
      } else if (sender_wants(q) && classed(q)) {
        sender_pump(q);  // held: its completions only
        if (sender_wants(q) && !q.tx_waiting && (!paced(q) || q.tx_next <= now_)) {
          q.tx_waiting = true;
          sched_[q.port()]->enqueue(q.qpn, class_of(q));
        }
        break;
      } else if (q.req && q.req->wants_to_send() && paced(q)) {
        if (q.tx_next > now_) break;
        send_one(q);
      } else if (sender_wants(q)) {
        sender_pump(q);
      } else {
        break;
      }
    }
    fetch_sends(q);
    if (q.state == qp_state::sqd && !q.drained_told && (!q.sender() || q.sender()->quiescent())) {
      q.drained_told = true;
      events_.push_back({event_type::sq_drained, q.qpn});
    }
  }

  // -- one pipeline for all ports, each way (spec/qos.md §9) ------------------------------------------
  /// Whether port `port` may hand a frame to its wire now (the transmit pipeline's arbiter).
  bool may_send(std::size_t port) const {
    return tx_pipe_.may(port, ports_.size(), now_, [&](std::size_t o) { return ports_[o].pending() && !ports_[o].acks_held(now_); });
  }
  void through_pipeline(std::size_t port, std::size_t bytes) {
    if (tx_pipe_.enabled()) tx_pipe_.passed(port, bytes, now_);
  }
  /// Frame `frame` from port `port` passes the receive pipeline now.
  void pass(std::size_t port, std::span<const std::byte> frame) {
    rx_pipe_.passed(port, frame.size(), now_);
    ++stats_.pipeline_rx_frames;
    stats_.pipeline_rx_bytes += frame.size();
    admit(port, frame);
  }
  /// Runs the receive pipeline to now: the ports' waiting frames pass, round robin between the
  /// ports, while the pipeline allows.
  void run_rx() {
    if (rx_running_ || !rx_pipe_.enabled()) return;
    rx_running_ = true;
    while (rx_pipe_.eligible(now_)) {
      const auto o = rx_pipe_.next(ports_.size(), [&](std::size_t k) { return ports_[k].rx_waiting() > 0; });
      if (!o) break;
      frame_bytes f = ports_[*o].take_held();
      pass(*o, f);
      ports_[*o].recycle(std::move(f));
    }
    rx_running_ = false;
  }
  /// A frame past the receive pipeline: placed first, in its turn on the host bus (a frame that
  /// is not for this device never takes the bus), then delivered.
  void admit(std::size_t port, std::span<const std::byte> frame) {
    if (!bus_.enabled()) return deliver(port, frame);
    const port::rx_job j = ports_[port].placement_of(frame);
    if (j.drop != rx_drop::none) return count(j.drop);
    if (arriving_.size() >= std::max<std::size_t>(cfg_.rx_queue, 1)) {
      ++stats_.dropped_rx_full;
      return;
    }
    const std::uint64_t id = next_job_++;
    placements_.submit(j.flow, j.tc, j.bytes, id, now_);
    arriving_.emplace(id, arriving{static_cast<std::uint8_t>(port), frame_bytes(frame.begin(), frame.end())});
    run_placements();
  }
  void count(rx_drop d) {
    if (d == rx_drop::bad_frame) ++stats_.dropped_bad_frame;
    if (d == rx_drop::not_mine) ++stats_.dropped_not_mine;
  }

  // -- traffic classes (spec/qos.md §4) ----------------------------------------------------------------
  /// Classed request packets a port may have on the host bus at once.
  static constexpr std::size_t classed_on_bus = 4;
  /// Whether port `port`'s class scheduler may build a packet now: it has one, no request frame
  /// waits for the wire, and (with a host bus) fewer than classed_on_bus gathers are on the bus,
  /// the pipeline that hides the bus's latency.
  bool may_fill(std::size_t port) const {
    return port < sched_.size() && sched_[port] && !ports_[port].requests_queued() && ports_[port].requests_on_bus() < classed_on_bus;
  }
  /// Whether q's requests go through its port's class scheduler.
  bool classed(const qp_context& q) const { return (q.req || q.dci) && q.port() < sched_.size() && sched_[q.port()]; }
  /// q's traffic class: its address vector's SL and traffic class through its port's model. A
  /// UD QP's or DC initiator's is its next packet's: that work request's address handle's (a
  /// DC connect's, the request it connects for).
  std::uint8_t class_of(const qp_context& q) const {
    if (q.port() >= ports_.size()) return 0;
    const address_vector* av = &q.attr.av;
    if (q.is(qp_type::ud) || q.is(qp_type::dci))
      if (const address_vector* a = next_ah(q)) av = a;
    return ports_[q.port()].model().class_of(av->sl, av->traffic_class);
  }
  /// The address handle of the work request q's next request packet belongs to (a DC
  /// connect's: the request it connects for), or nullptr.
  const address_vector* next_ah(const qp_context& q) const {
    if (const requester_t* rq = q.sender())
      if (const auto i = rq->sending())
        for (std::size_t k = *i; k < rq->queued(); ++k)
          if (const send_record* r = rq->at(k).wr.id < flow::dc_internal_id ? q.send_of(rq->at(k).wr.id) : nullptr) return ah(r->wqe.ah);
    return nullptr;
  }
  /// With traffic classes and no request frame waiting for port `port`'s wire: the next packet
  /// of the QP the class scheduler chooses is built now (its payload gathered now).
  void fill(std::size_t port) {
    if (!may_fill(port)) return;
    class_scheduler& s = *sched_[port];
    for (int guard = 0; guard < 4096; ++guard) {
      const auto n = s.next(now_);
      if (!n) return;
      const auto it = qps_.find(n->second);
      if (it == qps_.end()) continue;
      qp_context& q = *it->second;
      q.tx_waiting = false;
      const auto due = [&] { return classed(q) && !q.closed && q.port() == port && sender_wants(q) && (!paced(q) || q.tx_next <= now_); };
      if (!due()) continue;
      const std::uint64_t bytes = send_one(q);
      if (due()) {
        q.tx_waiting = true;
        s.enqueue(q.qpn, class_of(q));
      }
      if (bytes) {
        s.sent(n->first, bytes, now_);
        return;
      }
    }
  }

  // -- congestion control (spec/qos.md §3) ------------------------------------------------------------
  /// One request packet of a held QP (paced, or classed): a paced one's next may go after its
  /// bytes at the QP's rate. Returns the bytes of its frames.
  std::uint64_t send_one(qp_context& q) {
    scratch a(*this);
    // room for one packet beside the requester's timer actions
    flow::qp_sink one{std::span<flow::qp_action_t>(a.storage()).first(requester_t::timer_room + 1)};
    const std::uint64_t before = stats_.bytes_out;
    run_sender_into(q, one, [&](flow::qp_sink& out) {
      q.req ? q.req->hold(false) : q.dci->hold(false);
      q.req ? q.req->pump(now_, out) : q.dci->pump(now_, out);
    });
    const std::uint64_t bytes = stats_.bytes_out - before;
    if (!q.req && !q.dci) return bytes;  // it failed on the way
    if (paced(q)) {
      q.tx_next = std::max(q.tx_next, now_) + flow::wire_time(bytes, std::max<std::uint64_t>(q.rp->rate(), 1));
      rate_actions([&](flow::rp_sink& out) { return q.rp->on_sent(bytes, now_, out); });
    }
    pace(q);
    return bytes;
  }
  /// The requester is held while the rate machine is below line rate, while its port schedules
  /// by class, or while its port has no room (run_sender_into sets this before every call that
  /// may send). A requester never builds a packet its port would drop: its timers, ACKs and posts
  /// wait for the wire as its pumps do, and none of what it counts as sent is lost in the device.
  void pace(qp_context& q) const {
    const bool full = packet_room(q) == 0;
    if (q.req) q.req->hold(paced(q) || classed(q) || full);
    if (q.dci) q.dci->hold(classed(q) || full);
  }
  /// q's send-side machine (requester or DC initiator) has packets or completions to give.
  static bool sender_wants(const qp_context& q) { return (q.req && q.req->wants_to_send()) || (q.dci && q.dci->wants_to_send()); }
  void sender_pump(qp_context& q) {
    run_sender(q, [&](flow::qp_sink& out) { q.req ? q.req->pump(now_, out) : q.dci->pump(now_, out); });
  }
  template <class F>
  static void rate_actions(F&& f) {
    std::array<flow::rp_action_t, flow::dcqcn_rp::min_room> st{};
    flow::rp_sink out{std::span<flow::rp_action_t>(st)};
    (void)f(out);  // the machine keeps its rate and deadlines: rate() and deadline() are read
  }
  void fire_rate_timers(qp_context& q) {
    for (const auto k : {flow::rp_timer::decrease, flow::rp_timer::alpha, flow::rp_timer::increase})
      if (const auto d = q.rp->deadline(k); d && *d <= now_) rate_actions([&](flow::rp_sink& out) { return q.rp->on_timer(k, now_, out); });
    pace(q);
  }
  /// A CNP for q: its reaction point (started now if this is the first) cuts its rate.
  void congestion_notified(qp_context& q) {
    ++stats_.cnps_received;
    if (!cfg_.congestion.react || !q.is(qp_type::rc) || !q.req) return;
    if (!q.rp) q.rp.emplace(cfg_.congestion.dcqcn);
    rate_actions([&](flow::rp_sink& out) { return q.rp->on_cnp(now_, out); });
    pace(q);
  }
  /// A request for RC QP q arrived marked CE: a CNP to its peer, unless one went within the
  /// interval.
  void notify_congestion(qp_context& q) {
    ++stats_.ce_received;
    if (!cfg_.congestion.notify || !flow::cnp_due(q.last_cnp, now_, cfg_.congestion.cnp_interval)) return;
    flow::packet c{};
    c.opcode = ib::opcode::cnp;
    c.dest_qp = q.attr.dest_qp_num;
    c.p_key = 0xFFFF;
    c.becn = true;  // RoCEv2 annex A17: a CNP sets BECN
    const address_vector& av = q.attr.av;
    if (av.port >= ports_.size() || !ports_[av.port].accepts(false)) return;
    if (ports_[av.port].send(c, q.qpn, av, 0, std::nullopt, now_, stats_, [](auto&&) { return true; })) ++stats_.cnps_sent;
    if (ports_[av.port].has_staged()) stage(av.port);
  }

  // -- actions ------------------------------------------------------------------------------------
  /// Carries out the machines' actions. `in` is the packet they answer and `rx` where it came
  /// from (both null when a timer or a pump made them).
  void handle(qp_context& q, const flow::qp_sink& out, const flow::packet* in, const rx_context* rx) {
    const std::span<const std::byte> payload = in ? in->payload : std::span<const std::byte>{};
    for (const auto& act : out) {
      if (const auto* t = std::get_if<flow::qp_action::transmit>(&act)) transmit(q, t->pkt);
      else if (const auto* c = std::get_if<flow::qp_action::complete>(&act)) complete_send(q, *c);
      else if (const auto* p = std::get_if<flow::qp_action::place>(&act)) place(q, *p, payload, rx);
      else if (const auto* r = std::get_if<flow::qp_action::receive>(&act)) complete_receive(q, *r, in, rx);
      else if (const auto* d = std::get_if<flow::qp_action::read_data>(&act)) place_read(q, *d, payload);
      else if (const auto* w = std::get_if<flow::qp_action::write_back>(&act)) start_write_back(q, *w);
      else if (const auto* e = std::get_if<flow::qp_action::request_error>(&act)) request_failed(q, *e);
    }
  }
  /// A peer's READ_AS_WRITE: the device's own RDMA WRITE of the data from this QP's send queue
  /// (after what is queued there); its completion tells the responder (complete_send).
  void start_write_back(qp_context& q, const flow::qp_action::write_back& wb) {
    send_record r;
    r.seq = q.next_seq++;
    r.wqe.opcode = static_cast<std::uint8_t>(wr_opcode::rdma_write);
    r.wqe.num_sge = 1;
    r.wqe.sg[0] = {wb.va, wb.dmalen, wb.rkey};  // the responder checked (rkey, va, dmalen) for remote read
    r.wqe.remote_addr = wb.sink_va;
    r.wqe.rkey = wb.sink_rkey;
    r.op = wc_opcode::rdma_write;
    r.signaled = false;
    r.write_back_psn = wb.psn;
    q.sends.push_back(r);
    const flow::work_request wr{.id = r.seq, .op = flow::wr_op::write, .length = wb.dmalen, .remote_va = wb.sink_va, .rkey = wb.sink_rkey};
    flow::step_result s{-1, flow::errc::queue_full};
    if (q.req && q.req->queue_room() > 0) run_sender(q, [&](flow::qp_sink& out) { s = q.req->post(wr, now_, out); });
    if (!s.ok())  // no send queue to carry it (a QP not in RTS, or a full machine): refused
      if (send_record* rec = q.send_of(r.seq); rec && !rec->done) {
        rec->done = true;
        rec->status = wc_status::local_qp_operation_error;
        write_back_done(q, wb.psn, false);
      }
  }
  /// Tells the responder its READ_AS_WRITE of psn was written back (or not) and sends what waited.
  void write_back_done(qp_context& q, std::uint32_t psn, bool ok) {
    if (!q.resp) return;
    q.resp->write_back_done(psn, ok);
    scratch a(*this);
    q.resp->pump(a.out());
    handle(q, a.out(), nullptr, nullptr);
  }
  void complete_send(qp_context& q, const flow::qp_action::complete& c) {
    if (c.wr_id >= flow::dc_internal_id) {  // a DCI's own connect / disconnect
      if (c.status != flow::wc_status::success && c.status != flow::wc_status::flushed) q.connect_error = status_of(c.status);
      return;
    }
    send_record* r = q.send_of(c.wr_id);
    if (!r || r->done) return;
    r->done = true;
    r->status = status_of(c.status);
    if (r->write_back_psn) {  // the device's own WRITE for a peer's READ_AS_WRITE
      write_back_done(q, *r->write_back_psn, r->status == wc_status::success);
      if (r->status != wc_status::success && r->status != wc_status::flushed) to_error(q);
      return;
    }
    // The request a failed connect was for reports the connect's error, not a flush.
    if (r->status == wc_status::flushed && q.connect_error) r->status = *std::exchange(q.connect_error, std::nullopt);
    if (r->status == wc_status::success && (c.op == flow::wr_op::compare_swap || c.op == flow::wr_op::fetch_add)) {
      std::array<std::byte, 8> v;
      wire::store_le64(v.data(), c.orig);
      if (!dma_.gather_in(q.init.pd, r->wqe, 0, v)) r->status = wc_status::local_protection_error;
    }
    if (r->status != wc_status::success && r->status != wc_status::flushed) send_error(q);
  }
  void place_read(qp_context& q, const flow::qp_action::read_data& d, std::span<const std::byte> payload) {
    send_record* r = q.send_of(d.wr_id);
    if (!r || payload.size() < d.length) return;
    if (!dma_.gather_in(q.init.pd, r->wqe, d.offset, payload.first(d.length)))
      r->vendor_err = static_cast<std::uint32_t>(errc::no_access_right), r->status = wc_status::local_protection_error;
  }
  void place(qp_context& q, const flow::qp_action::place& p, std::span<const std::byte> payload, const rx_context* rx) {
    if (payload.size() < p.length) return;
    const auto data = payload.first(p.length);
    if (!p.to_receive) {
      if (rx && rx->preplaced == p) return;  // placed while its ICRC was computed
      std::size_t done = 0;
      dma_.move(p.rkey, p.va, data.size(), {data_direction::inbound, 0, p.offset == 0}, [&](std::byte* h, std::size_t k) {
        std::memcpy(h, data.data() + done, k);
        done += k;
      });
      return;
    }
    recv_record* r = completion_unit::bind(q, p.msn, mem_);
    if (!r || r->status != wc_status::success) return;
    if (!dma_.scatter(q.init.pd, r->wqe, p.offset + q.grh_room(), data, q.grh_room())) r->status = wc_status::local_protection_error;
  }
  void complete_receive(qp_context& q, const flow::qp_action::receive& rc, const flow::packet* in, const rx_context* rx) {
    recv_record* r = completion_unit::bind(q, rc.msn, mem_);
    if (!r) return;
    r->done = true;
    r->byte_len = rc.bytes + q.grh_room();
    r->with_imm = rc.with_imm;
    r->imm = rc.imm;
    r->op = rc.with_imm && in && in->info().is(ib::op_class::write) ? wc_opcode::recv_rdma_with_imm : wc_opcode::recv;
    r->src_qp = in ? in->src_qp : 0;
    // UD over RoCE: the GRH space holds the packet's network header (ib/gid.hpp).
    if (q.is(qp_type::ud) && rx && !rx->cells()) {
      std::array<std::byte, ib::grh_size> grh;
      ib::write_grh(grh, rx->ip, rx->v6);
      r->grh = r->status == wc_status::success && dma_.scatter(q.init.pd, r->wqe, 0, grh, q.grh_room());
    }
  }
  /// A responder NAKed request e with a fatal error (RC, DCT): the QP goes to ERR, with the
  /// event verbs reports it by; a SEND's receive completes with the local error.
  void request_failed(qp_context& q, const flow::qp_action::request_error& e) {
    if (q.state == qp_state::err || !(q.is(qp_type::rc) || q.is(qp_type::dct))) return;
    const bool too_long = e.why == flow::invalid_reason::receive_length, unusable = e.nak == ib::nak_code::remote_operational_error;
    events_.push_back({e.nak == ib::nak_code::invalid_request ? event_type::qp_request_error : event_type::qp_access_error, q.qpn});
    if (too_long || unusable) {
      // the receive the SEND was for completes with the error (an SRQ's is taken from it)
      if (q.srq && std::none_of(q.recvs.begin(), q.recvs.end(), [](const recv_record& r) { return !r.done; }))
        (void)completion_unit::bind(q, 0, mem_);
      for (recv_record& r : q.recvs)
        if (!r.done) {
          r.done = true, r.status = too_long ? wc_status::local_length_error : wc_status::local_protection_error;
          break;
        }
    }
    to_error(q);
  }

  // -- transmit -----------------------------------------------------------------------------------
  /// The address vector a packet of q goes to (UD / DCI requests: the work request's AH;
  /// responses: back to where the request came from).
  const address_vector* destination(qp_context& q, const flow::packet& p) {
    if (q.is(qp_type::rc) || q.is(qp_type::uc)) return &q.attr.av;
    if (p.info().request) {
      if (const send_record* r = q.send_of(p.wr_id)) {
        q.dc_ah = r->wqe.ah;
        return ah(r->wqe.ah);  // (a destroyed handle keeps its address)
      }
      // A DCI's disconnect goes to the target it served; its connect, where the request queued
      // with it goes (the initiator queues a connect together with its target's first request).
      const requester_t* rq = q.sender();
      if (!rq) return nullptr;
      if (!p.se)
        for (std::size_t i = 0; i < rq->queued(); ++i)
          if (rq->at(i).wr.id == p.wr_id) {
            for (std::size_t j = i + 1; j < rq->queued(); ++j)
              if (const send_record* d = q.send_of(rq->at(j).wr.id); d && rq->at(j).wr.id < flow::dc_internal_id) {
                q.dc_ah = d->wqe.ah;
                break;
              }
            break;
          }
      return ah(q.dc_ah);
    }
    const auto it = reply_to_.find(reply_key(q.qpn, p.dest_qp));
    return it == reply_to_.end() ? nullptr : &it->second;
  }
  const address_vector* ah(std::uint32_t n) const { return n < ahs_.avs.size() ? &ahs_.avs[n] : nullptr; }
  static std::uint64_t reply_key(std::uint32_t qpn, std::uint32_t peer) { return std::uint64_t{qpn} << 32 | peer; }
  void transmit(qp_context& q, flow::packet p) {
    if (q.state == qp_state::err) return;
    const address_vector* av = destination(q, p);
    if (!av) return;
    const ib::opcode_info& op = p.info();
    address_vector on_port;  // UD: a send leaves from the QP's port, whatever its handle's (as mlx5)
    if (q.is(qp_type::ud) && av->port != q.port()) {
      on_port = *av;
      on_port.port = q.port();
      av = &on_port;
    }
    if (av->port >= ports_.size()) return;
    port& ps = ports_[av->port];
    // UD: the DETH names the sending QP; DC: the DCI (spec/roce.md §5)
    if ((q.is(qp_type::ud) || q.is(qp_type::dci)) && op.request) p.src_qp = q.qpn;
    // MigReq (IBTA 17.2.8): set once a QP with an alternate path has migrated to it. A QP never
    // given one sends 0, as rxe does (spec/qos.md §9).
    p.mig_req = q.apm && q.attr.path_mig_state == mig_state::migrated;
    // The payload: a request's from its work request; a READ response's from memory.
    const std::uint32_t len = op.payload ? p.length : 0;
    const send_record* rec = op.request ? q.send_of(p.wr_id) : nullptr;
    const bool from_memory = op.is(ib::op_class::read_response);
    if (from_memory && mem_.check(p.rkey, p.va, len, {q.init.pd, access::remote_read}) != errc{}) return;  // no longer readable
    if (op.request && op.payload && !rec) return;
    if (!ps.accepts(op.request)) {
      ++stats_.dropped_tx_full;
      return;
    }
    std::optional<std::uint16_t> sport;
    if (q.sessions && op.request) {  // a session QP's message: a session, and its sequence number
      const auto e = ps.cells() ? std::nullopt : q.sessions->out.pick();
      if (!e) {
        ++stats_.session_not_sent;
        return;
      }
      q.sessions->out.completed(e->session);  // UD: done when sent
      p.opcode = ib::opcode::ud_send_only_with_immediate;
      p.imm = q.sessions->out.sequence();
      sport = e->tuple.sport;
    }
    (void)ps.send(p, q.qpn, *av, len, sport, now_, stats_, [&](auto&& f) {
      if (!from_memory) return dma_.gather(q.init.pd, rec->wqe, p.offset, len, access::none, f);
      dma_.move(p.rkey, p.va, len, {data_direction::outbound, p.read_length, p.offset == 0}, f);
      return true;
    });
    if (ps.has_staged()) stage(av->port);
  }

  // -- the host bus (spec/qos.md §8) ---------------------------------------------------------------
  /// Port `port`'s staged request frames become jobs on the bus, their frames parked.
  void stage(std::uint8_t port) {
    while (ports_[port].has_staged()) {
      port::staged s = ports_[port].take_staged();
      const std::uint64_t id = next_job_++;
      // a QP's responses are a flow of their own beside its requests (QPNs have 24 bits)
      bus_.submit(s.response ? s.qpn | 1u << 24 : s.qpn, s.tc, s.bytes, id, now_);
      parked_.emplace(id, parked{port, std::move(s)});
    }
    run_bus();
  }
  /// Runs the gathers' bus to now: frames whose gathers are done and whose latency has passed
  /// go to their port's queue for the wire.
  void run_bus() {
    bus_.advance(now_, [&](std::uint64_t id, time_ns ready) { landing_.emplace(ready, id); });
    while (!landing_.empty() && landing_.begin()->first <= now_) {
      const auto it = parked_.find(landing_.begin()->second);
      landing_.erase(landing_.begin());
      if (it == parked_.end()) continue;
      ports_[it->second.port].release(std::move(it->second.job), now_);
      parked_.erase(it);
    }
  }
  /// Runs the placements' bus to now: arrived frames whose placements are done (and whose
  /// latency has passed) go to their QPs. Called only where no machine is running (progress,
  /// receive): a frame delivered here may make its QP answer, which stages gathers.
  void run_placements() {
    if (placing_) return;
    placing_ = true;
    const auto land = [&](std::uint64_t id, time_ns ready) { placed_.emplace(ready, id); };
    for (placements_.advance(now_, land); !placed_.empty() && placed_.begin()->first <= now_; placements_.advance(now_, land)) {
      const auto in = arriving_.find(placed_.begin()->second);
      placed_.erase(placed_.begin());
      if (in == arriving_.end()) continue;
      const arriving a = std::move(in->second);
      arriving_.erase(in);
      deliver(a.port, a.frame);
    }
    placing_ = false;
  }

  // -- receive ------------------------------------------------------------------------------------
  /// Cut-through (port::receive): the placement q's responder would make of WRITE packet p now,
  /// its payload copied there by `copy`; nullopt when it would not place it now.
  template <class Copy>
  std::optional<flow::qp_action::place> cut_through(const flow::packet& p, const rx_context& rx, Copy& copy) {
    qp_context* q = find_qp(p.dest_qp);
    if (!q || !q->resp || q->sessions || q->state == qp_state::err || !from_peer(*q, p, rx)) return std::nullopt;
    const auto pl = q->resp->placement(p);  // (the memory port is only asked: no fault is raised)
    if (!pl || pl->to_receive || pl->length != p.payload.size()) return std::nullopt;
    dma_.move(pl->rkey, pl->va, pl->length, {data_direction::inbound, 0, pl->offset == 0}, copy);
    return pl;
  }
  /// A packet a port accepted: a session QP's requests are resequenced first (RoCE); the rest
  /// goes to its QP.
  void arrive(const flow::packet& p, const rx_context& rx) {
    if (qp_context* q = session_qps_ && !rx.cells() ? find_qp(p.dest_qp) : nullptr; q && q->sessions && p.info().request) {
      receive_session(*q, p, rx);
      return;
    }
    dispatch(p, rx);
  }
  /// A message for a session QP: resequenced first; delivered ones go to the QP in order, each
  /// with the context of its own frame.
  void receive_session(qp_context& q, const flow::packet& p, const rx_context& rx) {
    if (!p.info().is(ib::op_class::immediate)) {  // no sequence number: not a session message
      ++stats_.dropped_by_qp;
      return;
    }
    session_qp& sq = *q.sessions;
    std::size_t slot = 0;
    while (slot < sq.held.size() && !sq.held[slot].empty()) ++slot;
    if (slot == sq.held.size()) sq.held.emplace_back();
    sq.held[slot].assign(rx.frame.begin(), rx.frame.end());
    flow::action_list<flow::session_action_t, decltype(sq.in)::min_room> acts;
    (void)sq.in.on_message({rx.tuple, p.dest_qp, p.imm, slot}, acts.out);
    const std::uint32_t qpn = q.qpn;
    port& ps = ports_[rx.from.port];
    for (const auto& a : acts.out) {
      if (const auto* d = std::get_if<flow::session_action::deliver>(&a)) {
        frame_bytes f = std::move(sq.held[d->handle]);
        sq.held[d->handle] = {};
        flow::packet hp;
        rx_context hrx;
        if (ps.reparse(f, hp, hrx) && find_qp(qpn)) dispatch(hp, hrx);
        ps.recycle(std::move(f));
        continue;
      }
      const auto& dr = std::get<flow::session_action::drop>(a);
      switch (dr.why) {
        case flow::errc::unknown_tuple: ++stats_.session_unknown_tuple; break;
        case flow::errc::foreign_group: ++stats_.session_foreign; break;
        case flow::errc::duplicate: ++stats_.session_duplicate; break;
        default: ++stats_.session_window_full; break;
      }
      ps.recycle(std::move(sq.held[dr.handle]));
      sq.held[dr.handle] = {};
    }
  }
  /// RC and UC take packets from their peer only (rxe's check_addr): a RoCE packet's source
  /// must be the QP's destination GID and its destination the QP's source GID, on the QP's
  /// port; a cell packet's source MAC the QP's destination MAC (unless that is the broadcast
  /// address) and its source WQP the QP's destination QP.
  bool from_peer(const qp_context& q, const flow::packet& p, const rx_context& rx) const {
    if (!q.is(qp_type::rc) && !q.is(qp_type::uc)) return true;
    return from_path(q, q.attr.av, p, rx);
  }
  /// Whether the packet came along path `av` of connected QP q.
  bool from_path(const qp_context& q, const address_vector& av, const flow::packet& p, const rx_context& rx) const {
    if (rx.from.port != av.port || av.port >= ports_.size()) return false;
    if (rx.cells()) return (av.dmac == wire::broadcast_mac || rx.from.dmac == av.dmac) && p.src_qp == q.attr.dest_qp_num;
    const ib::gid* own = ports_[av.port].config().gid_at(av.sgid_index);
    return own && rx.to == *own && rx.from.dgid == av.dgid;
  }
  /// Hands a packet to the QP it names (spec/rnic.md §7's check order).
  void dispatch(const flow::packet& p, const rx_context& rx) {
    if (!p.known()) {
      ++stats_.dropped_by_qp;
      return;
    }
    qp_context* q = find_qp(p.dest_qp, true);
    if (!q) {
      ++stats_.dropped_no_qp;
      return;
    }
    const bool request = p.info().request;
    if (p.info().is(ib::op_class::cnp)) {
      if (!q->closed && from_peer(*q, p, rx)) congestion_notified(*q);
      return;
    }
    if (q->closed) {  // lingering: duplicates only (device_config::linger)
      if (!request || !q->resp || !ib::psn_before(p.psn, q->resp->expected_psn())) {
        ++stats_.dropped_no_qp;
        return;
      }
    }
    const bool takes = request ? q->state != qp_state::reset && q->state != qp_state::init && q->state != qp_state::err && (q->resp || q->dct)
                               : (q->state == qp_state::rts || q->state == qp_state::sqd || q->state == qp_state::sqe) && q->sender();
    if (!takes) {
      ++stats_.dropped_no_qp;
      return;
    }
    if (!from_peer(*q, p, rx)) {
      // armed, its peer moved to the alternate path: so does it (spec/qos.md §9)
      if (q->attr.path_mig_state != mig_state::armed || q->closed || !from_path(*q, q->attr.alt_av, p, rx)) {
        ++stats_.dropped_wrong_source;
        return;
      }
      migrate_path(*q);
    }
    if (q->closed) q->last_heard = now_;
    if (request && q->is(qp_type::rc) && !rx.cells() && rx.ip.size() >= 2 && (ib::traffic_class_at(rx.ip.data(), rx.v6) & 3) == 3)
      notify_congestion(*q);
    if (request) {
      if (q->is(qp_type::dct)) reply_to_[reply_key(q->qpn, p.dc_initiator())] = rx.from;
      if (q->srq) {
        const std::uint32_t ready = completion_unit::receives_ready(*q);
        q->resp ? q->resp->set_receives(ready) : q->dct->set_receives(ready);
      }
      scratch a(*this);
      if (q->resp && q->resp->refusal(a.out()) != flow::errc{}) {  // its response queue is full: dropped, resent later
        ++stats_.dropped_by_qp;
        return;
      }
      const flow::step_result s = q->resp ? q->resp->on_packet(p, a.out()) : q->dct->on_packet(p, a.out());
      bool refused = !s.ok();
      for (const auto& act : a.out()) refused = refused || std::holds_alternative<flow::qp_action::dropped>(act);
      if (refused) ++stats_.dropped_by_qp;
      handle(*q, a.out(), &p, &rx);
      // The peer's WRITE on this QP may be carrying our READ_AS_WRITE: progress for its timer.
      if (q->req && p.info().is(ib::op_class::write)) {
        scratch k(*this);
        q->req->peer_progress(now_, k.out());
      }
    } else {
      run_sender(*q, [&](flow::qp_sink& out) { q->req ? q->req->on_packet(p, now_, out) : q->dci->on_packet(p, now_, out); }, &p);
    }
    pump(*q);
    write_completions(*q);
  }

  device_config cfg_;
  time_ns now_ = 0;
  device_counters stats_{};
  std::vector<async_event> events_;
  memory_table mem_;
  dma dma_;
  completion_unit cq_;
  std::vector<port> ports_;
  std::vector<std::optional<class_scheduler>> sched_;  ///< per port: its class scheduler, with a class model
  // the context cache (device_config::contexts): send jobs in doorbell order (their QPs), the
  // contexts held (most recent first), the one loading and until when
  std::deque<std::uint32_t> jobs_;
  std::list<std::uint32_t> lru_;
  std::unordered_map<std::uint32_t, packed_qpc> table_;   ///< the context table: host memory
  std::unordered_map<std::uint32_t, cached_qpc> held_;    ///< the cache's entries, decoded
  std::unordered_map<std::uint32_t, std::list<std::uint32_t>::iterator> cached_;
  std::optional<std::uint32_t> loading_;
  time_ns loading_until_ = 0;
  std::vector<std::uint32_t> seen_;  ///< serve_jobs' scratch
  std::vector<std::uint32_t> marks_;  ///< the context cache: each doorbell's SQ producer index
  // the host bus (device_config::bus): request frames parked while their gathers wait and run,
  // by job; finished gathers by the time their frames are ready
  struct parked {
    std::uint8_t port;
    port::staged job;
  };
  struct arriving {
    std::uint8_t port;
    frame_bytes frame;
  };
  host_bus bus_{cfg_.bus}, placements_{cfg_.bus};
  std::unordered_map<std::uint64_t, arriving> arriving_;
  std::multimap<time_ns, std::uint64_t> placed_;  ///< placements done: when their frames reach their QPs
  bool placing_ = false;
  pipeline tx_pipe_{cfg_.pipeline_rate, cfg_.pipeline_packets}, rx_pipe_{cfg_.pipeline_rate, cfg_.pipeline_packets};
  bool rx_running_ = false;  ///< run_rx() is passing frames (a frame arriving meanwhile waits)
  std::vector<bool> port_down_ = std::vector<bool>(cfg_.ports.size());
  std::uint64_t next_job_ = 1;
  std::unordered_map<std::uint64_t, parked> parked_;
  std::multimap<time_ns, std::uint64_t> landing_;
  std::unordered_map<std::uint32_t, std::unique_ptr<qp_context>> qps_;
  std::uint32_t next_qpn_ = 0;  ///< the next QPN to try, from cfg_.qpn_first
  std::size_t lingering_ = 0;
  ah_table ahs_;
  std::vector<std::unique_ptr<srq_context>> srqs_;
  std::vector<std::uint32_t> doorbells_, srq_doorbells_;
  std::unordered_map<std::uint64_t, address_vector> reply_to_;  ///< DCT: where each DCI's responses go
  std::vector<std::unique_ptr<actions_t>> lists_;
  std::size_t depth_ = 0;
  std::unique_ptr<session_table_t> sessions_ = std::make_unique<session_table_t>();  // (stable for session_group)
  std::size_t session_qps_ = 0;  ///< QPs with sessions: arrive() looks a packet's QP up first only then
};

}  // namespace pushwire::rnic
