// The 8-to-1 incast of spec/qos.md §3 in virtual time, shared by tests/rnic/qos_test.cpp and
// bench/incast.cpp (which plots it): 8 senders and a receiver on one switch, 25 Gb/s links of
// 500 ns, a 200 KB shared buffer; each sender keeps four 64 KiB RC WRITEs posted.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "harness.hpp"

// A failed step: the test's REQUIRE where it includes this, else an exception.
#ifndef PW_INCAST_REQUIRE
#define PW_INCAST_REQUIRE(x) \
  do {                       \
    if (!(x)) throw std::runtime_error("incast: " #x); \
  } while (0)
#endif

namespace pushwire::test::rnic {

constexpr double link_bytes_per_s = 3.125e9;  // 25 Gb/s
constexpr std::size_t senders = 8;
constexpr std::uint32_t write_bytes = 64 * 1024, outstanding = 4;

struct incast_result {
  switch_counters sw;
  std::uint64_t window_drops = 0;  ///< tail drops over the last window
  double goodput = 0;  ///< of the link, over the last window
  double jain = 0;     ///< of the flows' bytes over the last window
  std::vector<std::uint64_t> bytes;  ///< per flow, over the last window
  device_counters receiver{};
  std::uint64_t cnps_received = 0;
};

/// Jain's fairness index of x: (Σx)² / (n Σx²).
inline double jain(const std::vector<std::uint64_t>& x) {
  double s = 0, s2 = 0;
  for (const auto v : x) s += static_cast<double>(v), s2 += static_cast<double>(v) * static_cast<double>(v);
  return s2 > 0 ? s * s / (static_cast<double>(x.size()) * s2) : 0;
}

/// Every 10 µs of virtual time: the receiver's switch port queue in bytes, and each flow's
/// completed bytes so far.
using incast_trace = std::function<void(time_ns, std::uint64_t queue, const std::vector<std::uint64_t>& done)>;

inline incast_result incast(bool dcqcn, time_ns duration, time_ns window, const incast_trace& trace = {}) {
  loopback_fabric fab(7);
  switch_config sc;
  sc.ports = senders + 1;
  sc.buffer_bytes = 200'000;
  // Kmin / Kmax at a fifth and four fifths of the buffer, Pmax HPCC's 0.2
  if (dcqcn) sc.marking = flow::ecn_marking{.kmin = 40'000, .kmax = 160'000, .pmax = 0.2};
  const std::size_t sw = fab.add_switch(sc);
  device_config cfg;
  cfg.congestion.notify = cfg.congestion.react = dcqcn;
  cfg.congestion.dcqcn.line_rate = 25'000'000'000;
  std::vector<std::unique_ptr<side>> s;
  for (std::size_t i = 0; i <= senders; ++i) {
    port_config pc = port_n(static_cast<int>(i + 1));
    if (dcqcn) pc.ecn = ib::ecn::ect0;  // ECN-capable: the switch may mark it
    s.push_back(std::make_unique<side>(pc, std::size_t{1} << 20, 1024, cfg));
    link_config lc;
    lc.rate = link_bytes_per_s;
    lc.latency = 500;
    PW_INCAST_REQUIRE(fab.link_switch(*s[i]->dev, 0, sw, i, lc) == errc{});
  }
  side& rx = *s[senders];
  std::vector<std::uint32_t> qs(senders);
  for (std::size_t i = 0; i < senders; ++i) {
    const std::uint32_t qa = s[i]->qp(qp_type::rc), qb = rx.qp(qp_type::rc);
    PW_INCAST_REQUIRE(bring_up(*s[i]->dev, qa, qp_type::rc, qb, av_to(*rx.dev), 4096) == errc{});
    PW_INCAST_REQUIRE(bring_up(*rx.dev, qb, qp_type::rc, qa, av_to(*s[i]->dev), 4096) == errc{});
    qs[i] = qa;
  }
  std::vector<std::uint64_t> done(senders), mark(senders);
  std::uint64_t drops_before = 0;
  std::uint64_t next_id = 1;
  auto post = [&](std::size_t i) {
    const sge g = s[i]->at(0, write_bytes);
    PW_INCAST_REQUIRE(s[i]->dev->post_send(qs[i], {.wr_id = next_id++, .opcode = wr_opcode::rdma_write, .sg_list = std::span(&g, 1),
                                         .remote_addr = rx.addr((i % 8) * 128 * 1024), .rkey = rx.mr.rkey}) == errc{});
  };
  for (std::size_t i = 0; i < senders; ++i)
    for (std::uint32_t k = 0; k < outstanding; ++k) post(i);
  const time_ns slice = 10'000;
  for (time_ns t = slice; t <= duration; t += slice) {
    fab.run_until(t);
    if (t == duration - window) mark = done, drops_before = fab.switch_stats(sw).tail_drops;
    if (trace) trace(t, fab.queued(sw, senders), done);
    for (std::size_t i = 0; i < senders; ++i)
      for (const auto& c : s[i]->poll_send()) {
        PW_INCAST_REQUIRE(c.status == wc_status::success);
        done[i] += write_bytes;
        post(i);
      }
  }
  incast_result r;
  r.sw = fab.switch_stats(sw);
  r.window_drops = r.sw.tail_drops - drops_before;
  for (std::size_t i = 0; i < senders; ++i) r.bytes.push_back(done[i] - mark[i]);
  const double total = static_cast<double>(std::accumulate(r.bytes.begin(), r.bytes.end(), std::uint64_t{0}));
  r.goodput = total / (link_bytes_per_s * static_cast<double>(window) / 1e9);
  r.jain = jain(r.bytes);
  r.receiver = rx.dev->counters();
  for (std::size_t i = 0; i < senders; ++i) r.cnps_received += s[i]->dev->counters().cnps_received;
  return r;
}


}  // namespace pushwire::test::rnic
