// One port of the reference RNIC (spec/rnic.md §7): what it puts on the wire and what it takes
// from it, in both framings. Transmitting, it builds a packet's frame (RoCEv2: Ethernet, IP, UDP,
// the transport headers and the ICRC, the payload gathered in the same pass as the ICRC; cells:
// the packet's cell form, segmented) into a buffer from its pool and queues it: responses before
// requests, plain ACKs held for coalescing. Receiving, it validates a frame (RoCEv2: headers,
// addressing, ICRC; cells: cell CRC, reassembly, packet CRC) and hands on a flow::packet with
// an rx_context saying where it came from, placing a WRITE's payload while it verifies the ICRC
// where the responder says where it goes (cut-through).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include <pushwire/cell/reassembler.hpp>
#include <pushwire/cell/segmenter.hpp>
#include <pushwire/flow/frame.hpp>
#include <pushwire/flow/session.hpp>
#include <pushwire/ib/entropy.hpp>
#include <pushwire/ib/gid.hpp>
#include <pushwire/ib/roce.hpp>
#include <pushwire/rnic/config.hpp>
#include <pushwire/rnic/qp.hpp>

namespace pushwire::rnic {

/// Where a received packet came from (per packet: an argument of the calls that handle it, never
/// kept by the device).
struct rx_context {
  /// The sender: the port the packet arrived on, the sender's MAC and (RoCE) its GID.
  address_vector from{};
  /// RoCE: the GID the packet was sent to (one of the port's).
  ib::gid to{};
  /// RoCE: the UDP 5-tuple (sessions, spec/rnic.md §12).
  flow::five_tuple tuple{};
  /// RoCE: the packet's IP header (IPv6: 40 bytes; IPv4: 20 and its options), for the GRH space
  /// of a UD receive (ib::write_grh); empty for cells.
  std::span<const std::byte> ip{};
  bool v6 = false;
  /// RoCE: the whole frame (a session QP holds a copy of an early one).
  std::span<const std::byte> frame{};
  /// Cut-through: the placement the port already made while it verified the ICRC.
  std::optional<flow::qp_action::place> preplaced{};
  bool cells() const { return ip.empty(); }
};

/// Why a frame a port took was dropped before it reached a QP.
enum class rx_drop : std::uint8_t { none, bad_frame, not_mine };

class port {
 public:
  /// RoCE payloads from this size up may be placed while their ICRC is computed (cut-through;
  /// below it, verifying first and copying after costs no more).
  static constexpr std::size_t cut_through_min = 256;
  /// Requests that go before coalesced ACKs when they leave together (take_frame).
  static constexpr std::size_t short_burst = 16;
  /// Frame buffers a port keeps for reuse.
  static constexpr std::size_t pool_size = 256;

  port(const port_config& c, const device_config& d, std::uint8_t index)
      : cfg_(c), index_(index), tx_queue_(d.tx_queue), rx_queue_(std::max<std::size_t>(d.rx_queue, 1)), ack_delay_(d.ack_delay), staging_(d.bus.rate > 0) {
    if (c.framing == framing::cell)
      reasm_ = std::make_unique<cell::reassembler>(cell::reassembly_limits{
          .max_packets = 64, .max_packet_bytes = d.cell_max_packet, .max_bytes = 64 * std::size_t{d.cell_max_packet},
          .max_age_ns = d.cell_reassembly_timeout, .max_cell_payload = c.cell_payload, .history = 64});
  }
  const port_config& config() const { return cfg_; }
  bool cells() const { return cfg_.framing == framing::cell; }

  // ---- transmitting -----------------------------------------------------------------------------
  /// Room for new requests and responses (fewer than tx_queue frames waiting).
  bool room() const { return tx_.size() < tx_queue_; }
  /// Frames waiting for the wire.
  std::size_t pending() const { return tx_.size() + responses_.size(); }

