// The operator library, written in the DSL itself.
//
// Every operator takes Tensor handles of one Program and adds one or more
// stages to it, returning the result handle; shapes are checked and inferred
// (numpy broadcasting for elementwise operators). Stage names default to the
// operator name made unique ("matmul", "matmul_1", ...); pass `name` to choose.
// Each operator type is one row of the operator table (Registry.h: name, kind,
// attribute schema, builder), which `pto ops`, call() and Python all read.
//
// Families live in one file each: Unary.cpp, Elementwise.cpp (binary and
// ternary), Reduction.cpp, Contraction.cpp, Convolution.cpp, Pooling.cpp,
// Normalization.cpp, Attention.cpp, DataMovement.cpp, Cast.cpp.
//
// dtypes: elementwise math on integer inputs computes in f32; comparisons and
// logical operators produce bool; integer `div`/`mod` follow Halide (division
// by zero gives 0), `floor_divide`/`mod` follow numpy's sign rules.
#pragma once

#include <array>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "dsl/Program.h"
#include "dsl/ops/Registry.h"

namespace pto::ops {

// ---- building blocks -------------------------------------------------------
// numpy broadcasting of two shapes; throws ShapeError naming `op` and both shapes.
Shape broadcast_shapes(const std::string& op, const Shape& a, const Shape& b);
// Index expressions reading tensor `t` (of shape t.shape) at the broadcast
// position given by `vars` (of the broadcast output rank).
std::vector<Expr> broadcast_index(const Tensor& t, const std::vector<std::string>& vars);
// Index variable names for a rank-r stage: i0, i1, ...
std::vector<std::string> index_vars(size_t rank, const std::string& prefix = "i");
// Var expressions for names.
std::vector<Expr> vars_of(const std::vector<std::string>& names);
// Elementwise map over broadcast inputs: out(idx) = f(in_0(idx'), in_1(idx''), ...).
Tensor map(const std::string& op, const std::vector<Tensor>& inputs,
           const std::function<Expr(const std::vector<Expr>&)>& f, const std::string& name = "");
// Normalizes an axis against a rank; throws ShapeError naming `op`.
int normalize_axis(const std::string& op, int axis, int rank);
// Normalizes a list of axes (empty = all when `empty_means_all`); rejects repeats.
std::vector<int> normalize_axes(const std::string& op, const std::vector<int>& axes, int rank,
                                bool empty_means_all = true);
// The number of elements in `dims` as a float of type t: a constant when all
// are static, else a read of a rank-0 stage `<prefix>_count` that sums ones
// (the IR has no node for the value of a symbolic size).
Expr element_count(Program p, const std::string& prefix, const std::vector<Dim>& dims, DType t);
// The identity of a reduction in type t: 0, 1, or the lowest / highest value
// (-inf / +inf for floats) for max / min.
double reduction_identity(ReduceOp op, DType t);
// A scatter's output `out` over `data`'s shape: data combined (reduction add,
// mul, max or min) with the updates `update` at the reduction positions `rv`
// where `hit` holds (Indexing.cpp; scatter and scatter_nd).
Tensor combine_updates(const std::string& op, const std::string& out, const Tensor& data,
                       const std::vector<std::string>& vars, const std::vector<RVar>& rv,
                       const Expr& hit, const Expr& update, const std::string& reduction);
// An index read from data: a negative one wrapped once, then clamped into
// [0, n) so that a bad index never reads outside the buffer (DataMovement.cpp).
Expr wrap_clamp(const Expr& idx, int64_t n);
// Requires an integer index tensor; throws DTypeError naming op and tensor.
void require_int(const std::string& op, const Tensor& t);
// log(1 + x) accurate near 0, as an expression (Unary.cpp; the log1p row).
Expr log1p_expr(const Expr& x);
// Requires a floating-point tensor; throws DTypeError naming op and tensor.
void require_float(const std::string& op, const Tensor& x);
// Requires a static dim; throws ShapeError naming op, tensor and dim.
int64_t static_dim(const std::string& op, const Tensor& x, int axis);

// ---- unary elementwise (Unary.cpp) ------------------------------------------
// Every unary operator is a row of the table (call("mish", {x})); the common ones also have functions.
Tensor abs(const Tensor& x, const std::string& name = "");
Tensor neg(const Tensor& x, const std::string& name = "");
Tensor exp(const Tensor& x, const std::string& name = "");
Tensor expm1(const Tensor& x, const std::string& name = "");
Tensor log(const Tensor& x, const std::string& name = "");
Tensor log1p(const Tensor& x, const std::string& name = "");
Tensor sqrt(const Tensor& x, const std::string& name = "");
Tensor rsqrt(const Tensor& x, const std::string& name = "");
Tensor reciprocal(const Tensor& x, const std::string& name = "");
Tensor sin(const Tensor& x, const std::string& name = "");
Tensor cos(const Tensor& x, const std::string& name = "");
Tensor tan(const Tensor& x, const std::string& name = "");
Tensor tanh(const Tensor& x, const std::string& name = "");
Tensor sigmoid(const Tensor& x, const std::string& name = "");
Tensor erf(const Tensor& x, const std::string& name = "");
Tensor relu(const Tensor& x, const std::string& name = "");
Tensor leaky_relu(const Tensor& x, double alpha = 0.01, const std::string& name = "");
Tensor elu(const Tensor& x, double alpha = 1.0, const std::string& name = "");
Tensor silu(const Tensor& x, const std::string& name = "");
Tensor softplus(const Tensor& x, const std::string& name = "");
Tensor floor(const Tensor& x, const std::string& name = "");
Tensor ceil(const Tensor& x, const std::string& name = "");
Tensor round(const Tensor& x, const std::string& name = "");
Tensor sign(const Tensor& x, const std::string& name = "");
Tensor clip(const Tensor& x, std::optional<double> lo, std::optional<double> hi, const std::string& name = "");
Tensor gelu(const Tensor& x, bool tanh_approximation = false, const std::string& name = "");

// ---- binary / ternary elementwise (Elementwise.cpp) ---------------------------
// Every binary operator is a row of the table (call("logical_xor", {a, b})); the common ones also have functions.
Tensor add(const Tensor& a, const Tensor& b, const std::string& name = "");
Tensor sub(const Tensor& a, const Tensor& b, const std::string& name = "");
Tensor mul(const Tensor& a, const Tensor& b, const std::string& name = "");
Tensor div(const Tensor& a, const Tensor& b, const std::string& name = "");
Tensor pow(const Tensor& a, const Tensor& b, const std::string& name = "");
Tensor mod(const Tensor& a, const Tensor& b, const std::string& name = "");
Tensor maximum(const Tensor& a, const Tensor& b, const std::string& name = "");
Tensor minimum(const Tensor& a, const Tensor& b, const std::string& name = "");
// select(cond, a, b) with three-way broadcasting.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b, const std::string& name = "");

// ---- casts (Cast.cpp) ------------------------------------------------------
// Converts to `to`: float->int truncates toward zero (C), anything->bool is `!= 0`.
Tensor cast(const Tensor& x, DType to, const std::string& name = "");

// ---- normalization (Normalization.cpp) ----------------------------------------
// Numerically stable softmax along `axis` (max-subtracted).
Tensor softmax(const Tensor& x, int axis = -1, const std::string& name = "");
Tensor log_softmax(const Tensor& x, int axis = -1, const std::string& name = "");
// (x - mean) / sqrt(var + eps) * gamma + beta over the last dim; gamma/beta optional.
Tensor layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps = 1e-5,
                  const std::string& name = "");
