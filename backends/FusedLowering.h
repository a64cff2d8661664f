// What a lowering that defines a stage's Funcs itself (instead of from the
// stage's plain definition: online_softmax, amx) needs from backends/Lower.cpp:
// DSL expressions as Halide, extents, inputs and the stages defined so far.
#pragma once

#include <Halide.h>

#include <functional>
#include <map>
#include <optional>
#include <string>

#include "dsl/Program.h"

namespace pto {

struct FusedLowering {
  // A DSL expression as Halide: its variables bound to `vars`, accesses to
  // the tensors in `funcs` calling those Funcs, others as Lower does.
  std::function<Halide::Expr(const Expr&, const std::map<std::string, Halide::Expr>& vars,
                             const std::map<std::string, Halide::Func>& funcs)>
      lower;
  std::function<Halide::Expr(const Dim&)> extent;                              // a dim's size
  std::function<std::optional<Halide::ImageParam>(const std::string&)> input;  // a program input
  std::function<Halide::Func(const std::string&)> stage_func;  // a defined stage's Func
};

}  // namespace pto
