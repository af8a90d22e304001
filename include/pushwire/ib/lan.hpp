// LAN emulation over the fabric: a peer's LID and QPN embedded in a locally
// administered unicast IEEE 802.3 MAC, so an ARP table can map IP -> MAC -> (LID, QPN).
// Layout (spec/roce.md): byte 0 = 0xA2 (I/G = 0 unicast, U/L = 1 local, bits 7..2 = 0b101000
// marking the form), bytes 1-2 the LID, bytes 3-5 the QPN.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>

#include <pushwire/ib/encap.hpp>

namespace pushwire::ib {

/// Unicast LIDs (IBTA 4.1.3): 0x0001-0xBFFF. 0 is reserved, 0xC000-0xFFFE multicast, 0xFFFF permissive.
inline constexpr std::uint16_t lid_unicast_first = 0x0001, lid_unicast_last = 0xBFFF;
inline constexpr std::uint8_t lid_mac_prefix = 0xA2;

/// The MAC form, described once.
struct lid_mac {
  PUSHWIRE_STRUCT(lid_mac,
      (wire::constant<std::uint8_t, lid_mac_prefix, wire::errc::invalid_field>, prefix),
      /// the peer's local identifier, unicast
      (std::uint16_t, lid),
      /// the peer's queue pair number, 24 bits
      (wire::u24, qpn));
  static constexpr wire::error wire_check(const lid_mac& m) {
    return m.lid < lid_unicast_first || m.lid > lid_unicast_last
               ? wire::field_error<lid_mac>(wire::errc::invalid_field, "lid")
               : wire::error{};
  }
};

struct lid_qpn {
  std::uint16_t lid = 0;
  std::uint32_t qpn = 0;
  friend constexpr bool operator==(const lid_qpn&, const lid_qpn&) = default;
};

/// The MAC for (lid, qpn): invalid_field for a non-unicast LID or a QPN wider than 24 bits.
constexpr wire::result<mac_address> mac_from_lid(std::uint16_t lid, std::uint32_t qpn) {
  std::array<std::byte, 6> b{};
  if (auto n = wire::encode(lid_mac{.lid = lid, .qpn = qpn}, b); !n) return n.error();
  mac_address m{};
  for (std::size_t i = 0; i < 6; ++i) m[i] = static_cast<std::uint8_t>(b[i]);
  return m;
}

/// (LID, QPN) of a MAC of that form: invalid_field for any other MAC (another first byte, a
/// multicast or universally administered address, a non-unicast LID).
constexpr wire::result<lid_qpn> lid_from_mac(const mac_address& m) {
  std::array<std::byte, 6> b{};
  for (std::size_t i = 0; i < 6; ++i) b[i] = static_cast<std::byte>(m[i]);
  auto d = wire::decode<lid_mac>(b);
  if (!d) return d.error();
  return lid_qpn{d->lid, d->qpn};
}

/// An emulated LAN's ARP table with a fixed capacity: IPv4 -> LID MAC -> (LID, QPN).
template <std::size_t Capacity>
class emulated_arp {
 public:
  /// Adds or replaces ip's binding. too_large when full; invalid_field as mac_from_lid.
  constexpr wire::error learn(const ipv4_address& ip, std::uint16_t lid, std::uint32_t qpn) {
    auto mac = mac_from_lid(lid, qpn);
    if (!mac) return mac.error();
    for (std::size_t i = 0; i < n_; ++i)
      if (e_[i].ip == ip) {
        e_[i].mac = *mac;
        return {};
      }
    if (n_ == Capacity) return {wire::errc::too_large, 0, "arp"};
    e_[n_++] = {ip, *mac};
    return {};
  }
  /// The ARP answer for ip.
  constexpr std::optional<mac_address> mac_of(const ipv4_address& ip) const {
    for (std::size_t i = 0; i < n_; ++i)
      if (e_[i].ip == ip) return e_[i].mac;
    return std::nullopt;
  }
  /// ip -> its MAC -> the (LID, QPN) embedded in it.
  constexpr std::optional<lid_qpn> resolve(const ipv4_address& ip) const {
    const auto mac = mac_of(ip);
    if (!mac) return std::nullopt;
    auto l = lid_from_mac(*mac);
    return l ? std::optional{*l} : std::nullopt;
  }
  constexpr bool forget(const ipv4_address& ip) {
    for (std::size_t i = 0; i < n_; ++i)
      if (e_[i].ip == ip) {
        e_[i] = e_[--n_];
        return true;
      }
    return false;
  }
  constexpr std::size_t size() const { return n_; }

 private:
  struct entry {
    ipv4_address ip{};
    mac_address mac{};
  };
  std::array<entry, Capacity> e_{};
  std::size_t n_ = 0;
};

}  // namespace pushwire::ib
