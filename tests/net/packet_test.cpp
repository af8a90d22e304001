// net::packet_port (spec/net.md §5): two reference RNICs in cell framing, each on one end of a
// veth pair in a network namespace of its own (a child process unshares one), move an RC WRITE
// of 200 KB and a SEND as cells over AF_PACKET, intact, with and without injected loss.
// Skips, visibly, where namespaces, veth or AF_PACKET are not allowed.
#include <catch2/catch.hpp>

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <vector>

#include <pushwire/net/packet.hpp>
#include <pushwire/net/udp.hpp>

#include "../support/process.hpp"
#include <pushwire/rnic/connect.hpp>

using namespace pushwire;

namespace {

struct node {
  net::packet_port link;
  rnic::device dev;
  static rnic::device_config config(const net::packet_port& l, std::uint8_t n) {
    rnic::port_config p;
    p.mac = l.mac();
    p.gid = rnic::gid_v4(198, 18, 5, n);
    p.framing = rnic::framing::cell;
    p.cell_payload = 1400;
    rnic::device_config c;
    c.ports = {p};
    c.retry_forever = true;
    return c;
  }
  node(const char* ifname, std::uint8_t n, double loss)
      : link({.interface = ifname, .faults = {.loss = loss}, .seed = n}), dev(config(link, n)) {}
  void step() {
    const auto now = net::monotonic_ns();
    link.receive_into(dev, 0, now);
    dev.progress(now);
    link.send_from(dev, 0, now);
  }
};

// The child's body: 0 on success, else the step that failed (10+: setup, 20+: checks).
int in_namespace(double loss) {
  if (std::system("ip link add pwpa type veth peer name pwpb && ip link set pwpa up && ip link set pwpb up") != 0) return 101;
  node a("pwpa", 1, loss), b("pwpb", 2, loss);
  if (!a.link.ok() || !b.link.ok()) return a.link.error() == EPERM || a.link.error() == EACCES ? 101 : 11;
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
  if (rnic::bring_up(a.dev, qa, {.peer_qpn = qb, .av = rnic::address_of(b.dev), .mtu = 4096}) != rnic::errc{}) return 12;
  if (rnic::bring_up(b.dev, qb, {.peer_qpn = qa, .av = rnic::address_of(a.dev), .mtu = 4096}) != rnic::errc{}) return 13;
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
  if (sends != 2 || recvs != 1) return 21;
  if (dst != src) return 22;
  if (!std::equal(rbuf.begin(), rbuf.begin() + 100, src.begin())) return 23;
  if (a.link.stats().sent < 143) return 24;  // 200000 bytes in cells of 1400 bytes at most
  if (loss > 0 && a.link.stats().lost == 0) return 25;
  if (b.dev.counters().dropped_bad_frame != 0) return 26;  // every cell CRC held across the veth
  return 0;
}

}  // namespace

TEST_CASE("packet: cells over AF_PACKET on a veth pair carry a 200 KB WRITE and a SEND intact, with and without loss", "[net][cells]") {
  const double loss = GENERATE(0.0, 0.03);
  INFO("loss " << loss);
  const std::optional<int> failed_step = test::in_new_netns([&] { return in_namespace(loss); }, "no network namespace, veth or AF_PACKET here (needs root and iproute2)");
  if (failed_step) CHECK(*failed_step == 0);
}
