#include "autotuner/CostModel.h"

#include <algorithm>
#include <cmath>

#include "dsl/Analysis.h"
#include "schedules/LoopNest.h"

namespace pto::tuner {
namespace {

// Product of the constant extents of the loops inside (and including) position `from`.
double inner_points(const std::vector<Loop>& nest, size_t from) {
  double n = 1;
  for (size_t i = from; i < nest.size(); ++i) n *= nest[i].extent > 0 ? static_cast<double>(nest[i].extent) : 64.0;
  return n;
}

}  // namespace

std::vector<double> schedule_features(const Program& p, const Target& t, const Schedule& s) {
  enum F { Bias, Inline, Root, At, Vec, VecFrac, Par, Unroll, Mode0, Mode1, Mode2, Mode3, FitL1, FitL2, LogTileL1,
           InterBytes, Async, RedTiled, NumRoot, N };
  std::vector<double> f(N, 0.0);
  f[Bias] = 1;
  double total = 0;
  std::vector<double> w;
  for (const Stage& st : p.stages()) {
    double fl = 1;
    try {
      fl = std::max(1.0, stage_flops(st));
    } catch (const std::exception&) {
    }
    w.push_back(fl);
    total += fl;
  }
  double inter = 0;
  for (size_t i = 0; i < p.stages().size(); ++i) {
    const Stage& st = p.stages()[i];
    const double share = w[i] / total;
    const StageSchedule* ss = s.find(st.name);
    const StageSchedule none;
    const StageSchedule& x = ss ? *ss : none;
    if (x.compute.kind == Placement::Kind::Inline) {
      f[Inline] += share;
      continue;
    }
    f[x.compute.kind == Placement::Kind::Root ? Root : At] += share;
    if (x.compute.kind == Placement::Kind::Root) f[NumRoot] += 1;
    const auto outs = p.outputs();
    const bool intermediate = std::find(outs.begin(), outs.end(), st.name) == outs.end();
    if (intermediate && x.compute.kind == Placement::Kind::Root) {
      double n = 4;
      for (const Dim& d : st.shape) n *= d.is_symbolic() ? 64.0 : static_cast<double>(d.value);
      inter += n;
    }
    const LoopSchedule& main = st.reduce && x.update ? *x.update : x.loops;
    const int lanes = std::max(1, t.vector_lanes(DType::F32));
    if (!main.vectorize.empty()) {
      f[Vec] += share;
      f[VecFrac] += share * std::min(2.0, static_cast<double>(main.vector_width ? main.vector_width : lanes) / lanes);
    }
    if (!main.parallel.empty() || !x.loops.parallel.empty()) f[Par] += share;
    if (!main.unroll.empty()) f[Unroll] += share;
    if (x.pipeline.async) f[Async] += share;
    if (st.reduce) {
      // Which of the four loop orders: where the first reduction loop sits.
      std::vector<Loop> nest;
      try {
        nest = loop_nest(st, main, true);
      } catch (const std::exception&) {
        continue;
      }
      size_t first_r = nest.size();
      for (size_t k = 0; k < nest.size(); ++k)
        if (nest[k].reduction) {
          first_r = k;
          break;
        }
      const bool r_last = std::all_of(nest.begin() + static_cast<std::ptrdiff_t>(first_r), nest.end(), [](const Loop& l) { return l.reduction; });
      const int mode = first_r == 0 ? 1 : (r_last ? 0 : 2);
      f[mode == 0 ? Mode0 : mode == 1 ? Mode1 : Mode2] += share;
      if (main.tile.count(st.rvars[0].name)) f[RedTiled] += share;
      // Footprint of one iteration of the loop just outside the reduction: the
      // accumulators plus the operand slices the reduction loops read.
      const double acc = inner_points(nest, first_r) / std::max(1.0, [&] {
        double r = 1;
        for (const Loop& l : nest)
          if (l.reduction) r *= l.extent > 0 ? static_cast<double>(l.extent) : 64.0;
        return r;
      }());
      const double bytes = 4 * (acc + inner_points(nest, first_r) / std::max(1.0, acc) * 2);
      f[FitL1] += share * (bytes <= static_cast<double>(t.l1_bytes) ? 1 : 0);
      f[FitL2] += share * (bytes <= static_cast<double>(t.l2_bytes) ? 1 : 0);
      f[LogTileL1] += share * std::log2(std::max(1.0, bytes / static_cast<double>(t.l1_bytes)));
      if (mode == 2 && first_r > 0) f[Mode3] += share * std::log2(1 + acc);  // register tile size
    }
  }
  double io = 1;
  try {
    io = std::max(1.0, program_io_bytes(p));
  } catch (const std::exception&) {
  }
  f[InterBytes] = std::log2(1 + inter / io);
  return f;
}

void RidgeModel::fit(const std::vector<std::vector<double>>& x, const std::vector<double>& y) {
  if (x.empty()) return;
  const size_t n = x[0].size();
  // Normal equations (X^T X + lambda I) w = X^T y, solved by Gaussian elimination with pivoting.
  std::vector<std::vector<double>> a(n, std::vector<double>(n + 1, 0.0));
  for (size_t s = 0; s < x.size(); ++s)
    for (size_t i = 0; i < n; ++i) {
      for (size_t j = 0; j < n; ++j) a[i][j] += x[s][i] * x[s][j];
      a[i][n] += x[s][i] * y[s];
    }
  for (size_t i = 1; i < n; ++i) a[i][i] += lambda_ * static_cast<double>(x.size());
  a[0][0] += 1e-9;
  for (size_t c = 0; c < n; ++c) {
    size_t piv = c;
    for (size_t r = c + 1; r < n; ++r)
      if (std::fabs(a[r][c]) > std::fabs(a[piv][c])) piv = r;
    std::swap(a[c], a[piv]);
    if (std::fabs(a[c][c]) < 1e-12) continue;
    for (size_t r = 0; r < n; ++r) {
      if (r == c) continue;
      const double m = a[r][c] / a[c][c];
      for (size_t k = c; k <= n; ++k) a[r][k] -= m * a[c][k];
    }
  }
  w_.assign(n, 0.0);
  for (size_t i = 0; i < n; ++i) w_[i] = std::fabs(a[i][i]) < 1e-12 ? 0 : a[i][n] / a[i][i];
}

double RidgeModel::predict(const std::vector<double>& x) const {
  double r = 0;
  for (size_t i = 0; i < x.size() && i < w_.size(); ++i) r += w_[i] * x[i];
  return r;
}

}  // namespace pto::tuner
