// The matrix-vector default (schedules/defaults/Contraction.cpp,
// matrix_vector): A @ x with A's rows streamed in parallel blocks of about
// 2^14 elements and lanes of partials along each row, at static and symbolic
// extents. Sums run on small integers, which f32 adds exactly (every partial
// stays below 2^24), so a dropped, repeated or misplaced term shows as an
// error of at least 1 against the float64 interpreter whatever the order;
// sizes include 1, odd and prime extents, and one symbolic kernel runs at
// every size.
#include <catch2/catch.hpp>
#include <cmath>
#include <tuple>

#include "Helpers.h"
#include "dsl/ops/Ops.h"
#include "schedules/defaults/Defaults.h"

using namespace pto;
using namespace pto::test;

namespace {

// A [m, k] @ x: x is [k] (a 1-D vector) or [k, 1].
Program matvec(int64_t m, int64_t k, bool column, bool symbolic) {
  Program p("mv");
  const Dim dm = symbolic ? Dim::symbol("M") : Dim(m), dk = symbolic ? Dim::symbol("K") : Dim(k);
  const Tensor a = p.input("A", {dm, dk});
  const Tensor x = column ? p.input("x", {dk, Dim(1)}) : p.input("x", {dk});
  p.output(ops::matmul(a, x, "mv"));
  return p;
}

// Did the matrix-vector rule schedule the stage: its rows in parallel blocks,
// the row sum rfactored (not split across cores)?
bool streams_rows(const Schedule& s) {
  const StageSchedule* ms = s.find("mv");
  if (!ms || !ms->rfactor || ms->rfactor->parallel || ms->loops.parallel.size() != 1) return false;
  const std::string& par = ms->loops.parallel[0];
  return par == "i" || (par == "i_o" && ms->loops.tile.count("i"));
}

double check(const Kernel& k, int64_t m, int64_t kk, bool column, std::mt19937& rng) {
  const std::map<std::string, HostTensor> in = {
      {"A", small_integers({m, kk}, rng)},
      {"x", column ? small_integers({kk, 1}, rng) : small_integers({kk}, rng)}};
  const Program& kp = k.program();
  return tolerance_ratio(run_f32(k, in)[0], interpret(kp, in).at("mv"), 0, 1e-9);
}

}  // namespace

TEST_CASE("default matrix-vector: rows in parallel blocks of ~2^14 elements",
          "[defaults][matvec]") {
  if (host_target().cores < 2) return;  // one core: the reduction rule's serial rows
  // Llama's decode up-projection: blocks of 4 rows of 4096 (not one block per core).
  const Schedule s = default_schedule(matvec(11008, 4096, false, false), host_target());
  REQUIRE(streams_rows(s));
  CHECK(s.find("mv")->loops.tile.at("i") == std::vector<int64_t>{4});
  // Short rows take more rows per block; [k, 1] vectors too.
  const Schedule s2 = default_schedule(matvec(2053, 257, true, false), host_target());
  REQUIRE(streams_rows(s2));
  CHECK(s2.find("mv")->loops.tile.at("i") == std::vector<int64_t>{64});
  // Too few rows for two blocks per core, or rows too short for lanes of
  // partials: the reduction rule's schedule instead.
  // (37 rows of 1031: blocks of 16 would give 3; the reduction rule's one block per core.)
  const Schedule few = default_schedule(matvec(37, 1031, false, false), host_target());
  const StageSchedule* fs = few.find("mv");
  CHECK_FALSE(
      (fs && fs->loops.tile.count("i") && fs->loops.tile.at("i") == std::vector<int64_t>{16}));
  CHECK_FALSE(streams_rows(default_schedule(matvec(1, 4096, false, false), host_target())));
  CHECK_FALSE(streams_rows(default_schedule(matvec(5000, 17, false, false), host_target())));
  // x[1, K] @ W[K, N] reads W down its columns: not a stream of rows, static
  // or symbolic (the symbolic one took this rule once and ran 15x slower).
  for (const bool symbolic : {false, true}) {
    Program p("vm");
    const Dim dk = symbolic ? Dim::symbol("K") : Dim(768),
              dn = symbolic ? Dim::symbol("N") : Dim(3072);
    const Tensor x = p.input("x", {Dim(1), dk});
    const Tensor w = p.input("W", {dk, dn});
    p.output(ops::matmul(x, w, "mv"));
    INFO("vecmat, symbolic " << symbolic);
    CHECK_FALSE(streams_rows(default_schedule(p, host_target())));
  }
  // A symbolic row count: the whole dim in parallel, its blocks sized at run
  // time (Loops.cpp's run_time_block), not fixed blocks.
  const Schedule ss = default_schedule(matvec(0, 0, false, true), host_target());
  REQUIRE(streams_rows(ss));
  CHECK(ss.find("mv")->loops.tile.count("i") == 0);
  CHECK(ss.find("mv")->loops.parallel == std::vector<std::string>{"i"});
}

