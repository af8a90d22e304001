// Capture files: a reader over a whole file in memory that reads classic pcap and pcapng (told
// apart by the first four bytes; never reads past the buffer), and a dependency-free classic
// pcap writer (little-endian), and append_epb() for adding a record to a pcapng file. spec/roce.md
// §13 "Capture files" describes what is read.
//
// Classic pcap (libpcap's pcap-savefile(5)): a 24-byte file header (magic, version 2.4, zone,
// sigfigs, snaplen, link type), then records of a 16-byte header (seconds, fraction, captured
// length, original length) and data. Either byte order; microsecond or nanosecond timestamps.
//
// pcapng (IETF draft-ietf-opsawg-pcapng): a sequence of blocks, each `type (4) | total length (4)
// | body | total length (4)` with the total a multiple of 4, in the byte order of its section. A
// section starts with a Section Header Block (SHB); its Interface Description Blocks (IDB) are
// numbered 0, 1, ... in order and give each interface's link type, snaplen and timestamp unit
// (`if_tsresol`, default 10^-6 s) and offset (`if_tsoffset`, seconds). Enhanced (EPB), obsolete
// (type 2) and Simple (SPB) Packet Blocks are records; every other block is skipped and counted
// by type (reader::skipped()). The reader's limits, beyond what the format says:
//   - a block of at most ng::max_block bytes, a record of at most max_record captured bytes;
//   - at most ng::max_interfaces interfaces per section;
//   - if_tsresol 10^-n with n <= 19, or 2^-n with n <= 63; a timestamp (after if_tsoffset) that
//     fits in 64-bit nanoseconds since the epoch;
//   - SHB version 1.0 (or 1.2, which some writers emit); a section length of -1 ("unspecified")
//     or a multiple of 4. A declared length is checked only where a file is cut: a last section
//     shorter than it says is truncated. Other mismatches are ignored, as Wireshark and libpcap
//     do: writers in use get it wrong (scapy 2.5 writes 0).
// Every violation is errc::bad_pcap naming the field (the offset is where it is in the file),
// or errc::truncated for a file that ends inside a header, block or declared section. A failed
// next() consumes nothing and returns no record.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <pushwire/wire/endian.hpp>
#include <pushwire/wire/errc.hpp>
#include <pushwire/wire/result.hpp>

