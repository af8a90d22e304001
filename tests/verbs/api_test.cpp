// The provider through libibverbs' own API (spec/verbs.md §3), for what rdma-core's tests do
// not check: a parent domain's allocators really give the queues' memory (and get it back),
// inline sends beyond the descriptor's 64 bytes arrive intact, and the GID table. Linked with
// libibverbs and run under the provider (LD_PRELOAD), as any verbs program.
#include <infiniband/verbs.h>

#include <catch2/catch.hpp>

#include "rc_connect.hpp"

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <vector>

namespace {

struct device {
  ibv_context* ctx = nullptr;
  device() {
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    REQUIRE(list);
    REQUIRE(n >= 1);
    ctx = ibv_open_device(list[0]);
    ibv_free_device_list(list);
    REQUIRE(ctx);
  }
  ~device() { ibv_close_device(ctx); }
};

struct counts {
  std::map<std::uint64_t, int> alloc, freed;
  bool fail = false, use_default = false;
};
void* count_alloc(ibv_pd*, void* ctx, std::size_t size, std::size_t alignment, std::uint64_t type) {
  auto& c = *static_cast<counts*>(ctx);
  ++c.alloc[type];
  if (c.fail) return nullptr;
  if (c.use_default) return IBV_ALLOCATOR_USE_DEFAULT;
  void* p = nullptr;
  return posix_memalign(&p, alignment, size) == 0 ? p : nullptr;
}
void count_free(ibv_pd*, void* ctx, void* p, std::uint64_t type) {
  ++static_cast<counts*>(ctx)->freed[type];
  std::free(p);
}

std::vector<ibv_wc> poll_n(ibv_cq* cq, int n) {
  std::vector<ibv_wc> out;
  for (int spins = 0; static_cast<int>(out.size()) < n && spins < 10'000'000; ++spins) {
    ibv_wc wc{};
    if (ibv_poll_cq(cq, 1, &wc) == 1) out.push_back(wc);
  }
  return out;
}

}  // namespace

TEST_CASE("a parent domain's allocators give the queues' memory and get it back") {
  device d;
  ibv_pd* pd = ibv_alloc_pd(d.ctx);
  REQUIRE(pd);
  counts c;
  ibv_parent_domain_init_attr pa{};
  pa.pd = pd;
  pa.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
  pa.alloc = count_alloc;
  pa.free = count_free;
  pa.pd_context = &c;
  ibv_pd* parent = ibv_alloc_parent_domain(d.ctx, &pa);
  REQUIRE(parent);
  constexpr std::uint64_t sq = 0x5057'0000'0001, rq = 0x5057'0000'0002, cqr = 0x5057'0000'0003, srq = 0x5057'0000'0004;
  ibv_cq_init_attr_ex ca{};
  ca.cqe = 16;
  ca.comp_mask = IBV_CQ_INIT_ATTR_MASK_PD;
  ca.parent_domain = parent;
  ibv_cq_ex* cqx = ibv_create_cq_ex(d.ctx, &ca);
  REQUIRE(cqx);
  CHECK(c.alloc[cqr] == 1);
  ca.parent_domain = pd;  // a plain PD is not a parent domain
  errno = 0;
  CHECK(ibv_create_cq_ex(d.ctx, &ca) == nullptr);
  CHECK(errno == EINVAL);
  ibv_cq* cq = ibv_cq_ex_to_cq(cqx);
  ibv_qp_init_attr qa{};
  qa.send_cq = qa.recv_cq = cq;
  qa.qp_type = IBV_QPT_RC;
  qa.cap = {8, 8, 1, 1, 0};
  ibv_qp* qp = ibv_create_qp(parent, &qa);
  REQUIRE(qp);
  CHECK(c.alloc[sq] == 1);
  CHECK(c.alloc[rq] == 1);
  ibv_srq_init_attr sa{};
  sa.attr.max_wr = 8;
  sa.attr.max_sge = 1;
  ibv_srq* s = ibv_create_srq(parent, &sa);
  REQUIRE(s);
  CHECK(c.alloc[srq] == 1);
  c.fail = true;  // an allocator that fails: ENOMEM, nothing made
  errno = 0;
  CHECK(ibv_create_qp(parent, &qa) == nullptr);
  CHECK(errno == ENOMEM);
  c.fail = false;
  c.use_default = true;  // IBV_ALLOCATOR_USE_DEFAULT: the provider's own memory
  ibv_qp* qp2 = ibv_create_qp(parent, &qa);
  REQUIRE(qp2);
  CHECK(ibv_destroy_qp(qp2) == 0);
  CHECK(c.freed.empty());
  CHECK(ibv_destroy_srq(s) == 0);
  CHECK(ibv_destroy_qp(qp) == 0);
  CHECK(ibv_destroy_cq(cq) == 0);
  CHECK(c.freed[sq] == 1);
  CHECK(c.freed[rq] == 1);
  CHECK(c.freed[cqr] == 1);
  CHECK(c.freed[srq] == 1);
  CHECK(ibv_dealloc_pd(parent) == 0);
  CHECK(ibv_dealloc_pd(pd) == 0);
}

