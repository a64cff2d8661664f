// The measurement worker: the process side of the Measurer (`pto worker`, hidden).
//
// A worker measures one candidate in its own process, so that a schedule that
// crashes the code generator or the generated code, or never finishes, takes
// only the worker down. Protocol, one line each on stdout:
//   compiled <seconds>    the kernel is JIT-compiled; the worker now waits for
//                         "go" on stdin (the parent lets one worker at a time
//                         run, so timings are not disturbed by a sibling)
//   result <json>         {"status", "error", "median_ms", "min_ms", "max_ms",
//                         "reps", "max_rel_error", "compile_s"}
// The working directory `dir` holds config.json (program, target, inputs seed,
// timing and tolerance settings, written by the Measurer) and reference.bin
// (the reference outputs, f32, written by a worker in reference mode).
//
// Fault injection (tests): PTO_TUNER_FAULT="KIND@TRIAL[,KIND@TRIAL...]" makes
// the worker of that trial number misbehave on purpose, KIND one of
//   segv          raise SIGSEGV just before running
//   hang          sleep forever instead of running (exercises the run timeout)
//   hang_compile  sleep forever instead of compiling (the compile timeout)
//   wrong         corrupt one output element before the check
//   abort         abort() while compiling
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "dsl/Program.h"
#include "schedules/Schedule.h"

namespace pto::tuner {

// Runs the worker; returns the process exit status (0 also when the candidate
// failed cleanly: the failure is in the result line).
int worker_main(const std::string& dir, const std::string& schedule_path, int trial, bool reference);

// The fault injected for `trial` by PTO_TUNER_FAULT, or "" for none.
std::string injected_fault(int trial);

// The plain schedule in f64 compute/accumulation/intermediate storage (outputs
// keep their type): the reference every candidate is checked against.
Schedule reference_schedule(const Program& p);

// Fixed random inputs of a workload (uniform in [-1, 1), seeded), in Program::inputs() order.
std::vector<std::vector<float>> make_inputs(const Program& p, uint64_t seed);

}  // namespace pto::tuner
