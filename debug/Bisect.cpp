#include "debug/Bisect.h"

#include <cstdio>
#include <optional>
#include <set>
#include <sstream>

#include "autotuner/TrialBuffers.h"
#include "autotuner/Worker.h"
#include "dsl/Error.h"
#include "schedules/ScheduleJson.h"
#include "schedules/Validate.h"
#include "schedules/defaults/Defaults.h"
#include "schedules/directives/Directive.h"

namespace pto::debug {
namespace {

using tuner::HostBuffer;
using tuner::max_rel_error;
using tuner::reference_schedule;
using tuner::rounding_tolerance;
using tuner::to_f32;

std::string fmt_err(double e) {
  if (e < 0) return "-";
  char b[32];
  std::snprintf(b, sizeof b, "%.2e", e);
  return b;
}

// Scratch of one output's shape and type.
HostBuffer scratch(const BufferRef& like) {
  return tuner::host_buffer(like.dtype, like.shape, "bisect: an output");
}

// Runs schedules of one program on fixed inputs and measures their error
// against the f64 reference.
class Evaluator {
 public:
  Evaluator(const Program& p, const Target& t, const std::vector<BufferRef>& inputs,
            const std::vector<BufferRef>& outputs)
      : p_(p), t_(t), inputs_(inputs) {
    if (outputs.size() != p.outputs().size())
      throw ShapeError("bisect: " + std::to_string(outputs.size()) +
                       " output buffers for program '" + p.name() + "' with " +
                       std::to_string(p.outputs().size()) + " outputs");
    for (const BufferRef& o : outputs) out_.push_back(scratch(o));
    std::vector<HostBuffer> ref;
    for (const BufferRef& o : outputs) ref.push_back(scratch(o));
    run(reference_schedule(p), ref);
    ref_ = to_f32(ref);
  }

  // The error of `s` (-1 where it does not validate or compile).
  double error(const Schedule& s) {
    try {
      validate(p_, s, &t_);
    } catch (const ScheduleError&) {
      return -1;
    }
    ++compiles;
    try {
      run(s, out_);
    } catch (const Error&) {
      return -1;
    }
    return max_rel_error(to_f32(out_), ref_);
  }

  int compiles = 0;

 private:
  void run(const Schedule& s, std::vector<HostBuffer>& outs) {
    std::vector<BufferRef> refs;
    for (HostBuffer& b : outs) refs.push_back(b.ref());
    Kernel(p_, s, t_).run(inputs_, refs);
  }

