// Schedules: JSON round trip, strict parsing, validation errors, explain.
#include <catch2/catch.hpp>

#include "dsl/Workloads.h"
#include "dsl/ops/Ops.h"
#include "schedules/Explain.h"
#include "schedules/ScheduleJson.h"
#include "schedules/Validate.h"
#include "schedules/defaults/Defaults.h"

using namespace pto;
using Catch::Matchers::Contains;

namespace {
Program mbr(int64_t m = 64, int64_t n = 64, int64_t k = 32) {
  return make_workload("matmul_bias_relu", {{"M", m}, {"N", n}, {"K", k}});
}
Schedule parse(const std::string& s) { return schedule_from_json_string(s); }
}  // namespace

TEST_CASE("a full schedule round-trips through JSON", "[schedule][json]") {
  Schedule s;
  s.options.opt_level = 3;
  s.options.bounds_checks = false;
  StageSchedule& o = s["out"];
  o.loops.tile = {{"i0", {32, 8}}, {"i1", {16}}};
  o.loops.order = {"i0_o", "i1_o", "i0_m", "i0_i", "i1_i"};
  o.loops.vectorize = "i1_i";
  o.loops.vector_width = 16;
  o.loops.unroll = {{"i0_i", 0}};
  o.loops.parallel = {"i0_o"};
  StageSchedule& m = s["mm"];
  m.compute = {Placement::Kind::At, "out", "i1_o"};
  m.store = Placement{Placement::Kind::At, "out", "i0_o"};
  m.update = LoopSchedule{};
  m.update->order = {"k", "i", "j"};
  m.precision.compute = DType::F32;
  m.pipeline.prefetch = {{"B", "k", 2}};
  m.cache = {{"A", "k", true}};
  const std::string text = schedule_to_json_string(s);
  const Schedule back = parse(text);
  CHECK(back == s);
  CHECK(schedule_to_json_string(back) == text);
}

TEST_CASE("schedule JSON is parsed strictly", "[schedule][json][errors]") {
  CHECK_THROWS_WITH(parse("{"), Contains("does not parse"));
  CHECK_THROWS_WITH(parse(R"({"schema": 1, "stagez": {}})"), Contains("unknown key 'stagez'"));
  CHECK_THROWS_WITH(parse(R"({"schema": 2})"), Contains("version 2 is not supported"));
  CHECK_THROWS_WITH(parse(R"({"schema": 1, "stages": {"C": {"tile": {"i": [0]}}}})"),
                    Contains("stages.C.tile.i[0]") && Contains("outside [1,"));
  CHECK_THROWS_WITH(parse(R"({"schema": 1, "stages": {"C": {"tile": {"i": "big"}}}})"), Contains("stages.C.tile.i"));
  CHECK_THROWS_WITH(parse(R"({"schema": 1, "stages": {"C": {"compute": "sideways"}}})"),
                    Contains("'sideways' is not a placement"));
  CHECK_THROWS_WITH(parse(R"({"schema": 1, "stages": {"C": {"vectorise": "j"}}})"), Contains("unknown key 'vectorise'"));
  CHECK_THROWS_WITH(parse(R"({"schema": 1, "stages": {"C": {"precision": {"storage": "f12"}}}})"),
                    Contains("unknown dtype 'f12'"));
  CHECK_THROWS_WITH(parse(R"({"schema": 1, "stages": {"C": {"pipeline": {"ring_buffer": 9}}}})"),
                    Contains("outside [0, 8]"));
}

