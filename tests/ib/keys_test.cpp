// RoCEv2 frames from key=value pairs (ib/keys.hpp): a real ConnectX-4 frame from its keys,
// computed versus given fields, and the errors.
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <pushwire/ib/keys.hpp>
#include <pushwire/ib/print.hpp>

#include "../support/test_support.hpp"

using namespace pushwire;
using namespace pushwire::ib;
using wire::key_errc;

namespace {

using kvs = std::vector<std::pair<std::string, std::string>>;

// The frame the keys give, or the first error's message.
struct built {
  std::vector<std::byte> frame;
  std::string error;
};
built from_keys(const kvs& keys, rd_class rd = rd_class::dc) {
  frame_builder b{rd};
  for (const auto& [k, v] : keys)
    if (auto e = b.set(k, v)) return {{}, e.message};
  roce_packet p;
  if (auto e = b.packet(p)) return {{}, e.message};
  std::vector<std::byte> f(frame_size(p).value());
  if (auto n = build(p, f); !n) return {{}, std::string{wire::to_string(n.code())}};
  return {f, {}};
}

// roce.uts "RoCE CNP captured on ConnectX-4 Lx": bytes from a NIC, not from pushwire.
constexpr auto cx4_cnp = test::hex<"e41d2dab2bc2 7cfe90643b32 0800 45c2003c718c400040119161 0a001101 0a001201"
                                   "000012b700280000 8100ffff40000118 00000000 00000000000000000000000000000000 82fd002a">();
const kvs cx4_keys{{"eth.dst", "e4:1d:2d:ab:2b:c2"}, {"eth.src", "7c:fe:90:64:3b:32"}, {"ip.dsfield.dscp", "48"},
                   {"ip.dsfield.ecn", "2"},          {"ip.id", "0x718c"},              {"ip.src", "10.0.17.1"},
                   {"ip.dst", "10.0.18.1"},          {"udp.srcport", "0"},             {"pushwire.opcode", "CNP"},
                   {"infiniband.bth.becn", "1"},     {"infiniband.bth.destqp", "0x118"}};

kvs with(kvs k, std::string key, std::string value) {
  k.emplace_back(std::move(key), std::move(value));
  return k;
}

}  // namespace

TEST_CASE("keys: a ConnectX-4 CNP from its keys, lengths, IPv4 checksum and ICRC computed", "[ib][keys]") {
  const auto b = from_keys(cx4_keys);
  CHECK(b.error.empty());
  CHECK(wire::to_hex(b.frame) == wire::to_hex(cx4_cnp));
  // The same by opcode number, and with the computed fields given as they are.
  CHECK(from_keys(with(cx4_keys, "infiniband.bth.opcode", "0x81")).frame == test::copy(cx4_cnp));
  CHECK(from_keys(with(with(with(cx4_keys, "ip.checksum", "0x9161"), "udp.length", "40"), "infiniband.invariant.crc",
                       "0x82fd002a"))
            .frame == test::copy(cx4_cnp));
}

TEST_CASE("keys: a given value is written as it is, even when wrong", "[ib][keys]") {
  const auto good = test::copy(cx4_cnp);
  auto expect = [&](const kvs& keys, std::size_t at, std::string_view hex) {
    const auto b = from_keys(keys);
    REQUIRE(b.error.empty());
    REQUIRE(b.frame.size() == good.size());
    CHECK(wire::to_hex(std::span(b.frame).subspan(at, hex.size() / 2)) == hex);
    return b.frame;
  };
  // IPv4 checksum at 24: kept; the ICRC (which masks it) is unchanged.
  auto f = expect(with(cx4_keys, "ip.checksum", "0x1234"), 24, "1234");
  CHECK(wire::to_hex(std::span(f).last(4)) == "82fd002a");
  CHECK_FALSE(decode(f)->ip_checksum_ok);
  // The ICRC as Wireshark shows it is its wire bytes in order.
  f = expect(with(cx4_keys, "infiniband.invariant.crc", "0x01020304"), good.size() - 4, "01020304");
  CHECK(decode(f)->icrc_state == crc_status::bad);
  // UDP length at 38: the frame no longer parses, at that field.
  f = expect(with(cx4_keys, "udp.length", "99"), 38, "0063");
  CHECK(decode(f).error().field == "udp.length");
  // IP total length and version.
  expect(with(cx4_keys, "ip.len", "0x3d"), 16, "003d");
  expect(with(cx4_keys, "ip.version", "5"), 14, "55");
}

