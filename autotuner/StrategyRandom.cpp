// The random strategy (uniform samples of the search space) and the factory.
#include "autotuner/Strategy.h"
#include "dsl/Error.h"

namespace pto::tuner {
namespace {

class RandomStrategy : public SeededStrategy {
 public:
  RandomStrategy(const SearchSpace& space, uint64_t seed) : SeededStrategy("random", space, seed) {}
  Proposal propose() override {
    if (auto s = next_seed()) return *s;
    return genome(space_.random(rng_));
  }
  void observe(const Proposal&, double) override {}
};

}  // namespace

std::unique_ptr<Strategy> make_random_strategy(const SearchSpace& space, uint64_t seed) {
  return std::make_unique<RandomStrategy>(space, seed);
}

std::vector<std::string> strategy_names() { return {"random", "evolutionary", "model"}; }

std::unique_ptr<Strategy> make_strategy(const std::string& name, const SearchSpace& space, uint64_t seed) {
  if (name == "random") return make_random_strategy(space, seed);
  if (name == "evolutionary") return make_evolutionary_strategy(space, seed);
  if (name == "model") return make_model_strategy(space, seed);
  throw Error("unknown strategy '" + name + "'; valid: random, evolutionary, model");
}

}  // namespace pto::tuner
