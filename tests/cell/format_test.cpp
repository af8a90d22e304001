// Cell decode and encode errors: every truncation, every single-byte corruption, and each named
// rule of spec/cells.md §3 at its byte and field.
#include "vectors.hpp"

#include <pushwire/cell/testing.hpp>

#include <vector>

using namespace pushwire;
using namespace pushwire::test::cells;
using wire::errc;

namespace {

const std::vector<std::span<const std::byte>> all_vectors{send_bytes,  write_first_bytes, write_middle_bytes,
                                                          write_last_bytes, ack_bytes,   nak_bytes, pfd_bytes};

// A copy of f with one edit applied and the cell CRC recomputed, so decode reaches the rule.
template <class Edit>
std::vector<std::byte> edited(std::span<const std::byte> f, Edit edit) {
  std::vector<std::byte> b(f.begin(), f.end());
  edit(b);
  REQUIRE(cell::testing::reseal(b).code == errc{});
  return b;
}

void set_byte(std::vector<std::byte>& b, std::size_t at, unsigned v) { b[at] = static_cast<std::byte>(v); }
void or_byte(std::vector<std::byte>& b, std::size_t at, unsigned v) { b[at] |= static_cast<std::byte>(v); }
void clear_bits(std::vector<std::byte>& b, std::size_t at, unsigned v) { b[at] &= static_cast<std::byte>(~v & 0xFF); }

wire::error decode_error(std::span<const std::byte> f, wire::codec_options opt = {.crc = wire::crc_check::require}) {
  cell::cell_view v{};
  return cell::decode_into(f, v, opt);
}

constexpr std::size_t H = 14;  // the cell header's offset in an untagged frame

}  // namespace

TEST_CASE("every truncation is truncated or length_mismatch, or the unpadded cell", "[cells][format]") {
  for (auto f : all_vectors) {
    const std::vector<std::byte> full(f.begin(), f.end());
    const auto whole = cell::decode(std::span<const std::byte>(full));
    REQUIRE(whole);
    for (std::size_t k = 0; k < full.size(); ++k) {
      INFO("cut to " << k);
      const std::span<const std::byte> cut(full.data(), k);
      cell::cell_view v{};
      const auto e = cell::decode_into(cut, v, {.crc = wire::crc_check::require});
      if (k == whole->at.end()) {  // the cell without its Ethernet padding
        CHECK(e.code == errc{});
        CHECK(wire::equal(v.hdr, whole->hdr));
        continue;
      }
      if (k < H + cell::header_size) {
        CHECK(e.code == errc::truncated);
        CHECK(e.field == (k < H ? "eth" : "header"));
        CHECK(e.offset == k);
      } else {
        CHECK(e.code == errc::length_mismatch);
        CHECK(e.offset == H + 16);
        CHECK(e.field == "length");
      }
    }
  }
}

TEST_CASE("every single-byte corruption is caught or lands in the padding", "[cells][format]") {
  std::size_t caught = 0, padding = 0;
  for (auto f : all_vectors) {
    const auto whole = cell::decode(f);
    REQUIRE(whole);
    std::vector<std::byte> b(f.begin(), f.end());
    for (std::size_t i = 0; i < b.size(); ++i)
      for (unsigned mask : {0x01u, 0x80u, 0xFFu, 0x5Au}) {
        b[i] ^= static_cast<std::byte>(mask);
        cell::cell_view v{};
        const auto e = cell::decode_into(b, v, {.crc = wire::crc_check::require});
        if (i >= whole->at.end()) {
          CHECK(e.code == errc{});  // padding is not covered
          ++padding;
        } else {
          INFO("byte " << i << " ^ " << mask);
          CHECK(e.code != errc{});
          // In report mode a structurally sound corruption decodes with the CRC marked bad.
          cell::cell_view r{};
          if (cell::decode_into(b, r, {.crc = wire::crc_check::report}).code == errc{}) CHECK(r.crc_state == wire::crc_status::bad);
          ++caught;
        }
        b[i] ^= static_cast<std::byte>(mask);
      }
  }
  CHECK(caught > 1000);
  CHECK(padding > 0);
}

