// What the transport machines (rc.hpp, dc.hpp) send and receive: one InfiniBand transport
// packet as values, independent of the framing (RoCEv2 or cells; flow/frame.hpp converts). A
// machine names a request's payload by position (wr_id, offset, length) and leaves `payload`
// empty: sans-IO, the caller owns the bytes and points `payload` at them to build a frame; a
// packet made from a frame carries its payload as a span into that frame.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <tuple>

#include <pushwire/ib/aeth.hpp>
#include <pushwire/ib/headers.hpp>
#include <pushwire/ib/opcode.hpp>

namespace pushwire::flow {

/// Which transport a queue pair speaks (IBTA 9.8-9.9; DC: Dynamically Connected transport).
enum class service : std::uint8_t { rc, uc, ud, dc };

/// The opcode table's transport of svc.
constexpr ib::transport transport_of(service svc) {
  switch (svc) {
    case service::rc: return ib::transport::rc;
    case service::uc: return ib::transport::uc;
    case service::ud: return ib::transport::ud;
    case service::dc: return ib::transport::dc;
  }
  return ib::transport::rc;
}
/// The opcode of operation o on svc (the machines ask only for operations svc has).
constexpr ib::opcode opcode_on(service svc, ib::operation o) {
  return ib::opcode_of(transport_of(svc), o).value_or(ib::opcode::rc_send_only);
}

/// One packet. Which fields mean something follows from the opcode's header chain
/// (info().headers()).
struct packet {
  ib::opcode opcode = ib::opcode::rc_send_only;
  std::uint32_t psn = 0;  ///< 24 bits
  bool ack_req = false;
  bool se = false;  ///< solicited event; on DC opcode 0x55: set = disconnect
  std::uint32_t dest_qp = 0;  ///< BTH destination QP (DC: the DCT number)
  std::uint16_t p_key = 0xFFFF;  ///< BTH partition key; 0xFFFF is the default partition
  bool fecn = false, becn = false;  ///< BTH explicit congestion notification
  /// BTH MigReq: the sender's QP has migrated to its alternate path (IBTA 17.2.8; spec/qos.md §9).
  bool mig_req = false;
  // Requests: the payload is bytes [offset, offset + length) of work request wr_id's message.
  std::uint64_t wr_id = 0;
  std::uint32_t offset = 0, length = 0;
  std::uint64_t va = 0;  ///< RETH / AtomicETH virtual address
  std::uint32_t rkey = 0, dmalen = 0;
  /// A READ response the responder builds: the READ's whole length, for the device's choice of
  /// datapath (rnic/platform.hpp). Not on the wire, not compared.
  std::uint32_t read_length = 0;
  std::uint32_t imm = 0;   ///< ImmDt: the immediate data
  std::uint32_t ieth = 0;  ///< IETH: the R_Key a SEND with invalidate names
  std::uint64_t swap = 0, compare = 0;  ///< AtomicETH (FETCH_ADD adds `swap`)
  std::uint64_t sink_va = 0;    ///< SinkETH (READ_AS_WRITE): where the responder writes the data
  std::uint32_t sink_rkey = 0;
  ib::feth feth{};  ///< FLUSH: selectivity and placement type
  // Responses.
  ib::aeth aeth{};
  std::uint64_t orig = 0;  ///< AtomicAckETH
  /// Page-fault ACK in cell framing: the exact delay in microseconds (the PageFaultDelay
  /// cell's delay_us); 0 on RoCE, where the RNR timer code in the AETH carries it.
  std::uint32_t fault_delay_us = 0;
  // Dynamically Connected transport.
  std::uint64_t dc_key = 0;  ///< DCETH access key
  std::uint32_t dct = 0, dci = 0;  ///< DCCETH (connect / disconnect): the target's and the initiator's numbers
  /// RDETH: the EE context, 24 bits. On DC data packets (spec/roce.md §5) it names the DCI.
  std::uint32_t eecnxt = 0;
  // UD.
  /// DETH: the Q_Key, and the sending QP. src_qp is the sending QP on cells too (a cell names
  /// both QPs, spec/cells.md; flow/frame.hpp).
  std::uint32_t q_key = 0, src_qp = 0;
  /// The payload bytes, when the packet came from a frame or the caller attached them (see the
  /// top of this header); length is their count then.
  std::span<const std::byte> payload{};

  /// The opcode is one of the table's (a packet built field by field may hold any value).
  constexpr bool known() const { return ib::is_known(opcode); }
  /// Its table entry (known() must hold).
  constexpr const ib::opcode_info& info() const { return ib::info(opcode); }
  constexpr bool is_response() const { return !info().request; }
  /// DC: the initiator this packet names: DCCETH's on a connect or disconnect, else RDETH's.
  constexpr std::uint32_t dc_initiator() const { return info().has(ib::ext::dcceth) ? dci : eecnxt; }
  /// Field by field, the payload by content.
  friend constexpr bool operator==(const packet& a, const packet& b) {
    auto fields = [](const packet& p) {
      return std::tie(p.opcode, p.psn, p.ack_req, p.se, p.dest_qp, p.p_key, p.fecn, p.becn, p.wr_id, p.offset, p.length, p.va,
                      p.rkey, p.dmalen, p.imm, p.ieth, p.swap, p.compare, p.sink_va, p.sink_rkey, p.feth, p.aeth, p.orig, p.fault_delay_us, p.dc_key,
                      p.dct, p.dci, p.eecnxt, p.q_key, p.src_qp);
    };
    return fields(a) == fields(b) && std::ranges::equal(a.payload, b.payload);
  }
};

}  // namespace pushwire::flow
