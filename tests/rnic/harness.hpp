// Two reference RNICs on a loopback fabric, with what a verbs program sets up: a PD, CQs, queue
// memory, registered buffers, and connected queue pairs of each type.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include <pushwire/rnic/connect.hpp>
#include <pushwire/rnic/fabric.hpp>

namespace pushwire::test::rnic {

using namespace pushwire::rnic;

inline port_config port_n(int n, framing f = framing::roce) {
  port_config p;
  p.mac = {0x02, 0, 0, 0, 0, static_cast<std::uint8_t>(n)};
  p.gid = gid_v4(198, 18, 0, static_cast<std::uint8_t>(n));
  p.framing = f;
  return p;
}

/// One side: a device, a PD, a CQ each for sends and receives, and memory.
struct side {
  std::unique_ptr<device> dev;
  std::uint32_t pd = 0;
  std::unique_ptr<cq_memory> scq_mem, rcq_mem;
  std::uint32_t scq = 0, rcq = 0;
  std::vector<std::byte> buf;
  memory_region mr{};
  std::vector<std::unique_ptr<sq_memory>> sqs;
  std::vector<std::unique_ptr<rq_memory>> rqs;

  side(int n, framing f, std::size_t bytes = 1 << 20, std::uint32_t cq_depth = 1024, device_config cfg = {})
      : side(port_n(n, f), bytes, cq_depth, std::move(cfg)) {}
  /// With its one port as given.
  side(const port_config& port, std::size_t bytes, std::uint32_t cq_depth, device_config cfg)
      : side(std::vector<port_config>{port}, bytes, cq_depth, std::move(cfg)) {}
  /// With these ports.
  side(const std::vector<port_config>& ports, std::size_t bytes, std::uint32_t cq_depth, device_config cfg) {
    cfg.ports = ports;
    dev = std::make_unique<device>(cfg);
    pd = *dev->alloc_pd();
    scq_mem = std::make_unique<cq_memory>(cq_depth);
    rcq_mem = std::make_unique<cq_memory>(cq_depth);
    scq = *dev->create_cq(*scq_mem);
    rcq = *dev->create_cq(*rcq_mem);
    buf.assign(bytes, std::byte{0});
    mr = *dev->reg_mr(pd, buf.data(), buf.size(), all_access);
  }
  std::uint64_t addr(std::size_t off = 0) { return reinterpret_cast<std::uintptr_t>(buf.data() + off); }
  sge at(std::size_t off, std::uint32_t len) { return {addr(off), len, mr.lkey}; }
  /// A QP of type t with its own rings.
  std::uint32_t qp(qp_type t, std::uint32_t depth = 256, std::uint64_t dct_key = 0) {
    sqs.push_back(std::make_unique<sq_memory>(depth));
    rqs.push_back(std::make_unique<rq_memory>(depth));
    qp_init_attr a{.type = t, .pd = pd, .send_cq = scq, .recv_cq = rcq, .sq = sqs.back().get(), .rq = rqs.back().get(),
                   .dct_access_key = dct_key};
    return *dev->create_qp(a);
  }
  std::vector<work_completion> poll_send(std::size_t max = 4096) { return poll(*scq_mem, max); }
  std::vector<work_completion> poll_recv(std::size_t max = 4096) { return poll(*rcq_mem, max); }
  static std::vector<work_completion> poll(cq_memory& m, std::size_t max) {
    std::vector<work_completion> out(max);
    out.resize(m.poll(out));
    return out;
  }
};

/// Runs `fab` until `n` completions are on s's send CQ, or for `limit` ns: those it polled, in
/// order.
inline std::vector<work_completion> run_until_sent(loopback_fabric& fab, side& s, std::size_t n, time_ns limit = 1'000'000'000) {
  std::vector<work_completion> got;
  (void)fab.run([&] {
    for (auto& x : s.poll_send()) got.push_back(x);
    return got.size() >= n;
  }, fab.now() + limit);
  return got;
}

/// rnic::bring_up with the harness's positional arguments (its defaults otherwise).
inline errc bring_up(device& d, std::uint32_t qpn, qp_type t, std::uint32_t peer, const address_vector& av,
                     std::uint32_t mtu = 1024, std::uint32_t psn_out = 0, std::uint32_t psn_in = 0) {
  return pushwire::rnic::bring_up(d, qpn, {.type = t, .peer_qpn = peer, .av = av, .mtu = mtu, .psn_out = psn_out, .psn_in = psn_in});
}
inline address_vector av_to(const device& d) { return address_of(d); }

/// Two sides on one link.
struct pair {
  loopback_fabric fab;
  side a, b;
  explicit pair(framing f = framing::roce, std::uint64_t seed = 1, const link_config& link = {}, device_config cfg = {},
                std::uint32_t cq_depth = 1024)
      : fab(seed), a(1, f, 1 << 20, cq_depth, cfg), b(2, f, 1 << 20, cq_depth, cfg) {
    (void)fab.link(*a.dev, 0, *b.dev, 0, link);
  }
  /// A connected pair of QPs of type t (RC, UC, UD): {a's, b's}.
  std::pair<std::uint32_t, std::uint32_t> connect(qp_type t, std::uint32_t mtu = 1024) {
    const std::uint32_t qa = a.qp(t), qb = b.qp(t);
    (void)bring_up(*a.dev, qa, t, qb, av_to(*b.dev), mtu);
    (void)bring_up(*b.dev, qb, t, qa, av_to(*a.dev), mtu);
    return {qa, qb};
  }
  /// Runs until `n` completions are on a's send CQ and `m` on b's receive CQ (or time runs out).
  bool run_for(time_ns limit = 1'000'000'000) { return fab.run([] { return false; }, fab.now() + limit); }
  void settle(time_ns limit = 1'000'000'000) { fab.run_until(fab.now() + limit); }
};

inline std::vector<std::byte> pattern_bytes(std::size_t n, std::uint8_t seed) {
  std::vector<std::byte> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>((i * 131 + seed * 7 + (i >> 8)) & 0xFF);
  return v;
}

}  // namespace pushwire::test::rnic
