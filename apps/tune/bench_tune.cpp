// bench_tune: what `pto tune` buys, against TVM MetaSchedule, side by side.
//
// For each workload (the report's kernels, and the shapes where PTO's default
// rules are weakest: a split-K-shaped matmul, a grouped convolution, a column
// sum, attention, small batched matmuls) PTO tunes with the given budget
// (isolated workers, a fresh tuning database unless --db is given) and TVM
// MetaSchedule tunes the same computation, written in TE, with the same
// number of trials (apps/tune/tvm_metaschedule.py, a Python helper process,
// its tuned kernel checked against float64 and timed there). Then this
// process times, on the same inputs, each checked against the f64 reference:
// the default schedule, the best tuned schedule, Halide's autoschedulers
// (Adams2019, Mullapudi2016, Li2018; --halide) on the same lowered pipeline
// and, on matmul, oneDNN, in --rounds interleaved rounds (best round's
// median). Reported per tuner: tuning wall time, trials to reach 90% of its
// final best, and the best-so-far curve (in --json, for
// apps/tune/plot_curves.py). The machine's fp32 FMA peak, measured here
// (apps/common/Peak.h), bounds what any tuner can reach on the compute-bound
// rows: each row prints its share of it, and the summary the share that
// 1.2x MetaSchedule's speed would need.
//
//   build/bin/bench_tune [--trials 64] [--strategy model] [--workloads a,b]
//                        [--no-tvm] [--halide] [--json FILE]
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <sstream>

#include "apps/common/Peak.h"
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
  // FLOPs for GFLOP/s where the conventional count leaves out part of what
  // program_flops() counts (a convolution's bias and ReLU epilogue); 0 = program_flops().
  double flops = 0;
};

// The TE definitions in tvm_metaschedule.py use the same workload names and sizes.
const std::vector<Bench>& benches() {
  static const std::vector<Bench> b = {
      {"matmul_1024", "matmul", {{"M", 1024}, {"N", 1024}, {"K", 1024}}},
      {"bert_ffn_s128", "mlp", {{"S", 128}, {"H", 768}, {"F", 3072}}},
      {"softmax_384x768", "softmax", {{"R", 384}, {"C", 768}}},
      {"layer_norm_384x768", "layer_norm", {{"R", 384}, {"C", 768}}},
      // 2 * N*O*H*W * C*3*3: multiply-adds only, as conv benchmarks count.
      {"conv2d_resnet3x3_64",
       "conv2d",
       {{"N", 1}, {"C", 64}, {"H", 56}, {"W", 56}, {"O", 64}},
       2.0 * 64 * 56 * 56 * 64 * 9},
      // Where the default rules are weakest against the peers (bench_suite --heldout):
      // few rows and columns over a long reduction, a grouped conv with 16 outputs per group.
      {"matmul_33x4096x33", "matmul", {{"M", 33}, {"N", 33}, {"K", 4096}}},
      {"grouped_conv_64x30_g4",
       "grouped_conv2d",
       {{"N", 1}, {"C", 64}, {"H", 30}, {"W", 30}, {"O", 64}, {"G", 4}, {"K", 3}},
       2.0 * 64 * 30 * 30 * 16 * 9},
      {"column_sum_4096", "column_sum", {{"R", 4096}, {"C", 4096}}},
      {"attention_s512", "attention", {{"S", 512}, {"D", 64}}},
      {"batched_matmul_64x64", "batched_matmul", {{"Bt", 64}, {"M", 64}, {"N", 64}, {"K", 64}}},
  };
  return b;
}

// Best-so-far time after each trial (failures repeat the previous value; null before the first
// success).
nlohmann::json best_so_far(const std::vector<TrialRecord>& history) {
  nlohmann::json curve = nlohmann::json::array();
  double best = INFINITY;
  for (const TrialRecord& r : history) {
    if (r.status == TrialStatus::Ok) best = std::min(best, r.median_ms);
    curve.push_back(std::isfinite(best) ? nlohmann::json(best) : nlohmann::json());
  }
  return curve;
}

// TVM MetaSchedule's run of one workload, from the helper's JSON.
struct TvmRun {
  CompareRow row;
  nlohmann::json report;  // the helper's whole output (tuning_s, trials, curve, ...)
};

