// The reference software RNIC (spec/rnic.md): verbs-shaped objects (ports, protection domains,
// memory regions and keys, completion queues, queue pairs, shared receive queues, address
// handles) over the flow/ machines, which own every transport rule (PSNs, ACKs, retries, RNR,
// page-fault pauses, DC connects). It is built from parts, each a header of its own:
//   config.hpp      its configuration, events and counters
//   context.hpp     the QP context and its completion records
//   completion.hpp  the completion unit: CQs, per-QP completion lists, binding receives
//   dma.hpp         the DMA engine: host memory through the key table, page faults
//   port.hpp        a port: frames out and in, in both framings; cut-through
//   engine.hpp      the QP engine: the machines, doorbells, timers, dispatch
//   device.hpp      this: the verbs
//
// Sans-IO like the machines: the device never reads a clock or a socket. receive() takes a frame
// that arrived on a port at a given time; take_frame() hands out what a port transmits;
// progress(now) fetches posted descriptors, fires due timers, serves due page faults, sends what
// the machines allow and writes completions; next_deadline() says when progress() next has
// timed work. One thread drives a device.
//
// Every verb that can fail returns an rnic::errc (or a result<T> holding one) and lists its codes
// under "Errors:" in its comment; spec/rnic.md §9 tabulates them from these comments.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include <pushwire/rnic/engine.hpp>

namespace pushwire::rnic {

class device : public qp_engine {
 public:
  /// Bytes of the UD receive buffer's head reserved for the GRH (verbs' convention).
  static constexpr std::uint32_t grh_size = ib::grh_size;
  static constexpr std::size_t max_sessions = rnic::max_sessions, session_window = rnic::session_window;
  using session_table_t = rnic::session_table_t;

  explicit device(device_config cfg = {}) : qp_engine(std::move(cfg)) {}

  // ---- protection domains ---------------------------------------------------------------
  /// A new protection domain. Errors: no_resources (max_pds exist).
  result<std::uint32_t> alloc_pd() {
    if (pds_.size() >= cfg_.max_pds) return errc::no_resources;
    const std::uint32_t pd = next_pd_++;
    pds_.push_back(pd);
    return pd;
  }
  /// Frees a protection domain. Errors: not_found (no such PD), busy (keys or QPs use it).
  errc dealloc_pd(std::uint32_t pd) {
    const auto it = std::find(pds_.begin(), pds_.end(), pd);
    if (it == pds_.end()) return errc::not_found;
    if (mem_.keys_of(pd) != 0) return errc::busy;
    for (const auto& [n, q] : qps_)
      if (!q->closed && q->init.pd == pd) return errc::busy;
    pds_.erase(it);
    return {};
  }

