#include "schedules/directives/ComputeWith.h"

#include <algorithm>

#include "dsl/Error.h"
#include "dsl/IRVisitor.h"
#include "schedules/LoopNest.h"
#include "schedules/directives/Json.h"

namespace pto::directives {

constexpr int kMaxLanes = 256;

std::string compute_with_problem(const Program& p, const Stage& st, const std::string& red) {
  const std::string where = "stage '" + st.name + "': compute_with '" + red + "'";
  const Stage* r = p.find_stage(red);
  if (!r) return where + " names no stage of program '" + p.name() + "'";
  if (st.reduce || st.vars.empty())
    return where + " computes an elementwise stage with at least one dim; '" + st.name + "' is " +
           (st.reduce ? "a reduction" : "a scalar");
  if (p.is_output(st.name))
    return where + ": '" + st.name + "' is an output of the program, written to the caller's buffer as it is "
                   "computed on its own; compute_with applies to intermediates";
  if (!r->reduce || r->is_arg_reduction())
    return where + " needs a sum, prod, min or max; '" + red + "' is " +
           (r->reduce ? "an " + std::string(to_string(*r->reduce)) + " reduction" : "not a reduction");
  if (r->rvars.size() != 1)
    return where + " needs a reduction over one variable; '" + red + "' reduces over " +
           std::to_string(r->rvars.size());
  const Dim& row = st.shape.back();
  if (row.is_symbolic())
    return where + " splits the row into whole steps and the rest at compile time, so '" + st.name +
           "' needs a static last dim; it is '" + row.sym + "'";
  const std::vector<std::string> kept(st.vars.begin(), st.vars.end() - 1);
  if (r->vars != kept || r->shape != Shape(st.shape.begin(), st.shape.end() - 1) || r->rvars[0].extent != row)
    return where + ": '" + red + "' must keep the dims of '" + st.name + "' but its last (vars " + join(kept) +
           ") and reduce over that one (extent " + row.str() + "); it has vars " + join(r->vars) +
           " and reduces '" + r->rvars[0].name + "' over " + r->rvars[0].extent.str();
  std::vector<std::string> idx = kept;
  idx.push_back(r->rvars[0].name);
  if (!read_at(r->value, st.name, st.shape, idx))
    return where + ": '" + red + "' must read '" + st.name + "' at (" + join(idx) +
           ") and nowhere else, so that each step reads the points it stores";
  return "";
}

const Stage* computed_with(const Program& p, const Schedule& s, const std::string& red) {
  for (const auto& [name, ss] : s.stages)
    if (ss.compute_with && ss.compute_with->stage == red) return p.find_stage(name);
  return nullptr;
}

namespace {

// The entry with only what a fused stage keeps: its placement (and where
// its storage lives), precision and this directive (`loops` and the rest
// belong to the fused loop).
StageSchedule fused_part(const StageSchedule& ss) {
  StageSchedule only;
  only.compute = ss.compute;
  only.store = ss.store;
  only.precision = ss.precision;
  only.compute_with = ss.compute_with;
  only.store_in = ss.store_in;
  return only;
}

struct ComputeWithDirective : Directive {
  ComputeWithDirective() : Directive("compute_with") {}

  void parse_value(const nlohmann::json& v, StageSchedule& ss, const std::string& path) const override {
    json::check_keys(v, path, {"stage", "lanes"});
    if (!v.contains("stage") || !v.contains("lanes")) json::fail(path, "needs \"stage\" and \"lanes\"");
    ss.compute_with = ComputeWith{json::get_string(v["stage"], path + ".stage"),
                                  static_cast<int>(json::get_int(v["lanes"], path + ".lanes", 2, kMaxLanes))};
  }
  void print(const StageSchedule& ss, nlohmann::json& js) const override {
    if (ss.compute_with) js["compute_with"] = {{"stage", ss.compute_with->stage}, {"lanes", ss.compute_with->lanes}};
  }

