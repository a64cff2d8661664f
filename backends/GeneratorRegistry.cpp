#include "backends/GeneratorRegistry.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "schedules/ScheduleJson.h"

namespace pto {
namespace {

std::string join(const std::vector<std::string>& v) {
  std::string r;
  for (const auto& s : v) r += (r.empty() ? "" : ", ") + s;
  return r.empty() ? "none" : r;
}

bool is_identifier(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}

}  // namespace

GeneratorRegistry& GeneratorRegistry::global() {
  static GeneratorRegistry r;
  return r;
}

void GeneratorRegistry::add(const std::string& name, Builder build) {
  if (!is_identifier(name)) throw Error("kernel name '" + name + "' must be a C identifier (letters, digits, _)");
  for (const auto& [n, b] : entries_)
    if (n == name) throw Error("kernel '" + name + "' is registered twice");
  entries_.emplace_back(name, std::move(build));
}

std::vector<std::string> GeneratorRegistry::names() const {
  std::vector<std::string> r;
  for (const auto& [n, b] : entries_) r.push_back(n);
  return r;
}

std::vector<KernelSpec> GeneratorRegistry::build(const std::vector<std::string>& names) const {
  std::vector<KernelSpec> r;
  for (const std::string& want : names.empty() ? this->names() : names) {
    const auto it = std::find_if(entries_.begin(), entries_.end(), [&](const auto& e) { return e.first == want; });
    if (it == entries_.end())
      throw Error("unknown kernel '" + want + "'; this generator registers: " + join(this->names()));
    r.push_back({want, it->second(), {}});
  }
  return r;
}

void apply_schedule_file(const std::string& path, std::vector<KernelSpec>& kernels) {
  if (path.ends_with(".db") || path.ends_with(".sqlite"))
    throw ScheduleError("schedules '" + path + "': reading a tuning database needs the autotuner layer, which this "
                        "build does not have; give a JSON file ({\"<kernel>\": <schedule>})");
  std::ifstream f(path);
  if (!f) throw ScheduleError("cannot open schedules file '" + path + "'");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(f);
  } catch (const nlohmann::json::exception& e) {
    throw ScheduleError("schedules file '" + path + "' is not valid JSON: " + e.what());
  }
  if (!j.is_object()) throw ScheduleError("schedules file '" + path + "' must hold an object {\"<kernel>\": <schedule>}");
  std::vector<std::string> known;
  for (const auto& k : kernels) known.push_back(k.name);
  for (const auto& [kernel, value] : j.items()) {
    const auto it = std::find_if(kernels.begin(), kernels.end(), [&](const KernelSpec& k) { return k.name == kernel; });
    if (it == kernels.end())
      throw ScheduleError("schedules file '" + path + "' names kernel '" + kernel + "', which is not built; kernels: " + join(known));
    auto parse = [&](const nlohmann::json& s, const std::string& target) {
      try {
        it->schedules[target] = schedule_from_json(s);
      } catch (const ScheduleError& e) {
        throw ScheduleError("schedules file '" + path + "', kernel '" + kernel + "'" +
                            (target == "*" ? "" : ", target '" + target + "'") + ": " + e.what());
      }
    };
    if (value.is_object() && value.contains("schema")) {
      parse(value, "*");
    } else if (value.is_object()) {
      for (const auto& [target, s] : value.items()) parse(s, target);
    } else {
      throw ScheduleError("schedules file '" + path + "', kernel '" + kernel + "': expected a schedule object");
    }
  }
}

}  // namespace pto
