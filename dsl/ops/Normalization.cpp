// Normalizations and the activations that need more than one stage:
// softmax (max-subtracted, for stability), layer_norm (two-pass mean/variance)
// and gelu.
#include <cmath>

#include "dsl/ops/Ops.h"

namespace pto::ops {
namespace {
std::vector<Expr> vars_of(const std::vector<std::string>& names) {
  std::vector<Expr> v;
  for (const auto& n : names) v.push_back(var(n));
  return v;
}
}  // namespace

Tensor gelu(const Tensor& x, bool tanh_approximation, const std::string& name) {
  const std::string op = tanh_approximation ? "gelu_tanh" : "gelu";
  return map(op, {x}, [&](const auto& v) {
    const Expr& a = v[0];
    if (tanh_approximation) {
      const double c = std::sqrt(2.0 / M_PI);
      return make_const(0.5, a.type()) * a *
             (make_const(1, a.type()) + unary(UnOp::Tanh, make_const(c, a.type()) * (a + make_const(0.044715, a.type()) * a * a * a)));
    }
    return make_const(0.5, a.type()) * a * (make_const(1, a.type()) + unary(UnOp::Erf, a * make_const(M_SQRT1_2, a.type())));
  }, name);
}

Tensor softmax(const Tensor& x, int axis, const std::string& name) {
  if (!is_float(x.dtype())) throw DTypeError("softmax: input '" + x.name() + "' must be floating point, is " + std::string(to_string(x.dtype())));
  const int r = x.rank();
  const int a = normalize_axis("softmax", axis, r);
  Program p = x.program();
  const std::string out = name.empty() ? p.unique_name("softmax") : name;
  const auto all = index_vars(static_cast<size_t>(r));
  std::vector<std::string> rest;
  Shape rest_shape;
  for (int k = 0; k < r; ++k)
    if (k != a) {
      rest.push_back(all[static_cast<size_t>(k)]);
      rest_shape.push_back(x.shape()[static_cast<size_t>(k)]);
    }
  std::vector<Expr> xr = vars_of(all);
  xr[static_cast<size_t>(a)] = var("r");
  const RVar rv{"r", x.shape()[static_cast<size_t>(a)]};
  const Tensor m = p.define_reduce(p.unique_name(out + "_max"), rest, rest_shape, ReduceOp::Max, {rv}, x(xr),
                                   OpKind::Reduction, "softmax");
  const Tensor e = p.define(p.unique_name(out + "_exp"), all, x.shape(), unary(UnOp::Exp, x(vars_of(all)) - m(vars_of(rest))),
                            OpKind::Elementwise, "softmax");
  const Tensor s = p.define_reduce(p.unique_name(out + "_sum"), rest, rest_shape, ReduceOp::Sum, {rv}, e(xr),
                                   OpKind::Reduction, "softmax");
  return p.define(out, all, x.shape(), e(vars_of(all)) / s(vars_of(rest)), OpKind::Normalization, "softmax");
}

Tensor layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps, const std::string& name) {
  if (!is_float(x.dtype())) throw DTypeError("layer_norm: input '" + x.name() + "' must be floating point");
  const int r = x.rank();
  if (r < 1) throw ShapeError("layer_norm: input '" + x.name() + "' must have rank >= 1");
  const Dim d = x.shape().back();
  if (d.is_symbolic()) throw ShapeError("layer_norm: the normalized dim of '" + x.name() + "' must be static, is '" + d.sym + "'");
  for (const Tensor* t : {&gamma, &beta})
    if (t->defined() && (t->rank() != 1 || t->shape()[0] != d))
      throw ShapeError("layer_norm: '" + t->name() + "' must have shape [" + d.str() + "], got " + to_string(t->shape()));
  if (eps < 0) throw ShapeError("layer_norm: eps must be >= 0, got " + std::to_string(eps));
  Program p = x.program();
  const std::string out = name.empty() ? p.unique_name("layer_norm") : name;
  const auto all = index_vars(static_cast<size_t>(r));
  const std::vector<std::string> rest(all.begin(), all.end() - 1);
  const Shape rest_shape(x.shape().begin(), x.shape().end() - 1);
  std::vector<Expr> xr = vars_of(all);
  xr.back() = var("r");
  const DType t = x.dtype();
  const Expr inv_d = make_const(1.0 / static_cast<double>(d.value), t);
  const RVar rv{"r", d};
  const Tensor mean = p.define_reduce(p.unique_name(out + "_mean"), rest, rest_shape, ReduceOp::Sum, {rv},
                                      x(xr) * inv_d, OpKind::Reduction, "layer_norm");
  const Expr centered_r = x(xr) - mean(vars_of(rest));
  const Tensor var_ = p.define_reduce(p.unique_name(out + "_var"), rest, rest_shape, ReduceOp::Sum, {rv},
                                      centered_r * centered_r * inv_d, OpKind::Reduction, "layer_norm");
  Expr y = (x(vars_of(all)) - mean(vars_of(rest))) /
           unary(UnOp::Sqrt, var_(vars_of(rest)) + make_const(eps, t));
  const Expr last = var(all.back());
  if (gamma.defined()) y = y * gamma(last);
  if (beta.defined()) y = y + beta(last);
  return p.define(out, all, x.shape(), y, OpKind::Normalization, "layer_norm");
}

}  // namespace pto::ops
