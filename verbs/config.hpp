// The provider's device configuration (spec/verbs.md §2): which devices a process sees, read
// from the environment. Pure parsing, tested in tests/verbs/config_test.cpp.
//
//   PUSHWIRE_VERBS="pw0:198.18.0.1 pw1:127.0.0.2:1024"   devices, separated by spaces or commas
//   PUSHWIRE_VERBS_FILE=/path                           the same list, read from a file ('#' comments,
//                                                       at a line's start or after a blank)
//   PUSHWIRE_VERBS_FAULTS="loss=0.05,reorder=0.05,seed=7"   faults on what every device sends
//   PUSHWIRE_VERBS_QOS="ecn ect0 dcqcn on tsa ets,... tcbw 0,75,25,0,0,0,0,0"   every device's port
//                                                       (spec/qos.md §5)
//   PUSHWIRE_VERBS_PLATFORM="sockets=2 hca=0 card=0 card=1 threshold=65536"   the platform of every
//                                                       device: its cards, whose memory
//                                                       ibv_reg_dmabuf_mr registers (spec/verbs.md §3)
//
// An entry is NAME:ADDRESS[:MTU][@IPV6][/xdp=IF][+ADDRESS[@IPV6][/xdp=IF]]... (a device of the
// process's own, each `+` adding a port), or NAME@PATH[#FUNCTION]
// (a function of a shared device, pushwire-rnicd, attached through its control socket PATH:
// spec/rnicd.md §4; FUNCTION is `pf` (the default) or `vfN`).
// - NAME: 1..63 characters of [A-Za-z0-9_.-].
// - ADDRESS: the IPv4 address the device's UDP socket binds (port 4791), which is its GID; or
//   `auto`: the first of 127.0.0.1 .. 127.0.0.254 whose port 4791 is free when the device is
//   opened (two processes on one host each get their own).
// - MTU: the port's active MTU, 1024 or 4096 (the default).
// - IPV6: an IPv6 address of the host the device also binds (UDP 4791): its GID 1, RoCEv2 over
//   IPv6. Without it the device has GID 0 only. (Loopback has one IPv6 address, ::1, so only one
//   process of a host can give its device ::1.)
// - Each `+ADDRESS[@IPV6]`: one more port (ports 2 .. 4), with its own IPv4 address (not `auto`)
//   and MAC, and its own IPv6 GID when given; the ports share the MTU and the device (its QPs,
//   keys, CQs). An RC QP's alternate path may be on another port (spec/qos.md §9).
// - /xdp=IF: the port moves RoCE over AF_XDP on interface IF (1..15 characters, no '/', '+',
//   '@' or ':'), which has the port's address (spec/net.md §6; spec/verbs.md §2). Not with
//   `auto`. Where AF_XDP cannot be had, the UDP socket is used and one line on stderr says so.
// Unset, the list is `pw0:auto`.
#pragma once

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <arpa/inet.h>
#include <sys/socket.h>

#include <pushwire/rnic/classes.hpp>
#include <pushwire/rnic/faults.hpp>
#include <pushwire/rnic/platform.hpp>

