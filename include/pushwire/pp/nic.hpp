// The I/O unit's LAN NIC as the host configures it over CfgUtil (seed 003, IV.B.3: "to initialize
// LAN NIC 550 or set the MAC address of the LAN NIC 550"; spec/split-model.md, CfgUtil). The
// agent answers each request and keeps what the NIC is: its MAC, MTU, promiscuity and the base
// its statistics count from. It is also the NIC's receive filter: unicast frames for another MAC
// are dropped unless promiscuous (broadcast and multicast always pass).
// Sans-IO: the hardware is an argument, any type with
//   nic_link link()                    the LAN link now
//   std::uint32_t mtu()                the LAN interface's MTU now, 0 when it cannot be read
//   int set_mtu(std::uint32_t)         0, or an errno (the MTU is unchanged then)
//   msg::cfg::statistics counters()    raw counters since the NIC started
// and, where several agents are functions of one NIC (an I/O unit shared by hosts), optionally
//   bool mac_taken(const wire::mac_address&)  another function holds that MAC (then refused)
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include <pushwire/msg/cfg_util.hpp>
#include <pushwire/pp/endpoint.hpp>
#include <pushwire/wire/ethernet.hpp>

namespace pushwire::pp {

/// The LAN MTUs a NIC takes, bytes (IPv4's minimum; a 64 KiB frame less headers).
inline constexpr std::uint32_t nic_mtu_min = 576, nic_mtu_max = 65535 - 64;

/// The LAN link as the hardware reports it.
struct nic_link {
  bool up = false;              ///< administratively up and carrier present
  std::uint32_t speed_mbps = 0; ///< 0 when unknown or down
};

/// A MAC a NIC may take: unicast (I/G bit clear) and not all zeros.
constexpr bool nic_mac_ok(const wire::mac_address& m) {
  if (m[0] & 1) return false;
  for (std::uint8_t b : m)
    if (b) return true;
  return false;
}

class nic_agent {
 public:
  /// A NIC whose own MAC is `factory` (it starts with it) and whose MTU is `mtu` (until the
  /// hardware reports its own).
  nic_agent(const wire::mac_address& factory, std::uint32_t mtu) : factory_(factory), mac_(factory), mtu_(mtu) {}

  const wire::mac_address& mac() const { return mac_; }
  const wire::mac_address& factory_mac() const { return factory_; }
  /// The MTU as the last request found it.
  std::uint32_t mtu() const { return mtu_; }
  bool promiscuous() const { return promiscuous_; }
  /// Unicast frames the receive filter dropped.
  std::uint64_t filtered() const { return filtered_; }

  /// The receive filter: a frame from the LAN (destination MAC first) goes to the host when it
  /// is broadcast or multicast, for this NIC's MAC, or the NIC is promiscuous. Shorter than a
  /// MAC: dropped. Drops are counted (filtered()).
  bool accepts(std::span<const std::byte> frame) {
    if (frame.size() < 6) return ++filtered_, false;
    const std::uint8_t d0 = std::to_integer<std::uint8_t>(frame[0]);
    if ((d0 & 1) || promiscuous_) return true;
    for (std::size_t i = 0; i < 6; ++i)
      if (std::to_integer<std::uint8_t>(frame[i]) != mac_[i]) return ++filtered_, false;
    return true;
  }

  /// Statistics since the NIC started or was initialized with reset_statistics.
  template <class Hw>
  msg::cfg::statistics statistics(Hw& hw) const {
    const msg::cfg::statistics now = hw.counters();
    msg::cfg::statistics r{};
    auto sub = [](std::uint64_t a, std::uint64_t b) { return a >= b ? a - b : 0; };
    r.rx_frames = sub(now.rx_frames, base_.rx_frames), r.tx_frames = sub(now.tx_frames, base_.tx_frames);
    r.rx_bytes = sub(now.rx_bytes, base_.rx_bytes), r.tx_bytes = sub(now.tx_bytes, base_.tx_bytes);
    r.rx_errors = sub(now.rx_errors, base_.rx_errors), r.tx_errors = sub(now.tx_errors, base_.tx_errors);
    r.rx_dropped = sub(now.rx_dropped, base_.rx_dropped), r.tx_dropped = sub(now.tx_dropped, base_.tx_dropped);
    r.rx_aggregated_segments = sub(now.rx_aggregated_segments, base_.rx_aggregated_segments);
    r.rx_aggregates = sub(now.rx_aggregates, base_.rx_aggregates);
    return r;
  }

