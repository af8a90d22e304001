// Push-push messaging protocol v1: every message, idata, CfgUtil data, dispatch, owning frames,
// printing.
#pragma once

#include <pushwire/msg/buffer.hpp>
#include <pushwire/msg/cfg_util.hpp>
#include <pushwire/msg/data.hpp>
#include <pushwire/msg/frame.hpp>
#include <pushwire/msg/header.hpp>
#include <pushwire/msg/idata.hpp>
#include <pushwire/msg/message.hpp>
#include <pushwire/msg/print.hpp>
