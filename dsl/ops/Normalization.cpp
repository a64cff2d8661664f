// Normalizations: softmax and log_softmax (max-subtracted, for stability),
// layer_norm and rms_norm over the last dim, batch_norm (inference, running
// statistics given), group_norm and instance_norm (statistics per sample and
// channel group), l2_normalize. Statistics are two-pass (mean, then mean of
// squared deviations), which is accurate where E[x^2] - E[x]^2 cancels.
// Rows are scaled by a per-row reciprocal (1 / sum, 1 / sqrt(var + eps)),
// one divide per row instead of one per element.
// Normalized dims may be symbolic: their size comes from element_count().
#include <cmath>

#include "dsl/ops/Ops.h"

namespace pto::ops {
namespace {

struct AxisSplit {
  std::vector<std::string> all, rest;  // all vars; vars without the axis
  Shape rest_shape;
  std::vector<Expr> at_r;  // x index with the axis replaced by rvar "r"
};

AxisSplit split_axis(const Tensor& x, int a) {
  AxisSplit s;
  s.all = index_vars(static_cast<size_t>(x.rank()));
  for (int k = 0; k < x.rank(); ++k)
    if (k != a) {
      s.rest.push_back(s.all[static_cast<size_t>(k)]);
      s.rest_shape.push_back(x.shape()[static_cast<size_t>(k)]);
    }
  s.at_r = vars_of(s.all);
  s.at_r[static_cast<size_t>(a)] = var("r");
  return s;
}

// max over `axis` and sum of exp(x - max): the two statistics of softmax / log_softmax.
std::pair<Tensor, Tensor> softmax_stats(Program& p, const std::string& out, const std::string& op,
                                        const Tensor& x, int a, const AxisSplit& s,
                                        Tensor* exp_stage) {
  const RVar rv{"r", x.shape()[static_cast<size_t>(a)]};
  const Tensor m = p.define_reduce(p.unique_name(out + "_max"), s.rest, s.rest_shape, ReduceOp::Max,
                                   {rv}, x(s.at_r), OpKind::Reduction, op);
  const Tensor e =
      p.define(p.unique_name(out + "_exp"), s.all, x.shape(),
               unary(UnOp::Exp, x(vars_of(s.all)) - m(vars_of(s.rest))), OpKind::Elementwise, op);
  const Tensor sum = p.define_reduce(p.unique_name(out + "_sum"), s.rest, s.rest_shape,
                                     ReduceOp::Sum, {rv}, e(s.at_r), OpKind::Reduction, op);
  *exp_stage = e;
  return {m, sum};
}

// 1 / sqrt(v): per row (or channel), so the element loop multiplies
// instead of dividing (a 512-bit divide costs several multiplies, and it was
// the longest part of layer_norm's normalize pass).
Expr inv_sqrt(const Expr& v) {
  return make_const(1, v.type()) / unary(UnOp::Sqrt, v);
}

void check_vector(const std::string& op, const Tensor& t, const Dim& d, const char* what) {
  if (t.defined() && (t.rank() != 1 || t.shape()[0] != d))
    throw ShapeError(op + ": " + what + " '" + t.name() + "' must have shape [" + d.str() +
                     "], got " + to_string(t.shape()));
}

void check_eps(const std::string& op, double eps) {
  if (!(eps >= 0)) throw ShapeError(op + ": eps must be >= 0, got " + std::to_string(eps));
}

// Statistics per (n, group) over the group's channels and all spatial dims;
// y = (x - mean) / sqrt(var + eps) * scale[c] + bias[c].
Tensor grouped_norm(const std::string& op, const Tensor& x, int groups, const Tensor& scale,
                    const Tensor& bias, double eps, const std::string& name) {
  require_float(op, x);
  check_eps(op, eps);
  if (x.rank() < 2)
    throw ShapeError(op + ": input '" + x.name() + "' must be [N, C, ...], got " +
                     to_string(x.shape()));
  const int64_t C = static_dim(op, x, 1);
  if (groups < 1 || C % groups)
    throw ShapeError(op + ": groups " + std::to_string(groups) + " must be >= 1 and divide the " +
                     std::to_string(C) + " channels of '" + x.name() + "'");
  check_vector(op, scale, Dim(C), "scale");
  check_vector(op, bias, Dim(C), "bias");
  Program p = x.program();
  const std::string out = name.empty() ? p.unique_name(op) : name;
  const int r = x.rank();
  const int64_t cg = C / groups;
  const auto all = index_vars(static_cast<size_t>(r));
  std::vector<RVar> rvars{{"rc", cg}};
  std::vector<Dim> counted{Dim(cg)};
  std::vector<Expr> xi{var("n"), var("g") * static_cast<int>(cg) + var("rc")};
  for (int k = 2; k < r; ++k) {
    const Dim& d = x.shape()[static_cast<size_t>(k)];
    rvars.push_back({"r" + std::to_string(k), d});
    counted.push_back(d);
    xi.push_back(var("r" + std::to_string(k)));
  }
  const DType t = x.dtype();
  const Shape stat_shape{x.shape()[0], groups};
  const Expr inv_n = make_const(1, t) / element_count(p, out, counted, t);
  // Sums scaled where they are read, as in layer_norm.
  const Tensor sum = p.define_reduce(p.unique_name(out + "_sum"), {"n", "g"}, stat_shape,
                                     ReduceOp::Sum, rvars, x(xi), OpKind::Reduction, op);
  const Expr dev = x(xi) - sum(var("n"), var("g")) * inv_n;
  const Tensor ss = p.define_reduce(p.unique_name(out + "_ss"), {"n", "g"}, stat_shape,
                                    ReduceOp::Sum, rvars, dev * dev, OpKind::Reduction, op);
  const Expr c = var(all[1]);
  const Expr g = c / static_cast<int>(cg);
  Expr y = (x(vars_of(all)) - sum(var(all[0]), g) * inv_n) *
           inv_sqrt(ss(var(all[0]), g) * inv_n + make_const(eps, t));
  if (scale.defined()) y = y * scale(c);
  if (bias.defined()) y = y + bias(c);
  return p.define(out, all, x.shape(), y, OpKind::Normalization, op);
}

}  // namespace

namespace {
// softmax and log_softmax: the max and sum-of-exp statistics along `axis`, then `finish`.
using SoftmaxFinish =
    std::function<Expr(const AxisSplit&, const Tensor& e, const Tensor& m, const Tensor& sum)>;
Tensor softmax_like(const std::string& op, const Tensor& x, int axis, const std::string& name,
                    const SoftmaxFinish& finish) {
  require_float(op, x);
  const int a = normalize_axis(op, axis, x.rank());
  Program p = x.program();
  const std::string out = name.empty() ? p.unique_name(op) : name;
  const AxisSplit s = split_axis(x, a);
  Tensor e;
  const auto [m, sum] = softmax_stats(p, out, op, x, a, s, &e);
  return p.define(out, s.all, x.shape(), finish(s, e, m, sum), OpKind::Normalization, op);
}
}  // namespace

Tensor softmax(const Tensor& x, int axis, const std::string& name) {
  return softmax_like("softmax", x, axis, name,
                      [&](const AxisSplit& s, const Tensor& e, const Tensor&, const Tensor& sum) {
                        return e(vars_of(s.all)) *
                               (make_const(1, x.dtype()) / sum(vars_of(s.rest)));
                      });
}

Tensor log_softmax(const Tensor& x, int axis, const std::string& name) {
  return softmax_like("log_softmax", x, axis, name,
                      [&](const AxisSplit& s, const Tensor&, const Tensor& m, const Tensor& sum) {
                        const auto rest = vars_of(s.rest);
                        return x(vars_of(s.all)) - m(rest) - unary(UnOp::Log, sum(rest));
                      });
}

Tensor layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps,
                  const std::string& name) {
  const std::string op = "layer_norm";
  require_float(op, x);
  const int r = x.rank();
  if (r < 1) throw ShapeError(op + ": input '" + x.name() + "' must have rank >= 1");
  const Dim d = x.shape().back();
  check_vector(op, gamma, d, "gamma");
  check_vector(op, beta, d, "beta");
  check_eps(op, eps);
  Program p = x.program();
  const std::string out = name.empty() ? p.unique_name(op) : name;
  const AxisSplit s = split_axis(x, r - 1);
  const DType t = x.dtype();
  const Expr inv_d = d.is_symbolic() ? make_const(1, t) / element_count(p, out, {d}, t)
                                     : make_const(1.0 / static_cast<double>(d.value), t);
  const RVar rv{"r", d};
  // Sums, scaled by 1/d where they are read (once per row): a sum step is one
  // add or FMA per element, where a scaled term costs a multiply more.
  const Tensor sum = p.define_reduce(p.unique_name(out + "_sum"), s.rest, s.rest_shape,
                                     ReduceOp::Sum, {rv}, x(s.at_r), OpKind::Reduction, op);
  const auto rest = vars_of(s.rest);
  const Expr mean = sum(rest) * inv_d;
  const Expr centered_r = x(s.at_r) - mean;
  const Tensor ss = p.define_reduce(p.unique_name(out + "_ss"), s.rest, s.rest_shape, ReduceOp::Sum,
                                    {rv}, centered_r * centered_r, OpKind::Reduction, op);
  Expr y = (x(vars_of(s.all)) - mean) * inv_sqrt(ss(rest) * inv_d + make_const(eps, t));
  const Expr last = var(s.all.back());
  if (gamma.defined()) y = y * gamma(last);
  if (beta.defined()) y = y + beta(last);
  return p.define(out, s.all, x.shape(), y, OpKind::Normalization, op);
}

