// What the transport machines (rc.hpp, dc.hpp) send and receive: one InfiniBand transport
// packet as values, with its payload named by position instead of carried (sans-IO: the caller
// owns the bytes). to_frame_spec() turns one into an ib::frame_spec for ib::build().
#pragma once

#include <cstdint>
#include <span>

#include <pushwire/ib/aeth.hpp>
#include <pushwire/ib/opcode.hpp>
#include <pushwire/ib/roce.hpp>

namespace pushwire::flow {

/// Which transport a queue pair speaks (IBTA 9.8-9.9; DC: seed 002).
enum class service : std::uint8_t { rc, uc, ud, dc };

/// One packet. Which fields mean something follows from the opcode's header chain
/// (info().headers()).
struct packet {
  std::uint8_t opcode = 0;
  std::uint32_t psn = 0;  ///< 24 bits
  bool ack_req = false;
  bool se = false;  ///< solicited event; on DC opcode 0x55: set = disconnect
  std::uint32_t dest_qp = 0;  ///< BTH destination QP (DC: the DCT number)
  // Requests: the payload is bytes [offset, offset + length) of work request wr_id's message.
  std::uint64_t wr_id = 0;
  std::uint32_t offset = 0, length = 0;
  std::uint64_t va = 0;  ///< RETH / AtomicETH virtual address
  std::uint32_t rkey = 0, dmalen = 0;
  std::uint32_t imm = 0;  ///< ImmDt
  std::uint64_t swap = 0, compare = 0;  ///< AtomicETH (FETCH_ADD adds `swap`)
  // Responses.
  ib::aeth aeth{};
  std::uint64_t orig = 0;  ///< AtomicAckETH
  /// Page-fault ACK in cell framing: the exact delay in microseconds (the PageFaultDelay
  /// cell's delay_us); 0 on RoCE, where the RNR timer code in the AETH carries it.
  std::uint32_t fault_delay_us = 0;
  // DC (seed 002).
  std::uint64_t dc_key = 0;  ///< DCETH access key
  std::uint32_t dct = 0, dci = 0;  ///< DCCETH (connect / disconnect)
  // UD.
  std::uint32_t q_key = 0, src_qp = 0;  ///< DETH

  /// The opcode is one the table knows (0x40-0x5F read as DC).
  constexpr bool known() const { return ib::opcode_index(opcode) >= 0; }
  /// Its table entry (known() must hold).
  constexpr const ib::opcode_info& info() const { return ib::opcodes[static_cast<std::size_t>(ib::opcode_index(opcode))]; }
  constexpr bool is_response() const { return !info().request; }
  friend constexpr bool operator==(const packet&, const packet&) = default;
};

/// The RoCEv2 frame of `p` with `payload` (which must be p.length bytes) and the caller's
/// addresses; every extended header the opcode names is filled from `p`.
inline constexpr ib::frame_spec to_frame_spec(const packet& p, std::span<const std::byte> payload, ib::frame_spec base = {}) {
  base.bth = {.opcode = p.opcode, .se = p.se, .p_key = 0xFFFF, .destqp = p.dest_qp, .a = p.ack_req, .psn = p.psn};
  base.ext = {};
  base.payload = payload;
  for (ib::ext e : p.info().headers()) {
    switch (e) {
      case ib::ext::rdeth: base.ext.set<ib::ext::rdeth>({.eecnxt = p.dci}); break;
      case ib::ext::deth: base.ext.set<ib::ext::deth>({.q_key = p.q_key, .srcqp = p.src_qp}); break;
      case ib::ext::dceth: base.ext.set<ib::ext::dceth>({.access_key = p.dc_key}); break;
      case ib::ext::reth: base.ext.set<ib::ext::reth>({.va = p.va, .r_key = p.rkey, .dmalen = p.dmalen}); break;
      case ib::ext::atomiceth:
        base.ext.set<ib::ext::atomiceth>({.va = p.va, .r_key = p.rkey, .swapdt = p.swap, .cmpdt = p.compare});
        break;
      case ib::ext::aeth: base.ext.set<ib::ext::aeth>(p.aeth); break;
      case ib::ext::atomicacketh: base.ext.set<ib::ext::atomicacketh>({.origremdt = p.orig}); break;
      case ib::ext::immdt: base.ext.set<ib::ext::immdt>({.value = p.imm}); break;
      case ib::ext::ieth: base.ext.set<ib::ext::ieth>({.value = p.imm}); break;
      case ib::ext::dcceth: base.ext.set<ib::ext::dcceth>({.dct = p.dct, .dci = p.dci}); break;
      case ib::ext::feth:
      case ib::ext::cnp_pad: break;
    }
  }
  return base;
}

}  // namespace pushwire::flow
