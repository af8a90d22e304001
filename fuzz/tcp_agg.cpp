// tcp_agg: a stream of TCP segments of four flows (IPv4 and IPv6, built by tests/flow's
// tcp_segments.hpp with good checksums), each one the flow's next, a repeat, a gap or a jump back,
// with flags, options, TTL, IP ID, lengths and a corrupted byte drawn from the input, and raw
// frames among them; time moves on and aggregations expire. Checked for every input:
//   - every frame pushed comes out exactly once: the segments of what is handed out add up;
//   - an aggregate of two or more segments has right IPv4 and TCP checksums (the test's own
//     sum), is at most max_bytes of IP, and is as long as its segments less their repeated
//     headers;
//   - the bytes handed out are the bytes pushed less the headers aggregates dropped (at most
//     that when raw or corrupted frames may carry padding past their IP length).
#include <cstdint>
#include <vector>

#include <pushwire/flow/tcp_agg.hpp>

#include "provider.hpp"
#include "tcp_segments.hpp"

using namespace pushwire;
namespace tt = pushwire::test::tcp;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::provider in(data, size);
  flow::tcp_agg_config cfg;
  cfg.max_bytes = in.in(576, 65535);
  cfg.timeout = in.in(1, 200) * 1000;
  cfg.max_flows = in.in(1, 4);
  flow::tcp_aggregator agg(cfg);
  std::array<tt::seg, 4> flows;
  for (std::size_t k = 0; k < flows.size(); ++k) {
    flows[k].v6 = k % 2 == 1;
    flows[k].sport = static_cast<std::uint16_t>(40000 + k);
    flows[k].len = 100;
  }
  std::uint64_t pushed = 0, segments_out = 0, bytes_in = 0, bytes_out = 0, dropped_headers = 0;
  bool exact = true;  // no raw or corrupted frame: no Ethernet padding for a joined segment to lose
  auto emit = [&](const flow::tcp_aggregate& a) {
    PUSHWIRE_FUZZ_CHECK(a.segments >= 1);
    segments_out += a.segments;
    bytes_out += a.frame.size();
    if (a.segments > 1) {
      PUSHWIRE_FUZZ_CHECK(a.header_bytes > 0 && a.frame.size() > a.header_bytes);
      PUSHWIRE_FUZZ_CHECK(a.frame.size() - 14 <= cfg.max_bytes);
      const tt::bytes f(a.frame.begin(), a.frame.end());
      PUSHWIRE_FUZZ_CHECK(tt::checksums_good(f, a.v6));
      dropped_headers += std::uint64_t{a.segments - 1u} * a.header_bytes;
    }
  };
  flow::time_ns now = 0;
  for (int events = 0; in.remaining() > 0 && events < 512; ++events) {
    now += in.in(0, 50) * 1000;
    const std::uint8_t what = in.take<std::uint8_t>();
    if (what % 16 == 15) {  // a raw frame
      const auto raw = in.bytes(256);
      exact = false;
      bytes_in += raw.size();
      ++pushed;
      agg.push(raw, now, emit);
      continue;
    }
    if (what % 16 == 14) {
      agg.expire(now, emit);
      continue;
    }
    tt::seg& s = flows[what % 4];
    tt::seg x = s;
    const std::uint8_t how = in.take<std::uint8_t>();
    switch (how % 8) {  // where it is in the flow
      case 0: x.seq -= static_cast<std::uint32_t>(x.len); break;  // a repeat
      case 1: x.seq += in.in(1, 3000); break;                    // a gap
      default: break;                                               // the next
    }
    if (how & 0x08) x.len = in.in(0, 1448);
    if (how & 0x10) x.flags = static_cast<std::uint8_t>(tt::tf::ack | (in.take<std::uint8_t>() & 0x3F & ~tt::tf::ack));
    if (how & 0x20) x.tsval += in.in(0, 2);
    if (how & 0x40) x.ttl = static_cast<std::uint8_t>(64 + in.in(0, 1)), x.df = in.in(0, 3) != 0, x.id = static_cast<std::uint16_t>(x.id + in.in(0, 2));
    x.options = !(how & 0x80) || in.in(0, 7) != 0;
    tt::bytes f = tt::frame(x);
    if (in.in(0, 15) == 0 && !f.empty()) f[in.in(0, static_cast<std::uint32_t>(f.size() - 1))] ^= std::byte{0x20}, exact = false;
    s = x;
    s.seq += static_cast<std::uint32_t>(x.len);
    ++s.id;
    bytes_in += f.size();
    ++pushed;
    agg.push(f, now, emit, in.in(0, 3) == 0);
  }
  agg.flush_all(emit);
  PUSHWIRE_FUZZ_CHECK(agg.open_flows() == 0);
  PUSHWIRE_FUZZ_CHECK(segments_out == pushed);
  PUSHWIRE_FUZZ_CHECK(bytes_out + dropped_headers <= bytes_in);
  PUSHWIRE_FUZZ_CHECK(!exact || bytes_out + dropped_headers == bytes_in);
  return 0;
}
