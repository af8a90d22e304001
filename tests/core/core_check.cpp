// The embeddable core (pushwire/core.hpp) in a program built with -fno-exceptions -fno-rtti
// (tests/core/check.cmake): a push-push message round trip, a 3000-byte SEND from a requester to
// a responder as RoCEv2 frames with verified ICRCs, and the same payload through cells. Exits 0
// and prints "core: ok" when every step gave what it must; otherwise names the failed step.
#include <pushwire/core.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdio>
#include <span>
#include <variant>
#include <vector>

using namespace pushwire;

namespace {

int failures = 0;
void expect(bool ok, const char* what) {
  if (!ok) {
    std::printf("core: FAILED: %s\n", what);
    ++failures;
  }
}

void message_round_trip() {
  const std::array<msg::pool_descriptor, 1> pools{{{.pool_ref = 7, .element_count = 64, .element_size = 256,
                                                    .memory_handle = 0x1234, .address = 0x10000}}};
  const msg::buffer_recv_pool m{.header = {.transaction_context = 42}, .pools = pools};
  std::array<std::byte, 256> buf{};
  const auto n = msg::encode(m, buf);
  expect(n && *n == 16 + 32, "encode BufferRecvPool: 16-byte fixed part + one 32-byte pool");
  if (!n) return;
  const auto back = msg::decode<msg::buffer_recv_pool>(std::span(buf).first(*n));
  expect(back && back->header.transaction_context == 42 && back->pools.size() == 1 && back->pools[0].element_size == 256,
         "decode BufferRecvPool");
  const auto f = msg::frame::make(m);
  expect(f && f->size() == *n && std::holds_alternative<msg::buffer_recv_pool>(f->view()), "msg::frame owns the message");
  expect(msg::decode(std::span(buf).first(*n - 1)).code() == wire::errc::trailing_bytes ||
             msg::decode(std::span(buf).first(*n - 1)).code() == wire::errc::truncated,
         "a frame cut by one byte is an error");
  expect(wire::make_error_code(wire::errc::count_mismatch).message() == "count_mismatch", "errc as std::error_code");
}

// One packet through a RoCEv2 frame: build, decode with the ICRC required, back to a packet.
bool through_roce(const flow::packet& p, std::vector<std::byte>& frame, flow::packet& out) {
  const ib::roce_packet r = flow::to_roce(p);
  const auto size = ib::frame_size(r);
  if (!size) return false;
  frame.assign(*size, std::byte{});
  if (!ib::build(r, frame)) return false;
  const auto back = ib::decode(frame, {.crc = wire::crc_check::require});
  if (!back || back->icrc_state != wire::crc_status::good) return false;
  out = flow::from_roce(*back);
  return true;
}

void send_over_roce() {
  std::vector<std::byte> message(3000);
  for (std::size_t i = 0; i < message.size(); ++i) message[i] = static_cast<std::byte>(i * 7);
  flow::requester<8> rq({.mtu = 1024, .dest_qp = 0x11});
  flow::responder<> rs({.mtu = 1024, .peer_qp = 0x22});
  rs.post_receive(1);
  std::array<flow::qp_action_t, 64> a{}, b{};
  flow::qp_sink to_resp{std::span(a)}, to_req{std::span(b)};
  expect(rq.post({.id = 1, .op = flow::wr_op::send, .length = 3000}, 0, to_resp).ok(), "post a SEND");
  std::vector<std::byte> frame;
  std::size_t packets = 0, placed = 0, received = 0, completed = 0;
  for (const auto& act : to_resp) {
    const auto* t = std::get_if<flow::qp_action::transmit>(&act);
    if (!t) continue;
    flow::packet p = t->pkt;
    p.payload = std::span<const std::byte>(message).subspan(p.offset, p.length);
    flow::packet got;
    expect(through_roce(p, frame, got) && got.opcode == p.opcode && got.psn == p.psn && got.dest_qp == 0x11 &&
               std::ranges::equal(got.payload, p.payload),
           "a request packet survives its RoCEv2 frame");
    ++packets;
    expect(rs.on_packet(got, to_req).ok(), "the responder takes the packet");
  }
  for (const auto& act : to_req) {
    if (const auto* pl = std::get_if<flow::qp_action::place>(&act)) placed += pl->length;
    if (const auto* rc = std::get_if<flow::qp_action::receive>(&act)) received += rc->bytes;
    const auto* t = std::get_if<flow::qp_action::transmit>(&act);
    if (!t) continue;
    flow::packet ack;
    expect(through_roce(t->pkt, frame, ack), "an ACK survives its RoCEv2 frame");
    to_resp.clear();
    expect(rq.on_packet(ack, 10, to_resp).ok(), "the requester takes the ACK");
    for (const auto& r : to_resp)
      if (const auto* c = std::get_if<flow::qp_action::complete>(&r))
        completed += c->wr_id == 1 && c->status == flow::wc_status::success;
  }
  expect(packets == 3, "3000 bytes at MTU 1024 are 3 packets");
  expect(placed == 3000 && received == 3000, "the responder placed and received 3000 bytes");
  expect(completed == 1 && rq.quiescent(), "the SEND completed with success");
}

void payload_through_cells() {
  std::vector<std::byte> payload(1000);
  for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<std::byte>(i ^ 0x5A);
  const cell::packet_spec spec{.dst = {{2, 0, 0, 0, 0, 1}},
                               .src = {{2, 0, 0, 0, 0, 2}},
                               .dst_wqp = 5, .src_wqp = 6, .psn = 9, .idata = 0x01020304};
  auto seg = cell::segmenter::make(spec, payload);
  expect(seg.has_value() && seg->cell_count() == 4, "1000 bytes in 256-byte cells are 4 cells");
  if (!seg) return;
  cell::reassembler r;
  std::vector<std::byte> f;
  bool delivered = false;
  while (!seg->done()) {
    f.assign(seg->next_size(), std::byte{});
    expect(seg->next(f).has_value(), "segment a cell");
    const cell::push_result res = r.push(f, 0);
    expect(res.status != cell::push_status::rejected, "the reassembler takes the cell");
    if (res.packet) {
      delivered = true;
      expect(std::ranges::equal(res.packet->payload, payload) && res.packet->idata == 0x01020304u,
             "the packet's payload and idata come back");
    }
  }
  expect(delivered, "the last cell delivers the packet");
}

}  // namespace

int main() {
  message_round_trip();
  send_over_roce();
  payload_through_cells();
  if (failures) return 1;
  std::puts("core: ok");
  return 0;
}
