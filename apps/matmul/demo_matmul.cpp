// demo_matmul: relu(A @ B + bias) through every PTO layer.
//
// Defines the kernel with the DSL, schedules it (the target's default
// schedule), JIT-compiles and runs it, checks it against a float64 loop and
// times it next to OpenBLAS sgemm + the same epilogue, in the same process.
//
//   build/bin/demo_matmul [--n 1024] [--target host] [--schedule default|plain|file.json]
#include <cblas.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "apps/common/Bench.h"
#include "backends/Jit.h"
#include "backends/Timing.h"
#include "dsl/Workloads.h"
#include "schedules/Explain.h"
#include "schedules/ScheduleJson.h"
#include "schedules/defaults/Defaults.h"

extern "C" char* openblas_get_corename(void);
extern "C" int openblas_get_num_threads(void);

int main(int argc, char** argv) {
  // OpenBLAS 0.3.21 does not recognise recent CPUs: use its AVX-512 kernels.
  pto::bench::ensure_openblas_coretype(argv);
  int n = 1024;
  std::string target = "host", schedule = "default";
  bool show = false;
  CLI::App app{"relu(A @ B + bias): PTO default schedule vs OpenBLAS"};
  app.add_option("--n", n, "matrix size (M = N = K)");
  app.add_option("--target", target, "PTO target");
  app.add_option("--schedule", schedule, "default, plain or a schedule .json");
  app.add_flag("--explain", show, "print the loop nest");
  CLI11_PARSE(app, argc, argv);

  try {
    using namespace pto;
    const Program p = make_workload("matmul_bias_relu", {{"M", n}, {"N", n}, {"K", n}});
    const Target t = parse_target(target);
    const Schedule s = schedule == "default" ? default_schedule(p, t)
                       : schedule == "plain" ? plain_schedule(p) : load_schedule_file(schedule);
    std::printf("PTO demo: out = relu(A @ B + bias), n = %d, target %s\n", n, t.halide.c_str());
    if (show) std::printf("%s\n", explain(p, s, &t).c_str());

    const size_t nn = static_cast<size_t>(n) * n;
    std::vector<float> a(nn), b(nn), bias(static_cast<size_t>(n)), out(nn), blas(nn);
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> dist(-1, 1);
    for (auto& x : a) x = dist(rng);
    for (auto& x : b) x = dist(rng);
    for (auto& x : bias) x = dist(rng);
    const std::vector<int64_t> sq{n, n};
    const std::vector<BufferRef> ins{{a.data(), DType::F32, sq, {}}, {b.data(), DType::F32, sq, {}},
                                     {bias.data(), DType::F32, {n}, {}}};
    const std::vector<BufferRef> outs{{out.data(), DType::F32, sq, {}}};

    const Kernel k(p, s, t);
    k.run(ins, outs);

    // float64 reference (i-k-j loop order so that it vectorizes).
    std::vector<double> ref(nn, 0.0);
    for (int i = 0; i < n; ++i)
      for (int kk = 0; kk < n; ++kk) {
        const double av = a[static_cast<size_t>(i) * n + kk];
        const float* brow = &b[static_cast<size_t>(kk) * n];
        double* r = &ref[static_cast<size_t>(i) * n];
        for (int j = 0; j < n; ++j) r[j] += av * brow[j];
      }
    double max_err = 0;
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) {
        const size_t ij = static_cast<size_t>(i) * n + j;
        const double want = std::max(0.0, ref[ij] + bias[static_cast<size_t>(j)]);
        max_err = std::max(max_err, std::fabs(want - out[ij]));
      }
    // f32 sums of n products of magnitude <= 1: rounding error grows like sqrt(n) * 2^-24 * n.
    const double tol = 4.0 * std::sqrt(double(n)) * n * 6e-8;
    std::printf("check vs float64 reference: max abs error %.3g (tolerance %.3g) %s\n", max_err, tol,
                max_err <= tol ? "OK" : "FAILED");

    auto blas_run = [&] {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f,
                  blas.data(), n);
      for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j) {
          float& v = blas[static_cast<size_t>(i) * n + j];
          v = std::max(0.0f, v + bias[static_cast<size_t>(j)]);
        }
    };
    const double flops = 2.0 * n * n * n;
    const TimingStats tp = time_it([&] { k.run(ins, outs); }, 2, 10, 0.5);
    const TimingStats tb = time_it(blas_run, 2, 10, 0.5);
    double blas_err = 0;
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) {
        const size_t ij = static_cast<size_t>(i) * n + j;
        blas_err = std::max(blas_err, std::fabs(std::max(0.0, ref[ij] + bias[static_cast<size_t>(j)]) - blas[ij]));
      }
    std::printf("OpenBLAS check vs float64 reference: max abs error %.3g %s\n", blas_err, blas_err <= tol ? "OK" : "FAILED");
    std::printf("OpenBLAS core: %s, %d threads\n", openblas_get_corename(), openblas_get_num_threads());
    std::printf("\n%-14s %10s %10s %10s %10s %10s\n", "impl", "median_ms", "min_ms", "max_ms", "GFLOP/s", "vs_openblas");
    for (const auto& [name, ts] : {std::pair{"pto-default", tp}, std::pair{"openblas", tb}})
      std::printf("%-14s %10.3f %10.3f %10.3f %10.1f %10.2fx\n", name, ts.median_ms, ts.min_ms, ts.max_ms,
                  flops / (ts.median_ms * 1e6), tb.median_ms / ts.median_ms);
    return max_err <= tol ? 0 : 1;
  } catch (const pto::Error& e) {
    std::fprintf(stderr, "demo_matmul: error: %s\n", e.what());
    return 2;
  }
}
