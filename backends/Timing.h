// Wall-clock timing with warm-up and repetitions, reported as median and
// spread: the one timing routine used by `pto run`, the benchmarks and the
// autotuner's measurer, so their figures are comparable.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

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
    const auto t0 = clock::now();
    f();
    const auto t1 = clock::now();
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
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
