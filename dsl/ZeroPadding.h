// Zero padding in reductions: which steps of a sum add exactly zero.
//
// A convolution over a padded input (conv2d_nhwc's `_pad` stage, or any stage
// defined as select(inside, value, 0)) multiplies the padding by weights on
// every border tap. Those products are zero, so the reduction may skip them:
// on ResNet-50's 7x7 maps 19 of 21 taps per row and column are inside, and
// the skipped ones are 18% of a 3x3 layer's FMAs (oneDNN skips them too).
// `padding_predicate` finds the condition in the reduction's own variables;
// the `skip_padding` schedule directive (Schedule.h) applies it.
#pragma once

#include <optional>

#include "dsl/Program.h"

namespace pto {

// The zero-padded stage a sum reads as a factor of its body, and the dims of
// that stage its padding condition depends on (conv2d_nhwc's `_pad`: h, w).
struct PaddedRead {
  const Stage* stage = nullptr;
  std::vector<std::string> dims;
};
std::optional<PaddedRead> padded_read(const Program& p, const Stage& st);

// For a sum whose body is a product with a factor read from a stage defined as
// select(cond, v, 0): `cond` with that stage's variables replaced by the
// read's indices, i.e. the condition under which a reduction step can be
// nonzero. nullopt for other stages. (Skipping is exact for finite factors;
// an Inf or NaN weight times the zero padding would have given NaN.)
// Only the conjuncts of `cond` that mention one of `dims` (the padded stage's
// variables) are kept; empty `dims` keeps all.
std::optional<Expr> padding_predicate(const Program& p, const Stage& st,
                                      const std::vector<std::string>& dims = {});

// st's body with the padded factor read from the padded stage's source
// instead (its select's true value, indices substituted) when `dims` covers
// every padded dim: every step that remains after skipping reads inside the
// source, so the padded copy need not exist (the conv reads its input in
// place; ResNet's 56x56x128 stride-2 layer copied 1.7 MB per call for it).
// nullopt when some padded dim is not skipped.
std::optional<Expr> read_through_padding(const Program& p, const Stage& st,
                                         const std::vector<std::string>& dims);

}  // namespace pto
