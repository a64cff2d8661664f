// The rfactor directive (RFactor in schedules/Schedule.h): vectorized partial
// reductions. Every numeric check compares with the float64 interpreter; the
// error cases check that validation names the stage, the value and the valid
// choices; JSON round trips; explain; defaults and the search space use it.
#include <catch2/catch.hpp>

#include "Helpers.h"
#include "SpaceSamples.h"
#include "autotuner/SearchSpace.h"
#include "dsl/ops/Ops.h"
#include "target/Target.h"
#include "dsl/Workloads.h"
#include "schedules/Explain.h"
#include "schedules/ScheduleJson.h"
#include "schedules/Validate.h"
#include "schedules/defaults/Defaults.h"
#include "schedules/directives/RFactor.h"

using namespace pto;
using namespace pto::test;
using Catch::Matchers::Contains;

namespace {

// r(i) = op over j in [0, n) of X(i, j).
Program row_reduction(ReduceOp op, int64_t n = 96) {
  Program p("rowred");
  const Tensor x = p.input("X", {5, n});
  p.output(p.define_reduce("r", {"i"}, {5}, op, {{"j", Dim(n)}}, x(var("i"), var("j")), OpKind::Reduction, "reduce"));
  return p;
}

Schedule with_rfactor(const std::string& stage, const std::string& rvar, int factor) {
  Schedule s;
  s[stage].rfactor = RFactor{rvar, factor};
  return s;
}

double check(const Program& p, const Schedule& s, const std::map<std::string, HostTensor>& in, double rtol, double atol) {
  const Target t = parse_target("host");
  const Kernel k(p, s, t);
  const auto got = run_f32(k, in);
  const auto want = interpret(p, in);
  return tolerance_ratio(got[0], want.at(p.outputs()[0]), rtol, atol);
}

}  // namespace

TEST_CASE("rfactor: sum, prod, min, max rows match float64", "[rfactor]") {
  std::mt19937 rng(11);
  for (const ReduceOp op : {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max}) {
    // Products of 96 values stay in range for inputs in [0.5, 1.5].
    const auto x = op == ReduceOp::Prod ? random_tensor({5, 96}, rng, 0.5, 1.5) : random_tensor({5, 96}, rng);
    const Program p = row_reduction(op);
    for (const int f : {8, 16, 32, 96}) {
      INFO(to_string(op) << " factor " << f);
      // Tolerances: inputs are rounded to f32 once (relative 2^-24 = 6e-8); min/max
      // are then exact. A reassociated f32 sum of 96 terms in [-1, 1] errs by at most
      // 96 * 2^-24 * sum |x| <= 96 * 6e-8 * 96 = 5.5e-4 absolute; a product of 96
      // factors by at most 2 * 96 * 2^-24 = 1.2e-5 relative.
      const double rtol = op == ReduceOp::Prod ? 1.2e-5 : 6e-8, atol = op == ReduceOp::Sum ? 5.5e-4 : 1e-30;
      CHECK(check(p, with_rfactor("r", "j", f), {{"X", x}}, rtol, atol) <= 1.0);
    }
  }
}

// A factor that leaves a remainder: the last step reads the final `factor`
// points, those an earlier step took masked to the identity (sum, prod) or
// taken twice (min, max). Extents just past a step, mid-step and just short
// of one; tolerances as above, for 100 terms.
TEST_CASE("rfactor: a last step shifted inwards takes each point once", "[rfactor]") {
  const int lanes = host_target().vector_lanes(DType::F32);
  std::mt19937 rng(12);
  for (const ReduceOp op : {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max})
    for (const int f : {lanes, 2 * lanes})
      for (const int64_t n : {int64_t{f + 1}, int64_t{2 * f + f / 2}, int64_t{3 * f - 1}}) {
        INFO(to_string(op) << " factor " << f << " extent " << n);
        const auto x = op == ReduceOp::Prod ? random_tensor({5, n}, rng, 0.5, 1.5) : random_tensor({5, n}, rng);
        const double rtol = op == ReduceOp::Prod ? 2 * n * 6e-8 : 6e-8, atol = op == ReduceOp::Sum ? n * n * 6e-8 : 1e-30;
        CHECK(check(row_reduction(op, n), with_rfactor("r", "j", f), {{"X", x}}, rtol, atol) <= 1.0);
      }
}

