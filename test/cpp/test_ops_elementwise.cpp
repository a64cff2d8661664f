// Unary, binary, ternary and cast operators against float64 references, one
// JIT compile per table. Shapes mix a symbolic dim (n = 5), size-1 dims and
// prime sizes; binary tables broadcast [n, 1, 5] with [3, 1].
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <random>

#include "OpsTestUtil.h"

using namespace pto;
using namespace pto::test;
using json = nlohmann::json;

namespace {
const Dim n = Dim::symbol("n");
double sigm(double x) { return 1 / (1 + std::exp(-x)); }
double softplus(double x) { return std::log1p(std::exp(x)); }
double elu(double x, double a) { return x > 0 ? x : a * std::expm1(x); }
double clip01(double x) { return std::min(1.0, std::max(0.0, x)); }

struct U {
  const char* op;
  std::function<double(double)> f;
  double lo, hi;
  json attrs = json::object();
};
std::vector<U> unary_table() {
  return {
      {"abs", [](double x) { return std::fabs(x); }, -3, 3},
      {"neg", [](double x) { return -x; }, -3, 3},
      {"exp", [](double x) { return std::exp(x); }, -3, 3},
      {"expm1", [](double x) { return std::expm1(x); }, -1e-3, 1e-3},
      {"log", [](double x) { return std::log(x); }, 0.1, 4},
      {"log1p", [](double x) { return std::log1p(x); }, -1e-3, 1e-3},
      {"log2", [](double x) { return std::log2(x); }, 0.1, 4},
      {"log10", [](double x) { return std::log10(x); }, 0.1, 4},
      {"sqrt", [](double x) { return std::sqrt(x); }, 0.1, 4},
      {"rsqrt", [](double x) { return 1 / std::sqrt(x); }, 0.2, 4},
      {"reciprocal", [](double x) { return 1 / x; }, 0.2, 3},
      {"square", [](double x) { return x * x; }, -3, 3},
      {"sin", [](double x) { return std::sin(x); }, -3, 3},
      {"cos", [](double x) { return std::cos(x); }, -3, 3},
      {"tan", [](double x) { return std::tan(x); }, -1.2, 1.2},
      {"asin", [](double x) { return std::asin(x); }, -0.9, 0.9},
      {"acos", [](double x) { return std::acos(x); }, -0.9, 0.9},
      {"atan", [](double x) { return std::atan(x); }, -3, 3},
      {"sinh", [](double x) { return std::sinh(x); }, -2, 2},
      {"cosh", [](double x) { return std::cosh(x); }, -2, 2},
      {"tanh", [](double x) { return std::tanh(x); }, -3, 3},
      {"asinh", [](double x) { return std::asinh(x); }, -3, 3},
      {"acosh", [](double x) { return std::acosh(x); }, 1.1, 4},
      {"atanh", [](double x) { return std::atanh(x); }, -0.9, 0.9},
      {"erf", [](double x) { return std::erf(x); }, -3, 3},
      {"sigmoid", sigm, -6, 6},
      {"relu", [](double x) { return std::max(x, 0.0); }, -3, 3},
      {"relu6", [](double x) { return std::min(std::max(x, 0.0), 6.0); }, -3, 9},
      {"leaky_relu", [](double x) { return x >= 0 ? x : 0.1 * x; }, -3, 3, {{"alpha", 0.1}}},
      {"elu", [](double x) { return elu(x, 0.7); }, -3, 3, {{"alpha", 0.7}}},
      {"selu", [](double x) { return 1.0507009873554805 * elu(x, 1.6732632423543772); }, -3, 3},
      {"celu",
       [](double x) { return std::max(0.0, x) + std::min(0.0, 2.0 * std::expm1(x / 2.0)); },
       -3,
       3,
       {{"alpha", 2.0}}},
      {"silu", [](double x) { return x * sigm(x); }, -5, 5},
      {"softplus", softplus, -20, 20},
      {"softsign", [](double x) { return x / (1 + std::fabs(x)); }, -3, 3},
      {"mish", [](double x) { return x * std::tanh(softplus(x)); }, -5, 5},
      {"hard_sigmoid", [](double x) { return clip01(0.2 * x + 0.5); }, -4, 4},
      {"hard_swish", [](double x) { return x * clip01(x / 6 + 0.5); }, -5, 5},
      {"gelu", [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }, -3, 3},
      {"gelu_tanh",
       [](double x) {
         return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
       },
       -3, 3},
      {"floor", [](double x) { return std::floor(x); }, -3, 3},
      {"ceil", [](double x) { return std::ceil(x); }, -3, 3},
      {"round", [](double x) { return std::nearbyint(x); }, -3, 3},
      {"trunc", [](double x) { return std::trunc(x); }, -3, 3},
      {"sign", [](double x) { return x > 0   ? 1.0
                                     : x < 0 ? -1.0
                                             : 0.0; }, -3, 3},
      {"isnan", [](double x) { return std::isnan(x) ? 1.0 : 0.0; }, -3, 3},
      {"isinf", [](double x) { return std::isinf(x) ? 1.0 : 0.0; }, -3, 3},
      {"logical_not", [](double x) { return x == 0 ? 1.0 : 0.0; }, -1, 1},
      {"clip",
       [](double x) { return std::min(std::max(x, -0.5), 0.75); },
       -3,
       3,
       {{"min", -0.5}, {"max", 0.75}}},
      // clang-format off
      {"shrink", [](double x) { return x < -0.7 ? x + 0.2 : x > 0.7 ? x - 0.2 : 0.0; }, -3, 3, {{"lambd", 0.7}, {"bias", 0.2}}},
      {"soft_shrink", [](double x) { return x > 0.5 ? x - 0.5 : x < -0.5 ? x + 0.5 : 0.0; }, -3, 3},
      {"hard_shrink", [](double x) { return std::fabs(x) > 0.5 ? x : 0.0; }, -3, 3},
      {"tanh_shrink", [](double x) { return x - std::tanh(x); }, -3, 3},
      {"thresholded_relu", [](double x) { return x > 0.4 ? x : 0.0; }, -3, 3, {{"alpha", 0.4}}},
      {"log_sigmoid", [](double x) { return -std::log1p(std::exp(-x)); }, -8, 8},
      {"swish", [](double x) { return x * sigm(1.5 * x); }, -5, 5, {{"alpha", 1.5}}},
      {"quick_gelu", [](double x) { return x * sigm(1.702 * x); }, -5, 5},
      {"exp2", [](double x) { return std::exp2(x); }, -6, 6},
      {"cbrt", [](double x) { return std::cbrt(x); }, -9, 9},
      // erfc in the tail: relative accuracy where 1 - erf(x) would be 0 in f32.
      {"erfc", [](double x) { return std::erfc(x); }, -3, 9},
      {"logit", [](double x) { return std::log(x / (1 - x)); }, 0.01, 0.99},
      {"logit", [](double x) { const double y = std::min(std::max(x, 0.1), 0.9); return std::log(y / (1 - y)); }, 0.01, 0.99, {{"eps", 0.1}}},
      {"sinc", [](double x) { return x == 0 ? 1.0 : std::sin(M_PI * x) / (M_PI * x); }, -3, 3},
      {"deg2rad", [](double x) { return x * M_PI / 180; }, -360, 360},
      {"rad2deg", [](double x) { return x * 180 / M_PI; }, -7, 7},
      {"nan_to_num", [](double x) { return x; }, -3, 3},
      {"signbit", [](double x) { return std::signbit(x) ? 1.0 : 0.0; }, -3, 3},
      {"isfinite", [](double x) { return std::isfinite(x) ? 1.0 : 0.0; }, -3, 3},
      // clang-format on
  };
}

Ref ref_of(std::function<double(double)> f) {
  return ew([f](const std::vector<double>& v) { return f(v[0]); });
}
}  // namespace

