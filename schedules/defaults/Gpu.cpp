#include "schedules/defaults/Gpu.h"

#include <algorithm>

#include "dsl/Error.h"
#include "schedules/LoopNest.h"
#include "schedules/defaults/Rules.h"

namespace pto {
namespace {

// Blocks x threads over the (up to) two innermost pure dims of `st`.
void map_stage(const Stage& st, const Target& t, StageSchedule& ss) {
  ss.device = t.device;
  const size_t r = st.vars.size();
  const size_t mapped = std::min<size_t>(r, 2);
  const int64_t per_dim = mapped == 2 ? 16 : std::min(64, t.gpu_max_threads_per_block);
  LoopSchedule ls;
  std::vector<std::string> blocks, threads;
  for (size_t k = r - mapped; k < r; ++k) {
    const std::string& v = st.vars[k];
    const Dim& d = st.shape[k];
    const int64_t tile = d.is_symbolic() ? per_dim : std::min(per_dim, d.value);
    ls.tile[v] = {tile};
    blocks.push_back(outer_loop(v));
    threads.push_back(inner_loop(v));
  }
  ls.order = blocks;
  ls.order.insert(ls.order.end(), threads.begin(), threads.end());
  ss.gpu.blocks = blocks;
  ss.gpu.threads = threads;
  if (st.reduce) {
    LoopSchedule up = ls;
    for (const RVar& rv : st.rvars) up.order.push_back(rv.name);
    ss.update = up;
  }
  ss.loops = ls;
}

}  // namespace

Schedule gpu_default_schedule(const Program& p, const Target& t) {
  if (!t.has_device())
    throw TargetError("gpu_default_schedule: target '" + t.name +
                      "' has no GPU device; use e.g. host-opencl or cuda");
  Schedule s;
  for (const Stage& st : p.stages()) {
    const bool out = p.is_output(st.name);
    if (!st.reduce && !out && (st.kind == OpKind::Elementwise || st.kind == OpKind::DataMovement)) {
      s[st.name].compute.kind = Placement::Kind::Inline;
      continue;
    }
    if (st.vars.empty()) {  // a scalar result: too small to launch for; stays on the host
      s[st.name];
      continue;
    }
    map_stage(st, t, s[st.name]);
  }
  return s;
}

}  // namespace pto
