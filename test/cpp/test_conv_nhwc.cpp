// conv2d_nhwc (channels-last convolution, HWIO weights): the op against plain
// float64 loops over stride, padding, dilation and kernel sizes; its default
// schedule (the channels-last register tile, the materialized padded input) on
// ResNet-50 layer kinds at reduced spatial size; typed errors for bad shapes.
#include <catch2/catch.hpp>

#include "dsl/models/BlockedWeights.h"
#include "dsl/ops/Ops.h"
#include "schedules/Validate.h"
#include "schedules/defaults/Defaults.h"
#include "test/cpp/Helpers.h"

using namespace pto;
using namespace pto::test;

namespace {

struct NhwcCase {
  int64_t n, h, w, c, o, kh, kw;
  std::array<int, 2> stride, pad, dil;
  bool bias;
};

// out[n, y, x, o] = b[o] + sum_{ky, kx, c} in[n, y*s + ky*d - p, x*s + kx*d - p, c] * w[ky, kx, c, o], zero outside.
HostTensor reference(const NhwcCase& k, const HostTensor& x, const HostTensor& w, const HostTensor* b) {
  const int64_t oh = (k.h + 2 * k.pad[0] - k.dil[0] * (k.kh - 1) - 1) / k.stride[0] + 1;
  const int64_t ow = (k.w + 2 * k.pad[1] - k.dil[1] * (k.kw - 1) - 1) / k.stride[1] + 1;
  HostTensor r{{k.n, oh, ow, k.o}, std::vector<double>(static_cast<size_t>(k.n * oh * ow * k.o))};
  size_t idx = 0;
  for (int64_t n = 0; n < k.n; ++n)
    for (int64_t y = 0; y < oh; ++y)
      for (int64_t xx = 0; xx < ow; ++xx)
        for (int64_t o = 0; o < k.o; ++o) {
          double acc = b ? b->data[static_cast<size_t>(o)] : 0.0;
          for (int64_t ky = 0; ky < k.kh; ++ky)
            for (int64_t kx = 0; kx < k.kw; ++kx) {
              const int64_t iy = y * k.stride[0] + ky * k.dil[0] - k.pad[0], ix = xx * k.stride[1] + kx * k.dil[1] - k.pad[1];
              if (iy < 0 || iy >= k.h || ix < 0 || ix >= k.w) continue;
              for (int64_t c = 0; c < k.c; ++c)
                acc += x.data[static_cast<size_t>(((n * k.h + iy) * k.w + ix) * k.c + c)] *
                       w.data[static_cast<size_t>(((ky * k.kw + kx) * k.c + c) * k.o + o)];
            }
          r.data[idx++] = acc;
        }
  return r;
}

}  // namespace

TEST_CASE("conv2d_nhwc matches float64 loops (stride, padding, dilation, kernel sizes)", "[ops][conv_nhwc]") {
  const Target t = parse_target("host");
  std::mt19937 rng(31);
  const std::vector<NhwcCase> cases = {
      {1, 7, 9, 5, 6, 1, 1, {1, 1}, {0, 0}, {1, 1}, true},    // 1x1, odd sizes
      {2, 8, 7, 3, 17, 3, 3, {1, 1}, {1, 1}, {1, 1}, true},   // 3x3 pad 1, 17 channels (vector + tail)
      {1, 11, 10, 4, 32, 3, 3, {2, 2}, {1, 1}, {1, 1}, false},  // stride 2, no bias
      {1, 13, 13, 3, 16, 7, 7, {2, 2}, {3, 3}, {1, 1}, true},  // the 7x7/s2/p3 stem
      {1, 9, 8, 6, 20, 1, 1, {2, 2}, {0, 0}, {1, 1}, true},   // 1x1 stride 2 (downsample)
      {1, 9, 9, 2, 5, 3, 2, {1, 2}, {0, 1}, {2, 1}, true},    // rectangular kernel, dilation, asymmetric stride
  };
  for (const NhwcCase& k : cases) {
    INFO("case " << k.h << "x" << k.w << "x" << k.c << " -> " << k.o << " kernel " << k.kh << "x" << k.kw << " stride "
                 << k.stride[0] << " pad " << k.pad[0]);
    Program p("nhwc");
    const Tensor x = p.input("X", {k.n, k.h, k.w, k.c}), w = p.input("W", {k.kh, k.kw, k.c, k.o});
    const Tensor b = k.bias ? p.input("b", {k.o}) : Tensor();
    p.output(ops::conv2d_nhwc(x, w, b, k.stride, k.pad, k.dil, "Y"));
    std::map<std::string, HostTensor> in{{"X", random_tensor({k.n, k.h, k.w, k.c}, rng)},
                                         {"W", random_tensor({k.kh, k.kw, k.c, k.o}, rng)}};
    if (k.bias) in["b"] = random_tensor({k.o}, rng);
    const HostTensor want = reference(k, in.at("X"), in.at("W"), k.bias ? &in.at("b") : nullptr);
    // The interpreter is the float64 oracle elsewhere; here it must agree with the loop to float64 rounding.
    CHECK(tolerance_ratio(interpret(p, in).at("Y"), want, 1e-12, 1e-12) <= 1.0);
    for (const Schedule& s : {plain_schedule(p), default_schedule(p, t)}) {
      validate(p, s, &t);
      // f32 sums of at most 7*7*6 = 294 products of values in [-1, 1]: 1e-5 relative + absolute.
      CHECK(tolerance_ratio(run_f32(Kernel(p, s, t), in)[0], want, 1e-5, 1e-5) <= 1.0);
    }
  }
}

