// A Program and its Schedule split into parts that compile as separate
// kernels, run one after another.
//
// Halide compiles a pipeline as one unit, and its time grows faster than the
// pipeline's stage count: an imported DenseNet-121 (1,700 nodes) does not
// compile as one pipeline in reasonable time. A model is therefore compiled
// in parts of a bounded number of stages, cut only where the schedule stores
// every tensor that crosses the cut at root anyway (a convolution's output
// after its epilogue, a pooling's, a normalization's): each part then runs
// exactly the loops the whole program's schedule gives its stages, and the
// only cost of a cut is a kernel call. Stages a schedule ties together (one
// computed or stored inside another, `store_in`, `compute_with`, the softmax
// stages an `online_softmax` contraction recomputes) are never separated,
// nor is a stage from one that reads it outside its extents (a padded
// window: a part's input is a buffer of its extents); an inlined stage is
// copied into each part that reads it. Stages that depend on constant inputs
// alone (weights) can be hoisted into a part that runs once, at load.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "dsl/Program.h"
#include "schedules/Schedule.h"
#include "target/Target.h"

namespace pto {

struct Part {
  Program program;    // the part's stages; what it reads from outside it is its inputs
  Schedule schedule;  // the whole schedule restricted to the part's stages
  // Tensors of the whole program the part reads (program inputs and earlier
  // parts' outputs) and those it produces for later parts or as program
  // outputs, by their names in the whole program (the part's names too).
  std::vector<std::string> inputs, outputs;
  // Runs once when the program is loaded: its stages read only `constants`.
  bool at_load = false;
};

struct PartitionOptions {
  // A part grows to this many stages with code (inlined ones not counted),
  // then ends at the last place it may (later where no cut is possible sooner).
  int max_stages = 48;
  // Program inputs whose values are fixed when the program is loaded (a
  // model's weights): the stages computed from them alone, where no tie
  // holds them in a kernel, form a first part that runs once at load (the
  // blocked weight layouts the defaults read, made once: weight pre-packing).
  std::set<std::string> constants;
};

// The parts, in an order that runs them: each reads only program inputs and
// earlier parts' outputs. One part (the whole program) where no cut is needed.
// Each part's schedule is validated for `target` (ScheduleError otherwise).
std::vector<Part> partition(const Program& program, const Schedule& schedule, const Target& target,
                            const PartitionOptions& options = {});

}  // namespace pto
