// CfgUtil messages (split-model driver, IV.B.3): configuration and utility requests from the host to the
// I/O unit's NIC, and their replies. The generic messages carry opaque data; for the request
// codes below, request_data<C> / reply_data<C> decode and validate it and encode_request<C> /
// encode_reply<C> build whole frames.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include <pushwire/msg/header.hpp>

namespace pushwire::msg {

namespace cfg {

/// CfgUtil request codes. 0x8000-0xFFFF are vendor utility requests with opaque data.
enum class request_code : std::uint16_t {
  get_mac_address = 0x0001,
  set_mac_address = 0x0002,
  get_statistics = 0x0003,
  set_mtu = 0x0004,
  get_link_state = 0x0005,
  set_promiscuous = 0x0006,
  initialize_nic = 0x0007,
};
inline constexpr std::array<wire::named_value, 7> request_code_names{{
    {request_code::get_mac_address, "GetMacAddress"},
    {request_code::set_mac_address, "SetMacAddress"},
    {request_code::get_statistics, "GetStatistics"},
    {request_code::set_mtu, "SetMtu"},
    {request_code::get_link_state, "GetLinkState"},
    {request_code::set_promiscuous, "SetPromiscuous"},
    {request_code::initialize_nic, "InitializeNic"},
}};
constexpr std::span<const wire::named_value> wire_enum_names(request_code) {
  return request_code_names;
}
inline constexpr std::uint16_t vendor_first = 0x8000;
constexpr bool is_vendor(request_code c) { return static_cast<std::uint16_t>(c) >= vendor_first; }

/// CfgUtilReply status.
enum class status : std::uint16_t {
  success = 0,
  unsupported_request = 1,
  invalid_argument = 2,
  busy = 3,
  device_error = 4,
};
inline constexpr std::array<wire::named_value, 5> status_names{{
    {status::success, "success"},
    {status::unsupported_request, "unsupported_request"},
    {status::invalid_argument, "invalid_argument"},
    {status::busy, "busy"},
    {status::device_error, "device_error"},
}};
constexpr std::span<const wire::named_value> wire_enum_names(status) { return status_names; }

/// No data.
struct none {
  PUSHWIRE_EMPTY_STRUCT(none);
};

/// A 6-byte IEEE 802 MAC address (GetMacAddress reply, SetMacAddress request).
struct mac_address {
  PUSHWIRE_STRUCT(mac_address, (std::array<std::uint8_t, 6>, mac));
};

/// GetStatistics reply: the LAN NIC's counters since it started or was last initialized with
/// reset_statistics. rx: from the LAN towards the host; tx: from the host onto the LAN.
struct statistics {
  PUSHWIRE_STRUCT(statistics,
      /// Frames and bytes (Ethernet header on, FCS off) taken from and given to the LAN.
      (std::uint64_t, rx_frames), (std::uint64_t, tx_frames),
      (std::uint64_t, rx_bytes), (std::uint64_t, tx_bytes),
      /// Frames refused: malformed from the LAN, or refused by the LAN.
      (std::uint64_t, rx_errors), (std::uint64_t, tx_errors),
      /// Frames dropped for want of buffers or carrier (the MAC filter's drops are not counted).
      (std::uint64_t, rx_dropped), (std::uint64_t, tx_dropped),
      /// TCP aggregation: segments from the LAN that went to the host inside an aggregate of
      /// two or more, and those aggregates (each one packet to the host).
      (std::uint64_t, rx_aggregated_segments), (std::uint64_t, rx_aggregates));
};

/// SetMtu request and reply data. Request: the MTU wanted, 0 to ask without changing it.
/// Reply: the MTU in effect, whatever the status.
struct mtu_setting {
  PUSHWIRE_STRUCT(mtu_setting,
      /// The LAN MTU in bytes (IP packet, Ethernet header excluded).
      (std::uint32_t, mtu));
};

/// GetLinkState reply.
struct link_state {
  PUSHWIRE_STRUCT(link_state,
      /// 1 when the link is up, 0 when down; other values are invalid_field.
      (std::uint32_t, up),
      /// Link speed in Mb/s.
      (std::uint32_t, speed_mbps));
  static constexpr wire::error wire_check(const link_state& v) {
    return v.up > 1 ? wire::field_error<link_state>(errc::invalid_field, "up") : wire::error{};
  }
};

/// SetPromiscuous request.
struct promiscuous {
  PUSHWIRE_STRUCT(promiscuous,
      /// 1 to enable promiscuous mode, 0 to disable; other values are invalid_field.
      (std::uint32_t, enable));
  static constexpr wire::error wire_check(const promiscuous& v) {
    return v.enable > 1 ? wire::field_error<promiscuous>(errc::invalid_field, "enable")
                        : wire::error{};
  }
};

/// InitializeNic request flags (nic_init::flags); other bits are invalid_field.
enum class init_flag : std::uint32_t {
  reset_statistics = 1,  ///< GetStatistics counts from zero again
  set_mac = 2,           ///< take nic_init::mac; without it, the NIC's own (factory) MAC
  promiscuous = 4,       ///< deliver every unicast frame, whatever its destination MAC
};
inline constexpr std::uint32_t init_flags_all = 7;

/// InitializeNic request: the whole state a host wants the LAN NIC in, applied at once (a
/// driver's open). The NIC applies all of it or, with invalid_argument, none of it.
struct nic_init {
  PUSHWIRE_STRUCT(nic_init,
      /// init_flag bits.
      (std::uint32_t, flags),
      /// The LAN MTU wanted in bytes, 0 for the NIC's current one.
      (std::uint32_t, mtu),
      /// With set_mac: a unicast, nonzero MAC. Otherwise ignored (send zeros).
      (std::array<std::uint8_t, 6>, mac),
      (wire::reserved<std::uint16_t>, reserved));
  static constexpr wire::error wire_check(const nic_init& v) {
    return (v.flags & ~init_flags_all) != 0 ? wire::field_error<nic_init>(errc::invalid_field, "flags") : wire::error{};
  }
};

/// InitializeNic reply: the LAN NIC's state after the request (on any status).
struct nic_state {
  PUSHWIRE_STRUCT(nic_state,
      /// The MAC the NIC receives on and sends from.
      (std::array<std::uint8_t, 6>, mac),
      (wire::reserved<std::uint16_t>, reserved),
      /// The LAN MTU in bytes.
      (std::uint32_t, mtu),
      /// 1 when the LAN link is up, 0 when down; other values are invalid_field.
      (std::uint32_t, up),
      /// Link speed in Mb/s, 0 when unknown or down.
      (std::uint32_t, speed_mbps),
      /// 1 when promiscuous, 0 when not; other values are invalid_field.
      (std::uint32_t, promiscuous));
  static constexpr wire::error wire_check(const nic_state& v) {
    if (v.up > 1) return wire::field_error<nic_state>(errc::invalid_field, "up");
    if (v.promiscuous > 1) return wire::field_error<nic_state>(errc::invalid_field, "promiscuous");
    return {};
  }
};

/// The request and reply data of each standard request code.
template <request_code C>
struct data_types;
template <> struct data_types<request_code::get_mac_address> { using request = none; using reply = mac_address; };
template <> struct data_types<request_code::set_mac_address> { using request = mac_address; using reply = none; };
template <> struct data_types<request_code::get_statistics> { using request = none; using reply = statistics; };
template <> struct data_types<request_code::set_mtu> { using request = mtu_setting; using reply = mtu_setting; };
template <> struct data_types<request_code::get_link_state> { using request = none; using reply = link_state; };
template <> struct data_types<request_code::set_promiscuous> { using request = promiscuous; using reply = none; };
template <> struct data_types<request_code::initialize_nic> { using request = nic_init; using reply = nic_state; };

template <request_code C>
using request_t = typename data_types<C>::request;
template <request_code C>
using reply_t = typename data_types<C>::reply;

/// Largest standard request or reply data (statistics).
inline constexpr std::size_t max_data = 80;

}  // namespace cfg

/// CfgUtilRequest, host -> I/O unit.
struct cfg_util_request {
  PUSHWIRE_STRUCT(cfg_util_request,
      (msg::header<function::cfg_util_request>, header),
      (cfg::request_code, request_code),
      (wire::reserved<std::uint16_t>, reserved),
      (wire::counted<std::uint32_t, std::byte, "data_size">, data));
};

/// CfgUtilReply, I/O unit -> host; transaction_context echoes the request.
struct cfg_util_reply {
  PUSHWIRE_STRUCT(cfg_util_reply,
      (msg::header<function::cfg_util_reply>, header),
      (cfg::request_code, request_code),
      (cfg::status, status),
      (wire::counted<std::uint32_t, std::byte, "data_size">, data));
};

namespace cfg {

namespace detail {
template <class M, class D>
constexpr result<D> typed_data(const M& m, request_code c) {
  constexpr std::size_t data_off = wire::fixed_size<M>;
  if (m.request_code != c)
    return wire::field_error<M>(errc::invalid_field, "request_code");
  auto r = wire::decode<D>(m.data);
  if (!r) {
    wire::error e = r.error();
    e.code = errc::invalid_field;  // wrong sizes and bad values alike
    e.offset += data_off;
    if (e.field.empty()) e.field = "data";
    return e;
  }
  return r;
}

template <class D>
struct data_buffer {
  std::array<std::byte, max_data> bytes{};
  std::size_t size = 0;
};

template <class D>
constexpr result<data_buffer<D>> encode_data(const D& d) {
  data_buffer<D> b;
  auto n = wire::encode(d, b.bytes);
  if (!n) return n.error();
  b.size = *n;
  return b;
}
}  // namespace detail

/// The data of a request with code C, validated: errc::invalid_field when the code differs,
/// the size is wrong for C, or a value is out of range.
template <request_code C>
constexpr result<request_t<C>> request_data(const cfg_util_request& m) {
  return detail::typed_data<cfg_util_request, request_t<C>>(m, C);
}

/// The data of a reply to request code C, validated as request_data is.
template <request_code C>
constexpr result<reply_t<C>> reply_data(const cfg_util_reply& m) {
  return detail::typed_data<cfg_util_reply, reply_t<C>>(m, C);
}

/// Encodes a whole CfgUtilRequest with code C and data d.
template <request_code C>
constexpr result<std::size_t> encode_request(std::uint64_t txn, const request_t<C>& d,
                                             std::span<std::byte> out, const codec_options& lim = {}) {
  auto b = detail::encode_data(d);
  if (!b) return b.error();
  cfg_util_request m{.header = {.transaction_context = txn},
                     .request_code = C,
                     .data = std::span<const std::byte>(b->bytes.data(), b->size)};
  return msg::encode(m, out, lim);
}

/// Encodes a whole CfgUtilReply to code C with status s and data d.
template <request_code C>
constexpr result<std::size_t> encode_reply(std::uint64_t txn, status s, const reply_t<C>& d,
                                           std::span<std::byte> out, const codec_options& lim = {}) {
  auto b = detail::encode_data(d);
  if (!b) return b.error();
  cfg_util_reply m{.header = {.transaction_context = txn},
                   .request_code = C,
                   .status = s,
                   .data = std::span<const std::byte>(b->bytes.data(), b->size)};
  return msg::encode(m, out, lim);
}

}  // namespace cfg

}  // namespace pushwire::msg
