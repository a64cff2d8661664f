// Blocked weight layouts: a weight matrix W [in, out] (row-major) stored as
// Wb[out / block, in, block], Wb[jb, k, jj] = W[k, jb * block + jj]. Each block
// of `block` output columns is then one contiguous panel, which the vectorized
// micro-kernel streams in order; laid out once at load time, as ONNX Runtime
// and oneDNN prepack their weights, instead of strided rows on every call.
// BERT's projections (W [in, out]) and ResNet's convolutions (HWIO weights,
// i.e. W [KH * KW * C, O]) use it. Inline: programs that only link a generated
// library lay their weights out with it too.
#pragma once

#include <string>
#include <vector>

#include "dsl/Error.h"

namespace pto::models {

template <typename T>
std::vector<T> block_weight(const T* w, int64_t in, int64_t out, int64_t block) {
  if (block <= 0 || out % block)
    throw ShapeError("block_weight: block " + std::to_string(block) +
                     " must be positive and divide out = " + std::to_string(out));
  std::vector<T> b(static_cast<size_t>(in * out));
  for (int64_t k = 0; k < in; ++k)
    for (int64_t o = 0; o < out; ++o)
      b[static_cast<size_t>(((o / block) * in + k) * block + o % block)] =
          w[static_cast<size_t>(k * out + o)];
  return b;
}

// Blocked and pair-interleaved, for bf16 dot products (the dot_pairs
// schedule directive, vdpbf16ps): Wp[out / block, in / 2, block, 2],
// Wp[jb, k / 2, jj, k % 2] = W[k, jb * block + jj]. Each vector of `block`
// lanes then holds, per lane, the two weights of rows k and k + 1 that one
// instruction multiplies with a pair of adjacent inputs.
template <typename T>
std::vector<T> block_weight_pairs(const T* w, int64_t in, int64_t out, int64_t block) {
  if (block <= 0 || out % block || in % 2)
    throw ShapeError("block_weight_pairs: block " + std::to_string(block) + " must be positive and divide out = " +
                     std::to_string(out) + ", and in = " + std::to_string(in) + " must be even");
  std::vector<T> b(static_cast<size_t>(in * out));
  for (int64_t k = 0; k < in; ++k)
    for (int64_t o = 0; o < out; ++o)
      b[static_cast<size_t>((((o / block) * (in / 2) + k / 2) * block + o % block) * 2 + k % 2)] =
          w[static_cast<size_t>(k * out + o)];
  return b;
}

}  // namespace pto::models