Tensor rms_norm(const Tensor& x, const Tensor& gamma, double eps, const std::string& name) {
  const std::string op = "rms_norm";
  require_float(op, x);
  if (x.rank() < 1) throw ShapeError(op + ": input '" + x.name() + "' must have rank >= 1");
  const Dim d = x.shape().back();
  check_vector(op, gamma, d, "gamma");
  check_eps(op, eps);
  Program p = x.program();
  const std::string out = name.empty() ? p.unique_name(op) : name;
  const AxisSplit s = split_axis(x, x.rank() - 1);
  const DType t = x.dtype();
  const Expr inv_d = make_const(1, t) / element_count(p, out, {d}, t);
  // The sum of squares scaled where it is read, as in layer_norm.
  const Tensor ss = p.define_reduce(p.unique_name(out + "_ss"), s.rest, s.rest_shape, ReduceOp::Sum,
                                    {{"r", d}}, x(s.at_r) * x(s.at_r), OpKind::Reduction, op);
  Expr y = x(vars_of(s.all)) * inv_sqrt(ss(vars_of(s.rest)) * inv_d + make_const(eps, t));
  if (gamma.defined()) y = y * gamma(var(s.all.back()));
  return p.define(out, s.all, x.shape(), y, OpKind::Normalization, op);
}

