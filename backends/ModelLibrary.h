// A whole model as a static library that a plain C program runs.
//
// A model (an imported ONNX graph, say) is one Program whose weights are
// inputs bound to data. Compiled as one Halide pipeline it would take too
// long (schedules/Partition.h), so, as pypto.onnx does in the JIT, it is cut
// into parts: one generated kernel per part, all in one library
// (backends/Generator.h), the weights in a side file `<name>.weights`, and a
// driver header `<name>_model.h` with three C functions:
//
//   <name>_model* m;
//   <name>_model_load("<name>.weights", &m);   // reads the weights, runs the load-time
//                                              // part once (weights pre-packed)
//   <name>_model_run(m, input..., output...);  // the parts in order; 0 on success
//   <name>_model_free(m);
//
// Intermediates are allocated at load, one buffer per tensor (sizes are
// static: an imported model's dims are bound at import). A failing call
// returns non-zero and <name>_model_last_error() says why.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "backends/Generator.h"

namespace pto {

struct ModelLibraryOptions {
  std::string name;  // library name: a C identifier
  Target target;
  int max_stages = 48;  // per part (PartitionOptions::max_stages)
  // Values of program inputs fixed for the model (its weights), row-major in
  // float64; they are the partition's constants and go into the side file.
  std::map<std::string, std::vector<double>> weights;
};

struct GeneratedModel {
  GeneratedLibrary kernels;  // <name>.a and <name>_pto.h: one function per part
  std::string driver;        // <name>_model.h
  std::string weights;       // <name>.weights
  size_t parts = 0;          // kernels run per call (the load-time part not counted)
};

GeneratedModel generate_model_library(const Program& p, const ModelLibraryOptions& opts,
                                      const std::string& out_dir);

}  // namespace pto
