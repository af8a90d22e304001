// Reassembly (seed 003, III: the channel adapter "performs reassembly of multiple received cells
// corresponding to the same packet"). Cells of a packet arrive in order; state is kept per
// (source MAC, source WQP, PSN) under explicit bounds, all storage is allocated at construction,
// and a packet is delivered only when every cell arrived with a good cell CRC and the packet CRC
// matches, and at most once. ACK, NAK and page-fault delay cells are delivered as they come.
// Rules and errors: spec/cells.md §5.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include <pushwire/cell/format.hpp>
#include <pushwire/wire/detail/copy.hpp>

namespace pushwire::cell {

/// Explicit bounds; exceeding one is a named error, never silent loss.
struct reassembly_limits {
  /// Packets in flight (incomplete) at once; one more is errc::reassembly_full ("packets").
  std::size_t max_packets = 16;
  /// Payload bytes of one packet held in the reassembler's own storage, which is allocated at
  /// construction (max_packets * max_packet_bytes); more is errc::reassembly_full
  /// ("packet_bytes"). A packet given a destination is bounded by that instead.
  std::size_t max_packet_bytes = 65536;
  /// Payload bytes held by all packets in flight; more is errc::reassembly_full ("bytes").
  std::size_t max_bytes = 16 * 65536;
  /// Nanoseconds a packet may stay incomplete after its first cell; errc::reassembly_timeout.
  std::uint64_t max_age_ns = 1'000'000;
  /// The receiver's cell payload size: a cell with more data is errc::too_large.
  std::size_t max_cell_payload = default_cell_payload;
  /// Packets remembered after delivery, so their duplicates are recognised.
  std::size_t history = 16;
};

/// What identifies a packet in flight.
struct packet_key {
  mac_address src{};
  std::uint32_t src_wqp = 0;
  std::uint32_t psn = 0;
  friend constexpr bool operator==(const packet_key&, const packet_key&) = default;
};

/// A complete packet. `payload` views the destination given with its first cell, or the
/// reassembler's storage (valid until the next push() or expire()).
struct delivered_packet {
  packet_key key{};
  mac_address dst{};
  std::uint32_t dst_wqp = 0;
  cell_type type = cell_type::send;
  bool ack_req = false;
  std::optional<cell::vamh> rdma{};
  std::optional<ack_info> ack{};
  std::optional<std::uint32_t> idata{};
  std::size_t cells = 0;
  std::span<const std::byte> payload{};
};

enum class push_status : std::uint8_t {
  accepted,   ///< the cell was taken; its packet is not complete yet
  delivered,  ///< the cell completed its packet: `packet` holds it
  rejected,   ///< `error` says why; see `dropped`
};

struct push_result {
  push_status status = push_status::accepted;
  wire::error error{};
  /// The packet the cell belongs to (rejected cells: when the cell could be attributed).
  std::optional<packet_key> key{};
  /// Rejected: the packet in progress was dropped as well (it can no longer complete).
  bool dropped = false;
  delivered_packet packet{};
};

class reassembler {
 public:
  /// Counts since construction.
  struct counters {
    std::uint64_t cells = 0, delivered = 0, dropped = 0, rejected = 0;
    /// Rejections by errc (index = errc value).
    std::array<std::uint64_t, wire::errc_table.size() + 1> by_error{};
  };

  explicit reassembler(const reassembly_limits& lim = {})
      : lim_(lim), slots_(lim.max_packets), history_(lim.history), storage_(lim.max_packets * lim.max_packet_bytes) {}

  const reassembly_limits& limits() const { return lim_; }
  const counters& stats() const { return stats_; }
  /// Packets in flight, and the payload bytes they hold.
  std::size_t in_flight() const { return in_flight_; }
  std::size_t bytes_held() const { return held_; }

  /// Decodes `frame` (the cell CRC required) and takes the cell; see push(const cell_view&).
  push_result push(std::span<const std::byte> frame, std::uint64_t now_ns, std::span<std::byte> dest = {}) {
    cell_view v{};
    if (auto e = decode_into(frame, v, {.max_payload = lim_.max_cell_payload, .crc = wire::crc_check::require});
        e.code != errc{})
      return reject(e);
    return push(v, now_ns, dest);
  }

