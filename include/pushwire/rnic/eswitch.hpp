// The embedded switch of a shared software RNIC (spec/rnicd.md §2, §5): a port's functions (the
// physical function, PF, and virtual functions, VFs), the programs attached to them, and the
// rules a device process applies between its port and their rings:
// - steering: a frame from the wire goes to the attachment whose QPN block holds its destination
//   QPN, if its destination address is one of that function's GIDs; its destination MAC becomes
//   the function's;
// - the spoof check: a frame an attachment sends leaves only with its function's MAC, one of its
//   function's GIDs as source address, UDP source port 4791 (a destination port other than 4791
//   is not RoCEv2: not_roce), a P_Key of its
//   function's table, and, where the frame carries one (DETH), a source QPN of its own block;
// - limits: QPs, MRs, CQs and registered bytes counted per function across its attachments, and
//   a transmit rate (a token bucket) per function;
// - the port's egress (spec/qos.md §5): a rate, traffic classes chosen by DSCP and scheduled by
//   ETS among the functions' rings (which hold the frames until they leave), and ECN marking by
//   the bytes queued;
// - the `ctl` command language (show, vf add, vf del, vf set, port set).
// Sans-IO: frames and commands in, verdicts and text out; time is an argument.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <cstdio>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <arpa/inet.h>

#include <pushwire/ib/gid.hpp>
#include <pushwire/ib/roce.hpp>
#include <pushwire/rnic/attach.hpp>
#include <pushwire/rnic/classes.hpp>
#include <pushwire/rnic/core.hpp>
#include <pushwire/rnic/function.hpp>
#include <pushwire/wire/ethernet.hpp>

namespace pushwire::rnic {

/// A function's limits (spec/rnicd.md §5). rate_bps 0: no rate limit.
struct function_limits {
  std::uint32_t max_qps = 1024, max_mrs = 4096, max_cqs = 1024;
  std::uint64_t max_reg_bytes = std::uint64_t{1} << 40;
  std::uint64_t rate_bps = 0;
  friend bool operator==(const function_limits&, const function_limits&) = default;
};

/// A function's settings: what `vf set` changes.
struct function_settings {
  wire::mac_address mac{};
  /// 1..4 GIDs; GID 0 first. The device process must have a socket for each (its port's
  /// addresses).
  std::vector<ib::gid> gids;
  function_limits limits{};
  /// Trusted: the spoof check is off for its frames (`vf set N trust on`).
  bool trust = false;
  /// The P_Keys it may send with (full-membership form); the default partition only by default.
  std::vector<std::uint16_t> pkeys{0xFFFF};
};

/// Why a frame an attachment sent did not leave (counted per function).
enum class tx_drop : std::uint8_t { not_roce, spoofed_mac, spoofed_ip, spoofed_port, spoofed_pkey, spoofed_qpn };
inline constexpr std::array<wire::named_value, 6> tx_drop_names{{
    {tx_drop::not_roce, "not_roce"}, {tx_drop::spoofed_mac, "spoofed_mac"}, {tx_drop::spoofed_ip, "spoofed_ip"},
    {tx_drop::spoofed_port, "spoofed_port"}, {tx_drop::spoofed_pkey, "spoofed_pkey"}, {tx_drop::spoofed_qpn, "spoofed_qpn"}}};
constexpr std::span<const wire::named_value> wire_enum_names(tx_drop) { return tx_drop_names; }
/// Why a frame from the wire reached no ring (counted per port).
enum class rx_drop_reason : std::uint8_t { not_roce, no_attachment, not_its_address, ring_full };
inline constexpr std::array<wire::named_value, 4> rx_drop_reason_names{{
    {rx_drop_reason::not_roce, "not_roce"}, {rx_drop_reason::no_attachment, "no_attachment"},
    {rx_drop_reason::not_its_address, "not_its_address"}, {rx_drop_reason::ring_full, "ring_full"}}};
constexpr std::span<const wire::named_value> wire_enum_names(rx_drop_reason) { return rx_drop_reason_names; }

struct function_counters {
  std::uint64_t tx_frames = 0, tx_bytes = 0, rx_frames = 0, rx_bytes = 0;
  std::uint64_t rate_waits = 0;  ///< times a frame waited for the rate limit's tokens
  std::array<std::uint64_t, tx_drop_names.size()> tx_drops{};
  std::uint64_t spoofed() const {
    std::uint64_t n = 0;
    for (std::size_t i = 1; i < tx_drops.size(); ++i) n += tx_drops[i];
    return n;
  }
};

/// What the device process is made with.
struct eswitch_config {
  wire::mac_address mac{};    ///< the port's (and the PF's) MAC
  std::vector<ib::gid> gids;  ///< the port's addresses
  std::uint16_t mtu = 4096;
  std::uint32_t vfs = 0;      ///< VFs made at start (1..vfs), each with the port's GIDs
  std::uint32_t slots = fn::default_slots;
  function_limits limits{};   ///< every new function's
  egress_config egress{};     ///< the port's egress (`port set`)
};

/// The port's egress, per traffic class.
struct egress_counters {
  std::uint64_t frames = 0, bytes = 0;
  std::uint64_t marked = 0;  ///< ECT frames it marked CE
};

/// QPN blocks: attachment block k (1..) holds QPNs [k << qpn_block_bits, (k + 1) << qpn_block_bits).
inline constexpr unsigned qpn_block_bits = 14;
inline constexpr std::uint32_t qpn_blocks = 1u << (24 - qpn_block_bits);
/// The most VFs a port has (VF n's default MAC is 02:n:IPv4).
inline constexpr std::uint32_t max_vfs = 127;

/// The default MAC of function n of a port whose IPv4 address is ip: 02:n:ip.
constexpr wire::mac_address function_mac(std::uint32_t n, const std::array<std::uint8_t, 4>& ip) {
  return {0x02, static_cast<std::uint8_t>(n), ip[0], ip[1], ip[2], ip[3]};
}

/// What a device process keeps for a function, as it moves to another device
/// (spec/migration.md): its settings, and each attachment's QPN block and what it holds of the
/// function's limits. The queue pairs are not in it: they live in the programs' engines.
struct function_image {
  struct held {
    std::uint32_t id = 0;  ///< the attachment's QPN block, 1..qpn_blocks-1: the same on the new device
    std::uint32_t pid = 0;
    std::uint64_t qps = 0, mrs = 0, cqs = 0, bytes = 0;
    friend bool operator==(const held&, const held&) = default;
  };
  std::uint16_t function = 0;  ///< its number on the device it leaves, 1..max_vfs
  function_settings settings;
  std::vector<held> attachments;
};

class eswitch {
 public:
  struct attachment {
    std::uint32_t id = 0;  ///< also its QPN block
    std::uint16_t function = 0;
    std::uint32_t pid = 0;
    std::uint64_t qps = 0, mrs = 0, cqs = 0, bytes = 0;  ///< what it holds of the function's limits
    std::uint64_t rx_frames = 0, tx_frames = 0;
    std::uint32_t qpn_first() const { return id << qpn_block_bits; }
  };
  struct function_state {
    function_settings settings;
    function_counters counters;
    std::uint64_t qps = 0, mrs = 0, cqs = 0, bytes = 0;
    double tokens = 0;  ///< rate limit: bytes it may send now
    std::int64_t refilled = -1;
  };

