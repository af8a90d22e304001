// Conformance (spec/conformance.md): judges captured RoCEv2 and cell traffic against the
// protocol's rules, statefully. Fed every frame of a capture in order, the checker groups them
// into conversations (a stream of requests from one QP to another with the responses that come
// back; DC streams; UD), replays each through the flow machines used as observers (a responder,
// or a DC target, per request stream; a pool owner per push-push host pair), and reports each
// violation with its frame, rule, conversation, what was expected and what was seen. Where a
// machine decides a rule (opcode sequence, MTU, DMA length, duplicates, DC connections, pool
// elements) the checker asks the machine; it keeps no second copy of that rule.
//
// The capture may have been taken anywhere on the path: a frame lost before the capture point, a
// duplicate, a reordering, a capture that starts in the middle of a conversation, a host's
// transmitted and received frames recorded through different paths (a response before its
// request) are not violations. A rule fires only on evidence that none of them explains; the
// rules that need to see what comes later (a gap never filled, a response's request never sent,
// a NAK never obeyed) are reported by finish(). conform_options::complete says the capture has
// none of these: what they would explain is then a violation at once.
// Sans-IO: time is each frame's capture timestamp; every table is bounded by conform_limits.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdlib>
#include <cstdint>
#include <map>
#include <set>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include <pushwire/cell/format.hpp>
#include <pushwire/cell/reassembler.hpp>
#include <pushwire/flow/dc.hpp>
#include <pushwire/flow/frame.hpp>
#include <pushwire/flow/paths.hpp>
#include <pushwire/flow/pool.hpp>
#include <pushwire/flow/pp_track.hpp>
#include <pushwire/flow/rc.hpp>
#include <pushwire/ib/aeth.hpp>
#include <pushwire/ib/psn.hpp>
#include <pushwire/ib/roce.hpp>
#include <pushwire/msg/idata.hpp>
#include <pushwire/msg/message.hpp>
#include <pushwire/wire/pcap.hpp>

namespace pushwire::flow {

// ---------------------------------------------------------------------------------- the rules

/// Every rule the checker judges. Ids are stable (spec/conformance.md §3 is generated from
/// rule_table).
enum class rule : std::uint8_t {
  frame_icrc,
  frame_length,
  req_psn_sequence,
  req_opcode_sequence,
  req_mtu,
  req_dma_length,
  resp_ack_psn,
  resp_msn,
  resp_credits,
  resp_read,
  resp_atomic,
  resp_nak_code,
  retx_restart,
  retx_rnr_wait,
  pagefault_no_retransmit,
  dc_connect_first,
  dc_disconnect_last,
  pp_idata_bounds,
  pp_element_free,
  pp_write_after_flush,
  cell_crc,
  cell_packet_crc,
  cell_sequence,
  cnp_pacing,
  apm_psn_continuity,
};
inline constexpr std::size_t rule_count = 25;

struct rule_info {
  rule id;
  std::string_view name;       ///< the stable id, as reported: "frame.icrc"
  std::string_view checks;     ///< what it checks, one sentence
  std::string_view judge;      ///< what decides it (the machine or codec asked)
  std::string_view reference;  ///< where the rule is written
};

inline constexpr std::array<rule_info, rule_count> rule_table{{
    {rule::frame_icrc, "frame.icrc", "A RoCEv2 frame's ICRC is the CRC of its invariant fields.", "ib::inspect (ib::compute_icrc)",
     "IBTA vol. 1 Annex A17 (RoCEv2) A17.4.3; spec/roce.md §8"},
    {rule::frame_length, "frame.length",
     "IP and UDP lengths, PadCnt, the opcode's header chain and its payload agree (a frame to the RoCEv2 port).", "ib::inspect",
     "IBTA vol. 1 9.2, 9.3; spec/roce.md §10, §11"},
    {rule::req_psn_sequence, "req.psn_sequence",
     "A requester's PSNs advance by one per packet (a READ by its responses'); a PSN skipped is sent later (lost before "
     "the capture point, then resent); one the responder asked for (a PSN sequence error NAK) and never sent is a violation "
     "(in a complete capture, every skip).",
     "the stream's PSN record; flow::responder::judge (duplicate / ahead)", "IBTA vol. 1 9.7.1, 9.7.5.1.1; spec/flow.md §2"},
    {rule::req_opcode_sequence, "req.opcode_sequence",
     "FIRST, MIDDLE..., LAST in order; no message starts inside another; MIDDLE and LAST continue one of their kind.",
     "flow::responder::judge (invalid_reason::sequence)", "IBTA vol. 1 9.7.5.1.2 (opcode sequence check); rxe check_op_seq"},
    {rule::req_mtu, "req.mtu", "FIRST and MIDDLE payloads are the path MTU exactly; LAST and ONLY payloads are at most it.",
     "flow::responder::judge (invalid_reason::mtu)", "IBTA vol. 1 9.7.5.1.4 (length check); rxe check_length"},
    {rule::req_dma_length, "req.dma_length",
     "An RDMA WRITE's payloads add up to its RETH DMA length; a READ's DMA length is at most 2^31.",
     "flow::responder::judge (dma_length, read_length)", "IBTA vol. 1 9.4.3, 9.4.4, 9.7.5.1.4"},
    {rule::resp_ack_psn, "resp.ack_psn",
     "An ACK, NAK or RNR NAK names a PSN its requester sent (a capture may record that request after it) and "
     "acknowledges nothing beyond it; a READ or atomic not yet answered is acknowledged by its responses, not by an "
     "ACKNOWLEDGE naming one of its PSNs (unless the capture is complete, responses that come after such an "
     "ACKNOWLEDGE answer it: a path may reorder them).",
     "the stream's PSN and READ records", "IBTA vol. 1 9.7.5.1.1, 9.7.5.1.5; rxe check_psn, hfi1 do_rc_ack"},
    {rule::resp_msn, "resp.msn",
     "The AETH MSN counts completed messages: it never decreases as the PSN acknowledged grows, and it never grows by more "
     "than the messages the requester has sent since.",
     "the stream's PSN record", "IBTA vol. 1 9.7.5.1.5 (MSN, C9-148); rxe execute, hfi1 rc_rcv"},
    {rule::resp_credits, "resp.credits",
     "A READ response that carries an AETH (FIRST, LAST, ONLY) and an ATOMIC_ACKNOWLEDGE carry an ACK syndrome, whose low "
     "bits are the credit code (0-30, or 31: no credit information); an RNR NAK or NAK syndrome there is no credit field.",
     "ib::syndrome", "IBTA vol. 1 9.7.5.1.4, 9.7.7.2 (end-to-end credits), table 46"},
    {rule::resp_read, "resp.read",
     "READ responses answer a READ: PSNs from its PSN, ONLY or FIRST, MIDDLE..., LAST in order, FIRST and MIDDLE of the "
     "path MTU, their payloads adding up to its DMA length.",
     "the stream's READ record (flow::responder's response shape)", "IBTA vol. 1 9.4.4, 9.7.5.2.1; rxe read_reply"},
    {rule::resp_atomic, "resp.atomic",
     "An ATOMIC_ACKNOWLEDGE (one AtomicAckETH) answers an atomic, on its PSN; an atomic whose VA is not 8-byte aligned is "
     "not executed (NAK invalid request), so it gets no ATOMIC_ACKNOWLEDGE.",
     "the stream's request record", "IBTA vol. 1 9.4.5; rxe rxe_mr_do_atomic_op, hfi1 rc_rcv"},
    {rule::resp_nak_code, "resp.nak_code",
     "The AETH syndrome is a defined ACK, RNR NAK or NAK; a NAK code is one the request it names could cause (0-3; a "
     "remote access error only for a request carrying an R_Key; 4, invalid RD request, only on RD).",
     "ib::syndrome; the stream's request record", "IBTA vol. 1 9.7.5.1.4, table 44; rxe rxe_responder"},
    {rule::retx_restart, "retx.restart",
     "After a PSN sequence error NAK naming PSN n, the requester resends from n or before (go-back-N), not from a later "
     "PSN, and does not go on as if it had not come.",
     "the stream's PSN record", "IBTA vol. 1 9.7.4.1.3; rxe req_retry; spec/flow.md §2"},
    {rule::retx_rnr_wait, "retx.rnr_wait",
     "After an RNR NAK, nothing is resent before its RNR timer has passed (less max(10 ms, 10%): timers tick coarsely).",
     "ib::rnr_to_us", "IBTA vol. 1 9.7.5.2.8, table 45 (RNR timer); rxe rnr_nak_timer"},
    {rule::pagefault_no_retransmit, "pagefault.no_retransmit",
     "After a page-fault ACK (an RNR NAK answering an RDMA WRITE, READ or atomic; a PageFaultDelay cell) the requester sends "
     "nothing on that QP until the delay has passed.",
     "ib::page_fault_ack", "page-fault explicit flow control (seed 000); spec/flow.md §3, spec/roce.md §6"},
    {rule::dc_connect_first, "dc.connect_first", "A DC stream starts with a connect.", "flow::dc_target::judge (stranger)",
     "Mellanox DC transport; spec/roce.md §5, spec/flow.md §4"},
    {rule::dc_disconnect_last, "dc.disconnect_last",
     "No new data follows a DC disconnect until the next connect (an older PSN's resend is not new).",
     "flow::dc_target::judge (stranger, closed_before)", "spec/roce.md §5, spec/flow.md §4"},
    {rule::pp_idata_bounds, "pp.idata_bounds",
     "A push-push transfer indication (idata, BufferRDMAIndicate) names an advertised pool and element, and its byte count "
     "fits the element (an immediate naming no advertised pool is not idata).",
     "flow::pool_owner::on_indication (unknown_pool, too_large); flow::pp_tracker::claims_idata", "split-model driver IV.A.2, IV.B.2 (seed 003); spec/push-push.md §6, spec/flow.md §1"},
    {rule::pp_element_free, "pp.element_free",
     "No RDMA write lands in a pool element the owner has not lent (not advertised, or consumed and not yet returned).",
     "flow::pool_owner (element lent)", "split-model driver IV.B (seed 003); spec/flow.md §1"},
    {rule::pp_write_after_flush, "pp.write_after_flush", "No RDMA write lands in a pool after its flush completed.",
     "flow::pool_owner (pool_state::flushed)", "split-model driver IV.B.1 (seed 003); spec/flow.md §1"},
    {rule::cell_crc, "cell.crc", "A cell's cell CRC is the CRC-32C of its bytes.", "cell::inspect", "spec/cells.md §5"},
    {rule::cell_packet_crc, "cell.packet_crc", "A packet's packet CRC, in its last cell, is the CRC-32C of its data.",
     "cell::reassembler", "spec/cells.md §5, §8"},
    {rule::cell_sequence, "cell.sequence",
     "A packet's cells agree (type, count, destination), come in CSN order with first and last flags in place, and a packet "
     "that lost cells is sent again.",
     "cell::inspect (check_header), cell::reassembler", "spec/cells.md §3, §8"},
    {rule::cnp_pacing, "cnp.pacing",
     "A notification point sends one QP at most one CNP per minimum interval (conform_options::cnp_interval, less the "
     "capture's 1 us resolution).",
     "flow::cnp_due", "mlx5 np_min_time_between_cnps; spec/qos.md §3"},
    {rule::apm_psn_continuity, "apm.psn_continuity",
     "When a QP's requests move to another path (another address pair, MigReq set, where they carried MigReq clear), the "
     "first PSN on the new path is at most the next the old path would have sent: no PSN is skipped across the migration.",
     "the old and new paths' PSN records", "IBTA vol. 1 17.2.8 (automatic path migration), 9.7.1; spec/qos.md §9"},
}};

namespace detail {
template <std::size_t... I>
constexpr auto rule_names_of(std::index_sequence<I...>) {
  return std::array<wire::named_value, rule_count>{wire::named_value{rule_table[I].id, rule_table[I].name}...};
}
constexpr bool rule_table_in_order() {
  for (std::size_t i = 0; i < rule_count; ++i)
    if (static_cast<std::size_t>(rule_table[i].id) != i) return false;
  return true;
}
static_assert(rule_table_in_order(), "rule_table lists the rules in enum order");
}  // namespace detail
inline constexpr auto rule_names = detail::rule_names_of(std::make_index_sequence<rule_count>{});
constexpr std::span<const wire::named_value> wire_enum_names(rule) { return rule_names; }
constexpr const rule_info& info(rule r) { return rule_table[static_cast<std::size_t>(r)]; }
/// The rule named `name` ("req.mtu"), or nullopt.
constexpr std::optional<rule> rule_named(std::string_view name) {
  for (const rule_info& r : rule_table)
    if (r.name == name) return r.id;
  return std::nullopt;
}

// ---------------------------------------------------------------------------------- what it says

/// One violation.
struct violation {
  std::uint64_t frame = 0;  ///< the frame number given with the frame that shows it
  rule id{};
  std::string conversation;  ///< "RC 198.18.0.1 QP 0x000011 > 198.18.0.2 QP 0x000012", see conversation_name
  std::string expected, seen;
  friend bool operator==(const violation&, const violation&) = default;
};

/// Bounds. A full table refuses new entries (counted in conform_summary::dropped_conversations);
/// nothing grows without limit.
struct conform_limits {
  /// Request streams (RC, UC, DC, UD) tracked at once.
  std::size_t max_streams = 4096;
  /// PSNs remembered per stream (each request packet's kind, frame and MSN), a power of two.
  std::uint32_t history = 4096;
  /// READ and atomic requests remembered per stream.
  std::size_t reads = 256;
  /// Push-push host pairs with a pool owner replica (each holds pool_slots x pool_elements).
  std::size_t max_pp_pairs = 64;
  /// Bytes of one SEND message assembled to read it as a push-push message.
  std::size_t max_message = 65536;
  /// Violations held until finish() (the rest are counted, not kept).
  std::size_t max_deferred = 65536;
  /// Cell packets reassembled at once, and the bytes of each (allocated when the first cell
  /// comes: their product); a packet beyond them is not judged.
  std::size_t cell_packets = 256, cell_packet_bytes = 65536;
};

struct conform_options {
  wire::codec_options codec{};  ///< RoCEv2 UDP port (any source port), 0x40-0x5F as DC or RD
  /// The path MTU; 0 infers it: per request stream, the largest FIRST or MIDDLE request payload
  /// that is an IBTA MTU (256..4096), learned by learn() over the whole capture first, or else
  /// from the stream's first FIRST or MIDDLE (requests or READ responses) as the capture shows it.
  std::uint32_t mtu = 0;
  /// Rules judged (bit i: rule i); others are not reported.
  std::uint32_t rules = (1u << rule_count) - 1;
  /// The capture is complete: taken at an endpoint, nothing lost, duplicated or reordered
  /// before it (spec/conformance.md §1, --complete). Then a skipped PSN, a response seen before
  /// the request it answers, a READ response missing, DC data before its connect and a cell
  /// packet that fails to join are violations at once, where otherwise the capture's own losses
  /// and reorderings explain them.
  bool complete = false;
  /// cnp.pacing: the least time between two CNPs to one QP from one sender, ns (mlx5's default
  /// np_min_time_between_cnps, 4 us); 0 judges none.
  std::uint64_t cnp_interval = 4'000;
  conform_limits limits{};
};

struct conform_summary {
  std::uint64_t frames = 0, roce = 0, cells = 0, other = 0;
  std::uint64_t conversations = 0;          ///< request streams seen
  std::uint64_t dropped_conversations = 0;  ///< streams not tracked (max_streams)
  std::uint64_t dropped_violations = 0;     ///< deferred violations beyond max_deferred
  std::array<std::uint64_t, rule_count> violations{};
};

/// The IBTA MTU values a path MTU can take.
constexpr bool is_ib_mtu(std::uint64_t n) { return n == 256 || n == 512 || n == 1024 || n == 2048 || n == 4096; }

// ---------------------------------------------------------------------------------- the checker

class conformance {
 public:
  /// An endpoint: an IP address (IPv4 in the first 4 bytes) or, for cells, a MAC.
  using host = flow::host;


