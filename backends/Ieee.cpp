#include "backends/Ieee.h"

#include <limits>

namespace pto {

Halide::Expr is_nan_bits(const Halide::Expr& x) {
  const Halide::Type t = x.type();
  if (t.bits() == 64)
    return (Halide::reinterpret(Halide::Int(64), x) & Halide::Expr(int64_t{0x7fffffffffffffff})) >
           Halide::Expr(int64_t{0x7ff0000000000000});
  const Halide::Expr f = t.bits() < 32 ? Halide::cast(Halide::Float(32), x) : x;
  return (Halide::reinterpret(Halide::Int(32), f) & 0x7fffffff) > 0x7f800000;
}

Halide::Expr is_inf_bits(const Halide::Expr& x) {
  const Halide::Type t = x.type();
  if (t.bits() == 64)
    return (Halide::reinterpret(Halide::Int(64), x) & Halide::Expr(int64_t{0x7fffffffffffffff})) ==
           Halide::Expr(int64_t{0x7ff0000000000000});
  const Halide::Expr f = t.bits() < 32 ? Halide::cast(Halide::Float(32), x) : x;
  return (Halide::reinterpret(Halide::Int(32), f) & 0x7fffffff) == 0x7f800000;
}

namespace {
// The sign bit of a float (set for -0 too).
Halide::Expr sign_bit(const Halide::Expr& x) {
  const Halide::Expr f = x.type().bits() < 32 ? Halide::cast(Halide::Float(32), x) : x;
  return Halide::reinterpret(Halide::Int(f.type().bits()), f) <
         Halide::cast(Halide::Int(f.type().bits()), 0);
}

// a op b where neither is NaN, else NaN (a + b is NaN then).
Halide::Expr nan_propagating(const Halide::Expr& a, const Halide::Expr& b, const Halide::Expr& v) {
  if (!a.type().is_float()) return v;
  return Halide::select(is_nan_bits(a) || is_nan_bits(b), strict(a + b), v);
}
}  // namespace

Halide::Expr ieee_max(const Halide::Expr& a, const Halide::Expr& b) {
  return nan_propagating(a, b, Halide::max(a, b));
}
Halide::Expr ieee_min(const Halide::Expr& a, const Halide::Expr& b) {
  return nan_propagating(a, b, Halide::min(a, b));
}

Halide::Expr strict(const Halide::Expr& e) {
  return Halide::strict_float(e);
}

namespace {
Halide::Expr ordered(const Halide::Expr& a, const Halide::Expr& b) {
  return !(is_nan_bits(a) || is_nan_bits(b));
}
}  // namespace

Halide::Expr ieee_eq(const Halide::Expr& a, const Halide::Expr& b) {
  return ordered(a, b) && a == b;
}
Halide::Expr ieee_lt(const Halide::Expr& a, const Halide::Expr& b) {
  return ordered(a, b) && a < b;
}
Halide::Expr ieee_le(const Halide::Expr& a, const Halide::Expr& b) {
  return ordered(a, b) && a <= b;
}

Halide::Expr ieee_pow(const Halide::Expr& x, const Halide::Expr& y, const Halide::Expr& pow) {
  const Halide::Type t = x.type();
  const auto k = [&](double v) { return Halide::Internal::make_const(t, v); };
  const double inf = std::numeric_limits<double>::infinity();
  const Halide::Expr ax = Halide::abs(x);
  // y an odd integer (|y| >= 2^24 in f32 is always even).
  const Halide::Expr odd =
      ieee_eq(Halide::floor(y), y) && !ieee_eq(Halide::floor(y * k(0.5)), y * k(0.5));
  const Halide::Expr neg_odd = sign_bit(x) && odd;
  const Halide::Expr y_neg = ieee_lt(y, k(0));
  // x^+-Inf: 1 at |x| = 1, 0 or Inf by |x| < 1 and the sign of y.
  const Halide::Expr at_inf_y = Halide::select(
      ieee_eq(ax, k(1)), k(1), Halide::select(ieee_lt(ax, k(1)) == !y_neg, k(0), k(inf)));
  // (+-Inf)^y and (+-0)^y for finite y != 0: 0 or Inf, negative for a negative x and odd y.
  const Halide::Expr inf_x = Halide::select(y_neg, Halide::select(neg_odd, k(-0.0), k(0)),
                                            Halide::select(neg_odd, k(-inf), k(inf)));
  const Halide::Expr zero_x = Halide::select(y_neg, Halide::select(neg_odd, k(-inf), k(inf)),
                                             Halide::select(neg_odd, k(-0.0), k(0)));
  return Halide::select(
      ieee_eq(y, k(0)) || ieee_eq(x, k(1)), k(1),
      Halide::select(
          is_nan_bits(x) || is_nan_bits(y), strict(x + y),
          Halide::select(is_inf_bits(y), at_inf_y,
                         Halide::select(is_inf_bits(x), inf_x,
                                        Halide::select(ieee_eq(x, k(0)), zero_x, pow)))));
}

Halide::Expr ieee_log(const Halide::Expr& x, const Halide::Expr& log_x) {
  return Halide::select(is_nan_bits(x), x, log_x);
}

Halide::Expr ieee_erf(const Halide::Expr& x, const std::function<Halide::Expr(Halide::Expr)>& erf) {
  const Halide::Type t = x.type();
  const Halide::Expr ten = Halide::cast(t, 10);  // erf(10) is 1 in f64 as in f32
  const Halide::Expr zero = ieee_eq(x, Halide::cast(t, 0));
  return Halide::select(is_nan_bits(x) || zero, x, erf(Halide::clamp(x, -ten, ten)));
}

}  // namespace pto