TEST_CASE("keys: payload, pad, PadCnt, VLAN, IPv6, options, trailer", "[ib][keys]") {
  const kvs send{{"pushwire.opcode", "RC_SEND_ONLY"}, {"pushwire.payload", "aabbcc"}};
  auto b = from_keys(send);
  REQUIRE(b.error.empty());
  auto p = decode(b.frame).value();
  CHECK(p.bth.padcnt == 1);
  CHECK(wire::to_hex(p.pad) == "00");
  CHECK(p.icrc_state == crc_status::good);
  // A given pad: PadCnt follows it unless given too.
  p = decode((b = from_keys(with(send, "pushwire.pad", "ff"))).frame).value();
  CHECK(wire::to_hex(p.pad) == "ff");
  CHECK(p.icrc_state == crc_status::good);
  b = from_keys(with(with(send, "pushwire.pad", ""), "infiniband.bth.padcnt", "3"));
  CHECK(b.frame.size() == 14 + 20 + 8 + 12 + 3 + 4);
  CHECK(b.frame[14 + 20 + 8 + 1] == std::byte{0x30});
  p = decode(b.frame).value();  // the payload's bytes now read as the pad
  CHECK(p.payload.empty());
  CHECK(wire::to_hex(p.pad) == "aabbcc");
  // A vlan.* key adds the tag; eth.type and vlan.etype are computed each unless given.
  b = from_keys(with(send, "vlan.id", "100"));
  CHECK(wire::to_hex(std::span(b.frame).subspan(12, 6)) == "810000640800");
  b = from_keys(with(send, "vlan.etype", "0x1234"));
  CHECK(wire::to_hex(std::span(b.frame).subspan(12, 6)) == "810000001234");
  b = from_keys(with(with(send, "vlan.id", "5"), "eth.type", "0x88a8"));
  CHECK(wire::to_hex(std::span(b.frame).subspan(12, 6)) == "88a800050800");
  // An ipv6.* key makes the frame IPv6 (UDP checksum computed).
  p = decode((b = from_keys(with(with(send, "ipv6.src", "fd00::1"), "ipv6.flow", "0x12345"))).frame).value();
  CHECK(p.v6);
  CHECK(wire::address_text(p.ip6.src) == "fd00::1");
  CHECK(p.ip6.flow == 0x12345);
  CHECK(p.udp.checksum != 0);
  // IPv4 options: IHL follows; bytes after the IP packet.
  p = decode((b = from_keys(with(with(send, "ip.options", "94040000"), "eth.trailer", "0000"))).frame).value();
  CHECK(p.ip4.hdr_len == 6);
  CHECK(p.ip_checksum_ok);
  CHECK(wire::to_hex(p.ip_options) == "94040000");
  CHECK(wire::to_hex(p.trailer) == "0000");
  CHECK(p.icrc_state == crc_status::good);
  // The opcode's extended headers are added, zero, when no key names them.
  p = decode((b = from_keys({{"pushwire.opcode", "UD_SEND_ONLY"}, {"infiniband.deth.srcqp", "7"}})).frame).value();
  CHECK(p.ext.get<ext::deth>()->srcqp == 7);
  p = decode((b = from_keys({{"infiniband.bth.opcode", "10"}})).frame).value();
  CHECK(p.ext.get<ext::reth>()->va == 0);
  // DC_DISCONNECT is DC_CONNECT with SE set; RD under --ibta-rd.
  p = decode((b = from_keys({{"pushwire.opcode", "DC_DISCONNECT"}})).frame).value();
  CHECK(p.bth.opcode == code(opcode::dc_connect));
  CHECK(p.bth.se);
  p = decode((b = from_keys({{"pushwire.opcode", "RD_SEND_ONLY"}}, rd_class::ibta_rd)).frame, {.rd = rd_class::ibta_rd}).value();
  CHECK(p.op->id == opcode::rd_send_only);
}

