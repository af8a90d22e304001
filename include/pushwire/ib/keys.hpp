// RoCEv2 frames as key=value pairs. The keys pushwire-dump --json prints (write_json_fields,
// ib/print.hpp) are the keys frame_builder reads (pushwire-gen frame), so a frame's dump builds
// it again byte for byte (spec/roce.md §12). Header fields are keyed and valued by their
// descriptions (wire/keys.hpp); the frame's other parts have the keys in `key` below.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

#include <pushwire/ib/roce.hpp>
#include <pushwire/wire/hex.hpp>
#include <pushwire/wire/keys.hpp>
#include <pushwire/wire/print.hpp>
#include <pushwire/wire/table.hpp>

namespace pushwire::ib {

/// Keys of the parts of a frame that are not header fields.
namespace key {
inline constexpr std::string_view ip_options = "ip.options";          ///< IPv4 options, hex (only when IHL > 5)
inline constexpr std::string_view payload = "pushwire.payload";       ///< the IB payload without the pad, hex
inline constexpr std::string_view pad = "pushwire.pad";               ///< the pad bytes, hex (0-3 bytes)
inline constexpr std::string_view icrc = "infiniband.invariant.crc";  ///< the ICRC as Wireshark shows it (icrc_shown)
inline constexpr std::string_view trailer = "eth.trailer";            ///< bytes after the IP packet, hex (when any)
inline constexpr std::string_view opcode = "pushwire.opcode";         ///< the packet's name (packet_name)
inline constexpr std::string_view icrc_status = "pushwire.icrc";      ///< printed only: good, bad or unchecked
}  // namespace key

/// Calls f(header) for each header p carries, in wire order: Ethernet, the VLAN tag, IPv4 or
/// IPv6, UDP, BTH, then the extended headers present (in ext order, which is chain order).
template <class F>
void for_each_header(const roce_packet& p, F&& f) {
  f(p.eth);
  if (p.vlan) f(*p.vlan);
  if (p.v6) f(p.ip6);
  else f(p.ip4);
  f(p.udp);
  f(p.bth);
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    ([&] {
      if (const auto& h = p.ext.get<static_cast<ext>(I)>()) f(*h);
    }(), ...);
  }(std::make_index_sequence<ext_count>{});
}

/// Which flag of as_given a header member sets: the fields build() computes unless given.
template <class H>
constexpr bool as_given::*given_flag(std::string_view member) {
  if constexpr (std::is_same_v<H, eth_header>) {
    if (member == "type") return &as_given::eth_type;
  } else if constexpr (std::is_same_v<H, vlan_tag>) {
    if (member == "etype") return &as_given::vlan_etype;
  } else if constexpr (std::is_same_v<H, ipv4_header>) {
    if (member == "version") return &as_given::ip_version;
    if (member == "hdr_len") return &as_given::ip_hdr_len;
    if (member == "len") return &as_given::ip_len;
    if (member == "proto") return &as_given::ip_proto;
    if (member == "checksum") return &as_given::ip_checksum;
  } else if constexpr (std::is_same_v<H, ipv6_header>) {
    if (member == "version") return &as_given::ip_version;
    if (member == "plen") return &as_given::ip_len;
    if (member == "nxt") return &as_given::ip_proto;
  } else if constexpr (std::is_same_v<H, udp_header>) {
    if (member == "length") return &as_given::udp_length;
    if (member == "checksum") return &as_given::udp_checksum;
  } else if constexpr (std::is_same_v<H, bth>) {
    if (member == "tver") return &as_given::tver;
    if (member == "padcnt") return &as_given::padcnt;
  }
  return nullptr;
}

/// Every key a frame can have, in the order write_json_fields prints them (header fields, then
/// the other parts; key::icrc_status is printed only).
inline std::vector<std::string> frame_keys() {
  std::vector<std::string> out;
  auto fields = [&]<class H>(std::type_identity<H>) {
    for (const wire::field_info& f : wire::fields<H>) out.push_back(wire::field_key<H>(f.name));
  };
  fields(std::type_identity<eth_header>{});
  fields(std::type_identity<vlan_tag>{});
  fields(std::type_identity<ipv4_header>{});
  out.emplace_back(key::ip_options);
  fields(std::type_identity<ipv6_header>{});
  fields(std::type_identity<udp_header>{});
  fields(std::type_identity<bth>{});
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (fields(std::type_identity<ext_type<static_cast<ext>(I)>>{}), ...);
  }(std::make_index_sequence<ext_count>{});
  for (auto k : {key::payload, key::pad, key::icrc, key::trailer, key::opcode}) out.emplace_back(k);
  return out;
}

