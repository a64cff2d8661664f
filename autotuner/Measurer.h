// The Measurer: runs each candidate schedule in an isolated worker process.
//
// Every candidate is fork+exec'ed as `pto worker` (autotuner/Worker.h) with the
// Program and Schedule as JSON files in a private temporary directory, so a
// candidate that crashes, aborts or hangs costs one process, never the tuner.
// Workers compile in parallel (`jobs`, one per core by default), then run and
// time one at a time with nothing compiling beside them: a worker that has
// compiled waits for "go" until no other worker is timing or compiling, and
// no new worker starts while compiled ones wait (MetaSchedule's build, then
// run, phases). A compile that exceeds `compile_timeout_s` or a run that
// exceeds `run_timeout_s` is killed (SIGKILL). Before a candidate's time
// counts, its output is compared with the reference output (the plain schedule
// in f64, computed once by `prepare()`) on fixed random inputs.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include "autotuner/TuningDB.h"
#include "target/Target.h"
#include "dsl/Program.h"
#include "schedules/Schedule.h"

namespace pto::tuner {

struct MeasureOptions {
  double compile_timeout_s = 120;
  double run_timeout_s = 60;   // checking and timing together
  int jobs = 0;                // workers compiling at once; 0 = one per core of the host
  // A candidate whose first (checked) run takes longer than this is timed by
  // that run alone: it cannot win, and its repetitions would cost the search
  // seconds. 0 = time every candidate fully (the tuner sets it from the best).
  double slow_ms = 0;
  int warmup = 1, min_reps = 5, max_reps = 200;
  double min_seconds = 0.2;
  // Largest error relative to the output's largest magnitude. f32 exact: any
  // reassociation of f32 sums (what tiling and vectorizing do) stays near
  // sqrt(K) * 2^-24 of the magnitude, i.e. < 1e-5 for K up to 10^4 random terms,
  // while an indexing or tail bug gives errors of order 1.
  double tolerance = 1e-4;
  std::string worker_exe;      // default: `pto` next to the running executable
};

struct Candidate {
  int trial = 0;
  Schedule schedule;
};

struct Measurement {
  TrialStatus status = TrialStatus::Ok;
  std::string error;
  double median_ms = 0, min_ms = 0, max_ms = 0;
  int reps = 0;
  double max_rel_error = 0;
  double compile_s = 0;
};

class Measurer {
 public:
  Measurer(const Program& p, const Target& t, MeasureOptions o);
  ~Measurer();  // removes the working directory
  Measurer(const Measurer&) = delete;
  Measurer& operator=(const Measurer&) = delete;

  // Computes the reference output in a worker. Throws Error when it fails.
  void prepare();
  // Measures `cands`, calling `done` for each as it finishes (completion order).
  void measure(const std::vector<Candidate>& cands,
               const std::function<void(const Candidate&, const Measurement&)>& done);
  const MeasureOptions& options() const { return o_; }
  // Tightens the run timeout (the tuner does once the default schedule's time is known).
  void set_run_timeout(double s) { o_.run_timeout_s = s; }
  void set_slow_ms(double ms) { o_.slow_ms = ms; }
  void set_compile_timeout(double s) { o_.compile_timeout_s = s; }
  const std::string& work_dir() const { return dir_; }

 private:
  Program p_;
  Target t_;
  MeasureOptions o_;
  int jobs_ = 1;
  std::string dir_;
  bool prepared_ = false;
};

// `pto` next to the running executable (build/bin/pto for tests and benchmarks).
std::string default_worker_exe();

}  // namespace pto::tuner
