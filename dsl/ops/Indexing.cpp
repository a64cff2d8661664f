// N-dimensional indexing (ONNX GatherND / ScatterND, TensorFlow's gather_nd /
// scatter_nd): the last dim of `indices` holds a position in the leading dims
// of `data`. Negative positions count from the end; positions out of range
// are clamped (the kernel never reads outside a buffer).
//
// scatter_nd finds, for every output element, the updates that target it: a
// reduction over the update positions (the last one for `none`, as ONNX's
// reference writes in order; their sum, product, max or min otherwise). That
// is a gather-shaped loop nest with no write conflicts, at the cost of
// reading all update positions per element: fine for the sparse updates
// (KV-cache slots, embeddings rows) models do.
#include <algorithm>
#include <cmath>

#include "dsl/ops/Ops.h"

namespace pto::ops {
namespace {

using Ins = std::vector<Tensor>;

Tensor gather_nd(const Tensor& data, const Tensor& indices, int batch_dims,
                 const std::string& name) {
  const std::string op = "gather_nd";
  require_int(op, indices);
  const int b = batch_dims, r = data.rank(), q = indices.rank();
  if (q < 1 || b < 0 || b >= q || b > r)
    throw ShapeError(op + ": batch_dims " + std::to_string(b) +
                     " must be in [0, rank of indices - 1] with indices '" + indices.name() + "' " +
                     to_string(indices.shape()));
  const int64_t depth = static_dim(op, indices, q - 1);
  if (b + depth > r)
    throw ShapeError(op + ": indices' last dim (" + std::to_string(depth) +
                     ") plus batch_dims exceeds the rank of '" + data.name() + "' " +
                     to_string(data.shape()));
  for (int k = 0; k < b; ++k)
    if (data.shape()[static_cast<size_t>(k)] != indices.shape()[static_cast<size_t>(k)])
      throw ShapeError(op + ": batch dim " + std::to_string(k) + " differs: '" + data.name() +
                       "' " + to_string(data.shape()) + ", indices " + to_string(indices.shape()));
  // Output: indices' dims but the last, then data's dims after the indexed ones.
  Shape shape(indices.shape().begin(), indices.shape().end() - 1);
  shape.insert(shape.end(), data.shape().begin() + b + depth, data.shape().end());
  const auto vars = index_vars(shape.size());
  std::vector<Expr> at_idx;  // indices' position: the output's first q - 1 vars, then the component
  for (int k = 0; k < q - 1; ++k) at_idx.push_back(var(vars[static_cast<size_t>(k)]));
  std::vector<Expr> at_data;
  for (int k = 0; k < b; ++k) at_data.push_back(var(vars[static_cast<size_t>(k)]));
  for (int64_t c = 0; c < depth; ++c) {
    std::vector<Expr> ic = at_idx;
    ic.push_back(static_cast<int>(c));
    at_data.push_back(wrap_clamp(indices(ic), static_dim(op, data, b + static_cast<int>(c))));
  }
  for (size_t k = static_cast<size_t>(q - 1); k < vars.size(); ++k) at_data.push_back(var(vars[k]));
  Program p = data.program();
  return p.define(name.empty() ? p.unique_name(op) : name, vars, shape, data(at_data),
                  OpKind::DataMovement, op);
}

Tensor scatter_nd(const Tensor& data, const Tensor& indices, const Tensor& updates,
                  const std::string& reduction, const std::string& name) {
  const std::string op = "scatter_nd";
  require_int(op, indices);
  if (updates.dtype() != data.dtype())
    throw DTypeError(op + ": updates '" + updates.name() + "' are " +
                     std::string(to_string(updates.dtype())) + " but '" + data.name() + "' is " +
                     std::string(to_string(data.dtype())));
  const int r = data.rank(), q = indices.rank();
  if (q < 1) throw ShapeError(op + ": indices '" + indices.name() + "' must have rank >= 1");
  const int64_t depth = static_dim(op, indices, q - 1);
  if (depth > r)
    throw ShapeError(op + ": indices' last dim (" + std::to_string(depth) +
                     ") exceeds the rank of '" + data.name() + "' " + to_string(data.shape()));
  Shape want(indices.shape().begin(), indices.shape().end() - 1);
  want.insert(want.end(), data.shape().begin() + depth, data.shape().end());
  if (updates.shape() != want)
    throw ShapeError(op + ": updates '" + updates.name() + "' must be " + to_string(want) +
                     " (indices' dims but the last, then '" + data.name() +
                     "' dims after the indexed ones), got " + to_string(updates.shape()));
  static const std::vector<std::string> kModes = {"none", "add", "mul", "max", "min"};
  if (std::find(kModes.begin(), kModes.end(), reduction) == kModes.end())
    throw DefinitionError(op + ": reduction '" + reduction +
                          "' is not one of none, add, mul, max, min");
  const auto vars = index_vars(static_cast<size_t>(r));
  // Update positions u (the reduction's dims) and whether u targets this element.
  std::vector<RVar> rv;
  std::vector<Expr> at_u;
  for (int k = 0; k < q - 1; ++k) {
    rv.push_back({"u" + std::to_string(k), indices.shape()[static_cast<size_t>(k)]});
    at_u.push_back(var(rv.back().name));
  }
  if (rv.empty()) {  // one update: a unit dim to reduce over
    rv.push_back({"u0", Dim(1)});
  }
  Expr hit;
  for (int64_t c = 0; c < depth; ++c) {
    std::vector<Expr> ic = at_u;
    ic.push_back(static_cast<int>(c));
    const Expr e = wrap_clamp(indices(ic), static_dim(op, data, static_cast<int>(c))) ==
                   var(vars[static_cast<size_t>(c)]);
    hit = hit.defined() ? (hit && e) : e;
  }
  if (!hit.defined()) hit = make_const(1, DType::Bool);
  std::vector<Expr> at_upd = at_u;
  for (size_t k = static_cast<size_t>(depth); k < vars.size(); ++k) at_upd.push_back(var(vars[k]));
  Program p = data.program();
  const std::string out = name.empty() ? p.unique_name(op) : name;
  const Expr old = data(vars_of(vars));
  if (reduction == "none") {
    // The last update position that targets the element (flattened, row-major), or -1.
    Expr flat = make_const(0, DType::I32);
    for (size_t k = 0; k < rv.size(); ++k)
      flat = flat * static_cast<int>(rv[k].extent.value) + var(rv[k].name);
    const Tensor last =
        p.define_reduce(p.unique_name(out + "_src"), vars, data.shape(), ReduceOp::Max, rv,
                        select(hit, flat, make_const(-1, DType::I32)), OpKind::DataMovement, op);
    const Expr src = last(vars_of(vars));
    std::vector<Expr> at_src;
    Expr rest = max(src, make_const(0, DType::I32));
    for (size_t k = rv.size(); k-- > 0;) {
      const int ext = static_cast<int>(rv[k].extent.value);
      at_src.insert(at_src.begin(), rest % ext);
      rest = rest / ext;
    }
    if (q == 1) at_src.clear();
    for (size_t k = static_cast<size_t>(depth); k < vars.size(); ++k)
      at_src.push_back(var(vars[k]));
    return p.define(out, vars, data.shape(), select(src >= 0, updates(at_src), old),
                    OpKind::DataMovement, op);
  }
  return combine_updates(op, out, data, vars, rv, hit, updates(at_upd), reduction);
}

}  // namespace

Tensor combine_updates(const std::string& op, const std::string& out, const Tensor& data,
                       const std::vector<std::string>& vars, const std::vector<RVar>& rv,
                       const Expr& hit, const Expr& update, const std::string& reduction) {
  const ReduceOp ro = reduction == "add"   ? ReduceOp::Sum
                      : reduction == "mul" ? ReduceOp::Prod
                      : reduction == "max" ? ReduceOp::Max
                                           : ReduceOp::Min;
  if (reduction != "add" && reduction != "mul" && reduction != "max" && reduction != "min")
    throw DefinitionError(op + ": reduction '" + reduction +
                          "' is not one of none, add, mul, max, min");
  Program p = data.program();
  const DType t = data.dtype();
  // Updates that miss contribute the identity; max / min also count the hits
  // so that an element no update targets keeps its value.
  const Tensor acc =
      p.define_reduce(p.unique_name(out + "_acc"), vars, data.shape(), ro, rv,
                      select(hit, cast(t, update), make_const(reduction_identity(ro, t), t)),
                      OpKind::DataMovement, op);
  const Expr old = data(vars_of(vars)), v = acc(vars_of(vars));
  Expr value;
  if (ro == ReduceOp::Sum) {
    value = old + v;
  } else if (ro == ReduceOp::Prod) {
    value = old * v;
  } else {
    const Tensor hits =
        p.define_reduce(p.unique_name(out + "_hits"), vars, data.shape(), ReduceOp::Sum, rv,
                        select(hit, make_const(1, DType::I32), make_const(0, DType::I32)),
                        OpKind::DataMovement, op);
    value = select(hits(vars_of(vars)) > 0, ro == ReduceOp::Max ? max(old, v) : min(old, v), old);
  }
  return p.define(out, vars, data.shape(), value, OpKind::DataMovement, op);
}

std::vector<OpInfo> indexing_ops() {
  std::vector<OpInfo> r;
  r.push_back(
      {"gather_nd",
       OpKind::DataMovement,
       "slices of data at positions given by the last dim of indices (batch_dims; ONNX GatherND)",
       2,
       2,
       {{"batch_dims", AttrType::Int, 0}},
       [](const Ins& in, const Attrs& a, const std::string& n) {
         return gather_nd(in[0], in[1], a.get<int>("batch_dims"), n);
       }});
  r.push_back({"scatter_nd",
               OpKind::DataMovement,
               "data with slices at indices' positions replaced or combined with updates "
               "(reduction: none, add, mul, max, min)",
               3,
               3,
               {{"reduction", AttrType::String, "none"}},
               [](const Ins& in, const Attrs& a, const std::string& n) {
                 return scatter_nd(in[0], in[1], in[2], a.get<std::string>("reduction"), n);
               }});
  return r;
}

}  // namespace pto::ops