  /// Takes one decoded cell at time now_ns. `dest`, used when the cell starts a packet, is where
  /// that packet's payload is placed (when empty: the reassembler's storage); if the packet fails, what
  /// was placed there is unspecified and nothing is delivered. Rejections: the cell's own
  /// (cell_crc_mismatch when its CRC is bad or, unchecked, does not verify; too_large), then
  /// cell_missing, cell_duplicate, cell_out_of_order, reassembly_timeout, invalid_field (a header
  /// field that disagrees with the packet's first cell), reassembly_full, no_space (dest too
  /// small), packet_crc_mismatch.
  push_result push(const cell_view& c, std::uint64_t now_ns, std::span<std::byte> dest = {}) {
    using wire::error;
    if (!crc_good(c)) return reject({errc::cell_crc_mismatch, c.at.cell_crc, "crc"});
    if (c.hdr.length > lim_.max_cell_payload)
      return reject({errc::too_large, c.at.header + wire::offset_of<header>("length"), "length"});
    const packet_key key{c.eth().src, c.hdr.src_wqp, c.hdr.psn};
    if (is_control(c.hdr.type)) return control(c, key);  // its PSN is the one it acknowledges
    slot* s = find(key);
    if (!s) {
      if (recently_delivered(key)) return reject({errc::cell_duplicate, c.at.header, "csn"}, key);
      if (!c.hdr.first) return reject({errc::cell_missing, c.at.header, "csn"}, key);
      s = open(c, key, now_ns, dest);
      if (!s) return reject(open_error_, key);
    } else {
      if (now_ns - s->born_ns > lim_.max_age_ns) return drop(*s, {errc::reassembly_timeout, c.at.header, "psn"});
      if (c.hdr.csn < s->next_csn) return reject({errc::cell_duplicate, c.at.header + csn_offset, "csn"}, key);
      if (c.hdr.csn > s->next_csn) return drop(*s, {errc::cell_out_of_order, c.at.header + csn_offset, "csn"});
      if (auto e = agrees(*s, c); e.code != errc{}) return drop(*s, e);
    }
    return take(*s, c);
  }

  /// Drops every packet older than the age bound at now_ns, calling on_drop(key, error) for
  /// each (error: reassembly_timeout); returns how many.
  template <class F>
  std::size_t expire(std::uint64_t now_ns, F&& on_drop) {
    std::size_t n = 0;
    for (auto& s : slots_)
      if (s.used && now_ns - s.born_ns > lim_.max_age_ns) {
        on_drop(s.key, error_t{errc::reassembly_timeout, 0, "psn"});
        release(s);
        ++stats_.dropped;
        ++n;
      }
    return n;
  }
  std::size_t expire(std::uint64_t now_ns) {
    return expire(now_ns, [](const packet_key&, const error_t&) {});
  }

 private:
  using error_t = wire::error;
  static constexpr std::size_t csn_offset = wire::offset_of<header>("csn");

  struct slot {
    bool used = false;
    packet_key key{};
    mac_address dst{};
    std::uint32_t dst_wqp = 0;
    cell_type type = cell_type::send;
    bool ack_req = false;
    std::uint16_t cell_count = 0, next_csn = 0;
    std::optional<cell::vamh> rdma{};
    std::span<std::byte> store{};
    bool own = true;  // store is the reassembler's
    std::size_t bytes = 0;
    std::uint32_t crc = 0;  // packet CRC of the data so far
    std::uint64_t born_ns = 0;
  };

  static bool crc_good(const cell_view& c) {
    if (c.crc_state != wire::crc_status::unchecked) return c.crc_state == wire::crc_status::good;
    return c.at.cell_crc <= c.frame.size() && detail::cell_crc_of(c.frame.first(c.at.cell_crc)) == c.crc;
  }

  slot* find(const packet_key& k) {
    if (hint_ < slots_.size() && slots_[hint_].used && slots_[hint_].key == k) return &slots_[hint_];
    for (std::size_t i = 0; i < slots_.size(); ++i)
      if (slots_[i].used && slots_[i].key == k) {
        hint_ = i;
        return &slots_[i];
      }
    return nullptr;
  }

  bool recently_delivered(const packet_key& k) const {
    for (std::size_t i = 0; i < history_used_; ++i)
      if (history_[i] == k) return true;
    return false;
  }

