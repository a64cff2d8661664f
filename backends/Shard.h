// Dynamic sharding: a run whose intermediates do not fit its memory limit
// runs again as shards along the program's batch axis (dsl/BatchAxis.h),
// as many as needed for each shard's intermediates to fit.
//
// The first refusal's figures (bytes asked for plus bytes live) give a
// lower bound of the whole run's need, so the first try splits into that
// many multiples of the limit; a shard still refused splits further, down to
// one slice per shard. The count found is remembered per limit and batch
// extent, so later calls go straight to the shards (a whole run tried first
// would compute up to the refusal every time). Each shard is the program with its batch axis at the
// shard's extent, compiled once per extent (a run has at most two: the
// shard and the last, shorter one) with the kernel's own schedule where it
// is valid for the smaller extent and the default schedule where it is not.
// Inputs and outputs are passed as views of the caller's buffers: nothing
// is copied.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "backends/Jit.h"
#include "dsl/BatchAxis.h"

namespace pto {

// Per Kernel: the batch axis (analysed on the first sharded run) and the
// kernels compiled per shard extent. Thread-safe.
class ShardCache {
 public:
  // The batch axis of `p`, or nullopt with the reason in `why`.
  const std::optional<BatchAxis>& axis(const Program& p, std::string* why);
  // The kernel for shards of `extent` (compiled on first use).
  const Kernel& kernel(const Kernel& whole, const BatchAxis& axis, int64_t extent,
                       const std::map<std::string, int64_t>& sizes);
  // The shard count an earlier run found for this limit and batch extent (0: none).
  size_t learned(size_t limit, size_t extent);
  void learn(size_t limit, size_t extent, size_t shards);

 private:
  std::mutex mu_;
  bool analysed_ = false;
  std::optional<BatchAxis> axis_;
  std::string why_;
  std::map<int64_t, std::unique_ptr<Kernel>> kernels_;
  std::map<std::pair<size_t, size_t>, size_t> learned_;  // (limit, extent) -> shards
};

// Runs `k` within `memory_limit` bytes of intermediates, sharding on refusal
// (RunStats::shards says into how many). Throws MemoryError naming the reason
// where the program cannot be sharded or one slice alone does not fit.
RunStats run_sharded(const Kernel& k, ShardCache& cache, const std::vector<BufferRef>& inputs,
                     const std::vector<BufferRef>& outputs, size_t memory_limit);

}  // namespace pto
