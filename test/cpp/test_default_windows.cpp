// Default schedules of window stages (schedules/defaults/Window.cpp):
// depthwise, grouped, strided and dilated channels-first convolutions (1-D
// and 2-D) and max / average pooling, against float64 loops written here, at
// odd, prime and size-1 extents, with padding, and with a symbolic batch; the
// rule's structure (one vector of width per tile, the taps unrolled, output
// channels split across cores) and validity on several targets.
#include <catch2/catch.hpp>
#include <regex>

#include "dsl/ops/Ops.h"
#include "schedules/ScheduleJson.h"
#include "schedules/Validate.h"
#include "schedules/defaults/Defaults.h"
#include "schedules/defaults/Rules.h"
#include "test/cpp/ConvReference.h"
#include "test/cpp/Helpers.h"
#include "test/cpp/LoweredStatement.h"

using namespace pto;
using namespace pto::test;

namespace {

// A channels-first 2-D convolution (1-D when h == 1 and kh == 1: the same
// data as [N, C, W]).
struct ConvCase {
  int64_t n, c, h, w, o, kh, kw;
  std::array<int, 2> stride, pad, dil;
  int groups;
  bool bias, relu, one_d = false;
  bool symbolic_batch = false;
};

// The geometry of a case for the shared reference (ConvReference.h).
ConvGeometry geometry(const ConvCase& k) {
  if (k.one_d) return {k.n, k.c, k.o, {k.w}, {k.kw}, {k.stride[1]}, {k.pad[1]}, {k.dil[1]}, k.groups, k.relu};
  return {k.n,          k.c,
          k.o,          {k.h, k.w},
          {k.kh, k.kw}, {k.stride[0], k.stride[1]},
          {k.pad[0], k.pad[1]}, {k.dil[0], k.dil[1]},
          k.groups,     k.relu};
}

struct Built {
  Program p{"window"};
  std::map<std::string, HostTensor> in;
  HostTensor want;
};

Built build_conv(const ConvCase& k, std::mt19937& rng) {
  Built r;
  Program& p = r.p;
  const Dim n = k.symbolic_batch ? Dim::symbol("N") : Dim(k.n);
  const Shape xs = k.one_d ? Shape{n, k.c, k.w} : Shape{n, k.c, k.h, k.w};
  const Shape ws =
      k.one_d ? Shape{k.o, k.c / k.groups, k.kw} : Shape{k.o, k.c / k.groups, k.kh, k.kw};
  const Tensor x = p.input("X", xs), w = p.input("W", ws);
  const Tensor b = k.bias ? p.input("b", {k.o}) : Tensor();
  const std::string name = k.relu ? "conv" : "Y";
  Tensor conv;
  if (k.one_d) {
    ops::ConvParams cp;
    cp.stride = {k.stride[1]};
    cp.padding = {k.pad[1]};
    cp.dilation = {k.dil[1]};
    cp.groups = k.groups;
    conv = ops::conv1d(x, w, b, cp, name);
  } else {
    conv = ops::conv2d(x, w, b, k.stride, k.pad, k.dil, k.groups, name);
  }
  p.output(k.relu ? ops::relu(conv, "Y") : conv);
  const std::vector<int64_t> xshape =
      k.one_d ? std::vector<int64_t>{k.n, k.c, k.w} : std::vector<int64_t>{k.n, k.c, k.h, k.w};
  const std::vector<int64_t> wshape = k.one_d
                                          ? std::vector<int64_t>{k.o, k.c / k.groups, k.kw}
                                          : std::vector<int64_t>{k.o, k.c / k.groups, k.kh, k.kw};
  r.in = {{"X", random_tensor(xshape, rng)}, {"W", random_tensor(wshape, rng)}};
  if (k.bias) r.in["b"] = random_tensor({k.o}, rng);
  r.want = conv_reference(geometry(k), r.in.at("X"), r.in.at("W"), k.bias ? &r.in.at("b") : nullptr);
  return r;
}

struct PoolCase {
  bool max;
  int64_t n, c, h, w;
  int kh, kw, sh, sw, ph, pw;
  bool count_include_pad = false;
  bool symbolic_batch = false;
};

// Max over the in-image positions of each window; average over them, divided
// by their count (or by the window size with count_include_pad).
HostTensor pool_reference(const PoolCase& k, const HostTensor& x) {
  const int64_t oh = (k.h + 2 * k.ph - k.kh) / k.sh + 1, ow = (k.w + 2 * k.pw - k.kw) / k.sw + 1;
  HostTensor r{{k.n, k.c, oh, ow}, std::vector<double>(static_cast<size_t>(k.n * k.c * oh * ow))};
  size_t idx = 0;
  for (int64_t n = 0; n < k.n; ++n)
    for (int64_t c = 0; c < k.c; ++c)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t xx = 0; xx < ow; ++xx) {
          double best = -INFINITY, sum = 0;
          int64_t count = 0;
          for (int64_t ky = 0; ky < k.kh; ++ky)
            for (int64_t kx = 0; kx < k.kw; ++kx) {
              const int64_t iy = y * k.sh + ky - k.ph, ix = xx * k.sw + kx - k.pw;
              if (iy < 0 || iy >= k.h || ix < 0 || ix >= k.w) continue;
              const double v = x.data[static_cast<size_t>(((n * k.c + c) * k.h + iy) * k.w + ix)];
              best = std::max(best, v);
              sum += v;
              ++count;
            }
          r.data[idx++] =
              k.max ? best : sum / static_cast<double>(k.count_include_pad ? k.kh * k.kw : count);
        }
  return r;
}