TEST_CASE("unary operators match float64 in f32 (symbolic dim)", "[ops][unary]") {
  std::vector<Case> cases;
  for (const U& u : unary_table()) {
    // f32: Halide's exp/log/trig polynomials are within a few ulp; 1e-5 relative plus 2e-6
    // absolute (values are O(1..20)) is ~100 ulp of f32, far below any formula error.
    cases.push_back({u.op, u.attrs, {{{n, 7}, DType::F32, u.lo, u.hi}}, ref_of(u.f), 1e-5, 2e-6});
  }
  // logical_not on exact zeros and a size-1 / prime-size broadcast shape.
  cases.push_back({"logical_not", {}, {{{3, 1, 5}, DType::F32, -1, 1, true}}, ref_of([](double x) { return x == 0; }), 0, 0});
  check_cases("unary_f32", cases);
}

TEST_CASE("unary operators in f64, f16 and bf16", "[ops][unary][dtype]") {
  std::vector<Case> cases;
  const std::vector<std::string> f64_ops = {"exp", "log", "sqrt", "tanh", "sigmoid", "expm1", "log1p", "softplus", "silu"};
  for (const U& u : unary_table()) {
    if (std::find(f64_ops.begin(), f64_ops.end(), u.op) != f64_ops.end())
      // f64: libm-accurate paths; 1e-12 relative leaves room for a few ulp per operation.
      cases.push_back({u.op, u.attrs, {{{4, 3}, DType::F64, u.lo, u.hi}}, ref_of(u.f), 1e-12, 1e-14});
  }
  for (const char* op : {"relu", "exp", "sigmoid", "gelu", "tanh"}) {
    U u;
    for (const U& x : unary_table())
      if (x.op == std::string(op)) u = x;
    // f16: math runs in f32 and each narrow intermediate rounds to 2^-11 relative; ~4
    // roundings -> 4e-3. bf16 keeps 8 bits (2^-9 per rounding) -> 3e-2.
    cases.push_back({u.op, u.attrs, {{{7}, DType::F16, u.lo, u.hi}}, ref_of(u.f), 4e-3, 4e-3});
    cases.push_back({u.op, u.attrs, {{{7}, DType::BF16, u.lo, u.hi}}, ref_of(u.f), 3e-2, 3e-2});
  }
  check_cases("unary_dtypes", cases);
}

