// Two reference RNICs on a loopback fabric, with what a verbs program sets up: a PD, CQs, queue
// memory, registered buffers, and connected queue pairs of each type.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include <pushwire/rnic/fabric.hpp>

namespace pushwire::test::rnic {

using namespace pushwire::rnic;

inline port_config port_n(int n, framing f = framing::roce) {
  port_config p;
  p.mac = {0x02, 0, 0, 0, 0, static_cast<std::uint8_t>(n)};
  p.gid = gid_v4(198, 18, 0, static_cast<std::uint8_t>(n));
  p.frame = f;
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

  side(int n, framing f, std::size_t bytes = 1 << 20, std::uint32_t cq_depth = 1024, device_config cfg = {}) {
    cfg.ports = {port_n(n, f)};
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

/// The attributes that bring a QP of type t to RTS (RTR for a DCT), talking to `peer` at av.
inline errc bring_up(device& d, std::uint32_t qpn, qp_type t, std::uint32_t peer, const address_vector& av,
                     std::uint32_t mtu = 1024, std::uint32_t psn_out = 0, std::uint32_t psn_in = 0) {
  using M = qp_attr_mask;
  qp_attr a{};
  a.state = qp_state::init;
  a.port = 0;
  a.access_flags = access::remote_write | access::remote_read | access::remote_atomic;
  a.qkey = 0x11111111;
  M m = M::state | M::pkey_index | M::port;
  if (t == qp_type::ud) m = m | M::qkey;
  else if (t != qp_type::dci) m = m | M::access_flags;
  if (errc e = d.modify_qp(qpn, a, m); e != errc{}) return e;
  a.state = qp_state::rtr;
  a.av = av;
  a.path_mtu = mtu;
  a.dest_qp_num = peer;
  a.rq_psn = psn_in;
  a.max_dest_rd_atomic = 16;
  a.min_rnr_timer = 1;
  switch (t) {
    case qp_type::rc: m = M::state | M::av | M::path_mtu | M::dest_qpn | M::rq_psn | M::max_dest_rd_atomic | M::min_rnr_timer; break;
    case qp_type::uc: m = M::state | M::av | M::path_mtu | M::dest_qpn | M::rq_psn; break;
    case qp_type::ud: m = M::state; break;
    case qp_type::dci: m = M::state | M::path_mtu; break;
    case qp_type::dct: m = M::state | M::path_mtu | M::min_rnr_timer; break;
  }
  if (errc e = d.modify_qp(qpn, a, m); e != errc{}) return e;
  if (t == qp_type::dct) return {};
  a.state = qp_state::rts;
  a.sq_psn = psn_out;
  a.timeout = 8;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 16;
  m = t == qp_type::rc || t == qp_type::dci ? M::state | M::timeout | M::retry_cnt | M::rnr_retry | M::sq_psn | M::max_qp_rd_atomic
                                             : M::state | M::sq_psn;
  return d.modify_qp(qpn, a, m);
}

inline address_vector av_to(const device& d) {
  const port_config& p = d.config().ports[0];
  return {.port = 0, .dmac = p.mac, .dgid = p.gid};
}

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