/// A roce_packet from key=value pairs (pushwire-gen frame), in any order, each key at most once.
/// Starts from roce_packet's defaults (IPv4, DF, TTL 64, UDP 0xC000 to 4791, P_Key 0xFFFF). Any
/// ipv6.* key makes the frame IPv6, any vlan.* key adds a tag. The extended headers are those
/// the opcode names (infiniband.bth.opcode, or pushwire.opcode by name): those given keys, the
/// others zero. What build() computes (as_given: lengths, checksums, PadCnt, pad, ICRC) is
/// computed unless its key is given; a given value is written as it is, even when wrong.
class frame_builder {
 public:
  explicit frame_builder(rd_class rd = rd_class::dc) { p_.rd = rd; }

  /// Takes one key=value. Errors: unknown_key; malformed; too_wide; invalid (a key given
  /// twice, ip.* with ipv6.*, a reserved field not 0, ip.options not a multiple of 4 bytes up
  /// to 40, a pad over 3 bytes). On error nothing changes.
  wire::key_error set(std::string_view k, std::string_view value) {
    for (const auto& s : seen_)
      if (s == k) return {wire::key_errc::invalid, std::string{k} + ": given twice"};
    auto e = take(k, value);
    if (!e) seen_.emplace_back(k);
    return e;
  }