  // ---- memory ---------------------------------------------------------------------------
  /// Registers host bytes [addr, addr + length), addressed by their host addresses.
  /// Errors: not_found (no such PD), invalid_argument (a null addr with a length),
  /// no_resources (the key table is full).
  result<memory_region> reg_mr(std::uint32_t pd, void* addr, std::uint64_t length, access rights) {
    return reg_mr_iova(pd, addr, length, reinterpret_cast<std::uintptr_t>(addr), rights);
  }
  /// Registers host bytes [addr, addr + length), addressed from iova. Errors: not_found (no
  /// such PD), invalid_argument (a null addr with a length, iova + length past 2^64),
  /// no_resources (the key table is full).
  result<memory_region> reg_mr_iova(std::uint32_t pd, void* addr, std::uint64_t length, std::uint64_t iova, access rights) {
    if (!has_pd(pd)) return errc::not_found;
    const auto k = mem_.reg_direct(pd, addr, length, rights, iova);
    if (!k) return k.code();
    return memory_region{*k, *k, iova, length};
  }
  /// Registers bytes [addr, addr + length) of card `card`'s device memory (device_config::
  /// platform), addressed from iova: a key like reg_mr_iova's whose DMA goes P2P or proxied
  /// as the platform selects (spec/rnic.md §15). Errors: not_found (no such PD),
  /// invalid_argument (no such card, an invalid platform, a null addr with a length, iova +
  /// length past 2^64), no_resources (the key table is full).
  result<memory_region> reg_mr_card(std::uint32_t pd, std::uint8_t card, void* addr, std::uint64_t length, std::uint64_t iova,
                                    access rights) {
    if (!has_pd(pd)) return errc::not_found;
    if (!cfg_.platform.valid() || card >= cfg_.platform.card_count) return errc::invalid_argument;
    auto r = reg_mr_iova(pd, addr, length, iova, rights);
    if (r) (void)mem_.set_card(r->lkey, card);
    return r;
  }
  /// Implicit on-demand registration of [addr, addr + length): no page resident until touched.
  /// Errors: not_found (no such PD), invalid_argument (a null addr, length 0, a range past
  /// 2^64), no_resources (the key table is full).
  result<memory_region> reg_mr_on_demand(std::uint32_t pd, void* addr, std::uint64_t length, access rights) {
    if (!has_pd(pd)) return errc::not_found;
    const auto k = mem_.reg_on_demand(pd, addr, length, rights);
    if (!k) return k.code();
    return memory_region{*k, *k, reinterpret_cast<std::uintptr_t>(addr), length};
  }
  /// Implicit on-demand registration of the whole address space (mlx5's implicit ODP: ibv_reg_mr
  /// of NULL, SIZE_MAX): the key's addresses are the host's, its pages the host's as `pages`
  /// reports them (memory_table::set_host_pages). Errors: not_found (no such PD),
  /// invalid_argument (no host_pages given to the device), no_resources (the key table is full).
  result<memory_region> reg_mr_implicit(std::uint32_t pd, access rights) {
    if (!has_pd(pd)) return errc::not_found;
    const auto k = mem_.reg_implicit(pd, rights);
    if (!k) return k.code();
    return memory_region{*k, *k, 0, ~std::uint64_t{0}};
  }
  /// An indirect key over `entries` (spec/rnic.md §3). Errors: not_found (no such PD),
  /// invalid_argument (no entries, more than max_key_entries, an entry of 0 bytes or more than
  /// max_klm_bytes), no_such_key, deregistered, wrong_variant, wrong_pd, too_deep (an entry's
  /// key), no_resources (the key table is full).
  result<memory_region> reg_indirect(std::uint32_t pd, std::span<const klm_entry> entries, access rights) {
    if (!has_pd(pd)) return errc::not_found;
    const auto k = mem_.reg_indirect(pd, entries, rights);
    if (!k) return k.code();
    return memory_region{*k, *k, 0, mem_.info(*k)->length};
  }
  /// A pattern key (spec/rnic.md §3). Errors: not_found (no such PD), invalid_argument (repeat 0,
  /// no entries, more than max_key_entries, a byte_count of 0, a length past 2^63), no_such_key,
  /// deregistered, wrong_variant, wrong_pd, too_deep (an entry's key), no_resources (the key
  /// table is full).
  result<memory_region> reg_pattern(std::uint32_t pd, std::uint32_t repeat, std::span<const pattern_entry> entries, access rights) {
    if (!has_pd(pd)) return errc::not_found;
    const auto k = mem_.reg_pattern(pd, repeat, entries, rights);
    if (!k) return k.code();
    return memory_region{*k, *k, 0, mem_.info(*k)->length};
  }
  /// Removes a registration: its key, and keys inside other keys that name it, stop working.
  /// Errors: not_found (not a live key).
  errc dereg_mr(std::uint32_t key) { return mem_.dereg(key); }
  /// Makes the pages of local ranges of on-demand keys resident now (ibv_advise_mr's prefetch),
  /// after checking each range as a local access of `need` in `pd` would be; fault = false only
  /// checks (PREFETCH_NO_FAULT). Nothing is made resident when a check fails. Errors:
  /// no_such_key, deregistered, wrong_variant, wrong_pd, no_access_right, wraps, out_of_range
  /// (the first range that fails its check).
  errc prefetch(std::uint32_t pd, std::span<const sge> ranges, access need, bool fault = true) {
    return dma_.prefetch(pd, ranges, need, fault);
  }
  /// Re-registers a direct or on-demand key (ibv_rereg_mr; rereg_options). Errors: not_found
  /// (not a live direct or on-demand key, or o.pd names no PD), invalid_argument (a null addr,
  /// length 0 on an on-demand key, a range past 2^64, an iova on an on-demand key, a card's key:
  /// reg_mr_card's memory is not re-registered, as libibverbs refuses a dma-buf MR's).
  result<memory_region> rereg_mr(std::uint32_t key, void* addr, std::uint64_t length, access rights, const rereg_options& o = default_rereg) {
    if (o.pd && !has_pd(*o.pd)) return errc::not_found;
    const auto k = mem_.rereg(key, addr, length, rights, o);
    if (!k) return k.code();
    return memory_region{*k, *k, o.iova.value_or(reinterpret_cast<std::uintptr_t>(addr)), length};
  }

