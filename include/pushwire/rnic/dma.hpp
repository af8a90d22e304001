// The reference RNIC's DMA engine (spec/rnic.md §3, §7): every access the device makes to host
// memory goes through here and the key table (memory.hpp). It answers the responders' memory
// ports (may this remote access happen, perform an atomic, does a SEND fit its receive), walks
// scatter/gather lists to gather a request's payload and to scatter a received one, and schedules
// page faults of on-demand keys, served after the device's page-fault latency. Card memory's
// bytes move by the platform's datapath, P2P or proxied through a bounce buffer (spec/rnic.md §15).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <vector>

#include <pushwire/rnic/completion.hpp>
#include <pushwire/rnic/context.hpp>
#include <pushwire/rnic/memory.hpp>

namespace pushwire::rnic {

class dma {
 public:
  /// Over the device's key table and counters; `now` is the device's clock (the time of the last
  /// progress() or receive()).
  dma(memory_table& mem, device_counters& stats, const time_ns& now, time_ns page_fault_latency, const platform_model& platform)
      : mem_(mem), stats_(stats), now_(now), latency_(page_fault_latency), platform_(resolved(platform)) {}
  dma(const dma&) = delete;
  dma& operator=(const dma&) = delete;

  memory_table& memory() { return mem_; }
  const memory_table& memory() const { return mem_; }

  // ---- page faults ----------------------------------------------------------------------------
  /// Schedules the pages of f to become resident after the page-fault latency (once per range);
  /// returns the delay until then, microseconds rounded up.
  std::uint32_t raise_fault(const fault_info& f) {
    for (const pending_fault& p : faults_)
      if (p.key == f.key && p.va <= f.va && f.va + f.length <= p.va + p.length)
        return static_cast<std::uint32_t>((p.ready_at - now_ + 999) / 1000);
    ++stats_.page_faults;
    faults_.push_back({f.key, f.va, f.length, now_ + latency_});
    return static_cast<std::uint32_t>((latency_ + 999) / 1000);
  }
  /// Makes resident the pages whose faults are due.
  void serve_faults() {
    std::erase_if(faults_, [&](const pending_fault& p) {
      if (p.ready_at > now_) return false;
      (void)mem_.make_resident(p.key, p.va, p.length);  // (refused: the retried access is refused then)
      ++stats_.faults_served;
      return true;
    });
  }
  /// When the next fault is served, or nullopt.
  std::optional<time_ns> next_deadline() const {
    std::optional<time_ns> t;
    for (const pending_fault& p : faults_)
      if (!t || p.ready_at < *t) t = p.ready_at;
    return t;
  }
  /// Checks each range as a local access of `need` in `pd`; then, unless only checking, makes
  /// the pages of on-demand keys in them resident at once: one fault served at a time until the
  /// check passes, so a range through an indirect or pattern key over several on-demand keys
  /// is served whole. Errors: the first range's check error; out_of_range when a fault served
  /// leaves the same pages absent (the host could not bring them in), or when a range is still
  /// faulting after prefetch_fault_limit faults served (pages evicted as fast as they come in).
  static constexpr std::uint32_t prefetch_fault_limit = 1 << 24;
  errc prefetch(std::uint32_t pd, std::span<const sge> ranges, access need, bool fault) {
    for (const sge& s : ranges)
      if (const errc e = mem_.check(s.lkey, s.addr, s.length, {pd, need}); e != errc{} && e != errc::page_fault) return e;
    if (!fault) return {};
    for (const sge& s : ranges) {
      fault_info last{};
      for (std::uint32_t served = 0;; ++served) {
        if (served == prefetch_fault_limit) return errc::out_of_range;
        fault_info fi{};
        const errc e = mem_.check(s.lkey, s.addr, s.length, {pd, need}, &fi);
        if (e == errc{}) break;
        if (e != errc::page_fault) return e;  // (an implicit key's pages the host refused)
        if (served != 0 && fi.key == last.key && fi.va == last.va && fi.length == last.length) return errc::out_of_range;
        serve_now(fi);
        last = fi;
      }
    }
    return {};
  }

