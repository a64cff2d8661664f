#include "autotuner/Compare.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>

#include "autotuner/TrialBuffers.h"
#include "autotuner/Worker.h"
#include "backends/Jit.h"
#include "backends/Lower.h"
#include "dsl/Analysis.h"
#include "dsl/Error.h"
#include "dsl/ProgramJson.h"

namespace pto::tuner {
namespace {

std::string lower_case(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Halide's install dir holds the plugins next to libHalide (lib64/ or lib/).
std::string plugin_path(const std::string& name) {
  const std::filesystem::path prefix = std::filesystem::path(PTO_HALIDE_INCLUDE_DIR).parent_path();
  for (const char* lib : {"lib64", "lib"}) {
    const auto p = prefix / lib / ("libautoschedule_" + lower_case(name) + ".so");
    if (std::filesystem::exists(p)) return p.string();
  }
  return "";
}

void load_plugin(const std::string& name) {
  static std::mutex mu;
  static std::set<std::string> loaded;
  std::lock_guard<std::mutex> lock(mu);
  if (loaded.count(name)) return;
  const std::string path = plugin_path(name);
  if (path.empty())
    throw Error("Halide autoscheduler '" + name + "' not found next to libHalide (" PTO_HALIDE_INCLUDE_DIR "/../lib64)");
  with_halide_errors("loading " + path, [&] { Halide::load_plugin(path); });
  loaded.insert(name);
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

std::vector<std::string> halide_autoscheduler_names() {
  std::vector<std::string> r;
  for (const char* n : {"Adams2019", "Mullapudi2016", "Li2018"})
    if (!plugin_path(n).empty()) r.push_back(n);
  return r;
}

std::vector<CompareRow> compare(const Program& p, const Target& t,
                                const std::vector<std::pair<std::string, Schedule>>& schedules,
                                const CompareOptions& o) {
  auto inputs = input_buffers(p, std::stoull(program_fingerprint(p), nullptr, 16));
  std::vector<BufferRef> ins;
  for (HostBuffer& b : inputs) ins.push_back(b.ref());
  auto refs_of = [&](std::vector<HostBuffer>& outs) {
    std::vector<BufferRef> r;
    for (HostBuffer& b : outs) r.push_back(b.ref());
    return r;
  };
  std::vector<std::vector<float>> reference;
  {
    auto outs = output_buffers(p);
    const Kernel k(p, reference_schedule(p), t);
    k.run(ins, refs_of(outs));
    reference = to_f32(outs);
  }
  const double flops = program_flops(p);
  // `first_s`: how long the checked first run took. A very slow implementation
  // (seconds per run) is timed with fewer repetitions, the first run being its warm-up.
  // Checked rows are timed after all of them are compiled, in interleaved
  // rounds (see CompareOptions::rounds): `runs[i]` runs row i again.
  std::vector<std::function<void()>> runs;
  std::vector<double> first_runs;
  std::vector<CompareRow> rows;
  auto finish_row = [&](CompareRow& row, const std::vector<HostBuffer>& got, std::function<void()> run,
                        double first_s) {
    row.max_rel_error = max_rel_error(to_f32(got), reference);
    if (!(row.max_rel_error <= o.tolerance)) {
      row.error = "wrong result: relative error " + std::to_string(row.max_rel_error);
      return;
    }
    runs.resize(rows.size() + 1);
    first_runs.resize(rows.size() + 1);
    runs[rows.size()] = std::move(run);
    first_runs[rows.size()] = first_s;
    row.ok = true;
  };

  for (const auto& [name, s] : schedules) {
    CompareRow row;
    row.impl = name;
    try {
      const auto k = std::make_shared<const Kernel>(p, s, t);
      auto outs = std::make_shared<std::vector<HostBuffer>>(output_buffers(p));
      const auto out_refs = refs_of(*outs);
      const auto t0 = std::chrono::steady_clock::now();
      k->run(ins, out_refs);
      finish_row(row, *outs, [k, outs, out_refs, &ins] { k->run(ins, out_refs); }, seconds_since(t0));
    } catch (const Error& e) {
      row.error = e.what();
    }
    rows.push_back(row);
  }
  for (const std::string& name : o.autoschedulers) {
    CompareRow row;
    row.impl = "halide-" + lower_case(name);
    try {
      load_plugin(name);
      // Kept alive for the timing rounds: the pipeline, its output storage and buffers.
      struct Compiled {
        LoweredPipeline lp;
        std::vector<HostBuffer> outs;
        std::vector<Halide::Buffer<>> out_bufs;
        std::optional<Halide::Realization> real;
      };
      const auto c = std::make_shared<Compiled>();
      c->lp = lower(p, Schedule{}, t, {true});
      c->outs = output_buffers(p);
      LoweredPipeline& lp = c->lp;
      auto& outs = c->outs;
      auto& out_bufs = c->out_bufs;
      auto halide_dims = [](std::vector<int64_t> d) {
        std::vector<int> r(d.rbegin(), d.rend());
        return r;
      };
      with_halide_errors("Halide autoscheduler " + name, [&] {
        const Halide::AutoschedulerParams params{name, {{"parallelism", std::to_string(std::max(1, t.cores))}}};
        lp.pipeline.apply_autoscheduler(lp.target, params);
        for (size_t i = 0; i < inputs.size(); ++i) {
          Halide::Buffer<> b(halide_type(inputs[i].dtype), inputs[i].data(), halide_dims(inputs[i].shape));
          lp.inputs[i].set(b);
        }
        for (HostBuffer& o : outs) out_bufs.push_back(Halide::Buffer<>(halide_type(o.dtype), o.data(), halide_dims(o.shape)));
        lp.pipeline.compile_jit(lp.target);
        return 0;
      });
      c->real.emplace(out_bufs);
      const auto t0 = std::chrono::steady_clock::now();
      with_halide_errors("running the " + name + " schedule", [&] {
        lp.pipeline.realize(*c->real, lp.target);
        return 0;
      });
      finish_row(row, outs, [c] { c->lp.pipeline.realize(*c->real, c->lp.target); }, seconds_since(t0));
    } catch (const Error& e) {
      row.error = e.what();
    } catch (const Halide::Error& e) {
      row.error = std::string("Halide: ") + e.what();
    }
    rows.push_back(row);
  }

  // Interleaved rounds: a burst of load from other processes then hits one
  // round of every implementation instead of all repetitions of one. Each
  // row reports its best round (lowest median), the overall min and max.
  const int rounds = std::max(1, o.rounds);
  for (int round = 0; round < rounds; ++round)
    for (size_t i = 0; i < rows.size(); ++i) {
      CompareRow& row = rows[i];
      if (!row.ok) continue;
      // A very slow implementation (seconds per run) is timed once, its checked first run as the warm-up.
      const bool slow = first_runs[i] > 1.0;
      if (slow && round > 0) continue;
      const TimingStats ts = slow ? time_it(runs[i], 0, 1, 0)
                                  : time_it(runs[i], o.warmup, o.min_reps, o.min_seconds / rounds, o.max_reps);
      if (round == 0 || ts.median_ms < row.time.median_ms) {
        const double lo = round == 0 ? ts.min_ms : std::min(row.time.min_ms, ts.min_ms);
        const double hi = round == 0 ? ts.max_ms : std::max(row.time.max_ms, ts.max_ms);
        const int reps = row.time.reps + ts.reps;
        row.time = ts;
        row.time.min_ms = lo, row.time.max_ms = hi, row.time.reps = reps;
      } else {
        row.time.min_ms = std::min(row.time.min_ms, ts.min_ms);
        row.time.max_ms = std::max(row.time.max_ms, ts.max_ms);
        row.time.reps += ts.reps;
      }
    }
  for (CompareRow& row : rows)
    if (row.ok) row.gflops = flops / (row.time.median_ms * 1e6);
  return rows;
}

TunedComparison compare_tuned(const Program& p, const Target& t, const Schedule& def,
                              const Schedule& tuned, const CompareOptions& o) {
  TunedComparison r;
  r.tuned_is_default = tuned == def;
  std::vector<std::pair<std::string, Schedule>> impls = {{"pto-default", def}};
  if (!r.tuned_is_default) impls.emplace_back("pto-tuned", tuned);
  r.rows = compare(p, t, impls, o);
  std::stable_partition(r.rows.begin(), r.rows.end(),
                        [](const CompareRow& row) { return row.impl != "pto-tuned"; });
  if (r.tuned_is_default)
    for (const CompareRow& row : std::vector<CompareRow>(r.rows))
      if (row.impl == "pto-default") {
        r.rows.push_back(row);
        r.rows.back().impl = "pto-tuned";
      }
  return r;
}

}  // namespace pto::tuner
