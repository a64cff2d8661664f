// Convolutions over 1-3 spatial dims (channels-first or channels-last
// activations; groups, including depthwise), the transposed 2-D convolution,
// and conv2d_nhwc, the channels-last implicit GEMM with HWIO weights. Padding
// is folded into the access as a guarded read (zero outside the image, the
// index clamped so the read stays in bounds), so no padded copy is
// materialized unless a schedule asks; conv2d_nhwc instead defines the padded
// input as a stage of its own (see there), and a dense channels-first one is
// computed channels-last between transposes (nchw_through_channels_last) or as
// an im2col copy feeding a GEMM (im2col_conv). Spatial and channel dims must be
// static (output sizes depend on them); the batch dim may be symbolic.
#include <string>

#include "dsl/ops/Ops.h"

namespace pto::ops {
namespace {

std::vector<int> per_dim(const std::string& op, const char* what, std::vector<int> v, int spatial, int def, int min) {
  if (v.empty()) v.assign(static_cast<size_t>(spatial), def);
  if (v.size() == 1 && spatial > 1) v.assign(static_cast<size_t>(spatial), v[0]);
  if (static_cast<int>(v.size()) != spatial)
    throw ShapeError(op + ": " + what + " needs " + std::to_string(spatial) + " values, got " + std::to_string(v.size()));
  for (int x : v)
    if (x < min)
      throw ShapeError(op + ": " + what + " " + std::to_string(x) + " must be >= " + std::to_string(min));
  return v;
}

// The convolution's sum stage `out` (`out_acc` when a bias follows), carrying
// the roles of its variables, and the bias epilogue.
Tensor sum_and_bias(Program p, const std::string& op, const std::string& out, const std::vector<std::string>& ovars,
                    const Shape& oshape, const std::vector<RVar>& rvars, const Expr& body, const Tensor& b,
                    const ConvRoles& roles, OpKind kind = OpKind::Convolution) {
  Stage s;
  s.name = b.defined() ? p.unique_name(out + "_acc") : out;
  s.vars = ovars;
  s.shape = oshape;
  s.reduce = ReduceOp::Sum;
  s.rvars = rvars;
  s.value = body;
  s.dtype = body.type();
  s.kind = kind;
  s.op = op;
  s.conv_roles = roles;
  const std::string acc_name = s.name;
  p.add_stage(std::move(s));
  const Tensor acc = p.handle(acc_name);
  if (!b.defined()) return acc;
  return p.define(out, ovars, oshape, acc(vars_of(ovars)) + b(var(roles.out_channel)), OpKind::Elementwise, op);
}

// A channels-first convolution with wide output-channel groups as a GEMM:
// `<out>_col`[n, c, k..., p] holds the input value each tap reads for output
// pixel p (the pixels flattened, zero in the padding), so the sum stage
// `<out>_acc`[n, o, p] = sum over c, k of w[o, c, k] * col[n, c', k, p] reads
// its B operand contiguously along p with no guard, and the contraction's
// register tile spans whole vectors of pixels whatever the image width (a
// 33-wide map is 2 vectors + 1 pixel as a row, 68 vectors flattened). The
// output [n, o, spatial...] reads the GEMM result back (+ bias), inline into
// whatever follows. This is ONNX Runtime's (MLAS) structure; the guarded read
// stage measured 0.18-0.40x of it on DeepLab's dilated 3x3, ResNet's strided
// 3x3 and wav2vec's conv1d (2 threads).
Tensor im2col_conv(Program p, const std::string& op, const std::string& out, int spatial, const Tensor& x,
                   const Tensor& w, const Tensor& b, const std::vector<int>& stride, const std::vector<int>& dilation,
                   const std::vector<int>& padding, int groups, const Shape& oshape) {
  static const char* const kS[] = {"z", "y", "x"};
  const int s0 = 3 - spatial;
  const int64_t C = x.shape()[1].value, O = w.shape()[0].value, Cg = w.shape()[1].value;
  int64_t pixels = 1;
  for (int s = 0; s < spatial; ++s) pixels *= oshape[static_cast<size_t>(2 + s)].value;
  // col[n, c, k..., p]: the output pixel's coordinates from p, outermost first.
  std::vector<std::string> cvars{"n", "c"};
  Shape cshape{x.shape()[0], C};
  std::vector<Expr> xi{var("n"), var("c")};
  Expr inside;
  int64_t inner = pixels;
  for (int s = 0; s < spatial; ++s) {
    const std::string kv = std::string("k") + kS[s0 + s];
    const int64_t k = w.shape()[static_cast<size_t>(2 + s)].value, in = x.shape()[static_cast<size_t>(2 + s)].value;
    const int64_t os = oshape[static_cast<size_t>(2 + s)].value;
    cvars.push_back(kv);
    cshape.push_back(k);
    inner /= os;
    Expr coord = var("p");
    if (inner > 1) coord = coord / static_cast<int>(inner);
    if (s > 0) coord = coord % static_cast<int>(os);
    const Expr pos = coord * stride[s] + var(kv) * dilation[s] - padding[s];
    xi.push_back(clamp(pos, 0, static_cast<int>(in - 1)));
    if (padding[s]) {
      const Expr ok = pos >= 0 && pos < static_cast<int>(in);
      inside = inside.defined() ? (inside && ok) : ok;
    }
  }
  cvars.push_back("p");
  cshape.push_back(pixels);
  Expr xv = x(xi);
  if (inside.defined()) xv = select(inside, xv, make_const(0, x.dtype()));
  const Tensor col = p.define(p.unique_name(out + "_col"), cvars, cshape, xv, OpKind::DataMovement, "im2col");
  // acc[n, o, p] = sum over c, k... of w[o, c, k...] * col[n, group(o) * Cg + c, k..., p]
  std::vector<RVar> rvars{{"c", Cg}};
  std::vector<Expr> ci{var("n"), (var("o") / static_cast<int>(O / groups)) * static_cast<int>(Cg) + var("c")};
  std::vector<Expr> wi{var("o"), var("c")};
  for (int s = 0; s < spatial; ++s) {
    const std::string kv = std::string("k") + kS[s0 + s];
    rvars.push_back({kv, w.shape()[static_cast<size_t>(2 + s)].value});
    ci.push_back(var(kv));
    wi.push_back(var(kv));
  }
  ci.push_back(var("p"));
  const bool rows = spatial >= 2;
  // 1-D: the pixels are the output's own dim, so the GEMM is the output (its
  // bias an epilogue the contraction tile fuses), with no copy back.
  if (!rows)
    return sum_and_bias(p, op, out, {"n", "o", "p"}, oshape, rvars, w(wi) * col(ci), b,
                        {"n", "o", "", "p", "c", "", "kx"}, OpKind::Contraction);
  const Tensor acc = sum_and_bias(p, op, p.unique_name(out + "_acc"), {"n", "o", "p"}, {x.shape()[0], O, pixels},
                                  rvars, w(wi) * col(ci), Tensor{},
                                  {"n", "o", "", "p", "c", rows ? std::string("ky") : "", std::string("kx")},
                                  OpKind::Contraction);
  // out[n, o, spatial...] = acc[n, o, flattened pixel] (+ bias[o])
  std::vector<std::string> ovars{"n", "o"};
  Expr flat;
  for (int s = 0; s < spatial; ++s) {
    ovars.push_back(kS[s0 + s]);
    flat = s == 0 ? var(kS[s0 + s]) : flat * static_cast<int>(oshape[static_cast<size_t>(2 + s)].value) + var(kS[s0 + s]);
  }
  Expr v = acc(var("n"), var("o"), flat);
  if (b.defined()) v = v + b(var("o"));
  return p.define(out, ovars, oshape, v, OpKind::Elementwise, op);
}

// Is a channels-first convolution in the direct window tile's range
// (schedules/defaults/Window.cpp; measurements at its use in conv())?
bool window_direct(int spatial, int groups, int64_t taps, bool unit_stride, int64_t w_bytes) {
  return spatial == 2 && taps > 1 && groups == 1 && unit_stride && w_bytes <= (int64_t{256} << 10);
}

// Does the auto algorithm compute a channels-first convolution channels-last
// (nchw_through_channels_last)? `direct`: the window tile would take it.
// Dense k x k (k > 1) convolutions go channels-last
// where its output-channel vectors are at least 7/8 full (16 | O, or 71
// channels in 5 vectors; 10, 18, 20, 39 or 51 channels lost 0.1-0.8x of
// the paths below), its output has 96 or more pixels (the weights,
// reordered every call, cost too much per pixel below: 3x3 512 -> 512 at
// 7x7 1.04 -> 1.13 ms, 69 -> 224 at 8x8 0.072 -> 0.087), and, where the
// direct window tile would take it, 32 or more input channels (3 -> 32 at
// 64x64 0.065 -> 0.106 ms, 16 -> 32 at 32x32 0.038 -> 0.049: the tile's
// reduction over channels is that short per tap). 2 threads, Sapphire
// Rapids, this path against the one below (oneDNN): dilated 256 at 33x33
// 4.55 -> 4.19 ms (3.32), stride 2 128 at 56x56 0.91 -> 0.83 (0.70), 64
// at 28x28 0.239 -> 0.213 (0.182), stride 2 256 at 28x28 1.15 -> 0.91
// (0.81), 5x5 32 -> 48 at 40x40 0.50 -> 0.39 (0.35), the 7x7 stride 2
// stem 1.26 -> 0.89 (0.80), 256 at 14x14 1.08 -> 0.72 (0.65), 128 at
// 10x10 0.19 -> 0.12 (0.11). 1x1 kernels gained nothing (256 -> 512 at
// 14x14) or lost (32 -> 16 at 112x112 0.07 -> 0.22).
// Where the window tile would not take it (strided, or weights past
// its L2 share), emptier vectors go too, padded with zero channels to
// whole blocks, down to half-full ones, from 64 reduction steps per
// output (input channels x taps: 8 channels at 3x3):
// the im2col GEMM they replace gathers its copy at a stride and tiles
// few output channels poorly. Same machine, padded / im2col (oneDNN):
// 270 -> 13 5x5 at 12x12 0.146 / 0.494 ms (0.144), 38 -> 15 7x7 stride 2
// at 37x37 0.117 / 0.223 (0.086), 83 -> 40 3x3 stride 2 at 73x73 0.46 /
// 0.73 (0.38), 114 -> 65 5x5 stride 2 at 121x121 6.7 / 9.7 (5.1), 126
// -> 21 dilated stride 2 at 66x66 0.37 / 0.50 (0.38), 146 -> 173 3x3 at
// 23x23 0.89 / 1.15 (0.78); 4 -> 10 stride 2 at 115x115 lost (0.059 /
// 0.029). Through the window tile's stride-1 range they won little and
// lost some (54 -> 18 at 48x48 0.24 / 0.15, dilated 180 -> 18 at 111x111
// 4.9 / 3.8), and stay as they were.
bool auto_channels_last(int spatial, int groups, int64_t taps, int64_t C, int64_t O, int64_t pixels,
                        bool direct) {
  if (spatial != 2 || groups != 1 || taps <= 1) return false;
  const int64_t vectors = (O + 15) / 16;
  // (At least one vector's worth for the window tile's range: 14 or 15
  // channels padded to 16 went either way against it, 64 -> 15 at 40x40
  // 0.131 / 0.116 ms, 40 -> 15 5x5 at 60x60 0.42 / 0.36, 128 -> 14 at
  // 28x28 0.124 / 0.158.)
  const bool full_vectors = O >= 16 && 8 * O >= 7 * 16 * vectors;
  // The window tile's unrolled body holds 256 FMAs (Window.cpp), a
  // single row of a few channels at 7x7 and up: those are no window
  // cases (2 threads, channels-last / window: 8 -> 83 7x7 at 55x55 0.59 /
  // 0.98 ms, oneDNN 0.78; 7 -> 20 at 54x54 0.169 / 0.204; 32 -> 24 at
  // 28x28 0.21 / 0.32; 3 -> 64 at 64x64 0.25 / 0.33; 64 -> 100 at 14x14
  // even).
  const bool window = direct && taps < 49;
  const bool padded = !window && C * taps >= 64 && 2 * O >= 16 * vectors;
  return (full_vectors || padded) && pixels >= 96 && (!window || C >= 32);
}

}  // namespace

// A dense 2-D convolution of channels-last activations with OIHW weights (the
// layout ONNX and PyTorch store), as oneDNN computes one in its blocked
// layouts: the weights reordered to [ceil(O/16), KH, KW, C, 16] blocks (the
// last padded with zero channels where 16 does not divide O), conv2d_nhwc's
// implicit GEMM (output channels along the vectors, the default rules of
// schedules/defaults/ChannelsLastConv.cpp). Output channels that are not
// whole blocks are padded with zero weights (and bias) to whole ones, so that
// every register tile's vectors are full loads of the blocked weights: the
// result has ceil(O/16) * 16 channels, the first O of them the convolution's.
// The reorder is a data-movement stage computed from the weights alone, which
// a compiled model holding them as constants runs once at load
// (schedules/Partition.h).
Tensor blocked_channels_last(Program p, const std::string& out, const Tensor& xt, const Tensor& w,
                             const Tensor& b, const std::vector<int>& stride,
                             const std::vector<int>& dilation, const std::vector<int>& padding) {
  const int64_t C = xt.shape()[3].value;
  const int64_t O = w.shape()[0].value, KH = w.shape()[2].value, KW = w.shape()[3].value;
  constexpr int kBlock = 16;  // BlockedWeights.h's block: one AVX-512 f32 vector, two AVX2 ones
  const int64_t OB = (O + kBlock - 1) / kBlock;
  const Expr o = var("ob") * kBlock + var("oi"), in_o = o < static_cast<int>(O);
  const Expr oc = min(o, static_cast<int>(O - 1));
  const Expr wv = w(oc, var("c"), var("ky"), var("kx"));
  const Tensor wt = p.define(p.unique_name(out + "_w_blocked"), {"ob", "ky", "kx", "c", "oi"},
                             {OB, KH, KW, C, kBlock},
                             O % kBlock ? select(in_o, wv, make_const(0, w.dtype())) : wv,
                             OpKind::DataMovement, "transpose");
  Tensor bias = b;
  if (b.defined() && O % kBlock)
    bias = p.define(p.unique_name(out + "_b_padded"), {"o"}, {OB * kBlock},
                    select(var("o") < static_cast<int>(O),
                           b(min(var("o"), static_cast<int>(O - 1))), make_const(0, b.dtype())),
                    OpKind::DataMovement, "pad");
  return conv2d_nhwc(xt, wt, bias, {stride[0], stride[1]}, {padding[0], padding[1]},
                     {dilation[0], dilation[1]}, out);
}

// A dense channels-first 2-D convolution computed channels-last, as oneDNN
// computes one given NCHW tensors (reorders in, a direct convolution in its
// blocked layout, a reorder out): the input transposed to NHWC,
// blocked_channels_last, and its output (+ bias) transposed back. The
// transposes are data-movement stages the defaults make once per call
// (Defaults.cpp).
Tensor nchw_through_channels_last(Program p, const std::string& out, const Tensor& x,
                                  const Tensor& w, const Tensor& b, const std::vector<int>& stride,
                                  const std::vector<int>& dilation,
                                  const std::vector<int>& padding) {
  const int64_t C = x.shape()[1].value, H = x.shape()[2].value, W = x.shape()[3].value;
  const int64_t O = w.shape()[0].value;
  const Tensor xt =
      p.define(p.unique_name(out + "_nhwc_in"), {"n", "h", "w", "c"}, {x.shape()[0], H, W, C},
               x(var("n"), var("c"), var("h"), var("w")), OpKind::DataMovement, "transpose");
  const Tensor y =
      blocked_channels_last(p, p.unique_name(out + "_nhwc"), xt, w, b, stride, dilation, padding);
  return p.define(out, {"n", "o", "y", "x"}, {x.shape()[0], Dim(O), y.shape()[1], y.shape()[2]},
                  y(var("n"), var("y"), var("x"), var("o")), OpKind::DataMovement, "transpose");
}

Tensor conv2d_channels_last(const Tensor& x, const Tensor& w, const Tensor& b,
                            std::array<int, 2> stride, std::array<int, 2> padding,
                            std::array<int, 2> dilation, const std::string& name) {
  const std::string op = "conv2d_channels_last";
  if (x.rank() != 4)
    throw ShapeError(op + ": input '" + x.name() + "' must be [N, H, W, C] (rank 4), got " +
                     to_string(x.shape()));
  if (w.rank() != 4)
    throw ShapeError(op + ": weight '" + w.name() + "' must be [O, C, KH, KW] (rank 4), got " +
                     to_string(w.shape()));
  for (int k = 1; k < 4; ++k) static_dim(op, x, k);
  for (int k = 0; k < 4; ++k) static_dim(op, w, k);
  if (w.shape()[1] != x.shape()[3])
    throw ShapeError(op + ": weight '" + w.name() + "' has " + w.shape()[1].str() +
                     " input channels (dim 1 of [O, C, KH, KW]); input '" + x.name() + "' has " +
                     x.shape()[3].str() + " (dim 3 of [N, H, W, C])");
  Program p = x.program();
  const std::string out = name.empty() ? p.unique_name(op) : name;
  const int64_t O = w.shape()[0].value;
  if (O % 16 == 0)
    return blocked_channels_last(p, out, x, w, b, {stride[0], stride[1]},
                                 {dilation[0], dilation[1]}, {padding[0], padding[1]});
  const Tensor y =
      blocked_channels_last(p, p.unique_name(out + "_blocks"), x, w, b, {stride[0], stride[1]},
                            {dilation[0], dilation[1]}, {padding[0], padding[1]});
  return p.define(out, {"n", "y", "x", "o"}, {x.shape()[0], y.shape()[1], y.shape()[2], Dim(O)},
                  y(var("n"), var("y"), var("x"), var("o")), OpKind::DataMovement, "slice");
}

bool conv2d_auto_channels_last(const Tensor& x, const Tensor& w, const ConvParams& params) {
  const std::string op = "conv2d";
  if (x.rank() != 4 || w.rank() != 4 || params.groups != 1 || params.layout != "NCHW" ||
      params.algorithm != "auto")
    return false;
  const auto stride = per_dim(op, "stride", params.stride, 2, 1, 1);
  const auto dilation = per_dim(op, "dilation", params.dilation, 2, 1, 1);
  const auto padding = per_dim(op, "padding", params.padding, 2, 0, 0);
  for (int k = 1; k < 4; ++k) static_dim(op, x, k);
  for (int k = 0; k < 4; ++k) static_dim(op, w, k);
  const int64_t C = x.shape()[1].value, O = w.shape()[0].value;
  int64_t taps = 1, pixels = 1;
  for (int s = 0; s < 2; ++s) {
    const int64_t in = x.shape()[static_cast<size_t>(2 + s)].value,
                  k = w.shape()[static_cast<size_t>(2 + s)].value;
    const int64_t span = in + 2 * padding[s] - dilation[s] * (k - 1) - 1;
    if (span < 0) return false;
    taps *= k;
    pixels *= span / stride[s] + 1;
  }
  const bool unit_stride = stride[0] == 1 && stride[1] == 1;
  const int64_t w_bytes = O * C * taps * bytes(x.dtype());
  return auto_channels_last(2, 1, taps, C, O, pixels,
                            window_direct(2, 1, taps, unit_stride, w_bytes));
}

Tensor conv(const std::string& op, int spatial, const Tensor& x, const Tensor& w, const Tensor& b,
            const ConvParams& params, const std::string& name) {
  const int r = spatial + 2;
  const bool last = params.layout == "NHWC" || params.layout == "NWC" || params.layout == "NDHWC";
  const bool first = params.layout == "NCHW" || params.layout == "NCW" || params.layout == "NCDHW";
  if (!last && !first)
    throw ShapeError(op + ": layout '" + params.layout + "' is not one of NCHW (channels first), NHWC (channels last)");
  if (x.rank() != r)
    throw ShapeError(op + ": input '" + x.name() + "' must have rank " + std::to_string(r) + " (" + params.layout +
                     "), got " + to_string(x.shape()));
  if (w.rank() != r)
    throw ShapeError(op + ": weight '" + w.name() + "' must be [O, C/groups, k...] (rank " + std::to_string(r) +
                     "), got " + to_string(w.shape()));
  if (x.dtype() != w.dtype())
    throw DTypeError(op + ": input '" + x.name() + "' is " + std::string(to_string(x.dtype())) + " but weight '" +
                     w.name() + "' is " + std::string(to_string(w.dtype())));
  const std::string& algorithm = params.algorithm;
  if (algorithm != "auto" && algorithm != "im2col" && algorithm != "channels_last" &&
      algorithm != "direct")
    throw DefinitionError(op + ": algorithm '" + algorithm +
                          "' is not one of auto, im2col, channels_last, direct");
  if ((algorithm == "im2col" || algorithm == "channels_last") && !first)
    throw DefinitionError(op + ": algorithm '" + algorithm +
                          "' needs a channels-first layout; layout is " + params.layout +
                          " (use auto or direct)");
  if (algorithm == "channels_last" && (spatial != 2 || params.groups != 1))
    throw DefinitionError(
        op + ": algorithm 'channels_last' needs a dense 2-D convolution (groups 1); this one is " +
        std::to_string(spatial) + "-D with groups " + std::to_string(params.groups));
  const auto stride = per_dim(op, "stride", params.stride, spatial, 1, 1);
  const auto dilation = per_dim(op, "dilation", params.dilation, spatial, 1, 1);
  const auto padding = per_dim(op, "padding", params.padding, spatial, 0, 0);
  const int cax = last ? r - 1 : 1;                 // channel axis of x
  auto sax = [&](int s) { return last ? 1 + s : 2 + s; };  // spatial axis s of x
  const int64_t C = static_dim(op, x, cax);
  for (int k = 0; k < r; ++k) static_dim(op, w, k);
  const int64_t O = w.shape()[0].value, Cg = w.shape()[1].value;
  const int groups = params.groups;
  if (groups < 1 || C % groups || O % groups)
    throw ShapeError(op + ": groups " + std::to_string(groups) + " must divide input channels " + std::to_string(C) +
                     " and output channels " + std::to_string(O));
  if (Cg * groups != C)
    throw ShapeError(op + ": weight '" + w.name() + "' has " + std::to_string(Cg) + " input channels per group; input '" +
                     x.name() + "' has " + std::to_string(C) + " channels in " + std::to_string(groups) + " groups");
  if (b.defined() && (b.rank() != 1 || b.shape()[0] != Dim(O)))
    throw ShapeError(op + ": bias '" + b.name() + "' must be [" + std::to_string(O) + "], got " + to_string(b.shape()));

  static const char* const kS[] = {"z", "y", "x"};
  const int s0 = 3 - spatial;  // spatial dims are named from the innermost: x, or y x, or z y x
  std::vector<std::string> ovars{"n"};
  Shape oshape{x.shape()[0]};
  if (!last) ovars.push_back("o"), oshape.push_back(O);
  std::vector<Expr> xi(static_cast<size_t>(r));
  xi[0] = var("n");
  const Expr o = var("o");
  xi[static_cast<size_t>(cax)] = (o / static_cast<int>(O / groups)) * static_cast<int>(Cg) + var("c");
  std::vector<RVar> rvars{{"c", Cg}};
  std::vector<Expr> wi{o, var("c")};
  Expr inside;
  for (int s = 0; s < spatial; ++s) {
    const int64_t in = static_dim(op, x, sax(s)), k = w.shape()[static_cast<size_t>(2 + s)].value;
    const int64_t out = (in + 2 * padding[s] - dilation[s] * (k - 1) - 1) / stride[s] + 1;
    if (in + 2 * padding[s] - dilation[s] * (k - 1) - 1 < 0)
      throw ShapeError(op + ": kernel " + std::to_string(k) + " (dilation " + std::to_string(dilation[s]) +
                       ") does not fit input size " + std::to_string(in) + " with padding " + std::to_string(padding[s]) +
                       " in spatial dim " + std::to_string(s));
    const std::string v = kS[s0 + s], kv = std::string("k") + kS[s0 + s];
    ovars.push_back(v);
    oshape.push_back(out);
    rvars.push_back({kv, k});
    wi.push_back(var(kv));
    const Expr pos = var(v) * stride[s] + var(kv) * dilation[s] - padding[s];
    xi[static_cast<size_t>(sax(s))] = clamp(pos, 0, static_cast<int>(in - 1));
    if (padding[s]) {
      const Expr ok = pos >= 0 && pos < static_cast<int>(in);
      inside = inside.defined() ? (inside && ok) : ok;
    }
  }
  if (last) ovars.push_back("o"), oshape.push_back(O);
  Program p = x.program();
  const std::string out = name.empty() ? p.unique_name(op) : name;
  if (first && algorithm == "im2col")
    return im2col_conv(p, op, out, spatial, x, w, b, stride, dilation, padding, groups, oshape);
  if (first && algorithm == "channels_last")
    return nchw_through_channels_last(p, out, x, w, b, stride, dilation, padding);
  // A few groups of many channels each, as that many dense convolutions of
  // their slices (each formulated by the rules below, channels-last most
  // often) and their outputs concatenated: the grouped forms (the window
  // tile, im2col per group) are made for groups of few channels. 2 threads,
  // SPR VM, split / grouped (oneDNN): 422 -> 82 7x7 in 2 groups at 10x10
  // 0.91 / 2.6 ms (0.87), 256 -> 256 3x3 in 2 at 14x14 0.43 / 0.91, 128 ->
  // 128 stride 2 in 4 at 28x28 0.13 / 0.23, 96 -> 96 5x5 in 3 at 20x20 0.28
  // / 0.47, 256 -> 512 1x1 in 2 at 14x14 0.170 / 0.195, 64 -> 128 in 2 at
  // 28x28 even; 16 channels a group lost (64 -> 64 in 4 at 56x56 0.31 /
  // 0.23), and so did many groups (77 -> 220 7x7 in 11, 130 -> 273 1x1 in 13).
  if (first && algorithm == "auto" && spatial == 2 && groups >= 2 && groups <= 4 && Cg >= 32 &&
      O / groups >= 32) {
    const int64_t og = O / groups;
    ConvParams dense = params;
    dense.groups = 1;
    std::vector<Tensor> parts;
    for (int g = 0; g < groups; ++g) {
      const std::string part = p.unique_name(out + "_group" + std::to_string(g));
      const Tensor xs = slice(x, {g * Cg}, {(g + 1) * Cg}, {1}, {}, part + "_x");
      const Tensor ws = slice(w, {g * og}, {(g + 1) * og}, {0}, {}, part + "_w");
      const Tensor bs =
          b.defined() ? slice(b, {g * og}, {(g + 1) * og}, {0}, {}, part + "_b") : Tensor();
      parts.push_back(conv(op, spatial, xs, ws, bs, dense, part));
    }
    return concat(parts, 1, out);
  }
  if (first && algorithm == "auto") {
    int64_t taps = 1, pixels = 1;
    for (int s = 0; s < spatial; ++s)
      taps *= w.shape()[static_cast<size_t>(2 + s)].value, pixels *= oshape[static_cast<size_t>(2 + s)].value;
    const int64_t og = O / groups, col_bytes = C * taps * pixels * bytes(x.dtype());
    // A dense convolution as a GEMM over an im2col copy (see im2col_conv):
    // each copied element feeds og output channels, so with a vector's worth
    // of them (16) the copy is at most 1/16 of the GEMM's work; a 1x1 kernel
    // needs no copy where its rows are whole vectors, and takes one where
    // they are not (ResNet's 14-pixel rows: each a vector and a shifted one,
    // or half vectors; flattened, 196 pixels are 12 vectors and a shifted
    // one); the copy is bounded (taps / stride^2 times the input), and beyond
    // 64 MiB per image it stays the guarded-read stage. A 2-D k x k (k > 1) convolution
    // with groups of fewer than 32 output channels is computed directly (the
    // window tile, schedules/defaults/Window.cpp): its copy, the same size
    // whatever the groups, feeds so few channels that the GEMM measured
    // 0.5-0.6x ONNX Runtime (2 threads: 64 channels in 4 groups at 30x30,
    // 96 in 6 at 40x40, 64 -> 16 dense at 28x28), the direct tile 0.7-1.5x.
    // Except a dense one with 6 or more output channels that 2, 3 and 4 do
    // not divide (7, 11, 23): the direct tile then shares each input load with
    // no other channel (its group is a divisor up to 4), and the GEMM wins (2
    // threads, direct / GEMM: 191 -> 23 at 60x60 4.2 / 2.8 ms, 102 -> 11 at
    // 9x9 0.108 / 0.060, at 18x18 stride 2 0.131 / 0.061; with 3 dividing
    // them, mixed: 179 -> 9 at 14x14 stride 2 0.045 / 0.068, 64 -> 9 at 28x28
    // stride 2 0.044 / 0.083, 325 -> 9 dilated at 17x17 0.84 / 0.63; with 4:
    // 32 -> 16 at 56x56 0.18 / 0.31, 48 -> 12 at 40x40 0.12 / 0.22).
    // Since the window tile reads a materialized padding (no per-lane reads
    // at the border), a dense stride-1 k x k convolution with at most 256 KB
    // of weights (the window rule takes them within half the target's L2;
    // 512 KB is the smallest L2 of the named targets) is direct whatever its
    // output channels: 2 threads, direct / GEMM, 64
    // -> 64 at 56x56 0.86 / 1.24 ms (ONNX Runtime 0.94), 20 -> 68 at 91x91
    // 0.78 / 1.33 (0.87), 16 -> 32 5x5 at 64x64 0.39 / 0.85 (0.58), 191 -> 23
    // at 60x60 2.15 / 2.78 (1.87); strided ones and 1x1 kernels kept the
    // GEMM faster (64 -> 64 3x3 stride 2 at 56x56 0.41 / 0.31, 1x1 64 -> 256
    // at 56x56 0.64 / 0.55).
    bool unit_stride = true;
    for (int s = 0; s < spatial; ++s) unit_stride = unit_stride && stride[s] == 1;
    const int64_t w_bytes = O * Cg * taps * bytes(x.dtype());
    const bool direct = window_direct(spatial, groups, taps, unit_stride, w_bytes);
    if (auto_channels_last(spatial, groups, taps, C, O, pixels, direct))
      return nchw_through_channels_last(p, out, x, w, b, stride, dilation, padding);
    const bool whole_vectors = oshape.back().value % 16 == 0;
    const bool few_shared =
        spatial == 2 && taps > 1 && groups == 1 && og >= 6 && og % 2 != 0 && og % 3 != 0;
    const int64_t least_og = spatial == 2 && taps > 1 && !few_shared ? 32 : 16;
    if (!direct && (og >= least_og || few_shared) && (taps > 1 || !whole_vectors) &&
        col_bytes <= (int64_t{64} << 20))
      return im2col_conv(p, op, out, spatial, x, w, b, stride, dilation, padding, groups, oshape);
  }
  Expr xv;
  if (!first || !inside.defined()) {
    xv = x(xi);
    if (inside.defined()) xv = select(inside, xv, make_const(0, x.dtype()));
  } else {
    // Channels first, computed directly: the zero padding is a stage of its
    // own (`<out>_pad`), as conv2d_nhwc's. Inline (the default) it is that
    // same guard; materialized (the window rule, per channel group), the
    // reduction reads plain vectors in every tile, where through the guard
    // the tiles at the image's border read per-lane (all of them in a map
    // that is one or two vectors wide).
    std::vector<std::string> pvars{"n", "c"};
    Shape pshape{x.shape()[0], x.shape()[1]};
    std::vector<Expr> pidx{var("n"), var("c")};
    Expr ok;
    for (int s = 0; s < spatial; ++s) {
      const int64_t in = x.shape()[static_cast<size_t>(sax(s))].value;
      const std::string v = std::string("p") + kS[s0 + s];
      const Expr pos = var(v) - padding[s];
      pvars.push_back(v);
      pshape.push_back(in + 2 * padding[s]);
      pidx.push_back(clamp(pos, 0, static_cast<int>(in - 1)));
      if (padding[s]) {
        const Expr in_image = pos >= 0 && pos < static_cast<int>(in);
        ok = ok.defined() ? (ok && in_image) : in_image;
      }
    }
    const Tensor pad = p.define(p.unique_name(out + "_pad"), pvars, pshape,
                                select(ok, x(pidx), make_const(0, x.dtype())), OpKind::DataMovement, "pad");
    for (int s = 0; s < spatial; ++s)
      xi[static_cast<size_t>(sax(s))] =
          var(kS[s0 + s]) * stride[s] + var(std::string("k") + kS[s0 + s]) * dilation[s];
    xv = pad(xi);
  }
  const bool rows = spatial >= 2;
  return sum_and_bias(p, op, out, ovars, oshape, rvars, xv * w(wi), b,
                      {"n", "o", rows ? "y" : "", "x", "c", rows ? "ky" : "", "kx"});
}

Tensor conv1d(const Tensor& x, const Tensor& w, const Tensor& b, const ConvParams& params, const std::string& name) {
  return conv("conv1d", 1, x, w, b, params, name);
}

Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b, std::array<int, 2> stride,
              std::array<int, 2> padding, std::array<int, 2> dilation, int groups, const std::string& name) {
  ConvParams cp;
  cp.stride = {stride[0], stride[1]};
  cp.padding = {padding[0], padding[1]};
  cp.dilation = {dilation[0], dilation[1]};
  cp.groups = groups;
  return conv("conv2d", 2, x, w, b, cp, name);
}

