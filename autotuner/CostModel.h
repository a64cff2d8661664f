// The cost model of the model-guided strategy: features of (Program, Schedule,
// Target) and a ridge regression of log(time) on them, trained online on the
// measured candidates.
//
// Features (each stage weighted by its share of the program's FLOPs,
// dsl/Analysis.h): how much work is inlined / at root / at a consumer loop;
// vectorized (and at which fraction of the target's lanes), parallel, unrolled;
// the reduction loop order; the register/cache tile footprint against the
// target's L1 and L2; bytes of materialized intermediates against the
// program's input/output bytes; pipelining.
// Why hand-rolled: a ridge fit over ~20 features and at most a few hundred
// samples is a 20x20 linear solve; no ML library is worth a dependency here.
#pragma once

#include <vector>

#include "target/Target.h"
#include "dsl/Program.h"
#include "schedules/Schedule.h"

namespace pto::tuner {

std::vector<double> schedule_features(const Program& p, const Target& t, const Schedule& s);

class RidgeModel {
 public:
  explicit RidgeModel(double lambda = 1e-2) : lambda_(lambda) {}
  // Least squares with an L2 penalty on all weights but the first (bias) one.
  void fit(const std::vector<std::vector<double>>& x, const std::vector<double>& y);
  double predict(const std::vector<double>& x) const;
  bool trained() const { return !w_.empty(); }

 private:
  double lambda_;
  std::vector<double> w_;
};

}  // namespace pto::tuner
