#include "backends/Target.h"

#include <Halide.h>

#include <thread>

#include "dsl/Error.h"

namespace pto {
namespace {

Target from_halide(const std::string& name, const Halide::Target& ht) {
  Target t;
  t.name = name;
  t.halide = ht.to_string();
  t.cores = std::max(1u, std::thread::hardware_concurrency());
  using F = Halide::Target::Feature;
  switch (ht.arch) {
    case Halide::Target::X86: t.arch = "x86"; break;
    case Halide::Target::ARM: t.arch = "arm"; break;
    default: t.arch = "other"; break;
  }
  if (ht.has_feature(F::AVX512)) t.vector_bits = 512;
  else if (ht.has_feature(F::AVX2) || ht.has_feature(F::AVX)) t.vector_bits = 256;
  else t.vector_bits = 128;
  t.avx512_bf16 = ht.has_feature(F::AVX512_SapphireRapids) || ht.has_feature(F::AVX512_Zen4);
  t.amx = ht.has_feature(F::AVX512_SapphireRapids);
  if (t.amx) {  // AMX tiles: 16 rows of 64 bytes
    t.matrix_tile_rows = 16;
    t.matrix_tile_bytes = 64;
  }
  if (ht.has_feature(F::CUDA)) {
    t.device = "cuda";
    t.gpu_max_threads_per_block = 1024;
    t.gpu_shared_bytes = 48 * 1024;
    t.gpu_compute_capability = ht.get_cuda_capability_lower_bound();
  }
  if (ht.has_feature(F::OpenCL)) {
    t.device = "opencl";
    // The OpenCL 1.2 guaranteed minimums; PoCL's CPU device and GPUs allow more.
    t.gpu_max_threads_per_block = 256;
    t.gpu_shared_bytes = 32 * 1024;
  }
  if (t.arch == "x86" && t.vector_bits == 512) {
    t.l1_bytes = 48 * 1024;
    t.l2_bytes = 2 * 1024 * 1024;
  }
  return t;
}

}  // namespace

std::vector<std::string> known_target_names() {
  return {"host", "x86-64-avx2", "x86-64-avx512", "x86-64-sapphirerapids", "arm-64-linux",
          "cuda", "opencl", "host-cuda", "host-opencl"};
}

std::string Target::cpu_name() const {
  for (const std::string g : {"cuda", "opencl"}) {
    if (name == g) return "host";
    const std::string suffix = "-" + g;
    if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
      return name.substr(0, name.size() - suffix.size());
  }
  return name;
}

Target parse_target(const std::string& name) {
  if (name.empty()) throw TargetError("empty target name; valid: " + [] {
    std::string v;
    for (const auto& n : known_target_names()) v += (v.empty() ? "" : ", ") + n;
    return v;
  }());
  std::string base = name, gpu;
  for (const std::string g : {"cuda", "opencl"}) {
    const std::string suffix = "-" + g;
    if (name == g) {
      base = "host";
      gpu = g;
    } else if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      base = name.substr(0, name.size() - suffix.size());
      gpu = g;
    }
  }
  if (!gpu.empty() && base == "arm-64-linux")
    throw TargetError("target '" + name + "': GPU devices are supported with x86-64 hosts only; use host-" + gpu +
                      " or x86-64-avx2-" + gpu);
  Halide::Target ht;
  if (base == "host") {
    ht = Halide::get_host_target();
  } else if (base == "x86-64-avx2") {
    ht = Halide::Target("x86-64-linux-avx-avx2-f16c-fma-sse41");
  } else if (base == "x86-64-avx512") {
    ht = Halide::Target("x86-64-linux-avx-avx2-f16c-fma-sse41-avx512-avx512_skylake");
  } else if (base == "x86-64-sapphirerapids") {
    ht = Halide::Target(
        "x86-64-linux-avx-avx2-f16c-fma-sse41-avx512-avx512_skylake-avx512_cannonlake-"
        "avx512_sapphirerapids-avx512_zen4-avxvnni");
  } else if (base == "arm-64-linux") {
    ht = Halide::Target("arm-64-linux-arm_dot_prod-arm_fp16");
  } else if (Halide::Target::validate_target_string(base)) {
    ht = Halide::Target(base);  // a raw Halide target string, for experts
  } else {
    std::string valid;
    for (const auto& n : known_target_names()) valid += (valid.empty() ? "" : ", ") + n;
    throw TargetError("unknown target '" + name + "'; valid: " + valid +
                      ", a CPU name with a -cuda or -opencl suffix, or a Halide target string such as "
                      "x86-64-linux-avx2");
  }
  if (gpu == "cuda") ht = ht.with_feature(Halide::Target::CUDA).with_feature(Halide::Target::CUDACapability70);
  if (gpu == "opencl") ht = ht.with_feature(Halide::Target::OpenCL);
  return from_halide(name, ht);
}

std::vector<Target> parse_targets(const std::string& comma_list) {
  std::vector<Target> r;
  size_t start = 0;
  while (true) {
    const size_t comma = comma_list.find(',', start);
    const std::string item = comma_list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (item.empty()) throw TargetError("target list '" + comma_list + "' has an empty item; write e.g. x86-64-avx512,x86-64-avx2");
    r.push_back(parse_target(item));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return r;
}

bool Target::runs_here() const {
  const Halide::Target host = Halide::get_host_target();
  const Halide::Target t(halide);
  if (t.arch != host.arch || t.bits != host.bits || t.os != host.os) return false;
  using F = Halide::Target::Feature;
  for (const F f : {F::SSE41, F::AVX, F::AVX2, F::FMA, F::F16C, F::AVX512, F::AVX512_Skylake,
                    F::AVX512_Cannonlake, F::AVX512_SapphireRapids, F::AVX512_Zen4, F::AVXVNNI,
                    F::ARMDotProd, F::ARMFp16}) {
    if (t.has_feature(f) && !host.has_feature(f)) return false;
  }
  return true;
}

}  // namespace pto