TEST_CASE("rfactor: a reduction over two variables, a total and a contraction", "[rfactor]") {
  std::mt19937 rng(12);
  {
    // s(i) = sum over k in [0, 4), j in [0, 64) of X(i, k, j): rfactor one, the other stays a reduction of the intermediate.
    Program p("two_rvars");
    const Tensor x = p.input("X", {4, 4, 64});
    p.output(p.define_reduce("s", {"i"}, {4}, ReduceOp::Sum, {{"k", Dim(4)}, {"j", Dim(64)}},
                             x(var("i"), var("k"), var("j")), OpKind::Reduction, "reduce"));
    const std::map<std::string, HostTensor> in = {{"X", random_tensor({4, 4, 64}, rng)}};
    // 256 terms in [-1, 1]: 256 * 2^-24 * 256 = 3.9e-3 absolute.
    CHECK(check(p, with_rfactor("s", "j", 16), in, 6e-8, 3.9e-3) <= 1.0);
    CHECK(check(p, with_rfactor("s", "k", 4), in, 6e-8, 3.9e-3) <= 1.0);
  }
  {
    // A rank-0 total: the intermediate is computed once.
    Program p("total");
    const Tensor x = p.input("X", {256});
    p.output(p.define_reduce("t", {}, {}, ReduceOp::Max, {{"j", Dim(256)}}, x(var("j")), OpKind::Reduction, "reduce"));
    const std::map<std::string, HostTensor> in = {{"X", random_tensor({256}, rng)}};
    CHECK(check(p, with_rfactor("t", "j", 32), in, 6e-8, 1e-30) <= 1.0);  // exact up to the input rounding
  }
  {
    // C = A @ B with the k loop rfactored (16 partial dot products per point).
    const Program p = make_workload("matmul", {{"M", 8}, {"N", 24}, {"K", 64}});
    const std::string mm = p.outputs()[0];
    const std::map<std::string, HostTensor> in = {{"A", random_tensor({8, 64}, rng)}, {"B", random_tensor({64, 24}, rng)}};
    Schedule s = with_rfactor(mm, p.stage(mm).rvars[0].name, 16);
    s[mm].loops.parallel = {p.stage(mm).vars[0]};
    // 64 products in [-1, 1]: 64 * 2^-24 * 64 * 2 (products round too) = 4.9e-4 absolute.
    CHECK(check(p, s, in, 1.2e-7, 4.9e-4) <= 1.0);
  }
}

TEST_CASE("rfactor: with a wider accumulator than the storage, and inside a consumer", "[rfactor]") {
  // r(i) = sum_j X(i, j) stored in bf16, accumulated in f32 (its own accumulator Func,
  // which rfactor splits), computed per row of its consumer y(i) = 2 r(i).
  Program p("narrow");
  const Tensor x = p.input("X", {6, 128});
  const Tensor r = p.define_reduce("r", {"i"}, {6}, ReduceOp::Sum, {{"j", Dim(128)}}, x(var("i"), var("j")),
                                   OpKind::Reduction, "reduce");
  p.output(p.define("y", {"i"}, {6}, r(var("i")) * 2.0, OpKind::Elementwise, "mul"));
  Schedule s = with_rfactor("r", "j", 32);
  s["r"].precision.storage = DType::BF16;
  s["r"].precision.accumulate = DType::F32;
  s["r"].compute = {Placement::Kind::At, "y", "i"};
  std::mt19937 rng(15);
  // bf16 storage rounds |2 r| <= 256 to 2^-9 relative (3.9e-3 with margin); the f32
  // sum of 128 terms adds 128 * 2^-24 * 128 * 2 = 2e-3 absolute.
  CHECK(check(p, s, {{"X", random_tensor({6, 128}, rng)}}, 3.9e-3, 2e-3) <= 1.0);
}

TEST_CASE("rfactor: softmax and layer_norm defaults use it and match float64", "[rfactor]") {
  const Target t = parse_target("host");
  std::mt19937 rng(13);
  for (const std::string w : {"softmax", "layer_norm"}) {
    INFO(w);
    const Program p = make_workload(w, {{"R", 6}, {"C", 768}});
    const Schedule s = default_schedule(p, t);
    int rfactored = 0;
    for (const auto& [name, ss] : s.stages) rfactored += ss.rfactor.has_value();
    CHECK(rfactored == 2);  // softmax: max and sum; layer_norm: mean and variance sums
    std::map<std::string, HostTensor> in;
    for (const auto& i : p.inputs()) {
      std::vector<int64_t> shape;
      for (const Dim& d : i.shape) shape.push_back(d.value);
      in[i.name] = random_tensor(shape, rng);
    }
    // Row statistics over 768 f32 values and a few f32 ops per element: relative
    // to O(1) outputs, 768 * 2^-24 = 4.6e-5 bounds the sums' reassociation.
    CHECK(check(p, s, in, 1e-4, 1e-5) <= 1.0);
    CHECK_THAT(explain(p, s, &t), Contains("rfactor of r by 128") && Contains("vectorized x128"));
  }
}

