// Queue pair types, states and attributes of the reference RNIC, and the rules of modify_qp
// (spec/rnic.md §6): which transitions each type has, which attributes a transition requires and
// which it allows, as IBTA vol. 1 11.2.5.1 tabulates them (and Linux's ib_modify_qp_is_ok, read
// for reference). DC initiators and targets follow mlx5's DCI / DCT: a DCI needs no
// destination, a DCT works from RTR. Values use verbs' numbers (ibv_qp_type, ibv_qp_state,
// ibv_qp_attr_mask), so a provider maps them one to one.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>

#include <pushwire/ib/gid.hpp>
#include <pushwire/rnic/core.hpp>
#include <pushwire/rnic/queue.hpp>
#include <pushwire/wire/ethernet.hpp>

namespace pushwire::rnic {

enum class qp_type : std::uint8_t { rc = 2, uc = 3, ud = 4, dci = 0x80, dct = 0x81 };
inline constexpr std::array<wire::named_value, 5> qp_type_names{{
    {qp_type::rc, "RC"}, {qp_type::uc, "UC"}, {qp_type::ud, "UD"}, {qp_type::dci, "DCI"}, {qp_type::dct, "DCT"},
}};
constexpr std::span<const wire::named_value> wire_enum_names(qp_type) { return qp_type_names; }

enum class qp_state : std::uint8_t { reset = 0, init = 1, rtr = 2, rts = 3, sqd = 4, sqe = 5, err = 6 };
inline constexpr std::array<wire::named_value, 7> qp_state_names{{
    {qp_state::reset, "RESET"}, {qp_state::init, "INIT"}, {qp_state::rtr, "RTR"}, {qp_state::rts, "RTS"},
    {qp_state::sqd, "SQD"}, {qp_state::sqe, "SQE"}, {qp_state::err, "ERR"},
}};
constexpr std::span<const wire::named_value> wire_enum_names(qp_state) { return qp_state_names; }

/// modify_qp attribute mask bits (ibv_qp_attr_mask's values).
enum class qp_attr_mask : std::uint32_t {
  none = 0,
  state = 1u << 0,
  cur_state = 1u << 1,
  en_sqd_async_notify = 1u << 2,
  access_flags = 1u << 3,
  pkey_index = 1u << 4,
  port = 1u << 5,
  qkey = 1u << 6,
  av = 1u << 7,
  path_mtu = 1u << 8,
  timeout = 1u << 9,
  retry_cnt = 1u << 10,
  rnr_retry = 1u << 11,
  rq_psn = 1u << 12,
  max_qp_rd_atomic = 1u << 13,
  alt_path = 1u << 14,
  min_rnr_timer = 1u << 15,
  sq_psn = 1u << 16,
  max_dest_rd_atomic = 1u << 17,
  path_mig_state = 1u << 18,
  cap = 1u << 19,
  dest_qpn = 1u << 20,
};
constexpr qp_attr_mask operator|(qp_attr_mask a, qp_attr_mask b) { return qp_attr_mask(std::uint32_t(a) | std::uint32_t(b)); }
constexpr qp_attr_mask operator&(qp_attr_mask a, qp_attr_mask b) { return qp_attr_mask(std::uint32_t(a) & std::uint32_t(b)); }
constexpr qp_attr_mask operator~(qp_attr_mask a) { return qp_attr_mask(~std::uint32_t(a)); }
constexpr bool any(qp_attr_mask a) { return a != qp_attr_mask::none; }
inline constexpr std::array<wire::named_value, 21> qp_attr_mask_names{{
    {qp_attr_mask::state, "state"}, {qp_attr_mask::cur_state, "cur_state"},
    {qp_attr_mask::en_sqd_async_notify, "en_sqd_async_notify"}, {qp_attr_mask::access_flags, "access_flags"},
    {qp_attr_mask::pkey_index, "pkey_index"}, {qp_attr_mask::port, "port"}, {qp_attr_mask::qkey, "qkey"},
    {qp_attr_mask::av, "av"}, {qp_attr_mask::path_mtu, "path_mtu"}, {qp_attr_mask::timeout, "timeout"},
    {qp_attr_mask::retry_cnt, "retry_cnt"}, {qp_attr_mask::rnr_retry, "rnr_retry"}, {qp_attr_mask::rq_psn, "rq_psn"},
    {qp_attr_mask::max_qp_rd_atomic, "max_qp_rd_atomic"}, {qp_attr_mask::alt_path, "alt_path"},
    {qp_attr_mask::min_rnr_timer, "min_rnr_timer"}, {qp_attr_mask::sq_psn, "sq_psn"},
    {qp_attr_mask::max_dest_rd_atomic, "max_dest_rd_atomic"}, {qp_attr_mask::path_mig_state, "path_mig_state"},
    {qp_attr_mask::cap, "cap"}, {qp_attr_mask::dest_qpn, "dest_qpn"},
}};
constexpr std::span<const wire::named_value> wire_enum_names(qp_attr_mask) { return qp_attr_mask_names; }

/// Where a QP's packets go: the local port, and the peer port's MAC and IP address (IPv4 as
/// ::ffff:a.b.c.d). The RoCEv2 GID is the IP address.
struct address_vector {
  std::uint8_t port = 0;
  wire::mac_address dmac{};
  std::array<std::uint8_t, 16> dgid{};
  /// The source GID: index into the port's table (port_config::gid, then extra_gids).
  std::uint8_t sgid_index = 0;
  std::uint8_t hop_limit = 64;
  std::uint8_t traffic_class = 0;
  std::uint32_t flow_label = 0;  ///< 20 bits; 0: derived from the QP numbers (ib/entropy.hpp)
  /// The service level, 0..15: with a port that trusts PCP, its three low bits are the
  /// priority that picks the traffic class (spec/qos.md §4). RoCE frames carry no VLAN tag.
  std::uint8_t sl = 0;
  friend constexpr bool operator==(const address_vector&, const address_vector&) = default;
};
/// GIDs (ib/gid.hpp).
using ib::gid_v4;
using ib::is_v4;

/// Automatic path migration (IBTA vol. 1 17.2.8; ibv_mig_state's values): where a connected
/// QP stands with its alternate path.
enum class mig_state : std::uint8_t {
  migrated = 0,  ///< on the path it has; no alternate loaded (IBV_MIG_MIGRATED)
  rearm = 1,     ///< software loaded an alternate: the device arms it (IBV_MIG_REARM)
  armed = 2,     ///< a failure of the path moves it to the alternate (IBV_MIG_ARMED)
};
inline constexpr std::array<wire::named_value, 3> mig_state_names{
    {{mig_state::migrated, "migrated"}, {mig_state::rearm, "rearm"}, {mig_state::armed, "armed"}}};
constexpr std::span<const wire::named_value> wire_enum_names(mig_state) { return mig_state_names; }

/// modify_qp's attributes; the mask says which are given.
struct qp_attr {
  qp_state state = qp_state::reset;
  qp_state cur_state = qp_state::reset;
  access access_flags = access::none;  ///< remote rights of the QP (responder): remote write/read/atomic
  std::uint16_t pkey_index = 0;        ///< 0: the default partition (the only one)
  std::uint8_t port = 0;
  std::uint32_t qkey = 0;
  address_vector av{};
  std::uint32_t path_mtu = 1024;       ///< bytes: 256, 512, 1024, 2048 or 4096 (at most the port's)
  std::uint8_t timeout = 14;           ///< local ACK timeout: 4.096 us * 2^timeout, 1..31; 0: none
  std::uint8_t retry_cnt = 7;          ///< 0..7 (7 is not infinite: IBTA)
  std::uint8_t rnr_retry = 7;          ///< 0..7 (7: infinite)
  std::uint32_t rq_psn = 0, sq_psn = 0;  ///< 24 bits
  std::uint8_t max_rd_atomic = 16;     ///< READ / atomics outstanding as requester, 0..max_rd_atomic
  std::uint8_t max_dest_rd_atomic = 16;  ///< ... as responder, 0..max_rd_atomic
  std::uint8_t min_rnr_timer = 12;     ///< IBTA RNR timer code, 0..31
  std::uint32_t dest_qp_num = 0;       ///< 24 bits
  /// RC, UC: the alternate path (alt_path): its address vector (its port included) and local
  /// ACK timeout; and the migration state (path_mig_state). spec/qos.md §9.
  address_vector alt_av{};
  std::uint8_t alt_timeout = 14;
  mig_state path_mig_state = mig_state::migrated;
};

/// What create_qp needs.
struct qp_init_attr {
  qp_type type = qp_type::rc;
  std::uint32_t pd = 0;
  std::uint32_t send_cq = 0, recv_cq = 0;
  sq_memory* sq = nullptr;   ///< the send queue ring (not for DCT)
  rq_memory* rq = nullptr;   ///< the receive queue ring, unless srq is given (not for DCI)
  std::optional<std::uint32_t> srq{};
  bool sq_sig_all = false;   ///< every send completes on the CQ, signaled or not
  std::uint64_t dct_access_key = 0;  ///< DCT: the key a DCI's packets must carry
};

/// Most READ / atomic requests a QP keeps as responder (responder resources).
inline constexpr std::uint8_t max_rd_atomic = 16;

/// The attributes a transition requires and those it allows besides (state is always required).
struct qp_transition_rule {
  qp_attr_mask required = qp_attr_mask::none;
  qp_attr_mask optional = qp_attr_mask::none;
};

namespace detail {
using M = qp_attr_mask;
inline constexpr M PK = M::pkey_index, PORT = M::port, ACC = M::access_flags, QK = M::qkey, AV = M::av,
                   MTU = M::path_mtu, TO = M::timeout, RC_ = M::retry_cnt, RNR = M::rnr_retry, RQ = M::rq_psn,
                   SQ = M::sq_psn, MRD = M::max_qp_rd_atomic, MDRD = M::max_dest_rd_atomic, MIN = M::min_rnr_timer,
                   DQ = M::dest_qpn, CUR = M::cur_state, ALT = M::alt_path, MIG = M::path_mig_state,
                   SQDN = M::en_sqd_async_notify, N = M::none;
struct rule_row {
  qp_state from, to;
  std::array<qp_transition_rule, 5> by_type;  ///< rc, uc, ud, dci, dct; required none + optional none + !valid = absent
  std::array<bool, 5> valid;
};
// IBTA vol. 1 table 91 (11.2.5.1): the transitions each type has and their attributes.
inline constexpr rule_row rules[] = {
    {qp_state::reset, qp_state::init,
     {{{PK | PORT | ACC, N}, {PK | PORT | ACC, N}, {PK | PORT | QK, N}, {PK | PORT, N}, {PK | PORT | ACC, N}}},
     {true, true, true, true, true}},
    {qp_state::init, qp_state::init,
     {{{N, PK | PORT | ACC}, {N, PK | PORT | ACC}, {N, PK | PORT | QK}, {N, PK | PORT}, {N, PK | PORT | ACC}}},
     {true, true, true, true, true}},
    {qp_state::init, qp_state::rtr,
     {{{AV | MTU | DQ | RQ | MDRD | MIN, ALT | ACC | PK}, {AV | MTU | DQ | RQ, ALT | ACC | PK}, {N, PK | QK},
       {MTU, AV | PK}, {MTU | MIN, AV | ACC | PK}}},
     {true, true, true, true, true}},
    {qp_state::rtr, qp_state::rts,
     {{{TO | RC_ | RNR | SQ | MRD, CUR | ALT | ACC | MIN | MIG}, {SQ, CUR | ALT | ACC | MIG}, {SQ, CUR | QK},
       {TO | RC_ | RNR | SQ | MRD, CUR}, {N, N}}},
     {true, true, true, true, false}},
    {qp_state::rts, qp_state::rts,
     {{{N, CUR | ACC | ALT | MIG | MIN}, {N, CUR | ACC | ALT | MIG}, {N, CUR | QK}, {N, CUR}, {N, N}}},
     {true, true, true, true, false}},
    {qp_state::rts, qp_state::sqd,
     {{{N, SQDN}, {N, SQDN}, {N, SQDN}, {N, SQDN}, {N, N}}},
     {true, true, true, true, false}},
    {qp_state::sqd, qp_state::rts,
     {{{N, CUR | ALT | ACC | MIN | MIG}, {N, CUR | ALT | ACC | MIG}, {N, CUR | QK}, {N, CUR}, {N, N}}},
     {true, true, true, true, false}},
    {qp_state::sqd, qp_state::sqd,
     {{{N, PORT | AV | TO | RC_ | RNR | MRD | ALT | ACC | PK | MIN | MDRD | MIG}, {N, AV | ALT | ACC | PK | MIG},
       {N, PK | QK}, {N, TO | RC_ | RNR | MRD}, {N, N}}},
     {true, true, true, true, false}},
    {qp_state::sqe, qp_state::rts,
     {{{N, N}, {N, CUR | ACC}, {N, CUR | QK}, {N, N}, {N, N}}},
     {false, true, true, false, false}},
};
constexpr std::size_t type_slot(qp_type t) {
  switch (t) {
    case qp_type::rc: return 0;
    case qp_type::uc: return 1;
    case qp_type::ud: return 2;
    case qp_type::dci: return 3;
    case qp_type::dct: return 4;
  }
  return 0;
}
}  // namespace detail

/// The rule of from -> to for type t, or nullopt when t has no such transition. Every state
/// goes to RESET and to ERR with no attributes.
constexpr std::optional<qp_transition_rule> transition_rule(qp_type t, qp_state from, qp_state to) {
  if (to == qp_state::reset || to == qp_state::err) return qp_transition_rule{};
  for (const auto& r : detail::rules)
    if (r.from == from && r.to == to) {
      const std::size_t i = detail::type_slot(t);
      if (!r.valid[i]) return std::nullopt;
      return r.by_type[i];
    }
  return std::nullopt;
}

/// Checks a modify_qp request against the rules and the value ranges. port_mtu: the MTU of the
/// port the QP is (or will be) on; ports: how many the device has. Errors: invalid_state (no
/// transition, or cur_state given and not the state), missing_attribute, invalid_attribute.
constexpr errc check_modify(qp_type t, qp_state current, const qp_attr& a, qp_attr_mask mask, std::size_t ports,
                            std::uint32_t port_mtu) {
  using M = qp_attr_mask;
  const qp_state to = any(mask & M::state) ? a.state : current;
  if (any(mask & M::cur_state) && a.cur_state != current) return errc::invalid_state;
  const auto rule = transition_rule(t, current, to);
  if (!rule) return errc::invalid_state;
  const M given = mask & ~(M::state);
  if ((given & rule->required) != rule->required) return errc::missing_attribute;
  if (any(given & ~(rule->required | rule->optional))) return errc::invalid_attribute;
  if (any(given & M::port) && a.port >= ports) return errc::invalid_attribute;
  if (any(given & M::pkey_index) && a.pkey_index != 0) return errc::invalid_attribute;
  if (any(given & M::av) && a.av.port >= ports) return errc::invalid_attribute;
  if (any(given & M::alt_path) && (a.alt_av.port >= ports || a.alt_timeout > 31)) return errc::invalid_attribute;
  if (any(given & M::path_mig_state) && static_cast<std::uint8_t>(a.path_mig_state) > 2) return errc::invalid_attribute;
  if (any(given & M::path_mtu)) {
    const std::uint32_t m = a.path_mtu;
    if ((m != 256 && m != 512 && m != 1024 && m != 2048 && m != 4096) || m > port_mtu) return errc::invalid_attribute;
  }
  if (any(given & M::timeout) && a.timeout > 31) return errc::invalid_attribute;
  if (any(given & M::retry_cnt) && a.retry_cnt > 7) return errc::invalid_attribute;
  if (any(given & M::rnr_retry) && a.rnr_retry > 7) return errc::invalid_attribute;
  if (any(given & M::min_rnr_timer) && a.min_rnr_timer > 31) return errc::invalid_attribute;
  if (any(given & M::rq_psn) && a.rq_psn > 0xFFFFFF) return errc::invalid_attribute;
  if (any(given & M::sq_psn) && a.sq_psn > 0xFFFFFF) return errc::invalid_attribute;
  if (any(given & M::dest_qpn) && a.dest_qp_num > 0xFFFFFF) return errc::invalid_attribute;
  if (any(given & M::max_qp_rd_atomic) && a.max_rd_atomic > max_rd_atomic) return errc::invalid_attribute;
  if (any(given & M::max_dest_rd_atomic) && a.max_dest_rd_atomic > max_rd_atomic) return errc::invalid_attribute;
  return {};
}

}  // namespace pushwire::rnic
