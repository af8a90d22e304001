// The sans-IO machinery every flow/ machine shares: fixed-capacity containers, the error codes
// a machine reports, and transition tables. A machine is a table of rows
//   from-state, event, [guard], to-state, / action
// that step() searches in order: the first row whose state and event match and whose guard
// holds is taken; its action runs and the state becomes `to`. An event with no such row is
// refused with errc::event_not_allowed and changes nothing. Time is an argument (nanoseconds);
// what the caller must do comes back as action values in a fixed-capacity list.
// Diagrams: spec/flow.md (generated from the tables by pushwire-spec).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <span>
#include <string_view>
#include <system_error>
#include <type_traits>

#include <pushwire/wire/errc.hpp>
#include <pushwire/wire/names.hpp>

namespace pushwire::flow {

/// Nanoseconds on the caller's clock (any epoch; only differences matter).
using time_ns = std::uint64_t;

/// The machines' door for tests (flow/testing.hpp): not part of the API.
namespace testing {
struct access;
}  // namespace testing

/// A vector with inline capacity N: never allocates; push_back on a full vector returns false.
/// (A FIFO is a static_ring.)
template <class T, std::size_t N>
class static_vector {
 public:
  static_assert(std::is_trivially_destructible_v<T>, "static_vector holds trivially destructible values");
  using value_type = T;
  constexpr std::size_t size() const { return n_; }
  static constexpr std::size_t capacity() { return N; }
  constexpr bool empty() const { return n_ == 0; }
  constexpr bool full() const { return n_ == N; }
  constexpr bool push_back(const T& v) {
    if (n_ == N) return false;
    a_[n_++] = v;
    return true;
  }
  constexpr void clear() { n_ = 0; }
  constexpr T& operator[](std::size_t i) { return a_[i]; }
  constexpr const T& operator[](std::size_t i) const { return a_[i]; }
  constexpr T& front() { return a_[0]; }
  constexpr const T& front() const { return a_[0]; }
  constexpr T& back() { return a_[n_ - 1]; }
  constexpr T* begin() { return a_.data(); }
  constexpr T* end() { return a_.data() + n_; }
  constexpr const T* begin() const { return a_.data(); }
  constexpr const T* end() const { return a_.data() + n_; }
  friend constexpr bool operator==(const static_vector& a, const static_vector& b) {
    if (a.n_ != b.n_) return false;
    for (std::size_t i = 0; i < a.n_; ++i)
      if (!(a.a_[i] == b.a_[i])) return false;
    return true;
  }

 private:
  std::array<T, N> a_{};
  std::size_t n_ = 0;
};

/// A FIFO with inline capacity N: never allocates; push_back on a full ring returns false;
/// pop_front is O(1) (a queue of work requests completes from its front). Index 0 and begin()
/// are the oldest element; iteration runs oldest to newest.
template <class T, std::size_t N>
class static_ring {
  static_assert(N > 0);
  template <bool Const>
  class iter {
    using ring = std::conditional_t<Const, const static_ring, static_ring>;
    ring* r_ = nullptr;
    std::size_t i_ = 0;

   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    using reference = std::conditional_t<Const, const T&, T&>;
    using pointer = std::conditional_t<Const, const T*, T*>;
    constexpr iter() = default;
    constexpr iter(ring* r, std::size_t i) : r_(r), i_(i) {}
    constexpr reference operator*() const { return (*r_)[i_]; }
    constexpr pointer operator->() const { return &(*r_)[i_]; }
    constexpr iter& operator++() { return ++i_, *this; }
    constexpr iter operator++(int) { iter t = *this; ++i_; return t; }
    friend constexpr bool operator==(const iter& a, const iter& b) { return a.i_ == b.i_; }
  };

 public:
  static_assert(std::is_trivially_destructible_v<T>, "static_ring holds trivially destructible values");
  using value_type = T;
  using iterator = iter<false>;
  using const_iterator = iter<true>;
  constexpr std::size_t size() const { return n_; }
  static constexpr std::size_t capacity() { return N; }
  constexpr bool empty() const { return n_ == 0; }
  constexpr bool full() const { return n_ == N; }
  constexpr bool push_back(const T& v) {
    if (n_ == N) return false;
    a_[slot(n_++)] = v;
    return true;
  }
  /// Removes the oldest element (the ring must not be empty).
  constexpr void pop_front() {
    head_ = head_ + 1 == N ? 0 : head_ + 1;
    --n_;
  }
  constexpr void clear() { head_ = n_ = 0; }
  constexpr T& operator[](std::size_t i) { return a_[slot(i)]; }
  constexpr const T& operator[](std::size_t i) const { return a_[slot(i)]; }
  constexpr T& front() { return a_[head_]; }
  constexpr const T& front() const { return a_[head_]; }
  constexpr T& back() { return a_[slot(n_ - 1)]; }
  constexpr iterator begin() { return {this, 0}; }
  constexpr iterator end() { return {this, n_}; }
  constexpr const_iterator begin() const { return {this, 0}; }
  constexpr const_iterator end() const { return {this, n_}; }
  /// Equal when they hold the same elements in the same order, wherever the ring starts.
  friend constexpr bool operator==(const static_ring& a, const static_ring& b) {
    if (a.n_ != b.n_) return false;
    for (std::size_t i = 0; i < a.n_; ++i)
      if (!(a[i] == b[i])) return false;
    return true;
  }

