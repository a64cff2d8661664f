// JIT: lowered programs against the float64 interpreter, random valid
// schedules (differential), symbolic sizes, precision, and run-time errors.
#include <catch2/catch.hpp>

#include "Helpers.h"
#include "backends/Lower.h"  // Halide: the JIT thread pool
#include "dsl/Workloads.h"
#include "schedules/Validate.h"
#include "schedules/defaults/Defaults.h"

using namespace pto;
using namespace pto::test;
using Catch::Matchers::Contains;

namespace {
Program mbr(int64_t m, int64_t n, int64_t k) { return make_workload("matmul_bias_relu", {{"M", m}, {"N", n}, {"K", k}}); }

std::map<std::string, HostTensor> mbr_inputs(int64_t m, int64_t n, int64_t k, std::mt19937& rng) {
  return {{"A", random_tensor({m, k}, rng)}, {"B", random_tensor({k, n}, rng)}, {"bias", random_tensor({n}, rng)}};
}

// f32 accumulation of K products in [-1, 1]: |error| <= K * 2^-24 * sum|a*b| <= K^2 * 6e-8; use a
// bound that is still 100x tighter than any indexing bug would produce.
double f32_matmul_atol(int64_t k) { return 1e-6 * static_cast<double>(k) + 1e-6; }
}  // namespace

TEST_CASE("plain and default schedules match the float64 reference", "[jit]") {
  const Target t = parse_target("host");
  std::mt19937 rng(1);
  for (const auto& [m, n, k] : {std::tuple{37, 29, 23}, std::tuple{64, 64, 64}, std::tuple{1, 97, 5}, std::tuple{131, 50, 1}}) {
    const Program p = mbr(m, n, k);
    const auto in = mbr_inputs(m, n, k, rng);
    const HostTensor want = interpret(p, in).at("out");
    for (const Schedule& s : {plain_schedule(p), default_schedule(p, t)}) {
      const Kernel kern(p, s, t);
      CHECK(tolerance_ratio(run_f32(kern, in)[0], want, 1e-5, f32_matmul_atol(k)) <= 1.0);
    }
  }
}

TEST_CASE("random valid schedules all give the reference answer", "[jit][differential]") {
  const Target t = parse_target("host");
  std::mt19937 rng(2024);
  const int64_t M = 45, N = 70, K = 19;
  const Program p = mbr(M, N, K);
  const auto in = mbr_inputs(M, N, K, rng);
  const HostTensor want = interpret(p, in).at("out");
  auto pick = [&](std::vector<int64_t> v) { return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng)]; };
  int ran = 0;
  for (int trial = 0; trial < 12; ++trial) {
    Schedule s;
    StageSchedule& o = s["out"];
    const int64_t ti = pick({1, 4, 6, 8, 45}), tj = pick({8, 16, 32, 64});
    o.loops.tile = {{"i0", {ti}}, {"i1", {tj}}};
    if (rng() % 2) o.loops.order = {"i1_o", "i0_o", "i0_i", "i1_i"};
    if (rng() % 2) { o.loops.vectorize = "i1_i"; o.loops.vector_width = static_cast<int>(pick({4, 8, 16})); }
    if (rng() % 2) o.loops.parallel = {"i0_o"};
    if (rng() % 2) s["biased"].compute.kind = Placement::Kind::Inline;
    const int where = static_cast<int>(rng() % 3);
    StageSchedule& mm = s["mm"];
    if (where == 1) mm.compute = {Placement::Kind::At, "out", "i0_o"};
    if (where == 2) mm.compute = {Placement::Kind::At, "out", pick({0, 1}) ? "i1_o" : "i0_o"};
    if (where && s["biased"].compute.kind != Placement::Kind::Inline) mm.compute.stage = "biased", mm.compute.loop = "i0";
    LoopSchedule up;
    if (rng() % 2) up.tile["k"] = {pick({2, 4, 19})};
    up.order = {"k", "i", "j"};
    if (up.tile.count("k")) up.order = {"k_o", "i", "k_i", "j"};
    if (rng() % 2) { up.vectorize = "j"; up.vector_width = static_cast<int>(pick({4, 8})); }
    mm.update = up;
    INFO("schedule: " << trial);
    try {
      validate(p, s, &t);
    } catch (const ScheduleError& e) {
      continue;  // only valid schedules are compared
    }
    const Kernel kern(p, s, t);
    CHECK(tolerance_ratio(run_f32(kern, in)[0], want, 1e-5, f32_matmul_atol(K)) <= 1.0);
    ++ran;
  }
  CHECK(ran >= 6);
}

