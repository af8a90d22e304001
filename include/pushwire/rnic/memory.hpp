// Memory keys of the reference RNIC (spec/rnic.md §3): a table of registrations that every
// access goes through, checked for key, protection domain, rights and bounds at every level.
//   direct     a host range [addr, addr + length) seen at [iova, iova + length)
//   indirect   a list of {key, address, length} (mlx5's KLM): the key's bytes are the entries'
//              ranges, concatenated; zero-based
//   pattern    {repeat_count, entries {key, address, byte_count, stride}} (mlx5's interleaved
//              key): repetition r of entry e is byte_count bytes at address + r * stride of
//              e's key; the key's bytes are the pieces in (repetition, entry) order; zero-based
//   on_demand  a direct range registered with no page resident (on-demand registration): an
//              access to an absent page is errc::page_fault, and the device serves the fault
//              before the access is retried; residency is the table's own map of the range
//   implicit   an on-demand key over the whole address space (mlx5's implicit ODP: addresses are
//              the host's): mapping, protection and residency are the host's, asked of a
//              host_pages at each access, so an unmapped or read-only page is refused, never
//              touched
// Indirect and pattern entries name keys of the same protection domain, nest at most
// max_key_depth deep and never reach themselves (errc::cycle). check() validates a whole access
// without touching memory; visit() then walks it as host segments, so nothing is written unless
// everything may be.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <vector>

#include <pushwire/rnic/core.hpp>

namespace pushwire::rnic {

/// Bytes per page of an on-demand key's residency map.
inline constexpr std::uint64_t page_size = 4096;
/// A key's memory is the host's, not a card's (memory_table::set_card).
inline constexpr std::uint8_t no_card = 0xFF;
/// Most levels of keys an access may pass through below the key it names (an indirect key of
/// direct keys is one level).
inline constexpr std::size_t max_key_depth = 4;
/// Most entries of one indirect or pattern key.
inline constexpr std::size_t max_key_entries = 256;
/// Most bytes one indirect entry may cover (mlx5's KLM byte_count limit).
inline constexpr std::uint64_t max_klm_bytes = std::uint64_t{1} << 31;
/// Key indices a table holds at most (24 bits, minus index 0, which no key uses).
inline constexpr std::uint32_t max_keys = (1u << 24) - 1;

enum class key_kind : std::uint8_t { direct, indirect, pattern, on_demand };
inline constexpr std::array<wire::named_value, 4> key_kind_names{{
    {key_kind::direct, "direct"}, {key_kind::indirect, "indirect"}, {key_kind::pattern, "pattern"},
    {key_kind::on_demand, "on_demand"},
}};
constexpr std::span<const wire::named_value> wire_enum_names(key_kind) { return key_kind_names; }

/// One entry of an indirect key: `length` bytes (1 .. max_klm_bytes) at `addr` of `key`.
struct klm_entry {
  std::uint32_t key = 0;
  std::uint64_t addr = 0;
  std::uint64_t length = 0;
};
/// One entry of a pattern key: byte_count bytes (>= 1) at addr + r * stride of `key`, for each
/// repetition r.
struct pattern_entry {
  std::uint32_t key = 0;
  std::uint64_t addr = 0;
  std::uint32_t byte_count = 0;
  std::uint64_t stride = 0;
};

/// Where an on-demand access faulted: the key, and the range whose absent pages must be made
/// resident.
struct fault_info {
  std::uint32_t key = 0;
  std::uint64_t va = 0, length = 0;
};

/// The host's pages as an implicit key sees them (memory_table::reg_implicit): whether a range
/// is mapped with an access and resident, and making it resident. net::kernel_pages asks the
/// kernel (mincore, MADV_POPULATE_*); tests may model it.
class host_pages {
 public:
  virtual ~host_pages() = default;
  /// [va, va + length), length >= 1: errc{} when every page is mapped for the access and
  /// resident; page_fault when mapped and some page is absent; out_of_range when a page is not
  /// mapped; no_access_right when one cannot be accessed so (a write to a read-only page).
  virtual errc probe(std::uint64_t va, std::uint64_t length, bool write) const = 0;
  /// Makes [va, va + length) resident (a served fault, a prefetch), writable when `write`; false
  /// when it cannot (then probe() tells why).
  virtual bool fault_in(std::uint64_t va, std::uint64_t length, bool write) = 0;
};

/// What an access asks of a key: the protection domain it runs in and the rights it needs.
struct access_need {
  std::uint32_t pd = 0;
  access rights = access::none;
};

/// What a re-registration changes besides range and rights (memory_table::rereg()).
struct rereg_options {
  std::optional<std::uint64_t> iova{};  ///< the key's first address (default: addr); direct keys only
  std::optional<std::uint32_t> pd{};    ///< a new protection domain (the caller checks it exists)
  /// A new variant, so the old key stops working (as a re-registration that changes the key
  /// does); false keeps the key (ibv_rereg_mr on rxe and mlx5 keeps lkey and rkey).
  bool new_key = true;
};
/// The options of a re-registration that changes only range and rights. (A named constant rather
/// than a default temporary: g++-12 at -O1 reports a default temporary's disengaged optional as
/// "maybe uninitialized".)
inline constexpr rereg_options default_rereg{};

/// A registered region as reg_mr returns it.
struct memory_region {
  std::uint32_t lkey = 0, rkey = 0;  ///< the same key
  std::uint64_t addr = 0, length = 0;
};

/// The key table of one device.
class memory_table {
 public:
  /// A table of at most `capacity` keys (1 .. max_keys).
  explicit memory_table(std::uint32_t capacity = 1u << 16) : cap_(std::clamp<std::uint32_t>(capacity, 1, max_keys)) {
    slots_.resize(1);  // index 0 is never a key
  }

