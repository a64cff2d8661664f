// Ahead-of-time generation: static libraries + a plain C header.
//
// A library holds one or more kernels (a named Program each) compiled for one
// target, or for several CPU targets at once with runtime dispatch: Halide's
// compile_multitarget emits one variant per target plus a wrapper that picks
// the first variant the running CPU supports (halide_can_use_target_features),
// with the plain architecture baseline last so some variant always runs.
//
// Kernels are compiled without the Halide runtime. The runtime goes either into
// the same archive (the default: one self-contained .a that links with only
// -lpthread -ldl), or into a separate runtime library (generate_runtime) that
// several PTO libraries linked into one program share, so that they share one
// error handler, thread pool and device context.
//
// Next to Halide's own header per kernel (`<function>.h`, halide_buffer_t API
// for advanced users) we write `<library>_pto.h`: a plain C API over raw
// pointers and sizes that installs an error handler, so a failing call returns
// a non-zero code and a message instead of aborting; for device targets it
// copies outputs back to the host and releases the device buffers. The header
// records the target and schedule of every kernel and, for multi-target
// libraries, the variants and a switch that restricts dispatch (for tests).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "target/Target.h"
#include "dsl/Program.h"
#include "schedules/Schedule.h"

namespace pto {

struct KernelSpec {
  std::string name;  // C function: <library>_<name>, or <name> when it equals the library name
  Program program;
  // Schedules by target name ("*" = any target); a target without one gets
  // default_schedule (the GPU default for targets with a device).
  std::map<std::string, Schedule> schedules;
};

struct LibraryOptions {
  std::string name;             // library name: <name>.a, <name>_pto.h; a C identifier
  std::vector<Target> targets;  // one, or several CPU targets of one architecture with `dispatch`
  bool dispatch = false;        // several targets -> one multi-target library
  bool embed_runtime = true;    // false: link a runtime library from generate_runtime()
};

struct GeneratedLibrary {
  std::string library;                     // <dir>/<name>.a
  std::string header;                      // <dir>/<name>_pto.h
  std::vector<std::string> halide_headers; // <dir>/<function>.h, one per kernel
  std::vector<std::string> functions;      // the C functions, in kernel order
  std::vector<std::string> variants;       // target names, in dispatch order (one if no dispatch)
};

// The C type of a buffer element of type t in the generated headers.
std::string c_type(DType t);

// The C function a kernel gets in library `library`.
std::string kernel_function_name(const std::string& library, const std::string& kernel);

// The schedule kernel `k` is built with for target `t`.
Schedule schedule_for(const KernelSpec& k, const Target& t);

// One library (all `targets` with dispatch, else exactly one target).
GeneratedLibrary generate_library(const std::vector<KernelSpec>& kernels, const LibraryOptions& opts,
                                  const std::string& out_dir);

// Without dispatch and with several targets: one library per target, named
// <name>_<target> (dashes become underscores); else one library.
std::vector<GeneratedLibrary> generate_libraries(const std::vector<KernelSpec>& kernels, const LibraryOptions& opts,
                                                 const std::string& out_dir);

// A Halide runtime library <dir>/<name>.a for libraries generated with
// embed_runtime = false for any of `targets` (its device APIs are the union).
std::string generate_runtime(const std::vector<Target>& targets, const std::string& out_dir, const std::string& name);

// One kernel, one target, runtime embedded: the C function is `name`.
GeneratedLibrary generate_library(const Program& p, const Schedule& s, const Target& t,
                                  const std::string& out_dir, const std::string& name);

}  // namespace pto
