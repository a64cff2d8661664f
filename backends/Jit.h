// JIT compilation and execution of a scheduled Program in this process.
//
// A Kernel is compiled once (lower + Halide JIT) and can then be run on many
// sets of buffers, from several threads. Buffers are plain views (pointer,
// dtype, row-major shape) so that C++ callers and numpy arrays both fit. Every
// failure comes back as a pto::Error: shape and dtype mismatches are checked
// before the call and name the tensor, the dim and the expected size; Halide
// runtime errors and refused allocations (DEVICE_MEMORY_EXHAUSTED) are
// captured through a per-call error handler instead of aborting.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dsl/Program.h"
#include "schedules/Schedule.h"
#include "target/Target.h"

namespace pto {

struct BufferRef {
  void* data = nullptr;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;    // row-major
  std::vector<int64_t> strides;  // in elements; empty = dense row-major
};

struct RunStats {
  size_t peak_bytes = 0;  // peak of the kernel's own heap allocations (the largest shard's)
  size_t allocations = 0;
  int shards = 1;  // > 1: the run was split to fit its memory limit (backends/Shard.h)
};

// What a run does when its intermediates would exceed its memory limit.
enum class OnRefusal {
  Fail,   // throw MemoryError (DEVICE_MEMORY_EXHAUSTED)
  Shard,  // split the run along the program's batch axis into shards that fit
};

// A realization or production of a stage, reported by a Kernel built with
// `trace_stages` to the sink of run_traced() (debug/StageProfile.h). Called
// on the thread that runs it, from several threads at once.
struct StageEvent {
  enum class Kind { Realize, EndRealize, Produce, EndProduce };
  Kind kind;
  const std::string& stage;
  size_t bytes = 0;  // Realize: the buffer's size
};
using StageSink = std::function<void(const StageEvent&)>;

// `b` copied into `storage` dense row-major, as a BufferRef without strides
// (any strides; each run of dense trailing axes is one memcpy).
BufferRef dense_copy(const BufferRef& b, std::vector<uint8_t>& storage);

// Program::outputs()' shapes for these input shapes (binds symbolic sizes,
// nothing compiled); throws ShapeError.
std::vector<std::vector<int64_t>> output_shapes(
    const Program& p, const std::vector<std::vector<int64_t>>& input_shapes);

class Kernel {
 public:
  // `trace_stages`: the stages (by name) instrumented to report their
  // realizations and productions to run_traced()'s sink (a call per event).
  Kernel(const Program& p, const Schedule& s, const Target& t,
         const std::function<bool(const std::string& stage)>& trace_stages = nullptr);
  ~Kernel();
  Kernel(Kernel&&) noexcept;
  Kernel& operator=(Kernel&&) noexcept;

  const Program& program() const;
  const Schedule& schedule() const;
  const Target& target() const;

  // Output shapes for these input shapes (binds symbolic sizes); throws ShapeError.
  std::vector<std::vector<int64_t>> output_shapes(const std::vector<std::vector<int64_t>>& input_shapes) const;

  // Runs on caller-owned buffers: inputs in Program::inputs() order, outputs in
  // Program::outputs() order. `memory_limit` (bytes, 0 = none) caps the kernel's
  // intermediate allocations; over it, `on_refusal` says whether to fail or shard.
  RunStats run(const std::vector<BufferRef>& inputs, const std::vector<BufferRef>& outputs,
               size_t memory_limit = 0, OnRefusal on_refusal = OnRefusal::Fail) const;
  // run() reporting stage events to `sink` (a kernel built with trace_stages).
  RunStats run_traced(const std::vector<BufferRef>& inputs, const std::vector<BufferRef>& outputs,
                      const StageSink& sink) const;

 private:
  RunStats run_with(const std::vector<BufferRef>& inputs, const std::vector<BufferRef>& outputs,
                    size_t memory_limit, const StageSink* sink) const;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pto
