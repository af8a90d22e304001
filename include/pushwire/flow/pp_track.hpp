// Push-push conversations in a capture, as a passive reader sees them: which host pairs speak
// push-push (a control message decoded strictly between them), and every pool's books as its
// owner keeps them (a flow::pool_owner replica per owner and user), with counts per pool; where
// an RDMA write's address lands in those pools (pp_tracker::locate), and a SEND message joined
// from its packets (send_joiner). flow::observer (pushwire-dump, the Wireshark plugin) and
// flow::conformance (pushwire-conform) both keep their conversations here, so what they say
// about one cannot differ. Sans-IO, bounded by pp_limits. Rules: spec/wireshark.md §3
// ("Claiming"), §4 (the pool fields).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <pushwire/flow/core.hpp>
#include <pushwire/flow/pool.hpp>
#include <pushwire/ib/opcode.hpp>
#include <pushwire/ib/psn.hpp>
#include <pushwire/msg/idata.hpp>
#include <pushwire/msg/message.hpp>

namespace pushwire::flow {

/// A host in a capture: an IP address (IPv4 in the first 4 bytes) or, for cells, a MAC (the
/// first 6), with its kind, so that the two never compare equal.
struct host {
  std::array<std::uint8_t, 16> b{};
  std::uint8_t kind = 0;  ///< 4, 6: IP version; 1: MAC
  friend constexpr auto operator<=>(const host&, const host&) = default;
  template <std::size_t N>
  static constexpr host of(const std::array<std::uint8_t, N>& a, std::uint8_t kind) {
    static_assert(N <= 16);
    host h{};
    for (std::size_t i = 0; i < N; ++i) h.b[i] = a[i];
    h.kind = kind;
    return h;
  }
  /// "198.18.0.1", "fd00:0000:...", "02:00:00:00:00:01".
  std::string text() const {
    static constexpr char hexd[] = "0123456789abcdef";
    std::string s;
    if (kind == 4) {
      for (std::size_t i = 0; i < 4; ++i) {
        if (i) s += '.';
        s += std::to_string(b[i]);
      }
      return s;
    }
    const int n = kind == 1 ? 6 : 16;
    for (int i = 0; i < n; ++i) {
      const std::uint8_t x = b[static_cast<std::size_t>(i)];
      if (i && (kind == 1 || i % 2 == 0)) s += ':';
      s += hexd[x >> 4];
      s += hexd[x & 15];
    }
    return s;
  }
};

/// Bounds: a new pair or pool beyond them is not tracked (its frames are not claimed).
struct pp_limits {
  /// Owner-user pairs with books (each a pool_owner<64, 4096>, about 260 KiB).
  std::size_t max_pairs = 64;
  /// Host pairs known to speak push-push.
  std::size_t max_claimed = 4096;
  /// Pools counted per owner-user pair (by pool reference, over the capture).
  std::size_t max_pool_rows = 256;
};

/// One pool's books after a frame, and its counts over the capture so far.
struct pool_view {
  host owner{}, user{};
  std::uint32_t ref = 0, elements = 0, element_size = 0;  ///< the latest advertisement
  pool_state state = pool_state::unused;                  ///< the owner's: active, flushing, flushed
  std::uint32_t free = 0;     ///< lent and not yet indicated: elements the user may write now
  std::uint32_t credits = 0;  ///< indicated and not yet returned: credits the owner still owes the user
  std::uint32_t lowest_free = 0;  ///< the least `free` seen while the pool was active
  std::uint64_t writes = 0;   ///< RDMA write messages landing in the pool (their first packet)
  std::uint64_t bytes = 0;    ///< payload bytes of the write packets landing in the pool
  std::uint64_t returns = 0;  ///< elements returned by BufferRecvPoolUpdate
  std::uint64_t flushes = 0;  ///< flushes: the pool left `active` (a FlushRequest, either side's)
  std::uint64_t advertised_frame = 0;  ///< frame of the latest BufferRecvPool naming it
};

/// Where an address lands in the pools an owner lent a user (pp_tracker::locate).
struct pool_hit {
  msg::pool_descriptor desc{};             ///< the pool as its latest advertisement describes it
  pool_state state = pool_state::unused;   ///< the owner's books: active, flushing, flushed
  std::size_t slot = 0;                    ///< its slot in the owner's books (owner_t::at)
  std::uint32_t element = 0;               ///< the element the address lands in, 0..element_count - 1
  std::uint64_t advertised_frame = 0;      ///< frame of the latest BufferRecvPool naming it
};

/// One SEND message joined from its packets as a passive reader sees them: SEND_FIRST,
/// MIDDLE..., LAST in PSN order, or an ONLY. A packet missing or out of order, or a message
/// longer than `max_bytes`, loses the message until the next FIRST or ONLY. One joiner per
/// connection direction (the packets of one requester to one QP).
class send_joiner {
 public:
  explicit send_joiner(std::size_t max_bytes = 65536) : max_(max_bytes) {}

