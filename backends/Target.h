// Targets: a name users type, the Halide target it maps to, and a small
// hardware model (cores, vector width, caches, matrix unit) that default
// schedules, validation and the autotuner's search space are derived from.
#pragma once

#include <string>
#include <vector>

#include "dsl/Type.h"

namespace pto {

struct Target {
  std::string name;           // as given: "host", "x86-64-avx512", "opencl", ...
  std::string halide;         // Halide target string
  std::string arch;           // x86 | arm | cuda | opencl
  std::string device = "cpu"; // default device of stages: cpu | cuda | opencl
  int cores = 1;
  int vector_bits = 128;      // SIMD register width of the host CPU part
  bool avx512_bf16 = false;
  bool amx = false;
  int64_t l1_bytes = 32 * 1024;
  int64_t l2_bytes = 1024 * 1024;
  int64_t l3_bytes = 16 * 1024 * 1024;

  // Lanes of `t` in one vector register.
  int vector_lanes(DType t) const { return vector_bits / (bytes(t) * 8); }
  bool runs_here() const;  // can JIT code for it run in this process?
};

// Parses a target name; throws TargetError naming the valid choices.
Target parse_target(const std::string& name);
std::vector<std::string> known_target_names();

}  // namespace pto
