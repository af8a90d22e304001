// Differential: every runtime CRC path this CPU has (with a crc32-stream setting the input picks,
// and the fused copy, combine and concat)
// against the constexpr reference, on the input at an offset the input chooses.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include <pushwire/wire/crc.hpp>

#include "provider.hpp"

using namespace pushwire;
namespace crc = pushwire::wire::crc;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::provider in(data, size);
  const std::uint32_t seed = in.take<std::uint32_t>();
  const std::size_t offset = in.pick(64);
  // CRC-32C's crc32 streams beside folding: one allowed setting, from 1024 bytes.
  const crc::streams beside{crc::stream_words_allowed[in.pick(static_cast<std::uint8_t>(crc::stream_words_allowed.size()))], crc::streams_from_min};
  const auto body = in.rest();
  std::vector<std::byte> buf(offset + body.size());  // misaligned on purpose
  if (!body.empty()) std::memcpy(buf.data() + offset, body.data(), body.size());
  const std::span<const std::byte> s(buf.data() + offset, body.size());
  const std::uint32_t want_c = crc::reference::crc32c(s, seed);
  const std::uint32_t want = crc::reference::crc32(s, seed);
  std::vector<std::byte> copy(s.size() + 2);  // a guard byte either side
  for (const auto& name : crc::path_names) {
    const auto p = static_cast<crc::path>(name.value);
    if (!crc::available(p)) continue;
    PUSHWIRE_FUZZ_CHECK(crc::crc32c_with(p, s, seed) == want_c);
    PUSHWIRE_FUZZ_CHECK(crc::crc32c_with(p, beside, s, seed) == want_c);
    if (crc::implements(p, crc::crc32_poly)) PUSHWIRE_FUZZ_CHECK(crc::crc32_with(p, s, seed) == want);
    std::fill(copy.begin(), copy.end(), std::byte{0xEE});
    PUSHWIRE_FUZZ_CHECK(crc::crc32c_copy_with(p, std::span(copy).subspan(1, s.size()), s, seed) == want_c);
    PUSHWIRE_FUZZ_CHECK(copy.front() == std::byte{0xEE} && copy.back() == std::byte{0xEE});
    PUSHWIRE_FUZZ_CHECK(s.empty() || std::memcmp(copy.data() + 1, s.data(), s.size()) == 0);
  }
  PUSHWIRE_FUZZ_CHECK(crc::crc32c(s, seed) == want_c);
  PUSHWIRE_FUZZ_CHECK(crc::crc32(s, seed) == want);
  PUSHWIRE_FUZZ_CHECK(crc::crc32c_copy(std::span(copy).subspan(1, s.size()), s, seed) == want_c);
  PUSHWIRE_FUZZ_CHECK(s.empty() || std::memcmp(copy.data() + 1, s.data(), s.size()) == 0);
  const std::size_t cut = s.empty() ? 0 : seed % (s.size() + 1);
  const auto a = s.first(cut), b = s.subspan(cut);
  PUSHWIRE_FUZZ_CHECK(crc::crc32c_concat(a, b, seed) == want_c);
  PUSHWIRE_FUZZ_CHECK(crc::crc32c_combine(crc::reference::crc32c(a, seed), crc::reference::crc32c(b), b.size()) == want_c);
  PUSHWIRE_FUZZ_CHECK(crc::reference::crc32c_combine(crc::reference::crc32c(a, seed), crc::reference::crc32c(b), b.size()) == want_c);
  return 0;
}
