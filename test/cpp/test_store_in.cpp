// The store_in directive (schedules/directives/StoreIn.h, backends/StoreIn.h):
// a stage stored in its consumer's buffer, rewritten there in place. Every
// numeric check compares with the float64 interpreter, at sizes whose last
// vector and last block of rows are partial (where a shifted tail would
// rewrite points twice); the lowered statement shows the stage's own buffer
// gone; the error cases name the stages and what is valid.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>

#include "Helpers.h"
#include "LoweredStatement.h"
#include "dsl/ops/Ops.h"
#include "schedules/Explain.h"
#include "schedules/Validate.h"
#include "schedules/defaults/Defaults.h"

using namespace pto;
using namespace pto::test;
using Catch::Matchers::Contains;

namespace {

// E(i, j) = exp(X(i, j)); S(i) = sum over r of E(i, r); Y(i, j) = E(i, j) / S(i).
Program normalized(int64_t rows, int64_t n) {
  Program p("norm");
  const Tensor x = p.input("X", {rows, n});
  const Tensor e = p.define("E", {"i", "j"}, {rows, n}, unary(UnOp::Exp, x(var("i"), var("j"))),
                            OpKind::Elementwise, "exp");
  const Tensor s =
      p.define_reduce("S", {"i"}, {rows}, ReduceOp::Sum, {{"r", Dim(n)}}, e(var("i"), var("r")));
  p.output(p.define("Y", {"i", "j"}, {rows, n}, e(var("i"), var("j")) / s(var("i")),
                    OpKind::Elementwise, "div"));
  return p;
}

// Y parallel over blocks of `block` rows, vectorized by 16; E and S per row,
// E stored in Y.
Schedule in_place(int64_t block) {
  Schedule s;
  s["Y"].loops.tile["i"] = {block};
  s["Y"].loops.parallel = {"i_o"};
  s["Y"].loops.vectorize = "j";
  s["Y"].loops.vector_width = 16;
  const Placement at{Placement::Kind::At, "Y", "i_i"};
  s["E"].compute = at;
  s["E"].loops.vectorize = "j";
  s["E"].loops.vector_width = 64;
  s["E"].store_in = "Y";
  s["S"].compute = at;
  return s;
}

// Halide names a Func's buffer after it, with "$n" where the name was taken.
bool allocates(const std::vector<std::string>& stmt, const std::string& buffer) {
  return std::any_of(stmt.begin(), stmt.end(), [&](const std::string& l) {
    return l.find("allocate " + buffer + "[") != std::string::npos ||
           l.find("allocate " + buffer + "$") != std::string::npos;
  });
}

}  // namespace

TEST_CASE("store_in: rows written into the consumer and scaled in place match float64",
          "[store_in]") {
  std::mt19937 rng(31);
  // Rows of whole vectors and not; blocks of rows that divide them and not
  // (the last block guarded, never computed by two cores).
  for (const int64_t n : {16, 37, 100, 458, 1031})
    for (const int64_t rows : {1, 5, 12})
      for (const int64_t block : {1, 4}) {
        if (block > rows) continue;
        INFO("rows " << rows << " n " << n << " block " << block);
        const Program p = normalized(rows, n);
        const std::map<std::string, HostTensor> in{{"X", random_tensor({rows, n}, rng, -3, 3)}};
        const Kernel k(p, in_place(block), host_target());
        // f32 exp: a few ulps; the f32 row sum of n terms: n 2^-24 relative.
        const double rtol = 4e-7 + static_cast<double>(n) * 6e-8;
        CHECK(tolerance_ratio(run_f32(k, in)[0], interpret(p, in).at("Y"), rtol, 1e-9) <= 1.0);
      }
}

TEST_CASE("store_in: the stage's own buffer is gone from the lowered statement", "[store_in]") {
  const Program p = normalized(6, 100);
  const Target& t = host_target();
  Schedule s = in_place(2);
  CHECK(!allocates(lowered_statement(p, s, t), "E"));
  s["E"].store_in.clear();
  CHECK(allocates(lowered_statement(p, s, t), "E"));
  s["E"].store_in = "Y";
  s.options.opt_level = 0;  // ignored there, as every placement is
  CHECK_NOTHROW(validate(p, s, &t));
  CHECK(allocates(lowered_statement(p, s, t), "E"));
}