  const Program& p_;
  const Target& t_;
  const std::vector<BufferRef>& inputs_;
  std::vector<HostBuffer> out_;
  std::vector<std::vector<float>> ref_;
};

// The stages an entry names (its placement's and storage's consumer, the
// stage it is stored in or computed with): their loops must exist for it to
// validate, so their entries come along.
std::vector<std::string> referenced(const StageSchedule& e) {
  std::vector<std::string> r;
  if (e.compute.kind == Placement::Kind::At) r.push_back(e.compute.stage);
  if (e.store) r.push_back(e.store->stage);
  if (!e.store_in.empty()) r.push_back(e.store_in);
  if (e.compute_with) r.push_back(e.compute_with->stage);
  return r;
}

// The given schedule's entries of `stages` (and those they reference) on
// the plain loops.
Schedule with_entries(const Schedule& given, const std::vector<std::string>& stages,
                      std::set<std::string>* members) {
  Schedule r;
  r.options = given.options;
  std::vector<std::string> todo = stages;
  std::set<std::string> seen;
  while (!todo.empty()) {
    const std::string n = todo.back();
    todo.pop_back();
    if (!seen.insert(n).second) continue;
    const StageSchedule* e = given.find(n);
    if (!e) continue;
    r[n] = *e;
    for (const std::string& m : referenced(*e)) todo.push_back(m);
  }
  if (members) *members = seen;
  return r;
}

Schedule edit_entry(const Schedule& s, const std::string& stage,
                    const std::function<void(nlohmann::json&)>& f) {
  nlohmann::json j = schedule_to_json(s);
  f(j["stages"][stage]);
  return schedule_from_json(j);
}

}  // namespace

BisectResult bisect(const Program& p, const Schedule& given, const Target& t,
                    const std::vector<BufferRef>& inputs, const std::vector<BufferRef>& outputs,
                    const BisectOptions& o) {
  const auto say = [&](const std::string& line) {
    if (o.progress) o.progress(line);
  };
  BisectResult r;
  r.program = p.name();
  r.tolerance = o.tolerance > 0 ? o.tolerance : rounding_tolerance(p);
  validate(p, given, &t);
  // The schedule as its opt level compiles it, its entries explicit (level 3's
  // fast_math on every stage), searched at level 2.
  Schedule s = at_opt_level(p, given, t);
  s.options.opt_level = 2;

  Evaluator ev(p, t, inputs, outputs);
  r.error_given = ev.error(s);
  say("the schedule: error " + fmt_err(r.error_given));
  r.error_plain = ev.error(Schedule{});
  say("plain loops: error " + fmt_err(r.error_plain));
  const auto done = [&](const std::string& verdict) {
    r.compiles = ev.compiles;
    r.verdict = verdict;
    return r;
  };
  if (r.error_given < 0) return done("the schedule does not compile for this target");
  if (r.error_given <= r.tolerance)
    return done("no difference: the schedule's error " + fmt_err(r.error_given) +
                " is within the tolerance " + fmt_err(r.tolerance));
  if (r.error_plain > r.tolerance)
    return done(
        "the plain loops differ too (error " + fmt_err(r.error_plain) +
        "): the program's own types, not its schedule, make the difference; compare at a wider "
        "tolerance or in wider types");

  // Stages with an entry, in execution order; the first prefix that fails.
  std::vector<std::string> cands;
  for (const Stage& st : p.stages())
    if (const StageSchedule* e = s.find(st.name); e && !(*e == StageSchedule{}))
      cands.push_back(st.name);
  const auto prefix = [&](size_t k, std::set<std::string>* members = nullptr) {
    return with_entries(
        s, std::vector<std::string>(cands.begin(), cands.begin() + static_cast<long>(k)), members);
  };
  if (cands.empty())
    return done(
        "no stage has an entry: the schedule's options, not a stage's directives, make the "
        "difference");
  size_t lo = 0, hi = cands.size();
  double e_lo = r.error_plain, e_hi = r.error_given;
  while (hi - lo > 1) {
    size_t mid = (lo + hi) / 2;
    double e = ev.error(prefix(mid));
    while (e < 0 && mid + 1 < hi) e = ev.error(prefix(++mid));
    if (e < 0) break;  // no valid prefix between: the stages lo..hi go together
    say("stages up to '" + cands[mid - 1] + "' enabled: error " + fmt_err(e));
    if (e > r.tolerance)
      hi = mid, e_hi = e;
    else
      lo = mid, e_lo = e;
  }
  std::set<std::string> before, through;
  prefix(lo, &before);
  const Schedule failing = prefix(hi, &through);
  for (const Stage& st : p.stages())
    if (through.count(st.name) && !before.count(st.name) && s.find(st.name))
      r.group.push_back(st.name);
  r.stage = cands[hi - 1];
  r.error_before = e_lo;
  r.error_after = e_hi;

  // The fields of the culprit's entry: without each, and each alone.
  const nlohmann::json entry = schedule_to_json(failing)["stages"][r.stage];
  for (const auto& [key, value] : entry.items()) {
    BisectField f;
    f.field = key;
    const directives::Directive* d = directives::directive_for_field(key);
    f.directive = d ? std::string(d->name()) : key;
    f.error_without =
        ev.error(edit_entry(failing, r.stage, [&](nlohmann::json& e) { e.erase(key); }));
    f.error_alone = ev.error(edit_entry(failing, r.stage, [&](nlohmann::json& e) {
      e = {{key, value}};
    }));
    say("stage '" + r.stage + "' " + key + ": without " + fmt_err(f.error_without) + ", alone " +
        fmt_err(f.error_alone));
    r.fields.push_back(f);
  }
  std::string names;
  for (const BisectField& f : r.fields)
    if (f.culprit(r.tolerance)) names += (names.empty() ? "" : ", ") + f.field;
  std::string v = "stage '" + r.stage + "'";
  if (r.group.size() > 1) {
    v += " (enabled together with";
    for (const std::string& g : r.group)
      if (g != r.stage) v += " '" + g + "'";
    v += ")";
  }
  v += " takes the error from " + fmt_err(e_lo) + " to " + fmt_err(e_hi);
  v += names.empty()
           ? "; no single field of its entry does it alone (their combination does)"
           : "; its " + names + " " + (names.find(',') == std::string::npos ? "does" : "do");
  return done(v);
}

std::string BisectResult::report() const {
  std::ostringstream os;
  os << "bisect: program '" << program << "': error " << fmt_err(error_given)
     << " against the f64 reference"
     << " (tolerance " << fmt_err(tolerance) << "), plain loops " << fmt_err(error_plain) << ", "
     << compiles << " compiles\n";
  os << verdict << "\n";
  if (stage.empty()) return os.str();
  char line[160];
  std::snprintf(line, sizeof line, "  %-16s %-16s %10s %10s\n", "field", "directive", "without",
                "alone");
  os << line;
  for (const BisectField& f : fields) {
    std::snprintf(line, sizeof line, "  %-16s %-16s %10s %10s%s\n", f.field.c_str(),
                  f.directive.c_str(), fmt_err(f.error_without).c_str(),
                  fmt_err(f.error_alone).c_str(), f.culprit(tolerance) ? "   <- culprit" : "");
    os << line;
  }
  return os.str();
}

}  // namespace pto::debug
