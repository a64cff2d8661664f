#include "schedules/directives/SkipPadding.h"

#include <algorithm>

#include "dsl/Error.h"
#include "dsl/ZeroPadding.h"
#include "schedules/directives/Json.h"
#include "schedules/directives/NameField.h"

namespace pto::directives {

SkippedPadding skipped_padding(const Program& p, const Stage& st, const StageSchedule* ss) {
  SkippedPadding r{st.value, std::nullopt};
  if (!ss || ss->skip_padding.empty()) return r;
  r.where = padding_predicate(p, st, ss->skip_padding);
  if (const auto through = read_through_padding(p, st, ss->skip_padding)) r.value = *through;
  return r;
}

bool read_through_padding_of(const Program& p, const std::string& source,
                             const std::function<const StageSchedule*(const std::string&)>& schedule_of) {
  for (const Stage& st : p.stages()) {
    const StageSchedule* ss = schedule_of(st.name);
    if (!ss || ss->skip_padding.empty() || !read_through_padding(p, st, ss->skip_padding)) continue;
    const auto reads = padded_read(p, st)->stage->reads();
    if (std::find(reads.begin(), reads.end(), source) != reads.end()) return true;
  }
  return false;
}

namespace {

struct SkipPaddingDirective : NameField<&StageSchedule::skip_padding> {
  SkipPaddingDirective() : NameField("skip_padding") {}

  void check_set(const CheckContext& c) const override {
    const StageSchedule& ss = c.ss;
    const std::string where = c.where();
    const auto pr = padded_read(c.program, c.stage);
    if (!pr)
      throw ScheduleError(
          where +
          ": skip_padding needs a sum whose body is a product with a factor read from a "
          "zero-padded stage (defined as select(inside, value, 0), like conv2d_nhwc's _pad); '" +
          c.stage.name + "' has none");
    for (const std::string& d : ss.skip_padding)
      if (std::find(pr->dims.begin(), pr->dims.end(), d) == pr->dims.end())
        throw ScheduleError(where + ": skip_padding dim '" + d + "' is not a padded dim of '" +
                            pr->stage->name + "'; padded dims: " + join(pr->dims));
    if (ss.rfactor)
      throw ScheduleError(where +
                          ": skip_padding and rfactor cannot be combined; drop one of them");
  }

  // The reduction body, with the condition skip_padding puts on its steps.
  void explain_body(const Program& p, const Stage& st, const StageSchedule& ss,
                    std::string& value) const override {
    if (ss.skip_padding.empty()) return;
    const SkippedPadding sp = skipped_padding(p, st, &ss);
    value = to_string(sp.value);
    if (sp.where) value += "    where " + to_string(*sp.where);
  }

 protected:
  // Each padded dim alone, and all of them.
  std::vector<StageSchedule> proposals(const CheckContext& c) const override {
    const auto pr = padded_read(c.program, c.stage);
    if (!pr) return {};
    std::vector<std::vector<std::string>> dim_sets;
    for (const std::string& d : pr->dims) dim_sets.push_back({d});
    dim_sets.push_back(pr->dims);
    return variants(c.ss, dim_sets, [](StageSchedule& v, const std::vector<std::string>& dims) {
      v.skip_padding = dims;
    });
  }
};

}  // namespace

const Directive& skip_padding_directive() {
  return instance<SkipPaddingDirective>();
}

}  // namespace pto::directives
