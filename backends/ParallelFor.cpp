#include "backends/ParallelFor.h"

#include <omp.h>
#include <pthread.h>

#include <atomic>
#include <cstdlib>
#include <string_view>

namespace pto {
namespace {

using Task = int (*)(Halide::JITUserContext*, int, uint8_t*);

// GCC's OpenMP is not fork-safe: a child that enters a parallel region waits
// for the parent's workers, which it does not have. A forked child (a Python
// multiprocessing worker, say) runs its loops serially instead.
std::atomic<bool> forked{false};
const bool atfork_registered = [] {
  pthread_atfork(nullptr, nullptr, [] { forked.store(true); });
  return true;
}();

int default_threads() {
  static const int n = [] {
    const char* e = std::getenv("HL_NUM_THREADS");
    const int v = e ? std::atoi(e) : 0;
    return v > 0 ? v : omp_get_max_threads();
  }();
  return n;
}

// Halide's do_par_for: tasks min .. min + size - 1, each returning 0 or an
// error code; after an error the remaining tasks are skipped and the first
// code is returned. One or two tasks per thread go to the same threads on
// every call (static), so that each core finds its share of the operands in
// its own L2 from the call before: [18, 379] @ [379, 192] over 4 column tiles
// took 0.0130 ms handed out one at a time, 0.0114 static (2-thread Sapphire
// Rapids VM, 5 interleaved rounds). More tasks are handed out one at a time
// (dynamic), as Halide's pool does: blocks of uneven cost (the guarded last
// block of rows) balance, and a core slowed by its partner's share of memory
// bandwidth takes fewer of a matrix-vector product's row blocks (Contraction.cpp).
int parallel_for(Halide::JITUserContext* user, Task f, int min, int size, uint8_t* closure) {
  auto* ctx = static_cast<ParallelContext*>(user);
  const int threads = ctx->threads > 0 ? ctx->threads : default_threads();
  std::atomic<int> status{0};
  const auto run = [&](int i) {
    if (status.load(std::memory_order_relaxed) != 0) return;
    if (const int r = f(user, i, closure); r != 0) {
      int expected = 0;
      status.compare_exchange_strong(expected, r);
    }
  };
  // Nested loops (a parallel loop inside a task) run on the calling worker:
  // the team is already busy with the outer loop's tasks.
  if (threads <= 1 || size <= 1 || forked.load() || omp_in_parallel()) {
    for (int i = min; i < min + size; ++i) run(i);
  } else if (size % threads == 0 && size <= 2 * threads) {
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int i = min; i < min + size; ++i) run(i);
  } else {
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (int i = min; i < min + size; ++i) run(i);
  }
  return status.load();
}

bool halide_pool() {
  static const bool h = [] {
    const char* e = std::getenv("PTO_PARALLEL");
    return e && std::string_view(e) == "halide";
  }();
  return h;
}

}  // namespace

void use_parallel_for(ParallelContext& ctx, int threads) {
  (void)atfork_registered;
  ctx.threads = threads;
  if (!halide_pool()) ctx.handlers.custom_do_par_for = parallel_for;
}

}  // namespace pto
