// Side-by-side comparison of schedules in one process: PTO schedules (default,
// tuned, ...) and Halide's own autoschedulers (Adams2019, Mullapudi2016,
// Li2018) applied to the same lowered, unscheduled pipeline. All run on the
// same fixed inputs; each output is checked against the f64 reference before
// its time is reported. Timing runs after every implementation is compiled
// and checked, in interleaved rounds. Used by `pto tune`'s final table and bench_tune.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "target/Target.h"
#include "backends/Timing.h"
#include "dsl/Program.h"
#include "schedules/Schedule.h"

namespace pto::tuner {

struct CompareRow {
  std::string impl;          // e.g. "pto-default", "halide-adams2019"
  bool ok = false;
  std::string error;         // why it has no time
  TimingStats time;
  double gflops = 0;
  double max_rel_error = 0;  // against the f64 reference, relative to the output's largest magnitude
};

struct CompareOptions {
  std::vector<std::string> autoschedulers = {"Adams2019", "Mullapudi2016", "Li2018"};
  int warmup = 1, min_reps = 5;
  double min_seconds = 0.3;  // per implementation, over all rounds
  // Every implementation is timed in `rounds` interleaved rounds of
  // min_seconds / rounds each and reports its best round's median (a 0.05 ms
  // kernel on a shared machine: one noisy stretch no longer decides a ratio).
  int rounds = 3;
  int max_reps = 1000000;  // repetitions per round (min_seconds decides for fast kernels)
  double tolerance = 1e-4;   // see MeasureOptions::tolerance
};

// The Halide autoscheduler plugins this build can load.
std::vector<std::string> halide_autoscheduler_names();

std::vector<CompareRow> compare(const Program& p, const Target& t,
                                const std::vector<std::pair<std::string, Schedule>>& schedules,
                                const CompareOptions& o = {});

// The tuning tools' table: "pto-default", the autoschedulers, "pto-tuned",
// in that order. The default is always a candidate of the search; when it
// won (`tuned` is the default), the tuned row is the default's row (timing
// one schedule twice would only show the noise between two runs), with
// `tuned_is_default` set.
struct TunedComparison {
  std::vector<CompareRow> rows;
  bool tuned_is_default = false;
};
TunedComparison compare_tuned(const Program& p, const Target& t, const Schedule& def,
                              const Schedule& tuned, const CompareOptions& o = {});

}  // namespace pto::tuner
