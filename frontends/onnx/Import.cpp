#include "frontends/onnx/Import.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "dsl/Error.h"
#include "dsl/Interpreter.h"
#include "dsl/ops/Ops.h"
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
    Program& p = out_.program;
    Tensor t;
    if (c.numel() == 1) {
      t = literal(p, c.data[0], c.dtype, unique(identifier(onnx_name)));
      if (!c.shape.empty()) t = ops::reshape(t, c.shape);
    } else {
      Shape s;
      for (const int64_t d : c.shape) s.push_back(Dim(d));
      if (c.numel() == 0)
        throw ImportError("onnx import: constant '" + onnx_name + "' is empty (not supported)");
      t = p.input(unique(identifier(onnx_name)), s, c.dtype);
      out_.weights.push_back({t.name(), c});
    }
    materialized_[onnx_name] = t;
    return t;
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
    std::vector<Value> outs =
        all_constant && node.input_size() > 0 ? fold(node, inputs, where) : build(node, inputs);
    for (int i = 0; i < node.output_size(); ++i) {
      const std::string& name = node.output(i);
      if (name.empty()) continue;
      if (static_cast<size_t>(i) >= outs.size() ||
          (!outs[static_cast<size_t>(i)].tensor.defined() &&
           !outs[static_cast<size_t>(i)].constant))
        throw ImportError("onnx import: " + where + ": output " + std::to_string(i) + " ('" + name +
                          "') is not supported");
      values_[name] = outs[static_cast<size_t>(i)];
    }
  }

  std::vector<Value> build(const ::onnx::NodeProto& node,
                           const std::vector<std::optional<Value>>& inputs) {
    NodeContext c(node, inputs, out_.program, out_.opset, [this, &node, &inputs](size_t i) {
      return materialize(node.input(static_cast<int>(i)), *inputs[i]->constant);
    });
    return run_converter(node, c);
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
    NodeContext c(node, in, q, out_.opset, [&](size_t i) { return in[i]->tensor; });
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
    Tensor t =
        v->second.tensor.defined() ? v->second.tensor : materialize(name, *v->second.constant);
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
