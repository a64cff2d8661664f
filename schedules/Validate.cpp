#include "schedules/Validate.h"

#include <set>

#include "schedules/directives/Directive.h"

namespace pto {

void validate(const Program& p, const Schedule& s, const Target* target) {
  std::vector<std::string> stage_names;
  for (const Stage& st : p.stages()) stage_names.push_back(st.name);
  for (const auto& [name, ss] : s.stages) {
    if (!p.find_stage(name)) {
      if (p.has_tensor(name))
        throw ScheduleError("schedule names '" + name + "', an input of program '" + p.name() +
                            "'; only stages can be scheduled: " + directives::join(stage_names));
      throw ScheduleError("schedule names unknown stage '" + name + "'; stages of program '" + p.name() +
                          "': " + directives::join(stage_names));
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
  // Each stage's directives (schedules/directives/).
  for (const auto& [name, ss] : s.stages) {
    const directives::CheckContext c{p, s, target, p.stage(name), ss, stage_precision(p, s, name)};
    for (const directives::Directive* d : directives::directives()) d->check(c);
  }

  if (s.options.opt_level < 0 || s.options.opt_level > 3)
    throw ScheduleError("options.opt_level " + std::to_string(s.options.opt_level) + " is outside 0-3");
  if (s.options.threads < 0) throw ScheduleError("options.threads must be >= 0");
}

}  // namespace pto
