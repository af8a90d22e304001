// A passive observer of captured frames (RoCEv2 and cells): fed every frame of a capture in
// order, it keeps what one frame means for later ones and returns, per frame, the facts that
// need that history: the pool and element an RDMA write lands in, a push-push message joined
// from SEND_FIRST..LAST, the write a page-fault ACK answers, and for cells the packet CRC status
// and reassembled data (through cell::reassembler, spec/cells.md §8). pushwire-dump and the
// Wireshark plugin both use it, so they cannot disagree. The pools and their books, where a
// write lands in them and how a SEND message is joined are flow::pp_tracker's and
// flow::send_joiner's (flow/pp_track.hpp), shared with flow::conformance. Sans-IO: no clock
// (time is the frame's capture timestamp), no output, every table bounded by observer_limits.
// Rules: spec/wireshark.md §3.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include <pushwire/cell/format.hpp>
#include <pushwire/cell/reassembler.hpp>
#include <pushwire/flow/core.hpp>
#include <pushwire/flow/paths.hpp>
#include <pushwire/flow/pp_track.hpp>
#include <pushwire/ib/aeth.hpp>
#include <pushwire/ib/roce.hpp>
#include <pushwire/msg/idata.hpp>
#include <pushwire/msg/message.hpp>

namespace pushwire::flow {

/// Explicit bounds. A table that is full refuses the new entry and the frame's note says so
/// (errc::table_full, field naming the bound); the write history forgets its oldest entry.
struct observer_limits {
  /// RoCE write cursors (target, source, QP): more: "write_cursors".
  std::size_t max_write_cursors = 256;
  /// RoCE SEND_FIRST..LAST messages being joined (source, target, QP): more: "send_messages".
  std::size_t max_send_messages = 256;
  /// Bytes of one joined message: wire::default_max_frame (a longer one is no push-push message).
  std::size_t max_message = wire::default_max_frame;
  /// Address pairs remembered for path migration, all QP numbers together (flow::path_watch).
  std::size_t max_paths = 4096;
  /// RDMA writes remembered for page-fault links and cell idata checks (oldest forgotten).
  std::size_t write_history = 1024;
  /// Cell reassembly (spec/cells.md §8). The age bound is in capture time.
  cell::reassembly_limits cells{.max_packets = 16, .max_packet_bytes = 1 << 20, .max_bytes = 16 << 20,
                                .max_age_ns = 60'000'000'000ull, .max_cell_payload = cell::max_cell_payload,
                                .history = 64};
  /// How RoCEv2 frames are recognised (UDP port, 0x40-0x5F as DC or RD).
  wire::codec_options codec{};
  /// Push-push conversations (flow::pp_tracker): pairs claimed, pools' books. A pool or pair
  /// beyond them: "pools", "max_pairs".
  pp_limits pp{};
};

/// A pool as advertised: its descriptor's fields and the frame of the BufferRecvPool.
struct observed_pool {
  std::uint32_t ref = 0, elements = 0, element_size = 0;
  std::uint64_t address = 0;
  std::uint64_t frame = 0;
  /// The element address `va` lands in, and the bytes from that element's start (va must be in
  /// the pool, element_size nonzero).
  constexpr std::uint64_t element_of(std::uint64_t va) const { return (va - address) / element_size; }
  constexpr std::uint64_t offset_of(std::uint64_t va) const { return (va - address) % element_size; }
  friend constexpr bool operator==(const observed_pool&, const observed_pool&) = default;
};

/// Where an RDMA write packet lands: in `pool`, the write's first byte at `start`, this
/// packet's first byte at `va` (MIDDLE and LAST continue from the FIRST's RETH).
struct write_place {
  observed_pool pool{};
  std::uint64_t start = 0, va = 0;
  /// This packet's first byte: element index and bytes from the element's start.
  constexpr std::uint64_t element() const { return pool.element_of(va); }
  constexpr std::uint64_t offset() const { return pool.offset_of(va); }
  /// The element of the write's first byte.
  constexpr std::uint64_t start_element() const { return pool.element_of(start); }
};

/// A last cell's packet CRC, as the reassembler found it: none (not a last cell), good (the
/// cell delivered its packet), bad (packet_crc_mismatch), unverified (the packet could not be
/// reassembled: an earlier cell missing, out of order, or bad; a duplicate last cell).
enum class packet_crc_status : std::uint8_t { none, good, bad, unverified };
inline constexpr std::array<wire::named_value, 4> packet_crc_status_names{
    {{packet_crc_status::none, "none"},
     {packet_crc_status::good, "good"},
     {packet_crc_status::bad, "bad"},
     {packet_crc_status::unverified, "unverified"}}};
constexpr std::span<const wire::named_value> wire_enum_names(packet_crc_status) { return packet_crc_status_names; }

enum class frame_kind : std::uint8_t { other, roce, cell };

/// What observe() says about one frame. Spans view the observer's storage: valid until the
/// next observe() or reset().
struct frame_note {
  frame_kind kind = frame_kind::other;  ///< other: neither a valid RoCEv2 frame nor a valid cell
  cell::cell_type cell_type = cell::cell_type::send;  ///< kind cell: the cell's type
  /// An RDMA write packet (a write's first cell) into an advertised pool.
  std::optional<write_place> write{};
  /// An RDMA WRITE with immediate (a last cell with idata) whose immediate is push-push idata:
  /// on RoCE, pp_tracker::claims_idata (spec/wireshark.md §3, "Claiming"); a cell's always.
  bool idata = false;
  /// The pools this frame changed (advertised, written, indicated, returned, flushed), as their
  /// owners' books stand after it (pp_tracker::max_touched at most).
  static_vector<pool_view, pp_tracker::max_touched> pools{};
  /// The RETH's DMA length runs past the element the write starts in.
  bool outside = false;
  /// idata names another pool or element than the write's first byte lands in (or, RETH in no
  /// pool, one of the target's pools under the same R_Key); cells: the last cell's idata.
  bool idata_mismatch = false;
  /// A page-fault ACK (RoCE RNR NAK, cell PageFaultDelay): the frame of the write it answers
  /// (same PSN, directions swapped); 0 when no such write was seen.
  std::uint64_t write_frame = 0;
  /// An RC or UC request whose QP migrated here (flow::path_watch, spec/qos.md §9): the path it
  /// left and that path's latest request's frame.
  std::optional<path_watch::path> migrated_from{};
  /// RoCE SEND_LAST: the valid push-push message joined from SEND_FIRST.., and its first frame.
  std::span<const std::byte> message{};
  std::uint64_t message_first_frame = 0;
  /// Cells: the packet CRC status (last cells), the reassembler's rejection of this cell (code 0
  /// when taken or not offered: a cell with a bad cell CRC is not offered), and the data of the
  /// Send or RDMA write packet this cell completed.
  packet_crc_status packet_crc = packet_crc_status::none;
  wire::error reassembly{};
  std::span<const std::byte> payload{};
  /// A bound of observer_limits this frame hit (table_full, field = the bound's name).
  errc limit{};
  std::string_view limit_field{};
};

class observer {
 public:
  explicit observer(const observer_limits& lim = {}) : lim_(lim) { reset(); }

