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
#include "schedules/directives/Directive.h"
#include "target/Target.h"

namespace pto::tuner {

class Mutator {
 public:
  Mutator(const Program& p, const Target& t, double max_rel_error);

  // `s` with `count` directive changes (each on a random stage, drawn by its
  // share of the program's FLOPs: where the time goes, plus a floor for the
  // cheap ones); nullopt when no directive offered a change, or the changes
  // undid each other. The result is not validated as a whole.
  // `changes` (if given) receives "stage.directive" of each change.
  std::optional<Schedule> mutate(const Schedule& s, std::mt19937_64& rng, int count = 1,
                                 std::vector<std::string>* changes = nullptr) const;

  // `s` with directive `d`'s first allowed candidate on every stage that has
  // one, in program order (each given the entries set before it); nullopt
  // when no stage has one. Not validated as a whole.
  std::optional<Schedule> apply_everywhere(const Schedule& s, const directives::Directive& d) const;

 private:
  bool allowed(const Stage& st, const StageSchedule& before, const StageSchedule& after) const;

  const Program& p_;
  const Target& t_;
  double max_rel_error_;
  std::vector<double> stage_weights_;  // per stage of p_, for the draw of a stage
};

}  // namespace pto::tuner
