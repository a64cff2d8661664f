#include "schedules/directives/FastMath.h"

#include "schedules/directives/Json.h"

namespace pto::directives {
namespace {

struct FastMathDirective : Directive {
  FastMathDirective() : Directive("fast_math") {}

  void parse_value(const nlohmann::json& v, StageSchedule& ss,
                   const std::string& path) const override {
    ss.fast_math = json::get_bool(v, path);
  }
  void print(const StageSchedule& ss, nlohmann::json& js) const override {
    if (ss.fast_math) js["fast_math"] = true;
  }

  // Any stage may drop the guards: lowering reads the flag per stage (an
  // inline stage's expressions are lowered inside its consumers, so it
  // follows the consumer that inlines it).
  void check(const CheckContext&) const override {}

  std::string explain_head(const StageSchedule& ss) const override {
    return ss.fast_math ? ", fast-math" : "";
  }
};

}  // namespace

const Directive& fast_math_directive() {
  return instance<FastMathDirective>();
}

}  // namespace pto::directives
