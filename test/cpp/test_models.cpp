// Real workloads at small shapes: the BERT encoder layer and ResNet-50-style
// convolutions, under the default schedule, against independent float64 code.
#include <catch2/catch.hpp>

#include "Helpers.h"
#include "apps/bert/BertReference.h"
#include "dsl/models/Bert.h"
#include "dsl/models/ResNet.h"
#include "schedules/defaults/Defaults.h"

using namespace pto;
using namespace pto::test;

namespace {
// BERT's structure at a small size: block 16 divides hidden 32 and ffn 48.
models::BertConfig tiny_bert(int64_t block) {
  models::BertConfig c;
  c.batch = 2;
  c.seq = 7;
  c.hidden = 32;
  c.heads = 4;
  c.ffn = 48;
  c.weight_block = block;
  return c;
}

// Random inputs of a BERT program: weights ~ U(-0.3, 0.3), which keep
// activations O(1) like trained BERT, LayerNorm gammas ~ U(0.5, 1.5); `w`
// gets the same values for the reference (weights there stay [in, out]).
std::map<std::string, HostTensor> bert_inputs(const Program& p, std::mt19937& rng, bert_ref::Weights& w) {
  std::map<std::string, HostTensor> in;
  for (const auto& t : p.inputs()) {
    std::vector<int64_t> shape;
    for (const Dim& d : t.shape) shape.push_back(d.value);
    in[t.name] = random_tensor(shape, rng, -0.3, 0.3);
    if (t.name.find("gamma") != std::string::npos) in[t.name] = random_tensor(shape, rng, 0.5, 1.5);
    w[t.name] = in[t.name].data;
  }
  return in;
}
}  // namespace

TEST_CASE("BERT encoder layer matches a float64 reference", "[models][bert]") {
  // Blocked weights and plain [in, out] ones.
  for (const int64_t block : {16, 0}) {
    const models::BertConfig c = tiny_bert(block);
    const Program p = models::bert_layer(c);
    std::mt19937 rng(11);
    bert_ref::Weights w;
    std::map<std::string, HostTensor> in = bert_inputs(p, rng, w);
    for (const auto& t : p.inputs()) {
      const std::vector<int64_t>& shape = in[t.name].shape;
      if (shape.size() == 3 && t.name != "X") {
        // The reference takes W [in, out]; the program its blocked copy.
        const int64_t fan_in = shape[1], fan_out = shape[0] * shape[2];
        const std::vector<float> plain(in[t.name].data.begin(), in[t.name].data.end());
        const std::vector<float> blocked = models::block_weight(plain.data(), fan_in, fan_out, shape[2]);
        in[t.name].data.assign(blocked.begin(), blocked.end());
        // Blocking is a permutation: spot-check one element.
        CHECK(blocked[static_cast<size_t>(((1 / shape[2]) * fan_in + 2) * shape[2] + 1 % shape[2])] ==
              plain[static_cast<size_t>(2 * fan_out + 1)]);
      }
    }
    // Mask the last two positions of batch 1.
    HostTensor& mask = in["mask"];
    for (auto& m : mask.data) m = 0;
    mask.data[static_cast<size_t>(c.seq + c.seq - 1)] = mask.data[static_cast<size_t>(c.seq + c.seq - 2)] = -1e4;
    w["mask"] = mask.data;
    const bert_ref::Vec want = bert_ref::layer(in["X"].data, mask.data, w, c);
    const Target t = parse_target("host");
    for (const Schedule& s : {plain_schedule(p), default_schedule(p, t)}) {
      const HostTensor got = run_f32(Kernel(p, s, t), in)[0];
      // f32 through ~5 dependent matmul/normalization steps of O(50)-term sums: 1e-4 relative + absolute.
      CHECK(tolerance_ratio(got, HostTensor{got.shape, want}, 1e-4, 1e-4) <= 1.0);
    }
  }
}

