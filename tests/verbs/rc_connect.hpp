// Two RC QPs of one device connected to each other through its GID 0 (RESET to RTS), for the
// tests that drive the provider through libibverbs' API: tests/verbs/api_test.cpp and
// tests/verbs/rnicd_client.cpp.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <utility>

namespace pushwire::test {

/// False when a step fails (errno as the verb left it). timeout: the local ACK timeout exponent.
inline bool connect_rc(ibv_qp* a, ibv_qp* b, ibv_context* ctx, std::uint8_t timeout = 14) {
  ibv_gid gid{};
  if (ibv_query_gid(ctx, 1, 0, &gid)) return false;
  for (auto [q, peer] : {std::pair{a, b}, std::pair{b, a}}) {
    ibv_qp_attr at{};
    at.qp_state = IBV_QPS_INIT;
    at.port_num = 1;
    at.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
    if (ibv_modify_qp(q, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) return false;
    at = {};
    at.qp_state = IBV_QPS_RTR;
    at.path_mtu = IBV_MTU_1024;
    at.dest_qp_num = peer->qp_num;
    at.max_dest_rd_atomic = 1;
    at.min_rnr_timer = 1;
    at.ah_attr.is_global = 1;
    at.ah_attr.grh.dgid = gid;
    at.ah_attr.grh.hop_limit = 64;
    at.ah_attr.port_num = 1;
    if (ibv_modify_qp(q, &at, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
                                  IBV_QP_MIN_RNR_TIMER))
      return false;
    at = {};
    at.qp_state = IBV_QPS_RTS;
    at.timeout = timeout;
    at.retry_cnt = 7;
    at.rnr_retry = 7;
    at.max_rd_atomic = 1;
    if (ibv_modify_qp(q, &at, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
      return false;
  }
  return true;
}

}  // namespace pushwire::test
