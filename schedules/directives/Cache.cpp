#include "schedules/directives/Cache.h"

#include <algorithm>
#include <set>

#include "dsl/Error.h"
#include "schedules/LoopNest.h"
#include "schedules/directives/Json.h"

namespace pto::directives {

std::vector<std::string> cache_pure_loops(const Stage& st, const StageSchedule& ss) {
  std::vector<std::string> r;
  if (st.reduce && ss.accumulator_at.empty()) return r;
  for (const Loop& l : loop_nest(st, ss.loops, false)) {
    r.push_back(l.name);
    if (l.name == ss.accumulator_at) break;
  }
  return r;
}

std::vector<std::string> cache_loops(const Stage& st, const StageSchedule& ss) {
  std::vector<std::string> r = cache_pure_loops(st, ss);
  if (st.reduce) {
    // Lanes of partials (rfactor, per point) run the update in the pure
    // loops' tiles (RFactor.cpp): a copy can be made per such tile.
    LoopSchedule up;
    if (ss.update)
      up = *ss.update;
    else if (ss.rfactor && !ss.rfactor->parallel && ss.accumulator_at.empty())
      up.tile = ss.loops.tile;
    for (const Loop& l : loop_nest(st, up, true)) r.push_back(l.name);
  }
  return r;
}

namespace {

struct CacheDirective : Directive {
  CacheDirective() : Directive("cache") {}

  void parse_value(const nlohmann::json& v, StageSchedule& ss,
                   const std::string& path) const override {
    if (!v.is_array()) json::fail(path, "must be a list of {\"tensor\", \"loop\"}");
    for (size_t i = 0; i < v.size(); ++i) {
      const nlohmann::json& c = v[i];
      const std::string ip = path + "[" + std::to_string(i) + "]";
      json::check_keys(c, ip, {"tensor", "loop", "transpose"});
      if (!c.contains("tensor") || !c.contains("loop"))
        json::fail(ip, "needs \"tensor\" and \"loop\"");
      ss.cache.push_back(
          {json::get_string(c["tensor"], ip + ".tensor"), json::get_string(c["loop"], ip + ".loop"),
           c.contains("transpose") && json::get_bool(c["transpose"], ip + ".transpose")});
    }
  }

  void print(const StageSchedule& ss, nlohmann::json& js) const override {
    for (const auto& c : ss.cache) {
      nlohmann::json jc = {{"tensor", c.tensor}, {"loop", c.loop}};
      if (c.transpose) jc["transpose"] = true;
      js["cache"].push_back(jc);
    }
  }

  void check(const CheckContext& c) const override {
    const StageSchedule& ss = c.ss;
    if (ss.cache.empty()) return;
    const Program& p = c.program;
    const std::string where = c.where();
    if (ss.compute.kind == Placement::Kind::Inline)
      throw ScheduleError(where + " is inline, so it has no loops to cache at");
    const auto loops = cache_loops(c.stage, ss);
    const auto reads = c.stage.reads();
    std::set<std::string> seen;
    for (const CacheRead& cr : ss.cache) {
      if (std::find(reads.begin(), reads.end(), cr.tensor) == reads.end())
        throw ScheduleError(where + ": cache of '" + cr.tensor +
                            "', which it does not read; it reads: " + join(reads));
      if (!seen.insert(cr.tensor).second)
        throw ScheduleError(where + ": cache of '" + cr.tensor + "' appears twice");
      if (cr.transpose && p.tensor(cr.tensor).shape.size() < 2)
        throw ScheduleError(where + ": transposed cache of '" + cr.tensor + "', which has rank " +
                            std::to_string(p.tensor(cr.tensor).shape.size()) +
                            "; transposing needs rank >= 2");
      // The copy is computed where the stage was read: the stage itself must be
      // complete before (root) or evaluated into the copy (inline).
      const StageSchedule* cs = c.schedule.find(cr.tensor);
      if (p.find_stage(cr.tensor) && cs && cs->compute.kind == Placement::Kind::At &&
          c.optimizing())
        throw ScheduleError(where + ": cache of stage '" + cr.tensor + "', which is computed at " +
                            to_string(cs->compute) +
                            "; a cached stage must be computed at root or inline");
      if (std::find(loops.begin(), loops.end(), cr.loop) == loops.end())
        throw ScheduleError(where + ": cache of '" + cr.tensor + "' at loop '" + cr.loop +
                            "', which does not enclose its reads; loops: " + join(loops));
      // The copy is what the stage reads; prefetching the original as well
      // made Halide read past the tensor (found by test_differential).
      for (const Prefetch& f : ss.pipeline.prefetch)
        if (f.tensor == cr.tensor)
          throw ScheduleError(where + ": prefetch of '" + cr.tensor +
                              "', which it also caches; drop one of them");
    }
  }

