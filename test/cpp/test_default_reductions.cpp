// Default schedules of reductions and skinny contractions (schedules/defaults/
// Reduction.cpp, RowWise.cpp) and the rfactor forms they use (guarded tails,
// chunks across cores). Sums run on small integers, which f32 adds exactly
// (every partial sum stays below 2^24), so a dropped, repeated or misplaced
// term shows as an error of at least 1 against the float64 interpreter
// whatever the summation order; max and argmax (ties: the first index) are exact too. Sizes include
// 1, odd and prime extents, and symbolic ones run by one kernel at several sizes.
#include <catch2/catch.hpp>

#include "Helpers.h"
#include "dsl/ops/Ops.h"
#include "schedules/Explain.h"
#include "schedules/ScheduleJson.h"
#include "schedules/Validate.h"
#include "schedules/defaults/Defaults.h"
#include "schedules/directives/RFactor.h"

using namespace pto;
using namespace pto::test;
using Catch::Matchers::Contains;

namespace {

Shape dims(const std::vector<int64_t>& v, bool symbolic) {
  Shape s;
  for (size_t k = 0; k < v.size(); ++k)
    s.push_back(symbolic ? Dim::symbol("D" + std::to_string(k)) : Dim(v[k]));
  return s;
}

// Runs a one-input kernel whose output is an index (argmax: i64) on f32 input `x`.
HostTensor run_index(const Kernel& k, const HostTensor& x) {
  std::vector<float> in(x.data.begin(), x.data.end());
  const auto shapes = k.output_shapes({x.shape});
  int64_t n = 1;
  for (const int64_t e : shapes[0]) n *= e;
  std::vector<int64_t> out(static_cast<size_t>(n), -1);
  k.run({{in.data(), DType::F32, x.shape, {}}}, {{out.data(), DType::I64, shapes[0], {}}});
  return {shapes[0], {out.begin(), out.end()}};
}

using Build = std::function<Tensor(const Tensor&)>;

// Runs `build(X)` with the default schedule for X of each shape (one kernel
// for all of them when symbolic) against the interpreter; returns the worst
// tolerance ratio.
double worst(const Build& build, const std::vector<std::vector<int64_t>>& shapes, bool symbolic,
             double rtol, double atol, bool exact_inputs = true) {
  std::mt19937 rng(31);
  double w = 0;
  std::optional<Kernel> shared;
  for (const auto& shape : shapes) {
    Program p("red");
    p.output(build(p.input("X", dims(shape, symbolic))));
    if (!symbolic || !shared) shared.emplace(p, default_schedule(p, host_target()), host_target());
    const std::map<std::string, HostTensor> in = {
        {"X", exact_inputs ? small_integers(shape, rng) : random_tensor(shape, rng, -4, 4)}};
    const Program& kp = shared->program();
    const bool index = kp.tensor(kp.outputs()[0]).dtype == DType::I64;
    const HostTensor got = index ? run_index(*shared, in.at("X")) : run_f32(*shared, in)[0];
    const double r = tolerance_ratio(got, interpret(kp, in).at(kp.outputs()[0]), rtol, atol);
    INFO("shape " << shape[0] << (shape.size() > 1 ? "x" + std::to_string(shape[1]) : "")
                  << (symbolic ? " symbolic" : ""));
    CHECK(r <= 1.0);
    w = std::max(w, r);
  }
  return w;
}

const StageSchedule& entry(const Program& p, const Schedule& s, const std::string& name) {
  REQUIRE(s.find(name));
  (void)p;
  return *s.find(name);
}

}  // namespace

