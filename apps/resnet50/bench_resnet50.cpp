// bench_resnet50: every distinct convolution layer of ResNet-50 at 224x224,
// batch 1, with bias + ReLU: PTO next to oneDNN 2.6 and ONNX Runtime in one run.
// Outputs are checked on sampled points against float64 before timing.
//
//   build/bin/bench_resnet50 [--layers 0,2,6] [--json FILE] [--no-ort] [--db FILE] [--bf16]
//                            [--schedule A.json,B.json]
//
// --schedule runs each given schedule file next to the default (impl named
// after the file's stem): for trying a schedule on a layer without a rebuild.
//
// --bf16 adds, per layer, bf16 input, weights, bias and output with f32
// accumulation: PTO (default schedule) vs oneDNN bf16
// (avx512_bf16), in a second table whose ratio column is to oneDNN bf16.
//
// oneDNN runs in its preferred (blocked) layouts with weights reordered once,
// i.e. its best case; PTO reads and writes channels-last NHWC with its weights
// blocked by 32 output channels, likewise laid out once (models::resnet_conv:
// conv2d_nhwc), ONNX Runtime plain NCHW (its native layout).
// GFLOP/s are the layer's 2 * N * O * OH * OW * C * KH * KW, not program_flops()
// (which also counts the bias and ReLU epilogue).
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstring>
#include <deque>
#include <functional>
#include <filesystem>
#include <oneapi/dnnl/dnnl.hpp>

#include "dsl/BFloat16.h"
#include "apps/common/Bench.h"
#include "autotuner/TuningDB.h"
#include "backends/Jit.h"
#include "dsl/models/ResNet.h"
#include "schedules/ScheduleJson.h"
#include "schedules/defaults/Defaults.h"

using namespace pto;

namespace {

using pto::from_bf16;
using pto::to_bf16;

// PTO's weight layout: [O/32, KH, KW, C, 32] (models::block_conv_weight).
constexpr int64_t kWeightBlock = 32;

// A float64 value of one output point.
double ref_point(const models::ConvLayer& l, const std::vector<float>& x, const std::vector<float>& w,
                 const std::vector<float>& b, int64_t co, int64_t y, int64_t xx) {
  double acc = b[static_cast<size_t>(co)];
  for (int64_t ci = 0; ci < l.cin; ++ci)
    for (int64_t ky = 0; ky < l.kernel; ++ky)
      for (int64_t kx = 0; kx < l.kernel; ++kx) {
        const int64_t iy = y * l.stride + ky - l.pad, ix = xx * l.stride + kx - l.pad;
        if (iy < 0 || iy >= l.hw || ix < 0 || ix >= l.hw) continue;
        acc += double(x[static_cast<size_t>((ci * l.hw + iy) * l.hw + ix)]) *
               w[static_cast<size_t>(((co * l.cin + ci) * l.kernel + ky) * l.kernel + kx)];
      }
  return std::max(0.0, acc);
}

// Max error on 500 sampled points, relative to the output scale.
double check(const models::ConvLayer& l, const std::vector<float>& x, const std::vector<float>& w,
             const std::vector<float>& b, const std::vector<float>& out, std::mt19937& rng) {
  const int64_t o = l.out_hw();
  std::uniform_int_distribution<int64_t> pc(0, l.cout - 1), pp(0, o - 1);
  double err = 0, scale = 1e-30;
  for (int i = 0; i < 500; ++i) {
    const int64_t co = pc(rng), y = pp(rng), xx = pp(rng);
    const double want = ref_point(l, x, w, b, co, y, xx);
    err = std::max(err, std::fabs(want - out[static_cast<size_t>((co * o + y) * o + xx)]));
    scale = std::max(scale, std::fabs(want));
  }
  return err / scale;
}

// X NCHW -> NHWC and W OIHW -> HWIO (PTO's channels-last operands), any element type.
template <typename T, typename F>
void to_channels_last(const models::ConvLayer& l, const std::vector<float>& x, const std::vector<float>& w,
                      std::vector<T>& xh, std::vector<T>& wh, F conv) {
  xh.resize(x.size());
  wh.resize(w.size());
  for (int64_t c = 0; c < l.cin; ++c)
    for (int64_t i = 0; i < l.hw * l.hw; ++i) xh[static_cast<size_t>(i * l.cin + c)] = conv(x[static_cast<size_t>(c * l.hw * l.hw + i)]);
  const int64_t kk = l.kernel * l.kernel;
  for (int64_t co = 0; co < l.cout; ++co)
    for (int64_t c = 0; c < l.cin; ++c)
      for (int64_t k = 0; k < kk; ++k)
        wh[static_cast<size_t>((k * l.cin + c) * l.cout + co)] = conv(w[static_cast<size_t>((co * l.cin + c) * kk + k)]);
}

// oneDNN convolution + bias + ReLU in its preferred layouts (f32, or bf16
// source, weights and destination with an f32 bias and f32 accumulation).
struct OneDnnConv {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream strm{eng};
  dnnl::convolution_forward prim;
  dnnl::memory src, wei, bias, dst, user_dst;
  dnnl::reorder dst_back;