  const observer_limits& limits() const { return lim_; }

  /// Forgets everything (a new capture).
  void reset() {
    cursors_.clear();
    cursors_.reserve(lim_.max_write_cursors);
    sends_.clear();
    sends_.reserve(lim_.max_send_messages);
    writes_.assign(lim_.write_history, write_rec{});
    writes_next_ = 0;
    cells_.reset();
    pp_.reset();
    paths_ = path_watch{lim_.max_paths};
    last_ns_ = 0;
  }

  /// The push-push conversations seen so far (pools' books and counts).
  const pp_tracker& conversations() const { return pp_; }

  /// One Ethernet frame, the capture's `frame`-th (numbers only name frames in notes), captured at
  /// `time_ns`. Frames must come in capture order; a timestamp earlier than the previous frame's
  /// counts as the previous one.
  frame_note observe(std::uint64_t frame, std::uint64_t time_ns, std::span<const std::byte> f) {
    if (time_ns < last_ns_) time_ns = last_ns_;
    last_ns_ = time_ns;
    frame_note n{};
    pp_.begin_frame(frame);
    const auto l2 = wire::locate_payload(f);
    if (l2 && l2->type == cell::ethertype)
      observe_cell(n, frame, time_ns, f);
    else
      observe_roce(n, frame, f);
    for (const pp_tracker::pool_key& k : pp_.touched())
      if (const auto v = pp_.view(k.owner, k.user, k.ref)) n.pools.push_back(*v);
    if (!pp_.refused().empty() && n.limit == errc{}) full(n, pp_.refused());
    return n;
  }

