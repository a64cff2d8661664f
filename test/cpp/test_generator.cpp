// Generators: library contents (archive members, headers recording target and
// schedule), the generator registry, schedule files, device schedules, and
// the errors for bad names and target combinations. Running generated code is
// tested by the apps/deploy ctests (a separate program links the libraries).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "Helpers.h"
#include "backends/Archive.h"
#include "backends/GeneratorRegistry.h"
#include "backends/Lower.h"
#include "dsl/Workloads.h"
#include "schedules/ScheduleJson.h"
#include "schedules/Validate.h"
#include "schedules/defaults/Defaults.h"
#include "schedules/defaults/Gpu.h"

using namespace pto;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {
fs::path scratch(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("pto_test_generator_" + name);
  fs::remove_all(d);
  return d;
}
std::string read_text(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}
KernelSpec small_softmax(const std::string& name = "softmax") {
  return {name, make_workload("softmax", {{"R", 4}, {"C", 8}}), {}};
}
}  // namespace

TEST_CASE("a multi-kernel library is one archive with kernels and runtime, and a header recording both",
          "[generator]") {
  const fs::path dir = scratch("lib");
  LibraryOptions o;
  o.name = "mylib";
  o.targets = {parse_target("x86-64-avx2")};
  KernelSpec ln{"ln", make_workload("layer_norm", {{"R", 4}, {"C", 8}}), {}};
  Schedule plain = plain_schedule(ln.program);
  ln.schedules["x86-64-avx2"] = plain;
  const GeneratedLibrary lib = generate_library({small_softmax(), ln}, o, dir.string());
  CHECK(lib.functions == std::vector<std::string>{"mylib_softmax", "mylib_ln"});
  CHECK(lib.variants == std::vector<std::string>{"x86-64-avx2"});
  std::vector<std::string> members;
  for (const ArchiveMember& m : read_archive(lib.library)) {
    members.push_back(m.name);
    CHECK(m.data.compare(0, 4, "\x7f" "ELF") == 0);
  }
  const auto has = [&](const std::string& part) {
    return std::any_of(members.begin(), members.end(), [&](const std::string& m) { return m.find(part) != std::string::npos; });
  };
  CHECK(has("mylib_softmax"));
  CHECK(has("mylib_ln"));
  CHECK(has("runtime"));
  const std::string h = read_text(lib.header);
  CHECK_THAT(h, Contains("// library: mylib"));
  CHECK_THAT(h, Contains("x86-64-avx2 (x86-64-linux-avx-avx2"));
  CHECK_THAT(h, Contains("kernel mylib_ln: program layer_norm"));
  CHECK_THAT(h, Contains("schedule for x86-64-avx2: " + schedule_to_json_string(plain, -1)));
  CHECK_THAT(h, Contains("static inline int mylib_softmax_run(const float* X, float* Y)"));
  CHECK_THAT(h, Contains("runtime: embedded"));
  CHECK(fs::exists(dir / "HalideRuntime.h"));
  CHECK(fs::exists(dir / "mylib_ln.h"));
  CHECK_FALSE(fs::exists(dir / ".pto_tmp_mylib"));
  // options.threads sizes the runtime's pool around the call (only where set).
  CHECK_THAT(h, !Contains("halide_set_num_threads"));
  const fs::path dir1 = scratch("lib_threads");
  KernelSpec one = small_softmax();
  Schedule s1 = default_schedule(one.program, o.targets[0]);
  s1.options.threads = 1;
  one.schedules["x86-64-avx2"] = s1;
  const std::string h1 = read_text(generate_library({one}, o, dir1.string()).header);
  CHECK_THAT(h1, Contains("const int old_threads = halide_set_num_threads(1);"));
  CHECK_THAT(h1, Contains("halide_set_num_threads(old_threads);"));
}