  /// Registers host bytes [addr, addr + length) as seen at iova. Errors: invalid_argument (null
  /// addr with a length; iova + length past 2^64), no_resources.
  result<std::uint32_t> reg_direct(std::uint32_t pd, void* addr, std::uint64_t length, access rights, std::uint64_t iova) {
    if ((addr == nullptr && length != 0) || length - 1 > ~std::uint64_t{0} - iova) return errc::invalid_argument;
    slot s{.kind = key_kind::direct, .pd = pd, .rights = rights, .iova = iova, .length = length, .host = static_cast<std::byte*>(addr)};
    return add(std::move(s));
  }
  /// Registers [addr, addr + length) with no page resident; the key's addresses are the host's.
  result<std::uint32_t> reg_on_demand(std::uint32_t pd, void* addr, std::uint64_t length, access rights) {
    const auto iova = reinterpret_cast<std::uintptr_t>(addr);
    if (addr == nullptr || length == 0 || length - 1 > ~std::uint64_t{0} - iova) return errc::invalid_argument;
    slot s{.kind = key_kind::on_demand, .pd = pd, .rights = rights, .iova = iova, .length = length, .host = static_cast<std::byte*>(addr)};
    const std::uint64_t first = iova / page_size, last = (iova + length - 1) / page_size;
    s.first_page = first;
    s.resident.assign((last - first + 64) / 64, 0);
    return add(std::move(s));
  }
  /// An implicit on-demand key: every address of the host, [0, 2^64 - 1), through `pages`
  /// (set_host_pages()). Errors: invalid_argument (no host_pages set), no_resources.
  result<std::uint32_t> reg_implicit(std::uint32_t pd, access rights) {
    if (!pages_) return errc::invalid_argument;
    slot s{.kind = key_kind::on_demand, .pd = pd, .rights = rights, .iova = 0, .length = ~std::uint64_t{0}};
    s.implicit = true;
    return add(std::move(s));
  }
  /// The host's pages implicit keys ask (nullptr: no implicit key can be registered). Kept, not
  /// owned: it must outlive the table's implicit keys.
  void set_host_pages(host_pages* p) { pages_ = p; }
  bool implicit_supported() const { return pages_ != nullptr; }

