// pad_lanes: a reduction's accumulator tile computes one pure var in whole
// vectors past its extent (StageSchedule in Schedule.h). A dim narrower than
// a vector, or one that leaves a part vector, otherwise runs masked vector
// FMAs on a masked accumulator tile; rounded up, the tile's accumulators stay
// in registers and every FMA is a whole vector. Halide rounds the update's
// vector split up (the points past the extent are computed into the
// accumulator tile and never stored); lowering (backends/Lower.cpp) reads the
// operands indexed by the var through views clamped to their extents, from
// which their packed copies (`cache`, which pad_lanes requires, so that the
// clamp runs once per copied element) are made.
#pragma once

#include <map>

#include "schedules/directives/Directive.h"

namespace pto::directives {

const Directive& pad_lanes_directive();

// The tensors `st` reads with an index that mentions pure var `var`, each
// with those axes: what a pad_lanes on `var` clamps.
std::map<std::string, std::vector<int>> padded_reads(const Stage& st, const std::string& var);

}  // namespace pto::directives
