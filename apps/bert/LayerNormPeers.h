// LayerNorm's yardsticks in bench_bert, besides ONNX Runtime and the plain
// C++ baseline: oneDNN's layer normalization (the vendor's JIT kernel), and
// two hand-written AVX-512 kernels that bound what any implementation of
// y = LayerNorm(x + r) can reach on this CPU:
//
//  - floor_exact: the operator's own numerics (the mean, then the mean of
//    squared deviations) with the fewest memory operations the algorithm
//    allows: the residual add, stored once, is fused with the sum; the row
//    (768 floats, 48 vectors) does not fit the 32 vector registers, so the
//    deviations and the normalize pass read it back from L1.
//  - floor_onepass: one pass of shifted moments (sum and sum of squares of
//    x + r - c, c the row's first value), fused with the residual add, then
//    the normalize pass. It changes the numerics (cancellation grows with
//    (mean - c)^2 / var), so it is a bound, not an option.
//
// Neither is fused further than one row at a time, and both split the rows
// in one block per thread, as PTO's default schedule does.
#pragma once

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <oneapi/dnnl/dnnl.hpp>

namespace pto::bert_peers {

// x + r -> y, then layer normalization of y in place.
class OneDnnLayerNorm {
 public:
  OneDnnLayerNorm(const float* x, const float* r, const float* gamma, const float* beta, float* y, int64_t rows,
                  int64_t hidden, float eps) {
    using tag = dnnl::memory::format_tag;
    using dt = dnnl::memory::data_type;
    const dnnl::memory::desc md({rows, hidden}, dt::f32, tag::ab), vd({hidden}, dt::f32, tag::a);
    x_ = dnnl::memory(md, eng_, const_cast<float*>(x));
    r_ = dnnl::memory(md, eng_, const_cast<float*>(r));
    y_ = dnnl::memory(md, eng_, y);
    scale_ = dnnl::memory(vd, eng_, const_cast<float*>(gamma));
    shift_ = dnnl::memory(vd, eng_, const_cast<float*>(beta));
    add_ = dnnl::binary(dnnl::binary::primitive_desc(dnnl::binary::desc(dnnl::algorithm::binary_add, md, md, md), eng_));
    const dnnl::layer_normalization_forward::primitive_desc pd(
        dnnl::layer_normalization_forward::desc(dnnl::prop_kind::forward_inference, md, eps,
                                                dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift),
        eng_);
    ln_ = dnnl::layer_normalization_forward(pd);
    mean_ = dnnl::memory(pd.mean_desc(), eng_);
    var_ = dnnl::memory(pd.variance_desc(), eng_);
  }
  void operator()() {
    add_.execute(strm_, {{DNNL_ARG_SRC_0, x_}, {DNNL_ARG_SRC_1, r_}, {DNNL_ARG_DST, y_}});
    ln_.execute(strm_, {{DNNL_ARG_SRC, y_}, {DNNL_ARG_DST, y_}, {DNNL_ARG_SCALE, scale_}, {DNNL_ARG_SHIFT, shift_},
                        {DNNL_ARG_MEAN, mean_}, {DNNL_ARG_VARIANCE, var_}});
    strm_.wait();
  }