  // ---- completion queues ----------------------------------------------------------------
  /// A CQ over the consumer's memory (which must outlive the CQ). Errors: no_resources
  /// (max_cqs exist), invalid_argument (m's ring is empty).
  result<std::uint32_t> create_cq(cq_memory& m) { return cq_.create(m); }
  /// Removes a CQ. Errors: not_found (no such CQ), busy (a QP completes on it).
  errc destroy_cq(std::uint32_t cq) {
    if (!cq_.exists(cq)) return errc::not_found;
    for (const auto& [n, q] : qps_)
      if (q->init.send_cq == cq || q->init.recv_cq == cq) return errc::busy;
    return cq_.destroy(cq);
  }
  /// Moves a CQ to new memory (ibv_resize_cq): the completions written and not consumed yet go
  /// to the start of `m`'s ring in their order, and the device writes there from then on (the
  /// old memory is the caller's again). The consumer must not poll meanwhile. Errors:
  /// not_found (no such CQ), invalid_argument (m's ring empty, or smaller than the completions
  /// waiting).
  errc resize_cq(std::uint32_t cq, cq_memory& m) { return cq_.resize(cq, m); }
  /// Calls `notify(ctx, cq)` once, after the next completion written to cq (armed notification).
  /// Errors: not_found (no such CQ).
  errc arm_cq(std::uint32_t cq, cq_notify notify) { return cq_.arm(cq, notify); }
  /// arm_cq with a std::function. Errors: not_found (no such CQ).
  errc arm_cq(std::uint32_t cq, std::function<void(std::uint32_t)> notify) { return cq_.arm(cq, std::move(notify)); }

  // ---- address handles and shared receive queues -----------------------------------------
  /// An address handle for UD and DC work requests. Errors: not_found (no such PD),
  /// invalid_argument (a port or source GID index the device does not have).
  result<std::uint32_t> create_ah(std::uint32_t pd, const address_vector& av) {
    if (!has_pd(pd)) return errc::not_found;
    if (!has_gid(av.port, av.sgid_index)) return errc::invalid_argument;
    if (!ahs_.free.empty()) {
      const std::uint32_t n = ahs_.free.back();
      ahs_.free.pop_back();
      ahs_.avs[n] = av, ahs_.live[n] = true;
      return n;
    }
    ahs_.avs.push_back(av);
    ahs_.live.push_back(true);
    return static_cast<std::uint32_t>(ahs_.avs.size() - 1);
  }
  /// Frees an address handle; its number may be given to the next create_ah (work requests
  /// already posted with it keep the address it had). Errors: not_found (no such AH).
  errc destroy_ah(std::uint32_t ah) {
    if (ah >= ahs_.avs.size() || !ahs_.live[ah]) return errc::not_found;
    ahs_.live[ah] = false;
    ahs_.free.push_back(ah);
    return {};
  }
  /// A shared receive queue over the caller's ring. Errors: not_found (no such PD),
  /// invalid_argument (m has no valid depth).
  result<std::uint32_t> create_srq(std::uint32_t pd, rq_memory& m) {
    if (!has_pd(pd)) return errc::not_found;
    if (m.depth() == 0) return errc::invalid_argument;
    auto s = std::make_unique<srq_context>(srq_context{.pd = pd, .mem = &m});
    for (std::size_t i = 0; i < srqs_.size(); ++i)
      if (!srqs_[i]) {
        srqs_[i] = std::move(s);
        return static_cast<std::uint32_t>(i);
      }
    srqs_.push_back(std::move(s));
    return static_cast<std::uint32_t>(srqs_.size() - 1);
  }
  /// Removes a shared receive queue. Errors: not_found (no such SRQ), busy (a QP takes its
  /// receives from it).
  errc destroy_srq(std::uint32_t srq) {
    if (!has_srq(srq)) return errc::not_found;
    for (const auto& [n, q] : qps_)
      if (q->init.srq == srq) return errc::busy;
    srqs_[srq].reset();
    std::erase(srq_doorbells_, srq);
    return {};
  }
  /// Arms an SRQ's limit (ibv_modify_srq's srq_limit): once fewer than `limit` receive
  /// descriptors are left in it, the device raises srq_limit once and disarms it; 0 disarms.
  /// Errors: not_found (no such SRQ).
  errc arm_srq_limit(std::uint32_t srq, std::uint32_t limit) {
    if (!has_srq(srq)) return errc::not_found;
    srqs_[srq]->limit = limit;
    check_srq_limits();
    return {};
  }
  /// The armed limit of an SRQ (0: none). Errors: not_found (no such SRQ).
  result<std::uint32_t> srq_limit(std::uint32_t srq) const {
    if (!has_srq(srq)) return errc::not_found;
    return srqs_[srq]->limit;
  }
  /// Receive descriptors an SRQ holds (fetched and not yet taken, plus those posted and not yet
  /// fetched): what an SRQ limit compares with. Errors: not_found (no such SRQ).
  result<std::uint32_t> srq_outstanding(std::uint32_t srq) const {
    if (!has_srq(srq)) return errc::not_found;
    return srqs_[srq]->outstanding();
  }

