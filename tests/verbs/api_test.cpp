// The provider through libibverbs' own API (spec/verbs.md §3), for what rdma-core's tests do
// not check: a parent domain's allocators really give the queues' memory (and get it back),
// inline sends beyond the descriptor's 64 bytes arrive intact, the GID table, and dma-buf MRs
// (a memfd, and a udmabuf where /dev/udmabuf exists), checked through the file. Linked with
// libibverbs and run under the provider (LD_PRELOAD), as any verbs program.
#include <arpa/inet.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <linux/udmabuf.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "rc_connect.hpp"
#include "../../verbs/pushwire-dv.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <string_view>
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

/// Two RC QPs of one device connected to each other, on one CQ (torn down in order at the end).
struct rc_loop {
  device d;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_qp *a = nullptr, *b = nullptr;
  ibv_qp_init_attr attr{};
  explicit rc_loop(std::uint32_t max_inline) {
    pd = ibv_alloc_pd(d.ctx);
    REQUIRE(pd);
    cq = ibv_create_cq(d.ctx, 64, nullptr, nullptr, 0);
    REQUIRE(cq);
    attr.send_cq = attr.recv_cq = cq;
    attr.qp_type = IBV_QPT_RC;
    attr.cap = {16, 16, 1, 1, max_inline};
    a = ibv_create_qp(pd, &attr);
    b = ibv_create_qp(pd, &attr);
    REQUIRE(a);
    REQUIRE(b);
    REQUIRE(pushwire::test::connect_rc(a, b, d.ctx));
  }
  ~rc_loop() {
    ibv_destroy_qp(a);
    ibv_destroy_qp(b);
    ibv_destroy_cq(cq);
    ibv_dealloc_pd(pd);
  }
};

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
  rc_loop q(256);
  ibv_pd* pd = q.pd;
  ibv_cq* cq = q.cq;
  ibv_qp *a = q.a, *b = q.b;
  CHECK(q.attr.cap.max_inline_data >= 256);
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
  ibv_dereg_mr(mr);
}

