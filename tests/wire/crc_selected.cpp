// Prints what crc32 / crc32c run in this process (PUSHWIRE_CRC_PATH or automatic), then whether
// both check values, and both CRCs of 100 B to 70000 B against the reference, come out right:
// crc_test.cpp runs it under several PUSHWIRE_CRC_PATH values.
#include <algorithm>
#include <cstdio>
#include <string_view>
#include <vector>

#include <pushwire/wire/crc.hpp>

namespace crc = pushwire::wire::crc;

int main() {
  constexpr std::string_view digits = "123456789";
  const auto bytes = std::as_bytes(std::span(digits));
  bool good = crc::crc32(bytes) == 0xCBF43926u && crc::crc32c(bytes) == 0xE3069283u;  // selects
  // and the selected paths at sizes where folding, crc32 streams beside it and sse42 run
  std::vector<std::byte> big(70000);
  std::uint32_t x = 12345;
  for (auto& b : big) b = static_cast<std::byte>((x = x * 1103515245u + 12345u) >> 24);
  for (std::size_t n : {100, 255, 256, 1023, 1024, 1500, 2047, 4095, 4096, 4097, 9000, 65536, 70000}) {
    const auto in = std::span<const std::byte>(big).first(n);
    good = good && crc::crc32c(in, 7) == crc::reference::crc32c(in, 7) && crc::crc32(in, 7) == crc::reference::crc32(in, 7);
  }
  // and a batch of cells' sizes, copying, on whatever the selection runs it
  std::vector<crc::crc32c_job> jobs;
  std::vector<std::vector<std::byte>> dst(9);
  for (std::size_t i = 0; i < dst.size(); ++i) {
    const auto src = std::span<const std::byte>(big).subspan(100 + i, i == 8 ? 3000 : 256 + i % 2);
    dst[i].resize(src.size());
    jobs.push_back({std::span<const std::byte>(big).first(32 + 4 * (i % 3)), src, dst[i].data(), 5});
  }
  crc::crc32c_batch(jobs);
  for (const auto& j : jobs)
    good = good && j.crc == crc::reference::crc32c(j.src, crc::reference::crc32c(j.head, 5)) &&
           std::equal(j.src.begin(), j.src.end(), j.dst);
  std::printf("crc32 %s\ncrc32c %s\n", crc::describe(crc::selected().crc32).c_str(),
              crc::describe(crc::selected().crc32c).c_str());
  std::printf("check values %s\n", good ? "good" : "BAD");
  return good ? 0 : 1;
}
