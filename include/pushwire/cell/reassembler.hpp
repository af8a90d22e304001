// Reassembly (split-model driver, III: the channel adapter "performs reassembly of multiple received cells
// corresponding to the same packet"). Cells of a packet arrive in order; state is kept per
// (source MAC, source WQP, PSN) under explicit bounds, all storage is allocated at construction,
// and a packet is delivered only when every cell arrived with a good cell CRC and the packet CRC
// matches, and at most once. ACK, NAK and page-fault delay cells are delivered as they come.
// Rules and errors: spec/cells.md §5.
#pragma once

#include <algorithm>
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

/// What identifies a packet in flight: its sender, the sender's WQP, its PSN, and whether it is
/// a responder's (a QP's requests and responses number their PSNs apart).
struct packet_key {
  mac_address src{};
  std::uint32_t src_wqp = 0;
  std::uint32_t psn = 0;
  bool response = false;
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
  /// Delivered: the packet, held by the reassembler until the next push() or expire() (as its
  /// payload may be). A pointer, not a copy: the result stays a few words, cheap per cell.
  const delivered_packet* packet = nullptr;
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
      : lim_(lim), slots_(lim.max_packets), history_(lim.history), storage_(lim.max_packets * lim.max_packet_bytes), batch_(1) {}

  const reassembly_limits& limits() const { return lim_; }
  const counters& stats() const { return stats_; }
  /// Packets in flight, and the payload bytes they hold.
  std::size_t in_flight() const { return in_flight_; }
  std::size_t bytes_held() const { return held_; }

  /// Decodes `frame` and takes the cell; see push(const cell_view&). The cell CRC is verified
  /// in the same pass that places the data (decode errors are decode's, in its order).
  push_result push(std::span<const std::byte> frame, std::uint64_t now_ns, std::span<std::byte> dest = {}) {
    cell_view v{};
    if (inspect(frame, v, {.crc = wire::crc_check::skip, .max_cell_payload = lim_.max_cell_payload}).code != errc{})
      return reject(inspect(frame, v, {.crc = wire::crc_check::require, .max_cell_payload = lim_.max_cell_payload}));
    return push(v, now_ns, dest);
  }

  /// Frames per round of push(frames, now_ns, dest, on_result).
  static constexpr std::size_t batch_round = 16;

  /// Takes frames in order, as push(frames[i], now_ns, dest) one at a time would, and calls
  /// on_result(i, result) after each, while the packet it delivered is valid (on_result must
  /// not give this reassembler frames). The cell CRCs of
  /// each round of batch_round frames are computed together first (wire::crc::crc32c_batch);
  /// a frame that does not decode is taken alone, and a cell longer than batch_job_max has its
  /// CRC computed as its data is placed.
  /// Every cell of the batch that starts a packet is given `dest`, as push() is.
  template <class F>
  void push(std::span<const std::span<const std::byte>> frames, std::uint64_t now_ns, std::span<std::byte> dest,
            F&& on_result) {
    const codec_options opt{.crc = wire::crc_check::skip, .max_cell_payload = lim_.max_cell_payload};
    auto& [views, jobs, ok] = batch_.front();
    for (std::size_t base = 0; base < frames.size(); base += batch_round) {
      const std::size_t k = std::min(batch_round, frames.size() - base);
      std::size_t m = 0;
      for (std::size_t i = 0; i < k; ++i) {
        cell_view& v = views[i];
        ok[i] = inspect(frames[base + i], v, opt).code != errc{} ? decoded::no
                : v.at.packet_part() > wire::crc::batch_job_max ? decoded::large
                                                                : decoded::small;
        if (ok[i] == decoded::small) jobs[m++] = {v.frame.first(v.at.packet_part()), {}, nullptr, 0};
      }
      wire::crc::crc32c_batch(std::span(jobs).first(m));
      for (std::size_t i = 0, j = 0; i < k; ++i) {
        cell_view& v = views[i];
        if (ok[i] == decoded::no) {
          on_result(base + i, push(frames[base + i], now_ns, dest));
          continue;
        }
        if (ok[i] == decoded::small) {  // (a large cell's CRC is computed as its data is placed)
          v.packet_part_crc = jobs[j++].crc;
          v.crc_computed = v.at.packet_crc ? wire::crc::crc32c(v.frame.subspan(v.at.packet_crc, crc_size), v.packet_part_crc)
                                           : v.packet_part_crc;
          v.crc_state = v.crc_computed == v.crc ? wire::crc_status::good : wire::crc_status::bad;
        }
        on_result(base + i, push(v, now_ns, dest));
      }
    }
  }

