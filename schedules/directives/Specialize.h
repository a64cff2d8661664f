// specialize: a root stage gets a second version of its loops for symbolic
// extents that hold at least one tile, vector or unroll factor of each of its
// symbolic dims (Halide `specialize` on that condition), where their tails
// shift inwards as static dims' do. Why: a guarded tail leaves every tile of a
// symbolic dim variable-size, so a register tile computed inside it cannot
// stay in registers and its vectors are predicated; a kernel compiled once
// for every size then ran 4-5x slower than the static one (a dynamic
// `A @ B`). Extents below the bound run the guarded loops, so no size is
// left out. The condition is derived from the stage's loops, not stored.
#pragma once

#include <utility>
#include <vector>

#include "schedules/directives/Directive.h"

namespace pto::directives {

const Directive& specialize_directive();

// The bounds the specialized version needs: (index of a symbolic pure dim of
// `st`, the least extent that holds its outer tile / vector / unroll factor),
// one per dim that has one under `ls`. Empty: nothing to specialize.
std::vector<std::pair<size_t, int64_t>> specialize_bounds(const Stage& st, const LoopSchedule& ls);

}  // namespace pto::directives
