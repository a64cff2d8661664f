// Default schedules of matmul-like contractions (matmul, linear, batched
// matmul, NCHW convolution), and of matrix-vector products (matrix_vector, at
// the end: a stream of A's rows, not a tile): a register tile of accumulators (6 x 4 or 8 x 3
// AVX-512 vectors) with the reduction outermost, rows unrolled and columns
// vectorized; computed inside the tile of its elementwise epilogue, or, with
// no epilogue to fuse into (or a B operand that must be packed), into an
// accumulator tile of its own with the B panel packed per column tile.
#include <algorithm>
#include <limits>
#include <optional>
#include <set>

#include "dsl/IRVisitor.h"
#include "schedules/LoopNest.h"
#include "schedules/defaults/Rules.h"
#include "schedules/directives/OnlineSoftmax.h"
#include "schedules/directives/PadLanes.h"
#include "schedules/directives/RFactor.h"
#include "schedules/directives/Specialize.h"

namespace pto::defaults {

// The two dims of a contraction or convolution output that form the register
// tile: (rows, contiguous columns) for matmul, (output channels, output
// width) for an NCHW convolution (each loaded input value is reused across
// the channels, each weight across the width), (output width, output
// channels) for a channels-last one, like a matmul's rows and columns: o is
// wide enough for whole vectors also where the image is 7 pixels wide.
std::pair<size_t, size_t> tile_dims(const Stage& st) {
  if (channels_last_conv(st)) return {2, 3};
  if (st.kind == OpKind::Convolution && st.vars.size() >= 3) return {1, st.vars.size() - 1};
  return {st.vars.size() - 2, st.vars.size() - 1};
}

// The iterations of the pure dims outside the register tile's two (a batch,
// attention heads): the product of the static ones, and whether any is
// symbolic.
struct OuterIterations {
  int64_t known = 1;
  bool symbolic = false;
};
OuterIterations outer_iterations(const Stage& st, std::pair<size_t, size_t> rc) {
  OuterIterations it;
  for (size_t k = 0; k < st.vars.size(); ++k) {
    if (k == rc.first || k == rc.second) continue;
    const int64_t x = static_extent(st.shape[k]);
    if (x < 0)
      it.symbolic = true;
    else
      it.known *= x;
  }
  return it;
}

// The register tile over stage `e` (the epilogue, or the contraction itself):
// rows x vectors of accumulators, the rows and the other pure dims outside, a
// parallel loop over an outer dim, the column tiles or the row tiles. Returns
// the loop to compute the accumulators at.
//
// The tile is the one whose busiest core finishes first (register_tile_cost):
// every step of the reduction issues rows x vectors FMAs on the 2 FMA pipes of
// an x86 core and loads rows + vectors values on 2 load ports, and cannot
// finish before the FMA latency (4 cycles) has passed for each accumulator: a
// 6 x 1 tile's 6 chains leave the pipes a quarter idle, and its 7 loads per 6
// FMAs bound it too. Candidates: 6 (or fewer) rows x 1-4 vectors, 8 x 3 and 12
// x 1-2 where the registers hold them (6 x 4 and 8 x 3: 29 and 28 of AVX-512's
// 32 registers; 6 x 2 on AVX2's 16, where 6 x 3 spilled), and, where every row
// fits one tile (12 rows or fewer), that one row tile at every width the
// registers hold. One row tile streams the second operand once, in the
// longest contiguous pieces the registers allow: its rows are a whole row
// stride apart, so each piece costs a memory latency, and the prefetcher does
// not follow them across pages. [1, K] @ [K, N] on the 2-core Zen 5 (2
// threads, 5 interleaved rounds, numpy's sgemv in the same process): 1 x 4
// vectors 0.205 ms, 1 x 8 0.180, 1 x 24 0.059 (numpy 0.079) at K = 768, N =
// 3072; 1 x 24 0.189 vs numpy 0.246 at [1, 6732] @ [6732, 735], 2.9 vs 3.7 ms
// at [1, 4096] @ [4096, 11008]; 1 x 28 and 1 x 32 slower than 1 x 24 (spills);
// [4, 4096] @ [4096, 4096]: 4 x 6 2.3 ms, 2 x 12 (two row tiles) 3.6, 4 x 4
// 4.6.
std::string register_tile(const Stage& e, std::pair<size_t, size_t> rc, const Target& t,
                          LoopSchedule& ls, const TileOperands& ops, bool pad, double* cycles) {
  const int lanes = t.vector_lanes(DType::F32);
  const std::string row = e.vars[rc.first], col = e.vars[rc.second];
  const int64_t rows = static_extent(e.shape[rc.first]), cols = static_extent(e.shape[rc.second]);
  // Parallel over the outermost other dim with enough iterations for both
  // threads (a convolution's output rows, attention heads, a batch): one fork
  // per call and whole tiles per task; else over column tiles (BERT's qk went
  // from 12 forks of 2 column tiles to one fork of 12 heads), or row tiles
  // where there are too few column tiles to share.
  std::optional<std::string> outer_parallel;
  for (size_t k = 0; k < e.vars.size(); ++k) {
    const int64_t x = static_extent(e.shape[k]);
    if (k != rc.first && k != rc.second && (x < 0 || x >= 4)) {
      outer_parallel = e.vars[k];
      break;
    }
  }
  // The other pure dims' iterations (-1: some symbolic).
  const OuterIterations outer = outer_iterations(e, rc);
  const int64_t outer_iterations = outer.symbolic ? -1 : outer.known;
  bool serial = false;
  const int64_t regs = t.vector_registers;
  const int64_t max_vectors = tile_vectors(t);
  int64_t tr = std::min<int64_t>(rows > 0 ? rows : 6, 6);
  int64_t tc = std::min<int64_t>(cols > 0 ? cols : max_vectors * lanes, max_vectors * lanes);
  bool rows_parallel = false;
  // One row over a symbolic width: the one-row tile at the widest width the
  // registers hold, as a static width that holds it takes (narrower widths
  // run a static variant: FullSpeed.h). [1, 768] @ [768, N] at N = 3072: 4
  // vectors 0.148 ms (a bench_suite run), 24 vectors 0.053.
  if (cols < 0 && rows == 1 && lanes > 1) tc = t.vector_registers * 3 / 4 * lanes;
  // Columns that are not whole vectors, padded: the tile spans them all in
  // whole vectors (the micro-kernel computes the last one in full:
  // padded_columns), its rows chosen so.
  const int64_t padded =
      pad && lanes > 1 && cols > 0 && cols % lanes != 0 ? (cols + lanes - 1) / lanes : 0;
  if (padded) tc = padded * lanes;
  if (tc >= lanes && cols > 0) {
    // Candidates in order: later ones win ties (a conv's 56-wide rows: one
    // 64-wide tile, not 48 + a shifted 48).
    std::vector<std::pair<int64_t, int64_t>> tiles;
    const int64_t vmin = padded ? padded : 1, vmax = padded ? padded : cols / lanes;
    for (int64_t v = vmin; v <= 2 && v <= vmax; ++v)
      if (rows >= 12 && 12 * v + v + 1 <= regs) tiles.emplace_back(12, v);
    for (int64_t v = vmin; v <= max_vectors && v <= vmax; ++v) tiles.emplace_back(tr, v);
    if (max_vectors == 4 && 8 * 3 + 3 + 1 <= regs && rows >= 8 && vmin <= 3 && 3 <= vmax)
      tiles.emplace_back(8, 3);
    // Padded columns past max_vectors: one tile of fewer rows over all of
    // them (wide_tile_vectors). [3706, 550] @ [550, 77]: 5 x 5 vectors 0.90
    // ms, 12 x 1 over 5 column tiles 1.45 (oneDNN 1.03); [598, 898] @ [898,
    // 78] 0.30 -> 0.27; 13 x [161, 80] @ [80, 78] 0.104 -> 0.085. Over whole
    // vectors such tiles were slower as often as faster (44 workloads: [8,
    // 1457] @ [1457, 2042] 0.44 -> 0.57 ms in 4 x 6, the rows' B panel
    // streamed twice), so only where they save the padding.
    if (padded > max_vectors)
      if (const int64_t r = (regs - 1 - padded) / padded; r >= kWideTileRows && rows >= r)
        tiles.emplace_back(r, padded);
    if (rows > 0 && rows <= 12) {
      // One row: each loaded vector feeds one FMA, so only the accumulators,
      // the broadcast and a loaded vector need registers; three quarters of
      // them as accumulators measured fastest (above).
      // Rows past 6 (8 of them: one 8-row tile, not 6 and a shifted 6) at
      // every width; 6 or fewer are the tr-row tiles above up to max_vectors.
      const int64_t most = rows == 1 ? regs * 3 / 4 : (regs - 1) / (rows + 1);
      for (int64_t v = std::max(vmin, tr == rows ? max_vectors + 1 : 1); v <= std::min(most, vmax);
           ++v)
        tiles.emplace_back(rows, v);
    }
    struct Best {
      double cycles = -1;  // of the whole stage, all its outer iterations
      int64_t r = 0, v = 0;
      bool rows_parallel = false;
    };
    const auto best_tile = [&](int64_t cores) {
      Best b;
      const double per_core_outer =
          outer_iterations > 0
              ? static_cast<double>(outer_parallel ? (outer_iterations + cores - 1) / cores
                                                   : outer_iterations)
              : 1.0;
      const int64_t width = padded ? padded * lanes : cols;
      for (const auto& [r, v] : tiles) {
        const TileSharing sharing = outer_parallel ? TileSharing::Outer : TileSharing::Tiles;
        RegisterTileCost c = register_tile_cost(rows, width, r, v, lanes, cores, sharing, ops, t);
        // As register_tile lays them out below: row blocks where they apply.
        if (!outer_parallel && cores == t.cores && row_blocks(rows, r, c.rows_parallel, ops, t))
          c.cycles =
              register_tile_cost(rows, width, r, v, lanes, cores, TileSharing::RowBlocks, ops, t)
                  .cycles;
        if (b.cycles < 0 || c.cycles * per_core_outer <= b.cycles)
          b = {c.cycles * per_core_outer, r, v, c.rows_parallel};
      }
      return b;
    };
    Best best = best_tile(std::max(t.cores, 1));
    // Too little work to pay for waking the other cores: serial, in the
    // tile one core runs fastest.
    if (t.cores > 1 && outer_iterations > 0 && ops.steps > 0) {
      const Best one = best_tile(1);
      if (one.cycles - best.cycles < kForkCycles) {
        best = one;
        serial = true;
      }
    }
    if (cycles) *cycles = best.cycles;
    if (best.cycles >= 0) {
      tr = best.r;
      tc = best.v * lanes;
      rows_parallel = best.rows_parallel;
    }
  }
  if (padded) tc = cols;  // the stage's own loops cover the columns it has
  const int64_t blocks = serial || outer_parallel ? 0 : row_blocks(rows, tr, rows_parallel, ops, t);
  ls.tile[row] = {tr};
  if (blocks) ls.tile[row] = {(rows + blocks * tr - 1) / (blocks * tr) * tr, tr};
  ls.tile[col] = {tc};
  // Other pure dims (batch, convolution rows) stay outside the tile loops.
  std::vector<std::string> order;
  for (size_t k = 0; k < e.vars.size(); ++k)
    if (k != rc.first && k != rc.second) order.push_back(e.vars[k]);
  const std::vector<std::string> tiles =
      blocks ? std::vector<std::string>{outer_loop(row), outer_loop(col), middle_loop(row)}
             : std::vector<std::string>{outer_loop(col), outer_loop(row)};
  order.insert(order.end(), tiles.begin(), tiles.end());
  for (const std::string& l : {inner_loop(row), inner_loop(col)}) order.push_back(l);
  if (!serial)
    ls.parallel = {outer_parallel            ? *outer_parallel
                   : blocks || rows_parallel ? outer_loop(row)
                                             : outer_loop(col)};
  // The parallel loop outermost, the pure dims it passes (a batch of 2 or 3,
  // too few to share) inside each task: one fork per call, not one per
  // iteration of theirs. [3, 18, 379] @ [3, 379, 80] over 2 column tiles:
  // 0.0187 ms forking per batch, 0.0157 once (oneDNN 0.0136). Row tiles
  // shared inside each column tile (rows_parallel) stay inside it.
  if (!serial && !rows_parallel) {
    const auto par = std::find(order.begin(), order.end(), ls.parallel[0]);
    std::rotate(order.begin(), par, par + 1);
  }
  ls.order = order;
  // A padded tile's copy-out too (its last vector shifted inwards over
  // columns already stored); one under a vector stays scalar.
  if (tc >= lanes) {
    ls.vectorize = inner_loop(col);
    ls.vector_width = lanes;
  }
  return blocks ? middle_loop(row) : outer_loop(row);
}

// The loop a column tile's panel of B is packed at: the one just outside the
// row tiles that read it (a column tile's, or a batch's inside it).
std::string panel_loop(const Stage& mm, std::pair<size_t, size_t> rc, const LoopSchedule& ls) {
  const std::string& row = mm.vars[rc.first];
  const bool blocks = ls.tile.count(row) && ls.tile.at(row).size() == 2;
  const auto it =
      std::find(ls.order.begin(), ls.order.end(), blocks ? middle_loop(row) : outer_loop(row));
  if (it == ls.order.begin() || it == ls.order.end()) return outer_loop(mm.vars[rc.second]);
  return *(it - 1);
}

// Row blocks: with no outer dim to share, the cores split the output's rows
// into one block each (the blocks' last row tiles guarded, not shifted into
// a neighbour's), each core running every column tile over its own rows, so
// that each writes one contiguous piece of the output. Column tiles shared
// by the cores write every output row in two cores' pieces, whose
// boundaries share cache lines (a row of 33 or 351 floats, or an array that
// is not 64-byte aligned) and, where the last tile is shifted inwards, the
// same columns, while both cores walk the rows in step: [180, 25] @ [25,
// 384], 6 x 4 tiles over columns 0.035 ms on 2 cores, one core 0.020, row
// blocks 0.012 (oneDNN 0.010). The price is the operand the column tiles
// stream (B), which every core then reads whole: the blocks are taken where
// it is no larger than the row operand (A) or fits half the L2, and where
// each core gets 2 row tiles or more. Measured on the 2-core Sapphire
// Rapids against the column tiles (ms): [391, 32] @ [32, 33] 0.013 ->
// 0.0065, [500, 64] @ [64, 500] 0.127 -> 0.088, [3136, 64] @ [64, 256] 0.35
// -> 0.28, [2000, 300] @ [300, 17] 0.130 -> 0.122, 512^3 0.76 -> 0.72,
// 1024^3 even; where B is larger the columns stay ([128, 768] @ [768, 3072]
// 2.07 vs 2.45 in blocks, [59, 7151] @ [7151, 102] 0.55 vs 0.69), and with 3
// row tiles ([33, 4096] @ [4096, 33]). Tasks of one row tile each, as
// rows_parallel made, paid the pool's cost per task: [391, 32] @ [32, 33]
// 0.020. Returns the number of blocks, 0 for none.
int64_t row_blocks(int64_t rows, int64_t tr, bool rows_parallel, const TileOperands& ops,
                   const Target& t) {
  if (t.cores < 2 || rows <= 0 || (rows + tr - 1) / tr < 2 * t.cores) return 0;
  const bool b_fits = ops.streamed > 0 && ops.row_operands > 0 &&
                      ops.streamed <= std::max(ops.row_operands, t.l2_bytes / 2);
  return rows_parallel || b_fits ? t.cores : 0;
}

// The cycles of the busiest core for an r x v register tile (v vectors of
// `lanes`) over a rows x cols output (-1: symbolic, counted as one tile), the
// last tile of each dim shifted inwards over work already done. A reduction
// step issues r x v FMAs on the 2 FMA pipes of an x86 core and r + v loads on
// its 2 load ports, and takes at least the FMA latency (4 cycles), plus
// kStepCycles that no tile hides (the loop's own instructions, the loads'
// address arithmetic): fitted on the 2-core Sapphire Rapids to balanced tiles
// over [264, 1000] @ [1000, 192], time per FMA relative to 8 x 3: 6 x 3
// 1.05, 12 x 2 1.06, 6 x 2 1.17, 12 x 1 1.32, where the bound alone says
// 1.0 for all but 12 x 1 (1.08). Without it, 12 x 1 tiles won over wider
// ones for the columns they save, and ran slower: [257, 1000] @ [1000, 200]
// 0.42 ms against 0.35 in 12 x 2, [96, 1000] @ [1000, 333] 0.28 against 0.21
// in 8 x 3 (oneDNN 0.31, 0.21). A column tile's panel of B (K x its columns)
// that the L1 does not hold adds kL2PanelCycles a step: a 1x1 convolution's
// GEMM, [256, 256] @ [256, 196], 12 x 2 (32 KiB panel) 0.25 ms, 6 x 4 (64
// KiB; equal cycles without the term) 0.28. A panel past half the L2 does
// not stay there from one row tile to the next (the rows of the other operand
// and the output share it): every row tile fetches it again from L3, a cycle
// per vector a step (kL3LineCycles), so the wider tile pays for its wider
// panel. [59, 7151] @ [7151, 102]: 12 x 2 (0.9 MiB panel) 0.46 ms, 6 x 4
// (1.8 MiB) 0.59; [500, 5212] @ [5212, 577] 9.5 vs 10.3 (2 threads, the
// Sapphire Rapids VM's 2 MiB L2); at 676-768 steps (panels of 0.1-0.2 MiB)
// 8 x 3 stays 1.07x faster than 12 x 2. Each tile
// also zeroes, and stores, its accumulators and enters its loops: about 64 + r
// x v cycles, which matter where the reduction is short ([994, 15] @ [15,
// 194]: 12 x 1 vectors, fewer columns computed, 0.037 ms; 6 x 4 0.029; equal
// at K = 64). Where the operand the column tiles stream (one row piece of it
// per step) outgrows the L2, the first row tile of each column tile fetches
// each piece from L3 or memory, a latency that a step hides only behind its
// own work: at least kStreamedStepCycles a step (fitted to the one-row tiles
// above: 1 x 8 took 3x as long as 1 x 24 per column; 4 x 4 2x as long as 4 x
// 6). The tiles are shared by the cores over the column tiles, or, where there
// are fewer column tiles than cores, over the row tiles if that leaves the
// busiest core fewer (the row tiles run inside each column tile, so sharing
// them forks once per column tile, after its panel is packed: a 23-channel 5x5
// convolution over 103 column tiles took 9.8 ms with its rows shared, 4.0 with
// its columns); under an outer parallel dim every iteration runs all.
RegisterTileCost register_tile_cost(int64_t rows, int64_t cols, int64_t r, int64_t v, int64_t lanes,
                                    int64_t cores, TileSharing sharing, const TileOperands& ops,
                                    const Target& t) {
  constexpr double kStreamedStepCycles = 24, kTileCycles = 64, kStepCycles = 2.5,
                   kL2PanelCycles = 1, kL3LineCycles = 1;
  // A symbolic or unknown reduction counts as long: the tile overhead vanishes.
  constexpr int64_t kLongReduction = 1 << 20;
  const auto ceil_div = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
  const double steps = static_cast<double>(ops.steps > 0 ? ops.steps : kLongReduction);
  const double panel_bytes = steps * static_cast<double>(v * lanes * 4);
  const bool panel_in_l2 = panel_bytes > static_cast<double>(t.l1_bytes);
  const bool panel_past_l2 = panel_bytes > static_cast<double>(t.l2_bytes) / 2;
  const double step =
      std::max({static_cast<double>(r * v) / 2, static_cast<double>(r + v) / 2, 4.0}) +
      kStepCycles +
      (panel_past_l2 ? static_cast<double>(v) * kL3LineCycles
       : panel_in_l2 ? kL2PanelCycles
                     : 0.0);
  const bool streamed = ops.streamed < 0 || ops.streamed > t.l2_bytes;
  const double first = streamed ? std::max(step, kStreamedStepCycles) : step;
  const int64_t row_tiles = rows > 0 ? ceil_div(rows, r) : 1;
  const int64_t col_tiles = cols > 0 ? ceil_div(cols, v * lanes) : 1;
  RegisterTileCost c;
  int64_t cols_busiest = col_tiles, rows_busiest = row_tiles;
  if (sharing == TileSharing::RowBlocks) {
    rows_busiest = ceil_div(row_tiles, cores);
  } else if (sharing == TileSharing::Tiles) {
    const int64_t by_cols = ceil_div(col_tiles, cores) * row_tiles;
    const int64_t by_rows = col_tiles * ceil_div(row_tiles, cores);
    c.rows_parallel = col_tiles < cores && by_rows < by_cols;
    (c.rows_parallel ? rows_busiest : cols_busiest) =
        ceil_div(c.rows_parallel ? row_tiles : col_tiles, cores);
  }
  const double tile = steps * step + kTileCycles + static_cast<double>(r * v);
  c.cycles = static_cast<double>(cols_busiest) *
             (static_cast<double>(rows_busiest) * tile + steps * (first - step));
  return c;
}

// What the register tile of contraction `mm` streams and for how long.
TileOperands tile_operands(const Program& p, const Stage& mm, std::pair<size_t, size_t> rc) {
  TileOperands ops;
  ops.streamed = streamed_bytes(p, mm, rc);
  ops.row_operands = streamed_bytes(p, mm, rc, true);
  ops.steps = 1;
  for (const RVar& r : mm.rvars) {
    const int64_t e = static_extent(r.extent);
    if (e < 0) {
      ops.steps = -1;
      break;
    }
    ops.steps *= e;
  }
  return ops;
}

// Each column tile streams its panel of the operands read without the row
// var; the row tiles split the others.
int64_t streamed_bytes(const Program& p, const Stage& mm, std::pair<size_t, size_t> rc,
                       bool with_row) {
  struct Find : IRVisitor {
    const std::string& row;
    const bool with_row;
    std::set<std::string> tensors;
    Find(const std::string& r, bool w) : row(r), with_row(w) {}
    void visit_access(const AccessNode& a) override {
      struct Uses : IRVisitor {
        const std::string& row;
        bool found = false;
        explicit Uses(const std::string& r) : row(r) {}
        void visit_var(const VarNode& v) override { found |= v.name == row; }
      } uses(row);
      for (const Expr& x : a.args) uses.visit(x);
      if (uses.found == with_row) tensors.insert(a.tensor);
      IRVisitor::visit_access(a);
    }
  } f(mm.vars[rc.first], with_row);
  f.visit(mm.value);
  int64_t bytes = 0;
  for (const std::string& name : f.tensors) {
    const TensorInfo& ti = p.tensor(name);
    const int64_t n = static_numel(ti.shape);
    if (n < 0) return -1;
    bytes += n * pto::bytes(ti.dtype);
  }
  return bytes;
}

// The micro-kernel: reduction loops outside, the register tile's rows
// unrolled and its columns vectorized (and unrolled) inside. `const_tile`:
// the enclosing tile is constant-size (static extents, or the specialized
// version of symbolic ones; the guarded version then unrolls with guards, as
// Halide bounds a tile's extent by its size).
LoopSchedule micro_kernel(const Stage& mm, std::pair<size_t, size_t> rc, const Target& t,
                          bool const_tile) {
  const int lanes = t.vector_lanes(DType::F32);
  const std::string mrow = mm.vars[rc.first], mcol = mm.vars[rc.second];
  LoopSchedule up;
  for (size_t k = 0; k < mm.vars.size(); ++k)
    if (k != rc.first && k != rc.second) up.order.push_back(mm.vars[k]);
  for (const RVar& rv : mm.rvars) up.order.push_back(rv.name);
  up.order.push_back(mrow);
  up.order.push_back(mcol);
  up.vectorize = mcol;
  up.vector_width = lanes;
  // Full unrolls need the register tile to be constant-size, which holds when
  // the enclosing tiles are (static extents: the last tile shifts inwards).
  if (const_tile) {
    up.unroll[mrow] = 0;
    up.unroll[mcol] = 0;
  }
  // An innermost reduction loop of 2-4 steps (a convolution's kernel
  // columns) unrolled around the tile: each step's loop branch and the int32
  // index of every row's broadcast operand then serve several steps' FMAs,
  // which they shared the FMA ports with (DeepLab's dilated 3x3, 256 x 2304
  // x 1089 as im2col + GEMM, one thread: 9.6 -> 8.6 ms; the next loop
  // unrolled too, 9 steps, 21.7 ms).
  if (!mm.rvars.empty())
    if (const int64_t e = static_extent(mm.rvars.back().extent); e >= 2 && e <= 4)
      up.unroll[mm.rvars.back().name] = 0;
  return up;
}

bool static_tile(const Stage& st, std::pair<size_t, size_t> rc) {
  return !st.shape[rc.first].is_symbolic() && !st.shape[rc.second].is_symbolic();
}

// A register tile over symbolic dims gets a specialized version for extents
// that hold a whole tile (directives/Specialize.h): there the last tile shifts
// inwards, so every tile is constant-size and the micro-kernel's accumulators
// stay in registers, as with static extents; smaller extents run the guarded
// tile. A dynamic 512^3 `A @ B` took 14.0 ms guarded, 2.9 ms static.
bool specialized_tile(const Stage& st, const LoopSchedule& ls) {
  return !directives::specialize_bounds(st, ls).empty();
}

// The micro-kernel over a specialized symbolic tile unrolls its rows and
// column vectors by the tile's sizes instead of fully: the specialized
// version's tile is exactly that size (the same code as a full unroll), and
// the guarded version's, of variable size, then unrolls with guards (Halide
// refuses a full unroll of a loop whose extent it cannot bound: `[S, S] @
// [S, S]`).
void unroll_by_tile(const Stage& e, std::pair<size_t, size_t> rc, const LoopSchedule& tile,
                    const Target& t, LoopSchedule& up) {
  const int lanes = t.vector_lanes(DType::F32);
  const auto rows = tile.tile.find(e.vars[rc.first]), cols = tile.tile.find(e.vars[rc.second]);
  if (rows == tile.tile.end() || cols == tile.tile.end() || up.vector_width != lanes) return;
  const std::string& mrow = up.order[up.order.size() - 2];
  const std::string& mcol = up.order.back();
  up.unroll[mrow] = static_cast<int>(rows->second.back());
  up.unroll[mcol] = static_cast<int>(std::max<int64_t>(cols->second.back() / lanes, 1));
}

// Does the contraction read `tensor` as W(col, k) (x @ W^T, as `linear` does),
// i.e. with the vectorized column var in the second-to-last index and a
// reduction var in the last? Then its panel is packed transposed.
bool transposed_operand(const Stage& mm, const std::string& tensor, std::pair<size_t, size_t> rc) {
  struct Find : IRVisitor {
    const std::string& name;
    const AccessNode* found = nullptr;
    explicit Find(const std::string& n) : name(n) {}
    void visit_access(const AccessNode& a) override {
      if (a.tensor == name && !found) found = &a;
      IRVisitor::visit_access(a);
    }
  } f(tensor);
  f.visit(mm.value);
  if (!f.found || f.found->args.size() < 2) return false;
  const auto* second = f.found->args[f.found->args.size() - 2].as<VarNode>();
  if (!second || second->name != mm.vars[rc.second]) return false;
  // The last index runs along a reduction var (k, or a head's h * dh + d).
  struct Vars : IRVisitor {
    std::set<std::string> names;
    void visit_var(const VarNode& v) override { names.insert(v.name); }
  } last;
  last.visit(f.found->args.back());
  if (last.names.count(mm.vars[rc.second])) return false;
  for (const RVar& r : mm.rvars)
    if (last.names.count(r.name)) return true;
  return false;
}

// Does the stage evaluate a transcendental function (a polynomial of a few
// dozen instructions per element)?
bool transcendental(const Stage& st) {
  struct Find : IRVisitor {
    bool found = false;
    void visit_unary(const UnaryNode& n) override {
      switch (n.op) {
        case UnOp::Neg:
        case UnOp::Not:
        case UnOp::Abs:
        case UnOp::Floor:
        case UnOp::Ceil:
        case UnOp::Round:
        case UnOp::Trunc:
        case UnOp::IsNan:
        case UnOp::IsInf:
        case UnOp::BitNot:
        case UnOp::Sqrt:
          break;
        default:
          found = true;
      }
      IRVisitor::visit_unary(n);
    }
  } f;
  f.visit(st.value);
  return f.found;
}

// Does the contraction read rows of its second operand `tensor` so far apart
// that the register tile's panel must be packed? Rows of 512 or more floats
// (2 KiB) land on few cache sets: BERT's FFN weight [768, 3072] (12 KiB rows)
// ran at 125 GFLOP/s per core unpacked, 195 packed with the epilogue as its
// own pass; matmul + bias + ReLU at n = 1024 203 -> 254 (n = 512: even).
bool needs_packing(const Program& p, const Stage& mm, const std::string& tensor,
                   std::pair<size_t, size_t> rc) {
  if (mm.kind != OpKind::Contraction) return false;
  const Shape& sh = p.tensor(tensor).shape;
  if (sh.size() < 2) return false;
  const int64_t row = static_extent(sh.back());
  return (row < 0 || row >= 512) && static_extent(mm.shape[rc.first]) != 1;
}

// Is the K x (tile columns) panel of `tensor` that a column tile reads a
// strided one (rows wider than the tile, so each k starts a new row) that
// packing pays for? Packed once per column tile, its rows no longer share
// few cache sets nor defeat the prefetcher: the symbolic kernels, which pack
// every such panel, beat the unpacked static ones on [16384, 128] @ [128,
// 128] (35.7 vs 45.0 ms on the loaded 2-core Sapphire Rapids, same tiles
// otherwise) and [257, 1000] @ [1000, 333] (1.65 vs 2.04 ms). The copy costs
// about as much as a row tile or two of FMAs, and the rows it speeds up gain
// a tenth or so, so it pays where kPanelReuse row tiles or more read it (same
// Sapphire Rapids, 2 threads, packed vs in place, ms: [18, 379] @ [379, 80]
// 0.0119 vs 0.0091, [30, 379] @ [379, 200] 0.033 vs 0.025, [48, 1500] @
// [1500, 80] 0.058 vs 0.049; [257, 1000] @ [1000, 200] 0.42 vs 0.46), or
// where the cache lines the strided panel touches outgrow half the L2, so
// that each row tile would fetch them again from L3 ([59, 7151] @ [7151,
// 102], 10 row tiles: 0.53 vs 0.67); with one row tile there is no second
// fetch, and the copy is a pass of its own ([3, 7225] @ [7225, 60]: packed
// 0.061 ms, in place 0.021, oneDNN 0.031). A panel spanning whole rows (row <=
// tile) is contiguous already and is read in place.
bool strided_panel(const Program& p, const Stage& mm, const std::string& tensor,
                   std::pair<size_t, size_t> rc, const LoopSchedule& ls, const Target& t) {
  constexpr int64_t kPanelReuse = 12;
  if (mm.kind != OpKind::Contraction) return false;
  const Shape& sh = p.tensor(tensor).shape;
  const auto cols = ls.tile.find(mm.vars[rc.second]), rows = ls.tile.find(mm.vars[rc.first]);
  if (sh.size() < 2 || cols == ls.tile.end() || rows == ls.tile.end()) return false;
  const int64_t row = static_extent(sh.back()), m = static_extent(mm.shape[rc.first]);
  if (row <= cols->second.back()) return false;  // symbolic rows: needs_packing's
  // The row tiles inside one column tile: a row block's (row_blocks), or all.
  const std::vector<int64_t>& tr = rows->second;
  const int64_t reuse = tr.size() == 2 ? tr[0] / tr[1]
                        : m < 0        ? kPanelReuse
                                       : (m + tr[0] - 1) / tr[0];
  const int64_t steps = tile_operands(p, mm, rc).steps;
  const int64_t line = t.cache_line_bytes;
  const int64_t lines_per_step = (cols->second.back() * 4 + line - 1) / line + 1;  // f32, unaligned
  return reuse >= kPanelReuse || steps < 0 ||
         (reuse >= 2 && steps * lines_per_step * line > t.l2_bytes / 2);
}

// mm computed per register tile of its elementwise epilogue `e`.
void contraction_with_epilogue(const Program& p, const Stage& mm, const Stage& e, const Target& t,
                               Schedule& s) {
  const auto rc = tile_dims(mm);
  StageSchedule& es = s[e.name];
  const std::string at = channels_last_conv(mm)
                             ? channels_last_tile(e, t, es.loops, max_tile_pixels(p, mm))
                             : register_tile(e, rc, t, es.loops, tile_operands(p, mm, rc));
  StageSchedule& ms = s[mm.name];
  ms.compute = {Placement::Kind::At, e.name, at};
  ms.loops.vectorize = mm.vars[rc.second];
  ms.loops.vector_width = t.vector_lanes(DType::F32);
  es.specialize = specialized_tile(e, es.loops);
  ms.update = micro_kernel(mm, rc, t, static_tile(e, rc));
  if (es.specialize) unroll_by_tile(e, rc, es.loops, t, *ms.update);
  if (channels_last_conv(mm)) skip_row_padding(p, mm, es.loops, ms);
}

// A matmul's columns under one vector ([1597, 4629] @ [4629, 12], a batched
// [33, 244, 110] @ [33, 110, 8]): masked, the micro-kernel's vector lanes
// are masked loads and stores of an accumulator tile that then lives in
// memory; padded to the whole vector, the accumulators stay in registers and
// each k step is one broadcast of A and one FMA per tile row, as in any other
// tile (`pad_lanes`: the extra columns are computed from a clamped packed B
// and never stored). So do columns past a vector that are not whole vectors,
// where one register tile spans them all: [2000, 300] @ [300, 17] as 12 x 1
// vector tiles, the second shifted inwards over 15 columns already done,
// took 0.26 ms (parallel over the two column tiles, each core reading all of
// A); one padded 2-vector tile over all 17, parallel over the rows, 0.17
// (ONNX Runtime 0.18; Xeon VM, 2 threads). Matrix-vector products and products with at most half
// a vector of columns (A @ W with W of a few columns) stream A's rows
// instead (matrix_vector).
bool padded_columns(const Program& p, const Stage& mm, const Target& t) {
  if (mm.kind != OpKind::Contraction || !mm.reduce || *mm.reduce != ReduceOp::Sum || t.has_device())
    return false;
  // An im2col GEMM's copies and tiles are the im2col rule's (Im2col.cpp).
  for (const std::string& r : mm.reads())
    if (const Stage* c = p.find_stage(r); c && c->op == "im2col") return false;
  const int lanes = t.vector_lanes(DType::F32);
  const auto rc = tile_dims(mm);
  const int64_t cols = static_extent(mm.shape[rc.second]);
  if (lanes <= 1 || cols <= 0 || cols % lanes == 0 ||
      (cols + lanes - 1) / lanes > wide_tile_vectors(t))
    return false;
  if (cols < lanes) return true;
  // Past a vector, the alternative is column tiles of whole vectors, the
  // last shifted inwards. Padding pays where it computes fewer columns than
  // such tiles of 2 or more vectors would (one-vector tiles load a B vector
  // per FMA row: 12 x 1 over 34 columns is 48 of them, as padded 8 x 3 is,
  // at twice the loads per FMA): [1125, 109] @ [109, 34] 0.0408 -> 0.0375 ms
  // padded (oneDNN 0.037); over 60 columns two 2-vector tiles compute the 64
  // padding would, and [8, 100, 80] @ [8, 80, 60] took 0.027 ms in them,
  // 0.030 padded (2-thread Sapphire Rapids VM). The padded tile's copy-out is
  // vectors too, its last shifted inwards (register_tile). Up to
  // wide_tile_vectors: 77 columns as 5 vectors in 5-row tiles.
  const int64_t padded = (cols + lanes - 1) / lanes * lanes;
  for (int64_t v = 2; v * lanes <= cols && v <= wide_tile_vectors(t); ++v)
    if ((cols + v * lanes - 1) / (v * lanes) * v * lanes <= padded) return false;
  // With the rows as the parallel loop, B's panel (K x the padded columns) is
  // packed once, by one core, at memory speed, against each core's share of
  // the FMAs: 16 x cores / M of it, under an eighth from M = 128 x cores
  // ([33, 4096] @ [4096, 33]: padded 0.15 ms, two column tiles packing in
  // parallel 0.105). An outer parallel dim (a batch) packs per task instead.
  // And the rows must feed every core: with fewer than a 6-row tile per
  // core, the column tiles keep them busy ([1, 4096] @ [4096, 40]: one
  // padded tile 0.031 ms, two tiles 0.014).
  const int64_t outer = outer_iterations(mm, rc).known;  // a symbolic dim counts 1: it may be
  const int64_t rows = static_extent(mm.shape[rc.first]);
  if (outer >= t.cores) return true;  // the outer dim feeds the cores
  return rows < 0 || rows >= 128 * t.cores;
}

int64_t tile_vectors(const Target& t) {
  return std::clamp<int64_t>((t.vector_registers - 1) / (6 + 1), 1, 4);
}

int64_t wide_tile_vectors(const Target& t) {
  return std::max(tile_vectors(t), (t.vector_registers - 1) / (kWideTileRows + 1));
}

// A contraction with no epilogue to be computed in (an output, or read by a
// reduction): the same micro-kernel, into an accumulator tile of its own.
// Below this many steps a chunk's fixed costs (its partials' init and the
// combine pass) outweigh what the split saves, which the cost model does not
// see: 2 threads, Zen 4, split / output tiles: [48, 300] @ [300, 80] (chunks
// of 150) 1.13x slower, [3, 500] @ [500, 128] 1.07x; [30, 1024] @ [1024, 64]
// (512) 1.12x faster, [8, 4096] @ [4096, 128] 1.75x, [16, 16384] @ [16384, 64] 2.1x.
constexpr int64_t kMinChunkSteps = 512;

// Split-K with a register tile (rfactor across cores, interleaved): the
// cores take chunks of the reduction instead of tiles of the output, each
// running every output tile over its chunk in a block of rows x all the
// columns in vectors, and the stage adds the chunks. It pays where the
// output has too few register tiles to share evenly and the reduction is
// long: [33, 4096] @ [4096, 33] (two column tiles of 32, the second for one
// column; 3 row tiles) 0.103 -> 0.050 ms on 2 threads of Zen 4 (TVM
// MetaSchedule, 64 trials: 0.052). Taken where register_tile_cost says the
// busiest core finishes first, a core's chunk costed as a one-core tile
// sweep plus the combine of the chunks. The chunks (a multiple of the cores,
// at most 4 per core) divide the reduction: a guarded last chunk keeps the
// partials in memory; each of at least kMinChunkSteps. The block of rows
// divides the rows (interleave_problem) and is the one the cost model picks. Contractions without
// an epilogue, static, one reduction variable, a pure batch dim too short to share.
bool split_reduction(const Stage& mm, std::pair<size_t, size_t> rc, const Target& t,
                     const TileOperands& ops, double tile_cycles, StageSchedule& ms) {
  if (t.cores < 2 || tile_cycles <= 0 || mm.kind != OpKind::Contraction || mm.rvars.size() != 1 ||
      ops.steps <= 0 || rc.second + 1 != mm.vars.size() || !static_tile(mm, rc))
    return false;
  const OuterIterations outer = outer_iterations(mm, rc);
  if (outer.symbolic || outer.known >= t.cores) return false;
  const int64_t steps = ops.steps;
  int64_t chunks = 0;
  for (int64_t n = t.cores; !chunks && n <= 4 * t.cores; n += t.cores)
    if (steps % n == 0 && steps / n >= kMinChunkSteps) chunks = n;
  if (!chunks) return false;
  // The widest vectors that leave at most one lane past whole ones (a wider
  // masked tail keeps its partials in memory: chunk_tile_lanes).
  const int64_t rows = static_extent(mm.shape[rc.first]), cols = static_extent(mm.shape[rc.second]);
  int lanes = t.vector_lanes(DType::F32);
  while (lanes > 4 && cols % lanes > 1) lanes /= 2;
  if (cols % lanes > 1) return false;
  const int64_t vectors = (cols + lanes - 1) / lanes;
  TileOperands chunk = ops;
  chunk.steps = steps / chunks;
  if (ms.compute.kind != Placement::Kind::Root) return false;
  std::optional<StageSchedule> best;
  double best_cycles = tile_cycles;
  for (int64_t r = 2; r <= std::min<int64_t>(rows, 16); ++r) {
    if (rows % r != 0) continue;
    const double per_chunk =
        register_tile_cost(rows, cols, r, vectors, lanes, 1, TileSharing::Tiles, chunk, t).cycles;
    const double cycles =
        static_cast<double>(outer.known) * (per_chunk * static_cast<double>(chunks / t.cores) +
                                            static_cast<double>(rows * vectors * chunks));
    if (cycles >= best_cycles) continue;
    StageSchedule v = ms;
    directives::clear_plain_loops(v);
    v.specialize = false;
    v.pad_lanes.clear();
    v.loops.tile[mm.vars[rc.first]] = {r};
    if (lanes != t.vector_lanes(DType::F32)) {
      v.loops.vectorize = mm.vars[rc.second];
      v.loops.vector_width = lanes;
    }
    v.rfactor = RFactor{};
    v.rfactor->rvar = mm.rvars[0].name;
    v.rfactor->factor = static_cast<int>(steps / chunks);
    v.rfactor->parallel = true;
    v.rfactor->interleave = true;
    if (!directives::rfactor_problem(mm, *v.rfactor, &t, DType::F32).empty() ||
        !directives::interleave_problem(mm, v, &t).empty())
      continue;
    best = v;
    best_cycles = cycles;
  }
  if (!best) return false;
  ms = *best;
  return true;
}

void contraction_alone(const Program& p, const Stage& mm, const Target& t, Schedule& s) {
  const auto rc = tile_dims(mm);
  StageSchedule& ms = s[mm.name];
  ms.loops = LoopSchedule{};
  if (channels_last_conv(mm) && static_tile(mm, rc) && weights_outer_pays(p, mm, t)) {
    weights_outer(p, mm, nullptr, t, s);
    return;
  }
  const bool pad = padded_columns(p, mm, t);
  const TileOperands ops = tile_operands(p, mm, rc);
  double tile_cycles = -1;
  ms.accumulator_at = channels_last_conv(mm)
                          ? channels_last_tile(mm, t, ms.loops, max_tile_pixels(p, mm))
                          : register_tile(mm, rc, t, ms.loops, ops, pad, &tile_cycles);
  if (!channels_last_conv(mm) && split_reduction(mm, rc, t, ops, tile_cycles, ms)) return;
  ms.specialize = specialized_tile(mm, ms.loops);
  ms.update = micro_kernel(mm, rc, t, static_tile(mm, rc));
  if (ms.specialize) unroll_by_tile(mm, rc, ms.loops, t, *ms.update);
  if (channels_last_conv(mm)) skip_row_padding(p, mm, ms.loops, ms);
  if (pad) {
    // Every operand read along the columns (B) from a clamped copy per column tile.
    ms.pad_lanes = mm.vars[rc.second];
    for (const auto& [tensor, axes] : directives::padded_reads(mm, ms.pad_lanes))
      ms.cache.push_back(
          {tensor, panel_loop(mm, rc, ms.loops), transposed_operand(mm, tensor, rc)});
    return;
  }
  // Pack the panel of the second operand each column tile reads (K x tile
  // columns, reused by every row tile): without it, its rows are a full row
  // stride apart and, at power-of-two sizes, fight over the same cache sets
  // (n = 2048: 123 -> 504 GFLOP/s on the 2-core Zen 5).
  // A panel that is already contiguous (narrow rows, or weights stored
  // blocked by column tile as dsl/models/Bert.h does) is read in place.
  const auto reads = mm.reads();
  if (mm.kind == OpKind::Contraction && reads.size() == 2 && p.tensor(reads[1]).shape.size() >= 2) {
    const bool transposed = transposed_operand(mm, reads[1], rc);
    if (transposed || needs_packing(p, mm, reads[1], rc) ||
        strided_panel(p, mm, reads[1], rc, ms.loops, t))
      ms.cache.push_back({reads[1], panel_loop(mm, rc, ms.loops), transposed});
  }
}

}  // namespace pto::defaults

