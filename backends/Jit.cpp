#include "backends/Jit.h"

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "backends/Allocations.h"
#include "backends/Lower.h"
#include "backends/ParallelFor.h"
#include "backends/Shard.h"
#include "schedules/Validate.h"

namespace pto {
namespace {

// Per-call context handed to the JIT runtime: captures error text and
// accounts for (and optionally caps) the kernel's heap allocations.
struct RunContext : ParallelContext {
  std::string error;
  size_t limit = 0, live = 0, peak = 0, count = 0;
  bool refused = false;
  size_t refused_bytes = 0, refused_live = 0;  // the request, and the bytes live at that moment
  std::mutex mu;  // parallel tasks allocate concurrently
  // run_traced(): where stage events go, and the traced Funcs' stages and element sizes.
  const StageSink* sink = nullptr;
  const std::map<std::string, std::pair<std::string, size_t>>* traced = nullptr;
  std::atomic<int32_t> next_event{1};
};

constexpr size_t kPad = 64;  // Halide may read slightly before/after a block.

void on_error(Halide::JITUserContext* ctx, const char* msg) {
  auto* c = static_cast<RunContext*>(ctx);
  std::lock_guard<std::mutex> lock(c->mu);
  if (c->error.empty()) c->error = msg;
}

void* on_malloc(Halide::JITUserContext* ctx, size_t n) {
  auto* c = static_cast<RunContext*>(ctx);
  {
    std::lock_guard<std::mutex> lock(c->mu);
    if (c->limit && c->live + n > c->limit) {
      c->refused = true;
      c->refused_bytes = n;
      c->refused_live = c->live;  // `live` drops as the failed pipeline frees what it holds
      return nullptr;
    }
    c->live += n;
    c->peak = std::max(c->peak, c->live);
    ++c->count;
  }
  const size_t total = (n + 2 * kPad + kPad - 1) / kPad * kPad;
  auto* base = static_cast<uint8_t*>(std::aligned_alloc(kPad, total));
  if (!base) {
    std::lock_guard<std::mutex> lock(c->mu);
    c->refused = true;
    c->refused_bytes = n;
    c->live -= n;
    c->refused_live = c->live;
    return nullptr;
  }
  std::memcpy(base, &n, sizeof n);
  return base + kPad;
}

int32_t on_trace(Halide::JITUserContext* ctx, const halide_trace_event_t* e) {
  auto* c = static_cast<RunContext*>(ctx);
  const int32_t id =
      c->next_event.fetch_add(1, std::memory_order_relaxed);  // parent ids of later events
  if (!c->sink) return id;
  StageEvent::Kind kind;
  switch (e->event) {
    case halide_trace_begin_realization:
      kind = StageEvent::Kind::Realize;
      break;
    case halide_trace_end_realization:
      kind = StageEvent::Kind::EndRealize;
      break;
    case halide_trace_produce:
      kind = StageEvent::Kind::Produce;
      break;
    case halide_trace_end_produce:
      kind = StageEvent::Kind::EndProduce;
      break;
    default:
      return id;
  }
  const auto it = c->traced->find(e->func);
  if (it == c->traced->end()) return id;
  size_t bytes = 0;
  if (kind == StageEvent::Kind::Realize) {
    bytes = it->second.second;
    for (int32_t d = 0; d + 1 < e->dimensions; d += 2)
      bytes *= static_cast<size_t>(std::max(e->coordinates[d + 1], 0));
  }
  (*c->sink)(StageEvent{kind, it->second.first, bytes});
  return id;
}

void on_free(Halide::JITUserContext* ctx, void* p) {
  if (!p) return;
  auto* base = static_cast<uint8_t*>(p) - kPad;
  size_t n;
  std::memcpy(&n, base, sizeof n);
  auto* c = static_cast<RunContext*>(ctx);
  {
    std::lock_guard<std::mutex> lock(c->mu);
    c->live -= n;
  }
  std::free(base);
}

// `buf` viewing `ref` (no copy), its dims written to `dims` (ref's rank of them).
void fill(halide_buffer_t& buf, halide_dimension_t* dims, const BufferRef& ref) {
  const int r = static_cast<int>(ref.shape.size());
  int64_t stride = 1;
  for (int k = 0; k < r; ++k) {  // Halide dim k = row-major axis r-1-k
    const size_t axis = static_cast<size_t>(r - 1 - k);
    // A dim of extent 1 is never stepped: its stride is the dense one whatever the
    // caller gave (numpy reports arbitrary strides there), so dense-layout
    // constraints (dot_pairs inputs) hold.
    const int64_t s = ref.strides.empty() || ref.shape[axis] == 1 ? stride : ref.strides[axis];
    dims[k] = halide_dimension_t(0, static_cast<int32_t>(ref.shape[axis]), static_cast<int32_t>(s));
    stride *= ref.shape[axis];
  }
  buf.host = static_cast<uint8_t*>(ref.data);
  buf.type = halide_type(ref.dtype);
  buf.dimensions = r;
  buf.dim = dims;
}

// The first of the `trailing` innermost axes of `b` whose stride is not the
// dense row-major one, or -1. Extent-1 axes are never stepped: any stride holds.
int non_dense_axis(const BufferRef& b, size_t trailing) {
  int64_t dense = 1;
  for (size_t k = b.shape.size(); k-- > b.shape.size() - trailing;) {
    if (b.shape[k] > 1 && b.strides[k] != dense) return static_cast<int>(k);
    dense *= b.shape[k];
  }
  return -1;
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

// Symbolic sizes, each bound to the extent an input gives it (a handful per
// program: a flat list, empty and allocation-free for static programs).
using Bindings = std::vector<std::pair<std::string_view, int64_t>>;

int64_t extent(const Dim& d, const Bindings& bound) {
  if (!d.is_symbolic()) return d.value;
  for (const auto& [sym, v] : bound)
    if (sym == d.sym) return v;
  return -1;  // unreachable: every output size is an input's (the DSL's shape rules)
}

// The program's inputs against these shapes (shape_of(i): input i's); throws
// ShapeError naming the input, the dim and what it must be.
template <typename ShapeOf>
Bindings bind_inputs(const Program& p, size_t n, const ShapeOf& shape_of) {
  const auto& inputs = p.inputs();
  if (n != inputs.size())
    throw ShapeError("program '" + p.name() + "' takes " + std::to_string(inputs.size()) +
                     " inputs, got " + std::to_string(n));
  Bindings bound;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorInfo& t = inputs[i];
    const std::vector<int64_t>& got_shape = shape_of(i);
    if (got_shape.size() != t.shape.size())
      throw ShapeError("input '" + t.name + "' must have rank " + std::to_string(t.shape.size()) +
                       " (shape " + to_string(t.shape) + "), got shape " + shape_str(got_shape));
    for (size_t k = 0; k < t.shape.size(); ++k) {
      const Dim& d = t.shape[k];
      const int64_t got = got_shape[k];
      if (!d.is_symbolic()) {
        if (got != d.value)
          throw ShapeError("input '" + t.name + "' dim " + std::to_string(k) + " is " +
                           std::to_string(got) + ", expected " + std::to_string(d.value) +
                           " (shape " + to_string(t.shape) + ")");
        continue;
      }
      if (got < 1)
        throw ShapeError("input '" + t.name + "' dim " + std::to_string(k) + " ('" + d.sym +
                         "') is " + std::to_string(got) + "; sizes must be positive");
      const int64_t earlier = extent(d, bound);
      if (earlier < 0)
        bound.emplace_back(d.sym, got);
      else if (earlier != got)
        throw ShapeError("input '" + t.name + "' dim " + std::to_string(k) + " binds '" + d.sym +
                         "' to " + std::to_string(got) + ", but an earlier input bound it to " +
                         std::to_string(earlier));
    }
  }
  return bound;
}

}  // namespace

// What run() needs of the program on every call, computed once: a call of a
// few-microsecond kernel must not pay for Program::outputs() (which walks
// every stage's reads) or a map of sizes.
struct Kernel::Impl {
  Program program;
  Schedule schedule;
  Target target;
  LoweredPipeline lowered;
  Halide::Callable callable;
  std::vector<std::string> out_names;
  std::vector<const Stage*> out_stages;
  std::vector<bool> dense_input;  // input i must be dense row-major (Lower.h, dense_inputs)
  ShardCache shards;              // run(..., OnRefusal::Shard): the batch axis, kernels per shard
  std::once_flag allocs_once;     // heap_allocations(), listed on the first refusal
  std::vector<HeapAllocation> allocs;
  // trace_stages: Halide Func name -> (stage, bytes per element)
  std::map<std::string, std::pair<std::string, size_t>> traced;
};

Kernel::Kernel(const Program& p, const Schedule& s, const Target& t,
               const std::function<bool(const std::string&)>& trace_stages)
    : impl_(std::make_unique<Impl>()) {
  if (!t.runs_here())
    throw TargetError("target '" + t.name + "' (" + t.halide +
                      ") cannot run in this process; JIT needs a target this CPU supports (use 'host'), "
                      "or generate a library with `pto gen` instead");
  for (const auto& [name, ss] : s.stages)
    if (ss.amx && s.options.opt_level != 0 && t.amx) {  // else validation names the target
      std::string why;
      if (!request_amx_state(&why))
        throw TargetError("stage '" + name +
                          "' runs on AMX tiles (amx), but this process cannot use them: " + why);
      break;
    }
  impl_->program = p.clone();
  impl_->schedule = s;
  impl_->target = t;
  impl_->lowered = lower(impl_->program, s, t);
  if (trace_stages)
    for (auto& [name, f] : impl_->lowered.funcs) {
      const std::string stage = stage_of_func(name, impl_->program);
      if (!trace_stages(stage)) continue;
      f.trace_realizations();
      impl_->traced[f.name()] = {stage, static_cast<size_t>(f.types()[0].bytes())};
    }
  impl_->callable = with_halide_errors("JIT-compiling program '" + p.name() + "'", [&] {
    return impl_->lowered.pipeline.compile_to_callable(impl_->lowered.arguments(), impl_->lowered.target);
  });
  impl_->out_names = impl_->program.outputs();
  for (const std::string& o : impl_->out_names)
    impl_->out_stages.push_back(&impl_->program.stage(o));
  for (const TensorInfo& in : impl_->program.inputs())
    impl_->dense_input.push_back(impl_->lowered.dense_inputs.count(in.name) > 0);
}
Kernel::~Kernel() = default;
Kernel::Kernel(Kernel&&) noexcept = default;
Kernel& Kernel::operator=(Kernel&&) noexcept = default;
const Program& Kernel::program() const { return impl_->program; }
const Schedule& Kernel::schedule() const { return impl_->schedule; }
const Target& Kernel::target() const { return impl_->target; }

// `b` copied into `storage` dense row-major, as a BufferRef without strides:
// in runs of its trailing axes that are already dense (at least the
// innermost, which Kernel::run requires), one memcpy each.
BufferRef dense_copy(const BufferRef& b, std::vector<uint8_t>& storage) {
  const int64_t elem = bytes(b.dtype);
  int64_t n = 1;
  for (int64_t e : b.shape) n *= e;
  storage.resize(static_cast<size_t>(n * elem));
  size_t outer = b.shape.size();  // axes [outer, rank) form one dense run
  int64_t run = 1;
  while (outer > 0 && (b.shape[outer - 1] == 1 || b.strides[outer - 1] == run))
    run *= b.shape[--outer];
  const auto* src = static_cast<const uint8_t*>(b.data);
  std::vector<int64_t> at(outer, 0);
  for (int64_t k = 0; k < n / std::max<int64_t>(run, 1); ++k) {
    int64_t off = 0;
    for (size_t d = 0; d < outer; ++d) off += at[d] * b.strides[d];
    std::memcpy(storage.data() + k * run * elem, src + off * elem, static_cast<size_t>(run * elem));
    for (size_t d = outer; d-- > 0;) {
      if (++at[d] < b.shape[d]) break;
      at[d] = 0;
    }
  }
  BufferRef r = b;
  r.data = storage.data();
  r.strides.clear();
  return r;
}

std::vector<std::vector<int64_t>> output_shapes(const Program& p,
                                                const std::vector<std::vector<int64_t>>& in) {
  const Bindings bound = bind_inputs(
      p, in.size(), [&](size_t i) -> const auto& { return in[i]; });
  std::vector<std::vector<int64_t>> out;
  for (const std::string& o : p.outputs()) {
    std::vector<int64_t>& shape = out.emplace_back();
    for (const Dim& d : p.stage(o).shape) shape.push_back(extent(d, bound));
  }
  return out;
}

std::vector<std::vector<int64_t>> Kernel::output_shapes(
    const std::vector<std::vector<int64_t>>& in) const {
  return pto::output_shapes(impl_->program, in);
}

RunStats Kernel::run(const std::vector<BufferRef>& inputs, const std::vector<BufferRef>& outputs,
                     size_t memory_limit, OnRefusal on_refusal) const {
  if (on_refusal == OnRefusal::Shard && memory_limit > 0)
    return run_sharded(*this, impl_->shards, inputs, outputs, memory_limit);
  return run_with(inputs, outputs, memory_limit, nullptr);
}

RunStats Kernel::run_traced(const std::vector<BufferRef>& inputs,
                            const std::vector<BufferRef>& outputs, const StageSink& sink) const {
  if (impl_->traced.empty())
    throw RuntimeError("run_traced: kernel for '" + impl_->program.name() +
                       "' was not built with trace_stages");
  return run_with(inputs, outputs, 0, &sink);
}

RunStats Kernel::run_with(const std::vector<BufferRef>& inputs,
                          const std::vector<BufferRef>& outputs, size_t memory_limit,
                          const StageSink* sink) const {
  const Program& p = impl_->program;
  const Bindings bound = bind_inputs(
      p, inputs.size(), [&](size_t i) -> const auto& { return inputs[i].shape; });
  const auto& out_names = impl_->out_names;
  if (outputs.size() != out_names.size())
    throw ShapeError("program '" + p.name() + "' has " + std::to_string(out_names.size()) + " outputs, got " +
                     std::to_string(outputs.size()) + " output buffers");
  auto check = [&](const BufferRef& b, const std::string& name, DType want, const Shape* shape) {
    if (!b.data) throw RuntimeError("buffer for '" + name + "' has no data pointer");
    if (b.dtype != want)
      throw DTypeError("buffer for '" + name + "' has dtype " + std::string(to_string(b.dtype)) + ", expected " +
                       std::string(to_string(want)));
    if (shape) {
      bool same = b.shape.size() == shape->size();
      for (size_t k = 0; same && k < b.shape.size(); ++k)
        same = b.shape[k] == extent((*shape)[k], bound);
      if (!same) {
        std::vector<int64_t> expected;
        for (const Dim& d : *shape) expected.push_back(extent(d, bound));
        throw ShapeError("output buffer '" + name + "' has shape " + shape_str(b.shape) +
                         ", expected " + shape_str(expected));
      }
    }
    if (!b.strides.empty() && b.strides.size() != b.shape.size())
      throw ShapeError("buffer for '" + name + "' has " + std::to_string(b.strides.size()) + " strides for rank " +
                       std::to_string(b.shape.size()));
    for (int64_t e : b.shape)
      if (e > INT32_MAX) throw ShapeError("buffer for '" + name + "' has an extent over 2^31");
  };
  for (size_t i = 0; i < inputs.size(); ++i) check(inputs[i], p.inputs()[i].name, p.inputs()[i].dtype, nullptr);
  // The innermost axis past static extents of 1 is dense (the lowering's
  // constraint, which kernels vectorize along).
  for (size_t i = 0; i < inputs.size(); ++i) {
    const BufferRef& b = inputs[i];
    const Shape& want = p.inputs()[i].shape;
    if (b.strides.empty() || b.shape.size() != want.size()) continue;
    size_t trailing = 0;
    while (trailing < want.size()) {
      const Dim& d = want[want.size() - 1 - trailing++];
      if (d.is_symbolic() || d.value != 1) break;
    }
    if (const int k = non_dense_axis(b, trailing); k >= 0)
      throw ShapeError("buffer for '" + p.inputs()[i].name + "' must be dense along axis " + std::to_string(k) +
                       " (its innermost axis past axes of size 1), got strides " + shape_str(b.strides) +
                       " for shape " + shape_str(b.shape) + "; pass a contiguous copy");
  }
  for (size_t i = 0; i < outputs.size(); ++i)
    check(outputs[i], out_names[i], impl_->out_stages[i]->dtype, &impl_->out_stages[i]->shape);

  // Inputs the kernel needs dense row-major are copied where the caller
  // passed a strided view.
  const auto needs_copy = [&](size_t i) {
    const BufferRef& b = inputs[i];
    return impl_->dense_input[i] && !b.strides.empty() && non_dense_axis(b, b.shape.size()) >= 0;
  };
  std::vector<std::vector<uint8_t>> dense_copies;  // their storage outlives the call
  // Halide views of the buffers, their dims in one array (one allocation each).
  size_t rank = 0;
  for (const auto* refs : {&inputs, &outputs})
    for (const BufferRef& b : *refs) rank += b.shape.size();
  std::vector<halide_buffer_t> raw(inputs.size() + outputs.size());
  std::vector<halide_dimension_t> dims(rank);
  halide_dimension_t* next_dims = dims.data();
  for (size_t i = 0; i < raw.size(); ++i) {
    const bool in = i < inputs.size();
    const BufferRef* b = in ? &inputs[i] : &outputs[i - inputs.size()];
    BufferRef copy;
    if (in && needs_copy(i)) b = &(copy = dense_copy(*b, dense_copies.emplace_back()));
    fill(raw[i], next_dims, *b);
    next_dims += b->shape.size();
  }
  // Device targets: the host copy of an input is the valid one (Halide copies it over).
  const bool device = impl_->target.has_device();
  if (device)
    for (size_t i = 0; i < inputs.size(); ++i) raw[i].flags |= halide_buffer_flag_host_dirty;

  RunContext ctx;
  ctx.limit = memory_limit;
  ctx.handlers.custom_error = on_error;
  ctx.handlers.custom_malloc = on_malloc;
  ctx.handlers.custom_free = on_free;
  if (!impl_->traced
           .empty()) {  // a traced kernel: events to the sink, if any (never Halide's printer)
    ctx.sink = sink;
    ctx.traced = &impl_->traced;
    ctx.handlers.custom_trace = on_trace;
  }
  use_parallel_for(ctx, impl_->schedule.options.threads);
  Halide::JITUserContext* ctx_ptr = &ctx;
  std::vector<const void*> argv{&ctx_ptr};
  for (auto& r : raw) argv.push_back(&r);
  // options.threads: the parallel loops' team (ParallelFor.h) takes it per
  // call; Halide's JIT thread pool, which runs the rest (parallel tasks of
  // async producers, PTO_PARALLEL=halide), is one per process, so its size
  // is set for this run and restored after it (kernels run concurrently from
  // several threads share the last setting).
  struct PoolSize {
    int old = -1;
    explicit PoolSize(int n) {
      if (n <= 0) return;
      old = Halide::Internal::JITSharedRuntime::get_num_threads();  // 0: the default size
      Halide::Internal::JITSharedRuntime::set_num_threads(n);
    }
    ~PoolSize() {
      if (old >= 0) Halide::Internal::JITSharedRuntime::set_num_threads(old);
    }
  } pool(impl_->schedule.options.threads);
  int rc = impl_->callable.call_argv_fast(argv.size(), argv.data());
  if (device) {  // outputs back to the caller's memory; release the device copies
    for (size_t i = inputs.size(); i < raw.size() && rc == 0; ++i) {
      halide_buffer_t& b = raw[i];
      if (b.device_interface && (b.flags & halide_buffer_flag_device_dirty))
        rc = b.device_interface->copy_to_host(ctx_ptr, &b);
    }
    for (auto& r : raw)
      if (r.device && r.device_interface) r.device_interface->device_free(ctx_ptr, &r);
  }
  if (rc != 0 || ctx.refused) {
    if (ctx.refused) {
      std::call_once(impl_->allocs_once, [&] {
        try {
          impl_->allocs = heap_allocations(impl_->lowered, p);
        } catch (const Error&) {  // the message then names no stage
        }
      });
      std::string who = allocation_owner(impl_->allocs, ctx.refused_bytes);
      throw MemoryError("DEVICE_MEMORY_EXHAUSTED: program '" + p.name() +
                            "': " + (who.empty() ? "an intermediate" : who) + " asked for " +
                            std::to_string(ctx.refused_bytes) + " bytes with " +
                            std::to_string(ctx.refused_live) + " live and a limit of " +
                            std::to_string(ctx.limit) +
                            " bytes; compute it inside its consumer's loop (compute_at) to shrink "
                            "it, or let the run "
                            "shard along its batch axis (pypto.memory_limit(n, shard=True), pto "
                            "run --memory-limit N --shard)",
                        ctx.refused_bytes, ctx.refused_live, ctx.limit);
    }
    throw RuntimeError("program '" + p.name() + "' failed (code " + std::to_string(rc) + "): " + ctx.error);
  }
  if (impl_->schedule.options.check_numerics) {
    for (size_t i = 0; i < outputs.size(); ++i) {
      const BufferRef& b = outputs[i];
      if (b.dtype != DType::F32 && b.dtype != DType::F64) continue;
      int64_t n = 1;
      for (int64_t e : b.shape) n *= e;
      for (int64_t k = 0; k < n; ++k) {
        const double v = b.dtype == DType::F32 ? static_cast<const float*>(b.data)[k] : static_cast<const double*>(b.data)[k];
        if (!std::isfinite(v))
          throw RuntimeError("check_numerics: output '" + out_names[i] + "' has " + (std::isnan(v) ? "NaN" : "Inf") +
                             " at flat index " + std::to_string(k));
      }
    }
  }
  return {ctx.peak, ctx.count};
}

}  // namespace pto
