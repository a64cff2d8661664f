// Reductions over any set of axes, with keepdims, and mean.
#include <algorithm>
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

namespace {
struct Plan {
  Shape out;
  std::vector<std::string> vars;   // output vars
  std::vector<RVar> rvars;
  std::vector<Expr> index;         // input index in terms of vars and rvars
};

Plan plan(const std::string& op, const Tensor& x, std::vector<int> axes, bool keepdims) {
  const int r = x.rank();
  std::set<int> red;
  if (axes.empty())
    for (int a = 0; a < r; ++a) red.insert(a);
  for (int a : axes)
    if (!red.insert(normalize_axis(op, a, r)).second && !axes.empty())
      throw ShapeError(op + ": axis " + std::to_string(a) + " is given twice");
  Plan p;
  for (int a = 0; a < r; ++a) {
    const Dim& d = x.shape()[static_cast<size_t>(a)];
    if (red.count(a)) {
      const std::string rv = "r" + std::to_string(a);
      p.rvars.push_back({rv, d});
      p.index.push_back(var(rv));
      if (keepdims) {
        p.out.push_back(1);
        p.vars.push_back("i" + std::to_string(a));
      }
    } else {
      const std::string v = "i" + std::to_string(a);
      p.out.push_back(d);
      p.vars.push_back(v);
      p.index.push_back(var(v));
    }
  }
  return p;
}
}  // namespace

Tensor reduce(const std::string& op, ReduceOp r, const Tensor& x, std::vector<int> axes, bool keepdims,
              const std::string& name) {
  const Plan pl = plan(op, x, std::move(axes), keepdims);
  Program p = x.program();
  return p.define_reduce(name.empty() ? p.unique_name(op) : name, pl.vars, pl.out, r, pl.rvars, x(pl.index),
                         OpKind::Reduction, op);
}

Tensor reduce_sum(const Tensor& x, std::vector<int> axes, bool keepdims, const std::string& name) {
  return reduce("reduce_sum", ReduceOp::Sum, x, std::move(axes), keepdims, name);
}
Tensor reduce_max(const Tensor& x, std::vector<int> axes, bool keepdims, const std::string& name) {
  return reduce("reduce_max", ReduceOp::Max, x, std::move(axes), keepdims, name);
}
Tensor reduce_mean(const Tensor& x, std::vector<int> axes, bool keepdims, const std::string& name) {
  Program p = x.program();
  const std::string out = name.empty() ? p.unique_name("reduce_mean") : name;
  const Plan pl = plan("reduce_mean", x, axes, keepdims);
  Expr count = Expr(1.0);
  bool symbolic = false;
  double n = 1;
  for (const RVar& rv : pl.rvars) {
    if (rv.extent.is_symbolic()) symbolic = true;
    else n *= static_cast<double>(rv.extent.value);
  }
  if (symbolic) throw ShapeError("reduce_mean: reducing a symbolic dim is not supported yet; use reduce_sum and divide");
  const Tensor s = reduce("reduce_mean", ReduceOp::Sum, x, std::move(axes), keepdims, p.unique_name(out + "_sum"));
  std::vector<Expr> idx;
  for (const auto& v : pl.vars) idx.push_back(var(v));
  return p.define(out, pl.vars, pl.out, s(idx) / make_const(n, s.dtype()), OpKind::Reduction, "reduce_mean");
}

}  // namespace pto::ops
