// Regression tests: schedules that random schedule generation
// (test_differential.cpp) found to crash, fail to compile or be accepted
// wrongly, kept here in their minimized form. Each valid one is checked
// against the float64 interpreter; each invalid one must be a ScheduleError
// from validation (never a Halide error or a crash).
#include <catch2/catch.hpp>
#include <cmath>

#include "Helpers.h"
#include "dsl/Workloads.h"
#include "dsl/ops/Ops.h"
#include "schedules/ScheduleJson.h"
#include "schedules/Validate.h"
#include "schedules/defaults/Defaults.h"

using namespace pto;
using namespace pto::test;
using Catch::Matchers::Contains;

namespace {

// Runs `json` on `p` and compares every output with the interpreter (f32 schedules:
// 1e-5 relative + 1e-5 absolute, as in test_jit.cpp).
void check_runs(const Program& p, const std::string& json) {
  const Target t = parse_target("host");
  std::mt19937 rng(3);
  const auto in = random_inputs(p, rng);
  const auto ref = interpret(p, in);
  const auto got = run_f32(Kernel(p, schedule_from_json_string(json), t), in);
  const auto outs = p.outputs();
  for (size_t i = 0; i < outs.size(); ++i)
    CHECK(tolerance_ratio(got[i], ref.at(outs[i]), 1e-5, 1e-5) <= 1.0);
}

}  // namespace

TEST_CASE("regression: two-level tile of a reduction variable", "[regression][jit]") {
  // Was: Halide "Can't split RVar k into Var k_t" (the intermediate loop was not known to be an
  // RVar).
  check_runs(make_workload("matmul", {{"M", 13}, {"N", 40}, {"K", 16}}),
             R"({"schema":1,"stages":{"C":{"update":{"tile":{"k":[16,8],"j":[2]},
                 "order":["j_o","k_o","k_m","k_i","i","j_i"],"vectorize":{"loop":"j_i","width":0}}}}})");
}

TEST_CASE("regression: two-level guarded tile with a vectorized inner loop", "[regression][jit]") {
  // Was: a segfault in the generated code (act computed per element of fc2_mm's k loop).
  check_runs(make_workload("mlp", {{"S", 5}, {"H", 16}, {"F", 24}}),
             R"({"schema":1,"stages":{"act":{"compute":{"at":"fc2_mm","loop":"k"},
                 "tile":{"i1":[16,8]},"vectorize":{"loop":"i1_i","width":0}}}})");
}

TEST_CASE("regression: vector lanes inside a guarded tile", "[regression][jit]") {
  // Was: a segfault (fc1_mm computed per element of fc1, its 24-wide tile
  // vectorized by 8 with guarded tails).
  check_runs(make_workload("mlp", {{"S", 5}, {"H", 16}, {"F", 24}}),
             R"({"schema":1,"stages":{"fc1":{"order":["i1","i0"]},
                 "fc1_mm":{"compute":{"at":"fc1","loop":"i0"},"tile":{"i1":[24]},"vectorize":{"loop":"i1_i","width":8}}}})");
  // ... with two tile levels and a reordered nest.
  check_runs(make_workload("mlp", {{"S", 5}, {"H", 16}, {"F", 24}}),
             R"({"schema":1,"stages":{"fc1":{"order":["i1","i0"]},
                 "fc1_mm":{"compute":{"at":"fc1","loop":"i0"},"tile":{"i1":[24,12]},"order":["i1_o","i1_m","i0","i1_i"],
                           "vectorize":{"loop":"i1_i","width":4}}}})");
}

TEST_CASE("vector lanes shift inwards inside a whole tile of a root stage", "[regression][jit]") {
  // One tile over all 17 columns (or 2 tiles of 20 over 40), 8 lanes: the
  // last vector of each tile starts inside it, over columns already stored.
  check_runs(
      make_workload("matmul_bias_relu", {{"M", 9}, {"N", 17}, {"K", 5}}),
      R"({"schema":1,"stages":{"out":{"tile":{"i1":[17]},"vectorize":{"loop":"i1_i","width":8}}}})");
  check_runs(
      make_workload("matmul_bias_relu", {{"M", 9}, {"N", 40}, {"K", 5}}),
      R"({"schema":1,"stages":{"out":{"tile":{"i1":[20],"i0":[3]},"order":["i1_o","i0_o","i0_i","i1_i"],
                 "vectorize":{"loop":"i1_i","width":8}}}})");
  // A tile that does not divide its dim is guarded: whole vectors only.
  const Target t = host_target();
  const Program mbr = make_workload("matmul_bias_relu", {{"M", 9}, {"N", 40}, {"K", 5}});
  CHECK_THROWS_WITH(
      validate(
          mbr,
          schedule_from_json_string(
              R"({"schema":1,"stages":{"out":{"tile":{"i1":[17]},"vectorize":{"loop":"i1_i","width":8}}}})"),
          &t),
      Contains("vector width 8 does not divide the extent 17 of tile loop 'i1_i'"));
}

