// The amx directive (directives/Amx.h, backends/Amx.cpp): contractions on
// AMX tiles. Random shapes of plain, transposed and batched matmuls run on
// the tiles and are checked against float64 on the bf16-rounded inputs (the
// only rounding AMX adds); a bf16 program's contraction is exact. The checks
// name the stage, the value and what is valid; the tuner's mutator offers
// amx on f32 factors only under an accuracy budget that admits bf16.
#include <catch2/catch.hpp>

#include "Helpers.h"
#include "autotuner/Mutator.h"
#include "schedules/Explain.h"
#include "schedules/ScheduleJson.h"
#include "schedules/Validate.h"
#include "schedules/directives/Amx.h"
#include "target/Target.h"

using namespace pto;
using namespace pto::test;
using Catch::Matchers::Contains;

namespace {

enum class Form { Plain, Transposed, Batched };

// C = A @ B (B [K, N]), A @ W^T (W [N, K]), or per batch.
Program matmul(Form f, int64_t M, int64_t N, int64_t K, int64_t batch = 2) {
  Program p("mm");
  const Expr b = var("b"), i = var("i"), j = var("j"), k = var("k");
  if (f == Form::Batched) {
    const Tensor a = p.input("A", {batch, M, K}), w = p.input("B", {batch, K, N});
    p.output(p.define_reduce("C", {"b", "i", "j"}, {batch, M, N}, ReduceOp::Sum, {{"k", Dim(K)}},
                             a(b, i, k) * w(b, k, j), OpKind::Contraction, "matmul"));
    return p;
  }
  const Tensor a = p.input("A", {M, K});
  const Tensor w = f == Form::Plain ? p.input("B", {K, N}) : p.input("B", {N, K});
  const Expr rhs = f == Form::Plain ? w(k, j) : w(j, k);
  p.output(p.define_reduce("C", {"i", "j"}, {M, N}, ReduceOp::Sum, {{"k", Dim(K)}}, a(i, k) * rhs,
                           OpKind::Contraction, "matmul"));
  return p;
}

Schedule amx_schedule() {
  Schedule s;
  s["C"].amx = true;
  return s;
}

}  // namespace

TEST_CASE("amx: random matmul shapes match float64 on bf16-rounded inputs", "[amx]") {
  const Target& t = host_target();
  if (!t.amx) {
    WARN("this CPU has no AMX tiles; the amx kernels are not run");
    return;
  }
  std::mt19937 rng(2026);
  for (int trial = 0; trial < 16; ++trial) {
    const Form f = static_cast<Form>(trial % 3);
    const int64_t M = std::uniform_int_distribution<int64_t>(1, 40)(rng);
    const int64_t N = 16 * std::uniform_int_distribution<int64_t>(1, 4)(rng);
    const int64_t K = std::uniform_int_distribution<int64_t>(1, 180)(rng);
    INFO("form " << trial % 3 << ": " << M << " x " << N << " x " << K);
    const Program p = matmul(f, M, N, K);
    std::map<std::string, HostTensor> in = random_inputs(p, rng);
    for (auto& [name, h] : in)
      for (double& v : h.data) v = round_bf16(v);
    const Schedule s = amx_schedule();
    validate(p, s, &t);
    const HostTensor want = interpret(p, in).at("C");
    // bf16 x bf16 products are exact in f32; the f32 sum of K terms in
    // [-1, 1] errs by at most K * 2^-24 per term added: K^2 2^-24 in all.
    const double atol = static_cast<double>(K * K) * std::ldexp(1.0, -24) + 1e-6;
    CHECK(tolerance_ratio(run_f32(Kernel(p, s, t), in)[0], want, 1e-30, atol) <= 1.0);
  }
}

TEST_CASE("amx: f32 factors are rounded to bf16, within bf16's error of float64", "[amx]") {
  const Target& t = host_target();
  if (!t.amx) {
    WARN("this CPU has no AMX tiles; the amx kernels are not run");
    return;
  }
  std::mt19937 rng(7);
  const int64_t M = 32, N = 48, K = 256;
  const Program p = matmul(Form::Transposed, M, N, K);
  const auto in = random_inputs(p, rng);
  const HostTensor want = interpret(p, in).at("C");
  const HostTensor got = run_f32(Kernel(p, amx_schedule(), t), in)[0];
  // Each factor rounds by at most 2^-9 relative: a product by 2^-8, the sum
  // of K products of magnitude <= 1 by K 2^-8 at worst (random signs: far less).
  CHECK(tolerance_ratio(got, want, 1e-30, K * std::ldexp(1.0, -8)) <= 1.0);
  // ... and it does round: the result is not the f32 one.
  double diff = 0;
  for (size_t n = 0; n < got.data.size(); ++n)
    diff = std::max(diff, std::abs(got.data[n] - want.data[n]));
  CHECK(diff > 1e-5);
}

