// The parallel loops of JIT kernels, run on a team whose workers spin for a
// while between loops instead of parking at once (backends/SpinTeam.h).
//
// Why: Halide's runtime pool parks its workers after a few dozen spins, so
// every parallel loop of a short kernel (softmax has three: max, sum, scale)
// wakes them again. On the virtual machines this project runs on, a parked
// vCPU takes tens of microseconds to wake, which is most of a 0.05-0.3 ms
// kernel: 2 threads, Xeon (Emerald Rapids family) VM, 0.3 s idle before
// each timing, medians of 5 rounds: softmax [1536, 128] 0.088 -> 0.050-0.063
// ms, [1, 768] @ [768, 3072] 0.279 -> 0.195-0.208, mean over the middle axis
// of [8, 197, 768] 0.128 -> 0.074. ONNX Runtime and OpenBLAS spin the same
// way. OMP_WAIT_POLICY=passive stops the spinning, PTO_PARALLEL=halide
// restores Halide's pool. Generated libraries keep Halide's pool.
#pragma once

#include <Halide.h>

#include <functional>

namespace pto {

// A JIT call's context: the thread count its parallel loops use (0: the
// default: HL_NUM_THREADS where set, as for Halide's pool, else OpenMP's
// count, which is one per core the process may run on unless
// OMP_NUM_THREADS says).
struct ParallelContext : Halide::JITUserContext {
  int threads = 0;
};

// Runs task(i) for i in [min, min + size) on up to `threads` threads (the
// calling thread alone inside an OpenMP region, inside another run_tasks'
// task, while another thread's loop holds the team, or after fork) and returns the
// first nonzero code a task returned; after one, the tasks not yet started
// are skipped. Each thread runs one contiguous block of the tasks in order,
// the same block every call: consecutive tasks read consecutive rows, so a
// core's prefetchers follow its operands' streams from one task into the
// next, and it finds its share in its own L2 from the call before. Tasks
// handed out one at a time break every stream at each task. A thread whose
// block is done takes the remaining tasks from the far end of the others'
// blocks, so that tasks of uneven cost (causal attention's query blocks: the
// last reads every key) still keep every core busy.
int run_tasks(int threads, int min, int size, const std::function<int(int)>& task);

// Installs this loop runner on `ctx` unless PTO_PARALLEL=halide.
void use_parallel_for(ParallelContext& ctx, int threads);

}  // namespace pto