  // ---- card memory ---------------------------------------------------------------------------
  /// Bytes of the bounce buffer a proxied transfer goes through, a piece at a time.
  static constexpr std::size_t bounce_size = 64 * 1024;
  /// One access's place in a transfer between memory and the wire.
  struct transfer {
    data_direction dir = data_direction::inbound;  ///< inbound: the device writes memory
    /// The message's bytes: the selector's size (only outbound transfers depend on it).
    std::uint64_t bytes = 0;
    bool start = false;                            ///< this access begins the transfer
  };
  /// Visits [va, va + length) of `key` (checked) as memory_table::visit does; card memory's
  /// segments go by the platform's datapath (platform_model::select): P2P as host memory does,
  /// proxied through the bounce buffer, which f then sees (filled from the card before f
  /// outbound, copied to the card after f inbound): a piece's pointer is valid only during
  /// that call of f. Counted in device_counters::paths: a transfer by the access that starts
  /// it (t.start), at its first card segment; card segments of an indirect key beyond that
  /// add bytes only.
  template <class F>
  void move(std::uint32_t key, std::uint64_t va, std::uint64_t length, const transfer& t, F&& f) {
    if (platform_.card_count == 0) {
      mem_.visit(key, va, length, f);
      return;
    }
    bool counted = !t.start;
    mem_.visit_placed(key, va, length, [&](std::byte* p, std::size_t n, std::uint8_t card) {
      if (card == no_card) {
        f(p, n);
        return;
      }
      const datapath path = platform_.select(card, t.dir, t.bytes);
      path_counters& c = stats_.paths[static_cast<std::size_t>(path)][static_cast<std::size_t>(t.dir)];
      const double fixed = platform_.cost(path, t.dir, card, 0);
      if (!counted) {
        ++c.transfers;
        c.modelled_ns += fixed;
        counted = true;
      }
      c.bytes += n;
      c.modelled_ns += platform_.cost(path, t.dir, card, n) - fixed;
      if (path != datapath::proxied) {
        f(p, n);
        return;
      }
      if (bounce_.empty()) bounce_.resize(bounce_size);
      for (std::size_t done = 0; done < n;) {
        const std::size_t k = std::min(n - done, bounce_.size());
        if (t.dir == data_direction::outbound) std::memcpy(bounce_.data(), p + done, k);
        f(bounce_.data(), k);
        if (t.dir == data_direction::inbound) std::memcpy(p + done, bounce_.data(), k);
        done += k;
      }
    });
  }

  // ---- the device's own accesses --------------------------------------------------------------
  /// Visits bytes [offset, offset + length) of a descriptor's scatter/gather list (or its inline
  /// data) as host segments f(byte*, n), for a QP of `pd`. False when a key no longer allows it
  /// (nothing after that piece is visited). An absent page is made resident at once.
  template <class F>
  bool gather(std::uint32_t pd, const send_wqe& w, std::uint32_t offset, std::uint32_t length, access need, F&& f) {
    if (w.flags & send_inline) {
      if (length) f(const_cast<std::byte*>(w.inline_data.data()) + offset, length);
      return true;
    }
    return walk(pd, entries(w), offset, length, need, f);
  }
  /// The same over a list of entries.
  template <class F>
  /// `first`: the list's byte where the message's data begins (a UD receive's payload follows
  /// the GRH space); an entry's transfer starts at that byte, or at the entry's own first byte
  /// when the entry lies after it.
  bool walk(std::uint32_t pd, std::span<const sge> list, std::uint32_t offset, std::uint32_t length, access need, F& f,
            std::uint32_t first = 0) {
    std::uint64_t total = 0;  // (the message: the selector's size for card memory)
    for (const sge& s : list) total += s.length;
    std::uint64_t base = 0;  // the list's byte where s begins
    for (const sge& s : list) {
      if (length == 0) break;
      if (offset >= s.length) {
        offset -= s.length;
        base += s.length;
        continue;
      }
      const std::uint32_t n = std::min(length, s.length - offset);
      const bool start = base + offset == first || (offset == 0 && base > first);
      const transfer t{writes(need) ? data_direction::inbound : data_direction::outbound, total, start};
      if (!local_visit(pd, s, offset, n, need, t, f)) return false;
      base += s.length;
      offset = 0;
      length -= n;
    }
    return length == 0;
  }
  /// Copies `data` into a receive descriptor's buffer at byte `at`; false when a key refuses.
  /// `first`: where the message's data begins in the buffer (walk).
  bool scatter(std::uint32_t pd, const recv_wqe& w, std::uint32_t at, std::span<const std::byte> data, std::uint32_t first = 0) {
    std::size_t done = 0;
    auto copy = [&](std::byte* h, std::size_t k) {
      std::memcpy(h, data.data() + done, k);
      done += k;
    };
    return walk(pd, entries(w), at, static_cast<std::uint32_t>(data.size()), access::local_write, copy, first);
  }
  /// Copies `data` into a send descriptor's local buffer at byte `at` (READ data, an atomic's
  /// original value); false when a key refuses.
  bool gather_in(std::uint32_t pd, const send_wqe& w, std::uint32_t at, std::span<const std::byte> data) {
    std::size_t done = 0;
    return gather(pd, w, at, static_cast<std::uint32_t>(data.size()), access::local_write, [&](std::byte* h, std::size_t k) {
      std::memcpy(h, data.data() + done, k);
      done += k;
    });
  }

