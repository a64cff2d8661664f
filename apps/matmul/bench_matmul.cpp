// bench_matmul: C = A @ B, PTO's default schedule next to OpenBLAS and oneDNN,
// side by side in one process.
//
//   build/bin/bench_matmul [--sizes 512,1024,2048] [--json FILE] [--no-bf16] [--min-seconds 0.5]
//
// fp32: pto-default (the default schedule of the `matmul` workload),
// openblas (cblas_sgemm, OPENBLAS_CORETYPE=SkylakeX: its AVX-512 kernels) and
// onednn (dnnl::matmul, plain row-major operands, as the others get them).
// bf16: A, B and C in bf16 with f32 accumulation: pto-bf16 (default schedule,
// precision from the types) and onednn-bf16. Every result is checked against
// a float64 reference on sampled entries before timing. All use the machine's
// cores (2 threads here: Halide's pool, OpenBLAS's and oneDNN's OpenMP).
// Output: a table on stdout; with --json a list of
// {"workload", "impl", "median_ms", "min_ms", "max_ms", "gflops"} records.
#include <cblas.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <oneapi/dnnl/dnnl.hpp>
#include <random>
#include <sstream>
#include <thread>

#include "dsl/BFloat16.h"
#include "apps/common/Bench.h"
#include "backends/Jit.h"
#include "backends/Timing.h"
#include "dsl/Workloads.h"
#include "dsl/ops/Ops.h"
#include "schedules/defaults/Defaults.h"

extern "C" char* openblas_get_corename(void);

namespace {

using pto::from_bf16;
using pto::to_bf16;

using namespace pto;

struct Record {
  std::string workload, impl;
  TimingStats t;
  double gflops;
};

// Max |got - ref| / tol over sampled entries of C = A @ B (float64 reference).
template <typename GetA, typename GetB, typename GetC>
double check(int n, GetA a, GetB b, GetC c, double tol) {
  std::mt19937 rng(5);
  double worst = 0;
  for (int s = 0; s < 256; ++s) {
    const int i = static_cast<int>(rng() % n), j = static_cast<int>(rng() % n);
    double ref = 0;
    for (int k = 0; k < n; ++k) ref += double(a(i, k)) * double(b(k, j));
    worst = std::max(worst, std::fabs(ref - double(c(i, j))) / tol);
  }
  return worst;
}

// dnnl::matmul of plain row-major n x n operands of element type `type`; each call runs it once.
struct OneDnnMatmul {
  dnnl::matmul prim;
  dnnl::memory a, b, c;
  dnnl::stream& strm;
  void operator()() {
    prim.execute(strm, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}});
    strm.wait();
  }
};
OneDnnMatmul onednn_matmul(dnnl::engine& eng, dnnl::stream& strm, int n, dnnl::memory::data_type type, void* a,
                           void* b, void* c) {
  const dnnl::memory::desc md({n, n}, type, dnnl::memory::format_tag::ab);
  return {dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(md, md, md), eng)),
          {md, eng, a}, {md, eng, b}, {md, eng, c}, strm};
}

}  // namespace

