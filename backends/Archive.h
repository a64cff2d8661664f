// Static-library (ar archive) merging for generated libraries.
//
// Halide writes one archive per compiled function (compile_multitarget gives
// one per kernel, with one object per CPU variant plus a dispatch wrapper).
// A PTO library holds several kernels and, optionally, the Halide runtime, in
// ONE archive, so that users link a single file. Halide's
// create_static_library() writes archives from object files; this reader
// extracts the members of the per-kernel archives so that they can be
// re-packed. It reads the System V / GNU format (long-name table `//`,
// symbol tables `/` and `/SYM64/`) that LLVM writes on Linux, and BSD `#1/n`
// names for completeness.
#pragma once

#include <string>
#include <vector>

namespace pto {

struct ArchiveMember {
  std::string name;  // member file name, e.g. "matmul-x86-64-linux-avx2.o"
  std::string data;  // its bytes
};

// Reads every file member (symbol and name tables excluded); throws pto::Error
// naming the file and the byte offset on a malformed archive.
std::vector<ArchiveMember> read_archive(const std::string& path);

// Writes the members of `archives` and the object files `objects` into one
// archive `dst` for Halide target `halide_target` (with a symbol table). Members
// are written to `scratch_dir` first, prefixed to keep equal names apart.
void merge_archives(const std::vector<std::string>& archives, const std::vector<std::string>& objects,
                    const std::string& halide_target, const std::string& scratch_dir, const std::string& dst);

}  // namespace pto
