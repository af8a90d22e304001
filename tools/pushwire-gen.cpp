// pushwire-gen: writes sample captures of a scripted push-push exchange, or one RoCEv2 frame
// given as keys.
//
//   pushwire-gen --framing roce --out FILE.pcap
//   pushwire-gen --framing cell --out FILE.pcap
//   ... --frames N   the exchange repeated to N frames (benchmarks)
//   pushwire-gen frame [--hex] [--out FILE.pcap] [--payload HEX] [--ibta-rd] KEY=VALUE...
//   pushwire-gen frame --keys
//
// frame: one frame from the keys pushwire-dump --json prints (Wireshark's field names,
// spec/roce.md §12), scapy-style: what is not given takes roce_packet's defaults, the
// extended headers the opcode names are added (zero), and lengths, checksums, PadCnt, pad and
// ICRC are computed unless given (a given value is written as it is, even when wrong). --hex
// prints the frame as hex (the default), --out appends it to a classic pcap (created if missing).
//
// RoCEv2 (IPv4 unless noted): host advertises two pools (BufferRecvPool in an RC SEND_ONLY), the
// I/O unit RDMA-writes into one with the split-model document's idata (pool 7, element 5, 256 bytes), the
// host ACKs; a write into pool 300 (beyond idata) meets a page fault and is answered by a
// page-fault ACK (RNR NAK, 2 ms), sent again after the delay and ACKed; its indication goes as
// BufferRDMAIndicate; a bad R_Key is NAKed; DC connect, data and disconnect; a CNP; a UD SEND over
// IPv6 in a VLAN. Every frame follows the protocol's rules (pushwire-conform finds nothing);
// with --bad-icrc a last frame's ICRC is deliberately wrong.
//
// Cells (EtherType 0x88B5, 256-byte cells): the host advertises two pools in a Send on the
// control channel, which the I/O unit ACKs; the I/O unit RDMA-writes 600 bytes (three cells) into
// pool 7 element 5 with idata (7, 5, 600) on the data channel, which the host ACKs; the next write
// meets a page fault and the host answers with a page-fault delay ACK (2000 us); the write is
// sent again after the delay and ACKed.
// Exit status: 0 written, 1 usage, 2 cannot write, or (frame) a bad key or value: one line on
// stderr naming it.
#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include <pushwire/cell/segmenter.hpp>
#include <pushwire/ib/aeth.hpp>
#include <pushwire/ib/keys.hpp>
#include <pushwire/ib/roce.hpp>
#include <pushwire/wire/hex.hpp>
#include <pushwire/msg/idata.hpp>
#include <pushwire/msg/msg.hpp>
#include <pushwire/wire/pcap.hpp>

namespace {

using namespace pushwire;
using ib::ext;

constexpr ib::mac_address host_mac{0x02, 0x00, 0x00, 0x00, 0x00, 0x01}, iou_mac{0x02, 0x00, 0x00, 0x00, 0x00, 0x02};
constexpr ib::ipv4_address host_ip{10, 0, 0, 1}, iou_ip{10, 0, 0, 2};
constexpr std::uint32_t host_qp = 0x11, iou_qp = 0x22;

struct script {
  std::vector<std::byte> file;
  wire::pcap::writer pcap{file};
  std::uint64_t t = 1'700'000'000'000'000'000ull;
  bool bad_icrc = false;  ///< --bad-icrc: end with a frame whose ICRC is wrong

