// The packed QP context (spec/qos.md §7): what a QP's attributes take in the context table that
// stands for host memory, laid out as a device reads it (big-endian, fixed size). With a context
// cache (device_config::contexts), a miss decodes this record into the cache entry: the real
// work a miss costs in real time, beside its `fetch` ns of virtual bus time. The layout is
// pushwire's own (a ConnectX QPC is 256 bytes of the same kind of fields).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include <pushwire/rnic/qp.hpp>
#include <pushwire/wire/codec.hpp>
#include <pushwire/wire/struct.hpp>

namespace pushwire::rnic {

/// A path (address_vector) in the packed context.
struct qpc_path {
  PUSHWIRE_STRUCT(qpc_path,
      (std::uint8_t, port),
      (std::uint8_t, sgid_index),
      (std::uint8_t, hop_limit),
      (std::uint8_t, traffic_class),
      /// 20 bits; 0: derived from the QP numbers
      (std::uint32_t, flow_label),
      /// service level, 0..15
      (std::uint8_t, sl),
      (std::array<std::uint8_t, 6>, dmac),
      (std::array<std::uint8_t, 16>, dgid));
};

/// A QP's packed context.
struct qpc {
  PUSHWIRE_STRUCT(qpc,
      /// qp_type, qp_state, mig_state as their enum values
      (std::uint8_t, type),
      (std::uint8_t, state),
      (std::uint8_t, mig_state),
      (std::uint8_t, port),
      /// 24 bits each
      (std::uint32_t, qpn),
      (std::uint32_t, dest_qpn),
      (std::uint32_t, sq_psn),
      (std::uint32_t, rq_psn),
      (std::uint32_t, pd),
      (std::uint32_t, send_cq),
      (std::uint32_t, recv_cq),
      /// rnic::access bits
      (std::uint32_t, access),
      (std::uint32_t, qkey),
      /// bytes, 256..4096
      (std::uint16_t, path_mtu),
      (std::uint8_t, timeout),
      (std::uint8_t, retry_cnt),
      (std::uint8_t, rnr_retry),
      (std::uint8_t, min_rnr_timer),
      (std::uint8_t, max_rd_atomic),
      (std::uint8_t, max_dest_rd_atomic),
      (std::uint8_t, alt_timeout),
      (qpc_path, path),
      (qpc_path, alt_path),
      /// the rings' host addresses and depths (0: none)
      (std::uint64_t, sq_ring),
      (std::uint32_t, sq_depth),
      (std::uint64_t, rq_ring),
      (std::uint32_t, rq_depth));
};

/// Bytes of a packed context.
inline constexpr std::size_t qpc_size = wire::fixed_size<qpc>;
using packed_qpc = std::array<std::byte, qpc_size>;

namespace detail {
constexpr qpc_path pack_path(const address_vector& a) {
  return {.port = a.port, .sgid_index = a.sgid_index, .hop_limit = a.hop_limit, .traffic_class = a.traffic_class,
          .flow_label = a.flow_label, .sl = a.sl, .dmac = a.dmac, .dgid = a.dgid};
}
constexpr address_vector unpack_path(const qpc_path& p) {
  return {.port = p.port, .dmac = p.dmac, .dgid = p.dgid, .sgid_index = p.sgid_index, .hop_limit = p.hop_limit,
          .traffic_class = p.traffic_class, .flow_label = p.flow_label, .sl = p.sl};
}
}  // namespace detail

/// The packed form of QP `qpn`'s attributes `a` (type t, state s) with its rings.
inline packed_qpc pack_qpc(std::uint32_t qpn, const qp_init_attr& init, qp_state s, const qp_attr& a) {
  const qpc c{.type = static_cast<std::uint8_t>(init.type), .state = static_cast<std::uint8_t>(s),
              .mig_state = static_cast<std::uint8_t>(a.path_mig_state), .port = a.port, .qpn = qpn, .dest_qpn = a.dest_qp_num,
              .sq_psn = a.sq_psn, .rq_psn = a.rq_psn, .pd = init.pd, .send_cq = init.send_cq, .recv_cq = init.recv_cq,
              .access = static_cast<std::uint32_t>(a.access_flags), .qkey = a.qkey, .path_mtu = static_cast<std::uint16_t>(a.path_mtu),
              .timeout = a.timeout, .retry_cnt = a.retry_cnt, .rnr_retry = a.rnr_retry, .min_rnr_timer = a.min_rnr_timer,
              .max_rd_atomic = a.max_rd_atomic, .max_dest_rd_atomic = a.max_dest_rd_atomic, .alt_timeout = a.alt_timeout,
              .path = detail::pack_path(a.av), .alt_path = detail::pack_path(a.alt_av),
              .sq_ring = reinterpret_cast<std::uintptr_t>(init.sq), .sq_depth = init.sq ? init.sq->depth() : 0u,
              .rq_ring = reinterpret_cast<std::uintptr_t>(init.rq), .rq_depth = init.rq ? init.rq->depth() : 0u};
  packed_qpc out{};
  (void)wire::encode(c, std::span<std::byte>(out));
  return out;
}

/// A context as a cache entry holds it, decoded from its packed form.
struct cached_qpc {
  std::uint32_t qpn = 0;
  qp_type type = qp_type::rc;
  qp_state state = qp_state::reset;
  qp_attr attr{};
  std::uint64_t sq_ring = 0, rq_ring = 0;
  std::uint32_t sq_depth = 0, rq_depth = 0;
};
/// Decodes a packed context (nullopt: it does not decode).
inline std::optional<cached_qpc> unpack_qpc(std::span<const std::byte, qpc_size> in) {
  const auto c = wire::decode<qpc>(in);
  if (!c) return std::nullopt;
  cached_qpc q;
  q.qpn = c->qpn;
  q.type = static_cast<qp_type>(c->type);
  q.state = static_cast<qp_state>(c->state);
  qp_attr& a = q.attr;
  a.state = q.state;
  a.path_mig_state = static_cast<mig_state>(c->mig_state);
  a.port = c->port;
  a.dest_qp_num = c->dest_qpn;
  a.sq_psn = c->sq_psn;
  a.rq_psn = c->rq_psn;
  a.access_flags = static_cast<access>(c->access);
  a.qkey = c->qkey;
  a.path_mtu = c->path_mtu;
  a.timeout = c->timeout;
  a.retry_cnt = c->retry_cnt;
  a.rnr_retry = c->rnr_retry;
  a.min_rnr_timer = c->min_rnr_timer;
  a.max_rd_atomic = c->max_rd_atomic;
  a.max_dest_rd_atomic = c->max_dest_rd_atomic;
  a.alt_timeout = c->alt_timeout;
  a.av = detail::unpack_path(c->path);
  a.alt_av = detail::unpack_path(c->alt_path);
  q.sq_ring = c->sq_ring, q.sq_depth = c->sq_depth, q.rq_ring = c->rq_ring, q.rq_depth = c->rq_depth;
  return q;
}

}  // namespace pushwire::rnic
