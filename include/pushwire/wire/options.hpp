// The one options type of every codec (msg/, ib/, cell/): each reads the members that concern
// it and ignores the rest, so a caller that decodes several layers passes one value.
//
// Every codec offers the same verbs (spec/roce.md §"Shapes and verbs"):
//   inspect(frame, view&, opts)       validate the whole input into a view over it
//   decode_into(frame, value&, opts)  validate and decode every field into a caller's value
//   decode(frame, opts)               the same, returning result<value>
// and reports checksums with crc_status (wire/crc.hpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include <pushwire/wire/crc.hpp>

namespace pushwire::wire {

/// How opcodes 0x40-0x5F of a BTH are read (ib/opcode.hpp).
enum class rd_class : std::uint8_t {
  dc,       ///< Dynamically Connected (DCETH after the BTH); the default, as Wireshark 4.0
  ibta_rd,  ///< IBTA Reliable Datagram (RDETH, DETH)
};

/// Largest push-push frame (header and body) a msg/ codec accepts or produces by default, bytes.
inline constexpr std::size_t default_max_frame = 4096;
/// The cell payload size (data bytes per cell) of the channel-based network's example ("more than
/// 256 bytes" is segmented): the default of every cell parameter.
inline constexpr std::size_t default_cell_payload = 256;
/// IANA's RoCEv2 UDP destination port.
inline constexpr std::uint16_t roce_udp_port = 4791;

struct codec_options {
  /// ib/ ICRC and cell/ cell CRC: skip, report (the default), or require (a bad one is an error).
  crc_check crc = crc_check::report;
  /// msg/: largest frame accepted or encoded, bytes; more is errc::too_large.
  std::size_t max_frame = default_max_frame;
  /// cell/: largest data length of one cell (the receiver's cell payload size); more is too_large.
  std::size_t max_cell_payload = default_cell_payload;
  /// ib/: the UDP destination port that marks RoCEv2.
  std::uint16_t udp_port = roce_udp_port;
  /// ib/: how to read BTH opcodes 0x40-0x5F.
  rd_class rd = rd_class::dc;
};

}  // namespace pushwire::wire
