// flow/: the sans-IO state machines (buffer-pool credits and flush, queue-pair transport with
// page-fault pause, Dynamically Connected transport, sessions), and the passive uses of them
// (observer, conformance). Diagrams: spec/flow.md.
#pragma once

#include <pushwire/flow/conform.hpp>
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