TEST_CASE("validation names the stage, the directive and the valid choices", "[schedule][errors]") {
  const Program p = mbr(64, 64, 32);
  const Target t = parse_target("host");
  auto bad = [&](const std::string& json) { return [=, &p, &t] { validate(p, parse(json), &t); }; };
  CHECK_THROWS_WITH(bad(R"({"schema":1,"stages":{"C":{}}})")(), Contains("unknown stage 'C'") && Contains("mm, biased, out"));
  CHECK_THROWS_WITH(bad(R"({"schema":1,"stages":{"A":{}}})")(), Contains("an input"));
  CHECK_THROWS_WITH(bad(R"({"schema":1,"stages":{"out":{"tile":{"i1":[96]}}}})")(),
                    Contains("stage 'out': tile 96 on dim 'i1' exceeds extent 64"));
  CHECK_THROWS_WITH(bad(R"({"schema":1,"stages":{"out":{"tile":{"q":[4]}}}})")(), Contains("unknown dim 'q'; dims: i0, i1"));
  CHECK_THROWS_WITH(bad(R"({"schema":1,"stages":{"out":{"tile":{"i0":[16,6]}}}})")(), Contains("must be smaller than and divide"));
  CHECK_THROWS_WITH(bad(R"({"schema":1,"stages":{"out":{"order":["i0_o"]}}})")(), Contains("unknown loop 'i0_o'; loops: i0, i1"));
  CHECK_THROWS_WITH(bad(R"({"schema":1,"stages":{"out":{"vectorize":{"loop":"x","width":8}}}})")(), Contains("vectorize names unknown loop 'x'"));
  CHECK_THROWS_WITH(bad(R"({"schema":1,"stages":{"out":{"vectorize":{"loop":"i1","width":7}}}})")(), Contains("does not fit target"));
  CHECK_THROWS_WITH(bad(R"({"schema":1,"stages":{"out":{"compute":"inline"}}})")(), Contains("is an output and cannot be computed inline"));
  CHECK_THROWS_WITH(bad(R"({"schema":1,"stages":{"mm":{"compute":"inline"}}})")(), Contains("is a reduction"));
  CHECK_THROWS_WITH(bad(R"({"schema":1,"stages":{"mm":{"compute":{"at":"out","loop":"i9"}}}})")(),
                    Contains("at loop 'i9' of 'out', which has no such loop; its loops: i0, i1"));
  CHECK_THROWS_WITH(bad(R"({"schema":1,"stages":{"biased":{"compute":{"at":"mm","loop":"k"}}}})")(), Contains("which does not consume it"));
  CHECK_THROWS_WITH(bad(R"({"schema":1,"stages":{"mm":{"update":{"parallel":["k"]}}}})")(), Contains("would race"));
  CHECK_THROWS_WITH(bad(R"({"schema":1,"stages":{"out":{"update":{}}}})")(), Contains("has no reduction"));
  CHECK_THROWS_WITH(bad(R"({"schema":1,"stages":{"out":{"precision":{"storage":"bf16"}}}})")(), Contains("is an output"));
  CHECK_THROWS_WITH(bad(R"({"schema":1,"stages":{"out":{"device":"tpu"}}})")(), Contains("unknown device 'tpu'"));
  CHECK_THROWS_WITH(bad(R"({"schema":1,"stages":{"out":{"device":"cuda"}}})")(), Contains("is not part of target"));
  // A tile of 0 built in C++ (bypassing JSON) is caught too.
  Schedule s;
  s["out"].loops.tile["i0"] = {0};
  CHECK_THROWS_WITH(validate(p, s, &t), Contains("tile 0 on dim 'i0' must be at least 1"));
}

TEST_CASE("default schedules validate and explain", "[schedule][explain]") {
  const Program p = mbr(256, 256, 64);
  const Target t = parse_target("host");
  const Schedule s = default_schedule(p, t);
  REQUIRE_NOTHROW(validate(p, s, &t));
  const std::string text = explain(p, s, &t);
  // Row blocks, one per core (register_tile), each over every column tile.
  CHECK_THAT(text, Contains("parallel for i0_o"));
  CHECK_THAT(text, Contains("for i1_o"));
  CHECK_THAT(text, Contains("mm: {\"at\":\"out\",\"loop\":\"i0_m\"}"));
  CHECK_THAT(text, Contains("[inlined: biased]"));
  CHECK_THAT(text, Contains("mm(i, j) = sum(mm(i, j), (A(i, k) * B(k, j)))"));
  CHECK_THAT(explain(p, plain_schedule(p), &t), Contains("mm: \"root\", storage f32"));
}

TEST_CASE("default elementwise stages: a block of rows per core, no block recomputed over 1/8 of the work",
          "[schedule][defaults]") {
  Target t = parse_target("host");
  t.cores = 2;
  const auto tile = [&](int64_t rows) -> int64_t {
    Program p("relu");
    p.output(ops::relu(p.input("X", {rows, 100003}), "y"));
    const Schedule s = default_schedule(p, t);
    const auto it = s.find("y")->loops.tile.find("i0");
    return it == s.find("y")->loops.tile.end() ? 0 : it->second.at(0);
  };
  CHECK(tile(1000) == 500);
  CHECK(tile(9) == 5);  // 10 computed for 9: 1/9 extra
  CHECK(tile(7) == 1);  // blocks of 4 would compute 8 for 7
  CHECK(tile(3) == 1);
}