  void add(const ib::roce_packet& s, bool corrupt_icrc = false) {
    std::vector<std::byte> f(*ib::frame_size(s));
    auto n = ib::build(s, f);
    if (!n) {
      std::cerr << "pushwire-gen: build failed: " << wire::to_string(n.code()) << " (" << n.error().field << ")\n";
      std::exit(2);
    }
    if (corrupt_icrc) f.back() ^= std::byte{0x01};
    pcap.add(t, f);
    t += 1'000'000;  // 1 ms apart
  }
};

ib::roce_packet from(bool host_to_iou, ib::opcode op, std::uint32_t psn) {
  ib::roce_packet s;
  s.eth.src = host_to_iou ? host_mac : iou_mac;
  s.eth.dst = host_to_iou ? iou_mac : host_mac;
  s.ip4.src = host_to_iou ? host_ip : iou_ip;
  s.ip4.dst = host_to_iou ? iou_ip : host_ip;
  s.udp.srcport = 0xC000 | 0x0123;
  s.bth = {.opcode = ib::code(op), .p_key = 0xFFFF, .destqp = host_to_iou ? iou_qp : host_qp, .a = true, .psn = psn};
  return s;
}

template <msg::message_type M>
std::vector<std::byte> encode(const M& m) {
  std::vector<std::byte> b(msg::encoded_size(m));
  (void)msg::encode(m, b);
  return b;
}

bool write_file(const std::string& out, const std::vector<std::byte>& file) {
  std::ofstream f(out, std::ios::binary);
  f.write(reinterpret_cast<const char*>(file.data()), static_cast<std::streamsize>(file.size()));
  if (f) return true;
  std::cerr << "pushwire-gen: cannot write " << out << "\n";
  return false;
}

void roce(script& sc) {
  // 1. Host advertises two receive pools: BufferRecvPool in an RC SEND_ONLY. Pool 300's
  //    reference is beyond what idata can name.
  const std::array<msg::pool_descriptor, 2> pools{{{.pool_ref = 7, .element_count = 64, .element_size = 256,
                                                    .memory_handle = 0x1234, .address = 0x7f0000010000},
                                                   {.pool_ref = 300, .element_count = 4, .element_size = 2048,
                                                    .memory_handle = 0x1234, .address = 0x7f0000020000}}};
  const auto advert = encode(msg::buffer_recv_pool{.header = {.transaction_context = 1}, .pools = pools});
  auto s = from(true, ib::opcode::rc_send_only, 100);
  s.payload = advert;
  sc.add(s);
  sc.add([&] {
    auto a = from(false, ib::opcode::rc_acknowledge, 100);
    a.ext.set<ext::aeth>({.syndrome = ib::syndrome::ack(ib::syndrome::unlimited_credits).raw, .msn = 1});
    return a;
  }());
  // 2. The I/O unit writes 256 bytes into pool 7, element 5, with the split-model document's idata.
  std::vector<std::byte> data(256);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::byte>(i);
  auto w = from(false, ib::opcode::rc_rdma_write_only_with_immediate, 500);
  w.ext.set<ext::reth>({.va = 0x7f0000010000 + 5 * 256, .r_key = 0x1234, .dmalen = 256});
  w.ext.set<ext::immdt>({.value = msg::to_imm(*msg::make_idata({7, 5, 256}))});
  w.payload = data;
  sc.add(w);
  sc.add([&] {
    auto a = from(true, ib::opcode::rc_acknowledge, 500);
    a.ext.set<ext::aeth>({.syndrome = ib::syndrome::ack(16).raw, .msn = 1});
    return a;
  }());
  // 3. It writes 1500 bytes into pool 300, element 2 (no idata can say so), and meets a page
  //    fault: the page-fault ACK (RNR NAK) announces 2 ms (code 16: 2.56 ms). It sends nothing
  //    until the delay has passed, then the write again, which is ACKed.
  std::vector<std::byte> big_data(1500);
  for (std::size_t i = 0; i < big_data.size(); ++i) big_data[i] = static_cast<std::byte>(i * 3);
  auto w2 = from(false, ib::opcode::rc_rdma_write_only, 501);
  w2.ext.set<ext::reth>({.va = 0x7f0000020000 + 2 * 2048, .r_key = 0x1234, .dmalen = 1500});
  w2.payload = big_data;
  sc.add(w2);
  sc.add([&] {
    auto a = from(true, ib::opcode::rc_acknowledge, 501);
    a.ext.set<ext::aeth>(ib::page_fault_ack(1, 2000));
    return a;
  }());
  sc.t += 2'000'000;  // 3 ms after the ACK
  sc.add(w2);
  sc.add([&] {
    auto a = from(true, ib::opcode::rc_acknowledge, 501);
    a.ext.set<ext::aeth>({.syndrome = ib::syndrome::ack(16).raw, .msn = 2});
    return a;
  }());
  // 4. Its indication goes as BufferRDMAIndicate.
  const std::array<msg::indication, 1> big{{{.pool_ref = 300, .element_index = 2, .byte_count = 1500}}};
  const auto ind = encode(msg::buffer_rdma_indicate{.header = {.transaction_context = 2}, .entries = big});
  auto si = from(false, ib::opcode::rc_send_only, 502);
  si.payload = ind;
  sc.add(si);
  // 5. A write with a bad R_Key is NAKed (remote access error).
  auto w3 = from(false, ib::opcode::rc_rdma_write_only, 503);
  w3.ext.set<ext::reth>({.va = 0x1000, .r_key = 0xBAD, .dmalen = 4});
  const std::array<std::byte, 4> four{};
  w3.payload = four;
  sc.add(w3);
  sc.add([&] {
    auto a = from(true, ib::opcode::rc_acknowledge, 503);
    a.ext.set<ext::aeth>({.syndrome = ib::syndrome::nak(ib::nak_code::remote_access_error).raw, .msn = 3});
    return a;
  }());
  // 6. Dynamically Connected: connect, an RDMA WRITE, disconnect.
  auto c = from(true, ib::opcode::dc_connect, 1);
  c.bth.destqp = 0x000100;  // the DCT number, as the DCCETH names it
  c.ext.set<ext::dceth>({.access_key = 0x00C0FFEE00C0FFEE}).set<ext::dcceth>({.dct = 0x000100, .dci = 0x000042});
  sc.add(c);
  auto dw = from(true, ib::opcode::dc_rdma_write_only, 2);  // BTH DCETH RDETH DETH RETH
  dw.bth.destqp = 0x000100;
  dw.ext.set<ext::dceth>({.access_key = 0x00C0FFEE00C0FFEE})
      .set<ext::rdeth>({.eecnxt = 0x000042})
      .set<ext::deth>({.q_key = 0, .srcqp = 0x000042})
      .set<ext::reth>({.va = 0x2000, .r_key = 0x77, .dmalen = 4});
  dw.payload = four;
  sc.add(dw);
  auto d = c;
  d.bth.se = true;
  d.bth.psn = 3;
  sc.add(d);
  // 7. A congestion notification.
  auto cnp = from(false, ib::opcode::cnp, 0);
  cnp.bth.a = false;
  cnp.bth.becn = true;
  cnp.ext.set<ext::cnp_pad>({});
  sc.add(cnp);
  // 8. UD SEND_ONLY over IPv6, VLAN 100, carrying a SendData message.
  const std::string text = "hello over UD";
  const auto sd = encode(msg::send_data{.header = {.transaction_context = 3}, .data = std::as_bytes(std::span(text))});
  auto ud = from(true, ib::opcode::ud_send_only, 7);
  ud.vlan = ib::vlan_tag{.priority = 3, .id = 100};
  ud.v6 = true;
  ud.ip6 = {.tclass = 106, .flow = 0x12345, .hlim = 64, .src = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1},
            .dst = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2}};
  ud.ext.set<ext::deth>({.q_key = 0x80010000, .srcqp = host_qp});
  ud.payload = sd;
  sc.add(ud);
  // 9. With --bad-icrc: the first frame again, its ICRC wrong.
  if (sc.bad_icrc) sc.add(s, true);
}

