// Targets: a name users type, the Halide target it maps to, and a small
// hardware model (cores, vector width and registers, caches, matrix unit)
// that default schedules, validation and the autotuner's search space are
// derived from.
//
// For `host` the model is read off the machine at run time: cores from the
// process's CPU affinity, cache sizes per core from sysfs (Linux), the ISA
// from Halide's host detection. Named cross targets carry fixed values, the
// documented ones of the CPU family each name stands for (see Target.cpp), so
// that a library generated for `x86-64-avx512` is the same on every machine.
// This folder sits below schedules/: schedules read the model, nothing here
// knows schedules.
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
  int vector_registers = 16;  // architectural vector registers (zmm0-31 on AVX-512)
  // Independent vector FMAs the core keeps in flight: FMA latency x FMA pipes
  // (4 x 2 on x86 since Skylake and Zen 4, and on Arm's Neoverse cores). A
  // loop whose register tile has fewer accumulators waits on their chains.
  int fmas_in_flight = 8;
  bool avx512_bf16 = false;
  bool amx = false;
  // Data caches: L1 and L2 per core, L3 in all (shared by the cores).
  int64_t l1_bytes = 32 * 1024;
  int64_t l2_bytes = 1024 * 1024;
  int64_t l3_bytes = 16 * 1024 * 1024;
  int cache_line_bytes = 64;
  bool detected = false;      // the model was read off this machine (host), not a table
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
  // The hardware model as one line, e.g. for `pto target` and benchmark headers:
  // "host: x86 avx512 (32 x 512-bit regs), 2 cores, L1 48 KB, L2 2 MB, L3 300 MB (detected)".
  std::string describe() const;
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

// Asks Linux for the AMX tile state of this process (arch_prctl
// ARCH_REQ_XCOMP_PERM for XTILEDATA), once: until it is granted, every AMX
// instruction faults (SIGILL). True when granted; false off Linux or x86, or
// where the kernel refuses (its reason in `why`).
bool request_amx_state(std::string* why = nullptr);

}  // namespace pto
