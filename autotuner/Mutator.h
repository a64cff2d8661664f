// Schedule mutations drawn from the directives' candidates(): the search
// space of the model strategy.
//
// A mutation picks a stage of the program and one of the directives
// (schedules/directives/) that offers candidates for it given the rest of the
// schedule, and replaces the stage's entry by one of those candidates. So the
// space holds every structure a directive can express (tiles at any level,
// loop orders, vectorization along any contiguous dim, compute_at / store_at
// levels, rfactor and split-K across cores, operand caches, bf16 pairs,
// online softmax, fused partials, accumulator tiles, pipelining, unrolls,
// precision), a new directive joins the search with no change here, and the
// search starts where the default rules left off instead of at random.
// Candidates that change the numbers (narrower storage or compute, bf16
// pairs) are offered only under an accuracy budget that allows them.
#pragma once

#include <optional>
#include <random>
#include <string>
#include <vector>

#include "dsl/Program.h"
#include "schedules/Schedule.h"
#include "target/Target.h"

namespace pto::tuner {

class Mutator {
 public:
  Mutator(const Program& p, const Target& t, double max_rel_error);

  // `s` with `count` directive changes (each on a random stage); nullopt when
  // no directive offered a change. The result is not validated as a whole.
  // `changes` (if given) receives "stage.directive" of each change.
  std::optional<Schedule> mutate(const Schedule& s, std::mt19937_64& rng, int count = 1,
                                 std::vector<std::string>* changes = nullptr) const;

 private:
  bool allowed(const Stage& st, const StageSchedule& before, const StageSchedule& after) const;

  const Program& p_;
  const Target& t_;
  double max_rel_error_;
};

}  // namespace pto::tuner