  explicit eswitch(eswitch_config c) : cfg_(std::move(c)) {
    reshape();
    functions_.resize(max_vfs + 1);
    functions_[0] = make_function(0);
    for (std::uint32_t n = 1; n <= std::min(cfg_.vfs, max_vfs); ++n) functions_[n] = make_function(n);
  }
  const eswitch_config& config() const { return cfg_; }

  // ---- the port's egress (spec/qos.md §5) --------------------------------------------------
  /// Whether the device process schedules what leaves the port (a rate or a class model);
  /// without, each ring's frames leave as they come.
  bool shapes() const { return cfg_.egress.rate_bps || cfg_.egress.classes; }
  /// A frame's class: its DSCP through the class model (a device process sees no SL: with
  /// trust pcp every frame has priority 0); 0 without a model.
  std::uint8_t class_of(std::span<const std::byte> frame) const {
    if (!cfg_.egress.classes) return 0;
    return cfg_.egress.classes->class_of(0, ib::traffic_class_of(frame).value_or(0));
  }
  /// The class that sends next among those whose bit is set in `work`: by ETS with a model
  /// (nullopt while their rate limits hold them), else the lowest set.
  std::optional<std::uint8_t> pick(std::uint8_t work, time_ns now) {
    if (!work) return std::nullopt;
    if (ets_) return ets_->pick(work, now);
    return static_cast<std::uint8_t>(std::countr_zero(work));
  }
  /// When a class that `work` names may send again (its rate limit), if none may now.
  std::optional<time_ns> classes_held_until(std::uint8_t work, time_ns now) const {
    std::optional<time_ns> t;
    for (std::uint8_t c = 0; ets_ && c < flow::traffic_classes; ++c)
      if (const auto u = (work >> c & 1) ? ets_->held_until(c, now) : std::nullopt; u && (!t || *u < *t)) t = u;
    return t;
  }
  /// Whether the port's rate lets a frame go at `now`, and when it will.
  bool uplink_ready(time_ns now) const { return uplink_.eligible(now); }
  time_ns uplink_at() const { return uplink_.eligible_at().value_or(0); }
  /// Whether an ECT frame leaving with `queued` bytes behind it is marked CE, for a uniform draw
  /// u in [0, 1).
  bool mark(std::uint64_t queued, double u) const { return cfg_.egress.marking && cfg_.egress.marking->mark(queued, u); }
  /// A frame of class tc left at `now` (marked: it was marked CE).
  void egress_sent(std::uint8_t tc, std::size_t bytes, time_ns now, bool marked) {
    uplink_.sent(bytes, now);
    if (ets_) ets_->sent(tc, bytes, now);
    egress_counters& c = egress_stats_[tc & 7];
    ++c.frames;
    c.bytes += bytes;
    c.marked += marked;
  }
  const std::array<egress_counters, flow::traffic_classes>& egress_stats() const { return egress_stats_; }
  const function_state* function(std::uint32_t n) const { return n < functions_.size() && functions_[n] ? &*functions_[n] : nullptr; }
  const std::map<std::uint32_t, attachment>& attachments() const { return atts_; }
  const attachment* find(std::uint32_t id) const {
    auto it = atts_.find(id);
    return it == atts_.end() ? nullptr : &it->second;
  }
  const std::array<std::uint64_t, rx_drop_reason_names.size()>& rx_drops() const { return rx_drops_; }
  void count_rx_drop(rx_drop_reason r) { ++rx_drops_[static_cast<std::size_t>(r)]; }

