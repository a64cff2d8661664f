// Host buffers of a program's inputs and outputs in their own element types
// (f32, bf16, f16): the seeded random inputs and the output storage that the
// tuner's workers and side-by-side comparisons run kernels on, with f32 views
// for checking results against the reference.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "backends/Jit.h"
#include "dsl/Program.h"

namespace pto::tuner {

// Storage on cache-line boundaries. A kernel's time must not depend on where
// the allocator happened to put its buffers: the same softmax schedule ran 8%
// apart in two processes of bench_tune (its rows' vector stores split across
// lines or not), enough to reverse the tuner's pick against the default.
template <class T>
struct CacheLineAllocator {
  using value_type = T;
  static constexpr size_t kAlign = 64;
  CacheLineAllocator() = default;
  template <class U>
  CacheLineAllocator(const CacheLineAllocator<U>&) {}
  T* allocate(size_t n) {
    const size_t bytes = (n * sizeof(T) + kAlign - 1) / kAlign * kAlign;
    void* p = std::aligned_alloc(kAlign, std::max(bytes, kAlign));
    if (!p) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t) { std::free(p); }
  template <class U>
  bool operator==(const CacheLineAllocator<U>&) const {
    return true;
  }
};
template <class T>
using AlignedVector = std::vector<T, CacheLineAllocator<T>>;

struct HostBuffer {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  AlignedVector<float> f32;      // dtype F32
  AlignedVector<uint16_t> bits;  // dtype BF16 or F16: the raw 16-bit values

  void* data() { return dtype == DType::F32 ? static_cast<void*>(f32.data()) : static_cast<void*>(bits.data()); }
  BufferRef ref() { return {data(), dtype, shape, {}}; }
  std::vector<float> to_f32() const;
};

// The value of f16 bits.
float from_f16(uint16_t bits);

// Zeroed storage of one tensor of `dtype` (f32, bf16 or f16; else DTypeError
// naming `what`) and `shape`.
HostBuffer host_buffer(DType dtype, const std::vector<int64_t>& shape, const std::string& what);

// Uniform in [-1, 1), seeded, rounded to each input's type; Program::inputs() order.
// Throws DTypeError for types other than f32, bf16 and f16, and ShapeError for symbolic sizes.
std::vector<HostBuffer> input_buffers(const Program& p, uint64_t seed);
// NaN-filled storage for each output; Program::outputs() order.
std::vector<HostBuffer> output_buffers(const Program& p);

// Largest |got - ref| relative to each reference output's largest magnitude
// (infinity where one side has a NaN the other lacks): the check of the
// tuner's comparisons and `pto run`.
double max_rel_error(const std::vector<std::vector<float>>& got, const std::vector<std::vector<float>>& ref);
// Each buffer widened to f32.
std::vector<std::vector<float>> to_f32(const std::vector<HostBuffer>& bufs);

// The smallest error bound a correct schedule of `p` can meet against the
// f64 reference (relative to the output's largest magnitude): 1e-4 for f32
// stages (see MeasureOptions::tolerance), 1e-2 where the program's own stages
// round to bf16 or f16 (a 2^-8 relative rounding each, which the reference,
// computed in f64 throughout, does not make).
double rounding_tolerance(const Program& p);

}  // namespace pto::tuner
