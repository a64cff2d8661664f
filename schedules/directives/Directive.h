// One schedule directive, in one place.
//
// A directive is one field (or a few fields that only make sense together) of
// a stage's schedule entry: `cache`, `pipeline`, `accumulator_at`, ...
// Each implements this interface in its own file under schedules/directives/,
// and owns everything about it: its JSON field (parse / print), its check
// against the program and the target (a ScheduleError naming the stage, the
// directive, the value and the valid choices), its application to the Halide
// stage, its line in `pto explain`, and the values it can take for a stage
// (candidates(), the domain RandomSchedule, SearchSpace and the defaults draw
// from). The generic code (ScheduleJson, Validate, Explain, backends/Lower)
// loops over directives() instead of knowing each field, so adding a
// directive is one new file and one line in Registry.cpp (README.md here).
//
// Halide is external: this layer may include <Halide.h>. The lowering's state
// (the stage's Funcs, its consumers' loop levels) reaches a directive through
// ApplyContext, which backends/Lower.cpp implements.
#pragma once

#include <Halide.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dsl/Program.h"
#include "schedules/Schedule.h"
#include "schedules/Validate.h"
#include "target/Target.h"

namespace pto::directives {

// What a check (and candidates()) sees: one stage of a schedule, in its program.
struct CheckContext {
  const Program& program;
  const Schedule& schedule;
  const Target* target;  // null: the target-independent checks only
  const Stage& stage;
  const StageSchedule& ss;
  StagePrecision precision;  // the stage's types under `schedule`

  std::string where() const { return "stage '" + stage.name + "'"; }
  // opt_level 0 ignores the directives that place and shape loops.
  bool optimizing() const { return schedule.options.opt_level != 0; }
};

// The lowering's side of one stage, implemented by backends/Lower.cpp.
class ApplyContext {
 public:
  virtual ~ApplyContext() = default;
  virtual const Program& program() const = 0;
  virtual const Target& target() const = 0;
  virtual const Stage& stage() const = 0;
  // The stage's entry (an empty one when it has none, or at opt_level 0).
  virtual const StageSchedule& schedule() const = 0;
  // Another stage's entry (null when it has none, or at opt_level 0).
  virtual const StageSchedule* schedule_of(const std::string& stage) const = 0;
  // The stage's Func: what its consumers read.
  virtual Halide::Func func() = 0;
  // The Func that runs the stage's reduction when that is not func():
  // argmin/argmax tuples "<stage>__arg", accumulators "<stage>__acc".
  virtual std::optional<Halide::Func> helper() = 0;
  // The loop level of `at` (a loop of a consumer stage), in the consumer's
  // last definition (its update, or its helper's).
  virtual Halide::LoopLevel consumer_loop(const Placement& at) = 0;
  // An input of the program; nullopt when `tensor` is a stage.
  virtual std::optional<Halide::ImageParam> input(const std::string& tensor) = 0;
  // The Func of stage `name`.
  virtual Halide::Func stage_func(const std::string& name) = 0;
  // The lanes of partials of reduction `reduction` when a stage is computed
  // with it (directives/ComputeWith.h): the Func its steps update.
  virtual Halide::Func fused_partials(const std::string& reduction) = 0;
  // The Func whose update runs stage `stage`'s reduction: its helper (an
  // `__acc` accumulator, order keys of an IEEE min / max) or its Func.
  virtual Halide::Func reducer_of(const std::string& stage) = 0;
  // The extent of a dim as a Halide Expr (a symbolic size: the input dim it is bound to).
  virtual Halide::Expr extent(const Dim& d) = 0;

  // Is func() a pipeline output, realized into the caller's buffer? Halide
  // takes a Func's loads to be as aligned as its own allocations, so vector
  // loads of such a Func (an update reading its own values) may fault.
  virtual bool caller_buffer() const = 0;

  // The Func whose update runs the reduction: helper() or func().
  Halide::Func reducer() { return reducer_of(stage().name); }
  // Does func() itself hold the reduction's update (no helper)?
  bool update_in_func() { return stage().reduce.has_value() && !helper(); }
};

// What the explain printer offers a directive that prints a reduction's
// update itself (accumulator tiles, intermediates of partial reductions).
class ExplainContext {
 public:
  virtual ~ExplainContext() = default;
  virtual void line(int depth, const std::string& text) = 0;
  // The loops of `ls` for `stage` (update or pure), with `body` innermost;
  // `inner` is printed inside loop `inner_at` before the rest of its body.
  virtual void nest(const Stage& stage, const LoopSchedule& ls, bool update, int depth,
                    const std::string& body, const std::string& inner_at = "",
                    const std::function<void(int)>& inner = {}) = 0;
  // Loops printed next are those of an accumulator tile (bounded by it).
  virtual void set_in_tile(bool in_tile) = 0;
};

// The pieces of a reduction's update line, for ExplainContext users.
struct UpdateText {
  std::string lhs;             // "C(i, j)"
  std::string init;            // "0" / "init(max)"
  std::string value;           // the reduction body, annotated by the directives
  const LoopSchedule* update;  // the update's loop directives
  Stage update_stage;          // the stage as its update runs (update_stage() in DotPairs.h)
};

class Directive {
 public:
  explicit Directive(std::string name) : name_(std::move(name)) {}
  virtual ~Directive() = default;

