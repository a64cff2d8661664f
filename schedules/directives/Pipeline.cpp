#include "schedules/directives/Pipeline.h"

#include <algorithm>

#include "dsl/Error.h"
#include "schedules/LoopNest.h"
#include "schedules/directives/Json.h"

namespace pto::directives {
namespace {

// The loops a prefetch can be issued at: the update's for a reduction.
std::vector<Loop> prefetch_loops(const Stage& st, const StageSchedule& ss) {
  return loop_nest(st, st.reduce && ss.update ? *ss.update : ss.loops, st.reduce.has_value());
}

struct PipelineDirective : Directive {
  PipelineDirective() : Directive("pipeline") {}

  void parse_value(const nlohmann::json& v, StageSchedule& ss,
                   const std::string& path) const override {
    const nlohmann::json& p = v;
    json::check_keys(p, path, {"ring_buffer", "async", "prefetch"});
    if (p.contains("ring_buffer"))
      ss.pipeline.ring_buffer =
          static_cast<int>(json::get_int(p["ring_buffer"], path + ".pipeline.ring_buffer", 0, 8));
    if (p.contains("async"))
      ss.pipeline.async = json::get_bool(p["async"], path + ".pipeline.async");
    if (p.contains("prefetch")) {
      if (!p["prefetch"].is_array()) json::fail(path + ".pipeline.prefetch", "must be a list");
      for (const auto& f : p["prefetch"]) {
        const std::string fp = path + ".pipeline.prefetch";
        json::check_keys(f, fp, {"tensor", "loop", "distance"});
        if (!f.contains("tensor") || !f.contains("loop"))
          json::fail(fp, "needs \"tensor\" and \"loop\"");
        Prefetch pf{json::get_string(f["tensor"], fp + ".tensor"),
                    json::get_string(f["loop"], fp + ".loop"), 1};
        if (f.contains("distance"))
          pf.distance = static_cast<int>(json::get_int(f["distance"], fp + ".distance", 1, 64));
        ss.pipeline.prefetch.push_back(pf);
      }
    }
  }

  void print(const StageSchedule& ss, nlohmann::json& js) const override {
    const Pipelining& pl = ss.pipeline;
    if (!pl.ring_buffer && !pl.async && pl.prefetch.empty()) return;
    nlohmann::json p = nlohmann::json::object();
    if (pl.ring_buffer) p["ring_buffer"] = pl.ring_buffer;
    if (pl.async) p["async"] = true;
    for (const auto& f : pl.prefetch)
      p["prefetch"].push_back({{"tensor", f.tensor}, {"loop", f.loop}, {"distance", f.distance}});
    js["pipeline"] = p;
  }

  void check(const CheckContext& c) const override {
    const StageSchedule& ss = c.ss;
    const Stage& st = c.stage;
    const std::string where = c.where();
    if ((ss.pipeline.ring_buffer || ss.pipeline.async) && ss.compute.kind != Placement::Kind::At)
      throw ScheduleError(where +
                          ": ring_buffer and async need the stage computed at a consumer loop");
    // Halide folds a ring buffer's storage across the iterations of the loops
    // between its storage and its computation, so the storage must be hoisted
    // out ("has matching store_at and hoist_storage levels" otherwise).
    // A reduction's update accumulates into the storage that the ring buffer
    // folds: Halide 21 computed wrong rows (softmax's row sum, layer_norm's
    // mean and variance with ring_buffer 2, found by bench_tune's search).
    if (ss.pipeline.ring_buffer && st.reduce)
      throw ScheduleError(
          where +
          ": ring_buffer on a reduction (its update accumulates into the folded storage, which "
          "Halide 21 miscomputes); use async alone, or a ring buffer on a pure producer stage");
    if (ss.pipeline.ring_buffer && c.optimizing() && (!ss.store || *ss.store == ss.compute))
      throw ScheduleError(
          where + ": ring_buffer " + std::to_string(ss.pipeline.ring_buffer) +
          " needs its storage hoisted out of the loop it is computed at; set \"store\" to \"root\" "
          "or to a loop enclosing " +
          ss.compute.stage + "." + ss.compute.loop);
    for (const Prefetch& f : ss.pipeline.prefetch) {
      const auto reads = st.reads();
      if (std::find(reads.begin(), reads.end(), f.tensor) == reads.end())
        throw ScheduleError(where + ": prefetch of '" + f.tensor +
                            "', which it does not read; it reads: " + join(reads));
      const auto loops = prefetch_loops(st, ss);
      if (!find_loop(loops, f.loop))
        throw ScheduleError(where + ": prefetch at unknown loop '" + f.loop +
                            "'; loops: " + join(loop_names(loops)));
    }
  }

  void apply(ApplyContext& c) const override {
    const StageSchedule& ss = c.schedule();
    Halide::Func f = c.func();
    if (ss.pipeline.async) f.async();
    if (ss.pipeline.ring_buffer) f.ring_buffer(ss.pipeline.ring_buffer);
    const bool in_update = c.update_in_func();
    for (const Prefetch& pf : ss.pipeline.prefetch) {
      Halide::Stage hs = in_update ? Halide::Stage(f.update(0)) : Halide::Stage(f);
      const Halide::VarOrRVar at(pf.loop, in_update && is_reduction_loop(c.stage(), pf.loop));
      if (const auto in = c.input(pf.tensor))
        hs.prefetch(*in, at, at, pf.distance);
      else
        hs.prefetch(c.stage_func(pf.tensor), at, at, pf.distance);
    }
  }

  std::string explain_head(const StageSchedule& ss) const override {
    std::string r;
    if (ss.pipeline.ring_buffer) r += ", ring_buffer " + std::to_string(ss.pipeline.ring_buffer);
    if (ss.pipeline.async) r += ", async";
    return r;
  }

 protected:
  // async (and a double buffer stored at root) at a consumer loop; a
  // prefetch of each input it reads at each of its loops.
  std::vector<StageSchedule> proposals(const CheckContext& c) const override {
    std::vector<StageSchedule> r;
    StageSchedule v = c.ss;
    v.pipeline.async = true;
    r.push_back(v);
    v.pipeline.ring_buffer = 2;
    v.store = Placement{};
    r.push_back(v);
    if (c.ss.compute.kind == Placement::Kind::Inline) return r;
    for (const std::string& t : c.stage.reads())
      if (!c.program.find_stage(t))
        for (const Loop& l : prefetch_loops(c.stage, c.ss)) {
          StageSchedule p = c.ss;
          p.pipeline.prefetch.push_back({t, l.name, 1});
          r.push_back(p);
        }
    return r;
  }
};

}  // namespace

const Directive& pipeline_directive() {
  return instance<PipelineDirective>();
}

}  // namespace pto::directives