TEST_CASE("keys: errors name the key and what is wrong", "[ib][keys]") {
  struct bad {
    kvs keys;
    const char* message;
  };
  for (const bad& b : {
           bad{{{"infiniband.reth.dma_length", "4"}}, "unknown key infiniband.reth.dma_length"},
           bad{{{"frame", "1"}}, "unknown key frame"},
           bad{{{"pushwire.icrc", "good"}}, "unknown key pushwire.icrc"},
           bad{{{"ip.dsfield_dscp", "1"}}, "unknown key ip.dsfield_dscp"},
           bad{{{"ip.ttl", "64"}, {"ip.ttl", "65"}}, "ip.ttl: given twice"},
           bad{{{"pushwire.payload", "00"}, {"pushwire.payload", "01"}}, "pushwire.payload: given twice"},
           bad{{{"ip.ttl", "256"}}, "ip.ttl=256: wider than the field's 8 bits (at most 255)"},
           bad{{{"infiniband.bth.padcnt", "4"}}, "infiniband.bth.padcnt=4: wider than the field's 2 bits (at most 3)"},
           bad{{{"infiniband.bth.psn", "0x1000000"}}, "infiniband.bth.psn=0x1000000: wider than the field's 24 bits (at most 16777215)"},
           bad{{{"infiniband.invariant.crc", "0x100000000"}}, "infiniband.invariant.crc=0x100000000: wider than the field's 32 bits (at most 4294967295)"},
           bad{{{"udp.length", "ten"}}, "udp.length=ten: not a number (decimal or 0x hex)"},
           bad{{{"ip.src", "10.0.0"}}, "ip.src=10.0.0: not an IPv4 address (as 10.0.0.1)"},
           bad{{{"eth.dst", "02:00"}}, "eth.dst=02:00: not 6 octets in hex (as 02:00:00:00:00:01)"},
           bad{{{"pushwire.payload", "abc"}}, "pushwire.payload=abc: not hex"},
           bad{{{"pushwire.pad", "00000000"}}, "pushwire.pad=00000000: a pad is at most 3 bytes"},
           bad{{{"ip.options", "010101"}}, "ip.options=010101: IPv4 options are a multiple of 4 bytes, at most 40"},
           bad{{{"pushwire.dc.resv0", "1"}}, "pushwire.dc.resv0=1: a reserved field, always 0"},
           bad{{{"ip.ttl", "1"}, {"ipv6.hlim", "1"}}, "ipv6.hlim: the frame already has ip.* keys"},
           bad{{{"ipv6.hlim", "1"}, {"ip.options", "01010101"}}, "ip.options: the frame already has ipv6.* keys"},
           bad{{{"infiniband.reth.va", "1"}}, "infiniband.reth.va: RC_SEND_FIRST (0x00) carries no RETH"},
           bad{{{"pushwire.opcode", "RC_SEND_ONLY"}, {"infiniband.aeth.msn", "1"}}, "infiniband.aeth.msn: RC_SEND_ONLY (0x04) carries no AETH"},
           bad{{{"pushwire.opcode", "RC_ACKNOWLEDGE"}, {"pushwire.payload", "00"}}, "pushwire.payload: RC_ACKNOWLEDGE (0x11) carries no payload"},
           bad{{{"infiniband.bth.opcode", "0x18"}}, "infiniband.bth.opcode=24: a reserved opcode"},
           bad{{{"pushwire.opcode", "RC_SEND"}}, "pushwire.opcode=RC_SEND: not an opcode name (as RC_SEND_ONLY)"},
           bad{{{"pushwire.opcode", "RC_SEND_ONLY"}, {"infiniband.bth.opcode", "5"}},
               "pushwire.opcode=RC_SEND_ONLY: disagrees with infiniband.bth.opcode=5"},
           bad{{{"pushwire.opcode", "DC_DISCONNECT"}, {"infiniband.bth.se", "0"}},
               "pushwire.opcode=DC_DISCONNECT: disagrees with infiniband.bth.se=0"},
           bad{{{"pushwire.opcode", "RD_SEND_ONLY"}},
               "pushwire.opcode=RD_SEND_ONLY: opcode 0x44 reads as DC_SEND_ONLY here (--ibta-rd reads 0x40-0x5F as RD)"},
       }) {
    INFO(b.message);
    CHECK(from_keys(b.keys).error == b.message);
  }
  // An error leaves the builder as it was.
  frame_builder fb;
  CHECK(fb.set("ip.ttl", "300").code == key_errc::too_wide);
  CHECK_FALSE(fb.set("ip.ttl", "1"));
  CHECK(fb.set("ipv6.hlim", "1").code == key_errc::invalid);
  CHECK_FALSE(fb.set("ip.options", "01010101"));
  roce_packet p;
  CHECK_FALSE(fb.packet(p));
  CHECK_FALSE(p.v6);
}