// A block whose tile divides the rows streams them together (rfactor
// interleave): rows x vectors of partials in half the registers; a prime
// row count keeps one row at a time. Exact either way.
TEST_CASE("default matrix-vector: the block's rows stream together where the tile divides them",
          "[defaults][matvec]") {
  const Target t = host_target();
  if (t.cores < 2) return;
  const int lanes = t.vector_lanes(DType::F32);
  std::mt19937 rng(12);
  // Rows of 700 want blocks of 24, more than the registers hold: the
  // largest dividing block within a factor of 2 that fits (15 of 32
  // registers), none with 16 registers.
  const bool short_rows_together = t.vector_registers / 2 >= 12;
  for (const auto& [m, k, together] :
       std::vector<std::tuple<int64_t, int64_t, bool>>{{1100, 4096, true},
                                                       {1103, 4096, false},
                                                       {600, 2048, true},
                                                       {3000, 700, short_rows_together}}) {
    INFO(m << "x" << k);
    const Program p = matvec(m, k, false, false);
    const Schedule s = default_schedule(p, t);
    REQUIRE(streams_rows(s));
    const StageSchedule& ms = *s.find("mv");
    CHECK(ms.rfactor->interleave == together);
    if (together) {
      const int64_t rows = ms.loops.tile.at("i").front();
      CHECK(m % rows == 0);
      CHECK(rows * (ms.rfactor->factor / lanes) <= t.vector_registers / 2);
    }
    const Kernel kern(p, s, t);
    CHECK(check(kern, m, k, false, rng) <= 1.0);
  }
}

TEST_CASE("default matrix-vector matches float64 at odd, prime, size-1 and symbolic extents",
          "[defaults][matvec]") {
  std::mt19937 rng(11);
  const std::vector<std::pair<int64_t, int64_t>> sizes = {{300, 4099}, {1000, 97},  {2053, 257},
                                                          {37, 1031},  {1, 4096},   {13, 1},
                                                          {257, 129},  {101, 16411}};
  for (const bool column : {false, true}) {
    for (const auto& [m, k] : sizes) {
      INFO((column ? "[k, 1] " : "[k] ") << m << "x" << k);
      const Program p = matvec(m, k, column, false);
      const Kernel kern(p, default_schedule(p, host_target()), host_target());
      CHECK(check(kern, m, k, column, rng) <= 1.0);
    }
    // One symbolic kernel at every size: specialized blocks and guarded tails.
    const Program sp = matvec(0, 0, column, true);
    const Kernel sk(sp, default_schedule(sp, host_target()), host_target());
    for (const auto& [m, k] : sizes) {
      INFO((column ? "symbolic [k, 1] " : "symbolic [k] ") << m << "x" << k);
      CHECK(check(sk, m, k, column, rng) <= 1.0);
    }
  }
}