 private:
  using endpoint = flow::host;
  template <std::size_t N>
  static endpoint make_endpoint(const std::array<std::uint8_t, N>& a, std::uint8_t kind) {
    return host::of(a, kind);
  }

  struct cursor_rec {  // the current write on (target, source, QP)
    endpoint target{}, source{};
    std::uint32_t qp = 0;
    std::optional<observed_pool> pool{};
    std::uint64_t start = 0, va = 0;
  };
  struct send_rec {  // the SEND messages on (source, target, QP)
    endpoint source{}, target{};
    std::uint32_t qp = 0;
    send_joiner joiner;
  };
  struct write_rec {  // an RDMA write (RoCE: any packet; cells: a first cell)
    bool used = false;
    endpoint from{}, to{};
    std::uint32_t qa = 0, qb = 0, psn = 0;  // cells: source and destination WQP; RoCE: 0
    std::uint64_t frame = 0;
    std::optional<observed_pool> pool{};  // cells: the pool of the first cell's VA/MH
    std::uint64_t va = 0;
  };

  // ---------------------------------------------------------------- pools

  // The pool target advertised to user, under rkey, holding va (a write from anyone else is not
  // push-push: spec/wireshark.md §3), as the target's books hold it.
  std::optional<observed_pool> find_pool(const endpoint& target, const endpoint& user, std::uint32_t rkey, std::uint64_t va) const {
    const auto h = pp_.locate(target, user, rkey, va);
    if (!h) return std::nullopt;
    return observed_pool{h->desc.pool_ref, h->desc.element_count, h->desc.element_size, h->desc.address, h->advertised_frame};
  }
  // Pool `ref` is on the books target keeps for user, under rkey.
  bool names_pool(const endpoint& target, const endpoint& user, std::uint32_t rkey, std::uint32_t ref) const {
    const pp_tracker::owner_t* b = pp_.books(target, user);
    const auto i = b ? b->find(ref) : std::nullopt;
    return i && b->at(*i).desc.memory_handle == rkey;
  }
  static void full(frame_note& n, std::string_view bound) {
    n.limit = errc::table_full;
    n.limit_field = bound;
  }

  // ---------------------------------------------------------------- writes

  void remember_write(const write_rec& w) {
    if (writes_.empty()) return;
    writes_[writes_next_] = w;
    writes_[writes_next_].used = true;
    writes_next_ = (writes_next_ + 1) % writes_.size();
  }
  // The latest remembered write with this key.
  const write_rec* find_write(const endpoint& from, const endpoint& to, std::uint32_t qa, std::uint32_t qb,
                              std::uint32_t psn) const {
    for (std::size_t k = 0; k < writes_.size(); ++k) {
      const write_rec& w = writes_[(writes_next_ + writes_.size() - 1 - k) % writes_.size()];
      if (!w.used) break;
      if (w.psn == psn && w.qa == qa && w.qb == qb && w.from == from && w.to == to) return &w;
    }
    return nullptr;
  }

  // ---------------------------------------------------------------- RoCEv2

