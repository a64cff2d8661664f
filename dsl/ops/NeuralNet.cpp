// Neural-network layers that are compositions of other operators: hardmax,
// local response normalization, mean-variance normalization, Lp
// normalization and Lp pooling (ONNX's Hardmax, LRN,
// MeanVarianceNormalization, LpNormalization, LpPool), gemm (BLAS / ONNX
// Gemm: alpha op(A) op(B) + beta C), cosine similarity, glu and swiglu. Each row
// builds on library operators so that the defaults and schedules see the same
// stages they see when a user writes the composition by hand.
#include <numeric>

#include "dsl/ops/Ops.h"

namespace pto::ops {
namespace {

using json = nlohmann::json;
using Ins = std::vector<Tensor>;
using S = AttrType;

Expr k(double v, const Expr& like) {
  return make_const(v, like.type());
}

Tensor named(const std::string& op, const Tensor& x, const std::string& name,
             const std::vector<std::string>& vars, const Shape& shape, const Expr& value,
             OpKind kind) {
  Program p = x.program();
  return p.define(name.empty() ? p.unique_name(op) : name, vars, shape, value, kind, op);
}

// 1 at the first maximum along `axis`, 0 elsewhere.
Tensor hardmax(const Tensor& x, int axis, const std::string& name) {
  const std::string op = "hardmax";
  const int a = normalize_axis(op, axis, x.rank());
  const Tensor am = call("argmax", {x}, {{"axis", a}, {"keepdims", true}});
  const auto v = index_vars(static_cast<size_t>(x.rank()));
  std::vector<Expr> at = vars_of(v);
  at[static_cast<size_t>(a)] = 0;
  const Expr hit = cast(DType::I32, am(at)) == var(v[static_cast<size_t>(a)]);
  return named(op, x, name, v, x.shape(),
               select(hit, make_const(1, x.dtype()), make_const(0, x.dtype())),
               OpKind::Normalization);
}

// x / (bias + alpha / size * sum of x^2 over `size` channels around)^beta, channels at dim 1.
Tensor lrn(const Tensor& x, int64_t size, double alpha, double beta, double bias,
           const std::string& name) {
  const std::string op = "lrn";
  require_float(op, x);
  if (x.rank() < 3)
    throw ShapeError(op + ": '" + x.name() + "' must be [N, C, spatial...], got " +
                     to_string(x.shape()));
  if (size < 1) throw DefinitionError(op + ": size " + std::to_string(size) + " must be >= 1");
  const int64_t ch = static_dim(op, x, 1);
  const int lo = static_cast<int>((size - 1) / 2);
  Program p = x.program();
  const std::string out = name.empty() ? p.unique_name(op) : name;
  const auto v = index_vars(static_cast<size_t>(x.rank()));
  std::vector<Expr> at = vars_of(v);
  const Expr c = var(v[1]) - lo + var("r");
  at[1] = clamp(c, 0, static_cast<int>(ch - 1));
  const Expr xv = x(at);
  const Tensor sq = p.define_reduce(
      p.unique_name(out + "_sq"), v, x.shape(), ReduceOp::Sum, {{"r", Dim(size)}},
      select(c >= 0 && c < static_cast<int>(ch), xv * xv, k(0, xv)), OpKind::Normalization, op);
  const Expr s = sq(vars_of(v));
  const Expr base = k(bias, s) + k(alpha / static_cast<double>(size), s) * s;
  return named(op, x, out, v, x.shape(), x(vars_of(v)) / pto::pow(base, k(beta, s)),
               OpKind::Normalization);
}

// (x - E[x]) / (sqrt(E[x^2] - E[x]^2) + eps) over `axes` (ONNX's function body).
Tensor mean_variance_norm(const Tensor& x, const std::vector<int>& axes, double eps,
                          const std::string& name) {
  const std::string op = "mean_variance_norm";
  require_float(op, x);
  const json a = {{"axes", normalize_axes(op, axes, x.rank())}, {"keepdims", true}};
  const Tensor mean = call("reduce_mean", {x}, a);
  const Tensor ex2 = call("reduce_mean", {call("square", {x})}, a);
  return map(
      op, {x, mean, ex2},
      [&](const std::vector<Expr>& e) {
        return (e[0] - e[1]) / (unary(UnOp::Sqrt, e[2] - e[1] * e[1]) + k(eps, e[0]));
      },
      name);
}

// x / ||x||_p along `axis`; a zero norm gives 0 (ONNX's reference).
Tensor lp_normalize(const Tensor& x, int axis, int64_t p, const std::string& name) {
  const std::string op = "lp_normalize";
  require_float(op, x);
  if (p != 1 && p != 2) throw DefinitionError(op + ": p " + std::to_string(p) + " is not 1 or 2");
  const int a = normalize_axis(op, axis, x.rank());
  const Tensor norm =
      call(p == 1 ? "reduce_l1" : "reduce_l2", {x}, {{"axes", {a}}, {"keepdims", true}});
  return map(
      op, {x, norm},
      [](const std::vector<Expr>& e) {
        return select(e[1] == k(0, e[1]), k(0, e[0]), e[0] / e[1]);
      },
      name);
}

}  // namespace

// (sum over each window of |x|^p)^(1/p).
Tensor lp_pool(const std::string& op, int spatial, const Tensor& x, const PoolParams& pp, double p,
               const std::string& name) {
  require_float(op, x);
  if (!(p > 0)) throw DefinitionError(op + ": p " + std::to_string(p) + " must be > 0");
  const Tensor powed = map(op, {x}, [&](const std::vector<Expr>& e) {
    return pto::pow(unary(UnOp::Abs, e[0]), k(p, e[0]));
  });
  const Tensor sum = pool_sum(op, spatial, powed, pp);
  return map(
      op, {sum}, [&](const std::vector<Expr>& e) { return pto::pow(e[0], k(1 / p, e[0])); }, name);
}

namespace {

Tensor gemm(const Ins& in, const Attrs& a, const std::string& name) {
  const std::string op = "gemm";
  Tensor A = in[0], B = in[1];
  if (A.rank() != 2 || B.rank() != 2)
    throw ShapeError(op + ": A '" + A.name() + "' " + to_string(A.shape()) + " and B '" + B.name() +
                     "' " + to_string(B.shape()) + " must be 2-D");
  if (a.get<bool>("trans_a")) A = transpose(A, {1, 0});
  if (a.get<bool>("trans_b")) B = transpose(B, {1, 0});
  const double alpha = a.get<double>("alpha"), beta = a.get<double>("beta");
  const bool bias = in.size() > 2 && beta != 0;
  if (alpha == 1 && !bias) return call("matmul", {A, B}, json::object(), name);
  const Tensor ab = call("matmul", {A, B});
  if (!bias)
    return map(
        op, {ab}, [&](const std::vector<Expr>& e) { return k(alpha, e[0]) * e[0]; }, name);
  return map(
      op, {ab, in[2]},
      [&](const std::vector<Expr>& e) {
        const Expr y = alpha == 1 ? e[0] : k(alpha, e[0]) * e[0];
        const Expr c = cast(e[0].type(), e[1]);
        return y + (beta == 1 ? c : k(beta, c) * c);
      },
      name);
}

// a . b / max(||a|| ||b||, eps) along `axis` (broadcast), the axis dropped.
Tensor cosine_similarity(const Tensor& x, const Tensor& y, int axis, double eps,
                         const std::string& name) {
  const std::string op = "cosine_similarity";
  require_float(op, x);
  const Shape s = broadcast_shapes(op, x.shape(), y.shape());
  const int a = normalize_axis(op, axis, static_cast<int>(s.size()));
  const json r = {{"axes", {a}}, {"keepdims", false}};
  const Tensor dot = call("reduce_sum", {call("mul", {x, y})}, r);
  const Tensor xx = call("reduce_sum", {call("square", {broadcast_to(x, s)})}, r);
  const Tensor yy = call("reduce_sum", {call("square", {broadcast_to(y, s)})}, r);
  return map(
      op, {dot, xx, yy},
      [&](const std::vector<Expr>& e) {
        return e[0] / max(unary(UnOp::Sqrt, e[1] * e[2]), k(eps, e[0]));
      },
      name);
}

// a sigmoid(b) with a, b the halves of x along `axis`.
Tensor glu(const Tensor& x, int axis, const std::string& name) {
  const std::string op = "glu";
  require_float(op, x);
  const int a = normalize_axis(op, axis, x.rank());
  const int64_t n = static_dim(op, x, a);
  if (n % 2)
    throw ShapeError(op + ": dim " + std::to_string(a) + " of '" + x.name() + "' (" +
                     std::to_string(n) + ") must be even");
  const auto v = index_vars(static_cast<size_t>(x.rank()));
  std::vector<Expr> lo = vars_of(v), hi = vars_of(v);
  hi[static_cast<size_t>(a)] = hi[static_cast<size_t>(a)] + static_cast<int>(n / 2);
  Shape s = x.shape();
  s[static_cast<size_t>(a)] = Dim(n / 2);
  const Expr b = x(hi);
  return named(op, x, name, v, s, x(lo) / (k(1, b) + unary(UnOp::Exp, -b)), OpKind::Elementwise);
}

}  // namespace

std::vector<OpInfo> neural_net_ops() {
  std::vector<OpInfo> r;
  r.push_back({"hardmax",
               OpKind::Normalization,
               "1 at the first maximum along an axis, 0 elsewhere (axis)",
               1,
               1,
               {{"axis", S::Int, -1}},
               [](const Ins& in, const Attrs& a, const std::string& n) {
                 return hardmax(in[0], a.get<int>("axis"), n);
               }});
  r.push_back({"lrn",
               OpKind::Normalization,
               "local response normalization across channels (size, alpha, beta, bias)",
               1,
               1,
               {{"size", S::Int, nullptr, true},
                {"alpha", S::Float, 1e-4},
                {"beta", S::Float, 0.75},
                {"bias", S::Float, 1.0}},
               [](const Ins& in, const Attrs& a, const std::string& n) {
                 return lrn(in[0], a.get<int64_t>("size"), a.get<double>("alpha"),
                            a.get<double>("beta"), a.get<double>("bias"), n);
               }});
  r.push_back({"mean_variance_norm",
               OpKind::Normalization,
               "(x - mean) / (std + eps) over axes (axes, eps)",
               1,
               1,
               {{"axes", S::Ints, json::array({0, 2, 3})}, {"eps", S::Float, 1e-9}},
               [](const Ins& in, const Attrs& a, const std::string& n) {
                 return mean_variance_norm(in[0], a.get<std::vector<int>>("axes"),
                                           a.get<double>("eps"), n);
               }});
  r.push_back({"lp_normalize",
               OpKind::Normalization,
               "x / ||x||_p along an axis, 0 for a zero norm (p: 1 or 2, axis)",
               1,
               1,
               {{"axis", S::Int, -1}, {"p", S::Int, 2}},
               [](const Ins& in, const Attrs& a, const std::string& n) {
                 return lp_normalize(in[0], a.get<int>("axis"), a.get<int64_t>("p"), n);
               }});
  r.push_back({"gemm",
               OpKind::Contraction,
               "alpha op(A) op(B) + beta C, op a transpose or not (alpha, beta, trans_a, trans_b)",
               2,
               3,
               {{"alpha", S::Float, 1.0},
                {"beta", S::Float, 1.0},
                {"trans_a", S::Bool, false},
                {"trans_b", S::Bool, false}},
               gemm});
  r.push_back({"cosine_similarity",
               OpKind::Normalization,
               "a . b / max(||a|| ||b||, eps) along an axis (axis, eps)",
               2,
               2,
               {{"axis", S::Int, 1}, {"eps", S::Float, 1e-8}},
               [](const Ins& in, const Attrs& a, const std::string& n) {
                 return cosine_similarity(in[0], in[1], a.get<int>("axis"), a.get<double>("eps"),
                                          n);
               }});
  r.push_back({"swiglu",
               OpKind::Elementwise,
               "a sigmoid(alpha a) b: swish-gated b (alpha; ONNX SwiGLU)",
               2,
               2,
               {{"alpha", S::Float, 1.0}},
               [](const Ins& in, const Attrs& a, const std::string& n) {
                 require_float("swiglu", in[0]);
                 const double alpha = a.get<double>("alpha");
                 return map(
                     "swiglu", in,
                     [&](const std::vector<Expr>& e) {
                       const Expr x = e[0], y = cast(x.type(), e[1]);
                       return x / (k(1, x) + unary(UnOp::Exp, k(-alpha, x) * x)) * y;
                     },
                     n);
               }});
  r.push_back({"glu",
               OpKind::Elementwise,
               "gated linear unit: a sigmoid(b), a and b the halves along an axis (axis)",
               1,
               1,
               {{"axis", S::Int, -1}},
               [](const Ins& in, const Attrs& a, const std::string& n) {
                 return glu(in[0], a.get<int>("axis"), n);
               }});
  return r;
}

}  // namespace pto::ops
