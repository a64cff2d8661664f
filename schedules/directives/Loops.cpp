#include "schedules/directives/Loops.h"

#include <algorithm>

#include "dsl/Error.h"
#include "schedules/directives/Json.h"
#include "schedules/directives/StoreIn.h"

namespace pto::directives {

namespace {

// The vector lanes of a root stage's pure loop that is the inner loop of a
// one-level tile dividing its static dim (a padded matmul tile's 17 columns
// in one tile): no tile is guarded, so the last vector shifts inwards over
// points of its own tile already computed (vectors at 0 and 1), as an
// untiled dim's does. Guarded tiles keep whole vectors (below).
bool lanes_shift_in_tile(const Stage& st, const LoopSchedule& ls, const Loop& l, int w) {
  if (l.name != inner_loop(l.dim) || w <= 0 || l.extent < w) return false;
  const auto t = ls.tile.find(l.dim);
  const auto k = std::find(st.vars.begin(), st.vars.end(), l.dim) - st.vars.begin();
  if (t == ls.tile.end() || t->second.size() != 1 || static_cast<size_t>(k) == st.vars.size())
    return false;
  const Dim& d = st.shape[static_cast<size_t>(k)];
  return !d.is_symbolic() && d.value % t->second[0] == 0;
}

}  // namespace

const std::vector<std::string>& loop_fields() {
  static const std::vector<std::string> f = {"tile", "order", "vectorize", "unroll", "parallel"};
  return f;
}

void print_loops(const LoopSchedule& l, nlohmann::json& j) {
  if (!l.tile.empty()) j["tile"] = l.tile;
  if (!l.order.empty()) j["order"] = l.order;
  if (!l.vectorize.empty()) j["vectorize"] = {{"loop", l.vectorize}, {"width", l.vector_width}};
  if (!l.unroll.empty()) j["unroll"] = l.unroll;
  if (!l.parallel.empty()) j["parallel"] = l.parallel;
}

void parse_loops(const nlohmann::json& j, const std::string& path, LoopSchedule& l) {
  if (j.contains("tile")) {
    const nlohmann::json& t = j["tile"];
    if (!t.is_object())
      json::fail(path + ".tile", "must map dim names to [size] or [outer, inner]");
    for (const auto& [dim, sizes] : t.items()) {
      const std::string p = path + ".tile." + dim;
      if (sizes.is_number_integer()) {
        l.tile[dim] = {json::get_int(sizes, p, 1, int64_t{1} << 40)};
        continue;
      }
      if (!sizes.is_array() || sizes.empty() || sizes.size() > 2)
        json::fail(p, "must be a size or a list of 1 or 2 sizes, got " + json::show(sizes));
      std::vector<int64_t> v;
      for (size_t i = 0; i < sizes.size(); ++i)
        v.push_back(
            json::get_int(sizes[i], p + "[" + std::to_string(i) + "]", 1, int64_t{1} << 40));
      l.tile[dim] = v;
    }
  }
  if (j.contains("order")) l.order = json::get_names(j["order"], path + ".order");
  if (j.contains("vectorize")) {
    const nlohmann::json& v = j["vectorize"];
    if (v.is_string()) {
      l.vectorize = v.get<std::string>();
    } else {
      json::check_keys(v, path + ".vectorize", {"loop", "width"});
      if (!v.contains("loop")) json::fail(path + ".vectorize", "needs \"loop\"");
      l.vectorize = json::get_string(v["loop"], path + ".vectorize.loop");
      if (v.contains("width"))
        l.vector_width =
            static_cast<int>(json::get_int(v["width"], path + ".vectorize.width", 0, 1024));
    }
    // An empty name would mean "no vectorize" and silently drop the width
    // (found by the fuzzer: the schedule changed in a JSON round trip).
    if (l.vectorize.empty()) json::fail(path + ".vectorize", "must name a loop, got an empty name");
  }
  if (j.contains("unroll")) {
    const nlohmann::json& u = j["unroll"];
    if (u.is_array()) {
      for (const auto& n : json::get_names(u, path + ".unroll")) l.unroll[n] = 0;
    } else if (u.is_object()) {
      for (const auto& [n, f] : u.items())
        l.unroll[n] = static_cast<int>(json::get_int(f, path + ".unroll." + n, 0, 1024));
    } else {
      json::fail(path + ".unroll", "must be a list of loops or {loop: factor}");
    }
  }
  if (j.contains("parallel")) l.parallel = json::get_names(j["parallel"], path + ".parallel");
}

void check_loops(const Stage& st, const LoopSchedule& ls, bool update, const Target* target,
                 DType compute_type, bool at_consumer) {
  const auto loops = loop_nest(st, ls, update);  // checks tile and order
  const std::string where = "stage '" + st.name + "'" + (update ? " (update)" : "");
  if (!ls.vectorize.empty()) {
    const Loop* l = find_loop(loops, ls.vectorize);
    if (!l)
      throw ScheduleError(where + ": vectorize names unknown loop '" + ls.vectorize +
                          "'; loops: " + join(loop_names(loops)));
    if (l->reduction && update)
      throw ScheduleError(where + ": vectorize on reduction loop '" + ls.vectorize +
                          "' would race on the accumulator; vectorize a pure loop");
    if (ls.vector_width == 0 && l->extent < 0 && !at_consumer)
      throw ScheduleError(where + ": vectorize '" + ls.vectorize +
                          "' without a width needs a constant extent (it is " + l->extent_str +
                          ")");
    const int w = ls.vector_width ? ls.vector_width : static_cast<int>(l->extent);
    if (!at_consumer && l->extent > 0 && w > l->extent && l->name == l->dim)
      throw ScheduleError(where + ": vector width " + std::to_string(w) + " exceeds the extent " +
                          l->extent_str + " of loop '" + ls.vectorize + "'");
    // Lanes must tile a tile's inner loop exactly: a partial vector of a
    // guarded tile is both wasted and a shape Halide miscompiles (guarded
    // lanes stored out of bounds: a crash found by test_differential).
    if (is_tile_point(*l) && l->extent > 0 && ls.vector_width > 0 &&
        l->extent % ls.vector_width != 0 &&
        (at_consumer || update || !lanes_shift_in_tile(st, ls, *l, ls.vector_width)))
      throw ScheduleError(where + ": vector width " + std::to_string(ls.vector_width) +
                          " does not divide the extent " + l->extent_str + " of tile loop '" +
                          ls.vectorize + "'; use a divisor of " + l->extent_str +
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
    if (!l)
      throw ScheduleError(where + ": unroll names unknown loop '" + n +
                          "'; loops: " + join(loop_names(loops)));
    if (f == 0 && !at_consumer && (l->extent < 0 || l->extent > 64))
      throw ScheduleError(where + ": full unroll of '" + n +
                          "' needs a constant extent of at most 64 (it is " + l->extent_str +
                          "); give a factor instead");
    if (f < 0) throw ScheduleError(where + ": unroll factor of '" + n + "' must be >= 0");
    // As for vector lanes: a factor must tile a tile's inner loop exactly
    // (a guarded remainder inside a tile made Halide compute producers past
    // the tensor's end and read inputs out of bounds, found by test_differential).
    if (is_tile_point(*l) && l->extent > 0 && f > 0 && l->extent % f != 0)
      throw ScheduleError(where + ": unroll factor " + std::to_string(f) +
                          " does not divide the extent " + l->extent_str + " of tile loop '" + n +
                          "'; use a divisor of " + l->extent_str + " (or 0 to unroll it fully)");
    // An untiled dim of a root stage shifts its last chunk inwards, which
    // needs the factor to fit the extent (else it would start before 0).
    if (!at_consumer && !update && l->extent > 0 && f > l->extent && l->name == l->dim)
      throw ScheduleError(where + ": unroll factor " + std::to_string(f) + " of '" + n +
                          "' exceeds its extent " + l->extent_str + "; use at most " +
                          l->extent_str);
  }
  for (const auto& n : ls.parallel) {
    const Loop* l = find_loop(loops, n);
    if (!l)
      throw ScheduleError(where + ": parallel names unknown loop '" + n +
                          "'; loops: " + join(loop_names(loops)));
    if (l->reduction && update)
      throw ScheduleError(where + ": parallel on reduction loop '" + n +
                          "' would race on the accumulator; parallelize a pure loop");
  }
}

// The iterations of a parallel loop over whole symbolic dim `k` that one task
// runs, computed at run time from the extents: one block per core as the
// static rule's parallel_chunk, or 2 or 4 per core where each still holds
// kFineTaskElements points (the dims inside `k`, and for an update its
// reduction). With one block per core, a core slowed by its partner's share of
// memory bandwidth (or by another process) leaves the other idle at the end;
// with tasks of a few rows, the pool's per-task cost (Halide takes each under
// a lock) dominates: a dynamic [3000, 1000] row sum in 750 tasks of 4 rows ran
// 0.157 ms, in 8 blocks 0.075 (static kernel 0.068), a [128, 12, 64]
// transpose in 6 tasks 1.6x its 2. Whole multiples of the cores, since 3
// tasks on 2 cores leave one idle a third of the time (12 heads' 128 x 128
// scores: 1.5x the static kernel).
namespace {
Halide::Expr run_time_block(const Stage& st, size_t k, bool update, ApplyContext& c) {
  const auto wide = [&](const Dim& d) { return Halide::cast<int64_t>(c.extent(d)); };
  Halide::Expr inner = Halide::cast<int64_t>(1);
  for (size_t j = k + 1; j < st.vars.size(); ++j) inner = inner * wide(st.shape[j]);
  if (update)
    for (const RVar& r : st.rvars) inner = inner * wide(r.extent);
  const Halide::Expr e = wide(st.shape[k]);
  const int cores = c.target().cores;
  const auto blocks_of = [&](int tasks) {
    const Halide::Expr n = Halide::cast<int64_t>(tasks);
    return (e + n - 1) / n;
  };
  const auto fine = [&](const Halide::Expr& block) {
    return block * inner >= Halide::Internal::make_const(Halide::Int(64), kFineTaskElements);
  };
  const Halide::Expr b4 = blocks_of(4 * cores), b2 = blocks_of(2 * cores), b1 = blocks_of(cores);
  const Halide::Expr block = Halide::select(fine(b4), b4, fine(b2), b2, b1);
  return Halide::cast<int>(Halide::max(block, 1));
}
}  // namespace

// Tails: a root stage's pure loops over static dims shift the last tile
// inwards (recomputing a few points, keeping every tile full-size and so
// every inner extent constant); everything else is guarded, because a stage
// computed at a consumer sees regions of any size, symbolic dims may be
// smaller than a tile, and updates must not run twice on one point.
void apply_loops(const Stage& st, Halide::Stage hs, const LoopSchedule& ls, bool update, bool root,
                 bool fits, ApplyContext* blocks, const std::string& round_up) {
  const auto nest = loop_nest(st, ls, update);
  auto vr = [&](const std::string& n) {
    return Halide::VarOrRVar(n, update && is_reduction_loop(st, n));
  };
  auto tail = [&](const std::string& dim) {
    if (update && !round_up.empty() && dim == round_up) return Halide::TailStrategy::RoundUp;
    for (size_t k = 0; k < st.vars.size(); ++k)
      if (st.vars[k] == dim && root && !update && (fits || !st.shape[k].is_symbolic()))
        return Halide::TailStrategy::ShiftInwards;
    return Halide::TailStrategy::GuardWithIf;
  };
  auto extent_of = [&](const std::string& n) {
    const Loop* l = find_loop(nest, n);
    return l ? *l : Loop{};
  };
  // Vector lanes that evenly divide a guarded tile's innermost loop are split
  // off the dim first, so that the lanes are the innermost split of the dim
  // itself. Halide's vectorize(x_i, w) splits the inner loop of a guarded
  // split again, and that shape let guarded lanes store out of bounds (a
  // crash found by test_differential). Same loops, names and extents.
  const Loop vl = ls.vectorize.empty() ? Loop{} : extent_of(ls.vectorize);
  const int w = ls.vector_width;
  const bool lanes_first = !vl.name.empty() && vl.name != vl.dim && w > 0 && vl.extent > w &&
                           vl.extent % w == 0 && ls.tile.count(vl.dim) &&
                           vl.name == split_names(vl.dim, ls.tile.at(vl.dim).size()).back() &&
                           tail(vl.dim) == Halide::TailStrategy::GuardWithIf;
  const std::string lane = lane_loop(vl.dim);
  for (const auto& [dim, sizes] : ls.tile) {
    const auto names = split_names(dim, sizes.size());
    std::string d = dim;
    int64_t inner = sizes.back();
    if (lanes_first && dim == vl.dim) {
      hs.split(vr(dim), vr(lanes_rest(dim)), vr(lane), w, tail(dim));
      d = lanes_rest(dim);
      inner /= w;
    }
    if (sizes.size() == 1) {
      hs.split(vr(d), vr(names[0]), vr(names[1]), static_cast<int>(inner), tail(dim));
      continue;
    }
    // Two levels: split off the innermost tile first, then split its outer
    // loop into tiles of T1/T2 (same loops and tails). Splitting the outer
    // tile first and guarding both splits let Halide store guarded vector
    // lanes out of bounds when the inner loop was vectorized (a crash,
    // found by test_differential; regression test in test_lowering_regressions.cpp).
    // A parallel outer loop guards its last block instead of shifting it
    // into the one before, which another core computes at the same time:
    // both would write the rows they share (the inner tiles still shift,
    // within the block).
    const bool parallel_blocks =
        std::find(ls.parallel.begin(), ls.parallel.end(), names[0]) != ls.parallel.end() &&
        dim != vl.dim;
    hs.split(vr(d), vr(split_rest(dim)), vr(names[2]), static_cast<int>(inner), tail(dim));
    hs.split(vr(split_rest(dim)), vr(names[0]), vr(names[1]), static_cast<int>(sizes[0] / sizes[1]),
             parallel_blocks ? Halide::TailStrategy::GuardWithIf : tail(dim));
  }
  if (!ls.order.empty()) {
    std::vector<Halide::VarOrRVar> order;  // innermost first; the lanes stay just inside their loop
    for (auto it = nest.rbegin(); it != nest.rend(); ++it) {
      if (lanes_first && it->name == vl.name) order.push_back(vr(lane));
      order.push_back(vr(it->name));
    }
    hs.reorder(order);
  }
  // A width equal to a tile's inner extent needs no further split; width 0
  // (or factor 0) means the whole loop, which must have a constant extent.
  if (lanes_first) {
    hs.vectorize(vr(lane));
  } else if (!ls.vectorize.empty()) {
    const Loop l = extent_of(ls.vectorize);
    if (w == 0 || (l.extent == w && l.name != l.dim))
      hs.vectorize(vr(ls.vectorize));
    else
      hs.vectorize(vr(ls.vectorize), w,
                   l.name == l.dim || lanes_shift_in_tile(st, ls, l, w)
                       ? tail(l.dim)
                       : Halide::TailStrategy::GuardWithIf);
  }
  for (const auto& [n, factor] : ls.unroll) {
    const Loop l = extent_of(n);
    if (factor == 0 || (l.extent == factor && l.name != l.dim))
      hs.unroll(vr(n));
    else
      hs.unroll(vr(n), factor, l.name == l.dim ? tail(l.dim) : Halide::TailStrategy::GuardWithIf);
  }
  for (const auto& n : ls.parallel) {
    const auto k = std::find(st.vars.begin(), st.vars.end(), n) - st.vars.begin();
    const bool whole_symbolic_dim =
        static_cast<size_t>(k) < st.vars.size() && st.shape[k].is_symbolic();
    const int cores = blocks ? blocks->target().cores : 1;
    const bool root_stage = blocks && blocks->schedule().compute.kind == Placement::Kind::Root;
    if (cores > 1 && root_stage && whole_symbolic_dim) {
      // The blocks loop outside, the loop itself inside under its own name, so
      // that stages computed at it stay per iteration (a softmax's row max).
      const Halide::Var outer(n + "_cores");
      hs.split(Halide::Var(n), outer, Halide::Var(n), run_time_block(st, k, update, *blocks),
               Halide::TailStrategy::GuardWithIf);
      hs.parallel(outer);
    } else {
      hs.parallel(vr(n));
    }
  }
}

std::string loop_marks(const LoopSchedule& ls, const Loop& l) {
  std::string marks;
  if (std::find(ls.parallel.begin(), ls.parallel.end(), l.name) != ls.parallel.end())
    marks += "parallel ";
  if (auto u = ls.unroll.find(l.name); u != ls.unroll.end())
    marks += u->second ? "unrolled x" + std::to_string(u->second) + " " : "unrolled ";
  if (ls.vectorize == l.name)
    marks +=
        ls.vector_width ? "vectorized x" + std::to_string(ls.vector_width) + " " : "vectorized ";
  return marks;
}

namespace {

// Tiles of {2, 4, 8, 16} per static dim, vectorizing the innermost loop by
// the target's lanes, parallel over the outermost: one directive at a time.
std::vector<LoopSchedule> loop_proposals(const Stage& st, const LoopSchedule& base, bool update,
                                         const Target* t, DType compute) {
  std::vector<LoopSchedule> r;
  std::vector<std::pair<std::string, Dim>> dims;
  for (size_t k = 0; k < st.vars.size(); ++k) dims.emplace_back(st.vars[k], st.shape[k]);
  for (const auto& [d, e] : dims)
    for (const int64_t f : {2, 4, 8, 16})
      if (!e.is_symbolic() && f < e.value) {
        LoopSchedule v = base;
        v.tile[d] = {f};
        r.push_back(v);
      }
  const auto nest = loop_nest(st, base, update);
  const int lanes =
      t ? std::max(1, t->vector_lanes(compute == DType::Bool ? DType::U8 : compute)) : 4;
  for (auto it = nest.rbegin(); it != nest.rend(); ++it)
    if (!it->reduction) {
      LoopSchedule v = base;
      v.vectorize = it->name;
      v.vector_width = lanes;
      r.push_back(v);
      break;
    }
  for (const Loop& l : nest)
    if (!l.reduction) {
      LoopSchedule v = base;
      v.parallel = {l.name};
      r.push_back(v);
      break;
    }
  return r;
}

struct LoopsDirective : Directive {
  LoopsDirective() : Directive("loops") {}
  std::vector<std::string_view> fields() const override {
    return {"tile", "order", "vectorize", "unroll", "parallel"};
  }

  void parse(const nlohmann::json& js, StageSchedule& ss, const std::string& path) const override {
    parse_loops(js, path, ss.loops);
  }
  void print(const StageSchedule& ss, nlohmann::json& js) const override {
    print_loops(ss.loops, js);
  }

  void check(const CheckContext& c) const override {
    const StageSchedule& ss = c.ss;
    if (ss.compute.kind == Placement::Kind::Inline && !ss.loops.empty())
      throw ScheduleError(
          c.where() + " is inline, so it has no loops to tile, order, vectorize or parallelize");
    check_loops(c.stage, ss.loops, false, c.target, c.precision.compute,
                ss.compute.kind == Placement::Kind::At);
  }

  void apply(ApplyContext& c) const override {
    const StageSchedule& ss = c.schedule();
    // A stage that another is stored in guards its tails (StoreIn.h).
    const bool holds = holds_stored_stage(c.program(), c.stage().name,
                                          [&](const std::string& n) { return c.schedule_of(n); });
    apply_loops(c.stage(), c.func(), ss.loops, false,
                ss.compute.kind == Placement::Kind::Root && !holds, false, &c);
  }

 protected:
  std::vector<StageSchedule> proposals(const CheckContext& c) const override {
    std::vector<StageSchedule> r;
    if (c.ss.compute.kind == Placement::Kind::Inline) return r;
    for (const LoopSchedule& ls :
         loop_proposals(c.stage, c.ss.loops, false, c.target, c.precision.compute)) {
      StageSchedule v = c.ss;
      v.loops = ls;
      r.push_back(v);
    }
    return r;
  }
};

}  // namespace

std::vector<LoopSchedule> update_loop_proposals(const Stage& st, const LoopSchedule& base,
                                                const Target* t, DType accumulate) {
  return loop_proposals(st, base, true, t, accumulate);
}

const Directive& loops_directive() {
  return instance<LoopsDirective>();
}

}  // namespace pto::directives