TEST_CASE("ports and GID tables: per port GID 0 IPv4-mapped and GID 1 the configured IPv6 address, RoCE v2, P_Key 0xFFFF") {
  // PUSHWIRE_API_GIDS: the GIDs each port must have, from the test's device list ("1": one port
  // with GID 0 only, the default; "2": GID 0 and an IPv6 GID; "1,1": two ports)
  const char* want = std::getenv("PUSHWIRE_API_GIDS");
  std::vector<int> gids;
  for (const char* c = want ? want : "1"; *c; ++c)
    if (*c >= '1' && *c <= '9') gids.push_back(*c - '0');
  device d;
  ibv_device_attr da{};
  REQUIRE(ibv_query_device(d.ctx, &da) == 0);
  REQUIRE(da.phys_port_cnt == gids.size());
  ibv_gid_entry e[8]{};
  const ssize_t n = ibv_query_gid_table(d.ctx, e, 8, 0);
  ssize_t k = 0;
  for (std::uint8_t port = 1; port <= da.phys_port_cnt; ++port) {
    INFO("port " << int(port));
    ibv_port_attr pa{};
    REQUIRE(ibv_query_port(d.ctx, port, &pa) == 0);
    REQUIRE(pa.gid_tbl_len == gids[port - 1u]);
    for (int i = 0; i < pa.gid_tbl_len; ++i, ++k) {
      REQUIRE(k < n);
      CHECK(e[k].port_num == port);
      CHECK(e[k].gid_index == static_cast<std::uint32_t>(i));
      CHECK(e[k].gid_type == IBV_GID_TYPE_ROCE_V2);
      const bool mapped = e[k].gid.raw[10] == 0xFF && e[k].gid.raw[11] == 0xFF;
      CHECK(mapped == (i == 0));  // GID 0 IPv4-mapped, GID 1 IPv6
      ibv_gid g{};
      REQUIRE(ibv_query_gid(d.ctx, port, i, &g) == 0);
      CHECK(std::memcmp(g.raw, e[k].gid.raw, 16) == 0);
    }
    ibv_gid g{};
    CHECK(ibv_query_gid(d.ctx, port, pa.gid_tbl_len, &g) != 0);
    __be16 pkey = 0;
    CHECK(ibv_query_pkey(d.ctx, port, 0, &pkey) == 0);
    CHECK(ntohs(pkey) == 0xFFFF);
    CHECK(ibv_get_pkey_index(d.ctx, port, htons(0xFFFF)) == 0);
  }
  CHECK(n == k);
  ibv_port_attr pa{};
  CHECK(ibv_query_port(d.ctx, static_cast<std::uint8_t>(da.phys_port_cnt + 1), &pa) != 0);
  CHECK(ibv_get_pkey_index(d.ctx, static_cast<std::uint8_t>(da.phys_port_cnt + 1), htons(0xFFFF)) < 0);
  CHECK(ibv_resize_cq(nullptr, 4) == EINVAL);
  if (da.phys_port_cnt < 2) return;
  // an RC QP on port 2: its port before it has a path, and a path that names another port
  ibv_pd* pd = ibv_alloc_pd(d.ctx);
  ibv_cq* cq = ibv_create_cq(d.ctx, 8, nullptr, nullptr, 0);
  ibv_qp_init_attr qi{};
  qi.send_cq = qi.recv_cq = cq;
  qi.qp_type = IBV_QPT_RC;
  qi.cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1, .max_inline_data = 0};
  ibv_qp* qp = ibv_create_qp(pd, &qi);
  REQUIRE(qp);
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 2;
  REQUIRE(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0);
  ibv_qp_init_attr ia{};
  REQUIRE(ibv_query_qp(qp, &a, IBV_QP_PORT, &ia) == 0);
  CHECK(a.port_num == 2);
  ibv_gid peer{};
  REQUIRE(ibv_query_gid(d.ctx, 1, 0, &peer) == 0);
  a = {};
  a.qp_state = IBV_QPS_RTR;
  a.port_num = 1;
  a.path_mtu = IBV_MTU_1024;
  a.ah_attr.is_global = 1;
  a.ah_attr.port_num = 2;  // not the port given in the same call
  a.ah_attr.grh.dgid = peer;
  const int mask = IBV_QP_STATE | IBV_QP_PORT | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
                   IBV_QP_MIN_RNR_TIMER;
  CHECK(ibv_modify_qp(qp, &a, mask) == EINVAL);
  a.ah_attr.port_num = 0;  // the QP's port (2)
  REQUIRE(ibv_modify_qp(qp, &a, mask & ~IBV_QP_PORT) == 0);
  REQUIRE(ibv_query_qp(qp, &a, IBV_QP_PORT | IBV_QP_AV, &ia) == 0);
  CHECK(a.port_num == 2);
  CHECK(a.ah_attr.port_num == 2);
  a = {};
  a.alt_port_num = 1;
  a.alt_ah_attr.is_global = 1;
  a.alt_ah_attr.port_num = 2;  // not alt_port_num
  a.alt_ah_attr.grh.dgid = peer;
  CHECK(ibv_modify_qp(qp, &a, IBV_QP_ALT_PATH) == EINVAL);
  a.alt_port_num = 3;  // no such port
  a.alt_ah_attr.port_num = 0;
  CHECK(ibv_modify_qp(qp, &a, IBV_QP_ALT_PATH) == EINVAL);
  CHECK(ibv_destroy_qp(qp) == 0);
  CHECK(ibv_destroy_cq(cq) == 0);
  CHECK(ibv_dealloc_pd(pd) == 0);
}

