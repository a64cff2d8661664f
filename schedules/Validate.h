// Validation of a Schedule against a Program (and optionally a Target): the
// schedule-wide rules (known stages, no compute_at cycles, options), then
// each stage's directives (schedules/directives/) in registry order.
//
// Everything lowering relies on is checked here first, so that a bad schedule
// is reported as a ScheduleError naming the stage, the directive and the valid
// choices, instead of a Halide internal error or a crash.
#pragma once

#include "target/Target.h"
#include "dsl/Program.h"
#include "schedules/Schedule.h"

namespace pto {

void validate(const Program& p, const Schedule& s, const Target* target = nullptr);

// The storage / compute / accumulate types a stage runs with under `s`
// (the precision directive, schedules/directives/Precision.cpp).
struct StagePrecision {
  DType storage, compute, accumulate;
};
StagePrecision stage_precision(const Program& p, const Schedule& s, const std::string& stage);

}  // namespace pto
