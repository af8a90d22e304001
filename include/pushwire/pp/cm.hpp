// Connection management for the push-push layer (spec/pp.md §7): how a host module and an I/O
// unit module find each other's queue pairs, notice that the other is gone, and reconnect after
// it restarts. pushwire's own datagram (the split-model document leaves connection setup to the
// channel layer): a hello, sent every hello_interval to the peer's CM port (UDP 18515, the port
// perftest exchanges QP data on, but over UDP). Sans-IO: time is an argument, the hello is bytes,
// what to do comes back as actions.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include <pushwire/rnic/core.hpp>
#include <pushwire/wire/codec.hpp>

namespace pushwire::pp {

/// The CM's UDP port (default).
inline constexpr std::uint16_t cm_port = 18515;

enum class role : std::uint8_t { host = 1, iou = 2 };

/// A hello: who sends it, which incarnation of it (a new one on every start), the queue pairs of
/// that incarnation, and the incarnation of the peer it has heard (0: none yet).
struct hello {
  PUSHWIRE_STRUCT(hello,
      /// "PWCM"
      (wire::constant<std::uint32_t, 0x5057434Du, wire::errc::invalid_field>, magic),
      /// 1
      (wire::constant<std::uint16_t, 1, wire::errc::unsupported_version>, version),
      /// 1 host, 2 I/O unit
      (std::uint8_t, role),
      (wire::reserved<std::uint8_t>, reserved),
      /// Random, nonzero, fixed for the life of the sender's endpoint.
      (std::uint64_t, incarnation),
      /// The peer's incarnation the sender has heard, 0 if none.
      (std::uint64_t, peer_incarnation),
      /// The sender's control and data QP numbers (24 bits).
      (std::uint32_t, control_qpn),
      (std::uint32_t, data_qpn),
      /// The largest packet the sender takes as SendData (pp::address::send_max).
      (std::uint32_t, send_max));
};
inline constexpr std::size_t hello_size = wire::fixed_size<hello>;

struct cm_config {
  pp::role role = pp::role::host;
  std::uint64_t incarnation = 1;      ///< nonzero; a restarted process takes a new one
  rnic::time_ns hello_interval = 100'000'000;  ///< 100 ms
  rnic::time_ns dead_after = 600'000'000;      ///< silence that means the peer is gone (well under 1 s)
};

/// The CM's states.
enum class cm_state : std::uint8_t {
  searching,  ///< no peer heard (or it restarted): hellos go out, nothing is connected
  connected,  ///< the peer heard us and we it: the endpoint is connected
  lost,       ///< the peer went silent: the carrier is down; its return (same incarnation) resumes
};
inline constexpr std::array<wire::named_value, 3> cm_state_names{{
    {cm_state::searching, "searching"}, {cm_state::connected, "connected"}, {cm_state::lost, "lost"}}};
constexpr std::span<const wire::named_value> wire_enum_names(cm_state) { return cm_state_names; }

/// What the caller does after a CM step.
struct cm_actions {
  std::optional<hello> send{};      ///< send this hello to the peer's CM port
  bool reset = false;               ///< destroy the endpoint and make a new one (set_local again) first
  std::optional<hello> connect{};   ///< connect the endpoint to this peer (its QPs, send_max)
  bool carrier_down = false, carrier_up = false;
};

class connector {
 public:
  explicit connector(const cm_config& c) : cfg_(c) {}

  cm_state state() const { return state_; }
  std::uint64_t peer_incarnation() const { return peer_ ? peer_->incarnation : 0; }
  std::uint64_t bad_hellos() const { return bad_; }

  /// This side's endpoint (after construction, and after every reset).
  void set_local(std::uint32_t control_qpn, std::uint32_t data_qpn, std::uint32_t send_max) {
    local_ = {control_qpn, data_qpn, send_max};
    have_local_ = true;
  }

  /// Time passes: a hello when one is due; the peer declared lost after dead_after of silence.
  cm_actions tick(rnic::time_ns now) {
    cm_actions a;
    if (state_ == cm_state::connected && now - heard_ > cfg_.dead_after) {
      state_ = cm_state::lost;
      a.carrier_down = true;
    }
    if (have_local_ && (!sent_once_ || now - last_sent_ >= cfg_.hello_interval)) {
      a.send = mine();
      last_sent_ = now;
      sent_once_ = true;
    }
    return a;
  }

  /// When tick() next has work: the next hello, and the time a connected peer's silence reaches
  /// dead_after. nullopt before set_local().
  std::optional<rnic::time_ns> next_deadline() const {
    if (!have_local_) return std::nullopt;
    rnic::time_ns t = sent_once_ ? last_sent_ + cfg_.hello_interval : 0;
    if (state_ == cm_state::connected) t = std::min(t, heard_ + cfg_.dead_after + 1);
    return t;
  }

  /// A datagram from the CM port. Garbage, our own role, or incarnation 0 is counted and changes
  /// nothing.
  cm_actions on_datagram(std::span<const std::byte> bytes, rnic::time_ns now) {
    cm_actions a;
    const auto h = wire::decode<hello>(bytes);
    if (!h || h->role == static_cast<std::uint8_t>(cfg_.role) || h->incarnation == 0 ||
        (h->role != static_cast<std::uint8_t>(role::host) && h->role != static_cast<std::uint8_t>(role::iou))) {
      ++bad_;
      return a;
    }
    heard_ = now;
    if (peer_ && peer_->incarnation != h->incarnation) {  // the peer restarted
      if (state_ != cm_state::searching) a.reset = true, have_local_ = false;
      state_ = cm_state::searching;
      a.carrier_down = true;
    }
    const bool first = !peer_ || peer_->incarnation != h->incarnation;
    peer_ = *h;
    if (state_ == cm_state::lost) {
      state_ = cm_state::connected;  // the same incarnation came back: its QPs are ours still
      a.carrier_up = true;
    } else if (state_ == cm_state::searching && have_local_ && h->peer_incarnation == cfg_.incarnation) {
      state_ = cm_state::connected;  // it knows our QPs: connect to its
      a.connect = *h;
      a.carrier_up = true;
    }
    if (first && have_local_) {  // answer at once, so that it can connect too
      a.send = mine();
      last_sent_ = now;
      sent_once_ = true;
    }
    if (!a.send && a.connect && have_local_) a.send = mine();  // tell it we heard (it may be waiting)
    return a;
  }

 private:
  hello mine() const {
    return {.role = static_cast<std::uint8_t>(cfg_.role), .incarnation = cfg_.incarnation, .peer_incarnation = peer_incarnation(),
            .control_qpn = local_[0], .data_qpn = local_[1], .send_max = local_[2]};
  }
  cm_config cfg_;
  cm_state state_ = cm_state::searching;
  std::optional<hello> peer_{};
  std::array<std::uint32_t, 3> local_{};
  bool have_local_ = false, sent_once_ = false;
  rnic::time_ns heard_ = 0, last_sent_ = 0;
  std::uint64_t bad_ = 0;
};

}  // namespace pushwire::pp
