// Dense channels-first convolutions (1-D, 2-D, 3-D) defined as an im2col copy
// feeding a GEMM (dsl/ops/Convolution.cpp, im2col_conv): the structure (the
// cases ask for it with algorithm "im2col"; which convolutions the op itself
// formulates so is tested below and in test_conv_nchw_channels_last.cpp),
// that its default schedule materializes the copy and register-tiles the
// GEMM over flattened pixels, and the values against a
// float64 reference at odd and prime sizes, with stride, dilation, padding,
// groups, bias, a ReLU epilogue and a symbolic batch.
#include <catch2/catch.hpp>

#include "dsl/ops/Ops.h"
#include "schedules/Validate.h"
#include "schedules/defaults/Defaults.h"
#include "schedules/defaults/Rules.h"
#include "test/cpp/ConvReference.h"
#include "test/cpp/Helpers.h"

using namespace pto;
using namespace pto::test;
using pto::defaults::register_tile_cost;
using pto::defaults::tile_operands;
using pto::defaults::TileOperands;
using pto::defaults::TileSharing;

namespace {

struct Case {
  int64_t n, c, o;
  std::vector<int64_t> in, k;  // spatial sizes, kernel sizes (outermost first)
  std::vector<int> stride, pad, dil;
  int groups;
  bool bias, relu, symbolic_batch = false;
};

struct Built {
  Program p{"im2col"};
  std::map<std::string, HostTensor> in;
  HostTensor want;
};

Built build(const Case& k, std::mt19937& rng) {
  Built r;
  Program& p = r.p;
  const Dim n = k.symbolic_batch ? Dim::symbol("N") : Dim(k.n);
  Shape xs{n, k.c}, ws{k.o, k.c / k.groups};
  std::vector<int64_t> xv{k.n, k.c}, wv{k.o, k.c / k.groups};
  for (size_t s = 0; s < k.in.size(); ++s)
    xs.push_back(k.in[s]), ws.push_back(k.k[s]), xv.push_back(k.in[s]), wv.push_back(k.k[s]);
  const Tensor x = p.input("X", xs), w = p.input("W", ws);
  const Tensor b = k.bias ? p.input("b", {k.o}) : Tensor();
  ops::ConvParams cp;
  cp.stride = k.stride;
  cp.padding = k.pad;
  cp.dilation = k.dil;
  cp.groups = k.groups;
  cp.algorithm = "im2col";
  const std::string name = k.relu ? "conv" : "Y";
  const Tensor y = k.in.size() == 1   ? ops::conv1d(x, w, b, cp, name)
                   : k.in.size() == 2 ? ops::conv("conv2d", 2, x, w, b, cp, name)
                                      : ops::conv3d(x, w, b, cp, name);
  p.output(k.relu ? ops::relu(y, "Y") : y);
  r.in = {{"X", random_tensor(xv, rng)}, {"W", random_tensor(wv, rng)}};
  if (k.bias) r.in["b"] = random_tensor({k.o}, rng);
  r.want = conv_reference({k.n, k.c, k.o, k.in, k.k, k.stride, k.pad, k.dil, k.groups, k.relu}, r.in.at("X"),
                          r.in.at("W"), k.bias ? &r.in.at("b") : nullptr);
  return r;
}

// A 3x3 convolution formulated as im2col + GEMM whatever its shape: the
// copy and tile rules under test, not the op's choice of formulation.
ops::ConvParams im2col_params(int stride, int dil) {
  ops::ConvParams cp;
  cp.stride = {stride, stride};
  cp.padding = {dil, dil};
  cp.dilation = {dil, dil};
  cp.algorithm = "im2col";
  return cp;
}

const Stage* find_op(const Program& p, const std::string& op) {
  for (const Stage& st : p.stages())
    if (st.op == op) return &st;
  return nullptr;
}

}  // namespace

