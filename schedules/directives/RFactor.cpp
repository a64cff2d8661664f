#include "schedules/directives/RFactor.h"

#include <algorithm>

#include "dsl/Error.h"
#include "schedules/LoopNest.h"
#include "schedules/directives/Cache.h"
#include "schedules/directives/DotPairs.h"
#include "schedules/directives/Json.h"
#include "schedules/directives/Loops.h"
#include "schedules/directives/OnlineSoftmax.h"

namespace pto::directives {

constexpr int kMaxRFactor = 256;

const RFactor* shifted_last_step(const Stage& st, const StageSchedule* ss) {
  if (!ss || !ss->rfactor || ss->rfactor->parallel || ss->rfactor->factor < 2 || !st.reduce ||
      st.is_arg_reduction())
    return nullptr;
  const RFactor& rf = *ss->rfactor;
  for (const RVar& v : st.rvars)
    if (v.name == rf.rvar)
      return !v.extent.is_symbolic() && v.extent.value > rf.factor && v.extent.value % rf.factor != 0 &&
                     ss->dot_pairs != rf.rvar
                 ? &rf
                 : nullptr;
  return nullptr;
}

namespace {

// The lanes of `accumulate` on `target` (0 without a target).
int lanes_of(const Target* target, DType accumulate) {
  return target ? target->vector_lanes(accumulate == DType::Bool ? DType::U8 : accumulate) : 0;
}

// The block of rows an interleaving intermediate spans: the innermost pure
// dim tiled, when static, the block its innermost tile (computed at the loop
// outside it: the tile loop, or the middle one of two levels, whose outer
// loop is then a core's share of the blocks). `inner` is the points of the
// static pure dims inside it (a few output columns), 0 where one is symbolic:
// each block step updates rows x inner partials, all unrolled.
struct Rows {
  std::string dim, outer;
  int64_t tile = 0, extent = 0, outer_tile = 0, inner = 1;
};
constexpr int64_t kMaxInterleave = 16;
// The index of the first pure dim inside `dim`.
size_t inner_dims(const Stage& st, const std::string& dim) {
  return static_cast<size_t>(std::find(st.vars.begin(), st.vars.end(), dim) - st.vars.begin()) + 1;
}
// Points a block step updates (rows x inner points, each at least a vector
// of partials): a core's vector registers, less a few for the operands.
constexpr int64_t kMaxInterleavePartials = 28;
std::optional<Rows> interleaved_rows(const Stage& st, const LoopSchedule& ls) {
  for (size_t k = st.vars.size(); k-- > 0;) {
    const auto t = ls.tile.find(st.vars[k]);
    if (t == ls.tile.end()) continue;
    if (t->second.size() > 2 || st.shape[k].is_symbolic()) return std::nullopt;
    Rows rows{st.vars[k], t->second.size() == 1 ? outer_loop(st.vars[k]) : middle_loop(st.vars[k]),
              t->second.back(), st.shape[k].value, t->second.size() == 2 ? t->second.front() : 0};
    for (size_t i = k + 1; i < st.vars.size(); ++i)
      rows.inner *= st.shape[i].is_symbolic() ? 0 : st.shape[i].value;
    return rows;
  }
  return std::nullopt;
}

// A parallel interleaving intermediate (split-K with a register tile): the
// vectors of partials one block step updates, the block's rows x the points
// of the dims between them and the innermost x the innermost dim in vectors
// of `lanes` (its last one masked).
int64_t chunk_tile_vectors(const Stage& st, const Rows& rows, int lanes) {
  const int64_t last = st.shape.back().value;
  return rows.tile * (rows.inner / last) * ((last + lanes - 1) / lanes);
}

// The lanes of those vectors: the stage's own vectorize of its innermost dim
// where it sets a width (a tail of more than one lane past whole vectors is a
// masked vector, which LLVM keeps in memory: [33, 4096] @ [4096, 20] in 16 +
// 4 lanes ran 0.44 ms, against 0.065 for 16 + 1), else the target's
// vectors of `bits`-bit values.
int chunk_tile_lanes(const Stage& st, const StageSchedule& ss, const Target& t, int bits) {
  if (!st.vars.empty() && ss.loops.vectorize == st.vars.back() && ss.loops.vector_width > 0)
    return ss.loops.vector_width;
  return std::max(1, t.vector_bits / bits);
}

// Why a parallel rfactor cannot interleave (keep each chunk's partials for a
// block of rows in registers), or "". The block's rows are a dividing tile
// of a static pure dim outside the innermost one (an update's guarded block
// kept its partials in memory: [33, 4096] @ [4096, 33] in blocks of 6 rows
// ran 2.8x slower than in blocks of 3), the dims inside it static, and the
// block's vectors of partials fit the registers with the step's operands.
std::string chunk_tile_problem(const Stage& st, const StageSchedule& ss,
                               const std::optional<Rows>& rows, const Target* target) {
  const bool root = ss.compute.kind == Placement::Kind::Root;
  const int lanes = target ? chunk_tile_lanes(st, ss, *target, 32) : 0;
  const int64_t vectors =
      rows && rows->inner > 0 && lanes ? chunk_tile_vectors(st, *rows, lanes) : 0;
  const int64_t most = target
                           ? std::min<int64_t>(kMaxInterleavePartials, target->vector_registers - 4)
                           : kMaxInterleavePartials;
  if (rows && root && rows->dim != st.vars.back() && rows->tile >= 2 &&
      rows->tile <= kMaxInterleave && rows->outer_tile == 0 && rows->extent % rows->tile == 0 &&
      rows->inner > 0 && vectors <= most)
    return "";
  return "stage '" + st.name +
         "': rfactor interleave across cores (a register tile per chunk) needs the stage computed "
         "at root with a static pure dim outside its innermost tiled once by a divisor of its "
         "extent "
         "from 2 to " +
         std::to_string(kMaxInterleave) +
         " (the block's rows), the dims inside it static, and at most " + std::to_string(most) +
         " vectors of partials per block (rows x the points inside in vectors)" +
         (rows
              ? "; '" + rows->dim + "' (extent " + std::to_string(rows->extent) + ") is tiled by " +
                    (rows->outer_tile ? std::to_string(rows->outer_tile) + " x " : std::string()) +
                    std::to_string(rows->tile) +
                    (vectors ? ", " + std::to_string(vectors) + " vectors" : std::string())
              : std::string("; no static pure dim is tiled")) +
         (root ? std::string() : ", and it is computed " + to_string(ss.compute));
}
}  // namespace

std::string rfactor_problem(const Stage& st, const RFactor& rf, const Target* target,
                            DType accumulate) {
  const std::string where = "stage '" + st.name + "': rfactor";
  if (!st.reduce) return "stage '" + st.name + "' has no reduction, so there is nothing to rfactor";
  if (st.is_arg_reduction())
    return where + " of a " + std::string(to_string(*st.reduce)) +
           " reduction: it returns an index, not an associative combination of values; rfactor "
           "applies to sum, prod, min and max";
  std::vector<std::string> rvars;
  const RVar* r = nullptr;
  for (const RVar& v : st.rvars) {
    rvars.push_back(v.name);
    if (v.name == rf.rvar) r = &v;
  }
  if (!r)
    return where + " names unknown reduction variable '" + rf.rvar +
           "'; its reduction variables: " + join(rvars);
  if (rf.short_below != 0 &&
      (rf.parallel || !r->extent.is_symbolic() || rf.short_below < 2 || rf.short_below > (1 << 30)))
    return where + " short_below " + std::to_string(rf.short_below) + " for '" + rf.rvar +
           "' (extent " + r->extent.str() +
           ") needs a symbolic extent, no \"parallel\", and at least 2 steps: it is the run-time "
           "length under which the update directives run instead; use 0 otherwise";
  if (rf.interleave && (rf.short_below || (rf.parallel && rf.vector_lanes)))
    return where +
           " interleave interleaves a block of rows within each step of a core's "
           "intermediate; it cannot be combined with \"short_below\", nor across cores "
           "with \"vector_lanes\" (a chunk's rows then hold vectors along the "
           "stage's innermost dim)";
  const int lanes = lanes_of(target, accumulate);
  const auto fits = [&](int64_t f) { return lanes <= 1 || f % lanes == 0 || lanes % f == 0; };
  const std::string lanes_text =
      target ? std::to_string(lanes) + " lanes of " + std::string(to_string(accumulate)) : "";
  if (rf.parallel) {
    // Chunks of any length, the last one guarded; at least two of them. Or
    // 0 over a symbolic extent: one chunk per core, sized at run time.
    if (rf.factor == 0 && (!r->extent.is_symbolic() || rf.vector_lanes != 0))
      return where + " across cores: chunk 0 (one chunk per core, sized at run time) needs a symbolic "
                     "extent and vector_lanes 0; '" + rf.rvar + "' has extent " + r->extent.str() +
             (rf.vector_lanes ? " and vector_lanes " + std::to_string(rf.vector_lanes) : std::string());
    if (rf.factor == 0) return "";
    if (rf.factor < 2 || (!r->extent.is_symbolic() && rf.factor >= r->extent.value))
      return where + " across cores: chunk " + std::to_string(rf.factor) + " of '" + rf.rvar +
             "' (extent " + r->extent.str() +
             ") must be at least 2 and less than the extent, so that there are two chunks, or 0 "
             "over a symbolic extent (one chunk per core, sized at run time)";
    if (rf.vector_lanes != 0 && (rf.vector_lanes < 2 || rf.vector_lanes > kMaxRFactor ||
                                 rf.vector_lanes > rf.factor || !fits(rf.vector_lanes)))
      return where + " across cores: vector_lanes " + std::to_string(rf.vector_lanes) +
             " must be 0 (vectorize the stage's innermost dim) or 2 to 256, at most the chunk " +
             std::to_string(rf.factor) +
             (target ? " and a divisor or multiple of target " + target->name + "'s " + lanes_text
                     : std::string());
    return "";
  }
  if (rf.vector_lanes != 0)
    return where + ": vector_lanes " + std::to_string(rf.vector_lanes) +
           " applies to an rfactor across cores (\"parallel\": true) only; the factor is the lanes";
  if (rf.factor < 2 || rf.factor > kMaxRFactor ||
      (!r->extent.is_symbolic() && rf.factor > r->extent.value)) {
    const std::string n = r->extent.str();
    return where + " factor " + std::to_string(rf.factor) + " for '" + rf.rvar + "' (extent " + n +
           ") must be at least 2, at most 256 and at most the extent";
  }
  // A factor that leaves a remainder guards the last step: only whole vectors
  // of lanes keep the steady state a plain vector loop.
  const bool tail = r->extent.is_symbolic() || r->extent.value % rf.factor != 0;
  if (tail && (!target || lanes <= 1 || rf.factor % lanes != 0)) {
    if (r->extent.is_symbolic())
      return where + " of '" + rf.rvar + "', whose extent '" + r->extent.sym +
             "' is symbolic: factor " + std::to_string(rf.factor) +
             " must be a multiple of the target's vector lanes" +
             (target ? " (" + lanes_text + ")" : std::string(" (validate with a target)")) +
             ", the last step guarded";
    const int64_t n = r->extent.value;
    std::string divs;
    for (int64_t d = 2; d <= std::min<int64_t>(n, kMaxRFactor); ++d)
      if (n % d == 0 && (d & (d - 1)) == 0) divs += (divs.empty() ? "" : ", ") + std::to_string(d);
    return where + " factor " + std::to_string(rf.factor) + " for '" + rf.rvar + "' (extent " +
           std::to_string(n) + ") must be at least 2, at most 256 and divide the extent; e.g. " +
           (divs.empty() ? std::string("none: the extent has no such divisor") : divs) +
           "; or be a multiple of the target's vector lanes" +
           (target ? " (" + lanes_text + ")" : std::string()) + ", the last step guarded";
  }
  if (!fits(rf.factor))
    return where + " factor " + std::to_string(rf.factor) + " does not fit target " + target->name +
           " (" + lanes_text + "); use a divisor or multiple of " + std::to_string(lanes);
  return "";
}

bool combines_in_vectors(const StageSchedule& ss) {
  return ss.rfactor && ss.rfactor->parallel && ss.rfactor->vector_lanes == 0;
}

std::string interleave_problem(const Stage& st, const StageSchedule& ss, const Target* target) {
  const auto rows = interleaved_rows(st, ss.loops);
  if (ss.rfactor && ss.rfactor->parallel) return chunk_tile_problem(st, ss, rows, target);
  // The update's last block is guarded, not shifted (a point updated twice
  // would be summed twice), so whole blocks need a dividing tile; so does a
  // core's share of them (a guarded share would still compute whole blocks
  // past the last row, reading past the operands).
  const bool root = ss.compute.kind == Placement::Kind::Root;
  if (rows && root && rows->tile >= 2 && rows->tile <= kMaxInterleave &&
      rows->extent % rows->tile == 0 &&
      (rows->outer_tile == 0 ||
       (rows->outer_tile % rows->tile == 0 && rows->extent % rows->outer_tile == 0)) &&
      rows->inner > 0 && rows->tile * rows->inner <= kMaxInterleavePartials)
    return "";
  return "stage '" + st.name +
         "': rfactor interleave needs the stage computed at root with its innermost "
         "tiled pure dim static and tiled by a divisor of its extent from 2 to " +
         std::to_string(kMaxInterleave) +
         " (the rows unrolled in each step; two levels: the outer tile a multiple of it that "
         "divides the "
         "extent), the pure dims inside it static, and at most " +
         std::to_string(kMaxInterleavePartials) + " points (rows x inner points) per step; " +
         (rows ? "'" + rows->dim + "' (extent " + std::to_string(rows->extent) + ") is tiled by " +
                     (rows->outer_tile ? std::to_string(rows->outer_tile) + " x " : std::string()) +
                     std::to_string(rows->tile) +
                     (rows->inner != 1 ? ", " + std::to_string(rows->inner) + " points inside it"
                                       : std::string())
               : std::string("no static pure dim is tiled")) +
         (root ? std::string() : ", and it is computed " + to_string(ss.compute));
}

// Every factor rfactor_problem() accepts (divisors of a static extent, and
// whole vectors of lanes with a guarded last step); parallel chunks are not
// enumerated (their lengths are a continuum, chosen by the defaults).
std::vector<RFactor> rfactor_candidates(const Stage& st, const Target* target, DType accumulate) {
  std::vector<RFactor> r;
  if (!st.reduce || st.is_arg_reduction()) return r;
  for (const RVar& v : st.rvars) {
    const int64_t top =
        v.extent.is_symbolic() ? kMaxRFactor : std::min<int64_t>(v.extent.value, kMaxRFactor);
    for (int64_t f = 2; f <= top; ++f) {
      const RFactor rf{v.name, static_cast<int>(f)};
      if (rfactor_problem(st, rf, target, accumulate).empty()) r.push_back(rf);
    }
  }
  return r;
}

namespace {

struct RFactorDirective : Directive {
  RFactorDirective() : Directive("rfactor") {}

