#include "schedules/directives/DotPairs.h"

#include <algorithm>

#include "dsl/Analysis.h"
#include "dsl/Error.h"
#include "schedules/LoopNest.h"
#include "schedules/directives/Json.h"
#include "schedules/directives/NameField.h"

namespace pto::directives {

Stage paired_update(const Stage& stage, const std::string& pairs) {
  Stage s = stage;
  for (RVar& r : s.rvars)
    if (r.name == pairs && !r.extent.is_symbolic()) r.extent = Dim(r.extent.value / 2);
  return s;
}

Stage update_stage(const Stage& stage, const StageSchedule* ss) {
  return paired_update(stage, ss ? ss->dot_pairs : "");
}

namespace {

struct DotPairsDirective : NameField<&StageSchedule::dot_pairs> {
  DotPairsDirective() : NameField("dot_pairs") {}

  void check_set(const CheckContext& c) const override {
    const StageSchedule& ss = c.ss;
    const Stage& st = c.stage;
    const std::string where = c.where();
    const std::string& k = ss.dot_pairs;
    if (!st.reduce || *st.reduce != ReduceOp::Sum)
      throw ScheduleError(where + ": dot_pairs needs a sum reduction");
    const RVar* rv = nullptr;
    std::vector<std::string> rvars;
    for (const RVar& r : st.rvars) {
      rvars.push_back(r.name);
      if (r.name == k) rv = &r;
    }
    if (!rv)
      throw ScheduleError(where + ": dot_pairs names '" + k +
                          "', not a reduction variable; reduction variables: " + join(rvars));
    if (rv->extent.is_symbolic() || rv->extent.value % 2)
      throw ScheduleError(where + ": dot_pairs needs an even static extent of '" + k + "', got " +
                          rv->extent.str());
    if (ss.rfactor)
      throw ScheduleError(where + ": dot_pairs and rfactor cannot be combined; drop one of them");
    if (!ss.update || ss.update->vectorize.empty())
      throw ScheduleError(
          where + ": dot_pairs needs the update's vector lanes: vectorize one of its pure loops");
    // Halide loads the accumulator of a pair reduction with aligned vector
    // loads: into a caller's buffer (16-byte aligned from malloc) that
    // faulted at some addresses; its own allocations are aligned.
    if (c.program.is_output(st.name) && ss.accumulator_at.empty())
      throw ScheduleError(
          where +
          ": dot_pairs on an output needs an accumulator tile (accumulator_at): the pair "
          "reduction loads its accumulator with aligned vector loads, which only Halide's own "
          "buffers guarantee");
    if (ss.update->unroll.count(k) ||
        std::count(ss.update->parallel.begin(), ss.update->parallel.end(), k))
      throw ScheduleError(where + ": dot_pairs runs '" + k +
                          "' in pairs; do not unroll or parallelize it in the update "
                          "(tiles of it count pairs)");
  }

  bool schedules_reduction() const override { return true; }

  // The pair loop stays the innermost loop (the update's order never names
  // it) and is vectorized atomically under the update's vector lanes; Halide
  // reduces each pair of lanes into one (VectorReduce), which it emits as
  // vdpbf16ps for bf16 x bf16 -> f32 on avx512_bf16 targets.
  void apply(ApplyContext& c) const override {
    const StageSchedule& ss = c.schedule();
    if (ss.dot_pairs.empty() || !c.stage().reduce) return;
    c.reducer().update(0).atomic().vectorize(Halide::RVar(pair_loop(ss.dot_pairs)));
  }

  void explain_body(const Program& p, const Stage& st, const StageSchedule& ss,
                    std::string& value) const override {
    const std::string& k = ss.dot_pairs;
    if (k.empty()) return;
    value += "    [dot_pairs: " + k + " = 2 " + k + " + " + pair_loop(k) + ", the loop " + k +
             " counts pairs, the pair summed per lane]";
  }

 protected:
  // The reduction variable an operand is laid out in pairs along.
  std::vector<StageSchedule> proposals(const CheckContext& c) const override {
    const auto k = pair_rvar(c.stage);
    return variants(c.ss, k ? std::vector<std::string>{*k} : std::vector<std::string>{},
                    [](StageSchedule& v, const std::string& rvar) { v.dot_pairs = rvar; });
  }
};

}  // namespace

const Directive& dot_pairs_directive() {
  return instance<DotPairsDirective>();
}

}  // namespace pto::directives
