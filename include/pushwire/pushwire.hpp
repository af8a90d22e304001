// pushwire: codecs and state machines for the protocols of RDMA channel adapters.
// This header includes every public layer.
#pragma once

#include <pushwire/version.hpp>
#include <pushwire/wire/wire.hpp>
#include <pushwire/msg/msg.hpp>
#include <pushwire/ib/ib.hpp>
#include <pushwire/cell/cell.hpp>
#include <pushwire/flow/flow.hpp>
