// Default schedules of matmul contractions (schedules/defaults/Contraction.cpp):
// the register tile, and the packed B panel for strided panels (rows wider
// than the column tile, reused by several row tiles) at static sizes as at
// symbolic ones. Each kernel is checked against the float64 interpreter at
// odd, prime and size-1 extents; symbolic ones run one kernel at every size.
#include <catch2/catch.hpp>

#include "Helpers.h"
#include "dsl/ops/Ops.h"
#include "schedules/defaults/Defaults.h"

using namespace pto;
using namespace pto::test;

namespace {

Shape dims(int64_t a, int64_t b, bool symbolic, const std::string& sa, const std::string& sb) {
  return symbolic ? Shape{Dim::symbol(sa), Dim::symbol(sb)} : Shape{Dim(a), Dim(b)};
}

Program matmul_program(int64_t m, int64_t k, int64_t n, bool symbolic) {
  Program p("mm");
  const Tensor a = p.input("A", dims(m, k, symbolic, "M", "K"));
  const Tensor b = p.input("B", dims(k, n, symbolic, "K", "N"));
  p.output(ops::matmul(a, b, "matmul"));
  return p;
}

bool packs_b(const Schedule& s) {
  const StageSchedule* ms = s.find("matmul");
  if (!ms) return false;
  for (const auto& c : ms->cache)
    if (c.tensor == "B") return true;
  return false;
}

double check(const Kernel& k, int64_t m, int64_t kk, int64_t n, std::mt19937& rng) {
  const std::map<std::string, HostTensor> in = {{"A", random_tensor({m, kk}, rng)}, {"B", random_tensor({kk, n}, rng)}};
  const HostTensor got = run_f32(k, in)[0];
  const Program& kp = k.program();
  return tolerance_ratio(got, interpret(kp, in).at(kp.outputs()[0]), 1e-4, 1e-4);
}

}  // namespace

TEST_CASE("default contraction packs strided B panels at static sizes", "[defaults][contraction]") {
  // Rows of 128 and 333 floats are wider than a 64-column tile: packed, as
  // the symbolic kernel does, where 12 or more row tiles reuse the panel, or
  // where the cache lines of the strided panel outgrow half the L2 (K = 7151);
  // a few row tiles read it in place (3 of them over [18, 379] @ [379, 80]),
  // and one row tile (M <= tile rows) would not reuse a packed panel.
  const Target& t = host_target();
  CHECK(packs_b(default_schedule(matmul_program(300, 128, 128, false), t)));
  CHECK(packs_b(default_schedule(matmul_program(257, 1000, 333, false), t)));
  CHECK(packs_b(default_schedule(matmul_program(59, 7151, 102, false), t)));
  CHECK_FALSE(packs_b(default_schedule(matmul_program(18, 379, 80, false), t)));
  CHECK_FALSE(packs_b(default_schedule(matmul_program(4, 128, 128, false), t)));
  // One row tile over a long K: the panel outgrows half the L2, but nothing
  // would read it twice.
  CHECK_FALSE(packs_b(default_schedule(matmul_program(3, 7225, 60, false), t)));
  for (const auto& [m, k, n] :
       std::vector<std::array<int64_t, 3>>{{64, 64, 64}, {100, 50, 48}, {37, 20, 16}, {500, 64, 500}, {48, 300, 80}}) {
    INFO(m << "x" << k << "x" << n);
    const Schedule s = default_schedule(matmul_program(m, k, n, false), t);
    const StageSchedule& ms = s.stages.at("matmul");
    const auto& rows = ms.loops.tile.at("i");
    const int64_t reuse = rows.size() == 2 ? rows[0] / rows[1] : (m + rows[0] - 1) / rows[0];
    CHECK(packs_b(s) == (n > ms.loops.tile.at("j").back() && reuse >= 12));  // K too short for L2's rule
  }
}

TEST_CASE("default contraction: a batch too small to share runs inside the parallel tiles",
          "[defaults][contraction]") {
  // 3 batches on 2 cores share the column tiles (or row blocks); the
  // parallel loop is outermost (one fork per call), each task running every
  // batch of its tiles; a packed panel is per batch, just outside the row
  // tiles that read it.
  Target t = host_target();
  t.cores = 2;
  std::mt19937 rng(5);
  for (const auto& [bt, m, k, n] : std::vector<std::array<int64_t, 4>>{{3, 18, 379, 80}, {2, 300, 128, 200}}) {
    INFO(bt << "x" << m << "x" << k << "x" << n);
    Program p("bmm");
    const Tensor a = p.input("A", Shape{Dim(bt), Dim(m), Dim(k)});
    const Tensor b = p.input("B", Shape{Dim(bt), Dim(k), Dim(n)});
    p.output(ops::matmul(a, b, "matmul"));
    const Schedule s = default_schedule(p, t);
    const StageSchedule& ms = s.stages.at("matmul");
    REQUIRE(ms.loops.parallel.size() == 1);
    const auto& order = ms.loops.order;
    CHECK(order.front() == ms.loops.parallel[0]);
    CHECK(packs_b(s) == (m >= 100));
    for (const auto& c : ms.cache) {
      const auto rows = std::find(order.begin(), order.end(), ms.accumulator_at);
      REQUIRE(rows != order.begin());
      CHECK(c.loop == *(rows - 1));
      CHECK(c.loop != ms.loops.parallel[0]);
    }
    const std::map<std::string, HostTensor> in = {{"A", random_tensor({bt, m, k}, rng)},
                                                  {"B", random_tensor({bt, k, n}, rng)}};
    const Kernel kern(p, s, t);
    CHECK(tolerance_ratio(run_f32(kern, in)[0], interpret(p, in).at("matmul"), 1e-4, 1e-4) <= 1.0);
  }
}

