// Partitioning a scheduled program into kernels (schedules/Partition.h):
// random programs (RandomProgram.h, with and without convolutions) under
// their default schedules, cut as finely as the schedule allows and run part
// after part, match the float64 interpreter; every stage with code is in
// exactly one part, each part reads only program inputs and earlier parts'
// outputs, ties (compute_at, compute_with, skip_padding) are never cut, and
// what is computed from constant inputs alone runs in a first, load-time part.
//
// Tolerance: the random-programs test's (1e-3 of max(1, |reference|)); a cut
// changes no arithmetic, so a wrong part moves values by O(1).
#include <catch2/catch.hpp>
#include <set>
#include <stdexcept>

#include "Helpers.h"
#include "RandomProgram.h"
#include "dsl/Analysis.h"
#include "dsl/Workloads.h"
#include "dsl/ops/Ops.h"
#include "schedules/Partition.h"
#include "schedules/defaults/Defaults.h"

using namespace pto;
using namespace pto::test;

namespace {

// Runs the parts in order, each on what the program inputs and earlier parts gave.
std::map<std::string, HostTensor> run_parts(const std::vector<Part>& parts,
                                            std::map<std::string, HostTensor> env) {
  for (const Part& part : parts) {
    for (const std::string& n : part.inputs)
      if (!env.count(n))
        throw std::runtime_error("part input '" + n + "' is computed by no earlier part");
    const Kernel k(part.program, part.schedule, host_target());
    const auto outs = run_f32(k, env);
    const auto names = part.program.outputs();
    if (names != part.outputs) {
      std::string msg = "a part's outputs are not its program's:";
      msg += " vs";
      for (const auto& n : part.outputs) msg += " " + n;
      throw std::runtime_error(msg);
    }
    for (size_t i = 0; i < names.size(); ++i) env[names[i]] = outs[i];
  }
  return env;
}

// Every stage with code that an output depends on in exactly one part.
void check_cover(const Program& p, const Schedule& s, const std::vector<Part>& parts) {
  std::map<std::string, int> owners;
  for (const Part& part : parts)
    for (const Stage& st : part.program.stages()) {
      const StageSchedule* ss = s.find(st.name);
      if (!ss || ss->compute.kind != Placement::Kind::Inline) ++owners[st.name];
    }
  const auto outs = p.outputs();
  for (const Stage& st : p.stages()) {
    const StageSchedule* ss = s.find(st.name);
    if (ss && ss->compute.kind == Placement::Kind::Inline) continue;
    const bool live = std::any_of(outs.begin(), outs.end(), [&](const std::string& o) {
      return o == st.name || p.reaches(st.name, o);
    });
    if (!live) continue;  // no output depends on it: computed nowhere
    INFO("stage " << st.name);
    CHECK(owners[st.name] == 1);
  }
}

std::string check_partitioned(uint64_t seed, bool convolutions) {
  RandomProgram r = RandomProgramBuilder(seed, convolutions).build();
  const std::string what = "seed " + std::to_string(seed) + ": " + r.str();
  try {
    const Schedule s = default_schedule(r.program, host_target());
    // Every input but the first fixed at load: the stages computed from them alone form a first
    // part.
    std::set<std::string> constants;
    for (size_t i = 1; i < r.program.inputs().size(); ++i)
      constants.insert(r.program.inputs()[i].name);
    const auto parts = partition(r.program, s, host_target(), {1, constants});
    check_cover(r.program, s, parts);
    for (size_t k = 0; k < parts.size(); ++k) {
      if (k > 0 && parts[k].at_load) return what + ": a load-time part after the first";
      if (parts[k].at_load)
        for (const std::string& in : parts[k].inputs)
          if (!constants.count(in))
            return what + ": the load-time part reads '" + in + "', not a constant";
    }
    const auto in = random_program_inputs(r, seed);
    const auto got = run_parts(parts, in);
    const auto want = interpret(r.program, in);
    for (const std::string& o : r.program.outputs()) {
      const HostTensor& w = want.at(o);
      double scale = 1;
      for (double v : w.data) scale = std::max(scale, std::fabs(v));
      if (!got.count(o)) return what + ": no part computes output '" + o + "'";
      const double ratio = tolerance_ratio(got.at(o), w, 1e-3, 1e-3 * scale);
      if (!(ratio <= 1.0))
        return what + ": output '" + o + "' differs from float64 (" + std::to_string(ratio) +
               "x the tolerance)";
    }
  } catch (const std::exception& e) {
    return what + ": " + e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("random programs cut into one-stage parts match float64",
          "[partition][random-programs]") {
  std::vector<std::string> failures;
  const int n = env_int("PTO_PARTITION_PROGRAMS", 40);  // seeds PTO_RANDOM_PROGRAM_SEED, +1, ...
  const int base = env_int("PTO_RANDOM_PROGRAM_SEED", 1);
  for (int i = base; i < base + n; ++i)
    for (const bool conv : {false, true})
      if (std::string f = check_partitioned(static_cast<uint64_t>(i), conv); !f.empty())
        failures.push_back(f);
  for (const auto& f : failures) UNSCOPED_INFO(f);
  CHECK(failures.empty());
}

TEST_CASE("partition keeps what a schedule ties together", "[partition]") {
  // A matmul whose relu epilogue computes the product at its tiles: one part.
  const Program mm = make_workload("matmul_bias_relu", {{"M", 24}, {"N", 32}, {"K", 16}});
  Schedule s = default_schedule(mm, host_target());
  const auto tied = [&](const Schedule& sched) {
    for (const auto& [name, ss] : sched.stages)
      if (ss.compute.kind == Placement::Kind::At) return true;
    return false;
  };
  if (tied(s)) CHECK(partition(mm, s, host_target(), {1}).size() == 1);
  // softmax over long rows: the exponentials in the loop of their sum (compute_with).
  Program p("softmax_rows");
  const Tensor x = p.input("x", {4, 4096});
  p.output(ops::softmax(x, 1));
  const Schedule sm = default_schedule(p, host_target());
  bool with = false;
  for (const auto& [name, ss] : sm.stages) with |= ss.compute_with.has_value();
  const auto parts = partition(p, sm, host_target(), {1});
  for (const Part& part : parts)
    for (const auto& [name, ss] : part.schedule.stages)
      if (ss.compute_with) CHECK(part.program.find_stage(ss.compute_with->stage));
  if (with) CHECK(parts.size() < p.stages().size());
  // One part when no cut is asked for: the program itself.
  const auto whole = partition(p, sm, host_target());
  REQUIRE(whole.size() == 1);
  CHECK(whole[0].program.same_as(p));
  CHECK(whole[0].outputs == p.outputs());
}

TEST_CASE("index_range follows index arithmetic; reads_outside names padded windows",
          "[partition][analysis]") {
  const std::map<std::string, int64_t> ext = {{"i", 8}, {"k", 3}};
  using R = std::optional<std::pair<int64_t, int64_t>>;
  CHECK(index_range(var("i") * 2 + var("k") - 1, ext) == R{{-1, 15}});
  CHECK(index_range(clamp(var("i") * 2 + var("k") - 1, 0, 9), ext) == R{{0, 9}});
  CHECK(index_range(var("i") / 3, ext) == R{{0, 2}});
  CHECK(index_range((var("i") - 4) / 3, ext) == R{{-2, 1}});
  CHECK(index_range(var("i") % 5, ext) == R{{0, 4}});
  CHECK(index_range(select(var("i") < 2, var("k"), var("i") + 1), ext) == R{{0, 8}});
  CHECK(!index_range(var("j"), ext));  // a variable without an extent
  Program p("windows");
  const Tensor x = p.input("x", {1, 2, 9, 9});
  const Tensor e = p.define("e", {"n", "c", "h", "w"}, {1, 2, 9, 9},
                            x(var("n"), var("c"), var("h"), var("w")) * 2);
  // A 3x3 max pool with padding 1 reads e through clamped indices: inside; a select-guarded read is
  // not.
  const Tensor m = ops::max_pool2d(e, {{3, 3}, {1, 1}, {1, 1}});
  CHECK(reads_outside(p, p.stage(m.name())).empty());
  const Expr h = var("h") - 1;
  const Tensor s =
      p.define("s", {"n", "c", "h", "w"}, {1, 2, 9, 9},
               select(h >= 0, e(var("n"), var("c"), h, var("w")), make_const(0, DType::F32)));
  CHECK(reads_outside(p, p.stage(s.name())) == std::vector<std::string>{"e"});
}
