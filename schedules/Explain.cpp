#include "schedules/Explain.h"

#include <algorithm>
#include <functional>
#include <sstream>

#include "dsl/ZeroPadding.h"
#include "schedules/LoopNest.h"
#include "schedules/Validate.h"

namespace pto {
namespace {

class Explainer {
 public:
  Explainer(const Program& p, const Schedule& s) : p_(p), s_(s) {}

  std::string run(const Target* target) {
    os_ << "program " << p_.name();
    if (target) os_ << "  target " << target->name << " (" << target->halide << ")";
    os_ << "  opt_level " << s_.options.opt_level << "\n";
    for (const auto& in : p_.inputs()) os_ << "input " << in.name << ": " << to_string(in.dtype) << to_string(in.shape) << "\n";
    for (const Stage& st : p_.stages())
      if (placement(st.name).kind == Placement::Kind::Root) stage(st, 0);
    return os_.str();
  }

 private:
  const StageSchedule* sched(const std::string& n) const { return s_.options.opt_level == 0 ? nullptr : s_.find(n); }
  Placement placement(const std::string& n) const {
    const StageSchedule* ss = sched(n);
    return ss ? ss->compute : Placement{};
  }
  void line(int depth, const std::string& text) { os_ << std::string(static_cast<size_t>(2 * depth), ' ') << text << "\n"; }

  // Producers folded into `st` (transitively through other inline stages).
  std::vector<std::string> inlined_into(const Stage& st) const {
    std::vector<std::string> r;
    for (const auto& t : st.reads()) {
      const Stage* prod = p_.find_stage(t);
      if (prod && placement(t).kind == Placement::Kind::Inline) {
        r.push_back(t);
        for (const auto& x : inlined_into(*prod)) r.push_back(x);
      }
    }
    return r;
  }

  // `inner`: printed inside loop `inner_at` (an accumulator tile), before the body.
  void nest(const Stage& st, const LoopSchedule& ls, bool update, int depth, const std::string& body,
            const std::string& inner_at = "", const std::function<void(int)>& inner = {}) {
    const auto loops = loop_nest(st, ls, update);
    int d = depth;
    for (const Loop& l : loops) {
      std::string marks;
      if (std::find(ls.parallel.begin(), ls.parallel.end(), l.name) != ls.parallel.end()) marks += "parallel ";
      if (auto u = ls.unroll.find(l.name); u != ls.unroll.end())
        marks += u->second ? "unrolled x" + std::to_string(u->second) + " " : "unrolled ";
      if (ls.vectorize == l.name)
        marks += ls.vector_width ? "vectorized x" + std::to_string(ls.vector_width) + " " : "vectorized ";
      const bool at_consumer = (in_tile_ || placement(st.name).kind == Placement::Kind::At) && !l.reduction;
      const std::string ext = at_consumer && l.name == l.dim ? "(bounded by consumer)" : "[0, " + l.extent_str + ")";
      line(d, marks + "for " + l.name + " in " + ext + ":");
      ++d;
      for (const Stage& prod : p_.stages()) {
        const Placement pl = placement(prod.name);
        if (pl.kind == Placement::Kind::At && pl.stage == st.name && pl.loop == l.name && (update || !st.reduce))
          stage(prod, d);
      }
      if (const StageSchedule* ss = sched(st.name))
        for (const CacheRead& c : ss->cache)
          if (c.loop == l.name && (update || !st.reduce || !ss->accumulator_at.empty()))
            line(d, "cache " + c.tensor + ": dense copy of the region read, per iteration of " + c.loop);
      if (inner && l.name == inner_at) inner(d);
    }
    line(d, body);
  }

