// Automatic bisection of a numerical difference to a schedule decision.
//
// A program whose output under schedule S differs from the float64
// reference beyond tolerance: which stage's schedule, and which directive
// in it, makes the difference? bisect() starts from the plain loops (opt
// level 0, checked to match the reference), enables S's entries stage by
// stage in execution order and binary-searches the first prefix that breaks
// the tolerance: the stage that closes it is the culprit. Then, within that
// stage's entry, each field (tile, order, vectorize, precision, fast_math,
// rfactor, ...: the JSON keys of the directives) is taken out of the failing
// schedule, and set alone on the plain entry, and the errors say which
// fields make the difference. An entry that places a stage in another
// stage's loops brings that stage's entry along (its loop names must exist);
// a subset that still does not validate is skipped, and the search reports
// the group of stages it could not separate.
//
// None of Halide, TVM or ONNX Runtime does this for schedules; PyTorch's
// compiler bisector does it for its passes.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "backends/Jit.h"
#include "dsl/Program.h"
#include "schedules/Schedule.h"
#include "target/Target.h"

namespace pto::debug {

struct BisectOptions {
  double tolerance = 0;  // relative to each output's largest magnitude; 0: rounding_tolerance(p)
  // Called with each step's line as the search goes (a compile and a run each).
  std::function<void(const std::string&)> progress;
};

// One field of the culprit stage's entry.
struct BisectField {
  std::string field;          // its JSON key ("vectorize", "precision", "fast_math", ...)
  std::string directive;      // the directive that owns it ("loops", "precision", ...)
  double error_without = -1;  // the failing schedule without it (-1: not a valid schedule)
  double error_alone = -1;    // the passing prefix plus only it on the stage (-1: not valid)
  // Taking it out brings the error within the tolerance, or it alone breaks it.
  bool culprit(double tol) const {
    return (error_without >= 0 && error_without <= tol) || error_alone > tol;
  }
};

struct BisectResult {
  std::string program;
  double tolerance = 0;
  double error_given = 0;  // S against the f64 reference
  double error_plain = 0;  // opt level 0 against it
  // The culprit: the first stage (execution order) whose entry takes the
  // error past the tolerance, with the error of the stages before it enabled
  // and with it. Empty where S is within the tolerance or the plain loops are
  // not (the program's own types differ from the reference then).
  std::string stage;
  std::vector<std::string> group;  // stages enabled together with it (inseparable), stage included
  double error_before = 0, error_after = 0;
  std::vector<BisectField> fields;  // every field of its entry, tested
  int compiles = 0;
  std::string verdict;  // one line: what was found

  std::string report() const;  // the verdict, the stage's errors and the fields as a table
};

// `inputs` and `outputs` (scratch of the outputs' shapes and types: f32, bf16
// or f16) in Program::inputs() / outputs() order; the outputs' contents are
// overwritten.
BisectResult bisect(const Program& p, const Schedule& s, const Target& t,
                    const std::vector<BufferRef>& inputs, const std::vector<BufferRef>& outputs,
                    const BisectOptions& o = {});

}  // namespace pto::debug