  /// Takes one decoded cell at time now_ns. `dest`, used when the cell starts a packet, is where
  /// that packet's payload is placed (when empty: the reassembler's storage); if the packet
  /// fails, what was placed there is unspecified and nothing is delivered. A cell whose CRC is
  /// bad (or, unchecked, does not verify) is cell_crc_mismatch and changes nothing. Otherwise the
  /// rejections are: too_large, cell_missing, cell_duplicate, cell_out_of_order,
  /// reassembly_timeout, invalid_field (a header field that disagrees with the packet's first
  /// cell), reassembly_full, no_space (dest too small), packet_crc_mismatch.
  push_result push(const cell_view& c, std::uint64_t now_ns, std::span<std::byte> dest = {}) {
    if (c.crc_state == wire::crc_status::bad || c.at.end() > c.frame.size()) return bad_crc(c);
    // Before any rejection the cell's CRC is checked, so a corrupted cell is reported as such
    // and never drops a packet; a cell that is taken is checked while its data is placed.
    bool verified = c.crc_state == wire::crc_status::good;
    const auto intact = [&] {
      if (!verified) verified = detail::crcs_of(c.frame, c.at).cell == c.crc;
      return verified;
    };
    if (c.hdr.length > lim_.max_cell_payload) {
      if (!intact()) return bad_crc(c);
      return reject({errc::too_large, c.at.header + wire::offset_of<header>("length"), "length"});
    }
    const packed_key k = pack(c.frame.data(), c.hdr);
    if (is_control(c.hdr.type)) return intact() ? control(c, k) : bad_crc(c);  // its PSN is the one it acknowledges
    slot* s = find(k);
    bool opened = false;
    if (!s) {
      error_t e{};
      if (recently_delivered(k)) e = {errc::cell_duplicate, c.at.header + csn_offset, "csn"};
      else if (!c.hdr.first) e = {errc::cell_missing, c.at.header + csn_offset, "csn"};
      else if (in_flight_ == slots_.size() && !intact()) return bad_crc(c);  // (it must not make open() expire packets)
      else if (!(s = open(c, k, now_ns, dest))) e = open_error_;
      if (e.code != errc{}) return intact() ? reject(e, k) : bad_crc(c);
      opened = true;
    } else {
      error_t e{};
      bool fatal = true;
      if (now_ns - s->born_ns > lim_.max_age_ns) e = {errc::reassembly_timeout, c.at.header, "psn"};
      else if (c.hdr.csn < s->next_csn) e = {errc::cell_duplicate, c.at.header + csn_offset, "csn"}, fatal = false;
      else if (c.hdr.csn > s->next_csn) e = {errc::cell_out_of_order, c.at.header + csn_offset, "csn"};
      else e = agrees(*s, c);
      if (e.code != errc{}) {
        if (!intact()) return bad_crc(c);
        return fatal ? drop(*s, e) : reject(e, k);
      }
    }
    const std::size_t n = c.data.size();
    error_t bound{};
    if (n > s->store.size() - s->bytes)
      bound = s->own ? error_t{errc::reassembly_full, c.at.data, "packet_bytes"} : error_t{errc::no_space, c.at.data, "payload"};
    else if (n > lim_.max_bytes - held_)
      bound = {errc::reassembly_full, c.at.data, "bytes"};
    if (bound.code != errc{}) {
      if (!intact()) return bad_crc(c, opened ? s : nullptr);
      return drop(*s, bound);
    }
    // Place the data; unless the CRC is known good, checksum it in the same pass.
    const auto to = s->store.subspan(s->bytes, n);
    std::uint32_t part = c.packet_part_crc;
    if (verified) {
      wire::detail::copy_bytes(to.data(), c.data.data(), n);
    } else {
      part = wire::crc::crc32c_copy(to, c.data, wire::crc::crc32c(c.frame.first(c.at.data)));
      const std::uint32_t cell = c.at.packet_crc ? wire::crc::crc32c(c.frame.subspan(c.at.packet_crc, crc_size), part) : part;
      if (cell != c.crc) return bad_crc(c, opened ? s : nullptr);
    }
    return take(*s, c, part);
  }

