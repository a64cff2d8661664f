// Autotuner, in-process parts: search space, strategies (determinism), cost
// model, tuning database (schema, migration, queries) and the best-schedule
// lookup the JIT path uses. The process-level parts (workers, faults, kill -9)
// are in test_tuner_measure.cpp.
#include <sqlite3.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <functional>

#include "Helpers.h"
#include "SpaceSamples.h"
#include "autotuner/CostModel.h"
#include "autotuner/Mutator.h"
#include "autotuner/SearchSpace.h"
#include "autotuner/Strategy.h"
#include "autotuner/TuningDB.h"
#include "dsl/ProgramJson.h"
#include "dsl/Workloads.h"
#include "schedules/ScheduleJson.h"
#include "schedules/Validate.h"
#include "schedules/defaults/Defaults.h"

using namespace pto;
using namespace pto::test;
using namespace pto::tuner;
using Catch::Matchers::Contains;

namespace {

std::string temp_path(const std::string& name) {
  const auto p = std::filesystem::temp_directory_path() / ("pto-test-" + std::to_string(getpid()) + "-" + name);
  std::filesystem::remove(p);
  std::filesystem::remove(p.string() + "-wal");
  std::filesystem::remove(p.string() + "-shm");
  return p.string();
}

Program small_mbr() { return make_workload("matmul_bias_relu", {{"M", 40}, {"N", 48}, {"K", 24}}); }

// A deterministic stand-in for measurement: a function of the schedule only.
double synthetic_ms(const Schedule& s) {
  const std::string js = schedule_to_json_string(s, -1);
  return 1.0 + static_cast<double>(std::hash<std::string>{}(js) % 1000) / 100.0;
}

Schedule schedule_of(const SearchSpace& space, const Proposal& p) {
  return p.schedule ? *p.schedule : space.decode(p.genome);
}

std::vector<std::string> run_strategy(const std::string& name, const SearchSpace& space, uint64_t seed, int steps) {
  auto s = make_strategy(name, space, seed);
  std::vector<std::string> seq;
  // The tuner measures the default schedule first.
  const Schedule def = default_schedule(space.program(), space.target());
  s->observe({{}, def, "default"}, synthetic_ms(def));
  for (int i = 0; i < steps; ++i) {
    const Proposal p = s->propose();
    const Schedule sched = schedule_of(space, p);
    seq.push_back(schedule_to_json_string(sched, -1));
    s->observe(p, i % 7 == 3 ? INFINITY : synthetic_ms(sched));  // some failures too
  }
  return seq;
}

}  // namespace

TEST_CASE("search space: decoded candidates validate and compute the reference", "[tuner]") {
  const Target t = parse_target("host");
  const Program p = small_mbr();
  const SearchSpace space(p, t);
  REQUIRE(space.knobs().size() > 10);
  for (const Knob& k : space.knobs()) CHECK(k.name != "storage");  // exact f32: no precision knobs
  std::mt19937 rng(7);
  const std::map<std::string, HostTensor> in = {
      {"A", random_tensor({40, 24}, rng)}, {"B", random_tensor({24, 48}, rng)}, {"bias", random_tensor({48}, rng)}};
  const HostTensor want = interpret(p, in).at("out");
  const std::vector<Schedule> valid = valid_samples(space, p, t, 60, 11);
  for (size_t i = 0; i < std::min<size_t>(valid.size(), 3); ++i) {  // JIT compiles are slow: run a few of the valid ones
    INFO(schedule_to_json_string(valid[i], -1));
    const Kernel k(p, valid[i], t);
    // f32 sums of 24 products in [-1, 1]: any order is within 24 * 2^-24 * 24 of the f64 result.
    CHECK(tolerance_ratio(run_f32(k, in)[0], want, 1e-5, 1e-4) <= 1.0);
  }
  // Most of the space is valid by construction (domains fit the extents); validation
  // also rejects placements Halide miscompiles (schedules/Validate.cpp), which the
  // space does not model, so not all of it.
  CHECK(valid.size() >= 25);
}

