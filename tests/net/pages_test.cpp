// net::kernel_pages (the kernel's view of the process's pages) and the implicit on-demand keys
// that ask it (rnic::memory_table::reg_implicit; spec/verbs.md §3): residency from mincore,
// eviction with MADV_DONTNEED, unmapped and read-only pages refused; then two devices in virtual
// time: RDMA WRITEs into never-touched and evicted pages pause the requester on page-fault ACKs
// with no timeout, and writes to an unmapped or read-only page complete with a remote access
// error while the process lives on.
#include <catch2/catch.hpp>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include <pushwire/net/pages.hpp>

#include "../rnic/harness.hpp"

using namespace pushwire;
using namespace pushwire::test::rnic;

namespace {

/// `pages` fresh anonymous pages (never touched: absent), unmapped at the end.
struct region {
  std::size_t bytes;
  std::byte* p;
  explicit region(std::size_t pages) : bytes(pages * 4096) {
    p = static_cast<std::byte*>(::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    REQUIRE(p != MAP_FAILED);
  }
  ~region() { ::munmap(p, bytes); }
  std::uint64_t at(std::size_t off) const { return reinterpret_cast<std::uintptr_t>(p + off); }
};

/// An RDMA WRITE of `s` from a's QP qa to (va, rkey) at b; runs the fabric until it completes
/// and returns its status.
wc_status write_to(pair& p, std::uint32_t qa, const sge& s, std::uint64_t va, std::uint32_t rkey) {
  REQUIRE(p.a.dev->post_send(qa, {.wr_id = 1, .opcode = wr_opcode::rdma_write, .sg_list = std::span(&s, 1), .remote_addr = va, .rkey = rkey}) ==
          errc{});
  std::optional<wc_status> st;
  REQUIRE(p.fab.run([&] {
    for (const auto& c : p.a.poll_send()) st = c.status;
    return st.has_value();
  }, p.fab.now() + 1'000'000'000));
  return *st;
}

}  // namespace

TEST_CASE("kernel_pages: residency from mincore, MADV_DONTNEED evicts, unmapped and read-only pages refused", "[net][pages]") {
  REQUIRE(::sysconf(_SC_PAGESIZE) == 4096);
  net::kernel_pages k;
  region r(4);
  CHECK(k.probe(r.at(0), 4096, true) == rnic::errc::page_fault);  // never touched
  r.p[0] = std::byte{1};
  CHECK(k.probe(r.at(0), 4096, true) == rnic::errc{});
  CHECK(k.probe(r.at(100), 5000, false) == rnic::errc::page_fault);  // the second page is absent
  REQUIRE(k.fault_in(r.at(100), 5000, true));                         // both pages, the first resident
  CHECK(k.probe(r.at(100), 5000, true) == rnic::errc{});
  CHECK(r.p[0] == std::byte{1});  // faulting in touched no byte
  REQUIRE(::madvise(r.p, 4096, MADV_DONTNEED) == 0);
  CHECK(k.probe(r.at(0), 1, false) == rnic::errc::page_fault);
  // Read-only: resident, readable, not writable (and faulting in for a write fails).
  REQUIRE(::mprotect(r.p + 2 * 4096, 4096, PROT_READ) == 0);
  CHECK(k.probe(r.at(2 * 4096), 8, false) == rnic::errc::page_fault);
  CHECK_FALSE(k.fault_in(r.at(2 * 4096), 8, true));
  CHECK(k.fault_in(r.at(2 * 4096), 8, false));
  CHECK(k.probe(r.at(2 * 4096), 8, false) == rnic::errc{});
  CHECK(k.probe(r.at(2 * 4096), 8, true) == rnic::errc::no_access_right);
  // Evicted again: a read is a fault (the failed write above refuses writes only, and the page
  // was resident since), a write a fault too until a write fails to bring it in.
  REQUIRE(::madvise(r.p + 2 * 4096, 4096, MADV_DONTNEED) == 0);
  CHECK(k.probe(r.at(2 * 4096), 8, false) == rnic::errc::page_fault);
  CHECK(k.probe(r.at(2 * 4096), 8, true) == rnic::errc::page_fault);
  CHECK_FALSE(k.fault_in(r.at(2 * 4096), 8, true));
  CHECK(k.probe(r.at(2 * 4096), 8, true) == rnic::errc::no_access_right);
  CHECK(k.probe(r.at(2 * 4096), 8, false) == rnic::errc::page_fault);
  // PROT_NONE, absent: a fault first; once fault_in failed, refused while absent, for reads and
  // writes, not faulted forever.
  REQUIRE(::mprotect(r.p + 3 * 4096, 4096, PROT_NONE) == 0);
  CHECK(k.probe(r.at(3 * 4096), 8, false) == rnic::errc::page_fault);
  CHECK_FALSE(k.fault_in(r.at(3 * 4096), 8, false));
  CHECK(k.probe(r.at(3 * 4096), 8, false) == rnic::errc::no_access_right);
  CHECK(k.probe(r.at(3 * 4096), 8, true) == rnic::errc::no_access_right);
  CHECK(k.probe(r.at(3 * 4096), 8, false) == rnic::errc::no_access_right);
  // Unmapped.
  REQUIRE(::munmap(r.p + 3 * 4096, 4096) == 0);
  CHECK(k.probe(r.at(3 * 4096), 8, false) == rnic::errc::out_of_range);
  CHECK(k.probe(r.at(4090), 4096 * 3, true) == rnic::errc::out_of_range);  // ends past the mapping
  CHECK_FALSE(k.fault_in(r.at(3 * 4096), 8, true));
  // Limits: empty, wrapping, longer than a message.
  CHECK(k.probe(r.at(0), 0, false) == rnic::errc::out_of_range);
  CHECK(k.probe(~std::uint64_t{0} - 10, 100, false) == rnic::errc::out_of_range);
  CHECK(k.probe(r.at(0), net::kernel_pages::max_bytes + 1, false) == rnic::errc::out_of_range);
}

TEST_CASE("implicit on-demand keys: WRITEs into absent and evicted pages pause on page-fault ACKs, unmapped and read-only ones are remote access errors",
          "[net][pages][rnic][odp]") {
  net::kernel_pages k;
  device_config cfg;
  cfg.page_fault_latency = 2'000'000;  // 2 ms to bring a page in
  pair p(framing::roce, 1, {}, cfg);
  const std::uint32_t qa = p.connect(qp_type::rc).first;  // (a name a lambda can capture)
  // b has no host_pages yet: no implicit key.
  CHECK(p.b.dev->reg_mr_implicit(p.b.pd, all_access).code() == rnic::errc::invalid_argument);
  p.b.dev->memory().set_host_pages(&k);
  const memory_region imr = *p.b.dev->reg_mr_implicit(p.b.pd, all_access);
  CHECK(imr.addr == 0);
  CHECK(imr.length == ~std::uint64_t{0});
  CHECK(p.b.dev->memory().info(imr.lkey)->implicit);

  region target(16);  // 64 KiB, never touched
  const auto msg = pattern_bytes(16 * 1024, 3);
  std::copy(msg.begin(), msg.end(), p.a.buf.begin());
  const sge s = p.a.at(0, 16 * 1024);
  auto write_at = [&](std::uint64_t va) { return write_to(p, qa, s, va, imr.rkey); };

  // Into pages never touched: paused, not timed out; every byte there.
  CHECK(write_at(target.at(4096)) == wc_status::success);
  CHECK(std::equal(msg.begin(), msg.end(), target.p + 4096));
  const std::uint64_t pauses_first = p.a.dev->counters().pauses;
  CHECK(pauses_first >= 1);
  CHECK(p.b.dev->counters().page_faults >= 1);
  CHECK(p.a.dev->view(qa)->timeouts == 0);

  // Written again while resident: no pause.
  CHECK(write_at(target.at(4096)) == wc_status::success);
  CHECK(p.a.dev->counters().pauses == pauses_first);

  // Evicted between two transfers (MADV_DONTNEED): the next one pauses again, no timeout.
  REQUIRE(::madvise(target.p, target.bytes, MADV_DONTNEED) == 0);
  CHECK(std::all_of(target.p, target.p + target.bytes, [](std::byte b) { return b == std::byte{0}; }));
  REQUIRE(::madvise(target.p, target.bytes, MADV_DONTNEED) == 0);  // (the check above read them in)
  CHECK(write_at(target.at(4096)) == wc_status::success);
  CHECK(std::equal(msg.begin(), msg.end(), target.p + 4096));
  CHECK(p.a.dev->counters().pauses > pauses_first);
  CHECK(p.a.dev->view(qa)->timeouts == 0);

  // A read-only page: a remote access error (the QPs go to error; the process lives on, the
  // byte untouched).
  region ro(4);
  ro.p[0] = std::byte{7};
  REQUIRE(::mprotect(ro.p, ro.bytes, PROT_READ) == 0);
  CHECK(write_at(ro.at(0)) == wc_status::remote_access_error);
  CHECK(ro.p[0] == std::byte{7});
}

TEST_CASE("implicit on-demand keys: a WRITE into an unmapped range is a remote access error", "[net][pages][rnic][odp]") {
  net::kernel_pages k;
  pair p;
  const auto [qa, qb] = p.connect(qp_type::rc);
  (void)qb;
  p.b.dev->memory().set_host_pages(&k);
  const memory_region imr = *p.b.dev->reg_mr_implicit(p.b.pd, all_access);
  // A page-sized hole between two mapped pages: no later mapping can land in it by chance.
  region r(3);
  REQUIRE(::munmap(r.p + 4096, 4096) == 0);
  const std::uint64_t gone = r.at(4096);
  CHECK(write_to(p, qa, p.a.at(0, 4096), gone, imr.rkey) == wc_status::remote_access_error);
  // Local accesses too: a prefetch of the unmapped range is refused, of a live one served.
  region live(2);
  const sge bad{gone, 4096, imr.lkey}, good{live.at(0), 8192, imr.lkey};
  CHECK(p.b.dev->prefetch(p.b.pd, std::span(&bad, 1), access::local_write) == rnic::errc::out_of_range);
  CHECK(p.b.dev->prefetch(p.b.pd, std::span(&good, 1), access::local_write) == rnic::errc{});
  CHECK(k.probe(live.at(0), 8192, true) == rnic::errc{});
}