  void observe_roce(frame_note& n, std::uint64_t frame, std::span<const std::byte> f) {
    ib::roce_view v;
    if (ib::inspect(f, v, lim_.codec).code != wire::errc{}) return;
    n.kind = frame_kind::roce;
    const ib::bth b = v.bth();
    const endpoint src = v.v6 ? make_endpoint(v.ipv6().src, 6) : make_endpoint(v.ipv4().src, 4);
    const endpoint dst = v.v6 ? make_endpoint(v.ipv6().dst, 6) : make_endpoint(v.ipv4().dst, 4);
    const ib::opcode_info& op = *v.op;
    if (op.is(ib::op_class::send)) {
      if (op.pos == ib::position::only) {
        (void)pp_.message(src, dst, v.payload);
      } else {
        join_send(n, frame, src, dst, b, op.pos, v.payload);
      }
    }
    if (op.is(ib::op_class::write)) write_packet(n, frame, v, src, dst);
    if (op.request && (op.tp == ib::transport::rc || op.tp == ib::transport::uc)) n.migrated_from = paths_.on_request(b.destqp, src, dst, b.psn, b.m, frame);
    if (const auto a = v.get<ib::ext::aeth>(); a && !op.request && ib::page_fault_delay_us(*a))
      if (const write_rec* w = find_write(dst, src, 0, 0, b.psn)) n.write_frame = w->frame;
  }

  // SEND_FIRST, MIDDLE..., LAST of one message: joined when they come in PSN order on one QP.
  void join_send(frame_note& n, std::uint64_t frame, const endpoint& src, const endpoint& dst, const ib::bth& b,
                 ib::position pos, std::span<const std::byte> payload) {
    send_rec* m = nullptr;
    for (send_rec& s : sends_)
      if (s.qp == b.destqp && s.source == src && s.target == dst) m = &s;
    if (!m) {
      if (pos != ib::position::first) return;  // nothing to continue
      if (sends_.size() == lim_.max_send_messages) return full(n, "send_messages");
      m = &sends_.emplace_back(send_rec{src, dst, b.destqp, send_joiner{lim_.max_message}});
    }
    const auto joined = m->joiner.add(pos, b.psn, payload, frame);
    if (!joined || !pp_.message(src, dst, *joined)) return;  // not whole yet, or no push-push message
    n.message = *joined;
    n.message_first_frame = m->joiner.first_frame();
  }

  void write_packet(frame_note& n, std::uint64_t frame, const ib::roce_view& v, const endpoint& src,
                    const endpoint& dst) {
    const ib::bth b = v.bth();
    remember_write({true, src, dst, 0, 0, b.psn, frame, std::nullopt, 0});
    cursor_rec* c = nullptr;
    for (cursor_rec& r : cursors_)
      if (r.qp == b.destqp && r.target == dst && r.source == src) c = &r;
    const auto reth = v.get<ib::ext::reth>();
    if (reth) {
      if (!c && cursors_.size() == lim_.max_write_cursors) {
        full(n, "write_cursors");
      } else {
        if (!c) c = &cursors_.emplace_back(cursor_rec{dst, src, b.destqp});
        c->pool = find_pool(dst, src, reth->r_key, reth->va);
        c->start = c->va = reth->va;
        if (c->pool && reth->dmalen) {
          const observed_pool& p = *c->pool;
          n.outside = p.offset_of(reth->va) + reth->dmalen > p.element_size;
        }
      }
    }
    if (c && c->pool) {
      n.write = write_place{*c->pool, c->start, c->va};
      c->va += v.payload.size();
      pp_.write(dst, src, n.write->pool.ref, v.payload.size(), reth.has_value());
    }
    const auto imm = v.get<ib::ext::immdt>();
    if (imm && pp_.claims_idata(dst, src, imm->value)) {
      n.idata = true;
      const msg::idata d = msg::from_imm(imm->value);
      (void)pp_.indicate(dst, src, msg::to_indication(d));
      if (n.write)
        n.idata_mismatch = d.pool_ref != n.write->pool.ref || d.element_index != n.write->start_element();
      else if (reth)  // the RETH lands in no pool: wrong if idata names one of the target's pools
        n.idata_mismatch = names_pool(dst, src, reth->r_key, d.pool_ref);
    }
  }

