// Seed 000's page-fault explicit flow control against plain timeout retransmission, on the
// same scripted fault: a 64-packet RDMA WRITE (4096-byte MTU) whose 11th packet (PSN 10)
// touches a page that takes 2 ms to fault in. 100 Gb/s, 2 us one way, local ACK timeout code
// 8 (1.048576 ms), retry_cnt 7. The figures are printed for the closing note.
#include <catch2/catch.hpp>

#include <cstdio>

#include "harness.hpp"

using namespace pwtest;

namespace {

struct outcome {
  std::uint64_t retransmitted, timeouts, page_fault_acks;
  time_ns completion;
  wc_status status;
};

outcome run(bool page_fault_ack, bool exact_delay = false) {
  rc_sim sim({.req = {.mtu = 4096, .window = 128, .timeout = 1'048'576, .retry_cnt = 7, .page_fault_aware = true},
              .resp = {.mtu = 4096,
                       .on_fault = page_fault_ack ? fault_policy::page_fault_ack : fault_policy::silent_drop,
                       .exact_fault_delay = exact_delay}});
  sim.pf = {.va_lo = 0x10000 + 10 * 4096, .va_hi = 0x10000 + 11 * 4096, .duration = 2'000'000, .active = true};
  sim.post({.id = 1, .op = wr_op::write, .length = 64 * 4096, .remote_va = 0x10000, .rkey = 1});
  sim.run();
  REQUIRE(sim.completions.size() == 1);
  REQUIRE(sim.placed.size() == 64);
  return {sim.retransmitted(), sim.rq.stats().timeouts, sim.rs.stats().page_faults, sim.completed_at[0], sim.completions[0].status};
}

}  // namespace

TEST_CASE("page fault: page-fault ACK against timeout retransmission on a 2 ms fault in a 64-packet write") {
  const outcome pf = run(true);
  const outcome cell = run(true, true);
  const outcome to = run(false);
  std::printf("page-fault comparison (64 x 4096 B RDMA WRITE, 2 ms fault at PSN 10, 100 Gb/s, 2 us, timeout 1.048576 ms):\n");
  auto line = [](const char* what, const outcome& o) {
    std::printf("  %-44s %3llu packets retransmitted, %llu timeouts, %llu page-fault ACKs, completed at %.3f ms\n", what,
                static_cast<unsigned long long>(o.retransmitted), static_cast<unsigned long long>(o.timeouts),
                static_cast<unsigned long long>(o.page_fault_acks), static_cast<double>(o.completion) / 1e6);
  };
  line("page-fault ACK, RoCE (RNR code: 2.56 ms)", pf);
  line("page-fault ACK, cells (exact delay: 2 ms)", cell);
  line("no page-fault ACK (timeout retransmission)", to);
  CHECK(pf.status == wc_status::success);
  CHECK(to.status == wc_status::success);
  CHECK(pf.timeouts == 0);
  CHECK(pf.page_fault_acks >= 1);
  CHECK(to.page_fault_acks == 0);
  CHECK(to.timeouts >= 1);
  CHECK(pf.retransmitted < to.retransmitted);
  CHECK(cell.retransmitted == pf.retransmitted);
  CHECK(cell.timeouts == 0);
  // on RoCE the pause lasts the announced delay: 2.56 ms, the shortest RNR delay >= 2 ms
  CHECK(pf.completion > 2'560'000);
  // with the exact delay the transfer resumes as the fault resolves
  CHECK(cell.completion > 2'000'000);
  CHECK(cell.completion < 2'100'000);
  CHECK(cell.completion < to.completion);
}