  void parse_value(const nlohmann::json& v, StageSchedule& ss,
                   const std::string& path) const override {
    json::check_keys(v, path, {"rvar", "factor", "parallel", "vector_lanes", "short_below", "interleave"});
    if (!v.contains("rvar") || !v.contains("factor"))
      json::fail(path, "needs \"rvar\" and \"factor\"");
    RFactor rf{json::get_string(v["rvar"], path + ".rvar"),
               static_cast<int>(json::get_int(v["factor"], path + ".factor", 0, 1 << 30))};
    if (rf.factor == 1)
      json::fail(path + ".factor",
                 "must be at least 2, or 0 with \"parallel\" (one chunk per core, sized at run time)");
    if (v.contains("parallel")) {
      if (!v["parallel"].is_boolean()) json::fail(path + ".parallel", "must be true or false");
      rf.parallel = v["parallel"].get<bool>();
    }
    if (v.contains("vector_lanes"))
      rf.vector_lanes =
          static_cast<int>(json::get_int(v["vector_lanes"], path + ".vector_lanes", 0, 1024));
    if (v.contains("short_below"))
      rf.short_below =
          static_cast<int>(json::get_int(v["short_below"], path + ".short_below", 0, 1 << 30));
    if (v.contains("interleave")) {
      if (!v["interleave"].is_boolean()) json::fail(path + ".interleave", "must be true or false");
      rf.interleave = v["interleave"].get<bool>();
    }
    ss.rfactor = rf;
  }
  void print(const StageSchedule& ss, nlohmann::json& js) const override {
    if (!ss.rfactor) return;
    js["rfactor"] = {{"rvar", ss.rfactor->rvar}, {"factor", ss.rfactor->factor}};
    if (ss.rfactor->parallel) js["rfactor"]["parallel"] = true;
    if (ss.rfactor->vector_lanes) js["rfactor"]["vector_lanes"] = ss.rfactor->vector_lanes;
    if (ss.rfactor->short_below) js["rfactor"]["short_below"] = ss.rfactor->short_below;
    if (ss.rfactor->interleave) js["rfactor"]["interleave"] = true;
  }

