// The registered directives. Order matters: lowering applies them in this
// order (placement, then packed copies, then loops, the update's loops
// before the transformations of that update; a helper Func's directives
// first, see Directive::schedules_reduction), validation checks them in it,
// and explain's head line lists them in it.
#include "dsl/Error.h"
#include "schedules/directives/AccumulatorAt.h"
#include "schedules/directives/Amx.h"
#include "schedules/directives/Cache.h"
#include "schedules/directives/ComputeWith.h"
#include "schedules/directives/Device.h"
#include "schedules/directives/Directive.h"
#include "schedules/directives/DotPairs.h"
#include "schedules/directives/FastMath.h"
#include "schedules/directives/Loops.h"
#include "schedules/directives/OnlineSoftmax.h"
#include "schedules/directives/PadLanes.h"
#include "schedules/directives/Pipeline.h"
#include "schedules/directives/Placement.h"
#include "schedules/directives/Precision.h"
#include "schedules/directives/RFactor.h"
#include "schedules/directives/SkipPadding.h"
#include "schedules/directives/Specialize.h"
#include "schedules/directives/StoreIn.h"
#include "schedules/directives/Update.h"

namespace pto::directives {

const std::vector<const Directive*>& directives() {
  // One line per directive (clang-format off keeps them so).
  // clang-format off
  static const std::vector<const Directive*> all = {
      &precision_directive(),
      &placement_directive(),
      &cache_directive(),
      &specialize_directive(),
      &loops_directive(),
      &accumulator_at_directive(),
      &update_directive(),
      &pad_lanes_directive(),
      &skip_padding_directive(),
      &dot_pairs_directive(),
      &rfactor_directive(),
      &online_softmax_directive(),
      &amx_directive(),
      &compute_with_directive(),
      &store_in_directive(),
      &pipeline_directive(),
      &device_directive(),
      &fast_math_directive(),
  };
  // clang-format on
  return all;
}

const Directive* directive_for_field(std::string_view field) {
  for (const Directive* d : directives())
    for (std::string_view f : d->fields())
      if (f == field) return d;
  return nullptr;
}

std::vector<StageSchedule> Directive::candidates(const CheckContext& c) const {
  std::vector<StageSchedule> r;
  for (const StageSchedule& v : proposals(c)) {
    if (accepts(*this, c.program, c.schedule, c.target, c.stage, v)) r.push_back(v);
  }
  return r;
}

bool accepts(const Directive& d, const Program& p, const Schedule& s, const Target* t,
             const Stage& st, const StageSchedule& ss) {
  Schedule with = s;
  with.stages[st.name] = ss;
  const CheckContext c{p, with, t, st, with.stages.at(st.name), stage_precision(p, with, st.name)};
  try {
    d.check(c);
    return true;
  } catch (const ScheduleError&) {
    return false;
  }
}

std::string join(const std::vector<std::string>& v) {
  std::string r;
  for (const auto& s : v) r += (r.empty() ? "" : ", ") + s;
  return r;
}

}  // namespace pto::directives
