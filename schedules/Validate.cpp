#include "schedules/Validate.h"

#include <algorithm>
#include <set>

#include "dsl/ZeroPadding.h"
#include "schedules/LoopNest.h"

namespace pto {
namespace {

std::string join(const std::vector<std::string>& v) {
  std::string r;
  for (const auto& s : v) r += (r.empty() ? "" : ", ") + s;
  return r;
}
std::vector<std::string> names(const std::vector<Loop>& loops) {
  std::vector<std::string> r;
  for (const auto& l : loops) r.push_back(l.name);
  return r;
}
const Loop* find_loop(const std::vector<Loop>& loops, const std::string& n) {
  for (const auto& l : loops)
    if (l.name == n) return &l;
  return nullptr;
}


// The loops a producer can be computed or stored at in stage `c`: those of its
// last definition (Halide places producers in the last stage, the update of
// a reduction, which is also where a reduction reads its inputs).
std::vector<Loop> placement_loops(const Stage& c, const StageSchedule* cs) {
  const LoopSchedule none;
  if (c.reduce) {
    auto loops = loop_nest(c, cs && cs->update ? *cs->update : none, true);
    // With rfactor the update reduces the intermediate's lanes: its reduction
    // loops are not those of the schedule, only its pure loops remain.
    if (cs && cs->rfactor) std::erase_if(loops, [](const Loop& l) { return l.reduction; });
    return loops;
  }
  return loop_nest(c, cs ? cs->loops : none, false);
}

// Halide's rfactor on `st` (see RFactor in Schedule.h): an associative
// reduction, a static reduction extent the factor divides, lanes that fit the
// target, and none of the directives it replaces.
void check_rfactor(const Stage& st, const StageSchedule& ss, const Target* target, DType accumulate) {
  const RFactor& rf = *ss.rfactor;
  const std::string where = "stage '" + st.name + "': rfactor";
  if (!st.reduce) throw ScheduleError("stage '" + st.name + "' has no reduction, so there is nothing to rfactor");
  const ReduceOp op = *st.reduce;
  if (op == ReduceOp::ArgMin || op == ReduceOp::ArgMax)
    throw ScheduleError(where + " of a " + std::string(to_string(op)) +
                        " reduction: it returns an index, not an associative combination of values; rfactor "
                        "applies to sum, prod, min and max");
  std::vector<std::string> rvars;
  const RVar* r = nullptr;
  for (const RVar& v : st.rvars) {
    rvars.push_back(v.name);
    if (v.name == rf.rvar) r = &v;
  }
  if (!r)
    throw ScheduleError(where + " names unknown reduction variable '" + rf.rvar + "'; its reduction variables: " +
                        join(rvars));
  if (r->extent.is_symbolic())
    throw ScheduleError(where + " of '" + rf.rvar + "', whose extent '" + r->extent.sym +
                        "' is symbolic; rfactor needs a static extent that the factor divides");
  const int64_t n = r->extent.value;
  if (rf.factor < 2 || rf.factor > n || n % rf.factor != 0 || rf.factor > 256) {
    std::string divs;
    for (int64_t d = 2; d <= std::min<int64_t>(n, 256); ++d)
      if (n % d == 0 && (d & (d - 1)) == 0) divs += (divs.empty() ? "" : ", ") + std::to_string(d);
    throw ScheduleError(where + " factor " + std::to_string(rf.factor) + " for '" + rf.rvar + "' (extent " +
                        std::to_string(n) + ") must be at least 2, at most 256 and divide the extent; e.g. " +
                        (divs.empty() ? std::string("none: the extent has no such divisor") : divs));
  }
  if (target) {
    const int lanes = target->vector_lanes(accumulate == DType::Bool ? DType::U8 : accumulate);
    if (lanes > 1 && rf.factor % lanes != 0 && lanes % rf.factor != 0)
      throw ScheduleError(where + " factor " + std::to_string(rf.factor) + " does not fit target " + target->name + " (" +
                          std::to_string(lanes) + " lanes of " + std::string(to_string(accumulate)) +
                          "); use a divisor or multiple of " + std::to_string(lanes));
  }
  const auto conflict = [&](const char* what) {
    throw ScheduleError(where + " replaces the update's loops with the intermediate's, so it cannot be combined with " +
                        what + "; drop one of them");
  };
  if (ss.update) conflict("\"update\" directives");
  if (!ss.accumulator_at.empty()) conflict("accumulator_at");
  if (!ss.cache.empty()) conflict("cache");
  if (!ss.pipeline.prefetch.empty()) conflict("prefetch");
  if (ss.device != "cpu") throw ScheduleError(where + " runs on the CPU only; device is '" + ss.device + "'");
}

// Does `ls` split loop `l` further (unroll or vectorize by a factor smaller
// than the loop)? Halide then places things at the outer part, and sizes
// them wrongly: negative allocations and out-of-bounds reads were found by
// test_differential, so nothing is placed at such a loop.
bool factor_split(const LoopSchedule& ls, const Loop& l) {
  const auto u = ls.unroll.find(l.name);
  const bool unroll_split = u != ls.unroll.end() && u->second != 0 && !(l.extent == u->second && l.name != l.dim);
  const bool vector_split = ls.vectorize == l.name && ls.vector_width != 0 && !(l.extent == ls.vector_width && l.name != l.dim);
  return unroll_split || vector_split;
}

// Loops of `st` that enclose its reads (where a cache can be made): the pure
// loops of a pure stage; the update loops of a reduction, and its pure loops
// down to its accumulator tile when it has one.
std::vector<std::string> cache_loops(const Stage& st, const StageSchedule& ss) {
  std::vector<std::string> r;
  if (!st.reduce || !ss.accumulator_at.empty()) {
    for (const Loop& l : loop_nest(st, ss.loops, false)) {
      r.push_back(l.name);
      if (l.name == ss.accumulator_at) break;
    }
  }
  if (st.reduce) {
    const LoopSchedule none;
    for (const Loop& l : loop_nest(st, ss.update ? *ss.update : none, true)) r.push_back(l.name);
  }
  return r;
}

// One loop around a stage's computation, outermost first, with whether its
// iterations run concurrently (parallel, or vector lanes).
struct Enclosing {
  std::string stage, loop;
  bool concurrent = false;
};

// The loops around the body of `stage`'s loop `loop`, from the root inwards,
// following compute_at chains outwards. A loop vectorized with a width that
// splits it keeps its name for the outer part and gets an unnamed lane loop
// just inside (as Halide's vectorize(x, w) does).
std::vector<Enclosing> enclosing_loops(const Program& p, const Schedule& s, const std::string& stage,
                                       const std::string& loop, int depth = 0) {
  const Stage& c = p.stage(stage);
  const StageSchedule* cs = s.find(stage);
  std::vector<Enclosing> r;
  if (cs && cs->compute.kind == Placement::Kind::At && depth < 64)
    r = enclosing_loops(p, s, cs->compute.stage, cs->compute.loop, depth + 1);
  const LoopSchedule none;
  auto concurrent = [](const LoopSchedule& ls, const Loop& l, bool& split) {
    const bool par = std::find(ls.parallel.begin(), ls.parallel.end(), l.name) != ls.parallel.end();
    const bool vec = ls.vectorize == l.name;
    split = vec && !(ls.vector_width == 0 || (l.extent == ls.vector_width && l.name != l.dim));
    return par || (vec && !split);
  };
  if (c.reduce && cs && !cs->accumulator_at.empty()) {
    // The update runs inside the pure loops down to accumulator_at.
    for (const Loop& l : loop_nest(c, cs->loops, false)) {
      bool split = false;
      r.push_back({stage, l.name + " (pure)", concurrent(cs->loops, l, split)});
      if (l.name == cs->accumulator_at) break;
      if (split) r.push_back({stage, l.name + " (pure, vector lanes)", true});
    }
  }
  const LoopSchedule& ls = !cs ? none : c.reduce ? (cs->update ? *cs->update : none) : cs->loops;
  for (const Loop& l : placement_loops(c, cs)) {
    bool split = false;
    r.push_back({stage, l.name, concurrent(ls, l, split)});
    if (l.name == loop) break;
    if (split) r.push_back({stage, l.name + " (vector lanes)", true});
  }
  return r;
}

// Stages that really read `name`, looking through inline stages.
std::set<std::string> effective_consumers(const Program& p, const Schedule& s, const std::string& name, int depth = 0) {
  std::set<std::string> r;
  for (const auto& c : p.consumers(name)) {
    const StageSchedule* cs = s.find(c);
    if (cs && cs->compute.kind == Placement::Kind::Inline && depth < 64) {
      const auto sub = effective_consumers(p, s, c, depth + 1);
      r.insert(sub.begin(), sub.end());
    } else {
      r.insert(c);
    }
  }
  return r;
}

// `at_consumer`: the stage is computed inside a consumer loop, so its loop
// extents are the consumer tile's (Halide's bounds inference), not the shape's.
void check_loops(const Stage& st, const LoopSchedule& ls, bool update, const Target* target,
                 DType compute_type, bool at_consumer) {
  const auto loops = loop_nest(st, ls, update);  // checks tile and order
  const std::string where = "stage '" + st.name + "'" + (update ? " (update)" : "");
  if (!ls.vectorize.empty()) {
    const Loop* l = find_loop(loops, ls.vectorize);
    if (!l)
      throw ScheduleError(where + ": vectorize names unknown loop '" + ls.vectorize + "'; loops: " +
                          join(names(loops)));
    if (l->reduction && update)
      throw ScheduleError(where + ": vectorize on reduction loop '" + ls.vectorize +
                          "' would race on the accumulator; vectorize a pure loop");
    if (ls.vector_width == 0 && l->extent < 0 && !at_consumer)
      throw ScheduleError(where + ": vectorize '" + ls.vectorize +
                          "' without a width needs a constant extent (it is " + l->extent_str + ")");
    const int w = ls.vector_width ? ls.vector_width : static_cast<int>(l->extent);
    if (!at_consumer && l->extent > 0 && w > l->extent && l->name == l->dim)
      throw ScheduleError(where + ": vector width " + std::to_string(w) + " exceeds the extent " +
                          l->extent_str + " of loop '" + ls.vectorize + "'");
    // Lanes must tile a tile's inner loop exactly: a partial vector of a
    // guarded tile is both wasted and a shape Halide miscompiles (guarded
    // lanes stored out of bounds: a crash found by test_differential).
    if ((l->name == l->dim + "_i" || l->name == l->dim + "_m") && l->extent > 0 && ls.vector_width > 0 &&
        l->extent % ls.vector_width != 0)
      throw ScheduleError(where + ": vector width " + std::to_string(ls.vector_width) + " does not divide the extent " +
                          l->extent_str + " of tile loop '" + ls.vectorize + "'; use a divisor of " + l->extent_str +
                          " (or width 0 for the whole tile)");
    if (w > 256)
      throw ScheduleError(where + ": vector width " + std::to_string(w) + " on '" + ls.vectorize +
                          "' is too wide; use at most 256 lanes");
    if (target) {
      const int lanes = target->vector_lanes(compute_type);
      if (w > 1 && w % lanes != 0 && lanes % w != 0)
        throw ScheduleError(where + ": vector width " + std::to_string(w) + " on '" + ls.vectorize +
                            "' does not fit target " + target->name + " (" + std::to_string(lanes) +
                            " lanes of " + std::string(to_string(compute_type)) +
                            "); use a divisor or multiple of " + std::to_string(lanes));
    }
  }
  for (const auto& [n, f] : ls.unroll) {
    const Loop* l = find_loop(loops, n);
    if (!l) throw ScheduleError(where + ": unroll names unknown loop '" + n + "'; loops: " + join(names(loops)));
    if (f == 0 && !at_consumer && (l->extent < 0 || l->extent > 64))
      throw ScheduleError(where + ": full unroll of '" + n + "' needs a constant extent of at most 64 (it is " +
                          l->extent_str + "); give a factor instead");
    if (f < 0) throw ScheduleError(where + ": unroll factor of '" + n + "' must be >= 0");
    // As for vector lanes: a factor must tile a tile's inner loop exactly
    // (a guarded remainder inside a tile made Halide compute producers past
    // the tensor's end and read inputs out of bounds, found by test_differential).
    if ((l->name == l->dim + "_i" || l->name == l->dim + "_m") && l->extent > 0 && f > 0 && l->extent % f != 0)
      throw ScheduleError(where + ": unroll factor " + std::to_string(f) + " does not divide the extent " +
                          l->extent_str + " of tile loop '" + n + "'; use a divisor of " + l->extent_str +
                          " (or 0 to unroll it fully)");
    // An untiled dim of a root stage shifts its last chunk inwards, which
    // needs the factor to fit the extent (else it would start before 0).
    if (!at_consumer && !update && l->extent > 0 && f > l->extent && l->name == l->dim)
      throw ScheduleError(where + ": unroll factor " + std::to_string(f) + " of '" + n + "' exceeds its extent " +
                          l->extent_str + "; use at most " + l->extent_str);
  }
  for (const auto& n : ls.parallel) {
    const Loop* l = find_loop(loops, n);
    if (!l)
      throw ScheduleError(where + ": parallel names unknown loop '" + n + "'; loops: " + join(names(loops)));
    if (l->reduction && update)
      throw ScheduleError(where + ": parallel on reduction loop '" + n +
                          "' would race on the accumulator; parallelize a pure loop");
  }
}

bool valid_precision_type(DType logical, DType t) {
  if (is_float(logical)) return is_float(t);
  if (is_int(logical)) return is_int(t);
  return t == logical;
}

}  // namespace

StagePrecision stage_precision(const Program& p, const Schedule& s, const std::string& name) {
  const Stage& st = p.stage(name);
  const StageSchedule* ss = s.find(name);
  const bool arg = st.reduce && (*st.reduce == ReduceOp::ArgMax || *st.reduce == ReduceOp::ArgMin);
  const DType value_type = arg ? st.value.type() : st.dtype;
  StagePrecision r{st.dtype, value_type, value_type};
  if (!ss || s.options.opt_level == 0) return r;
  if (ss->precision.storage) r.storage = *ss->precision.storage;
  if (ss->precision.compute) r.compute = *ss->precision.compute;
  r.accumulate = ss->precision.accumulate.value_or(st.reduce ? r.storage : r.compute);
  if (arg) r.storage = DType::I64;
  return r;
}

void validate(const Program& p, const Schedule& s, const Target* target) {
  const auto outputs = p.outputs();
  auto is_output = [&](const std::string& n) {
    return std::find(outputs.begin(), outputs.end(), n) != outputs.end();
  };
  std::vector<std::string> stage_names;
  for (const Stage& st : p.stages()) stage_names.push_back(st.name);
  for (const auto& [name, ss] : s.stages) {
    if (!p.find_stage(name)) {
      if (p.has_tensor(name))
        throw ScheduleError("schedule names '" + name + "', an input of program '" + p.name() +
                            "'; only stages can be scheduled: " + join(stage_names));
      throw ScheduleError("schedule names unknown stage '" + name + "'; stages of program '" +
                          p.name() + "': " + join(stage_names));
    }
  }
  // compute_at chains must not form a cycle.
  for (const auto& [name, ss] : s.stages) {
    std::set<std::string> chain{name};
    const StageSchedule* cur = &ss;
    while (cur && cur->compute.kind == Placement::Kind::At) {
      if (!chain.insert(cur->compute.stage).second)
        throw ScheduleError("stage '" + name + "': compute_at chain loops back to '" + cur->compute.stage + "'");
      cur = s.find(cur->compute.stage);
    }
  }
  for (const auto& [name, ss] : s.stages) {
    const Stage& st = p.stage(name);
    const std::string where = "stage '" + name + "'";
    const StagePrecision prec = stage_precision(p, s, name);

    // Precision.
    for (const auto& [what, t] : {std::pair{"storage", ss.precision.storage},
                                  std::pair{"compute", ss.precision.compute},
                                  std::pair{"accumulate", ss.precision.accumulate}}) {
      if (t && !valid_precision_type(st.dtype, *t))
        throw ScheduleError(where + ": precision." + what + " " + std::string(to_string(*t)) +
                            " does not fit its " + std::string(to_string(st.dtype)) + " values; use " +
                            (is_float(st.dtype) ? "f64, f32, bf16 or f16" : "i8, i16, i32 or i64"));
    }
    if (ss.precision.accumulate && !st.reduce)
      throw ScheduleError(where + ": precision.accumulate applies to reductions only");
    if (ss.precision.storage && is_output(name) && *ss.precision.storage != st.dtype)
      throw ScheduleError(where + " is an output, so its storage type is the interface type " +
                          std::string(to_string(st.dtype)) + "; set precision.compute or .accumulate instead");
    // Placement.
    const auto check_placement = [&](const Placement& pl, const char* what) {
      if (pl.kind == Placement::Kind::Inline) {
        if (is_output(name)) throw ScheduleError(where + " is an output and cannot be " + what + " inline");
        if (st.reduce) throw ScheduleError(where + " is a reduction and cannot be " + what + " inline; compute it at root or at a consumer loop");
      }
      if (pl.kind != Placement::Kind::At) return;
      if (is_output(name)) throw ScheduleError(where + " is an output; it is computed at root, not at '" + pl.stage + "'");
      if (!p.find_stage(pl.stage))
        throw ScheduleError(where + ": " + what + " at unknown stage '" + pl.stage + "'; stages: " + join(stage_names));
      if (!p.reaches(name, pl.stage)) {
        const auto cons = p.consumers(name);
        throw ScheduleError(where + ": " + what + " at '" + pl.stage + "', which does not consume it; consumers: " +
                            (cons.empty() ? std::string("none") : join(cons)));
      }
      const Stage& c = p.stage(pl.stage);
      const StageSchedule* cs = s.find(pl.stage);
      if (cs && cs->compute.kind == Placement::Kind::Inline && s.options.opt_level != 0)
        throw ScheduleError(where + ": " + what + " at '" + pl.stage + "', which is inline and so has no loops; " +
                            "compute '" + pl.stage + "' at root or at a loop first");
      // A producer is computed in its consumer's last definition: the update of a reduction.
      const std::vector<Loop> loops = placement_loops(c, cs);
      if (!find_loop(loops, pl.loop)) {
        throw ScheduleError(where + ": " + what + " at loop '" + pl.loop + "' of '" + pl.stage +
                            "', which has no such loop; its loops" + (c.reduce ? " (of its update)" : "") + ": " +
                            join(names(loops)));
      }
      const LoopSchedule none;
      const LoopSchedule& cl = !cs ? none : c.reduce ? (cs->update ? *cs->update : none) : cs->loops;
      if (factor_split(cl, *find_loop(loops, pl.loop)))
        throw ScheduleError(where + ": " + what + " at loop '" + pl.loop + "' of '" + pl.stage +
                            "', which that stage splits by an unroll factor or vector width; place it at a loop " +
                            "outside, or unroll that loop fully");
    };
    check_placement(ss.compute, "computed");
    if (ss.store) check_placement(*ss.store, "stored");
    if (ss.compute.kind == Placement::Kind::At && s.options.opt_level != 0) {
      // Every stage that reads it (through inline stages) must run inside that loop.
      for (const std::string& e : effective_consumers(p, s, name)) {
        if (e == ss.compute.stage) continue;
        const StageSchedule* es = s.find(e);
        bool inside = false;
        if (es && es->compute.kind == Placement::Kind::At)
          for (const Enclosing& l : enclosing_loops(p, s, es->compute.stage, es->compute.loop))
            inside |= l.stage == ss.compute.stage && l.loop == ss.compute.loop;
        if (!inside)
          throw ScheduleError(where + ": computed at '" + ss.compute.stage + "." + ss.compute.loop + "', but '" + e +
                              "' also reads it outside that loop; compute it at root, or at a loop enclosing all its readers");
      }
    }
    if (ss.store && ss.compute.kind != Placement::Kind::At && ss.store->kind != Placement::Kind::Root)
      throw ScheduleError(where + ": stored at " + to_string(*ss.store) + " but computed " + to_string(ss.compute) +
                          "; storage can only be hoisted out of a compute_at: use \"root\"");
    if (ss.store && ss.compute.kind == Placement::Kind::At && s.options.opt_level != 0 && *ss.store != ss.compute) {
      // Storage must enclose the computation, and no concurrent loop may lie
      // between them (each thread or lane would write the same buffer).
      const auto loops = enclosing_loops(p, s, ss.compute.stage, ss.compute.loop);
      size_t from = 0;
      if (ss.store->kind == Placement::Kind::Inline)
        throw ScheduleError(where + ": store \"inline\" is not a storage level; use \"root\" or a loop");
      if (ss.store->kind == Placement::Kind::At) {
        const auto it = std::find_if(loops.begin(), loops.end(), [&](const Enclosing& e) {
          return e.stage == ss.store->stage && e.loop == ss.store->loop;
        });
        if (it == loops.end()) {
          std::string valid = "\"root\"";
          for (const auto& e : loops)
            if (e.loop.find(' ') == std::string::npos) valid += ", " + e.stage + "." + e.loop;
          throw ScheduleError(where + ": stored at '" + ss.store->stage + "." + ss.store->loop +
                              "', which does not enclose where it is computed; valid: " + valid);
        }
        from = static_cast<size_t>(it - loops.begin()) + 1;
        // Halide's hoist_storage finds the loop by name in the first stage
        // that has it, so a reduction's update loop that its pure part also
        // has is out of reach ("Couldn't find a matching Realize node", found
        // by test_differential).
        const Stage& sc = p.stage(ss.store->stage);
        const StageSchedule* scs = s.find(ss.store->stage);
        if (sc.reduce && find_loop(loop_nest(sc, scs ? scs->loops : LoopSchedule{}, false), ss.store->loop))
          throw ScheduleError(where + ": stored at loop '" + ss.store->loop + "' of reduction '" + ss.store->stage +
                              "', whose pure definition has a loop of the same name; store at \"root\" or at a loop " +
                              "only its update has");
      }
      for (size_t k = from; k < loops.size(); ++k)
        if (loops[k].concurrent)
          throw ScheduleError(where + ": stored outside but computed inside the parallel or vectorized loop '" +
                              loops[k].stage + "." + loops[k].loop + "', a race; store it inside that loop");
    }

    // Loops.
    const bool at = ss.compute.kind == Placement::Kind::At;
    check_loops(st, ss.loops, false, target, prec.compute, at);
    if (!ss.accumulator_at.empty()) {
      if (!st.reduce) throw ScheduleError(where + " has no reduction, so it has no accumulator to place");
      if (ss.compute.kind == Placement::Kind::Inline) throw ScheduleError(where + " is inline, so it has no accumulator to place");
      const auto pure = loop_nest(st, ss.loops, false);
      if (!find_loop(pure, ss.accumulator_at))
        throw ScheduleError(where + ": accumulator_at names unknown loop '" + ss.accumulator_at +
                            "'; loops of its pure definition: " + join(names(pure)));
      // A factor split of that loop leaves Halide an accumulator region it
      // sizes wrongly (a negative allocation, found by test_differential).
      const auto u = ss.loops.unroll.find(ss.accumulator_at);
      if (ss.loops.vectorize == ss.accumulator_at || (u != ss.loops.unroll.end() && u->second != 0))
        throw ScheduleError(where + ": accumulator_at loop '" + ss.accumulator_at +
                            "' is vectorized or unrolled by a factor; accumulate at a loop outside those");
    }
    if (!ss.cache.empty()) {
      if (ss.compute.kind == Placement::Kind::Inline) throw ScheduleError(where + " is inline, so it has no loops to cache at");
      const auto loops = cache_loops(st, ss);
      const auto reads = st.reads();
      std::set<std::string> seen;
      for (const CacheRead& c : ss.cache) {
        if (std::find(reads.begin(), reads.end(), c.tensor) == reads.end())
          throw ScheduleError(where + ": cache of '" + c.tensor + "', which it does not read; it reads: " + join(reads));
        if (!seen.insert(c.tensor).second) throw ScheduleError(where + ": cache of '" + c.tensor + "' appears twice");
        if (c.transpose && p.tensor(c.tensor).shape.size() < 2)
          throw ScheduleError(where + ": transposed cache of '" + c.tensor + "', which has rank " +
                              std::to_string(p.tensor(c.tensor).shape.size()) + "; transposing needs rank >= 2");
        // The copy is computed where the stage was read: the stage itself must be
        // complete before (root) or evaluated into the copy (inline).
        const StageSchedule* cs = s.find(c.tensor);
        if (p.find_stage(c.tensor) && cs && cs->compute.kind == Placement::Kind::At && s.options.opt_level != 0)
          throw ScheduleError(where + ": cache of stage '" + c.tensor + "', which is computed at " + to_string(cs->compute) +
                              "; a cached stage must be computed at root or inline");
        if (std::find(loops.begin(), loops.end(), c.loop) == loops.end())
          throw ScheduleError(where + ": cache of '" + c.tensor + "' at loop '" + c.loop +
                              "', which does not enclose its reads; loops: " + join(loops));
        // The copy is what the stage reads; prefetching the original as well
        // made Halide read past the tensor (found by test_differential).
        for (const Prefetch& f : ss.pipeline.prefetch)
          if (f.tensor == c.tensor)
            throw ScheduleError(where + ": prefetch of '" + c.tensor + "', which it also caches; drop one of them");
      }
    }
    if (ss.rfactor) check_rfactor(st, ss, target, prec.accumulate);
    if (!ss.skip_padding.empty()) {
      const auto pr = padded_read(p, st);
      if (!pr)
        throw ScheduleError(where + ": skip_padding needs a sum whose body is a product with a factor read from a "
                            "zero-padded stage (defined as select(inside, value, 0), like conv2d_nhwc's _pad); '" +
                            st.name + "' has none");
      for (const std::string& d : ss.skip_padding)
        if (std::find(pr->dims.begin(), pr->dims.end(), d) == pr->dims.end())
          throw ScheduleError(where + ": skip_padding dim '" + d + "' is not a padded dim of '" + pr->stage->name +
                              "'; padded dims: " + join(pr->dims));
      if (ss.rfactor) throw ScheduleError(where + ": skip_padding and rfactor cannot be combined; drop one of them");
    }
    if (!ss.dot_pairs.empty()) {
      const std::string& k = ss.dot_pairs;
      if (!st.reduce || *st.reduce != ReduceOp::Sum) throw ScheduleError(where + ": dot_pairs needs a sum reduction");
      const RVar* rv = nullptr;
      std::vector<std::string> rvars;
      for (const RVar& r : st.rvars) {
        rvars.push_back(r.name);
        if (r.name == k) rv = &r;
      }
      if (!rv)
        throw ScheduleError(where + ": dot_pairs names '" + k + "', not a reduction variable; reduction variables: " + join(rvars));
      if (rv->extent.is_symbolic() || rv->extent.value % 2)
        throw ScheduleError(where + ": dot_pairs needs an even static extent of '" + k + "', got " + rv->extent.str());
      if (ss.rfactor) throw ScheduleError(where + ": dot_pairs and rfactor cannot be combined; drop one of them");
      if (!ss.update || ss.update->vectorize.empty())
        throw ScheduleError(where + ": dot_pairs needs the update's vector lanes: vectorize one of its pure loops");
      // Halide loads the accumulator of a pair reduction with aligned vector
      // loads: into a caller's buffer (16-byte aligned from malloc) that
      // faulted at some addresses; its own allocations are aligned.
      if (is_output(name) && ss.accumulator_at.empty())
        throw ScheduleError(where + ": dot_pairs on an output needs an accumulator tile (accumulator_at): the pair "
                            "reduction loads its accumulator with aligned vector loads, which only Halide's own "
                            "buffers guarantee");
      if (ss.update->unroll.count(k) || std::count(ss.update->parallel.begin(), ss.update->parallel.end(), k))
        throw ScheduleError(where + ": dot_pairs runs '" + k + "' in pairs; do not unroll or parallelize it in the update "
                            "(tiles of it count pairs)");
    }
    if (ss.update) {
      if (!st.reduce) throw ScheduleError(where + " has no reduction, so it has no \"update\" to schedule");
      // With an accumulator tile, the update's pure loops span that tile only.
      // Under dot_pairs the loop k counts pairs: its tiles are checked against half the extent.
      check_loops(paired_update(st, ss.dot_pairs), *ss.update, true, target, prec.accumulate,
                  at || !ss.accumulator_at.empty());
    }
    if (ss.compute.kind == Placement::Kind::Inline && !ss.loops.empty())
      throw ScheduleError(where + " is inline, so it has no loops to tile, order, vectorize or parallelize");

    // Pipelining.
    if ((ss.pipeline.ring_buffer || ss.pipeline.async) && ss.compute.kind != Placement::Kind::At)
      throw ScheduleError(where + ": ring_buffer and async need the stage computed at a consumer loop");
    // Halide folds a ring buffer's storage across the iterations of the loops
    // between its storage and its computation, so the storage must be hoisted
    // out ("has matching store_at and hoist_storage levels" otherwise).
    // A reduction's update accumulates into the storage that the ring buffer
    // folds: Halide 21 computed wrong rows (softmax's row sum, layer_norm's
    // mean and variance with ring_buffer 2, found by bench_tune's search).
    if (ss.pipeline.ring_buffer && st.reduce)
      throw ScheduleError(where + ": ring_buffer on a reduction (its update accumulates into the folded storage, which "
                          "Halide 21 miscomputes); use async alone, or a ring buffer on a pure producer stage");
    if (ss.pipeline.ring_buffer && s.options.opt_level != 0 && (!ss.store || *ss.store == ss.compute))
      throw ScheduleError(where + ": ring_buffer " + std::to_string(ss.pipeline.ring_buffer) +
                          " needs its storage hoisted out of the loop it is computed at; set \"store\" to \"root\" "
                          "or to a loop enclosing " + ss.compute.stage + "." + ss.compute.loop);
    for (const Prefetch& f : ss.pipeline.prefetch) {
      const auto reads = st.reads();
      if (std::find(reads.begin(), reads.end(), f.tensor) == reads.end())
        throw ScheduleError(where + ": prefetch of '" + f.tensor + "', which it does not read; it reads: " + join(reads));
      const auto loops = loop_nest(st, st.reduce && ss.update ? *ss.update : ss.loops, st.reduce.has_value());
      if (!find_loop(loops, f.loop))
        throw ScheduleError(where + ": prefetch at unknown loop '" + f.loop + "'; loops: " + join(names(loops)));
    }

    // Device.
    if (ss.device != "cpu" && ss.device != "cuda" && ss.device != "opencl")
      throw ScheduleError(where + ": unknown device '" + ss.device + "'; valid: cpu, cuda, opencl");
    if (ss.device != "cpu" && target && target->device != ss.device)
      throw ScheduleError(where + ": device '" + ss.device + "' is not part of target '" + target->name +
                          "'; use target host-" + ss.device);
    if ((!ss.gpu.blocks.empty() || !ss.gpu.threads.empty()) && ss.device == "cpu")
      throw ScheduleError(where + ": gpu blocks/threads need device cuda or opencl");
    if (ss.device != "cpu") {
      const auto loops = loop_nest(st, ss.loops, false);
      for (const auto& n : ss.gpu.blocks)
        if (!find_loop(loops, n)) throw ScheduleError(where + ": gpu block loop '" + n + "' unknown; loops: " + join(names(loops)));
      for (const auto& n : ss.gpu.threads)
        if (!find_loop(loops, n)) throw ScheduleError(where + ": gpu thread loop '" + n + "' unknown; loops: " + join(names(loops)));
      if (ss.gpu.blocks.empty() && ss.gpu.threads.empty())
        throw ScheduleError(where + ": device '" + ss.device + "' needs gpu.blocks and gpu.threads loops");
      if (ss.gpu.blocks.size() > 3 || ss.gpu.threads.size() > 3)
        throw ScheduleError(where + ": at most 3 gpu block and 3 gpu thread loops");
    }
  }

  if (s.options.opt_level < 0 || s.options.opt_level > 3)
    throw ScheduleError("options.opt_level " + std::to_string(s.options.opt_level) + " is outside 0-3");
  if (s.options.threads < 0) throw ScheduleError("options.threads must be >= 0");
}

}  // namespace pto
