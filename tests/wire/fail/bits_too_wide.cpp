// Must not compile: bits<> cannot reach bit 64.
#include <pushwire/wire/codec.hpp>
namespace w = pushwire::wire;
struct bad {
  PUSHWIRE_STRUCT(bad, (w::bits<0, 64, 0>, too_wide));
};
static_assert(w::fixed_size<bad> == 9);