  // ---- attachments ----------------------------------------------------------------------
  /// Takes function `f` for a program. Errors: no_such_function, no_attachments_left.
  std::variant<fn_errc, const attachment*> attach(std::uint16_t f, std::uint32_t pid) {
    if (!function(f)) return fn_errc::no_such_function;
    for (std::uint32_t k = 0; k + 1 < qpn_blocks; ++k) {
      const std::uint32_t id = (next_block_ + k - 1) % (qpn_blocks - 1) + 1;
      if (atts_.contains(id)) continue;
      next_block_ = id % (qpn_blocks - 1) + 1;
      attachment& a = atts_[id];
      a.id = id, a.function = f, a.pid = pid;
      return &a;
    }
    return fn_errc::no_attachments_left;
  }
  /// The reply attach() sends (without the header's tag and the GIDs' storage, which `gids` holds).
  ctl::attach_reply reply_for(const attachment& a, std::vector<wire::ip_address<16>>& gids) const {
    const function_settings& s = functions_[a.function]->settings;
    gids.clear();
    for (const ib::gid& g : s.gids) gids.push_back(wire::ip_address<16>{g});
    ctl::attach_reply r{};
    r.header = {ctl::msg_type::attached, fn::version, 0, 0};
    r.attachment = a.id, r.function = a.function, r.mtu = cfg_.mtu, r.mac = s.mac, r.node_guid = ib::node_guid_of(s.mac);
    r.qpn_first = a.qpn_first(), r.qpn_count = 1u << qpn_block_bits, r.slots = cfg_.slots;
    r.max_qps = s.limits.max_qps, r.max_mrs = s.limits.max_mrs, r.max_cqs = s.limits.max_cqs, r.max_reg_bytes = s.limits.max_reg_bytes;
    r.gids = std::span<const wire::ip_address<16>>(gids);
    return r;
  }
  /// The attachment is gone (its program exited or was killed, or broke its ring): what it held
  /// of its function's limits returns, and its QPN block is free.
  void detach(std::uint32_t id) {
    auto it = atts_.find(id);
    if (it == atts_.end()) return;
    if (auto& f = functions_[it->second.function]) {
      f->qps -= it->second.qps, f->mrs -= it->second.mrs, f->cqs -= it->second.cqs, f->bytes -= it->second.bytes;
    }
    atts_.erase(it);
  }
  /// Counts `delta` of `kind` against attachment id's function. Errors: bad_message (no such
  /// attachment or kind, or giving back more than it holds), limit_reached.
  std::optional<fn_errc> reserve(std::uint32_t id, ctl::resource kind, std::int64_t delta) {
    auto it = atts_.find(id);
    if (it == atts_.end()) return fn_errc::bad_message;
    attachment& a = it->second;
    function_state& f = *functions_[a.function];
    const function_limits& l = f.settings.limits;
    std::uint64_t *mine, *total, limit;
    switch (kind) {
      case ctl::resource::qp: mine = &a.qps, total = &f.qps, limit = l.max_qps; break;
      case ctl::resource::mr: mine = &a.mrs, total = &f.mrs, limit = l.max_mrs; break;
      case ctl::resource::cq: mine = &a.cqs, total = &f.cqs, limit = l.max_cqs; break;
      case ctl::resource::bytes: mine = &a.bytes, total = &f.bytes, limit = l.max_reg_bytes; break;
      default: return fn_errc::bad_message;
    }
    if (delta < 0) {
      const std::uint64_t back = static_cast<std::uint64_t>(-(delta + 1)) + 1;
      if (back > *mine) return fn_errc::bad_message;
      *mine -= back, *total -= back;
      return std::nullopt;
    }
    const std::uint64_t more = static_cast<std::uint64_t>(delta);
    if (more > limit || *total > limit - more) return fn_errc::limit_reached;
    *mine += more, *total += more;
    return std::nullopt;
  }

  // ---- the port's addresses ----------------------------------------------------------------
  /// The port takes address g too (a function's own, spec/migration.md §4): functions may be
  /// given it, and frames to it are steered. At most 64 addresses.
  bool add_address(const ib::gid& g) {
    if (std::find(cfg_.gids.begin(), cfg_.gids.end(), g) != cfg_.gids.end()) return true;
    if (cfg_.gids.size() >= 64) return false;
    cfg_.gids.push_back(g);
    return true;
  }
  /// The port gives address g up (not its first). Functions that still list it keep it listed
  /// until they are changed; frames to it are no longer steered.
  void remove_address(const ib::gid& g) {
    if (!cfg_.gids.empty() && cfg_.gids[0] == g) return;
    std::erase(cfg_.gids, g);
  }
  /// Whether a function other than `except` lists address g.
  bool address_in_use(const ib::gid& g, std::uint16_t except) const {
    for (std::size_t n = 0; n < functions_.size(); ++n)
      if (n != except && functions_[n] &&
          std::find(functions_[n]->settings.gids.begin(), functions_[n]->settings.gids.end(), g) != functions_[n]->settings.gids.end())
        return true;
    return false;
  }