TEST_CASE("a dispatching library lists its variants, baseline last, per-target libraries are separate",
          "[generator][dispatch]") {
  const fs::path dir = scratch("dispatch");
  LibraryOptions o;
  o.name = "d";
  o.targets = {parse_target("x86-64-avx512"), parse_target("x86-64-avx2")};
  o.dispatch = true;
  o.embed_runtime = false;
  const auto libs = generate_libraries({small_softmax()}, o, dir.string());
  REQUIRE(libs.size() == 1);
  CHECK(libs[0].variants == std::vector<std::string>{"x86-64-avx512", "x86-64-avx2", "x86-64-linux"});
  for (const ArchiveMember& m : read_archive(libs[0].library)) CHECK(m.name.find("runtime") == std::string::npos);
  const std::string h = read_text(libs[0].header);
  CHECK_THAT(h, Contains("d_variant_names[3] = {\"x86-64-avx512\", \"x86-64-avx2\", \"x86-64-linux\"}"));
  CHECK_THAT(h, Contains("d_restrict_dispatch"));
  CHECK_THAT(h, Contains("runtime: not included"));

  o.dispatch = false;
  o.embed_runtime = true;
  const auto per = generate_libraries({small_softmax()}, o, dir.string());
  REQUIRE(per.size() == 2);
  CHECK(fs::path(per[0].library).filename() == "d_x86_64_avx512.a");
  CHECK(per[1].functions == std::vector<std::string>{"d_x86_64_avx2_softmax"});
}

TEST_CASE("a runtime library holds the device APIs of its targets", "[generator]") {
  const fs::path dir = scratch("runtime");
  const std::string lib = generate_runtime(parse_targets("host-opencl,x86-64-avx2"), dir.string(), "rt");
  bool opencl = false;
  for (const ArchiveMember& m : read_archive(lib)) opencl = opencl || m.data.find("halide_opencl_device_interface") != std::string::npos;
  CHECK(opencl);
  CHECK_THROWS_WITH(generate_runtime(parse_targets("host,arm-64-linux"), dir.string(), "rt2"), Contains("differ in architecture"));
}

TEST_CASE("bad library requests are errors naming the problem", "[generator][errors]") {
  const std::string dir = scratch("errors").string();
  LibraryOptions o;
  o.name = "ok";
  o.targets = {parse_target("host")};
  LibraryOptions bad = o;
  bad.name = "my-lib";
  CHECK_THROWS_WITH(generate_library({small_softmax()}, bad, dir), Contains("'my-lib' must be a C identifier"));
  CHECK_THROWS_WITH(generate_library({small_softmax(), small_softmax()}, o, dir), Contains("kernel 'softmax' is listed twice"));
  CHECK_THROWS_WITH(generate_library({}, o, dir), Contains("has no kernels"));
  bad = o;
  bad.targets = parse_targets("x86-64-avx2,x86-64-avx512");
  CHECK_THROWS_AS(generate_library({small_softmax()}, bad, dir), TargetError);
  bad.dispatch = true;
  bad.targets = parse_targets("x86-64-avx2,host-opencl");
  CHECK_THROWS_WITH(generate_library({small_softmax()}, bad, dir), Contains("'host-opencl' has a GPU device"));
  bad.targets = parse_targets("x86-64-avx2,arm-64-linux");
  CHECK_THROWS_WITH(generate_library({small_softmax()}, bad, dir), Contains("differ in architecture"));
  // A schedule that does not fit the kernel names the stage.
  KernelSpec k = small_softmax();
  k.schedules["*"] = schedule_from_json_string(R"({"schema": 1, "stages": {"nosuch": {}}})");
  CHECK_THROWS_AS(generate_library({k}, o, dir), ScheduleError);
}

TEST_CASE("the registry builds named kernels and reads schedule files", "[generator][registry]") {
  GeneratorRegistry r;
  r.add("sm", [] { return make_workload("softmax", {{"R", 4}, {"C", 8}}); });
  r.add("mm", [] { return make_workload("matmul", {{"M", 4}, {"N", 8}, {"K", 3}}); });
  CHECK(r.names() == std::vector<std::string>{"sm", "mm"});
  CHECK_THROWS_WITH(r.add("sm", [] { return Program("x"); }), Contains("registered twice"));
  CHECK_THROWS_WITH(r.add("2x", [] { return Program("x"); }), Contains("C identifier"));
  CHECK_THROWS_WITH(r.build({"nosuch"}), Contains("unknown kernel 'nosuch'; this generator registers: sm, mm"));
  auto ks = r.build({"mm"});
  REQUIRE(ks.size() == 1);
  CHECK(ks[0].program.name() == "matmul");

  const fs::path dir = scratch("registry");
  fs::create_directories(dir);
  const Schedule plain = plain_schedule(ks[0].program);
  const std::string one = schedule_to_json_string(plain, -1);
  std::ofstream(dir / "s.json") << R"({"mm": {"x86-64-avx2": )" << one << "}}";
  apply_schedule_file((dir / "s.json").string(), ks);
  CHECK(schedule_for(ks[0], parse_target("x86-64-avx2")) == plain);
  CHECK(schedule_for(ks[0], parse_target("x86-64-avx512")) == default_schedule(ks[0].program, parse_target("x86-64-avx512")));
  std::ofstream(dir / "bad.json") << R"({"nosuch": )" << one << "}";
  CHECK_THROWS_WITH(apply_schedule_file((dir / "bad.json").string(), ks), Contains("kernel 'nosuch', which is not built; kernels: mm"));
  std::ofstream(dir / "bad2.json") << R"({"mm": {"schema": 99}})";
  CHECK_THROWS_AS(apply_schedule_file((dir / "bad2.json").string(), ks), ScheduleError);
  CHECK_THROWS_WITH(apply_schedule_file((dir / "t.db").string(), ks), Contains("tuning database"));
}

