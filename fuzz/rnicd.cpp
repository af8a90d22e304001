// What pushwire-rnicd takes from programs and from the wire, all from one input:
// - the control protocol (rnic/attach.hpp): the input decoded as each ctl message; what decodes
//   re-encodes to the same bytes; an attach or a reserve decoded is applied to a switch, whose
//   books (a function's counts are the sum of its attachments', within its limits) must hold;
// - the ctl command language (eswitch::command): the input split at NUL bytes into words (an
//   empty word, two NULs, ends one command and starts the next); after each command the
//   functions' settings are ones the language allows, an attached function still exists, a
//   refusal has a reason and a line of detail, and `show --json` stays balanced;
// - the data path: the input as a frame from the wire (steer) and from each attachment
//   (check_tx). A frame steered went to the attachment of its destination QPN's block, to one
//   of its function's addresses, and only its destination MAC changed; a frame that leaves an
//   untrusted function passed every rule of the spoof check;
// - the rings (rnic/function.hpp): a region exactly region_bytes(16) long (so ASan sees any read
//   past it), both rings' control blocks and slots tiled with the input, consumed and produced
//   for a few rounds with published indices from the input: every frame a consumer is shown
//   lies inside its ring, and refusals are the documented errors; and the input as a region
//   header, which check_region accepts only with rings inside the mapping.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <pushwire/ib/roce.hpp>
#include <pushwire/rnic/attach.hpp>
#include <pushwire/rnic/eswitch.hpp>
#include <pushwire/rnic/function.hpp>

#include "provider.hpp"

using namespace pushwire;
namespace fn = rnic::fn;
namespace ctl = rnic::ctl;