TEST_CASE("store_in: the softmax default writes long rows in place", "[store_in][defaults]") {
  const Target& t = host_target();
  std::mt19937 rng(32);
  const auto stored = [&](int64_t rows, int64_t n) {
    Program p("sm");
    p.output(ops::softmax(p.input("X", {Dim(rows), Dim(n)}), -1, "y"));
    const Schedule s = default_schedule(p, t);
    const StageSchedule* e = s.find("y_exp");
    const bool in_place = e && e->store_in == "y";
    if (in_place) CHECK_THAT(explain(p, s, &t), Contains("stored in y's buffer"));
    HostTensor x = random_tensor({rows, n}, rng, -4, 4);
    x.data[static_cast<size_t>(n) / 2] = -INFINITY;  // a 0 there
    const Kernel k(p, s, t);
    const HostTensor got = run_f32(k, {{"X", x}})[0];
    CHECK(tolerance_ratio(got, interpret(p, {{"X", x}}).at("y"),
                          4e-7 + static_cast<double>(n) * 6e-8, 1e-9) <= 1.0);
    CHECK(got.data[static_cast<size_t>(n) / 2] == 0.0);
    return in_place;
  };
  CHECK(stored(33, 458));
  CHECK(stored(5, 4099));
  CHECK(stored(3, 20000));  // with compute_with: past half the L1
  CHECK(!stored(64, 37));   // short rows: the guarded last vector costs more than it saves
  CHECK(!stored(300, 22));  // rows under 2 vectors, a vector of rows per step
}

TEST_CASE("store_in: validation errors name the stages, the value and what is valid",
          "[store_in][errors]") {
  const Target& t = host_target();
  const Program p = normalized(6, 100);
  auto fails = [&](const Program& prog, const Schedule& s, const std::string& text) {
    INFO(text);
    CHECK_THROWS_AS(validate(prog, s, &t), ScheduleError);
    CHECK_THROWS_WITH(validate(prog, s, &t), Contains(text));
  };
  CHECK_NOTHROW(validate(p, in_place(2), &t));
  Schedule s = in_place(2);
  s["E"].store_in = "S";
  fails(p, s, "store_in 'S': 'S' must be an elementwise stage computed at root");
  s["E"].store_in = "X";
  fails(p, s, "must name a stage that reads it; it is read by: S, Y");
  s = in_place(2);
  s["E"].compute = Placement{};
  fails(p, s, "must be computed (and stored) at a loop of 'Y'");
  // Computed per piece of the row, while S reads all of it.
  s = Schedule{};
  s["Y"].loops.tile["j"] = {20};
  s["Y"].loops.order = {"j_o", "i", "j_i"};
  s["E"].compute = Placement{Placement::Kind::At, "Y", "i"};
  s["E"].store_in = "Y";
  s["S"].compute = s["E"].compute;
  fails(p, s, "its reader 'S' must be a reduction over one whole dim of it, computed where it is");
  // A consumer that reads the row elsewhere than at its own point would read
  // points it already rewrote.
  Program q("shifted");
  const Tensor x = q.input("X", {6, 100});
  const Tensor e = q.define("E", {"i", "j"}, {6, 100}, unary(UnOp::Exp, x(var("i"), var("j"))),
                            OpKind::Elementwise, "exp");
  const Tensor sum =
      q.define_reduce("S", {"i"}, {6}, ReduceOp::Sum, {{"r", Dim(100)}}, e(var("i"), var("r")));
  q.output(q.define("Y", {"i", "j"}, {6, 100},
                    e(var("i"), var("j")) / sum(var("i")) + e(var("i"), Expr(0)),
                    OpKind::Elementwise, "div"));
  fails(q, in_place(2), "'Y' must read 'E' at its own point (i, j) and nowhere else");
}
