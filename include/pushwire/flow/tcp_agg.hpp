// TCP receive aggregation (seed 004: "collecting TCP segments in a NIC without transferring
// state information to a host system ... a single aggregated TCP segment ... may be posted
// directly to a user space library"): the split-model driver's I/O unit joins a flow's
// in-sequence segments from the LAN into one segment before it pushes it to the host, which
// hands it to its TAP as one GSO packet (spec/split-model.md, TCP aggregation). What may join
// follows Linux's GRO (tcp_gro_receive, inet_gro_receive, ipv6_gro_receive). Sans-IO: frames
// in, frames out through a callback, time an argument. Bounded: max_flows open aggregations of
// at most max_bytes each; no state beyond the open aggregations.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include <pushwire/flow/core.hpp>
#include <pushwire/ib/tcp.hpp>

namespace pushwire::flow {

/// Why an open aggregation was handed out.
enum class agg_flush : std::uint8_t {
  flags,          ///< its last segment carried PSH or FIN (that segment joined first)
  short_segment,  ///< its last segment was shorter than the first: the sender had no more
  gap,            ///< the flow's next segment was not the next in sequence (a gap, or out of order)
  mismatch,       ///< the next segment's ACK, options, flags, TTL or hop limit, TOS or traffic class, or DF differ
  ip_id,          ///< the next segment's IPv4 ID did not follow (+1, or unchanged with DF)
  size,           ///< the next segment would take it beyond max_bytes, or was longer than the first
  timeout,        ///< it was open for `timeout`
  bypass,         ///< a segment of its flow that may not join went by (no payload, SYN, RST, URG, CWR, a bad checksum): it goes first
  evicted,        ///< a new flow needed its place (max_flows)
  flushed,        ///< flush_all()
};
inline constexpr std::size_t agg_flush_count = 10;
inline constexpr std::array<wire::named_value, agg_flush_count> agg_flush_names{{
    {agg_flush::flags, "flags"}, {agg_flush::short_segment, "short_segment"}, {agg_flush::gap, "gap"},
    {agg_flush::mismatch, "mismatch"}, {agg_flush::ip_id, "ip_id"}, {agg_flush::size, "size"}, {agg_flush::timeout, "timeout"},
    {agg_flush::bypass, "bypass"}, {agg_flush::evicted, "evicted"}, {agg_flush::flushed, "flushed"},
}};
constexpr std::span<const wire::named_value> wire_enum_names(agg_flush) { return agg_flush_names; }

struct tcp_agg_config {
  /// The largest aggregate's IP datagram, bytes (IPv4 total length; IPv6 40 + payload length):
  /// 576..65535.
  std::uint32_t max_bytes = 65535;
  /// How long an aggregation stays open after its first segment, ns.
  time_ns timeout = 50'000;
  /// Open aggregations at once, 1..4096; a new flow beyond them hands out the oldest.
  std::size_t max_flows = 64;
};

struct tcp_agg_counters {
  std::uint64_t frames = 0;      ///< frames pushed
  std::uint64_t joined = 0;      ///< segments that joined an open aggregation (the first of each not counted)
  std::uint64_t aggregates = 0;  ///< frames handed out with more than one segment
  std::uint64_t passed = 0;      ///< frames handed out as they came (alone, or not TCP)
  std::uint64_t bad_checksum = 0;  ///< TCP segments whose checksum was wrong (passed as they came)
  std::array<std::uint64_t, agg_flush_count> flushes{};  ///< aggregations handed out, by agg_flush
};

/// A frame handed out: one that came in, or an aggregate.
struct tcp_aggregate {
  std::span<const std::byte> frame;  ///< an Ethernet frame; valid until the next call
  std::uint16_t segments = 1;        ///< segments joined (1: the frame as it came)
  std::uint16_t mss = 0;             ///< with segments > 1: each joined segment's payload but the last's (at most this)
  /// A segment the aggregator held (alone or joined; 0 for a frame passed as it came): where its
  /// TCP header starts, and the bytes of its Ethernet, IP and TCP headers.
  std::uint16_t l4_offset = 0, header_bytes = 0;
  bool v6 = false;                   ///< a segment the aggregator held: IPv6
};

class tcp_aggregator {
 public:
  explicit tcp_aggregator(const tcp_agg_config& c = {}) : cfg_(c) {
    cfg_.max_bytes = std::clamp<std::uint32_t>(cfg_.max_bytes, 576, 65535);
    cfg_.max_flows = std::clamp<std::size_t>(cfg_.max_flows, 1, 4096);
  }

