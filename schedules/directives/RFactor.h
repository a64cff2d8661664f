// rfactor: vectorized partial reductions (RFactor in Schedule.h). The one
// place that says which reductions can be rfactored and by which factors:
// validation, the defaults, RandomSchedule and the autotuner's SearchSpace
// all ask rfactor_candidates() / rfactor_problem().
#pragma once

#include "schedules/directives/Directive.h"

namespace pto::directives {

const Directive& rfactor_directive();

// Why `rf` cannot run on `st` (an associative reduction, a static extent the
// factor divides, at most 256 lanes that fit the target's vectors of the
// accumulator type), or empty when it can. The directives rfactor replaces
// are checked by the directive itself.
std::string rfactor_problem(const Stage& st, const RFactor& rf, const Target* target,
                            DType accumulate);

// Every rfactor of `st` that rfactor_problem() accepts: per reduction
// variable (outermost first), factors ascending. Empty for argmin/argmax,
// symbolic extents and pure stages.
std::vector<RFactor> rfactor_candidates(const Stage& st, const Target* target, DType accumulate);

}  // namespace pto::directives
