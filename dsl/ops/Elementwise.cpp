// Binary and ternary elementwise operators with numpy broadcasting.
//
// Arithmetic promotes both operands to a common type (dsl/Type.h promote());
// comparisons and logical operators produce bool. Integer `mod` and
// `floor_divide` follow numpy (the result of mod has the divisor's sign) on top
// of Halide's Euclidean integer division; float `mod` is x - y * floor(x / y)
// (numpy) and `fmod` is C fmod (sign of the dividend).
#include <map>

#include "dsl/ops/Ops.h"

namespace pto::ops {
namespace {

Expr fl(const Expr& x) { return is_float(x.type()) ? x : cast(DType::F32, x); }

// Brings integer operands to one type so that the numpy sign fix-ups see the promoted values.
std::pair<Expr, Expr> promoted(const Expr& a, const Expr& b) {
  const DType t = promote(a.type(), b.type());
  return {cast(t, a), cast(t, b)};
}

Expr numpy_mod(const Expr& a0, const Expr& b0) {
  auto [a, b] = promoted(a0, b0);
  if (is_float(a.type())) return a - b * unary(UnOp::Floor, a / b);
  if (a.type() == DType::Bool) std::tie(a, b) = std::pair{cast(DType::I32, a), cast(DType::I32, b)};
  const Expr r = a % b;  // Euclidean: in [0, |b|)
  return select(b < make_const(0, b.type()) && r != make_const(0, r.type()), r + b, r);
}

Expr floor_divide(const Expr& a0, const Expr& b0) {
  auto [a, b] = promoted(a0, b0);
  if (is_float(a.type())) return unary(UnOp::Floor, a / b);
  if (a.type() == DType::Bool) std::tie(a, b) = std::pair{cast(DType::I32, a), cast(DType::I32, b)};
  const Expr q = a / b, r = a % b;  // Euclidean; numpy floors, which differs for b < 0
  return select(b < make_const(0, b.type()) && r != make_const(0, r.type()), q - make_const(1, q.type()), q);
}

Expr fmod(const Expr& a0, const Expr& b0) {
  const Expr a = fl(a0), b = fl(b0);
  return a - b * unary(UnOp::Trunc, a / b);
}

using Fn = std::function<Expr(const Expr&, const Expr&)>;
const std::map<std::string, Fn>& defs() {
  static const std::map<std::string, Fn> d = {
      {"add", [](const Expr& a, const Expr& b) { return a + b; }},
      {"sub", [](const Expr& a, const Expr& b) { return a - b; }},
      {"mul", [](const Expr& a, const Expr& b) { return a * b; }},
      {"div", [](const Expr& a, const Expr& b) { return a / b; }},
      {"pow", [](const Expr& a, const Expr& b) { return pto::pow(a, b); }},
      {"mod", numpy_mod},
      {"fmod", fmod},
      {"floor_divide", floor_divide},
      {"maximum", [](const Expr& a, const Expr& b) { return max(a, b); }},
      {"minimum", [](const Expr& a, const Expr& b) { return min(a, b); }},
      {"atan2", [](const Expr& a, const Expr& b) { return binary(BinOp::Atan2, a, b); }},
      {"squared_difference", [](const Expr& a, const Expr& b) { return (a - b) * (a - b); }},
      {"prelu", [](const Expr& x, const Expr& s) { return select(x < make_const(0, x.type()), x * s, x); }},
      {"equal", [](const Expr& a, const Expr& b) { return a == b; }},
      {"not_equal", [](const Expr& a, const Expr& b) { return a != b; }},
      {"less", [](const Expr& a, const Expr& b) { return a < b; }},
      {"less_equal", [](const Expr& a, const Expr& b) { return a <= b; }},
      {"greater", [](const Expr& a, const Expr& b) { return a > b; }},
      {"greater_equal", [](const Expr& a, const Expr& b) { return a >= b; }},
      {"logical_and", [](const Expr& a, const Expr& b) { return a && b; }},
      {"logical_or", [](const Expr& a, const Expr& b) { return a || b; }},
      {"logical_xor", [](const Expr& a, const Expr& b) { return binary(BinOp::Ne, !a, !b); }},
  };
  return d;
}

}  // namespace

std::vector<std::string> binary_op_names() {
  std::vector<std::string> r;
  for (const auto& [n, f] : defs()) r.push_back(n);
  return r;
}

Tensor binary_op(const std::string& op, const Tensor& a, const Tensor& b, const std::string& name) {
  const auto it = defs().find(op);
  if (it == defs().end()) throw DefinitionError("unknown binary operator '" + op + "'");
  if (!a.defined() || !b.defined()) throw DefinitionError(op + ": an input is undefined");
  const Fn& f = it->second;
  return map(op, {a, b}, [&](const std::vector<Expr>& x) { return f(x[0], x[1]); }, name);
}

Tensor add(const Tensor& a, const Tensor& b, const std::string& n) { return binary_op("add", a, b, n); }
Tensor sub(const Tensor& a, const Tensor& b, const std::string& n) { return binary_op("sub", a, b, n); }
Tensor mul(const Tensor& a, const Tensor& b, const std::string& n) { return binary_op("mul", a, b, n); }
Tensor div(const Tensor& a, const Tensor& b, const std::string& n) { return binary_op("div", a, b, n); }
Tensor pow(const Tensor& a, const Tensor& b, const std::string& n) { return binary_op("pow", a, b, n); }
Tensor mod(const Tensor& a, const Tensor& b, const std::string& n) { return binary_op("mod", a, b, n); }
Tensor maximum(const Tensor& a, const Tensor& b, const std::string& n) { return binary_op("maximum", a, b, n); }
Tensor minimum(const Tensor& a, const Tensor& b, const std::string& n) { return binary_op("minimum", a, b, n); }

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b, const std::string& name) {
  return map("where", {cond, a, b}, [](const std::vector<Expr>& x) { return select(x[0], x[1], x[2]); }, name);
}

}  // namespace pto::ops
