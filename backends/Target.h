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
  // Matrix unit (AMX on sapphirerapids): tile rows x bytes per row; 0 = none.
  int matrix_tile_rows = 0;
  int matrix_tile_bytes = 0;
  // GPU part (device cuda | opencl): launch limits the GPU mapping must respect.
  int gpu_max_threads_per_block = 0;
  int64_t gpu_shared_bytes = 0;
  int gpu_compute_capability = 0;  // cuda only: e.g. 70

  std::string cpu_name() const;  // the name without a "-cuda" / "-opencl" suffix
  bool has_device() const { return device != "cpu"; }

  // Lanes of `t` in one vector register.
  int vector_lanes(DType t) const { return vector_bits / (bytes(t) * 8); }
  bool runs_here() const;  // can JIT code for it run in this process?
};

// Parses a target name: a CPU name (host, x86-64-avx2, ..., arm-64-linux), a
// GPU name (cuda, opencl = host-cuda, host-opencl), a CPU name with a GPU
// suffix (x86-64-avx2-opencl), or a raw Halide target string. Throws
// TargetError naming the valid choices.
Target parse_target(const std::string& name);
// A comma-separated list, e.g. "x86-64-avx512,x86-64-avx2"; throws TargetError
// for an empty list or an empty item.
std::vector<Target> parse_targets(const std::string& comma_list);
std::vector<std::string> known_target_names();

}  // namespace pto
