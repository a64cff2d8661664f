// Pooling over the spatial dims of channels-first tensors [N, C, spatial...]:
// max and average over 1-3 spatial dims with stride and padding, and global
// average / max (ONNX GlobalAveragePool: spatial dims kept as size 1).
// Padded positions never win a max; an average divides by the number of
// in-image positions unless count_include_pad (then by the window size).
#include <limits>

#include "dsl/ops/Ops.h"

namespace pto::ops {
namespace {

struct Window {
  std::vector<std::string> vars;
  Shape shape;
  std::vector<RVar> rvars;
  std::vector<Expr> index;  // clamped input index
  Expr inside;              // undefined when there is no padding
  Expr count;               // in-image positions of the window (i32)
  int64_t window = 1;
};

Window window(const std::string& op, int spatial, const Tensor& x, const PoolParams& pp) {
  const int r = spatial + 2;
  if (x.rank() != r)
    throw ShapeError(op + ": input '" + x.name() + "' must be [N, C, " + std::to_string(spatial) +
                     " spatial dims] (rank " + std::to_string(r) + "), got " + to_string(x.shape()));
  auto per = [&](const char* what, std::vector<int> v, const std::vector<int>& def, int min) {
    if (v.empty()) v = def;
    if (v.size() == 1 && spatial > 1) v.assign(static_cast<size_t>(spatial), v[0]);
    if (static_cast<int>(v.size()) != spatial)
      throw ShapeError(op + ": " + what + " needs " + std::to_string(spatial) + " values, got " + std::to_string(v.size()));
    for (int k : v)
      if (k < min) throw ShapeError(op + ": " + what + " " + std::to_string(k) + " must be >= " + std::to_string(min));
    return v;
  };
  const auto kernel = per("kernel", pp.kernel, {}, 1);
  const auto stride = per("stride", pp.stride, kernel, 1);
  const auto padding = per("padding", pp.padding, std::vector<int>(static_cast<size_t>(spatial), 0), 0);
  Window w;
  w.vars = {"n", "c"};
  w.shape = {x.shape()[0], x.shape()[1]};
  w.index = {var("n"), var("c")};
  Expr count = Expr(1);
  for (int s = 0; s < spatial; ++s) {
    if (padding[s] * 2 > kernel[s])
      throw ShapeError(op + ": padding " + std::to_string(padding[s]) + " must be at most half the kernel " +
                       std::to_string(kernel[s]));
    const int64_t in = static_dim(op, x, 2 + s);
    const int64_t out = (in + 2 * padding[s] - kernel[s]) / stride[s] + 1;
    if (out < 1)
      throw ShapeError(op + ": kernel " + std::to_string(kernel[s]) + " is larger than the padded input " +
                       std::to_string(in + 2 * padding[s]) + " in spatial dim " + std::to_string(s));
    const std::string v = "s" + std::to_string(s), rv = "k" + std::to_string(s);
    w.vars.push_back(v);
    w.shape.push_back(out);
    w.rvars.push_back({rv, kernel[s]});
    w.window *= kernel[s];
    const Expr start = var(v) * stride[s] - padding[s];
    const Expr pos = start + var(rv);
    w.index.push_back(clamp(pos, 0, static_cast<int>(in - 1)));
    const Expr ok = pos >= 0 && pos < static_cast<int>(in);
    if (padding[s]) w.inside = w.inside.defined() ? (w.inside && ok) : ok;
    count = count * (min(start + kernel[s], static_cast<int>(in)) - max(start, 0));
  }
  w.count = count;
  return w;
}

}  // namespace

Tensor max_pool(const std::string& op, int spatial, const Tensor& x, const PoolParams& pp, const std::string& name) {
  const Window w = window(op, spatial, x, pp);
  Program p = x.program();
  Expr v = x(w.index);
  if (w.inside.defined())
    v = select(w.inside, v, make_const(is_float(x.dtype()) ? -std::numeric_limits<double>::infinity() : -2147483648.0,
                                       x.dtype()));
  return p.define_reduce(name.empty() ? p.unique_name(op) : name, w.vars, w.shape, ReduceOp::Max, w.rvars, v,
                         OpKind::Pooling, op);
}

Tensor avg_pool(const std::string& op, int spatial, const Tensor& x, const PoolParams& pp, const std::string& name) {
  require_float(op, x);
  const Window w = window(op, spatial, x, pp);
  Program p = x.program();
  const std::string out = name.empty() ? p.unique_name(op) : name;
  Expr v = x(w.index);
  if (w.inside.defined()) v = select(w.inside, v, make_const(0, x.dtype()));
  const Tensor s = p.define_reduce(p.unique_name(out + "_sum"), w.vars, w.shape, ReduceOp::Sum, w.rvars, v,
                                   OpKind::Pooling, op);
  const Expr n = pp.count_include_pad ? make_const(static_cast<double>(w.window), x.dtype()) : cast(x.dtype(), w.count);
  return p.define(out, w.vars, w.shape, s(vars_of(w.vars)) / n, OpKind::Pooling, op);
}

Tensor max_pool2d(const Tensor& x, const PoolParams& pp, const std::string& name) { return max_pool("max_pool2d", 2, x, pp, name); }
Tensor avg_pool2d(const Tensor& x, const PoolParams& pp, const std::string& name) { return avg_pool("avg_pool2d", 2, x, pp, name); }

namespace {
Tensor global_pool(const std::string& op, bool average, const Tensor& x, const std::string& name) {
  if (x.rank() < 3) throw ShapeError(op + ": input '" + x.name() + "' must be [N, C, spatial...], got " + to_string(x.shape()));
  if (average) require_float(op, x);
  std::vector<int> axes;
  for (int a = 2; a < x.rank(); ++a) axes.push_back(a);
  Program p = x.program();
  const std::string out = name.empty() ? p.unique_name(op) : name;
  Tensor t = average ? reduce_mean(x, axes, true, out) : reduce_max(x, axes, true, out);
  return t;
}
}  // namespace

Tensor global_avg_pool(const Tensor& x, const std::string& name) { return global_pool("global_avg_pool", true, x, name); }
Tensor global_max_pool(const Tensor& x, const std::string& name) { return global_pool("global_max_pool", false, x, name); }

}  // namespace pto::ops
