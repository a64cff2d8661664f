// The default schedule of a materialized transpose (schedules/defaults/
// DataMovement.cpp): lanes x lanes blocks, exact against the float64
// interpreter at sizes that are and are not multiples of the block (the
// shifted last block recomputes a few values), for 2-D and 3-D permutations,
// and the rule stays off where it does not apply.
#include <catch2/catch.hpp>

#include "Helpers.h"
#include "dsl/Interpreter.h"
#include "dsl/ops/Ops.h"
#include "schedules/LoopNest.h"
#include "schedules/defaults/Defaults.h"

using namespace pto;
using namespace pto::test;

namespace {
Program transpose_program(const std::vector<int64_t>& shape, const std::vector<int>& perm) {
  Program p("transpose");
  Shape s;
  for (const int64_t e : shape) s.push_back(Dim(e));
  p.output(ops::transpose(p.input("X", s), perm, "Y"));
  return p;
}
}  // namespace

TEST_CASE("default transposes run in vector blocks and match the interpreter exactly", "[defaults][movement]") {
  const Target t = parse_target("host");
  const int lanes = t.vector_lanes(DType::F32);
  // `walked`: the extent of the output dim that the input's innermost index
  // walks (0 when it is the output's innermost: no transpose); `inner`: the
  // output's innermost extent. Blocks need both >= lanes.
  struct C {
    std::vector<int64_t> shape;
    std::vector<int> perm;
    int64_t walked, inner;
  };
  const std::vector<C> cases = {
      {{64, 48}, {1, 0}, 48, 64},        // whole blocks
      {{37, 129}, {1, 0}, 129, 37},      // both extents with a partial last block
      {{5, 40, 33}, {2, 0, 1}, 33, 40},  // the innermost axis moves to the front
      {{3, 20, 50}, {0, 2, 1}, 50, 20},  // a batch of transposes
      {{7, 300}, {1, 0}, 300, 7},        // 7 columns out: narrower than a block
      {{20, 30, 40}, {1, 0, 2}, 0, 40},  // the innermost axis stays: a row copy
  };
  for (const C& c : cases) {
    CAPTURE(c.shape, c.perm);
    const Program p = transpose_program(c.shape, c.perm);
    const Schedule s = default_schedule(p, t);
    const Stage& y = p.stage("Y");
    const LoopSchedule& ls = s.find("Y")->loops;
    const bool blocked = ls.vectorize == inner_loop(y.vars.back()) && ls.unroll.size() == 1;
    CHECK(blocked == (c.walked >= lanes && c.inner >= lanes));
    std::mt19937 rng(3);
    const std::map<std::string, HostTensor> in = {{"X", random_tensor(c.shape, rng)}};
    const Kernel k(p, s, t);
    // A copy: the only difference from float64 is the f32 rounding of the input (2^-24 relative).
    CHECK(tolerance_ratio(run_f32(k, in)[0], interpret(p, in).at("Y"), 6e-8, 0) <= 1.0);
  }
}

// Symbolic extents: the transpose keeps its blocks (guarded tails, and the
// specialized version with shifted ones), and a root stage parallel over a
// whole symbolic dim runs one block of it per core (CoreBlocks in
// directives/Loops.h); both are exact at sizes below, at and past a block
// and past the core count.
TEST_CASE("symbolic transposes and symbolic parallel dims are exact at every size",
          "[defaults][movement][symbolic]") {
  const Target t = parse_target("host");
  Program p("dyn_transpose_bias_relu");
  const Tensor x = p.input("X", {Dim::symbol("R"), Dim::symbol("C")});
  const Tensor b = p.input("b", {Dim::symbol("C")});
  p.output(ops::transpose(x, {1, 0}, "T"));
  p.output(ops::relu(ops::add(x, b, "xb"), "Y"));
  const Schedule s = default_schedule(p, t);
  const Stage& ts = p.stage("T");
  CHECK(s.find("T")->loops.vectorize == inner_loop(ts.vars.back()));  // blocked
  CHECK(s.find("Y")->loops.parallel == std::vector<std::string>{p.stage("Y").vars[0]});
  const Kernel k(p, s, t);
  std::mt19937 rng(5);
  for (const auto& [r, c] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 1}, {1, 37}, {3, 2}, {17, 16}, {16, 17}, {33, 129}, {130, 48}, {1031, 7}}) {
    CAPTURE(r, c);
    const std::map<std::string, HostTensor> in = {{"X", random_tensor({r, c}, rng)},
                                                  {"b", random_tensor({c}, rng)}};
    const auto got = run_f32(k, in);
    const auto want = interpret(p, in);
    // A copy and one f32 add: within 2 roundings of float64.
    CHECK(tolerance_ratio(got[0], want.at("T"), 6e-8, 0) <= 1.0);
    CHECK(tolerance_ratio(got[1], want.at("Y"), 1.2e-7, 1e-7) <= 1.0);
  }
}