Tensor batch_norm(const Tensor& x, const Tensor& scale, const Tensor& bias, const Tensor& mean,
                  const Tensor& var_, double eps, const std::string& name) {
  const std::string op = "batch_norm";
  require_float(op, x);
  check_eps(op, eps);
  if (x.rank() < 2)
    throw ShapeError(op + ": input '" + x.name() + "' must be [N, C, ...], got " +
                     to_string(x.shape()));
  const Dim c = x.shape()[1];
  for (const auto& [t, what] :
       {std::pair{&scale, "scale"}, {&bias, "bias"}, {&mean, "mean"}, {&var_, "var"}}) {
    if (!t->defined()) throw DefinitionError(op + ": " + what + " is required");
    check_vector(op, *t, c, what);
  }
  Program p = x.program();
  const auto all = index_vars(static_cast<size_t>(x.rank()));
  const Expr ch = var(all[1]);
  const Expr y =
      (x(vars_of(all)) - mean(ch)) * inv_sqrt(var_(ch) + make_const(eps, x.dtype())) * scale(ch) +
      bias(ch);
  return p.define(name.empty() ? p.unique_name(op) : name, all, x.shape(), y, OpKind::Normalization,
                  op);
}

Tensor group_norm(const Tensor& x, int groups, const Tensor& scale, const Tensor& bias, double eps,
                  const std::string& name) {
  return grouped_norm("group_norm", x, groups, scale, bias, eps, name);
}

Tensor instance_norm(const Tensor& x, const Tensor& scale, const Tensor& bias, double eps,
                     const std::string& name) {
  if (x.rank() < 2)
    throw ShapeError("instance_norm: input '" + x.name() + "' must be [N, C, ...], got " +
                     to_string(x.shape()));
  return grouped_norm("instance_norm", x, static_cast<int>(static_dim("instance_norm", x, 1)),
                      scale, bias, eps, name);
}

Tensor l2_normalize(const Tensor& x, int axis, double eps, const std::string& name) {
  const std::string op = "l2_normalize";
  require_float(op, x);
  check_eps(op, eps);
  const int a = normalize_axis(op, axis, x.rank());
  Program p = x.program();
  const std::string out = name.empty() ? p.unique_name(op) : name;
  const AxisSplit s = split_axis(x, a);
  const Tensor ss = p.define_reduce(p.unique_name(out + "_ss"), s.rest, s.rest_shape, ReduceOp::Sum,
                                    {{"r", x.shape()[static_cast<size_t>(a)]}},
                                    x(s.at_r) * x(s.at_r), OpKind::Reduction, op);
  const Expr norm = max(unary(UnOp::Sqrt, ss(vars_of(s.rest))), make_const(eps, x.dtype()));
  return p.define(out, s.all, x.shape(), x(vars_of(s.all)) * (make_const(1, x.dtype()) / norm),
                  OpKind::Normalization, op);
}

}  // namespace pto::ops
