// LAN emulation over the fabric (seed 000; spec/pp.md §8): N members on one fabric see each
// other as Ethernet peers. Each member owns one UD queue pair; its interface's MAC is
// ib::mac_from_lid(its LID, that QPN), so the IP stack's own ARP maps an address to (LID, QPN):
// - a unicast frame is one UD SEND straight to the QP its destination MAC names;
// - a broadcast or multicast frame is one UD SEND to every live member;
// - a received frame is delivered only when its source MAC is the sender's own (LID, QPN) form.
// Membership: every member sends a lan_hello (its LID, QPN, incarnation) to every configured
// peer every hello_interval (the CM's UDP port, pp/cm.hpp); a member silent for dead_after is
// gone. A LID names one fabric address: a hello claiming a LID another address holds is refused.
// Sans-IO: the caller carries hellos and drives the device; time is an argument.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include <pushwire/ib/lan.hpp>
#include <pushwire/rnic/connect.hpp>

namespace pushwire::pp {

/// The Q_Key every member's UD QP takes ("PWLN").
inline constexpr std::uint32_t lan_qkey = 0x50574C4Eu;

/// A member's announcement, sent to every peer's CM port every hello_interval.
struct lan_hello {
  PUSHWIRE_STRUCT(lan_hello,
      /// "PWLN"
      (wire::constant<std::uint32_t, 0x50574C4Eu, wire::errc::invalid_field>, magic),
      /// 1
      (wire::constant<std::uint16_t, 1, wire::errc::unsupported_version>, version),
      /// The sender's LID: unicast, 0x0001..0xBFFF.
      (std::uint16_t, lid),
      /// The sender's UD QP number (24 bits).
      (std::uint32_t, qpn),
      /// Random, nonzero, fixed for the sender's life; a new one means it restarted.
      (std::uint64_t, incarnation));
  static constexpr wire::error wire_check(const lan_hello& h) {
    if (h.lid < ib::lid_unicast_first || h.lid > ib::lid_unicast_last) return wire::field_error<lan_hello>(wire::errc::invalid_field, "lid");
    if (h.qpn > 0xFFFFFF) return wire::field_error<lan_hello>(wire::errc::invalid_field, "qpn");
    if (h.incarnation == 0) return wire::field_error<lan_hello>(wire::errc::invalid_field, "incarnation");
    return {};
  }
};
inline constexpr std::size_t lan_hello_size = wire::fixed_size<lan_hello>;

/// Why a frame was not sent, or a received one not delivered. 0 is never an error.
enum class lan_errc : std::uint8_t {
  runt = 1,        ///< shorter than an Ethernet header (14 bytes)
  too_large,       ///< longer than max_frame() (the port's MTU: a UD message is one packet)
  no_route,        ///< unicast to a MAC that names no live member's (LID, QPN)
  no_members,      ///< broadcast or multicast with no live member
  would_block,     ///< not enough free send slots for every copy: nothing was sent
  device_error,    ///< the RNIC refused a post
  unknown_sender,  ///< received: the source address and QP are no live member's
  spoofed_source,  ///< received: the frame's source MAC is not its sender's (LID, QPN) form
  not_for_us,      ///< received: unicast to another MAC
  bad_completion,  ///< received: an error completion, or no network header (GRH)
};
inline constexpr std::array<wire::errc_info, 10> lan_errc_table{{
    {"runt", "Shorter than an Ethernet header (14 bytes)."},
    {"too_large", "Longer than max_frame(): the port's MTU, since a UD message is one packet."},
    {"no_route", "Unicast to a MAC that names no live member's (LID, QPN): not the LID form, an unknown LID, or a member's old QPN."},
    {"no_members", "Broadcast or multicast while no member is live."},
    {"would_block", "Fewer free send slots than copies to send: nothing was sent."},
    {"device_error", "The RNIC refused a post or a setup call."},
    {"unknown_sender", "Received from a fabric address and QP that are no live member's: dropped."},
    {"spoofed_source", "Received with a source MAC other than its sender's (LID, QPN) form: dropped."},
    {"not_for_us", "Received unicast to a MAC other than this member's: dropped."},
    {"bad_completion", "Received with an error completion or without a network header: dropped."},
}};
constexpr std::span<const wire::named_value> wire_enum_names(lan_errc) { return wire::detail::error_names<lan_errc_table>; }
constexpr std::string_view name(lan_errc e) { return wire::error_name(e); }

struct lan_config {
  std::uint16_t lid = 1;             ///< this member's LID, unicast
  std::uint64_t incarnation = 1;     ///< nonzero; a restarted process takes a new one
  std::uint32_t receives = 256;      ///< UD receives kept posted: 1..4096
  std::uint32_t send_slots = 256;    ///< frames in flight (a broadcast holds one): 1..1024
  std::size_t max_members = 64;      ///< live members besides this one
  rnic::time_ns hello_interval = 100'000'000;
  rnic::time_ns dead_after = 600'000'000;
};

struct lan_counters {
  std::uint64_t frames_out = 0, frames_in = 0, copies_out = 0, broadcasts_out = 0;
  std::uint64_t joined = 0, left = 0, restarted = 0;
  std::uint64_t bad_hellos = 0, lid_conflicts = 0, members_full = 0;
  std::array<std::uint64_t, 11> refused{};  ///< by lan_errc (index = value)
};

/// A live member: where it is and what it said.
struct lan_member {
  std::array<std::uint8_t, 16> gid{};
  std::uint16_t lid = 0;
  std::uint32_t qpn = 0, ah = 0;
  std::uint64_t incarnation = 0;
  rnic::time_ns last_heard = 0;
};

class lan {
 public:
  /// What on_hello did.
  enum class heard : std::uint8_t { refreshed, joined, restarted, refused };