TEST_CASE("a symbolic size serves many shapes with one kernel", "[jit][symbolic]") {
  const Target t = parse_target("host");
  const Program p = make_workload("matmul_bias_relu", {{"M", 0}, {"N", 24}, {"K", 9}});
  const Kernel kern(p, default_schedule(p, t), t);
  std::mt19937 rng(3);
  for (int64_t m : {1, 7, 50}) {
    const auto in = mbr_inputs(m, 24, 9, rng);
    CHECK(tolerance_ratio(run_f32(kern, in)[0], interpret(p, in).at("out"), 1e-5, f32_matmul_atol(9)) <= 1.0);
  }
}

TEST_CASE("bf16 storage with f32 accumulation stays within bf16 tolerance", "[jit][precision]") {
  const Target t = parse_target("host");
  const Program p = mbr(32, 48, 40);
  std::mt19937 rng(4);
  const auto in = mbr_inputs(32, 48, 40, rng);
  const auto ref = interpret(p, in);
  const HostTensor& want = ref.at("out");
  const HostTensor& mm = ref.at("mm");
  Schedule s;
  s["mm"].precision.storage = DType::BF16;
  s["mm"].precision.accumulate = DType::F32;
  const HostTensor got = run_f32(Kernel(p, s, t), in)[0];
  // mm is accumulated in f32, then stored as bf16 (8 significant bits): rounding
  // to nearest moves it by at most 2^-8 |mm|; bias + relu add f32 rounding only.
  double worst = 0, max_dev = 0;
  for (size_t i = 0; i < got.data.size(); ++i) {
    const double err = std::fabs(got.data[i] - want.data[i]);
    worst = std::max(worst, err / (std::ldexp(std::fabs(mm.data[i]), -8) + 1e-5));
    max_dev = std::max(max_dev, err);
  }
  CHECK(worst <= 1.0);
  CHECK(max_dev > 1e-4);  // ... and it really is rounded, not silently f32
}

TEST_CASE("run-time errors are typed and name the tensor", "[jit][errors]") {
  const Target t = parse_target("host");
  const Program p = mbr(8, 16, 4);
  const Kernel kern(p, plain_schedule(p), t);
  std::vector<float> a(8 * 4), b(4 * 16), bias(16), out(8 * 16);
  const std::vector<BufferRef> outs{{out.data(), DType::F32, {8, 16}, {}}};
  CHECK_THROWS_WITH(kern.run({{a.data(), DType::F32, {8, 5}, {}}, {b.data(), DType::F32, {4, 16}, {}}, {bias.data(), DType::F32, {16}, {}}}, outs),
                    Contains("input 'A' dim 1 is 5, expected 4"));
  CHECK_THROWS_AS(kern.run({{a.data(), DType::F64, {8, 4}, {}}, {b.data(), DType::F32, {4, 16}, {}}, {bias.data(), DType::F32, {16}, {}}}, outs),
                  DTypeError);
  CHECK_THROWS_WITH(kern.run({{a.data(), DType::F32, {8, 4}, {}}, {b.data(), DType::F32, {4, 16}, {}}}, outs), Contains("takes 3 inputs"));
  CHECK_THROWS_AS(Kernel(p, plain_schedule(p), parse_target("arm-64-linux")), TargetError);
  CHECK_THROWS_WITH(parse_target("x86-64-avx1024"), Contains("unknown target 'x86-64-avx1024'; valid: host"));
}