// The cell exchange. Control channel: host WQP 0x10 <-> I/O unit WQP 0x20; data channel: 0x11 <-> 0x21.
void cells(script& sc) {
  auto add = [&](const cell::packet_spec& p, std::span<const std::byte> payload) {
    auto seg = cell::segmenter::make(p, payload);
    if (!seg) {
      std::cerr << "pushwire-gen: segmenter: " << wire::to_string(seg.code()) << " (" << seg.error().field << ")\n";
      std::exit(2);
    }
    while (!seg->done()) {
      std::vector<std::byte> f(seg->next_size());
      (void)seg->next(f);
      sc.pcap.add(sc.t, f);
      sc.t += 1'000;  // cells 1 us apart
    }
    sc.t += 1'000'000;
  };
  const auto from = [](bool host_to_iou, bool data, std::uint32_t psn, cell::cell_type t) {
    cell::packet_spec p{.dst = host_to_iou ? iou_mac : host_mac, .src = host_to_iou ? host_mac : iou_mac};
    p.src_wqp = (host_to_iou ? 0x10u : 0x20u) + (data ? 1u : 0u);
    p.dst_wqp = (host_to_iou ? 0x20u : 0x10u) + (data ? 1u : 0u);
    p.psn = psn;
    p.type = t;
    return p;
  };
  const auto ack = [&](bool host_to_iou, bool data, std::uint32_t psn, cell::ack_info a = {}) {
    auto p = from(host_to_iou, data, psn, a.delay_us ? cell::cell_type::page_fault_delay : cell::cell_type::ack);
    p.ack = a;
    add(p, {});
  };
  // 1. The host advertises two receive pools; the I/O unit ACKs.
  const std::array<msg::pool_descriptor, 2> pools{{{.pool_ref = 7, .element_count = 64, .element_size = 1024,
                                                    .memory_handle = 0x1234, .address = 0x7f0000010000},
                                                   {.pool_ref = 8, .element_count = 16, .element_size = 9000,
                                                    .memory_handle = 0x1235, .address = 0x7f0000100000}}};
  const auto advert = encode(msg::buffer_recv_pool{.header = {.transaction_context = 1}, .pools = pools});
  auto send = from(true, false, 100, cell::cell_type::send);
  send.ack_req = true;
  add(send, advert);
  ack(false, false, 100);
  // 2. The I/O unit writes 600 bytes into pool 7, element 5, with idata (7, 5, 600); the host ACKs.
  std::vector<std::byte> data(600);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::byte>(i * 7);
  auto write = from(false, true, 500, cell::cell_type::rdma_write);
  write.ack_req = true;
  write.rdma = cell::vamh{.va = 0x7f0000010000 + 5 * 1024, .mh = 0x1234};
  write.idata = msg::to_imm(*msg::make_idata({7, 5, 600}));
  add(write, data);
  ack(true, true, 500);
  // 3. The next write meets a page fault: the host asks for a 2000 us pause; the write comes again.
  write.psn = 501;
  write.rdma->va += 1024;
  write.idata = msg::to_imm(*msg::make_idata({7, 6, 600}));
  add(write, data);
  ack(true, true, 501, {.delay_us = 2000});
  sc.t += 2'000'000;
  add(write, data);
  ack(true, true, 501);
}