  // Halide's rfactor on the stage: the rule above, and none of the directives it replaces.
  void check(const CheckContext& c) const override {
    const StageSchedule& ss = c.ss;
    if (!ss.rfactor) return;
    if (const std::string e =
            rfactor_problem(c.stage, *ss.rfactor, c.target, c.precision.accumulate);
        !e.empty())
      throw ScheduleError(e);
    const std::string where = c.where() + ": rfactor";
    const auto conflict = [&](const char* what) {
      throw ScheduleError(
          where +
          " replaces the update's loops with the intermediate's, so it cannot be combined with " +
          what + "; drop one of them");
    };
    // With short_below the update directives schedule the short version only.
    if (ss.update && !ss.rfactor->short_below) conflict("\"update\" directives");
    if (!ss.accumulator_at.empty()) conflict("accumulator_at");
    // A copy per tile of the pure loops (which the update keeps, outside the
    // intermediate computed per point) is fine; one inside the update is not.
    for (const CacheRead& cr : ss.cache) {
      bool pure_tile = false;
      if (!ss.rfactor->parallel)
        for (const Loop& l : loop_nest(c.stage, update_pure_loops(ss.loops), true))
          pure_tile |= l.name == cr.loop && !l.reduction && l.name != l.dim;
      if (!pure_tile) conflict("cache inside the update's loops");
    }
    if (!ss.pipeline.prefetch.empty()) conflict("prefetch");
    if (ss.rfactor->interleave)
      if (const std::string e = interleave_problem(c.stage, ss, c.target); !e.empty())
        throw ScheduleError(e);
    if (ss.device != "cpu")
      throw ScheduleError(where + " runs on the CPU only; device is '" + ss.device + "'");
  }