  /// An indirect key over `entries`. Errors: invalid_argument (no entries, more than
  /// max_key_entries, an entry of 0 or more than max_klm_bytes), and an entry key's own
  /// (no_such_key, deregistered, wrong_variant, wrong_pd, too_deep), no_resources.
  result<std::uint32_t> reg_indirect(std::uint32_t pd, std::span<const klm_entry> entries, access rights) {
    slot s{.kind = key_kind::indirect, .pd = pd, .rights = rights};
    if (const errc e = set_klm(s, entries, 0); e != errc{}) return e;
    return add(std::move(s));
  }
  /// A pattern key. Errors: invalid_argument (repeat 0, no entries, more than max_key_entries, a
  /// byte_count of 0, a length past 2^63), and as reg_indirect.
  result<std::uint32_t> reg_pattern(std::uint32_t pd, std::uint32_t repeat, std::span<const pattern_entry> entries, access rights) {
    slot s{.kind = key_kind::pattern, .pd = pd, .rights = rights};
    if (const errc e = set_pattern(s, repeat, entries, 0); e != errc{}) return e;
    return add(std::move(s));
  }
  /// Points an existing indirect key at new entries (as a UMR does); the key is unchanged.
  /// Errors: as reg_indirect, not_found (no such indirect key), cycle (an entry reaches `key`).
  errc modify_indirect(std::uint32_t key, std::span<const klm_entry> entries) {
    slot* s = live(key);
    if (!s || s->kind != key_kind::indirect) return errc::not_found;
    slot n = *s;
    if (const errc e = set_klm(n, entries, key); e != errc{}) return e;
    *s = std::move(n);
    return {};
  }
  /// Removes a registration; its key (and keys inside other keys that name it) stops working.
  errc dereg(std::uint32_t key) {
    slot* s = live(key);
    if (!s) return errc::not_found;
    s->used = false;
    s->klm.clear();
    s->pattern.clear();
    s->resident.clear();
    free_.push_back(key_index(key));
    --live_;
    return {};
  }
  /// Re-registers a direct or on-demand key's range and rights (not a card's key:
  /// invalid_argument).
  result<std::uint32_t> rereg(std::uint32_t key, void* addr, std::uint64_t length, access rights, const rereg_options& o = default_rereg) {
    slot* s = live(key);
    if (!s || (s->kind != key_kind::direct && s->kind != key_kind::on_demand) || s->implicit) return errc::not_found;
    if (s->card != no_card) return errc::invalid_argument;
    const bool odp = s->kind == key_kind::on_demand;
    if (odp && o.iova && *o.iova != reinterpret_cast<std::uintptr_t>(addr)) return errc::invalid_argument;
    const std::uint64_t iova = o.iova.value_or(reinterpret_cast<std::uintptr_t>(addr));
    if (addr == nullptr || (odp && length == 0) || (length != 0 && length - 1 > ~std::uint64_t{0} - iova)) return errc::invalid_argument;
    if (o.pd) s->pd = *o.pd;
    s->iova = iova;
    s->length = length;
    s->host = static_cast<std::byte*>(addr);
    s->rights = rights;
    if (odp) {
      s->first_page = iova / page_size;
      s->resident.assign(((iova + length - 1) / page_size - s->first_page + 64) / 64, 0);
    }
    if (o.new_key) ++s->variant;
    return make_key(key_index(key), s->variant);
  }

  /// Whether the access of [va, va + length) through `key` is allowed, at every level, without
  /// touching memory. A zero-length access is always allowed (IBTA: a zero-length RDMA carries
  /// no valid R_Key). errc::page_fault fills `fault` (when given) with the first absent range.
  errc check(std::uint32_t key, std::uint64_t va, std::uint64_t length, access_need need, fault_info* fault = nullptr) const {
    if (length == 0) return {};
    return check_at(key, va, length, need, 0, fault);
  }
  /// Calls f(std::byte*, std::size_t) for each host segment of an access check() allowed, in
  /// order.
  template <class F>
  void visit(std::uint32_t key, std::uint64_t va, std::uint64_t length, F&& f) const {
    if (length != 0) visit_at(key, va, length, f);
  }
  /// visit() that also says whose memory each segment is: f(byte*, n, card), card no_card for
  /// host memory.
  template <class F>
  void visit_placed(std::uint32_t key, std::uint64_t va, std::uint64_t length, F&& f) const {
    if (length != 0) visit_at<true>(key, va, length, f);
  }
  /// Marks direct key `key`'s bytes as card `card`'s device memory (rnic/platform.hpp).
  /// Errors: not_found (no such key), invalid_argument (not a direct key).
  errc set_card(std::uint32_t key, std::uint8_t card) {
    slot* s = live(key);
    if (!s) return errc::not_found;
    if (s->kind != key_kind::direct) return errc::invalid_argument;
    s->card = card;
    return {};
  }
  /// Copies src to the access [va, va + src.size()) of key (check() must have allowed it).
  void write(std::uint32_t key, std::uint64_t va, std::span<const std::byte> src) const {
    std::size_t done = 0;
    visit(key, va, src.size(), [&](std::byte* p, std::size_t n) {
      std::memcpy(p, src.data() + done, n);
      done += n;
    });
  }
  /// Copies the access [va, va + dst.size()) of key into dst (check() must have allowed it).
  void read(std::uint32_t key, std::uint64_t va, std::span<std::byte> dst) const {
    std::size_t done = 0;
    visit(key, va, dst.size(), [&](std::byte* p, std::size_t n) {
      std::memcpy(dst.data() + done, p, n);
      done += n;
    });
  }
  /// The host address of an 8-byte access within one segment (atomics), or nullptr.
  std::byte* word(std::uint32_t key, std::uint64_t va) const {
    std::byte* at = nullptr;
    std::size_t segments = 0;
    visit(key, va, 8, [&](std::byte* p, std::size_t n) {
      if (++segments == 1 && n == 8) at = p;
    });
    return segments == 1 ? at : nullptr;
  }

