// The default schedule for targets with a GPU device (cuda, opencl,
// host-opencl, ...): the branch default_schedule (Defaults.h) takes for them,
// so that JIT kernels, `pto schedule/explain/run/gen`, generator programs and
// the tuner's baseline all start from the same schedule.
//
// The CPU rules keep every stage on the host. For a target with a device,
// deployment wants the work on that device: elementwise producers stay
// inlined, and every materialized stage runs on the device with its two
// innermost pure dims tiled into GPU blocks x threads (16 x 16, or 64 threads
// for a 1-D stage, clamped to the extent and to the target's thread limit). A
// reduction's update gets the same tiling, with its reduction loops innermost
// and serial in each thread, so it runs on the device too.
#pragma once

#include "dsl/Program.h"
#include "schedules/Schedule.h"
#include "target/Target.h"

namespace pto {

// Throws TargetError if `t` has no device.
Schedule gpu_default_schedule(const Program& p, const Target& t);

}  // namespace pto