  /// Whether a request (or a response) may still be queued: fewer than twice tx_queue frames of
  /// its kind wait. Beyond that the device drops what it would send (dropped_tx_full).
  bool accepts(bool request) const { return request ? tx_.size() < 2 * tx_queue_ : responses_.size() + responses_on_bus_ < 2 * tx_queue_; }
  /// Request packets of up to `mtu` payload bytes that accepts(true) still takes, one after
  /// another: a frame each, or (cells) at most a frame per cell_payload bytes and one more for
  /// the headers (a packet is taken whole while fewer than twice tx_queue frames wait).
  std::size_t request_room(std::uint32_t mtu) const {
    const std::size_t left = 2 * tx_queue_ - std::min(tx_.size(), 2 * tx_queue_);
    const std::size_t per = cells() ? mtu / std::max<std::size_t>(cfg_.cell_payload, 1) + 2 : 1;
    return (left + per - 1) / per;
  }
  /// Frame buffers the pool holds.
  std::size_t pooled() const { return pool_.size(); }

  /// Builds and queues the frames of packet p from QP `qpn` to `to` (RoCE: its UDP source port
  /// is `sport` when given). `payload(f)` visits the payload's len bytes as host segments
  /// f(byte*, n) and is false when a key refused them. False when nothing was queued: the
  /// payload is not readable, or the packet has no frame.
  template <class Payload>
  bool send(const flow::packet& p, std::uint32_t qpn, const address_vector& to, std::uint32_t len,
            std::optional<std::uint16_t> sport, time_ns now, device_counters& stats, Payload&& payload) {
    ++stats.frames_out;
    const std::uint8_t tc = class_of(p, to);
    return cells() ? send_cells(p, qpn, to, len, stats, now, tc, payload) : send_roce(p, qpn, to, len, sport, stats, now, tc, payload);
  }
  /// The traffic class of packet p to `to` (spec/qos.md §4): its SL and traffic class through
  /// the port's class model (a CNP: the port's cnp_dscp).
  std::uint8_t class_of(const flow::packet& p, const address_vector& to) const {
    const std::uint8_t tclass = p.info().is(ib::op_class::cnp) ? static_cast<std::uint8_t>(cfg_.cnp_dscp << 2) : to.traffic_class;
    return model().class_of(to.sl, tclass);
  }
  /// The port's class model (the default one when it has none).
  const flow::qos_map& model() const {
    static const flow::qos_map fallback{};
    return cfg_.classes ? *cfg_.classes : fallback;
  }
  /// Per traffic class: frames and bytes sent, bytes held.
  const std::array<class_counters, flow::traffic_classes>& class_stats() const { return classes_; }
  /// Plain ACKs replaced by a newer one of their QP before they left (ready()).
  std::uint64_t acks_superseded() const { return superseded_; }
  /// Whether request frames wait for the wire (a class scheduler builds the next only then).
  bool requests_queued() const { return !tx_.empty() || !staged_.empty(); }

  /// The host bus (device_config::bus): a frame built is staged until its gather has been on
  /// the bus; the engine takes it (take_staged) and gives it back when it is ready (release).
  struct staged {
    frame_bytes frame;
    std::uint8_t tc;
    std::uint32_t qpn;        ///< its QP
    bool response;            ///< a responder's frame (ACK, NAK, READ or atomic response)
    bool urgent;              ///< a response that is not a plain ACK
    std::uint32_t bytes;      ///< what its gather reads from host memory: its payload's bytes
    std::uint32_t ack_of;     ///< a plain RC ACK: its QP (ready()), else no_ack
  };
  bool has_staged() const { return !staged_.empty(); }
  staged take_staged() {
    staged s = std::move(staged_.front());
    staged_.pop_front();
    ++(s.response ? responses_on_bus_ : requests_on_bus_);
    return s;
  }
  /// Request frames on the host bus (taken, not yet released).
  std::size_t requests_on_bus() const { return requests_on_bus_; }
  void release(staged&& s, time_ns now) {
    --(s.response ? responses_on_bus_ : requests_on_bus_);
    ready(s.response, s.urgent, std::move(s.frame), s.tc, now, s.ack_of);
  }

