#include "schedules/ScheduleJson.h"

#include <algorithm>
#include <fstream>
#include <initializer_list>
#include <sstream>

#include "dsl/Error.h"
#include "schedules/directives/Directive.h"
#include "schedules/directives/Json.h"

namespace pto {
using nlohmann::json;

namespace {

using directives::json::check_keys;
using directives::json::fail;
using directives::json::get_bool;
using directives::json::get_int;
using directives::json::show;

// The keys of a stage entry: the union of the directives' fields.
const std::vector<std::string>& stage_keys() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> k;
    for (const directives::Directive* d : directives::directives())
      for (std::string_view f : d->fields()) k.emplace_back(f);
    return k;
  }();
  return keys;
}

// Schedules are a few levels deep; much deeper input is hostile, and
// nlohmann's dump() (used in messages) recurses once per level.
constexpr int kMaxDepth = 64;

// Nesting depth of `j`, stopping once past kMaxDepth; iterative, so that any depth is safe.
int depth(const json& j) {
  std::vector<std::pair<const json*, int>> todo{{&j, 1}};
  int deepest = 0;
  while (!todo.empty()) {
    const auto [n, d] = todo.back();
    todo.pop_back();
    deepest = std::max(deepest, d);
    if (deepest > kMaxDepth) return deepest;
    if (n->is_structured())
      for (const auto& c : *n) todo.emplace_back(&c, d + 1);
  }
  return deepest;
}

}  // namespace

json schedule_to_json(const Schedule& s) {
  json j;
  j["schema"] = kScheduleSchemaVersion;
  const ScheduleOptions d;
  json o = json::object();
  o["opt_level"] = s.options.opt_level;
  if (s.options.bounds_checks != d.bounds_checks) o["bounds_checks"] = s.options.bounds_checks;
  if (s.options.threads != d.threads) o["threads"] = s.options.threads;
  if (s.options.profile) o["profile"] = true;
  if (s.options.check_numerics) o["check_numerics"] = true;
  j["options"] = o;
  j["stages"] = json::object();
  for (const auto& [name, st] : s.stages) {
    json js = json::object();
    for (const directives::Directive* d : directives::directives()) d->print(st, js);
    j["stages"][name] = js;
  }
  return j;
}

Schedule schedule_from_json(const json& j) {
  Schedule s;
  if (depth(j) > kMaxDepth) fail("(top)", "is nested deeper than " + std::to_string(kMaxDepth) + " levels");
  check_keys(j, "(top)", {"schema", "options", "stages"});
  if (!j.contains("schema")) fail("(top)", "missing \"schema\" (expected " + std::to_string(kScheduleSchemaVersion) + ")");
  if (get_int(j["schema"], "schema", 0, 1 << 20) != kScheduleSchemaVersion)
    fail("schema", "version " + show(j["schema"]) + " is not supported; expected " +
                       std::to_string(kScheduleSchemaVersion));
  if (j.contains("options")) {
    const json& o = j["options"];
    check_keys(o, "options", {"opt_level", "bounds_checks", "threads", "profile", "check_numerics"});
    if (o.contains("opt_level")) s.options.opt_level = static_cast<int>(get_int(o["opt_level"], "options.opt_level", 0, 3));
    if (o.contains("bounds_checks")) s.options.bounds_checks = get_bool(o["bounds_checks"], "options.bounds_checks");
    if (o.contains("threads")) s.options.threads = static_cast<int>(get_int(o["threads"], "options.threads", 0, 4096));
    if (o.contains("profile")) s.options.profile = get_bool(o["profile"], "options.profile");
    if (o.contains("check_numerics")) s.options.check_numerics = get_bool(o["check_numerics"], "options.check_numerics");
  }
  if (j.contains("stages")) {
    const json& stages = j["stages"];
    if (!stages.is_object()) fail("stages", "must map stage names to stage schedules");
    for (const auto& [name, js] : stages.items()) {
      const std::string path = "stages." + name;
      check_keys(js, path, stage_keys());
      StageSchedule st;
      for (const directives::Directive* d : directives::directives()) d->parse(js, st, path);
      s.stages[name] = st;
    }
  }
  return s;
}

std::string schedule_to_json_string(const Schedule& s, int indent) {
  try {
    return schedule_to_json(s).dump(indent);
  } catch (const json::exception& e) {  // a name that is not valid UTF-8
    throw ScheduleError(std::string("schedule cannot be written as JSON: ") + e.what());
  }
}

Schedule schedule_from_json_string(const std::string& text) {
  json j;
  try {
    // Reject deep nesting while parsing, before anything recurses over it.
    j = json::parse(text, [](int d, json::parse_event_t, json&) {
      if (d > kMaxDepth)
        throw ScheduleError("schedule JSON is nested deeper than " + std::to_string(kMaxDepth) + " levels");
      return true;
    });
  } catch (const json::exception& e) {
    throw ScheduleError(std::string("schedule JSON does not parse: ") + e.what());
  }
  return schedule_from_json(j);
}

Schedule load_schedule_file(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw ScheduleError("cannot open schedule file '" + path + "'");
  std::stringstream ss;
  ss << f.rdbuf();
  try {
    return schedule_from_json_string(ss.str());
  } catch (const ScheduleError& e) {
    throw ScheduleError(path + ": " + e.what());
  }
}

}  // namespace pto
