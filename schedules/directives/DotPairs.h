// dot_pairs: a sum runs one reduction variable k as adjacent pairs within
// each vector lane, k = 2 k' + k_2 with k_2 innermost and atomically
// vectorized: the shape of x86's vdpbf16ps (StageSchedule in Schedule.h).
// Lowering builds the reduction domain of pairs (backends/Lower.cpp) and
// requires dense inputs; this file holds the field, its rules and the
// vectorization of the pair.
#pragma once

#include "schedules/directives/Directive.h"

namespace pto::directives {

const Directive& dot_pairs_directive();

// `stage` as its update runs under dot_pairs on reduction variable `pairs`:
// the loop `pairs` counts pairs (half the extent; the pair itself is the
// innermost loop pair_loop(pairs), which schedules do not name). Empty
// `pairs`: the stage itself.
Stage paired_update(const Stage& stage, const std::string& pairs);
// The stage whose update loops `ss` (may be null) schedules: paired_update
// under its dot_pairs.
Stage update_stage(const Stage& stage, const StageSchedule* ss);

}  // namespace pto::directives

namespace pto {
using directives::paired_update;
using directives::update_stage;
}  // namespace pto