TEST_CASE("dense channels-first convolutions as im2col + GEMM match float64",
          "[default][im2col][conv]") {
  const std::vector<Case> cases = {
      {1, 224, 33, {13, 11}, {3, 3}, {1, 1}, {2, 2}, {2, 2}, 1, true, false},  // dilated, padded
                                                                             // (DeepLab)
      {1, 7, 35, {23, 29}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, 1, true, true},   // stride 2 + ReLU
                                                                             // (ResNet)
      {2, 6, 64, {9, 7}, {2, 3}, {1, 2}, {0, 1}, {1, 2}, 2, false, true},    // 32 per group, mixed
      {3, 416, 33, {5, 31}, {5, 1}, {1, 1}, {2, 0}, {1, 1}, 1, true, false, true},  // symbolic batch
      {1, 224, 33, {1, 1}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true, true},  // 1x1 image, 3x3 padded
      {1, 3, 18, {5, 6, 7}, {3, 2, 3}, {1, 2, 1}, {1, 0, 1}, {1, 1, 2}, 1, true, true},  // 3-D
  };
  std::vector<Case> all;
  for (const Case& k : cases)
    if (!k.in.empty()) all.push_back(k);
  // 1-D: wav2vec's first layer at an odd length; padded, dilated, strided
  all.push_back({1, 1, 20, {97}, {10}, {5}, {0}, {1}, 1, false, false});
  all.push_back({1, 3, 17, {53}, {3}, {2}, {2}, {3}, 1, true, true});
  all.push_back({2, 4, 16, {41}, {5}, {1}, {4}, {1}, 1, true, false, true});
  // A copy that the L2 holds, rows outer (Im2col.cpp): one input channel, 67
  // output channels (11 row tiles and a shifted one), odd lengths, a
  // symbolic batch; and a bias (the GEMM in its epilogue's tile).
  all.push_back({1, 1, 67, {211}, {10}, {5}, {0}, {1}, 1, false, false});
  all.push_back({3, 1, 53, {157}, {7}, {3}, {1}, {1}, 1, true, true, true});
  // A copy beyond half the L2, made per column tile: 216 channels x 3x3 over
  // 29 x 31 pixels (7 MB), strided and dilated, symbolic batch. (Stride-1
  // 2-D cases here have over 256 KB of weights: below, the window tile.)
  all.push_back({1, 216, 35, {29, 31}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true, false});
  all.push_back({2, 48, 39, {59, 61}, {3, 3}, {2, 2}, {2, 2}, {2, 2}, 1, false, true, true});
  // A strided 3x3 at odd and prime sizes: 41 x 43 pixels (1763, odd: a
  // shifted last tile at every width) from 81 x 85, 41 output channels, a
  // copy of K = 576 x 1763 (4 MB).
  all.push_back({1, 64, 41, {81, 85}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, 1, true, true});
  // The same made whole with its vectors along output rows (Im2col.cpp,
  // gather_free_copy): rows of 44 (4 lanes at 16, 8 or 4 lanes) over 41 rows,
  // and a dilated one with rows of 24 (8 lanes at 16), 2 images; with a
  // symbolic batch it is made per column tile instead.
  all.push_back({1, 64, 41, {81, 87}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, 1, true, false});
  all.push_back({2, 200, 37, {23, 24}, {3, 3}, {1, 1}, {2, 2}, {2, 2}, 1, true, true});
  all.push_back({2, 200, 37, {23, 24}, {3, 3}, {1, 1}, {2, 2}, {2, 2}, 1, true, true, true});
  std::mt19937 rng(47);
  for (const Case& k : all) {
    INFO("conv " << k.in.size() << "-D C=" << k.c << " O=" << k.o << " groups " << k.groups
                 << (k.symbolic_batch ? " symbolic batch" : ""));
    const auto [p, in, want] = build(k, rng);
    const Stage* col = find_op(p, "im2col");
    REQUIRE(col);
    for (const char* tn : {"host", "x86-64-avx2", "arm-64-linux"}) {
      Target t = parse_target(tn);
      t.cores = 2;
      const Schedule s = default_schedule(p, t);
      validate(p, s, &t);
      // The copy is materialized (not re-evaluated in the GEMM's inner loop):
      // whole, or per column tile by the GEMM's cache of the inline copy.
      const StageSchedule* cs = s.find(col->name);
      REQUIRE(cs);
      if (cs->compute.kind != Placement::Kind::Root) {
        CHECK(cs->compute.kind == Placement::Kind::Inline);
        const StageSchedule* gs = s.find(p.consumers(col->name).at(0));
        REQUIRE(gs);
        REQUIRE(gs->cache.size() == 1);
        CHECK(gs->cache[0].tensor == col->name);
      }
    }
    // The copy per column tile balances its tiles over the cores (Im2col.cpp):
    // the tile, and so the values, differ with the core count.
    // Inputs in [-1, 1]: a K-term f32 sum's rounding error grows with K (at
    // most K u times the sum of |terms|); 3e-5 absolute held at K = 576.
    int64_t K = k.c / k.groups;
    for (const int64_t e : k.k) K *= e;
    const double atol = 3e-5 * std::max(1.0, static_cast<double>(K) / 576);
    for (int cores : {1, 2, 3}) {
      Target t = parse_target("host");
      t.cores = cores;
      CHECK(tolerance_ratio(run_f32(Kernel(p, default_schedule(p, t), t), in)[0], want, 1e-5,
                            atol) <= 1.0);
    }
  }
}

