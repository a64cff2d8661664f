// Pooling over the spatial dims of channels-first tensors [N, C, spatial...]
// (or channels-last ones [N, spatial..., C], PoolParams::channels_last):
// max, average and sum over 1-3 spatial dims with stride, dilation, padding
// at each end (asymmetric too) and ceil_mode, and global average / max (ONNX
// GlobalAveragePool: spatial dims kept as size 1). Padded positions never win
// a max; an average divides by the number of in-image taps unless
// count_include_pad (then by the taps inside the padded input: a ceil_mode
// window running past the end padding counts only what it covers).
#include <algorithm>
#include <limits>

#include "dsl/ops/Ops.h"

namespace pto::ops {
namespace {

struct Window {
  std::vector<std::string> vars;
  Shape shape;
  std::vector<RVar> rvars;
  std::vector<Expr> index;  // clamped input index
  Expr inside;              // undefined where every tap of every window is in the image
  Expr count;               // in-image taps of the window (i32)
  Expr padded_count;        // taps inside the padded input; undefined where it is the whole window
  int64_t window = 1;
};

// The taps k in [0, taps) of a window at `start` with lo <= start + k * d < hi
// (every division is of a non-negative value, so floor and truncation agree).
Expr taps_between(const Expr& start, int taps, int d, int lo, int hi) {
  const Expr first = d == 1 ? max(Expr(lo) - start, 0) : (max(Expr(lo) - start, 0) + (d - 1)) / d;
  const Expr past = d == 1 ? min(max(Expr(hi) - start, 0), taps)
                           : min((max(Expr(hi) - start, 0) + (d - 1)) / d, taps);
  return max(past - first, 0);
}

Window window(const std::string& op, int spatial, const Tensor& x, const PoolParams& pp) {
  const int r = spatial + 2;
  const bool last = pp.channels_last;
  if (x.rank() != r)
    throw ShapeError(op + ": input '" + x.name() + "' must be " +
                     (last ? "[N, " + std::to_string(spatial) + " spatial dims, C]"
                           : "[N, C, " + std::to_string(spatial) + " spatial dims]") +
                     " (rank " + std::to_string(r) + "), got " + to_string(x.shape()));
  const int sax = last ? 1 : 2;  // x's first spatial axis
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
  const auto begin =
      per("padding", pp.padding, std::vector<int>(static_cast<size_t>(spatial), 0), 0);
  const auto end = per("padding_end", pp.padding_end, begin, 0);
  const auto dilation =
      per("dilation", pp.dilation, std::vector<int>(static_cast<size_t>(spatial), 1), 1);
  Window w;
  w.vars = {"n", "c"};
  w.shape = {x.shape()[0], x.shape()[last ? static_cast<size_t>(r - 1) : 1]};
  w.index = {var("n"), var("c")};
  Expr count = Expr(1), padded = Expr(1);
  bool whole = true;  // every window inside the padded input
  auto both = [](const Expr& a, const Expr& b) { return a.defined() ? (a && b) : b; };
  for (int s = 0; s < spatial; ++s) {
    const int span = (kernel[s] - 1) * dilation[s] + 1;
    if (begin[s] >= span || end[s] >= span)
      throw ShapeError(op + ": padding " + std::to_string(begin[s]) + " / " +
                       std::to_string(end[s]) + " in spatial dim " + std::to_string(s) +
                       " must be smaller than the window's span " + std::to_string(span));
    const int64_t in = static_dim(op, x, sax + s);
    const int64_t room = in + begin[s] + end[s] - span;
    if (room < 0)
      throw ShapeError(
          op + ": window span " + std::to_string(span) + " is larger than the padded input " +
          std::to_string(in + begin[s] + end[s]) + " in spatial dim " + std::to_string(s));
    int64_t out = (pp.ceil_mode ? (room + stride[s] - 1) / stride[s] : room / stride[s]) + 1;
    if (pp.ceil_mode && (out - 1) * stride[s] >= in + begin[s])
      --out;  // the last window starts in the padding: dropped
    const int64_t last_end =
        (out - 1) * stride[s] - begin[s] + span;  // one past the last window's last tap
    const std::string v = "s" + std::to_string(s), rv = "k" + std::to_string(s);
    w.vars.push_back(v);
    w.shape.push_back(out);
    w.rvars.push_back({rv, kernel[s]});
    w.window *= kernel[s];
    const Expr start = var(v) * stride[s] - begin[s];
    const Expr pos = start + var(rv) * dilation[s];
    w.index.push_back(clamp(pos, 0, static_cast<int>(in - 1)));
    if (begin[s] > 0) w.inside = both(w.inside, pos >= 0);
    if (last_end > in) w.inside = both(w.inside, pos < static_cast<int>(in));
    count = count * taps_between(start, kernel[s], dilation[s], 0, static_cast<int>(in));
    if (last_end > in + end[s]) whole = false;
    padded = padded *
             taps_between(start, kernel[s], dilation[s], -begin[s], static_cast<int>(in + end[s]));
  }
  w.count = count;
  if (!whole) w.padded_count = padded;
  if (last) {  // [n, c, s...] -> [n, s..., c]: the channel var last (window_pool tells them so)
    std::rotate(w.vars.begin() + 1, w.vars.begin() + 2, w.vars.end());
    std::rotate(w.shape.begin() + 1, w.shape.begin() + 2, w.shape.end());
    std::rotate(w.index.begin() + 1, w.index.begin() + 2, w.index.end());
  }
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

Tensor pool_sum(const std::string& op, int spatial, const Tensor& x, const PoolParams& pp,
                const std::string& name) {
  const Window w = window(op, spatial, x, pp);
  Program p = x.program();
  Expr v = x(w.index);
  if (w.inside.defined()) v = select(w.inside, v, make_const(0, x.dtype()));
  return p.define_reduce(name.empty() ? p.unique_name(op + "_sum") : name, w.vars, w.shape,
                         ReduceOp::Sum, w.rvars, v, OpKind::Pooling, op);
}

Tensor avg_pool(const std::string& op, int spatial, const Tensor& x, const PoolParams& pp, const std::string& name) {
  require_float(op, x);
  const Window w = window(op, spatial, x, pp);
  Program p = x.program();
  const std::string out = name.empty() ? p.unique_name(op) : name;
  const Tensor s = pool_sum(op, spatial, x, pp, p.unique_name(out + "_sum"));
  const Expr n = !pp.count_include_pad      ? cast(x.dtype(), w.count)
                 : w.padded_count.defined() ? cast(x.dtype(), w.padded_count)
                                            : make_const(static_cast<double>(w.window), x.dtype());
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
