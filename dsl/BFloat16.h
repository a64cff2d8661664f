// bf16 <-> f32 on the host: the bits a bf16 buffer holds. Rounds to nearest
// even, as vcvtneps2bf16 and Halide's conversion do; inf and NaN pass through.
// Header-only and free of the rest of PTO, so plain programs that link only a
// generated library (apps/bert/run_bert_layer.cpp) use it too.
#pragma once

#include <cstdint>
#include <cstring>

namespace pto {

inline uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7f800000u) != 0x7f800000u) u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

inline float from_bf16(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace pto
