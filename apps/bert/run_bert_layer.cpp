// run_bert_layer: the deployment end of the demo. A plain C++ program that
// links the static library `pto gen bert_layer` generated with the tuned
// schedules (libbert_layer.a and its C header; no PTO and no Halide at link
// time), runs the BERT-base encoder layer (batch 1, sequence 128, the sizes the
// library was generated for), checks it against the float64 reference and
// reports its time. scripts/demo.sh builds and runs it:
//
//   c++ -O2 -std=c++20 -I. -I<gen dir> apps/bert/run_bert_layer.cpp <gen dir>/bert_layer.a -lpthread -ldl
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "apps/bert/BertReference.h"
#include "bert_layer_pto.h"

namespace {

using pto::bert_ref::Vec;

// W [in, out] -> the blocked layout the library takes, Wb[out / 64, in, 64]
// (dsl/models/Bert.h): done once, at load time.
std::vector<float> block64(const std::vector<float>& w, int64_t in, int64_t out) {
  std::vector<float> b(w.size());
  for (int64_t k = 0; k < in; ++k)
    for (int64_t o = 0; o < out; ++o) b[static_cast<size_t>(((o / 64) * in + k) * 64 + o % 64)] = w[static_cast<size_t>(k * out + o)];
  return b;
}

}  // namespace

int main() {
  pto::models::BertConfig c;  // BERT-base, batch 1, sequence 128
  const int64_t S = c.seq, H = c.hidden, F = c.ffn;
  std::mt19937 rng(7);
  std::map<std::string, std::vector<float>> f;  // plain layouts, as a checkpoint stores them
  auto fill = [&](const std::string& n, size_t count, float lo, float hi) {
    std::uniform_real_distribution<float> u(lo, hi);
    std::vector<float>& v = f[n];
    v.resize(count);
    for (float& x : v) x = u(rng);
  };
  fill("X", static_cast<size_t>(S * H), -1, 1);
  f["mask"].assign(static_cast<size_t>(S), 0.0f);
  for (int64_t s = S - S / 8; s < S; ++s) f["mask"][static_cast<size_t>(s)] = -1e4f;
  for (const char* n : {"a_Wq", "a_Wk", "a_Wv", "a_Wo"}) fill(n, static_cast<size_t>(H * H), -0.05f, 0.05f);
  for (const char* n : {"a_bq", "a_bk", "a_bv", "a_bo", "f_b2", "ln1_beta", "ln2_beta"}) fill(n, static_cast<size_t>(H), -0.05f, 0.05f);
  for (const char* n : {"ln1_gamma", "ln2_gamma"}) fill(n, static_cast<size_t>(H), 0.8f, 1.2f);
  fill("f_W1", static_cast<size_t>(H * F), -0.05f, 0.05f);
  fill("f_b1", static_cast<size_t>(F), -0.05f, 0.05f);
  fill("f_W2", static_cast<size_t>(F * H), -0.05f, 0.05f);

  std::map<std::string, std::vector<float>> packed;
  for (const char* n : {"a_Wq", "a_Wk", "a_Wv", "a_Wo"}) packed[n] = block64(f[n], H, H);
  packed["f_W1"] = block64(f["f_W1"], H, F);
  packed["f_W2"] = block64(f["f_W2"], F, H);
  auto P = [&](const char* n) { return packed.count(n) ? packed[n].data() : f[n].data(); };

  std::vector<float> y(static_cast<size_t>(S * H));
  auto run = [&] {
    return bert_layer_run(P("X"), P("mask"), P("a_Wq"), P("a_bq"), P("a_Wk"), P("a_bk"), P("a_Wv"), P("a_bv"), P("a_Wo"),
                          P("a_bo"), P("ln1_gamma"), P("ln1_beta"), P("f_W1"), P("f_b1"), P("f_W2"), P("f_b2"),
                          P("ln2_gamma"), P("ln2_beta"), y.data());
  };
  if (const int rc = run(); rc != 0) {
    std::fprintf(stderr, "run_bert_layer: bert_layer_run failed (%d): %s\n", rc, bert_layer_last_error());
    return 1;
  }

  pto::bert_ref::Weights w;
  for (const auto& [n, v] : f) w[n] = Vec(v.begin(), v.end());
  const Vec want = pto::bert_ref::layer(w.at("X"), w.at("mask"), w, c);
  double scale = 0, err = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    scale = std::max(scale, std::fabs(want[i]));
    err = std::max(err, std::fabs(y[i] - want[i]));
  }
  // f32 end to end: 1e-3 of the output's scale is far above rounding and far below any bug.
  const bool ok = err <= 1e-3 * scale;

  std::vector<double> ms;
  for (int i = 0; i < 30; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  std::printf("run_bert_layer: generated libbert_layer, B=1 S=128: max rel err vs float64 %.2e %s; median %.3f ms (min %.3f, max %.3f, 30 runs)\n",
              err / scale, ok ? "OK" : "FAILED", ms[ms.size() / 2], ms.front(), ms.back());
  // A NULL buffer is reported through the return code, not a crash.
  const int rc = bert_layer_run(nullptr, P("mask"), P("a_Wq"), P("a_bq"), P("a_Wk"), P("a_bk"), P("a_Wv"), P("a_bv"),
                                P("a_Wo"), P("a_bo"), P("ln1_gamma"), P("ln1_beta"), P("f_W1"), P("f_b1"), P("f_W2"),
                                P("f_b2"), P("ln2_gamma"), P("ln2_beta"), y.data());
  std::printf("run_bert_layer: a NULL input returns %d (%s)\n", rc, rc ? bert_layer_last_error() : "NOT REPORTED");
  return ok && rc != 0 ? 0 : 1;
}
