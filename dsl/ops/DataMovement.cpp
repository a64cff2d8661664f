// Data movement: pure stages whose index expressions do the movement
// (transpose, reshape, slice, concat, pad, gather, ...). No data is copied
// unless a schedule materializes the stage; an inlined transpose is a strided
// read in its consumer.
//
// Halide needs every access in bounds, so reads that could leave the tensor
// are clamped into range and, where the value must differ outside (constant
// padding, concat pieces), guarded with a select. Data-dependent indices
// (gather, gather_elements, embedding, scatter, one_hot) wrap negatives once
// (numpy) and are then clamped: an out-of-range index reads the nearest edge
// element rather than faulting; scatter ignores out-of-range indices.
// Dims that an index computation needs the size of must be static.
#include <algorithm>
#include <numeric>

#include "dsl/ops/Ops.h"

namespace pto::ops {
namespace {

const std::string& pick(const Program& p, const std::string& name, const std::string& op, std::string& store) {
  store = name.empty() ? p.unique_name(op) : name;
  return store;
}

Tensor define(const std::string& op, const Tensor& x, const std::string& name, const std::vector<std::string>& vars,
              const Shape& shape, const Expr& value) {
  Program p = x.program();
  std::string n;
  return p.define(pick(p, name, op, n), vars, shape, value, OpKind::DataMovement, op);
}

void same_program(const std::string& op, const std::vector<Tensor>& xs) {
  for (const Tensor& t : xs) {
    if (!t.defined()) throw DefinitionError(op + ": an input is undefined");
    if (!t.program().same_as(xs[0].program()))
      throw DefinitionError(op + ": '" + t.name() + "' and '" + xs[0].name() + "' belong to different programs");
    if (t.dtype() != xs[0].dtype())
      throw DTypeError(op + ": '" + t.name() + "' is " + std::string(to_string(t.dtype())) + " but '" + xs[0].name() +
                       "' is " + std::string(to_string(xs[0].dtype())));
  }
}

// Pieces placed along `axis` at static offsets: the shared core of concat and stack.
Tensor place(const std::string& op, const std::vector<Tensor>& xs, int axis, bool new_axis, const std::string& name) {
  if (xs.empty()) throw DefinitionError(op + ": needs at least one input");
  same_program(op, xs);
  const int r = xs[0].rank();
  const int a = normalize_axis(op, axis, new_axis ? r + 1 : r);
  for (const Tensor& t : xs) {
    if (t.rank() != r)
      throw ShapeError(op + ": '" + t.name() + "' has rank " + std::to_string(t.rank()) + " but '" + xs[0].name() +
                       "' has rank " + std::to_string(r));
    for (int k = 0; k < r; ++k)
      if ((new_axis || k != a) && t.shape()[static_cast<size_t>(k)] != xs[0].shape()[static_cast<size_t>(k)])
        throw ShapeError(op + ": '" + t.name() + "' " + to_string(t.shape()) + " and '" + xs[0].name() + "' " +
                         to_string(xs[0].shape()) + " differ in dim " + std::to_string(k));
  }
  Shape shape = xs[0].shape();
  std::vector<int64_t> sizes;
  for (const Tensor& t : xs) sizes.push_back(new_axis ? 1 : static_dim(op, t, a));
  const int64_t total = std::accumulate(sizes.begin(), sizes.end(), int64_t{0});
  if (new_axis) shape.insert(shape.begin() + a, Dim(total));
  else shape[static_cast<size_t>(a)] = total;
  const auto vars = index_vars(shape.size());
  const Expr i = var(vars[static_cast<size_t>(a)]);
  Expr value;
  int64_t end = total;
  for (size_t t = xs.size(); t-- > 0;) {
    const int64_t start = end - sizes[t];
    std::vector<Expr> idx = vars_of(vars);
    if (new_axis) idx.erase(idx.begin() + a);
    else idx[static_cast<size_t>(a)] = clamp(i - static_cast<int>(start), 0, static_cast<int>(sizes[t] - 1));
    const Expr v = xs[t](idx);
    value = value.defined() ? select(i < static_cast<int>(end), v, value) : v;
    end = start;
  }
  return define(op, xs[0], name, vars, shape, value);
}

// numpy slice bounds for one axis.
struct Range {
  int64_t start, step, len;
};
Range slice_range(const std::string& op, int64_t n, int64_t s, int64_t e, int64_t step, int axis) {
  if (step == 0) throw ShapeError(op + ": step 0 on axis " + std::to_string(axis) + " is invalid");
  if (s < 0) s += n;
  if (e < 0) e += n;
  int64_t len;
  if (step > 0) {
    s = std::clamp<int64_t>(s, 0, n);
    e = std::clamp<int64_t>(e, 0, n);
    len = e > s ? (e - s + step - 1) / step : 0;
  } else {
    s = std::clamp<int64_t>(s, -1, n - 1);
    e = std::clamp<int64_t>(e, -1, n - 1);
    len = s > e ? (s - e + (-step) - 1) / (-step) : 0;
  }
  if (len <= 0)
    throw ShapeError(op + ": axis " + std::to_string(axis) + " selects no elements (size " + std::to_string(n) +
                     "); empty tensors are not supported");
  return {s, step, len};
}

Tensor slice_impl(const std::string& op, const Tensor& x, const std::vector<int64_t>& starts, const std::vector<int64_t>& ends,
                  std::vector<int> axes, std::vector<int64_t> steps, const std::string& name) {
  const int r = x.rank();
  if (axes.empty())
    for (size_t k = 0; k < starts.size(); ++k) axes.push_back(static_cast<int>(k));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (starts.size() != ends.size() || axes.size() != starts.size() || steps.size() != starts.size())
    throw ShapeError(op + ": starts, ends, axes and steps must have the same length (" + std::to_string(starts.size()) +
                     ", " + std::to_string(ends.size()) + ", " + std::to_string(axes.size()) + ", " +
                     std::to_string(steps.size()) + ")");
  const auto norm = normalize_axes(op, axes, r, false);
  (void)norm;  // rejects repeats
  Shape shape = x.shape();
  const auto vars = index_vars(static_cast<size_t>(r));
  std::vector<Expr> idx = vars_of(vars);
  for (size_t k = 0; k < axes.size(); ++k) {
    const int a = normalize_axis(op, axes[k], r);
    const Range rg = slice_range(op, static_dim(op, x, a), starts[k], ends[k], steps[k], a);
    shape[static_cast<size_t>(a)] = rg.len;
    idx[static_cast<size_t>(a)] = var(vars[static_cast<size_t>(a)]) * static_cast<int>(rg.step) + static_cast<int>(rg.start);
  }
  return define(op, x, name, vars, shape, x(idx));
}

Tensor gather_impl(const std::string& op, const Tensor& x, const Tensor& indices, int axis, const std::string& name) {
  require_int(op, indices);
  const int a = normalize_axis(op, axis, x.rank());
  const int64_t n = static_dim(op, x, a);
  Shape shape(x.shape().begin(), x.shape().begin() + a);
  shape.insert(shape.end(), indices.shape().begin(), indices.shape().end());
  shape.insert(shape.end(), x.shape().begin() + a + 1, x.shape().end());
  const auto vars = index_vars(shape.size());
  const auto v = vars_of(vars);
  const size_t ir = indices.shape().size();
  std::vector<Expr> ii(v.begin() + a, v.begin() + a + static_cast<long>(ir));
  std::vector<Expr> xi(v.begin(), v.begin() + a);
  xi.push_back(wrap_clamp(indices(ii), n));
  xi.insert(xi.end(), v.begin() + a + static_cast<long>(ir), v.end());
  return define(op, x, name, vars, shape, x(xi));
}

}  // namespace

Expr wrap_clamp(const Expr& idx, int64_t n) {
  const Expr i = cast(DType::I32, idx);
  return clamp(select(i < 0, i + static_cast<int>(n), i), 0, static_cast<int>(n - 1));
}

void require_int(const std::string& op, const Tensor& t) {
  if (!is_int(t.dtype()))
    throw DTypeError(op + ": indices '" + t.name() + "' must be an integer type, is " +
                     std::string(to_string(t.dtype())));
}

Tensor identity(const Tensor& x, const std::string& name) {
  return map("identity", {x}, [](const std::vector<Expr>& v) { return v[0]; }, name);
}

Tensor transpose(const Tensor& x, std::vector<int> perm, const std::string& name) {
  const std::string op = "transpose";
  const int r = x.rank();
  if (perm.empty())
    for (int k = r - 1; k >= 0; --k) perm.push_back(k);
  if (static_cast<int>(perm.size()) != r)
    throw ShapeError(op + ": perm has " + std::to_string(perm.size()) + " entries for '" + x.name() + "' of rank " +
                     std::to_string(r));
  std::vector<int> seen(static_cast<size_t>(r), 0);
  for (int& p : perm) {
    p = normalize_axis(op, p, r);
    if (seen[static_cast<size_t>(p)]++) throw ShapeError(op + ": perm repeats axis " + std::to_string(p));
  }
  const auto vars = index_vars(static_cast<size_t>(r));
  Shape shape;
  std::vector<Expr> idx(static_cast<size_t>(r));
  for (int k = 0; k < r; ++k) {
    shape.push_back(x.shape()[static_cast<size_t>(perm[k])]);
    idx[static_cast<size_t>(perm[k])] = var(vars[static_cast<size_t>(k)]);
  }
  return define(op, x, name, vars, shape, x(idx));
}

Tensor reshape(const Tensor& x, const std::vector<int64_t>& target, const std::string& name) {
  const std::string op = "reshape";
  const Shape& in = x.shape();
  Shape out;
  int infer = -1;
  for (size_t k = 0; k < target.size(); ++k) {
    const int64_t t = target[k];
    if (t == 0) {
      if (k >= in.size()) throw ShapeError(op + ": size 0 at position " + std::to_string(k) + " copies no input dim");
      out.push_back(in[k]);
    } else if (t == -1) {
      if (infer >= 0) throw ShapeError(op + ": more than one -1 in the target shape");
      infer = static_cast<int>(k);
      out.push_back(Dim(1));
    } else if (t < 0) {
      throw ShapeError(op + ": size " + std::to_string(t) + " at position " + std::to_string(k) +
                       " is invalid (sizes are > 0, or -1 to infer, or 0 to copy)");
    } else {
      out.push_back(Dim(t));
    }
  }
  // Leading dims equal in both shapes pass through unchanged (symbolic ones included).
  size_t pre = 0;
  while (pre < in.size() && pre < out.size() && static_cast<int>(pre) != infer && in[pre] == out[pre]) ++pre;
  int64_t in_n = 1, out_n = 1;
  for (size_t k = pre; k < in.size(); ++k) {
    if (in[k].is_symbolic())
      throw SymbolicSizeError(op + ": dim " + std::to_string(k) + " of '" + x.name() +
                              "' is symbolic '" + in[k].sym +
                              "'; only leading dims kept unchanged may be symbolic");
    in_n *= in[k].value;
  }
  for (size_t k = pre; k < out.size(); ++k) {
    if (out[k].is_symbolic())
      throw SymbolicSizeError(op + ": target dim " + std::to_string(k) + " copies symbolic '" +
                              out[k].sym + "' out of the leading position");
    if (static_cast<int>(k) != infer) out_n *= out[k].value;
  }
  if (infer >= 0) {
    if (in_n % out_n)
      throw ShapeError(op + ": cannot infer -1: " + std::to_string(in_n) + " elements of '" + x.name() + "' " +
                       to_string(in) + " are not divisible by " + std::to_string(out_n));
    out[static_cast<size_t>(infer)] = in_n / out_n;
    out_n = in_n;
  }
  if (in_n != out_n)
    throw ShapeError(op + ": '" + x.name() + "' " + to_string(in) + " has " + std::to_string(in_n) +
                     " elements after the kept dims; target " + to_string(out) + " has " + std::to_string(out_n));
  const auto vars = index_vars(out.size());
  std::vector<Expr> idx;
  for (size_t k = 0; k < pre; ++k) idx.push_back(var(vars[k]));
  Expr flat = Expr(0);
  for (size_t k = pre; k < out.size(); ++k) flat = flat * static_cast<int>(out[k].value) + var(vars[k]);
  int64_t stride = in_n;
  for (size_t k = pre; k < in.size(); ++k) {
    stride /= in[k].value;
    idx.push_back(in[k].value == 1 ? Expr(0) : (flat / static_cast<int>(stride)) % static_cast<int>(in[k].value));
  }
  return define(op, x, name, vars, out, x(idx));
}

Tensor flatten(const Tensor& x, int axis, const std::string& name) {
  const std::string op = "flatten";
  const int r = x.rank();
  if (axis < -r || axis > r)
    throw ShapeError(op + ": axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(r) +
                     " (valid: " + std::to_string(-r) + " .. " + std::to_string(r) + ")");
  const int a = axis < 0 ? axis + r : axis;
  std::vector<int64_t> shape;
  if (a == 0) {
    shape = {1, -1};
  } else if (a == 1) {
    shape = {0, -1};
  } else {
    int64_t n = 1;
    for (int k = 0; k < a; ++k) n *= static_dim(op, x, k);
    shape = {n, -1};
  }
  if (a == r) shape.back() = 1;
  Tensor t = reshape(x, shape, name);
  return t;
}

Tensor squeeze(const Tensor& x, std::vector<int> axes, const std::string& name) {
  const std::string op = "squeeze";
  const int r = x.rank();
  std::vector<int> drop;
  if (axes.empty()) {
    for (int k = 0; k < r; ++k)
      if (x.shape()[static_cast<size_t>(k)].is_one()) drop.push_back(k);
  } else {
    drop = normalize_axes(op, axes, r, false);
    for (int k : drop)
      if (!x.shape()[static_cast<size_t>(k)].is_one())
        throw ShapeError(op + ": axis " + std::to_string(k) + " of '" + x.name() + "' " + to_string(x.shape()) +
                         " has size " + x.shape()[static_cast<size_t>(k)].str() + ", not 1");
  }
  Shape shape;
  std::vector<std::string> vars;
  std::vector<Expr> idx;
  for (int k = 0; k < r; ++k) {
    if (std::count(drop.begin(), drop.end(), k)) {
      idx.push_back(0);
    } else {
      vars.push_back("i" + std::to_string(vars.size()));
      shape.push_back(x.shape()[static_cast<size_t>(k)]);
      idx.push_back(var(vars.back()));
    }
  }
  return define(op, x, name, vars, shape, x(idx));
}

Tensor unsqueeze(const Tensor& x, std::vector<int> axes, const std::string& name) {
  const std::string op = "unsqueeze";
  if (axes.empty()) throw ShapeError(op + ": axes must not be empty");
  const int r = x.rank() + static_cast<int>(axes.size());
  const auto ins = normalize_axes(op, axes, r, false);
  const auto vars = index_vars(static_cast<size_t>(r));
  Shape shape;
  std::vector<Expr> idx;
  size_t src = 0;
  for (int k = 0; k < r; ++k) {
    if (std::count(ins.begin(), ins.end(), k)) {
      shape.push_back(1);
    } else {
      shape.push_back(x.shape()[src++]);
      idx.push_back(var(vars[static_cast<size_t>(k)]));
    }
  }
  return define(op, x, name, vars, shape, x(idx));
}

Tensor broadcast_to(const Tensor& x, const Shape& shape, const std::string& name) {
  const std::string op = "broadcast_to";
  const Shape b = broadcast_shapes(op, x.shape(), shape);
  if (b != shape)
    throw ShapeError(op + ": '" + x.name() + "' " + to_string(x.shape()) + " does not broadcast to " + to_string(shape));
  const auto vars = index_vars(shape.size());
  return define(op, x, name, vars, shape, x(broadcast_index(x, vars)));
}

Tensor slice(const Tensor& x, std::vector<int64_t> starts, std::vector<int64_t> ends, std::vector<int> axes,
             std::vector<int64_t> steps, const std::string& name) {
  return slice_impl("slice", x, starts, ends, std::move(axes), std::move(steps), name);
}

Tensor concat(const std::vector<Tensor>& xs, int axis, const std::string& name) {
  return place("concat", xs, axis, false, name);
}

Tensor stack(const std::vector<Tensor>& xs, int axis, const std::string& name) {
  return place("stack", xs, axis, true, name);
}

std::vector<Tensor> split(const Tensor& x, int axis, std::vector<int64_t> sizes, int num, const std::string& name,
                          int only) {
  const std::string op = "split";
  const int a = normalize_axis(op, axis, x.rank());
  const int64_t n = static_dim(op, x, a);
  if (sizes.empty()) {
    if (num < 1 || n % num)
      throw ShapeError(op + ": num " + std::to_string(num) + " must be >= 1 and divide dim " + std::to_string(a) +
                       " of '" + x.name() + "' (" + std::to_string(n) + ")");
    sizes.assign(static_cast<size_t>(num), n / num);
  }
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 1) throw ShapeError(op + ": piece size " + std::to_string(s) + " must be >= 1");
    total += s;
  }
  if (total != n)
    throw ShapeError(op + ": sizes add up to " + std::to_string(total) + " but dim " + std::to_string(a) + " of '" +
                     x.name() + "' is " + std::to_string(n));
  Program p = x.program();
  std::string base;
  pick(p, name, op, base);
  std::vector<Tensor> out;
  int64_t start = 0;
  if (only >= static_cast<int>(sizes.size()))
    throw ShapeError(op + ": index " + std::to_string(only) + " is out of range for " + std::to_string(sizes.size()) +
                     " pieces");
  for (size_t k = 0; k < sizes.size(); ++k) {
    if (only < 0) out.push_back(slice_impl(op, x, {start}, {start + sizes[k]}, {a}, {1}, p.unique_name(base + "_" + std::to_string(k))));
    else if (static_cast<int>(k) == only) out.push_back(slice_impl(op, x, {start}, {start + sizes[k]}, {a}, {1}, base));
    start += sizes[k];
  }
  return out;
}

