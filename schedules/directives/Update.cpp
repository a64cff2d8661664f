#include "schedules/directives/Update.h"

#include "dsl/Error.h"
#include "schedules/LoopNest.h"
#include "schedules/directives/DotPairs.h"
#include "schedules/directives/Json.h"
#include "schedules/directives/Loops.h"

namespace pto::directives {
namespace {

// The helper's pure definition (the reduction's identity) covers the same
// region as its update. Left unscheduled, Halide writes it one scalar at a
// time and the vectorized update at once reloads it as vectors: a
// store-forwarding stall per tile, which made max pooling 1.5-3x slower than
// the same nest summing (the sum's init is a stage of its own). So the init
// is vectorized along the update's vector dim, its last vector shifted
// inwards (writing the identity twice is harmless), or rounded up where
// pad_lanes computes whole vectors along it. Unrolling it as the
// update is unrolled was measured too: max pooling no faster, a 6 x 64
// convolution tile 1.2x slower.
void schedule_helper_init(const Stage& st, Halide::Func& h, const StageSchedule& ss) {
  const LoopSchedule& u = *ss.update;
  const auto nest = loop_nest(update_stage(st, &ss), u, true);
  const Loop* l = find_loop(nest, u.vectorize);
  if (l && !l->reduction && u.vector_width > 1)
    h.vectorize(Halide::Var(l->dim), u.vector_width,
                l->dim == ss.pad_lanes ? Halide::TailStrategy::RoundUp
                                       : Halide::TailStrategy::ShiftInwards);
}

struct UpdateDirective : Directive {
  UpdateDirective() : Directive("update") {}

  void parse_value(const nlohmann::json& v, StageSchedule& ss,
                   const std::string& path) const override {
    json::check_keys(v, path, loop_fields());
    ss.update.emplace();
    parse_loops(v, path, *ss.update);
  }
  void print(const StageSchedule& ss, nlohmann::json& js) const override {
    if (!ss.update) return;
    nlohmann::json u = nlohmann::json::object();
    print_loops(*ss.update, u);
    js["update"] = u;
  }

  void check(const CheckContext& c) const override {
    const StageSchedule& ss = c.ss;
    if (!ss.update) return;
    if (!c.stage.reduce)
      throw ScheduleError(c.where() + " has no reduction, so it has no \"update\" to schedule");
    // With an accumulator tile, the update's pure loops span that tile only.
    // Summed in pairs, the loop k counts pairs: its tiles are checked against half the extent.
    check_loops(update_stage(c.stage, &ss), *ss.update, true, c.target, c.precision.accumulate,
                ss.compute.kind == Placement::Kind::At || !ss.accumulator_at.empty());
  }

  bool schedules_reduction() const override { return true; }

  // On the Func that runs the reduction. In a helper Func (an accumulator
  // tile, argmin/argmax) the nest is taken from the stage itself, not the
  // paired stage update_stage() makes: that is how it has always been lowered
  // (the extents only decide whether an unroll or vector width splits a
  // loop further), and generated code is kept identical.
  void apply(ApplyContext& c) const override {
    const StageSchedule& ss = c.schedule();
    // An rfactor with short_below applies them to its short version itself.
    if (!ss.update || (ss.rfactor && ss.rfactor->short_below)) return;
    if (auto h = c.helper()) {
      apply_loops(c.stage(), h->update(0), *ss.update, true, false, false, nullptr, ss.pad_lanes);
      schedule_helper_init(c.stage(), *h, ss);
    } else if (c.update_in_func())
      apply_loops(update_stage(c.stage(), &ss), c.func().update(0), *ss.update, true, false);
  }

 protected:
  std::vector<StageSchedule> proposals(const CheckContext& c) const override {
    if (!c.stage.reduce || c.ss.compute.kind == Placement::Kind::Inline) return {};
    const LoopSchedule base = c.ss.update.value_or(LoopSchedule{});
    return variants(
        c.ss,
        update_loop_proposals(update_stage(c.stage, &c.ss), base, c.target, c.precision.accumulate),
        [](StageSchedule& v, const LoopSchedule& ls) { v.update = ls; });
  }
};

}  // namespace

const Directive& update_directive() {
  return instance<UpdateDirective>();
}

}  // namespace pto::directives
