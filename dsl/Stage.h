// A Stage defines one tensor: its element value over index variables, and
// optionally a reduction over reduction variables.
//
//   C(i, j) = sum over r in [0, K) of A(i, r) * B(r, j)
//
// is Stage{name "C", vars {i, j}, reduce Sum, rvars {r: K}, value A(i,r)*B(r,j)}.
// Keeping reductions at stage level (never nested inside expressions) means
// every reduction loop can be tiled, reordered and vectorized by a schedule.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "dsl/Expr.h"
#include "dsl/Shape.h"

namespace pto {

enum class ReduceOp { Sum, Prod, Min, Max, ArgMin, ArgMax };
std::string_view to_string(ReduceOp op);
ReduceOp parse_reduce_op(std::string_view s);

// What an operator does, so that default schedules and search spaces can key on it.
enum class OpKind {
  Elementwise, Contraction, Convolution, Reduction, Normalization, Pooling, DataMovement, Custom
};
std::string_view to_string(OpKind k);
OpKind parse_op_kind(std::string_view s);

struct RVar {
  std::string name;
  Dim extent;  // iterates [0, extent)
};

// The parts a convolution's variables play, set by the conv operators so that
// schedules find them by role instead of by the operator's variable names.
// A role the convolution lacks is empty (conv1d has no rows; conv3d's depth
// has no role).
struct ConvRoles {
  std::string batch, out_channel, out_row, out_col;  // index variables
  std::string in_channel, kernel_row, kernel_col;    // reduction variables
  bool operator==(const ConvRoles&) const = default;
};

struct Stage {
  std::string name;               // also the name of the tensor it defines
  std::vector<std::string> vars;  // one index variable per output dim, outermost first
  Shape shape;
  DType dtype = DType::F32;
  Expr value;                     // element value, or the reduction's body
  std::optional<ReduceOp> reduce;
  std::vector<RVar> rvars;        // reduction variables, outermost first
  std::string op = "custom";      // operator type that produced the stage
  OpKind kind = OpKind::Custom;
  std::optional<ConvRoles> conv_roles;  // set on a convolution's sum stage

  bool is_reduction() const { return reduce.has_value(); }
  // argmin / argmax: the result is an index, not a combination of values.
  bool is_arg_reduction() const { return reduce == ReduceOp::ArgMin || reduce == ReduceOp::ArgMax; }
  // Names of the tensors this stage reads, in first-use order, without repeats.
  std::vector<std::string> reads() const;
};

}  // namespace pto
