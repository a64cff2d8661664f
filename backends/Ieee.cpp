#include "backends/Ieee.h"

#include <cmath>
#include <cstring>
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

namespace {
// The sign-magnitude to two's-complement map, its own inverse: negative
// floats' magnitude bits flipped, so larger negative floats get smaller keys.
Halide::Expr flip_negatives(const Halide::Expr& bits) {
  const Halide::Type it = bits.type();
  return bits ^ ((bits >> (it.bits() - 1)) & it.max());
}
}  // namespace

// The bits of a float constant of type `t`, sign-extended.
int64_t float_bits(double v, Halide::Type t) {
  switch (t.bits()) {
    case 64: {
      int64_t b;
      std::memcpy(&b, &v, sizeof b);
      return b;
    }
    case 32: {
      const float f = static_cast<float>(v);
      int32_t b;
      std::memcpy(&b, &f, sizeof b);
      return b;
    }
    default:
      return static_cast<int16_t>(t.is_bfloat() ? Halide::bfloat16_t(v).to_bits()
                                                : Halide::float16_t(v).to_bits());
  }
}

Halide::Expr order_key(const Halide::Expr& x, bool nan_largest) {
  const Halide::Type it = Halide::Int(x.type().bits());
  const Halide::Expr nan_key = nan_largest ? it.max() : it.min();
  // A constant (a reduction's identity) becomes a constant key: the
  // accumulator's initial stores stay plain vector stores.
  if (const auto* c = x.as<Halide::Internal::FloatImm>(); c && !std::isnan(c->value)) {
    const int64_t b = float_bits(c->value, x.type());
    return Halide::Internal::make_const(
        it, b < 0 ? b ^ static_cast<int64_t>(it.max().as<Halide::Internal::IntImm>()->value) : b);
  }
  // Halide's is_nan is one unordered compare kept under fast-math flags (a
  // third faster here than the integer is_nan_bits).
  const Halide::Expr nan =
      Halide::is_nan(x.type().bits() < 32 ? Halide::cast(Halide::Float(32), x) : x);
  return Halide::select(nan, nan_key, flip_negatives(Halide::reinterpret(it, x)));
}

Halide::Expr from_order_key(const Halide::Expr& key, Halide::Type t) {
  // The NaN keys (INT_MAX, INT_MIN) map to NaN bit patterns (0x7fff..., 0xffff...).
  return Halide::reinterpret(t, flip_negatives(key));
}

Halide::Expr copysign_bits(const Halide::Expr& a, const Halide::Expr& b) {
  const Halide::Type t = a.type(), it = Halide::Int(t.bits());
  const Halide::Expr magnitude = Halide::reinterpret(it, a) & it.max();
  const Halide::Expr sign = Halide::reinterpret(it, Halide::cast(t, b)) & it.min();
  return Halide::reinterpret(t, magnitude | sign);
}

Halide::Expr strict(const Halide::Expr& e) {
  return Halide::strict_float(e);
}

namespace {
Halide::Expr ordered(const Halide::Expr& a, const Halide::Expr& b) {
  return !(is_nan_bits(a) || is_nan_bits(b));
}

// An infinite float constant: LLVM's no-infs flag makes a float compare with
// one poison (x == inf folds to false), so such compares go by order keys.
bool infinite_constant(const Halide::Expr& e) {
  const auto* c = e.as<Halide::Internal::FloatImm>();
  return c && std::isinf(c->value);
}

// a `cmp` b for non-NaN operands: floats, or their order keys (which order
// as the floats do; +-0 differ, but neither side is 0 where an infinity is).
template <typename Cmp>
Halide::Expr compare(const Halide::Expr& a, const Halide::Expr& b, Cmp cmp) {
  if (a.type().is_float() && (infinite_constant(a) || infinite_constant(b)))
    return ordered(a, b) && cmp(order_key(a, true), order_key(b, true));
  return ordered(a, b) && cmp(a, b);
}
}  // namespace

Halide::Expr ieee_eq(const Halide::Expr& a, const Halide::Expr& b) {
  return compare(a, b, [](const Halide::Expr& x, const Halide::Expr& y) { return x == y; });
}
Halide::Expr ieee_lt(const Halide::Expr& a, const Halide::Expr& b) {
  return compare(a, b, [](const Halide::Expr& x, const Halide::Expr& y) { return x < y; });
}
Halide::Expr ieee_le(const Halide::Expr& a, const Halide::Expr& b) {
  return compare(a, b, [](const Halide::Expr& x, const Halide::Expr& y) { return x <= y; });
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
  // (+-Inf)^y and (+-0)^y for finite y != 0: 0 or Inf (its sign below).
  const Halide::Expr inf_x = Halide::select(y_neg, k(0), k(inf));
  const Halide::Expr zero_x = Halide::select(y_neg, k(inf), k(0));
  const Halide::Expr r = Halide::select(
      ieee_eq(y, k(0)) || ieee_eq(x, k(1)), k(1),
      Halide::select(
          is_nan_bits(x) || is_nan_bits(y), strict(x + y),
          Halide::select(is_inf_bits(y), at_inf_y,
                         Halide::select(is_inf_bits(x), inf_x,
                                        Halide::select(ieee_eq(x, k(0)), zero_x, pow)))));
  // x^y is negative exactly for a negative x and an odd y (else positive or
  // NaN): the sign set by its bits, which LLVM's no-signed-zeros flag cannot
  // drop from a -0.
  return copysign_bits(r, Halide::select(neg_odd, k(-1), k(1)));
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
