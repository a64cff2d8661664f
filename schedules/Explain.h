// `explain`: the loop nest a schedule produces, as readable text.
//
// Stages computed at a consumer loop are printed inside that loop, inlined
// stages are named where they are folded in, and each loop shows its marks
// (parallel, vectorized xN, unrolled) and extent, each stage its precision.
#pragma once

#include <string>

#include "target/Target.h"
#include "dsl/Program.h"
#include "schedules/Schedule.h"

namespace pto {

std::string explain(const Program& p, const Schedule& s, const Target* target = nullptr);

}  // namespace pto