 private:
  constexpr std::size_t slot(std::size_t i) const { return head_ + i < N ? head_ + i : head_ + i - N; }
  std::array<T, N> a_{};
  std::size_t head_ = 0, n_ = 0;
};

/// Where a machine writes its actions: a caller's fixed storage (any size). Every machine
/// checks room() before it changes anything, so a full sink refuses an event whole
/// (errc::actions_full) instead of losing actions.
template <class A>
class sink {
 public:
  constexpr sink(std::span<A> storage) : p_(storage.data()), cap_(storage.size()) {}  // NOLINT
  constexpr std::size_t size() const { return n_; }
  constexpr std::size_t room() const { return cap_ - n_; }
  constexpr bool empty() const { return n_ == 0; }
  constexpr void push(const A& a) {
    if (n_ < cap_) p_[n_++] = a;
  }
  constexpr void clear() { n_ = 0; }
  constexpr const A& operator[](std::size_t i) const { return p_[i]; }
  /// The last action pushed (the sink must not be empty).
  constexpr A& back() { return p_[n_ - 1]; }
  constexpr const A* begin() const { return p_; }
  constexpr const A* end() const { return p_ + n_; }
  constexpr std::span<const A> view() const { return {p_, n_}; }

 private:
  A* p_;
  std::size_t cap_;
  std::size_t n_ = 0;
};

/// Storage and a sink over it, for callers that want both in one value.
template <class A, std::size_t N>
struct action_list {
  std::array<A, N> storage{};
  sink<A> out{std::span<A>(storage)};
  constexpr action_list() = default;
  action_list(const action_list&) = delete;
  action_list& operator=(const action_list&) = delete;
};

/// FNV-1a over 64-bit words: machines feed it their state through digest(h) (times left out),
/// so explorers and fuzzers can tell states apart without reading private members.
struct hasher {
  std::uint64_t h = 0xcbf29ce484222325ull;
  constexpr void operator()(std::uint64_t v) {
    for (int i = 0; i < 8; ++i) h = (h ^ ((v >> (8 * i)) & 0xFF)) * 0x100000001b3ull;
  }
};

/// Why a machine refused an event or dropped a packet. 0 is never an error.
enum class errc : std::uint8_t {
  event_not_allowed = 1,
  queue_full,
  table_full,
  actions_full,
  unknown_pool,
  pool_exists,
  element_not_on_loan,
  element_not_held,
  write_after_flush,
  no_free_element,
  too_large,
  invalid_argument,
  qp_in_error,
  wrong_access_key,
  unknown_dct,
  not_connected,
  unknown_tuple,
  foreign_group,
  duplicate,
  window_full,
};

/// A code's name and meaning (wire::errc_info, the one shape of every error table).
using wire::errc_info;

/// Indexed by errc value - 1 (spec/flow.md lists it).
inline constexpr std::array<errc_info, 20> errc_table{{
    {"event_not_allowed", "The machine's table has no row for this event in the current state (or every guard failed); nothing changed."},
    {"queue_full", "A work or request queue is at its capacity (a template parameter); the request was not queued."},
    {"table_full", "A pool, session or resource table is at its capacity; nothing was added."},
    {"actions_full", "The caller's action list is full; the event was not applied."},
    {"unknown_pool", "A message names a pool that was never advertised (or a slot never used)."},
    {"pool_exists", "A BufferRecvPool advertises a pool reference that is already in use."},
    {"element_not_on_loan", "An indication names an element the target did not lend to the initiator (never advertised, or indicated already)."},
    {"element_not_held", "An update returns, or the application releases, an element that is not held by the side returning it."},
    {"write_after_flush", "A transfer or indication for a pool after its flush began (initiator) or completed (target)."},
    {"no_free_element", "No pool has a free element of the size needed; the transfer was not started."},
    {"too_large", "A transfer exceeds the largest element, or a UD message exceeds the path MTU."},
    {"invalid_argument", "A request the machine cannot express (zero-length pool, element count 0, bad range)."},
    {"qp_in_error", "The queue pair is in the error state; the request completes with status flushed."},
    {"wrong_access_key", "DC target: the DCETH access key is not this target's key (NAK remote access error, nothing placed)."},
    {"unknown_dct", "DC target: the DCCETH names another DC target number (NAK invalid request, nothing placed)."},
    {"not_connected", "DC target: a data packet arrived with no connection from its initiator (dropped and counted without a NAK, nothing placed; the initiator's timeout resends the connect)."},
    {"unknown_tuple", "Sessions: a packet from a UDP 5-tuple the session table does not hold (dropped and counted)."},
    {"foreign_group", "Sessions: a packet from a session outside the sender's group for this connection (dropped and counted)."},
    {"duplicate", "A packet or message that was already delivered (dropped and counted; RC re-acknowledges)."},
    {"window_full", "Sessions: a message too far ahead of the next expected one for the resequencing window (dropped and counted)."},
}};

constexpr std::span<const wire::named_value> wire_enum_names(errc) { return wire::detail::error_names<errc_table>; }
/// "queue_full"; "ok" for 0; "unknown" for a value with no code.
constexpr std::string_view name(errc e) { return wire::error_name(e); }
/// std::error_code support, as wire::errc has: category "pushwire.flow", messages the names.
constexpr const char* error_domain(errc) { return "pushwire.flow"; }
inline std::error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), wire::error_category_of<errc>()}; }

