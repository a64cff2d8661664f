#include "backends/Shard.h"

#include <algorithm>
#include <cstring>

#include "schedules/defaults/Defaults.h"

namespace pto {
namespace {

// `b` restricted to [start, start + len) along `axis` (a view: no copy).
BufferRef slice(const BufferRef& b, int axis, int64_t start, int64_t len) {
  BufferRef r = b;
  if (r.strides.empty()) {
    r.strides.assign(b.shape.size(), 1);
    for (size_t k = b.shape.size(); k-- > 1;) r.strides[k - 1] = r.strides[k] * b.shape[k];
  }
  const auto a = static_cast<size_t>(axis);
  r.data = static_cast<uint8_t*>(b.data) + start * r.strides[a] * bytes(b.dtype);
  r.shape[a] = len;
  return r;
}

// Is the innermost axis of `b` past unit ones strided? Kernel::run reads
// inputs only with that axis dense; a slice along it down to one element
// leaves the next axis out innermost.
bool innermost_strided(const BufferRef& b) {
  for (size_t k = b.shape.size(); k-- > 0;)
    if (b.shape[k] > 1) return !b.strides.empty() && b.strides[k] != 1;
  return false;
}

// `from` (dense row-major) written into the view `to` of the same shape.
void copy_into(const BufferRef& from, const BufferRef& to) {
  const size_t elem = static_cast<size_t>(bytes(to.dtype)), rank = to.shape.size();
  int64_t n = 1;
  for (int64_t e : to.shape) n *= e;
  std::vector<int64_t> at(rank, 0);
  const auto* src = static_cast<const uint8_t*>(from.data);
  for (int64_t k = 0; k < n; ++k) {
    int64_t off = 0;
    for (size_t d = 0; d < rank; ++d) off += at[d] * to.strides[d];
    std::memcpy(static_cast<uint8_t*>(to.data) + off * static_cast<int64_t>(elem),
                src + k * static_cast<int64_t>(elem), elem);
    for (size_t d = rank; d-- > 0;) {
      if (++at[d] < to.shape[d]) break;
      at[d] = 0;
    }
  }
}

// The symbolic sizes the inputs bind (Kernel::run has checked them).
std::map<std::string, int64_t> input_sizes(const Program& p, const std::vector<BufferRef>& in) {
  std::map<std::string, int64_t> sizes;
  for (size_t i = 0; i < in.size() && i < p.inputs().size(); ++i) {
    const Shape& s = p.inputs()[i].shape;
    for (size_t k = 0; k < s.size() && k < in[i].shape.size(); ++k)
      if (s[k].is_symbolic()) sizes.emplace(s[k].sym, in[i].shape[k]);
  }
  return sizes;
}

size_t ceil_div(size_t a, size_t b) {
  return (a + b - 1) / b;
}

}  // namespace

const std::optional<BatchAxis>& ShardCache::axis(const Program& p, std::string* why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!analysed_) {
    axis_ = batch_axis(p, &why_);
    analysed_ = true;
  }
  if (why) *why = why_;
  return axis_;
}

size_t ShardCache::learned(size_t limit, size_t extent) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = learned_.find({limit, extent});
  return it == learned_.end() ? 0 : it->second;
}

void ShardCache::learn(size_t limit, size_t extent, size_t shards) {
  std::lock_guard<std::mutex> lock(mu_);
  learned_[{limit, extent}] = shards;
}

const Kernel& ShardCache::kernel(const Kernel& whole, const BatchAxis& axis, int64_t extent,
                                 const std::map<std::string, int64_t>& sizes) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& k = kernels_[extent];
  if (k) return *k;
  const Program q = with_batch_extent(whole.program(), axis, extent, sizes);
  Schedule s = whole.schedule();
  std::erase_if(s.stages, [&](const auto& e) { return !q.find_stage(e.first); });
  try {
    k = std::make_unique<Kernel>(q, s, whole.target());
  } catch (const Error&) {
    // The schedule does not fit the smaller extent (a tile larger than a shard).
    Schedule d = default_schedule(q, whole.target());
    d.options = whole.schedule().options;
    k = std::make_unique<Kernel>(q, d, whole.target());
  }
  return *k;
}

