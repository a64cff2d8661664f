// Binary and ternary elementwise operators with numpy broadcasting.
//
// Arithmetic promotes both operands to a common type (dsl/Type.h promote());
// comparisons and logical operators produce bool. Integer `mod` and
// `floor_divide` follow numpy (the result of mod has the divisor's sign) on top
// of Halide's Euclidean integer division; float `mod` and `floor_divide` are
// numpy's divmod (npy_divmod, from fmod) and `fmod` is C fmod (sign of the
// dividend), special values included.

#include <cmath>

#include "dsl/ops/Ops.h"

namespace pto::ops {
namespace {

Expr fl(const Expr& x) { return is_float(x.type()) ? x : cast(DType::F32, x); }

// Brings integer operands to one type so that the numpy sign fix-ups see the promoted values.
std::pair<Expr, Expr> promoted(const Expr& a, const Expr& b) {
  const DType t = promote(a.type(), b.type());
  return {cast(t, a), cast(t, b)};
}

Expr k(double v, const Expr& like) {
  return make_const(v, like.type());
}

// C fmod (the sign of the dividend) as a - b trunc(a / b), with C's special
// cases: a finite a over an infinite b is a itself, and a zero result keeps
// a's sign (a * 0: a is finite there).
Expr fmod(const Expr& a0, const Expr& b0) {
  const Expr a = fl(a0), b = fl(b0);
  const Expr r0 = a - b * unary(UnOp::Trunc, a / b);
  const Expr r = select(unary(UnOp::IsInf, b) && !unary(UnOp::IsInf, a), a, r0);
  return select(r == k(0, r), a * k(0, a), r);
}

// numpy's remainder and floor division on floats: Python's divmod as numpy
// computes it (npy_divmod), from fmod, so that Inf, NaN and signed zeros come
// out as numpy's do.
struct DivMod {
  Expr div, mod;
};
DivMod float_divmod(const Expr& a, const Expr& b) {
  const Expr m0 = fmod(a, b);
  const Expr shift = m0 != k(0, m0) && ((b < k(0, b)) != (m0 < k(0, m0)));
  // Unshifted, m0 is 0 or has b's sign already: copysign gives a zero b's
  // sign by its bits (arithmetic on -0.0 may lose it under LLVM's flags).
  const Expr mod = select(shift, m0 + b, copysign(m0, b));
  const Expr d0 = (a - m0) / b;
  const Expr d = select(shift, d0 - k(1, d0), d0);
  const Expr f = unary(UnOp::Floor, d);
  const Expr rounded = select(d - f > k(0.5, d), f + k(1, f), f);
  const Expr q = a / b;
  // A NaN remainder (an infinite or NaN operand) makes the quotient NaN; the
  // test keeps the simplifier from cancelling a - (a - b trunc(a / b)).
  const Expr div =
      select(b == k(0, b), q, select(m0 != m0, m0, select(d == k(0, d), q * k(0, q), rounded)));
  return {div, mod};
}

Expr numpy_mod(const Expr& a0, const Expr& b0) {
  auto [a, b] = promoted(a0, b0);
  if (is_float(a.type())) return float_divmod(a, b).mod;
  if (a.type() == DType::Bool) std::tie(a, b) = std::pair{cast(DType::I32, a), cast(DType::I32, b)};
  const Expr r = a % b;  // Euclidean: in [0, |b|)
  return select(b < make_const(0, b.type()) && r != make_const(0, r.type()), r + b, r);
}

Expr floor_divide(const Expr& a0, const Expr& b0) {
  auto [a, b] = promoted(a0, b0);
  if (is_float(a.type())) return float_divmod(a, b).div;
  if (a.type() == DType::Bool) std::tie(a, b) = std::pair{cast(DType::I32, a), cast(DType::I32, b)};
  const Expr q = a / b, r = a % b;  // Euclidean; numpy floors, which differs for b < 0
  return select(b < make_const(0, b.type()) && r != make_const(0, r.type()), q - make_const(1, q.type()), q);
}

// sqrt(a^2 + b^2) without overflow: the larger magnitude times sqrt(1 + r^2);
// an infinite operand gives +Inf even against NaN (C and numpy).
Expr hypot(const Expr& a0, const Expr& b0) {
  auto [a, b] = promoted(fl(a0), fl(b0));
  const Expr x = unary(UnOp::Abs, a), y = unary(UnOp::Abs, b);
  const Expr hi = max(x, y), lo = min(x, y);
  const Expr r = lo / hi;
  const Expr h = select(hi == k(0, hi), hi, hi * unary(UnOp::Sqrt, k(1, r) + r * r));
  return select(unary(UnOp::IsInf, a) || unary(UnOp::IsInf, b), k(INFINITY, h), h);
}

// log(e^a + e^b) (base 2 for logaddexp2) as max + log1p(e^-|a - b|); equal
// operands (the infinities included) give max + log(2).
Expr logaddexp(const Expr& a0, const Expr& b0, bool base2) {
  auto [a, b] = promoted(fl(a0), fl(b0));
  const Expr m = max(a, b);
  const Expr d = -unary(UnOp::Abs, a - b);
  const Expr t = unary(UnOp::Exp, base2 ? d * k(M_LN2, d) : d);  // in (0, 1]
  const Expr l1p = log1p_expr(t);
  const Expr tail = base2 ? l1p * k(1 / M_LN2, l1p) : l1p;
  return select(a == b, a + k(base2 ? 1.0 : M_LN2, a), m + tail);
}

// numpy's fmax / fmin: a NaN operand gives the other one.
Expr fmax_fmin(const Expr& a0, const Expr& b0, bool is_max) {
  auto [a, b] = promoted(a0, b0);
  const Expr m = is_max ? max(a, b) : min(a, b);
  if (!is_float(a.type())) return m;
  return select(unary(UnOp::IsNan, a), b, select(unary(UnOp::IsNan, b), a, m));
}

using Fn = std::function<Expr(const Expr&, const Expr&)>;
struct Binary {
  const char* name;
  const char* summary;
  Fn f;
};

const std::vector<Binary>& binaries() {
  static const std::vector<Binary> d = {
      {"add", "a + b with numpy broadcasting", [](const Expr& a, const Expr& b) { return a + b; }},
      {"sub", "a - b with numpy broadcasting", [](const Expr& a, const Expr& b) { return a - b; }},
      {"mul", "a * b with numpy broadcasting", [](const Expr& a, const Expr& b) { return a * b; }},
      {"div", "a / b with numpy broadcasting", [](const Expr& a, const Expr& b) { return a / b; }},
      {"pow", "a ^ b", [](const Expr& a, const Expr& b) { return pto::pow(a, b); }},
      {"mod", "numpy remainder: sign of the divisor", numpy_mod},
      {"fmod", "C fmod: sign of the dividend", fmod},
      {"floor_divide", "floor(a / b) (numpy //)", floor_divide},
      {"maximum", "elementwise max with broadcasting",
       [](const Expr& a, const Expr& b) { return max(a, b); }},
      {"minimum", "elementwise min with broadcasting",
       [](const Expr& a, const Expr& b) { return min(a, b); }},
      {"atan2", "atan2(a, b)",
       [](const Expr& a, const Expr& b) { return binary(BinOp::Atan2, a, b); }},
      {"copysign", "|a| with the sign of b (numpy copysign)",
       [](const Expr& a, const Expr& b) { return copysign(a, b); }},
      {"bitwise_and", "a & b (integers, bool)",
       [](const Expr& a, const Expr& b) { return binary(BinOp::BitAnd, a, b); }},
      {"bitwise_or", "a | b (integers, bool)",
       [](const Expr& a, const Expr& b) { return binary(BinOp::BitOr, a, b); }},
      {"bitwise_xor", "a ^ b (integers, bool)",
       [](const Expr& a, const Expr& b) { return binary(BinOp::BitXor, a, b); }},
      {"left_shift", "a << b (integers, b in [0, bits))",
       [](const Expr& a, const Expr& b) { return binary(BinOp::Shl, a, b); }},
      {"right_shift", "a >> b (integers, b in [0, bits); arithmetic for signed)",
       [](const Expr& a, const Expr& b) { return binary(BinOp::Shr, a, b); }},
      {"squared_difference", "(a - b)^2",
       [](const Expr& a, const Expr& b) { return (a - b) * (a - b); }},
      {"prelu", "x if x >= 0 else slope x (slope broadcast)",
       [](const Expr& x, const Expr& s) { return select(x < make_const(0, x.type()), x * s, x); }},
      {"hypot", "sqrt(a^2 + b^2) without overflow", hypot},
      {"logaddexp", "log(e^a + e^b) without overflow",
       [](const Expr& a, const Expr& b) { return logaddexp(a, b, false); }},
      {"logaddexp2", "log2(2^a + 2^b) without overflow",
       [](const Expr& a, const Expr& b) { return logaddexp(a, b, true); }},
      {"xlogy", "x log(y), 0 where x == 0 and y is not NaN",
       [](const Expr& x0, const Expr& y0) {
         auto [x, y] = promoted(fl(x0), fl(y0));
         return select(x == k(0, x) && !unary(UnOp::IsNan, y), k(0, x), x * unary(UnOp::Log, y));
       }},
      {"heaviside", "0 for x < 0, h at 0, 1 for x > 0 (NaN stays NaN)",
       [](const Expr& x0, const Expr& h0) {
         auto [x, h] = promoted(x0, h0);
         const Expr s = select(x < k(0, x), k(0, x), select(x > k(0, x), k(1, x), h));
         return is_float(x.type()) ? select(unary(UnOp::IsNan, x), x, s) : s;
       }},
      {"fmax", "max ignoring a NaN operand (numpy fmax)",
       [](const Expr& a, const Expr& b) { return fmax_fmin(a, b, true); }},
      {"fmin", "min ignoring a NaN operand (numpy fmin)",
       [](const Expr& a, const Expr& b) { return fmax_fmin(a, b, false); }},
      {"equal", "a == b (bool)", [](const Expr& a, const Expr& b) { return a == b; }},
      {"not_equal", "a != b (bool)", [](const Expr& a, const Expr& b) { return a != b; }},
      {"less", "a < b (bool)", [](const Expr& a, const Expr& b) { return a < b; }},
      {"less_equal", "a <= b (bool)", [](const Expr& a, const Expr& b) { return a <= b; }},
      {"greater", "a > b (bool)", [](const Expr& a, const Expr& b) { return a > b; }},
      {"greater_equal", "a >= b (bool)", [](const Expr& a, const Expr& b) { return a >= b; }},
      {"logical_and", "a && b (bool)", [](const Expr& a, const Expr& b) { return a && b; }},
      {"logical_or", "a || b (bool)", [](const Expr& a, const Expr& b) { return a || b; }},
      {"logical_xor", "a != b as bools",
       [](const Expr& a, const Expr& b) { return binary(BinOp::Ne, !a, !b); }},
  };
  return d;
}

}  // namespace

std::vector<OpInfo> elementwise_ops() {
  std::vector<OpInfo> r;
  for (const Binary& d : binaries())
    r.push_back({d.name, OpKind::Elementwise, d.summary, 2, 2, {},
                 [op = std::string(d.name), f = d.f](const std::vector<Tensor>& in, const Attrs&, const std::string& n) {
                   return map(op, in, [&](const std::vector<Expr>& x) { return f(x[0], x[1]); }, n);
                 }});
  r.push_back({"where", OpKind::Elementwise, "cond ? a : b with three-way broadcasting", 3, 3, {},
               [](const std::vector<Tensor>& in, const Attrs&, const std::string& n) { return where(in[0], in[1], in[2], n); }});
  // a + w (b - a), from the nearer end so that w = 1 gives b exactly (PyTorch's lerp).
  r.push_back({"lerp",
               OpKind::Elementwise,
               "a + w (b - a), exact at w = 0 and 1 (a, b, w)",
               3,
               3,
               {},
               [](const std::vector<Tensor>& in, const Attrs&, const std::string& n) {
                 return map(
                     "lerp", in,
                     [](const std::vector<Expr>& x) {
                       const DType t =
                           promote(promote(fl(x[0]).type(), fl(x[1]).type()), fl(x[2]).type());
                       const Expr a = cast(t, x[0]), b = cast(t, x[1]), w = cast(t, x[2]);
                       return select(w < make_const(0.5, t), a + w * (b - a),
                                     b - (b - a) * (make_const(1, t) - w));
                     },
                     n);
               }});
  return r;
}

Tensor add(const Tensor& a, const Tensor& b, const std::string& n) { return call("add", {a, b}, {}, n); }
Tensor sub(const Tensor& a, const Tensor& b, const std::string& n) { return call("sub", {a, b}, {}, n); }
Tensor mul(const Tensor& a, const Tensor& b, const std::string& n) { return call("mul", {a, b}, {}, n); }
Tensor div(const Tensor& a, const Tensor& b, const std::string& n) { return call("div", {a, b}, {}, n); }
Tensor pow(const Tensor& a, const Tensor& b, const std::string& n) { return call("pow", {a, b}, {}, n); }
Tensor mod(const Tensor& a, const Tensor& b, const std::string& n) { return call("mod", {a, b}, {}, n); }
Tensor maximum(const Tensor& a, const Tensor& b, const std::string& n) { return call("maximum", {a, b}, {}, n); }
Tensor minimum(const Tensor& a, const Tensor& b, const std::string& n) { return call("minimum", {a, b}, {}, n); }

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b, const std::string& name) {
  return map("where", {cond, a, b}, [](const std::vector<Expr>& x) { return select(x[0], x[1], x[2]); }, name);
}

}  // namespace pto::ops