  /// Makes the pages of [va, va + length) of on-demand key `key` resident (a served fault); an
  /// implicit key's through the host (writable when the key may be written and the page allows,
  /// else readable). False when the host could not.
  bool make_resident(std::uint32_t key, std::uint64_t va, std::uint64_t length) {
    const slot* s = live(key);
    if (s && s->implicit && length != 0) {
      return (writes(s->rights) && pages_->fault_in(va, length, true)) || pages_->fault_in(va, length, false);
    }
    set_pages(key, va, length, true);
    return true;
  }
  /// Makes them absent again (the host paged them out; an implicit key's pages are the host's to
  /// evict).
  void evict(std::uint32_t key, std::uint64_t va, std::uint64_t length) { set_pages(key, va, length, false); }

  /// The kind, protection domain, rights, first address and length of a live key.
  struct key_info {
    key_kind kind;
    std::uint32_t pd;
    access rights;
    std::uint64_t iova, length;
    bool implicit = false;
    std::uint8_t card = no_card;  ///< the card whose device memory the key covers (direct keys)
  };
  result<key_info> info(std::uint32_t key) const {
    const slot* s = live(key);
    if (!s) return errc::not_found;
    return key_info{s->kind, s->pd, s->rights, s->iova, s->length, s->implicit, s->card};
  }
  /// Live keys of protection domain pd.
  std::size_t keys_of(std::uint32_t pd) const {
    std::size_t n = 0;
    for (std::size_t i = 1; i < slots_.size(); ++i) n += slots_[i].used && slots_[i].pd == pd;
    return n;
  }
  std::size_t size() const { return live_; }

 private:
  struct slot {
    bool used = true, ever_used = true;
    bool implicit = false;  ///< on_demand over the whole address space, through pages_
    std::uint8_t card = no_card;  ///< direct: the platform's card whose memory this is
    std::uint8_t variant = 0;
    key_kind kind = key_kind::direct;
    std::uint32_t pd = 0;
    access rights = access::none;
    std::uint64_t iova = 0, length = 0;
    std::byte* host = nullptr;
    std::vector<klm_entry> klm{};
    std::vector<std::uint64_t> klm_start{};  ///< byte offset of each entry
    std::uint32_t repeat = 0;
    std::vector<pattern_entry> pattern{};
    std::vector<std::uint64_t> pattern_start{};  ///< byte offset of each entry within a repetition
    std::uint64_t block = 0;                     ///< bytes of one repetition
    std::uint64_t first_page = 0;
    std::vector<std::uint64_t> resident{};  ///< on_demand: one bit per page from first_page
    std::size_t depth = 0;                  ///< levels below this key
  };