  explicit conformance(conform_options o = {}) : opt_(o) {
    hist_mask_ = std::bit_ceil(std::max<std::uint32_t>(opt_.limits.history, 64)) - 1;
  }

  const conform_options& options() const { return opt_; }
  const conform_summary& summary() const { return sum_; }

  /// First pass (optional): learns each request stream's path MTU from its RoCEv2 FIRST and
  /// MIDDLE payloads (cells carry packets whole: their MTU shows as check() reassembles them).
  void learn(std::span<const std::byte> f) {
    ib::roce_view v;
    if (ib::inspect(f, v, with_crc(wire::crc_check::skip)).code == wire::errc{})
      note_mtu(ip_host(v, true), ip_host(v, false), v.bth().destqp, *v.op, v.payload.size());
  }

  /// Judges the capture's next frame (number `frame`, captured at `time_ns`; `wire_len`, when
  /// larger than the bytes captured, says the capture cut it: such a frame is judged by its
  /// headers alone).
  /// Returns the violations this frame shows now (valid until the next call).
  std::span<const violation> check(std::uint64_t frame, std::uint64_t time_ns, std::span<const std::byte> f,
                                   std::size_t wire_len = 0) {
    now_.clear();
    ++sum_.frames;
    if (time_ns < last_ns_) time_ns = last_ns_;
    last_ns_ = time_ns;
    frame_ = frame;
    t_ = time_ns;
    pp_.begin_frame(frame);
    const auto l2 = wire::locate_payload(f);
    if (wire_len > f.size()) {
      // Cut by the capture's snaplen: its headers still say what the transport did; its
      // lengths, CRC and payload cannot be judged (the payload reads as zeros).
      if (!l2 || l2->type == cell::ethertype || wire_len > wire::pcap::max_record) {
        ++sum_.other;
        return now_;
      }
      cut_.assign(f.begin(), f.end());
      cut_.resize(wire_len);
      on_roce(cut_, true);
      return now_;
    }
    if (l2 && l2->type == cell::ethertype) on_cell(f);
    else on_roce(f);
    return now_;
  }

  /// The end of the capture: violations that only what followed could show (a PSN never sent, a
  /// NAK never obeyed, a packet whose lost cells were never sent again), by frame.
  std::vector<violation> finish() {
    for (auto& [k, s] : streams_) {
      if (s->reliable())
        for (const gap& g : s->gaps) judge_gap(*s, g);
      judge_ahead(*s);
      judge_early(*s);
      // (A capture that loses the requester's packets may have lost the resend.)
      if (s->restart && s->restart->offending && !lossy(*s))
        report_at(*s->restart->offending, rule::retx_restart, *s, "a resend from PSN " + psn_text(s->restart->psn) + " (NAK at frame " + std::to_string(s->restart->frame) + ")",
                  s->restart->offence);
      // (A capture that loses the DCI's packets may have lost the connects.)
      if (!lossy(*s)) {
        for (const stream::stranger& g : s->strangers)
          report_at(g.frame, g.after_disconnect ? rule::dc_disconnect_last : rule::dc_connect_first, *s,
                    g.after_disconnect ? "a connect before new data" : "a connect first", g.seen);
        for (const stream::msn_drop& m : s->msn_back) report_at(m.frame, rule::resp_msn, *s, m.want, m.seen);
      }
      s->msn_back.clear();
      s->gaps.clear();
      s->denied.clear();
      s->restart.reset();
      s->strangers.clear();
    }
    for (const auto& [k, g] : cell_gaps_)
      if (!g.reported)
        report_at(g.frame, g.id, g.conv + " PSN " + psn_text(k.second.second & ib::psn_mask), g.want, g.seen + "; never delivered whole");
    cell_gaps_.clear();
    std::vector<violation> out = std::move(deferred_);
    deferred_.clear();
    std::stable_sort(out.begin(), out.end(), [](const violation& a, const violation& b) { return a.frame < b.frame; });
    return out;
  }

  /// "RC 198.18.0.1 QP 0x000011 > 198.18.0.2 QP 0x000012": the requester (its QP once a response
  /// named it, else ?) and the responder.
  template <class Stream>
  static std::string conversation_name(const Stream& s) {
    static constexpr std::array<std::string_view, 4> svc{"RC", "UC", "UD", "DC"};
    return std::string{svc[static_cast<std::size_t>(s.svc)]} + " " + s.requester.text() + " QP " +
           (s.requester_qp ? qp_text(*s.requester_qp) : std::string{"?"}) + " > " + s.responder.text() + " QP " + qp_text(s.responder_qp);
  }

