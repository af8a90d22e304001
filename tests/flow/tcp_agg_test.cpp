// TCP receive aggregation (flow/tcp_agg.hpp; spec/split-model.md, TCP aggregation). Segments are
// built byte by byte (tcp_segments.hpp), their checksums by its own RFC 1071 sum; the aggregates
// are checked with it too.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include <pushwire/flow/tcp_agg.hpp>

#include "tcp_segments.hpp"

using namespace pushwire;

namespace {

using namespace pushwire::test::tcp;

struct out_frame {
  bytes frame;
  std::uint16_t segments, mss;
};
struct harness {
  flow::tcp_aggregator agg;
  std::vector<out_frame> out;
  explicit harness(flow::tcp_agg_config c = {}) : agg(c) {}
  auto sink() {
    return [this](const flow::tcp_aggregate& a) { out.push_back({bytes(a.frame.begin(), a.frame.end()), a.segments, a.mss}); };
  }
  void push(const bytes& f, flow::time_ns now = 0) { agg.push(f, now, sink()); }
  void push(const seg& s, flow::time_ns now = 0) { push(frame(s), now); }
  std::uint64_t flushed(flow::agg_flush why) const { return agg.stats().flushes[static_cast<std::size_t>(why)]; }
};

/// n full segments of flow `s` from its seq and id on.
std::vector<seg> run(seg s, int n) {
  std::vector<seg> v;
  for (int i = 0; i < n; ++i, s.seq += static_cast<std::uint32_t>(s.len), ++s.id) v.push_back(s);
  return v;
}

/// A harness after n full segments of the default flow, the last one changed by `change`.
template <class Change>
harness pushed(int n, Change change, std::vector<seg>& segs) {
  harness h;
  segs = run(seg{}, n);
  change(segs.back());
  for (const seg& x : segs) h.push(x);
  return h;
}

/// An aggregate holds the payload of [seq, seq + n) and its headers say so.
void check_aggregate(const out_frame& o, std::uint32_t seq, std::size_t n, bool v6 = false, bool options = true) {
  const std::size_t ip = 14, l4 = ip + (v6 ? 40 : 20), head = l4 + (options ? 32 : 20);
  REQUIRE(o.frame.size() == head + n);
  CHECK(checksums_good(o.frame, v6));
  if (v6) CHECK(get16(o.frame, ip + 4) == (options ? 32 : 20) + n);
  else CHECK(get16(o.frame, ip + 2) == 20 + (options ? 32 : 20) + n);
  CHECK(get32(o.frame, l4 + 4) == seq);
  bool same = true;
  for (std::size_t i = 0; i < n; ++i) same = same && std::to_integer<std::uint8_t>(o.frame[head + i]) == data_at(seq + static_cast<std::uint32_t>(i));
  CHECK(same);
}

}  // namespace

