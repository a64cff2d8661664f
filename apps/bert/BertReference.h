// A plain float64 implementation of the BERT-base encoder layer, written
// independently of the DSL: the reference for tests and benchmark checks.
// Weights are named as in dsl/models/Bert.h; all arrays row-major.
#pragma once

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "dsl/models/Bert.h"

namespace pto::bert_ref {

using Vec = std::vector<double>;
using Weights = std::map<std::string, Vec>;

// y[r, o] = sum_i x[r, i] w[i, o] + b[o] (weights [in, out], dsl/models/Bert.h)
inline Vec linear(const Vec& x, const Vec& w, const Vec& b, int64_t rows, int64_t in, int64_t out) {
  Vec y(static_cast<size_t>(rows * out));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double acc = b[static_cast<size_t>(o)];
      for (int64_t i = 0; i < in; ++i) acc += x[static_cast<size_t>(r * in + i)] * w[static_cast<size_t>(i * out + o)];
      y[static_cast<size_t>(r * out + o)] = acc;
    }
  return y;
}

inline Vec attention(const Vec& x, const Vec& mask, const Weights& w, const models::BertConfig& c, const std::string& pre) {
  const int64_t B = c.batch, S = c.seq, H = c.hidden, NH = c.heads, D = H / NH;
  const Vec q = linear(x, w.at(pre + "Wq"), w.at(pre + "bq"), B * S, H, H);
  const Vec k = linear(x, w.at(pre + "Wk"), w.at(pre + "bk"), B * S, H, H);
  const Vec v = linear(x, w.at(pre + "Wv"), w.at(pre + "bv"), B * S, H, H);
  Vec ctx(static_cast<size_t>(B * S * H), 0.0);
  std::vector<double> p(static_cast<size_t>(S));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < NH; ++h)
      for (int64_t i = 0; i < S; ++i) {
        double mx = -INFINITY;
        for (int64_t j = 0; j < S; ++j) {
          double s = 0;
          for (int64_t d = 0; d < D; ++d)
            s += q[static_cast<size_t>((b * S + i) * H + h * D + d)] * k[static_cast<size_t>((b * S + j) * H + h * D + d)];
          s = s / std::sqrt(static_cast<double>(D)) + mask[static_cast<size_t>(b * S + j)];
          p[static_cast<size_t>(j)] = s;
          mx = std::max(mx, s);
        }
        double sum = 0;
        for (auto& e : p) sum += (e = std::exp(e - mx));
        for (int64_t d = 0; d < D; ++d) {
          double acc = 0;
          for (int64_t j = 0; j < S; ++j) acc += p[static_cast<size_t>(j)] / sum * v[static_cast<size_t>((b * S + j) * H + h * D + d)];
          ctx[static_cast<size_t>((b * S + i) * H + h * D + d)] = acc;
        }
      }
  return linear(ctx, w.at(pre + "Wo"), w.at(pre + "bo"), B * S, H, H);
}

inline Vec ffn(const Vec& x, const Weights& w, const models::BertConfig& c, const std::string& pre) {
  const int64_t R = c.batch * c.seq;
  Vec h = linear(x, w.at(pre + "W1"), w.at(pre + "b1"), R, c.hidden, c.ffn);
  for (auto& e : h) e = 0.5 * e * (1 + std::erf(e / std::sqrt(2.0)));
  return linear(h, w.at(pre + "W2"), w.at(pre + "b2"), R, c.ffn, c.hidden);
}

inline Vec layernorm(const Vec& x, const Vec& r, const Weights& w, const models::BertConfig& c, const std::string& pre) {
  const int64_t R = c.batch * c.seq, H = c.hidden;
  Vec y(x.size());
  for (int64_t row = 0; row < R; ++row) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < H; ++i) mean += x[static_cast<size_t>(row * H + i)] + r[static_cast<size_t>(row * H + i)];
    mean /= static_cast<double>(H);
    for (int64_t i = 0; i < H; ++i) {
      const double d = x[static_cast<size_t>(row * H + i)] + r[static_cast<size_t>(row * H + i)] - mean;
      var += d * d;
    }
    var /= static_cast<double>(H);
    for (int64_t i = 0; i < H; ++i) {
      const size_t k = static_cast<size_t>(row * H + i);
      y[k] = (x[k] + r[k] - mean) / std::sqrt(var + c.eps) * w.at(pre + "gamma")[static_cast<size_t>(i)] +
             w.at(pre + "beta")[static_cast<size_t>(i)];
    }
  }
  return y;
}

inline Vec layer(const Vec& x, const Vec& mask, const Weights& w, const models::BertConfig& c) {
  const Vec a = attention(x, mask, w, c, "a_");
  const Vec h = layernorm(a, x, w, c, "ln1_");
  const Vec f = ffn(h, w, c, "f_");
  return layernorm(f, h, w, c, "ln2_");
}

}  // namespace pto::bert_ref
