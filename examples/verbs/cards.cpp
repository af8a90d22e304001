// Card memory through unmodified verbs calls (seed 000's P2P and proxied datapaths; spec/rnic.md
// §15, spec/verbs.md §3). Run under the provider with a platform of two sockets, a card on each:
//
//   PUSHWIRE_VERBS_PLATFORM="sockets=2 hca=0 card=0 card=1" pushwire-verbs run -- pushwire-cards
//
// Two RC QPs of one device, connected to each other; 4 KiB and 1 MiB RDMA WRITEs from host memory
// into each card, and from each card into host memory, the same ibv_post_send every time. It
// prints, per transfer, the path the device took (pwdv_query_datapaths) and its modelled time,
// and checks every byte.
#include <dlfcn.h>
#include <infiniband/verbs.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "../../tests/verbs/rc_connect.hpp"
#include "../../verbs/pushwire-dv.h"

namespace {

int fail(const char* what) {
  std::fprintf(stderr, "pushwire-cards: %s: %s\n", what, std::strerror(errno));
  return 1;
}

}  // namespace

int main() {
  const auto query = reinterpret_cast<pwdv_query_datapaths_fn>(dlsym(RTLD_DEFAULT, "pwdv_query_datapaths"));
  const auto card_buffer = reinterpret_cast<pwdv_card_buffer_fn>(dlsym(RTLD_DEFAULT, "pwdv_card_buffer"));
  if (!query || !card_buffer) {
    std::fprintf(stderr, "pushwire-cards: run it under libpushwire-verbs.so (pushwire-verbs run -- pushwire-cards)\n");
    return 1;
  }
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list || n < 1) return fail("no device");
  ibv_context* ctx = ibv_open_device(list[0]);
  ibv_free_device_list(list);
  if (!ctx) return fail("ibv_open_device");
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ibv_cq* cq = pd ? ibv_create_cq(ctx, 16, nullptr, nullptr, 0) : nullptr;
  if (!cq) return fail("PD or CQ");
  ibv_qp_init_attr attr{};
  attr.send_cq = attr.recv_cq = cq;
  attr.qp_type = IBV_QPT_RC;
  attr.cap = {4, 4, 1, 1, 0};
  ibv_qp* a = ibv_create_qp(pd, &attr);
  ibv_qp* b = ibv_create_qp(pd, &attr);
  if (!a || !b || !pushwire::test::connect_rc(a, b, ctx)) return fail("RC QPs");

  constexpr std::size_t size = 1 << 20;
  constexpr int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  std::vector<std::uint8_t> host(size);
  ibv_mr* hmr = ibv_reg_mr(pd, host.data(), size, access);
  if (!hmr) return fail("ibv_reg_mr");
  std::uint8_t* view[2];
  ibv_mr* cmr[2];
  const std::uint64_t iova[2] = {0x5000'0000'0000, 0x5100'0000'0000};
  for (unsigned c = 0; c < 2; ++c) {
    const int fd = card_buffer(c, size);  // a udmabuf named pushwire-cardN, or such a memfd
    if (fd < 0) return fail("pwdv_card_buffer");
    void* m = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) return fail("mmap");
    view[c] = static_cast<std::uint8_t*>(m);
    cmr[c] = ibv_reg_dmabuf_mr(pd, 0, size, iova[c], fd, access);
    if (!cmr[c]) return fail("ibv_reg_dmabuf_mr (is PUSHWIRE_VERBS_PLATFORM set?)");
    close(fd);
  }

  std::printf("%-30s %9s  %-24s %12s\n", "transfer", "bytes", "paths", "modelled");
  static const char* path[] = {"host", "p2p", "proxied"};
  static const char* dir[] = {"in", "out"};
  bool all_good = true;
  for (unsigned c = 0; c < 2; ++c)
    for (bool to_card : {true, false})
      for (std::size_t len : {std::size_t{4096}, size}) {
        std::uint8_t* src = to_card ? host.data() : view[c];
        std::uint8_t* dst = to_card ? view[c] : host.data();
        for (std::size_t i = 0; i < len; ++i) src[i] = static_cast<std::uint8_t>(i * 7 + c + len);
        std::memset(dst, 0, len);
        ibv_sge s{to_card ? reinterpret_cast<std::uintptr_t>(host.data()) : iova[c], static_cast<std::uint32_t>(len),
                  to_card ? hmr->lkey : cmr[c]->lkey};
        ibv_send_wr w{};
        w.sg_list = &s;
        w.num_sge = 1;
        w.opcode = IBV_WR_RDMA_WRITE;
        w.send_flags = IBV_SEND_SIGNALED;
        w.wr.rdma.remote_addr = to_card ? iova[c] : reinterpret_cast<std::uintptr_t>(host.data());
        w.wr.rdma.rkey = to_card ? cmr[c]->rkey : hmr->rkey;
        pwdv_path_counters before[3][2], after[3][2];
        query(ctx, before);
        ibv_send_wr* bad = nullptr;
        if (ibv_post_send(a, &w, &bad)) return fail("ibv_post_send");
        ibv_wc wc{};
        while (ibv_poll_cq(cq, 1, &wc) == 0) {
        }
        query(ctx, after);
        const bool good = wc.status == IBV_WC_SUCCESS && std::memcmp(src, dst, len) == 0;
        all_good = all_good && good;
        char what[64], paths[64] = "";
        std::snprintf(what, sizeof what, to_card ? "host -> card %u (%s)" : "card %u (%s) -> host", c, c == 0 ? "HCA's socket" : "other socket");
        double ns = 0;
        for (int p = 0; p < 3; ++p)
          for (int d = 0; d < 2; ++d)
            if (after[p][d].transfers != before[p][d].transfers) {
              std::snprintf(paths + std::strlen(paths), sizeof paths - std::strlen(paths), "%s%s %s", *paths ? ", " : "", path[p], dir[d]);
              ns += after[p][d].modelled_ns - before[p][d].modelled_ns;
            }
        std::printf("%-30s %9zu  %-24s %9.1f us%s\n", what, len, paths, ns / 1000, good ? "" : "  BYTES DIFFER");
      }
  for (ibv_mr* m : {cmr[0], cmr[1], hmr}) ibv_dereg_mr(m);
  ibv_destroy_qp(a);
  ibv_destroy_qp(b);
  ibv_destroy_cq(cq);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  std::printf(all_good ? "every byte arrived\n" : "some bytes differ\n");
  return all_good ? 0 : 1;
}