namespace pushwire::wire::pcap {

inline constexpr std::uint32_t magic_micro = 0xA1B2C3D4;
inline constexpr std::uint32_t magic_nano = 0xA1B23C4D;
inline constexpr std::uint32_t linktype_ethernet = 1;
inline constexpr std::size_t file_header_size = 24, record_header_size = 16;
/// Largest record the reader accepts (captured bytes), whatever the file's snaplen says.
inline constexpr std::uint32_t max_record = 262144;

/// pcapng block types, option codes and the reader's limits.
namespace ng {
inline constexpr std::uint32_t block_shb = 0x0A0D0D0A;  ///< Section Header (same in both byte orders)
inline constexpr std::uint32_t block_idb = 0x00000001;  ///< Interface Description
inline constexpr std::uint32_t block_opb = 0x00000002;  ///< Packet (obsolete; 16-bit interface id)
inline constexpr std::uint32_t block_spb = 0x00000003;  ///< Simple Packet
inline constexpr std::uint32_t block_nrb = 0x00000004;  ///< Name Resolution (skipped)
inline constexpr std::uint32_t block_isb = 0x00000005;  ///< Interface Statistics (skipped)
inline constexpr std::uint32_t block_epb = 0x00000006;  ///< Enhanced Packet
inline constexpr std::uint32_t byte_order_magic = 0x1A2B3C4D;  ///< SHB body offset 0
inline constexpr std::uint16_t opt_endofopt = 0, opt_if_tsresol = 9, opt_if_tsoffset = 14;
/// Default if_tsresol: 10^-6 s.
inline constexpr std::uint8_t default_tsresol = 6;
/// Smallest block (header + trailer), SHB, IDB, EPB / obsolete packet block, SPB, in bytes.
inline constexpr std::uint32_t min_block = 12, min_shb = 28, min_idb = 20, min_epb = 32, min_spb = 16;
/// Largest block the reader accepts (any type), in bytes.
inline constexpr std::uint32_t max_block = 16u << 20;
/// Most interfaces (IDBs) one section may describe.
inline constexpr std::size_t max_interfaces = 64;
/// Most distinct skipped block types listed one by one (reader::skipped()); blocks of further
/// types are counted together (reader::skipped_other()).
inline constexpr std::size_t max_skipped_types = 16;

/// The name of a block type from the pcapng block type registry, or "unknown".
constexpr std::string_view block_type_name(std::uint32_t type) noexcept {
  switch (type) {
    case block_shb: return "section header";
    case block_idb: return "interface description";
    case block_opb: return "packet (obsolete)";
    case block_spb: return "simple packet";
    case block_nrb: return "name resolution";
    case block_isb: return "interface statistics";
    case block_epb: return "enhanced packet";
    case 0x00000007: return "IRIG timestamp";
    case 0x00000008: return "ARINC 429 in AFDX encapsulation information";
    case 0x00000009: return "systemd journal export";
    case 0x0000000A: return "decryption secrets";
    case 0x00000BAD: return "custom (copiable)";
    case 0x40000BAD: return "custom (not copiable)";
    default: return "unknown";
  }
}
}  // namespace ng

enum class resolution : std::uint8_t { micro, nano };
enum class format : std::uint8_t { pcap, pcapng };

struct record {
  std::uint64_t ts_ns = 0;        ///< timestamp, nanoseconds since the epoch (0 without one)
  std::uint32_t orig_len = 0;     ///< length on the wire (>= data.size())
  std::span<const std::byte> data{};  ///< the captured bytes, inside the file's buffer
  bool has_timestamp = true;      ///< false for a pcapng Simple Packet Block
  std::uint32_t interface_id = 0; ///< pcapng: the IDB's index in its section; classic: 0
  std::uint32_t linktype = 0;     ///< LINKTYPE_* of the record's interface (classic: the file's)
};

/// A pcapng interface, from its IDB.
struct interface_info {
  std::uint32_t linktype = 0;  ///< LINKTYPE_* (16 bits in the IDB)
  std::uint32_t snaplen = 0;   ///< most bytes captured per packet; 0: no limit
  std::uint8_t tsresol = ng::default_tsresol;  ///< if_tsresol: bit 7 clear 10^-n s, set 2^-n s
  std::int64_t tsoffset = 0;   ///< if_tsoffset: seconds added to every timestamp
};

/// Blocks of one type the reader skipped.
struct skipped_block {
  std::uint32_t type = 0;
  std::uint64_t count = 0;
};

/// "skipped 3 blocks of type 0x00000005 (interface statistics)", for a tool's warning.
inline std::string to_text(const skipped_block& s) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string hex = "0x";
  for (int i = 7; i >= 0; --i) hex += digits[(s.type >> (4 * i)) & 0xF];
  return "skipped " + std::to_string(s.count) + (s.count == 1 ? " block" : " blocks") + " of type " + hex + " (" +
         std::string{ng::block_type_name(s.type)} + ")";
}