TEST_CASE("binary and ternary operators broadcast like numpy", "[ops][binary]") {
  const Shape A{n, 1, 5}, B{3, 1};
  auto f2 = [](std::function<double(double, double)> f) {
    return ew([f](const std::vector<double>& v) { return f(v[0], v[1]); });
  };
  auto npmod = [](double a, double b) { return a - b * std::floor(a / b); };
  // f32 arithmetic: one or two roundings of O(10) values -> 1e-6 relative, 1e-6 absolute.
  const double rt = 1e-6, at = 1e-6;
  std::vector<Case> c = {
      {"add", {}, {{A}, {B}}, f2([](double a, double b) { return a + b; }), rt, at},
      {"sub", {}, {{A}, {B}}, f2([](double a, double b) { return a - b; }), rt, at},
      {"mul", {}, {{A}, {B}}, f2([](double a, double b) { return a * b; }), rt, at},
      {"div",
       {},
       {{A}, {B, DType::F32, 0.5, 2}},
       f2([](double a, double b) { return a / b; }),
       rt,
       at},
      // pow goes through exp/log in f32: 1e-5 relative.
      {"pow",
       {},
       {{A, DType::F32, 0.1, 3}, {B, DType::F32, -2, 2}},
       f2([](double a, double b) { return std::pow(a, b); }),
       1e-5,
       1e-6},
      {"mod", {}, {{A, DType::F32, -5, 5}, {B, DType::F32, 0.5, 2}}, f2(npmod), 1e-5, 1e-5},
      {"mod", {}, {{A, DType::F32, -5, 5}, {B, DType::F32, -2, -0.5}}, f2(npmod), 1e-5, 1e-5},
      {"fmod",
       {},
       {{A, DType::F32, -5, 5}, {B, DType::F32, 0.5, 2}},
       f2([](double a, double b) { return std::fmod(a, b); }),
       1e-5,
       1e-5},
      {"floor_divide",
       {},
       {{A, DType::F32, -5, 5}, {B, DType::F32, 0.5, 2}},
       f2([](double a, double b) { return std::floor(a / b); }),
       0,
       1e-6},
      // Integer mod / floor_divide with negative divisors: numpy signs, exact.
      {"mod", {}, {{A, DType::I32, -9, 9, true}, {B, DType::I32, -4, -1, true}}, f2(npmod), 0, 0},
      {"mod", {}, {{A, DType::I32, -9, 9, true}, {B, DType::I32, 1, 4, true}}, f2(npmod), 0, 0},
      {"floor_divide",
       {},
       {{A, DType::I32, -9, 9, true}, {B, DType::I32, -4, -1, true}},
       f2([](double a, double b) { return std::floor(a / b); }),
       0,
       0},
      {"floor_divide",
       {},
       {{A, DType::I64, -9, 9, true}, {B, DType::I64, 1, 4, true}},
       f2([](double a, double b) { return std::floor(a / b); }),
       0,
       0},
      {"maximum", {}, {{A}, {B}}, f2([](double a, double b) { return std::max(a, b); }), 0, 0},
      {"minimum", {}, {{A}, {B}}, f2([](double a, double b) { return std::min(a, b); }), 0, 0},
      {"atan2",
       {},
       {{A}, {B}},
       f2([](double a, double b) { return std::atan2(a, b); }),
       1e-5,
       1e-6},
      {"copysign",
       {},
       {{A}, {B}},
       f2([](double a, double b) { return std::copysign(a, b); }),
       0,
       0},
      {"copysign",
       {},
       {{A, DType::I32, -9, 9, true}, {B, DType::I32, -4, 4, true}},
       f2([](double a, double b) { return std::copysign(a, b); }),
       0,
       0},
      // Bitwise operators on integers: exact.
      // clang-format off
      {"bitwise_not", {}, {{A, DType::I32, -99, 99, true}},
       ew([](const std::vector<double>& v) { return static_cast<double>(~int64_t(v[0])); }), 0, 0},
      {"bitwise_and", {}, {{A, DType::I32, -99, 99, true}, {B, DType::I32, -99, 99, true}},
       f2([](double a, double b) { return static_cast<double>(int64_t(a) & int64_t(b)); }), 0, 0},
      {"bitwise_or", {}, {{A, DType::I64, -99, 99, true}, {B, DType::I64, -99, 99, true}},
       f2([](double a, double b) { return static_cast<double>(int64_t(a) | int64_t(b)); }), 0, 0},
      {"bitwise_xor", {}, {{A, DType::U8, 0, 255, true}, {B, DType::U8, 0, 255, true}},
       f2([](double a, double b) { return static_cast<double>(int64_t(a) ^ int64_t(b)); }), 0, 0},
      {"left_shift", {}, {{A, DType::I32, -99, 99, true}, {B, DType::I32, 0, 7, true}},
       f2([](double a, double b) { return a * std::ldexp(1.0, int(b)); }), 0, 0},
      {"right_shift", {}, {{A, DType::I32, -99, 99, true}, {B, DType::I32, 0, 7, true}},
       f2([](double a, double b) { return std::floor(a / std::ldexp(1.0, int(b))); }), 0, 0},
      // clang-format on
      // clang-format off
      {"hypot", {}, {{A, DType::F32, -1e20, 1e20}, {B, DType::F32, -1e20, 1e20}},
       f2([](double a, double b) { return std::hypot(a, b); }), 1e-6, 0},
      {"logaddexp", {}, {{A, DType::F32, -90, 90}, {B, DType::F32, -90, 90}},
       f2([](double a, double b) { return std::max(a, b) + std::log1p(std::exp(-std::fabs(a - b))); }), 1e-6, 1e-6},
      {"logaddexp2", {}, {{A, DType::F32, -9, 9}, {B, DType::F32, -9, 9}},
       f2([](double a, double b) { return std::log2(std::exp2(a) + std::exp2(b)); }), 1e-6, 1e-6},
      {"xlogy", {}, {{A, DType::F32, -2, 2, true}, {B, DType::F32, 0.1, 4}},
       f2([](double x, double y) { return x == 0 ? 0.0 : x * std::log(y); }), 1e-6, 1e-6},
      {"heaviside", {}, {{A, DType::F32, -2, 2, true}, {B}},
       f2([](double x, double h) { return x < 0 ? 0.0 : x > 0 ? 1.0 : h; }), 0, 0},
      {"fmax", {}, {{A}, {B}}, f2([](double a, double b) { return std::fmax(a, b); }), 0, 0},
      {"fmin", {}, {{A}, {B}}, f2([](double a, double b) { return std::fmin(a, b); }), 0, 0},
      {"fmax", {}, {{A, DType::I32, -9, 9, true}, {B, DType::I32, -9, 9, true}},
       f2([](double a, double b) { return std::fmax(a, b); }), 0, 0},
      // lerp: a + w (b - a) in f32 with w in [0, 1].
      {"lerp", {}, {{A}, {B}, {{5}, DType::F32, 0, 1}},
       ew([](const std::vector<double>& v) { return v[0] + v[2] * (v[1] - v[0]); }), 1e-6, 1e-6},
      // clang-format on
      {"squared_difference",
       {},
       {{A}, {B}},
       f2([](double a, double b) { return (a - b) * (a - b); }),
       rt,
       at},
      {"prelu",
       {},
       {{A}, {B, DType::F32, 0, 0.5}},
       f2([](double x, double s) { return x < 0 ? s * x : x; }),
       rt,
       at},
      {"add", {}, {{{1}}, {{4, 3}}}, f2([](double a, double b) { return a + b; }), rt, at},
      {"add",
       {},
       {{{4, 3}, DType::I32, -50, 50, true}, {{3}, DType::I8, -50, 50, true}},
       f2([](double a, double b) { return a + b; }),
       0,
       0},
  };
  // Comparisons on small integers (ties happen), exact bool results.
  const std::vector<std::pair<const char*, std::function<double(double, double)>>> cmp = {
      {"equal", [](double a, double b) { return a == b; }}, {"not_equal", [](double a, double b) { return a != b; }},
      {"less", [](double a, double b) { return a < b; }}, {"less_equal", [](double a, double b) { return a <= b; }},
      {"greater", [](double a, double b) { return a > b; }}, {"greater_equal", [](double a, double b) { return a >= b; }}};
  for (const auto& [op, f] : cmp) c.push_back({op, {}, {{A, DType::F32, -2, 2, true}, {B, DType::F32, -2, 2, true}}, f2(f), 0, 0});
  const std::vector<std::pair<const char*, std::function<double(double, double)>>> logic = {
      {"logical_and", [](double a, double b) { return a != 0 && b != 0; }},
      {"logical_or", [](double a, double b) { return a != 0 || b != 0; }},
      {"logical_xor", [](double a, double b) { return (a != 0) != (b != 0); }}};
  for (const auto& [op, f] : logic) c.push_back({op, {}, {{A, DType::Bool, 0, 1, true}, {B, DType::Bool, 0, 1, true}}, f2(f), 0, 0});
  c.push_back({"where", {}, {{A, DType::Bool, 0, 1, true}, {B}, {{5}}},
               ew([](const std::vector<double>& v) { return v[0] != 0 ? v[1] : v[2]; }), 0, 0});
  check_cases("binary", c);
}