TEST_CASE("a memory limit gives DEVICE_MEMORY_EXHAUSTED, not a crash", "[jit][errors][memory]") {
  // The plain schedule materializes mm (128 x 256 floats = 128 KiB) on the heap.
  const Target t = parse_target("host");
  const Program p = mbr(128, 256, 4);
  const Kernel kern(p, plain_schedule(p), t);
  std::vector<float> a(128 * 4, 1.f), b(4 * 256, 1.f), bias(256, 0.f), out(128 * 256);
  const std::vector<BufferRef> ins{{a.data(), DType::F32, {128, 4}, {}}, {b.data(), DType::F32, {4, 256}, {}}, {bias.data(), DType::F32, {256}, {}}};
  const std::vector<BufferRef> outs{{out.data(), DType::F32, {128, 256}, {}}};
  CHECK_THROWS_AS(kern.run(ins, outs, 64 * 1024), MemoryError);
  CHECK_THROWS_WITH(kern.run(ins, outs, 64 * 1024), Contains("DEVICE_MEMORY_EXHAUSTED") && Contains("131072 bytes"));
  const RunStats st = kern.run(ins, outs);
  CHECK(st.peak_bytes >= 128 * 256 * sizeof(float));
  CHECK(out[5] == 4.f);
}

TEST_CASE("every workload lowers correctly under plain and default schedules", "[jit][workloads]") {
  const Target t = parse_target("host");
  std::mt19937 rng(5);
  const std::map<std::string, std::map<std::string, int64_t>> small = {
      {"matmul", {{"M", 13}, {"N", 17}, {"K", 11}}},
      {"matmul_bias_relu", {{"M", 13}, {"N", 40}, {"K", 11}}},
      {"softmax", {{"R", 7}, {"C", 33}}},
      {"layer_norm", {{"R", 7}, {"C", 33}}},
      {"mlp", {{"S", 5}, {"H", 24}, {"F", 40}}},
      {"attention", {{"S", 19}, {"D", 16}}},
      {"conv2d", {{"N", 2}, {"C", 3}, {"H", 9}, {"W", 7}, {"O", 5}}},
      {"batched_matmul", {{"Bt", 3}, {"M", 13}, {"N", 17}, {"K", 11}}},
  };
  for (const auto& w : workloads()) {
    INFO("workload " << w.name);
    if (!small.count(w.name)) continue;  // model workloads have their own tests (test_models.cpp)
    const Program p = make_workload(w.name, small.at(w.name));
    std::map<std::string, HostTensor> in;
    for (const auto& i : p.inputs()) {
      std::vector<int64_t> shape;
      for (const Dim& d : i.shape) shape.push_back(d.value);
      in[i.name] = random_tensor(shape, rng);
    }
    const auto ref = interpret(p, in);
    for (const Schedule& s : {plain_schedule(p), default_schedule(p, t)}) {
      const auto got = run_f32(Kernel(p, s, t), in);
      const auto outs = p.outputs();
      for (size_t i = 0; i < outs.size(); ++i) {
        // f32 evaluation of O(100)-term sums and transcendental functions: 1e-5 relative + 1e-5 absolute.
        CHECK(tolerance_ratio(got[i], ref.at(outs[i]), 1e-5, 1e-5) <= 1.0);
      }
    }
  }
}

TEST_CASE("a reduction whose body ignores its reduction variables still iterates them", "[jit][regression]") {
  // Regression: Halide drops RDom dims that the update does not mention; sum of 1 over
  // r < n (symbolic) and over s < 4 (static) must count n * 4, not 1.
  Program p("count");
  const Tensor x = p.input("X", {Dim::symbol("n"), 3});
  p.output(p.define_reduce("C", {"j"}, {3}, ReduceOp::Sum, {{"r", Dim::symbol("n")}, {"s", 4}}, make_const(1, DType::F32)));
  const Target t = parse_target("host");
  const Kernel k(p, plain_schedule(p), t);
  std::vector<float> xs(5 * 3, 0.f), out(3, -1.f);
  k.run({{xs.data(), DType::F32, {5, 3}, {}}}, {{out.data(), DType::F32, {3}, {}}});
  CHECK(out == std::vector<float>{20.f, 20.f, 20.f});
  CHECK(interpret(p, {{"X", HostTensor{{5, 3}, std::vector<double>(15, 0.0)}}}).at("C").data == std::vector<double>{20, 20, 20});
}