TEST_CASE("inline sends of 1 to 256 bytes arrive intact; more is EINVAL") {
  device d;
  ibv_pd* pd = ibv_alloc_pd(d.ctx);
  ibv_cq* cq = ibv_create_cq(d.ctx, 64, nullptr, nullptr, 0);
  REQUIRE(cq);
  ibv_qp_init_attr qa{};
  qa.send_cq = qa.recv_cq = cq;
  qa.qp_type = IBV_QPT_RC;
  qa.cap = {16, 16, 1, 1, 256};
  ibv_qp* a = ibv_create_qp(pd, &qa);
  ibv_qp* b = ibv_create_qp(pd, &qa);
  REQUIRE(a);
  REQUIRE(b);
  CHECK(qa.cap.max_inline_data >= 256);
  REQUIRE(pushwire::test::connect_rc(a, b, d.ctx));
  std::vector<std::uint8_t> dst(512), src(512);
  ibv_mr* mr = ibv_reg_mr(pd, dst.data(), dst.size(), IBV_ACCESS_LOCAL_WRITE);
  REQUIRE(mr);
  for (std::uint32_t len : {1u, 63u, 64u, 65u, 200u, 256u}) {
    INFO(len);
    for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::uint8_t>(i * 7 + len);
    std::fill(dst.begin(), dst.end(), 0);
    ibv_sge rs{reinterpret_cast<std::uintptr_t>(dst.data()), 512, mr->lkey};
    ibv_recv_wr rw{};
    rw.wr_id = 1;
    rw.sg_list = &rs;
    rw.num_sge = 1;
    ibv_recv_wr* bad_r = nullptr;
    REQUIRE(ibv_post_recv(b, &rw, &bad_r) == 0);
    // the source is gathered from two pieces and may be overwritten once posted
    ibv_sge ss[2] = {{reinterpret_cast<std::uintptr_t>(src.data()), len / 2, 0},
                     {reinterpret_cast<std::uintptr_t>(src.data() + len / 2), len - len / 2, 0}};
    ibv_send_wr sw{};
    sw.wr_id = 2;
    sw.sg_list = ss;
    sw.num_sge = 2;
    sw.opcode = IBV_WR_SEND;
    sw.send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED;
    ibv_send_wr* bad = nullptr;
    REQUIRE(ibv_post_send(a, &sw, &bad) == 0);
    const auto expect = std::vector<std::uint8_t>(src.begin(), src.begin() + len);
    std::fill(src.begin(), src.end(), 0xEE);
    const auto wcs = poll_n(cq, 2);
    REQUIRE(wcs.size() == 2);
    for (const auto& w : wcs) CHECK(w.status == IBV_WC_SUCCESS);
    CHECK(std::vector<std::uint8_t>(dst.begin(), dst.begin() + len) == expect);
    CHECK(dst[len] == 0);
  }
  ibv_sge big{reinterpret_cast<std::uintptr_t>(src.data()), 257, 0};
  ibv_send_wr sw{};
  sw.sg_list = &big;
  sw.num_sge = 1;
  sw.opcode = IBV_WR_SEND;
  sw.send_flags = IBV_SEND_INLINE;
  ibv_send_wr* bad = nullptr;
  CHECK(ibv_post_send(a, &sw, &bad) == EINVAL);
  CHECK(bad == &sw);
  ibv_destroy_qp(a);
  ibv_destroy_qp(b);
  ibv_dereg_mr(mr);
  ibv_destroy_cq(cq);
  ibv_dealloc_pd(pd);
}

TEST_CASE("the GID table: GID 0 IPv4-mapped, GID 1 the configured IPv6 address, both RoCE v2") {
  device d;
  ibv_port_attr pa{};
  REQUIRE(ibv_query_port(d.ctx, 1, &pa) == 0);
  ibv_gid_entry e[4]{};
  const ssize_t n = ibv_query_gid_table(d.ctx, e, 4, 0);
  REQUIRE(n == pa.gid_tbl_len);
  CHECK(e[0].gid.raw[10] == 0xFF);
  CHECK(e[0].gid.raw[11] == 0xFF);
  CHECK(e[0].gid_type == IBV_GID_TYPE_ROCE_V2);
  if (std::getenv("PUSHWIRE_VERBS") && std::strchr(std::getenv("PUSHWIRE_VERBS"), '@')) {
    REQUIRE(n == 2);
    CHECK(e[1].gid.raw[15] == 1);  // ::1
    CHECK(e[1].gid_type == IBV_GID_TYPE_ROCE_V2);
    CHECK(e[1].gid_index == 1);
  } else {
    CHECK(n == 1);
  }
  ibv_gid g{};
  CHECK(ibv_query_gid(d.ctx, 1, static_cast<int>(n), &g) != 0);
  CHECK(ibv_resize_cq(nullptr, 4) == EINVAL);
}