  /// Whether the port's responses are plain ACKs still held for coalescing at `now`.
  bool acks_held(time_ns now) const {
    return ack_delay_ && tx_.empty() && responses_.size() == 1 && !urgent_ && !released_ && now < responses_since_ + ack_delay_;
  }
  /// When held ACKs must leave, or nullopt.
  std::optional<time_ns> next_deadline(time_ns now) const {
    return acks_held(now) ? std::optional<time_ns>{responses_since_ + ack_delay_} : std::nullopt;
  }
  /// The frame that leaves next (responses before requests; coalesced ACKs behind the short
  /// burst of requests that releases them), or nullptr. take() removes it.
  const frame_bytes* next(time_ns now) {
    std::deque<frame_bytes>* q = next_queue(now);
    return q ? &q->front() : nullptr;
  }
  /// Moves out the frame next() names (it must have named one).
  frame_bytes take(time_ns now) {
    std::deque<frame_bytes>& q = *next_queue(now);
    if (&q == &tx_ && !responses_.empty()) released_ = true;
    frame_bytes f = std::move(q.front());
    q.pop_front();
    std::deque<std::uint8_t>& tcs = &q == &tx_ ? tx_tc_ : responses_tc_;
    class_counters& c = classes_[tcs.front()];
    tcs.pop_front();
    if (&q == &responses_) responses_ack_.pop_front();
    ++c.frames;
    c.bytes += f.size();
    c.held -= f.size();
    return f;
  }
  /// Returns a frame buffer to the pool.
  void recycle(frame_bytes&& b) {
    if (pool_.size() < pool_size) pool_.push_back(std::move(b));
  }

  // ---- receiving --------------------------------------------------------------------------------
  /// Takes a frame that arrived at `now`. A valid packet for this port is handed to
  /// `deliver(const flow::packet&, const rx_context&)`, before receive() returns and while its
  /// payload is valid. `place(const flow::packet&, const rx_context&, copy)` is asked, for a RoCE
  /// WRITE MIDDLE or LAST packet of cut_through_min bytes or more, where its payload goes: if its
  /// responder would place it now, it visits that memory with copy(byte*, n) and returns the
  /// placement (nullopt otherwise); the copy computes the ICRC as it goes. Returns why a frame
  /// was dropped.
  template <class Place, class Deliver>
  rx_drop receive(std::span<const std::byte> frame, time_ns now, Place&& place, Deliver&& deliver) {
    return cells() ? receive_cell(frame, now, deliver) : receive_roce(frame, place, deliver);
  }
  /// What placing an arriving frame costs the host bus (device_config::bus): its flow (the
  /// destination QP; 0 for cells), its traffic class, and its payload's bytes (a cell's whole
  /// size); or why it is dropped at once (a RoCE frame that does not parse, or is not for this
  /// port), so it never takes the bus's time.
  struct rx_job {
    std::uint32_t flow = 0;
    std::uint8_t tc = 0;
    std::uint32_t bytes = 0;
    rx_drop drop = rx_drop::none;
  };
  rx_job placement_of(std::span<const std::byte> frame) const {
    if (cells()) return {0, 0, static_cast<std::uint32_t>(frame.size())};
    ib::roce_view v;
    if (ib::inspect(frame, v, {.crc = wire::crc_check::skip}).code != wire::errc{}) return {.drop = rx_drop::bad_frame};
    const std::byte* bth = v.frame.data() + v.bth_offset;
    if (!mine(v, wire::read<ib::bth, "p_key">(bth))) return {.drop = rx_drop::not_mine};
    const auto tclass = ib::traffic_class_of(frame).value_or(0);
    return {static_cast<std::uint32_t>(wire::read<ib::bth, "destqp">(bth)), model().class_of(0, tclass), static_cast<std::uint32_t>(v.payload.size())};
  }