Tensor conv3d(const Tensor& x, const Tensor& w, const Tensor& b, const ConvParams& params, const std::string& name) {
  return conv("conv3d", 3, x, w, b, params, name);
}

// Channels-last 2-D convolution as an implicit GEMM. The output channel `o`
// is the innermost dim of the output and of the HWIO weights, so a schedule can
// vectorize it for every layer size (a 7x7 map is narrower than a vector, its
// 512 channels are not) and load weight vectors contiguously; the reduction
// runs over (ky, kx, c), c innermost, which is also the input's contiguous dim.
// Padding is a separate stage (`<out>_pad`, zero outside the image) rather than
// a guard in the reduction body: a guarded read in the innermost loop defeats
// the register-tiled micro-kernel, and the padded copy costs one pass over the
// input against KH*KW*O/vector reads of it by the convolution.
Tensor conv2d_nhwc(const Tensor& x, const Tensor& w, const Tensor& b, std::array<int, 2> stride,
                   std::array<int, 2> padding, std::array<int, 2> dilation, const std::string& name) {
  const std::string op = "conv2d_nhwc";
  if (x.rank() != 4)
    throw ShapeError(op + ": input '" + x.name() + "' must be [N, H, W, C] (rank 4), got " + to_string(x.shape()));
  if (w.rank() < 4 || w.rank() > 6)
    throw ShapeError(op + ": weight '" + w.name() + "' must be [KH, KW, C, O] (HWIO, rank 4), [O/B, KH, KW, C, B] " +
                     "(blocked, rank 5) or [O/B, KH, KW, C/2, B, 2] (blocked pairs, rank 6), got " + to_string(w.shape()));
  if (x.dtype() != w.dtype())
    throw DTypeError(op + ": input '" + x.name() + "' is " + std::string(to_string(x.dtype())) + " but weight '" +
                     w.name() + "' is " + std::string(to_string(w.dtype())));
  for (int k = 0; k < 2; ++k) {
    if (stride[k] < 1) throw ShapeError(op + ": stride " + std::to_string(stride[k]) + " must be >= 1");
    if (dilation[k] < 1) throw ShapeError(op + ": dilation " + std::to_string(dilation[k]) + " must be >= 1");
    if (padding[k] < 0) throw ShapeError(op + ": padding " + std::to_string(padding[k]) + " must be >= 0");
  }
  const int64_t H = static_dim(op, x, 1), W = static_dim(op, x, 2), C = static_dim(op, x, 3);
  for (int k = 0; k < w.rank(); ++k) static_dim(op, w, k);
  const bool blocked = w.rank() >= 5, pairs = w.rank() == 6;
  if (pairs && w.shape()[5].value != 2)
    throw ShapeError(op + ": weight '" + w.name() + "' (blocked pairs [O/B, KH, KW, C/2, B, 2]) must end in 2, got " +
                     to_string(w.shape()));
  const auto wd = [&](int k) { return w.shape()[static_cast<size_t>(k + (blocked ? 1 : 0))].value; };
  const int64_t KH = wd(0), KW = wd(1), Cw = wd(2) * (pairs ? 2 : 1), B = blocked ? w.shape()[4].value : 1;
  const int64_t O = blocked ? w.shape()[0].value * B : wd(3);
  if (Cw != C)
    throw ShapeError(op + ": weight '" + w.name() + "' has " + std::to_string(Cw) + " input channels (" +
                     (pairs     ? "2 x dim 3 of [O/B, KH, KW, C/2, B, 2]"
                      : blocked ? "dim 3 of [O/B, KH, KW, C, B]"
                                : "dim 2 of [KH, KW, C, O]") +
                     "); input '" + x.name() + "' has " + std::to_string(C));
  if (b.defined() && (b.rank() != 1 || b.shape()[0] != Dim(O)))
    throw ShapeError(op + ": bias '" + b.name() + "' must be [" + std::to_string(O) + "], got " + to_string(b.shape()));
  const int64_t in[2] = {H, W}, k[2] = {KH, KW};
  int64_t out[2];
  for (int s = 0; s < 2; ++s) {
    const int64_t span = in[s] + 2 * padding[s] - dilation[s] * (k[s] - 1) - 1;
    if (span < 0)
      throw ShapeError(op + ": kernel " + std::to_string(k[s]) + " (dilation " + std::to_string(dilation[s]) +
                       ") does not fit input size " + std::to_string(in[s]) + " with padding " + std::to_string(padding[s]) +
                       " in spatial dim " + std::to_string(s));
    out[s] = span / stride[s] + 1;
  }
  Program p = x.program();
  const std::string out_name = name.empty() ? p.unique_name(op) : name;
  Tensor src = x;
  if (padding[0] || padding[1]) {
    const Expr iy = var("h") - padding[0], ix = var("w") - padding[1];
    const Expr ok = iy >= 0 && iy < static_cast<int>(H) && ix >= 0 && ix < static_cast<int>(W);
    const Expr v = x(var("n"), clamp(iy, 0, static_cast<int>(H - 1)), clamp(ix, 0, static_cast<int>(W - 1)), var("c"));
    src = p.define(p.unique_name(out_name + "_pad"), {"n", "h", "w", "c"},
                   {x.shape()[0], H + 2 * padding[0], W + 2 * padding[1], C}, select(ok, v, make_const(0, x.dtype())),
                   OpKind::DataMovement, "pad");
  }
  const Expr n = var("n"), y = var("y"), xx = var("x"), o = var("o"), ky = var("ky"), kx = var("kx"), c = var("c");
  const int bi = static_cast<int>(B);
  const Expr wv = pairs     ? w(o / bi, ky, kx, c / 2, o % bi, c % 2)
                  : blocked ? w(o / bi, ky, kx, c, o % bi)
                            : w(ky, kx, c, o);
  const Expr body = src(n, y * stride[0] + ky * dilation[0], xx * stride[1] + kx * dilation[1], c) * wv;
  const Shape oshape{x.shape()[0], out[0], out[1], O};
  const std::vector<std::string> ovars{"n", "y", "x", "o"};
  return sum_and_bias(p, op, out_name, ovars, oshape, {{"ky", KH}, {"kx", KW}, {"c", C}}, body, b,
                      {"n", "o", "y", "x", "c", "ky", "kx"});
}

