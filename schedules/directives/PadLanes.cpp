#include "schedules/directives/PadLanes.h"

#include <algorithm>

#include "dsl/Error.h"
#include "dsl/IRVisitor.h"
#include "schedules/directives/NameField.h"

namespace pto::directives {

std::map<std::string, std::vector<int>> padded_reads(const Stage& st, const std::string& var) {
  // Does an index mention the var (j, or a convolution's w * 2 + kx)?
  struct Mentions : IRVisitor {
    const std::string& var;
    bool found = false;
    explicit Mentions(const std::string& v) : var(v) {}
    void visit_var(const VarNode& n) override { found |= n.name == var; }
  };
  struct Reads : IRVisitor {
    const std::string& var;
    std::map<std::string, std::vector<int>> axes;
    explicit Reads(const std::string& v) : var(v) {}
    void visit_access(const AccessNode& n) override {
      IRVisitor::visit_access(n);
      for (size_t a = 0; a < n.args.size(); ++a) {
        Mentions m(var);
        m.visit(n.args[a]);
        if (!m.found) continue;
        std::vector<int>& ax = axes[n.tensor];
        if (std::find(ax.begin(), ax.end(), static_cast<int>(a)) == ax.end()) ax.push_back(static_cast<int>(a));
      }
    }
  } r(var);
  r.visit(st.value);
  return r.axes;
}

namespace {

struct PadLanesDirective : NameField<&StageSchedule::pad_lanes> {
  PadLanesDirective() : NameField("pad_lanes") {}

  void check_set(const CheckContext& c) const override {
    const StageSchedule& ss = c.ss;
    const Stage& st = c.stage;
    const std::string where = c.where() + ": pad_lanes '" + ss.pad_lanes + "'";
    if (!st.reduce || st.is_arg_reduction() || ss.accumulator_at.empty() || ss.rfactor)
      throw ScheduleError(where +
                          " pads a reduction's accumulator tile: it needs a sum, prod, min or max "
                          "with accumulator_at (and no rfactor)");
    const auto k = std::find(st.vars.begin(), st.vars.end(), ss.pad_lanes) - st.vars.begin();
    if (static_cast<size_t>(k) == st.vars.size())
      throw ScheduleError(where + " is not a pure var of the stage; its vars: " + join(st.vars));
    const Dim& d = st.shape[static_cast<size_t>(k)];
    const int w = ss.update ? ss.update->vector_width : 0;
    if (!ss.update || ss.update->vectorize != ss.pad_lanes || w < 2)
      throw ScheduleError(where + " rounds up the update's vector lanes along it: the update must "
                                  "vectorize '" + ss.pad_lanes + "' itself with a vector width of 2 or more");
    if (d.is_symbolic() || d.value % w == 0)
      throw ScheduleError(where + " (extent " + d.str() + ") must be a static extent that is not whole " +
                          "vectors of " + std::to_string(w) + ": there is nothing to pad");
    if (ss.update->tile.count(ss.pad_lanes))
      throw ScheduleError(where + ": the update tiles '" + ss.pad_lanes +
                          "'; pad_lanes rounds up its vector split alone, so leave it untiled");
    for (const auto& [tensor, axes] : padded_reads(st, ss.pad_lanes)) {
      const bool cached = std::any_of(ss.cache.begin(), ss.cache.end(),
                                      [&](const CacheRead& cr) { return cr.tensor == tensor; });
      if (!cached)
        throw ScheduleError(where + " reads '" + tensor + "' along it through a packed copy: add a cache of '" +
                            tensor + "' (a clamped read in the micro-kernel would be a gather per vector)");
    }
  }

  bool schedules_reduction() const override { return true; }

  // The update's vector split is rounded up by its loops (Update.cpp passes
  // the var to apply_loops); the accumulator's init covers the same whole
  // vectors. Left to the region its consumer reads, the init set the real
  // columns alone, and the padded lanes started from whatever the stack
  // held: denormals there made every FMA a microcode assist (a batched
  // [33, 244, 110] @ [33, 110, 8], one thread: 38 ms against 1.2).
  void apply(ApplyContext& c) const override {
    const StageSchedule& ss = c.schedule();
    std::optional<Halide::Func> h = c.helper();
    if (ss.pad_lanes.empty() || !h || !ss.update) return;
    const int w = ss.update->vector_width;
    // Update.cpp vectorizes the init along it (rounded up); a second
    // vectorize here split it again into w * w lanes, an init (and an
    // accumulator row) of 256 floats for a 32-column tile.
    h->align_bounds(Halide::Var(ss.pad_lanes), w);
    // The packed copies (Halide returns the wrapper cache made) cover whole
    // vectors along the padded axes too: Halide bounds a copy made outside
    // the tile by the region the tile's consumer reads, and the rounded-up
    // lanes then read what the copy's buffer held before.
    for (const auto& [tensor, axes] : padded_reads(c.stage(), ss.pad_lanes)) {
      Halide::Func copy = c.stage_func(tensor).in(*h);
      const int r = static_cast<int>(c.program().tensor(tensor).shape.size());
      for (const int axis : axes) copy.align_bounds(copy.args()[static_cast<size_t>(r - 1 - axis)], w);
    }
  }

  void explain_body(const Program& p, const Stage& st, const StageSchedule& ss,
                    std::string& value) const override {
    if (ss.pad_lanes.empty() || !ss.update) return;
    std::string reads;
    for (const auto& [tensor, axes] : padded_reads(st, ss.pad_lanes)) reads += (reads.empty() ? "" : ", ") + tensor;
    value += "    [pad_lanes: " + ss.pad_lanes + " in whole vectors of " + std::to_string(ss.update->vector_width) +
             " past its extent, " + reads + " read clamped; the extra points are not stored]";
  }

 protected:
  // The update's vectorized pure var, where it leaves a part vector.
  std::vector<StageSchedule> proposals(const CheckContext& c) const override {
    if (!c.ss.update || c.ss.update->vectorize.empty()) return {};
    return variants(c.ss, std::vector<std::string>{c.ss.update->vectorize},
                    [](StageSchedule& v, const std::string& var) { v.pad_lanes = var; });
  }
};

}  // namespace

const Directive& pad_lanes_directive() {
  return instance<PadLanesDirective>();
}

}  // namespace pto::directives