// The exchange repeated until the capture holds `frames` frames (benchmarks), each repetition
// 1 s after the previous one.
std::vector<std::byte> repeat(const std::vector<std::byte>& once, std::size_t frames) {
  std::vector<std::byte> out;
  wire::pcap::writer w{out};
  for (std::size_t n = 0, round = 0; n < frames; ++round) {
    auto r = wire::pcap::reader::open(once);
    for (auto rec = r->next(); rec && *rec && n < frames; rec = r->next(), ++n)
      w.add((*rec)->ts_ns + round * 1'000'000'000ull, (*rec)->data);
  }
  return out;
}

int usage(const char* why) {
  if (why) std::cerr << "pushwire-gen: " << why << "\n";
  std::cerr << "usage: pushwire-gen --framing roce|cell --out FILE.pcap [--frames N] [--bad-icrc]\n"
               "       pushwire-gen frame [--hex] [--out FILE.pcap] [--payload HEX] [--ibta-rd] KEY=VALUE...\n"
               "       pushwire-gen frame --keys\n"
               "  --framing roce|cell  write the scripted push-push exchange over RoCEv2 or cells\n"
               "  --frames N           repeat the exchange to N frames\n"
               "  --bad-icrc           end with a frame whose ICRC is deliberately wrong (RoCEv2)\n"
               "  frame                build one RoCEv2 frame from the keys pushwire-dump --json prints\n"
               "                       (Wireshark's names: eth.dst=02:00:00:00:00:02 ip.src=10.0.0.1\n"
               "                       infiniband.bth.opcode=10 or pushwire.opcode=RC_RDMA_WRITE_ONLY\n"
               "                       infiniband.reth.dmalen=4 ...; numbers decimal or 0x hex, bytes hex).\n"
               "                       Not given: roce_packet's defaults (IPv4, DF, TTL 64, UDP 49152 > 4791,\n"
               "                       P_Key 0xFFFF), the opcode's extended headers zero; lengths, checksums,\n"
               "                       PadCnt, pad and ICRC computed. Given, even wrong: written as given.\n"
               "                       Any ipv6.* key makes the frame IPv6, any vlan.* key adds a tag.\n"
               "    --hex              print the frame as hex (the default without --out)\n"
               "    --out FILE.pcap    append the frame to a classic pcap, creating it if missing\n"
               "    --payload HEX      the payload (the same as pushwire.payload=HEX)\n"
               "    --ibta-rd          read opcodes 0x40-0x5F as IBTA RD, not DC\n"
               "    --keys             list every key\n"
               "  spec/roce.md section 12 lists the keys and their values.\n"
               "exit status: 0 written, 1 usage, 2 a bad key or value, or cannot write\n";
  return 1;
}

constexpr int exit_bad = 2;

int fail(const std::string& why) {
  std::cerr << "pushwire-gen: " << why << "\n";
  return exit_bad;
}

// Appends `frame` to the capture at `path`, creating a classic pcap if it is missing or empty.
// Classic pcap: a record in the file's byte order and timestamp resolution. pcapng: an Enhanced
// Packet Block on the last section's first Ethernet interface, in that section's byte order and
// the interface's units. Timestamped now, or after the file's last record if that is later.
int append_pcap(const std::string& path, std::span<const std::byte> frame) {
  std::vector<std::byte> file;
  if (std::ifstream in(path, std::ios::binary); in) {
    const std::vector<char> raw{std::istreambuf_iterator<char>(in), {}};
    const auto b = std::as_bytes(std::span(raw));
    file.assign(b.begin(), b.end());
  }
  std::uint64_t ts = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count());
  std::vector<std::byte> out;
  if (file.empty()) {
    wire::pcap::writer w{out};
    w.add(ts, frame);
  } else {
    auto r = wire::pcap::reader::open(file);
    if (!r) return fail(path + ": not a pcap or pcapng file (" + std::string{wire::to_string(r.code())} + ")");
    for (;;) {
      auto rec = r->next();
      if (!rec)
        return fail(path + ": " + std::string{wire::to_string(rec.code())} + " at byte " + std::to_string(rec.error().offset));
      if (!*rec) break;
      ts = std::max(ts, (*rec)->ts_ns + 1000);
    }
    if (r->file_format() == wire::pcap::format::pcapng) {
      const auto ifs = r->interfaces();
      const auto eth = std::find_if(ifs.begin(), ifs.end(), [](const auto& i) { return i.linktype == wire::pcap::linktype_ethernet; });
      if (eth == ifs.end()) return fail(path + ": its last section has no Ethernet interface");
      const auto id = static_cast<std::uint32_t>(eth - ifs.begin());
      if (auto e = wire::pcap::append_epb(out, r->byte_order(), id, *eth, ts, frame); e.code != wire::errc{})
        return fail(path + ": " + std::string{wire::to_string(e.code)} + " (" + std::string{e.field} + ")");
      if (r->section_length() >= 0) {  // a declared section length grows by the block: rewrite the file
        std::byte* field = file.data() + r->section_offset() + wire::pcap::reader::section_length_field;
        const auto length = static_cast<std::uint64_t>(r->section_length()) + out.size();
        r->byte_order() == std::endian::big ? wire::store_be64(field, length) : wire::store_le64(field, length);
        file.insert(file.end(), out.begin(), out.end());
        std::ofstream f(path, std::ios::binary | std::ios::trunc);
        f.write(reinterpret_cast<const char*>(file.data()), static_cast<std::streamsize>(file.size()));
        return f ? 0 : fail("cannot write " + path);
      }
    } else {
      if (r->linktype() != wire::pcap::linktype_ethernet) return fail(path + ": not an Ethernet capture");
      wire::pcap::writer w{out, r->timestamps()};
      out.clear();  // only the record: the file has its header
      w.add(ts, frame);
      if (r->byte_swapped())
        for (auto at = out.begin(); at != out.begin() + wire::pcap::record_header_size; at += 4) std::reverse(at, at + 4);
    }
  }
  std::ofstream f(path, std::ios::binary | std::ios::app);
  f.write(reinterpret_cast<const char*>(out.data()), static_cast<std::streamsize>(out.size()));
  return f ? 0 : fail("cannot write " + path);
}