  bool schedules_reduction() const override { return true; }

  // The innermost pure loop of the update under those tiles: where the
  // intermediate is computed per point.
  static std::string innermost_pure(const Stage& st, const LoopSchedule& ls) {
    const std::string& v = st.vars.back();
    const auto t = ls.tile.find(v);
    return t == ls.tile.end() ? v : split_names(v, t->second.size()).back();
  }
  static std::string chunks(const RVar& r, int factor) {
    if (factor == 0) return "cores";
    if (!r.extent.is_symbolic()) return std::to_string((r.extent.value + factor - 1) / factor);
    return "ceil(" + r.extent.sym + " / " + std::to_string(factor) + ")";
  }

  // Split the reduction variable and turn its inner part into the pure lane
  // dim of an intermediate Func, computed per point of the reduction (inside
  // the update's innermost pure loop) with the lanes innermost and
  // vectorized; the update then reduces the lanes. The check guarantees an
  // associative op, no update directives, and whole vectors of lanes where
  // the split leaves a remainder: over a static extent lowering shifted its
  // last step inwards (shifted_last_step), over a symbolic one it is guarded
  // (Halide peels it off the steady state, which stays an unguarded loop).
  void apply(ApplyContext& c) const override {
    const StageSchedule& ss = c.schedule();
    const Stage& st = c.stage();
    if (!ss.rfactor || !st.reduce) return;
    const RFactor& rf = *ss.rfactor;
    if (rf.parallel) return apply_parallel(c);
    Halide::Func red = c.reducer();
    const Halide::RVar r(rf.rvar), ro(outer_loop(rf.rvar)), ri(inner_loop(rf.rvar));
    const Halide::Var lane(rfactor_lane(rf.rvar));
    const Halide::Expr extent = rvar_extent(red, rf.rvar);
    Halide::Stage up = red.update(0);
    // The short version first: a specialization copies the update's
    // schedule as it is then (unsplit), and Halide tests it first at run time.
    if (rf.short_below) {
      Halide::Stage short_rows = up.specialize(extent < rf.short_below);
      if (ss.update) {
        if (c.helper())
          apply_loops(st, short_rows, *ss.update, true, false);
        else
          apply_loops(update_stage(st, &ss), short_rows, *ss.update, true, false);
      }
    }
    up.split(r, ro, ri, rf.factor, Halide::TailStrategy::GuardWithIf);
    Halide::Func intm = up.rfactor(ri, lane);
    if (!c.helper()) apply_caches(c, intm);  // the intermediate reads the operands now
    const LoopSchedule pure = update_pure_loops(ss.loops);
    const auto rows = rf.interleave ? interleaved_rows(st, pure) : std::nullopt;
    if (st.vars.empty())
      intm.compute_at(red, Halide::Var::outermost());
    else
      intm.compute_at(red, Halide::Var(rows ? rows->outer : innermost_pure(st, pure)));
    intm.vectorize(lane);
    std::vector<Halide::VarOrRVar> order{Halide::VarOrRVar(lane)};
    if (rows) {
      // Lanes innermost in storage too (rfactor appends the lane dim, which
      // would put each row's lanes a block apart: strided vectors), the
      // block's rows inside each step, unrolled so their partials are
      // registers. The block is the tile's, which divides the dim
      // (interleave_problem), so every block is whole.
      std::vector<Halide::Var> storage{lane};
      for (auto it = st.vars.rbegin(); it != st.vars.rend(); ++it) {
        storage.emplace_back(*it);
        order.emplace_back(Halide::Var(*it));
      }
      intm.reorder_storage(storage);
      intm.bound_extent(Halide::Var(rows->dim), static_cast<int>(rows->tile));
      intm.unroll(Halide::Var(rows->dim));
      // The pure dims inside the block (a few output columns) unrolled too:
      // every partial of the step a register.
      for (size_t k = inner_dims(st, rows->dim); k < st.vars.size(); ++k) {
        intm.bound_extent(Halide::Var(st.vars[k]), static_cast<int>(st.shape[k].value));
        intm.unroll(Halide::Var(st.vars[k]));
      }
    }
    order.emplace_back(ro);
    for (auto it = st.rvars.rbegin(); it != st.rvars.rend(); ++it)
      if (it->name != rf.rvar) order.emplace_back(Halide::RVar(it->name));
    intm.update(0).reorder(order).vectorize(lane);
    if (rows) {
      intm.update(0).unroll(Halide::Var(rows->dim));
      for (size_t k = inner_dims(st, rows->dim); k < st.vars.size(); ++k)
        intm.update(0).unroll(Halide::Var(st.vars[k]));
    }
    // The stage's own update now reduces `factor` lanes. Vectorized as an
    // atomic reduction, Halide emits one VectorReduce: a halving tree of
    // shuffles and vector ops (log2(factor) steps) instead of `factor`
    // dependent scalar ops, which dominated short rows (layer_norm: two
    // such combines per 768-wide row).
    if (!pure.empty()) apply_loops(st, red.update(0), pure, true, false, false, c.helper() ? nullptr : &c);
    combine_lanes(red, extent, rf.factor, ri);
    serial_init(red);
  }

