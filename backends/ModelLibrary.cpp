#include "backends/ModelLibrary.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "dsl/BFloat16.h"
#include "dsl/Error.h"
#include "schedules/Partition.h"
#include "schedules/defaults/Defaults.h"

namespace pto {
namespace fs = std::filesystem;
namespace {

constexpr char kMagic[] =
    "PTOWGT01";  // 8 bytes, then a uint64 count, then (uint64 bytes, data) per weight

// A tensor the driver holds a pointer to.
struct Slot {
  enum Kind { Input, Weight, Internal, Output } kind = Internal;
  std::string name;
  DType dtype = DType::F32;
  int64_t numel = 1;
  int64_t bytes() const { return numel * static_cast<int64_t>(pto::bytes(dtype)); }
};

int64_t numel_of(const Shape& s, const std::string& what) {
  int64_t n = 1;
  for (const Dim& d : s) {
    if (d.is_symbolic())
      throw Error("generate_model_library: " + what + " has the symbolic size '" + d.sym +
                  "'; a model library needs every dim bound (import with its input shapes)");
    n *= d.value;
  }
  return n;
}

// `data` in the element type a buffer of `t` holds.
void append_elements(std::string& out, DType t, const std::vector<double>& data,
                     const std::string& name) {
  const auto put = [&](auto v) {
    char b[sizeof v];
    std::memcpy(b, &v, sizeof v);
    out.append(b, sizeof v);
  };
  for (const double d : data) switch (t) {
      case DType::F32:
        put(static_cast<float>(d));
        break;
      case DType::F64:
        put(d);
        break;
      case DType::BF16:
        put(to_bf16(static_cast<float>(d)));
        break;
      case DType::Bool:
        put(static_cast<uint8_t>(d != 0));
        break;
      case DType::I8:
        put(static_cast<int8_t>(d));
        break;
      case DType::I16:
        put(static_cast<int16_t>(d));
        break;
      case DType::I32:
        put(static_cast<int32_t>(d));
        break;
      case DType::I64:
        put(static_cast<int64_t>(d));
        break;
      case DType::U8:
        put(static_cast<uint8_t>(d));
        break;
      case DType::U16:
        put(static_cast<uint16_t>(d));
        break;
      case DType::U32:
        put(static_cast<uint32_t>(d));
        break;
      case DType::U64:
        put(static_cast<uint64_t>(d));
        break;
      case DType::F16:
        throw Error("generate_model_library: weight '" + name +
                    "' is f16; f16 weights are not supported in a model library yet");
    }
}

std::string join(const std::vector<std::string>& v) {
  std::string r;
  for (const auto& s : v) r += (r.empty() ? "" : ", ") + s;
  return r;
}

}  // namespace

GeneratedModel generate_model_library(const Program& p, const ModelLibraryOptions& opts,
                                      const std::string& out_dir) {
  const std::string L = opts.name;
  // Slots: the program's inputs (weights or the model's inputs), then every part's outputs.
  std::vector<Slot> slots;
  std::map<std::string, size_t> slot_of;
  const auto add = [&](Slot s) {
    slot_of[s.name] = slots.size();
    slots.push_back(std::move(s));
  };
  std::vector<std::string> model_inputs;
  for (const TensorInfo& in : p.inputs()) {
    const auto w = opts.weights.find(in.name);
    Slot s{w != opts.weights.end() ? Slot::Weight : Slot::Input, in.name, in.dtype,
           numel_of(in.shape, "input '" + in.name + "'")};
    if (w != opts.weights.end() && static_cast<int64_t>(w->second.size()) != s.numel)
      throw Error("generate_model_library: weight '" + in.name + "' has " +
                  std::to_string(w->second.size()) + " values; its shape " + to_string(in.shape) +
                  " holds " + std::to_string(s.numel));
    if (s.kind == Slot::Input) model_inputs.push_back(in.name);
    add(std::move(s));
  }
  for (const auto& [name, data] : opts.weights)
    if (!slot_of.count(name))
      throw Error("generate_model_library: weight '" + name + "' is not an input of program '" +
                  p.name() + "' (inputs: " +
                  [&] {
                    std::vector<std::string> v;
                    for (const TensorInfo& in : p.inputs()) v.push_back(in.name);
                    return join(v);
                  }() +
                  ")");

  const Schedule schedule = default_schedule(p, opts.target);
  PartitionOptions po;
  po.max_stages = opts.max_stages;
  for (const auto& [name, data] : opts.weights) po.constants.insert(name);
  const std::vector<Part> parts = partition(p, schedule, opts.target, po);

  std::vector<KernelSpec> kernels;
  std::set<std::string> at_load_outputs;
  size_t k = 0;
  for (const Part& part : parts) {
    const std::string name = part.at_load ? "load" : "part" + std::to_string(k++);
    kernels.push_back({name, part.program, {{"*", part.schedule}}});
    for (const std::string& o : part.outputs) {
      if (slot_of.count(o)) continue;
      const Stage& st = part.program.stage(o);
      add({p.is_output(o) && !part.at_load ? Slot::Output : Slot::Internal, o, st.dtype,
           numel_of(st.shape, "stage '" + o + "'")});
      if (part.at_load) at_load_outputs.insert(o);
    }
  }
  LibraryOptions lo;
  lo.name = L;
  lo.targets = {opts.target};
  GeneratedModel out;
  out.kernels = generate_library(kernels, lo, out_dir);
  out.parts = k;

  // The weights, in slot order.
  std::string blob(kMagic, 8);
  std::vector<size_t> weight_slots;
  for (size_t i = 0; i < slots.size(); ++i)
    if (slots[i].kind == Slot::Weight) weight_slots.push_back(i);
  const uint64_t count = weight_slots.size();
  blob.append(reinterpret_cast<const char*>(&count), 8);
  for (const size_t i : weight_slots) {
    const uint64_t n = static_cast<uint64_t>(slots[i].bytes());
    blob.append(reinterpret_cast<const char*>(&n), 8);
    append_elements(blob, slots[i].dtype, opts.weights.at(slots[i].name), slots[i].name);
  }
  out.weights = (fs::path(out_dir) / (L + ".weights")).string();
  {
    std::ofstream f(out.weights, std::ios::binary);
    f.write(blob.data(), static_cast<std::streamsize>(blob.size()));
    if (!f) throw Error("generate_model_library: cannot write '" + out.weights + "'");
  }

  // The driver.
  std::ostringstream h;
  const std::string M = L + "_model";
  const std::string guard = "PTO_GENERATED_" + L + "_MODEL_H";
  h << "// Generated by PTO. Do not edit.\n// model " << p.name() << ": " << parts.size()
    << " kernels in " << L << ".a (" << out.parts << " per call"
    << (out.parts + 1 == parts.size() ? ", one at load" : "") << "), weights in " << L
    << ".weights\n"
    << "//   " << M << "* m;\n//   if (" << M << "_load(\"" << L << ".weights\", &m) != 0) puts("
    << M << "_last_error());\n//   " << M << "_run(m, " << join(model_inputs) << ", "
    << join(p.outputs()) << ");\n//   " << M << "_free(m);\n"
    << "#ifndef " << guard << "\n#define " << guard << "\n\n#include \"" << L << "_pto.h\"\n\n"
    << "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n"
    << "#define " << M << "_TENSORS_ " << slots.size() << "\n"
    << "typedef struct " << M << " {\n  void* buf[" << M << "_TENSORS_];\n} " << M << ";\n\n"
    << "static char " << M << "_error_[1024];\n"
    << "static inline const char* " << M << "_last_error(void) { return " << M << "_error_; }\n\n"
    << "static const uint64_t " << M << "_bytes_[" << M << "_TENSORS_] = {";
  for (size_t i = 0; i < slots.size(); ++i) h << (i ? ", " : "") << slots[i].bytes() << "ULL";
  h << "};\n// Buffers the model owns (weights, intermediates): 1; the caller's (inputs, outputs): "
       "0.\n"
    << "static const unsigned char " << M << "_owned_[" << M << "_TENSORS_] = {";
  for (size_t i = 0; i < slots.size(); ++i)
    h << (i ? ", " : "")
      << (slots[i].kind == Slot::Weight || slots[i].kind == Slot::Internal ? 1 : 0);
  h << "};\n\n"
    << "static inline void " << M << "_free(" << M << "* m) {\n  if (!m) return;\n"
    << "  for (int i = 0; i < " << M << "_TENSORS_; ++i)\n    if (" << M
    << "_owned_[i]) free(m->buf[i]);\n"
    << "  free(m);\n}\n\n";
  // One kernel call: its arguments are slots, cast to the kernel's types.
  const auto call = [&](const Part& part, const std::string& fn, const std::string& buf) {
    std::vector<std::string> args;
    for (const TensorInfo& in : part.program.inputs())
      args.push_back("(const " + c_type(in.dtype) + "*)" + buf + "[" +
                     std::to_string(slot_of.at(in.name)) + "]");
    for (const std::string& o : part.program.outputs())
      args.push_back("(" + c_type(part.program.stage(o).dtype) + "*)" + buf + "[" +
                     std::to_string(slot_of.at(o)) + "]");
    std::ostringstream c;
    c << "  rc_ = " << fn << "_run(" << join(args) << ");\n  if (rc_ != 0) {\n    snprintf(" << M
      << "_error_, sizeof " << M << "_error_, \"" << fn << ": %s\", " << L
      << "_last_error());\n    return rc_;\n  }\n";
    return c.str();
  };
  h << "// Reads the weights from `path` (" << L
    << ".weights), allocates the intermediates and runs\n"
    << "// the load-time part. 0 on success, else non-zero with " << M << "_last_error().\n"
    << "static inline int " << M << "_load_into_(" << M
    << "* m, const char* path) {\n  int rc_ = 0;\n"
    << "  FILE* f = fopen(path, \"rb\");\n  if (!f) {\n    snprintf(" << M << "_error_, sizeof "
    << M << "_error_, \"cannot open the weights file '%s'\", path);\n    return -1;\n  }\n"
    << "  char magic[8];\n  uint64_t count = 0;\n"
    << "  if (fread(magic, 1, 8, f) != 8 || memcmp(magic, \"" << kMagic
    << "\", 8) != 0 || fread(&count, 8, 1, f) != 1 || count != " << count
    << "ULL) {\n    fclose(f);\n    snprintf(" << M << "_error_, sizeof " << M
    << "_error_, \"'%s' is not the weights file of " << L << " (" << count
    << " weights expected)\", path);\n    return -1;\n  }\n"
    << "  static const int weights[] = {";
  for (size_t i = 0; i < weight_slots.size(); ++i) h << (i ? ", " : "") << weight_slots[i];
  h << (weight_slots.empty() ? "-1" : "") << "};\n"
    << "  for (uint64_t w = 0; w < count; ++w) {\n    const int s = weights[w];\n    uint64_t n = "
       "0;\n"
    << "    if (fread(&n, 8, 1, f) != 1 || n != " << M
    << "_bytes_[s] || !(m->buf[s] = malloc(n ? n : 1)) ||\n"
    << "        fread(m->buf[s], 1, n, f) != n) {\n      fclose(f);\n      snprintf(" << M
    << "_error_, sizeof " << M
    << "_error_, \"'%s': weight %d is truncated or the wrong size (%llu bytes expected)\", path, "
       "(int)w, "
       "(unsigned long long)"
    << M << "_bytes_[s]);\n      return -1;\n    }\n  }\n  fclose(f);\n"
    << "  for (int s = 0; s < " << M << "_TENSORS_; ++s)\n    if (" << M
    << "_owned_[s] && !m->buf[s] && !(m->buf[s] = malloc(" << M << "_bytes_[s] ? " << M
    << "_bytes_[s] : 1))) {\n      snprintf(" << M << "_error_, sizeof " << M
    << "_error_, \"out of memory for an intermediate of %llu bytes\", (unsigned long long)" << M
    << "_bytes_[s]);\n      return -1;\n    }\n  void** buf_ = m->buf;\n  (void)buf_;\n";
  // Weights only the load-time part reads are freed after it (their packed
  // forms replace them).
  std::set<size_t> read_per_call;
  for (const Part& part : parts)
    if (!part.at_load)
      for (const std::string& in : part.inputs) read_per_call.insert(slot_of.at(in));
  for (const Part& part : parts) {
    if (!part.at_load) continue;
    h << call(part, kernel_function_name(L, "load"), "buf_");
    for (const size_t i : weight_slots)
      if (!read_per_call.count(i))
        h << "  free(m->buf[" << i << "]);\n  m->buf[" << i << "] = NULL;\n";
  }
  h << "  return rc_;\n}\n\n"
    << "static inline int " << M << "_load(const char* path, " << M << "** out) {\n"
    << "  " << M << "* m = (" << M
    << "*)calloc(1, sizeof *m);\n  if (!out || !m) {\n    free(m);\n    snprintf(" << M
    << "_error_, sizeof " << M << "_error_, \"" << M
    << "_load: NULL result pointer or out of memory\");\n    return -1;\n  }\n"
    << "  *out = NULL;\n  const int rc = " << M << "_load_into_(m, path);\n  if (rc != 0) {\n    "
    << M << "_free(m);\n    return rc;\n  }\n  *out = m;\n  return 0;\n}\n\n";
  std::vector<std::string> params;
  for (const std::string& in : model_inputs)
    params.push_back("const " + c_type(p.tensor(in).dtype) + "* " + in);
  for (const std::string& o : p.outputs()) params.push_back(c_type(p.stage(o).dtype) + "* " + o);
  h << "// Runs the model on dense row-major arrays. Shapes:\n";
  for (const std::string& in : model_inputs)
    h << "//   " << in << ": " << to_string(p.tensor(in).dtype) << to_string(p.tensor(in).shape)
      << "\n";
  for (const std::string& o : p.outputs())
    h << "//   " << o << ": " << to_string(p.stage(o).dtype) << to_string(p.stage(o).shape)
      << " (output)\n";
  h << "static inline int " << M << "_run(" << M << "* model_, " << join(params)
    << ") {\n  int rc_ = 0;\n"
    << "  if (!model_) {\n    snprintf(" << M << "_error_, sizeof " << M << "_error_, \"" << M
    << "_run: the model is NULL (load it first)\");\n    return -1;\n  }\n"
    << "  void* buf_[" << M << "_TENSORS_];\n  memcpy(buf_, model_->buf, sizeof buf_);\n";
  for (const std::string& in : model_inputs)
    h << "  buf_[" << slot_of.at(in) << "] = (void*)" << in << ";\n";
  for (const std::string& o : p.outputs())
    if (slots[slot_of.at(o)].kind == Slot::Output)
      h << "  buf_[" << slot_of.at(o) << "] = (void*)" << o << ";\n";
  k = 0;
  for (const Part& part : parts)
    if (!part.at_load)
      h << call(part, kernel_function_name(L, "part" + std::to_string(k++)), "buf_");
  for (const std::string& o : p.outputs())
    if (at_load_outputs.count(o))  // computed from the weights alone, at load
      h << "  memcpy(" << o << ", model_->buf[" << slot_of.at(o) << "], " << M << "_bytes_["
        << slot_of.at(o) << "]);\n";
  h << "  return rc_;\n}\n\n#ifdef __cplusplus\n}\n#endif\n#endif\n";
  out.driver = (fs::path(out_dir) / (M + ".h")).string();
  std::ofstream d(out.driver);
  d << h.str();
  if (!d) throw Error("generate_model_library: cannot write '" + out.driver + "'");
  return out;
}

}  // namespace pto
