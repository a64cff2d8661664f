// check_numerics (debug/CheckNumerics.h): the first stage that produces NaN or
// Inf is named with its index, operator and what it read there.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "Helpers.h"
#include "autotuner/TrialBuffers.h"
#include "debug/CheckNumerics.h"
#include "dsl/ops/Ops.h"
#include "schedules/defaults/Defaults.h"

using namespace pto;
using namespace pto::test;
using Catch::Matchers::Contains;

namespace {

debug::NonFinite locate(const Program& p, const Schedule& s,
                        std::vector<tuner::HostBuffer>& inputs) {
  std::vector<BufferRef> ins;
  for (auto& b : inputs) ins.push_back(b.ref());
  return debug::locate_nonfinite(p, s, host_target(), ins);
}

}  // namespace

TEST_CASE("check_numerics names the stage where a NaN first appears and what it read",
          "[check_numerics]") {
  // log(x - 0.5) is NaN where x < 0.5; the stages after it only carry it on.
  Program p("log_chain");
  const Tensor x = p.input("x", {6, 10});
  const Tensor d = ops::sub(x, ops::mul(x, x, "sq"), "d");    // x - x^2: >= 0 in [0, 1]
  const Tensor lg = ops::log(ops::sub(d, x, "shift"), "lg");  // log(-x^2): NaN where x != 0
  ops::reduce_sum(ops::relu(lg, "act"), {1}, false, "total");
  auto inputs = tuner::input_buffers(p, 7);
  for (float& v : inputs[0].f32) v = std::fabs(v) + 0.1f;
  const auto r = locate(p, default_schedule(p, host_target()), inputs);
  INFO(r.message());
  REQUIRE(r.found);
  CHECK(r.tensor == "lg");
  CHECK(r.op == "log");
  CHECK(r.value == "NaN");
  CHECK(r.index == std::vector<int64_t>{0, 0});
  REQUIRE(r.reads.size() == 1);
  CHECK_THAT(r.reads[0], Contains("shift(0, 0) = -"));
  CHECK_THAT(
      r.message(),
      Contains("stage 'lg' (log, elementwise) produced NaN at [0, 0]; it read shift(0, 0) = -"));
}

TEST_CASE("check_numerics finds the step where a sum overflows, and NaN inputs",
          "[check_numerics]") {
  Program p("big_sum");
  const Tensor x = p.input("x", {3, 50});
  ops::reduce_sum(ops::mul(x, x, "sq"), {1}, false, "total");
  auto inputs = tuner::input_buffers(p, 2);
  for (float& v : inputs[0].f32) v = 1e19f;  // each square 1e38: the sum passes FLT_MAX at the 4th
  const auto r = locate(p, default_schedule(p, host_target()), inputs);
  INFO(r.message());
  REQUIRE(r.found);
  CHECK(r.tensor == "total");
  CHECK(r.value == "inf");
  CHECK_THAT(r.step, Contains("at step") && Contains("past the largest f32"));

  inputs[0].f32[57] = std::nanf("");
  const auto in = locate(p, default_schedule(p, host_target()), inputs);
  CHECK(in.is_input);
  CHECK(in.message() == "check_numerics: input 'x' holds NaN at [1, 7] (before any stage runs)");
}

TEST_CASE("check_numerics keeps the schedule's precision: an f16 overflow is found",
          "[check_numerics]") {
  Program p("f16_sum");
  const Tensor x = p.input("x", {4, 300});
  ops::mul(ops::reduce_sum(x, {1}, false, "total"), ops::reduce_sum(x, {1}, false, "total2"),
           "out");
  auto inputs = tuner::input_buffers(p, 4);
  for (float& v : inputs[0].f32) v = 250.0f;  // 300 x 250 = 75000 > 65504
  Schedule s = default_schedule(p, host_target());
  s["total"].precision.storage = DType::F16;
  s["total"].precision.accumulate = DType::F16;
  const auto r = locate(p, s, inputs);
  INFO(r.message());
  REQUIRE(r.found);
  CHECK(r.tensor == "total");
  CHECK_THAT(r.step, Contains("past the largest"));
}