Built build_pool(const PoolCase& k, std::mt19937& rng) {
  Built r;
  Program& p = r.p;
  const Dim n = k.symbolic_batch ? Dim::symbol("N") : Dim(k.n);
  const Tensor x = p.input("X", {n, k.c, k.h, k.w});
  ops::PoolParams pp;
  pp.kernel = {k.kh, k.kw};
  pp.stride = {k.sh, k.sw};
  pp.padding = {k.ph, k.pw};
  pp.count_include_pad = k.count_include_pad;
  p.output(k.max ? ops::max_pool2d(x, pp, "Y") : ops::avg_pool2d(x, pp, "Y"));
  r.in = {{"X", random_tensor({k.n, k.c, k.h, k.w}, rng)}};
  r.want = pool_reference(k, r.in.at("X"));
  return r;
}

std::vector<Target> targets() {
  std::vector<Target> ts;
  for (const char* name : {"host", "x86-64-avx2", "x86-64-avx512", "arm-64-linux"})
    for (int cores : {1, 2}) {
      Target t = parse_target(name);
      t.cores = cores;
      ts.push_back(t);
    }
  return ts;
}

const Stage& window_of(const Program& p) {
  for (const Stage& st : p.stages())
    if (st.reduce && (st.kind == OpKind::Convolution || st.kind == OpKind::Pooling || st.conv_roles)) return st;
  FAIL("no window stage");
  throw;
}

// The window rule's structure on `w` under `s`: its reduction runs inside a
// tile whose width is one vector (at most the target's lanes), with the
// width vectorized in the update.
void check_window_structure(const Program& p, const Schedule& s, const Stage& w, const Target& t) {
  const StageSchedule* ws = s.find(w.name);
  REQUIRE(ws);
  REQUIRE(ws->update);
  const std::string x = w.vars.back();
  const int64_t ow = w.shape.back().value;
  if (ow >= 2) {
    CHECK(ws->update->vectorize == x);
    CHECK(ws->update->vector_width <= t.vector_lanes(DType::F32));
  }
  // The stage holding the tile: the consumer it is computed at, or itself (accumulator_at).
  const std::string host = ws->compute.kind == Placement::Kind::At ? ws->compute.stage : w.name;
  const StageSchedule* hs = s.find(host);
  REQUIRE(hs);
  const Stage& hst = p.stage(host);
  const auto tile = hs->loops.tile.find(hst.vars.back());
  if (tile != hs->loops.tile.end()) CHECK(tile->second.back() <= t.vector_lanes(DType::F32));
  CHECK(!hs->loops.parallel.empty());
  // Taps unrolled up to 64 of them (a 7x7 kernel), the unrolled body within
  // 256 FMAs (taps x rows x group channels): rows are fewer where needed.
  int64_t taps = 1;
  for (const RVar& r : w.rvars)
    if (!(w.conv_roles && r.name == w.conv_roles->in_channel)) taps *= r.extent.value;
  for (const RVar& r : w.rvars)
    if (!(w.conv_roles && r.name == w.conv_roles->in_channel))
      CHECK(ws->update->unroll.count(r.name) == (taps <= 64 ? 1u : 0u));
  if (taps <= 64 && w.vars.size() >= 4) {
    int64_t body = taps;
    const std::string y = hst.vars[hst.vars.size() - 2], o = hst.vars[1];
    if (const auto ty = hs->loops.tile.find(y); ty != hs->loops.tile.end()) body *= ty->second.back();
    if (const auto to = hs->loops.tile.find(o); to != hs->loops.tile.end() && ws->update->unroll.count(w.vars[1]))
      body *= to->second.back();
    CHECK((body <= 256 || taps * 4 > 256));
  }
}

}  // namespace

