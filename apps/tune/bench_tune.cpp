// bench_tune: what `pto tune` buys, side by side in one process.
//
// For each workload (matmul 1024 fp32, BERT-base FFN at seq 128, softmax and
// layer_norm over [384, 768], the ResNet-50 3x3 64-channel conv2d): tune with
// the given budget (isolated workers, a fresh tuning database unless --db is
// given), then time in this process, on the same inputs, each checked against
// the f64 reference: the default schedule, Halide's autoschedulers (Adams2019,
// Mullapudi2016, Li2018) on the same lowered pipeline, the best tuned schedule
// and, on matmul, oneDNN. Also reports the trials needed to reach 90% of the
// final best. The comparison times every implementation in --rounds
// interleaved rounds (--min-seconds in all) and reports its best round.
//
//   build/bin/bench_tune [--trials 30] [--time-budget S] [--strategy evolutionary]
//                        [--workloads matmul_1024,softmax_384x768] [--json FILE]
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "autotuner/Compare.h"
#include "autotuner/Tuner.h"
#include "autotuner/Worker.h"
#include "dsl/Analysis.h"
#include "dsl/ProgramJson.h"
#include "dsl/Workloads.h"
#include "schedules/ScheduleJson.h"
#include "schedules/defaults/Defaults.h"

#ifdef PTO_HAVE_DNNL
#include <oneapi/dnnl/dnnl.hpp>
#endif

using namespace pto;
using namespace pto::tuner;

namespace {

struct Bench {
  std::string label, workload;
  std::map<std::string, int64_t> sizes;
  // FLOPs for GFLOP/s when program_flops() (every operation of the expression,
  // padding guards included) is not the conventional count; 0 = program_flops().
  double flops = 0;
};

const std::vector<Bench>& benches() {
  static const std::vector<Bench> b = {
      {"matmul_1024", "matmul", {{"M", 1024}, {"N", 1024}, {"K", 1024}}},
      {"bert_ffn_s128", "mlp", {{"S", 128}, {"H", 768}, {"F", 3072}}},
      {"softmax_384x768", "softmax", {{"R", 384}, {"C", 768}}},
      {"layer_norm_384x768", "layer_norm", {{"R", 384}, {"C", 768}}},
      // 2 * N*O*H*W * C*3*3: multiply-adds only, as conv benchmarks count.
      {"conv2d_resnet3x3_64", "conv2d", {{"N", 1}, {"C", 64}, {"H", 56}, {"W", 56}, {"O", 64}}, 2.0 * 64 * 56 * 56 * 64 * 9},
  };
  return b;
}

#ifdef PTO_HAVE_DNNL
// C = A @ B with oneDNN's matmul primitive, checked on sampled entries against f64 dot products.
CompareRow onednn_matmul(const Program& p, double min_seconds) {
  CompareRow row;
  row.impl = "onednn";
  const int64_t M = p.inputs()[0].shape[0].value, K = p.inputs()[0].shape[1].value, N = p.inputs()[1].shape[1].value;
  auto in = make_inputs(p, std::stoull(program_fingerprint(p), nullptr, 16));
  std::vector<float> c(static_cast<size_t>(M * N));
  try {
    using dt = dnnl::memory::data_type;
    using tag = dnnl::memory::format_tag;
    dnnl::engine eng(dnnl::engine::kind::cpu, 0);
    dnnl::stream s(eng);
    const dnnl::memory::desc ad({M, K}, dt::f32, tag::ab), bd({K, N}, dt::f32, tag::ab), cd({M, N}, dt::f32, tag::ab);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(ad, bd, cd), eng);
    const dnnl::matmul mm(pd);
    dnnl::memory am(ad, eng, in[0].data()), bm(bd, eng, in[1].data()), cm(cd, eng, c.data());
    auto run = [&] {
      mm.execute(s, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
      s.wait();
    };
    run();
    std::mt19937 rng(3);
    double worst = 0, scale = 1e-30;
    for (int q = 0; q < 256; ++q) {
      const int64_t i = static_cast<int64_t>(rng() % M), j = static_cast<int64_t>(rng() % N);
      double want = 0;
      for (int64_t k = 0; k < K; ++k) want += static_cast<double>(in[0][i * K + k]) * in[1][k * N + j];
      scale = std::max(scale, std::fabs(want));
      worst = std::max(worst, std::fabs(want - c[static_cast<size_t>(i * N + j)]));
    }
    row.max_rel_error = worst / scale;
    if (!(row.max_rel_error <= 1e-4)) {  // same bound as the tuner's f32 check
      row.error = "wrong result: relative error " + std::to_string(row.max_rel_error);
      return row;
    }
    row.time = time_it(run, 1, 5, min_seconds);
    row.gflops = 2.0 * M * N * K / (row.time.median_ms * 1e6);
    row.ok = true;
  } catch (const dnnl::error& e) {
    row.error = std::string("oneDNN: ") + e.what();
  }
  return row;
}
#endif

}  // namespace

