// Python exception classes for pto::Error and its subclasses.
//
// Each C++ error type maps to a Python class that derives from both
// pypto.PtoError and the builtin a Python user expects: a shape mismatch is a
// ValueError, a dtype mismatch a TypeError, a refused allocation a MemoryError.
// So `except ValueError` works in ordinary code, `except pypto.PtoError` catches
// everything PTO raises, and the message (naming the argument, stage or
// operator) is the C++ one unchanged.
#pragma once

#include <pybind11/pybind11.h>

namespace pto::py {

void bind_errors(pybind11::module_& m);

}  // namespace pto::py
