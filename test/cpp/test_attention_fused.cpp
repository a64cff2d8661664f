// The online_softmax directive (schedules/directives/OnlineSoftmax.h,
// backends/OnlineSoftmax.cpp): attention as FlashAttention's fused loop.
// Every numeric check compares with the float64 interpreter, which evaluates
// the plain stages (scores, softmax, product with V): causal and not, blocks
// that do and do not divide the sequence, a sequence of 1, odd head dims,
// several heads, symbolic lengths; and the default's choice between the fused
// and the materialized form, and the errors that name the stage.
#include <catch2/catch.hpp>

#include <cmath>

#include "Helpers.h"
#include "dsl/Workloads.h"
#include "dsl/ops/Ops.h"
#include "schedules/Explain.h"
#include "schedules/Validate.h"
#include "schedules/defaults/Defaults.h"
#include "schedules/defaults/Rules.h"
#include "schedules/directives/OnlineSoftmax.h"
#include "target/Target.h"

using namespace pto;
using namespace pto::test;
using Catch::Matchers::Contains;

namespace {

// softmax(q k^T / sqrt(D) [+ causal mask]) v over [H, Lq, D] x [H, Lk, D] (H = 0: no head dim).
Program attention(const Dim& h, const Dim& lq, const Dim& lk, const Dim& d, bool causal) {
  Program p("attn");
  const auto shape = [&](const Dim& l) {
    return h.is_symbolic() || h.value ? Shape{h, l, d} : Shape{l, d};
  };
  const Tensor q = p.input("Q", shape(lq)), k = p.input("K", shape(lk)),
               v = p.input("V", shape(lk));
  const std::optional<double> scale = d.is_symbolic() ? std::optional<double>(0.125) : std::nullopt;
  p.output(ops::scaled_dot_product_attention(q, k, v, Tensor(), causal, scale, "O"));
  return p;
}

// max error ratio of the kernel vs float64 with `sizes` for the symbolic dims.
double check(const Program& p, const Schedule& s,
             const std::map<std::string, int64_t>& sizes = {}) {
  const Target t = parse_target("host");
  validate(p, s, &t);
  const Kernel k(p, s, t);
  std::mt19937 rng(7);
  std::map<std::string, HostTensor> in;
  for (const auto& i : p.inputs()) {
    std::vector<int64_t> shape;
    for (const Dim& d : i.shape) shape.push_back(d.is_symbolic() ? sizes.at(d.sym) : d.value);
    in[i.name] = random_tensor(shape, rng, -2, 2);
  }
  // Scores of |q k| <= 4 D / sqrt(D); f32 rounding of the scores (D products),
  // of exp and of sums over Lk keys, in a different order than float64's.
  return tolerance_ratio(run_f32(k, in)[0], interpret(p, in).at("O"), 2e-5, 2e-5);
}

// Whether the schedule runs O as the fused loop.
bool fuses(const Schedule& s) {
  return s.find("O") && s.find("O")->online_softmax;
}

// The largest power-of-two square length whose f32 scores, over `heads`
// heads, fit half of t's L2.
int64_t fit_length(const Target& t, int64_t heads) {
  int64_t fit = 1;
  while (heads * (2 * fit) * (2 * fit) * 4 <= t.l2_bytes / 2) fit *= 2;
  return fit;
}

Schedule fused(const Program& p, int64_t rows, int64_t keys) {
  Schedule s = default_schedule(p, parse_target("host"));
  StageSchedule ss;
  ss.online_softmax = OnlineSoftmax{rows, keys};
  s["O"] = ss;
  return s;
}

}  // namespace