namespace pushwire::verbs {

/// A port after the first: its IPv4 address (GID 0) and its IPv6 address (GID 1), when given.
struct port_spec {
  std::array<std::uint8_t, 4> address{};
  std::optional<std::array<std::uint8_t, 16>> address6;
  std::string xdp;  ///< the interface for AF_XDP (empty: a UDP socket)
  friend bool operator==(const port_spec&, const port_spec&) = default;
};

struct device_spec {
  /// Ports a device of the process's own may have.
  static constexpr std::size_t max_ports = 4;
  std::string name;
  std::optional<std::array<std::uint8_t, 4>> address;  ///< nullopt: auto
  std::uint32_t mtu = 4096;
  std::optional<std::array<std::uint8_t, 16>> address6;  ///< GID 1, when given
  /// A function of a device process: its control socket (empty: a device of the process's own)
  /// and its number (0: the PF; n: VF n).
  std::string attach;
  std::uint16_t function = 0;
  std::vector<port_spec> more_ports;  ///< a device of the process's own: its ports 2 .. max_ports
  std::string xdp;  ///< port 1's interface for AF_XDP (empty: a UDP socket)
  friend bool operator==(const device_spec&, const device_spec&) = default;
};

struct fault_spec {
  rnic::direction_faults faults{};
  std::uint64_t seed = 1;
};

/// A parse result: the value, or the reason it was refused (the whole input is refused).
template <class T>
struct parsed {
  T value{};
  std::string error;  ///< empty: ok
  explicit operator bool() const { return error.empty(); }
};

namespace detail {
inline std::vector<std::string_view> split(std::string_view s, std::string_view seps) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < s.size()) {
    const std::size_t j = s.find_first_of(seps, i);
    const std::size_t end = j == std::string_view::npos ? s.size() : j;
    if (end > i) out.push_back(s.substr(i, end - i));
    i = end + 1;
  }
  return out;
}
inline std::optional<std::array<std::uint8_t, 4>> parse_ipv4(std::string_view s) {
  const auto parts = split(s, ".");
  if (parts.size() != 4 || std::count(s.begin(), s.end(), '.') != 3) return std::nullopt;
  std::array<std::uint8_t, 4> a{};
  for (std::size_t i = 0; i < 4; ++i) {
    unsigned v = 0;
    const auto [p, ec] = std::from_chars(parts[i].data(), parts[i].data() + parts[i].size(), v);
    if (ec != std::errc{} || p != parts[i].data() + parts[i].size() || v > 255 || parts[i].size() > 3) return std::nullopt;
    a[i] = static_cast<std::uint8_t>(v);
  }
  return a;
}
/// An IPv6 address that is not IPv4-mapped.
inline std::optional<std::array<std::uint8_t, 16>> parse_ipv6(std::string_view s) {
  const std::string text(s);
  std::array<std::uint8_t, 16> a{};
  if (::inet_pton(AF_INET6, text.c_str(), a.data()) != 1) return std::nullopt;
  const bool mapped = std::all_of(a.begin(), a.begin() + 10, [](std::uint8_t b) { return b == 0; }) && a[10] == 0xFF && a[11] == 0xFF;
  if (mapped) return std::nullopt;
  return a;
}
/// "'what': reason" (built by appending: g++-12 -O3 warns falsely on chained string +).
inline std::string why(std::string_view what, std::string_view reason) {
  std::string s;
  s += '\'';
  s.append(what);
  s += "': ";
  s.append(reason);
  return s;
}
/// Splits a port's text at its last "/KEY=VALUE", which must be "/xdp=IF": the rest, and IF
/// ("" without one); nullopt for another key or an interface name that is not 1..15 characters
/// without '/', '+', '@', ':'.
inline std::optional<std::pair<std::string_view, std::string_view>> split_xdp(std::string_view port) {
  const std::size_t slash = port.rfind('/');
  if (slash == std::string_view::npos || port.find('=', slash) == std::string_view::npos) return std::pair{port, std::string_view{}};
  const std::string_view opt = port.substr(slash + 1);
  if (!opt.starts_with("xdp=")) return std::nullopt;
  const std::string_view ifname = opt.substr(4);
  if (ifname.empty() || ifname.size() > 15 || ifname.find_first_of("/+@:") != std::string_view::npos) return std::nullopt;
  return std::pair{port.substr(0, slash), ifname};
}
inline bool valid_name(std::string_view n) {
  if (n.empty() || n.size() > 63) return false;
  for (char c : n)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-')) return false;
  return true;
}
}  // namespace detail

