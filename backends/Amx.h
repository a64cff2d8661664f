// The Halide side of the amx directive (schedules/directives/Amx.h): a
// contraction L(.., i, k) * R(.., k, j) summed over k, defined as Halide's
// AMX tile operations.
//
// L is rounded to bf16 into a copy [.., i, k] computed at root, its rows
// padded to whole tiles of 16; R per strip of 16 columns into the pair layout
// [.., j / 16, k / 2, 16, 2] AMX reads (one tile row: 16 columns x a pair of
// k, 64 bytes), computed in the strip's loop so it stays in L1 / L2. The
// accumulator Func lives in an AMX tile register (MemoryType::AMXTile), its
// update a 16 x 16 x k-step tile vectorized atomically, which Halide's
// ExtractTileOperations turns into tilezero, tileloadd, tdpbf16ps and
// tilestored into the strip's buffer of tiles; the stage's Func copies the
// real rows out of it, so the stage may be an output of any row count.
// Strips run in parallel. Halide recognizes the tile operations only in this
// exact shape (affine tile indices, unguarded 16-row tiles, no offset added
// to a tile's index): the directive's check keeps to shapes it covers.
//
// Code using AMX needs the tile state from Linux first (request_amx_state in
// target/Target.h): the JIT asks before running such a pipeline.
#pragma once

#include <Halide.h>

#include "backends/FusedLowering.h"
#include "dsl/Program.h"
#include "schedules/Schedule.h"
#include "target/Target.h"

namespace pto {

// The stage's Func (named `func_name`), defined, and scheduled unless `schedule` is false.
Halide::Func lower_amx(const Program& p, const Stage& st, const std::string& func_name,
                       const FusedLowering& l, bool schedule);

}  // namespace pto
