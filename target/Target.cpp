#include "target/Target.h"

#include <Halide.h>
#include <fmt/format.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "dsl/Error.h"

namespace pto {
namespace {

// Cores this process may run on (its CPU affinity: a container or taskset
// may allow fewer than the machine has).
int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

std::string read_line(const std::string& path) {
  std::ifstream f(path);
  std::string s;
  std::getline(f, s);
  return s;
}

// "0-3,8" -> 5
int count_cpu_list(const std::string& list) {
  int n = 0;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const auto dash = item.find('-');
    if (item.empty()) continue;
    if (dash == std::string::npos) ++n;
    else n += std::stoi(item.substr(dash + 1)) - std::stoi(item.substr(0, dash)) + 1;
  }
  return std::max(1, n);
}

// "48K" / "2048K" / "1M" -> bytes
int64_t parse_size(const std::string& s) {
  if (s.empty()) return 0;
  size_t pos = 0;
  const int64_t v = std::stoll(s, &pos);
  const char unit = pos < s.size() ? s[pos] : ' ';
  return unit == 'K' ? v * 1024 : unit == 'M' ? v * 1024 * 1024 : unit == 'G' ? v * 1024 * 1024 * 1024 : v;
}

// The host's data caches from sysfs: L1 and L2 as one core's share (a cache
// shared by k logical CPUs counts 1/k: with every core busy that is what
// each gets), L3 whole. Returns false where sysfs has no cache description.
bool detect_caches(Target& t) {
  bool any = false;
  for (int i = 0; i < 16; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    const std::string level = read_line(dir + "level");
    if (level.empty()) break;
    const std::string type = read_line(dir + "type");
    if (type == "Instruction") continue;
    int64_t size = 0;
    try {
      size = parse_size(read_line(dir + "size"));
    } catch (const std::exception&) {
      continue;
    }
    if (size <= 0) continue;
    const int sharing = count_cpu_list(read_line(dir + "shared_cpu_list"));
    if (level == "1") t.l1_bytes = size / sharing;
    else if (level == "2") t.l2_bytes = size / sharing;
    else if (level == "3") t.l3_bytes = size;
    else continue;
    any = true;
    const std::string line = read_line(dir + "coherency_line_size");
    if (!line.empty()) t.cache_line_bytes = std::max(16, std::atoi(line.c_str()));
  }
  return any;
}

// Fixed hardware models of the named cross targets: the documented caches of
// the CPU family each name stands for, so that what is generated for a name
// does not depend on the machine that generates it.
//   x86-64-avx2            Zen 3-class desktop cores: L1d 32 KB, L2 512 KB per core, L3 32 MB
//   x86-64-avx512          Skylake-SP / Ice Lake-SP: L1d 32 KB (Ice Lake 48), L2 1 MB per core, L3 32 MB
//   x86-64-sapphirerapids  Sapphire Rapids: L1d 48 KB, L2 2 MB per core, L3 1.875 MB per core (~105 MB)
//   arm-64-linux           Neoverse N1: L1d 64 KB, L2 1 MB per core, L3 32 MB
// Cores are this machine's for every target: a generated library's thread
// pool sizes itself where it runs, and the schedules only split work in
// blocks per core.
void named_caches(const std::string& base, Target& t) {
  if (base == "x86-64-avx2") t.l1_bytes = 32 << 10, t.l2_bytes = 512 << 10, t.l3_bytes = 32 << 20;
  if (base == "x86-64-avx512") t.l1_bytes = 32 << 10, t.l2_bytes = 1 << 20, t.l3_bytes = 32 << 20;
  if (base == "x86-64-sapphirerapids") t.l1_bytes = 48 << 10, t.l2_bytes = 2 << 20, t.l3_bytes = 105 << 20;
  if (base == "arm-64-linux") t.l1_bytes = 64 << 10, t.l2_bytes = 1 << 20, t.l3_bytes = 32 << 20;
}

Target from_halide(const std::string& name, const Halide::Target& ht) {
  Target t;
  t.name = name;
  t.halide = ht.to_string();
  t.cores = usable_cores();
  using F = Halide::Target::Feature;
  switch (ht.arch) {
    case Halide::Target::X86: t.arch = "x86"; break;
    case Halide::Target::ARM: t.arch = "arm"; break;
    default: t.arch = "other"; break;
  }
  if (ht.has_feature(F::AVX512)) t.vector_bits = 512;
  else if (ht.has_feature(F::AVX2) || ht.has_feature(F::AVX)) t.vector_bits = 256;
  else t.vector_bits = 128;
  // zmm0-31 with AVX-512, ymm/xmm0-15 before it; AArch64 has v0-31.
  t.vector_registers = (t.arch == "x86" && t.vector_bits == 512) || t.arch == "arm" ? 32 : 16;
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
  Target t = from_halide(name, ht);
  if (base == "host") t.detected = detect_caches(t);
  if (!t.detected) named_caches(base, t);
  return t;
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

std::string Target::describe() const {
  auto kb = [](int64_t b) {
    return b >= (1 << 20) && b % (1 << 20) == 0 ? fmt::format("{} MB", b >> 20) : fmt::format("{} KB", b >> 10);
  };
  std::string isa = vector_bits == 512 ? "avx512" : vector_bits == 256 ? "avx2" : arch == "arm" ? "neon" : "sse";
  if (arch != "x86") isa = arch == "arm" ? "neon" : arch;
  if (avx512_bf16) isa += "+bf16";
  if (amx) isa += "+amx";
  std::string r = fmt::format("{}: {} {} ({} x {}-bit regs), {} cores, L1 {}, L2 {}, L3 {}", name, arch, isa,
                              vector_registers, vector_bits, cores, kb(l1_bytes), kb(l2_bytes), kb(l3_bytes));
  if (device != "cpu") r += ", device " + device;
  return r + (detected ? " (detected)" : " (fixed model)");
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

bool request_amx_state(std::string* why) {
#if defined(__linux__) && defined(__x86_64__)
  static const int err = [] {
    constexpr long kReqXcompPerm = 0x1023;  // ARCH_REQ_XCOMP_PERM
    constexpr long kXtiledata = 18;         // XFEATURE_XTILEDATA
    return syscall(SYS_arch_prctl, kReqXcompPerm, kXtiledata) == 0 ? 0 : errno;
  }();
  if (err && why)
    *why = std::string("arch_prctl(ARCH_REQ_XCOMP_PERM) failed: ") + std::strerror(err);
  return err == 0;
#else
  if (why) *why = "AMX tiles are requested from Linux on x86-64 only";
  return false;
#endif
}

}  // namespace pto