int main(int argc, char** argv) {
  bench::ensure_openblas_coretype(argv);
  std::vector<int> sizes{512, 1024, 2048};
  std::string json_path;
  bool no_bf16 = false;
  double min_seconds = 0.5;
  CLI::App app{"matmul: PTO default schedule vs OpenBLAS and oneDNN (fp32, bf16)"};
  app.add_option("--sizes", sizes, "square sizes n (M = N = K)")->delimiter(',');
  app.add_option("--json", json_path, "write the records as JSON");
  app.add_flag("--no-bf16", no_bf16, "skip the bf16 runs");
  app.add_option("--min-seconds", min_seconds, "time per measurement");
  CLI11_PARSE(app, argc, argv);

  try {
    const Target t = parse_target("host");
    std::printf("bench_matmul: target %s, %u hardware threads, OpenBLAS core %s, oneDNN %d.%d.%d\n", t.halide.c_str(),
                std::thread::hardware_concurrency(), openblas_get_corename(), dnnl_version()->major,
                dnnl_version()->minor, dnnl_version()->patch);
    std::printf("bf16: this CPU has %s and %s; bf16 products accumulate in f32\n",
                __builtin_cpu_supports("avx512bf16") ? "avx512_bf16" : "no avx512_bf16", t.amx ? "AMX" : "no AMX");
    dnnl::engine eng(dnnl::engine::kind::cpu, 0);
    dnnl::stream strm(eng);
    std::vector<Record> recs;
    bool ok = true;
    for (const int n : sizes) {
      const size_t nn = static_cast<size_t>(n) * n;
      std::vector<float> a(nn), b(nn), c(nn);
      std::mt19937 rng(7);
      std::uniform_real_distribution<float> dist(-1, 1);
      for (auto& x : a) x = dist(rng);
      for (auto& x : b) x = dist(rng);
      const double flops = 2.0 * n * n * n;
      const std::string wl = "matmul_f32_n" + std::to_string(n);
      // f32 sums of n products in [-1, 1]: error below n * 2^-24 * n; the
      // sampled check uses 4 sqrt(n) n 2^-24 (random-sign rounding), far below any real bug.
      const double tol = 4.0 * std::sqrt(double(n)) * n * 6e-8;
      auto at = [](const std::vector<float>& v, int n) { return [&v, n](int i, int j) { return v[size_t(i) * n + j]; }; };
      auto record = [&](const std::string& w, const std::string& impl, const TimingStats& ts, double err) {
        recs.push_back({w, impl, ts, flops / (ts.median_ms * 1e6)});
        if (err > 1.0) {
          std::fprintf(stderr, "%s %s: check FAILED (error %.3g x tolerance)\n", w.c_str(), impl.c_str(), err);
          ok = false;
        }
      };

      // A PTO kernel of C = A @ B on n x n buffers of type `dt`: run, checked by `err`, timed.
      auto run_pto = [&](const std::string& w, const std::string& impl, const Program& p, const Schedule& s, DType dt,
                         void* pa, void* pb, void* pc, const std::function<double()>& err) {
        const Kernel k(p, s, t);
        const std::vector<int64_t> sq{n, n};
        const std::vector<BufferRef> ins{{pa, dt, sq, {}}, {pb, dt, sq, {}}};
        const std::vector<BufferRef> outs{{pc, dt, sq, {}}};
        k.run(ins, outs);
        const double e = err();
        record(w, impl, time_it([&] { k.run(ins, outs); }, 2, 5, min_seconds), e);
      };
      {  // PTO default schedule
        const Program p = make_workload("matmul", {{"M", n}, {"N", n}, {"K", n}});
        run_pto(wl, "pto-default", p, default_schedule(p, t), DType::F32, a.data(), b.data(), c.data(),
                [&] { return check(n, at(a, n), at(b, n), at(c, n), tol); });
      }
      {  // OpenBLAS
        auto run = [&] {
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f,
                      c.data(), n);
        };
        run();
        const double err = check(n, at(a, n), at(b, n), at(c, n), tol);
        record(wl, "openblas", time_it(run, 2, 5, min_seconds), err);
      }
      using dt = dnnl::memory::data_type;
      {  // oneDNN f32
        OneDnnMatmul run = onednn_matmul(eng, strm, n, dt::f32, a.data(), b.data(), c.data());
        run();
        const double err = check(n, at(a, n), at(b, n), at(c, n), tol);
        record(wl, "onednn", time_it(run, 2, 5, min_seconds), err);
      }
      if (no_bf16) continue;
      // bf16 operands and result, f32 accumulation. Inputs are exactly bf16;
      // the reference uses the same bf16 values, so the error is the f32
      // accumulation plus one rounding of C to bf16 (2^-8 relative on |C| <= sqrt-ish n).
      std::vector<uint16_t> ah(nn), bh(nn), ch(nn);
      for (size_t i = 0; i < nn; ++i) ah[i] = to_bf16(a[i]), bh[i] = to_bf16(b[i]);
      auto at16 = [](const std::vector<uint16_t>& v, int n) { return [&v, n](int i, int j) { return from_bf16(v[size_t(i) * n + j]); }; };
      const double tol16 = tol + std::ldexp(4.0 * std::sqrt(double(n)), -8);  // |C| ~ sqrt(n/9), bound 4 sqrt(n)
      const std::string wl16 = "matmul_bf16_n" + std::to_string(n);
      {
        Program p("matmul_bf16");
        const Tensor ta = p.input("A", {n, n}, DType::BF16), tb = p.input("B", {n, n}, DType::BF16);
        p.output(ops::matmul(ta, tb, "C"));
        Schedule s = default_schedule(p, t);
        s["C"].precision.compute = DType::F32;
        s["C"].precision.accumulate = DType::F32;
        run_pto(wl16, "pto-bf16", p, s, DType::BF16, ah.data(), bh.data(), ch.data(),
                [&] { return check(n, at16(ah, n), at16(bh, n), at16(ch, n), tol16); });
      }
      {
        // bf16 pairs summed by one instruction (dot_pairs: vdpbf16ps): B laid
        // out once pair-interleaved, Bp[k / 2, j, k % 2] (outside the timing,
        // as oneDNN reorders its weights); an 8 x 32 f32 accumulator tile per
        // core-parallel row block; C stays f32 (no rounding to bf16).
        Program p("matmul_bf16_pairs");
        const Tensor ta = p.input("A", {n, n}, DType::BF16), tb = p.input("Bp", {n / 2, n, 2}, DType::BF16);
        const Expr i = var("i"), j = var("j"), kk = var("k");
        p.output(p.define_reduce("C", {"i", "j"}, {n, n}, ReduceOp::Sum, {{"k", Dim(n)}},
                                 cast(DType::F32, ta(i, kk)) * cast(DType::F32, tb(kk / 2, j, kk % 2)),
                                 OpKind::Contraction, "matmul"));
        Schedule s;
        StageSchedule& cs = s["C"];
        cs.loops = LoopSchedule{.tile = {{"i", {8}}, {"j", {32}}}, .order = {"j_o", "i_o", "i_i", "j_i"}, .vectorize = "j_i",
                    .vector_width = 16, .parallel = {"j_o"}};
        cs.accumulator_at = "i_o";
        cs.cache.push_back({"Bp", "j_o", false});
        cs.update = LoopSchedule{.order = {"k", "i", "j"}, .vectorize = "j", .vector_width = 16, .unroll = {{"i", 0}, {"j", 0}}};
        cs.dot_pairs = "k";
        const Kernel k(p, s, t);
        std::vector<uint16_t> bp(nn);
        for (int kr = 0; kr < n; ++kr)
          for (int jc = 0; jc < n; ++jc) bp[(size_t(kr / 2) * n + jc) * 2 + kr % 2] = bh[size_t(kr) * n + jc];
        std::vector<float> cf(nn);
        const std::vector<BufferRef> ins{{ah.data(), DType::BF16, {n, n}, {}}, {bp.data(), DType::BF16, {n / 2, n, 2}, {}}};
        const std::vector<BufferRef> outs{{cf.data(), DType::F32, {n, n}, {}}};
        k.run(ins, outs);
        const double err = check(n, at16(ah, n), at16(bh, n), at(cf, n), tol16);
        record(wl16, "pto-bf16-pairs", time_it([&] { k.run(ins, outs); }, 2, 5, min_seconds), err);
      }
      {
        OneDnnMatmul run = onednn_matmul(eng, strm, n, dt::bf16, ah.data(), bh.data(), ch.data());
        run();
        const double err = check(n, at16(ah, n), at16(bh, n), at16(ch, n), tol16);
        record(wl16, "onednn-bf16", time_it(run, 2, 5, min_seconds), err);
      }
    }
    std::printf("\n%-18s %-13s %10s %10s %10s %9s\n", "workload", "impl", "median_ms", "min_ms", "max_ms", "GFLOP/s");
    nlohmann::json out = nlohmann::json::array();
    for (const Record& r : recs) {
      std::printf("%-18s %-13s %10.3f %10.3f %10.3f %9.1f\n", r.workload.c_str(), r.impl.c_str(), r.t.median_ms,
                  r.t.min_ms, r.t.max_ms, r.gflops);
      out.push_back({{"workload", r.workload}, {"impl", r.impl}, {"median_ms", r.t.median_ms}, {"min_ms", r.t.min_ms},
                     {"max_ms", r.t.max_ms}, {"gflops", r.gflops}});
    }
    if (!json_path.empty()) {
      std::ofstream f(json_path);
      if (!f) throw pto::RuntimeError("cannot write '" + json_path + "'");
      f << out.dump(2) << "\n";
    }
    return ok ? 0 : 1;
  } catch (const std::exception& e) {  // pto::Error, dnnl::error
    std::fprintf(stderr, "bench_matmul: error: %s\n", e.what());
    return 2;
  }
}