Tensor pad(const Tensor& x, const std::vector<int64_t>& pads, const std::string& mode, double value,
           const std::string& name) {
  const std::string op = "pad";
  const int r = x.rank();
  if (static_cast<int>(pads.size()) != 2 * r)
    throw ShapeError(op + ": pads needs " + std::to_string(2 * r) + " values (befores then afters) for '" + x.name() +
                     "' of rank " + std::to_string(r) + ", got " + std::to_string(pads.size()));
  if (mode != "constant" && mode != "reflect" && mode != "edge")
    throw DefinitionError(op + ": mode '" + mode + "' is not one of constant, reflect, edge");
  const auto vars = index_vars(static_cast<size_t>(r));
  Shape shape = x.shape();
  std::vector<Expr> idx;
  Expr inside;
  for (int k = 0; k < r; ++k) {
    const int64_t before = pads[static_cast<size_t>(k)], after = pads[static_cast<size_t>(k + r)];
    const Expr i = var(vars[static_cast<size_t>(k)]);
    if (before < 0 || after < 0)
      throw ShapeError(op + ": pads on axis " + std::to_string(k) + " (" + std::to_string(before) + ", " +
                       std::to_string(after) + ") must be >= 0");
    if (before == 0 && after == 0) {
      idx.push_back(i);
      continue;
    }
    const int64_t n = static_dim(op, x, k);
    if (mode == "reflect" && (before >= n || after >= n))
      throw ShapeError(op + ": reflect padding (" + std::to_string(before) + ", " + std::to_string(after) +
                       ") on axis " + std::to_string(k) + " must be smaller than its size " + std::to_string(n));
    shape[static_cast<size_t>(k)] = n + before + after;
    const Expr j = i - static_cast<int>(before);
    const int last = static_cast<int>(n - 1);
    if (mode == "reflect") {
      idx.push_back(clamp(select(j < 0, -j, select(j > last, 2 * last - j, j)), 0, last));
    } else {
      idx.push_back(clamp(j, 0, last));
      if (mode == "constant") {
        const Expr ok = j >= 0 && j <= last;
        inside = inside.defined() ? (inside && ok) : ok;
      }
    }
  }
  Expr v = x(idx);
  if (inside.defined()) v = select(inside, v, make_const(value, x.dtype()));
  return define(op, x, name, vars, shape, v);
}

