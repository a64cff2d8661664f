// Differential tests: many random VALID schedules per program, each JIT-run
// and compared with the float64 interpreter within the tolerance of the
// precision the schedule uses. This is the main guard against lowering bugs:
// a schedule that validates must compile and give the reference answer.
//
// CI runs a few schedules per program (PTO_DIFF_TRIALS, default 6); a larger
// run: `PTO_DIFF_TRIALS=200 build/bin/pto_tests "[differential]"`;
// PTO_DIFF_SEED picks another random stream.
//
// Tolerances. Inputs are uniform in [-1, 1]; the second operand of every
// contraction ("weights") is scaled by 1/fan_in so that sums of absolute
// products stay <= 1 and errors do not grow with the sizes. With u the largest
// unit roundoff the schedule uses (2^-p for a p-bit significand: bf16 2^-8,
// f16 2^-11, f32 2^-24; see max_unit_roundoff), every rounding moves a value
// by at most u relative. Each case states a first-order bound G*u on the
// absolute (or relative) error by counting roundings along its longest chain;
// the f32 baseline (1e-5, as in test_jit.cpp) covers f32 re-association.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <functional>

#include "Helpers.h"
#include "dsl/Workloads.h"
#include "schedules/RandomSchedule.h"
#include "schedules/ScheduleJson.h"
#include "schedules/Validate.h"

using namespace pto;
using namespace pto::test;

namespace {

struct Tolerance {
  double atol, rtol;
};

struct DiffCase {
  std::string workload;
  std::map<std::string, int64_t> sizes;
  std::map<std::string, double> weight_scale;        // input -> 1/fan_in
  std::function<Tolerance(double u)> tolerance;        // from the unit roundoff used
};

std::map<std::string, HostTensor> make_inputs(const Program& p, const DiffCase& c, std::mt19937& rng) {
  std::map<std::string, HostTensor> in;
  for (const auto& i : p.inputs()) {
    std::vector<int64_t> shape;
    for (const Dim& d : i.shape) shape.push_back(d.value);
    const double s = c.weight_scale.count(i.name) ? c.weight_scale.at(i.name) : 1.0;
    in[i.name] = random_tensor(shape, rng, -s, s);
  }
  return in;
}

// Runs `trials` random valid schedules of case `c`; returns how many used a narrow type.
int run_differential(const DiffCase& c, int trials) {
  const Target t = parse_target("host");
  const Program p = make_workload(c.workload, c.sizes);
  std::mt19937 data_rng(11);
  const auto in = make_inputs(p, c, data_rng);
  const auto ref = interpret(p, in);
  const auto outs = p.outputs();
  std::mt19937_64 rng(static_cast<uint64_t>(env_int("PTO_DIFF_SEED", 2024)) * 7919 + std::hash<std::string>{}(c.workload) % 1000);
  int narrow = 0;
  for (int trial = 0; trial < trials; ++trial) {
    const Schedule s = random_schedule(p, t, rng);
    const double u = max_unit_roundoff(p, s);
    narrow += u > std::ldexp(1.0, -24);
    const Tolerance tol = c.tolerance(u);
    INFO("workload " << c.workload << ", trial " << trial << ", unit roundoff " << u << ", schedule:\n"
                     << schedule_to_json_string(s));
    std::vector<HostTensor> got;
    try {
      got = run_f32(Kernel(p, s, t), in);
    } catch (const Error& e) {
      FAIL("a valid schedule failed: " << e.what());
    }
    for (size_t i = 0; i < outs.size(); ++i) {
      INFO("output " << outs[i] << " atol " << tol.atol << " rtol " << tol.rtol);
      CHECK(tolerance_ratio(got[i], ref.at(outs[i]), tol.rtol, tol.atol) <= 1.0);
    }
  }
  return narrow;
}

int trials() { return env_int("PTO_DIFF_TRIALS", 6); }

// f32 baseline: re-associated f32 sums and f32 transcendental functions.
constexpr double kF32Atol = 1e-5, kF32Rtol = 1e-5;

}  // namespace

