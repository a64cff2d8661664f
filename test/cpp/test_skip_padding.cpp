// The skip_padding directive (Schedule.h, dsl/ZeroPadding.h): a convolution
// over a zero-padded input leaves out the reduction steps that read padding.
// Every numeric check compares with the float64 interpreter, over tiles that
// put the guards inside, outside and across the register tile; the error
// cases check that validation names the stage, the value and what is valid.
#include <catch2/catch.hpp>

#include "Helpers.h"
#include "target/Target.h"
#include "dsl/ZeroPadding.h"
#include "dsl/ops/Ops.h"
#include "schedules/Explain.h"
#include "schedules/ScheduleJson.h"
#include "schedules/Validate.h"
#include "schedules/defaults/Defaults.h"

using namespace pto;
using namespace pto::test;
using Catch::Matchers::Contains;

namespace {

// conv2d_nhwc + bias over [1, H, W, C] with a 3x3 kernel, padding 1.
Program padded_conv(int hw, int c, int o, int stride) {
  Program p("conv");
  const Tensor x = p.input("X", {1, hw, hw, c});
  const Tensor w = p.input("W", {3, 3, c, o});
  const Tensor b = p.input("b", {o});
  p.output(ops::conv2d_nhwc(x, w, b, {stride, stride}, {1, 1}, {1, 1}, "Y"));
  return p;
}

double check(const Program& p, const Schedule& s, std::mt19937& rng) {
  const Target t = parse_target("host");
  validate(p, s, &t);
  const Kernel k(p, s, t);
  std::map<std::string, HostTensor> in;
  for (const auto& i : p.inputs()) {
    std::vector<int64_t> shape;
    for (const Dim& d : i.shape) shape.push_back(d.value);
    in[i.name] = random_tensor(shape, rng);
  }
  // Sums of 9 * C <= 288 products of values in [-1, 1] in f32 (skipped or not,
  // the order changes): 288 * 2^-24 * 288 = 5e-3 absolute at most.
  return tolerance_ratio(run_f32(k, in)[0], interpret(p, in).at("Y"), 1e-5, 5e-3);
}

}  // namespace

TEST_CASE("skip_padding: the padded read and its condition are found", "[skip_padding]") {
  const Program p = padded_conv(7, 16, 32, 1);
  const auto pr = padded_read(p, p.stage("Y_acc"));
  REQUIRE(pr);
  CHECK(pr->stage->name == "Y_pad");
  CHECK(pr->dims == std::vector<std::string>{"h", "w"});
  CHECK(padding_predicate(p, p.stage("Y_acc")).has_value());
  CHECK_FALSE(padded_read(p, p.stage("Y_pad")));  // not a reduction
}

TEST_CASE("skip_padding: default and hand-written tiles match float64", "[skip_padding]") {
  const Target t = parse_target("host");
  std::mt19937 rng(21);
  for (const int stride : {1, 2}) {
    const Program p = padded_conv(9, 32, 32, stride);
    const int oh = stride == 1 ? 9 : 5;
    for (const std::vector<std::string>& dims :
         std::vector<std::vector<std::string>>{{"h", "w"}, {"w"}, {"h"}}) {
      // Whole rows per tile with kx unrolled; one-row and 3-row tiles; a 4-pixel tile
      // that does not cover the row (the guards stay as branches).
      for (const int xt : {oh, 4}) {
        for (const int yt : {1, 3}) {
          INFO("stride " << stride << " dims " << dims.size() << " xt " << xt << " yt " << yt);
          Schedule s = default_schedule(p, t);
          StageSchedule& a = s["Y_acc"];
          a = StageSchedule{};
          a.skip_padding = dims;
          LoopSchedule up;
          up.tile["y"] = {yt};
          up.tile["x"] = {xt};
          up.order = {"n", "y_o", "x_o", "ky", "kx", "c", "y_i", "x_i", "o"};
          up.vectorize = "o";
          up.vector_width = 16;
          up.unroll["kx"] = 0;
          up.unroll["x_i"] = 0;
          a.update = up;
          CHECK(check(p, s, rng) <= 1.0);
        }
      }
    }
  }
}