TEST_CASE("rfactor: a sum that evaluates exp inline keeps at most 4 vectors of partials", "[rfactor]") {
  const Target t = parse_target("host");
  const int lanes = t.vector_lanes(DType::F32);
  std::mt19937 rng(14);
  for (const int64_t n : {1029, 8142}) {
    INFO("log_softmax over " << n);
    Program p("lsm");
    p.output(ops::log_softmax(p.input("X", {Dim(5), Dim(n)}), -1, "y"));
    const Schedule s = default_schedule(p, t);
    REQUIRE(s.find("y_sum"));
    REQUIRE(s.find("y_sum")->rfactor);
    CHECK(s.find("y_sum")->rfactor->factor == 4 * lanes);  // exp inline: 8 vectors would spill
    CHECK(s.find("y_max")->rfactor->factor == 8 * lanes);  // a plain max keeps 8
    // f32 exp and a reassociated sum of n terms (n 2^-24 relative) inside a
    // log, against outputs of magnitude log(n) + |x - max|.
    CHECK(check(p, s, {{"X", random_tensor({5, n}, rng, -4, 4)}}, 1e-5, static_cast<double>(n) * 6e-8) <= 1.0);
  }
}

TEST_CASE("rfactor: a producer computed at the update's parallel loop and stored outside it is a race",
          "[rfactor][errors][regression]") {
  // Found by test_differential (an MLP's fc1 computed at an rfactored
  // product's parallel loop, its storage at root): validation missed that
  // the update runs the pure definition's parallel loops, and Halide refused
  // the schedule at compile time.
  const Target t = parse_target("host");
  Program p("race");
  const Tensor x = p.input("X", {64, 256});
  const Tensor e = p.define("E", {"i", "r0"}, {64, 256}, x(var("i"), var("r0")) * 2.0,
                            OpKind::Elementwise, "mul");
  p.output(p.define_reduce("S", {"i"}, {64}, ReduceOp::Sum, {{"r", Dim(256)}},
                           e(var("i"), var("r"))));
  Schedule s;
  s["S"].loops.tile["i"] = {16};
  s["S"].loops.parallel = {"i_o"};
  s["S"].rfactor = RFactor{"r", 16};
  s["E"].compute = Placement{Placement::Kind::At, "S", "i_o"};
  CHECK_NOTHROW(validate(p, s, &t));
  s["E"].store = Placement{};
  CHECK_THROWS_WITH(validate(p, s, &t), Contains("stage 'E'") && Contains("a race"));
}