  result<std::uint32_t> add(slot&& s) {
    std::uint32_t idx;
    if (!free_.empty()) {
      idx = free_.back();
      free_.pop_back();
      s.variant = static_cast<std::uint8_t>(slots_[idx].variant + 1);
      slots_[idx] = std::move(s);
    } else {
      if (slots_.size() > cap_) return errc::no_resources;
      idx = static_cast<std::uint32_t>(slots_.size());
      slots_.push_back(std::move(s));
    }
    ++live_;
    return make_key(idx, slots_[idx].variant);
  }
  const slot* live(std::uint32_t key) const {
    const std::uint32_t i = key_index(key);
    if (i == 0 || i >= slots_.size() || !slots_[i].used || slots_[i].variant != key_variant(key)) return nullptr;
    return &slots_[i];
  }
  slot* live(std::uint32_t key) { return const_cast<slot*>(std::as_const(*this).live(key)); }

  /// Why key cannot be used at all (not a live key), or errc{}.
  errc lookup(std::uint32_t key, const slot*& out) const {
    const std::uint32_t i = key_index(key);
    if (i == 0 || i >= slots_.size()) return errc::no_such_key;
    const slot& s = slots_[i];
    if (!s.used) return errc::deregistered;
    if (s.variant != key_variant(key)) return errc::wrong_variant;
    out = &s;
    return {};
  }
  /// Whether `from` reaches key `target` through entries.
  bool reaches(std::uint32_t from, std::uint32_t target, std::size_t depth = 0) const {
    if (key_index(from) == key_index(target)) return true;
    const slot* s = live(from);
    if (!s || depth > max_key_depth) return false;
    for (const auto& e : s->klm)
      if (reaches(e.key, target, depth + 1)) return true;
    for (const auto& e : s->pattern)
      if (reaches(e.key, target, depth + 1)) return true;
    return false;
  }
  /// Validates an entry key of an indirect / pattern key in pd (self: the key being modified).
  errc entry_key(std::uint32_t key, std::uint32_t pd, std::uint32_t self, std::size_t& depth) const {
    const slot* inner = nullptr;
    if (self != 0 && reaches(key, self)) return errc::cycle;
    if (const errc e = lookup(key, inner); e != errc{}) return e;
    if (inner->pd != pd) return errc::wrong_pd;
    depth = std::max(depth, inner->depth + 1);
    if (depth > max_key_depth) return errc::too_deep;
    return {};
  }
  errc set_klm(slot& s, std::span<const klm_entry> entries, std::uint32_t self) const {
    if (entries.empty() || entries.size() > max_key_entries) return errc::invalid_argument;
    std::uint64_t total = 0;
    std::size_t depth = 0;
    s.klm_start.clear();
    for (const auto& e : entries) {
      if (e.length == 0 || e.length > max_klm_bytes) return errc::invalid_argument;
      if (const errc r = entry_key(e.key, s.pd, self, depth); r != errc{}) return r;
      s.klm_start.push_back(total);
      total += e.length;  // at most 256 * 2^31: no overflow
    }
    s.klm.assign(entries.begin(), entries.end());
    s.iova = 0;
    s.length = total;
    s.depth = depth;
    return {};
  }
  errc set_pattern(slot& s, std::uint32_t repeat, std::span<const pattern_entry> entries, std::uint32_t self) const {
    if (repeat == 0 || entries.empty() || entries.size() > max_key_entries) return errc::invalid_argument;
    std::uint64_t block = 0;
    std::size_t depth = 0;
    s.pattern_start.clear();
    for (const auto& e : entries) {
      if (e.byte_count == 0) return errc::invalid_argument;
      if (const errc r = entry_key(e.key, s.pd, self, depth); r != errc{}) return r;
      s.pattern_start.push_back(block);
      block += e.byte_count;  // at most 256 * 2^32
    }
    if (block > (std::uint64_t{1} << 63) / repeat) return errc::invalid_argument;
    s.pattern.assign(entries.begin(), entries.end());
    s.repeat = repeat;
    s.block = block;
    s.iova = 0;
    s.length = block * repeat;
    s.depth = depth;
    return {};
  }

