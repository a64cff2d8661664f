// precision: the storage, compute and accumulate types of a stage
// (Precision in Schedule.h). Lowering applies them as casts while it defines
// the stage's Funcs (backends/Lower.cpp reads stage_precision()).
#pragma once

#include "schedules/directives/Directive.h"

namespace pto::directives {

const Directive& precision_directive();

// Can a stage of logical type `logical` store / compute / accumulate in `t`?
bool valid_precision_type(DType logical, DType t);

}  // namespace pto::directives
