// Opt levels (schedules/defaults/OptLevel.cpp): each level's loop nest is what
// the level says, and every level computes the program's result.
#include <catch2/catch.hpp>

#include "Helpers.h"
#include "dsl/Interpreter.h"
#include "dsl/Workloads.h"
#include "schedules/Explain.h"
#include "schedules/defaults/Defaults.h"

using namespace pto;
using namespace pto::test;
using Catch::Matchers::Contains;

namespace {

Schedule at(const Program& p, int level) {
  Schedule s = default_schedule(p, host_target());
  s.options.opt_level = level;
  return s;
}

}  // namespace

TEST_CASE("each opt level's loops are what the level says", "[opt_level]") {
  const Program p = make_workload("matmul_bias_relu", {{"M", 48}, {"N", 64}, {"K", 40}});
  const Target& t = host_target();
  const Schedule l0 = at_opt_level(p, at(p, 0), t), l1 = at_opt_level(p, at(p, 1), t),
                 l2 = at_opt_level(p, at(p, 2), t), l3 = at_opt_level(p, at(p, 3), t);
  // 0: plain loops, no entry; 2: the schedule itself.
  CHECK(l0.stages.empty());
  CHECK(l2 == at(p, 2));
  // 1: every stage at root, vectorized, parallel where it has the work; nothing else.
  for (const Stage& st : p.stages()) {
    const StageSchedule* ss = l1.find(st.name);
    REQUIRE(ss);
    CHECK(ss->compute.kind == Placement::Kind::Root);
    CHECK(ss->loops.vectorize == st.vars.back());
    CHECK(ss->accumulator_at.empty());
    CHECK(ss->cache.empty());
    CHECK(!ss->rfactor);
    CHECK(!ss->fast_math);
  }
  // 3: the schedule with fast_math on every stage.
  for (const Stage& st : p.stages()) CHECK(l3.find(st.name)->fast_math);
  CHECK_THAT(explain(p, at(p, 3), &t), Contains("fast-math"));
  CHECK_THAT(explain(p, at(p, 1), &t), Contains("vectorized"));
  CHECK_THAT(explain(p, at(p, 0), &t), !Contains("vectorized"));
  CHECK_THROWS_WITH(at_opt_level(p, at(p, 7), t), Contains("outside 0-3"));
}

TEST_CASE("every opt level computes the program's result", "[opt_level]") {
  std::mt19937 rng(17);
  for (const auto& [name, sizes] :
       std::vector<std::pair<std::string, std::map<std::string, int64_t>>>{
           {"matmul_bias_relu", {{"M", 33}, {"N", 70}, {"K", 29}}},
           {"softmax", {{"R", 7}, {"C", 300}}},
           {"layer_norm", {{"R", 9}, {"C", 130}}},
           {"conv2d", {{"N", 1}, {"C", 5}, {"H", 11}, {"W", 9}, {"O", 7}}}}) {
    const Program p = make_workload(name, sizes);
    const auto in = random_inputs(p, rng);
    const auto want = interpret(p, in);
    for (int level = 0; level <= 3; ++level) {
      INFO(name << " at opt level " << level);
      const auto got = run_f32(Kernel(p, at(p, level), host_target()), in);
      for (size_t o = 0; o < got.size(); ++o)
        CHECK(tolerance_ratio(got[o], want.at(p.outputs()[o]), 1e-4, 1e-5) <= 1);
    }
  }
}
