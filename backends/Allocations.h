// The heap allocations a compiled pipeline makes, by stage.
//
// Halide's allocator hook sees only a size, so a refused allocation
// (DEVICE_MEMORY_EXHAUSTED) is matched here to the stage that asked for it:
// the lowered statement's Allocate nodes give each buffer's name and, where
// its extents are constants, its size in bytes.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "backends/Lower.h"

namespace pto {

struct HeapAllocation {
  std::string stage;   // the stage whose buffer (or accumulator, or packed copy) it is
  std::string detail;  // "packed copy of 'W'" where it is one
  size_t bytes = 0;   // 0: known only at run time (a tile whose size depends on the loop)
};

// The allocations of `lp` (lowered again: call it on an error path, once).
std::vector<HeapAllocation> heap_allocations(const LoweredPipeline& lp, const Program& p);

// "stage 'x'" for the allocation of `n` bytes, or the candidates ("one of
// stages 'x' or 'y'": buffers of the same size, or sized at run time);
// empty if there is none. (The order of the run's allocations would not
// tell them apart: those inside loops repeat.)
std::string allocation_owner(const std::vector<HeapAllocation>& allocs, size_t n);

}  // namespace pto