  slot* open(const cell_view& c, const packet_key& key, std::uint64_t now_ns, std::span<std::byte> dest) {
    if (in_flight_ == slots_.size()) {
      expire(now_ns);  // age makes room before the bound is declared hit
      if (in_flight_ == slots_.size()) {
        open_error_ = {errc::reassembly_full, c.at.header, "packets"};
        return nullptr;
      }
    }
    std::size_t i = 0;
    while (slots_[i].used) ++i;
    slot& s = slots_[i];
    s = slot{};
    s.used = true;
    s.key = key;
    s.dst = c.eth().dst;
    s.dst_wqp = c.hdr.dst_wqp;
    s.type = c.hdr.type;
    s.ack_req = c.hdr.ack_req;
    s.cell_count = c.hdr.cell_count;
    s.rdma = c.rdma;
    s.own = dest.empty();
    s.store = s.own ? std::span<std::byte>(storage_).subspan(i * lim_.max_packet_bytes, lim_.max_packet_bytes) : dest;
    s.born_ns = now_ns;
    ++in_flight_;
    hint_ = i;
    return &s;
  }

  // A later cell must belong to the same packet as the first: same type, count and destination.
  static error_t agrees(const slot& s, const cell_view& c) {
    auto at = [&](std::string_view name) {
      return error_t{errc::invalid_field, c.at.header + wire::offset_of<header>(name), name};
    };
    if (c.hdr.type != s.type) return at("type");
    if (c.hdr.cell_count != s.cell_count) return at("cell_count");
    if (c.hdr.dst_wqp != s.dst_wqp) return at("dst_wqp");
    if (c.hdr.ack_req != s.ack_req) return at("ack_req");
    if (c.eth().dst != s.dst) return error_t{errc::invalid_field, 0, "eth.dst"};
    return {};
  }

  push_result take(slot& s, const cell_view& c) {
    const std::size_t n = c.data.size();
    if (n > s.store.size() - s.bytes) {
      return drop(s, s.own ? error_t{errc::reassembly_full, c.at.data, "packet_bytes"} : error_t{errc::no_space, c.at.data, "payload"});
    }
    if (n > lim_.max_bytes - held_) return drop(s, {errc::reassembly_full, c.at.data, "bytes"});
    wire::detail::copy_bytes(s.store.data() + s.bytes, c.data.data(), n);
    s.crc = wire::crc::crc32c(c.data, s.crc);
    s.bytes += n;
    held_ += n;
    ++s.next_csn;
    ++stats_.cells;
    if (!c.hdr.last) return {push_status::accepted, {}, s.key, false, {}};
    if (s.crc != *c.packet_crc) return drop(s, {errc::packet_crc_mismatch, c.at.packet_crc, "packet_crc"});
    push_result r{push_status::delivered, {}, s.key, false, {}};
    r.packet = {s.key, s.dst, s.dst_wqp, s.type, s.ack_req, s.rdma, c.ack, c.idata, s.cell_count, s.store.first(s.bytes)};
    remember(s.key);
    release(s);
    ++stats_.delivered;
    return r;
  }

  // ACK, NAK and page-fault delay cells are whole on arrival and may repeat (a re-ACK), so they
  // are delivered every time and hold no state.
  push_result control(const cell_view& c, const packet_key& key) {
    ++stats_.cells;
    ++stats_.delivered;
    push_result r{push_status::delivered, {}, key, false, {}};
    r.packet = {key, c.eth().dst, c.hdr.dst_wqp, c.hdr.type, c.hdr.ack_req, std::nullopt, c.ack, std::nullopt, 1, {}};
    return r;
  }

  void remember(const packet_key& k) {
    if (history_.empty()) return;
    history_[history_next_] = k;
    history_next_ = (history_next_ + 1) % history_.size();
    if (history_used_ < history_.size()) ++history_used_;
  }

  void release(slot& s) {
    held_ -= s.bytes;
    --in_flight_;
    s.used = false;
  }

  push_result reject(const error_t& e, std::optional<packet_key> key = std::nullopt) {
    ++stats_.rejected;
    ++stats_.by_error[static_cast<std::size_t>(e.code)];
    return {push_status::rejected, e, key, false, {}};
  }

  push_result drop(slot& s, const error_t& e) {
    auto r = reject(e, s.key);
    r.dropped = true;
    release(s);
    ++stats_.dropped;
    return r;
  }

  reassembly_limits lim_;
  std::vector<slot> slots_;
  std::vector<packet_key> history_;
  std::vector<std::byte> storage_;
  std::size_t history_next_ = 0, history_used_ = 0;
  std::size_t in_flight_ = 0, held_ = 0, hint_ = 0;
  error_t open_error_{};
  counters stats_{};
};

}  // namespace pushwire::cell