TEST_CASE("rfactor: validation errors name the stage, the value and what is valid", "[rfactor][errors]") {
  const Target t = parse_target("host");
  const Program p = row_reduction(ReduceOp::Sum);
  auto fails = [&](const Schedule& s, const std::string& text) {
    INFO(text);
    CHECK_THROWS_AS(validate(p, s, &t), ScheduleError);
    CHECK_THROWS_WITH(validate(p, s, &t), Contains(text));
  };
  fails(with_rfactor("r", "k", 16), "stage 'r': rfactor names unknown reduction variable 'k'; its reduction variables: j");
  fails(with_rfactor("r", "j", 10), "factor 10 for 'j' (extent 96) must be at least 2, at most 256 and divide the extent; e.g. 2, 4, 8, 16, 32");
  fails(with_rfactor("r", "j", 192), "factor 192");
  fails(with_rfactor("r", "j", 1), "at least 2");
  fails(with_rfactor("r", "j", 24), "factor 24 does not fit target");  // 16 lanes of f32
  Schedule s = with_rfactor("r", "j", 16);
  s["r"].update = LoopSchedule{};
  fails(s, "cannot be combined with \"update\" directives");
  s = with_rfactor("r", "j", 16);
  s["r"].accumulator_at = "i";
  fails(s, "cannot be combined with accumulator_at");
  s = with_rfactor("r", "j", 16);
  s["r"].pipeline.prefetch = {{"X", "j", 1}};
  fails(s, "cannot be combined with prefetch");
  s = with_rfactor("r", "j", 16);
  s["r"].cache = {{"X", "i", false}};
  fails(s, "cannot be combined with cache");
  // A copy per tile of the pure loops, outside the intermediate, is fine.
  s = with_rfactor("r", "j", 16);
  s["r"].loops.tile["i"] = {2};
  s["r"].cache = {{"X", "i_o", true}};
  CHECK_NOTHROW(validate(p, s, &t));
  {
    std::mt19937 rng(4);
    std::map<std::string, HostTensor> in;
    for (const auto& i : p.inputs()) {
      std::vector<int64_t> shape;
      for (const Dim& d : i.shape) shape.push_back(d.value);
      in[i.name] = small_integers(shape, rng);
    }
    CHECK(check(p, s, in, 0, 1e-9) <= 1.0);
  }

  // argmax returns an index: not associative in Halide's sense.
  Program pa("arg");
  const Tensor x = pa.input("X", {5, 96});
  pa.output(pa.define_reduce("a", {"i"}, {5}, ReduceOp::ArgMax, {{"j", Dim(96)}}, x(var("i"), var("j")), OpKind::Reduction, "argmax"));
  CHECK_THROWS_WITH(validate(pa, with_rfactor("a", "j", 16), &t),
                    Contains("stage 'a': rfactor of a argmax reduction") && Contains("sum, prod, min and max"));

  // A pure stage has nothing to rfactor.
  const Program sm = make_workload("softmax", {{"R", 4}, {"C", 64}});
  CHECK_THROWS_WITH(validate(sm, with_rfactor("Y", "j", 16), &t), Contains("stage 'Y' has no reduction"));

  // A symbolic reduction extent.
  Program ps("sym");
  const Tensor xs = ps.input("X", {Dim(4), Dim::symbol("C")});
  ps.output(ps.define_reduce("m", {"i"}, {4}, ReduceOp::Max, {{"j", Dim::symbol("C")}}, xs(var("i"), var("j")), OpKind::Reduction, "max"));
  // Whole vectors run with a guarded last step; other factors cannot.
  validate(ps, with_rfactor("m", "j", 16), &t);
  CHECK_THROWS_WITH(validate(ps, with_rfactor("m", "j", 8), &t), Contains("extent 'C' is symbolic"));

  // Producers cannot be placed at the reduction loop that rfactor replaces.
  Program pp("prod");
  const Tensor xp = pp.input("X", {5, 96});
  const Tensor e = pp.define("e", {"i", "j"}, {5, 96}, xp(var("i"), var("j")) * 2.0, OpKind::Elementwise, "mul");
  pp.output(pp.define_reduce("r", {"i"}, {5}, ReduceOp::Sum, {{"j", Dim(96)}}, e(var("i"), var("j")), OpKind::Reduction, "reduce"));
  Schedule sp = with_rfactor("r", "j", 16);
  sp["e"].compute = {Placement::Kind::At, "r", "j"};
  CHECK_THROWS_WITH(validate(pp, sp, &t), Contains("no such loop; its loops (of its update): i"));
  sp["e"].compute = {Placement::Kind::At, "r", "i"};  // per row: fine, and correct
  validate(pp, sp, &t);
  std::mt19937 rng(14);
  // 96 terms 2x in [-2, 2]: 96 * 2^-24 * 192 = 1.1e-3 absolute.
  CHECK(check(pp, sp, {{"X", random_tensor({5, 96}, rng)}}, 6e-8, 1.1e-3) <= 1.0);
}