  // ---- sessions over UDP 5-tuples (spec/rnic.md §12) -------------------------------------
  /// The privileged session table's owner call (the kernel side's): binds UDP 5-tuple t to
  /// session `id` of `group`, for QP `qpn`. A sending device binds the tuples its session QPs
  /// send on (their source ports); a receiving device, the tuples it accepts. Errors: busy (the
  /// session or the tuple is bound), no_resources (the table is full), invalid_argument (not
  /// UDP, or a destination port other than ib::roce_port).
  errc bind_session(std::uint32_t id, const flow::five_tuple& t, std::uint32_t group, std::uint32_t qpn) {
    if (t.proto != ib::ip_proto_udp || t.dport != ib::roce_port) return errc::invalid_argument;
    const flow::errc e = sessions_->bind(id, t, group, qpn);
    return e == flow::errc{} ? errc{} : e == flow::errc::table_full ? errc::no_resources : errc::busy;
  }
  /// Unbinds session `id`. Errors: not_found (not bound).
  errc unbind_session(std::uint32_t id) { return sessions_->unbind(id) == flow::errc{} ? errc{} : errc::not_found; }
  const session_table_t& sessions() const { return *sessions_; }
  /// Makes UD QP qpn a session QP of `group`. Its SENDs go out on the group's sessions, one
  /// picked per message by `policy` (its UDP source port is the session's), as SEND with
  /// immediate carrying the QP's message sequence number; what arrives for it is resequenced
  /// by flow::session_receiver before it takes a receive, and packets from tuples outside the
  /// group are dropped. Errors: not_found (no such QP), invalid_argument (not UD).
  errc set_qp_sessions(std::uint32_t qpn, std::uint32_t group, flow::pick_policy policy = flow::pick_policy::round_robin) {
    qp_context* q = find_qp(qpn);
    if (!q) return errc::not_found;
    if (!q->is(qp_type::ud)) return errc::invalid_argument;
    if (!q->sessions) ++session_qps_;
    q->sessions = std::make_unique<session_qp>(session_qp{{*sessions_, group, policy}, {*sessions_, qpn, group}, {}});
    return {};
  }

