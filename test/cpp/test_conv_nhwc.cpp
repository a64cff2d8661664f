// conv2d_nhwc (channels-last convolution, HWIO weights): the op against plain
// float64 loops over stride, padding, dilation and kernel sizes; properties
// of its default schedules on ResNet-50 layer kinds at reduced spatial size
// (valid, correct, register tiles within the register file) for several
// targets; the variable roles the defaults key on; typed errors for bad shapes.
#include <catch2/catch.hpp>

#include "dsl/models/BlockedWeights.h"
#include "dsl/ops/Ops.h"
#include "dsl/ProgramJson.h"
#include "schedules/ScheduleJson.h"
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

// The convolution `k` as a program with output Y (through a ReLU when
// `relu`), random inputs and the float64 result.
struct Built {
  Program p{"nhwc"};
  std::map<std::string, HostTensor> in;
  HostTensor want;
};
Built build(const NhwcCase& k, bool relu, std::mt19937& rng) {
  Built r;
  Program& p = r.p;
  const Tensor x = p.input("X", {k.n, k.h, k.w, k.c}), w = p.input("W", {k.kh, k.kw, k.c, k.o});
  const Tensor b = k.bias ? p.input("b", {k.o}) : Tensor();
  const Tensor conv = ops::conv2d_nhwc(x, w, b, k.stride, k.pad, k.dil, relu ? "conv" : "Y");
  p.output(relu ? ops::relu(conv, "Y") : conv);
  r.in = {{"X", random_tensor({k.n, k.h, k.w, k.c}, rng)}, {"W", random_tensor({k.kh, k.kw, k.c, k.o}, rng)}};
  if (k.bias) r.in["b"] = random_tensor({k.o}, rng);
  r.want = reference(k, r.in.at("X"), r.in.at("W"), k.bias ? &r.in.at("b") : nullptr);
  if (relu)
    for (double& v : r.want.data) v = std::max(v, 0.0);
  return r;
}

// The register tile that accumulates convolution `mm` under `s`: the loops
// inside its innermost reduction loop, a loop's extent being its tile's last
// factor or, for an untiled variable, the enclosing loops' tile of that dim
// (the consumer it is computed at, or its own pure loops).
struct RegisterTile {
  int64_t accumulators = 1;  // vectors
  int64_t vectors = 1;       // vectors per row of the tile (weight vectors loaded per step)
};
RegisterTile register_tile(const Program& p, const Schedule& s, const Stage& mm, int lanes) {
  const StageSchedule& ms = *s.find(mm.name);
  REQUIRE(ms.update.has_value());
  const LoopSchedule& up = *ms.update;
  const bool at = ms.compute.kind == Placement::Kind::At;
  const LoopSchedule& enclosing = at ? s.find(ms.compute.stage)->loops : ms.loops;
  const std::vector<std::string>& enclosing_vars = at ? p.stage(ms.compute.stage).vars : mm.vars;
  auto is_rvar = [&](const std::string& l) {
    for (const RVar& r : mm.rvars)
      if (l == r.name || l.rfind(r.name + "_", 0) == 0) return true;
    return false;
  };
  size_t first = 0;
  for (size_t i = 0; i < up.order.size(); ++i)
    if (is_rvar(up.order[i])) first = i + 1;
  auto extent = [&](const std::string& l) -> int64_t {
    const std::string base = l.size() > 2 && l.substr(l.size() - 2) == "_i" ? l.substr(0, l.size() - 2) : l;
    if (base != l) return up.tile.at(base).back();
    const size_t d = static_cast<size_t>(std::find(mm.vars.begin(), mm.vars.end(), l) - mm.vars.begin());
    REQUIRE(d < mm.vars.size());
    const auto it = enclosing.tile.find(enclosing_vars[d]);
    return it != enclosing.tile.end() ? it->second.back() : mm.shape[d].value;
  };
  RegisterTile r;
  for (size_t i = first; i < up.order.size(); ++i) {
    const int64_t e = extent(up.order[i]);
    if (up.order[i] == up.vectorize) r.vectors = (e + lanes - 1) / lanes;
    else r.accumulators *= e;
  }
  r.accumulators *= r.vectors;
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
    const auto [p, in, want] = build(k, false, rng);
    // The interpreter is the float64 oracle elsewhere; here it must agree with the loop to float64 rounding.
    CHECK(tolerance_ratio(interpret(p, in).at("Y"), want, 1e-12, 1e-12) <= 1.0);
    for (const Schedule& s : {plain_schedule(p), default_schedule(p, t)}) {
      validate(p, s, &t);
      // f32 sums of at most 7*7*6 = 294 products of values in [-1, 1]: 1e-5 relative + absolute.
      CHECK(tolerance_ratio(run_f32(Kernel(p, s, t), in)[0], want, 1e-5, 1e-5) <= 1.0);
    }
  }
}

