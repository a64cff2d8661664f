// Sorting along an axis: sort / argsort (ascending or descending) and
// topk / topk_indices (the k largest or smallest, in order), as in numpy and
// ONNX TopK. Equal values keep their index order (a stable sort), and NaN
// orders above every number (numpy's sort puts NaNs last).
//
// The order is computed by rank, not by a sorting network: an element's rank
// is the number of elements that come before it (a sum over the axis), and
// output position j reads the element whose rank is j (a second sum). Both
// are ordinary reduction stages that schedules tile and parallelize; the cost
// is n^2 comparisons per row, fine for the rows models sort (classes, boxes,
// beams: up to a few thousand).
#include "dsl/ops/Ops.h"

namespace pto::ops {
namespace {

using Ins = std::vector<Tensor>;

// The indices (i64) of the first `k` elements of each row along `axis` in
// sorted order.
Tensor order(const std::string& op, const Tensor& x, int axis, int64_t k, bool descending,
             const std::string& name) {
  const int a = normalize_axis(op, axis, x.rank());
  const int64_t n = static_dim(op, x, a);
  if (k < 0 || k > n)
    throw ShapeError(op + ": k " + std::to_string(k) + " must be in [0, " + std::to_string(n) +
                     "] (the size of axis " + std::to_string(a) + " of '" + x.name() + "' " +
                     to_string(x.shape()) + ")");
  if (x.dtype() == DType::Bool)
    throw DTypeError(op + ": '" + x.name() + "' is bool; cast it to a number first");
  Program p = x.program();
  const std::string out = name.empty() ? p.unique_name(op) : name;
  const auto vars = index_vars(static_cast<size_t>(x.rank()));
  const size_t ua = static_cast<size_t>(a);
  std::vector<Expr> at_m = vars_of(vars);
  at_m[ua] = var("m");
  const Expr vi = x(vars_of(vars)), vm = x(at_m);
  // Does element m come before element i?
  Expr ahead = descending ? vm > vi : vm < vi, same = vm == vi;
  if (is_float(x.dtype())) {
    const Expr ni = unary(UnOp::IsNan, vi), nm = unary(UnOp::IsNan, vm);
    ahead = descending ? ((nm && !ni) || ahead) : ((ni && !nm) || ahead);
    same = same || (ni && nm);
  }
  const Expr before = ahead || (same && var("m") < var(vars[ua]));
  const Tensor rank = p.define_reduce(
      p.unique_name(out + "_rank"), vars, x.shape(), ReduceOp::Sum, {{"m", n}},
      select(before, make_const(1, DType::I32), make_const(0, DType::I32)), OpKind::Reduction, op);
  Shape shape = x.shape();
  shape[ua] = Dim(k);
  std::vector<Expr> at_r = vars_of(vars);
  at_r[ua] = var("r");
  return p.define_reduce(
      out, vars, shape, ReduceOp::Sum, {{"r", n}},
      select(rank(at_r) == var(vars[ua]), cast(DType::I64, var("r")), make_const(0, DType::I64)),
      OpKind::Reduction, op);
}

// x read at the positions `idx` gives along the axis.
Tensor take(const std::string& op, const Tensor& x, const Tensor& idx, int axis,
            const std::string& name) {
  const int a = normalize_axis(op, axis, x.rank());
  Program p = x.program();
  const auto vars = index_vars(static_cast<size_t>(x.rank()));
  std::vector<Expr> at = vars_of(vars);
  at[static_cast<size_t>(a)] =
      clamp(cast(DType::I32, idx(vars_of(vars))), 0, static_cast<int>(static_dim(op, x, a) - 1));
  return p.define(name.empty() ? p.unique_name(op) : name, vars, idx.shape(), x(at),
                  OpKind::DataMovement, op);
}

}  // namespace

std::vector<OpInfo> sort_ops() {
  const AttrSpec axis = {"axis", AttrType::Int, -1};
  const AttrSpec descending = {"descending", AttrType::Bool, false};
  const std::vector<AttrSpec> top = {
      {"k", AttrType::Int, nullptr, true}, axis, {"largest", AttrType::Bool, true}};
  std::vector<OpInfo> r;
  r.push_back({"sort",
               OpKind::Reduction,
               "values sorted along an axis, stable, NaN last (axis, descending)",
               1,
               1,
               {axis, descending},
               [](const Ins& in, const Attrs& a, const std::string& n) {
                 const int ax = a.get<int>("axis");
                 const int64_t len =
                     static_dim("sort", in[0], normalize_axis("sort", ax, in[0].rank()));
                 return take("sort", in[0],
                             order("sort", in[0], ax, len, a.get<bool>("descending"), ""), ax, n);
               }});
  r.push_back({"argsort",
               OpKind::Reduction,
               "indices (i64) that sort along an axis, stable (axis, descending)",
               1,
               1,
               {axis, descending},
               [](const Ins& in, const Attrs& a, const std::string& n) {
                 const int ax = a.get<int>("axis");
                 const int64_t len =
                     static_dim("argsort", in[0], normalize_axis("argsort", ax, in[0].rank()));
                 return order("argsort", in[0], ax, len, a.get<bool>("descending"), n);
               }});
  r.push_back({"topk", OpKind::Reduction,
               "the k largest (or smallest) values along an axis, in order (k, axis, largest)", 1,
               1, top, [](const Ins& in, const Attrs& a, const std::string& n) {
                 const int ax = a.get<int>("axis");
                 const Tensor idx =
                     order("topk", in[0], ax, a.get<int64_t>("k"), a.get<bool>("largest"), "");
                 return take("topk", in[0], idx, ax, n);
               }});
  r.push_back({"topk_indices", OpKind::Reduction,
               "indices (i64) of topk's values (k, axis, largest)", 1, 1, top,
               [](const Ins& in, const Attrs& a, const std::string& n) {
                 return order("topk_indices", in[0], a.get<int>("axis"), a.get<int64_t>("k"),
                              a.get<bool>("largest"), n);
               }});
  return r;
}

}  // namespace pto::ops