TEST_CASE(
    "default schedules of depthwise, grouped, strided, dilated NCHW convolutions match float64",
    "[default][window]") {
  const std::vector<ConvCase> cases = {
      {1, 5, 13, 17, 5, 3, 3, {1, 1}, {1, 1}, {1, 1}, 5, true, true},  // depthwise 3x3, bias + ReLU
      {1, 7, 23, 19, 7, 3, 3, {2, 2}, {1, 1}, {1, 1}, 7, false, false},  // depthwise, stride 2
      {1, 3, 31, 37, 3, 3, 3, {1, 1}, {2, 2}, {2, 2}, 3, true, false},   // depthwise, dilation 2
      {2, 2, 11, 29, 4, 5, 5, {1, 1}, {2, 2}, {1, 1}, 2, true, false},  // channel multiplier 2, 5x5
      {1, 8, 9, 40, 8, 3, 3, {1, 1}, {1, 1}, {1, 1}, 2, true, true},    // groups of 4 channels
      {1, 6, 15, 20, 9, 3, 2, {2, 1}, {1, 0}, {1, 2}, 3, true, false},  // mixed stride / dilation,
                                                                        // 3 per group
      {1, 3, 1, 7, 3, 3, 3, {1, 1}, {1, 1}, {1, 1}, 3, false, false},   // one row, narrower than a
                                                                        // vector
      {1, 4, 1, 1, 4, 1, 1, {1, 1}, {0, 0}, {1, 1}, 4, true, false},    // 1x1 image, 1x1 kernel
      {1, 11, 7, 7, 11, 3, 3, {1, 1}, {1, 1}, {1, 1}, 11, true, true},  // 7x7 map (MobileNet's
                                                                        // last)
      {1, 4, 1, 101, 4, 1, 10, {1, 5}, {0, 0}, {1, 1}, 4, true, false, true},  // conv1d depthwise,
                                                                               // kernel 10 stride 5
      {1, 1, 1, 97, 12, 1, 10, {1, 5}, {0, 0}, {1, 1}, 1, true, true, true},   // conv1d, one input
                                                                               // channel (wav2vec)
      {1, 6, 1, 53, 6, 1, 3, {1, 2}, {0, 1}, {1, 1}, 2, false, false, true},   // conv1d grouped,
                                                                               // padded, stride 2
      {3, 5, 12, 18, 5, 3, 3, {1, 1}, {1, 1}, {1, 1}, 5, true, true, false, true},  // symbolic
                                                                                    // batch (run at
                                                                                    // 3)
      {2,
       8,
       10,
       21,
       8,
       3,
       3,
       {2, 2},
       {1, 1},
       {1, 1},
       2,
       false,
       false,
       false,
       true},  // symbolic batch, grouped, stride 2
      {1, 8, 12, 20, 12, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true, true},  // dense, input outweighs
                                                                        // weights: pixels outer
      {1, 16, 5, 7, 24, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1, true, false},  // dense, weights outweigh
                                                                        // input: channels outer
      {1, 12, 13, 11, 14, 3, 3, {1, 1}, {2, 2}, {2, 2}, 2, false, false},  // 7 channels per group
                                                                           // (no divisor <= 4),
                                                                           // dilated
      {2, 6, 9, 18, 10, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1, true, true, false, true},  // dense,
                                                                                    // symbolic
                                                                                    // batch
      // 16-31 output channels per group of a 2-D k x k: direct, not im2col
      // (dsl/ops/Convolution.cpp): dense 8 -> 17, and 4 groups of 16 strided.
      {1, 8, 12, 20, 17, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true, true},
      {1, 32, 9, 13, 64, 3, 3, {2, 2}, {1, 1}, {1, 1}, 4, false, false},
      // 7x7 kernels (ConvNeXt's depthwise; a dense one with few channels
      // over fewer than 96 pixels: over more it goes channels-last), their
      // 49 taps unrolled; 9x9's 81 stay a loop.
      {1, 6, 19, 23, 6, 7, 7, {1, 1}, {3, 3}, {1, 1}, 6, true, false},
      {1, 3, 9, 10, 8, 7, 7, {1, 1}, {3, 3}, {1, 1}, 1, false, true},
      {1, 2, 12, 13, 2, 9, 9, {1, 1}, {4, 4}, {1, 1}, 2, true, false},
  };
  const auto ts = targets();
  std::mt19937 rng(41);
  for (const ConvCase& k : cases) {
    INFO("conv " << k.c << "x" << k.h << "x" << k.w << " -> " << k.o << " kernel " << k.kh << "x"
                 << k.kw << " stride " << k.stride[0] << "," << k.stride[1] << " groups "
                 << k.groups << (k.one_d ? " (1-D)" : "")
                 << (k.symbolic_batch ? " symbolic batch" : ""));
    const auto [p, in, want] = build_conv(k, rng);
    const Stage& w = window_of(p);
    // Otherwise im2col + GEMM (test_default_im2col.cpp).
    const int64_t og = k.o / k.groups;
    const bool few_shared = !k.one_d && k.kh * k.kw > 1 && k.groups == 1 && og >= 6 && og % 2 && og % 3;
    const bool window = og < 6 || (!k.one_d && !few_shared && (og < 16 || (og < 32 && k.kh * k.kw > 1)));
    for (const Target& t : ts) {
      INFO("target " << t.describe());
      const Schedule s = default_schedule(p, t);
      validate(p, s, &t);
      if (window) check_window_structure(p, s, w, t);
    }
    Target t = parse_target("host");
    t.cores = 2;
    // f32 sums of at most 16 * 3 * 3 = 144 products of values in [-1, 1]
    // (rounding error ~ sqrt(144) * 2^-24 * 5 = 4e-6).
    CHECK(tolerance_ratio(run_f32(Kernel(p, default_schedule(p, t), t), in)[0], want, 1e-5, 3e-5) <=
          1.0);
  }
}

