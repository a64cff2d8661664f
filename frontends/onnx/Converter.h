// What an ONNX operator's converter sees and gives back.
//
// A converter builds one node with the operator library: it reads the node's
// inputs (program tensors, or constants known at import) and attributes
// through NodeContext, which checks them and reports a bad one as an
// ImportError naming the node, and returns the node's outputs as Values. The
// table of converters (converters()) is the one list of supported operator
// types; each family's rows live in its own file (ConvertElementwise.cpp,
// ConvertReduce.cpp, ConvertNn.cpp, ConvertShape.cpp, ConvertRecurrent.cpp,
// ConvertAttention.cpp).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dsl/Program.h"
#include "frontends/onnx/Import.h"
#include "onnx/onnx.pb.h"

namespace pto::onnx {

// A node's input or output: a tensor of the program being built, or a
// constant. A rank-4 value may be held channels-last (`channels_last`
// [N, H, W, C] of the NCHW value; frontends/onnx/ChannelsLast.h): its NCHW
// `tensor` is then made, a transpose, only when a node that needs that layout
// reads it.
struct Value {
  Tensor tensor;
  std::shared_ptr<const Constant> constant;
  Tensor channels_last;
  static Value of(Tensor t) { return {std::move(t), nullptr, Tensor()}; }
  static Value of(Constant c) {
    return {Tensor(), std::make_shared<const Constant>(std::move(c)), Tensor()};
  }
  static Value of_channels_last(Tensor t) { return {Tensor(), nullptr, std::move(t)}; }
  bool defined() const { return tensor.defined() || constant || channels_last.defined(); }
};

class NodeContext {
 public:
  // `materialize` turns input i, a constant or a channels-last value, into a
  // tensor of `program`; `add_constant` makes a constant the converter
  // computed a tensor of it (named after `name`).
  NodeContext(const ::onnx::NodeProto& node, std::vector<std::optional<Value>> inputs,
              Program program, int64_t opset, std::function<Tensor(size_t)> materialize,
              std::function<Tensor(const std::string&, const Constant&)> add_constant);

  const std::string& op() const { return node_.op_type(); }
  // "node 'conv1' (Conv)": how errors name it.
  std::string where() const;
  [[noreturn]] void fail(const std::string& msg) const;
  int64_t opset() const { return opset_; }
  Program& program() { return program_; }

  size_t num_inputs() const { return inputs_.size(); }
  bool has_input(size_t i) const { return i < inputs_.size() && inputs_[i].has_value(); }
  // Input i as a program tensor (a constant is materialized, a channels-last
  // value transposed to NCHW); throws when absent.
  Tensor input(size_t i);
  // Input i channels-last ([N, H, W, C]) where it is held so, else undefined.
  Tensor input_channels_last(size_t i) const;
  // Input i's shape, without materializing it (NCHW for a channels-last value).
  std::vector<int64_t> input_shape(size_t i);
  // A constant the converter computed (folded parameters) as a tensor.
  Tensor constant_tensor(const std::string& name, const Constant& c);
  // Input i's value when it is known at import, else null.
  const Constant* constant(size_t i) const;
  // Input i, which must be known at import; else an ImportError saying
  // "input i ('<onnx name>', what) must be known at import" (pypto.onnx
  // retries with that graph input's value fixed).
  const Constant& known_input(size_t i, const std::string& what) const;
  // Input i, which must be known at import, as integers (shapes, axes, pads).
  std::vector<int64_t> ints_input(size_t i, const std::string& what) const;

  bool has_attr(const std::string& name) const;
  int64_t attr_int(const std::string& name, std::optional<int64_t> def = std::nullopt) const;
  double attr_float(const std::string& name, std::optional<double> def = std::nullopt) const;
  std::string attr_string(const std::string& name,
                          std::optional<std::string> def = std::nullopt) const;
  std::vector<int64_t> attr_ints(const std::string& name,
                                 std::optional<std::vector<int64_t>> def = std::nullopt) const;
  std::vector<double> attr_floats(const std::string& name) const;        // absent: empty
  std::vector<std::string> attr_strings(const std::string& name) const;  // absent: empty
  Constant attr_tensor(const std::string& name) const;
  // Every attribute is one of `known`; others are an error naming them.
  void check_attrs(const std::vector<std::string>& known) const;

  size_t num_outputs() const { return static_cast<size_t>(node_.output_size()); }
  // Is output i asked for (present and named)?
  bool has_output(size_t i) const {
    return i < num_outputs() && !node_.output(static_cast<int>(i)).empty();
  }
  // The program name for output i (the ONNX name made an identifier).
  std::string out_name(size_t i = 0) const;

 private:
  const ::onnx::AttributeProto* attr(const std::string& name) const;
  const ::onnx::NodeProto& node_;
  std::vector<std::optional<Value>> inputs_;
  Program program_;
  int64_t opset_;
  std::function<Tensor(size_t)> materialize_;
  std::function<Tensor(const std::string&, const Constant&)> add_constant_;
};

using Converter = std::function<std::vector<Value>(NodeContext&)>;

// Every supported op type of the default domain -> its converter.
const std::map<std::string, Converter>& converters();
// The rows of each family.
void add_elementwise_converters(std::map<std::string, Converter>& t);
void add_reduce_converters(std::map<std::string, Converter>& t);
void add_nn_converters(std::map<std::string, Converter>& t);
void add_shape_converters(std::map<std::string, Converter>& t);
void add_recurrent_converters(std::map<std::string, Converter>& t);
void add_attention_converters(std::map<std::string, Converter>& t);

// ---- shared helpers --------------------------------------------------------
// A converter's single output.
inline std::vector<Value> one(Tensor t) {
  return {Value::of(std::move(t))};
}
// A scalar of type t as a literal stage named after the node's output.
Tensor scalar(NodeContext& c, double v, DType t);
// The PTO type of an ONNX TensorProto.DataType; throws ImportError naming `where`.
DType dtype_of(int32_t onnx_type, const std::string& where);
// The ONNX TensorProto.DataType of a PTO type.
int32_t onnx_type_of(DType t);
// A constant read from a TensorProto (raw or typed data), size-checked.
Constant read_tensor(const ::onnx::TensorProto& t, const std::string& where, int64_t max_elements);
// An identifier for the program from an ONNX value name ("/l1/Add_output_0" -> "l1_Add_output_0").
std::string identifier(const std::string& onnx_name);
// A rank-0 or small constant as a program tensor of its own: a literal stage.
Tensor literal(Program& p, double value, DType t, const std::string& name);
// Static extents of a tensor (every dim is static after import's shape binding).
std::vector<int64_t> static_shape(const Tensor& t, const std::string& where);
// Normalizes a possibly negative axis of a rank-r tensor; throws naming the node.
int normalize_axis(int64_t axis, int rank, const NodeContext& c, const std::string& what = "axis");

}  // namespace pto::onnx
