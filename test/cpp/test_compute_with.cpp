// The compute_with directive (ComputeWith in schedules/Schedule.h): an
// elementwise stage stored in the loop of the reduction that reads it. Every
// numeric check compares with the float64 interpreter; the error cases check
// that validation names the stages, the value and what is valid; the
// defaults use it for softmax rows past half the L1.
#include <catch2/catch.hpp>
#include <cmath>

#include "Helpers.h"
#include "dsl/ops/Ops.h"
#include "schedules/Explain.h"
#include "schedules/Validate.h"
#include "schedules/defaults/Defaults.h"

using namespace pto;
using namespace pto::test;
using Catch::Matchers::Contains;

namespace {

// E(i, j) = value(X(i, j)); S(i) = op over r of E(i, r) [* W(r)];
// Y(i, j) = E(i, j) + S(i) (Y reads E as stored, S through its lanes).
Program stat_program(ReduceOp op, int64_t rows, int64_t n, bool weighted = false) {
  Program p("stat");
  const Tensor x = p.input("X", {rows, n});
  const Expr xv = x(var("i"), var("j"));
  // Products of n values near 1 stay in range; the others see exp's range.
  const Expr value = op == ReduceOp::Prod ? 1.0 + xv * (1.0 / static_cast<double>(n)) : unary(UnOp::Exp, xv);
  const Tensor e = p.define("E", {"i", "j"}, {rows, n}, value, OpKind::Elementwise, "exp");
  Expr body = e(var("i"), var("r"));
  if (weighted) body = body * p.input("W", {n})(var("r"));
  const Tensor s = p.define_reduce("S", {"i"}, {rows}, op, {{"r", Dim(n)}}, body);
  p.output(p.define("Y", {"i", "j"}, {rows, n}, e(var("i"), var("j")) + s(var("i")), OpKind::Elementwise, "add"));
  return p;
}

// Y per row (its j vectorized), E computed with S in `lanes` lanes, both at
// Y's row loop or at root.
Schedule fused(int lanes, bool root = false) {
  Schedule s;
  s["Y"].loops.vectorize = "j";
  s["Y"].loops.vector_width = 16;
  const Placement at = root ? Placement{} : Placement{Placement::Kind::At, "Y", "i"};
  s["E"].compute = at;
  s["E"].compute_with = ComputeWith{"S", lanes};
  s["S"].compute = at;
  return s;
}

double check(const Program& p, const Schedule& s, const std::map<std::string, HostTensor>& in, double rtol,
             double atol) {
  const Kernel k(p, s, host_target());
  const auto got = run_f32(k, in);
  return tolerance_ratio(got[0], interpret(p, in).at(p.outputs()[0]), rtol, atol);
}

}  // namespace

TEST_CASE("compute_with: sum, prod, min, max over whole and partial steps match float64", "[compute_with]") {
  std::mt19937 rng(21);
  for (const ReduceOp op : {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max})
    for (const int64_t n : {16, 96, 100, 1000, 1031})
      for (const int lanes : {16, 32, 64, 128}) {
        if (lanes > n) continue;
        for (const bool root : {false, true})
          for (const bool weighted : {false, true}) {
            INFO(to_string(op) << " n " << n << " lanes " << lanes << (root ? " root" : " per row")
                               << (weighted ? " weighted" : ""));
            const Program p = stat_program(op, 3, n, weighted);
            std::map<std::string, HostTensor> in{{"X", random_tensor({3, n}, rng, -2, 2)}};
            if (weighted) in["W"] = random_tensor({n}, rng);
            // f32 exp: a few ulps (4e-7 relative, 3e-6 absolute on values up
            // to e^2, which E + S may cancel to near 0); a reassociated f32 sum
            // of n terms up to e^2 (times |W| <= 1): n * 2^-24 * n * 7.4
            // absolute (0.47 at 1031, against sums of ~1000); a product of n
            // factors in [1 - 2/n, 1 + 2/n]: 2 n 2^-24 relative; min and max
            // exact.
            const double nd = static_cast<double>(n);
            const double rtol = op == ReduceOp::Prod ? 2 * nd * 6e-8 : 4e-7;
            const double atol = op == ReduceOp::Sum ? nd * nd * 6e-8 * 7.4 : 3e-6;
            CHECK(check(p, fused(lanes, root), in, rtol, atol) <= 1.0);
          }
      }
}

