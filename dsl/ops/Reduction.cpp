// Reductions over any set of axes, with keepdims: sum, prod, min, max, mean,
// var/std (two-pass, numpy ddof), l1/l2 norms, logsumexp (max-shifted),
// argmin/argmax, and cumulative sum/product. Every reduction is a stage-level
// reduction (define_reduce), so schedules can tile and reorder it. Symbolic
// reduced dims are supported: counts come from element_count().
#include <algorithm>
#include <cmath>
#include <set>

#include "dsl/ops/Ops.h"

namespace pto::ops {

int normalize_axis(const std::string& op, int axis, int rank) {
  const int a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank)
    throw ShapeError(op + ": axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank) +
                     " (valid: " + std::to_string(-rank) + " .. " + std::to_string(rank - 1) + ")");
  return a;
}

double reduction_identity(ReduceOp op, DType t) {
  const double lowest = is_float(t)      ? -INFINITY
                        : is_unsigned(t) ? 0
                                         : -std::ldexp(1.0, bits(t) - 1);
  const double highest =
      is_float(t) ? INFINITY : std::ldexp(1.0, bits(t) - (is_unsigned(t) ? 0 : 1)) - 1;
  return op == ReduceOp::Sum    ? 0
         : op == ReduceOp::Prod ? 1
         : op == ReduceOp::Max  ? lowest
                                : highest;
}

namespace {
struct Plan {
  Shape out;
  std::vector<std::string> vars;   // output vars
  std::vector<RVar> rvars;
  std::vector<Expr> index;         // input index in terms of vars and rvars
  std::vector<Expr> bcast;         // index of the (keepdims) result at an input position
  std::vector<Dim> reduced;        // extents of the reduced dims
};

Plan plan(const std::string& op, const Tensor& x, const std::vector<int>& axes, bool keepdims) {
  const int r = x.rank();
  const std::vector<int> red = normalize_axes(op, axes, r);
  Plan p;
  for (int a = 0; a < r; ++a) {
    const Dim& d = x.shape()[static_cast<size_t>(a)];
    const std::string v = "i" + std::to_string(a);
    if (std::count(red.begin(), red.end(), a)) {
      const std::string rv = "r" + std::to_string(a);
      p.rvars.push_back({rv, d});
      p.index.push_back(var(rv));
      p.reduced.push_back(d);
      if (keepdims) {
        p.out.push_back(1);
        p.vars.push_back(v);
      }
    } else {
      p.out.push_back(d);
      p.vars.push_back(v);
      p.index.push_back(var(v));
    }
  }
  return p;
}

std::string out_name(Program& p, const std::string& name, const std::string& op) {
  return name.empty() ? p.unique_name(op) : name;
}

// The program and output name of a reduction that needs a float input.
struct Output {
  Program p;
  std::string out;
};
Output float_reduction(const std::string& op, const Tensor& x, const std::string& name) {
  require_float(op, x);
  Program p = x.program();
  return {p, out_name(p, name, op)};
}

// A stage over the plan's output vars with value `f(stage(vars))`.
Tensor finish(Program& p, const std::string& name, const Plan& pl, const std::string& op, const Expr& value) {
  return p.define(name, pl.vars, pl.out, value, OpKind::Reduction, op);
}

// sum over axes of f(x) as a helper stage (or as the result when `name` is final).
Tensor sum_of(Program& p, const std::string& name, const Plan& pl, const std::string& op, const Expr& body) {
  return p.define_reduce(name, pl.vars, pl.out, ReduceOp::Sum, pl.rvars, body, OpKind::Reduction, op);
}

// The mean of x over the plan's axes, as a helper stage (kept dims for broadcasting back).
Tensor mean_stage(Program& p, const std::string& prefix, const Tensor& x, const std::vector<int>& axes,
                  const std::string& op, Plan* kept_plan) {
  *kept_plan = plan(op, x, axes, true);
  const Tensor s = sum_of(p, p.unique_name(prefix + "_sum"), *kept_plan, op, x(kept_plan->index));
  const Expr n = element_count(p, prefix, kept_plan->reduced, s.dtype());
  return finish(p, p.unique_name(prefix + "_mean"), *kept_plan, op, s(vars_of(kept_plan->vars)) / n);
}

// The index of a keepdims result (e.g. a mean) read from a stage whose
// non-reduced dims are the vars i<a>: reduced dims read at 0.
std::vector<Expr> kept_index(const Plan& pl, int rank) {
  std::vector<Expr> idx;
  for (int a = 0; a < rank; ++a) {
    const std::string rv = "r" + std::to_string(a);
    const bool reduced = std::any_of(pl.rvars.begin(), pl.rvars.end(), [&](const RVar& r) { return r.name == rv; });
    idx.push_back(reduced ? Expr(0) : var("i" + std::to_string(a)));
  }
  return idx;
}

Tensor cumulative(const std::string& op, ReduceOp r, const Tensor& x, int axis, bool exclusive, bool reverse,
                  const std::string& name) {
  const int a = normalize_axis(op, axis, x.rank());
  Program p = x.program();
  const auto vars = index_vars(static_cast<size_t>(x.rank()));
  std::vector<Expr> idx = vars_of(vars);
  idx[static_cast<size_t>(a)] = var("r");
  const Expr j = var(vars[static_cast<size_t>(a)]), k = var("r");
  // Position r contributes to output j when it is at or before j in scan order.
  Expr in_scan = reverse ? (exclusive ? k > j : k >= j) : (exclusive ? k < j : k <= j);
  const Expr neutral = make_const(r == ReduceOp::Sum ? 0 : 1, x.dtype());
  return p.define_reduce(out_name(p, name, op), vars, x.shape(), r, {{"r", x.shape()[static_cast<size_t>(a)]}},
                         select(in_scan, x(idx), neutral), OpKind::Reduction, op);
}

}  // namespace