int main(int argc, char** argv) {
  TuneOptions o;
  o.trials = 30;
  std::string only, json_path, db;
  double min_seconds = 0.5;
  int rounds = 5;
  CLI::App app{"bench_tune: tuned vs default vs Halide autoschedulers (vs oneDNN on matmul)"};
  app.add_option("--trials,-n", o.trials, "tuning trials per workload");
  app.add_option("--time-budget", o.time_budget_s, "tuning seconds per workload (0 = none)");
  app.add_option("--strategy", o.strategy, "random | evolutionary | model");
  app.add_option("--seed", o.seed, "search seed");
  app.add_option("--jobs,-j", o.measure.jobs, "worker processes compiling at once");
  app.add_option("--run-timeout", o.measure.run_timeout_s, "seconds before a candidate's run is killed");
  app.add_option("--tune-min-seconds", o.measure.min_seconds, "timing per candidate while tuning");
  app.add_option("--min-seconds", min_seconds, "timing per implementation in the final comparison");
  app.add_option("--rounds", rounds, "interleaved timing rounds in the final comparison (best round's median)");
  app.add_option("--workloads", only, "comma-separated labels (default: all)");
  app.add_option("--db", db, "tuning database to use and keep (default: a fresh temporary one)");
  app.add_option("--json", json_path, "also write the records as JSON");
  CLI11_PARSE(app, argc, argv);

  if (!only.empty()) {
    std::string valid;
    for (const Bench& b : benches()) valid += (valid.empty() ? "" : ", ") + b.label;
    std::stringstream ss(only);
    for (std::string item; std::getline(ss, item, ',');)
      if (std::none_of(benches().begin(), benches().end(), [&](const Bench& b) { return b.label == item; })) {
        std::fprintf(stderr, "bench_tune: unknown workload '%s'; valid: %s\n", item.c_str(), valid.c_str());
        return 2;
      }
  }
  const Target t = parse_target("host");
  const bool temp_db = db.empty();
  if (temp_db) db = (std::filesystem::temp_directory_path() / ("bench_tune-" + std::to_string(getpid()) + ".db")).string();
  o.db_path = db;
  nlohmann::json records = nlohmann::json::array();
  std::printf("bench_tune: %d trials per workload, strategy %s, seed %llu, target %s\n", o.trials, o.strategy.c_str(),
              static_cast<unsigned long long>(o.seed), t.halide.c_str());
  std::printf("%-22s %-22s %10s %10s %10s %9s %10s\n", "workload", "impl", "median ms", "min ms", "max ms", "GFLOP/s",
              "vs default");
  int rc = 0;
  for (const Bench& b : benches()) {
    if (!only.empty() && ("," + only + ",").find("," + b.label + ",") == std::string::npos) continue;
    try {
      const Program p = make_workload(b.workload, b.sizes);
      std::fprintf(stderr, "[%s] tuning ...\n", b.label.c_str());
      const TuneResult r = tune(p, t, o, [&](const TuneProgress& pr) {
        std::fprintf(stderr, "\r[%s] trial %d/%d best %.3f ms failures %d   ", b.label.c_str(), pr.trial, pr.trials,
                     pr.best_ms, pr.failures);
      });
      std::fprintf(stderr, "\n");
      std::vector<std::pair<std::string, Schedule>> scheds{{"pto-default", default_schedule(p, t)}};
      if (r.best) scheds.push_back({"pto-tuned", schedule_from_json_string(r.best->schedule_json)});
      CompareOptions co;
      co.autoschedulers = halide_autoscheduler_names();
      co.min_seconds = min_seconds;
      co.rounds = rounds;
      auto rows = compare(p, t, scheds, co);
      std::stable_partition(rows.begin(), rows.end(), [](const CompareRow& r) { return r.impl != "pto-tuned"; });
#ifdef PTO_HAVE_DNNL
      if (b.workload == "matmul") rows.push_back(onednn_matmul(p, min_seconds));
#endif
      double def = 0, tuned = 0, best_halide = 0;
      for (const auto& row : rows) {
        if (!row.ok) continue;
        if (row.impl == "pto-default") def = row.time.median_ms;
        if (row.impl == "pto-tuned") tuned = row.time.median_ms;
        if (row.impl.rfind("halide-", 0) == 0 && (best_halide == 0 || row.time.median_ms < best_halide))
          best_halide = row.time.median_ms;
      }
      if (b.flops > 0)
        for (auto& row : rows)
          if (row.ok) row.gflops = b.flops / (row.time.median_ms * 1e6);
      for (const auto& row : rows) {
        if (!row.ok) {
          std::printf("%-22s %-22s failed: %s\n", b.label.c_str(), row.impl.c_str(), row.error.substr(0, 160).c_str());
          continue;
        }
        std::printf("%-22s %-22s %10.3f %10.3f %10.3f %9.1f %9.2fx\n", b.label.c_str(), row.impl.c_str(),
                    row.time.median_ms, row.time.min_ms, row.time.max_ms, row.gflops,
                    def > 0 ? def / row.time.median_ms : 0.0);
        records.push_back({{"workload", b.label}, {"impl", row.impl}, {"median_ms", row.time.median_ms},
                           {"min_ms", row.time.min_ms}, {"max_ms", row.time.max_ms}, {"gflops", row.gflops}});
      }
      std::printf("%-22s trials %zu (%d failed), 90%% of the best after %d; tuned vs best Halide autoscheduler: %.2fx\n",
                  b.label.c_str(), r.history.size(), r.failures, r.trials_to_90,
                  tuned > 0 && best_halide > 0 ? best_halide / tuned : 0.0);
      std::fflush(stdout);
    } catch (const Error& e) {
      std::fprintf(stderr, "bench_tune: %s: %s\n", b.label.c_str(), e.what());
      rc = 1;
    }
  }
  if (temp_db)
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(db + suffix);
  if (!json_path.empty()) {
    std::ofstream f(json_path);
    f << records.dump(2) << "\n";
    if (!f) {
      std::fprintf(stderr, "bench_tune: cannot write %s\n", json_path.c_str());
      return 1;
    }
  }
  return rc;
}
