// Bringing a queue pair from RESET to RTS (a DCT: to RTR) with the attributes each transition of
// ibv_modify_qp requires (qp.hpp's transition rules): what every verbs program writes once.
// Used by pp/, the tools and the tests; the values are the caller's (connect_attr).
#pragma once

#include <cstdint>

#include <pushwire/rnic/device.hpp>

namespace pushwire::rnic {

/// What connecting one QP needs besides its type (the device knows it).
struct connect_attr {
  qp_type type = qp_type::rc;
  std::uint32_t peer_qpn = 0;  ///< RC, UC: the remote QP (24 bits)
  address_vector av{};         ///< RC, UC: the remote port
  std::uint32_t mtu = 1024;    ///< path MTU, bytes: 256..4096
  std::uint32_t psn_out = 0, psn_in = 0;  ///< first PSN sent / expected (24 bits)
  std::uint8_t timeout = 8;          ///< local ACK timeout code: 4.096 us * 2^timeout (8: 1 ms)
  std::uint8_t retry_cnt = 7;        ///< 0..7
  std::uint8_t rnr_retry = 7;        ///< 0..7 (7: infinite)
  std::uint8_t min_rnr_timer = 1;    ///< IBTA RNR timer code (1: 0.01 ms)
  std::uint32_t qkey = 0x11111111;   ///< UD
  access remote = access::remote_write | access::remote_read | access::remote_atomic;  ///< RC, UC, DCT
};

/// The destination of a device's port (its MAC and GID).
inline address_vector address_of(const device& d, std::size_t port = 0) {
  const port_config& p = d.config().ports[port];
  return {.port = static_cast<std::uint8_t>(port), .dmac = p.mac, .dgid = p.gid};
}

/// RESET -> INIT -> RTR -> RTS (a DCT stops at RTR). The first failing modify_qp's error.
inline errc bring_up(device& d, std::uint32_t qpn, const connect_attr& c) {
  using M = qp_attr_mask;
  const qp_type t = c.type;
  qp_attr a{};
  a.state = qp_state::init;
  a.port = c.av.port;
  a.access_flags = c.remote;
  a.qkey = c.qkey;
  M m = M::state | M::pkey_index | M::port;
  if (t == qp_type::ud) m = m | M::qkey;
  else if (t != qp_type::dci) m = m | M::access_flags;
  if (errc e = d.modify_qp(qpn, a, m); e != errc{}) return e;
  a.state = qp_state::rtr;
  a.av = c.av;
  a.path_mtu = c.mtu;
  a.dest_qp_num = c.peer_qpn;
  a.rq_psn = c.psn_in;
  a.max_dest_rd_atomic = max_rd_atomic;
  a.min_rnr_timer = c.min_rnr_timer;
  switch (t) {
    case qp_type::rc: m = M::state | M::av | M::path_mtu | M::dest_qpn | M::rq_psn | M::max_dest_rd_atomic | M::min_rnr_timer; break;
    case qp_type::uc: m = M::state | M::av | M::path_mtu | M::dest_qpn | M::rq_psn; break;
    case qp_type::ud: m = M::state; break;
    case qp_type::dci: m = M::state | M::path_mtu; break;
    case qp_type::dct: m = M::state | M::path_mtu | M::min_rnr_timer; break;
  }
  if (errc e = d.modify_qp(qpn, a, m); e != errc{}) return e;
  if (t == qp_type::dct) return {};
  a.state = qp_state::rts;
  a.sq_psn = c.psn_out;
  a.timeout = c.timeout;
  a.retry_cnt = c.retry_cnt;
  a.rnr_retry = c.rnr_retry;
  a.max_rd_atomic = max_rd_atomic;
  m = t == qp_type::rc || t == qp_type::dci ? M::state | M::timeout | M::retry_cnt | M::rnr_retry | M::sq_psn | M::max_qp_rd_atomic
                                             : M::state | M::sq_psn;
  return d.modify_qp(qpn, a, m);
}

}  // namespace pushwire::rnic
