// idata: every 32-bit immediate is an idata; its indication converts back to the same value;
// the carrier choice agrees with fits_idata.
#include <cstdint>

#include <pushwire/msg/idata.hpp>

#include "provider.hpp"

using namespace pushwire;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::provider in(data, size);
  const std::uint32_t imm = in.take<std::uint32_t>();
  const msg::idata d = msg::from_imm(imm);
  PUSHWIRE_FUZZ_CHECK(msg::to_imm(d) == imm);
  const msg::indication i = msg::to_indication(d);
  PUSHWIRE_FUZZ_CHECK(i.byte_count >= 1 && i.byte_count <= msg::idata_max_bytes);
  const auto back = msg::make_idata(i);
  PUSHWIRE_FUZZ_CHECK(back.has_value() && msg::to_imm(*back) == imm);
  const msg::indication any{in.take<std::uint32_t>(), in.take<std::uint32_t>(), in.take<std::uint32_t>()};
  const auto c = msg::choose_carrier(any);
  PUSHWIRE_FUZZ_CHECK(std::holds_alternative<msg::idata>(c) == msg::fits_idata(any));
  if (const auto* x = std::get_if<msg::idata>(&c)) {
    const msg::indication r = msg::to_indication(*x);
    PUSHWIRE_FUZZ_CHECK(r.pool_ref == any.pool_ref && r.element_index == any.element_index && r.byte_count == any.byte_count);
  }
  return 0;
}
