#include "autotuner/SearchSpace.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <set>
#include <sstream>

#include "dsl/Error.h"
#include "schedules/LoopNest.h"
#include "schedules/defaults/Defaults.h"
#include "schedules/directives/Placement.h"
#include "schedules/directives/RFactor.h"

namespace pto::tuner {
namespace {

// Knob encodings (Knob::values):
//   placement        0 root, 1 inline, 2 + k: at the k-th pure loop of the target consumer
//   tile_a, tile_b   0 none, else the tile size of the row (a) / contiguous (b) dim
//   order            0 a-tiles outside b-tiles, 1 swapped
//   vectorize        0 none, else lanes
//   unroll           -1 none, 0 fully, else the factor (row point loop)
//   parallel         0 / 1 (outermost loop, root stages only)
//   update_mode      0 reduction innermost, 1 outermost, 2 between tile and point loops,
//                    3 the reduction's outer tile outside the pure tiles, the rest as 2
//   update_tile_a/b/r/c (c: the third-innermost dim, its point loop fully unrolled), update_vectorize, update_unroll_a (as above), update_unroll_b (-1 / 0),
//   update_parallel  as above, for the reduction's update definition
//   rfactor          0 none, else the factor (lanes of partial results) of the innermost
//                    reduction variable; replaces the update knobs (sum/prod/min/max, static extent)
//   pipeline         0 none, 1 async, 2 (opt-in, pure stages) async + ring_buffer 2 with
//                    storage one loop out (stages computed at a consumer)
//   storage          0 logical type, 1 bf16, 2 f16 (intermediates, only under an accuracy budget)
constexpr int kPlaceRoot = 0, kPlaceInline = 1, kPlaceAt = 2, kAtLevels = 4;

int64_t extent_or(const Dim& d, int64_t fallback) { return d.is_symbolic() ? fallback : d.value; }

std::vector<int64_t> fitting(std::vector<int64_t> candidates, int64_t extent) {
  std::vector<int64_t> r{0};
  for (int64_t c : candidates)
    if (c >= 1 && (extent < 0 || c <= extent) && std::find(r.begin(), r.end(), c) == r.end()) r.push_back(c);
  return r;
}

// Names of the loops of the row (a) and contiguous (b) dims after tiling.
struct TiledNames {
  std::vector<std::string> outer;  // pure dims outside a and b
  std::vector<std::string> tiles;  // a_o / a, b_o / b
  std::vector<std::string> points; // a_i, b_i (those that exist)
  std::string innermost_b;         // the loop to vectorize
  std::string row_point;           // a_i, or a when untiled, or empty
};

// `tc`: a tile of the third-innermost dim (a conv's output channels), whose
// point loop goes first among the point loops.
TiledNames tiled_names(const Stage& st, int64_t ta, int64_t tb, bool swap, int64_t tc = 0) {
  TiledNames n;
  const size_t r = st.vars.size();
  if (r == 0) return n;
  const std::string b = st.vars[r - 1];
  const std::string a = r >= 2 ? st.vars[r - 2] : "";
  for (size_t k = 0; k + 2 < r; ++k) n.outer.push_back(tc && k + 3 == r ? outer_loop(st.vars[k]) : st.vars[k]);
  if (tc && r >= 3) n.points.push_back(inner_loop(st.vars[r - 3]));
  if (!a.empty()) n.tiles.push_back(ta ? outer_loop(a) : a);
  n.tiles.push_back(tb ? outer_loop(b) : b);
  if (swap && n.tiles.size() == 2) std::swap(n.tiles[0], n.tiles[1]);
  if (!a.empty() && ta) n.points.push_back(inner_loop(a));
  if (tb) n.points.push_back(inner_loop(b));
  n.innermost_b = tb ? inner_loop(b) : b;
  n.row_point = a.empty() ? "" : (ta ? inner_loop(a) : a);
  return n;
}

void append(std::vector<std::string>& to, const std::vector<std::string>& from) { to.insert(to.end(), from.begin(), from.end()); }

}  // namespace

SearchSpace::SearchSpace(const Program& p, const Target& t, SearchSpaceOptions o) : p_(p), t_(t), o_(o) {
  if (o_.max_rel_error < 0)
    throw ScheduleError("max_rel_error " + std::to_string(o_.max_rel_error) + " must be >= 0 (0 = exact f32)");
  for (const Stage& st : p_.stages()) add_stage_knobs(st);
}

void SearchSpace::add_stage_knobs(const Stage& st) {
  auto add = [&](const std::string& name, std::vector<int64_t> values) {
    if (values.size() > 1) knobs_.push_back({st.name, name, std::move(values)});
  };
  const bool out = p_.is_output(st.name);
  const bool has_consumers = !p_.consumers(st.name).empty();
  std::vector<int64_t> place{kPlaceRoot};
  if (!out && !st.reduce) place.push_back(kPlaceInline);
  if (!out && has_consumers)
    for (int k = 0; k < kAtLevels; ++k) place.push_back(kPlaceAt + k);
  add("placement", place);

  const DType vt = st.dtype == DType::Bool ? DType::U8 : st.dtype;
  const int64_t lanes = std::max(1, t_.vector_lanes(vt));
  const size_t r = st.vars.size();
  if (r >= 1) {
    const int64_t eb = extent_or(st.shape[r - 1], -1);
    const int64_t ea = r >= 2 ? extent_or(st.shape[r - 2], -1) : -1;
    const auto tb = fitting({lanes, 2 * lanes, 4 * lanes, 8 * lanes, 16 * lanes}, eb);
    const auto ta = r >= 2 ? fitting({2, 4, 6, 8, 16, 32, 64}, ea) : std::vector<int64_t>{0};
    add("tile_a", ta);
    add("tile_b", tb);
    if (r >= 2) add("order", {0, 1});
    add("vectorize", fitting({lanes, 2 * lanes}, eb));
    if (r >= 2) add("unroll", {-1, 0, 2, 4});
    if (t_.cores > 1) add("parallel", {0, 1});
    if (st.reduce) {
      add("update_mode", {0, 1, 2, 3});
      add("update_tile_a", ta);
      add("update_tile_b", tb);
      add("update_tile_r", fitting({4, 8, 16, 64, 256}, extent_or(st.rvars[0].extent, -1)));
      // Register blocking over a third dim (a conv's output channels): its point loop is unrolled.
      if (r >= 3) add("update_tile_c", fitting({2, 4, 8, 16}, extent_or(st.shape[r - 3], -1)));
      add("update_vectorize", fitting({lanes, 2 * lanes}, eb));
      if (r >= 2) add("update_unroll_a", {-1, 0, 2, 4});
      add("update_unroll_b", {-1, 0});
      if (t_.cores > 1) add("update_parallel", {0, 1});
      // Vectorized partial results (rfactor) of the innermost reduction
      // variable, by 1, 2 or 4 vectors (fewer than the whole row) among the
      // factors the directive accepts.
      const RVar& rv = st.rvars.back();
      if (lanes > 1 && !t_.has_device()) {
        const auto valid = directives::rfactor_candidates(st, &t_, st.dtype);
        std::vector<int64_t> rf{0};
        for (const int64_t f : {lanes, 2 * lanes, 4 * lanes})
          if (f < extent_or(rv.extent, -1) && std::find(valid.begin(), valid.end(), RFactor{rv.name, static_cast<int>(f)}) != valid.end())
            rf.push_back(f);
        add("rfactor", rf);
      }
    }
  }
  // Pipelining of a stage computed at a consumer loop: async. Async producers
  // once crashed a third of softmax trials; under the placement rules of
  // validate() none did again (81 random softmax / layer_norm / attention
  // schedules with every computed-at stage async, and tiled producers at tile
  // loops, all matching the f64 reference: test_pipelining.cpp).
  // SearchSpaceOptions::ring_buffers adds async + ring_buffer 2 with storage
  // hoisted one loop out (pure stages only; on reductions Halide 21 computed
  // wrong rows, which validate() now rejects): in bench_tune's softmax search
  // two such double-buffered `exp` stages, with a reduction computed inside
  // them or beside them async, ran into the run timeout (a deadlock or a very
  // slow schedule: not characterized yet), so they are opt-in.
  if (!out && has_consumers && o_.pipelining) add("pipeline", o_.ring_buffers && !st.reduce ? std::vector<int64_t>{0, 1, 2} : std::vector<int64_t>{0, 1});
  if (!out && is_float(st.dtype) && o_.max_rel_error > 0) {
    std::vector<int64_t> storage{0};
    if (budget_allows(DType::BF16, o_.max_rel_error)) storage.push_back(1);
    if (budget_allows(DType::F16, o_.max_rel_error)) storage.push_back(2);
    add("storage", storage);
  }
}

bool budget_allows(DType t, double max_rel_error) {
  if (!is_float(t) || bytes(t) >= 4) return true;
  return max_rel_error >= (t == DType::BF16 ? 1e-2 : 2e-3);
}

double SearchSpace::size() const {
  double n = 1;
  for (const Knob& k : knobs_) n = std::min(1e18, n * static_cast<double>(k.values.size()));
  return n;
}

Genome SearchSpace::random(std::mt19937_64& rng) const {
  Genome g(knobs_.size());
  for (size_t i = 0; i < knobs_.size(); ++i)
    g[i] = static_cast<int>(std::uniform_int_distribution<size_t>(0, knobs_[i].values.size() - 1)(rng));
  return g;
}

Genome SearchSpace::mutate(const Genome& g, std::mt19937_64& rng, int count) const {
  Genome m = g;
  if (knobs_.empty()) return m;
  for (int c = 0; c < count; ++c) {
    const size_t i = std::uniform_int_distribution<size_t>(0, knobs_.size() - 1)(rng);
    const size_t n = knobs_[i].values.size();
    // Another value: shift by 1..n-1 so the knob really changes.
    const size_t shift = std::uniform_int_distribution<size_t>(1, n - 1)(rng);
    m[i] = static_cast<int>((static_cast<size_t>(m[i]) + shift) % n);
  }
  return m;
}

Genome SearchSpace::crossover(const Genome& a, const Genome& b, std::mt19937_64& rng) const {
  Genome c = a;
  for (size_t i = 0; i < c.size() && i < b.size(); ++i)
    if (rng() & 1) c[i] = b[i];
  return c;
}

namespace {

// Does `name` read a contraction or convolution, directly or through pure stages?
bool reads_contraction(const Program& p, const std::string& name) {
  for (const auto& r : p.stage(name).reads()) {
    const Stage* st = p.find_stage(r);
    if (!st) continue;
    if (st->reduce && (st->kind == OpKind::Contraction || st->kind == OpKind::Convolution)) return true;
    if (!st->reduce && reads_contraction(p, r)) return true;
  }
  return false;
}

}  // namespace

std::vector<Genome> SearchSpace::seeds() const {
  struct Preset {
    int64_t a, b_vectors;  // row tile, contiguous tile in vectors
    int at_level;          // placement of producers at a consumer loop
    bool swap;             // column tiles outside row tiles
    int mode;              // update_mode of reductions
    bool update_tiles;     // tile the reductions' own pure loops
    int rf_vectors = 0;    // rfactor reductions by this many vectors (0: no rfactor)
    bool rows_at = false;  // elementwise producers at the consumer loop too, not inline
  };
  // 1, 3, 5: the register-blocked micro-kernel inside an epilogue's tile (reduction
  // at the epilogue's row-tile loop, reduction loop outermost, rows unrolled,
  // columns vectorized and unrolled); 2, 4: a reduction blocked in place.
  // 6, 7: row reductions (softmax, norms) computed per block of a vector's worth
  // of rows of their consumer, vectorized across those rows.
  const std::vector<Preset> presets = {{6, 4, 1, true, 1, false},  {6, 4, 0, false, 2, true}, {4, 2, 1, true, 1, false},
                                       {8, 2, 0, false, 2, true},  {4, 4, 1, true, 1, false}, {16, 4, 0, false, 1, false},
                                       {32, 2, 0, false, 0, false},
                                       // 8, 9: the default of row-wise normalizations: per row of the output, the
                                       // row statistics rfactored into vector lanes, the row's values computed once.
                                       {0, 0, 0, false, 0, false, 2, true}, {0, 0, 0, false, 0, false, 1, true}};
  const int64_t lanes = std::max(1, t_.vector_lanes(DType::F32));
  std::vector<Genome> r;
  for (const Preset& ps : presets) {
    Genome g(knobs_.size(), 0);
    for (size_t i = 0; i < knobs_.size(); ++i) {
      const Knob& k = knobs_[i];
      const Stage& st = p_.stage(k.stage);
      auto index_of = [&](int64_t v) -> int {
        for (size_t j = 0; j < k.values.size(); ++j)
          if (k.values[j] == v) return static_cast<int>(j);
        return -1;
      };
      // The domain value nearest to `v` (ties: the smaller); domains are tiny.
      auto nearest = [&](int64_t v) {
        size_t best = 0;
        for (size_t j = 1; j < k.values.size(); ++j)
          if (std::llabs(k.values[j] - v) < std::llabs(k.values[best] - v)) best = j;
        return static_cast<int>(best);
      };
      const std::string& n = k.name;
      int c = 0;
      if (n == "placement") {
        // Elementwise stages inline, except the end of a contraction's epilogue
        // chain that feeds another reduction: it stays a root tile loop.
        bool epilogue_end = false;
        for (const auto& cons : p_.consumers(k.stage))
          if (p_.stage(cons).reduce && reads_contraction(p_, k.stage)) epilogue_end = true;
        c = epilogue_end || ps.rows_at ? -1 : index_of(kPlaceInline);
        if (c < 0 && (st.reduce || ps.rows_at)) c = index_of(kPlaceAt + ps.at_level);
        if (c < 0) c = 0;
      } else if (n == "tile_a") {
        c = nearest(ps.a);
      } else if (n == "tile_b") {
        c = nearest(ps.b_vectors * lanes);
      } else if (n == "update_tile_a") {
        c = ps.update_tiles ? nearest(ps.a) : 0;
      } else if (n == "update_tile_b") {
        c = ps.update_tiles ? nearest(ps.b_vectors * lanes) : 0;
      } else if (n == "update_tile_c") {
        c = ps.update_tiles ? nearest(4) : 0;
      } else if (n == "order") {
        c = ps.swap ? 1 : 0;
      } else if (n == "vectorize" || n == "update_vectorize") {
        c = k.values.size() > 1 ? 1 : 0;
      } else if (n == "parallel" || n == "update_parallel") {
        c = index_of(1);
      } else if (n == "update_mode") {
        c = index_of(ps.mode);
      } else if (n == "update_unroll_a" || n == "update_unroll_b") {
        c = index_of(0);
      } else if (n == "rfactor") {
        c = ps.rf_vectors ? nearest(ps.rf_vectors * lanes) : 0;
      } else if (n == "unroll") {
        c = index_of(st.reduce ? 0 : -1);
      }
      g[i] = std::max(c, 0);
    }
    if (std::find(r.begin(), r.end(), g) == r.end()) r.push_back(g);
  }
  return r;
}

int64_t SearchSpace::knob(const Genome& g, const std::string& stage, const std::string& name, int64_t fallback) const {
  for (size_t i = 0; i < knobs_.size(); ++i)
    if (knobs_[i].stage == stage && knobs_[i].name == name) return knobs_[i].values[static_cast<size_t>(g[i])];
  return fallback;
}

Schedule SearchSpace::decode(const Genome& g) const {
  if (g.size() != knobs_.size())
    throw ScheduleError("genome has " + std::to_string(g.size()) + " choices; the search space of program '" +
                        p_.name() + "' has " + std::to_string(knobs_.size()) + " knobs");
  for (size_t i = 0; i < g.size(); ++i)
    if (g[i] < 0 || static_cast<size_t>(g[i]) >= knobs_[i].values.size())
      throw ScheduleError("genome choice " + std::to_string(g[i]) + " for knob '" + knobs_[i].stage + "." +
                          knobs_[i].name + "' is outside 0.." + std::to_string(knobs_[i].values.size() - 1));
  Schedule s;
  // Consumers first, so that a producer placed at a consumer loop sees that consumer's loops.
  const auto& stages = p_.stages();
  for (auto it = stages.rbegin(); it != stages.rend(); ++it) {
    const Stage& st = *it;
    const std::string& n = st.name;
    auto k = [&](const char* name, int64_t fallback) { return knob(g, n, name, fallback); };
    StageSchedule& ss = s[n];
    const int64_t place = k("placement", kPlaceRoot);
    if (place == kPlaceInline) {
      ss.compute.kind = Placement::Kind::Inline;
      continue;
    }
    bool at = false;
    Placement hoist;
    if (place >= kPlaceAt) {
      // The target: the resolved consumer downstream of all others; every other
      // resolved consumer must itself be computed inside that target's loops.
      const auto cons = directives::effective_consumers(p_, s, n);
      std::string target;
      for (const auto& c : cons) {
        bool dominates = true;
        for (const auto& o : cons)
          if (o != c && !p_.reaches(o, c)) dominates = false;
        if (dominates) target = c;
      }
      if (!target.empty() && s.find(target)->compute.kind != Placement::Kind::Inline) {
        const Stage& ts = p_.stage(target);
        const StageSchedule& tss = *s.find(target);
        std::vector<Loop> loops = directives::placement_loops(ts, &tss);
        // Not at reduction loops, nor at loops the target splits by a vector
        // width or unroll factor (validate() rejects those placements).
        const LoopSchedule& cl = directives::last_definition_loops(ts, &tss);
        std::erase_if(loops, [&](const Loop& l) { return l.reduction || factor_split(cl, l); });
        int64_t level = std::min<int64_t>(place - kPlaceAt, static_cast<int64_t>(loops.size()) - 1);
        bool ok = !loops.empty();
        for (const auto& c : cons) {
          if (c == target) continue;
          const StageSchedule* cs = s.find(c);
          if (!cs || cs->compute.kind != Placement::Kind::At || cs->compute.stage != target) { ok = false; break; }
          for (int64_t l = 0; l < static_cast<int64_t>(loops.size()); ++l)
            if (loops[static_cast<size_t>(l)].name == cs->compute.loop) level = std::min(level, l);
        }
        if (ok) {
          ss.compute = {Placement::Kind::At, target, loops[static_cast<size_t>(level)].name};
          at = true;
          // A ring buffer's storage: one loop further out (or root), folded over the compute loop.
          hoist = level > 0 ? Placement{Placement::Kind::At, target, loops[static_cast<size_t>(level - 1)].name} : Placement{};
        }
      }
    }

    const size_t r = st.vars.size();
    if (r >= 1) {
      // Pure definition.
      const int64_t ta = k("tile_a", 0), tb = k("tile_b", 0);
      LoopSchedule& ls = ss.loops;
      if (ta) ls.tile[st.vars[r - 2]] = {ta};
      if (tb) ls.tile[st.vars[r - 1]] = {tb};
      const TiledNames tn = tiled_names(st, ta, tb, k("order", 0) == 1);
      if (ta && tb) {
        ls.order = tn.outer;
        append(ls.order, tn.tiles);
        append(ls.order, tn.points);
      }
      if (const int64_t v = k("vectorize", 0)) {
        ls.vectorize = tn.innermost_b;
        ls.vector_width = static_cast<int>(tb ? std::min(v, tb) : v);
      }
      const int64_t u = k("unroll", -1);
      // A factor must divide a row tile (validate()); one that does not means no unroll.
      const int64_t rows = r >= 2 ? extent_or(st.shape[r - 2], -1) : -1;  // an untiled root row loop's extent bounds the factor
      if (!tn.row_point.empty() && u >= 0 && (ta || u > 0 || at) && !(ta && u > 0 && ta % u != 0) &&
          !(!ta && !at && u > 0 && rows >= 0 && u > rows))
        ls.unroll[tn.row_point] = static_cast<int>(u);
      if (!at && k("parallel", 0)) ls.parallel = {loop_nest(st, ls, false).front().name};

      // Update definition of a reduction: rfactor replaces its directives.
      if (const int64_t rf = st.reduce ? k("rfactor", 0) : 0) {
        ss.rfactor = RFactor{st.rvars.back().name, static_cast<int>(rf)};
      } else if (st.reduce) {
        LoopSchedule up;
        const int64_t ua = k("update_tile_a", 0), ub = k("update_tile_b", 0), ur = k("update_tile_r", 0);
        if (ua) up.tile[st.vars[r - 2]] = {ua};
        if (ub) up.tile[st.vars[r - 1]] = {ub};
        if (ur) up.tile[st.rvars[0].name] = {ur};
        const int64_t uc = r >= 3 ? k("update_tile_c", 0) : 0;
        if (uc) {
          up.tile[st.vars[r - 3]] = {uc};
          up.unroll[inner_loop(st.vars[r - 3])] = 0;
        }
        const TiledNames un = tiled_names(st, ua, ub, false, uc);
        std::vector<std::string> rl;
        for (size_t q = 0; q < st.rvars.size(); ++q) {
          const std::string& rv = st.rvars[q].name;
          if (q == 0 && ur) {
            rl.push_back(outer_loop(rv));
            rl.push_back(inner_loop(rv));
          } else {
            rl.push_back(rv);
          }
        }
        const int64_t mode = k("update_mode", 0);
        std::vector<std::string>& o = up.order;
        if (mode == 1) append(o, rl);
        if (mode == 3 && ur) o.push_back(rl.front());
        append(o, un.outer);
        append(o, un.tiles);
        if (mode == 2) append(o, rl);
        if (mode == 3) append(o, ur ? std::vector<std::string>(rl.begin() + 1, rl.end()) : rl);
        append(o, un.points);
        if (mode == 0) append(o, rl);
        const int64_t v = k("update_vectorize", 0);
        int64_t width = 0;
        if (v) {
          up.vectorize = un.innermost_b;
          width = ub ? std::min(v, ub) : v;
          up.vector_width = static_cast<int>(width);
        }
        const int64_t uu = k("update_unroll_a", -1);
        if (!un.row_point.empty() && uu >= 0 && (ua || uu > 0 || at) && !(ua && uu > 0 && ua % uu != 0))
          up.unroll[un.row_point] = static_cast<int>(uu);
        // Fully unrolling the contiguous point loop: the vector registers of a register tile.
        // (Its extent is constant when tiled, or when computed inside a consumer's tile.)
        if (k("update_unroll_b", -1) == 0 && width && ((ub && ub <= 64 && ub / width <= 8 && ub / width > 1) || (!ub && at)))
          up.unroll[un.innermost_b] = 0;
        if (!at && mode != 1 && k("update_parallel", 0)) {
          for (const Loop& l : loop_nest(st, up, true))
            if (!l.reduction) {
              up.parallel = {l.name};
              break;
            }
        }
        ss.update = up;
      }
    }
    if (at) {
      const int64_t pl = k("pipeline", 0);
      ss.pipeline.async = pl >= 1;
      if (pl == 2 && !st.reduce) {
        ss.pipeline.ring_buffer = 2;  // double-buffered: the producer fills the next slice while the consumer reads one
        ss.store = hoist;
      }
    }
    const int64_t storage = k("storage", 0);
    if (storage == 1) ss.precision.storage = DType::BF16;
    if (storage == 2) ss.precision.storage = DType::F16;
  }
  // What the program's types and layouts call for (f32 arithmetic for bf16
  // stages, pair sums for operands in pairs), as the default has it: without
  // it every candidate of a bf16 convolution accumulated in bf16 and failed
  // the check, and read pair-blocked weights as strided gathers.
  apply_type_rules(p_, t_, s);
  // Stage entries that say nothing beyond "root" are left out (same meaning, shorter JSON).
  std::erase_if(s.stages, [](const auto& kv) { return kv.second == StageSchedule{}; });
  return s;
}

std::string genome_to_string(const Genome& g) {
  std::string s;
  for (size_t i = 0; i < g.size(); ++i) s += (i ? "," : "") + std::to_string(g[i]);
  return s;
}

Genome genome_from_string(const std::string& s) {
  Genome g;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) g.push_back(std::stoi(item));
  return g;
}

}  // namespace pto::tuner