namespace detail {
inline constexpr std::uint64_t ns_per_s = 1000000000u;
inline constexpr std::uint64_t u64_max = std::numeric_limits<std::uint64_t>::max();

constexpr std::uint64_t pow10(unsigned n) {
  std::uint64_t v = 1;
  while (n-- > 0) v *= 10;
  return v;
}
/// floor(frac * 10^9 / 2^n) for frac < 2^n, n <= 63, without overflow.
constexpr std::uint64_t binary_fraction_ns(std::uint64_t frac, unsigned n) {
  if (n < 32) return frac * ns_per_s >> n;  // frac < 2^32: the product fits
  const std::uint64_t hi = (frac >> 32) * ns_per_s, lo = (frac & 0xFFFFFFFFu) * ns_per_s;  // each < 2^62
  return (hi + (lo >> 32)) >> (n - 32);  // the low 32 bits of lo cannot carry into the quotient
}
/// if_tsresol within the reader's limits.
constexpr bool valid_tsresol(std::uint8_t r) { return (r & 0x80) ? (r & 0x7F) <= 63 : r <= 19; }
/// A timestamp in units of 2^-n / 10^-n s plus `offset` seconds, in ns; nullopt when it does
/// not fit in 64 bits (or is before the epoch).
constexpr std::optional<std::uint64_t> to_ns(std::uint64_t ts, std::uint8_t tsresol, std::int64_t offset) {
  std::uint64_t ns = 0;
  if (tsresol & 0x80) {
    const unsigned n = tsresol & 0x7Fu;
    const std::uint64_t secs = ts >> n, frac = ts & ((std::uint64_t{1} << n) - 1);
    if (secs > u64_max / ns_per_s) return std::nullopt;
    ns = secs * ns_per_s;
    const std::uint64_t f = binary_fraction_ns(frac, n);
    if (ns > u64_max - f) return std::nullopt;
    ns += f;
  } else if (tsresol <= 9) {
    const std::uint64_t m = pow10(9u - tsresol);
    if (ts > u64_max / m) return std::nullopt;
    ns = ts * m;
  } else {
    ns = ts / pow10(tsresol - 9u);
  }
  const std::uint64_t mag = offset < 0 ? std::uint64_t(-(offset + 1)) + 1 : std::uint64_t(offset);
  if (mag > u64_max / ns_per_s) return std::nullopt;
  const std::uint64_t shift = mag * ns_per_s;
  if (offset < 0) {
    if (ns < shift) return std::nullopt;
    return ns - shift;
  }
  if (ns > u64_max - shift) return std::nullopt;
  return ns + shift;
}
/// The inverse of to_ns: ns (since the epoch) less `offset` seconds, in units of tsresol
/// (rounded down); nullopt when it is before the offset or does not fit in 64 bits.
constexpr std::optional<std::uint64_t> from_ns(std::uint64_t ns, std::uint8_t tsresol, std::int64_t offset) {
  const std::uint64_t mag = offset < 0 ? std::uint64_t(-(offset + 1)) + 1 : std::uint64_t(offset);
  if (mag > u64_max / ns_per_s) return std::nullopt;
  const std::uint64_t shift = mag * ns_per_s;
  if (offset < 0) {
    if (ns > u64_max - shift) return std::nullopt;
    ns += shift;
  } else {
    if (ns < shift) return std::nullopt;
    ns -= shift;
  }
  if (tsresol & 0x80) {
    const unsigned n = tsresol & 0x7Fu;
    const std::uint64_t secs = ns / ns_per_s, frac = ns % ns_per_s;
    if (n > 0 && secs > (u64_max >> n)) return std::nullopt;
    // floor(frac * 2^n / 10^9), frac < 2^30: exact in two 32-bit steps for any n <= 63
    const unsigned lo = n < 32 ? n : 32, hi = n - lo;
    const std::uint64_t a = (frac << lo), q = a / ns_per_s, r = a % ns_per_s;
    const std::uint64_t f = (q << hi) + ((r << hi) / ns_per_s);  // r < 10^9 < 2^30, hi <= 31
    return (secs << n) + f;
  }
  if (tsresol <= 9) return ns / pow10(9u - tsresol);
  const std::uint64_t m = pow10(tsresol - 9u);
  if (ns > u64_max / m) return std::nullopt;
  return ns * m;
}
}  // namespace detail

/// Appends one pcapng Enhanced Packet Block for interface `interface_id` (described by `itf`) of
/// a section in byte order `order`: what a tool adds to an existing pcapng file. Errors:
/// bad_pcap ("timestamp") when ts_ns is not representable in the interface's units,
/// ("captured length") when the frame exceeds max_record.
inline wire::error append_epb(std::vector<std::byte>& out, std::endian order, std::uint32_t interface_id,
                              const interface_info& itf, std::uint64_t ts_ns, std::span<const std::byte> frame) {
  if (frame.size() > max_record) return {errc::bad_pcap, 0, "captured length"};
  const auto ts = detail::from_ns(ts_ns, itf.tsresol, itf.tsoffset);
  if (!ts) return {errc::bad_pcap, 0, "timestamp"};
  const std::size_t padded = (frame.size() + 3) & ~std::size_t{3};
  const auto total = static_cast<std::uint32_t>(ng::min_epb + padded);
  const std::size_t at = out.size();
  out.resize(at + total);
  std::byte* p = out.data() + at;
  auto put = [&](std::size_t off, std::uint32_t v) { order == std::endian::big ? store_be32(p + off, v) : store_le32(p + off, v); };
  put(0, ng::block_epb);
  put(4, total);
  put(8, interface_id);
  put(12, static_cast<std::uint32_t>(*ts >> 32));
  put(16, static_cast<std::uint32_t>(*ts));
  put(20, static_cast<std::uint32_t>(frame.size()));
  put(24, static_cast<std::uint32_t>(frame.size()));
  if (!frame.empty()) std::memcpy(p + 28, frame.data(), frame.size());
  put(total - 4, total);  // the padding stays zero (resize)
  return {};
}

