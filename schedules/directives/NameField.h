// The shape of the directives whose one JSON field is a name or a list of
// names (accumulator_at: a loop; dot_pairs: a reduction variable;
// skip_padding: dims), empty when unset: the field's parse and print, and
// the rule that an unset directive has nothing to check. Each such directive
// supplies check_set() alone.
#pragma once

#include <string>
#include <type_traits>
#include <vector>

#include "schedules/directives/Directive.h"
#include "schedules/directives/Json.h"

namespace pto::directives {

template <auto Member>
struct NameField : Directive {
  using Directive::Directive;

  void parse_value(const nlohmann::json& v, StageSchedule& ss,
                   const std::string& path) const override {
    using T = std::remove_reference_t<decltype(ss.*Member)>;
    if constexpr (std::is_same_v<T, std::string>)
      ss.*Member = json::get_string(v, path);
    else
      ss.*Member = json::get_names(v, path);
  }
  void print(const StageSchedule& ss, nlohmann::json& js) const override {
    if (!(ss.*Member).empty()) js[std::string(name())] = ss.*Member;
  }
  void check(const CheckContext& c) const final {
    if (!(c.ss.*Member).empty()) check_set(c);
  }

 protected:
  // check() of a directive that is set.
  virtual void check_set(const CheckContext& c) const = 0;
};

}  // namespace pto::directives
