// JSON form of Schedules (schema-versioned, human-editable).
//
// Parsing is strict: an unknown key, a wrong type or a bad value is a
// ScheduleError naming the JSON path and the valid choices, so a typo in a
// hand-edited file is reported instead of silently ignored. Malformed or hostile
// input never crashes (fuzzed in test/cpp/test_schedule_fuzz.cpp).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "schedules/Schedule.h"

namespace pto {

nlohmann::json schedule_to_json(const Schedule& s);
Schedule schedule_from_json(const nlohmann::json& j);
std::string schedule_to_json_string(const Schedule& s, int indent = 2);
Schedule schedule_from_json_string(const std::string& text);
Schedule load_schedule_file(const std::string& path);

}  // namespace pto