Tensor reduce(const std::string& op, ReduceOp r, const Tensor& x, std::vector<int> axes, bool keepdims,
              const std::string& name) {
  const Plan pl = plan(op, x, axes, keepdims);
  Program p = x.program();
  return p.define_reduce(out_name(p, name, op), pl.vars, pl.out, r, pl.rvars, x(pl.index), OpKind::Reduction, op);
}

Tensor reduce_sum(const Tensor& x, std::vector<int> axes, bool keepdims, const std::string& name) {
  return reduce("reduce_sum", ReduceOp::Sum, x, std::move(axes), keepdims, name);
}
Tensor reduce_max(const Tensor& x, std::vector<int> axes, bool keepdims, const std::string& name) {
  return reduce("reduce_max", ReduceOp::Max, x, std::move(axes), keepdims, name);
}
Tensor reduce_min(const Tensor& x, std::vector<int> axes, bool keepdims, const std::string& name) {
  return reduce("reduce_min", ReduceOp::Min, x, std::move(axes), keepdims, name);
}
Tensor reduce_prod(const Tensor& x, std::vector<int> axes, bool keepdims, const std::string& name) {
  return reduce("reduce_prod", ReduceOp::Prod, x, std::move(axes), keepdims, name);
}

Tensor reduce_mean(const Tensor& x, std::vector<int> axes, bool keepdims, const std::string& name) {
  const std::string op = "reduce_mean";
  auto [p, out] = float_reduction(op, x, name);
  const Plan pl = plan(op, x, axes, keepdims);
  const Tensor s = sum_of(p, p.unique_name(out + "_sum"), pl, op, x(pl.index));
  return finish(p, out, pl, op, s(vars_of(pl.vars)) / element_count(p, out, pl.reduced, x.dtype()));
}

Tensor reduce_var(const Tensor& x, std::vector<int> axes, bool keepdims, int ddof, const std::string& name) {
  const std::string op = "reduce_var";
  auto [p, out] = float_reduction(op, x, name);
  if (ddof < 0) throw ShapeError(op + ": ddof " + std::to_string(ddof) + " must be >= 0");
  Plan kept;
  const Tensor mean = mean_stage(p, out, x, axes, op, &kept);
  const Plan pl = plan(op, x, axes, keepdims);
  // Two passes: sum of squared deviations from the mean, then divide by n - ddof.
  const Expr d = x(pl.index) - mean(kept_index(pl, x.rank()));
  const Tensor ss = sum_of(p, p.unique_name(out + "_ss"), pl, op, d * d);
  const Expr n = element_count(p, out, pl.reduced, x.dtype());
  return finish(p, out, pl, op, ss(vars_of(pl.vars)) / (n - make_const(ddof, x.dtype())));
}

