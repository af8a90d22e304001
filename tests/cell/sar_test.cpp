// Segmentation and reassembly: round trips at the boundary sizes and random sizes, the
// reassembler's bounds, and property tests under injected faults (drop, duplicate, reorder, bit
// flip): the outcome is always the exact packet or a named error, never wrong or repeated data.
#include "vectors.hpp"

#include <pushwire/cell/testing.hpp>

#include "sar_support.hpp"

#include <algorithm>
#include <map>
#include <random>
#include <vector>

using namespace pushwire;
using namespace pushwire::test::cells;
using wire::errc;

namespace {

cell::packet_spec spec_for(cell_type t, std::uint32_t psn, bool idata, std::uint32_t src_wqp = 0x11) {
  auto p = t == cell_type::rdma_write ? write_spec() : send_spec();
  p.psn = psn;
  p.src_wqp = src_wqp;
  p.idata = idata ? std::optional<std::uint32_t>{0x07050000u | (psn & 0xFFFF)} : std::nullopt;
  return p;
}

}  // namespace

TEST_CASE("round trips at the boundary sizes, with and without idata", "[cells][sar]") {
  std::mt19937 rng(1);
  std::size_t packets = 0;
  for (std::size_t cell : {std::size_t{256}, std::size_t{1}, std::size_t{7}, std::size_t{1000}}) {
    std::vector<std::size_t> sizes{0, 1, cell - 1, cell, cell + 1, 2 * cell, 3 * cell + 1};
    for (int i = 0; i < 12; ++i) sizes.push_back(rng() % (cell == 1 ? 3000 : 65537));
    for (std::size_t n : sizes)
      for (cell_type t : {cell_type::send, cell_type::rdma_write})
        for (bool idata : {false, true})
          for (bool own : {true, false}) {
            INFO("cell " << cell << " size " << n << " type " << wire::enum_name(t) << " idata " << idata << " own " << own);
            const auto payload = random_payload(n, rng);
            const auto pieces = random_pieces(payload, rng);
            const auto spec = spec_for(t, static_cast<std::uint32_t>(packets), idata);
            auto seg = rng() % 2 ? cell::segmenter::make(spec, std::span<const std::byte>(payload), cell)
                                 : cell::segmenter::make(spec, std::span<const std::span<const std::byte>>(pieces), cell);
            REQUIRE(seg);
            CHECK(seg->cell_count() == std::max<std::size_t>(1, (n + cell - 1) / cell));
            CHECK(seg->payload_size() == n);
            const auto cells = segment_all(*seg);
            cell::reassembler r({.max_packets = 2, .max_packet_bytes = 65536 + 1000, .max_bytes = 200000,
                                 .max_cell_payload = cell});
            std::vector<std::byte> dest(own ? 0 : n + 3);
            for (std::size_t i = 0; i < cells.size(); ++i) {
              auto res = r.push(cells[i], 100 + i, dest);
              REQUIRE(res.status == (i + 1 == cells.size() ? cell::push_status::delivered : cell::push_status::accepted));
              if (res.status != cell::push_status::delivered) continue;
              const auto& d = *res.packet;
              CHECK(std::equal(d.payload.begin(), d.payload.end(), payload.begin(), payload.end()));
              if (!own) CHECK(d.payload.data() == dest.data());
              CHECK(d.type == t);
              CHECK(d.idata == spec.idata);
              CHECK(d.rdma.has_value() == (t == cell_type::rdma_write));
              if (d.rdma) CHECK(d.rdma->va == spec.rdma->va);
              CHECK(d.key == cell::packet_key{host, 0x11, spec.psn});
              CHECK(d.dst == iou);
              CHECK(d.dst_wqp == 0x22);
              CHECK(d.cells == cells.size());
            }
            CHECK(r.in_flight() == 0);
            CHECK(r.bytes_held() == 0);
            CHECK(r.stats().delivered == 1);
            ++packets;
          }
  }
  CHECK(packets == 4 * 19 * 8);
}

TEST_CASE("control cells are delivered as they come, holding no state", "[cells][sar]") {
  cell::reassembler r;
  for (auto f : {std::span<const std::byte>(ack_bytes), std::span<const std::byte>(nak_bytes), std::span<const std::byte>(pfd_bytes)}) {
    auto res = r.push(f, 0);
    REQUIRE(res.status == cell::push_status::delivered);
    REQUIRE(res.packet);
    CHECK(res.packet->payload.empty());
    REQUIRE(res.packet->ack);
  }
  // A control cell says something each time (a re-ACK, a renewed delay): delivered again.
  CHECK(r.push(std::span<const std::byte>(ack_bytes), 1).status == cell::push_status::delivered);
  CHECK(r.stats().delivered == 4);
  CHECK(r.in_flight() == 0);
}