// x / sqrt(mean(x^2) + eps) * gamma over the last dim.
Tensor rms_norm(const Tensor& x, const Tensor& gamma, double eps = 1e-6, const std::string& name = "");
// Inference batch norm over channel dim 1: (x - mean) / sqrt(var + eps) * scale + bias.
Tensor batch_norm(const Tensor& x, const Tensor& scale, const Tensor& bias, const Tensor& mean, const Tensor& var,
                  double eps = 1e-5, const std::string& name = "");
// Statistics per (n, group) over channels-in-group and spatial dims; scale/bias per channel (optional).
Tensor group_norm(const Tensor& x, int groups, const Tensor& scale, const Tensor& bias, double eps = 1e-5,
                  const std::string& name = "");
Tensor instance_norm(const Tensor& x, const Tensor& scale, const Tensor& bias, double eps = 1e-5,
                     const std::string& name = "");
// x / max(||x||_2 along axis, eps).
Tensor l2_normalize(const Tensor& x, int axis = -1, double eps = 1e-12, const std::string& name = "");

// ---- reductions (Reduction.cpp) ----------------------------------------------
// Reduces `axes` (negative counts from the end; empty = all) with sum/prod/min/max.
Tensor reduce(const std::string& op, ReduceOp r, const Tensor& x, std::vector<int> axes, bool keepdims,
              const std::string& name = "");
