// Every composition compiles: random programs of 2-6 library operators
// (RandomProgram.h), each compiled with its default schedule for the host and
// checked against the float64 interpreter. A failure prints the seed and the
// op chain; it stays below as a regression case.
//
// CI runs PTO_RANDOM_PROGRAMS (default 300) programs; a large run:
//   PTO_RANDOM_PROGRAMS=10000 build/bin/pto_tests "[random-programs]"
// PTO_RANDOM_PROGRAM_SEED moves the stream (programs are seed, seed+1, ...).
//
// Tolerance. Inputs are U(-1, 1), contraction weights U(-1/K, 1/K), and the
// operators keep values bounded, so f32 rounding along a chain of at most six
// operators (sums of at most 97 terms) stays near 1e-5 of the values' scale;
// layer_norm divides by the row's standard deviation, which amplifies that
// by 1/std. 1e-3 relative to max(1, |reference|) covers both by a wide
// margin, while a lowering or schedule bug moves values by O(1) or to NaN.
#include <catch2/catch.hpp>

#include <cstdlib>

#include "Helpers.h"
#include "RandomProgram.h"
#include "schedules/defaults/Defaults.h"

using namespace pto;
using namespace pto::test;

namespace {

std::map<std::string, HostTensor> inputs_for(const RandomProgram& r, uint64_t seed) {
  std::mt19937 rng(static_cast<uint32_t>(seed * 2654435761u + 1));
  std::map<std::string, HostTensor> in;
  for (const auto& i : r.program.inputs()) {
    std::vector<int64_t> shape;
    for (const Dim& d : i.shape) shape.push_back(d.is_symbolic() ? r.symbol_size.at(d.sym) : d.value);
    const auto k = r.fan_in.find(i.name);
    const double s = k == r.fan_in.end() ? 1.0 : 1.0 / static_cast<double>(k->second);
    in[i.name] = random_tensor(shape, rng, -s, s);
  }
  return in;
}

// Empty when the program compiles with its default schedule and matches the
// interpreter; else what went wrong.
std::string check_program(uint64_t seed) {
  RandomProgram r = RandomProgramBuilder(seed).build();
  const std::string what = "seed " + std::to_string(seed) + ": " + r.str();
  try {
    const Target t = parse_target("host");
    const Kernel k(r.program, default_schedule(r.program, t), t);
    const auto in = inputs_for(r, seed);
    const auto got = run_f32(k, in);
    const auto want = interpret(r.program, in);
    const auto outs = r.program.outputs();
    for (size_t i = 0; i < outs.size(); ++i) {
      const HostTensor& w = want.at(outs[i]);
      double scale = 1;
      for (double v : w.data) scale = std::max(scale, std::fabs(v));
      if (got[i].shape != w.shape) return what + ": output '" + outs[i] + "' has the wrong shape";
      const double ratio = tolerance_ratio(got[i], w, 1e-3, 1e-3 * scale);
      if (!(ratio <= 1.0))
        return what + ": output '" + outs[i] + "' differs from float64 (" + std::to_string(ratio) + "x the tolerance)";
    }
  } catch (const std::exception& e) {
    return what + ": " + e.what();
  }
  return "";
}

void check_seeds(const std::vector<uint64_t>& seeds) {
  // PTO_RANDOM_PROGRAM_VERBOSE=1 names each program before it runs (to find a crashing one).
  const bool verbose = env_int("PTO_RANDOM_PROGRAM_VERBOSE", 0) != 0;
  std::vector<std::string> failures;
  for (const uint64_t s : seeds) {
    if (verbose) std::fprintf(stderr, "seed %llu: %s\n", static_cast<unsigned long long>(s), RandomProgramBuilder(s).build().program.str().c_str());
    if (std::string f = check_program(s); !f.empty()) failures.push_back(f);
  }
  for (const auto& f : failures) UNSCOPED_INFO(f);
  CHECK(failures.empty());
}

}  // namespace

TEST_CASE("random programs compile with default schedules and match float64", "[random-programs]") {
  const int n = env_int("PTO_RANDOM_PROGRAMS", 300);
  const uint64_t base = static_cast<uint64_t>(env_int("PTO_RANDOM_PROGRAM_SEED", 1));
  std::vector<uint64_t> seeds;
  for (int i = 0; i < n; ++i) seeds.push_back(base + static_cast<uint64_t>(i));
  check_seeds(seeds);
}

