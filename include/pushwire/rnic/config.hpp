// What a reference RNIC is made with and what it reports (spec/rnic.md §2, §9): its ports'
// and its own configuration, its asynchronous events and its counters.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include <pushwire/flow/dcqcn.hpp>
#include <pushwire/flow/ets.hpp>
#include <pushwire/flow/rc.hpp>
#include <pushwire/ib/encap.hpp>
#include <pushwire/ib/gid.hpp>
#include <pushwire/rnic/bus.hpp>
#include <pushwire/rnic/core.hpp>
#include <pushwire/rnic/platform.hpp>
#include <pushwire/wire/ethernet.hpp>

namespace pushwire::rnic {

/// How a port puts packets on the wire: RoCEv2 (IBTA annex A17), or the split-model driver's
/// cells (spec/cells.md).
enum class framing : std::uint8_t { roce, cell };
inline constexpr std::array<wire::named_value, 2> framing_names{{{framing::roce, "roce"}, {framing::cell, "cell"}}};
constexpr std::span<const wire::named_value> wire_enum_names(framing) { return framing_names; }

/// One port: its MAC, its GIDs, its MTU and framing.
struct port_config {
  wire::mac_address mac{};
  /// GID 0: the port's IP address (IPv4 as ::ffff:a.b.c.d).
  ib::gid gid{};
  /// RoCE: GIDs 1.. of the port's table: more addresses the port answers to and sends from
  /// (address_vector::sgid_index), e.g. an IPv6 one beside an IPv4-mapped `gid`.
  std::vector<ib::gid> extra_gids{};
  /// The largest path MTU (payload bytes per packet), 256..4096; in both framings the limit of
  /// a UD message (UD has no path MTU attribute).
  std::uint32_t mtu = 4096;
  rnic::framing framing = rnic::framing::roce;
  /// Cells: data bytes per cell (1..65535).
  std::uint32_t cell_payload = 256;
  /// RoCE: the UDP source port of every frame (the ICRC covers it). 0 derives it per QP pair
  /// from the flow label (ib/entropy.hpp); a UDP socket transport sets its bound port
  /// (net/udp.hpp), since the kernel sends from that. Sessions set their own.
  std::uint16_t udp_sport = 0;
  /// RoCE: the ECN field of what the port sends (spec/qos.md §1): ECT(0) or ECT(1) lets
  /// switches mark it CE; Not-ECT (the default) keeps the traffic class's low bits.
  ib::ecn ecn = ib::ecn::not_ect;
  /// RoCE: the DSCP of the CNPs the port sends, 0..63 (mlx5's np_cnp_dscp, 48; a ConnectX-4
  /// Lx's CNP carries 48).
  std::uint8_t cnp_dscp = 48;
  /// Traffic classes (spec/qos.md §4). With a class model, requests wait as descriptors (their
  /// QPs) in the port's eight classes, and the port's ETS scheduler picks the class whose next
  /// packet is built when the wire takes a frame; responses still go first. Without (the
  /// default), requests leave in the order the QPs send them.
  std::optional<flow::qos_map> classes{};