TEST_CASE("differential: matmul", "[differential]") {
  // Per product: 2 operand casts + the product = 3 roundings (|a b| summed <= 1),
  // f32 accumulation, then 1 storage rounding of |C| <= 1: G = 4.
  run_differential({"matmul", {{"M", 13}, {"N", 40}, {"K", 16}}, {{"B", 1.0 / 16}},
                    [](double u) { return Tolerance{4 * u + kF32Atol, kF32Rtol}; }},
                   trials());
}

TEST_CASE("differential: batched matmul", "[differential]") {
  // As matmul, per batch: G = 4.
  run_differential({"batched_matmul", {{"Bt", 3}, {"M", 9}, {"N", 33}, {"K", 12}}, {{"B", 1.0 / 12}},
                    [](double u) { return Tolerance{4 * u + kF32Atol, kF32Rtol}; }},
                   trials());
}

TEST_CASE("differential: matmul + bias + relu", "[differential]") {
  // mm as matmul (4u, |mm| <= 1); the bias add casts both operands and rounds
  // the sum (3 roundings of values <= 2: 6u); relu is exact; the stored output
  // is f32. 10u, with 20% margin for second-order terms: G = 12.
  run_differential({"matmul_bias_relu", {{"M", 13}, {"N", 40}, {"K", 16}}, {{"B", 1.0 / 16}},
                    [](double u) { return Tolerance{12 * u + kF32Atol, kF32Rtol}; }},
                   trials());
}

TEST_CASE("differential: conv2d + bias + relu", "[differential]") {
  // A contraction over C*3*3 = 27 terms with weights scaled 1/27, then bias and
  // relu: the same chain as matmul + bias + relu, G = 12.
  run_differential({"conv2d", {{"N", 1}, {"C", 3}, {"H", 8}, {"W", 10}, {"O", 5}}, {{"Wt", 1.0 / 27}},
                    [](double u) { return Tolerance{12 * u + kF32Atol, kF32Rtol}; }},
                   trials());
}

TEST_CASE("differential: conv2d_nhwc + bias + relu", "[differential]") {
  // As conv2d: C*3*3 = 27 terms with weights scaled 1/27, then bias and relu
  // (the padded input is an exact copy): G = 12.
  run_differential({"conv2d_nhwc", {{"N", 1}, {"C", 3}, {"H", 8}, {"W", 10}, {"O", 5}}, {{"Wt", 1.0 / 27}},
                    [](double u) { return Tolerance{12 * u + kF32Atol, kF32Rtol}; }},
                   trials());
}

TEST_CASE("differential: conv2d_nhwc with blocked-pair weights (dot_pairs)", "[differential][dot_pairs]") {
  // As conv2d_nhwc, C*3*3 = 36 terms scaled 1/36, G = 12. Random schedules
  // sum the channel pairs per lane (dot_pairs) in about one trial in seven
  // (it needs a vectorized update), hence more trials.
  run_differential({"conv2d_nhwc", {{"N", 1}, {"C", 4}, {"H", 7}, {"W", 9}, {"O", 32}, {"PAIRS", 1}}, {{"Wt", 1.0 / 36}},
                    [](double u) { return Tolerance{12 * u + kF32Atol, kF32Rtol}; }},
                   3 * trials());
}

TEST_CASE("differential: softmax", "[differential]") {
  // exp's argument x - max carries 2 casts + 1 subtraction (<= 4u absolute on
  // |x - max| <= 2), so exp is off by 4u + its own rounding + storage = 6u
  // relative; the f32 sum of positive terms keeps 6u plus its storage (7u);
  // the division casts both (2u) and rounds (u): 16u relative, G = 20 with margin.
  run_differential({"softmax", {{"R", 5}, {"C", 37}}, {},
                    [](double u) { return Tolerance{1e-6, 20 * u + kF32Rtol}; }},
                   trials());
}