// pushwire-gen frame ...
int frame_command(int argc, char** argv) {
  bool hex = false, keys = false;
  std::string out;
  std::vector<std::pair<std::string, std::string>> kv;
  ib::rd_class rd = ib::rd_class::dc;
  for (int i = 2; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--hex") hex = true;
    else if (a == "--keys") keys = true;
    else if (a == "--ibta-rd") rd = ib::rd_class::ibta_rd;
    else if (a == "--out" && i + 1 < argc) out = argv[++i];
    else if (a == "--payload" && i + 1 < argc) kv.emplace_back(ib::key::payload, argv[++i]);
    else if (a == "--help" || a == "-h") return usage(nullptr), 0;
    else if (a.starts_with("-")) return usage(("unknown argument: " + std::string{a}).c_str());
    else if (const auto eq = a.find('='); eq == std::string_view::npos || eq == 0)
      return fail(std::string{a} + ": not KEY=VALUE");
    else kv.emplace_back(a.substr(0, eq), a.substr(eq + 1));
  }
  if (keys) {
    for (const auto& k : ib::frame_keys()) std::cout << k << "\n";
    return 0;
  }
  ib::frame_builder b{rd};
  for (const auto& [k, v] : kv) {
    if (auto e = b.set(k, v)) {
      std::string why = e.message;
      if (e.code == wire::key_errc::unknown_key) {
        // The keys of the same header, when there are any.
        std::string near;
        const std::string head = k.substr(0, k.rfind('.') + 1);
        for (const auto& known : ib::frame_keys())
          if (!head.empty() && known.starts_with(head)) near += (near.empty() ? "" : ", ") + known;
        why += near.empty() ? " (pushwire-gen frame --keys lists the keys)" : "; this header has " + near;
      }
      return fail(why);
    }
  }
  ib::roce_packet p;
  if (auto e = b.packet(p)) return fail(e.message);
  const auto size = ib::frame_size(p);
  std::vector<std::byte> f(size ? *size : 0);
  auto n = size ? ib::build(p, f) : wire::result<std::size_t>{size.error()};
  if (!n) {
    const auto& err = n.error();
    return fail("cannot build the frame: " + std::string{wire::to_string(err.code)} +
                (err.field.empty() ? "" : " (" + std::string{err.field} + ")"));
  }
  if (hex || out.empty()) std::cout << wire::to_hex(f) << "\n";
  return out.empty() ? 0 : append_pcap(out, f);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string_view{argv[1]} == "frame") return frame_command(argc, argv);
  std::string framing, out;
  std::size_t frames = 0;
  bool bad_icrc = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--framing" && i + 1 < argc) framing = argv[++i];
    else if (a == "--bad-icrc") bad_icrc = true;
    else if (a == "--out" && i + 1 < argc) out = argv[++i];
    else if (a == "--frames" && i + 1 < argc) {
      const std::string_view n = argv[++i];
      if (std::from_chars(n.data(), n.data() + n.size(), frames).ptr != n.data() + n.size() || frames == 0)
        return usage("--frames needs a positive number");
    }
    else if (a == "--help" || a == "-h") return usage(nullptr), 0;
    else return usage(("unknown argument: " + std::string{a}).c_str());
  }
  if (out.empty()) return usage("--out is required");
  script sc;
  sc.bad_icrc = bad_icrc;
  if (framing == "roce") roce(sc);
  else if (framing == "cell") cells(sc);
  else return usage("--framing must be roce or cell");
  return write_file(out, frames ? repeat(sc.file, frames) : sc.file) ? 0 : 2;
}
