#include "schedules/directives/AccumulatorAt.h"

#include "dsl/Error.h"
#include "schedules/LoopNest.h"
#include "schedules/directives/Json.h"
#include "schedules/directives/NameField.h"

namespace pto::directives {
namespace {

struct AccumulatorAtDirective : NameField<&StageSchedule::accumulator_at> {
  AccumulatorAtDirective() : NameField("accumulator_at") {}

  void check_set(const CheckContext& c) const override {
    const StageSchedule& ss = c.ss;
    const std::string where = c.where();
    if (!c.stage.reduce)
      throw ScheduleError(where +
                          " has no reduction, so it has no accumulator to place (accumulator_at)");
    if (ss.compute.kind == Placement::Kind::Inline)
      throw ScheduleError(where + " is inline, so it has no accumulator to place (accumulator_at)");
    const auto pure = loop_nest(c.stage, ss.loops, false);
    if (!find_loop(pure, ss.accumulator_at))
      throw ScheduleError(where + ": accumulator_at names unknown loop '" + ss.accumulator_at +
                          "'; loops of its pure definition: " + join(loop_names(pure)));
    // A factor split of that loop leaves Halide an accumulator region it
    // sizes wrongly (a negative allocation, found by test_differential).
    const auto u = ss.loops.unroll.find(ss.accumulator_at);
    if (ss.loops.vectorize == ss.accumulator_at || (u != ss.loops.unroll.end() && u->second != 0))
      throw ScheduleError(
          where + ": accumulator_at loop '" + ss.accumulator_at +
          "' is vectorized or unrolled by a factor; accumulate at a loop outside those");
  }

  bool schedules_reduction() const override { return true; }

  // The helper Func that runs the reduction (an accumulator, an argmin/argmax
  // tuple) is computed per iteration of accumulator_at, else once for the
  // whole stage.
  void apply(ApplyContext& c) const override {
    const auto h = c.helper();
    if (!h) return;
    const StageSchedule& ss = c.schedule();
    Halide::Func g = *h;
    if (!ss.accumulator_at.empty())
      g.compute_at(c.func(), Halide::Var(ss.accumulator_at));
    else
      g.compute_at(c.func(), Halide::Var::outermost());
  }

  // The reduction runs into an accumulator tile inside the pure loops.
  bool explain_update(ExplainContext& e, const Stage& st, const StageSchedule& ss,
                      const UpdateText& u, int depth) const override {
    if (ss.accumulator_at.empty()) return false;
    const std::string acc = st.name + "__acc(" + u.lhs.substr(st.name.size() + 1);
    e.nest(st, ss.loops, false, depth, u.lhs + " = " + acc, ss.accumulator_at, [&](int d) {
      e.line(d, "accumulator " + st.name + "__acc: per iteration of " + ss.accumulator_at);
      e.line(d + 1, acc + " = " + u.init);
      e.set_in_tile(true);  // its pure loops span the tile
      e.nest(u.update_stage, *u.update, true, d + 1,
             acc + " = " + std::string(to_string(*st.reduce)) + "(" + acc + ", " + u.value + ")");
      e.set_in_tile(false);
    });
    return true;
  }

 protected:
  std::vector<StageSchedule> proposals(const CheckContext& c) const override {
    if (!c.stage.reduce) return {};
    return variants(c.ss, loop_nest(c.stage, c.ss.loops, false),
                    [](StageSchedule& v, const Loop& l) { v.accumulator_at = l.name; });
  }
};

}  // namespace

const Directive& accumulator_at_directive() {
  return instance<AccumulatorAtDirective>();
}

}  // namespace pto::directives