Tensor reduce_sum(const Tensor& x, std::vector<int> axes = {}, bool keepdims = false, const std::string& name = "");
Tensor reduce_max(const Tensor& x, std::vector<int> axes = {}, bool keepdims = false, const std::string& name = "");
Tensor reduce_min(const Tensor& x, std::vector<int> axes = {}, bool keepdims = false, const std::string& name = "");
Tensor reduce_prod(const Tensor& x, std::vector<int> axes = {}, bool keepdims = false, const std::string& name = "");
Tensor reduce_mean(const Tensor& x, std::vector<int> axes = {}, bool keepdims = false, const std::string& name = "");
// Variance / standard deviation with `ddof` (numpy: divisor n - ddof); two-pass.
Tensor reduce_var(const Tensor& x, std::vector<int> axes = {}, bool keepdims = false, int ddof = 0,
                  const std::string& name = "");
Tensor reduce_std(const Tensor& x, std::vector<int> axes = {}, bool keepdims = false, int ddof = 0,
                  const std::string& name = "");
Tensor reduce_l1(const Tensor& x, std::vector<int> axes = {}, bool keepdims = false, const std::string& name = "");
Tensor reduce_l2(const Tensor& x, std::vector<int> axes = {}, bool keepdims = false, const std::string& name = "");
Tensor reduce_sum_square(const Tensor& x, std::vector<int> axes = {}, bool keepdims = false, const std::string& name = "");
// log(sum(exp(x))), max-shifted for stability.
Tensor reduce_logsumexp(const Tensor& x, std::vector<int> axes = {}, bool keepdims = false, const std::string& name = "");
// Index (i64) of the first extreme value along one axis.
Tensor argmax(const Tensor& x, int axis = 0, bool keepdims = false, const std::string& name = "");
Tensor argmin(const Tensor& x, int axis = 0, bool keepdims = false, const std::string& name = "");
// Inclusive (or exclusive) running sum/product along `axis`, optionally from the end.
// Written as a masked reduction (O(n^2) per line): fine for the sizes it is used at.
Tensor cumsum(const Tensor& x, int axis, bool exclusive = false, bool reverse = false, const std::string& name = "");
Tensor cumprod(const Tensor& x, int axis, bool exclusive = false, bool reverse = false, const std::string& name = "");

// ---- contractions (Contraction.cpp) ------------------------------------------
// numpy matmul semantics: 1-D operands are promoted, batch dims broadcast.
Tensor matmul(const Tensor& a, const Tensor& b, const std::string& name = "");
// x @ w^T + b, w of shape [out, in], b of shape [out] (optional: pass an undefined Tensor).
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b, const std::string& name = "");
// einsum over explicit subscripts ("bij,bjk->bik", "ii->i", "ij->"); no ellipsis.
Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands, const std::string& name = "");

