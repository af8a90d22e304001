// TCP receive aggregation (flow/tcp_agg.hpp; spec/split-model.md, TCP aggregation). Segments are
// built here byte by byte, their checksums by this file's own RFC 1071 sum; the aggregates are
// checked with it too.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include <pushwire/flow/tcp_agg.hpp>

using namespace pushwire;
using bytes = std::vector<std::byte>;

namespace {

namespace tf = ib::tcp_flag;

/// RFC 1071, written apart from the code under test: 16-bit big-endian words summed in 64 bits.
std::uint16_t csum(const std::vector<std::uint8_t>& b) {
  std::uint64_t s = 0;
  for (std::size_t i = 0; i < b.size(); i += 2) s += (std::uint64_t{b[i]} << 8) | (i + 1 < b.size() ? b[i + 1] : 0);
  while (s >> 16) s = (s & 0xFFFF) + (s >> 16);
  return static_cast<std::uint16_t>(~s);
}
void put16(std::vector<std::uint8_t>& b, std::size_t at, unsigned v) { b[at] = static_cast<std::uint8_t>(v >> 8), b[at + 1] = static_cast<std::uint8_t>(v); }
void put32(std::vector<std::uint8_t>& b, std::size_t at, std::uint32_t v) { put16(b, at, v >> 16), put16(b, at + 2, v & 0xFFFF); }
unsigned get16(const bytes& b, std::size_t at) { return std::to_integer<unsigned>(b[at]) << 8 | std::to_integer<unsigned>(b[at + 1]); }
std::uint32_t get32(const bytes& b, std::size_t at) { return get16(b, at) << 16 | get16(b, at + 2); }

/// The payload byte at sequence number `seq`.
std::uint8_t data_at(std::uint32_t seq) { return static_cast<std::uint8_t>(seq * 7 + (seq >> 9)); }

struct seg {
  std::uint32_t seq = 1000;
  std::size_t len = 1448;
  std::uint8_t flags = tf::ack;
  std::uint16_t id = 1;
  bool df = true;
  std::uint8_t ttl = 64, tos = 0;
  std::uint32_t tsval = 77;  ///< the timestamp option's value (options: NOP NOP TS, 12 bytes)
  bool options = true;
  bool v6 = false;
  std::uint16_t sport = 40000, dport = 5201, window = 512;
  std::uint32_t ack = 5000;
};

/// An Ethernet frame of s, checksums right.
bytes frame(const seg& s) {
  const std::size_t ip = 14, iph = s.v6 ? 40 : 20, thl = s.options ? 32 : 20, l4 = ip + iph;
  std::vector<std::uint8_t> b(l4 + thl + s.len);
  for (int i = 0; i < 6; ++i) b[static_cast<std::size_t>(i)] = i == 0 ? 2 : 1, b[static_cast<std::size_t>(6 + i)] = i == 0 ? 2 : 2;
  put16(b, 12, s.v6 ? 0x86DD : 0x0800);
  std::vector<std::uint8_t> pseudo;
  if (s.v6) {
    b[ip] = 0x60 | (s.tos >> 4), b[ip + 1] = static_cast<std::uint8_t>(s.tos << 4);
    put16(b, ip + 4, static_cast<unsigned>(thl + s.len));
    b[ip + 6] = 6, b[ip + 7] = s.ttl;
    b[ip + 8] = 0xFD, b[ip + 23] = 1;  // fd00::1
    b[ip + 24] = 0xFD, b[ip + 39] = 2;  // fd00::2
    pseudo.assign(b.begin() + ip + 8, b.begin() + ip + 40);
  } else {
    b[ip] = 0x45, b[ip + 1] = s.tos;
    put16(b, ip + 2, static_cast<unsigned>(20 + thl + s.len));
    put16(b, ip + 4, s.id);
    b[ip + 6] = s.df ? 0x40 : 0;
    b[ip + 8] = s.ttl, b[ip + 9] = 6;
    b[ip + 12] = 198, b[ip + 13] = 18, b[ip + 14] = 0, b[ip + 15] = 1;
    b[ip + 16] = 198, b[ip + 17] = 18, b[ip + 18] = 0, b[ip + 19] = 2;
    put16(b, ip + 10, csum(std::vector<std::uint8_t>(b.begin() + ip, b.begin() + ip + 20)));
    pseudo.assign(b.begin() + ip + 12, b.begin() + ip + 20);
  }
  put16(b, l4, s.sport), put16(b, l4 + 2, s.dport);
  put32(b, l4 + 4, s.seq), put32(b, l4 + 8, s.ack);
  b[l4 + 12] = static_cast<std::uint8_t>(thl / 4 << 4), b[l4 + 13] = s.flags;
  put16(b, l4 + 14, s.window);
  if (s.options) {
    b[l4 + 20] = 1, b[l4 + 21] = 1, b[l4 + 22] = 8, b[l4 + 23] = 10;
    put32(b, l4 + 24, s.tsval), put32(b, l4 + 28, 99);
  }
  for (std::size_t i = 0; i < s.len; ++i) b[l4 + thl + i] = data_at(s.seq + static_cast<std::uint32_t>(i));
  const std::size_t tl = thl + s.len;
  const auto t = [&](int shift) { return static_cast<std::uint8_t>(tl >> shift); };
  if (s.v6) pseudo.insert(pseudo.end(), {t(24), t(16), t(8), t(0), 0, 0, 0, 6});  // RFC 8200 §8.1
  else pseudo.insert(pseudo.end(), {0, 6, t(8), t(0)});                         // RFC 9293 §3.1
  std::vector<std::uint8_t> sum = pseudo;
  sum.insert(sum.end(), b.begin() + static_cast<std::ptrdiff_t>(l4), b.end());
  put16(b, l4 + 16, csum(sum));
  bytes out(b.size());
  for (std::size_t i = 0; i < b.size(); ++i) out[i] = std::byte{b[i]};
  return out;
}

/// Whether an aggregate's IPv4 header checksum and TCP checksum are right (this file's sum).
bool checksums_good(const bytes& f, bool v6) {
  std::vector<std::uint8_t> b(f.size());
  for (std::size_t i = 0; i < f.size(); ++i) b[i] = std::to_integer<std::uint8_t>(f[i]);
  const std::size_t ip = 14, l4 = ip + (v6 ? 40 : 20);
  if (!v6 && csum(std::vector<std::uint8_t>(b.begin() + ip, b.begin() + ip + 20)) != 0) return false;
  std::vector<std::uint8_t> s;
  if (v6) s.assign(b.begin() + ip + 8, b.begin() + ip + 40);
  else s.assign(b.begin() + ip + 12, b.begin() + ip + 20);
  const std::size_t tl = b.size() - l4;
  if (v6) s.insert(s.end(), {static_cast<std::uint8_t>(tl >> 24), static_cast<std::uint8_t>(tl >> 16), static_cast<std::uint8_t>(tl >> 8), static_cast<std::uint8_t>(tl), 0, 0, 0, 6});
  else s.insert(s.end(), {0, 6, static_cast<std::uint8_t>(tl >> 8), static_cast<std::uint8_t>(tl)});
  s.insert(s.end(), b.begin() + static_cast<std::ptrdiff_t>(l4), b.end());
  return csum(s) == 0;
}

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