// A tile of rows x group channels accumulators: at a prime output height
// (no row count divides it) the rows that compute the fewest output rows are
// 1, a tile of g FMA chains; the rule takes rows until the tile has the
// target's FMAs in flight (or its row cap). Depthwise 3x3 dilation 2 at 71x71
// x 637 ran 1 chain at 6.0 ms, 4 at 1.3 (ONNX Runtime 2.7); dense 325 -> 9 at
// 17x17 3 chains 0.86 ms, 9 chains 0.72.
TEST_CASE("window tiles keep the FMA pipes busy at prime output heights", "[default][window]") {
  std::mt19937 rng(17);
  for (const ConvCase& k : std::vector<ConvCase>{
           {1, 16, 71, 71, 16, 3, 3, {1, 1}, {2, 2}, {2, 2}, 16, true, false},  // depthwise
           {1, 40, 17, 17, 9, 3, 3, {1, 1}, {2, 2}, {2, 2}, 1, true, false},    // dense, 3 per tile
           {1, 24, 13, 13, 6, 3, 3, {1, 1}, {1, 1}, {1, 1}, 2, true, true}}) { // groups of 3
    Built b = build_conv(k, rng);
    const Target t = parse_target("x86-64-avx512");
    const Schedule s = default_schedule(b.p, t);
    const Stage& w = window_of(b.p);
    const StageSchedule* ws = s.find(w.name);
    REQUIRE(ws);
    const std::string host = ws->compute.kind == Placement::Kind::At ? ws->compute.stage : w.name;
    const Stage& hst = b.p.stage(host);
    const LoopSchedule& ls = s.find(host)->loops;
    int64_t rows = 1, group = 1;
    if (auto it = ls.tile.find(hst.vars[hst.vars.size() - 2]); it != ls.tile.end()) rows = it->second.back();
    if (auto it = ls.tile.find(hst.vars[1]); it != ls.tile.end() && ws->update->unroll.count(w.vars[1]))
      group = it->second.back();
    INFO(schedule_to_json_string(s, 0));
    CHECK((rows * group >= t.fmas_in_flight || rows == 4));
    const Target& h = host_target();
    CHECK(tolerance_ratio(run_f32(Kernel(b.p, default_schedule(b.p, h), h), b.in)[0], b.want, 1e-5, 3e-5) <= 1.0);
  }
}

