#include "autotuner/Tuner.h"

#include "autotuner/TrialBuffers.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <set>

#include "autotuner/Strategy.h"
#include "autotuner/TrialBuffers.h"
#include "dsl/Error.h"
#include "schedules/ScheduleJson.h"
#include "schedules/Validate.h"
#include "schedules/defaults/Defaults.h"

namespace pto::tuner {
namespace {

double ms_of(const TrialRecord& r) { return r.status == TrialStatus::Ok ? r.median_ms : INFINITY; }

}  // namespace

TuneResult tune(const Program& p, const Target& t, const TuneOptions& o,
                const std::function<void(const TuneProgress&)>& progress) {
  if (o.trials < 1) throw Error("--trials must be at least 1, got " + std::to_string(o.trials));
  if (o.max_rel_error < 0) throw Error("--max-rel-error must be >= 0, got " + std::to_string(o.max_rel_error));
  if (o.time_budget_s < 0) throw Error("--time-budget must be >= 0 seconds, got " + std::to_string(o.time_budget_s));
  const auto start = std::chrono::steady_clock::now();
  const SearchSpace space(p, t, {o.max_rel_error});
  const auto strategy = make_strategy(o.strategy, space, o.seed);
  TuningDB db(o.db_path.empty() ? default_db_path() : o.db_path);
  const WorkloadKey key = WorkloadKey::of(p, t, o.max_rel_error);

  TuneResult res;
  res.history = db.trials(key);
  res.resumed = static_cast<int>(res.history.size());
  std::set<std::string> seen;
  for (const TrialRecord& r : res.history) {
    seen.insert(r.schedule_json);
    // Genomes of an older search space (other knobs) mean nothing to this one.
    if (!r.genome.empty()) {
      const Genome g = genome_from_string(r.genome);
      if (g.size() == space.knobs().size()) strategy->observe(g, ms_of(r));
    }
  }
  auto update = [&](const TrialRecord& r) {
    if (r.status != TrialStatus::Ok) ++res.failures;
    if (r.status == TrialStatus::Ok && (!res.best || r.median_ms < res.best->median_ms)) res.best = r;
    if (r.strategy == "default") res.baseline = r;
  };
  for (const TrialRecord& r : res.history) update(r);
  int next_index = 0;
  for (const TrialRecord& r : res.history) next_index = std::max(next_index, r.index + 1);
  auto report = [&](const TrialRecord* last) {
    if (!progress) return;
    progress({static_cast<int>(res.history.size()), o.trials, res.best ? res.best->median_ms : 0,
              res.baseline && res.baseline->status == TrialStatus::Ok ? res.baseline->median_ms : 0, res.failures, last});
  };
  report(nullptr);

  MeasureOptions mo = o.measure;
  // bf16 / f16 stages of the program round where the f64 reference does not.
  mo.tolerance = std::max({mo.tolerance, o.max_rel_error, rounding_tolerance(p)});
  Measurer measurer(p, t, mo);

  // Candidates carry the genome they came from (none for the default schedule).
  struct Pending {
    Candidate c;
    std::string genome, strategy;
  };
  auto run_batch = [&](const std::vector<Pending>& batch) {
    std::vector<Candidate> cands;
    for (const auto& b : batch) cands.push_back(b.c);
    measurer.measure(cands, [&](const Candidate& c, const Measurement& m) {
      const Pending* pend = nullptr;
      for (const auto& b : batch)
        if (b.c.trial == c.trial) pend = &b;
      TrialRecord r;
      r.index = c.trial;
      r.strategy = pend->strategy;
      r.schedule_json = schedule_to_json_string(c.schedule, -1);
      r.genome = pend->genome;
      r.status = m.status;
      r.error = m.error;
      r.median_ms = m.median_ms;
      r.min_ms = m.min_ms;
      r.max_ms = m.max_ms;
      r.reps = m.reps;
      r.max_rel_error = m.max_rel_error;
      r.compile_s = m.compile_s;
      r.id = db.add_trial(key, p, r);
      res.history.push_back(r);
      ++res.measured;
      update(r);
      if (!r.genome.empty()) strategy->observe(genome_from_string(r.genome), ms_of(r));
      report(&res.history.back());
    });
  };
  auto out_of_time = [&] {
    return o.time_budget_s > 0 &&
           std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >= o.time_budget_s;
  };

  // The default schedule seeds the search. It is measured even on a resume
  // whose trials are used up when this release's default is new to the
  // database: best_schedule() trusts tuned records only against it.
  const Schedule def = default_schedule(p, t);
  const std::string def_json = schedule_to_json_string(def, -1);
  if (!seen.count(def_json)) {
    seen.insert(def_json);
    run_batch({{{next_index++, def}, "", "default"}});
  }

  // A candidate far slower than the best so far cannot win: cap its run (first
  // run, check, warm-up and repetitions) at 20x the best time per run, at least 3 s.
  auto tighten_run_timeout = [&] {
    if (!res.best) return;
    const double per_run_s = res.best->median_ms / 1000;
    const double cap = std::max(3.0, 3 * mo.min_seconds + 20 * per_run_s * (mo.min_reps + mo.warmup + 2));
    measurer.set_run_timeout(std::min(mo.run_timeout_s, cap));
  };

  // Then the rule-based seeds of the search space, valid and new ones only.
  std::vector<Genome> seeds = space.seeds();
  std::reverse(seeds.begin(), seeds.end());  // consumed from the back, in order
  std::mt19937_64 fallback_rng(o.seed ^ 0x9e3779b97f4a7c15ULL);

  while (static_cast<int>(res.history.size()) < o.trials) {
    if (out_of_time()) {
      res.stopped_by_time = true;
      break;
    }
    std::vector<Pending> batch;
    const int want = std::min(mo.jobs, o.trials - static_cast<int>(res.history.size()));
    int attempts = 0;
    while (static_cast<int>(batch.size()) < want && attempts < 500) {
      ++attempts;
      const bool seeded = !seeds.empty();
      // A strategy that keeps proposing measured schedules (a converged
      // population) is helped out with uniform samples before giving up.
      const Genome g = seeded ? seeds.back() : attempts > 250 ? space.random(fallback_rng) : strategy->propose();
      if (seeded) seeds.pop_back();
      Schedule s;
      try {
        s = space.decode(g);
        validate(p, s, &t);
      } catch (const ScheduleError&) {
        ++res.invalid_skipped;  // never measured: only valid schedules reach a worker
        strategy->observe(g, INFINITY);
        continue;
      }
      const std::string js = schedule_to_json_string(s, -1);
      if (!seen.insert(js).second) continue;  // measured before (maybe in an earlier run)
      batch.push_back({{next_index++, s}, genome_to_string(g), seeded ? "seed" : strategy->name()});
    }
    if (batch.empty()) {
      res.space_exhausted = true;
      break;
    }
    tighten_run_timeout();
    run_batch(batch);
  }

  // Trials to reach 90% of the final best (best-so-far <= best / 0.9).
  if (res.best) {
    double so_far = INFINITY;
    for (size_t i = 0; i < res.history.size(); ++i) {
      so_far = std::min(so_far, ms_of(res.history[i]));
      if (so_far <= res.best->median_ms / 0.9) {
        res.trials_to_90 = static_cast<int>(i) + 1;
        break;
      }
    }
  }
  return res;
}

}  // namespace pto::tuner
