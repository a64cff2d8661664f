// Default schedules of the reductions no other rule claims: reductions over
// any axes (sums, max, the sums of means, argmax) and contractions too skinny
// for a register tile (matrix-vector products). Without a rule such a stage
// runs serially with a scalar update, a chain of dependent adds (a column sum
// of [4096, 4096] took 12x numpy's time).
//
// The rule follows from the axis along which the reduction streams through
// memory: the innermost index of the largest tensor it reads.
//  - Along a kept dim (a column sum, the mean over a batch, x @ W with one
//    row): the update's innermost loop is that dim, vectorized, with the
//    reduction outside it, so each step adds a contiguous run of vectors into
//    an accumulator row that stays in L1; parallel over the kept dims where
//    they give every core whole cache lines of each row, else the reduction is
//    split across cores (rfactor in parallel chunks).
//  - Along a reduced dim (a row sum, A @ x): the reduction keeps vector lanes
//    of partial results (row_rfactor) and runs in parallel over blocks of rows;
//    fewer rows than cores split each row across cores.
// Both hold for symbolic extents: tails are guarded, never scalar loops.
#include <algorithm>
#include <limits>

#include "dsl/IRVisitor.h"
#include "schedules/LoopNest.h"
#include "schedules/defaults/Rules.h"
#include "schedules/directives/RFactor.h"

