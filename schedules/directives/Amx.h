// amx: a contraction on the CPU's matrix unit (StageSchedule::amx in Schedule.h).
//
// Sapphire Rapids' AMX multiplies a tile of up to 16 rows x 32 bf16 by one of
// 32 x 16 bf16 (laid out in pairs of k, 16 x 32 pairs) into 16 x 16 f32
// accumulators held in a tile register: 8192 multiply-adds per tdpbf16ps,
// against 16 per AVX-512 FMA. A 2-core matmul of 128 x 768 x 3072 runs at
// ~1.3 TFLOP/s against ~0.3 in f32 FMAs. The stage qualifies when it is a sum
// over one reduction variable k of a product L(.., i, k) * R(.., k, j): i and
// j its last two dims, the dims before them batch loops, L not reading j and
// R not reading i, and j a whole number of 16-column tiles. Lowering
// (backends/Amx.cpp) rounds L to bf16 into a packed copy [.., i, k] at root
// (rows padded to tiles of 16, k to steps of 32) and R per strip of 16 columns into
// AMX's pair layout [.., j / 16, k / 2, 16, 2], then runs Halide's tile
// operations. f32 factors are rounded (a precision change: the tuner offers
// it only under an accuracy budget that admits bf16); bf16 factors (a bf16
// program, mixed-precision BERT) are exact.
//
// The program is unchanged: the float64 interpreter evaluates the plain
// contraction.
#pragma once

#include <optional>
#include <string>

#include "schedules/directives/Directive.h"

namespace pto::directives {

const Directive& amx_directive();

// The contraction a stage is, in the form the matrix unit runs.
struct AmxContraction {
  std::string i, j, k;  // row dim, column dim (the stage's last two), reduction variable
  Expr lhs, rhs;        // the factors: lhs reads (.., i, k), rhs (.., k, j)
  int64_t m = 0, n = 0, depth = 0;  // static extents of i, j and k
  // Both factors bf16 already (the product's casts peeled off): nothing is rounded.
  bool exact = false;
};

// The contraction for `st`, or nullopt with the reason in `why`.
std::optional<AmxContraction> amx_contraction(const Program& p, const Stage& st,
                                              std::string* why = nullptr);

// Does the stage entry round values to bf16 that the program keeps wider
// (amx on f32 factors)? For the accuracy-budget rule of the tuner.
bool amx_rounds(const Program& p, const Stage& st, const StageSchedule& ss);

}  // namespace pto::directives
