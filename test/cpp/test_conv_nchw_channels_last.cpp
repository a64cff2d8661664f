// Dense channels-first 2-D convolutions computed channels-last
// (dsl/ops/Convolution.cpp, nchw_through_channels_last): which ones the op
// sends there (k x k kernels whose output channels fill their vectors, or
// half of them where the window tile would not take them, over 96+ output
// pixels, and 32+ input channels where it would), the program it builds
// (input and output transposes, blocked weights padded with zero channels
// to whole blocks), that the default schedule makes the transposes once, and the
// values against the float64 loops of ConvReference.h at odd and prime sizes,
// with stride, dilation, padding, bias, a ReLU epilogue and a symbolic batch,
// on several targets and core counts.
#include <catch2/catch.hpp>

#include "dsl/ops/Ops.h"
#include "schedules/Validate.h"
#include "schedules/defaults/Defaults.h"
#include "test/cpp/ConvReference.h"
#include "test/cpp/Helpers.h"

using namespace pto;
using namespace pto::test;

namespace {

struct Case {
  int64_t n, c, o, h, w, k;
  int stride, pad, dil;
  bool bias, relu, symbolic_batch = false;
};

struct Built {
  Program p{"nchw_cl"};
  std::map<std::string, HostTensor> in;
  HostTensor want;
};

Built build(const Case& k, std::mt19937& rng) {
  Built r;
  Program& p = r.p;
  const Dim n = k.symbolic_batch ? Dim::symbol("N") : Dim(k.n);
  const Tensor x = p.input("X", {n, Dim(k.c), Dim(k.h), Dim(k.w)}), w = p.input("W", {k.o, k.c, k.k, k.k});
  const Tensor b = k.bias ? p.input("b", {k.o}) : Tensor();
  const Tensor y = ops::conv2d(x, w, b, {k.stride, k.stride}, {k.pad, k.pad}, {k.dil, k.dil}, 1, k.relu ? "conv" : "Y");
  p.output(k.relu ? ops::relu(y, "Y") : y);
  r.in = {{"X", random_tensor({k.n, k.c, k.h, k.w}, rng)}, {"W", random_tensor({k.o, k.c, k.k, k.k}, rng)}};
  if (k.bias) r.in["b"] = random_tensor({k.o}, rng);
  r.want = conv_reference({k.n, k.c, k.o, {k.h, k.w}, {k.k, k.k}, {k.stride, k.stride}, {k.pad, k.pad},
                           {k.dil, k.dil}, 1, k.relu},
                          r.in.at("X"), r.in.at("W"), k.bias ? &r.in.at("b") : nullptr);
  return r;
}

// The channels-last convolution stage of a program, if the op built one.
const Stage* channels_last(const Program& p) {
  for (const Stage& st : p.stages())
    if (st.kind == OpKind::Convolution && st.conv_roles && st.vars.size() == 4 &&
        st.vars.back() == st.conv_roles->out_channel)
      return &st;
  return nullptr;
}

bool goes_channels_last(int64_t c, int64_t o, int64_t hw, int64_t k, int stride = 1) {
  Program p("which");
  const Tensor x = p.input("X", {1, c, hw, hw}), w = p.input("W", {o, c, k, k});
  p.output(ops::conv2d(x, w, Tensor(), {stride, stride}, {static_cast<int>(k / 2), static_cast<int>(k / 2)}, {1, 1},
                       1, "Y"));
  return channels_last(p) != nullptr;
}

bool p_has_concat(const Program& p) {
  for (const Stage& st : p.stages())
    if (st.op == "concat") return true;
  return false;
}

}  // namespace