TEST_CASE("casts between f64, f32, f16, bf16, i8, i32, i64 and bool", "[ops][cast][dtype]") {
  const std::vector<DType> types = {DType::F64, DType::F32, DType::F16, DType::BF16,
                                    DType::I8,  DType::I32, DType::I64, DType::Bool};
  std::vector<Case> cases;
  for (DType from : types)
    for (DType to : types) {
      // Values in [-100, 100] fit every type; halves of integers exercise float->int truncation.
      const bool integral = !is_float(from);
      const Ref ref = ew([to](const std::vector<double>& v) { return round_to(to, v[0]); });
      // Exact, except that a float narrowed to f16/bf16 may differ from our single
      // rounding by one ulp (double rounding through f32): 2^-10 / 2^-7 relative.
      const double rt = to == DType::F16 ? 1e-3 : to == DType::BF16 ? 8e-3 : 0;
      Case k{"cast", {{"dtype", std::string(to_string(to))}}, {{{n, 3}, from, -100, 100, integral}}, ref, rt, 0};
      if (from == DType::Bool) k.ins[0].lo = 0, k.ins[0].hi = 1;
      k.label = std::string(to_string(from)) + "->" + std::string(to_string(to));
      cases.push_back(k);
    }
  check_cases("casts", cases);
}

