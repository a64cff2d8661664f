// The GPU default schedule is what default_schedule gives a device target, so
// that JIT kernels (Kernel, pypto), `pto schedule/explain/run/gen`, generator
// programs and the tuner's baseline cannot start from different schedules: a
// device target's default maps its materialized stages to GPU blocks x
// threads, a CPU target's keeps every stage on the host, and a generated
// library records the same schedule a JIT kernel is built with and that
// schedule runs on the OpenCL device (PoCL) within float64 tolerance.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "Helpers.h"
#include "backends/Generator.h"
#include "dsl/Workloads.h"
#include "schedules/ScheduleJson.h"
#include "schedules/Validate.h"
#include "schedules/defaults/Defaults.h"
#include "schedules/defaults/Gpu.h"

using namespace pto;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

const std::map<std::string, int64_t> kMatmul{{"M", 20}, {"N", 40}, {"K", 8}},
    kRows{{"R", 7}, {"C", 37}};

Program workload(const std::string& w) {
  return make_workload(w, w.find("matmul") == 0 ? kMatmul : kRows);
}

size_t stages_on_device(const Schedule& s, const std::string& device) {
  size_t n = 0;
  for (const auto& [stage, ss] : s.stages)
    if (ss.device == device && !ss.gpu.blocks.empty() && !ss.gpu.threads.empty()) ++n;
  return n;
}

}  // namespace

TEST_CASE("default_schedule gives device targets the GPU default and CPU targets a host schedule",
          "[defaults][device]") {
  for (const std::string w : {"matmul_bias_relu", "softmax", "layer_norm"}) {
    const Program p = workload(w);
    for (const std::string target : {"host-opencl", "cuda"}) {
      const Target t = parse_target(target);
      const Schedule s = default_schedule(p, t);
      CHECK(s == gpu_default_schedule(p, t));
      CHECK_NOTHROW(validate(p, s, &t));
      // Every stage the default materializes runs on the device, mapped to blocks x threads.
      size_t materialized = 0;
      for (const auto& [stage, ss] : s.stages)
        if (ss.compute.kind != Placement::Kind::Inline) ++materialized;
      CHECK(materialized > 0);
      CHECK(stages_on_device(s, t.device) == materialized);
    }
    const Target host = parse_target("host");
    const Schedule cpu = default_schedule(p, host);
    CHECK(stages_on_device(cpu, "opencl") + stages_on_device(cpu, "cuda") == 0);
    for (const auto& [stage, ss] : cpu.stages) {
      CHECK(ss.device == "cpu");
      CHECK(ss.gpu.threads.empty());
    }
    CHECK_THROWS_AS(gpu_default_schedule(p, host), TargetError);
  }
}

TEST_CASE("a generated library and a JIT kernel get the same default schedule on host-opencl",
          "[defaults][device][opencl]") {
  const Target t = parse_target("host-opencl");
  const Program p = workload("softmax");
  const Schedule jit_default = default_schedule(p, t);
  REQUIRE(stages_on_device(jit_default, "opencl") > 0);

  const KernelSpec spec{"sm", p, {}};  // no schedule of its own: the generator picks the default
  CHECK(schedule_for(spec, t) == jit_default);
  const fs::path dir = fs::temp_directory_path() / "pto_test_gpu_default";
  fs::remove_all(dir);
  LibraryOptions o;
  o.name = "gpu_default";
  o.targets = {t};
  const GeneratedLibrary lib = generate_library({spec}, o, dir.string());
  std::stringstream header;
  header << std::ifstream(lib.header).rdbuf();
  CHECK_THAT(header.str(),
             Contains("schedule for host-opencl: " + schedule_to_json_string(jit_default, -1)));

  // That schedule, JIT-compiled, runs on the device and matches float64.
  std::mt19937 rng(5);
  std::map<std::string, HostTensor> in;
  for (const auto& i : p.inputs()) {
    std::vector<int64_t> shape;
    for (const Dim& d : i.shape) shape.push_back(d.value);
    in[i.name] = test::random_tensor(shape, rng, -2, 2);
  }
  const Kernel k(p, jit_default, t);
  // f32 on the device: exp within a few ulp, 37-term sums: relative error ~1e-6.
  CHECK(test::tolerance_ratio(test::run_f32(k, in)[0], interpret(p, in).at("Y"), 1e-5, 1e-6) <=
        1.0);
  fs::remove_all(dir);
}