  // ---- the receive pipeline's queue (spec/qos.md §9) --------------------------------------------
  /// Frames that arrived and wait for the device's receive pipeline.
  std::size_t rx_waiting() const { return rx_.size(); }
  /// Keeps a copy of an arrived frame for the pipeline; false (nothing kept) when
  /// device_config::rx_queue frames wait already.
  bool hold(std::span<const std::byte> frame) {
    if (rx_.size() >= rx_queue_) return false;
    frame_bytes b = buffer(frame.size());
    std::copy(frame.begin(), frame.end(), b.begin());
    rx_.push_back(std::move(b));
    return true;
  }
  /// Moves out the oldest frame waiting (one must wait); recycle() it after.
  frame_bytes take_held() {
    frame_bytes f = std::move(rx_.front());
    rx_.pop_front();
    return f;
  }
  /// Parses a RoCE frame this port accepted before (a held session message) into its packet
  /// and context; false when it no longer parses.
  bool reparse(std::span<const std::byte> frame, flow::packet& p, rx_context& rx) const {
    ib::roce_view v;
    if (ib::inspect(frame, v, {.crc = wire::crc_check::skip}).code != wire::errc{}) return false;
    p = flow::from_roce(v);
    rx = context_of(v);
    return true;
  }
  /// Ages out incomplete cell packets.
  void expire(time_ns now) {
    if (reasm_) reasm_->expire(now);
  }

