// e^x for f32 vectors, in fewer instructions than Halide::exp and with IEEE
// results at the edges.
//
// x = n ln2 + r with n = round(x / ln2) by the float rounding of adding
// 1.5 * 2^23 (no floor), e^r by Cephes' expf polynomial (relative error 2e-7
// on |r| <= ln2 / 2), scaled by 2^n in the exponent bits; r is x - n ln2 in
// one FMA (Halide folds Cody and Waite's two parts of ln2 into one): n
// ulp(ln2), at most 2e-7 relative at |n| = 126. About 17 vector instructions
// where Halide's exp takes 28 (a floor split into half vectors, an even/odd
// polynomial and range checks): the exp pass was 13% of 12 heads x 384 x 64
// attention with Halide's exp, 9% with this one.
#pragma once

#include <Halide.h>

namespace pto {

// Arguments x <= 0 (a score minus its row's max; -inf where masked). Below
// -87 (and at -inf) the result is 0, so that e^r 2^n stays a normal number;
// NaN stays NaN.
Halide::Expr exp_nonpositive(const Halide::Expr& x);

// Any f32 argument, as an operator's exp: exp_nonpositive's result up to
// 88.72 (the largest whose e^x is finite), +inf above, NaN for NaN. Results
// below 2^-125 (x < -87) flush to 0, as Halide's exp does (numpy returns
// subnormals down to x = -103.9); Halide's exp gave 0 for +inf and NaN.
Halide::Expr exp_f32(const Halide::Expr& x);

}  // namespace pto
