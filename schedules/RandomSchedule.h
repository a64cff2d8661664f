// Random VALID schedules drawn from a Program's loop nests.
//
// The differential tests run many of these through the JIT and compare each
// with the float64 interpreter: a schedule that validates must give the
// reference answer, so every draw that fails to compile or gives a wrong
// answer is a lowering or validation bug. The autotuner reuses the same
// generator for its random candidates and mutations.
//
// Draws are made per stage, consumers before producers (so a producer can be
// placed at a loop its consumer really has): placement (root, inline,
// compute_at a loop of its single effective consumer, store at or outside the
// compute level), tiles (one or two levels), a loop order that keeps each
// dim's loops outer to inner, vectorize (never a reduction loop), unroll,
// parallel (pure loops only), precision (f32 / bf16 / f16 storage and
// compute, f32 accumulation), pipelining (prefetch of inputs) and the same
// loop directives for a reduction's update.
#pragma once

#include <cstdint>
#include <random>

#include "target/Target.h"
#include "dsl/Program.h"
#include "schedules/Schedule.h"

namespace pto {

struct RandomScheduleOptions {
  double p_narrow = 0.25;     // chance that a float stage stores and/or computes in bf16 or f16
  double p_parallel = 0.4;    // chance of a parallel loop per definition
  double p_prefetch = 0.1;    // chance of prefetching an input per stage
  double p_rfactor = 0.2;     // chance that a sum/prod/min/max reduction is rfactored (vectorized partial results)
  int max_attempts = 100;     // draws before giving up (each is validated)
};

// A schedule that passes validate(p, s, &t). Deterministic for a given rng
// state. Throws ScheduleError if no valid draw was found in max_attempts.
Schedule random_schedule(const Program& p, const Target& t, std::mt19937_64& rng,
                         const RandomScheduleOptions& opts = {});

// The largest unit roundoff (2^-p for a p-bit significand: f32 2^-24, f16
// 2^-11, bf16 2^-8) of any storage, compute or accumulate type `s` uses for a
// float stage of `p`: the precision differential tests derive tolerances from.
double max_unit_roundoff(const Program& p, const Schedule& s);

}  // namespace pto