TEST_CASE("conv2d_nhwc default schedules on two cores match float64 (row blocks, channel-tile blocks)", "[ops][conv_nhwc]") {
  // Two cores whatever the host has, so that the per-core blocks are built:
  // 7 rows in blocks of 4 (the last block shifted inwards), and channel
  // tiles in blocks of 256 / 512 / 1024 where the weights exceed half the L2
  // (at 7x7, in groups of 4 tiles sharing an accumulator buffer).
  Target t = parse_target("host");
  t.cores = 2;
  std::mt19937 rng(37);
  struct Case {
    NhwcCase k;
    bool relu;
  };
  const std::vector<Case> cases = {
      {{1, 7, 14, 16, 64, 3, 3, {1, 1}, {1, 1}, {1, 1}, true}, true},       // small weights: row blocks
      {{1, 7, 7, 256, 512, 3, 3, {1, 1}, {1, 1}, {1, 1}, true}, true},      // 4.7 MB of weights, bias + ReLU epilogue
      {{1, 14, 14, 512, 1024, 1, 1, {1, 1}, {0, 0}, {1, 1}, false}, false},  // 2 MB of weights, no epilogue
      {{1, 7, 7, 512, 2048, 1, 1, {1, 1}, {0, 0}, {1, 1}, false}, false},    // groups of 4 channel tiles, no epilogue
  };
  for (const Case& c : cases) {
    const NhwcCase& k = c.k;
    INFO("case " << k.h << "x" << k.w << "x" << k.c << " -> " << k.o << " kernel " << k.kh << "x" << k.kw);
    Program p("nhwc");
    const Tensor x = p.input("X", {k.n, k.h, k.w, k.c}), w = p.input("W", {k.kh, k.kw, k.c, k.o});
    const Tensor b = k.bias ? p.input("b", {k.o}) : Tensor();
    const Tensor conv = ops::conv2d_nhwc(x, w, b, k.stride, k.pad, k.dil, c.relu ? "conv" : "Y");
    p.output(c.relu ? ops::relu(conv, "Y") : conv);
    std::map<std::string, HostTensor> in{{"X", random_tensor({k.n, k.h, k.w, k.c}, rng)},
                                         {"W", random_tensor({k.kh, k.kw, k.c, k.o}, rng)}};
    if (k.bias) in["b"] = random_tensor({k.o}, rng);
    HostTensor want = reference(k, in.at("X"), in.at("W"), k.bias ? &in.at("b") : nullptr);
    if (c.relu)
      for (double& v : want.data) v = std::max(v, 0.0);
    const Schedule s = default_schedule(p, t);
    validate(p, s, &t);
    // f32 sums of up to 3*3*256 = 2304 products of values in [-1, 1] (sums
    // of magnitude ~16): rounding error ~ sqrt(2304) * 2^-24 * 16 = 5e-5, so
    // 1e-3 absolute + 1e-4 relative leaves a margin of about 20.
    CHECK(tolerance_ratio(run_f32(Kernel(p, s, t), in)[0], want, 1e-4, 1e-3) <= 1.0);
  }
}