TEST_CASE("a dense window tile takes 4 channels where 2, 3 and 4 do not divide them", "[default][window]") {
  // 23 and 49 output channels, the input outweighing the weights (the
  // channels loop inside the pixels): groups of 4, the last shifted inwards.
  std::mt19937 rng(19);
  for (const ConvCase& k : std::vector<ConvCase>{{1, 8, 20, 21, 23, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true, true},
                                                 {1, 6, 27, 27, 49, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true, false}}) {
    Built b = build_conv(k, rng);
    const Target t = parse_target("x86-64-avx512");
    const Schedule s = default_schedule(b.p, t);
    validate(b.p, s, &t);
    const Stage& w = window_of(b.p);
    const StageSchedule* ws = s.find(w.name);
    REQUIRE(ws);
    const std::string host = ws->compute.kind == Placement::Kind::At ? ws->compute.stage : w.name;
    const Stage& hst = b.p.stage(host);
    INFO(schedule_to_json_string(s, 0));
    CHECK(s.find(host)->loops.tile.at(hst.vars[1]) == std::vector<int64_t>{4});
    const Target& h = host_target();
    CHECK(tolerance_ratio(run_f32(Kernel(b.p, default_schedule(b.p, h), h), b.in)[0], b.want, 1e-5, 3e-5) <= 1.0);
  }
}

// The zero padding of a channels-first convolution is a stage of its own
// (`<out>_pad`), materialized by the window rule: per group at the tile's
// group loop (depthwise: one plane), at root for a dense convolution, where
// each copied element feeds 8+ FMAs (channels per group x taps / strides); the
// window then reads plain vectors in every tile. Through the inline guard the
// border tiles read per-lane: depthwise 5x5 at 26x26x408 0.71 -> 0.08 ms,
// 325 -> 9 dilated at 17x17 0.72 -> 0.19 (ONNX Runtime 0.85, 0.30).
TEST_CASE("window convolutions read a materialized padded input", "[default][window]") {
  std::mt19937 rng(5);
  enum class Pad { PerGroup, Root, Inline };
  struct Want {
    ConvCase k;
    Pad pad;
  };
  for (const Want& c : std::vector<Want>{
           {{1, 12, 26, 26, 12, 5, 5, {1, 1}, {2, 2}, {1, 1}, 12, true, false}, Pad::PerGroup},  // depthwise + bias
           {{1, 8, 19, 19, 16, 7, 7, {2, 2}, {3, 3}, {1, 1}, 4, true, true}, Pad::PerGroup},     // grouped, 4 per group
           {{1, 40, 17, 17, 9, 3, 3, {1, 1}, {2, 2}, {2, 2}, 1, true, false}, Pad::Root},       // dense
           // Depthwise 3x3 at stride 2: 9 taps per 4 copied elements, the copy does not pay.
           {{1, 6, 23, 23, 6, 3, 3, {2, 2}, {1, 1}, {1, 1}, 6, true, true}, Pad::Inline}}) {
    Built b = build_conv(c.k, rng);
    const Target& t = host_target();
    const Schedule s = default_schedule(b.p, t);
    const Stage& w = window_of(b.p);
    const Stage* pad = nullptr;
    for (const std::string& r : w.reads())
      if (const Stage* st = b.p.find_stage(r); st && st->op == "pad") pad = st;
    REQUIRE(pad);
    const StageSchedule* ps = s.find(pad->name);
    REQUIRE(ps);
    INFO(schedule_to_json_string(s, 0));
    CHECK(ps->compute.kind == (c.pad == Pad::PerGroup ? Placement::Kind::At
                               : c.pad == Pad::Root   ? Placement::Kind::Root
                                                      : Placement::Kind::Inline));
    if (c.pad != Pad::Inline) CHECK(ps->loops.vectorize == pad->vars.back());
    CHECK(tolerance_ratio(run_f32(Kernel(b.p, s, t), b.in)[0], b.want, 1e-5, 3e-5) <= 1.0);
  }
}

