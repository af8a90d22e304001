// Round trip for every message family: decode -> encode -> decode gives equal values and the
// same bytes. The first byte picks the family: push-push messages (any function), each IB
// transport header, the cell header / VA-MH / ACK info, the Ethernet and IP headers.
#include <array>
#include <cstdint>
#include <span>
#include <tuple>
#include <vector>

#include <pushwire/cell/format.hpp>
#include <pushwire/ib/encap.hpp>
#include <pushwire/ib/opcode.hpp>
#include <pushwire/msg/idata.hpp>
#include <pushwire/msg/message.hpp>

#include "provider.hpp"

using namespace pushwire;

namespace {

template <class H>
void fixed(std::span<const std::byte> in) {
  const auto h = wire::decode_prefix<H>(in);
  if (!h) return;
  const auto bytes = wire::to_bytes(*h);
  PUSHWIRE_FUZZ_CHECK(std::equal(bytes.begin(), bytes.end(), in.begin()));
  const auto again = wire::decode_prefix<H>(bytes);
  PUSHWIRE_FUZZ_CHECK(again.has_value() && *again == *h);
}

using headers = std::tuple<ib::bth, ib::rdeth, ib::deth, ib::dceth, ib::feth, ib::reth, ib::atomiceth, ib::aeth, ib::atomicacketh,
                           ib::immdt, ib::ieth, ib::dcceth, ib::cnp_pad, cell::header, cell::vamh, cell::ack_info, msg::idata,
                           ib::eth_header, ib::vlan_tag, ib::ipv4_header, ib::ipv6_header, ib::udp_header>;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::uint8_t family = data[0] % (std::tuple_size_v<headers> + 1);
  const std::span<const std::byte> in(reinterpret_cast<const std::byte*>(data + 1), size - 1);
  if (family == 0) {  // push-push
    const auto m = msg::decode(in);
    if (!m) return 0;
    std::visit(
        [&](const auto& x) {
          std::vector<std::byte> out(msg::encoded_size(x));
          PUSHWIRE_FUZZ_CHECK(msg::encode(x, out).has_value());
          PUSHWIRE_FUZZ_CHECK(std::equal(out.begin(), out.end(), in.begin(), in.end()));
          const auto again = msg::decode<std::decay_t<decltype(x)>>(std::span<const std::byte>(out));
          PUSHWIRE_FUZZ_CHECK(again.has_value() && *again == x);
        },
        *m);
    return 0;
  }
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    ((family == I + 1 ? fixed<std::tuple_element_t<I, headers>>(in) : void()), ...);
  }(std::make_index_sequence<std::tuple_size_v<headers>>{});
  return 0;
}
