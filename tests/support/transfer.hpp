// Two reference RNICs on a real transport move an RC WRITE and a SEND (tests/net/): each node has
// `dev` (an rnic::device) and `step()` (one turn of its transport and device).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include <pushwire/net/clock.hpp>
#include <pushwire/rnic/connect.hpp>

namespace pushwire::test {

/// An RC QP on each device, brought up toward the other (`to_b`, `to_a`, `mtu`); A WRITEs 200000
/// bytes of a pattern into B's memory and SENDs the first 100 of them into a receive B posted.
/// 0 when both complete within 20 s and every byte arrived; else the step that failed: 12..15
/// setting up, 21 no completion (after `on_timeout()`, for a test's diagnostics), 22 the WRITE's
/// bytes differ, 23 the SEND's.
template <class A, class B>
int write_then_send(A& a, B& b, const rnic::address_vector& to_b, const rnic::address_vector& to_a, std::uint32_t mtu,
                    const std::function<void()>& on_timeout = {}) {
  rnic::cq_memory acq(64), bcq(64);
  rnic::sq_memory asq(64), bsq(64);
  rnic::rq_memory arq(64), brq(64);
  const auto apd = *a.dev.alloc_pd(), bpd = *b.dev.alloc_pd();
  std::vector<std::byte> src(200000), dst(200000), rbuf(256);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::byte>(i * 29 + (i >> 9));
  const auto smr = *a.dev.reg_mr(apd, src.data(), src.size(), rnic::access::local_write);
  const auto dmr = *b.dev.reg_mr(bpd, dst.data(), dst.size(), rnic::access::local_write | rnic::access::remote_write);
  const auto rmr = *b.dev.reg_mr(bpd, rbuf.data(), rbuf.size(), rnic::access::local_write);
  const auto ac = *a.dev.create_cq(acq), bc = *b.dev.create_cq(bcq);
  const auto qa = *a.dev.create_qp({.pd = apd, .send_cq = ac, .recv_cq = ac, .sq = &asq, .rq = &arq});
  const auto qb = *b.dev.create_qp({.pd = bpd, .send_cq = bc, .recv_cq = bc, .sq = &bsq, .rq = &brq});
  if (rnic::bring_up(a.dev, qa, {.peer_qpn = qb, .av = to_b, .mtu = mtu}) != rnic::errc{}) return 12;
  if (rnic::bring_up(b.dev, qb, {.peer_qpn = qa, .av = to_a, .mtu = mtu}) != rnic::errc{}) return 13;
  const rnic::sge r{rmr.addr, 256, rmr.lkey}, s{smr.addr, 200000, smr.lkey}, small{smr.addr, 100, smr.lkey};
  if (b.dev.post_recv(qb, {.wr_id = 1, .sg_list = {&r, 1}}) != rnic::errc{}) return 14;
  b.step();
  if (a.dev.post_send(qa, {.wr_id = 10, .opcode = rnic::wr_opcode::rdma_write, .sg_list = {&s, 1}, .remote_addr = dmr.addr, .rkey = dmr.rkey}) !=
          rnic::errc{} ||
      a.dev.post_send(qa, {.wr_id = 11, .opcode = rnic::wr_opcode::send, .sg_list = {&small, 1}}) != rnic::errc{})
    return 15;
  int sends = 0, recvs = 0;
  rnic::work_completion wc[8];
  const auto end = net::monotonic_ns() + 20'000'000'000;
  while ((sends < 2 || recvs < 1) && net::monotonic_ns() < end) {
    a.step();
    b.step();
    for (std::size_t i = 0, n = acq.poll(wc); i < n; ++i) sends += wc[i].status == rnic::wc_status::success ? 1 : 100;
    for (std::size_t i = 0, n = bcq.poll(wc); i < n; ++i) recvs += wc[i].status == rnic::wc_status::success ? 1 : 100;
  }
  if (sends != 2 || recvs != 1) {
    if (on_timeout) on_timeout();
    return 21;
  }
  if (dst != src) return 22;
  if (!std::equal(rbuf.begin(), rbuf.begin() + 100, src.begin())) return 23;
  return 0;
}

}  // namespace pushwire::test