 private:
  template <class Payload>
  bool send_roce(const flow::packet& p, std::uint32_t qpn, const address_vector& to, std::uint32_t len,
                 std::optional<std::uint16_t> sport, device_counters& stats, time_ns now, std::uint8_t tc, Payload& payload) {
    if (const ib::frame_template* t = template_for(qpn, to, p, sport)) return send_templated(*t, p, qpn, len, stats, now, tc, payload);
    // IPv6: the UDP checksum covers the payload, so the payload goes in first and build()
    // checksums the whole frame.
    ib::roce_packet r = flow::to_roce(p, frame_base(qpn, to, p));
    if (sport) r.udp.srcport = *sport;
    const std::size_t head = ib::payload_offset(r);
    frame_bytes f = buffer(head + len + 3 + ib::detail::icrc_size);  // pad at most 3
    r.payload = std::span<const std::byte>(f.data() + head, len);
    std::size_t at = head;
    if (len && !payload([&](std::byte* s, std::size_t k) {
          std::memcpy(f.data() + at, s, k);
          at += k;
        })) {
      recycle(std::move(f));
      return false;  // a local key was deregistered under a posted request: nothing is sent
    }
    const auto n = ib::build(r, f);
    if (!n) {
      recycle(std::move(f));
      return false;
    }
    f.resize(*n);
    stats.bytes_out += f.size();
    queue(p, std::move(f), now, tc, qpn, len);
    return true;
  }
  /// An IPv4 frame from its destination's template: the headers copied and completed, then one
  /// pass that copies the payload in and continues the ICRC over it.
  template <class Payload>
  bool send_templated(const ib::frame_template& t, const flow::packet& p, std::uint32_t qpn, std::uint32_t len, device_counters& stats,
                      time_ns now, std::uint8_t tc, Payload& payload) {
    const ib::opcode_info& op = p.info();
    const std::size_t pad = ib::detail::pad_for(len);
    frame_bytes f = buffer(t.size + op.header_len + len + pad + ib::detail::icrc_size);
    ib::ext_headers ext;
    flow::ext_of(p, ext);
    const auto head = ib::build_headers(t, flow::bth_of(p), ext, op, len, f);
    if (!head) {
      recycle(std::move(f));
      return false;
    }
    std::uint32_t crc = ib::icrc_headers(std::span<const std::byte>(f.data() + t.ip_offset, *head - t.ip_offset), false, t.ip_len);
    std::size_t at = *head;
    if (len && !payload([&](std::byte* s, std::size_t k) {
          crc = wire::crc::crc32_copy(std::span<std::byte>(f.data() + at, k), std::span<const std::byte>(s, k), crc);
          at += k;
        })) {
      recycle(std::move(f));
      return false;  // a local key was deregistered under a posted request: nothing is sent
    }
    std::byte* const end = f.data() + *head + len;
    for (std::size_t i = 0; i < pad; ++i) end[i] = std::byte{0};
    crc = wire::crc::crc32(std::span<const std::byte>(end, pad), crc);
    wire::store_le32(end + pad, crc);
    stats.bytes_out += f.size();
    queue(p, std::move(f), now, tc, qpn, len);
    return true;
  }
  /// The template of the frames qpn sends to `to` with p's destination QP and class (CNP or
  /// not), made on first use and kept in a direct-mapped table; nullptr for an IPv6 destination.
  const ib::frame_template* template_for(std::uint32_t qpn, const address_vector& to, const flow::packet& p,
                                         std::optional<std::uint16_t> sport) {
    const bool cnp = p.info().is(ib::op_class::cnp);
    template_slot& s = templates_[(static_cast<std::uint32_t>(qpn ^ (p.dest_qp << 7)) * 0x9E3779B1u) >> (32 - template_bits)];
    if (!(s.valid && s.qpn == qpn && s.dest_qp == p.dest_qp && s.cnp == cnp && s.sport == sport && s.to == to)) {
      ib::roce_packet b = frame_base(qpn, to, p);
      if (sport) b.udp.srcport = *sport;
      s = {.valid = true, .no_template = b.v6, .cnp = cnp, .qpn = qpn, .dest_qp = p.dest_qp, .sport = sport, .to = to};
      if (!b.v6) {
        const auto t = ib::make_template(b);
        if (t) s.t = *t;
        else s.no_template = true;  // not expected (frame_base sets no VLAN, options or given fields): build() every time
      }
    }
    return s.no_template ? nullptr : &s.t;
  }
  ib::roce_packet frame_base(std::uint32_t qpn, const address_vector& to, const flow::packet& p) const {
    ib::roce_packet b{};
    b.eth.src = cfg_.mac;
    b.eth.dst = to.dmac;
    const ib::gid* g = cfg_.gid_at(to.sgid_index);
    const ib::gid& sgid = g ? *g : cfg_.gid;
    const bool v6 = !ib::is_v4(to.dgid) || !ib::is_v4(sgid);
    b.v6 = v6;
    // DSCP: the traffic class's six high bits (a CNP: the port's cnp_dscp); ECN: the port's,
    // else the traffic class's two low bits (spec/qos.md §1).
    const std::uint8_t ecn = cfg_.ecn != ib::ecn::not_ect ? static_cast<std::uint8_t>(cfg_.ecn) : static_cast<std::uint8_t>(to.traffic_class & 3);
    const std::uint8_t dscp = p.info().is(ib::op_class::cnp) ? static_cast<std::uint8_t>(cfg_.cnp_dscp & 63) : static_cast<std::uint8_t>(to.traffic_class >> 2);
    if (v6) {
      std::copy(sgid.begin(), sgid.end(), b.ip6.src.begin());
      std::copy(to.dgid.begin(), to.dgid.end(), b.ip6.dst.begin());
      b.ip6.hlim = to.hop_limit;
      b.ip6.tclass = static_cast<std::uint8_t>(dscp << 2 | ecn);
    } else {
      const auto s4 = ib::v4_of(sgid), d4 = ib::v4_of(to.dgid);
      std::copy(s4.begin(), s4.end(), b.ip4.src.begin());
      std::copy(d4.begin(), d4.end(), b.ip4.dst.begin());
      b.ip4.ttl = to.hop_limit;
      b.ip4.dsfield_dscp = dscp;
      b.ip4.dsfield_ecn = ecn;
      b.ip4.flags_df = true;  // as rxe, and as Linux sends a datagram of an unconnected socket (identification 0): net/udp.hpp
    }
    const std::uint32_t fl = to.flow_label ? to.flow_label : ib::flow_label(qpn, p.dest_qp);
    b.udp.srcport = cfg_.udp_sport ? cfg_.udp_sport : ib::udp_sport(fl);
    if (v6) b.ip6.flow = fl;
    return b;
  }
  template <class Payload>
  bool send_cells(const flow::packet& p0, std::uint32_t qpn, const address_vector& to, std::uint32_t len, device_counters& stats,
                  time_ns now, std::uint8_t tc, Payload& payload) {
    flow::packet p = p0;
    p.src_qp = qpn;  // cells name the sending QP (its WQP)
    // Gathered now: a piece is valid only while the payload walk hands it over (dma::move's
    // bounce buffer is reused by the next piece).
    std::vector<std::byte> body;
    body.reserve(len);
    if (len && !payload([&](std::byte* s, std::size_t n) { body.insert(body.end(), s, s + n); })) return false;
    std::vector<std::span<const std::byte>> pieces;
    if (!body.empty()) pieces.emplace_back(body);
    cell::packet_spec base{};
    base.dst = to.dmac;
    base.src = cfg_.mac;
    const auto form = flow::to_cell_form(p, base);
    if (!form) return false;
    if (form->head_len) pieces.insert(pieces.begin(), form->header_bytes());
    auto seg = cell::segmenter::make(form->spec, std::span<const std::span<const std::byte>>(pieces), cfg_.cell_payload);
    if (!seg) return false;
    // In rounds: the cells' CRCs are computed together (cell::segmenter::next(frames, sizes)).
    constexpr std::size_t round = cell::segmenter::batch_round;
    std::array<frame_bytes, round> fs;
    std::array<std::span<std::byte>, round> outs;
    std::array<std::size_t, round> sizes{};
    while (!seg->done()) {
      const std::size_t k = std::min(round, seg->cells_left());
      for (std::size_t i = 0; i < k; ++i) fs[i] = buffer(seg->max_frame_size()), outs[i] = fs[i];
      const auto n = seg->next(std::span<const std::span<std::byte>>(outs.data(), k), sizes);
      if (!n || *n != k) return false;
      for (std::size_t i = 0; i < k; ++i) {
        frame_bytes& f = fs[i];
        f.resize(sizes[i]);
        stats.bytes_out += f.size();
        const auto part = static_cast<std::uint32_t>(len ? f.size() : 0);  // (a cell's share of the payload, its header counted)
        queue(p, std::move(f), now, tc, qpn, part);
      }
    }
    return true;
  }
  void queue(const flow::packet& p, frame_bytes&& f, time_ns now, std::uint8_t tc, std::uint32_t qpn, std::uint32_t len) {
    class_counters& c = classes_[tc & 7];
    c.held += f.size();
    c.max_held = std::max(c.max_held, c.held);
    const bool response = !p.info().request;
    const bool urgent = response && !(p.info().is(ib::op_class::ack) && !p.info().is(ib::op_class::atomic) &&
                                      ib::syndrome_of(p.aeth).kind() == ib::aeth_kind::ack);
    // An RC QP's plain ACK may replace its older one still queued (an RC QP has one peer).
    const std::uint32_t ack_of = p.opcode == ib::opcode::rc_acknowledge && !urgent ? qpn : no_ack;
    if (staging_) {
      staged_.push_back({std::move(f), static_cast<std::uint8_t>(tc & 7), qpn, response, urgent, len, ack_of});
      return;
    }
    ready(response, urgent, std::move(f), tc & 7, now, ack_of);
  }
  static constexpr std::uint32_t no_ack = ~std::uint32_t{0};
  /// How far back among the queued responses a plain ACK looks for an older one of its QP.
  static constexpr std::size_t supersede_window = 64;
  /// A frame ready for the wire joins its queue. A plain ACK of RC QP `ack_of` (no_ack: any
  /// other frame) removes one of the same QP's among the last supersede_window responses
  /// queued: ACKs are cumulative, and the newer one says all the older one did (its PSN, MSN and
  /// credits are the responder's latest). So receives for a QP handled in one burst leave one
  /// ACK.
  void ready(bool response, bool urgent, frame_bytes&& f, std::uint8_t tc, time_ns now, std::uint32_t ack_of = no_ack) {
    if (!response) {
      tx_.push_back(std::move(f));
      tx_tc_.push_back(tc);
      return;
    }
    bool stream = false;
    if (ack_of != no_ack) {
      const std::size_t n = responses_.size(), from = n > supersede_window ? n - supersede_window : 0;
      for (std::size_t i = n; i-- > from;)
        if (responses_ack_[i] == ack_of) {
          // The older one goes; the newer one joins at the end, behind whatever the QP queued
          // after the older (READ responses carry MSNs the ACK's must not precede). Two ACKs are
          // a stream, which ACK coalescing does not hold.
          classes_[responses_tc_[i]].held -= responses_[i].size();
          recycle(std::move(responses_[i]));
          const auto at = static_cast<std::ptrdiff_t>(i);
          responses_.erase(responses_.begin() + at);
          responses_tc_.erase(responses_tc_.begin() + at);
          responses_ack_.erase(responses_ack_.begin() + at);
          stream = true;
          ++superseded_;
          break;
        }
    }
    responses_tc_.push_back(tc);
    responses_ack_.push_back(ack_of);
    if (responses_.empty()) responses_since_ = now, urgent_ = false, released_ = false;
    if (urgent) urgent_ = true;
    if (stream) released_ = true;
    responses_.push_back(std::move(f));
  }