  OneDnnConv(const models::ConvLayer& l, std::vector<float>& x, std::vector<float>& w, std::vector<float>& b,
             std::vector<float>& out, dnnl::memory::data_type type = dnnl::memory::data_type::f32) {
    using tag = dnnl::memory::format_tag;
    using dt = dnnl::memory::data_type;
    const dnnl::memory::dims xd{1, l.cin, l.hw, l.hw}, wd{l.cout, l.cin, l.kernel, l.kernel}, bd{l.cout},
        od{1, l.cout, l.out_hw(), l.out_hw()}, st{l.stride, l.stride}, pad{l.pad, l.pad};
    const dnnl::memory::desc any_x(xd, type, tag::any), any_w(wd, type, tag::any), bmd(bd, dt::f32, tag::x),
        any_o(od, type, tag::any);
    dnnl::post_ops ops;
    ops.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
    dnnl::primitive_attr attr;
    attr.set_post_ops(ops);
    const dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                            any_x, any_w, bmd, any_o, st, pad, pad);
    const dnnl::convolution_forward::primitive_desc pd(d, attr, eng);
    prim = dnnl::convolution_forward(pd);
    dnnl::memory ux({xd, dt::f32, tag::nchw}, eng, x.data()), uw({wd, dt::f32, tag::oihw}, eng, w.data());
    src = dnnl::memory(pd.src_desc(), eng);
    wei = dnnl::memory(pd.weights_desc(), eng);
    bias = dnnl::memory(bmd, eng, b.data());
    dst = dnnl::memory(pd.dst_desc(), eng);
    user_dst = dnnl::memory({od, dt::f32, tag::nchw}, eng, out.data());
    dnnl::reorder(ux, src).execute(strm, ux, src);
    dnnl::reorder(uw, wei).execute(strm, uw, wei);
    dst_back = dnnl::reorder(dst, user_dst);
    strm.wait();
  }
  void run() {
    prim.execute(strm, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_BIAS, bias}, {DNNL_ARG_DST, dst}});
    strm.wait();
  }
  void fetch() {
    dst_back.execute(strm, dst, user_dst);
    strm.wait();
  }
};

// The implementations of one layer: each checked when entered (a wrong answer
// stops the benchmark), then all timed in interleaved rounds.
struct Contest {
  std::string label;
  double tol;
  std::vector<std::string> names;
  std::vector<std::function<void()>> runs;
  std::deque<Kernel> kernels;  // stable addresses for the runs