Tensor reduce_std(const Tensor& x, std::vector<int> axes, bool keepdims, int ddof, const std::string& name) {
  Program p = x.program();
  const std::string out = out_name(p, name, "reduce_std");
  const Tensor v = reduce_var(x, std::move(axes), keepdims, ddof, p.unique_name(out + "_var"));
  const auto vars = index_vars(static_cast<size_t>(v.rank()));
  return p.define(out, vars, v.shape(), unary(UnOp::Sqrt, v(vars_of(vars))), OpKind::Reduction, "reduce_std");
}

Tensor reduce_l1(const Tensor& x, std::vector<int> axes, bool keepdims, const std::string& name) {
  const Plan pl = plan("reduce_l1", x, axes, keepdims);
  Program p = x.program();
  return sum_of(p, out_name(p, name, "reduce_l1"), pl, "reduce_l1", unary(UnOp::Abs, x(pl.index)));
}

Tensor reduce_sum_square(const Tensor& x, std::vector<int> axes, bool keepdims, const std::string& name) {
  const Plan pl = plan("reduce_sum_square", x, axes, keepdims);
  Program p = x.program();
  const Expr v = x(pl.index);
  return sum_of(p, out_name(p, name, "reduce_sum_square"), pl, "reduce_sum_square", v * v);
}

Tensor reduce_l2(const Tensor& x, std::vector<int> axes, bool keepdims, const std::string& name) {
  const std::string op = "reduce_l2";
  auto [p, out] = float_reduction(op, x, name);
  const Plan pl = plan(op, x, axes, keepdims);
  const Expr v = x(pl.index);
  const Tensor ss = sum_of(p, p.unique_name(out + "_ss"), pl, op, v * v);
  return finish(p, out, pl, op, unary(UnOp::Sqrt, ss(vars_of(pl.vars))));
}

Tensor reduce_logsumexp(const Tensor& x, std::vector<int> axes, bool keepdims, const std::string& name) {
  const std::string op = "reduce_logsumexp";
  auto [p, out] = float_reduction(op, x, name);
  const Plan kept = plan(op, x, axes, true);
  const Tensor m = p.define_reduce(p.unique_name(out + "_max"), kept.vars, kept.out, ReduceOp::Max, kept.rvars,
                                   x(kept.index), OpKind::Reduction, op);
  const Plan pl = plan(op, x, axes, keepdims);
  const Expr mk = m(kept_index(pl, x.rank()));
  // A row that is all -inf has max -inf; shifting by 0 there gives log(0) = -inf, not NaN.
  const Expr shift = select(unary(UnOp::IsInf, mk), make_const(0, x.dtype()), mk);
  const Tensor s = sum_of(p, p.unique_name(out + "_sum"), pl, op, unary(UnOp::Exp, x(pl.index) - shift));
  return finish(p, out, pl, op, unary(UnOp::Log, s(vars_of(pl.vars))) + shift);
}

Tensor argmax(const Tensor& x, int axis, bool keepdims, const std::string& name) {
  const int a = normalize_axis("argmax", axis, x.rank());
  return reduce("argmax", ReduceOp::ArgMax, x, {a}, keepdims, name);
}
Tensor argmin(const Tensor& x, int axis, bool keepdims, const std::string& name) {
  const int a = normalize_axis("argmin", axis, x.rank());
  return reduce("argmin", ReduceOp::ArgMin, x, {a}, keepdims, name);
}

Tensor cumsum(const Tensor& x, int axis, bool exclusive, bool reverse, const std::string& name) {
  return cumulative("cumsum", ReduceOp::Sum, x, axis, exclusive, reverse, name);
}
Tensor cumprod(const Tensor& x, int axis, bool exclusive, bool reverse, const std::string& name) {
  return cumulative("cumprod", ReduceOp::Prod, x, axis, exclusive, reverse, name);
}

}  // namespace pto::ops
