// `pto`: the command-line front end.
//
//   pto ops                         list operator types, their kinds and attributes (name=default)
//   pto workloads                   list ready-made programs and their sizes
//   pto show <program>              print a program (or its JSON)
//   pto schedule <program>          print the default schedule as JSON
//   pto explain <program>           print the loop nest a schedule produces (--stmt, --asm:
//                                   Halide's lowered statement, the assembly)
//   pto run <program>               JIT-compile, run on random data, check, time
//   pto bisect <program> -s S       the stage and directive of S that change the output
//                                   (--opt-level 0-3 on run, explain, schedule, bisect, gen)
//   pto gen <program>... --out DIR  emit static libraries + headers (one per
//                                   target, or one with --dispatch), or a runtime
//   pto tune <program> --trials N   search schedules, store them in the tuning database
//   pto worker ...                  (hidden) measure one candidate for the tuner
//
// <program> is a workload name (see `pto workloads`) or a program .json file;
// --set NAME=VALUE changes a workload size (0 makes it symbolic).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>

#include "autotuner/Compare.h"
#include "autotuner/TrialBuffers.h"
#include "autotuner/Tuner.h"
#include "autotuner/TuningDB.h"
#include "autotuner/WorkDir.h"
#include "autotuner/Worker.h"
#include "backends/Generator.h"
#include "backends/Jit.h"
#include "backends/Lower.h"
#include "backends/ModelLibrary.h"
#include "backends/Timing.h"
#include "debug/Bisect.h"
#include "debug/CheckNumerics.h"
#include "debug/StageProfile.h"
#include "dsl/Analysis.h"
#include "dsl/ProgramJson.h"
#include "dsl/Workloads.h"
#include "dsl/ops/Ops.h"
#include "frontends/onnx/Import.h"
#include "schedules/Explain.h"
#include "schedules/ScheduleJson.h"
#include "schedules/Validate.h"
#include "schedules/defaults/Defaults.h"
#include "tools/pto/GenCommand.h"