  /// The packet (its spans point into *this, which must outlive it). Errors (invalid): the
  /// opcode is not in the table, pushwire.opcode disagrees with infiniband.bth.opcode or names
  /// no opcode, a key of an extended header the opcode does not carry, a payload on an opcode
  /// without one.
  wire::key_error packet(roce_packet& out) const {
    using wire::key_errc;
    out = p_;
    out.ip_options = options_;
    out.payload = payload_;
    out.pad = pad_;
    out.trailer = trailer_;
    if (name_) {
      const opcode_info* named = nullptr;
      bool disconnect = *name_ == "DC_DISCONNECT";
      for (const opcode_info& o : opcodes)
        if (o.name == *name_ || (disconnect && o.id == opcode::dc_connect)) named = &o;
      const std::string what = std::string{key::opcode} + "=" + *name_ + ": ";
      if (!named) return {key_errc::invalid, what + "not an opcode name (as RC_SEND_ONLY)"};
      if (find_opcode(named->code, p_.rd) != named)
        return {key_errc::invalid, what + "opcode " + wire::detail::hex_number(named->code, 2) + " reads as " +
                                       std::string{find_opcode(named->code, p_.rd)->name} +
                                       " here (--ibta-rd reads 0x40-0x5F as RD)"};
      if (opcode_given_ && p_.bth.opcode != named->code)
        return {key_errc::invalid, what + "disagrees with infiniband.bth.opcode=" + std::to_string(p_.bth.opcode)};
      if (named->id == opcode::dc_connect && se_given_ && p_.bth.se != disconnect)
        return {key_errc::invalid, what + "disagrees with infiniband.bth.se=" + (p_.bth.se ? "1" : "0")};
      out.bth.opcode = named->code;
      if (named->id == opcode::dc_connect) out.bth.se = disconnect;
    }
    const opcode_info* op = find_opcode(out.bth.opcode, p_.rd);
    if (!op)
      return {key_errc::invalid, "infiniband.bth.opcode=" + std::to_string(out.bth.opcode) + ": a reserved opcode"};
    const std::string op_text = std::string{op->name} + " (" + wire::detail::hex_number(op->code, 2) + ")";
    wire::key_error e{};
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ([&] {
        constexpr ext E = static_cast<ext>(I);
        auto& h = out.ext.get<E>();
        if (e || op->has(E) == h.has_value()) return;
        if (h) e = {key_errc::invalid, ext_key_[I] + ": " + op_text + " carries no " + std::string{name(E)}};
        else h.emplace();
      }(), ...);
    }(std::make_index_sequence<ext_count>{});
    if (e) return e;
    if (!op->payload && !payload_.empty())
      return {key_errc::invalid, std::string{key::payload} + ": " + op_text + " carries no payload"};
    return {};
  }

 private:
  // A frame has IPv4 or IPv6 keys, not both.
  template <class H>
  wire::key_error admit(std::string_view k) const {
    constexpr bool v4 = std::is_same_v<H, ipv4_header>, v6 = std::is_same_v<H, ipv6_header>;
    if ((v4 && ip6_) || (v6 && ip4_))
      return {wire::key_errc::invalid, std::string{k} + ": the frame already has " + (v4 ? "ipv6.*" : "ip.*") + " keys"};
    return {};
  }
  template <class H>
  void note(std::string_view k, std::string_view member) {
    if (auto flag = given_flag<H>(member)) p_.given.*flag = true;
    if constexpr (std::is_same_v<H, ipv4_header>) ip4_ = true, p_.v6 = false;
    if constexpr (std::is_same_v<H, ipv6_header>) ip6_ = true, p_.v6 = true;
    if constexpr (std::is_same_v<H, bth>) {
      opcode_given_ = opcode_given_ || member == "opcode";
      se_given_ = se_given_ || member == "se";
    }
    if constexpr (!is_ext<H>::value) (void)k;
    else if (auto& first = ext_key_[is_ext<H>::index]; first.empty()) first = std::string{k};
  }
  template <class H>
  struct is_ext {
    static constexpr std::size_t index = [] {
      std::size_t r = ext_count;
      [&]<std::size_t... I>(std::index_sequence<I...>) {
        ((std::is_same_v<H, std::tuple_element_t<I, ext_types>> ? (r = I, 0) : 0), ...);
      }(std::make_index_sequence<ext_count>{});
      return r;
    }();
    static constexpr bool value = index < ext_count;
  };

  // Tries k on header h: false when none of H's fields has that key.
  template <class H>
  bool header(H& h, std::string_view k, std::string_view value, wire::key_error& e) {
    H v = h;
    std::string_view member;
    e = wire::set_by_key(v, k, value, &member);
    if (e.code == wire::key_errc::unknown_key) return false;
    if (!e) e = admit<H>(k);
    if (e) return true;
    h = v;
    note<H>(k, member);
    return true;
  }
  template <class H>
  bool header(std::optional<H>& h, std::string_view k, std::string_view value, wire::key_error& e) {
    H v = h.value_or(H{});
    if (!header(v, k, value, e)) return false;
    if (!e) h = v;
    return true;
  }

  static wire::key_error bytes(std::string_view k, std::string_view value, std::vector<std::byte>& out) {
    auto b = wire::parse_hex(value);
    if (!b) return {wire::key_errc::malformed, std::string{k} + "=" + std::string{value} + ": not hex"};
    out = std::move(*b);
    return {};
  }

  wire::key_error take(std::string_view k, std::string_view value) {
    using wire::key_errc;
    const std::string kv = std::string{k} + "=" + std::string{value} + ": ";
    if (k == key::ip_options) {
      std::vector<std::byte> b;
      if (auto e = bytes(k, value, b)) return e;
      if (b.size() % 4 || b.size() > 40) return {key_errc::invalid, kv + "IPv4 options are a multiple of 4 bytes, at most 40"};
      if (auto e = admit<ipv4_header>(k)) return e;
      options_ = std::move(b);
      note<ipv4_header>(k, {});
      return {};
    }
    if (k == key::payload) return bytes(k, value, payload_);
    if (k == key::trailer) return bytes(k, value, trailer_);
    if (k == key::pad) {
      std::vector<std::byte> b;
      if (auto e = bytes(k, value, b)) return e;
      if (b.size() > 3) return {key_errc::invalid, kv + "a pad is at most 3 bytes"};
      pad_ = std::move(b);
      p_.given.pad = true;
      return {};
    }
    if (k == key::icrc) {
      std::uint64_t n = 0;
      if (auto e = wire::parse_key_number(k, value, 32, n)) return e;
      p_.icrc = icrc_shown(static_cast<std::uint32_t>(n));
      p_.given.icrc = true;
      return {};
    }
    if (k == key::opcode) {
      name_ = std::string{value};
      return {};
    }
    wire::key_error e{};
    bool found = header(p_.eth, k, value, e) || header(p_.vlan, k, value, e) || header(p_.ip4, k, value, e) ||
                 header(p_.ip6, k, value, e) || header(p_.udp, k, value, e) || header(p_.bth, k, value, e);
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      found = found || (header(p_.ext.get<static_cast<ext>(I)>(), k, value, e) || ...);
    }(std::make_index_sequence<ext_count>{});
    if (!found) e = {wire::key_errc::unknown_key, "unknown key " + std::string{k}};
    return e;
  }

  roce_packet p_{};
  std::vector<std::byte> options_, payload_, pad_, trailer_;
  std::optional<std::string> name_;
  bool ip4_ = false, ip6_ = false, opcode_given_ = false, se_given_ = false;  ///< keys seen
  std::array<std::string, ext_count> ext_key_{};  ///< the first key given for each extended header
  std::vector<std::string> seen_;
};

}  // namespace pushwire::ib
