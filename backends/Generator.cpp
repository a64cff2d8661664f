#include "backends/Generator.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "backends/Archive.h"
#include "backends/Lower.h"
#include "dsl/BatchAxis.h"
#include "schedules/ScheduleJson.h"
#include "schedules/defaults/Defaults.h"

namespace pto {
namespace fs = std::filesystem;
std::string c_type(DType t) {
  switch (t) {
    case DType::Bool: return "bool";
    case DType::I8: return "int8_t";
    case DType::I16: return "int16_t";
    case DType::I32: return "int32_t";
    case DType::I64: return "int64_t";
    case DType::U8: return "uint8_t";
    case DType::U16: return "uint16_t";
    case DType::U32: return "uint32_t";
    case DType::U64: return "uint64_t";
    case DType::F16: return "uint16_t /* f16 bits */";
    case DType::BF16: return "uint16_t /* bf16 bits */";
    case DType::F32: return "float";
    case DType::F64: return "double";
  }
  return "void";
}

namespace {

const char* halide_type_code(DType t) {
  if (t == DType::Bool) return "halide_type_uint";
  if (t == DType::BF16) return "halide_type_bfloat";
  if (is_float(t)) return "halide_type_float";
  return is_unsigned(t) ? "halide_type_uint" : "halide_type_int";
}

bool is_identifier(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

std::string sanitize(const std::string& s) {
  std::string r = s;
  for (char& c : r)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return r;
}

// Emits the code that fills `halide_dimension_t <var>_dims[]` for a row-major tensor.
std::string dims_code(const std::string& var, const Shape& shape) {
  std::ostringstream c;
  c << "  halide_dimension_t " << var << "_dims[" << std::max<size_t>(shape.size(), 1) << "];\n";
  c << "  {\n    int32_t stride = 1;\n";
  for (size_t k = 0; k < shape.size(); ++k) {
    const Dim& d = shape[shape.size() - 1 - k];
    const std::string ext = d.is_symbolic() ? "(int32_t)" + d.sym : std::to_string(d.value);
    c << "    " << var << "_dims[" << k << "].min = 0; " << var << "_dims[" << k << "].extent = " << ext << "; " << var
      << "_dims[" << k << "].stride = stride; " << var << "_dims[" << k << "].flags = 0; stride *= " << ext << ";\n";
  }
  c << "  }\n";
  return c.str();
}

// Halide's feature words of variant `t`: bit f of word f/64 for feature f, as
// the dispatch wrapper passes them to halide_can_use_target_features (variants
// are compiled with NoRuntime, so that bit is part of every query).
std::vector<uint64_t> feature_words(const Halide::Target& variant) {
  const Halide::Target t = variant.with_feature(Halide::Target::NoRuntime);
  std::vector<uint64_t> w((Halide::Target::FeatureEnd + 63) / 64, 0);
  for (int f = 0; f < Halide::Target::FeatureEnd; ++f)
    if (t.has_feature(static_cast<Halide::Target::Feature>(f))) w[f / 64] |= uint64_t{1} << (f % 64);
  return w;
}

// The CPU variants of a dispatching library, most capable first, ending with
// the architecture's baseline (always usable) unless the caller's list ends with it.
std::vector<Target> dispatch_variants(const LibraryOptions& opts) {
  std::vector<Target> v = opts.targets;
  const Halide::Target first(v.front().halide);
  for (const Target& t : v) {
    const Halide::Target ht(t.halide);
    if (t.has_device())
      throw TargetError("library '" + opts.name + "': target '" + t.name +
                        "' has a GPU device; runtime dispatch chooses between CPU variants only, so build device "
                        "targets as their own library (without --dispatch)");
    if (ht.arch != first.arch || ht.bits != first.bits || ht.os != first.os)
      throw TargetError("library '" + opts.name + "': targets '" + v.front().name + "' and '" + t.name +
                        "' differ in architecture or OS; one dispatching library holds variants of one architecture");
  }
  const Halide::Target base(first.os, first.arch, first.bits);
  if (Halide::Target(v.back().halide) != base) v.push_back(parse_target(base.to_string()));
  return v;
}

Halide::Target runtime_target(const std::vector<Target>& targets) {
  const Halide::Target first(targets.front().halide);
  Halide::Target rt(first.os, first.arch, first.bits);
  for (const Target& t : targets) {
    const Halide::Target ht(t.halide);
    if (ht.arch != rt.arch || ht.bits != rt.bits || ht.os != rt.os)
      throw TargetError("runtime: targets '" + targets.front().name + "' and '" + t.name +
                        "' differ in architecture or OS; build one runtime per architecture");
    for (const auto f : {Halide::Target::OpenCL, Halide::Target::CUDA})
      if (ht.has_feature(f)) rt = rt.with_feature(f);
  }
  return rt;
}

void copy_runtime_headers(const std::string& out_dir) {
  for (const char* h : {"HalideRuntime.h", "HalideRuntimeOpenCL.h", "HalideRuntimeCuda.h"})
    fs::copy_file(fs::path(PTO_HALIDE_INCLUDE_DIR) / h, fs::path(out_dir) / h, fs::copy_options::overwrite_existing);
}

struct BuiltKernel {
  const KernelSpec* spec;
  std::string function;
  std::vector<Schedule> schedules;  // per variant
};

// Library-wide: the allocator hooks that hold a kernel to a memory limit
// (DEVICE_MEMORY_EXHAUSTED), and the scan of an output for NaN or Inf.
void write_memory_and_numerics(std::ostream& h, const std::string& L) {
  h << "// Error codes of the _run wrappers beside Halide's (negative) ones.\n"
    << "#define " << L << "_DEVICE_MEMORY_EXHAUSTED (-3)\n#define " << L << "_NONFINITE (-4)\n\n"
    << "// " << L
    << "_set_memory_limit(bytes, shard): the kernels' intermediates may hold at most `bytes`\n"
    << "// at once (0: no limit; process-wide, as Halide's allocator hooks are). Over it a _run "
       "returns\n"
    << "// " << L << "_DEVICE_MEMORY_EXHAUSTED with the figures in " << L
    << "_last_error(), or, with `shard`\n"
    << "// and a kernel whose batch axis is a size parameter, runs again in as many shards along "
       "it as\n"
    << "// fit (" << L << "_last_shards()).\n"
    << "static size_t " << L << "_limit_ = 0, " << L << "_live_ = 0, " << L << "_refused_ = 0, "
    << L << "_refused_live_ = 0;\nstatic int " << L << "_shard_ = 0, " << L << "_shards_ = 1;\n"
    << "static void* " << L << "_malloc_(void* user_context, size_t n) {\n  (void)user_context;\n"
    << "  size_t live = __atomic_load_n(&" << L << "_live_, __ATOMIC_RELAXED);\n  do {\n"
    << "    if (" << L << "_limit_ && live + n > " << L << "_limit_) {\n      " << L
    << "_refused_ = n;\n      " << L << "_refused_live_ = live;\n      return NULL;\n    }\n"
    << "  } while (!__atomic_compare_exchange_n(&" << L
    << "_live_, &live, live + n, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED));\n"
    << "  unsigned char* base = (unsigned char*)aligned_alloc(128, (n + 2 * 128 + 127) / 128 * "
       "128);\n"
    << "  if (!base) {\n    __atomic_fetch_sub(&" << L << "_live_, n, __ATOMIC_RELAXED);\n    " << L
    << "_refused_ = n;\n    return NULL;\n  }\n  memcpy(base, &n, sizeof n);\n  return base + "
       "128;\n}\n"
    << "static void " << L << "_free_(void* user_context, void* p) {\n  (void)user_context;\n"
    << "  if (!p) return;\n  unsigned char* base = (unsigned char*)p - 128;\n  size_t n;\n"
    << "  memcpy(&n, base, sizeof n);\n  __atomic_fetch_sub(&" << L
    << "_live_, n, __ATOMIC_RELAXED);\n"
    << "  free(base);\n}\n"
    << "static inline void " << L << "_set_memory_limit(size_t bytes, int shard) {\n  " << L
    << "_limit_ = bytes;\n  " << L << "_shard_ = shard;\n  halide_set_custom_malloc(" << L
    << "_malloc_);\n  halide_set_custom_free(" << L << "_free_);\n}\n"
    << "// Into how many shards the last _run call was split (1: not split).\n"
    << "static inline int " << L << "_last_shards(void) { return " << L << "_shards_; }\n"
    << "// The first NaN or Inf of n values of `kind` (0 f32, 1 f64, 2 f16, 3 bf16), by their "
       "bits; -1 if none.\n"
    << "static inline int64_t " << L
    << "_first_nonfinite_(const void* data, int64_t n, int kind, int* is_nan) {\n"
    << "  for (int64_t k = 0; k < n; ++k) {\n    uint64_t bits = 0, exp_mask, frac_mask;\n"
    << "    switch (kind) {\n"
    << "      case 0: { uint32_t b; memcpy(&b, (const uint32_t*)data + k, 4); bits = b; exp_mask = "
       "0x7f800000u; "
       "frac_mask = 0x007fffffu; break; }\n"
    << "      case 1: memcpy(&bits, (const uint64_t*)data + k, 8); exp_mask = "
       "0x7ff0000000000000ull; frac_mask = "
       "0x000fffffffffffffull; break;\n"
    << "      case 2: { uint16_t b; memcpy(&b, (const uint16_t*)data + k, 2); bits = b; exp_mask = "
       "0x7c00u; "
       "frac_mask = 0x03ffu; break; }\n"
    << "      default: { uint16_t b; memcpy(&b, (const uint16_t*)data + k, 2); bits = b; exp_mask "
       "= 0x7f80u; "
       "frac_mask = 0x007fu; break; }\n"
    << "    }\n    if ((bits & exp_mask) == exp_mask) {\n      *is_nan = (bits & frac_mask) != 0;\n"
    << "      return k;\n    }\n  }\n  return -1;\n}\n\n";
}

// The C expression of a dim's extent in a _run wrapper (size parameters are int64_t).
std::string c_extent(const Dim& d) {
  return d.is_symbolic() ? "(int64_t)" + d.sym : std::to_string(d.value) + "LL";
}

// The symbolic batch axis a _run wrapper can shard along by calling its
// kernel on row ranges: the batch axis (dsl/BatchAxis.h) is axis 0 of every
// batched tensor and its size parameter sizes nothing else. Empty if none.
std::string shard_symbol(const Program& p, BatchAxis* out) {
  const std::optional<BatchAxis> b = batch_axis(p);
  if (!b || !b->extent.is_symbolic()) return "";
  for (const auto& [name, axis] : b->axis)
    if (axis > 0) return "";
  const std::string& sym = b->extent.sym;
  const auto uses = [&](const std::string& tensor, const Shape& shape) {
    for (size_t k = 0; k < shape.size(); ++k)
      if (shape[k].sym == sym && !(k == 0 && b->of(tensor) == 0)) return true;
    return false;
  };
  for (const TensorInfo& in : p.inputs())
    if (uses(in.name, in.shape)) return "";
  for (const Stage& st : p.stages()) {
    if (uses(st.name, st.shape)) return "";
    for (const RVar& r : st.rvars)
      if (r.extent.sym == sym) return "";
  }
  *out = *b;
  return sym;
}

// `F_run`: the kernel (`F_whole_`) within the memory limit, sharded where it
// can be, then the numerics check of its float outputs (with `check`).
void write_run_wrapper(std::ostream& h, const std::string& L, const std::string& F,
                       const Program& p, const std::vector<std::string>& params, bool check) {
  const auto symbols = p.symbols();
  BatchAxis batch;
  const std::string sym = shard_symbol(p, &batch);
  const auto args = [&](bool shard) {
    std::string r;
    const auto add = [&](const std::string& a) { r += (r.empty() ? "" : ", ") + a; };
    for (const auto& [s, src] : symbols) add(shard && s == sym ? "here" : s);
    const auto tensor = [&](const std::string& name, const Shape& shape) {
      if (!shard || batch.of(name) != 0) return name;
      std::string row = "1LL";
      for (size_t k = 1; k < shape.size(); ++k) row += " * " + c_extent(shape[k]);
      return name + " + start * (" + row + ")";
    };
    for (const auto& in : p.inputs()) add(tensor(in.name, in.shape));
    for (const auto& o : p.outputs()) add(tensor(o, p.stage(o).shape));
    return r;
  };
  h << "// Returns 0 on success, -1 for a NULL pointer, " << L
    << "_DEVICE_MEMORY_EXHAUSTED over the memory\n"
    << "// limit"
    << (check ? ", " + L + "_NONFINITE for NaN/Inf in an output (check_numerics)" : "")
    << ", else a Halide error code; see " << L << "_last_error().\n";
  if (!sym.empty())
    h << "// With sharding on (" << L << "_set_memory_limit), splits the rows of '" << sym
      << "' (axis 0 of the batched tensors) into shards that fit.\n";
  h << "static inline int " << F << "_run(";
  for (size_t i = 0; i < params.size(); ++i) h << (i ? ", " : "") << params[i];
  h << ") {\n  " << L << "_refused_ = 0;\n  " << L << "_shards_ = 1;\n  int rc = " << F
    << "_whole_(" << args(false) << ");\n  if (rc != 0 && " << L
    << "_refused_) {\n    const size_t asked = " << L << "_refused_, live = " << L
    << "_refused_live_;\n";
  if (!sym.empty())
    h << "    for (int64_t shards = 2; " << L
      << "_shard_; shards *= 2) {\n      const int64_t n = " << sym
      << ";\n      const int64_t len = (n + (shards < n ? shards : n) - 1) / (shards < n ? shards "
         ": n);\n      "
      << L
      << "_refused_ = 0;\n      rc = 0;\n      for (int64_t start = 0; start < n && rc == 0; start "
         "+= len) {\n"
      << "        const int64_t here = start + len <= n ? len : n - start;\n        rc = " << F
      << "_whole_(" << args(true) << ");\n      }\n      if (rc == 0) {\n        " << L
      << "_shards_ = (int)((n + len - 1) / len);\n        break;\n      }\n      if (!" << L
      << "_refused_ || len == 1) break;\n    }\n";
  h << "    if (rc != 0) {\n      snprintf(" << L << "_last_error_, sizeof " << L
    << "_last_error_, \"DEVICE_MEMORY_EXHAUSTED: " << F
    << ": an intermediate asked for %zu bytes with %zu live and a limit of %zu bytes; %s\", asked, "
       "live, "
    << L << "_limit_, "
    << (sym.empty() ? "\"this kernel has no symbolic batch axis to shard along\""
                    : "\"shard along '" + sym + "' with " + L + "_set_memory_limit(bytes, 1)\"")
    << ");\n      return " << L << "_DEVICE_MEMORY_EXHAUSTED;\n    }\n  }\n";
  if (check) {
    h << "  if (rc == 0) {\n    int is_nan = 0;\n    int64_t at;\n";
    for (const std::string& o : p.outputs()) {
      const DType dt = p.stage(o).dtype;
      const int kind = dt == DType::F32    ? 0
                       : dt == DType::F64  ? 1
                       : dt == DType::F16  ? 2
                       : dt == DType::BF16 ? 3
                                           : -1;
      if (kind < 0) continue;
      std::string count = "1LL";
      for (const Dim& d : p.stage(o).shape) count += " * " + c_extent(d);
      h << "    if ((at = " << L << "_first_nonfinite_(" << o << ", " << count << ", " << kind
        << ", &is_nan)) >= 0) {\n      snprintf(" << L << "_last_error_, sizeof " << L
        << "_last_error_, \"" << F << ": check_numerics: output '" << o
        << "' has %s at flat index %lld\", is_nan ? \"NaN\" : \"Inf\", (long long)at);\n"
        << "      return " << L << "_NONFINITE;\n    }\n";
    }
    h << "  }\n";
  }
  h << "  return rc;\n}\n\n";
}

void write_header(const std::string& path, const LibraryOptions& opts, const std::vector<Target>& variants,
                  const std::vector<BuiltKernel>& kernels) {
  const std::string L = opts.name;
  const bool device = variants.front().has_device();
  const bool dispatch = variants.size() > 1;
  std::ofstream h(path);
  const std::string guard = "PTO_GENERATED_" + L + "_PTO_H";
  h << "// Generated by PTO. Do not edit.\n// library: " << L << "\n";
  h << "// targets" << (dispatch ? " (runtime dispatch: the first one this CPU supports runs)" : "") << ":\n";
  for (const Target& t : variants) h << "//   " << t.name << " (" << t.halide << ")\n";
  h << "// runtime: " << (opts.embed_runtime ? "embedded in " + L + ".a" : "not included; link a PTO runtime library (pto gen --runtime)") << "\n";
  for (const BuiltKernel& k : kernels) {
    h << "// kernel " << k.function << ": program " << k.spec->program.name() << "\n";
    for (size_t i = 0; i < variants.size(); ++i)
      h << "//   schedule for " << variants[i].name << ": " << schedule_to_json_string(k.schedules[i], -1) << "\n";
  }
  h << "#ifndef " << guard << "\n#define " << guard << "\n\n"
    << "#include <stdint.h>\n#include <stdbool.h>\n#include <stdio.h>\n#include "
       "<stdlib.h>\n#include "
       "<string.h>\n#include \"HalideRuntime.h\"\n";
  for (const BuiltKernel& k : kernels) h << "#include \"" << k.function << ".h\"\n";
  h << "\n#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n"
    << "// The last error message of a failed " << L << "_* call (per translation unit).\n"
    << "static char " << L << "_last_error_[1024];\n"
    << "static void " << L << "_on_error_(void* user_context, const char* msg) {\n"
    << "  (void)user_context;\n  strncpy(" << L << "_last_error_, msg, sizeof " << L << "_last_error_ - 1);\n}\n"
    << "static inline const char* " << L << "_last_error(void) { return " << L << "_last_error_; }\n\n";
  write_memory_and_numerics(h, L);
  // AMX tiles fault (SIGILL) until Linux grants the process their state: a
  // kernel scheduled on them asks once, in its _run wrapper.
  const auto uses_amx = [](const BuiltKernel& k) {
    for (const Schedule& s : k.schedules)
      for (const auto& [name, ss] : s.stages)
        if (ss.amx && s.options.opt_level != 0) return true;
    return false;
  };
  const bool any_amx = std::any_of(kernels.begin(), kernels.end(), uses_amx);
  if (any_amx)
    h << "#if defined(__linux__) && defined(__x86_64__)\n#include <sys/syscall.h>\n#include "
         "<unistd.h>\n#endif\n"
      << "// Asks Linux for the AMX tile state (arch_prctl ARCH_REQ_XCOMP_PERM, XTILEDATA) once; 1 "
         "when granted.\n"
      << "static inline int " << L << "_request_amx_(void) {\n"
      << "#if defined(__linux__) && defined(__x86_64__)\n"
      << "  static int state = 0;\n"
      << "  if (!state) state = syscall(SYS_arch_prctl, 0x1023, 18) == 0 ? 1 : -1;\n"
      << "  return state > 0;\n#else\n  return 0;\n#endif\n}\n\n";
  if (device) {
    h << "// Brings an output back from the device and releases the device copies of all buffers.\n"
      << "static inline int " << L << "_finish_(halide_buffer_t** bufs, int n, int n_in, int rc) {\n"
      << "  for (int i = n_in; i < n && rc == 0; ++i) rc = halide_copy_to_host(NULL, bufs[i]);\n"
      << "  for (int i = 0; i < n; ++i)\n    if (bufs[i]->device) {\n"
      << "      const int r = halide_device_free(NULL, bufs[i]);\n      if (rc == 0) rc = r;\n    }\n"
      << "  if (rc != 0 && strstr(" << L << "_last_error_, \"" << (variants.front().device == "opencl" ? "CL" : "CUDA")
      << "\")) {\n    const size_t used = strlen(" << L << "_last_error_);\n    strncat(" << L << "_last_error_, \""
      << (variants.front().device == "opencl"
              ? " (no usable OpenCL platform or device? check `clinfo`; OCL_ICD_VENDORS names the ICD directory)"
              : " (no usable CUDA driver or GPU? check `nvidia-smi`)")
      << "\", sizeof " << L << "_last_error_ - 1 - used);\n  }\n  return rc;\n}\n\n";
  }
  for (const BuiltKernel& k : kernels) {
    const Program& p = k.spec->program;
    const std::string F = k.function;
    std::vector<std::string> params;
    for (const auto& [sym, src] : p.symbols()) params.push_back("int64_t " + sym);
    for (const auto& in : p.inputs()) params.push_back("const " + c_type(in.dtype) + "* " + in.name);
    for (const auto& o : p.outputs()) params.push_back(c_type(p.stage(o).dtype) + "* " + o);
    h << "// " << F << "_run: " << p.name() << " on dense row-major host arrays" << (device ? " (copied to and from the " + variants.front().device + " device)" : "") << ". Shapes:\n";
    for (const auto& in : p.inputs()) h << "//   " << in.name << ": " << to_string(in.dtype) << to_string(in.shape) << "\n";
    for (const auto& o : p.outputs()) h << "//   " << o << ": " << to_string(p.stage(o).dtype) << to_string(p.stage(o).shape) << " (output)\n";
    h << "static inline int " << F << "_whole_(";
    for (size_t i = 0; i < params.size(); ++i) h << (i ? ", " : "") << params[i];
    h << ") {\n  halide_set_error_handler(" << L << "_on_error_);\n  " << L << "_last_error_[0] = 0;\n";
    if (uses_amx(k))
      h << "  if (!" << L << "_request_amx_()) {\n    strncpy(" << L << "_last_error_, \"" << F
        << ": runs on AMX tiles, but Linux did not grant this process their state (arch_prctl)\", "
           "sizeof "
        << L << "_last_error_ - 1);\n    return -1;\n  }\n";
    auto null_check = [&](const std::string& var, const char* what) {
      h << "  if (!" << var << ") {\n    strncpy(" << L << "_last_error_, \"" << F << ": " << what << " '" << var
        << "' is NULL\", sizeof " << L << "_last_error_ - 1);\n    return -1;\n  }\n";
    };
    for (const auto& in : p.inputs()) null_check(in.name, "input");
    for (const auto& o : p.outputs()) null_check(o, "output");
    std::vector<std::string> bufs;
    auto emit_buffer = [&](const std::string& var, DType dt, const Shape& shape, bool is_const) {
      h << dims_code(var, shape);
      h << "  halide_buffer_t " << var << "_buf;\n  memset(&" << var << "_buf, 0, sizeof " << var << "_buf);\n";
      h << "  " << var << "_buf.host = (uint8_t*)" << (is_const ? "(void*)" : "") << var << ";\n";
      h << "  " << var << "_buf.type.code = (halide_type_code_t)" << halide_type_code(dt) << ";\n";
      h << "  " << var << "_buf.type.bits = " << (dt == DType::Bool ? 1 : bits(dt)) << ";\n  " << var << "_buf.type.lanes = 1;\n";
      h << "  " << var << "_buf.dimensions = " << shape.size() << ";\n  " << var << "_buf.dim = " << var << "_dims;\n";
      // The host copy is the valid one: Halide copies it to the device before use.
      if (device && is_const) h << "  " << var << "_buf.flags = halide_buffer_flag_host_dirty;\n";
      bufs.push_back("&" + var + "_buf");
    };
    for (const auto& in : p.inputs()) emit_buffer(in.name, in.dtype, in.shape, true);
    for (const auto& o : p.outputs()) emit_buffer(o, p.stage(o).dtype, p.stage(o).shape, false);
    // options.threads: the runtime's thread pool is one per process; sized for this call, then restored.
    const int threads = k.schedules.front().options.threads;
    if (threads > 0) h << "  const int old_threads = halide_set_num_threads(" << threads << ");\n";
    h << "  int rc = " << F << "(";
    for (size_t i = 0; i < bufs.size(); ++i) h << (i ? ", " : "") << bufs[i];
    h << ");\n";
    if (threads > 0) h << "  halide_set_num_threads(old_threads);\n";
    if (device) {
      h << "  halide_buffer_t* all[] = {";
      for (size_t i = 0; i < bufs.size(); ++i) h << (i ? ", " : "") << bufs[i];
      h << "};\n  rc = " << L << "_finish_(all, " << bufs.size() << ", " << p.inputs().size() << ", rc);\n";
    }
    h << "  return rc;\n}\n";
    const bool check = std::any_of(k.schedules.begin(), k.schedules.end(),
                                   [](const Schedule& s) { return s.options.check_numerics; });
    write_run_wrapper(h, L, F, p, params, check);
  }
  if (dispatch) {
    const size_t words = feature_words(Halide::Target(variants.front().halide)).size();
    h << "// Runtime dispatch. Variants, in the order the dispatcher tries them:\n"
      << "enum { " << L << "_num_variants = " << variants.size() << " };\n"
      << "static const char* const " << L << "_variant_names[" << variants.size() << "] = {";
    for (size_t i = 0; i < variants.size(); ++i) h << (i ? ", " : "") << "\"" << variants[i].name << "\"";
    h << "};\n// Halide feature words of each variant (bit f of word f/64 = halide_target_feature_t f).\n"
      << "static const uint64_t " << L << "_variant_features[" << variants.size() << "][" << words << "] = {";
    for (size_t i = 0; i < variants.size(); ++i) {
      const auto w = feature_words(Halide::Target(variants[i].halide));
      h << (i ? ", " : "") << "{";
      for (size_t k = 0; k < w.size(); ++k) h << (k ? ", " : "") << w[k] << "ull";
      h << "}";
    }
    h << "};\n"
      << "static int " << L << "_max_variant_ = 0, " << L << "_chosen_ = -1;\n"
      << "static int " << L << "_can_use_(int count, const uint64_t* features) {\n"
      << "  const uint64_t* allowed = " << L << "_variant_features[" << L << "_max_variant_];\n"
      << "  for (int k = 0; k < count; ++k)\n"
      << "    if (features[k] & ~(k < " << words << " ? allowed[k] : 0ull)) return 0;\n"
      << "  if (!halide_default_can_use_target_features(count, features)) return 0;\n"
      << "  for (int v = 0; v < " << L << "_num_variants; ++v)\n"
      << "    if (count >= " << words << " && memcmp(features, " << L << "_variant_features[v], sizeof " << L
      << "_variant_features[v]) == 0) " << L << "_chosen_ = v;\n  return 1;\n}\n"
      << "// For tests and diagnostics: let dispatch use no CPU feature beyond those of variant\n"
      << "// `max_variant` (0 = no restriction). Call before the first kernel call: each kernel\n"
      << "// decides once per process. Also makes " << L << "_dispatched_variant() report.\n"
      << "static inline void " << L << "_restrict_dispatch(int max_variant) {\n"
      << "  " << L << "_max_variant_ = max_variant < 0 ? 0 : (max_variant >= " << L << "_num_variants ? " << L
      << "_num_variants - 1 : max_variant);\n"
      << "  halide_set_custom_can_use_target_features(" << L << "_can_use_);\n}\n"
      << "// The variant the last dispatch picked (after " << L << "_restrict_dispatch), or -1 before any.\n"
      << "static inline int " << L << "_dispatched_variant(void) {\n"
      << "  return " << L << "_chosen_ >= 0 ? " << L << "_chosen_ : " << L << "_num_variants - 1;\n}\n\n";
  }
  h << "#ifdef __cplusplus\n}\n#endif\n#endif\n";
  if (!h) throw Error("cannot write " + path);
}

}  // namespace

std::string kernel_function_name(const std::string& library, const std::string& kernel) {
  return kernel == library ? kernel : library + "_" + kernel;
}

Schedule schedule_for(const KernelSpec& k, const Target& t) {
  if (auto it = k.schedules.find(t.name); it != k.schedules.end()) return it->second;
  if (auto it = k.schedules.find("*"); it != k.schedules.end()) return it->second;
  return default_schedule(k.program, t);
}

GeneratedLibrary generate_library(const std::vector<KernelSpec>& kernels, const LibraryOptions& opts,
                                  const std::string& out_dir) {
  if (!is_identifier(opts.name))
    throw Error("library name '" + opts.name + "' must be a C identifier (letters, digits, _)");
  if (kernels.empty()) throw Error("library '" + opts.name + "' has no kernels");
  if (opts.targets.empty()) throw TargetError("library '" + opts.name + "' has no targets");
  if (opts.targets.size() > 1 && !opts.dispatch)
    throw TargetError("library '" + opts.name + "': " + std::to_string(opts.targets.size()) +
                      " targets need dispatch (one multi-target library) or one library per target");
  for (size_t i = 0; i < kernels.size(); ++i) {
    if (!is_identifier(kernels[i].name))
      throw Error("library '" + opts.name + "': kernel name '" + kernels[i].name + "' must be a C identifier");
    for (size_t j = 0; j < i; ++j)
      if (kernels[j].name == kernels[i].name) throw Error("library '" + opts.name + "': kernel '" + kernels[i].name + "' is listed twice");
  }
  const std::vector<Target> variants = opts.dispatch ? dispatch_variants(opts) : opts.targets;
  for (const Target& t : variants)
    if (t.has_device() && Halide::Target(t.halide).arch != Halide::Target::X86)
      throw TargetError("target '" + t.name + "': devices are supported with x86-64 hosts only");

  fs::create_directories(out_dir);
  const fs::path tmp = fs::path(out_dir) / (".pto_tmp_" + opts.name);
  fs::remove_all(tmp);
  fs::create_directories(tmp);

  GeneratedLibrary out;
  for (const Target& t : variants) out.variants.push_back(t.name);
  std::vector<BuiltKernel> built;
  std::vector<std::string> archives;
  std::vector<Halide::Target> halide_targets;
  std::vector<std::string> suffixes;
  for (const Target& t : variants) {
    halide_targets.push_back(Halide::Target(t.halide).with_feature(Halide::Target::NoRuntime));
    suffixes.push_back(sanitize(t.name));
  }
  for (const KernelSpec& k : kernels) {
    BuiltKernel b{&k, kernel_function_name(opts.name, k.name), {}};
    for (const Target& t : variants) b.schedules.push_back(schedule_for(k, t));
    const std::string lib = (tmp / (b.function + ".a")).string();
    const std::string header = (fs::path(out_dir) / (b.function + ".h")).string();
    auto factory = [&](const std::string& fn, const Halide::Target& ht) {
      for (size_t i = 0; i < variants.size(); ++i) {
        if (ht.without_feature(Halide::Target::NoRuntime) != Halide::Target(variants[i].halide)) continue;
        LoweredPipeline lp = lower(k.program, b.schedules[i], variants[i]);
        return lp.pipeline.compile_to_module(lp.arguments(), fn, lp.target.with_feature(Halide::Target::NoRuntime));
      }
      throw CompileError("library '" + opts.name + "': no variant for Halide target " + ht.to_string());
    };
    with_halide_errors("generating kernel '" + b.function + "' for " + variants.front().name +
                           (variants.size() > 1 ? " and " + std::to_string(variants.size() - 1) + " more variants" : ""),
                       [&] {
                         Halide::compile_multitarget(b.function,
                                                     {{Halide::OutputFileType::static_library, lib},
                                                      {Halide::OutputFileType::c_header, header}},
                                                     halide_targets, suffixes, factory);
                         return 0;
                       });
    archives.push_back(lib);
    out.halide_headers.push_back(header);
    out.functions.push_back(b.function);
    built.push_back(std::move(b));
  }
  std::vector<std::string> objects;
  if (opts.embed_runtime) {
    const std::string rt = (tmp / "pto_runtime.o").string();
    with_halide_errors("compiling the Halide runtime for library '" + opts.name + "'", [&] {
      Halide::compile_standalone_runtime(rt, runtime_target(variants));
      return 0;
    });
    objects.push_back(rt);
  }
  out.library = (fs::path(out_dir) / (opts.name + ".a")).string();
  merge_archives(archives, objects, halide_targets.back().to_string(), (tmp / "members").string(), out.library);
  copy_runtime_headers(out_dir);
  out.header = (fs::path(out_dir) / (opts.name + "_pto.h")).string();
  write_header(out.header, opts, variants, built);
  fs::remove_all(tmp);
  return out;
}

std::vector<GeneratedLibrary> generate_libraries(const std::vector<KernelSpec>& kernels, const LibraryOptions& opts,
                                                 const std::string& out_dir) {
  if (opts.dispatch || opts.targets.size() <= 1) return {generate_library(kernels, opts, out_dir)};
  std::vector<GeneratedLibrary> r;
  for (const Target& t : opts.targets) {
    LibraryOptions one = opts;
    one.name = opts.name + "_" + sanitize(t.name);
    one.targets = {t};
    r.push_back(generate_library(kernels, one, out_dir));
  }
  return r;
}

std::string generate_runtime(const std::vector<Target>& targets, const std::string& out_dir, const std::string& name) {
  if (!is_identifier(name)) throw Error("runtime name '" + name + "' must be a C identifier (letters, digits, _)");
  if (targets.empty()) throw TargetError("runtime '" + name + "' has no targets");
  fs::create_directories(out_dir);
  const std::string lib = (fs::path(out_dir) / (name + ".a")).string();
  with_halide_errors("compiling the Halide runtime '" + name + "'", [&] {
    Halide::compile_standalone_runtime({{Halide::OutputFileType::static_library, lib}}, runtime_target(targets));
    return 0;
  });
  copy_runtime_headers(out_dir);
  return lib;
}

GeneratedLibrary generate_library(const Program& p, const Schedule& s, const Target& t, const std::string& out_dir,
                                  const std::string& name) {
  KernelSpec k{name, p.clone(), {{t.name, s}}};
  LibraryOptions opts;
  opts.name = name;
  opts.targets = {t};
  return generate_library({k}, opts, out_dir);
}

}  // namespace pto
