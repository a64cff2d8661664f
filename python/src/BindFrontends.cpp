// Model importers (frontends/): ONNX bytes in, a Program with its inputs,
// outputs and weights out, for pypto.onnx.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "Bindings.h"
#include "frontends/onnx/Import.h"

namespace pto::py {

namespace py = pybind11;

void bind_frontends(py::module_& m) {
  m.def(
      "onnx_import",
      [](const py::bytes& model, const std::map<std::string, std::vector<int64_t>>& input_shapes,
         const std::map<std::string, std::tuple<std::string, std::vector<int64_t>,
                                                std::vector<double>>>& values) {
        onnx::ImportOptions o;
        o.input_shapes = input_shapes;
        for (const auto& [name, v] : values)
          o.input_values[name] =
              onnx::Constant{parse_dtype(std::get<0>(v)), std::get<1>(v), std::get<2>(v)};
        const std::string bytes = model;
        onnx::ImportedModel im;
        {
          py::gil_scoped_release nogil;
          im = onnx::import_onnx(bytes, o);
        }
        py::list weights;
        for (const auto& w : im.weights) {
          py::array_t<double> a(w.value.shape);
          std::copy(w.value.data.begin(), w.value.data.end(), a.mutable_data());
          weights.append(py::make_tuple(w.name, std::string(to_string(w.value.dtype)), a));
        }
        py::dict d;
        d["program"] = im.program;
        d["input_names"] = im.input_names;
        d["inputs"] = im.inputs;
        d["output_names"] = im.output_names;
        d["outputs"] = im.outputs;
        d["weights"] = weights;
        d["opset"] = im.opset;
        d["folded_nodes"] = im.folded_nodes;
        return d;
      },
      py::arg("model"), py::arg("input_shapes") = std::map<std::string, std::vector<int64_t>>{},
      py::arg("input_values") =
          std::map<std::string,
                   std::tuple<std::string, std::vector<int64_t>, std::vector<double>>>{},
      "Imports a serialized ONNX ModelProto: {program, input_names, inputs, output_names, outputs, "
      "weights: [(input, dtype, float64 array)], opset, folded_nodes}.");
  m.def("onnx_operators", &onnx::supported_operators,
        "The ONNX operator types the importer converts.");
}

}  // namespace pto::py
