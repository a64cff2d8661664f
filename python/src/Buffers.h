// numpy arrays <-> pto::BufferRef, without copies.
//
// An input array is viewed in place (its data pointer and strides go to the
// kernel); outputs are allocated as numpy arrays and the kernel writes into
// them. dtypes: bool, signed/unsigned 8-64 bit integers, float16/32/64 and
// bfloat16 as `ml_dtypes.bfloat16` (the numpy extension dtype JAX uses).
// Anything else is a DTypeError naming the argument and the supported dtypes.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <string>
#include <vector>

#include "backends/Jit.h"

namespace pto::py {

// The PTO element type of a numpy dtype; `what` names the argument in errors.
DType dtype_of(const pybind11::dtype& dt, const std::string& what);
// The numpy dtype for a PTO element type (bf16 -> ml_dtypes.bfloat16).
pybind11::dtype numpy_dtype(DType t);
// A view of `a` (no copy). Strides that are not a whole number of elements are a ShapeError.
BufferRef view(const pybind11::array& a, const std::string& what);
// A fresh, uninitialized array.
pybind11::array empty_array(DType t, const std::vector<int64_t>& shape);

}  // namespace pto::py