/// One row of a transition table. A guard of nullptr always holds; an action of nullptr does
/// nothing. An action returns errc{} or the error step() reports (the state still becomes
/// `to`; rows that refuse an input keep the state). Null is replaced by a function at
/// construction, so step() never compares a function pointer with null (which some
/// compilers refuse in constant evaluation under -fsanitize=undefined).
template <class Ctx, class State, class Event, class Input, class Output>
struct transition {
  using context = Ctx;
  using state_type = State;
  using event_type = Event;
  using input_type = Input;
  using output_type = Output;
  struct guard_fn {
    using fn = bool (*)(const Ctx&, const Input&);
    fn call;
    constexpr guard_fn(std::nullptr_t) : call(&always) {}  // NOLINT
    constexpr guard_fn(fn f) : call(f) {}                   // NOLINT
    static constexpr bool always(const Ctx&, const Input&) { return true; }
  };
  struct action_fn {
    using fn = errc (*)(Ctx&, const Input&, Output&);
    fn call;
    constexpr action_fn(std::nullptr_t) : call(&nothing) {}  // NOLINT
    constexpr action_fn(fn f) : call(f) {}                    // NOLINT
    static constexpr errc nothing(Ctx&, const Input&, Output&) { return {}; }
  };
  State from;
  Event on;
  std::string_view guard_name;
  guard_fn guard;
  State to;
  std::string_view action_name;
  action_fn action;
};

/// What step() did: the row taken (-1 when none) and the error, if any.
struct step_result {
  int row = -1;
  errc error{};
  constexpr bool ok() const { return error == errc{}; }
};

/// Applies `in` (whose event is `on`) to a machine in state `s`.
template <class Row>
constexpr step_result step(std::span<const Row> table, typename Row::state_type& s, typename Row::context& ctx,
                           typename Row::event_type on, const typename Row::input_type& in,
                           typename Row::output_type& out) {
  for (std::size_t i = 0; i < table.size(); ++i) {
    const Row& r = table[i];
    if (r.from != s || r.on != on) continue;
    if (!r.guard.call(ctx, in)) continue;
    const errc e = r.action.call(ctx, in, out);
    s = r.to;
    return {static_cast<int>(i), e};
  }
  return {-1, errc::event_not_allowed};
}

/// Whether `table` has a row for (s, on) whose guard holds.
template <class Row>
constexpr bool enabled(std::span<const Row> table, typename Row::state_type s, const typename Row::context& ctx,
                       typename Row::event_type on, const typename Row::input_type& in) {
  for (const Row& r : table)
    if (r.from == s && r.on == on && r.guard.call(ctx, in)) return true;
  return false;
}

/// Machine-level description used by the diagram generator: its name, its table, and how to
/// name its states and events.
template <class Row>
struct machine_info {
  using row = Row;
  std::string_view name;
  std::string_view initial;
  std::span<const Row> table;
  static constexpr std::string_view state_name(typename Row::state_type s) { return wire::enum_name(s); }
  static constexpr std::string_view event_name(typename Row::event_type e) { return wire::enum_name(e); }
};

}  // namespace pushwire::flow

template <>
struct std::is_error_code_enum<pushwire::flow::errc> : std::true_type {};
