// The loop nest a LoopSchedule produces for one definition of a stage.
//
// This is the single place that turns tile sizes and `order` into named loops
// with extents, and that spells loop names (the split suffixes below).
// Validation uses it to check names, explain prints it, and the Halide
// lowering replays it (split, reorder), so the three never disagree.
#pragma once

#include <string>
#include <vector>

#include "dsl/Stage.h"
#include "schedules/Schedule.h"

namespace pto {

struct Loop {
  std::string name;      // e.g. "j_i"
  std::string dim;       // the stage variable it comes from, e.g. "j"
  bool reduction = false;
  int64_t extent = -1;   // -1 when symbolic
  std::string extent_str;
  int64_t step = 1;      // elements of `dim` covered by one iteration
};

// Loops of `stage`'s pure (update = false) or update definition, outermost first,
// after tiling and `order`. Throws ScheduleError naming the stage and the bad directive.
std::vector<Loop> loop_nest(const Stage& stage, const LoopSchedule& ls, bool update);

// The split chain of one dim: {dim, [outer, (middle), inner]} names, for lowering.
std::vector<std::string> split_names(const std::string& dim, size_t levels);

// Loop names, spelled only here. Tiling `dim` gives outer_loop (over tiles),
// middle_loop (two levels) and inner_loop (within a tile).
std::string outer_loop(const std::string& dim);   // dim_o
std::string middle_loop(const std::string& dim);  // dim_m
std::string inner_loop(const std::string& dim);   // dim_i
// Names the lowering uses between Halide splits, which schedules never name:
// the outer part of a two-level split before its second split, and, when
// vector lanes are split off a guarded tile first, the lanes and the rest.
std::string split_rest(const std::string& dim);  // dim_t
std::string lane_loop(const std::string& dim);   // dim_v
std::string lanes_rest(const std::string& dim);  // dim_x
// Sums in pairs (DotPairs.h): the innermost loop over the two members of a pair of `rvar`.
std::string pair_loop(const std::string& rvar);  // rvar_2
// rfactor: the pure lane dim of the intermediate.
std::string rfactor_lane(const std::string& rvar);  // rvar_lane
// rfactor across cores: the parallel dim of chunks of the intermediate.
std::string rfactor_part(const std::string& rvar);  // rvar_part

// Is `l` a tile's inner or middle loop (a loop of constant extent within a tile)?
bool is_tile_point(const Loop& l);
// Is `loop` a loop over a reduction variable of `stage` (any split of one)?
bool is_reduction_loop(const Stage& stage, const std::string& loop);

const Loop* find_loop(const std::vector<Loop>& loops, const std::string& name);
std::vector<std::string> loop_names(const std::vector<Loop>& loops);

// Does `ls` split loop `l` further (unroll or vectorize by a factor smaller
// than the loop)? Halide then places things at the outer part, and sizes
// them wrongly: negative allocations and out-of-bounds reads were found by
// test_differential, so nothing is placed at such a loop.
bool factor_split(const LoopSchedule& ls, const Loop& l);

}  // namespace pto
