// fast_math: the stage's float expressions are lowered without the IEEE
// guards (backends/Ieee.h): Halide's simplifier may fold x * 0 and x == x,
// min/max drop a NaN operand, log of NaN and erf of Inf follow the
// polynomial. Results that are finite and not NaN are unchanged; what it
// buys is a few instructions per element where those guards sit on a hot
// path. Off by default; opt level 3 (schedules/OptLevel.h) turns it on for
// every stage, and `pto bisect` names it when it is what changed an output.
#pragma once

#include "schedules/directives/Directive.h"

namespace pto::directives {

const Directive& fast_math_directive();

}  // namespace pto::directives