  /// Calls piece(entry key, entry address, bytes) for each inner piece of [off, off + length)
  /// of an indirect or pattern slot; stops at the first piece that returns an error.
  template <class Piece>
  static errc pieces(const slot& s, std::uint64_t off, std::uint64_t length, Piece&& piece) {
    if (s.kind == key_kind::indirect) {
      std::size_t i = static_cast<std::size_t>(std::upper_bound(s.klm_start.begin(), s.klm_start.end(), off) - s.klm_start.begin()) - 1;
      while (length > 0) {
        const klm_entry& e = s.klm[i];
        const std::uint64_t within = off - s.klm_start[i], n = std::min(length, e.length - within);
        if (const errc r = piece(e.key, e.addr + within, n); r != errc{}) return r;
        off += n, length -= n, ++i;
      }
      return {};
    }
    std::uint64_t rep = off / s.block, w = off % s.block;
    std::size_t i = static_cast<std::size_t>(std::upper_bound(s.pattern_start.begin(), s.pattern_start.end(), w) - s.pattern_start.begin()) - 1;
    while (length > 0) {
      const pattern_entry& e = s.pattern[i];
      const std::uint64_t within = w - s.pattern_start[i], n = std::min<std::uint64_t>(length, e.byte_count - within);
      if (const errc r = piece(e.key, e.addr + rep * e.stride + within, n); r != errc{}) return r;
      length -= n, w += n;
      if (++i == s.pattern.size()) i = 0, w = 0, ++rep;
    }
    return {};
  }

  errc check_at(std::uint32_t key, std::uint64_t va, std::uint64_t length, access_need need, std::size_t depth,
                fault_info* fault) const {
    const slot* s = nullptr;
    if (const errc e = lookup(key, s); e != errc{}) return e;
    if (s->pd != need.pd) return errc::wrong_pd;
    if (!allows(s->rights, need.rights)) return errc::no_access_right;
    if (length - 1 > ~std::uint64_t{0} - va) return errc::wraps;
    if (va < s->iova || va - s->iova > s->length || length > s->length - (va - s->iova)) return errc::out_of_range;
    switch (s->kind) {
      case key_kind::direct: return {};
      case key_kind::on_demand: {
        if (s->implicit) {
          const errc e = pages_->probe(va, length, writes(need.rights));
          if (e == errc::page_fault && fault) *fault = {key, va, length};
          return e;
        }
        const std::uint64_t first = va / page_size, last = (va + length - 1) / page_size;
        for (std::uint64_t p = first; p <= last; ++p) {
          const std::uint64_t b = p - s->first_page;
          if (!(s->resident[b / 64] >> (b % 64) & 1)) {
            if (fault) *fault = {key, va, length};
            return errc::page_fault;
          }
        }
        return {};
      }
      default:
        if (depth + 1 > max_key_depth) return errc::too_deep;
        return pieces(*s, va - s->iova, length, [&](std::uint32_t k, std::uint64_t a, std::uint64_t n) {
          return check_at(k, a, n, need, depth + 1, fault);
        });
    }
  }
  template <bool Placed = false, class F>
  void visit_at(std::uint32_t key, std::uint64_t va, std::uint64_t length, F& f) const {
    const slot& s = slots_[key_index(key)];
    if (s.kind == key_kind::direct || s.kind == key_kind::on_demand) {
      std::byte* at = s.implicit ? reinterpret_cast<std::byte*>(static_cast<std::uintptr_t>(va)) : s.host + (va - s.iova);
      if constexpr (Placed) f(at, static_cast<std::size_t>(length), s.card);
      else f(at, static_cast<std::size_t>(length));
      return;
    }
    (void)pieces(s, va - s.iova, length, [&](std::uint32_t k, std::uint64_t a, std::uint64_t n) {
      visit_at<Placed>(k, a, n, f);
      return errc{};
    });
  }
  void set_pages(std::uint32_t key, std::uint64_t va, std::uint64_t length, bool on) {
    slot* s = live(key);
    if (!s || s->kind != key_kind::on_demand || s->implicit || length == 0) return;
    const std::uint64_t lo = std::max(va, s->iova), hi = std::min(va + (length - 1), s->iova + (s->length - 1));
    if (lo > hi) return;
    for (std::uint64_t p = lo / page_size; p <= hi / page_size; ++p) {
      const std::uint64_t b = p - s->first_page;
      if (on) s->resident[b / 64] |= std::uint64_t{1} << (b % 64);
      else s->resident[b / 64] &= ~(std::uint64_t{1} << (b % 64));
    }
  }

  std::uint32_t cap_;
  host_pages* pages_ = nullptr;
  std::vector<slot> slots_;
  std::vector<std::uint32_t> free_;
  std::size_t live_ = 0;
};

}  // namespace pushwire::rnic
