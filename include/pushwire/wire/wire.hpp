// The wire core: describe a struct once with PUSHWIRE_STRUCT, then encode, decode, compare,
// print and tabulate it. See struct.hpp, fields.hpp and codec.hpp.
#pragma once

#include <pushwire/wire/array_view.hpp>
#include <pushwire/wire/codec.hpp>
#include <pushwire/wire/crc.hpp>
#include <pushwire/wire/cursor.hpp>
#include <pushwire/wire/endian.hpp>
#include <pushwire/wire/enum.hpp>
#include <pushwire/wire/ethernet.hpp>
#include <pushwire/wire/errc.hpp>
#include <pushwire/wire/fields.hpp>
#include <pushwire/wire/hex.hpp>
#include <pushwire/wire/json.hpp>
#include <pushwire/wire/keys.hpp>
#include <pushwire/wire/names.hpp>
#include <pushwire/wire/options.hpp>
#include <pushwire/wire/pcap.hpp>
#include <pushwire/wire/print.hpp>
#include <pushwire/wire/result.hpp>
#include <pushwire/wire/struct.hpp>
#include <pushwire/wire/table.hpp>