/// Reads records from a whole file held in memory (the buffer must outlive the reader).
class reader {
 public:
  /// Checks the file header (classic) or the first section's SHB and the blocks up to its first
  /// packet (pcapng): errc::bad_pcap (with the offending field) or truncated.
  static constexpr result<reader> open(std::span<const std::byte> file) {
    reader r;
    r.file_ = file;
    if (file.size() >= 4 && load_le32(file.data()) == ng::block_shb) {
      r.fmt_ = format::pcapng;
      auto first = r.read_ng(true);
      if (!first) return first.error();
      return r;
    }
    if (file.size() < file_header_size) return error{errc::truncated, file.size(), "pcap header"};
    const std::uint32_t m = load_le32(file.data()), mb = load_be32(file.data());
    if (m == magic_micro || m == magic_nano) {
      r.order_ = std::endian::little;
    } else if (mb == magic_micro || mb == magic_nano) {
      r.order_ = std::endian::big;
    } else {
      return error{errc::bad_pcap, 0, "magic"};
    }
    r.res_ = (r.order_ == std::endian::big ? mb : m) == magic_nano ? resolution::nano : resolution::micro;
    if (r.load16(4) != 2) return error{errc::bad_pcap, 4, "version"};
    r.snaplen_ = r.load32(16);
    r.linktype_ = r.load32(20);
    r.pos_ = file_header_size;
    return r;
  }

  /// The next record, nullopt at the end of the file. Classic: bad_pcap for a record longer
  /// than max_record or than its original length; truncated for one cut by the end of the file.
  /// pcapng: the errors listed at the top of this header.
  constexpr result<std::optional<record>> next() {
    if (fmt_ == format::pcapng) return read_ng(false);
    if (pos_ == file_.size()) return std::optional<record>{};
    if (file_.size() - pos_ < record_header_size) return error{errc::truncated, file_.size(), "pcap record"};
    const std::uint32_t sec = load32(pos_), frac = load32(pos_ + 4);
    const std::uint32_t incl = load32(pos_ + 8), orig = load32(pos_ + 12);
    if (incl > max_record || incl > orig) return error{errc::bad_pcap, pos_ + 8, "incl_len"};
    if (file_.size() - pos_ - record_header_size < incl) return error{errc::truncated, file_.size(), "pcap record"};
    record r;
    r.ts_ns = std::uint64_t{sec} * detail::ns_per_s + (res_ == resolution::nano ? frac : std::uint64_t{frac} * 1000u);
    r.orig_len = orig;
    r.data = file_.subspan(pos_ + record_header_size, incl);
    r.linktype = linktype_;
    pos_ += record_header_size + incl;
    return std::optional<record>{r};
  }

  constexpr format file_format() const { return fmt_; }
  /// Classic: the file's link type and snaplen. pcapng: those of interface 0 of the current
  /// section (0 until its IDB is read); each record carries its own link type.
  constexpr std::uint32_t linktype() const { return fmt_ == format::pcap ? linktype_ : n_ifs_ ? ifs_[0].linktype : 0; }
  constexpr std::uint32_t snaplen() const { return fmt_ == format::pcap ? snaplen_ : n_ifs_ ? ifs_[0].snaplen : 0; }
  /// Classic only (pcapng: per interface, interface_info::tsresol).
  constexpr resolution timestamps() const { return res_; }
  /// The byte order of the file (pcapng: of the current section).
  constexpr std::endian byte_order() const { return order_; }
  constexpr bool byte_swapped() const { return order_ == std::endian::big; }
  /// pcapng: the interfaces of the current section read so far.
  constexpr std::span<const interface_info> interfaces() const { return std::span(ifs_).first(n_ifs_); }
  /// pcapng: where the current section's SHB starts, and the section length it declares (-1:
  /// unspecified; the bytes after the SHB). A tool appending blocks updates a declared length.
  constexpr std::size_t section_offset() const { return section_shb_; }
  constexpr std::int64_t section_length() const { return section_length_; }
  /// pcapng: the offset of the section length field in its SHB.
  static constexpr std::size_t section_length_field = 16;
  /// pcapng: sections started so far.
  constexpr std::size_t sections() const { return sections_; }
  /// pcapng: the blocks skipped so far, one entry per type, in the order first seen.
  constexpr std::span<const skipped_block> skipped() const { return std::span(skipped_).first(n_skipped_); }
  /// pcapng: skipped blocks of types beyond the first ng::max_skipped_types.
  constexpr std::uint64_t skipped_other() const { return skipped_other_; }

