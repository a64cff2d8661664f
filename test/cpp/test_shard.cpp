// Dynamic sharding (backends/Shard.h) and the batch axis it splits along
// (dsl/BatchAxis.h): the analysis is checked on programs whose answer is
// known and, on random programs, by the float64 interpreter (each shard's
// program on its slices of the inputs gives the same slice of the outputs);
// sharded runs under a memory limit a tenth of the intermediates match
// float64 with every shard's peak under the limit.
#include <catch2/catch.hpp>

#include "Helpers.h"
#include "RandomProgram.h"
#include "backends/Lower.h"
#include "dsl/BatchAxis.h"
#include "dsl/ops/Ops.h"
#include "schedules/defaults/Defaults.h"

using namespace pto;
using namespace pto::test;
using Catch::Matchers::Contains;

namespace {

// Rows [start, start + len) of `t` along `axis`.
HostTensor slice_of(const HostTensor& t, int axis, int64_t start, int64_t len) {
  HostTensor r;
  r.shape = t.shape;
  r.shape[static_cast<size_t>(axis)] = len;
  int64_t outer = 1, inner = 1;
  for (int k = 0; k < axis; ++k) outer *= t.shape[static_cast<size_t>(k)];
  for (size_t k = static_cast<size_t>(axis) + 1; k < t.shape.size(); ++k) inner *= t.shape[k];
  const int64_t n = t.shape[static_cast<size_t>(axis)];
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = start; i < start + len; ++i)
      for (int64_t j = 0; j < inner; ++j)
        r.data.push_back(t.data[static_cast<size_t>((o * n + i) * inner + j)]);
  return r;
}

// A two-layer MLP over `rows` rows: its hidden activations are rows x 1024
// floats, computed at root by the default schedule.
Program mlp(int64_t rows) {
  Program p("mlp");
  const Tensor x = p.input("x", {rows, 64});
  const Tensor w1 = p.input("w1", {64, 1024});
  const Tensor w2 = p.input("w2", {1024, 32});
  const Tensor h = ops::relu(ops::matmul(x, w1, "hidden_mm"), "hidden");
  ops::softmax(ops::matmul(h, w2, "logits"), -1, "probs");
  return p;
}

std::map<std::string, HostTensor> scaled_inputs(const Program& p, uint32_t seed) {
  std::mt19937 rng(seed);
  std::map<std::string, HostTensor> in;
  for (const auto& i : p.inputs()) {
    std::vector<int64_t> shape;
    for (const Dim& d : i.shape) shape.push_back(d.value);
    const double s = i.name == "x" ? 1.0 : 1.0 / static_cast<double>(shape[0]);
    in[i.name] = random_tensor(shape, rng, -s, s);
  }
  return in;
}

void check_matches(const std::vector<HostTensor>& got, const Program& p,
                   const std::map<std::string, HostTensor>& in) {
  const auto want = interpret(p, in);
  const auto outs = p.outputs();
  REQUIRE(got.size() == outs.size());
  for (size_t i = 0; i < outs.size(); ++i) {
    INFO("output " << outs[i]);
    CHECK(tolerance_ratio(got[i], want.at(outs[i]), 1e-4, 1e-5) <= 1.0);
  }
}

}  // namespace

TEST_CASE("batch axis: rows of an MLP, columns of a column-centering, none of a shift",
          "[shard][batch-axis]") {
  {
    const Program p = mlp(16);
    const auto b = batch_axis(p);
    REQUIRE(b);
    CHECK(b->of("x") == 0);
    CHECK(b->of("w1") == -1);  // weights are read whole by every shard
    CHECK(b->of("probs") == 0);
    CHECK(b->extent == Dim(16));
  }
  {  // x - mean over rows: each column depends on its own column only
    Program p("center");
    const Tensor x = p.input("x", {8, 5});
    ops::sub(x, ops::reduce_mean(x, {0}, true, "mu"), "centered");
    const auto b = batch_axis(p);
    REQUIRE(b);
    CHECK(b->of("x") == 1);
    CHECK(b->of("centered") == 1);
  }
  {  // the transpose's rows are its input's columns
    Program p("t");
    const Tensor x = p.input("x", {6, 4});
    ops::relu(ops::transpose(x, {1, 0}, "xt"), "out");
    const auto b = batch_axis(p);
    REQUIRE(b);
    CHECK(b->of("x") == 1);
  }
  {  // out(i) = x(i) - x(i - 1): every slice reads its neighbour's last row
    Program p("diff");
    const Tensor x = p.input("x", {9});
    p.define("d", {"i"}, {Dim(9)}, x(var("i")) - x(max(var("i") - 1, Expr(0))));
    std::string why;
    CHECK_FALSE(batch_axis(p, &why));
    CHECK_THAT(why, Contains("stage 'd' uses its batch index 'i'"));
  }
  {  // a total over everything ties every element to every other
    Program p("total");
    const Tensor x = p.input("x", {4, 4});
    ops::reduce_sum(x, {}, false, "s");
    std::string why;
    CHECK_FALSE(batch_axis(p, &why));
    CHECK_THAT(why, Contains("scalars"));
  }
}