  // ---- migration (spec/migration.md) --------------------------------------------------------
  /// The image of VF n, to move it. nullopt: no such VF (the PF stays with its port).
  std::optional<function_image> image_of(std::uint16_t n) const {
    if (n == 0 || !function(n)) return std::nullopt;
    function_image im;
    im.function = n;
    im.settings = functions_[n]->settings;
    for (const auto& [id, a] : atts_)
      if (a.function == n) im.attachments.push_back({id, a.pid, a.qps, a.mrs, a.cqs, a.bytes});
    return im;
  }
  /// Whether an image may become function `as` here; nothing changes. Errors: bad_message (a
  /// function number or QPN block out of range, a block twice, holdings beyond the limits, or
  /// GIDs or P_Keys the settings could not have), function_busy (`as` has programs attached),
  /// qpn_block_taken, address_not_here.
  /// `arriving`: addresses that come with the function (the port takes them when it adopts it).
  std::optional<fn_errc> check_adopt(const function_image& im, std::uint16_t as, std::span<const ib::gid> arriving = {}) const {
    if (as == 0 || as > max_vfs || im.settings.gids.empty() || im.settings.gids.size() > 4 || im.settings.pkeys.empty() ||
        im.settings.pkeys.size() > 16)
      return fn_errc::bad_message;
    std::uint64_t qps = 0, mrs = 0, cqs = 0, bytes = 0;
    for (std::size_t i = 0; i < im.attachments.size(); ++i) {
      const auto& h = im.attachments[i];
      if (h.id == 0 || h.id >= qpn_blocks) return fn_errc::bad_message;
      for (std::size_t j = 0; j < i; ++j)
        if (im.attachments[j].id == h.id) return fn_errc::bad_message;
      qps += h.qps, mrs += h.mrs, cqs += h.cqs, bytes += h.bytes;
      if (bytes < h.bytes) return fn_errc::bad_message;
    }
    const function_limits& l = im.settings.limits;
    if (qps > l.max_qps || mrs > l.max_mrs || cqs > l.max_cqs || bytes > l.max_reg_bytes) return fn_errc::bad_message;
    for (const auto& [id, a] : atts_)
      if (a.function == as) return fn_errc::function_busy;
    for (const auto& h : im.attachments)
      if (atts_.contains(h.id)) return fn_errc::qpn_block_taken;
    for (const ib::gid& g : im.settings.gids)
      if (std::find(cfg_.gids.begin(), cfg_.gids.end(), g) == cfg_.gids.end() &&
          std::find(arriving.begin(), arriving.end(), g) == arriving.end())
        return fn_errc::address_not_here;
    return std::nullopt;
  }
  /// Makes the image function `as` here, with its attachments on their own QPN blocks (a function
  /// `as` without attachments is replaced). Errors: those of check_adopt(), and nothing changed.
  std::optional<fn_errc> adopt(const function_image& im, std::uint16_t as) {
    if (auto e = check_adopt(im, as)) return e;
    function_state f;
    f.settings = im.settings;
    for (const auto& h : im.attachments) {
      attachment& a = atts_[h.id];
      a.id = h.id, a.function = as, a.pid = h.pid, a.qps = h.qps, a.mrs = h.mrs, a.cqs = h.cqs, a.bytes = h.bytes;
      f.qps += h.qps, f.mrs += h.mrs, f.cqs += h.cqs, f.bytes += h.bytes;
    }
    functions_[as] = std::move(f);
    return std::nullopt;
  }
  /// VF n has moved away: it and its attachments are gone from here, its QPN blocks free. Its
  /// programs are not told (they are the new device's now).
  void release(std::uint16_t n) {
    if (n == 0 || !function(n)) return;
    std::erase_if(atts_, [&](const auto& kv) { return kv.second.function == n; });
    functions_[n].reset();
  }