// ---- convolutions (Convolution.cpp) --------------------------------------------
// N-d convolution (1, 2 or 3 spatial dims). layout "NCHW" (channels first) or
// "NHWC" (channels last) for input and output; weight is always
// [O, C/groups, k...]; bias [O] optional. groups == C == O is depthwise.
// algorithm: how a channels-first convolution is formulated: "auto" (the
// rule in Convolution.cpp), "im2col" (a copy feeding a GEMM), "channels_last"
// (2-D dense: transposed to NHWC, blocked weights) or "direct" (its own
// reduction over the input); a way to override the rule and to compare.
struct ConvParams {
  std::vector<int> stride, padding, dilation;  // per spatial dim; empty = 1 / 0 / 1
  int groups = 1;
  std::string layout = "NCHW";
  std::string algorithm = "auto";
};
Tensor conv(const std::string& op, int spatial, const Tensor& x, const Tensor& w, const Tensor& b,
            const ConvParams& params, const std::string& name = "");
Tensor conv1d(const Tensor& x, const Tensor& w, const Tensor& b, const ConvParams& params = {}, const std::string& name = "");
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b, std::array<int, 2> stride = {1, 1},
              std::array<int, 2> padding = {0, 0}, std::array<int, 2> dilation = {1, 1}, int groups = 1,
              const std::string& name = "");
Tensor conv3d(const Tensor& x, const Tensor& w, const Tensor& b, const ConvParams& params = {}, const std::string& name = "");
// Channels-last 2-D convolution: input [N, H, W, C], weight [KH, KW, C, O]
// (HWIO) or blocked [O/B, KH, KW, C, B] (each block of B output channels'
// weights contiguous, the layout oneDNN reorders to; see
// models::block_conv_weight), bias [O] optional, output [N, OH, OW, O].
// Output channels are contiguous in the output and the weights (an implicit
// GEMM over (ky, kx, c)); padding is materialized as a stage `<name>_pad`
// (DataMovement, op "pad").
Tensor conv2d_nhwc(const Tensor& x, const Tensor& w, const Tensor& b, std::array<int, 2> stride = {1, 1},
                   std::array<int, 2> padding = {0, 0}, std::array<int, 2> dilation = {1, 1}, const std::string& name = "");
// A dense 2-D convolution of channels-last activations [N, H, W, C] with
// OIHW weights [O, C, KH, KW] (as ONNX and PyTorch store them), output
// [N, OH, OW, O]: the weights reordered to blocks of 16 output channels
// (a stage computed from the weights alone: a model that holds them as
// constants reorders them once, at load) feeding conv2d_nhwc. What a
// channels-first model computes between its convolutions without
// transposing back and forth (the ONNX importer's channels-last layout).
Tensor conv2d_channels_last(const Tensor& x, const Tensor& w, const Tensor& b,
                            std::array<int, 2> stride = {1, 1}, std::array<int, 2> padding = {0, 0},
                            std::array<int, 2> dilation = {1, 1}, const std::string& name = "");
// Would conv2d's auto algorithm compute this channels-first convolution
// channels-last (transposes around a blocked conv2d_nhwc)? The one rule, for
// callers that choose a layout across several convolutions.
bool conv2d_auto_channels_last(const Tensor& x, const Tensor& w, const ConvParams& params);
// Transposed 2-D convolution (PyTorch semantics), NCHW, weight [C, O/groups, KH, KW].
Tensor conv_transpose2d(const Tensor& x, const Tensor& w, const Tensor& b, std::array<int, 2> stride = {1, 1},
                        std::array<int, 2> padding = {0, 0}, std::array<int, 2> output_padding = {0, 0},
                        std::array<int, 2> dilation = {1, 1}, int groups = 1, const std::string& name = "");

