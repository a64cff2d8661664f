#include "autotuner/Mutator.h"

#include <nlohmann/json.hpp>

#include "autotuner/SearchSpace.h"
#include "dsl/Analysis.h"
#include "schedules/Validate.h"
#include "schedules/directives/Amx.h"
#include "schedules/directives/Directive.h"

namespace pto::tuner {
namespace {

// The narrowest float type a stage entry computes, stores or accumulates in
// (bf16 pairs and AMX tiles of wider factors count as bf16); 4 bytes when
// nothing is narrowed.
int narrowest_bytes(const Program& p, const Stage& st, const StageSchedule& ss) {
  int b = 4;
  for (const auto& ty : {ss.precision.storage, ss.precision.compute, ss.precision.accumulate})
    if (ty && is_float(*ty)) b = std::min(b, bytes(*ty));
  if (!ss.dot_pairs.empty() || directives::amx_rounds(p, st, ss)) b = 2;
  return b;
}

bool widens(const StageSchedule& ss) {
  for (const auto& ty : {ss.precision.storage, ss.precision.compute, ss.precision.accumulate})
    if (ty && *ty == DType::F64) return true;
  return false;
}

// The shape of a directive's value: the JSON keys it prints, one level into
// objects and lists of objects ("{rfactor{factor,parallel,rvar}}"). Values
// of one shape are one kind of structure (lanes of partials vs a split
// across cores, a copy vs a transposed copy) for the strategy's novelty count.
std::string shape_of(const directives::Directive& d, const StageSchedule& ss) {
  nlohmann::json j = nlohmann::json::object();
  d.print(ss, j);
  std::string r = "{";
  for (const auto& [k, v] : j.items()) {
    r += k;
    const nlohmann::json* o = v.is_object()                                    ? &v
                              : v.is_array() && !v.empty() && v[0].is_object() ? &v[0]
                                                                               : nullptr;
    if (o) {
      r += "{";
      for (const auto& [k2, v2] : o->items()) r += k2 + ",";
      r += "}";
    }
    r += ",";
  }
  return r + "}";
}

}  // namespace

Mutator::Mutator(const Program& p, const Target& t, double max_rel_error)
    : p_(p), t_(t), max_rel_error_(max_rel_error) {
  // 70% by FLOP share, 30% uniform: a BERT FFN's two matmuls (99% of its
  // FLOPs) get most draws, its bias and activation stages still some.
  const auto& stages = p_.stages();
  double total = 0;
  for (const Stage& st : stages) total += stage_flops(st);
  for (const Stage& st : stages)
    stage_weights_.push_back(
        0.3 / static_cast<double>(stages.size()) +
        (total > 0 ? 0.7 * stage_flops(st) / total : 0.7 / static_cast<double>(stages.size())));
}

bool Mutator::allowed(const Stage& st, const StageSchedule& before,
                      const StageSchedule& after) const {
  // f64 is never faster; it only costs trials.
  if (widens(after) && !widens(before)) return false;
  const int b = narrowest_bytes(p_, st, after);
  if (b >= narrowest_bytes(p_, st, before) || b >= 4) return true;
  // Narrowed: every type it now rounds to (bf16 pairs and AMX tiles round to bf16) must fit the
  // budget.
  bool ok = (after.dot_pairs.empty() && !directives::amx_rounds(p_, st, after)) ||
            budget_allows(DType::BF16, max_rel_error_);
  for (const auto& ty :
       {after.precision.storage, after.precision.compute, after.precision.accumulate})
    ok = ok && (!ty || budget_allows(*ty, max_rel_error_));
  return ok;
}

std::optional<Schedule> Mutator::mutate(const Schedule& s, std::mt19937_64& rng, int count,
                                        std::vector<std::string>* changes) const {
  Schedule r = s;
  bool changed = false;
  const auto& stages = p_.stages();
  const auto& dirs = directives::directives();
  for (int c = 0; c < count; ++c) {
    // A few draws of (stage, directive) until one offers a change.
    for (int attempt = 0; attempt < 8; ++attempt) {
      const Stage& st = stages[std::discrete_distribution<size_t>(stage_weights_.begin(),
                                                                  stage_weights_.end())(rng)];
      const directives::Directive& d =
          *dirs[std::uniform_int_distribution<size_t>(0, dirs.size() - 1)(rng)];
      if (d.name() == "device" && !t_.has_device()) continue;
      const StageSchedule base = r.find(st.name) ? *r.find(st.name) : StageSchedule{};
      std::vector<StageSchedule> cands;
      try {
        const directives::CheckContext ctx{p_, r, &t_, st, base, stage_precision(p_, r, st.name)};
        cands = d.candidates(ctx);
      } catch (const std::exception&) {
        continue;  // the rest of the schedule does not fit this directive's check
      }
      std::vector<const StageSchedule*> ok;
      for (const StageSchedule& v : cands)
        if (!(v == base) && allowed(st, base, v)) ok.push_back(&v);
      if (ok.empty()) continue;
      r[st.name] = *ok[std::uniform_int_distribution<size_t>(0, ok.size() - 1)(rng)];
      changed = true;
      if (changes)
        changes->push_back(st.name + "." + std::string(d.name()) + shape_of(d, r[st.name]));
      break;
    }
  }
  // Later changes can undo earlier ones (a stage's amx, then one of its old loop entries).
  if (!changed || r == s) return std::nullopt;
  return r;
}

std::optional<Schedule> Mutator::apply_everywhere(const Schedule& s,
                                                  const directives::Directive& d) const {
  Schedule r = s;
  for (const Stage& st : p_.stages()) {
    const StageSchedule base = r.find(st.name) ? *r.find(st.name) : StageSchedule{};
    try {
      const directives::CheckContext ctx{p_, r, &t_, st, base, stage_precision(p_, r, st.name)};
      for (const StageSchedule& v : d.candidates(ctx))
        if (!(v == base) && allowed(st, base, v)) {
          r[st.name] = v;
          break;
        }
    } catch (const std::exception&) {
    }
  }
  if (r == s) return std::nullopt;
  return r;
}

}  // namespace pto::tuner
