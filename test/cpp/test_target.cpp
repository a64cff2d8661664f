// Targets: every name parses to the right Halide target and hardware model;
// unknown and unsupported names give TargetErrors that list the valid choices.
#include <sched.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "target/Target.h"
#include "dsl/Error.h"

using namespace pto;
using Catch::Matchers::Contains;

TEST_CASE("every known target name parses, with its hardware model", "[target]") {
  for (const auto& n : known_target_names()) {
    const Target t = parse_target(n);
    CHECK(t.name == n);
    CHECK(!t.halide.empty());
  }
  const Target avx2 = parse_target("x86-64-avx2");
  CHECK(avx2.arch == "x86");
  CHECK(avx2.vector_bits == 256);
  CHECK(avx2.vector_lanes(DType::F32) == 8);
  CHECK(!avx2.has_device());
  const Target avx512 = parse_target("x86-64-avx512");
  CHECK(avx512.vector_bits == 512);
  CHECK(avx512.matrix_tile_rows == 0);
  const Target spr = parse_target("x86-64-sapphirerapids");
  CHECK(spr.amx);
  CHECK(spr.avx512_bf16);
  CHECK(spr.matrix_tile_rows == 16);
  CHECK(spr.matrix_tile_bytes == 64);
  const Target arm = parse_target("arm-64-linux");
  CHECK(arm.arch == "arm");
  CHECK(arm.vector_bits == 128);
  CHECK_FALSE(arm.runs_here());
}

TEST_CASE("GPU targets carry a device, launch limits and their CPU part", "[target]") {
  const Target cuda = parse_target("cuda");
  CHECK(cuda.device == "cuda");
  CHECK(cuda.gpu_max_threads_per_block == 1024);
  CHECK(cuda.gpu_compute_capability == 70);
  CHECK(cuda.cpu_name() == "host");
  const Target ocl = parse_target("x86-64-avx2-opencl");
  CHECK(ocl.device == "opencl");
  CHECK(ocl.vector_bits == 256);
  CHECK(ocl.cpu_name() == "x86-64-avx2");
  CHECK(ocl.halide.find("opencl") != std::string::npos);
  CHECK(parse_target("host-opencl").cpu_name() == "host");
  CHECK(parse_target("x86-64-linux-avx2").vector_bits == 256);  // a raw Halide string
}

TEST_CASE("unknown and unsupported targets are TargetErrors naming the choices", "[target][errors]") {
  CHECK_THROWS_AS(parse_target("x86-64-avx9"), TargetError);
  CHECK_THROWS_WITH(parse_target("x86-64-avx9"), Contains("unknown target 'x86-64-avx9'; valid: host"));
  CHECK_THROWS_WITH(parse_target("tpu"), Contains("unknown target 'tpu'") && Contains("x86-64-sapphirerapids"));
  CHECK_THROWS_WITH(parse_target("arm-64-linux-cuda"), Contains("x86-64 hosts only"));
  CHECK_THROWS_WITH(parse_target("metal"), Contains("unknown target 'metal'"));
  CHECK_THROWS_AS(parse_target(""), TargetError);
  CHECK_THROWS_WITH(parse_targets("x86-64-avx2,,host"), Contains("empty item"));
  CHECK_THROWS_WITH(parse_targets("x86-64-avx2,nosuch"), Contains("unknown target 'nosuch'"));
  const auto two = parse_targets("x86-64-avx512,x86-64-avx2");
  REQUIRE(two.size() == 2);
  CHECK(two[1].name == "x86-64-avx2");
}

// The host's model is read off this machine: compare with what the OS says
// through another route (sysconf, the affinity mask), not with fixed numbers.
TEST_CASE("host: cores, caches and vector registers are detected at run time", "[target]") {
  const Target h = parse_target("host");
  cpu_set_t set;
  CPU_ZERO(&set);
  REQUIRE(sched_getaffinity(0, sizeof(set), &set) == 0);
  CHECK(h.cores == CPU_COUNT(&set));
  CHECK(h.vector_registers == (h.arch == "arm" || h.vector_bits == 512 ? 32 : 16));
  CHECK(h.cache_line_bytes >= 16);
  if (h.detected) {
    // sysconf reports the whole L1d/L2 of one core on Linux/glibc.
    const long l1 = sysconf(_SC_LEVEL1_DCACHE_SIZE), l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    if (l1 > 0) CHECK(h.l1_bytes <= l1);
    if (l2 > 0) CHECK(h.l2_bytes <= l2);
    CHECK(h.l1_bytes >= 8 * 1024);
    CHECK(h.l2_bytes > h.l1_bytes);
    CHECK(h.l3_bytes >= 0);
  }
  CHECK_THAT(h.describe(), Contains("cores") && Contains("L2"));
  // Named cross targets have fixed models that do not depend on this machine.
  const Target a = parse_target("x86-64-avx512");
  CHECK_FALSE(a.detected);
  CHECK(a.l2_bytes == 1 << 20);
  CHECK(parse_target("x86-64-sapphirerapids").l2_bytes == 2 << 20);
}