TEST_CASE("BERT encoder layer in mixed bf16 matches a float64 reference", "[models][bert][bf16]") {
  // bf16 weights blocked in pairs [out / 16, in / 2, 16, 2], projection inputs
  // rounded to bf16, f32 products and sums (dot_pairs where the target has
  // avx512_bf16). The reference gets the same bf16 weights but exact
  // activations: each projection's input is off by up to 2^-9 relative, so
  // through the layer's 4 chained projections the output stays within 1e-2
  // of its scale (bench_bert measures 2e-3 at BERT-base size); a layout or
  // pairing error gives O(1).
  models::BertConfig c = tiny_bert(16);
  c.weight_dtype = DType::BF16;
  c.bf16_activations = true;
  const Program p = models::bert_layer(c);
  std::mt19937 rng(13);
  bert_ref::Weights w;
  std::map<std::string, HostTensor> in = bert_inputs(p, rng, w);
  for (const auto& t : p.inputs()) {
    const std::vector<int64_t> shape = in[t.name].shape;
    if (t.dtype == DType::BF16) {
      REQUIRE(shape.size() == 4);  // pairs [out / 16, in / 2, 16, 2]
      const int64_t fan_in = shape[1] * 2, fan_out = shape[0] * shape[2];
      std::vector<float> plain;
      for (double& v : w[t.name]) plain.push_back(static_cast<float>(v = round_bf16(v)));
      const std::vector<float> laid = models::block_weight_pairs(plain.data(), fan_in, fan_out, shape[2]);
      in[t.name].data.assign(laid.begin(), laid.end());
      // W[k = 3, j = 17] sits at [17 / 16, 3 / 2, 17 % 16, 3 % 2].
      CHECK(laid[static_cast<size_t>(((1 * shape[1] + 1) * 16 + 1) * 2 + 1)] == plain[static_cast<size_t>(3 * fan_out + 17)]);
    }
  }
  for (auto& m : in["mask"].data) m = 0;
  in["mask"].data[static_cast<size_t>(2 * c.seq - 1)] = -1e4;
  w["mask"] = in["mask"].data;
  const bert_ref::Vec want = bert_ref::layer(in["X"].data, in["mask"].data, w, c);
  const Target t = parse_target("host");
  const Schedule s = default_schedule(p, t);
  // Its projections: on AMX tiles where the CPU has them, else in bf16 pairs on avx512_bf16.
  bool paired = false, tiles = false;
  for (const auto& [name, ss] : s.stages) {
    paired |= !ss.dot_pairs.empty();
    tiles |= ss.amx;
  }
  CHECK(tiles == t.amx);
  CHECK((paired || tiles) == t.avx512_bf16);
  for (const Schedule& sc : {plain_schedule(p), s}) {
    const HostTensor got = run_f32(Kernel(p, sc, t), in)[0];
    double scale = 0;
    for (double v : want) scale = std::max(scale, std::fabs(v));
    CHECK(tolerance_ratio(got, HostTensor{got.shape, want}, 0, 1e-2 * scale) <= 1.0);
  }
}

TEST_CASE("block_weight rejects a block that does not divide the width", "[models][bert]") {
  const std::vector<float> w(6, 1.0f);
  CHECK_THROWS_AS(models::block_weight(w.data(), 2, 3, 2), ShapeError);
}

