// The tuning loop: strategy -> validated, new candidates -> Measurer -> TuningDB.
//
// The default schedule seeds every search (it is trial 0 of a fresh search,
// the baseline of "speedup over default"). Every trial is committed to the
// database as it finishes; a search that finds trials of the same workload,
// target and accuracy budget in the database resumes: those count towards
// --trials, are fed to the strategy, and their schedules are not measured again.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "autotuner/Measurer.h"
#include "autotuner/TuningDB.h"

namespace pto::tuner {

struct TuneOptions {
  int trials = 50;              // total trials for this workload (including resumed ones)
  double time_budget_s = 0;     // 0 = none; otherwise stop starting new trials after this
  std::string strategy = "model";
  double max_rel_error = 0;     // accuracy budget; 0 = exact f32
  uint64_t seed = 0;
  std::string db_path;          // default: default_db_path()
  // After the search, the fastest `confirm` distinct schedules and the
  // default are timed again side by side in this process (interleaved rounds,
  // compare()); the fastest there is the result, the default unless another
  // beats it by 3%. One worker's timing can be lucky (buffer placement, a
  // quiet moment); 0 = keep the fastest trial.
  int confirm = 3;
  // 2: the candidates as searched; 3: every candidate (the default too) with
  // fast_math on every stage. Level 3's records are kept apart from exact ones
  // (their workload's target reads "<target> fast_math"), so `--schedule best`
  // never picks a fast-math schedule for an exact run. 0 and 1 leave nothing
  // to search (every candidate compiles to the same loops).
  int opt_level = 2;
  MeasureOptions measure;
};

struct TuneProgress {
  int trial = 0, trials = 0;   // trials done so far (including resumed) and the target
  double best_ms = 0, default_ms = 0;  // 0 when none is known yet
  int failures = 0;
  const TrialRecord* last = nullptr;
};

struct TuneResult {
  std::vector<TrialRecord> history;  // every trial, in trial order (resumed ones first)
  std::optional<TrialRecord>
      best;  // fastest correct trial (after confirmation, see TuneOptions::confirm)
  double confirmed_ms = 0,
         confirmed_default_ms = 0;        // their times in the confirmation (0: none ran)
  std::optional<TrialRecord> baseline;    // the default schedule's trial
  int resumed = 0, measured = 0, failures = 0, invalid_skipped = 0;
  bool stopped_by_time = false, space_exhausted = false;
  // Trials (1-based count, in history order) until the best-so-far first came within 90% of `best`.
  int trials_to_90 = 0;
};

TuneResult tune(const Program& p, const Target& t, const TuneOptions& o,
                const std::function<void(const TuneProgress&)>& progress = {});

}  // namespace pto::tuner
