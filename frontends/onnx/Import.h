// ONNX import: a model file in, a DSL Program out.
//
// import_onnx() reads an ONNX ModelProto (untrusted bytes: every size and
// index is checked before it is used, so a truncated, mistyped, cyclic or
// absurd-size model is an ImportError naming the node, never a crash or an
// unbounded allocation), walks its graph in order and builds each node with
// the operator library (ops::call) through the converters of
// frontends/onnx/Converter.h. Nodes whose inputs are all constants
// (initializers, Constant nodes, shapes of static tensors) are evaluated at
// import by the float64 interpreter, so the shape arithmetic exporters emit
// (Shape -> Gather -> Concat -> Reshape) and weights built by
// ConstantOfShape fold away. What stays constant and is read by the graph
// becomes a program input bound to its data (`weights`); scalars become
// literals that fuse into their consumers.
//
// Sizes: every dim is static at import. A model's symbolic dims (dim_param,
// e.g. batch or sequence) take their values from `input_shapes` (Python's
// pypto.onnx.load imports once per input shape it is called with).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "dsl/Program.h"

namespace pto::onnx {

// A value known at import, in float64 (exact for integers below 2^53), with
// its element type and shape.
struct Constant {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<double> data;
  int64_t numel() const;
};

// A constant the program reads as an input (`name`).
struct Weight {
  std::string name;
  Constant value;
};

struct ImportOptions {
  // Shapes of the graph inputs (by ONNX name), overriding the model's; needed
  // where the model leaves a dim symbolic or unknown.
  std::map<std::string, std::vector<int64_t>> input_shapes;
  // Graph inputs whose values are fixed for this import: shape arguments
  // (axes, pads, a target shape) that a model takes as inputs. They fold
  // like initializers and are not program inputs.
  std::map<std::string, Constant> input_values;
  // The largest model file, tensor and graph accepted (bytes, elements,
  // nodes): bounds on what an untrusted file can make the importer allocate.
  uint64_t max_model_bytes = uint64_t{1} << 32;
  int64_t max_tensor_elements = int64_t{1} << 31;
  int64_t max_nodes = 1 << 20;
};

struct ImportedModel {
  Program program;
  // The model's graph inputs (initializers excluded), in graph order: ONNX
  // names and the program inputs they are.
  std::vector<std::string> input_names, inputs;
  // The graph outputs, in order: ONNX names and the program tensors.
  std::vector<std::string> output_names, outputs;
  // Program inputs bound to constants (initializers and folded values).
  std::vector<Weight> weights;
  int64_t opset = 0;         // of the default domain
  int64_t folded_nodes = 0;  // nodes evaluated at import
};

// Imports a serialized ModelProto. Throws ImportError (malformed model,
// unsupported operator / attribute / type, naming the node) or the DSL's
// typed errors raised by an operator (naming the node too).
ImportedModel import_onnx(const std::string& bytes, const ImportOptions& options = {});
// Reads and imports a .onnx file.
ImportedModel import_onnx_file(const std::string& path, const ImportOptions& options = {});

// The ONNX operator types the importer converts, sorted.
std::vector<std::string> supported_operators();

}  // namespace pto::onnx
