// pipeline: ring_buffer (fold a stage's storage to N slices), async (run the
// producer as its own task) and prefetch (Pipelining in Schedule.h).
#pragma once

#include "schedules/directives/Directive.h"

namespace pto::directives {

const Directive& pipeline_directive();

}  // namespace pto::directives
