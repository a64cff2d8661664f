// Typed errors for every PTO layer.
//
// Every user-facing failure (bad shape, bad schedule, unsupported target, a
// kernel that fails at run time) is one of these, so callers can catch
// `pto::Error` and print `what()`: the message always names the operator or
// stage, the offending value, and what would have been valid.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>

namespace pto {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

// Rank, extent or broadcasting mismatch in a compute definition.
class ShapeError : public Error {
  using Error::Error;
};
// A dim an operator needs the value of (an offset, a window, a count) is a
// symbolic size. Its own type so that callers (pypto's kernels) can specialize
// to static sizes and retry instead of matching message text.
class SymbolicSizeError : public ShapeError {
  using ShapeError::ShapeError;
};
// Element type mismatch or an unsupported element type.
class DTypeError : public Error {
  using Error::Error;
};
// Malformed definition: unknown tensor, unbound variable, duplicate name.
class DefinitionError : public Error {
  using Error::Error;
};
// Invalid schedule: unknown stage, tile larger than extent, bad JSON.
class ScheduleError : public Error {
  using Error::Error;
};
// Unknown or unsupported target or device.
class TargetError : public Error {
  using Error::Error;
};
// A model that cannot be imported (frontends/): a malformed or truncated
// file, an unsupported operator, attribute or element type. The message
// names the node (its name and op type) and what is supported.
class ImportError : public Error {
  using Error::Error;
};
// Code generation failed (Halide reported a compile error).
class CompileError : public Error {
  using Error::Error;
};
// A compiled kernel failed while running (bad buffer, Halide runtime error).
class RuntimeError : public Error {
  using Error::Error;
};
// An allocation was refused: DEVICE_MEMORY_EXHAUSTED. Carries the figures
// (bytes) so that dynamic sharding (backends/Shard.h) can size its shards.
class MemoryError : public RuntimeError {
 public:
  explicit MemoryError(const std::string& msg, size_t requested = 0, size_t live = 0,
                       size_t limit = 0)
      : RuntimeError(msg), requested(requested), live(live), limit(limit) {}
  size_t requested, live, limit;  // the refused request, the bytes live at that moment, the cap
};

}  // namespace pto
