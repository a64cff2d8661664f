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
    if (!ss || ss->device != "cpu") continue;
    // A fused online softmax splits its symbolic keys into equal blocks at
    // run time; sequences shorter than one block of query rows leave its
    // tiles mostly empty (causal, 14 heads x 52: 2.1x the static kernel).
    if (const auto& os = ss->online_softmax) {
      if (st.shape.size() >= 2 && !st.rvars.empty()) {
        at_least(st.shape[st.shape.size() - 2], os->rows);
        at_least(st.rvars[0].extent, std::min(os->rows, os->keys));
      }
      continue;
    }
    // Lanes of partials (or chunks) along a symbolic reduction: a shorter one
    // leaves lanes empty, unless the stage has a version for short ones.
    if (const auto& rf = ss->rfactor; rf && !rf->short_below)
      for (const RVar& r : st.rvars)
        if (r.name == rf->rvar) at_least(r.extent, rf->factor);
    // Chunks across cores vectorized along the stage's innermost dim: a
    // row of partials under 64 elements (4 AVX-512 vectors of f32) is mostly
    // its guarded last vector (x @ W with 21 symbolic columns: 0.060 ms, the
    // static kernel 0.011).
    constexpr int64_t kPartialRow = 64;
    if (const auto& rf = ss->rfactor; rf && rf->parallel && !rf->vector_lanes && !st.shape.empty())
      at_least(st.shape.back(), kPartialRow);
    if (ss->compute.kind == Placement::Kind::Root) {
      for (const auto& [k, n] : directives::specialize_bounds(st, ss->loops))
        at_least(st.shape[k], n);
      continue;
    }
    // A stage computed inside another's loops spans, along a dim its host
    // does not tile (a softmax's exp row, computed per row), the whole
    // symbolic extent; inside a tile (a register tile's accumulators) it
    // spans the tile.
    const Stage* host =
        ss->compute.kind == Placement::Kind::At ? p.find_stage(ss->compute.stage) : nullptr;
    const StageSchedule* hs = host ? s.find(host->name) : nullptr;
    if (!host || !hs || ss->loops.vectorize.empty()) continue;
    for (size_t k = 0; k < st.vars.size(); ++k)
      if (st.vars[k] == ss->loops.vectorize && !hs->loops.tile.count(st.vars[k]) &&
          std::find(host->vars.begin(), host->vars.end(), st.vars[k]) != host->vars.end())
        at_least(st.shape[k], ss->loops.vector_width);
  }
  return need;
}

}  // namespace pto