// Failures the random programs found, kept as explicit programs (a seed stops
// reproducing when the generator changes).
namespace {

void check_against_interpreter(const Program& p, const std::map<std::string, int64_t>& fan_in = {}) {
  const Target t = parse_target("host");
  const Kernel k(p, default_schedule(p, t), t);
  std::mt19937 rng(11);
  std::map<std::string, HostTensor> in;
  for (const auto& i : p.inputs()) {
    std::vector<int64_t> shape;
    for (const Dim& d : i.shape) shape.push_back(d.value);
    const double s = fan_in.count(i.name) ? 1.0 / static_cast<double>(fan_in.at(i.name)) : 1.0;
    in[i.name] = random_tensor(shape, rng, -s, s);
  }
  const auto got = run_f32(k, in);
  const auto want = interpret(p, in);
  const auto outs = p.outputs();
  for (size_t i = 0; i < outs.size(); ++i) CHECK(tolerance_ratio(got[i], want.at(outs[i]), 1e-3, 1e-3) <= 1.0);
}

}  // namespace

// A contraction's epilogue (bias, then a transcendental activation) closed by
// a row-wise normalization: the row-wise rule moved the materialized epilogue
// into its rows while the matmul tile stayed computed at the epilogue's tile
// loop ("computed at loop 'i0_o' of 'add', which has no such loop").
TEST_CASE("regression: matmul -> bias -> activation -> layer_norm / softmax compile", "[random-programs][regression]") {
  for (const int64_t n : {64, 96, 256}) {
    Program p("mm_bias_gelu_ln");
    const Tensor x = p.input("X", {n, n}), w = p.input("W", {n, n}), b = p.input("b", {n});
    const Tensor g = p.input("g", {n}), be = p.input("be", {n});
    p.output(ops::layer_norm(ops::gelu(ops::add(ops::matmul(x, w), b)), g, be));
    check_against_interpreter(p, {{"W", n}});

    Program q("mm_scale_tanh_softmax");
    const Tensor a = q.input("A", {n, 48}), bm = q.input("B", {48, n}), c = q.input("c", {1});
    q.output(ops::softmax(ops::tanh(ops::maximum(ops::matmul(a, bm), c))));
    check_against_interpreter(q, {{"B", 48}});
  }
}

// A contraction that is an output and also feeds an epilogue (debug_print on
// a matmul, or a program returning both): the default computed it inside its
// consumer ("stage 'matmul0' is an output; it is computed at root"). And an
// output read by another output: its readers' vector loads assumed the
// caller's buffer was aligned like Halide's own (a crash at some addresses).
TEST_CASE("regression: outputs that other stages read", "[random-programs][regression]") {
  Program p("mm_out_and_epilogue");
  const Tensor x = p.input("X", {33, 48}), w = p.input("W", {48, 64}), b = p.input("b", {64});
  const Tensor mm = ops::matmul(x, w, "mm");
  p.output(mm);
  p.output(ops::relu(ops::maximum(mm, b)));
  check_against_interpreter(p, {{"W", 48}});

  for (const int64_t n : {256, 1000}) {
    Program q("ln_out_read_by_softmax");
    const Tensor a = q.input("a", {n}), g = q.input("g", {n}), be = q.input("be", {n});
    const Tensor ln = ops::layer_norm(a, g, be);
    q.output(ln);
    q.output(ops::softmax(ln));
    // Output buffers at every 4-byte offset within a 64-byte line.
    const Target t = parse_target("host");
    const Kernel k(q, default_schedule(q, t), t);
    std::mt19937 rng(3);
    const std::map<std::string, HostTensor> in = {
        {"a", random_tensor({n}, rng)}, {"g", random_tensor({n}, rng)}, {"be", random_tensor({n}, rng)}};
    const auto want = interpret(q, in);
    std::vector<std::vector<float>> ins;
    for (const char* name : {"a", "g", "be"}) ins.emplace_back(in.at(name).data.begin(), in.at(name).data.end());
    std::vector<float> store(2 * static_cast<size_t>(n) + 64);
    for (int off = 0; off < 16; ++off) {
      float* o1 = store.data() + off;
      float* o2 = o1 + n + 16;
      k.run({{ins[0].data(), DType::F32, {n}, {}}, {ins[1].data(), DType::F32, {n}, {}}, {ins[2].data(), DType::F32, {n}, {}}},
            {{o1, DType::F32, {n}, {}}, {o2, DType::F32, {n}, {}}});
      CHECK(tolerance_ratio({{n}, {o1, o1 + n}}, want.at(q.outputs()[0]), 1e-4, 1e-4) <= 1.0);
      CHECK(tolerance_ratio({{n}, {o2, o2 + n}}, want.at(q.outputs()[1]), 1e-4, 1e-5) <= 1.0);
    }
  }
}