TEST_CASE("default contraction matches float64 at odd, prime and size-1 extents", "[defaults][contraction]") {
  std::mt19937 rng(7);
  const std::vector<std::array<int64_t, 3>> sizes = {
      {257, 61, 333}, {131, 37, 128}, {7, 1, 97},  {1, 53, 160},  {97, 128, 113},
      {6, 17, 65},    {2000, 30, 17}, {25, 9, 33}, {600, 40, 77}, {300, 21, 93}};
  for (const auto& [m, k, n] : sizes) {
    INFO(m << "x" << k << "x" << n);
    const Program p = matmul_program(m, k, n, false);
    const Kernel kern(p, default_schedule(p, host_target()), host_target());
    CHECK(check(kern, m, k, n, rng) <= 1.0);
  }
  // One symbolic kernel at every size (its specialized and guarded tiles).
  const Program sp = matmul_program(0, 0, 0, true);
  const Kernel sk(sp, default_schedule(sp, host_target()), host_target());
  for (const auto& [m, k, n] : sizes) {
    INFO("symbolic " << m << "x" << k << "x" << n);
    CHECK(check(sk, m, k, n, rng) <= 1.0);
  }
}

TEST_CASE("default contraction: the register tile with the fewest estimated cycles", "[defaults][contraction]") {
  // The caches and cores these tiles were chosen for (2 cores of the
  // Sapphire Rapids VM): the panel terms depend on the L2, which differs
  // between hosts (1 MiB on Zen 4 narrows the 96 x 3000 x 200 tile).
  Target t = host_target();
  t.cores = 2;
  t.l1_bytes = 48 * 1024;
  t.l2_bytes = 2 << 20;
  const int lanes = t.vector_lanes(DType::F32);
  if (lanes != 16 || t.vector_registers < 32) return;  // the AVX-512 tiles below
  const auto tile = [&](int64_t m, int64_t k, int64_t n) {
    const Schedule s = default_schedule(matmul_program(m, k, n, false), t);
    const StageSchedule& ms = s.stages.at("matmul");
    return std::pair{ms.loops.tile.at("i").back(), ms.loops.tile.at("j").back()};
  };
  // 200 columns, 16 row tiles: 4 column tiles of 4 vectors (2 a core), not 7
  // of 2 (4 on the busiest core), nor 13 of one vector (6 accumulator chains
  // cannot fill the pipes).
  CHECK(tile(96, 3000, 200) == std::pair<int64_t, int64_t>{6, 64});
  // Square: 6 x 4 vectors; BERT's 128 rows: 8 x 3 vectors.
  CHECK(tile(1024, 1024, 1024) == std::pair<int64_t, int64_t>{6, 64});
  CHECK(tile(128, 768, 3072) == std::pair<int64_t, int64_t>{8, 48});
  // 17 columns: one column tile over all of them, padded to 2 vectors
  // (padded_columns), 12 rows, whose 24 accumulator chains keep the FMA
  // pipes busy; not two 1-vector column tiles, the second shifted inwards.
  CHECK(tile(2000, 300, 17) == std::pair<int64_t, int64_t>{12, 17});
  // 77 columns: past 4 vectors, one tile of 5 padded ones over 5 rows (25
  // accumulators), not 12 x 1 over 5 column tiles.
  CHECK(tile(3706, 550, 77) == std::pair<int64_t, int64_t>{5, 77});
  // Fewer rows than a tile: all of them, at the widest tile the registers
  // hold that still gives each core work: one row streams B in 24-vector
  // pieces, 4 rows in 6-vector ones.
  CHECK(tile(3, 500, 128).first == 3);
  CHECK(tile(1, 32, 3072) == std::pair<int64_t, int64_t>{1, 384});  // W past L2 / 2: one_row_stream
  CHECK(tile(4, 4096, 4096) == std::pair<int64_t, int64_t>{4, 96});
  CHECK(tile(1, 300, 200).second == 112);  // 2 tiles of 7 vectors, one a core, not one of 13
  // 12 x 1 tiles compute fewer of 200 columns than wider ones but run
  // slower per FMA (a step's fixed cycles): 24 accumulators.
  const auto [r, c] = tile(257, 1000, 200);
  CHECK(r * c / lanes == 24);
}