TEST_CASE("search space: candidates of bf16 programs get the default's f32 arithmetic and dot_pairs", "[tuner][bf16]") {
  // A bf16 conv with pair-blocked weights: every candidate computes and
  // accumulates in f32 (a bf16 accumulator fails the check) and, on an
  // avx512_bf16 target, sums the pairs with dot_pairs wherever its update allows.
  const Target t = parse_target("host");
  const Program p = make_workload("resnet50_conv", {{"layer", 10}, {"BF16", 1}});
  const SearchSpace space(p, t);
  std::mt19937_64 g(3);
  int paired = 0;
  for (int i = 0; i < 40; ++i) {
    const Schedule s = space.decode(space.random(g));
    const StageSchedule* acc = s.find("conv_acc");
    REQUIRE(acc);
    INFO(schedule_to_json_string(s, -1));
    if (acc->compute.kind != Placement::Kind::Inline) CHECK(acc->precision.accumulate == DType::F32);
    paired += !acc->dot_pairs.empty();
  }
  if (t.avx512_bf16) CHECK(paired > 0);
}

TEST_CASE("search space: accuracy budget, genome checks, mutation and crossover", "[tuner]") {
  const Target t = parse_target("host");
  const Program p = make_workload("softmax", {{"R", 16}, {"C", 64}});
  const SearchSpace exact(p, t), loose(p, t, {2e-2});
  auto has_storage = [](const SearchSpace& s) {
    for (const Knob& k : s.knobs())
      if (k.name == "storage") return true;
    return false;
  };
  CHECK_FALSE(has_storage(exact));
  CHECK(has_storage(loose));
  CHECK_THROWS_WITH(SearchSpace(p, t, {-1}), Contains("max_rel_error"));
  CHECK_THROWS_AS(exact.decode(Genome{1, 2}), ScheduleError);
  Genome bad(exact.knobs().size(), 0);
  bad[0] = 99;
  CHECK_THROWS_WITH(exact.decode(bad), Contains("outside"));
  std::mt19937_64 rng(3);
  const Genome a = exact.random(rng), b = exact.random(rng);
  const Genome m = exact.mutate(a, rng, 1);
  int diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff += a[i] != m[i];
  CHECK(diff == 1);
  const Genome c = exact.crossover(a, b, rng);
  for (size_t i = 0; i < c.size(); ++i) CHECK((c[i] == a[i] || c[i] == b[i]));
  CHECK(genome_from_string(genome_to_string(a)) == a);
}

TEST_CASE("strategies are deterministic for a fixed seed", "[tuner]") {
  const Target t = parse_target("host");
  const Program p = small_mbr();
  const SearchSpace space(p, t);
  for (const std::string& name : strategy_names()) {
    INFO(name);
    const auto a = run_strategy(name, space, 42, 30), b = run_strategy(name, space, 42, 30);
    CHECK(a == b);
    CHECK(run_strategy(name, space, 43, 30) != a);
  }
  CHECK_THROWS_WITH(make_strategy("annealing", space, 1), Contains("valid: random, evolutionary, model"));
}

TEST_CASE("boosted trees learn a nonlinear function, features respond to the schedule", "[tuner]") {
  BoostedTrees m;
  CHECK_THROWS_WITH(m.predict({{1.0f}}), Contains("before fit"));
  std::vector<std::vector<float>> x;
  std::vector<float> y;
  for (int i = 0; i < 200; ++i) {
    const float a = static_cast<float>(i % 10), b = static_cast<float>((i * 7) % 13);
    x.push_back({a, b});
    y.push_back(a < 5 ? b : 20 - b);  // a threshold no linear model fits
  }
  m.fit(x, y);
  const auto pred = m.predict({{2, 3}, {8, 3}});
  CHECK(pred[0] == Approx(3).margin(0.5));
  CHECK(pred[1] == Approx(17).margin(0.5));
  CHECK_THROWS_WITH(m.fit(x, {1.0f}), Contains("targets"));
  const Target t = parse_target("host");
  const Program p = small_mbr();
  const auto fd = schedule_features(p, t, default_schedule(p, t)), fp = schedule_features(p, t, plain_schedule(p));
  REQUIRE(fd.size() == feature_names().size());
  REQUIRE(fp.size() == fd.size());
  CHECK(fd != fp);
}

