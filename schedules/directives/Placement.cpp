#include "schedules/directives/Placement.h"

#include <algorithm>

#include "dsl/Error.h"
#include "schedules/directives/Json.h"
#include "schedules/directives/RFactor.h"
#include "schedules/directives/SkipPadding.h"

namespace pto {

namespace {
nlohmann::json placement_to_json(const Placement& p) {
  switch (p.kind) {
    case Placement::Kind::Root:
      return "root";
    case Placement::Kind::Inline:
      return "inline";
    case Placement::Kind::At:
      return nlohmann::json{{"at", p.stage}, {"loop", p.loop}};
  }
  return "root";
}
Placement placement_from_json(const nlohmann::json& j, const std::string& path) {
  Placement p;
  if (j.is_string()) {
    const std::string s = j.get<std::string>();
    if (s == "root") return p;
    if (s == "inline") {
      p.kind = Placement::Kind::Inline;
      return p;
    }
    directives::json::fail(
        path,
        "'" + s +
            "' is not a placement; valid: \"root\", \"inline\", {\"at\": stage, \"loop\": loop}");
  }
  directives::json::check_keys(j, path, {"at", "loop"});
  if (!j.contains("at") || !j.contains("loop"))
    directives::json::fail(path, "needs both \"at\" and \"loop\"");
  p.kind = Placement::Kind::At;
  p.stage = directives::json::get_string(j["at"], path + ".at");
  p.loop = directives::json::get_string(j["loop"], path + ".loop");
  return p;
}
}  // namespace

std::string to_string(const Placement& p) {
  return placement_to_json(p).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

namespace directives {

LoopSchedule last_definition_loops(const Stage& c, const StageSchedule* cs) {
  if (!cs) return {};
  if (!c.reduce) return cs->loops;
  // Under rfactor the update runs the pure definition's tiles and parallel
  // loops (a producer computed at its parallel loop runs on every core).
  if (cs->rfactor) return cs->rfactor->parallel ? LoopSchedule{} : update_pure_loops(cs->loops);
  return cs->update ? *cs->update : LoopSchedule{};
}

std::vector<Loop> placement_loops(const Stage& c, const StageSchedule* cs) {
  const LoopSchedule none;
  if (c.reduce) {
    // With rfactor the update reduces the intermediate's lanes: its reduction
    // loops are not those of the schedule, only its pure loops remain, tiled
    // as the pure definition's are (RFactor.cpp).
    if (cs && cs->rfactor) {
      LoopSchedule pure;
      if (!cs->rfactor->parallel) pure.tile = cs->loops.tile;
      auto loops = loop_nest(c, pure, true);
      std::erase_if(loops, [](const Loop& l) { return l.reduction; });
      return loops;
    }
    return loop_nest(c, cs && cs->update ? *cs->update : none, true);
  }
  return loop_nest(c, cs ? cs->loops : none, false);
}

namespace {

std::set<std::string> consumers_through_inline(const Program& p, const Schedule& s,
                                               const std::string& name, int depth) {
  std::set<std::string> r;
  for (const auto& c : p.consumers(name)) {
    const StageSchedule* cs = s.find(c);
    if (cs && cs->compute.kind == Placement::Kind::Inline && depth < 64) {
      const auto sub = consumers_through_inline(p, s, c, depth + 1);
      r.insert(sub.begin(), sub.end());
    } else {
      r.insert(c);
    }
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
std::vector<Enclosing> enclosing_loops(const Program& p, const Schedule& s,
                                       const std::string& stage, const std::string& loop,
                                       int depth = 0) {
  const Stage& c = p.stage(stage);
  const StageSchedule* cs = s.find(stage);
  std::vector<Enclosing> r;
  if (cs && cs->compute.kind == Placement::Kind::At && depth < 64)
    r = enclosing_loops(p, s, cs->compute.stage, cs->compute.loop, depth + 1);
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
  const LoopSchedule ls = last_definition_loops(c, cs);
  for (const Loop& l : placement_loops(c, cs)) {
    bool split = false;
    r.push_back({stage, l.name, concurrent(ls, l, split)});
    if (l.name == loop) break;
    if (split) r.push_back({stage, l.name + " (vector lanes)", true});
  }
  return r;
}

std::vector<std::string> stage_names(const Program& p) {
  std::vector<std::string> r;
  for (const Stage& st : p.stages()) r.push_back(st.name);
  return r;
}

struct PlacementDirective : Directive {
  PlacementDirective() : Directive("compute") {}
  std::vector<std::string_view> fields() const override { return {"compute", "store"}; }

  void parse(const nlohmann::json& js, StageSchedule& ss, const std::string& path) const override {
    if (js.contains("compute")) ss.compute = placement_from_json(js["compute"], path + ".compute");
    if (js.contains("store")) ss.store = placement_from_json(js["store"], path + ".store");
  }

  void print(const StageSchedule& ss, nlohmann::json& js) const override {
    js["compute"] = placement_to_json(ss.compute);
    if (ss.store) js["store"] = placement_to_json(*ss.store);
  }

  void check(const CheckContext& c) const override {
    const Program& p = c.program;
    const Schedule& s = c.schedule;
    const StageSchedule& ss = c.ss;
    const std::string& name = c.stage.name;
    const std::string where = c.where();
    const bool out = p.is_output(name);
    const auto check_placement = [&](const Placement& pl, const char* what) {
      if (pl.kind == Placement::Kind::Inline) {
        if (out) throw ScheduleError(where + " is an output and cannot be " + what + " inline");
        if (c.stage.reduce)
          throw ScheduleError(where + " is a reduction and cannot be " + what +
                              " inline; compute it at root or at a consumer loop");
      }
      if (pl.kind != Placement::Kind::At) return;
      if (out)
        throw ScheduleError(where + " is an output; it is computed at root, not at '" + pl.stage +
                            "'");
      if (!p.find_stage(pl.stage))
        throw ScheduleError(where + ": " + what + " at unknown stage '" + pl.stage +
                            "'; stages: " + join(stage_names(p)));
      if (!p.reaches(name, pl.stage)) {
        const auto cons = p.consumers(name);
        throw ScheduleError(where + ": " + what + " at '" + pl.stage +
                            "', which does not consume it; consumers: " +
                            (cons.empty() ? std::string("none") : join(cons)));
      }
      const Stage& cst = p.stage(pl.stage);
      const StageSchedule* cs = s.find(pl.stage);
      if (cs && cs->compute.kind == Placement::Kind::Inline && c.optimizing())
        throw ScheduleError(where + ": " + what + " at '" + pl.stage +
                            "', which is inline and so has no loops; " + "compute '" + pl.stage +
                            "' at root or at a loop first");
      // A producer is computed in its consumer's last definition: the update of a reduction.
      const std::vector<Loop> loops = placement_loops(cst, cs);
      const Loop* l = find_loop(loops, pl.loop);
      if (!l)
        throw ScheduleError(where + ": " + what + " at loop '" + pl.loop + "' of '" + pl.stage +
                            "', which has no such loop; its loops" +
                            (cst.reduce ? " (of its update)" : "") + ": " +
                            join(loop_names(loops)));
      if (factor_split(last_definition_loops(cst, cs), *l))
        throw ScheduleError(
            where + ": " + what + " at loop '" + pl.loop + "' of '" + pl.stage +
            "', which that stage splits by an unroll factor or vector width; place it at a loop " +
            "outside, or unroll that loop fully");
    };
    check_placement(ss.compute, "computed");
    if (ss.store) check_placement(*ss.store, "stored");
    if (ss.compute.kind == Placement::Kind::At && c.optimizing()) {
      // Every stage that reads it (through inline stages) must run inside that loop.
      for (const std::string& e : effective_consumers(p, s, name)) {
        if (e == ss.compute.stage) continue;
        const StageSchedule* es = s.find(e);
        bool inside = false;
        if (es && es->compute.kind == Placement::Kind::At)
          for (const Enclosing& l : enclosing_loops(p, s, es->compute.stage, es->compute.loop))
            inside |= l.stage == ss.compute.stage && l.loop == ss.compute.loop;
        if (!inside)
          throw ScheduleError(where + ": computed at '" + ss.compute.stage + "." + ss.compute.loop +
                              "', but '" + e +
                              "' also reads it outside that loop; compute it at root, or at a loop "
                              "enclosing all its readers");
      }
    }
    if (ss.store && ss.compute.kind != Placement::Kind::At &&
        ss.store->kind != Placement::Kind::Root)
      throw ScheduleError(where + ": stored at " + to_string(*ss.store) + " but computed " +
                          to_string(ss.compute) +
                          "; storage can only be hoisted out of a compute_at: use \"root\"");
    if (ss.store && ss.compute.kind == Placement::Kind::At && c.optimizing() &&
        *ss.store != ss.compute) {
      // Storage must enclose the computation, and no concurrent loop may lie
      // between them (each thread or lane would write the same buffer).
      const auto loops = enclosing_loops(p, s, ss.compute.stage, ss.compute.loop);
      size_t from = 0;
      if (ss.store->kind == Placement::Kind::Inline)
        throw ScheduleError(where +
                            ": store \"inline\" is not a storage level; use \"root\" or a loop");
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
        if (sc.reduce &&
            find_loop(loop_nest(sc, scs ? scs->loops : LoopSchedule{}, false), ss.store->loop))
          throw ScheduleError(where + ": stored at loop '" + ss.store->loop + "' of reduction '" +
                              ss.store->stage +
                              "', whose pure definition has a loop of the same name; store at "
                              "\"root\" or at a loop " +
                              "only its update has");
      }
      for (size_t k = from; k < loops.size(); ++k)
        if (loops[k].concurrent)
          throw ScheduleError(
              where + ": stored outside but computed inside the parallel or vectorized loop '" +
              loops[k].stage + "." + loops[k].loop + "', a race; store it inside that loop");
    }
  }

  // `store` places the allocation only (Halide's hoist_storage): the values
  // computed stay those compute_at asks for. Halide's store_at would also
  // enable sliding window, which may compute points outside the tensor and
  // read inputs out of bounds (found by test_differential).
  void apply(ApplyContext& c) const override {
    const StageSchedule& ss = c.schedule();
    Halide::Func f = c.func();
    switch (ss.compute.kind) {
      case Placement::Kind::Root:
        f.compute_root();
        // A root stage is its whole tensor. Left to Halide it would compute
        // only the region its consumers read, and a root stage's last tile,
        // shifted inwards (Loops.cpp), would start before 0 in a region
        // narrower than the tile, reading inputs out of bounds: a stride-2
        // 1x1 convolution reading 63 of a matmul's 64 columns (found by the
        // random programs from a convolution). Its static dims are bound to its shape.
        // (By position: Halide's dim 0 is the last axis, and some Funcs name
        // their args apart from the stage's variables.) Not a stage a
        // convolution reads in place of its padding: Halide's region of it
        // reaches into the padding the guarded steps skip (SkipPadding.h),
        // and that region is never narrower than the stage.
        if (const auto args = f.args();
            !c.caller_buffer() && args.size() == c.stage().shape.size() &&
            !read_through_padding_of(c.program(), c.stage().name,
                                     [&](const std::string& n) { return c.schedule_of(n); }))
          for (size_t k = 0; k < args.size(); ++k)
            if (const Dim& d = c.stage().shape[args.size() - 1 - k]; !d.is_symbolic())
              f.bound(args[k], 0, static_cast<int>(d.value));
        break;
      case Placement::Kind::Inline:
        break;
      case Placement::Kind::At:
        f.compute_at(c.consumer_loop(ss.compute));
        break;
    }
    // A stage computed inside a consumer's loop whose region depends on a
    // symbolic size (a dynamic softmax's exp row) has no constant bound, and
    // Halide would malloc and free it on every iteration: a dynamic softmax
    // over [1536, 128] spent 0.8 of its 0.9 ms there (static: 0.08 ms). On
    // the stack Halide reuses one allocation for as long as it is big
    // enough, and falls back to the heap past its stack limit.
    const bool symbolic = std::any_of(c.stage().shape.begin(), c.stage().shape.end(),
                                      [](const Dim& d) { return d.is_symbolic(); });
    if (ss.compute.kind == Placement::Kind::At && !ss.store && symbolic && ss.device == "cpu" &&
        ss.pipeline == Pipelining{})
      f.store_in(Halide::MemoryType::Stack);
    if (ss.store && ss.compute.kind == Placement::Kind::At) {
      if (ss.store->kind == Placement::Kind::Root)
        f.hoist_storage(Halide::LoopLevel::root());
      else if (ss.store->kind == Placement::Kind::At)
        f.hoist_storage(c.consumer_loop(*ss.store));
    }
  }

  bool applies_to_inline() const override { return true; }

  std::string explain_head(const StageSchedule& ss) const override {
    return ss.store ? ", stored at " + to_string(*ss.store) : "";
  }

 protected:
  // Root, inline, and each loop of its single effective consumer.
  std::vector<StageSchedule> proposals(const CheckContext& c) const override {
    std::vector<StageSchedule> r;
    StageSchedule v = c.ss;
    v.store.reset();
    v.compute = Placement{};
    r.push_back(v);
    v.compute.kind = Placement::Kind::Inline;
    v.loops = {};  // an inline stage has no loops
    r.push_back(v);
    v.loops = c.ss.loops;
    const auto eff = effective_consumers(c.program, c.schedule, c.stage.name);
    if (eff.size() == 1) {
      const Stage& cst = c.program.stage(*eff.begin());
      for (const Loop& l : placement_loops(cst, c.schedule.find(cst.name))) {
        v.compute = {Placement::Kind::At, cst.name, l.name};
        r.push_back(v);
      }
    }
    return r;
  }
};

}  // namespace

std::set<std::string> effective_consumers(const Program& p, const Schedule& s,
                                          const std::string& name) {
  return consumers_through_inline(p, s, name, 0);
}

const Directive& placement_directive() {
  return instance<PlacementDirective>();
}

}  // namespace directives
}  // namespace pto