  // The init is one store per point: run in the update's parallel blocks of
  // rows (4 rows each for a symbolic row count), its tasks cost more than the
  // stores (symbolic [1, 2048, 7, 7] global pool, 2 threads: 0.066 ms with
  // 512 init tasks, 0.055 ms serial; static kernel 0.059).
  static void serial_init(Halide::Func red) {
    const auto serial = [](Halide::Internal::Definition& d) {
      for (Halide::Internal::Dim& dim : d.schedule().dims())
        if (dim.for_type == Halide::Internal::ForType::Parallel)
          dim.for_type = Halide::Internal::ForType::Serial;
    };
    Halide::Internal::Definition& init = red.function().definition();
    serial(init);
    for (Halide::Internal::Specialization& sp : init.specializations()) serial(sp.definition);
  }

  // The extent of reduction variable `rvar` of the Func's update, read
  // before any split.
  static Halide::Expr rvar_extent(Halide::Func red, const std::string& rvar) {
    for (const Halide::Internal::ReductionVariable& v : red.function().update(0).schedule().rvars())
      if (v.var == rvar) return v.extent;
    return Halide::Expr();
  }

  // The combine of `lanes` partials (the update's RVar `r`) as one atomic
  // vector reduce. Over a symbolic extent Halide bounds the lanes by
  // min(extent, lanes), not a constant, and the combine stayed a scalar loop
  // of atomic (compare-and-swap) adds, 3x the time of the rest of a
  // symbolic [4096, 4096] row sum: the extents of at least `lanes` get the
  // vector reduce, shorter ones a plain scalar loop.
  static void combine_lanes(Halide::Func red, const Halide::Expr& extent, int lanes,
                            const Halide::RVar& r) {
    if (extent.defined() && !Halide::Internal::is_const(extent))
      red.update(0).specialize(extent >= lanes).atomic().vectorize(r);
    else
      red.update(0).atomic().vectorize(r);
  }