// Across cores: chunks of rows, each vectorized along the kept dim with
// kChunkUnroll steps per load and store of its partials, combined in vectors
// (an output computed into its own buffer and copied out, since the combine
// loads the stage's values as aligned vectors); chunk 0 sizes one chunk per
// core at run time over a symbolic extent.
TEST_CASE("rfactor: chunks across cores, static and sized at run time, match float64", "[rfactor]") {
  const Target t = parse_target("host");
  std::mt19937 rng(31);
  for (const auto& [rows, cols, chunk] : std::vector<std::tuple<int64_t, int64_t, int>>{
           {300, 2000, 152}, {37, 100, 20}, {1001, 33, 500}, {9, 1, 4}, {64, 4099, 31}}) {
    for (const bool symbolic : {false, true}) {
      INFO(rows << " x " << cols << " chunk " << chunk << (symbolic ? " symbolic" : ""));
      Program p("colsum");
      const Dim r = symbolic ? Dim::symbol("R") : Dim(rows), c = symbolic ? Dim::symbol("C") : Dim(cols);
      const Tensor x = p.input("X", {r, c});
      p.output(p.define_reduce("s", {"j"}, {c}, ReduceOp::Sum, {{"i", r}}, x(var("i"), var("j")),
                               OpKind::Reduction, "reduce"));
      Schedule s;
      s["s"].rfactor = RFactor{"i", symbolic ? 0 : chunk, true};
      validate(p, s, &t);
      const Kernel k(p, s, t);
      const auto in = random_tensor({rows, cols}, rng);
      const auto want = interpret(p, {{"X", in}}).at("s");
      // rows terms in [-1, 1], reassociated: rows * 2^-24 * rows absolute.
      const double atol = static_cast<double>(rows * rows) * 6e-8;
      // Output buffers at every 4-byte offset within a 64-byte line: the
      // combine's vector loads are of the stage's own buffer, not the caller's.
      std::vector<float> xin(in.data.begin(), in.data.end()), store(static_cast<size_t>(cols) + 16);
      for (int off = 0; off < 16; ++off) {
        float* o = store.data() + off;
        k.run({{xin.data(), DType::F32, {rows, cols}, {}}}, {{o, DType::F32, {cols}, {}}});
        CHECK(tolerance_ratio({{cols}, {o, o + cols}}, want, 0, atol) <= 1.0);
      }
      if (symbolic) CHECK_THAT(explain(p, s, &t), Contains("one chunk per core, sized at run time"));
      else if (chunk % directives::kChunkUnroll == 0)
        CHECK_THAT(explain(p, s, &t), Contains("4 steps unrolled in each vector"));
    }
  }
  // Chunk 0 is for symbolic extents; 1 is no chunk at all.
  Program p("colsum");
  const Tensor x = p.input("X", {50, 8});
  p.output(p.define_reduce("s", {"j"}, {8}, ReduceOp::Sum, {{"i", Dim(50)}}, x(var("i"), var("j")),
                           OpKind::Reduction, "reduce"));
  Schedule s;
  s["s"].rfactor = RFactor{"i", 0, true};
  CHECK_THROWS_WITH(validate(p, s, &t), Contains("chunk 0") && Contains("needs a symbolic extent"));
  CHECK_THROWS_WITH(
      schedule_from_json_string(R"({"schema": 1, "stages": {"s": {"rfactor": {"rvar": "i", "factor": 1, "parallel": true}}}})"),
      Contains("stages.s.rfactor.factor") && Contains("or 0 with"));
}

// IEEE semantics (backends/Ieee.h): a float min / max over order keys, so
// a NaN anywhere in a row wins whichever lane, chunk or step takes it, as
// numpy's does; +-Inf are ordinary extremes. Exact: no arithmetic.
TEST_CASE(
    "rfactor: min and max keep NaN and Inf under every rfactor, across cores and in the defaults",
    "[rfactor][ieee]") {
  const Target t = parse_target("host");
  for (const ReduceOp op : {ReduceOp::Min, ReduceOp::Max})
    for (const int64_t n : {int64_t{7}, int64_t{100}, int64_t{1000}}) {
      std::mt19937 rng(41);
      const int64_t rows = 5;
      HostTensor x = random_tensor({rows, n}, rng);
      // Row 0: NaN first; 1: NaN last (in a shifted or guarded last step); 2: NaN
      // mid-row next to +Inf; 3: +Inf and -Inf, no NaN; 4: -NaN.
      const double inf = std::numeric_limits<double>::infinity();
      x.data[0] = NAN;
      x.data[2 * n - 1] = NAN;
      x.data[2 * n + n / 2] = NAN,
                         x.data[2 * n + n / 2 + 1 < 3 * n ? 2 * n + n / 2 + 1 : 2 * n] = inf;
      x.data[3 * n + n / 3] = inf, x.data[3 * n + n - 1] = -inf;
      x.data[4 * n + n / 4] = -NAN;
      const Program p = row_reduction(op, n);
      const auto want = interpret(p, {{"X", x}}).at("r");
      std::vector<Schedule> schedules{Schedule{}, default_schedule(p, t)};
      for (const RFactor& rf : directives::rfactor_candidates(p.stage("r"), &t, DType::F32)) {
        Schedule s;
        s["r"].rfactor = rf;
        schedules.push_back(s);
      }
      for (const auto& s : schedules) {
        INFO(to_string(op) << " over " << n << ": " << schedule_to_json_string(s));
        const Kernel k(p, s, t);
        const auto got = run_f32(k, {{"X", x}});
        for (int64_t i = 0; i < rows; ++i) {
          INFO("row " << i);
          if (std::isnan(want.data[i]))
            CHECK(std::isnan(got[0].data[i]));
          else
            CHECK(got[0].data[i] == static_cast<float>(want.data[i]));
        }
      }
    }
  // Chunks across cores: a column max over many rows.
  for (const bool symbolic : {false, true}) {
    Program p("colmax");
    const Dim r = symbolic ? Dim::symbol("R") : Dim(999);
    const Tensor xt = p.input("X", {r, Dim(3)});
    p.output(p.define_reduce("m", {"j"}, {3}, ReduceOp::Max, {{"i", r}}, xt(var("i"), var("j")),
                             OpKind::Reduction, "reduce"));
    Schedule s;
    s["m"].rfactor = RFactor{"i", symbolic ? 0 : 100, true};
    std::mt19937 rng(42);
    HostTensor x = random_tensor({999, 3}, rng);
    x.data[3 * 500 + 1] = NAN, x.data[3 * 998 + 2] = NAN;
    const Kernel k(p, s, t);
    const auto got = run_f32(k, {{"X", x}});
    INFO((symbolic ? "symbolic" : "static"));
    CHECK(!std::isnan(got[0].data[0]));
    CHECK(std::isnan(got[0].data[1]));
    CHECK(std::isnan(got[0].data[2]));
  }
}