TEST_CASE("default contraction: a column panel past half the L2 narrows the tile",
          "[defaults][contraction]") {
  Target t = host_target();
  if (t.vector_lanes(DType::F32) != 16 || t.vector_registers < 32)
    return;  // the AVX-512 tiles below
  t.l2_bytes = 2 << 20;
  t.cores = 2;
  const auto tile = [&](int64_t m, int64_t k, int64_t n) {
    const Schedule s = default_schedule(matmul_program(m, k, n, false), t);
    const StageSchedule& ms = s.stages.at("matmul");
    return std::pair{ms.loops.tile.at("i").back(), ms.loops.tile.at("j").back()};
  };
  // 7151 steps: a 4-vector panel is 1.8 MiB, refetched by every row tile;
  // 12 x 2 vectors streams 0.9 MiB, which stays.
  CHECK(tile(59, 7151, 102) == std::pair<int64_t, int64_t>{12, 32});
  // The same columns over 768 steps: panels of 0.2 MiB stay either way.
  CHECK(tile(59, 768, 102).second > 32);
  std::mt19937 rng(7);
  const Program p = matmul_program(59, 7151, 102, false);
  const Kernel k(p, default_schedule(p, t), t);
  CHECK(check(k, 59, 7151, 102, rng) <= 1.0);
}

TEST_CASE("default contraction: the cores take row blocks where B is no larger than A", "[defaults][contraction]") {
  // One block of whole row tiles per core, outermost and parallel, every
  // column tile inside it; the accumulators per row tile of a block.
  for (const int cores : {2, 3, 7}) {
    Target t = host_target();
    t.cores = cores;
    const auto blocks = [&](int64_t m, int64_t k, int64_t n) {
      const Schedule s = default_schedule(matmul_program(m, k, n, false), t);
      const StageSchedule& ms = s.stages.at("matmul");
      const auto& rows = ms.loops.tile.at("i");
      if (rows.size() != 2) return int64_t{0};
      CHECK(ms.loops.parallel == std::vector<std::string>{"i_o"});
      CHECK(ms.accumulator_at == "i_m");
      CHECK(ms.loops.order.front() == "i_o");
      const int64_t tr = rows[1], tiles = (m + tr - 1) / tr;
      CHECK(rows[0] % tr == 0);
      CHECK(rows[0] / tr == (tiles + cores - 1) / cores);
      return (m + rows[0] - 1) / rows[0];
    };
    INFO(cores << " cores");
    // B smaller than A, or within half the L2: one block per core at most.
    for (const auto& [m, k, n] : std::vector<std::array<int64_t, 3>>{{391, 32, 33}, {3136, 64, 256}, {500, 64, 500}, {2000, 300, 17}}) {
      INFO(m << "x" << k << "x" << n);
      const int64_t b = blocks(m, k, n);
      CHECK(b >= 2);
      CHECK(b <= cores);
    }
    // B much larger than A (BERT's FFN), and too few row tiles: the column tiles.
    CHECK(blocks(128, 768, 3072) == 0);
    CHECK(blocks(33, 4096, 33) == 0);
  }
}

TEST_CASE("default contraction in row blocks matches float64 where the last block is short",
          "[defaults][contraction]") {
  // The last block holds fewer row tiles (guarded, not shifted into its
  // neighbour) and its last tile shifts inwards within it.
  std::mt19937 rng(3);
  for (const int cores : {2, 3, 5}) {
    Target t = host_target();
    t.cores = cores;
    for (const auto& [m, k, n] : std::vector<std::array<int64_t, 3>>{{391, 32, 33}, {101, 7, 19}, {255, 20, 40}, {61, 3, 97}}) {
      INFO(cores << " cores, " << m << "x" << k << "x" << n);
      const Program p = matmul_program(m, k, n, false);
      const Kernel kern(p, default_schedule(p, t), t);
      CHECK(check(kern, m, k, n, rng) <= 1.0);
    }
  }
}

// Few output tiles and a long reduction: the cores split the reduction
// (rfactor across cores with a register tile per chunk, split_reduction);
// a square matmul keeps its output tiles. Checked against float64.
TEST_CASE("default contraction: a small output over a long reduction splits it across cores",
          "[defaults][contraction]") {
  Target t = host_target();
  if (t.vector_lanes(DType::F32) != 16 || t.vector_registers < 32) return;  // the AVX-512 costs
  t.cores = 2;
  const Schedule s = default_schedule(matmul_program(33, 4096, 33, false), t);
  const StageSchedule& ms = s.stages.at("matmul");
  REQUIRE(ms.rfactor);
  CHECK(ms.rfactor->parallel);
  CHECK(ms.rfactor->interleave);
  CHECK(4096 % ms.rfactor->factor == 0);
  CHECK(33 % ms.loops.tile.at("i").at(0) == 0);
  CHECK(ms.accumulator_at.empty());
  std::mt19937 rng(7);
  const Kernel kern(matmul_program(33, 4096, 33, false), s, host_target());
  CHECK(check(kern, 33, 4096, 33, rng) <= 1.0);
  CHECK_FALSE(
      default_schedule(matmul_program(1024, 1024, 1024, false), t).stages.at("matmul").rfactor);
  // A reduction no multiple of the cores has no whole chunks: the output tiles stay.
  CHECK_FALSE(default_schedule(matmul_program(33, 4097, 33, false), t).stages.at("matmul").rfactor);
}