/// Parses a device list (see the top). Names must be distinct; at most 16 devices.
inline parsed<std::vector<device_spec>> parse_devices(std::string_view text) {
  parsed<std::vector<device_spec>> r;
  std::string cleaned;  // comments removed (file form): '#' at the start of a line or after a blank
  for (const auto line : detail::split(text, "\n")) {
    std::size_t hash = 0;
    while ((hash = line.find('#', hash)) != std::string_view::npos && hash > 0 && line[hash - 1] != ' ' && line[hash - 1] != '\t') ++hash;
    cleaned.append(line.substr(0, hash));
    cleaned.push_back(' ');
  }
  for (const auto whole : detail::split(cleaned, " ,\t\r")) {
    const std::size_t at = whole.find('@');
    if (at != std::string_view::npos && whole.substr(0, at).find(':') == std::string_view::npos) {
      // NAME@PATH[#pf|#vfN]
      device_spec d;
      if (!detail::valid_name(whole.substr(0, at))) {
        r.error = detail::why(whole.substr(0, at), "a name is 1..63 characters of A-Z a-z 0-9 _ . -");
        return r;
      }
      d.name = whole.substr(0, at);
      std::string_view path = whole.substr(at + 1);
      if (const std::size_t hash = path.rfind('#'); hash != std::string_view::npos) {
        const std::string_view f = path.substr(hash + 1);
        unsigned n = 0;
        if (f == "pf") n = 0;
        else if (!f.starts_with("vf") || std::from_chars(f.data() + 2, f.data() + f.size(), n).ptr != f.data() + f.size() || f.size() < 3 ||
                 n < 1 || n > 127) {
          r.error = detail::why(f, "a function is pf or vf1..vf127");
          return r;
        }
        d.function = static_cast<std::uint16_t>(n);
        path = path.substr(0, hash);
      }
      if (path.empty() || path.size() > 107) {
        r.error = detail::why(path, "a control socket's path is 1..107 bytes");
        return r;
      }
      d.attach = path;
      for (const auto& e : r.value)
        if (e.name == d.name) {
          r.error = detail::why(d.name, "named twice");
          return r;
        }
      r.value.push_back(std::move(d));
      continue;
    }
    auto ports = detail::split(whole, "+");
    if (ports.size() > device_spec::max_ports || ports.empty() || whole.front() == '+' || whole.back() == '+' ||
        whole.find("++") != std::string_view::npos) {
      r.error = detail::why(whole, "a device has 1..4 ports, separated by '+'");
      return r;
    }
    std::vector<std::string_view> xdp(ports.size());
    for (std::size_t i = 0; i < ports.size(); ++i) {
      const auto sx = detail::split_xdp(ports[i]);
      if (!sx) {
        r.error = detail::why(ports[i], "a port's option is /xdp=IF, IF 1..15 characters without / + @ :");
        return r;
      }
      xdp[i] = sx->second;
      ports[i] = sx->first;
    }
    const std::string_view first = ports[0];
    const std::size_t at1 = first.find('@');
    const std::string_view entry = first.substr(0, at1);
    std::optional<std::array<std::uint8_t, 16>> v6;
    if (at1 != std::string_view::npos && !(v6 = detail::parse_ipv6(first.substr(at1 + 1)))) {
      r.error = detail::why(first.substr(at1 + 1), "not an IPv6 address (nor IPv4-mapped)");
      return r;
    }
    std::vector<port_spec> more;
    for (std::size_t i = 1; i < ports.size(); ++i) {
      const std::size_t a = ports[i].find('@');
      port_spec ps;
      ps.xdp = xdp[i];
      const auto v4 = detail::parse_ipv4(ports[i].substr(0, a));
      if (!v4) {
        r.error = detail::why(ports[i].substr(0, a), "a further port's address is IPv4 (not 'auto')");
        return r;
      }
      ps.address = *v4;
      if (a != std::string_view::npos && !(ps.address6 = detail::parse_ipv6(ports[i].substr(a + 1)))) {
        r.error = detail::why(ports[i].substr(a + 1), "not an IPv6 address (nor IPv4-mapped)");
        return r;
      }
      for (const port_spec& o : more)
        if (o.address == ps.address || (ps.address6 && o.address6 == ps.address6)) {
          r.error = detail::why(ports[i], "an address of two ports");
          return r;
        }
      more.push_back(ps);
    }
    const auto f = detail::split(entry, ":");
    if (f.size() < 2 || f.size() > 3 || std::count(entry.begin(), entry.end(), ':') != static_cast<long>(f.size() - 1)) {
      r.error = detail::why(entry, "expected NAME:ADDRESS[:MTU]");
      return r;
    }
    device_spec d;
    d.address6 = v6;
    d.xdp = xdp[0];
    for (const port_spec& o : more)
      if (d.address6 && o.address6 == d.address6) {
        r.error = detail::why(first.substr(at1 + 1), "an address of two ports");
        return r;
      }
    d.more_ports = std::move(more);
    if (!detail::valid_name(f[0])) {
      r.error = detail::why(f[0], "a name is 1..63 characters of A-Z a-z 0-9 _ . -");
      return r;
    }
    d.name = f[0];
    if (f[1] == "auto" && !d.xdp.empty()) {
      r.error = detail::why(whole, "a port over AF_XDP names its address (not 'auto')");
      return r;
    }
    if (f[1] != "auto") {
      d.address = detail::parse_ipv4(f[1]);
      if (!d.address) {
        r.error = detail::why(f[1], "not an IPv4 address or 'auto'");
        return r;
      }
      for (const port_spec& o : d.more_ports)
        if (o.address == *d.address) {
          r.error = detail::why(f[1], "an address of two ports");
          return r;
        }
    }
    if (f.size() == 3) {
      if (f[2] == "1024") d.mtu = 1024;
      else if (f[2] == "4096") d.mtu = 4096;
      else {
        r.error = detail::why(f[2], "the MTU is 1024 or 4096");
        return r;
      }
    }
    for (const auto& e : r.value)
      if (e.name == d.name) {
        r.error = detail::why(d.name, "named twice");
        return r;
      }
    r.value.push_back(std::move(d));
  }
  if (r.value.size() > 16) r.error = "more than 16 devices";
  if (r.value.empty() && r.error.empty()) r.error = "no device listed";
  return r;
}

