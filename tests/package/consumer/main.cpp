#include <pushwire/pushwire.hpp>

#include <array>
#include <cstdio>

int main() {
  namespace msg = pushwire::msg;
  std::array<std::byte, 64> buf{};
  const msg::buffer_pool_flush_reply reply{.header = {.transaction_context = 7}};
  auto n = msg::encode(reply, buf);
  auto back = msg::decode<msg::buffer_pool_flush_reply>(std::span(buf).first(n.value()));
  std::puts(msg::to_json(*back).c_str());
  return back && *back == reply ? 0 : 1;
}
