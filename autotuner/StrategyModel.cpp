// The model strategy: MetaSchedule's loop (evolve a pool with mutations, rank
// it with a learned cost model, measure the predicted best) over PTO's
// directive candidates, starting from the default schedule.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "autotuner/CostModel.h"
#include "autotuner/Mutator.h"
#include "autotuner/Strategy.h"
#include "schedules/ScheduleJson.h"

namespace pto::tuner {
namespace {

class ModelStrategy : public SeededStrategy {
 public:
  ModelStrategy(const SearchSpace& space, uint64_t seed)
      : SeededStrategy("model", space, seed),
        mutator_(space.program(), space.target(), space.max_rel_error()),
        model_(BoostedTrees::Options{60, 6, 0.2, seed}) {}

  void warm_start(std::vector<TransferSample> samples) override {
    transfer_ = std::move(samples);
    refit();
  }

  Proposal propose() override {
    // First, each directive that owns a stage's loops (AMX tiles, online
    // softmax) on top of the default, on every stage it fits: the model
    // cannot rank those structures until one is measured.
    if (!structural_done_ && !measured_.empty()) {
      structural_done_ = true;
      for (const directives::Directive* d : directives::directives())
        if (d->owns_loops())
          if (auto s = mutator_.apply_everywhere(measured_.front().schedule, *d))
            structural_.push_back({{}, std::move(*s), "seed"});
    }
    while (!structural_.empty()) {
      Proposal c = std::move(structural_.front());
      structural_.erase(structural_.begin());
      if (proposed_.insert(schedule_to_json_string(*c.schedule, -1)).second) return c;
    }
    std::vector<const Measured*> parents;
    for (const Measured& m : measured_)
      if (std::isfinite(m.ms)) parents.push_back(&m);
    std::stable_sort(parents.begin(), parents.end(),
                     [](auto* a, auto* b) { return a->ms < b->ms; });
    if (parents.size() > kParents) parents.resize(kParents);

    // The pool: mutations of the best measured schedules (1-3 directive
    // changes, parents picked by tournament) and a quarter of genome samples.
    std::vector<Proposal> pool;
    std::vector<std::vector<std::string>> changes;  // per pool entry: the directives it changed
    std::vector<std::vector<float>> features;
    std::set<std::string> in_pool;
    for (int i = 0; i < kPool * 2 && static_cast<int>(pool.size()) < kPool; ++i) {
      Proposal c;
      std::vector<std::string> changed;
      if (parents.empty() || i % 4 == 3) {
        c = genome(space_.random(rng_));
        try {
          c.schedule = space_.decode(c.genome);
        } catch (const std::exception&) {
          continue;
        }
      } else if (i % 8 == 1 && parents.size() >= 2) {
        // Crossover by stage: two good parents' entries mixed, so that
        // changes found on different parents (one matmul on AMX tiles in one,
        // the other in the other) meet.
        const size_t a = pick(parents.size()), b = pick(parents.size());
        if (a == b) continue;
        Schedule child = parents[a]->schedule;
        for (const auto& [name, entry] : parents[b]->schedule.stages)
          if (chance(0.5)) child.stages[name] = entry;
        if (child == parents[a]->schedule || child == parents[b]->schedule) continue;
        c = {{}, std::move(child), name()};
        changed.push_back("crossover");
      } else {
        const size_t a = pick(parents.size()), b = pick(parents.size());
        const int n = std::uniform_int_distribution<int>(1, 3)(rng_);
        auto s = mutator_.mutate(parents[std::min(a, b)]->schedule, rng_, n, &changed);
        if (!s) continue;
        c = {{}, std::move(*s), name()};
      }
      const std::string key = schedule_to_json_string(*c.schedule, -1);
      if (proposed_.count(key) || !in_pool.insert(key).second) continue;
      features.push_back(schedule_features(space_.program(), space_.target(), *c.schedule));
      pool.push_back(std::move(c));
      changes.push_back(std::move(changed));
    }
    if (pool.empty()) return genome(space_.random(rng_));
    size_t best = pick(pool.size());
    if (model_.trained() && !chance(kExplore)) {
      // The predicted log time, less a bonus for directives rarely tried: a
      // structure the model has never seen (a split across cores, a packed
      // operand) predicts like its parent, and would otherwise never be measured.
      std::vector<float> score = model_.predict(features);
      for (size_t i = 0; i < score.size(); ++i) {
        double bonus = 0;
        for (const std::string& ch : changes[i]) {
          const auto it = tried_.find(ch);
          bonus =
              std::max(bonus, kNovelty / std::sqrt(1.0 + (it == tried_.end() ? 0 : it->second)));
        }
        score[i] -= static_cast<float>(bonus);
      }
      // Every other proposal, while the pool has any, is the best-ranked one
      // that makes a kind of change not measured yet: the model cannot
      // rank a structure it has not seen (AMX tiles, a split across cores
      // look like plain loops to it until one is measured), and epsilon-greedy
      // picks from a pool of 128 found them in about one search in three.
      std::vector<size_t> order(score.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = i;
      std::stable_sort(order.begin(), order.end(),
                       [&](size_t a, size_t b) { return score[a] < score[b]; });
      // A new kind alone on its parent where the pool has one: paired with
      // another change, a failure of that one (a full unroll timing out)
      // would condemn it.
      best = order.front();
      if (++ranked_ % 2 == 0) {
        const auto novel = [&](size_t i, bool alone) {
          return (!alone || changes[i].size() == 1) &&
                 std::any_of(changes[i].begin(), changes[i].end(),
                             [&](const std::string& ch) { return !tried_.count(ch); });
        };
        const auto first = [&](bool alone) {
          return std::find_if(order.begin(), order.end(),
                              [&](size_t i) { return novel(i, alone); });
        };
        if (auto it = first(true); it != order.end())
          best = *it;
        else if (auto it2 = first(false); it2 != order.end())
          best = *it2;
      }
    }
    const std::string key = schedule_to_json_string(*pool[best].schedule, -1);
    proposed_.insert(key);
    pending_[key] = changes[best];
    return pool[best];
  }

  void observe(const Proposal& p, double ms) override {
    Schedule s;
    try {
      s = p.schedule ? *p.schedule : space_.decode(p.genome);
    } catch (const std::exception&) {
      return;
    }
    const std::string key = schedule_to_json_string(s, -1);
    proposed_.insert(key);
    // A kind of change counts as tried once a schedule making it ran, or
    // failed twice: a first failure may be another change's (a full unroll
    // that timed out next to it), and the kind is then still new.
    if (const auto it = pending_.find(key); it != pending_.end()) {
      for (const std::string& ch : it->second)
        if (std::isfinite(ms) || ++failed_[ch] >= 2) ++tried_[ch];
      pending_.erase(it);
    }
    measured_.push_back({s, schedule_features(space_.program(), space_.target(), s), ms});
    if (std::isfinite(ms) && base_ms_ == 0) base_ms_ = ms;  // the default schedule comes first
    refit();
  }

 private:
  struct Measured {
    Schedule schedule;
    std::vector<float> features;
    double ms;
  };
  static constexpr size_t kParents = 8;
  static constexpr int kPool = 128;
  static constexpr double kExplore = 0.1;
  // In log-time units: an untried directive ranks as if predicted ~16% faster.
  static constexpr double kNovelty = 0.15;
  // This workload's samples weigh more than transferred ones.
  static constexpr float kOwnWeight = 4;

  size_t pick(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }

  // Targets: log(time / default time); failures one unit (x e) slower than
  // the slowest success, so the model learns to avoid them.
  void refit() {
    std::vector<std::vector<float>> x;
    std::vector<float> y, w;
    for (const TransferSample& t : transfer_) {
      x.push_back(t.features);
      y.push_back(t.relative_log_time);
      w.push_back(1);
    }
    double worst = 0;
    for (const Measured& m : measured_)
      if (std::isfinite(m.ms) && base_ms_ > 0) worst = std::max(worst, std::log(m.ms / base_ms_));
    for (const Measured& m : measured_) {
      if (base_ms_ == 0) break;
      x.push_back(m.features);
      y.push_back(static_cast<float>(std::isfinite(m.ms) ? std::log(m.ms / base_ms_) : worst + 1));
      w.push_back(kOwnWeight);
    }
    if (x.size() >= kMinSamples) model_.fit(x, y, w);
  }
  static constexpr size_t kMinSamples = 4;

  Mutator mutator_;
  BoostedTrees model_;
  std::vector<TransferSample> transfer_;
  std::vector<Measured> measured_;
  std::set<std::string> proposed_;
  std::map<std::string, int> tried_;   // kind of change -> measured schedules that made it
  std::map<std::string, int> failed_;  // kind of change -> failed schedules that made it
  std::map<std::string, std::vector<std::string>>
      pending_;     // proposed schedule -> its kinds of change
  int ranked_ = 0;  // proposals ranked by the model
  bool structural_done_ = false;
  std::vector<Proposal> structural_;  // the default with each loop-owning directive
  double base_ms_ = 0;
};

}  // namespace

std::unique_ptr<Strategy> make_model_strategy(const SearchSpace& space, uint64_t seed) {
  return std::make_unique<ModelStrategy>(space, seed);
}

}  // namespace pto::tuner
