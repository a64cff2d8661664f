#include "backends/ParallelFor.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "backends/SpinTeam.h"

namespace pto {
namespace {

using Task = int (*)(Halide::JITUserContext*, int, uint8_t*);

int default_threads() {
  static const int n = [] {
    const char* e = std::getenv("HL_NUM_THREADS");
    const int v = e ? std::atoi(e) : 0;
    return v > 0 ? v : omp_get_max_threads();
  }();
  return n;
}

// One thread's block of tasks [next, end), both packed in one word so that
// the owner (taking `next` upwards) and a thief (taking `end - 1` downwards)
// claim with one compare-and-swap each and never take the same task.
struct alignas(64) Block {
  std::atomic<uint64_t> range{0};

  static uint64_t pack(uint32_t next, uint32_t end) { return (uint64_t{next} << 32) | end; }
  void reset(uint32_t next, uint32_t end) {
    range.store(pack(next, end), std::memory_order_relaxed);
  }

  // The owner's next task, or -1 when the block is empty.
  int64_t take_front() {
    uint64_t r = range.load(std::memory_order_relaxed);
    while (true) {
      const uint32_t next = r >> 32, end = r & 0xffffffffu;
      if (next >= end) return -1;
      if (range.compare_exchange_weak(r, pack(next + 1, end), std::memory_order_acq_rel))
        return next;
    }
  }
  // A thief's task: the block's last, farthest from what its owner reads.
  int64_t take_back() {
    uint64_t r = range.load(std::memory_order_relaxed);
    while (true) {
      const uint32_t next = r >> 32, end = r & 0xffffffffu;
      if (next >= end) return -1;
      if (range.compare_exchange_weak(r, pack(next, end - 1), std::memory_order_acq_rel))
        return end - 1;
    }
  }
};

// Halide's do_par_for, on the context's thread count.
int parallel_for(Halide::JITUserContext* user, Task f, int min, int size, uint8_t* closure) {
  auto* ctx = static_cast<ParallelContext*>(user);
  const int threads = ctx->threads > 0 ? ctx->threads : default_threads();
  return run_tasks(threads, min, size, [&](int i) { return f(user, i, closure); });
}

bool halide_pool() {
  static const bool h = [] {
    const char* e = std::getenv("PTO_PARALLEL");
    return e && std::string_view(e) == "halide";
  }();
  return h;
}

}  // namespace

// Blocks in order, then stealing from the far end: why, in ParallelFor.h.
// Measured here, toggled in one process over the suite, held-out and random
// workloads (2-thread Sapphire Rapids VM, 7 interleaved rounds) against
// tasks handed out one at a time: 0.6-0.9x the time on convolutions, batched
// and skinny matmuls (MobileNetV2's 1x1 32 -> 16 at 112x112 0.112 -> 0.066
// ms, 7x7 stride 2 1.09 -> 0.93, [20, 3422] @ [3422, 312] 0.38 -> 0.34), at
// most 1.1x on kernels of a few microseconds. Without the stealing, causal
// attention over 1 head at 1024 tokens took 1.18 ms (0.83 with it).
int run_tasks(int threads, int min, int size, const std::function<int(int)>& task) {
  // What the team's threads share, on cache lines of its own: the caller's
  // stack lines around it are written while the workers read it, and every
  // line a worker reads from the caller's core costs it a transfer.
  struct alignas(64) Call {
    std::atomic<int> status{0};
    const std::function<int(int)>* task;
    int min;
  } call{{0}, &task, min};
  const auto run = [&call](int64_t i) {
    if (call.status.load(std::memory_order_relaxed) != 0) return;
    if (const int r = (*call.task)(call.min + static_cast<int>(i)); r != 0) {
      int expected = 0;
      call.status.compare_exchange_strong(expected, r);
    }
  };
  const int team = std::min(threads, size);
  if (team <= 1 || omp_in_parallel()) {
    for (int i = 0; i < size; ++i) run(i);
    return call.status.load();
  }
  // The blocks are laid out before the team starts, so its threads need not
  // agree on anything: each runs its own, then steals from the others'. (On
  // the stack for the usual few threads: an aligned allocation per call
  // costs as much as the stealing.)
  constexpr int kOnStack = 8;
  Block stack_blocks[kOnStack];
  std::vector<Block> heap_blocks(team > kOnStack ? static_cast<size_t>(team) : 0);
  Block* const blocks = team > kOnStack ? heap_blocks.data() : stack_blocks;
  for (int t = 0; t < team; ++t)
    blocks[t].reset(static_cast<uint32_t>(int64_t{size} * t / team),
                    static_cast<uint32_t>(int64_t{size} * (t + 1) / team));
  const auto body = [&run, blocks, team](int me) {
    for (int k = 0; k < team; ++k) {
      Block& b = blocks[(me + k) % team];
      for (int64_t i; (i = k == 0 ? b.take_front() : b.take_back()) >= 0;) run(i);
    }
  };
  // On the team; else (another call has it, a nested loop, a forked child) here, serially.
  if (!run_on_team(team, body)) body(0);
  return call.status.load();
}

void use_parallel_for(ParallelContext& ctx, int threads) {
  ctx.threads = threads;
  if (!halide_pool()) ctx.handlers.custom_do_par_for = parallel_for;
}

}  // namespace pto
