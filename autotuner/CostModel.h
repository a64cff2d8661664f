// The learned cost model of the model-guided strategy: features of (Program,
// Schedule, Target) and gradient-boosted regression trees (XGBoost, through
// its C API) of log(time / the default schedule's time) on them, trained
// online on the measured candidates and warm-started from the database's
// records of other workloads of the same program (same structure, other
// shapes: the target is relative to each workload's default, so records
// transfer).
//
// Features: program-level (log FLOPs, log input/output bytes, arithmetic
// intensity, stage count), then per stage weighted by its share of the
// program's FLOPs (dsl/Analysis.h): placement (inline / root / at a consumer
// loop); vectorized, at which fraction of the target's lanes, innermost
// extent; parallel tasks per core and their balance; unrolled iterations;
// the reduction loop order and register tile; the footprint of one
// reduction step against the target's L1 and L2; bytes of materialized
// intermediates against the program's input/output bytes; the structural
// directives (rfactor, split across cores, operand caches, bf16 pairs,
// online softmax, fused partials, accumulator tiles, async producers,
// narrowed storage).
// Why XGBoost: TVM's MetaSchedule and Ansor rank candidates with it; tree
// ensembles capture the thresholds (fits in L1 or not, enough tasks per core
// or not) that a linear model cannot, and train in milliseconds on the few
// hundred samples a search has.
#pragma once

#include <string>
#include <vector>

#include "dsl/Program.h"
#include "schedules/Schedule.h"
#include "target/Target.h"

namespace pto::tuner {

// The feature vector (always feature_names().size() values).
std::vector<float> schedule_features(const Program& p, const Target& t, const Schedule& s);
const std::vector<std::string>& feature_names();

// Gradient-boosted regression trees. Copying is disabled (one native booster).
class BoostedTrees {
 public:
  struct Options {
    int rounds = 60;  // boosting rounds per fit
    int max_depth = 6;
    double eta = 0.2;  // learning rate
    uint64_t seed = 0;
  };
  BoostedTrees();
  explicit BoostedTrees(Options o);
  ~BoostedTrees();
  BoostedTrees(const BoostedTrees&) = delete;
  BoostedTrees& operator=(const BoostedTrees&) = delete;

  // Refits from scratch on rows `x` (equal lengths) with targets `y` and
  // per-row weights `w` (empty: all 1). Throws pto::Error with XGBoost's
  // message when the library fails.
  void fit(const std::vector<std::vector<float>>& x, const std::vector<float>& y,
           const std::vector<float>& w = {});
  std::vector<float> predict(const std::vector<std::vector<float>>& x) const;
  bool trained() const { return booster_ != nullptr; }

 private:
  Options o_;
  void* booster_ = nullptr;  // BoosterHandle
};

}  // namespace pto::tuner
