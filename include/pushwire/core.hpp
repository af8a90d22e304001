// pushwire's embeddable core: the codecs (wire/ without pcap, hex, JSON and printing; msg/ ib/
// cell/ without printing) and the flow/ machines. It builds with -fno-exceptions -fno-rtti and
// includes none of <iostream>, <ostream>, <sstream>, <fstream> (ctest -L core checks both).
// Printing, JSON, hex text, frames as keys and pcap are in wire/print.hpp, wire/json.hpp,
// wire/hex.hpp, wire/keys.hpp, ib/keys.hpp, wire/pcap.hpp, msg/print.hpp, ib/print.hpp and
// cell/print.hpp; pushwire.hpp includes everything.
#pragma once

#include <pushwire/version.hpp>

#include <pushwire/wire/array_view.hpp>
#include <pushwire/wire/codec.hpp>
#include <pushwire/wire/crc.hpp>
#include <pushwire/wire/cursor.hpp>
#include <pushwire/wire/endian.hpp>
#include <pushwire/wire/enum.hpp>
#include <pushwire/wire/errc.hpp>
#include <pushwire/wire/ethernet.hpp>
#include <pushwire/wire/fields.hpp>
#include <pushwire/wire/names.hpp>
#include <pushwire/wire/options.hpp>
#include <pushwire/wire/result.hpp>
#include <pushwire/wire/struct.hpp>
#include <pushwire/wire/table.hpp>

#include <pushwire/msg/buffer.hpp>
#include <pushwire/msg/cfg_util.hpp>
#include <pushwire/msg/data.hpp>
#include <pushwire/msg/frame.hpp>
#include <pushwire/msg/header.hpp>
#include <pushwire/msg/idata.hpp>
#include <pushwire/msg/message.hpp>

#include <pushwire/ib/aeth.hpp>
#include <pushwire/ib/encap.hpp>
#include <pushwire/ib/entropy.hpp>
#include <pushwire/ib/gid.hpp>
#include <pushwire/ib/headers.hpp>
#include <pushwire/ib/lan.hpp>
#include <pushwire/ib/opcode.hpp>
#include <pushwire/ib/psn.hpp>
#include <pushwire/ib/roce.hpp>
#include <pushwire/ib/tcp.hpp>

#include <pushwire/cell/format.hpp>
#include <pushwire/cell/reassembler.hpp>
#include <pushwire/cell/segmenter.hpp>

#include <pushwire/flow/core.hpp>
#include <pushwire/flow/dc.hpp>
#include <pushwire/flow/dcqcn.hpp>
#include <pushwire/flow/ets.hpp>
#include <pushwire/flow/frame.hpp>
#include <pushwire/flow/observer.hpp>
#include <pushwire/flow/pp_track.hpp>
#include <pushwire/flow/packet.hpp>
#include <pushwire/flow/paths.hpp>
#include <pushwire/flow/pool.hpp>
#include <pushwire/flow/rc.hpp>
#include <pushwire/flow/session.hpp>
#include <pushwire/flow/tcp_agg.hpp>
