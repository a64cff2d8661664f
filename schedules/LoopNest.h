// The loop nest a LoopSchedule produces for one definition of a stage.
//
// This is the single place that turns tile sizes and `order` into named loops
// with extents. Validation uses it to check names, explain prints it, and the
// Halide lowering replays it (split, reorder), so the three never disagree.
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

// `stage` as its update runs under dot_pairs on reduction variable `pairs`:
// the loop `pairs` counts pairs (half the extent; the pair itself is the
// innermost loop <pairs>_2, which schedules do not name). Empty `pairs`: the
// stage itself.
Stage paired_update(const Stage& stage, const std::string& pairs);

// The split chain of one dim: {dim, [outer, (middle), inner]} names, for lowering.
std::vector<std::string> split_names(const std::string& dim, size_t levels);

}  // namespace pto