/// Parses a fault list: loss, duplicate, reorder, corrupt, delay (probabilities 0..1, each
/// frame independently) and seed.
inline parsed<fault_spec> parse_faults(std::string_view text) {
  parsed<fault_spec> r;
  for (const auto item : detail::split(text, " ,")) {
    const std::size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      r.error = detail::why(item, "expected KEY=VALUE");
      return r;
    }
    const std::string key(item.substr(0, eq)), val(item.substr(eq + 1));
    if (key == "seed") {
      const auto [p, ec] = std::from_chars(val.data(), val.data() + val.size(), r.value.seed);
      if (ec != std::errc{} || p != val.data() + val.size()) r.error = detail::why(val, "the seed is a decimal integer");
      if (!r) return r;
      continue;
    }
    double* slot = key == "loss" ? &r.value.faults.loss
                   : key == "duplicate" ? &r.value.faults.duplicate
                   : key == "reorder" ? &r.value.faults.reorder
                   : key == "corrupt" ? &r.value.faults.corrupt
                   : key == "delay" ? &r.value.faults.delay
                                     : nullptr;
    if (!slot) {
      r.error = detail::why(key, "not one of loss, duplicate, reorder, corrupt, delay, seed");
      return r;
    }
    char* end = nullptr;
    const double v = std::strtod(val.c_str(), &end);
    if (val.empty() || end != val.c_str() + val.size() || !(v >= 0 && v <= 1)) {
      r.error = detail::why(val, "a probability is a number from 0 to 1");
      return r;
    }
    *slot = v;
  }
  return r;
}

/// A port's quality of service as the provider's devices take it.
struct qos_spec {
  rnic::egress_config egress{};  ///< its class model and its ECN (rate and marking are a device process's)
  bool dcqcn = false;            ///< DCQCN's notification and reaction points (spec/qos.md §3)
};

/// Parses PUSHWIRE_VERBS_QOS: SETTING VALUE pairs separated by spaces, the settings of
/// `pushwire-rnicd ctl PATH port set` (rnic::apply_egress) but rate and mark, and `dcqcn on|off`.
inline parsed<qos_spec> parse_qos(std::string_view text) {
  parsed<qos_spec> r;
  const auto w = detail::split(text, " ");
  if (w.size() % 2) {
    r.error = "SETTING VALUE pairs, separated by spaces";
    return r;
  }
  for (std::size_t i = 0; i < w.size(); i += 2) {
    if (w[i] == "dcqcn") {
      if (w[i + 1] != "on" && w[i + 1] != "off") r.error = detail::why(w[i + 1], "dcqcn on or off");
      r.value.dcqcn = w[i + 1] == "on";
    } else if (w[i] == "rate" || w[i] == "mark") {
      r.error = detail::why(w[i], "a device process's setting (pushwire-rnicd --egress)");
    } else if (std::string why = rnic::apply_egress(r.value.egress, w[i], w[i + 1]); !why.empty()) {
      r.error = why;
    }
    if (!r) return r;
  }
  r.error = rnic::check_egress(r.value.egress);
  return r;
}

/// Parses PUSHWIRE_VERBS_PLATFORM: KEY=VALUE settings separated by spaces or commas, applied in
/// order (rnic::apply_platform); the result must be a valid platform (rnic::platform_model::
/// valid: every card on one of its sockets).
inline parsed<rnic::platform_model> parse_platform(std::string_view text) {
  parsed<rnic::platform_model> r;
  for (const auto w : detail::split(text, " ,\t\n")) {
    if (w.empty()) continue;
    const std::size_t eq = w.find('=');
    if (eq == std::string_view::npos) {
      r.error = detail::why(w, "KEY=VALUE");
      return r;
    }
    r.error = rnic::apply_platform(r.value, w.substr(0, eq), w.substr(eq + 1));
    if (!r) return r;
  }
  if (!r.value.valid()) r.error = "a card on no socket of the platform, or the HCA on none, or a rate of 0";
  return r;
}

}  // namespace pushwire::verbs
