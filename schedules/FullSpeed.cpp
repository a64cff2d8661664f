#include "schedules/FullSpeed.h"

#include <algorithm>

#include "schedules/directives/Specialize.h"

namespace pto {

std::map<std::string, int64_t> full_speed_extents(const Program& p, const Schedule& s) {
  std::map<std::string, int64_t> need;
  const auto at_least = [&](const Dim& d, int64_t n) {
    if (d.is_symbolic() && n > 1) need[d.sym] = std::max(need[d.sym], n);
  };
  for (const Stage& st : p.stages()) {
    const StageSchedule* ss = s.find(st.name);
    // Stages computed inside another's loops follow that stage's tiles; a
    // fused online softmax splits its symbolic keys at run time.
    if (!ss || ss->compute.kind != Placement::Kind::Root || ss->device != "cpu" ||
        ss->online_softmax)
      continue;
    for (const auto& [k, n] : directives::specialize_bounds(st, ss->loops))
      at_least(st.shape[k], n);
    // Lanes of partials (or chunks) along a symbolic reduction: a shorter one
    // leaves lanes empty, unless the stage has a version for short ones.
    if (const auto& rf = ss->rfactor; rf && !rf->short_below)
      for (const RVar& r : st.rvars)
        if (r.name == rf->rvar) at_least(r.extent, rf->factor);
  }
  return need;
}

}  // namespace pto
