#include "autotuner/Worker.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <thread>

#include "autotuner/TrialBuffers.h"
#include "backends/Jit.h"
#include "backends/Timing.h"
#include "dsl/Error.h"
#include "dsl/ProgramJson.h"
#include "dsl/ReadFile.h"
#include "schedules/ScheduleJson.h"
#include "schedules/Validate.h"

namespace pto::tuner {
namespace {

using json = nlohmann::json;

std::string read_file(const std::string& path) { return pto::read_file(path, "worker: cannot read"); }

void say(const std::string& line) {
  std::fputs((line + "\n").c_str(), stdout);
  std::fflush(stdout);
}

void result(const json& r) { say("result " + r.dump()); }

[[noreturn]] void sleep_forever() {
  for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
}

}  // namespace

Schedule reference_schedule(const Program& p) {
  // Every stage at root (the plain schedule), f64 compute, accumulation and
  // intermediate storage; outputs keep their interface type, so the
  // reference is the f64 result rounded once. Stages the program itself
  // declares bf16 or f16 (activations rounded for a bf16 matmul) keep that
  // storage: their rounding is part of what the program computes.
  Schedule s;
  const auto outs = p.outputs();
  for (const Stage& st : p.stages()) {
    if (!is_float(st.dtype)) continue;
    StageSchedule& ss = s[st.name];
    if (is_float(st.value.type())) ss.precision.compute = DType::F64;
    if (st.reduce) ss.precision.accumulate = DType::F64;
    const bool narrow = st.dtype == DType::BF16 || st.dtype == DType::F16;
    if (std::find(outs.begin(), outs.end(), st.name) == outs.end() && !narrow) ss.precision.storage = DType::F64;
  }
  return s;
}

std::string injected_fault(int trial) {
  const char* env = std::getenv("PTO_TUNER_FAULT");
  if (!env) return "";
  std::stringstream ss(env);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const auto at = item.find('@');
    if (at == std::string::npos) continue;
    if (item.substr(at + 1) == std::to_string(trial)) return item.substr(0, at);
  }
  return "";
}

std::vector<std::vector<float>> make_inputs(const Program& p, uint64_t seed) {
  std::vector<std::vector<float>> r;
  for (HostBuffer& b : input_buffers(p, seed)) {
    if (b.dtype != DType::F32)
      throw DTypeError("make_inputs gives f32 inputs only; this one is " + std::string(to_string(b.dtype)) +
                       " (input_buffers gives every type)");
    r.emplace_back(b.f32.begin(), b.f32.end());
  }
  return r;
}

