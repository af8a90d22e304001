// A function's shared-memory region (rnic/function.hpp): the header format_region writes and
// check_region refuses field by field; the SPSC rings over raw memory: round trips, a full ring,
// the u32 indices wrapping, each side refusing an impossible published index or slot length, the
// sleep handshake, and two threads passing a million frames through one ring.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <semaphore>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <vector>

#include <pushwire/rnic/function.hpp>

// Everything in its own namespace: the rnic tests compile as one translation unit.
namespace pw_function_test {

namespace rnic = pushwire::rnic;
namespace fn = pushwire::rnic::fn;
using rnic::fn_errc;

static_assert(fn::slot_capacity == 4600);
static_assert(fn::slot_stride % 8 == 0 && fn::ring_control % 64 == 0);
static_assert(fn::ring_bytes(16) == 256 + 16 * 4608);
static_assert(fn::region_bytes(16) == 4096 + 2 * (256 + 16 * 4608));
static_assert(fn::region_bytes(4096) == 4096 + 2 * (256 + std::size_t{4096} * 4608));
static_assert(fn::valid_slots(16) && fn::valid_slots(32) && fn::valid_slots(512) && fn::valid_slots(4096));
static_assert(!fn::valid_slots(0) && !fn::valid_slots(1) && !fn::valid_slots(8) && !fn::valid_slots(15) &&
              !fn::valid_slots(17) && !fn::valid_slots(4095) && !fn::valid_slots(8192) && !fn::valid_slots(0x80000000u));
static_assert(fn::min_slots <= fn::default_slots && fn::default_slots <= fn::max_slots && fn::valid_slots(fn::default_slots));

/// An 8-byte aligned region of `bytes` bytes (the shared memory a memfd maps, here on the heap).
struct memory {
  std::vector<std::uint64_t> words;
  explicit memory(std::size_t bytes) : words((bytes + 7) / 8) {}
  std::span<std::byte> bytes(std::size_t n) { return std::as_writable_bytes(std::span(words)).first(n); }
};

std::uint32_t get32(const std::byte* p) {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
std::uint64_t get64(const std::byte* p) {
  std::uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
void put32(std::byte* p, std::uint32_t v) { std::memcpy(p, &v, 4); }
void put64(std::byte* p, std::uint64_t v) { std::memcpy(p, &v, 8); }
std::uint64_t get_field(const std::byte* p, const fn::field_info& f) { return f.size == 4 ? get32(p + f.offset) : get64(p + f.offset); }
void put_field(std::byte* p, const fn::field_info& f, std::uint64_t v) {
  if (f.size == 4) put32(p + f.offset, static_cast<std::uint32_t>(v));
  else put64(p + f.offset, v);
}

/// A formatted region of `slots` slots, checked.
struct region {
  memory mem;
  std::span<std::byte> bytes;
  fn::region_view view;
  explicit region(std::uint32_t slots = 16) : mem(fn::region_bytes(slots)), bytes(mem.bytes(fn::region_bytes(slots))) {
    fn::format_region(bytes, slots);
    const auto e = fn::check_region(bytes, view);
    REQUIRE_FALSE(e.has_value());
  }
};

// The rings' indices are private and start at 0; the wrap of the u32 counters is reached by
// publishing 2^32 slots (the hidden test below) or, quickly, by making a side whose private index
// is near 2^32. These images are the sides' layouts; produced() / consumed() confirm each use.
struct producer_image {
  std::byte* ring;
  std::uint32_t slots, head;
};
struct consumer_image {
  std::byte* ring;
  std::uint32_t slots, tail;
};
static_assert(std::is_trivially_copyable_v<fn::ring_producer> && sizeof(producer_image) == sizeof(fn::ring_producer));
static_assert(std::is_trivially_copyable_v<fn::ring_consumer> && sizeof(consumer_image) == sizeof(fn::ring_consumer));

/// Both sides of `ring` as if `start` slots had gone through it: the indices published, the
/// private ones at start.
std::pair<fn::ring_producer, fn::ring_consumer> sides_at(std::byte* ring, std::uint32_t slots, std::uint32_t start) {
  auto p = std::bit_cast<fn::ring_producer>(producer_image{ring, slots, start});
  auto c = std::bit_cast<fn::ring_consumer>(consumer_image{ring, slots, start});
  REQUIRE(p.produced() == start);
  REQUIRE(c.consumed() == start);
  put32(ring + fn::producer_at, start);
  put32(ring + fn::consumer_at, start);
  return {p, c};
}

/// A frame's bytes: its sequence number (8 bytes), then a byte derived from it.
std::uint32_t length_of(std::uint64_t seq) {
  if (seq % 997 == 0) return fn::slot_capacity;
  return 8 + static_cast<std::uint32_t>((seq * 2654435761u) % 1500);
}
void fill(std::span<std::byte> out, std::uint64_t seq, std::uint32_t len) {
  std::memcpy(out.data(), &seq, 8);
  std::memset(out.data() + 8, static_cast<int>(seq * 31 & 0xFF), len - 8);
}
bool matches(std::span<const std::byte> f, std::uint64_t seq) {
  if (f.size() != length_of(seq) || get64(f.data()) != seq) return false;
  const auto b = static_cast<std::byte>(seq * 31 & 0xFF);
  return std::all_of(f.begin() + 8, f.end(), [b](std::byte x) { return x == b; });
}

/// Publishes one frame of `seq`; false when the ring is full.
bool produce(fn::ring_producer& p, std::uint64_t seq) {
  fn_errc e{};
  const auto space = p.space(e);
  REQUIRE(space.has_value());
  if (*space == 0) return false;
  fill(p.next(), seq, length_of(seq));
  p.publish(length_of(seq));
  return true;
}
/// Takes one frame and checks it is `seq`'s; false when the ring is empty.
bool consume(fn::ring_consumer& c, std::uint64_t seq) {
  fn_errc e{};
  const auto n = c.available(e);
  REQUIRE(n.has_value());
  if (*n == 0) return false;
  const auto f = c.peek(e);
  REQUIRE(f.has_value());
  CHECK(matches(*f, seq));
  c.pop();
  return true;
}

// ---- the region --------------------------------------------------------------------------

TEST_CASE("function: format_region writes every header field as the table says", "[rnic][function]") {
  for (const std::uint32_t slots : {16u, 32u, 512u, 4096u}) {
    INFO("slots " << slots);
    region r(slots);
    const std::byte* h = r.bytes.data();
    const std::map<std::string_view, std::uint64_t> expect{
        {"magic", 0x4E465750},
        {"version", 1},
        {"region_bytes", fn::region_bytes(slots)},
        {"slot_count", slots},
        {"slot_stride", 4608},
        {"tx_offset", 4096},
        {"rx_offset", 4096 + fn::ring_bytes(slots)},
        {"state", 1},
        {"moves", 0},
    };
    std::size_t end = 0;
    for (const fn::field_info& f : fn::header_fields) {
      INFO(f.name);
      CHECK(f.offset >= end);  // in offset order, not overlapping
      end = f.offset + f.size;
      REQUIRE(expect.contains(f.name));
      CHECK(get_field(h, f) == expect.at(f.name));
    }
    CHECK(end <= fn::header_bytes);
    CHECK(std::string_view(reinterpret_cast<const char*>(h), 4) == "PWFN");
    CHECK(r.view.slots == slots);
    CHECK(r.view.bytes.data() == r.bytes.data());
    CHECK(r.view.bytes.size() == fn::region_bytes(slots));
    CHECK(r.view.tx == r.bytes.data() + fn::header_bytes);
    CHECK(r.view.rx == r.bytes.data() + fn::header_bytes + fn::ring_bytes(slots));
    CHECK(r.view.rx + fn::ring_bytes(slots) == r.bytes.data() + r.bytes.size());
    CHECK(r.view.state() == fn::device_state::up);
    r.view.set_state(fn::device_state::fatal);
    CHECK(r.view.state() == fn::device_state::fatal);
    CHECK(get32(h + 40) == 2);
    r.view.count_move();
    r.view.count_move();
    CHECK(r.view.moves() == 2);
    CHECK(get32(h + 44) == 2);
  }
}

TEST_CASE("function: format_region zeroes the control blocks of both rings", "[rnic][function]") {
  region r;
  std::vector<std::byte> junk(r.bytes.size(), std::byte{0xA5});
  std::copy(junk.begin(), junk.end(), r.bytes.begin());
  fn::format_region(r.bytes, 16);
  fn::region_view v;
  REQUIRE_FALSE(fn::check_region(r.bytes, v).has_value());
  for (const std::byte* ring : {v.tx, v.rx})
    CHECK(std::all_of(ring, ring + fn::ring_control, [](std::byte b) { return b == std::byte{0}; }));
  for (std::size_t i = 40; i < fn::header_bytes; ++i) REQUIRE(r.bytes[i] == (i == 40 ? std::byte{1} : std::byte{0}));
}

TEST_CASE("function: check_region refuses each corrupted header field with its error", "[rnic][function]") {
  const std::uint32_t slots = 16;
  struct corruption {
    std::uint64_t value;
    std::optional<fn_errc> expect;
  };
  const auto unsupported = std::optional{fn_errc::unsupported_version}, bad = std::optional{fn_errc::bad_message};
  const std::map<std::string_view, std::vector<corruption>> cases{
      {"magic", {{0x4E465751, unsupported}, {0x50574E46, unsupported}, {0, unsupported}}},
      {"version", {{0, unsupported}, {2, unsupported}, {0x01000000, unsupported}, {0xFFFFFFFF, unsupported}}},
      {"region_bytes",
       {{fn::region_bytes(slots) + 1, bad}, {fn::region_bytes(slots) - 1, bad}, {0, bad}, {fn::region_bytes(32), bad}, {~0ull, bad}}},
      {"slot_count", {{0, bad}, {8, bad}, {15, bad}, {17, bad}, {32, bad}, {8192, bad}, {0x80000000u, bad}}},
      {"slot_stride", {{0, bad}, {4096, bad}, {4607, bad}, {4609, bad}}},
      {"tx_offset", {{0, bad}, {4095, bad}, {4097, bad}, {fn::header_bytes + fn::ring_bytes(slots), bad}}},
      {"rx_offset", {{0, bad}, {fn::header_bytes, bad}, {fn::header_bytes + fn::ring_bytes(slots) + 1, bad}, {fn::region_bytes(slots), bad}}},
      // The device's state is the device process's to write (not a size or an offset): any value
      // passes the check; the program reads it with state().
      {"state", {{1, std::nullopt}, {2, std::nullopt}}},
      // The moves counter is free-running: any value passes.
      {"moves", {{0, std::nullopt}, {1, std::nullopt}, {0xFFFFFFFF, std::nullopt}}},
  };
  for (const fn::field_info& f : fn::header_fields) {
    INFO("field " << f.name);
    REQUIRE(cases.contains(f.name));  // a field added to the table needs its cases here
    for (const corruption& c : cases.at(f.name)) {
      INFO("value " << c.value);
      region r(slots);
      put_field(r.bytes.data(), f, c.value);
      fn::region_view v;
      v.slots = 12345;
      const auto e = fn::check_region(r.bytes, v);
      CHECK(e == c.expect);
      if (e) CHECK(v.slots == 12345);  // untouched when refused
    }
  }
  // Each byte of magic and version: unsupported_version whichever byte.
  for (std::size_t i = 0; i < 8; ++i) {
    region r(slots);
    r.bytes[i] ^= std::byte{0x10};
    fn::region_view v;
    CHECK(fn::check_region(r.bytes, v) == unsupported);
  }
}

TEST_CASE("function: check_region refuses a region shorter than its header says", "[rnic][function]") {
  region r(16);
  fn::region_view v;
  CHECK_FALSE(fn::check_region(r.bytes, v).has_value());
  for (const std::size_t n : {std::size_t{0}, std::size_t{1}, fn::header_bytes - 1, fn::header_bytes, fn::header_bytes + fn::ring_bytes(16),
                              fn::region_bytes(16) - fn::slot_stride, fn::region_bytes(16) - 1}) {
    INFO("bytes " << n);
    CHECK(fn::check_region(r.bytes.first(n), v) == fn_errc::bad_message);
  }
  // A longer mapping is fine (the header says where the rings are).
  memory big(fn::region_bytes(16) + 4096);
  const auto b = big.bytes(fn::region_bytes(16) + 4096);
  fn::format_region(b.first(fn::region_bytes(16)), 16);
  CHECK_FALSE(fn::check_region(b, v).has_value());
  CHECK(v.slots == 16);
  // A consistent header for 32 slots in a mapping of 16 slots' size: refused; in 32 slots' size, taken.
  region r32(16);
  put64(r32.bytes.data() + 8, fn::region_bytes(32));
  put32(r32.bytes.data() + 16, 32);
  put64(r32.bytes.data() + 32, fn::header_bytes + fn::ring_bytes(32));
  CHECK(fn::check_region(r32.bytes, v) == fn_errc::bad_message);
  memory m32(fn::region_bytes(32));
  const auto b32 = m32.bytes(fn::region_bytes(32));
  std::copy(r32.bytes.begin(), r32.bytes.begin() + fn::header_bytes, b32.begin());
  CHECK_FALSE(fn::check_region(b32, v).has_value());
  CHECK(v.slots == 32);
  CHECK(v.rx == b32.data() + fn::header_bytes + fn::ring_bytes(32));
}

// ---- the rings ---------------------------------------------------------------------------

TEST_CASE("function: a ring carries frames of every length in order", "[rnic][function]") {
  region r;
  fn::ring_producer p(r.view.tx, r.view.slots);
  fn::ring_consumer c(r.view.tx, r.view.slots);
  fn_errc e{};
  CHECK(p.space(e) == 16u);
  CHECK(c.available(e) == 0u);
  // Lengths 1..slot_capacity, through the ring many times over.
  const std::vector<std::uint32_t> lengths{1, 2, 3, 7, 8, 9, 60, 64, 1500, 4095, 4096, 4206, 4599, 4600};
  std::uint64_t sent = 0, got = 0;
  for (int round = 0; round < 40; ++round) {
    const std::size_t burst = 1 + static_cast<std::size_t>(round) % 16;
    for (std::size_t i = 0; i < burst; ++i, ++sent) {
      const std::uint32_t len = lengths[sent % lengths.size()];
      const auto s = p.next();
      REQUIRE(s.size() == fn::slot_capacity);
      REQUIRE(s.data() >= r.view.tx + fn::ring_control);
      REQUIRE(s.data() + s.size() <= r.view.tx + fn::ring_bytes(16));
      for (std::uint32_t k = 0; k < len; ++k) s[k] = static_cast<std::byte>(sent + k);
      p.publish(len);
    }
    CHECK(c.available(e) == burst);
    CHECK(p.space(e) == 16 - burst);
    for (; got < sent; ++got) {
      const auto f = c.peek(e);
      REQUIRE(f.has_value());
      REQUIRE(f->size() == lengths[got % lengths.size()]);
      bool same = true;
      for (std::size_t k = 0; k < f->size(); ++k) same = same && (*f)[k] == static_cast<std::byte>(got + k);
      CHECK(same);
      c.pop();
    }
    CHECK(c.available(e) == 0u);
    CHECK(p.space(e) == 16u);
  }
  CHECK(p.produced() == sent);
  CHECK(c.consumed() == got);
  CHECK(get32(r.view.tx + fn::producer_at) == sent);
  CHECK(get32(r.view.tx + fn::consumer_at) == got);
  // The rx ring is another ring: untouched.
  CHECK(get32(r.view.rx + fn::producer_at) == 0);
  CHECK(get32(r.view.rx + fn::consumer_at) == 0);
}

TEST_CASE("function: a full ring has no space until the consumer pops", "[rnic][function]") {
  region r;
  fn::ring_producer p(r.view.tx, 16);
  fn::ring_consumer c(r.view.tx, 16);
  fn_errc e{};
  for (std::uint64_t s = 0; s < 16; ++s) CHECK(produce(p, s));
  CHECK(p.space(e) == 0u);
  CHECK_FALSE(produce(p, 16));
  CHECK(c.available(e) == 16u);
  CHECK(consume(c, 0));
  CHECK(p.space(e) == 1u);
  CHECK(produce(p, 16));
  CHECK(p.space(e) == 0u);
  for (std::uint64_t s = 1; s <= 16; ++s) CHECK(consume(c, s));
  CHECK_FALSE(consume(c, 17));
  CHECK(p.space(e) == 16u);
}

TEST_CASE("function: ring indices wrap around 2^32", "[rnic][function]") {
  for (const std::uint32_t slots : {16u, 64u}) {
    for (const std::uint32_t start : {0xFFFFFFFFu - 40, 0xFFFFFFFFu - 16, 0xFFFFFFFFu - 15, 0xFFFFFFFFu, 0x7FFFFFF8u}) {
      INFO("slots " << slots << " start " << start);
      region r(slots);
      auto [p, c] = sides_at(r.view.tx, slots, start);
      fn_errc e{};
      CHECK(p.space(e) == slots);
      CHECK(c.available(e) == 0u);
      std::uint64_t sent = 0, got = 0;
      for (int round = 0; round < 12; ++round) {
        // Fill it (or part of it), then drain: the indices cross 2^32 within the first rounds.
        const std::uint32_t n = round % 3 == 0 ? slots : 1 + static_cast<std::uint32_t>(round) % slots;
        for (std::uint32_t i = 0; i < n; ++i) REQUIRE(produce(p, sent++));
        CHECK(p.space(e) == slots - n);
        CHECK(c.available(e) == n);
        if (n == slots) CHECK_FALSE(produce(p, sent));
        while (consume(c, got)) ++got;
        CHECK(got == sent);
      }
      CHECK(p.produced() == static_cast<std::uint32_t>(start + sent));
      CHECK(c.consumed() == static_cast<std::uint32_t>(start + got));
      CHECK((c.consumed() < start) == (std::uint64_t{start} + got > 0xFFFFFFFFu));  // wrapped, or not yet
      CHECK(get32(r.view.tx + fn::producer_at) == p.produced());
    }
  }
}

TEST_CASE("function: ring slots follow the index modulo slot_count across the wrap", "[rnic][function]") {
  region r(16);
  auto [p, c] = sides_at(r.view.tx, 16, 0xFFFFFFF8u);
  std::vector<const std::byte*> where;
  for (int i = 0; i < 16; ++i) {
    where.push_back(p.next().data());
    fill(p.next(), static_cast<std::uint64_t>(i), length_of(static_cast<std::uint64_t>(i)));
    p.publish(length_of(static_cast<std::uint64_t>(i)));
  }
  // 16 distinct slots; index 0xFFFFFFF8 is slot 8, index 0 (after the wrap) slot 0.
  auto sorted = where;
  std::sort(sorted.begin(), sorted.end());
  CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end());
  const std::byte* slot0 = r.view.tx + fn::ring_control + fn::slot_header;
  CHECK(where[0] == slot0 + 8 * fn::slot_stride);
  CHECK(where[8] == slot0);
  for (std::uint64_t i = 0; i < 16; ++i) CHECK(consume(c, i));
}

TEST_CASE("function: the producer refuses a consumer index ahead of it or more than slot_count behind", "[rnic][function]") {
  for (const std::uint32_t start : {0u, 5u, 0xFFFFFFF0u, 0xFFFFFFFFu}) {
    INFO("start " << start);
    region r(16);
    auto [p, c] = sides_at(r.view.tx, 16, start);
    for (std::uint64_t s = 0; s < 10; ++s) REQUIRE(produce(p, s));
    const std::uint32_t head = p.produced();
    std::byte* consumer = r.view.tx + fn::consumer_at;
    struct probe {
      std::uint32_t published;
      std::optional<std::uint32_t> space;
    };
    for (const probe& x : std::vector<probe>{{head - 10, 6},
                                             {head - 3, 13},
                                             {head, 16},
                                             {head - 16, 0},
                                             {head + 1, std::nullopt},
                                             {head + 1000, std::nullopt},
                                             {head - 17, std::nullopt},
                                             {head - 0x80000000u, std::nullopt},
                                             {head + 0x7FFFFFFFu, std::nullopt}}) {
      INFO("consumer published " << x.published << " head " << head);
      put32(consumer, x.published);
      fn_errc e{};
      const auto s = p.space(e);
      CHECK(s == x.space);
      CHECK(e == (x.space ? fn_errc{} : fn_errc::ring_index_out_of_range));
    }
    (void)c;
  }
}

TEST_CASE("function: the consumer refuses a producer index more than slot_count ahead or behind", "[rnic][function]") {
  for (const std::uint32_t start : {0u, 0xFFFFFFF4u, 0xFFFFFFFFu}) {
    INFO("start " << start);
    region r(16);
    auto [p, c] = sides_at(r.view.tx, 16, start);
    for (std::uint64_t s = 0; s < 4; ++s) REQUIRE(produce(p, s));
    for (std::uint64_t s = 0; s < 4; ++s) REQUIRE(consume(c, s));
    const std::uint32_t tail = c.consumed();
    std::byte* producer = r.view.tx + fn::producer_at;
    struct probe {
      std::uint32_t published;
      std::optional<std::uint32_t> available;
    };
    for (const probe& x : std::vector<probe>{{tail, 0},
                                             {tail + 1, 1},
                                             {tail + 16, 16},
                                             {tail + 17, std::nullopt},
                                             {tail + 0x80000000u, std::nullopt},
                                             {tail - 1, std::nullopt},
                                             {tail - 16, std::nullopt}}) {
      INFO("producer published " << x.published << " tail " << tail);
      put32(producer, x.published);
      fn_errc e{};
      const auto n = c.available(e);
      CHECK(n == x.available);
      CHECK(e == (x.available ? fn_errc{} : fn_errc::ring_index_out_of_range));
    }
    (void)p;
  }
}

TEST_CASE("function: the consumer refuses a slot length of 0 or past the slot", "[rnic][function]") {
  region r(16);
  fn::ring_consumer c(r.view.tx, 16);
  std::byte* slot0 = r.view.tx + fn::ring_control;
  put32(r.view.tx + fn::producer_at, 1);
  fn_errc e{};
  REQUIRE(c.available(e) == 1u);
  struct probe {
    std::uint32_t len;
    bool ok;
  };
  for (const probe& x : std::vector<probe>{{0, false},
                                           {1, true},
                                           {4600, true},
                                           {4601, false},
                                           {4608, false},
                                           {0x10000, false},
                                           {0x80000000u, false},
                                           {0xFFFFFFFFu, false}}) {
    INFO("length " << x.len);
    put32(slot0, x.len);
    put32(slot0 + 4, 0xDEADBEEF);  // the reserved word is not read
    e = fn_errc{};
    const auto f = c.peek(e);
    CHECK(f.has_value() == x.ok);
    if (x.ok) {
      CHECK(f->data() == slot0 + fn::slot_header);
      CHECK(f->size() == x.len);
      CHECK(e == fn_errc{});
    } else {
      CHECK(e == fn_errc::slot_length_out_of_range);
    }
  }
  // The last slot of the ring: its longest frame ends where the ring ends.
  region r2(16);
  auto [p2, c2] = sides_at(r2.view.tx, 16, 15);
  put32(r2.view.tx + fn::producer_at, 16);
  put32(r2.view.tx + fn::ring_control + 15 * fn::slot_stride, fn::slot_capacity);
  const auto last = c2.peek(e);
  REQUIRE(last.has_value());
  CHECK(last->data() + last->size() == r2.view.tx + fn::ring_bytes(16));
  (void)p2;
}

TEST_CASE("function: arm_sleep sets sleeping only while the ring is empty", "[rnic][function]") {
  region r(16);
  fn::ring_producer p(r.view.tx, 16);
  fn::ring_consumer c(r.view.tx, 16);
  const std::byte* sleeping = r.view.tx + fn::sleeping_at;
  CHECK_FALSE(p.consumer_sleeping());
  // Empty: it may sleep; the producer sees it and would signal after publishing.
  CHECK(c.arm_sleep());
  CHECK(get32(sleeping) == 1);
  CHECK(p.consumer_sleeping());
  REQUIRE(produce(p, 0));
  CHECK(p.consumer_sleeping());  // still set until the consumer wakes and clears it
  c.disarm_sleep();
  CHECK(get32(sleeping) == 0);
  CHECK_FALSE(p.consumer_sleeping());
  // A slot waiting: arm_sleep refuses and leaves sleeping clear.
  CHECK_FALSE(c.arm_sleep());
  CHECK(get32(sleeping) == 0);
  CHECK_FALSE(p.consumer_sleeping());
  REQUIRE(consume(c, 0));
  CHECK(c.arm_sleep());
  CHECK(p.consumer_sleeping());
  c.disarm_sleep();
  // A producer index that is not the consumer's (even a wild one): not empty, no sleep.
  put32(r.view.tx + fn::producer_at, 0xFFFF0000u);
  CHECK_FALSE(c.arm_sleep());
  CHECK_FALSE(p.consumer_sleeping());
  // The sleeping flag of the rx ring is another word.
  fn::ring_consumer rx(r.view.rx, 16);
  CHECK(rx.arm_sleep());
  CHECK_FALSE(p.consumer_sleeping());
  CHECK(get32(r.view.rx + fn::sleeping_at) == 1);
}

TEST_CASE("function: arm_sleep_after sets the delay the producer reads and disarm_sleep clears it", "[rnic][function]") {
  region r(16);
  fn::ring_producer p(r.view.tx, 16);
  fn::ring_consumer c(r.view.tx, 16);
  CHECK(p.consumer_wake_after() == 0u);
  c.arm_sleep_after(250);
  CHECK(get32(r.view.tx + fn::sleeping_at) == 1);
  CHECK(get32(r.view.tx + fn::wake_after_at) == 250);
  CHECK(p.consumer_sleeping());
  CHECK(p.consumer_wake_after() == 250'000u);
  // Another thread consumes: a waiting slot does not stop it.
  REQUIRE(produce(p, 0));
  c.arm_sleep_after(0xFFFFFFFFu);
  CHECK(p.consumer_sleeping());
  CHECK(p.consumer_wake_after() == 0xFFFFFFFFull * 1000);
  c.disarm_sleep();
  CHECK(get32(r.view.tx + fn::sleeping_at) == 0);
  CHECK(get32(r.view.tx + fn::wake_after_at) == 0);
  CHECK_FALSE(p.consumer_sleeping());
  CHECK(p.consumer_wake_after() == 0u);
  // The plain handshake signals at once.
  REQUIRE(consume(c, 0));
  CHECK(c.arm_sleep());
  CHECK(p.consumer_wake_after() == 0u);
}

TEST_CASE("function: the ring control fields sit on their own 64-byte lines before the slots", "[rnic][function]") {
  std::vector<std::size_t> lines;
  for (const fn::field_info& f : fn::ring_fields) {
    INFO(f.name);
    if (f.name == "slots") {
      CHECK(f.offset == fn::ring_control);
      continue;
    }
    CHECK(f.size == 4);
    CHECK(f.offset % 64 == 0);
    CHECK(f.offset + f.size <= fn::ring_control);
    lines.push_back(f.offset / 64);
  }
  CHECK(std::adjacent_find(lines.begin(), lines.end(), std::greater_equal<>()) == lines.end());  // in order, one each
  CHECK(lines.size() + 1 == fn::ring_fields.size());
}

TEST_CASE("function: two threads pass a million frames through a ring in order", "[rnic][function]") {
  // The consumer sleeps on a semaphore (the eventfd) when the ring is empty, with the handshake
  // of arm_sleep / consumer_sleeping; a lost wakeup shows as a wait that times out with frames
  // waiting. A deadline only stops a hung run; nothing here measures time.
  constexpr std::uint64_t frames = 1'000'000;
  region r(16);
  fn::ring_producer p(r.view.tx, 16);
  fn::ring_consumer c(r.view.tx, 16);
  std::counting_semaphore<> doorbell(0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  std::atomic<bool> stop{false}, producer_done{false};
  std::uint64_t sent = 0, signals = 0, producer_errors = 0;
  std::uint64_t got = 0, wrong = 0, consumer_errors = 0, sleeps = 0, lost_wakeups = 0;
  std::thread producer([&] {
    while (sent < frames && !stop.load(std::memory_order_relaxed)) {
      fn_errc e{};
      const auto space = p.space(e);
      if (!space) {
        ++producer_errors;
        break;
      }
      if (*space == 0) {
        if (std::chrono::steady_clock::now() > deadline) break;
        std::this_thread::yield();
        continue;
      }
      // A burst of what fits, then one publish each (the indices are published per slot).
      for (std::uint32_t i = 0; i < *space && sent < frames; ++i, ++sent) {
        fill(p.next(), sent, length_of(sent));
        p.publish(length_of(sent));
      }
      if (p.consumer_sleeping()) {
        ++signals;
        doorbell.release();
      }
    }
    producer_done.store(true);
    doorbell.release();  // a consumer asleep for a producer that stopped early wakes
  });
  std::thread consumer([&] {
    int idle = 0;
    while (got < frames) {
      fn_errc e{};
      const auto n = c.available(e);
      if (!n) {
        ++consumer_errors;
        break;
      }
      if (*n == 0) {
        if (std::chrono::steady_clock::now() > deadline) break;
        if (producer_done.load() && c.available(e) == 0u) break;  // it stopped early: sent < frames
        if (++idle < 64) {
          std::this_thread::yield();
          continue;
        }
        idle = 0;
        if (!c.arm_sleep()) continue;
        ++sleeps;
        if (!doorbell.try_acquire_for(std::chrono::seconds(10))) {
          fn_errc e2{};
          const auto waiting = c.available(e2);
          if (waiting && *waiting > 0) ++lost_wakeups;
        }
        c.disarm_sleep();
        continue;
      }
      for (std::uint32_t i = 0; i < *n; ++i, ++got) {
        const auto f = c.peek(e);
        if (!f) {
          ++consumer_errors;
          got = frames;
          break;
        }
        if (!matches(*f, got)) ++wrong;
        c.pop();
      }
    }
    stop.store(true, std::memory_order_relaxed);
  });
  producer.join();
  consumer.join();
  INFO("sleeps " << sleeps << ", signals " << signals);
  CHECK(std::chrono::steady_clock::now() <= deadline);  // (only fails for a hung run)
  CHECK(producer_errors == 0);
  CHECK(consumer_errors == 0);
  CHECK(sent == frames);
  CHECK(got == frames);
  CHECK(wrong == 0);
  CHECK(lost_wakeups == 0);
  CHECK(p.produced() == static_cast<std::uint32_t>(frames));
  CHECK(c.consumed() == static_cast<std::uint32_t>(frames));
}

// Hidden (run by name): 2^32 + 40 slots really published and consumed, one at a time, so both
// private indices wrap without help. Seconds at -O3.
TEST_CASE("function: ring indices wrap around 2^32 by publishing", "[.][slow][rnic][function]") {
  region r(16);
  fn::ring_producer p(r.view.tx, 16);
  fn::ring_consumer c(r.view.tx, 16);
  fn_errc e{};
  const std::uint64_t before = (std::uint64_t{1} << 32) - 20;
  for (std::uint64_t i = 0; i < before; ++i) {
    p.publish(1);
    c.pop();
  }
  REQUIRE(p.produced() == 0xFFFFFFECu);
  REQUIRE(c.consumed() == 0xFFFFFFECu);
  for (std::uint64_t s = 0; s < 60; ++s) {
    REQUIRE(produce(p, s));
    REQUIRE(c.available(e) == 1u);
    REQUIRE(consume(c, s));
  }
  CHECK(p.produced() == 40u);
  CHECK(c.consumed() == 40u);
}

}  // namespace pw_function_test