TEST_CASE("stages and inputs named like C or libm symbols compile and run", "[jit][regression]") {
  Program p("names");
  const Tensor x = p.input("exp", {4});
  p.output(p.define("tanh", {"i"}, {4}, x(var("i")) * 2.0f));
  const Kernel k(p, plain_schedule(p), parse_target("host"));
  std::vector<float> in{1, 2, 3, 4}, out(4);
  k.run({{in.data(), DType::F32, {4}, {}}}, {{out.data(), DType::F32, {4}, {}}});
  CHECK(out == std::vector<float>{2, 4, 6, 8});
}

TEST_CASE("default schedules of bf16 programs compute and accumulate in f32", "[jit][precision]") {
  // A row sum of 512 ones: exact in f32 and representable in bf16 (512 = 2^9),
  // but a bf16 accumulator (8 significant bits) stops at 256, where 256 + 1
  // rounds back to 256.
  const Target t = parse_target("host");
  Program p("sum_bf16");
  const Tensor x = p.input("X", {4, 512}, DType::BF16);
  p.output(p.define_reduce("Y", {"i"}, {4}, ReduceOp::Sum, {{"k", Dim(512)}}, x(var("i"), var("k")), OpKind::Reduction, "sum"));
  const Schedule s = default_schedule(p, t);
  REQUIRE(s.find("Y"));
  CHECK(s.find("Y")->precision.accumulate == DType::F32);
  CHECK(s.find("Y")->precision.compute == DType::F32);
  CHECK(!s.find("Y")->precision.storage);  // an output keeps its interface type
  std::vector<uint16_t> ones(4 * 512, 0x3f80), y(4, 0);  // bf16 1.0
  Kernel(p, s, t).run({{ones.data(), DType::BF16, {4, 512}, {}}}, {{y.data(), DType::BF16, {4}, {}}});
  for (const uint16_t v : y) CHECK(v == 0x4400);  // bf16 512.0
  // The premise: accumulating in the stage's own type (the plain schedule) stalls.
  Kernel(p, plain_schedule(p), t).run({{ones.data(), DType::BF16, {4, 512}, {}}}, {{y.data(), DType::BF16, {4}, {}}});
  CHECK(y[0] == 0x4380);  // bf16 256.0
}

TEST_CASE("options.threads sizes the thread pool for the run and restores it", "[jit][threads]") {
  // Halide's JIT pool is one per process: a kernel with threads = 1 runs with
  // a pool of one (its parallel loops serial) and leaves the size as it was.
  const Target t = parse_target("host");
  const Program p = make_workload("matmul", {{"M", 256}, {"N", 64}, {"K", 32}});
  std::mt19937 rng(5);
  const auto in = random_inputs(p, rng);
  const HostTensor want = interpret(p, in).at(p.outputs()[0]);
  Schedule s = default_schedule(p, t);
  s.options.threads = 1;
  const Kernel k(p, s, t);  // JIT-compiling creates the process's Halide runtime and its pool
  // The default size, resolved (the size reads 0, "the default", until it is set).
  Halide::Internal::JITSharedRuntime::set_num_threads(0);
  const int before = Halide::Internal::JITSharedRuntime::get_num_threads();
  const HostTensor got = run_f32(k, in)[0];
  INFO("pool before " << before << ", after " << Halide::Internal::JITSharedRuntime::get_num_threads());
  CHECK(Halide::Internal::JITSharedRuntime::get_num_threads() == before);
  CHECK(tolerance_ratio(got, want, 1e-5, 1e-5) <= 1.0);
}
