#include "frontends/onnx/Converter.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>

#include "dsl/BFloat16.h"
#include "dsl/Error.h"

namespace pto::onnx {

int64_t Constant::numel() const {
  int64_t n = 1;
  for (const int64_t d : shape) n *= d;
  return n;
}

NodeContext::NodeContext(const ::onnx::NodeProto& node, std::vector<std::optional<Value>> inputs,
                         Program program, int64_t opset, std::function<Tensor(size_t)> materialize,
                         std::function<Tensor(const std::string&, const Constant&)> add_constant)
    : node_(node),
      inputs_(std::move(inputs)),
      program_(std::move(program)),
      opset_(opset),
      materialize_(std::move(materialize)),
      add_constant_(std::move(add_constant)) {}

std::string NodeContext::where() const {
  const std::string name =
      node_.name().empty() ? (node_.output_size() ? node_.output(0) : "") : node_.name();
  return "node '" + name + "' (" + node_.op_type() + ")";
}

void NodeContext::fail(const std::string& msg) const {
  throw ImportError("onnx import: " + where() + ": " + msg);
}

Tensor NodeContext::input(size_t i) {
  if (!has_input(i)) fail("input " + std::to_string(i) + " is missing; the operator needs it");
  if (inputs_[i]->tensor.defined()) return inputs_[i]->tensor;
  inputs_[i]->tensor = materialize_(i);
  return inputs_[i]->tensor;
}

Tensor NodeContext::input_channels_last(size_t i) const {
  return has_input(i) ? inputs_[i]->channels_last : Tensor();
}

std::vector<int64_t> NodeContext::input_shape(size_t i) {
  if (has_input(i) && !inputs_[i]->tensor.defined()) {
    if (const Constant* k = inputs_[i]->constant.get()) return k->shape;
    if (const Tensor& t = inputs_[i]->channels_last; t.defined()) {
      const auto s = static_shape(t, where());
      return {s[0], s[3], s[1], s[2]};
    }
  }
  return static_shape(input(i), where());
}

Tensor NodeContext::constant_tensor(const std::string& name, const Constant& c) {
  return add_constant_(name, c);
}

const Constant* NodeContext::constant(size_t i) const {
  return has_input(i) ? inputs_[i]->constant.get() : nullptr;
}

const Constant& NodeContext::known_input(size_t i, const std::string& what) const {
  const Constant* c = constant(i);
  if (!c)
    fail("input " + std::to_string(i) + " ('" +
         (static_cast<int>(i) < node_.input_size() ? node_.input(static_cast<int>(i)) : "") +
         "', " + what +
         ") must be known at import (an initializer, a Constant or computed from static shapes); "
         "a value computed from the model's data is not supported here");
  return *c;
}

std::vector<int64_t> NodeContext::ints_input(size_t i, const std::string& what) const {
  const Constant* c = &known_input(i, what);
  std::vector<int64_t> v;
  v.reserve(c->data.size());
  // INT64_MAX / MIN (Slice's "to the end") are not exact in float64: clamped.
  for (const double d : c->data)
    v.push_back(d >= 9.2e18 ? INT64_MAX : d <= -9.2e18 ? INT64_MIN : static_cast<int64_t>(d));
  return v;
}

const ::onnx::AttributeProto* NodeContext::attr(const std::string& name) const {
  for (const auto& a : node_.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

bool NodeContext::has_attr(const std::string& name) const {
  return attr(name) != nullptr;
}

int64_t NodeContext::attr_int(const std::string& name, std::optional<int64_t> def) const {
  const auto* a = attr(name);
  if (!a) {
    if (!def) fail("attribute '" + name + "' is required");
    return *def;
  }
  if (a->type() != ::onnx::AttributeProto::INT) fail("attribute '" + name + "' must be an integer");
  return a->i();
}

double NodeContext::attr_float(const std::string& name, std::optional<double> def) const {
  const auto* a = attr(name);
  if (!a) {
    if (!def) fail("attribute '" + name + "' is required");
    return *def;
  }
  if (a->type() == ::onnx::AttributeProto::INT) return static_cast<double>(a->i());
  if (a->type() != ::onnx::AttributeProto::FLOAT) fail("attribute '" + name + "' must be a float");
  return a->f();
}

std::string NodeContext::attr_string(const std::string& name,
                                     std::optional<std::string> def) const {
  const auto* a = attr(name);
  if (!a) {
    if (!def) fail("attribute '" + name + "' is required");
    return *def;
  }
  if (a->type() != ::onnx::AttributeProto::STRING)
    fail("attribute '" + name + "' must be a string");
  return a->s();
}

std::vector<int64_t> NodeContext::attr_ints(const std::string& name,
                                            std::optional<std::vector<int64_t>> def) const {
  const auto* a = attr(name);
  if (!a) {
    if (!def) fail("attribute '" + name + "' is required");
    return *def;
  }
  if (a->type() != ::onnx::AttributeProto::INTS)
    fail("attribute '" + name + "' must be a list of integers");
  return {a->ints().begin(), a->ints().end()};
}

std::vector<double> NodeContext::attr_floats(const std::string& name) const {
  const auto* a = attr(name);
  if (!a) return {};
  if (a->type() != ::onnx::AttributeProto::FLOATS)
    fail("attribute '" + name + "' must be a list of floats");
  return {a->floats().begin(), a->floats().end()};
}

std::vector<std::string> NodeContext::attr_strings(const std::string& name) const {
  const auto* a = attr(name);
  if (!a) return {};
  if (a->type() != ::onnx::AttributeProto::STRINGS)
    fail("attribute '" + name + "' must be a list of strings");
  return {a->strings().begin(), a->strings().end()};
}

Constant NodeContext::attr_tensor(const std::string& name) const {
  const auto* a = attr(name);
  if (!a) fail("attribute '" + name + "' is required");
  if (a->type() != ::onnx::AttributeProto::TENSOR)
    fail("attribute '" + name + "' must be a tensor");
  return read_tensor(a->t(), where() + " attribute '" + name + "'", int64_t{1} << 31);
}

void NodeContext::check_attrs(const std::vector<std::string>& known) const {
  for (const auto& a : node_.attribute()) {
    bool ok = false;
    for (const auto& k : known) ok |= a.name() == k;
    if (ok) continue;
    std::string list;
    for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
    fail("attribute '" + a.name() +
         "' is not supported (supported: " + (list.empty() ? "none" : list) + ")");
  }
}

std::string NodeContext::out_name(size_t i) const {
  if (i >= num_outputs()) fail("has no output " + std::to_string(i));
  const std::string n = identifier(node_.output(static_cast<int>(i)));
  return program_.has_tensor(n) ? program_.unique_name(n) : n;
}

// ---- helpers --------------------------------------------------------------

DType dtype_of(int32_t t, const std::string& where) {
  using T = ::onnx::TensorProto;
  switch (t) {
    case T::FLOAT:
      return DType::F32;
    case T::DOUBLE:
      return DType::F64;
    case T::FLOAT16:
      return DType::F16;
    case T::BFLOAT16:
      return DType::BF16;
    case T::INT8:
      return DType::I8;
    case T::INT16:
      return DType::I16;
    case T::INT32:
      return DType::I32;
    case T::INT64:
      return DType::I64;
    case T::UINT8:
      return DType::U8;
    case T::UINT16:
      return DType::U16;
    case T::UINT32:
      return DType::U32;
    case T::UINT64:
      return DType::U64;
    case T::BOOL:
      return DType::Bool;
    default: {
      const std::string name = ::onnx::TensorProto_DataType_IsValid(t)
                                   ? ::onnx::TensorProto_DataType_Name(t)
                                   : std::to_string(t);
      throw ImportError(
          "onnx import: " + where + ": element type " + name +
          " is not supported (supported: FLOAT, DOUBLE, FLOAT16, BFLOAT16, INT8/16/32/64, "
          "UINT8/16/32/64, BOOL)");
    }
  }
}

int32_t onnx_type_of(DType t) {
  using T = ::onnx::TensorProto;
  switch (t) {
    case DType::F32:
      return T::FLOAT;
    case DType::F64:
      return T::DOUBLE;
    case DType::F16:
      return T::FLOAT16;
    case DType::BF16:
      return T::BFLOAT16;
    case DType::I8:
      return T::INT8;
    case DType::I16:
      return T::INT16;
    case DType::I32:
      return T::INT32;
    case DType::I64:
      return T::INT64;
    case DType::U8:
      return T::UINT8;
    case DType::U16:
      return T::UINT16;
    case DType::U32:
      return T::UINT32;
    case DType::U64:
      return T::UINT64;
    case DType::Bool:
      return T::BOOL;
  }
  return T::UNDEFINED;
}

namespace {

double half_to_double(uint16_t h) {
  const uint32_t sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  double v;
  if (exp == 0)
    v = std::ldexp(static_cast<double>(man), -24);
  else if (exp == 31)
    v = man ? NAN : INFINITY;
  else
    v = std::ldexp(static_cast<double>(man | 0x400), static_cast<int>(exp) - 25);
  return sign ? -v : v;
}

double bf16_to_double(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// One element of `bytes` (little-endian, of type t) at index i.
double element(const uint8_t* p, DType t) {
  switch (t) {
    case DType::F32: {
      float v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case DType::F64: {
      double v;
      std::memcpy(&v, p, 8);
      return v;
    }
    case DType::F16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return half_to_double(v);
    }
    case DType::BF16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return bf16_to_double(v);
    }
    case DType::I8:
      return static_cast<int8_t>(*p);
    case DType::U8:
      return *p;
    case DType::Bool:
      return *p != 0;
    case DType::I16: {
      int16_t v;
      std::memcpy(&v, p, 2);
      return v;
    }
    case DType::U16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return v;
    }
    case DType::I32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case DType::U32: {
      uint32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case DType::I64: {
      int64_t v;
      std::memcpy(&v, p, 8);
      return static_cast<double>(v);
    }
    case DType::U64: {
      uint64_t v;
      std::memcpy(&v, p, 8);
      return static_cast<double>(v);
    }
  }
  return 0;
}

}  // namespace

Constant read_tensor(const ::onnx::TensorProto& t, const std::string& where0,
                     int64_t max_elements) {
  const std::string where = where0 + (t.name().empty() ? "" : " tensor '" + t.name() + "'");
  Constant c;
  c.dtype = dtype_of(t.data_type(), where);
  int64_t n = 1;
  for (const int64_t d : t.dims()) {
    if (d < 0) throw ImportError("onnx import: " + where + ": negative dim " + std::to_string(d));
    if (d > 0 && n > max_elements / d)
      throw ImportError("onnx import: " + where + ": more than " + std::to_string(max_elements) +
                        " elements (the importer's limit, ImportOptions::max_tensor_elements)");
    n *= d;
    c.shape.push_back(d);
  }
  if (t.data_location() == ::onnx::TensorProto::EXTERNAL)
    throw ImportError("onnx import: " + where +
                      ": data stored outside the model file is not supported; "
                      "save the model with its weights inside (onnx.save(model, path, "
                      "save_as_external_data=False))");
  const auto bad_count = [&](int64_t have) {
    throw ImportError("onnx import: " + where + ": holds " + std::to_string(have) +
                      " elements where its dims " + "say " + std::to_string(n) +
                      " (truncated or mistyped data)");
  };
  // The data's size is checked before anything is allocated: the dims of an
  // untrusted file may promise far more than it holds.
  if (t.has_raw_data()) {
    const std::string& raw = t.raw_data();
    const int64_t b = bytes(c.dtype);
    if (static_cast<int64_t>(raw.size()) != n * b) bad_count(static_cast<int64_t>(raw.size()) / b);
    c.data.resize(static_cast<size_t>(n));
    const auto* p = reinterpret_cast<const uint8_t*>(raw.data());
    for (int64_t i = 0; i < n; ++i) c.data[static_cast<size_t>(i)] = element(p + i * b, c.dtype);
    return c;
  }
  const auto take = [&](const auto& field, auto convert) {
    if (field.size() != n) bad_count(field.size());
    c.data.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      c.data[static_cast<size_t>(i)] = convert(field.Get(static_cast<int>(i)));
  };
  switch (c.dtype) {
    case DType::F32:
      take(t.float_data(), [](float v) { return static_cast<double>(v); });
      break;
    case DType::F64:
      take(t.double_data(), [](double v) { return v; });
      break;
    case DType::I64:
      take(t.int64_data(), [](int64_t v) { return static_cast<double>(v); });
      break;
    case DType::U32:
    case DType::U64:
      take(t.uint64_data(), [](uint64_t v) { return static_cast<double>(v); });
      break;
    case DType::F16:
      take(t.int32_data(), [](int32_t v) { return half_to_double(static_cast<uint16_t>(v)); });
      break;
    case DType::BF16:
      take(t.int32_data(), [](int32_t v) { return bf16_to_double(static_cast<uint16_t>(v)); });
      break;
    default:
      take(t.int32_data(), [](int32_t v) { return static_cast<double>(v); });
      break;
  }
  return c;
}

std::string identifier(const std::string& onnx_name) {
  std::string s;
  for (const char ch : onnx_name) {
    const bool ok = std::isalnum(static_cast<unsigned char>(ch)) || ch == '_';
    const char c = ok ? ch : '_';
    if (c == '_' && (s.empty() || s.back() == '_')) continue;  // no leading '_' runs, no "__"
    s += c;
  }
  while (!s.empty() && s.back() == '_') s.pop_back();
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) s = "t" + s;
  return s;
}

Tensor literal(Program& p, double value, DType t, const std::string& name) {
  return p.define(p.has_tensor(name) ? p.unique_name(name) : name, {}, {}, make_const(value, t),
                  OpKind::Elementwise, "constant");
}

Tensor scalar(NodeContext& c, double v, DType t) {
  return literal(c.program(), v, t, c.out_name() + "_k");
}

std::vector<int64_t> static_shape(const Tensor& t, const std::string& where) {
  std::vector<int64_t> s;
  for (const Dim& d : t.shape()) {
    if (d.is_symbolic())
      throw ImportError("onnx import: " + where + ": '" + t.name() + "' has a symbolic dim '" +
                        d.sym + "'; give the input shapes (ImportOptions::input_shapes)");
    s.push_back(d.value);
  }
  return s;
}

int normalize_axis(int64_t axis, int rank, const NodeContext& c, const std::string& what) {
  if (axis < -rank || axis >= rank)
    c.fail(what + " " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank) +
           " (valid: " + std::to_string(-rank) + " to " + std::to_string(rank - 1) + ")");
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

}  // namespace pto::onnx