TEST_CASE("regression: a producer at an update loop of a reduction with narrow storage",
          "[regression][jit]") {
  // fc2_mm stores bf16 while accumulating f32, so its reduction runs in a
  // helper Func; act must be computed in that helper's update loop (was: Halide
  // "no loop k_o" on the wrapper Func).
  const Program p = make_workload("mlp", {{"S", 5}, {"H", 16}, {"F", 24}});
  const Target t = parse_target("host");
  const Schedule s = schedule_from_json_string(
      R"({"schema":1,"stages":{"fc2_mm":{"precision":{"storage":"bf16","accumulate":"f32"},"update":{"tile":{"k":[8]}}},
          "act":{"compute":{"at":"fc2_mm","loop":"k_o"}}}})");
  std::mt19937 rng(4);
  const auto in = random_inputs(p, rng);
  const auto ref = interpret(p, in);
  double mm_max = 0;
  for (double v : ref.at("fc2_mm").data) mm_max = std::max(mm_max, std::fabs(v));
  // fc2 = fc2_mm + b2 with fc2_mm rounded once to bf16 (2^-8 relative); the
  // rest is f32 (1e-4 covers f32 sums of 24 terms of size <= 17).
  CHECK(tolerance_ratio(run_f32(Kernel(p, s, t), in)[0], ref.at("fc2"), 1e-5,
                        std::ldexp(mm_max, -8) + 1e-4) <= 1.0);
}

