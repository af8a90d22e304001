// Must not compile: a counted<> followed by another member.
#include <pushwire/wire/codec.hpp>
namespace w = pushwire::wire;
struct bad {
  PUSHWIRE_STRUCT(bad, (w::counted<std::uint8_t, std::byte, "n">, data), (std::uint8_t, after));
};
static_assert(w::fixed_size<bad> == 2);