TEST_CASE("mutations come from the directives' candidates and respect the accuracy budget",
          "[tuner]") {
  const Target t = parse_target("host");
  const Program p = small_mbr();
  const Schedule def = default_schedule(p, t);
  std::mt19937_64 rng(5);
  for (const double budget : {0.0, 1e-2}) {
    const Mutator m(p, t, budget);
    int changed = 0, valid = 0;
    for (int i = 0; i < 60; ++i) {
      const auto s = m.mutate(def, rng, 1 + i % 3);
      if (!s) continue;
      CHECK_FALSE(*s == def);
      ++changed;
      try {
        validate(p, *s, &t);
        ++valid;
      } catch (const ScheduleError&) {
      }
      // Exact f32: nothing narrower than f32, never f64.
      for (const auto& [name, ss] : s->stages)
        for (const auto& ty :
             {ss.precision.storage, ss.precision.compute, ss.precision.accumulate}) {
          CHECK(ty != DType::F64);
          if (budget == 0) CHECK((!ty || *ty == DType::F32));
        }
    }
    CHECK(changed > 50);
    CHECK(valid > 20);  // most combinations of one stage's candidates with the rest validate
  }
}

TEST_CASE("tuning database: schema, trials, best record, budgets", "[tuner][db]") {
  const std::string path = temp_path("db1.db");
  const Target t = parse_target("host");
  const Program p = small_mbr();
  const WorkloadKey key = WorkloadKey::of(p, t, 0), loose = WorkloadKey::of(p, t, 1e-2);
  {
    TuningDB db(path);
    CHECK(db.schema_version() == kSchemaVersion);
    TrialRecord r;
    r.strategy = "random";
    r.schedule_json = schedule_to_json_string(default_schedule(p, t), -1);
    for (int i = 0; i < 4; ++i) {
      r.index = i;
      r.median_ms = 5.0 - i;
      r.status = i == 3 ? TrialStatus::Crash : TrialStatus::Ok;  // the fastest-looking one crashed
      r.error = i == 3 ? "worker killed by signal 11" : "";
      db.add_trial(key, p, r);
    }
    r.index = 0;
    r.median_ms = 0.5;
    r.status = TrialStatus::Ok;
    db.add_trial(loose, p, r);  // tuned under a looser accuracy budget
  }
  const TuningDB db(path);  // reopened: everything committed is there
  const auto trials = db.trials(key);
  REQUIRE(trials.size() == 4);
  CHECK(trials[3].status == TrialStatus::Crash);
  CHECK(trials[3].error == "worker killed by signal 11");
  const auto best = db.best(key);
  REQUIRE(best);
  CHECK(best->index == 2);                  // exact records only: not the 0.5 ms one, not the crash
  CHECK(db.best(loose)->median_ms == 0.5);  // a looser budget may use exact and loose records
  CHECK(db.trials(WorkloadKey::of(make_workload("matmul", {{"M", 8}, {"N", 8}, {"K", 8}}), t, 0)).empty());
  // The records of this workload, seen from the same program at another shape:
  // no default was measured, so nothing transfers yet.
  const Program other = make_workload("matmul_bias_relu", {{"M", 64}, {"N", 48}, {"K", 24}});
  const WorkloadKey okey = WorkloadKey::of(other, t, 0);
  CHECK(db.related_trials(okey, 100).empty());
}