  std::deque<frame_bytes>* next_queue(time_ns now) {
    if (acks_held(now)) return nullptr;
    const bool behind = !urgent_ && ack_delay_ && !tx_.empty() && tx_.size() <= short_burst;
    std::deque<frame_bytes>& q = !responses_.empty() && !behind ? responses_ : tx_;
    return q.empty() ? nullptr : &q;
  }
  frame_bytes buffer(std::size_t n) {
    frame_bytes b;
    if (!pool_.empty()) b = std::move(pool_.back()), pool_.pop_back();
    b.resize(n);
    return b;
  }

  // Reads only the fields a QP uses, each where the frame holds it (decoding whole headers costs
  // a tenth of a small SEND's handling).
  /// Whether a RoCE frame is addressed to this port: its MAC, one of its GIDs, the default
  /// partition (the only one).
  bool mine(const ib::roce_view& v, std::uint16_t pkey) const {
    return wire::read<wire::eth_header, "dst">(v.frame.data()) == cfg_.mac && cfg_.has_gid(v.destination_gid()) && pkey == 0xFFFF;
  }
  rx_context context_of(const ib::roce_view& v) const {
    rx_context rx;
    rx.from.port = index_;
    rx.from.dmac = wire::read<wire::eth_header, "src">(v.frame.data());
    rx.from.dgid = v.source_gid();
    rx.to = v.destination_gid();
    const std::byte* udp = v.frame.data() + v.udp_offset;
    rx.tuple = {.src = rx.from.dgid, .dst = rx.to, .sport = wire::read<ib::udp_header, "srcport">(udp),
                .dport = wire::read<ib::udp_header, "dstport">(udp)};
    rx.ip = v.frame.subspan(v.ip_offset, v.ip_header_len);
    rx.v6 = v.v6;
    rx.frame = v.frame;
    return rx;
  }
  template <class Place, class Deliver>
  rx_drop receive_roce(std::span<const std::byte> frame, Place& place, Deliver& deliver) {
    ib::roce_view v;
    if (ib::inspect(frame, v, {.crc = wire::crc_check::skip}).code != wire::errc{}) return rx_drop::bad_frame;
    const flow::packet p = flow::from_roce(v);
    rx_context rx = context_of(v);
    const bool mine = this->mine(v, p.p_key);
    bool verified = false;
    if (mine && v.payload.size() >= cut_through_min && p.known() && p.info().is(ib::op_class::write) && !p.info().starts()) {
      // Cut-through (spec/rnic.md §7): the payload goes to its place in the pass that computes
      // the ICRC. The place is the message's, fixed by the verified packets before it, never
      // this packet's own (unverified) addressing; a bad ICRC drops the frame as always, and
      // the bytes written lie where this PSN's payload goes, which its resend overwrites before
      // the message can complete.
      const std::byte* ip = v.frame.data() + v.ip_offset;
      std::uint32_t crc = ib::icrc_headers(std::span<const std::byte>(ip, static_cast<std::size_t>(v.payload.data() - ip)), v.v6, v.ip_header_len);
      std::size_t done = 0;
      rx.preplaced = place(p, std::as_const(rx), [&](std::byte* h, std::size_t k) {
        crc = wire::crc::crc32_copy(std::span<std::byte>(h, k), v.payload.subspan(done, k), crc);
        done += k;
      });
      if (rx.preplaced) {
        if (wire::crc::crc32(v.pad, crc) != v.icrc) return rx_drop::bad_frame;
        verified = true;
      }
    }
    if (!verified && !ib::verify_icrc(v)) return rx_drop::bad_frame;
    if (!mine) return rx_drop::not_mine;
    deliver(p, rx);
    return rx_drop::none;
  }
  template <class Deliver>
  rx_drop receive_cell(std::span<const std::byte> frame, time_ns now, Deliver& deliver) {
    const auto r = reasm_->push(frame, now);
    if (r.status == cell::push_status::rejected) {
      const bool bad = r.error.code == wire::errc::cell_crc_mismatch || r.error.code == wire::errc::not_cell ||
                       r.error.code == wire::errc::packet_crc_mismatch;
      return bad ? rx_drop::bad_frame : rx_drop::none;
    }
    if (r.status != cell::push_status::delivered) return rx_drop::none;
    const cell::delivered_packet& d = *r.packet;
    const cell::packet_key key = d.key;
    const auto p = flow::from_cell(d);
    if (!p) {
      reasm_->forget(key);
      return rx_drop::bad_frame;
    }
    rx_context rx;
    rx.from.port = index_;
    rx.from.dmac = wire::read<wire::eth_header, "src">(frame.data());
    // The transport judges duplicates by PSN (and re-acknowledges them); the reassembler only
    // joins cells, so it forgets each packet it delivers and takes a resent one again.
    deliver(*p, rx);
    reasm_->forget(key);
    return rx_drop::none;
  }

