// Default schedules: the "-O2" a program gets without tuning.
//
// Rules key on each stage's OpKind and the target's hardware model:
// elementwise producers are inlined into their consumers; a contraction with
// an elementwise epilogue is computed per register tile inside the epilogue
// (the register-blocked micro-kernel: k outermost, rows unrolled, columns
// vectorized); a channels-last convolution tiles pixels x output channels
// the same way, reads a padded input materialized once, and, when its weights
// outweigh its input, runs channel tiles outermost with a blocked reduction;
// other root stages are parallel over their outer dim and vectorized along
// the contiguous one.
#pragma once

#include "backends/Target.h"
#include "dsl/Program.h"
#include "schedules/Schedule.h"

namespace pto {

// Every stage at root, serial, logical precision: the correctness baseline.
Schedule plain_schedule(const Program& p);

Schedule default_schedule(const Program& p, const Target& t);

}  // namespace pto