TEST_CASE("convolutions that gain nothing from im2col keep the guarded-read stage",
          "[default][im2col][conv]") {
  auto has_col = [](int64_t c, int64_t o, int64_t k, int groups, int64_t hw = 12) {
    Program p("keep");
    const Tensor x = p.input("X", {1, c, hw, hw}), w = p.input("W", {o, c / groups, k, k});
    p.output(ops::conv2d(x, w, Tensor(), {1, 1}, {1, 1}, {1, 1}, groups, "Y"));
    return find_op(p, "im2col") != nullptr;
  };
  auto has_col_strided = [](int64_t c, int64_t o, int64_t k) {
    Program p("keep");
    const Tensor x = p.input("X", {1, c, 12, 12}), w = p.input("W", {o, c, k, k});
    p.output(ops::conv2d(x, w, Tensor(), {2, 2}, {1, 1}, {1, 1}, 1, "Y"));
    return find_op(p, "im2col") != nullptr;
  };
  // Output channels that fill their vectors (or half of them, beyond the
  // window tile's weights), over 96+ pixels: channels-last
  // (test_conv_nchw_channels_last.cpp); over fewer, the copy.
  CHECK_FALSE(has_col(128, 97, 3, 1));
  CHECK(has_col(128, 97, 3, 1, 8));
  CHECK_FALSE(has_col(128, 128, 3, 1));
  CHECK(has_col(128, 128, 3, 1, 8));
  // A dense stride-1 k x k one with weights within 256 KB: the window tile
  // (it reads a materialized padding), whatever its output channels.
  CHECK_FALSE(has_col(8, 32, 3, 1));
  CHECK_FALSE(has_col(64, 64, 3, 1));
  CHECK(has_col_strided(64, 64, 3));  // strided: the GEMM
  // 1x1 over rows of whole vectors (14 + 2 padding): the input is already the
  // GEMM's B; over 14-pixel rows the flattened copy is (see Convolution.cpp).
  CHECK_FALSE(has_col(8, 32, 1, 1, 14));
  CHECK(has_col(8, 32, 1, 1, 12));
  CHECK_FALSE(has_col(8, 8, 3, 8));   // depthwise: a stencil (Window.cpp)
  CHECK_FALSE(has_col(8, 8, 3, 1));   // fewer output channels than a vector share each copy
  // 2-D k x k with groups of 16-31 output channels: the window tile
  // (Window.cpp); 1x1 and 1-D ones keep the copy (their direct form is the
  // guarded contraction tile). A dense one with 6 or more output channels
  // that 2, 3 and 4 do not divide takes the copy: the window tile would share
  // each input load with no other channel.
  CHECK_FALSE(has_col(64, 64, 3, 4));
  CHECK_FALSE(has_col(8, 16, 3, 1));
  CHECK_FALSE(has_col(8, 12, 3, 1));
  CHECK_FALSE(has_col(8, 9, 3, 1));
  CHECK(has_col(512, 17, 3, 1, 8));  // 313 KB of weights (over 96+ pixels: channels-last)
  CHECK(has_col(768, 11, 3, 1, 8));
  CHECK_FALSE(has_col(8, 5, 3, 1));  // under 6: the window tile's group is all of them
  CHECK(has_col(160, 160, 3, 5));  // 5 groups of 32 (2-4 such groups: dense convolutions each)
  CHECK_FALSE(has_col(64, 64, 3, 2));
  CHECK(has_col(8, 17, 1, 1, 12));
}