TEST_CASE("conv2d_nhwc default schedule: register tiles over pixels x channels, a materialized padded input",
          "[schedule][conv_nhwc]") {
  // Two cores, as on the benchmark machine (the target takes the host's count).
  Target t = parse_target("x86-64-avx512");
  t.cores = 2;
  SECTION("56-wide map, small weights: 14 pixels x 2 vectors in the epilogue, rows in parallel") {
    Program p("nhwc");
    const Tensor x = p.input("X", {1, 56, 56, 64}), w = p.input("W", {1, 1, 64, 64});
    p.output(ops::relu(ops::conv2d_nhwc(x, w, p.input("b", {64}), {1, 1}, {0, 0}, {1, 1}, "conv"), "Y"));
    const Schedule s = default_schedule(p, t);
    const StageSchedule& y = *s.find("Y");
    const std::vector<std::string>& v = p.stage("Y").vars;
    CHECK(y.loops.tile.at(v[2]) == std::vector<int64_t>{14});
    CHECK(y.loops.tile.at(v[3]) == std::vector<int64_t>{32});
    CHECK(y.loops.vectorize == v[3] + "_i");
    // One contiguous block of 28 rows per core.
    CHECK(y.loops.tile.at(v[1]) == std::vector<int64_t>{28});
    CHECK(y.loops.parallel == std::vector<std::string>{v[1] + "_o"});
    // The tile's loops unrolled: the accumulators go from the FMAs through
    // bias + ReLU to the store in registers (constant indices into conv_acc).
    CHECK(y.loops.unroll.at(v[2] + "_i") == 0);
    CHECK(y.loops.unroll.at(v[3] + "_i") == 0);
    CHECK(s.find("conv_acc")->compute.kind == Placement::Kind::At);
  }
  SECTION("3-channel input (the stem): the padded copy vectorized along the row, channels unrolled") {
    Program p("nhwc");
    const Tensor x = p.input("X", {1, 224, 224, 3}), w = p.input("W", {7, 7, 3, 64});
    p.output(ops::relu(ops::conv2d_nhwc(x, w, p.input("b", {64}), {2, 2}, {3, 3}, {1, 1}, "conv"), "Y"));
    const Schedule s = default_schedule(p, t);
    validate(p, s, &t);
    const StageSchedule* pad = s.find("conv_pad");
    REQUIRE(pad != nullptr);
    const std::vector<std::string>& v = p.stage("conv_pad").vars;
    CHECK(pad->loops.vectorize == v[2]);
    CHECK(pad->loops.unroll.at(v[3]) == 0);
  }
  SECTION("one core: rows in parallel untiled") {
    Target t1 = t;
    t1.cores = 1;
    Program p("nhwc");
    const Tensor x = p.input("X", {1, 56, 56, 64}), w = p.input("W", {1, 1, 64, 64});
    p.output(ops::relu(ops::conv2d_nhwc(x, w, p.input("b", {64}), {1, 1}, {0, 0}, {1, 1}, "conv"), "Y"));
    const Schedule s = default_schedule(p, t1);
    const StageSchedule& y = *s.find("Y");
    const std::vector<std::string>& v = p.stage("Y").vars;
    CHECK(y.loops.tile.count(v[1]) == 0);
    CHECK(y.loops.parallel == std::vector<std::string>{v[1]});
  }
  SECTION("weights that outweigh the input but fit half the L2 (64 KB): the row-parallel register tile") {
    Program p("nhwc");
    const Tensor x = p.input("X", {1, 14, 14, 64}), w = p.input("W", {1, 1, 64, 256});
    p.output(ops::conv2d_nhwc(x, w, Tensor(), {1, 1}, {0, 0}, {1, 1}, "Y"));
    const Schedule s = default_schedule(p, t);
    const StageSchedule& acc = *s.find("Y");
    CHECK(acc.accumulator_at == "x_o");
    CHECK(acc.loops.parallel == std::vector<std::string>{"y_o"});
    CHECK(acc.loops.tile.at("y") == std::vector<int64_t>{7});
  }
  SECTION("no epilogue, weights outweigh the input and the L2: an accumulator buffer per channel tile") {
    Program p("nhwc");
    // 2 MB of weights, more than half of the target's 2 MB L2.
    const Tensor x = p.input("X", {1, 14, 14, 512}), w = p.input("W", {1, 1, 512, 1024});
    p.output(ops::conv2d_nhwc(x, w, Tensor(), {1, 1}, {0, 0}, {1, 1}, "Y"));
    const Schedule s = default_schedule(p, t);
    const StageSchedule& acc = *s.find("Y");
    CHECK(acc.compute.kind == Placement::Kind::Root);
    // One block of 16 channel tiles per core.
    CHECK(acc.loops.tile.at("o") == std::vector<int64_t>{512, 32});
    CHECK(acc.loops.parallel == std::vector<std::string>{"o_o"});
    CHECK(acc.accumulator_at == "n");
    REQUIRE(acc.update.has_value());
    CHECK(acc.update->tile.at("x") == std::vector<int64_t>{14});
    CHECK(acc.update->tile.at("c") == std::vector<int64_t>{128});  // blocks of the 1x1 reduction
  }
  SECTION("7-wide map, weights outweigh the input: channel tiles outermost, 2 x 7 pixel tiles, blocked reduction") {
    Program p("nhwc");
    const Tensor x = p.input("X", {1, 7, 7, 256}), w = p.input("W", {3, 3, 256, 512});
    p.output(ops::relu(ops::conv2d_nhwc(x, w, p.input("b", {512}), {1, 1}, {1, 1}, {1, 1}, "conv"), "Y"));
    const Schedule s = default_schedule(p, t);
    const StageSchedule& y = *s.find("Y");
    const std::vector<std::string>& v = p.stage("Y").vars;
    // A block of 256 channels per core, in groups of 4 channel tiles (49 x 128 floats of accumulators).
    CHECK(y.loops.tile.at(v[3]) == std::vector<int64_t>{256, 128});
    CHECK(y.loops.parallel == std::vector<std::string>{v[3] + "_o"});
    const StageSchedule& acc = *s.find("conv_acc");
    CHECK(acc.compute == Placement{Placement::Kind::At, "Y", v[3] + "_m"});
    REQUIRE(acc.update.has_value());
    CHECK(acc.update->tile.at("o") == std::vector<int64_t>{32});
    CHECK(acc.update->tile.at("x") == std::vector<int64_t>{7});
    CHECK(acc.update->tile.at("y") == std::vector<int64_t>{2});
    CHECK(acc.update->tile.at("c") == std::vector<int64_t>{16});
    CHECK(acc.update->vectorize == "o_i");
    const StageSchedule* pad = s.find("conv_pad");
    REQUIRE(pad != nullptr);
    CHECK(pad->compute.kind == Placement::Kind::Root);
    CHECK(pad->loops.vectorize == "c");
  }
}