// IEEE semantics: a min / max runs over order keys in its partials and
// lanes (backends/Ieee.h), so a NaN in any step or the rest of the row wins;
// an Inf is an ordinary extreme (a sum's too). Plain loops and fused, exact
// where float64 gives NaN or Inf, else the tolerances above.
TEST_CASE("compute_with: rows with NaN or Inf reduce as float64 does", "[compute_with][ieee]") {
  for (const ReduceOp op : {ReduceOp::Sum, ReduceOp::Min, ReduceOp::Max})
    for (const int64_t n : {96, 1031})
      for (const int64_t at : {int64_t{0}, n / 2, n - 1}) {
        INFO(to_string(op) << " n " << n << " NaN at " << at);
        const Program p = stat_program(op, 3, n);
        std::mt19937 rng(22);
        HostTensor x = random_tensor({3, n}, rng, -2, 2);
        x.data[static_cast<size_t>(n + at)] = NAN;                                          // row 1
        x.data[static_cast<size_t>(2 * n + at)] = std::numeric_limits<double>::infinity();  // row 2
        for (const bool plain : {true, false}) {
          INFO((plain ? "plain" : "fused"));
          const auto got =
              run_f32(Kernel(p, plain ? Schedule{} : fused(32), host_target()), {{"X", x}})[0];
          const auto want = interpret(p, {{"X", x}}).at("Y");
          for (int64_t i = 0; i < 3 * n; ++i) {
            INFO("at " << i);
            if (std::isnan(want.data[i]))
              REQUIRE(std::isnan(got.data[i]));
            else if (std::isinf(want.data[i]))
              REQUIRE(got.data[i] == want.data[i]);
            else
              REQUIRE(std::abs(got.data[i] - want.data[i]) <= 4e-7 * std::abs(want.data[i]) + 3e-6);
          }
        }
      }
}

TEST_CASE("compute_with: softmax rows, NaN and -inf inputs as numpy", "[compute_with]") {
  for (const int64_t n : {1031, 50257}) {
    Program p("sm");
    p.output(ops::softmax(p.input("X", {Dim(4), Dim(n)}), -1, "y"));
    Schedule s;
    s["y"].loops.vectorize = "i1";
    s["y"].loops.vector_width = 16;
    const Placement at{Placement::Kind::At, "y", "i0"};
    s["y_max"].compute = at;
    s["y_exp"].compute = at;
    s["y_exp"].compute_with = ComputeWith{"y_sum", 64};
    s["y_sum"].compute = at;
    std::mt19937 rng(22);
    HostTensor x = random_tensor({4, n}, rng, -4, 4);
    x.data[static_cast<size_t>(n) + 7] = NAN;         // row 1: all NaN
    x.data[2 * static_cast<size_t>(n) + 3] = -INFINITY;  // row 2: a 0 there
    const Kernel k(p, s, host_target());
    const HostTensor got = run_f32(k, {{"X", x}})[0];
    const HostTensor want = interpret(p, {{"X", x}}).at("y");
    // Outputs ~1/n: the f32 row sum of n terms, n 2^-24 relative (3e-3 at 50257).
    CHECK(tolerance_ratio(got, want, static_cast<double>(n) * 6e-8, 1e-9) <= 1.0);
    for (int64_t j = 0; j < n; ++j) CHECK(std::isnan(got.data[static_cast<size_t>(n + j)]));
    CHECK(got.data[2 * static_cast<size_t>(n) + 3] == 0.0);
  }
}