Tensor gather(const Tensor& x, const Tensor& indices, int axis, const std::string& name) {
  return gather_impl("gather", x, indices, axis, name);
}

Tensor embedding(const Tensor& table, const Tensor& ids, const std::string& name) {
  if (table.rank() != 2)
    throw ShapeError("embedding: table '" + table.name() + "' must be [vocab, dim], got " + to_string(table.shape()));
  return gather_impl("embedding", table, ids, 0, name);
}

Tensor gather_elements(const Tensor& x, const Tensor& indices, int axis, const std::string& name) {
  const std::string op = "gather_elements";
  require_int(op, indices);
  const int r = x.rank();
  const int a = normalize_axis(op, axis, r);
  if (indices.rank() != r)
    throw ShapeError(op + ": indices '" + indices.name() + "' must have the rank of '" + x.name() + "' (" +
                     std::to_string(r) + "), got " + std::to_string(indices.rank()));
  for (int k = 0; k < r; ++k) {
    const Dim& di = indices.shape()[static_cast<size_t>(k)];
    const Dim& dx = x.shape()[static_cast<size_t>(k)];
    if (k != a && di != dx && (di.is_symbolic() || dx.is_symbolic() || di.value > dx.value))
      throw ShapeError(op + ": indices dim " + std::to_string(k) + " (" + di.str() + ") exceeds '" + x.name() +
                       "' dim " + dx.str());
  }
  const int64_t n = static_dim(op, x, a);
  const auto vars = index_vars(static_cast<size_t>(r));
  std::vector<Expr> idx = vars_of(vars);
  idx[static_cast<size_t>(a)] = wrap_clamp(indices(vars_of(vars)), n);
  return define(op, x, name, vars, indices.shape(), x(idx));
}

