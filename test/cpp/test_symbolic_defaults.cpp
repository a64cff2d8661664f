// Default schedules over symbolic shapes: the register tile of a contraction
// and the vector lanes of a root stage are specialized for extents that hold
// them (the `specialize` directive), and the kernel compiled once is correct
// at every size: 1, primes, sizes below a tile or a vector, exact tiles.
#include <catch2/catch.hpp>

#include "Helpers.h"
#include "dsl/Error.h"
#include "dsl/Interpreter.h"
#include "dsl/ops/Ops.h"
#include "schedules/FullSpeed.h"
#include "schedules/Validate.h"
#include "schedules/defaults/Defaults.h"

using namespace pto;
using namespace pto::test;

namespace {

// Runs `k` at each size (inputs U(-1, 1)) against the float64 interpreter;
// `sizes` give each input's shape.
void check_sizes(const Program& p, const Kernel& k,
                 const std::vector<std::vector<std::vector<int64_t>>>& sizes, double rtol,
                 double atol) {
  std::mt19937 rng(11);
  for (const auto& shapes : sizes) {
    std::map<std::string, HostTensor> in;
    std::string shown;
    for (size_t i = 0; i < shapes.size(); ++i) {
      in[p.inputs()[i].name] = random_tensor(shapes[i], rng);
      for (int64_t e : shapes[i]) shown += std::to_string(e) + " ";
      shown += "| ";
    }
    INFO("input shapes " << shown);
    const auto got = run_f32(k, in);
    const auto want = interpret(p, in);
    for (size_t o = 0; o < p.outputs().size(); ++o)
      CHECK(tolerance_ratio(got[o], want.at(p.outputs()[o]), rtol, atol) <= 1.0);
  }
}

}  // namespace

TEST_CASE("symbolic matmul: specialized register tile, correct at every size",
          "[defaults][symbolic]") {
  Program p("dyn_matmul");
  const Tensor a = p.input("A", {Dim::symbol("M"), Dim::symbol("K")});
  const Tensor b = p.input("B", {Dim::symbol("K"), Dim::symbol("N")});
  p.output(ops::matmul(a, b, "C"));
  const Target t = parse_target("host");
  const Schedule s = default_schedule(p, t);
  const StageSchedule& cs = s.stages.at("C");
  CHECK(cs.specialize);
  REQUIRE(cs.update);
  CHECK(cs.update->unroll.size() == 2);  // the register tile's rows and columns
  const Kernel k(p, s, t);
  // Sizes below the tile (M < rows, N < one vector), at it, a prime past it.
  // f32 sums of K products in [-1, 1]: error <= K * 2^-24 * K, < 1e-4 at K = 257.
  check_sizes(p, k,
              {{{1, 1}, {1, 1}},
               {{7, 7}, {7, 7}},
               {{5, 3}, {3, 70}},
               {{6, 1}, {1, 64}},
               {{8, 13}, {13, 48}},
               {{257, 31}, {31, 129}},
               {{129, 700}, {700, 333}}},
              1e-4, 1e-4);
}

TEST_CASE("symbolic matmul + bias + relu: the epilogue's tile is specialized",
          "[defaults][symbolic]") {
  Program p("dyn_linear_relu");
  const Tensor x = p.input("X", {Dim::symbol("M"), Dim::symbol("K")});
  const Tensor w = p.input("W", {Dim::symbol("K"), Dim::symbol("N")});
  const Tensor bias = p.input("b", {Dim::symbol("N")});
  p.output(ops::relu(ops::add(ops::matmul(x, w, "mm"), bias, "biased"), "y"));
  const Target t = parse_target("host");
  const Schedule s = default_schedule(p, t);
  bool specialized = false;
  for (const auto& [name, ss] : s.stages) specialized |= ss.specialize;
  CHECK(specialized);
  const Kernel k(p, s, t);
  check_sizes(p, k,
              {{{1, 1}, {1, 1}, {1}},
               {{3, 5}, {5, 17}, {17}},
               {{61, 37}, {37, 101}, {101}},
               {{12, 8}, {8, 128}, {128}}},
              1e-4, 1e-4);
}