  // ---- the data path ---------------------------------------------------------------------
  /// The spoof check of a frame attachment `id` sent: nullopt when it may leave.
  std::optional<tx_drop> check_tx(std::uint32_t id, std::span<const std::byte> frame) {
    auto it = atts_.find(id);
    if (it == atts_.end()) return tx_drop::not_roce;
    function_state& f = *functions_[it->second.function];
    ib::roce_view v;
    std::optional<tx_drop> drop;
    if (ib::inspect(frame, v, {.crc = wire::crc_check::skip}).code != wire::errc{} || v.has_vlan) drop = tx_drop::not_roce;
    else if (!f.settings.trust) drop = spoof_check(it->second, f.settings, v);
    if (drop) ++f.counters.tx_drops[static_cast<std::size_t>(*drop)];
    else {
      ++f.counters.tx_frames, f.counters.tx_bytes += frame.size();
      ++it->second.tx_frames;
    }
    return drop;
  }
  /// Whether function `n` may send `bytes` more at `now` (ns) under its rate limit; takes the
  /// tokens when it may. A frame that may not waits in its ring (the caller tries again).
  bool admit(std::uint16_t n, std::size_t bytes, std::int64_t now) {
    function_state& f = *functions_[n];
    const std::uint64_t rate = f.settings.limits.rate_bps;
    if (rate == 0) return true;
    const double per_ns = static_cast<double>(rate) / 8e9;
    const double burst = std::max(64.0 * 1024, per_ns * 1e6);  // 1 ms of the rate, at least 64 KiB
    if (f.refilled < 0) f.tokens = burst, f.refilled = now;
    f.tokens = std::min(burst, f.tokens + per_ns * static_cast<double>(now - f.refilled));
    f.refilled = now;
    if (f.tokens < static_cast<double>(bytes)) {
      ++f.counters.rate_waits;
      return false;
    }
    f.tokens -= static_cast<double>(bytes);
    return true;
  }
  /// When function n's next `bytes` are admitted (ns from now), for a sleep's timeout.
  std::int64_t rate_wait(std::uint16_t n, std::size_t bytes) const {
    const function_state& f = *functions_[n];
    const std::uint64_t rate = f.settings.limits.rate_bps;
    if (rate == 0 || f.tokens >= static_cast<double>(bytes)) return 0;
    return static_cast<std::int64_t>((static_cast<double>(bytes) - f.tokens) * 8e9 / static_cast<double>(rate)) + 1;
  }
  /// Where a frame from the wire goes: the attachment id, or why nowhere. Writes the function's
  /// MAC as the frame's destination.
  std::variant<rx_drop_reason, std::uint32_t> steer(std::span<std::byte> frame) {
    auto r = route(frame);
    if (auto* why = std::get_if<rx_drop_reason>(&r)) {
      count_rx_drop(*why);
      return r;
    }
    attachment& a = atts_.at(std::get<std::uint32_t>(r));
    function_state& f = *functions_[a.function];
    std::copy(f.settings.mac.begin(), f.settings.mac.end(), reinterpret_cast<std::uint8_t*>(frame.data()));
    ++a.rx_frames;
    ++f.counters.rx_frames, f.counters.rx_bytes += frame.size();
    return r;
  }
  /// Whether a RoCEv2 frame is addressed to one of the port's own addresses (it goes to a
  /// function of this port without leaving it).
  bool is_local(std::span<const std::byte> frame) const {
    ib::roce_view v;
    if (ib::inspect(frame, v, {.crc = wire::crc_check::skip}).code != wire::errc{}) return false;
    return std::find(cfg_.gids.begin(), cfg_.gids.end(), v.destination_gid()) != cfg_.gids.end();
  }
  /// A frame the attachment's ring had no room for: its function's count goes back.
  void unsteer(std::uint32_t id, std::size_t bytes) {
    attachment& a = atts_.at(id);
    --a.rx_frames;
    function_state& f = *functions_[a.function];
    --f.counters.rx_frames, f.counters.rx_bytes -= bytes;
    count_rx_drop(rx_drop_reason::ring_full);
  }

  // ---- ctl -------------------------------------------------------------------------------
  /// Runs a `ctl` command (its words); the text to print, or the reason it was refused (with a
  /// line of detail in `out`).
  std::optional<fn_errc> command(const std::vector<std::string_view>& w, std::string& out) {
    out.clear();
    if (w.empty() || w[0] == "show") {
      show(out, w.size() > 1 && w[1] == "--json");
      return std::nullopt;
    }
    if (w[0] == "port") {
      if (w.size() < 4 || w[1] != "set" || w.size() % 2) return bad(out, "port set SETTING VALUE...");
      if (auto e = set_egress(w, 2, out)) return e;
      out = "port set\n";
      return std::nullopt;
    }
    if (w[0] != "vf" || w.size() < 3) return bad(out, "commands: show [--json] | vf add N [SETTING VALUE...] | vf del N | vf set N SETTING VALUE... | port set SETTING VALUE... | migrate N --to SOCKET");
    std::uint32_t n = 0;
    if (!number(w[2], n) || n == 0 || n > max_vfs) return bad(out, "a VF is numbered 1..127");
    if (w[1] == "add") {
      if (functions_[n]) {
        out = "VF " + std::to_string(n) + " exists";
        return fn_errc::function_exists;
      }
      function_state f = make_function(n);
      if (auto e = apply(f.settings, w, 3, out)) return e;
      functions_[n] = std::move(f);
      out = "VF " + std::to_string(n) + " added\n";
      return std::nullopt;
    }
    if (!functions_[n]) {
      out = "no VF " + std::to_string(n);
      return fn_errc::no_such_function;
    }
    if (w[1] == "del") {
      for (const auto& [id, a] : atts_)
        if (a.function == n) {
          out = "VF " + std::to_string(n) + " has programs attached (pid " + std::to_string(a.pid) + ")";
          return fn_errc::function_busy;
        }
      functions_[n].reset();
      out = "VF " + std::to_string(n) + " deleted\n";
      return std::nullopt;
    }
    if (w[1] == "set") {
      function_settings s = functions_[n]->settings;
      if (w.size() < 5) return bad(out, "vf set N SETTING VALUE...");
      if (auto e = apply(s, w, 3, out)) return e;
      functions_[n]->settings = std::move(s);
      out = "VF " + std::to_string(n) + " set\n";
      return std::nullopt;
    }
    return bad(out, "vf add | vf del | vf set");
  }
  /// Applies the egress settings w[from..] (pairs of SETTING VALUE, classes.hpp's
  /// apply_egress), all or none.
  std::optional<fn_errc> set_egress(const std::vector<std::string_view>& w, std::size_t from, std::string& out) {
    egress_config e = cfg_.egress;
    for (std::size_t i = from; i + 1 < w.size(); i += 2) {
      if (w[i] == "ecn") return bad(out, "ecn: each program's (PUSHWIRE_VERBS_QOS): the device process keeps the ECN frames come with");
      if (std::string why = apply_egress(e, w[i], w[i + 1]); !why.empty()) return bad(out, why);
    }
    if (std::string why = check_egress(e); !why.empty()) return bad(out, why);
    cfg_.egress = std::move(e);
    reshape();
    return std::nullopt;
  }
  /// The same settings for the PF (the device process's own options).
  std::optional<fn_errc> set_pf(const std::vector<std::string_view>& w, std::string& out) {
    function_settings s = functions_[0]->settings;
    if (auto e = apply(s, w, 0, out)) return e;
    functions_[0]->settings = std::move(s);
    return std::nullopt;
  }

