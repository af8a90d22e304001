// Catch2 prints a flow::packet field by field, so a failed comparison says which field differs.
#pragma once

#include <sstream>
#include <string>

#include <catch2/catch.hpp>

#include <pushwire/flow/packet.hpp>

namespace Catch {
template <>
struct StringMaker<pushwire::flow::packet> {
  static std::string convert(const pushwire::flow::packet& p) {
    std::ostringstream o;
    o << std::hex << "{" << (p.known() ? p.info().name : "?") << " psn " << p.psn << " a " << p.ack_req << " se " << p.se
      << " dqp " << p.dest_qp << " pkey " << p.p_key << " fecn " << p.fecn << " becn " << p.becn << " wr_id " << p.wr_id
      << " off " << p.offset << " len " << p.length << " va " << p.va << " rkey " << p.rkey << " dmalen " << p.dmalen
      << " imm " << p.imm << " ieth " << p.ieth << " swap " << p.swap << " cmp " << p.compare << " feth " << +p.feth.sel.value << "/"
      << +p.feth.plt.value << " aeth " << +p.aeth.syndrome << "/" << p.aeth.msn.value << " orig " << p.orig << " fault "
      << p.fault_delay_us << " dc_key " << p.dc_key << " dct " << p.dct << " dci " << p.dci << " eecnxt " << p.eecnxt << " qkey " << p.q_key
      << " sqp " << p.src_qp << " payload " << p.payload.size() << "B}";
    return o.str();
  }
};
}  // namespace Catch
