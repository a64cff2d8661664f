#include "schedules/defaults/Defaults.h"

#include "dsl/IRVisitor.h"

#include <algorithm>
#include <optional>
#include <set>

namespace pto {
namespace {

bool is_output(const Program& p, const std::string& n) {
  const auto o = p.outputs();
  return std::find(o.begin(), o.end(), n) != o.end();
}

int64_t static_extent(const Dim& d) { return d.is_symbolic() ? -1 : d.value; }

// Parallel outer dim, vectorized inner dim: the generic root-stage schedule.
LoopSchedule parallel_vectorized(const Stage& st, const Target& t) {
  LoopSchedule ls;
  if (st.vars.empty()) return ls;
  const int lanes = t.vector_lanes(st.dtype == DType::Bool ? DType::U8 : st.dtype);
  const std::string inner = st.vars.back();
  const int64_t e = static_extent(st.shape.back());
  if (e >= lanes && lanes > 1) {
    ls.vectorize = inner;
    ls.vector_width = lanes;
  }
  // Waking the pool's threads costs more than a small stage takes: on the
  // 2-vCPU machine a [384, 768] softmax ran 0.078 ms on one thread and 0.132
  // ms on two, BERT's [128, 768] LayerNorm 0.022 vs 0.057 ms.
  constexpr int64_t kMinParallelElements = int64_t{1} << 19;
  const int64_t n = static_numel(st.shape);
  if (n > 0 && n < kMinParallelElements) return ls;
  // Threads split the outermost dim that has more than one iteration (a
  // batch of 1 would leave every thread but one idle).
  for (size_t k = 0; k + 1 < st.vars.size(); ++k)
    if (static_extent(st.shape[k]) != 1) {
      ls.parallel.push_back(st.vars[k]);
      break;
    }
  return ls;
}

// A 2-D convolution whose output channel is the innermost dim ([n, y, x, o]:
// conv2d_nhwc, or conv2d with layout NHWC).
bool channels_last_conv(const Stage& st) {
  return st.kind == OpKind::Convolution && st.vars.size() == 4 && st.vars.back() == "o";
}

// The two dims of a contraction or convolution output that form the register
// tile: (rows, contiguous columns) for matmul, (output channels, output
// width) for an NCHW convolution (each loaded input value is reused across
// the channels, each weight across the width), (output width, output
// channels) for a channels-last one, like a matmul's rows and columns: o is
// wide enough for whole vectors also where the image is 7 pixels wide.
std::pair<size_t, size_t> tile_dims(const Stage& st) {
  if (channels_last_conv(st)) return {2, 3};
  if (st.kind == OpKind::Convolution && st.vars.size() == 4) return {1, 3};
  return {st.vars.size() - 2, st.vars.size() - 1};
}

// The register tile over stage `e` (the epilogue, or the contraction itself):
// rows x (4 vectors) of accumulators, column tiles in parallel, the rows and
// the other pure dims outside. Returns the loop to compute the accumulators at.
std::string register_tile(const Stage& e, std::pair<size_t, size_t> rc, const Target& t, LoopSchedule& ls) {
  const int lanes = t.vector_lanes(DType::F32);
  const std::string row = e.vars[rc.first], col = e.vars[rc.second];
  const int64_t rows = static_extent(e.shape[rc.first]), cols = static_extent(e.shape[rc.second]);
  // 6 x (4 vectors) accumulators fill 24 of AVX-512's 32 registers; fewer columns on narrower targets.
  int64_t tr = std::min<int64_t>(rows > 0 ? rows : 6, 6);
  // Whole vectors only (vector lanes must divide the tile); a narrower last
  // tile shifts inwards over columns already computed.
  int64_t tc = std::min<int64_t>(cols > 0 ? cols : 4 * lanes, (t.vector_bits >= 512 ? 4 : 3) * lanes);
  auto cover = [](int64_t n, int64_t tile) { return (n + tile - 1) / tile * tile; };
  if (tc >= lanes && cols > 0) {
    // The widest whole-vector tile that computes the fewest columns in all
    // (a conv's 56-wide rows: 2 x 32, not 48 + a shifted 48).
    int64_t best = lanes, best_cost = -1;
    for (int64_t c = lanes; c <= tc; c += lanes) {
      const int64_t cost = cover(cols, c);
      if (best_cost < 0 || cost <= best_cost) best = c, best_cost = cost;
    }
    tc = best;
  }
  // 8 x (3 vectors), also 24 accumulators (8 broadcasts and 3 loads per 24
  // FMAs instead of 6 and 4), where it covers the output with no more
  // computed elements: BERT's 128 rows are 16 x 8 but 21 x 6 plus a shifted
  // tile (FFN, one thread: 5.4 -> 5.1 ms with 48-column weight blocks).
  if (t.vector_bits >= 512 && rows > 0 && cols > 0 && tr == 6 && rows >= 8 && cols >= 3 * lanes &&
      cover(rows, 8) * cover(cols, 3 * lanes) <= cover(rows, 6) * cover(cols, tc)) {
    tr = 8;
    tc = 3 * lanes;
  }
  ls.tile[row] = {tr};
  ls.tile[col] = {tc};
  // Other pure dims (batch, convolution rows) stay outside the tile loops.
  std::vector<std::string> order;
  for (size_t k = 0; k < e.vars.size(); ++k)
    if (k != rc.first && k != rc.second) order.push_back(e.vars[k]);
  for (const std::string& l : {col + "_o", row + "_o", row + "_i", col + "_i"}) order.push_back(l);
  ls.order = order;
  if (tc >= lanes) {
    ls.vectorize = col + "_i";
    ls.vector_width = lanes;
  }
  // Parallel over the outermost other dim with enough iterations for both
  // threads (a convolution's output rows, attention heads, a batch): one fork
  // per call and whole tiles per task; else over column tiles (BERT's qk
  // went from 12 forks of 2 column tiles to one fork of 12 heads).
  ls.parallel = {col + "_o"};
  for (size_t k = 0; k < e.vars.size(); ++k) {
    const int64_t x = static_extent(e.shape[k]);
    if (k != rc.first && k != rc.second && (x < 0 || x >= 4)) {
      ls.parallel = {e.vars[k]};
      break;
    }
  }
  return row + "_o";
}

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
// shifted, mostly recomputed second tile; ties go to more accumulators.
// Accumulators, weight vectors and one broadcast must fit the register file
// (7 x 4 vectors would leave none for the broadcast: LLVM then shuffles and
// spills accumulators every step, measured 10% slower than 14 x 2).
//
// Output rows go outermost and in parallel (56x56 maps, 64-256 channels: the
// weights are small and stay cache-resident, each thread reads its few input
// rows). Layers whose weights outweigh their input and a core's L2 take `weights_outer`.
std::string channels_last_tile(const Stage& e, const Target& t, LoopSchedule& ls) {
  const int lanes = t.vector_lanes(DType::F32);
  const int regs = t.vector_bits >= 512 ? 32 : 16;
  const int64_t rows = static_extent(e.shape[2]), cols = static_extent(e.shape[3]);
  int64_t tr = 6, tc = 4 * lanes;
  if (rows > 0 && cols > 0) {
    double best = -1;
    for (int64_t v = 1; v * lanes <= cols && v <= 4; ++v) {
      const int64_t max_r = std::min<int64_t>({(regs - 1 - v) / v, rows, 14});
      for (int64_t r = 1; r <= max_r; ++r) {
        const double step = std::max({r * v / 2.0, (r + v) / 2.0, 4.0});
        const double tiles = double((rows + r - 1) / r) * double((cols + v * lanes - 1) / (v * lanes));
        const double cost = tiles * step;
        // Ties: more accumulators, then fewer loads per FMA.
        const int64_t bv = tc / lanes;
        const bool better_tie = r * v > tr * bv || (r * v == tr * bv && r + v < tr + bv);
        if (best < 0 || cost < best - 1e-9 || (cost < best + 1e-9 && better_tie)) best = cost, tr = r, tc = v * lanes;
      }
    }
  }
  const std::string y = e.vars[1], x = e.vars[2], o = e.vars[3];
  ls.tile[x] = {tr};
  ls.tile[o] = {tc};
  ls.order = {e.vars[0], y, o + "_o", x + "_o", x + "_i", o + "_i"};
  ls.parallel = {y};
  // One contiguous block of rows per core rather than rows handed out one
  // by one: a core's consecutive rows share their input rows (the 3x3
  // halo) in its own L2, where interleaved rows have both cores fetch
  // every input row (layer 2, 2 threads: 0.84x -> 0.96x of oneDNN).
  const int64_t oh = static_extent(e.shape[1]);
  if (const int64_t chunk = parallel_chunk(oh, 1, t); chunk > 0) {
    ls.tile[y] = {chunk};
    ls.order = {e.vars[0], y + "_o", y + "_i", o + "_o", x + "_o", x + "_i", o + "_i"};
    ls.parallel = {y + "_o"};
  }
  ls.vectorize = o + "_i";
  ls.vector_width = lanes;
  // The tile's own loops fully unrolled: every access to the accumulator
  // buffer then has a constant index and LLVM keeps the tile in registers
  // from the last FMA through the bias + ReLU to the store, instead of
  // storing the 28 accumulators to the stack and reloading them (layer 3,
  // 64 reduction steps per tile: 0.86-0.91x -> 0.97-0.995x of oneDNN).
  ls.unroll[x + "_i"] = 0;
  ls.unroll[o + "_i"] = 0;
  return x + "_o";
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
bool weights_outer_pays(const Program& p, const Stage& conv, const Target& t) {
  if (!weights_outweigh_input(p, conv)) return false;
  const auto reads = conv.reads();
  const TensorInfo& w = p.tensor(reads[1]);
  int64_t n = bytes(w.dtype);
  for (const Dim& d : w.shape) n *= std::max<int64_t>(static_extent(d), 1);
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
// one thread; 7 x 2 alone: 0.98 ms, waiting on weight loads). Packing the
// weight panel per channel tile or per reduction block measured slower
// (1.32 / 1.19 ms): the weights are read once either way.
void weights_outer(const Stage& mm, const Stage* epilogue, const Target& t, Schedule& s) {
  const int lanes = t.vector_lanes(DType::F32);
  const int regs = t.vector_bits >= 512 ? 32 : 16;
  const std::string n = mm.vars[0], y = mm.vars[1], x = mm.vars[2], o = mm.vars[3];
  const int64_t OH = static_extent(mm.shape[1]), OW = static_extent(mm.shape[2]), O = static_extent(mm.shape[3]);
  const int64_t v = std::max<int64_t>(1, std::min<int64_t>(2, O / lanes));
  const int64_t rmax = (regs - 1 - v) / v;  // accumulators + weight vectors + one broadcast
  // Pixels per row of the tile: the fewest computed (whole tiles), then the widest.
  int64_t xt = 1;
  for (int64_t c = 1; c <= std::min(OW, rmax); ++c)
    if ((OW + c - 1) / c * c <= (OW + xt - 1) / xt * xt) xt = c;
  const int64_t yt = std::max<int64_t>(1, std::min(OH, rmax / xt));
  // Channel tiles of the stage that is materialized: the epilogue (the
  // convolution computed in it per channel tile, its own buffer of <= 28x28
  // x 32 floats the accumulator), or the convolution (an accumulator buffer).
  const Stage& outer = epilogue ? *epilogue : mm;
  StageSchedule& os = s[outer.name];
  os.loops = LoopSchedule{};
  const std::vector<std::string>& ov = outer.vars;
  os.loops.tile[ov[3]] = {v * lanes};
  os.loops.order = {ov[3] + "_o", ov[0], ov[1], ov[2], ov[3] + "_i"};
  os.loops.parallel = {ov[3] + "_o"};
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
  std::string tile_loop = ov[3] + "_o";
  int64_t group = v * lanes;
  if (const int64_t chunk = parallel_chunk(O, v * lanes, t); chunk > v * lanes && O % chunk == 0) {
    const int64_t pixels = std::max<int64_t>(OH, 1) * std::max<int64_t>(OW, 1);
    while (group * 2 < chunk && chunk % (group * 2) == 0 && group * 2 <= 4 * v * lanes &&
           pixels * group * 2 * bytes(mm.dtype) <= t.l1_bytes)
      group *= 2;
    os.loops.tile[ov[3]] = {chunk, group};
    os.loops.order = {ov[3] + "_o", ov[3] + "_m", ov[0], ov[1], ov[2], ov[3] + "_i"};
    tile_loop = ov[3] + "_m";
  }
  os.loops.vectorize = ov[3] + "_i";
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
    if (r.name == "c") cin = r.name, C = static_extent(r.extent);
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
  const std::string oi = grouped ? o + "_i" : o;
  up.order = {n};
  if (kblock) up.order.push_back(cin + "_o");
  if (grouped) up.order.push_back(o + "_o");
  for (const std::string& l : {y + "_o", x + "_o"}) up.order.push_back(l);
  for (const RVar& r : mm.rvars) up.order.push_back(r.name == cin && kblock ? cin + "_i" : r.name);
  for (const std::string& l : {y + "_i", x + "_i", oi}) up.order.push_back(l);
  up.vectorize = oi;
  up.vector_width = lanes;
  up.unroll[y + "_i"] = 0;
  up.unroll[x + "_i"] = 0;
  up.unroll[oi] = 0;
  ms.update = up;
}

// The padded input of a channels-last convolution (conv2d_nhwc's `_pad`
// stage): materialized once at root, rows in parallel, channels vectorized,
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
  ls.parallel = {pad.vars[1]};
  return ls;
}

// The micro-kernel: reduction loops outside, the register tile's rows
// unrolled and its columns vectorized (and unrolled) inside.
LoopSchedule micro_kernel(const Stage& mm, std::pair<size_t, size_t> rc, const Target& t, bool const_tile) {
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
  return up;
}

bool static_tile(const Stage& st, std::pair<size_t, size_t> rc) {
  return !st.shape[rc.first].is_symbolic() && !st.shape[rc.second].is_symbolic();
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
        case UnOp::Neg: case UnOp::Not: case UnOp::Abs: case UnOp::Floor: case UnOp::Ceil:
        case UnOp::Round: case UnOp::Trunc: case UnOp::IsNan: case UnOp::IsInf: case UnOp::Sqrt: break;
        default: found = true;
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
bool needs_packing(const Program& p, const Stage& mm, const std::string& tensor, std::pair<size_t, size_t> rc) {
  if (mm.kind != OpKind::Contraction) return false;
  const Shape& sh = p.tensor(tensor).shape;
  if (sh.size() < 2) return false;
  const int64_t row = static_extent(sh.back());
  return (row < 0 || row >= 512) && static_extent(mm.shape[rc.first]) != 1;
}

// mm computed per register tile of its elementwise epilogue `e`.
void contraction_with_epilogue(const Stage& mm, const Stage& e, const Target& t, Schedule& s) {
  const auto rc = tile_dims(mm);
  StageSchedule& es = s[e.name];
  const std::string at = channels_last_conv(mm) ? channels_last_tile(e, t, es.loops) : register_tile(e, rc, t, es.loops);
  StageSchedule& ms = s[mm.name];
  ms.compute = {Placement::Kind::At, e.name, at};
  ms.loops.vectorize = mm.vars[rc.second];
  ms.loops.vector_width = t.vector_lanes(DType::F32);
  ms.update = micro_kernel(mm, rc, t, static_tile(e, rc));
}

// A contraction with no epilogue to be computed in (an output, or read by a
// reduction): the same micro-kernel, into an accumulator tile of its own.
void contraction_alone(const Program& p, const Stage& mm, const Target& t, Schedule& s) {
  const auto rc = tile_dims(mm);
  StageSchedule& ms = s[mm.name];
  ms.loops = LoopSchedule{};
  if (channels_last_conv(mm) && static_tile(mm, rc) && weights_outer_pays(p, mm, t)) {
    weights_outer(mm, nullptr, t, s);
    return;
  }
  ms.accumulator_at = channels_last_conv(mm) ? channels_last_tile(mm, t, ms.loops) : register_tile(mm, rc, t, ms.loops);
  ms.update = micro_kernel(mm, rc, t, static_tile(mm, rc));
  // Pack the panel of the second operand each column tile reads (K x tile
  // columns, reused by every row tile): without it, its rows are a full row
  // stride apart and, at power-of-two sizes, fight over the same cache sets
  // (n = 2048: 123 -> 504 GFLOP/s on the 2-core Zen 5).
  // A panel that is already contiguous (narrow rows, or weights stored
  // blocked by column tile as dsl/models/Bert.h does) is read in place.
  const auto reads = mm.reads();
  if (mm.kind == OpKind::Contraction && reads.size() == 2 && p.tensor(reads[1]).shape.size() >= 2) {
    const bool transposed = transposed_operand(mm, reads[1], rc);
    if (transposed || needs_packing(p, mm, reads[1], rc)) ms.cache.push_back({reads[1], mm.vars[rc.second] + "_o", transposed});
  }
}

// A row statistic (max, sum over a long row) as vector lanes of partial
// results plus one horizontal reduce, instead of a serial chain of scalar
// ops: rfactor by two vectors (two independent accumulator registers hide
// the add/max latency), or one, when the row holds at least 8 such chunks.
std::optional<RFactor> row_rfactor(const Stage& st, const Target& t) {
  if (!st.reduce || st.rvars.empty() || *st.reduce == ReduceOp::ArgMin || *st.reduce == ReduceOp::ArgMax) return std::nullopt;
  const RVar& r = st.rvars.back();
  const int64_t e = static_extent(r.extent);
  const int lanes = t.vector_lanes(st.dtype);
  if (e < 0 || lanes < 2 || t.has_device()) return std::nullopt;  // GPU stages map update loops instead
  for (const int64_t f : {2 * lanes, lanes})
    if (e % f == 0 && e >= 8 * f) return RFactor{r.name, static_cast<int>(f)};
  return std::nullopt;
}

// Row-wise normalizations (softmax, layer_norm): the output is parallel over
// rows and vectorized along them; the row statistics (reductions over the
// last dim) and the elementwise rows they read are computed per row, so a
// row is read from memory once and each exp is evaluated once.
void rowwise(const Program& p, const Stage& y, const Target& t, Schedule& s) {
  const size_t r = y.vars.size();
  if (r < 2 || y.shape.back().is_symbolic()) return;
  const std::string row = y.vars[r - 2];
  const int lanes = t.vector_lanes(y.dtype);
  // Producers, consumers first, so that each sees where its readers run.
  std::vector<const Stage*> ups;
  for (const Stage& st : p.stages()) ups.insert(ups.begin(), &st);
  std::set<std::string> at_row{y.name};
  for (const Stage* st : ups) {
    if (st->name == y.name || is_output(p, st->name)) continue;
    const bool stat = st->reduce && st->vars.size() == r - 1 && std::equal(st->vars.begin(), st->vars.end(), y.vars.begin()) &&
                      st->shape == Shape(y.shape.begin(), y.shape.end() - 1);
    const bool row_values = !st->reduce && st->shape == y.shape && st->kind == OpKind::Elementwise;
    if (!stat && !row_values) continue;
    // Every reader must run per row of y.
    bool ok = !p.consumers(st->name).empty();
    for (const auto& c : p.consumers(st->name)) ok &= at_row.count(c) > 0;
    if (!ok) continue;
    StageSchedule& ss = s[st->name];
    ss = StageSchedule{};
    ss.compute = {Placement::Kind::At, y.name, row};
    if (stat) ss.rfactor = row_rfactor(*st, t);
    if (row_values && lanes > 1 && static_extent(st->shape.back()) >= lanes) {
      ss.loops.vectorize = st->vars.back();
      ss.loops.vector_width = lanes;
    }
    at_row.insert(st->name);
  }
}

}  // namespace

Schedule plain_schedule(const Program&) { return Schedule{}; }

Schedule default_schedule(const Program& p, const Target& t) {
  Schedule s;
  for (const Stage& st : p.stages()) {
    if (s.find(st.name)) continue;  // already placed by a consumer's rule
    const auto cons = p.consumers(st.name);
    const bool out = is_output(p, st.name);
    if (!st.reduce && !out && (st.kind == OpKind::Elementwise || st.kind == OpKind::DataMovement)) {
      s[st.name].compute.kind = Placement::Kind::Inline;
      continue;
    }
    if (!st.reduce) {
      s[st.name].loops = parallel_vectorized(st, t);
      continue;
    }
    s[st.name];  // root
  }
  // Contractions and convolutions: find the elementwise chain that consumes
  // them and fuse; without one, accumulate into a register tile of their own.
  for (const Stage& st : p.stages()) {
    const bool conv = st.kind == OpKind::Convolution && st.vars.size() == 4;
    if ((st.kind != OpKind::Contraction && !conv) || !st.reduce || st.vars.size() < 2 || !is_float(st.dtype)) continue;
    // Follow single-consumer inline elementwise stages down to the root stage that materializes them.
    std::string cur = st.name;
    const Stage* root = nullptr;
    while (true) {
      const auto cons = p.consumers(cur);
      if (cons.size() != 1) break;
      const Stage& c = p.stage(cons[0]);
      if (c.reduce || c.shape != st.shape || c.kind != OpKind::Elementwise) break;
      if (transcendental(c)) {
        // exp/erf/tanh... run better as their own vectorized pass than inside
        // the register tile: BERT's FFN fc1 + GELU took 4.7 ms per core fused,
        // 2.4 ms with the GELU as a pass of its own. Materialize the cheap
        // part of the chain (the bias) and fuse the contraction into that.
        StageSchedule& es = s[c.name];
        if (es.compute.kind != Placement::Kind::Root) {
          es = StageSchedule{};
          es.loops = parallel_vectorized(c, t);
        }
        if (cur != st.name) {
          root = &p.stage(cur);
          s[cur] = StageSchedule{};
        }
        break;
      }
      const StageSchedule* cs = s.find(c.name);
      if (cs && cs->compute.kind == Placement::Kind::Root) {
        root = &c;
        break;
      }
      cur = c.name;
    }
    const auto rc = tile_dims(st);
    const int64_t n = static_extent(st.shape[rc.second]);
    if (n >= 0 && n < t.vector_lanes(DType::F32)) continue;  // too narrow for a vector register tile
    // An inline elementwise chain read by another reduction (linear -> bias ->
    // gelu -> linear) would be re-evaluated for every reduction step of its
    // reader: materialize its last stage and fuse the contraction into it.
    if (!root && cur != st.name) {
      bool contractions_read_it = true;
      for (const auto& c : p.consumers(cur)) {
        const Stage& cs = p.stage(c);
        contractions_read_it &= cs.reduce && (cs.kind == OpKind::Contraction || cs.kind == OpKind::Convolution);
      }
      if (contractions_read_it) root = &p.stage(cur);
    }
    // x @ W^T, or a wide W: the W panel must be packed (transposed), which
    // needs the contraction's own accumulator tile; the epilogue then runs as
    // its own (vectorized, parallel) pass over the result.
    const auto reads = st.reads();
    if (root && reads.size() == 2 && (transposed_operand(st, reads[1], rc) || needs_packing(p, st, reads[1], rc))) {
      StageSchedule& es = s[root->name];
      es = StageSchedule{};
      es.loops = parallel_vectorized(*root, t);
      root = nullptr;
    }
    // A channels-last convolution that reads its weights per channel tile
    // accumulates over its whole output per channel tile, inside the epilogue.
    if (root && channels_last_conv(st) && static_tile(st, tile_dims(st)) && weights_outer_pays(p, st, t)) {
      s.stages.erase(root->name);
      weights_outer(st, root, t, s);
      continue;
    }
    if (root) {
      s.stages.erase(root->name);
      contraction_with_epilogue(st, *root, t, s);
    } else {
      contraction_alone(p, st, t, s);
    }
  }
  // The padded input a channels-last convolution reads (instead of an inline
  // guard in its reduction body).
  for (const Stage& st : p.stages()) {
    if (!channels_last_conv(st) || !st.reduce) continue;
    for (const std::string& r : st.reads()) {
      const Stage* pad = p.find_stage(r);
      if (!pad || pad->op != "pad" || pad->reduce || pad->vars.size() != 4 || is_output(p, r)) continue;
      StageSchedule& ps = s[r];
      ps = StageSchedule{};
      ps.loops = padded_input(*pad, t);
    }
  }
  // Row-wise normalizations.
  for (const Stage& st : p.stages())
    if (st.kind == OpKind::Normalization && !st.reduce && s.find(st.name) &&
        s.find(st.name)->compute.kind == Placement::Kind::Root)
      rowwise(p, st, t, s);
  return s;
}

}  // namespace pto
