// Random samples of a tuner search space that validate: the rest combine
// knobs invalidly, which the search handles (validation rejects them) and so
// a test skips rather than fails.
#pragma once

#include <random>
#include <vector>

#include "autotuner/SearchSpace.h"
#include "schedules/Validate.h"

namespace pto::test {

inline std::vector<Schedule> valid_samples(const tuner::SearchSpace& space, const Program& p,
                                           const Target& t, int draws, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Schedule> valid;
  for (int i = 0; i < draws; ++i) {
    Schedule s = space.decode(space.random(rng));
    try {
      validate(p, s, &t);
    } catch (const ScheduleError&) {
      continue;
    }
    valid.push_back(std::move(s));
  }
  return valid;
}

}  // namespace pto::test
