// The evolutionary strategy: a population of the best measured genomes;
// children by tournament selection, uniform crossover and mutation.
#include <algorithm>
#include <cmath>

#include "autotuner/Strategy.h"

namespace pto::tuner {
namespace {

class EvolutionaryStrategy : public SeededStrategy {
 public:
  EvolutionaryStrategy(const SearchSpace& space, uint64_t seed) : SeededStrategy("evolutionary", space, seed) {}

  Proposal propose() override {
    if (auto s = next_seed()) return *s;
    // Until a few candidates ran, and now and then afterwards, sample fresh genomes.
    if (pop_.size() < kMinPopulation || chance(kFreshRate)) return genome(space_.random(rng_));
    const Genome& a = tournament();
    Genome child = a;
    if (chance(kCrossoverRate)) child = space_.crossover(a, tournament(), rng_);
    const int mutations = std::uniform_int_distribution<int>(1, 3)(rng_);
    return genome(space_.mutate(child, rng_, mutations));
  }

  void observe(const Proposal& p, double ms) override {
    // Failures and schedules without a genome (the default) never become parents.
    if (!std::isfinite(ms) || p.genome.size() != space_.knobs().size()) return;
    pop_.push_back({p.genome, ms});
    std::stable_sort(pop_.begin(), pop_.end(), [](const auto& x, const auto& y) { return x.second < y.second; });
    if (pop_.size() > kPopulation) pop_.resize(kPopulation);
  }

 private:
  static constexpr size_t kPopulation = 12, kMinPopulation = 4;
  static constexpr double kFreshRate = 0.15, kCrossoverRate = 0.5;

  // The better of two random members: selection pressure without losing diversity.
  const Genome& tournament() {
    std::uniform_int_distribution<size_t> pick(0, pop_.size() - 1);
    const size_t i = pick(rng_), j = pick(rng_);
    return pop_[std::min(i, j)].first;  // the population is sorted, lower index is faster
  }

  std::vector<std::pair<Genome, double>> pop_;
};

}  // namespace

std::unique_ptr<Strategy> make_evolutionary_strategy(const SearchSpace& space, uint64_t seed) {
  return std::make_unique<EvolutionaryStrategy>(space, seed);
}

}  // namespace pto::tuner