TEST_CASE("the reassembler's named errors", "[cells][sar]") {
  std::mt19937 rng(2);
  const auto payload = random_payload(1000, rng);  // 4 cells of 256
  auto make_cells = [&](std::uint32_t psn, std::uint32_t src_wqp = 0x11) {
    return segment_all(*cell::segmenter::make(spec_for(cell_type::rdma_write, psn, true, src_wqp), std::span<const std::byte>(payload)));
  };
  const auto c = make_cells(1);
  REQUIRE(c.size() == 4);

  SECTION("a middle cell without its first is cell_missing") {
    cell::reassembler r;
    auto res = r.push(c[1], 0);
    CHECK(res.status == cell::push_status::rejected);
    CHECK(res.error.code == errc::cell_missing);
    CHECK(!res.dropped);
    CHECK(res.key == cell::packet_key{host, 0x11, 1});
  }
  SECTION("a gap is cell_out_of_order and drops the packet; its later cells are cell_missing") {
    cell::reassembler r;
    REQUIRE(r.push(c[0], 0).status == cell::push_status::accepted);
    auto res = r.push(c[2], 1);
    CHECK(res.error.code == errc::cell_out_of_order);
    CHECK(res.dropped);
    CHECK(r.in_flight() == 0);
    CHECK(r.push(c[1], 2).error.code == errc::cell_missing);
    CHECK(r.push(c[3], 3).error.code == errc::cell_missing);
    CHECK(r.stats().delivered == 0);
  }
  SECTION("a repeated cell is cell_duplicate and the packet still completes; afterwards too") {
    cell::reassembler r;
    CHECK(r.push(c[0], 0).status == cell::push_status::accepted);
    CHECK(r.push(c[0], 0).error.code == errc::cell_duplicate);
    CHECK(r.push(c[1], 0).status == cell::push_status::accepted);
    auto dup = r.push(c[1], 0);
    CHECK(dup.error.code == errc::cell_duplicate);
    CHECK(!dup.dropped);
    CHECK(r.push(c[2], 0).status == cell::push_status::accepted);
    CHECK(r.push(c[3], 0).status == cell::push_status::delivered);
    for (const auto& f : c) CHECK(r.push(f, 0).error.code == errc::cell_duplicate);
    CHECK(r.stats().delivered == 1);
  }
  SECTION("a bad cell CRC is cell_crc_mismatch; the packet then fails on the gap") {
    cell::reassembler r;
    CHECK(r.push(c[0], 0).status == cell::push_status::accepted);
    auto bad = c[1];
    bad[100] ^= std::byte{4};
    CHECK(r.push(bad, 0).error.code == errc::cell_crc_mismatch);
    CHECK(r.push(c[2], 0).error.code == errc::cell_out_of_order);
  }
  SECTION("a wrong packet CRC is packet_crc_mismatch and delivers nothing") {
    cell::reassembler r;
    auto last = c[3];
    const auto v = cell::decode(std::span<const std::byte>(last)).value();
    last[v.at.packet_crc] ^= std::byte{1};
    REQUIRE(cell::testing::reseal(last).code == errc{});
    for (int i = 0; i < 3; ++i) CHECK(r.push(c[i], 0).status == cell::push_status::accepted);
    auto res = r.push(last, 0);
    CHECK(res.error == wire::error{errc::packet_crc_mismatch, v.at.packet_crc, "packet_crc"});
    CHECK(res.dropped);
    CHECK(r.stats().delivered == 0);
  }
  SECTION("a cell spliced from another packet with the same key fails the packet CRC") {
    cell::reassembler r;
    auto other = payload;
    other[300] ^= std::byte{1};
    const auto o = segment_all(*cell::segmenter::make(spec_for(cell_type::rdma_write, 1, true), std::span<const std::byte>(other)));
    CHECK(r.push(c[0], 0).status == cell::push_status::accepted);
    CHECK(r.push(o[1], 0).status == cell::push_status::accepted);
    CHECK(r.push(c[2], 0).status == cell::push_status::accepted);
    CHECK(r.push(c[3], 0).error.code == errc::packet_crc_mismatch);
  }
  SECTION("a later cell that disagrees with the first is invalid_field") {
    cell::reassembler r;
    CHECK(r.push(c[0], 0).status == cell::push_status::accepted);
    auto m = c[1];
    m[14 + 3] ^= std::byte{1};  // dst_wqp
    REQUIRE(cell::testing::reseal(m).code == errc{});
    auto res = r.push(m, 0);
    CHECK(res.error == wire::error{errc::invalid_field, 14 + 2, "dst_wqp"});
    CHECK(res.dropped);
  }
  SECTION("bounds: packets in flight, bytes, one packet's bytes, age, destination size") {
    cell::reassembler r({.max_packets = 2, .max_packet_bytes = 600, .max_bytes = 700, .max_age_ns = 1000});
    CHECK(r.push(make_cells(10)[0], 0).status == cell::push_status::accepted);
    CHECK(r.push(make_cells(11)[0], 0).status == cell::push_status::accepted);
    CHECK(r.bytes_held() == 512);
    auto full = r.push(make_cells(12)[0], 0);
    CHECK(full.error.code == errc::reassembly_full);
    CHECK(full.error.field == "packets");
    CHECK(!full.dropped);
    CHECK(r.push(make_cells(10)[1], 10).error.field == "bytes");  // 768 > 700
    CHECK(r.in_flight() == 1);
    auto p11 = make_cells(11);
    CHECK(r.push(p11[1], 10).status == cell::push_status::accepted);  // 512 bytes
    CHECK(r.push(p11[2], 10).error.field == "packet_bytes");          // 768 > 600
    // Age: a packet older than 1000 ns is dropped on its next cell, or by expire().
    auto p13 = make_cells(13);
    CHECK(r.push(p13[0], 2000).status == cell::push_status::accepted);
    CHECK(r.push(p13[1], 3001).error.code == errc::reassembly_timeout);
    CHECK(r.push(make_cells(14)[0], 5000).status == cell::push_status::accepted);
    std::vector<cell::packet_key> expired;
    CHECK(r.expire(5500, [&](const cell::packet_key& k, const wire::error& e) {
      expired.push_back(k);
      CHECK(e.code == errc::reassembly_timeout);
    }) == 0);
    CHECK(r.expire(6001, [&](const cell::packet_key& k, const wire::error&) { expired.push_back(k); }) == 1);
    CHECK(expired == std::vector<cell::packet_key>{{host, 0x11, 14}});
    // A full reassembler makes room from packets past their age before refusing.
    CHECK(r.push(make_cells(15)[0], 7000).status == cell::push_status::accepted);
    CHECK(r.push(make_cells(16)[0], 7000).status == cell::push_status::accepted);
    CHECK(r.push(make_cells(17)[0], 9000).status == cell::push_status::accepted);
    // A destination smaller than the packet.
    cell::reassembler d;
    std::vector<std::byte> small(700);
    CHECK(d.push(c[0], 0, small).status == cell::push_status::accepted);
    CHECK(d.push(c[1], 0).status == cell::push_status::accepted);
    CHECK(d.push(c[2], 0).error.code == errc::no_space);
  }
  SECTION("forget: a packet refused by a NAK or page-fault delay is taken again when resent") {
    cell::reassembler r;
    for (const auto& f : c) (void)r.push(f, 0);
    CHECK(r.stats().delivered == 1);
    CHECK(r.push(c[0], 0).error.code == errc::cell_duplicate);
    CHECK(r.forget({host, 0x11, 1}));
    CHECK(!r.forget({host, 0x11, 1}));
    for (std::size_t i = 0; i + 1 < c.size(); ++i) CHECK(r.push(c[i], 0).status == cell::push_status::accepted);
    CHECK(r.forget({host, 0x11, 1}));  // in flight: dropped
    CHECK(r.in_flight() == 0);
    CHECK(r.bytes_held() == 0);
    for (const auto& f : c) (void)r.push(f, 0);
    CHECK(r.stats().delivered == 2);
  }
  SECTION("cells wider than the receiver's cell payload are too_large") {
    cell::reassembler r({.max_cell_payload = 128});
    CHECK(r.push(c[0], 0).error.code == errc::too_large);
  }
}

