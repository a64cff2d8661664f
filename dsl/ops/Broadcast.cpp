// Shape rules shared by the operator library: numpy broadcasting and the
// generic elementwise map every elementwise operator is built from.
#include <algorithm>

#include "dsl/ops/Ops.h"

namespace pto::ops {

Shape broadcast_shapes(const std::string& op, const Shape& a, const Shape& b) {
  const size_t r = std::max(a.size(), b.size());
  Shape out(r);
  for (size_t k = 0; k < r; ++k) {
    const bool ha = k + a.size() >= r, hb = k + b.size() >= r;
    const Dim da = ha ? a[k + a.size() - r] : Dim(1);
    const Dim db = hb ? b[k + b.size() - r] : Dim(1);
    if (da == db || db.is_one()) out[k] = da;
    else if (da.is_one()) out[k] = db;
    else
      throw ShapeError(op + ": shapes " + to_string(a) + " and " + to_string(b) +
                       " do not broadcast (dim " + std::to_string(k) + ": " + da.str() + " vs " + db.str() + ")");
  }
  return out;
}

std::vector<std::string> index_vars(size_t rank, const std::string& prefix) {
  std::vector<std::string> v;
  for (size_t k = 0; k < rank; ++k) v.push_back(prefix + std::to_string(k));
  return v;
}

std::vector<Expr> broadcast_index(const Tensor& t, const std::vector<std::string>& vars) {
  const Shape& s = t.shape();
  std::vector<Expr> idx;
  const size_t off = vars.size() - s.size();
  for (size_t k = 0; k < s.size(); ++k) idx.push_back(s[k].is_one() ? Expr(0) : var(vars[off + k]));
  return idx;
}

Tensor map(const std::string& op, const std::vector<Tensor>& inputs,
           const std::function<Expr(const std::vector<Expr>&)>& f, const std::string& name) {
  if (inputs.empty()) throw DefinitionError(op + ": needs at least one input");
  Program p = inputs[0].program();
  Shape shape = inputs[0].shape();
  for (size_t i = 1; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) throw DefinitionError(op + ": input " + std::to_string(i) + " is undefined");
    if (!inputs[i].program().same_as(p))
      throw DefinitionError(op + ": inputs '" + inputs[0].name() + "' and '" + inputs[i].name() +
                            "' belong to different programs");
    shape = broadcast_shapes(op, shape, inputs[i].shape());
  }
  const auto vars = index_vars(shape.size());
  std::vector<Expr> args;
  for (const Tensor& t : inputs) args.push_back(t(broadcast_index(t, vars)));
  return p.define(name.empty() ? p.unique_name(op) : name, vars, shape, f(args), OpKind::Elementwise, op);
}

}  // namespace pto::ops

namespace pto::ops {

std::vector<Expr> vars_of(const std::vector<std::string>& names) {
  std::vector<Expr> v;
  for (const auto& n : names) v.push_back(var(n));
  return v;
}

std::vector<int> normalize_axes(const std::string& op, const std::vector<int>& axes, int rank, bool empty_means_all) {
  std::vector<int> r;
  if (axes.empty() && empty_means_all)
    for (int a = 0; a < rank; ++a) r.push_back(a);
  for (int a : axes) {
    const int n = normalize_axis(op, a, rank);
    if (std::find(r.begin(), r.end(), n) != r.end())
      throw ShapeError(op + ": axis " + std::to_string(a) + " is given twice");
    r.push_back(n);
  }
  std::sort(r.begin(), r.end());
  return r;
}

Expr element_count(Program p, const std::string& prefix, const std::vector<Dim>& dims, DType t) {
  double n = 1;
  Expr count;
  for (const Dim& d : dims) {
    if (!d.is_symbolic()) {
      n *= static_cast<double>(d.value);
      continue;
    }
    // max over r < d of (r + 1) is d. (A sum of ones would not reference r, and
    // Halide then runs the reduction once.)
    const Tensor c = p.define_reduce(p.unique_name(prefix + "_count"), {}, {}, ReduceOp::Max, {{"r", d}},
                                     cast(t, var("r") + 1), OpKind::Reduction, "count");
    const Expr e = c(std::vector<Expr>{});
    count = count.defined() ? count * e : e;
  }
  const Expr k = make_const(n, t);
  return count.defined() ? (n == 1 ? count : count * k) : k;
}

void require_float(const std::string& op, const Tensor& x) {
  if (!is_float(x.dtype()))
    throw DTypeError(op + ": input '" + x.name() + "' must be floating point, is " + std::string(to_string(x.dtype())));
}

int64_t static_dim(const std::string& op, const Tensor& x, int axis) {
  const Dim& d = x.shape()[static_cast<size_t>(axis)];
  if (d.is_symbolic())
    throw SymbolicSizeError(op + ": dim " + std::to_string(axis) + " of '" + x.name() +
                            "' must be static, is symbolic '" + d.sym + "'");
  return d.value;
}

}  // namespace pto::ops
