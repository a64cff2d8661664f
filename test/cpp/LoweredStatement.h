// The lowered Halide statement of a program under a schedule, as lines: for
// tests that check what a directive makes of the loops (an allocation's
// size, a vector's width, how an init is stored), which the numbers a kernel
// computes cannot show.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "backends/Lower.h"

namespace pto::test {

inline std::vector<std::string> lowered_statement(const Program& p, const Schedule& s,
                                                  const Target& t) {
  LoweredPipeline lp = lower(p, s, t);
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("pto-test-" + std::to_string(getpid()) + "-" + p.name() + ".stmt"))
                               .string();
  lp.pipeline.compile_to_lowered_stmt(path, lp.arguments(), Halide::StmtOutputFormat::Text,
                                      lp.target);
  std::ifstream f(path);
  std::filesystem::remove(path);  // the open stream keeps it readable
  std::vector<std::string> lines;
  for (std::string line; std::getline(f, line);) lines.push_back(line);
  return lines;
}

}  // namespace pto::test