  // Packed copies: Halide's in() wrapper of the tensor, used only by the
  // Func that reads it (the accumulator's when there is one). Where rfactor
  // moves the update into an intermediate, rfactor makes them (apply_caches).
  void apply(ApplyContext& c) const override {
    const Stage& st = c.stage();
    const StageSchedule& ss = c.schedule();
    if (ss.cache.empty() || (st.reduce && ss.rfactor && !c.helper())) return;
    const auto h = c.helper();
    apply_caches(c, st.reduce && h ? *h : c.func());
  }

  std::vector<std::string> explain_loop(const Stage& st, const StageSchedule& ss,
                                        const std::string& loop, bool update) const override {
    std::vector<std::string> r;
    for (const CacheRead& cr : ss.cache)
      if (cr.loop == loop && (update || !st.reduce || !ss.accumulator_at.empty()))
        r.push_back("cache " + cr.tensor + ": dense copy of the region read, per iteration of " +
                    cr.loop);
    return r;
  }

 protected:
  // Each input it reads, at each loop enclosing its reads.
  std::vector<StageSchedule> proposals(const CheckContext& c) const override {
    std::vector<StageSchedule> r;
    if (!c.ss.cache.empty() || c.ss.compute.kind == Placement::Kind::Inline) return r;
    for (const std::string& t : c.stage.reads())
      for (const std::string& l : cache_loops(c.stage, c.ss)) {
        StageSchedule v = c.ss;
        v.cache.push_back({t, l, false});
        r.push_back(v);
      }
    return r;
  }
};

}  // namespace

void apply_caches(ApplyContext& c, Halide::Func reader) {
  const Stage& st = c.stage();
  const StageSchedule& ss = c.schedule();
  Halide::Func f = c.func();
  const auto pure = cache_pure_loops(st, ss);
  for (const CacheRead& cr : ss.cache) {
    std::optional<Halide::ImageParam> in = c.input(cr.tensor);
    Halide::Func w = in ? in->in(reader) : c.stage_func(cr.tensor).in(reader);
    // Validation put the loop among the pure loops down to the accumulator
    // tile or the update's loops (an rfactor's: the pure tiles, of f's update).
    const bool in_update = st.reduce && std::find(pure.begin(), pure.end(), cr.loop) == pure.end();
    if (in_update) {
      const Halide::Func at = ss.rfactor && !c.helper() ? f : reader;
      w.compute_at(
          Halide::LoopLevel(at, Halide::VarOrRVar(cr.loop, is_reduction_loop(st, cr.loop))));
    } else {
      w.compute_at(f, Halide::Var(cr.loop));
    }
    const DType dt = c.program().tensor(cr.tensor).dtype;
    const int lanes = c.target().vector_lanes(dt == DType::Bool ? DType::U8 : dt);
    // Halide's dim 0 is the tensor's last axis; a transposed copy stores dim 1 innermost.
    std::vector<Halide::Var> args = w.args();
    if (cr.transpose && args.size() >= 2) {
      std::vector<Halide::Var> order = args;
      std::swap(order[0], order[1]);
      w.reorder_storage(order);
      w.reorder(std::vector<Halide::VarOrRVar>(order.begin(), order.end()));
      std::swap(args[0], args[1]);
    }
    if (cr.transpose && args.size() >= 2 && lanes > 1) {
      // Transpose lanes x lanes blocks in registers: contiguous loads along
      // the source rows, shuffles, contiguous stores. A strided gather per
      // vector was 2x slower overall on x @ W^T with K = 3072 (6.3 -> 3.4 ms
      // per core, 128 x 3072 x 768).
      Halide::Var ko("__tk"), ki("__tki"), oo("__to"), oi("__toi");
      w.tile(args[0], args[1], oo, ko, oi, ki, lanes, lanes, Halide::TailStrategy::GuardWithIf)
          .vectorize(oi)
          .unroll(ki);
    } else if (lanes > 1 && !args.empty()) {
      w.vectorize(args[0], lanes, Halide::TailStrategy::GuardWithIf);
    }
  }
}

const Directive& cache_directive() {
  return instance<CacheDirective>();
}

}  // namespace pto::directives
