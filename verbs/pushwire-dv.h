/* pushwire's direct verbs: what libpushwire-verbs.so offers beyond libibverbs' API
   (spec/verbs.md §3), as mlx5dv does for mlx5. A program preloaded with the provider finds the
   functions with dlsym(RTLD_DEFAULT, name); without the provider the lookup yields NULL. */
#ifndef PUSHWIRE_DV_H
#define PUSHWIRE_DV_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct ibv_context;

/* DMA between card memory and a device by one datapath, one way (rnic::path_counters). */
struct pwdv_path_counters {
  uint64_t transfers;  /* one message's part of one card buffer each */
  uint64_t bytes;
  double modelled_ns;  /* the platform's modelled time of those transfers, in ns */
};

enum { PWDV_PATH_HOST = 0, PWDV_PATH_P2P = 1, PWDV_PATH_PROXIED = 2 };
enum { PWDV_INBOUND = 0, PWDV_OUTBOUND = 1 };

/* The device's counters of card-memory DMA since it was opened, by datapath and direction
   (counters[PWDV_PATH_P2P][PWDV_OUTBOUND], ...); host memory is not counted, so row
   PWDV_PATH_HOST stays 0. Returns 0, or EINVAL when ctx or counters is NULL. */
int pwdv_query_datapaths(struct ibv_context* ctx, struct pwdv_path_counters counters[3][2]);
typedef int (*pwdv_query_datapaths_fn)(struct ibv_context*, struct pwdv_path_counters[3][2]);

/* A new buffer of card `card`'s memory (0 .. 255) of `bytes`, rounded up to whole pages and
   zeroed, for ibv_reg_dmabuf_mr: a udmabuf named pushwire-cardN where /dev/udmabuf makes one, a
   memfd of that name otherwise. The caller owns the fd; it maps with mmap(MAP_SHARED). Returns
   -1 and errno on failure (EINVAL: card past 255, bytes 0). */
int pwdv_card_buffer(unsigned card, size_t bytes);
typedef int (*pwdv_card_buffer_fn)(unsigned, size_t);

#ifdef __cplusplus
}
#endif
#endif