  // Across cores: chunks of `factor` steps of rvar (the last one guarded)
  // become the intermediate's parallel dim rvar_part, computed once per
  // realization of the stage. Within a chunk the reduction streams along the
  // contiguous axis: with vector_lanes, rvar's inner steps are lanes of
  // partials (innermost, vectorized); without, the stage's innermost dim is
  // innermost and vectorized, kChunkUnroll steps of the chunk unrolled inside
  // each vector of it, so that the partial vector is loaded and stored once
  // per kChunkUnroll rows instead of once per row (x @ W over [300, 2000],
  // 2 threads: 0.031 -> 0.018 ms; in cache the stores bound it, out of cache
  // the stream does and the unroll changes nothing). The stage then combines
  // the chunks (and lanes), in vectors along its innermost dim where its
  // values are not the caller's buffer (combines_in_vectors: the combine of
  // 2 x 2048 partials, scalar, took half of a 0.008 ms [32, 2048] x @ W).
  void apply_parallel(ApplyContext& c) const {
    const Stage& st = c.stage();
    const RFactor& rf = *c.schedule().rfactor;
    Halide::Func red = c.reducer();
    const Halide::Expr extent = rvar_extent(red, rf.rvar);
    const Halide::RVar r(rf.rvar), ro(outer_loop(rf.rvar)), ri(inner_loop(rf.rvar));
    const Halide::RVar rio(outer_loop(inner_loop(rf.rvar))), rii(inner_loop(inner_loop(rf.rvar)));
    const Halide::Var part(rfactor_part(rf.rvar)), lane(rfactor_lane(rf.rvar));
    Halide::Stage up = red.update(0);
    // Chunk 0: one per core, whole multiples of kChunkUnroll steps, each of
    // at least kFineTaskElements points (a [1, 37] @ [37, 100] is one chunk:
    // split, it took 1.7 us against 0.5).
    Halide::Expr chunk = rf.factor;
    if (!rf.factor) {
      const int cores = std::max(1, c.target().cores);
      Halide::Expr points = Halide::cast<int64_t>(1);
      for (const Dim& d : st.shape) points = points * Halide::cast<int64_t>(c.extent(d));
      for (const RVar& v : st.rvars)
        if (v.name != rf.rvar) points = points * Halide::cast<int64_t>(c.extent(v.extent));
      const Halide::Expr fine = Halide::cast<int>(
          Halide::min((Halide::Internal::make_const(Halide::Int(64), kFineTaskElements) + points - 1) / points,
                      Halide::Internal::make_const(Halide::Int(64), 1 << 30)));
      const Halide::Expr per_core = (extent + cores - 1) / cores;
      chunk = (Halide::max(per_core, fine) + (kChunkUnroll - 1)) / kChunkUnroll * kChunkUnroll;
    }
    const bool unroll = rf.factor % kChunkUnroll == 0;
    up.split(r, ro, ri, chunk, Halide::TailStrategy::GuardWithIf);
    Halide::Func intm;
    if (rf.vector_lanes) {
      up.split(ri, rio, rii, rf.vector_lanes, Halide::TailStrategy::GuardWithIf);
      intm = up.rfactor({{ro, part}, {rii, lane}});
    } else {
      intm = up.rfactor(ro, part);
    }
    intm.compute_at(red, Halide::Var::outermost());
    if (rf.interleave) {
      chunk_tile(c, intm, ri, part);
      return;
    }
    std::vector<Halide::VarOrRVar> order;  // innermost first
    std::string inner_var;
    if (rf.vector_lanes) {
      order = {Halide::VarOrRVar(lane), Halide::VarOrRVar(rio)};
    } else {
      if (!st.vars.empty()) {
        inner_var = st.vars.back();
        order.emplace_back(Halide::Var(inner_var));
      }
      order.emplace_back(ri);
    }
    for (auto it = st.rvars.rbegin(); it != st.rvars.rend(); ++it)
      if (it->name != rf.rvar) order.emplace_back(Halide::RVar(it->name));
    for (auto it = st.vars.rbegin(); it != st.vars.rend(); ++it)
      if (*it != inner_var) order.emplace_back(Halide::Var(*it));
    order.emplace_back(part);
    Halide::Stage iu = intm.update(0);
    iu.reorder(order);
    if (rf.vector_lanes) {
      intm.vectorize(lane);
      iu.vectorize(lane);
    } else if (!inner_var.empty()) {
      const int w = c.target().vector_bits / intm.type().bits();
      const Dim& e = st.shape.back();
      if (w > 1 && (e.is_symbolic() || e.value >= w)) {
        const Halide::Var j(inner_var), jo(outer_loop(inner_var)), jv(inner_loop(inner_var));
        if (unroll) {
          iu.split(j, jo, jv, w, Halide::TailStrategy::GuardWithIf)
              .split(ri, rio, rii, kChunkUnroll, Halide::TailStrategy::GuardWithIf)
              .reorder(jv, rii, jo, rio)
              .vectorize(jv)
              .unroll(rii);
        } else {
          iu.vectorize(j, w, Halide::TailStrategy::GuardWithIf);
        }
        if (!c.caller_buffer())
          red.update(0).vectorize(j, w, Halide::TailStrategy::GuardWithIf);
      }
    }
    iu.parallel(part);
    // Whole chunks hold whole vectors of lanes: the combine's lanes are
    // constant where the extent is at least a chunk.
    if (rf.vector_lanes) combine_lanes(red, extent, rf.factor, rii);
  }

  // Split-K with a register tile (a parallel rfactor that interleaves): in
  // each chunk the block's rows (unrolled) x the stage's innermost dim in
  // vectors (unrolled, the last one masked) take every step of the chunk, so
  // their partials stay in registers (LLVM promotes the intermediate's fixed
  // addresses within the step loop; the block divides its dim, so no guard
  // splits the loop). Each step loads a vector piece of the second operand's
  // row and broadcasts one value per row: [33, 4096] @ [4096, 33], 2 threads,
  // Zen 4: 0.053 ms in blocks of 3 rows, against 0.103 for the register tile
  // over the output (two column tiles of 32 for 33 columns, 3 row tiles, all
  // 4096 steps each).
  void chunk_tile(ApplyContext& c, Halide::Func intm, const Halide::RVar& ri,
                  const Halide::Var& part) const {
    const Stage& st = c.stage();
    const Rows rows = *interleaved_rows(st, c.schedule().loops);
    const std::string& last = st.vars.back();
    const int w = chunk_tile_lanes(st, c.schedule(), c.target(), intm.type().bits());
    const Halide::Var j(last), jo(outer_loop(last)), jv(inner_loop(last));
    const Halide::Var row(rows.dim), ro(outer_loop(rows.dim)), rin(inner_loop(rows.dim));
    if (w > 1) intm.vectorize(j, w, Halide::TailStrategy::GuardWithIf);
    Halide::Stage iu = intm.update(0);
    iu.split(row, ro, rin, static_cast<int>(rows.tile), Halide::TailStrategy::GuardWithIf);
    std::vector<Halide::VarOrRVar> order;  // innermost first
    if (w > 1) {
      iu.split(j, jo, jv, w, Halide::TailStrategy::GuardWithIf);
      order = {Halide::VarOrRVar(jv), Halide::VarOrRVar(jo)};
    } else {
      order = {Halide::VarOrRVar(j)};
    }
    const size_t inside = inner_dims(st, rows.dim);
    for (size_t k = st.vars.size() - 1; k-- > inside;) order.emplace_back(Halide::Var(st.vars[k]));
    order.emplace_back(rin);
    order.emplace_back(ri);
    for (auto it = st.rvars.rbegin(); it != st.rvars.rend(); ++it)
      if (it->name != c.schedule().rfactor->rvar) order.emplace_back(Halide::RVar(it->name));
    order.emplace_back(ro);
    for (size_t k = inside - 1; k-- > 0;) order.emplace_back(Halide::Var(st.vars[k]));
    order.emplace_back(part);
    iu.reorder(order);
    if (w > 1) iu.vectorize(jv).unroll(jo);
    for (size_t k = inside; k + 1 < st.vars.size(); ++k) iu.unroll(Halide::Var(st.vars[k]));
    iu.unroll(rin).parallel(part);
    // The combine of the chunks, in vectors where its values are not the caller's buffer.
    if (w > 1 && !c.caller_buffer())
      c.reducer().update(0).vectorize(j, w, Halide::TailStrategy::GuardWithIf);
  }

