// [readme]
#include <cstdio>
#include <pushwire/rnic/fabric.hpp>
#include <pushwire/msg/idata.hpp>
using namespace pushwire::rnic;

int main() {
  auto port = [](std::uint8_t n) { return port_config{.mac = {2, 0, 0, 0, 0, n}, .gid = gid_v4(198, 18, 0, n)}; };
  device host({.ports = {port(1)}}), iou({.ports = {port(2)}});
  loopback_fabric fabric;
  (void)fabric.link(host, 0, iou, 0);
  std::vector<std::byte> src(256, std::byte{0xAB}), pool(64 * 256);
  cq_memory hcq(64), icq(64);
  sq_memory hsq(64), isq(64);
  rq_memory hrq(64), irq(64);
  const auto hpd = *host.alloc_pd(), ipd = *iou.alloc_pd();
  const auto smr = *host.reg_mr(hpd, src.data(), src.size(), access::local_write);
  const auto pmr = *iou.reg_mr(ipd, pool.data(), pool.size(), access::local_write | access::remote_write);
  const auto hc = *host.create_cq(hcq), ic = *iou.create_cq(icq);
  const auto hq = *host.create_qp({.pd = hpd, .send_cq = hc, .recv_cq = hc, .sq = &hsq, .rq = &hrq});
  const auto iq = *iou.create_qp({.pd = ipd, .send_cq = ic, .recv_cq = ic, .sq = &isq, .rq = &irq});
  using M = qp_attr_mask;
  for (auto [d, q, peer, to] : {std::tuple{&host, hq, iq, &iou}, std::tuple{&iou, iq, hq, &host}}) {
    const address_vector av{.dmac = to->config().ports[0].mac, .dgid = to->config().ports[0].gid};
    (void)d->modify_qp(q, {.state = qp_state::init, .access_flags = access::remote_write}, M::state | M::pkey_index | M::port | M::access_flags);
    (void)d->modify_qp(q, {.state = qp_state::rtr, .av = av, .dest_qp_num = peer}, M::state | M::av | M::path_mtu | M::dest_qpn | M::rq_psn | M::max_dest_rd_atomic | M::min_rnr_timer);
    (void)d->modify_qp(q, {.state = qp_state::rts}, M::state | M::timeout | M::retry_cnt | M::rnr_retry | M::sq_psn | M::max_qp_rd_atomic);
  }
  const sge none{};  // WRITE_WITH_IMM consumes a receive at the target
  (void)iou.post_recv(iq, {.wr_id = 1, .sg_list = {&none, 1}});
  const sge data{smr.addr, 256, smr.lkey};
  const auto idata = pushwire::msg::to_imm(*pushwire::msg::make_idata({.pool_ref = 7, .element_index = 5, .byte_count = 256}));
  (void)host.post_send(hq, {.wr_id = 42, .opcode = wr_opcode::rdma_write_with_imm, .sg_list = {&data, 1}, .imm = idata,
                            .remote_addr = pmr.addr + 5 * 256, .rkey = pmr.rkey});
  fabric.run_until(1'000'000);
  work_completion wc[2];
  const auto n = hcq.poll({wc, 1}) + icq.poll({wc + 1, 1});  // polled: no interrupt, no lock, no system call
  std::printf("%zu completions: wr %lu; idata 0x%08x, %u bytes\n", n, wc[0].wr_id, wc[1].imm, wc[1].byte_len);
}
// [/readme]
