// Shared benchmark plumbing for the bench_* binaries: result records, the
// table on stdout, the `--json FILE` output contract, and OpenBLAS set-up.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <new>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "backends/Timing.h"

namespace pto::bench {

struct Record {
  std::string workload, impl;
  TimingStats t;
  std::optional<double> gflops;
};

inline Record make_record(std::string workload, std::string impl, const TimingStats& t, double flops) {
  Record r{std::move(workload), std::move(impl), t, std::nullopt};
  if (flops > 0) r.gflops = flops / (t.median_ms * 1e6);
  return r;
}

// Prints the table; `baseline` is the impl the ratio column divides by (per workload).
inline void print_table(const std::vector<Record>& rs, const std::string& baseline) {
  std::printf("\n%-34s %-18s %10s %10s %10s %9s %8s\n", "workload", "impl", "median_ms", "min_ms", "max_ms", "GFLOP/s",
              ("x_" + baseline).c_str());
  for (const Record& r : rs) {
    double base = 0;
    for (const Record& b : rs)
      if (b.workload == r.workload && b.impl == baseline) base = b.t.median_ms;
    std::printf("%-34s %-18s %10.4g %10.4g %10.4g %9s %8s\n", r.workload.c_str(), r.impl.c_str(), r.t.median_ms,
                r.t.min_ms, r.t.max_ms, r.gflops ? std::to_string(static_cast<int>(*r.gflops + 0.5)).c_str() : "-",
                base > 0 ? (std::to_string(base / r.t.median_ms).substr(0, 5)).c_str() : "-");
  }
}

inline void write_json(const std::vector<Record>& rs, const std::string& path) {
  nlohmann::json j = nlohmann::json::array();
  for (const Record& r : rs)
    j.push_back({{"workload", r.workload},
                 {"impl", r.impl},
                 {"median_ms", r.t.median_ms},
                 {"min_ms", r.t.min_ms},
                 {"max_ms", r.t.max_ms},
                 {"gflops", r.gflops ? nlohmann::json(*r.gflops) : nlohmann::json(nullptr)}});
  std::ofstream(path) << j.dump(2) << "\n";
}

// OpenBLAS 0.3.21 reads OPENBLAS_CORETYPE once at load; it does not know recent
// CPUs and falls back to slower kernels. Re-exec with its AVX-512 kernels on an
// AVX-512 machine (PTO_OPENBLAS_CORETYPE overrides). Call first thing in main.
inline void ensure_openblas_coretype(char** argv) {
  const char* want = std::getenv("PTO_OPENBLAS_CORETYPE");
  if (!want && __builtin_cpu_supports("avx512f")) want = "SkylakeX";
  const char* have = std::getenv("OPENBLAS_CORETYPE");
  if (want && (!have || std::string(have) != want)) {
    setenv("OPENBLAS_CORETYPE", want, 1);
    execv("/proc/self/exe", argv);
  }
}

inline std::vector<float> random_floats(size_t n, std::mt19937& rng, float lo = -1, float hi = 1) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// 64-byte aligned storage for the buffers a benchmark hands to a kernel, as
// oneDNN allocates its own: malloc's 16-byte alignment makes every 64-byte
// vector load or store of a row span two cache lines.
template <typename T>
struct Aligned64 {
  using value_type = T;
  Aligned64() = default;
  template <typename U>
  Aligned64(const Aligned64<U>&) {}  // NOLINT(google-explicit-constructor)
  T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{64})); }
  void deallocate(T* p, size_t) { ::operator delete(p, std::align_val_t{64}); }
  template <typename U>
  bool operator==(const Aligned64<U>&) const { return true; }
};
template <typename T>
using AlignedVector = std::vector<T, Aligned64<T>>;

// Times each implementation in `rounds` interleaved rounds (a, b, a, b, ...)
// and keeps each one's round with the lowest median: a disturbance on the
// 2 cores (another process, a frequency change) then hits every
// implementation's rounds alike instead of deciding a comparison.
inline std::vector<TimingStats> interleaved_best(const std::vector<std::function<void()>>& impls, int rounds,
                                                 double min_time) {
  std::vector<TimingStats> best(impls.size());
  for (int r = 0; r < rounds; ++r)
    for (size_t i = 0; i < impls.size(); ++i) {
      const TimingStats t = time_it(impls[i], 1, 5, min_time);
      if (r == 0 || t.median_ms < best[i].median_ms) best[i] = t;
    }
  return best;
}

}  // namespace pto::bench