 private:
  function_state make_function(std::uint32_t n) const {
    function_state f;
    const ib::gid g = cfg_.gids.empty() ? ib::gid{} : cfg_.gids[0];
    f.settings.mac = n == 0 ? cfg_.mac : function_mac(n, ib::v4_of(g));
    f.settings.gids = cfg_.gids;
    f.settings.limits = cfg_.limits;
    return f;
  }
  static std::optional<fn_errc> bad(std::string& out, std::string_view why) {
    out = std::string(why);
    return fn_errc::bad_setting;
  }
  template <class T>
  static bool number(std::string_view s, T& v) {
    return parse_number(s, v);
  }
  /// A rate: bits per second, with an optional K, M or G (powers of 1000).
  static bool rate(std::string_view s, std::uint64_t& v) { return parse_rate(s, v); }
  static bool mac(std::string_view s, wire::mac_address& m) {
    if (s.size() != 17) return false;
    for (std::size_t i = 0; i < 6; ++i) {
      if (i && s[i * 3 - 1] != ':') return false;
      unsigned b = 0;
      const auto [p, ec] = std::from_chars(s.data() + i * 3, s.data() + i * 3 + 2, b, 16);
      if (ec != std::errc{} || p != s.data() + i * 3 + 2) return false;
      m[i] = static_cast<std::uint8_t>(b);
    }
    return (m[0] & 1) == 0;  // not a group address
  }
  /// Settings from words[from...] as SETTING VALUE pairs.
  std::optional<fn_errc> apply(function_settings& s, const std::vector<std::string_view>& w, std::size_t from, std::string& out) const {
    if ((w.size() - from) % 2) return bad(out, "settings are SETTING VALUE pairs");
    for (std::size_t i = from; i < w.size(); i += 2) {
      const std::string_view k = w[i], v = w[i + 1];
      std::uint64_t x = 0;
      if (k == "mac") {
        if (!mac(v, s.mac)) return bad(out, "mac: six hex octets, 02:00:c6:12:00:01, not a group address");
      } else if (k == "gid") {  // one address or several, comma-separated: the port's
        std::vector<ib::gid> gids;
        std::size_t at = 0;
        while (at <= v.size()) {
          const std::size_t comma = std::min(v.find(',', at), v.size());
          const auto g = gid_of(v.substr(at, comma - at));
          if (!g || std::find(cfg_.gids.begin(), cfg_.gids.end(), *g) == cfg_.gids.end()) return bad(out, "gid: one of the port's addresses (--port)");
          gids.push_back(*g);
          at = comma + 1;
        }
        if (gids.empty() || gids.size() > 4) return bad(out, "gid: 1..4 addresses");
        s.gids = gids;
      } else if (k == "max_qps" || k == "max_mrs" || k == "max_cqs") {
        if (!number(v, x) || x > 1u << qpn_block_bits) return bad(out, "max_qps, max_mrs, max_cqs: 0..16384");
        (k == "max_qps" ? s.limits.max_qps : k == "max_mrs" ? s.limits.max_mrs : s.limits.max_cqs) = static_cast<std::uint32_t>(x);
      } else if (k == "max_bytes") {
        if (!number(v, s.limits.max_reg_bytes)) return bad(out, "max_bytes: bytes");
      } else if (k == "rate") {
        if (!rate(v, s.limits.rate_bps)) return bad(out, "rate: bits per second (K, M, G: powers of 1000), 0 unlimited");
      } else if (k == "trust") {
        if (v != "on" && v != "off") return bad(out, "trust: on or off");
        s.trust = v == "on";
      } else if (k == "pkey") {
        std::vector<std::uint16_t> keys;
        std::size_t at = 0;
        while (at <= v.size()) {
          const std::size_t comma = std::min(v.find(',', at), v.size());
          std::string_view one = v.substr(at, comma - at);
          if (one.starts_with("0x")) one.remove_prefix(2);
          unsigned p = 0;
          const auto [end, ec] = std::from_chars(one.data(), one.data() + one.size(), p, 16);
          if (ec != std::errc{} || end != one.data() + one.size() || p > 0xFFFF || (p & 0x7FFF) == 0) return bad(out, "pkey: hex P_Keys, comma-separated");
          keys.push_back(static_cast<std::uint16_t>(p));
          at = comma + 1;
        }
        if (keys.empty() || keys.size() > 16) return bad(out, "pkey: 1..16 keys");
        s.pkeys = keys;
      } else {
        return bad(out, "settings: mac, gid, max_qps, max_mrs, max_cqs, max_bytes, rate, trust, pkey");
      }
    }
    return std::nullopt;
  }

