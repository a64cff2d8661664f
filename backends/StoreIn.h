// Lowering's side of the store_in directive (schedules/directives/StoreIn.h):
// a custom lowering pass, run after Halide's own, that moves a stage's loads
// and stores into its consumer's buffer.
//
// In each loop of the consumer that the stage is computed at, the consumer
// stores value(stage[i]) at c + i, where c is fixed for the iteration (the
// row's start in the consumer's buffer); the stage's accesses at i in that
// iteration become accesses of the consumer's buffer at c + i, and the
// stage's own allocation goes once nothing uses it. c is read off the
// consumer's stores (their index minus the index of the stage's load in the
// value, with the iteration's lets substituted); where the stores do not fit
// that form (no such load, or offsets that differ or move within the
// iteration) the loop is left as Halide built it, which is correct, only not
// in place.
#pragma once

#include <Halide.h>

#include <string>

namespace pto {

// Stage buffer `stage`, stored in `consumer` in the iterations of the
// consumer's loop `loop` (the Halide loop "<consumer>.s0.<...>.<loop>").
Halide::Internal::IRMutator* make_store_in_pass(const std::string& stage,
                                                const std::string& consumer,
                                                const std::string& loop);

}  // namespace pto
