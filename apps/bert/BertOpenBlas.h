// The hand-written baseline a C++ developer would write without PTO: OpenBLAS
// sgemm for every matrix product (per head for attention, strided views, no
// copies) and plain loops for bias, mask, softmax, GELU and LayerNorm.
#pragma once

#include <cblas.h>

#include <cmath>
#include <vector>

#include "dsl/models/Bert.h"

namespace pto::bert_blas {

struct Buffers {
  std::vector<float> q, k, v, scores, ctx, h;
};

inline void linear(const float* x, const float* w, const float* b, float* y, int rows, int in, int out) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, out, in, 1.0f, x, in, w, out, 0.0f, y, out);
  for (int r = 0; r < rows; ++r)
    for (int o = 0; o < out; ++o) y[r * out + o] += b[o];
}

// weights in dsl/models/Bert.h order: Wq, bq, Wk, bk, Wv, bv, Wo, bo.
inline void attention(const float* x, const float* mask, const std::vector<const float*>& w, float* out,
                      const models::BertConfig& c, Buffers& buf) {
  const int B = static_cast<int>(c.batch), S = static_cast<int>(c.seq), H = static_cast<int>(c.hidden);
  const int NH = static_cast<int>(c.heads), D = H / NH, R = B * S;
  buf.q.resize(static_cast<size_t>(R) * H);
  buf.k.resize(buf.q.size());
  buf.v.resize(buf.q.size());
  buf.ctx.resize(buf.q.size());
  buf.scores.resize(static_cast<size_t>(S) * S);
  linear(x, w[0], w[1], buf.q.data(), R, H, H);
  linear(x, w[2], w[3], buf.k.data(), R, H, H);
  linear(x, w[4], w[5], buf.v.data(), R, H, H);
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < NH; ++h) {
      const float* q = buf.q.data() + static_cast<size_t>(b) * S * H + h * D;
      const float* k = buf.k.data() + static_cast<size_t>(b) * S * H + h * D;
      const float* v = buf.v.data() + static_cast<size_t>(b) * S * H + h * D;
      float* s = buf.scores.data();
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, S, S, D, scale, q, H, k, H, 0.0f, s, S);
      for (int i = 0; i < S; ++i) {
        float* row = s + static_cast<size_t>(i) * S;
        float mx = -INFINITY;
        for (int j = 0; j < S; ++j) mx = std::max(mx, row[j] += mask[b * S + j]);
        float sum = 0;
        for (int j = 0; j < S; ++j) sum += (row[j] = std::exp(row[j] - mx));
        const float inv = 1.0f / sum;
        for (int j = 0; j < S; ++j) row[j] *= inv;
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, S, D, S, 1.0f, s, S, v, H, 0.0f,
                  buf.ctx.data() + static_cast<size_t>(b) * S * H + h * D, H);
    }
  linear(buf.ctx.data(), w[6], w[7], out, R, H, H);
}

// weights: W1, b1, W2, b2.
inline void ffn(const float* x, const std::vector<const float*>& w, float* out, const models::BertConfig& c, Buffers& buf) {
  const int R = static_cast<int>(c.batch * c.seq), H = static_cast<int>(c.hidden), F = static_cast<int>(c.ffn);
  buf.h.resize(static_cast<size_t>(R) * F);
  linear(x, w[0], w[1], buf.h.data(), R, H, F);
  for (float& e : buf.h) e = 0.5f * e * (1.0f + std::erf(e * 0.70710678f));
  linear(buf.h.data(), w[2], w[3], out, R, F, H);
}

// out = LayerNorm(x + r) * gamma + beta
inline void layernorm(const float* x, const float* r, const float* gamma, const float* beta, float* out,
                      const models::BertConfig& c) {
  const int R = static_cast<int>(c.batch * c.seq), H = static_cast<int>(c.hidden);
  for (int row = 0; row < R; ++row) {
    const float* xr = x + static_cast<size_t>(row) * H;
    const float* rr = r + static_cast<size_t>(row) * H;
    float* o = out + static_cast<size_t>(row) * H;
    float mean = 0;
    for (int i = 0; i < H; ++i) mean += (o[i] = xr[i] + rr[i]);
    mean /= static_cast<float>(H);
    float var = 0;
    for (int i = 0; i < H; ++i) var += (o[i] - mean) * (o[i] - mean);
    const float inv = 1.0f / std::sqrt(var / static_cast<float>(H) + static_cast<float>(c.eps));
    for (int i = 0; i < H; ++i) o[i] = (o[i] - mean) * inv * gamma[i] + beta[i];
  }
}

}  // namespace pto::bert_blas