// Property: many seeds, several interleaved packets, each cell possibly dropped, duplicated,
// reordered or bit-flipped. Every delivery is an original packet, exactly, at most once; every
// packet none of whose cells was touched is delivered; every rejection has a name.
TEST_CASE("under injected faults the result is the exact packet or a named error", "[cells][sar][faults]") {
  std::size_t delivered_total = 0, rejected_total = 0, untouched_total = 0;
  std::map<errc, std::size_t> seen;
  for (std::uint32_t seed = 1; seed <= 400; ++seed) {
    std::mt19937 rng(seed);
    const std::size_t cell_payload = std::array<std::size_t, 3>{16, 64, 256}[rng() % 3];
    const std::size_t packets = 1 + rng() % 6;
    struct original {
      std::vector<std::byte> payload;
      cell::packet_spec spec;
      bool touched = false;
    };
    std::vector<original> orig(packets);
    struct tagged {
      frame bytes;
      std::size_t packet;
    };
    std::vector<tagged> stream;
    std::vector<std::vector<tagged>> per_packet(packets);
    for (std::size_t p = 0; p < packets; ++p) {
      orig[p].payload = random_payload(rng() % (6 * cell_payload), rng);
      orig[p].spec = spec_for(rng() % 2 ? cell_type::send : cell_type::rdma_write, static_cast<std::uint32_t>(100 + p), rng() % 2,
                              0x11 + static_cast<std::uint32_t>(rng() % 2));
      for (auto& f : segment_all(*cell::segmenter::make(orig[p].spec, std::span<const std::byte>(orig[p].payload), cell_payload)))
        per_packet[p].push_back({std::move(f), p});
    }
    // Interleave packets, keeping each packet's cells in order.
    std::vector<std::size_t> next(packets, 0);
    for (std::size_t left = 0; [&] { left = 0; for (std::size_t p = 0; p < packets; ++p) left += per_packet[p].size() - next[p]; return left; }() > 0;) {
      std::size_t p = rng() % packets;
      while (next[p] == per_packet[p].size()) p = (p + 1) % packets;
      stream.push_back(per_packet[p][next[p]++]);
    }
    // Faults.
    const int faults = static_cast<int>(rng() % 4);
    for (int i = 0; i < faults && !stream.empty(); ++i) {
      const std::size_t at = rng() % stream.size();
      orig[stream[at].packet].touched = true;
      switch (rng() % 4) {
        case 0: stream.erase(stream.begin() + static_cast<std::ptrdiff_t>(at)); break;
        case 1: stream.insert(stream.begin() + static_cast<std::ptrdiff_t>(at), stream[at]); break;
        case 2: {
          const std::size_t to = rng() % stream.size();
          orig[stream[to].packet].touched = true;
          std::swap(stream[at], stream[to]);
          break;
        }
        default: {
          auto& b = stream[at].bytes;
          const std::size_t bit = rng() % (b.size() * 8);
          b[bit / 8] ^= static_cast<std::byte>(1u << (bit % 8));
        }
      }
    }
    cell::reassembler r({.max_packets = 8, .max_packet_bytes = 6 * 256, .max_bytes = 8 * 6 * 256, .max_cell_payload = 256});
    std::vector<int> delivered(packets, 0);
    std::uint64_t now = 0;
    for (const auto& t : stream) {
      auto res = r.push(t.bytes, now += 10);
      if (res.status == cell::push_status::rejected) {
        REQUIRE(res.error.code != errc{});
        REQUIRE(wire::to_string(res.error.code) != "unknown");  // a documented code
        ++seen[res.error.code];
        ++rejected_total;
      } else if (res.status == cell::push_status::delivered) {
        const auto& d = *res.packet;
        const std::size_t p = d.key.psn - 100;
        REQUIRE(p < packets);
        INFO("seed " << seed << " packet " << p);
        REQUIRE(std::equal(d.payload.begin(), d.payload.end(), orig[p].payload.begin(), orig[p].payload.end()));
        REQUIRE(d.key.src_wqp == orig[p].spec.src_wqp);
        REQUIRE(d.idata == orig[p].spec.idata);
        REQUIRE(d.type == orig[p].spec.type);
        ++delivered[p];
        ++delivered_total;
      }
    }
    for (std::size_t p = 0; p < packets; ++p) {
      INFO("seed " << seed << " packet " << p);
      REQUIRE(delivered[p] <= 1);
      if (!orig[p].touched) {
        REQUIRE(delivered[p] == 1);
        ++untouched_total;
      }
    }
  }
  CHECK(delivered_total > 500);
  CHECK(untouched_total > 300);
  CHECK(rejected_total > 100);
  // The faults reached the named errors they should.
  for (errc e : {errc::cell_missing, errc::cell_duplicate, errc::cell_out_of_order, errc::cell_crc_mismatch}) {
    INFO(wire::to_string(e));
    CHECK(seen[e] > 0);
  }
}
