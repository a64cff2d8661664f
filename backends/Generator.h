// Ahead-of-time generation: one static library + headers per kernel and target.
//
// The library contains the Halide runtime, so an application links it with
// only -lpthread -ldl (no libHalide, no PTO). Next to Halide's own header
// (`<name>.h`, halide_buffer_t API) we write `<name>_pto.h`: a plain C API
// over raw pointers and sizes, which installs an error handler so that a
// failing call returns a non-zero code and a message instead of aborting.
#pragma once

#include <string>

#include "backends/Target.h"
#include "dsl/Program.h"
#include "schedules/Schedule.h"

namespace pto {

struct GeneratedLibrary {
  std::string library;         // <dir>/<name>.a
  std::string halide_header;   // <dir>/<name>.h
  std::string header;          // <dir>/<name>_pto.h
};

GeneratedLibrary generate_library(const Program& p, const Schedule& s, const Target& t,
                                  const std::string& out_dir, const std::string& name);

}  // namespace pto