TEST_CASE("tuning database: related trials carry their workload's default time", "[tuner][db]") {
  const std::string path = temp_path("db-related.db");
  const Target t = parse_target("host");
  const Program p = small_mbr(),
                other = make_workload("matmul_bias_relu", {{"M", 64}, {"N", 48}, {"K", 24}});
  const WorkloadKey key = WorkloadKey::of(p, t, 0), okey = WorkloadKey::of(other, t, 0);
  TuningDB db(path);
  TrialRecord r;
  r.schedule_json = schedule_to_json_string(default_schedule(p, t), -1);
  r.strategy = "default";
  r.median_ms = 2.0;
  db.add_trial(key, p, r);
  r.strategy = "model";
  r.median_ms = 1.0;
  db.add_trial(key, p, r);
  r.status = TrialStatus::WrongResult;
  r.median_ms = 0.1;
  db.add_trial(key, p, r);
  const auto rel = db.related_trials(okey, 100);
  REQUIRE(rel.size() == 2);  // the default and the tuned one; not the wrong result
  for (const RelatedTrial& x : rel) {
    CHECK(x.default_ms == 2.0);
    CHECK(program_from_json_string(x.program_json).name() == p.name());
  }
  CHECK(db.related_trials(key, 100).empty());  // a workload does not transfer to itself
  CHECK(db.related_trials(okey, 1).size() == 1);
}

