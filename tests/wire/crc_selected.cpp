// Prints what crc32 / crc32c run in this process (PUSHWIRE_CRC_PATH or automatic), then whether
// both check values come out right: crc_test.cpp runs it under several PUSHWIRE_CRC_PATH values.
#include <cstdio>
#include <string_view>

#include <pushwire/wire/crc.hpp>

namespace crc = pushwire::wire::crc;

namespace {
void show(const char* name, const crc::choice& c) {
  if (c.small_below == 0)
    std::printf("%s %s at every size\n", name, crc::to_string(c.large).data());
  else
    std::printf("%s %s below %zu bytes, then %s\n", name, crc::to_string(c.small).data(), c.small_below,
                crc::to_string(c.large).data());
}
}  // namespace

int main() {
  constexpr std::string_view digits = "123456789";
  const auto bytes = std::as_bytes(std::span(digits));
  const bool good = crc::crc32(bytes) == 0xCBF43926u && crc::crc32c(bytes) == 0xE3069283u;  // selects
  show("crc32", crc::selected().crc32);
  show("crc32c", crc::selected().crc32c);
  std::printf("check values %s\n", good ? "good" : "BAD");
  return good ? 0 : 1;
}