TEST_CASE("batch axis is sound on random programs: each shard's program gives its slice",
          "[shard][batch-axis][random-programs]") {
  const int n = env_int("PTO_RANDOM_PROGRAMS", 300);
  int sharded = 0;
  for (int seed = 1; seed <= n; ++seed) {
    RandomProgram r = RandomProgramBuilder(static_cast<uint64_t>(seed)).build();
    const Program& p = r.program;
    const auto b = batch_axis(p);
    if (!b) continue;
    INFO("seed " << seed << ": " << r.str() << " along " << b->describe(p) << "\n" << p.str());
    const auto in = random_program_inputs(r, static_cast<uint64_t>(seed));
    const auto whole = interpret(p, in);
    const int64_t extent =
        b->extent.is_symbolic() ? r.symbol_size.at(b->extent.sym) : b->extent.value;
    const int64_t len =
        (extent + 2) / 3;  // three shards, the last shorter where it does not divide
    for (int64_t start = 0; start < extent; start += len) {
      const int64_t here = std::min(len, extent - start);
      const Program q = with_batch_extent(p, *b, here, r.symbol_size);
      std::map<std::string, HostTensor> part;
      for (const auto& [name, t] : in)
        part[name] = b->of(name) < 0 ? t : slice_of(t, b->of(name), start, here);
      const auto got = interpret(q, part);
      for (const std::string& o : p.outputs()) {
        const HostTensor want = slice_of(whole.at(o), b->of(o), start, here);
        REQUIRE(got.at(o).shape == want.shape);
        CHECK(tolerance_ratio(got.at(o), want, 1e-12, 1e-12) <= 1.0);
      }
    }
    ++sharded;
  }
  CHECK(sharded > n / 4);  // most random programs have a batch axis
}

TEST_CASE("a run whose intermediates are 10x the memory limit runs sharded, under the limit",
          "[shard][memory]") {
  const Program p = mlp(512);  // hidden: 512 x 1024 floats = 2 MiB
  const Kernel k(p, default_schedule(p, host_target()), host_target());
  const auto in = scaled_inputs(p, 3);
  RunStats whole;
  run_f32(k, in, 0, OnRefusal::Fail, &whole);
  REQUIRE(whole.peak_bytes >= 512 * 1024 * sizeof(float));
  const size_t limit = whole.peak_bytes / 10;
  // Without sharding: a typed error naming the stage and the figures.
  try {
    run_f32(k, in, limit);
    FAIL("no MemoryError");
  } catch (const MemoryError& e) {
    CHECK_THAT(e.what(), Contains("DEVICE_MEMORY_EXHAUSTED") && Contains("'hidden") &&
                             Contains("a limit of " + std::to_string(limit)) && Contains("shard"));
    CHECK(e.limit == limit);
    CHECK(e.requested + e.live > limit);
  }
  RunStats st;
  const auto got = run_f32(k, in, limit, OnRefusal::Shard, &st);
  check_matches(got, p, in);
  CHECK(st.shards >= 10);
  CHECK(st.peak_bytes <= limit);
  CHECK(st.peak_bytes > 0);
  // Again on the same kernel: the shard kernels are cached, the answer the same.
  RunStats again;
  check_matches(run_f32(k, in, limit, OnRefusal::Shard, &again), p, in);
  CHECK(again.shards == st.shards);
}

