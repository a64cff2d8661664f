// Per-stage time and memory of a scheduled program, from its own run.
//
// profile_stages() runs the kernel instrumented (Kernel's trace_stages)
// twice over. A first run traces every stage once: which stages have loops
// at root and which are computed inside another stage's loops, how many
// productions each makes and its largest buffer (bytes of one realization).
// Then a kernel tracing the root stages only runs repeatedly for at least
// `min_seconds`, timing each root stage's productions by the wall clock:
// with a few events per stage per run, the figures are the kernel's own
// (tracing every tile of a fused stage costs about a quarter microsecond
// per event, which would swamp a 50-us kernel). A stage computed inside
// another's loops is fused: its time is part of that stage's and is not
// separated; inlined stages have no loops of their own. The run's heap
// peak comes with them.
//
// Unlike Halide's sampling profiler, which reads ~0 ms for stages shorter
// than its sampling interval, every root production is measured. `pto run
// --profile`, `k.profile_stages(...)` and `pypto.plots.stage_profile` show it.
#pragma once

#include <string>
#include <vector>

#include "backends/Jit.h"

namespace pto::debug {

struct StageTime {
  std::string stage, op;
  std::string placement;    // "root", "inside <stage>", "inlined"
  double ms = 0;            // root stages: wall time per run, the stages fused into it included
  double share = 0;         // root stages: ms / the run's time
  double productions = 0;   // per run
  size_t buffer_bytes = 0;  // its largest buffer
};

struct StageProfile {
  std::string program;
  std::vector<StageTime> stages;  // in order of first production, then the inlined ones
  double run_ms = 0;              // the traced run's wall time, per run
  int runs = 0;
  size_t peak_bytes = 0;       // the run's heap peak
  std::string report() const;  // a table, one row per stage
};

// Profiles `p` under `s` on `inputs` (Program::inputs() order).
StageProfile profile_stages(const Program& p, const Schedule& s, const Target& t,
                            const std::vector<BufferRef>& inputs, double min_seconds = 0.2);

}  // namespace pto::debug