TEST_CASE("regression: invalid placements are schedule errors, not Halide errors",
          "[regression][schedule][errors]") {
  const Target t = parse_target("host");
  auto bad = [&](const Program& p, const std::string& json) {
    validate(p, schedule_from_json_string(json), &t);
  };
  const Program sm = make_workload("softmax", {{"R", 5}, {"C", 37}});
  // Was: Halide "stored outside the parallel loop ... potential race condition".
  CHECK_THROWS_WITH(bad(sm, R"({"schema":1,"stages":{"Y":{"tile":{"i0":[2]},"parallel":["i0_o"]},
                                "Y_sum":{"compute":{"at":"Y","loop":"i0_i"},"store":"root"}}})"),
                    Contains("stage 'Y_sum': stored outside but computed inside the parallel or "
                             "vectorized loop 'Y.i0_o'"));
  const Program ln = make_workload("layer_norm", {{"R", 5}, {"C", 33}});
  // ... and the lanes of a split vectorized loop between storage and computation.
  CHECK_THROWS_WITH(
      bad(ln,
          R"({"schema":1,"stages":{"Y":{"tile":{"i0":[4,2]},"vectorize":{"loop":"i0_o","width":4}},
                                "Y_ss":{"compute":{"at":"Y","loop":"i0_m"},"store":"root"}}})"),
      Contains("'Y.i0_o (vector lanes)'"));
  // Storage inside the computation, or at a stage that does not enclose it.
  CHECK_THROWS_WITH(bad(ln, R"({"schema":1,"stages":{"Y":{"tile":{"i0":[4,2]}},
                                "Y_ss":{"compute":{"at":"Y","loop":"i0_o"},"store":{"at":"Y","loop":"i0_m"}}}})"),
                    Contains("does not enclose where it is computed; valid: \"root\", Y.i0_o"));
  CHECK_THROWS_WITH(bad(ln, R"({"schema":1,"stages":{"Y_ss":{"store":{"at":"Y","loop":"i0"}}}})"),
                    Contains("storage can only be hoisted out of a compute_at"));
  // A producer of a reduction lives in its update: a loop of the pure part only is no place.
  CHECK_THROWS_WITH(bad(sm, R"({"schema":1,"stages":{"Y_sum":{"tile":{"i0":[2]}},
                                "Y_exp":{"compute":{"at":"Y_sum","loop":"i0_o"}}}})"),
                    Contains("which has no such loop; its loops (of its update): i0, r"));
  // Y_exp is read by Y_sum and by Y: computing it inside Y_sum leaves Y without it.
  CHECK_THROWS_WITH(
      bad(sm, R"({"schema":1,"stages":{"Y_exp":{"compute":{"at":"Y_sum","loop":"r"}}}})"),
      Contains("stage 'Y_exp': computed at 'Y_sum.r', but 'Y' also reads it"));
  // Was: "Output buffer Y is accessed at -1": an unroll factor past a root dim's extent.
  const Program conv = make_workload("conv2d", {{"N", 1}, {"C", 3}, {"H", 8}, {"W", 10}, {"O", 5}});
  CHECK_THROWS_WITH(bad(conv, R"({"schema":1,"stages":{"Y":{"unroll":{"i0":2}}}})"),
                    Contains("stage 'Y': unroll factor 2 of 'i0' exceeds its extent 1"));
  // Was (with factor 3): Halide "Allocation probs_sum__acc has a size greater than 2^31: -16".
  const Program att = make_workload("attention", {{"S", 13}, {"D", 8}});
  CHECK_THROWS_WITH(bad(att, R"({"schema":1,"stages":{"probs":{"compute":"inline"},
                                 "O":{"update":{"tile":{"k":[4,2]}}},
                                 "probs_sum":{"accumulator_at":"i0_i","compute":{"at":"O","loop":"k_m"},"tile":{"i0":[4]},"unroll":{"i0_i":2}}}})"),
                    Contains("accumulator_at loop 'i0_i' is vectorized or unrolled by a factor"));
  // Was: "Input buffer W1 is accessed at 25, which is beyond the max (23)".
  const Program mlp = make_workload("mlp", {{"S", 5}, {"H", 16}, {"F", 24}});
  CHECK_THROWS_WITH(
      bad(mlp, R"({"schema":1,"stages":{"fc1":{"tile":{"i0":[2],"i1":[13]},"unroll":{"i1_i":3}},
                                 "fc1_mm":{"compute":{"at":"fc1","loop":"i1_i"}}}})"),
      Contains("unroll factor 3 does not divide the extent 13 of tile loop 'i1_i'"));
  // Was: Halide "Couldn't find a matching Realize node for Hoisted storage probs_sum".
  CHECK_THROWS_WITH(
      bad(att, R"({"schema":1,"stages":{"O":{"tile":{"j":[2]},"update":{"tile":{"j":[4]}}},
                                 "probs":{"compute":"inline"},
                                 "probs_sum":{"compute":{"at":"O","loop":"j_i"},"store":{"at":"O","loop":"j_o"}}}})"),
      Contains("whose pure definition has a loop of the same name"));
  // Was: "Allocation mm has a size greater than 2^31: -120" (mm at a loop biased unrolls by 4).
  CHECK_THROWS_WITH(
      bad(make_workload("matmul_bias_relu", {{"M", 13}, {"N", 40}, {"K", 16}}),
          R"({"schema":1,"stages":{"biased":{"compute":{"at":"out","loop":"i0_i"},"tile":{"i0":[8]},"unroll":{"i0_i":4}},
                            "mm":{"compute":{"at":"biased","loop":"i0_i"}},"out":{"tile":{"i0":[8]}}}})"),
      Contains("which that stage splits by an unroll factor or vector width"));
  // Was: "Input buffer X is accessed at 5, which is beyond the max (4)".
  CHECK_THROWS_WITH(
      bad(ln, R"({"schema":1,"stages":{"Y_sum":{"cache":[{"loop":"i0_i","tensor":"X"}],
                                "pipeline":{"prefetch":[{"distance":3,"loop":"i0_i","tensor":"X"}]},
                                "update":{"tile":{"i0":[2]},"vectorize":{"loop":"i0_i","width":0}}}}})"),
      Contains("prefetch of 'X', which it also caches"));
  // A consumer that is inline has no loops.
  const Program mbr = make_workload("matmul_bias_relu", {{"M", 8}, {"N", 16}, {"K", 4}});
  // Was: a segfault: 16 lanes over a guarded tile of 40 (here: of 8).
  CHECK_THROWS_WITH(
      bad(mbr,
          R"({"schema":1,"stages":{"mm":{"update":{"tile":{"j":[8]},"vectorize":{"loop":"j_i","width":16}}}}})"),
      Contains("vector width 16 does not divide the extent 8 of tile loop 'j_i'"));
  CHECK_THROWS_WITH(
      bad(mbr, R"({"schema":1,"stages":{"mm":{"update":{"vectorize":{"loop":"k","width":4}}}}})"),
      Contains("vectorize on reduction loop 'k' would race"));
  CHECK_THROWS_WITH(bad(mbr, R"({"schema":1,"stages":{"biased":{"compute":"inline"},
                                 "mm":{"compute":{"at":"biased","loop":"i0"}}}})"),
                    Contains("which is inline and so has no loops"));
}

