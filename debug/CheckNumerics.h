// Where a NaN or Inf first appears: the stage, its index, what it read there.
//
// A kernel's outputs hold NaN or Inf; which stage made it? locate_nonfinite()
// runs an instrumented build of the program: every float stage materialized
// (made an output, stored in its own type) under the plain loops, each keeping
// its schedule's compute and accumulation types and fast_math (the directives
// that change values, not just their order), and scans the stages in
// execution order. The first stage
// holding a NaN or Inf produced it from finite inputs (a program input holding
// one is named instead). At that point it reports what the stage read: for an
// elementwise stage every tensor element its definition reads; for a
// reduction the first step whose reads are not finite, or the step where the
// running value left the finite range (an overflowing f16 or f32 sum). The
// message names the stage, its operator and kind, the index and the values:
// what `with pypto.check_numerics()` raises and `pto run --check-numerics`
// prints.
#pragma once

#include <string>
#include <vector>

#include "backends/Jit.h"
#include "dsl/Program.h"
#include "schedules/Schedule.h"
#include "target/Target.h"

namespace pto::debug {

struct NonFinite {
  bool found = false;
  std::string tensor;  // the stage (or input) that holds it first
  bool is_input = false;
  std::string op, kind;        // the stage's operator and OpKind
  std::string value;           // "NaN", "inf", "-inf"
  std::vector<int64_t> index;  // where, row-major
  // What the stage read there: "sub(3, 7) = -0.25", in the order of its definition.
  std::vector<std::string> reads;
  std::string step;  // reductions: which step ("r = 17: ...") went wrong
  std::string message() const;
};

// Runs the instrumented build of `p` (with `s`'s precision and fast_math) on
// `inputs` (Program::inputs() order) and finds the first NaN or Inf.
NonFinite locate_nonfinite(const Program& p, const Schedule& s, const Target& t,
                           const std::vector<BufferRef>& inputs);

}  // namespace pto::debug
