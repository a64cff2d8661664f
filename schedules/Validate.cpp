#include "schedules/Validate.h"

#include <algorithm>
#include <set>

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

// Is `consumer` downstream of `producer` (reads it directly or through other stages)?
bool downstream(const Program& p, const std::string& producer, const std::string& consumer) {
  std::vector<std::string> todo = p.consumers(producer);
  std::set<std::string> seen;
  while (!todo.empty()) {
    const std::string s = todo.back();
    todo.pop_back();
    if (s == consumer) return true;
    if (!seen.insert(s).second) continue;
    for (const auto& c : p.consumers(s)) todo.push_back(c);
  }
  return false;
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
    if (ls.vector_width == 0 && l->extent < 0 && !at_consumer)
      throw ScheduleError(where + ": vectorize '" + ls.vectorize +
                          "' without a width needs a constant extent (it is " + l->extent_str + ")");
    const int w = ls.vector_width ? ls.vector_width : static_cast<int>(l->extent);
    if (!at_consumer && l->extent > 0 && w > l->extent && l->name == l->dim)
      throw ScheduleError(where + ": vector width " + std::to_string(w) + " exceeds the extent " +
                          l->extent_str + " of loop '" + ls.vectorize + "'");
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
      if (!downstream(p, name, pl.stage)) {
        const auto cons = p.consumers(name);
        throw ScheduleError(where + ": " + what + " at '" + pl.stage + "', which does not consume it; consumers: " +
                            (cons.empty() ? std::string("none") : join(cons)));
      }
      const Stage& c = p.stage(pl.stage);
      const StageSchedule* cs = s.find(pl.stage);
      const LoopSchedule none;
      const auto pure = loop_nest(c, cs ? cs->loops : none, false);
      std::vector<Loop> all = pure;
      if (c.reduce) {
        const auto upd = loop_nest(c, cs && cs->update ? *cs->update : none, true);
        all.insert(all.end(), upd.begin(), upd.end());
      }
      if (!find_loop(all, pl.loop)) {
        std::vector<std::string> n = names(all);
        std::sort(n.begin(), n.end());
        n.erase(std::unique(n.begin(), n.end()), n.end());
        throw ScheduleError(where + ": " + what + " at loop '" + pl.loop + "' of '" + pl.stage +
                            "', which has no such loop; its loops: " + join(n));
      }
    };
    check_placement(ss.compute, "computed");
    if (ss.store) check_placement(*ss.store, "stored");

    // Loops.
    const bool at = ss.compute.kind == Placement::Kind::At;
    check_loops(st, ss.loops, false, target, prec.compute, at);
    if (ss.update) {
      if (!st.reduce) throw ScheduleError(where + " has no reduction, so it has no \"update\" to schedule");
      check_loops(st, *ss.update, true, target, prec.accumulate, at);
    }
    if (ss.compute.kind == Placement::Kind::Inline && !ss.loops.empty())
      throw ScheduleError(where + " is inline, so it has no loops to tile, order, vectorize or parallelize");

    // Pipelining.
    if ((ss.pipeline.ring_buffer || ss.pipeline.async) && ss.compute.kind != Placement::Kind::At)
      throw ScheduleError(where + ": ring_buffer and async need the stage computed at a consumer loop");
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
  if (s.options.opt_level < 0 || s.options.opt_level > 3)
    throw ScheduleError("options.opt_level " + std::to_string(s.options.opt_level) + " is outside 0-3");
  if (s.options.threads < 0) throw ScheduleError("options.threads must be >= 0");
}

}  // namespace pto