TEST_CASE("device schedules put every materialized stage on the GPU and validate", "[generator][device]") {
  for (const std::string target : {"host-opencl", "cuda"}) {
    const Target t = parse_target(target);
    const std::map<std::string, int64_t> mm{{"M", 20}, {"N", 40}, {"K", 8}}, rows{{"R", 5}, {"C", 33}};
    for (const std::string w : {"matmul", "softmax", "layer_norm", "matmul_bias_relu"}) {
      const Program p = make_workload(w, w.find("matmul") == 0 ? mm : rows);
      const Schedule s = default_schedule(p, t);
      CHECK_NOTHROW(validate(p, s, &t));
      for (const auto& [stage, ss] : s.stages) {
        if (ss.compute.kind == Placement::Kind::Inline) continue;
        CHECK(ss.device == t.device);
        CHECK(!ss.gpu.threads.empty());
      }
      CHECK_NOTHROW(lower(p, s, t));
    }
  }
  CHECK_THROWS_AS(gpu_default_schedule(make_workload("softmax"), parse_target("host")), TargetError);
}

TEST_CASE("JIT on the OpenCL device (PoCL) matches the float64 reference", "[generator][device][opencl]") {
  const Target t = parse_target("host-opencl");
  std::mt19937 rng(3);
  for (const std::string w : {"softmax", "layer_norm"}) {
    const Program p = make_workload(w, {{"R", 7}, {"C", 37}});
    std::map<std::string, HostTensor> in;
    for (const auto& i : p.inputs()) {
      std::vector<int64_t> shape;
      for (const Dim& d : i.shape) shape.push_back(d.value);
      in[i.name] = test::random_tensor(shape, rng, -2, 2);
    }
    const Kernel k(p, default_schedule(p, t), t);
    // f32 on the device: exp/sqrt within a few ulp, 37-term sums: relative error ~1e-6.
    CHECK(test::tolerance_ratio(test::run_f32(k, in)[0], interpret(p, in).at("Y"), 1e-5, 1e-6) <= 1.0);
  }
}

TEST_CASE("a kernel on AMX tiles asks Linux for their state in its _run wrapper",
          "[generator][amx]") {
  const fs::path dir = scratch("lib_amx");
  LibraryOptions o;
  o.name = "amxlib";
  o.targets = {parse_target("x86-64-sapphirerapids")};
  KernelSpec mm{"mm", make_workload("matmul", {{"M", 32}, {"K", 64}, {"N", 32}}), {}};
  Schedule s;
  s["C"].amx = true;
  validate(mm.program, s, &o.targets[0]);
  mm.schedules["x86-64-sapphirerapids"] = s;
  const std::string h = read_text(generate_library({mm, small_softmax()}, o, dir.string()).header);
  CHECK_THAT(h, Contains("static inline int amxlib_request_amx_(void)"));
  CHECK_THAT(h, Contains("if (!amxlib_request_amx_()) {"));
  CHECK_THAT(h, Contains("amxlib_mm: runs on AMX tiles"));
  // Only the kernel that uses them asks.
  const std::string softmax_run = h.substr(h.find("static inline int amxlib_softmax_run("));
  CHECK_THAT(softmax_run.substr(0, softmax_run.find("return rc;")), !Contains("request_amx"));
}