 private:
  constexpr std::uint16_t load16(std::size_t at) const { return static_cast<std::uint16_t>(load<2>(file_.data() + at, order_)); }
  constexpr std::uint32_t load32(std::size_t at) const { return static_cast<std::uint32_t>(load<4>(file_.data() + at, order_)); }
  constexpr std::uint64_t load64(std::size_t at) const { return load<8>(file_.data() + at, order_); }

  /// The block at pos_ fits: its total length (checked against its minimum for its type, the
  /// limit, the file and the trailing copy).
  constexpr result<std::uint32_t> block_length(std::uint32_t min) const {
    const std::size_t left = file_.size() - pos_;
    if (left < 8) return error{errc::truncated, file_.size(), "pcapng block"};
    const std::uint32_t total = load32(pos_ + 4);
    if (total < min || total % 4 != 0 || total > ng::max_block) return error{errc::bad_pcap, pos_ + 4, "block_total_length"};
    if (left < total) return error{errc::truncated, file_.size(), "pcapng block"};
    if (load32(pos_ + total - 4) != total) return error{errc::bad_pcap, pos_ + total - 4, "block_total_length"};
    return total;
  }

  /// The file ends: a last section shorter than its declared length was cut.
  constexpr result<bool> end_of_file() const {
    if (section_length_ >= 0 && pos_ - section_body_ < static_cast<std::uint64_t>(section_length_))
      return error{errc::truncated, file_.size(), "pcapng section"};
    return true;
  }

  constexpr result<bool> read_shb() {
    if (file_.size() - pos_ < 12) return error{errc::truncated, file_.size(), "pcapng section header"};
    std::endian order;
    if (load_le32(file_.data() + pos_ + 8) == ng::byte_order_magic) order = std::endian::little;
    else if (load_be32(file_.data() + pos_ + 8) == ng::byte_order_magic) order = std::endian::big;
    else return error{errc::bad_pcap, pos_ + 8, "byte_order_magic"};
    const std::endian previous = order_;
    order_ = order;  // lengths and fields of this section are in its order
    const auto total = block_length(ng::min_shb);
    error e{};
    std::int64_t length = -1;
    if (!total) {
      e = total.error();
    } else {  // the block holds at least the fixed part
      const std::uint16_t major = load16(pos_ + 12), minor = load16(pos_ + 14);
      length = static_cast<std::int64_t>(load64(pos_ + 16));
      if (major != 1 || (minor != 0 && minor != 2)) e = {errc::bad_pcap, pos_ + 12, "version"};
      else if (length < -1 || (length >= 0 && length % 4 != 0)) e = {errc::bad_pcap, pos_ + 16, "section_length"};
    }
    if (e.code != errc{}) {
      order_ = previous;
      return e;
    }
    section_shb_ = pos_;
    section_body_ = pos_ + *total;
    section_length_ = length;
    n_ifs_ = 0;
    ++sections_;
    pos_ += *total;
    return true;
  }

