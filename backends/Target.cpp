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
  if (ht.has_feature(F::CUDA)) t.device = "cuda";
  if (ht.has_feature(F::OpenCL)) t.device = "opencl";
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

Target parse_target(const std::string& name) {
  std::string base = name, gpu;
  for (const std::string g : {"cuda", "opencl"}) {
    if (name == g || name == "host-" + g) {
      base = "host";
      gpu = g;
    }
  }
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
  } else if (Halide::Target::validate_target_string(name)) {
    ht = Halide::Target(name);  // a raw Halide target string, for experts
  } else {
    std::string valid;
    for (const auto& n : known_target_names()) valid += (valid.empty() ? "" : ", ") + n;
    throw TargetError("unknown target '" + name + "'; valid: " + valid +
                      ", or a Halide target string such as x86-64-linux-avx2");
  }
  if (gpu == "cuda") ht = ht.with_feature(Halide::Target::CUDA).with_feature(Halide::Target::CUDACapability70);
  if (gpu == "opencl") ht = ht.with_feature(Halide::Target::OpenCL);
  return from_halide(name, ht);
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
