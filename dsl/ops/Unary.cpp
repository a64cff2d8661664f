// Unary elementwise operators: math functions and activations.
//
// Each operator is one row of the operator table (Registry.h) holding its
// element formula; the free functions call their rows.
// Formulas are chosen for accuracy in narrow types: expm1 and log1p use
// Kahan's correction instead of exp(x) - 1 / log(1 + x), softplus is
// max(x, 0) + log1p(exp(-|x|)) so it never overflows, sigmoid saturates cleanly.
// Math on integer inputs computes in f32 (abs, neg, sign, floor, ..., clip and
// relu keep the integer type).
#include <cmath>
#include <limits>

#include "dsl/ops/Ops.h"

namespace pto::ops {
namespace {

using json = nlohmann::json;

Expr fl(const Expr& x) { return is_float(x.type()) ? x : cast(DType::F32, x); }
Expr k(double v, const Expr& like) { return make_const(v, like.type()); }
Expr un(UnOp op, const Expr& x) { return unary(op, fl(x)); }

// exp(x) - 1 accurate near 0: u = e^x; (u - 1) * x / log(u), exact when u == 1
// (and u itself at +Inf, where the correction is Inf / Inf).
Expr expm1_expr(const Expr& x0) {
  const Expr x = fl(x0);
  const Expr u = unary(UnOp::Exp, x);
  const Expr um1 = u - k(1, x);
  return select(u == k(1, x), x,
                select(um1 == k(-1, x), k(-1, x),
                       select(u == k(std::numeric_limits<double>::infinity(), x), u,
                              um1 * x / unary(UnOp::Log, u))));
}
Expr sigmoid_expr(const Expr& x0) {
  const Expr x = fl(x0);
  return k(1, x) / (k(1, x) + unary(UnOp::Exp, -x));
}
Expr softplus_expr(const Expr& x0) {
  const Expr x = fl(x0);
  return max(x, k(0, x)) + log1p_expr(unary(UnOp::Exp, -unary(UnOp::Abs, x)));
}

using Formula = std::function<Expr(const Expr&, const Attrs&)>;

OpInfo row(const std::string& name, const std::string& summary, Formula f, std::vector<AttrSpec> attrs = {}) {
  return {name, OpKind::Elementwise, summary, 1, 1, std::move(attrs),
          [name, f](const std::vector<Tensor>& in, const Attrs& a, const std::string& n) {
            return map(name, {in[0]}, [&](const std::vector<Expr>& v) { return f(v[0], a); }, n);
          }};
}

// Operators that are one IR function: math (on integers in f32) or exact (the input's type).
struct Direct {
  const char* name;
  UnOp op;
  bool math;
  const char* summary;
};
constexpr Direct kDirect[] = {
    {"abs", UnOp::Abs, false, "|x|"},           {"exp", UnOp::Exp, true, "e^x"},
    {"log", UnOp::Log, true, "natural log"},    {"sqrt", UnOp::Sqrt, true, "square root"},
    {"sin", UnOp::Sin, true, "sine"},           {"cos", UnOp::Cos, true, "cosine"},
    {"tan", UnOp::Tan, true, "tangent"},        {"asin", UnOp::Asin, true, "arc sine"},
    {"acos", UnOp::Acos, true, "arc cosine"},   {"atan", UnOp::Atan, true, "arc tangent"},
    {"sinh", UnOp::Sinh, true, "hyperbolic sine"}, {"cosh", UnOp::Cosh, true, "hyperbolic cosine"},
    {"tanh", UnOp::Tanh, true, "hyperbolic tangent"}, {"asinh", UnOp::Asinh, true, "inverse hyperbolic sine"},
    {"acosh", UnOp::Acosh, true, "inverse hyperbolic cosine"}, {"atanh", UnOp::Atanh, true, "inverse hyperbolic tangent"},
    {"erf", UnOp::Erf, true, "error function"}, {"floor", UnOp::Floor, false, "round down"},
    {"ceil", UnOp::Ceil, false, "round up"},    {"round", UnOp::Round, false, "round half to even"},
    {"trunc", UnOp::Trunc, false, "round toward zero"}, {"isnan", UnOp::IsNan, false, "x is NaN (bool)"},
    {"isinf", UnOp::IsInf, false, "x is +-inf (bool)"},
};

AttrSpec number(const char* name, double def) { return {name, AttrType::Float, def}; }

}  // namespace

// log(1 + x) accurate near 0: u = 1 + x; log(u) * x / (u - 1), exact when u == 1
// (and u itself at +Inf).
Expr log1p_expr(const Expr& x0) {
  const Expr x = fl(x0);
  const Expr u = k(1, x) + x;
  return select(u == k(1, x), x,
                select(u == k(std::numeric_limits<double>::infinity(), x), u,
                       unary(UnOp::Log, u) * x / (u - k(1, x))));
}
std::vector<OpInfo> unary_ops() {
  std::vector<OpInfo> r;
  for (const Direct& d : kDirect)
    r.push_back(row(d.name, d.summary, [op = d.op, math = d.math](const Expr& x, const Attrs&) {
      return math ? un(op, x) : unary(op, x);
    }));
  using A = const Attrs&;
  r.push_back(row("neg", "-x", [](const Expr& x, A) { return -x; }));
  r.push_back(row("expm1", "e^x - 1, accurate near 0", [](const Expr& x, A) { return expm1_expr(x); }));
  r.push_back(row("log1p", "log(1 + x), accurate near 0", [](const Expr& x, A) { return log1p_expr(x); }));
  r.push_back(row("log2", "base-2 log", [](const Expr& x, A) { return un(UnOp::Log, x) * k(1.0 / std::log(2.0), fl(x)); }));
  r.push_back(row("log10", "base-10 log", [](const Expr& x, A) { return un(UnOp::Log, x) * k(1.0 / std::log(10.0), fl(x)); }));
  r.push_back(row("rsqrt", "1 / sqrt(x)", [](const Expr& x, A) { return k(1, fl(x)) / un(UnOp::Sqrt, x); }));
  r.push_back(row("reciprocal", "1 / x", [](const Expr& x, A) { return k(1, fl(x)) / fl(x); }));
  r.push_back(row("square", "x * x", [](const Expr& x, A) { return x * x; }));
  r.push_back(row("sigmoid", "1 / (1 + e^-x)", [](const Expr& x, A) { return sigmoid_expr(x); }));
  r.push_back(row("relu", "max(x, 0)", [](const Expr& x, A) { return max(x, k(0, x)); }));
  r.push_back(row("relu6", "min(max(x, 0), 6)", [](const Expr& x, A) { return min(max(x, k(0, x)), k(6, x)); }));
  r.push_back(row("leaky_relu", "x if x >= 0 else alpha x (alpha)", [](const Expr& x0, A a) {
    const Expr x = fl(x0);
    return select(x >= k(0, x), x, k(a.get<double>("alpha"), x) * x);
  }, {number("alpha", 0.01)}));
  r.push_back(row("elu", "x if x > 0 else alpha (e^x - 1) (alpha)", [](const Expr& x0, A a) {
    const Expr x = fl(x0);
    return select(x > k(0, x), x, k(a.get<double>("alpha"), x) * expm1_expr(x));
  }, {number("alpha", 1.0)}));
  r.push_back(row("selu", "scaled elu with the self-normalizing constants", [](const Expr& x0, A) {
    const Expr x = fl(x0);
    const double alpha = 1.6732632423543772848170429916717, scale = 1.0507009873554804934193349852946;
    return k(scale, x) * select(x > k(0, x), x, k(alpha, x) * expm1_expr(x));
  }));
  r.push_back(row("celu", "max(0, x) + min(0, alpha (e^(x/alpha) - 1)) (alpha)", [](const Expr& x0, A a) {
    const Expr x = fl(x0);
    const double alpha = a.get<double>("alpha");
    if (alpha == 0) throw DefinitionError(a.op() + ": alpha must be non-zero");
    return max(x, k(0, x)) + min(k(0, x), k(alpha, x) * expm1_expr(x * k(1.0 / alpha, x)));
  }, {number("alpha", 1.0)}));
  r.push_back(row("silu", "x sigmoid(x) (swish)", [](const Expr& x, A) { return fl(x) * sigmoid_expr(x); }));
  r.push_back(row("softplus", "log(1 + e^x), overflow-free", [](const Expr& x, A) { return softplus_expr(x); }));
  r.push_back(row("softsign", "x / (1 + |x|)", [](const Expr& x0, A) {
    const Expr x = fl(x0);
    return x / (k(1, x) + unary(UnOp::Abs, x));
  }));
  r.push_back(row("mish", "x tanh(softplus(x))", [](const Expr& x, A) { return fl(x) * unary(UnOp::Tanh, softplus_expr(x)); }));
  r.push_back(row("hard_sigmoid", "clip(alpha x + beta, 0, 1) (alpha, beta)", [](const Expr& x0, A a) {
    const Expr x = fl(x0);
    const Expr y = k(a.get<double>("alpha"), x) * x + k(a.get<double>("beta"), x);
    return max(k(0, x), min(k(1, x), y));
  }, {number("alpha", 0.2), number("beta", 0.5)}));
  r.push_back(row("hard_swish", "x clip(x / 6 + 1/2, 0, 1)", [](const Expr& x0, A) {
    const Expr x = fl(x0);
    return x * max(k(0, x), min(k(1, x), x * k(1.0 / 6.0, x) + k(0.5, x)));
  }));
  r.push_back(row("sign", "-1, 0 or 1 (nan stays nan)", [](const Expr& x, A) {
    const Expr s = select(x > k(0, x), k(1, x), select(x < k(0, x), k(-1, x), k(0, x)));
    return is_float(x.type()) ? select(unary(UnOp::IsNan, x), x, s) : s;  // sign(nan) = nan
  }));
  r.push_back(row("logical_not", "!x (bool)", [](const Expr& x, A) { return !x; }));
  r.push_back(row("bitwise_not", "~x (integers; bool: not)",
                  [](const Expr& x, A) { return unary(UnOp::BitNot, x); }));
  r.push_back(row("clip", "min(max(x, min), max), either bound optional (min, max)", [](const Expr& x, A a) {
    const auto lo = a.opt_number("min"), hi = a.opt_number("max");
    if (lo && hi && *lo > *hi)
      throw DefinitionError(a.op() + ": min " + std::to_string(*lo) + " is greater than max " + std::to_string(*hi));
    Expr y = x;
    if (lo) y = max(y, make_const(*lo, y.type()));
    if (hi) y = min(y, make_const(*hi, y.type()));
    return y;
  }, {{"min", AttrType::Float}, {"max", AttrType::Float}}));
  r.push_back(row("gelu", "0.5 x (1 + erf(x / sqrt 2))", [](const Expr& x0, A) {
    const Expr a = fl(x0);
    // gelu(x) has x's sign: copysign keeps it on the zeros (-0, and x * 0 for
    // x << 0), which LLVM's no-signed-zeros flag would make +0.
    return copysign(k(0.5, a) * a * (k(1, a) + unary(UnOp::Erf, a * k(M_SQRT1_2, a))), a);
  }));
  r.push_back(row("gelu_tanh", "tanh approximation of gelu", [](const Expr& x0, A) {
    const Expr a = fl(x0);
    const double c = std::sqrt(2.0 / M_PI);
    return copysign(
        k(0.5, a) * a * (k(1, a) + unary(UnOp::Tanh, k(c, a) * (a + k(0.044715, a) * a * a * a))),
        a);
  }));
  // Shrinkage and smooth-step activations (ONNX Shrink / ThresholdedRelu, PyTorch's shrinks).
  r.push_back(row("shrink", "x + bias below -lambd, x - bias above lambd, else 0 (lambd, bias)",
                  [](const Expr& x, A a) {
                    const double l = a.get<double>("lambd"), b = a.get<double>("bias");
                    return select(x < k(-l, x), x + k(b, x),
                                  select(x > k(l, x), x - k(b, x), k(0, x)));
                  },
                  {number("lambd", 0.5), number("bias", 0.0)}));
  r.push_back(row("soft_shrink", "x - lambd above lambd, x + lambd below -lambd, else 0 (lambd)",
                  [](const Expr& x0, A a) {
                    const Expr x = fl(x0);
                    const double l = a.get<double>("lambd");
                    return select(x > k(l, x), x - k(l, x),
                                  select(x < k(-l, x), x + k(l, x), k(0, x)));
                  },
                  {number("lambd", 0.5)}));
  r.push_back(row("hard_shrink", "x where |x| > lambd, else 0 (lambd)",
                  [](const Expr& x, A a) {
                    return select(unary(UnOp::Abs, x) > k(a.get<double>("lambd"), x), x, k(0, x));
                  },
                  {number("lambd", 0.5)}));
  r.push_back(row("tanh_shrink", "x - tanh(x)", [](const Expr& x0, A) {
    const Expr x = fl(x0);
    return x - unary(UnOp::Tanh, x);
  }));
  r.push_back(
      row("thresholded_relu", "x where x > alpha, else 0 (alpha)",
          [](const Expr& x, A a) { return select(x > k(a.get<double>("alpha"), x), x, k(0, x)); },
          {number("alpha", 1.0)}));
  r.push_back(row("log_sigmoid", "log(sigmoid(x)) = -softplus(-x)", [](const Expr& x0, A) {
    const Expr x = fl(x0);
    return -softplus_expr(-x);
  }));
  r.push_back(row("swish", "x sigmoid(alpha x) (alpha; silu is alpha = 1)",
                  [](const Expr& x0, A a) {
                    const Expr x = fl(x0);
                    return x * sigmoid_expr(k(a.get<double>("alpha"), x) * x);
                  },
                  {number("alpha", 1.0)}));
  r.push_back(row("quick_gelu", "x sigmoid(1.702 x) (CLIP's gelu)", [](const Expr& x0, A) {
    const Expr x = fl(x0);
    return x * sigmoid_expr(k(1.702, x) * x);
  }));
  // Math functions numpy / C have that are not one IR function.
  r.push_back(row("exp2", "2^x", [](const Expr& x0, A) {
    const Expr x = fl(x0);
    return unary(UnOp::Exp, x * k(M_LN2, x));
  }));
  r.push_back(row("cbrt", "cube root (negative for negative x)", [](const Expr& x0, A) {
    const Expr x = fl(x0);
    return copysign(pto::pow(unary(UnOp::Abs, x), k(1.0 / 3.0, x)), x);
  }));
  r.push_back(row("erfc", "1 - erf(x), accurate in the tail", [](const Expr& x0, A) {
    // Chebyshev fit of erfc (Numerical Recipes' erfcc, relative error < 1.2e-7
    // everywhere): 1 - erf(x) would cancel to 0 in f32 for x > ~4.
    const Expr x = fl(x0);
    const Expr z = unary(UnOp::Abs, x);
    const Expr t = k(1, x) / (k(1, x) + k(0.5, x) * z);
    const double c[] = {-1.26551223, 1.00002368,  0.37409196, 0.09678418,  -0.18628806,
                        0.27886807,  -1.13520398, 1.48851587, -0.82215223, 0.17087277};
    Expr poly = k(c[9], x);
    for (int i = 8; i >= 0; --i) poly = k(c[i], x) + t * poly;
    const Expr tail = t * unary(UnOp::Exp, -z * z + poly);
    return select(x >= k(0, x), tail, k(2, x) - tail);
  }));
  r.push_back(row("logit", "log(x / (1 - x)), x clamped to [eps, 1 - eps] when eps is given (eps)",
                  [](const Expr& x0, A a) {
                    Expr x = fl(x0);
                    if (const auto eps = a.opt_number("eps"))
                      x = max(k(*eps, x), min(k(1 - *eps, x), x));
                    return unary(UnOp::Log, x / (k(1, x) - x));
                  },
                  {{"eps", AttrType::Float}}));
  r.push_back(row("sinc", "sin(pi x) / (pi x), 1 at 0 (numpy sinc)", [](const Expr& x0, A) {
    const Expr x = fl(x0);
    const Expr y = k(M_PI, x) * select(x == k(0, x), k(1e-20, x), x);
    return unary(UnOp::Sin, y) / y;
  }));
  r.push_back(
      row("deg2rad", "x pi / 180", [](const Expr& x, A) { return fl(x) * k(M_PI / 180, fl(x)); }));
  r.push_back(
      row("rad2deg", "x 180 / pi", [](const Expr& x, A) { return fl(x) * k(180 / M_PI, fl(x)); }));
  r.push_back(
      row("nan_to_num",
          "NaN -> nan, +Inf -> posinf, -Inf -> neginf (defaults: 0, the type's largest and lowest)",
          [](const Expr& x, A a) {
            if (!is_float(x.type())) return x;
            const double big = x.type() == DType::F64    ? std::numeric_limits<double>::max()
                               : x.type() == DType::F16  ? 65504.0
                               : x.type() == DType::BF16 ? 3.38953139e38
                                                         : std::numeric_limits<float>::max();
            const Expr pos = k(a.opt_number("posinf").value_or(big), x),
                       neg = k(a.opt_number("neginf").value_or(-big), x);
            return select(unary(UnOp::IsNan, x), k(a.get<double>("nan"), x),
                          select(unary(UnOp::IsInf, x), select(x > k(0, x), pos, neg), x));
          },
          {number("nan", 0.0), {"posinf", AttrType::Float}, {"neginf", AttrType::Float}}));
  r.push_back(
      row("signbit", "the sign bit is set (bool; -0.0 and -NaN included)", [](const Expr& x, A) {
        return is_float(x.type()) ? copysign(k(1, x), x) < k(0, x) : x < k(0, x);
      }));
  r.push_back(row("isfinite", "x is neither NaN nor +-inf (bool)", [](const Expr& x, A) {
    return is_float(x.type()) ? !unary(UnOp::IsNan, x) && !unary(UnOp::IsInf, x) : x == x;
  }));
  return r;
}

Tensor abs(const Tensor& x, const std::string& n) { return call("abs", {x}, {}, n); }
Tensor neg(const Tensor& x, const std::string& n) { return call("neg", {x}, {}, n); }
Tensor exp(const Tensor& x, const std::string& n) { return call("exp", {x}, {}, n); }
Tensor expm1(const Tensor& x, const std::string& n) { return call("expm1", {x}, {}, n); }
Tensor log(const Tensor& x, const std::string& n) { return call("log", {x}, {}, n); }
Tensor log1p(const Tensor& x, const std::string& n) { return call("log1p", {x}, {}, n); }
Tensor sqrt(const Tensor& x, const std::string& n) { return call("sqrt", {x}, {}, n); }
Tensor rsqrt(const Tensor& x, const std::string& n) { return call("rsqrt", {x}, {}, n); }
Tensor reciprocal(const Tensor& x, const std::string& n) { return call("reciprocal", {x}, {}, n); }
Tensor sin(const Tensor& x, const std::string& n) { return call("sin", {x}, {}, n); }
Tensor cos(const Tensor& x, const std::string& n) { return call("cos", {x}, {}, n); }
Tensor tan(const Tensor& x, const std::string& n) { return call("tan", {x}, {}, n); }
Tensor tanh(const Tensor& x, const std::string& n) { return call("tanh", {x}, {}, n); }
Tensor sigmoid(const Tensor& x, const std::string& n) { return call("sigmoid", {x}, {}, n); }
Tensor erf(const Tensor& x, const std::string& n) { return call("erf", {x}, {}, n); }
Tensor relu(const Tensor& x, const std::string& n) { return call("relu", {x}, {}, n); }
Tensor leaky_relu(const Tensor& x, double alpha, const std::string& n) { return call("leaky_relu", {x}, {{"alpha", alpha}}, n); }
Tensor elu(const Tensor& x, double alpha, const std::string& n) { return call("elu", {x}, {{"alpha", alpha}}, n); }
Tensor silu(const Tensor& x, const std::string& n) { return call("silu", {x}, {}, n); }
Tensor softplus(const Tensor& x, const std::string& n) { return call("softplus", {x}, {}, n); }
Tensor floor(const Tensor& x, const std::string& n) { return call("floor", {x}, {}, n); }
Tensor ceil(const Tensor& x, const std::string& n) { return call("ceil", {x}, {}, n); }
Tensor round(const Tensor& x, const std::string& n) { return call("round", {x}, {}, n); }
Tensor sign(const Tensor& x, const std::string& n) { return call("sign", {x}, {}, n); }
Tensor clip(const Tensor& x, std::optional<double> lo, std::optional<double> hi, const std::string& n) {
  json a = json::object();
  if (lo) a["min"] = *lo;
  if (hi) a["max"] = *hi;
  return call("clip", {x}, a, n);
}
Tensor gelu(const Tensor& x, bool tanh_approximation, const std::string& n) {
  return call(tanh_approximation ? "gelu_tanh" : "gelu", {x}, {}, n);
}

}  // namespace pto::ops