TEST_CASE("each rule is reported by name, at its byte", "[cells][format]") {
  using E = wire::error;
  // Before the CRC: Ethernet, version, reserved bits, type, length.
  auto not_cell = std::vector<std::byte>(send_bytes.begin(), send_bytes.end());
  set_byte(not_cell, 12, 0x08), set_byte(not_cell, 13, 0x00);
  CHECK(decode_error(not_cell) == E{errc::not_cell, 12, "eth.type"});
  auto v2 = std::vector<std::byte>(send_bytes.begin(), send_bytes.end());
  set_byte(v2, H, 0x20);
  CHECK(decode_error(v2) == E{errc::unsupported_version, H, "version"});
  CHECK(decode_error(edited(send_bytes, [](auto& b) { or_byte(b, H + 1, 0x02); })) == E{errc::reserved_nonzero, H + 1, "resv_flags"});
  // the response flag is a Transport cell's only
  CHECK(decode_error(edited(send_bytes, [](auto& b) { or_byte(b, H + 1, 0x04); })) == E{errc::invalid_field, H + 1, "response"});
  CHECK(decode_error(edited(send_bytes, [](auto& b) { set_byte(b, H + 8, 1); })) == E{errc::reserved_nonzero, H + 8, "resv8"});
  CHECK(decode_error(edited(send_bytes, [](auto& b) { set_byte(b, H, 0x16); })) == E{errc::invalid_field, H, "type"});
  auto longer = std::vector<std::byte>(send_bytes.begin(), send_bytes.end());
  longer.push_back(std::byte{0});
  CHECK(decode_error(longer) == E{errc::length_mismatch, H + 16, "length"});
  // The CRC.
  auto flipped = std::vector<std::byte>(send_bytes.begin(), send_bytes.end());
  flipped[H + 18] ^= std::byte{1};
  CHECK(decode_error(flipped) == E{errc::cell_crc_mismatch, H + 18 + 4 + 4, "crc"});
  CHECK(decode_error(flipped, {.crc = wire::crc_check::report}).code == errc{});
  CHECK(decode_error(flipped, {.crc = wire::crc_check::skip}).code == errc{});
  // After the CRC: the header rules.
  CHECK(decode_error(send_bytes, {.crc = wire::crc_check::require, .max_cell_payload = 3}) == E{errc::too_large, H + 16, "length"});
  CHECK(decode_error(edited(send_bytes, [](auto& b) { set_byte(b, H + 15, 0); })) == E{errc::zero_count, H + 14, "cell_count"});
  CHECK(decode_error(edited(write_middle_bytes, [](auto& b) { set_byte(b, H + 13, 3); })) == E{errc::invalid_field, H + 12, "csn"});
  CHECK(decode_error(edited(write_middle_bytes, [](auto& b) { or_byte(b, H + 1, 0x80); })) == E{errc::invalid_field, H + 1, "first"});
  CHECK(decode_error(edited(send_bytes, [](auto& b) { clear_bits(b, H + 1, 0x40); })) == E{errc::invalid_field, H + 1, "last"});
  CHECK(decode_error(edited(write_first_bytes, [](auto& b) { or_byte(b, H + 1, 0x20); })) == E{errc::invalid_field, H + 1, "has_idata"});
  CHECK(decode_error(edited(write_first_bytes, [](auto& b) { clear_bits(b, H + 1, 0x08); })) == E{errc::vamh_missing, H + 1, "has_vamh"});
  CHECK(decode_error(edited(write_middle_bytes, [](auto& b) { or_byte(b, H + 1, 0x08); })) == E{errc::vamh_unexpected, H + 1, "has_vamh"});
  CHECK(decode_error(edited(send_bytes, [](auto& b) { or_byte(b, H + 1, 0x08); })) == E{errc::vamh_unexpected, H + 1, "has_vamh"});
  CHECK(decode_error(edited(ack_bytes, [](auto& b) { or_byte(b, H + 1, 0x20); })) == E{errc::invalid_field, H + 1, "has_idata"});
  CHECK(decode_error(edited(ack_bytes, [](auto& b) { set_byte(b, H + 15, 2), clear_bits(b, H + 1, 0x40); })) ==
        E{errc::invalid_field, H + 14, "cell_count"});
  CHECK(decode_error(edited(ack_bytes, [](auto& b) { set_byte(b, H + 17, 4); })) == E{errc::invalid_field, H + 16, "length"});
  // The ACK info.
  constexpr std::size_t A = H + cell::header_size;
  CHECK(decode_error(edited(ack_bytes, [](auto& b) { set_byte(b, A, 1); })) == E{errc::invalid_field, A, "code"});
  CHECK(decode_error(edited(nak_bytes, [](auto& b) { set_byte(b, A, 4); })) == E{errc::invalid_field, A, "code"});
  CHECK(decode_error(edited(ack_bytes, [](auto& b) { set_byte(b, A + 7, 1); })) == E{errc::invalid_field, A + 4, "delay_us"});
  CHECK(decode_error(edited(ack_bytes, [](auto& b) { set_byte(b, A + 2, 1); })) == E{errc::reserved_nonzero, A + 1, "resv"});
  CHECK(decode_error(edited(pfd_bytes, [](auto& b) { set_byte(b, A + 7, 1); })).code == errc{});  // any delay
}

