// Strict readers of schedule JSON values, shared by ScheduleJson.cpp and the
// directives' parse(): a wrong type or a bad value is a ScheduleError naming
// the JSON path and what is expected (ScheduleJson.h).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "dsl/Type.h"
#include "schedules/Schedule.h"

namespace pto::directives::json {

[[noreturn]] void fail(const std::string& path, const std::string& msg);
// A value for an error message: short, and printable even when a string
// holds invalid UTF-8 (which strict dump() rejects with its own exception).
std::string show(const nlohmann::json& j);
void check_keys(const nlohmann::json& j, const std::string& path,
                std::initializer_list<const char*> allowed);
void check_keys(const nlohmann::json& j, const std::string& path,
                const std::vector<std::string>& allowed);
std::string get_string(const nlohmann::json& j, const std::string& path);
int64_t get_int(const nlohmann::json& j, const std::string& path, int64_t lo, int64_t hi);
bool get_bool(const nlohmann::json& j, const std::string& path);
std::vector<std::string> get_names(const nlohmann::json& j, const std::string& path);
DType get_dtype(const nlohmann::json& j, const std::string& path);

}  // namespace pto::directives::json