TEST_CASE("default schedules of max and average pooling match float64", "[default][window]") {
  const std::vector<PoolCase> cases = {
      {true, 1, 5, 23, 29, 3, 3, 2, 2, 1, 1},               // ResNet's stem pool at odd size
      {true, 1, 3, 16, 17, 2, 2, 2, 2, 0, 0},               // 2x2 stride 2, no padding
      {false, 2, 3, 17, 16, 3, 3, 2, 2, 1, 1},              // average over in-image positions
      {false, 1, 4, 13, 19, 3, 3, 1, 1, 1, 1, true},        // count_include_pad, stride 1
      {true, 1, 7, 1, 5, 1, 3, 1, 2, 0, 1},                 // one row, narrower than a vector
      {true, 1, 2, 3, 3, 3, 3, 1, 1, 0, 0},                 // window covers the image: 1x1 output
      {false, 3, 6, 9, 31, 3, 3, 2, 2, 1, 1, false, true},  // symbolic batch (run at 3)
      {true, 2, 5, 11, 40, 3, 3, 2, 2, 1, 1, false, true},  // symbolic batch
  };
  const auto ts = targets();
  std::mt19937 rng(43);
  for (const PoolCase& k : cases) {
    INFO((k.max ? "max" : "avg") << " pool " << k.c << "x" << k.h << "x" << k.w << " kernel "
                                 << k.kh << "x" << k.kw << " stride " << k.sh << "x" << k.sw
                                 << (k.symbolic_batch ? " symbolic batch" : ""));
    const auto [p, in, want] = build_pool(k, rng);
    const Stage& w = window_of(p);
    for (const Target& t : ts) {
      INFO("target " << t.describe());
      const Schedule s = default_schedule(p, t);
      validate(p, s, &t);
      check_window_structure(p, s, w, t);
    }
    Target t = parse_target("host");
    t.cores = 2;
    CHECK(tolerance_ratio(run_f32(Kernel(p, default_schedule(p, t), t), in)[0], want, 1e-6, 1e-6) <=
          1.0);
  }
}

TEST_CASE("a max pool's accumulator starts from vector stores as its update reads it",
          "[default][window]") {
  // The identity (-inf) of the accumulator tile was written one scalar at a
  // time and reloaded at once as vectors by the update: a store-forwarding
  // stall per tile, max pooling 1.5x slower than the same nest summing.
  // Update.cpp's helper init: vectorized along the update's vector dim.
  std::mt19937 rng(5);
  const auto [p, in, want] = build_pool({true, 1, 8, 32, 64, 3, 3, 2, 2, 1, 1}, rng);
  Target t = parse_target("host");
  const int lanes = t.vector_lanes(DType::F32);
  if (lanes < 4) return;
  const Schedule s = default_schedule(p, t);
  const Stage& w = window_of(p);
  REQUIRE(!s.find(w.name)->accumulator_at.empty());
  // Halide numbers a Func name it has seen before in the process (acc$2).
  // The identity is -inf, or its order key (-2139095041) where the max runs
  // over keys (IEEE semantics, backends/Ieee.h).
  const std::regex store(w.name + R"(__acc(\$[0-9]+)?\[.*(inf|-2139095041))");
  int vector_inits = 0, scalar_inits = 0;
  for (const std::string& line : lowered_statement(p, s, t)) {
    if (!std::regex_search(line, store)) continue;
    INFO(line);
    (line.find("ramp(") != std::string::npos ? vector_inits : scalar_inits) += 1;
  }
  CHECK(vector_inits > 0);
  CHECK(scalar_inits == 0);
  CHECK(tolerance_ratio(run_f32(Kernel(p, s, t), in)[0], want, 1e-6, 1e-6) <= 1.0);
}

