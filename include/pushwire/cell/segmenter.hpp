// Segmentation (split-model driver, III: "the packet will be segmented into multiple cells"): a packet
// description and its payload, as one span or a scatter list, become cell frames written into
// the caller's buffers one at a time. Nothing is allocated and the payload is read in place.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include <pushwire/cell/format.hpp>

namespace pushwire::cell {

/// One packet to segment: everything but the payload.
struct packet_spec {
  mac_address dst{}, src{};
  std::optional<wire::vlan_tag> vlan{};
  std::uint32_t dst_wqp = 0, src_wqp = 0;  ///< 24 bits each
  std::uint32_t psn = 0;                   ///< 24 bits
  cell_type type = cell_type::send;
  bool ack_req = false;
  bool response = false;                 ///< Transport only: a responder's packet (header flag)
  std::optional<cell::vamh> rdma{};      ///< RDMA write: required, in the first cell
  std::optional<std::uint32_t> idata{};  ///< Send or RDMA write: in the last cell
  std::optional<ack_info> ack{};         ///< control types: required
};

class segmenter {
 public:
  using scatter = std::span<const std::span<const std::byte>>;

  /// An empty segmenter (done, no cells); make() builds a real one.
  constexpr segmenter() = default;

  /// A segmenter for p carrying `payload`, in cells of at most cell_payload data bytes. The
  /// payload is read during next() and must outlive the segmenter. Errors: invalid_field (a
  /// cell_payload of 0; a WQP or PSN wider than 24 bits; an unknown type; ack given or missing
  /// for the type, or failing check_ack; idata on a control type; a payload on a control type),
  /// vamh_missing / vamh_unexpected, too_large (a cell_payload above 65535, or more than 65535
  /// cells).
  static constexpr result<segmenter> make(const packet_spec& p, std::span<const std::byte> payload,
                                          std::size_t cell_payload = default_cell_payload) {
    segmenter s;
    s.single_ = payload;
    if (auto e = s.init(p, cell_payload); e.code != errc{}) return e;
    return s;
  }
  /// The same with the payload gathered from `pieces` in order (the span of spans must outlive
  /// the segmenter too).
  static constexpr result<segmenter> make(const packet_spec& p, scatter pieces,
                                          std::size_t cell_payload = default_cell_payload) {
    segmenter s;
    s.pieces_ = pieces;
    s.scattered_ = true;
    if (auto e = s.init(p, cell_payload); e.code != errc{}) return e;
    return s;
  }

  constexpr std::size_t cell_count() const { return cells_; }
  constexpr std::size_t cells_left() const { return cells_ - csn_; }
  constexpr bool done() const { return csn_ == cells_; }
  constexpr std::size_t payload_size() const { return total_; }
  /// Frame bytes that hold any cell of this packet (an upper bound, at least 60).
  constexpr std::size_t max_frame_size() const {
    const std::size_t data = total_ < cell_payload_ ? total_ : cell_payload_;
    const std::size_t n = l2_ + header_size + vamh_size + ack_info_size + idata_size + data + 2 * crc_size;
    return n < wire::eth_min_frame ? wire::eth_min_frame : n;
  }
  /// Frame bytes of the next cell (0 when done).
  constexpr std::size_t next_size() const { return done() ? 0 : padded_size(layout_of(l2_, next_header())); }

