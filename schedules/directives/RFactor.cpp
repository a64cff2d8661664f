#include "schedules/directives/RFactor.h"

#include <algorithm>

#include "dsl/Error.h"
#include "schedules/LoopNest.h"
#include "schedules/directives/Json.h"

namespace pto::directives {

constexpr int kMaxRFactor = 256;

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
  if (r->extent.is_symbolic())
    return where + " of '" + rf.rvar + "', whose extent '" + r->extent.sym +
           "' is symbolic; rfactor needs a static extent that the factor divides";
  const int64_t n = r->extent.value;
  if (rf.factor < 2 || rf.factor > n || n % rf.factor != 0 || rf.factor > kMaxRFactor) {
    std::string divs;
    for (int64_t d = 2; d <= std::min<int64_t>(n, kMaxRFactor); ++d)
      if (n % d == 0 && (d & (d - 1)) == 0) divs += (divs.empty() ? "" : ", ") + std::to_string(d);
    return where + " factor " + std::to_string(rf.factor) + " for '" + rf.rvar + "' (extent " +
           std::to_string(n) + ") must be at least 2, at most 256 and divide the extent; e.g. " +
           (divs.empty() ? std::string("none: the extent has no such divisor") : divs);
  }
  if (target) {
    const int lanes = target->vector_lanes(accumulate == DType::Bool ? DType::U8 : accumulate);
    if (lanes > 1 && rf.factor % lanes != 0 && lanes % rf.factor != 0)
      return where + " factor " + std::to_string(rf.factor) + " does not fit target " +
             target->name + " (" + std::to_string(lanes) + " lanes of " +
             std::string(to_string(accumulate)) + "); use a divisor or multiple of " +
             std::to_string(lanes);
  }
  return "";
}

std::vector<RFactor> rfactor_candidates(const Stage& st, const Target* target, DType accumulate) {
  std::vector<RFactor> r;
  if (!st.reduce || st.is_arg_reduction()) return r;
  for (const RVar& v : st.rvars) {
    if (v.extent.is_symbolic()) continue;
    for (int64_t f = 2; f <= std::min<int64_t>(v.extent.value, kMaxRFactor); ++f) {
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
    json::check_keys(v, path, {"rvar", "factor"});
    if (!v.contains("rvar") || !v.contains("factor"))
      json::fail(path, "needs \"rvar\" and \"factor\"");
    ss.rfactor = RFactor{json::get_string(v["rvar"], path + ".rvar"),
                         static_cast<int>(json::get_int(v["factor"], path + ".factor", 2, 1024))};
  }
  void print(const StageSchedule& ss, nlohmann::json& js) const override {
    if (ss.rfactor) js["rfactor"] = {{"rvar", ss.rfactor->rvar}, {"factor", ss.rfactor->factor}};
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
    if (ss.update) conflict("\"update\" directives");
    if (!ss.accumulator_at.empty()) conflict("accumulator_at");
    if (!ss.cache.empty()) conflict("cache");
    if (!ss.pipeline.prefetch.empty()) conflict("prefetch");
    if (ss.device != "cpu")
      throw ScheduleError(where + " runs on the CPU only; device is '" + ss.device + "'");
  }

  bool schedules_reduction() const override { return true; }

  // Split the reduction variable and turn its inner part into the pure lane
  // dim of an intermediate Func, computed per point of the reduction (inside
  // the update's innermost pure loop) with the lanes innermost and
  // vectorized; the update then reduces the lanes. The check guarantees an
  // associative op, a divisible static extent and no update directives, so
  // the split needs no tail.
  void apply(ApplyContext& c) const override {
    const StageSchedule& ss = c.schedule();
    const Stage& st = c.stage();
    if (!ss.rfactor || !st.reduce) return;
    const RFactor& rf = *ss.rfactor;
    Halide::Func red = c.reducer();
    const Halide::RVar r(rf.rvar), ro(outer_loop(rf.rvar)), ri(inner_loop(rf.rvar));
    const Halide::Var lane(rfactor_lane(rf.rvar));
    Halide::Stage up = red.update(0);
    up.split(r, ro, ri, rf.factor);
    Halide::Func intm = up.rfactor(ri, lane);
    if (st.vars.empty())
      intm.compute_at(red, Halide::Var::outermost());
    else
      intm.compute_at(red, Halide::Var(st.vars.back()));
    intm.vectorize(lane);
    std::vector<Halide::VarOrRVar> order{Halide::VarOrRVar(lane), Halide::VarOrRVar(ro)};
    for (auto it = st.rvars.rbegin(); it != st.rvars.rend(); ++it)
      if (it->name != rf.rvar) order.emplace_back(Halide::RVar(it->name));
    intm.update(0).reorder(order).vectorize(lane);
    // The stage's own update now reduces `factor` lanes. Vectorized as an
    // atomic reduction, Halide emits one VectorReduce: a halving tree of
    // shuffles and vector ops (log2(factor) steps) instead of `factor`
    // dependent scalar ops, which dominated short rows (layer_norm: two
    // such combines per 768-wide row).
    red.update(0).atomic().vectorize(ri);
  }

  // The stage's pure loops, the intermediate per point (partial reductions
  // over rvar_o, its lanes vectorized), then the reduction of the lanes.
  // Printed with the explain loop printer over a copy of the stage whose
  // reduction variable is the lane.
  bool explain_update(ExplainContext& e, const Stage& st, const StageSchedule& ss,
                      const UpdateText& u, int depth) const override {
    if (!ss.rfactor) return false;
    const RFactor& rf = *ss.rfactor;
    e.nest(st, ss.loops, false, depth, u.lhs + " = " + u.init);
    const std::string op(to_string(*st.reduce));
    const std::string lane = rfactor_lane(rf.rvar), f = std::to_string(rf.factor);
    const std::string& lhs = u.lhs;
    std::string args = lhs.substr(st.name.size() + 1, lhs.size() - st.name.size() - 2);
    const std::string rf_ref = st.name + "__rf(" + args + (args.empty() ? "" : ", ") + lane + ")";
    int64_t n = 0;
    std::string others;
    for (const RVar& r : st.rvars)
      if (r.name == rf.rvar)
        n = r.extent.value;
      else
        others += ", " + r.name;
    auto intermediate = [&](int d) {
      e.line(d, "intermediate " + st.name + "__rf: rfactor of " + rf.rvar + " by " + f + " (" +
                    rf.rvar + " = " + outer_loop(rf.rvar) + " * " + f + " + " + lane +
                    "), per point");
      e.line(d + 1, "vectorized x" + f + " for " + lane + " in [0, " + f + "): " + rf_ref + " = " +
                        u.init);
      e.line(d + 1, "for " + outer_loop(rf.rvar) + " in [0, " + std::to_string(n / rf.factor) +
                        ")" + others + ":");
      e.line(d + 2, "vectorized x" + f + " for " + lane + " in [0, " + f + "): " + rf_ref + " = " +
                        op + "(" + rf_ref + ", " + to_string(st.value) + ")");
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
      e.nest(lanes, combine, true, depth, body);
    } else {
      e.nest(lanes, combine, true, depth, body, st.vars.back(), intermediate);
    }
    return true;
  }

 protected:
  std::vector<StageSchedule> proposals(const CheckContext& c) const override {
    return variants(c.ss, rfactor_candidates(c.stage, c.target, c.precision.accumulate),
                    [](StageSchedule& v, const RFactor& rf) { v.rfactor = rf; });
  }
};

}  // namespace

const Directive& rfactor_directive() {
  return instance<RFactorDirective>();
}

}  // namespace pto::directives