TEST_CASE("the im2col copy and its GEMM's tiles follow the copy's size against the L2",
          "[default][im2col][conv]") {
  Target t = parse_target("x86-64-sapphirerapids");
  t.cores = 2;
  const auto find_stage = [](const Program& p, const std::string& op) { return find_op(p, op); };
  // A c -> o 3x3 convolution over [n, c, hw, hw] (padding = dilation) as
  // im2col + GEMM, and its validated default schedule.
  const auto conv3x3 = [&](const std::string& name, const Dim& n, int64_t c, int64_t hw, int stride,
                           int dil, int64_t o = 97) {
    Program p(name);
    const Tensor x = p.input("X", {n, Dim(c), Dim(hw), Dim(hw)}), w = p.input("W", {o, c, 3, 3});
    p.output(ops::conv("conv2d", 2, x, w, Tensor(), im2col_params(stride, dil), "Y"));
    const Schedule s = default_schedule(p, t);
    validate(p, s, &t);
    return std::pair{p, s};
  };
  SECTION("a copy the L2 holds: made once, row tiles outside the column tiles") {
    // wav2vec 2.0's first layer: K = 10, a 128 KB copy, a 6.5 MB output.
    Program p("wav2vec");
    const Tensor x = p.input("X", {Dim::symbol("N"), 1, 16000}), w = p.input("W", {512, 1, 10});
    ops::ConvParams cp;
    cp.stride = {5};
    p.output(ops::conv1d(x, w, Tensor(), cp, "Y"));
    const Schedule s = default_schedule(p, t);
    validate(p, s, &t);
    const Stage* col = find_stage(p, "im2col");
    REQUIRE(col);
    CHECK(s.find(col->name)->compute.kind == Placement::Kind::Root);
    const StageSchedule& g = *s.find("Y");
    const auto at = [&](const std::string& l) {
      return std::find(g.loops.order.begin(), g.loops.order.end(), l) - g.loops.order.begin();
    };
    CHECK(at("o_o") < at("p_o"));
    CHECK(g.accumulator_at == "p_o");
    CHECK(g.cache.empty());
  }
  SECTION("a copy beyond half the L2: per column tile, the widest register tile") {
    // ResNet-50's strided 3x3 (layer 2) to 97 channels: K = 1152 x 784 pixels, 3.6 MB.
    const auto [p, s] = conv3x3("resnet", Dim(1), 128, 56, 2, 1);
    const Stage* col = find_stage(p, "im2col");
    REQUIRE(col);
    // Made whole, its vectors along output rows of 28 (4 lanes: no gathers).
    const StageSchedule& cs = *s.find(col->name);
    CHECK(cs.compute.kind == Placement::Kind::Root);
    CHECK(cs.loops.tile.at("p") == std::vector<int64_t>{28});
    CHECK(cs.loops.vectorize == "p_i");
    CHECK(cs.loops.vector_width == 4);
    const std::string gemm = p.consumers(col->name).at(0);
    const StageSchedule& g = *s.find(gemm);
    REQUIRE(g.cache.size() == 1);
    CHECK(g.cache[0].loop == "p_o");
    const int64_t lanes = t.vector_lanes(DType::F32);
    const int64_t rows = g.loops.tile.at("o").at(0), cols = g.loops.tile.at("p").at(0);
    CHECK(cols % lanes == 0);
    CHECK(rows * (cols / lanes) >= 24);  // 6 x 4 or 8 x 3 vectors, not 6 x 1
    // The busiest core computes fewer rows x columns than with 6 x 64 (7 of
    // 13 column tiles, of 102 rows): 8 x 48, 9 of 17 (of 104).
    const auto busiest = [&](int64_t r, int64_t w) {
      return (97 + r - 1) / r * r * (((784 + w - 1) / w + t.cores - 1) / t.cores) * w;
    };
    CHECK(busiest(rows, cols) < busiest(6, 64));
  }
  SECTION("the same over a symbolic batch: the whole copy's size is unknown, so per column tile") {
    const auto [p, s] = conv3x3("resnet_n", Dim::symbol("N"), 128, 56, 2, 1);
    const Stage* col = find_stage(p, "im2col");
    REQUIRE(col);
    CHECK(s.find(col->name)->compute.kind == Placement::Kind::Inline);
  }
  SECTION("a copy beyond half the L2 whose output rows split no vector: inline, per column tile") {
    // DeepLab's dilated 3x3: rows of 33 pixels, so vectors of the copy would
    // be gathers (or scalar).
    const auto [p, s] = conv3x3("deeplab", Dim(1), 256, 33, 1, 2);
    const Stage* col = find_stage(p, "im2col");
    REQUIRE(col);
    CHECK(s.find(col->name)->compute.kind == Placement::Kind::Inline);
    const StageSchedule& g = *s.find(p.consumers(col->name).at(0));
    REQUIRE(g.cache.size() == 1);
    CHECK(g.cache[0].loop == "p_o");
    // The kernel columns (3 steps, the innermost reduction loop) unrolled
    // around the register tile; the kernel rows and channels not.
    REQUIRE(g.update);
    CHECK(g.update->unroll.count("kx") == 1);
    CHECK(g.update->unroll.count("ky") == 0);
    CHECK(g.update->unroll.count("c") == 0);
  }
}

