// IEEE semantics for the lowering's float expressions: NaN, Inf and signed
// zeros come out as numpy computes them.
//
// Halide compiles float code as if no value were NaN or Inf: its simplifier
// folds x * 0 to 0 and x == x to true, LLVM gets the no-NaN fast-math flags
// (a compare may pick either answer for a NaN operand), min/max return the
// other operand of a NaN, and its log and erf polynomials give garbage for
// NaN and Inf. The lowering (backends/Lower.cpp) builds those constructs
// through these functions instead, unless the stage has `fast_math`
// (schedules/directives/FastMath.h). The guards are integer tests or one
// select per element; contractions' multiply-adds are left alone (they
// propagate NaN and Inf by themselves), so the hot loops keep their FMAs.
#pragma once

#include <Halide.h>

#include <functional>

namespace pto {

// NaN by its bits: an integer test that no float flag folds away. Any float
// width (f16 / bf16 tested in f32).
Halide::Expr is_nan_bits(const Halide::Expr& x);

// +-Inf by its bits.
Halide::Expr is_inf_bits(const Halide::Expr& x);

// numpy's maximum / minimum: NaN when either operand is NaN (Halide's return
// the other one). Integers: Halide's.
Halide::Expr ieee_max(const Halide::Expr& a, const Halide::Expr& b);
Halide::Expr ieee_min(const Halide::Expr& a, const Halide::Expr& b);

// A float's total-order key: an integer of its width that orders as the
// floats do (-Inf < ... < -0 < +0 < ... < +Inf), with every NaN the largest
// key (`nan_largest`) or the smallest. A float min / max reduction runs as
// the integer one over these keys: NaN then wins as numpy's does, and the
// combine stays a plain integer max, which rfactor and atomic vectorization
// prove associative (a NaN-propagating float combine is not one they know).
Halide::Expr order_key(const Halide::Expr& x, bool nan_largest);
// The float of type `t` a key stands for (a NaN key gives a NaN).
Halide::Expr from_order_key(const Halide::Expr& key, Halide::Type t);

// |a| with the sign of b, by their bits: a zero keeps its sign where LLVM's
// no-signed-zeros flag (set by Halide on float arithmetic) would drop it.
Halide::Expr copysign_bits(const Halide::Expr& a, const Halide::Expr& b);

// `e` (arithmetic the simplifier would fold into a wrong answer for NaN or
// Inf: x * 0, 0 / x, x - x, x / x) kept as written: Halide's strict_float.
Halide::Expr strict(const Halide::Expr& e);

// Float comparisons that are false for a NaN operand (!= true), as numpy's:
// the compare itself is folded as if no operand were NaN (x == x to true,
// a <= b rewritten as !(b < a)), so it is guarded by the NaN tests of its
// operands, integer tests that nothing folds.
Halide::Expr ieee_eq(const Halide::Expr& a, const Halide::Expr& b);
Halide::Expr ieee_lt(const Halide::Expr& a, const Halide::Expr& b);
Halide::Expr ieee_le(const Halide::Expr& a, const Halide::Expr& b);

// x^y with C's (and numpy's) special cases: x^0 = 1^y = 1 (NaN too), NaN
// otherwise for a NaN operand, and the rules for +-Inf and +-0 operands
// (C11 Annex F.10.4.4); `pow` computes it for finite, nonzero operands.
Halide::Expr ieee_pow(const Halide::Expr& x, const Halide::Expr& y, const Halide::Expr& pow);

// log(x) with log(NaN) = NaN (Halide's polynomial reads NaN's exponent bits).
Halide::Expr ieee_log(const Halide::Expr& x, const Halide::Expr& log_x);
// erf(x) with erf(+-Inf) = +-1, erf(-0) = -0, NaN kept; `erf` computes it on
// finite arguments (Halide's erf gives NaN for |x| > ~1e19).
Halide::Expr ieee_erf(const Halide::Expr& x, const std::function<Halide::Expr(Halide::Expr)>& erf);

}  // namespace pto