  void stage(const Stage& st, int depth) {
    const StagePrecision prec = stage_precision(p_, s_, st.name);
    const StageSchedule* ss = sched(st.name);
    std::string head = st.name + ": " + to_string(placement(st.name)) + ", storage " + std::string(to_string(prec.storage)) +
                       ", compute " + std::string(to_string(prec.compute));
    if (st.reduce) head += ", accumulate " + std::string(to_string(prec.accumulate));
    if (ss && ss->store) head += ", stored at " + to_string(*ss->store);
    if (ss && ss->pipeline.ring_buffer) head += ", ring_buffer " + std::to_string(ss->pipeline.ring_buffer);
    if (ss && ss->pipeline.async) head += ", async";
    if (ss && ss->device != "cpu") head += ", device " + ss->device;
    const auto inl = inlined_into(st);
    if (!inl.empty()) {
      std::string n;
      for (const auto& x : inl) n += (n.empty() ? "" : ", ") + x;
      head += "  [inlined: " + n + "]";
    }
    line(depth, head);
    std::string lhs = st.name + "(";
    for (size_t i = 0; i < st.vars.size(); ++i) lhs += (i ? ", " : "") + st.vars[i];
    lhs += ")";
    const LoopSchedule none;
    const LoopSchedule& pure = ss ? ss->loops : none;
    if (!st.reduce) {
      nest(st, pure, false, depth + 1, lhs + " = " + to_string(st.value));
      return;
    }
    const std::string init = *st.reduce == ReduceOp::Sum ? std::string("0") : "init(" + std::string(to_string(*st.reduce)) + ")";
    const LoopSchedule& upd = ss && ss->update ? *ss->update : none;
    const Stage ust = paired_update(st, ss ? ss->dot_pairs : "");  // the update's loops (k counts pairs)
    // The reduction body, with the condition skip_padding puts on its steps.
    std::string value = to_string(st.value);
    if (ss && !ss->skip_padding.empty()) {
      if (const auto through = read_through_padding(p_, st, ss->skip_padding)) value = to_string(*through);
      if (const auto pred = padding_predicate(p_, st, ss->skip_padding)) value += "    where " + to_string(*pred);
    }
    if (ss && !ss->dot_pairs.empty())
      value += "    [dot_pairs: " + ss->dot_pairs + " = 2 " + ss->dot_pairs + " + " + ss->dot_pairs + "_2, the loop " +
               ss->dot_pairs + " counts pairs, the pair summed per lane]";
    if (ss && !ss->accumulator_at.empty()) {
      // The reduction runs into an accumulator tile inside the pure loops.
      const std::string acc = st.name + "__acc(" + lhs.substr(st.name.size() + 1);
      nest(st, pure, false, depth + 1, lhs + " = " + acc, ss->accumulator_at, [&](int d) {
        line(d, "accumulator " + st.name + "__acc: per iteration of " + ss->accumulator_at);
        line(d + 1, acc + " = " + init);
        in_tile_ = true;  // its pure loops span the tile
        nest(ust, upd, true, d + 1, acc + " = " + std::string(to_string(*st.reduce)) + "(" + acc + ", " + value + ")");
        in_tile_ = false;
      });
      return;
    }
    nest(st, pure, false, depth + 1, lhs + " = " + init);
    if (ss && ss->rfactor) {
      rfactored(st, *ss->rfactor, lhs, init, depth + 1);
      return;
    }
    nest(ust, upd, true, depth + 1, lhs + " = " + std::string(to_string(*st.reduce)) + "(" + lhs + ", " + value + ")");
  }

  // The update under rfactor: the stage's pure loops, the intermediate per
  // point (partial reductions over rvar_o, its lanes vectorized), then the
  // reduction of the lanes. Printed with the stage's own loop printer over a
  // copy of the stage whose reduction variable is the lane.
  void rfactored(const Stage& st, const RFactor& rf, const std::string& lhs, const std::string& init, int depth) {
    const std::string op(to_string(*st.reduce));
    const std::string lane = rf.rvar + "_lane", f = std::to_string(rf.factor);
    std::string args = lhs.substr(st.name.size() + 1, lhs.size() - st.name.size() - 2);
    const std::string rf_ref = st.name + "__rf(" + args + (args.empty() ? "" : ", ") + lane + ")";
    int64_t n = 0;
    std::string others;
    for (const RVar& r : st.rvars)
      if (r.name == rf.rvar) n = r.extent.value;
      else others += ", " + r.name;
    auto intermediate = [&](int d) {
      line(d, "intermediate " + st.name + "__rf: rfactor of " + rf.rvar + " by " + f + " (" + rf.rvar + " = " + rf.rvar +
                  "_o * " + f + " + " + lane + "), per point");
      line(d + 1, "vectorized x" + f + " for " + lane + " in [0, " + f + "): " + rf_ref + " = " + init);
      line(d + 1, "for " + rf.rvar + "_o in [0, " + std::to_string(n / rf.factor) + ")" + others + ":");
      line(d + 2, "vectorized x" + f + " for " + lane + " in [0, " + f + "): " + rf_ref + " = " + op + "(" + rf_ref + ", " +
                      to_string(st.value) + ")");
    };
    Stage lanes = st;
    lanes.rvars = {RVar{lane, Dim(rf.factor)}};
    const std::string body = lhs + " = " + op + "(" + lhs + ", " + rf_ref + ")";
    // The lanes are combined by one vectorized (tree) reduce.
    LoopSchedule combine;
    combine.vectorize = lane;
    combine.vector_width = rf.factor;
    if (st.vars.empty()) {
      intermediate(depth);
      nest(lanes, combine, true, depth, body);
    } else {
      nest(lanes, combine, true, depth, body, st.vars.back(), intermediate);
    }
  }

  const Program& p_;
  const Schedule& s_;
  std::ostringstream os_;
  bool in_tile_ = false;  // printing an accumulator tile's loops
};

}  // namespace

std::string explain(const Program& p, const Schedule& s, const Target* target) {
  validate(p, s, target);
  return Explainer(p, s).run(target);
}

}  // namespace pto