// ---- pooling (Pooling.cpp) -----------------------------------------------------
// Max / average pooling over 1-3 spatial dims of an NC... tensor. Padding is
// never selected by max; average excludes padding unless count_include_pad.
// The output has floor((in + padding + padding_end - span) / stride) + 1
// positions per dim (span = (kernel - 1) * dilation + 1); ceil_mode rounds up,
// dropping a last window that would start in the end padding (ONNX's rule).
struct PoolParams {
  std::vector<int> kernel, stride,
      padding;  // stride empty = kernel; padding (at each dim's start) empty = 0
  bool count_include_pad = false;
  std::vector<int> padding_end, dilation;  // empty = padding, 1
  bool ceil_mode = false;
  bool channels_last = false;  // x is [N, spatial..., C], and so is the output
};
Tensor max_pool(const std::string& op, int spatial, const Tensor& x, const PoolParams& p, const std::string& name = "");
Tensor avg_pool(const std::string& op, int spatial, const Tensor& x, const PoolParams& p, const std::string& name = "");
// The sum over each window (padding reads zero): the average's numerator, Lp pooling's.
Tensor pool_sum(const std::string& op, int spatial, const Tensor& x, const PoolParams& p,
                const std::string& name = "");
// (sum over each window of |x|^p)^(1/p) (NeuralNet.cpp).
Tensor lp_pool(const std::string& op, int spatial, const Tensor& x, const PoolParams& pp, double p,
               const std::string& name = "");
Tensor max_pool2d(const Tensor& x, const PoolParams& p, const std::string& name = "");
Tensor avg_pool2d(const Tensor& x, const PoolParams& p, const std::string& name = "");
// Over all dims after the first two, keeping them as size 1 (ONNX).
Tensor global_avg_pool(const Tensor& x, const std::string& name = "");
Tensor global_max_pool(const Tensor& x, const std::string& name = "");

// ---- attention (Attention.cpp) ---------------------------------------------------
// softmax(q k^T * scale + mask) v. q [..., Lq, D], k [..., Lk, D], v [..., Lk, Dv];
// batch dims broadcast. mask (optional) broadcasts to [..., Lq, Lk]: bool (false =
// masked out) or float (added). causal masks j > i. scale defaults to 1/sqrt(D).
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                                    bool causal = false, std::optional<double> scale = {},
                                    const std::string& name = "");

// ---- recurrent layers (Recurrent.cpp) ----------------------------------------------
// ONNX RNN / GRU / LSTM over x [seq, batch, features]; w [dirs, gates * hidden,
// features], r [dirs, gates * hidden, hidden], b [dirs, 2 * gates * hidden],
// initial states [dirs, batch, hidden], peepholes p [dirs, 3 * hidden]
// (lstm), sequence_lens [batch]; undefined tensors are absent inputs.
struct RecurrentInputs {
  Tensor x, w, r, b, seq_lens, h0, c0, p;
};
struct RecurrentParams {
  std::string kind;                      // rnn, gru, lstm
  std::string direction = "forward";     // forward, reverse, bidirectional
  std::vector<std::string> activations;  // lower case; empty: ONNX's defaults
  double clip = 0;                       // > 0: pre-activations clamped to [-clip, clip]
  bool linear_before_reset = false;      // gru
};
struct RecurrentResult {
  Tensor y;     // [seq, dirs, batch, hidden]
  Tensor h, c;  // the last states [dirs, batch, hidden] (c: lstm)
};
RecurrentResult recurrent(const RecurrentInputs& in, const RecurrentParams& p,
                          const std::string& name = "");

