// A plain C++ application using PTO-generated libraries: no Halide, no PTO at
// link time, only the generated archives and headers.
//
//   deploy_app [--device cpu|opencl] [--max-variant N]
//
// cpu:    the multi-target library deploy_cpu (sapphirerapids / avx512 / avx2 /
//         baseline variants; the runtime picks the best this CPU supports).
//         --max-variant N restricts dispatch to the CPU features of variant N,
//         as on an older CPU, and checks that the expected variant ran.
// opencl: the same kernels from deploy_ocl, run on the OpenCL device.
// cuda:   (built as deploy_cuda_app) the same kernels from deploy_cuda.
//
// Every result is checked against a double-precision reference; the exit code
// is 0 when all pass, 1 on a mismatch, 3 when a kernel reports an error (for
// example no OpenCL platform), 2 on bad arguments.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "apps/deploy/Sizes.h"
#if defined(DEPLOY_CUDA)
#include "deploy_cuda_pto.h"
#else
#include "deploy_cpu_pto.h"
#include "deploy_ocl_pto.h"
#endif

namespace {

using namespace deploy;
using Vec = std::vector<float>;

Vec random_vec(size_t n, std::mt19937& rng, float lo = -1, float hi = 1) {
  std::uniform_real_distribution<float> d(lo, hi);
  Vec v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

std::vector<double> ref_matmul(const Vec& a, const Vec& b) {
  std::vector<double> c(size_t(kM) * kN, 0.0);
  for (int i = 0; i < kM; ++i)
    for (int k = 0; k < kK; ++k)
      for (int j = 0; j < kN; ++j) c[size_t(i) * kN + j] += double(a[size_t(i) * kK + k]) * b[size_t(k) * kN + j];
  return c;
}

std::vector<double> ref_softmax(const Vec& x) {
  std::vector<double> y(x.size());
  for (int r = 0; r < kRows; ++r) {
    const float* row = &x[size_t(r) * kSoftmaxCols];
    double m = row[0], s = 0;
    for (int c = 0; c < kSoftmaxCols; ++c) m = std::max(m, double(row[c]));
    for (int c = 0; c < kSoftmaxCols; ++c) s += std::exp(row[c] - m);
    for (int c = 0; c < kSoftmaxCols; ++c) y[size_t(r) * kSoftmaxCols + c] = std::exp(row[c] - m) / s;
  }
  return y;
}

std::vector<double> ref_layer_norm(const Vec& x, const Vec& g, const Vec& b) {
  std::vector<double> y(x.size());
  for (int r = 0; r < kRows; ++r) {
    const float* row = &x[size_t(r) * kNormCols];
    double mean = 0, var = 0;
    for (int c = 0; c < kNormCols; ++c) mean += row[c];
    mean /= kNormCols;
    for (int c = 0; c < kNormCols; ++c) var += (row[c] - mean) * (row[c] - mean);
    var /= kNormCols;
    for (int c = 0; c < kNormCols; ++c)
      y[size_t(r) * kNormCols + c] = (row[c] - mean) / std::sqrt(var + kNormEps) * g[c] + b[c];
  }
  return y;
}

// |got - want| <= atol + rtol |want| everywhere; prints the worst error.
bool check(const char* what, const Vec& got, const std::vector<double>& want, double rtol, double atol) {
  double worst = 0, ratio = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(got[i] - want[i]);
    if (!(err == err)) ratio = INFINITY;  // NaN
    worst = std::max(worst, err);
    ratio = std::max(ratio, err / (atol + rtol * std::fabs(want[i])));
  }
  std::printf("  %-10s max abs error vs f64 %.3g  %s\n", what, worst, ratio <= 1 ? "ok" : "MISMATCH");
  return ratio <= 1;
}

struct Kernels {
  const char* device;
  int (*matmul)(const float*, const float*, float*);
  int (*softmax)(const float*, float*);
  int (*layer_norm)(const float*, const float*, const float*, float*);
  const char* (*last_error)();
};

// 0: all correct, 1: a mismatch, 3: a kernel returned an error.
int run_all(const Kernels& k) {
  std::mt19937 rng(7);
  const Vec a = random_vec(size_t(kM) * kK, rng), b = random_vec(size_t(kK) * kN, rng);
  const Vec xs = random_vec(size_t(kRows) * kSoftmaxCols, rng, -4, 4);
  const Vec xn = random_vec(size_t(kRows) * kNormCols, rng, -2, 3);
  const Vec gamma = random_vec(kNormCols, rng, 0.5, 1.5), beta = random_vec(kNormCols, rng);
  Vec c(size_t(kM) * kN, NAN), ys(xs.size(), NAN), yn(xn.size(), NAN);
  std::printf("%s:\n", k.device);
  bool ok = true;
  auto call = [&](const char* what, int rc) {
    if (rc != 0) std::printf("  %-10s error %d: %s\n", what, rc, k.last_error());
    return rc == 0;
  };
  if (!call("matmul", k.matmul(a.data(), b.data(), c.data()))) return 3;
  // f32 products summed over K=40 terms of magnitude <= 1: rounding stays below 1e-5 absolute.
  ok &= check("matmul", c, ref_matmul(a, b), 1e-5, 1e-5);
  if (!call("softmax", k.softmax(xs.data(), ys.data()))) return 3;
  // f32 exp (a few ulp) and a 100-term f32 sum: relative error ~1e-6; outputs are in (0, 1].
  ok &= check("softmax", ys, ref_softmax(xs), 1e-5, 1e-7);
  if (!call("layer_norm", k.layer_norm(xn.data(), gamma.data(), beta.data(), yn.data()))) return 3;
  // f32 mean and variance over 96 values (two-pass): ~1e-6 relative; outputs are O(1).
  ok &= check("layer_norm", yn, ref_layer_norm(xn, gamma, beta), 1e-5, 1e-5);
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string device = "cpu";
  int max_variant = -1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--device" && i + 1 < argc) device = argv[++i];
    else if (a == "--max-variant" && i + 1 < argc) max_variant = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: %s [--device cpu|opencl] [--max-variant N]\n", argv[0]);
      return 2;
    }
  }
