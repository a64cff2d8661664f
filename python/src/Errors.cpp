#include "Errors.h"

#include "dsl/Error.h"

namespace pto::py {
namespace {

namespace py = pybind11;

// A new exception class `name` in module `m` deriving from `bases` (a tuple).
// The object lives as long as the module (stored as a module attribute).
PyObject* new_exception(py::module_& m, const char* name, py::tuple bases, const char* doc) {
  const std::string qual = m.attr("__name__").cast<std::string>() + "." + name;
  PyObject* cls = PyErr_NewExceptionWithDoc(qual.c_str(), doc, bases.ptr(), nullptr);
  if (!cls) throw py::error_already_set();
  m.add_object(name, py::handle(cls));  // steals nothing: add_object increments
  return cls;
}

}  // namespace

void bind_errors(py::module_& m) {
  PyObject* base = new_exception(m, "PtoError", py::make_tuple(py::handle(PyExc_Exception)),
                                 "Base class of every error PTO raises.");
  auto with = [&](PyObject* builtin) { return py::make_tuple(py::handle(base), py::handle(builtin)); };
  static PyObject* shape = new_exception(m, "ShapeError", with(PyExc_ValueError), "Rank, extent or broadcasting mismatch.");
  static PyObject* dtype = new_exception(m, "DTypeError", with(PyExc_TypeError), "Unsupported or mismatched element type.");
  static PyObject* defn = new_exception(m, "DefinitionError", with(PyExc_ValueError),
                                        "Malformed definition: unknown tensor or operator, bad attribute.");
  static PyObject* sched = new_exception(m, "ScheduleError", with(PyExc_ValueError), "Invalid schedule.");
  static PyObject* target = new_exception(m, "TargetError", with(PyExc_ValueError), "Unknown or unsupported target.");
  static PyObject* compile = new_exception(m, "CompileError", with(PyExc_RuntimeError), "Code generation failed.");
  static PyObject* run = new_exception(m, "KernelError", with(PyExc_RuntimeError), "A compiled kernel failed while running.");
  static PyObject* mem = new_exception(m, "DeviceMemoryError", py::make_tuple(py::handle(run), py::handle(PyExc_MemoryError)),
                                       "DEVICE_MEMORY_EXHAUSTED: an allocation was refused.");
  static PyObject* other = base;
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const pto::ShapeError& e) {
      PyErr_SetString(shape, e.what());
    } catch (const pto::DTypeError& e) {
      PyErr_SetString(dtype, e.what());
    } catch (const pto::DefinitionError& e) {
      PyErr_SetString(defn, e.what());
    } catch (const pto::ScheduleError& e) {
      PyErr_SetString(sched, e.what());
    } catch (const pto::TargetError& e) {
      PyErr_SetString(target, e.what());
    } catch (const pto::CompileError& e) {
      PyErr_SetString(compile, e.what());
    } catch (const pto::MemoryError& e) {
      PyErr_SetString(mem, e.what());
    } catch (const pto::RuntimeError& e) {
      PyErr_SetString(run, e.what());
    } catch (const pto::Error& e) {
      PyErr_SetString(other, e.what());
    }
  });
}

}  // namespace pto::py
