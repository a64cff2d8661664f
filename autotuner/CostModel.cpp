#include "autotuner/CostModel.h"

#include <xgboost/c_api.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "dsl/Analysis.h"
#include "dsl/Error.h"
#include "schedules/LoopNest.h"
#include "schedules/directives/Amx.h"

namespace pto::tuner {
namespace {

// One row per feature: its index and its name in feature_names().
#define PTO_FEATURES(X)                                                                           \
  X(LogFlops)                                                                                     \
  X(LogIoBytes)                                                                                   \
  X(LogIntensity)                                                                                 \
  X(Stages) X(Inline) X(Root) X(At) X(Vec) X(VecFrac) X(LogInnerExtent) X(Par) X(LogTasksPerCore) \
      X(TaskBalance) X(LogUnroll) X(Mode0) X(Mode1) X(Mode2) X(LogRegTile) X(FitL1) X(FitL2)      \
          X(LogStepOverL1) X(RedTiled) X(LogInterBytes) X(NumRoot) X(Async) X(RFactor)            \
              X(SplitCores) X(Cache) X(DotPairs) X(OnlineSoftmax) X(ComputeWith) X(AccumulatorAt) \
                  X(Narrow) X(PadLanes) X(Amx)

enum Feature {
#define PTO_ENUM(n) n,
  PTO_FEATURES(PTO_ENUM)
#undef PTO_ENUM
      kFeatures
};

double log2p(double v) {
  return std::log2(1 + std::max(0.0, v));
}

double extent_of(const Loop& l) {
  return l.extent > 0 ? static_cast<double>(l.extent) : 64.0;
}

// Product of the extents of the loops from position `from` inwards.
double inner_points(const std::vector<Loop>& nest, size_t from) {
  double n = 1;
  for (size_t i = from; i < nest.size(); ++i) n *= extent_of(nest[i]);
  return n;
}

// What one loop nest (a stage's pure or update definition) contributes, weighted by `share`.
void nest_features(const Stage& st, const LoopSchedule& ls, bool update, const Target& t,
                   double share, std::vector<float>& f) {
  std::vector<Loop> nest;
  try {
    nest = loop_nest(st, ls, update);
  } catch (const std::exception&) {
    return;
  }
  if (nest.empty()) return;
  const int lanes = std::max(1, t.vector_lanes(DType::F32));
  if (!ls.vectorize.empty()) {
    f[Vec] += share;
    f[VecFrac] +=
        share *
        std::min(4.0, static_cast<double>(ls.vector_width ? ls.vector_width : lanes) / lanes);
  }
  f[LogInnerExtent] += share * log2p(extent_of(nest.back()));
  if (!ls.parallel.empty()) {
    double tasks = 1;
    for (const Loop& l : nest)
      if (std::find(ls.parallel.begin(), ls.parallel.end(), l.name) != ls.parallel.end())
        tasks *= extent_of(l);
    const double cores = std::max(1, t.cores);
    f[Par] += share;
    f[LogTasksPerCore] += share * std::log2(std::max(1.0, tasks) / cores + 1);
    f[TaskBalance] += share * (tasks / (std::ceil(tasks / cores) * cores));
  }
  double unrolled = 1;
  for (const auto& [loop, factor] : ls.unroll)
    for (const Loop& l : nest)
      if (l.name == loop) unrolled *= factor == 0 ? extent_of(l) : factor;
  f[LogUnroll] += share * std::log2(unrolled);
  if (!st.reduce || !update) return;
  // Which of the loop orders: where the first reduction loop sits.
  size_t first_r = nest.size();
  for (size_t k = 0; k < nest.size(); ++k)
    if (nest[k].reduction) {
      first_r = k;
      break;
    }
  const bool r_last = std::all_of(nest.begin() + static_cast<std::ptrdiff_t>(first_r), nest.end(),
                                  [](const Loop& l) { return l.reduction; });
  const int mode = first_r == 0 ? 1 : (r_last ? 0 : 2);
  f[mode == 0 ? Mode0 : mode == 1 ? Mode1 : Mode2] += share;
  if (ls.tile.count(st.rvars[0].name)) f[RedTiled] += share;
  // Footprint of one iteration of the loop just outside the reduction: the
  // accumulators plus the operand slices the reduction loops read.
  double red = 1;
  for (const Loop& l : nest)
    if (l.reduction) red *= extent_of(l);
  const double acc = inner_points(nest, first_r) / std::max(1.0, red);
  const double bytes = 4 * (acc + inner_points(nest, first_r) / std::max(1.0, acc) * 2);
  f[FitL1] += share * (bytes <= static_cast<double>(t.l1_bytes) ? 1 : 0);
  f[FitL2] += share * (bytes <= static_cast<double>(t.l2_bytes) ? 1 : 0);
  f[LogStepOverL1] += share * std::log2(std::max(1.0, bytes / static_cast<double>(t.l1_bytes)));
  if (mode == 2 && first_r > 0) f[LogRegTile] += share * log2p(acc);
}

// A stage on AMX tiles owns its loops (its entry has none): what its nest
// is, in the features of a loop nest, so that the model does not take it for
// a plain scalar loop. Strips of 16 columns in parallel, 16 x 16 accumulator
// tiles held through the reduction (a register tile), vectors of 16 lanes,
// one strip's packed R (k x 16 bf16 pairs) as the step's footprint.
void amx_features(const Program& p, const Stage& st, const Target& t, double share,
                  std::vector<float>& f) {
  const auto c = directives::amx_contraction(p, st);
  if (!c) return;
  double tasks = static_cast<double>(c->n) / 16;
  for (size_t d = 0; d + 2 < st.shape.size(); ++d)
    tasks *= st.shape[d].is_symbolic() ? 1.0 : static_cast<double>(st.shape[d].value);
  const double cores = std::max(1, t.cores);
  const double bytes = 32.0 * static_cast<double>(c->depth);
  f[Vec] += share;
  f[VecFrac] += share;
  f[LogInnerExtent] += share * log2p(16);
  f[Par] += share;
  f[LogTasksPerCore] += share * std::log2(tasks / cores + 1);
  f[TaskBalance] += share * (tasks / (std::ceil(tasks / cores) * cores));
  f[Mode2] += share;
  f[RedTiled] += share;
  f[LogRegTile] += share * log2p(256);
  f[FitL1] += share * (bytes <= static_cast<double>(t.l1_bytes) ? 1 : 0);
  f[FitL2] += share * (bytes <= static_cast<double>(t.l2_bytes) ? 1 : 0);
  f[LogStepOverL1] += share * std::log2(std::max(1.0, bytes / static_cast<double>(t.l1_bytes)));
  StageSchedule on;
  on.amx = true;
  if (directives::amx_rounds(p, st, on)) f[Narrow] += share;
}

void check(int rc, const char* what) {
  if (rc != 0)
    throw Error(std::string("cost model: XGBoost ") + what + " failed: " + XGBGetLastError());
}

// A DMatrix of rows `x`, freed on scope exit.
struct Matrix {
  DMatrixHandle h = nullptr;
  explicit Matrix(const std::vector<std::vector<float>>& x) {
    const size_t cols = x.empty() ? 0 : x[0].size();
    std::vector<float> flat;
    flat.reserve(x.size() * cols);
    for (const auto& row : x) {
      if (row.size() != cols) throw Error("cost model: feature rows of different lengths");
      flat.insert(flat.end(), row.begin(), row.end());
    }
    check(XGDMatrixCreateFromMat(flat.data(), x.size(), cols, NAN, &h), "XGDMatrixCreateFromMat");
  }
  ~Matrix() { XGDMatrixFree(h); }
  Matrix(const Matrix&) = delete;
  Matrix& operator=(const Matrix&) = delete;
};

}  // namespace

const std::vector<std::string>& feature_names() {
  static const std::vector<std::string> names = {
#define PTO_NAME(n) #n,
      PTO_FEATURES(PTO_NAME)
#undef PTO_NAME
  };
  return names;
}

std::vector<float> schedule_features(const Program& p, const Target& t, const Schedule& s) {
  std::vector<float> f(kFeatures, 0.0f);
  std::vector<double> w;
  double total = 0;
  for (const Stage& st : p.stages()) {
    double fl = 1;
    try {
      fl = std::max(1.0, stage_flops(st));
    } catch (const std::exception&) {
    }
    w.push_back(fl);
    total += fl;
  }
  double io = 1;
  try {
    io = std::max(1.0, program_io_bytes(p));
  } catch (const std::exception&) {
  }
  f[LogFlops] = static_cast<float>(std::log2(total));
  f[LogIoBytes] = static_cast<float>(std::log2(io));
  f[LogIntensity] = static_cast<float>(std::log2(total / io));
  f[Stages] = static_cast<float>(p.stages().size());
  std::vector<double> g(kFeatures, 0.0);  // accumulated in double
  double inter = 0;
  const StageSchedule none;
  for (size_t i = 0; i < p.stages().size(); ++i) {
    const Stage& st = p.stages()[i];
    const double share = w[i] / total;
    const StageSchedule* found = s.find(st.name);
    const StageSchedule& x = found ? *found : none;
    if (x.compute.kind == Placement::Kind::Inline) {
      g[Inline] += share;
      continue;
    }
    const bool root = x.compute.kind == Placement::Kind::Root;
    g[root ? Root : At] += share;
    if (root) g[NumRoot] += 1;
    if (root && !p.is_output(st.name)) {
      double n = 4;
      for (const Dim& d : st.shape) n *= d.is_symbolic() ? 64.0 : static_cast<double>(d.value);
      inter += n;
    }
    std::vector<float> nf(kFeatures, 0.0f);
    if (x.amx) {
      amx_features(p, st, t, share, nf);
    } else {
      nest_features(st, x.loops, false, t, st.reduce && x.update ? 0.1 * share : share, nf);
      if (st.reduce && x.update) nest_features(st, *x.update, true, t, share, nf);
    }
    for (int k = 0; k < kFeatures; ++k) g[k] += nf[k];
    if (x.pipeline.async) g[Async] += share;
    if (x.rfactor) g[x.rfactor->parallel ? SplitCores : RFactor] += share;
    if (!x.cache.empty()) g[Cache] += share;
    if (!x.dot_pairs.empty()) g[DotPairs] += share;
    if (x.online_softmax) g[OnlineSoftmax] += share;
    if (x.amx) g[Amx] += share;
    if (!x.accumulator_at.empty()) g[AccumulatorAt] += share;
    if (!x.pad_lanes.empty()) g[PadLanes] += share;
    if (x.compute_with) g[ComputeWith] += share;
    for (const auto& ty : {x.precision.storage, x.precision.compute})
      if (ty && is_float(*ty) && bytes(*ty) < 4) g[Narrow] += share;
  }
  for (int k = Inline; k < kFeatures; ++k) f[k] = static_cast<float>(g[k]);
  f[LogInterBytes] = static_cast<float>(std::log2(1 + inter / io));
  return f;
}

BoostedTrees::BoostedTrees() : BoostedTrees(Options{}) {}
BoostedTrees::BoostedTrees(Options o) : o_(o) {}
BoostedTrees::~BoostedTrees() {
  if (booster_) XGBoosterFree(booster_);
}

void BoostedTrees::fit(const std::vector<std::vector<float>>& x, const std::vector<float>& y,
                       const std::vector<float>& w) {
  if (x.empty()) return;
  if (y.size() != x.size() || (!w.empty() && w.size() != x.size()))
    throw Error("cost model: " + std::to_string(x.size()) + " feature rows but " +
                std::to_string(y.size()) + " targets and " + std::to_string(w.size()) + " weights");
  const Matrix m(x);
  check(XGDMatrixSetFloatInfo(m.h, "label", y.data(), y.size()), "XGDMatrixSetFloatInfo(label)");
  if (!w.empty())
    check(XGDMatrixSetFloatInfo(m.h, "weight", w.data(), w.size()),
          "XGDMatrixSetFloatInfo(weight)");
  BoosterHandle b = nullptr;
  check(XGBoosterCreate(&m.h, 1, &b), "XGBoosterCreate");
  std::unique_ptr<void, int (*)(BoosterHandle)> guard(b, XGBoosterFree);
  // One thread: the model is tiny, and the cores are measuring candidates.
  const std::pair<const char*, std::string> params[] = {{"objective", "reg:squarederror"},
                                                        {"max_depth", std::to_string(o_.max_depth)},
                                                        {"eta", std::to_string(o_.eta)},
                                                        {"min_child_weight", "1"},
                                                        {"subsample", "1"},
                                                        {"nthread", "1"},
                                                        {"verbosity", "0"},
                                                        {"seed", std::to_string(o_.seed)}};
  for (const auto& [k, v] : params) check(XGBoosterSetParam(b, k, v.c_str()), "XGBoosterSetParam");
  for (int i = 0; i < o_.rounds; ++i)
    check(XGBoosterUpdateOneIter(b, i, m.h), "XGBoosterUpdateOneIter");
  if (booster_) XGBoosterFree(booster_);
  booster_ = guard.release();
}

std::vector<float> BoostedTrees::predict(const std::vector<std::vector<float>>& x) const {
  if (!booster_) throw Error("cost model: predict() before fit()");
  if (x.empty()) return {};
  const Matrix m(x);
  bst_ulong n = 0;
  const float* out = nullptr;
  check(XGBoosterPredict(booster_, m.h, 0, 0, 0, &n, &out), "XGBoosterPredict");
  return std::vector<float>(out, out + n);
}

}  // namespace pto::tuner