// exp in f32 (backends/Exp.h): IEEE results at the edges, as numpy gives
// them (+inf for x > ln(FLT_MAX) and +inf, 0 for -inf, NaN for NaN), normal
// results down to x = -87 (smaller ones flush to 0, as Halide's exp did), and
// within 4e-7 relative of float64 in between.
TEST_CASE("exp: IEEE edges and f32 accuracy", "[ops][unary]") {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  std::vector<double> xs = {inf, -inf, nan, 88.8, 100, 88.7, -87, -200, 0, -0.0, 1, -1};
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> u(-86.9, 88.7);
  while (xs.size() < 4096) xs.push_back(static_cast<float>(u(rng)));
  const int64_t n = static_cast<int64_t>(xs.size());
  Program p("exp");
  p.output(ops::exp(p.input("X", {n}), "y"));
  const Kernel k(p, default_schedule(p, host_target()), host_target());
  const HostTensor got = run_f32(k, {{"X", HostTensor{{n}, xs}}})[0];
  CHECK(got.data[0] == inf);
  CHECK(got.data[1] == 0);
  CHECK(std::isnan(got.data[2]));
  CHECK(got.data[3] == inf);
  CHECK(got.data[4] == inf);
  CHECK(std::isfinite(got.data[5]));
  CHECK(got.data[6] > 1e-38);
  CHECK(got.data[7] == 0);
  double worst = 0;
  for (size_t i = 5; i < xs.size(); ++i) {
    if (xs[i] < -87) continue;
    const double want = std::exp(static_cast<double>(static_cast<float>(xs[i])));
    worst = std::max(worst, std::fabs(got.data[i] - want) / want);
  }
  CHECK(worst < 4e-7);
}