TEST_CASE("rfactor: strict JSON and round trip", "[rfactor][json]") {
  const std::string text = R"({"schema": 1, "stages": {"r": {"rfactor": {"rvar": "j", "factor": 16}}}})";
  const Schedule s = schedule_from_json_string(text);
  REQUIRE(s.find("r"));
  REQUIRE(s.find("r")->rfactor);
  CHECK(s.find("r")->rfactor->rvar == "j");
  CHECK(s.find("r")->rfactor->factor == 16);
  CHECK(schedule_from_json_string(schedule_to_json_string(s, 2)) == s);
  CHECK_THROWS_WITH(schedule_from_json_string(R"({"schema": 1, "stages": {"r": {"rfactor": {"rvar": "j"}}}})"),
                    Contains("stages.r.rfactor") && Contains("needs \"rvar\" and \"factor\""));
  CHECK_THROWS_WITH(schedule_from_json_string(R"({"schema": 1, "stages": {"r": {"rfactor": {"rvar": "j", "factor": 16, "lanes": 2}}}})"),
                    Contains("lanes"));
  CHECK_THROWS_WITH(schedule_from_json_string(R"({"schema": 1, "stages": {"r": {"rfactor": {"rvar": "j", "factor": 1}}}})"),
                    Contains("stages.r.rfactor.factor"));
  CHECK_THROWS_AS(schedule_from_json_string(R"({"schema": 1, "stages": {"r": {"rfactor": [16]}}})"), ScheduleError);
}

// interleave: the intermediate spans a block of rows, each step over all of
// them. Whole blocks only (the update's last block is guarded, not shifted).
TEST_CASE("rfactor: interleaved rows match float64, validate and round-trip", "[rfactor]") {
  const Target t = parse_target("host");
  const int lanes = t.vector_lanes(DType::F32);
  Program p("rows");
  const Tensor x = p.input("X", {24, 300});
  const Tensor v = p.input("v", {300});
  p.output(p.define_reduce("r", {"i"}, {24}, ReduceOp::Sum, {{"j", Dim(300)}},
                           x(var("i"), var("j")) * v(var("j")), OpKind::Reduction, "reduce"));
  std::mt19937 rng(21);
  const std::map<std::string, HostTensor> in = {{"X", random_tensor({24, 300}, rng)},
                                                {"v", random_tensor({300}, rng)}};
  for (const int64_t rows : {2, 3, 4, 6, 8, 12}) {
    for (const int vectors : {1, 2}) {
      INFO(rows << " rows, " << vectors << " vectors");
      Schedule s;
      s["r"].loops.tile["i"] = {rows};
      s["r"].rfactor = RFactor{"j", vectors * lanes};
      s["r"].rfactor->interleave = true;
      REQUIRE_NOTHROW(validate(p, s, &t));
      // A reassociated f32 sum of 300 products in [-1, 1]: at most 300 * 2^-24 * 300 absolute.
      CHECK(check(p, s, in, 6e-8, 5.4e-3) <= 1.0);
      CHECK(schedule_from_json_string(schedule_to_json_string(s, 2)) == s);
      CHECK_THAT(explain(p, s, &t), Contains("per block of i_o, its rows interleaved in each step, unrolled"));
    }
  }
  Schedule s;
  s["r"].loops.tile["i"] = {5};
  s["r"].rfactor = RFactor{"j", lanes};
  s["r"].rfactor->interleave = true;
  CHECK_THROWS_WITH(validate(p, s, &t), Contains("stage 'r': rfactor interleave needs") &&
                                            Contains("'i' (extent 24) is tiled by 5"));
  s["r"].loops.tile.clear();
  CHECK_THROWS_WITH(validate(p, s, &t), Contains("no static pure dim is tiled"));
  s["r"].loops.tile["i"] = {4};
  s["r"].rfactor->parallel = true;
  // Across cores the block's rows must lie outside the vectorized innermost dim.
  CHECK_THROWS_WITH(validate(p, s, &t), Contains("stage 'r': rfactor interleave across cores") &&
                                            Contains("a static pure dim outside its innermost"));
  s["r"].rfactor->factor = 100;
  s["r"].rfactor->vector_lanes = lanes;
  CHECK_THROWS_WITH(validate(p, s, &t), Contains("nor across cores with \"vector_lanes\""));
  CHECK_THROWS_WITH(
      schedule_from_json_string(
          R"({"schema": 1, "stages": {"r": {"rfactor": {"rvar": "j", "factor": 16, "interleave": 1}}}})"),
      Contains("stages.r.rfactor.interleave") && Contains("must be true or false"));
}