  /// Writes the next cell into the front of out; returns its frame size (0 when done). On
  /// errc::no_space nothing is consumed and the same cell comes next.
  constexpr result<std::size_t> next(std::span<std::byte> out) {
    if (done()) return std::size_t{0};
    const header h = next_header();
    const cell_layout l = layout_of(l2_, h);
    const std::size_t n = padded_size(l);
    if (out.size() < n) return wire::error{errc::no_space, out.size(), {}};
    const auto frame = out.first(n);
    write_head(frame, h, l);
    // The data is checksummed as it is copied in: the cell's packet part CRC, which extends the
    // packet CRC and, on a last cell after the packet CRC's 4 bytes, is the cell CRC.
    std::uint32_t crc = gather(frame.subspan(l.data, h.length), wire::crc::crc32c(frame.first(l.data)));
    packet_crc_ = extend(packet_crc_, crc, l.packet_part());
    if (h.last) {
      wire::store_be32(frame.data() + l.packet_crc, packet_crc_);
      crc = wire::crc::crc32c(frame.subspan(l.packet_crc, crc_size), crc);
    }
    wire::store_be32(frame.data() + l.cell_crc, crc);
    for (std::size_t i = l.end(); i < n; ++i) frame[i] = std::byte{0};
    ++csn_;
    return n;
  }

  /// Cells per round of next(frames, sizes): the CRCs of this many are computed together.
  static constexpr std::size_t batch_round = 16;

  /// The next cells at once: cell i is written into the front of frames[i] and its frame size
  /// stored in sizes[i], for as many as both spans hold. Their CRCs are computed together
  /// (wire::crc::crc32c_batch: on vpclmul_avx512, four alike cells at a time). The frames are
  /// those next() would write one at a time. Returns how many were written: fewer when the
  /// packet ends, or at the first buffer too small for its cell (errc::no_space when that is
  /// frames[0]; that cell comes next).
  constexpr result<std::size_t> next(std::span<const std::span<std::byte>> frames, std::span<std::size_t> sizes) {
    const std::size_t want = frames.size() < sizes.size() ? frames.size() : sizes.size();
    std::size_t written = 0;
    if (std::is_constant_evaluated()) {
      for (; written < want && !done(); ++written) {
        const auto n = next(frames[written]);
        if (!n) return written ? result<std::size_t>(written) : n;
        sizes[written] = *n;
      }
      return written;
    }
    std::array<wire::crc::crc32c_job, batch_round> jobs;
    struct finish {
      std::uint32_t part, packet_crc, cell_crc;  // packet part size; CRC offsets (packet_crc 0: not last)
    };
    std::array<finish, batch_round> fin;
    while (written < want && !done()) {
      std::size_t k = 0;
      for (; k < batch_round && written + k < want && !done(); ++k) {
        const bool middle = csn_ != 0 && csn_ + 1 != cells_;
        header h{};
        cell_layout l{};
        if (middle) {
          l = mid_layout_;
          h.length = static_cast<std::uint16_t>(cell_payload_);
        } else {
          h = next_header();
          l = layout_of(l2_, h);
        }
        const std::size_t n = padded_size(l);
        if (frames[written + k].size() < n) break;
        const auto frame = frames[written + k].first(n);
        if (middle) {  // the middle cells' template, with this cell's number
          wire::detail::copy_bytes(frame.data(), mid_.data(), l.header + header_size);
          wire::store_be16(frame.data() + l.header + csn_offset, csn_);
        } else {
          write_head(frame, h, l);
        }
        // The data: taken in place when it lies in one piece, else gathered now and
        // checksummed with the header.
        auto& j = jobs[k];
        const auto p = h.length ? piece(piece_).subspan(offset_) : std::span<const std::byte>{};
        if (p.size() >= h.length) {
          j = {frame.first(l.data), p.first(h.length), frame.data() + l.data, 0};
          advance(h.length);
        } else {
          copy_out(frame.subspan(l.data, h.length));
          j = {frame.first(l.data + h.length), {}, nullptr, 0};
        }
        for (std::size_t i = l.end(); i < n; ++i) frame[i] = std::byte{0};
        fin[k] = {static_cast<std::uint32_t>(l.packet_part()), static_cast<std::uint32_t>(l.packet_crc),
                  static_cast<std::uint32_t>(l.cell_crc)};
        sizes[written + k] = n;
        ++csn_;
      }
      if (k == 0) return written ? result<std::size_t>(written) : wire::error{errc::no_space, frames[written].size(), {}};
      wire::crc::crc32c_batch(std::span(jobs).first(k));
      for (std::size_t i = 0; i < k; ++i) {
        std::byte* f = frames[written + i].data();
        std::uint32_t crc = jobs[i].crc;  // the cell's packet part
        packet_crc_ = extend(packet_crc_, crc, fin[i].part);
        if (fin[i].packet_crc) {
          wire::store_be32(f + fin[i].packet_crc, packet_crc_);
          crc = wire::crc::crc32c(std::span<const std::byte>(f + fin[i].packet_crc, crc_size), crc);
        }
        wire::store_be32(f + fin[i].cell_crc, crc);
      }
      written += k;
      if (k < batch_round && written < want && !done()) break;  // the next buffer is too small
    }
    return written;
  }