RunStats run_sharded(const Kernel& k, ShardCache& cache, const std::vector<BufferRef>& inputs,
                     const std::vector<BufferRef>& outputs, size_t memory_limit) {
  const Program& p = k.program();
  std::string why;
  const std::optional<BatchAxis>& axis = cache.axis(p, &why);
  const std::vector<std::string> outs = p.outputs();
  size_t n = 0, shards = 0;
  if (axis && !outputs.empty()) {
    n = static_cast<size_t>(outputs[0].shape.at(static_cast<size_t>(axis->of(outs[0]))));
    // An earlier call found the count: the whole run, bound to be refused, is not tried.
    shards = cache.learned(memory_limit, n);
  }
  if (!shards) {
    size_t need = 0;
    std::string refused;
    try {
      return k.run(inputs, outputs, memory_limit);
    } catch (const MemoryError& e) {
      if (memory_limit == 0) throw;
      need = e.requested + e.live;
      refused = e.what();
    }
    if (!axis)
      throw MemoryError(refused + "; sharding cannot split it: " + why, need, 0, memory_limit);
    // A quarter over the lower bound: shards sized to exactly the limit would
    // meet it again with the allocations the refusal did not see.
    shards = std::max<size_t>(2, ceil_div(need + need / 4, memory_limit));
  }
  const std::map<std::string, int64_t> sizes = input_sizes(p, inputs);
  for (;;) {
    const size_t len = ceil_div(n, std::min(shards, n));
    shards = ceil_div(n, len);
    RunStats total;
    try {
      for (size_t start = 0; start < n; start += len) {
        const size_t here = std::min(len, n - start);
        const Kernel& part = cache.kernel(k, *axis, static_cast<int64_t>(here), sizes);
        std::vector<BufferRef> in, out;
        std::vector<std::vector<uint8_t>> copies;
        copies.reserve(inputs.size());
        for (size_t i = 0; i < inputs.size(); ++i) {
          const int a = axis->of(p.inputs()[i].name);
          in.push_back(
              a < 0 ? inputs[i]
                    : slice(inputs[i], a, static_cast<int64_t>(start), static_cast<int64_t>(here)));
          if (a >= 0 && innermost_strided(in.back()))
            in.back() = dense_copy(in.back(), copies.emplace_back());
        }
        // Outputs too are written in place unless the slice leaves them strided innermost
        // (the compiled pipeline's constraint): then through a dense buffer.
        std::vector<std::pair<BufferRef, BufferRef>> write_back;  // (dense, the view)
        std::vector<std::vector<uint8_t>> out_copies(outputs.size());
        for (size_t i = 0; i < outputs.size(); ++i) {
          out.push_back(slice(outputs[i], axis->of(outs[i]), static_cast<int64_t>(start),
                              static_cast<int64_t>(here)));
          if (!innermost_strided(out.back())) continue;
          const BufferRef view = out.back();
          out.back() = dense_copy(view, out_copies[i]);
          write_back.emplace_back(out.back(), view);
        }
        const RunStats s = part.run(in, out, memory_limit);
        for (const auto& [dense, view] : write_back) copy_into(dense, view);
        total.peak_bytes = std::max(total.peak_bytes, s.peak_bytes);
        total.allocations += s.allocations;
      }
      total.shards = static_cast<int>(shards);
      cache.learn(memory_limit, n, shards);
      return total;
    } catch (const MemoryError& e) {
      if (len == 1)
        throw MemoryError("sharding along " + axis->describe(p) + " into " +
                              std::to_string(shards) +
                              " shards of one slice each still does not fit: " + e.what(),
                          e.requested, e.live, memory_limit);
      shards = std::max(2 * shards, shards * ceil_div(e.requested + e.live, memory_limit));
    }
  }
}

}  // namespace pto