  void check(const CheckContext& c) const override {
    if (!c.ss.compute_with) return;
    const ComputeWith& cw = *c.ss.compute_with;
    const std::string where = c.where() + ": compute_with '" + cw.stage + "'";
    if (const std::string e = compute_with_problem(c.program, c.stage, cw.stage); !e.empty()) throw ScheduleError(e);
    const int64_t n = c.stage.shape.back().value;
    const Stage& red = c.program.stage(cw.stage);
    const StagePrecision rp = stage_precision(c.program, c.schedule, red.name);
    const int lanes = c.target ? c.target->vector_lanes(rp.accumulate) : 0;
    if (cw.lanes < 2 || cw.lanes > kMaxLanes || cw.lanes > n || (lanes > 1 && cw.lanes % lanes != 0))
      throw ScheduleError(where + ": lanes " + std::to_string(cw.lanes) + " must be 2 to " +
                          std::to_string(kMaxLanes) + ", at most the row's " + std::to_string(n) + " points" +
                          (lanes > 1 ? " and whole vectors of " + std::to_string(lanes) + " lanes of " +
                                           std::string(to_string(rp.accumulate)) + " on target " + c.target->name
                                     : std::string()));
    if (c.ss.compute.kind == Placement::Kind::Inline)
      throw ScheduleError(where + " stores '" + c.stage.name + "' as the row is summed; it cannot be inline: "
                          "compute it at root or at a loop of a consumer");
    if (!(fused_part(c.ss) == c.ss))
      throw ScheduleError(
          where +
          " schedules the fused loop itself, so the stage's entry holds only compute, "
          "store, store_in, precision and compute_with (no loops, cache, pipeline, specialize or "
          "device)");
    const StageSchedule* rs = c.schedule.find(red.name);
    if (!rs || !(fused_part(*rs) == *rs) || rs->compute != c.ss.compute)
      throw ScheduleError(where + " runs '" + red.name + "' in the same loop, so '" + red.name +
                          "' must be computed where '" + c.stage.name + "' is (" + to_string(c.ss.compute) +
                          ") with no loop directives of its own (rfactor, update, cache, ...); it has " +
                          (rs ? "compute " + to_string(rs->compute) +
                                    (fused_part(*rs) == *rs ? std::string() : " and loop directives")
                              : std::string("no entry")));
    if (rp.storage != rp.accumulate)
      throw ScheduleError(where + ": '" + red.name + "' stores " + std::string(to_string(rp.storage)) +
                          " but accumulates in " + std::string(to_string(rp.accumulate)) +
                          "; the fused loop combines its lanes in place, so the two must agree");
    for (const auto& [name, other] : c.schedule.stages)
      if (name != c.stage.name && other.compute_with && other.compute_with->stage == red.name)
        throw ScheduleError(where + ": stage '" + name + "' is computed with '" + red.name +
                            "' too; a reduction's loop fuses one stage");
  }

  // Both stages' steps, fused at the step loop: the stored points and the
  // lanes of partials vectorized across a step, the partials computed where
  // the stage is, the reduction's own update one vector reduce of the lanes.
  // Lowering (backends/Lower.cpp) defined the stage as an update over the
  // steps and the reduction's partials as `fused_partials`.
  void apply(ApplyContext& c) const override {
    const StageSchedule& ss = c.schedule();
    if (!ss.compute_with) return;
    const Stage& red = c.program().stage(ss.compute_with->stage);
    const std::string& r = red.rvars[0].name;
    const Halide::RVar ri(inner_loop(r)), ro(outer_loop(r)), lane(rfactor_lane(r));
    Halide::Func e = c.func(), part = c.fused_partials(red.name), s = c.reducer_of(red.name);
    if (ss.compute.kind == Placement::Kind::At)
      part.compute_at(c.consumer_loop(ss.compute));
    else
      part.compute_root();
    part.vectorize(Halide::Var(rfactor_lane(r)));
    part.update(0).reorder(ri, ro).vectorize(ri);
    // Each lane of a step stores its own point (no race): atomic() lets
    // Halide vectorize the update without proving it.
    e.update(0).atomic(true).reorder(ri, ro).vectorize(ri);
    e.update(0).compute_with(part.update(0), ro);
    s.update(0).atomic().vectorize(lane);
    // The rest of the row, in guarded vectors.
    if (e.function().updates().size() > 1) {
      const Halide::RVar rest(split_rest(r));
      const int w = c.target().vector_lanes(c.stage().dtype);
      e.update(1).atomic(true).vectorize(rest, std::max(w, 1), Halide::TailStrategy::GuardWithIf);
      part.update(1).vectorize(rest, std::max(w, 1), Halide::TailStrategy::GuardWithIf);
    }
  }

  std::string explain_head(const StageSchedule& ss) const override {
    if (!ss.compute_with) return "";
    return ", computed with " + ss.compute_with->stage + ": one pass over the row in steps of " +
           std::to_string(ss.compute_with->lanes) + " points, each stored and folded into as many lanes of " +
           ss.compute_with->stage + "'s partials";
  }

 protected:
  // Each reduction that reads the stage at its own indices, in 1, 2, 4 and
  // 8 vectors of lanes, with both entries cleared to what the fused loop
  // keeps (the check rejects a reduction placed elsewhere).
  std::vector<StageSchedule> proposals(const CheckContext& c) const override {
    std::vector<StageSchedule> r;
    if (c.stage.reduce) return r;
    const int lanes = c.target ? std::max(1, c.target->vector_lanes(DType::F32)) : 16;
    for (const std::string& red : c.program.consumers(c.stage.name)) {
      if (!compute_with_problem(c.program, c.stage, red).empty()) continue;
      for (const int k : {1, 2, 4, 8}) {
        StageSchedule v = fused_part(c.ss);
        v.store.reset();
        v.compute_with = ComputeWith{red, k * lanes};
        r.push_back(v);
      }
    }
    return r;
  }
};

}  // namespace

const Directive& compute_with_directive() { return instance<ComputeWithDirective>(); }

}  // namespace pto::directives