  /// A member on `dev`'s `port` (the device must outlive it); check ok(). `deliver` gets each
  /// frame accepted (valid during the call; called from poll() only).
  lan(rnic::device& dev, const lan_config& cfg, std::function<void(std::span<const std::byte>)> deliver, std::size_t port = 0)
      : dev_(dev), cfg_(cfg), deliver_(std::move(deliver)), port_(port) {
    ok_ = setup();
  }
  lan(const lan&) = delete;
  lan& operator=(const lan&) = delete;
  ~lan() {
    if (qpn_) (void)dev_.destroy_qp(qpn_);
    if (mr_.lkey) (void)dev_.dereg_mr(mr_.lkey);
    for (std::uint32_t c : {send_cq_, recv_cq_})
      if (c) (void)dev_.destroy_cq(c);
    if (pd_) (void)dev_.dealloc_pd(*pd_);
  }

  bool ok() const { return ok_; }
  const lan_config& config() const { return cfg_; }
  std::uint32_t qpn() const { return qpn_; }
  /// This member's MAC: the interface takes it.
  wire::mac_address mac() const { return mac_; }
  /// The largest frame: the port's MTU (a UD message is one packet).
  std::uint32_t max_frame() const { return dev_.config().ports[port_].mtu; }
  lan_hello hello() const { return {.lid = cfg_.lid, .qpn = qpn_, .incarnation = cfg_.incarnation}; }
  const std::vector<lan_member>& members() const { return members_; }
  const lan_counters& stats() const { return stats_; }
  /// Send slots now free.
  std::uint32_t free_slots() const { return static_cast<std::uint32_t>(free_.size()); }