  // ---- queue pairs ----------------------------------------------------------------------
  /// A queue pair in RESET. Errors: no_resources (max_qps exist, or every number of the
  /// device's range is taken), not_found (no such PD),
  /// invalid_argument (a send queue or send CQ missing or unknown where the type sends, a
  /// receive queue or SRQ (of the same PD) or receive CQ missing or unknown where it receives).
  result<std::uint32_t> create_qp(const qp_init_attr& a) {
    if (qps_.size() - lingering_ >= cfg_.max_qps) return errc::no_resources;
    if (!has_pd(a.pd)) return errc::not_found;
    const bool sends = a.type != qp_type::dct, receives = a.type != qp_type::dci;
    if (sends && (!a.sq || a.sq->depth() == 0 || !cq_.exists(a.send_cq))) return errc::invalid_argument;
    if (receives) {
      if (!cq_.exists(a.recv_cq)) return errc::invalid_argument;
      if (a.srq ? !has_srq(*a.srq) || srqs_[*a.srq]->pd != a.pd : (!a.rq || a.rq->depth() == 0)) return errc::invalid_argument;
    }
    std::uint32_t qpn = 0;
    for (std::uint32_t tries = 0;; ++tries) {
      if (tries == cfg_.qpn_count) return errc::no_resources;
      qpn = cfg_.qpn_first + next_qpn_;
      next_qpn_ = (next_qpn_ + 1) % cfg_.qpn_count;
      if (!qps_.contains(qpn)) break;
    }
    auto q = std::make_unique<qp_context>();
    q->qpn = qpn;
    q->init = a;
    q->srq = a.srq ? srqs_[*a.srq].get() : nullptr;
    qps_.emplace(qpn, std::move(q));
    return qpn;
  }
  /// Destroys a QP (an RC QP may linger: device_config::linger). Errors: not_found (no such QP).
  errc destroy_qp(std::uint32_t qpn) {
    qp_context* q = find_qp(qpn);
    if (!q) return errc::not_found;
    if (q->sessions) --session_qps_;
    table_.erase(qpn);  // its packed context, and the cache's entry
    forget_context(qpn);
    if (const time_ns l = linger_of(*q)) {
      q->closed = true;
      q->linger = l;
      q->last_heard = now_;
      q->req.reset();
      q->init.sq = nullptr, q->init.rq = nullptr, q->init.srq.reset(), q->srq = nullptr;
      q->init.send_cq = q->init.recv_cq = 0;  // (CQ numbers start at 1)
      q->sends.clear(), q->recvs.clear();
      ++lingering_;
      return {};
    }
    qps_.erase(qpn);
    return {};
  }
  /// Destroyed RC QPs still answering duplicates (device_config::linger).
  std::size_t lingering() const { return lingering_; }
  /// Changes a QP's state and attributes (ibv_modify_qp). Errors: not_found (no such QP),
  /// invalid_state (no such transition for its type, or a cur_state that is not its state),
  /// missing_attribute (an attribute the transition requires is not in the mask),
  /// invalid_attribute (an attribute the transition does not allow, or a value out of range:
  /// qp.hpp's check_modify; an address vector whose port or source GID the device lacks).
  errc modify_qp(std::uint32_t qpn, const qp_attr& a, qp_attr_mask mask) {
    qp_context* q = find_qp(qpn);
    if (!q) return errc::not_found;
    const std::uint8_t port = any(mask & qp_attr_mask::port) ? a.port : q->attr.port;
    const std::uint32_t mtu = port < ports_.size() ? port_mtu(port) : 0;
    if (const errc e = check_modify(q->init.type, q->state, a, mask, ports_.size(), mtu); e != errc{}) return e;
    if (any(mask & qp_attr_mask::av) && !has_gid(a.av.port, a.av.sgid_index)) return errc::invalid_attribute;
    if (any(mask & qp_attr_mask::alt_path) && !has_gid(a.alt_av.port, a.alt_av.sgid_index)) return errc::invalid_attribute;
    const mig_state was = q->attr.path_mig_state;
    apply_attrs(q->attr, a, mask);
    if (any(mask & qp_attr_mask::alt_path)) q->apm = true;
    enter(*q, any(mask & qp_attr_mask::state) ? a.state : q->state);
    if (any(mask & qp_attr_mask::path_mig_state)) set_migration(*q, was);
    store_context(*q);
    return {};
  }
  /// A QP's state. Errors: not_found (no such QP).
  result<qp_state> query_qp(std::uint32_t qpn) const {
    const qp_context* q = find_qp(qpn);
    if (!q) return errc::not_found;
    return q->state;
  }
  /// A QP's attributes as the last modify_qp calls set them, with `state` its current state
  /// (ibv_query_qp). Errors: not_found (no such QP).
  result<qp_attr> query_qp_attr(std::uint32_t qpn) const {
    const qp_context* q = find_qp(qpn);
    if (!q) return errc::not_found;
    qp_attr a = q->attr;
    a.state = a.cur_state = q->state;
    return a;
  }