  /// The answer to a CfgUtilRequest (pp::handlers::cfg_request). Malformed data and values the
  /// NIC cannot take are invalid_argument, with nothing changed; codes it does not know (vendor
  /// codes included) are unsupported_request.
  template <class Hw>
  cfg_answer answer(msg::cfg::request_code code, std::span<const std::byte> data, Hw& hw) {
    using msg::cfg::request_code;
    using msg::cfg::status;
    if (const std::uint32_t now = hw.mtu(); now != 0) mtu_ = now;  // set on the interface by others too
    cfg_answer a;
    switch (code) {
      case request_code::get_mac_address:
        a.status = data.empty() ? status::success : status::invalid_argument;
        put(a, msg::cfg::mac_address{.mac = mac_});
        break;
      case request_code::set_mac_address: {
        const auto m = wire::decode<msg::cfg::mac_address>(data);
        if (!m || !mac_usable(m->mac, hw)) a.status = status::invalid_argument;
        else a.status = status::success, mac_ = m->mac;
        break;
      }
      case request_code::get_statistics:
        a.status = data.empty() ? status::success : status::invalid_argument;
        put(a, statistics(hw));
        break;
      case request_code::set_mtu: {
        // 0 asks without changing; the reply's data is the MTU in effect either way.
        const auto m = wire::decode<msg::cfg::mtu_setting>(data);
        a.status = !m ? status::invalid_argument : apply_mtu(m->mtu, hw);
        put(a, msg::cfg::mtu_setting{.mtu = mtu_});
        break;
      }
      case request_code::get_link_state: {
        const nic_link l = hw.link();
        a.status = data.empty() ? status::success : status::invalid_argument;
        put(a, msg::cfg::link_state{.up = l.up ? 1u : 0u, .speed_mbps = l.up ? l.speed_mbps : 0});
        break;
      }
      case request_code::set_promiscuous: {
        const auto p = wire::decode<msg::cfg::promiscuous>(data);
        if (!p) a.status = status::invalid_argument;
        else a.status = status::success, promiscuous_ = p->enable == 1;
        break;
      }
      case request_code::initialize_nic: {
        const auto r = wire::decode<msg::cfg::nic_init>(data);
        const bool set_mac = r && (r->flags & static_cast<std::uint32_t>(msg::cfg::init_flag::set_mac));
        if (!r || (set_mac && !mac_usable(r->mac, hw)) || (r->mtu != 0 && !mtu_ok(r->mtu))) {
          a.status = status::invalid_argument;
        } else if (a.status = apply_mtu(r->mtu, hw); a.status == status::success) {
          mac_ = set_mac ? r->mac : factory_;
          promiscuous_ = (r->flags & static_cast<std::uint32_t>(msg::cfg::init_flag::promiscuous)) != 0;
          if (r->flags & static_cast<std::uint32_t>(msg::cfg::init_flag::reset_statistics)) base_ = hw.counters();
        }
        const nic_link l = hw.link();
        put(a, msg::cfg::nic_state{.mac = mac_, .mtu = mtu_, .up = l.up ? 1u : 0u, .speed_mbps = l.up ? l.speed_mbps : 0,
                                   .promiscuous = promiscuous_ ? 1u : 0u});
        break;
      }
      default:
        a.status = status::unsupported_request;
    }
    return a;
  }

 private:
  static constexpr bool mtu_ok(std::uint32_t m) { return m >= nic_mtu_min && m <= nic_mtu_max; }
  /// Unicast, nonzero, and not another function's (its own is fine).
  template <class Hw>
  bool mac_usable(const wire::mac_address& m, Hw& hw) const {
    if (!nic_mac_ok(m)) return false;
    if constexpr (requires { hw.mac_taken(m); })
      if (m != mac_ && hw.mac_taken(m)) return false;
    return true;
  }
  template <class D>
  static void put(cfg_answer& a, const D& d) {
    a.data.resize(wire::fixed_size<D>);
    (void)wire::encode(d, a.data);
  }
  template <class Hw>
  msg::cfg::status apply_mtu(std::uint32_t m, Hw& hw) {
    if (m == 0 || m == mtu_) return msg::cfg::status::success;
    if (!mtu_ok(m)) return msg::cfg::status::invalid_argument;
    if (hw.set_mtu(m) != 0) return msg::cfg::status::device_error;
    mtu_ = m;
    return msg::cfg::status::success;
  }

  wire::mac_address factory_, mac_;
  std::uint32_t mtu_;
  bool promiscuous_ = false;
  msg::cfg::statistics base_{};
  std::uint64_t filtered_ = 0;
};

}  // namespace pushwire::pp
