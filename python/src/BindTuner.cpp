// Binding of the C++ autotuner (autotuner/Tuner.h): `_pto.tune` runs the same
// search as `pto tune` (worker processes, the SQLite tuning database) for a
// Program with static sizes and returns every trial as a dict, so that
// `pypto`'s kernel.tune() can install the best schedule and plot the tuning
// curve. The search runs with the GIL released; `progress`, a Python callable,
// is called with a dict after every trial (the GIL re-acquired), so the
// progress bar is driven by the C++ tuner itself.
#include <pybind11/stl.h>

#include <functional>
#include <optional>

#include "Bindings.h"
#include "autotuner/Tuner.h"
#include "schedules/ScheduleJson.h"
#include "target/Target.h"

namespace pto::py {

namespace py = pybind11;

namespace {

py::dict trial_dict(const tuner::TrialRecord& r) {
  py::dict d;
  d["index"] = r.index;
  d["strategy"] = r.strategy;
  d["status"] = tuner::to_string(r.status);
  d["error"] = r.error;
  d["median_ms"] = r.median_ms;
  d["min_ms"] = r.min_ms;
  d["max_ms"] = r.max_ms;
  d["reps"] = r.reps;
  d["max_rel_error"] = r.max_rel_error;
  d["compile_s"] = r.compile_s;
  d["schedule"] = r.schedule_json;
  return d;
}

}  // namespace

void bind_tuner(py::module_& m) {
  m.def(
      "tune",
      [](const Program& p, const std::string& target, int trials, const std::string& db,
         const std::string& strategy, uint64_t seed, double max_rel_error, double min_seconds,
         double time_budget_s, const std::string& worker, int jobs, const py::object& progress) {
        const Target t = parse_target(target);
        for (const auto& [sym, src] : p.symbols())
          throw SymbolicSizeError("tune: symbolic size '" + sym + "' of program '" + p.name() +
                                  "'; the C++ tuner measures static sizes only");
        tuner::TuneOptions o;
        o.trials = trials;
        o.db_path = db.empty() ? tuner::default_db_path() : db;
        o.strategy = strategy;
        o.seed = seed;
        o.max_rel_error = max_rel_error;
        o.time_budget_s = time_budget_s;
        o.measure.min_seconds = min_seconds;
        o.measure.worker_exe = worker;
        o.measure.jobs = jobs;
        // A failing callback must not unwind through the tuner (its worker
        // processes would be left behind): the first error is kept, later
        // reports are skipped, and the error is raised once the search ends.
        std::optional<py::error_already_set> failed;
        std::function<void(const tuner::TuneProgress&)> report;
        if (!progress.is_none())
          report = [&progress, &failed](const tuner::TuneProgress& s) {
            py::gil_scoped_acquire gil;
            if (failed) return;
            py::dict d;
            d["trial"] = s.trial;
            d["trials"] = s.trials;
            d["best_ms"] = s.best_ms > 0 ? py::object(py::float_(s.best_ms)) : py::none();
            d["default_ms"] = s.default_ms > 0 ? py::object(py::float_(s.default_ms)) : py::none();
            d["failures"] = s.failures;
            d["last"] = s.last ? py::object(trial_dict(*s.last)) : py::none();
            try {
              progress(d);
            } catch (py::error_already_set& e) {
              failed.emplace(std::move(e));
            }
          };
        tuner::TuneResult r;
        {
          py::gil_scoped_release release;
          r = tuner::tune(p, t, o, report);
        }
        if (failed) throw std::move(*failed);
        py::dict d;
        py::list history;
        for (const auto& h : r.history) history.append(trial_dict(h));
        d["trials"] = history;
        d["best"] = r.best ? py::object(trial_dict(*r.best)) : py::none();
        d["baseline"] = r.baseline ? py::object(trial_dict(*r.baseline)) : py::none();
        d["confirmed_ms"] =
            r.confirmed_ms > 0 ? py::object(py::float_(r.confirmed_ms)) : py::none();
        d["confirmed_default_ms"] = r.confirmed_default_ms > 0
                                        ? py::object(py::float_(r.confirmed_default_ms))
                                        : py::none();
        d["resumed"] = r.resumed;
        d["measured"] = r.measured;
        d["failures"] = r.failures;
        d["db"] = o.db_path;
        return d;
      },
      py::arg("program"), py::arg("target") = "host", py::arg("trials") = 20, py::arg("db") = "",
      py::arg("strategy") = "model", py::arg("seed") = 0, py::arg("max_rel_error") = 0.0,
      py::arg("min_seconds") = 0.05, py::arg("time_budget_s") = 0.0, py::arg("worker") = "",
      py::arg("jobs") = 0, py::arg("progress") = py::none(),
      "Runs the C++ autotuner (pto tune) on a program with static sizes; returns its trials as "
      "dicts.\n"
      "progress(dict(trial, trials, best_ms, default_ms, failures, last)) is called after every "
      "trial.");
}

}  // namespace pto::py