  constexpr result<bool> read_idb(std::uint32_t total) {
    if (n_ifs_ == ng::max_interfaces) return error{errc::bad_pcap, pos_, "interface_count"};
    interface_info i;
    i.linktype = load16(pos_ + 8);
    i.snaplen = load32(pos_ + 12);
    const std::size_t end = pos_ + total - 4;
    for (std::size_t o = pos_ + 16; end - o >= 4;) {  // o and end are 4-aligned within the block
      const std::uint16_t code = load16(o), len = load16(o + 2);
      if (code == ng::opt_endofopt) break;
      const std::size_t padded = (std::size_t{len} + 3) & ~std::size_t{3};
      if (end - o - 4 < padded) return error{errc::bad_pcap, o + 2, "option_length"};
      if (code == ng::opt_if_tsresol) {
        if (len != 1) return error{errc::bad_pcap, o + 2, "if_tsresol"};
        const auto r = static_cast<std::uint8_t>(file_[o + 4]);
        if (!detail::valid_tsresol(r)) return error{errc::bad_pcap, o + 4, "if_tsresol"};
        i.tsresol = r;
      } else if (code == ng::opt_if_tsoffset) {
        if (len != 8) return error{errc::bad_pcap, o + 2, "if_tsoffset"};
        i.tsoffset = static_cast<std::int64_t>(load64(o + 4));
      }
      o += 4 + padded;
    }
    ifs_[n_ifs_++] = i;
    return true;
  }

  /// The EPB, obsolete packet block (16-bit interface id) or SPB at pos_, as a record.
  constexpr result<record> read_packet(std::uint32_t type, std::uint32_t total) const {
    record r;
    std::size_t data_at = 0, room = 0;
    std::uint32_t cap = 0;
    if (type == ng::block_spb) {
      if (n_ifs_ == 0) return error{errc::bad_pcap, pos_, "interface_id"};
      r.orig_len = load32(pos_ + 8);
      cap = ifs_[0].snaplen != 0 && ifs_[0].snaplen < r.orig_len ? ifs_[0].snaplen : r.orig_len;
      data_at = pos_ + 12;
      room = total - ng::min_spb;
      if (cap > max_record || cap > room) return error{errc::bad_pcap, pos_ + 8, "original_length"};
      r.has_timestamp = false;
    } else {
      r.interface_id = type == ng::block_epb ? load32(pos_ + 8) : load16(pos_ + 8);
      if (r.interface_id >= n_ifs_) return error{errc::bad_pcap, pos_ + 8, "interface_id"};
      cap = load32(pos_ + 20);
      r.orig_len = load32(pos_ + 24);
      data_at = pos_ + 28;
      room = total - ng::min_epb;
      if (cap > max_record || cap > r.orig_len || cap > room)  // room is 4-aligned: the padding fits too
        return error{errc::bad_pcap, pos_ + 20, "captured_length"};
      const interface_info& i = ifs_[r.interface_id];
      const std::uint64_t ts = std::uint64_t{load32(pos_ + 12)} << 32 | load32(pos_ + 16);
      const auto ns = detail::to_ns(ts, i.tsresol, i.tsoffset);
      if (!ns) return error{errc::bad_pcap, pos_ + 12, "timestamp"};
      r.ts_ns = *ns;
    }
    r.linktype = ifs_[r.interface_id].linktype;
    r.data = file_.subspan(data_at, cap);
    return r;
  }

  constexpr void skip(std::uint32_t type) {
    for (std::size_t k = 0; k < n_skipped_; ++k)
      if (skipped_[k].type == type) return void(++skipped_[k].count);
    if (n_skipped_ < skipped_.size()) skipped_[n_skipped_++] = {type, 1};
    else ++skipped_other_;
  }

  /// Reads blocks up to the next record (or, with `stop_at_packet`, up to the next packet block
  /// without reading it).
  constexpr result<std::optional<record>> read_ng(bool stop_at_packet) {
    for (;;) {
      if (pos_ == file_.size()) {
        if (auto e = end_of_file(); !e) return e.error();
        return std::optional<record>{};
      }
      if (file_.size() - pos_ < 4) return error{errc::truncated, file_.size(), "pcapng block"};
      const std::uint32_t type = load32(pos_);  // the SHB type reads the same in both orders
      if (type == ng::block_shb) {
        if (auto s = read_shb(); !s) return s.error();
        continue;
      }
      const bool packet = type == ng::block_epb || type == ng::block_opb || type == ng::block_spb;
      if (packet && stop_at_packet) return std::optional<record>{};
      const auto total = block_length(type == ng::block_idb   ? ng::min_idb
                                      : type == ng::block_spb ? ng::min_spb
                                      : packet                ? ng::min_epb
                                                              : ng::min_block);
      if (!total) return total.error();
      if (packet) {
        auto r = read_packet(type, *total);
        if (!r) return r.error();
        pos_ += *total;
        return std::optional<record>{*r};
      }
      if (type == ng::block_idb) {
        if (auto i = read_idb(*total); !i) return i.error();
      } else {
        skip(type);
      }
      pos_ += *total;
    }
  }