TEST_CASE("default few-column contractions: rows streamed, W packed transposed once per core",
          "[defaults][matvec]") {
  if (host_target().cores < 2) return;
  const int lanes = host_target().vector_lanes(DType::F32);
  std::mt19937 rng(13);
  // Rows in whole blocks interleaved in each step where a divisor of m
  // makes them (1806 = 2 x 3 x 7 x 43, 70, 1000, 900), one at a time where
  // none does (257 and 619 are prime; 33 = 3 x 11 leaves 11 blocks of 3, no
  // whole shares for 2 cores). [16, 97] @ [97, 2]: one block of 8 per core,
  // tiled once (a share tiled by a block as large was an invalid schedule:
  // random program seed 29106).
  struct Size {
    int64_t m, k, n;
    bool blocks;
  };
  const std::vector<Size> sizes = {{1806, 6056, 7, true}, {70, 2325, 5, true},
                                   {33, 101, 2, false},   {257, 129, lanes / 2, false},
                                   {1000, 97, 3, true},   {900, 452, 4, true},
                                   {619, 140, 5, false},  {16, 97, 2, true}};
  for (const auto& [m, k, n, blocks] : sizes) {
    INFO(m << "x" << k << "x" << n);
    Program p("mm");
    p.output(ops::matmul(p.input("A", {m, k}), p.input("W", {k, n}), "mv"));
    const Schedule s = default_schedule(p, host_target());
    const StageSchedule& ms = s.stages.at("mv");
    REQUIRE(ms.rfactor);
    REQUIRE(ms.cache.size() == 1);
    CHECK(ms.cache[0].tensor == "W");
    CHECK(ms.cache[0].transpose);
    CHECK(ms.loops.parallel == std::vector<std::string>{"i_o"});
    CHECK(ms.rfactor->interleave == blocks);
    if (blocks) {
      const std::vector<int64_t>& tile = ms.loops.tile.at("i");
      REQUIRE(!tile.empty());
      CHECK(m % tile[0] == 0);
      if (tile.size() == 2) CHECK((tile[1] < tile[0] && tile[0] % tile[1] == 0));
      CHECK(tile.back() * (n + 1) < host_target().vector_registers);
    }
    const Kernel kern(p, s, host_target());
    const std::map<std::string, HostTensor> in = {{"A", small_integers({m, k}, rng)},
                                                  {"W", small_integers({k, n}, rng)}};
    CHECK(tolerance_ratio(run_f32(kern, in)[0], interpret(p, in).at("mv"), 0, 1e-9) <= 1.0);
  }
  // A vector's width of columns is a register tile's.
  Program p("mm");
  p.output(ops::matmul(p.input("A", {500, 300}), p.input("W", {300, lanes}), "mv"));
  CHECK_FALSE(default_schedule(p, host_target()).stages.at("mv").rfactor);
}

// More than half a vector of columns, or a batch of products: one padded
// vector of columns per register tile row (pad_lanes), B read from a clamped
// copy. Exact on small integers at odd row counts, K of one step and prime
// K, transposed weights, a batch and a fused epilogue (run as its own pass).
TEST_CASE("default contractions with fewer columns than a vector pad them to one (pad_lanes)",
          "[defaults][matvec]") {
  const int lanes = host_target().vector_lanes(DType::F32);
  if (lanes < 4) return;
  std::mt19937 rng(14);
  const auto exact = [&](const Program& p, const std::string& stage) {
    const Schedule s = default_schedule(p, host_target());
    const StageSchedule& ms = s.stages.at(stage);
    CHECK(ms.pad_lanes == p.stage(stage).vars.back());
    CHECK_FALSE(ms.cache.empty());
    const Kernel kern(p, s, host_target());
    std::map<std::string, HostTensor> in;
    for (const auto& t : p.inputs()) {
      std::vector<int64_t> shape;
      for (const Dim& d : t.shape) shape.push_back(d.value);
      in.emplace(t.name, small_integers(shape, rng));
    }
    CHECK(tolerance_ratio(run_f32(kern, in)[0], interpret(p, in).at(p.outputs()[0]), 0, 1e-9) <=
          1.0);
  };
  const std::vector<std::array<int64_t, 3>> sizes = {{257, 129, lanes - 1},
                                                     {812, 595, lanes / 2 + 1},
                                                     {13, 1, lanes - 3},
                                                     {7, 101, lanes / 2 + 2}};
  for (const auto& [m, k, n] : sizes) {
    INFO(m << "x" << k << "x" << n);
    Program p("mm");
    p.output(ops::matmul(p.input("A", {m, k}), p.input("W", {k, n}), "mm"));
    exact(p, "mm");
    Program t("mmt");  // x @ W^T: W read down its columns, copied transposed
    t.output(ops::linear(t.input("A", {m, k}), t.input("W", {n, k}), Tensor(), "mm"));
    exact(t, "mm");
  }
  {
    INFO("batched [33, 244, 110] @ [33, 110, 8]");
    Program p("bmm");
    p.output(ops::matmul(p.input("A", {33, 244, 110}), p.input("B", {33, 110, 8}), "mm"));
    exact(p, "mm");
  }
  {
    INFO("matmul + bias + relu, 11 columns");
    Program p("mlp");
    const Tensor y = ops::matmul(p.input("A", {300, 64}), p.input("W", {64, 11}), "mm");
    p.output(ops::relu(ops::add(y, p.input("b", {11}), "bias"), "act"));
    exact(p, "mm");
  }
}

