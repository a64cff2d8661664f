// The list of operator types: what `pto ops` prints and tests iterate over.
// Add a row here for every new operator type.
#include <algorithm>

#include "dsl/ops/Ops.h"

namespace pto::ops {

const std::vector<OpInfo>& registry() {
  static const std::vector<OpInfo> ops = [] {
    std::vector<OpInfo> v = {
        {"add", OpKind::Elementwise, "a + b with numpy broadcasting"},
        {"sub", OpKind::Elementwise, "a - b with numpy broadcasting"},
        {"mul", OpKind::Elementwise, "a * b with numpy broadcasting"},
        {"div", OpKind::Elementwise, "a / b with numpy broadcasting"},
        {"maximum", OpKind::Elementwise, "elementwise max with broadcasting"},
        {"minimum", OpKind::Elementwise, "elementwise min with broadcasting"},
        {"relu", OpKind::Elementwise, "max(x, 0)"},
        {"matmul", OpKind::Contraction, "numpy matmul: batch broadcasting, 1-D promotion"},
        {"linear", OpKind::Contraction, "x @ W^T + b"},
        {"gelu", OpKind::Elementwise, "0.5 x (1 + erf(x / sqrt 2))"},
        {"gelu_tanh", OpKind::Elementwise, "tanh approximation of gelu"},
        {"softmax", OpKind::Normalization, "exp(x - max) / sum, along an axis"},
        {"layer_norm", OpKind::Normalization, "(x - mean) / sqrt(var + eps) * gamma + beta, last dim"},
        {"reduce_sum", OpKind::Reduction, "sum over axes, keepdims"},
        {"reduce_max", OpKind::Reduction, "max over axes, keepdims"},
        {"reduce_mean", OpKind::Reduction, "mean over axes, keepdims"},
        {"conv2d", OpKind::Convolution, "NCHW 2-D convolution: stride, padding, dilation, groups"},
    };
    std::sort(v.begin(), v.end(), [](const OpInfo& a, const OpInfo& b) { return a.name < b.name; });
    return v;
  }();
  return ops;
}

}  // namespace pto::ops