  /// A SEND packet: its position in its message, PSN and payload, captured in frame `frame`.
  /// Returns the whole message when this packet ends it (a view valid until the next add() or
  /// reset()), else nullopt.
  std::optional<std::span<const std::byte>> add(ib::position pos, std::uint32_t psn, std::span<const std::byte> payload,
                                                std::uint64_t frame) {
    const bool starts = pos == ib::position::first || pos == ib::position::only;
    if (starts) {
      data_.clear();
      active_ = true;
      first_frame_ = frame;
    } else if (!active_ || psn != next_psn_) {
      active_ = false;  // a packet is missing or out of order: the message is lost
      return std::nullopt;
    }
    next_psn_ = ib::psn_add(psn, 1);
    if (data_.size() + payload.size() > max_) {
      active_ = false;
      return std::nullopt;
    }
    data_.insert(data_.end(), payload.begin(), payload.end());
    if (pos != ib::position::last && pos != ib::position::only) return std::nullopt;
    active_ = false;
    return std::span<const std::byte>(data_);
  }
  /// The frame of the FIRST (or ONLY) of the message add() returned last.
  std::uint64_t first_frame() const { return first_frame_; }
  /// Forgets the message in progress.
  void reset() {
    active_ = false;
    data_.clear();
  }

 private:
  std::size_t max_;
  bool active_ = false;
  std::uint32_t next_psn_ = 0;
  std::uint64_t first_frame_ = 0;
  std::vector<std::byte> data_;
};

class pp_tracker {
 public:
  /// Pools one owner's books hold for one user at once, and elements per pool.
  static constexpr std::size_t owner_pools = 64, owner_elements = 4096;
  using owner_t = pool_owner<owner_pools, owner_elements>;
  /// Pools one frame can report: as many as one owner's books hold (a message naming more
  /// reports the first ones).
  static constexpr std::size_t max_touched = owner_pools;

  explicit pp_tracker(const pp_limits& lim = {}) : lim_(lim) {}

  const pp_limits& limits() const { return lim_; }
  void reset() {
    pairs_.clear();
    claimed_.clear();
    touched_.clear();
  }
  /// Starts a frame: touched() lists the pools it changes.
  void begin_frame(std::uint64_t frame) {
    frame_ = frame;
    touched_.clear();
    refused_ = {};
  }
  /// The bound that made the current frame's message go untracked, in part or whole:
  /// "max_pairs" (no books for a new owner-user pair), "pools" (no room on the owner's books:
  /// owner_pools slots of owner_elements elements), "max_pool_rows" (on the books, not counted);
  /// empty when none did.
  std::string_view refused() const { return refused_; }

  /// Push-push has been decoded strictly between a and b (either direction).
  bool claimed(const host& a, const host& b) const { return claimed_.contains(unordered(a, b)); }
  /// An RDMA WRITE with immediate from `user` to `owner` carries idata: the pair speaks
  /// push-push and the pool it names was advertised by `owner` to `user`.
  bool claims_idata(const host& owner, const host& user, std::uint32_t imm) const {
    if (!claimed(owner, user)) return false;
    const owner_t* b = books(owner, user);
    return b && b->find(msg::from_imm(imm).pool_ref).has_value();
  }

  /// A SEND message from `from` to `to`. Returns false unless it decodes strictly as push-push
  /// (msg::dispatch); else claims the pair and applies it to the pools' books.
  /// on_indication(indication, step_result) hears every BufferRDMAIndicate entry's outcome.
  template <class OnIndication>
  bool message(const host& from, const host& to, std::span<const std::byte> m, OnIndication&& on_indication) {
    bool ok = false;
    (void)msg::dispatch(m, [&]<class M>(const M& x) {
      ok = true;
      claim(from, to);
      apply(from, to, x, on_indication);
    });
    return ok;
  }
  bool message(const host& from, const host& to, std::span<const std::byte> m) {
    return message(from, to, m, [](const msg::indication&, const step_result&) {});
  }

  /// One transfer indication (idata, or an entry of a BufferRDMAIndicate) for owner's pool;
  /// nullopt when the pair has no books.
  std::optional<step_result> indicate(const host& owner, const host& user, const msg::indication& i) {
    pair_state* p = find_pair(owner, user);
    if (!p) return std::nullopt;
    action_list<pool_action_t, 4> a;
    const step_result r = p->books.on_indication(i, a.out);
    if (r.ok()) touch(*p, owner, user, i.pool_ref);
    return r;
  }