 private:
  using responder_t = responder<16>;
  using dct_t = dc_target<16>;
  using owner_t = pp_tracker::owner_t;
  using actions_t = action_list<qp_action_t, 64>;

  // One request packet as sent (the history ring, by PSN).
  struct sent {
    bool used = false;
    std::uint32_t psn = 0;
    ib::opcode op{};
    std::uint64_t frame = 0, time = 0;
  };
  struct read_rec {  // a READ or atomic request
    std::uint32_t psn = 0, dmalen = 0;
    bool atomic = false;
    bool answered = false;  ///< a response of it was seen
    std::uint64_t va = 0, frame = 0;
    std::uint32_t next = 0;  ///< once answered: the PSN of the READ response expected next
  };
  struct gap {
    std::uint32_t from = 0, to = 0;  ///< PSNs skipped (inclusive)
    std::uint64_t frame = 0;         ///< the packet that skipped them
    bool moved = false;              ///< skipped across a path migration (apm.psn_continuity)
  };
  struct restart_due {
    std::uint32_t psn = 0, msn = 0;
    std::uint64_t frame = 0;
    std::optional<std::uint64_t> offending{};
    std::string offence{};
  };
  struct wait_due {
    std::uint32_t psn = 0;
    std::uint64_t at = 0;           ///< when the NAK was captured
    std::uint64_t delay = 0;        ///< the announced wait, ns
    std::uint64_t until = 0;        ///< the earliest a resend may be seen (delay less the tolerance)
    std::uint64_t grace_until = 0;  ///< page-fault ACK: new packets sent before it arrived may still be seen
    std::uint64_t frame = 0;
    bool page_fault = false;
  };
  struct stream {
    host requester, responder;
    std::uint32_t responder_qp = 0;
    std::optional<std::uint32_t> requester_qp{};
    service svc = service::rc;
    std::optional<responder_t> rs{};
    dct_t* dct = nullptr;  ///< DC: the target the DCI talks to now (targets_)
    std::uint32_t mtu = 0;  ///< 0: not known yet
    bool started = false;
    bool synced = false;  ///< the replica has seen a message start (RC, UC)
    std::uint32_t sent_max = 0;
    std::vector<sent> hist;
    std::vector<read_rec> reads;
    std::size_t reads_next = 0;
    std::vector<gap> gaps;
    /// PSN sequence error NAKs (the responder asked for this PSN), newest last: a gap holding
    /// one is the requester's, not the capture's.
    struct denial {
      std::uint32_t psn = 0;
      std::uint64_t frame = 0;
    };
    std::vector<denial> denied;
    /// Responses that named a PSN beyond the highest sent when they came: a host's transmitted
    /// and received frames may reach the capture by different paths, so the request may follow.
    /// Judged at the end, or when the stream starts a new connection.
    struct ahead {
      std::uint32_t psn = 0;
      bool nak = false;  ///< a NAK or RNR NAK (it may name the PSN after the highest sent)
      std::uint64_t frame = 0;
      std::string seen;
    };
    std::vector<ahead> aheads;
    /// ACKs and NAKs that acknowledged a READ or atomic before any response of it came: a path
    /// that reorders may bring the responses after them. Forgiven when they come; judged at the
    /// end, or when the stream starts a new connection.
    struct early_ack {
      std::uint32_t read_psn = 0;
      std::uint64_t frame = 0;
      std::string expected, seen;
    };
    std::vector<early_ack> early;
    std::uint64_t last_request = 0;  ///< frame of the stream's latest request
    std::optional<restart_due> restart{};
    std::uint32_t satisfied_nak_psn = 0, satisfied_nak_msn = 0;
    bool any_satisfied = false;
    std::optional<wait_due> wait{};
    bool any_disconnect = false;  ///< DC: a disconnect was seen on the stream
    /// DC: data a target took for a stranger's, reported by finish() unless a connect that
    /// came late in the capture (reordered) started it.
    struct stranger {
      host target;
      std::uint32_t dct = 0, psn = 0;
      std::uint64_t frame = 0;
      bool after_disconnect = false;
      std::string seen;
    };
    std::vector<stranger> strangers;
    /// DC: responses whose MSN went back, reported by finish() unless the capture loses this
    /// DCI's packets (a connect among them).
    struct msn_drop {
      std::uint64_t frame = 0;
      std::string want, seen;
    };
    std::vector<msn_drop> msn_back;
    /// Per responder (one for RC; a DC target's host): the response that acknowledged the most.
    struct acked {
      host from;
      std::uint32_t qp = 0;
      bool have = false;
      std::uint32_t through = 0, msn = 0;
    };
    std::vector<acked> acks;
    acked& acks_of(const host& h, std::uint32_t qp) {
      for (acked& a : acks)
        if (a.from == h && a.qp == qp) return a;
      if (acks.size() >= 16) acks.erase(acks.begin());
      return acks.emplace_back(acked{h, qp});
    }
    /// DC: the DCI's connections, newest last: the target a response's PSN came from.
    struct connection {
      host target;
      std::uint32_t dct = 0, psn = 0;
    };
    std::vector<connection> connections;
    /// The responder that sent a response naming psn, from host `from`.
    std::uint32_t responder_of(const host& from, std::uint32_t psn) const {
      for (std::size_t i = connections.size(); i-- > 0;)
        if (connections[i].target == from && !ib::psn_before(psn, connections[i].psn)) return connections[i].dct;
      return responder_qp;
    }
    // push-push: the SEND message being joined, and the one the current packet completed
    send_joiner message;
    std::optional<std::span<const std::byte>> joined{};
    bool reliable() const { return svc == service::rc || svc == service::dc; }
  };
  using stream_key = std::tuple<host, host, std::uint32_t, service>;  // requester, responder, responder QP

  struct cell_gap {  // a packet that failed to join, until it is delivered whole
    std::uint64_t frame = 0;
    rule id{};
    std::string conv, want, seen;
    bool reported = false;  ///< reported at once (a complete capture)
  };

  wire::codec_options with_crc(wire::crc_check c) const {
    wire::codec_options o = opt_.codec;
    o.crc = c;
    return o;
  }
  static std::string qp_text(std::uint32_t q) {
    static constexpr char hexd[] = "0123456789abcdef";
    std::string s = "0x";
    for (int i = 20; i >= 0; i -= 4) s += hexd[(q >> i) & 15];
    return s;
  }
  static std::string psn_text(std::uint32_t p) { return std::to_string(p); }
  static host ip_host(const ib::roce_view& v, bool src) {
    host h{};
    if (v.v6) {
      const auto a = src ? v.ipv6().src : v.ipv6().dst;
      std::copy(a.begin(), a.end(), h.b.begin());
      h.kind = 6;
    } else {
      const auto a = src ? v.ipv4().src : v.ipv4().dst;
      std::copy(a.begin(), a.end(), h.b.begin());
      h.kind = 4;
    }
    return h;
  }
  static host mac_host(const wire::mac_address& m) {
    host h{};
    std::copy(m.begin(), m.end(), h.b.begin());
    h.kind = 1;
    return h;
  }
  /// A request stream's path MTU, from its FIRST and MIDDLE payloads (learn()).
  void note_mtu(const host& src, const host& dst, std::uint32_t dqp, const ib::opcode_info& op, std::size_t payload) {
    if (!op.request || !op.payload || (op.pos != ib::position::first && op.pos != ib::position::middle) || !is_ib_mtu(payload)) return;
    auto& m = mtus_[std::tuple{src, dst, dqp}];
    m = std::max<std::uint32_t>(m, static_cast<std::uint32_t>(payload));
  }
  std::uint32_t mtu_of(const host& src, const host& dst, std::uint32_t dqp) const {
    if (opt_.mtu) return opt_.mtu;
    const auto it = mtus_.find(std::tuple{src, dst, dqp});
    return it == mtus_.end() ? 0 : it->second;
  }

  // ------------------------------------------------------------------ reporting

  bool on(rule r) const { return (opt_.rules >> static_cast<unsigned>(r)) & 1u; }
  void report(rule r, const std::string& conv, std::string expected, std::string seen) {
    if (!on(r)) return;
    ++sum_.violations[static_cast<std::size_t>(r)];
    now_.push_back({frame_, r, conv, std::move(expected), std::move(seen)});
  }
  void report(rule r, const stream& s, std::string expected, std::string seen) {
    report(r, conversation_name(s), std::move(expected), std::move(seen));
  }
  void report_at(std::uint64_t frame, rule r, const std::string& conv, std::string expected, std::string seen) {
    if (!on(r)) return;
    ++sum_.violations[static_cast<std::size_t>(r)];
    if (deferred_.size() >= opt_.limits.max_deferred) {
      ++sum_.dropped_violations;
      return;
    }
    deferred_.push_back({frame, r, conv, std::move(expected), std::move(seen)});
  }
  void report_at(std::uint64_t frame, rule r, const stream& s, std::string expected, std::string seen) {
    report_at(frame, r, conversation_name(s), std::move(expected), std::move(seen));
  }

  // ------------------------------------------------------------------ RoCEv2