namespace {

using namespace pto;

std::map<std::string, int64_t> parse_sizes(const std::vector<std::string>& sets) {
  std::map<std::string, int64_t> r;
  for (const auto& s : sets) {
    const auto eq = s.find('=');
    if (eq == std::string::npos || eq == 0)
      throw Error("--set expects NAME=VALUE, got '" + s + "'");
    try {
      size_t used = 0;
      const int64_t v = std::stoll(s.substr(eq + 1), &used);
      if (used != s.size() - eq - 1) throw std::invalid_argument(s);
      r[s.substr(0, eq)] = v;
    } catch (const std::logic_error&) {
      throw Error("--set " + s + ": the value must be an integer");
    }
  }
  return r;
}

std::string g_db_path;  // --db of run / gen / schedule / explain

Schedule pick_schedule(const std::string& which, const Program& p, const Target& t) {
  if (which == "default") return default_schedule(p, t);
  if (which == "best") {
    std::string source;
    Schedule s = tuner::best_schedule(g_db_path.empty() ? tuner::default_db_path() : g_db_path, p, t, &source);
    std::fprintf(stderr, "pto: using the %s\n", source.c_str());
    return s;
  }
  if (which == "plain") return plain_schedule(p);
  return load_schedule_file(which);
}

struct Common {
  std::string program, target = "host", schedule = "default";
  std::vector<std::string> sets;
  int opt_level = -1;  // -1: the schedule's own
  void add(CLI::App* c, bool with_schedule = true) {
    c->add_option("program", program, "workload name or program .json file")->required();
    c->add_option("--target,-t", target, "target name (host, x86-64-avx2, x86-64-avx512, ...)");
    if (with_schedule) {
      c->add_option("--schedule,-s", schedule,
                    "schedule .json file, 'default', 'plain' or 'best' (the fastest tuned record in --db, else default)");
      c->add_option("--db", g_db_path, "tuning database for --schedule best (default $PTO_TUNING_DB or ~/.cache/pto/tuning.db)");
      c->add_option("--opt-level,-O", opt_level,
                    "0 plain loops, 1 vectorize + parallelize only, 2 the schedule (default), 3 "
                    "with fast-math")
          ->check(CLI::Range(0, 3));
    }
    c->add_option("--set", sets, "workload size NAME=VALUE (0 = symbolic)");
  }
  // The schedule --schedule names, at --opt-level where given.
  Schedule chosen(const Program& p, const Target& t) const {
    Schedule s = pick_schedule(schedule, p, t);
    if (opt_level >= 0) s.options.opt_level = opt_level;
    return s;
  }
};

struct RunArgs {
  int reps = 10;
  bool check_numerics = false;
  size_t memory_limit = 0;  // bytes of intermediates, 0 = none
  bool shard = false;
  bool profile = false;
};

int cmd_run(const Common& c, const RunArgs& a) {
  const int reps = a.reps;
  const bool check_numerics = a.check_numerics;
  const Program p = load_program(c.program, parse_sizes(c.sets));
  const Target t = parse_target(c.target);
  const Schedule s = c.chosen(p, t);
  for (const auto& [sym, src] : p.symbols())
    throw Error("pto run: symbolic size '" + sym + "': give it a value with --set " + sym + "=N");
  // Random inputs in each input's type (f32, bf16, f16), checked against the
  // plain schedule in f64 with the tuner's bound (1e-4 of the output's
  // largest magnitude; 1e-2 where the program's own stages round to bf16/f16).
  auto inputs = tuner::input_buffers(p, 42);
  std::vector<BufferRef> in_refs;
  for (auto& b : inputs) in_refs.push_back(b.ref());
  auto out = tuner::output_buffers(p), ref = tuner::output_buffers(p);
  std::vector<BufferRef> out_refs, ref_refs;
  for (auto& b : out) out_refs.push_back(b.ref());
  for (auto& b : ref) ref_refs.push_back(b.ref());
  std::printf("compiling %s for %s ...\n", p.name().c_str(), t.name.c_str());
  const Kernel k(p, s, t);
  const Kernel reference(p, tuner::reference_schedule(p), t);
  const OnRefusal on_refusal = a.shard ? OnRefusal::Shard : OnRefusal::Fail;
  const RunStats st = k.run(in_refs, out_refs, a.memory_limit, on_refusal);
  if (a.memory_limit)
    std::printf("memory: peak %zu bytes of intermediates (limit %zu)%s\n", st.peak_bytes,
                a.memory_limit,
                st.shards > 1 ? (", in " + std::to_string(st.shards) + " shards").c_str() : "");
  if (check_numerics) {
    bool finite = true;
    for (const auto& v : tuner::to_f32(out))
      for (float x : v) finite = finite && std::isfinite(x);
    if (!finite) {
      // Name the stage where the NaN or Inf first appeared (debug/CheckNumerics.h).
      std::printf("%s\n", debug::locate_nonfinite(p, s, t, in_refs).message().c_str());
      return 5;
    }
    std::printf("check_numerics: every output is finite\n");
  }
  reference.run(in_refs, ref_refs);
  const double max_err = tuner::max_rel_error(tuner::to_f32(out), tuner::to_f32(ref));
  const double tol = tuner::rounding_tolerance(p);
  const TimingStats ts =
      time_it([&] { k.run(in_refs, out_refs, a.memory_limit, on_refusal); }, 1, reps);
  const double gflops = program_flops(p) / (ts.median_ms * 1e6);
  std::printf("check vs the f64 reference: max rel err %.2e (bound %.0e) %s\n", max_err, tol, max_err <= tol ? "OK" : "MISMATCH");
  std::printf("time: median %.4g ms (min %.4g, max %.4g, %d reps)  %.1f GFLOP/s\n", ts.median_ms, ts.min_ms,
              ts.max_ms, ts.reps, gflops);
  if (a.profile) std::printf("\n%s", debug::profile_stages(p, s, t, in_refs).report().c_str());
  return max_err <= tol ? 0 : 3;
}

// pto bisect: the stage, then the field of its schedule entry, that takes
// the output past the tolerance against the f64 reference (autotuner/Bisect.h).
int cmd_bisect(const Common& c, double tolerance, uint64_t seed) {
  const Program p = load_program(c.program, parse_sizes(c.sets));
  const Target t = parse_target(c.target);
  for (const auto& [sym, src] : p.symbols())
    throw Error("pto bisect: symbolic size '" + sym + "': give it a value with --set " + sym +
                "=N");
  const Schedule s = c.chosen(p, t);
  auto inputs = tuner::input_buffers(p, seed);
  auto outputs = tuner::output_buffers(p);
  std::vector<BufferRef> in_refs, out_refs;
  for (auto& b : inputs) in_refs.push_back(b.ref());
  for (auto& b : outputs) out_refs.push_back(b.ref());
  debug::BisectOptions o;
  o.tolerance = tolerance;
  o.progress = [](const std::string& line) {
    std::fprintf(stderr, "pto bisect: %s\n", line.c_str());
  };
  const debug::BisectResult r = debug::bisect(p, s, t, in_refs, out_refs, o);
  std::printf("%s", r.report().c_str());
  // 0: a culprit found (or no difference); 3: a difference the search could not pin to a stage.
  return r.stage.empty() && r.error_given > r.tolerance ? 3 : 0;
}

struct TuneArgs {
  Common c;
  tuner::TuneOptions o;
  bool compare = true;
  std::string out;
};

std::string fmt_ms(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3f", v);
  return b;
}

int cmd_tune(TuneArgs& a) {
  Program p = load_program(a.c.program, parse_sizes(a.c.sets));
  const Target t = parse_target(a.c.target);
  for (const auto& [sym, src] : p.symbols())
    throw Error("pto tune: symbolic size '" + sym + "': give it a value with --set " + sym + "=N");
  if (!t.runs_here()) throw TargetError("pto tune: target '" + t.name + "' cannot run on this machine, so it cannot be measured here");
  if (a.o.db_path.empty()) a.o.db_path = tuner::default_db_path();
  const bool tty = isatty(2);
  // Ctrl-C / SIGTERM must not leave the measurer's /tmp/pto-tune-* directory behind.
  tuner::remove_work_dirs_on_signals();
  std::fprintf(stderr, "pto tune: %s on %s, strategy %s, seed %llu, database %s\n", p.name().c_str(), t.name.c_str(),
               a.o.strategy.c_str(), static_cast<unsigned long long>(a.o.seed), a.o.db_path.c_str());
  const tuner::TuneResult r = tuner::tune(p, t, a.o, [&](const tuner::TuneProgress& pr) {
    std::string line = "trial " + std::to_string(pr.trial) + "/" + std::to_string(pr.trials);
    line += pr.best_ms > 0 ? "  best " + fmt_ms(pr.best_ms) + " ms" : "  best -";
    if (pr.best_ms > 0 && pr.default_ms > 0) line += "  (" + fmt_ms(pr.default_ms / pr.best_ms) + "x over default)";
    line += "  failures " + std::to_string(pr.failures);
    if (pr.last && pr.last->status != tuner::TrialStatus::Ok) line += "  [last: " + tuner::to_string(pr.last->status) + "]";
    if (tty) std::fprintf(stderr, "\r%-100s", line.c_str());
    else std::fprintf(stderr, "%s\n", line.c_str());
  });
  if (tty) std::fprintf(stderr, "\n");
  std::fprintf(stderr, "pto tune: %d trials (%d resumed, %d measured now, %d failed, %d invalid candidates skipped)%s%s\n",
               static_cast<int>(r.history.size()), r.resumed, r.measured, r.failures, r.invalid_skipped,
               r.stopped_by_time ? ", stopped by --time-budget" : "", r.space_exhausted ? ", search space exhausted" : "");
  if (!r.best) {
    std::fprintf(stderr, "pto tune: no valid candidate: every measured schedule failed\n");
    for (const auto& h : r.history)
      std::fprintf(stderr, "  trial %d %s: %s\n", h.index, tuner::to_string(h.status).c_str(), h.error.c_str());
    return 3;
  }
  const Schedule best = schedule_from_json_string(r.best->schedule_json);
  if (!a.out.empty()) {
    std::ofstream f(a.out);
    f << schedule_to_json_string(best, 2) << "\n";
    if (!f) throw Error("pto tune: cannot write '" + a.out + "'");
  }
  std::printf("best: trial %d (%s), %.3f ms in its worker; reached 90%% of it after %d trials\n", r.best->index,
              r.best->strategy.c_str(), r.best->median_ms, r.trials_to_90);
  if (r.confirmed_ms > 0)
    std::printf("confirmed side by side with the fastest trials: %.3f ms, the default %.3f ms\n",
                r.confirmed_ms, r.confirmed_default_ms);
  if (!a.compare) return 0;
  tuner::CompareOptions co;
  co.autoschedulers = tuner::halide_autoscheduler_names();
  co.tolerance = std::max({co.tolerance, a.o.max_rel_error, tuner::rounding_tolerance(p)});
  std::fprintf(stderr, "pto tune: timing default, Halide autoschedulers and the best tuned schedule side by side ...\n");
  Schedule def = default_schedule(p, t);
  def.options.opt_level = a.o.opt_level;
  const tuner::TunedComparison cmp = tuner::compare_tuned(p, t, def, best, co);
  const auto& rows = cmp.rows;
  double def_ms = 0;
  for (const auto& row : rows)
    if (row.impl == "pto-default" && row.ok) def_ms = row.time.median_ms;
  std::printf("%-22s %10s %10s %10s %9s %11s\n", "impl", "median ms", "min ms", "max ms", "GFLOP/s", "vs default");
  for (const auto& row : rows) {
    if (!row.ok) {
      std::printf("%-22s failed: %s\n", row.impl.c_str(), row.error.substr(0, 200).c_str());
      continue;
    }
    std::printf("%-22s %10.3f %10.3f %10.3f %9.1f %10.2fx\n", row.impl.c_str(), row.time.median_ms, row.time.min_ms,
                row.time.max_ms, row.gflops, def_ms > 0 ? def_ms / row.time.median_ms : 0.0);
  }
  if (cmp.tuned_is_default)
    std::printf("(no candidate beat the default: the tuned schedule is the default)\n");
  return 0;
}

}  // namespace

