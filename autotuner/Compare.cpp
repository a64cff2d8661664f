#include "autotuner/Compare.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <mutex>
#include <set>

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

std::vector<int64_t> dims_of(const Shape& s) {
  std::vector<int64_t> r;
  for (const Dim& d : s) {
    if (d.is_symbolic()) throw ShapeError("comparison needs static sizes; '" + d.sym + "' is symbolic");
    r.push_back(d.value);
  }
  return r;
}

double max_rel_error(const std::vector<std::vector<float>>& got, const std::vector<std::vector<float>>& ref) {
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double scale = 1e-30;
    for (float v : ref[i]) scale = std::max(scale, std::fabs(static_cast<double>(v)));
    for (size_t j = 0; j < got[i].size(); ++j) {
      if (std::isnan(got[i][j]) != std::isnan(ref[i][j])) return INFINITY;
      worst = std::max(worst, std::fabs(static_cast<double>(got[i][j]) - ref[i][j]) / scale);
    }
  }
  return worst;
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
  auto inputs = make_inputs(p, std::stoull(program_fingerprint(p), nullptr, 16));
  std::vector<BufferRef> ins;
  for (size_t i = 0; i < inputs.size(); ++i) ins.push_back({inputs[i].data(), DType::F32, dims_of(p.inputs()[i].shape), {}});
  auto fresh_outputs = [&] {
    std::vector<std::vector<float>> outs;
    for (const auto& n : p.outputs()) outs.emplace_back(static_cast<size_t>(static_numel(p.stage(n).shape)), std::nanf(""));
    return outs;
  };
  auto refs_of = [&](std::vector<std::vector<float>>& outs) {
    std::vector<BufferRef> r;
    for (size_t i = 0; i < outs.size(); ++i) r.push_back({outs[i].data(), DType::F32, dims_of(p.stage(p.outputs()[i]).shape), {}});
    return r;
  };
  auto reference = fresh_outputs();
  {
    const Kernel k(p, reference_schedule(p), t);
    k.run(ins, refs_of(reference));
  }
  const double flops = program_flops(p);
  // `first_s`: how long the checked first run took. A very slow implementation
  // (seconds per run) is timed with fewer repetitions, the first run being its warm-up.
  auto finish_row = [&](CompareRow& row, const std::vector<std::vector<float>>& got, const std::function<void()>& run,
                        double first_s) {
    row.max_rel_error = max_rel_error(got, reference);
    if (!(row.max_rel_error <= o.tolerance)) {
      row.error = "wrong result: relative error " + std::to_string(row.max_rel_error);
      return;
    }
    const bool slow = first_s > 1.0;
    row.time = time_it(run, slow ? 0 : o.warmup, slow ? 1 : o.min_reps, slow ? 0 : o.min_seconds);
    row.gflops = flops / (row.time.median_ms * 1e6);
    row.ok = true;
  };

  std::vector<CompareRow> rows;
  for (const auto& [name, s] : schedules) {
    CompareRow row;
    row.impl = name;
    try {
      const Kernel k(p, s, t);
      auto outs = fresh_outputs();
      const auto out_refs = refs_of(outs);
      const auto t0 = std::chrono::steady_clock::now();
      k.run(ins, out_refs);
      finish_row(row, outs, [&] { k.run(ins, out_refs); }, seconds_since(t0));
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
      LoweredPipeline lp = lower(p, Schedule{}, t, {true});
      std::vector<Halide::Buffer<>> in_bufs, out_bufs;
      auto outs = fresh_outputs();
      auto halide_dims = [](std::vector<int64_t> d) {
        std::vector<int> r(d.rbegin(), d.rend());
        return r;
      };
      with_halide_errors("Halide autoscheduler " + name, [&] {
        const Halide::AutoschedulerParams params{name, {{"parallelism", std::to_string(std::max(1, t.cores))}}};
        lp.pipeline.apply_autoscheduler(lp.target, params);
        for (size_t i = 0; i < inputs.size(); ++i) {
          Halide::Buffer<float> b(inputs[i].data(), halide_dims(ins[i].shape));
          lp.inputs[i].set(b);
        }
        for (size_t i = 0; i < outs.size(); ++i)
          out_bufs.push_back(Halide::Buffer<float>(outs[i].data(), halide_dims(dims_of(p.stage(p.outputs()[i]).shape))));
        lp.pipeline.compile_jit(lp.target);
        return 0;
      });
      Halide::Realization real(out_bufs);
      const auto t0 = std::chrono::steady_clock::now();
      with_halide_errors("running the " + name + " schedule", [&] {
        lp.pipeline.realize(real, lp.target);
        return 0;
      });
      finish_row(row, outs, [&] { lp.pipeline.realize(real, lp.target); }, seconds_since(t0));
    } catch (const Error& e) {
      row.error = e.what();
    } catch (const Halide::Error& e) {
      row.error = std::string("Halide: ") + e.what();
    }
    rows.push_back(row);
  }
  return rows;
}

}  // namespace pto::tuner
