// Cells: a single cell decode on arbitrary Ethernet frames. What decodes lies inside the frame;
// a cell whose CRC is good re-seals to the same bytes.
#include <cstdint>
#include <span>
#include <vector>

#include <pushwire/cell/format.hpp>
#include <pushwire/cell/testing.hpp>

#include "provider.hpp"

using namespace pushwire;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> frame(reinterpret_cast<const std::byte*>(data), size);
  for (const std::size_t max_payload : {std::size_t{256}, std::size_t{8192}}) {
    const auto c = cell::decode(frame, {.crc = wire::crc_check::report, .max_cell_payload = max_payload});
    if (!c) {
      PUSHWIRE_FUZZ_CHECK(c.error().offset <= size + 64);
      continue;
    }
    PUSHWIRE_FUZZ_CHECK(c->data.size() <= max_payload);
    PUSHWIRE_FUZZ_CHECK(c->data.data() >= frame.data() && c->data.data() + c->data.size() <= frame.data() + size);
    PUSHWIRE_FUZZ_CHECK(c->at.end() <= size);
    PUSHWIRE_FUZZ_CHECK(c->crc_state != wire::crc_status::unchecked);
    std::vector<std::byte> copy(frame.begin(), frame.end());
    PUSHWIRE_FUZZ_CHECK(cell::testing::reseal(copy).code == wire::errc{});
    if (c->crc_state == wire::crc_status::good && !c->packet_crc)
      PUSHWIRE_FUZZ_CHECK(std::equal(copy.begin(), copy.end(), frame.begin()));
    const auto strict = cell::decode(frame, {.crc = wire::crc_check::require, .max_cell_payload = max_payload});
    PUSHWIRE_FUZZ_CHECK(strict.has_value() == (c->crc_state == wire::crc_status::good));
  }
  return 0;
}
