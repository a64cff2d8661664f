// bf16 <-> f32 for the apps' inputs and checks (the bits a bf16 buffer holds).
// Header-only and free of PTO, so plain programs on generated libraries use it too.
#pragma once

#include <cstdint>
#include <cstring>

namespace pto::bench {

// Round to nearest even (finite inputs; the apps feed random finite data).
inline uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

inline float from_bf16(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace pto::bench
