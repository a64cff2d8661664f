// Default schedules of row-wise normalizations (softmax, layer_norm): the
// output parallel over rows and vectorized along them, the row statistics and
// the elementwise rows they read computed per row, the statistics rfactored
// into vector lanes.
#include <algorithm>
#include <optional>
#include <set>

#include "dsl/IRVisitor.h"
#include "schedules/LoopNest.h"
#include "schedules/defaults/Rules.h"
#include "schedules/directives/ComputeWith.h"
#include "schedules/directives/RFactor.h"
#include "schedules/directives/StoreIn.h"

namespace pto::defaults {

// A row statistic (max, sum over a long row) as vector lanes of partial
// results plus one horizontal reduce, instead of a serial chain of scalar
// ops: rfactor by up to 8 vectors, as many as leave each accumulator
// register at least 6 steps. Independent accumulators hide the add latency
// that one or two chains serialize on; the horizontal reduce at the end is a
// log2 tree (BERT's 768-wide LayerNorm rows, one thread: 32 lanes 0.0170 ms,
// 64 lanes 0.0146, 128 lanes 0.0141, 256 lanes 0.0153).
std::optional<RFactor> row_rfactor(const Stage& st, const Target& t) {
  if (st.rvars.empty()) return std::nullopt;
  const RVar& r = st.rvars.back();
  const int64_t e = static_extent(r.extent);
  const int lanes = t.vector_lanes(st.dtype);
  if (lanes < 2 || t.has_device()) return std::nullopt;  // GPU stages map update loops instead
  // Extents without a divisor of whole vectors (a 50257-word vocabulary) and
  // symbolic ones guard the last step; a symbolic row takes 8 vectors, the
  // best above for rows long enough to matter (a shorter row runs its one
  // guarded step).
  const auto valid = directives::rfactor_candidates(st, &t, st.dtype);
  for (const int64_t f : {8 * lanes, 4 * lanes, 2 * lanes, lanes}) {
    const RFactor rf{r.name, static_cast<int>(f)};
    if (std::find(valid.begin(), valid.end(), rf) != valid.end() && (e < 0 || e >= 6 * f))
      return rf;
  }
  return std::nullopt;
}

namespace {

// A statistic computed per row has no other rows to take lanes from (the
// reduction rule's short rows reduce a vector of rows per step): rows of 1
// to 5 vectors still take one vector of lanes, since a serial scalar chain is
// a dependent op per element (softmax over [4096, 64]: scalar max and sum
// 0.71 ms, 0.31x ONNX Runtime; one vector of lanes 0.18 ms, 1.17x).
std::optional<RFactor> per_row_rfactor(const Stage& st, const Target& t) {
  if (auto rf = row_rfactor(st, t)) return rf;
  if (st.rvars.empty() || t.has_device()) return std::nullopt;
  const int lanes = t.vector_lanes(st.dtype);
  const RFactor rf{st.rvars.back().name, lanes};
  const auto valid = directives::rfactor_candidates(st, &t, st.dtype);
  if (lanes < 2 || static_extent(st.rvars.back().extent) < lanes ||
      std::find(valid.begin(), valid.end(), rf) == valid.end())
    return std::nullopt;
  return rf;
}

// Row values that a statistic reads back (softmax's exponentials, summed)
// are stored in the same pass that folds them into the statistic's lanes
// (compute_with), not written in one pass and read in another, where a row
// of them outgrows half the L1: the pass saved reads from L2, and a row in
// L1 costs less to read again than the fused loop's rest of the row (its
// values computed twice, in guarded vectors). The statistic's lanes of
// partials, at most 4 vectors where the values are transcendental (the
// polynomial's live values of more would not fit the registers). Softmax, 2
// threads, fused / two passes: 8 x 50257 0.084 / 0.092 ms (in 2 / 4 / 8
// vectors 0.073 / 0.072 / 0.077), 3 x 100003 0.089 / 0.096, 1 x 32000
// 0.0100 / 0.0106; 256 x 4096 (16 KB rows) 0.240 / 0.241; 64 x 1000 0.0124 /
// 0.0117, 128 x 333 0.0110 / 0.0087.
void compute_with_statistic(const Program& p, const Stage& st, const Target& t, Schedule& s) {
  const int64_t n = static_extent(st.shape.back());
  if (n < 0 || 2 * n * bytes(st.dtype) <= t.l1_bytes) return;
  for (const std::string& c : p.consumers(st.name)) {
    StageSchedule* cs = s.stages.count(c) ? &s[c] : nullptr;
    if (!cs || !cs->rfactor || cs->rfactor->parallel ||
        !directives::compute_with_problem(p, st, c).empty())
      continue;
    const int lanes = t.vector_lanes(p.stage(c).dtype);
    const int f =
        transcendental(st) ? std::min(cs->rfactor->factor, 4 * lanes) : cs->rfactor->factor;
    StageSchedule e;
    e.compute = s[st.name].compute;
    e.store = s[st.name].store;
    e.precision = s[st.name].precision;
    e.compute_with = ComputeWith{c, f};
    const RFactor rf = *cs->rfactor;
    cs->rfactor.reset();  // the fused loop's partials replace it
    if (directives::accepts(directives::compute_with_directive(), p, s, &t, st, e)) {
      s[st.name] = e;
      return;
    }
    cs->rfactor = rf;
  }
}

}  // namespace

// Row-wise normalizations (softmax, layer_norm): the output is parallel over
// rows and vectorized along them; the row statistics (reductions over the
// last dim) and the elementwise rows they read are computed per row, so a
// row is read from memory once and each exp is evaluated once.
void rowwise(const Program& p, const Stage& y, const Target& t, Schedule& s) {
  const size_t r = y.vars.size();
  if (r < 2) return;
  std::string row = y.vars[r - 2];
  // y's row statistics (reductions over its last dim) and row values
  // (elementwise stages of its shape): the stages computed per row below.
  const auto row_statistic = [&](const Stage& st) {
    return st.reduce && st.vars.size() == r - 1 &&
           std::equal(st.vars.begin(), st.vars.end(), y.vars.begin()) &&
           st.shape == Shape(y.shape.begin(), y.shape.end() - 1);
  };
  const auto row_values = [&](const Stage& st) {
    return !st.reduce && st.shape == y.shape && st.kind == OpKind::Elementwise;
  };
  // The row group (y, its statistics and the row values they read) passes
  // over each element several times, an exp several elements' worth: a
  // stage too small for threads alone may be worth them as a group. Softmax
  // over [671, 14] (4 passes, one an exp: 7 elements' work each), 2
  // threads: 0.0100 ms serial, 0.0075 parallel (oneDNN 0.0075). Measured
  // like the reductions' rule, against kMinParallelElements per core.
  if (StageSchedule* ys = s.stages.count(y.name) ? &s[y.name] : nullptr;
      ys && t.cores > 1 && ys->loops.parallel.empty() && ys->loops == parallel_vectorized(y, t)) {
    int64_t work = transcendental(y) ? kTranscendentalElements : 1;
    for (const Stage& st : p.stages())
      if (st.name != y.name && !p.is_output(st.name) && (row_statistic(st) || row_values(st)))
        work += transcendental(st) ? kTranscendentalElements : 1;
    if (work > 1) ys->loops = parallel_vectorized(y, t, kMinParallelElements * t.cores / work);
  }
  // The row loop; within its per-core block when parallel_vectorized tiled it
  // (a symbolic row count runs in blocks too, sized at run time: apply_loops
  // in directives/Loops.h, which keeps the row loop and its per-row stages).
  if (const StageSchedule* ys = s.find(y.name); ys && ys->loops.tile.count(row))
    row = inner_loop(row);
  const int lanes = t.vector_lanes(y.dtype);
  // A symbolic row is vectorized too, its tail guarded: scalar, a softmax
  // over a symbolic vocabulary row ran 5x its static kernel.
  if (StageSchedule* ys = s.stages.count(y.name) ? &s[y.name] : nullptr;
      ys && ys->loops.vectorize.empty() && y.shape.back().is_symbolic() && lanes > 1) {
    ys->loops.vectorize = y.vars.back();
    ys->loops.vector_width = lanes;
  }
  // Rows shorter than 2 vectors: the statistics reduce a vector of rows per
  // step (each step a strided load of one column of `lanes` rows), computed
  // per block of `lanes` rows, as the reduction rule does for short rows; a
  // row's own lanes would be mostly a horizontal reduce of a guarded vector.
  // Softmax over [12245, 22]: 0.30 ms per row, 0.086 per block of 16 rows
  // (ONNX Runtime 0.12-0.18); [885, 25] 0.021 -> 0.0076. At 4 vectors a row
  // (64) the vector of rows took 1.8x as long as the row's lanes, at 6 (95)
  // about as long.
  const int64_t len = static_extent(y.shape.back()), nrows = static_extent(y.shape[r - 2]);
  const bool short_rows = lanes > 1 && len > 0 && len < 2 * lanes && (nrows < 0 || nrows >= lanes);
  if (short_rows) {
    LoopSchedule& yl = s[y.name].loops;
    const std::string& rv = y.vars[r - 2];
    if (const auto it = yl.tile.find(rv); it != yl.tile.end()) {
      if (it->second.size() != 1) return;
      it->second = {(it->second[0] + lanes - 1) / lanes * lanes, lanes};
      row = middle_loop(rv);
    } else {
      yl.tile[rv] = {lanes};
      for (std::string& l : yl.parallel)
        if (l == rv) l = outer_loop(rv);
      row = outer_loop(rv);
    }
  }
  // Producers, consumers first, so that each sees where its readers run.
  std::vector<const Stage*> ups;
  for (const Stage& st : p.stages()) ups.insert(ups.begin(), &st);
  std::set<std::string> at_row{y.name};
  for (const Stage* st : ups) {
    if (st->name == y.name || p.is_output(st->name)) continue;
    const bool stat = row_statistic(*st), values = row_values(*st);
    if (!stat && !values) continue;
    // Every reader must run per row of y.
    bool ok = !p.consumers(st->name).empty();
    for (const auto& c : p.consumers(st->name)) ok &= at_row.count(c) > 0;
    // A stage that hosts another's computation (a contraction's epilogue, with
    // the register tile computed at its tile loop) keeps its loops: moving it
    // into the row would leave that placement naming a loop it no longer has.
    ok &= !hosts_placements(s, st->name);
    if (!ok) continue;
    // Row values read by one statistic alone (log_softmax's exp, read by its
    // sum only) stay inline in that reduction: each is evaluated once either
    // way, and storing them costs a write and a read of the row. BERT's MLM
    // head, log_softmax over [128, 30522], interleaved with ONNX Runtime on a
    // loaded machine: stored 2.45 ms (0.89x ORT), inline 2.15 ms (1.01x).
    // Inline, they are evaluated per row too (their producers may be).
    if (values && p.consumers(st->name).size() == 1 && p.stage(p.consumers(st->name)[0]).reduce) {
      at_row.insert(st->name);
      continue;
    }
    StageSchedule& ss = s[st->name];
    ss = StageSchedule{};
    ss.compute = {Placement::Kind::At, y.name, row};
    // Stored rows live per block of rows (Halide folds the storage to the
    // one row computed at a time): one allocation per task, not per row
    // (GPT-2's softmax, 8 x 50257, 2 threads: 0.0720 -> 0.0710 ms). A
    // symbolic row stays on the stack per row (Placement.cpp).
    if (values && static_numel(st->shape) >= 0 && row == inner_loop(y.vars[r - 2]))
      ss.store = Placement{Placement::Kind::At, y.name, outer_loop(y.vars[r - 2])};
    if (stat && short_rows) {
      // Vectorized across the rows, the reduction outside.
      ss.loops.vectorize = st->vars.back();
      ss.loops.vector_width = lanes;
      LoopSchedule up;
      for (const RVar& rv : st->rvars) up.order.push_back(rv.name);
      up.order.insert(up.order.end(), st->vars.begin(), st->vars.end());
      up.vectorize = st->vars.back();
      up.vector_width = lanes;
      ss.update = up;
    } else if (stat) {
      ss.rfactor = per_row_rfactor(*st, t);
    }
    if (const int w = row_vector_width(static_extent(st->shape.back()), lanes); values && w) {
      ss.loops.vectorize = st->vars.back();
      ss.loops.vector_width = w;
    }
    if (values) compute_with_statistic(p, *st, t, s);
    // Row values that y reads at its own point are written into y's row and
    // rewritten there (StoreIn.h): the output's write misses then come in the
    // pass that computes the values, and the L1 holds two rows, not three.
    // Static rows from kInPlaceRowBytes (a symbolic row keeps its
    // specialized version, whose last vector shifts inwards; a symbolic row
    // count gives up only the guard of its last block of rows).
    if (values && !short_rows && len > 0 && len * bytes(y.dtype) >= kInPlaceRowBytes) {
      StageSchedule e = s[st->name];
      e.store_in = y.name;
      if (directives::accepts(directives::store_in_directive(), p, s, &t, *st, e)) s[st->name] = e;
    }
    at_row.insert(st->name);
  }
}

}  // namespace pto::defaults
