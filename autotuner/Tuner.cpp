#include "autotuner/Tuner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <set>

#include "autotuner/Compare.h"
#include "autotuner/CostModel.h"
#include "autotuner/Strategy.h"
#include "autotuner/TrialBuffers.h"
#include "dsl/Error.h"
#include "dsl/ProgramJson.h"
#include "schedules/ScheduleJson.h"
#include "schedules/Validate.h"
#include "schedules/defaults/Defaults.h"

namespace pto::tuner {
namespace {

double ms_of(const TrialRecord& r) { return r.status == TrialStatus::Ok ? r.median_ms : INFINITY; }

// The cost model's warm start: correct trials of the same program at other
// shapes on this target, relative to their workload's default schedule.
std::vector<TransferSample> transfer_samples(const TuningDB& db, const WorkloadKey& key,
                                             const Target& t) {
  constexpr int kMaxTransfer = 2000;
  std::vector<TransferSample> r;
  std::map<std::string, Program> programs;  // parsed once per workload
  for (const RelatedTrial& rt : db.related_trials(key, kMaxTransfer)) {
    try {
      auto it = programs.find(rt.program_json);
      if (it == programs.end())
        it = programs.emplace(rt.program_json, program_from_json_string(rt.program_json)).first;
      const Schedule s = schedule_from_json_string(rt.schedule_json);
      r.push_back({schedule_features(it->second, t, s),
                   static_cast<float>(std::log(rt.median_ms / rt.default_ms))});
    } catch (const Error&) {
      // A record of an older format: nothing to learn from.
    }
  }
  return r;
}

// TuneOptions::confirm: the fastest few trials and the default, timed side by side.
void confirm_best(const Program& p, const Target& t, const TuneOptions& o, const MeasureOptions& mo,
                  TuneResult& res) {
  std::vector<const TrialRecord*> top{&*res.baseline};
  std::vector<const TrialRecord*> ok;
  for (const TrialRecord& r : res.history)
    if (r.status == TrialStatus::Ok) ok.push_back(&r);
  std::stable_sort(ok.begin(), ok.end(),
                   [](auto* a, auto* b) { return a->median_ms < b->median_ms; });
  for (const TrialRecord* r : ok) {
    if (static_cast<int>(top.size()) > o.confirm) break;
    if (std::none_of(top.begin(), top.end(),
                     [&](auto* x) { return x->schedule_json == r->schedule_json; }))
      top.push_back(r);
  }
  if (top.size() < 2) return;
  std::vector<std::pair<std::string, Schedule>> scheds;
  for (const TrialRecord* r : top)
    scheds.push_back({std::to_string(r->index), schedule_from_json_string(r->schedule_json)});
  CompareOptions co;
  co.autoschedulers = {};
  co.rounds = 5;
  co.min_seconds = std::max(0.25, 2 * mo.min_seconds);
  co.tolerance = mo.tolerance;
  std::vector<CompareRow> rows;
  try {
    rows = compare(p, t, scheds, co);
  } catch (const Error&) {
    return;  // keep the fastest trial
  }
  // The default stays unless another is faster by more than the noise of
  // such timings (a few percent between processes on a 20 us kernel).
  constexpr double kMargin = 0.97;
  const CompareRow* win = rows.empty() || !rows[0].ok ? nullptr : &rows[0];
  if (win) res.confirmed_default_ms = win->time.median_ms;
  for (size_t i = 1; i < rows.size() && i < top.size(); ++i) {
    if (!rows[i].ok) continue;
    const double bar = win == &rows[0] ? kMargin * win->time.median_ms
                       : win           ? win->time.median_ms
                                       : INFINITY;
    if (rows[i].time.median_ms < bar) win = &rows[i];
  }
  if (!win) return;
  res.best = *top[static_cast<size_t>(win - rows.data())];
  res.confirmed_ms = win->time.median_ms;
}

}  // namespace

TuneResult tune(const Program& p, const Target& t, const TuneOptions& o,
                const std::function<void(const TuneProgress&)>& progress) {
  if (o.trials < 1) throw Error("--trials must be at least 1, got " + std::to_string(o.trials));
  if (o.max_rel_error < 0) throw Error("--max-rel-error must be >= 0, got " + std::to_string(o.max_rel_error));
  if (o.time_budget_s < 0) throw Error("--time-budget must be >= 0 seconds, got " + std::to_string(o.time_budget_s));
  if (o.opt_level != 2 && o.opt_level != 3)
    throw Error(
        "--opt-level " + std::to_string(o.opt_level) +
        ": tuning searches schedules, and at levels 0 and 1 every candidate compiles to the same "
        "loops; use 2 (the schedules as searched) or 3 (with fast_math)");
  const auto start = std::chrono::steady_clock::now();
  const SearchSpace space(p, t, {o.max_rel_error});
  const auto strategy = make_strategy(o.strategy, space, o.seed);
  TuningDB db(o.db_path.empty() ? default_db_path() : o.db_path);
  WorkloadKey key = WorkloadKey::of(p, t, o.max_rel_error);
  if (o.opt_level == 3) key.target += " fast_math";  // apart from the exact records
  const auto at_level = [&](Schedule s) {
    s.options.opt_level = o.opt_level;
    return s;
  };

  TuneResult res;
  res.history = db.trials(key);
  res.resumed = static_cast<int>(res.history.size());
  strategy->warm_start(transfer_samples(db, key, t));
  std::set<std::string> seen;
  auto proposal_of = [&](const TrialRecord& r) {
    Proposal pr{{}, std::nullopt, r.strategy};
    // Genomes of an older search space (other knobs) mean nothing to this one.
    if (!r.genome.empty()) {
      const Genome g = genome_from_string(r.genome);
      if (g.size() == space.knobs().size()) pr.genome = g;
    }
    try {
      pr.schedule = schedule_from_json_string(r.schedule_json);
    } catch (const Error&) {
    }
    return pr;
  };
  for (const TrialRecord& r : res.history) {
    seen.insert(r.schedule_json);
    const Proposal pr = proposal_of(r);
    if (pr.schedule || !pr.genome.empty()) strategy->observe(pr, ms_of(r));
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

  auto run_batch = [&](const std::vector<std::pair<Candidate, Proposal>>& batch) {
    std::vector<Candidate> cands;
    for (const auto& b : batch) cands.push_back(b.first);
    measurer.measure(cands, [&](const Candidate& c, const Measurement& m) {
      const Proposal* pend = nullptr;
      for (const auto& b : batch)
        if (b.first.trial == c.trial) pend = &b.second;
      TrialRecord r;
      r.index = c.trial;
      r.strategy = pend->origin;
      r.schedule_json = schedule_to_json_string(c.schedule, -1);
      r.genome = pend->genome.empty() ? "" : genome_to_string(pend->genome);
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
      Proposal measured = *pend;
      measured.schedule = c.schedule;
      strategy->observe(measured, ms_of(r));
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
  const Schedule def = at_level(default_schedule(p, t));
  const std::string def_json = schedule_to_json_string(def, -1);
  if (!seen.count(def_json)) {
    seen.insert(def_json);
    run_batch({{{next_index++, def}, {{}, def, "default"}}});
  }

  // A candidate far slower than the best so far cannot win: cap its run (first
  // run, check, warm-up and repetitions) at 20x the best time per run, at least 3 s.
  // And a candidate whose first run takes 10x the best time (at least 1 ms
  // more) is timed by that run alone.
  // A compile 10x longer than the default's (at least 10 s; MetaSchedule's
  // builder allows 30) is a schedule Halide chokes on (a loop of a few
  // thousand iterations fully unrolled): it cannot be worth the search's time.
  auto tighten_limits = [&] {
    if (res.baseline && res.baseline->status == TrialStatus::Ok)
      measurer.set_compile_timeout(
          std::min(mo.compile_timeout_s, std::max(10.0, 10 * res.baseline->compile_s)));
    if (!res.best) return;
    const double per_run_s = res.best->median_ms / 1000;
    const double cap = std::max(3.0, 3 * mo.min_seconds + 20 * per_run_s * (mo.min_reps + mo.warmup + 2));
    measurer.set_run_timeout(std::min(mo.run_timeout_s, cap));
    measurer.set_slow_ms(std::max(10 * res.best->median_ms, res.best->median_ms + 1));
  };

  std::mt19937_64 fallback_rng(o.seed ^ 0x9e3779b97f4a7c15ULL);
  while (static_cast<int>(res.history.size()) < o.trials) {
    if (out_of_time()) {
      res.stopped_by_time = true;
      break;
    }
    std::vector<std::pair<Candidate, Proposal>> batch;
    const int jobs = mo.jobs > 0 ? mo.jobs : std::max(1, t.cores);
    const int want = std::min(jobs, o.trials - static_cast<int>(res.history.size()));
    int attempts = 0;
    while (static_cast<int>(batch.size()) < want && attempts < 500) {
      ++attempts;
      // A strategy that keeps proposing measured schedules (a converged
      // population) is helped out with uniform samples before giving up.
      Proposal pr = attempts > 250 ? Proposal{space.random(fallback_rng), std::nullopt, "random"}
                                   : strategy->propose();
      Schedule s;
      try {
        s = at_level(pr.schedule ? *pr.schedule : space.decode(pr.genome));
        validate(p, s, &t);
      } catch (const ScheduleError&) {
        ++res.invalid_skipped;  // never measured: only valid schedules reach a worker
        strategy->observe(pr, INFINITY);
        continue;
      }
      const std::string js = schedule_to_json_string(s, -1);
      if (!seen.insert(js).second) continue;  // measured before (maybe in an earlier run)
      batch.push_back({{next_index++, s}, std::move(pr)});
    }
    if (batch.empty()) {
      res.space_exhausted = true;
      break;
    }
    tighten_limits();
    run_batch(batch);
  }

  if (o.confirm > 0 && res.best && res.baseline && res.baseline->status == TrialStatus::Ok)
    confirm_best(p, t, o, mo, res);
  // Trial order (workers of a batch finish in the order they compiled), as a resume reads them.
  std::stable_sort(res.history.begin(), res.history.end(),
                   [](const TrialRecord& a, const TrialRecord& b) { return a.index < b.index; });

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
