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
