// Every registered schedule directive (schedules/directives/): its fields
// round-trip through JSON, a bad value is a ScheduleError naming the stage
// and the directive, and every candidate it offers validates.
#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <set>

#include "ScheduleFuzz.h"
#include "schedules/directives/Directive.h"

using namespace pto;
using Catch::Matchers::Contains;

namespace {

// A schedule where `stage` has the entry `ss` and every other stage is plain.
Schedule with_stage(const Program& p, const std::string& stage, const StageSchedule& ss) {
  Schedule s = plain_schedule(p);
  s[stage] = ss;
  return s;
}

// A value of each directive that no stage of any program can take, and the
// word its error must contain. Keyed by the directive's name, so that a new
// directive without a bad value here fails the test below.
StageSchedule bad_value(std::string_view directive, const Stage& st) {
  StageSchedule ss;
  if (directive == "precision")
    ss.precision.accumulate = is_float(st.dtype) ? DType::I32 : DType::F32;
  if (directive == "compute") ss.compute = {Placement::Kind::At, "no_such_stage", "i"};
  if (directive == "accumulator_at") ss.accumulator_at = "no_such_loop";
  if (directive == "cache") ss.cache = {{"no_such_tensor", "no_such_loop", false}};
  if (directive == "loops") ss.loops.vectorize = "no_such_loop";
  if (directive == "update") ss.update = LoopSchedule{{}, {}, "no_such_loop", 0, {}, {}};
  if (directive == "skip_padding") ss.skip_padding = {"no_such_dim"};
  if (directive == "dot_pairs") ss.dot_pairs = "no_such_rvar";
  if (directive == "pad_lanes") ss.pad_lanes = "no_such_var";
  if (directive == "rfactor") ss.rfactor = RFactor{"no_such_rvar", 3};
  if (directive == "pipeline") ss.pipeline.prefetch = {{"no_such_tensor", "no_such_loop", 1}};
  if (directive == "device") ss.device = "no_such_device";
  if (directive == "specialize") ss.specialize = true;  // nothing tiled to specialize
  if (directive == "online_softmax") ss.online_softmax = OnlineSoftmax{0, 64};
  if (directive == "compute_with") ss.compute_with = ComputeWith{"no_such_stage", 16};
  if (directive == "store_in") ss.store_in = "no_such_stage";
  if (directive == "amx") ss.amx = true, ss.device = "opencl";  // tiles on the CPU only
  return ss;
}

// Directives every stage may take with any value (a flag such as fast_math,
// which only changes how the stage's expressions are lowered): no bad value.
bool takes_any_value(std::string_view directive) {
  return directive == "fast_math";
}

// Does the message name the directive: its name, one of its fields, or the
// member of the field it rejects (pipeline.prefetch)?
bool names_directive(const directives::Directive& d, const std::string& msg) {
  std::vector<std::string> words{std::string(d.name())};
  for (std::string_view f : d.fields()) words.emplace_back(f);
  if (d.name() == "pipeline") words.insert(words.end(), {"prefetch", "ring_buffer", "async"});
  for (const std::string& w : words)
    if (msg.find(w) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("every directive is registered once, with fields of its own", "[schedule][directives]") {
  std::set<std::string> names, fields;
  for (const directives::Directive* d : directives::directives()) {
    CHECK(names.insert(std::string(d->name())).second);
    for (std::string_view f : d->fields()) {
      CHECK(fields.insert(std::string(f)).second);
      CHECK(directives::directive_for_field(f) == d);
    }
  }
  CHECK(directives::directives().size() >= 10);
}

TEST_CASE("every directive: JSON round trip, errors that name it, valid candidates",
          "[schedule][directives]") {
  const Target t = parse_target("host");
  const auto programs = fuzz::fuzz_programs(t, 7);
  std::map<std::string, int> candidates_seen;
  for (const directives::Directive* d : directives::directives()) {
    INFO("directive " << d->name());
    for (const fuzz::FuzzProgram& fp : programs) {
      const Program& p = fp.program;
      INFO("program " << p.name());
      // Round trip: each seed schedule's fields of this directive print and
      // parse back to the same entry, through the directive alone.
      for (const std::string& text : fp.seeds) {
        const Schedule s = schedule_from_json_string(text);
        for (const auto& [stage, ss] : s.stages) {
          nlohmann::json j = nlohmann::json::object();
          d->print(ss, j);
          for (const auto& [k, v] : j.items()) CHECK(directives::directive_for_field(k) == d);
          StageSchedule fresh;
          d->parse(j, fresh, "stages." + stage);
          nlohmann::json again = nlohmann::json::object();
          d->print(fresh, again);
          CHECK(again == j);
        }
        CHECK(schedule_from_json_string(schedule_to_json_string(s)) == s);
      }
      for (const Stage& st : p.stages()) {
        INFO("stage " << st.name);
        // A bad value is a ScheduleError that names the stage and the directive.
        const StageSchedule bad = bad_value(d->name(), st);
        REQUIRE_FALSE((bad == StageSchedule{}) != takes_any_value(d->name()));
        if (!takes_any_value(d->name())) {
          const Schedule bs = with_stage(p, st.name, bad);
          try {
            validate(p, bs, &t);
            FAIL("accepted a bad " << d->name() << ": " << schedule_to_json_string(bs, -1));
          } catch (const ScheduleError& e) {
            const std::string msg = e.what();
            CHECK_THAT(msg, Contains("'" + st.name + "'"));
            CHECK(names_directive(*d, msg));
          }
        }
        // Every candidate, set on a plain stage, validates.
        const Schedule plain = plain_schedule(p);
        const StageSchedule base = plain.find(st.name) ? *plain.find(st.name) : StageSchedule{};
        const directives::CheckContext c{p,  plain, &t,
                                         st, base,  stage_precision(p, plain, st.name)};
        for (const StageSchedule& v : d->candidates(c)) {
          const Schedule cs = with_stage(p, st.name, v);
          INFO(schedule_to_json_string(cs, -1));
          CHECK_NOTHROW(validate(p, cs, &t));
          ++candidates_seen[std::string(d->name())];
        }
      }
    }
  }
  // Each directive that applies to these programs offers some values.
  for (const char* n : {"precision", "compute", "accumulator_at", "cache", "loops", "update",
                        "rfactor", "pipeline", "device"})
    CHECK(candidates_seen[n] > 0);
}

TEST_CASE("rfactor candidates are the factors validation accepts",
          "[schedule][directives][rfactor]") {
  const Target t = parse_target("host");
  const Program p = make_workload("softmax", {{"R", 4}, {"C", 48}});
  for (const Stage& st : p.stages()) {
    if (!st.reduce) continue;
    const auto valid = directives::rfactor_candidates(st, &t, DType::F32);
    for (int f = 1; f <= 300; ++f) {
      Schedule s = plain_schedule(p);
      s[st.name].rfactor = RFactor{st.rvars.back().name, f};
      bool ok = true;
      try {
        validate(p, s, &t);
      } catch (const ScheduleError&) {
        ok = false;
      }
      CHECK(ok == (std::find(valid.begin(), valid.end(), RFactor{st.rvars.back().name, f}) !=
                   valid.end()));
    }
  }
}