namespace pto::defaults {
namespace {

// Rows per parallel task of the short-row version (a vector of rows per step)
// of a reduction whose number of rows and length are both symbolic, before
// lanes_of_rows grows it to whole vectors of rows; the long-row version's
// blocks are sized at run time.
constexpr int64_t kSymbolicRowBlock = 4;

// Elements of a shape, with a symbolic one counted as large: symbolic sizes
// are the ones a kernel is compiled once for, so they get the parallel code.
int64_t elements(const Shape& s) {
  const int64_t n = static_numel(s);
  return n < 0 ? std::numeric_limits<int64_t>::max() / 4 : n;
}

int64_t round_up(int64_t a, int64_t b) {
  return (a + b - 1) / b * b;
}

// a * b for non-negative counts, saturating at the "large" of elements().
int64_t times(int64_t a, int64_t b) {
  constexpr int64_t kLarge = std::numeric_limits<int64_t>::max() / 4;
  return a == 0 || b <= kLarge / a ? std::min(a * b, kLarge) : kLarge;
}

DType accumulator_type(const Stage& st) {
  if (st.dtype == DType::BF16 || st.dtype == DType::F16) return DType::F32;  // wide_arithmetic
  return st.dtype == DType::Bool ? DType::U8 : st.dtype;
}

}  // namespace

std::string stream_var(const Program& p, const Stage& st) {
  // Sizes compare by their symbolic dims first ([1, K] < [K, N]), then by
  // the product of the static ones.
  struct Reads : IRVisitor {
    const Program& p;
    std::pair<int, int64_t> best{-1, -1};
    std::string var;
    explicit Reads(const Program& q) : p(q) {}
    void visit_access(const AccessNode& n) override {
      IRVisitor::visit_access(n);
      if (!p.has_tensor(n.tensor) || n.args.empty()) return;
      std::pair<int, int64_t> e{0, 1};
      for (const Dim& d : p.tensor(n.tensor).shape)
        if (d.is_symbolic()) ++e.first;
        else e.second = times(e.second, d.value);
      if (e <= best) return;
      best = e;
      const auto* v = n.args.back().as<VarNode>();
      var = v ? v->name : "";
    }
  } r(p);
  r.visit(st.value);
  return r.var;
}

namespace {

// Steps of the reduction: the product of the reduction extents (large when symbolic).
int64_t reduction_steps(const Stage& st) {
  Shape s;
  for (const RVar& r : st.rvars) s.push_back(r.extent);
  return elements(s);
}

// The reduction split across cores in chunks: `stream` keeps vector lanes of
// partials within a chunk when the reduction streams along `rv` itself.
// Chunks of one core's share of a static extent. Over a symbolic one, lanes
// of partials take chunks of a fixed 2^13 steps (32 KiB of f32 per row), which
// keeps a chunk's work above a thread wake-up at any length and gives a long
// row several chunks per core; rows of a kept dim take one chunk per core,
// sized at run time (factor 0: a column sum over 1000 rows is one 2^13 chunk).
std::optional<RFactor> parallel_split(const Stage& st, const RVar& rv, bool lanes_along,
                                      const Target& t) {
  const int lanes = t.vector_lanes(accumulator_type(st));
  RFactor rf{rv.name, 0, true, 0};
  if (lanes_along && lanes > 1) rf.vector_lanes = 4 * lanes;
  const int64_t unit = rf.vector_lanes ? rf.vector_lanes : directives::kChunkUnroll;
  if (rv.extent.is_symbolic()) {
    rf.factor = rf.vector_lanes ? 1 << 13 : 0;
  } else {
    const int64_t chunk = round_up((rv.extent.value + t.cores - 1) / t.cores, unit);
    if (chunk >= rv.extent.value) return std::nullopt;
    rf.factor = static_cast<int>(chunk);
  }
  if (rf.vector_lanes && rf.vector_lanes > rf.factor) rf.vector_lanes = 0;
  if (!directives::rfactor_problem(st, rf, &t, accumulator_type(st)).empty()) return std::nullopt;
  return rf;
}

// The pure loops of a reduction parallel over blocks of its outermost dim
// with more than one iteration (one block per core), the innermost dim
// vectorized where that is not the parallel one. A symbolic number of rows
// runs in blocks of at least kMinParallelElements steps each (one task per
// short row would contend for the thread pool's queue).
LoopSchedule parallel_rows(const Stage& st, const Target& t) {
  LoopSchedule ls;
  const int lanes = t.vector_lanes(accumulator_type(st));
  const int64_t steps = reduction_steps(st);
  for (size_t k = 0; k < st.vars.size(); ++k) {
    const int64_t e = static_extent(st.shape[k]);
    if (e == 1) continue;
    const std::string& v = st.vars[k];
    int64_t inner = 1;  // elements of the output per iteration of v
    for (size_t j = k + 1; j < st.vars.size(); ++j)
      inner = times(inner, std::max<int64_t>(1, static_extent(st.shape[j])));
    const int64_t per_row = times(steps, inner);
    if (e < 0 && per_row < kMinParallelElements) {
      // Short rows of a static length run in blocks of kMinParallelElements
      // steps: one task per row of a dynamic global pool over [1, 2048, 7, 7]
      // (2048 tasks of 49 adds) ran 19x its static kernel.
      ls.tile[v] = {(kMinParallelElements + per_row - 1) / per_row};
      ls.parallel.push_back(outer_loop(v));
    } else if (e < 0 && steps >= std::numeric_limits<int64_t>::max() / 4) {
      // Rows of a symbolic length: the whole dim in parallel, which runs in
      // blocks sized at run time from both extents (Loops.cpp's
      // run_time_block); fixed blocks of 4 rows made 750 tasks of a
      // [3000, 1000] row sum, 2.3x the static kernel.
      ls.parallel.push_back(v);
    } else if (const int64_t chunk = parallel_chunk(e, 1, t); chunk > 0 && chunk < e) {
      ls.tile[v] = {chunk};
      ls.parallel.push_back(outer_loop(v));
    } else {
      ls.parallel.push_back(v);
    }
    if (k + 1 < st.vars.size() && lanes > 1 && static_extent(st.shape.back()) >= lanes) {
      ls.vectorize = st.vars.back();
      ls.vector_width = lanes;
    }
    break;
  }
  return ls;
}

// Streams along kept dim `c` (the stage's innermost): see the file comment.
// The reduction runs into an accumulator block of c (accumulator_at): a
// Halide allocation of its own, so that the update's vector loads of its
// accumulator are aligned loads from an aligned buffer (vectorized over the
// output itself, Halide emitted aligned loads from the caller's buffer, which
// crashed at 16-byte aligned addresses). The block is one core's share of c
// when nothing else runs in parallel (each at least 4 cache lines wide, so
// that cores never share a line), and at most half of L1, so that each
// reduction step reads and writes it in L1 (a row of 4096 f32 is 16 KiB).
void along_kept(const Stage& st, const Target& t, StageSchedule& ss) {
  const std::string& c = st.vars.back();
  const DType acc = accumulator_type(st);
  const int lanes = std::max(1, t.vector_lanes(acc));
  const int64_t ec = static_extent(st.shape.back());
  const bool parallel = t.cores > 1 && times(elements(st.shape), reduction_steps(st)) >=
                                           kMinParallelElements * t.cores;
  // An outer kept dim with a block per core: parallel over it.
  size_t par_dim = st.vars.size();
  for (size_t k = 0; parallel && k + 1 < st.vars.size(); ++k) {
    const int64_t e = static_extent(st.shape[k]);
    if (e == 1) continue;
    if (e < 0 || e >= t.cores) par_dim = k;
    break;
  }
  const int64_t bytes = std::max(1, t.vector_bits / 8 / lanes);
  const int64_t l1_block = std::max<int64_t>(lanes, t.l1_bytes / 2 / bytes / lanes * lanes);
  int64_t block = 0;
  // The rows split across cores (below), along the longest reduction variable.
  const auto split_rows = [&]() -> std::optional<RFactor> {
    if (st.is_arg_reduction()) return std::nullopt;
    const RVar* longest = nullptr;
    for (const RVar& r : st.rvars)
      if (!longest || r.extent.is_symbolic() ||
          (!longest->extent.is_symbolic() && r.extent.value > longest->extent.value))
        longest = &r;
    return parallel_split(st, *longest, false, t);
  };
  if (ec < 0 && par_dim == st.vars.size() && parallel) {
    // Unknown width, nothing else in parallel: the rows split across cores,
    // as a wide static row past the L2s takes them below (a symbolic column
    // sum over [30522, 768] in column blocks 3.2 ms, the static split 1.7).
    if (const auto rf = split_rows()) {
      ss.rfactor = rf;
      return;
    }
  }
  if (ec < 0) {
    // Unknown width: blocks of 8 vectors (512 B of f32) give a row of 768 six
    // blocks for two cores.
    block = 8 * lanes;
  } else if (par_dim == st.vars.size() && parallel) {
    const int64_t per_core = round_up((ec + t.cores - 1) / t.cores, lanes);
    // Each core streams its own chunk of rows, one contiguous block of the
    // input, where all it keeps fits the accumulator block (or the
    // cores' shares of it would be under 4 cache lines: [100000, 64]).
    // Shares of each row instead are runs of a few KB a stride apart, which
    // the prefetchers follow worse, in and out of cache (Zen 4 VM, 2 threads,
    // ms, shares / chunks of rows): [30522, 768] 6.2 / 2.8 (numpy 3.8),
    // [4096, 4096] 3.6 / 2.9, [1000, 3000] 0.16 / 0.115, [2000, 768] 0.088 /
    // 0.066; past it, the chunks' rows of partials leave L1: [200, 8192]
    // 0.065 / 0.107. Also past it where the input outgrows the cores' L2s:
    // the chunk loads and stores its partials once per 4 rows (RFactor.h's
    // kChunkUnroll), from L2 at worst, while the input streams from further
    // out (SPR VM, 2 threads: [4096, 11008] 5.3 / 3.9 ms, [1000, 16384] 1.7 /
    // 1.1; [200, 8192] 0.090 / 0.091).
    const int64_t input_bytes = times(times(elements(st.shape), reduction_steps(st)), bytes);
    if (elements(st.shape) <= l1_block || per_core * bytes < 4 * t.cache_line_bytes ||
        input_bytes > times(t.l2_bytes, t.cores)) {
      if (const auto rf = split_rows()) {
        ss.rfactor = rf;
        return;
      }
    }
    block = std::min(per_core, l1_block);
  } else {
    block = std::min(round_up(ec, lanes), l1_block);
  }
  if (ec >= 0 && block > ec) block = ec;  // one block, narrower than a vector
  LoopSchedule& pure = ss.loops;
  if (par_dim < st.vars.size()) {
    const std::string& v = st.vars[par_dim];
    const int64_t e = static_extent(st.shape[par_dim]);
    if (const int64_t chunk = parallel_chunk(e, 1, t); chunk > 0 && chunk < e) {
      pure.tile[v] = {chunk};
      pure.parallel = {outer_loop(v)};
    } else {
      pure.parallel = {v};
    }
  }
  pure.tile[c] = {block};
  if (pure.parallel.empty() && parallel) pure.parallel = {outer_loop(c)};
  // The copy out of the accumulator, vectorized where lanes tile the block.
  if (lanes > 1 && block % lanes == 0) {
    pure.vectorize = inner_loop(c);
    pure.vector_width = lanes;
  }
  ss.accumulator_at = outer_loop(c);
  LoopSchedule up;
  for (const RVar& r : st.rvars) up.order.push_back(r.name);
  for (size_t k = 0; k + 1 < st.vars.size(); ++k) up.order.push_back(st.vars[k]);
  up.order.push_back(c);
  if (lanes > 1 && block >= lanes) {
    up.vectorize = c;
    up.vector_width = lanes;
  }
  ss.update = up;
}

bool lanes_of_rows(const Stage& st, const Target& t, LoopSchedule& up, int64_t min_block = 0);
bool output_lanes_of_rows(const Stage& st, const Target& t, StageSchedule& ss);

// Rows shorter than this many steps get no lanes of partials: row_rfactor
// (RowWise.cpp) keeps each accumulator vector at least 6 steps, so its
// smallest rfactor, one vector of lanes, needs rows of 6 vectors.
int64_t shortest_rfactor_row(const Stage& st, const Target& t) {
  return 6 * int64_t{std::max(1, t.vector_lanes(st.dtype))};
}

// Rows shorter than shortest_rfactor_row but of whole narrow vectors (28 =
// 7 x 4 lanes, 40 = 5 x 8, 48 = 3 x 16) keep lanes of partials of that
// width, the widest of a vector, a half and a quarter (at least 4 lanes)
// that divides the row into 2+ steps, where a row holds 2+ full vectors, or
// one where the stage is a program output (whose vector of rows goes through
// an accumulator block). A vector of rows per step loads each step's
// element of 16 rows a row apart, which Halide makes one insert per element.
// Measured over 2^24 elements (64 MB, 2 threads, Sapphire Rapids VM), vector
// of rows / lanes of partials: a mean (its sum not an output) over rows of
// 12 3.3 / 6.8 ms, 20 2.8 / 3.4, 28 2.7 / 2.8, 32 2.7 / 2.5, 40 2.4 / 1.6,
// 56 2.4 / 1.4, 80 2.9 / 1.3; a sum as the output over rows of 8 7.6 / 9.0,
// 12 3.7 / 5.0, 16 7.3 / 3.7, 20 5.7 / 3.4, 24 5.9 / 2.8; a max as the
// output over 20 6.2 / 3.3, 32 7.2 / 2.2, 56 5.6 / 1.4. Rows that no such
// width divides (a 7 x 7 window, 9 classes) stay a vector of rows.
std::optional<RFactor> short_row_rfactor(const Stage& st, const Target& t, bool output) {
  if (st.rvars.size() != 1 || st.is_arg_reduction() || t.has_device()) return std::nullopt;
  const RVar& r = st.rvars.back();
  const int64_t e = static_extent(r.extent);
  const int lanes = t.vector_lanes(accumulator_type(st));
  if (e < 0 || e >= shortest_rfactor_row(st, t) || e < (output ? 1 : 2) * int64_t{lanes})
    return std::nullopt;
  const auto valid = directives::rfactor_candidates(st, &t, st.dtype);
  for (const int w : {lanes, lanes / 2, lanes / 4}) {
    const RFactor rf{r.name, w};
    if (w >= 4 && e % w == 0 && e / w >= 2 &&
        std::find(valid.begin(), valid.end(), rf) != valid.end())
      return rf;
  }
  return std::nullopt;
}

// Streams along reduced dim `rv`: see the file comment.
void along_reduced(const Stage& st, const RVar& rv, const Target& t, bool output, StageSchedule& ss) {
  const int64_t rows = elements(st.shape), steps = reduction_steps(st);
  const bool parallel = t.cores > 1 && times(rows, steps) >= kMinParallelElements * t.cores;
  if (parallel && rows < t.cores && !st.is_arg_reduction()) {
    if (const auto rf = parallel_split(st, rv, true, t)) {
      ss.rfactor = rf;
      return;
    }
  }
  if (parallel) ss.loops = parallel_rows(st, t);
  if (rv.name == st.rvars.back().name) {
    ss.rfactor = row_rfactor(st, t);
    if (!ss.rfactor) ss.rfactor = short_row_rfactor(st, t, output);
  }
  // A symbolic row may be short at run time (the 7 x 7 window of ResNet's
  // global pool): rows shorter than the shortest the static rule rfactors
  // take the update over a vector of rows instead (the rfactor's short_below
  // version, Halide's specialize). Its blocks of rows hold at least
  // kMinParallelElements steps of rows that long. Measured on [1, 2048, 7, 7]
  // symbolic, 2 threads: 128 lanes of partials per 49-step row 0.238 ms, a
  // vector of 16 rows per step 0.045 ms (static kernel 0.042).
  if (ss.rfactor && parallel && rv.extent.is_symbolic() && !output) {
    LoopSchedule up;
    up.tile = ss.loops.tile;
    up.parallel = ss.loops.parallel;
    // The short version's update runs fixed blocks of rows, whole vectors of
    // them (lanes_of_rows grows kSymbolicRowBlock to min_block).
    for (size_t k = 0; k < st.vars.size(); ++k)
      if (st.shape[k].is_symbolic() && up.parallel == std::vector<std::string>{st.vars[k]}) {
        up.tile[st.vars[k]] = {kSymbolicRowBlock};
        up.parallel = {outer_loop(st.vars[k])};
      }
    const int64_t below = shortest_rfactor_row(st, t);
    if (lanes_of_rows(st, t, up, (kMinParallelElements + below - 1) / below)) {
      ss.rfactor->short_below = static_cast<int>(below);
      ss.update = up;
    }
  }
  // Rows too short for lanes of partials (or an argmax): the update runs
  // over the same parallel blocks of rows as the pure definition, with
  // lanes of rows where there are a vector's worth (below).
  if (!ss.rfactor && parallel) {
    LoopSchedule up;
    up.tile = ss.loops.tile;
    up.parallel = ss.loops.parallel;
    if (!st.is_arg_reduction() && output && output_lanes_of_rows(st, t, ss)) return;
    if (!st.is_arg_reduction() && !output) lanes_of_rows(st, t, up);
    ss.update = up;
  }
}

// A vector of rows loads each step's element of `lanes` rows a row apart: a
// gather. With every step of a static row of at most kMaxUnrolledRow steps
// unrolled, Halide sees the loads at consecutive offsets of one stride
// together and makes them dense vector loads and shuffles (its strided-load
// staging). A mean over [2436, 241, 28] along its 28 (65 MB, 2 threads):
// 3.85 -> 2.67 ms (ONNX Runtime 1.74); a global pool of 2048 7 x 7 maps and a
// max over [100000, 7] unchanged.
constexpr int64_t kMaxUnrolledRow = 64;
void unroll_short_rows(const Stage& st, LoopSchedule& up) {
  if (reduction_steps(st) > kMaxUnrolledRow) return;  // symbolic counts as large
  for (const RVar& r : st.rvars) up.unroll[r.name] = 0;
}

// Rows too short for lanes of partials (ResNet's global average pool: 2048
// rows of 7 x 7) reduce a vector of rows at a time: the innermost kept dim
// split into vectors of lanes, inside the reduction loops, so that each step
// adds one strided load of `lanes` rows (their few cache lines stay in L1)
// into one accumulator vector, instead of a serial scalar chain per row
// (2 threads, [1, 2048, 7, 7]: 0.070 -> 0.029 ms; ONNX Runtime 0.032-0.037).
// Not for a program output: its update would load vectors from the caller's
// buffer, whose alignment Halide assumes (a crash); an output takes an
// accumulator block instead (output_lanes_of_rows).
// With min_block, a parallel block of rows of c that holds no whole number of
// vectors (a symbolic row count's 4 rows) grows to at least min_block rows,
// whole vectors of them. Returns whether it applied.
bool lanes_of_rows(const Stage& st, const Target& t, LoopSchedule& up, int64_t min_block) {
  const int lanes = t.vector_lanes(accumulator_type(st));
  if (lanes < 2) return false;
  size_t k = st.vars.size();
  while (k > 0 && static_extent(st.shape[k - 1]) == 1) --k;
  if (k == 0) return false;
  const std::string& c = st.vars[k - 1];
  const int64_t e = static_extent(st.shape[k - 1]);
  if (e > 0 && e < lanes) return false;
  std::vector<std::string> outer;
  if (const auto tl = up.tile.find(c); tl != up.tile.end()) {
    if (min_block > 0 && tl->second.size() == 1 && (tl->second[0] % lanes || tl->second[0] <= lanes)) {
      const int64_t b = round_up(std::max({tl->second[0], min_block, int64_t{2} * lanes}), lanes);
      if (e > 0 && b > e) return false;  // a static row count under two vectors of rows
      tl->second[0] = b;
    }
    if (tl->second.size() != 1 || tl->second[0] % lanes || tl->second[0] <= lanes) return false;
    tl->second.push_back(lanes);
    outer = {outer_loop(c), middle_loop(c)};
  } else {
    up.tile[c] = {lanes};
    outer = {outer_loop(c)};
    if (!up.parallel.empty() && up.parallel[0] == c) up.parallel = {outer_loop(c)};
  }
  for (const std::string& v : st.vars)
    if (v == c) {
      up.order.insert(up.order.end(), outer.begin(), outer.end());
    } else if (up.tile.count(v)) {
      up.order.push_back(outer_loop(v));
      up.order.push_back(inner_loop(v));
    } else {
      up.order.push_back(v);
    }
  for (const RVar& r : st.rvars) up.order.push_back(r.name);
  up.order.push_back(inner_loop(c));
  up.vectorize = inner_loop(c);
  up.vector_width = lanes;
  unroll_short_rows(st, up);
  return true;
}

// A program output's short rows reduce a vector of rows at a time too, into
// an accumulator block (accumulator_at, as along_kept's) of each parallel
// block of rows, then copied out: the update's vector loads and stores are of
// an aligned buffer of its own, not of the caller's (see lanes_of_rows). For
// a stage with one kept dim of more than one row (a row sum, a global pool).
// Measured on an output sum of [8192, 9], 2 threads: 0.063 ms scalar per row,
// 0.032 ms a vector of rows into the block.
bool output_lanes_of_rows(const Stage& st, const Target& t, StageSchedule& ss) {
  const int lanes = t.vector_lanes(accumulator_type(st));
  if (lanes < 2) return false;
  size_t kept = 0, k = 0;
  for (size_t j = 0; j < st.vars.size(); ++j)
    if (static_extent(st.shape[j]) != 1) ++kept, k = j;
  if (kept != 1) return false;
  const std::string& c = st.vars[k];
  const int64_t e = static_extent(st.shape[k]);
  const auto tl = ss.loops.tile.find(c);
  if ((e > 0 && e < 2 * lanes) || tl == ss.loops.tile.end() || tl->second.size() != 1 ||
      ss.loops.parallel != std::vector<std::string>{outer_loop(c)})
    return false;
  const int64_t block = round_up(std::max<int64_t>(tl->second[0], 2 * lanes), lanes);
  if (e > 0 && block > e) return false;
  tl->second[0] = block;
  ss.loops.vectorize = inner_loop(c);
  ss.loops.vector_width = lanes;
  ss.accumulator_at = outer_loop(c);
  LoopSchedule up;
  up.tile[c] = {lanes};
  for (const std::string& v : st.vars) up.order.push_back(v == c ? outer_loop(c) : v);
  for (const RVar& r : st.rvars) up.order.push_back(r.name);
  up.order.push_back(inner_loop(c));
  up.vectorize = inner_loop(c);
  up.vector_width = lanes;
  unroll_short_rows(st, up);
  ss.update = up;
  return true;
}

}  // namespace

void reduction(const Program& p, const Stage& st, const Target& t, Schedule& s) {
  if (!st.reduce || st.rvars.empty() || t.has_device()) return;
  const std::string v = stream_var(p, st);
  if (v.empty()) return;
  StageSchedule& ss = s[st.name];
  if (!st.vars.empty() && v == st.vars.back()) return along_kept(st, t, ss);
  for (const RVar& r : st.rvars)
    if (r.name == v) return along_reduced(st, r, t, p.is_output(st.name), ss);
}

}  // namespace pto::defaults
