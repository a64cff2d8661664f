#include "schedules/directives/Specialize.h"

#include <algorithm>

#include "dsl/Error.h"
#include "schedules/LoopNest.h"
#include "schedules/directives/Json.h"
#include "schedules/directives/Loops.h"

namespace pto::directives {

std::vector<std::pair<size_t, int64_t>> specialize_bounds(const Stage& st, const LoopSchedule& ls) {
  std::vector<std::pair<size_t, int64_t>> r;
  for (size_t k = 0; k < st.vars.size(); ++k) {
    if (!st.shape[k].is_symbolic()) continue;
    const std::string& v = st.vars[k];
    // The splits of the dim itself shift inwards: its outer tile, or the
    // vector width / unroll factor of an untiled dim.
    int64_t need = 0;
    if (const auto t = ls.tile.find(v); t != ls.tile.end()) {
      need = t->second.front();
    } else {
      if (ls.vectorize == v) need = std::max<int64_t>(need, ls.vector_width);
      if (const auto u = ls.unroll.find(v); u != ls.unroll.end())
        need = std::max<int64_t>(need, u->second);
    }
    if (need > 1) r.emplace_back(k, need);
  }
  return r;
}

namespace {

struct SpecializeDirective : Directive {
  SpecializeDirective() : Directive("specialize") {}

  void parse_value(const nlohmann::json& v, StageSchedule& ss,
                   const std::string& path) const override {
    ss.specialize = json::get_bool(v, path);
  }
  void print(const StageSchedule& ss, nlohmann::json& j) const override {
    if (ss.specialize) j["specialize"] = true;
  }

  void check(const CheckContext& c) const override {
    const StageSchedule& ss = c.ss;
    if (!ss.specialize || !c.optimizing()) return;
    const std::string where = c.where();
    if (ss.compute.kind != Placement::Kind::Root)
      throw ScheduleError(
          where +
          ": specialize needs a root stage (its tails shift inwards only there); it is computed " +
          to_string(ss.compute) + "; drop specialize or compute it at root");
    if (ss.device != "cpu")
      throw ScheduleError(where + ": specialize is for CPU loops; the stage runs on device '" +
                          ss.device + "'; drop specialize");
    if (!ss.pipeline.prefetch.empty())
      throw ScheduleError(
          where +
          ": specialize cannot be combined with pipeline.prefetch (the prefetch would "
          "apply to one version only); drop one of them");
    if (ss.online_softmax)
      throw ScheduleError(where +
                          ": specialize cannot be combined with online_softmax (the fused loop owns the stage's "
                          "loops and sizes its blocks itself); drop specialize");
    if (specialize_bounds(c.stage, ss.loops).empty())
      throw ScheduleError(
          where +
          ": specialize needs a symbolic dim that is tiled, or vectorized or unrolled by a "
          "factor; '" +
          c.stage.name + "' has shape " + to_string(c.stage.shape) +
          " and loops: " + join(loop_names(loop_nest(c.stage, ss.loops, false))));
  }

  // Before the loops directive: the specialization copies the schedule made
  // so far, then gets the loops with shifted tails, and the loops directive
  // gives the general version its guarded ones.
  void apply(ApplyContext& c) const override {
    const StageSchedule& ss = c.schedule();
    if (!ss.specialize) return;
    const Stage& st = c.stage();
    Halide::Expr cond;
    for (const auto& [k, need] : specialize_bounds(st, ss.loops)) {
      const Halide::Expr e = c.extent(st.shape[k]) >= static_cast<int>(need);
      cond = cond.defined() ? (cond && e) : e;
    }
    if (!cond.defined()) return;
    apply_loops(st, c.func().specialize(cond), ss.loops, false, true, /*fits=*/true, &c);
  }

  // Its loops print once: the version for extents that hold every tile.
  std::string explain_head(const StageSchedule& ss) const override {
    return ss.specialize
               ? ", specialized (symbolic extents >= tiles: tails shift inwards; else guarded)"
               : "";
  }

 protected:
  std::vector<StageSchedule> proposals(const CheckContext& c) const override {
    StageSchedule v = c.ss;
    v.specialize = true;
    return {v};
  }
};

}  // namespace

const Directive& specialize_directive() {
  return instance<SpecializeDirective>();
}

}  // namespace pto::directives
