// InfiniBand transport headers (IBTA vol. 1, ch. 9; as carried by RoCEv2), each described once.
// Member names are Wireshark's field names where Wireshark 4.0 has one (`wireshark` names the
// header's prefix), so JSON keys derive from the description. Layouts: spec/roce.md.
#pragma once

#include <cstdint>
#include <string_view>

#include <pushwire/wire/codec.hpp>

namespace pushwire::ib {

namespace wire = ::pushwire::wire;

/// Base Transport Header, 12 bytes, first after the UDP header.
struct bth {
  static constexpr std::string_view wireshark = "infiniband.bth";
  PUSHWIRE_STRUCT(bth,
      /// bits 7..5 transport, 4..0 operation (opcode.hpp)
      (std::uint8_t, opcode),
      /// solicited event: set on the last packet of a solicited message
      (wire::flag<1, 7>, se),
      /// MigReq
      (wire::flag<1, 6>, m),
      /// pad bytes after the payload, 0..3
      (wire::bits<1, 5, 4>, padcnt),
      /// transport header version, 0
      (wire::bits<1, 3, 0>, tver),
      /// partition key, default 0xFFFF
      (std::uint16_t, p_key),
      /// forward / backward explicit congestion notification (masked by the ICRC)
      (wire::flag<4, 7>, fecn),
      (wire::flag<4, 6>, becn),
      (wire::bits<4, 5, 0>, resv6a),
      /// destination queue pair, 24 bits
      (wire::u24, destqp),
      /// AckReq: the responder must acknowledge this packet
      (wire::flag<8, 7>, a),
      (wire::bits<8, 6, 0>, reserved7),
      /// packet sequence number, 24 bits, serial arithmetic (psn.hpp)
      (wire::u24, psn));
};

/// Reliable Datagram ETH, 4 bytes.
struct rdeth {
  static constexpr std::string_view wireshark = "infiniband.rdeth";
  PUSHWIRE_STRUCT(rdeth, (std::uint8_t, reserved), (wire::u24, eecnxt));
};

/// Datagram ETH, 8 bytes (UD, RD requests).
struct deth {
  static constexpr std::string_view wireshark = "infiniband.deth";
  PUSHWIRE_STRUCT(deth,
      /// queue key
      (std::uint32_t, q_key),
      (std::uint8_t, reserved),
      /// source queue pair
      (wire::u24, srcqp));
};

/// RDMA ETH, 16 bytes (WRITE first/only, READ request, FLUSH).
struct reth {
  static constexpr std::string_view wireshark = "infiniband.reth";
  PUSHWIRE_STRUCT(reth,
      /// remote virtual address
      (std::uint64_t, va),
      /// remote key
      (std::uint32_t, r_key),
      /// length of the whole RDMA operation in bytes
      (std::uint32_t, dmalen));
};

/// Atomic ETH, 28 bytes (COMPARE_SWAP, FETCH_ADD).
struct atomiceth {
  static constexpr std::string_view wireshark = "infiniband.atomiceth";
  PUSHWIRE_STRUCT(atomiceth,
      (std::uint64_t, va),
      (std::uint32_t, r_key),
      /// swap (or add) data
      (std::uint64_t, swapdt),
      /// compare data
      (std::uint64_t, cmpdt));
};

/// Bytes of an atomic operand (COMPARE_SWAP, FETCH_ADD, ATOMIC_WRITE); its address is aligned to it.
inline constexpr std::uint32_t atomic_operand_size = 8;

/// ACK ETH, 4 bytes; the syndrome's meaning: aeth.hpp.
struct aeth {
  static constexpr std::string_view wireshark = "infiniband.aeth";
  PUSHWIRE_STRUCT(aeth,
      (std::uint8_t, syndrome),
      /// message sequence number, 24 bits
      (wire::u24, msn));
};

/// Atomic ACK ETH, 8 bytes: the remote data before the atomic.
struct atomicacketh {
  static constexpr std::string_view wireshark = "infiniband.atomicacketh";
  PUSHWIRE_STRUCT(atomicacketh, (std::uint64_t, origremdt));
};

/// Immediate data, 4 bytes, big-endian (push-push carries idata here).
struct immdt {
  static constexpr std::string_view wireshark = "infiniband.immdt";
  PUSHWIRE_STRUCT(immdt, (std::uint32_t, value));
};

/// Invalidate ETH, 4 bytes: the R_Key to invalidate.
struct ieth {
  static constexpr std::string_view wireshark = "infiniband.ieth";
  PUSHWIRE_STRUCT(ieth, (std::uint32_t, value));
};

/// FLUSH ETH, 4 bytes (Linux rxe layout).
struct feth {
  static constexpr std::string_view wireshark = "infiniband.feth";
  PUSHWIRE_STRUCT(feth,
      (wire::bits<0, 31, 6, std::uint32_t>, reserved),
      /// selectivity level
      (wire::bits<3, 5, 4>, sel),
      /// placement type
      (wire::bits<3, 3, 0>, plt));
};

/// Dynamically Connected ETH, 8 bytes after the BTH of every DC packet (opcodes 0x40-0x5F).
struct dceth {
  static constexpr std::string_view wireshark = "pushwire.dc";
  PUSHWIRE_STRUCT(dceth,
      /// 64-bit DC access key the target checks
      (std::uint64_t, access_key));
};

/// DC Connect ETH, 16 bytes after the DCETH of a connect / disconnect (opcode 0x55; SE clear =
/// connect, set = disconnect). Layout decided here (spec/roce.md); reserved bytes must be zero.
struct dcceth {
  static constexpr std::string_view wireshark = "pushwire.dc";
  PUSHWIRE_STRUCT(dcceth,
      (wire::reserved<std::uint8_t>, resv0),
      /// DC target number
      (wire::u24, dct),
      (wire::reserved<std::uint8_t>, resv1),
      /// DC initiator number
      (wire::u24, dci),
      (wire::reserved<std::uint64_t>, resv2));
};

/// The 16 reserved bytes after the BTH of a RoCEv2 CNP (opcode 0x81); must be zero.
struct cnp_pad {
  static constexpr std::string_view wireshark = "infiniband.cnp";
  PUSHWIRE_STRUCT(cnp_pad, (wire::reserved<std::uint64_t>, resv0), (wire::reserved<std::uint64_t>, resv1));
};

/// Sink ETH, 12 bytes after the RETH of a read serviced as a write (pushwire's
/// manufacturer-specific opcode 0xC0, spec/roce.md §4): where the responder writes the data the
/// RETH names, in the requester's memory.
struct sinketh {
  static constexpr std::string_view wireshark = "pushwire.sink";
  PUSHWIRE_STRUCT(sinketh,
      /// the requester's virtual address the data goes to
      (std::uint64_t, va),
      /// the requester's key for it (remote write)
      (std::uint32_t, r_key));
};

static_assert(wire::fixed_size<sinketh> == 12);
static_assert(wire::fixed_size<bth> == 12 && wire::fixed_size<rdeth> == 4 && wire::fixed_size<deth> == 8 &&
              wire::fixed_size<reth> == 16 && wire::fixed_size<atomiceth> == 28 && wire::fixed_size<aeth> == 4 &&
              wire::fixed_size<atomicacketh> == 8 && wire::fixed_size<immdt> == 4 && wire::fixed_size<ieth> == 4 &&
              wire::fixed_size<feth> == 4 && wire::fixed_size<dceth> == 8 && wire::fixed_size<dcceth> == 16 &&
              wire::fixed_size<cnp_pad> == 16);

}  // namespace pushwire::ib