TEST_CASE("regression: storage hoisted to root does not compute outside the tensor",
          "[regression][jit]") {
  // Was: "Input buffer B is accessed at -1": `store` lowered to Halide's
  // store_at, whose sliding window computed mm one column early. `store` now
  // only places the allocation (hoist_storage).
  check_runs(make_workload("matmul_bias_relu", {{"M", 13}, {"N", 40}, {"K", 16}}),
             R"({"schema":1,"stages":{"biased":{"compute":{"at":"out","loop":"i0"}},
                 "mm":{"compute":{"at":"biased","loop":"i1"},"store":"root"},
                 "out":{"order":["i1_o","i1_i","i0"],"tile":{"i1":[2]}}}})");
}

TEST_CASE("regression: an output's update vectorized in its own buffer, at a misaligned address",
          "[regression][jit]") {
  // A row sum whose update runs over rows in vectors with the reduction
  // outside reads its own values as vectors, which Halide loads as aligned
  // as its own allocations: in a caller's buffer 4 bytes off a vector
  // boundary that crashed (found by opt level 1 on (x @ w).sum(axis=1)).
  // The output is now computed in a Func of its own and copied out.
  Program p("row_sum");
  const Tensor x = p.input("X", {21, 50});
  p.define_reduce("S", {"i"}, {21}, ReduceOp::Sum, {{"r", 50}}, x(var("i"), var("r")));
  const Schedule s =
      schedule_from_json_string(R"({"schema": 1, "stages": {"S": {"update": {"order": ["r", "i"],
                                   "vectorize": {"loop": "i", "width": 16}}}}})");
  const Kernel k(p, s, parse_target("host"));
  std::vector<float> in(21 * 50), store(21 + 32, -1.0f);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i % 7) - 3.0f;
  for (size_t off = 1; off < 16; off += 5) {  // 4, 24 and 44 bytes past the allocation
    float* out = store.data() + off;
    k.run({{in.data(), DType::F32, {21, 50}, {}}}, {{out, DType::F32, {21}, {}}});
    for (int i = 0; i < 21; ++i) {
      double want = 0;
      for (int r = 0; r < 50; ++r) want += in[static_cast<size_t>(i * 50 + r)];
      CHECK(out[i] == Approx(want));
    }
  }
}

TEST_CASE("regression: an infinite literal inlined into arithmetic keeps its value",
          "[regression][jit][ieee]") {
  // Was: a causal mask select(j <= i, 0, -inf) inlined into scores + mask and
  // a row max: LLVM's no-infs flag made `x + -inf` poison once the select was
  // hoisted out of the add, so no position was masked (ONNX Attention with
  // is_causal gave the unmasked average). Stages whose inlined definition
  // holds an infinite literal are now lowered strict.
  Program p("masked_softmax");
  const Tensor x = p.input("x", {5, 7});
  const Tensor mask = p.define("mask", {"i", "j"}, {5, 7},
                               select(var("j") <= var("i") + 1, make_const(0, DType::F32),
                                      make_const(-INFINITY, DType::F32)),
                               OpKind::Elementwise, "mask");
  const Tensor s = ops::add(x, mask, "scores");
  p.output(ops::softmax(s, -1, "probs"));
  p.output(ops::reduce_max(s, {1}, false, "row_max"));
  const Target t = parse_target("host");
  std::mt19937 rng(3);
  const auto in = random_inputs(p, rng);
  const auto ref = interpret(p, in);
  const Schedule sched = default_schedule(p, t);
  REQUIRE(sched.find("mask"));
  CHECK(sched.find("mask")->compute.kind == Placement::Kind::Inline);
  const auto got = run_f32(Kernel(p, sched, t), in);
  CHECK(tolerance_ratio(got[0], ref.at("probs"), 1e-5, 1e-6) <= 1.0);
  CHECK(tolerance_ratio(got[1], ref.at("row_max"), 1e-6, 1e-6) <= 1.0);
  // The masked probabilities are exactly 0.
  for (int64_t i = 0; i < 5; ++i)
    for (int64_t j = i + 2; j < 7; ++j) CHECK(got[0].data[static_cast<size_t>(i * 7 + j)] == 0.0);
}

TEST_CASE("regression: a program without outputs is an error, not a crash", "[regression][jit]") {
  // Was: a segfault in Halide (a pipeline of no functions); a program of inputs alone has no
  // outputs.
  Program p("empty");
  p.input("x", {4});
  CHECK_THROWS_WITH(Kernel(p, Schedule{}, parse_target("host")), Contains("it has no outputs"));
}
