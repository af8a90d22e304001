// The send path's seeded faults for real transports (spec/net.md §2): a frame queued for the
// wire is lost, corrupted in one bit, held back, or duplicated as rnic::decide says and
// rnic::apply applies, with the same draws as the loopback fabric; and the queue of frames waiting
// to leave, whose nodes and buffers are reused (no allocation per frame once warm). Shared by
// net::udp_port, net::packet_port and net::xdp_port.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <list>
#include <optional>
#include <random>
#include <span>
#include <utility>

#include <pushwire/rnic/device.hpp>
#include <pushwire/rnic/faults.hpp>

namespace pushwire::net {

/// The largest IBTA MTU (4096, 2048, 1024, 512, else 256) whose packets, with `overhead` bytes of
/// headers around their payload, fit a link whose MTU is `link_mtu`: the path MTU a transport's
/// port can carry.
constexpr std::uint32_t path_mtu_for(std::uint32_t link_mtu, std::uint32_t overhead) {
  for (std::uint32_t m : {4096u, 2048u, 1024u, 512u})
    if (m + overhead <= link_mtu) return m;
  return 256;
}

/// Whether any of f's faults is on (rnic::decide draws nothing and changes nothing otherwise).
constexpr bool any_fault(const rnic::direction_faults& f) {
  return f.loss > 0 || f.duplicate > 0 || f.reorder > 0 || f.corrupt > 0 || f.delay > 0;
}

/// Frames waiting to leave, in order (`out`), and the nodes of frames gone (`spare`), whose byte
/// buffers keep their capacity: once the queue has held its largest burst, queuing a frame
/// allocates nothing. Pending has `at` (when it may leave) and `bytes` (std::vector<std::byte>).
template <class Pending>
struct send_queue {
  std::list<Pending> out, spare;
  using iterator = typename std::list<Pending>::iterator;
  /// A frame at out's end (a spare node when there is one) holding `bytes`; its other fields are
  /// the spare node's: the caller sets them.
  Pending& push(std::span<const std::byte> bytes) {
    if (spare.empty()) out.emplace_back();
    else out.splice(out.end(), spare, spare.begin());
    out.back().bytes.assign(bytes.begin(), bytes.end());
    return out.back();
  }
  /// Frame `it` is gone: its node goes to spare.
  void retire(iterator it) { spare.splice(spare.end(), out, it); }
  bool empty() const { return out.empty(); }
  std::size_t size() const { return out.size(); }
};

/// Applies `f`'s faults to the frame at q.out's end (just pushed, `at` set), counting them in `c`
/// (with lost, corrupted, held and duplicated): lost (retired), corrupted in one bit, held back
/// (its `at` moves later), or duplicated (a copy follows it).
template <class Pending, class Counters>
void apply_faults(send_queue<Pending>& q, const rnic::direction_faults& f, std::mt19937_64& rng, Counters& c) {
  if (!any_fault(f)) return;
  Pending& p = q.out.back();
  const rnic::fault_outcome o = rnic::apply(rnic::decide(f, p.bytes.size(), rng), std::span<std::byte>(p.bytes.data(), p.bytes.size()), p.at, c);
  if (o.lost) {
    q.retire(std::prev(q.out.end()));
    return;
  }
  p.at = o.at;
  if (o.copy_at) {  // (a copy's buffer is allocated: fault injection only)
    Pending d = p;
    d.at = *o.copy_at;
    q.out.push_back(std::move(d));
  }
}

/// Gives the frames device `d` has for its port `port` to `queue(std::span<const std::byte>)`,
/// and each frame's buffer back to the device: every frame, or while `room()` holds (a port whose
/// own queue is full leaves the rest in the device's transmit queue, whose limit holds its
/// requesters back: spec/net.md §2).
template <class Queue, class Room>
void take_frames(rnic::device& d, std::size_t port, Queue&& queue, Room&& room) {
  while (room()) {
    auto f = d.take_frame(port);
    if (!f) return;
    queue(std::span<const std::byte>(f->data(), f->size()));
    d.recycle(std::move(*f));
  }
}
template <class Queue>
void take_frames(rnic::device& d, std::size_t port, Queue&& queue) {
  take_frames(d, port, static_cast<Queue&&>(queue), [] { return true; });
}

/// When the earliest frame of `q` is due, or nullopt.
template <class Pending>
std::optional<rnic::time_ns> next_due(const send_queue<Pending>& q) {
  std::optional<rnic::time_ns> t;
  for (const Pending& o : q.out) t = t ? std::min(*t, o.at) : o.at;
  return t;
}

}  // namespace pushwire::net
