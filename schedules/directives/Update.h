// update: the loop directives (tile, order, vectorize, unroll, parallel) of
// a reduction's update definition, whose loops include the reduction
// variables (StageSchedule::update in Schedule.h; functions in Loops.h).
#pragma once

#include "schedules/directives/Directive.h"

namespace pto::directives {

const Directive& update_directive();

}  // namespace pto::directives
