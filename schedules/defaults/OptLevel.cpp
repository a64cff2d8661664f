// Optimization levels: the schedule a program runs under at each level
// (Defaults.h at_opt_level). Level 0 is the reference the troubleshooting
// tools start from (bisection enables a schedule on top of it stage by stage,
// directive by directive); each level above adds one kind of transformation,
// so that turning them on one by one finds the kind that changed a result.
#include "dsl/Error.h"
#include "schedules/Validate.h"
#include "schedules/defaults/Defaults.h"
#include "schedules/defaults/Rules.h"

namespace pto {
namespace {

// Level 1: each stage at root with its pure loops parallel over the outer
// dim and vectorized along the contiguous one (the generic stages' default
// rule), and a reduction's update the same over its pure dims, the reduction
// inside them. An update the rule cannot shape (its loops fail validation)
// runs as written.
Schedule vectorized_parallel(const Program& p, const Target& t) {
  Schedule s;
  for (const Stage& st : p.stages()) {
    StageSchedule& ss = s[st.name];
    ss.loops = defaults::parallel_vectorized(st, t);
    if (!st.reduce || st.vars.empty()) continue;
    LoopSchedule u = ss.loops;
    // The update's loops: the pure ones outside the reduction, the
    // contiguous one innermost (vectorized across the reduction).
    u.order.clear();
    for (const auto& [v, tiles] : u.tile) u.order.push_back(v + "_o");
    for (size_t k = 0; k + 1 < st.vars.size(); ++k)
      u.order.push_back(u.tile.count(st.vars[k]) ? st.vars[k] + "_i" : st.vars[k]);
    for (const RVar& r : st.rvars) u.order.push_back(r.name);
    u.order.push_back(st.vars.back());
    ss.update = u;
    try {
      validate(p, s, &t);
    } catch (const ScheduleError&) {
      ss.update.reset();
    }
  }
  // Symbolic dims split into vectors get the version whose vectors shift
  // inwards, as the defaults do (smaller extents run the guarded loops).
  defaults::specialize_symbolic(p, s);
  return s;
}

}  // namespace

Schedule at_opt_level(const Program& p, const Schedule& s, const Target& t) {
  const int level = s.options.opt_level;
  if (level < 0 || level > 3)
    throw ScheduleError(
        "options.opt_level " + std::to_string(level) +
        " is outside 0-3 (0 plain loops, 1 vectorize and parallelize, 2 the schedule, 3 "
        "with fast-math)");
  if (level == 2 || t.has_device()) return s;
  Schedule r;
  if (level == 0) r = plain_schedule(p);
  if (level == 1) r = vectorized_parallel(p, t);
  if (level == 3) {
    r = s;
    for (const Stage& st : p.stages()) r[st.name].fast_math = true;
  }
  r.options = s.options;
  return r;
}

}  // namespace pto