Tensor scatter(const Tensor& x, const Tensor& indices, const Tensor& updates, int axis,
               const std::string& name, const std::string& reduction) {
  const std::string op = "scatter";
  require_int(op, indices);
  const int r = x.rank();
  const int a = normalize_axis(op, axis, r);
  if (updates.dtype() != x.dtype())
    throw DTypeError(op + ": updates '" + updates.name() + "' are " + std::string(to_string(updates.dtype())) +
                     " but '" + x.name() + "' is " + std::string(to_string(x.dtype())));
  if (indices.shape() != updates.shape())
    throw ShapeError(op + ": indices '" + indices.name() + "' " + to_string(indices.shape()) + " and updates '" +
                     updates.name() + "' " + to_string(updates.shape()) + " must have the same shape");
  if (indices.rank() != r)
    throw ShapeError(op + ": indices must have the rank of '" + x.name() + "' (" + std::to_string(r) + ")");
  const int64_t n = static_dim(op, x, a);
  const auto vars = index_vars(static_cast<size_t>(r));
  Expr covered;  // is this output position inside the indices' extent (other dims)?
  std::vector<Expr> ii = vars_of(vars);
  for (int k = 0; k < r; ++k) {
    if (k == a) continue;
    const Dim& di = indices.shape()[static_cast<size_t>(k)];
    const Dim& dx = x.shape()[static_cast<size_t>(k)];
    if (di == dx) continue;
    if (di.is_symbolic() || dx.is_symbolic() || di.value > dx.value)
      throw ShapeError(op + ": indices dim " + std::to_string(k) + " (" + di.str() + ") exceeds '" + x.name() +
                       "' dim " + dx.str());
    const Expr i = var(vars[static_cast<size_t>(k)]);
    ii[static_cast<size_t>(k)] = min(i, static_cast<int>(di.value - 1));
    const Expr ok = i < static_cast<int>(di.value);
    covered = covered.defined() ? (covered && ok) : ok;
  }
  ii[static_cast<size_t>(a)] = var("r");
  const Expr raw = cast(DType::I32, indices(ii));
  const Expr target = select(raw < 0, raw + static_cast<int>(n), raw);
  Expr hit = target == var(vars[static_cast<size_t>(a)]);
  if (covered.defined()) hit = hit && covered;
  Program p = x.program();
  std::string out;
  pick(p, name, op, out);
  if (reduction != "none")
    return combine_updates(op, out, x, vars, {{"r", indices.shape()[static_cast<size_t>(a)]}}, hit,
                           updates(ii), reduction);
  // The last update position r that targets this element (or -1): last write wins.
  const Tensor last = p.define_reduce(p.unique_name(out + "_src"), vars, x.shape(), ReduceOp::Max,
                                      {{"r", indices.shape()[static_cast<size_t>(a)]}},
                                      select(hit, var("r"), Expr(-1)), OpKind::DataMovement, op);
  std::vector<Expr> ui = ii;
  const Expr src = last(vars_of(vars));
  ui[static_cast<size_t>(a)] = clamp(src, 0, static_cast<int>(static_dim(op, indices, a) - 1));
  return p.define(out, vars, x.shape(), select(src >= 0, updates(ui), x(vars_of(vars))), OpKind::DataMovement, op);
}

