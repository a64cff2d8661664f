// Test helpers: random inputs, running a Kernel on HostTensors, and
// comparing with the float64 interpreter under a per-dtype tolerance.
#pragma once

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <random>

#include "backends/Jit.h"
#include "dsl/BFloat16.h"
#include "dsl/Interpreter.h"

namespace pto::test {

// An integer from the environment (test sizes: PTO_DIFF_TRIALS, PTO_RANDOM_PROGRAMS, ...).
inline int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

inline HostTensor random_tensor(std::vector<int64_t> shape, std::mt19937& rng, double lo = -1, double hi = 1) {
  HostTensor t;
  t.shape = std::move(shape);
  t.data.resize(static_cast<size_t>(t.numel()));
  std::uniform_real_distribution<double> d(lo, hi);
  for (auto& x : t.data) x = d(rng);
  return t;
}

// Integers in [-3, 3]: f32 adds up to 2^24 / 3 of them exactly, so a dropped,
// repeated or misplaced term of a sum shows whatever the summation order.
inline HostTensor small_integers(const std::vector<int64_t>& shape, std::mt19937& rng) {
  HostTensor h = random_tensor(shape, rng, -3.49, 3.49);
  for (double& v : h.data) v = std::round(v);
  return h;
}

// The machine the tests run on, detected once.
inline const Target& host_target() {
  static const Target t = parse_target("host");
  return t;
}

// `v` rounded to the nearest bf16 value.
inline double round_bf16(double v) { return from_bf16(to_bf16(static_cast<float>(v))); }

// Random inputs U(-1, 1) for every input of `p` (static shapes).
inline std::map<std::string, HostTensor> random_inputs(const Program& p, std::mt19937& rng) {
  std::map<std::string, HostTensor> in;
  for (const auto& i : p.inputs()) {
    std::vector<int64_t> shape;
    for (const Dim& d : i.shape) shape.push_back(d.value);
    in[i.name] = random_tensor(shape, rng);
  }
  return in;
}

// Runs `k` on f32 copies of `inputs` (bf16 copies for its bf16 inputs; f32
// outputs); returns outputs as HostTensors. `memory_limit`, `on_refusal` and
// `stats` are Kernel::run's.
inline std::vector<HostTensor> run_f32(const Kernel& k,
                                       const std::map<std::string, HostTensor>& inputs,
                                       size_t memory_limit = 0,
                                       OnRefusal on_refusal = OnRefusal::Fail,
                                       RunStats* stats = nullptr) {
  const Program& p = k.program();
  std::vector<std::vector<float>> in_store;
  std::vector<std::vector<uint16_t>> bf16_store;  // bf16 inputs: values rounded to nearest even
  std::vector<BufferRef> ins;
  std::vector<std::vector<int64_t>> shapes;
  for (const auto& in : p.inputs()) {
    const HostTensor& h = inputs.at(in.name);
    if (in.dtype == DType::BF16) {
      auto& b = bf16_store.emplace_back();
      for (const double v : h.data) b.push_back(to_bf16(static_cast<float>(v)));
      ins.push_back({b.data(), DType::BF16, h.shape, {}});
    } else {
      in_store.emplace_back(h.data.begin(), h.data.end());
      ins.push_back({in_store.back().data(), DType::F32, h.shape, {}});
    }
    shapes.push_back(h.shape);
  }
  const auto out_shapes = k.output_shapes(shapes);
  std::vector<std::vector<float>> out_store;
  std::vector<BufferRef> outs;
  for (const auto& s : out_shapes) {
    int64_t n = 1;
    for (int64_t e : s) n *= e;
    out_store.emplace_back(static_cast<size_t>(n), std::nanf(""));
  }
  for (size_t i = 0; i < out_shapes.size(); ++i) outs.push_back({out_store[i].data(), DType::F32, out_shapes[i], {}});
  const RunStats st = k.run(ins, outs, memory_limit, on_refusal);
  if (stats) *stats = st;
  std::vector<HostTensor> r;
  for (size_t i = 0; i < out_shapes.size(); ++i) r.push_back({out_shapes[i], {out_store[i].begin(), out_store[i].end()}});
  return r;
}

// A [N, C, H, W] tensor as [N, H, W, C] (channels-last references from channels-first loops).
inline HostTensor nchw_to_nhwc(const HostTensor& t) {
  const int64_t n = t.shape[0], c = t.shape[1], h = t.shape[2], w = t.shape[3];
  HostTensor r{{n, h, w, c}, std::vector<double>(t.data.size())};
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t y = 0; y < h; ++y)
        for (int64_t x = 0; x < w; ++x)
          r.data[static_cast<size_t>(((i * h + y) * w + x) * c + ch)] =
              t.data[static_cast<size_t>(((i * c + ch) * h + y) * w + x)];
  return r;
}

// max |got - want| / (atol/rtol scale), i.e. <= 1 means within tolerance.
inline double tolerance_ratio(const HostTensor& got, const HostTensor& want, double rtol, double atol) {
  REQUIRE(got.shape == want.shape);
  double worst = 0;
  for (size_t i = 0; i < got.data.size(); ++i) {
    const double lim = atol + rtol * std::fabs(want.data[i]);
    const double err = std::fabs(got.data[i] - want.data[i]);
    if (std::isnan(got.data[i]) != std::isnan(want.data[i])) return INFINITY;
    if (!std::isnan(err)) worst = std::max(worst, err / lim);
  }
  return worst;
}

}  // namespace pto::test