TEST_CASE("conv2d_nhwc rejects bad shapes with typed errors", "[ops][conv_nhwc][errors]") {
  Program p("bad");
  const Tensor x = p.input("X", {1, 8, 8, 4}), w = p.input("W", {3, 3, 4, 6}), wc = p.input("Wc", {3, 3, 5, 6});
  const Tensor x3 = p.input("X3", {8, 8, 4}), wi = p.input("Wi", {3, 3, 4, 6}, DType::I32);
  CHECK_THROWS_AS(ops::conv2d_nhwc(x3, w, Tensor()), ShapeError);
  CHECK_THROWS_WITH(ops::conv2d_nhwc(x, wc, Tensor()), Catch::Contains("conv2d_nhwc") && Catch::Contains("'Wc' has 5 input channels"));
  CHECK_THROWS_WITH(ops::conv2d_nhwc(x, w, p.input("b", {5})), Catch::Contains("must be [6]"));
  CHECK_THROWS_AS(ops::conv2d_nhwc(x, wi, Tensor()), DTypeError);
  CHECK_THROWS_WITH(ops::conv2d_nhwc(x, w, Tensor(), {0, 1}), Catch::Contains("stride 0 must be >= 1"));
  CHECK_THROWS_WITH(ops::conv2d_nhwc(x, w, Tensor(), {1, 1}, {-1, 0}), Catch::Contains("padding -1 must be >= 0"));
  CHECK_THROWS_WITH(ops::conv2d_nhwc(x, p.input("Wbig", {9, 3, 4, 6}), Tensor()), Catch::Contains("does not fit input size 8"));
  const Tensor xs = p.input("Xs", {1, Dim::symbol("H"), 8, 4});
  CHECK_THROWS_AS(ops::conv2d_nhwc(xs, w, Tensor()), ShapeError);
  // Blocked weights [O/B, KH, KW, C, B]: the channel count is dim 3; other ranks name both layouts.
  CHECK_THROWS_WITH(ops::conv2d_nhwc(x, p.input("Wb", {3, 3, 3, 5, 2}), Tensor()),
                    Catch::Contains("has 5 input channels (dim 3 of [O/B, KH, KW, C, B])"));
  CHECK_THROWS_WITH(ops::conv2d_nhwc(x, p.input("W3", {3, 4, 6}), Tensor()),
                    Catch::Contains("[KH, KW, C, O] (HWIO, rank 4), [O/B, KH, KW, C, B] (blocked, rank 5) or "
                                    "[O/B, KH, KW, C/2, B, 2] (blocked pairs, rank 6), got [3, 4, 6]"));
  // Blocked pairs [O/B, KH, KW, C/2, B, 2]: channels are twice dim 3, and the last dim is the pair.
  CHECK_THROWS_WITH(ops::conv2d_nhwc(x, p.input("Wp", {3, 3, 3, 3, 2, 2}), Tensor()),
                    Catch::Contains("has 6 input channels (2 x dim 3 of [O/B, KH, KW, C/2, B, 2])"));
  CHECK_THROWS_WITH(ops::conv2d_nhwc(x, p.input("Wp3", {3, 3, 3, 2, 2, 3}), Tensor()),
                    Catch::Contains("must end in 2, got [3, 3, 3, 2, 2, 3]"));
}