  std::span<const std::byte> file_{};
  std::size_t pos_ = 0;
  format fmt_ = format::pcap;
  std::endian order_ = std::endian::little;
  resolution res_ = resolution::micro;
  std::uint32_t snaplen_ = 0, linktype_ = 0;
  // pcapng
  std::size_t section_shb_ = 0;      ///< offset of the current section's SHB
  std::size_t section_body_ = 0;     ///< offset of the current section's first block after its SHB
  std::int64_t section_length_ = -1; ///< its declared length, -1 unspecified
  std::size_t sections_ = 0;
  std::array<interface_info, ng::max_interfaces> ifs_{};
  std::size_t n_ifs_ = 0;
  std::array<skipped_block, ng::max_skipped_types> skipped_{};
  std::size_t n_skipped_ = 0;
  std::uint64_t skipped_other_ = 0;
};

/// One line per type of block `r` skipped so far (to_text), and one for skipped_other(): what a
/// tool prints as warnings after reading a pcapng file.
inline std::vector<std::string> skipped_text(const reader& r) {
  std::vector<std::string> lines;
  for (const auto& s : r.skipped()) lines.push_back(to_text(s));
  if (r.skipped_other() != 0)
    lines.push_back("skipped " + std::to_string(r.skipped_other()) + " more blocks of types beyond the first " +
                    std::to_string(ng::max_skipped_types));
  return lines;
}

/// A classic pcap file header (little-endian).
inline std::array<std::byte, file_header_size> file_header(resolution res = resolution::micro, std::uint32_t linktype = linktype_ethernet,
                                                           std::uint32_t snaplen = max_record) {
  std::array<std::byte, file_header_size> h{};
  store_le32(h.data(), res == resolution::nano ? magic_nano : magic_micro);
  store_le16(h.data() + 4, 2);
  store_le16(h.data() + 6, 4);
  // thiszone and sigfigs: 0
  store_le32(h.data() + 16, snaplen);
  store_le32(h.data() + 20, linktype);
  return h;
}
/// A record's header for a frame of `size` bytes captured at ts_ns (nanoseconds since the
/// epoch), to write before the frame's bytes (a record without the file header: a stream of
/// records appended to a file that has one).
inline std::array<std::byte, record_header_size> record_header(std::uint64_t ts_ns, std::size_t size, resolution res = resolution::micro) {
  std::array<std::byte, record_header_size> h{};
  store_le32(h.data(), static_cast<std::uint32_t>(ts_ns / 1000000000u));
  const std::uint64_t frac = ts_ns % 1000000000u;
  store_le32(h.data() + 4, static_cast<std::uint32_t>(res == resolution::nano ? frac : frac / 1000u));
  store_le32(h.data() + 8, static_cast<std::uint32_t>(size));
  store_le32(h.data() + 12, static_cast<std::uint32_t>(size));
  return h;
}

/// Appends a classic pcap file to a byte vector: the file header, then one record per add().
class writer {
 public:
  explicit writer(std::vector<std::byte>& out, resolution res = resolution::micro,
                  std::uint32_t linktype = linktype_ethernet, std::uint32_t snaplen = max_record)
      : out_(out), res_(res) {
    append(file_header(res, linktype, snaplen));
  }

  /// Appends one frame captured at ts_ns (nanoseconds since the epoch).
  void add(std::uint64_t ts_ns, std::span<const std::byte> frame) {
    append(record_header(ts_ns, frame.size(), res_));
    out_.insert(out_.end(), frame.begin(), frame.end());
  }

 private:
  /// A header's bytes, one by one (g++-12 at -O3 warns falsely on a sized insert here).
  void append(std::span<const std::byte> b) {
    for (const std::byte x : b) out_.push_back(x);
  }
  std::vector<std::byte>& out_;
  resolution res_;
};

}  // namespace pushwire::wire::pcap