  /// Writes a send descriptor into the QP's ring and rings the doorbell. Errors: not_found (no
  /// such QP), invalid_state (RESET, INIT or RTR; a DCT), invalid_argument (more than max_sge
  /// entries, inline data over max_inline), queue_full (the ring is full).
  errc post_send(std::uint32_t qpn, const send_wr& wr) {
    qp_context* q = find_qp(qpn);
    if (!q) return errc::not_found;
    if (q->is(qp_type::dct) || q->state == qp_state::reset || q->state == qp_state::init || q->state == qp_state::rtr)
      return errc::invalid_state;
    const auto w = descriptor(wr);
    if (!w) return w.code();
    if (!q->init.sq->put(*w)) return errc::queue_full;
    doorbell(qpn);
    return {};
  }
  /// Writes a receive descriptor into the QP's ring and rings the doorbell. Errors: not_found
  /// (no such QP), invalid_state (RESET; a DCI), invalid_argument (the QP takes receives from
  /// an SRQ; more than max_sge entries), queue_full (the ring is full).
  errc post_recv(std::uint32_t qpn, const recv_wr& wr) {
    qp_context* q = find_qp(qpn);
    if (!q) return errc::not_found;
    if (q->is(qp_type::dci) || q->state == qp_state::reset) return errc::invalid_state;
    if (q->srq) return errc::invalid_argument;
    const auto w = descriptor(wr);
    if (!w) return w.code();
    if (!q->init.rq->put(*w)) return errc::queue_full;
    doorbell(qpn);
    return {};
  }
  /// Writes a receive descriptor into an SRQ's ring. Errors: not_found (no such SRQ),
  /// invalid_argument (more than max_sge entries), queue_full (the ring is full).
  errc post_srq_recv(std::uint32_t srq, const recv_wr& wr) {
    if (!has_srq(srq)) return errc::not_found;
    const auto w = descriptor(wr);
    if (!w) return w.code();
    if (!srqs_[srq]->mem->put(*w)) return errc::queue_full;
    srq_doorbells_.push_back(srq);
    return {};
  }

 private:
  bool has_pd(std::uint32_t pd) const { return std::find(pds_.begin(), pds_.end(), pd) != pds_.end(); }
  static void apply_attrs(qp_attr& t, const qp_attr& a, qp_attr_mask mask) {
    using M = qp_attr_mask;
    if (any(mask & M::access_flags)) t.access_flags = a.access_flags;
    if (any(mask & M::pkey_index)) t.pkey_index = a.pkey_index;
    if (any(mask & M::port)) t.port = a.port;
    if (any(mask & M::qkey)) t.qkey = a.qkey;
    if (any(mask & M::av)) t.av = a.av;
    if (any(mask & M::path_mtu)) t.path_mtu = a.path_mtu;
    if (any(mask & M::timeout)) t.timeout = a.timeout;
    if (any(mask & M::retry_cnt)) t.retry_cnt = a.retry_cnt;
    if (any(mask & M::rnr_retry)) t.rnr_retry = a.rnr_retry;
    if (any(mask & M::rq_psn)) t.rq_psn = a.rq_psn;
    if (any(mask & M::sq_psn)) t.sq_psn = a.sq_psn;
    if (any(mask & M::max_qp_rd_atomic)) t.max_rd_atomic = a.max_rd_atomic;
    if (any(mask & M::max_dest_rd_atomic)) t.max_dest_rd_atomic = a.max_dest_rd_atomic;
    if (any(mask & M::min_rnr_timer)) t.min_rnr_timer = a.min_rnr_timer;
    if (any(mask & M::dest_qpn)) t.dest_qp_num = a.dest_qp_num;
    if (any(mask & M::alt_path)) t.alt_av = a.alt_av, t.alt_timeout = a.alt_timeout;
    if (any(mask & M::path_mig_state)) t.path_mig_state = a.path_mig_state;
  }

  std::vector<std::uint32_t> pds_;
  std::uint32_t next_pd_ = 1;
};

}  // namespace pushwire::rnic
