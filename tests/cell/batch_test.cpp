// Cells in batches: segmenter::next(frames, sizes) writes byte for byte the frames next() writes
// one at a time (every type, size, tag, scatter list and round size), stops with no_space where
// next() would, and writes no byte outside the cells; reassembler::push(frames, ...) gives the
// results push(frame) gives one at a time (status, error and its byte, key, dropped, delivered
// packet and payload, counters) over streams with drops, duplicates, reordering and bit flips.
#include "vectors.hpp"

#include <pushwire/cell/testing.hpp>

#include "sar_support.hpp"

#include <algorithm>
#include <random>
#include <vector>

using namespace pushwire;
using namespace pushwire::test::cells;
using wire::errc;

namespace {

// Any type: Send and RDMA write with or without idata, Transport requests and responses, ACK,
// NAK and page-fault delay (control types carry no payload).
cell::packet_spec random_spec(std::mt19937& rng, std::uint32_t psn) {
  cell::packet_spec p;
  switch (rng() % 8) {
    case 0: p = ack_spec(); break;
    case 1: p = nak_spec(); break;
    case 2: p = pfd_spec(); break;
    case 3:
      p = send_spec();
      p.type = cell::cell_type::transport;
      p.response = rng() % 2;
      break;
    case 4:
    case 5: p = write_spec(); break;
    default: p = send_spec();
  }
  p.psn = psn & 0xFFFFFF;
  p.src_wqp = 0x11 + static_cast<std::uint32_t>(rng() % 2);
  if (!cell::is_control(p.type)) {
    p.ack_req = rng() % 2;
    if (p.type == cell::cell_type::transport || rng() % 3 == 0) p.idata.reset();
    else p.idata = static_cast<std::uint32_t>(rng());
  }
  if (rng() % 4 == 0) p.vlan = wire::vlan_tag{.priority = 3, .dei = false, .id = 42, .etype = 0};
  return p;
}

}  // namespace

TEST_CASE("batch next writes the frames next writes, and stops where it would", "[cells][sar][batch]") {
  constexpr std::byte guard{0xA5};
  std::size_t cells_total = 0, short_stops = 0;
  for (std::uint32_t seed = 1; seed <= 600; ++seed) {
    std::mt19937 rng(seed);
    INFO("seed " << seed);
    const std::size_t cell_payload = std::array<std::size_t, 5>{1, 16, 64, 256, 1000}[rng() % 5];
    const auto spec = random_spec(rng, seed);
    const auto payload = random_payload(rng() % 5 == 0 || cell::is_control(spec.type) ? 0 : rng() % (40 * cell_payload + 1), rng);
    const auto pieces = random_pieces(payload, rng, true);
    const bool scattered = rng() % 2;
    auto make = [&] {
      return scattered ? cell::segmenter::make(spec, std::span<const std::span<const std::byte>>(pieces), cell_payload)
                       : cell::segmenter::make(spec, std::span<const std::byte>(payload), cell_payload);
    };
    const auto want = segment_all(*make());
    auto seg = *make();
    std::vector<frame> got;
    while (!seg.done()) {
      // Buffers one cell's size plus a guard, some of them (rarely) one byte short.
      const std::size_t k = 1 + rng() % 40;
      std::vector<frame> bufs(k);
      std::vector<std::span<std::byte>> outs(k);
      std::vector<std::size_t> sizes(k + rng() % 2, 0);
      std::size_t short_at = rng() % 8 == 0 ? rng() % k : k;
      const std::size_t first = got.size();
      const bool roomy = rng() % 3 == 0;  // buffers of max_frame_size(), as a port takes them
      for (std::size_t i = 0; i < k; ++i) {
        const std::size_t need = first + i < want.size() ? want[first + i].size() : 60;
        const std::size_t room = roomy && i != short_at ? seg.max_frame_size() : need;
        REQUIRE(room >= need);
        bufs[i].assign(room + 8, guard);
        outs[i] = std::span(bufs[i]).first(i == short_at ? need - 1 : room);
      }
      const auto n = seg.next(std::span<const std::span<std::byte>>(outs), std::span(sizes));
      if (short_at == 0) {
        REQUIRE_FALSE(n);
        CHECK(n.error().code == errc::no_space);
        ++short_stops;
      } else {
        REQUIRE(n);
        const std::size_t expect = std::min({k, want.size() - first, short_at});
        REQUIRE(*n == expect);
        if (short_at < k && *n == short_at) ++short_stops;
      }
      const std::size_t wrote = n ? *n : 0;
      for (std::size_t i = 0; i < k; ++i) {
        const std::size_t written = i < wrote ? sizes[i] : 0;
        if (i < wrote) {
          REQUIRE(sizes[i] == want[first + i].size());
          REQUIRE(sizes[i] <= seg.max_frame_size());
          got.emplace_back(bufs[i].begin(), bufs[i].begin() + static_cast<std::ptrdiff_t>(sizes[i]));
        }
        REQUIRE(std::all_of(bufs[i].begin() + static_cast<std::ptrdiff_t>(written), bufs[i].end(),
                            [&](std::byte b) { return b == guard; }));  // nothing past the cell, nothing unwritten
      }
    }
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < want.size(); ++i) {
      INFO("cell " << i);
      REQUIRE(got[i] == want[i]);
    }
    cells_total += want.size();
  }
  CHECK(cells_total > 5000);
  CHECK(short_stops > 20);
}