Tensor tile(const Tensor& x, const std::vector<int64_t>& repeats, const std::string& name) {
  const std::string op = "tile";
  const int r = std::max(x.rank(), static_cast<int>(repeats.size()));
  std::vector<int64_t> rep(static_cast<size_t>(r) - repeats.size(), 1);
  rep.insert(rep.end(), repeats.begin(), repeats.end());
  const int off = r - x.rank();
  const auto vars = index_vars(static_cast<size_t>(r));
  Shape shape;
  std::vector<Expr> idx;
  for (int k = 0; k < r; ++k) {
    const int64_t m = rep[static_cast<size_t>(k)];
    if (m < 1) throw ShapeError(op + ": repeat " + std::to_string(m) + " on axis " + std::to_string(k) + " must be >= 1");
    const Expr i = var(vars[static_cast<size_t>(k)]);
    if (k < off) {
      shape.push_back(m);
      continue;
    }
    const Dim& d = x.shape()[static_cast<size_t>(k - off)];
    if (m == 1) {
      shape.push_back(d);
      idx.push_back(i);
      continue;
    }
    const int64_t n = static_dim(op, x, k - off);
    shape.push_back(n * m);
    idx.push_back(i % static_cast<int>(n));
  }
  return define(op, x, name, vars, shape, x(idx));
}

