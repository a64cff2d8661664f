// cache: dense copies (packing) of regions of what a stage reads, made at
// one of its loops, optionally transposed (CacheRead in Schedule.h).
#pragma once

#include "schedules/directives/Directive.h"

namespace pto::directives {

const Directive& cache_directive();

// The pure loops of `st` that enclose its reads: all of a pure stage's; a
// reduction's down to its accumulator tile (none without one).
std::vector<std::string> cache_pure_loops(const Stage& st, const StageSchedule& ss);
// Every loop a cache of `st` can be made at: cache_pure_loops, then a
// reduction's update loops.
std::vector<std::string> cache_loops(const Stage& st, const StageSchedule& ss);
// Makes the stage's copies of what `reader` reads, at their loops of the
// stage's Func: the cache directive's lowering. rfactor calls it with its
// intermediate, which reads the operands once it has taken over the update.
void apply_caches(ApplyContext& c, Halide::Func reader);

}  // namespace pto::directives
