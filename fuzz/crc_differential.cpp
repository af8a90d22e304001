// Differential: every runtime CRC path this CPU has (with a crc32-stream setting the input picks,
// and the fused copy, combine, concat, a prepared shift and a batch)
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
  PUSHWIRE_FUZZ_CHECK(crc::crc32c_shift(b.size()).combine(crc::reference::crc32c(a, seed), crc::reference::crc32c(b)) == want_c);
  // A batch: the input cut into up to 8 jobs of a head and a source (alike, as cells, when the
  // seed's low bit says so), some of them copying, each against the reference.
  std::vector<crc::crc32c_job> jobs;
  std::vector<std::uint32_t> wants;
  std::uint32_t r = seed;
  const auto next = [&] { return (r = r * 1103515245u + 12345u) >> 8; };
  const std::size_t hn0 = next() % 80, sn0 = next() % 700;
  for (std::size_t at = 0; at < s.size() && jobs.size() < 8;) {
    const std::size_t hn = std::min<std::size_t>(s.size() - at, seed & 1 ? hn0 : next() % 80);
    const std::size_t sn = std::min<std::size_t>(s.size() - at - hn, seed & 1 ? sn0 : next() % 700);
    jobs.push_back({s.subspan(at, hn), s.subspan(at + hn, sn), nullptr, next()});
    wants.push_back(crc::reference::crc32c(jobs.back().src, crc::reference::crc32c(jobs.back().head, jobs.back().crc)));
    at += hn + sn;
  }
  std::vector<std::vector<std::byte>> outs(jobs.size());
  for (std::size_t i = 0; i < jobs.size(); ++i)
    if (next() & 1) outs[i].assign(jobs[i].src.size() + 2, std::byte{0xEE}), jobs[i].dst = outs[i].data() + 1;
  crc::crc32c_batch(jobs);
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    PUSHWIRE_FUZZ_CHECK(jobs[i].crc == wants[i]);
    if (!jobs[i].dst) continue;
    PUSHWIRE_FUZZ_CHECK(outs[i].front() == std::byte{0xEE} && outs[i].back() == std::byte{0xEE});
    PUSHWIRE_FUZZ_CHECK(jobs[i].src.empty() || std::memcmp(jobs[i].dst, jobs[i].src.data(), jobs[i].src.size()) == 0);
  }
  return 0;
}