namespace {

const ib::gid g1 = ib::gid_v4(198, 18, 0, 1), g2 = ib::gid_v4(198, 18, 0, 2);
const ib::gid g6a{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, g6b{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};

/// A port with two VFs, VF 1 on 198.18.0.1 and fd00::1, VF 2 on 198.18.0.2 and fd00::2 (rate
/// limited); attachments 1 and 3 on VF 1, 2 on VF 2.
rnic::eswitch make_switch() {
  rnic::eswitch_config c;
  c.mac = {0x02, 0x00, 0xc6, 0x12, 0x00, 0x01};
  c.gids = {g1, g2, g6a, g6b};
  c.vfs = 2;
  c.limits = {.max_qps = 64, .max_mrs = 32, .max_cqs = 16, .max_reg_bytes = 1 << 24};
  rnic::eswitch sw(c);
  std::string out;
  PUSHWIRE_FUZZ_CHECK(!sw.command({"vf", "set", "1", "gid", "198.18.0.1,fd00:0:0:0:0:0:0:1"}, out));
  PUSHWIRE_FUZZ_CHECK(!sw.command({"vf", "set", "2", "gid", "198.18.0.2,fd00:0:0:0:0:0:0:2", "rate", "1G", "pkey", "ffff,8001"}, out));
  for (const std::uint16_t f : {1, 2, 1}) PUSHWIRE_FUZZ_CHECK(std::holds_alternative<const rnic::eswitch::attachment*>(sw.attach(f, 100u + f)));
  return sw;
}

/// The switch's books: every attachment's function exists; a function's counts are the sum of
/// its attachments'; its settings are ones ctl accepts.
void check_books(const rnic::eswitch& sw, bool within_limits) {
  PUSHWIRE_FUZZ_CHECK(sw.function(0) != nullptr);
  std::array<std::array<std::uint64_t, 4>, rnic::max_vfs + 1> sums{};
  for (const auto& [id, a] : sw.attachments()) {
    PUSHWIRE_FUZZ_CHECK(id == a.id && id >= 1 && id < rnic::qpn_blocks);
    PUSHWIRE_FUZZ_CHECK(sw.function(a.function) != nullptr);
    sums[a.function][0] += a.qps, sums[a.function][1] += a.mrs, sums[a.function][2] += a.cqs, sums[a.function][3] += a.bytes;
  }
  for (std::uint32_t n = 0; n <= rnic::max_vfs; ++n) {
    const auto* f = sw.function(n);
    if (!f) continue;
    PUSHWIRE_FUZZ_CHECK(f->qps == sums[n][0] && f->mrs == sums[n][1] && f->cqs == sums[n][2] && f->bytes == sums[n][3]);
    const rnic::function_settings& s = f->settings;
    if (within_limits)
      PUSHWIRE_FUZZ_CHECK(f->qps <= s.limits.max_qps && f->mrs <= s.limits.max_mrs && f->cqs <= s.limits.max_cqs &&
                          f->bytes <= s.limits.max_reg_bytes);
    PUSHWIRE_FUZZ_CHECK((s.mac[0] & 1) == 0);
    PUSHWIRE_FUZZ_CHECK(!s.gids.empty() && s.gids.size() <= 4);
    for (const ib::gid& g : s.gids)
      PUSHWIRE_FUZZ_CHECK(std::find(sw.config().gids.begin(), sw.config().gids.end(), g) != sw.config().gids.end());
    PUSHWIRE_FUZZ_CHECK(!s.pkeys.empty() && s.pkeys.size() <= 16);
    for (const std::uint16_t p : s.pkeys) PUSHWIRE_FUZZ_CHECK((p & 0x7FFF) != 0);
    PUSHWIRE_FUZZ_CHECK(s.limits.max_qps <= 16384 || s.limits.max_qps == sw.config().limits.max_qps);
  }
}

// ---- the control protocol ------------------------------------------------------------------

template <class T>
std::optional<T> decode_round_trip(std::span<const std::byte> in) {
  auto m = wire::decode<T>(in);
  if (!m) return std::nullopt;
  std::vector<std::byte> out(wire::wire_size(*m) + 1);
  const auto n = wire::encode(*m, out);
  PUSHWIRE_FUZZ_CHECK(n.has_value() && *n == in.size());
  PUSHWIRE_FUZZ_CHECK(std::equal(in.begin(), in.end(), out.begin()));
  return *m;
}

void control_messages(std::span<const std::byte> in) {
  if (const auto h = ctl::peek_header(in)) PUSHWIRE_FUZZ_CHECK(in.size() >= 8 && h->version == fn::version);
  (void)decode_round_trip<ctl::ctl_header>(in);
  (void)decode_round_trip<ctl::text_message>(in);
  (void)decode_round_trip<ctl::notice_message>(in);
  if (const auto r = decode_round_trip<ctl::attach_reply>(in)) PUSHWIRE_FUZZ_CHECK(r->gids.size() >= 1 && r->gids.size() <= 255);
  rnic::eswitch sw = make_switch();
  if (const auto a = decode_round_trip<ctl::attach_request>(in)) {
    const auto r = sw.attach(a->function, a->pid);
    if (const auto* const* att = std::get_if<const rnic::eswitch::attachment*>(&r)) {
      PUSHWIRE_FUZZ_CHECK(a->function <= rnic::max_vfs && sw.function(a->function) != nullptr);
      PUSHWIRE_FUZZ_CHECK((*att)->function == a->function && (*att)->pid == a->pid);
      std::vector<wire::ip_address<16>> gids;
      const ctl::attach_reply reply = sw.reply_for(**att, gids);
      std::array<std::byte, 256> buf{};
      const auto n = wire::encode(reply, buf);
      PUSHWIRE_FUZZ_CHECK(n.has_value());
      const auto back = wire::decode<ctl::attach_reply>(std::span<const std::byte>(buf).first(*n));
      PUSHWIRE_FUZZ_CHECK(back.has_value() && *back == reply);
      PUSHWIRE_FUZZ_CHECK(reply.qpn_first == (*att)->id << rnic::qpn_block_bits);
    } else {
      PUSHWIRE_FUZZ_CHECK(std::get<rnic::fn_errc>(r) == rnic::fn_errc::no_such_function);
    }
  }
  if (const auto q = decode_round_trip<ctl::reserve_request>(in)) {
    // The same request from each attachment, then given back: what was taken returns.
    for (std::uint32_t id = 0; id <= 4; ++id) {
      const auto before = sw.find(id) ? std::optional{*sw.find(id)} : std::nullopt;
      const auto e = sw.reserve(id, q->kind, static_cast<std::int64_t>(q->count));
      check_books(sw, true);
      if (!before) {
        PUSHWIRE_FUZZ_CHECK(e == rnic::fn_errc::bad_message);
        continue;
      }
      PUSHWIRE_FUZZ_CHECK(!e || *e == rnic::fn_errc::bad_message || *e == rnic::fn_errc::limit_reached);
      const rnic::eswitch::attachment& now = *sw.find(id);
      if (e) PUSHWIRE_FUZZ_CHECK(now.qps == before->qps && now.mrs == before->mrs && now.cqs == before->cqs && now.bytes == before->bytes);
      if (!e && static_cast<std::int64_t>(q->count) > 0) {
        PUSHWIRE_FUZZ_CHECK(!sw.reserve(id, q->kind, -static_cast<std::int64_t>(q->count)));
        check_books(sw, true);
      }
    }
  }
}

// ---- ctl commands ----------------------------------------------------------------------------

/// Brackets and braces balance outside strings, and it is one object.
bool balanced(std::string_view j) {
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < j.size(); ++i) {
    const char c = j[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '{' || c == '[') ++depth;
    else if (c == '}' || c == ']') {
      if (--depth < 0) return false;
      if (depth == 0 && i + 2 != j.size()) return false;  // then only the newline
    }
  }
  return depth == 0 && !in_string && j.starts_with('{') && j.ends_with("}\n");
}

void commands(std::span<const std::byte> in) {
  rnic::eswitch sw = make_switch();
  const std::string_view text(reinterpret_cast<const char*>(in.data()), in.size());
  std::vector<std::string_view> words;
  std::string out;
  int run = 0;
  auto execute = [&] {
    if (++run > 16) return;
    const auto e = sw.command(words, out);
    if (e) {
      PUSHWIRE_FUZZ_CHECK(static_cast<std::size_t>(*e) >= 1 && static_cast<std::size_t>(*e) <= rnic::fn_errc_table.size());
      PUSHWIRE_FUZZ_CHECK(!out.empty());
    } else {
      PUSHWIRE_FUZZ_CHECK(!out.empty() && out.back() == '\n');
    }
    check_books(sw, false);
  };
  std::size_t at = 0;
  while (at <= text.size()) {
    const std::size_t nul = std::min(text.find('\0', at), text.size());
    const std::string_view w = text.substr(at, nul - at);
    if (w.empty() && nul < text.size()) {  // two NULs: the command so far runs
      execute();
      words.clear();
    } else {
      words.push_back(w);
    }
    at = nul + 1;
  }
  execute();
  PUSHWIRE_FUZZ_CHECK(!sw.command({"show", "--json"}, out));
  PUSHWIRE_FUZZ_CHECK(balanced(out));
  PUSHWIRE_FUZZ_CHECK(!sw.command({"show"}, out));
  // The functions programs are attached to were never deleted.
  for (std::uint32_t id = 1; id <= 3; ++id) PUSHWIRE_FUZZ_CHECK(sw.function(sw.find(id)->function) != nullptr);
}

// ---- the data path ---------------------------------------------------------------------------

ib::gid address(const ib::roce_view& v, bool source) {
  ib::gid g{};
  if (v.v6) {
    const auto a = source ? v.ipv6().src : v.ipv6().dst;
    std::copy(a.begin(), a.end(), g.begin());
  } else {
    g = ib::gid_v4(source ? v.ipv4().src : v.ipv4().dst);
  }
  return g;
}
bool has(const std::vector<ib::gid>& gids, const ib::gid& g) { return std::find(gids.begin(), gids.end(), g) != gids.end(); }

void frames(std::span<const std::byte> in) {
  rnic::eswitch sw = make_switch();
  // From the wire.
  std::vector<std::byte> f(in.begin(), in.end());
  const auto to = sw.steer(f);
  ib::roce_view v;
  const bool roce = ib::inspect(in, v, {.crc = wire::crc_check::skip}).code == wire::errc{};
  PUSHWIRE_FUZZ_CHECK(std::equal(f.begin() + static_cast<std::ptrdiff_t>(std::min<std::size_t>(6, f.size())), f.end(),
                                 in.begin() + static_cast<std::ptrdiff_t>(std::min<std::size_t>(6, in.size()))));
  if (const auto* id = std::get_if<std::uint32_t>(&to)) {
    PUSHWIRE_FUZZ_CHECK(roce);
    const rnic::eswitch::attachment* a = sw.find(*id);
    PUSHWIRE_FUZZ_CHECK(a != nullptr);
    const std::uint32_t qpn = v.bth().destqp;
    PUSHWIRE_FUZZ_CHECK(qpn >> rnic::qpn_block_bits == *id);
    const rnic::function_settings& s = sw.function(a->function)->settings;
    PUSHWIRE_FUZZ_CHECK(has(s.gids, address(v, false)));
    PUSHWIRE_FUZZ_CHECK(std::equal(s.mac.begin(), s.mac.end(), f.begin(), [](std::uint8_t m, std::byte b) { return std::byte{m} == b; }));
    PUSHWIRE_FUZZ_CHECK(sw.function(a->function)->counters.rx_frames == 1);
  } else {
    const auto why = std::get<rnic::rx_drop_reason>(to);
    PUSHWIRE_FUZZ_CHECK(std::equal(f.begin(), f.end(), in.begin(), in.end()));
    PUSHWIRE_FUZZ_CHECK(why != rnic::rx_drop_reason::ring_full);
    PUSHWIRE_FUZZ_CHECK((why == rnic::rx_drop_reason::not_roce) == !roce);
    PUSHWIRE_FUZZ_CHECK(sw.rx_drops()[static_cast<std::size_t>(why)] == 1);
  }
  // From each attachment (and one that does not exist).
  for (const std::uint32_t id : {1u, 2u, 3u, 999u}) {
    const auto drop = sw.check_tx(id, in);
    if (drop) {
      PUSHWIRE_FUZZ_CHECK(static_cast<std::size_t>(*drop) < rnic::tx_drop_names.size());
      PUSHWIRE_FUZZ_CHECK((*drop == rnic::tx_drop::not_roce) == (!roce || v.has_vlan || id == 999));
      continue;
    }
    PUSHWIRE_FUZZ_CHECK(roce && !v.has_vlan && id != 999);
    const auto& s = sw.function(sw.find(id)->function)->settings;
    PUSHWIRE_FUZZ_CHECK(!s.trust);
    const auto src = v.eth().src;
    PUSHWIRE_FUZZ_CHECK(std::equal(src.begin(), src.end(), s.mac.begin()));
    PUSHWIRE_FUZZ_CHECK(has(s.gids, address(v, true)));
    PUSHWIRE_FUZZ_CHECK(v.udp().srcport == ib::roce_port && v.udp().dstport == ib::roce_port);
    PUSHWIRE_FUZZ_CHECK(std::find(s.pkeys.begin(), s.pkeys.end(), v.bth().p_key) != s.pkeys.end());
    if (const auto d = v.get<ib::ext::deth>()) PUSHWIRE_FUZZ_CHECK(std::uint32_t{d->srcqp} >> rnic::qpn_block_bits == id);
  }
  for (std::uint32_t n = 1; n <= 2; ++n) {
    const auto& c = sw.function(n)->counters;
    std::uint64_t drops = 0;
    for (const auto d : c.tx_drops) drops += d;
    PUSHWIRE_FUZZ_CHECK(c.tx_frames + drops == (n == 1 ? 2u : 1u));
  }
}

// ---- the rings -------------------------------------------------------------------------------

constexpr std::uint32_t slots = 16;
volatile std::uint32_t touched = 0;  // what the reads add up to: they are not optimised away

/// Every byte of a frame a consumer was shown, copied out as the device process does (ASan
/// checks the whole range a memcpy reads).
std::uint32_t touch(std::span<const std::byte> f) {
  static std::array<std::byte, fn::slot_capacity> copy;
  std::memcpy(copy.data(), f.data(), f.size());
  return std::to_integer<std::uint32_t>(copy[0]) + std::to_integer<std::uint32_t>(copy[f.size() - 1]);
}

void rings(std::span<const std::byte> in, fuzz::provider& p) {
  std::vector<std::byte> region(fn::region_bytes(slots));  // exactly: a read past it is ASan's
  fn::format_region(region, slots);
  fn::region_view view;
  PUSHWIRE_FUZZ_CHECK(!fn::check_region(region, view));
  const std::byte* const lo = region.data();
  const std::byte* const hi = region.data() + region.size();
  // Both rings, control block and slots, tiled with the input.
  for (std::byte* ring : {view.tx, view.rx}) {
    PUSHWIRE_FUZZ_CHECK(ring >= lo && ring + fn::ring_bytes(slots) <= hi);
    for (std::size_t at = 0; !in.empty() && at < fn::ring_bytes(slots); at += in.size())
      std::memcpy(ring + at, in.data(), std::min(in.size(), fn::ring_bytes(slots) - at));
  }
  std::uint32_t sink = 0;
  for (std::byte* ring : {view.tx, view.rx}) {
    fn::ring_consumer c(ring, slots);
    const std::byte* const first = ring + fn::ring_control;
    const std::byte* const end = ring + fn::ring_bytes(slots);
    for (int round = 0; round < 8; ++round) {
      if (round > 0) {  // the producer publishes again: a few slots more, or anything
        const std::uint8_t step = p.take<std::uint8_t>();
        const std::uint32_t next = step == 0xFF ? p.take<std::uint32_t>() : c.consumed() + step % 24;
        std::memcpy(ring + fn::producer_at, &next, 4);
        for (std::uint32_t i = 0; i < slots && p.flag(); ++i) {  // and rewrites lengths, often at the edges
          constexpr std::array<std::uint32_t, 8> edges{0, 1, fn::slot_capacity - 1, fn::slot_capacity, fn::slot_capacity + 1,
                                                       fn::slot_stride, fn::slot_stride + 1, 0xFFFFFFFF};
          const std::uint8_t how = p.take<std::uint8_t>();
          const std::uint32_t len = how < 2 * edges.size() ? edges[how % edges.size()] : p.take<std::uint16_t>();
          std::memcpy(ring + fn::ring_control + std::size_t{(c.consumed() + i) % slots} * fn::slot_stride, &len, 4);
        }
      }
      rnic::fn_errc e{};
      const auto n = c.available(e);
      if (!n) {
        PUSHWIRE_FUZZ_CHECK(e == rnic::fn_errc::ring_index_out_of_range);
        break;
      }
      PUSHWIRE_FUZZ_CHECK(*n <= slots);
      if (*n == 0) {
        PUSHWIRE_FUZZ_CHECK(c.arm_sleep());
        c.disarm_sleep();
        continue;
      }
      PUSHWIRE_FUZZ_CHECK(!c.arm_sleep());
      bool broken = false;
      for (std::uint32_t i = 0; i < *n; ++i) {
        const auto f = c.peek(e);
        if (!f) {
          PUSHWIRE_FUZZ_CHECK(e == rnic::fn_errc::slot_length_out_of_range);
          broken = true;
          break;
        }
        PUSHWIRE_FUZZ_CHECK(!f->empty() && f->size() <= fn::slot_capacity);
        PUSHWIRE_FUZZ_CHECK(f->data() >= first && f->data() + f->size() <= end);
        sink += touch(*f);
        c.pop();
      }
      if (broken) break;
    }
    // The producing side over the same ring: the consumer's index as the input left it.
    fn::ring_producer prod(ring, slots);
    rnic::fn_errc e{};
    if (const auto space = prod.space(e)) {
      PUSHWIRE_FUZZ_CHECK(*space <= slots);
      for (std::uint32_t i = 0; i < *space && i < 4; ++i) {
        const auto s = prod.next();
        PUSHWIRE_FUZZ_CHECK(s.data() >= first && s.data() + s.size() <= end);
        const auto bytes = p.bytes(fn::slot_capacity);
        std::copy(bytes.begin(), bytes.end(), s.begin());
        prod.publish(static_cast<std::uint32_t>(std::max<std::size_t>(1, bytes.size())));
        (void)prod.consumer_sleeping();
        (void)prod.consumer_wake_after();
      }
    } else {
      PUSHWIRE_FUZZ_CHECK(e == rnic::fn_errc::ring_index_out_of_range);
    }
  }
  // The header: from the input, in a mapping of 16 slots' size and in one of the input's size.
  std::fill(region.begin(), region.end(), std::byte{0});
  std::copy(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(std::min(in.size(), fn::header_bytes)), region.begin());
  for (const std::size_t size : {region.size(), std::min(in.size(), region.size())}) {
    const std::span<std::byte> mapping(region.data(), size);
    fn::region_view v;
    const auto e = fn::check_region(mapping, v);
    if (e) {
      PUSHWIRE_FUZZ_CHECK(*e == rnic::fn_errc::bad_message || *e == rnic::fn_errc::unsupported_version);
      continue;
    }
    PUSHWIRE_FUZZ_CHECK(fn::valid_slots(v.slots) && fn::region_bytes(v.slots) <= size);
    PUSHWIRE_FUZZ_CHECK(v.tx == region.data() + fn::header_bytes);
    PUSHWIRE_FUZZ_CHECK(v.rx == v.tx + fn::ring_bytes(v.slots));
    PUSHWIRE_FUZZ_CHECK(v.rx + fn::ring_bytes(v.slots) <= region.data() + size);
    fn::ring_consumer c(v.rx, v.slots);
    rnic::fn_errc err{};
    if (const auto n = c.available(err); n && *n > 0)
      if (const auto f = c.peek(err)) sink += touch(*f);
    (void)v.state();
  }
  touched = sink;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> in(reinterpret_cast<const std::byte*>(data), size);
  control_messages(in);
  commands(in);
  frames(in);
  fuzz::provider p(data, size);
  rings(in, p);
  return 0;
}