 private:
  dnnl::engine eng_{dnnl::engine::kind::cpu, 0};
  dnnl::stream strm_{eng_};
  dnnl::binary add_;
  dnnl::layer_normalization_forward ln_;
  dnnl::memory x_, r_, y_, scale_, shift_, mean_, var_;
};

// The floors need AVX-512 and rows of whole 8-vector blocks (BERT: 768).
inline bool floors_supported(int64_t hidden) {
  return __builtin_cpu_supports("avx512f") && hidden % 128 == 0 && hidden <= 4096;
}

namespace detail {

// y = (s - m) * inv * g + b over one row of nv vectors (s: the row, in L1).
__attribute__((target("avx512f"))) inline void normalize_row(const float* s, __m512 m, __m512 inv, const float* g,
                                                             const float* b, float* y, int64_t nv) {
  for (int64_t v = 0; v < nv; ++v) {
    const __m512 d = _mm512_mul_ps(_mm512_sub_ps(_mm512_load_ps(s + 16 * v), m), inv);
    _mm512_storeu_ps(y + 16 * v, _mm512_fmadd_ps(d, _mm512_loadu_ps(g + 16 * v), _mm512_loadu_ps(b + 16 * v)));
  }
}

// A row's mean and 1 / sqrt(var + eps), broadcast.
struct RowStats {
  __m512 mean, inv;
};

// The operator's numerics: t = x + r summed while stored to s, then the mean
// of squared deviations read back from s.
__attribute__((target("avx512f"))) inline RowStats stats_exact(const float* xi, const float* ri, float* s, int64_t nv,
                                                               int64_t h, float eps) {
  __m512 a[8];
  for (auto& q : a) q = _mm512_setzero_ps();
  for (int64_t v = 0; v < nv; v += 8)
    for (int k = 0; k < 8; ++k) {
      const int64_t o = 16 * (v + k);
      const __m512 t = _mm512_add_ps(_mm512_loadu_ps(xi + o), _mm512_loadu_ps(ri + o));
      _mm512_store_ps(s + o, t);
      a[k] = _mm512_add_ps(a[k], t);
    }
  for (int k = 1; k < 8; ++k) a[0] = _mm512_add_ps(a[0], a[k]);
  const __m512 m = _mm512_set1_ps(_mm512_reduce_add_ps(a[0]) / static_cast<float>(h));
  for (auto& q : a) q = _mm512_setzero_ps();
  for (int64_t v = 0; v < nv; v += 8)
    for (int k = 0; k < 8; ++k) {
      const __m512 d = _mm512_sub_ps(_mm512_load_ps(s + 16 * (v + k)), m);
      a[k] = _mm512_fmadd_ps(d, d, a[k]);
    }
  for (int k = 1; k < 8; ++k) a[0] = _mm512_add_ps(a[0], a[k]);
  return {m, _mm512_set1_ps(1.0f / std::sqrt(_mm512_reduce_add_ps(a[0]) / static_cast<float>(h) + eps))};
}

// One pass of moments of t - c (c the row's first value) while t = x + r is stored to s.
__attribute__((target("avx512f"))) inline RowStats stats_onepass(const float* xi, const float* ri, float* s,
                                                                 int64_t nv, int64_t h, float eps) {
  const float c = xi[0] + ri[0];
  const __m512 cv = _mm512_set1_ps(c);
  __m512 a[4], q[4];
  for (int k = 0; k < 4; ++k) a[k] = q[k] = _mm512_setzero_ps();
  for (int64_t v = 0; v < nv; v += 4)
    for (int k = 0; k < 4; ++k) {
      const int64_t o = 16 * (v + k);
      __m512 t = _mm512_add_ps(_mm512_loadu_ps(xi + o), _mm512_loadu_ps(ri + o));
      _mm512_store_ps(s + o, t);
      t = _mm512_sub_ps(t, cv);
      a[k] = _mm512_add_ps(a[k], t);
      q[k] = _mm512_fmadd_ps(t, t, q[k]);
    }
  for (int k = 1; k < 4; ++k) {
    a[0] = _mm512_add_ps(a[0], a[k]);
    q[0] = _mm512_add_ps(q[0], q[k]);
  }
  const float d = _mm512_reduce_add_ps(a[0]) / static_cast<float>(h);
  const float var = std::max(0.0f, _mm512_reduce_add_ps(q[0]) / static_cast<float>(h) - d * d);
  return {_mm512_set1_ps(c + d), _mm512_set1_ps(1.0f / std::sqrt(var + eps))};
}

__attribute__((target("avx512f"))) inline void rows(bool onepass, const float* x, const float* r, const float* g,
                                                    const float* b, float* y, int64_t r0, int64_t r1, int64_t h,
                                                    float eps) {
  alignas(64) float s[4096];
  const int64_t nv = h / 16;
  for (int64_t i = r0; i < r1; ++i) {
    const RowStats st = onepass ? stats_onepass(x + i * h, r + i * h, s, nv, h, eps) : stats_exact(x + i * h, r + i * h, s, nv, h, eps);
    normalize_row(s, st.mean, st.inv, g, b, y + i * h, nv);
  }
}

}  // namespace detail

// y = LayerNorm(x + r) over rows of `hidden`, one row block per thread.
inline void layernorm_floor(bool onepass, const float* x, const float* r, const float* g, const float* b, float* y,
                            int64_t rows, int64_t hidden, float eps, int threads) {
#pragma omp parallel num_threads(threads)
  {
    const int64_t n = omp_get_num_threads(), id = omp_get_thread_num();
    const int64_t r0 = rows * id / n, r1 = rows * (id + 1) / n;
    detail::rows(onepass, x, r, g, b, y, r0, r1, hidden, eps);
  }
}

}  // namespace pto::bert_peers
