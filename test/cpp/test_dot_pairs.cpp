// The dot_pairs directive (Schedule.h): a reduction summed in adjacent pairs
// per vector lane (x86 vdpbf16ps for bf16 operands). A bf16 matmul whose B is
// pair-interleaved ([K/2, N, 2]) is checked against the float64 interpreter
// over several accumulator tiles; validation errors name the stage, the value
// and what is valid.
#include <catch2/catch.hpp>

#include "Helpers.h"
#include "target/Target.h"
#include "dsl/ops/Ops.h"
#include "schedules/defaults/Defaults.h"
#include "schedules/Explain.h"
#include "schedules/ScheduleJson.h"
#include "schedules/Validate.h"

using namespace pto;
using namespace pto::test;
using Catch::Matchers::Contains;

namespace {

// C[i, j] = sum_k A[i, k] B[k, j] with B stored pair-interleaved: Bp[k / 2, j, k % 2].
Program pair_matmul(int64_t M, int64_t N, int64_t K) {
  Program p("mm_pairs");
  const Tensor a = p.input("A", {M, K}, DType::BF16);
  const Tensor b = p.input("Bp", {K / 2, N, 2}, DType::BF16);
  const Expr i = var("i"), j = var("j"), k = var("k");
  p.output(p.define_reduce("C", {"i", "j"}, {M, N}, ReduceOp::Sum, {{"k", Dim(K)}},
                           cast(DType::F32, a(i, k)) * cast(DType::F32, b(k / 2, j, k % 2)), OpKind::Contraction,
                           "matmul"));
  return p;
}

// Values k / 64 for k in [-64, 64]: exact in bf16.
HostTensor bf16_values(std::vector<int64_t> shape, std::mt19937& rng) {
  int64_t n = 1;
  for (int64_t e : shape) n *= e;
  std::uniform_int_distribution<int> d(-64, 64);
  HostTensor t{shape, std::vector<double>(static_cast<size_t>(n))};
  for (double& v : t.data) v = d(rng) / 64.0;
  return t;
}

// The matmul micro-kernel shape: a tile_i x tile_j accumulator tile, the
// reduction inside it with j in vector lanes and i unrolled, k in pairs.
Schedule pair_schedule(int64_t tile_i, int64_t tile_j) {
  Schedule s;
  StageSchedule& c = s["C"];
  c.loops.tile["i"] = {tile_i};
  c.loops.tile["j"] = {tile_j};
  c.loops.order = {"i_o", "j_o", "i_i", "j_i"};
  c.loops.vectorize = "j_i";
  c.loops.vector_width = 16;
  c.accumulator_at = "j_o";
  LoopSchedule up;
  up.order = {"k", "i", "j"};
  up.vectorize = "j";
  up.vector_width = 16;
  up.unroll["i"] = 0;
  up.unroll["j"] = 0;
  c.update = up;
  c.dot_pairs = "k";
  return s;
}

}  // namespace

TEST_CASE("dot_pairs: a pair-interleaved bf16 matmul matches float64", "[dot_pairs]") {
  const Target t = parse_target("host");
  std::mt19937 rng(31);
  const int64_t M = 12, N = 64, K = 96;
  const Program p = pair_matmul(M, N, K);
  const HostTensor a = bf16_values({M, K}, rng), b = bf16_values({K / 2, N, 2}, rng);
  const HostTensor want = interpret(p, {{"A", a}, {"Bp", b}}).at("C");
  // Products of bf16 values are exact in f32; the f32 sum of 96 terms in
  // [-1, 1] (pairs first, then lanes) errs by at most 96 * 2^-24 * 96 = 5.5e-4.
  auto check = [&](const Schedule& s) {
    validate(p, s, &t);
    CHECK(tolerance_ratio(run_f32(Kernel(p, s, t), {{"A", a}, {"Bp", b}})[0], want, 1e-30, 5.5e-4) <= 1.0);
  };
  for (const auto& [ti, tj] : std::vector<std::pair<int64_t, int64_t>>{{4, 32}, {6, 16}, {12, 32}, {3, 64}}) {
    INFO("tile " << ti << " x " << tj);
    check(pair_schedule(ti, tj));
  }
  {
    // A tile of the pair loop: k counts pairs under dot_pairs, 48 pairs in tiles of 8.
    INFO("k tiled by 8 pairs");
    Schedule s = pair_schedule(4, 32);
    s["C"].update->tile["k"] = {8};
    s["C"].update->order = {"k_o", "k_i", "i", "j"};
    CHECK_THAT(explain(p, s, &t), Contains("for k_i in [0, 8)"));
    check(s);
  }
  const Schedule s = pair_schedule(4, 32);
  CHECK_THAT(explain(p, s, &t), Contains("[dot_pairs: k = 2 k + k_2"));
  CHECK(schedule_from_json_string(schedule_to_json_string(s)) == s);
}