  // ---------------------------------------------------------------- cells

  void observe_cell(frame_note& n, std::uint64_t frame, std::uint64_t time_ns, std::span<const std::byte> f) {
    cell::cell_view c;
    if (cell::inspect(f, c, {.crc = wire::crc_check::report, .max_cell_payload = lim_.cells.max_cell_payload}).code !=
        wire::errc{})
      return;
    n.kind = frame_kind::cell;
    n.cell_type = c.hdr.type;
    const endpoint src = make_endpoint(c.src(), 1), dst = make_endpoint(c.dst(), 1);
    const cell::header& h = c.hdr;
    const bool write = h.type == cell::cell_type::rdma_write;
    // Writes: the pool of the first cell's VA/MH (the target is the destination MAC).
    if (write && h.first && c.rdma) {
      const auto pool = find_pool(dst, src, c.rdma->mh, c.rdma->va);
      if (pool) n.write = write_place{*pool, c.rdma->va, c.rdma->va};
      remember_write({true, src, dst, h.src_wqp, h.dst_wqp, h.psn, frame, pool, c.rdma->va});
    }
    if (write && c.idata) {
      n.idata = true;  // the cell framing is push-push's own
      (void)pp_.indicate(dst, src, msg::to_indication(msg::from_imm(*c.idata)));
      const write_rec* w = find_write(src, dst, h.src_wqp, h.dst_wqp, h.psn);
      if (w && w->pool) {
        const observed_pool& p = *w->pool;
        const msg::idata d = msg::from_imm(*c.idata);
        n.idata_mismatch = d.pool_ref != p.ref || d.element_index != p.element_of(w->va);
      }
    }
    if (h.type == cell::cell_type::page_fault_delay)
      if (const write_rec* w = find_write(dst, src, h.dst_wqp, h.src_wqp, h.psn)) n.write_frame = w->frame;
    // The packet: cells with a good cell CRC go to the reassembler.
    if (h.last) n.packet_crc = packet_crc_status::unverified;
    if (c.crc_state != wire::crc_status::good) return;
    if (!cells_) cells_.emplace(lim_.cells);
    const cell::push_result r = cells_->push(c, time_ns);
    if (r.status == cell::push_status::rejected) {
      n.reassembly = r.error;
      if (r.error.code == wire::errc::packet_crc_mismatch) n.packet_crc = packet_crc_status::bad;
      return;
    }
    if (r.status != cell::push_status::delivered || !r.packet) return;
    n.packet_crc = packet_crc_status::good;
    if (cell::is_control(h.type)) {
      // A NAK or page-fault delay refuses the packet it names: its resending is not a duplicate.
      if (h.type == cell::cell_type::nak || h.type == cell::cell_type::page_fault_delay)
        cells_->forget({c.dst(), h.dst_wqp, h.psn});
      return;
    }
    n.payload = r.packet->payload;
    if (h.type == cell::cell_type::send) {
      (void)pp_.message(src, dst, n.payload);  // an advertisement's owner: the source MAC
    } else if (write) {
      const write_rec* w = find_write(src, dst, h.src_wqp, h.dst_wqp, h.psn);
      if (w && w->pool) pp_.write(dst, src, w->pool->ref, n.payload.size(), true);
    }
  }

  observer_limits lim_;
  std::vector<cursor_rec> cursors_;
  std::vector<send_rec> sends_;
  std::vector<write_rec> writes_;
  std::size_t writes_next_ = 0;
  std::optional<cell::reassembler> cells_;
  pp_tracker pp_{lim_.pp};
  path_watch paths_{lim_.max_paths};
  std::uint64_t last_ns_ = 0;
};

}  // namespace pushwire::flow
