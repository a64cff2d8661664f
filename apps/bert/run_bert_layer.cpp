// run_bert_layer: the deployment end of the demo. A plain C++ program that
// links libbert, generated from bert_generator.cpp with the tuned schedules
// (a static library and its C header; no PTO and no Halide at link time),
// runs the BERT-base encoder layer (batch 1, sequence 128, the sizes the
// library was generated for) with f32 weights, with bf16 weights and in mixed
// bf16, checks each against the float64 reference and reports their times.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "dsl/BFloat16.h"
#include "apps/bert/BertReference.h"
#include "bert_pto.h"

namespace {

using pto::from_bf16;
using pto::to_bf16;

using pto::bert_ref::Vec;

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
  for (const char* n : {"a_Wq", "a_Wk", "a_Wv", "a_Wo"}) packed[n] = pto::models::block_weight(f[n].data(), H, H, c.weight_block);
  packed["f_W1"] = pto::models::block_weight(f["f_W1"].data(), H, F, c.weight_block);
  packed["f_W2"] = pto::models::block_weight(f["f_W2"].data(), F, H, c.weight_block);
  std::map<std::string, std::vector<uint16_t>> half;  // bf16 copies of the blocked weights
  for (const auto& [n, v] : packed)
    for (const float x : v) half[n].push_back(to_bf16(x));
  std::map<std::string, std::vector<uint16_t>> pairs;  // mixed bf16: blocked in pairs of input rows
  for (const char* n : {"a_Wq", "a_Wk", "a_Wv", "a_Wo"})
    for (const float x : pto::models::block_weight_pairs(f[n].data(), H, H, c.weight_block)) pairs[n].push_back(to_bf16(x));
  for (const float x : pto::models::block_weight_pairs(f["f_W1"].data(), H, F, c.weight_block)) pairs["f_W1"].push_back(to_bf16(x));
  for (const float x : pto::models::block_weight_pairs(f["f_W2"].data(), F, H, c.weight_block)) pairs["f_W2"].push_back(to_bf16(x));
  auto P = [&](const char* n) { return packed.count(n) ? packed[n].data() : f[n].data(); };
  auto Q = [&](const char* n) { return half.at(n).data(); };
  auto R = [&](const char* n) { return pairs.at(n).data(); };

  std::vector<float> y(static_cast<size_t>(S * H));
  // f32 weights (mode 0), the same weights rounded to bf16 (1), or mixed bf16 (2).
  auto run = [&](int mode, const float* x) {
    if (mode == 2)
      return bert_layer_mixed_run(x, P("mask"), R("a_Wq"), P("a_bq"), R("a_Wk"), P("a_bk"), R("a_Wv"), P("a_bv"), R("a_Wo"),
                                  P("a_bo"), P("ln1_gamma"), P("ln1_beta"), R("f_W1"), P("f_b1"), R("f_W2"), P("f_b2"),
                                  P("ln2_gamma"), P("ln2_beta"), y.data());
    if (mode == 1)
      return bert_layer_bf16_run(x, P("mask"), Q("a_Wq"), P("a_bq"), Q("a_Wk"), P("a_bk"), Q("a_Wv"), P("a_bv"), Q("a_Wo"),
                                 P("a_bo"), P("ln1_gamma"), P("ln1_beta"), Q("f_W1"), P("f_b1"), Q("f_W2"), P("f_b2"),
                                 P("ln2_gamma"), P("ln2_beta"), y.data());
    return bert_layer_run(x, P("mask"), P("a_Wq"), P("a_bq"), P("a_Wk"), P("a_bk"), P("a_Wv"), P("a_bv"), P("a_Wo"), P("a_bo"),
                          P("ln1_gamma"), P("ln1_beta"), P("f_W1"), P("f_b1"), P("f_W2"), P("f_b2"), P("ln2_gamma"),
                          P("ln2_beta"), y.data());
  };

  bool ok = true;
  for (const int mode : {0, 1, 2}) {
    const char* name = mode == 2 ? "layer_mixed" : mode == 1 ? "layer_bf16" : "layer";
    const bool bf16 = mode > 0;
    if (const int rc = run(mode, P("X")); rc != 0) {
      std::fprintf(stderr, "run_bert_layer: bert_%s_run failed (%d): %s\n", name, rc, bert_last_error());
      return 1;
    }
    // The reference gets the weights the kernel got (rounded to bf16 for layer_bf16).
    pto::bert_ref::Weights w;
    for (const auto& [n, v] : f) {
      w[n] = Vec(v.begin(), v.end());
      if (bf16 && half.count(n))
        for (double& x : w[n]) x = from_bf16(to_bf16(static_cast<float>(x)));
    }
    const Vec want = pto::bert_ref::layer(w.at("X"), w.at("mask"), w, c);
    double scale = 0, err = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      scale = std::max(scale, std::fabs(want[i]));
      err = std::max(err, std::fabs(y[i] - want[i]));
    }
    // f32 arithmetic end to end: 1e-3 of the output's scale is far above
    // rounding and far below any bug. Mixed bf16 also rounds each projection's
    // input to bf16 (2^-9 relative), which the reference does not: 1e-2
    // (measured 2e-3; bench_bert uses the same bound).
    const bool good = err <= (mode == 2 ? 1e-2 : 1e-3) * scale;
    ok &= good;
    std::vector<double> ms;
    for (int i = 0; i < 30; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      run(mode, P("X"));
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    std::printf("run_bert_layer: libbert %-10s B=1 S=128: max rel err vs float64 %.2e %s; median %.3f ms (min %.3f, max %.3f, 30 runs)\n",
                name, err / scale, good ? "OK" : "FAILED", ms[ms.size() / 2], ms.front(), ms.back());
  }
  // A NULL buffer is reported through the return code, not a crash.
  const int rc = run(0, nullptr);
  std::printf("run_bert_layer: a NULL input returns %d (%s)\n", rc, rc ? bert_last_error() : "NOT REPORTED");
  return ok && rc != 0 ? 0 : 1;
}