TEST_CASE("copies per column tile: the register tile balances the column tiles over the cores",
          "[default][im2col][conv]") {
  // The GEMM's column tiles are its parallel loop; at every core count the
  // register tile fits the registers (with a vector per column and a
  // broadcast) and its busiest core finishes no later, by the contraction
  // rule's cost, than with the widest 6- or 8-row tiles, at prime and odd
  // pixel counts and channel counts (25: 5-row tiles).
  struct Shape2 {
    int64_t c, o, hw, stride;
  };
  for (const Shape2 sh :
       {Shape2{128, 97, 56, 2}, Shape2{160, 53, 47, 1}, Shape2{80, 37, 73, 2}, Shape2{64, 25, 41, 1}}) {
    Program p("balanced");
    const Tensor x = p.input("X", {1, sh.c, sh.hw, sh.hw}), w = p.input("W", {sh.o, sh.c, 3, 3});
    p.output(ops::conv("conv2d", 2, x, w, Tensor(), im2col_params(static_cast<int>(sh.stride), 1), "Y"));
    const Stage* col = find_op(p, "im2col");
    REQUIRE(col);
    const std::string gemm = p.consumers(col->name).at(0);
    const int64_t ow = (sh.hw + 2 - 3) / sh.stride + 1, pixels = ow * ow;
    for (const char* tn : {"x86-64-sapphirerapids", "x86-64-avx2"}) {
      for (int cores : {1, 2, 3, 4, 7}) {
        Target t = parse_target(tn);
        t.cores = cores;
        t.l2_bytes = 256 * 1024;  // every copy here is beyond half of it
        INFO(tn << " cores " << cores << " C=" << sh.c << " O=" << sh.o << " pixels " << pixels);
        const Schedule s = default_schedule(p, t);
        validate(p, s, &t);
        const StageSchedule& g = *s.find(gemm);
        REQUIRE(g.cache.size() == 1);
        REQUIRE(g.loops.parallel == std::vector<std::string>{"p_o"});
        const int64_t lanes = t.vector_lanes(DType::F32), regs = t.vector_registers;
        const int64_t r = g.loops.tile.at("o").at(0), wd = g.loops.tile.at("p").at(0);
        CHECK(wd % lanes == 0);
        CHECK((r + 1) * (wd / lanes) + 1 <= regs);
        // No slower by the contraction rule's cost than the widest 6- and
        // 8-row tiles.
        const TileOperands ops = tile_operands(p, p.stage(gemm), {1, 2});
        const auto cost = [&](int64_t rr, int64_t v) {
          return register_tile_cost(sh.o, pixels, rr, v, lanes, cores, TileSharing::Tiles, ops, t).cycles;
        };
        for (int64_t rr : {6, 8}) {
          int64_t v = 0;
          while (v < 4 && (v + 1) * (rr + 1) + 1 <= regs && (v + 1) * lanes <= pixels) ++v;
          if (v == 0 || rr > sh.o) continue;
          CHECK(cost(r, wd / lanes) <= cost(rr, v));
        }
      }
    }
  }
}

