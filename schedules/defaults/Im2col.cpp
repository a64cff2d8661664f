// Default schedules of a dense channels-first convolution defined as an
// im2col copy feeding a GEMM (dsl/ops/Convolution.cpp, im2col_conv). The
// contraction rule (Contraction.cpp) has register-tiled the GEMM acc[n, o, p]
// (output channels x flattened pixels) by then; this rule places the copy and
// orders the tiles from the GEMM's cache footprint, K x P (K = input channels
// x taps, P = output pixels), against the L2:
//   - a panel larger than half the L2 (ResNet's strided 3x3: 1152 x 784, 3.6
//     MB; DeepLab's dilated 3x3: 2304 x 1089, 10 MB) is packed per column
//     tile (the GEMM's `cache` of the K x tile-columns panel, which every row
//     tile then reads); from a whole copy where its vectors can run along
//     output rows (ResNet's rows of 28: 4 lanes), else from the inline copy
//     (DeepLab's rows of 33: vectors across rows would be gathers);
//   - a panel within half the L2 (wav2vec's conv1d: K = 10, 128 KB) is made
//     once (its vectors along output rows, the last shifted inwards, where
//     they hold 4+ lanes), and the row tiles sweep the pixels innermost, so
//     the output (the cost of a GEMM with K that small) is written in long
//     runs.
// A 1x1 stride-1 unpadded convolution's copy is its input reshaped: not made
// at all (reshape_of_input). A copy made once takes the widest column tile of
// whole vectors that the register file holds, since every column tile streams
// the whole weight matrix once; copies per column tile, whose tiles are the
// parallel loop, take the register tile whose busiest core finishes first by
// the contraction rule's cost (balance_columns).
#include <algorithm>
#include <numeric>

#include "schedules/LoopNest.h"
#include "schedules/defaults/Rules.h"