 public:
  /// An IPv4-mapped GID as a.b.c.d, another as RFC 5952 text (inet_ntop).
  static std::string text_of(const ib::gid& g) {
    char b[INET6_ADDRSTRLEN];
    if (ib::is_v4(g)) return ::inet_ntop(AF_INET, g.data() + 12, b, sizeof b) ? b : "";
    return ::inet_ntop(AF_INET6, g.data(), b, sizeof b) ? b : "";
  }
  /// A GID from IPv4 (mapped) or IPv6 text in any form inet_pton takes.
  static std::optional<ib::gid> gid_of(std::string_view text) {
    if (text.empty() || text.size() >= INET6_ADDRSTRLEN) return std::nullopt;
    char z[INET6_ADDRSTRLEN] = {};
    std::copy(text.begin(), text.end(), z);
    ib::gid g{};
    std::array<std::uint8_t, 4> v4{};
    if (::inet_pton(AF_INET, z, v4.data()) == 1) return ib::gid_v4(v4);
    if (::inet_pton(AF_INET6, z, g.data()) == 1) return g;
    return std::nullopt;
  }

 private:
  static std::string mac_text(const wire::mac_address& m) {
    char b[24];
    std::snprintf(b, sizeof b, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5]);
    return b;
  }
  void show(std::string& out, bool json) const {
    // Built by appending (g++-12 -O3 warns falsely on chained string +).
    std::string s;
    auto put = [&s](const auto&... xs) { (s.append(xs), ...); };
    auto num = [](std::uint64_t v) { return std::to_string(v); };
    auto fname = [&](std::uint32_t n) { return n ? "vf" + num(n) : std::string("pf"); };
    if (json) put("{\"functions\":[");
    bool first = true;
    for (std::uint32_t n = 0; n < functions_.size(); ++n) {
      if (!functions_[n]) continue;
      const function_state& f = *functions_[n];
      const function_settings& st = f.settings;
      const function_limits& l = st.limits;
      std::string gids, pkeys;
      for (const ib::gid& g : st.gids) {
        if (!gids.empty()) gids += ',';
        gids += text_of(g);
      }
      for (std::uint16_t p : st.pkeys) {
        char b[8];
        std::snprintf(b, sizeof b, "0x%04x", p);
        if (!pkeys.empty()) pkeys += ',';
        pkeys += b;
      }
      std::uint32_t attached = 0;
      for (const auto& [id, a] : atts_) attached += a.function == n;
      const function_counters& c = f.counters;
      if (json) {
        put(first ? "" : ",", "{\"function\":", num(n), ",\"name\":\"", fname(n), "\",\"mac\":\"", mac_text(st.mac), "\",\"gids\":\"", gids,
            "\",\"trust\":", st.trust ? "true" : "false", ",\"pkeys\":\"", pkeys, "\"");
        put(",\"max_qps\":", num(l.max_qps), ",\"max_mrs\":", num(l.max_mrs), ",\"max_cqs\":", num(l.max_cqs), ",\"max_bytes\":",
            num(l.max_reg_bytes), ",\"rate\":", num(l.rate_bps));
        put(",\"qps\":", num(f.qps), ",\"mrs\":", num(f.mrs), ",\"cqs\":", num(f.cqs), ",\"bytes\":", num(f.bytes), ",\"attached\":",
            num(attached));
        put(",\"tx_frames\":", num(c.tx_frames), ",\"tx_bytes\":", num(c.tx_bytes), ",\"rx_frames\":", num(c.rx_frames), ",\"rx_bytes\":",
            num(c.rx_bytes), ",\"rate_waits\":", num(c.rate_waits));
        for (std::size_t i = 0; i < tx_drop_names.size(); ++i) put(",\"", tx_drop_names[i].name, "\":", num(c.tx_drops[i]));
        put("}");
      } else {
        put(fname(n), ": mac ", mac_text(st.mac), " gid ", gids, " trust ", st.trust ? "on" : "off", " pkey ", pkeys, "\n");
        put("    limits qps ", num(f.qps), "/", num(l.max_qps), " mrs ", num(f.mrs), "/", num(l.max_mrs), " cqs ", num(f.cqs), "/",
            num(l.max_cqs), " bytes ", num(f.bytes), "/", num(l.max_reg_bytes), " rate ",
            l.rate_bps ? num(l.rate_bps) + " b/s" : std::string("unlimited"), "\n");
        put("    attached ", num(attached), " tx ", num(c.tx_frames), " frames ", num(c.tx_bytes), " bytes, rx ", num(c.rx_frames), " frames ",
            num(c.rx_bytes), " bytes, rate waits ", num(c.rate_waits), "\n    drops");
        for (std::size_t i = 0; i < tx_drop_names.size(); ++i) put(" ", tx_drop_names[i].name, " ", num(c.tx_drops[i]));
        put("\n");
      }
      first = false;
    }
    if (json) {
      put("],\"attachments\":[");
      first = true;
      for (const auto& [id, a] : atts_) {
        put(first ? "" : ",", "{\"id\":", num(id), ",\"function\":", num(a.function), ",\"pid\":", num(a.pid), ",\"qpn_first\":",
            num(a.qpn_first()), ",\"qps\":", num(a.qps), ",\"tx_frames\":", num(a.tx_frames), ",\"rx_frames\":", num(a.rx_frames), "}");
        first = false;
      }
      put("],\"rx_drops\":{");
      for (std::size_t i = 0; i < rx_drops_.size(); ++i) put(i ? "," : "", "\"", rx_drop_reason_names[i].name, "\":", num(rx_drops_[i]));
      put("},\"egress\":{\"rate\":", num(cfg_.egress.rate_bps), ",\"classes\":", cfg_.egress.classes ? "true" : "false", ",\"tc\":[");
      for (std::uint8_t tc = 0; tc < flow::traffic_classes; ++tc)
        put(tc ? "," : "", "{\"frames\":", num(egress_stats_[tc].frames), ",\"bytes\":", num(egress_stats_[tc].bytes), ",\"marked\":",
            num(egress_stats_[tc].marked), "}");
      put("]}}\n");
    } else {
      for (const auto& [id, a] : atts_)
        put("attachment ", num(id), ": ", fname(a.function), " pid ", num(a.pid), " qpns ", num(a.qpn_first()), ".. qps ", num(a.qps), " tx ",
            num(a.tx_frames), " rx ", num(a.rx_frames), "\n");
      put("port: rx drops");
      for (std::size_t i = 0; i < rx_drops_.size(); ++i) put(" ", rx_drop_reason_names[i].name, " ", num(rx_drops_[i]));
      put("\n");
      const egress_config& e = cfg_.egress;
      put("port: rate ", e.rate_bps ? num(e.rate_bps) + " b/s" : std::string("unlimited"), " ecn ", std::string{wire::enum_name(e.ecn)}, " mark ",
          e.marking ? num(e.marking->kmin) + "," + num(e.marking->kmax) + "," + std::to_string(e.marking->pmax) : std::string("off"), " classes ",
          e.classes ? (e.classes->trust == flow::trust::pcp ? "trust pcp" : "trust dscp") : "off", "\n");
      for (std::uint8_t tc = 0; tc < flow::traffic_classes; ++tc) {
        const egress_counters& c = egress_stats_[tc];
        if (!e.classes && tc) break;
        put("  tc ", num(tc));
        if (e.classes) {
          const flow::tc_config& t = e.classes->tc[tc];
          put(" ", std::string{wire::enum_name(t.tsa)}, " ", num(t.weight), "% ratelimit ", t.rate_limit ? num(t.rate_limit) : std::string("none"));
        }
        put(" tx ", num(c.frames), " frames ", num(c.bytes), " bytes, marked ", num(c.marked), "\n");
      }
    }
    out = std::move(s);
  }