// ---- data movement (DataMovement.cpp) ---------------------------------------------
Tensor identity(const Tensor& x, const std::string& name = "");
// perm empty = reverse the dims (numpy).
Tensor transpose(const Tensor& x, std::vector<int> perm = {}, const std::string& name = "");
// One dim may be -1 (inferred), 0 copies the input dim (ONNX). Leading dims equal to
// the input's (symbolic ones included) pass through; the rest must be static.
Tensor reshape(const Tensor& x, const std::vector<int64_t>& shape, const std::string& name = "");
// [d0 * ... * d(axis-1), d(axis) * ... ] (ONNX Flatten).
Tensor flatten(const Tensor& x, int axis = 1, const std::string& name = "");
Tensor squeeze(const Tensor& x, std::vector<int> axes = {}, const std::string& name = "");
Tensor unsqueeze(const Tensor& x, std::vector<int> axes, const std::string& name = "");
Tensor broadcast_to(const Tensor& x, const Shape& shape, const std::string& name = "");
// numpy slicing x[start:end:step] per axis; ends are clamped like numpy; negative steps allowed.
Tensor slice(const Tensor& x, std::vector<int64_t> starts, std::vector<int64_t> ends, std::vector<int> axes = {},
             std::vector<int64_t> steps = {}, const std::string& name = "");
Tensor concat(const std::vector<Tensor>& xs, int axis, const std::string& name = "");
// Splits into pieces of `sizes` along axis (or `num` equal pieces when sizes is
// empty), named <name>_0, <name>_1, ...; with `only` >= 0 just that piece, named `name`.
std::vector<Tensor> split(const Tensor& x, int axis, std::vector<int64_t> sizes, int num = 0,
                          const std::string& name = "", int only = -1);
Tensor stack(const std::vector<Tensor>& xs, int axis = 0, const std::string& name = "");
// pads: [before_0, ..., before_r-1, after_0, ..., after_r-1] (ONNX); mode constant/reflect/edge.
Tensor pad(const Tensor& x, const std::vector<int64_t>& pads, const std::string& mode = "constant", double value = 0,
           const std::string& name = "");
// Data-dependent reads: indices are wrapped (negative counts from the end) and
// then clamped into range, so an out-of-range index reads the nearest edge
// element instead of faulting (Halide needs in-bounds accesses).
Tensor gather(const Tensor& x, const Tensor& indices, int axis = 0, const std::string& name = "");
Tensor gather_elements(const Tensor& x, const Tensor& indices, int axis = 0, const std::string& name = "");
// ONNX ScatterElements (torch.scatter): a copy of x with updates written at
// indices along axis; for repeated indices the last update wins. Out-of-range indices are ignored.
// reduction: "none" (the last update wins), "add", "mul", "max" or "min" (combined with x's value).
Tensor scatter(const Tensor& x, const Tensor& indices, const Tensor& updates, int axis = 0,
               const std::string& name = "", const std::string& reduction = "none");
// table [V, D], ids [...] integer -> [..., D]
Tensor embedding(const Tensor& table, const Tensor& ids, const std::string& name = "");
// numpy tile (repeats per dim, aligned to the trailing dims).
Tensor tile(const Tensor& x, const std::vector<int64_t>& repeats, const std::string& name = "");
// numpy repeat of each element `repeats` times along axis.
Tensor repeat(const Tensor& x, int64_t repeats, int axis, const std::string& name = "");
Tensor flip(const Tensor& x, std::vector<int> axes = {}, const std::string& name = "");
Tensor roll(const Tensor& x, const std::vector<int64_t>& shifts, const std::vector<int>& axes, const std::string& name = "");
// One-hot along a new last dim (or `axis`): on_value where index == position, else off_value.
Tensor one_hot(const Tensor& indices, int64_t depth, int axis = -1, double on_value = 1, double off_value = 0,
               DType dtype = DType::F32, const std::string& name = "");
// Lower / upper triangle of the last two dims (numpy tril/triu with diagonal offset k).
Tensor tril(const Tensor& x, int64_t k = 0, const std::string& name = "");
Tensor triu(const Tensor& x, int64_t k = 0, const std::string& name = "");

}  // namespace pto::ops
