/* A plain C application using a PTO-generated library: no Halide, no PTO at
 * link time. It runs relu(A @ B + bias) for the sizes the library was built
 * with, checks the result against a double-precision loop, and exits non-zero
 * on any mismatch. It also shows that a bad call returns an error code. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "mbr_host_pto.h"

enum { M = 100, N = 72, K = 50 };

int main(void) {
  static float a[M * K], b[K * N], bias[N], out[M * N];
  unsigned seed = 1;
  for (int i = 0; i < M * K; ++i) a[i] = (float)((seed = seed * 1103515245u + 12345u) >> 16 & 0x7fff) / 16384.0f - 1.0f;
  for (int i = 0; i < K * N; ++i) b[i] = (float)((seed = seed * 1103515245u + 12345u) >> 16 & 0x7fff) / 16384.0f - 1.0f;
  for (int j = 0; j < N; ++j) bias[j] = 0.01f * (float)j - 0.3f;

  int rc = mbr_host_run(a, b, bias, out);
  if (rc != 0) {
    fprintf(stderr, "mbr_host_run failed (%d): %s\n", rc, mbr_host_last_error());
    return 1;
  }
  double max_err = 0;
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double acc = bias[j];
      for (int k = 0; k < K; ++k) acc += (double)a[i * K + k] * b[k * N + j];
      if (acc < 0) acc = 0;
      const double err = fabs(acc - out[i * N + j]);
      if (err > max_err) max_err = err;
    }
  /* f32 accumulation over K=50 terms of magnitude <= 1: error well under 1e-4. */
  printf("deploy_matmul: %dx%dx%d relu(A@B+bias), max abs error vs f64 %.3g\n", M, N, K, max_err);
  if (max_err > 1e-4) {
    printf("FAILED\n");
    return 1;
  }
  /* A null input buffer is reported through the return code, not a crash. */
  rc = mbr_host_run(NULL, b, bias, out);
  printf("null input -> return code %d: %s\n", rc, rc ? mbr_host_last_error() : "NOT REPORTED");
  if (rc == 0) return 1;
  printf("PASSED\n");
  return 0;
}
