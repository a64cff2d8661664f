// JSON form of Programs, so that a Program can travel to an autotuner worker
// process, be stored in the tuning database and be fingerprinted.
// Loading re-validates everything (a hostile file gives a typed error, never a crash).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "dsl/Program.h"

namespace pto {

inline constexpr int kProgramSchemaVersion = 1;

nlohmann::json program_to_json(const Program& p);
Program program_from_json(const nlohmann::json& j);  // throws DefinitionError
std::string program_to_json_string(const Program& p, int indent = -1);
Program program_from_json_string(const std::string& s);

nlohmann::json expr_to_json(const Expr& e);
Expr expr_from_json(const nlohmann::json& j);

// Structural hash of the program (names of stages included, input data excluded).
std::string program_fingerprint(const Program& p);

}  // namespace pto