namespace pto::defaults {

namespace {

// A few output columns per row (A @ W, W transposed per core): a block of
// rows in each reduction step, all its columns, so that each step loads a
// vector of each row of A and of each column of W once for rows x columns
// FMAs into one vector of partials each (rfactor interleave), where a row at
// a time loads two vectors per FMA, W's from the L2 (its transposed copy,
// K x columns, outgrows the L1 at K past a few hundred): [1806, 6056] @
// [6056, 7], 2 threads, SPR VM: a row at a time 2.8 ms, blocks of 3 rows 1.3
// (ONNX Runtime 1.16, oneDNN 1.05). The blocks must be whole (b divides m:
// an update's guarded block would read past A), as must each core's share
// of them (which keeps the copy of W per share): shares of m / n rows, n a
// multiple of the cores (or at least 4 per core, the imbalance then a
// quarter at most), at most 8 per core and of at least 4 rows per column,
// so that each share's copy of W (K x columns) is at most a quarter of the
// rows of A it streams. The most FMAs per step first: rows x
// columns partials plus the rows' loaded vectors in the registers.
bool column_blocks(const Stage& st, const std::string& row, int64_t m, int64_t cols,
                   const Target& t, StageSchedule& ss) {
  if (!ss.rfactor || m <= 0) return false;
  for (int64_t b = std::min<int64_t>(m, t.vector_registers); b >= 2; --b) {
    if (m % b != 0 || b * (cols + 1) >= t.vector_registers) continue;
    const int64_t blocks = m / b;
    int64_t shares = 0;
    for (int64_t n = t.cores; !shares && n <= 8 * t.cores && m / n >= 4 * cols; ++n)
      if (blocks % n == 0 && (n % t.cores == 0 || n >= 4 * t.cores)) shares = n;
    if (!shares) continue;
    StageSchedule together = ss;
    // A share of one block is tiled once (a tile as large as its outer one is no tile).
    together.loops.tile[row] =
        m / shares == b ? std::vector<int64_t>{b} : std::vector<int64_t>{m / shares, b};
    together.rfactor->factor = t.vector_lanes(st.dtype);
    together.rfactor->interleave = true;
    if (directives::rfactor_problem(st, *together.rfactor, &t, st.dtype).empty() &&
        directives::interleave_problem(st, together).empty()) {
      ss = together;
      return true;
    }
  }
  return false;
}

}  // namespace

// Matrix-vector products (A @ x, and [M, K] @ [K, 1]): each output reads one
// contiguous row of A, so the product streams A once from memory and is
// bound by its bandwidth. The row's sum keeps vector lanes of partials
// (row_rfactor: vector FMAs along A's contiguous axis) and the rows run in
// parallel in blocks that each stream about 2^14 elements (64 KiB of f32,
// the size at which parallel_vectorized finds a task worth its wake-up; 4
// rows of K = 4096), so that each core has many blocks and a core that
// finishes first takes the other's last ones (run_tasks in
// backends/ParallelFor.h): with one block per core, a core slowed by the
// other's share of memory bandwidth (or by another process) leaves its
// partner idle at the end. Measured (2-core Sapphire Rapids, quiet suite
// run): Llama's [11008, 4096] @ x took 12.3 ms in two blocks, 10.0 ms in
// 4-row blocks, numpy 9.1. A symbolic row count gets its blocks at run
// time; rows too few for two blocks per core, or too
// short for lanes of partials, are left to the reduction rule (Reduction.cpp),
// which splits them across cores instead.
//
// A few output columns (A @ W with W of fewer columns than a vector: a
// classifier's handful of classes) are the same stream with the columns
// looped inside each row, whose A row then stays in L1 for them; W, read down
// its columns, is packed transposed once per core, so that every column's sum
// reads it contiguously too. [1806, 6056] @ [6056, 7]: lanes of partials over
// a strided W (a gather per vector) 23.5 ms, packed 1.1 (ONNX Runtime 0.96).
bool matrix_vector(const Program& p, const Stage& st, const Target& t, Schedule& s) {
  if (st.kind != OpKind::Contraction || !st.reduce || *st.reduce != ReduceOp::Sum ||
      !is_float(st.dtype) || st.vars.empty() || st.rvars.empty() || t.cores < 2 || t.has_device())
    return false;
  if (const StageSchedule* ss = s.find(st.name);
      ss && (!(*ss == StageSchedule{}) || hosts_placements(s, st.name)))
    return false;
  // The rows: the outermost kept dim of more than one iteration; the kept dims
  // inside it (the columns) must be static and fewer than a vector in all.
  const int lanes = t.vector_lanes(st.dtype);
  size_t row = st.vars.size();
  int64_t cols = 1;
  for (size_t k = 0; k < st.vars.size(); ++k) {
    if (static_extent(st.shape[k]) == 1) continue;
    if (row == st.vars.size()) {
      row = k;
      continue;
    }
    const int64_t e = static_extent(st.shape[k]);
    if (e < 0) return false;
    cols *= e;
  }
  if (row == st.vars.size() || 2 * cols > lanes) return false;  // more: padded_columns
  // Every operand that changes with the row (A) is read along the last
  // reduction var, so that each output streams one contiguous row of it; the
  // others (x, or W) are the same for every row. x[1, K] @ W[K, N] reads W
  // down its columns instead, and stays a register-tiled contraction (a
  // symbolic vecmat taking this rule ran 3.1 ms against 0.2).
  struct Operands : IRVisitor {
    const Program& p;
    const std::string &row, &k;
    int streams = 0, strided = 0;
    std::set<std::string> transpose;  // per-column operands read down their columns
    Operands(const Program& pp, const std::string& r, const std::string& kk)
        : p(pp), row(r), k(kk) {}
    void visit_access(const AccessNode& n) override {
      IRVisitor::visit_access(n);
      const auto is = [](const Expr& a, const std::string& name) {
        const auto* v = a.as<VarNode>();
        return v && v->name == name;
      };
      // The innermost index along a dim of more than one element.
      const Shape& sh = p.tensor(n.tensor).shape;
      size_t inner = n.args.size();
      while (inner > 0 && sh.size() == n.args.size() && static_extent(sh[inner - 1]) == 1) --inner;
      if (inner == 0) return;
      const bool per_row =
          std::any_of(n.args.begin(), n.args.end(), [&](const Expr& a) { return is(a, row); });
      const bool along_k = is(n.args[inner - 1], k);
      if (per_row) {
        (along_k ? streams : strided) += 1;
      } else if (!along_k && inner >= 2 && is(n.args[inner - 2], k)) {
        transpose.insert(n.tensor);
      } else if (!along_k) {
        strided += 1;  // read some other way: not this rule's stream
      }
    }
  } ops_of(p, st.vars[row], st.rvars.back().name);
  ops_of.visit(st.value);
  if (!ops_of.streams || ops_of.strided) return false;
  const auto rf = row_rfactor(st, t);
  if (!rf) return false;
  const int64_t m = static_extent(st.shape[row]);
  StageSchedule& ss = s[st.name];
  const std::string& v = st.vars[row];
  if (!ops_of.transpose.empty()) {
    // One share of rows per core, each with its transposed copy.
    if (m < 2 * t.cores) {
      s.stages.erase(st.name);
      return false;
    }
    ss.loops.tile[v] = {(m + t.cores - 1) / t.cores};
    ss.loops.parallel = {outer_loop(v)};
    for (const std::string& w : ops_of.transpose) ss.cache.push_back({w, outer_loop(v), true});
    ss.rfactor = rf;
    column_blocks(st, v, m, cols, t, ss);
    return true;
  }
  // Rows per block: about kMinParallelElements of A; a symbolic K counts as
  // 4096 (long rows are the case that matters: decode steps).
  constexpr int64_t kSymbolicRowLength = 4096;
  int64_t length = 1;
  for (const RVar& r : st.rvars) {
    const int64_t e = static_extent(r.extent);
    length *= e < 0 ? kSymbolicRowLength : e;
    if (length >= kMinParallelElements) break;
  }
  const int64_t rows =
      std::max<int64_t>(1, (kMinParallelElements + length * cols - 1) / (length * cols));
  if (m >= 0 && (m + rows - 1) / rows < 2 * t.cores) {
    s.stages.erase(st.name);
    return false;
  }
  if (m < 0) {
    // A symbolic row count: the whole dim in parallel, in blocks sized at run
    // time (Loops.cpp's run_time_block: up to 4 per core, of 2^16 elements of
    // A each). Fixed blocks sized for a symbolic K of 4096 made 750 tasks of
    // a [3000, 700] @ x, 2.1x the static kernel.
    ss.loops.parallel = {v};
  } else if (rows > 1) {
    // The block's rows stream together (rfactor interleave: several streams
    // of A in flight, x loaded once per step for all; [11008, 4096] @ x 7.9
    // -> 4.9 ms, numpy 4.6, Zen 4 VM), rows x vectors partials in half the
    // registers, the rest for A's loads and x. Interleaving needs whole
    // blocks: the nearest row count that divides m, within a factor of 2 of
    // the rows wanted and no more than half the registers hold one vector
    // of partials for ([3000, 700] @ x wants 24 rows: 15 together 0.070 ms,
    // 24 one at a time 0.108, numpy 0.056, Zen 4 VM). Rows so short that a
    // block in the registers would be a small task stream one at a time.
    const int64_t fit = t.vector_registers / 2;
    int64_t block = 0;
    for (int64_t d = 0; !block && d <= rows; ++d)
      for (const int64_t b : {rows - d, rows + d})
        if (!block && 2 * b >= rows && b <= std::min(2 * rows, fit) && b >= 2 && m % b == 0)
          block = b;
    if (block) {
      int64_t vectors = rf->factor / lanes;
      while (vectors > 1 && block * vectors > t.vector_registers / 2) vectors /= 2;
      StageSchedule together = ss;
      together.loops.tile[v] = {block};
      together.loops.parallel = {outer_loop(v)};
      together.rfactor = *rf;
      together.rfactor->factor = static_cast<int>(vectors * lanes);
      together.rfactor->interleave = true;
      if (block * vectors <= t.vector_registers / 2 &&
          directives::rfactor_problem(st, *together.rfactor, &t, st.dtype).empty() &&
          directives::interleave_problem(st, together).empty()) {
        ss = together;
        return true;
      }
    }
    ss.loops.tile[v] = {rows};  // one row at a time
    ss.loops.parallel = {outer_loop(v)};
  } else {
    ss.loops.parallel = {v};
  }
  ss.rfactor = rf;
  return true;
}

// x[1, K] @ W[K, N]: one output row, so every element of W feeds one FMA and
// the stage streams W once. The one-row register tile reads W in pieces of up
// to 24 vectors, a row stride apart, each a fresh cache miss that the
// prefetchers do not follow across pages; from past half the L2 that is the
// cost. The reduction rule (Reduction.cpp's along_kept) instead splits W's rows
// across cores, each streaming one contiguous block into a row of partials in
// L1, 4 rows per load and store of a vector of partials, and combines the
// cores' rows. 2 threads, SPR VM, ms, tile / split (numpy): [300, 2000]
// (2.3 MiB) 0.018 / 0.019 (0.019); [128, 4096] (2 MiB) 0.040 / 0.017
// (0.015); [768, 3072] 0.21 / 0.13 (0.15); [1000, 5000] 0.49 / 0.33 (0.29);
// [6732, 735] 0.39 / 0.34 (0.51); [32, 2048] (256 KiB) 0.0032 / 0.0045
// (0.0039). Columns that are not whole vectors end in a masked store of
// partials, which the next load cannot take from the store buffer; at one
// load and store per 4 rows that stall is rare.
bool one_row_stream(const Program& p, const Stage& st, const Target& t) {
  if (st.kind != OpKind::Contraction || !st.reduce || *st.reduce != ReduceOp::Sum ||
      !is_float(st.dtype) || st.vars.empty() || t.cores < 2 || t.has_device())
    return false;
  if (st.vars.size() < 2) return false;
  for (size_t k = 0; k + 1 < st.vars.size(); ++k)
    if (static_extent(st.shape[k]) != 1) return false;
  // Symbolic sizes count as large: a kernel compiled once for every size is
  // the one that long rows run through.
  const int64_t cols = static_extent(st.shape.back());
  const int lanes = t.vector_lanes(st.dtype);
  if ((cols >= 0 && cols < lanes) || lanes < 2 || stream_var(p, st) != st.vars.back()) return false;
  const int64_t w = streamed_bytes(p, st, {st.vars.size() - 2, st.vars.size() - 1});
  return w < 0 || w >= t.l2_bytes / 2;
}

}  // namespace pto::defaults
