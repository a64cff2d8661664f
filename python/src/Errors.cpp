// One table maps each pto::Error subclass to its Python class (Errors.h), so
// adding an error type is one row here, not a class creation plus a catch.
#include "Errors.h"

#include <iterator>
#include <string>

#include "dsl/Error.h"

namespace pto::py {
namespace {

namespace py = pybind11;

template <class E>
bool is(const pto::Error& e) {
  return dynamic_cast<const E*>(&e) != nullptr;
}

struct ErrorClass {
  const char* name;
  bool (*matches)(const pto::Error&);
  const char* parent;  // a Python class made by an earlier row; nullptr: PtoError
  PyObject* builtin;   // the builtin a Python user expects, or nullptr (the parent has it)
  const char* doc;
  PyObject* cls = nullptr;
};

// A parent comes before its children; the translator walks the table
// backwards, so the most derived class matches first.
ErrorClass* table(size_t& n) {
  static ErrorClass rows[] = {
      {"ShapeError", is<ShapeError>, nullptr, PyExc_ValueError,
       "Rank, extent or broadcasting mismatch."},
      {"SymbolicSizeError", is<SymbolicSizeError>, "ShapeError", nullptr,
       "An operator needs the value of a dim that is a symbolic size; static sizes would do."},
      {"DTypeError", is<DTypeError>, nullptr, PyExc_TypeError,
       "Unsupported or mismatched element type."},
      {"DefinitionError", is<DefinitionError>, nullptr, PyExc_ValueError,
       "Malformed definition: unknown tensor or operator, bad attribute."},
      {"ScheduleError", is<ScheduleError>, nullptr, PyExc_ValueError, "Invalid schedule."},
      {"TargetError", is<TargetError>, nullptr, PyExc_ValueError, "Unknown or unsupported target."},
      {"ModelImportError", is<ImportError>, nullptr, PyExc_ValueError,
       "A model that cannot be imported: malformed file, unsupported operator, attribute or type."},
      {"CompileError", is<CompileError>, nullptr, PyExc_RuntimeError, "Code generation failed."},
      {"KernelError", is<RuntimeError>, nullptr, PyExc_RuntimeError,
       "A compiled kernel failed while running."},
      {"DeviceMemoryError", is<MemoryError>, "KernelError", PyExc_MemoryError,
       "DEVICE_MEMORY_EXHAUSTED: an allocation was refused."},
  };
  n = std::size(rows);
  return rows;
}

PyObject* base_class = nullptr;  // PtoError

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
  base_class = new_exception(m, "PtoError", py::make_tuple(py::handle(PyExc_Exception)),
                             "Base class of every error PTO raises.");
  size_t n = 0;
  ErrorClass* rows = table(n);
  for (size_t i = 0; i < n; ++i) {
    PyObject* parent = base_class;
    for (size_t j = 0; j < i && rows[i].parent; ++j)
      if (std::string(rows[j].name) == rows[i].parent) parent = rows[j].cls;
    py::tuple bases = rows[i].builtin
                          ? py::make_tuple(py::handle(parent), py::handle(rows[i].builtin))
                          : py::make_tuple(py::handle(parent));
    rows[i].cls = new_exception(m, rows[i].name, bases, rows[i].doc);
  }
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const pto::Error& e) {
      size_t count = 0;
      ErrorClass* all = table(count);
      for (size_t i = count; i-- > 0;) {
        if (all[i].matches(e)) {
          PyErr_SetString(all[i].cls, e.what());
          return;
        }
      }
      PyErr_SetString(base_class, e.what());
    }
  });
}

}  // namespace pto::py
