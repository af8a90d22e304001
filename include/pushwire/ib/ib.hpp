// InfiniBand transport over RoCEv2: headers, opcodes, AETH, PSN, GIDs, frames, LAN emulation, entropy.
#pragma once

#include <pushwire/ib/aeth.hpp>
#include <pushwire/ib/encap.hpp>
#include <pushwire/ib/entropy.hpp>
#include <pushwire/ib/gid.hpp>
#include <pushwire/ib/headers.hpp>
#include <pushwire/ib/keys.hpp>
#include <pushwire/ib/lan.hpp>
#include <pushwire/ib/opcode.hpp>
#include <pushwire/ib/print.hpp>
#include <pushwire/ib/psn.hpp>
#include <pushwire/ib/roce.hpp>
#include <pushwire/ib/tcp.hpp>