  void on_roce(std::span<const std::byte> f, bool cut = false) {
    ib::roce_view v;
    const wire::error e = ib::inspect(f, v, with_crc(cut ? wire::crc_check::skip : wire::crc_check::report));
    if (e.code != wire::errc{} && cut) {
      ++sum_.other;
      return;
    }
    if (e.code != wire::errc{}) {
      // Before the UDP destination port is known to be RoCEv2's, the frame is someone else's.
      const std::string_view fld = e.field;
      const bool ours = e.code != wire::errc::not_roce && !fld.starts_with("eth") && !fld.starts_with("ip") && fld != "udp";
      // A reserved opcode, another transport version or nonzero reserved fields: not judged
      // (vendors use them; IBTA reserves them).
      const bool shape = e.code == wire::errc::length_mismatch || e.code == wire::errc::truncated || e.code == wire::errc::chain_overrun ||
                         e.code == wire::errc::pad_overrun || e.code == wire::errc::trailing_bytes;
      if (!ours) {
        ++sum_.other;
        return;
      }
      ++sum_.roce;
      if (shape)
        report(rule::frame_length, "RoCEv2 frame", "lengths that agree with the opcode (" + std::string{fld} + ")",
               std::string{wire::to_string(e.code)} + " at byte " + std::to_string(e.offset));
      return;
    }
    ++sum_.roce;
    const host src = ip_host(v, true), dst = ip_host(v, false);
    if (v.icrc_state == ib::crc_status::bad) {
      report(rule::frame_icrc, std::string{v.op->name} + " " + src.text() + " > " + dst.text() + " QP " + qp_text(v.bth().destqp),
             hex32(ib::icrc_shown(v.icrc_computed)), hex32(ib::icrc_shown(v.icrc)));
      return;  // a receiver drops it: the machines never see it
    }
    if (v.op->is(ib::op_class::cnp)) judge_cnp(src, dst, v.bth().destqp);
    const packet p = from_roce(v);
    on_packet(p, src, dst, via::roce);
  }
  /// cnp.pacing: the CNP before this one from src to QP `qp` of dst.
  void judge_cnp(const host& src, const host& dst, std::uint32_t qp) {
    if (!opt_.cnp_interval) return;
    const auto key = std::tuple{src, dst, qp};
    auto it = last_cnp_.find(key);
    if (it == last_cnp_.end()) {
      if (last_cnp_.size() < opt_.limits.max_streams) last_cnp_.emplace(key, t_);
      return;
    }
    const std::uint64_t gap = t_ - it->second;
    it->second = t_;
    if (gap + 1000 < opt_.cnp_interval)
      report(rule::cnp_pacing, "CNP " + src.text() + " > " + dst.text() + " QP " + qp_text(qp),
             "at least " + std::to_string(opt_.cnp_interval) + " ns since the last", std::to_string(gap) + " ns");
  }
  static std::string hex32(std::uint32_t x) {
    static constexpr char hexd[] = "0123456789abcdef";
    std::string s = "0x";
    for (int i = 28; i >= 0; i -= 4) s += hexd[(x >> i) & 15];
    return s;
  }

  // ------------------------------------------------------------------ cells

  void on_cell(std::span<const std::byte> f) {
    cell::cell_view c;
    const wire::error e = cell::inspect(f, c, {.crc = wire::crc_check::report, .max_cell_payload = cell::max_cell_payload});
    ++sum_.cells;
    if (e.code != wire::errc{}) {
      const std::string_view fld = e.field;
      if (e.code == wire::errc::not_cell) return;
      report(rule::cell_sequence, "cells", "a cell header that agrees with itself (" + std::string{fld} + ")",
             std::string{wire::to_string(e.code)} + " at byte " + std::to_string(e.offset));
      return;
    }
    const host src = mac_host(c.src()), dst = mac_host(c.dst());
    const std::string conv = "cells " + src.text() + " WQP " + qp_text(c.hdr.src_wqp) + " > " + dst.text() + " WQP " + qp_text(c.hdr.dst_wqp);
    if (c.crc_state == wire::crc_status::bad) {
      report(rule::cell_crc, conv, hex32(c.crc_computed), hex32(c.crc));
      return;
    }
    // Packets that lost cells before the capture point are forgotten after cell_age of capture
    // time (their resends start again from the first cell).
    if (!cells_) cells_.emplace(cell::reassembly_limits{.max_packets = opt_.limits.cell_packets, .max_packet_bytes = opt_.limits.cell_packet_bytes,
                                                         .max_bytes = opt_.limits.cell_packets * opt_.limits.cell_packet_bytes,
                                                         .max_age_ns = cell_age, .max_cell_payload = cell::max_cell_payload,
                                                         .history = 64});
    if (t_ - cells_expired_ >= cell_age / 16) cells_->expire(t_), cells_expired_ = t_;
    const cell::packet_key key{c.src(), c.hdr.src_wqp, c.hdr.psn, c.hdr.response};
    const auto gap_key = std::pair{src, std::pair<std::uint32_t, std::uint32_t>{c.hdr.src_wqp, c.hdr.psn | (c.hdr.response ? 1u << 31 : 0)}};
    cell::push_result r = cells_->push(c, t_);
    // A full table makes room: the packets that lost cells longest ago go first.
    for (std::uint64_t older = cell_age / 2; r.status == cell::push_status::rejected && r.error.code == wire::errc::reassembly_full &&
                                             r.error.field == "packets" && older >= 1000;
         older /= 2) {
      cells_->expire(t_ + cell_age - older);
      r = cells_->push(c, t_);
    }
    if (r.status == cell::push_status::rejected) {
      // Every failure to join a packet waits: it is a violation only if that packet is never
      // delivered whole later (a loss, duplicate or reordering before the capture point
      // explains it then).
      using E = wire::errc;
      const auto defer = [&](rule id, std::string want, std::string seen) {
        if (cells_delivered_.count(gap_key)) return;  // a late copy of a packet delivered already
        // A complete capture shows every cell sent: a packet that fails to join is the sender's.
        if (cell_gaps_.size() >= opt_.limits.max_streams || cell_gaps_.count(gap_key)) return;
        if (opt_.complete) report(id, conv + " PSN " + psn_text(c.hdr.psn & ib::psn_mask), want, seen);
        cell_gaps_.emplace(gap_key, cell_gap{frame_, id, conv, std::move(want), std::move(seen), opt_.complete});
      };
      switch (r.error.code) {
        case E::packet_crc_mismatch: defer(rule::cell_packet_crc, "the packet CRC of its cells' data", "another"); break;
        case E::invalid_field:  // a cell that disagrees with its packet's first
          defer(rule::cell_sequence, "cells that agree with their packet's first (" + std::string{r.error.field} + ")", "another value");
          break;
        case E::cell_out_of_order:
        case E::cell_missing:
          defer(rule::cell_sequence, "the packet's cells in order, or all sent again", std::string{wire::to_string(r.error.code)});
          break;
        default: break;  // duplicates, this checker's bounds
      }
      return;
    }
    if (r.status != cell::push_status::delivered || !r.packet) return;
    cell_gaps_.erase(gap_key);
    if (cells_delivered_.size() >= max_delivered) cells_delivered_.clear();  // (a bound: forgets, never grows)
    cells_delivered_.insert(gap_key);
    const cell::delivered_packet d = *r.packet;
    const auto p = from_cell(d, opt_.codec);
    cells_->forget(key);  // the transport judges duplicates by PSN
    if (!p) return;
    on_packet(*p, src, dst, d.type != cell::cell_type::transport ? via::native_cell : via::cell);
  }

  // ------------------------------------------------------------------ streams

  /// How a packet came: cells name both WQPs (src_qp is the sender's); native cells carry no
  /// MSN or credits.
  enum class via : std::uint8_t { roce, cell, native_cell };

  void on_packet(const packet& p, const host& src, const host& dst, via how) {
    if (!p.known()) return;
    const ib::opcode_info& o = p.info();
    if (o.is(ib::op_class::cnp)) return;  // congestion notification: no transport rules
    if (o.request) on_request(p, src, dst, how);
    else on_response(p, src, dst, how);
  }

  stream* request_stream(const packet& p, const host& src, const host& dst) {
    const ib::opcode_info& o = p.info();
    const service svc = o.tp == ib::transport::uc ? service::uc : o.tp == ib::transport::ud ? service::ud
                        : o.tp == ib::transport::dc                                       ? service::dc
                                                                                           : service::rc;
    if (o.tp == ib::transport::rd) return nullptr;  // IBTA RD: not judged
    // A DC stream is its DCI's (one PSN space whichever target it talks to); others a QP pair's.
    const stream_key k = svc == service::dc ? stream_key{src, host{}, p.dc_initiator(), svc} : stream_key{src, dst, p.dest_qp, svc};
    if (const auto it = streams_.find(k); it != streams_.end()) return it->second.get();
    if (streams_.size() >= opt_.limits.max_streams) {
      ++sum_.dropped_conversations;
      return nullptr;
    }
    ++sum_.conversations;
    auto s = std::make_unique<stream>();
    s->requester = src;
    s->responder = dst;
    s->responder_qp = p.dest_qp;
    s->svc = svc;
    s->hist.resize(hist_mask_ + 1);
    s->reads.resize(opt_.limits.reads);
    s->message = send_joiner{opt_.limits.max_message};
    s->mtu = mtu_of(src, dst, p.dest_qp);
    if (svc == service::dc) s->requester_qp = p.dc_initiator();
    else s->rs.emplace();  // made at the first message start (on_request)
    stream* raw = s.get();
    streams_.emplace(k, std::move(s));
    return raw;
  }

  /// PSNs a request may lie from its stream's newest and still belong to its connection
  /// (spec/conformance.md: a new connection on the same QP numbers).
  static constexpr std::int32_t new_connection_distance = 1 << 16;
  /// Ends a stream's connection: what follows, from a request at `psn`, is judged as a new one.
  /// Gaps and responses ahead that waited for the old connection's end are judged now (it will
  /// send nothing more); responses ahead that name PSNs near `psn` answer the new one and wait.
  void renew(stream& s, std::uint32_t psn) {
    const auto near = [&](const stream::ahead& a) { return std::abs(ib::psn_diff(a.psn, psn)) <= new_connection_distance; };
    std::vector<stream::ahead> keep;
    for (const stream::ahead& a : s.aheads)
      if (near(a)) keep.push_back(a);
    std::erase_if(s.aheads, near);
    if (s.reliable())
      for (const gap& g : s.gaps) judge_gap(s, g);
    judge_ahead(s);
    judge_early(s);
    s.aheads = std::move(keep);
    s.denied.clear();
    s.started = false;
    s.synced = false;
    s.sent_max = 0;
    std::fill(s.hist.begin(), s.hist.end(), sent{});
    std::fill(s.reads.begin(), s.reads.end(), read_rec{});
    s.reads_next = 0;
    s.gaps.clear();
    s.restart.reset();
    s.any_satisfied = false;
    s.wait.reset();
    s.acks.clear();
    s.message.reset();
    s.joined.reset();
  }

