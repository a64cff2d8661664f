#include "frontends/onnx/Import.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "dsl/Error.h"
#include "dsl/Interpreter.h"
#include "dsl/ops/Ops.h"
#include "frontends/onnx/ChannelsLast.h"
#include "frontends/onnx/Converter.h"

namespace pto::onnx {
namespace {

// Runs a node's converter; a library error (a shape, type or attribute the
// operator rejects) becomes an ImportError naming the node.
std::vector<Value> run_converter(const ::onnx::NodeProto& node, NodeContext& c) {
  try {
    return converters().at(node.op_type())(c);
  } catch (const ImportError&) {
    throw;
  } catch (const Error& e) {
    throw ImportError("onnx import: " + c.where() + ": " + e.what());
  }
}

// The walk over one graph: values by ONNX name, the program, its weights.
class Importer {
 public:
  Importer(const ::onnx::ModelProto& m, const ImportOptions& o) : m_(m), o_(o) {}

  ImportedModel run() {
    const auto& g = m_.graph();
    out_.opset = opset();
    if (g.node_size() > o_.max_nodes)
      throw ImportError("onnx import: the graph has " + std::to_string(g.node_size()) +
                        " nodes, more than the " + std::to_string(o_.max_nodes) +
                        " accepted (ImportOptions::max_nodes)");
    out_.program = Program(identifier(g.name().empty() ? "model" : g.name()));
    for (const auto& init : g.initializer()) {
      if (init.name().empty()) throw ImportError("onnx import: an initializer has no name");
      values_[init.name()] = Value::of(read_tensor(init, "initializer", o_.max_tensor_elements));
    }
    for (const auto& in : g.input()) {
      if (values_.count(in.name())) continue;  // an initializer's declaration (IR < 4)
      add_input(in);
    }
    for (int i = 0; i < g.node_size(); ++i) convert(g.node(i));
    for (const auto& o : g.output()) add_output(o.name());
    return std::move(out_);
  }

 private:
  int64_t opset() const {
    for (const auto& op : m_.opset_import())
      if (op.domain().empty() || op.domain() == "ai.onnx") return op.version();
    throw ImportError(
        "onnx import: the model imports no version of the default operator set (opset_import)");
  }

  void add_input(const ::onnx::ValueInfoProto& in) {
    const std::string where = "graph input '" + in.name() + "'";
    if (in.name().empty()) throw ImportError("onnx import: a graph input has no name");
    if (const auto v = o_.input_values.find(in.name()); v != o_.input_values.end()) {
      values_[in.name()] = Value::of(v->second);
      return;
    }
    if (!in.type().has_tensor_type())
      throw ImportError("onnx import: " + where +
                        " is not a tensor (sequences and maps are not supported)");
    const auto& tt = in.type().tensor_type();
    const DType dt = dtype_of(tt.elem_type(), where);
    std::vector<int64_t> shape;
    const auto given = o_.input_shapes.find(in.name());
    if (given != o_.input_shapes.end()) {
      shape = given->second;
    } else {
      if (!tt.has_shape())
        throw ImportError("onnx import: " + where +
                          " has no shape; give it (ImportOptions::input_shapes)");
      for (const auto& d : tt.shape().dim()) {
        if (!d.has_dim_value())
          throw ImportError(
              "onnx import: " + where + " has a dim '" + d.dim_param() +
              "' without a value; give the input's shape (ImportOptions::input_shapes)");
        shape.push_back(d.dim_value());
      }
    }
    Shape s;
    int64_t n = 1;
    for (const int64_t d : shape) {
      if (d < 1)
        throw ImportError("onnx import: " + where + ": dim " + std::to_string(d) +
                          " (empty tensors are not supported)");
      if (n > o_.max_tensor_elements / d)
        throw ImportError("onnx import: " + where + ": too many elements");
      n *= d;
      s.push_back(Dim(d));
    }
    const Tensor t = out_.program.input(unique(identifier(in.name())), s, dt);
    values_[in.name()] = Value::of(t);
    out_.input_names.push_back(in.name());
    out_.inputs.push_back(t.name());
  }

  std::string unique(const std::string& n) const {
    return out_.program.has_tensor(n) ? out_.program.unique_name(n) : n;
  }

  // A constant read by the program: a literal if it is one element, else an
  // input bound to its data (one per ONNX value).
  Tensor materialize(const std::string& onnx_name, const Constant& c) {
    const auto found = materialized_.find(onnx_name);
    if (found != materialized_.end()) return found->second;
    return materialized_[onnx_name] = add_weight(onnx_name, c);
  }

  Tensor add_weight(const std::string& name, const Constant& c) {
    Program& p = out_.program;
    Tensor t;
    if (c.numel() == 1) {
      t = literal(p, c.data[0], c.dtype, unique(identifier(name)));
      if (!c.shape.empty()) t = ops::reshape(t, c.shape);
    } else {
      Shape s;
      for (const int64_t d : c.shape) s.push_back(Dim(d));
      if (c.numel() == 0)
        throw ImportError("onnx import: constant '" + name + "' is empty (not supported)");
      t = p.input(unique(identifier(name)), s, c.dtype);
      out_.weights.push_back({t.name(), c});
    }
    return t;
  }