  /// GID `index` of the port's table (0: gid, then extra_gids), or nullptr beyond it.
  const ib::gid* gid_at(std::size_t index) const {
    return index == 0 ? &gid : index <= extra_gids.size() ? &extra_gids[index - 1] : nullptr;
  }
  /// Whether g is one of the port's GIDs.
  bool has_gid(const ib::gid& g) const {
    if (g == gid) return true;
    for (const ib::gid& e : extra_gids)
      if (g == e) return true;
    return false;
  }
};

/// Congestion control (spec/qos.md §3): DCQCN's notification and reaction points.
struct congestion_config {
  /// Notification point: a CE-marked request for an RC QP makes a CNP to its peer QP, at most
  /// one per QP per cnp_interval ns (np_min_time_between_cnps).
  bool notify = false;
  time_ns cnp_interval = 4'000;
  /// Reaction point: a CNP for an RC QP starts DCQCN's rate machine on it; its requests are then
  /// paced at the machine's rate until it is back at line rate.
  bool react = false;
  flow::dcqcn_config dcqcn{};
};

/// The QP context cache and WR lookahead (spec/qos.md §7). QP contexts live in host memory; the
/// device holds `entries` of them. Each posted send descriptor is a job in doorbell order; the
/// device serves, among the first `lookahead` jobs, the first whose QP's context it holds (a
/// QP's jobs in their order); when none, it loads the first job's context, evicting the least
/// recently used, which takes `fetch` ns during which it serves nothing.
struct context_cache_config {
  std::size_t entries = 0;    ///< 0: no cache model (every context is at hand)
  std::size_t lookahead = 1;  ///< W, jobs looked at (1: doorbell order)
  time_ns fetch = 1'000;      ///< a miss's bus time, ns (a 256-byte read across PCIe and back)
};

/// Limits and behaviour of one device (spec/rnic.md §2).
struct device_config {
  std::vector<port_config> ports = std::vector<port_config>(1);  // (not {port_config{}}: g++-12 -O3 warns falsely on the initializer list)
  std::uint32_t max_keys = 1u << 16;
  std::uint32_t max_qps = 1024;
  std::uint32_t max_cqs = 1024;
  std::uint32_t max_pds = 1024;
  /// The queue pair numbers create_qp hands out: [qpn_first, qpn_first + qpn_count), round
  /// robin, skipping those in use (a function of a shared device gets a block: spec/rnicd.md §2).
  /// qpn_first >= 2 (0 and 1 are the special QPs); the range ends by 2^24.
  std::uint32_t qpn_first = 0x10, qpn_count = 0x1000000 - 0x10;
  /// Virtual time to serve a page fault of an on-demand key (make its pages resident), ns.
  time_ns page_fault_latency = 100'000;
  /// What a responder does on an absent page: page-fault ACK (the default) or silent drop.
  flow::fault_policy on_fault = flow::fault_policy::page_fault_ack;
  /// The platform around the device (spec/rnic.md §15): its cards, whose device memory
  /// reg_mr_card registers, and the costs by which DMA to that memory goes P2P or proxied. No
  /// cards: every key is host memory.
  platform_model platform{};
  /// Frames a port holds for the fabric; beyond it the device sends no new requests or
  /// responses, and beyond twice it drops what it would still send (ACKs answering packets),
  /// counted: a NIC's transmit buffer is finite.
  std::size_t tx_queue = 4096;
  /// Not IBTA: a QP never fails on retransmission timeouts (retry_cnt is ignored). For soaks and
  /// fault tests, which ask whether data arrives intact under faults, not whether a QP gives up.
  bool retry_forever = false;
  /// Packets a requester keeps unacknowledged (rxe's 128). Go-back-N resends them all after a
  /// loss, so a lossy fabric favours fewer.
  std::uint32_t window = 128;
  /// Cells: the largest transport packet a port reassembles (the largest path MTU plus headers).
  std::uint32_t cell_max_packet = 4096 + 64;
  /// Cells: nanoseconds a packet may stay incomplete at a receiving port.
  time_ns cell_reassembly_timeout = 1'000'000;
  /// TCP's TIME_WAIT for RC (spec/rnic.md §13): a QP destroyed in RTS or SQD keeps answering
  /// duplicate requests (re-sending the ACK, READ response or atomic result a lost response
  /// leaves its peer waiting for) until twice its own local ACK timeout, at most `linger` ns,
  /// passes with no packet for it; so a peer whose last ACK was lost still completes. It takes
  /// no new request, sends no request, writes no completion, and holds no CQ, PD or SRQ. Not
  /// for a QP whose peer is on this device. 0: destroyed at once.
  time_ns linger = 0;
  /// ACK coalescing: a plain ACK (not a NAK, nor a READ or atomic response) alone in its port's
  /// transmit queue waits there until a request leaves the port, another response joins it, or
  /// `ack_delay` ns pass. In a request-response exchange the ACK then leaves with the answer
  /// (behind it: take_frame), one datagram burst each way instead of two; a stream's ACKs,
  /// several, are not held. 0: at once.
  time_ns ack_delay = 0;
  congestion_config congestion{};
  context_cache_config contexts{};
  /// The host bus (spec/qos.md §8): with a rate, each request's frame is ready for the wire only
  /// once its gather has had its turn and time on the bus.
  bus_config bus{};
  /// One pipeline for all ports (spec/qos.md §9), one each way: the most the device transmits,
  /// and the most it receives, its ports together, in bits per second (0: each port as fast as
  /// its wire). When it holds, the ports take turns.
  std::uint64_t pipeline_rate = 0;
  /// The pipelines' packet budget: packets per second each way, the ports together (0: none; at
  /// most 10^9).
  std::uint64_t pipeline_packets = 0;
  /// With a receive pipeline (either limit above), or a host bus: frames a port holds that
  /// arrived and wait for the pipeline, and frames the device holds that wait for their
  /// placement on the bus. Beyond it an arriving frame is dropped, counted (dropped_rx_full):
  /// a NIC's receive buffer is finite. At least 1.
  std::size_t rx_queue = 1024;
  /// Automatic path migration: an armed RC QP whose retransmission timer fired this many times
  /// in a row moves to its alternate path (its path stopped answering).
  std::uint32_t migrate_after_timeouts = 2;
};

/// An asynchronous event (ibv_event_type's meaning): the device reports what no completion can.
enum class event_type : std::uint8_t {
  cq_error,          ///< a CQ overflowed (IBV_EVENT_CQ_ERR)
  qp_fatal,          ///< a QP went to ERR for a reason of its own (its CQ overflowed; IBV_EVENT_QP_FATAL)
  qp_request_error,  ///< a responder NAKed an invalid request and went to ERR (IBV_EVENT_QP_REQ_ERR)
  qp_access_error,   ///< a responder NAKed an access or operational error and went to ERR (IBV_EVENT_QP_ACCESS_ERR)
  sq_drained,        ///< a QP in SQD has nothing outstanding (IBV_EVENT_SQ_DRAINED)
  srq_limit,         ///< an SRQ fell below its armed limit (IBV_EVENT_SRQ_LIMIT_REACHED)
  path_migrated,     ///< a QP moved to its alternate path (IBV_EVENT_PATH_MIG)
};
inline constexpr std::array<wire::named_value, 7> event_type_names{{
    {event_type::cq_error, "cq_error"}, {event_type::qp_fatal, "qp_fatal"},
    {event_type::qp_request_error, "qp_request_error"}, {event_type::qp_access_error, "qp_access_error"},
    {event_type::sq_drained, "sq_drained"}, {event_type::srq_limit, "srq_limit"}, {event_type::path_migrated, "path_migrated"},
}};
constexpr std::span<const wire::named_value> wire_enum_names(event_type) { return event_type_names; }
struct async_event {
  event_type type;
  std::uint32_t object;  ///< the CQ, QP or SRQ number
};

/// DMA between card memory and the device by one path, one way (device_counters::paths).
struct path_counters {
  std::uint64_t transfers = 0, bytes = 0;
  double modelled_ns = 0;  ///< platform_model::cost of each transfer, summed
};

/// Per-device counters (spec/rnic.md §7, §9).
struct device_counters {
  /// Out: packets the device built to send (a cell packet once) and their frames' bytes (a cell
  /// packet's cells), including plain ACKs a newer ACK of their QP replaced before they left
  /// (port::acks_superseded). In: frames that arrived, and their bytes.
  std::uint64_t frames_out = 0, frames_in = 0, bytes_out = 0, bytes_in = 0;
  std::uint64_t dropped_bad_frame = 0;    ///< not RoCEv2 / not a cell, or a bad ICRC / cell CRC
  std::uint64_t dropped_not_mine = 0;     ///< another MAC or GID, another partition
  std::uint64_t dropped_no_qp = 0;        ///< no QP of that number, or not in a state to take it
  std::uint64_t dropped_wrong_source = 0; ///< RC / UC: not from the QP's peer (address, or cells' MAC and WQP)
  std::uint64_t dropped_by_qp = 0;        ///< dropped by a QP's rules (duplicates, sequence, keys)
  std::uint64_t dropped_tx_full = 0;      ///< packets not sent: the port's transmit queue was full
  std::uint64_t dropped_rx_full = 0;      ///< frames not taken: device_config::rx_queue frames waited already
  /// The receive pipeline (device_config::pipeline_rate, pipeline_packets): frames and bytes it
  /// passed, all ports together.
  std::uint64_t pipeline_rx_frames = 0, pipeline_rx_bytes = 0;
  std::uint64_t page_faults = 0;          ///< faults raised on on-demand keys
  std::uint64_t faults_served = 0;
  std::uint64_t pauses = 0;               ///< requesters paused by a page-fault ACK
  std::uint64_t retransmits = 0;          ///< packets sent again by requesters
  /// Retransmission timeouts the pauses spared: for each pause, how many local ACK timeouts its
  /// delay spans (a sender without page-fault ACKs would have resent its window each time).
  std::uint64_t retransmits_avoided = 0;
  std::uint64_t cq_overflows = 0;
  std::uint64_t completions = 0;
  /// DMA to and from card memory (spec/rnic.md §15), by datapath (platform.hpp's datapath:
  /// p2p, proxied) and direction (inbound, outbound). A transfer is one message's part of one
  /// registered buffer; its modelled time is the platform's cost of that many bytes.
  std::array<std::array<path_counters, 2>, 3> paths{};
  /// Session QPs (spec/rnic.md §12): messages dropped by the receiver's session rules.
  std::uint64_t session_unknown_tuple = 0;  ///< from a 5-tuple the session table does not hold
  std::uint64_t session_foreign = 0;        ///< from a session of another group or QP
  std::uint64_t session_duplicate = 0;      ///< a sequence number already delivered or held
  std::uint64_t session_window_full = 0;    ///< beyond the resequencing window
  std::uint64_t session_not_sent = 0;       ///< a session QP's message with no session to go on
  /// Congestion control (spec/qos.md §3).
  std::uint64_t ce_received = 0;    ///< requests that arrived marked CE
  std::uint64_t cnps_sent = 0;
  std::uint64_t cnps_received = 0;  ///< CNPs for a QP of this device (whether it reacts or not)
  /// The context cache (spec/qos.md §7): send jobs served with their QP's context held, jobs
  /// that had to load it, and jobs served before an older job of another QP.
  std::uint64_t context_hits = 0, context_misses = 0, out_of_order = 0;
  std::uint64_t path_migrations = 0;  ///< QPs moved to their alternate path (spec/qos.md §9)
};

/// A scalar counter of device_counters by its member's name.
struct counter_field {
  std::string_view name;
  std::uint64_t device_counters::*member;
};
/// Every scalar counter of device_counters, in declaration order.
inline constexpr std::array<counter_field, 32> device_counter_fields{{
    {"frames_out", &device_counters::frames_out},
    {"frames_in", &device_counters::frames_in},
    {"bytes_out", &device_counters::bytes_out},
    {"bytes_in", &device_counters::bytes_in},
    {"dropped_bad_frame", &device_counters::dropped_bad_frame},
    {"dropped_not_mine", &device_counters::dropped_not_mine},
    {"dropped_no_qp", &device_counters::dropped_no_qp},
    {"dropped_wrong_source", &device_counters::dropped_wrong_source},
    {"dropped_by_qp", &device_counters::dropped_by_qp},
    {"dropped_tx_full", &device_counters::dropped_tx_full},
    {"dropped_rx_full", &device_counters::dropped_rx_full},
    {"pipeline_rx_frames", &device_counters::pipeline_rx_frames},
    {"pipeline_rx_bytes", &device_counters::pipeline_rx_bytes},
    {"page_faults", &device_counters::page_faults},
    {"faults_served", &device_counters::faults_served},
    {"pauses", &device_counters::pauses},
    {"retransmits", &device_counters::retransmits},
    {"retransmits_avoided", &device_counters::retransmits_avoided},
    {"cq_overflows", &device_counters::cq_overflows},
    {"completions", &device_counters::completions},
    {"session_unknown_tuple", &device_counters::session_unknown_tuple},
    {"session_foreign", &device_counters::session_foreign},
    {"session_duplicate", &device_counters::session_duplicate},
    {"session_window_full", &device_counters::session_window_full},
    {"session_not_sent", &device_counters::session_not_sent},
    {"ce_received", &device_counters::ce_received},
    {"cnps_sent", &device_counters::cnps_sent},
    {"cnps_received", &device_counters::cnps_received},
    {"context_hits", &device_counters::context_hits},
    {"context_misses", &device_counters::context_misses},
    {"out_of_order", &device_counters::out_of_order},
    {"path_migrations", &device_counters::path_migrations},
}};
// A counter added to device_counters needs its row above; no two rows share a member or a name.
static_assert(sizeof(device_counters) == device_counter_fields.size() * sizeof(std::uint64_t) + sizeof(device_counters::paths));
static_assert([] {
  for (std::size_t i = 0; i < device_counter_fields.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (device_counter_fields[i].member == device_counter_fields[j].member || device_counter_fields[i].name == device_counter_fields[j].name)
        return false;
  return true;
}());

/// Calls f(name, value) for each counter of c: the scalar ones (device_counter_fields), then for
/// the datapaths p2p and proxied, inbound and outbound, "<path>_<direction>_transfers",
/// "..._bytes" and "..._modelled_ns" (rounded down), named as datapath_names and
/// data_direction_names. What programs print (PUSHWIRE_VERBS_STATS, spec/verbs.md).
template <class F>
void for_each_counter(const device_counters& c, F&& f) {
  for (const counter_field& k : device_counter_fields) f(k.name, c.*k.member);
  char name[64];
  for (const datapath p : {datapath::p2p, datapath::proxied})
    for (const data_direction d : {data_direction::inbound, data_direction::outbound}) {
      const path_counters& x = c.paths[static_cast<std::size_t>(p)][static_cast<std::size_t>(d)];
      const auto put = [&](std::string_view what, std::uint64_t v) {
        std::size_t n = 0;
        for (std::string_view part : {wire::enum_name(p), std::string_view("_"), wire::enum_name(d), std::string_view("_"), what})
          for (char ch : part) name[n++] = ch;
        f(std::string_view(name, n), v);
      };
      put("transfers", x.transfers);
      put("bytes", x.bytes);
      put("modelled_ns", static_cast<std::uint64_t>(x.modelled_ns));
    }
}

/// One traffic class of a port (spec/qos.md §4), counted whether or not the port schedules by
/// class (a frame's class is its address vector's, through the port's class model or, without
/// one, the default model).
struct class_counters {
  std::uint64_t frames = 0, bytes = 0;  ///< frames the wire took, and their bytes
  /// Bytes of built frames the port holds for the wire now (payload gathered, not yet taken),
  /// and the most it held.
  std::uint64_t held = 0, max_held = 0;
};

}  // namespace pushwire::rnic