TEST_CASE(
    "skip_padding: defaults use it on deep layers, explain shows the condition, JSON round trip",
    "[skip_padding]") {
  // A 2 MB L2 per core (Sapphire Rapids'), so that the 28x28 layer below keeps
  // its 0.6 MB of weights in L2 and takes the row-parallel tile.
  Target t = parse_target("x86-64-avx512");
  t.l2_bytes = 2 << 20;
  // ResNet-50's 7x7 3x3 layer shape: weights (9 MB) outweigh the input and the L2.
  const Program p = padded_conv(7, 512, 512, 1);
  const Schedule s = default_schedule(p, t);
  const StageSchedule* a = s.find("Y_acc");
  REQUIRE(a);
  // Four two-row tiles, unrolled with ky: rows and columns.
  CHECK(a->skip_padding == std::vector<std::string>{"h", "w"});
  // A 28x28 128-channel layer takes the row-parallel tile: one output row per
  // accumulator tile (rows trimmed), two pixel tiles per row unrolled (columns).
  const Program row = padded_conv(28, 128, 128, 1);
  const Schedule rs = default_schedule(row, t);
  const StageSchedule* r = rs.find("Y_acc");
  REQUIRE(r);
  CHECK(r->skip_padding == std::vector<std::string>{"h", "w"});
  // Weights outweighing the input and the L2 with a pixel tile of part of a
  // row (22 = 2 x 11 pixels, one-row tiles): the rows' padding alone.
  Target small_l2 = t;
  small_l2.l2_bytes = 64 << 10;
  const Program part = padded_conv(22, 32, 96, 1);
  const Schedule ps = default_schedule(part, small_l2);
  const StageSchedule* pa = ps.find("Y_acc");
  REQUIRE(pa);
  REQUIRE(pa->update);
  CHECK(pa->update->tile.at("x") == std::vector<int64_t>{11});
  CHECK(pa->update->tile.at("y") == std::vector<int64_t>{1});
  CHECK(pa->skip_padding == std::vector<std::string>{"h"});
  {
    std::mt19937 prng(9);
    CHECK(check(part, ps, prng) <= 1.0);
  }
  CHECK_THAT(explain(p, s, &t), Contains("    where "));
  CHECK(schedule_from_json(schedule_to_json(s)) == s);
  std::mt19937 rng(5);
  const Program small = padded_conv(7, 16, 32, 1);
  Schedule ss = default_schedule(small, parse_target("host"));
  ss["Y_acc"].skip_padding = {"h", "w"};
  CHECK(check(small, ss, rng) <= 1.0);
}

TEST_CASE("skip_padding: validation errors name the stage, the value and what is valid",
          "[skip_padding][errors]") {
  const Target t = parse_target("host");
  const Program p = padded_conv(7, 16, 32, 1);
  auto fails = [&](const Schedule& s, const std::string& text) {
    INFO(text);
    CHECK_THROWS_AS(validate(p, s, &t), ScheduleError);
    CHECK_THROWS_WITH(validate(p, s, &t), Contains(text));
  };
  Schedule bad_dim;
  bad_dim["Y_acc"].skip_padding = {"c"};
  fails(bad_dim, "skip_padding dim 'c' is not a padded dim of 'Y_pad'; padded dims: h, w");
  Schedule not_padded;
  not_padded["Y"].skip_padding = {"h"};
  fails(not_padded, "stage 'Y': skip_padding needs a sum");
  Schedule with_rf;
  with_rf["Y_acc"].skip_padding = {"h"};
  with_rf["Y_acc"].rfactor = RFactor{"c", 8};
  fails(with_rf, "skip_padding and rfactor cannot be combined");
  CHECK_THROWS_WITH(
      schedule_from_json_string(R"({"schema": 1, "stages": {"Y_acc": {"skip_padding": "h"}}})"),
      Contains("stages.Y_acc.skip_padding"));
}