  sent& entry(stream& s, std::uint32_t psn) { return s.hist[psn & hist_mask_]; }
  static const sent* find_sent(const stream& s, std::uint32_t psn) {
    const sent& e = s.hist[psn & (s.hist.size() - 1)];
    return e.used && e.psn == psn ? &e : nullptr;
  }
  /// The latest READ or atomic whose PSNs cover psn.
  static read_rec* find_read(stream& s, std::uint32_t psn) {
    for (std::size_t k = 0; k < s.reads.size(); ++k) {
      read_rec& r = s.reads[(s.reads_next + s.reads.size() - 1 - k) % s.reads.size()];
      if (r.frame == 0) break;
      const std::uint32_t n = r.atomic ? 1 : read_packets(s, r.dmalen);
      if (!ib::psn_before(psn, r.psn) && ib::psn_before(psn, ib::psn_add(r.psn, n))) return &r;
    }
    return nullptr;
  }
  /// The PSNs a READ of dmalen takes (at most: with the MTU not known yet, as if the smallest).
  static std::uint32_t read_packets(const stream& s, std::uint32_t dmalen) {
    const std::uint32_t m = s.mtu ? s.mtu : 256;
    return dmalen == 0 ? 1 : static_cast<std::uint32_t>((std::uint64_t{dmalen} + m - 1) / m);
  }
  void learn_stream_mtu(stream& s, std::uint32_t m) {
    if (s.mtu || !is_ib_mtu(m)) return;
    s.mtu = m;
    if (s.rs) s.rs->set_mtu(m);
    if (s.dct) s.dct->set_mtu(m);
  }
  /// The replica of DC target `dct` on host `h` (its access key from the first packet seen).
  dct_t* target(const host& h, const packet& p, std::uint32_t mtu) {
    const auto k = std::pair{h, p.dest_qp};
    if (const auto it = targets_.find(k); it != targets_.end()) return it->second.get();
    if (targets_.size() >= opt_.limits.max_streams) return nullptr;
    auto t = std::make_unique<dct_t>(typename dct_t::config{
        .dct = p.dest_qp, .access_key = p.dc_key, .resp = {.svc = service::dc, .mtu = mtu ? mtu : 4096, .qp = p.dest_qp}});
    t->post_receive(1u << 30);
    return targets_.emplace(k, std::move(t)).first->second.get();
  }

  /// A QP's requests moved here from the path `from` (flow::path_watch). An RC requester
  /// resends from its oldest unacknowledged PSN: its first PSN here is at most the old path's
  /// next. A later one skipped PSNs, unless the capture lost the old path's last requests: a
  /// complete capture reports it now; otherwise it is a gap of this stream, judged at the end
  /// as its skips are (the responder asked for one of them and it never came). UC does not
  /// resend (a skip is what the dying path lost), and a PSN far from the old path's is no move
  /// of that connection (another one on the same QP number): neither is judged. The old path's
  /// gaps from this PSN on are filled here.
  void judge_migration(stream& s, const packet& p, const path_watch::path& from) {
    const auto it = streams_.find(stream_key{from.src, from.dst, p.dest_qp, s.svc});
    if (it == streams_.end() || !it->second->started) return;
    stream& old = *it->second;
    const std::uint32_t next = ib::psn_add(old.sent_max, 1);  // (a READ's: past its last response)
    if (std::abs(ib::psn_diff(p.psn, next)) > new_connection_distance) return;
    if (!ib::psn_after(p.psn, old.sent_max)) fill_gaps(old, p.psn, static_cast<std::uint32_t>(ib::psn_diff(old.sent_max, p.psn)) + 1);
    if (s.svc != service::rc || !ib::psn_after(p.psn, next)) return;
    const gap g{next, ib::psn_add(p.psn, -1), frame_, true};
    if (opt_.complete) report(rule::apm_psn_continuity, s, moved_expected(g), moved_seen(g));
    else if (s.gaps.size() < 64) s.gaps.push_back(g);
  }
  static std::string moved_expected(const gap& g) { return "PSN " + psn_text(g.from) + " (the old path's next) first on the new path"; }
  static std::string moved_seen(const gap& g) { return range_text(g.from, g.to) + " skipped"; }

  void on_request(const packet& p, const host& src, const host& dst, via how) {
    stream* sp = request_stream(p, src, dst);
    if (!sp) return;
    stream& s = *sp;
    const ib::opcode_info& o = p.info();
    if (how != via::roce && s.svc != service::dc) s.requester_qp = p.src_qp;
    if (o.pos == ib::position::first || o.pos == ib::position::middle) learn_stream_mtu(s, p.length);
    if (s.svc == service::ud) {  // no PSN rules; the payload fits the MTU
      if (s.mtu && p.length > s.mtu) report(rule::req_mtu, s, "at most " + std::to_string(s.mtu) + " payload bytes", std::to_string(p.length));
      return;
    }
    // DC: the target's view of connections first.
    if (s.svc == service::dc) {
      s.dct = target(dst, p, s.mtu);
      if (!s.dct) return;
      s.responder = dst;
      s.responder_qp = p.dest_qp;
      const auto ev = s.dct->judge(p);
      if (!ev) return;
      if (*ev == dct_event::stranger) {
        const std::string seen = std::string{ib::info(p.opcode).name} + " PSN " + psn_text(p.psn);
        // A complete capture shows the connect before its data; else a reordered connect may come.
        if (!s.dct->closed_before(p.dc_initiator(), p.psn) && opt_.complete)
          report(s.any_disconnect ? rule::dc_disconnect_last : rule::dc_connect_first, s,
                 s.any_disconnect ? "a connect before new data" : "a connect first", seen);
        else if (!s.dct->closed_before(p.dc_initiator(), p.psn) && s.strangers.size() < 64)
          s.strangers.push_back({dst, p.dest_qp, p.psn, frame_, s.any_disconnect, seen});
        track_psn(s, p);
        return;
      }
      if (*ev == dct_event::disconnect) s.any_disconnect = true;
      if (*ev == dct_event::connect) {  // data that came before it in the capture was reordered
        if (s.connections.size() >= 16) s.connections.erase(s.connections.begin());
        s.connections.push_back({dst, p.dest_qp, p.psn});
        std::erase_if(s.strangers, [&](const stream::stranger& g) {
          return g.target == dst && g.dct == p.dest_qp && ib::psn_after(g.psn, p.psn);
        });
      }
      if (*ev != dct_event::data) {
        track_psn(s, p);
        actions_t a;
        (void)s.dct->on_packet(p, a.out);
        return;
      }
    }
    // The same hosts and QP numbers again in a new connection (a program run again): its PSNs
    // start anywhere. A request further than new_connection_distance PSNs from the stream's
    // newest starts the stream afresh.
    if (s.svc != service::dc && s.started && std::abs(ib::psn_diff(p.psn, ib::psn_add(s.sent_max, 1))) > new_connection_distance)
      renew(s, p.psn);
    if (s.svc == service::rc || s.svc == service::uc)
      if (const auto from = paths_.on_request(p.dest_qp, src, dst, p.psn, p.mig_req, frame_)) judge_migration(s, p, *from);
    (void)track_psn(s, p);
    // A capture may start inside a message (or lose its first packets): the replica starts at
    // the first packet that starts a message, whatever came before it.
    if (s.rs && !s.synced) {
      if (!o.starts()) return;
      s.rs.emplace(responder_config{.svc = s.svc, .mtu = s.mtu ? s.mtu : 4096, .start_psn = p.psn, .qp = p.dest_qp});
      s.rs->post_receive(1u << 30);  // the real receive queue is not seen: never RNR
      s.synced = true;
    }
    // The responder's judgement.
    invalid_reason why{};
    const responder_t& r = s.rs ? *s.rs : s.dct->transport();
    const resp_event ev = r.judge(p, &why);
    actions_t a;
    if (ev == resp_event::invalid) {
      switch (why) {
        case invalid_reason::sequence:
          report(rule::req_opcode_sequence, s, r.state() == resp_state::ready && !starts_ok(o) ? "a FIRST or ONLY" : "the message in progress continued",
                 std::string{o.name} + " PSN " + psn_text(p.psn));
          break;
        case invalid_reason::mtu:
          report(rule::req_mtu, s,
                 o.ends() ? "at most " + std::to_string(r.mtu()) + " payload bytes" : std::to_string(r.mtu()) + " payload bytes (the path MTU)",
                 std::to_string(p.length) + " in " + std::string{o.name});
          break;
        case invalid_reason::dma_length:
        case invalid_reason::read_length:
          report(rule::req_dma_length, s, why == invalid_reason::read_length ? "a READ of at most 2^31 bytes" : "payloads adding up to the DMA length",
                 std::string{o.name} + " PSN " + psn_text(p.psn) + (o.has(ib::ext::reth) ? ", DMA length " + std::to_string(p.dmalen) : std::string{}));
          break;
        default: break;  // operations this checker does not execute (FLUSH, ATOMIC_WRITE): not judged
      }
      // Followed past it; what an operation it does not execute (FLUSH, ATOMIC_WRITE) would
      // place or deliver is not judged.
      s.rs ? s.rs->force(p, a.out) : s.dct->force(p, a.out);
      if (why != invalid_reason::operation) executed(s, p, a);
      return;
    }
    if (s.rs) (void)s.rs->on_packet(p, a.out);
    else (void)s.dct->on_packet(p, a.out);
    if (ev == resp_event::execute) executed(s, p, a);
  }
  static bool starts_ok(const ib::opcode_info& o) { return o.starts(); }
  static std::string hex64(std::uint64_t x) {
    static constexpr char hexd[] = "0123456789abcdef";
    std::string s = "0x";
    for (int i = 60; i >= 0; i -= 4) s += hexd[(x >> i) & 15];
    return s;
  }