TEST_CASE("online_softmax: the softmax contraction and its causal mask are found", "[attention]") {
  {
    const Program p = attention(Dim(2), Dim(16), Dim(16), Dim(8), true);
    const auto sc = directives::softmax_contraction(p, p.stage("O"));
    REQUIRE(sc);
    REQUIRE(sc->scores);
    CHECK(sc->causal_offset == 0);
    CHECK(sc->probs->op == "softmax");
  }
  {
    const Program p = attention(Dim(0), Dim(16), Dim(16), Dim(8), false);
    const auto sc = directives::softmax_contraction(p, p.stage("O"));
    REQUIRE(sc);
    CHECK_FALSE(sc->causal_offset);
  }
  {
    // The attention workload: softmax reads the score contraction directly.
    const Program p = make_workload("attention", {{"S", 32}, {"D", 16}});
    const auto sc = directives::softmax_contraction(p, p.stage("O"));
    REQUIRE(sc);
    REQUIRE(sc->scores);
    CHECK(sc->scores->name == sc->x);
  }
  {
    // A plain matmul has no softmax.
    Program p("mm");
    const Tensor a = p.input("A", {8, 8}), b = p.input("B", {8, 8});
    p.output(ops::matmul(a, b, "C"));
    std::string why;
    CHECK_FALSE(directives::softmax_contraction(p, p.stage("C"), &why));
    CHECK_THAT(why, Contains("softmax"));
  }
}

TEST_CASE("online_softmax matches float64: causal and not, ragged blocks, odd sizes",
          "[attention]") {
  struct Case {
    int64_t h, lq, lk, d;
  };
  for (const Case& c : {Case{0, 1, 1, 1}, Case{2, 7, 13, 5}, Case{1, 33, 70, 17},
                        Case{3, 100, 100, 64}, Case{0, 130, 61, 32}, Case{2, 64, 64, 128},
                        // P V tiles of 5 vectors (80), past D (72: a padded V), of 3 (96)
                        Case{2, 40, 50, 80}, Case{1, 20, 33, 72}, Case{1, 9, 9, 96}}) {
    for (const bool causal : {false, true}) {
      const Program p = attention(Dim(c.h), Dim(c.lq), Dim(c.lk), Dim(c.d), causal);
      for (const auto& [rows, keys] :
           std::vector<std::pair<int64_t, int64_t>>{{48, 64}, {5, 7}, {1, 1}, {30, 128}}) {
        INFO("H " << c.h << " Lq " << c.lq << " Lk " << c.lk << " D " << c.d << " causal " << causal
                  << " block " << rows << " x " << keys);
        CHECK(check(p, fused(p, rows, keys)) <= 1.0);
      }
    }
  }
}

// Unscaled scores of D = 16 span +-64, so that many exponentials of a score
// minus its row max fall below -87, where the fused loop's exp flushes to 0
// (float64 keeps them, at 1e-38 of the row's largest term): one block and
// several, causal and not, static and symbolic lengths.
TEST_CASE("online_softmax: exponentials far below the row max match float64", "[attention]") {
  for (const bool causal : {false, true})
    for (const bool symbolic : {false, true}) {
      const Dim lq = symbolic ? Dim::symbol("S") : Dim(37),
                lk = symbolic ? Dim::symbol("S") : Dim(101);
      Program p("attn");
      const Tensor q = p.input("Q", {2, lq, 16}), k = p.input("K", {2, lk, 16}),
                   v = p.input("V", {2, lk, 16});
      p.output(ops::scaled_dot_product_attention(q, k, v, Tensor(), causal, 1.0, "O"));
      for (const auto& [rows, keys] :
           std::vector<std::pair<int64_t, int64_t>>{{6, 101}, {16, 32}}) {
        INFO("causal " << causal << " symbolic " << symbolic << " block " << rows << " x " << keys);
        CHECK(check(p, fused(p, rows, keys), {{"S", 101}}) <= 1.0);
      }
    }
}

