// Must not compile: bits 3..0 of byte 0 belong to no member.
#include <pushwire/wire/codec.hpp>
namespace w = pushwire::wire;
struct bad {
  PUSHWIRE_STRUCT(bad, (w::bits<0, 7, 4>, hi), (std::uint8_t, next));
};
static_assert(w::fixed_size<bad> == 2);