TEST_CASE("compute_with: the defaults fuse softmax's exp and sum over rows past half the L1", "[compute_with][defaults]") {
  const Target& t = host_target();
  const auto fused_exp = [&](int64_t rows, int64_t n) {
    Program p("sm");
    p.output(ops::softmax(p.input("X", {Dim(rows), Dim(n)}), -1, "y"));
    const Schedule s = default_schedule(p, t);
    const StageSchedule* e = s.find("y_exp");
    if (!e || !e->compute_with) return 0;
    CHECK(e->compute_with->stage == "y_sum");
    CHECK(!s.find("y_sum")->rfactor);  // the fused loop's partials replace it
    CHECK_THAT(explain(p, s, &t), Contains("computed with y_sum"));
    return e->compute_with->lanes;
  };
  const int lanes = t.vector_lanes(DType::F32);
  const int64_t past_l1 = t.l1_bytes / 4;  // a row of f32 twice half the L1
  CHECK(fused_exp(8, 50257) == 4 * lanes);  // exp: at most 4 vectors
  CHECK(fused_exp(1, past_l1 + 1) == 4 * lanes);
  CHECK(fused_exp(64, 1000) == 0);
  CHECK(fused_exp(4096, 64) == 0);
}

TEST_CASE("compute_with: validation errors name the stages, the value and what is valid", "[compute_with][errors]") {
  const Target& t = host_target();
  const Program p = stat_program(ReduceOp::Sum, 3, 100);
  auto fails = [&](const Program& prog, const Schedule& s, const std::string& text) {
    INFO(text);
    CHECK_THROWS_AS(validate(prog, s, &t), ScheduleError);
    CHECK_THROWS_WITH(validate(prog, s, &t), Contains(text));
  };
  CHECK_NOTHROW(validate(p, fused(32), &t));
  Schedule s = fused(32);
  s["E"].compute_with->stage = "Y";
  fails(p, s, "stage 'E': compute_with 'Y' needs a sum, prod, min or max; 'Y' is not a reduction");
  s = fused(32);
  s["E"].compute_with->stage = "nope";
  fails(p, s, "compute_with 'nope' names no stage");
  s = fused(24);
  fails(p, s, "lanes 24 must be 2 to 256, at most the row's 100 points and whole vectors of");
  s = fused(128);
  fails(p, s, "at most the row's 100 points");
  s = fused(32);
  s["S"].rfactor = RFactor{"r", 16};
  fails(p, s, "runs 'S' in the same loop, so 'S' must be computed where 'E' is");
  s = fused(32, true);
  s["S"].compute = Placement{Placement::Kind::At, "Y", "i"};
  fails(p, s, "'S' must be computed where 'E' is (\"root\") with no loop directives of its own");
  s = fused(32);
  s["E"].loops.vectorize = "j";
  s["E"].loops.vector_width = 16;
  fails(p, s, "schedules the fused loop itself");
  s = fused(32);
  s["E"].compute = Placement{Placement::Kind::Inline, "", ""};
  s["S"].compute = s["E"].compute;
  fails(p, s, "it cannot be inline");

  // A reduction that reads the stage transposed, a symbolic row, an output.
  Program tr("tr");
  const Tensor x = tr.input("X", {64, 64});
  const Tensor e = tr.define("E", {"i", "j"}, {64, 64}, unary(UnOp::Exp, x(var("i"), var("j"))), OpKind::Elementwise);
  const Tensor sm = tr.define_reduce("S", {"i"}, {64}, ReduceOp::Sum, {{"r", Dim(64)}}, e(var("r"), var("i")));
  tr.output(tr.define("Y", {"i", "j"}, {64, 64}, e(var("i"), var("j")) + sm(var("i")), OpKind::Elementwise));
  fails(tr, fused(32), "'S' must read 'E' at (i, r) and nowhere else");
  Program sym("sym");
  const Tensor xs = sym.input("X", {Dim(4), Dim::symbol("N")});
  const Tensor es = sym.define("E", {"i", "j"}, {Dim(4), Dim::symbol("N")}, unary(UnOp::Exp, xs(var("i"), var("j"))),
                               OpKind::Elementwise);
  const Tensor ss = sym.define_reduce("S", {"i"}, {Dim(4)}, ReduceOp::Sum, {{"r", Dim::symbol("N")}}, es(var("i"), var("r")));
  sym.output(sym.define("Y", {"i", "j"}, {Dim(4), Dim::symbol("N")}, es(var("i"), var("j")) + ss(var("i")),
                        OpKind::Elementwise));
  fails(sym, fused(32), "needs a static last dim; it is 'N'");
}
