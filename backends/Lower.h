// lower(): Program + Schedule + Target -> Halide::Pipeline.
//
// Each stage becomes one Halide Func (argmin/argmax add a tuple Func named
// `<stage>__arg`, narrow storage of a wide accumulator or an accumulator tile (`accumulator_at`) `<stage>__acc`), each input an ImageParam. Our tensors are row-major, so
// tensor dim k maps to Halide dim rank-1-k (Halide's dim 0 is the contiguous
// one). The precision schedule is applied here by inserting casts: a stage's
// element expression is evaluated in its compute type, a reduction accumulates
// in its accumulate type, and the Func stores its storage type. Stages without
// a schedule entry are computed at root and run serially: the plain baseline.
#pragma once

#include <Halide.h>

#include <map>
#include <string>
#include <vector>

#include "target/Target.h"
#include "dsl/Program.h"
#include "schedules/Schedule.h"

namespace pto {

struct LoweredPipeline {
  Halide::Pipeline pipeline;
  std::vector<Halide::ImageParam> inputs;  // in Program::inputs() order
  std::map<std::string, Halide::Func> funcs;
  std::vector<std::string> outputs;        // in Program::outputs() order
  // Inputs that must be dense row-major, and why (a dot_pairs stage reads
  // adjacent pairs; a stage reads a flattened view); Kernel::run copies a
  // strided view of one into a dense buffer.
  std::map<std::string, std::string> dense_inputs;
  Halide::Target target;
  std::vector<Halide::Argument> arguments() const;
};

struct LowerOptions {
  // Build the pipeline unscheduled (every Func left to the caller) with
  // estimates on inputs and outputs, for Halide's autoschedulers
  // (apply_autoscheduler); `s` then only contributes precision. Needs static shapes.
  bool for_autoscheduler = false;
};

// Validates `s` against `p` and `t` first; throws ScheduleError / CompileError.
LoweredPipeline lower(const Program& p, const Schedule& s, const Target& t, const LowerOptions& o = {});

Halide::Type halide_type(DType t);

// The stage a Halide Func or buffer name belongs to: Funcs are named after
// their stage, uniquified ("sm$3", "sm.0" for a buffer), helper Funcs after
// their stage ("acc__acc", "idx__arg"), and a packed copy after what it
// copies and its consumer ("W_im_in_mm__acc": the consumer's stage).
// Unknown names come back as given.
std::string stage_of_func(std::string name, const Program& p);

// Runs `f`, turning Halide's errors (which are not std::exceptions) into pto::CompileError.
template <typename F>
auto with_halide_errors(const std::string& what, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const Halide::Error& e) {
    throw CompileError(what + ": " + e.what());
  }
}

}  // namespace pto