  port_config cfg_;
  std::uint8_t index_;
  std::size_t tx_queue_, rx_queue_;
  time_ns ack_delay_;
  std::deque<frame_bytes> tx_{};         ///< requests (the QPs' sends, the device's own WRITEs)
  std::deque<frame_bytes> responses_{};  ///< ACKs, NAKs, READ and atomic responses: sent first
  std::deque<std::uint8_t> tx_tc_{}, responses_tc_{};  ///< each queued frame's traffic class
  std::deque<std::uint32_t> responses_ack_{};          ///< each queued response's ack_of (ready())
  std::uint64_t superseded_ = 0;
  bool staging_ = false;                 ///< frames go to the host bus first
  std::size_t responses_on_bus_ = 0, requests_on_bus_ = 0;  ///< frames taken from staged_, not yet released
  std::deque<staged> staged_{};
  std::array<class_counters, flow::traffic_classes> classes_{};
  time_ns responses_since_ = 0;          ///< when `responses_` last became non-empty
  bool urgent_ = false;                  ///< `responses_` holds more than plain ACKs
  bool released_ = false;                ///< a request left since: the held ACKs go too
  std::vector<frame_bytes> pool_{};
  /// The headers of recent destinations (template_for): 2^template_bits slots, each the key
  /// frame_base() reads and the template it made. Valid for the port's life: its config is fixed.
  struct template_slot {
    bool valid = false;        ///< holds a destination
    bool no_template = false;  ///< its frames are built by ib::build (IPv6)
    // The key: what frame_base() reads, and the UDP source port given.
    bool cnp = false;
    std::uint32_t qpn = 0, dest_qp = 0;  ///< the sending QP, the destination QP (24 bits each)
    std::optional<std::uint16_t> sport{};
    address_vector to{};
    ib::frame_template t{};    ///< when !no_template
  };
  static constexpr unsigned template_bits = 6;
  std::vector<template_slot> templates_ = std::vector<template_slot>(std::size_t{1} << template_bits);
  std::deque<frame_bytes> rx_{};         ///< arrived frames waiting for the receive pipeline
  std::unique_ptr<cell::reassembler> reasm_{};
};

}  // namespace pushwire::rnic
