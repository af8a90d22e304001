// The README's example, compiled and run by ctest so the README cannot rot.
#include <array>
#include <cstdio>

// [readme]
#include <pushwire/pushwire.hpp>
namespace msg = pushwire::msg;

int main() {
  const std::array<msg::pool_descriptor, 1> pools{{{.pool_ref = 7, .element_count = 64,
      .element_size = 256, .memory_handle = 0x1234, .address = 0x10000}}};
  std::array<std::byte, 4096> frame{};
  auto n = msg::encode(msg::buffer_recv_pool{.header = {.transaction_context = 42}, .pools = pools}, frame);
  auto m = msg::decode(std::span(frame).first(n.value()));  // result<message>: value or errc
  if (!m) return 1;  // m.code() says why: truncated, count_mismatch, ...
  std::puts(msg::to_json(*m).c_str());  // {"pushwire.function":"BufferRecvPool",...}
}
// [/readme]