Tensor repeat(const Tensor& x, int64_t repeats, int axis, const std::string& name) {
  const std::string op = "repeat";
  if (repeats < 1) throw ShapeError(op + ": repeats " + std::to_string(repeats) + " must be >= 1");
  const int a = normalize_axis(op, axis, x.rank());
  const int64_t n = static_dim(op, x, a);
  const auto vars = index_vars(static_cast<size_t>(x.rank()));
  Shape shape = x.shape();
  shape[static_cast<size_t>(a)] = n * repeats;
  std::vector<Expr> idx = vars_of(vars);
  idx[static_cast<size_t>(a)] = idx[static_cast<size_t>(a)] / static_cast<int>(repeats);
  return define(op, x, name, vars, shape, x(idx));
}

Tensor flip(const Tensor& x, std::vector<int> axes, const std::string& name) {
  const std::string op = "flip";
  const auto ax = normalize_axes(op, axes, x.rank(), true);
  const auto vars = index_vars(static_cast<size_t>(x.rank()));
  std::vector<Expr> idx = vars_of(vars);
  for (int a : ax) idx[static_cast<size_t>(a)] = static_cast<int>(static_dim(op, x, a) - 1) - idx[static_cast<size_t>(a)];
  return define(op, x, name, vars, x.shape(), x(idx));
}

