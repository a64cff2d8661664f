// The parts of the `_pto` extension module, one function per layer.
#pragma once

#include <pybind11/pybind11.h>

#include "dsl/Shape.h"

namespace pto::py {

void bind_dsl(pybind11::module_& m);
void bind_schedules(pybind11::module_& m);
void bind_backends(pybind11::module_& m);
void bind_tuner(pybind11::module_& m);
void bind_debug(pybind11::module_& m);
void bind_frontends(pybind11::module_& m);

// Shapes cross the boundary as lists of int (static) or str (symbolic) dims.
Shape shape_from_py(const pybind11::sequence& s);
pybind11::list shape_to_py(const Shape& s);

}  // namespace pto::py
