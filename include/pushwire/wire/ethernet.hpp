// Ethernet II framing (IEEE 802.3, optional 802.1Q tag), shared by the RoCEv2 (ib/) and cell
// (cell/) encapsulations. Member names are Wireshark's.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include <pushwire/wire/codec.hpp>

namespace pushwire::wire {

using mac_address = std::array<std::uint8_t, 6>;
/// The broadcast address ff:ff:ff:ff:ff:ff.
inline constexpr mac_address broadcast_mac{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};

inline constexpr std::uint16_t ethertype_vlan = 0x8100;
/// Bytes in an Ethernet II header, and in one 802.1Q tag.
inline constexpr std::size_t eth_header_size = 14, vlan_tag_size = 4;
/// Smallest Ethernet frame without its FCS; shorter frames are padded with zeros to this size.
inline constexpr std::size_t eth_min_frame = 60;

struct eth_header {
  static constexpr std::string_view wireshark = "eth";
  PUSHWIRE_STRUCT(eth_header, (mac_address, dst), (mac_address, src), (std::uint16_t, type));
};

/// The 4 bytes after an Ethernet header whose type is 0x8100.
struct vlan_tag {
  static constexpr std::string_view wireshark = "vlan";
  PUSHWIRE_STRUCT(vlan_tag,
      /// priority code point, 0..7
      (wire::bits<0, 15, 13>, priority),
      /// drop eligible indicator
      (wire::bits<0, 12, 12, bool>, dei),
      /// VLAN identifier, 0..4095
      (wire::bits<0, 11, 0>, id),
      /// EtherType of what follows
      (std::uint16_t, etype));
};

static_assert(fixed_size<eth_header> == eth_header_size && fixed_size<vlan_tag> == vlan_tag_size);

/// Where an Ethernet frame's payload starts and which EtherType it carries, looking through at
/// most one 802.1Q tag. errc::truncated (field "eth" or "vlan") when the headers are cut short.
struct eth_payload {
  std::uint16_t type = 0;
  std::size_t offset = 0;  ///< 14, or 18 with a tag
  bool has_vlan = false;
};
constexpr result<eth_payload> locate_payload(std::span<const std::byte> frame) {
  if (frame.size() < eth_header_size) return error{errc::truncated, frame.size(), "eth"};
  eth_payload p{read<eth_header, "type">(frame.data()), eth_header_size, false};
  if (p.type == ethertype_vlan) {
    if (frame.size() < eth_header_size + vlan_tag_size) return error{errc::truncated, frame.size(), "vlan"};
    p = {read<vlan_tag, "etype">(frame.data() + eth_header_size), eth_header_size + vlan_tag_size, true};
  }
  return p;
}

}  // namespace pushwire::wire
