// A float64 interpreter for Programs: the reference that lowering and every
// schedule are checked against.
//
// It evaluates the IR directly, element by element, without Halide, so it is
// an independent oracle for the code generator (slow: use small sizes).
// Floating-point values are carried in double whatever their logical type;
// integer and bool casts truncate as C does; integer division and modulo are
// Halide's Euclidean ones (remainder >= 0: numpy's for positive divisors; the
// ops library adds numpy's sign rule where it promises numpy semantics).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "dsl/Program.h"

namespace pto {

struct HostTensor {
  std::vector<int64_t> shape;
  std::vector<double> data;  // row-major
  int64_t numel() const;
};

// Evaluates every stage; returns all tensors by name (inputs included).
std::map<std::string, HostTensor> interpret(const Program& p, const std::map<std::string, HostTensor>& inputs);

// The value of `e` with index variables bound by `env`, reading `tensors`, in
// float64 as interpret() computes it: for tools that look at one point
// (debug/CheckNumerics.h shows what a stage read where it produced NaN).
double evaluate(const Expr& e, const std::map<std::string, HostTensor>& tensors,
                std::map<std::string, int64_t>& env);

}  // namespace pto