TEST_CASE("symbolic elementwise chain: vectorized, specialized, correct below a vector",
          "[defaults][symbolic]") {
  Program p("dyn_gelu");
  const Tensor x = p.input("X", {Dim::symbol("R"), Dim::symbol("C")});
  const Tensor y = p.input("Y", {Dim::symbol("R"), Dim::symbol("C")});
  p.output(ops::gelu(ops::mul(ops::add(x, y), y), false, "g"));
  const Target t = parse_target("host");
  const Schedule s = default_schedule(p, t);
  const StageSchedule& gs = s.stages.at("g");
  CHECK(gs.specialize);
  CHECK(gs.loops.vectorize == p.stage("g").vars.back());  // the symbolic inner dim
  const Kernel k(p, s, t);
  check_sizes(p, k,
              {{{1, 1}, {1, 1}},
               {{3, 7}, {3, 7}},
               {{2, 16}, {2, 16}},
               {{13, 17}, {13, 17}},
               {{5, 1031}, {5, 1031}}},
              1e-5, 1e-5);
}

TEST_CASE("static programs are not specialized", "[defaults][symbolic]") {
  Program p("static_matmul");
  const Tensor a = p.input("A", {64, 32});
  const Tensor b = p.input("B", {32, 96});
  p.output(ops::gelu(ops::matmul(a, b, "C"), false, "g"));
  const Schedule s = default_schedule(p, parse_target("host"));
  for (const auto& [name, ss] : s.stages) CHECK_FALSE(ss.specialize);
}

TEST_CASE("specialize: rejected where it cannot apply, naming the stage", "[schedule][symbolic]") {
  Program p("dyn_add");
  const Tensor x = p.input("X", {Dim::symbol("R"), Dim::symbol("C")});
  const Tensor h = ops::exp(x, "h");
  p.output(ops::add(h, x, "y"));
  const Target t = parse_target("host");
  Schedule s = default_schedule(p, t);
  // Inline: no loops of its own.
  s["h"].compute.kind = Placement::Kind::Inline;
  s["h"].specialize = true;
  CHECK_THROWS_WITH(validate(p, s, &t), Catch::Contains("'h'") && Catch::Contains("specialize"));
  // Root, but nothing split over its symbolic dims.
  s["h"] = StageSchedule{};
  s["h"].specialize = true;
  CHECK_THROWS_WITH(validate(p, s, &t), Catch::Contains("'h'") && Catch::Contains("specialize"));
  // A factor split of a symbolic dim: accepted.
  s["h"].loops.vectorize = p.stage("h").vars.back();
  s["h"].loops.vector_width = 8;
  CHECK_NOTHROW(validate(p, s, &t));
}

// Symbolic rows run in parallel blocks of rows: one block per core for a
// softmax's row loop (CoreBlocks, directives/Loops.h), blocks of rows for a
// reduction's (Reduction.cpp); the last block is partial at row counts that
// are not a multiple of it.
TEST_CASE("symbolic softmax / layer_norm: rows in parallel blocks, correct at every size",
          "[defaults][symbolic]") {
  const Target t = parse_target("host");
  {
    Program p("dyn_softmax");
    const Tensor x = p.input("X", {Dim::symbol("R"), Dim::symbol("C")});
    p.output(ops::softmax(x, -1, "y"));
    const Schedule s = default_schedule(p, t);
    // The row loop itself is parallel, whole: the lowering splits it per core.
    CHECK(s.stages.at("y").loops.parallel == std::vector<std::string>{p.stage("y").vars[0]});
    const Kernel k(p, s, t);
    check_sizes(p, k, {{{1, 1}}, {{3, 5}}, {{7, 129}}, {{37, 17}}, {{5, 1031}}}, 1e-5, 1e-6);
  }
  {
    Program p("dyn_layer_norm");
    const Tensor x = p.input("X", {Dim::symbol("R"), Dim::symbol("C")});
    const Tensor g = p.input("g", {Dim::symbol("C")});
    const Tensor b = p.input("b", {Dim::symbol("C")});
    p.output(ops::layer_norm(x, g, b, 1e-5, "y"));
    const Kernel k(p, default_schedule(p, t), t);
    check_sizes(p, k, {{{1, 1}, {1}, {1}}, {{3, 7}, {7}, {7}}, {{13, 768}, {768}, {768}}, {{41, 31}, {31}, {31}}},
                1e-4, 1e-4);
  }
}

