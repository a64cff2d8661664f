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
// the contiguous one. Targets with a GPU device get the GPU default (Gpu.h)
// instead: every caller (JIT users, pto, generators, the tuner) asks here.
#pragma once

#include "target/Target.h"
#include "dsl/Program.h"
#include "schedules/Schedule.h"

namespace pto {

// Every stage at root, serial, logical precision: the correctness baseline.
Schedule plain_schedule(const Program& p);

Schedule default_schedule(const Program& p, const Target& t);

// `s` at its options.opt_level, what lowering compiles (OptLevel.cpp):
//   0  plain loops: every stage at root, serial, logical precision (the reference)
//   1  vectorize and parallelize only: each stage at root, parallel over its
//      outer dim and vectorized along the contiguous one, a reduction's update too
//   2  `s` itself (the default schedule, or a tuned or hand-written one)
//   3  `s` with fast_math on every stage (no IEEE guards: directives/FastMath.h)
// GPU targets ignore the level (their stages need their device mapping).
Schedule at_opt_level(const Program& p, const Schedule& s, const Target& t);

// The parts of the defaults that follow from the program's types and layouts
// rather than from its loops: f32 arithmetic for bf16 / f16 stages, and
// dot_pairs where an operand is laid out in pairs (on avx512_bf16 targets).
// They only fill what `s` leaves unset; the tuner applies them to every
// candidate it builds.
void apply_type_rules(const Program& p, const Target& t, Schedule& s);

}  // namespace pto