TEST_CASE("an 802.1Q-tagged cell decodes, its CRC covering the tag", "[cells][format]") {
  auto p = send_spec();
  p.vlan = wire::vlan_tag{.priority = 5, .id = 42};
  const std::vector<std::byte> payload = test::copy(ping);
  auto s = cell::segmenter::make(p, std::span<const std::byte>(payload));
  REQUIRE(s);
  std::vector<std::byte> f(s->next_size());
  REQUIRE(s->next(f));
  CHECK(f.size() == 60);
  auto v = cell::decode(std::span<const std::byte>(f), {.crc = wire::crc_check::require});
  REQUIRE(v);
  CHECK(v->has_vlan);
  CHECK(v->vlan()->id == 42);
  CHECK(v->at.header == 18);
  CHECK(v->data.size() == 4);
  f[15] ^= std::byte{0x01};  // the tag's VLAN id
  CHECK(decode_error(f).code == errc::cell_crc_mismatch);
}

TEST_CASE("encode and segmenter reject what decode would", "[cells][format]") {
  using E = wire::error;
  std::array<std::byte, 128> out{};
  cell::cell_spec s{.dst = iou, .src = host};
  s.hdr.type = cell_type::send;
  s.hdr.first = true;
  s.hdr.last = true;
  s.hdr.cell_count = 1;
  CHECK(cell::encode(s, out).value() == 60);
  CHECK(cell::encode(s, std::span(out).first(59)).error() == E{errc::no_space, 59, {}});
  auto bad = s;
  bad.ack = cell::ack_info{};
  CHECK(cell::encode(bad, out).error().field == "ack");
  bad = s;
  bad.rdma = cell::vamh{};
  CHECK(cell::encode(bad, out).error().code == errc::vamh_unexpected);
  bad = s;
  bad.hdr.psn = 0x1000000;
  CHECK(cell::encode(bad, out).error().code == errc::invalid_field);
  std::vector<std::byte> huge(70000);
  bad = s;
  bad.data = huge;
  CHECK(cell::encode(bad, out).error() == E{errc::too_large, 0, "length"});

  const std::vector<std::byte> some(10);
  const std::span<const std::byte> d(some);
  auto err = [&](const cell::packet_spec& p, std::span<const std::byte> payload = {}, std::size_t cp = 256) {
    auto r = cell::segmenter::make(p, payload, cp);
    REQUIRE(!r);
    return r.error();
  };
  CHECK(err(send_spec(), d, 0) == E{errc::invalid_field, 0, "cell_payload"});
  CHECK(err(send_spec(), d, 65536) == E{errc::too_large, 0, "cell_payload"});
  auto p = send_spec();
  p.dst_wqp = 1u << 24;
  CHECK(err(p).field == "dst_wqp");
  p = send_spec();
  p.psn = 1u << 24;
  CHECK(err(p).field == "psn");
  p = send_spec();
  p.type = static_cast<cell_type>(9);
  CHECK(err(p).field == "type");
  p = send_spec();
  p.rdma = cell::vamh{};
  CHECK(err(p).code == errc::vamh_unexpected);
  p = write_spec();
  p.rdma.reset();
  CHECK(err(p).code == errc::vamh_missing);
  p = ack_spec();
  p.ack.reset();
  CHECK(err(p).field == "ack");
  CHECK(err(ack_spec(), d).field == "payload");
  p = nak_spec();
  p.ack->code = 7;
  CHECK(err(p).field == "code");
  p = ack_spec();
  p.idata = 1;
  CHECK(err(p).field == "idata");
  p = send_spec();
  p.ack = cell::ack_info{};
  CHECK(err(p).field == "ack");
  const std::vector<std::byte> big(65536);
  CHECK(err(send_spec(), big, 1) == E{errc::too_large, 0, "payload"});
  CHECK(cell::segmenter::make(send_spec(), std::span<const std::byte>(big).first(65535), 1)->cell_count() == 65535);
  // no_space consumes nothing: the same cell comes next.
  auto seg = cell::segmenter::make(write_spec(), std::span<const std::byte>(write_payload), write_cell_payload).value();
  std::array<std::byte, 60> frame{};
  CHECK(seg.next(std::span(frame).first(10)).error().code == errc::no_space);
  REQUIRE(seg.next(frame));
  CHECK(test::copy(frame) == test::copy(write_first_bytes));
}

TEST_CASE("reseal reports frames with no place for a CRC", "[cells][format]") {
  std::vector<std::byte> b(send_bytes.begin(), send_bytes.end());
  CHECK(cell::testing::reseal(std::span(b).first(10)).code == errc::truncated);
  CHECK(cell::testing::reseal(std::span(b).first(30)).code == errc::truncated);
  set_byte(b, H + 17, 200);  // a length past the frame's end
  CHECK(cell::testing::reseal(b).code == errc::length_mismatch);
  b[12] = std::byte{0};
  CHECK(cell::testing::reseal(b).code == errc::not_cell);
}
