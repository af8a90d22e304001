// The split-model driver's cell framing: cell format, segmentation, reassembly (spec/cells.md).
#pragma once

#include <pushwire/cell/format.hpp>
#include <pushwire/cell/reassembler.hpp>
#include <pushwire/cell/segmenter.hpp>