// Regression: the fused loop's exp (exp_nonpositive) returned 0 for NaN, so a
// NaN score dropped out of its row's softmax and the row came out finite.
// As in float64, every output row whose softmax sees a NaN is NaN: the
// query's row for a NaN in Q, every row that attends the key for a NaN in K
// or V. One deviation: float64 gives NaN to causal rows before a NaN in V
// too (0 x NaN), the fused loop only to those in the key's block of rows
// (the rows before it skip the block, as in FlashAttention); those rows are
// NaN in that column or float64's on a clean V.
TEST_CASE("online_softmax: NaN in Q, K or V reaches the rows that see it, as in float64",
          "[attention]") {
  const Target t = parse_target("host");
  const int64_t h = 2, l = 23, d = 16, row = 9;
  for (const bool causal : {false, true})
    for (const char* input : {"Q", "K", "V"}) {
      const Program p = attention(Dim(h), Dim(l), Dim(l), Dim(d), causal);
      std::mt19937 rng(7);
      std::map<std::string, HostTensor> in;
      for (const auto& i : p.inputs()) in[i.name] = random_tensor({h, l, d}, rng, -2, 2);
      std::map<std::string, HostTensor> clean = in;
      in.at(input).data[(l + row) * d + 3] = std::nan("");  // head 1, row 9, element 3
      HostTensor want = interpret(p, in).at("O");
      const bool skips = causal && std::string(input) == "V";
      const HostTensor c = interpret(p, clean).at("O");
      for (const auto& [rows, keys] : std::vector<std::pair<int64_t, int64_t>>{{8, 8}, {23, 23}}) {
        INFO(input << " causal " << causal << " block " << rows << " x " << keys);
        const Kernel k(p, fused(p, rows, keys), t);
        const HostTensor got = run_f32(k, in)[0];
        int64_t nans = 0;
        for (const double v : got.data) nans += std::isnan(v);
        CHECK(nans > 0);
        HostTensor w = want;
        if (skips)  // head 1's rows before the key: NaN in column 3, or float64's on a clean V
          for (int64_t i = 0; i < row; ++i)
            for (int64_t j = 0; j < d; ++j) {
              const int64_t at = (l + i) * d + j;
              if (!(j == 3 && std::isnan(got.data[at]))) w.data[at] = c.data[at];
            }
        CHECK(tolerance_ratio(got, w, 2e-5, 2e-5) <= 1.0);
      }
    }
}

TEST_CASE("online_softmax: symbolic lengths, one kernel for every size", "[attention]") {
  for (const bool causal : {false, true}) {
    const Program p =
        attention(Dim::symbol("H"), Dim::symbol("S"), Dim::symbol("S"), Dim(16), causal);
    const Schedule s = default_schedule(p, parse_target("host"));
    CHECK(fuses(s));  // symbolic: the fused loop
    for (const int64_t n : {1, 37, 130}) {
      INFO("causal " << causal << " S " << n);
      CHECK(check(p, s, {{"H", 2}, {"S", n}}) <= 1.0);
    }
  }
}

// Every dim symbolic, as `pypto.kernel` traces by default: the key dim is
// clamped in the packed copy of K and V's columns in a padded copy (no
// per-lane clamps, which gathered), so rounded-up blocks and d tiles must
// still read only the rows and columns that exist.
TEST_CASE("online_softmax: every dim symbolic (heads, length, head dim), odd and prime sizes",
          "[attention]") {
  for (const bool causal : {false, true}) {
    const Program p =
        attention(Dim::symbol("H"), Dim::symbol("S"), Dim::symbol("S"), Dim::symbol("D"), causal);
    const Schedule s = default_schedule(p, parse_target("host"));
    CHECK(fuses(s));
    for (const auto& [h, n, d] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
             {1, 1, 1}, {2, 7, 5}, {3, 129, 64}, {1, 383, 17}, {2, 64, 80}, {2, 97, 128}, {1, 70, 32}}) {
      // D = 64 and 128 take the version of whole 4-vector P V tiles, the others one-vector tiles.
      INFO("causal " << causal << " H " << h << " S " << n << " D " << d);
      CHECK(check(p, s, {{"H", h}, {"S", n}, {"D", d}}) <= 1.0);
    }
  }
}