Tensor roll(const Tensor& x, const std::vector<int64_t>& shifts, const std::vector<int>& axes, const std::string& name) {
  const std::string op = "roll";
  if (shifts.size() != axes.size() || shifts.empty())
    throw ShapeError(op + ": shifts (" + std::to_string(shifts.size()) + ") and axes (" + std::to_string(axes.size()) +
                     ") must be non-empty and of equal length");
  const auto vars = index_vars(static_cast<size_t>(x.rank()));
  std::vector<Expr> idx = vars_of(vars);
  normalize_axes(op, axes, x.rank(), false);
  for (size_t k = 0; k < axes.size(); ++k) {
    const int a = normalize_axis(op, axes[k], x.rank());
    const int64_t n = static_dim(op, x, a);
    const int64_t s = ((shifts[k] % n) + n) % n;
    idx[static_cast<size_t>(a)] = (idx[static_cast<size_t>(a)] + static_cast<int>(n - s)) % static_cast<int>(n);
  }
  return define(op, x, name, vars, x.shape(), x(idx));
}

Tensor one_hot(const Tensor& indices, int64_t depth, int axis, double on_value, double off_value, DType dtype,
               const std::string& name) {
  const std::string op = "one_hot";
  require_int(op, indices);
  if (depth < 1) throw ShapeError(op + ": depth " + std::to_string(depth) + " must be >= 1");
  const int r = indices.rank() + 1;
  const int a = normalize_axis(op, axis, r);
  const auto vars = index_vars(static_cast<size_t>(r));
  Shape shape = indices.shape();
  shape.insert(shape.begin() + a, Dim(depth));
  std::vector<Expr> idx = vars_of(vars);
  const Expr pos = idx[static_cast<size_t>(a)];
  idx.erase(idx.begin() + a);
  const Expr i = cast(DType::I32, indices(idx));
  const Expr hot = select(i < 0, i + static_cast<int>(depth), i) == pos;
  return define(op, indices, name, vars, shape, select(hot, make_const(on_value, dtype), make_const(off_value, dtype)));
}

namespace {
Tensor triangle(const std::string& op, const Tensor& x, int64_t k, bool lower, const std::string& name) {
  if (x.rank() < 2) throw ShapeError(op + ": '" + x.name() + "' must have rank >= 2, got " + to_string(x.shape()));
  const auto vars = index_vars(static_cast<size_t>(x.rank()));
  const Expr i = var(vars[vars.size() - 2]), j = var(vars.back());
  const Expr keep = lower ? (j - i <= static_cast<int>(k)) : (j - i >= static_cast<int>(k));
  return define(op, x, name, vars, x.shape(), select(keep, x(vars_of(vars)), make_const(0, x.dtype())));
}
}  // namespace

Tensor tril(const Tensor& x, int64_t k, const std::string& name) { return triangle("tril", x, k, true, name); }
Tensor triu(const Tensor& x, int64_t k, const std::string& name) { return triangle("triu", x, k, false, name); }

}  // namespace pto::ops
