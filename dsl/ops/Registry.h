// The operator table: one row per operator type with its name, kind, summary,
// input count, attribute schema and builder. It is the one list of operators:
// `pto ops` prints it, call() dispatches on it, Python lists and calls it, and
// default schedules key on the kinds its builders give their stages.
//
// call() checks the attributes against the row's schema before the builder
// runs, so a typo or a value of the wrong type is a DefinitionError naming the
// operator, the attribute and the valid ones, and a builder reads only checked
// values with their defaults filled in.
//
// Rows live with their family where a family is itself a table (unary_ops()
// in Unary.cpp, elementwise_ops() in Elementwise.cpp, and the families below);
// the first version's other rows are in Registry.cpp. A new operator is one
// new row.
#pragma once

#include <array>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "dsl/Program.h"

namespace pto::ops {

enum class AttrType {
  Int,     // an integer
  Float,   // any number
  Bool,    // true or false
  String,  // text
  Ints,    // a list of integers
  Floats,  // a list of numbers
  Shape,   // a list of sizes and symbol names
  DType,   // a dtype name (f32, bf16, i64, ...)
};
std::string_view to_string(AttrType t);

struct AttrSpec {
  std::string name;
  AttrType type;
  nlohmann::json def = nullptr;  // the default; null: none (absent unless given, or required)
  bool required = false;
};

// Attribute values checked against a schema: every key is in the schema with
// a value of its type, and every attribute with a default has a value.
class Attrs {
 public:
  Attrs(std::string op, nlohmann::json values) : op_(std::move(op)), v_(std::move(values)) {}
  const std::string& op() const { return op_; }
  bool has(const std::string& key) const { return v_.contains(key); }
  // The value as T (int, int64_t, double, bool, std::string, std::vector<int>,
  // std::vector<int64_t>); the attribute must have a value (given or default).
  template <typename T>
  T get(const std::string& key) const {
    return at(key).get<T>();
  }
  std::optional<double> opt_number(const std::string& key) const {
    return has(key) ? std::optional<double>(get<double>(key)) : std::nullopt;
  }
  // A list attribute of exactly two integers (2-D stride, padding, ...).
  std::array<int, 2> pair(const std::string& key) const;
  Shape shape(const std::string& key) const;
  DType dtype(const std::string& key) const;

 private:
  const nlohmann::json& at(const std::string& key) const;
  std::string op_;
  nlohmann::json v_;
};

using Builder = std::function<Tensor(const std::vector<Tensor>& inputs, const Attrs& attrs,
                                     const std::string& name)>;

struct OpInfo {
  std::string name;
  OpKind kind;
  std::string summary;
  size_t min_inputs = 1, max_inputs = 1;
  std::vector<AttrSpec> attrs;
  Builder build;
};

// All operator types, sorted by name.
const std::vector<OpInfo>& registry();
// The row of `op`; throws DefinitionError listing the operators.
const OpInfo& op_info(const std::string& op);
// Checks `attrs` (a JSON object or null) against the row's schema and fills in
// defaults; throws DefinitionError naming the operator, the attribute and the valid ones.
Attrs check_attrs(const OpInfo& op, const nlohmann::json& attrs);

// Calls any operator by its registry name with attributes as JSON, e.g.
// call("softmax", {x}, {{"axis", -1}}). This is how Python, the CLI and graph
// importers reach the whole library without a binding per operator. Unknown
// names or attributes throw DefinitionError naming the valid ones. Operators
// with several results (split) take an `index` attribute choosing one.
Tensor call(const std::string& op, const std::vector<Tensor>& inputs,
            const nlohmann::json& attrs = {}, const std::string& name = "");

// The rows of the families that are tables of formulas.
std::vector<OpInfo> unary_ops();        // Unary.cpp
std::vector<OpInfo> elementwise_ops();  // Elementwise.cpp: binary operators, where, lerp
std::vector<OpInfo> loss_ops();         // Loss.cpp
std::vector<OpInfo> sort_ops();         // Sort.cpp: sort, argsort, topk
std::vector<OpInfo> indexing_ops();     // Indexing.cpp: gather_nd, scatter_nd
std::vector<OpInfo> rearrange_ops();    // Rearrange.cpp: depth_to_space, reverse_sequence, ...
std::vector<OpInfo> neural_net_ops();   // NeuralNet.cpp: hardmax, lrn, lp_pool, gemm, glu, ...
std::vector<OpInfo> resize_ops();       // Resize.cpp
std::vector<OpInfo> quantize_ops();     // Quantize.cpp: quantize_linear, dequantize_linear
std::vector<OpInfo> recurrent_ops();    // Recurrent.cpp: rnn, gru, lstm
std::vector<OpInfo> rotary_ops();       // Rotary.cpp: rotary_embedding

}  // namespace pto::ops