TEST_CASE("which dense channels-first convolutions go channels-last", "[default][conv][nchw_cl]") {
  CHECK(goes_channels_last(256, 256, 33, 3));     // DeepLab-sized: full vectors, 1089 pixels
  CHECK(goes_channels_last(128, 128, 56, 3, 2));  // strided, 784 pixels
  CHECK(goes_channels_last(3, 64, 224, 7, 2));    // the RGB stem (not a window-tile case)
  CHECK(goes_channels_last(64, 71, 20, 3));       // 71 channels in 5 vectors: 89% full
  CHECK(goes_channels_last(64, 64, 10, 3));       // 100 pixels
  CHECK_FALSE(goes_channels_last(64, 51, 20, 3));   // 51 in 4 vectors: 80% full
  CHECK_FALSE(goes_channels_last(64, 10, 20, 3));   // one vector, 10 of 16 lanes
  CHECK_FALSE(goes_channels_last(64, 15, 40, 3));   // 15 of 16 lanes, for the window tile
  // Where the window tile would not take them (strided, or weights past 256
  // KB), half-full vectors and up, padded, from 8 input channels.
  CHECK(goes_channels_last(38, 15, 37, 7, 2));
  CHECK(goes_channels_last(83, 40, 73, 3, 2));
  CHECK(goes_channels_last(270, 13, 12, 5));       // 351 KB of weights
  CHECK(goes_channels_last(64, 51, 40, 3, 2));
  CHECK_FALSE(goes_channels_last(64, 7, 40, 3, 2));  // 7 of 16 lanes
  CHECK_FALSE(goes_channels_last(4, 10, 115, 3, 2));  // 36 steps per output
  // 7x7 and larger: not the window tile's (one row of a few channels per
  // unrolled body), padded too.
  CHECK(goes_channels_last(8, 83, 55, 7));
  CHECK(goes_channels_last(3, 64, 64, 7));
  CHECK_FALSE(goes_channels_last(3, 64, 64, 5));
  CHECK_FALSE(goes_channels_last(512, 512, 7, 3));  // 49 pixels: the weights' reorder costs more
  CHECK_FALSE(goes_channels_last(16, 32, 32, 3));   // the window tile, 16 channels per tap
  CHECK_FALSE(goes_channels_last(64, 64, 20, 1));   // 1x1: no gain measured
  // Grouped and depthwise convolutions keep their rules.
  Program p("grouped");
  const Tensor x = p.input("X", {1, 64, 20, 20}), w = p.input("W", {64, 16, 3, 3});
  p.output(ops::conv2d(x, w, Tensor(), {1, 1}, {1, 1}, {1, 1}, 4, "Y"));
  CHECK(channels_last(p) == nullptr);
}

