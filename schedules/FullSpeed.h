// The sizes at which a kernel over symbolic dims runs at full speed: for each
// size symbol, the least run-time value at which every stage's loops over it
// take their specialized, unguarded form (schedules/directives/Specialize.h:
// whole tiles, vectors and unroll factors, tails shifted inwards) and every
// lanes-of-partials reduction over it fills its lanes. Below it a kernel still
// computes the right result, on guarded loops: a symbolic `A @ B` with 17
// columns (a 64-column tile) ran 34x slower than the static kernel of that
// shape. `@pypto.kernel` compiles a static variant for such shapes instead
// (python/pypto/kernel.py); the bound is derived from the schedule, so it
// follows edits and new rules.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "dsl/Program.h"
#include "schedules/Schedule.h"

namespace pto {

std::map<std::string, int64_t> full_speed_extents(const Program& p, const Schedule& s);

}  // namespace pto
