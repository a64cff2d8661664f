#include "backends/Exp.h"

#include <limits>

#include "backends/Ieee.h"

namespace pto {
namespace {

Halide::Expr f32(double v) {
  return Halide::Internal::make_const(Halide::Float(32), v);
}

// e^x for x <= 0, 0 below -87; NaN undefined.
Halide::Expr exp_finite(const Halide::Expr& x) {
  using Halide::reinterpret;
  const Halide::Expr magic = f32(12582912.0);  // 1.5 * 2^23: adding it rounds to an integer
  const Halide::Expr n = reinterpret(Halide::Int(32), x * f32(1.44269504088896341) + magic) -
                         reinterpret(Halide::Int(32), magic);
  const Halide::Expr r = x - Halide::cast(Halide::Float(32), n) * f32(0.693147180559945309);
  Halide::Expr y = f32(1.9875691500e-4);
  for (const double c :
       {1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1})
    y = y * r + f32(c);
  y = y * (r * r) + r + f32(1);
  const Halide::Expr scaled =
      reinterpret(Halide::Float(32), reinterpret(Halide::Int(32), y) + (n << 23));
  return Halide::select(x < f32(-87), f32(0), scaled);
}

}  // namespace

Halide::Expr exp_nonpositive(const Halide::Expr& x) {
  return Halide::select(is_nan_bits(x), x, exp_finite(x));
}

Halide::Expr exp_f32(const Halide::Expr& x) {
  // 88.7228... = ln(FLT_MAX): n = 128 there, with r < 0, so e^r < 1 and
  // its exponent field (126) + 128 still encodes a finite float.
  const Halide::Expr big = f32(88.72283935546875);
  const Halide::Expr inf = f32(std::numeric_limits<double>::infinity());
  return Halide::select(is_nan_bits(x), x, Halide::select(x > big, inf, exp_finite(x)));
}

}  // namespace pto