TEST_CASE("batch next in constant evaluation", "[cells][sar][batch]") {
  static_assert([] {
    std::array<std::byte, 40> payload{};
    for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<std::byte>(i);
    auto one = cell::segmenter::make(send_spec(), std::span<const std::byte>(payload), 16).value();
    auto many = one;
    std::array<std::array<std::byte, 80>, 3> a{}, b{};
    std::array<std::span<std::byte>, 3> outs{a[0], a[1], a[2]};
    std::array<std::size_t, 3> sizes{};
    if (many.next(std::span<const std::span<std::byte>>(outs), sizes).value() != 3) return false;
    for (std::size_t i = 0; i < 3; ++i)
      if (one.next(b[i]).value() != sizes[i]) return false;
    return a == b && many.done();
  }());
}

TEST_CASE("batch push gives the results push gives, under faults", "[cells][sar][batch][faults]") {
  std::size_t delivered = 0, rejected = 0, timeouts = 0;
  for (std::uint32_t seed = 1; seed <= 400; ++seed) {
    std::mt19937 rng(seed);
    INFO("seed " << seed);
    const std::size_t cell_payload = std::array<std::size_t, 4>{16, 64, 256, 1500}[rng() % 4];
    std::vector<std::vector<std::byte>> payloads;
    std::vector<frame> stream;
    for (std::size_t p = 0, packets = 1 + rng() % 8; p < packets; ++p) {
      auto spec = random_spec(rng, static_cast<std::uint32_t>(100 + p));
      payloads.push_back(random_payload(cell::is_control(spec.type) ? 0 : rng() % (8 * cell_payload), rng));
      for (auto& f : segment_all(*cell::segmenter::make(spec, std::span<const std::byte>(payloads.back()), cell_payload)))
        stream.push_back(std::move(f));
    }
    if (rng() % 3 == 0) {  // an ACK among them
      stream.insert(stream.begin() + static_cast<std::ptrdiff_t>(rng() % stream.size()),
                    segment_all(*cell::segmenter::make(ack_spec(), std::span<const std::byte>{}))[0]);
    }
    bool flipped = false;
    for (int i = 0, faults = static_cast<int>(rng() % 6); i < faults; ++i) {
      const std::size_t at = rng() % stream.size();
      switch (rng() % 5) {
        case 0: stream.erase(stream.begin() + static_cast<std::ptrdiff_t>(at)); break;
        case 1: stream.insert(stream.begin() + static_cast<std::ptrdiff_t>(at), stream[at]); break;
        case 2: std::swap(stream[at], stream[rng() % stream.size()]); break;
        case 3: stream[at].resize(rng() % stream[at].size()); break;  // truncated: does not decode
        default: {
          const std::size_t bit = rng() % (stream[at].size() * 8);
          stream[at][bit / 8] ^= static_cast<std::byte>(1u << (bit % 8));
          flipped = true;
        }
      }
      if (stream.empty()) break;
    }
    const cell::reassembly_limits lim{.max_packets = 3, .max_packet_bytes = 8 * 1500, .max_bytes = 3 * 8 * 1500,
                                      .max_age_ns = 1000, .max_cell_payload = 1500};
    cell::reassembler one(lim), many(lim);
    std::vector<std::byte> dest_one(8 * 1500), dest_many(8 * 1500);
    const bool to_dest = rng() % 2;
    // The results, each with its delivered payload copied out while it was valid.
    struct seen {
      cell::push_result r;
      std::optional<cell::delivered_packet> packet;
      std::vector<std::byte> payload;
    };
    const auto record = [](std::vector<seen>& out, const cell::push_result& r) {
      seen s{r, std::nullopt, {}};
      if (r.packet) s.packet = *r.packet, s.payload.assign(r.packet->payload.begin(), r.packet->payload.end());
      s.r.packet = nullptr;
      out.push_back(std::move(s));
    };
    // Bursts, and the time of each (now and then past the age bound).
    std::vector<std::pair<std::size_t, std::uint64_t>> bursts;
    std::uint64_t now = 0;
    for (std::size_t at = 0; at < stream.size();) {
      const std::size_t k = std::min<std::size_t>(stream.size() - at, 1 + rng() % 40);
      now += rng() % 3 == 0 ? 1500 : rng() % 400;
      bursts.emplace_back(k, now);
      at += k;
    }
    std::vector<seen> a, b;
    for (std::size_t at = 0, i = 0; i < bursts.size(); at += bursts[i++].first)
      for (std::size_t f = at; f < at + bursts[i].first; ++f)
        record(a, one.push(stream[f], bursts[i].second, to_dest ? std::span(dest_one) : std::span<std::byte>{}));
    std::vector<std::span<const std::byte>> frames(stream.begin(), stream.end());
    for (std::size_t at = 0, n = 0; n < bursts.size(); at += bursts[n++].first) {
      const std::size_t k = bursts[n].first;
      std::size_t expect = at;
      many.push(std::span(frames).subspan(at, k), bursts[n].second, to_dest ? std::span(dest_many) : std::span<std::byte>{},
                [&](std::size_t i, const cell::push_result& r) {
                  REQUIRE(i == expect - at);
                  ++expect;
                  record(b, r);
                });
      REQUIRE(expect == at + k);
    }
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      INFO("frame " << i);
      REQUIRE(a[i].r.status == b[i].r.status);
      REQUIRE(a[i].r.error.code == b[i].r.error.code);
      REQUIRE(a[i].r.error.offset == b[i].r.error.offset);
      REQUIRE(a[i].r.key == b[i].r.key);
      REQUIRE(a[i].r.dropped == b[i].r.dropped);
      REQUIRE(a[i].packet.has_value() == b[i].packet.has_value());
      if (a[i].packet) {
        REQUIRE(a[i].packet->key == b[i].packet->key);
        REQUIRE(a[i].packet->idata == b[i].packet->idata);
        REQUIRE(a[i].packet->cells == b[i].packet->cells);
        // (A caller's destination: a corrupted cell's data may reach it one at a time, never in
        // a batch; with packets sharing it, as here, what they deliver may then differ.)
        if (!to_dest || !flipped) REQUIRE(a[i].payload == b[i].payload);
        ++delivered;
      }
      if (a[i].r.status == cell::push_status::rejected) ++rejected;
      if (a[i].r.error.code == errc::reassembly_timeout) ++timeouts;
    }
    REQUIRE(one.stats().cells == many.stats().cells);
    REQUIRE(one.stats().delivered == many.stats().delivered);
    REQUIRE(one.stats().dropped == many.stats().dropped);
    REQUIRE(one.stats().by_error == many.stats().by_error);
    REQUIRE(one.in_flight() == many.in_flight());
    REQUIRE(one.bytes_held() == many.bytes_held());
  }
  CHECK(delivered > 1000);
  CHECK(rejected > 200);
  CHECK(timeouts > 10);
}