  std::variant<rx_drop_reason, std::uint32_t> route(std::span<const std::byte> frame) const {
    ib::roce_view v;
    if (ib::inspect(frame, v, {.crc = wire::crc_check::skip}).code != wire::errc{}) return rx_drop_reason::not_roce;
    const std::uint32_t qpn = wire::read<ib::bth, "destqp">(frame.data() + v.bth_offset);
    auto it = atts_.find(qpn >> qpn_block_bits);
    if (it == atts_.end()) return rx_drop_reason::no_attachment;
    const function_settings& s = functions_[it->second.function]->settings;
    if (std::find(s.gids.begin(), s.gids.end(), v.destination_gid()) == s.gids.end()) return rx_drop_reason::not_its_address;
    return it->first;
  }
  static std::optional<tx_drop> spoof_check(const attachment& a, const function_settings& s, const ib::roce_view& v) {
    const auto src_mac = wire::read<wire::eth_header, "src">(v.frame.data());
    if (src_mac != s.mac) return tx_drop::spoofed_mac;
    if (std::find(s.gids.begin(), s.gids.end(), v.source_gid()) == s.gids.end()) return tx_drop::spoofed_ip;
    if (wire::read<ib::udp_header, "srcport">(v.frame.data() + v.udp_offset) != ib::roce_port) return tx_drop::spoofed_port;
    const std::uint16_t pkey = wire::read<ib::bth, "p_key">(v.frame.data() + v.bth_offset);
    if (std::find(s.pkeys.begin(), s.pkeys.end(), pkey) == s.pkeys.end()) return tx_drop::spoofed_pkey;
    if (const auto d = v.get<ib::ext::deth>(); d && (d->srcqp >> qpn_block_bits) != a.id) return tx_drop::spoofed_qpn;
    return std::nullopt;
  }

  /// The port's scheduler and rate from cfg_.egress (anew: credits are forgotten).
  void reshape() {
    const egress_config& e = cfg_.egress;
    ets_.reset();
    if (e.classes) ets_.emplace(e.classes->tc);
    uplink_ = flow::rate_limiter(e.rate_bps, 64 * 1024);
  }

  eswitch_config cfg_;
  std::optional<flow::ets_scheduler> ets_;
  flow::rate_limiter uplink_;
  std::array<egress_counters, flow::traffic_classes> egress_stats_{};
  std::vector<std::optional<function_state>> functions_;
  std::map<std::uint32_t, attachment> atts_;
  std::uint32_t next_block_ = 1;
  std::array<std::uint64_t, rx_drop_reason_names.size()> rx_drops_{};
};

}  // namespace pushwire::rnic