  // The value `onnx_name` as a program tensor in its own layout: a constant
  // materialized, a channels-last value transposed to NCHW (once: later
  // readers take the same tensor).
  Tensor tensor_of(const std::string& onnx_name, const Value& v) {
    if (v.tensor.defined()) return v.tensor;
    if (v.constant) return materialize(onnx_name, *v.constant);
    Value& stored = values_.at(onnx_name);
    if (!stored.tensor.defined())
      stored.tensor =
          channels_last::to_nchw(v.channels_last, unique(identifier(onnx_name) + "_nchw"));
    return stored.tensor;
  }

  void convert(const ::onnx::NodeProto& node) {
    const std::string where =
        "node '" +
        (node.name().empty() ? (node.output_size() ? node.output(0) : "") : node.name()) + "' (" +
        node.op_type() + ")";
    if (!node.domain().empty() && node.domain() != "ai.onnx")
      throw ImportError("onnx import: " + where + ": operator domain '" + node.domain() +
                        "' is not supported (the default ONNX domain only)");
    const auto& table = converters();
    const auto conv = table.find(node.op_type());
    if (conv == table.end())
      throw ImportError("onnx import: " + where + ": operator type '" + node.op_type() +
                        "' is not supported (" + std::to_string(table.size()) +
                        " are; `pto import --ops` lists them)");
    std::vector<std::optional<Value>> inputs;
    bool all_constant = true;
    for (const std::string& name : node.input()) {
      if (name.empty()) {
        inputs.emplace_back();
        continue;
      }
      const auto v = values_.find(name);
      if (v == values_.end())
        throw ImportError(
            "onnx import: " + where + ": reads '" + name +
            "', which no earlier node, graph input or initializer defines (the graph is not in "
            "topological order, has a cycle, or misspells the name)");
      inputs.push_back(v->second);
      all_constant &= v->second.constant != nullptr;
    }
    std::optional<std::vector<Value>> cl;
    if (!all_constant) cl = elementwise_channels_last(node, inputs);
    std::vector<Value> outs = cl                                      ? std::move(*cl)
                              : all_constant && node.input_size() > 0 ? fold(node, inputs, where)
                                                                      : build(node, inputs);
    for (int i = 0; i < node.output_size(); ++i) {
      const std::string& name = node.output(i);
      if (name.empty()) continue;
      if (static_cast<size_t>(i) >= outs.size() || !outs[static_cast<size_t>(i)].defined())
        throw ImportError("onnx import: " + where + ": output " + std::to_string(i) + " ('" + name +
                          "') is not supported");
      values_[name] = outs[static_cast<size_t>(i)];
    }
  }

  std::vector<Value> build(const ::onnx::NodeProto& node,
                           const std::vector<std::optional<Value>>& inputs) {
    NodeContext c(
        node, inputs, out_.program, out_.opset,
        [this, &node, &inputs](size_t i) {
          return tensor_of(node.input(static_cast<int>(i)), *inputs[i]);
        },
        [this](const std::string& name, const Constant& k) { return add_weight(name, k); });
    return run_converter(node, c);
  }

  // An elementwise node reading a channels-last value (frontends/onnx/
  // ChannelsLast.h) is built on the channels-last forms of its operands,
  // its outputs channels-last too: the other rank-4 tensors transposed to
  // channels-last, the constants permuted alike. Not where an operand is a
  // tensor of lower rank (its broadcast would need a reshape) or the node
  // has outputs besides its first (Dropout's mask).
  std::optional<std::vector<Value>> elementwise_channels_last(
      const ::onnx::NodeProto& node, const std::vector<std::optional<Value>>& inputs) {
    if (!channels_last::elementwise(node.op_type())) return std::nullopt;
    for (int i = 1; i < node.output_size(); ++i)
      if (!node.output(i).empty()) return std::nullopt;
    bool any = false;
    for (const auto& v : inputs) {
      if (!v) continue;
      if (v->channels_last.defined()) {
        any = true;
      } else if (v->constant) {
        if (v->constant->shape.size() > 4) return std::nullopt;
      } else if (v->tensor.rank() != 4) {
        return std::nullopt;
      }
    }
    if (!any) return std::nullopt;
    ::onnx::NodeProto n = node;
    std::vector<std::optional<Value>> in = inputs;
    for (size_t i = 0; i < in.size(); ++i) {
      if (!in[i]) continue;
      Value& v = *in[i];
      if (v.channels_last.defined()) {
        v = Value::of(v.channels_last);
      } else if (v.constant) {
        // A constant input as a new value of its own (materialize caches by name).
        const std::string name = node.input(static_cast<int>(i)) + "__channels_last";
        if (!values_.count(name)) values_[name] = Value::of(channels_last::permute(*v.constant));
        n.set_input(static_cast<int>(i), name);
        v = values_[name];
      } else {
        v = Value::of(channels_last::from_nchw(v.tensor, unique(v.tensor.name() + "_nhwc")));
      }
    }
    std::vector<Value> outs = build(n, in);
    for (Value& o : outs) {
      if (!o.tensor.defined() || o.tensor.rank() != 4)
        throw ImportError("onnx import: node '" + node.name() + "' (" + node.op_type() +
                          "): a channels-last elementwise output is not rank 4 (internal)");
      o = Value::of_channels_last(o.tensor);
    }
    return outs;
  }

