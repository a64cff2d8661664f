// The Halide side of the online_softmax directive (schedules/directives/
// OnlineSoftmax.h): a contraction over a softmax, O = softmax(X) V, defined
// as FlashAttention's loop instead of from the materialized probabilities.
//
// Per tile of query rows (parallel over batch x tiles) a Tuple Func carries
// the running output, max and sum, updated over key blocks; each block's
// scores (the contraction that produces X, register-tiled, its transposed
// operand packed once), row max, exponentials, row sum and product with V are
// computed at that update's block loop, so they stay in L1/L2. The block
// loop of a causal X (-inf above a diagonal) stops at the tile's last row.
// With a single key block (a static key length no longer than a block) the
// tile's output is that block's P V / l, without the running state.
// Lowering (backends/Lower.cpp) calls this for a stage whose schedule sets
// online_softmax, in place of the stage's plain definition.
#pragma once

#include <Halide.h>

#include <functional>
#include <map>
#include <string>

#include "backends/FusedLowering.h"
#include "dsl/Program.h"
#include "schedules/Schedule.h"
#include "target/Target.h"

namespace pto {

// The stage's Func (named `func_name`), defined, and scheduled unless `schedule` is false.
Halide::Func lower_online_softmax(const Program& p, const Stage& st, const OnlineSoftmax& os, const Target& t,
                                  const std::string& func_name, const FusedLowering& l, bool schedule);

}  // namespace pto
