// compute / store: where a stage is computed (root, inline, or at a loop of
// a consumer) and where its storage lives (Placement in Schedule.h), with
// the rules that keep a placement race-free and inside every reader.
#pragma once

#include <set>

#include "schedules/LoopNest.h"
#include "schedules/directives/Directive.h"

namespace pto::directives {

const Directive& placement_directive();

// Stages that really read `name` under `s`, looking through inline stages.
std::set<std::string> effective_consumers(const Program& p, const Schedule& s,
                                          const std::string& name);

// The loops a producer can be computed or stored at in stage `c` (scheduled
// by `cs`, may be null): those of its last definition (Halide places
// producers in the last stage, the update of a reduction, which is also
// where a reduction reads its inputs).
std::vector<Loop> placement_loops(const Stage& c, const StageSchedule* cs);
// The loop directives of that last definition.
LoopSchedule last_definition_loops(const Stage& c, const StageSchedule* cs);

}  // namespace pto::directives
