// Push-push: the message dispatcher on arbitrary frames (every function code). A frame that
// decodes re-encodes to the same bytes.
#include <array>
#include <cstdint>
#include <span>

#include <pushwire/msg/message.hpp>

#include "provider.hpp"

using namespace pushwire;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> frame(reinterpret_cast<const std::byte*>(data), size);
  const wire::error e = msg::dispatch(frame, [&](const auto& m) {
    std::array<std::byte, 8192> again{};
    const auto n = msg::encode(m, again);
    PUSHWIRE_FUZZ_CHECK(n.has_value());
    PUSHWIRE_FUZZ_CHECK(*n == size);
    PUSHWIRE_FUZZ_CHECK(std::equal(frame.begin(), frame.end(), again.begin()));
  });
  PUSHWIRE_FUZZ_CHECK(e.code == wire::errc{} || e.offset <= size + 4096);
  return 0;
}
