// The pad_lanes directive (StageSchedule::pad_lanes, schedules/directives/
// PadLanes.h): an accumulator tile computed in whole vectors past a dim's
// extent. Numbers against float64 at extents under, past and between
// vectors; the checks name the stage, the directive, the value and what is
// valid; JSON round trip; explain; the accumulator's size and init vectors.
#include <catch2/catch.hpp>
#include <regex>

#include "Helpers.h"
#include "dsl/ops/Ops.h"
#include "schedules/Explain.h"
#include "schedules/ScheduleJson.h"
#include "schedules/Validate.h"
#include "test/cpp/LoweredStatement.h"

using namespace pto;
using namespace pto::test;
using Catch::Matchers::Contains;

namespace {

Program matmul_program(int64_t m, int64_t k, int64_t n) {
  Program p("mm");
  p.output(ops::matmul(p.input("A", {m, k}), p.input("B", {k, n}), "mm"));
  return p;
}

// 6 x 1-vector register tiles over columns j, padded, B copied per column tile.
Schedule padded(int lanes, int64_t n) {
  Schedule s;
  StageSchedule& ms = s["mm"];
  ms.loops.tile["i"] = {6};
  ms.loops.tile["j"] = {std::min<int64_t>(n, lanes)};
  ms.loops.order = {"j_o", "i_o", "i_i", "j_i"};
  ms.loops.parallel = {"i_o"};
  ms.accumulator_at = "i_o";
  LoopSchedule up;
  up.order = {"k", "i", "j"};
  up.vectorize = "j";
  up.vector_width = lanes;
  ms.update = up;
  ms.cache.push_back({"B", "j_o", false});
  ms.pad_lanes = "j";
  return s;
}

}  // namespace

TEST_CASE("pad_lanes: padded accumulator tiles match float64", "[pad_lanes]") {
  const int lanes = host_target().vector_lanes(DType::F32);
  std::mt19937 rng(21);
  // Column extents: under a vector, one past, between two; K of 1 and prime.
  for (const int64_t n : {int64_t{1}, int64_t{lanes - 1}, int64_t{lanes + 1}, int64_t{2 * lanes - 3}})
    for (const int64_t k : {int64_t{1}, int64_t{37}}) {
      INFO("[25, " << k << "] @ [" << k << ", " << n << "]");
      const Program p = matmul_program(25, k, n);
      Schedule s = padded(lanes, n);
      if (n > lanes) s["mm"].loops.tile["j"] = {lanes};  // the last column tile a part vector
      if (n % lanes == 0) continue;
      validate(p, s, &host_target());
      const Kernel kern(p, s, host_target());
      const std::map<std::string, HostTensor> in = {{"A", small_integers({25, k}, rng)},
                                                    {"B", small_integers({k, n}, rng)}};
      CHECK(tolerance_ratio(run_f32(kern, in)[0], interpret(p, in).at("mm"), 0, 1e-9) <= 1.0);
    }
}

TEST_CASE("pad_lanes: errors name the stage, the directive and what is valid, JSON and explain",
          "[pad_lanes][errors]") {
  const int lanes = host_target().vector_lanes(DType::F32);
  if (lanes < 4) return;
  const Program p = matmul_program(25, 37, lanes - 1);
  const auto fails = [&](Schedule s, const std::string& text) {
    CHECK_THROWS_WITH(validate(p, s, &host_target()), Contains("stage 'mm': pad_lanes") && Contains(text));
  };
  Schedule s = padded(lanes, lanes - 1);
  validate(p, s, &host_target());
  CHECK(schedule_from_json_string(schedule_to_json_string(s, 2)) == s);
  CHECK_THAT(explain(p, s, &host_target()), Contains("[pad_lanes: j in whole vectors of"));
  Schedule e = s;
  e["mm"].pad_lanes = "q";
  fails(e, "not a pure var of the stage; its vars: i, j");
  e = s;
  e["mm"].cache.clear();
  fails(e, "add a cache of 'B'");
  e = s;
  e["mm"].accumulator_at.clear();
  e["mm"].cache.clear();  // a copy at a tile loop needs the tile
  e["mm"].update.reset();  // and a vector wider than the extent, too
  fails(e, "with accumulator_at");
  e = s;
  e["mm"].update->vectorize = "i";
  fails(e, "the update must vectorize 'j' itself");
  const Program whole = matmul_program(25, 37, lanes);
  Schedule w = padded(lanes, lanes);
  CHECK_THROWS_WITH(validate(whole, w, &host_target()), Contains("there is nothing to pad"));
  CHECK_THROWS_WITH(
      schedule_from_json_string(R"({"schema": 1, "stages": {"mm": {"pad_lanes": 3}}})"),
      Contains("stages.mm.pad_lanes"));
}

TEST_CASE("pad_lanes: the accumulator holds whole vectors of the tile, initialized once a vector",
          "[pad_lanes]") {
  // PadLanes vectorized the init a second time after Update.cpp had: a
  // lanes * lanes vector, an accumulator row of 256 floats for a 2-vector
  // tile (on AVX-512), memset every tile; [538, 12] @ [12, 18] 5.5 -> 4.0 us.
  const Target& t = host_target();
  const int lanes = t.vector_lanes(DType::F32);
  if (lanes < 2) return;
  const int64_t n = lanes + 2;
  const Program p = matmul_program(40, 12, n);
  Schedule s = padded(lanes, n);
  s["mm"].loops.tile["j"] = {n};
  const std::regex alloc(R"(allocate mm__acc(\$[0-9]+)?\[float32 \* ([0-9]+) \*)");
  const std::regex wide(R"(ramp\([^()]*, 1, ([0-9]+)\))");
  int allocations = 0;
  for (const std::string& line : lowered_statement(p, s, t)) {
    INFO(line);
    std::smatch m;
    if (std::regex_search(line, m, alloc)) {
      ++allocations;
      CHECK(std::stoll(m[2]) == 2 * lanes);  // the tile's columns in whole vectors
    }
    for (auto it = std::sregex_iterator(line.begin(), line.end(), wide);
         it != std::sregex_iterator(); ++it)
      CHECK(std::stoi((*it)[1]) <= lanes);
  }
  CHECK(allocations > 0);
  std::mt19937 rng(3);
  const std::map<std::string, HostTensor> in = {{"A", random_tensor({40, 12}, rng)},
                                                {"B", random_tensor({12, n}, rng)}};
  CHECK(tolerance_ratio(run_f32(Kernel(p, s, t), in)[0], interpret(p, in).at("mm"), 1e-5, 1e-5) <=
        1.0);
}
