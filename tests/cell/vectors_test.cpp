// Cell vectors: each checked by static_assert (constexpr encode, segmenter and decode) and again
// at run time through the runtime paths (dispatched CRC, memcpy, Boost.Endian).
#include "vectors.hpp"

#include <algorithm>
#include <vector>

using namespace pushwire;
using namespace pushwire::test::cells;

namespace {

template <std::size_t N>
constexpr bool decodes_to(const std::array<std::byte, N>& f, cell_type t, bool first, bool last, std::size_t length) {
  auto v = cell::decode(f, {.crc = wire::crc_check::require, .max_cell_payload = 256});
  return v && v->crc_state == wire::crc_status::good && v->hdr.type == t && v->hdr.first == first && v->hdr.last == last &&
         v->hdr.length == length && v->data.size() == length;
}

constexpr auto segment_one(const packet_spec& p, std::span<const std::byte> payload) {
  return segment<1>(p, payload, default_cell_payload)[0];
}

// The segmenter gives the spelled bytes.
static_assert(same(segment_one(send_spec(), ping), send_bytes));
static_assert(same(segment_one(ack_spec(), {}), ack_bytes));
static_assert(same(segment_one(nak_spec(), {}), nak_bytes));
static_assert(same(segment_one(pfd_spec(), {}), pfd_bytes));
static_assert([] {
  const auto cells = segment<3>(write_spec(), write_payload, write_cell_payload);
  return same(cells[0], write_first_bytes) && same(cells[1], write_middle_bytes) && same(cells[2], write_last_bytes);
}());

// The single-cell encoder gives them too, from the fields.
static_assert([] {
  cell_spec s{.dst = iou, .src = host, .data = ping};
  s.hdr.type = cell_type::send;
  s.hdr.first = true;
  s.hdr.last = true;
  s.hdr.ack_req = true;
  s.hdr.dst_wqp = 0x22;
  s.hdr.src_wqp = 0x11;
  s.hdr.psn = 0x64;
  s.hdr.cell_count = 1;
  std::array<std::byte, 60> out{};
  return cell::frame_size(s) == 60 && cell::encode(s, out).value() == 60 && same(out, send_bytes);
}());
static_assert([] {
  cell_spec s{.dst = iou, .src = host};
  s.hdr.type = cell_type::rdma_write;
  s.hdr.first = false;
  s.hdr.last = true;
  s.hdr.dst_wqp = 0x22;
  s.hdr.src_wqp = 0x11;
  s.hdr.psn = 0x1F4;
  s.hdr.csn = 2;
  s.hdr.cell_count = 3;
  s.idata = 0x07050100;
  s.data = std::span(write_payload).subspan(16);
  // The packet CRC over the first two cells' packet parts (their bytes before the cell CRC).
  s.prior_packet_crc = wire::crc::crc32c(std::span(write_middle_bytes).first(40),
                                         wire::crc::crc32c(std::span(write_first_bytes).first(52)));
  std::array<std::byte, 60> out{};
  return cell::encode(s, out).value() == 60 && same(out, write_last_bytes);
}());

// Decode reads the fields back.
static_assert(decodes_to(send_bytes, cell_type::send, true, true, 4));
static_assert(decodes_to(write_first_bytes, cell_type::rdma_write, true, false, 8));
static_assert(decodes_to(write_middle_bytes, cell_type::rdma_write, false, false, 8));
static_assert(decodes_to(write_last_bytes, cell_type::rdma_write, false, true, 4));
static_assert(decodes_to(ack_bytes, cell_type::ack, true, true, 0));
static_assert(cell::decode(write_first_bytes)->rdma->va == 0x00007f0000010500 && cell::decode(write_first_bytes)->rdma->mh == 0x1234);
static_assert(*cell::decode(write_last_bytes)->idata == 0x07050100);
static_assert(cell::decode(pfd_bytes)->ack->delay_us == 2000 && cell::decode(pfd_bytes)->hdr.psn == 0x1F5);
static_assert(cell::decode(nak_bytes)->ack->code == 2);

struct vector_case {
  const char* name;
  std::span<const std::byte> bytes;
  cell_type type;
  std::size_t length;
};

}  // namespace