  /// An RDMA write packet from `user` landing in owner's pool `ref` (first: the write's first
  /// packet), `bytes` of payload.
  void write(const host& owner, const host& user, std::uint32_t ref, std::uint64_t bytes, bool first) {
    pair_state* p = find_pair(owner, user);
    if (!p) return;
    const auto it = p->rows.find(ref);
    if (it == p->rows.end()) return;
    it->second.writes += first;
    it->second.bytes += bytes;
    touch(*p, owner, user, ref);
  }

  /// The pool of owner's, lent to `user` under memory handle `rkey`, whose elements hold address
  /// `va`, and the element it lands in; nullopt when none does (no books for the pair, another
  /// R_Key, an address outside every pool). Pools the books still hold count whatever their
  /// state (a flushed pool is found, for a write after its flush); where two hold the address,
  /// the one advertised last.
  std::optional<pool_hit> locate(const host& owner, const host& user, std::uint32_t rkey, std::uint64_t va) const {
    const auto it = pairs_.find(std::pair{owner, user});
    if (it == pairs_.end()) return std::nullopt;
    const pair_state& p = it->second;
    std::optional<pool_hit> best;
    for (std::size_t i = 0; i < owner_pools; ++i) {
      const auto& sl = p.books.at(i);
      const msg::pool_descriptor& d = sl.desc;
      if (sl.state == pool_state::unused || d.memory_handle != rkey || d.element_size == 0) continue;
      if (va < d.address || va - d.address >= std::uint64_t{d.element_count} * d.element_size) continue;
      const auto row = p.rows.find(d.pool_ref);
      const std::uint64_t frame = row == p.rows.end() ? 0 : row->second.advertised_frame;
      if (best && best->advertised_frame > frame) continue;
      best = pool_hit{d, sl.state, i, static_cast<std::uint32_t>((va - d.address) / d.element_size), frame};
    }
    return best;
  }

  /// The owner's books for `user` (nullptr when none were opened).
  const owner_t* books(const host& owner, const host& user) const {
    const auto it = pairs_.find(std::pair{owner, user});
    return it == pairs_.end() ? nullptr : &it->second.books;
  }
  /// A pool's books and counts now (nullopt when the pair never advertised it).
  std::optional<pool_view> view(const host& owner, const host& user, std::uint32_t ref) const {
    const auto it = pairs_.find(std::pair{owner, user});
    if (it == pairs_.end()) return std::nullopt;
    const auto r = it->second.rows.find(ref);
    if (r == it->second.rows.end()) return std::nullopt;
    pool_view v = r->second;
    v.owner = owner;
    v.user = user;
    v.ref = ref;
    const owner_t& b = it->second.books;
    v.state = b.state_of(ref);
    v.free = b.count(ref, owner_element::lent);
    v.credits = b.count(ref, owner_element::consumed);
    return v;
  }
  /// The pools the current frame changed (owner, user, reference), in order.
  struct pool_key {
    host owner{}, user{};
    std::uint32_t ref = 0;
  };
  std::span<const pool_key> touched() const { return touched_; }
  /// Every pool counted, in (owner, user, reference) order.
  template <class F>
  void each_pool(F&& f) const {
    for (const auto& [k, p] : pairs_)
      for (const auto& [ref, row] : p.rows)
        if (const auto v = view(k.first, k.second, ref)) f(*v);
  }

 private:
  struct pair_state {
    owner_t books{};  // about 260 KiB: map nodes stay put
    std::map<std::uint32_t, pool_view> rows;  // counts by pool reference
  };
  static std::pair<host, host> unordered(const host& a, const host& b) { return a < b ? std::pair{a, b} : std::pair{b, a}; }
  void refuse(std::string_view bound) { refused_ = bound; }
  void claim(const host& a, const host& b) {
    if (claimed_.size() < lim_.max_claimed) claimed_.insert(unordered(a, b));
  }
  pair_state* find_pair(const host& owner, const host& user) {
    const auto it = pairs_.find(std::pair{owner, user});
    return it == pairs_.end() ? nullptr : &it->second;
  }
  pair_state* make_pair(const host& owner, const host& user) {
    if (pair_state* p = find_pair(owner, user)) return p;
    if (pairs_.size() >= lim_.max_pairs) {
      refuse("max_pairs");
      return nullptr;
    }
    return &pairs_.emplace(std::piecewise_construct, std::forward_as_tuple(owner, user), std::forward_as_tuple()).first->second;
  }
  // The frame changed pool `ref`: remember it, and its least free count.
  void touch(pair_state& p, const host& owner, const host& user, std::uint32_t ref) {
    const auto it = p.rows.find(ref);
    if (it != p.rows.end() && p.books.state_of(ref) == pool_state::active)
      it->second.lowest_free = std::min(it->second.lowest_free, p.books.count(ref, owner_element::lent));
    for (const pool_key& k : touched_)
      if (k.ref == ref && k.owner == owner && k.user == user) return;
    if (touched_.size() < max_touched) touched_.push_back({owner, user, ref});
  }

