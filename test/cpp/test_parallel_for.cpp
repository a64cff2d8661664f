// The JIT kernels' parallel loop runner (backends/ParallelFor.h): every task
// runs exactly once whatever the thread count, sizes and costs; the first
// error code comes back and stops the tasks not yet started; blocks are
// contiguous and in order per thread; an idle thread takes work from a busy
// one's block.
#include <omp.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "backends/ParallelFor.h"

namespace {

using pto::run_tasks;

}  // namespace

TEST_CASE("run_tasks runs every task once for any thread count and size", "[parallel]") {
  for (const int threads : {1, 2, 3, 4, 7}) {
    for (const int size : {0, 1, 2, 3, 5, 28, 97, 1000}) {
      for (const int min : {0, -3, 11}) {
        // Catch's assertions are not thread-safe: the tasks only count.
        std::vector<std::atomic<int>> seen(static_cast<size_t>(size));
        std::atomic<int> outside{0};
        const int rc = run_tasks(threads, min, size, [&](int i) {
          if (i < min || i >= min + size) return outside.fetch_add(1), 0;
          seen[static_cast<size_t>(i - min)].fetch_add(1);
          return 0;
        });
        INFO("threads " << threads << " size " << size << " min " << min);
        CHECK(rc == 0);
        CHECK(outside.load() == 0);
        for (const auto& s : seen) CHECK(s.load() == 1);
      }
    }
  }
}

TEST_CASE("run_tasks gives each thread a contiguous block in order", "[parallel]") {
  // Whatever the timing, a thread runs its own block from its start upwards,
  // then what it takes from the other's block from that block's end downwards:
  // its tasks in the order it ran them are one increasing run of consecutive
  // indices from 0 or size / 2, then one decreasing run from size / 2 - 1 or
  // size - 1.
  std::mutex m;
  std::map<std::thread::id, std::vector<int>> by_thread;
  const int size = 16;
  const int rc = run_tasks(2, 0, size, [&](int i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const std::lock_guard<std::mutex> lock(m);
    by_thread[std::this_thread::get_id()].push_back(i);
    return 0;
  });
  CHECK(rc == 0);
  for (const auto& [t, tasks] : by_thread) {
    REQUIRE(!tasks.empty());
    const int start = tasks[0];
    CHECK((start == 0 || start == size / 2));
    size_t k = 1;
    while (k < tasks.size() && tasks[k] == tasks[k - 1] + 1) ++k;
    if (k == tasks.size()) continue;
    CHECK(tasks[k] == (start == 0 ? size - 1 : size / 2 - 1));
    for (++k; k < tasks.size(); ++k) CHECK(tasks[k] == tasks[k - 1] - 1);
  }
}

TEST_CASE("run_tasks balances tasks of uneven cost", "[parallel]") {
  // Costs grow with the index (causal attention's query blocks): the thread
  // with the cheap first half runs out first and takes tasks from the end of
  // the other's block, so both threads run some of the second half.
  std::mutex m;
  std::map<std::thread::id, std::set<int>> by_thread;
  const int size = 20;
  run_tasks(2, 0, size, [&](int i) {
    std::this_thread::sleep_for(std::chrono::microseconds(200 * (i + 1)));
    const std::lock_guard<std::mutex> lock(m);
    by_thread[std::this_thread::get_id()].insert(i);
    return 0;
  });
  if (omp_get_max_threads() < 2) return;
  REQUIRE(by_thread.size() == 2);
  const std::set<int>& cheap =
      by_thread.begin()->second.count(0) ? by_thread.begin()->second : by_thread.rbegin()->second;
  int taken = 0;
  for (const int i : cheap) taken += i >= size / 2 ? 1 : 0;
  CHECK(taken >= 2);
  CHECK(cheap.count(size - 1) == 1);  // taken from the far end
}

TEST_CASE("run_tasks returns the first error and skips the tasks not yet started", "[parallel]") {
  for (const int threads : {1, 2, 4}) {
    std::atomic<int> ran{0};
    const int rc = run_tasks(threads, 0, 400, [&](int i) {
      ran.fetch_add(1);
      std::this_thread::sleep_for(std::chrono::microseconds(50));
      return i == 3 ? -17 : 0;
    });
    INFO("threads " << threads);
    CHECK(rc == -17);
    CHECK(ran.load() < 400);
  }
}

TEST_CASE("run_tasks inside an OpenMP region runs on the calling thread", "[parallel]") {
  std::atomic<int> other{0}, count{0}, team{0};
#pragma omp parallel num_threads(2)
  {
    const int me = omp_get_thread_num();
    team.fetch_add(1);
    run_tasks(2, 0, 10, [&](int) {
      if (omp_get_thread_num() != me) other.fetch_add(1);
      count.fetch_add(1);
      return 0;
    });
  }
  CHECK(other.load() == 0);
  CHECK(count.load() == 10 * team.load());
}
