// `pto`: the command-line front end.
//
//   pto ops                         list operator types and their kinds
//   pto workloads                   list ready-made programs and their sizes
//   pto show <program>              print a program (or its JSON)
//   pto schedule <program>          print the default schedule as JSON
//   pto explain <program>           print the loop nest a schedule produces
//   pto run <program>               JIT-compile, run on random data, check, time
//   pto gen <program>... --out DIR  emit static libraries + headers (one per
//                                   target, or one with --dispatch), or a runtime
//
// <program> is a workload name (see `pto workloads`) or a program .json file;
// --set NAME=VALUE changes a workload size (0 makes it symbolic).
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <random>

#include "backends/Generator.h"
#include "tools/pto/GenCommand.h"
#include "backends/Jit.h"
#include "backends/Timing.h"
#include "dsl/Analysis.h"
#include "dsl/ProgramJson.h"
#include "dsl/Workloads.h"
#include "dsl/ops/Ops.h"
#include "schedules/Explain.h"
#include "schedules/ScheduleJson.h"
#include "schedules/Validate.h"
#include "schedules/defaults/Defaults.h"

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

Schedule pick_schedule(const std::string& which, const Program& p, const Target& t) {
  if (which == "default") return default_schedule(p, t);
  if (which == "plain") return plain_schedule(p);
  return load_schedule_file(which);
}

struct Common {
  std::string program, target = "host", schedule = "default";
  std::vector<std::string> sets;
  void add(CLI::App* c, bool with_schedule = true) {
    c->add_option("program", program, "workload name or program .json file")->required();
    c->add_option("--target,-t", target, "target name (host, x86-64-avx2, x86-64-avx512, ...)");
    if (with_schedule)
      c->add_option("--schedule,-s", schedule, "schedule .json file, 'default' or 'plain'");
    c->add_option("--set", sets, "workload size NAME=VALUE (0 = symbolic)");
  }
};

void fill_random(std::vector<double>& v, std::mt19937& rng) {
  std::uniform_real_distribution<double> d(-1, 1);
  for (auto& x : v) x = d(rng);
}