TEST_CASE("keys: frame_keys lists each key once, and every key the JSON has", "[ib][keys]") {
  const auto all = frame_keys();
  const std::set<std::string> known(all.begin(), all.end());
  CHECK(known.size() == all.size());
  for (const char* k : {"eth.dst", "vlan.id", "ip.dsfield.dscp", "ip.flags.df", "ip.options", "ipv6.flow", "udp.length",
                        "infiniband.bth.psn", "infiniband.reth.dmalen", "infiniband.immdt", "pushwire.dc.access_key",
                        "pushwire.dc.dct", "infiniband.cnp.resv0", "pushwire.payload", "pushwire.pad",
                        "infiniband.invariant.crc", "eth.trailer", "pushwire.opcode"}) {
    INFO(k);
    CHECK(known.count(k) == 1);
  }
  // Every key of frames with a tag, IPv6, options, a trailer, each extended header.
  std::vector<std::pair<kvs, rd_class>> frames{
      {{{"vlan.id", "1"}, {"ipv6.hlim", "1"}, {"pushwire.opcode", "UD_SEND_ONLY_WITH_IMMEDIATE"}}, rd_class::dc},
      {{{"ip.options", "01010101"}, {"eth.trailer", "00"}, {"pushwire.opcode", "DC_RDMA_WRITE_ONLY"}}, rd_class::dc}};
  for (const opcode_info& o : opcodes) {
    kvs k{{"pushwire.opcode", std::string{o.name}}};
    if (o.fixed_payload) k.emplace_back("pushwire.payload", std::string(2 * o.fixed_payload, '0'));
    frames.emplace_back(k, o.tp == transport::rd ? rd_class::ibta_rd : rd_class::dc);
  }
  for (const auto& [keys, rd] : frames) {
    INFO(keys.back().second);
    auto b = from_keys(keys, rd);
    REQUIRE(b.error.empty());
    std::string s;
    wire::json_writer w{s};
    w.begin_object();
    write_json_fields(w, decode(b.frame, {.rd = rd}).value());
    w.end_object();
    // Every `{"name":` or `,"name":` is a key (values never hold a quote).
    std::size_t keys_seen = 0;
    for (std::size_t i = 0; (i = s.find('"', i)) != std::string::npos;) {
      const std::size_t end = s.find('"', i + 1);
      REQUIRE(end != std::string::npos);
      if (i > 0 && (s[i - 1] == '{' || s[i - 1] == ',') && end + 1 < s.size() && s[end + 1] == ':') {
        const std::string k = s.substr(i + 1, end - i - 1);
        INFO(k);
        CHECK((known.count(k) == 1 || k == "pushwire.icrc"));
        ++keys_seen;
      }
      i = end + 1;
    }
    CHECK(keys_seen >= keys.size());
  }
}