namespace {

/// A sealed memfd of `size` bytes (F_SEAL_SHRINK, as udmabuf wants), or -1.
int sealed_memfd(std::size_t size) {
  const int fd = memfd_create("pushwire-card", MFD_ALLOW_SEALING | MFD_CLOEXEC);
  if (fd < 0) return -1;
  if (ftruncate(fd, static_cast<off_t>(size)) != 0 || fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

/// Posts one signaled work request on a and waits for it (and for b's receive when a SEND).
void post_one(ibv_qp* a, ibv_cq* cq, ibv_send_wr& w, int completions, ibv_wc_status want) {
  ibv_send_wr* bad = nullptr;
  REQUIRE(ibv_post_send(a, &w, &bad) == 0);
  const auto wcs = poll_n(cq, completions);
  REQUIRE(static_cast<int>(wcs.size()) == completions);
  CHECK(wcs[0].status == want);
}

/// RDMA WRITE into, and SEND gathered from, a dma-buf MR over `fd` (bytes [offset, offset +
/// len)); every byte checked through `file` (the memfd behind it), and the bytes around the
/// range unchanged.
void dmabuf_traffic(int fd, int file, std::size_t file_size) {
  rc_loop q(0);
  ibv_pd* pd = q.pd;
  ibv_cq* cq = q.cq;
  ibv_qp *a = q.a, *b = q.b;
  const std::uint64_t offset = 4096 + 100, iova = 0x7000'0000'0000 + 100;
  const std::size_t len = 5000;
  std::vector<std::uint8_t> before(file_size, 0xA5);
  REQUIRE(pwrite(file, before.data(), before.size(), 0) == static_cast<ssize_t>(before.size()));

  // Refused: other access flags, a length of 0, iova's page offset not offset's, past the end, not a buffer.
  errno = 0;
  CHECK(ibv_reg_dmabuf_mr(pd, offset, len, iova, fd, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND) == nullptr);
  CHECK(errno == EINVAL);
  CHECK(ibv_reg_dmabuf_mr(pd, offset, len, iova, fd, IBV_ACCESS_REMOTE_WRITE) == nullptr);  // without local write
  CHECK(errno == EINVAL);
  CHECK(ibv_reg_dmabuf_mr(pd, offset, 0, iova, fd, IBV_ACCESS_LOCAL_WRITE) == nullptr);
  CHECK(errno == EINVAL);
  CHECK(ibv_reg_dmabuf_mr(pd, offset, len, iova + 1, fd, IBV_ACCESS_LOCAL_WRITE) == nullptr);
  CHECK(errno == EINVAL);
  CHECK(ibv_reg_dmabuf_mr(pd, offset, file_size - offset + 1, iova, fd, IBV_ACCESS_LOCAL_WRITE) == nullptr);
  CHECK(errno == EINVAL);
  CHECK(ibv_reg_dmabuf_mr(pd, offset, len, iova, -1, IBV_ACCESS_LOCAL_WRITE) == nullptr);
  CHECK(errno == EBADF);
  int p[2];
  REQUIRE(pipe(p) == 0);
  CHECK(ibv_reg_dmabuf_mr(pd, 0, 1, 0, p[0], IBV_ACCESS_LOCAL_WRITE) == nullptr);
  CHECK(errno == EINVAL);
  close(p[0]), close(p[1]);

  ibv_mr* card = ibv_reg_dmabuf_mr(pd, offset, len, iova, fd, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  REQUIRE(card);
  CHECK(reinterpret_cast<std::uintptr_t>(card->addr) == offset);
  CHECK(card->length == len);
  CHECK(ibv_rereg_mr(card, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0, IBV_ACCESS_LOCAL_WRITE) == IBV_REREG_MR_ERR_INPUT);
  std::vector<std::uint8_t> host(len), sink(len + 16, 0);
  for (std::size_t i = 0; i < len; ++i) host[i] = static_cast<std::uint8_t>(i * 13 + 1);
  ibv_mr* hm = ibv_reg_mr(pd, host.data(), host.size(), IBV_ACCESS_LOCAL_WRITE);
  ibv_mr* sm = ibv_reg_mr(pd, sink.data(), sink.size(), IBV_ACCESS_LOCAL_WRITE);
  REQUIRE(hm);
  REQUIRE(sm);

  // host memory -> card: RDMA WRITE at the card's iova
  ibv_sge s{reinterpret_cast<std::uintptr_t>(host.data()), static_cast<std::uint32_t>(len), hm->lkey};
  ibv_send_wr w{};
  w.sg_list = &s;
  w.num_sge = 1;
  w.opcode = IBV_WR_RDMA_WRITE;
  w.send_flags = IBV_SEND_SIGNALED;
  w.wr.rdma.remote_addr = iova;
  w.wr.rdma.rkey = card->rkey;
  post_one(a, cq, w, 1, IBV_WC_SUCCESS);
  std::vector<std::uint8_t> now(file_size);
  REQUIRE(pread(file, now.data(), now.size(), 0) == static_cast<ssize_t>(now.size()));
  CHECK(std::equal(host.begin(), host.end(), now.begin() + static_cast<std::ptrdiff_t>(offset)));
  CHECK(std::all_of(now.begin(), now.begin() + static_cast<std::ptrdiff_t>(offset), [](std::uint8_t x) { return x == 0xA5; }));
  CHECK(std::all_of(now.begin() + static_cast<std::ptrdiff_t>(offset + len), now.end(), [](std::uint8_t x) { return x == 0xA5; }));

  // card -> host memory: a SEND gathered from the card (lkey at iova), after the file changed
  std::vector<std::uint8_t> card_bytes(len);
  for (std::size_t i = 0; i < len; ++i) card_bytes[i] = static_cast<std::uint8_t>(255 - i % 251);
  REQUIRE(pwrite(file, card_bytes.data(), len, static_cast<off_t>(offset)) == static_cast<ssize_t>(len));
  ibv_sge rs{reinterpret_cast<std::uintptr_t>(sink.data()), static_cast<std::uint32_t>(sink.size()), sm->lkey};
  ibv_recv_wr rw{};
  rw.sg_list = &rs;
  rw.num_sge = 1;
  ibv_recv_wr* bad_r = nullptr;
  REQUIRE(ibv_post_recv(b, &rw, &bad_r) == 0);
  ibv_sge cs{iova, static_cast<std::uint32_t>(len), card->lkey};
  ibv_send_wr sw{};
  sw.sg_list = &cs;
  sw.num_sge = 1;
  sw.opcode = IBV_WR_SEND;
  sw.send_flags = IBV_SEND_SIGNALED;
  post_one(a, cq, sw, 2, IBV_WC_SUCCESS);
  CHECK(std::equal(card_bytes.begin(), card_bytes.end(), sink.begin()));

  // A card MR without remote write: a WRITE into it fails as for any MR.
  ibv_mr* ro = ibv_reg_dmabuf_mr(pd, offset, len, iova, fd, IBV_ACCESS_LOCAL_WRITE);
  REQUIRE(ro);
  w.wr.rdma.rkey = ro->rkey;
  w.send_flags = IBV_SEND_SIGNALED;
  post_one(a, cq, w, 1, IBV_WC_REM_ACCESS_ERR);
  REQUIRE(pread(file, now.data(), len, static_cast<off_t>(offset)) == static_cast<ssize_t>(len));
  CHECK(std::equal(card_bytes.begin(), card_bytes.end(), now.begin()));

  CHECK(ibv_dereg_mr(ro) == 0);
  CHECK(ibv_dereg_mr(card) == 0);
  CHECK(ibv_dereg_mr(hm) == 0);
  CHECK(ibv_dereg_mr(sm) == 0);
}

}  // namespace

TEST_CASE("dma-buf MRs: a memfd, and a udmabuf where /dev/udmabuf exists, written and read through the file byte for byte") {
  constexpr std::size_t size = 4 * 4096;
  const int memfd = sealed_memfd(size);
  REQUIRE(memfd >= 0);
  SECTION("a memfd") { dmabuf_traffic(memfd, memfd, size); }
  SECTION("a udmabuf over the memfd") {
    const int dev = open("/dev/udmabuf", O_RDWR | O_CLOEXEC);
    if (dev < 0) {
      WARN("no /dev/udmabuf here (CONFIG_UDMABUF): the memfd case only");
    } else {
      udmabuf_create c{};
      c.memfd = static_cast<std::uint32_t>(memfd);
      c.flags = UDMABUF_FLAGS_CLOEXEC;
      c.offset = 0;
      c.size = size;
      const int buf = ioctl(dev, UDMABUF_CREATE, &c);
      close(dev);
      REQUIRE(buf >= 0);
      // written through the dma-buf's mapping, read through the memfd behind it
      dmabuf_traffic(buf, memfd, size);
      close(buf);
    }
  }
  close(memfd);
}

namespace {

/// Where a transfer's bytes are: host memory, or card 0 or 1.
enum class place { host = -1, card0 = 0, card1 = 1 };

}  // namespace

// Run with PUSHWIRE_VERBS_PLATFORM="sockets=2 hca=0 card=0 card=1 threshold=65536" (tests/CMakeLists.txt):
// card 0 is on the HCA's socket, card 1 on the other.
TEST_CASE("card memory: every combination of host, local card and remote card moves byte-exact by WRITE, SEND and READ, by the datapath the policy gives", "[.cards]") {
  const auto query = reinterpret_cast<pwdv_query_datapaths_fn>(dlsym(RTLD_DEFAULT, "pwdv_query_datapaths"));
  const auto card_buffer = reinterpret_cast<pwdv_card_buffer_fn>(dlsym(RTLD_DEFAULT, "pwdv_card_buffer"));
  REQUIRE(query);
  REQUIRE(card_buffer);
  constexpr std::size_t size = 1 << 20;
  constexpr std::uint64_t threshold = 65536;
  rc_loop q(0);
  for (ibv_qp* qp : {q.a, q.b}) {  // READ needs remote read
    ibv_qp_attr at{};
    at.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    REQUIRE(ibv_modify_qp(qp, &at, IBV_QP_ACCESS_FLAGS) == 0);
  }
  constexpr int all = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  // The cards' memory (udmabufs, or memfds where /dev/udmabuf is absent), read and written by
  // the test through mappings of its own.
  int fds[2];
  std::uint8_t* view[2];
  for (unsigned c = 0; c < 2; ++c) {
    fds[c] = card_buffer(c, size);
    REQUIRE(fds[c] >= 0);
    void* m = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fds[c], 0);
    REQUIRE(m != MAP_FAILED);
    view[c] = static_cast<std::uint8_t*>(m);
  }
  {
    char link[64] = {};
    REQUIRE(readlink(("/proc/self/fd/" + std::to_string(fds[0])).c_str(), link, sizeof link - 1) > 0);
    if (std::string_view(link).starts_with("/memfd:")) WARN("no /dev/udmabuf here (CONFIG_UDMABUF): cards are memfds");
    CHECK((std::string_view(link) == "/memfd:pushwire-card0 (deleted)" || std::string_view(link) == "/dmabuf:pushwire-card0"));
  }
  errno = 0;
  CHECK(card_buffer(256, 4096) == -1);
  CHECK(errno == EINVAL);
  CHECK(card_buffer(0, 0) == -1);
  const std::uint64_t iova[2] = {0x5000'0000'0000, 0x5100'0000'0000};
  ibv_mr* cmr[2];
  for (int c = 0; c < 2; ++c) {
    cmr[c] = ibv_reg_dmabuf_mr(q.pd, 0, size, iova[c], fds[c], all);
    REQUIRE(cmr[c]);
  }
  std::vector<std::uint8_t> host(size);
  ibv_mr* hmr = ibv_reg_mr(q.pd, host.data(), host.size(), all);
  REQUIRE(hmr);
  {  // a card the platform does not have
    const int five = card_buffer(5, 4096);
    REQUIRE(five >= 0);
    errno = 0;
    CHECK(ibv_reg_dmabuf_mr(q.pd, 0, 4096, 0, five, all) == nullptr);
    CHECK(errno == EINVAL);
    close(five);
  }

  // The seed's policy, by hand: into a local card P2P, into a remote one proxied; out of a
  // remote card proxied, out of a local one P2P below the threshold and proxied at or above it.
  const auto expected = [&](place p, int dir, std::uint64_t len) {
    if (p == place::card1) return PWDV_PATH_PROXIED;
    if (dir == PWDV_INBOUND) return PWDV_PATH_P2P;
    return len < threshold ? PWDV_PATH_P2P : PWDV_PATH_PROXIED;
  };
  const auto addr = [&](place p, std::size_t off) -> std::uint64_t {
    return p == place::host ? reinterpret_cast<std::uintptr_t>(host.data() + off) : iova[static_cast<int>(p)] + off;
  };
  const auto key = [&](place p) { return p == place::host ? hmr->lkey : cmr[static_cast<int>(p)]->lkey; };
  const auto put = [&](place p, std::size_t off, const std::vector<std::uint8_t>& v) {
    if (p == place::host) std::copy(v.begin(), v.end(), host.begin() + static_cast<std::ptrdiff_t>(off));
    else std::copy(v.begin(), v.end(), view[static_cast<int>(p)] + off);
  };
  const auto get = [&](place p, std::size_t off, std::size_t n) {
    std::vector<std::uint8_t> v(n);
    if (p == place::host) std::copy_n(host.begin() + static_cast<std::ptrdiff_t>(off), n, v.begin());
    else std::copy_n(view[static_cast<int>(p)] + off, n, v.begin());
    return v;
  };

  const place places[] = {place::host, place::card0, place::card1};
  const char* names[] = {"host", "local card", "remote card"};
  int checked = 0;
  for (place src : places)
    for (place dst : places) {
      if (src == place::host && dst == place::host) continue;
      for (ibv_wr_opcode op : {IBV_WR_RDMA_WRITE, IBV_WR_SEND, IBV_WR_RDMA_READ})
        for (std::size_t len : {std::size_t{4096}, std::size_t{256} << 10}) {
          INFO(names[static_cast<int>(src) + 1] << " -> " << names[static_cast<int>(dst) + 1] << ", opcode " << op << ", " << len << " bytes");
          // Source and destination halves of the 1 MiB, off page boundaries; 64 guard bytes either side.
          const std::size_t so = 1000, dof = (size / 2) + 3000;
          std::vector<std::uint8_t> data(len), fill(len + 128, 0xEE);
          for (std::size_t i = 0; i < len; ++i) data[i] = static_cast<std::uint8_t>((i * 31 + static_cast<std::size_t>(op) * 7 + len) >> 3);
          put(src, so, data);
          put(dst, dof - 64, fill);
          pwdv_path_counters before[3][2], after[3][2];
          REQUIRE(query(q.d.ctx, before) == 0);

          ibv_sge s{addr(src, so), static_cast<std::uint32_t>(len), key(src)};
          ibv_sge d{addr(dst, dof), static_cast<std::uint32_t>(len), key(dst)};
          ibv_send_wr w{};
          w.opcode = op;
          w.send_flags = IBV_SEND_SIGNALED;
          w.num_sge = 1;
          int completions = 1;
          if (op == IBV_WR_RDMA_READ) {  // a reads the source (b's memory, say) into the destination
            w.sg_list = &d;
            w.wr.rdma.remote_addr = s.addr;
            w.wr.rdma.rkey = s.lkey;  // (lkey = rkey here)
          } else if (op == IBV_WR_RDMA_WRITE) {
            w.sg_list = &s;
            w.wr.rdma.remote_addr = d.addr;
            w.wr.rdma.rkey = d.lkey;
          } else {
            w.sg_list = &s;
            ibv_recv_wr rw{};
            rw.sg_list = &d;
            rw.num_sge = 1;
            ibv_recv_wr* bad_r = nullptr;
            REQUIRE(ibv_post_recv(q.b, &rw, &bad_r) == 0);
            completions = 2;
          }
          post_one(q.a, q.cq, w, completions, IBV_WC_SUCCESS);
          const auto now = get(dst, dof - 64, len + 128);
          CHECK(std::equal(data.begin(), data.end(), now.begin() + 64));
          CHECK(std::all_of(now.begin(), now.begin() + 64, [](std::uint8_t x) { return x == 0xEE; }));
          CHECK(std::all_of(now.end() - 64, now.end(), [](std::uint8_t x) { return x == 0xEE; }));

          REQUIRE(query(q.d.ctx, after) == 0);
          std::uint64_t want_transfers[3][2] = {}, want_bytes[3][2] = {};
          if (src != place::host) ++want_transfers[expected(src, PWDV_OUTBOUND, len)][PWDV_OUTBOUND], want_bytes[expected(src, PWDV_OUTBOUND, len)][PWDV_OUTBOUND] += len;
          if (dst != place::host) ++want_transfers[expected(dst, PWDV_INBOUND, len)][PWDV_INBOUND], want_bytes[expected(dst, PWDV_INBOUND, len)][PWDV_INBOUND] += len;
          for (int p = 0; p < 3; ++p)
            for (int dir = 0; dir < 2; ++dir) {
              INFO("path " << p << ", direction " << dir);
              CHECK(after[p][dir].transfers - before[p][dir].transfers == want_transfers[p][dir]);
              CHECK(after[p][dir].bytes - before[p][dir].bytes == want_bytes[p][dir]);
              CHECK((after[p][dir].modelled_ns > before[p][dir].modelled_ns) == (want_transfers[p][dir] != 0));
            }
          ++checked;
        }
    }
  CHECK(checked == 8 * 3 * 2);
  for (ibv_mr* m : {cmr[0], cmr[1], hmr}) CHECK(ibv_dereg_mr(m) == 0);
  for (int c = 0; c < 2; ++c) {
    munmap(view[c], size);
    close(fds[c]);
  }
}