  /// Drops every packet older than the age bound at now_ns, calling on_drop(key, error) for
  /// each (error: reassembly_timeout); returns how many.
  template <class F>
  std::size_t expire(std::uint64_t now_ns, F&& on_drop) {
    std::size_t n = 0;
    for (auto& s : slots_)
      if (s.used && now_ns - s.born_ns > lim_.max_age_ns) {
        on_drop(unpack(s.key), error_t{errc::reassembly_timeout, 0, "psn"});
        release(s);
        ++stats_.dropped;
        ++n;
      }
    return n;
  }
  std::size_t expire(std::uint64_t now_ns) {
    return expire(now_ns, [](const packet_key&, const error_t&) {});
  }

  /// Forgets packet k: its state if in flight, and that it was delivered, so that it is taken
  /// again when it comes again (a responder that refused it, with a NAK or a page-fault delay,
  /// expects it to be resent). Returns whether anything was forgotten.
  bool forget(const packet_key& k) {
    const packed_key p = pack(k);
    bool any = false;
    if (slot* s = find(p)) release(*s), any = true;
    for (std::size_t i = 0; i < history_used_; ++i)
      if (history_[i] == p) history_[i] = packed_key{~std::uint64_t{0}, ~std::uint64_t{0}}, any = true;  // matches no key
    return any;
  }

 private:
  using error_t = wire::error;
  static constexpr std::size_t csn_offset = wire::offset_of<header>("csn");

  // A packet_key as two integers: source MAC; source WQP and PSN.
  struct packed_key {
    std::uint64_t mac = 0, wqp_psn = 0;
    friend constexpr bool operator==(const packed_key&, const packed_key&) = default;
  };
  static constexpr std::size_t src_offset = wire::offset_of<wire::eth_header>("src");
  static constexpr std::size_t dst_offset = wire::offset_of<wire::eth_header>("dst");
  // mac: the 48-bit source MAC, bit 48 the response flag; wqp_psn: WQP << 32 | PSN.
  static constexpr std::uint64_t response_bit = std::uint64_t{1} << 48;
  static packed_key pack(const std::byte* frame, const header& h) {
    return {wire::load_be<6>(frame + src_offset) | (h.response ? response_bit : 0), std::uint64_t{h.src_wqp} << 32 | h.psn};
  }
  static packed_key pack(const packet_key& k) {
    std::uint64_t mac = 0;
    for (std::uint8_t b : k.src) mac = mac << 8 | b;
    return {mac | (k.response ? response_bit : 0), std::uint64_t{k.src_wqp} << 32 | k.psn};
  }
  static packet_key unpack(const packed_key& k) {
    packet_key p;
    unpack(k, p);
    return p;
  }
  // In place, field by field: a key built aside in narrow stores and copied in one wide load
  // stalls on store forwarding (once per cell).
  static void unpack(const packed_key& k, packet_key& p) {
    wire::store_be<6>(reinterpret_cast<std::byte*>(p.src.data()), k.mac);
    p.src_wqp = static_cast<std::uint32_t>(k.wqp_psn >> 32);
    p.psn = static_cast<std::uint32_t>(k.wqp_psn);
    p.response = (k.mac & response_bit) != 0;
  }

  struct slot {
    bool used = false;
    packed_key key{};
    mac_address dst{};
    std::uint64_t dst48 = 0;  // dst, for comparing
    std::uint32_t dst_wqp = 0;
    cell_type type = cell_type::send;
    bool ack_req = false;
    std::uint16_t cell_count = 0, next_csn = 0;
    std::optional<cell::vamh> rdma{};
    std::span<std::byte> store{};
    bool own = true;  // store is the reassembler's
    std::size_t bytes = 0;
    std::uint32_t crc = 0;  // packet CRC of the cells so far
    std::uint64_t born_ns = 0;
  };

  slot* find(const packed_key& k) {
    if (hint_ < slots_.size() && slots_[hint_].used && slots_[hint_].key == k) return &slots_[hint_];
    for (std::size_t i = 0; i < slots_.size(); ++i)
      if (slots_[i].used && slots_[i].key == k) {
        hint_ = i;
        return &slots_[i];
      }
    return nullptr;
  }

