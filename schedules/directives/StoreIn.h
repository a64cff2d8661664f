// store_in: a stage stored in its consumer's buffer, which the consumer then
// rewrites in place (the shape of a hand-written softmax: e^(x - max) written
// into the output row, summed, then scaled where it lies).
//
// Why: a softmax's row of exponentials otherwise goes to a scratch row that
// the output pass reads back while it writes the output row, so the output's
// cache misses (a write allocates its line) come in a pass with little work to
// hide them, and a long row keeps three rows in the L1 (input, scratch,
// output) where the in-place form keeps two. In C with AVX-512 on 2 cores
// (the same exp and passes), scratch row / in place: [5105, 458] 0.54 / 0.44
// ms, [400, 3592] 0.34 / 0.25, [2566, 3052] 1.92 / 1.38, [8, 50257] 0.085 /
// 0.067, [500, 458] in cache 0.038 / 0.036.
//
// Halide stores every Func in its own buffer, so lowering renames the stage's
// loads and stores to the consumer's buffer at the end (backends/StoreIn.h),
// per iteration of the consumer's loop that the stage is computed at. That is
// correct when, in each iteration, the stage's points are exactly the points
// the consumer writes and everything that reads them runs before the
// consumer's loop; check() holds the schedule to that, and the consumer's
// loops guard their tails instead of shifting them inwards (a shifted vector
// would scale its overlap twice; a shifted block of rows would be computed by
// two cores at once).
#pragma once

#include <string>

#include "schedules/directives/Directive.h"

namespace pto::directives {

const Directive& store_in_directive();

// Is some stage of `p` stored in `consumer`'s buffer? `entry(name)` is a
// stage's schedule entry, or null. Such a consumer rewrites its points in
// place, so its tails are guarded, never shifted inwards (Loops.cpp) or
// specialized (the defaults).
template <class Entry>
bool holds_stored_stage(const Program& p, const std::string& consumer, Entry entry) {
  for (const Stage& st : p.stages())
    if (const StageSchedule* e = entry(st.name); e && e->store_in == consumer) return true;
  return false;
}

// Why `st` cannot be stored in `consumer` under `s`, or "" when it can.
std::string store_in_problem(const Program& p, const Schedule& s, const Stage& st,
                             const std::string& consumer);

}  // namespace pto::directives