  /// A frame from the LAN at `now` (a plain frame, not a GSO one). Hands out through
  /// emit(const tcp_aggregate&), in order: the aggregation of its flow that it ends (and the
  /// oldest one, when a new flow needs its place), then the frame itself when it does not join
  /// or open one. `checksum_ok`: its TCP checksum is not to be verified here (virtio-net's
  /// DATA_VALID: verified already; NEEDS_CSUM: the local stack's, left to the receiver);
  /// otherwise it is, and a segment with a bad one passes untouched.
  template <class Emit>
  void push(std::span<const std::byte> frame, time_ns now, Emit&& emit, bool checksum_ok = false) {
    ++stats_.frames;
    segment s;
    const parse_result pr = parse(frame, checksum_ok, s);
    if (pr == parse_result::other) return pass(frame, emit);
    flow* f = find(s);
    if (pr != parse_result::joinable) {
      if (pr == parse_result::bad_checksum) ++stats_.bad_checksum;
      if (f) hand_out(*f, agg_flush::bypass, emit);
      return pass(frame, emit);
    }
    if (f) {
      if (const auto why = joins(*f, s)) {
        hand_out(*f, *why, emit);
      } else {
        append(*f, s);
        ++stats_.joined;
        if (s.flags & (ib::tcp_flag::psh | ib::tcp_flag::fin)) hand_out(*f, agg_flush::flags, emit);
        else if (s.payload.size() < f->mss) hand_out(*f, agg_flush::short_segment, emit);
        return;
      }
    }
    if (s.flags & (ib::tcp_flag::psh | ib::tcp_flag::fin)) return pass(frame, emit);  // alone: nothing can join it
    open(s, now, emit);
  }
  /// Hands out the aggregations open for `timeout` by `now`.
  template <class Emit>
  void expire(time_ns now, Emit&& emit) {
    for (flow& f : flows_)
      if (f.used && now >= f.opened + cfg_.timeout) hand_out(f, agg_flush::timeout, emit);
  }
  /// Hands out every open aggregation.
  template <class Emit>
  void flush_all(Emit&& emit) {
    for (flow& f : flows_)
      if (f.used) hand_out(f, agg_flush::flushed, emit);
  }
  /// When the oldest open aggregation times out, or nullopt.
  std::optional<time_ns> next_deadline() const {
    std::optional<time_ns> t;
    for (const flow& f : flows_)
      if (f.used && (!t || f.opened + cfg_.timeout < *t)) t = f.opened + cfg_.timeout;
    return t;
  }
  std::size_t open_flows() const { return used_; }
  const tcp_agg_counters& stats() const { return stats_; }
  const tcp_agg_config& config() const { return cfg_; }

 private:
  enum class parse_result : std::uint8_t { other, joinable, alone, bad_checksum };
  struct segment {
    std::span<const std::byte> head;     ///< Ethernet, IP and TCP headers
    std::span<const std::byte> payload;
    std::size_t ip = 0, l4 = 0;
    bool v6 = false;
    std::uint32_t seq = 0, ack = 0;
    std::uint8_t flags = 0;
    std::uint16_t id = 0;
  };
  struct flow {
    bool used = false;
    std::vector<std::byte> buf;  ///< the first segment's headers, then every payload joined
    std::size_t ip = 0, l4 = 0, head = 0;
    bool v6 = false;
    std::uint32_t next_seq = 0;
    std::uint16_t mss = 0, segments = 0, last_id = 0;
    int id_step = -1;  ///< IPv4 ID's step between segments: 1, 0 (constant, with DF), -1 (not yet known)
    time_ns opened = 0;
    std::uint64_t order = 0;  ///< when it opened, for eviction
  };

