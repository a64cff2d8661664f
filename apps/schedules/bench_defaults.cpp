// bench_defaults: each workload under its default schedule next to the plain
// schedule (every stage at root, serial), in one process: what the default
// schedules per op kind buy without tuning.
//
//   build/bin/bench_defaults [--json FILE] [--min-seconds 0.3] [--only softmax,conv2d]
//
// Sizes are moderate so that the plain schedule finishes in seconds. Each
// default result is checked against the plain one (f32 re-association and
// transcendental functions only: 1e-4 relative + 1e-4 absolute) before timing.
// Output: a table; with --json the bench record list (workload, impl
// "pto-plain" / "pto-default", median_ms, min_ms, max_ms, gflops).
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "backends/Jit.h"
#include "backends/Timing.h"
#include "dsl/Analysis.h"
#include "dsl/Workloads.h"
#include "schedules/defaults/Defaults.h"

int main(int argc, char** argv) {
  std::string json_path;
  double min_seconds = 0.3;
  std::vector<std::string> only;
  CLI::App app{"default schedules vs plain schedules, per workload"};
  app.add_option("--json", json_path, "write the records as JSON");
  app.add_option("--min-seconds", min_seconds, "time per measurement");
  app.add_option("--only", only, "workloads to run")->delimiter(',');
  CLI11_PARSE(app, argc, argv);
  using namespace pto;
  const std::vector<std::pair<std::string, std::map<std::string, int64_t>>> cases = {
      {"matmul", {{"M", 512}, {"N", 512}, {"K", 512}}},
      {"matmul_bias_relu", {{"M", 512}, {"N", 512}, {"K", 512}}},
      {"batched_matmul", {{"Bt", 8}, {"M", 128}, {"N", 128}, {"K", 128}}},
      {"conv2d", {{"N", 1}, {"C", 32}, {"H", 28}, {"W", 28}, {"O", 32}}},
      {"softmax", {{"R", 384}, {"C", 768}}},
      {"layer_norm", {{"R", 384}, {"C", 768}}},
      {"attention", {{"S", 128}, {"D", 64}}},
      {"mlp", {{"S", 64}, {"H", 256}, {"F", 1024}}},
  };
  try {
    const Target t = parse_target("host");
    nlohmann::json out = nlohmann::json::array();
    bool ok = true;
    std::printf("%-18s %-12s %10s %10s %10s %9s %8s\n", "workload", "impl", "median_ms", "min_ms", "max_ms", "GFLOP/s",
                "speedup");
    for (const auto& [name, sizes] : cases) {
      if (!only.empty() && std::find(only.begin(), only.end(), name) == only.end()) continue;
      const Program p = make_workload(name, sizes);
      std::mt19937 rng(1);
      std::uniform_real_distribution<float> dist(-1, 1);
      std::vector<std::vector<float>> in_store;
      std::vector<BufferRef> ins;
      std::vector<std::vector<int64_t>> shapes;
      for (const auto& in : p.inputs()) {
        std::vector<int64_t> shape;
        int64_t n = 1;
        for (const Dim& d : in.shape) shape.push_back(d.value), n *= d.value;
        in_store.emplace_back(static_cast<size_t>(n));
        for (auto& x : in_store.back()) x = dist(rng);
        ins.push_back({in_store.back().data(), DType::F32, shape, {}});
        shapes.push_back(shape);
      }
      const Kernel plain(p, plain_schedule(p), t), dflt(p, default_schedule(p, t), t);
      const auto out_shapes = plain.output_shapes(shapes);
      std::vector<std::vector<float>> ref_store, got_store;
      std::vector<BufferRef> refs, gots;
      for (const auto& s : out_shapes) {
        int64_t n = 1;
        for (int64_t e : s) n *= e;
        ref_store.emplace_back(static_cast<size_t>(n));
        got_store.emplace_back(static_cast<size_t>(n));
      }
      for (size_t i = 0; i < out_shapes.size(); ++i) {
        refs.push_back({ref_store[i].data(), DType::F32, out_shapes[i], {}});
        gots.push_back({got_store[i].data(), DType::F32, out_shapes[i], {}});
      }
      plain.run(ins, refs);
      dflt.run(ins, gots);
      double worst = 0;
      for (size_t i = 0; i < ref_store.size(); ++i)
        for (size_t k = 0; k < ref_store[i].size(); ++k)
          worst = std::max(worst, std::fabs(double(got_store[i][k]) - ref_store[i][k]) / (1e-4 + 1e-4 * std::fabs(ref_store[i][k])));
      if (!(worst <= 1.0)) {
        std::fprintf(stderr, "%s: default schedule differs from plain (%.3g x tolerance)\n", name.c_str(), worst);
        ok = false;
      }
      const double flops = program_flops(p);
      const TimingStats tp = time_it([&] { plain.run(ins, refs); }, 1, 3, min_seconds);
      const TimingStats td = time_it([&] { dflt.run(ins, gots); }, 1, 3, min_seconds);
      for (const auto& [impl, ts] : {std::pair{"pto-plain", tp}, std::pair{"pto-default", td}}) {
        std::printf("%-18s %-12s %10.3f %10.3f %10.3f %9.2f %7.1fx\n", name.c_str(), impl, ts.median_ms, ts.min_ms,
                    ts.max_ms, flops / (ts.median_ms * 1e6), tp.median_ms / ts.median_ms);
        out.push_back({{"workload", name}, {"impl", impl}, {"median_ms", ts.median_ms}, {"min_ms", ts.min_ms},
                       {"max_ms", ts.max_ms}, {"gflops", flops / (ts.median_ms * 1e6)}});
      }
    }
    if (!json_path.empty()) std::ofstream(json_path) << out.dump(2) << "\n";
    return ok ? 0 : 1;
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_defaults: error: %s\n", e.what());
    return 2;
  }
}