// Two levels (a core's share of blocks, then the block) and static dims
// inside the block (a few output columns), all unrolled in each step.
TEST_CASE("rfactor: interleaved blocks of a two-level tile with columns match float64", "[rfactor]") {
  const Target t = parse_target("host");
  const int lanes = t.vector_lanes(DType::F32);
  Program p("cols");
  const Tensor a = p.input("A", {24, 300});
  const Tensor w = p.input("W", {300, 5});
  p.output(p.define_reduce("r", {"i", "j"}, {24, 5}, ReduceOp::Sum, {{"k", Dim(300)}},
                           a(var("i"), var("k")) * w(var("k"), var("j")), OpKind::Contraction, "matmul"));
  std::mt19937 rng(22);
  const std::map<std::string, HostTensor> in = {{"A", random_tensor({24, 300}, rng)},
                                                {"W", random_tensor({300, 5}, rng)}};
  for (const auto& [share, rows] : std::vector<std::pair<int64_t, int64_t>>{{12, 2}, {12, 3}, {8, 4}, {24, 4}}) {
    INFO(share << " x " << rows);
    Schedule s;
    s["r"].loops.tile["i"] = {share, rows};
    s["r"].loops.parallel = {"i_o"};
    s["r"].cache.push_back({"W", "i_o", true});
    s["r"].rfactor = RFactor{"k", lanes};
    s["r"].rfactor->interleave = true;
    REQUIRE_NOTHROW(validate(p, s, &t));
    CHECK(check(p, s, in, 6e-8, 5.4e-3) <= 1.0);
    CHECK_THAT(explain(p, s, &t), Contains("per block of i_m, its rows interleaved in each step, unrolled"));
  }
  Schedule s;
  s["r"].rfactor = RFactor{"k", lanes};
  s["r"].rfactor->interleave = true;
  s["r"].loops.tile["i"] = {10, 5};  // blocks past the rows
  CHECK_THROWS_WITH(validate(p, s, &t), Contains("is tiled by 10 x 5, 5 points inside it"));
  s["r"].loops.tile["i"] = {16, 4};  // shares past the rows
  CHECK_THROWS_WITH(validate(p, s, &t), Contains("is tiled by 16 x 4"));
  s["r"].loops.tile["i"] = {12, 6};  // 30 partials a step
  CHECK_THROWS_WITH(validate(p, s, &t), Contains("at most 28 points"));
}

TEST_CASE("rfactor: explain shows the intermediate", "[rfactor]") {
  const Target t = parse_target("host");
  const Program p = row_reduction(ReduceOp::Max);
  const std::string e = explain(p, with_rfactor("r", "j", 16), &t);
  CHECK_THAT(e, Contains("intermediate r__rf: rfactor of j by 16 (j = j_o * 16 + j_lane), per point"));
  CHECK_THAT(e, Contains("for j_o in [0, 6):"));
  CHECK_THAT(e, Contains("vectorized x16 for j_lane in [0, 16): r__rf(i, j_lane) = max(r__rf(i, j_lane), X(i, j))"));
  CHECK_THAT(e, Contains("for j_lane in [0, 16):"));
  CHECK_THAT(e, Contains("r(i) = max(r(i), r__rf(i, j_lane))"));
}