TEST_CASE("dense channels-first convolutions computed channels-last match float64", "[default][conv][nchw_cl]") {
  const std::vector<Case> cases = {
      {1, 37, 32, 17, 19, 3, 1, 1, 1, true, true},       // odd sizes, bias + ReLU, blocked weights
      {2, 40, 48, 23, 21, 3, 2, 1, 1, false, false},     // stride 2, 2 images
      {1, 33, 64, 19, 17, 3, 1, 2, 2, true, false},      // dilated, padded by the dilation
      {1, 3, 32, 29, 31, 7, 2, 3, 1, true, true},        // a 3-channel stem
      {1, 32, 71, 13, 11, 3, 1, 1, 1, true, false},      // 16 does not divide 71: a padded block
      {1, 30, 13, 25, 23, 5, 2, 2, 1, true, true},       // one padded block, stride 2
      {1, 5, 20, 17, 19, 7, 1, 3, 1, true, false},       // 7x7, 5 channels: past the window tile
      {3, 48, 32, 11, 13, 5, 1, 2, 1, false, true, true},  // 5x5, a symbolic batch
      {1, 64, 32, 12, 12, 3, 1, 0, 1, true, false},      // no padding
  };
  std::mt19937 rng(53);
  for (const Case& k : cases) {
    INFO("C=" << k.c << " O=" << k.o << " " << k.h << "x" << k.w << " k" << k.k << " s" << k.stride << " d" << k.dil
              << (k.symbolic_batch ? " symbolic batch" : ""));
    const auto [p, in, want] = build(k, rng);
    const Stage* conv = channels_last(p);
    REQUIRE(conv);
    // The input and the weights reach it through transposes; the weights in
    // whole blocks of 16 (the bias too, where 16 does not divide O).
    int transposes = 0, blocks = 0;
    for (const Stage& st : p.stages()) {
      transposes += st.op == "transpose";
      if (st.op == "transpose" && st.shape.size() == 5) blocks = st.shape[0].value * st.shape[4].value;
    }
    CHECK(transposes == 3);  // input, weights, output
    CHECK(blocks == (k.o + 15) / 16 * 16);
    for (const char* tn : {"host", "x86-64-avx2", "arm-64-linux"}) {
      Target t = parse_target(tn);
      t.cores = 2;
      INFO("target " << tn);
      const Schedule s = default_schedule(p, t);
      validate(p, s, &t);
      // The transposes it reads (directly or through its padding) are made
      // once per call, not re-read inline; the output's may be inline into
      // an elementwise consumer (conv + ReLU measured as fast as the conv).
      std::vector<std::string> reads = conv->reads();
      for (const std::string& r : conv->reads())
        if (const Stage* pad = p.find_stage(r); pad && pad->op == "pad")
          for (const std::string& q : pad->reads()) reads.push_back(q);
      int made_once = 0;
      for (const std::string& r : reads)
        if (const Stage* st = p.find_stage(r); st && st->op == "transpose") {
          INFO("stage " << r);
          REQUIRE(s.find(r));
          made_once += s.find(r)->compute.kind == Placement::Kind::Root;
        }
      CHECK(made_once == 2);
    }
    // Inputs in [-1, 1]: a K-term f32 sum (K = C x taps, up to 1200 here)
    // rounds within K u times the sum of |terms|; 3e-5 absolute per 576 terms,
    // as for the im2col GEMM.
    const double atol = 3e-5 * std::max(1.0, static_cast<double>(k.c * k.k * k.k) / 576);
    for (int cores : {1, 2, 3}) {
      Target t = parse_target("host");
      t.cores = cores;
      CHECK(tolerance_ratio(run_f32(Kernel(p, default_schedule(p, t), t), in)[0], want, 1e-5, atol) <= 1.0);
    }
  }
}

// ConvParams::algorithm overrides the op's choice: each formulation of the
// same convolution builds its own stages and matches float64; a value that
// does not apply is a DefinitionError naming it and what would.
TEST_CASE("the convolution's algorithm attribute picks its formulation", "[default][conv][nchw_cl]") {
  std::mt19937 rng(61);
  const Case k{1, 20, 24, 19, 21, 3, 2, 1, 1, true, false};
  const std::map<std::string, HostTensor> in = {{"X", random_tensor({1, 20, 19, 21}, rng)},
                                                {"W", random_tensor({24, 20, 3, 3}, rng)},
                                                {"b", random_tensor({24}, rng)}};
  const HostTensor want = conv_reference({1, 20, 24, {19, 21}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, 1, false},
                                         in.at("X"), in.at("W"), &in.at("b"));
  const auto build_with = [&](const std::string& algorithm) {
    Program p("alg");
    ops::ConvParams cp;
    cp.stride = {k.stride, k.stride};
    cp.padding = {k.pad, k.pad};
    cp.algorithm = algorithm;
    p.output(ops::conv("conv2d", 2, p.input("X", {1, 20, 19, 21}), p.input("W", {24, 20, 3, 3}), p.input("b", {24}),
                       cp, "Y"));
    return p;
  };
  const auto has_op = [](const Program& p, const std::string& op) {
    for (const Stage& st : p.stages())
      if (st.op == op) return true;
    return false;
  };
  for (const char* algorithm : {"auto", "im2col", "channels_last", "direct"}) {
    INFO(algorithm);
    const Program p = build_with(algorithm);
    const std::string a = algorithm;
    if (a == "im2col") CHECK(has_op(p, "im2col"));
    if (a == "channels_last") CHECK(channels_last(p));
    if (a == "direct") CHECK((!has_op(p, "im2col") && !channels_last(p)));
    const Target t = host_target();
    CHECK(tolerance_ratio(run_f32(Kernel(p, default_schedule(p, t), t), in)[0], want, 1e-5, 3e-5) <= 1.0);
  }
  CHECK_THROWS_MATCHES(build_with("winograd"), DefinitionError,
                       Catch::Matchers::Message(
                           "conv2d: algorithm 'winograd' is not one of auto, im2col, channels_last, direct"));
  Program p("grouped");
  ops::ConvParams cp;
  cp.groups = 4;
  cp.algorithm = "channels_last";
  CHECK_THROWS_WITH(ops::conv("conv2d", 2, p.input("X", {1, 8, 9, 9}), p.input("W", {8, 2, 3, 3}), Tensor(), cp),
                    Catch::Matchers::Contains("needs a dense 2-D convolution (groups 1)"));
  cp.groups = 1;
  cp.layout = "NHWC";
  cp.algorithm = "im2col";
  CHECK_THROWS_WITH(ops::conv("conv2d", 2, p.input("Xh", {1, 9, 9, 8}), p.input("Wh", {8, 8, 3, 3}), Tensor(), cp),
                    Catch::Matchers::Contains("algorithm 'im2col' needs a channels-first layout; layout is NHWC"));
}