TEST_CASE("sharding a program with a symbolic batch size", "[shard][memory][symbolic]") {
  Program p("sym_mlp");
  const Tensor x = p.input("x", {Dim::symbol("batch"), 32});
  const Tensor w = p.input("w", {32, 2048});
  ops::reduce_max(ops::tanh(ops::matmul(x, w, "mm"), "act"), {1}, false, "peak");
  const Kernel k(p, default_schedule(p, host_target()), host_target());
  std::mt19937 rng(11);
  const std::map<std::string, HostTensor> in{{"x", random_tensor({300, 32}, rng)},
                                             {"w", random_tensor({32, 2048}, rng, -0.1, 0.1)}};
  RunStats whole;
  run_f32(k, in, 0, OnRefusal::Fail, &whole);
  if (whole.peak_bytes == 0)
    SUCCEED("the default fuses everything: nothing to shard");
  else {
    RunStats st;
    const auto got = run_f32(k, in, whole.peak_bytes / 4, OnRefusal::Shard, &st);
    CHECK(st.shards >= 4);
    CHECK(st.peak_bytes <= whole.peak_bytes / 4);
    check_matches(got, p, in);
  }
}

TEST_CASE("a program without a batch axis says why it cannot be sharded",
          "[shard][memory][errors]") {
  Program p("global");
  const Tensor x = p.input("x", {256, 256});
  const Tensor e = ops::exp(x, "e");
  ops::div(e, ops::reduce_sum(e, {}, true, "total"),
           "normalized");          // every element reads the total
  Schedule s = plain_schedule(p);  // materializes e (256 KiB)
  const Kernel k(p, s, host_target());
  std::mt19937 rng(2);
  const std::map<std::string, HostTensor> in{{"x", random_tensor({256, 256}, rng)}};
  CHECK_THROWS_WITH(run_f32(k, in, 64 * 1024, OnRefusal::Shard),
                    Contains("DEVICE_MEMORY_EXHAUSTED") && Contains("sharding cannot split it") &&
                        Contains("'total'"));
}

TEST_CASE("sharded runs of random programs match float64, every shard under the limit",
          "[shard][memory][random-programs]") {
  // A tenth of PTO_RANDOM_PROGRAMS: each compiles the whole and two shard kernels.
  const int n = std::max(10, env_int("PTO_RANDOM_PROGRAMS", 300) / 10);
  int sharded = 0;
  for (int seed = 1; sharded < n && seed < 50 * n; ++seed) {
    RandomProgram r = RandomProgramBuilder(static_cast<uint64_t>(seed)).build();
    const Program& p = r.program;
    if (!batch_axis(p)) continue;
    INFO("seed " << seed << ": " << r.str() << "\n" << p.str());
    const Kernel k(p, default_schedule(p, host_target()), host_target());
    const auto in = random_program_inputs(r, static_cast<uint64_t>(seed));
    RunStats whole;
    run_f32(k, in, 0, OnRefusal::Fail, &whole);
    if (whole.peak_bytes < 4096) continue;  // too little on the heap to split
    const size_t limit = whole.peak_bytes / 3;
    RunStats st;
    std::vector<HostTensor> got;
    try {
      got = run_f32(k, in, limit, OnRefusal::Shard, &st);
    } catch (const MemoryError& e) {
      // A program whose one slice needs more than the limit may refuse, with that reason.
      CHECK_THAT(e.what(), Contains("one slice each still does not fit"));
      continue;
    }
    CHECK(st.peak_bytes <= limit);
    CHECK(st.shards >= 2);
    const auto want = interpret(p, in);
    const auto outs = p.outputs();
    for (size_t i = 0; i < outs.size(); ++i) {
      double scale = 1;
      for (double v : want.at(outs[i]).data) scale = std::max(scale, std::fabs(v));
      CHECK(tolerance_ratio(got[i], want.at(outs[i]), 1e-3, 1e-3 * scale) <= 1.0);
    }
    ++sharded;
  }
  CHECK(sharded >= n / 2);
}

TEST_CASE("Halide's Func and buffer names map back to their stage", "[shard][memory][names]") {
  const Program p = mlp(8);
  CHECK(stage_of_func("hidden_mm$4", p) == "hidden_mm");
  CHECK(stage_of_func("probs.0", p) == "probs");
  CHECK(stage_of_func("hidden_mm__acc", p) == "hidden_mm");
  CHECK(stage_of_func("w1_im_in_hidden_mm__acc", p) ==
        "hidden_mm");  // a packed copy for its consumer
  CHECK(stage_of_func("nosuch", p) == "nosuch");
}