  bool recently_delivered(const packed_key& k) const {
    for (std::size_t i = 0; i < history_used_; ++i)
      if (history_[i] == k) return true;
    return false;
  }

  slot* open(const cell_view& c, const packed_key& key, std::uint64_t now_ns, std::span<std::byte> dest) {
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
    s.dst = c.dst();
    s.dst48 = wire::load_be<6>(c.frame.data() + dst_offset);
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
    if (wire::load_be<6>(c.frame.data() + dst_offset) != s.dst48) return error_t{errc::invalid_field, dst_offset, "eth.dst"};
    return {};
  }

  // (Member by member: brace-initialising the whole result costs a clear of it per cell.)
  static push_result result(push_status st, const packed_key& k) {
    push_result r;
    r.status = st;
    unpack(k, r.key.emplace());
    return r;
  }

  // The cell's data is in place: account for it, and deliver on the last cell.
  push_result take(slot& s, const cell_view& c, std::uint32_t part_crc) {
    const std::size_t n = c.data.size();
    if (shift_.length() != c.at.packet_part()) shift_ = wire::crc::crc32c_shift(c.at.packet_part());
    s.crc = shift_.combine(s.crc, part_crc);
    s.bytes += n;
    held_ += n;
    ++s.next_csn;
    ++stats_.cells;
    if (!c.hdr.last) return result(push_status::accepted, s.key);
    if (s.crc != *c.packet_crc) return drop(s, {errc::packet_crc_mismatch, c.at.packet_crc, "packet_crc"});
    push_result r = result(push_status::delivered, s.key);
    r.packet = &(delivered_ = delivered_packet{unpack(s.key), s.dst, s.dst_wqp, s.type, s.ack_req, s.rdma, c.ack, c.idata, s.cell_count, s.store.first(s.bytes)});
    remember(s.key);
    release(s);
    ++stats_.delivered;
    return r;
  }

  // A cell whose CRC does not match: nothing changes (a slot it had just opened is closed).
  push_result bad_crc(const cell_view& c, slot* opened = nullptr) {
    if (opened) release(*opened);
    return reject({errc::cell_crc_mismatch, c.at.cell_crc, "crc"});
  }

  // ACK, NAK and page-fault delay cells are whole on arrival and may repeat (a re-ACK), so they
  // are delivered every time and hold no state.
  push_result control(const cell_view& c, const packed_key& key) {
    ++stats_.cells;
    ++stats_.delivered;
    push_result r = result(push_status::delivered, key);
    r.packet = &(delivered_ = delivered_packet{unpack(key), c.dst(), c.hdr.dst_wqp, c.hdr.type, c.hdr.ack_req, std::nullopt, c.ack, std::nullopt, 1, {}});
    return r;
  }

  void remember(const packed_key& k) {
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

  push_result reject(const error_t& e, std::optional<packed_key> key = std::nullopt) {
    ++stats_.rejected;
    ++stats_.by_error[static_cast<std::size_t>(e.code)];
    push_result r = key ? result(push_status::rejected, *key) : push_result{};
    r.status = push_status::rejected;
    r.error = e;
    return r;
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
  std::vector<packed_key> history_;
  std::vector<std::byte> storage_;
  std::size_t history_next_ = 0, history_used_ = 0;
  std::size_t in_flight_ = 0, held_ = 0, hint_ = 0;
  error_t open_error_{};
  delivered_packet delivered_{};  // what the last delivering push() returned
  wire::crc::crc32c_shift shift_{};  // by the last packet part's size
  // How a frame of a round decoded: not at all (taken alone), a cell whose CRC is computed with
  // the round's, or one longer than crc32c_batch batches (its CRC computed as it is placed).
  enum class decoded : std::uint8_t { no, small, large };
  // A round of push(frames, ...) (3 KiB of views).
  struct batch_space {
    std::array<cell_view, batch_round> views{};
    std::array<wire::crc::crc32c_job, batch_round> jobs{};
    std::array<decoded, batch_round> ok{};
  };
  std::vector<batch_space> batch_{};
  counters stats_{};
};

}  // namespace pushwire::cell
