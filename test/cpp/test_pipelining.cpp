// Pipelining directives (async, ring_buffer with hoisted storage) on the shapes
// the search space offers them: a producer computed at a consumer's tile or row
// loop. Each schedule is checked against the float64 interpreter; ring_buffer
// without hoisted storage is a validation error (Halide 21 rejects it).
#include <catch2/catch.hpp>

#include "Helpers.h"
#include "SpaceSamples.h"
#include "autotuner/SearchSpace.h"
#include "dsl/Workloads.h"
#include "schedules/RandomSchedule.h"
#include "schedules/ScheduleJson.h"
#include "schedules/Validate.h"

using namespace pto;
using namespace pto::test;
using Catch::Matchers::Contains;

TEST_CASE("pipelining: async and double-buffered producers at tile loops match float64", "[pipelining]") {
  const Target t = parse_target("host");
  std::mt19937 rng(1);
  Program p("pipe");
  const Tensor x = p.input("X", {64, 256});
  const Tensor e = p.define("e", {"i", "j"}, {64, 256}, unary(UnOp::Exp, x(var("i"), var("j"))), OpKind::Elementwise, "exp");
  p.output(p.define("Y", {"i", "j"}, {64, 256}, e(var("i"), var("j")) * 2.0, OpKind::Elementwise, "mul"));
  const auto in = random_inputs(p, rng);
  const auto want = interpret(p, in).at("Y");
  auto schedule = [](bool parallel, const std::string& e) {
    return schedule_from_json_string(
        std::string(R"({"schema": 1, "stages": {"Y": {"tile": {"i": [8], "j": [64]}, "order": ["i_o", "j_o", "i_i", "j_i"],)") +
        R"("vectorize": {"loop": "j_i", "width": 16})" + (parallel ? R"(, "parallel": ["i_o"])" : "") + "}, " +
        R"("e": {"vectorize": {"loop": "j", "width": 16}, )" + e + "}}}");
  };
  const std::vector<std::string> shapes = {
      R"("compute": {"at": "Y", "loop": "j_o"}, "pipeline": {"async": true})",
      R"("compute": {"at": "Y", "loop": "i_o"}, "pipeline": {"async": true})",
      R"("compute": {"at": "Y", "loop": "j_o"}, "store": "root", "pipeline": {"async": true, "ring_buffer": 2})",
      R"("compute": {"at": "Y", "loop": "j_o"}, "store": {"at": "Y", "loop": "i_o"}, "pipeline": {"async": true, "ring_buffer": 2})",
      R"("compute": {"at": "Y", "loop": "j_o"}, "store": {"at": "Y", "loop": "i_o"}, "pipeline": {"ring_buffer": 3})",
  };
  for (const auto& sh : shapes)
    for (const bool par : {false, true}) {
      const Schedule s = schedule(par, sh);
      INFO(schedule_to_json_string(s, -1));
      if (par && sh.find("\"store\": \"root\"") != std::string::npos) {
        // Storage shared by the threads of a parallel loop: a race, rejected.
        CHECK_THROWS_WITH(validate(p, s, &t), Contains("a race"));
        continue;
      }
      const Kernel k(p, s, t);
      // exp in f32 of inputs rounded to f32: a few ulp, well within 1e-6 relative.
      for (int rep = 0; rep < 5; ++rep) CHECK(tolerance_ratio(run_f32(k, in)[0], want, 1e-6, 1e-7) <= 1.0);
    }
  // Not on a reduction: Halide 21 computed wrong rows (softmax's row sum with ring_buffer 2).
  {
    const Program sm = make_workload("softmax", {{"R", 8}, {"C", 64}});
    Schedule s;
    s["Y_sum"].compute = {Placement::Kind::At, "Y", "i0"};
    s["Y_sum"].store = Placement{};
    s["Y_sum"].pipeline.ring_buffer = 2;
    CHECK_THROWS_WITH(validate(sm, s, &t), Contains("stage 'Y_sum': ring_buffer on a reduction"));
  }
  // A ring buffer needs its storage above its compute level.
  CHECK_THROWS_WITH(validate(p, schedule(false, R"("compute": {"at": "Y", "loop": "j_o"}, "pipeline": {"async": true, "ring_buffer": 2})"), &t),
                    Contains("stage 'e': ring_buffer 2 needs its storage hoisted out of the loop it is computed at") &&
                        Contains("Y.j_o"));
}

TEST_CASE("pipelining: random schedules with every computed-at stage async match float64", "[pipelining]") {
  const Target t = parse_target("host");
  std::mt19937 rng(2);
  for (const char* w : {"softmax", "layer_norm", "attention"}) {
    INFO(w);
    const Program p = std::string(w) == "attention" ? make_workload(w, {{"S", 32}, {"D", 16}})
                                                    : make_workload(w, {{"R", 16}, {"C", 64}});
    const auto in = random_inputs(p, rng);
    const auto want = interpret(p, in).at(p.outputs()[0]);
    std::mt19937_64 srng(7);
    RandomScheduleOptions ro;
    ro.p_narrow = 0;  // f32 throughout: the tolerance below
    int checked = 0;
    for (int trial = 0; trial < 12; ++trial) {
      Schedule s = random_schedule(p, t, srng, ro);
      bool any = false;
      for (auto& [n, ss] : s.stages)
        if (ss.compute.kind == Placement::Kind::At) ss.pipeline.async = any = true;
      if (!any) continue;
      validate(p, s, &t);  // async changes no placement rule
      INFO(schedule_to_json_string(s, -1));
      const Kernel k(p, s, t);
      // Row sums of at most 64 f32 terms and a few f32 ops per element (exp, division):
      // 64 * 2^-24 = 3.8e-6 relative, 1e-5 with margin; outputs are O(1) or smaller.
      CHECK(tolerance_ratio(run_f32(k, in)[0], want, 1e-5, 1e-6) <= 1.0);
      ++checked;
    }
    CHECK(checked > 0);
  }
}

TEST_CASE("pipelining: the search space offers async (double buffers opt-in), and they decode to valid schedules", "[pipelining][tuner]") {
  const Target t = parse_target("host");
  const Program p = make_workload("softmax", {{"R", 16}, {"C", 768}});
  const tuner::SearchSpace plain(p, t);
  for (const auto& k : plain.knobs())
    if (k.name == "pipeline") CHECK(k.values == std::vector<int64_t>{0, 1});  // async by default
  tuner::SearchSpaceOptions so;
  so.ring_buffers = true;
  const tuner::SearchSpace space(p, t, so);
  bool knob = false;
  for (const auto& k : space.knobs()) {
    knob |= k.name == "pipeline" && k.values == std::vector<int64_t>{0, 1, 2};
    if (k.name == "pipeline" && p.stage(k.stage).reduce) CHECK(k.values == std::vector<int64_t>{0, 1});  // never on reductions
  }
  CHECK(knob);
  int rings = 0;
  for (const Schedule& s : valid_samples(space, p, t, 200, 5))
    for (const auto& [n, ss] : s.stages) rings += ss.pipeline.ring_buffer > 0;
  CHECK(rings > 0);
}