TEST_CASE("amx: the check names the stage, the value and what is valid", "[amx]") {
  const Target spr = parse_target("x86-64-sapphirerapids");
  const Target avx512 = parse_target("x86-64-avx512");
  const Program p = matmul(Form::Plain, 24, 32, 64);
  CHECK_THROWS_WITH(validate(p, amx_schedule(), &avx512),
                    Contains("stage 'C': amx needs a CPU with AMX tiles"));
  validate(p, amx_schedule(), &spr);
  Schedule tiled = amx_schedule();
  tiled["C"].loops.tile["i"] = {4};
  CHECK_THROWS_WITH(validate(p, tiled, &spr), Contains("schedules the tile loops itself"));
  // Placed in a consumer's loop: the stage must be at root.
  Program two("mm_relu");
  {
    const Tensor a = two.input("A", {32, 64}), b = two.input("B", {64, 32});
    const Tensor c = two.define_reduce("C", {"i", "j"}, {32, 32}, ReduceOp::Sum, {{"k", Dim(64)}},
                                       a(var("i"), var("k")) * b(var("k"), var("j")),
                                       OpKind::Contraction, "matmul");
    two.output(two.define("R", {"i", "j"}, {32, 32}, max(c(var("i"), var("j")), 0.0f),
                          OpKind::Elementwise, "relu"));
  }
  Schedule placed = amx_schedule();
  placed["C"].compute = Placement{Placement::Kind::At, "R", "i"};
  CHECK_THROWS_WITH(validate(two, placed, &spr), Contains("use \"compute\": \"root\""));
  // Columns that are not whole tiles, a non-product.
  CHECK_THROWS_WITH(validate(matmul(Form::Plain, 16, 40, 64), amx_schedule(), &spr),
                    Contains("columns (40) are not whole tiles of 16"));
  Program sq("sumsq");
  const Tensor a = sq.input("A", {16, 64});
  sq.output(sq.define_reduce("S", {"i", "j"}, {16, 16}, ReduceOp::Sum, {{"k", Dim(64)}},
                             a(var("i"), var("k")) * a(var("j"), var("k")) + 1.0f,
                             OpKind::Contraction, "gram"));
  Schedule ss;
  ss["S"].amx = true;
  CHECK_THROWS_WITH(validate(sq, ss, &spr), Contains("its value is not a product of two factors"));
  // JSON: a bool.
  CHECK_THROWS_WITH(schedule_from_json_string(R"({"schema": 1, "stages": {"C": {"amx": 16}}})"),
                    Contains("stages.C.amx"));
  const Schedule back = schedule_from_json(schedule_to_json(amx_schedule()));
  CHECK(back == amx_schedule());
  CHECK_THAT(explain(p, amx_schedule(), &spr), Contains("tdpbf16ps"));
}

TEST_CASE("amx: the mutator offers it on f32 factors only under a bf16 accuracy budget",
          "[amx][tuner]") {
  const Target spr = parse_target("x86-64-sapphirerapids");
  const Program p = matmul(Form::Plain, 32, 32, 64);
  const auto offered = [&](double budget) {
    const tuner::Mutator m(p, spr, budget);
    std::mt19937_64 rng(5);
    for (int n = 0; n < 2000; ++n)
      if (const auto s = m.mutate(Schedule{}, rng, 1))
        if (const StageSchedule* c = s->find("C"); c && c->amx) return true;
    return false;
  };
  CHECK_FALSE(offered(0));
  CHECK(offered(1e-2));
  // A contraction of bf16 values rounds nothing: exact.
  Program b16("mm16");
  const Tensor a = b16.input("A", {16, 32}, DType::BF16), w = b16.input("B", {32, 16}, DType::BF16);
  b16.output(b16.define_reduce(
      "C", {"i", "j"}, {16, 16}, ReduceOp::Sum, {{"k", Dim(32)}},
      cast(DType::F32, a(var("i"), var("k"))) * cast(DType::F32, w(var("k"), var("j"))),
      OpKind::Contraction, "matmul"));
  const auto c16 = directives::amx_contraction(b16, b16.stage("C"));
  REQUIRE(c16);
  CHECK(c16->exact);
  CHECK_FALSE(directives::amx_rounds(b16, b16.stage("C"), amx_schedule()["C"]));
  CHECK(directives::amx_rounds(p, p.stage("C"), amx_schedule()["C"]));
}
