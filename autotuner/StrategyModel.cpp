// The model-guided strategy: a cost model (CostModel.h) trained on every
// measurement picks the predicted-fastest of a pool of random and mutated
// genomes; failures are trained as slower than anything measured.
#include <algorithm>
#include <cmath>
#include <set>

#include "autotuner/CostModel.h"
#include "autotuner/Strategy.h"

namespace pto::tuner {
namespace {

class ModelStrategy : public SeededStrategy {
 public:
  ModelStrategy(const SearchSpace& space, uint64_t seed) : SeededStrategy("model", space, seed) {}

  Genome propose() override {
    if (ok_ < kWarmup || !model_.trained() || chance(kExplore)) return remember(space_.random(rng_));
    std::vector<std::pair<Genome, double>> best;  // measured, fastest first
    for (size_t i = 0; i < g_.size(); ++i)
      if (std::isfinite(ms_[i])) best.push_back({g_[i], ms_[i]});
    std::stable_sort(best.begin(), best.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
    Genome pick;
    double pick_score = INFINITY;
    for (int i = 0; i < kPool; ++i) {
      Genome c = (i % 2 == 0 || best.empty())
                     ? space_.random(rng_)
                     : space_.mutate(best[static_cast<size_t>(i / 2) % std::min<size_t>(best.size(), 4)].first, rng_,
                                     std::uniform_int_distribution<int>(1, 3)(rng_));
      if (proposed_.count(c)) continue;
      double score;
      try {
        score = model_.predict(schedule_features(space_.program(), space_.target(), space_.decode(c)));
      } catch (const std::exception&) {
        continue;
      }
      if (score < pick_score) {
        pick_score = score;
        pick = c;
      }
    }
    return remember(pick.empty() ? space_.random(rng_) : pick);
  }

  void observe(const Genome& g, double ms) override {
    std::vector<double> f;
    try {
      f = schedule_features(space_.program(), space_.target(), space_.decode(g));
    } catch (const std::exception&) {
      return;
    }
    g_.push_back(g);
    ms_.push_back(ms);
    x_.push_back(f);
    if (std::isfinite(ms)) ++ok_;
    // Targets: log time; failures one unit (x e) slower than the slowest success.
    double worst = 0;
    for (double m : ms_)
      if (std::isfinite(m)) worst = std::max(worst, std::log(m));
    std::vector<double> y;
    for (double m : ms_) y.push_back(std::isfinite(m) ? std::log(m) : worst + 1);
    model_.fit(x_, y);
  }

 private:
  static constexpr size_t kWarmup = 8;
  static constexpr int kPool = 96;
  static constexpr double kExplore = 0.15;

  Genome remember(Genome g) {
    proposed_.insert(g);
    return g;
  }

  RidgeModel model_;
  std::vector<Genome> g_;
  std::vector<double> ms_;
  std::vector<std::vector<double>> x_;
  std::set<Genome> proposed_;
  size_t ok_ = 0;
};

}  // namespace

std::unique_ptr<Strategy> make_model_strategy(const SearchSpace& space, uint64_t seed) {
  return std::make_unique<ModelStrategy>(space, seed);
}

}  // namespace pto::tuner
