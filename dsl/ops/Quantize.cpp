// Linear quantization (ONNX QuantizeLinear / DequantizeLinear):
//   quantize_linear:   y = saturate(round_half_even(x / scale) + zero_point)
//   dequantize_linear: y = (x - zero_point) * scale
// with the scale and zero point per tensor (one element), per axis (1-D
// along `axis`) or per block (the rank of x, `block_size` elements of `axis`
// sharing one). The quantized type is the zero point's, else `dtype`.
#include <cmath>

#include "dsl/ops/Ops.h"

namespace pto::ops {
namespace {

using Ins = std::vector<Tensor>;

// The index of a scale / zero-point tensor `q` at position `vars` of x.
std::vector<Expr> param_index(const std::string& op, const Tensor& x, const Tensor& q, int axis,
                              int64_t block, const std::vector<std::string>& vars) {
  int64_t n = 1;
  for (size_t d = 0; d < q.shape().size(); ++d) n *= static_dim(op, q, static_cast<int>(d));
  if (q.rank() == 0) return {};
  if (n == 1 && q.rank() == 1 && block == 0) return {Expr(0)};
  const int a = normalize_axis(op, axis, x.rank());
  const size_t ua = static_cast<size_t>(a);
  if (q.rank() == 1 && block == 0) {
    if (q.shape()[0] != x.shape()[ua])
      throw ShapeError(op + ": per-axis '" + q.name() + "' " + to_string(q.shape()) +
                       " must have one value per element of axis " + std::to_string(a) + " of '" +
                       x.name() + "' " + to_string(x.shape()));
    return {var(vars[ua])};
  }
  if (q.rank() != x.rank() || block <= 0)
    throw ShapeError(op + ": '" + q.name() + "' " + to_string(q.shape()) +
                     " must be one value, 1-D along axis " + std::to_string(a) +
                     ", or blocked (the rank of '" + x.name() + "' with block_size > 0)");
  std::vector<Expr> idx = vars_of(vars);
  const int64_t want = (static_dim(op, x, a) + block - 1) / block;
  if (static_dim(op, q, a) != want)
    throw ShapeError(op + ": blocked '" + q.name() + "' " + to_string(q.shape()) + " needs " +
                     std::to_string(want) + " blocks along axis " + std::to_string(a));
  idx[ua] = idx[ua] / static_cast<int>(block);
  return idx;
}

Tensor quantize(const Ins& in, const Attrs& a, const std::string& name) {
  const std::string op = "quantize_linear";
  const Tensor& x = in[0];
  require_float(op, x);
  const DType t = in.size() > 2 ? in[2].dtype() : a.dtype("dtype");
  if (!is_int(t))
    throw DTypeError(op + ": the quantized type " + std::string(to_string(t)) +
                     " must be an integer type");
  const int axis = a.get<int>("axis");
  const int64_t block = a.get<int64_t>("block_size");
  const auto vars = index_vars(static_cast<size_t>(x.rank()));
  const DType ft = x.dtype() == DType::F64 ? DType::F64 : DType::F32;
  const Expr s = cast(ft, in[1](param_index(op, x, in[1], axis, block, vars)));
  Expr q = unary(UnOp::Round, cast(ft, x(vars_of(vars))) / s);
  if (in.size() > 2) q = q + cast(ft, in[2](param_index(op, x, in[2], axis, block, vars)));
  const double lo = is_unsigned(t) ? 0 : -std::ldexp(1.0, bits(t) - 1);
  const double hi = std::ldexp(1.0, bits(t) - (is_unsigned(t) ? 0 : 1)) - 1;
  q = select(unary(UnOp::IsNan, q), make_const(0, ft),
             max(make_const(lo, ft), min(make_const(hi, ft), q)));  // saturate; NaN -> 0
  Program p = x.program();
  return p.define(name.empty() ? p.unique_name(op) : name, vars, x.shape(), cast(t, q),
                  OpKind::Elementwise, op);
}

Tensor dequantize(const Ins& in, const Attrs& a, const std::string& name) {
  const std::string op = "dequantize_linear";
  const Tensor& x = in[0];
  if (!is_int(x.dtype()))
    throw DTypeError(op + ": '" + x.name() + "' must be an integer type, is " +
                     std::string(to_string(x.dtype())));
  require_float(op, in[1]);
  const int axis = a.get<int>("axis");
  const int64_t block = a.get<int64_t>("block_size");
  const auto vars = index_vars(static_cast<size_t>(x.rank()));
  const DType ft = in[1].dtype();
  // x - zero_point in f32 is exact for 8- and 16-bit types; 32-bit ones go through f64.
  const DType wt = bits(x.dtype()) > 16 ? DType::F64 : DType::F32;
  Expr v = cast(wt, x(vars_of(vars)));
  if (in.size() > 2) v = v - cast(wt, in[2](param_index(op, x, in[2], axis, block, vars)));
  const Expr y = cast(ft, v * cast(wt, in[1](param_index(op, x, in[1], axis, block, vars))));
  Program p = x.program();
  return p.define(name.empty() ? p.unique_name(op) : name, vars, x.shape(), y, OpKind::Elementwise,
                  op);
}

}  // namespace

std::vector<OpInfo> quantize_ops() {
  using S = AttrType;
  return {
      {"quantize_linear",
       OpKind::Elementwise,
       "saturate(round(x / scale) + zero_point) to an integer type (x, scale, zero_point; axis, "
       "block_size, dtype)",
       2,
       3,
       {{"axis", S::Int, 1}, {"block_size", S::Int, 0}, {"dtype", S::DType, "u8"}},
       quantize},
      {"dequantize_linear",
       OpKind::Elementwise,
       "(x - zero_point) * scale, in the scale's type (x, scale, zero_point; axis, block_size)",
       2,
       3,
       {{"axis", S::Int, 1}, {"block_size", S::Int, 0}},
       dequantize},
  };
}

}  // namespace pto::ops