  /// A datagram from fabric address `from` (an IPv4-mapped or IPv6 GID) on the CM port.
  heard on_hello(std::span<const std::byte> bytes, const std::array<std::uint8_t, 16>& from, rnic::time_ns now) {
    const auto h = wire::decode<lan_hello>(bytes);
    if (!h) return ++stats_.bad_hellos, heard::refused;
    if (h->lid == cfg_.lid || owner_of_lid(h->lid, from)) return ++stats_.lid_conflicts, heard::refused;
    for (lan_member& m : members_)
      if (m.gid == from) {
        m.last_heard = now;
        if (m.incarnation == h->incarnation && m.qpn == h->qpn && m.lid == h->lid) return heard::refreshed;
        m.incarnation = h->incarnation, m.qpn = h->qpn, m.lid = h->lid;
        ++stats_.restarted;
        return heard::restarted;
      }
    if (members_.size() >= cfg_.max_members) return ++stats_.members_full, heard::refused;
    const auto ah = ah_for(from);
    if (!ah) return heard::refused;
    members_.push_back({.gid = from, .lid = h->lid, .qpn = h->qpn, .ah = *ah, .incarnation = h->incarnation, .last_heard = now});
    ++stats_.joined;
    return heard::joined;
  }
  /// Forgets members silent for dead_after; returns how many left.
  std::size_t tick(rnic::time_ns now) {
    const std::size_t before = members_.size();
    std::erase_if(members_, [&](const lan_member& m) { return now - m.last_heard > cfg_.dead_after; });
    stats_.left += before - members_.size();
    return before - members_.size();
  }

  /// When tick() next has work: the earliest time a member would be silent for dead_after.
  std::optional<rnic::time_ns> next_deadline() const {
    std::optional<rnic::time_ns> t;
    for (const lan_member& m : members_)
      if (!t || m.last_heard + cfg_.dead_after + 1 < *t) t = m.last_heard + cfg_.dead_after + 1;
    return t;
  }

  /// Sends one Ethernet frame (destination MAC first): unicast to the member its MAC names,
  /// broadcast and multicast to every live member. All copies or none.
  lan_errc send_frame(std::span<const std::byte> frame) {
    if (frame.size() < wire::eth_header_size) return refuse(lan_errc::runt);
    if (frame.size() > max_frame()) return refuse(lan_errc::too_large);
    wire::mac_address dst;
    for (std::size_t i = 0; i < 6; ++i) dst[i] = std::to_integer<std::uint8_t>(frame[i]);
    const bool group = (dst[0] & 1) != 0;
    std::array<const lan_member*, 1> one{};
    std::span<const lan_member* const> to;
    std::vector<const lan_member*>& all = scratch_;
    if (group) {
      if (members_.empty()) return refuse(lan_errc::no_members);
      all.clear();
      for (const lan_member& m : members_) all.push_back(&m);
      to = all;
    } else {
      const auto lq = ib::lid_from_mac(dst);
      const lan_member* m = lq ? member_of_lid(lq->lid) : nullptr;
      if (!m || m->qpn != lq->qpn) return refuse(lan_errc::no_route);
      one[0] = m;
      to = one;
    }
    if (free_.empty() || in_flight_ + to.size() > sq_depth) return refuse(lan_errc::would_block);
    const std::uint32_t slot = free_.back();
    free_.pop_back();
    std::memcpy(slot_buf(slot).data(), frame.data(), frame.size());
    slot_users_[slot] = 0;
    const rnic::sge s{addr(slot_buf(slot).data()), static_cast<std::uint32_t>(frame.size()), mr_.lkey};
    for (const lan_member* m : to) {
      const rnic::errc e = dev_.post_send(qpn_, {.wr_id = slot, .opcode = rnic::wr_opcode::send, .sg_list = {&s, 1},
                                                 .ah = m->ah, .remote_qpn = m->qpn, .remote_qkey = lan_qkey});
      if (e != rnic::errc{}) {
        if (slot_users_[slot] == 0) free_.push_back(slot);
        return refuse(lan_errc::device_error);
      }
      ++slot_users_[slot];
      ++in_flight_;
      ++stats_.copies_out;
    }
    ++stats_.frames_out;
    if (group) ++stats_.broadcasts_out;
    return {};
  }