TEST_CASE("conv2d_nhwc default schedules: valid, correct against float64, register tiles that fit", "[ops][conv_nhwc][schedule]") {
  // ResNet-50 layer kinds at reduced size, and odd ones, under the default
  // schedule of several targets and core counts. For each: the schedule
  // validates, its register tile (accumulators, weight vectors and one
  // broadcast) fits the target's vector registers, and, on the host (two cores
  // whatever it has, so that the per-core row and channel-tile blocks are
  // built), the kernel matches the float64 loops.
  struct Case {
    NhwcCase k;
    bool relu;
  };
  const std::vector<Case> cases = {
      {{1, 28, 28, 64, 64, 1, 1, {1, 1}, {0, 0}, {1, 1}, true}, true},       // wide map, small weights: row blocks
      {{1, 7, 14, 16, 64, 3, 3, {1, 1}, {1, 1}, {1, 1}, true}, true},        // 7 rows over 2 cores
      {{1, 32, 32, 3, 64, 7, 7, {2, 2}, {3, 3}, {1, 1}, true}, true},        // the 3-channel stem
      {{1, 14, 14, 64, 256, 1, 1, {1, 1}, {0, 0}, {1, 1}, false}, false},    // weights outweigh the input, fit the L2
      {{1, 14, 14, 512, 1024, 1, 1, {1, 1}, {0, 0}, {1, 1}, false}, false},  // 2 MB of weights, no epilogue
      {{1, 7, 7, 256, 512, 3, 3, {1, 1}, {1, 1}, {1, 1}, true}, true},       // 4.7 MB of weights, bias + ReLU
      {{1, 7, 7, 512, 2048, 1, 1, {1, 1}, {0, 0}, {1, 1}, false}, false},    // groups of channel tiles
      {{1, 9, 10, 8, 24, 3, 3, {2, 2}, {1, 1}, {1, 1}, true}, false},        // odd sizes, stride 2, vector tail
  };
  std::vector<Target> targets;
  for (const char* name : {"host", "x86-64-avx2", "x86-64-avx512", "arm-64-linux"})
    for (int cores : {1, 2}) {
      Target t = parse_target(name);
      t.cores = cores;
      targets.push_back(t);
    }
  std::mt19937 rng(37);
  for (const Case& c : cases) {
    const NhwcCase& k = c.k;
    INFO("case " << k.h << "x" << k.w << "x" << k.c << " -> " << k.o << " kernel " << k.kh << "x" << k.kw);
    const auto [p, in, want] = build(k, c.relu, rng);
    const Stage* mm = nullptr;
    for (const Stage& st : p.stages())
      if (st.kind == OpKind::Convolution) mm = &st;
    REQUIRE(mm != nullptr);
    for (const Target& t : targets) {
      INFO("target " << t.describe());
      const Schedule s = default_schedule(p, t);
      validate(p, s, &t);
      const RegisterTile tile = register_tile(p, s, *mm, t.vector_lanes(DType::F32));
      CHECK(tile.accumulators > 1);
      CHECK(tile.accumulators + tile.vectors + 1 <= t.vector_registers);
    }
    Target t = parse_target("host");
    t.cores = 2;
    // f32 sums of up to 3*3*512 = 4608 products of values in [-1, 1] (sums
    // of magnitude ~23): rounding error ~ sqrt(4608) * 2^-24 * 23 = 1e-4, so
    // 2e-3 absolute + 1e-4 relative leaves a margin of about 20.
    CHECK(tolerance_ratio(run_f32(Kernel(p, default_schedule(p, t), t), in)[0], want, 1e-4, 2e-3) <= 1.0);
  }
}

TEST_CASE("conv2d_nhwc's register tiles over odd widths: 12+ accumulators, row pieces of whole tiles", "[ops][conv_nhwc][schedule]") {
  // Rows of 61 pixels, 64 channels: 2 x 4 vectors wastes the fewest pixels,
  // but its 8 accumulators leave the FMA pipes idle (ChannelsLastConv.cpp,
  // kMinStepCycles).
  std::mt19937 rng(41);
  const auto [p, in, want] = build({1, 6, 61, 16, 64, 5, 5, {1, 1}, {2, 2}, {1, 1}, true}, true, rng);
  const Stage* mm = nullptr;
  for (const Stage& st : p.stages())
    if (st.kind == OpKind::Convolution) mm = &st;
  REQUIRE(mm != nullptr);
  Target t = parse_target("x86-64-avx512");
  t.cores = 2;
  const Schedule s = default_schedule(p, t);
  validate(p, s, &t);
  CHECK(register_tile(p, s, *mm, t.vector_lanes(DType::F32)).accumulators >= 12);
  // Weights read once per channel tile (1.6 MB of them), over rows of 23: a
  // row piece of 12 pixels (2 per row, 24 computed), not one-pixel columns.
  const auto [pw, inw, wantw] = build({1, 23, 23, 22, 382, 7, 7, {1, 1}, {6, 6}, {2, 2}, false}, false, rng);
  const Stage* conv = nullptr;
  for (const Stage& st : pw.stages())
    if (st.kind == OpKind::Convolution) conv = &st;
  REQUIRE(conv != nullptr);
  const Schedule sw = default_schedule(pw, t);
  validate(pw, sw, &t);
  const StageSchedule* cs = sw.find(conv->name);
  REQUIRE(cs);
  REQUIRE(cs->update);
  CHECK(cs->update->tile.at(conv->conv_roles->out_col) == std::vector<int64_t>{12});
}