// A few groups (2-4) of 32+ channels each are that many dense convolutions
// of their slices, concatenated; more groups or fewer channels keep the
// grouped forms. Values against float64 at odd sizes, stride, bias.
TEST_CASE("a few wide groups are split into dense convolutions", "[default][conv][nchw_cl]") {
  const auto build_grouped = [](int64_t c, int64_t o, int64_t hw, int64_t k, int stride, int groups) {
    Program p("grouped");
    ops::ConvParams cp;
    cp.stride = {stride, stride};
    cp.padding = {static_cast<int>(k / 2), static_cast<int>(k / 2)};
    cp.groups = groups;
    p.output(ops::conv("conv2d", 2, p.input("X", {1, c, hw, hw}), p.input("W", {o, c / groups, k, k}),
                       p.input("b", {o}), cp, "Y"));
    return p;
  };
  const auto dense_parts = [](const Program& p) {
    int n = 0;
    for (const Stage& st : p.stages()) n += st.kind == OpKind::Convolution;
    return n;
  };
  CHECK(dense_parts(build_grouped(64, 64, 20, 3, 1, 2)) == 2);
  CHECK(p_has_concat(build_grouped(64, 64, 20, 3, 1, 2)));
  CHECK_FALSE(p_has_concat(build_grouped(64, 64, 20, 3, 1, 4)));   // 16 channels a group
  CHECK_FALSE(p_has_concat(build_grouped(320, 320, 20, 3, 1, 5)));  // 5 groups
  std::mt19937 rng(67);
  struct G {
    int64_t c, o, hw, k;
    int stride, groups;
  };
  for (const G g : {G{66, 96, 13, 3, 1, 2}, G{99, 99, 17, 5, 2, 3}, G{128, 160, 9, 1, 1, 4}}) {
    INFO("C=" << g.c << " O=" << g.o << " " << g.hw << " k" << g.k << " s" << g.stride << " groups " << g.groups);
    const Program p = build_grouped(g.c, g.o, g.hw, g.k, g.stride, g.groups);
    REQUIRE(p_has_concat(p));
    const std::map<std::string, HostTensor> in = {
        {"X", random_tensor({1, g.c, g.hw, g.hw}, rng)},
        {"W", random_tensor({g.o, g.c / g.groups, g.k, g.k}, rng)},
        {"b", random_tensor({g.o}, rng)}};
    const int pad = static_cast<int>(g.k / 2);
    const HostTensor want =
        conv_reference({1, g.c, g.o, {g.hw, g.hw}, {g.k, g.k}, {g.stride, g.stride}, {pad, pad}, {1, 1}, g.groups, false},
                       in.at("X"), in.at("W"), &in.at("b"));
    const double atol = 3e-5 * std::max(1.0, static_cast<double>(g.c / g.groups * g.k * g.k) / 576);
    for (int cores : {1, 2}) {
      Target t = host_target();
      t.cores = cores;
      CHECK(tolerance_ratio(run_f32(Kernel(p, default_schedule(p, t), t), in)[0], want, 1e-5, atol) <= 1.0);
    }
  }
}