TEST_CASE("dot_pairs: validation errors name the stage, the value and what is valid", "[dot_pairs][errors]") {
  const Target t = parse_target("host");
  const Program p = pair_matmul(8, 32, 16);
  auto fails = [&](const Schedule& s, const std::string& text) {
    INFO(text);
    CHECK_THROWS_AS(validate(p, s, &t), ScheduleError);
    CHECK_THROWS_WITH(validate(p, s, &t), Contains(text));
  };
  Schedule unknown = pair_schedule(4, 32);
  unknown["C"].dot_pairs = "q";
  fails(unknown, "dot_pairs names 'q', not a reduction variable; reduction variables: k");
  Schedule no_lanes = pair_schedule(4, 32);
  no_lanes["C"].update->vectorize.clear();
  fails(no_lanes, "dot_pairs needs the update's vector lanes");
  Schedule unrolled = pair_schedule(4, 32);
  unrolled["C"].update->unroll["k"] = 0;
  fails(unrolled, "do not unroll or parallelize it in the update (tiles of it count pairs)");
  Schedule tiled = pair_schedule(4, 32);  // k = 16 is 8 pairs: a tile of 16 does not fit
  tiled["C"].update->tile["k"] = {16};
  tiled["C"].update->order = {"k_o", "k_i", "i", "j"};
  fails(tiled, "tile 16 on dim 'k' exceeds extent 8");
  tiled["C"].update->tile["k"] = {4};
  CHECK_NOTHROW(validate(p, tiled, &t));
  Schedule no_tile = pair_schedule(4, 32);
  no_tile["C"].accumulator_at.clear();
  fails(no_tile, "dot_pairs on an output needs an accumulator tile (accumulator_at)");
  Program p15("odd");  // K = 15 does not pair
  const Tensor a = p15.input("A", {4, 15}, DType::BF16), b = p15.input("B", {15, 16}, DType::BF16);
  p15.output(p15.define_reduce("C", {"i", "j"}, {4, 16}, ReduceOp::Sum, {{"k", Dim(15)}},
                               cast(DType::F32, a(var("i"), var("k"))) * cast(DType::F32, b(var("k"), var("j"))),
                               OpKind::Contraction, "matmul"));
  CHECK_THROWS_WITH(validate(p15, pair_schedule(4, 16), &t), Contains("dot_pairs needs an even static extent of 'k', got 15"));
}

// conv2d_nhwc with blocked-pair weights [O/B, KH, KW, C/2, B, 2]: on an
// avx512_bf16 target the default schedule sums the channel pairs with
// dot_pairs (DotPairs.cpp); on others it keeps the converting path. Both must
// give the float64 answer.
TEST_CASE("dot_pairs: the default schedule of a bf16 conv with pair weights matches float64", "[dot_pairs][conv]") {
  const Target t = parse_target("host");
  std::mt19937 rng(37);
  const int64_t H = 9, C = 16, O = 32, B = 16;
  for (const auto& [pad, stride] : std::vector<std::pair<int, int>>{{1, 1}, {0, 2}}) {
    INFO("pad " << pad << ", stride " << stride);
    Program p("conv_pairs");
    const Tensor x = p.input("X", {1, H, H, C}, DType::BF16);
    const Tensor w = p.input("W", {O / B, 3, 3, C / 2, B, 2}, DType::BF16);
    p.output(ops::relu(ops::conv2d_nhwc(x, w, {}, {stride, stride}, {pad, pad}, {1, 1}, "conv"), "Y"));
    Schedule s = default_schedule(p, t);
    const StageSchedule* acc = s.find("conv");
    REQUIRE(acc);
    CHECK(acc->dot_pairs == (t.avx512_bf16 ? "c" : ""));
    for (const Stage& st : p.stages())  // f32 products and sums, as bench_resnet50 --bf16 runs them
      if (s.find(st.name) && s.find(st.name)->compute.kind != Placement::Kind::Inline) {
        s[st.name].precision.compute = DType::F32;
        if (st.reduce) s[st.name].precision.accumulate = DType::F32;
      }
    validate(p, s, &t);
    const HostTensor xv = bf16_values({1, H, H, C}, rng), wv = bf16_values({O / B, 3, 3, C / 2, B, 2}, rng);
    const HostTensor want = interpret(p, {{"X", xv}, {"W", wv}}).at("Y");
    std::vector<uint16_t> xb, wb;
    for (double v : xv.data) xb.push_back(to_bf16(static_cast<float>(v)));
    for (double v : wv.data) wb.push_back(to_bf16(static_cast<float>(v)));
    std::vector<int64_t> oshape;
    for (const Dim& d : p.stage("Y").shape) oshape.push_back(d.value);
    std::vector<uint16_t> y(static_cast<size_t>(static_numel(p.stage("Y").shape)), 0xffff);
    const Kernel k(p, s, t);
    k.run({{xb.data(), DType::BF16, {1, H, H, C}, {}}, {wb.data(), DType::BF16, {O / B, 3, 3, C / 2, B, 2}, {}}},
          {{y.data(), DType::BF16, oshape, {}}});
    HostTensor got{oshape, {}};
    for (const uint16_t b : y) got.data.push_back(from_bf16(b));
    // Products exact in f32, sums of 144 terms exact to ~1e-5; the bf16
    // output rounds by 2^-9 of each value (2^-8 with margin).
    CHECK(tolerance_ratio(got, want, 1.0 / 256, 1e-4) <= 1.0);
  }
}

TEST_CASE("dot_pairs: a strided view of a pair-read input is copied dense", "[dot_pairs][errors]") {
  const Target t = parse_target("host");
  const Program p = pair_matmul(4, 32, 16);
  const Kernel k(p, pair_schedule(4, 32), t);
  // b: pairs padded to 4 slots per (k/2, j), the view's ones and 2s in the slots it skips.
  std::vector<uint16_t> a(4 * 16, 0x3f80), b(8 * 32 * 4, 0x4000);
  for (size_t q = 0; q < b.size(); q += 4) b[q] = b[q + 1] = 0x3f80;
  std::vector<float> c(4 * 32, -1.0f);
  const BufferRef bv{b.data(), DType::BF16, {8, 32, 2}, {128, 4, 1}};  // every other pair slot
  k.run({{a.data(), DType::BF16, {4, 16}, {}}, bv}, {{c.data(), DType::F32, {4, 32}, {}}});
  for (const float v : c) CHECK(v == 16.0f);  // a row of 16 ones times the view's ones
}