  void enter(const std::string& impl, double err, std::function<void()> run) {
    std::fprintf(stderr, "%-26s %-12s sampled max rel err %.2e %s\n", label.c_str(), impl.c_str(), err, err <= tol ? "OK" : "FAILED");
    if (err > tol) throw Error(impl + " gives a wrong answer on " + label);
    names.push_back(impl);
    runs.push_back(std::move(run));
  }
  void time(int rounds, double min_time, double flops, std::vector<bench::Record>& records) const {
    const auto times = bench::interleaved_best(runs, rounds, min_time);
    for (size_t i = 0; i < runs.size(); ++i) records.push_back(bench::make_record(label, names[i], times[i], flops));
  }
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> layers;
  std::string json_path, db_path;
  std::vector<std::string> schedule_files, schedule_files16;
  bool no_ort = false, bf16 = false;
  double min_time = 0.2;
  int rounds = 1;
  CLI::App app{"ResNet-50 convolutions: PTO vs oneDNN vs ONNX Runtime"};
  app.add_option("--layers", layers, "layer indices (default: all)")->delimiter(',');
  app.add_option("--json", json_path, "write records as JSON");
  app.add_option("--db", db_path, "tuning database with tuned schedules (pto tune resnet50_conv --set layer=N)");
  app.add_option("--schedule", schedule_files, "schedule JSON files to run next to the default (pto schedule resnet50_conv --set layer=N)")
      ->delimiter(',');
  app.add_option("--schedule-bf16", schedule_files16,
                 "with --bf16: schedule JSON files to run next to the bf16 default (pto schedule resnet50_conv --set layer=N --set BF16=1)")
      ->delimiter(',');
  app.add_flag("--no-ort", no_ort, "skip ONNX Runtime");
  app.add_flag("--bf16", bf16, "also run bf16 (bf16 storage, f32 accumulation): PTO vs oneDNN bf16");
  app.add_option("--min-time", min_time, "seconds of timed repetitions per measurement");
  app.add_option("--rounds", rounds, "interleaved timing rounds per layer (PTO, oneDNN, PTO, ...); each implementation's best round is reported")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  const auto& all = models::resnet50_conv_layers();
  if (layers.empty())
    for (size_t i = 0; i < all.size(); ++i) layers.push_back(static_cast<int>(i));
  try {
    const Target t = parse_target("host");
    std::vector<bench::Record> records, records16;
    std::mt19937 rng(9);
    for (const int li : layers) {
      if (li < 0 || li >= static_cast<int>(all.size())) throw Error("--layers: no layer " + std::to_string(li));
      const models::ConvLayer& l = all[static_cast<size_t>(li)];
      const std::string label = std::to_string(li) + ":" + l.name;
      const Program p = models::resnet_conv(l, 1, DType::F32, kWeightBlock);
      std::vector<float> x = bench::random_floats(static_cast<size_t>(l.cin * l.hw * l.hw), rng);
      std::vector<float> w = bench::random_floats(static_cast<size_t>(l.cout * l.cin * l.kernel * l.kernel), rng, -0.1f, 0.1f);
      std::vector<float> b = bench::random_floats(static_cast<size_t>(l.cout), rng, -0.1f, 0.1f);
      const int64_t o = l.out_hw();
      std::vector<float> out(static_cast<size_t>(l.cout * o * o));
      // PTO's channels-last copies: X NCHW -> NHWC, W OIHW -> HWIO; its NHWC
      // output is transposed back to NCHW (outside the timing) for the check.
      std::vector<float> xh0, wh;
      to_channels_last(l, x, w, xh0, wh, [](float f) { return f; });
      // Weights blocked by 32 output channels, once, outside the timing (as
      // oneDNN's reorder below); every buffer 64-byte aligned, as oneDNN's.
      const std::vector<float> wb0 = models::block_conv_weight(wh, l, kWeightBlock);
      bench::AlignedVector<float> xh(xh0.begin(), xh0.end()), wb(wb0.begin(), wb0.end()), ba(b.begin(), b.end()), outh(out.size());
      const std::vector<BufferRef> ins{{xh.data(), DType::F32, {1, l.hw, l.hw, l.cin}, {}},
                                       {wb.data(), DType::F32, {l.cout / kWeightBlock, l.kernel, l.kernel, l.cin, kWeightBlock}, {}},
                                       {ba.data(), DType::F32, {l.cout}, {}}};
      const std::vector<BufferRef> outs{{outh.data(), DType::F32, {1, o, o, l.cout}, {}}};
      auto to_nchw = [&] {
        for (int64_t co = 0; co < l.cout; ++co)
          for (int64_t i = 0; i < o * o; ++i) out[static_cast<size_t>(co * o * o + i)] = outh[static_cast<size_t>(i * l.cout + co)];
      };
      // f32 sums of up to 4608 products: 1e-4 of the output scale.
      Contest f32{label, 1e-4};
      auto run_pto = [&](const std::string& impl, const Schedule& s) {
        const Kernel& k = f32.kernels.emplace_back(p, s, t);
        k.run(ins, outs);
        to_nchw();
        f32.enter(impl, check(l, x, w, b, out, rng), [&] { k.run(ins, outs); });
      };
      run_pto("pto-default", default_schedule(p, t));
      for (const std::string& f : schedule_files) run_pto(std::filesystem::path(f).stem().string(), load_schedule_file(f));
      if (!db_path.empty()) {
        std::string source;
        const Schedule tuned = tuner::best_schedule(db_path, p, t, &source);
        if (source.rfind("tuned", 0) == 0) run_pto("pto-tuned", tuned);
      }

      OneDnnConv dn(l, x, w, b, out);
      dn.run();
      dn.fetch();
      f32.enter("onednn", check(l, x, w, b, out, rng), [&] { dn.run(); });
      f32.time(rounds, min_time, l.flops(1), records);

      if (!bf16) continue;
      // bf16 operands, bias and output; f32 products and accumulation. The
      // inputs are rounded to bf16 first and the float64 reference uses those
      // values, so the error is the f32 sum (1e-4) plus roundings to bf16 of
      // 2^-9 relative each: PTO rounds the accumulator to the bias-add
      // stage's logical type (bf16) and then the output, 2 * 2^-9 of values
      // up to the output scale (+ |b| <= 0.1): 8e-3.
      const double tol16 = 8e-3;
      const std::string label16 = label + " bf16";
      auto round16 = [](std::vector<float> v) {
        for (float& f : v) f = from_bf16(to_bf16(f));
        return v;
      };
      std::vector<float> xr = round16(x), wr = round16(w), br = round16(b);
      std::vector<uint16_t> x16v, w16;
      to_channels_last(l, xr, wr, x16v, w16, [](float f) { return to_bf16(f); });
      bench::AlignedVector<uint16_t> x16(x16v.begin(), x16v.end()), b16(br.size()), out16(out.size());  // 64-byte aligned, as oneDNN's
      for (size_t i = 0; i < br.size(); ++i) b16[i] = to_bf16(br[i]);
      // Weights in bf16 channel pairs (the stem's 3 channels padded to 4 with
      // zeros, input and weights, outside the timing as oneDNN pads its
      // blocked layouts): the default schedule then sums them with dot_pairs.
      const int64_t cp = models::paired_channels(l, true);
      const Program p16 = models::resnet_conv(l, 1, DType::BF16, kWeightBlock, true);
      const std::vector<uint16_t> w16v = models::block_conv_weight_pairs(w16, l, kWeightBlock);
      bench::AlignedVector<uint16_t> w16b(w16v.begin(), w16v.end());
      const std::vector<int64_t> wshape{l.cout / kWeightBlock, l.kernel, l.kernel, cp / 2, kWeightBlock, 2};
      const std::vector<uint16_t> x16p = models::pad_channels(std::vector<uint16_t>(x16.begin(), x16.end()), l.cin, cp);
      bench::AlignedVector<uint16_t> x16a(x16p.begin(), x16p.end());
      const std::vector<BufferRef> ins16{{x16a.data(), DType::BF16, {1, l.hw, l.hw, cp}, {}},
                                         {w16b.data(), DType::BF16, wshape, {}},
                                         {b16.data(), DType::BF16, {l.cout}, {}}};
      const std::vector<BufferRef> outs16{{out16.data(), DType::BF16, {1, o, o, l.cout}, {}}};
      Contest bf16c{label16, tol16};
      // The default schedule computes in f32 and accumulates in f32 tiles (Defaults.cpp: wide_arithmetic).
      auto run_pto16 = [&](const std::string& impl, const Schedule& s16) {
        const Kernel& k = bf16c.kernels.emplace_back(p16, s16, t);
        k.run(ins16, outs16);
        for (int64_t co = 0; co < l.cout; ++co)
          for (int64_t i = 0; i < o * o; ++i)
            out[static_cast<size_t>(co * o * o + i)] = from_bf16(out16[static_cast<size_t>(i * l.cout + co)]);
        bf16c.enter(impl, check(l, xr, wr, br, out, rng), [&] { k.run(ins16, outs16); });
      };
      run_pto16("pto-bf16", default_schedule(p16, t));
      for (const std::string& f : schedule_files16) run_pto16(std::filesystem::path(f).stem().string(), load_schedule_file(f));
      OneDnnConv dn16(l, xr, wr, br, out, dnnl::memory::data_type::bf16);
      dn16.run();
      dn16.fetch();
      bf16c.enter("onednn-bf16", check(l, xr, wr, br, out, rng), [&] { dn16.run(); });
      bf16c.time(rounds, min_time, l.flops(1), records16);
    }
    if (!no_ort) {
      std::string cmd = std::string(PTO_PYTHON) + " " + PTO_SOURCE_DIR + "/apps/resnet50/ort_resnet50.py --min-time " + std::to_string(min_time) + " --layers ";
      for (size_t i = 0; i < layers.size(); ++i) cmd += (i ? "," : "") + std::to_string(layers[i]);
      FILE* pipe = popen(cmd.c_str(), "r");
      std::string text;
      char chunk[4096];
      while (pipe && fgets(chunk, sizeof chunk, pipe)) text += chunk;
      if ((pipe ? pclose(pipe) : -1) == 0) {
        for (const auto& r : nlohmann::json::parse(text)) {
          const TimingStats ts{r.at("median_ms").get<double>(), r.at("min_ms").get<double>(), r.at("max_ms").get<double>(), r.at("reps").get<int>()};
          const int li = r.at("layer").get<int>();
          const auto& l = all[static_cast<size_t>(li)];
          records.push_back(bench::make_record(std::to_string(li) + ":" + l.name, "onnxruntime", ts, l.flops(1)));
        }
      } else {
        std::fprintf(stderr, "onnxruntime run failed; skipping it\n");
      }
    }
    bench::print_table(records, "onednn");
    if (!records16.empty()) bench::print_table(records16, "onednn-bf16");
    records.insert(records.end(), records16.begin(), records16.end());
    if (!json_path.empty()) bench::write_json(records, json_path);
    return 0;
  } catch (const std::exception& e) {  // pto::Error, dnnl::error
    std::fprintf(stderr, "bench_resnet50: error: %s\n", e.what());
    return 2;
  }
}
