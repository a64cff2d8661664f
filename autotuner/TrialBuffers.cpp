#include "autotuner/TrialBuffers.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>

#include "dsl/BFloat16.h"
#include "dsl/Error.h"

namespace pto::tuner {
namespace {

uint16_t f16_bits(float f) {
  const _Float16 h = static_cast<_Float16>(f);
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}

HostBuffer storage(DType t, const Shape& shape, const std::string& what) {
  if (t != DType::F32 && t != DType::BF16 && t != DType::F16)
    throw DTypeError("tuning supports f32, bf16 and f16 " + what + "; it is " + std::string(to_string(t)));
  HostBuffer b;
  b.dtype = t;
  for (const Dim& d : shape) {
    if (d.is_symbolic())
      throw ShapeError("tuning needs static sizes: " + what + " has symbolic size '" + d.sym + "'; give it a value with --set");
    b.shape.push_back(d.value);
  }
  return b;
}

}  // namespace

float from_f16(uint16_t b) {
  _Float16 h;
  std::memcpy(&h, &b, 2);
  return static_cast<float>(h);
}

std::vector<float> HostBuffer::to_f32() const {
  if (dtype == DType::F32) return {f32.begin(), f32.end()};
  std::vector<float> r;
  r.reserve(bits.size());
  for (const uint16_t v : bits) r.push_back(dtype == DType::BF16 ? from_bf16(v) : from_f16(v));
  return r;
}

std::vector<HostBuffer> input_buffers(const Program& p, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<HostBuffer> r;
  for (const auto& in : p.inputs()) {
    HostBuffer b = storage(in.dtype, in.shape, "input '" + in.name + "'");
    const auto n = static_cast<size_t>(static_numel(in.shape));
    for (size_t i = 0; i < n; ++i) {
      const float v = d(rng);
      if (b.dtype == DType::F32) b.f32.push_back(v);
      else b.bits.push_back(b.dtype == DType::BF16 ? to_bf16(v) : f16_bits(v));
    }
    r.push_back(std::move(b));
  }
  return r;
}

HostBuffer host_buffer(DType dtype, const std::vector<int64_t>& shape, const std::string& what) {
  HostBuffer b;
  b.dtype = dtype;
  b.shape = shape;
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  if (dtype == DType::F32)
    b.f32.assign(n, 0.0f);
  else if (dtype == DType::BF16 || dtype == DType::F16)
    b.bits.assign(n, 0);
  else
    throw DTypeError(what + " has type " + std::string(to_string(dtype)) +
                     "; only f32, bf16 and f16 are supported");
  return b;
}

std::vector<HostBuffer> output_buffers(const Program& p) {
  std::vector<HostBuffer> r;
  for (const auto& o : p.outputs()) {
    const Stage& st = p.stage(o);
    HostBuffer b = storage(st.dtype, st.shape, "output '" + o + "'");
    const auto n = static_cast<size_t>(static_numel(st.shape));
    if (b.dtype == DType::F32) b.f32.assign(n, std::nanf(""));
    else b.bits.assign(n, b.dtype == DType::BF16 ? to_bf16(std::nanf("")) : f16_bits(std::nanf("")));
    r.push_back(std::move(b));
  }
  return r;
}

double max_rel_error(const std::vector<std::vector<float>>& got, const std::vector<std::vector<float>>& ref) {
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double scale = 1e-30;
    for (float v : ref[i]) scale = std::max(scale, std::fabs(static_cast<double>(v)));
    for (size_t j = 0; j < got[i].size(); ++j) {
      if (std::isnan(got[i][j]) != std::isnan(ref[i][j])) return INFINITY;
      worst = std::max(worst, std::fabs(static_cast<double>(got[i][j]) - ref[i][j]) / scale);
    }
  }
  return worst;
}

std::vector<std::vector<float>> to_f32(const std::vector<HostBuffer>& bufs) {
  std::vector<std::vector<float>> r;
  for (const HostBuffer& b : bufs) r.push_back(b.to_f32());
  return r;
}

double rounding_tolerance(const Program& p) {
  for (const Stage& st : p.stages())
    if (st.dtype == DType::BF16 || st.dtype == DType::F16) return 1e-2;
  return 1e-4;
}

}  // namespace pto::tuner