TEST_CASE("rfactor: the search space offers it and its schedules validate", "[rfactor][tuner]") {
  const Target t = parse_target("host");
  const Program p = make_workload("softmax", {{"R", 8}, {"C", 768}});
  const tuner::SearchSpace space(p, t);
  int knobs = 0;
  for (const auto& k : space.knobs())
    if (k.name == "rfactor") {
      ++knobs;
      CHECK(k.values == std::vector<int64_t>{0, 16, 32, 64});
    }
  CHECK(knobs == 2);  // the row max and the row sum
  bool seeded = false;
  for (const auto& g : space.seeds()) {
    const Schedule s = space.decode(g);
    validate(p, s, &t);
    for (const auto& [n, ss] : s.stages) seeded |= ss.rfactor.has_value();
  }
  CHECK(seeded);
  int with = 0;  // other knobs may combine invalidly; rfactor itself must not be the reason
  for (const Schedule& s : valid_samples(space, p, t, 200, 3))
    for (const auto& [n, ss] : s.stages) with += ss.rfactor.has_value();
  CHECK(with > 0);
}

// Split-K with a register tile (parallel + interleave): every chunk of the
// reduction runs each block of rows x the innermost dim in vectors, partials
// in registers, and the stage adds the chunks. Random shapes (batched and
// not, columns whole vectors or with a masked tail, chunks that do and do not
// divide the reduction, narrower vectors) against float64.
TEST_CASE("rfactor: split-K register tiles match float64 at random shapes", "[rfactor]") {
  const Target t = parse_target("host");
  const int lanes = t.vector_lanes(DType::F32);
  std::mt19937 rng(33);
  int ran = 0;
  for (int trial = 0; trial < 12; ++trial) {
    std::uniform_int_distribution<int64_t> rows_d(1, 6), k_d(2, 700), n_d(1, 3 * lanes + 3),
        b_d(1, 2);
    const int64_t tile = std::uniform_int_distribution<int64_t>(2, 4)(rng);
    const int64_t m = tile * rows_d(rng), k = k_d(rng), n = n_d(rng),
                  batch = trial % 3 == 0 ? b_d(rng) : 0;
    Program p("splitk");
    const Shape as = batch ? Shape{Dim(batch), Dim(m), Dim(k)} : Shape{Dim(m), Dim(k)};
    const Shape bs = batch ? Shape{Dim(batch), Dim(k), Dim(n)} : Shape{Dim(k), Dim(n)};
    const Tensor a = p.input("A", as), b = p.input("B", bs);
    p.output(ops::matmul(a, b, "C"));
    const Stage& st = p.stage("C");
    Schedule s;
    s["C"].loops.tile[st.vars[st.vars.size() - 2]] = {tile};
    const int width = trial % 4 == 3 ? std::max(1, lanes / 4) : 0;
    if (width) {
      s["C"].loops.vectorize = st.vars.back();
      s["C"].loops.vector_width = width;
    }
    RFactor rf;
    rf.rvar = st.rvars[0].name;
    rf.factor = static_cast<int>(
        std::uniform_int_distribution<int64_t>(1, std::max<int64_t>(1, k - 1))(rng));
    rf.factor = std::max(2, rf.factor);
    rf.parallel = true;
    rf.interleave = true;
    s["C"].rfactor = rf;
    INFO("batch " << batch << " m " << m << " k " << k << " n " << n << " tile " << tile
                  << " chunk " << rf.factor << " width " << width);
    if (k <= rf.factor) {
      CHECK_THROWS_WITH(validate(p, s, &t), Contains("less than the extent"));
      continue;
    }
    try {
      validate(p, s, &t);
    } catch (const ScheduleError& e) {
      // Too many vectors of partials for the registers: the check says so.
      CHECK_THAT(e.what(), Contains("vectors of partials per block"));
      continue;
    }
    const auto sizes = [](const Shape& sh) {
      std::vector<int64_t> v;
      for (const Dim& d : sh) v.push_back(d.value);
      return v;
    };
    std::map<std::string, HostTensor> in = {{"A", random_tensor(sizes(as), rng)},
                                            {"B", random_tensor(sizes(bs), rng)}};
    // A reassociated f32 sum of k products in [-1, 1].
    CHECK(check(p, s, in, 1e-5, 2.0 * static_cast<double>(k) * 6e-8 * 4) <= 1.0);
    CHECK(schedule_from_json_string(schedule_to_json_string(s, 2)) == s);
    CHECK_THAT(explain(p, s, &t), Contains("a register tile of " + std::to_string(tile) + " rows"));
    ++ran;
  }
  CHECK(ran >= 6);  // the draws above leave most shapes valid
}