// Columns past a vector that are not whole vectors, within one register
// tile's width: one padded column tile over all of them (pad_lanes), the row
// tiles shared by the cores, its copy-out in vectors (the last shifted
// inwards); where column tiles of 2+ vectors compute no more columns than the
// padding would, or too few rows for the cores, column tiles shifted inwards
// instead. Exact on small integers.
TEST_CASE("default contractions pad columns past a vector into one column tile",
          "[defaults][matvec]") {
  const Target t = host_target();
  const int lanes = t.vector_lanes(DType::F32);
  if (lanes < 4 || t.vector_registers < 29) return;  // 4 vectors of 6 rows: AVX-512's registers
  std::mt19937 rng(15);
  const auto run = [&](int64_t m, int64_t k, int64_t n) {
    Program p("mm");
    p.output(ops::matmul(p.input("A", {m, k}), p.input("W", {k, n}), "mm"));
    const Schedule s = default_schedule(p, t);
    const std::map<std::string, HostTensor> in = {{"A", small_integers({m, k}, rng)},
                                                  {"W", small_integers({k, n}, rng)}};
    const Kernel kern(p, s, t);
    CHECK(tolerance_ratio(run_f32(kern, in)[0], interpret(p, in).at("mm"), 0, 1e-9) <= 1.0);
    return s.stages.at("mm");
  };
  for (const int64_t n : {int64_t{lanes + 1}, int64_t{2 * lanes + 3}, int64_t{3 * lanes - 1}}) {
    INFO("[301, 300] @ [300, " << n << "]");
    const StageSchedule ms = run(301, 300, n);
    CHECK(ms.pad_lanes == "j");
    CHECK(ms.loops.tile.at("j") == std::vector<int64_t>{n});
    CHECK(ms.loops.parallel == std::vector<std::string>{"i_o"});
    CHECK(ms.loops.vectorize == "j_i");
    CHECK(ms.loops.vector_width == lanes);
  }
  {
    INFO(
        "[301, 300] @ [300, 4 * lanes - 1]: two 2-vector tiles compute the 4 vectors padding "
        "would");
    const StageSchedule ms = run(301, 300, 4 * lanes - 1);
    CHECK(ms.pad_lanes.empty());
    CHECK(ms.loops.tile.at("j") == std::vector<int64_t>{2 * lanes});
  }
  {
    INFO("[1, 300] @ [300, lanes * 2 + 8]: one row, the column tiles shared");
    const StageSchedule ms = run(1, 300, 2 * lanes + 8);
    CHECK(ms.pad_lanes.empty());
  }
  {
    INFO(
        "a short reduction pads too (the copy-out is vectors); few rows do not (B packed by one "
        "core)");
    CHECK(run(301, 4 * lanes, lanes + 1).pad_lanes == "j");
    CHECK(run(3 * t.cores, 300, lanes + 1).pad_lanes.empty());
  }
  {
    INFO("whole vectors are not padded");
    CHECK(run(50, 20, 2 * lanes).pad_lanes.empty());
  }
  {
    INFO("past the widest tile: shifted column tiles");
    CHECK(run(50, 20, 4 * lanes + 1).pad_lanes.empty());
  }
}
