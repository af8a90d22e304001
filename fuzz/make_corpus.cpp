// pushwire-fuzz-corpus DIR [CAPTURE.pcap...]: writes the seed corpora of fuzz/corpus/<target>/
// from the tests' hand-spelled vectors (push-push messages, cells), from frames the library
// builds (RoCEv2 packets of every operation the flow requester emits, with DC connect, and
// ACKs / NAKs), and from the frames of captures (pushwire-gen's, as the tests write them):
// RoCEv2 frames seed roce_frame and bth_chain, cells seed cell_decode, the push-push messages
// inside them msg_dispatch; the captures themselves, the same frames as pcapng (both byte orders)
// and the tests' pcapng vectors seed pcap_reader.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <span>
#include <string>
#include <vector>

#include <pushwire/cell/cell.hpp>
#include <pushwire/flow/dc.hpp>
#include <pushwire/flow/frame.hpp>
#include <pushwire/flow/rc.hpp>
#include <pushwire/ib/roce.hpp>
#include <pushwire/pp/cm.hpp>
#include <pushwire/pp/lan.hpp>
#include <pushwire/wire/pcap.hpp>

#include "cell/vectors.hpp"
#include "flow/conform_cases.hpp"
#include "msg/vectors.hpp"
#include "support/pcapng.hpp"

using namespace pushwire;
namespace fs = std::filesystem;