  /// Records a request's PSN; returns whether it was sent before (a resend or a duplicate).
  /// Judges req.psn_sequence (gaps), retx.restart, retx.rnr_wait and pagefault.no_retransmit.
  bool track_psn(stream& s, const packet& p) {
    const ib::opcode_info& o = p.info();
    const bool read = o.is(ib::op_class::read_request) || o.is(ib::op_class::read_as_write);
    const std::uint32_t span = read && o.is(ib::op_class::read_request) ? read_packets(s, p.dmalen) : 1;
    const std::uint32_t last = ib::psn_add(p.psn, span - 1);
    sent& e = entry(s, p.psn);
    const bool seen_before = e.used && e.psn == p.psn;
    s.last_request = frame_;
    if (!s.started) {
      s.started = true;
      s.sent_max = last;
    } else if (s.reliable()) {
      const std::int32_t d = ib::psn_diff(p.psn, ib::psn_add(s.sent_max, 1));
      if (d > 0) {
        // A READ of unknown MTU before it: its responses took PSNs the MTU did not say.
        const read_rec* rr = s.mtu ? nullptr : find_read(s, s.sent_max);  // NOLINT
        if (rr && !rr->atomic) {
          const std::uint32_t n = static_cast<std::uint32_t>(ib::psn_diff(p.psn, rr->psn));
          for (std::uint32_t m = 256; m <= 4096; m *= 2)
            if ((std::uint64_t{rr->dmalen} + m - 1) / m == n) {
              learn_stream_mtu(s, m);
              break;
            }
        }
        const std::int32_t d2 = ib::psn_diff(p.psn, ib::psn_add(s.sent_max, 1));
        const gap g{ib::psn_add(s.sent_max, 1), ib::psn_add(p.psn, -1), frame_};
        // A complete capture shows every packet sent: a skip is the sender's at once. Else it
        // waits: a later packet may fill it, a response acknowledge past it (judge_gap).
        if (d2 > 0 && opt_.complete)
          report(rule::req_psn_sequence, s, "PSN " + psn_text(g.from) + " next", "PSN " + psn_text(p.psn) + " (" + range_text(g.from, g.to) + " skipped)");
        else if (d2 > 0)
          lost_request(s, g);
      }
      if (!ib::psn_before(last, ib::psn_add(s.sent_max, 1))) s.sent_max = last;
      fill_gaps(s, p.psn, span);
    } else if (ib::psn_after(last, s.sent_max)) {
      s.sent_max = last;
    }
    explain_ahead(s);
    // Retransmission rules (a resend: a PSN sent before; a new packet: beyond sent_max then).
    if (s.restart) {
      restart_due& r = *s.restart;
      if (seen_before && !ib::psn_after(p.psn, r.psn)) {
        s.any_satisfied = true, s.satisfied_nak_psn = r.psn, s.satisfied_nak_msn = r.msn;
        s.restart.reset();
      } else if (!r.offending) {
        r.offending = frame_;
        r.offence = seen_before ? "a resend from PSN " + psn_text(p.psn) : "new PSN " + psn_text(p.psn) + " and no resend";
      }
    }
    if (s.wait) {
      wait_due& w = *s.wait;
      const std::string after = " " + std::to_string((t_ - w.at) / 1000) + " us after the " + (w.page_fault ? "page-fault ACK" : "RNR NAK") +
                                " (frame " + std::to_string(w.frame) + "), which announced " + std::to_string(w.delay / 1000) + " us";
      if (t_ >= w.until) {
        s.wait.reset();
      } else if (w.page_fault) {
        if (seen_before || t_ >= w.grace_until) {  // else sent before the ACK reached the requester
          report(rule::pagefault_no_retransmit, s, "nothing on the QP until the delay has passed",
                 std::string{o.name} + " PSN " + psn_text(p.psn) + after);
          s.wait.reset();
        }
      } else if (seen_before) {
        report(rule::retx_rnr_wait, s, "no resend before the RNR timer", "PSN " + psn_text(p.psn) + " resent" + after);
        s.wait.reset();
      }
    }
    if (!seen_before) {
      e = sent{};
      e.used = true;
      e.psn = p.psn;
      e.op = p.opcode;
      e.frame = frame_;
      e.time = t_;
    }
    if ((o.is(ib::op_class::read_request) || o.is(ib::op_class::atomic)) && !seen_before) {
      s.reads[s.reads_next] = {p.psn, p.dmalen, o.is(ib::op_class::atomic), false, p.va, frame_};
      s.reads_next = (s.reads_next + 1) % s.reads.size();
    }
    return seen_before;
  }
  /// Requests from s's requester host to its responder host that the capture lacks (a gap):
  /// the capture loses frames of that direction.
  void lost_request(stream& s, const gap& g) {
    if (s.gaps.size() < 64) s.gaps.push_back(g);
    if (lossy_.size() < opt_.limits.max_streams) lossy_.insert({s.requester, s.responder});
  }
  /// The capture lost requests from s's requester host to its responder host (a gap in any of
  /// that direction's request streams, over the whole capture so far).
  bool lossy(const stream& s) const { return lossy_.count({s.requester, s.responder}) != 0; }
  static std::string range_text(std::uint32_t from, std::uint32_t to) {
    return "PSN " + psn_text(from) + (to != from ? ".." + psn_text(to) : "");
  }
  /// A gap still open when its connection ends. Lost before the capture point, or missed by
  /// it, it would have been resent, or the responder's acknowledgements would have passed it:
  /// the capture may simply lack those frames. It is the requester's when the responder asked
  /// for one of its PSNs (a PSN sequence error NAK) and it was never sent all the same.
  void judge_gap(const stream& s, const gap& g) {
    const auto d = std::find_if(s.denied.begin(), s.denied.end(),
                                [&](const stream::denial& x) { return !ib::psn_before(x.psn, g.from) && !ib::psn_after(x.psn, g.to); });
    if (d == s.denied.end()) return;  // nothing in the capture says the requester skipped it
    if (g.moved) return report_at(g.frame, rule::apm_psn_continuity, s, moved_expected(g), moved_seen(g) + ", though the responder asked for PSN " + psn_text(d->psn));
    report_at(g.frame, rule::req_psn_sequence, s, range_text(g.from, g.to) + " sent",
              "never sent, though the responder asked for PSN " + psn_text(d->psn) + " (NAK at frame " + std::to_string(d->frame) +
                  "); the stream went on to PSN " + psn_text(s.sent_max));
  }
  /// The PSN a response may name at most: the highest sent (a NAK or RNR NAK: the one after it,
  /// the PSN expected, which may not have reached the capture point whole).
  static std::uint32_t ack_limit(const stream& s, bool nak) { return nak ? ib::psn_add(s.sent_max, 1) : s.sent_max; }
  /// Responses ahead that the requests since explain.
  static void explain_ahead(stream& s) {
    if (!s.aheads.empty()) std::erase_if(s.aheads, [&](const stream::ahead& a) { return !ib::psn_after(a.psn, ack_limit(s, a.nak)); });
  }
  static void forgive_early(stream& s, std::uint32_t read_psn) {
    if (!s.early.empty()) std::erase_if(s.early, [&](const stream::early_ack& e) { return e.read_psn == read_psn; });
  }
  /// Acknowledgements of a READ or atomic whose responses never came, at their connection's
  /// end; unless the capture loses frames of the stream (then it may have lost the responses).
  void judge_early(stream& s) {
    if (!lossy(s))
      for (const stream::early_ack& e : s.early) report_at(e.frame, rule::resp_ack_psn, s, e.expected, e.seen);
    s.early.clear();
  }
  /// Responses ahead that nothing explained, at their connection's end. Their requests were
  /// never sent when the capture holds the requester going on after them, in sequence, without
  /// ever reaching their PSN. Else the capture may have lost them: it loses requests of that
  /// direction (lossy), or holds none of the stream's requests after the response (the capture
  /// ended, or lost the rest of that direction).
  void judge_ahead(stream& s) {
    explain_ahead(s);
    if (!lossy(s))
      for (const stream::ahead& a : s.aheads)
        if (s.last_request > a.frame)
          report_at(a.frame, rule::resp_ack_psn, s,
                    "a PSN up to " + psn_text(ack_limit(s, a.nak)) + (a.nak ? " (the one after the highest sent)" : " (the highest sent)"),
                    a.seen + "; never sent");
    s.aheads.clear();
  }
  static void fill_gaps(stream& s, std::uint32_t psn, std::uint32_t span) {
    for (std::size_t i = 0; i < s.gaps.size();) {
      gap& g = s.gaps[i];
      const std::uint32_t last = ib::psn_add(psn, span - 1);
      if (ib::psn_after(psn, g.to) || ib::psn_before(last, g.from)) {
        ++i;
        continue;
      }
      // what is left of the gap on either side of [psn, last]
      const bool left = ib::psn_before(g.from, psn), right = ib::psn_after(g.to, last);
      if (left && right) {
        const gap tail{ib::psn_add(last, 1), g.to, g.frame, g.moved};
        g.to = ib::psn_add(psn, -1);
        s.gaps.push_back(tail);
        ++i;
      } else if (left) {
        g.to = ib::psn_add(psn, -1);
        ++i;
      } else if (right) {
        g.from = ib::psn_add(last, 1);
        ++i;
      } else {
        s.gaps.erase(s.gaps.begin() + static_cast<std::ptrdiff_t>(i));
      }
    }
  }

  /// What a request the replica executed delivered (push-push).
  void executed(stream& s, const packet& p, const actions_t& a) {
    s.joined.reset();
    for (const auto& act : a.out) {
      if (const auto* pl = std::get_if<qp_action::place>(&act)) placed(s, p, *pl);
      else if (const auto* rc = std::get_if<qp_action::receive>(&act)) received(s, p, *rc);
    }
  }

  // ------------------------------------------------------------------ responses

  stream* response_stream(const packet& p, const host& src, const host& dst) {
    // A response from src to dst's QP p.dest_qp answers a stream from dst to src.
    if (p.info().tp == ib::transport::dc) {  // to its DCI
      const auto it = streams_.find(stream_key{dst, host{}, p.dest_qp, service::dc});
      return it == streams_.end() ? nullptr : it->second.get();
    }
    const auto key = std::tuple{dst, src, p.dest_qp};
    if (const auto bound = bound_.find(key); bound != bound_.end()) return bound->second;
    // Unbound: the streams from dst to src whose requester is not known yet are candidates; a
    // response that names a PSN it acknowledges (an ACK, a READ response, an atomic ACK) rules
    // out those that never sent it. It is bound (and judged) when one candidate holds its PSN,
    // or when there is only one candidate at all.
    const ib::syndrome syn{p.aeth.syndrome};
    const bool names_received = !p.info().has(ib::ext::aeth) || syn.kind() == ib::aeth_kind::ack;
    auto& out = excluded_[key];
    std::vector<stream*> all, holding;
    for (auto it = streams_.lower_bound(stream_key{dst, src, 0, service{}}); it != streams_.end(); ++it) {
      const auto& [req, resp, qp, svc] = it->first;
      if (req != dst || resp != src) break;
      stream& s = *it->second;
      if (!s.reliable() || !s.started || s.requester_qp || std::find(out.begin(), out.end(), &s) != out.end()) continue;
      all.push_back(&s);
      if (names_received && holds(s, p)) holding.push_back(&s);
    }
    stream* pick = holding.size() == 1 ? holding[0] : holding.empty() && all.size() == 1 ? all[0] : nullptr;
    if (!pick) {
      if (holding.size() > 1)
        for (stream* s : all)
          if (std::find(holding.begin(), holding.end(), s) == holding.end() && out.size() < 64) out.push_back(s);
      return nullptr;
    }
    pick->requester_qp = p.dest_qp;
    excluded_.erase(key);
    if (bound_.size() < opt_.limits.max_streams) bound_.emplace(key, pick);
    return pick;
  }