#if defined(DEPLOY_CUDA)
  (void)max_variant;
  if (device != "cpu" && device != "cuda") return 2;
  const int rc = run_all({"cuda", deploy_cuda_matmul_run, deploy_cuda_softmax_run, deploy_cuda_layer_norm_run,
                          deploy_cuda_last_error});
#else
  int rc = 2;
  if (device == "cpu") {
    if (max_variant >= 0) {
      if (max_variant >= deploy_cpu_num_variants) {
        std::fprintf(stderr, "--max-variant: this library has variants 0-%d\n", deploy_cpu_num_variants - 1);
        return 2;
      }
      deploy_cpu_restrict_dispatch(max_variant);
    }
    rc = run_all({"cpu (multi-target)", deploy_cpu_matmul_run, deploy_cpu_softmax_run, deploy_cpu_layer_norm_run,
                  deploy_cpu_last_error});
    if (max_variant >= 0) {
      const int v = deploy_cpu_dispatched_variant();
      std::printf("dispatched variant %d (%s), allowed up to variant %d (%s)\n", v, deploy_cpu_variant_names[v],
                  max_variant, deploy_cpu_variant_names[max_variant]);
      if (v < max_variant) {
        std::printf("FAILED: dispatch used features beyond the restriction\n");
        return 1;
      }
    }
  } else if (device == "opencl") {
    rc = run_all({"opencl", deploy_ocl_matmul_run, deploy_ocl_softmax_run, deploy_ocl_layer_norm_run,
                  deploy_ocl_last_error});
  } else {
    std::fprintf(stderr, "unknown --device '%s'; valid: cpu, opencl\n", device.c_str());
    return 2;
  }
#endif
  std::printf("%s\n", rc == 0 ? "PASSED" : "FAILED");
  return rc;
}
