// The main job of `make demo`: one of every push-push message, each printed by pushwire-dump and
// round-tripped, then the split-model document's idata example. Usage: pushwire-demo PATH/TO/pushwire-dump
#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <pushwire/pushwire.hpp>

namespace {

using namespace pushwire;
int failures = 0;

void check(bool ok, const char* what) {
  std::printf("  %s: %s\n", what, ok ? "ok" : "FAILED");
  failures += !ok;
}

// Builds m, prints it with pushwire-dump (text and JSON), and round-trips it.
template <msg::message_type M>
void show(const char* dump, const M& m) {
  std::vector<std::byte> frame(msg::encoded_size(m));
  auto n = msg::encode(m, frame);
  std::printf("\n=== %s: %zu bytes\n%s\n", msg::name(msg::code_of<M>).data(), frame.size(),
              wire::hexdump(frame, 2).c_str());
  check(n.has_value(), "encode");
  for (const char* mode : {"", "--json "}) {
    const std::string cmd = std::string("'") + dump + "' " + mode + "--hex " + wire::to_hex(frame);
    std::printf("$ pushwire-dump %s--hex %s\n", mode, wire::to_hex(frame).c_str());
    std::fflush(stdout);
    check(std::system(cmd.c_str()) == 0, "pushwire-dump");
  }
  auto back = msg::decode<M>(frame);
  check(back.has_value() && *back == m, "decode(encode(m)) == m");
  std::vector<std::byte> again(frame.size());
  check(back && msg::encode(*back, again).has_value() && again == frame, "encode(decode(bytes)) == bytes");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s PATH/TO/pushwire-dump\n", argv[0]);
    return 1;
  }
  const char* dump = argv[1];
  using namespace msg;
  const std::array<pool_descriptor, 2> pools{{
      {.pool_ref = 7, .element_count = 64, .element_size = 256, .memory_handle = 0x1234,
       .address = 0x7f0000010000, .pool_context = 0x12b7'c0a8'0001},
      {.pool_ref = 8, .element_count = 16, .element_size = 4096, .memory_handle = 0x5678,
       .address = 0x7f0000020000},
  }};
  const std::array<pool_update_entry, 1> updates{{{.pool_ref = 7, .first_element = 0, .element_count = 6}}};
  const std::array<std::uint32_t, 2> refs{7, 8};
  const std::string text = "ping from the host";
  const auto payload = std::as_bytes(std::span(text));
  const std::array<indication, 1> big{{{.pool_ref = 300, .element_index = 2, .byte_count = 1500}}};
  const std::array<std::byte, 6> mac{std::byte{0x02}, {}, {}, {}, {}, std::byte{0x01}};
  const std::array<std::byte, 8> link{{{}, {}, {}, std::byte{1}, {}, std::byte{0x01}, std::byte{0x86}, std::byte{0xa0}}};

  std::puts("pushwire demo: one of every push-push message (split-model driver, IV.B)");
  show(dump, buffer_recv_pool{.header = {.transaction_context = 1}, .pools = pools});
  show(dump, buffer_recv_pool_get{.header = {.transaction_context = 2}, .element_size = 2048, .element_count = 32});
  show(dump, buffer_recv_pool_update{.header = {.transaction_context = 3}, .entries = updates});
  show(dump, buffer_pool_flush_request{.header = {.transaction_context = 4}, .pool_refs = refs});
  show(dump, buffer_pool_flush_reply{.header = {.transaction_context = 4}});
  show(dump, send_data{.header = {.transaction_context = 5}, .data = payload});
  show(dump, buffer_rdma_indicate{.header = {.transaction_context = 6}, .entries = big});
  show(dump, cfg_util_request{.header = {.transaction_context = 7},
                              .request_code = cfg::request_code::set_mac_address, .data = mac});
  show(dump, cfg_util_reply{.header = {.transaction_context = 8},
                            .request_code = cfg::request_code::get_link_state,
                            .status = cfg::status::success, .data = link});

  std::puts("\n=== idata: the split-model document's example (Fig. 7): pool 7, element 5, 256 bytes");
  const indication seed{.pool_ref = 7, .element_index = 5, .byte_count = 256};
  const auto carrier = choose_carrier(seed);
  check(std::holds_alternative<idata>(carrier), "fits the 32-bit immediate");
  const std::uint32_t imm = to_imm(std::get<idata>(carrier));
  std::printf("  idata = 0x%08x (%s)\n", imm, wire::to_json(std::get<idata>(carrier)).c_str());
  check(imm == 0x07050100, "0x07050100 as the split-model document says");
  check(to_indication(from_imm(imm)) == seed, "decodes back to (7, 5, 256)");
  std::printf("  pool 300, element 2, 1500 bytes does not fit: %s\n",
              std::holds_alternative<indication>(choose_carrier(big[0]))
                  ? "sent as BufferRDMAIndicate (above)" : "idata?!");

  std::printf("\n%s\n", failures ? "demo: FAILED" : "demo: every message encoded, dumped and round-tripped");
  return failures ? 1 : 0;
}
