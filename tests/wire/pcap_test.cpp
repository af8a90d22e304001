#include <pushwire/wire/pcap.hpp>

#include <cstdint>
#include <cstring>
#include <optional>
#include <set>
#include <vector>

#include "../support/pcapng.hpp"
#include "../support/test_support.hpp"

using namespace pushwire;
namespace pcap = wire::pcap;
using wire::errc;

TEST_CASE("pcap: write, read back, both resolutions", "[wire][pcap]") {
  for (auto res : {pcap::resolution::micro, pcap::resolution::nano}) {
    std::vector<std::byte> file;
    pcap::writer w{file, res};
    const auto a = test::copy(test::hex<"0102030405">()), b = test::copy(test::hex<"ff">());
    w.add(1'700'000'000'123'456'789ull, a);
    w.add(1'700'000'001'000'000'000ull, b);
    auto r = pcap::reader::open(file);
    REQUIRE(r.has_value());
    CHECK(r->linktype() == pcap::linktype_ethernet);
    CHECK(r->timestamps() == res);
    auto x = r->next();
    REQUIRE(x.has_value());
    REQUIRE(x->has_value());
    CHECK(std::ranges::equal((*x)->data, a));
    CHECK((*x)->ts_ns == (res == pcap::resolution::nano ? 1'700'000'000'123'456'789ull : 1'700'000'000'123'456'000ull));
    auto y = r->next();
    REQUIRE(y->has_value());
    CHECK(std::ranges::equal((*y)->data, b));
    auto end = r->next();
    REQUIRE(end.has_value());
    CHECK_FALSE(end->has_value());
  }
}