  /// A response in cells names the responder's WQP (src_qp) and the requester's (dest_qp).
  stream* cell_stream(const packet& p, const host& src, const host& dst) {
    const auto it = streams_.find(stream_key{dst, src, p.src_qp, service::rc});
    if (it == streams_.end() || (it->second->requester_qp && *it->second->requester_qp != p.dest_qp)) return nullptr;
    return it->second.get();
  }
  /// Stream s sent the request this response acknowledges (of the kind it answers).
  static bool holds(stream& s, const packet& p) {
    const ib::opcode_info& o = p.info();
    const read_rec* r = find_read(s, p.psn);
    if (o.is(ib::op_class::read_response)) return r && !r->atomic;
    if (o.op == ib::operation::atomic_acknowledge) return r && r->atomic && r->psn == p.psn;
    const sent* e = find_sent(s, p.psn);
    return e && !ib::info(e->op).any(ib::op_class::read_request | ib::op_class::atomic);
  }

  void on_response(const packet& p, const host& src, const host& dst, via how) {
    const bool native_cell = how == via::native_cell;
    stream* sp = how == via::roce || p.info().tp == ib::transport::dc ? response_stream(p, src, dst) : cell_stream(p, src, dst);
    if (!sp) return;  // answers requests the capture did not show
    stream& s = *sp;
    const ib::opcode_info& o = p.info();
    const bool has_aeth = o.has(ib::ext::aeth) && !native_cell;  // native cells carry no MSN or credits
    const bool plain = o.op == ib::operation::acknowledge;
    if (o.is(ib::op_class::read_response) && (o.pos == ib::position::first || o.pos == ib::position::middle) && !s.mtu) {
      // The MTU, first learned here, says how many PSNs the READ took.
      learn_stream_mtu(s, p.length);
      if (const read_rec* r = find_read(s, p.psn); r && !r->atomic) {
        const std::uint32_t end = ib::psn_add(r->psn, read_packets(s, r->dmalen) - 1);
        if (ib::psn_after(end, s.sent_max)) s.sent_max = end;
        explain_ahead(s);
      }
    }
    if (read_rec* r = find_read(s, p.psn); o.is(ib::op_class::read_response) && r && !r->atomic) {
      // A complete capture holds every response: one that skips its READ's next PSN says one
      // was lost (a resend going back is not). Judged before the response's own rules: a
      // response that breaks them still came.
      const std::uint32_t want = r->answered ? r->next : r->psn;
      if (opt_.complete && ib::psn_after(p.psn, want))
        report(rule::resp_read, s, "READ response PSN " + psn_text(want) + " next (the READ at PSN " + psn_text(r->psn) + ")",
               std::string{o.name} + " PSN " + psn_text(p.psn) + " (" + range_text(want, ib::psn_add(p.psn, -1)) + " missing)");
      r->answered = true;
      r->next = ib::psn_add(p.psn, 1);
      forgive_early(s, r->psn);
    }
    const ib::syndrome syn{p.aeth.syndrome};
    if (has_aeth && syn.kind() == ib::aeth_kind::reserved)
      return report(rule::resp_nak_code, s, "an ACK, RNR NAK or NAK syndrome", "reserved syndrome " + hex8(syn.raw) + " in " + std::string{o.name});
    if (has_aeth && !plain && syn.kind() != ib::aeth_kind::ack)
      return report(rule::resp_credits, s, "an ACK syndrome (a credit code) in " + std::string{o.name},
                    std::string{syn.kind() == ib::aeth_kind::nak ? "NAK" : "RNR NAK"} + " syndrome " + hex8(syn.raw));
    // The PSN named was sent (a NAK may name the one after the last seen: it names the PSN
    // expected, which may not have reached the capture point whole), and a READ or atomic not
    // yet answered is not acknowledged by it.
    const bool nak_type = o.has(ib::ext::aeth) && syn.kind() != ib::aeth_kind::ack;
    if (ib::psn_after(p.psn, ack_limit(s, nak_type))) {
      const std::string seen = std::string{o.name} + " PSN " + psn_text(p.psn);
      if (opt_.complete) return report(rule::resp_ack_psn, s, "a PSN up to " + psn_text(s.sent_max) + " (the highest sent)", seen);
      // The request may reach the capture later (transmitted and received frames recorded
      // through different paths): judged at the end. The response is not followed meanwhile.
      if (s.aheads.size() < 64) s.aheads.push_back({p.psn, nak_type, frame_, seen});
      return;
    }
    read_rec* rr = find_read(s, p.psn);
    if (plain && rr && !rr->answered && (syn.kind() == ib::aeth_kind::ack || p.psn != rr->psn)) {
      std::string expected = std::string{rr->atomic ? "an ATOMIC_ACKNOWLEDGE" : "READ responses"} + " for the request at PSN " + psn_text(rr->psn) +
                             " (frame " + std::to_string(rr->frame) + ")";
      std::string seen = std::string{syn.kind() == ib::aeth_kind::ack ? "an ACK" : "a NAK"} + " naming PSN " + psn_text(p.psn);
      if (opt_.complete) return report(rule::resp_ack_psn, s, expected, seen);
      if (s.early.size() < 64) s.early.push_back({rr->psn, frame_, std::move(expected), std::move(seen)});
      return;
    }
    if (o.is(ib::op_class::read_response)) check_read_response(s, p);
    if (o.op == ib::operation::atomic_acknowledge) {
      const sent* q = find_sent(s, p.psn);
      if (q && !ib::info(q->op).is(ib::op_class::atomic))
        report(rule::resp_atomic, s, "an ATOMIC_ACKNOWLEDGE only for an atomic", "one for " + std::string{ib::info(q->op).name} + " PSN " + psn_text(p.psn));
      else if (rr && rr->atomic && rr->psn == p.psn && rr->va % 8 != 0 && !rr->answered)
        report(rule::resp_atomic, s, "a NAK invalid request: the atomic's VA " + hex64(rr->va) + " is not 8-byte aligned", "an ATOMIC_ACKNOWLEDGE");
    }
    if ((o.is(ib::op_class::read_response) || o.op == ib::operation::atomic_acknowledge) && rr) rr->answered = true, forgive_early(s, rr->psn);
    if (!o.has(ib::ext::aeth)) return;
    const std::uint32_t through = syn.kind() == ib::aeth_kind::ack ? p.psn : ib::psn_add(p.psn, -1);
    if (syn.kind() == ib::aeth_kind::nak) check_nak(s, p, syn);
    if (syn.kind() == ib::aeth_kind::rnr_nak) rnr(s, p, syn);
    if (has_aeth) check_msn(s, p, through, src);
    // What the responder acknowledges it has: gaps there were losses of the capture, and a
    // NAK or RNR NAK before it has been answered.
    if (syn.kind() == ib::aeth_kind::ack || syn.kind() == ib::aeth_kind::nak) {
      std::erase_if(s.gaps, [&](const gap& g) { return !ib::psn_after(g.to, through); });
      if (s.restart && ib::psn_after(through, s.restart->psn)) s.restart.reset();
      if (s.wait && !ib::psn_before(through, s.wait->psn) && syn.kind() == ib::aeth_kind::ack) s.wait.reset();
    }
  }
  static std::string hex8(std::uint8_t x) {
    static constexpr char hexd[] = "0123456789abcdef";
    return std::string{"0x"} + hexd[x >> 4] + hexd[x & 15];
  }

  void check_read_response(stream& s, const packet& p) {
    const ib::opcode_info& o = p.info();
    // Every READ the capture shows covering this PSN: a partial retry asks for the rest from a
    // later PSN, and responders answer it counted from the retry (hfi1) or from the original (rxe).
    bool any = false;
    std::string want_text;
    for (std::size_t k = 0; k < s.reads.size(); ++k) {
      read_rec& r = s.reads[(s.reads_next + s.reads.size() - 1 - k) % s.reads.size()];
      if (r.frame == 0) break;
      if (r.atomic) continue;
      const std::uint32_t n = read_packets(s, r.dmalen);
      if (ib::psn_before(p.psn, r.psn) || !ib::psn_before(p.psn, ib::psn_add(r.psn, n))) continue;
      any = true;
      const auto i = static_cast<std::uint32_t>(ib::psn_diff(p.psn, r.psn));
      const ib::position want = n == 1 ? ib::position::only : i == 0 ? ib::position::first : i + 1 == n ? ib::position::last : ib::position::middle;
      const std::uint32_t m = s.mtu ? s.mtu : 4096;
      const std::uint64_t want_len = want == ib::position::only ? r.dmalen : want == ib::position::last ? r.dmalen - std::uint64_t{i} * m : m;
      const bool sizes_known = s.mtu || n == 1;
      if (!s.mtu && n > 1) return;  // its shape needs the MTU
      if (o.pos == want && (!sizes_known || p.length == want_len)) return;
      if (want_text.empty())
        want_text = std::string{position_name(want)} + (sizes_known ? " of " + std::to_string(want_len) + " payload bytes" : std::string{}) + " (response " +
                    std::to_string(i + 1) + " of " + std::to_string(n) + " to the READ at PSN " + psn_text(r.psn) + ", DMA length " + std::to_string(r.dmalen) + ")";
    }
    if (any) return report(rule::resp_read, s, want_text, std::string{o.name} + " of " + std::to_string(p.length) + " payload bytes");
    // FLUSH and ATOMIC_WRITE are answered by an empty READ_RESPONSE_ONLY (rxe).
    if (const sent* q = find_sent(s, p.psn)) {
      const ib::opcode_info& qo = ib::info(q->op);
      if (!qo.any(ib::op_class::flush | ib::op_class::atomic_write))
        report(rule::resp_read, s, "READ responses only for a READ", std::string{o.name} + " PSN " + psn_text(p.psn) + " answers " + std::string{qo.name});
    }
  }
  static std::string_view position_name(ib::position p) {
    switch (p) {
      case ib::position::first: return "FIRST";
      case ib::position::middle: return "MIDDLE";
      case ib::position::last: return "LAST";
      default: return "ONLY";
    }
  }