TEST_CASE("ResNet-50 convolution shapes (scaled down) match a float64 loop", "[models][resnet]") {
  const Target t = parse_target("host");
  std::mt19937 rng(12);
  // The real layer kinds with fewer channels and pixels: 7x7/s2/p3, 3x3/s1/p1, 3x3/s2/p1, 1x1/s2, 1x1.
  for (const models::ConvLayer& l : {models::ConvLayer{"c7", 3, 8, 7, 2, 3, 17}, models::ConvLayer{"c3", 5, 6, 3, 1, 1, 9},
                                     models::ConvLayer{"c3s2", 4, 4, 3, 2, 1, 10}, models::ConvLayer{"ds", 6, 9, 1, 2, 0, 8},
                                     models::ConvLayer{"pw", 16, 12, 1, 1, 0, 5},
                                     // Weights outweigh the input (the deep layers' schedule): a 7-wide
                                     // map in 2-row pixel tiles with a blocked 3x3 reduction; a 1x1 with
                                     // a blocked 256-channel reduction.
                                     models::ConvLayer{"deep3x3", 32, 48, 3, 1, 1, 7},
                                     models::ConvLayer{"deep1x1", 256, 64, 1, 1, 0, 5}}) {
    INFO("layer " << l.name);
    // Channels last: X NHWC, W HWIO (and blocked below), Y NHWC.
    const HostTensor x = random_tensor({2, l.hw, l.hw, l.cin}, rng), w = random_tensor({l.kernel, l.kernel, l.cin, l.cout}, rng),
                     b = random_tensor({l.cout}, rng);
    const int64_t o = l.out_hw();
    HostTensor want{{2, o, o, l.cout}, std::vector<double>(static_cast<size_t>(2 * l.cout * o * o))};
    size_t idx = 0;
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t y = 0; y < o; ++y)
        for (int64_t xx = 0; xx < o; ++xx)
          for (int64_t co = 0; co < l.cout; ++co) {
            double acc = b.data[static_cast<size_t>(co)];
            for (int64_t ci = 0; ci < l.cin; ++ci)
              for (int64_t ky = 0; ky < l.kernel; ++ky)
                for (int64_t kx = 0; kx < l.kernel; ++kx) {
                  const int64_t iy = y * l.stride + ky - l.pad, ix = xx * l.stride + kx - l.pad;
                  if (iy < 0 || iy >= l.hw || ix < 0 || ix >= l.hw) continue;
                  acc += x.data[static_cast<size_t>(((n * l.hw + iy) * l.hw + ix) * l.cin + ci)] *
                         w.data[static_cast<size_t>(((ky * l.kernel + kx) * l.cin + ci) * l.cout + co)];
                }
            want.data[idx++] = std::max(0.0, acc);
          }
    // HWIO, and blocked by the largest of 16, 8, 4, 3, 2 that splits the output channels.
    std::vector<int64_t> blocks{0};
    for (const int64_t bl : {16, 8, 4, 3, 2})
      if (l.cout % bl == 0 && bl < l.cout) {
        blocks.push_back(bl);
        break;
      }
    for (const int64_t bl : blocks) {
      INFO("weight_block " << bl);
      const Program p = models::resnet_conv(l, 2, DType::F32, bl);
      const HostTensor wb = bl ? HostTensor{{l.cout / bl, l.kernel, l.kernel, l.cin, bl}, models::block_conv_weight(w.data, l, bl)} : w;
      for (const Schedule& s : {plain_schedule(p), default_schedule(p, t)}) {
        const HostTensor got = run_f32(Kernel(p, s, t), {{"X", x}, {"W", wb}, {"b", b}})[0];
        // f32 sums of up to 288 products in [-1, 1] (sum of |terms| <= ~72):
        // rounding errors of u = 6e-8 per step, growing like sqrt(n) in
        // practice (~7e-5 absolute at worst here): 1e-4 relative + absolute.
        CHECK(tolerance_ratio(got, want, 1e-4, 1e-4) <= 1.0);
      }
      if (!bl || bl % 2) continue;
      // Blocked channel pairs [O/B, KH, KW, C/2, B, 2], an odd C padded with a
      // zero channel in X and W (the bf16 layout; here in f32, same answer).
      const int64_t cp = models::paired_channels(l, true);
      const Program pp = models::resnet_conv(l, 2, DType::F32, bl, true);
      const HostTensor xp{{2, l.hw, l.hw, cp}, models::pad_channels(x.data, l.cin, cp)};
      const HostTensor wp{{l.cout / bl, l.kernel, l.kernel, cp / 2, bl, 2}, models::block_conv_weight_pairs(w.data, l, bl)};
      for (const Schedule& s : {plain_schedule(pp), default_schedule(pp, t)}) {
        const HostTensor got = run_f32(Kernel(pp, s, t), {{"X", xp}, {"W", wp}, {"b", b}})[0];
        CHECK(tolerance_ratio(got, want, 1e-4, 1e-4) <= 1.0);
      }
    }
  }
  // 48 does not divide the stem's 64 output channels.
  CHECK_THROWS_AS(models::resnet_conv(models::resnet50_conv_layers()[0], 1, DType::F32, 48), ShapeError);
}