int worker_main(const std::string& dir, const std::string& schedule_path, int trial, bool reference) {
  json r = {{"status", "ok"}, {"error", ""}, {"median_ms", 0}, {"min_ms", 0}, {"max_ms", 0},
            {"reps", 0},      {"max_rel_error", 0}, {"compile_s", 0}};
  const std::string fault = reference ? "" : injected_fault(trial);
  try {
    const json cfg = json::parse(read_file(dir + "/config.json"));
    const Program p = program_from_json(cfg.at("program"));
    const Target t = parse_target(cfg.at("target").get<std::string>());
    Schedule s;
    try {
      s = reference ? reference_schedule(p) : load_schedule_file(schedule_path);
      validate(p, s, &t);
    } catch (const ScheduleError& e) {
      r["status"] = "invalid";
      r["error"] = e.what();
      result(r);
      return 0;
    }
    if (fault == "hang_compile") sleep_forever();
    if (fault == "abort") std::abort();
    const auto t0 = std::chrono::steady_clock::now();
    std::optional<Kernel> k;
    try {
      k.emplace(p, s, t);
    } catch (const Error& e) {
      r["status"] = "compile_error";
      r["error"] = e.what();
      result(r);
      return 0;
    }
    const double compile_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r["compile_s"] = compile_s;
    say("compiled " + std::to_string(compile_s));
    std::string go;
    if (!std::getline(std::cin, go) || go.rfind("go", 0) != 0)
      return 0;  // the parent went away or said stop
    const double slow_ms = go.size() > 3 ? std::atof(go.c_str() + 3) : 0;  // "go <ms>" (Measurer.h)

    auto inputs = input_buffers(p, cfg.at("input_seed").get<uint64_t>());
    std::vector<BufferRef> ins;
    for (HostBuffer& b : inputs) ins.push_back(b.ref());
    auto out_bufs = output_buffers(p);
    std::vector<BufferRef> out_refs;
    for (HostBuffer& b : out_bufs) out_refs.push_back(b.ref());
    if (fault == "segv") std::raise(SIGSEGV);
    if (fault == "hang") sleep_forever();
    const auto first_start = std::chrono::steady_clock::now();
    try {
      k->run(ins, out_refs);
    } catch (const Error& e) {
      r["status"] = "runtime_error";
      r["error"] = e.what();
      result(r);
      return 0;
    }
    const double first_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - first_start)
            .count();
    // Results as f32 (bf16 / f16 outputs widened exactly) for the check.
    std::vector<std::vector<float>> outs;
    for (const HostBuffer& b : out_bufs) outs.push_back(b.to_f32());
    if (fault == "wrong") outs[0][outs[0].size() / 2] += 1000.0f;

    if (reference) {
      std::ofstream f(dir + "/reference.bin.tmp", std::ios::binary);
      for (const auto& o : outs) f.write(reinterpret_cast<const char*>(o.data()), static_cast<std::streamsize>(o.size() * sizeof(float)));
      f.close();
      if (!f || std::rename((dir + "/reference.bin.tmp").c_str(), (dir + "/reference.bin").c_str()) != 0)
        throw Error("worker: cannot write the reference output in '" + dir + "'");
      result(r);
      return 0;
    }

    // Check against the reference: the largest error relative to each output's largest magnitude.
    const std::string ref_bytes = read_file(dir + "/reference.bin");
    size_t off = 0;
    double worst = 0;
    std::string where;
    for (size_t i = 0; i < outs.size(); ++i) {
      const size_t n = outs[i].size();
      if (ref_bytes.size() < (off + n) * sizeof(float)) throw Error("worker: reference.bin is too short");
      const float* ref = reinterpret_cast<const float*>(ref_bytes.data()) + off;
      double scale = 0;
      for (size_t j = 0; j < n; ++j) scale = std::max(scale, std::fabs(static_cast<double>(ref[j])));
      scale = std::max(scale, 1e-30);
      for (size_t j = 0; j < n; ++j) {
        const double e = std::isnan(outs[i][j]) != std::isnan(ref[j])
                             ? INFINITY
                             : std::fabs(static_cast<double>(outs[i][j]) - ref[j]) / scale;
        if (e > worst || (std::isinf(e) && !std::isinf(worst))) {
          worst = e;
          where = "output '" + p.outputs()[i] + "' element " + std::to_string(j) + ": got " +
                  std::to_string(outs[i][j]) + ", reference " + std::to_string(ref[j]);
        }
      }
      off += n;
    }
    r["max_rel_error"] = std::isinf(worst) ? 1e300 : worst;
    const double tol = cfg.at("tolerance").get<double>();
    if (!(worst <= tol)) {
      r["status"] = "wrong_result";
      r["error"] = "relative error " + std::to_string(worst) + " exceeds the tolerance " + std::to_string(tol) + " at " + where;
      result(r);
      return 0;
    }
    if (slow_ms > 0 && first_ms > slow_ms) {
      r["median_ms"] = r["min_ms"] = r["max_ms"] = first_ms;
      r["reps"] = 1;
      result(r);
      return 0;
    }
    const TimingStats ts = time_it([&] { k->run(ins, out_refs); }, cfg.value("warmup", 1), cfg.value("min_reps", 5),
                                   cfg.value("min_seconds", 0.2), cfg.value("max_reps", 1000));
    r["median_ms"] = ts.median_ms;
    r["min_ms"] = ts.min_ms;
    r["max_ms"] = ts.max_ms;
    r["reps"] = ts.reps;
    result(r);
    return 0;
  } catch (const std::exception& e) {
    r["status"] = "runtime_error";
    r["error"] = e.what();
    result(r);
    return 0;
  }
}

}  // namespace pto::tuner