TEST_CASE("conv2d_nhwc with blocked weights matches HWIO", "[ops][conv_nhwc]") {
  // [O/B, KH, KW, C, B] holds the HWIO weights' output channels in blocks of B;
  // both programs must compute the same convolution (same f32 products and
  // sums in the same order: equal up to reassociation by the schedule, 1e-5).
  const Target t = parse_target("host");
  std::mt19937 rng(17);
  const HostTensor x = random_tensor({1, 9, 9, 8}, rng), w = random_tensor({3, 3, 8, 32}, rng);
  Program ph("hwio"), pb("blocked");
  ph.output(ops::conv2d_nhwc(ph.input("X", {1, 9, 9, 8}), ph.input("W", {3, 3, 8, 32}), Tensor(), {2, 2}, {1, 1}, {1, 1}, "Y"));
  pb.output(ops::conv2d_nhwc(pb.input("X", {1, 9, 9, 8}), pb.input("W", {2, 3, 3, 8, 16}), Tensor(), {2, 2}, {1, 1}, {1, 1}, "Y"));
  const HostTensor wb{{2, 3, 3, 8, 16}, models::block_weight(w.data.data(), 3 * 3 * 8, 32, 16)};
  const HostTensor want = interpret(ph, {{"X", x}, {"W", w}}).at("Y");
  CHECK(tolerance_ratio(interpret(pb, {{"X", x}, {"W", wb}}).at("Y"), want, 1e-12, 1e-12) <= 1.0);
  CHECK(tolerance_ratio(run_f32(Kernel(pb, default_schedule(pb, t), t), {{"X", x}, {"W", wb}})[0], want, 1e-5, 1e-5) <= 1.0);
  // Blocked pairs [O/B, KH, KW, C/2, B, 2] (block_weight_pairs), in f32: the same convolution.
  Program pp("pairs");
  pp.output(ops::conv2d_nhwc(pp.input("X", {1, 9, 9, 8}), pp.input("W", {2, 3, 3, 4, 16, 2}), Tensor(), {2, 2}, {1, 1}, {1, 1}, "Y"));
  const HostTensor wp{{2, 3, 3, 4, 16, 2}, models::block_weight_pairs(w.data.data(), 3 * 3 * 8, 32, 16)};
  CHECK(tolerance_ratio(interpret(pp, {{"X", x}, {"W", wp}}).at("Y"), want, 1e-12, 1e-12) <= 1.0);
  CHECK(tolerance_ratio(run_f32(Kernel(pp, default_schedule(pp, t), t), {{"X", x}, {"W", wp}})[0], want, 1e-5, 1e-5) <= 1.0);
}
