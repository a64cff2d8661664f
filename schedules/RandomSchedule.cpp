#include "schedules/RandomSchedule.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "dsl/Analysis.h"
#include "dsl/Error.h"
#include "dsl/ZeroPadding.h"
#include "schedules/LoopNest.h"
#include "schedules/Validate.h"
#include "schedules/directives/Cache.h"
#include "schedules/directives/DotPairs.h"
#include "schedules/directives/Placement.h"
#include "schedules/directives/RFactor.h"
#include "schedules/directives/StoreIn.h"

namespace pto {
namespace {

class Drawer {
 public:
  Drawer(const Program& p, const Target& t, std::mt19937_64& rng, const RandomScheduleOptions& o)
      : p_(p), t_(t), rng_(rng), o_(o) {}

  Schedule draw() {
    Schedule s;
    const auto& stages = p_.stages();
    // Consumers first: a producer's placement needs its consumer's loops.
    for (auto it = stages.rbegin(); it != stages.rend(); ++it) draw_stage(*it, s);
    return s;
  }

 private:
  bool coin(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  size_t index(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }
  template <typename T>
  const T& pick(const std::vector<T>& v) { return v[index(v.size())]; }

  // An rfactor of the innermost reduction variable by a power of two up to
  // 64 among those the directive accepts (schedules/directives/RFactor.h).
  std::optional<RFactor> draw_rfactor(const Stage& st, DType acc) {
    if (st.rvars.empty()) return {};
    std::vector<int> factors;
    for (const RFactor& rf : directives::rfactor_candidates(st, &t_, acc))
      if (rf.rvar == st.rvars.back().name && rf.factor <= 64 && (rf.factor & (rf.factor - 1)) == 0)
        factors.push_back(rf.factor);
    if (factors.empty()) return {};
    return RFactor{st.rvars.back().name, pick(factors)};
  }

  std::vector<int64_t> tile_sizes(const Dim& extent) {
    std::vector<int64_t> c = {2, 3, 4, 8, 16};
    if (!extent.is_symbolic()) {
      const int64_t e = extent.value;
      c.push_back(e);
      c.push_back(std::uniform_int_distribution<int64_t>(1, e)(rng_));
      std::erase_if(c, [&](int64_t v) { return v > e; });
    }
    if (c.empty()) return {};
    const int64_t outer = pick(c);
    if (outer >= 4 && coin(0.25)) {
      std::vector<int64_t> divs;
      for (int64_t d = 2; d < outer; ++d)
        if (outer % d == 0) divs.push_back(d);
      if (!divs.empty()) return {outer, pick(divs)};
    }
    return {outer};
  }

  // Loop directives for one definition. `at`: computed at a consumer loop
  // (pure loop extents are then the consumer's region, not the shape).
  LoopSchedule draw_loops(const Stage& st, bool update, bool at, DType compute) {
    LoopSchedule ls;
    std::vector<std::pair<std::string, Dim>> dims;
    for (size_t k = 0; k < st.vars.size(); ++k) dims.emplace_back(st.vars[k], st.shape[k]);
    if (update)
      for (const RVar& r : st.rvars) dims.emplace_back(r.name, r.extent);
    for (const auto& [name, extent] : dims) {
      if (!coin(0.45)) continue;
      auto sizes = tile_sizes(extent);
      if (!sizes.empty()) ls.tile[name] = sizes;
    }
    std::vector<Loop> loops = loop_nest(st, ls, update);
    if (loops.empty()) return ls;
    if (coin(0.5) && loops.size() > 1) {
      // A random interleaving that keeps each dim's loops outer to inner.
      std::vector<size_t> perm(loops.size());
      for (size_t k = 0; k < perm.size(); ++k) perm[k] = k;
      std::shuffle(perm.begin(), perm.end(), rng_);
      std::vector<std::string> order;
      std::map<std::string, size_t> next;  // dim -> how many of its loops are placed
      std::map<std::string, std::vector<std::string>> dim_loops;
      for (const Loop& l : loops) dim_loops[l.dim].push_back(l.name);
      for (size_t k : perm) {
        const std::string& d = loops[k].dim;
        order.push_back(dim_loops[d][next[d]++]);
      }
      ls.order = order;
      loops = loop_nest(st, ls, update);
    }
    // Pure loops are candidates for vectorize/parallel (a reduction loop would race).
    std::vector<const Loop*> pure;
    for (const Loop& l : loops)
      if (!l.reduction) pure.push_back(&l);
    auto is_split = [](const Loop& l) { return l.name != l.dim; };
    // Constant extents: any loop of a root stage; only tile-inner loops of a
    // stage computed in a consumer (its outer loops span the consumer's region).
    auto constant = [&](const Loop& l) { return l.extent > 0 && (!at || (is_split(l) && l.name != outer_loop(l.dim))); };
    if (!pure.empty() && coin(0.7)) {
      // Prefer the innermost pure loop (contiguous for the last dim).
      const Loop& l = coin(0.7) ? *pure.back() : *pick(pure);
      const int lanes = std::max(1, t_.vector_lanes(compute));
      std::vector<int> widths = {std::max(1, lanes / 4), std::max(1, lanes / 2), lanes, 2 * lanes};
      if (!at && !is_split(l) && l.extent > 0)  // root, untiled: the vector must fit the extent
        std::erase_if(widths, [&](int w) { return w > l.extent; });
      if (is_split(l) && l.extent > 0)  // lanes must divide a tile's inner loop
        std::erase_if(widths, [&](int w) { return l.extent % w != 0; });
      if (constant(l) && l.extent <= 32 && is_split(l)) widths.push_back(0);  // the whole tile
      if (!widths.empty()) {
        ls.vectorize = l.name;
        ls.vector_width = pick(widths);
      }
    }
    if (coin(0.4)) {
      const Loop& l = pick(loops);
      if (l.name != ls.vectorize) {
        if (constant(l) && l.extent <= 8 && coin(0.5)) ls.unroll[l.name] = 0;
        else {
          std::vector<int> factors = {2, 3, 4};
          if (is_split(l) && l.name != outer_loop(l.dim) && l.extent > 0)  // factors must divide a tile loop
            std::erase_if(factors, [&](int f) { return l.extent % f != 0; });
          if (!factors.empty()) ls.unroll[l.name] = pick(factors);
        }
      }
    }
    if (!pure.empty() && coin(o_.p_parallel)) {
      const Loop& l = coin(0.6) ? *pure.front() : *pick(pure);
      if (l.name != ls.vectorize && !ls.unroll.count(l.name)) ls.parallel.push_back(l.name);
    }
    return ls;
  }

  void draw_stage(const Stage& st, Schedule& s) {
    StageSchedule ss;
    const bool out = p_.is_output(st.name);
    // Placement.
    const auto eff = directives::effective_consumers(p_, s, st.name);
    std::vector<std::string> kinds = {"root"};
    if (!out && !st.reduce) kinds.push_back("inline");
    if (!out && eff.size() == 1) kinds.push_back("at"), kinds.push_back("at");
    const std::string kind = pick(kinds);
    if (kind == "inline") {
      ss.compute.kind = Placement::Kind::Inline;
    } else if (kind == "at") {
      const Stage& c = p_.stage(*eff.begin());
      const auto cl = directives::placement_loops(c, s.find(c.name));
      const size_t li = index(cl.size());
      ss.compute = {Placement::Kind::At, c.name, cl[li].name};
      if (coin(0.2)) {
        // Storage at or outside the compute level.
        const size_t si = std::uniform_int_distribution<size_t>(0, li)(rng_);
        ss.store = coin(0.5) ? Placement{} : Placement{Placement::Kind::At, c.name, cl[si].name};
      }
    }
    // Precision: float stages may narrow storage (not outputs: their storage
    // is the interface type) and compute; accumulation stays f32.
    if (is_float(st.dtype) && st.dtype == DType::F32 && coin(o_.p_narrow)) {
      const std::vector<DType> narrow = {DType::BF16, DType::F16};
      if (!out && coin(0.7)) ss.precision.storage = pick(narrow);
      if (coin(0.5)) ss.precision.compute = pick(std::vector<DType>{DType::BF16, DType::F16, DType::F32});
      if (st.reduce && (ss.precision.storage || ss.precision.compute)) ss.precision.accumulate = DType::F32;
    }
    const DType compute = ss.precision.compute.value_or(st.dtype);
    const bool at = ss.compute.kind == Placement::Kind::At;
    if (ss.compute.kind != Placement::Kind::Inline) {
      ss.loops = draw_loops(st, false, at, compute);
      if (st.reduce && coin(o_.p_rfactor)) ss.rfactor = draw_rfactor(st, ss.precision.accumulate.value_or(compute));
      if (ss.rfactor) {  // replaces the update's directives, accumulator tile, caches and prefetches
        s.stages[st.name] = ss;
        return;
      }
      if (const auto pr = padded_read(p_, st); pr && coin(0.5)) {  // skip the padding along some of its dims
        for (const std::string& d : pr->dims)
          if (coin(0.7)) ss.skip_padding.push_back(d);
      }
      if (st.reduce && coin(0.25)) {  // accumulate per iteration of a pure loop (a tile)
        const auto pure = loop_nest(st, ss.loops, false);
        if (!pure.empty()) ss.accumulator_at = pick(pure).name;
      }
      const bool tile = at || !ss.accumulator_at.empty();  // update extents bounded by a tile
      if (st.reduce && coin(0.8)) ss.update = draw_loops(st, true, tile, ss.precision.accumulate.value_or(compute));
      if (const auto k = pair_rvar(st); k && ss.update && coin(0.9)) {  // operands in pairs: sum them per lane
        const LoopSchedule& up = *ss.update;
        bool tile_fits = true;  // under dot_pairs the loop k counts pairs: tiles of at most half
        for (const RVar& r : st.rvars)
          if (r.name == *k && !r.extent.is_symbolic() && up.tile.count(*k))
            for (const int64_t f : up.tile.at(*k)) tile_fits &= 2 * f <= r.extent.value;
        StageSchedule paired = ss;
        paired.dot_pairs = *k;
        if (tile_fits && directives::accepts(directives::dot_pairs_directive(), p_, s, &t_, st, paired))
          ss.dot_pairs = *k;
      }
      if (coin(0.15)) {  // a packed copy of something it reads
        const std::vector<std::string> loops = directives::cache_loops(st, ss);
        // Inputs only: producers are placed after this stage, and a cached producer must be root or inline.
        std::vector<std::string> ins;
        for (const auto& r : st.reads())
          if (!p_.find_stage(r)) ins.push_back(r);
        if (!loops.empty() && !ins.empty()) ss.cache.push_back({pick(ins), pick(loops)});
      }
      if (coin(o_.p_prefetch)) {
        std::vector<std::string> ins;
        for (const auto& r : st.reads())
          if (!p_.find_stage(r)) ins.push_back(r);
        const auto loops = loop_nest(st, st.reduce && ss.update ? *ss.update : ss.loops, st.reduce.has_value());
        if (!ins.empty() && !loops.empty())
          ss.pipeline.prefetch.push_back({pick(ins), pick(loops).name, static_cast<int>(1 + index(3))});
      }
      if (at && !st.reduce && coin(0.3)) {  // stored in its consumer, rewritten there in place
        s.stages[st.name] = ss;
        if (directives::store_in_problem(p_, s, st, ss.compute.stage).empty())
          ss.store_in = ss.compute.stage;
      }
    }
    s.stages[st.name] = ss;
  }

  const Program& p_;
  const Target& t_;
  std::mt19937_64& rng_;
  const RandomScheduleOptions& o_;
};

double unit_roundoff(DType t) {
  switch (t) {
    case DType::BF16: return std::ldexp(1.0, -8);
    case DType::F16: return std::ldexp(1.0, -11);
    case DType::F32: return std::ldexp(1.0, -24);
    case DType::F64: return std::ldexp(1.0, -53);
    default: return 0;
  }
}

}  // namespace

Schedule random_schedule(const Program& p, const Target& t, std::mt19937_64& rng, const RandomScheduleOptions& opts) {
  std::string last;
  for (int attempt = 0; attempt < opts.max_attempts; ++attempt) {
    Schedule s = Drawer(p, t, rng, opts).draw();
    try {
      validate(p, s, &t);
      return s;
    } catch (const ScheduleError& e) {
      last = e.what();
    }
  }
  throw ScheduleError("random_schedule: no valid schedule for program '" + p.name() + "' in " +
                      std::to_string(opts.max_attempts) + " draws; last error: " + last);
}

double max_unit_roundoff(const Program& p, const Schedule& s) {
  double u = 0;
  for (const Stage& st : p.stages()) {
    if (!is_float(st.dtype)) continue;
    const StagePrecision pr = stage_precision(p, s, st.name);
    u = std::max({u, unit_roundoff(pr.storage), unit_roundoff(pr.compute), unit_roundoff(pr.accumulate)});
  }
  return u;
}

}  // namespace pto