TEST_CASE("differential: layer_norm", "[differential]") {
  // mean: 3 roundings per term (x, 1/C, product) -> 3u; x - mean: 5u absolute
  // (|x| <= 1); var: relative 2 * 5u / |x - mean| averaged, about 12u; 1/sqrt:
  // half of that plus 3 roundings (9u relative, var of uniform rows >= 0.1 keeps
  // 1/std <= 3.2); y = centered * inv_std * gamma + beta: 3.2 * 5u + 9u|y| + 4
  // roundings: under 40u (1 + |y|).
  run_differential({"layer_norm", {{"R", 5}, {"C", 33}}, {},
                    [](double u) { return Tolerance{40 * u + kF32Atol, 40 * u + kF32Rtol}; }},
                   trials());
}

TEST_CASE("differential: attention", "[differential]") {
  // scores = Q K^T / sqrt(D): D products of |q k| <= 1 times the scale, 5
  // roundings each -> 5u sqrt(D) absolute on |scores| <= sqrt(D). softmax turns
  // an argument error d into <= 2d relative on probs plus its own 20u; O sums
  // probs (sum 1) times |v| <= 1 with 4 more roundings: (10 sqrt(D) + 24) u.
  const int64_t d = 8;
  run_differential({"attention", {{"S", 13}, {"D", d}}, {},
                    [d](double u) { return Tolerance{(10 * std::sqrt(double(d)) + 24) * u + kF32Atol, kF32Rtol}; }},
                   trials());
}

TEST_CASE("differential: mlp block", "[differential]") {
  // fc1 = X W1^T + b1 with W1 scaled 1/H: as matmul + bias, 10u on |fc1| <= 2.
  // gelu is 1.13-Lipschitz and rounds ~6 times on |act| <= 2: 1.13*10u + 12u = 24u.
  // fc2 with W2 scaled 1/F passes 24u through, adds 4u*2 (products of |act| <= 2)
  // and the bias add 3u*3: 41u, G = 48 with margin.
  run_differential({"mlp", {{"S", 5}, {"H", 16}, {"F", 24}}, {{"W1", 1.0 / 16}, {"W2", 1.0 / 24}},
                    [](double u) { return Tolerance{48 * u + kF32Atol, kF32Rtol}; }},
                   trials());
  // Widths that are not multiples of the vector: the transposing pack of W
  // (16 x 16 blocks in registers) has guarded tails in both dims.
  run_differential({"mlp", {{"S", 7}, {"H", 37}, {"F", 45}}, {{"W1", 1.0 / 37}, {"W2", 1.0 / 45}},
                    [](double u) { return Tolerance{48 * u + kF32Atol, kF32Rtol}; }},
                   trials());
}

TEST_CASE("the random schedule generator draws narrow precisions and only valid schedules", "[differential][schedule]") {
  const Target t = parse_target("host");
  const Program p = make_workload("mlp", {{"S", 5}, {"H", 16}, {"F", 24}});
  std::mt19937_64 rng(5);
  int narrow = 0, at = 0, inl = 0;
  for (int i = 0; i < 200; ++i) {
    const Schedule s = random_schedule(p, t, rng);
    REQUIRE_NOTHROW(validate(p, s, &t));
    narrow += max_unit_roundoff(p, s) > std::ldexp(1.0, -24);
    for (const auto& [n, ss] : s.stages) {
      at += ss.compute.kind == Placement::Kind::At;
      inl += ss.compute.kind == Placement::Kind::Inline;
    }
  }
  // The generator exercises every kind of directive, not only the safe ones.
  CHECK(narrow > 20);
  CHECK(at > 20);
  CHECK(inl > 20);
}

TEST_CASE("the random schedule generator draws dot_pairs where operands are in pairs", "[differential][schedule][dot_pairs]") {
  const Target t = parse_target("host");
  const Program p = make_workload("conv2d_nhwc", {{"C", 4}, {"H", 7}, {"W", 9}, {"O", 32}, {"PAIRS", 1}});
  std::mt19937_64 rng(9);
  int pairs = 0;
  for (int i = 0; i < 200; ++i) {
    const Schedule s = random_schedule(p, t, rng);
    REQUIRE_NOTHROW(validate(p, s, &t));
    for (const auto& [n, ss] : s.stages) pairs += !ss.dot_pairs.empty();
  }
  CHECK(pairs > 15);
}
