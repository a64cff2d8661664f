// tile / order / vectorize / unroll / parallel: the loop directives of a
// stage's pure definition (LoopSchedule in Schedule.h). The same directives
// for a reduction's update are the `update` directive (Update.cpp), which
// reuses the functions here.
#pragma once


#include "schedules/LoopNest.h"
#include "schedules/directives/Directive.h"

namespace pto::directives {

const Directive& loops_directive();

// The JSON keys of a LoopSchedule, in a stage entry and in its "update".
const std::vector<std::string>& loop_fields();
void parse_loops(const nlohmann::json& j, const std::string& path, LoopSchedule& l);
void print_loops(const LoopSchedule& l, nlohmann::json& j);

// Checks `ls` on `st`'s pure (update = false) or update definition.
// `at_consumer`: the definition runs inside a consumer's loop (or an
// accumulator tile), so its pure loop extents are that region's (Halide's
// bounds inference), not the shape's.
void check_loops(const Stage& st, const LoopSchedule& ls, bool update, const Target* target,
                 DType compute_type, bool at_consumer);

// Replays `ls` on the Halide stage: splits, reorder, vectorize, unroll,
// parallel. `root`: the stage is computed at root (its static pure dims then
// shift their last tile inwards instead of guarding it).
// `fits`: the stage's symbolic dims hold at least one tile or vector each (the
// branch of a `specialize` directive), so their tails shift inwards as static
// dims' do.
// `blocks`: where given (the context of the stage being lowered), a parallel
// loop that is a whole symbolic dim of a root stage (its pure definition, or
// the pure loops of its update) runs in contiguous blocks whose size is
// computed at run time: one per core, or 2 or 4 per core where each keeps
// 2^16 points (a loop
// `<dim>_cores` outside it), as the defaults' tiles give static dims
// (parallel_chunk); the loop keeps its name and iterations, so stages
// computed at it stay where they were. Halide otherwise makes every iteration
// a task: a dynamic [3136, 256] bias + ReLU with a task per 256-element row
// took 0.85 ms against 0.14-0.17 ms in blocks (2 threads).
// `round_up`: an update's pure var whose splits compute whole tiles past the
// extent (pad_lanes, PadLanes.h) instead of guarding the last one.
void apply_loops(const Stage& st, Halide::Stage hs, const LoopSchedule& ls, bool update, bool root,
                 bool fits = false, ApplyContext* blocks = nullptr, const std::string& round_up = "");

// The points (elements of output times reduction steps) a parallel task sized
// at run time keeps at least: fewer do not pay for the task (run_time_block,
// RFactor's chunks per core).
inline constexpr int64_t kFineTaskElements = int64_t{1} << 16;

// Tiles, a vectorized innermost pure loop, a parallel outermost one, for an
// update's candidates (Update.cpp).
std::vector<LoopSchedule> update_loop_proposals(const Stage& st, const LoopSchedule& base,
                                                const Target* t, DType accumulate);

// "parallel unrolled x4 vectorized x16 " for explain's line of loop `l`.
std::string loop_marks(const LoopSchedule& ls, const Loop& l);

}  // namespace pto::directives
