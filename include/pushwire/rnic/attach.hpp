// The control protocol of a device process (spec/rnicd.md §4): the messages a program, or the
// `ctl` command, exchanges with pushwire-rnicd over its control socket (a Unix SOCK_SEQPACKET
// socket: one message per packet). Every message starts with a ctl_header; a reply has the
// request's type + 1 and a nonzero status (an fn_errc) when refused. Big-endian, described once.
//
// attach (1) -> attached (2)     take a function; the reply carries three descriptors
//                                (SCM_RIGHTS): the region (memfd), the doorbell eventfd
//                                (program -> device) and the wake eventfd (device -> program)
// reserve (3) -> reserved (4)    count QPs, MRs, CQs or registered bytes against the function's
//                                limits (positive: take, negative: give back)
// command (5) -> output (6)      a `ctl` command line (words separated by NUL), its text reply
// notice (8)                     device -> program: the device stops serving it (the program's QPs fail)
// Between device processes, moving a function (spec/migration.md):
// migrate_offer (9) -> migrate_ready (10)   the function's image; the reply comes after the
//                                           attachments: held (status 0) or refused (fn_errc)
// migrate_attachment (11)                   one attachment, with its four descriptors
//                                           (SCM_RIGHTS: control socket, region, doorbell, wake)
// migrate_commit (12) -> migrate_committed (13)   serve it
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include <pushwire/rnic/function.hpp>
#include <pushwire/wire/codec.hpp>
#include <pushwire/wire/ethernet.hpp>

