// The options and action shared by `pto gen` and generator programs
// (PTO_GENERATOR_MAIN): which targets, one multi-target library or one per
// target, runtime embedded or separate, schedules from a file.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "autotuner/TuningDB.h"
#include "backends/GeneratorRegistry.h"

namespace pto::cli {

struct GenOptions {
  std::string out_dir, name, targets = "host", schedules;
  bool dispatch = false, no_runtime = false, runtime_only = false, check_numerics = false;
  int opt_level = -1;  // -1: each schedule's own

  void add(CLI::App* c) {
    c->add_option("--out,-o", out_dir, "output directory")->required();
    c->add_option("--name,-n", name, "library name (a C identifier)");
    c->add_option("--target,--targets,-t", targets,
                  "target or comma-separated targets (host, x86-64-avx2, x86-64-avx512, x86-64-sapphirerapids, "
                  "arm-64-linux, cuda, opencl, host-opencl, ...)");
    c->add_flag("--dispatch", dispatch, "several CPU targets -> one library with runtime CPU-feature dispatch "
                                        "(default: one library per target)");
    c->add_flag("--no-runtime", no_runtime, "leave the Halide runtime out; link one from `--runtime-only` "
                                            "(shared by several libraries)");
    c->add_flag("--runtime-only", runtime_only, "emit only a Halide runtime library <name>.a for --targets");
    c->add_option("--schedules", schedules,
                  "a tuning database (.db: each kernel and CPU target takes its best tuned record, else the "
                  "default) or a JSON file {\"<kernel>\": <schedule> | {\"<target>\": <schedule>}}");
    c->add_option("--opt-level,-O", opt_level,
                  "0 plain loops, 1 vectorize + parallelize only, 2 the schedules (default), 3 "
                  "with fast-math")
        ->check(CLI::Range(0, 3));
    c->add_flag(
        "--check-numerics", check_numerics,
        "each _run scans its float outputs and returns <name>_NONFINITE with a message naming the "
        "output and index on NaN or Inf");
  }
};

// Per kernel and CPU target, the fastest tuned record of the database at `db`
// (kernels without one keep their default schedule). Device targets keep their device schedule.
inline void apply_tuning_db(const std::string& db, const std::vector<Target>& targets, std::vector<KernelSpec>& kernels) {
  for (auto& k : kernels)
    for (const Target& t : targets) {
      if (t.has_device() || k.schedules.count(t.name)) continue;
      std::string source;
      const Schedule s = tuner::best_schedule(db, k.program, t, &source);
      if (source.rfind("tuned", 0) != 0) continue;
      std::fprintf(stderr, "pto gen: %s on %s: using the %s\n", k.name.c_str(), t.name.c_str(), source.c_str());
      k.schedules[t.name] = s;
    }
}

// Generates the libraries (or the runtime) and prints what was written.
inline void run_gen(std::vector<KernelSpec> kernels, const GenOptions& o) {
  if (o.name.empty()) throw Error("--name is required");
  const std::vector<Target> targets = parse_targets(o.targets);
  if (o.runtime_only) {
    std::printf("wrote %s\n", generate_runtime(targets, o.out_dir, o.name).c_str());
    return;
  }
  const bool db = o.schedules.size() > 3 && o.schedules.substr(o.schedules.size() - 3) == ".db";
  if (db) apply_tuning_db(o.schedules, targets, kernels);
  else if (!o.schedules.empty()) apply_schedule_file(o.schedules, kernels);
  if (o.opt_level >= 0 || o.check_numerics)
    for (KernelSpec& k : kernels)
      for (const Target& t : targets) {
        Schedule s = schedule_for(k, t);
        if (o.opt_level >= 0) s.options.opt_level = o.opt_level;
        if (o.check_numerics) s.options.check_numerics = true;
        k.schedules[t.name] = s;
      }
  LibraryOptions lo;
  lo.name = o.name;
  lo.targets = targets;
  lo.dispatch = o.dispatch;
  lo.embed_runtime = !o.no_runtime;
  for (const GeneratedLibrary& lib : generate_libraries(kernels, lo, o.out_dir)) {
    std::printf("wrote %s (", lib.library.c_str());
    for (size_t i = 0; i < lib.variants.size(); ++i) std::printf("%s%s", i ? ", " : "", lib.variants[i].c_str());
    std::printf(")\n      %s\n", lib.header.c_str());
    for (const auto& h : lib.halide_headers) std::printf("      %s\n", h.c_str());
  }
}

}  // namespace pto::cli