TEST_CASE("default reductions: column sums vectorize the kept dim, parallel or split across cores",
          "[defaults][reduction]") {
  const Build colsum = [](const Tensor& x) { return ops::reduce_sum(x, {0}, false, "s"); };
  const std::vector<std::vector<int64_t>> shapes = {
      {1, 1}, {7, 1}, {1, 37}, {37, 5}, {61, 257}, {3001, 64}, {300, 4099}, {50, 20000}};
  CHECK(worst(colsum, shapes, false, 0, 1e-9) <= 1.0);
  CHECK(worst(colsum, {{1, 1}, {5, 3}, {257, 769}, {3001, 64}, {2, 20000}}, true, 0, 1e-9) <= 1.0);
  // The structure: a row wider than half of L1 vectorizes along columns, rows
  // outside, column blocks in parallel, while the input fits the cores' L2s.
  const int64_t wide = host_target().l1_bytes;  // f32: 4x L1
  Program p("colsum");
  p.output(ops::reduce_sum(p.input("X", {8, wide}), {0}, false, "s"));
  const Schedule s = default_schedule(p, host_target());
  const StageSchedule& e = entry(p, s, "s");
  REQUIRE(e.update);
  CHECK(!e.update->vectorize.empty());
  CHECK(e.update->order.back() == e.update->vectorize);
  CHECK(!e.accumulator_at.empty());
  if (host_target().cores > 1) {
    CHECK(!e.loops.parallel.empty());
    // Rows whose sum fits the accumulator block, or an input past the
    // cores' L2s: the rows are split across cores instead, each core
    // streaming one contiguous block.
    for (const auto& [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{
             {100000, 64},
             {100000, 768},
             {4 * host_target().l2_bytes * host_target().cores / wide, wide}}) {
      INFO(rows << " x " << cols);
      Program q("narrow");
      q.output(ops::reduce_sum(q.input("X", {rows, cols}), {0}, false, "s"));
      const Schedule sq = default_schedule(q, host_target());
      REQUIRE(entry(q, sq, "s").rfactor);
      CHECK(entry(q, sq, "s").rfactor->parallel);
      CHECK_THAT(explain(q, sq, &host_target()), Contains("across cores"));
    }
  }
}

TEST_CASE("default reductions: outer axes of 3-D tensors, means, max and argmax over a batch",
          "[defaults][reduction]") {
  std::mt19937 rng(5);
  for (const bool symbolic : {false, true}) {
    INFO((symbolic ? "symbolic" : "static"));
    for (const std::vector<int64_t> shape :
         std::vector<std::vector<int64_t>>{{2, 7, 33}, {5, 300, 97}, {1, 4000, 17}, {3, 1, 1}}) {
      Program p("axis1");
      const Tensor x = p.input("X", dims(shape, symbolic));
      p.output(ops::reduce_sum(x, {1}, false, "s"));
      const Kernel k(p, default_schedule(p, host_target()), host_target());
      const std::map<std::string, HostTensor> in = {{"X", small_integers(shape, rng)}};
      CHECK(tolerance_ratio(run_f32(k, in)[0], interpret(p, in).at("s"), 0, 1e-9) <= 1.0);
    }
  }
  // The mean over a batch: sums of integers, divided once: relative 2^-24 (1.2e-7 with margin).
  CHECK(worst([](const Tensor& x) { return ops::reduce_mean(x, {0}); },
              {{64, 768}, {13, 31}, {1, 5}}, false, 1.2e-7, 1e-12) <= 1.0);
  CHECK(worst([](const Tensor& x) { return ops::reduce_mean(x, {0}); }, {{64, 768}, {13, 31}}, true,
              1.2e-7, 1e-12) <= 1.0);
  CHECK(worst([](const Tensor& x) { return ops::reduce_max(x, {0}); },
              {{3001, 64}, {17, 4099}, {1, 3}}, false, 6e-8, 1e-30, false) <= 1.0);
  CHECK(worst([](const Tensor& x) { return ops::reduce_max(x, {0}); }, {{3001, 64}, {17, 99}}, true,
              6e-8, 1e-30, false) <= 1.0);
  CHECK(worst([](const Tensor& x) { return ops::argmax(x, 0); }, {{301, 64}, {17, 99}, {1, 1}},
              false, 0, 1e-30) <= 1.0);
  CHECK(worst([](const Tensor& x) { return ops::argmax(x, 0); }, {{301, 64}, {17, 99}}, true, 0,
              1e-30) <= 1.0);
}

TEST_CASE(
    "default reductions: row sums keep lanes of partials, parallel rows or rows split across cores",
    "[defaults][reduction]") {
  const Build rowsum = [](const Tensor& x) { return ops::reduce_sum(x, {1}, false, "s"); };
  CHECK(worst(rowsum, {{1, 1}, {5, 96}, {3, 50257}, {1, 100003}, {257, 300}, {2000, 17}}, false, 0,
              1e-9) <= 1.0);
  CHECK(worst(rowsum, {{1, 1}, {5, 96}, {3, 50257}, {257, 301}}, true, 0, 1e-9) <= 1.0);
  CHECK(worst([](const Tensor& x) { return ops::reduce_max(x, {1}); },
              {{3, 50257}, {9, 1}, {64, 770}}, false, 6e-8, 1e-30, false) <= 1.0);
  CHECK(worst([](const Tensor& x) { return ops::reduce_max(x, {1}); }, {{3, 50257}, {64, 770}},
              true, 6e-8, 1e-30, false) <= 1.0);
  CHECK(worst([](const Tensor& x) { return ops::argmax(x, 1); }, {{3, 5003}, {64, 77}}, false, 0,
              1e-30) <= 1.0);
  // logsumexp of values in [-4, 4] over up to 5003 terms: the f32 sum of exps
  // errs by at most 5003 * 2^-24 relative, which the log turns into an absolute
  // 3e-4; each exp adds a few ulps.
  CHECK(worst([](const Tensor& x) { return ops::reduce_logsumexp(x, {1}); }, {{3, 5003}, {64, 77}},
              false, 1e-6, 3e-4, false) <= 1.0);
  CHECK(worst([](const Tensor& x) { return ops::reduce_logsumexp(x, {1}); }, {{3, 5003}, {64, 77}},
              true, 1e-6, 3e-4, false) <= 1.0);
  Program p("rows");
  p.output(ops::reduce_sum(p.input("X", {4096, 4096}), {1}, false, "s"));
  const Schedule s = default_schedule(p, host_target());
  REQUIRE(entry(p, s, "s").rfactor);
  CHECK(!entry(p, s, "s").rfactor->parallel);
  if (host_target().cores > 1) {
    CHECK(!entry(p, s, "s").loops.parallel.empty());
    Program q("row");
    q.output(ops::reduce_sum(q.input("X", {1, 100003}), {1}, false, "s"));
    const Schedule sq = default_schedule(q, host_target());
    REQUIRE(entry(q, sq, "s").rfactor);
    CHECK(entry(q, sq, "s").rfactor->parallel);
    CHECK(entry(q, sq, "s").rfactor->vector_lanes > 0);
  }
}

TEST_CASE("default reductions: matrix-vector products, both sides, static and symbolic",
          "[defaults][reduction]") {
  std::mt19937 rng(9);
  struct Case {
    std::vector<int64_t> a, b;
  };
  const std::vector<Case> cases = {
      {{1, 1}, {1}},          {{7, 13}, {13}},         {{300, 257}, {257}},
      {{3, 40000}, {40000}},  {{33}, {33, 70}},        {{4000}, {4000, 8}},
      {{257, 129}, {129, 1}}, {{1, 300}, {300, 3}},    {{2, 5000}, {5000, 1}},
      {{1, 37}, {37, 100}},   {{1, 768}, {768, 1031}}, {{1, 300}, {300, 2000}}};
  for (const bool symbolic : {false, true})
    for (const Case& c : cases) {
      INFO((symbolic ? "symbolic " : "static ")
           << c.a.size() << "-D a " << c.a[0] << ", b " << c.b[0]);
      Program p("mv");
      Shape sa = dims(c.a, false), sb = dims(c.b, false);
      if (symbolic) {
        // The contracted dim shares one symbol; the others their own.
        const Dim k = Dim::symbol("K");
        sa.back() = k;
        sb[c.b.size() == 1 ? 0 : 0] = k;
        if (c.a.size() == 2) sa[0] = Dim::symbol("M");
        if (c.b.size() == 2) sb[1] = Dim::symbol("N");
      }
      p.output(ops::matmul(p.input("A", sa), p.input("B", sb), "mv"));
      const Schedule s = default_schedule(p, host_target());
      // One static output row with a vector's width of columns (x @ W in a
      // decoder step): a register tile of that one row (Contraction.cpp),
      // vectorized along the columns; past half the L2 of W, W's rows split
      // across cores (one_row_stream), each core's chunk vectorized along
      // the columns.
      if (!symbolic && c.a.size() == 2 && c.a[0] == 1 && c.b.size() == 2 && c.b[1] >= 16) {
        const StageSchedule& ms = s.stages.at("mv");
        if (host_target().cores > 1 && c.b[0] * c.b[1] * 4 >= host_target().l2_bytes / 2) {
          REQUIRE(ms.rfactor);
          CHECK(ms.rfactor->parallel);
          CHECK(ms.rfactor->vector_lanes == 0);
          CHECK(ms.rfactor->factor % directives::kChunkUnroll == 0);
        } else {
          REQUIRE(ms.update);
          CHECK(ms.update->order.back() == p.stage("mv").vars.back());
          CHECK(ms.loops.tile.at(p.stage("mv").vars[0]) == std::vector<int64_t>{1});
          CHECK(!ms.accumulator_at.empty());
        }
      }
      const Kernel k(p, s, host_target());
      const std::map<std::string, HostTensor> in = {{"A", small_integers(c.a, rng)},
                                                    {"B", small_integers(c.b, rng)}};
      CHECK(tolerance_ratio(run_f32(k, in)[0], interpret(p, in).at("mv"), 0, 1e-9) <= 1.0);
    }
}

TEST_CASE("default reductions: softmax over long, prime and symbolic rows",
          "[defaults][reduction]") {
  // exp of values in [-4, 4] and f32 row sums of up to 50257 terms, relative
  // to outputs of ~1/n: 50257 * 2^-24 = 3e-3 relative bounds the sum's
  // rounding, a few ulps each exp and the reciprocal.
  for (const auto& [name, f] : std::vector<std::pair<std::string, Build>>{
           {"softmax", [](const Tensor& x) { return ops::softmax(x, -1); }},
           {"log_softmax", [](const Tensor& x) { return ops::log_softmax(x, -1); }}}) {
    INFO(name);
    CHECK(worst(f, {{3, 50257}, {1, 32000}, {5, 1031}, {2, 1}, {1, 7}, {9, 64}, {4, 33}}, false,
                3e-3, 1e-7, false) <= 1.0);
    CHECK(worst(f, {{3, 50257}, {1, 32000}, {5, 1031}, {2, 1}}, true, 3e-3, 1e-7, false) <= 1.0);
  }
  // A symbolic row is vectorized and its statistics keep lanes of partials.
  Program p("sym_softmax");
  p.output(ops::softmax(p.input("X", {Dim(8), Dim::symbol("C")}), -1, "y"));
  const Schedule s = default_schedule(p, host_target());
  int rfactored = 0;
  for (const auto& [n, ss] : s.stages) rfactored += ss.rfactor.has_value();
  CHECK(rfactored == 2);
  CHECK(!entry(p, s, "y").loops.vectorize.empty());
  // Rows of a few vectors (attention scores over 64 keys) still take one
  // vector of lanes of partials.
  Program sp("short_softmax");
  sp.output(ops::softmax(sp.input("X", {Dim(4096), Dim(64)}), -1, "y"));
  const Schedule ss = default_schedule(sp, host_target());
  for (const auto& [n, st] : ss.stages) {
    INFO(n);
    if (sp.stage(n).reduce) {
      REQUIRE(st.rfactor);
      CHECK(st.rfactor->factor == host_target().vector_lanes(DType::F32));
    }
  }
  // log_softmax's exp is read by its sum alone: inline there, not stored per
  // row; the max it reads stays per row.
  Program lp("log_softmax");
  lp.output(ops::log_softmax(lp.input("X", {Dim(128), Dim(30522)}), -1, "y"));
  const Schedule ls = default_schedule(lp, host_target());
  for (const auto& [n, ss] : ls.stages) {
    INFO(n);
    if (n.find("_exp") != std::string::npos) CHECK(ss.compute.kind == Placement::Kind::Inline);
    if (lp.stage(n).reduce) CHECK(ss.compute.kind == Placement::Kind::At);
  }
}

TEST_CASE("default row-wise: rows shorter than 2 vectors reduce a vector of rows per step",
          "[defaults][reduction]") {
  const int lanes = host_target().vector_lanes(DType::F32);
  // Row counts that are and are not multiples of the lanes, a row count below
  // them (per-row lanes then), lengths 1 to just under 2 vectors.
  const std::vector<std::vector<int64_t>> shapes = {
      {12245, 22}, {17, 31}, {16, 16}, {33, 5}, {40, 1}, {7, 20}, {100, 2 * lanes - 1}};
  for (const auto& [name, f] : std::vector<std::pair<std::string, Build>>{
           {"softmax", [](const Tensor& x) { return ops::softmax(x, -1); }},
           {"log_softmax", [](const Tensor& x) { return ops::log_softmax(x, -1); }}}) {
    INFO(name);
    CHECK(worst(f, shapes, false, 1e-5, 1e-7, false) <= 1.0);
  }
  // layer_norm's gamma and beta need a static row: static shapes only.
  for (const auto& shape : shapes) {
    Program p("ln");
    const int64_t c = shape[1];
    p.output(ops::layer_norm(p.input("X", {shape[0], c}), p.input("G", {c}), p.input("B", {c}),
                             1e-5, "y"));
    const Kernel k(p, default_schedule(p, host_target()), host_target());
    std::mt19937 rng(5);
    const std::map<std::string, HostTensor> in = {{"X", random_tensor(shape, rng, -4, 4)},
                                                  {"G", random_tensor({c}, rng)},
                                                  {"B", random_tensor({c}, rng)}};
    INFO("layer_norm " << shape[0] << "x" << c);
    CHECK(tolerance_ratio(run_f32(k, in)[0], interpret(p, in).at("y"), 1e-4, 1e-5) <= 1.0);
  }
  // The statistics of [12245, 22] and of a symbolic row count: per block of
  // `lanes` rows, vectorized across them, the reduction outside.
  for (const Dim rows : {Dim(12245), Dim::symbol("R")}) {
    Program p("short");
    p.output(ops::softmax(p.input("X", {rows, Dim(22)}), -1, "y"));
    const Schedule s = default_schedule(p, host_target());
    for (const auto& [n, ss] : s.stages) {
      INFO(n);
      if (!p.stage(n).reduce) continue;
      CHECK_FALSE(ss.rfactor);
      REQUIRE(ss.update);
      CHECK(ss.update->vectorize == p.stage(n).vars.back());
      CHECK(ss.update->order.front() == p.stage(n).rvars.back().name);
    }
    const Kernel k(p, s, host_target());
    std::mt19937 rng(8);
    for (const int64_t n : {int64_t{1}, int64_t{15}, int64_t{16}, int64_t{1001}}) {
      const std::map<std::string, HostTensor> in = {
          {"X", random_tensor({rows.is_symbolic() ? n : 12245, 22}, rng, -4, 4)}};
      CHECK(tolerance_ratio(run_f32(k, in)[0], interpret(k.program(), in).at("y"), 1e-5, 1e-7) <=
            1.0);
      if (!rows.is_symbolic()) break;
    }
  }
}

TEST_CASE("default row-wise: a row group's passes and exps count toward its threads",
          "[defaults][reduction]") {
  // Softmax over [671, 14] has 9,394 elements, under kMinParallelElements
  // alone, but 4 passes over them, one an exp: parallel over the rows. A
  // row add of the same size stays serial; so does a softmax 16 times smaller.
  const Target t = host_target();
  if (t.cores < 2) return;
  const auto parallel = [&](const std::vector<int64_t>& shape, bool softmax) {
    Program p("rows");
    const Tensor x = p.input("X", {shape[0], shape[1]});
    p.output(softmax ? ops::softmax(x, -1, "y") : ops::add(x, x, "y"));
    const Schedule s = default_schedule(p, t);
    const Kernel k(p, s, t);
    std::mt19937 rng(3);
    const std::map<std::string, HostTensor> in = {{"X", random_tensor(shape, rng, -4, 4)}};
    CHECK(tolerance_ratio(run_f32(k, in)[0], interpret(p, in).at("y"), 1e-5, 1e-7) <= 1.0);
    return !s.stages.at("y").loops.parallel.empty();
  };
  CHECK(parallel({671, 14}, true));
  CHECK_FALSE(parallel({671, 14}, false));
  CHECK_FALSE(parallel({42, 14}, true));
}

TEST_CASE("rfactor: guarded tails and chunks across cores validate, round-trip and explain",
          "[rfactor][defaults]") {
  Program p("rowred");
  p.output(p.define_reduce("r", {"i"}, {3}, ReduceOp::Sum, {{"j", Dim(1001)}},
                           p.input("X", {3, 1001})(var("i"), var("j")), OpKind::Reduction,
                           "reduce"));
  std::mt19937 rng(3);
  const std::map<std::string, HostTensor> in = {{"X", small_integers({3, 1001}, rng)}};
  auto run = [&](const RFactor& rf) {
    Schedule s;
    s["r"].rfactor = rf;
    validate(p, s, &host_target());
    CHECK(schedule_from_json_string(schedule_to_json_string(s, 2)) == s);
    const Kernel k(p, s, host_target());
    return tolerance_ratio(run_f32(k, in)[0], interpret(p, in).at("r"), 0, 1e-9);
  };
  const int lanes = host_target().vector_lanes(DType::F32);
  CHECK(run(RFactor{"j", 2 * lanes}) <= 1.0);  // 1001 = 2 lanes x 31 + a last step shifted inwards
  CHECK(run(RFactor{"j", 100, true, 0}) <= 1.0);      // 11 chunks, the last one guarded
  CHECK(run(RFactor{"j", 300, true, lanes}) <= 1.0);  // with lanes of partials in each
  CHECK(run(RFactor{"j", 500, true, 4 * lanes}) <= 1.0);
  Schedule s;
  s["r"].rfactor = RFactor{"j", 300, true, lanes};
  CHECK_THAT(explain(p, s, &host_target()), Contains("across cores in chunks of 300") &&
                                                Contains("parallel for j_part in [0, 4)"));
  auto fails = [&](const RFactor& rf, const std::string& text) {
    Schedule e;
    e["r"].rfactor = rf;
    CHECK_THROWS_WITH(validate(p, e, &host_target()), Contains(text));
  };
  fails(RFactor{"j", 1001, true, 0}, "less than the extent");
  fails(RFactor{"j", 300, true, 3}, "vector_lanes 3");
  fails(RFactor{"j", 2 * lanes, false, lanes}, "applies to an rfactor across cores");
  if (lanes > 2) fails(RFactor{"j", lanes + 2, false, 0}, "the last step guarded");
  CHECK_THROWS_WITH(
      schedule_from_json_string(
          R"({"schema": 1, "stages": {"r": {"rfactor": {"rvar": "j", "factor": 16, "parallel": 1}}}})"),
      Contains("stages.r.rfactor.parallel"));
}

// Rows too short for lanes of partials: a vector of rows per step
// (lanes_of_rows in Reduction.cpp), exact on integer inputs at row counts
// below, at and past a vector and a core's block, and symbolic.
TEST_CASE("default reductions: short rows reduce a vector of rows at a time",
          "[defaults][reduction]") {
  const Build pool = [](const Tensor& x) { return ops::global_avg_pool(x, "pool"); };
  // Not an output (an output's update keeps the scalar loop): a sum then scaled.
  const Build rows = [](const Tensor& x) {
    return ops::mul(ops::reduce_sum(x, {1}, false, "rows"), ops::reduce_sum(x, {1}, false, "rows2"),
                    "y");
  };
  {
    Program p("pool");
    p.output(pool(p.input("X", {1, 2048, 7, 7})));
    const Schedule s = default_schedule(p, host_target());
    const StageSchedule& ps = entry(p, s, "pool_sum");
    REQUIRE(ps.update);
    CHECK_FALSE(ps.update->vectorize.empty());
    // Its 49 steps unrolled: the rows' loads staged as dense vectors, not gathers.
    CHECK(ps.update->unroll.size() == 2);
    for (const auto& [loop, factor] : ps.update->unroll) CHECK(factor == 0);
  }
  {
    // A mean along a last dim of 28: unrolled; of 100 steps: a loop.
    const auto unrolled = [](int64_t n) {
      Program p("mean");
      const Tensor m = ops::reduce_mean(p.input("X", {64, 300, n}), {2}, false, "m");
      p.output(ops::mul(m, m, "y"));
      const Schedule s = default_schedule(p, host_target());
      const StageSchedule& ms = entry(p, s, "m_sum");
      return ms.update && ms.update->unroll.count("r2") > 0;
    };
    CHECK(unrolled(28));
    CHECK_FALSE(unrolled(100));
  }
  // Sums of 49 integers below 2^24 are exact in f32; the mean divides once (1 rounding).
  CHECK(worst(pool, {{1, 2048, 7, 7}, {2, 37, 3, 3}, {1, 16, 5, 7}, {1, 3, 2, 2}}, false, 1.2e-7,
              0) <= 1.0);
  CHECK(worst(rows, {{4096, 9}, {1000, 5}, {17, 3}, {33, 1}}, false, 1.2e-7, 0) <= 1.0);
  CHECK(worst(rows, {{4096, 9}, {17, 3}}, true, 1.2e-7, 0) <= 1.0);
  CHECK(worst(rows, {{241, 28}, {97, 64}, {40, 63}}, false, 1.2e-7, 0) <= 1.0);
  // An output sum of short rows reduces a vector of rows into an accumulator
  // block (output_lanes_of_rows), exact; so does an output global max pool.
  const Build out = [](const Tensor& x) { return ops::reduce_sum(x, {1}, false, "rows"); };
  {
    Program p("out_rows");
    p.output(out(p.input("X", {4096, 9})));
    const Schedule s = default_schedule(p, host_target());
    const StageSchedule& rs = entry(p, s, "rows");
    CHECK_FALSE(rs.accumulator_at.empty());
    REQUIRE(rs.update);
    CHECK_FALSE(rs.update->vectorize.empty());
  }
  CHECK(worst(out, {{4096, 9}, {17, 3}, {1000, 7}, {8193, 5}, {33, 1}, {31, 2}}, false, 0, 0) <=
        1.0);
  CHECK(worst(out, {{4096, 9}, {17, 3}, {8193, 5}, {1, 1}}, true, 0, 0) <= 1.0);
  const Build max_pool = [](const Tensor& x) { return ops::global_max_pool(x, "gmax"); };
  CHECK(worst(max_pool, {{1, 2048, 7, 7}, {2, 37, 3, 3}, {1, 3, 2, 2}}, false, 0, 0) <= 1.0);
  CHECK(worst(max_pool, {{1, 2048, 7, 7}, {1, 1000, 1, 1}}, true, 0, 0) <= 1.0);
}

// Short rows of whole narrow vectors (Reduction.cpp, short_row_rfactor):
// lanes of partials of the widest width that splits the row into 2+ steps,
// from one full vector of row for an output and two for a stage feeding
// another; shorter rows keep a vector of rows per step. Exact on integers.
TEST_CASE("default reductions: short rows of whole narrow vectors keep lanes of partials",
          "[defaults][reduction]") {
  const int lanes = host_target().vector_lanes(DType::F32);
  if (lanes != 16) return;  // the widths below are an AVX-512 target's
  const auto factor = [](int64_t n, bool output) {
    Program p("rows");
    const Tensor r = ops::reduce_sum(p.input("X", {300, n}), {1}, false, "r");
    p.output(output ? r : ops::mul(r, r, "y"));
    const Schedule s = default_schedule(p, host_target());
    const StageSchedule* rs = s.find("r");
    return rs && rs->rfactor ? rs->rfactor->factor : 0;
  };
  // Outputs: from one vector (16 -> 8 lanes, 2 steps; 20 -> 4, 5 steps).
  CHECK(factor(8, true) == 0);
  CHECK(factor(12, true) == 0);
  CHECK(factor(16, true) == 8);
  CHECK(factor(20, true) == 4);
  CHECK(factor(48, true) == 16);
  CHECK(factor(90, true) == 0);  // 90 = 2 x 45: no width of 4+ lanes divides it
  // Feeding another stage: from two vectors.
  CHECK(factor(28, false) == 0);
  CHECK(factor(32, false) == 16);
  CHECK(factor(40, false) == 8);
  CHECK(factor(60, false) == 4);
  CHECK(factor(96, false) == 16);  // 6 vectors: row_rfactor's, as before
  const Build out = [](const Tensor& x) { return ops::reduce_sum(x, {1}, false, "rows"); };
  const Build mid = [](const Tensor& x) {
    const Tensor r = ops::reduce_sum(x, {1}, false, "rows");
    return ops::mul(r, r, "y");
  };
  const Build max_out = [](const Tensor& x) { return ops::reduce_max(x, {1}, false, "rows"); };
  CHECK(worst(out, {{1000, 16}, {333, 20}, {77, 24}, {5, 48}, {1, 80}}, false, 0, 0) <= 1.0);
  CHECK(worst(max_out, {{1000, 16}, {333, 20}, {77, 56}}, false, 0, 0) <= 1.0);
  CHECK(worst(mid, {{1000, 32}, {333, 40}, {77, 60}, {3, 80}}, false, 1.2e-7, 0) <= 1.0);
}

// A symbolic row may be short or long at run time: lanes of partials for rows
// of at least 6 vectors, a vector of rows per step below (the rfactor's
// short_below version). One kernel per build runs both versions here: short
// rows (a 7 x 7 window, 1 x 1, prime 13 x 5), long ones (3 x 131, 2 x 1031)
// and row counts below, at and past a vector; exact on integer inputs.
TEST_CASE("default reductions: symbolic rows run lanes of partials or a vector of rows by length",
          "[defaults][reduction]") {
  const Build pool = [](const Tensor& x) { return ops::global_avg_pool(x, "pool"); };
  const Build rows = [](const Tensor& x) {
    return ops::mul(ops::reduce_sum(x, {1}, false, "rows"), ops::reduce_sum(x, {1}, false, "rows2"),
                    "y");
  };
  {
    Program p("pool");
    p.output(pool(p.input("X", dims({1, 2048, 7, 7}, true))));
    const Schedule s = default_schedule(p, host_target());
    const StageSchedule& ps = entry(p, s, "pool_sum");
    REQUIRE(ps.rfactor);
    CHECK(ps.rfactor->short_below == 6 * host_target().vector_lanes(DType::F32));
    REQUIRE(ps.update);
    CHECK_FALSE(ps.update->vectorize.empty());
    CHECK_NOTHROW(validate(p, s, &host_target()));
    const Schedule back = schedule_from_json(schedule_to_json(s));
    REQUIRE(back.stages.at("pool_sum").rfactor);
    CHECK(*back.stages.at("pool_sum").rfactor == *ps.rfactor);
    CHECK_THAT(explain(p, s, &host_target()), Contains("< 96:"));
  }
  CHECK(worst(pool,
              {{1, 2048, 7, 7},
               {2, 37, 3, 3},
               {1, 16, 13, 5},
               {1, 3, 1, 1},
               {1, 17, 3, 131},
               {2, 5, 2, 1031}},
              true, 1.2e-7, 0) <= 1.0);
  CHECK(worst(rows, {{4096, 9}, {17, 3}, {1, 1}, {33, 97}, {5, 1031}, {16, 95}}, true, 1.2e-7, 0) <=
        1.0);
  // A static count of rows under two vectors keeps its block (random program
  // seed 21: a tile of 176 rows over 16 rows).
  {
    Program p("few_rows");
    p.output(
        ops::relu(ops::reduce_min(p.input("X", {Dim(16), Dim::symbol("C")}), {1}, true, "m"), "y"));
    CHECK_NOTHROW(validate(p, default_schedule(p, host_target()), &host_target()));
  }
  // A static row gets no such version, and short_below needs a symbolic extent.
  Program p("static_rows");
  p.output(rows(p.input("X", {Dim(64), Dim(1031)})));
  const Schedule s = default_schedule(p, host_target());
  REQUIRE(entry(p, s, "rows").rfactor);
  CHECK(entry(p, s, "rows").rfactor->short_below == 0);
  Schedule bad = s;
  bad["rows"].rfactor->short_below = 96;
  CHECK_THROWS_WITH(validate(p, bad, &host_target()), Contains("short_below"));
}