TEST_CASE("tuning database: migration from schema v1, newer schema refused, bad path", "[tuner][db]") {
  const std::string path = temp_path("db_v1.db");
  {
    sqlite3* raw = nullptr;
    REQUIRE(sqlite3_open(path.c_str(), &raw) == SQLITE_OK);
    std::string sql = std::string(schema_v1_sql()) +
                      "INSERT INTO schema_version VALUES (1);"
                      "INSERT INTO workloads VALUES (1, 'abc', 'old', '[1]', '{}');"
                      "INSERT INTO trials(workload_id, target, pto_version, halide_version, trial_index, strategy, "
                      "schedule_json, status, median_ms) VALUES (1, 'host', '0.0.1', '20.0.0', 0, 'random', '{}', 'ok', 1.5);";
    REQUIRE(sqlite3_exec(raw, sql.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(raw);
  }
  {
    const TuningDB db(path);
    CHECK(db.schema_version() == 2);
    WorkloadKey k;
    k.fingerprint = "abc";
    k.target = "host";
    const auto trials = db.trials(k);  // the v1 row survives, with the v2 columns defaulted
    REQUIRE(trials.size() == 1);
    CHECK(trials[0].median_ms == 1.5);
    CHECK(trials[0].genome.empty());
  }
  {
    sqlite3* raw = nullptr;
    REQUIRE(sqlite3_open(path.c_str(), &raw) == SQLITE_OK);
    REQUIRE(sqlite3_exec(raw, "UPDATE schema_version SET version = 99", nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(raw);
  }
  CHECK_THROWS_WITH(TuningDB(path), Contains("schema version 99 is newer"));
  CHECK_THROWS_AS(TuningDB("/proc/no/such/dir/x.db"), TuningDBError);
}

TEST_CASE("best_schedule: the JIT path uses the tuned record, else the default", "[tuner][db]") {
  const Target t = parse_target("host");
  const Program p = small_mbr();
  const std::string path = temp_path("db_best.db");
  std::string source;
  CHECK(best_schedule(path, p, t, &source) == default_schedule(p, t));
  CHECK_THAT(source, Contains("no tuning database"));

  // A record with a distinctive (valid) schedule.
  Schedule tuned;
  tuned["out"].loops.tile = {{"i0", {8}}, {"i1", {16}}};
  tuned["out"].loops.vectorize = "i1_i";
  tuned["out"].loops.vector_width = 16;
  tuned["mm"].compute = {Placement::Kind::At, "out", "i0_o"};
  tuned["biased"].compute.kind = Placement::Kind::Inline;
  validate(p, tuned, &t);
  {
    TuningDB db(path);
    TrialRecord d;  // the current default, measured slower (as `pto tune` records it first)
    d.strategy = "default";
    d.schedule_json = schedule_to_json_string(default_schedule(p, t), -1);
    d.median_ms = 0.02;
    db.add_trial(WorkloadKey::of(p, t, 0), p, d);
    TrialRecord r;
    r.index = 1;
    r.strategy = "evolutionary";
    r.schedule_json = schedule_to_json_string(tuned, -1);
    r.median_ms = 0.01;
    db.add_trial(WorkloadKey::of(p, t, 0), p, r);
  }
  const Schedule got = best_schedule(path, p, t, &source);
  CHECK(got == tuned);
  CHECK_THAT(source, Contains("tuned schedule"));
  std::mt19937 rng(5);
  const std::map<std::string, HostTensor> in = {
      {"A", random_tensor({40, 24}, rng)}, {"B", random_tensor({24, 48}, rng)}, {"bias", random_tensor({48}, rng)}};
  const Kernel k(p, got, t);
  // f32 sums of 24 products in [-1, 1] (see above).
  CHECK(tolerance_ratio(run_f32(k, in)[0], interpret(p, in).at("out"), 1e-5, 1e-4) <= 1.0);
  // Another workload has no record: default.
  const Program other = make_workload("matmul", {{"M", 8}, {"N", 8}, {"K", 8}});
  CHECK(best_schedule(path, other, t) == default_schedule(other, t));
}

TEST_CASE("best_schedule: a record is used only against the current default, measured in the same DB", "[tuner][db]") {
  const Target t = parse_target("host");
  const Program p = small_mbr();
  const WorkloadKey key = WorkloadKey::of(p, t, 0);
  const Schedule def = default_schedule(p, t);
  Schedule tuned;
  tuned["out"].loops.parallel = {"i0"};
  validate(p, tuned, &t);
  auto record = [&](TuningDB& db, const std::string& strategy, const std::string& json, double ms) {
    TrialRecord r;
    r.index = static_cast<int>(db.trials(key).size());
    r.strategy = strategy;
    r.schedule_json = json;
    r.median_ms = ms;
    db.add_trial(key, p, r);
  };
  std::string source;
  // Tuned against an older default (a schedule the current release no longer derives): stale.
  const std::string path = temp_path("db_stale.db");
  {
    TuningDB db(path);
    Schedule old_default;
    old_default["out"].loops.vectorize = "i1";
    old_default["out"].loops.vector_width = 8;
    record(db, "default", schedule_to_json_string(old_default, -1), 0.5);
    record(db, "evolutionary", schedule_to_json_string(tuned, -1), 0.1);
  }
  CHECK(best_schedule(path, p, t, &source) == def);
  CHECK_THAT(source, Contains("not measured against the current default") && Contains("run `pto tune matmul_bias_relu`"));
  // The current default measured, and faster than every record: the default.
  {
    TuningDB db(path);
    record(db, "default", schedule_to_json_string(def, -1), 0.05);
  }
  CHECK(best_schedule(path, p, t, &source) == def);
  CHECK_THAT(source, Contains("no tuned record is faster"));
  // A record faster than the measured current default: the record.
  {
    TuningDB db(path);
    record(db, "evolutionary", schedule_to_json_string(tuned, -1), 0.01);
  }
  CHECK(best_schedule(path, p, t, &source) == tuned);
  CHECK_THAT(source, Contains("tuned schedule") && Contains("the current default measured"));
}

TEST_CASE("search space: every workload's seeds validate, decoding never fails otherwise", "[tuner]") {
  const Target t = parse_target("host");
  for (const auto& w : workloads()) {
    INFO(w.name);
    const Program p = make_workload(w.name);
    const SearchSpace space(p, t);
    const auto seeds = space.seeds();
    CHECK(!seeds.empty());
    for (const Genome& g : seeds) {
      const Schedule s = space.decode(g);
      INFO(schedule_to_json_string(s, -1));
      CHECK_NOTHROW(validate(p, s, &t));
    }
    std::mt19937_64 rng(1);
    int valid = 0;
    for (int i = 0; i < 40; ++i) {
      const Schedule s = space.decode(space.random(rng));  // decoding itself never throws
      try {
        validate(p, s, &t);
        ++valid;
      } catch (const ScheduleError&) {
        // an invalid combination: the tuner skips it without measuring
      }
    }
    CHECK(valid >= 20);
  }
}
