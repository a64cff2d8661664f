// accumulator_at: a reduction accumulates into a separate buffer computed per
// iteration of one loop of its pure definition (a register or cache tile, the
// matmul micro-kernel), then writes it out (StageSchedule in Schedule.h).
#pragma once

#include "schedules/directives/Directive.h"

namespace pto::directives {

const Directive& accumulator_at_directive();

}  // namespace pto::directives
