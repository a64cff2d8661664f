// Named, ready-made programs (matmul, matmul_bias_relu, ...) with size
// parameters, used by the `pto` command, the benchmarks, the tuner and tests:
// `pto explain matmul_bias_relu --set M=256`.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "dsl/Program.h"

namespace pto {

struct WorkloadInfo {
  std::string name;
  std::string summary;
  std::map<std::string, int64_t> defaults;  // size parameters and their defaults
};
const std::vector<WorkloadInfo>& workloads();

// Builds workload `name`; `sizes` overrides defaults; a value of 0 makes that size symbolic.
// Throws DefinitionError for an unknown workload or size name.
Program make_workload(const std::string& name, const std::map<std::string, int64_t>& sizes = {});

// Loads a program: a workload name, or a path to a program JSON file.
Program load_program(const std::string& name_or_path, const std::map<std::string, int64_t>& sizes = {});

}  // namespace pto