 private:
  constexpr std::size_t piece_count() const { return scattered_ ? pieces_.size() : 1; }
  constexpr std::span<const std::byte> piece(std::size_t i) const { return scattered_ ? pieces_[i] : single_; }

  constexpr wire::error init(const packet_spec& p, std::size_t cell_payload) {
    using wire::error;
    spec_ = p;
    if (cell_payload == 0) return error{errc::invalid_field, 0, "cell_payload"};
    if (cell_payload > max_cell_payload) return error{errc::too_large, 0, "cell_payload"};
    cell_payload_ = cell_payload;
    if (p.dst_wqp > 0xFFFFFF) return error{errc::invalid_field, 0, "dst_wqp"};
    if (p.src_wqp > 0xFFFFFF) return error{errc::invalid_field, 0, "src_wqp"};
    if (p.psn > 0xFFFFFF) return error{errc::invalid_field, 0, "psn"};
    if (!is_known(p.type)) return error{errc::invalid_field, 0, "type"};
    for (std::size_t i = 0; i < piece_count(); ++i) total_ += piece(i).size();
    if (is_control(p.type)) {
      if (!p.ack) return error{errc::invalid_field, 0, "ack"};
      if (auto e = check_ack(p.type, *p.ack); e.code != errc{}) return e;
      if (p.idata) return error{errc::invalid_field, 0, "idata"};
      if (total_ != 0) return error{errc::invalid_field, 0, "payload"};
    } else if (p.ack) {
      return error{errc::invalid_field, 0, "ack"};
    }
    if (p.response && p.type != cell_type::transport) return error{errc::invalid_field, 0, "response"};
    if (p.type == cell_type::rdma_write && !p.rdma) return error{errc::vamh_missing, 0, "rdma"};
    if (p.type != cell_type::rdma_write && p.rdma) return error{errc::vamh_unexpected, 0, "rdma"};
    const std::size_t cells = total_ == 0 ? 1 : (total_ - 1) / cell_payload + 1;
    if (cells > max_cells) return error{errc::too_large, 0, "payload"};
    cells_ = static_cast<std::uint16_t>(cells);
    l2_ = write_l2(head_, p.dst, p.src, p.vlan);
    if (auto e = wire::encode(next_header(), std::span(head_).subspan(l2_)); !e) return e.error();
    if (cells_ > 2) {  // middle cells: no flags of their own, full, one template
      header h = next_header();
      h.first = false;
      h.has_vamh = false;
      h.csn = 1;
      mid_ = head_;
      (void)wire::encode(h, std::span(mid_).subspan(l2_));
      mid_layout_ = layout_of(l2_, h);
    }
    return {};
  }

  constexpr header next_header() const {
    header h{};
    h.type = spec_.type;
    h.first = csn_ == 0;
    h.last = csn_ + 1 == cells_;
    h.has_idata = h.last && spec_.idata.has_value();
    h.ack_req = spec_.ack_req;
    h.response = spec_.response;
    h.has_vamh = h.first && spec_.rdma.has_value();
    h.dst_wqp = spec_.dst_wqp;
    h.src_wqp = spec_.src_wqp;
    h.psn = spec_.psn;
    h.csn = csn_;
    h.cell_count = cells_;
    const std::size_t done_bytes = std::size_t{csn_} * cell_payload_;
    h.length = static_cast<std::uint16_t>(total_ - done_bytes < cell_payload_ ? total_ - done_bytes : cell_payload_);
    return h;
  }