  /// Reads frame's headers into s. other: not an IPv4 or IPv6 TCP segment this may judge (a
  /// fragment, IP options, IPv6 extension headers, short or inconsistent lengths, a bad IPv4
  /// header checksum); alone: a segment that may not join (no payload, SYN, RST, URG, CWR, no
  /// ACK); bad_checksum: its TCP checksum is wrong.
  static parse_result parse(std::span<const std::byte> frame, bool checksum_ok, segment& s) {
    const auto at = ib::find_ip(frame);
    if (!at) return parse_result::other;
    s.ip = at->offset, s.v6 = at->v6;
    const std::byte* ip = frame.data() + s.ip;
    std::size_t end = 0;
    if (s.v6) {
      if (wire::read<ib::ipv6_header, "nxt">(ip) != ib::ip_proto_tcp) return parse_result::other;
      end = s.ip + 40 + wire::read<ib::ipv6_header, "plen">(ip);
      s.l4 = s.ip + 40;
    } else {
      if (wire::read<ib::ipv4_header, "hdr_len">(ip) != 5 || wire::read<ib::ipv4_header, "proto">(ip) != ib::ip_proto_tcp ||
          wire::read<ib::ipv4_header, "flags_mf">(ip) || wire::read<ib::ipv4_header, "frag_offset">(ip) != 0)
        return parse_result::other;
      if (ib::inet_fold(ib::inet_sum(frame.subspan(s.ip, 20))) != 0) return parse_result::other;
      end = s.ip + wire::read<ib::ipv4_header, "len">(ip);
      s.l4 = s.ip + 20;
      s.id = wire::read<ib::ipv4_header, "id">(ip);
    }
    if (end > frame.size() || end < s.l4 + 20) return parse_result::other;
    const std::byte* th = frame.data() + s.l4;
    const std::size_t hlen = std::size_t{wire::read<ib::tcp_header, "hdr_len">(th)} * 4;
    if (hlen < 20 || s.l4 + hlen > end) return parse_result::other;
    s.head = frame.first(s.l4 + hlen);
    s.payload = frame.subspan(s.l4 + hlen, end - s.l4 - hlen);
    s.seq = wire::read<ib::tcp_header, "seq">(th);
    s.ack = wire::read<ib::tcp_header, "ack">(th);
    s.flags = wire::read<ib::tcp_header, "flags">(th);
    if (!checksum_ok) {
      const std::span<const std::byte> l4 = frame.subspan(s.l4, end - s.l4);
      if (ib::inet_fold(ib::inet_sum(l4, ib::pseudo_sum(frame.subspan(s.ip), s.v6, ib::ip_proto_tcp, static_cast<std::uint32_t>(l4.size())))) != 0)
        return parse_result::bad_checksum;
    }
    using namespace ib::tcp_flag;
    if (s.payload.empty() || (s.flags & (syn | rst | urg | cwr)) || !(s.flags & ack)) return parse_result::alone;
    return parse_result::joinable;
  }

