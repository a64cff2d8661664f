// Unary elementwise operators: math functions and activations.
//
// One table maps each operator name to its element formula, so the free
// functions, unary_op() and the call() table all share one definition.
// Formulas are chosen for accuracy in narrow types: expm1 and log1p use
// Kahan's correction instead of exp(x) - 1 / log(1 + x), softplus is
// max(x, 0) + log1p(exp(-|x|)) so it never overflows, sigmoid saturates cleanly.
// Math on integer inputs computes in f32 (abs, neg, sign, floor, ..., clip and
// relu keep the integer type).
#include <cmath>
#include <limits>
#include <map>

#include "dsl/ops/Ops.h"

namespace pto::ops {
namespace {

using json = nlohmann::json;

// Reads a numeric attribute of a unary operator, with a default.
double num(const std::string& op, const json& attrs, const char* key, double def) {
  if (!attrs.is_object() || !attrs.contains(key)) return def;
  if (!attrs.at(key).is_number())
    throw DefinitionError(op + ": attribute '" + key + "' must be a number, got " + attrs.at(key).dump());
  return attrs.at(key).get<double>();
}

Expr fl(const Expr& x) { return is_float(x.type()) ? x : cast(DType::F32, x); }
Expr k(double v, const Expr& like) { return make_const(v, like.type()); }
Expr un(UnOp op, const Expr& x) { return unary(op, fl(x)); }

// exp(x) - 1 accurate near 0: u = e^x; (u - 1) * x / log(u), exact when u == 1.
Expr expm1_expr(const Expr& x0) {
  const Expr x = fl(x0);
  const Expr u = unary(UnOp::Exp, x);
  const Expr um1 = u - k(1, x);
  return select(u == k(1, x), x, select(um1 == k(-1, x), k(-1, x), um1 * x / unary(UnOp::Log, u)));
}
// log(1 + x) accurate near 0: u = 1 + x; log(u) * x / (u - 1), exact when u == 1.
Expr log1p_expr(const Expr& x0) {
  const Expr x = fl(x0);
  const Expr u = k(1, x) + x;
  return select(u == k(1, x), x, unary(UnOp::Log, u) * x / (u - k(1, x)));
}
Expr sigmoid_expr(const Expr& x0) {
  const Expr x = fl(x0);
  return k(1, x) / (k(1, x) + unary(UnOp::Exp, -x));
}
Expr softplus_expr(const Expr& x0) {
  const Expr x = fl(x0);
  return max(x, k(0, x)) + log1p_expr(unary(UnOp::Exp, -unary(UnOp::Abs, x)));
}

struct UnaryDef {
  std::vector<const char*> attrs;  // accepted attribute names
  std::function<Expr(const Expr&, const std::string&, const json&)> f;
};

using F = std::function<Expr(const Expr&, const std::string&, const json&)>;
UnaryDef simple(std::function<Expr(const Expr&)> g) {
  return {{}, [g](const Expr& x, const std::string&, const json&) { return g(x); }};
}

const std::map<std::string, UnaryDef>& defs() {
  static const std::map<std::string, UnaryDef> d = {
      {"abs", simple([](const Expr& x) { return unary(UnOp::Abs, x); })},
      {"neg", simple([](const Expr& x) { return -x; })},
      {"exp", simple([](const Expr& x) { return un(UnOp::Exp, x); })},
      {"expm1", simple(expm1_expr)},
      {"log", simple([](const Expr& x) { return un(UnOp::Log, x); })},
      {"log1p", simple(log1p_expr)},
      {"log2", simple([](const Expr& x) { return un(UnOp::Log, x) * k(1.0 / std::log(2.0), fl(x)); })},
      {"log10", simple([](const Expr& x) { return un(UnOp::Log, x) * k(1.0 / std::log(10.0), fl(x)); })},
      {"sqrt", simple([](const Expr& x) { return un(UnOp::Sqrt, x); })},
      {"rsqrt", simple([](const Expr& x) { return k(1, fl(x)) / un(UnOp::Sqrt, x); })},
      {"reciprocal", simple([](const Expr& x) { return k(1, fl(x)) / fl(x); })},
      {"square", simple([](const Expr& x) { return x * x; })},
      {"sin", simple([](const Expr& x) { return un(UnOp::Sin, x); })},
      {"cos", simple([](const Expr& x) { return un(UnOp::Cos, x); })},
      {"tan", simple([](const Expr& x) { return un(UnOp::Tan, x); })},
      {"asin", simple([](const Expr& x) { return un(UnOp::Asin, x); })},
      {"acos", simple([](const Expr& x) { return un(UnOp::Acos, x); })},
      {"atan", simple([](const Expr& x) { return un(UnOp::Atan, x); })},
      {"sinh", simple([](const Expr& x) { return un(UnOp::Sinh, x); })},
      {"cosh", simple([](const Expr& x) { return un(UnOp::Cosh, x); })},
      {"tanh", simple([](const Expr& x) { return un(UnOp::Tanh, x); })},
      {"asinh", simple([](const Expr& x) { return un(UnOp::Asinh, x); })},
      {"acosh", simple([](const Expr& x) { return un(UnOp::Acosh, x); })},
      {"atanh", simple([](const Expr& x) { return un(UnOp::Atanh, x); })},
      {"erf", simple([](const Expr& x) { return un(UnOp::Erf, x); })},
      {"sigmoid", simple(sigmoid_expr)},
      {"relu", simple([](const Expr& x) { return max(x, k(0, x)); })},
      {"relu6", simple([](const Expr& x) { return min(max(x, k(0, x)), k(6, x)); })},
      {"leaky_relu", {{"alpha"}, [](const Expr& x0, const std::string& op, const json& a) {
                        const Expr x = fl(x0);
                        return select(x >= k(0, x), x, k(num(op, a, "alpha", 0.01), x) * x);
                      }}},
      {"elu", {{"alpha"}, [](const Expr& x0, const std::string& op, const json& a) {
                 const Expr x = fl(x0);
                 return select(x > k(0, x), x, k(num(op, a, "alpha", 1.0), x) * expm1_expr(x));
               }}},
      {"selu", simple([](const Expr& x0) {
         const Expr x = fl(x0);
         const double alpha = 1.6732632423543772848170429916717, scale = 1.0507009873554804934193349852946;
         return k(scale, x) * select(x > k(0, x), x, k(alpha, x) * expm1_expr(x));
       })},
      {"celu", {{"alpha"}, [](const Expr& x0, const std::string& op, const json& a) {
                  const Expr x = fl(x0);
                  const double alpha = num(op, a, "alpha", 1.0);
                  if (alpha == 0) throw DefinitionError(op + ": alpha must be non-zero");
                  return max(x, k(0, x)) + min(k(0, x), k(alpha, x) * expm1_expr(x * k(1.0 / alpha, x)));
                }}},
      {"silu", simple([](const Expr& x) { return fl(x) * sigmoid_expr(x); })},
      {"softplus", simple(softplus_expr)},
      {"softsign", simple([](const Expr& x0) {
         const Expr x = fl(x0);
         return x / (k(1, x) + unary(UnOp::Abs, x));
       })},
      {"mish", simple([](const Expr& x) { return fl(x) * unary(UnOp::Tanh, softplus_expr(x)); })},
      {"hard_sigmoid", {{"alpha", "beta"}, [](const Expr& x0, const std::string& op, const json& a) {
                          const Expr x = fl(x0);
                          const Expr y = k(num(op, a, "alpha", 0.2), x) * x + k(num(op, a, "beta", 0.5), x);
                          return max(k(0, x), min(k(1, x), y));
                        }}},
      {"hard_swish", simple([](const Expr& x0) {
         const Expr x = fl(x0);
         return x * max(k(0, x), min(k(1, x), x * k(1.0 / 6.0, x) + k(0.5, x)));
       })},
      {"floor", simple([](const Expr& x) { return unary(UnOp::Floor, x); })},
      {"ceil", simple([](const Expr& x) { return unary(UnOp::Ceil, x); })},
      {"round", simple([](const Expr& x) { return unary(UnOp::Round, x); })},  // half to even (numpy)
      {"trunc", simple([](const Expr& x) { return unary(UnOp::Trunc, x); })},
      {"sign", simple([](const Expr& x) {
         const Expr s = select(x > k(0, x), k(1, x), select(x < k(0, x), k(-1, x), k(0, x)));
         return is_float(x.type()) ? select(unary(UnOp::IsNan, x), x, s) : s;  // sign(nan) = nan
       })},
      {"isnan", simple([](const Expr& x) { return unary(UnOp::IsNan, x); })},
      {"isinf", simple([](const Expr& x) { return unary(UnOp::IsInf, x); })},
      {"logical_not", simple([](const Expr& x) { return !x; })},
      {"clip", {{"min", "max"}, [](const Expr& x, const std::string& op, const json& a) {
                  Expr y = x;
                  const bool has_lo = a.is_object() && a.contains("min"), has_hi = a.is_object() && a.contains("max");
                  const double lo = num(op, a, "min", 0), hi = num(op, a, "max", 0);
                  if (has_lo && has_hi && lo > hi)
                    throw DefinitionError(op + ": min " + std::to_string(lo) + " is greater than max " + std::to_string(hi));
                  if (has_lo) y = max(y, make_const(lo, y.type()));
                  if (has_hi) y = min(y, make_const(hi, y.type()));
                  return y;
                }}},
      {"gelu", simple([](const Expr& x0) {
         const Expr a = fl(x0);
         return k(0.5, a) * a * (k(1, a) + unary(UnOp::Erf, a * k(M_SQRT1_2, a)));
       })},
      {"gelu_tanh", simple([](const Expr& x0) {
         const Expr a = fl(x0);
         const double c = std::sqrt(2.0 / M_PI);
         return k(0.5, a) * a * (k(1, a) + unary(UnOp::Tanh, k(c, a) * (a + k(0.044715, a) * a * a * a)));
       })},
  };
  return d;
}

}  // namespace

std::vector<std::string> unary_op_names() {
  std::vector<std::string> r;
  for (const auto& [n, d] : defs()) r.push_back(n);
  return r;
}

Tensor unary_op(const std::string& op, const Tensor& x, const nlohmann::json& attrs, const std::string& name) {
  const auto it = defs().find(op);
  if (it == defs().end()) throw DefinitionError("unknown unary operator '" + op + "'");
  if (!x.defined()) throw DefinitionError(op + ": input is undefined");
  if (!attrs.is_null() && !attrs.is_object())
    throw DefinitionError(op + ": attributes must be a JSON object, got " + attrs.dump());
  if (attrs.is_object())
    for (const auto& [key, v] : attrs.items()) {
      const auto& ok = it->second.attrs;
      if (std::find_if(ok.begin(), ok.end(), [&](const char* a) { return key == a; }) == ok.end()) {
        std::string valid;
        for (const char* a : ok) valid += (valid.empty() ? "" : ", ") + std::string(a);
        throw DefinitionError(op + ": unknown attribute '" + key + "'; valid: " + (valid.empty() ? "none" : valid));
      }
    }
  const UnaryDef& d = it->second;
  return map(op, {x}, [&](const std::vector<Expr>& v) { return d.f(v[0], op, attrs); }, name);
}

Tensor abs(const Tensor& x, const std::string& n) { return unary_op("abs", x, {}, n); }
Tensor neg(const Tensor& x, const std::string& n) { return unary_op("neg", x, {}, n); }
Tensor exp(const Tensor& x, const std::string& n) { return unary_op("exp", x, {}, n); }
Tensor expm1(const Tensor& x, const std::string& n) { return unary_op("expm1", x, {}, n); }
Tensor log(const Tensor& x, const std::string& n) { return unary_op("log", x, {}, n); }
Tensor log1p(const Tensor& x, const std::string& n) { return unary_op("log1p", x, {}, n); }
Tensor sqrt(const Tensor& x, const std::string& n) { return unary_op("sqrt", x, {}, n); }
Tensor rsqrt(const Tensor& x, const std::string& n) { return unary_op("rsqrt", x, {}, n); }
Tensor reciprocal(const Tensor& x, const std::string& n) { return unary_op("reciprocal", x, {}, n); }
Tensor sin(const Tensor& x, const std::string& n) { return unary_op("sin", x, {}, n); }
Tensor cos(const Tensor& x, const std::string& n) { return unary_op("cos", x, {}, n); }
Tensor tan(const Tensor& x, const std::string& n) { return unary_op("tan", x, {}, n); }
Tensor tanh(const Tensor& x, const std::string& n) { return unary_op("tanh", x, {}, n); }
Tensor sigmoid(const Tensor& x, const std::string& n) { return unary_op("sigmoid", x, {}, n); }
Tensor erf(const Tensor& x, const std::string& n) { return unary_op("erf", x, {}, n); }
Tensor relu(const Tensor& x, const std::string& n) { return unary_op("relu", x, {}, n); }
Tensor leaky_relu(const Tensor& x, double alpha, const std::string& n) { return unary_op("leaky_relu", x, {{"alpha", alpha}}, n); }
Tensor elu(const Tensor& x, double alpha, const std::string& n) { return unary_op("elu", x, {{"alpha", alpha}}, n); }
Tensor silu(const Tensor& x, const std::string& n) { return unary_op("silu", x, {}, n); }
Tensor softplus(const Tensor& x, const std::string& n) { return unary_op("softplus", x, {}, n); }
Tensor floor(const Tensor& x, const std::string& n) { return unary_op("floor", x, {}, n); }
Tensor ceil(const Tensor& x, const std::string& n) { return unary_op("ceil", x, {}, n); }
Tensor round(const Tensor& x, const std::string& n) { return unary_op("round", x, {}, n); }
Tensor sign(const Tensor& x, const std::string& n) { return unary_op("sign", x, {}, n); }
Tensor clip(const Tensor& x, std::optional<double> lo, std::optional<double> hi, const std::string& n) {
  json a = json::object();
  if (lo) a["min"] = *lo;
  if (hi) a["max"] = *hi;
  return unary_op("clip", x, a, n);
}
Tensor gelu(const Tensor& x, bool tanh_approximation, const std::string& n) {
  return unary_op(tanh_approximation ? "gelu_tanh" : "gelu", x, {}, n);
}

}  // namespace pto::ops
