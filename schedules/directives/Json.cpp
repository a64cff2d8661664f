#include "schedules/directives/Json.h"

#include "dsl/Error.h"

namespace pto::directives::json {
using nlohmann::json;

void fail(const std::string& path, const std::string& msg) {
  throw ScheduleError("schedule JSON " + path + ": " + msg);
}

std::string show(const json& j) {
  std::string s = j.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return s;
}

void check_keys(const json& j, const std::string& path, const std::vector<std::string>& allowed) {
  if (!j.is_object()) fail(path, "must be an object, got " + std::string(j.type_name()));
  for (const auto& [k, v] : j.items()) {
    bool ok = false;
    for (const std::string& a : allowed) ok |= k == a;
    if (!ok) {
      std::string valid;
      for (const std::string& a : allowed) valid += (valid.empty() ? "" : ", ") + a;
      fail(path, "unknown key '" + k + "'; valid keys: " + valid);
    }
  }
}
void check_keys(const json& j, const std::string& path,
                std::initializer_list<const char*> allowed) {
  check_keys(j, path, std::vector<std::string>(allowed.begin(), allowed.end()));
}

std::string get_string(const json& j, const std::string& path) {
  if (!j.is_string()) fail(path, "must be a string, got " + show(j));
  return j.get<std::string>();
}
int64_t get_int(const json& j, const std::string& path, int64_t lo, int64_t hi) {
  if (!j.is_number_integer()) fail(path, "must be an integer, got " + show(j));
  // Unsigned values past int64 would wrap to negative numbers in get<int64_t>.
  if (j.is_number_unsigned() && j.get<uint64_t>() > static_cast<uint64_t>(hi))
    fail(path, "value " + show(j) + " is outside [" + std::to_string(lo) + ", " +
                   std::to_string(hi) + "]");
  const int64_t v = j.get<int64_t>();
  if (v < lo || v > hi)
    fail(path, "value " + std::to_string(v) + " is outside [" + std::to_string(lo) + ", " +
                   std::to_string(hi) + "]");
  return v;
}
bool get_bool(const json& j, const std::string& path) {
  if (!j.is_boolean()) fail(path, "must be true or false, got " + show(j));
  return j.get<bool>();
}
std::vector<std::string> get_names(const json& j, const std::string& path) {
  if (!j.is_array()) fail(path, "must be a list of loop names");
  std::vector<std::string> r;
  for (size_t i = 0; i < j.size(); ++i)
    r.push_back(get_string(j[i], path + "[" + std::to_string(i) + "]"));
  return r;
}
DType get_dtype(const json& j, const std::string& path) {
  try {
    return parse_dtype(get_string(j, path));
  } catch (const DTypeError& e) {
    fail(path, e.what());
  }
}

}  // namespace pto::directives::json
