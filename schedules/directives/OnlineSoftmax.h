// online_softmax: FlashAttention as a schedule choice (OnlineSoftmax in
// Schedule.h).
//
// A contraction over the softmax of a score matrix, O(.., i, d) = sum_j
// softmax(X)(.., i, j) V(.., j, d) (attention: X = q k^T * scale + mask), as
// written materializes X, its exponentials and the probabilities: Lq x Lk
// values per head, 4 MB at sequence 1024, read and written by four passes.
// With online_softmax the stage runs instead as one loop per tile of query
// rows over blocks of keys: the block's scores (the contraction that produces
// X, computed per block), its row max m_b, P = exp(X - m_b), its row sum l_b and
// P V; the tile's running max m, sum l and output O are rescaled by
// exp(m - max(m, m_b)) and the block's by exp(m_b - max(m, m_b)), and O / l is
// the result: the same value, in one pass, with the scores in cache. Where X
// is -inf above a diagonal (causal: select(j <= i + c, s, -inf)) the key
// blocks past a tile's last row are not visited (bounded loops, not masked
// work). At a symbolic key length, `keys` larger than a score tile (4
// vectors) and a multiple of it is the largest block: the keys run as
// ceil(Lk / keys) equal blocks, rounded up to the tile width, sized at run
// time.
//
// The program is unchanged: the float64 interpreter evaluates the plain
// stages, and the softmax stages' own entries are simply not used.
// backends/OnlineSoftmax.cpp builds the fused Funcs; this file says which
// stages qualify and owns the JSON, the check and the explain text.
#pragma once

#include <optional>
#include <string>

#include "schedules/directives/Directive.h"

namespace pto::directives {

const Directive& online_softmax_directive();

// The stages a softmax-weighted contraction is made of.
struct SoftmaxContraction {
  const Stage* out = nullptr;    // O: sum over `r` of probs(.., i, r) * ...
  const Stage* probs = nullptr;  // softmax over the last axis
  const Stage* max = nullptr;    // its row max
  const Stage* exp = nullptr;    // exp(x - max)
  const Stage* sum = nullptr;    // row sum of exp
  std::string x;                 // softmax input: a stage or a program input
  // The contraction x reads at its own indices (or x itself, when x is one),
  // recomputed per block; null when x has none (then x is read as scheduled).
  const Stage* scores = nullptr;
  // x(.., i, j) is -inf for j > i + causal_offset (a select on x's value).
  std::optional<int64_t> causal_offset;
};

// The pattern for `st`, or nullopt with the reason in `why`.
std::optional<SoftmaxContraction> softmax_contraction(const Program& p, const Stage& st,
                                                      std::string* why = nullptr);

// The fields of a stage entry that shape the plain contraction's loops, which
// online_softmax replaces: cleared when a schedule turns it on (and by the
// other structures that bring their own loops: amx, split-K's proposals and
// default).
void clear_plain_loops(StageSchedule& ss);

}  // namespace pto::directives
