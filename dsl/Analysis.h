// Static analysis of programs: operation and byte counts, for GFLOP/s
// figures, the roofline plots and the autotuner's cost model; and the pair
// layout of a reduction's operands, for the dot_pairs directive; the sign
// of softmax's exponent, for its exp.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "dsl/Program.h"

namespace pto {

// Arithmetic operations to compute every element of `stage` once: the
// operations on values read from tensors (a multiply-add in a reduction counts
// 2; index arithmetic, bounds guards, selects and casts count 0, so a padded
// convolution counts 2*N*O*OH*OW*C*KH*KW/groups). Symbolic sizes come from `sizes`;
// an unbound one throws ShapeError.
double stage_flops(const Stage& stage, const std::map<std::string, int64_t>& sizes = {});
double program_flops(const Program& p, const std::map<std::string, int64_t>& sizes = {});
// Bytes of all inputs plus all outputs at their logical types: the minimum traffic.
double program_io_bytes(const Program& p, const std::map<std::string, int64_t>& sizes = {});

int64_t dim_value(const Dim& d, const std::map<std::string, int64_t>& sizes);

// The reduction variable k of `stage` that an operand is laid out in pairs
// along: its last index is `k % 2` (the blocked-pair weights of
// block_weight_pairs). With `dtype`, only operands of that type count.
std::optional<std::string> pair_rvar(const Stage& stage, std::optional<DType> dtype = std::nullopt);

// Is `e` a value minus the maximum of its row, T(i.., j) - M(i..) with
// M(i..) = max over r of T(i.., r) (softmax's exponent)? Then it is at most
// 0, or NaN; lowering uses an exp without the overflow check for it.
bool minus_row_max(const Program& p, const Expr& e);

// The values an integer index expression takes when each variable of
// `extents` runs over [0, extent): an interval, or nullopt where it is not
// known (a variable not listed, a value read from a tensor, an operation the
// interval arithmetic does not follow). A select takes both branches.
std::optional<std::pair<int64_t, int64_t>> index_range(
    const Expr& e, const std::map<std::string, int64_t>& extents);

// The tensors `stage` may read outside their static extents (or where that is
// not known): a padded window read through a select, say. Halide computes a
// producer stage wherever it is read, so that is valid between stages, but a
// program input is a buffer of its extents: such a producer must stay a stage.
std::vector<std::string> reads_outside(const Program& p, const Stage& stage);

}  // namespace pto
