// Moving a function and its attached programs from one device process to another
// (spec/migration.md): the two sides' state machines, sans-IO. The function's queue pairs live in
// its programs' engines and its rings in their shared regions, so what moves is the device's
// part only: the function's image (eswitch.hpp's function_image) and, beside it, each
// attachment's descriptors (control socket, region, doorbell, wake). The rings are handed over
// unread: frames a program posted while the function moved leave through the new device.
//
// A two-phase handover keeps the function on exactly one device:
// - the source stops its rings (quiesce), sends the image (offer) and keeps everything;
// - the destination checks it, holds it without serving (ready) or refuses (refused);
// - the source sends commit; the destination serves and answers committed; the source then
//   releases the function.
// A refusal, or the other side's connection ending before committed, rolls the source back: it
// resumes the rings, which nobody else served. A destination whose source ends before commit
// drops what it held (the programs' sockets close: their QPs fail with IBV_EVENT_DEVICE_FATAL).
// Time is not involved: a side that dies ends its connection, which is the event.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>

#include <pushwire/wire/names.hpp>

namespace pushwire::rnic::migration {

/// The source device's view of one function it is moving.
enum class src_state : std::uint8_t {
  serving,     ///< its rings are served here (no migration, or one rolled back)
  quiesced,    ///< its rings are stopped: nothing is taken from them or put in them
  offered,     ///< its image and descriptors went to the destination, which has not answered
  committing,  ///< the destination held it; commit went; waiting for committed
  moved,       ///< the destination serves it: released here
};
/// The destination device's view of one function arriving.
enum class dst_state : std::uint8_t {
  idle,     ///< nothing arrived
  held,     ///< an image checked and held, its rings not served
  serving,  ///< committed: its rings are served here
  dropped,  ///< refused, or its source ended before commit: nothing kept
};
enum class event : std::uint8_t {
  migrate,    ///< (source) `ctl migrate`: stop the function's rings
  flushed,    ///< (source) frames it took from the rings are out: the offer may go
  offer,      ///< (destination) an image and its descriptors arrived
  check_ok,   ///< (destination) the image may become a function here
  check_bad,  ///< (destination) it may not (fn_errc)
  ready,      ///< (source) the destination holds it
  refused,    ///< (source) the destination refused it
  commit,     ///< (destination) the source says serve it
  committed,  ///< (source) the destination serves it
  peer_lost,  ///< the other device's connection ended
};
enum class action : std::uint8_t {
  none,
  stop_rings,      ///< take nothing more from its tx rings, put nothing in its rx rings, send
                   ///< what was taken, then raise flushed
  send_offer,      ///< the image, then each attachment's descriptors
  send_commit,
  release,         ///< eswitch::release, close its descriptors
  resume,          ///< serve its rings again (roll back)
  check,           ///< eswitch::check_adopt: raise check_ok or check_bad
  hold,            ///< keep the image and descriptors; answer ready
  refuse,          ///< close the descriptors; answer refused with the error
  serve,           ///< eswitch::adopt, serve its rings; answer committed
  drop_held,       ///< close the descriptors it held
};

template <class State>
struct transition {
  State from;
  event on;
  State to;
  action act;
};

/// Every transition of the source; an event not listed in a state is ignored.
inline constexpr std::array<transition<src_state>, 8> source_transitions{{
    {src_state::serving, event::migrate, src_state::quiesced, action::stop_rings},
    {src_state::quiesced, event::flushed, src_state::offered, action::send_offer},
    {src_state::quiesced, event::peer_lost, src_state::serving, action::resume},
    {src_state::offered, event::ready, src_state::committing, action::send_commit},
    {src_state::offered, event::refused, src_state::serving, action::resume},
    {src_state::offered, event::peer_lost, src_state::serving, action::resume},
    {src_state::committing, event::committed, src_state::moved, action::release},
    {src_state::committing, event::peer_lost, src_state::serving, action::resume},
}};
/// Every transition of the destination; an event not listed in a state is ignored.
inline constexpr std::array<transition<dst_state>, 6> destination_transitions{{
    {dst_state::idle, event::offer, dst_state::idle, action::check},
    {dst_state::idle, event::check_ok, dst_state::held, action::hold},
    {dst_state::idle, event::check_bad, dst_state::dropped, action::refuse},
    {dst_state::idle, event::peer_lost, dst_state::dropped, action::none},
    {dst_state::held, event::commit, dst_state::serving, action::serve},
    {dst_state::held, event::peer_lost, dst_state::dropped, action::drop_held},
}};

/// The transition `on` takes from `s`, if any.
template <class State, std::size_t N>
constexpr std::optional<transition<State>> step(const std::array<transition<State>, N>& table, State s, event on) {
  for (const auto& t : table)
    if (t.from == s && t.on == on) return t;
  return std::nullopt;
}
constexpr std::optional<transition<src_state>> step(src_state s, event on) { return step(source_transitions, s, on); }
constexpr std::optional<transition<dst_state>> step(dst_state s, event on) { return step(destination_transitions, s, on); }

inline constexpr std::array<wire::named_value, 5> src_state_names{{{src_state::serving, "serving"},
                                                                  {src_state::quiesced, "quiesced"},
                                                                  {src_state::offered, "offered"},
                                                                  {src_state::committing, "committing"},
                                                                  {src_state::moved, "moved"}}};
constexpr std::span<const wire::named_value> wire_enum_names(src_state) { return src_state_names; }
inline constexpr std::array<wire::named_value, 4> dst_state_names{
    {{dst_state::idle, "idle"}, {dst_state::held, "held"}, {dst_state::serving, "serving"}, {dst_state::dropped, "dropped"}}};
constexpr std::span<const wire::named_value> wire_enum_names(dst_state) { return dst_state_names; }
inline constexpr std::array<wire::named_value, 10> event_names{{{event::migrate, "migrate"},
                                                               {event::flushed, "flushed"},
                                                               {event::offer, "offer"},
                                                               {event::check_ok, "check_ok"},
                                                               {event::check_bad, "check_bad"},
                                                               {event::ready, "ready"},
                                                               {event::refused, "refused"},
                                                               {event::commit, "commit"},
                                                               {event::committed, "committed"},
                                                               {event::peer_lost, "peer_lost"}}};
constexpr std::span<const wire::named_value> wire_enum_names(event) { return event_names; }
inline constexpr std::array<wire::named_value, 11> action_names{{{action::none, "none"},
                                                                {action::stop_rings, "stop_rings"},
                                                                {action::send_offer, "send_offer"},
                                                                {action::send_commit, "send_commit"},
                                                                {action::release, "release"},
                                                                {action::resume, "resume"},
                                                                {action::check, "check"},
                                                                {action::hold, "hold"},
                                                                {action::refuse, "refuse"},
                                                                {action::serve, "serve"},
                                                                {action::drop_held, "drop_held"}}};
constexpr std::span<const wire::named_value> wire_enum_names(action) { return action_names; }

}  // namespace pushwire::rnic::migration