namespace pto::defaults {

namespace {

// The GEMM stage that reads im2col copy `col`, when the contraction rule
// register-tiled it: into an accumulator tile of its own (`alone`), or inside
// its epilogue's tile (a 1-D convolution's bias).
struct Gemm {
  const Stage* stage = nullptr;
  StageSchedule* ss = nullptr;
  LoopSchedule* tile = nullptr;  // the loops that hold the register tile
  bool alone = false;
};

Gemm gemm_of(const Program& p, const Stage& col, Schedule& s) {
  const auto cons = p.consumers(col.name);
  if (cons.size() != 1) return {};
  const Stage& g = p.stage(cons[0]);
  if (g.kind != OpKind::Contraction || !g.reduce || g.vars.size() != 3 || !s.find(g.name))
    return {};
  StageSchedule& gs = s[g.name];
  if (gs.compute.kind == Placement::Kind::Root && !gs.accumulator_at.empty())
    return {&g, &gs, &gs.loops, true};
  if (gs.compute.kind == Placement::Kind::At && s.find(gs.compute.stage) &&
      p.find_stage(gs.compute.stage)) {
    const Stage& e = p.stage(gs.compute.stage);
    if (e.vars == g.vars) return {&g, &gs, &s[e.name].loops, false};
  }
  return {};
}

int64_t panel_bytes(const Stage& col) {
  int64_t n = bytes(col.dtype);
  // Per image: the batch (dim 0) may be symbolic.
  for (size_t k = 1; k < col.shape.size(); ++k) {
    const int64_t e = static_extent(col.shape[k]);
    if (e < 0) return -1;
    n *= e;
  }
  return n;
}

// Column tile: the widest whole-vector tile the register file holds next to
// the tile's rows (6 rows: 4 vectors, 8 rows: 3), where the pixels are that
// wide. The contraction rule picks the whole-vector width that computes the
// fewest columns, which at ResNet's 784 pixels is 1 vector (49 x 16, against
// 13 x 64 with a shifted last tile): a 6 x 1 tile has 6 accumulators for the
// FMA pipes' 8 in flight, and each of its 49 column tiles streams the 590 KB
// of weights. 2 threads, 128 -> 128 channels 56x56 stride 2, copy per column
// tile: 6 x 16 9.3 ms, 6 x 32 2.6, 6 x 48 2.0-11, 6 x 64 2.4-8.7 (min-median,
// loaded machine; ONNX Runtime 1.4-17.6 in the same rounds).
void widen_columns(const Stage& g, const Target& t, LoopSchedule& tile, StageSchedule& gs) {
  const auto rc = tile_dims(g);
  const std::string row = g.vars[rc.first], colv = g.vars[rc.second];
  const auto rt = tile.tile.find(row), ct = tile.tile.find(colv);
  if (rt == tile.tile.end() || ct == tile.tile.end() || rt->second.size() != 1 ||
      ct->second.size() != 1)
    return;
  const int64_t lanes = t.vector_lanes(DType::F32), tr = rt->second[0], tc = ct->second[0];
  const int64_t pixels = static_extent(g.shape[rc.second]);
  const int64_t v = std::clamp<int64_t>((t.vector_registers - 1) / (tr + 1), 1, 4);
  if (pixels < 0 || tc % lanes || tc >= v * lanes || pixels < v * lanes) return;
  ct->second[0] = v * lanes;
  // A micro-kernel unrolled by tile (not fully) follows the new width.
  if (gs.update)
    if (auto u = gs.update->unroll.find(colv); u != gs.update->unroll.end() && u->second > 0)
      u->second = static_cast<int>(v);
}

// Register tile of a GEMM whose column tiles are the parallel loop (the copy
// made per column tile): the one whose busiest core finishes first by the
// contraction rule's cost (register_tile_cost: each core takes whole column
// tiles, a narrower last tile shifts inwards, every step bound by the FMA
// pipes, the load ports and the FMA latency), over heights of 6 and 8 rows
// and those balanced over their count of row tiles (25 output channels: 5
// tiles of 5, not 5 of 6 that compute 30), at every width the registers
// hold. The cost ranks the tiles measured on ResNet-50's strided 3x3 (128
// rows, 784 pixels; loaded 2-core Sapphire Rapids, 500 alternating calls):
// 8 x 32 4.39 ms, 6 x 64 4.18, 8 x 48 4.06 (6 x 16 had been 3.6x slower than
// 6 x 32: widen_columns); DeepLab's dilated 3x3 (256 rows, 1089 pixels)
// keeps 8 x 48. 2 threads, SPR VM, against the 6-row tile: 331 -> 25 1x1 at
// 91x91 (5 x 80) 0.69 -> 0.62 ms, 231 -> 13 5x5 at 8x8 (7 x 48) 0.24 ->
// 0.19, 356 -> 27 1x1 at 129x129 (7 x 48) 1.48 -> 1.44.
bool balance_columns(const Program& p, const Stage& g, const Target& t, Gemm& gm) {
  const auto rc = tile_dims(g);
  const std::string row = g.vars[rc.first], colv = g.vars[rc.second];
  LoopSchedule& tile = *gm.tile;
  if (tile.parallel != std::vector<std::string>{outer_loop(colv)}) return false;
  const auto rt = tile.tile.find(row), ct = tile.tile.find(colv);
  if (rt == tile.tile.end() || ct == tile.tile.end() || rt->second.size() != 1 ||
      ct->second.size() != 1)
    return false;
  const int64_t rows = static_extent(g.shape[rc.first]), pixels = static_extent(g.shape[rc.second]);
  const int64_t lanes = t.vector_lanes(DType::F32), regs = t.vector_registers;
  const int64_t cores = std::max(t.cores, 1);
  if (rows < 0 || pixels < 0 || lanes < 1) return false;
  const auto tiles = [](int64_t n, int64_t tile) { return (n + tile - 1) / tile; };
  // Heights: the contraction rule's, 6 and 8 (its 12-row tiles, for
  // outputs too narrow for wider ones, were not measured here), each also
  // balanced over its count of row tiles; every width the registers hold
  // next to them.
  std::vector<int64_t> heights;
  for (const int64_t r0 : {rt->second[0], int64_t{6}, int64_t{8}}) {
    if (r0 < 1 || r0 > 8) continue;
    heights.push_back(std::min(r0, rows));
    heights.push_back(tiles(rows, tiles(rows, r0)));
  }
  const TileOperands ops = tile_operands(p, g, rc);
  int64_t best_r = 0, best_v = 0;
  double best = -1;
  for (const int64_t r : heights)
    for (int64_t v = 1; v <= std::min<int64_t>((regs - 1) / (r + 1), pixels / lanes); ++v) {
      const double c =
          register_tile_cost(rows, pixels, r, v, lanes, cores, TileSharing::Tiles, ops, t).cycles;
      if (best < 0 || c < best || (c == best && r * v > best_r * best_v))
        best = c, best_r = r, best_v = v;
    }
  if (best < 0) return false;
  rt->second[0] = best_r;
  ct->second[0] = best_v * lanes;
  // A micro-kernel unrolled by tile (not fully) follows the new tile.
  if (gm.ss->update) {
    auto& un = gm.ss->update->unroll;
    if (auto u = un.find(row); u != un.end() && u->second > 0) u->second = static_cast<int>(best_r);
    if (auto u = un.find(colv); u != un.end() && u->second > 0)
      u->second = static_cast<int>(best_v);
  }
  return true;
}

// Row tiles outside the column tiles, the pixels innermost: the row block's
// output is written in runs along the pixels, and every row block reads the
// whole copy, which the L2 holds. wav2vec's conv1d (1 x 16000, 512 channels,
// kernel 10 stride 5; its 6.5 MB output is the cost), 2 threads: 8 x 48 tiles
// column-outer 7.0 ms, row-outer 0.59 ms (ONNX Runtime 0.94 ms, same rounds).
// Needs a row block per core at least.
bool rows_outer(const Stage& g, const Target& t, Gemm& gm) {
  const auto rc = tile_dims(g);
  const std::string row = g.vars[rc.first], colv = g.vars[rc.second];
  LoopSchedule& ls = *gm.tile;
  const auto rt = ls.tile.find(row);
  const int64_t rows = static_extent(g.shape[rc.first]);
  if (rt == ls.tile.end() || rows < 0 ||
      (rows + rt->second.back() - 1) / rt->second.back() < t.cores)
    return false;
  const std::string ro = outer_loop(row), co = outer_loop(colv);
  auto ro_it = std::find(ls.order.begin(), ls.order.end(), ro),
       co_it = std::find(ls.order.begin(), ls.order.end(), co);
  if (ro_it == ls.order.end() || co_it == ls.order.end() || co_it > ro_it) return false;
  std::iter_swap(ro_it, co_it);
  for (std::string& l : ls.parallel)
    if (l == co) l = ro;
  (gm.alone ? gm.ss->accumulator_at : gm.ss->compute.loop) = co;
  return true;
}

// The output's row width (its innermost spatial extent) of a GEMM over
// flattened pixels that a reshape back to [n, o, spatial...] reads; 0 when
// there is none (1-D: the pixels are the output's own dim) or it is symbolic.
int64_t output_row(const Program& p, const Stage& g) {
  const int64_t pixels = static_extent(g.shape.back());
  for (const std::string& c : p.consumers(g.name)) {
    const Stage& o = p.stage(c);
    if (o.shape.size() < 4) continue;
    int64_t n = 1;
    for (size_t k = 2; k < o.shape.size(); ++k)
      n *= std::max<int64_t>(static_extent(o.shape[k]), 0);
    if (n == pixels && n > 0) return static_extent(o.shape.back());
  }
  return 0;
}

// A copy made whole without gathers: the flattened pixel p reads the input at
// p % (row width) along its contiguous axis, so vectors of p that cross an
// output row are gathers. Split p at the row width and vectorize within the
// row at the lanes that divide it (gcd(row, lanes)): each vector then reads
// consecutive output columns, a strided load. Worth it from 4 lanes (an SSE
// vector): ResNet-50's strided 3x3 (rows of 28: 4 lanes, the row unrolled;
// loaded 2-core Sapphire Rapids, 400 alternating calls) ran 2.53 ms median
// against 3.74 for the inline copy per column tile of 16-lane gathers (the
// GEMM packs each column tile's part of it, contiguous now: without that
// pack, 2.31 against 2.19), while a scalar copy (rows of 33, DeepLab's
// dilated 3x3: gcd 1) lost to the gathers (2.69 against 2.64 ms).
bool gather_free_copy(const Program& p, const Stage& col, const Stage& g, const Target& t,
                      bool shifted, StageSchedule& cs) {
  const int64_t row = output_row(p, g), lanes = t.vector_lanes(col.dtype);
  // `shifted`: whole vectors along a row as wide as one, the last shifted
  // inwards (rows of 54: 0-15, 16-31, 32-47, 38-53); else the lanes that
  // divide the row.
  int64_t w = shifted && row >= lanes ? lanes : row > 0 ? std::gcd(row, lanes) : 0;
  // A row narrower than a vector takes the widest power of two it holds,
  // its last vector shifted too (rows of 14: 0-7, 6-13): a 3x3 stride-2
  // convolution in 17 groups of 6 -> 46 channels from 27x27 0.245 -> 0.182
  // ms, 271 -> 117 3x3 at 7x7 0.21 -> 0.16, 7x7 stride 2 in 2 groups of 97
  // from 9x9 0.40 -> 0.32 (the copy in gathers across rows before).
  if (shifted && row > 0 && row < lanes)
    while (w * 2 <= row) w *= 2;
  if (w < 4 || col.vars.size() < 3) return false;
  // The whole copy (every image) is written and then read back once per
  // column tile: it must stay within half the last-level cache, which a
  // symbolic batch cannot promise (the inline copy per column tile needs one
  // tile's panel whatever the batch).
  const int64_t images = static_extent(col.shape[0]), panel = panel_bytes(col);
  if (images < 0 || panel < 0 || 2 * images * panel > t.l3_bytes) return false;
  cs = StageSchedule{};
  cs.loops = parallel_vectorized(col, t);
  const std::string& pv = col.vars.back();
  if (cs.loops.tile.count(pv)) return false;
  cs.loops.tile[pv] = {row};
  cs.loops.vectorize = inner_loop(pv);
  cs.loops.vector_width = static_cast<int>(w);
  // The row's vectors unrolled (rows of 28: 7 vectors, 8% faster than a loop
  // of them), up to 16 of them.
  // (A row that is not whole vectors unrolls fully, up to the 64 iterations
  // a full unroll allows.)
  if (const int64_t vectors = (row + w - 1) / w; vectors > 1 && vectors <= 16 && (row % w == 0 || row <= 64))
    cs.loops.unroll[inner_loop(pv)] = row % w ? 0 : static_cast<int>(vectors);
  return true;
}

// Is the copy its input reshaped (one tap, as many pixels as the input has):
// col[n, c, 1..., p] = x[n, c, p / w, p % w]?
bool reshape_of_input(const Program& p, const Stage& col) {
  const auto reads = col.reads();
  if (reads.size() != 1) return false;
  const TensorInfo& x = p.tensor(reads[0]);
  if (!x.is_input) return false;
  for (size_t k = 2; k + 1 < col.shape.size(); ++k)
    if (static_extent(col.shape[k]) != 1) return false;
  int64_t pixels = 1;
  for (size_t k = 2; k < x.shape.size(); ++k) {
    const int64_t e = static_extent(x.shape[k]);
    if (e < 1) return false;
    pixels *= e;
  }
  return pixels == static_extent(col.shape.back());
}

}  // namespace

void im2col(const Program& p, const Stage& col, const Target& t, Schedule& s) {
  // Materialized by default: inline, it would be re-evaluated, guard and all,
  // in the GEMM's innermost loop.
  StageSchedule& cs = s[col.name];
  cs = StageSchedule{};
  cs.loops = parallel_vectorized(col, t);
  Gemm gm = gemm_of(p, col, s);
  if (!gm.stage || !is_float(gm.stage->dtype)) return;
  // A 1x1 stride-1 unpadded convolution's copy is its input reshaped, which
  // the lowering makes dense (Lower.cpp: its flattened index folds): the
  // GEMM reads the input in place: 256 -> 512 channels at 14x14 0.178 ->
  // 0.157 ms (0.236 with the copy in gathers; oneDNN 0.171), 53 -> 241 at
  // 12x12 0.023 -> 0.017, 15 -> 68 at 77x77 0.126 -> 0.097.
  const bool reshaped = reshape_of_input(p, col);
  if (reshaped) {
    cs = StageSchedule{};
    cs.compute.kind = Placement::Kind::Inline;
  }
  const auto reads_col = [&](const CacheRead& c) { return c.tensor == col.name; };
  const int64_t panel = panel_bytes(col);
  if (panel >= 0 && 2 * panel <= t.l2_bytes) {
    // Along output rows where they hold 4+ lanes, not gathered across them
    // (1x1 stride 2, 64 -> 128 from 56x56: 0.090 -> 0.074 ms; 64 -> 256 at
    // 56x56 0.52 -> 0.46; 4 groups of 41 from 8 at 39x39 stride 2 0.024 ->
    // 0.021; ONNX Runtime 0.078, 0.50, 0.013).
    // Rows of whole vectors and a shifted one: a strided 1x1 convolution, 48
    // -> 36 channels from 107x107 (rows of 54), 0.145 -> 0.100 ms (its copy
    // 0.063 -> 0.012; ONNX Runtime 0.100).
    if (StageSchedule whole; !reshaped && gather_free_copy(p, col, *gm.stage, t, true, whole))
      cs = whole;
    widen_columns(*gm.stage, t, *gm.tile, *gm.ss);
    if (rows_outer(*gm.stage, t, gm)) std::erase_if(gm.ss->cache, reads_col);
    return;
  }
  if (!gm.alone || !balance_columns(p, *gm.stage, t, gm))
    widen_columns(*gm.stage, t, *gm.tile, *gm.ss);
  if (!gm.alone) return;
  // The GEMM packs each column tile's panel. Its source: the whole copy where
  // that is made without gathers (gather_free_copy), else the inline im2col
  // expression, one pass instead of a copy of the whole panel in gathers and
  // then of each tile's part of it. DeepLab's dilated 3x3 (2 threads, 256 ->
  // 256 at 33x33): copy at root 16% and its tile copies 10% of the time; 36.3
  // -> 29.9 ms (min of 5 rounds; ONNX Runtime 32.0).
  const std::string at = outer_loop(gm.stage->vars[tile_dims(*gm.stage).second]);
  if (std::find(gm.tile->order.begin(), gm.tile->order.end(), at) == gm.tile->order.end()) return;
  std::erase_if(gm.ss->cache, reads_col);
  gm.ss->cache.push_back({col.name, at, false});
  // (Rows of whole vectors only: a whole copy of a panel this large in
  // shifted vectors, then packed per tile, lost to the inline copy packed
  // once, 5x5 stride 2 114 -> 65 channels at 121x121 (rows of 61, a 42 MB
  // panel) 9.4 -> 16.3 ms.)
  if (!reshaped && gather_free_copy(p, col, *gm.stage, t, false, cs)) return;
  cs = StageSchedule{};
  cs.compute.kind = Placement::Kind::Inline;
}

}  // namespace pto::defaults