TEST_CASE("cell vectors: decode and segment at run time", "[cells][vectors]") {
  const vector_case cases[] = {
      {"send", send_bytes, cell_type::send, 4},          {"write first", write_first_bytes, cell_type::rdma_write, 8},
      {"write middle", write_middle_bytes, cell_type::rdma_write, 8}, {"write last", write_last_bytes, cell_type::rdma_write, 4},
      {"ack", ack_bytes, cell_type::ack, 0},             {"nak", nak_bytes, cell_type::nak, 0},
      {"page-fault delay", pfd_bytes, cell_type::page_fault_delay, 0},
  };
  for (const auto& c : cases) {
    INFO(c.name);
    const std::vector<std::byte> f = test::copy(c.bytes);
    auto v = cell::decode(f, {.crc = wire::crc_check::require});
    REQUIRE(v.has_value());
    CHECK(v->crc_state == wire::crc_status::good);
    CHECK(v->hdr.type == c.type);
    CHECK(v->data.size() == c.length);
    CHECK(v->eth().src == host);
    CHECK(v->eth().dst == iou);
    CHECK(v->at.end() <= 60);
    CHECK(!v->has_vlan);
  }
  auto last = cell::decode(std::span<const std::byte>(write_last_bytes));
  REQUIRE(last);
  CHECK(*last->idata == 0x07050100);
  // Across all cells: each cell's bytes before its CRC fields, in order.
  // Sized once, then copied: g++-12 -O3 warns falsely (-Warray-bounds) on insert after resize.
  std::vector<std::byte> parts(52 + 40 + 40);
  std::copy_n(write_first_bytes.begin(), 52, parts.begin());
  std::copy_n(write_middle_bytes.begin(), 40, parts.begin() + 52);
  std::copy_n(write_last_bytes.begin(), 40, parts.begin() + 92);
  CHECK(*last->packet_crc == wire::crc::crc32c(parts));
  const std::vector<std::byte> send_heap = test::copy(send_bytes);
  CHECK(*cell::decode(std::span<const std::byte>(send_heap))->packet_crc == wire::crc::crc32c(std::span(send_heap).first(36)));
  auto pfd = cell::decode(std::span<const std::byte>(pfd_bytes));
  REQUIRE(pfd);
  CHECK(pfd->ack->delay_us == 2000);

  // The segmenter at run time, from heap copies, single span and scattered.
  const std::vector<std::byte> payload = test::copy(write_payload);
  const std::vector<std::vector<std::byte>> want{test::copy(write_first_bytes), test::copy(write_middle_bytes),
                                                  test::copy(write_last_bytes)};
  const std::span<const std::byte> all(payload);
  const std::array<std::span<const std::byte>, 4> pieces{all.first(3), all.subspan(3, 0), all.subspan(3, 10), all.subspan(13)};
  for (int scattered = 0; scattered < 2; ++scattered) {
    INFO("scattered " << scattered);
    auto s = scattered ? cell::segmenter::make(write_spec(), std::span<const std::span<const std::byte>>(pieces), write_cell_payload)
                       : cell::segmenter::make(write_spec(), all, write_cell_payload);
    REQUIRE(s);
    CHECK(s->cell_count() == 3);
    for (const auto& w : want) {
      std::vector<std::byte> out(s->next_size());
      auto n = s->next(out);
      REQUIRE(n);
      CHECK(*n == 60);
      CHECK(out == w);
    }
    CHECK(s->done());
    std::array<std::byte, 64> spare{};
    CHECK(*s->next(spare) == 0);
  }
  std::vector<std::byte> out(60);
  const std::vector<std::byte> ping_heap = test::copy(ping);
  auto s = cell::segmenter::make(send_spec(), std::span<const std::byte>(ping_heap));
  REQUIRE(s);
  REQUIRE(s->next(out));
  CHECK(out == test::copy(send_bytes));
}
