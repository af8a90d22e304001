// Dynamically Connected transport: the DCI's connect / data / disconnect order, exclusivity,
// and the DCT's refusals, over an in-order link and on the wire.
#include <catch2/catch.hpp>

#include <deque>
#include <map>

#include "harness.hpp"

using namespace pwtest;

namespace {

constexpr dc_address A{.dct = 0x100, .access_key = 0xAAAA'0000'0000'000Aull};
constexpr dc_address B{.dct = 0x200, .access_key = 0xBBBB'0000'0000'000Bull};

using dci_t = dc_initiator<16, 8>;
using dct_t = dc_target<8>;

struct dc_world {
  dci_t dci{{.dci = 0x77, .req = {.mtu = 256, .window = 32}}};
  dct_t a{{.dct = A.dct, .access_key = A.access_key, .resp = {.mtu = 256}}};
  dct_t b{{.dct = B.dct, .access_key = B.access_key, .resp = {.mtu = 256}}};
  std::deque<packet> wire_out, wire_back;
  std::vector<packet> log;  ///< every packet the DCI sent, in order
  std::vector<qp_action::complete> done;
  std::map<std::uint32_t, std::vector<std::uint64_t>> placed;  ///< by DCT: wr ids placed

  void take_dci(const std::vector<qp_action_t>& acts) {
    for (const auto& x : acts) {
      if (auto t = std::get_if<qp_action::transmit>(&x)) {
        wire_out.push_back(t->pkt);
        log.push_back(t->pkt);
      }
      if (auto c = std::get_if<qp_action::complete>(&x)) done.push_back(*c);
    }
  }
  void take_dct(std::uint32_t dct, const std::vector<qp_action_t>& acts) {
    for (const auto& x : acts) {
      if (auto t = std::get_if<qp_action::transmit>(&x)) wire_back.push_back(t->pkt);
      if (auto p = std::get_if<qp_action::place>(&x)) placed[dct].push_back(p->wr_id);
    }
  }
  void post(std::uint64_t id, dc_address to, std::uint32_t len = 300) {
    take_dci(collect<qp_action_t>([&](qp_sink& o) { return dci.post({.id = id, .op = wr_op::write, .length = len, .remote_va = 0x1000, .rkey = 3}, to, 0, o); }));
  }
  void run() {
    while (!wire_out.empty() || !wire_back.empty()) {
      while (!wire_out.empty()) {
        const packet p = wire_out.front();
        wire_out.pop_front();
        dct_t& t = p.dest_qp == A.dct ? a : b;
        take_dct(p.dest_qp, collect<qp_action_t>([&](qp_sink& o) { return t.on_packet(p, o); }));
      }
      while (!wire_back.empty()) {
        const packet p = wire_back.front();
        wire_back.pop_front();
        take_dci(collect<qp_action_t>([&](qp_sink& o) { return dci.on_packet(p, 1, o); }));
      }
    }
  }
};

}  // namespace

TEST_CASE("DC initiator: connect, data, disconnect per target, in order, one target at a time") {
  dc_world w;
  w.post(1, A);
  w.post(2, B);
  w.post(3, A);
  CHECK(w.dci.state() == dci_state::connected);
  CHECK(w.dci.pending() == 2);  // B and the second A wait behind the first A
  w.run();
  // the DCI sent: connect A, data 1, disconnect A, connect B, data 2, disconnect B, connect A, data 3, disconnect A
  std::vector<std::string> seq;
  for (const packet& p : w.log) {
    if (p.info().is(ib::op_class::connect))
      seq.push_back(std::string(p.se ? "disconnect " : "connect ") + (p.dct == A.dct ? "A" : "B"));
    else if (seq.empty() || seq.back() != "data " + std::to_string(p.wr_id))
      seq.push_back("data " + std::to_string(p.wr_id));
  }
  CHECK(seq == std::vector<std::string>{"connect A", "data 1", "disconnect A", "connect B", "data 2", "disconnect B",
                                        "connect A", "data 3", "disconnect A"});
  // the connect carries the key in DCETH and the numbers in DCCETH, SE clear, AckReq
  const packet& c = w.log.front();
  CHECK(c.dc_key == A.access_key);
  CHECK(c.dct == A.dct);
  CHECK(c.dci == 0x77);
  CHECK_FALSE(c.se);
  CHECK(c.ack_req);
  // data for A reached A only; for B, B only
  CHECK(w.placed[A.dct] == std::vector<std::uint64_t>{1, 1, 3, 3});
  CHECK(w.placed[B.dct] == std::vector<std::uint64_t>{2, 2});
  CHECK(w.dci.quiescent());
  std::vector<std::uint64_t> user_done;
  for (const auto& d : w.done)
    if (d.wr_id < dc_internal_id) {
      user_done.push_back(d.wr_id);
      CHECK(d.status == wc_status::success);
    }
  CHECK(user_done == std::vector<std::uint64_t>{1, 2, 3});
  CHECK(w.a.state() == dct_state::listening);
  CHECK(w.b.state() == dct_state::listening);
}

TEST_CASE("DC initiator: requests for the connected target join its run only while nothing waits") {
  dc_world w;
  w.post(1, A);
  w.post(2, A);  // joins the run
  CHECK(w.dci.pending() == 0);
  w.post(3, B);
  w.post(4, A);  // must wait behind B
  CHECK(w.dci.pending() == 2);
  w.run();
  CHECK(w.placed[A.dct] == std::vector<std::uint64_t>{1, 1, 2, 2, 4, 4});
  std::size_t connects = 0;
  for (const packet& p : w.log) connects += p.info().is(ib::op_class::connect) && !p.se;
  CHECK(connects == 3);
}

TEST_CASE("DC target: wrong key and wrong DCT number get NAKs, strangers are dropped, nothing is placed") {
  dct_t t{{.dct = A.dct, .access_key = A.access_key, .resp = {.mtu = 256}}};
  packet connect{.opcode = ib::opcode::dc_connect, .psn = 10, .ack_req = true, .dest_qp = A.dct, .dc_key = B.access_key, .dct = A.dct, .dci = 5};
  step_result r;
  auto a = collect<qp_action_t>([&](qp_sink& o) { return t.on_packet(connect, o); }, &r);
  CHECK(r.error == errc::wrong_access_key);
  REQUIRE(only<qp_action::transmit>(a).size() == 1);
  CHECK(ib::syndrome{only<qp_action::transmit>(a)[0].pkt.aeth.syndrome}.nak_reason() == ib::nak_code::remote_access_error);
  CHECK(t.state() == dct_state::listening);

  connect.dc_key = A.access_key;
  connect.dct = B.dct;
  a = collect<qp_action_t>([&](qp_sink& o) { return t.on_packet(connect, o); }, &r);
  CHECK(r.error == errc::unknown_dct);
  CHECK(ib::syndrome{only<qp_action::transmit>(a)[0].pkt.aeth.syndrome}.nak_reason() == ib::nak_code::invalid_request);

  packet data{.opcode = ib::opcode::dc_rdma_write_only, .psn = 11, .ack_req = true, .dest_qp = A.dct, .wr_id = 9, .length = 8, .va = 0, .rkey = 1, .dmalen = 8, .dc_key = A.access_key, .eecnxt = 5};
  a = collect<qp_action_t>([&](qp_sink& o) { return t.on_packet(data, o); }, &r);
  CHECK(r.error == errc::not_connected);
  CHECK(only<qp_action::place>(a).empty());
  CHECK(only<qp_action::transmit>(a).empty());  // dropped without a NAK: the DCI's timeout resends the connect

  connect.dct = A.dct;
  a = collect<qp_action_t>([&](qp_sink& o) { return t.on_packet(connect, o); }, &r);
  CHECK(r.ok());
  CHECK(t.state() == dct_state::connected);
  CHECK(t.connected_dci() == 5);
  // connected, but data with a wrong key, or from another DCI: refused, nothing placed
  data.dc_key = B.access_key;
  a = collect<qp_action_t>([&](qp_sink& o) { return t.on_packet(data, o); }, &r);
  CHECK(r.error == errc::wrong_access_key);
  CHECK(only<qp_action::place>(a).empty());
  data.dc_key = A.access_key;
  data.eecnxt = 6;
  a = collect<qp_action_t>([&](qp_sink& o) { return t.on_packet(data, o); }, &r);
  CHECK(r.error == errc::not_connected);
  CHECK(only<qp_action::place>(a).empty());
  data.eecnxt = 5;
  a = collect<qp_action_t>([&](qp_sink& o) { return t.on_packet(data, o); }, &r);
  CHECK(only<qp_action::place>(a).size() == 1);
  CHECK(t.stats().bad_key == 2);
}

TEST_CASE("DC: connect and disconnect packets build and parse as RoCEv2 with DCETH and DCCETH") {
  dci_t dci{{.dci = 0x77, .req = {.mtu = 256}}};
  const auto acts = collect<qp_action_t>([&](qp_sink& o) { return dci.post({.id = 1, .op = wr_op::send, .length = 4}, A, 0, o); });
  const auto pk = only<qp_action::transmit>(acts);
  REQUIRE(pk.size() == 2);
  for (const auto& t : pk) {
    std::vector<std::byte> payload(t.pkt.length);
    packet q = t.pkt;
    q.payload = payload;
    const auto spec = to_roce(q);
    std::vector<std::byte> frame(*ib::frame_size(spec));
    REQUIRE(ib::build(spec, frame).has_value());
    const auto back = ib::decode(frame, {.crc = ib::crc_check::require});
    REQUIRE(back.has_value());
    q.wr_id = 0;
    q.offset = 0;
    CHECK(from_roce(*back) == q);
    REQUIRE(back->ext.get<ib::ext::dceth>().has_value());
    CHECK(back->ext.get<ib::ext::dceth>()->access_key == A.access_key);
  }
  CHECK(pk[0].pkt.opcode == ib::opcode::dc_connect);
  CHECK(pk[1].pkt.opcode == ib::opcode::dc_send_only);  // DC SEND_ONLY
  const auto spec = to_roce(pk[0].pkt);
  std::vector<std::byte> frame(*ib::frame_size(spec));
  REQUIRE(ib::build(spec, frame).has_value());
  const auto back = ib::decode(frame);
  REQUIRE(back.has_value());
  CHECK(back->ext.get<ib::ext::dcceth>()->dct == A.dct);
  CHECK(back->ext.get<ib::ext::dcceth>()->dci == 0x77);
  CHECK_FALSE(back->bth.se);
}

TEST_CASE("DC initiator: with a small sink nothing is lost, pump() finishes what did not fit") {
  dci_t dci{{.dci = 0x77, .req = {.mtu = 256, .window = 32}}};
  dct_t a{{.dct = A.dct, .access_key = A.access_key, .resp = {.mtu = 256}}};
  std::deque<packet> out, back;
  std::vector<std::uint64_t> done;
  auto take = [&](const std::vector<qp_action_t>& acts, std::deque<packet>& to) {
    for (const auto& x : acts) {
      if (auto t = std::get_if<qp_action::transmit>(&x)) to.push_back(t->pkt);
      if (auto c = std::get_if<qp_action::complete>(&x))
        if (c->wr_id < dc_internal_id) done.push_back(c->wr_id);
    }
  };
  for (std::uint64_t id = 1; id <= 6; ++id)
    take(collect<qp_action_t, 16>([&](qp_sink& o) { return dci.post({.id = id, .op = wr_op::write, .length = 10, .rkey = 1}, A, 0, o); }), out);
  for (int round = 0; round < 100 && (!out.empty() || !back.empty() || dci.wants_to_send()); ++round) {
    while (!out.empty()) {
      const packet p = out.front();
      out.pop_front();
      take(collect<qp_action_t, 16>([&](qp_sink& o) { return a.on_packet(p, o); }), back);
    }
    while (!back.empty()) {
      const packet p = back.front();
      back.pop_front();
      take(collect<qp_action_t, 5>([&](qp_sink& o) { return dci.on_packet(p, 1, o); }), out);  // 5: barely room
    }
    while (dci.wants_to_send())
      take(collect<qp_action_t, 5>([&](qp_sink& o) {
             dci.pump(1, o);
             return step_result{};
           }),
           out);
  }
  CHECK(done == std::vector<std::uint64_t>{1, 2, 3, 4, 5, 6});
  CHECK(dci.quiescent());
  CHECK(a.state() == dct_state::listening);
}