TEST_CASE("online_softmax: the default fuses where the scores of all heads outgrow L2",
          "[attention][defaults]") {
  for (const char* name : {"x86-64-avx512", "x86-64-avx2", "host"}) {
    const Target t = parse_target(name);
    INFO(name << ": L2 " << t.l2_bytes);
    // Largest square length whose f32 scores (2 heads) fit half the L2, and
    // twice it; and the same length with 8x the heads, whose scores do not.
    const int64_t fit = fit_length(t, 2);
    const Program small = attention(Dim(2), Dim(fit), Dim(fit), Dim(64), false);
    const Program large = attention(Dim(2), Dim(2 * fit), Dim(2 * fit), Dim(64), false);
    const Schedule ss = default_schedule(small, t), sl = default_schedule(large, t);
    CHECK_FALSE(fuses(ss));
    REQUIRE(fuses(sl));
    CHECK(fuses(default_schedule(attention(Dim(16), Dim(fit), Dim(fit), Dim(64), false), t)));
    const OnlineSoftmax b =
        *default_schedule(attention(Dim(2), Dim(2 * fit), Dim(2 * fit), Dim(64), true), t)
             .find("O")
             ->online_softmax;
    CHECK(b.keys == 4 * t.vector_lanes(DType::F32));
    CHECK(b.rows % 6 == 0);
    // Non-causal: one block of all keys while the tile's row block fits half the L2.
    const OnlineSoftmax bl = *sl.find("O")->online_softmax;
    CHECK(bl.rows == b.rows);
    CHECK(bl.keys == (2 * b.rows * 2 * fit * 4 <= t.l2_bytes / 2 ? 2 * fit : b.keys));
    CHECK(2 * b.rows * b.keys * 4 <= std::max<int64_t>(t.l1_bytes / 2, 2 * 6 * b.keys * 4));
    // Causal: fused from 2 (rows + keys) on, where it skips a quarter of the work.
    const int64_t from = 2 * (b.rows + b.keys);
    if (from <= fit) {
      CHECK_FALSE(fuses(
          default_schedule(attention(Dim(2), Dim(from - 1), Dim(from - 1), Dim(64), true), t)));
      CHECK(fuses(default_schedule(attention(Dim(2), Dim(from), Dim(from), Dim(64), true), t)));
    }
    validate(large, sl, &t);
    CHECK_THAT(explain(large, sl, &t), Contains("online softmax"));
  }
  // The default's fused form runs and matches at a length past the threshold.
  const Target host = parse_target("host");
  const int64_t fit = fit_length(host, 1);
  const Program p = attention(Dim(0), Dim(2 * fit + 3), Dim(2 * fit + 3), Dim(24), true);
  const Schedule s = default_schedule(p, host);
  CHECK(fuses(s));
  CHECK(check(p, s) <= 1.0);
}