TEST_CASE("symbolic row sum and global pool: rows in parallel blocks, correct at every size",
          "[defaults][symbolic]") {
  const Target t = parse_target("host");
  {
    Program p("dyn_rowsum");
    const Tensor x = p.input("X", {Dim::symbol("R"), Dim::symbol("C")});
    p.output(ops::reduce_mean(x, {1}, false, "y"));
    const Kernel k(p, default_schedule(p, t), t);
    check_sizes(p, k, {{{1, 1}}, {{3, 5}}, {{9, 129}}, {{37, 17}}, {{6, 1031}}}, 1e-5, 1e-6);
  }
  {
    Program p("dyn_gap");
    const Tensor x = p.input("X", {1, Dim::symbol("C"), Dim::symbol("H"), Dim::symbol("W")});
    p.output(ops::global_avg_pool(x, "y"));
    const Kernel k(p, default_schedule(p, t), t);
    check_sizes(p, k, {{{1, 1, 1, 1}}, {{1, 3, 7, 7}}, {{1, 37, 5, 3}}, {{1, 130, 1, 17}}}, 1e-5, 1e-6);
  }
}

TEST_CASE("full-speed extents: the least sizes that hold every tile of the defaults", "[defaults][symbolic]") {
  const Target& t = host_target();
  Program p("mm");
  const Tensor a = p.input("A", {Dim::symbol("M"), Dim::symbol("K")});
  const Tensor b = p.input("B", {Dim::symbol("K"), Dim::symbol("N")});
  p.output(ops::matmul(a, b, "mm"));
  const Schedule s = default_schedule(p, t);
  const auto need = full_speed_extents(p, s);
  // The register tile's rows and columns; K is a plain reduction loop.
  const StageSchedule& ms = s.stages.at("mm");
  REQUIRE(need.count("M"));
  REQUIRE(need.count("N"));
  CHECK(need.at("M") == ms.loops.tile.at("i")[0]);
  CHECK(need.at("N") == ms.loops.tile.at("j")[0]);
  CHECK_FALSE(need.count("K"));
  // Static programs have none; a hand-written schedule gets its own bounds.
  Program q("mmq");
  q.output(ops::matmul(q.input("A", {40, 30}), q.input("B", {30, 20}), "mm"));
  CHECK(full_speed_extents(q, default_schedule(q, t)).empty());
  Schedule plain;
  CHECK(full_speed_extents(p, plain).empty());
  // A fused attention loop over symbolic lengths: sequences shorter than one
  // block of query rows are below full speed.
  {
    Program a("attn");
    const Dim h = Dim::symbol("H"), sq = Dim::symbol("S");
    const Tensor q = a.input("Q", {h, sq, Dim(64)}), k = a.input("K", {h, sq, Dim(64)}),
                 v = a.input("V", {h, sq, Dim(64)});
    a.output(ops::scaled_dot_product_attention(q, k, v, Tensor(), true, 0.125, "o"));
    const Schedule as = default_schedule(a, t);
    REQUIRE(as.stages.at("o").online_softmax);
    const auto an = full_speed_extents(a, as);
    REQUIRE(an.count("S"));
    CHECK(an.at("S") == std::min(as.stages.at("o").online_softmax->rows, as.stages.at("o").online_softmax->keys));
  }
  // Lanes of partials along a symbolic row: rows shorter than the lanes are below full speed.
  Program r("rowsum");
  r.output(ops::reduce_sum(r.input("X", {Dim::symbol("R"), Dim::symbol("C")}), {1}, false, "s"));
  const Schedule rs = default_schedule(r, t);
  const StageSchedule& ss = rs.stages.at("s");
  if (ss.rfactor && !ss.rfactor->short_below)
    CHECK(full_speed_extents(r, rs).at("C") == ss.rfactor->factor);
}