  // Every input known: the node is built in a program of its own whose
  // inputs are the constants, and evaluated by the float64 interpreter.
  std::vector<Value> fold(const ::onnx::NodeProto& node,
                          const std::vector<std::optional<Value>>& inputs,
                          const std::string& where) {
    Program q("fold");
    std::map<std::string, HostTensor> data;
    std::vector<std::optional<Value>> in = inputs;
    for (size_t i = 0; i < in.size(); ++i) {
      if (!in[i]) continue;
      const Constant& c = *in[i]->constant;
      Shape s;
      for (const int64_t d : c.shape) s.push_back(Dim(d));
      const std::string n = "c" + std::to_string(i);
      in[i]->tensor = q.input(n, s, c.dtype);
      data[n] = HostTensor{c.shape, c.data};
    }
    int extra = 0;
    NodeContext c(
        node, in, q, out_.opset, [&](size_t i) { return in[i]->tensor; },
        [&](const std::string&, const Constant& k) {
          Shape s;
          for (const int64_t d : k.shape) s.push_back(Dim(d));
          const std::string n = "k" + std::to_string(extra++);
          data[n] = HostTensor{k.shape, k.data};
          return q.input(n, s, k.dtype);
        });
    std::vector<Value> outs = run_converter(node, c);
    bool any_tensor = false;
    for (const Value& v : outs) any_tensor |= v.tensor.defined();
    if (!any_tensor) return outs;
    for (const Value& v : outs)
      if (v.tensor.defined()) q.output(v.tensor);
    const auto all = interpret(q, data);
    for (Value& v : outs) {
      if (!v.tensor.defined()) continue;
      const HostTensor& h = all.at(v.tensor.name());
      if (h.numel() > o_.max_tensor_elements)
        throw ImportError("onnx import: " + where + ": folds to too many elements");
      v = Value::of(Constant{v.tensor.dtype(), h.shape, h.data});
    }
    ++out_.folded_nodes;
    return outs;
  }

  void add_output(const std::string& name) {
    const auto v = values_.find(name);
    if (v == values_.end())
      throw ImportError("onnx import: graph output '" + name + "' is computed by no node");
    Tensor t = tensor_of(name, v->second);
    Program& p = out_.program;
    // An output is a stage of its own: a graph input, a weight or a tensor
    // already given as another output gets a copy.
    const bool taken =
        std::find(out_.outputs.begin(), out_.outputs.end(), t.name()) != out_.outputs.end();
    if (p.tensor(t.name()).is_input || taken || !p.find_stage(t.name()))
      t = ops::call("identity", {t}, nlohmann::json::object(), unique(identifier(name)));
    p.output(t);
    out_.output_names.push_back(name);
    out_.outputs.push_back(t.name());
  }

  const ::onnx::ModelProto& m_;
  const ImportOptions& o_;
  ImportedModel out_;
  std::map<std::string, Value> values_;
  std::map<std::string, Tensor> materialized_;
};

}  // namespace

const std::map<std::string, Converter>& converters() {
  static const std::map<std::string, Converter> table = [] {
    std::map<std::string, Converter> t;
    add_elementwise_converters(t);
    add_reduce_converters(t);
    add_nn_converters(t);
    add_shape_converters(t);
    add_recurrent_converters(t);
    add_attention_converters(t);
    return t;
  }();
  return table;
}

std::vector<std::string> supported_operators() {
  std::vector<std::string> names;
  for (const auto& [n, c] : converters()) names.push_back(n);
  return names;
}

ImportedModel import_onnx(const std::string& bytes, const ImportOptions& options) {
  if (bytes.size() > options.max_model_bytes)
    throw ImportError("onnx import: the model has " + std::to_string(bytes.size()) +
                      " bytes, more than the " + std::to_string(options.max_model_bytes) +
                      " accepted (ImportOptions::max_model_bytes)");
  ::onnx::ModelProto m;
  if (!m.ParseFromString(bytes))
    throw ImportError(
        "onnx import: not a valid ONNX model (the protobuf does not parse: truncated, or not an "
        ".onnx file)");
  if (!m.has_graph()) throw ImportError("onnx import: the model has no graph");
  return Importer(m, options).run();
}

ImportedModel import_onnx_file(const std::string& path, const ImportOptions& options) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw ImportError("onnx import: cannot open '" + path + "'");
  std::ostringstream s;
  s << f.rdbuf();
  return import_onnx(s.str(), options);
}

}  // namespace pto::onnx
