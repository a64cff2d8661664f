// `_pto`: the pybind11 extension over the PTO C++ core. The Python package
// `pypto` (python/pypto) is written on top of it; nothing here is meant to be
// the user-facing API on its own. Schedules cross the boundary as JSON text
// (the schedule format is data), arrays through the buffer protocol without
// copies, and every pto::Error becomes a typed Python exception (Errors.h).
#include "Bindings.h"
#include "Errors.h"

PYBIND11_MODULE(_pto, m) {
  m.doc() = "PTO core bindings (use the pypto package)";
  pto::py::bind_errors(m);
  pto::py::bind_dsl(m);
  pto::py::bind_schedules(m);
  pto::py::bind_backends(m);
  pto::py::bind_tuner(m);
  pto::py::bind_debug(m);
  pto::py::bind_frontends(m);
}