TEST_CASE("convolutions carry their variables' roles, through program JSON too", "[ops][conv_nhwc][json]") {
  Program p("roles");
  const Tensor x = p.input("X", {1, 8, 8, 4}), w = p.input("W", {3, 3, 4, 16});
  p.output(ops::relu(ops::conv2d_nhwc(x, w, p.input("b", {16}), {1, 1}, {1, 1}, {1, 1}, "conv"), "Y"));
  const Tensor xc = p.input("Xc", {1, 4, 8, 8}), wc = p.input("Wc", {8, 4, 3, 3});
  p.output(ops::conv2d(xc, wc, Tensor(), {1, 1}, {0, 0}, {1, 1}, 1, "C"));
  p.output(ops::conv1d(p.input("X1", {1, 2, 5}), p.input("W1", {3, 2, 2}), Tensor(), {}, "C1"));
  const ConvRoles nhwc{"n", "o", "y", "x", "c", "ky", "kx"};
  CHECK(p.stage("conv_acc").conv_roles == nhwc);
  CHECK(p.stage("C").conv_roles == nhwc);  // NCHW: the same names, in another order
  CHECK(p.stage("C1").conv_roles == ConvRoles{"n", "o", "", "x", "c", "", "kx"});
  CHECK_FALSE(p.stage("conv").conv_roles.has_value());  // the bias epilogue is no convolution
  // The roles survive program JSON, so the loaded program gets the same defaults.
  nlohmann::json j = program_to_json(p);
  const Program q = program_from_json(j);
  CHECK(program_to_json(q) == j);
  CHECK(q.stage("conv_acc").conv_roles == nhwc);
  const Target t = parse_target("x86-64-avx512");
  CHECK(schedule_to_json(default_schedule(q, t)) == schedule_to_json(default_schedule(p, t)));
  // A role naming no variable of its stage is an error.
  for (auto& st : j["stages"])
    if (st["name"] == "conv_acc") st["conv_roles"]["kernel_col"] = "kq";
  CHECK_THROWS_WITH(program_from_json(j), Catch::Contains("conv_roles.kernel_col names 'kq'"));
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

TEST_CASE("a transpose that a convolution reads is made once before it", "[ops][conv_nhwc][schedule]") {
  // OIHW weights (as ONNX and PyTorch store them) read as the HWIO operand of
  // a channels-last convolution. Inline, the transpose would be evaluated in
  // every reduction step, and its output channels, the vectorized axis, are
  // 9 x C apart in W: every weight vector a gather (a 64 -> 64 3x3 at 28x28
  // with the input transposed too took 0.43 ms, 0.19 with the weights made once).
  const NhwcCase k{1, 9, 10, 8, 24, 3, 3, {1, 1}, {1, 1}, {1, 1}, true};
  std::mt19937 rng(41);
  Program p("conv_oihw");
  const Tensor x = p.input("X", {k.n, k.h, k.w, k.c}), w = p.input("W", {k.o, k.c, k.kh, k.kw});
  const Tensor b = p.input("b", {k.o});
  const Tensor hwio = ops::transpose(w, {2, 3, 1, 0}, "hwio");
  p.output(ops::conv2d_nhwc(x, hwio, b, k.stride, k.pad, k.dil, "Y"));
  std::map<std::string, HostTensor> in = {{"X", random_tensor({k.n, k.h, k.w, k.c}, rng)},
                                          {"W", random_tensor({k.o, k.c, k.kh, k.kw}, rng)},
                                          {"b", random_tensor({k.o}, rng)}};
  HostTensor w_hwio{{k.kh, k.kw, k.c, k.o}, std::vector<double>(in.at("W").data.size())};
  for (int64_t o = 0; o < k.o; ++o)
    for (int64_t c = 0; c < k.c; ++c)
      for (int64_t ky = 0; ky < k.kh; ++ky)
        for (int64_t kx = 0; kx < k.kw; ++kx)
          w_hwio.data[static_cast<size_t>(((ky * k.kw + kx) * k.c + c) * k.o + o)] =
              in.at("W").data[static_cast<size_t>(((o * k.c + c) * k.kh + ky) * k.kw + kx)];
  const HostTensor want = reference(k, in.at("X"), w_hwio, &in.at("b"));
  Target t = parse_target("host");
  t.cores = 2;
  const Schedule s = default_schedule(p, t);
  validate(p, s, &t);
  REQUIRE(s.find("hwio") != nullptr);
  CHECK(s.find("hwio")->compute.kind == Placement::Kind::Root);
  // f32 sums of 72 products of values in [-1, 1]: 1e-5 absolute is ~100x the rounding.
  CHECK(tolerance_ratio(run_f32(Kernel(p, s, t), in)[0], want, 1e-5, 1e-5) <= 1.0);
}