namespace pushwire::rnic::ctl {

enum class msg_type : std::uint16_t {
  attach = 1,
  attached = 2,
  reserve = 3,
  reserved = 4,
  command = 5,
  output = 6,
  notice = 8,
  migrate_offer = 9,
  migrate_ready = 10,
  migrate_attachment = 11,
  migrate_commit = 12,
  migrate_committed = 13,
};
inline constexpr std::array<wire::named_value, 12> msg_type_names{{
    {msg_type::attach, "attach"}, {msg_type::attached, "attached"}, {msg_type::reserve, "reserve"},
    {msg_type::reserved, "reserved"}, {msg_type::command, "command"}, {msg_type::output, "output"},
    {msg_type::notice, "notice"}, {msg_type::migrate_offer, "migrate_offer"}, {msg_type::migrate_ready, "migrate_ready"},
    {msg_type::migrate_attachment, "migrate_attachment"}, {msg_type::migrate_commit, "migrate_commit"},
    {msg_type::migrate_committed, "migrate_committed"},
}};
constexpr std::span<const wire::named_value> wire_enum_names(msg_type) { return msg_type_names; }

/// What a reserve counts (a function's limits, spec/rnicd.md §5).
enum class resource : std::uint8_t { qp = 1, mr = 2, cq = 3, bytes = 4 };
inline constexpr std::array<wire::named_value, 4> resource_names{{
    {resource::qp, "qp"}, {resource::mr, "mr"}, {resource::cq, "cq"}, {resource::bytes, "bytes"}}};
constexpr std::span<const wire::named_value> wire_enum_names(resource) { return resource_names; }

/// Largest message either side sends or takes, bytes.
inline constexpr std::size_t max_message = 65536;

struct ctl_header {
  PUSHWIRE_STRUCT(ctl_header,
      /// which message follows
      (msg_type, type),
      /// protocol version: 1
      (std::uint16_t, version),
      /// a reply: 0, or the fn_errc that refused the request; a request: 0
      (std::uint16_t, status),
      /// echoed by the reply
      (std::uint16_t, tag));
};

/// attach: take function `function` (0: the PF, n: VF n).
struct attach_request {
  PUSHWIRE_STRUCT(attach_request,
      (ctl_header, header),
      /// 0: the physical function; 1..: a virtual function
      (std::uint16_t, function),
      (wire::reserved<std::uint16_t>, reserved),
      /// the program's process ID (the device process shows the one the kernel gives it,
      /// SO_PEERCRED)
      (std::uint32_t, pid));
};

/// attached: what the program's engine is made with (its port's MAC, MTU and GIDs, the QPNs it
/// may use) and the limits it is held to.
struct attach_reply {
  PUSHWIRE_STRUCT(attach_reply,
      (ctl_header, header),
      /// the attachment's number (spec/rnicd.md §2)
      (std::uint32_t, attachment),
      (std::uint16_t, function),
      /// the port's MTU: 1024 or 4096
      (std::uint16_t, mtu),
      /// the function's MAC
      (wire::mac_address, mac),
      (wire::reserved<std::uint16_t>, reserved),
      /// the node GUID the program reports (EUI-64 of the MAC)
      (std::uint64_t, node_guid),
      /// the attachment's queue pair numbers: [qpn_first, qpn_first + qpn_count)
      (std::uint32_t, qpn_first),
      (std::uint32_t, qpn_count),
      /// slots per ring of the region (fn::valid_slots)
      (std::uint32_t, slots),
      /// the function's limits (spec/rnicd.md §5)
      (std::uint32_t, max_qps),
      (std::uint32_t, max_mrs),
      (std::uint32_t, max_cqs),
      (std::uint64_t, max_reg_bytes),
      /// the function's GIDs: GID 0 first
      (wire::counted<std::uint8_t, wire::ip_address<16>, "gid_count", 1>, gids));
};

/// reserve: count `count` objects (or bytes) of `kind` against the function; negative gives back.
struct reserve_request {
  PUSHWIRE_STRUCT(reserve_request,
      (ctl_header, header),
      (resource, kind),
      (wire::reserved<std::uint8_t>, reserved1),
      (wire::reserved<std::uint16_t>, reserved2),
      /// two's complement
      (std::uint64_t, count));
};

/// reserved (the status says whether), output (text), or a command (NUL-separated words).
struct text_message {
  PUSHWIRE_STRUCT(text_message,
      (ctl_header, header),
      (wire::rest<std::uint8_t>, text));
};

/// notice: the device stops serving the attachment; reason: shutting_down, or the ring error
/// (ring_index_out_of_range, slot_length_out_of_range) that detached it.
struct notice_message {
  PUSHWIRE_STRUCT(notice_message,
      (ctl_header, header),
      (std::uint16_t, reason),
      (wire::reserved<std::uint16_t>, reserved));
};

/// migrate_offer: a function's image (eswitch.hpp's function_image) moving to the receiving
/// device; `attachments` migrate_attachment messages follow.
struct migrate_offer {
  PUSHWIRE_STRUCT(migrate_offer,
      (ctl_header, header),
      /// its number, 1..127, on both devices
      (std::uint16_t, function),
      /// migrate_attachment messages that follow, 0..1023
      (std::uint16_t, attachments),
      (wire::mac_address, mac),
      /// the prefix length its addresses move with (0..32)
      (std::uint8_t, prefix),
      /// 1: trusted (no spoof check)
      (std::uint8_t, trust),
      (std::uint32_t, max_qps),
      (std::uint32_t, max_mrs),
      (std::uint32_t, max_cqs),
      (wire::reserved<std::uint32_t>, reserved),
      (std::uint64_t, max_reg_bytes),
      /// bits per second; 0: unlimited
      (std::uint64_t, rate_bps),
      /// its GIDs, 1..4 (the rest zero)
      (std::uint8_t, gid_count),
      (wire::reserved<std::uint8_t>, reserved2),
      (wire::ip_address<16>, gid0),
      (wire::ip_address<16>, gid1),
      (wire::ip_address<16>, gid2),
      (wire::ip_address<16>, gid3),
      /// its P_Keys, 1..16
      (wire::counted<std::uint16_t, std::uint16_t, "pkey_count", 1>, pkeys));
};

/// migrate_attachment: one attachment of the function on offer, what it holds of the limits;
/// its descriptors ride with it.
struct migrate_attachment {
  PUSHWIRE_STRUCT(migrate_attachment,
      (ctl_header, header),
      /// its QPN block, 1..1023 (the same on the new device)
      (std::uint32_t, id),
      (std::uint32_t, pid),
      (std::uint64_t, qps),
      (std::uint64_t, mrs),
      (std::uint64_t, cqs),
      (std::uint64_t, bytes));
};

/// The type of a message, or nullopt when it is shorter than a header or not version 1.
inline std::optional<ctl_header> peek_header(std::span<const std::byte> m) {
  auto h = wire::decode_prefix<ctl_header>(m);
  if (!h || h->version != fn::version) return std::nullopt;
  return *h;
}

}  // namespace pushwire::rnic::ctl
