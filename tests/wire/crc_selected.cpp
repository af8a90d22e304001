// Prints what crc32 / crc32c run in this process (PUSHWIRE_CRC_PATH or automatic), then whether
// both check values come out right: crc_test.cpp runs it under several PUSHWIRE_CRC_PATH values.
#include <cstdio>
#include <string_view>

#include <pushwire/wire/crc.hpp>

namespace crc = pushwire::wire::crc;

int main() {
  constexpr std::string_view digits = "123456789";
  const auto bytes = std::as_bytes(std::span(digits));
  const bool good = crc::crc32(bytes) == 0xCBF43926u && crc::crc32c(bytes) == 0xE3069283u;  // selects
  std::printf("crc32 %s\ncrc32c %s\n", crc::describe(crc::selected().crc32).c_str(),
              crc::describe(crc::selected().crc32c).c_str());
  std::printf("check values %s\n", good ? "good" : "BAD");
  return good ? 0 : 1;
}
