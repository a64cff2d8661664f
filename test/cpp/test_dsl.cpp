// DSL: construction, validation errors, JSON round trips, the reference interpreter.
#include <catch2/catch.hpp>

#include <limits>
#include <regex>

#include "dsl/Analysis.h"
#include "dsl/Interpreter.h"
#include "dsl/ProgramJson.h"
#include "dsl/Workloads.h"
#include "dsl/ops/Ops.h"

using namespace pto;
using Catch::Matchers::Contains;

TEST_CASE("element definitions build a validated program", "[dsl]") {
  Program p("mm");
  const Tensor a = p.input("A", {4, 3});
  const Tensor b = p.input("B", {3, 5});
  const Expr i = var("i"), j = var("j"), r = var("r");
  const Tensor c = p.define_reduce("C", {"i", "j"}, {4, 5}, ReduceOp::Sum, {{"r", 3}}, a(i, r) * b(r, j),
                                   OpKind::Contraction, "matmul");
  CHECK(c.shape() == Shape{4, 5});
  CHECK(p.outputs() == std::vector<std::string>{"C"});
  CHECK_THAT(p.str(), Contains("C(i, j): f32[4, 5] = sum[r < 3]((A(i, r) * B(r, j)))"));
  CHECK(program_flops(p) == 2.0 * 4 * 5 * 3);
}

TEST_CASE("definition errors name the stage and the bad value", "[dsl][errors]") {
  Program p("bad");
  const Tensor a = p.input("A", {4, 3});
  CHECK_THROWS_WITH(p.define("X", {"i"}, {4}, a(var("i"), var("q"))), Contains("variable 'q' is not bound"));
  CHECK_THROWS_AS(a(var("i")), ShapeError);
  CHECK_THROWS_WITH(p.define("Y", {"i"}, {4}, access("nope", {var("i")}, DType::F32)),
                    Contains("reads unknown tensor 'nope'"));
  CHECK_THROWS_WITH(p.define("A", {"i"}, {4}, Expr(1.0)), Contains("a tensor of that name exists"));
  CHECK_THROWS_WITH(p.input("Z", {4, 0}), Contains("has size 0"));
  CHECK_THROWS_WITH(p.input("W", {-2}), Contains("sizes must be positive"));
  CHECK_THROWS_WITH(p.define("V", {"i", "i"}, {4, 4}, Expr(1.0)), Contains("used twice"));
  CHECK_THROWS_AS(p.define("U", {"i"}, {4}, access("A", {var("i"), var("i")}, DType::I32)), DTypeError);
}

TEST_CASE("matmul rejects mismatched inner dimensions", "[dsl][errors]") {
  Program p("mm");
  const Tensor a = p.input("A", {4, 3});
  const Tensor b = p.input("B", {5, 6});
  CHECK_THROWS_AS(ops::matmul(a, b), ShapeError);
  CHECK_THROWS_WITH(ops::matmul(a, b), Contains("inner dimensions differ") && Contains("'A' [4, 3] has 3 columns") &&
                                           Contains("'B' [5, 6] has 5 rows"));
  const Tensor s = p.input("S", {Dim::symbol("n"), 3});
  const Tensor t = p.input("T", {Dim::symbol("m"), 2});
  CHECK_THROWS_WITH(ops::matmul(s, t), Contains("inner dimensions differ"));
}

TEST_CASE("broadcasting follows numpy and rejects conflicts", "[dsl]") {
  CHECK(ops::broadcast_shapes("add", {4, 1, 3}, {5, 1}) == Shape{4, 5, 3});
  CHECK(ops::broadcast_shapes("add", {Dim::symbol("n"), 1}, {1, 7}) == Shape{Dim::symbol("n"), 7});
  CHECK_THROWS_WITH(ops::broadcast_shapes("add", {4, 3}, {5, 3}), Contains("add: shapes [4, 3] and [5, 3] do not broadcast"));
  CHECK_THROWS_AS(ops::broadcast_shapes("mul", {Dim::symbol("a")}, {Dim::symbol("b")}), ShapeError);
}

TEST_CASE("every workload round-trips through JSON unchanged", "[dsl][json]") {
  for (const auto& w : workloads()) {
    // Symbolic where the workload allows it (convolutions need static spatial dims).
    Program p = make_workload(w.name);
    try {
      p = make_workload(w.name, {{w.defaults.begin()->first, 0}});
    } catch (const ShapeError&) {
    }
    const auto j = program_to_json(p);
    const Program q = program_from_json(j);
    CHECK(program_to_json(q) == j);
    CHECK(q.str() == p.str());
    CHECK(program_fingerprint(q) == program_fingerprint(p));
  }
}

// JSON has no Inf or NaN: a max pool's -inf padding (and any non-finite
// constant) is written as a string and read back as the same value.
TEST_CASE("non-finite constants round-trip through program JSON", "[dsl][json]") {
  Program p("nonfinite");
  const Tensor x = p.input("X", {1, 2, 6, 6});
  p.output(ops::max_pool2d(x, {{3, 3}, {2, 2}, {1, 1}}, "pool"));
  p.output(p.define("weird", {"i"}, {3},
                    select(var("i") == 0, make_const(std::numeric_limits<double>::infinity(), DType::F32),
                           select(var("i") == 1, make_const(std::numeric_limits<double>::quiet_NaN(), DType::F32),
                                  make_const(-0.5, DType::F32))),
                    OpKind::Elementwise, "const"));
  const std::string j = program_to_json_string(p);
  CHECK_THAT(j, Contains("\"-inf\""));
  CHECK_THAT(j, Contains("\"nan\""));
  const Program q = program_from_json_string(j);
  CHECK(program_to_json_string(q) == j);
  CHECK(q.str() == p.str());
  CHECK_THROWS_WITH(program_from_json_string(std::regex_replace(j, std::regex("\"-inf\""), "\"minus\"")),
                    Contains("const value must be a number or one of"));
}