  void check_nak(stream& s, const packet& p, ib::syndrome syn) {
    const std::uint8_t code = syn.value();
    if (code >= static_cast<std::uint8_t>(ib::nak_code::invalid_rd_request))
      return report(rule::resp_nak_code, s, "NAK codes 0-3 (4 is RD's, 5-31 reserved)", "NAK code " + std::to_string(code));
    if (code == static_cast<std::uint8_t>(ib::nak_code::remote_access_error))
      if (const sent* q = find_sent(s, p.psn)) {
        const ib::opcode_info& qo = ib::info(q->op);
        if (!qo.has(ib::ext::reth) && !qo.has(ib::ext::atomiceth) && !qo.is(ib::op_class::write))
          report(rule::resp_nak_code, s, "a remote access error only for a request with an R_Key", "one for " + std::string{qo.name} + " PSN " + psn_text(p.psn));
      }
    if (code != static_cast<std::uint8_t>(ib::nak_code::psn_sequence_error)) return;
    // The responder asks for p.psn: a gap holding it is the requester's unless it is sent.
    if (s.denied.size() >= 16) s.denied.erase(s.denied.begin());
    s.denied.push_back({p.psn, frame_});
    // go-back-N from p.psn; a repeat of a NAK already obeyed (a duplicate) asks nothing new
    if (s.any_satisfied && s.satisfied_nak_psn == p.psn && s.satisfied_nak_msn == p.aeth.msn) return;
    if (s.restart && s.restart->psn == p.psn) return;
    s.restart = restart_due{p.psn, p.aeth.msn, frame_, std::nullopt, {}};
  }

  void rnr(stream& s, const packet& p, ib::syndrome syn) {
    const sent* q = find_sent(s, p.psn);
    const ib::opcode_info* qo = q ? &ib::info(q->op) : nullptr;
    // A page-fault ACK: a PageFaultDelay cell, or an RNR NAK answering a request that needed no
    // receive (ib::needs_receive).
    const bool pf = p.fault_delay_us || (qo && !ib::needs_receive(*qo));
    wait_due w{};
    w.psn = p.psn;
    w.at = t_;
    w.frame = frame_;
    w.page_fault = pf;
    w.delay = std::uint64_t{p.fault_delay_us ? p.fault_delay_us : ib::rnr_to_us(syn.value())} * 1000;
    // A page-fault delay is exact (a capture's timestamps resolve to 1 us); an RNR timer runs
    // on coarse ticks: a resend up to max(10 ms, 10%) early is on time.
    const std::uint64_t tolerance = pf ? 1000 : std::max<std::uint64_t>(10'000'000, w.delay / 10);
    w.until = t_ + (w.delay > tolerance ? w.delay - tolerance : 0);
    // Packets the requester sent before the ACK reached it may still be seen for as long again
    // as the faulted request took to be answered, seen from the capture point.
    w.grace_until = t_ + (q && t_ > q->time ? t_ - q->time : 0);
    s.wait = w;
  }

  void check_msn(stream& s, const packet& p, std::uint32_t through, const host& from) {
    const std::uint32_t msn = p.aeth.msn & ib::psn_mask;
    const ib::opcode_info& o = p.info();
    stream::acked& k = s.acks_of(from, s.responder_of(from, p.psn));
    // Compared only with the response that acknowledged the most so far: stale, duplicate and
    // replayed responses (any MSN: rxe stamps the current one, others the original) are not.
    if (k.have && ib::psn_after(through, k.through)) {
      const std::int32_t grew = ib::psn_diff(msn, k.msn);
      const auto sent_since = static_cast<std::int64_t>(ib::psn_diff(s.sent_max, k.through));
      const std::string seen = "MSN " + std::to_string(msn) + " in " + std::string{o.name} + " PSN " + psn_text(p.psn);
      if (grew < 0) {
        std::string want = "MSN " + std::to_string(k.msn) + " or more (it was at PSN " + psn_text(k.through) + ")";
        if (s.svc != service::dc || opt_.complete) return report(rule::resp_msn, s, std::move(want), seen);
        // DC: a connect to another target the capture lost would explain it (that target's MSN
        // counts from 0): judged at the end. Followed meanwhile.
        if (s.msn_back.size() < 64) s.msn_back.push_back({frame_, std::move(want), seen});
        k.through = through, k.msn = msn;
        return;
      }
      if (grew > sent_since)
        return report(rule::resp_msn, s,
                      "MSN at most " + std::to_string((k.msn + sent_since) & ib::psn_mask) + " (" + std::to_string(sent_since) + " PSNs sent since MSN " +
                          std::to_string(k.msn) + ")",
                      seen);
    }
    if (!k.have || ib::psn_after(through, k.through)) k.have = true, k.through = through, k.msn = msn;
  }

  // ------------------------------------------------------------------ push-push

  void placed(stream& s, const packet& p, const qp_action::place& pl) {
    if (pl.to_receive) {  // a SEND's bytes, in PSN order as the replica executes them
      s.joined = s.message.add(p.info().pos, p.psn, p.payload, frame_);
      return;
    }
    // An RDMA write's first byte: the element it lands in must be lent.
    if (pl.offset != 0) return;
    const auto h = pp_.locate(s.responder, s.requester, pl.rkey, pl.va);
    if (!h) return;
    const owner_element e = pp_.books(s.responder, s.requester)->at(h->slot).el[h->element];
    const std::string pool = std::to_string(h->desc.pool_ref), el = std::to_string(h->element);
    if (h->state == pool_state::flushed)
      report(rule::pp_write_after_flush, s, "no write into pool " + pool + " after its flush", "a write into element " + el);
    else if (e != owner_element::lent)
      report(rule::pp_element_free, s, "a write into an element of pool " + pool + " the owner lent",
             "element " + el + (e == owner_element::consumed ? " (consumed, not returned)" : " (not lent)"));
  }
  void received(stream& s, const packet& p, const qp_action::receive& rc) {
    const ib::opcode_info& o = p.info();
    if (o.is(ib::op_class::write)) {  // RDMA WRITE with immediate: idata, when pp_tracker claims it
      // A cell's idata is always push-push (the framing is its own), on a pair with books.
      const bool cell = s.requester.kind == 1;
      if (rc.with_imm && (cell || pp_.claims_idata(s.responder, s.requester, rc.imm))) {
        const msg::indication i = msg::to_indication(msg::from_imm(rc.imm));
        if (const auto r = pp_.indicate(s.responder, s.requester, i)) indication(s, i, *r);
      }
      return;
    }
    if (!s.joined || s.joined->size() != rc.bytes) return;
    // A SEND from requester to responder, strictly decoded as a push-push message.
    (void)pp_.message(s.requester, s.responder, *s.joined,
                      [&](const msg::indication& i, const step_result& r) { indication(s, i, r); });
  }
  /// A transfer indication's outcome on the owner's books (the responder's).
  void indication(stream& s, const msg::indication& i, const step_result& r) {
    if (r.ok()) return;
    const msg::pool_descriptor* d = nullptr;
    if (const owner_t* books = pp_.books(s.responder, s.requester))
      if (const auto k = books->find(i.pool_ref)) d = &books->at(*k).desc;
    const std::string what = "pool " + std::to_string(i.pool_ref) + ", element " + std::to_string(i.element_index) + ", " + std::to_string(i.byte_count) + " bytes";
    if (r.error == errc::unknown_pool) {
      report(rule::pp_idata_bounds, s, "an advertised pool", what);
    } else if (r.error == errc::too_large) {
      report(rule::pp_idata_bounds, s, "1.." + std::to_string(d ? d->element_size : 0) + " bytes (the element size)", what);
    } else if (r.error == errc::element_not_on_loan) {
      if (d && i.element_index >= d->element_count)
        report(rule::pp_idata_bounds, s, "an element below " + std::to_string(d->element_count), what);
      // else the write's own placement judged the element (pp.element_free)
    }
  }

  conform_options opt_;
  std::uint32_t hist_mask_ = 0;
  conform_summary sum_{};
  std::vector<violation> now_, deferred_;
  std::uint64_t frame_ = 0, t_ = 0, last_ns_ = 0;
  std::vector<std::byte> cut_;  ///< a frame cut by the capture, zero-filled to its length
  std::map<std::tuple<host, host, std::uint32_t>, std::uint64_t> last_cnp_;  ///< cnp.pacing: (sender, receiver, QP) → its last CNP's time
  std::map<std::tuple<host, host, std::uint32_t>, std::uint32_t> mtus_;  // (requester, responder, responder QP)
  std::map<stream_key, std::unique_ptr<stream>> streams_;
  path_watch paths_{opt_.limits.max_streams};
  std::map<std::tuple<host, host, std::uint32_t>, stream*> bound_;
  std::map<std::tuple<host, host, std::uint32_t>, std::vector<stream*>> excluded_;  // while binding
  std::set<std::pair<host, host>> lossy_;  ///< (requester, responder) hosts whose requests the capture lost (lossy())
  pp_tracker pp_{pp_limits{.max_pairs = opt_.limits.max_pp_pairs}};
  std::map<std::pair<host, std::uint32_t>, std::unique_ptr<dct_t>> targets_;
  static constexpr std::uint64_t cell_age = 2'000'000;  ///< ns (capture time) an incomplete cell packet is kept
  std::optional<cell::reassembler> cells_;
  std::uint64_t cells_expired_ = 0;
  /// Cell packets delivered (a failure to join one of them again is a late copy's).
  static constexpr std::size_t max_delivered = 1u << 20;
  std::set<std::pair<host, std::pair<std::uint32_t, std::uint32_t>>> cells_delivered_;
  std::map<std::pair<host, std::pair<std::uint32_t, std::uint32_t>>, cell_gap> cell_gaps_;
};

}  // namespace pushwire::flow
