// device / gpu: the device a stage runs on (cpu, cuda, opencl) and, off the
// CPU, the loops mapped to GPU blocks and threads (GpuMapping in Schedule.h).
#pragma once

#include "schedules/directives/Directive.h"

namespace pto::directives {

const Directive& device_directive();

}  // namespace pto::directives
