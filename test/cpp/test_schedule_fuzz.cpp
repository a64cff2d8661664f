// Fuzzing schedule JSON: >= 10,000 mutated schedules per run through parse,
// JSON round trip, validate and explain, against several programs. Zero
// crashes and every failure a pto::Error (see ScheduleFuzz.h for the
// mutations). The same fuzzer runs in the ASan + UBSan build through the
// `fuzz_schedule` executable (scripts/fuzz_sanitized.sh).
#include <catch2/catch.hpp>

#include "ScheduleFuzz.h"

using namespace pto;

TEST_CASE("10,000 mutated schedules: accepted or rejected with a pto::Error, never a crash", "[schedule][fuzz]") {
  const fuzz::FuzzReport r = fuzz::fuzz_schedules(10000, 4242);
  INFO("cases " << r.cases << ", parsed " << r.parsed << ", valid " << r.valid << ", explained " << r.explained
                << ", rejected " << r.rejected);
  INFO("first non-pto::Error: " << r.first_foreign);
  CHECK(r.cases == 10000);
  CHECK(r.foreign == 0);
  CHECK(r.rejected + r.explained == r.cases);
  // The mutations reach every layer: many parse, some of those validate.
  CHECK(r.parsed > r.cases / 5);
  CHECK(r.valid > r.cases / 50);
  CHECK(r.parsed - r.valid > r.cases / 50);
}

TEST_CASE("hostile schedule JSON gives typed errors", "[schedule][fuzz][errors]") {
  using Catch::Matchers::Contains;
  // 100,000 nested arrays: rejected by depth before anything recurses.
  const std::string deep = "{\"schema\": 1, \"stages\": {\"out\": {\"tile\": {\"i0\": " + std::string(100000, '[') +
                           std::string(100000, ']') + "}}}}";
  CHECK_THROWS_WITH(schedule_from_json_string(deep), Contains("nested deeper than"));
  nlohmann::json v = 1;
  for (int k = 0; k < 100000; ++k) v = nlohmann::json::array({std::move(v)});
  CHECK_THROWS_AS(schedule_from_json({{"schema", 1}, {"stages", {{"out", {{"tile", {{"i0", std::move(v)}}}}}}}}),
                  ScheduleError);
  // An empty vectorize loop is an error, not "no vectorize" with a stray width.
  CHECK_THROWS_WITH(schedule_from_json_string(R"({"schema":1,"stages":{"Y":{"vectorize":{"loop":"","width":4}}}})"),
                    Contains("stages.Y.vectorize: must name a loop"));
  // Unsigned numbers past int64 are reported as they were written.
  CHECK_THROWS_WITH(schedule_from_json_string(R"({"schema": 1, "options": {"opt_level": 18446744073709551615}})"),
                    Contains("18446744073709551615") && Contains("outside [0, 3]"));
  // Invalid UTF-8 in a name (a JSON value built in C++) fails as a ScheduleError, also when printed.
  Schedule s;
  s["\xff\xfe"].compute.kind = Placement::Kind::Root;
  CHECK_THROWS_AS(schedule_to_json_string(s), ScheduleError);
  // Huge tile sizes on a symbolic dim do not overflow lowering's int loops.
  const Program p = make_workload("matmul", {{"M", 0}, {"N", 32}, {"K", 8}});
  CHECK_THROWS_WITH(validate(p, schedule_from_json_string(R"({"schema":1,"stages":{"C":{"tile":{"i":[1099511627776]}}}})")),
                    Contains("tile 1099511627776 on dim 'i'"));
}