// out[n, o, y, x] = sum over c in o's group, ky, kx of
//   in[n, c, iy, ix] * w[c, o % Og, ky, kx]   where y = iy * stride - pad + ky * dil
// i.e. iy = (y + pad - ky * dil) / stride when that divides exactly and is in range.
Tensor conv_transpose2d(const Tensor& x, const Tensor& w, const Tensor& b, std::array<int, 2> stride,
                        std::array<int, 2> padding, std::array<int, 2> output_padding, std::array<int, 2> dilation,
                        int groups, const std::string& name) {
  const std::string op = "conv_transpose2d";
  if (x.rank() != 4) throw ShapeError(op + ": input '" + x.name() + "' must be NCHW (rank 4), got " + to_string(x.shape()));
  if (w.rank() != 4)
    throw ShapeError(op + ": weight '" + w.name() + "' must be [C, O/groups, KH, KW], got " + to_string(w.shape()));
  if (x.dtype() != w.dtype())
    throw DTypeError(op + ": input is " + std::string(to_string(x.dtype())) + " but weight is " + std::string(to_string(w.dtype())));
  for (int k = 0; k < 2; ++k) {
    if (stride[k] < 1) throw ShapeError(op + ": stride " + std::to_string(stride[k]) + " must be >= 1");
    if (dilation[k] < 1) throw ShapeError(op + ": dilation " + std::to_string(dilation[k]) + " must be >= 1");
    if (padding[k] < 0) throw ShapeError(op + ": padding " + std::to_string(padding[k]) + " must be >= 0");
    if (output_padding[k] < 0 || output_padding[k] >= std::max(stride[k], dilation[k]))
      throw ShapeError(op + ": output_padding " + std::to_string(output_padding[k]) +
                       " must be >= 0 and smaller than stride or dilation");
  }
  const int64_t C = static_dim(op, x, 1), H = static_dim(op, x, 2), W = static_dim(op, x, 3);
  for (int k = 0; k < 4; ++k) static_dim(op, w, k);
  const int64_t Cw = w.shape()[0].value, Og = w.shape()[1].value, KH = w.shape()[2].value, KW = w.shape()[3].value;
  if (groups < 1 || C % groups)
    throw ShapeError(op + ": groups " + std::to_string(groups) + " must divide input channels " + std::to_string(C));
  if (Cw != C)
    throw ShapeError(op + ": weight '" + w.name() + "' has " + std::to_string(Cw) + " input channels; input '" + x.name() +
                     "' has " + std::to_string(C));
  const int64_t O = Og * groups, Cg = C / groups;
  if (b.defined() && (b.rank() != 1 || b.shape()[0] != Dim(O)))
    throw ShapeError(op + ": bias '" + b.name() + "' must be [" + std::to_string(O) + "], got " + to_string(b.shape()));
  const int64_t OH = (H - 1) * stride[0] - 2 * padding[0] + dilation[0] * (KH - 1) + output_padding[0] + 1;
  const int64_t OW = (W - 1) * stride[1] - 2 * padding[1] + dilation[1] * (KW - 1) + output_padding[1] + 1;
  if (OH < 1 || OW < 1) throw ShapeError(op + ": padding leaves an empty output");
  Program p = x.program();
  const std::string out = name.empty() ? p.unique_name(op) : name;
  const Expr n = var("n"), o = var("o"), y = var("y"), xx = var("x"), c = var("c"), ky = var("ky"), kx = var("kx");
  const Expr ty = y + padding[0] - ky * dilation[0], tx = xx + padding[1] - kx * dilation[1];
  const Expr iy = ty / stride[0], ix = tx / stride[1];
  const Expr ok = ty >= 0 && tx >= 0 && ty % stride[0] == 0 && tx % stride[1] == 0 && iy < static_cast<int>(H) &&
                  ix < static_cast<int>(W);
  const Expr ic = (o / static_cast<int>(Og)) * static_cast<int>(Cg) + c;
  const Expr in = x(n, ic, clamp(iy, 0, static_cast<int>(H - 1)), clamp(ix, 0, static_cast<int>(W - 1)));
  const Expr val = select(ok, in, make_const(0, x.dtype())) * w(ic, o % static_cast<int>(Og), ky, kx);
  const Shape oshape{x.shape()[0], O, OH, OW};
  return sum_and_bias(p, op, out, {"n", "o", "y", "x"}, oshape, {{"c", Cg}, {"ky", KH}, {"kx", KW}}, val, b,
                      {"n", "o", "y", "x", "c", "ky", "kx"});
}

}  // namespace pto::ops
