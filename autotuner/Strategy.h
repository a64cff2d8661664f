// Search strategies: which candidate to measure next.
//
//   random        uniform samples of the genome space (SearchSpace.h)
//   evolutionary  tournament selection from the best measured genomes,
//                 uniform crossover and 1-3 knob mutations, some fresh samples
//   model         MetaSchedule-style: a pool of schedules mutated from the
//                 best measured ones (the default first) by the directives'
//                 candidates() (Mutator.h), plus genome samples, ranked by
//                 gradient-boosted trees (CostModel.h) trained online and
//                 warm-started from the database; the predicted fastest new
//                 one is measured next, with some exploration
// The genome strategies propose the rule-based seeds of the space first.
// Every strategy draws from one std::mt19937_64 seeded with --seed, so a search
// is deterministic for a fixed seed and the same measurements.
#pragma once

#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "autotuner/SearchSpace.h"

namespace pto::tuner {

// One candidate: a genome of the space (the tuner decodes it) or a schedule.
struct Proposal {
  Genome genome;                     // empty for a schedule from a mutation
  std::optional<Schedule> schedule;  // set when it is not decoded from `genome`
  std::string origin;                // the trial's strategy in the database ("seed", "model", ...)
};

// A measured candidate of another workload of the same program, as the cost
// model sees it: its features and log(time / that workload's default time).
struct TransferSample {
  std::vector<float> features;
  float relative_log_time = 0;
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual std::string name() const = 0;
  virtual Proposal propose() = 0;
  // A measured candidate (the default schedule first): its median time in ms,
  // or +infinity when it failed or was invalid.
  virtual void observe(const Proposal& p, double ms) = 0;
  // Earlier measurements of related workloads (before the first propose()).
  virtual void warm_start(std::vector<TransferSample> samples) {}
};

// What every strategy holds: its name, the space it draws from and its generator.
class SeededStrategy : public Strategy {
 public:
  SeededStrategy(std::string name, const SearchSpace& space, uint64_t seed)
      : space_(space), rng_(seed), name_(std::move(name)) {}
  std::string name() const override { return name_; }

 protected:
  // True with probability p (one draw from the generator).
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  // The space's next unproposed seed, if any.
  std::optional<Proposal> next_seed() {
    if (!seeds_loaded_) {
      seeds_ = space_.seeds();
      seeds_loaded_ = true;
    }
    if (next_seed_ >= seeds_.size()) return std::nullopt;
    return Proposal{seeds_[next_seed_++], std::nullopt, "seed"};
  }
  Proposal genome(Genome g) const { return {std::move(g), std::nullopt, name_}; }

  const SearchSpace& space_;
  std::mt19937_64 rng_;

 private:
  std::string name_;
  std::vector<Genome> seeds_;
  size_t next_seed_ = 0;
  bool seeds_loaded_ = false;
};

std::vector<std::string> strategy_names();
// Throws Error naming the valid strategies.
std::unique_ptr<Strategy> make_strategy(const std::string& name, const SearchSpace& space, uint64_t seed);

// The individual strategies (StrategyRandom.cpp, StrategyEvolutionary.cpp, StrategyModel.cpp).
std::unique_ptr<Strategy> make_random_strategy(const SearchSpace& space, uint64_t seed);
std::unique_ptr<Strategy> make_evolutionary_strategy(const SearchSpace& space, uint64_t seed);
std::unique_ptr<Strategy> make_model_strategy(const SearchSpace& space, uint64_t seed);

}  // namespace pto::tuner