int cmd_run(const Common& c, int reps) {
  const Program p = load_program(c.program, parse_sizes(c.sets));
  const Target t = parse_target(c.target);
  const Schedule s = pick_schedule(c.schedule, p, t);
  for (const auto& [sym, src] : p.symbols())
    throw Error("pto run: symbolic size '" + sym + "': give it a value with --set " + sym + "=N");
  std::mt19937 rng(42);
  std::vector<std::vector<float>> ins;
  std::vector<BufferRef> in_refs;
  for (const auto& in : p.inputs()) {
    if (in.dtype != DType::F32) throw Error("pto run: only f32 inputs are supported (input '" + in.name + "')");
    std::vector<double> v(static_cast<size_t>(static_numel(in.shape)));
    fill_random(v, rng);
    ins.emplace_back(v.begin(), v.end());
    std::vector<int64_t> shape;
    for (const Dim& d : in.shape) shape.push_back(d.value);
    in_refs.push_back({ins.back().data(), DType::F32, shape, {}});
  }
  auto make_outs = [&](std::vector<std::vector<float>>& store) {
    std::vector<BufferRef> refs;
    for (const auto& o : p.outputs()) {
      const Stage& st = p.stage(o);
      store.emplace_back(static_cast<size_t>(static_numel(st.shape)));
      std::vector<int64_t> shape;
      for (const Dim& d : st.shape) shape.push_back(d.value);
      refs.push_back({store.back().data(), st.dtype, shape, {}});
    }
    return refs;
  };
  std::vector<std::vector<float>> out, ref;
  const auto out_refs = make_outs(out), ref_refs = make_outs(ref);
  std::printf("compiling %s for %s ...\n", p.name().c_str(), t.name.c_str());
  const Kernel k(p, s, t);
  const Kernel reference(p, plain_schedule(p), t);
  k.run(in_refs, out_refs);
  reference.run(in_refs, ref_refs);
  double max_err = 0;
  for (size_t i = 0; i < out.size(); ++i)
    for (size_t j = 0; j < out[i].size(); ++j)
      max_err = std::max(max_err, std::fabs(double(out[i][j]) - ref[i][j]) / (1 + std::fabs(double(ref[i][j]))));
  const TimingStats ts = time_it([&] { k.run(in_refs, out_refs); }, 1, reps);
  const double gflops = program_flops(p) / (ts.median_ms * 1e6);
  std::printf("check vs plain schedule: max rel err %.2e %s\n", max_err, max_err < 1e-3 ? "OK" : "MISMATCH");
  std::printf("time: median %.3f ms (min %.3f, max %.3f, %d reps)  %.1f GFLOP/s\n", ts.median_ms, ts.min_ms,
              ts.max_ms, ts.reps, gflops);
  return max_err < 1e-3 ? 0 : 3;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"PTO: tensor compute definitions, schedules as data, autotuning and generators"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("pto ") + PTO_VERSION);

  app.add_subcommand("ops", "list operator types, one per line, with their kinds");
  app.add_subcommand("workloads", "list ready-made programs and their size parameters");

  Common show_c;
  bool show_json = false;
  auto* show = app.add_subcommand("show", "print a program");
  show_c.add(show, false);
  show->add_flag("--json", show_json, "print the program's JSON");

  Common sched_c;
  auto* sched = app.add_subcommand("schedule", "print a schedule (default: the target's default) as JSON");
  sched_c.add(sched);

  Common explain_c;
  auto* expl = app.add_subcommand("explain", "print the loop nest a schedule produces");
  explain_c.add(expl);

  Common run_c;
  int reps = 10;
  auto* run = app.add_subcommand("run", "JIT-compile, run on random data, check against the plain schedule, time");
  run_c.add(run);
  run->add_option("--reps", reps, "timed repetitions (at least)");

  std::vector<std::string> gen_programs, gen_sets;
  std::string gen_schedule = "default";
  pto::cli::GenOptions gen_o;
  auto* gen = app.add_subcommand("gen", "emit static libraries + headers (per target, or multi-target with --dispatch)");
  gen->add_option("program", gen_programs,
                  "workload names or program .json files; with one program the C function is the library name, "
                  "with several <library>_<program>");
  gen->add_option("--set", gen_sets, "workload size NAME=VALUE (0 = symbolic)");
  gen->add_option("--schedule,-s", gen_schedule, "schedule .json file, 'default' or 'plain' (one program)");
  gen_o.add(gen);

  CLI11_PARSE(app, argc, argv);
  try {
    if (app.got_subcommand("ops")) {
      for (const auto& op : ops::registry()) std::printf("%-22s %s\n", op.name.c_str(), std::string(to_string(op.kind)).c_str());
    } else if (app.got_subcommand("workloads")) {
      for (const auto& w : workloads()) {
        std::string sizes;
        for (const auto& [k, v] : w.defaults) sizes += (sizes.empty() ? "" : " ") + k + "=" + std::to_string(v);
        std::printf("%-20s %s  [%s]\n", w.name.c_str(), w.summary.c_str(), sizes.c_str());
      }
    } else if (app.got_subcommand("show")) {
      const Program p = load_program(show_c.program, parse_sizes(show_c.sets));
      std::cout << (show_json ? program_to_json_string(p, 2) + "\n" : p.str());
    } else if (app.got_subcommand("schedule")) {
      const Program p = load_program(sched_c.program, parse_sizes(sched_c.sets));
      const Target t = parse_target(sched_c.target);
      const Schedule s = pick_schedule(sched_c.schedule, p, t);
      validate(p, s, &t);
      std::cout << schedule_to_json_string(s, 2) << "\n";
    } else if (app.got_subcommand("explain")) {
      const Program p = load_program(explain_c.program, parse_sizes(explain_c.sets));
      const Target t = parse_target(explain_c.target);
      std::cout << explain(p, pick_schedule(explain_c.schedule, p, t), &t);
    } else if (app.got_subcommand("run")) {
      return cmd_run(run_c, reps);
    } else if (app.got_subcommand("gen")) {
      std::vector<KernelSpec> kernels;
      if (gen_programs.empty() && !gen_o.runtime_only) throw Error("pto gen: give at least one program");
      for (const auto& prog : gen_programs) {
        const Program p = load_program(prog, parse_sizes(gen_sets));
        kernels.push_back({gen_programs.size() == 1 && !gen_o.name.empty() ? gen_o.name : p.name(), p, {}});
      }
      if (gen_o.name.empty() && kernels.size() == 1) gen_o.name = kernels[0].name;
      if (gen_schedule != "default") {
        if (kernels.size() != 1) throw Error("pto gen: --schedule needs exactly one program; use --schedules for several");
        kernels[0].schedules["*"] = pick_schedule(gen_schedule, kernels[0].program, parse_target("host"));
      }
      pto::cli::run_gen(std::move(kernels), gen_o);
    }
  } catch (const pto::Error& e) {
    std::fprintf(stderr, "pto: error: %s\n", e.what());
    return 2;
  }
  return 0;
}
