#include "Buffers.h"

#include "dsl/Error.h"

namespace pto::py {

namespace py = pybind11;

namespace {
bool is_bfloat16(const py::dtype& dt) {
  return dt.kind() == 'V' && dt.itemsize() == 2 && py::str(dt.attr("name")).cast<std::string>() == "bfloat16";
}
}  // namespace

DType dtype_of(const py::dtype& dt, const std::string& what) {
  const char k = dt.kind();
  const auto size = dt.itemsize();
  if (k == 'b' && size == 1) return DType::Bool;
  if (k == 'i') {
    if (size == 1) return DType::I8;
    if (size == 2) return DType::I16;
    if (size == 4) return DType::I32;
    if (size == 8) return DType::I64;
  }
  if (k == 'u') {
    if (size == 1) return DType::U8;
    if (size == 2) return DType::U16;
    if (size == 4) return DType::U32;
    if (size == 8) return DType::U64;
  }
  if (k == 'f') {
    if (size == 2) return DType::F16;
    if (size == 4) return DType::F32;
    if (size == 8) return DType::F64;
  }
  if (is_bfloat16(dt)) return DType::BF16;
  throw DTypeError(what + ": numpy dtype " + py::str(static_cast<const py::handle&>(dt)).cast<std::string>() +
                   " is not supported; supported: bool, int8-64, uint8-64, float16, float32, float64, "
                   "ml_dtypes.bfloat16");
}

py::dtype numpy_dtype(DType t) {
  switch (t) {
    case DType::Bool: return py::dtype("bool");
    case DType::I8: return py::dtype("int8");
    case DType::I16: return py::dtype("int16");
    case DType::I32: return py::dtype("int32");
    case DType::I64: return py::dtype("int64");
    case DType::U8: return py::dtype("uint8");
    case DType::U16: return py::dtype("uint16");
    case DType::U32: return py::dtype("uint32");
    case DType::U64: return py::dtype("uint64");
    case DType::F16: return py::dtype("float16");
    case DType::F32: return py::dtype("float32");
    case DType::F64: return py::dtype("float64");
    case DType::BF16: return py::dtype::from_args(py::module_::import("ml_dtypes").attr("bfloat16"));
  }
  throw DTypeError("no numpy dtype for " + std::string(to_string(t)));
}

BufferRef view(const py::array& a, const std::string& what) {
  BufferRef b;
  b.dtype = dtype_of(a.dtype(), what);
  b.data = const_cast<void*>(a.data());
  const auto item = a.itemsize();
  for (py::ssize_t k = 0; k < a.ndim(); ++k) {
    b.shape.push_back(a.shape(k));
    if (a.strides(k) % item != 0)
      throw ShapeError(what + ": stride " + std::to_string(a.strides(k)) + " bytes of axis " + std::to_string(k) +
                       " is not a multiple of the element size " + std::to_string(item) + "; pass a copy");
    b.strides.push_back(a.strides(k) / item);
  }
  return b;
}

py::array empty_array(DType t, const std::vector<int64_t>& shape) {
  std::vector<py::ssize_t> s(shape.begin(), shape.end());
  return py::array(numpy_dtype(t), s);
}

}  // namespace pto::py
