// Default schedules of window (stencil) stages over channels-first tensors:
// depthwise and grouped convolutions whose groups have too few output channels
// to share an input load across a contraction tile's rows (conv1d/2d/3d), and
// max / average pooling. Each output channel plane is a stencil over its own
// input plane, so the rule vectorizes along the output's contiguous width,
// keeps a register tile of rows x width vectors (x the few output channels of
// a group, which do share their inputs), and unrolls the static kernel taps
// inside it: a tap's input vector is then a dense (stride 1) or strided load
// that the tile's neighbouring rows reuse, and the weight a broadcast; the
// zero-padded input is materialized (per group where the group's planes stay
// in cache), so that no tile reads through the padding guard. Output
// channels are split across cores in contiguous blocks. Dense 2-D
// convolutions with weights that fit the L2 take the same tile (the group's
// channels up to 4), for the same reason: their contraction tile reads its
// input through the op's clamped index as per-lane loads.
#include <algorithm>

#include "dsl/IRVisitor.h"
#include "schedules/LoopNest.h"
#include "schedules/defaults/Rules.h"

namespace pto::defaults {

namespace {

// Output channels per group of an NCHW convolution (its weights are [O, C/groups, k...]),
// 0 when they are not known.
int64_t outputs_per_group(const Program& p, const Stage& conv) {
  const auto reads = conv.reads();
  if (reads.size() < 2) return 0;
  const Shape& x = p.tensor(reads[0]).shape;
  const Shape& w = p.tensor(reads[1]).shape;
  if (x.size() != conv.vars.size() || w.size() != conv.vars.size()) return 0;
  const int64_t c = static_extent(x[1]), o = static_extent(w[0]), cg = static_extent(w[1]);
  if (c <= 0 || o <= 0 || cg <= 0 || c % cg) return 0;
  const int64_t groups = c / cg;
  return o % groups ? 0 : o / groups;
}

int64_t cover(int64_t n, int64_t tile) {
  return (n + tile - 1) / tile * tile;
}

constexpr int64_t kMaxRows = 4;

// Taps of a window's kernel unrolled in its tile while there are at most
// this many (all of a 7x7 kernel's 49, as of a 3x3's 9), and the unrolled
// body's FMAs (taps x rows x group channels) at most kMaxUnrolledFmas, fewer
// rows where needed. Unrolled, each tap's padding guard is a constant
// condition that Halide's loop partitioning folds away in the inner tiles;
// in a loop, every load goes through it as per-lane loads (depthwise 7x7 at
// 76x76x133, 2 threads: 11 ms in a loop, 0.66 unrolled, ONNX Runtime 3.3).
// The bound keeps compiling short: 49 x 4 FMAs compile in 2.6 s, 121 x 4 in
// 11 s, 49 x 4 rows x 4 channels in 12 s.
constexpr int64_t kMaxUnrolledTaps = 64;
constexpr int64_t kMaxUnrolledFmas = 256;

// The taps of window stage `w`: its reduction variables other than the input channel.
int64_t window_taps(const Stage& w) {
  int64_t taps = 1;
  for (const RVar& rv : w.rvars) {
    const bool channel = w.conv_roles && rv.name == w.conv_roles->in_channel;
    const int64_t e = static_extent(rv.extent);
    if (!channel) taps *= e > 0 ? e : kMaxUnrolledTaps + 1;
  }
  return taps;
}

}  // namespace

// A channels-first convolution whose groups have fewer output channels than
// the contraction tile's 6 rows (depthwise: 1; ResNeXt's 32 groups of 4): the
// contraction tile's rows would read different input channels, so nothing
// is reused across them and each row pays its own loads through a guard.
// Also every 2-D one, dense included: the contraction tile (6 channels x 2
// vectors of width, the taps a loop) reads its input through the op's clamped
// index in every tile, as per-lane loads, where this tile's inner tiles read
// plain vectors (1 thread, 3x3 pad 1: 56x56x64 -> 64 38-60 ms -> 17-23 ms;
// 56x56x128 -> 128 stride 2 72-144 -> 36-52 ms). Dense 1-D and 3-D ones keep
// the contraction tile (Contraction.cpp).
bool window_conv(const Program& p, const Stage& st, const Target& t) {
  if (st.kind != OpKind::Convolution || !st.reduce || !st.conv_roles || channels_last_conv(st))
    return false;
  if (st.op != "conv1d" && st.op != "conv2d" && st.op != "conv3d") return false;
  if (st.vars.size() < 3 || st.vars[1] != st.conv_roles->out_channel) return false;
  const int64_t og = outputs_per_group(p, st);
  if (og <= 0) return false;
  if (og < 6) return true;
  if (st.vars.size() != 4) return false;
  // Weights within half the L2, which every pixel tile streams once: beyond
  // it (DeepLab's dilated 3x3 at 256 channels, 2.4 MB) the tile waits on the
  // outer caches, and the contraction tile measured faster (2 threads,
  // 64x64x256 dilation 2: 125-163 ms vs 160-190 ms).
  const auto reads = st.reads();
  const TensorInfo& w = p.tensor(reads[1]);
  int64_t bytes_w = bytes(w.dtype);
  for (const Dim& d : w.shape) bytes_w *= std::max<int64_t>(static_extent(d), 1);
  return 2 * bytes_w <= t.l2_bytes;
}

// Max / sum pooling over the spatial dims of a channels-first tensor: [n, c, spatial...]
// reduced over one window variable per spatial dim.
bool window_pool(const Stage& st) {
  // (A channels-last pooling, its channel var "c" last, vectorizes along the
  // channels: the reduction rule's kept-dim stream.)
  return st.kind == OpKind::Pooling && st.reduce &&
         (*st.reduce == ReduceOp::Max || *st.reduce == ReduceOp::Sum) && st.vars.size() >= 3 &&
         st.rvars.size() + 2 == st.vars.size() && st.vars.back() != "c";
}

bool window_stage(const Program& p, const Stage& st, const Target& t) {
  return is_float(st.dtype) && (window_conv(p, st, t) || window_pool(st));
}

// The tile of window stage `w` over the stage `e` that materializes it (its
// epilogue, or `w` itself): [n, o, ..., y, x] with rows y_i and width x_i
// (x_i vectorized) and, for a grouped convolution, the group's output
// channels o_i. Returns the loop at which the tile's accumulators live.
//
// Width: one vector of the target's lanes where the row is that wide, else
// the widest power of two that fits (a 14-wide map: 8 lanes, the second tile
// shifted inwards onto the first). One vector, not several: the input index
// is clamped into the image (the op's zero padding), and Halide splits the
// tile loop into border tiles, whose clamped vector reads become per-lane
// loads, and inner tiles, where the clamp folds away and the reads are
// plain vector loads; a 56-wide row in tiles of 2 vectors has no inner tile
// (2 threads, depthwise 3x3 at 56x56x144: 0.93 ms with 32-wide tiles, 0.40
// ms with 16-wide ones). Convolutions now read a materialized padding
// (pad_window_input: 0.05 ms there); pooling still reads through the clamp.
//
// Rows: up to kMaxRows, and within half the register file for rows x group
// channels accumulators (the rest holds the taps' weight broadcasts and input
// vectors); among those, the count that computes the fewest rows at the rate
// its accumulators allow (the target's FMAs in flight). Depthwise
// 3x3, 1 thread: 56x56x144 with 14 / 8 / 7 / 4 rows 1.3 / 0.56 / 0.57 /
// 0.42 ms; 64x64x256 dilation 2, 16 / 8 / 4 / 2 rows 2.1 / 1.0-1.5 / 0.7-1.0
// / 1.0 ms; ResNeXt's 4-channel groups at 56x56, 4 x 4 accumulators vs 4 x
// 2 vs 4 x 1: 0.45-0.58 / 0.57-0.65 / 0.71-0.97 ms.
std::string window_tile(const Program& p, const Stage& w, const Stage& e, const Target& t,
                        LoopSchedule& ls, int64_t& lanes_out, int64_t& group_out,
                        std::string& group_loop) {
  const size_t r = e.vars.size();
  const std::string o = e.vars[1], x = e.vars[r - 1];
  const bool rows = r >= 4;
  const std::string y = rows ? e.vars[r - 2] : "";
  const int64_t OW = static_extent(e.shape[r - 1]), OH = rows ? static_extent(e.shape[r - 2]) : 1;
  const int64_t O = static_extent(e.shape[1]);
  const int lanes = t.vector_lanes(DType::F32);
  int64_t vw = lanes;
  if (OW > 0)
    while (vw > 1 && vw > OW) vw /= 2;
  const int64_t v = 1, tx = vw;
  // A grouped convolution's few output channels per group share every input
  // load: they are a dim of the register tile.
  // Wider groups (a dense convolution) take the largest divisor of theirs up
  // to 4 channels, so that with 4 rows the tile holds 16 accumulators (1
  // thread, 56x56x128 -> 128 stride 2: 4 x 4 41-52 ms, 8 x 2 46-48, 16 x 1 36-76).
  const int64_t og = window_conv(p, w, t) ? outputs_per_group(p, w) : 1;
  int64_t g = 1;
  if (og > 1 && og < 6) g = og;
  for (int64_t c = 4; og >= 6 && c > 1 && g == 1; --c)
    if (og % c == 0) g = c;
  // The input is read once per group of output channels when those loop
  // outside the pixel tiles; a dense convolution whose input outweighs its
  // weights loops them inside, reading the (smaller) weights once per pixel tile.
  const bool pixels_outer = og >= 6 && !weights_outweigh_input(p, w);
  // There a dense one whose channels 2, 3 and 4 do not divide takes groups
  // of 4 too, the last shifted inwards over channels already computed: one
  // channel per tile is 4 accumulators, each step's 4 input vectors feeding
  // 4 FMAs. 2 threads, 3x3 122 -> 49 at 27x27 0.55 -> 0.32 ms (oneDNN 0.34),
  // 191 -> 23 at 60x60 1.92 -> 1.14 (1.25), 5x5 66 -> 23 at 81x81 2.76 ->
  // 1.86 (1.93). (Where the weights outweigh the input, so that the channels
  // loop outside the pixels, they lost: 8 -> 83 7x7 at 55x55 0.99 -> 1.04.)
  const bool dense_shifted = og == O && og >= 6 && pixels_outer;
  if (g == 1 && dense_shifted) g = 4;
  if (O <= 0 || (O % g && !dense_shifted)) g = 1;
  const int64_t acc_budget = std::max<int64_t>(1, t.vector_registers / 2);
  int64_t ty = 1;
  if (rows) {
    const int64_t taps = window_taps(w);
    const int64_t unrolled = taps <= kMaxUnrolledTaps ? kMaxUnrolledFmas / (taps * g) : kMaxRows;
    const int64_t rmax = std::max<int64_t>(
        1, std::min<int64_t>({OH > 0 ? OH : kMaxRows, kMaxRows, acc_budget / (v * g), unrolled}));
    // Cost: rows computed, at the rate of a tile of c x g accumulators
    // (fmas_in_flight of them keep the FMA pipes busy). Rows alone chose 1
    // for a prime height (17, 71: no shifted tile), a tile of g chains.
    // (A symbolic height: the rate alone.)
    const auto cost = [&](int64_t c) {
      const double rate = std::min(1.0, static_cast<double>(c * g * v) / std::max(1, t.fmas_in_flight));
      return (OH > 0 ? static_cast<double>(cover(OH, c)) : 1.0) / rate;
    };
    for (int64_t c = 1; c <= rmax; ++c)
      if (cost(c) <= cost(ty)) ty = c;
  }
  if (vw > 1 && OW > 0) ls.tile[x] = {tx};
  if (rows && ty > 1) ls.tile[y] = {ty};
  std::vector<std::string> order{e.vars[0]};
  std::string par = o;
  if (pixels_outer) {
    if (g > 1) ls.tile[o] = {g};
    for (size_t k = 2; k + 2 < r; ++k) order.push_back(e.vars[k]);
    order.push_back(ty > 1 ? outer_loop(y) : y);
    if (ls.tile.count(x)) order.push_back(outer_loop(x));
    order.push_back(g > 1 ? outer_loop(o) : o);
    if (g > 1) order.push_back(inner_loop(o));
    if (ty > 1) order.push_back(inner_loop(y));
    if (ls.tile.count(x)) order.push_back(inner_loop(x));
    ls.order = order;
    ls.parallel = {ty > 1 ? outer_loop(y) : y};
    if (vw > 1) {
      ls.vectorize = ls.tile.count(x) ? inner_loop(x) : x;
      ls.vector_width = static_cast<int>(vw);
    }
    if (ty > 1) ls.unroll[inner_loop(y)] = 0;
    if (g > 1) ls.unroll[inner_loop(o)] = 0;
    lanes_out = vw;
    group_out = g;
    return g > 1 ? outer_loop(o) : o;
  }
  if (g > 1) {
    if (const int64_t chunk = parallel_chunk(O, g, t); chunk > g && O % chunk == 0) {
      ls.tile[o] = {chunk, g};
      order.push_back(outer_loop(o));
      order.push_back(middle_loop(o));
      par = outer_loop(o);
    } else {
      ls.tile[o] = {g};
      order.push_back(outer_loop(o));
      par = outer_loop(o);
    }
  } else if (const int64_t chunk = parallel_chunk(O, 1, t); chunk > 0 && chunk < O) {
    ls.tile[o] = {chunk};
    order.push_back(outer_loop(o));
    order.push_back(inner_loop(o));
    par = outer_loop(o);
  } else {
    order.push_back(o);
  }
  // The loop whose iteration is one whole group (its input channels read by
  // nothing else): the last channel loop outside the pixels, when the tile's
  // channels are the group's.
  if (og == g) group_loop = order.back();
  for (size_t k = 2; k + (rows ? 2 : 1) < r; ++k)
    order.push_back(e.vars[k]);  // a 3-D window's depth
  const std::string xl = ls.tile.count(x) ? outer_loop(x) : x;
  if (rows) order.push_back(ty > 1 ? outer_loop(y) : y);
  if (ls.tile.count(x)) order.push_back(outer_loop(x));
  if (g > 1) order.push_back(inner_loop(o));
  if (rows && ty > 1) order.push_back(inner_loop(y));
  if (ls.tile.count(x)) order.push_back(inner_loop(x));
  ls.order = order;
  ls.parallel = {par};
  if (vw > 1) {
    ls.vectorize = ls.tile.count(x) ? inner_loop(x) : x;
    ls.vector_width = static_cast<int>(vw);
  }
  if (rows && ty > 1) ls.unroll[inner_loop(y)] = 0;
  if (g > 1) ls.unroll[inner_loop(o)] = 0;
  lanes_out = vw;
  group_out = g;
  return xl;
}

// The window stage's reduction inside its tile: the group's input channels
// outermost, then the taps, fully unrolled (static kernels: 9 taps of a 3x3,
// 10 of wav2vec's conv1d) so that each tap's loads are shared by the rows
// that read the same input row, then the tile's channels, rows and vectors.
LoopSchedule window_update(const Stage& w, int64_t vw, int64_t g) {
  LoopSchedule up;
  const size_t r = w.vars.size();
  const bool rows = r >= 4;
  up.order.push_back(w.vars[0]);
  for (size_t k = 2; k + (rows ? 2 : 1) < r; ++k) up.order.push_back(w.vars[k]);
  for (const RVar& rv : w.rvars) up.order.push_back(rv.name);
  up.order.push_back(w.vars[1]);
  if (rows) up.order.push_back(w.vars[r - 2]);
  up.order.push_back(w.vars[r - 1]);
  if (vw > 1) {
    up.vectorize = w.vars[r - 1];
    up.vector_width = static_cast<int>(vw);
  }
  up.unroll[w.vars[r - 1]] = 0;
  if (rows) up.unroll[w.vars[r - 2]] = 0;
  if (g > 1) up.unroll[w.vars[1]] = 0;
  // Taps unrolled while the unrolled body stays small (kMaxUnrolledTaps: up
  // to a 7x7 kernel, not a 1-D kernel of hundreds).
  if (window_taps(w) <= kMaxUnrolledTaps)
    for (const RVar& rv : w.rvars)
      if (!(w.conv_roles && rv.name == w.conv_roles->in_channel)) up.unroll[rv.name] = 0;
  return up;
}

// The stage that materializes window stage `w`: its sole consumer when that
// is a same-shape, non-reducing stage computed at root (a bias + activation,
// an average's division), else `w` itself. Inline stages in between stay inline.
const Stage* window_epilogue(const Program& p, const Stage& w, const Schedule& s) {
  if (p.is_output(w.name)) return nullptr;
  std::string cur = w.name;
  while (true) {
    const auto cons = p.consumers(cur);
    if (cons.size() != 1) return nullptr;
    const Stage& c = p.stage(cons[0]);
    if (c.reduce || c.shape != w.shape || c.vars.size() != w.vars.size()) return nullptr;
    if (c.kind != OpKind::Elementwise && c.kind != OpKind::Pooling) return nullptr;
    const StageSchedule* cs = s.find(c.name);
    if (cs && cs->compute.kind == Placement::Kind::Root)
      return hosts_placements(s, c.name) ? nullptr : &c;
    if (!cs || cs->compute.kind != Placement::Kind::Inline || p.is_output(c.name)) return nullptr;
    cur = c.name;
  }
}

// The zero-padded input a channels-first convolution reads (Convolution.cpp's
// `<out>_pad`), when nothing else reads it.
const Stage* padded_input_of(const Program& p, const Stage& w) {
  for (const std::string& r : w.reads()) {
    const Stage* pad = p.find_stage(r);
    if (pad && pad->op == "pad" && !pad->reduce && !p.is_output(r) && p.consumers(r).size() == 1)
      return pad;
  }
  return nullptr;
}

// The product of the window's strides: the coefficients of its output
// position vars in its read of `pad` (x * stride + kx * dilation, as
// Convolution.cpp writes it; a var alone is stride 1). 0 when not of that form.
int64_t stride_product(const Stage& w, const std::string& pad) {
  struct Finder : IRVisitor {
    const std::string& pad;
    const Stage& w;
    int64_t product = 1;
    bool found = false, plain = true;
    Finder(const std::string& t, const Stage& st) : pad(t), w(st) {}
    int64_t coefficient(const Expr& e, const std::string& v) {
      if (const auto* x = e.as<VarNode>()) return x->name == v ? 1 : 0;
      if (const auto* b = e.as<BinaryNode>()) {
        if (b->op == BinOp::Add) return coefficient(b->a, v) + coefficient(b->b, v);
        if (b->op == BinOp::Mul)
          if (const auto* c = b->b.as<ConstNode>(); c && b->a.as<VarNode>())
            return b->a.as<VarNode>()->name == v ? static_cast<int64_t>(c->value) : 0;
      }
      plain = false;
      return 0;
    }
    void visit_access(const AccessNode& a) override {
      if (a.tensor == pad && !found) {
        found = true;
        // [n, c, spatial...]: the spatial dims read at the output's spatial vars.
        for (size_t k = 2; k < a.args.size() && k < w.vars.size(); ++k)
          product *= std::max<int64_t>(1, coefficient(a.args[k], w.vars[k]));
      }
      IRVisitor::visit_access(a);
    }
  } f(pad, w);
  f.visit(w.value);
  return f.found && f.plain ? f.product : 0;
}

// The padded input materialized, so that every tile of the window reads plain
// vectors (inline, its guard makes the tiles at the image's border read
// per-lane; in a map one or two vectors wide that is every tile): per group
// at the tile's group loop, where the group's planes stay in cache for its
// tiles (depthwise: one plane); else (a dense convolution, whose tiles each
// read every channel) once at root, channels in parallel.
void pad_window_input(const Program& p, const Stage& w, const std::string& host,
                      const std::string& group_loop, const Target& t, Schedule& s) {
  const Stage* pad = padded_input_of(p, w);
  if (!pad) return;
  // Worth a copy where each copied element feeds enough FMAs: output
  // channels per group x taps / the input elements per output (the strides'
  // product). A depthwise 3x3 at stride 2 (2.25) ran 1.4-1.8x slower with
  // the copy (96 x 112x112: 0.093 -> 0.169 ms), at stride 1 (9) 1.8-2.8x
  // faster; 7x7 in groups of 20 at stride 2 (245) 2.2x faster.
  const int64_t strides = stride_product(w, pad->name);
  if (strides < 1 || outputs_per_group(p, w) * window_taps(w) < 8 * strides) return;
  StageSchedule& ps = s[pad->name];
  ps = StageSchedule{};
  ps.loops = parallel_vectorized(*pad, t);
  if (group_loop.empty()) return;
  ps.loops.parallel.clear();
  ps.loops.tile.clear();
  ps.compute = {Placement::Kind::At, host, group_loop};
}

void window(const Program& p, const Stage& w, const Target& t, Schedule& s) {
  const Stage* e = window_epilogue(p, w, s);
  int64_t vw = 1, g = 1;
  std::string group_loop;
  if (e) {
    StageSchedule& es = s[e->name];
    es = StageSchedule{};
    const std::string at = window_tile(p, w, *e, t, es.loops, vw, g, group_loop);
    pad_window_input(p, w, e->name, group_loop, t, s);
    StageSchedule& ws = s[w.name];
    ws = StageSchedule{};
    ws.compute = {Placement::Kind::At, e->name, at};
    if (vw > 1) {
      ws.loops.vectorize = w.vars.back();
      ws.loops.vector_width = static_cast<int>(vw);
    }
    ws.update = window_update(w, vw, g);
    return;
  }
  StageSchedule& ws = s[w.name];
  ws = StageSchedule{};
  ws.accumulator_at = window_tile(p, w, w, t, ws.loops, vw, g, group_loop);
  // The accumulator's update reads the padding, inside the tile's loops: at
  // root (a stage's own loops cannot host what its update reads).
  pad_window_input(p, w, w.name, "", t, s);
  ws.update = window_update(w, vw, g);
}

}  // namespace pto::defaults