// ops::conv2d_channels_last, what the ONNX importer computes a channels-first
// model's dense convolutions with between channels-last values: OIHW weights
// blocked by 16 output channels (a last partial block padded with zero
// weights, its channels sliced off), against the float64 loops; and
// conv2d_auto_channels_last, the op's own choice, asked from outside.
TEST_CASE("channels-last convolutions with OIHW weights match float64",
          "[default][conv][nchw_cl]") {
  const std::vector<Case> cases = {
      {1, 24, 32, 15, 13, 3, 1, 1, 1, true, true},   // whole blocks, bias + ReLU
      {2, 19, 24, 17, 11, 3, 2, 1, 1, true, false},  // a partial block (sliced), stride 2
      {1, 64, 48, 9, 9, 1, 1, 0, 1, false, true},    // 1x1
      {1, 16, 16, 21, 19, 3, 1, 2, 2, true, false},  // dilated
  };
  std::mt19937 rng(67);
  for (const Case& k : cases) {
    INFO("C=" << k.c << " O=" << k.o << " " << k.h << "x" << k.w << " k" << k.k << " s"
              << k.stride);
    Program p("cl");
    const Tensor x = p.input("X", {k.n, k.h, k.w, k.c}), w = p.input("W", {k.o, k.c, k.k, k.k});
    const Tensor b = k.bias ? p.input("b", {k.o}) : Tensor();
    const Tensor y = ops::conv2d_channels_last(x, w, b, {k.stride, k.stride}, {k.pad, k.pad},
                                               {k.dil, k.dil}, k.relu ? "conv" : "Y");
    p.output(k.relu ? ops::relu(y, "Y") : y);
    const HostTensor xf = random_tensor({k.n, k.c, k.h, k.w}, rng);
    std::map<std::string, HostTensor> in = {{"X", nchw_to_nhwc(xf)},
                                            {"W", random_tensor({k.o, k.c, k.k, k.k}, rng)}};
    if (k.bias) in["b"] = random_tensor({k.o}, rng);
    const HostTensor want = nchw_to_nhwc(conv_reference({k.n,
                                                     k.c,
                                                     k.o,
                                                     {k.h, k.w},
                                                     {k.k, k.k},
                                                     {k.stride, k.stride},
                                                     {k.pad, k.pad},
                                                     {k.dil, k.dil},
                                                     1,
                                                     k.relu},
                                                    xf, in.at("W"), k.bias ? &in.at("b") : nullptr));
    REQUIRE(p.tensor("Y").shape == Shape{Dim(k.n), want.shape[1], want.shape[2], Dim(k.o)});
    const double atol = 3e-5 * std::max(1.0, static_cast<double>(k.c * k.k * k.k) / 576);
    for (int cores : {1, 2}) {
      Target t = parse_target("host");
      t.cores = cores;
      CHECK(tolerance_ratio(run_f32(Kernel(p, default_schedule(p, t), t), in)[0], want, 1e-5,
                            atol) <= 1.0);
    }
  }
  CHECK_THROWS_AS(ops::conv2d_channels_last(Program("bad").input("X", {1, 8, 8, 5}),
                                            Program("bad2").input("W", {16, 4, 3, 3}), Tensor()),
                  ShapeError);
  // The op's choice, asked from outside, is the one conv2d makes.
  for (const auto& [c, o, hw, k, s] : std::vector<std::array<int64_t, 5>>{{256, 256, 33, 3, 1},
                                                                          {64, 10, 20, 3, 1},
                                                                          {512, 512, 7, 3, 1},
                                                                          {64, 64, 20, 1, 1},
                                                                          {3, 64, 224, 7, 2}}) {
    Program q("ask");
    const Tensor x = q.input("X", {1, c, hw, hw}), w = q.input("W", {o, c, k, k});
    ops::ConvParams cp;
    cp.stride = {static_cast<int>(s), static_cast<int>(s)};
    cp.padding = {static_cast<int>(k / 2), static_cast<int>(k / 2)};
    CHECK(ops::conv2d_auto_channels_last(x, w, cp) ==
          goes_channels_last(c, o, hw, k, static_cast<int>(s)));
  }
}