  // The stage's pure loops, the intermediate per point (partial reductions
  // over rvar_o, its lanes vectorized), then the reduction of the lanes.
  // Printed with the explain loop printer over a copy of the stage whose
  // reduction variable is the lane.
  bool explain_update(ExplainContext& e, const Stage& st, const StageSchedule& ss,
                      const UpdateText& u, int depth) const override {
    if (!ss.rfactor) return false;
    const RFactor& rf = *ss.rfactor;
    LoopSchedule init = ss.loops;
    if (!rf.parallel) init.parallel.clear();  // serial_init()
    e.nest(st, init, false, depth, u.lhs + " = " + u.init);
    const std::string op(to_string(*st.reduce));
    const std::string lane = rfactor_lane(rf.rvar), part = rfactor_part(rf.rvar),
                      f = std::to_string(rf.factor);
    const std::string& lhs = u.lhs;
    std::string args = lhs.substr(st.name.size() + 1, lhs.size() - st.name.size() - 2);
    const std::string sep = args.empty() ? "" : ", ";
    const RVar* rv = nullptr;
    std::string others;
    for (const RVar& r : st.rvars)
      if (r.name == rf.rvar)
        rv = &r;
      else
        others += ", " + r.name;
    if (rf.parallel) {
      const std::string lanes = std::to_string(rf.vector_lanes);
      const std::string rf_ref = st.name + "__rf(" + args + sep + part +
                                 (rf.vector_lanes ? ", " + lane : std::string()) + ")";
      const std::string chunk = rf.factor ? f : "ceil(" + rv->extent.str() + " / cores)";
      e.line(depth, "intermediate " + st.name + "__rf: rfactor of " + rf.rvar + " across cores in " +
                        (rf.factor ? "chunks of " + f : "one chunk per core, sized at run time") + " (" +
                        rf.rvar + " = " + part + " * " + chunk + " + " + inner_loop(rf.rvar) +
                        ", the last chunk guarded)" +
                        (rf.vector_lanes ? ", " + lanes + " lanes each" : std::string()));
      e.line(depth + 1, "parallel for " + part + " in [0, " + chunks(*rv, rf.factor) + "):");
      e.line(depth + 2, rf_ref + " = " + u.init);
      const auto block = rf.interleave ? interleaved_rows(st, ss.loops) : std::nullopt;
      if (block)
        e.line(depth + 2, "for " + outer_loop(block->dim) + " in [0, " +
                              std::to_string(block->extent / block->tile) +
                              "): a register tile of " + std::to_string(block->tile) + " rows of " +
                              block->dim + " x " + st.vars.back() +
                              " in vectors, unrolled, through the whole chunk:");
      const std::string inner =
          block ? "for " + inner_loop(rf.rvar) + " in [0, " + chunk + ")" + others +
                      ", rows and vectors unrolled"
          : rf.vector_lanes
              ? "for " + outer_loop(inner_loop(rf.rvar)) + " in [0, " + f + " / " + lanes + ")" +
                    others + ": vectorized x" + lanes + " for " + lane
              : "for " + inner_loop(rf.rvar) + " in [0, " + chunk + ")" + others +
                    (st.vars.empty() ? std::string()
                                     : ", then vectorized along " + st.vars.back() +
                                           (rf.factor % kChunkUnroll == 0
                                                ? ", " + std::to_string(kChunkUnroll) +
                                                      " steps unrolled in each vector"
                                                : std::string()));
      e.line(depth + (block ? 3 : 2),
             inner + ": " + rf_ref + " = " + op + "(" + rf_ref + ", " + to_string(st.value) + ")");
      Stage comb = st;
      comb.rvars = {RVar{part, rv->extent.is_symbolic() || rf.factor == 0
                                   ? Dim::symbol(chunks(*rv, rf.factor))
                                   : Dim((rv->extent.value + rf.factor - 1) / rf.factor)}};
      if (rf.vector_lanes) comb.rvars.push_back(RVar{lane, Dim(rf.vector_lanes)});
      LoopSchedule combine;
      if (rf.vector_lanes) {
        combine.vectorize = lane;
        combine.vector_width = rf.vector_lanes;
      } else if (!st.vars.empty()) {
        combine.vectorize = st.vars.back();
      }
      e.line(depth, "combine the " + chunks(*rv, rf.factor) + " chunks:");
      e.nest(comb, combine, true, depth + 1, lhs + " = " + op + "(" + lhs + ", " + rf_ref + ")");
      return true;
    }
    if (rf.short_below) {
      e.line(depth, "if " + rf.rvar + " (extent " + rv->extent.str() + ") < " +
                        std::to_string(rf.short_below) + ":");
      e.nest(st, ss.update.value_or(LoopSchedule{}), true, depth + 1,
             lhs + " = " + op + "(" + lhs + ", " + to_string(st.value) + ")");
      e.line(depth, "else:");
      ++depth;
    }
    const std::string rf_ref = st.name + "__rf(" + args + sep + lane + ")";
    const auto rows = rf.interleave ? interleaved_rows(st, ss.loops) : std::nullopt;
    auto intermediate = [&](int d) {
      e.line(d, "intermediate " + st.name + "__rf: rfactor of " + rf.rvar + " by " + f + " (" +
                    rf.rvar + " = " + outer_loop(rf.rvar) + " * " + f + " + " + lane +
                    (rows ? "), per block of " + rows->outer + ", its rows interleaved in each step, unrolled"
                           : std::string("), per point")));
      e.line(d + 1, "vectorized x" + f + " for " + lane + " in [0, " + f + "): " + rf_ref + " = " +
                        u.init);
      e.line(d + 1, "for " + outer_loop(rf.rvar) + " in [0, " + chunks(*rv, rf.factor) + ")" +
                        others + ":");
      e.line(d + 2, "vectorized x" + f + " for " + lane + " in [0, " + f + "): " + rf_ref + " = " +
                        op + "(" + rf_ref + ", " + to_string(st.value) + ")");
    };
    Stage lanes = st;
    lanes.rvars = {RVar{lane, Dim(rf.factor)}};
    const std::string body = lhs + " = " + op + "(" + lhs + ", " + rf_ref + ")";
    // The lanes are combined by one vectorized (tree) reduce.
    LoopSchedule combine = update_pure_loops(ss.loops);
    combine.vectorize = lane;
    combine.vector_width = rf.factor;
    if (st.vars.empty()) {
      intermediate(depth);
      e.nest(lanes, combine, true, depth, body);
    } else {
      e.nest(lanes, combine, true, depth, body, rows ? rows->outer : innermost_pure(st, combine), intermediate);
    }
    return true;
  }