namespace {

fs::path root;
int written = 0;

void seed(const std::string& target, const std::string& name, std::span<const std::byte> bytes) {
  fs::create_directories(root / target);
  std::ofstream(root / target / name, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                                              static_cast<std::streamsize>(bytes.size()));
  ++written;
}
std::vector<std::byte> with_prefix(std::uint8_t first, std::span<const std::byte> rest) {
  // Sized once, then copied: g++-12 -O3 warns falsely (-Warray-bounds) on insert after a 1-byte vector.
  std::vector<std::byte> v(1 + rest.size());
  v[0] = std::byte{first};
  std::ranges::copy(rest, v.begin() + 1);
  return v;
}

/// Every packet a requester, a responder and a DC initiator emit for a small script.
std::vector<flow::packet> packets() {
  std::vector<flow::packet> out;
  std::array<flow::qp_action_t, 64> buf{};
  auto take = [&](flow::qp_sink& s) {
    for (const auto& a : s)
      if (const auto* t = std::get_if<flow::qp_action::transmit>(&a)) out.push_back(t->pkt);
    s.clear();
  };
  flow::qp_sink s{std::span(buf)};
  flow::requester<8> rq({.mtu = 256, .dest_qp = 0x11});
  for (const auto& wr : {flow::work_request{.id = 1, .op = flow::wr_op::send, .length = 600},
                         flow::work_request{.id = 2, .op = flow::wr_op::write_imm, .length = 300, .remote_va = 64, .rkey = 3, .imm = 0x07050100},
                         flow::work_request{.id = 3, .op = flow::wr_op::read, .length = 700, .remote_va = 64, .rkey = 3},
                         flow::work_request{.id = 4, .op = flow::wr_op::fetch_add, .length = 8, .remote_va = 64, .rkey = 3, .swap = 1},
                         flow::work_request{.id = 5, .op = flow::wr_op::read_as_write, .length = 500, .remote_va = 64, .rkey = 3,
                                            .sink_va = 0x9000, .sink_rkey = 4}}) {
    rq.post(wr, 0, s);
    take(s);
  }
  flow::responder<4> rs({.mtu = 256, .peer_qp = 0x22});
  rs.post_receive(4);
  const auto requests = out;
  for (const auto& p : requests) {
    rs.on_packet(p, s);
    take(s);
  }
  flow::dc_initiator<4, 4> dci({.dci = 7, .req = {.mtu = 256}});
  dci.post({.id = 1, .op = flow::wr_op::write, .length = 40, .remote_va = 0, .rkey = 1}, {.dct = 0x100, .access_key = 0xA}, 0, s);
  take(s);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: pushwire-fuzz-corpus DIR [CAPTURE.pcap...]\n");
    return 64;
  }
  root = argv[1];
  // push-push
  vec::for_each_case([&](const auto& c) {
    seed("msg_dispatch", std::string{c.name}, c.bytes);
    seed("roundtrip", "msg_" + std::string{c.name}, with_prefix(0, c.bytes));
  });
  // idata: the seed's example, and an indication that does not fit
  const std::uint8_t idata_seed[] = {0x07, 0x05, 0x01, 0x00, 0, 0, 1, 0x2C, 0, 0, 0, 2, 0, 1, 0, 0};
  seed("idata", "seed_example", std::as_bytes(std::span(idata_seed)));
  // RoCEv2 frames, and their UDP payloads for the chain parser
  int n = 0;
  for (const flow::packet& p : packets()) {
    std::vector<std::byte> payload(p.info().payload ? p.length : 0, std::byte{0x5A});
    flow::packet q = p;
    q.payload = payload;
    const auto spec = flow::to_roce(q);
    std::vector<std::byte> frame(*ib::frame_size(spec));
    if (!ib::build(spec, frame)) continue;
    char name[32];
    std::snprintf(name, sizeof name, "%02d_op%02X", n++, ib::code(p.opcode));
    seed("roce_frame", name, frame);
    const auto v = ib::decode(frame);
    seed("bth_chain", name, std::span<const std::byte>(frame).subspan(v->bth_offset));
    seed("roundtrip", std::string{"bth_"} + name, with_prefix(1, std::span<const std::byte>(frame).subspan(v->bth_offset, 12)));
  }
  // The encapsulations the parser accepts beyond the defaults: an 802.1Q tag, IPv6, IPv4 options,
  // another UDP source port with an Ethernet trailer (WRITE_WITH_IMM, 300 bytes of payload).
  {
    const std::vector<std::byte> payload(300, std::byte{0x3C});
    const std::array<std::byte, 8> options{std::byte{0x94}, std::byte{0x04}, std::byte{0}, std::byte{0},
                                           std::byte{0x01}, std::byte{0x01}, std::byte{0x01}, std::byte{0x00}};
    const std::array<std::byte, 6> trailer{};
    flow::packet p{.opcode = ib::opcode::rc_rdma_write_only_with_immediate, .psn = 9, .ack_req = true, .dest_qp = 0x11,
                   .va = 0x1000, .rkey = 0x2b8, .dmalen = 300, .imm = 0x07050100};
    p.payload = payload;
    for (int shape = 0; shape < 4; ++shape) {
      ib::roce_packet r = flow::to_roce(p);
      if (shape == 0) r.vlan = wire::vlan_tag{.priority = 3, .id = 100};
      if (shape == 1) r.v6 = true;
      if (shape == 2) r.ip_options = options;
      if (shape == 3) r.udp.srcport = 0x1234, r.trailer = trailer;
      std::vector<std::byte> frame(*ib::frame_size(r));
      if (!ib::build(r, frame)) continue;
      static constexpr const char* names[] = {"shape_vlan", "shape_ipv6", "shape_ipv4_options", "shape_sport_trailer"};
      seed("roce_frame", names[shape], frame);
    }
  }
  // cells
  namespace tc = test::cells;
  for (const auto& [name, bytes] : {std::pair{"send", std::span<const std::byte>(tc::send_bytes)},
                                    std::pair{"write_first", std::span<const std::byte>(tc::write_first_bytes)},
                                    std::pair{"write_middle", std::span<const std::byte>(tc::write_middle_bytes)},
                                    std::pair{"write_last", std::span<const std::byte>(tc::write_last_bytes)},
                                    std::pair{"ack", std::span<const std::byte>(tc::ack_bytes)},
                                    std::pair{"nak", std::span<const std::byte>(tc::nak_bytes)},
                                    std::pair{"page_fault_delay", std::span<const std::byte>(tc::pfd_bytes)}}) {
    seed("cell_decode", name, bytes);
    seed("roundtrip", std::string{"cell_"} + name, with_prefix(14, bytes.subspan(14)));
  }
  // the reassembler's input: (time step, not-expire choice, u16 length, cell) per cell
  std::vector<std::byte> cells;
  for (const auto bytes : {std::span<const std::byte>(tc::write_first_bytes), std::span<const std::byte>(tc::write_middle_bytes),
                           std::span<const std::byte>(tc::write_last_bytes), std::span<const std::byte>(tc::send_bytes)}) {
    cells.insert(cells.end(), {std::byte{1}, std::byte{1}, std::byte(bytes.size() >> 8), std::byte(bytes.size() & 0xFF)});
    cells.insert(cells.end(), bytes.begin(), bytes.end());
  }
  seed("cell_reassembler", "write_then_send", cells);
  // CRC: the standard check string at an odd offset
  const char check[] = "\x00\x00\x00\x00\x03" "123456789";
  seed("crc_differential", "check_string", std::as_bytes(std::span(check, sizeof check - 1)));
  // the machines: short event streams (each byte picks among the enabled events)
  for (const char* t : {"flow_pool", "flow_rc", "flow_dc", "flow_session", "tcp_agg"}) {
    std::vector<std::byte> zeros(64), ramp(256);
    for (std::size_t i = 0; i < ramp.size(); ++i) ramp[i] = static_cast<std::byte>(i * 37);
    seed(t, "zeros", zeros);
    seed(t, "ramp", ramp);
  }
  // TCP aggregation: max_bytes 65535, timeout 100 us, 4 flows; then 48 segments, each the next
  // of flow 0 or 1 (u32 time step 0, flow, "next", u32 no corruption, u32 checksum to verify)
  {
    std::vector<std::byte> in;
    auto u32 = [&](std::uint32_t v) {
      for (int k = 3; k >= 0; --k) in.push_back(static_cast<std::byte>(v >> (8 * k)));
    };
    u32(65535 - 576), u32(99), u32(3);
    for (int i = 0; i < 48; ++i) {
      u32(0);
      in.insert(in.end(), {std::byte(i / 24), std::byte{2}});
      u32(1), u32(1);
    }
    seed("tcp_agg", "two_flows", in);
  }
  // the hellos: a role byte, then (u16 time step, choice, u16 length, datagram) steps: a CM
  // hello of the other role naming no one, then one naming us; two LAN members' hellos; a tick
  {
    std::vector<std::byte> in{std::byte{1}};
    auto step = [&](std::uint8_t choice, std::span<const std::byte> d) {
      in.insert(in.end(), {std::byte{0}, std::byte{100}, std::byte{choice}, std::byte(d.size() >> 8), std::byte(d.size() & 0xFF)});
      in.insert(in.end(), d.begin(), d.end());
    };
    std::array<std::byte, pp::hello_size> h{};
    (void)wire::encode(pp::hello{.role = 2, .incarnation = 0x2222, .control_qpn = 0x20, .data_qpn = 0x21, .send_max = 256}, h);
    step(0, h);
    (void)wire::encode(pp::hello{.role = 2, .incarnation = 0x2222, .peer_incarnation = 0x1111, .control_qpn = 0x20, .data_qpn = 0x21, .send_max = 256}, h);
    step(0, h);
    std::array<std::byte, pp::lan_hello_size> l{};
    (void)wire::encode(pp::lan_hello{.lid = 2, .qpn = 0x10, .incarnation = 5}, l);
    step(2, l);
    in.push_back(std::byte{1});  // from 198.18.0.2
    (void)wire::encode(pp::lan_hello{.lid = 3, .qpn = 0x10, .incarnation = 6}, l);
    step(2, l);
    in.push_back(std::byte{2});  // from 198.18.0.3
    step(3, {});
    seed("pp_hello", "handshake_and_members", in);
  }
  // the conformance checker's input: (u16 time step, cut choice, u16 length, frame) per frame,
  // a seed per rule's capture
  for (const auto& c : test::conform::rule_cases()) {
    std::vector<std::byte> in{std::byte{1}};  // (no MTU given)
    for (const auto& f : c.cap.frames) {
      in.insert(in.end(), {std::byte{0x03}, std::byte{0xE8}, std::byte{1}, std::byte(f.size() >> 8), std::byte(f.size() & 0xFF)});
      in.insert(in.end(), f.begin(), f.end());
    }
    std::string name = c.name;
    for (char& ch : name)
      if (ch == ' ' || ch == '(' || ch == ')' || ch == '.') ch = '_';
    seed("conform", name, in);
  }
  // capture files: the tests' pcapng vectors, alone and as two sections; a big-endian classic pcap
  namespace ng = test::pcapng;
  seed("pcap_reader", "vector_le.pcapng", ng::little);
  seed("pcap_reader", "vector_be.pcapng", ng::big);
  std::vector<std::byte> two(ng::big.begin(), ng::big.end());
  two.insert(two.end(), ng::little.begin(), ng::little.end());
  seed("pcap_reader", "vector_two_sections.pcapng", two);
  seed("pcap_reader", "big_endian.pcap",
       test::hex<"a1b2c3d4 0002 0004 00000000 00000000 0000ffff 00000001 00000001 00000002 00000002 00000002 abcd">());
  // captures
  for (int a = 2; a < argc; ++a) {
    std::ifstream in(argv[a], std::ios::binary);
    const std::vector<char> raw{std::istreambuf_iterator<char>(in), {}};
    auto r = wire::pcap::reader::open(std::as_bytes(std::span(raw)));
    if (!r) {
      std::fprintf(stderr, "%s: not a pcap\n", argv[a]);
      return 1;
    }
    const std::string stem = fs::path(argv[a]).stem().string();
    seed("pcap_reader", stem + ".pcap", std::as_bytes(std::span(raw)));
    // the same frames as pcapng: two interfaces (the second unused), an interface statistics
    // block, nanosecond timestamps, the last frame as a simple packet block
    test::pcapng::writer le(false), be(true);
    for (auto* w : {&le, &be}) w->shb().idb(1, 0, 9).idb(101, 128).other(5, std::vector<std::byte>(12));
    for (int k = 0;; ++k) {
      const auto rec = r->next();
      if (!rec || !*rec) break;
      const auto frame = (*rec)->data;
      for (auto* w : {&le, &be}) (k % 5 == 4 ? w->spb(static_cast<std::uint32_t>(frame.size()), frame) : w->epb(0, (*rec)->ts_ns, frame));
      const std::string name = stem + "_" + std::to_string(k);
      if (const auto v = ib::decode(frame)) {
        seed("roce_frame", name, frame);
        seed("bth_chain", name, frame.subspan(v->bth_offset));
        if (msg::peek_function(v->payload)) seed("msg_dispatch", name, v->payload);
      } else if (const auto c = cell::decode(frame); c && !c->data.empty()) {
        seed("cell_decode", name, frame);
      }
    }
    seed("pcap_reader", stem + "_le.pcapng", le.end_section().out);
    seed("pcap_reader", stem + "_be.pcapng", be.out);
  }
  std::printf("%d seeds written under %s\n", written, argv[1]);
  return 0;
}
