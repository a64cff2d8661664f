// The list of operator types: what `pto ops` prints and tests iterate over.
// Add a row here for every new operator type (and an entry in Call.cpp; a
// test checks that both lists name the same operators).
#include <algorithm>

#include "dsl/ops/Ops.h"

namespace pto::ops {

const std::vector<OpInfo>& registry() {
  static const std::vector<OpInfo> ops = [] {
    constexpr OpKind E = OpKind::Elementwise, R = OpKind::Reduction, C = OpKind::Contraction,
                     V = OpKind::Convolution, P = OpKind::Pooling, N = OpKind::Normalization, D = OpKind::DataMovement;
    std::vector<OpInfo> v = {
        // unary
        {"abs", E, "|x|"}, {"neg", E, "-x"}, {"exp", E, "e^x"}, {"expm1", E, "e^x - 1, accurate near 0"},
        {"log", E, "natural log"}, {"log1p", E, "log(1 + x), accurate near 0"}, {"log2", E, "base-2 log"},
        {"log10", E, "base-10 log"}, {"sqrt", E, "square root"}, {"rsqrt", E, "1 / sqrt(x)"},
        {"reciprocal", E, "1 / x"}, {"square", E, "x * x"}, {"sin", E, "sine"}, {"cos", E, "cosine"},
        {"tan", E, "tangent"}, {"asin", E, "arc sine"}, {"acos", E, "arc cosine"}, {"atan", E, "arc tangent"},
        {"sinh", E, "hyperbolic sine"}, {"cosh", E, "hyperbolic cosine"}, {"tanh", E, "hyperbolic tangent"},
        {"asinh", E, "inverse hyperbolic sine"}, {"acosh", E, "inverse hyperbolic cosine"},
        {"atanh", E, "inverse hyperbolic tangent"}, {"erf", E, "error function"},
        {"sigmoid", E, "1 / (1 + e^-x)"}, {"relu", E, "max(x, 0)"}, {"relu6", E, "min(max(x, 0), 6)"},
        {"leaky_relu", E, "x if x >= 0 else alpha x (alpha)"}, {"elu", E, "x if x > 0 else alpha (e^x - 1) (alpha)"},
        {"selu", E, "scaled elu with the self-normalizing constants"},
        {"celu", E, "max(0, x) + min(0, alpha (e^(x/alpha) - 1)) (alpha)"}, {"silu", E, "x sigmoid(x) (swish)"},
        {"softplus", E, "log(1 + e^x), overflow-free"}, {"softsign", E, "x / (1 + |x|)"},
        {"mish", E, "x tanh(softplus(x))"}, {"hard_sigmoid", E, "clip(alpha x + beta, 0, 1) (alpha, beta)"},
        {"hard_swish", E, "x clip(x / 6 + 1/2, 0, 1)"}, {"gelu", E, "0.5 x (1 + erf(x / sqrt 2))"},
        {"gelu_tanh", E, "tanh approximation of gelu"}, {"floor", E, "round down"}, {"ceil", E, "round up"},
        {"round", E, "round half to even"}, {"trunc", E, "round toward zero"}, {"sign", E, "-1, 0 or 1 (nan stays nan)"},
        {"isnan", E, "x is NaN (bool)"}, {"isinf", E, "x is +-inf (bool)"}, {"logical_not", E, "!x (bool)"},
        {"clip", E, "min(max(x, min), max), either bound optional (min, max)"},
        {"cast", E, "convert to dtype (dtype): f64 f32 f16 bf16 i8 i32 i64 bool ..."},
        // binary / ternary
        {"add", E, "a + b with numpy broadcasting"}, {"sub", E, "a - b with numpy broadcasting"},
        {"mul", E, "a * b with numpy broadcasting"}, {"div", E, "a / b with numpy broadcasting"},
        {"pow", E, "a ^ b"}, {"mod", E, "numpy remainder: sign of the divisor"},
        {"fmod", E, "C fmod: sign of the dividend"}, {"floor_divide", E, "floor(a / b) (numpy //)"},
        {"maximum", E, "elementwise max with broadcasting"}, {"minimum", E, "elementwise min with broadcasting"},
        {"atan2", E, "atan2(a, b)"}, {"squared_difference", E, "(a - b)^2"},
        {"prelu", E, "x if x >= 0 else slope x (slope broadcast)"},
        {"equal", E, "a == b (bool)"}, {"not_equal", E, "a != b (bool)"}, {"less", E, "a < b (bool)"},
        {"less_equal", E, "a <= b (bool)"}, {"greater", E, "a > b (bool)"}, {"greater_equal", E, "a >= b (bool)"},
        {"logical_and", E, "a && b (bool)"}, {"logical_or", E, "a || b (bool)"}, {"logical_xor", E, "a != b as bools"},
        {"where", E, "cond ? a : b with three-way broadcasting"},
        // reductions
        {"reduce_sum", R, "sum over axes, keepdims"}, {"reduce_max", R, "max over axes, keepdims"},
        {"reduce_min", R, "min over axes, keepdims"}, {"reduce_prod", R, "product over axes, keepdims"},
        {"reduce_mean", R, "mean over axes (symbolic ones too), keepdims"},
        {"reduce_var", R, "variance over axes, two-pass (ddof)"}, {"reduce_std", R, "standard deviation (ddof)"},
        {"reduce_l1", R, "sum of |x| over axes"}, {"reduce_l2", R, "sqrt of the sum of squares over axes"},
        {"reduce_sum_square", R, "sum of x^2 over axes"}, {"reduce_logsumexp", R, "log sum exp over axes, max-shifted"},
        {"argmax", R, "index of the first maximum along axis (i64)"},
        {"argmin", R, "index of the first minimum along axis (i64)"},
        {"cumsum", R, "running sum along axis (exclusive, reverse)"},
        {"cumprod", R, "running product along axis (exclusive, reverse)"},
        // contractions, convolutions
        {"matmul", C, "numpy matmul: batch broadcasting, 1-D promotion"}, {"linear", C, "x @ W^T + b"},
        {"einsum", C, "Einstein summation over explicit subscripts (equation)"},
        {"conv1d", V, "1-D convolution NCW/NWC: stride, padding, dilation, groups"},
        {"conv2d", V, "2-D convolution NCHW/NHWC: stride, padding, dilation, groups (depthwise)"},
        {"conv3d", V, "3-D convolution NCDHW/NDHWC: stride, padding, dilation, groups"},
        {"conv2d_nhwc", V, "2-D convolution, channels last: input NHWC, weight HWIO; stride, padding, dilation"},
        {"conv_transpose2d", V, "transposed 2-D convolution: stride, padding, output_padding, dilation, groups"},
        // pooling
        {"max_pool1d", P, "max over 1-D windows (kernel, stride, padding)"},
        {"max_pool2d", P, "max over 2-D windows (kernel, stride, padding)"},
        {"max_pool3d", P, "max over 3-D windows (kernel, stride, padding)"},
        {"avg_pool1d", P, "average over 1-D windows (count_include_pad)"},
        {"avg_pool2d", P, "average over 2-D windows (count_include_pad)"},
        {"avg_pool3d", P, "average over 3-D windows (count_include_pad)"},
        {"global_avg_pool", P, "mean over all spatial dims, kept as size 1"},
        {"global_max_pool", P, "max over all spatial dims, kept as size 1"},
        // normalization, attention
        {"softmax", N, "exp(x - max) / sum, along an axis"}, {"log_softmax", N, "x - max - log(sum exp(x - max))"},
        {"layer_norm", N, "(x - mean) / sqrt(var + eps) * gamma + beta, last dim"},
        {"rms_norm", N, "x / sqrt(mean(x^2) + eps) * gamma, last dim"},
        {"batch_norm", N, "inference batch norm with running mean/var, channel dim 1"},
        {"group_norm", N, "per-sample statistics over channel groups and space (groups)"},
        {"instance_norm", N, "per-sample, per-channel statistics over space"},
        {"l2_normalize", N, "x / max(||x||_2, eps) along an axis"},
        {"scaled_dot_product_attention", N, "softmax(q k^T scale + mask) v, optional causal / additive / bool mask"},
        // data movement
        {"identity", D, "copy"}, {"transpose", D, "permute dims (perm)"},
        {"reshape", D, "new shape, -1 inferred, 0 copies (shape)"}, {"flatten", D, "to 2-D at axis (ONNX)"},
        {"squeeze", D, "drop size-1 dims (axes)"}, {"unsqueeze", D, "insert size-1 dims (axes)"},
        {"broadcast_to", D, "numpy broadcast to shape"}, {"slice", D, "numpy slicing with steps (starts, ends, axes, steps)"},
        {"concat", D, "join along an axis"}, {"split", D, "pieces along an axis (sizes or num; index picks one)"},
        {"stack", D, "join along a new axis"}, {"pad", D, "constant / reflect / edge padding (pads, mode, value)"},
        {"gather", D, "take along an axis by an index tensor (ONNX Gather)"},
        {"gather_elements", D, "per-element gather along an axis (ONNX GatherElements)"},
        {"scatter", D, "per-element scatter along an axis, last write wins (ONNX ScatterElements)"},
        {"embedding", D, "rows of a [vocab, dim] table by id"}, {"tile", D, "numpy tile (repeats)"},
        {"repeat", D, "numpy repeat along an axis (repeats, axis)"}, {"flip", D, "reverse along axes"},
        {"roll", D, "cyclic shift along axes (shifts, axes)"},
        {"one_hot", D, "one-hot encoding along a new axis (depth, on_value, off_value, dtype)"},
        {"tril", D, "lower triangle of the last two dims (k)"}, {"triu", D, "upper triangle of the last two dims (k)"},
    };
    std::sort(v.begin(), v.end(), [](const OpInfo& a, const OpInfo& b) { return a.name < b.name; });
    return v;
  }();
  return ops;
}

}  // namespace pto::ops
