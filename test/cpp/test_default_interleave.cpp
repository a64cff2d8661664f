// The transcendental interleaving default (schedules/defaults/Defaults.cpp,
// interleave_transcendentals): a vectorized stage that evaluates exp, tanh,
// erf... (itself or through the producers inlined into it) takes up to 4
// vectors per step, fewer where its row holds fewer, and stays correct at
// odd, prime, below-a-vector and symbolic extents.
#include <catch2/catch.hpp>

#include "Helpers.h"
#include "dsl/ops/Ops.h"
#include "schedules/defaults/Defaults.h"

using namespace pto;
using namespace pto::test;

namespace {

int width(const Schedule& s, const std::string& stage) {
  const StageSchedule* ss = s.find(stage);
  return ss ? ss->loops.vector_width : -1;
}

Program unary_program(const Dim& rows, const Dim& cols, bool gelu) {
  Program p("u");
  const Tensor x = p.input("X", {rows, cols});
  p.output(gelu ? ops::gelu(x, false, "y") : ops::relu(ops::exp(x, "e"), "y"));
  return p;
}

Program softmax_program(const Dim& rows, const Dim& cols) {
  Program p("sm");
  p.output(ops::softmax(p.input("X", {rows, cols}), -1, "softmax"));
  return p;
}

}  // namespace

TEST_CASE("default schedules: vectorized transcendental stages take up to 4 vectors per step",
          "[defaults][interleave]") {
  const Target& t = host_target();
  const int lanes = t.vector_lanes(DType::F32);
  if (lanes < 2) return;
  // GELU itself; exp inlined into a relu (the root stage evaluates it).
  CHECK(width(default_schedule(unary_program(Dim(64), Dim(3072), true), t), "y") == 4 * lanes);
  CHECK(width(default_schedule(unary_program(Dim(64), Dim(3072), false), t), "y") == 4 * lanes);
  // Rows of 2 or 3 vectors: 2 vectors per step; below 2: one.
  CHECK(width(default_schedule(unary_program(Dim(64), Dim(3 * lanes + 1), true), t), "y") ==
        2 * lanes);
  CHECK(width(default_schedule(unary_program(Dim(64), Dim(lanes + 3), true), t), "y") == lanes);
  // A symbolic row: 4 vectors (guarded or specialized tails).
  CHECK(width(default_schedule(unary_program(Dim::symbol("M"), Dim::symbol("N"), true), t), "y") ==
        4 * lanes);
  // Softmax: its exp pass, not the normalization (a multiply by 1 / sum).
  const Schedule sm = default_schedule(softmax_program(Dim(8), Dim(1031)), t);
  CHECK(width(sm, "softmax_exp") == 4 * lanes);
  CHECK(width(sm, "softmax") == lanes);
  // No transcendental: one vector per step.
  Program p("r");
  p.output(ops::relu(p.input("X", {Dim(64), Dim(3072)}), "y"));
  CHECK(width(default_schedule(p, t), "y") == lanes);
}

TEST_CASE("interleaved transcendental stages match float64 at odd, prime and symbolic extents",
          "[defaults][interleave]") {
  std::mt19937 rng(5);
  const std::vector<std::pair<int64_t, int64_t>> sizes = {{1, 1},  {3, 7},  {5, 17},
                                                          {2, 33}, {7, 67}, {4, 1031}};
  // exp and erf in f32 are within a few ulp; softmax sums up to 1031 terms.
  const double rtol = 1e-5, atol = 1e-6;
  for (const int kind : {0, 1, 2}) {
    const auto make = [&](const Dim& r, const Dim& c) {
      return kind == 2 ? softmax_program(r, c) : unary_program(r, c, kind == 1);
    };
    const Program sp = make(Dim::symbol("M"), Dim::symbol("N"));
    const Kernel sk(sp, default_schedule(sp, host_target()), host_target());
    for (const auto& [m, n] : sizes) {
      INFO("program " << kind << " at " << m << "x" << n);
      const Program p = make(Dim(m), Dim(n));
      const Kernel k(p, default_schedule(p, host_target()), host_target());
      const std::map<std::string, HostTensor> in = {{"X", random_tensor({m, n}, rng, -4, 4)}};
      const HostTensor want = interpret(p, in).at(p.outputs()[0]);
      CHECK(tolerance_ratio(run_f32(k, in)[0], want, rtol, atol) <= 1.0);
      CHECK(tolerance_ratio(run_f32(sk, in)[0], want, rtol, atol) <= 1.0);
    }
  }
}