// --shape NAME=D0,D1,... options: the shapes of a model's inputs.
onnx::ImportOptions import_options(const std::string& cmd, const std::vector<std::string>& shapes) {
  onnx::ImportOptions o;
  for (const auto& s : shapes) {
    const auto eq = s.find('=');
    if (eq == std::string::npos) throw Error(cmd + ": --shape '" + s + "' is not NAME=D0,D1,...");
    std::vector<int64_t> dims;
    std::stringstream ss(s.substr(eq + 1));
    for (std::string d; std::getline(ss, d, ',');) {
      try {
        dims.push_back(std::stoll(d));
      } catch (const std::exception&) {
        throw Error(cmd + ": --shape '" + s + "': '" + d + "' is not a number");
      }
    }
    o.input_shapes[s.substr(0, eq)] = dims;
  }
  return o;
}

// `pto gen model.onnx`: the imported model as a library of its parts, its
// weights and a C driver (backends/ModelLibrary.h).
int cmd_gen_model(const std::string& path, const std::vector<std::string>& shapes,
                  const pto::cli::GenOptions& g) {
  const onnx::ImportedModel m = onnx::import_onnx_file(path, import_options("pto gen", shapes));
  const std::vector<Target> targets = parse_targets(g.targets);
  if (targets.size() != 1 || g.dispatch || g.no_runtime || g.runtime_only)
    throw Error("pto gen " + path +
                ": a model library is built for one target (give one --target; no --dispatch or "
                "runtime options)");
  ModelLibraryOptions o;
  o.name = g.name.empty() ? m.program.name() : g.name;
  o.target = targets[0];
  for (const auto& w : m.weights) o.weights[w.name] = w.value.data;
  const GeneratedModel lib = generate_model_library(m.program, o, g.out_dir);
  std::printf("wrote %s (%zu kernels)\nwrote %s\nwrote %s\nwrote %s\n", lib.kernels.library.c_str(),
              lib.kernels.functions.size(), lib.kernels.header.c_str(), lib.driver.c_str(),
              lib.weights.c_str());
  return 0;
}