TEST_CASE("pcap: a file header and records written one at a time make the writer's file, byte for byte", "[wire][pcap]") {
  const auto a = test::copy(test::hex<"0102030405">()), b = test::copy(test::hex<"ff">());
  std::vector<std::byte> whole;
  pcap::writer w{whole, pcap::resolution::nano};
  w.add(7'000'000'001ull, a);
  w.add(9'000'000'000ull, b);
  // The same file from its parts: the header once, then each record on its own (as a tap
  // appends them to a file it opened).
  std::vector<std::byte> parts;
  auto append = [&](std::span<const std::byte> x) {
    for (const std::byte b : x) parts.push_back(b);
  };
  append(pcap::file_header(pcap::resolution::nano));
  for (const auto& [ts, f] : {std::pair{7'000'000'001ull, a}, std::pair{9'000'000'000ull, b}}) {
    const auto r = pcap::record_header(ts, f.size(), pcap::resolution::nano);
    CHECK(r.size() == pcap::record_header_size);
    append(r);
    append(f);
  }
  CHECK(parts == whole);
  // The record header, spelled out: seconds, nanoseconds, captured and original lengths (LE).
  CHECK(std::ranges::equal(pcap::record_header(7'000'000'001ull, 5, pcap::resolution::nano),
                           test::hex<"07000000" "01000000" "05000000" "05000000">()));
  CHECK(std::ranges::equal(pcap::record_header(7'000'001'999ull, 5, pcap::resolution::micro),
                           test::hex<"07000000" "01000000" "05000000" "05000000">()));
  CHECK(std::ranges::equal(pcap::file_header(), test::hex<"d4c3b2a1" "0200" "0400" "00000000" "00000000" "00000400" "01000000">()));
}

TEST_CASE("pcap: big-endian files, and malformed ones", "[wire][pcap]") {
  // A big-endian header (as written on a big-endian host) with one 2-byte record.
  const auto be = test::copy(test::hex<"a1b2c3d4 0002 0004 00000000 00000000 0000ffff 00000001"
                                       "00000001 00000002 00000002 00000002 abcd">());
  auto r = pcap::reader::open(be);
  REQUIRE(r.has_value());
  CHECK(r->byte_swapped());
  auto x = r->next();
  REQUIRE(x->has_value());
  CHECK((*x)->ts_ns == 1'000'002'000ull);
  CHECK((*x)->data.size() == 2);
  auto bad_magic = be;
  bad_magic[0] = std::byte{0};
  CHECK(pcap::reader::open(bad_magic).error() == wire::error{errc::bad_pcap, 0, "magic"});
  auto bad_version = be;
  bad_version[5] = std::byte{3};
  CHECK(pcap::reader::open(bad_version).error().field == "version");
  CHECK(pcap::reader::open(std::span(be).first(23)).code() == errc::truncated);
  for (std::size_t k = 25; k < be.size(); ++k) {
    auto cut = pcap::reader::open(std::span(be).first(k));
    REQUIRE(cut.has_value());
    CHECK(cut->next().code() == errc::truncated);
  }
  auto huge = be;
  huge[32] = std::byte{0x7f};  // incl_len 0x7f000002
  auto h = pcap::reader::open(huge);
  CHECK(h->next().error() == wire::error{errc::bad_pcap, 32, "incl_len"});
}

TEST_CASE("pcap: classic records carry their link type, interface 0 and a timestamp", "[wire][pcap]") {
  std::vector<std::byte> file;
  pcap::writer w{file, pcap::resolution::micro, 101};
  const auto a = test::copy(test::hex<"4500">());
  w.add(5'000, a);
  auto r = pcap::reader::open(file);
  REQUIRE(r.has_value());
  CHECK(r->file_format() == pcap::format::pcap);
  auto x = r->next();
  REQUIRE(x->has_value());
  CHECK((*x)->linktype == 101);
  CHECK((*x)->interface_id == 0);
  CHECK((*x)->has_timestamp);
  CHECK((*x)->ts_ns == 5'000);
  CHECK(r->skipped().empty());
}

// ---- pcapng ----------------------------------------------------------------------------------

namespace ng = test::pcapng;

namespace {

struct want {
  std::uint32_t iface, linktype;
  bool has_ts;
  std::uint64_t ts_ns;
  std::uint32_t orig;
  std::vector<std::byte> data;
};

// What tshark 4.0 reads from test::pcapng::little and ::big (see tests/support/pcapng.hpp).
const std::vector<want> vector_records = {
    {0, 1, true, 1'700'000'000'123'456'789ull, 5, test::copy(test::hex<"0102030405">())},
    {1, 101, true, 1'700'000'000'500'000'000ull, 60, test::copy(test::hex<"45000014">())},
    {0, 1, false, 0, 3, test::copy(test::hex<"aabbcc">())},
};

// Every record of `file`, or the first error.
struct read_all {
  std::vector<pcap::record> records;
  std::optional<wire::error> err;
  std::optional<pcap::reader> reader;
  explicit read_all(std::span<const std::byte> file) {
    auto r = pcap::reader::open(file);
    if (!r) {
      err = r.error();
      return;
    }
    for (std::size_t guard = 0; guard <= file.size(); ++guard) {
      auto x = r->next();
      if (!x) {
        err = x.error();
        break;
      }
      if (!*x) break;
      // never a span outside the file
      REQUIRE((*x)->data.data() >= file.data());
      REQUIRE((*x)->data.data() + (*x)->data.size() <= file.data() + file.size());
      records.push_back(**x);
    }
    reader = *r;
  }
};

void check_records(const std::vector<pcap::record>& got, const std::vector<want>& w) {
  REQUIRE(got.size() == w.size());
  for (std::size_t i = 0; i < w.size(); ++i) {
    INFO("record " << i);
    CHECK(got[i].interface_id == w[i].iface);
    CHECK(got[i].linktype == w[i].linktype);
    CHECK(got[i].has_timestamp == w[i].has_ts);
    CHECK(got[i].ts_ns == w[i].ts_ns);
    CHECK(got[i].orig_len == w[i].orig);
    CHECK(std::ranges::equal(got[i].data, w[i].data));
  }
}

std::vector<std::byte> cat(std::span<const std::byte> a, std::span<const std::byte> b) {
  std::vector<std::byte> v(a.begin(), a.end());
  v.insert(v.end(), b.begin(), b.end());
  return v;
}

// Reads one record from `file` (expected to open), returning its error or the record.
wire::error first_error(std::span<const std::byte> file) {
  read_all a(file);
  return a.err.value_or(wire::error{});
}

template <class F>
std::vector<std::byte> patched(F&& f, std::vector<std::byte> v = test::copy(ng::little)) {
  f(v);
  return v;
}
void put_le32(std::vector<std::byte>& v, std::size_t at, std::uint32_t x) {
  for (int i = 0; i < 4; ++i) v[at + static_cast<std::size_t>(i)] = static_cast<std::byte>(x >> (8 * i));
}

}  // namespace

// In constant evaluation: the little-endian vector's three records.
static_assert([] {
  auto r = pcap::reader::open(ng::little);
  if (!r || r->file_format() != pcap::format::pcapng || r->linktype() != 1) return false;
  auto a = r->next(), b = r->next(), c = r->next(), end = r->next();
  return a && *a && (*a)->ts_ns == 1'700'000'000'123'456'789ull && (*a)->data.size() == 5 && b && *b &&
         (*b)->interface_id == 1 && (*b)->linktype == 101 && (*b)->ts_ns == 1'700'000'000'500'000'000ull && c && *c &&
         !(*c)->has_timestamp && (*c)->data.size() == 3 && end && !*end && r->skipped().size() == 2;
}());

TEST_CASE("pcapng: both byte orders, two interfaces (10^-9 and 2^-10), EPB, SPB, skipped blocks", "[wire][pcap][pcapng]") {
  for (const auto& file : {test::copy(ng::little), test::copy(ng::big)}) {
    const bool big = file == test::copy(ng::big);
    INFO((big ? "big-endian" : "little-endian"));
    auto r = pcap::reader::open(file);
    REQUIRE(r.has_value());
    CHECK(r->file_format() == pcap::format::pcapng);
    CHECK(r->byte_swapped() == big);
    CHECK(r->linktype() == 1);  // interface 0, read by open()
    CHECK(r->snaplen() == 262144);
    read_all a(file);
    CHECK_FALSE(a.err);
    check_records(a.records, vector_records);
    const auto ifs = a.reader->interfaces();
    REQUIRE(ifs.size() == 2);
    CHECK(ifs[0].tsresol == 9);
    CHECK(ifs[1].tsresol == 0x8A);
    CHECK(ifs[1].snaplen == 0);
    const auto sk = a.reader->skipped();
    REQUIRE(sk.size() == 2);
    CHECK(pcap::to_text(sk[0]) == "skipped 1 block of type 0x00000005 (interface statistics)");
    CHECK(pcap::to_text(sk[1]) == "skipped 1 block of type 0x00000bad (custom (copiable))");
    CHECK(a.reader->skipped_other() == 0);
  }
}

TEST_CASE("pcapng: several sections, each with its own byte order and interfaces", "[wire][pcap][pcapng]") {
  const auto both = cat(ng::little, ng::big);
  read_all a(both);
  CHECK_FALSE(a.err);
  auto w = vector_records;
  w.insert(w.end(), vector_records.begin(), vector_records.end());
  check_records(a.records, w);
  CHECK(a.reader->sections() == 2);
  CHECK(a.reader->interfaces().size() == 2);  // the second section's
  CHECK(a.reader->byte_swapped());
  REQUIRE(a.reader->skipped().size() == 2);
  CHECK(pcap::to_text(a.reader->skipped()[0]) == "skipped 2 blocks of type 0x00000005 (interface statistics)");
  // An interface of section 1 is not one of section 2: a second section with no IDB.
  ng::writer x;
  x.shb().idb(1, 0).idb(1, 0).shb().epb(0, 1, test::copy(test::hex<"00">()));
  CHECK(first_error(x.out) == wire::error{errc::bad_pcap, 96 + 8, "interface_id"});
}

TEST_CASE("pcapng: every truncation of a valid file is an error, never a partial record", "[wire][pcap][pcapng]") {
  const auto both = cat(ng::little, ng::big);
  for (const auto& file : {test::copy(ng::little), test::copy(ng::big), both}) {
    const read_all full(file);
    REQUIRE_FALSE(full.err);
    for (std::size_t k = 0; k < file.size(); ++k) {
      INFO("cut at " << k << " of " << file.size());
      const read_all cut{std::span(file).first(k)};
      for (std::size_t i = 0; i < cut.records.size(); ++i) {  // a prefix of the records, each whole
        CHECK(std::ranges::equal(cut.records[i].data, full.records[i].data));
        CHECK(cut.records[i].orig_len == full.records[i].orig_len);
      }
      if (k == ng::little.size() && file.size() > k) {
        CHECK_FALSE(cut.err);  // a whole first section is a whole file
        continue;
      }
      REQUIRE(cut.err);  // both sections declare their length
      CHECK(cut.err->code == errc::truncated);
    }
  }
  // Without a declared section length a cut between blocks cannot be told from an end of file;
  // anywhere else it is truncated.
  ng::writer w;
  w.shb().idb(1, 0).epb(0, 7, test::copy(test::hex<"0102">())).other(5).spb(4, test::copy(test::hex<"0a0b0c0d">()));
  const read_all full(w.out);
  REQUIRE(full.records.size() == 2);
  const std::set<std::size_t> boundaries{28, 48, 84, 96, 116};
  for (std::size_t k = 0; k < w.out.size(); ++k) {
    INFO("cut at " << k);
    const read_all cut{std::span(w.out).first(k)};
    if (boundaries.contains(k)) {
      CHECK_FALSE(cut.err);
      CHECK(cut.records.size() == std::size_t{k >= 84} + std::size_t{k >= 116});
    } else {
      REQUIRE(cut.err);
      CHECK(cut.err->code == errc::truncated);
    }
  }
}

TEST_CASE("pcapng: corrupted lengths and fields get named errors", "[wire][pcap][pcapng]") {
  constexpr std::size_t epb0 = ng::block_offsets[3], epb1 = ng::block_offsets[5], spb = ng::block_offsets[6];
  const auto lengths = [&](std::size_t block, std::uint32_t total) {
    return patched([&](auto& v) { put_le32(v, block + 4, total); });
  };
  CHECK(first_error(lengths(epb0, 0x29)) == wire::error{errc::bad_pcap, epb0 + 4, "block_total_length"});  // not 4-aligned
  CHECK(first_error(lengths(epb0, 28)) == wire::error{errc::bad_pcap, epb0 + 4, "block_total_length"});    // below an EPB
  CHECK(first_error(lengths(epb0, 8)) == wire::error{errc::bad_pcap, epb0 + 4, "block_total_length"});     // below any block
  CHECK(first_error(lengths(epb0, 0x7F000000)) == wire::error{errc::bad_pcap, epb0 + 4, "block_total_length"});  // > max_block
  CHECK(first_error(lengths(epb0, 0x1000)) == wire::error{errc::truncated, ng::little.size(), "pcapng block"});  // past the end
  CHECK(first_error(lengths(epb0, 36)) == wire::error{errc::bad_pcap, epb0 + 32, "block_total_length"});  // trailer disagrees
  // The SHB: byte-order magic, version, section length (not aligned, too short, too long).
  CHECK(pcap::reader::open(patched([](auto& v) { v[8] = std::byte{0}; })).error() ==
        wire::error{errc::bad_pcap, 8, "byte_order_magic"});
  CHECK(pcap::reader::open(patched([](auto& v) { v[12] = std::byte{2}; })).error() == wire::error{errc::bad_pcap, 12, "version"});
  CHECK(pcap::reader::open(patched([](auto& v) { v[14] = std::byte{2}; })).has_value());  // 1.2 is read as 1.0
  CHECK(pcap::reader::open(patched([](auto& v) { v[16] = std::byte{0xC6}; })).error() ==
        wire::error{errc::bad_pcap, 16, "section_length"});
  // A declared length is checked only where the file ends (a cut file): a section longer than
  // declared, or a first section shorter, reads as Wireshark reads it (scapy 2.5 declares 0).
  CHECK(first_error(patched([](auto& v) { v[16] = std::byte{0xCC}; })) == wire::error{errc::truncated, ng::little.size(), "pcapng section"});
  CHECK(first_error(patched([](auto& v) { v[16] = std::byte{0xC4}; })) == wire::error{});
  CHECK(first_error(patched([](auto& v) { v[16] = std::byte{0}; })) == wire::error{});
  CHECK(first_error(cat(patched([](auto& v) { v[16] = std::byte{0xCC}; }), ng::big)) == wire::error{});
  CHECK(pcap::reader::open(patched([](auto& v) { put_le32(v, 16, 0xFFFFFFF0); put_le32(v, 20, ~0u); })).error().field == "section_length");  // negative
  CHECK(pcap::reader::open(std::span(ng::little).first(11)).error() == wire::error{errc::truncated, 11, "pcapng section header"});
  // EPB: captured length beyond the block, above the original length, above max_record; an
  // interface that does not exist.
  CHECK(first_error(patched([&](auto& v) { v[epb0 + 20] = v[epb0 + 24] = std::byte{9}; })) ==
        wire::error{errc::bad_pcap, epb0 + 20, "captured_length"});
  CHECK(first_error(patched([&](auto& v) { put_le32(v, epb0 + 20, pcap::max_record + 4); put_le32(v, epb0 + 24, ~0u); })) ==
        wire::error{errc::bad_pcap, epb0 + 20, "captured_length"});
  CHECK(first_error(patched([&](auto& v) { v[epb0 + 24] = std::byte{4}; })) == wire::error{errc::bad_pcap, epb0 + 20, "captured_length"});
  CHECK(first_error(patched([&](auto& v) { v[epb0 + 8] = std::byte{2}; })) == wire::error{errc::bad_pcap, epb0 + 8, "interface_id"});
  CHECK(first_error(patched([&](auto& v) { v[epb1 + 11] = std::byte{0x80}; })) == wire::error{errc::bad_pcap, epb1 + 8, "interface_id"});
  // SPB: an original length beyond the block (interface 0's snaplen does not cut it).
  CHECK(first_error(patched([&](auto& v) { v[spb + 8] = std::byte{5}; })) == wire::error{errc::bad_pcap, spb + 8, "original_length"});
  // IDB options: if_tsresol of the wrong size or beyond the limits, an option past the block.
  constexpr std::size_t idb0 = ng::block_offsets[1];
  CHECK(pcap::reader::open(patched([&](auto& v) { v[idb0 + 18] = std::byte{2}; })).error() ==
        wire::error{errc::bad_pcap, idb0 + 18, "if_tsresol"});
  CHECK(pcap::reader::open(patched([&](auto& v) { v[idb0 + 20] = std::byte{20}; })).error() ==
        wire::error{errc::bad_pcap, idb0 + 20, "if_tsresol"});
  CHECK(pcap::reader::open(patched([&](auto& v) { v[idb0 + 20] = std::byte{0x80 | 64}; })).error() ==
        wire::error{errc::bad_pcap, idb0 + 20, "if_tsresol"});
  CHECK(pcap::reader::open(patched([&](auto& v) { v[idb0 + 18] = std::byte{9}; })).error() ==
        wire::error{errc::bad_pcap, idb0 + 18, "option_length"});
}

TEST_CASE("pcapng: SPB captured length, obsolete packet blocks, if_tsoffset, timestamp units and limits", "[wire][pcap][pcapng]") {
  const auto four = test::copy(test::hex<"0a0b0c0d">());
  {  // SPB: captured = min(original, snaplen of interface 0); no interface: an error
    ng::writer w;
    w.shb().idb(1, 2).spb(3, std::span(four).first(2)).spb(1, std::span(four).first(1));
    read_all a(w.out);
    REQUIRE_FALSE(a.err);
    check_records(a.records, {{0, 1, false, 0, 3, test::copy(test::hex<"0a0b">())}, {0, 1, false, 0, 1, test::copy(test::hex<"0a">())}});
    ng::writer none;
    none.shb().spb(1, std::span(four).first(1));
    CHECK(first_error(none.out) == wire::error{errc::bad_pcap, 28, "interface_id"});
  }
  {  // Obsolete packet block (type 2): 16-bit interface id, 16-bit drop count
    ng::writer w;
    w.shb().idb(1, 0).idb(147, 0).other(2, test::copy(test::hex<"0100 0000 00000000 41420f00 02000000 09000000 abcd">()));
    read_all a(w.out);
    REQUIRE_FALSE(a.err);
    check_records(a.records, {{1, 147, true, 1'000'001'000ull, 9, test::copy(test::hex<"abcd">())}});
  }
  {  // Big-endian obsolete packet block: the same values
    ng::writer w(true);
    w.shb().idb(1, 0).idb(147, 0).other(2, test::copy(test::hex<"0001 0000 00000000 000f4241 00000002 00000009 abcd">()));
    read_all a(w.out);
    REQUIRE_FALSE(a.err);
    check_records(a.records, {{1, 147, true, 1'000'001'000ull, 9, test::copy(test::hex<"abcd">())}});
  }
  // Timestamps: (tsresol, tsoffset, raw) -> ns, computed by hand.
  struct ts_case {
    std::optional<std::uint8_t> res;
    std::optional<std::int64_t> offset;
    std::uint64_t raw, ns;
  };
  const ts_case cases[] = {
      {{}, {}, 1'500'000, 1'500'000'000},                         // default: microseconds
      {0, {}, 7, 7'000'000'000},                                  // seconds
      {12, {}, 1'234'567'890'123, 1'234'567'890},                 // picoseconds: truncated to ns
      {19, {}, 10'000'000'000'000'000'000ull, 1'000'000'000},     // 10^-19 (the limit)
      {0x80 | 40, {}, (1ull << 40) + (1ull << 39), 1'500'000'000},  // 2^-40
      {0x80 | 33, {}, (3ull << 33) + (1ull << 32), 3'500'000'000},  // 2^-33
      {0x80 | 63, {}, ~0ull, 1'999'999'999},                      // 2^-63 (the limit): 1 s + floor((2^63-1)*10^9/2^63) ns
      {0x80 | 32, {}, (5ull << 32) + (1ull << 31), 5'500'000'000},  // 2^-32
      {0x80 | 31, {}, (2ull << 31) + (1ull << 30), 2'500'000'000},  // 2^-31
      {0x80 | 10, {}, 1, 976'562},                                // 2^-10: floor(10^9 / 1024) ns
      {0x80 | 0, {}, 3, 3'000'000'000},                           // 2^0: seconds
      {{}, 10, 5, 10'000'005'000},                                // if_tsoffset adds seconds
      {9, -2, 3'000'000'001, 1'000'000'001},                      // and may be negative
  };
  for (const auto& c : cases) {
    INFO("tsresol " << (c.res ? int{*c.res} : -1) << " offset " << c.offset.value_or(0) << " raw " << c.raw);
    ng::writer w;
    w.shb().idb(1, 0, c.res, c.offset).epb(0, c.raw, std::span(four).first(1));
    read_all a(w.out);
    REQUIRE_FALSE(a.err);
    REQUIRE(a.records.size() == 1);
    CHECK(a.records[0].ts_ns == c.ns);
  }
  // ... and timestamps that do not fit in 64-bit nanoseconds since the epoch.
  for (const auto& c : {ts_case{0, {}, 1ull << 62, 0}, ts_case{{}, {}, ~0ull, 0}, ts_case{9, -2, 1'999'999'999, 0},
                        ts_case{9, INT64_MIN, 0, 0}, ts_case{9, INT64_MAX, 0, 0}, ts_case{0x80 | 1, {}, ~0ull, 0}}) {
    ng::writer w;
    w.shb().idb(1, 0, c.res, c.offset).epb(0, c.raw, std::span(four).first(1));
    const std::size_t epb = 28 + 20 + (c.res ? 8 : 0) + (c.offset ? 12 : 0) + (c.res || c.offset ? 4 : 0);
    CHECK(first_error(w.out) == wire::error{errc::bad_pcap, epb + 12, "timestamp"});
  }
}

TEST_CASE("pcapng: limits on interfaces and on the list of skipped block types", "[wire][pcap][pcapng]") {
  ng::writer w;
  w.shb();
  for (std::size_t i = 0; i < pcap::ng::max_interfaces; ++i) w.idb(static_cast<std::uint16_t>(i), 0);
  const auto one = test::copy(test::hex<"01">());
  w.epb(pcap::ng::max_interfaces - 1, 0, one);
  for (std::uint32_t t = 0x100; t < 0x100 + pcap::ng::max_skipped_types + 3; ++t) w.other(t).other(t);
  read_all a(w.out);
  REQUIRE_FALSE(a.err);
  REQUIRE(a.records.size() == 1);
  CHECK(a.records[0].linktype == pcap::ng::max_interfaces - 1);
  CHECK(a.reader->skipped().size() == pcap::ng::max_skipped_types);
  CHECK(a.reader->skipped()[0].count == 2);
  CHECK(a.reader->skipped_other() == 6);
  CHECK(pcap::to_text(a.reader->skipped()[0]) == "skipped 2 blocks of type 0x00000100 (unknown)");
  const auto lines = pcap::skipped_text(*a.reader);
  REQUIRE(lines.size() == pcap::ng::max_skipped_types + 1);
  CHECK(lines.back() == "skipped 6 more blocks of types beyond the first 16");
  const std::size_t at = w.out.size();
  w.idb(1, 0);  // one interface too many
  CHECK(first_error(w.out) == wire::error{errc::bad_pcap, at, "interface_count"});
}

TEST_CASE("pcapng: every byte of the vectors changed, no crash and spans inside the file", "[wire][pcap][pcapng]") {
  std::size_t errors = 0;
  for (const auto& file : {test::copy(ng::little), test::copy(ng::big)})
    for (std::size_t i = 0; i < file.size(); ++i)
      for (std::uint8_t x : {0x00, 0xFF, 0x80, 0x01}) {
        auto v = file;
        v[i] ^= std::byte{x};
        const read_all a(v);  // REQUIREs the spans
        errors += a.err.has_value();
      }
  CHECK(errors > 0);
}

TEST_CASE("pcapng: append_epb writes what the reader reads, in each unit and byte order", "[wire][pcap][pcapng]") {
  // Hand-computed units for 1700000000.123456789 s: 10^-6 -> 1700000000123456, 2^-10 ->
  // (1700000000 << 10) + floor(0.123456789 * 1024) = 1740800000000 + 126.
  static_assert(pcap::detail::from_ns(1700000000123456789ull, 6, 0) == 1700000000123456ull);
  static_assert(pcap::detail::from_ns(1700000000123456789ull, 0x8A, 0) == 1740800000126ull);
  static_assert(pcap::detail::from_ns(1700000000123456789ull, 10, 0) == 17000000001234567890ull);
  static_assert(!pcap::detail::from_ns(1700000000123456789ull, 11, 0).has_value());  // over 64 bits
  static_assert(!pcap::detail::from_ns(5, 9, 1).has_value());  // before the offset
  CHECK(pcap::detail::from_ns(1700000000123456789ull, 0x8A, 0) == 1740800000126ull);
  const auto frame = test::copy(test::hex<"0102030405060708090a">());
  for (const bool big : {false, true})
    for (const std::uint8_t res : {std::uint8_t{6}, std::uint8_t{9}, std::uint8_t{0x8A}, std::uint8_t{0x9E}, std::uint8_t{3}}) {
      for (const std::int64_t off : {std::int64_t{0}, std::int64_t{-100}, std::int64_t{1000}}) {
        INFO("big " << big << " tsresol " << int{res} << " offset " << off);
        test::pcapng::writer w(big);
        w.shb().idb(101, 0).idb(1, 0, res, off);
        const pcap::interface_info itf{.linktype = 1, .snaplen = 0, .tsresol = res, .tsoffset = off};
        const std::uint64_t ts = 1'700'000'000'987'654'321ull;
        REQUIRE(pcap::append_epb(w.out, big ? std::endian::big : std::endian::little, 1, itf, ts, frame).code == errc{});
        auto r = pcap::reader::open(w.out);
        REQUIRE(r.has_value());
        auto rec = r->next();
        REQUIRE((rec && *rec));
        CHECK((*rec)->interface_id == 1);
        CHECK((*rec)->linktype == 1);
        CHECK(std::equal((*rec)->data.begin(), (*rec)->data.end(), frame.begin(), frame.end()));
        // Rounded down to the unit: within one unit of the original, never after it.
        const std::uint64_t unit = (res & 0x80) ? (1'000'000'000ull >> (res & 0x7F)) + 2 : res >= 9 ? 1 : pcap::detail::pow10(9u - res);
        CHECK((*rec)->ts_ns <= ts);
        CHECK(ts - (*rec)->ts_ns < unit);
        CHECK(r->next().value() == std::nullopt);
      }
    }
  // Limits: a frame over max_record, a time before the offset.
  std::vector<std::byte> out;
  const std::vector<std::byte> huge(pcap::max_record + 1);
  CHECK(pcap::append_epb(out, std::endian::little, 0, {.linktype = 1}, 1, huge).field == std::string_view{"captured length"});
  CHECK(pcap::append_epb(out, std::endian::little, 0, {.linktype = 1, .tsoffset = 10}, 1, frame).field == std::string_view{"timestamp"});
  CHECK(out.empty());
}
