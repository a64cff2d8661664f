#include "schedules/directives/StoreIn.h"

#include <algorithm>

#include "dsl/Error.h"
#include "dsl/IRVisitor.h"
#include "schedules/LoopNest.h"
#include "schedules/directives/Json.h"

namespace pto::directives {

namespace {

bool at_root(const StageSchedule* ss) {
  return !ss || ss->compute.kind == Placement::Kind::Root;
}

// The index of `st` read by a statistic `d` of the rows it is computed per:
// `d`'s vars are the consumer's `vars` without the one at `k`, and it reduces
// over one variable spanning that whole dim. -1 when `d` is not one.
int reduced_dim(const Stage& st, const Stage& d, const std::vector<std::string>& vars) {
  if (!d.reduce || d.is_arg_reduction() || d.rvars.size() != 1) return -1;
  for (size_t k = 0; k < vars.size(); ++k) {
    std::vector<std::string> kept = vars;
    kept.erase(kept.begin() + static_cast<std::ptrdiff_t>(k));
    if (d.vars != kept || d.rvars[0].extent != st.shape[k]) continue;
    std::vector<std::string> idx = vars;
    idx[k] = d.rvars[0].name;
    if (read_at(d.value, st.name, st.shape, idx)) return static_cast<int>(k);
  }
  return -1;
}

}  // namespace

std::string store_in_problem(const Program& p, const Schedule& s, const Stage& st,
                             const std::string& consumer) {
  const std::string where = "stage '" + st.name + "': store_in '" + consumer + "'";
  const Stage* c = p.find_stage(consumer);
  const auto readers = p.consumers(st.name);
  if (!c || std::find(readers.begin(), readers.end(), consumer) == readers.end())
    return where + " must name a stage that reads it; it is read by: " + join(readers);
  const StageSchedule* ss = s.find(st.name);
  const StageSchedule* cs = s.find(consumer);
  if (st.reduce || p.is_output(st.name))
    return where + " stores an elementwise intermediate; '" + st.name + "' is " +
           (st.reduce ? "a reduction" : "an output, written to the caller's buffer");
  if (c->reduce || !at_root(cs) || (cs && (cs->specialize || cs->device != "cpu")))
    return where + ": '" + consumer +
           "' must be an elementwise stage computed at root on the CPU without specialize (its "
           "loops then guard their tails, so no point is rewritten twice)";
  if (st.shape != c->shape ||
      stage_precision(p, s, st.name).storage != stage_precision(p, s, consumer).storage)
    return where + ": '" + consumer + "' must have the same shape and storage type; " +
           to_string(st.shape) + " against " + to_string(c->shape);
  if (!ss || ss->compute.kind != Placement::Kind::At || ss->compute.stage != consumer ||
      (ss->store && *ss->store != ss->compute && ss->store->stage != consumer) ||
      ss->device != "cpu")
    return where + ": '" + st.name + "' must be computed (and stored) at a loop of '" + consumer +
           "' on the CPU, so that each of its iterations writes the points it then rewrites";
  if (!read_at(c->value, st.name, st.shape, c->vars))
    return where + ": '" + consumer + "' must read '" + st.name + "' at its own point (" +
           join(c->vars) + ") and nowhere else";
  // The loop the stage is computed at, and the dims with a loop at or outside it.
  const auto nest = loop_nest(*c, cs->loops, false);
  const auto at = std::find_if(nest.begin(), nest.end(),
                               [&](const Loop& l) { return l.name == ss->compute.loop; });
  if (at == nest.end())
    return where + ": '" + consumer + "' has no loop '" + ss->compute.loop + "'";
  std::vector<std::string> outer_dims;
  for (auto l = nest.begin(); l != std::next(at); ++l) outer_dims.push_back(l->dim);
  // Every other reader is a statistic of the consumer's rows, computed in the
  // same iteration (before the consumer's loop) and read by the consumer
  // alone, at its own point, and reduces over a dim the iteration covers whole.
  for (const std::string& r : readers) {
    if (r == consumer) continue;
    const Stage& d = p.stage(r);
    const StageSchedule* ds = s.find(r);
    const int k = reduced_dim(st, d, c->vars);
    const auto dreaders = p.consumers(r);
    if (k < 0 || !ds || ds->compute != ss->compute || dreaders.size() != 1 ||
        dreaders[0] != consumer || !read_at(c->value, r, d.shape, d.vars) ||
        std::count(outer_dims.begin(), outer_dims.end(), c->vars[static_cast<size_t>(k)]))
      return where + ": its reader '" + r +
             "' must be a reduction over one whole dim of it, computed where it is (" +
             to_string(ss->compute) + "), over a dim with no loop of '" + consumer +
             "' at or outside '" + ss->compute.loop + "', and read by '" + consumer +
             "' alone at its own point";
  }
  return "";
}

namespace {

struct StoreInDirective : Directive {
  StoreInDirective() : Directive("store_in") {}

  void parse_value(const nlohmann::json& v, StageSchedule& ss,
                   const std::string& path) const override {
    ss.store_in = json::get_string(v, path);
  }
  void print(const StageSchedule& ss, nlohmann::json& j) const override {
    if (!ss.store_in.empty()) j["store_in"] = ss.store_in;
  }

  void check(const CheckContext& c) const override {
    if (c.ss.store_in.empty() || !c.optimizing()) return;
    if (const std::string e = store_in_problem(c.program, c.schedule, c.stage, c.ss.store_in);
        !e.empty())
      throw ScheduleError(e);
  }

  // Applied by lowering at the end (backends/StoreIn.h); the consumer's
  // loops guard their tails (Loops.cpp).

  std::string explain_head(const StageSchedule& ss) const override {
    return ss.store_in.empty() ? "" : ", stored in " + ss.store_in + "'s buffer";
  }

 protected:
  std::vector<StageSchedule> proposals(const CheckContext& c) const override {
    std::vector<StageSchedule> r;
    if (c.ss.compute.kind != Placement::Kind::At) return r;
    StageSchedule v = c.ss;
    v.store_in = c.ss.compute.stage;
    r.push_back(v);
    return r;
  }
};

}  // namespace

const Directive& store_in_directive() {
  return instance<StoreInDirective>();
}

}  // namespace pto::directives