// `pto import`: an ONNX model's program, inputs, outputs and weights.
int cmd_import(const std::string& path, const std::string& out,
               const std::vector<std::string>& shapes, bool list_ops) {
  if (list_ops) {
    for (const auto& op : onnx::supported_operators()) std::printf("%s\n", op.c_str());
    return 0;
  }
  if (path.empty()) throw Error("pto import: give a model file (or --ops)");
  const onnx::ImportedModel m = onnx::import_onnx_file(path, import_options("pto import", shapes));
  int64_t weight_bytes = 0;
  for (const auto& w : m.weights) weight_bytes += w.value.numel() * bytes(w.value.dtype);
  std::printf("%s: opset %lld, %zu stages, %zu weights (%.1f MB), %lld nodes folded at import\n",
              path.c_str(), static_cast<long long>(m.opset), m.program.stages().size(),
              m.weights.size(), weight_bytes / 1e6, static_cast<long long>(m.folded_nodes));
  for (size_t i = 0; i < m.inputs.size(); ++i)
    std::printf("input  %s -> %s\n", m.input_names[i].c_str(), m.inputs[i].c_str());
  for (size_t i = 0; i < m.outputs.size(); ++i)
    std::printf("output %s <- %s\n", m.output_names[i].c_str(), m.outputs[i].c_str());
  if (out.empty()) {
    std::cout << m.program.str();
  } else {
    std::ofstream f(out);
    if (!f) throw Error("pto import: cannot write '" + out + "'");
    f << program_to_json_string(m.program, 2) << "\n";
  }
  return 0;
}