  // Its name in messages and docs, and the JSON keys it owns in a stage entry.
  std::string_view name() const { return name_; }
  virtual std::vector<std::string_view> fields() const { return {name()}; }

  // Reads its fields from a stage entry (`j` is the whole entry, `path` its
  // JSON path, e.g. "stages.C"); strict, see ScheduleJson.h. The default
  // reads the one field name(), where present, through parse_value().
  virtual void parse(const nlohmann::json& j, StageSchedule& ss, const std::string& path) const {
    if (j.contains(name_)) parse_value(j[name_], ss, path + "." + name_);
  }
  // Writes its fields into the entry, only where they differ from the default.
  virtual void print(const StageSchedule& ss, nlohmann::json& j) const = 0;

  // Throws ScheduleError when the stage's value of this directive cannot run.
  virtual void check(const CheckContext& c) const = 0;

  // Applies it to the Halide stage. Called in registry order after the Funcs
  // are defined.
  virtual void apply(ApplyContext& c) const {}
  // Does apply() apply to an inline stage (only the placement does)?
  virtual bool applies_to_inline() const { return false; }
  // Does apply() schedule the Func that runs the stage's reduction (its
  // helper Func when it has one)? A helper is scheduled before the stage's
  // own Func, as lowering always did: the order of Halide's scheduling
  // calls decides the names it generates.
  virtual bool schedules_reduction() const { return false; }

  // Does it replace the stage's whole loop nest with one of its own
  // (online_softmax, amx)? The tuner's cost model cannot rank such a
  // structure from loop features; its model strategy measures each once,
  // applied wherever it fits.
  virtual bool owns_loops() const { return false; }

  // Appended to the stage's head line in explain (", async").
  virtual std::string explain_head(const StageSchedule& ss) const { return ""; }
  // Lines printed inside loop `loop` of the stage's pure (update = false) or
  // update definition, before what runs in it.
  virtual std::vector<std::string> explain_loop(const Stage& st, const StageSchedule& ss,
                                                const std::string& loop, bool update) const {
    return {};
  }
  // Annotates the reduction body printed in explain (`value` is its text).
  virtual void explain_body(const Program& p, const Stage& st, const StageSchedule& ss,
                            std::string& value) const {}
  // Prints the stage's reduction update itself (true) instead of the plain
  // update loops; at most one directive of a stage does.
  virtual bool explain_update(ExplainContext& e, const Stage& st, const StageSchedule& ss,
                              const UpdateText& u, int depth) const {
    return false;
  }

  // The values this directive can take for the stage given the rest of its
  // schedule: copies of the stage's entry with the directive set to each
  // value that passes check(). The base enumerates proposals() and filters.
  std::vector<StageSchedule> candidates(const CheckContext& c) const;

 protected:
  // The value `v` of field name() (at JSON path `path`), for the default parse().
  virtual void parse_value(const nlohmann::json& v, StageSchedule& ss,
                           const std::string& path) const {}
  // Raw values to try (copies of c.ss with this directive set); may include invalid ones.
  virtual std::vector<StageSchedule> proposals(const CheckContext& c) const { return {}; }

 private:
  std::string name_;
};

// The one instance of directive class D: each file's `<name>_directive()`.
template <class D>
const Directive& instance() {
  static const D d;
  return d;
}

// Copies of `ss`, one per element of `values`, each with `set(copy, value)`
// applied: what most proposals() return.
template <class Values, class Set>
std::vector<StageSchedule> variants(const StageSchedule& ss, const Values& values, Set set) {
  std::vector<StageSchedule> r;
  for (const auto& v : values) {
    StageSchedule e = ss;
    set(e, v);
    r.push_back(std::move(e));
  }
  return r;
}

// Every directive, in the order lowering applies them (and validation and
// explain visit them). Registry.cpp.
const std::vector<const Directive*>& directives();
// The directive that owns JSON key `field` of a stage entry, or null.
const Directive* directive_for_field(std::string_view field);

// Does `d` accept `ss` as the entry of stage `st` (its check alone; the
// rest of `s` as it is)? For generators that build a stage's entry piece by piece.
bool accepts(const Directive& d, const Program& p, const Schedule& s, const Target* t,
             const Stage& st, const StageSchedule& ss);

// ", "-joined, for messages.
std::string join(const std::vector<std::string>& v);

}  // namespace pto::directives
