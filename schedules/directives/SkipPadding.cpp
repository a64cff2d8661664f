#include "schedules/directives/SkipPadding.h"

#include <algorithm>

#include "dsl/Error.h"
#include "dsl/ZeroPadding.h"
#include "schedules/directives/Json.h"

namespace pto::directives {

SkippedPadding skipped_padding(const Program& p, const Stage& st, const StageSchedule* ss) {
  SkippedPadding r{st.value, std::nullopt};
  if (!ss || ss->skip_padding.empty()) return r;
  r.where = padding_predicate(p, st, ss->skip_padding);
  if (const auto through = read_through_padding(p, st, ss->skip_padding)) r.value = *through;
  return r;
}

namespace {

class SkipPaddingDirective : public Directive {
 public:
  std::string_view name() const override { return "skip_padding"; }

  void parse(const nlohmann::json& js, StageSchedule& ss, const std::string& path) const override {
    if (js.contains("skip_padding"))
      ss.skip_padding = json::get_names(js["skip_padding"], path + ".skip_padding");
  }
  void print(const StageSchedule& ss, nlohmann::json& js) const override {
    if (!ss.skip_padding.empty()) js["skip_padding"] = ss.skip_padding;
  }

  void check(const CheckContext& c) const override {
    const StageSchedule& ss = c.ss;
    if (ss.skip_padding.empty()) return;
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
    std::vector<StageSchedule> r;
    const auto pr = padded_read(c.program, c.stage);
    if (!pr) return r;
    for (const std::string& d : pr->dims) {
      StageSchedule v = c.ss;
      v.skip_padding = {d};
      r.push_back(v);
    }
    StageSchedule all = c.ss;
    all.skip_padding = pr->dims;
    r.push_back(all);
    return r;
  }
};

}  // namespace

const Directive& skip_padding_directive() {
  static const SkipPaddingDirective d;
  return d;
}

}  // namespace pto::directives