TEST_CASE("a 1x1 stride-1 convolution reads its input in place; rows of shifted vectors",
          "[default][im2col][conv]") {
  Target t = parse_target("x86-64-sapphirerapids");
  t.cores = 2;
  std::mt19937 rng(5);
  const auto col_schedule = [&](const Built& b) {
    const Stage* col = find_op(b.p, "im2col");
    REQUIRE(col);
    const Schedule s = default_schedule(b.p, t);
    validate(b.p, s, &t);
    return *s.find(col->name);
  };
  const auto matches = [&](const Built& b) {
    Target host = parse_target("host");
    host.cores = 2;
    CHECK(tolerance_ratio(run_f32(Kernel(b.p, default_schedule(b.p, host), host), b.in)[0], b.want,
                          1e-5, 3e-5) <= 1.0);
  };
  SECTION("1x1, stride 1, no padding: the copy is the input reshaped, inline") {
    // Rows of 14 and of 91 pixels, 2 images, grouped and with bias + ReLU.
    for (const Case& k : {Case{2, 40, 24, {14, 14}, {1, 1}, {1, 1}, {0, 0}, {1, 1}, 1, true, true},
                          Case{1, 22, 40, {9, 91}, {1, 1}, {1, 1}, {0, 0}, {1, 1}, 2, false, false}}) {
      const Built b = build(k, rng);
      CHECK(col_schedule(b).compute.kind == Placement::Kind::Inline);
      matches(b);
      // A strided view of the input (rows padded to 16 elements) is copied dense:
      // the kernel reads it through the flattened index (Lower.cpp).
      const HostTensor& x = b.in.at("X");
      const int64_t rows = x.shape[0] * x.shape[1] * x.shape[2], w = x.shape[3];
      std::vector<float> padded(static_cast<size_t>(rows * (w + 16)), 1e30f);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t i = 0; i < w; ++i)
          padded[static_cast<size_t>(r * (w + 16) + i)] = static_cast<float>(x.data[static_cast<size_t>(r * w + i)]);
      std::vector<float> wv(b.in.at("W").data.begin(), b.in.at("W").data.end());
      std::vector<float> bias;
      if (b.in.count("b")) bias.assign(b.in.at("b").data.begin(), b.in.at("b").data.end());
      const Kernel kern(b.p, default_schedule(b.p, parse_target("host")), parse_target("host"));
      std::vector<float> y(static_cast<size_t>(b.want.numel()));
      std::vector<BufferRef> ins{
          {padded.data(), DType::F32, x.shape,
           {x.shape[1] * x.shape[2] * (w + 16), x.shape[2] * (w + 16), w + 16, 1}},
          {wv.data(), DType::F32, b.in.at("W").shape, {}}};
      if (!bias.empty()) ins.push_back({bias.data(), DType::F32, {k.o}, {}});
      kern.run(ins, {{y.data(), DType::F32, b.want.shape, {}}});
      HostTensor got{b.want.shape, std::vector<double>(y.begin(), y.end())};
      CHECK(tolerance_ratio(got, b.want, 1e-5, 3e-5) <= 1.0);
    }
  }
  SECTION("a copy the L2 holds: vectors along output rows, the last shifted inwards") {
    // Stride 2 from 107x107 (rows of 54: 3 vectors and one shifted, unrolled)
    // and from 181x181 (rows of 91: past a full unroll's 64 iterations).
    for (const int64_t hw : {107, 181}) {
      const Built b = build({1, 12, 36, {hw, hw}, {1, 1}, {2, 2}, {0, 0}, {1, 1}, 1, true, false}, rng);
      const StageSchedule cs = col_schedule(b);
      const int64_t row = (hw + 1) / 2;
      CHECK(cs.compute.kind == Placement::Kind::Root);
      CHECK(cs.loops.tile.at("p") == std::vector<int64_t>{row});
      CHECK(cs.loops.vectorize == "p_i");
      CHECK(cs.loops.vector_width == t.vector_lanes(DType::F32));
      CHECK(cs.loops.unroll.count("p_i") == (row <= 64 ? 1u : 0u));
      matches(b);
    }
    // 3x3 stride 2 from 27x27 in 17 groups (rows of 14, narrower than a
    // vector): half vectors, the second shifted, unrolled; from 13x13 (rows
    // of 7): 4 lanes.
    for (const int64_t hw : {27, 13}) {
      const Built b =
          build({1, 102, 782, {hw, hw}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, 17, true, false}, rng);
      const StageSchedule cs = col_schedule(b);
      const int64_t row = (hw + 1) / 2;
      REQUIRE(cs.compute.kind == Placement::Kind::Root);
      CHECK(cs.loops.tile.at("p") == std::vector<int64_t>{row});
      CHECK(cs.loops.vector_width == (row >= 8 ? 8 : 4));
      matches(b);
    }
  }
}
