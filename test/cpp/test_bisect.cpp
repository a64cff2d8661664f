// Bisection (autotuner/Bisect.h) finds planted culprits: the stage, then the
// field of its schedule entry, that takes the output past the tolerance.
#include <catch2/catch.hpp>
#include <cmath>

#include "Helpers.h"
#include "autotuner/TrialBuffers.h"
#include "debug/Bisect.h"
#include "dsl/ops/Ops.h"
#include "schedules/defaults/Defaults.h"

using namespace pto;
using namespace pto::test;
using Catch::Matchers::Contains;

namespace {

debug::BisectResult run_bisect(const Program& p, const Schedule& s,
                               std::vector<tuner::HostBuffer> inputs) {
  auto outputs = tuner::output_buffers(p);
  std::vector<BufferRef> ins, outs;
  for (auto& b : inputs) ins.push_back(b.ref());
  for (auto& b : outputs) outs.push_back(b.ref());
  return debug::bisect(p, s, host_target(), ins, outs);
}

std::vector<std::string> culprits(const debug::BisectResult& r) {
  std::vector<std::string> c;
  for (const auto& f : r.fields)
    if (f.culprit(r.tolerance)) c.push_back(f.field);
  return c;
}

// A matmul with a ReLU epilogue, its rows summed over 2048 columns, scaled.
Program long_sum() {
  Program p("long_sum");
  const Tensor a = p.input("A", {24, 40});
  const Tensor b = p.input("B", {40, 2048});
  const Tensor r = ops::relu(ops::matmul(a, b, "mm"), "act");
  const Tensor s = ops::reduce_sum(r, {1}, false, "rowsum");
  ops::mul(s, s, "out");
  return p;
}

}  // namespace

TEST_CASE("bisect names an f16 accumulator planted on a long sum", "[bisect]") {
  const Program p = long_sum();
  Schedule s = default_schedule(p, host_target());
  s["rowsum"].precision.accumulate = DType::F16;
  const auto r = run_bisect(p, s, tuner::input_buffers(p, 3));
  INFO(r.report());
  CHECK(r.error_given > r.tolerance);
  CHECK(r.error_plain <= r.tolerance);
  CHECK(r.stage == "rowsum");
  CHECK(r.error_before <= r.tolerance);
  CHECK(r.error_after > r.tolerance);
  CHECK(culprits(r) == std::vector<std::string>{"precision"});
  CHECK_THAT(r.report(),
             Contains("stage 'rowsum'") && Contains("precision") && Contains("<- culprit"));
  // The same schedule without the planted directive is within the tolerance.
  s["rowsum"].precision = {};
  const auto clean = run_bisect(p, s, tuner::input_buffers(p, 3));
  CHECK(clean.stage.empty());
  CHECK_THAT(clean.verdict, Contains("no difference"));
}

TEST_CASE("bisect names fast_math planted on the stage that removes NaNs", "[bisect]") {
  Program p("clean_then_scale");
  const Tensor x = p.input("x", {300});
  const Expr i = var("i");
  const Tensor c = p.define("clean", {"i"}, {300}, select(x(i) == x(i), x(i), Expr(0.0)));
  const Tensor e = ops::exp(ops::mul(c, c), "e");
  ops::reduce_sum(e, {0}, false, "total");
  auto inputs = tuner::input_buffers(p, 5);
  for (size_t k = 0; k < 300; k += 7) inputs[0].f32[k] = std::nanf("");
  Schedule s = default_schedule(p, host_target());
  REQUIRE(!s["clean"].fast_math);
  s["clean"].fast_math = true;
  const auto r = run_bisect(p, s, inputs);
  INFO(r.report());
  CHECK(std::isinf(r.error_given));  // NaN where the reference has none
  CHECK(r.stage == "clean");
  CHECK(culprits(r) == std::vector<std::string>{"fast_math"});
}

TEST_CASE("bisect at opt level 3 finds fast_math on the stage it matters for", "[bisect]") {
  Program p("guarded");
  const Tensor x = p.input("x", {256});
  const Expr i = var("i");
  const Tensor c = p.define("clean", {"i"}, {256}, select(x(i) != x(i), Expr(1.0), x(i)));
  ops::mul(ops::relu(c, "r"), c, "out");
  auto inputs = tuner::input_buffers(p, 9);
  for (size_t k = 0; k < 256; k += 5) inputs[0].f32[k] = std::nanf("");
  Schedule s = default_schedule(p, host_target());
  s.options.opt_level = 3;
  const auto r = run_bisect(p, s, inputs);
  INFO(r.report());
  CHECK(r.error_given > r.tolerance);
  CHECK(r.stage == "clean");
  CHECK(culprits(r) == std::vector<std::string>{"fast_math"});
}

TEST_CASE("bisect reports bad buffers with the program's name", "[bisect][errors]") {
  const Program p = long_sum();
  auto inputs = tuner::input_buffers(p, 1);
  std::vector<BufferRef> ins;
  for (auto& b : inputs) ins.push_back(b.ref());
  CHECK_THROWS_WITH(debug::bisect(p, default_schedule(p, host_target()), host_target(), ins, {}),
                    Contains("0 output buffers for program 'long_sum' with 1 outputs"));
}
