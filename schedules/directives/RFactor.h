// rfactor: vectorized partial reductions (RFactor in Schedule.h). The one
// place that says which reductions can be rfactored and by which factors:
// validation, the defaults, RandomSchedule and the autotuner's SearchSpace
// all ask rfactor_candidates() / rfactor_problem().
#pragma once

#include "schedules/directives/Directive.h"

namespace pto::directives {

const Directive& rfactor_directive();

// Why `rf` cannot run on `st` (an associative reduction; a factor of at
// most 256 lanes that fit the target's vectors of the accumulator type and
// either divides a static extent or is a multiple of those lanes, the last
// step guarded; across cores, chunks of any length shorter than the extent),
// or empty when it can. The directives rfactor replaces are checked by the
// directive itself.
std::string rfactor_problem(const Stage& st, const RFactor& rf, const Target* target,
                            DType accumulate);

// Why `ss`'s rfactor cannot interleave its rows (RFactor::interleave), or ""
// when it can: the stage computed at root, its innermost tiled pure dim static
// and tiled once by a divisor from 2 to 16; across cores, that dim outside
// the innermost and the block's vectors of partials within the target's
// registers (counted with a target only).
std::string interleave_problem(const Stage& st, const StageSchedule& ss,
                               const Target* target = nullptr);

// Steps of a chunk across cores (RFactor::parallel without vector_lanes)
// unrolled inside each vector of the stage's innermost dim, where the chunk
// is a multiple of them: the partial vector is then loaded and stored once
// per this many steps.
inline constexpr int kChunkUnroll = 4;

// Does the rfactor of `ss` combine its chunks across cores in vectors along
// the stage's innermost dim (a parallel rfactor without vector_lanes)? That
// combine loads the stage's own values as vectors, which Halide emits as
// aligned loads, so the stage must not be the caller's buffer (an output is
// computed into a Func of its own and copied out: backends/Lower.cpp).
bool combines_in_vectors(const StageSchedule& ss);

// The loop directives of a stage's own update under a (not parallel)
// rfactor: its pure loops split and run in parallel as the pure definition's
// are (a row sum parallel over blocks of rows), the tiles and parallel loops
// of `pure` without its order and vectorize (the update's innermost loop is
// the combine of the lanes).
LoopSchedule update_pure_loops(const LoopSchedule& pure);

// Every rfactor of `st` that rfactor_problem() accepts, without the parallel
// ones: per reduction variable (outermost first), factors ascending. Empty
// for argmin/argmax and pure stages.
std::vector<RFactor> rfactor_candidates(const Stage& st, const Target* target, DType accumulate);

// The rfactor of `ss` whose last step is shifted inwards rather than
// guarded: a static extent that its factor does not divide, not across
// cores. Lowering (backends/Lower.cpp) pads the reduction to whole steps and
// reads the last one at [extent - factor, extent), the lanes it repeats
// masked to the op's identity (the reductions rfactor takes are commutative,
// so which lane takes a step does not matter). A guarded step is a masked
// store into the intermediate, which the combine's load right after cannot
// take from the store buffer: about 35 cycles a row (a row max over
// [4463, 169] 0.048 ms, over [4463, 176] 0.022). Null otherwise.
const RFactor* shifted_last_step(const Stage& st, const StageSchedule* ss);

}  // namespace pto::directives
