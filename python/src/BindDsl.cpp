// Bindings of the DSL: element types, expressions (with Python operators),
// Programs and Tensor handles, the operator library through ONE generic entry
// (ops::call by name, attributes as JSON text) and its registry, program JSON,
// analysis and the float64 interpreter. Python builds on these in pypto/.
#include <pybind11/numpy.h>
#include <pybind11/operators.h>
#include <pybind11/stl.h>

#include <nlohmann/json.hpp>

#include "Bindings.h"
#include "Buffers.h"
#include "dsl/Analysis.h"
#include "dsl/Interpreter.h"
#include "dsl/ProgramJson.h"
#include "dsl/Workloads.h"
#include "dsl/ops/Ops.h"

namespace pto::py {

namespace py = pybind11;

Shape shape_from_py(const py::sequence& s) {
  Shape out;
  for (const py::handle h : s) {
    if (py::isinstance<py::str>(h)) {
      out.push_back(Dim::symbol(h.cast<std::string>()));
    } else if (py::isinstance<py::int_>(h)) {
      out.push_back(Dim(h.cast<int64_t>()));
    } else {
      throw ShapeError("shape entries must be int or str (a symbolic size), got " +
                       py::repr(h).cast<std::string>());
    }
  }
  return out;
}

py::list shape_to_py(const Shape& s) {
  py::list l;
  for (const Dim& d : s) {
    if (d.is_symbolic())
      l.append(py::str(d.sym));
    else
      l.append(py::int_(d.value));
  }
  return l;
}

namespace {

std::map<std::string, int64_t> sizes_arg(const py::object& o) {
  return o.is_none() ? std::map<std::string, int64_t>{} : o.cast<std::map<std::string, int64_t>>();
}

// Expressions accept Python numbers on either side: they become weak literals.
Expr as_expr(const py::handle& h) {
  if (py::isinstance<Expr>(h)) return h.cast<Expr>();
  if (py::isinstance<py::bool_>(h)) return make_const(h.cast<bool>() ? 1 : 0, DType::Bool);
  if (py::isinstance<py::int_>(h)) return Expr(h.cast<int>());
  if (py::isinstance<py::float_>(h)) return Expr(h.cast<double>());
  throw DTypeError("cannot use " + py::repr(h).cast<std::string>() + " in an expression (int, float, bool or Expr)");
}

std::vector<Expr> exprs(const py::args& args) {
  std::vector<Expr> v;
  for (const py::handle h : args) v.push_back(as_expr(h));
  return v;
}

py::dict stage_dict(const Stage& s) {
  py::dict d;
  d["name"] = s.name;
  d["vars"] = s.vars;
  d["shape"] = shape_to_py(s.shape);
  d["dtype"] = std::string(to_string(s.dtype));
  d["op"] = s.op;
  d["kind"] = std::string(to_string(s.kind));
  d["reduce"] = s.reduce ? py::object(py::str(std::string(to_string(*s.reduce)))) : py::object(py::none());
  py::list rv;
  for (const RVar& r : s.rvars) rv.append(py::make_tuple(r.name, r.extent.str()));
  d["rvars"] = rv;
  d["reads"] = s.reads();
  d["value"] = to_string(s.value);
  return d;
}

}  // namespace

void bind_dsl(py::module_& m) {
  m.def("dtype_names", [] {
    std::vector<std::string> v;
    for (DType t : {DType::Bool, DType::I8, DType::I16, DType::I32, DType::I64, DType::U8, DType::U16, DType::U32,
                    DType::U64, DType::F16, DType::BF16, DType::F32, DType::F64})
      v.emplace_back(to_string(t));
    return v;
  });
  m.def("parse_dtype", [](const std::string& s) { return std::string(to_string(parse_dtype(s))); },
        "Canonical name of a dtype ('float32' -> 'f32'); raises DTypeError.");
  m.def("promote", [](const std::string& a, const std::string& b) {
    return std::string(to_string(promote(parse_dtype(a), parse_dtype(b))));
  });

  py::class_<Expr>(m, "Expr", "An element expression: constants, index variables, tensor accesses, operators.")
      .def(py::init([](const py::handle& h) { return as_expr(h); }))
      .def_property_readonly("dtype", [](const Expr& e) { return std::string(to_string(e.type())); })
      .def("__str__", [](const Expr& e) { return to_string(e); })
      .def("__repr__", [](const Expr& e) { return "Expr(" + to_string(e) + ")"; })
      .def("__add__", [](const Expr& a, const py::handle& b) { return a + as_expr(b); })
      .def("__radd__", [](const Expr& a, const py::handle& b) { return as_expr(b) + a; })
      .def("__sub__", [](const Expr& a, const py::handle& b) { return a - as_expr(b); })
      .def("__rsub__", [](const Expr& a, const py::handle& b) { return as_expr(b) - a; })
      .def("__mul__", [](const Expr& a, const py::handle& b) { return a * as_expr(b); })
      .def("__rmul__", [](const Expr& a, const py::handle& b) { return as_expr(b) * a; })
      .def("__truediv__", [](const Expr& a, const py::handle& b) { return a / as_expr(b); })
      .def("__rtruediv__", [](const Expr& a, const py::handle& b) { return as_expr(b) / a; })
      .def("__mod__", [](const Expr& a, const py::handle& b) { return a % as_expr(b); })
      .def("__pow__", [](const Expr& a, const py::handle& b) { return pto::pow(a, as_expr(b)); })
      .def("__neg__", [](const Expr& a) { return -a; })
      .def("__lt__", [](const Expr& a, const py::handle& b) { return a < as_expr(b); })
      .def("__le__", [](const Expr& a, const py::handle& b) { return a <= as_expr(b); })
      .def("__gt__", [](const Expr& a, const py::handle& b) { return a > as_expr(b); })
      .def("__ge__", [](const Expr& a, const py::handle& b) { return a >= as_expr(b); })
      .def("__eq__", [](const Expr& a, const py::handle& b) { return a == as_expr(b); })
      .def("__ne__", [](const Expr& a, const py::handle& b) { return a != as_expr(b); })
      .def("__and__", [](const Expr& a, const py::handle& b) { return a && as_expr(b); })
      .def("__or__", [](const Expr& a, const py::handle& b) { return a || as_expr(b); })
      .def("__invert__", [](const Expr& a) { return !a; })
      .def("__bool__", [](const Expr& e) -> bool {
        throw DefinitionError("an Expr has no truth value (it is symbolic: '" + to_string(e) +
                              "'); use pypto.where / select instead of `if`");
      })
      .attr("__hash__") = py::none();
  py::implicitly_convertible<py::int_, Expr>();
  py::implicitly_convertible<py::float_, Expr>();

  m.def("const", [](double v, const std::string& t) { return make_const(v, parse_dtype(t)); }, py::arg("value"),
        py::arg("dtype"));
  m.def("var", &pto::var, py::arg("name"));
  m.def("unary", [](const std::string& op, const py::handle& a) { return unary(parse_unop(op), as_expr(a)); },
        "Unary operator by name: neg, abs, exp, log, sqrt, tanh, erf, floor, isnan, ...");
  m.def(
      "binary",
      [](const std::string& op, const py::handle& a, const py::handle& b) {
        return binary(parse_binop(op), as_expr(a), as_expr(b));
      },
      "Binary operator by name: add, sub, mul, div, mod, min, max, pow, atan2, lt, ..., and, or, "
      "copysign");
  m.def("select", [](const py::handle& c, const py::handle& t, const py::handle& f) {
    return select(as_expr(c), as_expr(t), as_expr(f));
  });
  m.def("cast", [](const std::string& t, const py::handle& a) { return cast(parse_dtype(t), as_expr(a)); });

  py::class_<Tensor>(m, "TensorHandle", "A tensor of a Program; calling it with indices builds an access Expr.")
      .def_property_readonly("name", &Tensor::name)
      .def_property_readonly("shape", [](const Tensor& t) { return shape_to_py(t.shape()); })
      .def_property_readonly("dtype", [](const Tensor& t) { return std::string(to_string(t.dtype())); })
      .def_property_readonly("rank", &Tensor::rank)
      .def_property_readonly("program", &Tensor::program)
      .def("__call__", [](const Tensor& t, const py::args& idx) { return t(exprs(idx)); })
      .def("__repr__", [](const Tensor& t) {
        return "TensorHandle(" + t.name() + ": " + std::string(to_string(t.dtype())) + to_string(t.shape()) + ")";
      });

  py::class_<Program>(m, "Program", "A DAG of stages over tensors; every addition is validated.")
      .def(py::init<std::string>(), py::arg("name") = "program")
      .def_property_readonly("name", &Program::name)
      .def("input", [](Program& p, const std::string& name, const py::sequence& shape, const std::string& dtype) {
        return p.input(name, shape_from_py(shape), parse_dtype(dtype));
      }, py::arg("name"), py::arg("shape"), py::arg("dtype") = "f32")
      .def("define", [](Program& p, const std::string& name, const std::vector<std::string>& vars,
                        const py::sequence& shape, const py::handle& value, const std::string& kind,
                        const std::string& op) {
        return p.define(name, vars, shape_from_py(shape), as_expr(value), parse_op_kind(kind), op);
      }, py::arg("name"), py::arg("vars"), py::arg("shape"), py::arg("value"), py::arg("kind") = "custom",
         py::arg("op") = "custom")
      .def("define_reduce", [](Program& p, const std::string& name, const std::vector<std::string>& vars,
                               const py::sequence& shape, const std::string& reduce,
                               const std::vector<std::pair<std::string, py::object>>& rvars, const py::handle& body,
                               const std::string& kind, const std::string& op) {
        std::vector<RVar> rv;
        for (const auto& [n, ext] : rvars) rv.push_back({n, shape_from_py(py::make_tuple(ext))[0]});
        return p.define_reduce(name, vars, shape_from_py(shape), parse_reduce_op(reduce), rv, as_expr(body),
                               parse_op_kind(kind), op);
      }, py::arg("name"), py::arg("vars"), py::arg("shape"), py::arg("reduce"), py::arg("rvars"), py::arg("body"),
         py::arg("kind") = "reduction", py::arg("op") = "custom")
      .def("output", [](Program& p, const Tensor& t) { p.output(t); })
      .def("output", [](Program& p, const std::string& n) { p.output(n); })
      .def("inputs", [](const Program& p) {
        py::list l;
        for (const TensorInfo& t : p.inputs())
          l.append(py::make_tuple(t.name, shape_to_py(t.shape), std::string(to_string(t.dtype))));
        return l;
      }, "[(name, shape, dtype)] in call order")
      .def("stages", [](const Program& p) {
        py::list l;
        for (const Stage& s : p.stages()) l.append(stage_dict(s));
        return l;
      })
      .def("stage", [](const Program& p, const std::string& n) { return stage_dict(p.stage(n)); })
      .def("outputs", &Program::outputs)
      .def("tensor", &Program::handle, py::arg("name"))
      .def("has_tensor", &Program::has_tensor)
      .def("consumers", &Program::consumers)
      .def("symbols", [](const Program& p) {
        py::dict d;
        for (const auto& [sym, where] : p.symbols()) d[py::str(sym)] = py::make_tuple(where.first, where.second);
        return d;
      }, "{symbol: (input name, axis)} where each symbolic size is first found")
      .def("unique_name", &Program::unique_name)
      .def("clone", &Program::clone)
      .def("same_as", &Program::same_as)
      .def("__str__", &Program::str)
      .def("to_json", [](const Program& p) { return program_to_json_string(p); })
      .def_static("from_json", [](const std::string& s) { return program_from_json_string(s); })
      .def("fingerprint", [](const Program& p) { return program_fingerprint(p); })
      .def("flops", [](const Program& p, const py::object& sizes) { return program_flops(p, sizes_arg(sizes)); },
           py::arg("sizes") = py::none())
      .def("stage_flops", [](const Program& p, const std::string& stage, const py::object& sizes) {
        return stage_flops(p.stage(stage), sizes_arg(sizes));
      }, py::arg("stage"), py::arg("sizes") = py::none())
      .def("io_bytes", [](const Program& p, const py::object& sizes) { return program_io_bytes(p, sizes_arg(sizes)); },
           py::arg("sizes") = py::none());

  // The whole operator library through one entry point: no per-operator bindings.
  m.def("ops_call", [](const std::string& op, const std::vector<Tensor>& inputs, const std::string& attrs_json,
                       const std::string& name) {
    nlohmann::json attrs;
    try {
      attrs = attrs_json.empty() ? nlohmann::json::object() : nlohmann::json::parse(attrs_json);
    } catch (const nlohmann::json::exception& e) {
      throw DefinitionError(op + ": attributes are not valid JSON: " + e.what());
    }
    return ops::call(op, inputs, attrs, name);
  }, py::arg("op"), py::arg("inputs"), py::arg("attrs_json") = "{}", py::arg("name") = "");
  m.def("ops_registry", [] {
    py::list l;
    for (const ops::OpInfo& o : ops::registry()) l.append(py::make_tuple(o.name, std::string(to_string(o.kind)), o.summary));
    return l;
  }, "[(name, kind, summary)] of every operator type");

  m.def("workloads", [] {
    py::list l;
    for (const WorkloadInfo& w : workloads()) l.append(py::make_tuple(w.name, w.summary, w.defaults));
    return l;
  });
  m.def("make_workload", [](const std::string& n, const py::object& sizes) { return make_workload(n, sizes_arg(sizes)); },
        py::arg("name"), py::arg("sizes") = py::none());

  m.def("interpret", [](const Program& p, const std::map<std::string, py::array>& inputs) {
    std::map<std::string, HostTensor> in;
    for (const auto& [name, arr] : inputs) {
      const py::array_t<double, py::array::c_style | py::array::forcecast> a = py::array_t<double, py::array::c_style | py::array::forcecast>::ensure(arr);
      if (!a) throw DTypeError("interpret: input '" + name + "' cannot be converted to float64");
      HostTensor h;
      for (py::ssize_t k = 0; k < a.ndim(); ++k) h.shape.push_back(a.shape(k));
      h.data.assign(a.data(), a.data() + a.size());
      in.emplace(name, std::move(h));
    }
    std::map<std::string, HostTensor> out;
    {
      py::gil_scoped_release nogil;
      out = interpret(p, in);
    }
    py::dict d;
    for (auto& [name, h] : out) {
      std::vector<py::ssize_t> s(h.shape.begin(), h.shape.end());
      py::array_t<double> a(s);
      std::copy(h.data.begin(), h.data.end(), a.mutable_data());
      d[py::str(name)] = a;
    }
    return d;
  }, py::arg("program"), py::arg("inputs"), "Float64 reference evaluation of every tensor (slow: small sizes).");
}

}  // namespace pto::py
