// The machine's fp32 FMA peak, measured in-process: the "limit" of a roofline
// argument. Each thread runs independent FMA chains on vector registers (12
// accumulators hide the 4-cycle FMA latency on two FMA pipes), so the figure is
// what the core's FMA units deliver at the clock the benchmark runs at, not a
// datasheet number.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

namespace pto::bench {

namespace detail {

// 12 independent FMA chains of `iters` steps on 512-bit vectors.
__attribute__((target("avx512f"))) inline void chains512(long iters) {
  __m512 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(0.001f * static_cast<float>(i));
  const __m512 b = _mm512_set1_ps(0.9999f), c = _mm512_set1_ps(1e-4f);
  for (long k = 0; k < iters; ++k)
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_fmadd_ps(acc[i], b, c);
  volatile float sink = 0;  // keeps the chains live
  for (int i = 0; i < 12; ++i) sink = sink + _mm512_reduce_add_ps(acc[i]);
}

// The same on 256-bit vectors (AVX2 + FMA).
__attribute__((target("avx2,fma"))) inline void chains256(long iters) {
  __m256 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(0.001f * static_cast<float>(i));
  const __m256 b = _mm256_set1_ps(0.9999f), c = _mm256_set1_ps(1e-4f);
  for (long k = 0; k < iters; ++k)
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_fmadd_ps(acc[i], b, c);
  volatile float sink = 0;
  alignas(32) float v[8];
  for (int i = 0; i < 12; ++i) {
    _mm256_store_ps(v, acc[i]);
    sink = sink + v[0];
  }
}

// GFLOP/s of one thread running `chains` (12 chains of `lanes`-wide FMAs, 2 flops each).
inline double gflops(long iters, int lanes, void (*chains)(long)) {
  const auto t0 = std::chrono::steady_clock::now();
  chains(iters);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return static_cast<double>(iters) * 12 * lanes * 2 / s * 1e-9;
}

}  // namespace detail

// fp32 FMA peak in GFLOP/s over `threads` threads (best of 3 runs of ~0.1 s),
// with the widest vector FMA this CPU has; 0 if it has none.
inline double fma_peak_gflops(int threads) {
  const bool avx512 = __builtin_cpu_supports("avx512f");
  if (!avx512 && !__builtin_cpu_supports("fma")) return 0;
  const long iters = 20'000'000;
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    std::vector<double> g(static_cast<size_t>(threads));
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] { g[static_cast<size_t>(t)] = avx512 ? detail::gflops(iters, 16, detail::chains512) : detail::gflops(iters, 8, detail::chains256); });
    for (auto& th : pool) th.join();
    double sum = 0;
    for (double x : g) sum += x;
    best = std::max(best, sum);
  }
  return best;
}

}  // namespace pto::bench