  /// Takes the device's completions: frees send slots, delivers accepted frames and posts
  /// their receives again. Returns the completions taken.
  std::size_t poll() {
    std::array<rnic::work_completion, 64> wc;
    std::size_t total = 0;
    for (std::size_t n; (n = send_cq_mem_.poll(wc)) > 0;) {
      total += n;
      for (std::size_t i = 0; i < n; ++i) {
        const auto slot = static_cast<std::uint32_t>(wc[i].wr_id);
        if (in_flight_ > 0) --in_flight_;
        if (slot < slot_users_.size() && slot_users_[slot] > 0 && --slot_users_[slot] == 0) free_.push_back(slot);
      }
    }
    for (std::size_t n; (n = recv_cq_mem_.poll(wc)) > 0;) {
      total += n;
      for (std::size_t i = 0; i < n; ++i) {
        const auto k = static_cast<std::uint32_t>(wc[i].wr_id);
        if (wc[i].status == rnic::wc_status::flushed) continue;  // the QP is going away
        receive(wc[i], recv_buf(k));
        (void)post_recv(k);
      }
    }
    return total;
  }

 private:
  static std::uint64_t addr(const std::byte* p) { return reinterpret_cast<std::uintptr_t>(p); }
  std::size_t recv_size() const { return rnic::device::grh_size + max_frame(); }
  std::span<std::byte> recv_buf(std::uint32_t k) { return std::span(arena_).subspan(std::size_t{k} * recv_size(), recv_size()); }
  std::span<std::byte> slot_buf(std::uint32_t s) {
    return std::span(arena_).subspan(std::size_t{cfg_.receives} * recv_size() + std::size_t{s} * max_frame(), max_frame());
  }
  lan_errc refuse(lan_errc e) {
    ++stats_.refused[static_cast<std::size_t>(e)];
    return e;
  }
  const lan_member* member_of_lid(std::uint16_t lid) const {
    for (const lan_member& m : members_)
      if (m.lid == lid) return &m;
    return nullptr;
  }
  bool owner_of_lid(std::uint16_t lid, const std::array<std::uint8_t, 16>& from) const {
    const lan_member* m = member_of_lid(lid);
    return m && m->gid != from;
  }
  std::optional<std::uint32_t> ah_for(const std::array<std::uint8_t, 16>& gid) {
    for (const auto& [g, ah] : ahs_)
      if (g == gid) return ah;
    rnic::address_vector av{.port = static_cast<std::uint8_t>(port_), .dgid = gid};
    const auto ah = dev_.create_ah(*pd_, av);
    if (!ah) return std::nullopt;
    ahs_.emplace_back(gid, *ah);
    return *ah;
  }
  void receive(const rnic::work_completion& wc, std::span<const std::byte> buf) {
    constexpr std::uint32_t grh = rnic::device::grh_size;
    if (wc.status != rnic::wc_status::success || !wc.grh || wc.byte_len < grh + wire::eth_header_size || wc.byte_len > buf.size()) {
      refuse(lan_errc::bad_completion);
      return;
    }
    // The sender's fabric address from the GRH space: an IPv6 header (version 6 in byte 0), or
    // 20 zero bytes and an IPv4 header.
    std::array<std::uint8_t, 16> from{};
    if ((std::to_integer<std::uint8_t>(buf[0]) >> 4) != 6) {
      from = rnic::gid_v4(std::to_integer<std::uint8_t>(buf[32]), std::to_integer<std::uint8_t>(buf[33]),
                          std::to_integer<std::uint8_t>(buf[34]), std::to_integer<std::uint8_t>(buf[35]));
    } else {
      for (std::size_t i = 0; i < 16; ++i) from[i] = std::to_integer<std::uint8_t>(buf[8 + i]);
    }
    const lan_member* m = nullptr;
    for (const lan_member& c : members_)
      if (c.gid == from && c.qpn == wc.src_qp) m = &c;
    if (!m) {
      refuse(lan_errc::unknown_sender);
      return;
    }
    const auto frame = buf.subspan(grh, wc.byte_len - grh);
    wire::mac_address dst, src;
    for (std::size_t i = 0; i < 6; ++i) dst[i] = std::to_integer<std::uint8_t>(frame[i]), src[i] = std::to_integer<std::uint8_t>(frame[6 + i]);
    const auto want = ib::mac_from_lid(m->lid, m->qpn);
    if (!want || src != *want) {
      refuse(lan_errc::spoofed_source);
      return;
    }
    if ((dst[0] & 1) == 0 && dst != mac_) {
      refuse(lan_errc::not_for_us);
      return;
    }
    ++stats_.frames_in;
    if (deliver_) deliver_(frame);
  }
  rnic::errc post_recv(std::uint32_t k) {
    const auto b = recv_buf(k);
    const rnic::sge s{addr(b.data()), static_cast<std::uint32_t>(b.size()), mr_.lkey};
    return dev_.post_recv(qpn_, {.wr_id = k, .sg_list = {&s, 1}});
  }
  bool setup() {
    if (cfg_.lid < ib::lid_unicast_first || cfg_.lid > ib::lid_unicast_last || cfg_.incarnation == 0 || cfg_.receives < 1 ||
        cfg_.receives > 4096 || cfg_.send_slots < 1 || cfg_.send_slots > 1024 || port_ >= dev_.config().ports.size())
      return false;
    auto pd = dev_.alloc_pd();
    if (!pd) return false;
    pd_ = *pd;
    auto sc = dev_.create_cq(send_cq_mem_);
    auto rc = dev_.create_cq(recv_cq_mem_);
    if (!sc || !rc) return false;
    send_cq_ = *sc, recv_cq_ = *rc;
    arena_.assign(std::size_t{cfg_.receives} * recv_size() + std::size_t{cfg_.send_slots} * max_frame(), std::byte{0});
    auto mr = dev_.reg_mr(*pd_, arena_.data(), arena_.size(), rnic::access::local_write);
    if (!mr) return false;
    mr_ = *mr;
    auto q = dev_.create_qp({.type = rnic::qp_type::ud, .pd = *pd_, .send_cq = send_cq_, .recv_cq = recv_cq_, .sq = sq_.get(), .rq = rq_.get()});
    if (!q) return false;
    qpn_ = *q;
    if (rnic::bring_up(dev_, qpn_, {.type = rnic::qp_type::ud, .av = {.port = static_cast<std::uint8_t>(port_)}, .qkey = lan_qkey}) != rnic::errc{})
      return false;
    const auto mac = ib::mac_from_lid(cfg_.lid, qpn_);
    if (!mac) return false;
    mac_ = *mac;
    for (std::uint32_t k = 0; k < cfg_.receives; ++k)
      if (post_recv(k) != rnic::errc{}) return false;
    slot_users_.assign(cfg_.send_slots, 0);
    for (std::uint32_t s = cfg_.send_slots; s-- > 0;) free_.push_back(s);
    return true;
  }

  rnic::device& dev_;
  lan_config cfg_;
  std::function<void(std::span<const std::byte>)> deliver_;
  std::size_t port_;
  bool ok_ = false;
  std::optional<std::uint32_t> pd_;
  std::uint32_t send_cq_ = 0, recv_cq_ = 0, qpn_ = 0;
  rnic::memory_region mr_{};
  static constexpr std::uint32_t sq_depth = 2048;  ///< copies in flight at most (a broadcast posts one per member)
  rnic::cq_memory send_cq_mem_{sq_depth}, recv_cq_mem_{8192};
  std::unique_ptr<rnic::sq_memory> sq_ = std::make_unique<rnic::sq_memory>(sq_depth);
  std::unique_ptr<rnic::rq_memory> rq_ = std::make_unique<rnic::rq_memory>(4096);
  std::vector<std::byte> arena_;
  wire::mac_address mac_{};
  std::vector<lan_member> members_;
  std::vector<std::pair<std::array<std::uint8_t, 16>, std::uint32_t>> ahs_;
  std::vector<std::uint32_t> free_, slot_users_;
  std::vector<const lan_member*> scratch_;
  std::size_t in_flight_ = 0;
  lan_counters stats_{};
};

}  // namespace pushwire::pp
