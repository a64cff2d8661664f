// The batch axis of a program: an axis of its outputs along which every
// slice depends only on the same slice of some inputs (and on the whole of
// the others), so the program can run as independent shards.
//
// Dynamic sharding (backends/Shard.h) splits a program whose intermediates
// do not fit a memory limit along it. The analysis is structural and
// conservative: the batch variable of a stage may appear in its definition
// only as a whole index of an access (`x(i, r)`, not `x(i + 1, r)` nor as a
// value); the tensor so accessed is then batched along that index's axis,
// and must be so everywhere it is read. A tensor read without the batch
// variable is shared: each shard reads all of it, so it may not depend on a
// batched tensor (a mean over the batch axis makes a program unshardable).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "dsl/Program.h"

namespace pto {

struct BatchAxis {
  std::map<std::string, int> axis;  // batched tensors (inputs and stages) -> their batch axis
  Dim extent;                       // the batch axis's extent (the same in every batched tensor)
  std::string describe(const Program& p) const;  // "axis 0 of 'out' (extent 64)"
  // `tensor`'s batch axis, or -1 where it is shared (read whole by every shard).
  int of(const std::string& tensor) const {
    const auto it = axis.find(tensor);
    return it == axis.end() ? -1 : it->second;
  }
};

// The outermost output axis the program can be split along, or nullopt with
// the reason in `why` (naming the stage and the access that prevents it).
std::optional<BatchAxis> batch_axis(const Program& p, std::string* why = nullptr);

// `p` with its symbolic sizes bound to `sizes` and every batched axis of
// extent `extent`: the program one shard runs. Stages no output reads are
// left out.
Program with_batch_extent(const Program& p, const BatchAxis& b, int64_t extent,
                          const std::map<std::string, int64_t>& sizes);

}  // namespace pto