TEST_CASE("hostile program JSON gives DefinitionError, never a crash", "[dsl][json][errors]") {
  const Program p = make_workload("matmul_bias_relu", {{"M", 8}, {"N", 8}, {"K", 8}});
  const std::string good = program_to_json_string(p);
  CHECK_THROWS_AS(program_from_json_string("{"), DefinitionError);
  CHECK_THROWS_AS(program_from_json_string("[]"), DefinitionError);
  CHECK_THROWS_AS(program_from_json_string(R"({"schema": 1})"), DefinitionError);
  CHECK_THROWS_AS(program_from_json_string(R"({"schema": 99, "name": "x", "inputs": [], "stages": []})"), DefinitionError);
  // Flip every character in turn: each result either parses to a valid program or throws a pto::Error.
  int rejected = 0;
  for (size_t i = 0; i < good.size(); i += 3) {
    std::string bad = good;
    bad[i] = static_cast<char>(bad[i] ^ 0x15);
    try {
      program_from_json_string(bad);
    } catch (const Error&) {
      ++rejected;
    }
  }
  CHECK(rejected > 0);
  // Deep nesting is refused, not a stack overflow.
  std::string deep = R"({"k":"var","n":"i"})";
  for (int i = 0; i < 5000; ++i) deep = R"({"k":"unary","op":"neg","t":"i32","a":)" + deep + "}";
  CHECK_THROWS_WITH(expr_from_json(nlohmann::json::parse(deep, nullptr, true, false)), Contains("nested too deeply"));
}

TEST_CASE("the interpreter matches a hand-written float64 loop", "[dsl][reference]") {
  const Program p = make_workload("matmul_bias_relu", {{"M", 5}, {"N", 7}, {"K", 3}});
  HostTensor a{{5, 3}, {}}, b{{3, 7}, {}}, bias{{7}, {}};
  for (int i = 0; i < 15; ++i) a.data.push_back(i * 0.25 - 2);
  for (int i = 0; i < 21; ++i) b.data.push_back(1.5 - i * 0.125);
  for (int i = 0; i < 7; ++i) bias.data.push_back(i - 3.0);
  const auto out = interpret(p, {{"A", a}, {"B", b}, {"bias", bias}}).at("out");
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 7; ++j) {
      double acc = bias.data[j];
      for (int k = 0; k < 3; ++k) acc += a.data[i * 3 + k] * b.data[k * 7 + j];
      CHECK(out.data[i * 7 + j] == std::max(0.0, acc));
    }
}

TEST_CASE("minus_row_max: a value minus its own row's max, nothing else", "[dsl][analysis]") {
  Program p("sm");
  const Tensor x = p.input("X", {4, 50});
  p.output(ops::softmax(x, -1, "y"));
  CHECK(minus_row_max(p, p.stage("y_exp").value.as<UnaryNode>()->a));  // exp(X - max X)
  const Expr xi = x(var("i"), var("j"));
  // A max over part of the row, of another tensor, or read at another row.
  const Tensor part = p.define_reduce("part", {"i"}, {4}, ReduceOp::Max, {{"r", Dim(10)}}, x(var("i"), var("r")));
  const Tensor y = p.input("Z", {4, 50});
  const Tensor other = p.define_reduce("other", {"i"}, {4}, ReduceOp::Max, {{"r", Dim(50)}}, y(var("i"), var("r")));
  const Tensor full = p.define_reduce("full", {"i"}, {4}, ReduceOp::Max, {{"r", Dim(50)}}, x(var("i"), var("r")));
  const Tensor sum = p.define_reduce("sum", {"i"}, {4}, ReduceOp::Sum, {{"r", Dim(50)}}, x(var("i"), var("r")));
  CHECK(minus_row_max(p, xi - full(var("i"))));
  CHECK_FALSE(minus_row_max(p, xi - part(var("i"))));
  CHECK_FALSE(minus_row_max(p, xi - other(var("i"))));
  CHECK_FALSE(minus_row_max(p, xi - sum(var("i"))));
  CHECK_FALSE(minus_row_max(p, xi - full(var("j") % 4)));
  CHECK_FALSE(minus_row_max(p, full(var("i")) - xi));
  CHECK_FALSE(minus_row_max(p, xi + full(var("i"))));
}

TEST_CASE("FLOP counts are the definition's arithmetic, not index math or padding guards",
          "[dsl]") {
  // A padded, strided, grouped convolution: 2*N*O*OH*OW*(C/groups)*KH*KW, the
  // count convolution benchmarks use (the bounds test of the padding and the
  // index arithmetic of the window are not work).
  Program p("conv");
  const int N = 2, C = 8, H = 13, W = 11, O = 12, K = 3, groups = 4;
  const Tensor x = p.input("x", {N, C, H, W});
  const Tensor w = p.input("w", {O, C / groups, K, K});
  ops::conv2d(x, w, Tensor{}, {2, 2}, {1, 1}, {1, 1}, groups, "y");
  const int OH = (H + 2 - K) / 2 + 1, OW = (W + 2 - K) / 2 + 1;
  CHECK(program_flops(p) == 2.0 * N * O * OH * OW * (C / groups) * K * K);
  // A transpose or a pad moves values and counts nothing; relu counts one
  // comparison per element.
  Program q("moves");
  const Tensor a = q.input("a", {5, 7});
  ops::relu(ops::transpose(a, {1, 0}));
  CHECK(program_flops(q) == 5.0 * 7);
}
