// Schedules as plain data.
//
// A Schedule says *how* a Program runs: per stage, where it is computed and
// stored, how its loops are tiled, ordered, vectorized, unrolled and
// parallelized, how it is pipelined, at which precision it stores, computes and
// accumulates, and on which device. It holds no Halide objects: it prints, it
// round-trips through JSON (ScheduleJson.h), it is validated against a Program
// and a Target (Validate.h), and the autotuner mutates it as a value.
//
// Loop names. A stage's loops are its index variables (pure dims outermost
// first, then reduction variables). Tiling dim `i` with one size T gives loops
// `i_o` (over tiles) and `i_i` (within a tile, extent T); two sizes [T1, T2]
// give `i_o`, `i_m` (extent T1/T2 steps) and `i_i` (extent T2). `order`,
// `vectorize`, `unroll`, `parallel` and compute_at refer to these names.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "dsl/Type.h"

namespace pto {

inline constexpr int kScheduleSchemaVersion = 1;

// Loop directives for one definition of a stage (its pure part, or its update).
struct LoopSchedule {
  std::map<std::string, std::vector<int64_t>> tile;  // dim -> [T1] or [T1, T2], T2 divides T1
  std::vector<std::string> order;                    // loops, outermost first (a subset is fine)
  std::string vectorize;                             // loop to vectorize, empty for none
  int vector_width = 0;                              // lanes; 0 = the loop's whole (constant) extent
  std::map<std::string, int> unroll;                 // loop -> factor; 0 = fully
  std::vector<std::string> parallel;                 // loops run across threads

