// compute_with: an elementwise stage and the reduction that reads it as one
// loop (ComputeWith in Schedule.h).
//
// Softmax writes its exponentials E = exp(x - max) in one pass over the row
// and reads them back for the row sum in another; layer_norm does the same
// with the centred values and the sum of their squares. With
// "compute_with": {"stage": S, "lanes": F} on E, the row runs once, in steps
// of F points: each step stores its points of E and folds them into F lanes
// of partials of S, which then combine with one vector reduce. It is Halide's
// compute_with of E's update with the partials' update at the step loop; the
// two fused definitions do not depend on each other (the partials evaluate
// E's value themselves, which LLVM shares with the store, both in one loop
// body). The points past the whole steps are a second update of each, in
// guarded vectors, their lanes of partials the first ones.
//
// The program is unchanged: the float64 interpreter evaluates the plain
// stages. backends/Lower.cpp defines the Funcs; this file says which pairs of
// stages qualify, owns the JSON, the check, the explain text and the
// scheduling of the fused loop.
#pragma once

#include <optional>
#include <string>

#include "schedules/directives/Directive.h"

namespace pto::directives {

const Directive& compute_with_directive();

// Why stage `st` cannot be computed with reduction `red` (empty: it can),
// from the two definitions alone: `st` elementwise with a static last dim,
// `red` a sum, prod, min or max over that dim alone, reading `st` only at its
// own indices and the reduction variable.
std::string compute_with_problem(const Program& p, const Stage& st, const std::string& red);

// The stage computed with reduction `red` under `s`, or null.
const Stage* computed_with(const Program& p, const Schedule& s, const std::string& red);

}  // namespace pto::directives
