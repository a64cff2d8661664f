// A process-wide team of worker threads for the JIT's parallel loops: the
// caller publishes a job with one store, the workers, spinning on it, start
// at once, and the caller waits on one counter for them to finish.
//
// Why not an OpenMP region: a libgomp parallel region costs 0.67 us to fork
// and join on the 2-vCPU VMs this project runs on (1.05 us with the barrier
// a team needs to agree on its work), where one job published to a spinning
// worker costs 0.30 us (C++ microbenchmarks, Sapphire Rapids VM). The parallel
// loops of kernels of a few microseconds (small matmuls, one row of a
// softmax per core) pay it on every call. Workers spin for a while after each
// job (spin_time in SpinTeam.cpp: a vCPU parked on a futex takes tens of
// microseconds to wake, most of a short kernel), then sleep until the next.
#pragma once

#include <functional>

namespace pto {

// Runs body(0), ..., body(team - 1) concurrently, body(0) on the calling
// thread, and returns when all have returned; true if it did. False, having
// run nothing, when the team cannot take the job: another thread's job holds
// it, the caller is itself inside a job's body (nested loops), or the process
// is a forked child (the team's threads are the parent's). Callers then run
// their work serially. `body` must not throw.
bool run_on_team(int team, const std::function<void(int)>& body);

}  // namespace pto
