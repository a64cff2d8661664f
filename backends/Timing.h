// Wall-clock timing with warm-up and repetitions, reported as median and
// spread: the one timing routine used by `pto run`, the benchmarks and the
// autotuner's measurer, so their figures are comparable.
//
// PTO_TIMING_CLOCK=thread_cpu times the calling thread's CPU time instead: for
// comparing schedules with HL_NUM_THREADS=1 on a machine shared with other
// jobs (time slices lost to them do not count; their cache traffic still does).
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>
#include <cstdlib>
#include <ctime>
#include <string_view>

namespace pto {

struct TimingStats {
  double median_ms = 0, min_ms = 0, max_ms = 0;
  int reps = 0;
};

// Runs `f` `warmup` times, then at least `min_reps` times and until
// `min_seconds` have passed (capped at `max_reps`).
inline TimingStats time_it(const std::function<void()>& f, int warmup = 1, int min_reps = 5,
                           double min_seconds = 0.2, int max_reps = 1000) {
  using clock = std::chrono::steady_clock;
  for (int i = 0; i < warmup; ++i) f();
  std::vector<double> ms;
  const auto start = clock::now();
  while (static_cast<int>(ms.size()) < max_reps) {
    static const bool cpu = [] {
      const char* c = std::getenv("PTO_TIMING_CLOCK");
      return c && std::string_view(c) == "thread_cpu";
    }();
    timespec c0{}, c1{};
    if (cpu) clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
    const auto t0 = clock::now();
    f();
    const auto t1 = clock::now();
    if (cpu) clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
    ms.push_back(cpu ? (c1.tv_sec - c0.tv_sec) * 1e3 + (c1.tv_nsec - c0.tv_nsec) * 1e-6
                     : std::chrono::duration<double, std::milli>(t1 - t0).count());
    if (static_cast<int>(ms.size()) >= min_reps &&
        std::chrono::duration<double>(t1 - start).count() >= min_seconds)
      break;
  }
  std::sort(ms.begin(), ms.end());
  const size_t n = ms.size();
  const double med = n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]);
  return {med, ms.front(), ms.back(), static_cast<int>(n)};
}

}  // namespace pto
