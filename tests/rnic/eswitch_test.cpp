// The embedded switch (rnic/eswitch.hpp) on real RoCEv2 frames built by ib::build: steering by
// QPN block and address (with a random property over 10k frames), the spoof check one altered
// field at a time, limits per function across attachments, the token bucket over simulated
// time, the ctl command language with each of its refusals; and the control protocol's messages
// (rnic/attach.hpp) through wire::encode / wire::decode.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <pushwire/ib/roce.hpp>
#include <pushwire/rnic/attach.hpp>
#include <pushwire/rnic/eswitch.hpp>

#include "../support/test_support.hpp"

// Everything in its own namespace: the rnic tests compile as one translation unit.
namespace pw_eswitch_test {

namespace rnic = pushwire::rnic;
namespace ctl = pushwire::rnic::ctl;
namespace ib = pushwire::ib;
namespace wire = pushwire::wire;
using rnic::fn_errc;
using rnic::rx_drop_reason;
using rnic::tx_drop;

const ib::gid g1 = ib::gid_v4(198, 18, 0, 1), g2 = ib::gid_v4(198, 18, 0, 2);
const ib::gid g6a{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, g6b{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
const ib::gid foreign4 = ib::gid_v4(10, 0, 0, 9), foreign6{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x99};
const wire::mac_address port_mac{0x02, 0x00, 0xc6, 0x12, 0x00, 0x01};

rnic::eswitch_config config(std::uint32_t vfs = 2, rnic::function_limits limits = {}) {
  rnic::eswitch_config c;
  c.mac = port_mac;
  c.gids = {g1, g2, g6a, g6b};
  c.vfs = vfs;
  c.limits = limits;
  return c;
}

/// Splits a command line at spaces (the words ctl sends separated by NUL).
std::vector<std::string_view> words(std::string_view line) {
  std::vector<std::string_view> w;
  std::size_t at = 0;
  while (at < line.size()) {
    const std::size_t sp = std::min(line.find(' ', at), line.size());
    if (sp > at) w.push_back(line.substr(at, sp - at));
    at = sp + 1;
  }
  return w;
}
std::optional<fn_errc> run(rnic::eswitch& sw, std::string_view line, std::string& out) { return sw.command(words(line), out); }
std::optional<fn_errc> run(rnic::eswitch& sw, std::string_view line) {
  std::string out;
  return run(sw, line, out);
}

std::uint32_t attach(rnic::eswitch& sw, std::uint16_t f, std::uint32_t pid) {
  auto a = sw.attach(f, pid);
  REQUIRE(std::holds_alternative<const rnic::eswitch::attachment*>(a));
  return std::get<const rnic::eswitch::attachment*>(a)->id;
}

/// What a frame is made of: the fields the switch looks at.
struct frame_spec {
  wire::mac_address src_mac{0x02, 0, 0, 0, 0, 0x77}, dst_mac{0x02, 0, 0, 0, 0, 0x88};
  ib::gid src = foreign4, dst = g1;  ///< both IPv4-mapped, or both IPv6
  std::uint16_t sport = ib::roce_port;
  std::uint16_t pkey = 0xFFFF;
  std::uint32_t destqp = 1 << 14;
  std::optional<std::uint32_t> srcqp{};  ///< a UD SEND with its DETH; else an RC SEND
  bool vlan = false;
  std::size_t payload = 16;
};

std::vector<std::byte> frame_of(const frame_spec& s) {
  static const std::vector<std::byte> bytes(4096, std::byte{0x5C});
  ib::roce_packet p;
  p.eth.src = s.src_mac;
  p.eth.dst = s.dst_mac;
  if (s.vlan) p.vlan = wire::vlan_tag{.priority = 3, .id = 100};
  p.v6 = !ib::is_v4(s.dst);
  REQUIRE(ib::is_v4(s.src) == !p.v6);
  if (p.v6) {
    std::copy(s.src.begin(), s.src.end(), p.ip6.src.begin());
    std::copy(s.dst.begin(), s.dst.end(), p.ip6.dst.begin());
  } else {
    const auto a = ib::v4_of(s.src), b = ib::v4_of(s.dst);
    std::copy(a.begin(), a.end(), p.ip4.src.begin());
    std::copy(b.begin(), b.end(), p.ip4.dst.begin());
  }
  p.udp.srcport = s.sport;
  p.bth.opcode = ib::code(s.srcqp ? ib::opcode::ud_send_only : ib::opcode::rc_send_only);
  p.bth.p_key = s.pkey;
  p.bth.destqp = s.destqp;
  p.bth.psn = 7;
  if (s.srcqp) p.ext.set<ib::ext::deth>({.q_key = 0x11111111, .srcqp = *s.srcqp});
  p.payload = std::span(bytes).first(s.payload);
  std::vector<std::byte> out(2048 + s.payload);
  const auto n = ib::build(p, out);
  REQUIRE(n.has_value());
  out.resize(*n);
  // A good frame, ICRC and all (the switch itself skips the ICRC).
  ib::roce_view v;
  REQUIRE(ib::inspect(out, v, {.crc = wire::crc_check::require}).code == wire::errc{});
  return out;
}

wire::mac_address dst_mac_of(std::span<const std::byte> f) {
  wire::mac_address m;
  for (std::size_t i = 0; i < 6; ++i) m[i] = std::to_integer<std::uint8_t>(f[i]);
  return m;
}

/// The destination QPN and address of a frame, read back by the library's decoder.
struct seen {
  std::uint32_t destqp;
  ib::gid dst;
};
seen read_back(std::span<const std::byte> f) {
  const auto p = ib::decode(f, {.crc = wire::crc_check::skip});
  REQUIRE(p.has_value());
  ib::gid g{};
  if (p->v6) std::copy(p->ip6.dst.begin(), p->ip6.dst.end(), g.begin());
  else g = ib::gid_v4(p->ip4.dst);
  return {p->bth.destqp, g};
}

std::variant<rx_drop_reason, std::uint32_t> steer(rnic::eswitch& sw, std::vector<std::byte> f) { return sw.steer(f); }

/// A JSON value, strictly (RFC 8259's grammar; no duplicate-key check).
class json_checker {
 public:
  explicit json_checker(std::string_view s) : s_(s) {}
  bool valid() {
    ws();
    if (!value()) return false;
    ws();
    return i_ == s_.size();
  }

 private:
  bool value() {
    if (i_ >= s_.size()) return false;
    switch (s_[i_]) {
      case '{': return object();
      case '[': return array();
      case '"': return string();
      case 't': return word("true");
      case 'f': return word("false");
      case 'n': return word("null");
      default: return number();
    }
  }
  bool object() {
    ++i_;
    ws();
    if (eat('}')) return true;
    do {
      ws();
      if (!string()) return false;
      ws();
      if (!eat(':')) return false;
      ws();
      if (!value()) return false;
      ws();
    } while (eat(','));
    return eat('}');
  }
  bool array() {
    ++i_;
    ws();
    if (eat(']')) return true;
    do {
      ws();
      if (!value()) return false;
      ws();
    } while (eat(','));
    return eat(']');
  }
  bool string() {
    if (!eat('"')) return false;
    while (i_ < s_.size() && s_[i_] != '"') {
      if (static_cast<unsigned char>(s_[i_]) < 0x20) return false;
      if (s_[i_] == '\\') ++i_;
      ++i_;
    }
    return eat('"');
  }
  bool number() {
    const std::size_t start = i_;
    eat('-');
    if (i_ >= s_.size() || !digit()) return false;
    if (s_[i_] == '0') ++i_;
    else
      while (i_ < s_.size() && digit()) ++i_;
    if (eat('.')) {
      if (i_ >= s_.size() || !digit()) return false;
      while (i_ < s_.size() && digit()) ++i_;
    }
    return i_ > start;
  }
  bool word(std::string_view w) {
    if (s_.substr(i_, w.size()) != w) return false;
    i_ += w.size();
    return true;
  }
  bool digit() const { return s_[i_] >= '0' && s_[i_] <= '9'; }
  bool eat(char c) {
    if (i_ < s_.size() && s_[i_] == c) return ++i_, true;
    return false;
  }
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r')) ++i_;
  }
  std::string_view s_;
  std::size_t i_ = 0;
};
bool valid_json(std::string_view s) { return json_checker(s).valid(); }

// ---- steering ----------------------------------------------------------------------------

TEST_CASE("eswitch: a frame goes to the attachment whose QPN block holds its destination QPN", "[rnic][eswitch]") {
  rnic::eswitch sw(config());
  const std::uint32_t a1 = attach(sw, 1, 100), a2 = attach(sw, 2, 200), a3 = attach(sw, 1, 101);
  CHECK(a1 == 1);
  CHECK(a2 == 2);
  CHECK(a3 == 3);
  CHECK(sw.find(a2)->qpn_first() == 2u << 14);
  const wire::mac_address vf1 = rnic::function_mac(1, {198, 18, 0, 1}), vf2 = rnic::function_mac(2, {198, 18, 0, 1});
  CHECK(sw.function(1)->settings.mac == vf1);
  CHECK(sw.function(2)->settings.mac == vf2);
  struct probe {
    std::uint32_t qpn;
    ib::gid dst;
    std::variant<rx_drop_reason, std::uint32_t> to;
    wire::mac_address mac;
  };
  const wire::mac_address wire_mac{0x02, 0, 0, 0, 0, 0x88};
  for (const probe& x : std::vector<probe>{
           {1u << 14, g1, a1, vf1},
           {(2u << 14) - 1, g2, a1, vf1},
           {(1u << 14) + 0x123, g6a, a1, vf1},
           {2u << 14, g1, a2, vf2},
           {(3u << 14) - 1, g6b, a2, vf2},
           {3u << 14, g2, a3, vf1},
           {(3u << 14) + 77, g6a, a3, vf1},
           {0, g1, rx_drop_reason::no_attachment, wire_mac},
           {1, g1, rx_drop_reason::no_attachment, wire_mac},
           {(1u << 14) - 1, g1, rx_drop_reason::no_attachment, wire_mac},
           {4u << 14, g1, rx_drop_reason::no_attachment, wire_mac},
           {0xFFFFFF, g1, rx_drop_reason::no_attachment, wire_mac},
           {1u << 14, foreign4, rx_drop_reason::not_its_address, wire_mac},
           {2u << 14, foreign6, rx_drop_reason::not_its_address, wire_mac},
       }) {
    INFO("qpn " << x.qpn);
    const frame_spec s{.src = ib::is_v4(x.dst) ? foreign4 : foreign6, .dst = x.dst, .destqp = x.qpn};
    auto f = frame_of(s);
    const auto before = f;
    const auto to = sw.steer(f);
    CHECK(to == x.to);
    CHECK(dst_mac_of(f) == x.mac);
    CHECK(std::equal(f.begin() + 6, f.end(), before.begin() + 6, before.end()));  // only the MAC changes
  }
  CHECK(sw.rx_drops()[static_cast<std::size_t>(rx_drop_reason::no_attachment)] == 5);
  CHECK(sw.rx_drops()[static_cast<std::size_t>(rx_drop_reason::not_its_address)] == 2);
  CHECK(sw.rx_drops()[static_cast<std::size_t>(rx_drop_reason::not_roce)] == 0);
  CHECK(sw.function(1)->counters.rx_frames == 5);
  CHECK(sw.function(2)->counters.rx_frames == 2);
  CHECK(sw.function(0)->counters.rx_frames == 0);
  // Detached: its block takes nothing more.
  sw.detach(a2);
  CHECK(steer(sw, frame_of({.dst = g2, .destqp = 2u << 14})) == std::variant<rx_drop_reason, std::uint32_t>(rx_drop_reason::no_attachment));
}

TEST_CASE("eswitch: a frame to an address that is not of its function is not_its_address", "[rnic][eswitch]") {
  rnic::eswitch sw(config());
  const std::uint32_t a1 = attach(sw, 1, 100);
  using to_t = std::variant<rx_drop_reason, std::uint32_t>;
  // Every port address is VF 1's by default.
  for (const ib::gid& g : {g1, g2, g6a, g6b})
    CHECK(steer(sw, frame_of({.src = ib::is_v4(g) ? foreign4 : foreign6, .dst = g, .destqp = a1 << 14})) == to_t(a1));
  REQUIRE_FALSE(run(sw, "vf set 1 gid 198.18.0.2,fd00:0:0:0:0:0:0:2").has_value());
  CHECK(sw.function(1)->settings.gids == std::vector<ib::gid>{g2, g6b});
  CHECK(steer(sw, frame_of({.dst = g1, .destqp = a1 << 14})) == to_t(rx_drop_reason::not_its_address));
  CHECK(steer(sw, frame_of({.src = foreign6, .dst = g6a, .destqp = a1 << 14})) == to_t(rx_drop_reason::not_its_address));
  CHECK(steer(sw, frame_of({.dst = g2, .destqp = a1 << 14})) == to_t(a1));
  CHECK(steer(sw, frame_of({.src = foreign6, .dst = g6b, .destqp = a1 << 14})) == to_t(a1));
  // The IPv4-mapped GID is not the IPv6 address with the same last bytes.
  const ib::gid v6_lookalike{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 198, 18, 0, 2};
  CHECK(steer(sw, frame_of({.src = foreign6, .dst = v6_lookalike, .destqp = a1 << 14})) == to_t(rx_drop_reason::not_its_address));
  CHECK(sw.rx_drops()[static_cast<std::size_t>(rx_drop_reason::not_its_address)] == 3);
}

TEST_CASE("eswitch: bytes that are not RoCEv2 are not_roce and unchanged", "[rnic][eswitch]") {
  rnic::eswitch sw(config());
  const std::uint32_t a1 = attach(sw, 1, 100);
  const auto good = frame_of({.dst = g1, .destqp = a1 << 14});
  std::vector<std::vector<std::byte>> junk;
  junk.emplace_back();                                          // nothing
  junk.emplace_back(good.begin(), good.begin() + 13);           // a short Ethernet header
  junk.emplace_back(good.begin(), good.begin() + 40);           // cut in the IP header
  junk.emplace_back(good.begin(), good.end() - 1);              // cut before its end (IP length)
  junk.emplace_back(std::vector<std::byte>(64, std::byte{0}));  // zeros
  auto arp = good;
  arp[12] = std::byte{0x08}, arp[13] = std::byte{0x06};  // EtherType ARP
  junk.push_back(arp);
  auto udp = good;
  udp[14 + 20 + 3] ^= std::byte{1};  // UDP destination port 4790
  junk.push_back(udp);
  auto tcp = good;
  tcp[14 + 9] = std::byte{6};  // IP protocol TCP
  junk.push_back(tcp);
  for (std::size_t i = 0; i < junk.size(); ++i) {
    INFO("junk " << i);
    auto f = junk[i];
    const auto to = sw.steer(f);
    REQUIRE(std::holds_alternative<rx_drop_reason>(to));
    CHECK(std::get<rx_drop_reason>(to) == rx_drop_reason::not_roce);
    CHECK(f == junk[i]);
  }
  CHECK(sw.rx_drops()[static_cast<std::size_t>(rx_drop_reason::not_roce)] == junk.size());
  CHECK(sw.function(1)->counters.rx_frames == 0);
  // A bad ICRC is the program's to find: the switch steers it.
  auto bad_crc = good;
  bad_crc.back() ^= std::byte{0xFF};
  CHECK(steer(sw, bad_crc) == std::variant<rx_drop_reason, std::uint32_t>(a1));
}

TEST_CASE("eswitch: steering rewrites the destination MAC and unsteer gives the count back", "[rnic][eswitch]") {
  rnic::eswitch sw(config());
  const std::uint32_t a1 = attach(sw, 1, 100), a0 = attach(sw, 0, 50);
  REQUIRE_FALSE(run(sw, "vf set 1 mac 02:aa:bb:cc:dd:ee").has_value());
  auto f = frame_of({.dst_mac = wire::broadcast_mac, .dst = g1, .destqp = (a1 << 14) + 5});
  REQUIRE(sw.steer(f) == std::variant<rx_drop_reason, std::uint32_t>(a1));
  CHECK(dst_mac_of(f) == wire::mac_address{0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee});
  // A VLAN-tagged frame: the MAC is still the first six bytes.
  auto v = frame_of({.dst = g1, .destqp = a1 << 14, .vlan = true});
  REQUIRE(sw.steer(v) == std::variant<rx_drop_reason, std::uint32_t>(a1));
  CHECK(dst_mac_of(v) == wire::mac_address{0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee});
  // The PF: the port's MAC.
  auto p = frame_of({.dst = g2, .destqp = a0 << 14});
  REQUIRE(sw.steer(p) == std::variant<rx_drop_reason, std::uint32_t>(a0));
  CHECK(dst_mac_of(p) == port_mac);
  CHECK(sw.function(1)->counters.rx_frames == 2);
  CHECK(sw.function(1)->counters.rx_bytes == f.size() + v.size());
  CHECK(sw.find(a1)->rx_frames == 2);
  CHECK(sw.find(a0)->rx_frames == 1);
  sw.unsteer(a1, v.size());
  CHECK(sw.function(1)->counters.rx_frames == 1);
  CHECK(sw.function(1)->counters.rx_bytes == f.size());
  CHECK(sw.find(a1)->rx_frames == 1);
  CHECK(sw.rx_drops()[static_cast<std::size_t>(rx_drop_reason::ring_full)] == 1);
}

TEST_CASE("eswitch: a frame to one of the port's addresses is local and any other is not", "[rnic][eswitch]") {
  rnic::eswitch sw(config());
  CHECK(sw.is_local(frame_of({.dst = g1, .destqp = 1u << 14})));
  CHECK(sw.is_local(frame_of({.dst = g2, .destqp = 5})));
  CHECK_FALSE(sw.is_local(frame_of({.dst = ib::gid_v4(198, 18, 9, 9), .destqp = 1u << 14})));
  CHECK_FALSE(sw.is_local(std::vector<std::byte>(64, std::byte{0x5A})));
}

TEST_CASE("eswitch: 10k random frames are steered only inside the QPN block and addresses of their attachment", "[rnic][eswitch]") {
  rnic::eswitch sw(config(3));
  REQUIRE_FALSE(run(sw, "vf set 1 gid 198.18.0.1,fd00:0:0:0:0:0:0:1").has_value());
  REQUIRE_FALSE(run(sw, "vf set 2 gid 198.18.0.2,fd00:0:0:0:0:0:0:2").has_value());
  const std::uint32_t a1 = attach(sw, 1, 100), a2 = attach(sw, 2, 200);
  // VF 3 has an attachment that is then detached: its block is free again.
  const std::uint32_t gone = attach(sw, 3, 300);
  sw.detach(gone);
  const std::map<std::uint32_t, std::uint16_t> function_of{{a1, 1}, {a2, 2}};
  const std::vector<ib::gid> addresses{g1, g2, g6a, g6b, foreign4, foreign6};
  std::mt19937_64 rng(20240611);
  auto pick = [&](std::uint64_t n) { return static_cast<std::size_t>(rng() % n); };
  std::map<std::string, std::uint64_t> outcomes;
  std::array<std::uint64_t, 4> drops{};
  std::map<std::uint16_t, std::uint64_t> rx;
  for (int i = 0; i < 10000; ++i) {
    // Mostly the two attachments' blocks, also block 0, the detached block, and anywhere.
    const std::uint32_t blocks[] = {a1, a2, a1, a2, 0, gone, static_cast<std::uint32_t>(pick(1024))};
    const std::uint32_t block = blocks[pick(std::size(blocks))];
    const std::uint32_t qpn = block << 14 | static_cast<std::uint32_t>(pick(1 << 14));
    const ib::gid dst = addresses[pick(addresses.size())];
    frame_spec s{.src = ib::is_v4(dst) ? foreign4 : foreign6, .dst = dst, .destqp = qpn};
    s.dst_mac = {0x02, 0, 0, 0, static_cast<std::uint8_t>(pick(256)), static_cast<std::uint8_t>(pick(256))};
    if (pick(2)) s.srcqp = static_cast<std::uint32_t>(pick(1 << 24));
    s.vlan = pick(10) == 0;
    s.payload = pick(64);
    auto f = frame_of(s);
    std::optional<rx_drop_reason> expect_drop;
    if (pick(20) == 0) {  // junk now and then: the frame cut short
      f.resize(pick(f.size() - 4));
      expect_drop = rx_drop_reason::not_roce;
    } else if (!function_of.contains(qpn >> 14)) {
      expect_drop = rx_drop_reason::no_attachment;
    } else {
      const auto& gids = sw.function(function_of.at(qpn >> 14))->settings.gids;
      if (std::find(gids.begin(), gids.end(), dst) == gids.end()) expect_drop = rx_drop_reason::not_its_address;
    }
    const auto before = f;
    const auto to = sw.steer(f);
    if (const auto* id = std::get_if<std::uint32_t>(&to)) {
      ++outcomes["steered"];
      // The property: inside the attachment's block, to one of its function's addresses, with
      // its function's MAC, and nothing else changed.
      const rnic::eswitch::attachment* a = sw.find(*id);
      REQUIRE(a != nullptr);
      const seen x = read_back(f);
      REQUIRE(x.destqp >= a->qpn_first());
      REQUIRE(x.destqp < a->qpn_first() + (1u << rnic::qpn_block_bits));
      const auto& fs = sw.function(a->function)->settings;
      REQUIRE(std::find(fs.gids.begin(), fs.gids.end(), x.dst) != fs.gids.end());
      REQUIRE(dst_mac_of(f) == fs.mac);
      REQUIRE(std::equal(f.begin() + 6, f.end(), before.begin() + 6, before.end()));
      REQUIRE_FALSE(expect_drop.has_value());
      ++rx[a->function];
    } else {
      const rx_drop_reason why = std::get<rx_drop_reason>(to);
      ++outcomes[std::string(wire::enum_name(why))];
      REQUIRE(expect_drop == why);
      REQUIRE(f == before);
      ++drops[static_cast<std::size_t>(why)];
    }
  }
  INFO("steered " << outcomes["steered"] << ", no_attachment " << outcomes["no_attachment"] << ", not_its_address "
                  << outcomes["not_its_address"] << ", not_roce " << outcomes["not_roce"]);
  // Every outcome happened often.
  CHECK(outcomes["steered"] > 1000);
  CHECK(outcomes["no_attachment"] > 1000);
  CHECK(outcomes["not_its_address"] > 1000);
  CHECK(outcomes["not_roce"] > 200);
  CHECK(sw.rx_drops() == drops);
  CHECK(sw.function(1)->counters.rx_frames == rx[1]);
  CHECK(sw.function(2)->counters.rx_frames == rx[2]);
  CHECK(sw.function(3)->counters.rx_frames == 0);
}

// ---- the spoof check ---------------------------------------------------------------------

TEST_CASE("eswitch: the spoof check drops a frame for each altered field and trust lets it pass", "[rnic][eswitch]") {
  rnic::eswitch sw(config());
  const std::uint32_t a1 = attach(sw, 1, 100), a2 = attach(sw, 2, 200), a3 = attach(sw, 1, 101);
  const wire::mac_address vf1 = sw.function(1)->settings.mac;
  // A UD frame VF 1's first attachment may send, and the same with one field altered.
  const frame_spec good{.src_mac = vf1, .dst_mac = {0x02, 0, 0, 0, 0, 9}, .src = g1, .dst = foreign4, .destqp = 0x123,
                        .srcqp = (a1 << 14) + 2};
  struct probe {
    std::string what;
    frame_spec s;
    tx_drop drop;
  };
  std::vector<probe> probes;
  auto with = [&](std::string what, tx_drop d, auto&& change) {
    frame_spec s = good;
    change(s);
    probes.push_back({std::move(what), s, d});
  };
  with("source MAC of VF 2", tx_drop::spoofed_mac, [&](frame_spec& s) { s.src_mac = sw.function(2)->settings.mac; });
  with("source MAC of the port", tx_drop::spoofed_mac, [&](frame_spec& s) { s.src_mac = port_mac; });
  with("source MAC one bit off", tx_drop::spoofed_mac, [&](frame_spec& s) { s.src_mac[5] = static_cast<std::uint8_t>(s.src_mac[5] ^ 1); });
  with("source IPv4 not the port's", tx_drop::spoofed_ip, [&](frame_spec& s) { s.src = ib::gid_v4(198, 18, 0, 3); });
  with("source IPv4 of the destination", tx_drop::spoofed_ip, [&](frame_spec& s) { s.src = foreign4; });
  with("UDP source port 0xC000", tx_drop::spoofed_port, [&](frame_spec& s) { s.sport = 0xC000; });
  with("UDP source port 4792", tx_drop::spoofed_port, [&](frame_spec& s) { s.sport = 4792; });
  with("P_Key 0x7FFF", tx_drop::spoofed_pkey, [&](frame_spec& s) { s.pkey = 0x7FFF; });
  with("P_Key 0x8001", tx_drop::spoofed_pkey, [&](frame_spec& s) { s.pkey = 0x8001; });
  with("source QPN of VF 2's block", tx_drop::spoofed_qpn, [&](frame_spec& s) { s.srcqp = (a2 << 14) + 2; });
  with("source QPN of its function's other attachment", tx_drop::spoofed_qpn, [&](frame_spec& s) { s.srcqp = a3 << 14; });
  with("source QPN 1 (block 0)", tx_drop::spoofed_qpn, [&](frame_spec& s) { s.srcqp = 1; });
  with("source QPN just past its block", tx_drop::spoofed_qpn, [&](frame_spec& s) { s.srcqp = (a1 + 1) << 14; });

  std::array<std::uint64_t, 6> expect_drops{};
  std::uint64_t passed = 0, passed_bytes = 0;
  auto pass = [&](const std::vector<std::byte>& f) {
    CHECK_FALSE(sw.check_tx(a1, f).has_value());
    ++passed, passed_bytes += f.size();
  };
  // What it may send: UD from its block (first and last QPN), RC (no source QPN on the wire),
  // IPv6 from a port address, any destination.
  pass(frame_of(good));
  pass(frame_of([&] { auto s = good; s.srcqp = ((a1 + 1) << 14) - 1; return s; }()));
  pass(frame_of([&] { auto s = good; s.srcqp = std::nullopt; s.destqp = 0xFFFFFF; return s; }()));
  pass(frame_of([&] { auto s = good; s.src = g6b; s.dst = foreign6; return s; }()));
  pass(frame_of([&] { auto s = good; s.src = g2; return s; }()));
  for (const probe& x : probes) {
    INFO(x.what);
    const auto f = frame_of(x.s);
    CHECK(sw.check_tx(a1, f) == x.drop);
    ++expect_drops[static_cast<std::size_t>(x.drop)];
  }
  // Not a RoCEv2 frame at all, or one with a VLAN tag (the program may not pick its VLAN).
  auto cut = frame_of(good);
  cut.resize(30);
  CHECK(sw.check_tx(a1, cut) == tx_drop::not_roce);
  CHECK(sw.check_tx(a1, frame_of([&] { auto s = good; s.vlan = true; return s; }())) == tx_drop::not_roce);
  expect_drops[static_cast<std::size_t>(tx_drop::not_roce)] += 2;
  // An attachment that does not exist: not_roce, counted nowhere.
  CHECK(sw.check_tx(999, frame_of(good)) == tx_drop::not_roce);

  const rnic::function_counters& c = sw.function(1)->counters;
  CHECK(c.tx_drops == expect_drops);
  CHECK(c.spoofed() == probes.size());
  CHECK(c.tx_frames == passed);
  CHECK(c.tx_bytes == passed_bytes);
  CHECK(sw.find(a1)->tx_frames == passed);
  CHECK(sw.find(a3)->tx_frames == 0);
  CHECK(sw.function(2)->counters.tx_drops == std::array<std::uint64_t, 6>{});

  // Trusted: every spoofed frame leaves (and counts as sent); not_roce still does not.
  REQUIRE_FALSE(run(sw, "vf set 1 trust on").has_value());
  for (const probe& x : probes) {
    INFO(x.what);
    CHECK_FALSE(sw.check_tx(a1, frame_of(x.s)).has_value());
  }
  CHECK(sw.check_tx(a1, cut) == tx_drop::not_roce);
  CHECK(c.tx_frames == passed + probes.size());
  CHECK(c.spoofed() == probes.size());
  // Trust off again: dropped again.
  REQUIRE_FALSE(run(sw, "vf set 1 trust off").has_value());
  CHECK(sw.check_tx(a1, frame_of(probes.front().s)) == probes.front().drop);
  // A P_Key table: the keys it lists, only.
  REQUIRE_FALSE(run(sw, "vf set 1 pkey 0x8001,7fff").has_value());
  CHECK(sw.function(1)->settings.pkeys == std::vector<std::uint16_t>{0x8001, 0x7FFF});
  CHECK_FALSE(sw.check_tx(a1, frame_of([&] { auto s = good; s.pkey = 0x8001; return s; }())).has_value());
  CHECK_FALSE(sw.check_tx(a1, frame_of([&] { auto s = good; s.pkey = 0x7FFF; return s; }())).has_value());
  CHECK(sw.check_tx(a1, frame_of(good)) == tx_drop::spoofed_pkey);
}

// ---- limits ------------------------------------------------------------------------------

TEST_CASE("eswitch: reserve counts each limit per function over its attachments", "[rnic][eswitch]") {
  rnic::eswitch sw(config(2, {.max_qps = 10, .max_mrs = 5, .max_cqs = 3, .max_reg_bytes = 1 << 20}));
  const std::uint32_t a1 = attach(sw, 1, 100), a2 = attach(sw, 1, 101), b1 = attach(sw, 2, 200);
  using ctl::resource;
  struct kind_limit {
    resource kind;
    std::uint64_t limit;
    std::uint64_t rnic::eswitch::function_state::*total;
    std::uint64_t rnic::eswitch::attachment::*mine;
  };
  for (const kind_limit& k : {kind_limit{resource::qp, 10, &rnic::eswitch::function_state::qps, &rnic::eswitch::attachment::qps},
                              kind_limit{resource::mr, 5, &rnic::eswitch::function_state::mrs, &rnic::eswitch::attachment::mrs},
                              kind_limit{resource::cq, 3, &rnic::eswitch::function_state::cqs, &rnic::eswitch::attachment::cqs},
                              kind_limit{resource::bytes, 1 << 20, &rnic::eswitch::function_state::bytes, &rnic::eswitch::attachment::bytes}}) {
    INFO("kind " << wire::enum_name(k.kind));
    const auto L = static_cast<std::int64_t>(k.limit);
    auto total = [&](std::uint16_t f) { return sw.function(f)->*k.total; };
    auto mine = [&](std::uint32_t id) { return sw.find(id)->*k.mine; };
    CHECK(sw.reserve(a1, k.kind, L - 1) == std::nullopt);
    CHECK(sw.reserve(a2, k.kind, 2) == fn_errc::limit_reached);  // one over, summed with a1's
    CHECK(total(1) == k.limit - 1);
    CHECK(mine(a2) == 0);
    CHECK(sw.reserve(a2, k.kind, 1) == std::nullopt);  // exactly the limit
    CHECK(total(1) == k.limit);
    CHECK(sw.reserve(a2, k.kind, 1) == fn_errc::limit_reached);
    CHECK(sw.reserve(a1, k.kind, 0) == std::nullopt);  // nothing more: fine at the limit
    // Another function has its own.
    CHECK(sw.reserve(b1, k.kind, L) == std::nullopt);
    CHECK(sw.reserve(b1, k.kind, L + 1) == fn_errc::limit_reached);
    CHECK(sw.reserve(b1, k.kind, std::numeric_limits<std::int64_t>::max()) == fn_errc::limit_reached);
    CHECK(total(2) == k.limit);
    // Giving back more than an attachment holds (even when the function holds enough): refused.
    CHECK(sw.reserve(a2, k.kind, -2) == fn_errc::bad_message);
    CHECK(sw.reserve(a1, k.kind, -L) == fn_errc::bad_message);
    CHECK(sw.reserve(a1, k.kind, std::numeric_limits<std::int64_t>::min()) == fn_errc::bad_message);
    CHECK(mine(a1) == k.limit - 1);
    CHECK(mine(a2) == 1);
    CHECK(sw.reserve(a1, k.kind, -1) == std::nullopt);
    CHECK(total(1) == k.limit - 1);
    CHECK(sw.reserve(a2, k.kind, 1) == std::nullopt);  // room again
    CHECK(sw.reserve(b1, k.kind, -L) == std::nullopt);
    CHECK(total(2) == 0);
  }
  // Detaching returns what the attachment held, kind by kind.
  const auto f = *sw.function(1);
  const auto held = *sw.find(a2);
  CHECK(held.qps == 2);
  sw.detach(a2);
  CHECK(sw.find(a2) == nullptr);
  CHECK(sw.function(1)->qps == f.qps - held.qps);
  CHECK(sw.function(1)->mrs == f.mrs - held.mrs);
  CHECK(sw.function(1)->cqs == f.cqs - held.cqs);
  CHECK(sw.function(1)->bytes == f.bytes - held.bytes);
  CHECK(sw.reserve(a1, resource::qp, 2) == std::nullopt);  // a2's share is free for a1
  CHECK(sw.function(1)->qps == 10);
  sw.detach(a1);
  CHECK(sw.function(1)->qps == 0);
  CHECK(sw.function(1)->mrs == 0);
  CHECK(sw.function(1)->cqs == 0);
  CHECK(sw.function(1)->bytes == 0);
  sw.detach(a1);  // twice: nothing
  CHECK(sw.function(1)->qps == 0);
  // Errors: no such attachment, no such kind.
  CHECK(sw.reserve(a1, resource::qp, 1) == fn_errc::bad_message);
  CHECK(sw.reserve(12345, resource::qp, 1) == fn_errc::bad_message);
  CHECK(sw.reserve(b1, static_cast<resource>(0), 1) == fn_errc::bad_message);
  CHECK(sw.reserve(b1, static_cast<resource>(5), 1) == fn_errc::bad_message);
  // A lowered limit: nothing more until below it.
  CHECK(sw.reserve(b1, resource::qp, 8) == std::nullopt);
  REQUIRE_FALSE(run(sw, "vf set 2 max_qps 4").has_value());
  CHECK(sw.reserve(b1, resource::qp, 1) == fn_errc::limit_reached);
  CHECK(sw.reserve(b1, resource::qp, -5) == std::nullopt);
  CHECK(sw.reserve(b1, resource::qp, 1) == std::nullopt);
  CHECK(sw.function(2)->qps == 4);
}

TEST_CASE("eswitch: attach takes free QPN blocks until none is left", "[rnic][eswitch]") {
  rnic::eswitch sw(config(1));
  CHECK(std::get<fn_errc>(sw.attach(2, 1)) == fn_errc::no_such_function);
  CHECK(std::get<fn_errc>(sw.attach(128, 1)) == fn_errc::no_such_function);
  std::set<std::uint32_t> ids;
  for (std::uint32_t i = 0; i + 1 < rnic::qpn_blocks; ++i) ids.insert(attach(sw, static_cast<std::uint16_t>(i % 2), i));
  CHECK(ids.size() == rnic::qpn_blocks - 1);
  CHECK(*ids.begin() == 1);
  CHECK(*ids.rbegin() == rnic::qpn_blocks - 1);  // block 0 (QPs 0 and 1) is never an attachment's
  CHECK(std::get<fn_errc>(sw.attach(0, 1)) == fn_errc::no_attachments_left);
  sw.detach(77);
  CHECK(attach(sw, 1, 5) == 77);
  // The reply a program gets.
  std::vector<wire::ip_address<16>> gids;
  const ctl::attach_reply r = sw.reply_for(*sw.find(77), gids);
  CHECK(r.header.type == ctl::msg_type::attached);
  CHECK(r.header.version == 1);
  CHECK(r.attachment == 77);
  CHECK(r.function == 1);
  CHECK(r.qpn_first == 77u << 14);
  CHECK(r.qpn_count == 1u << 14);
  CHECK(r.mac == sw.function(1)->settings.mac);
  CHECK(r.node_guid == ib::node_guid_of(r.mac));
  CHECK(r.slots == rnic::fn::default_slots);
  REQUIRE(r.gids.size() == 4);
  CHECK(ib::gid(r.gids[2]) == g6a);
}

TEST_CASE("eswitch: admit holds a function to its rate over simulated time", "[rnic][eswitch]") {
  rnic::eswitch sw(config());
  struct run_case {
    std::string_view rate;
    double bps, burst;
  };
  for (const run_case& rc : {run_case{"1G", 1e9, 1e9 / 8e9 * 1e6}, run_case{"10M", 1e7, 64.0 * 1024}, run_case{"250000k", 2.5e8, 64.0 * 1024}}) {
    INFO("rate " << rc.rate);
    rnic::eswitch s(config());
    std::string out;
    REQUIRE(run(s, "vf set 1 rate " + std::string(rc.rate), out) == std::nullopt);
    CHECK(s.function(1)->settings.limits.rate_bps == static_cast<std::uint64_t>(rc.bps));
    const std::int64_t t0 = 1'000'000'000, seconds = 5, step = 10'000;  // 10 µs
    const std::size_t frame = 1500;
    double admitted = 0;
    // At once: the burst, and not a frame more.
    std::size_t first = 0;
    while (s.admit(1, frame, t0)) ++first;
    CHECK(static_cast<double>(first * frame) <= rc.burst);
    CHECK(static_cast<double>((first + 1) * frame) > rc.burst);
    admitted += static_cast<double>(first * frame);
    for (std::int64_t t = t0 + step; t <= t0 + seconds * 1'000'000'000; t += step)
      while (s.admit(1, frame, t)) admitted += frame;
    const double expect = rc.bps * static_cast<double>(seconds) / 8 + rc.burst;
    INFO("admitted " << admitted << " expected " << expect);
    CHECK(admitted <= expect * 1.01);
    CHECK(admitted >= expect * 0.99);
    CHECK(s.function(1)->counters.rate_waits > 0);
    // rate_wait says when the next frame goes: not a nanosecond too late.
    const std::int64_t now = t0 + seconds * 1'000'000'000;
    REQUIRE_FALSE(s.admit(1, frame, now));
    const std::int64_t w = s.rate_wait(1, frame);
    CHECK(w > 0);
    CHECK(w <= static_cast<std::int64_t>(frame * 8e9 / rc.bps) + 1);
    CHECK(s.admit(1, frame, now + w));
    // Other functions are not limited.
    for (int i = 0; i < 1000; ++i) REQUIRE(s.admit(2, 9000, now));
    CHECK(s.rate_wait(2, 9000) == 0);
  }
  // rate 0: unlimited; set back to 0 lifts the limit.
  REQUIRE_FALSE(run(sw, "vf set 1 rate 1M").has_value());
  REQUIRE_FALSE(run(sw, "vf set 1 rate 0").has_value());
  for (int i = 0; i < 10000; ++i) REQUIRE(sw.admit(1, 65536, 5));
  CHECK(sw.function(1)->counters.rate_waits == 0);
}

TEST_CASE("eswitch: port set shapes the egress: classes by DSCP, ETS between them, the port's rate, marking", "[rnic][eswitch][qos]") {
  rnic::eswitch sw(config());
  CHECK_FALSE(sw.shapes());
  std::string out;
  REQUIRE(run(sw, "port set rate 1G tsa ets,ets,ets,ets,ets,ets,ets,strict tcbw 0,75,25,0,0,0,0,0 mark 10000,40000,0.5", out) == std::nullopt);
  CHECK(sw.shapes());
  const rnic::egress_config& e = sw.config().egress;
  CHECK(e.rate_bps == 1'000'000'000);
  REQUIRE(e.classes);
  CHECK(e.classes->tc[7].tsa == pushwire::flow::tsa::strict);
  CHECK(e.classes->tc[1].weight == 75);
  REQUIRE(e.marking);
  CHECK(e.marking->kmax == 40000);
  // a frame's class is its DSCP's: DSCP 8 → 1, 16 → 2, 56 → 7 (IPv4 and IPv6 alike)
  auto with_tos = [](std::vector<std::byte> f, std::uint8_t tos) {
    const auto ip = ib::find_ip(f);
    REQUIRE(ip);
    std::byte* h = f.data() + ip->offset;
    if (ip->v6) h[0] = (h[0] & std::byte{0xF0}) | std::byte{static_cast<unsigned char>(tos >> 4)}, h[1] = std::byte{static_cast<unsigned char>(tos << 4)};
    else h[1] = std::byte{tos};
    return f;
  };
  CHECK(sw.class_of(with_tos(frame_of({}), 8 << 2)) == 1);
  CHECK(sw.class_of(with_tos(frame_of({}), 16 << 2 | 2)) == 2);
  CHECK(sw.class_of(with_tos(frame_of({.src = g6b, .dst = g6a}), 56 << 2)) == 7);
  CHECK(sw.class_of(frame_of({})) == 0);
  // strict first; ETS shares 75/25 in bytes
  CHECK(sw.pick(0b1000'0110, 0) == 7);
  std::array<std::uint64_t, 8> bytes{};
  for (int i = 0; i < 4000; ++i) {
    const auto c = sw.pick(0b0000'0110, 0);
    REQUIRE(c);
    sw.egress_sent(*c, 1500, 0, false);
    bytes[*c] += 1500;
  }
  CHECK(static_cast<double>(bytes[1]) / static_cast<double>(bytes[1] + bytes[2]) == Approx(0.75).margin(0.01));
  CHECK(sw.egress_stats()[1].bytes == bytes[1]);
  // the port's rate: 6 MB sent at time 0 at 1 Gb/s is 48 ms of it, less the 64 KiB burst
  CHECK_FALSE(sw.uplink_ready(0));
  CHECK(sw.uplink_at() == 48'000'000 - 524'288);
  CHECK(sw.uplink_ready(48'000'000));
  // marking: none below KMIN, all at KMAX and above
  CHECK_FALSE(sw.mark(10'000, 0.0));
  CHECK(sw.mark(40'000, 0.999));
  CHECK(sw.mark(25'000, 0.2));  // 0.5 * 15000 / 30000 = 0.25
  CHECK_FALSE(sw.mark(25'000, 0.3));
  REQUIRE(run(sw, "show", out) == std::nullopt);
  CHECK(out.find("port: rate 1000000000 b/s") != std::string::npos);
  CHECK(out.find("tc 1 ets 75% ratelimit none tx " + std::to_string(bytes[1] / 1500) + " frames " + std::to_string(bytes[1]) + " bytes") != std::string::npos);
  REQUIRE(run(sw, "show --json", out) == std::nullopt);
  CHECK(out.find("\"egress\":{\"rate\":1000000000,\"classes\":true") != std::string::npos);
  // refusals change nothing
  CHECK(run(sw, "port set tcbw 0,75,20,0,0,0,0,0", out) == fn_errc::bad_setting);  // 95
  CHECK(out.find("sum to 100") != std::string::npos);
  CHECK(run(sw, "port set tsa ets,ets", out) == fn_errc::bad_setting);
  CHECK(run(sw, "port set rate fast", out) == fn_errc::bad_setting);
  CHECK(run(sw, "port set mark 5,1,0.1", out) == fn_errc::bad_setting);
  CHECK(run(sw, "port set dscp2prio 64,1", out) == fn_errc::bad_setting);
  CHECK(run(sw, "port set ecn ect0", out) == fn_errc::bad_setting);
  CHECK(run(sw, "port set color blue", out) == fn_errc::bad_setting);
  CHECK(run(sw, "port set rate", out) == fn_errc::bad_setting);
  CHECK(sw.config().egress.classes->tc[2].weight == 25);
  CHECK(sw.config().egress.rate_bps == 1'000'000'000);
  // classes off, rate 0: unshaped again
  REQUIRE(run(sw, "port set classes off rate 0 mark off", out) == std::nullopt);
  CHECK_FALSE(sw.shapes());
  CHECK(sw.class_of(with_tos(frame_of({}), 56 << 2)) == 0);
}

// ---- ctl ---------------------------------------------------------------------------------

TEST_CASE("eswitch: show prints every function and attachment as text and as JSON", "[rnic][eswitch]") {
  rnic::eswitch sw(config());
  const std::uint32_t a1 = attach(sw, 1, 4242);
  REQUIRE(sw.reserve(a1, ctl::resource::qp, 3) == std::nullopt);
  REQUIRE_FALSE(run(sw, "vf set 2 rate 5M pkey 8001,ffff trust on").has_value());
  (void)sw.check_tx(a1, std::vector<std::byte>(10));
  std::string out;
  REQUIRE_FALSE(sw.command({}, out).has_value());
  const std::string plain = out;
  REQUIRE_FALSE(run(sw, "show", out).has_value());
  CHECK(out == plain);
  for (const std::string_view s : {"pf: mac 02:00:c6:12:00:01 gid 198.18.0.1,198.18.0.2,fd00::1,fd00::2",
                                   "vf1: mac 02:01:c6:12:00:01", "vf2: mac 02:02:c6:12:00:01", "trust on pkey 0x8001,0xffff",
                                   "limits qps 3/1024", "rate 5000000 b/s", "rate unlimited", "attachment 1: vf1 pid 4242 qpns 16384",
                                   "not_roce 1", "port: rx drops not_roce 0 no_attachment 0"})
    CHECK(plain.find(s) != std::string::npos);
  CHECK(plain.find("vf3") == std::string::npos);
  REQUIRE_FALSE(run(sw, "show --json", out).has_value());
  INFO(out);
  CHECK(valid_json(out));
  CHECK(out.back() == '\n');
  for (const std::string_view s : {"{\"functions\":[{\"function\":0,\"name\":\"pf\"", "{\"function\":1,\"name\":\"vf1\",\"mac\":\"02:01:c6:12:00:01\"",
                                   "\"trust\":true,\"pkeys\":\"0x8001,0xffff\"", "\"rate\":5000000", "\"qps\":3", "\"attached\":1",
                                   "\"not_roce\":1", "\"attachments\":[{\"id\":1,\"function\":1,\"pid\":4242,\"qpn_first\":16384,\"qps\":3",
                                   "\"rx_drops\":{\"not_roce\":0,\"no_attachment\":0,\"not_its_address\":0,\"ring_full\":0},\"egress\":{\"rate\":0,\"classes\":false"})
    CHECK(out.find(s) != std::string::npos);
  // With no attachments and one function: still valid.
  rnic::eswitch lone(config(0));
  REQUIRE_FALSE(run(lone, "show --json", out).has_value());
  CHECK(valid_json(out));
  CHECK(out.find("\"attachments\":[]") != std::string::npos);
  // The checker itself refuses what is not JSON.
  for (const std::string_view bad : {"", "{", "{\"a\":1,}", "[1,2", "{\"a\" 1}", "{\"a\":01}", "{\"a\":tru}", "{} {}", "{\"a\":\"b}"})
    CHECK_FALSE(valid_json(bad));
  CHECK(valid_json(" {\"a\":[1,-2.5,true,false,null,\"x\\\"y\",{}]}\n"));
}

TEST_CASE("eswitch: vf add and vf del and vf set succeed and change only what they name", "[rnic][eswitch]") {
  rnic::eswitch sw(config());
  std::string out;
  CHECK(sw.function(3) == nullptr);
  REQUIRE(run(sw, "vf add 3", out) == std::nullopt);
  CHECK(out == "VF 3 added\n");
  REQUIRE(sw.function(3) != nullptr);
  CHECK(sw.function(3)->settings.mac == rnic::function_mac(3, {198, 18, 0, 1}));
  CHECK(sw.function(3)->settings.gids == sw.config().gids);
  CHECK(sw.function(3)->settings.pkeys == std::vector<std::uint16_t>{0xFFFF});
  CHECK_FALSE(sw.function(3)->settings.trust);
  CHECK(sw.function(3)->settings.limits == rnic::function_limits{});
  REQUIRE(run(sw, "vf add 127 mac 02:00:00:00:01:27 max_qps 16384 max_mrs 0 max_cqs 7 max_bytes 18446744073709551615 rate 3G trust on "
                  "pkey 0x8001 gid fd00:0:0:0:0:0:0:2",
              out) == std::nullopt);
  const rnic::function_settings& s = sw.function(127)->settings;
  CHECK(s.mac == wire::mac_address{0x02, 0, 0, 0, 0x01, 0x27});
  CHECK(s.limits == rnic::function_limits{.max_qps = 16384, .max_mrs = 0, .max_cqs = 7, .max_reg_bytes = ~0ull, .rate_bps = 3'000'000'000});
  CHECK(s.trust);
  CHECK(s.pkeys == std::vector<std::uint16_t>{0x8001});
  CHECK(s.gids == std::vector<ib::gid>{g6b});
  REQUIRE(run(sw, "vf set 3 MAC 02:00:00:00:00:01", out) == fn_errc::bad_setting);  // names are lower case
  REQUIRE(run(sw, "vf set 3 mac 0A:0b:0C:0d:0E:0f max_qps 1", out) == std::nullopt);
  CHECK(out == "VF 3 set\n");
  CHECK(sw.function(3)->settings.mac == wire::mac_address{0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f});
  CHECK(sw.function(3)->settings.limits.max_qps == 1);
  CHECK(sw.function(3)->settings.limits.max_mrs == rnic::function_limits{}.max_mrs);
  REQUIRE(run(sw, "vf set 3 gid 198.18.0.2,198.18.0.1,fd00:0:0:0:0:0:0:1,fd00:0:0:0:0:0:0:2") == std::nullopt);
  CHECK(sw.function(3)->settings.gids == std::vector<ib::gid>{g2, g1, g6a, g6b});
  // Any text inet_pton takes, as --port takes it: compressed IPv6, IPv4-mapped IPv6.
  REQUIRE(run(sw, "vf set 3 gid fd00::2,::ffff:198.18.0.1,fd00:0000::1") == std::nullopt);
  CHECK(sw.function(3)->settings.gids == std::vector<ib::gid>{g6b, g1, g6a});
  REQUIRE(run(sw, "vf set 3 gid fd00::9", out) == fn_errc::bad_setting);
  REQUIRE(run(sw, "vf set 3 gid 198.18.0.256", out) == fn_errc::bad_setting);
  REQUIRE(run(sw, "vf set 3 rate 0 rate 7k") == std::nullopt);  // the last one wins
  CHECK(sw.function(3)->settings.limits.rate_bps == 7000);
  REQUIRE(run(sw, "vf del 3", out) == std::nullopt);
  CHECK(out == "VF 3 deleted\n");
  CHECK(sw.function(3) == nullptr);
  REQUIRE(run(sw, "vf add 3") == std::nullopt);  // again, with defaults
  CHECK(sw.function(3)->settings.limits.max_qps == rnic::function_limits{}.max_qps);
  // The PF is not a VF, but set_pf takes the same settings.
  REQUIRE(sw.set_pf(words("rate 1G trust on"), out) == std::nullopt);
  CHECK(sw.function(0)->settings.limits.rate_bps == 1'000'000'000);
  CHECK(sw.set_pf(words("trust yes"), out) == fn_errc::bad_setting);
  CHECK(sw.function(0)->settings.trust);
}

TEST_CASE("eswitch: each refused ctl command says why and changes nothing", "[rnic][eswitch]") {
  rnic::eswitch sw(config());
  (void)attach(sw, 2, 31337);
  struct refusal {
    std::string_view line;
    fn_errc why;
  };
  const std::vector<refusal> refusals{
      // commands
      {"vf", fn_errc::bad_setting},
      {"vf add", fn_errc::bad_setting},
      {"frob 1 2", fn_errc::bad_setting},
      {"vf frob 1", fn_errc::bad_setting},
      {"vf add 0", fn_errc::bad_setting},
      {"vf add 128", fn_errc::bad_setting},
      {"vf add -1", fn_errc::bad_setting},
      {"vf add 3x", fn_errc::bad_setting},
      {"vf add 0x3", fn_errc::bad_setting},
      {"vf add 4294967299", fn_errc::bad_setting},
      {"vf set 0 trust on", fn_errc::bad_setting},
      // functions
      {"vf add 1", fn_errc::function_exists},
      {"vf add 2 mac 02:00:00:00:00:01", fn_errc::function_exists},
      {"vf del 9", fn_errc::no_such_function},
      {"vf set 9 trust on", fn_errc::no_such_function},
      {"vf frob 9", fn_errc::no_such_function},
      {"vf del 2", fn_errc::function_busy},
      // settings (on VF 1 with vf set, and on a new VF 5 with vf add)
      {"vf set 1", fn_errc::bad_setting},
      {"vf set 1 mac", fn_errc::bad_setting},
      {"vf set 1 mac 02:00:00:00:00:01 trust", fn_errc::bad_setting},
      {"vf set 1 colour blue", fn_errc::bad_setting},
      {"vf set 1 mac 01:00:5e:00:00:01", fn_errc::bad_setting},  // multicast
      {"vf set 1 mac ff:ff:ff:ff:ff:ff", fn_errc::bad_setting},  // broadcast
      {"vf set 1 mac 03:00:00:00:00:01", fn_errc::bad_setting},  // group bit
      {"vf set 1 mac 02:00:00:00:00", fn_errc::bad_setting},
      {"vf set 1 mac 02:00:00:00:00:01:02", fn_errc::bad_setting},
      {"vf set 1 mac 02:00:00:00:00:1", fn_errc::bad_setting},
      {"vf set 1 mac 2:00:00:00:00:01x", fn_errc::bad_setting},
      {"vf set 1 mac 02-00-00-00-00-01", fn_errc::bad_setting},
      {"vf set 1 mac 02:00:00:00:00:0g", fn_errc::bad_setting},
      {"vf set 1 mac 02:+0:00:00:00:01", fn_errc::bad_setting},
      {"vf set 1 mac 0x:00:00:00:00:01", fn_errc::bad_setting},
      {"vf set 1 gid 10.0.0.9", fn_errc::bad_setting},  // not a port address
      {"vf set 1 gid 198.18.0.3", fn_errc::bad_setting},
      {"vf set 1 gid 198.18.0.1,", fn_errc::bad_setting},
      {"vf set 1 gid ,198.18.0.1", fn_errc::bad_setting},
      {"vf set 1 gid 198.18.0.1,198.18.0.2,198.18.0.1,198.18.0.2,198.18.0.1", fn_errc::bad_setting},  // 5
      {"vf set 1 gid fd00:0:0:0:0:0:0:3", fn_errc::bad_setting},
      {"vf set 1 pkey 0x0000", fn_errc::bad_setting},
      {"vf set 1 pkey 0x8000", fn_errc::bad_setting},
      {"vf set 1 pkey 0", fn_errc::bad_setting},
      {"vf set 1 pkey 8000", fn_errc::bad_setting},
      {"vf set 1 pkey 0xffff,0x8000", fn_errc::bad_setting},
      {"vf set 1 pkey 0x10000", fn_errc::bad_setting},
      {"vf set 1 pkey 0x", fn_errc::bad_setting},
      {"vf set 1 pkey ffff,", fn_errc::bad_setting},
      {"vf set 1 pkey zz", fn_errc::bad_setting},
      {"vf set 1 pkey 1,2,3,4,5,6,7,8,9,a,b,c,d,e,f,10,11", fn_errc::bad_setting},  // 17 keys
      {"vf set 1 rate fast", fn_errc::bad_setting},
      {"vf set 1 rate 1T", fn_errc::bad_setting},
      {"vf set 1 rate G", fn_errc::bad_setting},
      {"vf set 1 rate -1", fn_errc::bad_setting},
      {"vf set 1 rate 1.5G", fn_errc::bad_setting},
      {"vf set 1 rate 18446744073709551616", fn_errc::bad_setting},
      {"vf set 1 rate 18446744073709552G", fn_errc::bad_setting},  // overflows with its unit
      {"vf set 1 trust maybe", fn_errc::bad_setting},
      {"vf set 1 trust ON", fn_errc::bad_setting},
      {"vf set 1 trust 1", fn_errc::bad_setting},
      {"vf set 1 max_qps 16385", fn_errc::bad_setting},
      {"vf set 1 max_mrs -1", fn_errc::bad_setting},
      {"vf set 1 max_cqs lots", fn_errc::bad_setting},
      {"vf set 1 max_bytes 18446744073709551616", fn_errc::bad_setting},
      {"vf set 1 max_bytes 1G", fn_errc::bad_setting},
      // a good setting before a bad one changes nothing either
      {"vf set 1 trust on mac 01:00:00:00:00:00", fn_errc::bad_setting},
      {"vf set 1 max_qps 5 pkey 0x8000", fn_errc::bad_setting},
      {"vf add 5 mac 01:00:00:00:00:00", fn_errc::bad_setting},
      {"vf add 5 trust on rate nope", fn_errc::bad_setting},
      {"vf add 5 pkey 0x8000", fn_errc::bad_setting},
      {"vf add 5 gid 10.0.0.9", fn_errc::bad_setting},
      {"vf add 5 trust", fn_errc::bad_setting},
  };
  std::string before;
  REQUIRE_FALSE(run(sw, "show --json", before).has_value());
  const rnic::function_settings vf1 = sw.function(1)->settings;
  for (const refusal& r : refusals) {
    INFO(r.line);
    std::string out;
    CHECK(run(sw, r.line, out) == r.why);
    CHECK_FALSE(out.empty());  // a line of detail
    CHECK(out.find('\n') == std::string::npos);
    std::string now;
    REQUIRE_FALSE(run(sw, "show --json", now).has_value());
    CHECK(now == before);
  }
  CHECK(sw.function(5) == nullptr);
  CHECK(sw.function(1)->settings.mac == vf1.mac);
  CHECK(sw.function(1)->settings.gids == vf1.gids);
  CHECK(sw.function(1)->settings.pkeys == vf1.pkeys);
  CHECK(sw.function(1)->settings.limits == vf1.limits);
  CHECK(sw.function(1)->settings.trust == vf1.trust);
  // Refusals name what is wrong.
  std::string out;
  CHECK(run(sw, "vf del 2", out) == fn_errc::function_busy);
  CHECK(out.find("31337") != std::string::npos);
  CHECK(run(sw, "vf add 1", out) == fn_errc::function_exists);
  CHECK(out == "VF 1 exists");
  CHECK(run(sw, "vf set 1 pkey 0x8000", out) == fn_errc::bad_setting);
  CHECK(out.starts_with("pkey"));
  // Once the program is gone, the VF can go.
  sw.detach(1);
  CHECK(run(sw, "vf del 2") == std::nullopt);
  CHECK(std::get<fn_errc>(sw.attach(2, 1)) == fn_errc::no_such_function);
}

// ---- the control protocol -------------------------------------------------------------------

template <class T>
T round_trip(const T& m, std::vector<std::byte>& buf) {
  buf.assign(wire::wire_size(m), std::byte{0});
  const auto n = wire::encode(m, buf);
  REQUIRE(n.has_value());
  REQUIRE(*n == buf.size());
  const auto h = ctl::peek_header(buf);
  REQUIRE(h.has_value());
  CHECK(*h == m.header);
  const auto d = wire::decode<T>(std::span<const std::byte>(buf));
  REQUIRE(d.has_value());
  CHECK(*d == m);
  return *d;
}

TEST_CASE("eswitch: ctl messages round trip through wire::encode and wire::decode", "[rnic][eswitch][ctl]") {
  std::vector<std::byte> buf;
  const ctl::attach_request req{.header = {ctl::msg_type::attach, 1, 0, 0xBEEF}, .function = 127, .pid = 0xFEDCBA98};
  round_trip(req, buf);
  CHECK(buf.size() == 16);
  CHECK(wire::to_hex(buf) == "000100010000beef007f0000fedcba98");  // big-endian, as described

  const std::vector<wire::ip_address<16>> all{{g1}, {g6a}, {g2}, {g6b}};
  for (std::size_t n = 1; n <= 4; ++n) {
    INFO("gids " << n);
    ctl::attach_reply r{};
    r.header = {ctl::msg_type::attached, 1, 0, 7};
    r.attachment = 1023, r.function = 3, r.mtu = 4096, r.mac = {0x02, 3, 198, 18, 0, 1}, r.node_guid = ib::node_guid_of(r.mac);
    r.qpn_first = 1023u << 14, r.qpn_count = 1u << 14, r.slots = 512, r.max_qps = 1024, r.max_mrs = 4096, r.max_cqs = 1024;
    r.max_reg_bytes = 1ull << 40;
    r.gids = std::span(all).first(n);
    const auto d = round_trip(r, buf);
    CHECK(buf.size() == 64 + 1 + 16 * n);
    REQUIRE(d.gids.size() == n);
    for (std::size_t i = 0; i < n; ++i) CHECK(d.gids[i] == all[i]);
    // Every truncation fails, and so does a byte more.
    for (std::size_t cut = 0; cut < buf.size(); ++cut) {
      INFO("cut at " << cut);
      CHECK_FALSE(wire::decode<ctl::attach_reply>(std::span<const std::byte>(buf).first(cut)).has_value());
    }
    auto longer = buf;
    longer.push_back(std::byte{0});
    CHECK(wire::decode<ctl::attach_reply>(std::span<const std::byte>(longer)).code() == wire::errc::trailing_bytes);
    // A count that says more or fewer than follow.
    auto miscount = buf;
    miscount[64] = std::byte{static_cast<std::uint8_t>(n + 1)};
    CHECK_FALSE(wire::decode<ctl::attach_reply>(std::span<const std::byte>(miscount)).has_value());
    // A reserved field that is not zero.
    auto reserved = buf;
    reserved[8 + 4 + 2 + 2 + 6] = std::byte{1};
    CHECK(wire::decode<ctl::attach_reply>(std::span<const std::byte>(reserved)).code() == wire::errc::reserved_nonzero);
  }
  // No GIDs at all: refused both ways (a reply always carries GID 0).
  ctl::attach_reply none{};
  none.header = {ctl::msg_type::attached, 1, 0, 0};
  std::array<std::byte, 128> out{};
  CHECK_FALSE(wire::encode(none, out).has_value());
  buf.assign(65, std::byte{0});
  buf[1] = std::byte{2}, buf[3] = std::byte{1};
  CHECK(wire::decode<ctl::attach_reply>(std::span<const std::byte>(buf)).code() == wire::errc::zero_count);

  // reserve: the count is two's complement.
  for (const std::int64_t count : {std::int64_t{1}, std::int64_t{-1}, std::int64_t{-4096}, std::numeric_limits<std::int64_t>::min(),
                                   std::numeric_limits<std::int64_t>::max()}) {
    INFO("count " << count);
    const ctl::reserve_request rr{.header = {ctl::msg_type::reserve, 1, 0, 9}, .kind = ctl::resource::mr, .count = static_cast<std::uint64_t>(count)};
    const auto d = round_trip(rr, buf);
    CHECK(buf.size() == 20);
    CHECK(static_cast<std::int64_t>(d.count) == count);
    if (count == -1) CHECK(wire::to_hex(std::span(buf).last(8)) == "ffffffffffffffff");
  }
  // ... and a negative count gives back what was taken.
  rnic::eswitch sw(config());
  const std::uint32_t a = attach(sw, 1, 1);
  for (const std::int64_t count : {std::int64_t{5}, std::int64_t{-3}}) {
    const ctl::reserve_request rr{.header = {ctl::msg_type::reserve, 1, 0, 0}, .kind = ctl::resource::cq, .count = static_cast<std::uint64_t>(count)};
    const auto d = round_trip(rr, buf);
    CHECK(sw.reserve(a, d.kind, static_cast<std::int64_t>(d.count)) == std::nullopt);
  }
  CHECK(sw.find(a)->cqs == 2);

  // text: a command's NUL-separated words, an output; empty too.
  const std::string_view cmd("vf\0set\0" "1\0trust\0on", 17);
  const auto bytes = std::vector<std::uint8_t>(cmd.begin(), cmd.end());
  const ctl::text_message t{.header = {ctl::msg_type::command, 1, 0, 1}, .text = bytes};
  const auto dt = round_trip(t, buf);
  CHECK(buf.size() == 8 + 17);
  REQUIRE(dt.text.size() == 17);
  CHECK(dt.text[2] == 0);
  CHECK(dt.text[16] == 'n');
  round_trip(ctl::text_message{.header = {ctl::msg_type::output, 1, 0, 1}}, buf);
  CHECK(buf.size() == 8);
  const ctl::notice_message notice{.header = {ctl::msg_type::notice, 1, 0, 0}, .reason = static_cast<std::uint16_t>(fn_errc::shutting_down)};
  round_trip(notice, buf);
  CHECK(buf.size() == 12);
  // A reply's status is an fn_errc.
  const ctl::text_message refused{.header = {ctl::msg_type::reserved, 1, static_cast<std::uint16_t>(fn_errc::limit_reached), 3}};
  CHECK(round_trip(refused, buf).header.status == 7);
}

TEST_CASE("eswitch: peek_header takes version 1 only and a whole header", "[rnic][eswitch][ctl]") {
  std::array<std::byte, 8> h{};
  auto header = [&](std::uint16_t type, std::uint16_t version) {
    const ctl::ctl_header x{.type = static_cast<ctl::msg_type>(type), .version = version, .status = 0, .tag = 0x1234};
    REQUIRE(wire::encode(x, h).has_value());
    return std::span<const std::byte>(h);
  };
  const auto ok = ctl::peek_header(header(5, 1));
  REQUIRE(ok.has_value());
  CHECK(ok->type == ctl::msg_type::command);
  CHECK(ok->tag == 0x1234);
  for (const std::uint16_t v : {0, 2, 0x100, 0xFFFF}) {
    INFO("version " << v);
    CHECK_FALSE(ctl::peek_header(header(5, v)).has_value());
  }
  // Anything after the header is the message's: still a header.
  (void)header(1, 1);
  std::vector<std::byte> longer(h.begin(), h.end());
  longer.resize(100, std::byte{0xEE});
  CHECK(ctl::peek_header(longer).has_value());
  for (std::size_t n = 0; n < 8; ++n) CHECK_FALSE(ctl::peek_header(std::span<const std::byte>(h).first(n)).has_value());
}

}  // namespace pw_eswitch_test
