// Must not compile: two members share bit 4 of byte 0.
#include <pushwire/wire/codec.hpp>
namespace w = pushwire::wire;
struct bad {
  PUSHWIRE_STRUCT(bad, (w::bits<0, 7, 4>, hi), (w::bits<0, 4, 0>, lo));
};
static_assert(w::fixed_size<bad> == 1);