TEST_CASE("tcp_agg: in-sequence full segments join into one, its lengths and checksums rebuilt", "[flow][tcp_agg]") {
  for (const bool v6 : {false, true}) {
    INFO((v6 ? "IPv6" : "IPv4"));
    harness h;
    seg s;
    s.v6 = v6;
    auto segs = run(s, 10);
    segs.back().window = 777;
    for (const seg& x : segs) h.push(x, 100);
    CHECK(h.out.empty());
    CHECK(h.agg.open_flows() == 1);
    CHECK(h.agg.next_deadline() == std::optional<flow::time_ns>{100 + 50'000});
    h.agg.expire(100 + 49'999, h.sink());
    CHECK(h.out.empty());
    h.agg.expire(100 + 50'000, h.sink());
    REQUIRE(h.out.size() == 1);
    CHECK(h.out[0].segments == 10);
    CHECK(h.out[0].mss == 1448);
    check_aggregate(h.out[0], 1000, 14480, v6);
    CHECK(get16(h.out[0].frame, 14 + (v6 ? 40 : 20) + 14) == 777);  // the latest window
    if (!v6) CHECK(get16(h.out[0].frame, 14 + 4) == 1);              // the first IP ID
    CHECK(h.flushed(flow::agg_flush::timeout) == 1);
    CHECK(h.agg.stats().joined == 9);
    CHECK(h.agg.stats().aggregates == 1);
    CHECK(h.agg.open_flows() == 0);
  }
}

TEST_CASE("tcp_agg: PSH or FIN, and a shorter segment, end an aggregation after joining it", "[flow][tcp_agg]") {
  for (const std::uint8_t end : {tf::psh, tf::fin}) {
    harness h;
    auto segs = run(seg{}, 8);
    segs[4].flags |= end;
    for (const seg& x : segs) h.push(x);
    REQUIRE(h.out.size() == 1);
    CHECK(h.out[0].segments == 5);
    check_aggregate(h.out[0], 1000, 5 * 1448);
    CHECK((std::to_integer<unsigned>(h.out[0].frame[14 + 20 + 13]) & end) != 0);  // the flag kept
    CHECK(h.flushed(flow::agg_flush::flags) == 1);
    CHECK(h.agg.open_flows() == 1);  // segments 5..7 opened the next
  }
  harness h;
  auto segs = run(seg{}, 4);
  segs[3].len = 500;
  for (const seg& x : segs) h.push(x);
  REQUIRE(h.out.size() == 1);
  CHECK(h.out[0].segments == 4);
  CHECK(h.out[0].mss == 1448);
  check_aggregate(h.out[0], 1000, 3 * 1448 + 500);
  CHECK(h.flushed(flow::agg_flush::short_segment) == 1);
  // alone with PSH: handed out as it came
  harness one;
  seg p;
  p.flags |= tf::psh;
  one.push(p);
  REQUIRE(one.out.size() == 1);
  CHECK(one.out[0].frame == frame(p));
  CHECK(one.out[0].segments == 1);
}

TEST_CASE("tcp_agg: a gap, an earlier segment, other options, flags, ACK, TTL, TOS or DF end the aggregation, and the segment opens the next", "[flow][tcp_agg]") {
  struct change_case {
    const char* what;
    void (*change)(seg&);
    flow::agg_flush why;
  };
  const change_case cases[] = {
      {"a gap", [](seg& s) { s.seq += 1; }, flow::agg_flush::gap},
      {"out of order", [](seg& s) { s.seq -= 2 * 1448; }, flow::agg_flush::gap},
      {"a new timestamp", [](seg& s) { s.tsval += 1; }, flow::agg_flush::mismatch},
      {"no options", [](seg& s) { s.options = false; }, flow::agg_flush::mismatch},
      {"ECE", [](seg& s) { s.flags |= tf::ece; }, flow::agg_flush::mismatch},
      {"another ACK", [](seg& s) { s.ack += 1448; }, flow::agg_flush::mismatch},
      {"TTL", [](seg& s) { s.ttl = 63; }, flow::agg_flush::mismatch},
      {"CE marked", [](seg& s) { s.tos = 3; }, flow::agg_flush::mismatch},
      {"DF cleared", [](seg& s) { s.df = false; }, flow::agg_flush::mismatch},
      {"an IP ID jump", [](seg& s) { s.id += 5; }, flow::agg_flush::ip_id},
      {"a longer segment", [](seg& s) { s.len = 1460; }, flow::agg_flush::size},
  };
  for (const auto& c : cases) {
    INFO(c.what);
    std::vector<seg> segs;
    harness h = pushed(4, c.change, segs);
    REQUIRE(h.out.size() == 1);
    CHECK(h.out[0].segments == 3);
    check_aggregate(h.out[0], 1000, 3 * 1448);
    CHECK(h.flushed(c.why) == 1);
    CHECK(h.agg.open_flows() == 1);
    h.agg.flush_all(h.sink());
    REQUIRE(h.out.size() == 2);
    CHECK(h.out[1].frame == frame(segs[3]));  // alone: as it came
  }
}

TEST_CASE("tcp_agg: the IPv4 ID steps by one, or stays the same with DF, across its wrap", "[flow][tcp_agg]") {
  harness h;
  seg s;
  auto segs = run(s, 3);
  for (seg& x : segs) x.id = 9;  // constant, DF set: joins
  for (const seg& x : segs) h.push(x);
  h.agg.flush_all(h.sink());
  REQUIRE(h.out.size() == 1);
  CHECK(h.out[0].segments == 3);
  harness nodf;
  for (seg& x : segs) x.df = false;
  for (const seg& x : segs) nodf.push(x);
  CHECK(nodf.flushed(flow::agg_flush::ip_id) == 2);  // without DF a constant ID is no sequence
  harness mixed;  // +1 then constant: the step changed
  segs = run(s, 3);
  segs[2].id = segs[1].id;
  for (const seg& x : segs) mixed.push(x);
  CHECK(mixed.flushed(flow::agg_flush::ip_id) == 1);
  harness wrap;  // 0xFFFF then 0
  segs = run(s, 3);
  segs[0].id = 0xFFFE, segs[1].id = 0xFFFF, segs[2].id = 0;
  for (const seg& x : segs) wrap.push(x);
  wrap.agg.flush_all(wrap.sink());
  REQUIRE(wrap.out.size() == 1);
  CHECK(wrap.out[0].segments == 3);
}

TEST_CASE("tcp_agg: an aggregate stops at max_bytes: 45 segments of 1448 fit in 65535, the 46th opens the next", "[flow][tcp_agg]") {
  harness h;
  seg s;
  s.options = false;  // 20 + 20 + 45 * 1448 = 65200; 46: 66648
  for (const seg& x : run(s, 46)) h.push(x);
  REQUIRE(h.out.size() == 1);
  CHECK(h.out[0].segments == 45);
  check_aggregate(h.out[0], 1000, 45 * 1448, false, false);
  CHECK(h.flushed(flow::agg_flush::size) == 1);
  harness small(flow::tcp_agg_config{.max_bytes = 3000});
  for (const seg& x : run(s, 3)) small.push(x);  // 40 + 2 * 1448 = 2936 fits, 3 do not
  REQUIRE(small.out.size() == 1);
  CHECK(small.out[0].segments == 2);
}

TEST_CASE("tcp_agg: a segment that may not join passes, after its flow's aggregation, and other frames pass at once", "[flow][tcp_agg]") {
  struct alone_case {
    const char* what;
    void (*change)(seg&);
  };
  const alone_case cases[] = {
      {"a pure ACK", [](seg& s) { s.len = 0; }},
      {"SYN", [](seg& s) { s.flags |= tf::syn; }},
      {"RST", [](seg& s) { s.flags |= tf::rst; }},
      {"URG", [](seg& s) { s.flags |= tf::urg; }},
      {"CWR", [](seg& s) { s.flags |= tf::cwr; }},
  };
  for (const auto& c : cases) {
    INFO(c.what);
    std::vector<seg> segs;
    harness h = pushed(3, c.change, segs);
    REQUIRE(h.out.size() == 2);
    CHECK(h.out[0].segments == 2);
    CHECK(h.out[1].frame == frame(segs[2]));
    CHECK(h.flushed(flow::agg_flush::bypass) == 1);
    CHECK(h.agg.open_flows() == 0);
  }
  harness h;  // a bad TCP checksum: passes as it came, counted
  for (const seg& x : run(seg{}, 2)) h.push(x);
  bytes bad = frame(run(seg{}, 3)[2]);
  bad[100] ^= std::byte{0x10};
  h.push(bad);
  REQUIRE(h.out.size() == 2);
  CHECK(h.out[1].frame == bad);
  CHECK(h.agg.stats().bad_checksum == 1);
  // not TCP, or not judged: UDP, ARP, a fragment, IP options
  harness o;
  o.push(run(seg{}, 1)[0]);
  bytes udp = frame(seg{});
  udp[14 + 9] = std::byte{17};
  bytes arp(60);
  arp[12] = std::byte{0x08}, arp[13] = std::byte{0x06};
  bytes frag = frame(seg{});
  frag[14 + 6] = std::byte{0x20};  // MF
  bytes opts = frame(seg{});
  opts[14] = std::byte{0x46};
  for (const bytes* f : {&udp, &arp, &frag, &opts}) o.push(*f);
  REQUIRE(o.out.size() == 4);
  CHECK(o.out[0].frame == udp);
  CHECK(o.out[3].frame == opts);
  CHECK(o.agg.open_flows() == 1);  // the TCP flow's aggregation is untouched
}

TEST_CASE("tcp_agg: flows aggregate apart, and beyond max_flows the oldest is handed out", "[flow][tcp_agg]") {
  harness h(flow::tcp_agg_config{.max_flows = 2});
  seg a, b, c;
  b.sport = 40001, c.sport = 40002;
  const auto sa = run(a, 3), sb = run(b, 3);
  for (int i = 0; i < 3; ++i) h.push(sa[static_cast<std::size_t>(i)]), h.push(sb[static_cast<std::size_t>(i)]);
  CHECK(h.out.empty());
  h.push(c);  // a third flow: a's aggregation, the oldest, goes
  REQUIRE(h.out.size() == 1);
  CHECK(h.out[0].segments == 3);
  CHECK(get16(h.out[0].frame, 34) == 40000);
  CHECK(h.flushed(flow::agg_flush::evicted) == 1);
  h.agg.flush_all(h.sink());
  REQUIRE(h.out.size() == 3);
  CHECK(h.out[1].segments + h.out[2].segments == 4);
}

TEST_CASE("tcp_agg: every truncation and every single-byte change of a segment passes it as it came", "[flow][tcp_agg]") {
  for (const bool v6 : {false, true}) {
    seg s;
    s.v6 = v6;
    s.len = 200;
    const bytes f = frame(s);
    for (std::size_t n = 0; n < f.size(); ++n) {
      harness h;
      const bytes cut(f.begin(), f.begin() + static_cast<std::ptrdiff_t>(n));
      h.push(cut);
      REQUIRE(h.out.size() == 1);
      CHECK(h.out[0].frame == cut);
    }
    for (std::size_t i = 0; i < f.size(); ++i) {
      for (const std::uint8_t flip : {0x01, 0x80}) {
        harness h;
        bytes g = f;
        g[i] ^= static_cast<std::byte>(flip);
        h.push(g);
        INFO("byte " << i);
        // a checksum covers every byte from the IP header on, but IPv6's first 4 and hop limit
        const bool covered = i >= 14 && !(v6 && (i < 18 || i == 21));
        if (covered) CHECK(h.agg.open_flows() == 0);
        h.agg.flush_all(h.sink());  // held or not: it comes out once, as it came
        REQUIRE(h.out.size() == 1);
        CHECK(h.out[0].frame == g);
      }
    }
    harness trusted;  // with the checksum verified already, a payload change is not looked for
    bytes g = f;
    g.back() ^= std::byte{1};
    trusted.agg.push(g, 0, trusted.sink(), true);
    CHECK(trusted.out.empty());
  }
}
