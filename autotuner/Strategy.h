// Search strategies: which genome (autotuner/SearchSpace.h) to measure next.
//
//   random        uniform samples of the space
//   evolutionary  tournament selection from the best measured candidates,
//                 uniform crossover and 1-3 knob mutations, some fresh samples
//   model         a ridge-regression cost model (CostModel.h) trained online on
//                 every measurement ranks a pool of random and mutated
//                 candidates; the predicted fastest is measured next
// Every strategy draws from one std::mt19937_64 seeded with --seed, so a search
// is deterministic for a fixed seed and the same measurements.
#pragma once

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "autotuner/SearchSpace.h"

namespace pto::tuner {

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual std::string name() const = 0;
  virtual Genome propose() = 0;
  // A measured genome: its median time in ms, or +infinity when it failed.
  virtual void observe(const Genome& g, double ms) = 0;
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

  const SearchSpace& space_;
  std::mt19937_64 rng_;

 private:
  std::string name_;
};

std::vector<std::string> strategy_names();
// Throws Error naming the valid strategies.
std::unique_ptr<Strategy> make_strategy(const std::string& name, const SearchSpace& space, uint64_t seed);

// The individual strategies (StrategyRandom.cpp, StrategyEvolutionary.cpp, StrategyModel.cpp).
std::unique_ptr<Strategy> make_random_strategy(const SearchSpace& space, uint64_t seed);
std::unique_ptr<Strategy> make_evolutionary_strategy(const SearchSpace& space, uint64_t seed);
std::unique_ptr<Strategy> make_model_strategy(const SearchSpace& space, uint64_t seed);

}  // namespace pto::tuner
