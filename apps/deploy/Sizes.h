// Sizes of the deploy example's kernels, shared by the generator (which bakes
// them into the libraries) and the application (which allocates its arrays).
// Plain C++: the application includes no PTO or Halide header.
#pragma once

namespace deploy {
inline constexpr int kM = 64, kN = 48, kK = 40;  // matmul: C[M,N] = A[M,K] @ B[K,N]
inline constexpr int kRows = 32;                 // softmax / layer_norm: X[kRows, kSoftmaxCols | kNormCols]
inline constexpr int kSoftmaxCols = 100;         // not a multiple of the vector width or GPU tile: tails run
inline constexpr int kNormCols = 96;
inline constexpr double kNormEps = 1e-5;
}  // namespace deploy