int main(int argc, char** argv) {
  CLI::App app{"PTO: tensor compute definitions, schedules as data, autotuning and generators"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("pto ") + PTO_VERSION);

  app.add_subcommand("ops", "list operator types, one per line, with their kinds and attributes (name=default; no default: required)");
  app.add_subcommand("workloads", "list ready-made programs and their size parameters");
  std::string target_name = "host";
  auto* target_cmd = app.add_subcommand("target", "print a target's hardware model (cores, vector registers, caches)");
  target_cmd->add_option("name", target_name, "target name (default: host, detected on this machine)");

  std::string import_path, import_out;
  std::vector<std::string> import_shapes;
  bool import_ops = false;
  auto* imp = app.add_subcommand(
      "import", "import an ONNX model: print its program (or write its JSON with -o)");
  imp->add_option("model", import_path, "the .onnx file");
  imp->add_option("-o,--output", import_out,
                  "write the program JSON here (its weights are program inputs)");
  imp->add_option("--shape", import_shapes,
                  "an input's shape, NAME=D0,D1,... (for dims the model leaves symbolic)");
  imp->add_flag("--ops", import_ops, "list the ONNX operator types the importer converts");

  Common show_c;
  bool show_json = false;
  auto* show = app.add_subcommand("show", "print a program");
  show_c.add(show, false);
  show->add_flag("--json", show_json, "print the program's JSON");

  Common sched_c;
  auto* sched = app.add_subcommand("schedule", "print a schedule (default: the target's default) as JSON");
  sched_c.add(sched);

  Common explain_c;
  std::string stmt_path, asm_path;
  auto* expl = app.add_subcommand("explain", "print the loop nest a schedule produces");
  explain_c.add(expl);
  expl->add_option("--stmt", stmt_path, "also write Halide's lowered statement (the loops as compiled) to this file");
  expl->add_option("--asm", asm_path, "also write the generated assembly to this file");

  Common bisect_c;
  double bisect_tol = 0;
  uint64_t bisect_seed = 42;
  auto* bis = app.add_subcommand("bisect",
                                 "find the stage, then the directive, of a schedule whose output "
                                 "differs from the f64 reference");
  bisect_c.add(bis);
  bis->add_option(
      "--tolerance", bisect_tol,
      "largest error relative to each output's magnitude (default: 1e-4, 1e-2 for programs with "
      "bf16/f16 stages)");
  bis->add_option("--seed", bisect_seed, "seed of the random inputs (uniform in [-1, 1))");

  Common run_c;
  RunArgs run_a;
  auto* run = app.add_subcommand("run", "JIT-compile, run on random data, check against the f64 reference, time");
  run_c.schedule = "best";  // the JIT path picks the tuned record when there is one
  run_c.add(run);
  run->add_option("--reps", run_a.reps, "timed repetitions (at least)");
  run->add_option(
         "--memory-limit", run_a.memory_limit,
         "cap on the bytes of intermediates each run allocates; over it DEVICE_MEMORY_EXHAUSTED "
         "(exit 2) naming the stage, or with --shard a run split to fit")
      ->check(CLI::PositiveNumber);
  run->add_flag(
      "--shard", run_a.shard,
      "with --memory-limit: split a run over the limit along the program's batch axis into "
      "as many shards as fit");
  run->add_flag("--profile", run_a.profile,
                "after timing, a table of per-stage time (traced productions) and buffer sizes");
  run->add_flag("--check-numerics", run_a.check_numerics,
                "on NaN or Inf in an output, name the first stage that produced it, where, and "
                "what it read (exit 5)");

  std::vector<std::string> gen_programs, gen_sets;
  std::string gen_schedule = "best";
  pto::cli::GenOptions gen_o;
  auto* gen = app.add_subcommand("gen", "emit static libraries + headers (per target, or multi-target with --dispatch)");
  gen->add_option("program", gen_programs,
                  "workload names or program .json files; with one program the C function is the library name, "
                  "with several <library>_<program>");
  gen->add_option("--set", gen_sets, "workload size NAME=VALUE (0 = symbolic)");
  gen->add_option("--schedule,-s", gen_schedule,
                  "'best' (per target, the fastest tuned record in --db, else the default), 'default', 'plain', "
                  "or a schedule .json file (one program)");
  gen->add_option("--db", g_db_path, "tuning database for --schedule best (default $PTO_TUNING_DB or ~/.cache/pto/tuning.db)");
  std::vector<std::string> gen_shapes;
  gen->add_option("--shape", gen_shapes,
                  "an ONNX model's input shape, NAME=D0,D1,... (for dims it leaves symbolic)");
  gen_o.add(gen);

  TuneArgs tune_a;
  auto* tune = app.add_subcommand("tune", "search schedules for a program; store every trial in the tuning database");
  tune_a.c.add(tune, false);
  tune->add_option("--trials,-n", tune_a.o.trials, "total trials for this workload and target, resumed ones included");
  tune->add_option("--time-budget", tune_a.o.time_budget_s, "seconds after which no new trial starts (0 = none)");
  tune->add_option("--db", tune_a.o.db_path, "tuning database (default $PTO_TUNING_DB or ~/.cache/pto/tuning.db)");
  tune->add_option("--strategy", tune_a.o.strategy, "random | evolutionary | model");
  tune->add_option("--max-rel-error", tune_a.o.max_rel_error,
                   "accuracy budget relative to the output's magnitude; > 0 lets the tuner lower intermediate precision "
                   "(0 = exact f32)");
  tune->add_option("--seed", tune_a.o.seed, "random seed of the search (deterministic for a fixed seed)");
  tune->add_option("--jobs,-j", tune_a.o.measure.jobs,
                   "worker processes compiling at once, 0 = one per core (timing is one at a time, "
                   "with nothing compiling)");
  tune->add_option("--compile-timeout", tune_a.o.measure.compile_timeout_s, "seconds before a compiling worker is killed");
  tune->add_option("--run-timeout", tune_a.o.measure.run_timeout_s, "seconds before a running worker is killed");
  tune->add_option("--min-seconds", tune_a.o.measure.min_seconds, "timing: run each candidate at least this long");
  tune->add_option("--out,-o", tune_a.out, "write the best schedule's JSON here");
  tune->add_option(
          "--opt-level,-O", tune_a.o.opt_level,
          "2 the candidates as searched (default), 3 every candidate with fast-math (its records "
          "kept apart from exact ones)")
      ->check(CLI::Range(0, 3));
  tune->add_flag("!--no-compare", tune_a.compare, "skip the final side-by-side table");
  tune->footer(
      "Exit codes: 0 ok; 2 bad input (program, target, option); 3 no valid candidate (every schedule failed);\n"
      "4 the tuning database cannot be opened or written.\n"
      "Progress (stderr): trial i/N, best so far, speedup over the default schedule, failures.\n"
      "Fault injection for tests: PTO_TUNER_FAULT=KIND@TRIAL,... with KIND segv|hang|hang_compile|wrong|abort.");

  std::string w_dir, w_sched;
  int w_trial = 0;
  bool w_ref = false;
  auto* worker = app.add_subcommand("worker", "");  // hidden: the tuner's measurement process
  worker->group("");
  worker->add_option("--dir", w_dir)->required();
  worker->add_option("--schedule", w_sched);
  worker->add_option("--trial", w_trial);
  worker->add_flag("--reference", w_ref);

  CLI11_PARSE(app, argc, argv);
  try {
    if (app.got_subcommand("ops")) {
      for (const auto& op : ops::registry()) {
        std::string attrs;
        for (const auto& a : op.attrs)
          attrs += " " + a.name + (a.required ? "" : "=" + (a.def.is_null() ? std::string("none") : a.def.dump()));
        std::printf("%-28s %-13s%s\n", op.name.c_str(), std::string(to_string(op.kind)).c_str(), attrs.c_str());
      }
    } else if (app.got_subcommand("target")) {
      const Target t = parse_target(target_name);
      std::printf("%s\nhalide: %s\n", t.describe().c_str(), t.halide.c_str());
    } else if (app.got_subcommand("workloads")) {
      for (const auto& w : workloads()) {
        std::string sizes;
        for (const auto& [k, v] : w.defaults) sizes += (sizes.empty() ? "" : " ") + k + "=" + std::to_string(v);
        std::printf("%-20s %s  [%s]\n", w.name.c_str(), w.summary.c_str(), sizes.c_str());
      }
    } else if (app.got_subcommand("import")) {
      return cmd_import(import_path, import_out, import_shapes, import_ops);
    } else if (app.got_subcommand("show")) {
      const Program p = load_program(show_c.program, parse_sizes(show_c.sets));
      std::cout << (show_json ? program_to_json_string(p, 2) + "\n" : p.str());
    } else if (app.got_subcommand("schedule")) {
      const Program p = load_program(sched_c.program, parse_sizes(sched_c.sets));
      const Target t = parse_target(sched_c.target);
      const Schedule s = sched_c.chosen(p, t);
      validate(p, s, &t);
      std::cout << schedule_to_json_string(s, 2) << "\n";
    } else if (app.got_subcommand("explain")) {
      const Program p = load_program(explain_c.program, parse_sizes(explain_c.sets));
      const Target t = parse_target(explain_c.target);
      const Schedule s = explain_c.chosen(p, t);
      std::cout << explain(p, s, &t);
      if (!stmt_path.empty() || !asm_path.empty()) {
        LoweredPipeline lp = lower(p, s, t);
        with_halide_errors("explain", [&] {
          if (!stmt_path.empty())
            lp.pipeline.compile_to_lowered_stmt(stmt_path, lp.arguments(), Halide::StmtOutputFormat::Text,
                                                lp.target);
          if (!asm_path.empty())
            lp.pipeline.compile_to_assembly(asm_path, lp.arguments(), "kernel", lp.target);
        });
      }
    } else if (app.got_subcommand("run")) {
      if (run_a.shard && !run_a.memory_limit)
        throw Error("pto run: --shard needs --memory-limit BYTES");
      return cmd_run(run_c, run_a);
    } else if (app.got_subcommand("bisect")) {
      return cmd_bisect(bisect_c, bisect_tol, bisect_seed);
    } else if (app.got_subcommand("worker")) {
      return tuner::worker_main(w_dir, w_sched, w_trial, w_ref);
    } else if (app.got_subcommand("tune")) {
      return cmd_tune(tune_a);
    } else if (app.got_subcommand("gen")) {
      // An ONNX model: a library of its parts, its weights and a C driver.
      if (gen_programs.size() == 1 && gen_programs[0].size() > 5 &&
          gen_programs[0].substr(gen_programs[0].size() - 5) == ".onnx")
        return cmd_gen_model(gen_programs[0], gen_shapes, gen_o);
      std::vector<KernelSpec> kernels;
      if (gen_programs.empty() && !gen_o.runtime_only) throw Error("pto gen: give at least one program");
      for (const auto& prog : gen_programs) {
        const Program p = load_program(prog, parse_sizes(gen_sets));
        kernels.push_back({gen_programs.size() == 1 && !gen_o.name.empty() ? gen_o.name : p.name(), p, {}});
      }
      if (gen_o.name.empty() && kernels.size() == 1) gen_o.name = kernels[0].name;
      if (gen_schedule == "best") {
        pto::cli::apply_tuning_db(g_db_path.empty() ? tuner::default_db_path() : g_db_path,
                                  parse_targets(gen_o.targets), kernels);
      } else if (gen_schedule != "default") {
        if (kernels.size() != 1) throw Error("pto gen: --schedule needs exactly one program; use --schedules for several");
        kernels[0].schedules["*"] = pick_schedule(gen_schedule, kernels[0].program, parse_target("host"));
      }
      pto::cli::run_gen(std::move(kernels), gen_o);
    }
  } catch (const tuner::TuningDBError& e) {
    std::fprintf(stderr, "pto: error: %s\n", e.what());
    return 4;
  } catch (const pto::Error& e) {
    std::fprintf(stderr, "pto: error: %s\n", e.what());
    return 2;
  }
  return 0;
}