  /// The open aggregation of s's flow (the same Ethernet header, addresses and ports), or nullptr.
  flow* find(const segment& s) {
    for (flow& f : flows_) {
      if (!f.used || f.v6 != s.v6 || f.l4 != s.l4) continue;
      const std::byte* a = f.buf.data();
      const std::byte* b = s.head.data();
      const std::size_t addr = s.v6 ? 8 : 12, addr_len = s.v6 ? 32 : 8;
      if (std::equal(a, a + s.ip, b) && std::equal(a + s.ip + addr, a + s.ip + addr + addr_len, b + s.ip + addr) &&
          std::equal(a + s.l4, a + s.l4 + 4, b + s.l4))
        return &f;
    }
    return nullptr;
  }
  /// Why s may not join f, or nullopt when it may.
  std::optional<agg_flush> joins(const flow& f, const segment& s) const {
    const std::byte* a = f.buf.data();
    const std::byte* b = s.head.data();
    if (s.seq != f.next_seq) return agg_flush::gap;
    // the same IP header but its lengths, ID and checksum; the same TCP header but its sequence
    // number, flags PSH and FIN, window and checksum
    if (s.v6) {
      if (!std::equal(a + f.ip, a + f.ip + 4, b + s.ip) || a[f.ip + 7] != b[s.ip + 7]) return agg_flush::mismatch;
    } else if (a[f.ip + 1] != b[s.ip + 1] || a[f.ip + 8] != b[s.ip + 8] || ((a[f.ip + 6] ^ b[s.ip + 6]) & std::byte{0x40}) != std::byte{0}) {
      return agg_flush::mismatch;  // TOS, TTL, DF
    }
    if (s.head.size() != f.head || wire::read<ib::tcp_header, "ack">(a + f.l4) != s.ack ||
        ((std::to_integer<std::uint8_t>(a[f.l4 + 13]) ^ s.flags) & ~(ib::tcp_flag::psh | ib::tcp_flag::fin)) ||
        !std::equal(a + f.l4 + 20, a + f.head, b + s.l4 + 20))
      return agg_flush::mismatch;
    if (!s.v6) {
      const bool df = (b[s.ip + 6] & std::byte{0x40}) != std::byte{0};
      const int step = static_cast<std::uint16_t>(s.id - f.last_id) == 1 ? 1 : (s.id == f.last_id && df) ? 0 : -2;
      if (step == -2 || (f.id_step >= 0 && step != f.id_step)) return agg_flush::ip_id;
    }
    if (s.payload.size() > f.mss || f.buf.size() - f.ip + s.payload.size() > cfg_.max_bytes) return agg_flush::size;
    return std::nullopt;
  }
  template <class Emit>
  void open(const segment& s, time_ns now, Emit& emit) {
    flow* f = nullptr;
    for (flow& c : flows_)
      if (!c.used) f = &c;
    if (!f && flows_.size() < cfg_.max_flows) f = &flows_.emplace_back();
    if (!f) {
      f = &*std::min_element(flows_.begin(), flows_.end(), [](const flow& x, const flow& y) { return x.order < y.order; });
      hand_out(*f, agg_flush::evicted, emit);
    }
    f->used = true;
    ++used_;
    f->buf.assign(s.head.begin(), s.head.end());
    f->buf.reserve(std::size_t{s.l4} + 60 + cfg_.max_bytes);
    f->ip = s.ip, f->l4 = s.l4, f->head = s.head.size(), f->v6 = s.v6;
    f->buf.insert(f->buf.end(), s.payload.begin(), s.payload.end());
    f->next_seq = s.seq + static_cast<std::uint32_t>(s.payload.size());
    f->mss = static_cast<std::uint16_t>(std::min<std::size_t>(s.payload.size(), 65535));
    f->segments = 1;
    f->last_id = s.id;
    f->id_step = -1;
    f->opened = now;
    f->order = next_order_++;
  }
  void append(flow& f, const segment& s) {
    f.buf.insert(f.buf.end(), s.payload.begin(), s.payload.end());
    f.next_seq += static_cast<std::uint32_t>(s.payload.size());
    if (!f.v6) f.id_step = static_cast<std::uint16_t>(s.id - f.last_id) == 1 ? 1 : 0, f.last_id = s.id;
    ++f.segments;
    // the latest segment's flags PSH and FIN, and its window
    std::byte* th = f.buf.data() + f.l4;
    th[13] = th[13] | static_cast<std::byte>(s.flags & (ib::tcp_flag::psh | ib::tcp_flag::fin));
    std::copy(s.head.begin() + static_cast<std::ptrdiff_t>(s.l4 + 14), s.head.begin() + static_cast<std::ptrdiff_t>(s.l4 + 16), th + 14);
  }
  /// Hands out f (its headers rebuilt when segments joined) and closes it.
  template <class Emit>
  void hand_out(flow& f, agg_flush why, Emit& emit) {
    ++stats_.flushes[static_cast<std::size_t>(why)];
    tcp_aggregate a;
    a.frame = f.buf;
    a.segments = f.segments;
    if (f.segments > 1) {
      ++stats_.aggregates;
      std::byte* ip = f.buf.data() + f.ip;
      const std::size_t l4_len = f.buf.size() - f.l4;
      if (f.v6) {
        wire::store_be16(ip + 4, static_cast<std::uint16_t>(l4_len));
      } else {
        wire::store_be16(ip + 2, static_cast<std::uint16_t>(l4_len + 20));
        wire::store_be16(ip + 10, 0);
        wire::store_be16(ip + 10, ib::inet_fold(ib::inet_sum(std::span<const std::byte>(ip, 20))));
      }
      std::byte* th = f.buf.data() + f.l4;
      wire::store_be16(th + 16, 0);
      const std::span<const std::byte> l4(th, l4_len);
      wire::store_be16(th + 16, ib::inet_fold(ib::inet_sum(l4, ib::pseudo_sum(std::span<const std::byte>(ip, f.v6 ? 40 : 20), f.v6, ib::ip_proto_tcp,
                                                                             static_cast<std::uint32_t>(l4_len)))));
      a.mss = f.mss;
    } else {
      ++stats_.passed;
    }
    a.v6 = f.v6, a.l4_offset = static_cast<std::uint16_t>(f.l4), a.header_bytes = static_cast<std::uint16_t>(f.head);
    f.used = false;
    --used_;
    emit(std::as_const(a));
  }
  template <class Emit>
  void pass(std::span<const std::byte> frame, Emit& emit) {
    ++stats_.passed;
    tcp_aggregate a;
    a.frame = frame;
    emit(std::as_const(a));
  }

  tcp_agg_config cfg_;
  std::vector<flow> flows_;
  std::size_t used_ = 0;
  std::uint64_t next_order_ = 0;
  tcp_agg_counters stats_{};
};

}  // namespace pushwire::flow