TvmRun tvm_metaschedule(const Bench& b, int trials, double min_seconds, int rounds, uint64_t seed) {
  TvmRun r;
  r.row.impl = "tvm-metaschedule";
  const auto dir =
      std::filesystem::temp_directory_path() / ("bench_tune-tvm-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string out = (dir / (b.label + ".json")).string();
  const std::string script =
      (std::filesystem::path(PTO_SOURCE_DIR) / "apps/tune/tvm_metaschedule.py").string();
  const std::string cmd = std::string(PTO_PYTHON) + " " + script + " --workload " + b.workload +
                          " --label " + b.label + " --sizes '" + nlohmann::json(b.sizes).dump() +
                          "' --trials " + std::to_string(trials) + " --min-seconds " +
                          std::to_string(min_seconds) + " --rounds " + std::to_string(rounds) +
                          " --seed " + std::to_string(seed) + " --work-dir " +
                          (dir / b.label).string() + " --json " + out + " 1>&2";
  const int rc = std::system(cmd.c_str());
  try {
    std::ifstream f(out);
    if (!f) throw std::runtime_error("no output (exit status " + std::to_string(rc) + "): " + cmd);
    f >> r.report;
    r.row.ok = r.report.at("ok").get<bool>();
    r.row.error = r.report.value("error", "");
    if (r.row.ok) {
      r.row.time = {r.report.at("median_ms").get<double>(), r.report.at("min_ms").get<double>(),
                    r.report.at("max_ms").get<double>(), 0};
      r.row.max_rel_error = r.report.at("max_rel_error").get<double>();
    }
  } catch (const std::exception& e) {
    r.row.ok = false;
    r.row.error = std::string("tvm_metaschedule.py: ") + e.what();
  }
  std::filesystem::remove_all(dir);
  return r;
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

double geomean(const std::vector<double>& v) {
  double l = 0;
  for (double x : v) l += std::log(x);
  return v.empty() ? 0 : std::exp(l / static_cast<double>(v.size()));
}

int main(int argc, char** argv) {
  TuneOptions o;
  o.trials = 64;
  o.strategy = "model";
  std::string only, json_path, db;
  double min_seconds = 0.5;
  int rounds = 5;
  bool no_tvm = false, halide = false;
  CLI::App app{
      "bench_tune: PTO tuned vs TVM MetaSchedule vs the default (and Halide's autoschedulers, "
      "oneDNN)"};
  app.add_option("--trials,-n", o.trials,
                 "tuning trials per workload, for PTO and for MetaSchedule");
  app.add_option("--time-budget", o.time_budget_s, "PTO tuning seconds per workload (0 = none)");
  app.add_option("--strategy", o.strategy, "PTO's strategy: random | evolutionary | model");
  app.add_option("--seed", o.seed, "search seed");
  app.add_option("--jobs,-j", o.measure.jobs,
                 "worker processes compiling at once (0 = one per core)");
  app.add_option("--run-timeout", o.measure.run_timeout_s, "seconds before a candidate's run is killed");
  app.add_option("--tune-min-seconds", o.measure.min_seconds, "timing per candidate while tuning");
  app.add_option("--min-seconds", min_seconds, "timing per implementation in the final comparison");
  app.add_option("--rounds", rounds, "interleaved timing rounds in the final comparison (best round's median)");
  app.add_option("--workloads", only, "comma-separated labels (default: all)");
  app.add_option("--db", db, "tuning database to use and keep (default: a fresh temporary one)");
  app.add_flag("--no-tvm", no_tvm, "skip TVM MetaSchedule");
  app.add_flag("--halide", halide,
               "also time Halide's autoschedulers (Adams2019, Mullapudi2016, Li2018)");
  app.add_option("--json", json_path, "also write the records and the tuning curves as JSON");
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
  nlohmann::json records = nlohmann::json::array(), tuning = nlohmann::json::array();
  std::printf("bench_tune: %d trials per workload, PTO strategy %s, seed %llu, target %s\n",
              o.trials, o.strategy.c_str(), static_cast<unsigned long long>(o.seed),
              t.halide.c_str());
  const double peak = bench::fma_peak_gflops(t.cores);
  std::printf("fp32 FMA peak of %d threads, measured: %.1f GFLOP/s\n", t.cores, peak);
  std::printf("%-22s %-22s %10s %10s %10s %9s %7s %10s\n", "workload", "impl", "median ms",
              "min ms", "max ms", "GFLOP/s", "% peak", "vs default");
  struct Summary {
    std::string label;
    double def = 0, tuned = 0, tvm = 0, pto_s = 0, tvm_s = 0, flops = 0;
    int pto_90 = 0, tvm_90 = 0;
  };
  std::vector<Summary> summary;
  int rc = 0;
  for (const Bench& b : benches()) {
    if (!only.empty() && ("," + only + ",").find("," + b.label + ",") == std::string::npos) continue;
    try {
      const Program p = make_workload(b.workload, b.sizes);
      std::fprintf(stderr, "[%s] PTO tuning ...\n", b.label.c_str());
      const auto start = std::chrono::steady_clock::now();
      const TuneResult r = tune(p, t, o, [&](const TuneProgress& pr) {
        std::fprintf(stderr, "\r[%s] trial %d/%d best %.4f ms failures %d   ", b.label.c_str(),
                     pr.trial, pr.trials, pr.best_ms, pr.failures);
      });
      const double pto_s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::fprintf(stderr, "\n");
      tuning.push_back({{"workload", b.label},
                        {"tuner", "pto"},
                        {"strategy", o.strategy},
                        {"tuning_s", pto_s},
                        {"trials", r.history.size()},
                        {"failures", r.failures},
                        {"trials_to_90", r.trials_to_90},
                        {"curve", best_so_far(r.history)}});
      std::optional<TvmRun> tvm;
      if (!no_tvm) {
        std::fprintf(stderr, "[%s] TVM MetaSchedule tuning ...\n", b.label.c_str());
        tvm = tvm_metaschedule(b, o.trials, min_seconds, rounds, o.seed);
        if (tvm->report.is_object()) {
          nlohmann::json rep = tvm->report;
          rep["tuner"] = "tvm-metaschedule";
          tuning.push_back(rep);
        }
      }
      CompareOptions co;
      co.autoschedulers = halide ? halide_autoscheduler_names() : std::vector<std::string>{};
      co.min_seconds = min_seconds;
      co.rounds = rounds;
      const Schedule def = default_schedule(p, t);
      std::vector<CompareRow> rows;
      bool tuned_is_default = false;
      if (r.best) {
        TunedComparison cmp =
            compare_tuned(p, t, def, schedule_from_json_string(r.best->schedule_json), co);
        rows = std::move(cmp.rows);
        tuned_is_default = cmp.tuned_is_default;
      } else {
        rows = compare(p, t, {{"pto-default", def}}, co);
      }
#ifdef PTO_HAVE_DNNL
      if (b.workload == "matmul") rows.push_back(onednn_matmul(p, min_seconds));
#endif
      if (tvm) rows.push_back(tvm->row);
      Summary sm{b.label};
      sm.pto_s = pto_s;
      sm.pto_90 = r.trials_to_90;
      if (tvm && tvm->report.is_object()) {
        // A failed search reports nulls (no best, no trial at 90%).
        const auto number = [&](const char* key) {
          const auto it = tvm->report.find(key);
          return it != tvm->report.end() && it->is_number() ? it->get<double>() : 0.0;
        };
        sm.tvm_s = number("tuning_s");
        sm.tvm_90 = static_cast<int>(number("trials_to_90"));
      }
      const double flops = b.flops > 0 ? b.flops : program_flops(p);
      sm.flops = flops;
      for (auto& row : rows) {
        if (!row.ok) continue;
        row.gflops = flops / (row.time.median_ms * 1e6);
        if (row.impl == "pto-default") sm.def = row.time.median_ms;
        if (row.impl == "pto-tuned") sm.tuned = row.time.median_ms;
        if (row.impl == "tvm-metaschedule") sm.tvm = row.time.median_ms;
      }
      for (const auto& row : rows) {
        if (!row.ok) {
          std::printf("%-22s %-22s failed: %s\n", b.label.c_str(), row.impl.c_str(), row.error.substr(0, 160).c_str());
          if (row.impl == "pto-default" || row.impl == "pto-tuned") rc = 1;
          continue;
        }
        std::printf("%-22s %-22s %10.4f %10.4f %10.4f %9.1f %6.0f%% %9.2fx\n", b.label.c_str(),
                    row.impl.c_str(), row.time.median_ms, row.time.min_ms, row.time.max_ms,
                    row.gflops, peak > 0 ? 100 * row.gflops / peak : 0.0,
                    sm.def > 0 ? sm.def / row.time.median_ms : 0.0);
        records.push_back({{"workload", b.label},
                           {"impl", row.impl},
                           {"median_ms", row.time.median_ms},
                           {"min_ms", row.time.min_ms},
                           {"max_ms", row.time.max_ms},
                           {"gflops", row.gflops},
                           {"max_rel_error", row.max_rel_error}});
        if (row.impl == "pto-tuned" && tuned_is_default) records.back()["same_as"] = "pto-default";
      }
      std::printf("%-22s PTO: %zu trials (%d failed) in %.0f s, 90%% of its best after %d",
                  b.label.c_str(), r.history.size(), r.failures, pto_s, r.trials_to_90);
      if (tvm) std::printf("; MetaSchedule: %.0f s, 90%% after %d", sm.tvm_s, sm.tvm_90);
      std::printf("\n");
      std::fflush(stdout);
      summary.push_back(sm);
    } catch (const Error& e) {
      std::fprintf(stderr, "bench_tune: %s: %s\n", b.label.c_str(), e.what());
      rc = 1;
    }
  }
  // The summary: each tuner's result and cost, and the ratios the issue tracks.
  // "1.2x tvm": the share of the FMA peak that 1.2x MetaSchedule's speed needs
  // (over 100%: no schedule can reach it on this machine).
  std::printf("\n%-22s %9s %9s %9s %10s %10s %9s %8s %8s %8s %8s\n", "workload", "default", "tuned",
              "tvm", "tuned/def", "tuned/tvm", "1.2x tvm", "pto s", "tvm s", "pto 90%", "tvm 90%");
  std::vector<double> vs_def, vs_tvm;
  double pto_total = 0, tvm_total = 0;
  for (const Summary& sm : summary) {
    const double gd = sm.def > 0 && sm.tuned > 0 ? sm.def / sm.tuned : 0,
                 gt = sm.tvm > 0 && sm.tuned > 0 ? sm.tvm / sm.tuned : 0;
    if (gd > 0) vs_def.push_back(gd);
    if (gt > 0) vs_tvm.push_back(gt);
    pto_total += sm.pto_s;
    tvm_total += sm.tvm_s;
    const double needs = sm.tvm > 0 && peak > 0 ? 100 * 1.2 * sm.flops / (sm.tvm * 1e6) / peak : 0;
    std::printf("%-22s %9.4f %9.4f %9.4f %9.2fx %9.2fx %8.0f%% %8.0f %8.0f %8d %8d\n",
                sm.label.c_str(), sm.def, sm.tuned, sm.tvm, gd, gt, needs, sm.pto_s, sm.tvm_s,
                sm.pto_90, sm.tvm_90);
  }
  std::printf(
      "geometric mean: tuned / default %.2fx, tuned / MetaSchedule %.2fx (min %.2fx); tuning wall "
      "time PTO %.0f s, "
      "MetaSchedule %.0f s\n",
      geomean(vs_def), geomean(vs_tvm),
      vs_tvm.empty() ? 0.0 : *std::min_element(vs_tvm.begin(), vs_tvm.end()), pto_total, tvm_total);
  if (temp_db)
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(db + suffix);
  if (!json_path.empty()) {
    std::ofstream f(json_path);
    f << nlohmann::json{{"records", records}, {"tuning", tuning}, {"fma_peak_gflops", peak}}.dump(2)
      << "\n";
    if (!f) {
      std::fprintf(stderr, "bench_tune: cannot write %s\n", json_path.c_str());
      return 1;
    }
  }
  return rc;
}
