// A symbolic size used twice by one input ([S, S]) binds from its first axis:
// regression test for lowering (found through pypto's symbolic signatures).
#include <catch2/catch.hpp>

#include "Helpers.h"
#include "dsl/ops/Ops.h"
#include "schedules/defaults/Defaults.h"

using namespace pto;
using namespace pto::test;

TEST_CASE("square symbolic inputs lower, run and reject non-square buffers", "[jit][symbolic]") {
  Program p("square");
  const Tensor a = p.input("A", {Dim::symbol("S"), Dim::symbol("S")});
  const Tensor b = p.input("B", {Dim::symbol("S"), Dim::symbol("S")});
  p.output(ops::matmul(a, b, "C"));
  const Target t = parse_target("host");
  const Kernel k(p, default_schedule(p, t), t);
  std::mt19937 rng(7);
  const std::map<std::string, HostTensor> in = {{"A", random_tensor({5, 5}, rng)}, {"B", random_tensor({5, 5}, rng)}};
  // f32 sums of 5 products in [-1, 1]: error <= 5 * 2^-24 * 5, far below 1e-5.
  CHECK(tolerance_ratio(run_f32(k, in)[0], interpret(p, in).at("C"), 1e-5, 1e-5) <= 1.0);
  std::vector<float> x(12), out(16);
  CHECK_THROWS_AS(k.run({{x.data(), DType::F32, {3, 4}, {}}, {x.data(), DType::F32, {3, 4}, {}}},
                        {{out.data(), DType::F32, {3, 3}, {}}}),
                  pto::Error);
}