 protected:
  // Lanes of partials by whole vectors or a few steps (other factors only
  // waste a search's trials), and splits across cores: chunks of one core's
  // share or half of it, with and without lanes of partials along the chunk.
  std::vector<StageSchedule> proposals(const CheckContext& c) const override {
    const DType acc = c.precision.accumulate;
    const int lanes = c.target ? std::max(1, c.target->vector_lanes(acc)) : 1;
    std::vector<RFactor> rfs;
    for (const RFactor& rf : rfactor_candidates(c.stage, c.target, acc))
      if (rf.factor <= 8 || rf.factor % lanes == 0) rfs.push_back(rf);
    const int cores = c.target ? c.target->cores : 1;
    for (const RVar& v : c.stage.rvars) {
      if (cores < 2 || !c.stage.reduce || c.stage.is_arg_reduction()) break;
      for (const int64_t share : {1, 2})
        for (const int along : {0, 4 * lanes}) {
          RFactor rf{v.name, 0, true, lanes > 1 ? along : 0};
          const int64_t unit = rf.vector_lanes ? rf.vector_lanes : kChunkUnroll;
          if (v.extent.is_symbolic()) {
            rf.factor = rf.vector_lanes ? 1 << 13 : 0;
          } else {
            const int64_t chunk = (v.extent.value + cores * share - 1) / (cores * share);
            const int64_t rounded = (chunk + unit - 1) / unit * unit;
            if (rounded >= v.extent.value) continue;
            rf.factor = static_cast<int>(rounded);
          }
          if (rf.vector_lanes > rf.factor && rf.factor > 0) rf.vector_lanes = 0;
          if (std::find(rfs.begin(), rfs.end(), rf) == rfs.end() &&
              rfactor_problem(c.stage, rf, c.target, acc).empty())
            rfs.push_back(rf);
        }
    }
    // Without what an rfactor replaces (check() above): the update's own
    // loops, the accumulator tile, prefetches, caches inside the update.
    const Stage& st = c.stage;
    const auto without_update = [&st](StageSchedule& v, const RFactor& rf) {
      v.rfactor = rf;
      v.update.reset();
      v.accumulator_at.clear();
      v.pipeline.prefetch.clear();
      const auto pure = cache_pure_loops(st, v);
      std::erase_if(v.cache, [&](const CacheRead& cr) {
        return std::find(pure.begin(), pure.end(), cr.loop) == pure.end();
      });
    };
    std::vector<StageSchedule> out = variants(c.ss, rfs, without_update);
    // Split-K with a register tile: each chunk across cores over blocks of
    // rows of the dim outside the innermost (its divisors), the stage's other
    // loop directives dropped (the block is the stage's only tile).
    if (cores >= 2 && st.vars.size() >= 2) {
      const Dim& rows = st.shape[st.vars.size() - 2];
      for (RFactor rf : rfs) {
        if (!rf.parallel || rf.vector_lanes || rows.is_symbolic()) continue;
        const RVar* r = nullptr;
        for (const RVar& v : st.rvars)
          if (v.name == rf.rvar) r = &v;
        // Whole chunks: a guarded last one keeps the partials in memory.
        if (!r->extent.is_symbolic()) {
          const int64_t n = (r->extent.value + rf.factor - 1) / rf.factor;
          if (r->extent.value % n != 0) continue;
          rf.factor = static_cast<int>(r->extent.value / n);
        }
        rf.interleave = true;
        // Narrower vectors too: a masked tail of several lanes stays in memory (chunk_tile_lanes).
        for (int64_t b = 2; b <= std::min<int64_t>(rows.value, 16); ++b)
          for (int w = lanes; w >= std::min(lanes, 4); w /= 2) {
            if (rows.value % b != 0) continue;
            StageSchedule v = c.ss;
            clear_plain_loops(v);
            v.pad_lanes.clear();
            v.specialize = false;
            v.loops.tile[st.vars[st.vars.size() - 2]] = {b};
            if (w != lanes) {
              v.loops.vectorize = st.vars.back();
              v.loops.vector_width = w;
            }
            v.rfactor = rf;
            out.push_back(std::move(v));
          }
      }
    }
    return out;
  }
};

}  // namespace

LoopSchedule update_pure_loops(const LoopSchedule& pure) {
  LoopSchedule ls;
  ls.tile = pure.tile;
  ls.parallel = pure.parallel;
  return ls;
}

const Directive& rfactor_directive() {
  return instance<RFactorDirective>();
}

}  // namespace pto::directives
