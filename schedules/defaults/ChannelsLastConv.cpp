// Default schedules of channels-last convolutions (conv2d_nhwc): an implicit
// GEMM with output pixels as rows and output channels as vector columns, the
// padded input materialized once, and, where the weights outweigh the input
// and a core's L2, channel tiles outermost with a blocked reduction.
#include <algorithm>
#include <optional>
#include <set>

#include "dsl/IRVisitor.h"
#include "dsl/ZeroPadding.h"
#include "schedules/LoopNest.h"
#include "schedules/defaults/Rules.h"

namespace pto::defaults {

// A 2-D convolution whose variables are [batch, out_row, out_col,
// out_channel] by role (conv2d_nhwc, or conv2d with layout NHWC). The rules
// below may then read its dims, and those of its same-shape epilogue stages
// (whatever their variables' names), by position.
bool channels_last_conv(const Stage& st) {
  if (st.kind != OpKind::Convolution || !st.conv_roles) return false;
  const ConvRoles& r = *st.conv_roles;
  return st.vars == std::vector<std::string>{r.batch, r.out_row, r.out_col, r.out_channel};
}

namespace {
const ConvRoles& roles(const Stage& conv) {
  if (!conv.conv_roles)
    throw ScheduleError("channels-last conv defaults: stage '" + conv.name + "' has no convolution roles");
  return *conv.conv_roles;
}
}  // namespace

// The block of a parallel loop over `extent` iterations (in units of
// `unit`) that gives each of the target's cores one contiguous block, or 0
// where that does not apply (one core, a symbolic or too short extent).
// Halide hands out parallel iterations dynamically, so single iterations
// interleave across cores; whole blocks keep neighbouring iterations, which
// share input (rows) or weight cache lines (channel tiles), on one core.
int64_t parallel_chunk(int64_t extent, int64_t unit, const Target& t) {
  if (t.cores < 2 || extent <= 0 || unit <= 0 || extent % unit) return 0;
  const int64_t units = extent / unit;
  if (units < t.cores) return 0;
  return (units + t.cores - 1) / t.cores * unit;
}

// The register tile of a channels-last convolution's epilogue `e` (or of the
// convolution itself): x_i rows by o_i columns of accumulators. The tile is
// chosen by a throughput model of one reduction step: tr * v FMAs (2 per cycle)
// against tr broadcasts + v weight vectors (2 loads per cycle), times the tiles
// needed to cover the (x, o) plane with whole tiles, so that 7-wide maps get 7
// rows (ResNet's widths are all multiples of 7) instead of 6 rows plus a
// shifted, mostly recomputed second tile; ties go to more accumulators. A
// step takes at least kMinStepCycles: the FMA latency (4 cycles) would let 8
// accumulators keep both pipes busy, but tiles of fewer than 12 did not
// (the matmul tiles of Contraction.cpp: 6 x 2 1.17x and 12 x 1 1.32x the
// time per FMA of 8 x 3); with a 4-cycle floor, 149 -> 64 channels 5x5 at
// 61x61 took 2 x 4 vectors (31 tiles of 8 accumulators, wasting the fewest
// pixels): 7.1 ms, 13 x 2 5.0 (oneDNN 4.5).
// Accumulators, weight vectors and one broadcast must fit the register file
// (7 x 4 vectors would leave none for the broadcast: LLVM then shuffles and
// spills accumulators every step, measured 10% slower than 14 x 2).
//
// Output rows go outermost and in parallel (56x56 maps, 64-256 channels: the
// weights are small and stay cache-resident, each thread reads its few input
// rows). Layers whose weights outweigh their input and a core's L2 take `weights_outer`.
std::string channels_last_tile(const Stage& e, const Target& t, LoopSchedule& ls, int64_t max_pixels) {
  constexpr double kMinStepCycles = 6;
  const int lanes = t.vector_lanes(DType::F32);
  const int regs = t.vector_registers;
  const int64_t rows = static_extent(e.shape[2]), cols = static_extent(e.shape[3]);
  int64_t tr = 6, tc = 4 * lanes;
  if (rows > 0 && cols > 0) {
    double best = -1;
    for (int64_t v = 1; v * lanes <= cols && v <= 4; ++v) {
      const int64_t max_r = std::min<int64_t>({(regs - 1 - v) / v, rows, max_pixels});
      for (int64_t r = 1; r <= max_r; ++r) {
        const double step = std::max({r * v / 2.0, (r + v) / 2.0, kMinStepCycles});
        const double tiles = double((rows + r - 1) / r) * double((cols + v * lanes - 1) / (v * lanes));
        const double cost = tiles * step;
        // Ties: fewer weight vectors (7 x 2 over 4 x 4 at 28 pixels: 4 x 4
        // measured 0.70x of 14 x 2 on layer 3), then more accumulators, then
        // fewer loads per FMA.
        const int64_t bv = tc / lanes;
        const bool better_tie =
            v < bv || (v == bv && (r * v > tr * bv || (r * v == tr * bv && r + v < tr + bv)));
        if (best < 0 || cost < best - 1e-9 || (cost < best + 1e-9 && better_tie)) best = cost, tr = r, tc = v * lanes;
      }
    }
  }
  const std::string y = e.vars[1], x = e.vars[2], o = e.vars[3];
  ls.tile[x] = {tr};
  ls.tile[o] = {tc};
  ls.order = {e.vars[0], y, outer_loop(o), outer_loop(x), inner_loop(x), inner_loop(o)};
  ls.parallel = {y};
  // One contiguous block of rows per core rather than rows handed out one
  // by one: a core's consecutive rows share their input rows (the 3x3
  // halo) in its own L2, where interleaved rows have both cores fetch
  // every input row (layer 2, 2 threads: 0.84x -> 0.96x of oneDNN).
  const int64_t oh = static_extent(e.shape[1]);
  if (const int64_t chunk = parallel_chunk(oh, 1, t); chunk > 0) {
    ls.tile[y] = {chunk};
    ls.order = {e.vars[0], outer_loop(y), inner_loop(y), outer_loop(o), outer_loop(x), inner_loop(x), inner_loop(o)};
    ls.parallel = {outer_loop(y)};
  }
  ls.vectorize = inner_loop(o);
  ls.vector_width = lanes;
  // The tile's own loops fully unrolled: every access to the accumulator
  // buffer then has a constant index and LLVM keeps the tile in registers
  // from the last FMA through the bias + ReLU to the store, instead of
  // storing the 28 accumulators to the stack and reloading them (layer 3,
  // 64 reduction steps per tile: 0.86-0.91x -> 0.97-0.995x of oneDNN).
  ls.unroll[inner_loop(x)] = 0;
  ls.unroll[inner_loop(o)] = 0;
  return outer_loop(x);
}

// The row-parallel tile's reduction skips the zero padding (skip_padding)
// where no guard is left in it: its accumulator tile is one output row, so
// Halide trims ky per row; with a few pixel tiles per row (<= 4), those tiles
// and kx unrolled, each copy knows which kx reach the padding. Layer 10
// (28x28, 3x3), 2 threads: 0.44 -> 0.425 ms; layers 2 and 6: 1-2%.
void skip_row_padding(const Program& p, const Stage& conv, LoopSchedule& tile_loops, StageSchedule& cs) {
  const auto pr = padded_read(p, conv);
  if (!pr || pr->stage->vars.size() != 4 || !cs.update) return;
  auto padded = [&](const std::string& d) { return std::find(pr->dims.begin(), pr->dims.end(), d) != pr->dims.end(); };
  const std::string h = pr->stage->vars[1], w = pr->stage->vars[2];
  if (padded(h)) cs.skip_padding.push_back(h);
  // The pixel-tile loop: x_o of the tile's stage (channels_last_tile's order ends x_o, x_i, o_i).
  const auto& order = tile_loops.order;
  if (order.size() < 3 || order[order.size() - 3].size() < 3) return;
  const std::string x = order[order.size() - 3];
  const auto tile = tile_loops.tile.find(x.substr(0, x.size() - 2));
  const int64_t ow = static_extent(conv.shape[2]);
  if (padded(w) && tile != tile_loops.tile.end() && ow > 0 && (ow + tile->second[0] - 1) / tile->second[0] <= 4) {
    tile_loops.unroll[x] = 0;
    cs.update->unroll[roles(conv).kernel_col] = 0;
    cs.skip_padding.push_back(w);
  }
}

// The most output pixels a register tile should span. Each reduction step
// broadcasts one input element per pixel, from input pixels s * C elements
// apart; when that distance is a multiple of 2 KB, the tile's input lines
// fall into at most 2 of the L1's sets (sets repeat every 4 KB: 64 sets of
// 64 B, on this Zen 5 as on Intel cores), and 14 of them, plus the weight
// and accumulator lines, overflow the 12-way sets and evict each other
// between the 16 steps that reuse a line. 7 pixels then beat 14 (2 threads,
// 7 x 2 vectors vs 14 x 2: layer 15, C = 1024, 0.211 -> 0.204 ms; 17: 0.415
// -> 0.395; 14, C = 512 at stride 2: 0.414 -> 0.401; 18: 0.462 -> 0.422;
// 20: 0.421 -> 0.399; 21: 0.208 -> 0.201; 22: 0.388 -> 0.373; 28x28 layers
// with C = 512 unchanged). 14 otherwise.
int64_t max_tile_pixels(const Program& p, const Stage& conv) {
  const auto reads = conv.reads();
  if (reads.empty() || conv.shape.size() != 4) return 14;
  const Shape& in = p.tensor(reads[0]).shape;
  int64_t C = 0, kw = 1;
  for (const RVar& r : conv.rvars) {
    if (r.name == roles(conv).in_channel) C = static_extent(r.extent);
    if (r.name == roles(conv).kernel_col) kw = static_extent(r.extent);
  }
  const int64_t w_in = in.size() == 4 ? static_extent(in[2]) : -1, ow = static_extent(conv.shape[2]);
  if (C <= 0 || w_in <= 0 || ow <= 1 || kw <= 0) return 14;
  const int64_t stride = (w_in - kw) / (ow - 1);  // input pixels per output pixel along a row
  const int64_t step_bytes = stride * C * bytes(conv.dtype);
  return step_bytes > 0 && step_bytes % 2048 == 0 ? 7 : 14;
}

// Does a convolution read more weight elements than input elements (its
// second operand vs its first)?
bool weights_outweigh_input(const Program& p, const Stage& conv) {
  const auto reads = conv.reads();
  if (reads.size() != 2) return false;
  auto elems = [&](const std::string& n) {
    int64_t r = 1;
    for (const Dim& d : p.tensor(n).shape) r *= std::max<int64_t>(static_extent(d), 1);
    return r;
  };
  return elems(reads[1]) > elems(reads[0]);
}

// Does a channels-last convolution take `weights_outer` (channel tiles
// outermost, each core reading its own block of weight columns once) rather
// than the row-parallel register tile (each core streaming all the weights
// once per block of output rows)? When its weights outweigh its input and
// also take more than half the L2, which the row-parallel tile's weight
// stream shares with its input rows and outputs. Measured on the 2-core
// Zen 5 (1 MB of L2 per core; Target says 2 MB): 14x14 1x1 layers with
// 1 MB of weights run 0.96-0.99x of oneDNN row-parallel vs 0.86x
// channel-tiled; the 2 MB 1x1 layers and the 2.4 MB 3x3 layers the other
// way (0.82-0.90x channel-tiled vs 0.69-0.80x row-parallel); the 28x28 3x3
// 128-channel layer (0.6 MB): 0.91x row-parallel vs 0.64x.
//
// Weights stored blocked by output channels ([O/B, KH, KW, C, B], rank 5)
// change that for 1x1 layers whose rows split evenly across the cores and
// whose input outgrows a core's L2: each core's weight stream is then
// contiguous, while channel tiles would re-read the input from L3 once per
// tile group, and the row-parallel tile wins (Zen 5, 1 MB of L2, 2 threads,
// 14x14 1x1 layers with 2 MB of weights: layer 14 (1.6 MB of input) 0.449 ->
// 0.420 ms; layer 17 (0.8 MB) 0.437 -> 0.428, within noise). Where the
// input stays in the L2, channel tiles win (SPR VM, 2 MB of L2: layer 14
// 0.69 -> 0.54 ms, layer 17 0.66 -> 0.53; oneDNN 0.49, 0.45). 3x3 layers keep
// channel tiles (layer 12 0.446 vs 0.466 ms row-parallel, layer 16 within
// noise), as do 7x7 maps, whose 7 rows do not split evenly (layer 19 0.205
// vs 0.240 ms).
bool weights_outer_pays(const Program& p, const Stage& conv, const Target& t) {
  if (!weights_outweigh_input(p, conv)) return false;
  const auto reads = conv.reads();
  const TensorInfo& w = p.tensor(reads[1]);
  int64_t n = bytes(w.dtype);
  for (const Dim& d : w.shape) n *= std::max<int64_t>(static_extent(d), 1);
  int64_t taps = 1;
  for (const RVar& r : conv.rvars)
    if (r.name != roles(conv).in_channel) taps *= std::max<int64_t>(1, static_extent(r.extent));
  const int64_t oh = static_extent(conv.shape[1]);
  const TensorInfo& in = p.tensor(reads[0]);
  int64_t in_bytes = bytes(in.dtype);
  for (const Dim& d : in.shape) in_bytes *= std::max<int64_t>(static_extent(d), 1);
  if (w.shape.size() == 5 && taps == 1 && t.cores > 1 && oh > 0 && oh % t.cores == 0 && in_bytes > t.l2_bytes)
    return false;
  return 2 * n > t.l2_bytes;
}

// A channels-last convolution whose weights outweigh its input and half the
// L2 (`weights_outer_pays`: ResNet's 2-9 MB layers, down to 49 pixels) reads
// each weight once per channel tile: channel tiles outermost and in parallel, the
// convolution accumulating into its buffer per channel tile (<= 28x28 x 32
// floats, in L1 or L2; the epilogue reads it right after), and the reduction
// blocked over input channels so that a block of the weight panel (KH*KW*16
// rows of 32 channels) is reused by every pixel tile while cache-resident.
// The register tile spans yt output rows of xt pixels: a 7-wide map gets
// 2 x 7 pixels x 2 vectors (0.87-0.95 ms on the 7x7 3x3 512-channel layer,
// one thread, HWIO weights; 7 x 2 alone: 0.98 ms, waiting on weight loads),
// or 1 x 7 where max_tile_pixels caps the tile (ResNet's 7x7 layers, whose
// 512-2048 input channels put the pixels 2-8 KB apart). Packing the
// weight panel per channel tile or per reduction block measured slower
// (1.32 / 1.19 ms): the weights are read once either way.
void weights_outer(const Program& p, const Stage& mm, const Stage* epilogue, const Target& t, Schedule& s) {
  const int lanes = t.vector_lanes(DType::F32);
  const int regs = t.vector_registers;
  const ConvRoles& role = roles(mm);
  const std::string n = role.batch, y = role.out_row, x = role.out_col, o = role.out_channel;
  const int64_t OH = static_extent(mm.shape[1]), OW = static_extent(mm.shape[2]), O = static_extent(mm.shape[3]);
  const int64_t v = std::max<int64_t>(1, std::min<int64_t>(2, O / lanes));
  const int64_t rmax = (regs - 1 - v) / v;  // accumulators + weight vectors + one broadcast
  // Pixels per row of the tile: of the widths that keep 3/4 of the most
  // pixels per weight load, the one that computes the fewest (whole tiles),
  // then the widest. (Over all widths, a prime row took one-pixel columns:
  // 382 channels 7x7 at 23x23, 14 x 1 pixels 1.81 ms, 1 x 12 1.63.)
  const int64_t xmax = std::max<int64_t>(1, std::min(OW, rmax));
  int64_t xt = xmax;
  for (int64_t c = xmax; 4 * c >= 3 * xmax; --c)
    if ((OW + c - 1) / c * c < (OW + xt - 1) / xt * xt) xt = c;
  const int64_t yt = std::max<int64_t>(1, std::min({OH, rmax / xt, std::max<int64_t>(1, max_tile_pixels(p, mm) / xt)}));
  // Channel tiles of the stage that is materialized: the epilogue (the
  // convolution computed in it per channel tile, its own buffer of <= 28x28
  // x 32 floats the accumulator), or the convolution (an accumulator buffer).
  const Stage& outer = epilogue ? *epilogue : mm;
  StageSchedule& os = s[outer.name];
  os.loops = LoopSchedule{};
  const std::vector<std::string>& ov = outer.vars;
  os.loops.tile[ov[3]] = {v * lanes};
  os.loops.order = {outer_loop(ov[3]), ov[0], ov[1], ov[2], inner_loop(ov[3])};
  os.loops.parallel = {outer_loop(ov[3])};
  // Channel tiles in one contiguous block per core (o_o parallel, o_m the
  // channel tile): a core's tiles are neighbouring columns of the weight
  // rows, so lines its prefetcher pulls in are its own (layer 13, 2 threads:
  // 0.64x -> 0.85x of oneDNN; layer 21: 0.86x -> 0.97x).
  //
  // Within a block, groups of up to 4 channel tiles share one accumulator
  // buffer (while it fits L1: the 7x7 maps, 49 x 128 floats), the channel
  // tiles looping inside each reduction block: the weight rows are then
  // read 512 contiguous bytes at a time instead of 128 (layers 18-22, 2
  // threads: 0-25% faster, e.g. layer 19 0.85-0.89x -> 0.91-0.93x).
  std::string tile_loop = outer_loop(ov[3]);
  int64_t group = v * lanes;
  if (const int64_t chunk = parallel_chunk(O, v * lanes, t); chunk > v * lanes && O % chunk == 0) {
    const int64_t pixels = std::max<int64_t>(OH, 1) * std::max<int64_t>(OW, 1);
    while (group * 2 < chunk && chunk % (group * 2) == 0 && group * 2 <= 4 * v * lanes &&
           pixels * group * 2 * bytes(mm.dtype) <= t.l1_bytes)
      group *= 2;
    os.loops.tile[ov[3]] = {chunk, group};
    os.loops.order = {outer_loop(ov[3]), middle_loop(ov[3]), ov[0], ov[1], ov[2], inner_loop(ov[3])};
    tile_loop = middle_loop(ov[3]);
  }
  os.loops.vectorize = inner_loop(ov[3]);
  os.loops.vector_width = lanes;
  StageSchedule& ms = s[mm.name];
  if (epilogue) {
    ms.compute = {Placement::Kind::At, epilogue->name, tile_loop};
    ms.loops.vectorize = o;
    ms.loops.vector_width = lanes;
  } else {
    ms.accumulator_at = n;
  }
  LoopSchedule up;
  up.tile[y] = {yt};
  up.tile[x] = {xt};
  // Input-channel blocks of >= 128 reduction steps per pixel tile (16 for a
  // 3x3 kernel, 128 for a 1x1), so that loading and storing the accumulators
  // around each block stays small against its FMAs.
  std::string cin;
  int64_t C = 0, taps = 1;
  for (const RVar& r : mm.rvars) {
    if (r.name == role.in_channel) cin = r.name, C = static_extent(r.extent);
    else taps *= std::max<int64_t>(1, static_extent(r.extent));
  }
  int64_t cb = 16;
  while (cb * taps < 128) cb *= 2;
  const bool kblock = !cin.empty() && C > cb && C % cb == 0;
  if (kblock) up.tile[cin] = {cb};
  // A group of channel tiles: the register tile's channels are o_i, the
  // tiles o_o loop inside each reduction block.
  const bool grouped = group > v * lanes;
  if (grouped) up.tile[o] = {v * lanes};
  const std::string oi = grouped ? inner_loop(o) : o;
  up.order = {n};
  if (kblock) up.order.push_back(outer_loop(cin));
  if (grouped) up.order.push_back(outer_loop(o));
  for (const std::string& l : {outer_loop(y), outer_loop(x)}) up.order.push_back(l);
  for (const RVar& r : mm.rvars) up.order.push_back(r.name == cin && kblock ? inner_loop(cin) : r.name);
  for (const std::string& l : {inner_loop(y), inner_loop(x), oi}) up.order.push_back(l);
  up.vectorize = oi;
  up.vector_width = lanes;
  up.unroll[inner_loop(y)] = 0;
  up.unroll[inner_loop(x)] = 0;
  up.unroll[oi] = 0;
  // Border taps read zero padding (at 7x7, 2 of every 21 taps per row and per
  // column): skip them where that costs no branch in the tile. A tile of whole
  // rows with kx unrolled knows each pixel's kx range at compile time; a
  // one-row tile has one ky range, which Halide trims from the ky loop; a
  // taller tile knows its rows' ky ranges when its few row tiles and ky are
  // unrolled too. (Rows of a taller tile left in a loop need a guard per row
  // inside the reduction: 2x slower.) 2 threads: layer 16 (14x14, one-row
  // tiles) 0.459 -> 0.424 ms; layer 22 (7x7, 4 two-row tiles) 0.458 -> 0.444
  // ms (columns only) -> 0.396 ms (rows unrolled as well). A one-row tile
  // over part of a row skips the rows' padding alone, its columns' padding
  // then varying within the row: DeepLab's dilated 3x3 (33 x 33, 1 x 11
  // pixels, padding 2) 4.07 -> 3.83 ms (oneDNN 3.24).
  if (const auto pr = padded_read(p, mm); pr && pr->stage->vars.size() == 4 && (xt >= OW || yt == 1)) {
    auto padded = [&](const std::string& d) { return std::find(pr->dims.begin(), pr->dims.end(), d) != pr->dims.end(); };
    const std::string h = pr->stage->vars[1], w = pr->stage->vars[2];
    if (padded(h) && yt == 1) {
      ms.skip_padding.push_back(h);
    } else if (padded(h) && OH > 0 && (OH + yt - 1) / yt <= 4) {
      ms.skip_padding.push_back(h);
      up.unroll[outer_loop(y)] = 0;
      up.unroll[role.kernel_row] = 0;
    }
    if (xt >= OW) {
      if (padded(w)) ms.skip_padding.push_back(w);
      if (!ms.skip_padding.empty()) up.unroll[role.kernel_col] = 0;
    }
  }
  ms.update = up;
}

// The padded input of a channels-last convolution (conv2d_nhwc's `_pad`
// stage): materialized once at root, row blocks in parallel, channels vectorized,
// so the convolution's reduction body is a plain load.
LoopSchedule padded_input(const Stage& pad, const Target& t) {
  LoopSchedule ls;
  const int lanes = t.vector_lanes(pad.dtype);
  const int64_t c = static_extent(pad.shape.back());
  if (c >= lanes && lanes > 1) {
    ls.vectorize = pad.vars.back();
    ls.vector_width = lanes;
  } else if (c > 0 && c <= 4 && lanes > 1 && static_extent(pad.shape[2]) >= lanes) {
    // A few channels (the RGB stem): vectorized along the row, the channels
    // unrolled inside, instead of a scalar loop (layer 0, 2 threads:
    // 0.489 -> 0.470-0.478 ms, oneDNN 0.44-0.45).
    ls.vectorize = pad.vars[2];
    ls.vector_width = lanes;
    ls.unroll[pad.vars[3]] = 0;
  }
  // Rows in one contiguous block per core, not one task per row (the stem's
  // 230 rows, 2 threads: 0.034 -> 0.021 ms).
  const std::string h = pad.vars[1];
  if (const int64_t chunk = parallel_chunk(static_extent(pad.shape[1]), 1, t); chunk > 0 && chunk < static_extent(pad.shape[1])) {
    ls.tile[h] = {chunk};
    ls.parallel = {outer_loop(h)};
  } else {
    ls.parallel = {h};
  }
  return ls;
}

}  // namespace pto::defaults