  bool empty() const {
    return tile.empty() && order.empty() && vectorize.empty() && unroll.empty() && parallel.empty();
  }
  bool operator==(const LoopSchedule&) const = default;
};

struct Placement {
  enum class Kind { Root, Inline, At };
  Kind kind = Kind::Root;
  std::string stage;  // consumer stage, for At
  std::string loop;   // loop of that consumer, for At
  bool operator==(const Placement&) const = default;
};
std::string to_string(const Placement& p);

// Precision of one stage; unset members take the stage's logical dtype.
struct Precision {
  std::optional<DType> storage;     // element type of the materialized buffer
  std::optional<DType> compute;     // type the element expression is evaluated in
  std::optional<DType> accumulate;  // type of a reduction's accumulator
  bool operator==(const Precision&) const = default;
};

struct Prefetch {
  std::string tensor;  // an input or producer stage read by this stage
  std::string loop;    // loop of this stage at which to prefetch
  int distance = 1;    // iterations ahead
  bool operator==(const Prefetch&) const = default;
};

struct Pipelining {
  int ring_buffer = 0;  // 0 = off; 1-8 = fold the stage's storage to that many slices
  bool async = false;   // run the producer as its own task, overlapping the consumer
  std::vector<Prefetch> prefetch;
  bool operator==(const Pipelining&) const = default;
};

// A dense copy of the region of `tensor` (an input or a producer stage) that
// this stage reads, made at one of its loops: packing, e.g. a matmul's panel
// of B, contiguous and reused by every row tile instead of strided rows.
struct CacheRead {
  std::string tensor;
  std::string loop;
  // Store the copy with its two innermost dims swapped (a transposing pack), so
  // that a stage vectorizing along the tensor's second-to-last dim (x @ W^T reads
  // W(o, k) while vectorizing o) loads contiguous vectors.
  bool transpose = false;
  bool operator==(const CacheRead&) const = default;
};

// Halide's rfactor: the reduction over `rvar` (static extent N) is split into
// rvar_o (N / factor steps) and rvar_i (factor), and the partial reductions
// over rvar_o are computed into an intermediate `<stage>__rf` that has one pure
// lane per value of rvar_i; the stage then reduces those `factor` lanes. The
// intermediate's lanes are independent, so they are vectorized: `max_j x[i, j]`
// runs as a 16-lane vector max over the row plus one horizontal reduce, where
// the plain update is a serial chain (a reduction loop is never vectorized).
// Only for associative reductions (sum, prod, min, max).
// A factor that does not divide the extent (or a symbolic extent) guards the
// last step; it must then be a multiple of the target's vector lanes.
struct RFactor {
  std::string rvar;  // a reduction variable of the stage
  int factor = 0;    // lanes of the intermediate (steps of a chunk, when parallel)
  // Split across cores instead, for a long reduction with little else to run
  // in parallel (a column sum of a narrow matrix, a row sum of one long row):
  // rvar runs in chunks of `factor` consecutive steps, the chunks in parallel,
  // each into its own partial result (the intermediate's dim rvar_part); the
  // stage then combines the chunks. With vector_lanes > 0 each chunk keeps
  // that many vector lanes of partials along rvar (the reduction streams
  // along rvar); with 0 its update is vectorized along the stage's innermost
  // dim (the reduction streams along that dim).
  bool parallel = false;
  int vector_lanes = 0;
  // A symbolic rvar shorter than this many steps at run time (a 7 x 7 pooling
  // window) takes the stage's "update" directives instead: too short a row
  // for lanes of partials, the other version reduces a vector of rows per step.
  int short_below = 0;
  // The intermediate spans a block of rows: computed at the outer loop of the
  // stage's innermost tiled pure dim (a root stage's static tile), each
  // reduction step over the block's rows, unrolled, its partials in registers.
  // The rows then stream together (several memory streams in flight: a
  // matrix-vector product's rows of A) and what they share (x) is loaded once
  // per step for all of them. Across cores (parallel, no vector_lanes) it is
  // split-K with a register tile: each chunk's partials over a block of rows
  // x the stage's innermost dim in vectors, all in registers through the
  // chunk's steps (a [33, 4096] @ [4096, 33] has too few output tiles to
  // share, and many steps).
  bool interleave = false;
  bool operator==(const RFactor&) const = default;
};

// FlashAttention for a contraction over the softmax of a score matrix
// (O = softmax(X) V along the softmax axis; OnlineSoftmax.h in directives/):
// one loop over tiles of `rows` query rows, and in it over blocks of `keys`
// key positions, each block's scores, row max, exponentials and products with
// V computed in cache and folded into a running max, sum and output
// (rescaled by exp(m_old - m_new)), so the score matrix is never stored.
struct OnlineSoftmax {
  int64_t rows = 0;
  int64_t keys = 0;
  bool operator==(const OnlineSoftmax&) const = default;
};

// An elementwise stage computed in the loop of the reduction that reads it
// (softmax's exponentials with their row sum, layer_norm's centred values
// with their squares' sum): one pass over the row stores each value and adds
// it to `lanes` vector lanes of partials, instead of a pass that writes the
// row and another that reads it back. The reduction must read the stage at
// its own indices plus its reduction variable, the stage's last dim.
struct ComputeWith {
  std::string stage;  // the reduction
  int lanes = 0;      // its lanes of partials (whole vectors of the target's)
  bool operator==(const ComputeWith&) const = default;
};

struct GpuMapping {
  std::vector<std::string> blocks;   // loops mapped to GPU blocks, outermost first
  std::vector<std::string> threads;  // loops mapped to GPU threads
  bool operator==(const GpuMapping&) const = default;
};

struct StageSchedule {
  Placement compute;                 // where the stage is computed
  std::optional<Placement> store;    // where its storage lives (default: with compute)
  LoopSchedule loops;                // pure definition
  std::optional<LoopSchedule> update;  // reduction update (default: no directives)
  // A reduction accumulates into a separate buffer computed per iteration of
  // this loop of its pure definition (a register or cache tile: the matmul
  // micro-kernel when the stage has no consumer to be computed in), then
  // writes it out. Empty: the reduction runs in the stage's own storage.
  std::string accumulator_at;
  std::vector<CacheRead> cache;      // packed copies of what it reads
  // Vectorized partial reductions (see RFactor). The intermediate is computed
  // per point of the stage (inside its update's pure loops) and replaces the
  // "update" directives, so it excludes update, accumulator_at, cache, prefetch.
  std::optional<RFactor> rfactor;
  // Skip the reduction steps that read the zero padding of a padded stage
  // (conv2d_nhwc's `_pad`), along these of its dims (["h", "w"]): their
  // products are zero. Pays where the condition folds away or trims a loop:
  // kx unrolled over a tile of whole rows, ky outside a one-row tile
  // (ZeroPadding.h). Empty: every step runs.
  std::vector<std::string> skip_padding;
  // Sum adjacent pairs of this reduction variable within each vector lane:
  // the reduction runs over pairs (k = 2 k' + k_2) with k_2 innermost and
  // atomically vectorized under the update's vector lanes, the shape of x86's
  // vdpbf16ps (two bf16 products accumulated into each f32 lane, twice the
  // f32 FMA rate on avx512_bf16). Needs its pairs adjacent in memory: the
  // second operand pair-interleaved ([K/2, N, 2] for a matmul), dense, and an
  // accumulator tile (`accumulator_at`). Empty: off.
  std::string dot_pairs;
  // Compute this pure var of the reduction's accumulator tile in whole
  // vectors of the update's lanes past its extent (the update's vector split
  // rounded up), so that a dim that is not whole vectors (a matmul's 12
  // output columns against 16 lanes) runs unmasked vector FMAs with the
  // accumulators in registers. The operands read along it come from their
  // packed copies (`cache`, required), made from views clamped to the
  // extent; the extra points are never stored. Empty: off.
  std::string pad_lanes;
  // A version of the (root) stage for symbolic extents that hold at least one
  // tile, vector or unroll factor of each of its symbolic dims, where those
  // tails shift inwards as static ones do: constant-size register tiles and
  // unguarded vectors (Halide `specialize`); smaller extents run the guarded
  // loops (see directives/Specialize.h). false: guarded loops only.
  bool specialize = false;
  // The stage and the softmax it reads run as one fused loop (OnlineSoftmax
  // above); it owns the stage's loops. Unset: the stages as scheduled.
  std::optional<OnlineSoftmax> online_softmax;
  // The contraction on the CPU's matrix unit (AMX on Sapphire Rapids): a sum
  // over k of a product of two factors, one reading (i, k), the other (k, j)
  // (i, j the stage's last two dims, the dims before them batch loops), runs
  // as 16 x 16 tiles of f32 accumulators in AMX tile registers, each step one
  // tdpbf16ps of up to 32 k. The factors are rounded to bf16 into packed
  // copies first, so f32 factors are a precision change (an accuracy budget
  // decides) and bf16 ones exact (directives/Amx.h). It owns the stage's
  // loops. false: vector FMAs.
  bool amx = false;
  // Computed in one loop with the reduction that reads it (ComputeWith
  // above), which then owns the loops of both. Unset: computed on its own.
  std::optional<ComputeWith> compute_with;
  // Store the stage in the buffer of this consumer (computed at root, reading
  // it pointwise) instead of its own: each value is written where the
  // consumer's value for the same point goes, and the consumer rewrites it in
  // place (directives/StoreIn.h). Empty: its own storage.
  std::string store_in;
  // Lowered without the IEEE guards on its float expressions (NaN, Inf and
  // signed zeros then follow no rule; directives/FastMath.h). false: numpy's
  // IEEE semantics.
  bool fast_math = false;
  Precision precision;
  Pipelining pipeline;
  std::string device = "cpu";        // cpu | cuda | opencl
  GpuMapping gpu;
  bool operator==(const StageSchedule&) const = default;
};

struct ScheduleOptions {
  int opt_level = 2;           // 0: ignore loop directives (plain, for debugging numerics)
  bool bounds_checks = true;   // Halide's run-time assertions
  int threads = 0;             // 0 = all cores
  bool profile = false;        // per-stage time and memory report
  bool check_numerics = false; // fail on NaN/Inf in outputs
  bool operator==(const ScheduleOptions&) const = default;
};

struct Schedule {
  ScheduleOptions options;
  std::map<std::string, StageSchedule> stages;  // stages not listed: computed at root, serial

  StageSchedule& operator[](const std::string& stage) { return stages[stage]; }
  const StageSchedule* find(const std::string& stage) const {
    auto it = stages.find(stage);
    return it == stages.end() ? nullptr : &it->second;
  }
  bool operator==(const Schedule&) const = default;
};

}  // namespace pto
