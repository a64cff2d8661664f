#include "frontends/onnx/ChannelsLast.h"

#include <set>

#include "dsl/Error.h"
#include "dsl/ops/Ops.h"

namespace pto::onnx::channels_last {

int axis(int a) {
  static constexpr int kAxis[] = {0, 3, 1, 2};
  if (a < 0 || a > 3)
    throw ImportError("channels_last::axis: axis " + std::to_string(a) + " is not in 0-3");
  return kAxis[a];
}

bool elementwise(const std::string& op_type) {
  // clang-format off
  static const std::set<std::string> kOps = {
      "Abs", "Acos", "Acosh", "Add", "And", "Asin", "Asinh", "Atan", "Atanh", "Cast", "Ceil",
      "Celu", "Clip", "Cos", "Cosh", "Div", "Dropout", "Elu", "Equal", "Erf", "Exp", "Floor",
      "Gelu", "Greater", "GreaterOrEqual", "HardSigmoid", "HardSwish", "Identity", "IsNaN",
      "LeakyRelu", "Less", "LessOrEqual", "Log", "Max", "Mean", "Min", "Mish", "Mul", "Neg",
      "Not", "Or", "Pow", "PRelu", "Reciprocal", "Relu", "Round", "Selu", "Shrink", "Sigmoid",
      "Sign", "Sin", "Sinh", "Softplus", "Softsign", "Sqrt", "Sub", "Sum", "Swish", "Tan", "Tanh",
      "ThresholdedRelu", "Where", "Xor"};
  // clang-format on
  return kOps.count(op_type) > 0;
}

Constant permute(const Constant& c) {
  if (c.shape.size() > 4)
    throw ImportError("channels_last::permute: a constant of rank " +
                      std::to_string(c.shape.size()) +
                      " does not broadcast against a rank-4 value");
  if (c.numel() == 1) return c;
  std::vector<int64_t> s(4 - c.shape.size(), 1);
  s.insert(s.end(), c.shape.begin(), c.shape.end());
  Constant out;
  out.dtype = c.dtype;
  out.shape = {s[0], s[2], s[3], s[1]};
  out.data.resize(c.data.size());
  size_t k = 0;
  for (int64_t n = 0; n < s[0]; ++n)
    for (int64_t ch = 0; ch < s[1]; ++ch)
      for (int64_t h = 0; h < s[2]; ++h)
        for (int64_t w = 0; w < s[3]; ++w)
          out.data[static_cast<size_t>(((n * s[2] + h) * s[3] + w) * s[1] + ch)] = c.data[k++];
  return out;
}

Tensor from_nchw(const Tensor& nchw, const std::string& name) {
  return ops::transpose(nchw, {0, 2, 3, 1}, name);
}

Tensor to_nchw(const Tensor& nhwc, const std::string& name) {
  return ops::transpose(nhwc, {0, 3, 1, 2}, name);
}

}  // namespace pto::onnx::channels_last