  // Everything before the cell's data. The Ethernet header and the cell header come from the
  // packet's template; only the fields that change from cell to cell are written.
  constexpr void write_head(std::span<std::byte> frame, const header& h, const cell_layout& l) const {
    wire::detail::copy_bytes(frame.data(), head_.data(), l.header + header_size);
    std::byte* hp = frame.data() + l.header;
    (void)wire::write<header, "first">(hp, h.first);
    (void)wire::write<header, "last">(hp, h.last);
    (void)wire::write<header, "has_idata">(hp, h.has_idata);
    (void)wire::write<header, "has_vamh">(hp, h.has_vamh);
    (void)wire::write<header, "csn">(hp, h.csn);
    (void)wire::write<header, "length">(hp, h.length);
    if (h.has_vamh) (void)wire::encode(*spec_.rdma, frame.subspan(l.vamh));
    if (l.ack) (void)wire::encode(*spec_.ack, frame.subspan(l.ack));
    if (h.has_idata) wire::store_be32(frame.data() + l.idata, *spec_.idata);
  }

  // The read position moves n bytes on.
  constexpr void advance(std::size_t n) {
    offset_ += n;
    while (piece_ < piece_count() && offset_ == piece(piece_).size()) ++piece_, offset_ = 0;
  }
  // Copies the next out.size() payload bytes into out.
  constexpr void copy_out(std::span<std::byte> out) {
    for (std::size_t at = 0; at < out.size();) {
      const auto p = piece(piece_).subspan(offset_);
      const std::size_t k = p.size() < out.size() - at ? p.size() : out.size() - at;
      wire::detail::copy_bytes(out.data() + at, p.data(), k);
      at += k;
      advance(k);
    }
  }

  // The packet CRC extended by a packet part of `size` bytes whose CRC is part.
  constexpr std::uint32_t extend(std::uint32_t packet_crc, std::uint32_t part, std::size_t size) {
    if (shift_.length() != size) shift_ = wire::crc::crc32c_shift(size);
    return shift_.combine(packet_crc, part);
  }

  // Copies the next out.size() payload bytes into out; returns their CRC-32C continuing crc.
  constexpr std::uint32_t gather(std::span<std::byte> out, std::uint32_t crc) {
    std::size_t at = 0;
    while (at < out.size()) {
      const auto p = piece(piece_).subspan(offset_);
      const std::size_t k = p.size() < out.size() - at ? p.size() : out.size() - at;
      crc = wire::crc::crc32c_copy(out.subspan(at, k), p.first(k), crc);
      at += k;
      offset_ += k;
      if (offset_ == piece(piece_).size()) ++piece_, offset_ = 0;
    }
    return crc;
  }

  packet_spec spec_{};
  std::span<const std::byte> single_{};
  scatter pieces_{};
  bool scattered_ = false;
  std::size_t total_ = 0, cell_payload_ = default_cell_payload, l2_ = wire::eth_header_size;
  std::uint16_t cells_ = 0, csn_ = 0;
  std::size_t piece_ = 0, offset_ = 0;  // read position in the payload
  std::uint32_t packet_crc_ = 0;        // over the cells written so far
  wire::crc::crc32c_shift shift_{};      // by the last packet part's size
  std::array<std::byte, wire::eth_header_size + wire::vlan_tag_size + header_size> head_{};  // first cell's
  std::array<std::byte, wire::eth_header_size + wire::vlan_tag_size + header_size> mid_{};   // a middle cell's (3+ cells)
  cell_layout mid_layout_{};
  static constexpr std::size_t csn_offset = wire::offset_of<header>("csn");
};

}  // namespace pushwire::cell