TEST_CASE("dense 1-D NCHW convolutions keep the default contraction tile", "[default][window]") {
  // Groups of 6 or more output channels share each input load across the
  // contraction tile's rows; the window rule takes them only in 2-D.
  Program p("dense");
  const Tensor x = p.input("X", {1, 8, 40}), w = p.input("W", {12, 8, 3});
  p.output(ops::conv1d(x, w, Tensor(), {}, "Y"));
  const Schedule s = default_schedule(p, parse_target("host"));
  const StageSchedule* ys = s.find("Y");
  REQUIRE(ys);
  CHECK(!ys->accumulator_at.empty());
  REQUIRE(ys->update);
  // The contraction micro-kernel's rows are output channels, unrolled inside the reduction, the
  // reduction loops (channels, then taps) outside them.
  CHECK(ys->update->unroll.count("o"));
  const std::vector<std::string>& order = ys->update->order;
  const auto at = [&](const std::string& l) { return std::find(order.begin(), order.end(), l) - order.begin(); };
  CHECK(at("c") < at("kx"));
  CHECK(at("kx") < at("o"));
}

// Channels-last pooling (PoolParams::channels_last, the ONNX importer's
// layout between convolutions): the same windows over [N, H, W, C], the
// output [N, OH, OW, C]; not a window stage (its channel var is last) but the
// reduction rule's, vectorized along the channels. Against the channels-first
// float64 loops above, on the transposed data.
TEST_CASE("channels-last max and average pooling match float64", "[default][window]") {
  const std::vector<PoolCase> cases = {
      {true, 1, 64, 23, 29, 3, 3, 2, 2, 1, 1},         // ResNet's stem pool at odd size
      {false, 2, 24, 17, 16, 3, 3, 2, 2, 1, 1},        // average over in-image positions
      {false, 1, 19, 13, 19, 3, 3, 1, 1, 1, 1, true},  // count_include_pad, odd channels
      {true, 1, 7, 1, 5, 1, 3, 1, 2, 0, 1},            // one row, fewer channels than a vector
  };
  std::mt19937 rng(71);
  for (const PoolCase& k : cases) {
    INFO((k.max ? "max" : "avg") << " pool " << k.c << "x" << k.h << "x" << k.w);
    Program p("pool_cl");
    const Tensor x = p.input("X", {k.n, k.h, k.w, k.c});
    ops::PoolParams pp;
    pp.kernel = {k.kh, k.kw};
    pp.stride = {k.sh, k.sw};
    pp.padding = {k.ph, k.pw};
    pp.count_include_pad = k.count_include_pad;
    pp.channels_last = true;
    p.output(k.max ? ops::max_pool2d(x, pp, "Y") : ops::avg_pool2d(x, pp, "Y"));
    const HostTensor xf = random_tensor({k.n, k.c, k.h, k.w}, rng);
    const HostTensor want = nchw_to_nhwc(pool_reference(k, xf));
    for (const Stage& st : p.stages())
      CHECK_FALSE(defaults::window_stage(p, st, parse_target("host")));
    for (int cores : {1, 2}) {
      Target t = parse_target("host");
      t.cores = cores;
      const Schedule s = default_schedule(p, t);
      validate(p, s, &t);
      CHECK(tolerance_ratio(run_f32(Kernel(p, s, t), {{"X", nchw_to_nhwc(xf)}})[0], want, 1e-6, 1e-6) <=
            1.0);
    }
  }
}