// The default's one-block form (no causal mask, a static key length whose
// tile of rows x Lk scores fits L2): every key in one block, at prime, odd and
// size-1 lengths, static and symbolic heads, and query lengths other than Lk.
TEST_CASE("online_softmax: the default's single key block matches float64",
          "[attention][defaults]") {
  const Target t = parse_target("host");
  struct Case {
    Dim h;
    int64_t lq, lk, d;
  };
  for (const Case& c : {Case{Dim(16), 257, 257, 64}, Case{Dim(24), 131, 131, 17},
                        Case{Dim(20), 1, 383, 64}, Case{Dim(32), 97, 1, 8},
                        Case{Dim::symbol("H"), 131, 131, 64}, Case{Dim::symbol("H"), 5, 211, 3}}) {
    const Program p = attention(c.h, Dim(c.lq), Dim(c.lk), Dim(c.d), false);
    const Schedule d = default_schedule(p, t);
    INFO("H " << c.h.str() << " Lq " << c.lq << " Lk " << c.lk << " D " << c.d);
    // Short rows of few heads stay materialized: the same block, by hand.
    const bool big = c.h.is_symbolic() || c.h.value * c.lq * c.lk * 4 > t.l2_bytes / 2;
    CHECK(fuses(d) == big);
    const Schedule s = big ? d : fused(p, defaults::online_softmax_block(t).rows, c.lk);
    CHECK(s.find("O")->online_softmax->keys == c.lk);
    CHECK(check(p, s, {{"H", 3}}) <= 1.0);
    // With the causal mask the blocks stay small (they skip past the diagonal).
    const Program pc = attention(c.h, Dim(c.lq), Dim(c.lk), Dim(c.d), true);
    const Schedule sc = default_schedule(pc, t);
    if (fuses(sc)) {
      CHECK(sc.find("O")->online_softmax->keys == 4 * t.vector_lanes(DType::F32));
      CHECK(check(pc, sc, {{"H", 3}}) <= 1.0);
    }
  }
  // Symbolic key length: the largest block whose tile of scores fits half
  // the L2, split at run time into equal blocks (one block at these lengths).
  const int64_t w = 4 * t.vector_lanes(DType::F32);
  const Program ps = attention(Dim(4), Dim::symbol("S"), Dim::symbol("S"), Dim(64), false);
  const Schedule ss = default_schedule(ps, t);
  REQUIRE(fuses(ss));
  const OnlineSoftmax bs = *ss.find("O")->online_softmax;
  CHECK(bs.keys % w == 0);
  CHECK(bs.keys > w);
  CHECK(2 * bs.rows * bs.keys * 4 <= t.l2_bytes / 2);
  CHECK(2 * bs.rows * (bs.keys + w) * 4 > t.l2_bytes / 2);
  for (const int64_t n : {1, 61, 384}) CHECK(check(ps, ss, {{"S", n}}) <= 1.0);
}

// Balanced blocks at a symbolic key length (a block of 2 tiles: lengths of
// 1, 2 and 3 blocks, and just past one), causal and not, static and symbolic
// query length, and a symbolic head dim.
TEST_CASE("online_softmax: run-time balanced key blocks match float64", "[attention]") {
  const Target t = parse_target("host");
  const int64_t w = 4 * t.vector_lanes(DType::F32);
  for (const bool causal : {false, true})
    for (const Dim& d : {Dim(64), Dim::symbol("D")}) {
      const Program p = attention(Dim(2), Dim::symbol("S"), Dim::symbol("S"), d, causal);
      const Program pq = attention(Dim(2), Dim(37), Dim::symbol("S"), d, false);
      for (const int64_t n : {int64_t{1}, w + 1, 2 * w, 2 * w + 3, 5 * w - 1}) {
        INFO("causal " << causal << " D " << d.str() << " S " << n);
        CHECK(check(p, fused(p, 24, 2 * w), {{"S", n}, {"D", 24}}) <= 1.0);
        if (!causal) CHECK(check(pq, fused(pq, 7, 2 * w), {{"S", n}, {"D", 9}}) <= 1.0);
      }
    }
}

TEST_CASE("online_softmax: errors name the stage, the directive and what is valid", "[attention]") {
  const Target t = parse_target("host");
  const Program p = attention(Dim(0), Dim(16), Dim(16), Dim(8), true);
  {
    Schedule s = fused(p, 8, 8);
    s["O"].loops.parallel = {"i"};
    try {
      validate(p, s, &t);
      FAIL("accepted loops with online_softmax");
    } catch (const ScheduleError& e) {
      CHECK_THAT(std::string(e.what()),
                 Contains("'O'") && Contains("online_softmax") && Contains("must be empty"));
    }
  }
  {
    Schedule s = fused(p, 8, 8);
    s["O_scores"].online_softmax = OnlineSoftmax{8, 8};
    try {
      validate(p, s, &t);
      FAIL("accepted online_softmax on the score contraction");
    } catch (const ScheduleError& e) {
      CHECK_THAT(std::string(e.what()),
                 Contains("'O_scores'") && Contains("online_softmax") && Contains("softmax"));
    }
  }
  {
    Schedule s = fused(p, 8, 8);
    s["O"].online_softmax->rows = 0;
    CHECK_THROWS_AS(validate(p, s, &t), ScheduleError);
  }
}
