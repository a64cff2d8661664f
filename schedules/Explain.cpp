#include "schedules/Explain.h"

#include <algorithm>
#include <functional>
#include <sstream>

#include "schedules/LoopNest.h"
#include "schedules/Validate.h"
#include "schedules/defaults/Defaults.h"
#include "schedules/directives/Directive.h"
#include "schedules/directives/DotPairs.h"
#include "schedules/directives/Loops.h"

namespace pto {
namespace {

class Explainer : public directives::ExplainContext {
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
  void line(int depth, const std::string& text) override {
    os_ << std::string(static_cast<size_t>(2 * depth), ' ') << text << "\n";
  }
  void set_in_tile(bool in_tile) override { in_tile_ = in_tile; }

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
            const std::string& inner_at = "", const std::function<void(int)>& inner = {}) override {
    const auto loops = loop_nest(st, ls, update);
    int d = depth;
    for (const Loop& l : loops) {
      const std::string marks = directives::loop_marks(ls, l);
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
        for (const directives::Directive* dir : directives::directives())
          for (const std::string& text : dir->explain_loop(st, *ss, l.name, update)) line(d, text);
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
    if (ss)
      for (const directives::Directive* d : directives::directives()) head += d->explain_head(*ss);
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
    const Stage ust = update_stage(st, ss);  // the stage as its update's loops run
    // The reduction body, annotated by the directives (e.g. the condition on skipped steps).
    std::string value = to_string(st.value);
    if (ss)
      for (const directives::Directive* d : directives::directives()) d->explain_body(p_, st, *ss, value);
    if (ss) {
      const directives::UpdateText u{lhs, init, value, &upd, ust};
      for (const directives::Directive* d : directives::directives())
        if (d->explain_update(*this, st, *ss, u, depth + 1)) return;
    }
    nest(st, pure, false, depth + 1, lhs + " = " + init);
    nest(ust, upd, true, depth + 1, lhs + " = " + std::string(to_string(*st.reduce)) + "(" + lhs + ", " + value + ")");
  }

  const Program& p_;
  const Schedule& s_;
  std::ostringstream os_;
  bool in_tile_ = false;  // printing an accumulator tile's loops
};

}  // namespace

std::string explain(const Program& p, const Schedule& s, const Target* target) {
  validate(p, s, target);
  // The loops at the schedule's opt level, as lowering compiles them.
  return Explainer(p, target ? at_opt_level(p, s, *target) : s).run(target);
}

}  // namespace pto