  template <class M, class OnIndication>
  void apply(const host& from, const host& to, const M& x, OnIndication& on_indication) {
    action_list<pool_action_t, owner_t::min_room + 64> a;
    if constexpr (std::is_same_v<M, msg::buffer_recv_pool>) {  // `from` owns these pools
      pair_state* p = make_pair(from, to);
      if (!p) return;
      for (const msg::pool_descriptor& d : x.pools) {
        if (const step_result r = p->books.advertise(d, a.out); !r.ok()) {
          if (r.error == errc::table_full) refuse("pools");  // no slot, or more elements than a slot holds
          continue;
        }
        auto it = p->rows.find(d.pool_ref);
        if (it == p->rows.end()) {
          if (p->rows.size() >= lim_.max_pool_rows) {  // on the books, but not counted
            refuse("max_pool_rows");
            continue;
          }
          it = p->rows.emplace(d.pool_ref, pool_view{}).first;
          it->second.lowest_free = d.element_count;
        }
        it->second.elements = d.element_count;
        it->second.element_size = d.element_size;
        it->second.advertised_frame = frame_;
        touch(*p, from, to, d.pool_ref);
      }
    } else if constexpr (std::is_same_v<M, msg::buffer_recv_pool_update>) {  // the owner returns elements
      if (pair_state* p = find_pair(from, to))
        for (const msg::pool_update_entry& u : x.entries)
          if (p->books.release(u.pool_ref, u.first_element, u.element_count, a.out).ok()) {
            if (const auto it = p->rows.find(u.pool_ref); it != p->rows.end()) it->second.returns += u.element_count;
            touch(*p, from, to, u.pool_ref);
          }
    } else if constexpr (std::is_same_v<M, msg::buffer_rdma_indicate>) {  // the user indicates to the owner
      if (find_pair(to, from))
        for (const msg::indication& i : x.entries)
          if (const auto r = indicate(to, from, i)) on_indication(i, *r);
    } else if constexpr (std::is_same_v<M, msg::buffer_pool_flush_request>) {
      if (pair_state* own = find_pair(from, to))  // the owner flushes its pools
        flushing(*own, from, to, [&] {
          for (std::uint32_t ref : x.pool_refs) {
            own->books.next_txn(x.header.transaction_context);
            (void)own->books.flush(ref, a.out);
          }
        });
      if (pair_state* peer = find_pair(to, from))  // the user flushes the owner's
        flushing(*peer, to, from, [&] {
          action_list<pool_action_t, 64> b;
          if (b.out.room() > x.pool_refs.size()) (void)peer->books.on_flush_request(x, b.out);
        });
    } else if constexpr (std::is_same_v<M, msg::buffer_pool_flush_reply>) {
      if (pair_state* p = find_pair(to, from)) flushing(*p, to, from, [&] { (void)p->books.on_flush_reply(x, a.out); });
    }
  }
  // Runs a flush step on the books; every pool whose state it changed is touched, and a pool
  // that leaves `active` counts one flush.
  template <class F>
  void flushing(pair_state& p, const host& owner, const host& user, F&& step) {
    std::array<pool_state, owner_pools> before{};
    for (std::size_t i = 0; i < before.size(); ++i) before[i] = p.books.at(i).state;
    step();
    for (std::size_t i = 0; i < before.size(); ++i) {
      const auto& slot = p.books.at(i);
      if (slot.state == before[i]) continue;
      const std::uint32_t ref = slot.desc.pool_ref;
      if (before[i] == pool_state::active)
        if (const auto it = p.rows.find(ref); it != p.rows.end()) ++it->second.flushes;
      touch(p, owner, user, ref);
    }
  }

  pp_limits lim_;
  std::uint64_t frame_ = 0;
  std::map<std::pair<host, host>, pair_state> pairs_;  // (owner, user)
  std::set<std::pair<host, host>> claimed_;
  std::vector<pool_key> touched_;
  std::string_view refused_{};
};

}  // namespace pushwire::flow