  // ---- a responder's memory port ----------------------------------------------------------------
  /// The memory port of q's responder: its remote accesses checked against q's PD and access
  /// flags, its SENDs against q's receives.
  flow::memory_port port_of(qp_context& q) {
    q.memory = this;
    return {.ctx = &q, .check = &dma::port_check, .atomic = &dma::port_atomic, .receive_fits = &dma::port_fits};
  }

 private:
  struct pending_fault {
    std::uint32_t key = 0;
    std::uint64_t va = 0, length = 0;
    time_ns ready_at = 0;
  };
  void serve_now(const fault_info& fi) {
    (void)mem_.make_resident(fi.key, fi.va, fi.length);
    ++stats_.page_faults;
    ++stats_.faults_served;
  }
  template <class F>
  bool local_visit(std::uint32_t pd, const sge& s, std::uint64_t offset, std::uint32_t n, access need, const transfer& t, F&& f) {
    fault_info fi{};
    errc e = mem_.check(s.lkey, s.addr + offset, n, {pd, need}, &fi);
    if (e == errc::page_fault) {
      serve_now(fi);
      e = mem_.check(s.lkey, s.addr + offset, n, {pd, need});
    }
    if (e != errc{}) return false;
    move(s.lkey, s.addr + offset, n, t, f);
    return true;
  }

  static flow::access_result port_check(void* ctx, std::uint32_t rkey, std::uint64_t va, std::uint32_t len, flow::access_kind k,
                                        bool probe) {
    const qp_context& q = *static_cast<const qp_context*>(ctx);
    dma& d = *q.memory;
    const access need = k == flow::access_kind::read ? access::remote_read
                        : k == flow::access_kind::write ? access::remote_write
                                                        : access::remote_atomic;
    // The QP's own remote rights come first (IBTA: the QP's access flags), then the key's.
    if (!allows(q.attr.access_flags, need) && len != 0) return {flow::access_result::access_error, 0};
    fault_info f{};
    const errc e = d.mem_.check(rkey, va, len, {q.init.pd, need}, &f);
    if (e == errc::page_fault) return {flow::access_result::page_fault, probe ? 0 : d.raise_fault(f)};
    if (e != errc{}) return {flow::access_result::access_error, 0};
    if (k == flow::access_kind::atomic && (va % 8 != 0 || !d.mem_.word(rkey, va))) return {flow::access_result::access_error, 0};
    return {};
  }
  static std::uint64_t port_atomic(void* ctx, std::uint32_t rkey, std::uint64_t va, bool cmp_swap, std::uint64_t swap,
                                   std::uint64_t compare) {
    const qp_context& q = *static_cast<const qp_context*>(ctx);
    std::byte* p = q.memory->mem_.word(rkey, va);
    if (!p) return 0;
    const std::uint64_t orig = wire::load_le64(p);
    wire::store_le64(p, cmp_swap ? (orig == compare ? swap : orig) : orig + swap);
    return orig;
  }
  static flow::receive_fit port_fits(void* ctx, std::uint32_t offset, std::uint32_t len) {
    const qp_context& q = *static_cast<const qp_context*>(ctx);
    const recv_wqe* w = completion_unit::receive_for(q, offset);
    if (!w || std::uint64_t{offset} + len + q.grh_room() > capacity(*w)) return flow::receive_fit::too_long;
    // a key that no longer allows the receive's buffer
    if (offset == 0 && !receive_usable(q.memory->mem_, q.init.pd, *w)) return flow::receive_fit::unusable;
    return flow::receive_fit::fits;
  }

  memory_table& mem_;
  device_counters& stats_;
  const time_ns& now_;
  time_ns latency_;
  /// The device's platform with its threshold resolved once (crossover() bisects).
  platform_model platform_;
  static constexpr platform_model resolved(platform_model p) {
    if (p.card_count != 0 && p.valid()) p.outbound_threshold = p.threshold();
    return p;
  }
  std::vector<std::byte> bounce_;  ///< the host bounce buffer of proxied transfers
  std::vector<pending_fault> faults_;
};

}  // namespace pushwire::rnic
