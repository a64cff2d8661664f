// Elementwise operators: numpy broadcasting over any number of inputs.
#include "dsl/ops/Ops.h"

namespace pto::ops {

Tensor add(const Tensor& a, const Tensor& b, const std::string& name) {
  return map("add", {a, b}, [](const auto& x) { return x[0] + x[1]; }, name);
}
Tensor sub(const Tensor& a, const Tensor& b, const std::string& name) {
  return map("sub", {a, b}, [](const auto& x) { return x[0] - x[1]; }, name);
}
Tensor mul(const Tensor& a, const Tensor& b, const std::string& name) {
  return map("mul", {a, b}, [](const auto& x) { return x[0] * x[1]; }, name);
}
Tensor div(const Tensor& a, const Tensor& b, const std::string& name) {
  return map("div", {a, b}, [](const auto& x) { return x[0] / x[1]; }, name);
}
Tensor maximum(const Tensor& a, const Tensor& b, const std::string& name) {
  return map("maximum", {a, b}, [](const auto& x) { return max(x[0], x[1]); }, name);
}
Tensor minimum(const Tensor& a, const Tensor& b, const std::string& name) {
  return map("minimum", {a, b}, [](const auto& x) { return min(x[0], x[1]); }, name);
}
Tensor relu(const Tensor& x, const std::string& name) {
  return map("relu", {x}, [](const auto& v) { return max(v[0], cast(v[0].type(), 0)); }, name);
}

}  // namespace pto::ops
